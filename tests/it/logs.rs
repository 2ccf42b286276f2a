//! Receipts and logs against a real anvil: contracts emit LOG0..LOG4 with
//! 0 to 600 bytes of data, a contract that calls another makes two
//! addresses log in one transaction, a call logs and then reverts (status
//! 0, no logs), plain transfers log nothing, creations name their
//! contract. After `backfill` every log row, status and gas figure equals
//! the node's `eth_getBlockReceipts`; a rerun changes nothing. Also: a node
//! without `eth_getBlockReceipts` still yields every receipt. Decoded
//! ERC-20 and ERC-721 `Transfer` tables equal what the test sent, in
//! receipts and getLogs modes; `follow` through reorgs of depth 1, 3 and 10
//! whose replacement blocks log differently leaves exactly the canonical
//! chain's logs and transfers.

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::anvil::{Anvil, TxKind, hex_u64};
use crate::support::rpc_server::RpcServer;
use crate::support::{fixtures, indexer, pg};

/// Runtime of the emitter: copies its calldata to memory and emits it as
/// the data of LOG0, LOG1, LOG2, LOG3 and LOG4 (topics 0x11; 0x21 0x22;
/// 0x31..0x33; 0x41..0x44). Calldata starting with 0xff emits LOG0 and
/// reverts instead.
const EMITTER: &str = concat!(
    "36600060003760003560f81c60ff14603b57",
    "366000a0",
    "6011366000a1",
    "60226021366000a2",
    "603360326031366000a3",
    "6044604360426041366000a4",
    "00",
    "5b366000a060006000fd",
);

/// Runtime of the relay: calls `target` with its own calldata, then emits
/// LOG1 (topic 0x99, no data) itself.
fn relay(target: &str) -> String {
    format!(
        "36600060003760006000366000600073{}5af150609960006000a100",
        target.trim_start_matches("0x")
    )
}

/// Initcode that deploys `runtime` (hex, no 0x).
fn initcode(runtime: &str) -> String {
    let len = runtime.len() / 2;
    format!("0x60{len:02x}600c60003960{len:02x}6000f3{runtime}")
}

async fn deploy(anvil: &Anvil, runtime: &str) -> String {
    let hash = anvil
        .send(
            0,
            TxKind::Create {
                initcode: initcode(runtime),
            },
        )
        .await;
    let r = anvil.receipt(&hash).await;
    assert_eq!(r["status"], "0x1", "deploying {runtime}");
    r["contractAddress"].as_str().unwrap().to_owned()
}

fn data(len: usize, seed: u8) -> String {
    let bytes: Vec<u8> = (0..len)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    format!("0x{}", hex::encode(bytes))
}

/// The node's logs of blocks `0..=head` as rows, and (block, tx) -> (status,
/// gasUsed, contractAddress) from its receipts.
async fn node_rows(anvil: &Anvil, head: u64) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let (mut logs, mut txs) = (Vec::new(), Vec::new());
    for n in 0..=head {
        let block = anvil.block(n).await;
        let receipts = anvil
            .rpc("eth_getBlockReceipts", json!([block["hash"]]))
            .await;
        for r in receipts.as_array().unwrap() {
            let i = hex_u64(&r["transactionIndex"]);
            txs.push(vec![
                n.to_string(),
                i.to_string(),
                hex_u64(&r["status"]).to_string(),
                hex_u64(&r["gasUsed"]).to_string(),
                r["contractAddress"]
                    .as_str()
                    .map(|a| a.trim_start_matches("0x").to_lowercase())
                    .unwrap_or_default(),
            ]);
            for l in r["logs"].as_array().unwrap() {
                let topics: Vec<&Value> = l["topics"].as_array().unwrap().iter().collect();
                let mut row = vec![
                    n.to_string(),
                    hex_u64(&l["logIndex"]).to_string(),
                    i.to_string(),
                    l["address"].as_str().unwrap()[2..].to_lowercase(),
                ];
                for k in 0..4 {
                    row.push(
                        topics
                            .get(k)
                            .map_or(String::new(), |t| t.as_str().unwrap()[2..].to_owned()),
                    );
                }
                row.push(l["data"].as_str().unwrap()[2..].to_owned());
                logs.push(row);
            }
        }
    }
    (logs, txs)
}

