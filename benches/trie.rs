//! The ordered trie roots a block commits to (transactions, receipts):
//! the project's builder (`verify::ordered_root`: leaves encoded first and
//! hashed four at a time with AVX2, then the nodes above them) against
//! `alloy-trie`'s `HashBuilder` (reth's, one leaf at a time, XKCP's
//! scalar Keccak), on the same leaves, in one run.
//!
//! The leaves: the signed transactions and the receipt encodings of the
//! five real mainnet blocks whose receipts are in `tests/fixtures/receipts/`
//! (47,218, 483,920, 1,755,635, 17,000,000, 18,000,000), and the signed
//! transactions of the ten recent blocks 24,476,000..=009 (the backfill
//! bench's). Each root is checked against alloy's before anything is
//! timed. Rounds alternate the two builders; each times `BENCH_PASSES`
//! passes over every trie on this thread's CPU clock (`RUSAGE_THREAD`).
//! Printed: medians per leaf, and the ratio.
//!
//! Run: `cargo bench --bench trie`. Knobs: `BENCH_ROUNDS` (default 15),
//! `BENCH_PASSES` (default 20).

mod common;

use sender_indexer::decode::{BloomCache, Receipt, Tx};
use sender_indexer::verify::{ordered_root, receipt_encoding};

fn tx_encodings(block: &serde_json::Value) -> Vec<Vec<u8>> {
    block["transactions"]
        .as_array()
        .expect("full transactions")
        .iter()
        .map(|t| {
            Tx::from_json(&t.to_string())
                .expect("fixture transaction decodes")
                .signed_encoding()
                .expect("fixture transaction encodes")
        })
        .collect()
}

fn main() -> anyhow::Result<()> {
    let rounds = common::env_usize("BENCH_ROUNDS", 15);
    let passes = common::env_usize("BENCH_PASSES", 20);

    // (what, leaves)
    let mut tries: Vec<(String, Vec<Vec<u8>>)> = Vec::new();
    let mut cache = BloomCache::default();
    for (name, block, receipts) in common::fixtures::receipt_sets() {
        tries.push((format!("{name} transactions"), tx_encodings(&block)));
        let encoded = receipts
            .as_array()
            .expect("receipts are a list")
            .iter()
            .map(|r| {
                let r = Receipt::from_json(&r.to_string()).expect("fixture receipt decodes");
                receipt_encoding(&r, &mut cache)
                    .map(|(e, _)| e)
                    .map_err(|f| anyhow::anyhow!("{name}: receipt lacks {f}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        tries.push((format!("{name} receipts"), encoded));
    }
    for block in common::fixtures::recent_mainnet() {
        let n = block["number"].as_str().unwrap_or("?").to_string();
        tries.push((format!("mainnet {n} transactions"), tx_encodings(&block)));
    }
    for (what, leaves) in &tries {
        anyhow::ensure!(
            ordered_root(leaves) == alloy_trie::root::ordered_trie_root_encoded(leaves).0,
            "{what}: the roots differ"
        );
    }
    let leaves: usize = tries.iter().map(|(_, l)| l.len()).sum();
    let bytes: usize = tries.iter().flat_map(|(_, l)| l).map(Vec::len).sum();
    println!(
        "trie bench: {} tries, {leaves} leaves, {:.0} bytes per leaf; {rounds} rounds x {passes} passes, alternating",
        tries.len(),
        bytes as f64 / leaves as f64
    );

    let mut ours = Vec::new();
    let mut alloy = Vec::new();
    let mut sink = 0u8;
    for round in 0..=rounds {
        for which in 0..2 {
            let t0 = common::thread_cpu_secs();
            for _ in 0..passes {
                for (_, l) in &tries {
                    sink ^= if which == 0 {
                        ordered_root(l)[0]
                    } else {
                        alloy_trie::root::ordered_trie_root_encoded(l).0[0]
                    };
                }
            }
            let ns = (common::thread_cpu_secs() - t0) * 1e9 / (passes * leaves) as f64;
            // Round 0 warms the caches and is not counted.
            if round > 0 {
                [&mut ours, &mut alloy][which].push(ns);
            }
        }
    }
    let (o, a) = (common::median(ours), common::median(alloy));
    println!("| builder | CPU ns per leaf (median) |");
    println!("|---|---|");
    println!("| verify::ordered_root (ours) | {o:.0} |");
    println!("| alloy-trie HashBuilder | {a:.0} |");
    println!("ours / alloy: {:.2} (checksum {sink})", o / a);
    Ok(())
}
