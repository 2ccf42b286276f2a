//! PostgreSQL: every SQL statement of the project lives under this module.
//!
//! Writes are bulk (binary COPY) and atomic: one database transaction holds
//! whole blocks, their transactions and authorizations, and the checkpoint,
//! so a crash at any instant leaves no partial block. Writing a block that is
//! already stored with the same hash changes nothing; a reorg is undone by
//! [`Store::rollback_to`], an indexed range delete per table (the
//! write/undo pair of reth's stages). This module knows nothing of RPC.

mod copy;
mod indexes;
pub mod query;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection, PgPool, Row};

use crate::decode::{B256, hex0x};
use crate::recover::RecoveredBlock;
use copy::CopyBuf;
pub use indexes::LOOKUP_INDEXES;

/// The schema, embedded from `migrations/` and applied at start.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!();

/// Every table keyed by block number: what a rollback must clear. A table
/// added later joins this list.
const BLOCK_TABLES: [&str; 3] = ["blocks", "transactions", "authorizations"];

/// Advisory-lock key held by the one process allowed to write.
const WRITER_LOCK_KEY: i64 = 0x5e4d_e21d_e7e1;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database: {0}")]
    Sql(#[from] sqlx::Error),
    #[error("database schema: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("block {number}: {field} {value} does not fit the column")]
    OutOfRange {
        number: u64,
        field: &'static str,
        value: String,
    },
    #[error("block {number}: parent hash {parent} does not match stored block {}: {stored}", number - 1)]
    ParentMismatch {
        number: u64,
        parent: String,
        stored: String,
    },
    #[error(
        "another sender-indexer is writing to this database\n\nstop it first, or point this one at another database"
    )]
    Locked,
}

type Result<T> = std::result::Result<T, StoreError>;

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

/// Holds the writer lock for as long as it lives.
pub struct WriterLock {
    conn: PgConnection,
}

impl WriterLock {
    /// Releases the lock now rather than when the server notices we left.
    pub async fn release(mut self) -> Result<()> {
        sqlx::query("SELECT pg_advisory_unlock($1)")
            .bind(WRITER_LOCK_KEY)
            .execute(&mut self.conn)
            .await?;
        self.conn.close().await?;
        Ok(())
    }
}

/// How long [`Store::lock_writer`] waits for a busy lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Clone)]
pub struct Store {
    pool: PgPool,
}

