//! End-to-end benchmark of `sender-indexer backfill`: the real binary, as a
//! child process, indexes a chain of real mainnet blocks served from memory
//! by the test JSON-RPC server into a throwaway PostgreSQL cluster with
//! fsync ON (the server's default, durable configuration).
//!
//! The chain repeats the ten consecutive mainnet blocks 24,476,000..=009,
//! renumbered from 1: `number`, `hash`, `parentHash` (resealed, see below)
//! and each transaction's `blockNumber`/`blockHash` are rewritten, the
//! transactions and their signatures are left as they are. Blocks are
//! serialized once, before the clock starts, so the node is not what is
//! measured.
//!
//! Printed: wall time and txs/s of the backfill; the child's peak RSS
//! (`VmHWM`, polled: see `common::ChildRun` for why not wait4) and its RSS
//! over time; CPU seconds of the indexer, PostgreSQL and this process (the
//! RPC server); the raw secp256k1 floor on two threads over the same
//! transactions, measured in the same run, and the ratio; and row-count
//! checks on the database, so a broken run cannot pass for a fast one.
//!
//! Receipts are served too (the indexer's default `logs.mode =
//! "receipts"`): with `BENCH_LOGS_PER_TX=4` (the default) each transaction's
//! receipt carries 0 to 8 logs, 4 on average as on mainnet, from 50
//! contracts (addresses and event signatures are hashes, as mainnet's are)
//! with 1 to 4 topics and 0 to 128 bytes of data; the logs table
//! is checked and PostgreSQL's own binary COPY rate into a copy of the logs
//! table (same keys and indexes) is measured after the run. `BENCH_ARGS=
//! "--logs off"` measures without receipts.
//!
//! Run: `BENCH_TXS=200000 cargo bench --bench backfill` (default 1,000,000
//! transactions). Knobs: `BENCH_BATCH_SIZE`, `BENCH_CONCURRENCY` (the
//! child's `--batch-size`/`--concurrency`), `BENCH_ARGS` (more flags for
//! the child, e.g. `--threads 1`), `BENCH_ROUNDS` (rounds of the floor),
//! `BENCH_WRAP` (a profiler command to run the child under), `BENCH_BIN`
//! (another build of the binary, e.g. the commit before a change, to run
//! as the child on the same server and data),
//! `BENCH_PG_SETTINGS` (server settings applied by `ALTER SYSTEM` and a
//! reload before the run, e.g. `max_wal_size=8GB checkpoint_timeout=30min`),
//! `BENCH_LATENCY_MS` (a provider that far away: each request waits a
//! random 0 to twice that), `BENCH_PROCESSES=1,3` (that many backfills
//! started with the same command share the range; `BENCH_SEGMENT_BLOCKS`
//! sets `--segment-blocks`, by default `auto`).
//!
//! `BENCH_SERVE=FILE` builds the chain (every log an ERC-20 Transfer, so
//! that indexers which decode events by ABI index them all; with a genesis
//! and 65 empty blocks above the range, which some tools read), writes `FILE`
//! (`{"url", "first", "last", "chain_id", "txs", "logs", ...}`) and serves
//! it until stdin closes, for `scripts/bench-peers.sh` to run other indexers
//! against, instead of measuring anything itself.
//!
//! The renumbered chain is resealed (receipts root and bloom of the
//! generated receipts, header hashes and parent links rebuilt), so the
//! child verifies every block as it does by default; `BENCH_ARGS="--verify
//! off"` measures without verification.

mod common;
#[path = "../tests/it/support/rpc_server.rs"]
mod rpc_server;

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use nix::libc;
use rpc_server::RpcServer;
use sender_indexer::decode::{B256, BlockHeader, Bloom, BloomCache, Receipt, Tx, hex0x, keccak};
use sender_indexer::recover::recover_tx;
use sender_indexer::verify::{header_hash, ordered_root, receipt_proof};
use serde_json::{Value, json};
use sqlx::postgres::PgPoolOptions;

const BIN: &str = env!("CARGO_BIN_EXE_sender-indexer");
const DB: &str = "bench";
/// Blocks per JSON-RPC batch: a recent mainnet block is ~370 KB of JSON, so
/// 10 blocks keep each response (and its parsed form) a few MB. With a
/// zero-latency server, more in flight buys nothing but memory.
const DEFAULT_BATCH_SIZE: usize = 10;
const DEFAULT_CONCURRENCY: usize = 2;
/// Each timed round of the floor recovers the template txs this many times
/// (~10k recoveries, ~0.2 s on two threads): long enough to time well.
const FLOOR_REPS: usize = 4;

