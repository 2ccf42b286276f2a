//! When the lookup indexes (sender, hash, authority, logs by contract, and
//! the optional ones the settings name) and the keys of every table but
//! `blocks` are kept up to date row by row, and when they are dropped for a
//! bulk load and built once at its end: the decision only; the sink runs
//! the statements (and says why exactly-once holds without those keys:
//! `store::indexes`).
//!
//! A range is loaded without them when the blocks it adds (those not
//! stored yet) are at least `index.defer_indexes_min_blocks` and at least
//! as many as are already stored (rebuilding costs a sort of the whole
//! table, which pays off only when the load is a large share of it). Whoever finds them
//! missing at a point where it does not defer (the end of a backfill, a
//! follower caught up with the head, the next run after a crash) builds
//! them, so they are never missing for longer than a bulk load.

use super::Ctx;

/// Whether `new` blocks, on top of `stored`, are loaded without the lookup
/// indexes. `min_blocks` 0 never defers.
pub fn should_defer(new: u64, stored: u64, min_blocks: u64) -> bool {
    min_blocks > 0 && new >= min_blocks && new >= stored
}

/// The state of the lookup indexes during one run.
pub struct LookupIndexes {
    /// Some are missing (dropped by this run or an interrupted earlier
    /// one, or named by `index.optional_indexes` and not built yet).
    deferred: bool,
    /// This run dropped them all for a bulk load and has not built them.
    dropped: bool,
}

impl LookupIndexes {
    /// Notes whether an earlier run left the indexes missing.
    pub async fn open(ctx: &Ctx) -> anyhow::Result<Self> {
        let missing = ctx.sink.missing_lookup_indexes().await?;
        if !missing.is_empty() {
            tracing::info!(target: "indexer", missing = %missing.join(", "), "lookup indexes are missing (an earlier bulk load did not finish, or index.optional_indexes names one not built yet); they are built once this run stops loading in bulk");
        }
        Ok(LookupIndexes {
            deferred: !missing.is_empty(),
            dropped: false,
        })
    }

    /// Called before indexing `from..=to`: drops the indexes for a bulk
    /// load, or builds them when this range is not one.
    pub async fn before_range(&mut self, ctx: &Ctx, from: u64, to: u64) -> anyhow::Result<()> {
        self.decide(ctx, from, to, true).await
    }

    /// [`LookupIndexes::before_range`] for one of several leased
    /// backfills: drops them for a bulk load, but never builds them before
    /// the range is done (other processes may still be loading it).
    pub async fn before_shared_range(
        &mut self,
        ctx: &Ctx,
        from: u64,
        to: u64,
    ) -> anyhow::Result<()> {
        self.decide(ctx, from, to, false).await
    }

    async fn decide(
        &mut self,
        ctx: &Ctx,
        from: u64,
        to: u64,
        may_build: bool,
    ) -> anyhow::Result<()> {
        let min = ctx.index.defer_indexes_min_blocks;
        let blocks = to.saturating_sub(from) + 1;
        let mut new = blocks;
        let defer = min > 0 && blocks >= min && {
            let (stored, within) = ctx.sink.stored_blocks(from, to).await?;
            new = blocks - within;
            should_defer(new, stored, min)
        };
        // A bulk load drops every one, also those still there when others
        // are missing: all are built once, at its end.
        if defer && !self.dropped {
            tracing::info!(target: "indexer", new_blocks = new, "bulk load: dropping the lookup indexes and the keys of transactions, authorizations and logs until the range is indexed; one sorted build at the end is cheaper than keeping them current");
            ctx.sink.drop_lookup_indexes().await?;
            self.deferred = true;
            self.dropped = true;
        } else if !defer && self.deferred && may_build {
            self.finish(ctx).await?;
        }
        Ok(())
    }

    /// Builds the indexes if they are deferred: at the end of a bulk load,
    /// including one stopped by a signal.
    pub async fn finish(&mut self, ctx: &Ctx) -> anyhow::Result<()> {
        if self.deferred {
            tracing::info!(target: "indexer", "building the lookup indexes and keys");
            let started = std::time::Instant::now();
            ctx.sink.build_lookup_indexes().await?;
            tracing::info!(target: "indexer", secs = format!("{:.1}", started.elapsed().as_secs_f64()), "lookup indexes built");
            self.deferred = false;
            self.dropped = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::should_defer;

    #[test]
    fn defers_only_large_loads_that_dominate_the_table() {
        // An empty database and a long range: defer.
        assert!(should_defer(1_000, 0, 1_000));
        assert!(should_defer(50_000, 10_000, 1_000));
        // Shorter than the minimum.
        assert!(!should_defer(999, 0, 1_000));
        // Long, but a small share of what is stored: keep them current.
        assert!(!should_defer(10_000, 20_000_000, 1_000));
        // Exactly as many as stored: the rebuild sorts twice the load; still a win.
        assert!(should_defer(5_000, 5_000, 1_000));
        // A rerun over stored blocks adds nothing.
        assert!(!should_defer(0, 5_000, 1_000));
        // 0 disables deferral.
        assert!(!should_defer(1_000_000, 0, 0));
    }
}
