//! `backfill`, shared by every backfill process on the database
//! (`index.segment_blocks`, by default `auto`): the range is cut into
//! segments (about [`AUTO_SEGMENTS`] of them unless a size is set), and
//! each process leases one and indexes it (its writes commit the
//! segment's progress, and its end, with the blocks), leasing the next as
//! soon as the one before is fetched whole: one pipeline
//! ([`index_ranges`]) runs through them, so a process alone goes as fast
//! as one that writes without segments. Until none is left. A process that dies loses its segments at
//! once (its owner lock is gone), one that stalls when its lease expires,
//! and another takes each over at its committed progress; a lease renewed
//! too late (its writes are refused) is simply dropped. Once two
//! neighbouring segments are done (checked before each lease and at the
//! end), the upper one's first block must link to the last block of the
//! lower one: a segment whose link fails is indexed again, as a reorg.
//!
//! This module decides which segment to index; leasing, renewing and the
//! writes' checks are storage's ([`Segments`]); it writes no SQL.

use std::collections::HashMap;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::time::Duration;

use anyhow::bail;
use futures::StreamExt;

use super::defer_indexes::LookupIndexes;
use super::follow::link;
use super::range::{Ranges, index_ranges};
use super::{ConvergeEnd, Ctx, Step};
use crate::sink::Segments;
use crate::verify::Anchors;

/// A segment whose links fail this often in one run stops it: the node
/// serves a chain that does not hold together.
const MAX_REDOS: u32 = 3;

/// How many segments `auto` cuts a range into: enough that a handful of
/// processes each lease several and finish close together, few enough
/// that a process alone pays little for starting each (a pipeline start
/// and a lease). Bounded by [`AUTO_MIN_BLOCKS`] and [`AUTO_MAX_BLOCKS`].
pub const AUTO_SEGMENTS: u64 = 16;
const AUTO_MIN_BLOCKS: u64 = 10;
/// A mainnet segment of this many blocks is about 2M transactions.
const AUTO_MAX_BLOCKS: u64 = 10_000;

/// The segment size `index.segment_blocks = "auto"` gives `from..=to`.
/// Processes that pick different sizes (their `--to latest` differs) still
/// share: segments are planned once, and a later plan only cuts blocks no
/// segment holds yet.
pub fn auto_segment_blocks(from: u64, to: u64) -> u64 {
    to.saturating_sub(from)
        .saturating_add(1)
        .div_ceil(AUTO_SEGMENTS)
        .clamp(AUTO_MIN_BLOCKS, AUTO_MAX_BLOCKS)
}

/// Indexes `from..=to` in segments of `size` blocks, together with every
/// other process doing the same on the same database. `lease`: how long a
/// lease lasts unrenewed (renewed every third of it).
pub async fn leased_backfill(
    ctx: &Ctx,
    segments: Arc<dyn Segments>,
    from: u64,
    to: u64,
    size: u64,
    lease: Duration,
) -> anyhow::Result<ConvergeEnd> {
    let anchors = link(ctx, from, Some(to)).await?;
    // A bulk load drops the lookup indexes (every process may decide so,
    // dropping is idempotent); they are built once the range is done.
    let mut indexes = LookupIndexes::open(ctx).await?;
    indexes.before_shared_range(ctx, from, to).await?;
    segments.plan(from, to, size).await?;
    let counts = segments.counts(from, to).await?;
    tracing::info!(target: "indexer::backfill", from, to, size, free = counts.free, leased = counts.leased, done = counts.done, "leased backfill: segments planned");
    let stored = (to - from)
        .saturating_add(1)
        .saturating_sub(counts.blocks_left);
    if stored > 0 {
        tracing::info!(target: "indexer::backfill", stored, left = counts.blocks_left, "resuming: blocks of the range written before (done segments, and the progress of unfinished ones) are not indexed again");
    }
    // What is left of the range, whoever indexes it: the share this
    // process indexes is its part of that.
    ctx.progress.lock().await.set_total(counts.blocks_left);
    ctx.metrics.set_head(to);
    let renewer = tokio::spawn(renew(Arc::clone(&segments), lease / 3));
    let end = run(ctx, &anchors, segments.as_ref(), from, to, lease).await;
    renewer.abort();
    if matches!(end, Ok(ConvergeEnd::Complete)) {
        // Every process that ends here tries; one builds, the others then
        // find nothing missing.
        indexes.finish(ctx).await?;
    } else if let Err(e) = segments.release().await {
        // An unfinished segment is given back at once rather than at expiry.
        tracing::warn!(target: "indexer::backfill", "could not give the segment back (it is free again once its lease expires): {e:#}");
    }
    end
}