/// Template `template` renumbered as block `n` of the bench chain, resealed:
/// its parent is `parent`, its receipts root and bloom those of the
/// generated receipts (`roots`; the template's own without receipts), its
/// hash the keccak of the header so rebuilt. Returns the block and its hash.
fn renumber(
    template: &Value,
    n: u64,
    parent: &B256,
    roots: Option<&(B256, Bloom)>,
) -> (Value, B256) {
    let mut header = template.clone();
    let obj = header.as_object_mut().expect("block object");
    obj.remove("transactions");
    obj.insert("number".into(), json!(format!("0x{n:x}")));
    obj.insert("parentHash".into(), json!(hex0x(parent)));
    if let Some((root, bloom)) = roots {
        obj.insert("receiptsRoot".into(), json!(hex0x(root)));
        obj.insert("logsBloom".into(), json!(hex0x(bloom)));
    }
    let hash = header_hash(&BlockHeader::from_value(&header).expect("template header"))
        .expect("template header has every field");
    let mut b = template.clone();
    for (k, v) in header.as_object().unwrap() {
        b[k] = v.clone();
    }
    b["hash"] = json!(hex0x(&hash));
    let (number, hash_value) = (b["number"].clone(), b["hash"].clone());
    for tx in b["transactions"].as_array_mut().expect("full block") {
        tx["blockNumber"] = number.clone();
        tx["blockHash"] = hash_value.clone();
    }
    (b, hash)
}

/// The receipts root and bloom of an `eth_getBlockReceipts` answer, as the
/// indexer computes them (the bench only builds the chain with them).
fn receipts_roots(text: &str) -> (B256, Bloom) {
    let list: Vec<&serde_json::value::RawValue> = serde_json::from_str(text).expect("receipts");
    let mut bloom = [0u8; 256];
    let mut cache = BloomCache::default();
    let encodings: Vec<Vec<u8>> = list
        .iter()
        .map(|r| {
            let r = Receipt::from_json(r.get()).expect("generated receipt decodes");
            let proof = receipt_proof(&r, &mut cache).expect("generated receipt encodes");
            for (b, x) in bloom.iter_mut().zip(proof.bloom.iter()) {
                *b |= x;
            }
            proof.encoding
        })
        .collect();
    (ordered_root(&encodings), bloom)
}

/// The 50 contracts the bench's logs come from. Their addresses, like
/// their event signatures, are hashes, as mainnet's are (CREATE addresses,
/// topic0s), not small numbers: leading bytes are what PostgreSQL's sorts
/// compare first (abbreviated keys), and 19 or 31 equal leading bytes would
/// make every index build on `logs` compare whole values as no real chain
/// does. `BENCH_SERVE` lists them for peers that index named contracts.
fn contracts() -> Vec<[u8; 20]> {
    (0..50u64)
        .map(|k| {
            keccak(&[b"bench contract", &k.to_be_bytes()])[12..]
                .try_into()
                .expect("20 bytes")
        })
        .collect()
}

