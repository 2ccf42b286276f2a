//! The seam between the pipeline and the chain: what indexing needs from a
//! node, and nothing else. [`crate::rpc::RpcClient`] implements it over
//! JSON-RPC; the tests implement it in memory (a chain that forks, reorgs,
//! lags, stalls and fails on command). A second provider, a failover set
//! or a cache is one more implementation of this trait, with no edit to
//! the pipeline or the other stages.
//!
//! This module holds the trait only: no I/O, no policy.

use std::ops::RangeInclusive;
use std::sync::Arc;

use futures::stream::BoxStream;

use crate::decode::{BlockHeader, RawBlock};

/// New-head notifications: block numbers, as the node announces them.
pub type Heads = BoxStream<'static, u64>;

/// A chain to index. Errors are final: an implementation retries what is
/// worth retrying itself, and says in the error which endpoint and block
/// failed.
#[async_trait::async_trait]
pub trait Source: Send + Sync {
    /// The chain's id (`eth_chainId`).
    async fn chain_id(&self) -> anyhow::Result<u64>;

    /// The chain's latest block number.
    async fn head(&self) -> anyhow::Result<u64>;

    /// Header of block `n`, or `None` when the source has no such block
    /// (yet). Does not wait.
    async fn header(&self, n: u64) -> anyhow::Result<Option<BlockHeader>>;

    /// Blocks `range` with their transactions (and, as configured, their
    /// receipts or their logs), strictly in order, each one
    /// the block of that number; a block not produced yet is waited for,
    /// never skipped. Bounded read-ahead: nothing is fetched beyond what
    /// the consumer pulls plus a small window. Ends after the first error.
    fn blocks(
        self: Arc<Self>,
        range: RangeInclusive<u64>,
    ) -> BoxStream<'static, anyhow::Result<RawBlock>>;

    /// Block `n` fetched again, alone, with what [`blocks`](Source::blocks)
    /// attaches (receipts, logs): for a block whose receipts or logs did
    /// not match it. `None` when the source has no such block now.
    async fn block(&self, n: u64) -> anyhow::Result<Option<RawBlock>>;

    /// A stream of new heads when the source can push them (`None`: poll
    /// [`head`](Source::head)). The stream ends when the push channel
    /// drops; the caller falls back to polling then.
    async fn new_heads(&self) -> anyhow::Result<Option<Heads>>;
}