/// Leases segments and indexes them, one after the other through one
/// pipeline (the next is leased once the one before is fetched whole, so
/// the pipeline never drains between them), until every segment of the
/// range is done, here or elsewhere.
async fn run(
    ctx: &Ctx,
    anchors: &Anchors,
    segments: &dyn Segments,
    from: u64,
    to: u64,
    lease: Duration,
) -> anyhow::Result<ConvergeEnd> {
    let mut shutdown = ctx.shutdown.clone();
    let mut redos = HashMap::<u64, u32>::new();
    // A segment still leased here, to index again from its first block.
    let mut again: Option<(u64, u64)> = None;
    loop {
        if shutdown.requested() {
            return Ok(ConvergeEnd::Shutdown);
        }
        // Each segment the pipeline was given, in order.
        let mut given = Vec::new();
        let feed = Feed {
            ctx,
            segments,
            from,
            to,
            again: again.take(),
            redos: &mut redos,
            given: &mut given,
        };
        match index_ranges(ctx, anchors, feed.into_ranges()).await? {
            // No segment is free: see below whether others hold the rest.
            Step::Done => {}
            Step::Shutdown => return Ok(ConvergeEnd::Shutdown),
            // The chain reorganised while a segment was indexed (a range
            // near the head): its blocks are indexed again from its first,
            // each stored one kept or replaced; the later segments it had
            // leased are given back (their written blocks stay).
            Step::Reorg { at } => {
                let Some(&(first, last)) = given.iter().find(|(f, l)| (*f..=*l).contains(&at))
                else {
                    bail!(
                        "block {at}: reported as a reorg outside every segment this process leased"
                    );
                };
                count_redo(ctx, &mut redos, first, || {
                    format!(
                        "block {at}: does not extend block {} of the same segment ({first}..={last}) after indexing it {MAX_REDOS} times; the node serves a chain that does not hold together",
                        at - 1
                    )
                })?;
                tracing::warn!(target: "indexer::backfill", first, "block {at} does not extend block {} (a reorg while the segment was indexed); indexing the segment again from its first block", at - 1);
                for &(later, _) in given.iter().filter(|(f, _)| *f > first) {
                    segments.release_one(later).await?;
                }
                again = Some((first, last));
                continue;
            }
            Step::LeaseEnded { first, reason } => {
                tracing::warn!(target: "indexer::backfill", first, "{reason}; leasing another");
                segments.release().await?;
                continue;
            }
        }
        let counts = segments.counts(from, to).await?;
        if counts.free + counts.leased > 0 {
            // Others hold the rest; wait for them to finish or to die (their
            // leases then expire and are taken over here).
            tokio::select! {
                _ = shutdown.wait() => return Ok(ConvergeEnd::Shutdown),
                _ = tokio::time::sleep((lease / 4).min(Duration::from_secs(1))) => {}
            }
            continue;
        }
        // Every segment is done: the last check (the last segment may have
        // been finished by another process since the last lease).
        if redo_broken_links(ctx, segments, from, to, &mut redos).await? == 0 {
            return Ok(ConvergeEnd::Complete);
        }
    }
}

/// The segments one pipeline indexes: first one to index again, if any,
/// then each one leased, as the pipeline asks for the next.
struct Feed<'a> {
    ctx: &'a Ctx,
    segments: &'a dyn Segments,
    from: u64,
    to: u64,
    again: Option<(u64, u64)>,
    redos: &'a mut HashMap<u64, u32>,
    /// Every segment handed to the pipeline, `first..=last`.
    given: &'a mut Vec<(u64, u64)>,
}