/// The `eth_getBlockReceipts` answer for bench block `b` (renumbered):
/// per transaction 0..=8 logs (4 on average), and how many logs in all.
/// Each receipt agrees with its transaction (type, price paid, `from`,
/// `to`) so that the block verifies, and carries its own `logsBloom`, as a
/// node's does; gas is 21,000 each. With `transfers`, every log is an ERC-20
/// Transfer; otherwise logs have 1 to 4 topics out of 20 event signatures
/// and 0 to 128 bytes of data.
fn receipts_text(b: &Value, salt: u64, logs_per_tx: usize, transfers: bool) -> (String, usize) {
    use std::fmt::Write as _;
    let word = |x: u64| {
        let mut w = [0u8; 32];
        w[24..].copy_from_slice(&x.to_be_bytes());
        w
    };
    let transfer = keccak(&[b"Transfer(address,address,uint256)"]);
    let contracts = contracts();
    let events: Vec<B256> = (0..20u64)
        .map(|k| keccak(&[format!("Event{k}(uint256)").as_bytes()]))
        .collect();
    let mut cache = BloomCache::default();
    let (number, hash) = (b["number"].as_str().unwrap(), b["hash"].as_str().unwrap());
    let mut out = String::with_capacity(1 << 20);
    out.push('[');
    let mut index = 0usize;
    let mut cumulative = 0u64;
    for (i, tx) in b["transactions"].as_array().unwrap().iter().enumerate() {
        let tx_hash = tx["hash"].as_str().unwrap();
        let tx_type = tx["type"].as_str().unwrap_or("0x0");
        let price = tx["gasPrice"]
            .as_str()
            .expect("mined txs report the price paid");
        let from = tx["from"].as_str().expect("mined txs name their sender");
        let to = tx["to"]
            .as_str()
            .map_or("null".to_owned(), |t| format!("\"{t}\""));
        cumulative += 21_000;
        let mix = (salt ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).rotate_left(17);
        let n_logs = if logs_per_tx == 0 {
            0
        } else {
            (mix % (2 * logs_per_tx as u64 + 1)) as usize
        };
        if i > 0 {
            out.push(',');
        }
        let _ = write!(
            out,
            r#"{{"blockHash":"{hash}","blockNumber":"{number}","transactionHash":"{tx_hash}","transactionIndex":"0x{i:x}","from":"{from}","to":{to},"status":"0x1","gasUsed":"0x5208","cumulativeGasUsed":"0x{cumulative:x}","effectiveGasPrice":"{price}","contractAddress":null,"type":"{tx_type}","logs":["#
        );
        let mut bloom = [0u8; 256];
        for k in 0..n_logs {
            let m = mix.wrapping_add(k as u64 * 0x2545_f491_4f6c_dd1d);
            if k > 0 {
                out.push(',');
            }
            let address = contracts[(m % 50) as usize];
            let (topics, data) = if transfers {
                // Transfer(address indexed from, address indexed to, uint256 value)
                let topics = vec![transfer, word(m >> 40), word(m & 0xffff_ffff_ffff)];
                (topics, hex0x(&word(m >> 20)))
            } else {
                let topics = (0..=(m >> 8) % 4)
                    .map(|t| {
                        if t == 0 {
                            events[((m >> 16) % 20) as usize]
                        } else {
                            word(m ^ t)
                        }
                    })
                    .collect();
                (
                    topics,
                    format!("0x{}", "ab".repeat(32 * ((m >> 24) % 5) as usize)),
                )
            };
            cache.add_log(&mut bloom, &address, &topics);
            let topics: Vec<String> = topics.iter().map(|t| format!("\"{}\"", hex0x(t))).collect();
            let _ = write!(
                out,
                r#"{{"address":"{}","topics":[{}],"data":"{data}","blockNumber":"{number}","blockHash":"{hash}","transactionHash":"{tx_hash}","transactionIndex":"0x{i:x}","logIndex":"0x{index:x}","removed":false}}"#,
                hex0x(&address),
                topics.join(","),
            );
            index += 1;
        }
        let _ = write!(out, r#"],"logsBloom":"{}"}}"#, hex0x(&bloom));
    }
    out.push(']');
    (out, index)
}

/// CPU seconds of a PostgreSQL cluster: the postmaster (with the children
/// it has reaped, i.e. finished backends) plus its living children.
fn postgres_cpu_secs(postmaster: i32) -> f64 {
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut total = 0u64;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // Fields after the parenthesized command: state ppid ... utime(14).
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let f: Vec<u64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        if f.len() < 15 {
            continue;
        }
        let (ppid, utime, stime, cutime, cstime) = (f[1] as i32, f[11], f[12], f[13], f[14]);
        if pid == postmaster {
            total += utime + stime + cutime + cstime;
        } else if ppid == postmaster {
            total += utime + stime;
        }
    }
    total as f64 / ticks
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(run())
}

