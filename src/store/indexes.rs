//! The indexes a bulk load may drop: the lookup indexes users query by
//! (`transactions.sender`, `transactions.hash`, `authorizations.authority`,
//! `logs (address, topic0)`, and the optional ones a setting adds,
//! `index.optional_indexes`: `logs.topic0`) and the primary keys of every
//! table but `blocks`. Keeping them current row by row is the costliest
//! part of a bulk load for PostgreSQL (a B-tree insert per row and index,
//! each logged), while one sorted build after the load costs a fraction of
//! that, so a large backfill may drop them and build them at its end.
//! Exactly-once does not rest on the dropped keys: a block's rows are
//! written in the transaction that inserts its `blocks` row, and that key
//! stays. This module only runs the statements; `pipeline` decides when.
//!
//! The indexes themselves are described with their tables (`tables`); the
//! definitions built from them equal the migrations' (same names, same
//! columns, a key again a key), so a build after a drop restores the
//! migrated schema.

use std::time::Instant;

use super::tables::{LookupIndex, TABLES, Table};
use super::{Result, Store, StoreError};

/// How one index is built: by one process, with sort runs that stay in
/// the CPU's cache. A build's CPU goes to comparing keys; when the leading
/// key repeats (a few contracts emit most logs), each comparison reads both
/// tuples from memory, and a sort run larger than the cache misses on
/// almost every one. Parallel workers do not share that work, they add to
/// it. `logs (address, topic0)` over 4M logs, one process alone on the
/// server (docs/performance.md, 2026-12-07): 11.5-14.1 s of CPU with
/// 256 MB and the default 2 workers, 6.8-8.9 s with 16 MB and none; over
/// heavy-tailed real-looking addresses 7.9-8.6 s against 5.0-6.5 s; over
/// unique keys, no worse. Wall time on 2 cores stays about the same. The
/// sort memory is [`build_sort_memory_kb`].
const NO_PARALLEL_WORKERS: &str = "SET LOCAL max_parallel_maintenance_workers = 0";

/// Sort memory for an index build over a relation of `relation_bytes`:
/// 16 MB (cache-sized runs, see [`NO_PARALLEL_WORKERS`]) unless the runs
/// would then be too many to merge in one pass. PostgreSQL merges through a
/// buffer of ~272 KB per run, so one pass needs runs x 272 KB <= memory,
/// with runs ~ bytes / memory: memory >= sqrt(bytes x 272 KB). The
/// relation's size stands in for the sorted bytes (an index tuple is never
/// larger than its row). A partition of recent mainnet (1M blocks, ~65 GB
/// of logs) gets ~133 MB instead of three merge passes; the bench's 1M
/// transactions (~1 GB of logs) ~16.5 MB; at most 1 GB.
fn build_sort_memory_kb(relation_bytes: u64) -> u64 {
    const PER_RUN_BYTES: f64 = 272.0 * 1024.0;
    let one_pass = (relation_bytes as f64 * PER_RUN_BYTES).sqrt() / 1024.0;
    (one_pass.ceil() as u64).clamp(16 * 1024, 1024 * 1024)
}

/// Held (session advisory lock) while one process builds the indexes (the
/// schema's own key: see `schema::lock_key`).
const BUILD_LOCK_KEY: i64 = 0x5e4d_e21d_e7e4;

/// One index build: `index` on one `partition` of `table` (of `bytes`),
/// or on `table` itself when it is not partitioned (`None`).
struct Sort {
    table: &'static Table,
    index: &'static LookupIndex,
    partition: Option<String>,
    bytes: i64,
}

