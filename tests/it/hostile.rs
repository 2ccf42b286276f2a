//! Hostile input: every field of real blocks, transactions, receipts and
//! logs malformed in each way a node could get it wrong, fed through the
//! pipeline's own per-block path (`check_block_text`: split, decode,
//! signing payload, recovery, verification); and whole answers that are
//! huge, nested, not UTF-8 or over `rpc.max_response_mib`, through the rpc
//! client. Never a panic; every refusal names the block, and a refusal
//! caused by a transaction's or receipt's field names that transaction.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Duration;

use sender_indexer::config::RpcSettings;
use sender_indexer::rpc::RpcClient;
use sender_indexer::testing::check_block_text;
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;

use crate::support::fixtures;
use crate::support::rpc_server::read_request;

/// The ways a node gets a field wrong.
fn mutations(original: &Value) -> Vec<(&'static str, Value)> {
    let mut out = vec![
        ("missing", Value::Null), // marker: the key is removed
        ("null", Value::Null),
        ("a number", json!(12345)),
        ("a negative number", json!(-1)),
        ("a boolean", json!(true)),
        ("an object", json!({"x": "0x1"})),
        ("an array", json!(["0x1"])),
        ("not hex", json!("0xzz")),
        ("no 0x", json!("1234")),
        ("negative hex", json!("-0x1")),
        ("overlong quantity", json!(format!("0x1{}", "0".repeat(64)))),
        ("past u64", json!("0x10000000000000000")),
        ("empty", json!("")),
        ("invalid escape", json!("0x\u{fffd}\u{0000}")),
    ];
    if let Some(s) = original
        .as_str()
        .filter(|s| s.starts_with("0x") && s.len() > 3)
    {
        out.push(("one digit short", json!(&s[..s.len() - 1])));
        out.push(("a byte short", json!(&s[..s.len() - 2])));
        out.push(("a byte long", json!(format!("{s}00"))));
        out.push(("odd length", json!(format!("{s}0"))));
    }
    out
}

/// Runs the pipeline's per-block path; a panic is a test failure that
/// names what was fed.
fn check(block: &str, receipts: Option<&str>, what: &str) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(|| check_block_text(block, receipts))) {
        Ok(r) => r.map(drop).map_err(|e| format!("{e:#}")),
        Err(_) => panic!("panicked on {what}"),
    }
}

/// What a refusal must mention: the block, and for a field of a
/// transaction or receipt, that transaction (its index or hash).
fn assert_named(err: &str, number: u64, tx: Option<(u64, &str)>, what: &str) {
    // With its own number malformed, a block is named as it reads, or said
    // to have an unreadable number.
    let block = err.contains(&format!("block {number}"))
        || (what.contains("header number ") && err.contains("block"));
    assert!(block, "{what}: the error names no block: {err}");
    // A well-formed but changed value (data a byte shorter) is caught by
    // the block's commitment to all its transactions or receipts, which
    // cannot tell which one changed: the block and the root are named.
    let by_root = ["Root does not verify", "logsBloom does not verify"]
        .iter()
        .any(|r| err.contains(r));
    if let Some((index, hash)) = tx.filter(|_| !by_root) {
        let named = err.contains(&hash[2..10])
            || err.contains(&format!("transaction {index}"))
            || err.contains(&format!("tx {index}"))
            || err.contains(&format!("index {index}"))
            || err.contains(&format!("receipt {index}"));
        assert!(named, "{what}: the error names no transaction: {err}");
    }
}

fn set(v: &mut Value, key: &str, (name, new): &(&str, Value)) {
    if *name == "missing" {
        v.as_object_mut().unwrap().remove(key);
    } else {
        v[key] = new.clone();
    }
}

