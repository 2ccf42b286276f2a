//! Receipts and logs against the block they are stored with: each receipt
//! must name this block (hash and number) and the transaction at its index
//! (hash and index), and so must each log, whether it came in a receipt or
//! from `eth_getLogs`; one that does not is an error that names the block,
//! the transaction and both values, never a row stored under the wrong
//! transaction. Logs outside the configured filters (`logs.addresses`,
//! `logs.topics0`) are dropped here. Pure: no I/O.

/// A receipt or log that does not belong to the block it came with: the
/// block is fetched again (a node behind or on another fork answered),
/// and only refused if that keeps happening.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Mismatch(pub String);

/// Returns a [`Mismatch`] error.
macro_rules! bail {
    ($($t:tt)*) => {
        return Err(anyhow::Error::new(Mismatch(format!($($t)*))))
    };
}

use crate::config::LogsSettings;
use crate::decode::{B256, BlockHeader, Log, Receipt, Tx, hex0x};

/// One receipt per transaction, or the block is refused.
pub fn check_count(header: &BlockHeader, txs: usize, receipts: usize) -> anyhow::Result<()> {
    if txs != receipts {
        bail!(
            "block {}: {receipts} receipts for {txs} transactions",
            header.number
        );
    }
    Ok(())
}

/// `receipt`, checked to belong to transaction `i` of the block, with the
/// logs the filters keep.
pub fn checked(
    header: &BlockHeader,
    i: usize,
    tx: &Tx,
    mut receipt: Receipt,
    filters: &LogsSettings,
) -> anyhow::Result<Receipt> {
    let n = header.number;
    let hash = |h: Option<[u8; 32]>| h.map_or("none".into(), |h| hex0x(&h));
    if receipt.block_hash.is_some_and(|h| h != header.hash) {
        bail!(
            "block {n} tx {i}: the receipt names block hash {}, the block is {}",
            hash(receipt.block_hash),
            hex0x(&header.hash)
        );
    }
    if receipt.block_number.is_some_and(|b| b != n) {
        bail!(
            "block {n} tx {i}: the receipt names block {}",
            receipt.block_number.unwrap_or_default()
        );
    }
    if receipt.transaction_hash.is_none() || receipt.transaction_hash != tx.hash {
        bail!(
            "block {n} tx {i}: the receipt is for transaction {}, the block's is {}",
            hash(receipt.transaction_hash),
            hash(tx.hash)
        );
    }
    if receipt.transaction_index.is_some_and(|t| t != i as u64) {
        bail!(
            "block {n} tx {i}: the receipt names transaction index {}",
            receipt.transaction_index.unwrap_or_default()
        );
    }
    for log in &mut receipt.logs {
        check_log(header, i, tx.hash, log)?;
        log.transaction_index = Some(i as u64);
    }
    receipt
        .logs
        .retain(|l| filters.keeps(&l.address, l.topics.first()));
    Ok(receipt)
}

/// Logs from `eth_getLogs` for a block whose transactions have `hashes`:
/// each must name one of them, at its index; those the filters keep, in
/// log-index order.
pub fn placed_logs(
    header: &BlockHeader,
    hashes: &[Option<B256>],
    mut logs: Vec<Log>,
    filters: &LogsSettings,
) -> anyhow::Result<Vec<Log>> {
    let n = header.number;
    for log in &logs {
        let Some(i) = log.transaction_index.and_then(|i| usize::try_from(i).ok()) else {
            bail!(
                "block {n}: log {} names no transaction index",
                log.log_index
            );
        };
        let Some(&hash) = hashes.get(i) else {
            bail!(
                "block {n}: log {} names transaction {i}, the block has {}",
                log.log_index,
                hashes.len()
            );
        };
        check_log(header, i, hash, log)?;
    }
    logs.retain(|l| filters.keeps(&l.address, l.topics.first()));
    logs.sort_by_key(|l| l.log_index);
    Ok(logs)
}

/// Logs of one block, strictly ascending by index (the table's key).
pub fn check_log_order(header: &BlockHeader, logs: &[Log]) -> anyhow::Result<()> {
    if let Some(w) = logs.windows(2).find(|w| w[0].log_index >= w[1].log_index) {
        bail!(
            "block {}: log index {} follows log index {}",
            header.number,
            w[1].log_index,
            w[0].log_index
        );
    }
    Ok(())
}

/// `log` belongs to transaction `i` (hash `tx_hash`) of the block.
fn check_log(
    header: &BlockHeader,
    i: usize,
    tx_hash: Option<B256>,
    log: &Log,
) -> anyhow::Result<()> {
    let placed = log.block_hash.is_none_or(|h| h == header.hash)
        && log.block_number.is_none_or(|b| b == header.number)
        && log.transaction_hash.is_none_or(|h| Some(h) == tx_hash)
        && log.transaction_index.is_none_or(|t| t == i as u64);
    if !placed {
        bail!(
            "block {} tx {i}: log {} names another block or transaction",
            header.number,
            log.log_index
        );
    }
    Ok(())
}
