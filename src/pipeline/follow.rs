//! The converge loops: `backfill` indexes a fixed range, `follow` (and
//! `sync`) chase the head forever. Both index through [`index_range`] and
//! meet reorgs the same way (Shovel's `Converge`): a parent-hash mismatch,
//! or a stored tip the node no longer has, walks back to the common
//! ancestor by comparing stored hashes with the node's, rolls back above it
//! in one database transaction, and indexes the canonical blocks again.
//!
//! This module decides *what* range to index next; it writes no SQL,
//! speaks no JSON-RPC and recovers nothing itself.

use std::time::Duration;

use anyhow::bail;
use futures::StreamExt;

use super::defer_indexes::LookupIndexes;
use super::{Ctx, Step, index_range};
use crate::decode::hex0x;
use crate::source::Heads;
use crate::verify::{self, Anchors};

/// How a converge loop ended (errors are `Err`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConvergeEnd {
    Complete,
    Shutdown,
}

/// Where `follow` starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowStart {
    /// After the checkpoint; on an empty database, at the head (less the
    /// confirmations). `follow`.
    Resume,
    /// At this block, whatever is stored. `follow --from N`.
    At(u64),
    /// After the checkpoint; on an empty database, at this block, so the
    /// whole history up to the head is caught up first. `sync`.
    CatchUp { from: u64 },
}

/// The anchors a run over `from..=to` (`to`: `None` when following) is
/// checked against, once it is known to link to one of them.
pub(super) async fn link(ctx: &Ctx, from: u64, to: Option<u64>) -> anyhow::Result<Anchors> {
    verify::link(
        &ctx.verify,
        ctx.source.as_ref(),
        ctx.sink.as_ref(),
        from,
        to,
    )
    .await
}

/// Indexes `from..=to`, resuming after the checkpoint when it lies inside
/// the range. Already stored blocks are left as they are.
pub async fn backfill(ctx: &Ctx, from: u64, to: u64) -> anyhow::Result<ConvergeEnd> {
    let anchors = link(ctx, from, Some(to)).await?;
    let mut next = match ctx.sink.checkpoint().await? {
        Some((c, _)) if c + 1 >= from && c < to => {
            if c >= from {
                tracing::info!(target: "indexer::backfill", checkpoint = c, "resuming after the checkpoint");
            }
            c + 1
        }
        _ => from,
    };
    ctx.progress.lock().await.set_total(to + 1 - next);
    ctx.metrics.set_head(to);
    let mut indexes = LookupIndexes::open(ctx).await?;
    if next <= to {
        indexes.before_range(ctx, next, to).await?;
    }
    let mut strikes = Strikes::default();
    let end = loop {
        if next > to {
            break ConvergeEnd::Complete;
        }
        match index_range(ctx, &anchors, next, to).await? {
            Step::Done => break ConvergeEnd::Complete,
            Step::Shutdown => break ConvergeEnd::Shutdown,
            Step::Reorg { at } => {
                next = reorg(ctx, at, &mut strikes)
                    .await?
                    .map_or(from, |a| (a + 1).max(from))
            }
            Step::LeaseEnded { first, .. } => {
                bail!("segment {first}: a lease ended, but this backfill leases none")
            }
        }
    };
    indexes.finish(ctx).await?;
    Ok(end)
}

/// The first block [`follow`] from `start` indexes: computed once per run.
async fn first_block(ctx: &Ctx, start: FollowStart) -> anyhow::Result<u64> {
    let checkpoint = ctx.sink.checkpoint().await?.map(|c| c.0);
    Ok(match (start, checkpoint) {
        (FollowStart::At(n), _) => n,
        (_, Some(c)) => c + 1,
        (FollowStart::CatchUp { from }, None) => from,
        (FollowStart::Resume, None) => ctx
            .source
            .head()
            .await?
            .saturating_sub(ctx.follow.confirmations),
    })
}

/// Follows the head from `start` until shutdown (or an error).
pub async fn follow(ctx: &Ctx, start: FollowStart) -> anyhow::Result<ConvergeEnd> {
    let f = &ctx.follow;
    let mut next = first_block(ctx, start).await?;
    let start = next;
    let anchors = link(ctx, start, None).await?;
    tracing::info!(target: "indexer::follow", from = next, confirmations = f.confirmations, "following the head");
    let mut heads = subscribe(ctx).await;
    let mut shutdown = ctx.shutdown.clone();
    let mut strikes = Strikes::default();
    let mut indexes = LookupIndexes::open(ctx).await?;
    loop {
        if shutdown.requested() {
            indexes.finish(ctx).await?;
            return Ok(ConvergeEnd::Shutdown);
        }
        let head = ctx.source.head().await?;
        ctx.metrics.set_head(head);
        let target = head.saturating_sub(f.confirmations);
        if next <= target {
            indexes.before_range(ctx, next, target).await?;
            match index_range(ctx, &anchors, next, target).await? {
                Step::Done => next = target + 1,
                Step::Shutdown => {
                    indexes.finish(ctx).await?;
                    return Ok(ConvergeEnd::Shutdown);
                }
                Step::Reorg { at } => {
                    next = reorg(ctx, at, &mut strikes).await?.map_or(start, |a| a + 1)
                }
                Step::LeaseEnded { first, .. } => {
                    bail!("segment {first}: a lease ended, but following leases none")
                }
            }
            continue;
        }
        // Caught up: a bulk load (the catch-up of `sync`) is over.
        indexes.finish(ctx).await?;
        // At the head: make sure the node still has our tip. A node behind
        // us with our hashes (a lagging replica) is waited out; one with
        // other hashes has reorged, possibly at the same height.
        if let Some((tip, tip_hash)) = ctx.sink.checkpoint().await? {
            let probe = tip.min(target);
            let stored = if probe == tip {
                Some(tip_hash)
            } else {
                ctx.sink.block_hash(probe).await?
            };
            if let (Some(stored), Some(node)) = (stored, ctx.source.header(probe).await?) {
                if node.hash != stored {
                    next = reorg(ctx, probe + 1, &mut strikes)
                        .await?
                        .map_or(start, |a| a + 1);
                    continue;
                }
                if head < tip {
                    tracing::debug!(target: "indexer::follow", head, tip, "node is behind our tip with the same hashes; waiting");
                }
            }
        }
        let poll = tokio::time::sleep(f.poll_interval);
        tokio::select! {
            _ = shutdown.wait() => return Ok(ConvergeEnd::Shutdown),
            _ = poll => {}
            head = next_head(&mut heads) => {
                if head.is_none() {
                    tracing::warn!(target: "indexer::follow", "newHeads subscription ended; polling every {:?}", f.poll_interval);
                    heads = None;
                }
            }
        }
    }
}

