//! `follow` and `sync` against a real anvil: reorgs of several depths and a
//! rollback are undone until the database equals the node's canonical chain
//! exactly; a reorg deeper than --max-reorg-depth stops the process with the
//! database consistent; SIGKILL and SIGTERM mid-run lose nothing.
//!
//! anvil 1.7.1 (the latest release) computes `transactionsRoot` over blob
//! transactions with their sidecars (foundry-rs/foundry#15132, fixed after
//! it), so runs whose chain holds blob transactions use `--verify off`;
//! `verify.rs` shows that failure caught and covers the rest on anvil.

use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use serde_json::json;
use sqlx::PgPool;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::support::anvil::{Anvil, AnvilOptions, mine_empty, mine_every_kind};
use crate::support::compare::{assert_db_equals_chain, chain, wait_db_equals_head};
use crate::support::indexer::Running;
use crate::support::pg;
use crate::support::proxy::slow_proxy;

const SYNC_LIMIT: Duration = Duration::from_secs(30);

pub(crate) async fn no_mining_anvil() -> Anvil {
    Anvil::start_with(AnvilOptions {
        no_mining: true,
        ..Default::default()
    })
    .await
}

/// A fresh database with the schema, so the test can poll it at once.
pub(crate) async fn migrated_db() -> (PgPool, String) {
    let (pool, url) = pg::fresh_db().await;
    sender_indexer::store::MIGRATOR.run(&pool).await.unwrap();
    (pool, url)
}

/// `anvil_reorg` of `depth` blocks whose replacements carry two plain
/// transfers (first and last new block), so orphaned tx rows would show.
pub(crate) async fn reorg_with_txs(anvil: &Anvil, depth: u64) {
    let to = anvil.account(9).0;
    let tx = |from: usize| json!({"from": anvil.account(from).0, "to": to, "value": "0x1"});
    anvil
        .rpc(
            "anvil_reorg",
            json!([depth, [[tx(1), 0], [tx(2), depth - 1]]]),
        )
        .await;
}

pub(crate) fn free_local_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().to_string()
}

pub(crate) async fn http_get(addr: &str, path: &str) -> String {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

pub(crate) fn metric(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_undoes_reorgs_and_rollbacks_exactly() {
    let anvil = no_mining_anvil().await;
    mine_every_kind(&anvil).await;
    mine_empty(&anvil, 3).await;
    let (pool, url) = migrated_db().await;
    let metrics = free_local_addr();
    let mut run = Running::spawn(
        anvil.url(),
        &url,
        &[
            "follow",
            "--verify",
            "off",
            "--from",
            "0",
            "--poll-interval-ms",
            "200",
            "--metrics-addr",
            &metrics,
        ],
    );
    wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, "initial").await;
    mine_every_kind(&anvil).await;
    mine_empty(&anvil, 70).await;
    wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, "new blocks").await;

    let mut triggered = 0;
    for depth in [1, 3, 10, 64] {
        reorg_with_txs(&anvil, depth).await;
        triggered += 1;
        wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, &format!("reorg depth {depth}")).await;
        // The chain goes on from the new branch.
        mine_every_kind(&anvil).await;
        wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, &format!("after reorg {depth}")).await;
    }
    anvil.rollback(2).await;
    anvil.mine().await;
    triggered += 1;
    wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, "rollback 2 + mine").await;
    assert!(
        run.try_status().is_none(),
        "follow exited:\n{}",
        run.stderr()
    );

    let reorg_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM reorgs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(reorg_rows >= triggered, "{reorg_rows} reorgs recorded");
    let text = http_get(&metrics, "/metrics").await;
    assert!(text.starts_with("HTTP/1."), "{text}");
    let reorgs = metric(&text, "sender_indexer_reorgs_total").expect("reorgs_total");
    assert!(reorgs >= triggered as f64, "reorgs_total {reorgs}");
    let head = anvil.block_number().await as f64;
    assert!(
        metric(&text, "sender_indexer_lag_blocks").is_some(),
        "{text}"
    );
    assert_eq!(metric(&text, "sender_indexer_head_block"), Some(head));
    assert_eq!(metric(&text, "sender_indexer_indexed_block"), Some(head));
    let health = http_get(&metrics, "/health").await;
    assert!(
        health.starts_with("HTTP/1.") && health.contains(" 200"),
        "{health}"
    );

    run.terminate().await;
    let head = anvil.block_number().await;
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reorg_deeper_than_max_depth_stops_follow_with_a_consistent_db() {
    let anvil = no_mining_anvil().await;
    mine_every_kind(&anvil).await;
    mine_empty(&anvil, 20).await;
    let (pool, url) = migrated_db().await;
    let args = [
        "follow",
        "--verify",
        "off",
        "--from",
        "0",
        "--poll-interval-ms",
        "200",
        "--max-reorg-depth",
        "5",
    ];
    let mut run = Running::spawn(anvil.url(), &url, &args);
    wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, "initial").await;
    let head = anvil.block_number().await;
    let old = chain(&anvil, 0, head).await;
    reorg_with_txs(&anvil, 8).await;
    let status = run.wait(SYNC_LIMIT).await;
    let stderr = run.stderr();
    assert!(!status.success(), "follow exited {status}:\n{stderr}");
    assert!(stderr.contains("max_reorg_depth"), "{stderr}");

    // Left as it was: the old chain 0..=head, checkpoint at its tip; the
    // blocks below the fork are the node's.
    let fork = head - 8;
    let stored: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT number, hash FROM blocks ORDER BY number")
            .fetch_all(&pool)
            .await
            .unwrap();
    let old_hashes: Vec<(i64, Vec<u8>)> = old
        .iter()
        .enumerate()
        .map(|(n, b)| {
            let h = b["hash"].as_str().unwrap().trim_start_matches("0x");
            (n as i64, hex::decode(h).unwrap())
        })
        .collect();
    assert_eq!(stored, old_hashes);
    let cp: (i64, Vec<u8>) = sqlx::query_as("SELECT block_number, block_hash FROM checkpoint")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(&cp, stored.last().unwrap());
    assert_db_equals_chain_prefix(&pool, &anvil, fork).await;

    // A larger limit converges onto the new branch.
    let mut run = Running::spawn(
        anvil.url(),
        &url,
        &[
            "follow",
            "--verify",
            "off",
            "--poll-interval-ms",
            "200",
            "--max-reorg-depth",
            "16",
        ],
    );
    wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, "after raising the limit").await;
    run.terminate().await;
}

