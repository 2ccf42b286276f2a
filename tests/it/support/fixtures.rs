//! Loads the real-chain fixtures in `tests/fixtures/` (see its README for
//! provenance). Test and benchmark support (the benches include this file
//! by path): nothing here decides an outcome.

use std::io::Read;
use std::path::PathBuf;

use serde_json::Value;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn gunzip(path: &PathBuf) -> String {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut s = String::new();
    flate2::read::GzDecoder::new(file)
        .read_to_string(&mut s)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    s
}

/// One fixture transaction: where it came from and its JSON-RPC object.
pub struct FixtureTx {
    pub network: String,
    pub tx: Value,
    /// The raw JSON text of `tx`, as the `recover` command reads it.
    pub line: String,
}

/// All 4,492 fixture transactions.
pub fn transactions() -> Vec<FixtureTx> {
    gunzip(&dir().join("transactions.jsonl.gz"))
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("fixture line is JSON");
            FixtureTx {
                network: v["network"].as_str().unwrap_or("?").to_string(),
                line: v["tx"].to_string(),
                tx: v["tx"].clone(),
            }
        })
        .collect()
}

/// The 42 whole blocks, as `(file stem, block object)`, sorted by name.
pub fn blocks() -> Vec<(String, Value)> {
    let mut out: Vec<_> = std::fs::read_dir(dir().join("blocks"))
        .expect("tests/fixtures/blocks")
        .map(|e| e.unwrap().path())
        .map(|p| {
            let name = p
                .file_name()
                .unwrap()
                .to_string_lossy()
                .replace(".json.gz", "");
            (
                name,
                serde_json::from_str(&gunzip(&p)).expect("block is JSON"),
            )
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The ten consecutive recent mainnet blocks 24,476,000..=24,476,009, in order.
pub fn recent_mainnet() -> Vec<Value> {
    (24_476_000..=24_476_009)
        .map(|n| {
            let path = dir().join(format!("blocks/mainnet-{n}.json.gz"));
            serde_json::from_str(&gunzip(&path)).expect("block is JSON")
        })
        .collect()
}

/// A gzip-compressed JSON fixture, by its path under `tests/fixtures/`.
pub fn json(path: &str) -> Value {
    serde_json::from_str(&gunzip(&dir().join(path))).expect("fixture is JSON")
}

/// The five real receipt sets, as `(block name, block, receipts)`.
pub fn receipt_sets() -> Vec<(&'static str, Value, Value)> {
    let blocks = blocks();
    [
        "mainnet-47218",
        "mainnet-483920",
        "mainnet-1755635",
        "mainnet-17000000",
        "mainnet-18000000",
    ]
    .into_iter()
    .map(|name| {
        let block = blocks.iter().find(|(n, _)| n == name).unwrap().1.clone();
        (name, block, json(&format!("receipts/{name}.json.gz")))
    })
    .collect()
}
