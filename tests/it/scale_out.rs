//! Scale out on one PostgreSQL: several `backfill` processes started with
//! the same plain command share a range through leased segments (one of
//! them `kill -9`ed twice mid-segment and started again), a link that
//! fails across a segment boundary makes that segment be indexed again as
//! soon as both sides are done, a lease whose answer was lost is taken
//! again by its owner, a segment taken over whose written part
//! came from another fork is indexed again from its first block, a range grown past a segment cut short at
//! its end fills it, a range that ends inside an earlier segment splits it
//! or says who holds it, a database indexed without segments is not
//! indexed again, and a second `follow` stands by and takes over when the
//! leader dies, through a reorg during the handover. Real anvil, real
//! PostgreSQL, the real binary.
//!
//! The anvil chain holds blob transactions, whose transactions root anvil
//! gets wrong (see `anvil_backfill.rs`): `--verify off`.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use sqlx::PgPool;

use crate::follow::{migrated_db, no_mining_anvil, reorg_with_txs};
use crate::providers::chain_of;
use crate::support::anvil::{Anvil, mine_empty};
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

/// A backfill of `0..=to` in segments of [`SEGMENT`] blocks.
fn backfill_args(config: &str, to: u64) -> Vec<String> {
    let mut args = plain_backfill_args(config, to);
    args.splice(0..0, ["--segment-blocks".to_string(), SEGMENT.to_string()]);
    args
}

