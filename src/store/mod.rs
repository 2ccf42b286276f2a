//! PostgreSQL: every SQL statement of the project lives under this module.
//!
//! Writes are bulk (binary COPY) and atomic: one database transaction holds
//! whole blocks, their transactions and authorizations, and the checkpoint,
//! so a crash at any instant leaves no partial block. Writing a block that is
//! already stored with the same hash changes nothing; a reorg is undone by
//! [`Store::rollback_to`], an indexed range delete per table (the
//! write/undo pair of reth's stages). Each table is described once, in
//! `tables` ([`TABLES`]); every statement here that touches block data
//! iterates those descriptions. [`Store`] is the pipeline's
//! [`Sink`](crate::sink::Sink) (see `sink`). The tables live in one
//! PostgreSQL schema (`schema`: `database.schema`, or the connection's
//! default), with the chain id they hold (`chain`). This module knows
//! nothing of RPC.

mod chain;
mod copy;
mod events;
mod indexes;
mod partitions;
pub mod query;
mod reconnect;
mod schema;
mod segments;
mod sink;
mod tables;

use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, Connection, PgConnection, PgPool, Postgres, Row, Transaction};

use crate::block::Block;
use crate::decode::B256;
use crate::sink::{WriteOutcome, Written};
use copy::CopyBuf;
pub use partitions::{PARTITION_BLOCKS, partition_name};
pub use reconnect::Reconnecting;
pub use schema::SchemaName;
pub use segments::{Lease, SegmentRow};
pub use tables::{LookupIndex, Rows, TABLES, Table, optional_indexes};

/// The schema, embedded from `migrations/` and applied at start.
pub static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!();

/// Advisory-lock key held by the one process allowed to write (in
/// `public`; every other schema has its own: see `schema::lock_key`).
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
    #[error("{0}")]
    Events(String),
    #[error(
        "setting index.optional_indexes: {name} is not an optional index\n\nhint: the optional ones are: {known}"
    )]
    UnknownIndex { name: String, known: String },
    /// A key dropped for a bulk load cannot be built again: the table holds
    /// a row twice, which the writes never do.
    #[error(
        "table {table}: its primary key ({key}) cannot be built after the bulk load: some rows are there twice ({detail})\n\nhint: this is a bug (a block's rows are written once, with its `blocks` row); please report it. To go on: delete the duplicated block's row from blocks and its rows from {table} (WHERE number / block_number = N), then run the same backfill again: it indexes that block once more and builds the key"
    )]
    DuplicateRows {
        table: &'static str,
        key: &'static str,
        detail: String,
    },
    /// A block reached the store without what checking it adds: a bug in
    /// the pipeline, never written half.
    #[error("block {number}: {what} missing; it was not checked before being stored")]
    Unchecked { number: u64, what: &'static str },
    #[error(
        "schema {schema} does not exist in this database, and this role may not create it ({reason})\n\nhint: have its owner create it once (CREATE SCHEMA {schema} AUTHORIZATION <this role>), or run with a role that has CREATE on the database"
    )]
    SchemaNotCreated { schema: SchemaName, reason: String },
    #[error(
        "schema {schema} does not exist in this database: nothing was indexed into it\n\nhint: check --schema / DATABASE_SCHEMA (database.schema); backfill, follow and sync create it"
    )]
    SchemaMissing { schema: SchemaName },
    #[error(
        "another sender-indexer is writing to this database\n\nstop it first, or point this one at another database"
    )]
    Locked,
    #[error(
        "the writer lock was lost while the database was away, and another sender-indexer holds it now\n\nonly one indexer may write to a database; stop the other one, then rerun this one (it resumes after the checkpoint)"
    )]
    LockLost,
    #[error(
        "the database came back without blocks it had committed: this run's checkpoint was block {committed}, the database's is {}\n\nit lost acknowledged commits (synchronous_commit off, or a failover to a replica that was behind); a rerun resumes from its checkpoint and fills the gap",
        checkpoint.map_or("none".to_owned(), |c| format!("block {c}"))
    )]
    CommitsLost {
        committed: u64,
        checkpoint: Option<u64>,
    },
    #[error("segment {first}: the lease expired and another process took the segment over")]
    LeaseLost { first: u64 },
    #[error(
        "segment {first}: its committed progress is block {next}, but this process was about to write block {at}: the database lost acknowledged commits (synchronous_commit off, or a failover to a replica that was behind); the segment is leased again from its progress"
    )]
    SegmentGap { first: u64, next: u64, at: u64 },
    #[error(
        "blocks {gap_first}..={gap_last} of the range {from}..={to} lie in segment {first}..={last}, which reaches outside the range and is leased right now by {owner} (a backfill over a range that holds it whole): this run can neither lease it nor split it at the range's edge\n\nhint: wait until that backfill is done (its segment is then done, and this run finds it so), or run this one over a range that contains the segment whole (e.g. --from {from_hint} --to {to_hint}) to share it"
    )]
    SegmentStraddles {
        owner: String,
        from: u64,
        to: u64,
        gap_first: u64,
        gap_last: u64,
        first: u64,
        last: u64,
        from_hint: u64,
        to_hint: u64,
    },
}

