//! Fetching full blocks from anvil: our RPC client against anvil's own
//! serving limit, over batch sizes and parallel connections, then the
//! whole backfill into PostgreSQL at the best setting and at the defaults.
//!
//! The chain: `BENCH_BLOCKS` blocks (default 100) of `BENCH_BLOCK_TXS`
//! transactions each (default 100): EIP-1559 transfers with 100 bytes of
//! calldata from anvil's ten dev accounts, signed by anvil
//! (`eth_sendTransaction`) and mined with `evm_mine`.
//!
//! The reference, "raw", is the cheapest client that can ask anvil for the
//! same blocks: reqwest POSTs of the same requests whose answers are read
//! to the end and dropped unparsed, `conns` of them in flight. "ours" is
//! `RpcClient::block_stream` with the same batch size and `max_in_flight`,
//! which also parses every answer into headers and transaction ranges. Both
//! run in rounds, interleaved, and the table gives medians. anvil and the
//! client share the machine's two cores.
//!
//! Run: `cargo bench --bench anvil_fetch` (anvil from `.tools/`, which
//! `scripts/test.sh` installs, or PATH). Knobs: `BENCH_BLOCKS`,
//! `BENCH_BLOCK_TXS`, `BENCH_ROUNDS` (default 3).

#[path = "../tests/it/support/anvil.rs"]
mod anvil;
mod common;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anvil::{Anvil, AnvilOptions};
use anyhow::{Context as _, bail, ensure};
use futures::{StreamExt, TryStreamExt, stream};
use sender_indexer::config::Settings;
use sender_indexer::rpc::RpcClient;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_sender-indexer");
const BATCHES: [usize; 4] = [1, 10, 50, 200];
const CONNS: [usize; 4] = [1, 2, 4, 8];
/// The indexer's defaults (`config/default.toml`: rpc.batch_size,
/// rpc.max_in_flight).
const DEFAULTS: (usize, usize) = (10, 8);

fn main() -> anyhow::Result<()> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run())
}

/// POSTs `body` and returns the answer's bytes.
async fn post(http: &reqwest::Client, url: &str, body: String) -> anyhow::Result<bytes::Bytes> {
    let resp = http
        .post(url)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await?;
    ensure!(resp.status().is_success(), "http status {}", resp.status());
    Ok(resp.bytes().await?)
}

fn get_block_calls(range: std::ops::RangeInclusive<u64>) -> String {
    let calls: Vec<Value> = range
        .map(|n| json!({"jsonrpc": "2.0", "id": n, "method": "eth_getBlockByNumber", "params": [format!("0x{n:x}"), true]}))
        .collect();
    Value::Array(calls).to_string()
}

/// Mines `blocks` blocks of `per_block` transactions; returns the txs.
async fn build_chain(anvil: &Anvil, blocks: usize, per_block: usize) -> anyhow::Result<usize> {
    let http = reqwest::Client::new();
    let data = format!("0x{}", "ab".repeat(100));
    let mut total = 0;
    for b in 0..blocks {
        let calls: Vec<Value> = (0..per_block)
            .map(|i| {
                let to = format!("0x{:040x}", 0x1000 + b * per_block + i);
                json!({"jsonrpc": "2.0", "id": i, "method": "eth_sendTransaction", "params": [{
                    "from": anvil.account(i % 10).0, "to": to, "value": "0x1",
                    "gas": "0x10000", "data": data,
                }]})
            })
            .collect();
        let answer = post(&http, anvil.url(), Value::Array(calls).to_string()).await?;
        let answers: Vec<Value> = serde_json::from_slice(&answer)?;
        if let Some(err) = answers.iter().find_map(|a| a.get("error")) {
            bail!("eth_sendTransaction: {err}");
        }
        anvil.mine().await;
        total += per_block;
    }
    let head = anvil.block_number().await;
    ensure!(head == blocks as u64, "head {head}, expected {blocks}");
    let last = anvil.block(head).await;
    let txs = last["transactions"].as_array().map_or(0, Vec::len);
    ensure!(
        txs == per_block,
        "block {head} holds {txs} txs, expected {per_block}"
    );
    Ok(total)
}

/// Raw: every block fetched in batches of `batch`, `conns` at once, bodies
/// read and dropped. Returns the bytes received.
async fn fetch_raw(url: &str, blocks: u64, batch: usize, conns: usize) -> anyhow::Result<usize> {
    let http = reqwest::Client::new();
    let ranges: Vec<_> = (1..=blocks)
        .step_by(batch)
        .map(|lo| lo..=(lo + batch as u64 - 1).min(blocks))
        .collect();
    let sizes: Vec<usize> = stream::iter(ranges)
        .map(|r| {
            let http = http.clone();
            async move { post(&http, url, get_block_calls(r)).await.map(|b| b.len()) }
        })
        .buffer_unordered(conns)
        .try_collect()
        .await?;
    Ok(sizes.iter().sum())
}

/// Ours: `RpcClient::block_stream`; returns the transactions seen.
async fn fetch_ours(url: &str, blocks: u64, batch: usize, conns: usize) -> anyhow::Result<usize> {
    let mut cfg = Settings::defaults().rpc;
    cfg.urls = vec![url.parse()?];
    cfg.batch_size = batch.try_into()?;
    cfg.max_in_flight = conns.try_into()?;
    cfg.request_timeout = Duration::from_secs(60);
    cfg.max_retries = 2;
    cfg.backoff_initial = Duration::from_millis(100);
    cfg.backoff_max = Duration::from_secs(1);
    let rpc = Arc::new(RpcClient::new(cfg)?);
    let mut txs = 0;
    let mut expected = 1;
    let mut s = std::pin::pin!(rpc.block_stream(1..=blocks));
    while let Some(block) = s.next().await {
        let block = block?;
        ensure!(block.header.number == expected, "out of order");
        expected += 1;
        txs += block.txs.len();
    }
    ensure!(expected == blocks + 1, "stream ended early");
    Ok(txs)
}

