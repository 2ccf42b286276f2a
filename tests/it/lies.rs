//! A provider that lies, against a real anvil, every block verified in
//! full: through a [`FaultProxy`] that changes about 30% of its block and
//! receipt answers at random ([`lies`], seeded: a load balancer with a bad
//! replica), `backfill` and `follow` fetch each wrong block again until it
//! comes right, and the database equals the honest node, for several
//! seeds; the wrong answers are counted in `/metrics` and the summary. A
//! provider that gives the same wrong answer every time still stops the
//! run at once, naming the block, the field and both values; one whose
//! wrong answers differ but never come right stops when
//! `index.refetch_budget_ms` is spent. With two endpoints, receipts one
//! served wrong are asked of the other. A signal during the pause before a
//! fetch again stops the run at once, the blocks before it committed.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::follow::{free_local_addr, http_get, metric, migrated_db};
use crate::support::anvil::{Anvil, AnvilOptions, hex_u64, mine_empty};
use crate::support::compare::{assert_db_equals_chain, wait_db_equals_head};
use crate::support::indexer::{self, Running};
use crate::support::pg;
use crate::support::proxy::{Edit, FaultProxy, lies, slow_proxy};

const SEEDS: [u64; 3] = [1, 2, 3];
const LIE_PERCENT: u64 = 30;

/// Runtime of a contract that emits its calldata as the data of LOG1
/// (topic 0x11).
const EMITTER: &str = "3660006000376011366000a100";

async fn send(anvil: &Anvil, tx: Value) -> String {
    let hash = anvil.rpc("eth_sendTransaction", json!([tx])).await;
    hash.as_str().unwrap().to_owned()
}

/// Mines `blocks` blocks of three transactions each (a legacy transfer, an
/// EIP-1559 transfer, a call that emits a log) into `anvil`; every one
/// must succeed.
async fn mine_txs(anvil: &Anvil, emitter: &str, blocks: u64) {
    let to = anvil.account(9).0;
    for b in 0..blocks {
        let sent = [
            send(
                anvil,
                json!({"from": anvil.account(1).0, "to": to, "value": "0x1", "gasPrice": "0x12a05f200"}),
            )
            .await,
            send(
                anvil,
                json!({"from": anvil.account(2).0, "to": to, "value": "0x2"}),
            )
            .await,
            send(
                anvil,
                json!({"from": anvil.account(3).0, "to": emitter, "data": format!("0x{b:064x}"), "gas": "0x30000"}),
            )
            .await,
        ];
        anvil.mine().await;
        for h in &sent {
            assert_eq!(anvil.receipt(h).await["status"], "0x1", "tx {h}");
        }
    }
}

/// An anvil with an emitter contract, ten blocks of three transactions
/// and two empty blocks; the emitter's address.
async fn chain_with_logs() -> (Anvil, String) {
    let anvil = Anvil::start_with(AnvilOptions {
        no_mining: true,
        ..Default::default()
    })
    .await;
    let len = EMITTER.len() / 2;
    let initcode = format!("0x60{len:02x}600c60003960{len:02x}6000f3{EMITTER}");
    let deploy = send(
        &anvil,
        json!({"from": anvil.account(0).0, "data": initcode}),
    )
    .await;
    anvil.mine().await;
    let emitter = anvil.receipt(&deploy).await["contractAddress"]
        .as_str()
        .unwrap()
        .to_owned();
    mine_txs(&anvil, &emitter, 10).await;
    mine_empty(&anvil, 2).await;
    (anvil, emitter)
}

/// Every log and receipt field of blocks `0..=head`, as the node has them
/// and as stored, equal.
async fn assert_logs_equal(pool: &PgPool, anvil: &Anvil, head: u64, what: &str) {
    let mut node = Vec::new();
    for n in 0..=head {
        let hash = anvil.block(n).await["hash"].clone();
        let receipts = anvil.rpc("eth_getBlockReceipts", json!([hash])).await;
        for r in receipts.as_array().unwrap() {
            for l in r["logs"].as_array().unwrap() {
                node.push((
                    n as i64,
                    hex_u64(&l["logIndex"]) as i64,
                    l["data"].as_str().unwrap()[2..].to_owned(),
                    hex_u64(&r["gasUsed"]) as i64,
                ));
            }
        }
    }
    let stored: Vec<(i64, i64, String, i64)> = sqlx::query_as(
        "SELECT l.block_number, l.log_index::bigint, encode(l.data, 'hex'), t.gas_used
         FROM logs l JOIN transactions t USING (block_number, tx_index)
         WHERE l.block_number <= $1 ORDER BY 1, 2",
    )
    .bind(head as i64)
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(!node.is_empty());
    assert_eq!(stored, node, "{what}: logs differ from the node's");
}

