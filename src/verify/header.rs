//! The block hash rebuilt from the header fields: keccak256 of the header's
//! RLP list, whose shape each fork extended (London's base fee, Shanghai's
//! withdrawals root, Cancun's blob gas and beacon root, Prague's requests
//! hash) and whose seal is proof of work's (mix hash, nonce) or, on Gnosis
//! before its merge, Aura's (step, signature). Pure; no I/O.
//!
//! The shape follows the fields the node sent, as a node decoding a header
//! does, not a fork schedule: any field added, dropped or changed changes
//! the hash, so a header that hashes to its `hash` is the header that was
//! sealed, whatever chain it is on.
//!
//! Also what a chain's header carries inside a hashed field: the L1 block
//! number in an Arbitrum Nitro `mixHash` ([`mix_hash_l1_block`]), and the
//! agreement of a committed L1 block number with the node's
//! ([`agreed_l1_block`]).

use alloy_rlp::{Encodable, Header};

use super::Failure;
use crate::chain::L1Origin;
use crate::decode::{BlockHeader, HeaderFields, Seal, keccak};

/// keccak256 of `header`'s RLP encoding.
pub fn header_hash(header: &BlockHeader) -> Result<[u8; 32], Failure> {
    let n = header.number;
    let f = fields(header)?;
    if f.ext_data_hash.is_some() {
        return coreth_header_hash(header);
    }
    let bloom = header
        .logs_bloom
        .as_deref()
        .ok_or_else(|| Failure::missing(n, "logsBloom"))?;
    let mut body = Vec::with_capacity(640 + f.extra_data.len());
    header.parent_hash.encode(&mut body);
    f.ommers_hash.encode(&mut body);
    f.beneficiary.encode(&mut body);
    f.state_root.encode(&mut body);
    f.transactions_root.encode(&mut body);
    f.receipts_root.encode(&mut body);
    bloom.encode(&mut body);
    f.difficulty.minimal().encode(&mut body);
    n.encode(&mut body);
    f.gas_limit.minimal().encode(&mut body);
    f.gas_used.minimal().encode(&mut body);
    header.timestamp.encode(&mut body);
    f.extra_data.as_slice().encode(&mut body);
    match &f.seal {
        Seal::Pow { mix_hash, nonce } => {
            mix_hash.encode(&mut body);
            nonce.encode(&mut body);
        }
        Seal::Aura { step, signature } => {
            step.minimal().encode(&mut body);
            signature.as_slice().encode(&mut body);
        }
    }
    // Each later fork's fields, in order; one may only follow another.
    let quantity = |v: &Option<crate::decode::U256>| v.as_ref().map(|v| v.minimal().to_vec());
    let hash = |h: &Option<[u8; 32]>| h.map(|h| h.to_vec());
    let tail: [(&str, Option<Vec<u8>>); 6] = [
        ("baseFeePerGas", quantity(&f.base_fee_per_gas)),
        ("withdrawalsRoot", hash(&f.withdrawals_root)),
        ("blobGasUsed", quantity(&f.blob_gas_used)),
        ("excessBlobGas", quantity(&f.excess_blob_gas)),
        ("parentBeaconBlockRoot", hash(&f.parent_beacon_block_root)),
        ("requestsHash", hash(&f.requests_hash)),
    ];
    let present = tail.iter().rposition(|(_, v)| v.is_some());
    for (i, (name, value)) in tail.iter().enumerate() {
        match value {
            Some(v) => v.as_slice().encode(&mut body),
            None if present.is_some_and(|last| i < last) => {
                return Err(Failure::new(
                    n,
                    *name,
                    "missing",
                    format!("a header with {} must have it", tail[present.unwrap()].0),
                ));
            }
            None => break,
        }
    }
    let mut head = Vec::with_capacity(4);
    Header {
        list: true,
        payload_length: body.len(),
    }
    .encode(&mut head);
    Ok(keccak(&[&head, &body]))
}

