//! Bulk loads without the lookup indexes (sender, hash, authority, logs by
//! contract, and the optional ones a setting names) and the keys of every
//! table but `blocks`: a large
//! backfill drops them and builds them at its end, a small load into a
//! larger table keeps them current, and a load killed half-way leaves them
//! missing until the next run builds them. Real mainnet blocks, the real
//! binary, a real PostgreSQL.
//!
//! Its synthetic chains are not sealed (hashes are labels), so they run with
//! `--verify off`; `verify.rs` covers verification.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use sqlx::PgPool;

use crate::support::indexer::Running;
use crate::support::{fixtures, indexer, pg, rpc_server::RpcServer};

const FIRST: u64 = 24_476_000;
const LAST: u64 = 24_476_009;

/// The lookup indexes and keys a bulk load drops (the optional ones
/// aside), as the migrations define them.
const DEFINITIONS: [(&str, &str); 7] = [
    (
        "authorizations_authority_idx",
        "CREATE INDEX authorizations_authority_idx ON ONLY public.authorizations USING btree (authority)",
    ),
    (
        "authorizations_pkey",
        "CREATE UNIQUE INDEX authorizations_pkey ON ONLY public.authorizations USING btree (block_number, tx_index, auth_index)",
    ),
    (
        "logs_address_topic0_idx",
        "CREATE INDEX logs_address_topic0_idx ON ONLY public.logs USING btree (address, topic0)",
    ),
    (
        "logs_pkey",
        "CREATE UNIQUE INDEX logs_pkey ON ONLY public.logs USING btree (block_number, log_index)",
    ),
    (
        "transactions_hash_idx",
        "CREATE INDEX transactions_hash_idx ON ONLY public.transactions USING btree (hash)",
    ),
    (
        "transactions_pkey",
        "CREATE UNIQUE INDEX transactions_pkey ON ONLY public.transactions USING btree (block_number, tx_index)",
    ),
    (
        "transactions_sender_idx",
        "CREATE INDEX transactions_sender_idx ON ONLY public.transactions USING btree (sender)",
    ),
];

const DROPPED: &str = "bulk load: dropping the lookup indexes";
const BUILT: &str = "lookup indexes built";

/// A config file setting `index.defer_indexes_min_blocks`.
fn config(dir: &tempfile::TempDir, min_blocks: u64) -> PathBuf {
    let path = dir.path().join(format!("defer-{min_blocks}.toml"));
    std::fs::write(
        &path,
        format!("[index]\ndefer_indexes_min_blocks = {min_blocks}\n"),
    )
    .unwrap();
    path
}

/// `backfill --from --to` with that config, info logs; must exit 0.
fn backfill(server: &RpcServer, db: &str, cfg: &Path, from: u64, to: u64) -> String {
    let (out, stderr) = try_backfill(server, db, cfg, from, to);
    assert!(out.status.success(), "backfill failed:\n{stderr}");
    stderr
}

/// `backfill --from --to` with that config, info logs: how it exited and
/// what it logged.
fn try_backfill(server: &RpcServer, db: &str, cfg: &Path, from: u64, to: u64) -> (Output, String) {
    let (from, to) = (from.to_string(), to.to_string());
    let args = [
        "--config",
        cfg.to_str().unwrap(),
        "backfill",
        "--verify",
        "off",
        "--from",
        &from,
        "--to",
        &to,
    ];
    let mut cmd = indexer::command(&server.url(), db, &args);
    cmd.env("RUST_LOG", "info");
    let out: Output = indexer::finish(cmd, &args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (out, stderr)
}

/// Valid lookup indexes and keys: name -> (oid, definition).
async fn lookup_indexes(pool: &PgPool) -> BTreeMap<String, (i64, String)> {
    let names: Vec<&str> = DEFINITIONS.iter().map(|(n, _)| *n).collect();
    let rows: Vec<(String, i64, String)> = sqlx::query_as(
        "SELECT c.relname::text, c.oid::int8, pg_get_indexdef(c.oid)
         FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
         WHERE i.indisvalid AND c.relname = ANY($1)",
    )
    .bind(&names)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(n, oid, def)| (n, (oid, def)))
        .collect()
}

