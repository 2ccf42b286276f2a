//! Compressed JSON-RPC answers (`rpc.gzip`): the ten consecutive real
//! mainnet blocks 24,476,000..=009 served by the test server, which
//! compresses an answer when its request accepts gzip, as providers do.
//! With the default settings every request asks for gzip, the bytes on the
//! wire drop, and the stored blocks are the same; `rpc.gzip = false` asks
//! for none. (A compressed answer that decodes past `rpc.max_response_mib`:
//! `hostile`. Bytes and CPU per block, with and without: `cargo bench
//! --bench gzip`.)

use serde_json::Value;

use crate::support::{fixtures, indexer, pg, rpc_server::RpcServer};

/// Backfills the ten blocks from a compressing server into a fresh
/// database, with `extra` settings; returns the server's traffic
/// (requests asking for gzip, bytes sent, bytes before compression) and
/// the requests it received, after checking every stored sender.
async fn backfill(blocks: &[Value], extra: &str) -> ((u64, u64, u64), u64) {
    let (pool, url) = pg::fresh_db().await;
    let server = RpcServer::start(blocks.to_vec()).await.unwrap();
    server.set_gzip(true);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, format!("[rpc]\n{extra}\n")).unwrap();
    indexer::run_ok(
        &server.url(),
        &url,
        &[
            "--config",
            config.to_str().unwrap(),
            "backfill",
            "--logs",
            "off",
            "--from",
            "24476000",
            "--to",
            "24476009",
        ],
    );
    let want: Vec<(String, String)> = blocks
        .iter()
        .flat_map(|b| b["transactions"].as_array().unwrap())
        .map(|tx| {
            (
                tx["hash"].as_str().unwrap().to_owned(),
                tx["from"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let got: Vec<(String, String)> = sqlx::query_as(
        "SELECT '0x' || encode(hash, 'hex'), '0x' || encode(sender, 'hex') FROM transactions
         WHERE sender_source = 'recovered' ORDER BY block_number, tx_index",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(want.len() > 1000, "{} transactions", want.len());
    assert_eq!(got, want, "every transaction stored with its sender");
    let full: i64 = sqlx::query_scalar("SELECT count(*) FROM blocks WHERE verified = 'full'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(full, 10, "every block verified in full");
    let (asked, wire, plain, _) = server.wire();
    ((asked, wire, plain), server.requests())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_come_compressed_unless_turned_off_and_the_data_is_the_same() {
    let blocks = fixtures::recent_mainnet();

    // Default settings: every request asks for gzip and gets it.
    let ((asked, wire, plain), requests) = backfill(&blocks, "").await;
    eprintln!("gzip: {wire} bytes sent for {plain} in {requests} requests");
    assert_eq!(asked, requests, "every request asks for gzip");
    assert!(
        wire * 3 < plain,
        "compressed answers are several times smaller: {wire} bytes sent for {plain}"
    );

    // rpc.gzip = false: none asks, the bytes on the wire are the answers'.
    let ((asked, wire, plain), requests) = backfill(&blocks, "gzip = false").await;
    assert!(requests > 0);
    assert_eq!(asked, 0, "no request asks for gzip");
    assert_eq!(wire, plain);
}
