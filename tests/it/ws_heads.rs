//! `follow` woken by a WebSocket `newHeads` subscription rather than by
//! polling: with a poll interval of a minute, a block the node announces
//! must be indexed within seconds. Real mainnet blocks from the test
//! JSON-RPC server, headers pushed by a soketto WebSocket server.
//!
//! Its blocks are synthetic (not sealed): `--verify off`.

use std::time::Duration;

use serde_json::Value;

use crate::support::indexer::Running;
use crate::support::{fixtures, indexer, pg, rpc_server::RpcServer, ws_server::WsHeads};

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
    let from = FIRST.to_string();
    let args = [
        "--poll-interval-ms",
        "60000",
        "follow",
        "--verify",
        "off",
        "--from",
        &from,
    ];
    let mut cmd = indexer::command(&server.url(), &url, &args);
    cmd.env("WS_URL", ws.url()).env("RUST_LOG", "info");
    let mut run = Running::start(cmd);
    let within = Duration::from_secs(20); // a third of the poll interval
    pg::wait_for_checkpoint(&pool, FIRST + 4, within, || run.is_running()).await;

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
