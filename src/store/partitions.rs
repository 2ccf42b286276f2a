//! Partitions by block range of the tables declared `PARTITION BY RANGE
//! (block_number)` (transactions, authorizations, logs, and event tables
//! created since partitioning): [`PARTITION_BLOCKS`] blocks each, named
//! `<table>_p<N>`, created before the first write that needs one. A
//! rollback or re-index then touches the partitions of its blocks only.
//! A write whose blocks all fall in one partition copies its rows straight
//! into it ([`Partitions::direct`]): PostgreSQL then skips routing each row
//! through the parent (measured: ~11% of the CPU of a COPY of logs).
//!
//! It must not create anything but partitions of the tables it is given,
//! and creates them outside the writes' transactions (DDL on a partitioned
//! table locks it), one process at a time.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use sqlx::{AssertSqlSafe, PgPool};

use super::Result;

/// Blocks per partition; the migration that partitioned the tables uses
/// the same.
pub const PARTITION_BLOCKS: u64 = 1_000_000;

/// PostgreSQL cuts identifiers at 63 bytes.
const MAX_NAME: usize = 63;

/// Serialises partition creation across processes (of one schema: the
/// store makes the key the schema's own).
pub(super) const PARTITION_LOCK_KEY: i64 = 0x5e4d_e21d_e7e3;

/// The partitioned tables and the partitions known to exist.
#[derive(Clone, Default)]
pub struct Partitions {
    tables: Arc<Vec<&'static str>>,
    /// The advisory-lock key creation is serialised by.
    lock_key: i64,
    made: Arc<Mutex<HashSet<(&'static str, u64)>>>,
    /// Those of `made` this role may insert into directly (it owns them
    /// when it created them; one made by another role may only take rows
    /// through its parent).
    direct: Arc<Mutex<HashSet<(&'static str, u64)>>>,
}

/// `<table>_p<n>`, the table's name shortened if needed to fit.
pub fn partition_name(table: &str, n: u64) -> String {
    let suffix = format!("_p{n}");
    let keep = table.len().min(MAX_NAME - suffix.len());
    format!("{}{suffix}", &table[..keep])
}

impl Partitions {
    /// Those of `tables` that are partitioned in the database; partitions
    /// are created under advisory lock `lock_key`.
    pub async fn detect(
        pool: &PgPool,
        tables: &[&'static str],
        lock_key: i64,
    ) -> Result<Partitions> {
        let partitioned: Vec<String> = sqlx::query_scalar(
            "SELECT relname::text FROM pg_class
             WHERE relkind = 'p' AND relnamespace = current_schema()::regnamespace
               AND relname = ANY($1)",
        )
        .bind(tables)
        .fetch_all(pool)
        .await?;
        Ok(Partitions {
            tables: Arc::new(
                tables
                    .iter()
                    .copied()
                    .filter(|t| partitioned.iter().any(|p| p == t))
                    .collect(),
            ),
            lock_key,
            made: Default::default(),
            direct: Default::default(),
        })
    }

    pub fn contains(&self, table: &str) -> bool {
        self.tables.contains(&table)
    }

    /// Creates the partitions that blocks `first..=last` need.
    pub async fn ensure(&self, pool: &PgPool, first: u64, last: u64) -> Result<()> {
        let wanted: Vec<(&'static str, u64)> = (first / PARTITION_BLOCKS..=last / PARTITION_BLOCKS)
            .flat_map(|n| self.tables.iter().map(move |t| (*t, n)))
            .filter(|k| {
                !self
                    .made
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(k)
            })
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let mut tx = pool.begin().await?;
        sqlx::query("SELECT pg_advisory_xact_lock($1)")
            .bind(self.lock_key)
            .execute(&mut *tx)
            .await?;
        for &(table, n) in &wanted {
            // Names come from the table descriptions, never from input.
            sqlx::query(AssertSqlSafe(format!(
                "CREATE TABLE IF NOT EXISTS {} PARTITION OF {table} FOR VALUES FROM ({}) TO ({})",
                partition_name(table, n),
                n * PARTITION_BLOCKS,
                (n + 1) * PARTITION_BLOCKS
            )))
            .execute(&mut *tx)
            .await?;
        }
        let names: Vec<String> = wanted.iter().map(|&(t, n)| partition_name(t, n)).collect();
        let insertable: Vec<String> = sqlx::query_scalar(
            "SELECT relname::text FROM pg_class
             WHERE relnamespace = current_schema()::regnamespace AND relname = ANY($1)
               AND has_table_privilege(oid, 'INSERT')",
        )
        .bind(&names)
        .fetch_all(&mut *tx)
        .await?;
        tx.commit().await?;
        self.direct
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(
                wanted
                    .iter()
                    .zip(&names)
                    .filter(|(_, name)| insertable.contains(name))
                    .map(|(k, _)| *k),
            );
        self.made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(wanted);
        Ok(())
    }

    /// The partition of `table` that holds every block of `first..=last`,
    /// when there is one and this role may write to it directly (after
    /// [`Partitions::ensure`] for those blocks); `None`: write through
    /// `table` itself.
    pub fn direct(&self, table: &str, first: u64, last: u64) -> Option<String> {
        let n = first / PARTITION_BLOCKS;
        if last / PARTITION_BLOCKS != n {
            return None;
        }
        let direct = self.direct.lock().unwrap_or_else(|e| e.into_inner());
        let &(table, _) = direct.iter().find(|&&(t, m)| t == table && m == n)?;
        Some(partition_name(table, n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partition_names_fit_postgresql_identifiers() {
        assert_eq!(partition_name("transactions", 0), "transactions_p0");
        assert_eq!(partition_name("logs", 21), "logs_p21");
        let long = "a".repeat(63);
        let name = partition_name(&long, 1234);
        assert_eq!(name.len(), 63);
        assert!(name.ends_with("_p1234"));
    }
}
