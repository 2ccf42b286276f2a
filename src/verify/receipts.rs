//! Receipts and logs against the block they are stored with: each receipt
//! must name this block (hash and number) and the transaction at its index
//! (hash and index), and so must each log, whether it came in a receipt or
//! from `eth_getLogs`; one that does not is a [`Rejection::Mismatch`] that
//! names the block, the transaction and both values, never a row stored
//! under the wrong transaction. Also: one receipt per transaction, and a
//! block's stored logs strictly ascending by index (the table's key).
//!
//! Pure: values in, a rejection out. Which logs are kept (the filters) is
//! decided by the caller, `check`.

use super::Rejection;
use crate::decode::{B256, BlockHeader, Log, Receipt, Tx, hex0x};

/// Returns a [`Rejection::Mismatch`].
macro_rules! mismatch {
    ($($t:tt)*) => {
        return Err(Rejection::Mismatch(format!($($t)*)))
    };
}

/// One receipt per transaction, or the block is refused.
pub fn check_count(header: &BlockHeader, txs: usize, receipts: usize) -> Result<(), Rejection> {
    if txs != receipts {
        mismatch!(
            "block {}: {receipts} receipts for {txs} transactions",
            header.number
        );
    }
    Ok(())
}

/// `receipt` belongs to transaction `i` (`tx`) of the block, and so does
/// each of its logs.
pub fn check_receipt(
    header: &BlockHeader,
    i: usize,
    tx: &Tx,
    receipt: &Receipt,
) -> Result<(), Rejection> {
    let n = header.number;
    let hash = |h: Option<[u8; 32]>| h.map_or("none".into(), |h| hex0x(&h));
    if receipt.block_hash.is_some_and(|h| h != header.hash) {
        mismatch!(
            "block {n} tx {i}: the receipt names block hash {}, the block is {}",
            hash(receipt.block_hash),
            hex0x(&header.hash)
        );
    }
    if receipt.block_number.is_some_and(|b| b != n) {
        mismatch!(
            "block {n} tx {i}: the receipt names block {}",
            receipt.block_number.unwrap_or_default()
        );
    }
    if receipt.transaction_hash.is_none() || receipt.transaction_hash != tx.hash {
        mismatch!(
            "block {n} tx {i}: the receipt is for transaction {}, the block's is {}",
            hash(receipt.transaction_hash),
            hash(tx.hash)
        );
    }
    if receipt.transaction_index.is_some_and(|t| t != i as u64) {
        mismatch!(
            "block {n} tx {i}: the receipt names transaction index {}",
            receipt.transaction_index.unwrap_or_default()
        );
    }
    for log in &receipt.logs {
        check_log(header, i, tx.hash, log)?;
    }
    Ok(())
}

/// Logs from `eth_getLogs` for a block whose transactions have `hashes`:
/// each must name one of them, at its index.
pub fn check_placed_logs(
    header: &BlockHeader,
    hashes: &[Option<B256>],
    logs: &[Log],
) -> Result<(), Rejection> {
    let n = header.number;
    for log in logs {
        let Some(i) = log.transaction_index.and_then(|i| usize::try_from(i).ok()) else {
            mismatch!(
                "block {n}: log {} names no transaction index",
                log.log_index
            );
        };
        let Some(&hash) = hashes.get(i) else {
            mismatch!(
                "block {n}: log {} names transaction {i}, the block has {}",
                log.log_index,
                hashes.len()
            );
        };
        check_log(header, i, hash, log)?;
    }
    Ok(())
}

/// Logs of one block, strictly ascending by index (the table's key).
pub fn check_log_order(header: &BlockHeader, logs: &[Log]) -> Result<(), Rejection> {
    if let Some(w) = logs.windows(2).find(|w| w[0].log_index >= w[1].log_index) {
        mismatch!(
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
) -> Result<(), Rejection> {
    let placed = log.block_hash.is_none_or(|h| h == header.hash)
        && log.block_number.is_none_or(|b| b == header.number)
        && log.transaction_hash.is_none_or(|h| Some(h) == tx_hash)
        && log.transaction_index.is_none_or(|t| t == i as u64);
    if !placed {
        mismatch!(
            "block {} tx {i}: log {} names another block or transaction",
            header.number,
            log.log_index
        );
    }
    Ok(())
}
