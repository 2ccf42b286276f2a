//! Fuzzing on the stable toolchain with proptest, for a fixed budget: the
//! JSON block reader (`split_block`, and the whole per-block path
//! `check_block_text`), the transaction decoder (`Tx::from_json`, whose
//! one-pass reader falls back to serde_json) and the signing-payload
//! builder (`signing_hash`, `signed_encoding`) with recovery behind it.
//! Inputs are real fixture blocks and transactions mutated byte by byte
//! and field by field, plus transactions built from arbitrary field
//! values. The property is that nothing panics; each target also checks
//! what must hold of what it accepts.
//!
//! Budget: `FUZZ_CASES` cases per target (default 300, a few seconds
//! each); `scripts/fuzz.sh` runs a long one. A failing input is shrunk and
//! saved by proptest under `tests/it/proptest-regressions/`, which is
//! committed, so it is tried first on every later run.

use std::sync::OnceLock;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use sender_indexer::decode::{Tx, split_block};
use sender_indexer::pipeline::check_block_text;
use sender_indexer::recover::recover_tx;
use serde_json::{Value, json};

use crate::support::fixtures;

fn config() -> Config {
    let cases = std::env::var("FUZZ_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(300);
    Config {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel(
            "proptest-regressions",
        ))),
        ..Config::default()
    }
}

fn block_texts() -> &'static [String] {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        fixtures::blocks()
            .into_iter()
            .filter(|(name, _)| {
                [
                    "mainnet-1000000",
                    "mainnet-16000004",
                    "mainnet-19900000",
                    "mainnet-24476003",
                ]
                .iter()
                .any(|n| name.starts_with(n))
            })
            .map(|(_, b)| b.to_string())
            .collect()
    })
}

fn tx_texts() -> &'static [String] {
    static TEXTS: OnceLock<Vec<String>> = OnceLock::new();
    TEXTS.get_or_init(|| {
        fixtures::transactions()
            .into_iter()
            .map(|t| t.line)
            .collect()
    })
}

/// One edit of a text: bytes replaced, inserted or deleted at a place.
#[derive(Debug, Clone)]
enum Edit {
    Replace(usize, Vec<u8>),
    Insert(usize, Vec<u8>),
    Delete(usize, usize),
}

/// Bytes that matter to JSON and hex readers, and any byte at all.
fn interesting_bytes() -> impl Strategy<Value = Vec<u8>> {
    let one = prop_oneof![
        Just(b'"'),
        Just(b'\\'),
        Just(b'{'),
        Just(b'}'),
        Just(b'['),
        Just(b']'),
        Just(b','),
        Just(b':'),
        Just(b'0'),
        Just(b'x'),
        Just(b'f'),
        Just(b'-'),
        Just(b' '),
        any::<u8>(),
    ];
    prop::collection::vec(one, 1..6)
}

fn edits() -> impl Strategy<Value = Vec<Edit>> {
    let edit = prop_oneof![
        (any::<usize>(), interesting_bytes()).prop_map(|(at, b)| Edit::Replace(at, b)),
        (any::<usize>(), interesting_bytes()).prop_map(|(at, b)| Edit::Insert(at, b)),
        (any::<usize>(), 1..40usize).prop_map(|(at, n)| Edit::Delete(at, n)),
    ];
    prop::collection::vec(edit, 1..4)
}

/// `text` with `edits` applied, made valid UTF-8 again (the readers take
/// `&str`; the rpc stage refuses bytes that are not UTF-8 before them).
fn apply(text: &str, edits: &[Edit]) -> String {
    let mut b = text.as_bytes().to_vec();
    for e in edits {
        match e {
            Edit::Replace(at, new) => {
                let at = at % b.len().max(1);
                let end = (at + new.len()).min(b.len());
                b.splice(at..end, new.iter().copied());
            }
            Edit::Insert(at, new) => {
                let at = at % (b.len() + 1);
                b.splice(at..at, new.iter().copied());
            }
            Edit::Delete(at, n) => {
                let at = at % b.len().max(1);
                let end = (at + n).min(b.len());
                b.drain(at..end);
            }
        }
    }
    String::from_utf8_lossy(&b).into_owned()
}