async fn run() -> anyhow::Result<()> {
    let target_txs = common::env_usize("BENCH_TXS", 1_000_000);
    let batch_size = common::env_usize("BENCH_BATCH_SIZE", DEFAULT_BATCH_SIZE);
    let concurrency = common::env_usize("BENCH_CONCURRENCY", DEFAULT_CONCURRENCY);
    let rounds = common::env_usize("BENCH_ROUNDS", 5);
    let extra_args = std::env::var("BENCH_ARGS").unwrap_or_default();
    let logs_per_tx = common::env_usize("BENCH_LOGS_PER_TX", 4);
    let logs_on = !extra_args.contains("--logs off");
    // BENCH_SERVE=FILE: only serve the chain to other indexers (see the
    // module's documentation), with ERC-20 Transfer logs that depend on the
    // template, not the block, so a receipt asked for by a transaction's hash
    // (which repeats every `templates.len()` blocks) is the same in each.
    let serve = std::env::var("BENCH_SERVE").ok();
    let transfers = serve.is_some();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());

    // The templates, and what recovery makes of them.
    let templates = common::recent_mainnet_blocks();
    let template_txs: Vec<Vec<Tx>> = templates
        .iter()
        .map(|b| {
            b["transactions"]
                .as_array()
                .expect("full block")
                .iter()
                .map(|t| Tx::from_value(t).expect("fixture tx decodes"))
                .collect()
        })
        .collect();
    let all_txs: Vec<Tx> = template_txs.iter().flatten().cloned().collect();
    let prepared = common::prepare(&all_txs);
    let failed_senders: Vec<usize> = template_txs
        .iter()
        .map(|txs| txs.iter().filter(|t| recover_tx(t).sender.is_err()).count())
        .collect();

    // How many blocks make the requested number of transactions.
    let (mut blocks, mut total_txs, mut expected_null) = (0u64, 0usize, 0usize);
    while total_txs < target_txs {
        let t = blocks as usize % templates.len();
        total_txs += template_txs[t].len();
        expected_null += failed_senders[t];
        blocks += 1;
    }

    // Serve the chain from memory: serialize every block once, up front.
    let setup = Instant::now();
    let server = RpcServer::start(Vec::new()).await?;
    // BENCH_LATENCY_MS=40: a provider that far away (each request waits a
    // random 0..=80 ms, 40 on average).
    let latency_ms = common::env_usize("BENCH_LATENCY_MS", 0) as u64;
    if latency_ms > 0 {
        server.set_latency(Duration::from_millis(2 * latency_ms));
    }
    let expected_logs = std::sync::atomic::AtomicUsize::new(0);
    // Receipts do not depend on the block hash but the hash depends on
    // their root: roots in parallel, hashes in order, then the blocks.
    let template_of = |n: u64| &templates[(n as usize - 1) % templates.len()];
    let salt = |n: u64| {
        if transfers {
            (n - 1) % templates.len() as u64
        } else {
            n
        }
    };
    let parts = cores.max(1) as u64;
    let per_part = |f: &(dyn Fn(u64) + Sync)| {
        std::thread::scope(|scope| {
            for part in 0..parts {
                scope.spawn(move || {
                    let mut n = 1 + part;
                    while n <= blocks {
                        f(n);
                        n += parts;
                    }
                });
            }
        })
    };
    let roots: Vec<std::sync::OnceLock<(B256, Bloom)>> =
        (0..=blocks).map(|_| std::sync::OnceLock::new()).collect();
    if logs_on {
        per_part(&|n| {
            let (b, _) = renumber(template_of(n), n, &[0; 32], None);
            let (text, _) = receipts_text(&b, salt(n), logs_per_tx, transfers);
            let _ = roots[n as usize].set(receipts_roots(&text));
        });
    }
    let mut hashes = vec![[0u8; 32]; blocks as usize + 1];
    hashes[0] = keccak(&[b"bench genesis"]);
    for n in 1..=blocks {
        let (_, hash) = renumber(
            template_of(n),
            n,
            &hashes[n as usize - 1],
            roots[n as usize].get(),
        );
        hashes[n as usize] = hash;
    }
    per_part(&|n| {
        let (b, _) = renumber(
            template_of(n),
            n,
            &hashes[n as usize - 1],
            roots[n as usize].get(),
        );
        let receipts = logs_on.then(|| receipts_text(&b, salt(n), logs_per_tx, transfers));
        server.insert_block(b);
        if let Some((text, logs)) = receipts {
            server.insert_receipts_text(n, text);
            expected_logs.fetch_add(logs, std::sync::atomic::Ordering::Relaxed);
        }
    });
    let expected_logs = expected_logs.into_inner();
    server.set_head(blocks);
    if let Some(file) = serve {
        // Around the range, blocks no one indexes but some tools read: a
        // genesis (Ponder reads the block before its first) and, above the
        // range, as many empty blocks as Ponder holds back as unfinalized on
        // chain 1 (65), so the whole range is a backfill for every tool.
        let empty = |n: u64, hash: &B256, parent: &B256, timestamp: u64| {
            let mut b = templates[0].clone();
            b["number"] = json!(format!("0x{n:x}"));
            b["hash"] = json!(hex0x(hash));
            b["parentHash"] = json!(hex0x(parent));
            b["timestamp"] = json!(format!("0x{timestamp:x}"));
            b["transactions"] = json!([]);
            b
        };
        let time_of = |n: u64| {
            let t = &template_of(n)["timestamp"];
            u64::from_str_radix(t.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
        };
        server.insert_block(empty(0, &hashes[0], &[0; 32], time_of(1) - 12));
        let mut parent = hashes[blocks as usize];
        for n in blocks + 1..=blocks + 65 {
            let hash = keccak(&[b"bench tail", &n.to_be_bytes()]);
            server.insert_block(empty(
                n,
                &hash,
                &parent,
                time_of(blocks) + 12 * (n - blocks),
            ));
            server.insert_receipts_text(n, "[]".into());
            parent = hash;
        }
        server.set_head(blocks + 65);
        let info = json!({
            "url": server.url(), "first": 1, "last": blocks, "chain_id": 1,
            "txs": total_txs, "logs": expected_logs, "unrecoverable_senders": expected_null,
            "contracts": contracts().iter().map(|a| hex0x(a)).collect::<Vec<_>>(),
        });
        std::fs::write(&file, info.to_string()).with_context(|| format!("BENCH_SERVE={file}"))?;
        eprintln!(
            "serving {blocks} blocks, {total_txs} txs at {} until stdin closes",
            server.url()
        );
        tokio::task::spawn_blocking(|| std::io::copy(&mut std::io::stdin(), &mut std::io::sink()))
            .await??;
        return Ok(());
    }
    let cluster = tokio::task::spawn_blocking(common::start_cluster).await??;
    cluster.create_database_if_missing(DB).await?;
    let db_url = cluster.url(DB);
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect_with(cluster.connect_options(DB))
        .await?;
    // BENCH_PG_SETTINGS="max_wal_size=8GB checkpoint_timeout=30min":
    // server settings that a reload applies (ALTER SYSTEM).
    let pg_settings = std::env::var("BENCH_PG_SETTINGS").unwrap_or_default();
    for setting in pg_settings.split_whitespace() {
        let (name, value) = setting
            .split_once('=')
            .context("BENCH_PG_SETTINGS: a list like max_wal_size=8GB")?;
        ensure!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "BENCH_PG_SETTINGS: {name:?} is not a setting name"
        );
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "ALTER SYSTEM SET {name} = '{}'",
            value.replace('\'', "''")
        )))
        .execute(&pool)
        .await?;
    }
    if !pg_settings.trim().is_empty() {
        sqlx::query("SELECT pg_reload_conf()")
            .execute(&pool)
            .await?;
        tokio::time::sleep(Duration::from_millis(200)).await; // the reload is asynchronous
    }
    let (pg_version, fsync, sync_commit, shared_buffers, max_wal): (String, String, String, String, String) =
        sqlx::query_as(
            "SELECT current_setting('server_version'), current_setting('fsync'), current_setting('synchronous_commit'), current_setting('shared_buffers'), current_setting('max_wal_size')",
        )
        .fetch_one(&pool)
        .await?;
    println!(
        "backfill bench: {total_txs} txs in {blocks} blocks (mainnet 24476000..=24476009 repeated), set up in {:.1}s; {cores} cores; PostgreSQL {pg_version}, fsync={fsync}, synchronous_commit={sync_commit}, shared_buffers={shared_buffers}, max_wal_size={max_wal}",
        setup.elapsed().as_secs_f64()
    );

    if let Ok(list) = std::env::var("BENCH_PROCESSES") {
        let counts: Vec<usize> = list
            .split(',')
            .map(|n| {
                n.trim()
                    .parse()
                    .context("BENCH_PROCESSES: a list like 1,2,3")
            })
            .collect::<anyhow::Result<_>>()?;
        // Without BENCH_SEGMENT_BLOCKS, the default (`auto`): the same
        // command on every process, as a user runs it.
        let mut args: Vec<String> = Vec::new();
        if let Ok(segment) = std::env::var("BENCH_SEGMENT_BLOCKS") {
            args.extend(["--segment-blocks".to_string(), segment]);
        }
        args.extend(
            [
                "--threads",
                "1",
                "--batch-size",
                &batch_size.to_string(),
                "--concurrency",
                &concurrency.to_string(),
                "backfill",
                "--from",
                "1",
                "--to",
                &blocks.to_string(),
            ]
            .map(String::from),
        );
        args.extend(extra_args.split_whitespace().map(String::from));
        return processes(&cluster, &server.url(), &args, &counts, total_txs, rounds).await;
    }

    // The floor on two threads over the same txs, before and after the run.
    let floor_pairs: Vec<common::Pair> = (0..FLOOR_REPS)
        .flat_map(|_| prepared.pairs.iter().copied())
        .collect();
    let floor = || {
        common::time_rounds(1, rounds, || {
            assert_eq!(
                common::raw_floor_threads(&floor_pairs, 2),
                floor_pairs.len()
            );
        })
    };
    let mut floor_timing = floor();

    // The backfill itself.
    let mut args: Vec<String> = [
        "backfill",
        "--from",
        "1",
        "--to",
        &blocks.to_string(),
        "--batch-size",
        &batch_size.to_string(),
        "--concurrency",
        &concurrency.to_string(),
    ]
    .map(String::from)
    .into();
    args.extend(extra_args.split_whitespace().map(String::from));
    // BENCH_WRAP runs the child under a profiler, e.g. "heaptrack -o
    // /tmp/hp" or "perf record -g -o /tmp/p.data"; RSS and CPU then
    // include the wrapper.
    let wrap = std::env::var("BENCH_WRAP").unwrap_or_default();
    let mut argv: Vec<String> = wrap.split_whitespace().map(String::from).collect();
    argv.push(std::env::var("BENCH_BIN").unwrap_or_else(|_| BIN.to_string()));
    argv.extend(args);
    println!("child: {}", argv.join(" "));
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    common::indexer_env(&mut cmd, &server.url(), &db_url, "info");
    let (pg_cpu0, self_cpu0) = (postgres_cpu_secs(cluster.pid()), common::self_cpu_secs());
    let run = tokio::task::spawn_blocking(move || common::run_child(&mut cmd))
        .await?
        .with_context(|| format!("running {}", argv[0]))?;
    let self_cpu = common::self_cpu_secs() - self_cpu0;
    tokio::time::sleep(Duration::from_millis(300)).await; // backends exit, get reaped
    let pg_cpu = postgres_cpu_secs(cluster.pid()) - pg_cpu0;
    if !run.success {
        bail!("backfill failed:\n{}", run.stderr);
    }
    floor_timing.extend(floor());

    // Did it index everything?
    let timed = Instant::now();
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM transactions")
        .fetch_one(&pool)
        .await?;
    let count_secs = timed.elapsed().as_secs_f64();
    let (null_senders, mismatches): (i64, i64) = sqlx::query_as(
        "SELECT count(*) FILTER (WHERE sender IS NULL), count(*) FILTER (WHERE from_matches IS DISTINCT FROM true) FROM transactions",
    )
    .fetch_one(&pool)
    .await?;
    let (stored_blocks, block_txs, checkpoint): (i64, Option<i64>, Option<i64>) = sqlx::query_as(
        "SELECT count(*), sum(tx_count)::bigint, (SELECT block_number FROM checkpoint) FROM blocks",
    )
    .fetch_one(&pool)
    .await?;
    let timed = Instant::now();
    let by_sender: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM transactions WHERE sender = (SELECT sender FROM transactions WHERE block_number = 1 AND tx_index = 0)",
    )
    .fetch_one(&pool)
    .await?;
    let lookup_secs = timed.elapsed().as_secs_f64();
    let db_bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
        .fetch_one(&pool)
        .await?;
    let log_rows: i64 = sqlx::query_scalar("SELECT count(*) FROM logs")
        .fetch_one(&pool)
        .await?;
    // PostgreSQL's binary COPY rate for log rows, into a table with the
    // logs table's key and indexes: the logs' share of the write path.
    let copy_rate = if log_rows > 0 {
        let mut conn = pool.acquire().await?;
        let mut out = conn
            .copy_out_raw("COPY (SELECT * FROM logs ORDER BY block_number, log_index) TO STDOUT (FORMAT binary)")
            .await?;
        let mut data = Vec::new();
        while let Some(chunk) = futures::StreamExt::next(&mut out).await {
            data.extend_from_slice(&chunk?);
        }
        drop(out);
        let mut rates = Vec::new();
        // As a bulk load writes them (lookup indexes deferred: the key
        // only), then as `follow` does (the key and both lookup indexes).
        for (table, ddl) in [
            (
                "logs_pk",
                "CREATE TABLE logs_pk (LIKE logs, PRIMARY KEY (block_number, log_index))",
            ),
            (
                "logs_all",
                "CREATE TABLE logs_all (LIKE logs INCLUDING ALL)",
            ),
        ] {
            sqlx::query(sqlx::AssertSqlSafe(ddl))
                .execute(&mut *conn)
                .await?;
            // The backfill's dirty pages written out first, so the COPY is
            // timed alone rather than against that checkpoint's I/O.
            sqlx::query("CHECKPOINT").execute(&mut *conn).await?;
            let timed = Instant::now();
            let mut copy = conn
                .copy_in_raw(&format!("COPY {table} FROM STDIN (FORMAT binary)"))
                .await?;
            for chunk in data.chunks(4 << 20) {
                copy.send(chunk).await?;
            }
            copy.finish().await?;
            rates.push(log_rows as f64 / timed.elapsed().as_secs_f64());
        }
        Some(rates)
    } else {
        None
    };
    pool.close().await;

    // Report.
    let (elapsed, rss_mb, child_cpu) = (run.wall, run.peak_rss_mb, run.cpu);
    let txs_per_s = total_txs as f64 / elapsed;
    let floor_rec_s = floor_pairs.len() as f64 / floor_timing.median();
    let floor_txs_s = (FLOOR_REPS * all_txs.len()) as f64 / floor_timing.median();
    let ratio = txs_per_s / floor_txs_s;
    // One recovery's CPU: two threads recover floor_txs_s a second.
    let floor_us = 2e6 / floor_txs_s;
    let per_tx_us = |cpu: f64| cpu * 1e6 / total_txs as f64;
    let all_cpu = child_cpu + pg_cpu + self_cpu;
    let share = |cpu: f64| format!("{:.0}%", 100.0 * cpu / (elapsed * cores as f64));
    let row = |k: &str, v: String| vec![k.to_string(), v];
    println!();
    common::print_table(
        &["backfill", "value"],
        &[
            row("txs", common::thousands(total_txs as f64)),
            row("blocks", common::thousands(blocks as f64)),
            row("elapsed", format!("{elapsed:.2} s")),
            row("txs/s", common::thousands(txs_per_s)),
            row(
                "raw 2-thread recoveries/s (same txs)",
                format!(
                    "{} ({} txs/s; spread {:.0}% over {} rounds, best {} txs/s)",
                    common::thousands(floor_rec_s),
                    common::thousands(floor_txs_s),
                    floor_timing.spread() * 100.0,
                    floor_timing.rounds.len(),
                    common::thousands(floor_txs_s * floor_timing.median() / floor_timing.best())
                ),
            ),
            row(
                "ratio txs/s / raw 2-thread txs/s",
                format!(
                    "{ratio:.2} (goal >= {})",
                    if logs_on { "0.5 with receipts and logs" } else { "0.75" }
                ),
            ),
            row(
                "peak RSS of the indexer (VmHWM)",
                format!("{rss_mb:.0} MB (goal < 200)"),
            ),
            row(
                "CPU: indexer",
                format!(
                    "{child_cpu:.1} s = {:.1} us/tx ({} of {cores} cores){}",
                    per_tx_us(child_cpu),
                    share(child_cpu),
                    if logs_on {
                        format!(
                            "; {:.1} beyond the raw floor (goal <= 18)",
                            per_tx_us(child_cpu) - floor_us
                        )
                    } else {
                        String::new()
                    }
                ),
            ),
            row(
                "CPU: postgres",
                format!(
                    "{pg_cpu:.1} s = {:.1} us/tx ({}){}",
                    per_tx_us(pg_cpu),
                    share(pg_cpu),
                    if logs_on { " (goal <= 25)" } else { "" }
                ),
            ),
            row(
                "CPU: bench process (rpc server)",
                format!(
                    "{self_cpu:.1} s = {:.1} us/tx ({})",
                    per_tx_us(self_cpu),
                    share(self_cpu)
                ),
            ),
            row(
                "CPU: raw floor, for comparison",
                format!("{floor_us:.1} us/tx of one core"),
            ),
            row(
                "CPU-bound ceiling at this CPU/tx",
                format!(
                    "{} txs/s = all {cores} cores busy ({} busy in this run)",
                    common::thousands(total_txs as f64 * cores as f64 / all_cpu),
                    share(all_cpu)
                ),
            ),
            row(
                "check: transactions rows",
                format!("{rows} (expected {total_txs})"),
            ),
            row(
                "check: null senders / from mismatches",
                format!("{null_senders} (expected {expected_null}) / {mismatches}"),
            ),
            row(
                "check: blocks, sum(tx_count), checkpoint",
                format!(
                    "{stored_blocks}, {}, {}",
                    block_txs.unwrap_or(0),
                    checkpoint.unwrap_or(-1)
                ),
            ),
            row(
                "SELECT count(*) FROM transactions",
                format!("{:.0} ms", count_secs * 1e3),
            ),
            row(
                "count by sender (index lookup)",
                format!("{by_sender} rows in {:.1} ms", lookup_secs * 1e3),
            ),
            row(
                "check: logs rows",
                format!(
                    "{log_rows} (expected {expected_logs}; {:.1} per tx)",
                    log_rows as f64 / total_txs as f64
                ),
            ),
            row("logs stored/s", common::thousands(log_rows as f64 / elapsed)),
            row(
                "PostgreSQL binary COPY of those log rows",
                copy_rate.map_or("-".into(), |r| {
                    format!(
                        "{} rows/s key only (a bulk load), {} with the lookup indexes (goal >= 300,000)",
                        common::thousands(r[0]),
                        common::thousands(r[1])
                    )
                }),
            ),
            row("database size", format!("{} MB", db_bytes >> 20)),
        ],
    );
    let rss_at = |share: f64| {
        let t = share * elapsed;
        let s = run.rss_samples.iter().rfind(|(at, _)| *at <= t);
        s.map_or("-".to_string(), |(_, mb)| format!("{mb:.0}"))
    };
    println!(
        "\nindexer RSS (MB) at 10/25/50/75/100% of the run: {} / {} / {} / {} / {}",
        rss_at(0.10),
        rss_at(0.25),
        rss_at(0.50),
        rss_at(0.75),
        rss_at(1.0)
    );
    let tail: Vec<&str> = run.stderr.lines().rev().take(2).collect();
    println!("\nindexer's last log lines:");
    for l in tail.iter().rev() {
        println!("  {l}");
    }
    drop(server);
    drop(cluster);
    ensure!(
        rows as usize == total_txs
            && null_senders as usize == expected_null
            && mismatches == expected_null as i64
            && stored_blocks as u64 == blocks
            && block_txs == Some(total_txs as i64)
            && checkpoint == Some(blocks as i64)
            && log_rows as usize == expected_logs,
        "the database does not hold what was backfilled (see the checks above)"
    );
    Ok(())
}

