//! Indexes one block range: fetch → decode → recover → write, as three
//! concurrent stages joined by bounded channels, so fetching, recovering and
//! writing overlap and memory stays flat however long the range.
//!
//! ```text
//!  source.blocks ─▶ [submit] ─pending(bounded)─▶ [collect] ─batch, when asked─▶ [write] ─▶ sink
//!                     │ chunks of txs                ▲ awaits chunks in order
//!                     └────────▶ recover::Pool ──────┘
//! ```
//!
//! What a range holds at once is bounded whatever the speed of each stage:
//! the source's window of batches in flight, [`PENDING_BLOCKS`] blocks (and
//! [`PENDING_TXS`] transactions) queued or recovered but not collected, the
//! batch being gathered (about `index.write_batch_txs` at most) and the
//! one being written. The writer asks for each batch when it is idle and
//! takes what is gathered; a full batch waits for it to ask, and the stages
//! before stop behind it.
//!
//! Each block is put together from its jobs' results and handed to
//! [`verify::check`] once, which answers with the block to store or a
//! typed [`Rejection`]. One that is not fatal (the block does not verify,
//! does not decode, or its receipts or logs do not match it: another
//! fork's, a node behind, a bad replica) has the block fetched again,
//! alone ([`Source::block`](crate::source::Source::block)), with a pause
//! between fetches, for as long as [`refetch`](super::refetch) says: the
//! same wrong answer again and again, or `index.refetch_budget_ms` spent,
//! stops the run with an error that names the block, the field and both
//! values; the blocks before it are committed. This module checks nothing
//! itself, and decides nothing about refetching.
//!
//! Order is kept by construction: each block's chunks are queued in block
//! order and awaited in that order, whichever worker finishes first. This
//! module decides nothing about reorgs; it reports a parent mismatch as
//! [`Step::Reorg`] and lets the converge loop in `follow` handle it.
//!
//! Blocks arrive from the [`Source`](crate::source::Source) already split
//! ([`RawBlock`]): header fields, and byte ranges of the transactions in
//! the response text, read in the same pass that parsed the response (the
//! rpc source; others build the same shape). No `serde_json::Value` tree
//! is built, every chunk shares that text through an `Arc` (nothing is
//! copied per block or per transaction, not even inline blob data), and
//! the pool parses each transaction straight from its slice.

use std::ops::RangeInclusive;
use std::sync::Arc;

use anyhow::{Context as _, bail};
use futures::StreamExt;
use futures::stream::BoxStream;
use tokio::sync::{mpsc, oneshot};

use super::Ctx;
use super::refetch::{Next, Refetch, answer_text};
use crate::block::{Block, BlockTx};
use crate::chain::{Chain, Family};
use crate::decode::{
    BlockHeader, BloomCache, DecodeError, Log, PayloadError, RawBlock, Receipt, hex0x,
    receipts_from_slices,
};
use crate::metrics::Metrics;
use crate::recover::recover_slices_with;
use crate::sink::Written;
use crate::verify::{self, Anchors, Level, Proofs, ReceiptProof, Rejection, TxProof, Unchecked};

/// Transactions per recovery job: ~3 ms of work, so queueing overhead is
/// noise, and a big block still spreads over every thread.
const CHUNK_TXS: usize = 64;

/// Blocks whose recovery is queued but not yet collected. The pool's own
/// permits bound the jobs; this bounds the headers and receivers.
const PENDING_BLOCKS: usize = 256;

/// Transactions queued or recovered but not yet collected: the bound on
/// finished results (with their receipts and logs) waiting for a writer
/// that is slower than recovery, whatever the size of the blocks. About
/// 0.4 s of recovery on two cores; a block larger than this takes them all.
pub const PENDING_TXS: usize = 16_384;

/// How a range run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Every block of the range is committed.
    Done,
    /// Block `at` does not extend the stored chain (or its predecessor in
    /// the batch): the node's chain changed under us.
    Reorg { at: u64 },
    /// Shutdown was requested; every block fetched so far is committed.
    Shutdown,
    /// The range's segment lease ended before it was written whole (see
    /// [`Written::LeaseEnded`]); what was written before stays.
    LeaseEnded { first: u64, reason: String },
}