/// What the decoder must hold of an accepted transaction: its payloads
/// build or refuse without panicking, the same each time, and recovery
/// agrees with itself.
fn exercise(tx: &Tx) {
    let hash = tx.signing_hash();
    assert_eq!(hash, tx.signing_hash(), "signing hash is deterministic");
    if let Ok(enc) = tx.signed_encoding() {
        if tx.tx_type != 0 {
            assert_eq!(enc.first(), Some(&tx.tx_type), "typed envelope");
        }
    }
    let a = recover_tx(tx);
    let b = recover_tx(tx);
    assert_eq!(a.sender.is_ok(), b.sender.is_ok());
}

#[test]
fn fuzz_the_block_reader_with_mutated_real_blocks() {
    let texts = block_texts();
    assert_eq!(texts.len(), 4);
    proptest!(config(), |(which in 0..texts.len(), e in edits())| {
        let text = apply(&texts[which], &e);
        if let Ok((header, ranges)) = split_block(&text) {
            // Every range it hands out lies inside the text, in order.
            let mut end = 0;
            for r in &ranges {
                prop_assert!(r.start >= end && r.end <= text.len() && r.start <= r.end);
                end = r.end;
            }
            let _ = header.number;
        }
        let _ = check_block_text(&text, None);
    });
}

#[test]
fn fuzz_the_transaction_decoder_with_mutated_real_transactions() {
    let texts = tx_texts();
    assert!(texts.len() > 4000);
    proptest!(config(), |(which in 0..texts.len(), e in edits())| {
        let text = apply(&texts[which], &e);
        if let Ok(tx) = Tx::from_json(&text) {
            exercise(&tx);
        }
    });
}

/// A value a node might send for a transaction field: quantities of any
/// length, data, lists, and the wrong shapes.
fn field_value() -> impl Strategy<Value = Value> {
    let hex = |max: usize| {
        prop::collection::vec(any::<u8>(), 0..max)
            .prop_map(|b| json!(format!("0x{}", hex::encode(b))))
    };
    let quantity = (0u32..=80).prop_flat_map(|digits| {
        prop::collection::vec(prop::char::range('0', '9'), digits as usize)
            .prop_map(|d| json!(format!("0x{}", d.into_iter().collect::<String>())))
    });
    let access = prop::collection::vec(
        (hex(24), prop::collection::vec(hex(36), 0..3))
            .prop_map(|(a, keys)| json!({"address": a, "storageKeys": keys})),
        0..3,
    )
    .prop_map(Value::Array);
    let auth = prop::collection::vec(
        (hex(12), hex(24), hex(12), hex(3), hex(40), hex(40)).prop_map(|(c, a, n, y, r, s)| {
            json!({"chainId": c, "address": a, "nonce": n, "yParity": y, "r": r, "s": s})
        }),
        0..3,
    )
    .prop_map(Value::Array);
    prop_oneof![
        4 => quantity,
        3 => hex(70),
        1 => access,
        1 => auth,
        1 => Just(Value::Null),
        1 => any::<i64>().prop_map(|n| json!(n)),
        1 => ".{0,12}".prop_map(|s: String| json!(s)),
    ]
}

const TX_FIELDS: &[&str] = &[
    "type",
    "chainId",
    "nonce",
    "gasPrice",
    "maxPriorityFeePerGas",
    "maxFeePerGas",
    "maxFeePerBlobGas",
    "gas",
    "to",
    "value",
    "input",
    "accessList",
    "blobVersionedHashes",
    "authorizationList",
    "v",
    "yParity",
    "r",
    "s",
    "hash",
    "from",
];

#[test]
fn fuzz_the_signing_payload_builder_with_arbitrary_fields() {
    let tx_type = prop_oneof![Just(0u8), Just(1), Just(2), Just(3), Just(4), any::<u8>()];
    let fields = prop::collection::vec(prop::option::of(field_value()), TX_FIELDS.len());
    proptest!(config(), |(t in tx_type, values in fields)| {
        let mut obj = serde_json::Map::new();
        obj.insert("type".into(), json!(format!("0x{t:x}")));
        for (key, v) in TX_FIELDS.iter().zip(values) {
            if let Some(v) = v {
                obj.insert((*key).into(), v);
            }
        }
        let text = Value::Object(obj).to_string();
        if let Ok(tx) = Tx::from_json(&text) {
            exercise(&tx);
        }
    });
}
