//! The Merkle-Patricia roots a header commits to, rebuilt from what the
//! block holds: the transactions trie from each transaction's signed
//! encoding, the receipts trie from each receipt's consensus encoding
//! (status or pre-Byzantium state root, cumulative gas, bloom, logs; typed
//! receipts prefixed with their type), and the withdrawals trie. The tries
//! are built in `trie` (leaves hashed together, four at a time where the
//! CPU can; tests compare it with `alloy-trie`'s builder); the encodings
//! are built here with `alloy-rlp`. Pure; no I/O.

use alloy_rlp::{BufMut, EMPTY_STRING_CODE, Encodable, Header};

use crate::decode::{B256, Bloom, BloomCache, Log, Receipt, Withdrawal};

/// The root of the ordered trie (key: RLP of the index) of `items`, each
/// already encoded.
pub fn ordered_root<T: AsRef<[u8]>>(items: &[T]) -> B256 {
    super::trie::ordered_root(items)
}

/// A receipt as the receipts trie holds it, and its bloom: the node's own
/// `logsBloom` when it sent one, else rebuilt from its logs. The encoding
/// is only ever checked against the receipts root, which commits to the
/// bloom with the logs, so a bloom that does not belong to them is a
/// wrong root either way; taking the node's saves hashing every address
/// and topic again (6% of the indexer's instructions on the backfill
/// bench).
/// `None` when the receipt lacks a field the encoding needs (which is
/// named).
pub fn receipt_encoding(
    r: &Receipt,
    cache: &mut BloomCache,
) -> Result<(Vec<u8>, Bloom), &'static str> {
    let cumulative = r.cumulative_gas_used.ok_or("cumulativeGasUsed")?;
    let bloom = match r.logs_bloom.as_deref() {
        Some(node) => *node,
        None => {
            let mut bloom = [0u8; 256];
            for log in &r.logs {
                cache.add_log(&mut bloom, &log.address, &log.topics);
            }
            bloom
        }
    };
    let mut body = Vec::with_capacity(300 + r.logs.iter().map(log_len).sum::<usize>());
    match (&r.status, &r.root) {
        (Some(1), _) => 1u8.encode(&mut body),
        (Some(_), _) => body.put_u8(EMPTY_STRING_CODE),
        (None, Some(root)) => root.as_slice().encode(&mut body),
        (None, None) => return Err("status"),
    }
    cumulative.encode(&mut body);
    bloom.encode(&mut body);
    let logs_len: usize = r.logs.iter().map(log_len).sum();
    Header {
        list: true,
        payload_length: logs_len,
    }
    .encode(&mut body);
    for log in &r.logs {
        encode_log(log, &mut body);
    }
    op_deposit_tail(r, &mut body)?;
    let mut out = Vec::with_capacity(body.len() + 6);
    if r.tx_type != 0 {
        out.put_u8(r.tx_type);
    }
    Header {
        list: true,
        payload_length: body.len(),
    }
    .encode(&mut out);
    out.extend_from_slice(&body);
    Ok((out, bloom))
}

/// An OP Stack deposit receipt (type 0x7e) appends its depositNonce
/// (Regolith+) and depositReceiptVersion (Canyon+) to the list, each only
/// when present, as op-geth encodes it; a version without a nonce cannot
/// be encoded. Receipts without them (every other type, Scroll's 0x7e,
/// pre-Regolith deposits) are left as they are.
fn op_deposit_tail(r: &Receipt, body: &mut Vec<u8>) -> Result<(), &'static str> {
    if r.tx_type != 0x7e {
        return Ok(());
    }
    match (r.deposit_nonce, r.deposit_receipt_version) {
        (Some(nonce), version) => {
            nonce.encode(body);
            if let Some(v) = version {
                v.encode(body);
            }
            Ok(())
        }
        (None, Some(_)) => Err("depositNonce"),
        (None, None) => Ok(()),
    }
}

fn log_payload_len(log: &Log) -> usize {
    log.address.length() + log.topics.length() + log.data.as_slice().length()
}

fn log_len(log: &Log) -> usize {
    let p = log_payload_len(log);
    p + alloy_rlp::length_of_length(p)
}

fn encode_log(log: &Log, out: &mut Vec<u8>) {
    Header {
        list: true,
        payload_length: log_payload_len(log),
    }
    .encode(out);
    log.address.encode(out);
    log.topics.encode(out);
    log.data.as_slice().encode(out);
}

/// The withdrawals root (EIP-4895): the ordered trie of
/// `rlp([index, validatorIndex, address, amount])`.
pub fn withdrawals_root(ws: &[Withdrawal]) -> B256 {
    let encoded: Vec<Vec<u8>> = ws
        .iter()
        .map(|w| {
            let payload = w.index.length()
                + w.validator_index.length()
                + w.address.length()
                + w.amount.length();
            let mut out = Vec::with_capacity(payload + 2);
            Header {
                list: true,
                payload_length: payload,
            }
            .encode(&mut out);
            w.index.encode(&mut out);
            w.validator_index.encode(&mut out);
            w.address.encode(&mut out);
            w.amount.encode(&mut out);
            out
        })
        .collect();
    ordered_root(&encoded)
}
