//! Scale out on one PostgreSQL: several `backfill` processes share a range
//! through leased segments (one of them `kill -9`ed twice mid-segment and
//! started again), a link that fails across a segment boundary makes that
//! segment be indexed again as soon as both sides are done, a range grown
//! past a segment cut short at its end fills it, and a second `follow`
//! stands by and takes over when the leader dies, through a reorg during
//! the handover. Real anvil, real PostgreSQL, the real binary.
//!
//! The anvil chain holds blob transactions, whose transactions root anvil
//! gets wrong (see `anvil_backfill.rs`): `--verify off`.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use sqlx::PgPool;

use crate::follow::{migrated_db, no_mining_anvil, reorg_with_txs};
use crate::providers::chain_of;
use crate::support::anvil::mine_empty;
use crate::support::compare::{assert_db_equals_chain, wait_db_equals_head};
use crate::support::indexer::{self, Running};
use crate::support::proxy::slow_proxy;

const LIMIT: Duration = Duration::from_secs(120);
const SEGMENT: u64 = 10;

/// A config file with a short lease, so an expired one is taken over within
/// the test's patience, and bulk loads from 50 blocks (the lookup indexes
/// are dropped at the start and built once every segment is done).
fn lease_config(dir: &tempfile::TempDir, lease_ms: u64) -> String {
    let path = dir.path().join("scale.toml");
    std::fs::write(
        &path,
        format!("[index]\nlease_ms = {lease_ms}\ndefer_indexes_min_blocks = 50\n"),
    )
    .unwrap();
    path.display().to_string()
}