async fn db_rows(pool: &PgPool) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let rows = |sql: &'static str| async move {
        let r: Vec<(Vec<Option<String>>,)> = sqlx::query_as(sql).fetch_all(pool).await.unwrap();
        r.into_iter()
            .map(|(v,)| v.into_iter().map(Option::unwrap_or_default).collect())
            .collect::<Vec<Vec<String>>>()
    };
    let logs = rows(
        "SELECT ARRAY[block_number::text, log_index::text, tx_index::text, encode(address, 'hex'),
                encode(topic0, 'hex'), encode(topic1, 'hex'), encode(topic2, 'hex'), encode(topic3, 'hex'),
                encode(data, 'hex')] FROM logs ORDER BY block_number, log_index",
    )
    .await;
    let txs = rows(
        "SELECT ARRAY[block_number::text, tx_index::text, status::text, gas_used::text,
                encode(contract_address, 'hex')] FROM transactions ORDER BY block_number, tx_index",
    )
    .await;
    (logs, txs)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_receipt_fields_equal_the_node() {
    let anvil = Anvil::start().await;
    let emitter = deploy(&anvil, EMITTER).await;
    let relay = deploy(&anvil, &relay(&emitter)).await;
    let call = |to: &str, data: String| TxKind::Call {
        to: to.to_owned(),
        data,
    };
    for (i, len) in [0usize, 1, 31, 32, 33, 600].into_iter().enumerate() {
        anvil.send(1, call(&emitter, data(len, i as u8))).await;
    }
    let reverted = anvil
        .send(1, call(&emitter, format!("0xff{}", &data(40, 9)[2..])))
        .await;
    anvil.send(2, call(&relay, data(64, 7))).await;
    anvil.send(3, TxKind::Eip1559).await;
    let head = anvil.block_number().await;
    assert_eq!(anvil.receipt(&reverted).await["status"], "0x0");

    let (pool, url) = pg::fresh_db().await;
    let args = ["backfill", "--from", "0", "--to", "latest"];
    indexer::run_ok(anvil.url(), &url, &args);
    let (want_logs, want_txs) = node_rows(&anvil, head).await;
    let (got_logs, got_txs) = db_rows(&pool).await;
    // 6 calls x 5 logs, the relayed call's 5 + the relay's own.
    assert_eq!(want_logs.len(), 6 * 5 + 6, "the node's logs");
    assert_eq!(got_logs, want_logs);
    assert_eq!(got_txs, want_txs);
    // Every log with the sender recovered for its transaction.
    let senders: Vec<(String, i16)> = sqlx::query_as(
        "SELECT DISTINCT encode(sender, 'hex'), status FROM logs_with_sender ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let acct = |i: usize| anvil.account(i).0.trim_start_matches("0x").to_lowercase();
    let mut want = vec![(acct(1), 1i16), (acct(2), 1)];
    want.sort();
    assert_eq!(senders, want);

    indexer::run_ok(anvil.url(), &url, &args);
    assert_eq!(
        db_rows(&pool).await,
        (got_logs, got_txs),
        "a rerun changed rows"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_without_get_block_receipts_still_gives_every_receipt() {
    let server = RpcServer::start(fixtures::recent_mainnet()).await.unwrap();
    server.set_block_receipts(false);
    let (pool, url) = pg::fresh_db().await;
    indexer::run_ok(
        &server.url(),
        &url,
        // Generated receipts for real blocks: not what the headers commit to.
        &[
            "backfill", "--verify", "off", "--from", "24476000", "--to", "24476009",
        ],
    );
    let (txs, with_receipts): (i64, i64) = sqlx::query_as(
        "SELECT count(*), count(*) FILTER (WHERE status = 1 AND gas_used = 21000) FROM transactions",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(txs > 1000, "{txs}");
    assert_eq!(with_receipts, txs);
}

/// Runtime that emits LOG3 with topics calldata[0..96] and data the rest:
/// a stand-in for any ERC-20's `Transfer`.
const LOG3: &str = "366000600037604051602051600051606036036060a300";
/// LOG4 with topics calldata[0..128]: an ERC-721's `Transfer`.
const LOG4: &str = "366000600037606051604051602051600051608036036080a400";

const TRANSFER: &str = "ddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef";

fn word(hex: &str) -> String {
    format!("{:0>64}", hex.trim_start_matches("0x").to_lowercase())
}

fn events_config(value_name: &str, extra: &str) -> tempfile::NamedTempFile {
    let text = format!(
        "{extra}\n[[events]]\nsignature = \"Transfer(address indexed from, address indexed to, uint256 {value_name})\"\ntable = \"erc20_transfers\"\n\n[[events]]\nsignature = \"event Transfer(address indexed from, address indexed to, uint256 indexed tokenId)\"\ntable = \"nft_transfers\"\n"
    );
    let mut f = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut f, text.as_bytes()).unwrap();
    f
}

async fn decoded(pool: &PgPool, table: &str, value: &str) -> Vec<(String, String, String)> {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT encode(\"from\", 'hex'), encode(\"to\", 'hex'), \"{value}\"::text FROM {table} ORDER BY block_number, log_index"
    )))
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoded_transfers_and_get_logs_mode_equal_the_node() {
    let anvil = Anvil::start().await;
    let token = deploy(&anvil, LOG3).await;
    let nft = deploy(&anvil, LOG4).await;
    let emitter = deploy(&anvil, EMITTER).await;
    let call = |to: &str, data: String| TxKind::Call {
        to: to.to_owned(),
        data,
    };
    let acct = |i: usize| anvil.account(i).0.trim_start_matches("0x").to_lowercase();
    let max = "f".repeat(64);
    let values = [
        "0".to_owned(),
        "1".to_owned(),
        "de0b6b3a7640000".to_owned(),
        max.clone(),
    ];
    let mut want_erc20 = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let (from, to) = (acct(1), acct(2 + i));
        let data = format!("0x{TRANSFER}{}{}{}", word(&from), word(&to), word(v));
        anvil.send(1, call(&token, data)).await;
        let dec = u128::from_str_radix(v, 16)
            .map(|x| x.to_string())
            .unwrap_or_else(|_| {
                "115792089237316195423570985008687907853269984665640564039457584007913129639935"
                    .into()
            });
        want_erc20.push((from, to, dec));
    }
    // A Transfer with 31 bytes of data: matches by topics, does not decode.
    let short = format!(
        "0x{TRANSFER}{}{}{}",
        word(&acct(1)),
        word(&acct(2)),
        "11".repeat(31)
    );
    anvil.send(1, call(&token, short)).await;
    let mut want_nft = Vec::new();
    for id in ["7", "100000000000000000000000000000000000000000000000000"] {
        let data = format!(
            "0x{TRANSFER}{}{}{}",
            word(&acct(3)),
            word(&acct(4)),
            word(id)
        );
        anvil.send(3, call(&nft, data)).await;
        let dec = u128::from_str_radix(id, 16).map_or_else(
            |_| "1606938044258990275541962092341162602522202993782792835301376".to_owned(),
            |x| x.to_string(),
        );
        want_nft.push((acct(3), acct(4), dec));
    }
    anvil.send(2, call(&emitter, data(40, 3))).await;
    anvil.send(2, TxKind::Eip1559).await;
    let head = anvil.block_number().await;
    let (node_logs, _) = node_rows(&anvil, head).await;
    let args = ["backfill", "--from", "0", "--to", "latest", "--config"];

    for mode in ["receipts", "getLogs"] {
        let cfg = events_config("value", &format!("[logs]\nmode = \"{mode}\""));
        let mut args = args.to_vec();
        args.push(cfg.path().to_str().unwrap());
        let (pool, url) = pg::fresh_db().await;
        let out = indexer::run_ok(anvil.url(), &url, &args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("does not decode as its event"),
            "{mode}: the short Transfer is reported:\n{stderr}"
        );
        let (got_logs, _) = db_rows(&pool).await;
        // getLogs mode with [[events]] and no filters of its own asks only
        // for the events' logs.
        let want: Vec<Vec<String>> = node_logs
            .iter()
            .filter(|r| mode == "receipts" || r[4] == TRANSFER)
            .cloned()
            .collect();
        assert_eq!(got_logs, want, "{mode}: logs");
        assert_eq!(
            decoded(&pool, "erc20_transfers", "value").await,
            want_erc20,
            "{mode}"
        );
        assert_eq!(
            decoded(&pool, "nft_transfers", "tokenId").await,
            want_nft,
            "{mode}"
        );
        // Each decoded row joins to its recovered sender.
        let senders: Vec<(String,)> = sqlx::query_as(
            "SELECT DISTINCT encode(t.sender, 'hex') FROM erc20_transfers e
             JOIN transactions t USING (block_number, tx_index)",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        assert_eq!(senders, vec![(acct(1),)], "{mode}");
        // `logs` prints them with the recovered sender.
        let topic0 = format!("0x{TRANSFER}");
        let out = indexer::run_ok(
            anvil.url(),
            &url,
            &["logs", "--address", &token, "--topic0", &topic0],
        );
        let printed = String::from_utf8_lossy(&out.stdout);
        let rows: Vec<&str> = printed.lines().filter(|l| l.contains(&topic0)).collect();
        assert_eq!(rows.len(), 5, "{printed}");
        assert!(
            rows.iter().all(|l| l.contains(&format!("0x{}", acct(1)))),
            "{printed}"
        );
        assert!(printed.contains("(5 rows)"), "{printed}");
        let out = indexer::run_ok(
            anvil.url(),
            &url,
            &[
                "logs",
                "--address",
                &token,
                "--from",
                "5",
                "--to",
                "6",
                "--limit",
                "1",
            ],
        );
        let printed = String::from_utf8_lossy(&out.stdout);
        assert!(
            printed.contains("(1 row)") && printed.contains("--limit 1"),
            "{printed}"
        );
        let bad = indexer::run(anvil.url(), &url, &["logs", "--address", "0x12"]);
        let stderr = String::from_utf8_lossy(&bad.stderr);
        assert!(
            !bad.status.success() && stderr.contains("--address 0x12"),
            "{stderr}"
        );
        // A rerun changes nothing; a changed signature is refused.
        indexer::run_ok(anvil.url(), &url, &args);
        assert_eq!(decoded(&pool, "erc20_transfers", "value").await, want_erc20);
        let renamed = events_config("amount", "");
        let out = indexer::run(
            anvil.url(),
            &url,
            &[
                "backfill",
                "--from",
                "0",
                "--to",
                "latest",
                "--config",
                renamed.path().to_str().unwrap(),
            ],
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success());
        assert!(
            stderr.contains("table erc20_transfers was created for `event Transfer(address indexed from, address indexed to, uint256 value)`"),
            "{stderr}"
        );
    }

    // getLogs with no filter and no events: every log.
    let (pool, url) = pg::fresh_db().await;
    indexer::run_ok(
        anvil.url(),
        &url,
        &[
            "backfill", "--from", "0", "--to", "latest", "--logs", "getLogs",
        ],
    );
    assert_eq!(db_rows(&pool).await.0, node_logs);

    // getLogs with an address filter: only that contract's logs, decoded.
    let cfg = events_config(
        "value",
        &format!("[logs]\nmode = \"getLogs\"\naddresses = [\"{token}\"]"),
    );
    let mut a = args.to_vec();
    a.push(cfg.path().to_str().unwrap());
    let (pool, url) = pg::fresh_db().await;
    indexer::run_ok(anvil.url(), &url, &a);
    let token_hex = token.trim_start_matches("0x").to_lowercase();
    let want: Vec<Vec<String>> = node_logs
        .iter()
        .filter(|r| r[3] == token_hex)
        .cloned()
        .collect();
    assert_eq!(want.len(), 5);
    assert_eq!(db_rows(&pool).await.0, want);
    assert_eq!(decoded(&pool, "erc20_transfers", "value").await, want_erc20);
    assert!(decoded(&pool, "nft_transfers", "tokenId").await.is_empty());
}

/// The node's `Transfer(address,address,uint256)` logs as decoded rows
/// (values small enough for u128 in this test).
fn node_transfers(node_logs: &[Vec<String>], token: &str) -> Vec<(String, String, String)> {
    node_logs
        .iter()
        .filter(|r| r[3] == token && r[4] == TRANSFER && r[7].is_empty() && r[8].len() == 64)
        .map(|r| {
            let value = u128::from_str_radix(&r[8][32..], 16).unwrap();
            (
                r[5][24..].to_owned(),
                r[6][24..].to_owned(),
                value.to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_through_reorgs_keeps_only_the_canonical_chains_logs() {
    let anvil = Anvil::start().await;
    let token = deploy(&anvil, LOG3).await;
    let emitter = deploy(&anvil, EMITTER).await;
    let token_hex = token.trim_start_matches("0x").to_lowercase();
    let acct = |i: usize| anvil.account(i).0.trim_start_matches("0x").to_lowercase();
    let transfer = |to: usize, value: u64| {
        format!(
            "0x{TRANSFER}{}{}{}",
            word(&acct(1)),
            word(&acct(to)),
            word(&format!("{value:x}"))
        )
    };
    let call = |to: &str, data: String| TxKind::Call {
        to: to.to_owned(),
        data,
    };
    for i in 0..12u64 {
        anvil
            .send(1, call(&token, transfer(2 + i as usize % 5, 1000 + i)))
            .await;
        if i % 3 == 0 {
            anvil
                .send(2, call(&emitter, data(i as usize * 7, i as u8)))
                .await;
        }
    }
    let (pool, url) = pg::fresh_db().await;
    sender_indexer::store::MIGRATOR.run(&pool).await.unwrap();
    let cfg = events_config("value", "");
    let mut run = crate::support::indexer::Running::spawn(
        anvil.url(),
        &url,
        &[
            "follow",
            "--from",
            "0",
            "--poll-interval-ms",
            "200",
            "--config",
            cfg.path().to_str().unwrap(),
        ],
    );
    let converged = |what: String| {
        let (anvil, pool, token_hex) = (&anvil, &pool, &token_hex);
        async move {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
            loop {
                let head = anvil.block_number().await;
                let (want, _) = node_rows(anvil, head).await;
                let created: bool =
                    sqlx::query_scalar("SELECT to_regclass('erc20_transfers') IS NOT NULL")
                        .fetch_one(pool)
                        .await
                        .unwrap();
                let (got, transfers) = if created {
                    let got = db_rows(pool).await.0;
                    (got, decoded(pool, "erc20_transfers", "value").await)
                } else {
                    Default::default()
                };
                let want_transfers = node_transfers(&want, token_hex);
                if got == want && transfers == want_transfers {
                    assert!(!want_transfers.is_empty());
                    return;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{what}: logs or transfers differ from the node at head {head}:\n{} logs stored, {} on the node; {} transfers stored, {} on the node",
                    got.len(),
                    want.len(),
                    transfers.len(),
                    want_transfers.len()
                );
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    };
    converged("initial".into()).await;
    for depth in [1u64, 3, 10] {
        // Replacement blocks log other transfers and other emitter data.
        let tx = |from: usize, to: &str, data: String| json!({"from": anvil.account(from).0, "to": to, "data": data, "gas": "0x493e0"});
        anvil
            .rpc(
                "anvil_reorg",
                json!([
                    depth,
                    [
                        [tx(1, &token, transfer(7, 777_000 + depth)), 0],
                        [tx(2, &emitter, data(50, depth as u8)), depth - 1]
                    ]
                ]),
            )
            .await;
        let head = anvil.block_number().await;
        let replaced = node_transfers(&node_rows(&anvil, head).await.0, &token_hex);
        assert!(
            replaced
                .iter()
                .any(|t| t.2 == (777_000 + depth).to_string()),
            "the replacement blocks log a new transfer"
        );
        converged(format!("reorg depth {depth}")).await;
        anvil
            .send(1, call(&token, transfer(8, 9_000 + depth)))
            .await;
        converged(format!("after reorg depth {depth}")).await;
    }
    assert!(
        run.try_status().is_none(),
        "follow exited:\n{}",
        run.stderr()
    );
    run.terminate().await;
    // Nothing of the orphaned blocks is left, in any table.
    let orphans: i64 = sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM logs l WHERE NOT EXISTS (SELECT 1 FROM blocks b WHERE b.number = l.block_number))
              + (SELECT count(*) FROM erc20_transfers e WHERE NOT EXISTS
                   (SELECT 1 FROM logs l WHERE l.block_number = e.block_number AND l.log_index = e.log_index AND l.address = e.address))",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(orphans, 0);
    let reorgs: i64 = sqlx::query_scalar("SELECT count(*) FROM reorgs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(reorgs >= 3, "{reorgs} reorgs recorded");
}