impl Store {
    /// Every lookup index this store keeps, with its table, in [`TABLES`]
    /// order: the optional ones only when the setting names them.
    fn lookup_indexes(&self) -> impl Iterator<Item = (&'static Table, &'static LookupIndex)> + '_ {
        TABLES
            .iter()
            .flat_map(|t| t.lookup_indexes.iter().map(move |i| (*t, i)))
            .filter(|(_, i)| !i.optional || self.optional_indexes.contains(&i.name))
    }

    /// The lookup indexes that do not exist (dropped by a bulk load that
    /// did not reach its end), in [`TABLES`] order.
    pub async fn missing_lookup_indexes(&self) -> Result<Vec<&'static str>> {
        let present: Vec<String> = sqlx::query_scalar(
            "SELECT c.relname::text FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
             WHERE c.relnamespace = current_schema()::regnamespace AND i.indisvalid
               AND c.relname = ANY($1)",
        )
        .bind(
            self.lookup_indexes()
                .map(|(_, i)| i.name)
                .collect::<Vec<_>>(),
        )
        .fetch_all(self.pool())
        .await?;
        Ok(self
            .lookup_indexes()
            .map(|(_, i)| i.name)
            .filter(|name| !present.iter().any(|p| p == name))
            .collect())
    }

    /// Drops every lookup index (those already missing are fine).
    pub async fn drop_lookup_indexes(&self) -> Result<()> {
        let mut tx = self.pool().begin().await?;
        for (table, index) in self.lookup_indexes() {
            // Names come from the table descriptions, never from input.
            sqlx::query(sqlx::AssertSqlSafe(index.drop_statement(table)))
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Builds the missing lookup indexes, each in its own transaction, so
    /// an interrupted build keeps the ones it finished; on a partitioned
    /// table, partition by partition (the table's index is valid once every
    /// partition's is attached). Returns the names built.
    ///
    /// One process builds at a time (several leased backfills finish
    /// together): the others wait, then find nothing missing.
    pub async fn build_lookup_indexes(&self) -> Result<Vec<&'static str>> {
        let mut guard = self.pool().acquire().await?;
        let key = self.lock_key(BUILD_LOCK_KEY);
        sqlx::query("SELECT pg_advisory_lock($1)")
            .bind(key)
            .execute(&mut *guard)
            .await?;
        let built = self.build_missing().await;
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(key)
            .execute(&mut *guard)
            .await?;
        built
    }

    /// The missing indexes in three steps. First each partitioned table's
    /// own index (`ON ONLY`, invalid until its partitions' are attached).
    /// Then the sorts, side by side ([`Store::builds_at_once`]), largest
    /// partition first: one `CREATE [UNIQUE] INDEX` per partition and
    /// index, each one PostgreSQL process, each holding only a share lock
    /// on its partition, which the others' do not wait for (a key is built
    /// as a unique index here because `ADD PRIMARY KEY` would take its
    /// partition exclusively, so a table's key and lookup index could not
    /// sort together). Last, one at a time and quick, a unique index
    /// becomes its partition's key (`USING INDEX`) and each index is
    /// attached to its table's. On the bench's 1M transactions the
    /// `logs` key and the `transactions` indexes then sort beside
    /// `logs (address, topic0)` instead of after it.
    async fn build_missing(&self) -> Result<Vec<&'static str>> {
        use futures::StreamExt;

        let missing = self.missing_lookup_indexes().await?;
        let wanted: Vec<(&'static Table, &'static LookupIndex)> = self
            .lookup_indexes()
            .filter(|(_, i)| missing.contains(&i.name))
            .collect();
        let mut sorts = Vec::new();
        for &(table, index) in &wanted {
            if self.is_partitioned(table.name) {
                sorts.extend(self.partitions_lacking(table, index).await?);
            } else if !self.relation_exists(index.name).await? {
                sorts.push(Sort {
                    table,
                    index,
                    partition: None,
                    bytes: 0,
                });
            }
        }
        // Largest first; of one partition, the lookup index (keys arrive in
        // heap order and sort fastest).
        sorts.sort_by_key(|s| (std::cmp::Reverse(s.bytes), s.index.primary));
        let at_once = self.builds_at_once().await?;
        // Every sort runs to its end or its first error (none is cut off
        // mid-statement); then the first error is the answer.
        let sorted: Vec<Result<Sort>> =
            futures::stream::iter(sorts.into_iter().map(|s| self.sort(s)))
                .buffer_unordered(at_once)
                .collect()
                .await;
        let mut first_error = None;
        for sort in sorted {
            match sort {
                Ok(sort) => {
                    if let Some(partition) = &sort.partition {
                        self.attach(sort.table, sort.index, partition).await?;
                    }
                }
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        Ok(missing)
    }

    /// How many sorts run at once: as many processes as the server lets
    /// one index build use (`max_parallel_maintenance_workers`, 2 unless
    /// its administrator says otherwise: here they are whole builds, not
    /// workers of one), within the pool's connections besides the one
    /// holding the build lock. Measured alone on the bench's tables on 2
    /// cores (docs/performance.md): two at once took 6.7-7.9 s and
    /// 11.5-13.2 s of CPU, three 8.2-10.7 s and 11.8-15.4 s, one after
    /// another 12.5-15.0 s and 12.2-14.6 s.
    async fn builds_at_once(&self) -> Result<usize> {
        let workers: String =
            sqlx::query_scalar("SELECT current_setting('max_parallel_maintenance_workers')")
                .fetch_one(self.pool())
                .await?;
        let server = workers.trim().parse::<usize>().unwrap_or(0).max(1);
        let pool = (self.pool().options().get_max_connections() as usize).saturating_sub(1);
        Ok(server.min(pool).max(1))
    }

    /// The partitions of `table` that have no `index` attached, each a
    /// [`Sort`] to run; creates the table's own index first if it is not
    /// there (it may be, invalid, from a build that was interrupted).
    async fn partitions_lacking(
        &self,
        table: &'static Table,
        index: &'static LookupIndex,
    ) -> Result<Vec<Sort>> {
        if !self.relation_exists(index.name).await? {
            // Names come from the table descriptions, never from input.
            sqlx::query(sqlx::AssertSqlSafe(index.create_on_only_statement(table)))
                .execute(self.pool())
                .await?;
        }
        let lacking: Vec<(String, i64)> = sqlx::query_as(
            "SELECT c.relname::text, pg_relation_size(c.oid)
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = $1::regclass
               AND NOT EXISTS (
                   SELECT 1 FROM pg_inherits a JOIN pg_index x ON x.indexrelid = a.inhrelid
                   WHERE a.inhparent = $2::regclass AND x.indrelid = c.oid)
             ORDER BY c.relname",
        )
        .bind(table.name)
        .bind(index.name)
        .fetch_all(self.pool())
        .await?;
        Ok(lacking
            .into_iter()
            .map(|(partition, bytes)| Sort {
                table,
                index,
                partition: Some(partition),
                bytes,
            })
            .collect())
    }

    /// Runs one sort: `index` on its partition (as a plain unique index
    /// for a key, made the key by [`Store::attach`]), or on an
    /// unpartitioned table as it is declared.
    async fn sort(&self, sort: Sort) -> Result<Sort> {
        let started = Instant::now();
        let (table, index) = (sort.table, sort.index);
        let relation = sort.partition.as_deref().unwrap_or(table.name);
        let mut tx = self.begin_build(relation).await?;
        let statement = match &sort.partition {
            Some(partition) => index.sort_on_partition_statement(table, partition),
            None => index.create_statement(table),
        };
        // Names come from the table descriptions and the catalog.
        sqlx::query(sqlx::AssertSqlSafe(statement))
            .execute(&mut *tx)
            .await
            .map_err(|e| built_key(e, table, index))?;
        tx.commit().await?;
        tracing::info!(target: "indexer::store", index = index.name, relation, secs = started.elapsed().as_secs_f64(), "built lookup index");
        Ok(sort)
    }

    /// Makes `index`'s sorted index on `partition` what the table's index
    /// expects there (its key, for a key) and attaches it; one transaction.
    async fn attach(&self, table: &Table, index: &LookupIndex, partition: &str) -> Result<()> {
        let child = index.partition_index_name(table, partition);
        let mut tx = self.pool().begin().await?;
        if index.primary {
            let is_key: bool = sqlx::query_scalar(
                "SELECT EXISTS (SELECT 1 FROM pg_constraint
                                WHERE conname = $1 AND conrelid = $2::regclass AND contype = 'p')",
            )
            .bind(&child)
            .bind(partition)
            .fetch_one(&mut *tx)
            .await?;
            if !is_key {
                // Names come from the table descriptions and the catalog.
                sqlx::query(sqlx::AssertSqlSafe(format!(
                    "ALTER TABLE {partition} ADD CONSTRAINT {child} PRIMARY KEY USING INDEX {child}"
                )))
                .execute(&mut *tx)
                .await?;
            }
        }
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "ALTER INDEX {} ATTACH PARTITION {child}",
            index.name
        )))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether a relation (here: an index) of that name exists in the
    /// schema, valid or not.
    async fn relation_exists(&self, name: &str) -> Result<bool> {
        Ok(sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
            .bind(name)
            .fetch_one(self.pool())
            .await?)
    }

    /// A transaction for one index build on `relation` (a table or one
    /// partition): one process, [`build_sort_memory_kb`] of sort memory.
    async fn begin_build(
        &self,
        relation: &str,
    ) -> Result<sqlx::Transaction<'static, sqlx::Postgres>> {
        let mut tx = self.pool().begin().await?;
        let bytes: i64 = sqlx::query_scalar("SELECT pg_relation_size($1::regclass)")
            .bind(relation)
            .fetch_one(&mut *tx)
            .await?;
        let kb = build_sort_memory_kb(bytes.max(0) as u64);
        // A number this function computed; SET takes no bound parameters.
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SET LOCAL maintenance_work_mem = '{kb}kB'"
        )))
        .execute(&mut *tx)
        .await?;
        sqlx::query(NO_PARALLEL_WORKERS).execute(&mut *tx).await?;
        Ok(tx)
    }

    /// Blocks stored in all, and how many of them lie in `from..=to`
    /// (an index-only count; once per large range).
    pub async fn stored_blocks(&self, from: u64, to: u64) -> Result<(u64, u64)> {
        let (all, within): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE number BETWEEN $1 AND $2) FROM blocks",
        )
        .bind(from as i64)
        .bind(to as i64)
        .fetch_one(self.pool())
        .await?;
        Ok((all as u64, within as u64))
    }
}