async fn run() -> anyhow::Result<()> {
    let blocks = common::env_usize("BENCH_BLOCKS", 100);
    let per_block = common::env_usize("BENCH_BLOCK_TXS", 100);
    let rounds = common::env_usize("BENCH_ROUNDS", 3);
    let anvil = Anvil::start_with(AnvilOptions {
        no_mining: true,
        ..Default::default()
    })
    .await;
    let built = Instant::now();
    let total_txs = build_chain(&anvil, blocks, per_block).await?;
    let url = anvil.url().to_owned();
    let n = blocks as u64;
    let bytes = fetch_raw(&url, n, 10, 2).await?;
    println!(
        "anvil fetch bench: {blocks} blocks x {per_block} txs = {total_txs} txs, {:.1} MB of block JSON, built in {:.1}s; {} cores; anvil {}",
        bytes as f64 / 1e6,
        built.elapsed().as_secs_f64(),
        std::thread::available_parallelism().map_or(1, |n| n.get()),
        anvil::find_tool("anvil").display(),
    );

    // Every (batch, conns): raw and ours, interleaved round by round.
    let mut rows = Vec::new();
    let mut best_raw = (0.0f64, 0, 0);
    let mut best_ours = (0.0f64, 0, 0);
    let mut at = std::collections::HashMap::new();
    for batch in BATCHES {
        for conns in CONNS {
            let (mut raw, mut ours) = (Vec::new(), Vec::new());
            for _ in 0..rounds.max(1) {
                let t = Instant::now();
                ensure!(fetch_raw(&url, n, batch, conns).await? > 0);
                raw.push(t.elapsed().as_secs_f64());
                let t = Instant::now();
                ensure!(fetch_ours(&url, n, batch, conns).await? == total_txs);
                ours.push(t.elapsed().as_secs_f64());
            }
            let rate = |v: Vec<f64>| blocks as f64 / common::Timing { rounds: v }.median();
            let (raw, ours) = (rate(raw), rate(ours));
            if raw > best_raw.0 {
                best_raw = (raw, batch, conns);
            }
            if ours > best_ours.0 {
                best_ours = (ours, batch, conns);
            }
            at.insert((batch, conns), (raw, ours));
            rows.push(vec![
                batch.to_string(),
                conns.to_string(),
                format!("{raw:.0}"),
                format!("{ours:.0}"),
                format!("{:.2}", ours / raw),
            ]);
        }
    }
    println!();
    common::print_table(
        &[
            "batch",
            "conns",
            "raw blocks/s",
            "ours blocks/s",
            "ours/raw",
        ],
        &rows,
    );
    let (limit, lb, lc) = best_raw;
    let (ours_best, ob, oc) = best_ours;
    let (_, ours_default) = at[&DEFAULTS];
    println!();
    println!(
        "anvil's serving limit (best raw): {limit:.0} blocks/s = {} txs/s at batch {lb}, {lc} conns",
        common::thousands(limit * per_block as f64)
    );
    println!(
        "ours at its best setting (batch {ob}, {oc} conns): {ours_best:.0} blocks/s = {:.2} of the limit; at that limit's setting: {:.2}; at the defaults (batch {}, {} conns): {:.2}",
        ours_best / limit,
        at[&(lb, lc)].1 / limit,
        DEFAULTS.0,
        DEFAULTS.1,
        ours_default / limit
    );

    // The whole backfill into PostgreSQL, at ours' best setting and at the
    // defaults: fetching, recovery and writing all share the two cores
    // with anvil.
    let cluster = tokio::task::spawn_blocking(common::start_cluster).await??;
    let mut backfills = Vec::new();
    for (name, (batch, conns)) in [("best", (ob, oc)), ("defaults", DEFAULTS)] {
        let db = format!("anvil_{name}");
        cluster.create_database_if_missing(&db).await?;
        let mut cmd = Command::new(BIN);
        cmd.args(["backfill", "--from", "1", "--to", &n.to_string()])
            .args(["--batch-size", &batch.to_string()])
            .args(["--concurrency", &conns.to_string()]);
        common::indexer_env(&mut cmd, &url, &cluster.url(&db), "warn");
        let run = tokio::task::spawn_blocking(move || common::run_child(&mut cmd))
            .await?
            .context("running the backfill")?;
        ensure!(run.success, "backfill failed:\n{}", run.stderr);
        let fetch = at[&(batch, conns)].1 * per_block as f64;
        let txs_s = total_txs as f64 / run.wall;
        backfills.push(vec![
            format!("{name}: batch {batch}, {conns} conns"),
            format!("{:.2} s", run.wall),
            common::thousands(txs_s),
            format!("{:.2}", txs_s / fetch),
            format!("{:.0} MB", run.peak_rss_mb),
        ]);
    }
    println!();
    common::print_table(
        &[
            "backfill from anvil",
            "elapsed",
            "txs/s",
            "vs ours fetch-only at that setting",
            "peak RSS",
        ],
        &backfills,
    );
    Ok(())
}