/// One job's outcome: its transactions, recovered, and their receipts
/// (empty when receipts are not fetched), decoded on the same thread, each
/// with its consensus encoding when blocks are verified.
type ChunkResult = (
    Vec<Result<(BlockTx, Option<TxCheck>), DecodeError>>,
    Vec<Result<(Receipt, Option<ReceiptCheck>), DecodeError>>,
);

type TxCheck = Result<TxProof, PayloadError>;
type ReceiptCheck = Result<ReceiptProof, &'static str>;

/// The work of one recovery job: decode and recover the transactions at
/// `ranges` of `text`, decode their receipts, and when `prove`, encode
/// both for verification.
fn chunk_job(
    text: &str,
    ranges: &[std::ops::Range<usize>],
    receipts: Option<(&str, &[std::ops::Range<usize>])>,
    family: Family,
    prove: bool,
) -> ChunkResult {
    let mut cache = BloomCache::default();
    let decoded = match receipts {
        Some((text, ranges)) => receipts_from_slices(text, ranges)
            .into_iter()
            .map(|r| {
                r.map(|r| {
                    let proof = prove.then(|| verify::receipt_proof(&r, &mut cache));
                    (r, proof)
                })
            })
            .collect(),
        None => Vec::new(),
    };
    let txs = recover_slices_with(text, ranges, family, |tx| {
        prove.then(|| tx.signed_encoding())
    });
    if !prove {
        let txs = txs
            .into_iter()
            .map(|r| r.map(|(tx, _)| (tx, None)))
            .collect();
        return (txs, decoded);
    }
    // The transactions' hashes, all at once (four at a time where the CPU
    // can), in place of one by one.
    let mut encodings = Vec::with_capacity(txs.len());
    let txs: Vec<_> = txs
        .into_iter()
        .map(|r| {
            r.map(|(tx, encoding)| {
                encodings.extend(encoding);
                tx
            })
        })
        .collect();
    let mut proofs = verify::tx_proofs(encodings).into_iter();
    let txs = txs
        .into_iter()
        .map(|r| r.map(|tx| (tx, proofs.next())))
        .collect();
    (txs, decoded)
}

struct Pending {
    header: BlockHeader,
    tx_count: usize,
    /// How many receipts came with the block, if they were fetched.
    receipt_count: Option<usize>,
    /// Logs from `eth_getLogs` came with the block.
    logs: Option<Vec<Log>>,
    chunks: Vec<oneshot::Receiver<ChunkResult>>,
    /// The last block of its range: the batch it is in ends with it.
    ends_range: bool,
    /// Its share of [`PENDING_TXS`], given back once collected (none for
    /// a block fetched again).
    _permit: Option<tokio::sync::OwnedSemaphorePermit>,
}

/// Indexes `from..=to`; each block must agree with `anchors` (the run's
/// trusted blocks and stored neighbours, from [`verify::link`]).
pub async fn index_range(ctx: &Ctx, anchors: &Anchors, from: u64, to: u64) -> anyhow::Result<Step> {
    let one = futures::stream::once(async move { Ok(from..=to) }).boxed();
    index_ranges(ctx, anchors, one).await
}

/// Ranges one pipeline indexes one after the other. The next is pulled
/// once the one before is fetched whole, while its tail is still being
/// recovered and written: a leased backfill takes its next segment as late
/// as it can and still never lets the pipeline drain between segments.
pub type Ranges<'a> = BoxStream<'a, anyhow::Result<RangeInclusive<u64>>>;

/// Indexes each of `ranges` in turn, through one pipeline; a write batch
/// never spans two of them (a leased segment is written under its own
/// lease). Ends [`Step::Done`] when `ranges` ends.
pub async fn index_ranges(
    ctx: &Ctx,
    anchors: &Anchors,
    ranges: Ranges<'_>,
) -> anyhow::Result<Step> {
    let (pending_tx, pending_rx) = mpsc::channel::<Pending>(PENDING_BLOCKS);
    let (ask_tx, ask_rx) = mpsc::channel::<Ask>(1);
    let submit = submit(ctx, ranges, pending_tx);
    let collect = collect(ctx, anchors, pending_rx, ask_rx);
    let write = write(ctx, ask_tx);
    let (submitted, collected, written) = tokio::try_join!(submit, collect, write)?;
    Ok(match (written, collected) {
        (Step::Done, Step::Done) => submitted,
        (Step::Done, collected) => collected,
        (ended, _) => ended,
    })
}

