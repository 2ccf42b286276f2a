//! Indexes one block range: fetch → decode → recover → write, as three
//! concurrent stages joined by bounded channels, so fetching, recovering and
//! writing overlap and memory stays flat however long the range.
//!
//! ```text
//!  rpc.block_stream ─▶ [submit] ─pending(bounded)─▶ [collect] ─batches(1)─▶ [write]
//!                        │ chunks of txs                ▲ awaits chunks in order
//!                        └────────▶ recover::Pool ──────┘
//! ```
//!
//! Order is kept by construction: each block's chunks are queued in block
//! order and awaited in that order, whichever worker finishes first. This
//! module decides nothing about reorgs; it reports a parent mismatch as
//! [`Step::Reorg`] and lets the converge loop in `follow` handle it.
//!
//! Blocks arrive as JSON text and no `serde_json::Value` tree is built: the
//! submit stage reads the header fields and the byte ranges of the
//! transactions in one pass ([`split_block`]), every chunk shares the
//! block's text through an `Arc` (nothing is copied per transaction, not
//! even inline blob data), and the pool parses each transaction straight
//! from its slice.

use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context as _, anyhow, bail};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};

use super::Ctx;
use crate::decode::{B256, DecodeError, Tx, hex0x, parse_fixed, parse_u64};
use crate::recover::{RecoveredBlock, RecoveredTx, recover_tx};
use crate::store::StoreError;

/// Transactions per recovery job: ~3 ms of work, so queueing overhead is
/// noise, and a big block still spreads over every thread.
const CHUNK_TXS: usize = 64;

/// Blocks whose recovery is queued but not yet collected. The pool's own
/// permits bound the jobs; this bounds the headers and receivers.
const PENDING_BLOCKS: usize = 256;

/// How a range run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Every block of the range is committed.
    Done,
    /// Block `at` does not extend the stored chain (or its predecessor in
    /// the batch): the node's chain changed under us.
    Reorg { at: u64 },
    /// Shutdown was requested; every block fetched so far is committed.
    Shutdown,
}

type ChunkResult = Vec<Result<RecoveredTx, DecodeError>>;

/// The header fields a block row needs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct BlockHead {
    number: u64,
    hash: B256,
    parent_hash: B256,
    timestamp: u64,
}

struct Pending {
    header: BlockHead,
    tx_count: usize,
    chunks: Vec<oneshot::Receiver<ChunkResult>>,
}

/// A full block as the node sends it, borrowing from its text; fields the
/// index does not need are skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct BlockWire<'a> {
    #[serde(borrow)]
    number: Option<&'a str>,
    #[serde(borrow)]
    hash: Option<&'a str>,
    #[serde(borrow)]
    parent_hash: Option<&'a str>,
    #[serde(borrow)]
    timestamp: Option<&'a str>,
    #[serde(borrow, default)]
    transactions: Option<Vec<&'a RawValue>>,
}

/// Reads a full block's header and where each transaction's JSON lies in
/// `text` (byte ranges), without building a value tree.
fn split_block(text: &str) -> Result<(BlockHead, Vec<Range<usize>>), DecodeError> {
    let wire: BlockWire = serde_json::from_str(text)
        .map_err(|e| DecodeError::Json(format!("expected a block object: {e}")))?;
    fn field<'a>(name: &'static str, v: Option<&'a str>) -> Result<&'a str, DecodeError> {
        v.ok_or(DecodeError::Missing(name))
    }
    let head = BlockHead {
        number: parse_u64("number", field("number", wire.number)?)?,
        hash: parse_fixed("hash", field("hash", wire.hash)?)?,
        parent_hash: parse_fixed("parentHash", field("parentHash", wire.parent_hash)?)?,
        timestamp: parse_u64("timestamp", field("timestamp", wire.timestamp)?)?,
    };
    let base = text.as_ptr() as usize;
    let mut txs = Vec::new();
    for raw in wire.transactions.unwrap_or_default() {
        let tx = raw.get();
        // Hashes instead of objects: the node ignored `true`, or a proxy
        // rewrote the call. Say so rather than fail on every transaction.
        if !tx.starts_with('{') {
            let shown: String = tx.chars().take(80).collect();
            return Err(DecodeError::Field {
                field: "transactions",
                problem: "expected full transaction objects (eth_getBlockByNumber with true)",
                value: shown,
            });
        }
        // `raw` borrows from `text`, so its offset is a plain subtraction.
        let start = tx.as_ptr() as usize - base;
        txs.push(start..start + tx.len());
    }
    Ok((head, txs))
}

