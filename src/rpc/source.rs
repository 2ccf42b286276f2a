//! [`RpcClient`] as the pipeline's [`Source`]: each method is the client's
//! own call, its error turned into the pipeline's `anyhow` chain. Nothing
//! else lives here.

use std::ops::RangeInclusive;
use std::sync::Arc;

use futures::stream::BoxStream;
use futures::{StreamExt, TryStreamExt};

use super::RpcClient;
use crate::decode::{BlockHeader, RawBlock};
use crate::source::{Heads, Source};

#[async_trait::async_trait]
impl Source for RpcClient {
    async fn chain_id(&self) -> anyhow::Result<u64> {
        Ok(RpcClient::chain_id(self).await?)
    }

    async fn head(&self) -> anyhow::Result<u64> {
        Ok(RpcClient::head(self).await?)
    }

    async fn header(&self, n: u64) -> anyhow::Result<Option<BlockHeader>> {
        Ok(RpcClient::header(self, n).await?)
    }

    fn blocks(
        self: Arc<Self>,
        range: RangeInclusive<u64>,
    ) -> BoxStream<'static, anyhow::Result<RawBlock>> {
        let blocks = Arc::clone(&self).block_stream(range.clone()).boxed();
        let blocks = if self.fetches_logs() {
            self.attach_logs(range, blocks)
        } else {
            blocks
        };
        blocks.map_err(anyhow::Error::from).boxed()
    }

    async fn block(&self, n: u64) -> anyhow::Result<Option<RawBlock>> {
        Ok(RpcClient::block_again(self, n).await?)
    }

    async fn new_heads(&self) -> anyhow::Result<Option<Heads>> {
        Ok(RpcClient::new_heads(self))
    }
}