/// New-head notifications when the source pushes them; `None` polls.
async fn subscribe(ctx: &Ctx) -> Option<Heads> {
    match ctx.source.new_heads().await {
        Ok(Some(s)) => {
            tracing::debug!(target: "indexer::follow", "woken by new heads as well as by polling");
            Some(s)
        }
        Ok(None) => None,
        Err(e) => {
            tracing::warn!(target: "indexer::follow", "{e:#}; polling instead");
            None
        }
    }
}

/// The next head notification; pending forever when there is no socket.
async fn next_head(heads: &mut Option<Heads>) -> Option<u64> {
    match heads {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Mismatches that needed no rollback (the blocks in flight did not chain)
/// at the same block, in a row. A node's chain can change between two
/// requests, so that is retried; a node that keeps serving blocks that do
/// not chain is an error, not something to spin on.
#[derive(Default)]
struct Strikes {
    at: u64,
    count: u32,
}

/// Consecutive no-rollback mismatches at one block before giving up.
const MAX_STRIKES: u32 = 5;

impl Strikes {
    async fn hit(&mut self, ctx: &Ctx, at: u64) -> anyhow::Result<()> {
        if self.at == at {
            self.count += 1;
        } else {
            *self = Strikes { at, count: 1 };
        }
        if self.count >= MAX_STRIKES {
            bail!(
                "block {at}: its parent hash does not match block {} from the same node, {MAX_STRIKES} times in a row; the node serves blocks that do not form a chain\n\nhint: check the RPC endpoint (a load balancer mixing nodes of different chains?)",
                at.saturating_sub(1)
            );
        }
        tokio::time::sleep(ctx.follow.poll_interval.min(Duration::from_secs(1))).await;
        Ok(())
    }
}

/// Handles a chain mismatch at block `at`: walks back from the stored tip
/// below `at` to the last block whose stored hash the node still has, and
/// rolls back everything above it. Returns that common ancestor (`None`
/// when nothing is stored to compare with).
async fn reorg(ctx: &Ctx, at: u64, strikes: &mut Strikes) -> anyhow::Result<Option<u64>> {
    let Some((checkpoint, _)) = ctx.sink.checkpoint().await? else {
        strikes.hit(ctx, at).await?;
        return Ok(None);
    };
    let max = ctx.follow.max_reorg_depth.get();
    let tip = checkpoint.min(at.saturating_sub(1));
    let mut k = tip;
    let ancestor = loop {
        let Some(stored) = ctx.sink.block_hash(k).await? else {
            break k; // nothing stored here to compare
        };
        if ctx
            .source
            .header(k)
            .await?
            .is_some_and(|h| h.hash == stored)
        {
            break k;
        }
        if checkpoint - k + 1 > max {
            bail!(
                "reorg deeper than follow.max_reorg_depth ({max}): stored blocks {k}..={checkpoint} differ from the node's chain; the database is left unchanged at block {checkpoint}\n\nhint: check that the RPC endpoint serves the same chain, or raise follow.max_reorg_depth"
            );
        }
        if k == 0 {
            bail!(
                "stored block 0 differs from the node's genesis block: is the RPC endpoint on another chain?"
            );
        }
        k -= 1;
    };
    if ancestor >= checkpoint {
        // Only the blocks in flight changed: nothing stored to undo.
        strikes.hit(ctx, at).await?;
        return Ok(Some(ancestor));
    }
    let old_tip = ctx.sink.block_hash(checkpoint).await?;
    let new_hash = ctx.source.header(ancestor + 1).await?.map(|h| h.hash);
    let deleted = ctx.sink.rollback_to(ancestor, new_hash.as_ref()).await?;
    let depth = checkpoint - ancestor;
    let m = &ctx.metrics;
    m.reorgs.inc();
    m.reorg_depth.observe(depth as f64);
    m.rollback_blocks.inc_by(deleted);
    m.set_indexed(ancestor);
    tracing::warn!(
        target: "indexer::reorg",
        depth,
        ancestor,
        old_tip = %old_tip.map(|h| hex0x(&h)).unwrap_or_default(),
        new_hash = %new_hash.map(|h| hex0x(&h)).unwrap_or_default(),
        deleted,
        "reorg: rolled back to the common ancestor"
    );
    Ok(Some(ancestor))
}