/// A key that cannot be built holds a row twice: say which table and what
/// that means, not only PostgreSQL's words.
fn built_key(e: sqlx::Error, table: &Table, index: &LookupIndex) -> StoreError {
    let duplicate = e
        .as_database_error()
        .is_some_and(|d| d.code().as_deref() == Some("23505"));
    if index.primary && duplicate {
        StoreError::DuplicateRows {
            table: table.name,
            key: index.columns,
            detail: e.to_string(),
        }
    } else {
        e.into()
    }
}

#[cfg(test)]
mod tests {
    use super::build_sort_memory_kb;

    #[test]
    fn sort_memory_is_cache_sized_until_one_merge_pass_needs_more() {
        const MB: u64 = 1024 * 1024;
        assert_eq!(build_sort_memory_kb(0), 16 * 1024);
        assert_eq!(build_sort_memory_kb(512 * MB), 16 * 1024);
        // The bench's 1M-transaction partition (~1 GB of logs): ~16.5 MB.
        let kb = build_sort_memory_kb(1024 * MB);
        assert!((16 * 1024..17 * 1024).contains(&kb), "{kb}");
        // ~65 GB (a mainnet partition): ~130 MB, one pass.
        let kb = build_sort_memory_kb(65 * 1024 * MB);
        assert!((130 * 1024..=135 * 1024).contains(&kb), "{kb}");
        let (memory, runs) = (kb * 1024, 65 * 1024 * MB / (kb * 1024));
        assert!(runs * 272 * 1024 <= memory, "{runs} runs in {kb} kB");
        // Never more than 1 GB.
        assert_eq!(build_sort_memory_kb(u64::MAX), 1024 * 1024);
    }
}