impl StoreError {
    /// Whether the statement failed because the connection did (server
    /// restarted, crashed or shutting down, network gone), so that the
    /// same statement may succeed on a new connection.
    pub fn connection_lost(&self) -> bool {
        let StoreError::Sql(e) = self else {
            return false;
        };
        match e {
            sqlx::Error::Io(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed => true,
            // Class 08: connection exception; 57P01-57P03: admin or crash
            // shutdown, cannot connect now (starting up, recovering).
            sqlx::Error::Database(db) => db
                .code()
                .is_some_and(|c| c.starts_with("08") || matches!(&*c, "57P01" | "57P02" | "57P03")),
            _ => false,
        }
    }
}

type Result<T> = std::result::Result<T, StoreError>;

/// How a process holds the database's writer lock (a session advisory
/// lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Alone: a `backfill` without segments, and `follow`/`sync`.
    Exclusive,
    /// Shared by any number of leased backfills (which coordinate through
    /// the `segments` table), and by none of the exclusive writers.
    Shared,
}

/// Holds the writer lock for as long as it lives.
pub struct WriterLock {
    conn: PgConnection,
    mode: LockMode,
    /// The schema's own key ([`WRITER_LOCK_KEY`] made the schema's).
    key: i64,
    /// The process's own key, once taken on this connection (see
    /// [`WriterLock::hold_owner_key`]).
    owner_key: Option<i64>,
}

impl WriterLock {
    /// Takes `key` (this process's own, random) on the lock's connection,
    /// once: while the process lives, so does that lock, and a segment
    /// leased under `key` whose lock is gone is taken over at once.
    pub async fn hold_owner_key(&mut self, key: i64) -> Result<()> {
        if self.owner_key != Some(key) {
            sqlx::query("SELECT pg_advisory_lock($1)")
                .bind(key)
                .execute(&mut self.conn)
                .await?;
            self.owner_key = Some(key);
        }
        Ok(())
    }

    /// Whether the lock's connection is still alive (and so the lock
    /// still held).
    pub async fn check(&mut self) -> Result<()> {
        sqlx::query("SELECT 1").execute(&mut self.conn).await?;
        Ok(())
    }

    pub fn mode(&self) -> LockMode {
        self.mode
    }

    /// Releases the lock now rather than when the server notices we left.
    pub async fn release(mut self) -> Result<()> {
        let unlock = match self.mode {
            LockMode::Exclusive => "SELECT pg_advisory_unlock($1)",
            LockMode::Shared => "SELECT pg_advisory_unlock_shared($1)",
        };
        sqlx::query(unlock)
            .bind(self.key)
            .execute(&mut self.conn)
            .await?;
        self.conn.close().await?;
        Ok(())
    }
}

/// What [`Store::open`] does to the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// Creates the schema if missing, applies the migrations.
    Create,
    /// Applies the migrations; the schema must exist.
    Migrate,
    /// Nothing: for a role that may not create anything.
    AsIs,
}

/// Bytes of COPY data sent at once: small beside a write batch (tens of
/// MB), large beside a round trip.
const COPY_PIECE: usize = 1 << 20;

/// How long [`Store::lock_writer`] waits for a busy lock.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