#[test]
fn every_field_malformed_every_way_is_refused_by_name_never_a_panic() {
    let mut cases = 0;
    let mut refused = 0;
    let mut accepted = Vec::new();
    let blocks: Vec<(String, Value, Option<Value>)> = fixtures::blocks()
        .into_iter()
        .filter(|(name, _)| {
            // One block of each era and kind is enough per field.
            [
                "mainnet-1000000",
                "mainnet-16000000",
                "mainnet-19900000",
                "mainnet-24476000",
                "gnosis-20000000",
            ]
            .iter()
            .any(|n| name.starts_with(n))
        })
        .map(|(n, b)| (n, b, None))
        .chain(
            fixtures::receipt_sets()
                .into_iter()
                .map(|(n, b, r)| (n.to_owned(), b, Some(r))),
        )
        .collect();
    assert!(blocks.len() >= 6, "fixture blocks: {}", blocks.len());
    for (name, block, receipts) in &blocks {
        let number =
            u64::from_str_radix(block["number"].as_str().unwrap()[2..].as_ref(), 16).unwrap();
        let rtext = receipts.as_ref().map(Value::to_string);
        // Header fields.
        for key in block.as_object().unwrap().keys() {
            if key == "transactions" {
                continue;
            }
            for m in mutations(&block[key]) {
                let mut b = block.clone();
                set(&mut b, key, &m);
                let what = format!("{name}: header {key} {}", m.0);
                cases += 1;
                match check(&b.to_string(), rtext.as_deref(), &what) {
                    Err(e) => {
                        refused += 1;
                        assert_named(&e, number, None, &what);
                    }
                    Ok(()) => accepted.push(format!("header {key} {}", m.0)),
                }
            }
        }
        // Fields of the first and the last transaction.
        let txs = block["transactions"].as_array().unwrap();
        for i in [0, txs.len().saturating_sub(1)] {
            let Some(tx) = txs.get(i) else { continue };
            let hash = tx["hash"].as_str().unwrap().to_owned();
            for key in tx.as_object().unwrap().keys() {
                for m in mutations(&tx[key]) {
                    let mut b = block.clone();
                    set(&mut b["transactions"][i], key, &m);
                    let what = format!("{name}: tx {i} {key} {}", m.0);
                    cases += 1;
                    match check(&b.to_string(), rtext.as_deref(), &what) {
                        Err(e) => {
                            refused += 1;
                            assert_named(&e, number, Some((i as u64, &hash)), &what);
                        }
                        Ok(()) => accepted.push(format!("tx {key} {}", m.0)),
                    }
                }
            }
        }
        // Fields of the first receipt and of its first log.
        let Some(receipts) = receipts else { continue };
        // With the L1 costs a rollup node adds (outside the receipts root,
        // so the block still verifies), malformed every way like the rest.
        let mut receipts = receipts.clone();
        for (key, value) in [
            ("l1Fee", "0x105d4b2024"),
            ("l1GasUsed", "0x800"),
            ("l1GasPrice", "0x5d749a07e"),
            ("gasUsedForL1", "0x113076"),
        ] {
            receipts[0][key] = json!(value);
        }
        check(&block.to_string(), Some(&receipts.to_string()), name)
            .unwrap_or_else(|e| panic!("{name} with L1 costs: {e}"));
        let hash = receipts[0]["transactionHash"].as_str().unwrap().to_owned();
        for key in receipts[0].as_object().unwrap().keys() {
            for m in mutations(&receipts[0][key]) {
                let mut r = receipts.clone();
                set(&mut r[0], key, &m);
                let what = format!("{name}: receipt 0 {key} {}", m.0);
                cases += 1;
                match check(&block.to_string(), Some(&r.to_string()), &what) {
                    Err(e) => {
                        refused += 1;
                        assert_named(&e, number, Some((0, &hash)), &what);
                    }
                    Ok(()) => accepted.push(format!("receipt {key} {}", m.0)),
                }
            }
        }
        let with_log = receipts
            .as_array()
            .unwrap()
            .iter()
            .position(|r| r["logs"].as_array().is_some_and(|l| !l.is_empty()));
        if let Some(i) = with_log {
            let hash = receipts[i]["transactionHash"].as_str().unwrap().to_owned();
            for key in receipts[i]["logs"][0].as_object().unwrap().keys() {
                for m in mutations(&receipts[i]["logs"][0][key]) {
                    let mut r = receipts.clone();
                    set(&mut r[i]["logs"][0], key, &m);
                    let what = format!("{name}: receipt {i} log 0 {key} {}", m.0);
                    cases += 1;
                    match check(&block.to_string(), Some(&r.to_string()), &what) {
                        Err(e) => {
                            refused += 1;
                            assert_named(&e, number, Some((i as u64, &hash)), &what);
                        }
                        Ok(()) => accepted.push(format!("log {key} {}", m.0)),
                    }
                }
            }
        }
    }
    eprintln!("{cases} malformed blocks, {refused} refused by name, none panicked");
    accepted.sort();
    accepted.dedup();
    // Accepted: fields nothing stores or commits to (`size`, Parity's
    // `author`, `blockTimestamp` copies, a receipt's `from`/`to`), and
    // absences that mean the same (an empty access list left out).
    eprintln!("{} kinds accepted", accepted.len());
    assert!(cases > 3000, "{cases}");
    // Most mutations break a committed field; the rest hit fields that are
    // neither stored nor committed to (`size`, `totalDifficulty`, …).
    assert!(refused * 10 > cases * 8, "{refused} of {cases} refused");
}

