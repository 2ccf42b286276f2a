//! The chain the tables hold: the node's `eth_chainId`, recorded with the
//! tables (the one-row `chain` table) by the first indexing run, so that a
//! later run against a node of another chain can be refused before it
//! writes anything. This module reads and records it; whether a node's id
//! is acceptable is decided by the caller (`app`).

use super::{Result, Store};

impl Store {
    /// The chain id recorded with the tables, if any.
    pub async fn chain_id(&self) -> Result<Option<u64>> {
        let id: Option<String> = sqlx::query_scalar("SELECT chain_id::text FROM chain")
            .fetch_optional(self.pool())
            .await?;
        Ok(id.map(|s| s.parse().expect("NUMERIC(20,0) of a u64")))
    }

    /// Records `chain_id` when no chain id is recorded yet, and returns the
    /// recorded one (`chain_id` itself, or another, which the caller must
    /// refuse). Two processes starting together record one of them.
    pub async fn record_chain_id(&self, chain_id: u64) -> Result<u64> {
        sqlx::query(
            "INSERT INTO chain (chain_id) VALUES ($1::numeric) ON CONFLICT (id) DO NOTHING",
        )
        .bind(chain_id.to_string())
        .execute(self.pool())
        .await?;
        Ok(self
            .chain_id()
            .await?
            .expect("the chain id was recorded a moment ago"))
    }
}