/// Stage 1: pulls blocks in order and queues their transactions on the pool.
async fn submit(
    ctx: &Ctx,
    mut ranges: Ranges<'_>,
    pending_tx: mpsc::Sender<Pending>,
) -> anyhow::Result<Step> {
    let mut shutdown = ctx.shutdown.clone();
    let budget = Arc::new(tokio::sync::Semaphore::new(PENDING_TXS));
    // Not raced with shutdown (a lease taken is recorded before it is
    // seen); the next range's first block is.
    while let Some(range) = ranges.next().await {
        let range = range?;
        let (from, to) = (*range.start(), *range.end());
        let mut blocks = Arc::clone(&ctx.source).blocks(range);
        let mut expected = from;
        loop {
            let item = tokio::select! {
                biased;
                _ = shutdown.wait() => return Ok(Step::Shutdown),
                item = blocks.next() => item,
            };
            let block: RawBlock = match item {
                None => break,
                Some(result) => result?,
            };
            // The source promises each block is the one asked for; this
            // checks the stream against the range, so no block is skipped
            // or repeated.
            if block.header.number != expected {
                bail!(
                    "block {expected}: the node returned block {} instead",
                    block.header.number
                );
            }
            expected += 1;
            let wanted = block.txs.len().clamp(1, PENDING_TXS) as u32;
            let permit = tokio::select! {
                biased;
                _ = shutdown.wait() => return Ok(Step::Shutdown),
                p = Arc::clone(&budget).acquire_many_owned(wanted) => p.expect("never closed"),
            };
            let mut pending = queue(ctx, block, Some(permit)).await?;
            pending.ends_range = expected > to;
            if pending_tx.send(pending).await.is_err() {
                return Ok(Step::Done); // a later stage stopped; it reports why
            }
        }
        if expected <= to {
            bail!("block {expected}: the source ended the range {from}..={to} before it");
        }
    }
    Ok(Step::Done)
}

