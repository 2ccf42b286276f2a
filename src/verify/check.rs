//! The one question the pipeline asks about a block: here is a block and
//! everything that came with it (its transactions with their receipts, the
//! encodings computed on the recovery threads, logs from `eth_getLogs`);
//! may it be stored? [`check`] answers with the block as it will be stored
//! or a typed [`Rejection`], and the pipeline decides from that alone
//! whether to fetch the block again or stop.
//!
//! Every check of a block runs from here, in the order a reader finds the
//! fields: one receipt per transaction, each receipt and its logs
//! belonging to its transaction, log indexes, each transaction's hash and
//! the node's `from`, then (at `verify = "full"`) the whole block against
//! its header and the header against its hash and anchors, then the logs
//! that will be stored. Pure: no I/O, no metrics (the pipeline counts what
//! it gets back).

use super::{
    Anchors, Failure, Level, ReceiptProof, Rejection, TxParts, TxProof, check_block,
    check_log_indexes, receipts,
};
use super::{BlockScope, TxScope};
use crate::block::{Block, BlockTx, RecoverError, Recovered};
use crate::chain::{Chain, L1Origin, ReceiptEncoding, SenderSource, TxHashing};
use crate::config::LogsSettings;
use crate::decode::{BlockHeader, Log, PayloadError, hex0x};

/// A block as the pipeline assembled it, not yet checked.
pub struct Unchecked {
    pub header: BlockHeader,
    /// Its transactions in order, each with its receipt when receipts were
    /// fetched and there was one per transaction.
    pub txs: Vec<BlockTx>,
    /// How many receipts came with the block, when receipts are fetched.
    pub receipt_count: Option<usize>,
    /// Logs from `eth_getLogs`, when logs are fetched that way.
    pub got_logs: Option<Vec<Log>>,
    /// The encodings the block is verified with, one per transaction
    /// (and per receipt): present at `verify = "full"`.
    pub proofs: Option<Proofs>,
}

/// What the recovery threads computed for verification, in block order.
#[derive(Default)]
pub struct Proofs {
    pub txs: Vec<Result<TxProof, PayloadError>>,
    /// Empty when receipts are not fetched.
    pub receipts: Vec<Result<ReceiptProof, &'static str>>,
}

/// What a block is checked with.
pub struct Rules<'a> {
    pub level: Level,
    /// A sender that differs from the node's `from` stops the run.
    pub strict: bool,
    /// Which logs are stored.
    pub filters: &'a LogsSettings,
    /// Hashes blocks must have: trusted blocks and stored neighbours.
    pub anchors: &'a Anchors,
    /// The chain, whose profile says which types exist and what can be
    /// verified.
    pub chain: Chain,
}

/// A block that may be stored, and what the pipeline reports about it.
pub struct Checked {
    pub block: Block,
    /// Transactions whose recovered sender differs from the node's `from`
    /// (allowed unless `strict`; logged and counted by the caller).
    pub from_mismatches: Vec<usize>,
}