/// The primary-key constraints of the tables whose keys a bulk load
/// drops, each with its table, and whether every partition has its own.
async fn primary_keys(pool: &PgPool) -> Vec<(String, String, bool)> {
    sqlx::query_as(
        "SELECT k.conname::text, k.conrelid::regclass::text,
                NOT EXISTS (SELECT 1 FROM pg_inherits p WHERE p.inhparent = k.conrelid
                    AND NOT EXISTS (SELECT 1 FROM pg_constraint c
                        WHERE c.conrelid = p.inhrelid AND c.contype = 'p'))
         FROM pg_constraint k
         WHERE k.contype = 'p' AND k.conrelid::regclass::text IN ('transactions', 'authorizations', 'logs')
         ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

fn definitions(indexes: &BTreeMap<String, (i64, String)>) -> Vec<(&str, &str)> {
    indexes
        .iter()
        .map(|(n, (_, d))| (n.as_str(), d.as_str()))
        .collect()
}

/// Every stored row, as text, in key order: two databases holding the same
/// rows give the same digest.
async fn digest(pool: &PgPool) -> Vec<(String, i64)> {
    let mut out = Vec::new();
    for (table, key) in [
        ("blocks", "number"),
        ("transactions", "block_number, tx_index"),
        ("authorizations", "block_number, tx_index, auth_index"),
        ("logs", "block_number, log_index"),
        ("checkpoint", "id"),
    ] {
        let row: (Option<String>, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
            "SELECT md5(string_agg(t::text, '|' ORDER BY {key})), count(*) FROM (SELECT * FROM {table}) t",
        )))
        .fetch_one(pool)
        .await
        .unwrap();
        out.push((row.0.unwrap_or_default(), row.1));
    }
    // The checkpoint's updated_at differs between runs: compare its block.
    let cp: (i64, Vec<u8>) = sqlx::query_as("SELECT block_number, block_hash FROM checkpoint")
        .fetch_one(pool)
        .await
        .unwrap();
    out.pop();
    out.push((hex::encode(cp.1), cp.0));
    out
}

/// A config directory, the server of the ten blocks, and the digest of
/// those blocks indexed with the lookup indexes kept current.
async fn with_reference() -> (tempfile::TempDir, RpcServer, Vec<(String, i64)>) {
    let dir = tempfile::tempdir().unwrap();
    let server = RpcServer::start(fixtures::recent_mainnet()).await.unwrap();
    let (reference, reference_url) = pg::fresh_db().await;
    backfill(&server, &reference_url, &config(&dir, 0), FIRST, LAST);
    let rows = digest(&reference).await;
    (dir, server, rows)
}