/// keccak256 of an Avalanche C-chain (coreth) header: the 15 legacy
/// fields, `extDataHash`, then baseFeePerGas, extDataGasUsed, blockGasCost,
/// blobGasUsed, excessBlobGas, parentBeaconBlockRoot, each optional in that
/// order (a later one needs those before it). Verified on blocks 13274596
/// and 30806757; the fields after blockGasCost are from coreth's source.
pub fn coreth_header_hash(header: &BlockHeader) -> Result<[u8; 32], Failure> {
    let n = header.number;
    let f = fields(header)?;
    let bloom = header
        .logs_bloom
        .as_deref()
        .ok_or_else(|| Failure::missing(n, "logsBloom"))?;
    let ext_data_hash = f
        .ext_data_hash
        .ok_or_else(|| Failure::missing(n, "extDataHash"))?;
    let Seal::Pow { mix_hash, nonce } = &f.seal else {
        return Err(Failure::new(
            n,
            "auraSeal",
            "an Aura seal",
            "an Avalanche header has mixHash and nonce",
        ));
    };
    let mut body = Vec::with_capacity(700 + f.extra_data.len());
    header.parent_hash.encode(&mut body);
    f.ommers_hash.encode(&mut body);
    f.beneficiary.encode(&mut body);
    f.state_root.encode(&mut body);
    f.transactions_root.encode(&mut body);
    f.receipts_root.encode(&mut body);
    bloom.encode(&mut body);
    f.difficulty.minimal().encode(&mut body);
    n.encode(&mut body);
    f.gas_limit.minimal().encode(&mut body);
    f.gas_used.minimal().encode(&mut body);
    header.timestamp.encode(&mut body);
    f.extra_data.as_slice().encode(&mut body);
    mix_hash.encode(&mut body);
    nonce.encode(&mut body);
    ext_data_hash.encode(&mut body);
    let quantity = |v: &Option<crate::decode::U256>| v.as_ref().map(|v| v.minimal().to_vec());
    let hash = |h: &Option<[u8; 32]>| h.map(|h| h.to_vec());
    let tail: [(&str, Option<Vec<u8>>); 6] = [
        ("baseFeePerGas", quantity(&f.base_fee_per_gas)),
        ("extDataGasUsed", quantity(&f.ext_data_gas_used)),
        ("blockGasCost", quantity(&f.block_gas_cost)),
        ("blobGasUsed", quantity(&f.blob_gas_used)),
        ("excessBlobGas", quantity(&f.excess_blob_gas)),
        ("parentBeaconBlockRoot", hash(&f.parent_beacon_block_root)),
    ];
    let present = tail.iter().rposition(|(_, v)| v.is_some());
    for (i, (name, value)) in tail.iter().enumerate() {
        match value {
            Some(v) => v.as_slice().encode(&mut body),
            None if present.is_some_and(|last| i < last) => {
                return Err(Failure::new(
                    n,
                    *name,
                    "missing",
                    format!("a header with {} must have it", tail[present.unwrap()].0),
                ));
            }
            None => break,
        }
    }
    let mut head = Vec::with_capacity(4);
    Header {
        list: true,
        payload_length: body.len(),
    }
    .encode(&mut head);
    Ok(keccak(&[&head, &body]))
}

/// The hashed fields of `header`, or a failure saying the node sent too
/// few to verify the block.
pub fn fields(header: &BlockHeader) -> Result<&HeaderFields, Failure> {
    header.fields.as_deref().ok_or_else(|| {
        Failure::missing(
            header.number,
            "header fields (stateRoot, transactionsRoot, receiptsRoot, …)",
        )
    })
}

/// The number of the L1 block an Arbitrum Nitro block was sequenced
/// against: bytes 8..16 of its `mixHash` (Nitro's header puts the send
/// count, the L1 block number and the ArbOS version there), which the
/// header hash commits to. `None` for a header without its fields.
pub fn mix_hash_l1_block(header: &BlockHeader) -> Option<u64> {
    let Some(Seal::Pow { mix_hash, .. }) = header.fields.as_deref().map(|f| &f.seal) else {
        return None;
    };
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&mix_hash[8..16]);
    Some(u64::from_be_bytes(bytes))
}

/// The L1 block number `committed` (found where `origin` says) once the
/// node's `l1BlockNumber`, when it sends one, is found equal to it: a
/// different number is a failure naming both.
pub fn agreed_l1_block(
    header: &BlockHeader,
    committed: Option<u64>,
    origin: L1Origin,
) -> Result<Option<u64>, Failure> {
    match (header.l1_block_number, committed) {
        (Some(reported), Some(committed)) if reported != committed => {
            let place = match origin {
                L1Origin::MixHash => "in mixHash",
                L1Origin::InfoDeposit(_) => "in the L1-attributes deposit",
                L1Origin::None => "committed",
            };
            Err(Failure::new(
                header.number,
                "l1BlockNumber",
                format!("{reported:#x}"),
                format!("{committed:#x} ({place})"),
            ))
        }
        _ => Ok(committed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mainnet_genesis_hashes_to_the_built_in_anchor() {
        // Mainnet block 0's header, field by field (geth's genesis).
        let z32 = format!("0x{}", "00".repeat(32));
        let empty_trie = "0x56e81f171bcc55a6ff8345e692c0f86e5b48e01b996cadc001622fb5e363b421";
        let genesis = serde_json::json!({
            "number": "0x0", "hash": z32, "parentHash": z32, "timestamp": "0x0",
            "sha3Uncles": "0x1dcc4de8dec75d7aab85b567b6ccd41ad312451b948a7413f0a142fd40d49347",
            "miner": format!("0x{}", "00".repeat(20)),
            "stateRoot": "0xd7f8974fb5ac78d9ac099b9ad5018bedc2ce0a72dad1827a1709da30580f0544",
            "transactionsRoot": empty_trie, "receiptsRoot": empty_trie,
            "logsBloom": format!("0x{}", "00".repeat(256)),
            "difficulty": "0x400000000", "gasLimit": "0x1388", "gasUsed": "0x0",
            "extraData": "0x11bbe8db4e347b4e8c937c1c8370e4b5ed33adb3db69cbdb7a38e1e50b1b82fa",
            "mixHash": z32, "nonce": "0x0000000000000042",
        });
        let header = BlockHeader::from_value(&genesis).unwrap();
        let want = crate::verify::builtin_genesis(1).unwrap().hash;
        assert_eq!(header_hash(&header).unwrap(), want);
        // A later fork's field without the ones before it is refused.
        let mut late = genesis.clone();
        late["withdrawalsRoot"] = serde_json::json!(empty_trie);
        late["requestsHash"] = serde_json::json!(empty_trie);
        let err = header_hash(&BlockHeader::from_value(&late).unwrap()).unwrap_err();
        assert_eq!(err.field, "baseFeePerGas", "{err}");
    }
}