/// Checks `block` with `rules`: the block as it will be stored (logs
/// filtered, each placed at its transaction), or why not.
pub fn check(block: Unchecked, rules: &Rules<'_>) -> Result<Checked, Rejection> {
    let Unchecked {
        header,
        mut txs,
        receipt_count,
        got_logs,
        proofs,
    } = block;
    let n = header.number;
    if let Some(k) = receipt_count {
        receipts::check_count(&header, txs.len(), k)?;
    }
    let scopes = tx_scopes(&header, &mut txs, rules.chain)?;
    let full = rules.level == Level::Full;
    let mut next_log = 0;
    let mut from_mismatches = Vec::new();
    for t in txs.iter_mut() {
        t.void_authorizations =
            t.tx.authorization_list
                .iter()
                .zip(&t.recovered.authorities)
                .map(|(a, authority)| super::authorization_void(a, authority, rules.chain.id))
                .collect();
    }
    for (i, t) in txs.iter().enumerate() {
        if receipt_count.is_some() {
            let receipt = t
                .receipt
                .as_ref()
                .ok_or_else(|| Rejection::Refused(format!("block {n} tx {i}: no receipt")))?;
            if full {
                check_log_indexes(n, i, receipt, &mut next_log)?;
            }
            receipts::check_receipt(&header, i, &t.tx, receipt)?;
        }
        let Some(hash) = t.tx.hash else {
            return Err(Rejection::Refused(format!(
                "block {n} tx {i}: the node gave no transaction hash"
            )));
        };
        if let (Ok(sender), Some(from), SenderSource::Recovered) =
            (&t.recovered.sender, t.tx.from, t.recovered.source)
            && *sender != from
        {
            if rules.strict {
                return Err(Rejection::Refused(format!(
                    "block {n} tx {}: recovered sender {} differs from the node's from {} (--strict)",
                    hex0x(&hash),
                    hex0x(sender),
                    hex0x(&from)
                )));
            }
            from_mismatches.push(i);
        }
    }
    let mut verified = rules.level;
    let mut l1_block_number = None;
    if full {
        let proofs = proofs.unwrap_or_default();
        let profile = rules.chain.profile();
        let scope = BlockScope {
            verifiable: profile.verifiable_at(rules.chain.id, n),
            withdrawals_root_is_storage_root: profile.withdrawals_root_is_storage_root(&header),
            tips_paid: profile.tips_paid,
        };
        verified = check_contents(&header, &txs, &scopes, &proofs, got_logs.as_deref(), &scope)?;
        // Only a block verified in full commits it: below Arbitrum One's
        // Nitro genesis (header-only) the mixHash holds no L1 block number,
        // and an unchecked deposit's calldata is the node's word.
        if verified == Level::Full {
            let committed = match profile.l1_origin {
                L1Origin::None => None,
                L1Origin::MixHash => super::header::mix_hash_l1_block(&header),
                L1Origin::InfoDeposit(deposit) => txs.first().and_then(|t| deposit.l1_block(&t.tx)),
            };
            l1_block_number =
                super::header::agreed_l1_block(&header, committed, profile.l1_origin)?;
        }
        rules.anchors.check(&header)?;
    }
    let logs = match got_logs {
        Some(mut got) => {
            let hashes: Vec<_> = txs.iter().map(|t| t.tx.hash).collect();
            receipts::check_placed_logs(&header, &hashes, &got)?;
            got.retain(|l| rules.filters.keeps(&l.address, l.topics.first()));
            got.sort_by_key(|l| l.log_index);
            got
        }
        None => {
            let mut logs = Vec::new();
            for (i, t) in txs.iter_mut().enumerate() {
                if let Some(r) = t.receipt.as_mut() {
                    for mut log in r.logs.drain(..) {
                        if rules.filters.keeps(&log.address, log.topics.first()) {
                            log.transaction_index = Some(i as u64);
                            logs.push(log);
                        }
                    }
                }
            }
            logs
        }
    };
    receipts::check_log_order(&header, &logs)?;
    Ok(Checked {
        block: Block {
            header,
            txs,
            logs,
            verified,
            l1_block_number,
        },
        from_mismatches,
    })
}

/// What the chain's profile lets be checked of each transaction of the
/// block: a type it does not know stops the run, naming the type, the
/// block, the chain and the setting; a pseudo-transaction is marked as
/// having no sender.
fn tx_scopes(
    header: &BlockHeader,
    txs: &mut [BlockTx],
    chain: Chain,
) -> Result<Vec<TxScope>, Rejection> {
    let profile = chain.profile();
    txs.iter_mut()
        .map(|t| {
            if profile.pseudo_tx(&t.tx, header).is_some() {
                t.recovered = Recovered {
                    sender: Err(RecoverError::NoSender),
                    source: SenderSource::None,
                    authorities: Vec::new(),
                };
                return Ok(TxScope::Outside);
            }
            let rule = profile
                .require(t.tx.tx_type, header.number, chain.id)
                .map_err(|e| Rejection::Refused(e.to_string()))?;
            let reported =
                rule.hashing == TxHashing::Reported || rule.receipt == ReceiptEncoding::Unchecked;
            Ok(if reported {
                TxScope::Reported
            } else {
                TxScope::Full
            })
        })
        .collect()
}

/// [`check_block`] over the transactions and their proofs; the level the
/// block reached.
fn check_contents(
    header: &BlockHeader,
    txs: &[BlockTx],
    scopes: &[TxScope],
    proofs: &Proofs,
    got_logs: Option<&[Log]>,
    scope: &BlockScope,
) -> Result<Level, Failure> {
    let missing: Result<TxProof, PayloadError> = Err(PayloadError::Missing("encoding", 0));
    let parts: Vec<TxParts<'_>> = txs
        .iter()
        .enumerate()
        .map(|(i, t)| TxParts {
            tx: &t.tx,
            proof: proofs.txs.get(i).unwrap_or(&missing),
            sender: t.recovered.sender.as_ref().ok(),
            receipt: t.receipt.as_ref().zip(proofs.receipts.get(i)),
            rule: scopes[i],
        })
        .collect();
    check_block(header, &parts, got_logs, scope)?;
    Ok(scope.level(&parts))
}