impl<'a> Feed<'a> {
    fn into_ranges(self) -> Ranges<'a> {
        futures::stream::unfold(Some(self), |feed| async move {
            let mut feed = feed?;
            match feed.next().await {
                Ok(Some(range)) => Some((Ok(range), Some(feed))),
                Ok(None) => None,
                Err(e) => Some((Err(e), None)),
            }
        })
        .boxed()
    }

    /// The blocks to index next: the segment to index again, or, once a
    /// link that fails between two done segments (one just finished, here
    /// or elsewhere) is redone, the next segment leased from where its
    /// progress stands; `None` when none is free.
    async fn next(&mut self) -> anyhow::Result<Option<RangeInclusive<u64>>> {
        if let Some((first, last)) = self.again.take() {
            self.given.push((first, last));
            return Ok(Some(first..=last));
        }
        redo_broken_links(self.ctx, self.segments, self.from, self.to, self.redos).await?;
        let Some(seg) = self.segments.lease(self.from, self.to).await? else {
            return Ok(None);
        };
        match &seg.taken_from {
            Some(was) => {
                tracing::warn!(target: "indexer::backfill", first = seg.first, last = seg.last, next = seg.next, from = was, "took over a segment whose lease expired or whose process is gone")
            }
            None => {
                tracing::info!(target: "indexer::backfill", first = seg.first, last = seg.last, next = seg.next, "leased a segment")
            }
        }
        self.given.push((seg.first, seg.last));
        Ok(Some(seg.next..=seg.last))
    }
}

/// Counts one more indexing of segment `first` (a reorg, in it or across
/// its lower edge): past [`MAX_REDOS`], the run stops with `give_up`.
fn count_redo(
    ctx: &Ctx,
    redos: &mut HashMap<u64, u32>,
    first: u64,
    give_up: impl FnOnce() -> String,
) -> anyhow::Result<()> {
    let n = redos.entry(first).or_default();
    *n += 1;
    if *n > MAX_REDOS {
        bail!("{}", give_up());
    }
    ctx.metrics.reorgs.inc();
    Ok(())
}

/// Frees, to be indexed again, each done segment whose first block does not
/// extend the last block of the done segment below it; counts redos per
/// segment in `redos` and stops the run past [`MAX_REDOS`]. Returns how many
/// it freed.
async fn redo_broken_links(
    ctx: &Ctx,
    segments: &dyn Segments,
    from: u64,
    to: u64,
    redos: &mut HashMap<u64, u32>,
) -> anyhow::Result<usize> {
    let broken = segments.broken_links(from, to).await?;
    for &first in &broken {
        count_redo(ctx, redos, first, || {
            format!(
                "block {first}: its parent hash is not the hash of block {} after indexing segment {first} {MAX_REDOS} times; the node serves a chain that does not hold together",
                first - 1
            )
        })?;
        tracing::warn!(target: "indexer::backfill", first, "block {first} does not extend block {} of the segment below; indexing its segment again", first - 1);
        segments.redo(first).await?;
    }
    Ok(broken.len())
}

/// Renews this process's leases every `every` until aborted.
async fn renew(segments: Arc<dyn Segments>, every: Duration) {
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(10)));
    tick.tick().await;
    loop {
        tick.tick().await;
        match segments.renew().await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(target: "indexer::backfill", "the segment's lease expired before it was renewed; its writes will be refused")
            }
            Err(e) => tracing::warn!(target: "indexer::backfill", "renewing the lease: {e:#}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::auto_segment_blocks;

    #[test]
    fn auto_cuts_a_range_into_about_sixteen_segments_within_bounds() {
        // Short ranges: at least 10 blocks a segment.
        assert_eq!(auto_segment_blocks(0, 40), 10);
        assert_eq!(auto_segment_blocks(5, 5), 10);
        // The backfill bench's 749 blocks: 16 segments.
        assert_eq!(auto_segment_blocks(1, 749), 47);
        assert_eq!(749u64.div_ceil(47), 16);
        // Mainnet's history: at most 10,000 blocks a segment.
        assert_eq!(auto_segment_blocks(0, 20_000_000), 10_000);
        assert_eq!(auto_segment_blocks(0, u64::MAX), 10_000);
    }
}
