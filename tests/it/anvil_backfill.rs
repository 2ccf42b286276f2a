//! `backfill` against a real anvil chain holding every transaction kind:
//! the database must equal the node's chain exactly, a rerun changes
//! nothing, and a run killed part-way then restarted ends with the rows of
//! a clean run. Also home of [`assert_db_equals_chain`], shared with the
//! `follow` tests.

use std::collections::BTreeSet;
use std::io::Read;

use std::process::{Child, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::anvil::{Anvil, AnvilOptions, RETURN_42_INITCODE, TxKind, hex_u64};
use crate::support::{indexer, pg};

fn bytes(v: &Value) -> Vec<u8> {
    hex::decode(
        v.as_str()
            .unwrap_or_else(|| panic!("hex string, got {v}"))
            .trim_start_matches("0x"),
    )
    .unwrap()
}

/// A stored block: number, hash, parent hash, timestamp, tx count.
pub type BlockRow = (i64, Vec<u8>, Vec<u8>, i64, i32);

/// Every stored row, in a comparable form (everything but timestamps of
/// bookkeeping): blocks, transactions, authorizations, checkpoint.
#[derive(Debug, PartialEq, Eq)]
pub struct Snapshot {
    pub blocks: Vec<BlockRow>,
    pub txs: Vec<Vec<Option<String>>>,
    pub auths: Vec<Vec<Option<String>>>,
    pub checkpoint: Option<(i64, Vec<u8>)>,
}

pub async fn snapshot(pool: &PgPool) -> Snapshot {
    let blocks = sqlx::query_as(
        "SELECT number, hash, parent_hash, extract(epoch from timestamp)::bigint, tx_count FROM blocks ORDER BY number",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let rows_as_text = |sql: &'static str| async move {
        let rows: Vec<(Vec<Option<String>>,)> = sqlx::query_as(sql).fetch_all(pool).await.unwrap();
        rows.into_iter().map(|r| r.0).collect::<Vec<_>>()
    };
    let txs = rows_as_text(
        "SELECT ARRAY[block_number::text, tx_index::text, encode(hash, 'hex'), tx_type::text, encode(sender, 'hex'), encode(node_from, 'hex'), from_matches::text, encode(to_address, 'hex'), nonce::text, value::text, error] FROM transactions ORDER BY block_number, tx_index",
    )
    .await;
    let auths = rows_as_text(
        "SELECT ARRAY[block_number::text, tx_index::text, auth_index::text, chain_id::text, encode(address, 'hex'), nonce::text, encode(authority, 'hex'), error] FROM authorizations ORDER BY block_number, tx_index, auth_index",
    )
    .await;
    let checkpoint = sqlx::query_as("SELECT block_number, block_hash FROM checkpoint")
        .fetch_optional(pool)
        .await
        .unwrap();
    Snapshot {
        blocks,
        txs,
        auths,
        checkpoint,
    }
}

/// The node's canonical blocks `lo..=hi` (full transactions).
pub async fn chain(anvil: &Anvil, lo: u64, hi: u64) -> Vec<Value> {
    let mut out = Vec::new();
    for n in lo..=hi {
        let b = anvil.block(n).await;
        assert!(!b.is_null(), "node has no block {n}");
        out.push(b);
    }
    out
}

/// Compares the database with the node's blocks `lo..=hi`; `Err` says the
/// first difference. Exact: the stored (number, hash) set equals the node's
/// for `lo..=hi` (nothing above `hi`, nothing orphaned, no gap), every
/// transaction row matches (hash, index, type, recovered sender == node's
/// from), every type-4 authorization has a row with an authority, no other
/// transaction or authorization rows exist, and the checkpoint is `hi`.
pub async fn db_vs_chain(pool: &PgPool, anvil: &Anvil, lo: u64, hi: u64) -> Result<(), String> {
    let node = chain(anvil, lo, hi).await;
    let snap = snapshot(pool).await;
    let stored: Vec<(i64, String)> = snap
        .blocks
        .iter()
        .map(|b| (b.0, hex::encode(&b.1)))
        .collect();
    let expected: Vec<(i64, String)> = node
        .iter()
        .map(|b| (hex_u64(&b["number"]) as i64, hex::encode(bytes(&b["hash"]))))
        .collect();
    if stored != expected {
        let s: BTreeSet<_> = stored.iter().collect();
        let e: BTreeSet<_> = expected.iter().collect();
        return Err(format!(
            "stored blocks differ from the node's {lo}..={hi}: only stored {:?}; only on the node {:?}",
            s.difference(&e).collect::<Vec<_>>(),
            e.difference(&s).collect::<Vec<_>>()
        ));
    }
    let mut want_txs = Vec::new();
    let mut want_auths = Vec::new();
    for (b, row) in node.iter().zip(&snap.blocks) {
        let n = row.0;
        if row.2 != bytes(&b["parentHash"]) {
            return Err(format!("block {n}: parent hash differs"));
        }
        if row.3 as u64 != hex_u64(&b["timestamp"]) {
            return Err(format!("block {n}: timestamp differs"));
        }
        let txs = b["transactions"].as_array().unwrap();
        if row.4 as usize != txs.len() {
            return Err(format!("block {n}: tx_count {} != {}", row.4, txs.len()));
        }
        for tx in txs {
            let from = hex::encode(bytes(&tx["from"]));
            let i = hex_u64(&tx["transactionIndex"]);
            want_txs.push((
                n.to_string(),
                i.to_string(),
                hex::encode(bytes(&tx["hash"])),
                hex_u64(&tx["type"]).to_string(),
                from.clone(),
            ));
            if let Some(list) = tx.get("authorizationList").and_then(Value::as_array) {
                for (j, a) in list.iter().enumerate() {
                    want_auths.push((
                        n.to_string(),
                        i.to_string(),
                        j.to_string(),
                        hex::encode(bytes(&a["address"])),
                        hex_u64(&a["nonce"]).to_string(),
                    ));
                }
            }
        }
    }
    let got_txs: Vec<_> = snap
        .txs
        .iter()
        .map(|r| {
            let c = |k: usize| r[k].clone().unwrap_or_default();
            if c(6) != "true" || r[10].is_some() || c(4) != c(5) {
                return Err(format!(
                    "tx row {r:?}: sender not recovered or not equal to node_from"
                ));
            }
            Ok((c(0), c(1), c(2), c(3), c(4)))
        })
        .collect::<Result<_, _>>()?;
    if got_txs != want_txs {
        return Err(format!(
            "transactions differ:\nstored {got_txs:?}\nnode   {want_txs:?}"
        ));
    }
    let got_auths: Vec<_> = snap
        .auths
        .iter()
        .map(|r| {
            let c = |k: usize| r[k].clone().unwrap_or_default();
            if r[6].is_none() || r[7].is_some() {
                return Err(format!("authorization row {r:?}: no authority"));
            }
            Ok((c(0), c(1), c(2), c(4), c(5)))
        })
        .collect::<Result<_, _>>()?;
    if got_auths != want_auths {
        return Err(format!(
            "authorizations differ:\nstored {got_auths:?}\nnode   {want_auths:?}"
        ));
    }
    let want_cp = (hi as i64, bytes(&node.last().unwrap()["hash"]));
    if snap.checkpoint.as_ref() != Some(&want_cp) {
        return Err(format!(
            "checkpoint {:?} != block {hi}",
            snap.checkpoint.map(|c| (c.0, hex::encode(c.1)))
        ));
    }
    Ok(())
}

/// Panics with the first difference between the database and the node's
/// blocks `lo..=hi` (see [`db_vs_chain`]).
pub async fn assert_db_equals_chain(pool: &PgPool, anvil: &Anvil, lo: u64, hi: u64) {
    if let Err(e) = db_vs_chain(pool, anvil, lo, hi).await {
        panic!("database != node blocks {lo}..={hi}: {e}");
    }
}

/// Polls until the database equals the node's chain `0..=head` (the head
/// read afresh each time), or panics after `limit` with the last difference.
pub async fn wait_db_equals_head(pool: &PgPool, anvil: &Anvil, limit: Duration, what: &str) {
    let deadline = Instant::now() + limit;
    loop {
        let head = anvil.block_number().await;
        let r = db_vs_chain(pool, anvil, 0, head).await;
        match r {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => {
                panic!(
                    "{what}: database did not reach the node's chain 0..={head} in {limit:?}: {e}"
                )
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// A running indexer whose stderr is drained into a buffer (a full pipe
/// would stall it); SIGKILLed on drop if still running.
pub struct Running {
    pub child: Child,
    stderr: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Running {
    pub fn spawn(rpc_url: &str, db_url: &str, args: &[&str]) -> Running {
        let mut child = indexer::spawn(rpc_url, db_url, args);
        let mut pipe = child.stderr.take().expect("piped stderr");
        let stderr = Arc::new(Mutex::new(String::new()));
        let sink = Arc::clone(&stderr);
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Running {
            child,
            stderr,
            reader: Some(reader),
        }
    }

    pub fn stderr(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    pub fn signal(&self, sig: nix::sys::signal::Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig)
            .expect("signal the indexer");
    }

    pub fn try_status(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().expect("try_wait")
    }

    /// Waits for the exit (panics after `limit`), then for stderr's end.
    pub async fn wait(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.try_status() {
                break s;
            }
            assert!(
                Instant::now() < deadline,
                "indexer did not exit within {limit:?}; stderr:\n{}",
                self.stderr()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        status
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// A TCP proxy on 127.0.0.1 to `upstream` (http://host:port) that holds
/// every chunk the client sends for `delay`: a slow node. Returns its URL;
/// it lives as long as the test's runtime.
pub async fn slow_proxy(upstream: &str, delay: Duration) -> String {
    let upstream = upstream.trim_start_matches("http://").to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let up = async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = cr.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        tokio::time::sleep(delay).await;
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = sw.shutdown().await;
                };
                let down = async move {
                    let _ = tokio::io::copy(&mut sr, &mut cw).await;
                    let _ = cw.shutdown().await;
                };
                tokio::join!(up, down);
            });
        }
    });
    url
}

/// Sends a round of every transaction kind (one fee style per sender,
/// type-4 at most once per sender per block) and mines it into one block.
pub async fn mine_every_kind(anvil: &Anvil) -> Vec<String> {
    // A second legacy and 1559 tx from the same senders: several per block.
    let mut hashes = vec![
        anvil.send(1, TxKind::Legacy).await,
        anvil.send(3, TxKind::Eip1559).await,
    ];
    hashes.extend(anvil.send_every_kind().await.into_iter().map(|(h, _)| h));
    hashes.push(
        anvil
            .send(
                0,
                TxKind::Create {
                    initcode: RETURN_42_INITCODE.into(),
                },
            )
            .await,
    );
    anvil.mine().await;
    hashes
}

/// `anvil_mine`: `n` empty blocks at once.
pub async fn mine_empty(anvil: &Anvil, n: u64) {
    anvil.rpc("anvil_mine", json!([format!("{n:#x}")])).await;
}

async fn every_kind_chain() -> Anvil {
    let anvil = Anvil::start_with(AnvilOptions {
        no_mining: true,
        ..Default::default()
    })
    .await;
    let mut sent = Vec::new();
    for _ in 0..3 {
        sent.extend(mine_every_kind(&anvil).await);
        mine_empty(&anvil, 2).await;
    }
    // Every tx really landed (anvil drops some mixed-fee pending txs).
    for h in &sent {
        assert_eq!(anvil.receipt(h).await["status"], "0x1", "tx {h}");
    }
    let head = anvil.block_number().await;
    let mut types = BTreeSet::new();
    let mut creations = 0;
    for b in chain(&anvil, 0, head).await {
        for tx in b["transactions"].as_array().unwrap() {
            types.insert(hex_u64(&tx["type"]));
            creations += usize::from(tx["to"].is_null());
        }
    }
    assert_eq!(types, BTreeSet::from([0, 1, 2, 3, 4]));
    assert_eq!(creations, 3);
    anvil
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_of_every_tx_kind_equals_the_node_and_reruns_change_nothing() {
    let anvil = every_kind_chain().await;
    let head = anvil.block_number().await;
    let (pool, url) = pg::fresh_db().await;
    indexer::run_ok(
        anvil.url(),
        &url,
        &["backfill", "--from", "0", "--to", "latest"],
    );
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    let auths: i64 = sqlx::query_scalar("SELECT count(*) FROM authorizations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(auths, 6, "two type-4 txs in each of three blocks");
    // The self-sponsored authority is the sender; the sponsored one is
    // account 7, not the sender.
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = sqlx::query_as(
        "SELECT t.sender, a.authority FROM authorizations a JOIN transactions t USING (block_number, tx_index)",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let acct = |i: usize| hex::decode(anvil.account(i).0.trim_start_matches("0x")).unwrap();
    for (sender, authority) in &pairs {
        if *sender == acct(5) {
            assert_eq!(*authority, acct(5));
        } else {
            assert_eq!((sender, authority), (&acct(6), &acct(7)));
        }
    }

    let before = snapshot(&pool).await;
    indexer::run_ok(
        anvil.url(),
        &url,
        &["backfill", "--from", "0", "--to", "latest"],
    );
    indexer::run_ok(anvil.url(), &url, &["backfill", "--from", "2", "--to", "5"]);
    assert_eq!(snapshot(&pool).await, before, "a rerun changed rows");
    let reorgs: i64 = sqlx::query_scalar("SELECT count(*) FROM reorgs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(reorgs, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_killed_part_way_then_restarted_equals_a_clean_run() {
    let anvil = every_kind_chain().await;
    mine_empty(&anvil, 400).await;
    mine_every_kind(&anvil).await;
    let head = anvil.block_number().await;
    let to = head.to_string();
    let args = [
        "backfill",
        "--from",
        "0",
        "--to",
        &to,
        "--batch-size",
        "5",
        "--concurrency",
        "1",
    ];

    let (clean_pool, clean_url) = pg::fresh_db().await;
    indexer::run_ok(anvil.url(), &clean_url, &args);
    assert_db_equals_chain(&clean_pool, &anvil, 0, head).await;
    let clean = snapshot(&clean_pool).await;

    let (pool, url) = pg::fresh_db().await;
    // Tables exist before the binary starts, for polling the checkpoint.
    sender_indexer::store::MIGRATOR.run(&pool).await.unwrap();
    // Through a slow proxy, so the kill lands while most of the range is
    // still to fetch.
    let slow = slow_proxy(anvil.url(), Duration::from_millis(10)).await;
    let mut run = Running::spawn(&slow, &url, &args);
    let deadline = Instant::now() + Duration::from_secs(60);
    let killed_at = loop {
        let cp: Option<i64> = sqlx::query_scalar("SELECT block_number FROM checkpoint")
            .fetch_optional(&pool)
            .await
            .unwrap();
        if let Some(cp) = cp.filter(|&c| c > 0) {
            run.signal(nix::sys::signal::Signal::SIGKILL);
            break cp as u64;
        }
        assert!(
            run.try_status().is_none(),
            "backfill ended before it could be killed"
        );
        assert!(Instant::now() < deadline, "checkpoint never moved");
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    let status = run.wait(Duration::from_secs(10)).await;
    assert!(!status.success(), "killed run exited {status}");
    assert!(killed_at < head, "killed at {killed_at}, head {head}");
    // What the killed run left is a consistent prefix of the chain.
    let cp: i64 = sqlx::query_scalar("SELECT block_number FROM checkpoint")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(
        (cp as u64) < head,
        "the kill came too late: checkpoint {cp}"
    );
    assert_db_equals_chain(&pool, &anvil, 0, cp as u64).await;

    indexer::run_ok(anvil.url(), &url, &args);
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert_eq!(snapshot(&pool).await, clean);
}
