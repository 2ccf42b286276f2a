//! `follow` woken by a WebSocket `newHeads` subscription rather than by
//! polling: with a poll interval of a minute, a block the node announces
//! must be indexed within seconds, over `ws://` and over `wss://` with a
//! private CA, and again after the socket went down and came back. Real
//! mainnet blocks from the test JSON-RPC server, headers pushed by the
//! tokio-tungstenite test server (`support::ws_server`).
//!
//! Its blocks are synthetic (not sealed): `--verify off`.

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::indexer::Running;
use crate::support::{
    fixtures, indexer, pg,
    rpc_server::RpcServer,
    ws_server::{TestCa, WsHeads},
};

const FIRST: u64 = 24_476_000;

/// A block as `newHeads` carries it: the header, without transactions.
fn header(block: &Value) -> Value {
    let mut h = block.clone();
    h.as_object_mut().unwrap().remove("transactions");
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_indexes_a_block_as_soon_as_new_heads_announces_it() {
    let blocks = fixtures::recent_mainnet();
    let server = RpcServer::start(blocks.clone()).await.unwrap();
    server.set_head(FIRST + 4);
    let ws = WsHeads::start().await.unwrap();
    let (pool, url) = pg::fresh_db().await;
    let (mut run, _config) = follow_woken_by(&server, &url, &ws, "");
    let within = Duration::from_secs(20); // a third of the poll interval
    pg::wait_for_checkpoint(&pool, FIRST + 4, within, || run.is_running()).await;
    wait_for_subscriptions(&ws, 1, &mut run).await;

    // The node has a new block and says so; polling would wait a minute.
    server.set_head(FIRST + 5);
    assert_eq!(ws.announce(header(&blocks[5])), 1, "one subscriber");
    pg::wait_for_checkpoint(&pool, FIRST + 5, within, || run.is_running()).await;
    // Two at once: one announcement of the newer head fetches both.
    server.set_head(FIRST + 7);
    ws.announce(header(&blocks[7]));
    pg::wait_for_checkpoint(&pool, FIRST + 7, within, || run.is_running()).await;

    let log = run.terminate().await;
    assert!(log.contains("subscribed to newHeads"), "{log}");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 8, "blocks {FIRST}..={}", FIRST + 7);
}

/// `follow --from FIRST` polling once a minute, woken by `ws`; `config`
/// is the text of a config file of its own, kept as long as the run.
fn follow_woken_by(
    server: &RpcServer,
    db: &str,
    ws: &WsHeads,
    config: &str,
) -> (Running, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config).unwrap();
    let from = FIRST.to_string();
    let args = [
        "--config",
        file.to_str().unwrap(),
        "--poll-interval-ms",
        "60000",
        "follow",
        "--verify",
        "off",
        "--from",
        &from,
    ];
    let mut cmd = indexer::command(&server.url(), db, &args);
    cmd.env("WS_URL", ws.url()).env("RUST_LOG", "info");
    (Running::start(cmd), dir)
}

/// Announces block `n` (after the node has it) and returns how long the
/// indexer took to store it; fails after `limit`, a sixth of the poll
/// interval, so only the push can have woken it.
async fn announce_and_time(
    server: &RpcServer,
    ws: &WsHeads,
    blocks: &[Value],
    n: u64,
    pool: &sqlx::PgPool,
    run: &mut Running,
) -> Duration {
    server.set_head(n);
    let started = Instant::now();
    assert!(
        ws.announce(header(&blocks[(n - FIRST) as usize])) >= 1,
        "a subscriber"
    );
    pg::wait_for_checkpoint(pool, n, Duration::from_secs(10), || run.is_running()).await;
    started.elapsed()
}

