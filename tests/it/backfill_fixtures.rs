//! Backfill of the 42 real blocks (mainnet 2015-2026, Sepolia, Goerli,
//! Gnosis, a hive chain) served by the test JSON-RPC server, through the
//! real binary into a real PostgreSQL; then every row is checked against
//! the block JSON.
//!
//! The server's receipts for these blocks are generated, so these runs use
//! `--logs off`: headers and transactions are verified in full.

use std::collections::BTreeMap;

use serde_json::Value;
use sqlx::Row;

use crate::support::{fixtures, indexer, pg, rpc_server::RpcServer};

fn quantity(v: &Value) -> u128 {
    u128::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

fn bytes(v: &Value) -> Vec<u8> {
    hex::decode(v.as_str().unwrap().trim_start_matches("0x")).unwrap()
}

/// Runs of blocks that really chain (consecutive numbers, each parent hash
/// the previous hash): the hive blocks 1-3, for one, come from different
/// test chains.
fn groups(blocks: &[Value]) -> Vec<(u64, u64)> {
    let mut sorted: Vec<&Value> = blocks.iter().collect();
    sorted.sort_by_key(|b| quantity(&b["number"]));
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut prev: Option<&Value> = None;
    for b in sorted {
        let n = quantity(&b["number"]) as u64;
        match (out.last_mut(), prev) {
            (Some((_, hi)), Some(p)) if *hi + 1 == n && b["parentHash"] == p["hash"] => *hi = n,
            _ => out.push((n, n)),
        }
        prev = Some(b);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_real_block_is_stored_with_verified_senders() {
    let mut by_network: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (name, block) in fixtures::blocks() {
        let network = name.split('-').next().unwrap().to_string();
        by_network.entry(network).or_default().push(block);
    }
    let mut total_txs = 0;
    // Each run of chained blocks goes into its own database, as a chain of
    // its own: blocks of one network that do not chain must not meet.
    let mut runs = Vec::new();
    for (network, blocks) in by_network {
        for (lo, hi) in groups(&blocks) {
            let run: Vec<Value> = blocks
                .iter()
                .filter(|b| (lo..=hi).contains(&(quantity(&b["number"]) as u64)))
                .cloned()
                .collect();
            runs.push((network.clone(), lo, hi, run));
        }
    }
    assert!(runs.len() >= 20, "{} runs", runs.len());
    for (network, lo, hi, blocks) in runs {
        let (pool, url) = pg::fresh_db().await;
        let server = RpcServer::start(blocks.clone()).await.unwrap();
        let out = indexer::run_ok(
            &server.url(),
            &url,
            &[
                "backfill",
                "--logs",
                "off",
                "--from",
                &lo.to_string(),
                "--to",
                &hi.to_string(),
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("differs"), "{network}: {stderr}");
        for block in &blocks {
            let n = quantity(&block["number"]) as i64;
            let row = sqlx::query("SELECT hash, parent_hash, tx_count, extract(epoch from timestamp)::bigint, timestamp_seconds::text FROM blocks WHERE number = $1")
                .bind(n)
                .fetch_one(&pool)
                .await
                .unwrap_or_else(|e| panic!("{network} block {n}: {e}"));
            assert_eq!(
                row.get::<Vec<u8>, _>(0),
                bytes(&block["hash"]),
                "{network} block {n}"
            );
            assert_eq!(row.get::<Vec<u8>, _>(1), bytes(&block["parentHash"]));
            assert_eq!(row.get::<i64, _>(3) as u128, quantity(&block["timestamp"]));
            assert_eq!(
                row.get::<String, _>(4),
                quantity(&block["timestamp"]).to_string()
            );
            let txs = block["transactions"].as_array().unwrap();
            assert_eq!(row.get::<i32, _>(2) as usize, txs.len());
            let rows = sqlx::query(
                "SELECT tx_index, hash, sender, node_from, from_matches, to_address, nonce::text AS nonce, value::text, tx_type, error
                 FROM transactions WHERE block_number = $1 ORDER BY tx_index",
            )
            .bind(n)
            .fetch_all(&pool)
            .await
            .unwrap();
            assert_eq!(rows.len(), txs.len(), "{network} block {n}");
            for (tx, row) in txs.iter().zip(&rows) {
                let what = format!("{network} block {n} tx {}", tx["hash"]);
                assert_eq!(row.get::<Vec<u8>, _>("hash"), bytes(&tx["hash"]), "{what}");
                assert_eq!(
                    row.get::<Option<Vec<u8>>, _>("sender"),
                    Some(bytes(&tx["from"])),
                    "{what}: {:?}",
                    row.get::<Option<String>, _>("error")
                );
                assert_eq!(
                    row.get::<Option<Vec<u8>>, _>("node_from"),
                    Some(bytes(&tx["from"])),
                    "{what}"
                );
                assert_eq!(
                    row.get::<Option<bool>, _>("from_matches"),
                    Some(true),
                    "{what}"
                );
                let to = (!tx["to"].is_null()).then(|| bytes(&tx["to"]));
                assert_eq!(row.get::<Option<Vec<u8>>, _>("to_address"), to, "{what}");
                assert_eq!(
                    row.get::<Option<String>, _>("nonce")
                        .map(|v| v.parse::<u128>().unwrap()),
                    Some(quantity(&tx["nonce"])),
                    "{what}"
                );
                assert_eq!(
                    row.get::<Option<String>, _>("value"),
                    Some(quantity(&tx["value"]).to_string()),
                    "{what}"
                );
                let ty = tx.get("type").map_or(0, |t| quantity(t) as i16);
                assert_eq!(row.get::<i16, _>("tx_type"), ty, "{what}");
                total_txs += 1;
            }
        }
        let auths: i64 =
            sqlx::query_scalar("SELECT count(*) FROM authorizations WHERE authority IS NOT NULL")
                .fetch_one(&pool)
                .await
                .unwrap();
        let expected: usize = blocks
            .iter()
            .flat_map(|b| b["transactions"].as_array().unwrap())
            .map(|t| {
                t.get("authorizationList")
                    .and_then(Value::as_array)
                    .map_or(0, Vec::len)
            })
            .sum();
        assert_eq!(auths as usize, expected, "{network} authorities");
    }
    assert!(total_txs > 2000, "{total_txs} transactions checked");
}

/// (block_number, tx_index, hash, sender)
type TxRow = (i64, i32, Vec<u8>, Option<Vec<u8>>);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rerun_changes_nothing_and_resumes_after_the_checkpoint() {
    let blocks: Vec<Value> = fixtures::recent_mainnet();
    assert_eq!(blocks.len(), 10);
    let (pool, url) = pg::fresh_db().await;
    let server = RpcServer::start(blocks).await.unwrap();
    let snapshot = || async {
        let rows: Vec<TxRow> = sqlx::query_as(
            "SELECT block_number, tx_index, hash, sender FROM transactions ORDER BY 1, 2",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        let cp: (i64, Vec<u8>) = sqlx::query_as("SELECT block_number, block_hash FROM checkpoint")
            .fetch_one(&pool)
            .await
            .unwrap();
        (rows, cp)
    };
    // Part of the range, then all of it: the second run resumes after 24476004.
    indexer::run_ok(
        &server.url(),
        &url,
        &[
            "backfill", "--logs", "off", "--from", "24476000", "--to", "24476004",
        ],
    );
    let requests_before = server.calls();
    indexer::run_ok(
        &server.url(),
        &url,
        &[
            "backfill", "--logs", "off", "--from", "24476000", "--to", "24476009",
        ],
    );
    let fetched = server.calls() - requests_before;
    let first = snapshot().await;
    assert_eq!(first.1.0, 24476009);
    let blocks_stored: i64 = sqlx::query_scalar("SELECT count(*) FROM blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(blocks_stored, 10);
    // eth_blockNumber is not asked (numeric --to): only the five new blocks,
    // and one receipts call for each.
    assert!(
        fetched <= 2 * (5 + 1),
        "resumed run fetched {fetched} blocks"
    );
    // Re-indexing the whole range again changes nothing and raises no error.
    indexer::run_ok(
        &server.url(),
        &url,
        &[
            "backfill", "--logs", "off", "--from", "24476000", "--to", "24476009",
        ],
    );
    indexer::run_ok(
        &server.url(),
        &url,
        &[
            "backfill", "--logs", "off", "--from", "24476002", "--to", "24476003",
        ],
    );
    assert_eq!(snapshot().await, first);
}