#[test]
fn huge_and_deep_blocks_are_refused_by_name_never_a_panic() {
    let (_, block) = fixtures::blocks()
        .into_iter()
        .find(|(n, _)| n.starts_with("mainnet-24476000"))
        .expect("fixture");
    let number = u64::from_str_radix(&block["number"].as_str().unwrap()[2..], 16).unwrap();
    let tx0 = block["transactions"][0].clone();
    let hash = tx0["hash"].as_str().unwrap().to_owned();

    // A 10 MB input.
    let mut b = block.clone();
    b["transactions"][0]["input"] = json!(format!("0x{}", "ab".repeat(5_000_000)));
    let e = check(&b.to_string(), None, "a 10 MB input").unwrap_err();
    assert_named(&e, number, Some((0, &hash)), "a 10 MB input");

    // 10,000 transactions in one block (the same one, re-indexed).
    let mut b = block.clone();
    b["transactions"] = Value::Array(
        (0..10_000)
            .map(|i| {
                let mut t = tx0.clone();
                t["transactionIndex"] = json!(format!("0x{i:x}"));
                t
            })
            .collect(),
    );
    let e = check(&b.to_string(), None, "10,000 transactions").unwrap_err();
    assert!(e.contains(&format!("block {number}")), "{e}");

    // Deeply nested JSON: in a field the indexer reads, a refusal; under a
    // key it does not know, ignored like any unknown field (no recursion
    // limit to hit, no stack to overflow).
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let mut b = block.clone();
    b["transactions"][0]["accessList"] = json!("placeholder");
    let text = b.to_string().replacen("\"placeholder\"", &deep, 1);
    let e = check(&text, None, "nested arrays as an access list").unwrap_err();
    assert_named(
        &e,
        number,
        Some((0, &hash)),
        "nested arrays as an access list",
    );
    let text = block
        .to_string()
        .replacen("\"input\":", &format!("\"junk\":{deep},\"input\":"), 1);
    check(&text, None, "nested arrays under an unknown key").expect("unknown keys are ignored");
    let text = format!("{{\"junk\":{deep}}}");
    let e = check(&text, None, "nested arrays as a block").unwrap_err();
    assert!(e.contains("malformed block"), "{e}");
}

/// A JSON-RPC server that answers every request with `body`.
async fn answering(body: Vec<u8>, gzip: bool) -> String {
    let (body, encoding) = if gzip {
        (
            crate::support::rpc_server::gzip(&body),
            "Content-Encoding: gzip\r\n",
        )
    } else {
        (body, "")
    };
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                while let Ok(Some((h, b, _))) = read_request(&mut stream, &mut buf).await {
                    buf.drain(..h + b);
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{encoding}\r\n",
                        body.len()
                    );
                    if stream.write_all(head.as_bytes()).await.is_err()
                        || stream.write_all(&body).await.is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    url
}

/// The rpc tests' fast-retry settings, one block a batch, answers capped.
fn settings(url: &str, max_response_mib: usize) -> RpcSettings {
    RpcSettings {
        batch_size: 1.try_into().unwrap(),
        max_response_mib: max_response_mib.try_into().unwrap(),
        ..crate::rpc::config(url)
    }
}

/// The error of fetching block 7 from a server that answers `body`, with
/// answers capped at `max_response_mib` (gzip-compressed on the wire when
/// `gzip`); it must name the block.
async fn block_7_error(body: Vec<u8>, max_response_mib: usize, gzip: bool) -> String {
    let rpc = RpcClient::new(settings(&answering(body, gzip).await, max_response_mib)).unwrap();
    let e = tokio::time::timeout(
        Duration::from_secs(30),
        sender_indexer::testing::blocks(&rpc, 7..=7),
    )
    .await
    .unwrap()
    .unwrap_err()
    .to_string();
    assert!(e.contains("block 7") || e.contains("blocks 7"), "{e}");
    e
}

#[tokio::test]
async fn answers_not_utf8_or_over_the_cap_are_refused_by_name() {
    // Invalid UTF-8 inside a block's string.
    let mut body = br#"[{"jsonrpc":"2.0","id":0,"result":{"number":"0x7","hash":"0x"#.to_vec();
    body.extend_from_slice(&[0xff, 0xfe, 0xc3]);
    body.extend_from_slice(br#""}}]"#);
    let e = block_7_error(body, 256, false).await;
    assert!(e.contains("UTF-8") || e.contains("utf-8"), "{e}");

    // An answer of 2 MiB against a cap of 1 MiB.
    let padding = "0".repeat(2 << 20);
    let body = format!(
        r#"[{{"jsonrpc":"2.0","id":0,"result":{{"number":"0x7","extraData":"0x{padding}"}}}}]"#
    );
    let e = block_7_error(body.clone().into_bytes(), 1, false).await;
    assert!(e.contains("rpc.max_response_mib (1 MiB)"), "{e}");

    // The same answer gzip-compressed: a few KiB on the wire, 2 MiB once
    // decoded. The cap applies to the decoded size.
    let compressed = crate::support::rpc_server::gzip(body.as_bytes()).len();
    assert!(compressed < 64 << 10, "{compressed} bytes");
    let e = block_7_error(body.into_bytes(), 1, true).await;
    assert!(e.contains("rpc.max_response_mib (1 MiB)"), "{e}");
}