impl Store {
    /// Connects and applies the schema migrations.
    pub async fn connect(options: PgConnectOptions, max_connections: u32) -> Result<Store> {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(2))
            .connect_with(options)
            .await?;
        MIGRATOR.run(&pool).await?;
        Ok(Store { pool })
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Takes the database's writer lock on a dedicated connection, so two
    /// indexers never interleave writes and checkpoints.
    ///
    /// A process that just exited may hold the lock until the server notices
    /// its disconnect, so a busy lock is retried for a few seconds.
    pub async fn lock_writer(&self) -> Result<WriterLock> {
        let mut conn = PgConnection::connect_with(&self.pool.connect_options()).await?;
        let deadline = std::time::Instant::now() + LOCK_WAIT;
        loop {
            let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)")
                .bind(WRITER_LOCK_KEY)
                .fetch_one(&mut conn)
                .await?;
            if locked {
                return Ok(WriterLock { conn });
            }
            if std::time::Instant::now() >= deadline {
                return Err(StoreError::Locked);
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    }

    /// The last block the pipeline committed.
    pub async fn checkpoint(&self) -> Result<Option<(u64, B256)>> {
        let row = sqlx::query("SELECT block_number, block_hash FROM checkpoint")
            .fetch_optional(&self.pool)
            .await?;
        Ok(row.map(|r| (r.get::<i64, _>(0) as u64, to_b256(r.get(1)))))
    }

    pub async fn block_hash(&self, number: u64) -> Result<Option<B256>> {
        let hash: Option<Vec<u8>> = sqlx::query_scalar("SELECT hash FROM blocks WHERE number = $1")
            .bind(number as i64)
            .fetch_optional(&self.pool)
            .await?;
        Ok(hash.map(to_b256))
    }

    /// Writes `blocks` (consecutive, ascending) and advances the checkpoint,
    /// all in one transaction. Fails with [`StoreError::ParentMismatch`],
    /// writing nothing, when the first block does not extend the stored
    /// block below it, or when the blocks do not chain.
    pub async fn write_blocks(&self, blocks: &[RecoveredBlock]) -> Result<WriteOutcome> {
        let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
            return Ok(WriteOutcome::default());
        };
        for pair in blocks.windows(2) {
            if pair[1].parent_hash != pair[0].hash || pair[1].number != pair[0].number + 1 {
                return Err(StoreError::ParentMismatch {
                    number: pair[1].number,
                    parent: hex0x(&pair[1].parent_hash),
                    stored: hex0x(&pair[0].hash),
                });
            }
        }
        let mut tx = self.pool.begin().await?;
        let stored: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT number, hash FROM blocks WHERE number BETWEEN $1 AND $2")
                .bind(first.number as i64 - 1)
                .bind(last.number as i64)
                .fetch_all(&mut *tx)
                .await?;
        let stored: std::collections::HashMap<u64, Vec<u8>> =
            stored.into_iter().map(|(n, h)| (n as u64, h)).collect();
        if let Some(parent) = first.number.checked_sub(1).and_then(|p| stored.get(&p)) {
            if parent[..] != first.parent_hash[..] {
                return Err(StoreError::ParentMismatch {
                    number: first.number,
                    parent: hex0x(&first.parent_hash),
                    stored: hex0x(parent),
                });
            }
        }
        let mut outcome = WriteOutcome::default();
        let mut replaced = Vec::new();
        let mut fresh = Vec::with_capacity(blocks.len());
        for b in blocks {
            match stored.get(&b.number) {
                Some(h) if h[..] == b.hash[..] => outcome.blocks_skipped += 1,
                Some(_) => {
                    replaced.push(b.number as i64);
                    fresh.push(b);
                }
                None => fresh.push(b),
            }
        }
        if !replaced.is_empty() {
            for table in BLOCK_TABLES {
                let column = if table == "blocks" {
                    "number"
                } else {
                    "block_number"
                };
                // Table and column names come from constants, never from input.
                sqlx::query(AssertSqlSafe(format!(
                    "DELETE FROM {table} WHERE {column} = ANY($1)"
                )))
                .bind(&replaced)
                .execute(&mut *tx)
                .await?;
            }
            outcome.blocks_replaced = replaced.len() as u64;
        }
        if !fresh.is_empty() {
            let (blocks_copy, txs_copy, auths_copy) = encode(&fresh)?;
            copy_in(&mut tx, "COPY blocks (number, hash, parent_hash, timestamp, tx_count) FROM STDIN (FORMAT binary)", blocks_copy).await?;
            copy_in(&mut tx, "COPY transactions (block_number, tx_index, hash, tx_type, sender, node_from, from_matches, to_address, nonce, value, error) FROM STDIN (FORMAT binary)", txs_copy).await?;
            if let Some(auths) = auths_copy {
                copy_in(&mut tx, "COPY authorizations (block_number, tx_index, auth_index, chain_id, address, nonce, authority, error) FROM STDIN (FORMAT binary)", auths).await?;
            }
            outcome.blocks_written = fresh.len() as u64;
            outcome.txs_written = fresh.iter().map(|b| b.txs.len() as u64).sum();
        }
        sqlx::query(
            "INSERT INTO checkpoint (id, block_number, block_hash) VALUES (TRUE, $1, $2)
             ON CONFLICT (id) DO UPDATE
               SET block_number = EXCLUDED.block_number, block_hash = EXCLUDED.block_hash, updated_at = now()
               WHERE checkpoint.block_number <= EXCLUDED.block_number",
        )
        .bind(last.number as i64)
        .bind(&last.hash[..])
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(outcome)
    }

    /// Deletes every row above `ancestor` and moves the checkpoint to it, in
    /// one transaction; records the reorg. Returns the blocks deleted.
    pub async fn rollback_to(&self, ancestor: u64, new_hash: Option<&B256>) -> Result<u64> {
        let mut tx = self.pool.begin().await?;
        let tip: Option<(i64, Vec<u8>)> = sqlx::query_as(
            "SELECT number, hash FROM blocks WHERE number > $1 ORDER BY number DESC LIMIT 1",
        )
        .bind(ancestor as i64)
        .fetch_optional(&mut *tx)
        .await?;
        let mut deleted = 0;
        for table in BLOCK_TABLES {
            let column = if table == "blocks" {
                "number"
            } else {
                "block_number"
            };
            let r = sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {table} WHERE {column} > $1"
            )))
            .bind(ancestor as i64)
            .execute(&mut *tx)
            .await?;
            if table == "blocks" {
                deleted = r.rows_affected();
            }
        }
        let ancestor_hash: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT hash FROM blocks WHERE number = $1")
                .bind(ancestor as i64)
                .fetch_optional(&mut *tx)
                .await?;
        match ancestor_hash {
            Some(h) => {
                sqlx::query(
                    "INSERT INTO checkpoint (id, block_number, block_hash) VALUES (TRUE, $1, $2)
                     ON CONFLICT (id) DO UPDATE SET block_number = $1, block_hash = $2, updated_at = now()",
                )
                .bind(ancestor as i64)
                .bind(h)
                .execute(&mut *tx)
                .await?;
            }
            None => {
                sqlx::query("DELETE FROM checkpoint")
                    .execute(&mut *tx)
                    .await?;
            }
        }
        if let Some((tip, old_hash)) = tip {
            sqlx::query(
                "INSERT INTO reorgs (ancestor, depth, old_hash, new_hash) VALUES ($1, $2, $3, $4)",
            )
            .bind(ancestor as i64)
            .bind((tip as u64 - ancestor) as i32)
            .bind(old_hash)
            .bind(new_hash.map(|h| h.to_vec()))
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(deleted)
    }
}

