//! The database against a real node: a comparable snapshot of every stored
//! row, and the exact comparison of the database with anvil's canonical
//! chain that the `backfill` and `follow` tests assert.

#![allow(dead_code)] // shared helpers: not every test module uses each one

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use serde_json::Value;
use sqlx::PgPool;

use super::anvil::{Anvil, hex_u64};

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
        "SELECT ARRAY[block_number::text, tx_index::text, encode(hash, 'hex'), tx_type::text, encode(sender, 'hex'), encode(node_from, 'hex'), from_matches::text, encode(to_address, 'hex'), nonce::text, value::text, error, sender_source] FROM transactions ORDER BY block_number, tx_index",
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
            // A recovered sender is compared with the node's `from`; a
            // committed one (OP deposits) is the `from` its hash commits to,
            // so there is nothing to compare (from_matches NULL).
            let compared = match c(11).as_str() {
                "recovered" => c(6) == "true",
                "committed" => r[6].is_none(),
                _ => false,
            };
            if !compared || r[10].is_some() || c(4) != c(5) {
                return Err(format!(
                    "tx row {r:?}: sender not recovered or committed, or not equal to node_from"
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