/// Queues `block`'s transactions (and receipts) on the pool, in chunks.
async fn queue(
    ctx: &Ctx,
    block: RawBlock,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> anyhow::Result<Pending> {
    let RawBlock {
        text,
        header,
        txs,
        receipts,
        logs,
    } = block;
    let tx_count = txs.len();
    // A count that does not match is reported (and the block fetched
    // again) when it is collected; its receipts are not decoded.
    let receipt_count = receipts.as_ref().map(|r| r.ranges.len());
    let receipts = receipts.filter(|r| r.ranges.len() == tx_count);
    let mut chunks = Vec::with_capacity(tx_count.div_ceil(CHUNK_TXS));
    for (c, chunk) in txs.chunks(CHUNK_TXS).enumerate() {
        let (text, chunk) = (Arc::clone(&text), chunk.to_vec());
        let receipts = receipts.as_ref().map(|r| {
            let end = ((c + 1) * CHUNK_TXS).min(r.ranges.len());
            (Arc::clone(&r.text), r.ranges[c * CHUNK_TXS..end].to_vec())
        });
        let prove = ctx.verify.level == Level::Full;
        let family = ctx.chain.family;
        let job = move || {
            let receipts = receipts.as_ref().map(|(t, r)| (t.as_str(), r.as_slice()));
            chunk_job(&text, &chunk, receipts, family, prove)
        };
        chunks.push(ctx.pool.spawn(job).await);
    }
    let pending = Pending {
        header,
        tx_count,
        receipt_count,
        logs,
        chunks,
        ends_range: false,
        _permit: permit,
    };
    Ok(pending)
}

/// The writer's request for the next batch, sent when it is idle: a batch
/// is handed over only to a writer that asks, so none waits between the
/// stages (at most one is written while the next is gathered).
type Ask = oneshot::Sender<Vec<Block>>;

/// Stage 2: awaits each block's chunks in order, verifies, and batches:
/// the writer gets what is gathered when it asks, and a full batch (or one
/// that ends a range) waits for it to ask.
/// [`Step::Shutdown`] when shutdown came while a block was being fetched
/// again: the blocks before it are handed on, it and those after it not.
async fn collect(
    ctx: &Ctx,
    anchors: &Anchors,
    mut pending_rx: mpsc::Receiver<Pending>,
    mut asks: mpsc::Receiver<Ask>,
) -> anyhow::Result<Step> {
    let limits = &ctx.index;
    let mut batch: Vec<Block> = Vec::new();
    let mut batch_txs = 0;
    let mut ends_range = false;
    let mut asked: Option<Ask> = None;
    let mut ended = Step::Done;
    loop {
        if !batch.is_empty() {
            let full = ends_range
                || batch_txs >= limits.write_batch_txs.get()
                || batch.len() >= limits.write_batch_blocks.get();
            if asked.is_none() {
                asked = if full {
                    match asks.recv().await {
                        Some(ask) => Some(ask),
                        None => return Ok(Step::Done), // the writer stopped; it reports why
                    }
                } else {
                    asks.try_recv().ok()
                };
            }
            if let Some(ask) = asked.take() {
                (batch_txs, ends_range) = (0, false);
                if ask.send(std::mem::take(&mut batch)).is_err() {
                    return Ok(Step::Done);
                }
                continue;
            }
        }
        // The next block; or, while it is not ready, the writer asking for
        // what is gathered.
        let p = tokio::select! {
            biased;
            p = pending_rx.recv() => p,
            ask = asks.recv(), if !batch.is_empty() => match ask {
                Some(ask) => {
                    asked = Some(ask);
                    continue;
                }
                None => return Ok(Step::Done),
            },
        };
        let Some(p) = p else { break };
        let n = p.header.number;
        ends_range = p.ends_range;
        let block = match assemble(ctx, anchors, p).await {
            Ok(b) => b,
            Err(r) if !r.is_fatal() => match refetched(ctx, anchors, n, r).await? {
                Some(b) => b,
                None => {
                    ended = Step::Shutdown;
                    break;
                }
            },
            Err(r) => return Err(r.into()),
        };
        batch_txs += block.txs.len();
        batch.push(block);
    }
    if !batch.is_empty() {
        let ask = match asked {
            Some(ask) => Some(ask),
            None => asks.recv().await,
        };
        if let Some(ask) = ask {
            let _ = ask.send(batch);
        }
    }
    Ok(ended)
}

/// Block `n` fetched again and assembled, after `first` (a rejection that
/// is not fatal), for as long as [`Refetch`] says, with its pauses; `None`
/// when shutdown comes first. Stops with the last rejection, under why.
async fn refetched(
    ctx: &Ctx,
    anchors: &Anchors,
    n: u64,
    first: Rejection,
) -> anyhow::Result<Option<Block>> {
    let m = &ctx.metrics;
    let mut shutdown = ctx.shutdown.clone();
    let mut tries = Refetch::new(ctx.index.refetch_budget);
    let mut last = first;
    loop {
        let decision = tries.wrong(answer_text(&last), tokio::time::Instant::now());
        m.wrong_answers.inc();
        if decision.distinct {
            m.distinct_wrong_answers.inc();
        }
        let (after, refetch) = match decision.next {
            Next::Again { after, refetch } => (after, refetch),
            stop => {
                m.refetch_stops.inc();
                let why = tries.stop_reason(n, &stop);
                return Err(anyhow::Error::new(last).context(why));
            }
        };
        tracing::warn!(target: "indexer::verify", block = n, attempt = refetch, after_ms = after.as_millis() as u64, error = %last, "block does not verify, does not decode, or its receipts or logs do not match it; fetching it again");
        tokio::select! {
            biased;
            _ = shutdown.wait() => return Ok(None),
            _ = tokio::time::sleep(after) => {}
        }
        m.refetches.inc();
        let Some(raw) = ctx.source.block(n).await? else {
            bail!("block {n}: the node no longer has it (while fetching it again after: {last})");
        };
        if raw.header.number != n {
            bail!(
                "block {n}: the node returned block {} instead",
                raw.header.number
            );
        }
        match assemble(ctx, anchors, queue(ctx, raw, None).await?).await {
            Ok(b) => {
                m.right_after_refetch.inc();
                tracing::info!(target: "indexer::verify", block = n, refetches = refetch, "block verified after fetching it again");
                return Ok(Some(b));
            }
            Err(r) if !r.is_fatal() => last = r,
            Err(r) => return Err(r.into()),
        }
    }
}

/// Waits for `p`'s jobs, puts the block together and asks
/// [`verify::check`] about it; counts and logs what it answers.
async fn assemble(ctx: &Ctx, anchors: &Anchors, p: Pending) -> Result<Block, Rejection> {
    let n = p.header.number;
    let mut chunks = Vec::with_capacity(p.chunks.len());
    for rx in p.chunks {
        let chunk = rx
            .await
            .map_err(|_| Rejection::Refused(format!("block {n}: a recovery job panicked")))?;
        chunks.push(chunk);
    }
    let unchecked = join(p.header, p.tx_count, p.receipt_count, p.logs, chunks)?;
    let rules = verify::Rules {
        level: ctx.verify.level,
        strict: ctx.index.strict,
        filters: &ctx.logs,
        anchors,
        chain: ctx.chain,
    };
    match verify::check(unchecked, &rules) {
        Ok(checked) => {
            report(&ctx.metrics, &checked);
            Ok(checked.block)
        }
        Err(r) => {
            if let Rejection::Failure(f) = &r {
                ctx.metrics.verify_failures.inc();
                tracing::warn!(target: "indexer::verify", block = f.block, field = %f.field, node = %f.node, computed = %f.computed, "block does not verify");
            }
            Err(r)
        }
    }
}

/// Puts a block together from its recovery jobs' results, in order: each
/// transaction with its receipt, and the proofs beside them. A transaction
/// or receipt that did not decode is a [`Rejection::Malformed`].
fn join(
    header: BlockHeader,
    tx_count: usize,
    receipt_count: Option<usize>,
    got_logs: Option<Vec<Log>>,
    chunks: Vec<ChunkResult>,
) -> Result<Unchecked, Rejection> {
    let n = header.number;
    let malformed = |index, what, cause| Rejection::Malformed {
        block: n,
        index,
        what,
        cause,
    };
    let mut txs = Vec::with_capacity(tx_count);
    let mut proofs = Proofs::default();
    for (chunk, receipts) in chunks {
        let mut receipts = receipts.into_iter();
        for r in chunk {
            let i = txs.len();
            let (mut tx, tx_proof) = r.map_err(|e| malformed(i, "transaction", e))?;
            if let Some(receipt) = receipts.next() {
                let (receipt, proof) = receipt.map_err(|e| malformed(i, "receipt", e))?;
                tx.receipt = Some(receipt);
                proofs.receipts.extend(proof);
            }
            proofs.txs.extend(tx_proof);
            txs.push(tx);
        }
    }
    // Every transaction of the block came back, in order (reth checks the same).
    if txs.len() != tx_count {
        return Err(Rejection::Refused(format!(
            "block {n}: recovered {} transactions of {tx_count}",
            txs.len()
        )));
    }
    let proved = proofs.txs.len() == tx_count;
    Ok(Unchecked {
        header,
        txs,
        receipt_count,
        got_logs,
        proofs: proved.then_some(proofs),
    })
}

/// Counts a checked block's senders and logs each one that differs from
/// the node's `from`.
fn report(m: &Metrics, checked: &verify::Checked) {
    let block = &checked.block;
    for t in &block.txs {
        match &t.recovered.sender {
            Ok(_) => m.recovered.inc(),
            Err(e) => {
                m.unrecoverable.inc();
                let tx = t.tx.hash.map(|h| hex0x(&h)).unwrap_or_default();
                tracing::debug!(target: "indexer::verify", block = block.header.number, tx, error = %e, "unrecoverable sender");
            }
        }
    }
    for &i in &checked.from_mismatches {
        let t = &block.txs[i];
        m.from_mismatches.inc();
        let show = |a: Option<&[u8; 20]>| a.map(|a| hex0x(a)).unwrap_or_default();
        tracing::warn!(target: "indexer::verify", block = block.header.number, tx = %t.tx.hash.map(|h| hex0x(&h)).unwrap_or_default(), recovered = %show(t.recovered.sender.as_ref().ok()), node_from = %show(t.tx.from.as_ref()), "sender differs from the node's from");
    }
}

/// Checks one block given as JSON text (an `eth_getBlockByNumber(n, true)`
/// result) and, if given, its receipts (an `eth_getBlockReceipts` result),
/// exactly as the pipeline checks every block at `verify = "full"`, on
/// this thread: the block as it would be stored, or the error that would
/// stop the run. For tests and tools; no anchors, every log kept.
pub fn check_block_text(
    block: &str,
    receipts: Option<&str>,
    chain: Chain,
) -> anyhow::Result<Block> {
    // The pipeline names a block by the number it asked for; here, by the
    // number the text gives, when that much can be read.
    let (header, ranges) = crate::decode::split_block(block).with_context(|| {
        #[derive(serde::Deserialize)]
        struct Number<'a> {
            number: &'a str,
        }
        match serde_json::from_str::<Number>(block)
            .ok()
            .and_then(|n| crate::decode::parse_u64("number", n.number).ok())
        {
            Some(n) => format!("block {n}: malformed block from the node"),
            None => "malformed block from the node (its number unreadable)".to_owned(),
        }
    })?;
    let receipt_ranges = match receipts {
        None => None,
        Some(text) => Some(
            serde_json::from_str::<Vec<&serde_json::value::RawValue>>(text)
                .map(|list| {
                    list.iter()
                        .map(|r| {
                            let start = r.get().as_ptr() as usize - text.as_ptr() as usize;
                            start..start + r.get().len()
                        })
                        .collect::<Vec<_>>()
                })
                .context("malformed receipts from the node")?,
        ),
    };
    let chunk = chunk_job(
        block,
        &ranges,
        receipts.zip(receipt_ranges.as_deref()),
        chain.family,
        true,
    );
    let settings = crate::config::Settings::defaults();
    let rules = verify::Rules {
        level: Level::Full,
        strict: false,
        filters: &settings.logs,
        anchors: &Anchors::default(),
        chain,
    };
    let tx_count = ranges.len();
    let receipt_count = receipt_ranges.as_ref().map(Vec::len);
    let unchecked = join(header, tx_count, receipt_count, None, vec![chunk])?;
    Ok(verify::check(unchecked, &rules)?.block)
}