/// Decodes and recovers the transactions at `ranges` of a block's text, in
/// order. A malformed one yields its `DecodeError` in place; the rest go on.
fn recover_chunk(text: &str, ranges: &[Range<usize>]) -> ChunkResult {
    ranges
        .iter()
        .map(|r| {
            let tx = Tx::from_json(&text[r.clone()])?;
            let recovered = recover_tx(&tx);
            Ok(RecoveredTx { tx, recovered })
        })
        .collect()
}

pub async fn index_range(ctx: &Ctx, from: u64, to: u64) -> anyhow::Result<Step> {
    let (pending_tx, pending_rx) = mpsc::channel::<Pending>(PENDING_BLOCKS);
    let (batch_tx, batch_rx) = mpsc::channel::<Vec<RecoveredBlock>>(1);
    let last_written = AtomicU64::new(0);
    let submit = submit(ctx, from, to, pending_tx);
    let collect = collect(ctx, pending_rx, batch_tx);
    let write = write(ctx, batch_rx, &last_written);
    let (submitted, (), written) = tokio::try_join!(submit, collect, write)?;
    Ok(match written {
        Step::Reorg { at } => Step::Reorg { at },
        _ => submitted,
    })
}

/// Stage 1: pulls blocks in order and queues their transactions on the pool.
async fn submit(
    ctx: &Ctx,
    from: u64,
    to: u64,
    pending_tx: mpsc::Sender<Pending>,
) -> anyhow::Result<Step> {
    let mut shutdown = ctx.shutdown.clone();
    let mut blocks = std::sync::Arc::clone(&ctx.rpc).block_stream(from..=to);
    let mut expected = from;
    loop {
        let item = tokio::select! {
            biased;
            _ = shutdown.wait() => return Ok(Step::Shutdown),
            item = blocks.next() => item,
        };
        let text: Box<RawValue> = match item {
            None => return Ok(Step::Done),
            Some(result) => result?,
        };
        let (header, ranges) = split_block(text.get())
            .with_context(|| format!("block {expected}: malformed block from the node"))?;
        if header.number != expected {
            bail!(
                "block {expected}: the node returned block {} instead",
                header.number
            );
        }
        expected += 1;
        let tx_count = ranges.len();
        let text = Arc::new(text);
        let mut chunks = Vec::with_capacity(tx_count.div_ceil(CHUNK_TXS));
        for chunk in ranges.chunks(CHUNK_TXS) {
            let (text, chunk) = (Arc::clone(&text), chunk.to_vec());
            chunks.push(
                ctx.pool
                    .spawn(move || recover_chunk(text.get(), &chunk))
                    .await,
            );
        }
        let pending = Pending {
            header,
            tx_count,
            chunks,
        };
        if pending_tx.send(pending).await.is_err() {
            return Ok(Step::Done); // a later stage stopped; it reports why
        }
    }
}

