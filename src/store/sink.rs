//! [`Store`] as the pipeline's [`Sink`]: each method is the store's own
//! statement, its error turned into the pipeline's `anyhow` chain. Nothing
//! else lives here.

use crate::block::Block;
use crate::decode::B256;
use crate::sink::{Sink, Written};
use crate::verify::Anchor;

use super::Store;

#[async_trait::async_trait]
impl Sink for Store {
    async fn write_blocks(&self, blocks: &[Block]) -> anyhow::Result<Written> {
        Ok(Store::write_blocks(self, blocks).await?)
    }

    async fn checkpoint(&self) -> anyhow::Result<Option<(u64, B256)>> {
        Ok(Store::checkpoint(self).await?)
    }

    async fn block_hash(&self, number: u64) -> anyhow::Result<Option<B256>> {
        Ok(Store::block_hash(self, number).await?)
    }

    async fn rollback_to(&self, ancestor: u64, new_hash: Option<&B256>) -> anyhow::Result<u64> {
        Ok(Store::rollback_to(self, ancestor, new_hash).await?)
    }

    async fn parent_hash(&self, number: u64) -> anyhow::Result<Option<B256>> {
        Ok(Store::parent_hash(self, number).await?)
    }

    async fn linked(&self, from: u64, to: u64) -> anyhow::Result<bool> {
        Ok(Store::linked(self, from, to).await?)
    }

    async fn record_anchor(&self, anchor: &Anchor) -> anyhow::Result<()> {
        Ok(Store::record_anchor(self, anchor).await?)
    }

    async fn stored_blocks(&self, from: u64, to: u64) -> anyhow::Result<(u64, u64)> {
        Ok(Store::stored_blocks(self, from, to).await?)
    }

    async fn missing_lookup_indexes(&self) -> anyhow::Result<Vec<&'static str>> {
        Ok(Store::missing_lookup_indexes(self).await?)
    }

    async fn drop_lookup_indexes(&self) -> anyhow::Result<()> {
        Ok(Store::drop_lookup_indexes(self).await?)
    }

    async fn build_lookup_indexes(&self) -> anyhow::Result<()> {
        Store::build_lookup_indexes(self).await?;
        Ok(())
    }
}