async fn copy_in(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    statement: &str,
    data: Vec<u8>,
) -> Result<()> {
    let mut copy = tx.copy_in_raw(statement).await?;
    copy.send(data).await?;
    copy.finish().await?;
    Ok(())
}

fn to_b256(v: Vec<u8>) -> B256 {
    let mut out = [0u8; 32];
    let n = v.len().min(32);
    out[32 - n..].copy_from_slice(&v[v.len() - n..]);
    out
}

/// COPY data for blocks, transactions, and authorizations (if any).
type CopyStreams = (Vec<u8>, Vec<u8>, Option<Vec<u8>>);

/// The three COPY streams for `blocks`: blocks, transactions, and
/// authorizations (None when there are none).
fn encode(blocks: &[&RecoveredBlock]) -> Result<CopyStreams> {
    let mut b = CopyBuf::new(5);
    let mut t = CopyBuf::new(11);
    let mut a = CopyBuf::new(8);
    let mut any_auth = false;
    let range = |number: u64, field: &'static str, value: String| StoreError::OutOfRange {
        number,
        field,
        value,
    };
    for block in blocks {
        let number = i64::try_from(block.number)
            .map_err(|_| range(block.number, "number", block.number.to_string()))?;
        b.row()
            .i64(number)
            .bytes(&block.hash)
            .bytes(&block.parent_hash)
            .timestamp(block.timestamp)
            .i32(block.txs.len() as i32);
        for (i, rtx) in block.txs.iter().enumerate() {
            let tx = &rtx.tx;
            let sender = rtx.recovered.sender.as_ref().ok();
            t.row().i64(number).i32(i as i32);
            // The pipeline refuses transactions without a hash before here.
            t.bytes(tx.hash.as_ref().map_or(&[][..], |h| &h[..]));
            t.i16(tx.tx_type as i16);
            t.opt_bytes(sender.map(|s| &s[..]));
            t.opt_bytes(tx.from.as_ref().map(|f| &f[..]));
            match (sender, &tx.from) {
                (Some(s), Some(f)) => t.bool(s == f),
                _ => t.null(),
            };
            t.opt_bytes(tx.to.as_ref().map(|x| &x[..]));
            match tx.nonce {
                Some(n) => {
                    let n = i64::try_from(n)
                        .map_err(|_| range(block.number, "nonce", n.to_string()))?;
                    t.i64(n)
                }
                None => t.null(),
            };
            match &tx.value {
                Some(v) => t.numeric(v),
                None => t.null(),
            };
            match &rtx.recovered.sender {
                Err(e) => t.text(&e.to_string()),
                Ok(_) => t.null(),
            };
            for (j, (auth, authority)) in tx
                .authorization_list
                .iter()
                .zip(&rtx.recovered.authorities)
                .enumerate()
            {
                any_auth = true;
                a.row().i64(number).i32(i as i32).i32(j as i32);
                match &auth.chain_id {
                    Some(c) => a.numeric(c),
                    None => a.null(),
                };
                a.opt_bytes(auth.address.as_ref().map(|x| &x[..]));
                match auth.nonce {
                    Some(n) => a.numeric(&crate::decode::U256::from_u64(n)),
                    None => a.null(),
                };
                a.opt_bytes(authority.as_ref().ok().map(|x| &x[..]));
                match authority {
                    Err(e) => a.text(&e.to_string()),
                    Ok(_) => a.null(),
                };
            }
        }
    }
    Ok((b.finish(), t.finish(), any_auth.then(|| a.finish())))
}