/// `BENCH_PROCESSES=1,2,3`: the same chain backfilled by that many
/// processes at once, each on one recovery thread (a machine each, in
/// miniature), sharing the range through leased segments; each count gets
/// a fresh database per round, rounds interleaved. Reports the median wall
/// time and its ratio to one process.
async fn processes(
    cluster: &sender_indexer::embedded_pg::ClusterDropGuard,
    rpc_url: &str,
    args: &[String],
    counts: &[usize],
    total_txs: usize,
    rounds: usize,
) -> anyhow::Result<()> {
    println!("child: {BIN} {} (xN)", args.join(" "));
    let mut walls: Vec<Vec<f64>> = vec![Vec::new(); counts.len()];
    for round in 0..rounds.max(1) {
        for (i, &n) in counts.iter().enumerate() {
            let db = format!("bench_p{n}_r{round}");
            cluster.create_database_if_missing(&db).await?;
            let db_url = cluster.url(&db);
            let started = Instant::now();
            let children: Vec<_> = (0..n)
                .map(|_| {
                    let mut cmd = Command::new(BIN);
                    cmd.args(args);
                    common::indexer_env(&mut cmd, rpc_url, &db_url, "warn");
                    cmd.stderr(std::process::Stdio::piped());
                    cmd.spawn().context("spawning the indexer")
                })
                .collect::<anyhow::Result<_>>()?;
            let outs = tokio::task::spawn_blocking(move || {
                children
                    .into_iter()
                    .map(|c| c.wait_with_output())
                    .collect::<Vec<_>>()
            })
            .await?;
            let wall = started.elapsed().as_secs_f64();
            for out in outs {
                let out = out?;
                ensure!(
                    out.status.success(),
                    "a backfill of {n} failed:\n{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .connect_with(cluster.connect_options(&db))
                .await?;
            let (rows, distinct): (i64, i64) = sqlx::query_as(
                "SELECT count(*), count(DISTINCT (block_number, tx_index)) FROM transactions",
            )
            .fetch_one(&pool)
            .await?;
            ensure!(
                rows == total_txs as i64 && distinct == rows,
                "{n} processes stored {rows} transactions ({distinct} distinct), expected {total_txs}"
            );
            pool.close().await;
            println!("round {round}: {n} process(es): {wall:.2}s");
            walls[i].push(wall);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let base = median(&mut walls[0].clone());
    let rows: Vec<Vec<String>> = counts
        .iter()
        .zip(walls.iter_mut())
        .map(|(n, w)| {
            let m = median(w);
            vec![
                n.to_string(),
                format!("{m:.2}"),
                common::thousands(total_txs as f64 / m),
                format!("{:.2}x", base / m),
            ]
        })
        .collect();
    common::print_table(
        &["processes", "wall s (median)", "txs/s", "vs first"],
        &rows,
    );
    Ok(())
}
