//! Doors for the integration tests and benches (`tests/it`, `benches/`)
//! into paths the binary runs but the library does not offer: not part of
//! the API (hidden from its docs, no stability promise). Each is a thin
//! call into the crate-private code, so a test exercises exactly what a run
//! does; nothing here decides an outcome of its own.

use std::ops::RangeInclusive;

use crate::decode::RawBlock;
use crate::rpc::{RpcClient, RpcError};

use crate::block::Block;
use crate::chain::Chain;

/// The per-block path of a run at `verify = "full"`, on this thread, by
/// Ethereum's rules (chain id 1).
pub fn check_block_text(block: &str, receipts: Option<&str>) -> anyhow::Result<Block> {
    crate::pipeline::range::check_block_text(block, receipts, Chain::resolve(1, None))
}

/// [`check_block_text`] on `chain`, by its profile's rules.
pub fn check_block_text_on(
    chain: Chain,
    block: &str,
    receipts: Option<&str>,
) -> anyhow::Result<Block> {
    crate::pipeline::range::check_block_text(block, receipts, chain)
}

/// Blocks `range` fetched by `rpc` all at once, in order (a run streams
/// them through `Source::blocks`).
pub async fn blocks(
    rpc: &RpcClient,
    range: RangeInclusive<u64>,
) -> Result<Vec<RawBlock>, RpcError> {
    rpc.blocks_vec(range).await
}

/// The batch size `rpc` uses now on its first endpoint (smaller than
/// configured once the provider capped it).
pub fn batch_size(rpc: &RpcClient) -> usize {
    rpc.effective_batch_size()
}