/// Stage 3: commits each batch with the checkpoint.
async fn write(ctx: &Ctx, asks: mpsc::Sender<Ask>) -> anyhow::Result<Step> {
    let mut progress = ctx.progress.lock().await;
    loop {
        let (ask, answer) = oneshot::channel();
        if asks.send(ask).await.is_err() {
            break; // everything collected was handed over
        }
        let Ok(batch) = answer.await else { break };
        let (Some(first), Some(last)) = (batch.first(), batch.last()) else {
            continue;
        };
        let (first_n, last_n) = (first.header.number, last.header.number);
        let written = ctx
            .sink
            .write_blocks(&batch)
            .await
            .with_context(|| format!("blocks {first_n}..={last_n}: cannot write"))?;
        match written {
            Written::Committed(outcome) => {
                let m = &ctx.metrics;
                m.blocks.inc_by(batch.len() as u64);
                m.txs.inc_by(batch.iter().map(|b| b.txs.len() as u64).sum());
                m.set_indexed(last_n);
                if outcome.blocks_replaced > 0 {
                    tracing::warn!(target: "indexer::store", first = first_n, last = last_n, replaced = outcome.blocks_replaced, "replaced stored blocks whose hash changed");
                }
                tracing::debug!(target: "indexer::store", first = first_n, last = last_n, ?outcome, "committed");
                progress.advance(batch.len() as u64, last_n);
            }
            Written::ParentMismatch {
                number,
                parent,
                stored,
            } => {
                tracing::info!(target: "indexer::reorg", block = number, parent = %hex0x(&parent), stored = %hex0x(&stored), "parent hash mismatch");
                return Ok(Step::Reorg { at: number });
            }
            Written::LeaseEnded { first, reason } => return Ok(Step::LeaseEnded { first, reason }),
        }
    }
    Ok(Step::Done)
}