/// Blocks `0..=hi` as stored equal the node's (hash and transactions).
async fn assert_db_equals_chain_prefix(pool: &PgPool, anvil: &Anvil, hi: u64) {
    let node = chain(anvil, 0, hi).await;
    for b in &node {
        let n = crate::support::anvil::hex_u64(&b["number"]) as i64;
        let hash: Vec<u8> = sqlx::query_scalar("SELECT hash FROM blocks WHERE number = $1")
            .bind(n)
            .fetch_one(pool)
            .await
            .unwrap();
        let want = hex::decode(b["hash"].as_str().unwrap().trim_start_matches("0x")).unwrap();
        assert_eq!(hash, want, "block {n}");
        let txs: Vec<Vec<u8>> = sqlx::query_scalar(
            "SELECT hash FROM transactions WHERE block_number = $1 ORDER BY tx_index",
        )
        .bind(n)
        .fetch_all(pool)
        .await
        .unwrap();
        let want: Vec<Vec<u8>> = b["transactions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| hex::decode(t["hash"].as_str().unwrap().trim_start_matches("0x")).unwrap())
            .collect();
        assert_eq!(txs, want, "block {n}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_killed_then_restarted_equals_the_chain() {
    let anvil = no_mining_anvil().await;
    mine_every_kind(&anvil).await;
    mine_empty(&anvil, 300).await;
    mine_every_kind(&anvil).await;
    let (pool, url) = migrated_db().await;
    let mut run = Running::spawn(
        anvil.url(),
        &url,
        &[
            "follow",
            "--verify",
            "off",
            "--from",
            "0",
            "--poll-interval-ms",
            "200",
            "--batch-size",
            "5",
            "--concurrency",
            "1",
        ],
    );
    run.signal_after_checkpoint(&pool, 0, Signal::SIGKILL, SYNC_LIMIT)
        .await;
    let status = run.wait(Duration::from_secs(10)).await;
    assert!(!status.success());
    if let Some(cp) = pg::checkpoint(&pool).await {
        assert_db_equals_chain(&pool, &anvil, 0, cp).await;
    }
    mine_every_kind(&anvil).await;
    // Resumes after the checkpoint (no --from).
    let mut run = Running::spawn(
        anvil.url(),
        &url,
        &["follow", "--verify", "off", "--poll-interval-ms", "200"],
    );
    wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, "restarted follow").await;
    run.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_during_sync_exits_0_and_a_restart_catches_up_and_follows() {
    let anvil = no_mining_anvil().await;
    mine_every_kind(&anvil).await;
    mine_empty(&anvil, 1000).await;
    let head = anvil.block_number().await;
    let (pool, url) = migrated_db().await;
    let args = [
        "sync",
        "--verify",
        "off",
        "--poll-interval-ms",
        "200",
        "--batch-size",
        "5",
        "--concurrency",
        "1",
    ];
    // Through a proxy that delays each request, so that the signal lands
    // while most of the range is still to fetch.
    let slow = slow_proxy(anvil.url(), Duration::from_millis(10)).await;
    let mut run = Running::spawn(&slow, &url, &args);
    run.signal_after_checkpoint(&pool, 0, Signal::SIGTERM, SYNC_LIMIT)
        .await;
    let status = run.wait(Duration::from_secs(20)).await;
    assert!(
        status.success(),
        "SIGTERM: exit {status}; stderr:\n{}",
        run.stderr()
    );
    let cp = pg::checkpoint(&pool).await.unwrap();
    assert!(
        cp < head,
        "sync finished before the signal: checkpoint {cp}"
    );
    assert_db_equals_chain(&pool, &anvil, 0, cp).await;

    let mut run = Running::spawn(anvil.url(), &url, &args);
    wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, "restarted sync").await;
    mine_every_kind(&anvil).await;
    let t = Instant::now();
    wait_db_equals_head(&pool, &anvil, Duration::from_secs(5), "new block").await;
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    run.terminate().await;
}
