//! Crash at any instant: `kill -9` at random instants of a backfill whose
//! lookup indexes are deferred (so some kills land in the bulk load, some
//! in the index build at its end), and of `follow` while it rolls back
//! reorgs; after each kill the indexer is started again, and once a run
//! completes the database equals the node: no duplicate, no gap, no
//! orphan, every lookup index present and valid. Twenty kills in all, at
//! instants drawn from a seed that the test prints (set `CRASH_SEED` to
//! replay one).
//!
//! The anvil chain holds blob transactions, whose transactions root anvil
//! gets wrong (see `anvil_backfill.rs`): `--verify off`.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use sqlx::PgPool;

use crate::follow::{migrated_db, no_mining_anvil, reorg_with_txs};
use crate::providers::chain_of;
use crate::support::anvil::{Anvil, mine_every_kind};
use crate::support::compare::{assert_db_equals_chain, wait_db_equals_head};
use crate::support::indexer::{self, Running};
use crate::support::proxy::slow_proxy;

const LIMIT: Duration = Duration::from_secs(120);

fn rng() -> fastrand::Rng {
    let seed = std::env::var("CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| fastrand::u64(..));
    eprintln!("crash instants drawn from CRASH_SEED={seed}");
    fastrand::Rng::with_seed(seed)
}

/// Every lookup index of the schema (the optional ones are not kept by
/// default) exists and is valid.
pub(crate) async fn assert_lookup_indexes_valid(pool: &PgPool) {
    let want: Vec<&str> = sender_indexer::store::TABLES
        .iter()
        .flat_map(|t| t.lookup_indexes.iter().filter(|i| !i.optional))
        .map(|i| i.name)
        .collect();
    let valid: Vec<String> = sqlx::query_scalar(
        "SELECT c.relname::text FROM pg_class c JOIN pg_index i ON i.indexrelid = c.oid
         WHERE i.indisvalid AND c.relname = ANY($1)",
    )
    .bind(&want)
    .fetch_all(pool)
    .await
    .unwrap();
    for name in want {
        assert!(
            valid.iter().any(|v| v == name),
            "lookup index {name} missing or invalid"
        );
    }
}

/// Starts `args`, kills it after `after` (unless it finished first);
/// returns whether it completed on its own.
async fn run_or_kill(node: &str, db: &str, args: &[&str], after: Duration) -> bool {
    let mut run = Running::spawn(node, db, args);
    let deadline = Instant::now() + after;
    while Instant::now() < deadline {
        if let Some(status) = run.try_status() {
            assert!(status.success(), "{args:?} failed:\n{}", run.stderr());
            return true;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    run.signal(Signal::SIGKILL);
    let status = run.wait(LIMIT).await;
    // It may have finished in the last moment: then it exited 0.
    status.success()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_instants_of_backfill_index_build_and_reorg_rollback() {
    let mut rng = rng();
    let anvil = no_mining_anvil().await;
    let target = chain_of(&anvil, 3, 25).await;
    // Slow enough that a backfill takes about two seconds.
    let node = slow_proxy(anvil.url(), Duration::from_millis(15)).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("crash.toml");
    // Defer the lookup indexes of any run of 10 blocks or more, and write
    // small batches, so kills land in writes, commits and index builds.
    std::fs::write(
        &config,
        "[index]\ndefer_indexes_min_blocks = 10\nwrite_batch_blocks = 7\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();

    // 1. Backfill: 12 kills at instants in 0..1.2 s, each of a run on a
    //    fresh database, each followed by a restart that runs to its end
    //    and must leave the database equal to the node.
    let to = target.to_string();
    let args = [
        "--config",
        config,
        "backfill",
        "--verify",
        "off",
        "--from",
        "0",
        "--to",
        &to,
        "--batch-size",
        "2",
        "--concurrency",
        "2",
    ];
    let mut mid_run = 0;
    for kill in 0..12 {
        let (pool, url) = migrated_db().await;
        let after = Duration::from_millis(rng.u64(0..1200));
        if !run_or_kill(&node, &url, &args, after).await {
            mid_run += 1;
        }
        assert!(run_or_kill(&node, &url, &args, LIMIT).await);
        if let Err(e) = crate::support::compare::db_vs_chain(&pool, &anvil, 0, target).await {
            panic!("kill {kill} at {after:?}: {e}");
        }
        assert_lookup_indexes_valid(&pool).await;
    }
    assert!(mid_run > 0, "no kill landed mid-run");
    eprintln!("{mid_run} of 12 backfill kills landed mid-run");

    // 2. A fresh database, where every kill lands in the index build: a
    //    backfill that is killed as soon as it logs that it builds them.
    let (pool2, url2) = migrated_db().await;
    let mut killed_in_build = 0;
    for _ in 0..2 {
        let mut cmd = indexer::command(anvil.url(), &url2, &args);
        cmd.env("RUST_LOG", "info");
        let mut run = Running::start(cmd);
        let deadline = Instant::now() + LIMIT;
        while !run.stderr().contains("building the lookup indexes") && run.is_running() {
            assert!(Instant::now() < deadline, "{}", run.stderr());
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        if run.is_running() {
            killed_in_build += 1;
        }
        run.signal(Signal::SIGKILL);
        run.wait(LIMIT).await;
    }
    assert!(run_or_kill(anvil.url(), &url2, &args, LIMIT).await);
    assert_db_equals_chain(&pool2, &anvil, 0, target).await;
    assert_lookup_indexes_valid(&pool2).await;
    eprintln!("{killed_in_build} of 2 kills landed in the index build");

    // 3. follow through reorgs: 6 kills at instants in 0..400 ms after a
    //    reorg of depth 2..=6, each followed by a restart that must bring
    //    the database back to the canonical chain.
    //    On phase 2's database, which holds the chain: follow resumes.
    follow_through_reorgs(&anvil, &pool2, &url2, &mut rng).await;
}

async fn follow_through_reorgs(anvil: &Anvil, pool: &PgPool, url: &str, rng: &mut fastrand::Rng) {
    let args = [
        "follow",
        "--verify",
        "off",
        "--poll-interval-ms",
        "20",
        "--batch-size",
        "2",
    ];
    let mut run = Running::spawn(anvil.url(), url, &args);
    wait_db_equals_head(pool, anvil, LIMIT, "before the reorgs").await;
    for round in 0..6 {
        let depth = rng.u64(2..=6);
        reorg_with_txs(anvil, depth).await;
        tokio::time::sleep(Duration::from_millis(rng.u64(0..400))).await;
        run.signal(Signal::SIGKILL);
        run.wait(LIMIT).await;
        run = Running::spawn(anvil.url(), url, &args);
        let what = format!("after a kill in round {round} (reorg depth {depth})");
        wait_db_equals_head(pool, anvil, LIMIT, &what).await;
        mine_every_kind(anvil).await;
        wait_db_equals_head(pool, anvil, LIMIT, "new blocks after the restart").await;
    }
    run.terminate().await;
    assert_lookup_indexes_valid(pool).await;
}
