//! Verification on real data: every one of the 42 fixture blocks verifies
//! (header hash for its fork and seal, transactions root, withdrawals
//! root), every real receipt set verifies its receipts root and bloom, and
//! any one field changed, a transaction dropped or two swapped, a log
//! dropped, is caught and named. Runs the pipeline's own per-block check
//! ([`check_block_text`]) on this thread; no server needed.

use serde_json::Value;

use sender_indexer::testing::check_block_text;

use crate::support::fixtures;

fn check(block: &Value, receipts: Option<&Value>) -> Result<(), String> {
    let receipts = receipts.map(|r| r.to_string());
    check_block_text(&block.to_string(), receipts.as_deref())
        .map(drop)
        .map_err(|e| format!("{e:#}"))
}

#[test]
fn every_fixture_block_and_receipt_set_verifies() {
    let blocks = fixtures::blocks();
    assert_eq!(blocks.len(), 42);
    for (name, block) in &blocks {
        check(block, None).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    for (name, block, receipts) in fixtures::receipt_sets() {
        check(&block, Some(&receipts)).unwrap_or_else(|e| panic!("{name} with receipts: {e}"));
    }
}

/// `s` with its last hex digit changed (an empty `0x` becomes `0x00`).
fn flip(s: &str) -> String {
    if s == "0x" {
        return "0x00".into();
    }
    let mut out = s.to_string();
    let last = out.pop().unwrap();
    out.push(if last == '0' { '1' } else { '0' });
    out
}

/// Flips the first hex string found in `v` (depth first); false if none.
fn flip_in(v: &mut Value) -> bool {
    match v {
        Value::String(s) if s.starts_with("0x") => {
            *s = flip(s);
            true
        }
        Value::Array(a) => a.iter_mut().any(flip_in),
        Value::Object(o) => o.values_mut().any(flip_in),
        _ => false,
    }
}

/// Header fields no hash commits to and nothing stores: not checked.
const HEADER_UNCOMMITTED: &[&str] = &[
    "size",
    "totalDifficulty",
    "author",     // Parity's copy of `miner`
    "sealFields", // Parity's copy of the seal
    "uncles",     // uncle hashes; their headers are not fetched
    // Aura blocks report zeros the Aura header does not hold.
    "mixHash@aura",
    "nonce@aura",
];
/// Transaction fields no hash commits to. `from` is stored as `node_from`
/// beside the recovered sender (and `from_matches` says whether they
/// agree): checked below on its own.
/// Newer nodes repeat the block's timestamp (`blockTimestamp`, the stored
/// one is the header's); Parity added `raw`, `publicKey` and `standardV`.
const TX_UNCOMMITTED: &[&str] = &[
    "from",
    "chainId@pre155",
    "blockTimestamp",
    "raw",
    "publicKey",
    "standardV",
];
/// Receipt fields no root commits to and nothing stores.
const RECEIPT_UNCOMMITTED: &[&str] = &["from", "to", "removed"];

/// Every corruption that was not caught or not named, reported together.
static MISSED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

fn caught(what: &str, err: Result<(), String>, names: &[&str]) -> String {
    let missed = match err {
        Ok(()) => format!("{what}: not caught"),
        Err(e) if names.iter().any(|n| e.contains(n)) => return e,
        Err(e) => format!("{what}: caught, but the error names none of {names:?}: {e}"),
    };
    MISSED.lock().unwrap().push(missed);
    String::new()
}

#[test]
fn every_flipped_field_is_caught_and_named() {
    let blocks = fixtures::blocks();
    let mut cases = 0;
    // Two threads: each flip re-checks (and recovers) a whole block.
    std::thread::scope(|scope| {
        let (a, b) = blocks.split_at(blocks.len() / 2);
        let handles: Vec<_> = [a, b]
            .into_iter()
            .map(|half| {
                scope.spawn(move || half.iter().map(|(n, b)| flip_block(n, b)).sum::<usize>())
            })
            .collect();
        cases = handles.into_iter().map(|h| h.join().unwrap()).sum();
    });
    for (name, block, receipts) in fixtures::receipt_sets() {
        cases += flip_receipts(name, &block, &receipts);
    }
    let missed = MISSED.lock().unwrap();
    assert!(
        missed.is_empty(),
        "{} of {cases} corruptions missed:\n{}",
        missed.len(),
        missed.join("\n")
    );
    eprintln!("{cases} corruptions, each caught and named");
    assert!(cases > 1500, "{cases}");
}

fn flip_block(name: &str, block: &Value) -> usize {
    let mut cases = 0;
    let aura = block.get("auraSeal").is_some();
    for key in block.as_object().unwrap().keys() {
        let tag = format!("{key}@aura");
        if key == "transactions"
            || HEADER_UNCOMMITTED.contains(&key.as_str())
            || (aura && HEADER_UNCOMMITTED.contains(&tag.as_str()))
        {
            continue;
        }
        let mut b = block.clone();
        if !flip_in(&mut b[key]) {
            continue; // an empty list
        }
        let what = format!("{name} header {key}");
        let names: &[&str] = match key.as_str() {
            "withdrawals" => &["withdrawalsRoot"],
            "number" => &["blockNumber", "hash"],
            k if k.ends_with("Root") => &[k, "hash"],
            _ => &["block", "hash does not verify"],
        };
        caught(&what, check(&b, None), names);
        cases += 1;
    }
    let txs = block["transactions"].as_array().unwrap();
    // The first three and the last transaction of every block.
    let picked: Vec<usize> = (0..txs.len())
        .filter(|&i| i < 3 || i + 1 == txs.len())
        .collect();
    for &i in &picked {
        let tx = &txs[i];
        let pre155 = tx["type"].as_str().is_none_or(|t| t == "0x0")
            && matches!(tx["v"].as_str(), Some("0x1b" | "0x1c"));
        for key in tx.as_object().unwrap().keys() {
            let tag = format!("{key}@pre155");
            if TX_UNCOMMITTED.contains(&key.as_str())
                || (pre155 && TX_UNCOMMITTED.contains(&tag.as_str()))
            {
                continue;
            }
            let mut b = block.clone();
            if !flip_in(&mut b["transactions"][i][key]) {
                continue;
            }
            let what = format!("{name} tx {i} {key}");
            let err = caught(&what, check(&b, None), &[&format!("tx {i}")]);
            let at = format!("block {}", fixtures_number(block));
            if !err.is_empty() && !err.contains(&at) {
                MISSED
                    .lock()
                    .unwrap()
                    .push(format!("{what}: does not name {at}: {err}"));
            }
            cases += 1;
        }
        // `from` is not committed to: the recovered sender is stored, and
        // the node's differing `from` beside it.
        let mut b = block.clone();
        if flip_in(&mut b["transactions"][i]["from"]) {
            let stored = check_block_text(&b.to_string(), None).expect("from is not verified");
            let t = &stored.txs[i];
            let recovered = t
                .recovered
                .sender
                .as_ref()
                .expect("fixture senders recover");
            assert_ne!(
                Some(*recovered),
                t.tx.from,
                "{name} tx {i}: a flipped from must differ"
            );
            cases += 1;
        }
    }
    if txs.len() >= 2 {
        let mut dropped = block.clone();
        dropped["transactions"].as_array_mut().unwrap().remove(0);
        caught(
            &format!("{name} dropped tx"),
            check(&dropped, None),
            &["transactionIndex", "transactionsRoot"],
        );
        let mut swapped = block.clone();
        swapped["transactions"].as_array_mut().unwrap().swap(0, 1);
        caught(
            &format!("{name} swapped txs"),
            check(&swapped, None),
            &["transactionIndex", "transactionsRoot"],
        );
        // Without the index fields the trie alone catches both.
        let mut bare = block.clone();
        for tx in bare["transactions"].as_array_mut().unwrap() {
            tx.as_object_mut().unwrap().remove("transactionIndex");
        }
        check(&bare, None).unwrap_or_else(|e| panic!("{name} without indexes: {e}"));
        bare["transactions"].as_array_mut().unwrap().swap(0, 1);
        caught(
            &format!("{name} swapped bare txs"),
            check(&bare, None),
            &["transactionsRoot"],
        );
        cases += 3;
    }
    cases
}

fn fixtures_number(block: &Value) -> u64 {
    u64::from_str_radix(
        block["number"].as_str().unwrap().trim_start_matches("0x"),
        16,
    )
    .unwrap()
}

fn flip_receipts(name: &str, block: &Value, receipts: &Value) -> usize {
    let mut cases = 0;
    let list = receipts.as_array().unwrap();
    let picked: Vec<usize> = (0..list.len())
        .filter(|&i| i < 3 || i + 1 == list.len())
        .collect();
    for &i in &picked {
        for key in list[i].as_object().unwrap().keys() {
            if RECEIPT_UNCOMMITTED.contains(&key.as_str()) {
                continue;
            }
            let mut r = receipts.clone();
            if !flip_in(&mut r[i][key]) {
                continue;
            }
            let what = format!("{name} receipt {i} {key}");
            let names: &[&str] = match key.as_str() {
                "blockHash" | "blockNumber" | "transactionHash" | "transactionIndex" => {
                    &["receipt"]
                }
                "logs" => &["receipt", "log"],
                "cumulativeGasUsed" => &["gasUsed", "receiptsRoot"],
                _ => &[&format!("receipt {i}"), "receiptsRoot", "logsBloom"],
            };
            caught(&what, check(block, Some(&r)), names);
            cases += 1;
        }
        // Each field of each of its first logs.
        let logs = list[i]["logs"].as_array().unwrap();
        for (k, log) in logs.iter().enumerate().take(2) {
            for key in log.as_object().unwrap().keys() {
                // Parity's per-transaction index and newer nodes' copy of
                // the block's timestamp: neither committed nor stored.
                if ["removed", "transactionLogIndex", "blockTimestamp"].contains(&key.as_str()) {
                    continue;
                }
                let mut r = receipts.clone();
                if !flip_in(&mut r[i]["logs"][k][key]) {
                    continue;
                }
                let what = format!("{name} receipt {i} log {k} {key}");
                caught(
                    &what,
                    check(block, Some(&r)),
                    &["log", "receiptsRoot", "logsBloom"],
                );
                cases += 1;
            }
            let mut r = receipts.clone();
            r[i]["logs"].as_array_mut().unwrap().remove(k);
            caught(
                &format!("{name} receipt {i} dropped log {k}"),
                check(block, Some(&r)),
                &["log", "logIndex", "logsBloom", "receiptsRoot"],
            );
            cases += 1;
        }
    }
    cases
}

/// On anvil, through the binary: every transaction kind but blobs, and
/// contract creations, verify in full (the receipts root too) and link to
/// anvil's genesis given as a trusted block; `status` says so. A block with
/// a blob transaction does not verify on anvil 1.7.1, the latest release:
/// it commits its transactions root over the blob sidecar
/// (foundry-rs/foundry#15132, fixed in #15699 after that release). The
/// failure is caught and named, with the canonical root, and nothing of
/// that block is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anvil_blocks_verify_and_link_to_a_trusted_genesis() {
    use crate::support::anvil::{Anvil, TxKind};
    use crate::support::{indexer, pg};

    let anvil = Anvil::start().await;
    let delegate = anvil.account(8).0.to_string();
    anvil.send(1, TxKind::Legacy).await;
    anvil.send(2, TxKind::AccessList).await;
    anvil.send(3, TxKind::Eip1559).await;
    anvil.send(5, TxKind::SetCode { delegate }).await;
    anvil
        .send(
            0,
            TxKind::Create {
                initcode: crate::support::anvil::RETURN_42_INITCODE.into(),
            },
        )
        .await;
    let head = anvil.block_number().await;
    let genesis = anvil.block(0).await["hash"].as_str().unwrap().to_string();
    let (pool, url) = pg::fresh_db().await;
    let trusted = format!("0:{genesis}");
    let head_arg = head.to_string();
    let backfill = |db: &str, extra: &[&str]| {
        let mut args = vec!["backfill", "--from", "0", "--to", &head_arg];
        args.extend_from_slice(extra);
        indexer::run(anvil.url(), db, &args)
    };
    let out = backfill(&url, &["--trusted-block", &trusted]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("does not verify"), "{stderr}");
    let verified: Vec<(i64, Option<String>)> =
        sqlx::query_as("SELECT number, verified FROM blocks ORDER BY number")
            .fetch_all(&pool)
            .await
            .unwrap();
    assert_eq!(verified.len() as u64, head + 1);
    assert!(
        verified.iter().all(|(_, v)| v.as_deref() == Some("full")),
        "{verified:?}"
    );
    let status = indexer::run_ok(anvil.url(), &url, &["status"]);
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains(&format!(
            "verified:       {} of {} blocks in full",
            head + 1,
            head + 1
        )),
        "{status}"
    );
    assert!(
        status.contains(&format!(
            "trusted block 0 ({genesis}): blocks 0..={head} link to it"
        )),
        "{status}"
    );

    // A wrong trusted block is refused before anything is written, naming
    // both hashes.
    let (_, other) = pg::fresh_db().await;
    let wrong = format!("1:0x{}", "ab".repeat(32));
    let out = backfill(&other, &["--trusted-block", &wrong]);
    let err = String::from_utf8_lossy(&out.stderr);
    let node_hash = anvil.block(1).await["hash"].as_str().unwrap().to_string();
    assert!(!out.status.success());
    assert!(
        err.contains(&node_hash) && err.contains(&"ab".repeat(32)),
        "{err}"
    );
    // A range that cannot reach the trusted block is refused too.
    let out = indexer::run(
        anvil.url(),
        &other,
        &[
            "backfill",
            "--from",
            "3",
            "--to",
            "latest",
            "--trusted-block",
            &trusted,
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("cannot be linked to a trusted block"),
        "{err}"
    );

    // anvil's blob block: caught, named, refetched, refused; the blocks
    // before it stay committed.
    anvil.send(4, TxKind::Blob).await;
    let blob_block = anvil.block_number().await;
    let out = indexer::run(
        anvil.url(),
        &url,
        &["backfill", "--from", "0", "--to", "latest"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let node_root = anvil.block(blob_block).await["transactionsRoot"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(err.contains(&format!("block {blob_block}: transactionsRoot does not verify: the node says {node_root}, the 1 transactions give 0x")), "{err}");
    assert!(
        err.contains(&format!(
            "block {blob_block}: the same wrong answer 6 times in a row (fetched again 5 times)"
        )),
        "{err}"
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        stored as u64, blob_block,
        "every block below the blob block, none of it"
    );
}

/// The built-in genesis of a known chain anchors a range from block 0: a
/// node that claims mainnet's chain id but serves another block 0 is
/// refused before anything is stored, naming both hashes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_known_chain_id_anchors_block_0_to_its_built_in_genesis() {
    use crate::support::rpc_server::{RpcServer, synthetic_block};
    use crate::support::{indexer, pg};

    let blocks: Vec<Value> = (0..3).map(|n| synthetic_block(n, 1)).collect();
    let served = blocks[0]["hash"].as_str().unwrap().to_string();
    let server = RpcServer::start(blocks).await.unwrap();
    server.set_chain_id(1);
    let (pool, url) = pg::fresh_db().await;
    let out = indexer::run(
        &server.url(),
        &url,
        &["backfill", "--from", "0", "--to", "2"],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    let mainnet = "0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3";
    assert!(
        err.contains(&format!(
            "block 0: the node's block hash is {served}, but mainnet genesis block 0 ({mainnet})"
        )),
        "{err}"
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}