#[derive(Clone)]
pub struct Store {
    pool: PgPool,
    /// The schema the tables live in, as the connections resolve it
    /// (`None`: no schema of the `search_path` exists).
    schema: Option<std::sync::Arc<str>>,
    /// [`TABLES`], then the decoded event tables ([`Store::with_events`]).
    tables: std::sync::Arc<Vec<&'static Table>>,
    /// Those of them partitioned by block range.
    partitions: partitions::Partitions,
    /// The optional lookup indexes kept ([`Store::with_optional_indexes`]).
    optional_indexes: std::sync::Arc<Vec<&'static str>>,
}

impl Store {
    /// Connects and applies the migrations, in the connection's default
    /// schema.
    pub async fn connect(options: PgConnectOptions, max_connections: u32) -> Result<Store> {
        Self::open(options, max_connections, None, Open::Migrate).await
    }

    /// [`Store::connect`] with every table (the migrations' own too) in
    /// `schema`, which is created if missing when `create`, else must
    /// exist.
    pub async fn connect_in(
        options: PgConnectOptions,
        max_connections: u32,
        schema: &SchemaName,
        create: bool,
    ) -> Result<Store> {
        let open = if create { Open::Create } else { Open::Migrate };
        Self::open(options, max_connections, Some(schema), open).await
    }

    /// Connects without touching the database: for read-only use by a
    /// role that may not create anything (`sql`).
    pub async fn connect_as_is(options: PgConnectOptions, max_connections: u32) -> Result<Store> {
        Self::open(options, max_connections, None, Open::AsIs).await
    }

    /// [`Store::connect_as_is`] in `schema`, which must exist.
    pub async fn connect_as_is_in(
        options: PgConnectOptions,
        max_connections: u32,
        schema: &SchemaName,
    ) -> Result<Store> {
        Self::open(options, max_connections, Some(schema), Open::AsIs).await
    }

