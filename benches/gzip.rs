//! Compressed JSON-RPC answers (`rpc.gzip`): bytes on the wire and the
//! client's CPU per block, with and without, in one run.
//!
//! The data: the five real mainnet blocks whose real receipts are in
//! `tests/fixtures/receipts/` (47,218, 483,920, 1,755,635, 17,000,000 and
//! 18,000,000; the last two are full modern blocks), renumbered 1..=5,
//! served by the test JSON-RPC server, which gzips an answer (default
//! level, as web servers do) when the request accepts it. The client is
//! `RpcClient::block_stream` with receipts (`logs.mode = "receipts"`, the
//! default): blocks and their `eth_getBlockReceipts`, framed and attached,
//! which is all that compression changes; decoding and verification cost
//! the same either way and are not run.
//!
//! The client runs on this thread alone (a current-thread runtime), so its
//! CPU is this thread's (`RUSAGE_THREAD`); the server runs on another
//! thread and its compression time is reported apart. Rounds alternate
//! plain and gzip; the table gives medians. Both share the machine's two
//! cores with whatever else runs.
//!
//! Run: `cargo bench --bench gzip`. Knobs: `BENCH_ROUNDS` (default 15),
//! `BENCH_PASSES` (fetches of the five blocks per round, default 20).

mod common;
#[path = "../tests/it/support/rpc_server.rs"]
mod rpc_server;

use std::sync::Arc;

use futures::StreamExt;
use rpc_server::RpcServer;
use sender_indexer::config::Settings;
use sender_indexer::rpc::RpcClient;
use serde_json::{Value, json};

fn main() -> anyhow::Result<()> {
    let rounds = common::env_usize("BENCH_ROUNDS", 15);
    let passes = common::env_usize("BENCH_PASSES", 20) as u64;
    let sets = common::fixtures::receipt_sets();
    let blocks = sets.len() as u64;

    // The server on a thread of its own.
    let (url_tx, url_rx) = std::sync::mpsc::channel();
    let (server_tx, server_rx) = std::sync::mpsc::channel::<Arc<RpcServer>>();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("server runtime");
        rt.block_on(async move {
            let renumbered: Vec<Value> = sets
                .iter()
                .enumerate()
                .map(|(i, (_, block, _))| {
                    let mut b = block.clone();
                    b["number"] = json!(format!("{:#x}", i + 1));
                    b
                })
                .collect();
            let server = Arc::new(RpcServer::start(renumbered).await.expect("server"));
            for (i, (_, _, receipts)) in sets.iter().enumerate() {
                server.insert_receipts(i as u64 + 1, receipts);
            }
            server.set_gzip(true);
            url_tx.send(server.url()).unwrap();
            server_tx.send(Arc::clone(&server)).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let url = url_rx.recv()?;
    let server = server_rx.recv()?;

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let defaults = Settings::defaults();
    // (cpu µs per block, wire bytes per block, server compression µs per block)
    let mut results: [Vec<(f64, f64, f64)>; 2] = [Vec::new(), Vec::new()];
    for round in 0..=rounds {
        for (mode, gzip) in [false, true].into_iter().enumerate() {
            let mut cfg = defaults.rpc.clone();
            cfg.urls = vec![url.parse()?];
            cfg.gzip = gzip;
            cfg.batch_size = (blocks as usize).try_into()?;
            let rpc = Arc::new(RpcClient::new(cfg)?.with_logs(&defaults.logs));
            let (_, wire0, _, nanos0) = server.wire();
            let cpu0 = common::thread_cpu_secs();
            let txs = rt.block_on(async {
                let mut txs = 0;
                for _ in 0..passes {
                    let mut s = std::pin::pin!(Arc::clone(&rpc).block_stream(1..=blocks));
                    while let Some(b) = s.next().await {
                        let b = b?;
                        anyhow::ensure!(
                            b.receipts.is_some(),
                            "block {} came without receipts",
                            b.header.number
                        );
                        txs += b.txs.len();
                    }
                }
                anyhow::Ok(txs)
            })?;
            let cpu = common::thread_cpu_secs() - cpu0;
            let (_, wire1, _, nanos1) = server.wire();
            anyhow::ensure!(txs > 0, "no transactions fetched");
            let n = (blocks * passes) as f64;
            if round > 0 {
                // round 0 warms up connections and caches
                results[mode].push((
                    cpu * 1e6 / n,
                    (wire1 - wire0) as f64 / n,
                    (nanos1 - nanos0) as f64 / 1e3 / n,
                ));
            }
        }
    }
    println!(
        "{} blocks with receipts x {passes} passes, {rounds} rounds, medians per block:",
        blocks
    );
    let plain_cpu = common::median(results[0].iter().map(|r| r.0).collect());
    let plain_wire = common::median(results[0].iter().map(|r| r.1).collect());
    let rows: Vec<Vec<String>> = ["plain", "gzip"]
        .iter()
        .zip(&results)
        .map(|(name, r)| {
            let cpu = common::median(r.iter().map(|x| x.0).collect());
            let wire = common::median(r.iter().map(|x| x.1).collect());
            let server = common::median(r.iter().map(|x| x.2).collect());
            vec![
                name.to_string(),
                format!("{:.0}", wire / 1024.0),
                format!("{:.2}", plain_wire / wire),
                format!("{cpu:.0}"),
                format!("{:.2}", cpu / plain_cpu),
                format!("{server:.0}"),
            ]
        })
        .collect();
    common::print_table(
        &[
            "answers",
            "KiB on the wire",
            "smaller x",
            "client CPU µs",
            "CPU vs plain",
            "server gzip µs",
        ],
        &rows,
    );
    Ok(())
}