/// A backfill of `0..=to` as a user starts it, with no segment setting.
fn plain_backfill_args(config: &str, to: u64) -> Vec<String> {
    [
        "--config",
        config,
        "--verify",
        "off",
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

/// Three processes started with the same plain `backfill` command (no
/// segment flag: `index.segment_blocks = "auto"`), behind a node 40 ms
/// away, one of them `kill -9`ed twice mid-segment and started again. How
/// much faster three are than one is the backfill bench's
/// (`BENCH_PROCESSES=1,3 BENCH_LATENCY_MS=40`), not a timed assertion.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_plain_backfills_share_a_range_one_killed_twice_mid_segment() {
    let anvil = no_mining_anvil().await;
    let head = chain_of(&anvil, 6, 30).await;
    // A node 40 ms away, so that segments take a while and kills land
    // inside them.
    let node = slow_proxy(anvil.url(), Duration::from_millis(40)).await;
    let (pool, db) = migrated_db().await;
    let dir = tempfile::tempdir().unwrap();
    // Leases of 10 minutes: a killed process's segment is taken over
    // within the test's patience only because its owner is seen gone.
    let args = plain_backfill_args(&lease_config(&dir, 600_000), head);

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
        all.contains("took over a segment whose lease expired or whose process is gone"),
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
    let size = sender_indexer::pipeline::auto_segment_blocks(0, head);
    let segments = (head + 1).div_ceil(size);
    assert!(segments >= 4, "{head} blocks in segments of {size}");
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

/// A 20-block chain (two transactions a block) indexed whole by one plain
/// backfill in segments of [`SEGMENT`] blocks, with a 5 s lease: the node,
/// its head, the database and the directory of the config.
async fn indexed_in_segments() -> (Anvil, u64, PgPool, String, tempfile::TempDir) {
    let anvil = no_mining_anvil().await;
    let head = chain_of(&anvil, 2, 20).await;
    let (pool, db) = migrated_db().await;
    let dir = tempfile::tempdir().unwrap();
    let config = lease_config(&dir, 5000);
    let args = backfill_args(&config, head);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    indexer::run_ok(anvil.url(), &db, &args);
    assert_complete(&pool, head).await;
    (anvil, head, pool, db, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_link_broken_across_a_segment_boundary_is_indexed_again() {
    let (anvil, _, pool, db, dir) = indexed_in_segments().await;
    let config = lease_config(&dir, 5000);

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

    // A range that ends inside a segment of an earlier, longer one. While
    // that segment is leased by a live backfill, this run can neither lease
    // it nor split it: it refuses to start (rather than report the range
    // complete without those blocks) and says who holds it and what to run.
    let set_last = |state: &'static str| {
        let pool = pool.clone();
        async move {
            sqlx::query(
                "UPDATE segments SET state = $2, next_block = first_block, done_at = NULL,
                        owner = 'elsewhere:1:0', expires_at = now() + interval '1 hour'
                 WHERE first_block = $1",
            )
            .bind(last_segment as i64)
            .bind(state)
            .execute(&pool)
            .await
            .unwrap();
        }
    };
    set_last("leased").await;
    let short = backfill_args(&config, head - 1);
    let short: Vec<&str> = short.iter().map(String::as_str).collect();
    let out = indexer::run(anvil.url(), &db, &short);
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "blocks {last_segment}..={} of the range 0..={} lie in segment {last_segment}..={head}, which reaches outside the range and is leased right now by elsewhere:1:0",
        head - 1,
        head - 1
    );
    assert!(
        !out.status.success()
            && err.contains(&want)
            && err.contains(&format!("--from 0 --to {head}")),
        "{err}"
    );

    // Once that segment is free (its backfill stopped before it), the
    // shorter run splits it at its edge and indexes the part inside; a run
    // over the whole range then finds only the rest to do.
    set_last("free").await;
    let out = indexer::run(anvil.url(), &db, &short);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let split: Vec<(i64, i64, String)> = sqlx::query_as(
        "SELECT first_block, last_block, state FROM segments WHERE first_block >= $1 ORDER BY 1",
    )
    .bind(last_segment as i64)
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(
        split,
        [
            (last_segment as i64, head as i64 - 1, "done".to_string()),
            (head as i64, head as i64, "free".to_string())
        ]
    );
    indexer::run_ok(anvil.url(), &db, &args);
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert_complete(&pool, head).await;
}

/// A segment taken over mid-way (its process gone) whose written part came
/// from another fork: the block at its progress does not extend the block
/// written below it, so the segment is indexed again from its first
/// block, while the segments after it that the same pipeline had already
/// leased are given back and indexed after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reorg_inside_a_segment_indexes_it_again_from_its_first_block() {
    let (anvil, head, pool, db, dir) = indexed_in_segments().await;
    let config = lease_config(&dir, 5000);
    let args = backfill_args(&config, head);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    // Segment 10 as a process killed mid-way left it, with blocks 10..=14
    // written from another fork (block 14's hash is not the parent of
    // block 15); every segment above it not indexed yet.
    sqlx::query(
        "UPDATE segments SET state = 'leased', owner = 'gone:1:0', owner_key = NULL,
                next_block = 15, done_at = NULL, expires_at = now() - interval '1 second'
         WHERE first_block = 10",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query(
        "UPDATE segments SET state = 'free', next_block = first_block, done_at = NULL
         WHERE first_block > 10",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("UPDATE blocks SET hash = '\\x0101' WHERE number = 14")
        .execute(&pool)
        .await
        .unwrap();

    let mut cmd = indexer::command(anvil.url(), &db, &args);
    cmd.env("RUST_LOG", "info,sqlx=warn");
    let out = indexer::finish(cmd, &args);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("took over a segment whose lease expired or whose process is gone first=10 last=19 next=15"),
        "{log}"
    );
    assert!(
        log.contains("block 15 does not extend block 14 (a reorg while the segment was indexed); indexing the segment again from its first block"),
        "{log}"
    );
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert_complete(&pool, head).await;
}

/// A lease whose answer was lost with its connection (PostgreSQL
/// restarted between the commit and the reply) is taken again by the
/// same process's next lease: nobody else would, as the process renews
/// its leases and its key lives, and the run would wait for it forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_whose_answer_was_lost_is_taken_again_by_its_owner() {
    let (pool, db) = migrated_db().await;
    let store = sender_indexer::store::Store::connect(db.parse().unwrap(), 2)
        .await
        .unwrap();
    store.plan_segments(0, 29, SEGMENT).await.unwrap();
    // "me" is alive: a session holds its key, 7.
    let mut me_alive = pool.acquire().await.unwrap();
    sqlx::query("SELECT pg_advisory_lock(7)")
        .execute(&mut *me_alive)
        .await
        .unwrap();
    let lease = Duration::from_secs(30);
    let lease_as = |owner: &'static str, held: Vec<u64>| {
        let store = &store;
        async move {
            store
                .lease_segment(0, 29, owner, 7, lease, &held)
                .await
                .unwrap()
                .map(|s| s.first)
        }
    };
    // Leased, but the caller never heard: it holds nothing it knows of.
    assert_eq!(lease_as("me", vec![]).await, Some(0));
    assert_eq!(lease_as("me", vec![]).await, Some(0), "taken again");
    // Held and known: the next one.
    assert_eq!(lease_as("me", vec![0]).await, Some(10));
    // Another owner does not take a live owner's leases: the free one.
    assert_eq!(lease_as("other", vec![]).await, Some(20));
    let leased: i64 = sqlx::query_scalar("SELECT count(*) FROM segments WHERE state = 'leased'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(leased, 3);
}