/// The counts of the run's summary line: (wrong answers, distinct ones,
/// refetches, blocks right after refetching).
fn summary_counts(stderr: &str) -> (u64, u64, u64, u64) {
    let line = stderr
        .lines()
        .find(|l| l.contains(" wrong answers ("))
        .unwrap_or_else(|| panic!("no summary:\n{stderr}"));
    let before = |what: &str| -> u64 {
        let head = &line[..line.find(what).unwrap_or_else(|| panic!("{what}: {line}"))];
        let digits: String = head
            .chars()
            .rev()
            .take_while(char::is_ascii_digit)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        digits.parse().unwrap_or_else(|_| panic!("{what}: {line}"))
    };
    (
        before(" wrong answers ("),
        before(" distinct)"),
        before(" refetches"),
        before(" blocks right after refetching"),
    )
}

/// The run's own account of a liar: it met wrong answers, all of them
/// different (the lies are random), fetched each block again once per
/// wrong answer, and no more answers were wrong than the proxy changed.
fn assert_counts(counts: (u64, u64, u64, u64), edited: u64, what: &str) {
    let (wrong, distinct, refetches, right) = counts;
    assert!(
        edited > 0 && wrong > 0 && wrong <= edited,
        "{what}: {counts:?}, {edited} answers changed"
    );
    assert_eq!(distinct, wrong, "{what}: {counts:?}");
    assert_eq!(refetches, wrong, "{what}: {counts:?}");
    assert!(right > 0 && right <= wrong, "{what}: {counts:?}");
}

