//! `getLogs` mode and real receipts against the JSON-RPC test server.
//!
//! * Real receipts (tests/fixtures/receipts: mainnet Frontier to Shanghai)
//!   in receipts mode: every log, status and gas figure stored equals the
//!   receipts; the same logs come out of `getLogs` mode.
//! * The server caps `eth_getLogs` as each real provider does, answering
//!   with its own message (Infura, Alchemy, reth, QuickNode, HTTP 413,
//!   Ankr, BlockPI, ...): every cap still yields the complete set, with
//!   and without filters, and the cap was really hit.
//! * A range answer that misses a block's logs (a node behind) or names
//!   another fork's block hash is caught and the block refetched by hash.
//!
//! Receipts and logs here are generated, not those the headers commit to, so
//! these runs use `--verify off`; `verify.rs` verifies the real receipt sets.

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::rpc_server::{LogsLimit, RangeFault, RpcServer, Wrong, plain_receipts};
use crate::support::{fixtures, indexer, pg};

fn hex_u64(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// A log as a row: block, log index, tx index, address, topics 0..3, data
/// (hex without 0x, empty for NULL).
fn row(l: &Value) -> Vec<String> {
    let h = |v: &Value| v.as_str().map_or(String::new(), |s| s[2..].to_lowercase());
    let mut r = vec![
        hex_u64(&l["blockNumber"]).to_string(),
        hex_u64(&l["logIndex"]).to_string(),
        hex_u64(&l["transactionIndex"]).to_string(),
        h(&l["address"]),
    ];
    for k in 0..4 {
        r.push(h(&l["topics"][k]));
    }
    r.push(h(&l["data"]));
    r
}

/// Equal row lists, or a failure that shows the counts and the first
/// difference rather than thousands of rows.
pub fn assert_rows(got: &[Vec<String>], want: &[Vec<String>], what: &str) {
    if let Some(i) = (0..got.len().max(want.len())).find(|&i| got.get(i) != want.get(i)) {
        panic!(
            "{what}: {} rows stored, {} expected; first difference at row {i}:\n stored:   {:?}\n expected: {:?}",
            got.len(),
            want.len(),
            got.get(i),
            want.get(i)
        );
    }
}

async fn db_logs(pool: &PgPool) -> Vec<Vec<String>> {
    let r: Vec<(Vec<Option<String>>,)> = sqlx::query_as(
        "SELECT ARRAY[block_number::text, log_index::text, tx_index::text, encode(address, 'hex'),
                encode(topic0, 'hex'), encode(topic1, 'hex'), encode(topic2, 'hex'), encode(topic3, 'hex'),
                encode(data, 'hex')] FROM logs ORDER BY block_number, log_index",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    r.into_iter()
        .map(|(v,)| v.into_iter().map(Option::unwrap_or_default).collect())
        .collect()
}

/// A config file in a temporary directory.
fn config(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
    f
}

const ADDRS: [&str; 3] = [
    "0x1111111111111111111111111111111111111111",
    "0x2222222222222222222222222222222222222222",
    "0x3333333333333333333333333333333333333333",
];

fn topic(k: u8) -> String {
    format!("0x{}", format!("{k:02x}").repeat(32))
}

/// Receipts for `block` whose every third transaction logs one to four
/// times, from three addresses with three different first topics.
fn receipts_with_logs(block: &Value) -> Value {
    let mut receipts = plain_receipts(block);
    let mut index = 0u64;
    for (i, r) in receipts.as_array_mut().unwrap().iter_mut().enumerate() {
        if i % 3 != 0 {
            continue;
        }
        let logs: Vec<Value> = (0..1 + i % 4)
            .map(|k| {
                let topics: Vec<String> = (0..=((i + k) % 4) as u8)
                    .map(|t| {
                        topic(if t == 0 {
                            0xa0 + ((i + k) % 3) as u8
                        } else {
                            t
                        })
                    })
                    .collect();
                let l = json!({
                    "address": ADDRS[(i + 2 * k) % 3],
                    "topics": topics,
                    "data": format!("0x{}", "ab".repeat((i + k) % 70)),
                    "blockNumber": block["number"],
                    "blockHash": block["hash"],
                    "transactionHash": r["transactionHash"],
                    "transactionIndex": r["transactionIndex"],
                    "logIndex": format!("{index:#x}"),
                    "removed": false,
                });
                index += 1;
                l
            })
            .collect();
        r["logs"] = Value::Array(logs);
    }
    receipts
}

/// The ten recent mainnet blocks with generated logs, and those logs.
async fn server_with_logs() -> (RpcServer, Vec<Value>) {
    let blocks = fixtures::recent_mainnet();
    let server = RpcServer::start(blocks.clone()).await.unwrap();
    let mut all = Vec::new();
    for b in &blocks {
        let receipts = receipts_with_logs(b);
        for r in receipts.as_array().unwrap() {
            all.extend(r["logs"].as_array().unwrap().iter().cloned());
        }
        server.insert_receipts(hex_u64(&b["number"]), &receipts);
    }
    (server, all)
}

/// tx index, status, gas used, created contract.
type ReceiptFields = (i32, Option<i16>, Option<i64>, Option<String>);

const RANGE: [&str; 7] = [
    "backfill", "--verify", "off", "--from", "24476000", "--to", "24476009",
];

fn with(args: &[&str], more: &[&str]) -> Vec<String> {
    args.iter().chain(more).map(|s| s.to_string()).collect()
}

fn run_ok(server: &RpcServer, db: &str, args: &[String]) -> String {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = indexer::run_ok(&server.url(), db, &args);
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_providers_cap_still_yields_the_complete_set() {
    let (server, all) = server_with_logs().await;
    let want: Vec<Vec<String>> = all.iter().map(row).collect();
    let per_block_max = (24_476_000..=24_476_009u64)
        .map(|n| {
            all.iter()
                .filter(|l| hex_u64(&l["blockNumber"]) == n)
                .count()
        })
        .max()
        .unwrap();
    assert!(want.len() > 300, "{} logs", want.len());
    // Every answer fits one block; no range of four does.
    for limit in LogsLimit::all(3, per_block_max) {
        server.set_logs_limit(Some(limit));
        let before = server.get_logs_calls().1;
        let (pool, db) = pg::fresh_db().await;
        let wide = config("[logs]\nmode = \"getLogs\"\nget_logs_range = 10000\n");
        run_ok(
            &server,
            &db,
            &with(&RANGE, &["--config", wide.path().to_str().unwrap()]),
        );
        assert_rows(&db_logs(&pool).await, &want, &format!("{limit:?}"));
        assert!(
            server.get_logs_calls().1 > before,
            "{limit:?}: the cap was never hit"
        );
        // Transactions and senders are indexed in full; receipt fields are
        // not fetched in this mode.
        let (txs, with_status): (i64, i64) =
            sqlx::query_as("SELECT count(*), count(status) FROM transactions")
                .fetch_one(&pool)
                .await
                .unwrap();
        assert!(txs > 1000 && with_status == 0, "{txs} {with_status}");
    }

    // Filters restrict what is asked for and stored, the same in both modes.
    let want_filtered: Vec<Vec<String>> = all
        .iter()
        .filter(|l| l["address"] != ADDRS[1] && l["topics"][0] == topic(0xa1))
        .map(row)
        .collect();
    assert!(!want_filtered.is_empty());
    server.set_logs_limit(Some(LogsLimit::InfuraResults(per_block_max)));
    for mode in ["getLogs", "receipts"] {
        let filtered = config(&format!(
            "[logs]\nmode = \"{mode}\"\naddresses = [\"{}\", \"{}\"]\ntopics0 = [\"{}\"]\n",
            ADDRS[0],
            ADDRS[2],
            topic(0xa1)
        ));
        let (pool, db) = pg::fresh_db().await;
        run_ok(
            &server,
            &db,
            &with(&RANGE, &["--config", filtered.path().to_str().unwrap()]),
        );
        assert_rows(
            &db_logs(&pool).await,
            &want_filtered,
            &format!("filtered, {mode}"),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_answer_from_a_node_behind_or_on_another_fork_is_refetched_by_hash() {
    let (server, all) = server_with_logs().await;
    let want: Vec<Vec<String>> = all.iter().map(row).collect();
    for fault in [RangeFault::Omit, RangeFault::OtherFork] {
        server.set_range_fault(Some((24_476_004, fault)));
        let (pool, db) = pg::fresh_db().await;
        run_ok(&server, &db, &with(&RANGE, &["--logs", "getLogs"]));
        assert_rows(&db_logs(&pool).await, &want, &format!("{fault:?}"));
    }
}

/// Block 24,476,005 served wrong as `what`. Twice wrong, then right: it is
/// fetched again and every log and transaction is stored. The same wrong
/// answer every time: the run stops on it at the third, its error holding
/// `named`, with the blocks below it committed and nothing of it.
async fn fetched_again_then_refused(what: Wrong, named: &str) {
    let (server, all) = server_with_logs().await;
    let want: Vec<Vec<String>> = all.iter().map(row).collect();
    server.set_wrong(24_476_005, 2, what);
    let (pool, db) = pg::fresh_db().await;
    let stderr = run_ok(&server, &db, &with(&RANGE, &[]));
    assert!(
        stderr.contains("fetching it again") && stderr.contains("block=24476005"),
        "{stderr}"
    );
    assert_rows(&db_logs(&pool).await, &want, "after refetching");
    let (txs, want_txs): (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM transactions), (SELECT sum(tx_count)::bigint FROM blocks)",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(txs, want_txs);

    server.set_wrong(24_476_005, 100, what);
    let (pool, db) = pg::fresh_db().await;
    let args = with(&RANGE, &["--batch-size", "1"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = indexer::run(&server.url(), &db, &args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "block 24476005: the same wrong answer 6 times in a row (fetched again 5 times)"
        ) && stderr.contains(named),
        "{what:?}: {stderr}"
    );
    let stored: Option<i64> = sqlx::query_scalar("SELECT max(number) FROM blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(stored.is_none_or(|n| n < 24_476_005), "{stored:?}");
}

/// Receipts that name another block (a node on another fork answered):
/// the error names the block and the hash the receipts gave.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_of_another_block_are_fetched_again_then_refused() {
    let other = "ee".repeat(32);
    fetched_again_then_refused(Wrong::ReceiptsOfAnotherBlock, &other).await;
}

/// A block whose transaction or receipt does not decode may be one bad
/// answer from one node behind a load balancer: it is fetched again too,
/// and the error names the transaction and what did not decode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_block_that_does_not_decode_is_fetched_again_then_refused() {
    fetched_again_then_refused(
        Wrong::MalformedTransaction,
        "block 24476005 tx 0: malformed transaction from the node: field r",
    )
    .await;
    fetched_again_then_refused(
        Wrong::MalformedReceipt,
        "block 24476005 tx 0: malformed receipt from the node: field gasUsed",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_receipts_give_every_log_status_and_gas_in_both_modes() {
    let mut checked_logs = 0;
    for (name, block, receipts) in fixtures::receipt_sets() {
        let n = hex_u64(&block["number"]);
        let server = RpcServer::start(vec![block]).await.unwrap();
        server.insert_receipts(n, &receipts);
        let range = [
            "backfill",
            "--verify",
            "off",
            "--from",
            &n.to_string(),
            "--to",
            &n.to_string(),
        ]
        .map(str::to_owned);
        let want_logs: Vec<Vec<String>> = receipts
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|r| r["logs"].as_array().unwrap().iter().map(row))
            .collect();
        checked_logs += want_logs.len();

        let (pool, db) = pg::fresh_db().await;
        run_ok(&server, &db, &range);
        assert_rows(
            &db_logs(&pool).await,
            &want_logs,
            &format!("{name} receipts mode"),
        );
        let got: Vec<ReceiptFields> = sqlx::query_as(
            "SELECT tx_index, status, gas_used, encode(contract_address, 'hex')
             FROM transactions ORDER BY tx_index",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        let want: Vec<ReceiptFields> = receipts
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    hex_u64(&r["transactionIndex"]) as i32,
                    r.get("status")
                        .filter(|s| !s.is_null())
                        .map(|s| hex_u64(s) as i16),
                    Some(hex_u64(&r["gasUsed"]) as i64),
                    r["contractAddress"].as_str().map(|a| a[2..].to_lowercase()),
                )
            })
            .collect();
        assert_eq!(got, want, "{name}: status, gas used, created contract");

        server.set_logs_limit(Some(LogsLimit::InfuraResults(1000)));
        let (pool, db) = pg::fresh_db().await;
        let mut args = range.to_vec();
        args.extend(["--logs".into(), "getLogs".into()]);
        run_ok(&server, &db, &args);
        assert_rows(
            &db_logs(&pool).await,
            &want_logs,
            &format!("{name} getLogs mode"),
        );
    }
    assert_eq!(checked_logs, 532, "every fixture log");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipt_batches_shrink_to_a_providers_batch_cap() {
    let (server, all) = server_with_logs().await;
    let want: Vec<Vec<String>> = all.iter().map(row).collect();
    server.set_batch_cap(Some(3));
    for by_block in [true, false] {
        server.set_block_receipts(by_block);
        let (pool, db) = pg::fresh_db().await;
        run_ok(&server, &db, &with(&RANGE, &["--batch-size", "10"]));
        assert_rows(
            &db_logs(&pool).await,
            &want,
            &format!("eth_getBlockReceipts {by_block}"),
        );
    }
    assert!(server.rejected_batches() > 0, "the cap was hit");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_past_the_head_is_waited_for_not_fatal() {
    let (server, all) = server_with_logs().await;
    let want: Vec<Vec<String>> = all.iter().map(row).collect();
    server.set_refuse_beyond_head(true);
    server.set_head(24_476_004);
    let (pool, db) = pg::fresh_db().await;
    let args = with(&RANGE, &["--logs", "getLogs"]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let mut run = crate::support::indexer::Running::spawn(&server.url(), &db, &args);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    assert!(
        run.is_running(),
        "stopped on a range past the head:\n{}",
        run.stderr()
    );
    server.set_head(24_476_009);
    let status = run.wait(std::time::Duration::from_secs(60)).await;
    assert!(status.success(), "{}", run.stderr());
    assert_rows(&db_logs(&pool).await, &want, "after the head moved");
}

#[test]
fn blooms_rebuilt_from_real_logs_equal_the_receipts_and_the_headers() {
    let mut receipts_checked = 0;
    for (name, header, receipts) in fixtures::receipt_sets() {
        let mut block_bloom = [0u8; 256];
        for r in receipts.as_array().unwrap() {
            let mut bloom = [0u8; 256];
            for l in r["logs"].as_array().unwrap() {
                let bytes = |v: &Value| hex::decode(&v.as_str().unwrap()[2..]).unwrap();
                sender_indexer::decode::bloom_add(&mut bloom, &bytes(&l["address"]));
                for t in l["topics"].as_array().unwrap() {
                    sender_indexer::decode::bloom_add(&mut bloom, &bytes(t));
                }
            }
            assert_eq!(
                format!("0x{}", hex::encode(bloom)),
                r["logsBloom"].as_str().unwrap(),
                "{name} receipt {}",
                r["transactionIndex"]
            );
            for (b, x) in block_bloom.iter_mut().zip(bloom) {
                *b |= x;
            }
            receipts_checked += 1;
        }
        assert_eq!(
            format!("0x{}", hex::encode(block_bloom)),
            header["logsBloom"].as_str().unwrap(),
            "{name} header"
        );
    }
    assert_eq!(receipts_checked, 2 + 4 + 2 + 102 + 94);
}