/// Stage 2: awaits each block's chunks in order, verifies, and batches.
async fn collect(
    ctx: &Ctx,
    mut pending_rx: mpsc::Receiver<Pending>,
    batch_tx: mpsc::Sender<Vec<RecoveredBlock>>,
) -> anyhow::Result<()> {
    let limits = &ctx.settings.index;
    let mut batch: Vec<RecoveredBlock> = Vec::new();
    let mut batch_txs = 0;
    while let Some(p) = pending_rx.recv().await {
        let block = assemble(ctx, p).await?;
        batch_txs += block.txs.len();
        batch.push(block);
        let full = batch_txs >= limits.write_batch_txs || batch.len() >= limits.write_batch_blocks;
        if full {
            batch_txs = 0;
            if batch_tx.send(std::mem::take(&mut batch)).await.is_err() {
                return Ok(());
            }
        } else if pending_rx.is_empty() {
            // Nothing else is ready: hand over what we have if the writer is
            // idle, otherwise keep growing the batch while it works.
            match batch_tx.try_send(std::mem::take(&mut batch)) {
                Ok(()) => batch_txs = 0,
                Err(mpsc::error::TrySendError::Full(b)) => batch = b,
                Err(mpsc::error::TrySendError::Closed(_)) => return Ok(()),
            }
        }
    }
    if !batch.is_empty() {
        let _ = batch_tx.send(batch).await;
    }
    Ok(())
}

async fn assemble(ctx: &Ctx, p: Pending) -> anyhow::Result<RecoveredBlock> {
    let n = p.header.number;
    let mut txs = Vec::with_capacity(p.tx_count);
    for rx in p.chunks {
        let chunk = rx
            .await
            .map_err(|_| anyhow!("block {n}: a recovery job panicked"))?;
        for r in chunk {
            let i = txs.len();
            let rtx = r.with_context(|| {
                format!("block {n} tx {i}: malformed transaction from the node")
            })?;
            let Some(hash) = rtx.tx.hash else {
                bail!("block {n} tx {i}: the node gave no transaction hash");
            };
            let m = &ctx.metrics;
            match (&rtx.recovered.sender, &rtx.tx.from) {
                (Ok(sender), from) => {
                    m.recovered.inc();
                    if let Some(from) = from.filter(|f| f != sender) {
                        m.from_mismatches.inc();
                        tracing::warn!(target: "indexer::verify", block = n, tx = %hex0x(&hash), recovered = %hex0x(sender), node_from = %hex0x(&from), "sender differs from the node's from");
                        if ctx.settings.index.strict {
                            bail!(
                                "block {n} tx {}: recovered sender {} differs from the node's from {} (--strict)",
                                hex0x(&hash),
                                hex0x(sender),
                                hex0x(&from)
                            );
                        }
                    }
                }
                (Err(e), _) => {
                    m.unrecoverable.inc();
                    tracing::debug!(target: "indexer::verify", block = n, tx = %hex0x(&hash), error = %e, "unrecoverable sender");
                }
            }
            txs.push(rtx);
        }
    }
    // Every transaction of the block came back, in order (reth checks the same).
    if txs.len() != p.tx_count {
        bail!(
            "block {n}: recovered {} transactions of {}",
            txs.len(),
            p.tx_count
        );
    }
    Ok(RecoveredBlock {
        number: n,
        hash: p.header.hash,
        parent_hash: p.header.parent_hash,
        timestamp: p.header.timestamp,
        txs,
    })
}