/// A database indexed by a backfill that wrote alone (`--segment-blocks
/// 0`, as every backfill did before segments were the default) is not
/// indexed again by a plain backfill over the same range: the segments it
/// plans up to the stored checkpoint are done at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_stored_without_segments_are_not_indexed_again() {
    let anvil = no_mining_anvil().await;
    let head = chain_of(&anvil, 1, 40).await;
    let (pool, db) = migrated_db().await;
    let dir = tempfile::tempdir().unwrap();
    let config = lease_config(&dir, 5000);
    let mut alone = plain_backfill_args(&config, head);
    alone.splice(0..0, ["--segment-blocks".to_string(), "off".to_string()]);
    let alone: Vec<&str> = alone.iter().map(String::as_str).collect();
    indexer::run_ok(anvil.url(), &db, &alone);
    let segments: i64 = sqlx::query_scalar("SELECT count(*) FROM segments")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(segments, 0, "a backfill alone plans no segments");

    mine_empty(&anvil, 30).await;
    let grown = anvil.block_number().await;
    let args = plain_backfill_args(&config, grown);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut cmd = indexer::command(anvil.url(), &db, &args);
    cmd.env("RUST_LOG", "info,sqlx=warn");
    let out = indexer::finish(cmd, &args);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{log}");
    let leased: Vec<u64> = log
        .lines()
        .filter(|l| l.contains("leased a segment"))
        .map(|l| {
            let first = l.split("first=").nth(1).unwrap();
            first.split(' ').next().unwrap().parse().unwrap()
        })
        .collect();
    let size = sender_indexer::pipeline::auto_segment_blocks(0, grown);
    assert!(
        !leased.is_empty() && leased.iter().all(|&f| f >= head / size * size),
        "only segments above the stored blocks (up to {head}) are leased: {leased:?}\n{log}"
    );
    let below: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM segments WHERE last_block <= $1 AND state = 'done' AND leased_at IS NULL",
    )
    .bind(head as i64)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        below > 0,
        "segments below the checkpoint are done without a lease"
    );
    assert_db_equals_chain(&pool, &anvil, 0, grown).await;
    assert_complete(&pool, grown).await;
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

/// A plain `backfill` beside a writer that writes alone (`follow`) is
/// refused, and the message says why and what to do; a backfill set to
/// write alone beside shared ones is told how to join them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backfill_beside_a_writer_alone_is_told_why_and_what_to_run() {
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
        stderr.contains("a sender-indexer that writes alone (follow, sync, or a backfill with --segment-blocks 0) is writing to this database")
            && stderr.contains("follow and sync resume from the checkpoint"),
        "{stderr}"
    );
    leader.terminate().await;

    // Shared backfills running (slowly, behind a node 40 ms away): one
    // that was set to write alone is told to drop that setting.
    mine_empty(&anvil, 200).await;
    let node = slow_proxy(anvil.url(), Duration::from_millis(40)).await;
    let dir = tempfile::tempdir().unwrap();
    let config = lease_config(&dir, 5000);
    let shared = plain_backfill_args(&config, anvil.block_number().await);
    let mut shared = spawn(&node, &db, &shared);
    shared.wait_for_log("leased a segment", LIMIT).await;
    let out = indexer::run(
        anvil.url(),
        &db,
        &[
            "--segment-blocks",
            "0",
            "backfill",
            "--from",
            "0",
            "--to",
            "2",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr
            .contains("this backfill was set to write alone (index.segment_blocks = 0 or \"off\")")
            && stderr.contains("without --segment-blocks 0, backfill processes share a range"),
        "{stderr}"
    );
    let status = shared.wait(LIMIT).await;
    assert!(status.success(), "{}", shared.stderr());
}