/// `[index] refetch_budget_ms = ms` in a file for `--config`.
fn budget_file(dir: &tempfile::TempDir, ms: u64) -> String {
    let path = dir.path().join("budget.toml");
    std::fs::write(&path, format!("[index]\nrefetch_budget_ms = {ms}\n")).unwrap();
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_through_a_liar_equals_the_honest_node() {
    let (anvil, _) = chain_with_logs().await;
    let head = anvil.block_number().await;
    let mut runs = Vec::new();
    for seed in SEEDS {
        let proxy = FaultProxy::start(anvil.url()).await;
        proxy.set_edit(Some(lies(seed, LIE_PERCENT, |_| true)));
        let (pool, db) = pg::fresh_db().await;
        let url = proxy.url().to_owned();
        // The seeds' runs side by side: the refetch pauses overlap.
        let run = tokio::task::spawn_blocking(move || {
            let args = ["backfill", "--from", "0", "--to", "latest"];
            let mut cmd = indexer::command(&url, &db, &args);
            cmd.env("RUST_LOG", "info");
            indexer::finish(cmd, &args)
        });
        runs.push((seed, proxy, pool, run));
    }
    for (seed, proxy, pool, run) in runs {
        let out = run.await.unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "seed {seed}:\n{stderr}");
        let what = format!("seed {seed}");
        assert_db_equals_chain(&pool, &anvil, 0, head).await;
        assert_logs_equal(&pool, &anvil, head, &what).await;
        assert_counts(summary_counts(&stderr), proxy.edited(), &what);
        assert!(
            stderr.contains("fetching it again") && !stderr.contains("ERROR"),
            "{what}:\n{stderr}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_through_a_liar_equals_the_honest_node() {
    let (anvil, emitter) = chain_with_logs().await;
    let mut runs = Vec::new();
    for seed in SEEDS {
        let proxy = FaultProxy::start(anvil.url()).await;
        proxy.set_edit(Some(lies(seed, LIE_PERCENT, |_| true)));
        let (pool, db) = migrated_db().await;
        let metrics = free_local_addr();
        let args = [
            "follow",
            "--from",
            "0",
            "--poll-interval-ms",
            "200",
            "--metrics-addr",
            &metrics,
        ];
        let mut cmd = indexer::command(proxy.url(), &db, &args);
        cmd.env("RUST_LOG", "info");
        runs.push((seed, proxy, pool, metrics, Running::start(cmd)));
    }
    let limit = Duration::from_secs(40);
    for (seed, _, pool, _, _) in &runs {
        wait_db_equals_head(pool, &anvil, limit, &format!("seed {seed}, initial")).await;
    }
    // New blocks while following.
    mine_txs(&anvil, &emitter, 4).await;
    let head = anvil.block_number().await;
    for (seed, proxy, pool, metrics, run) in &mut runs {
        let what = format!("seed {seed}");
        wait_db_equals_head(pool, &anvil, limit, &format!("{what}, new blocks")).await;
        assert_logs_equal(pool, &anvil, head, &what).await;
        let text = http_get(metrics, "/metrics").await;
        let m = |name: &str| {
            metric(&text, &format!("sender_indexer_{name}"))
                .unwrap_or_else(|| panic!("{what}: no {name}:\n{text}")) as u64
        };
        let counts = (
            m("block_wrong_answers_total"),
            m("block_wrong_answers_distinct_total"),
            m("block_refetches_total"),
            m("block_refetch_recoveries_total"),
        );
        assert_counts(counts, proxy.edited(), &what);
        assert_eq!(m("block_refetch_stops_total"), 0, "{what}");
        let log = run.terminate().await;
        // The summary at the end says the same.
        assert_eq!(summary_counts(&log), counts, "{what}:\n{log}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn receipts_served_wrong_are_asked_of_the_other_endpoint() {
    let (anvil, _) = chain_with_logs().await;
    let head = anvil.block_number().await;
    // One endpoint gets every receipt list wrong, the same way each time.
    let liar = FaultProxy::start(anvil.url()).await;
    let edit: Edit = std::sync::Arc::new(|method: &str, receipts: &mut Value| {
        let lied =
            method == "eth_getBlockReceipts" && receipts.as_array().is_some_and(|r| !r.is_empty());
        if lied {
            receipts[0]["cumulativeGasUsed"] = json!("0x1");
        }
        lied
    });
    liar.set_edit(Some(edit));
    // The other one slower, so the liar gets most requests.
    let honest = slow_proxy(anvil.url(), Duration::from_millis(20)).await;
    let (pool, db) = pg::fresh_db().await;
    let rpc = format!("{},{honest}", liar.url());
    let out = tokio::task::spawn_blocking(move || {
        let args = [
            "backfill",
            "--from",
            "0",
            "--to",
            "latest",
            "--batch-size",
            "2",
        ];
        let mut cmd = indexer::command(&rpc, &db, &args);
        cmd.env("RUST_LOG", "info");
        indexer::finish(cmd, &args)
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert_logs_equal(&pool, &anvil, head, "two endpoints").await;
    // Each block the liar answered came right at its first fetch again:
    // its receipts were not asked of the liar again.
    let (wrong, _, refetches, right) = summary_counts(&stderr);
    assert!(liar.edited() > 0 && wrong > 0, "{stderr}");
    assert_eq!((refetches, right), (wrong, wrong), "{stderr}");
}

/// The block of the first emitter call: three transactions, one log.
const LIED_BLOCK: u64 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_wrong_answer_every_time_stops_the_run_naming_the_block() {
    let (anvil, _) = chain_with_logs().await;
    let node_hash = anvil.block(LIED_BLOCK).await["transactions"][0]["hash"]
        .as_str()
        .unwrap()
        .to_owned();
    let proxy = FaultProxy::start(anvil.url()).await;
    let edit: Edit = std::sync::Arc::new(|method: &str, block: &mut Value| {
        let lied = method == "eth_getBlockByNumber"
            && block["number"] == json!(format!("{LIED_BLOCK:#x}"))
            && block["transactions"][0].is_object();
        if lied {
            block["transactions"][0]["value"] = json!("0x1234");
        }
        lied
    });
    proxy.set_edit(Some(edit));
    let (pool, db) = pg::fresh_db().await;
    // A budget far longer than the test: the repeat stops it.
    let dir = tempfile::tempdir().unwrap();
    let config = budget_file(&dir, 600_000);
    let out = indexer::run(
        proxy.url(),
        &db,
        &[
            "--config",
            &config,
            "backfill",
            "--from",
            "0",
            "--to",
            "latest",
            "--batch-size",
            "1",
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "block {LIED_BLOCK}: the same wrong answer 6 times in a row (fetched again 5 times)"
        )) && stderr.contains(&format!(
            "block {LIED_BLOCK}: tx 0 hash does not verify: the node says {node_hash}, its signed fields give 0x"
        )),
        "{stderr}"
    );
    assert_eq!(proxy.edited(), 6, "the block, then 5 times again");
    let stored: Option<i64> = sqlx::query_scalar("SELECT max(number) FROM blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(stored.is_none_or(|n| n < LIED_BLOCK as i64), "{stored:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wrong_answers_that_never_come_right_stop_when_the_budget_is_spent() {
    let (anvil, _) = chain_with_logs().await;
    let proxy = FaultProxy::start(anvil.url()).await;
    // Every answer about the block wrong, and each one differently.
    proxy.set_edit(Some(lies(7, 100, |n| n == LIED_BLOCK)));
    let (pool, db) = pg::fresh_db().await;
    let dir = tempfile::tempdir().unwrap();
    let config = budget_file(&dir, 2000);
    let started = Instant::now();
    let args = [
        "--config", &config, "backfill", "--from", "0", "--to", "latest",
    ];
    let mut cmd = indexer::command(proxy.url(), &db, &args);
    cmd.env("RUST_LOG", "info");
    let out = indexer::finish(cmd, &args);
    let took = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let stop = stderr
        .lines()
        .find(|l| {
            l.contains(&format!(
                "block {LIED_BLOCK}: still wrong after fetching it "
            ))
        })
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        stop.contains("(index.refetch_budget_ms = 2000)") && !stderr.contains("same wrong answer"),
        "{stderr}"
    );
    // The summary above the error: every answer wrong, each differently,
    // fetched again after each but the last.
    let (wrong, distinct, refetches, right) = summary_counts(&stderr);
    assert!(
        wrong >= 2 && distinct == wrong && refetches == wrong - 1 && right == 0,
        "{stderr}"
    );
    assert!(
        stderr.contains("stopped by an error; backfill: "),
        "{stderr}"
    );
    // It waited its pauses (250, 500 and 1000 ms fit in the budget) before
    // it gave up.
    assert!(took >= Duration::from_millis(1750), "took {took:?}");
    let stored: Option<i64> = sqlx::query_scalar("SELECT max(number) FROM blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(stored.is_none_or(|n| n < LIED_BLOCK as i64), "{stored:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_signal_while_a_wrong_block_waits_to_be_fetched_again_stops_the_run_cleanly() {
    let (anvil, _) = chain_with_logs().await;
    let proxy = FaultProxy::start(anvil.url()).await;
    proxy.set_edit(Some(lies(11, 100, |n| n == LIED_BLOCK)));
    let (pool, db) = migrated_db().await;
    let dir = tempfile::tempdir().unwrap();
    let config = budget_file(&dir, 600_000);
    let args = [
        "--config", &config, "backfill", "--from", "0", "--to", "latest",
    ];
    let mut cmd = indexer::command(proxy.url(), &db, &args);
    cmd.env("RUST_LOG", "info");
    let mut run = Running::start(cmd);
    // Waiting 1 s before the third fetch: the signal lands in a pause.
    run.wait_for_log("attempt=3", Duration::from_secs(20)).await;
    let log = run.terminate().await;
    // The pause was cut short: no fetch after it, no budget spent.
    assert!(
        log.contains("stopped by signal")
            && !log.contains("attempt=4")
            && !log.contains("still wrong"),
        "{log}"
    );
    // The blocks before it were handed on and committed; it was not (the
    // segment after it may have been indexed meanwhile). The checkpoint
    // stays below it.
    let (below, it): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE number < $1), count(*) FILTER (WHERE number = $1) FROM blocks",
    )
    .bind(LIED_BLOCK as i64)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!((below, it), (LIED_BLOCK as i64, 0));
    assert!(pg::checkpoint(&pool).await.is_none_or(|c| c < LIED_BLOCK));
}
