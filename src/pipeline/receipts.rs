//! Receipts against the block they are stored with: each must name this
//! block (hash and number) and the transaction at its index (hash and
//! index), and so must each of its logs; a receipt that does not is an
//! error that names the block, the transaction and both values, never a
//! row stored under the wrong transaction. Logs outside the configured
//! filters (`logs.addresses`, `logs.topics0`) are dropped here. Pure: no
//! I/O.

use anyhow::bail;

use crate::config::LogsSettings;
use crate::decode::{BlockHeader, Receipt, Tx, hex0x};

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
    for log in &receipt.logs {
        let placed = log.block_hash.is_none_or(|h| h == header.hash)
            && log.transaction_hash.is_none_or(|h| Some(h) == tx.hash)
            && log.transaction_index.is_none_or(|t| t == i as u64);
        if !placed {
            bail!(
                "block {n} tx {i}: log {} names another block or transaction",
                log.log_index
            );
        }
    }
    receipt
        .logs
        .retain(|l| filters.keeps(&l.address, l.topics.first()));
    Ok(receipt)
}