    async fn open(
        options: PgConnectOptions,
        max_connections: u32,
        schema: Option<&SchemaName>,
        open: Open,
    ) -> Result<Store> {
        let migrate = open != Open::AsIs;
        let options = match schema {
            Some(s) => schema::in_schema(options, s),
            None => options,
        };
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(2))
            // A statement waits this long for a connection; a database that
            // went away is retried by `Reconnecting`, within its budget.
            .acquire_timeout(std::time::Duration::from_secs(5))
            .connect_with(options)
            .await?;
        match schema {
            Some(s) if open == Open::Create => schema::create_if_missing(&pool, s).await?,
            Some(s) if !schema::exists(&pool, s).await? => {
                return Err(StoreError::SchemaMissing { schema: s.clone() });
            }
            _ => {}
        }
        if migrate {
            MIGRATOR.run(&pool).await?;
        }
        let mut store = Store {
            schema: schema::current(&pool).await?.map(Into::into),
            pool,
            tables: std::sync::Arc::new(TABLES.to_vec()),
            partitions: Default::default(),
            optional_indexes: Default::default(),
        };
        if migrate {
            store.partitions = store.detect_partitions().await?;
        }
        Ok(store)
    }

    /// The schema the tables live in (`database.schema`, or the first
    /// existing schema of the connection's `search_path`).
    pub fn schema(&self) -> Option<&str> {
        self.schema.as_deref()
    }

    /// Advisory-lock key `base`, made this schema's own.
    fn lock_key(&self, base: i64) -> i64 {
        schema::lock_key(base, self.schema())
    }

    /// Adds a decoded table per `[[events]]` entry, creating those that do
    /// not exist yet; a table created for another signature is an error.
    pub async fn with_events(mut self, events: &[crate::config::EventSettings]) -> Result<Store> {
        let described = events::describe(events)?;
        events::create(&self.pool, &described, self.schema()).await?;
        let mut tables = TABLES.to_vec();
        tables.extend(described);
        self.tables = std::sync::Arc::new(tables);
        self.partitions = self.detect_partitions().await?;
        Ok(self)
    }

    /// Keeps the optional lookup indexes `names` (`index.optional_indexes`):
    /// built when missing, dropped and built again around a bulk load like
    /// the others. A name that is no optional index is an error naming the
    /// setting and those there are.
    pub fn with_optional_indexes(mut self, names: &[String]) -> Result<Store> {
        let mut kept = Vec::with_capacity(names.len());
        for name in names {
            let Some(known) = optional_indexes().find(|o| o == name) else {
                return Err(StoreError::UnknownIndex {
                    name: name.clone(),
                    known: optional_indexes().collect::<Vec<_>>().join(", "),
                });
            };
            kept.push(known);
        }
        self.optional_indexes = std::sync::Arc::new(kept);
        Ok(self)
    }

    async fn detect_partitions(&self) -> Result<partitions::Partitions> {
        let names: Vec<&'static str> = self.tables.iter().map(|t| t.name).collect();
        let key = self.lock_key(partitions::PARTITION_LOCK_KEY);
        partitions::Partitions::detect(&self.pool, &names, key).await
    }

    fn is_partitioned(&self, table: &str) -> bool {
        self.partitions.contains(table)
    }

    /// Creates the partitions blocks `first..=last` need (done by every
    /// write; ahead of time for a leased backfill's whole range).
    pub async fn ensure_partitions(&self, first: u64, last: u64) -> Result<()> {
        self.partitions.ensure(&self.pool, first, last).await
    }

    /// Every table a write fills, event tables included.
    pub fn tables(&self) -> &[&'static Table] {
        &self.tables
    }

    /// Logs that matched an `[[events]]` entry but did not decode, since
    /// start.
    pub fn undecodable_logs(&self) -> u64 {
        self.tables
            .iter()
            .map(|t| match &t.rows {
                tables::Rows::Event(e) => e.undecodable(),
                tables::Rows::Fixed(_) => 0,
            })
            .sum()
    }

    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Takes the database's writer lock on a dedicated connection, so two
    /// indexers never interleave writes and checkpoints.
    ///
    /// A process that just exited may hold the lock until the server notices
    /// its disconnect, so a busy lock is retried for a few seconds.
    pub async fn lock_writer(&self, mode: LockMode) -> Result<WriterLock> {
        self.lock_writer_within(mode, Some(LOCK_WAIT)).await
    }

    /// [`Store::lock_writer`], waiting up to `wait` (`None`: until it is
    /// free; a hot standby).
    pub async fn lock_writer_within(
        &self,
        mode: LockMode,
        wait: Option<std::time::Duration>,
    ) -> Result<WriterLock> {
        let mut conn = PgConnection::connect_with(&self.pool.connect_options()).await?;
        let deadline = wait.map(|w| std::time::Instant::now() + w);
        let key = self.lock_key(WRITER_LOCK_KEY);
        let try_lock = match mode {
            LockMode::Exclusive => "SELECT pg_try_advisory_lock($1)",
            LockMode::Shared => "SELECT pg_try_advisory_lock_shared($1)",
        };
        loop {
            let locked: bool = sqlx::query_scalar(try_lock)
                .bind(key)
                .fetch_one(&mut conn)
                .await?;
            if locked {
                return Ok(WriterLock {
                    conn,
                    mode,
                    key,
                    owner_key: None,
                });
            }
            if deadline.is_some_and(|d| std::time::Instant::now() >= d) {
                return Err(StoreError::Locked);
            }
            let pause = if wait.is_some() { 100 } else { 500 };
            tokio::time::sleep(std::time::Duration::from_millis(pause)).await;
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

    /// Whether blocks `lo..=hi` are all stored and each links by its parent
    /// hash to the one below it (for a range that must join stored blocks
    /// to reach a trusted one).
    pub async fn linked(&self, lo: u64, hi: u64) -> Result<bool> {
        let (count, broken): (i64, i64) = sqlx::query_as(
            "SELECT count(*), count(*) FILTER (WHERE b.number > $1 AND p.hash IS DISTINCT FROM b.parent_hash)
             FROM blocks b LEFT JOIN blocks p ON p.number = b.number - 1
             WHERE b.number BETWEEN $1 AND $2",
        )
        .bind(lo as i64)
        .bind(hi as i64)
        .fetch_one(&self.pool)
        .await?;
        Ok(count as u64 == hi - lo + 1 && broken == 0)
    }

    /// The stored parent hash of block `number`.
    pub async fn parent_hash(&self, number: u64) -> Result<Option<B256>> {
        let hash: Option<Vec<u8>> =
            sqlx::query_scalar("SELECT parent_hash FROM blocks WHERE number = $1")
                .bind(number as i64)
                .fetch_optional(&self.pool)
                .await?;
        Ok(hash.map(to_b256))
    }

    /// Records that the stored chain is linked to `anchor`.
    pub async fn record_anchor(&self, anchor: &crate::verify::Anchor) -> Result<()> {
        sqlx::query(
            "INSERT INTO trust_anchors (number, hash, origin) VALUES ($1, $2, $3)
             ON CONFLICT (number) DO UPDATE SET hash = EXCLUDED.hash, origin = EXCLUDED.origin",
        )
        .bind(anchor.number as i64)
        .bind(&anchor.hash[..])
        .bind(anchor.describe())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    /// Writes `blocks` (consecutive, ascending) and advances the checkpoint,
    /// all in one transaction. Writes nothing and answers
    /// [`Written::ParentMismatch`] when the first block does not extend the
    /// stored block below it, or when the blocks do not chain.
    pub async fn write_blocks(&self, blocks: &[Block]) -> Result<Written> {
        self.write_blocks_in(blocks, None).await
    }

    /// [`Store::write_blocks`], or, with `lease`, into a leased segment:
    /// only while the lease is `lease.owner`'s, continuing at the segment's
    /// committed progress, with the parent checked only inside the segment
    /// (links across segments are checked once both are done), and
    /// committing the segment's progress instead of moving the checkpoint
    /// (which moves when a segment completes).
    pub async fn write_blocks_in(
        &self,
        blocks: &[Block],
        lease: Option<&Lease>,
    ) -> Result<Written> {
        let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
            return Ok(Written::Committed(WriteOutcome::default()));
        };
        for pair in blocks.windows(2) {
            let (below, b) = (&pair[0].header, &pair[1].header);
            if b.parent_hash != below.hash || b.number != below.number + 1 {
                return Ok(Written::ParentMismatch {
                    number: b.number,
                    parent: b.parent_hash,
                    stored: below.hash,
                });
            }
        }
        let (first, last) = (&first.header, &last.header);
        self.ensure_partitions(first.number, last.number).await?;
        let mut tx = self.pool.begin().await?;
        if let Some(lease) = lease {
            match lease.hold(&mut tx, first.number).await {
                Ok(()) => {}
                Err(e @ (StoreError::LeaseLost { .. } | StoreError::SegmentGap { .. })) => {
                    return Ok(Written::LeaseEnded {
                        first: lease.first,
                        reason: e.to_string(),
                    });
                }
                Err(e) => return Err(e),
            }
        }
        let stored: Vec<(i64, Vec<u8>)> =
            sqlx::query_as("SELECT number, hash FROM blocks WHERE number BETWEEN $1 AND $2")
                .bind(first.number as i64 - 1)
                .bind(last.number as i64)
                .fetch_all(&mut *tx)
                .await?;
        let stored: std::collections::HashMap<u64, Vec<u8>> =
            stored.into_iter().map(|(n, h)| (n as u64, h)).collect();
        let below = first
            .number
            .checked_sub(1)
            .filter(|p| lease.is_none_or(|l| *p >= l.first));
        if let Some(parent) = below.and_then(|p| stored.get(&p))
            && parent[..] != first.parent_hash[..]
        {
            return Ok(Written::ParentMismatch {
                number: first.number,
                parent: first.parent_hash,
                stored: to_b256(parent.clone()),
            });
        }
        let mut outcome = WriteOutcome::default();
        let mut replaced = Vec::new();
        let mut fresh = Vec::with_capacity(blocks.len());
        for b in blocks {
            match stored.get(&b.header.number) {
                Some(h) if h[..] == b.header.hash[..] => outcome.blocks_skipped += 1,
                Some(_) => {
                    replaced.push(b.header.number as i64);
                    fresh.push(b);
                }
                None => fresh.push(b),
            }
        }
        if !replaced.is_empty() {
            for table in self.tables.iter() {
                // Names come from the table descriptions, never from input.
                sqlx::query(AssertSqlSafe(format!(
                    "DELETE FROM {} WHERE {} = ANY($1)",
                    table.name, table.block_column
                )))
                .bind(&replaced)
                .execute(&mut *tx)
                .await?;
            }
            outcome.blocks_replaced = replaced.len() as u64;
        }
        if !fresh.is_empty() {
            let (low, high) = (fresh[0].header.number, fresh[fresh.len() - 1].header.number);
            for table in self.tables.iter() {
                let statement = match self.partitions.direct(table.name, low, high) {
                    Some(partition) => table.copy_statement_into(&partition),
                    None => table.copy_statement(),
                };
                // Sent in pieces as it is encoded: PostgreSQL reads each
                // while the next is built, and neither this buffer nor the
                // connection's write buffer (which keeps its largest size)
                // ever holds a whole batch's rows.
                let mut rows = CopyBuf::new(table.columns.len() as i16);
                let mut blocks = fresh.iter();
                let mut fill = |rows: &mut CopyBuf| -> Result<()> {
                    for b in blocks.by_ref() {
                        table.encode(b, rows)?;
                        if rows.piece().len() >= COPY_PIECE {
                            break;
                        }
                    }
                    Ok(())
                };
                fill(&mut rows)?;
                if rows.rows() == 0 {
                    continue;
                }
                let mut copy = tx.copy_in_raw(&statement).await?;
                while rows.piece().len() >= COPY_PIECE {
                    copy.send(rows.piece()).await?;
                    rows.sent();
                    fill(&mut rows)?;
                }
                copy.send(rows.finish()).await?;
                copy.finish().await?;
            }
            outcome.blocks_written = fresh.len() as u64;
            outcome.txs_written = fresh.iter().map(|b| b.txs.len() as u64).sum();
        }
        match lease {
            Some(lease) => {
                let key = self.lock_key(segments::COMPLETION_LOCK_KEY);
                lease.advance(&mut tx, last.number, key).await?
            }
            None => raise_checkpoint(&mut tx, last.number, &last.hash[..]).await?,
        }
        tx.commit().await?;
        Ok(Written::Committed(outcome))
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
        let deleted = self
            .delete_blocks(&mut tx, ancestor + 1, i64::MAX as u64)
            .await?;
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
        segments::reopen_above(&mut tx, ancestor).await?;
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

impl Store {
    /// Deletes the rows of blocks `first..=last` from every table a
    /// rollback covers, in `tx`; returns the blocks deleted.
    async fn delete_blocks(
        &self,
        tx: &mut Transaction<'_, Postgres>,
        first: u64,
        last: u64,
    ) -> Result<u64> {
        let mut deleted = 0;
        for table in self.tables.iter() {
            // Names come from the table descriptions, never from input.
            let r = sqlx::query(AssertSqlSafe(format!(
                "DELETE FROM {} WHERE {} BETWEEN $1 AND $2",
                table.name, table.block_column
            )))
            .bind(first as i64)
            .bind(last as i64)
            .execute(&mut **tx)
            .await?;
            if table.name == tables::BLOCKS.name {
                deleted = r.rows_affected();
            }
        }
        Ok(deleted)
    }
}

/// Moves the checkpoint to block `number` (`hash`), never down, in `tx`.
async fn raise_checkpoint(
    tx: &mut Transaction<'_, Postgres>,
    number: u64,
    hash: &[u8],
) -> Result<()> {
    sqlx::query(
        "INSERT INTO checkpoint (id, block_number, block_hash) VALUES (TRUE, $1, $2)
         ON CONFLICT (id) DO UPDATE
           SET block_number = EXCLUDED.block_number, block_hash = EXCLUDED.block_hash, updated_at = now()
           WHERE checkpoint.block_number <= EXCLUDED.block_number",
    )
    .bind(number as i64)
    .bind(hash)
    .execute(&mut **tx)
    .await?;
    Ok(())
}

fn to_b256(v: Vec<u8>) -> B256 {
    let mut out = [0u8; 32];
    let n = v.len().min(32);
    out[32 - n..].copy_from_slice(&v[v.len() - n..]);
    out
}
