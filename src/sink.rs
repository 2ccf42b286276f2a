//! The seam between the pipeline and storage: what indexing needs from a
//! database, and nothing else. [`crate::store::Store`] implements it on
//! PostgreSQL. A leased multi-process sink, or one that writes elsewhere,
//! is one more implementation of this trait.
//!
//! Writes are whole: [`Sink::write_blocks`] commits a batch of blocks with
//! the checkpoint, or nothing. This module holds the trait and its plain
//! result types only: no I/O, no policy.

use crate::decode::B256;
use crate::recover::RecoveredBlock;

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
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
}

/// Storage for indexed blocks.
#[async_trait::async_trait]
pub trait Sink: Send + Sync {
    /// Writes `blocks` (consecutive, ascending) and moves the checkpoint to
    /// the last, atomically. Blocks stored with the same hash are left as
    /// they are; stored with another hash, replaced.
    async fn write_blocks(&self, blocks: &[RecoveredBlock]) -> anyhow::Result<Written>;

    /// The last committed block: where a run resumes.
    async fn checkpoint(&self) -> anyhow::Result<Option<(u64, B256)>>;

    /// The hash stored for block `number`.
    async fn block_hash(&self, number: u64) -> anyhow::Result<Option<B256>>;

    /// Deletes every block above `ancestor` and moves the checkpoint to it,
    /// atomically; records the reorg (`new_hash`: the block that replaces
    /// the first deleted one). Returns the blocks deleted.
    async fn rollback_to(&self, ancestor: u64, new_hash: Option<&B256>) -> anyhow::Result<u64>;

    /// Blocks stored in all, and how many of them lie in `from..=to`.
    async fn stored_blocks(&self, from: u64, to: u64) -> anyhow::Result<(u64, u64)>;

    /// The lookup indexes that a bulk load dropped and nobody built since.
    async fn missing_lookup_indexes(&self) -> anyhow::Result<Vec<&'static str>>;

    /// Drops the lookup indexes before a bulk load.
    async fn drop_lookup_indexes(&self) -> anyhow::Result<()>;

    /// Builds the missing lookup indexes.
    async fn build_lookup_indexes(&self) -> anyhow::Result<()>;
}