fn backfill_args(config: &str, to: u64) -> Vec<String> {
    [
        "--config",
        config,
        "--verify",
        "off",
        "--segment-blocks",
        &SEGMENT.to_string(),
        "--batch-size",
        "2",
        "--concurrency",
        "1",
        "backfill",
        "--from",
        "0",
        "--to",
        &to.to_string(),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn spawn(node: &str, db: &str, args: &[String]) -> Running {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = indexer::command(node, db, &args);
    cmd.env("RUST_LOG", "info,sqlx=warn");
    Running::start(cmd)
}

/// The segment `pid` has leased and written part of, if any.
async fn mid_segment(pool: &PgPool, pid: u32) -> Option<i64> {
    sqlx::query_scalar(
        "SELECT first_block FROM segments
         WHERE state = 'leased' AND owner LIKE '%:' || $1 || ':%' AND next_block > first_block",
    )
    .bind(pid.to_string())
    .fetch_optional(pool)
    .await
    .unwrap()
}

/// Every block exactly once, every segment done, the checkpoint at the top.
async fn assert_complete(pool: &PgPool, head: u64) {
    let (blocks, distinct, max): (i64, i64, Option<i64>) =
        sqlx::query_as("SELECT count(*), count(DISTINCT number), max(number) FROM blocks")
            .fetch_one(pool)
            .await
            .unwrap();
    assert_eq!(
        (blocks, distinct, max),
        (head as i64 + 1, head as i64 + 1, Some(head as i64))
    );
    let dup_txs: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT hash FROM transactions GROUP BY hash HAVING count(*) > 1) d",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(dup_txs, 0, "a transaction stored twice");
    let open: i64 = sqlx::query_scalar("SELECT count(*) FROM segments WHERE state <> 'done'")
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(open, 0, "segments not done");
    assert_eq!(crate::support::pg::checkpoint(pool).await, Some(head));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_backfills_share_a_range_one_killed_twice_mid_segment() {
    let anvil = no_mining_anvil().await;
    let head = chain_of(&anvil, 6, 30).await;
    // A slow node, so that segments take a while and kills land inside them.
    let node = slow_proxy(anvil.url(), Duration::from_millis(15)).await;
    let (pool, db) = migrated_db().await;
    let dir = tempfile::tempdir().unwrap();
    let args = backfill_args(&lease_config(&dir, 1500), head);

    let mut a = spawn(&node, &db, &args);
    let mut b = spawn(&node, &db, &args);
    let mut c = spawn(&node, &db, &args);
    let mut logs = Vec::new();
    for kill in 1..=2 {
        let deadline = Instant::now() + LIMIT;
        let seg = loop {
            if let Some(seg) = mid_segment(&pool, c.child.id()).await {
                break seg;
            }
            assert!(
                c.is_running(),
                "kill {kill}: process C ended before it was mid-segment:\n{}",
                c.stderr()
            );
            assert!(Instant::now() < deadline, "C never got mid-segment");
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        c.signal(Signal::SIGKILL);
        c.wait(LIMIT).await;
        eprintln!("kill {kill}: C killed in segment {seg}");
        logs.push(c.stderr());
        c = spawn(&node, &db, &args);
    }
    for (name, run) in [("A", &mut a), ("B", &mut b), ("C", &mut c)] {
        let status = run.wait(LIMIT).await;
        assert!(status.success(), "{name} failed:\n{}", run.stderr());
        logs.push(run.stderr());
    }
    let all = logs.join("\n");
    assert!(
        all.contains("took over a segment whose lease expired"),
        "no killed segment was taken over:\n{all}"
    );
    assert!(
        all.contains("dropping the lookup indexes") && all.contains("lookup indexes built"),
        "a bulk load across processes defers the lookup indexes:\n{all}"
    );
    crate::crash::assert_lookup_indexes_valid(&pool).await;

    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert_complete(&pool, head).await;
    let status = indexer::run_ok(&node, &db, &["status"]);
    let report = String::from_utf8_lossy(&status.stdout);
    assert!(report.contains("gaps:           none"), "{report}");
    let segments = (head + 1).div_ceil(SEGMENT);
    assert!(
        report.contains(&format!(
            "segments:       {segments} done, 0 leased, 0 free"
        )),
        "{report}"
    );

    // A rerun finds nothing to do: it fetches no block.
    let out = indexer::run_ok(
        &node,
        &db,
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("leased a segment"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_broken_across_a_segment_boundary_is_indexed_again() {
    let anvil = no_mining_anvil().await;
    let head = chain_of(&anvil, 2, 20).await;
    let (pool, db) = migrated_db().await;
    let dir = tempfile::tempdir().unwrap();
    let config = lease_config(&dir, 5000);
    let args = backfill_args(&config, head);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    indexer::run_ok(anvil.url(), &db, &args);
    assert_complete(&pool, head).await;

    // As if the segment starting at 20 had come from another fork: its
    // first block no longer extends block 19. The range then grows by
    // four segments: the link is mended before they are all done, not
    // once the whole range is.
    sqlx::query("UPDATE blocks SET parent_hash = '\\x00' WHERE number = 20")
        .execute(&pool)
        .await
        .unwrap();
    mine_empty(&anvil, 4 * SEGMENT).await;
    let head = anvil.block_number().await;
    let last_segment = head / SEGMENT * SEGMENT;
    let args = backfill_args(&config, head);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = indexer::command(anvil.url(), &db, &args);
    cmd.env("RUST_LOG", "info,sqlx=warn");
    let out = indexer::finish(cmd, &args);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let mended = log.find("block 20 does not extend block 19");
    let last_leased = log.find(&format!("leased a segment first={last_segment} "));
    assert!(
        mended.is_some() && last_leased.is_some() && mended < last_leased,
        "the broken link is named before the last segment ({last_segment}) is leased:\n{log}"
    );
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert_complete(&pool, head).await;
    let redone: i64 = sqlx::query_scalar("SELECT count(*) FROM reorgs WHERE ancestor = 19")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(redone, 1, "recorded as a reorg");

    // A range that ends inside a segment of an earlier, longer one: that
    // segment cannot be leased by this run, so the run refuses to start
    // rather than report the range complete without those blocks.
    let short = backfill_args(&config, head - 1);
    let short: Vec<&str> = short.iter().map(String::as_str).collect();
    let out = indexer::run(anvil.url(), &db, &short);
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "blocks {last_segment}..={} of the range 0..={} lie in segment {last_segment}..={head} of an earlier leased backfill",
        head - 1,
        head - 1
    );
    assert!(
        !out.status.success()
            && err.contains(&want)
            && err.contains(&format!("--from 0 --to {head}")),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_follow_takes_over_when_the_leader_dies_through_a_reorg() {
    let anvil = no_mining_anvil().await;
    chain_of(&anvil, 1, 5).await;
    let (pool, db) = migrated_db().await;
    let args = ["--verify", "off", "--poll-interval-ms", "100", "sync"];

    let mut leader = Running::spawn(anvil.url(), &db, &args);
    wait_db_equals_head(&pool, &anvil, LIMIT, "leader synced").await;
    let mut cmd = indexer::command(anvil.url(), &db, &args);
    cmd.env("RUST_LOG", "info,sqlx=warn");
    let mut standby = Running::start(cmd);
    standby.wait_for_log("standing by", LIMIT).await;
    mine_empty(&anvil, 2).await;
    wait_db_equals_head(&pool, &anvil, LIMIT, "leader follows").await;

    // The leader dies; the chain reorganises during the handover.
    leader.signal(Signal::SIGKILL);
    let killed = Instant::now();
    leader.wait(LIMIT).await;
    reorg_with_txs(&anvil, 3).await;
    mine_empty(&anvil, 2).await;
    // Within the default lease time (index.lease_ms, 30 s): the lock is
    // free as soon as the server sees the leader's connection close.
    let left = Duration::from_secs(30).saturating_sub(killed.elapsed());
    standby.wait_for_log("taking over", left).await;
    eprintln!("standby took over {:?} after the kill", killed.elapsed());
    wait_db_equals_head(&pool, &anvil, LIMIT, "the standby took over").await;
    let head = anvil.block_number().await;
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    let reorgs: i64 = sqlx::query_scalar("SELECT count(*) FROM reorgs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(reorgs >= 1, "the reorg was rolled back by the new leader");
    standby.terminate().await;
}

/// A plain `backfill` beside another writer is refused, and the message
/// says how processes share a range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_plain_backfill_is_told_how_to_share_the_range() {
    let anvil = no_mining_anvil().await;
    mine_empty(&anvil, 3).await;
    let (pool, db) = migrated_db().await;
    let follow = ["follow", "--from", "0"].map(String::from);
    let mut leader = spawn(anvil.url(), &db, &follow);
    wait_db_equals_head(&pool, &anvil, LIMIT, "follow").await;
    let out = indexer::run(anvil.url(), &db, &["backfill", "--from", "0", "--to", "2"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("another sender-indexer is writing to this database")
            && stderr.contains("the same --segment-blocks N (index.segment_blocks)"),
        "{stderr}"
    );
    leader.terminate().await;
}
