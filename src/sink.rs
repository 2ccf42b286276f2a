//! The seam between the pipeline and storage: what indexing needs from a
//! database, and nothing else. [`crate::store::Store`] implements it on
//! PostgreSQL. A leased multi-process sink, or one that writes elsewhere,
//! is one more implementation of this trait.
//!
//! Writes are whole: [`Sink::write_blocks`] commits a batch of blocks with
//! the checkpoint, or nothing. This module holds the trait and its plain
//! result types only: no I/O, no policy.

use crate::block::Block;
use crate::decode::B256;
use crate::verify::Anchor;

/// What a write did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WriteOutcome {
    pub blocks_written: u64,
    pub txs_written: u64,
    /// Already stored with the same hash: left as they were.
    pub blocks_skipped: u64,
    /// Stored with another hash: replaced.
    pub blocks_replaced: u64,
}

/// How a write ended: an expected state, not an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Written {
    /// The batch and the checkpoint are committed.
    Committed(WriteOutcome),
    /// Nothing was written: block `number` does not extend the block below
    /// it (stored, or earlier in the batch), whose hash is `stored`.
    ParentMismatch {
        number: u64,
        parent: B256,
        stored: B256,
    },
    /// Nothing was written: the blocks were for a leased segment whose
    /// lease ended (taken over by another process, or its committed
    /// progress is behind this write). Not fatal: the process leases again.
    LeaseEnded { first: u64, reason: String },
}

/// Storage for indexed blocks.
#[async_trait::async_trait]
pub trait Sink: Send + Sync {
    /// Writes `blocks` (consecutive, ascending) and moves the checkpoint to
    /// the last, atomically. Blocks stored with the same hash are left as
    /// they are; stored with another hash, replaced.
    async fn write_blocks(&self, blocks: &[Block]) -> anyhow::Result<Written>;

    /// The last committed block: where a run resumes.
    async fn checkpoint(&self) -> anyhow::Result<Option<(u64, B256)>>;

    /// The hash stored for block `number`.
    async fn block_hash(&self, number: u64) -> anyhow::Result<Option<B256>>;

    /// Deletes every block above `ancestor` and moves the checkpoint to it,
    /// atomically; records the reorg (`new_hash`: the block that replaces
    /// the first deleted one). Returns the blocks deleted.
    async fn rollback_to(&self, ancestor: u64, new_hash: Option<&B256>) -> anyhow::Result<u64>;

    /// The parent hash stored for block `number`.
    async fn parent_hash(&self, number: u64) -> anyhow::Result<Option<B256>>;

    /// Whether blocks `from..=to` are all stored and each links to the one
    /// below by its parent hash.
    async fn linked(&self, from: u64, to: u64) -> anyhow::Result<bool>;

    /// Records that the stored chain is linked to `anchor`.
    async fn record_anchor(&self, anchor: &Anchor) -> anyhow::Result<()>;

    /// Blocks stored in all, and how many of them lie in `from..=to`.
    async fn stored_blocks(&self, from: u64, to: u64) -> anyhow::Result<(u64, u64)>;

    /// The lookup indexes that a bulk load dropped and nobody built since.
    async fn missing_lookup_indexes(&self) -> anyhow::Result<Vec<&'static str>>;

    /// Drops the lookup indexes before a bulk load.
    async fn drop_lookup_indexes(&self) -> anyhow::Result<()>;

    /// Builds the missing lookup indexes.
    async fn build_lookup_indexes(&self) -> anyhow::Result<()>;
}

/// One segment of a leased backfill: blocks `first..=last`, of which
/// `next..` remain to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    pub first: u64,
    pub last: u64,
    pub next: u64,
    /// The process whose lease expired, when this one takes it over.
    pub taken_from: Option<String>,
}

/// Where a leased backfill's segments stand, for deciding what to do when
/// none is free.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SegmentCounts {
    pub free: u64,
    pub leased: u64,
    pub done: u64,
    /// Blocks of the free and leased segments not written yet.
    pub blocks_left: u64,
}

/// Range leases, for several processes sharing one backfill: the storage
/// side of [`crate::pipeline::leased_backfill`]. While a segment is leased
/// through [`Segments::lease`], [`Sink::write_blocks`] writes into it: only
/// while the lease is still this process's, continuing exactly at its next
/// block, and committing the segment's progress (and its end) with the
/// blocks.
#[async_trait::async_trait]
pub trait Segments: Send + Sync {
    /// Cuts the blocks of `from..=to` that no segment holds yet into
    /// segments of `size` blocks (aligned to multiples of `size`); splits a
    /// free segment that reaches outside the range at its edge; fails
    /// naming the segment when one leased right now does.
    async fn plan(&self, from: u64, to: u64, size: u64) -> anyhow::Result<()>;

    /// Leases the lowest segment inside `from..=to` that is free or whose
    /// lease expired, skipping those another process is taking right now;
    /// `None` when there is none.
    async fn lease(&self, from: u64, to: u64) -> anyhow::Result<Option<Segment>>;

    /// Gives every segment this process holds back unfinished (shutdown,
    /// error); their written blocks stay, and the next lease of each
    /// resumes after them.
    async fn release(&self) -> anyhow::Result<()>;

    /// Gives the segment starting at `first` back (its lease ended, or it
    /// is abandoned); a no-op when the lease is no longer this process's.
    async fn release_one(&self, first: u64) -> anyhow::Result<()>;

    /// Extends every lease this process holds; false if it holds one no
    /// more (it expired and another process took it).
    async fn renew(&self) -> anyhow::Result<bool>;

    /// Segments inside `from..=to` by state (an expired lease counts as
    /// leased until it is taken over).
    async fn counts(&self, from: u64, to: u64) -> anyhow::Result<SegmentCounts>;

    /// First blocks of done segments inside `from..=to` whose parent hash is
    /// not the hash of the block below, stored by the done segment below.
    async fn broken_links(&self, from: u64, to: u64) -> anyhow::Result<Vec<u64>>;

    /// Deletes the blocks of the segment starting at `first` and frees it,
    /// to be indexed again (a link across a boundary did not hold); records
    /// it as a reorg.
    async fn redo(&self, first: u64) -> anyhow::Result<()>;
}