async fn wait_for_subscriptions(ws: &WsHeads, n: usize, run: &mut Running) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while ws.subscriptions() < n {
        assert!(
            Instant::now() < deadline,
            "{n} subscriptions within 30 s (have {}):\n{}",
            ws.subscriptions(),
            run.stderr()
        );
        assert!(run.is_running(), "follow exited:\n{}", run.stderr());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_over_wss_with_a_private_ca_is_woken_by_new_heads() {
    let blocks = fixtures::recent_mainnet();
    let server = RpcServer::start(blocks.clone()).await.unwrap();
    server.set_head(FIRST + 2);
    let ca = TestCa::new();
    let ws = WsHeads::start_tls(&ca).await.unwrap();
    assert!(ws.url().starts_with("wss://"));
    let (pool, url) = pg::fresh_db().await;
    let config = format!(
        "[rpc]\ntls_ca_file = {:?}\n",
        ca.ca_file().to_str().unwrap()
    );
    let (mut run, _config) = follow_woken_by(&server, &url, &ws, &config);
    pg::wait_for_checkpoint(&pool, FIRST + 2, Duration::from_secs(20), || {
        run.is_running()
    })
    .await;
    wait_for_subscriptions(&ws, 1, &mut run).await;
    let took = announce_and_time(&server, &ws, &blocks, FIRST + 3, &pool, &mut run).await;
    eprintln!("wss newHeads to stored block: {took:?}");
    // About 50 ms here; the bound leaves room for a loaded machine and is
    // still a twentieth of the poll interval.
    assert!(took < Duration::from_secs(3), "woken after {took:?}");
    let log = run.terminate().await;
    assert!(log.contains("subscribed to newHeads"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wss_endpoint_whose_certificate_is_not_trusted_is_refused_and_follow_polls() {
    let blocks = fixtures::recent_mainnet();
    let server = RpcServer::start(blocks.clone()).await.unwrap();
    server.set_head(FIRST + 1);
    let ca = TestCa::new();
    let ws = WsHeads::start_tls(&ca).await.unwrap();
    let (pool, url) = pg::fresh_db().await;
    // No tls_ca_file: the test CA is not among the web roots.
    let (mut run, _config) = follow_woken_by(&server, &url, &ws, "");
    pg::wait_for_checkpoint(&pool, FIRST + 1, Duration::from_secs(20), || {
        run.is_running()
    })
    .await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        ws.subscriptions(),
        0,
        "subscribed without trusting the certificate"
    );
    let log = run.terminate().await;
    assert!(
        log.contains("newHeads: cannot connect") && log.contains("polling the head meanwhile"),
        "{log}"
    );
    assert!(log.contains("certificate"), "the cause is named: {log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn new_heads_resubscribes_after_the_socket_goes_down_and_comes_back() {
    let blocks = fixtures::recent_mainnet();
    let server = RpcServer::start(blocks.clone()).await.unwrap();
    server.set_head(FIRST + 1);
    let ws = WsHeads::start().await.unwrap();
    // Down from the start: follow begins by polling.
    ws.set_down(true);
    let (pool, url) = pg::fresh_db().await;
    let (mut run, _config) = follow_woken_by(&server, &url, &ws, "");
    pg::wait_for_checkpoint(&pool, FIRST + 1, Duration::from_secs(20), || {
        run.is_running()
    })
    .await;
    ws.set_down(false);
    wait_for_subscriptions(&ws, 1, &mut run).await;
    announce_and_time(&server, &ws, &blocks, FIRST + 2, &pool, &mut run).await;
    // Down again, every connection dropped, then back.
    ws.set_down(true);
    tokio::time::sleep(Duration::from_millis(500)).await;
    ws.set_down(false);
    wait_for_subscriptions(&ws, 2, &mut run).await;
    announce_and_time(&server, &ws, &blocks, FIRST + 3, &pool, &mut run).await;
    let log = run.terminate().await;
    assert!(log.contains("polling the head meanwhile"), "{log}");
    assert_eq!(log.matches("subscribed to newHeads").count(), 2, "{log}");
}