/// Stage 3: commits each batch with the checkpoint.
async fn write(
    ctx: &Ctx,
    mut batch_rx: mpsc::Receiver<Vec<RecoveredBlock>>,
    last_written: &AtomicU64,
) -> anyhow::Result<Step> {
    let mut progress = ctx.progress.lock().await;
    while let Some(batch) = batch_rx.recv().await {
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
            continue;
        };
        let (first_n, last_n) = (first.number, last.number);
        match ctx.store.write_blocks(&batch).await {
            Ok(outcome) => {
                let m = &ctx.metrics;
                m.blocks.inc_by(batch.len() as u64);
                m.txs.inc_by(batch.iter().map(|b| b.txs.len() as u64).sum());
                m.set_indexed(last_n);
                last_written.store(last_n, Ordering::Relaxed);
                if outcome.blocks_replaced > 0 {
                    tracing::warn!(target: "indexer::store", first = first_n, last = last_n, replaced = outcome.blocks_replaced, "replaced stored blocks whose hash changed");
                }
                tracing::debug!(target: "indexer::store", first = first_n, last = last_n, ?outcome, "committed");
                progress.advance(batch.len() as u64, last_n);
            }
            Err(StoreError::ParentMismatch {
                number,
                parent,
                stored,
            }) => {
                tracing::info!(target: "indexer::reorg", block = number, parent = %parent, stored = %stored, "parent hash mismatch");
                return Ok(Step::Reorg { at: number });
            }
            Err(e) => {
                return Err(e)
                    .with_context(|| format!("blocks {first_n}..={last_n}: cannot write"));
            }
        }
    }
    Ok(Step::Done)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H1: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";
    const H2: &str = "0x2222222222222222222222222222222222222222222222222222222222222222";

    fn block(txs: &str) -> String {
        format!(
            r#"{{"number":"0x2a","hash":"{H1}","parentHash":"{H2}","timestamp":"0x64","uncles":[],"transactions":{txs},"size":"0x1"}}"#
        )
    }

    #[test]
    fn splits_header_and_transaction_slices() {
        let text = block(r#"[ {"hash":"0x01"} , {"nonce":"0x2","blobs":["0xabcd"]}]"#);
        let (head, ranges) = split_block(&text).unwrap();
        assert_eq!(
            head,
            BlockHead {
                number: 42,
                hash: [0x11; 32],
                parent_hash: [0x22; 32],
                timestamp: 100,
            }
        );
        let slices: Vec<_> = ranges.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(
            slices,
            [
                r#"{"hash":"0x01"}"#,
                r#"{"nonce":"0x2","blobs":["0xabcd"]}"#
            ]
        );
        for empty in ["[]", "null"] {
            assert!(split_block(&block(empty)).unwrap().1.is_empty(), "{empty}");
        }
    }

    #[test]
    fn malformed_blocks_name_the_problem() {
        let hashes = block(&format!(r#"["{H1}"]"#));
        let err = split_block(&hashes).unwrap_err().to_string();
        assert!(
            err.contains("expected full transaction objects (eth_getBlockByNumber with true)"),
            "{err}"
        );
        assert!(err.contains(H1), "{err}");
        let no_ts = block("[]").replace(r#""timestamp":"0x64","#, "");
        assert_eq!(
            split_block(&no_ts).unwrap_err(),
            DecodeError::Missing("timestamp")
        );
        let bad_hash = block("[]").replace(H1, "0x11");
        assert!(matches!(
            split_block(&bad_hash).unwrap_err(),
            DecodeError::Field { field: "hash", .. }
        ));
        let err = split_block("[1,2]").unwrap_err().to_string();
        assert!(
            err.starts_with("not a JSON object: expected a block object"),
            "{err}"
        );
    }

    #[test]
    fn a_malformed_transaction_fails_in_place() {
        // A hash among objects (a proxy mixing answers) is decoded like any
        // other entry and fails alone, with a decode error naming the JSON
        // problem; `assemble` adds block and index.
        let text = r#"[{"type":"0x0"},"0xab",{"type":"zz"}]"#;
        let ranges = [1..15, 16..22, 23..36];
        assert_eq!(&text[ranges[1].clone()], r#""0xab""#);
        let got = recover_chunk(text, &ranges);
        assert_eq!(got.len(), 3);
        assert!(got[0].is_ok(), "{:?}", got[0]);
        assert!(matches!(got[1], Err(DecodeError::Json(_))), "{:?}", got[1]);
        assert!(
            matches!(got[2], Err(DecodeError::Field { field: "type", .. })),
            "{:?}",
            got[2]
        );
    }
}