/// The planner, denied sequential scans, reads `sender` through its index.
async fn sender_lookup_uses_the_index(pool: &PgPool) -> bool {
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("SET enable_seqscan = off")
        .execute(&mut *conn)
        .await
        .unwrap();
    let plan: Vec<String> = sqlx::query_scalar(
        "EXPLAIN SELECT * FROM transactions WHERE sender = (SELECT sender FROM transactions LIMIT 1)",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    sqlx::query("RESET enable_seqscan")
        .execute(&mut *conn)
        .await
        .unwrap();
    // On a partitioned table the plan names each partition's index
    // (`transactions_p24_sender_idx`, attached to `transactions_sender_idx`).
    let plan = plan.join("\n");
    plan.contains("sender_idx")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bulk_backfill_drops_the_lookup_indexes_and_builds_them_at_its_end() {
    let dir = tempfile::tempdir().unwrap();
    let server = RpcServer::start(fixtures::recent_mainnet()).await.unwrap();

    // Deferred: ten blocks, minimum five, nothing stored.
    let (deferred, deferred_url) = pg::fresh_db().await;
    let log = backfill(&server, &deferred_url, &config(&dir, 5), FIRST, LAST);
    assert!(log.contains(DROPPED) && log.contains(BUILT), "{log}");
    let built = lookup_indexes(&deferred).await;
    assert_eq!(definitions(&built), DEFINITIONS);
    assert!(sender_lookup_uses_the_index(&deferred).await);
    // The keys are keys again, on the tables and on every partition.
    let keys = primary_keys(&deferred).await;
    assert_eq!(
        keys,
        [
            ("authorizations_pkey", "authorizations", true),
            ("logs_pkey", "logs", true),
            ("transactions_pkey", "transactions", true),
        ]
        .map(|(k, t, all)| (k.to_string(), t.to_string(), all))
    );
    let err = sqlx::query(
        "INSERT INTO transactions SELECT * FROM transactions ORDER BY block_number LIMIT 1",
    )
    .execute(&deferred)
    .await
    .expect_err("a row twice is refused by the rebuilt key");
    assert!(err.to_string().contains("duplicate key"), "{err}");

    // Kept current (0 = never defer): the same rows, the migration's indexes.
    let (current, current_url) = pg::fresh_db().await;
    let log = backfill(&server, &current_url, &config(&dir, 0), FIRST, LAST);
    assert!(!log.contains(DROPPED) && !log.contains(BUILT), "{log}");
    assert_eq!(definitions(&lookup_indexes(&current).await), DEFINITIONS);
    let rows = digest(&current).await;
    assert_eq!(rows[1].1, 2_675, "transactions in the ten blocks");
    assert!(rows[2].1 > 0, "the blocks hold EIP-7702 authorizations");
    assert_eq!(digest(&deferred).await, rows);

    // A second, idempotent run over the same range: nothing to index, so
    // nothing dropped; the indexes are the same objects.
    let log = backfill(&server, &deferred_url, &config(&dir, 5), FIRST, LAST);
    assert!(!log.contains(DROPPED), "{log}");
    assert_eq!(lookup_indexes(&deferred).await, built);
    assert_eq!(digest(&deferred).await, rows);
}

/// Whether a valid index of that name exists.
async fn has_index(pool: &PgPool, name: &str) -> bool {
    sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
                        WHERE i.indisvalid AND c.relname = $1)",
    )
    .bind(name)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// `logs.topic0` alone is indexed only where `index.optional_indexes`
/// names it: then a bulk load drops and builds it with the others, and
/// `status` counts it. A name that is no optional index is refused as the
/// settings load, naming the setting, its file and the names there are.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_optional_index_is_built_only_where_the_setting_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let server = RpcServer::start(fixtures::recent_mainnet()).await.unwrap();
    let named = |file: &str, names: &str| {
        let path = dir.path().join(file);
        std::fs::write(
            &path,
            format!("[index]\ndefer_indexes_min_blocks = 5\noptional_indexes = [{names}]\n"),
        )
        .unwrap();
        path
    };

    let (plain, plain_url) = pg::fresh_db().await;
    backfill(&server, &plain_url, &config(&dir, 5), FIRST, LAST);
    assert!(has_index(&plain, "logs_address_topic0_idx").await);
    assert!(
        !has_index(&plain, "logs_topic0_idx").await,
        "not by default"
    );

    let (kept, kept_url) = pg::fresh_db().await;
    let cfg = named("topic0.toml", r#""logs_topic0_idx""#);
    let log = backfill(&server, &kept_url, &cfg, FIRST, LAST);
    assert!(log.contains(DROPPED) && log.contains(BUILT), "{log}");
    assert!(has_index(&kept, "logs_topic0_idx").await);
    let cfg_arg = cfg.to_str().unwrap();
    let status = indexer::run_ok(&server.url(), &kept_url, &["--config", cfg_arg, "status"]);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(status.contains("lookup indexes: ok"), "{status}");
    // Dropped by hand: `status` under the same setting names it missing.
    sqlx::query("DROP INDEX logs_topic0_idx")
        .execute(&kept)
        .await
        .unwrap();
    let status = indexer::run_ok(&server.url(), &kept_url, &["--config", cfg_arg, "status"]);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("lookup indexes: missing logs_topic0_idx"),
        "{status}"
    );

    let (bad, bad_url) = pg::fresh_db().await;
    let cfg = named("typo.toml", r#""logs_topic1_idx""#);
    let (out, stderr) = try_backfill(&server, &bad_url, &cfg, FIRST, LAST);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("setting index.optional_indexes")
            && stderr.contains("typo.toml")
            && stderr.contains("logs_topic1_idx is not an optional index")
            && stderr.contains("the optional ones are: logs_topic0_idx"),
        "{stderr}"
    );
    let tables: i64 =
        sqlx::query_scalar("SELECT count(*) FROM pg_tables WHERE tablename = 'blocks'")
            .fetch_one(&bad)
            .await
            .unwrap();
    assert_eq!(
        tables, 0,
        "refused as the settings load, before the database is touched"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_loads_at_least_as_large_as_the_table_defer() {
    let (dir, server, rows) = with_reference().await;

    // Six blocks stored, then four more with a minimum of three: four is
    // less than six, so the indexes stay and are kept current.
    let (small, small_url) = pg::fresh_db().await;
    backfill(&server, &small_url, &config(&dir, 0), FIRST, FIRST + 5);
    let before = lookup_indexes(&small).await;
    let log = backfill(&server, &small_url, &config(&dir, 3), FIRST + 6, LAST);
    assert!(!log.contains(DROPPED), "{log}");
    assert_eq!(lookup_indexes(&small).await, before, "indexes untouched");
    assert_eq!(digest(&small).await, rows);

    // Two stored, then eight with a minimum of five: dropped and rebuilt.
    let (large, large_url) = pg::fresh_db().await;
    backfill(&server, &large_url, &config(&dir, 0), FIRST, FIRST + 1);
    let before = lookup_indexes(&large).await;
    let log = backfill(&server, &large_url, &config(&dir, 5), FIRST + 2, LAST);
    assert!(log.contains(DROPPED) && log.contains(BUILT), "{log}");
    let after = lookup_indexes(&large).await;
    assert_eq!(definitions(&after), DEFINITIONS);
    assert!(
        after.iter().all(|(n, (oid, _))| before[n].0 != *oid),
        "rebuilt: {before:?} -> {after:?}"
    );
    assert_eq!(digest(&large).await, rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_bulk_load_leaves_them_missing_until_the_next_run_builds_them() {
    let (dir, server, rows) = with_reference().await;

    // One block per slow request, so the run is still loading when killed.
    server.set_latency(Duration::from_millis(400));
    let (pool, url) = pg::fresh_db().await;
    let cfg = config(&dir, 5);
    let (from, to) = (FIRST.to_string(), LAST.to_string());
    let mut run = Running::spawn(
        &server.url(),
        &url,
        &[
            "--config",
            cfg.to_str().unwrap(),
            "--batch-size",
            "1",
            "--concurrency",
            "1",
            "backfill",
            "--verify",
            "off",
            "--from",
            &from,
            "--to",
            &to,
        ],
    );
    // Killed once two blocks are committed (into its segment, whose
    // progress commits with them; the checkpoint moves when it is done).
    // (Before the run has created the tables, none.)
    let stored = || async {
        let n: Result<i64, _> = sqlx::query_scalar("SELECT count(*) FROM blocks")
            .fetch_one(&pool)
            .await;
        n.map_or(0, |n| n as u64)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if stored().await >= 2 {
            break;
        }
        assert!(Instant::now() < deadline, "no block committed within 60 s");
        assert!(run.is_running(), "exited before the kill");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    run.kill().await;
    let n = stored().await;
    assert!(
        n < LAST - FIRST + 1,
        "killed with {n} blocks stored, before the end"
    );
    assert!(lookup_indexes(&pool).await.is_empty(), "dropped, not built");
    let status = indexer::run_ok(&server.url(), &url, &["status"]);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains(
            "lookup indexes: missing transactions_sender_idx, transactions_hash_idx, transactions_pkey, authorizations_authority_idx, authorizations_pkey, logs_address_topic0_idx, logs_pkey"
        ),
        "{status}"
    );

    // The rerun resumes after the checkpoint. Whether it still counts as a
    // bulk load or not, the indexes exist when it ends.
    server.set_latency(Duration::ZERO);
    backfill(&server, &url, &config(&dir, 1000), FIRST, LAST);
    assert_eq!(definitions(&lookup_indexes(&pool).await), DEFINITIONS);
    assert_eq!(digest(&pool).await, rows);
    let status = indexer::run_ok(&server.url(), &url, &["status"]);
    assert!(
        String::from_utf8_lossy(&status.stdout).contains("lookup indexes: ok"),
        "{}",
        String::from_utf8_lossy(&status.stdout)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_builds_them_once_caught_up_and_keeps_following() {
    let dir = tempfile::tempdir().unwrap();
    let server = RpcServer::start(fixtures::recent_mainnet()).await.unwrap();
    let (pool, url) = pg::fresh_db().await;
    let cfg = config(&dir, 5);
    let from = FIRST.to_string();
    let args = [
        "--config",
        cfg.to_str().unwrap(),
        "--poll-interval-ms",
        "50",
        "sync",
        "--verify",
        "off",
        "--from",
        &from,
    ];
    let mut cmd = indexer::command(&server.url(), &url, &args);
    cmd.env("RUST_LOG", "info");
    let mut run = Running::start(cmd);
    // Caught up with the head, and the indexes are back, while it follows.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let cp = pg::checkpoint(&pool).await;
        if cp == Some(LAST) && lookup_indexes(&pool).await.len() == DEFINITIONS.len() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not caught up with indexes in 60 s"
        );
        assert!(run.is_running(), "sync exited");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(definitions(&lookup_indexes(&pool).await), DEFINITIONS);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(run.is_running(), "still following");
    let log = run.terminate().await;
    assert!(log.contains(DROPPED) && log.contains(BUILT), "{log}");
    assert_eq!(
        log.matches(BUILT).count(),
        1,
        "built once, not on every poll: {log}"
    );
}
