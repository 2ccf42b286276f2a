//! Fuzzing on the stable toolchain with proptest, for a fixed budget: the
//! JSON block reader (`split_block`, and the whole per-block path
//! `check_block_text`), the transaction decoder (`Tx::from_json`, whose
//! one-pass reader falls back to serde_json) and the signing-payload
//! builder (`signing_hash`, `signed_encoding`) with recovery behind it.
//! Inputs are real fixture blocks and transactions mutated byte by byte
//! and field by field, plus transactions built from arbitrary field
//! values. The property is that nothing panics; each target also checks
//! what must hold of what it accepts, and counts how many of its cases got
//! past decoding: a target whose inputs are all refused at the first byte
//! would test nothing, so each asserts a floor on that share.
//!
//! Budget: `FUZZ_CASES` cases per target (default 300, a few seconds
//! each); `scripts/fuzz.sh` runs a long one. A failing input is shrunk and
//! saved by proptest under `tests/it/proptest-regressions/`, which is
//! committed, so it is tried first on every later run.

use std::sync::OnceLock;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use sender_indexer::decode::{Tx, split_block};
use sender_indexer::recover::recover_tx;
use sender_indexer::testing::check_block_text;
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

thread_local! {
    /// Cases a target ran and cases that got past decoding, on this test's
    /// thread (each test runs on its own).
    static CASES: AtomicUsize = const { AtomicUsize::new(0) };
    static ACCEPTED: AtomicUsize = const { AtomicUsize::new(0) };
}

/// Asserts that at least `min_percent` of the cases this thread ran got
/// past decoding, and says how many did.
fn assert_share(target: &str, min_percent: usize) {
    let cases = CASES.with(|c| c.load(Relaxed));
    let accepted = ACCEPTED.with(|a| a.load(Relaxed));
    eprintln!("{target}: {accepted} of {cases} cases got past decoding");
    assert!(cases > 0, "{target}: no case ran");
    assert!(
        accepted * 100 >= cases * min_percent,
        "{target}: only {accepted} of {cases} cases got past decoding (floor {min_percent}%): the generator no longer reaches the code behind the decoder"
    );
}

/// Floors, in percent, on the share of cases that get past decoding. At
/// 300 cases the targets measured 33-40% (block reader), 32-35%
/// (transaction decoder) and 44% (signing payload builder); before the
/// field-level cases, the last got 0 of 300 and tested nothing.
const BLOCK_FLOOR: usize = 15;
const TX_FLOOR: usize = 15;
const FIELDS_FLOOR: usize = 20;

fn count_case() {
    CASES.with(|c| c.fetch_add(1, Relaxed));
}

/// What the decoder must hold of an accepted transaction: its payloads
/// build or refuse without panicking, the same each time, and recovery
/// agrees with itself.
fn exercise(tx: &Tx) {
    ACCEPTED.with(|a| a.fetch_add(1, Relaxed));
    let hash = tx.signing_hash();
    assert_eq!(hash, tx.signing_hash(), "signing hash is deterministic");
    if let Ok(enc) = tx.signed_encoding()
        && tx.tx_type != 0
    {
        assert_eq!(enc.first(), Some(&tx.tx_type), "typed envelope");
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
        count_case();
        let text = apply(&texts[which], &e);
        if let Ok((header, ranges)) = split_block(&text) {
            ACCEPTED.with(|a| a.fetch_add(1, Relaxed));
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
    assert_share("block reader", BLOCK_FLOOR);
}

#[test]
fn fuzz_the_transaction_decoder_with_mutated_real_transactions() {
    let texts = tx_texts();
    assert!(texts.len() > 4000);
    // Half the cases edit bytes (mostly refused by the JSON or hex
    // readers), half replace or drop one field with a well-formed JSON
    // value (mostly reaching the signing payloads and recovery).
    let case = prop_oneof![
        edits().prop_map(TxEdit::Bytes),
        (
            0..TX_FIELDS.len(),
            prop::option::weighted(0.8, any_field_value())
        )
            .prop_map(|(k, v)| TxEdit::Field(TX_FIELDS[k], v)),
    ];
    proptest!(config(), |(which in 0..texts.len(), e in case)| {
        count_case();
        let text = match &e {
            TxEdit::Bytes(e) => apply(&texts[which], e),
            TxEdit::Field(key, v) => {
                let mut obj: serde_json::Map<String, Value> =
                    serde_json::from_str(&texts[which]).expect("fixture is JSON");
                match v {
                    Some(v) => obj.insert((*key).into(), v.clone()),
                    None => obj.remove(*key),
                };
                Value::Object(obj).to_string()
            }
        };
        if let Ok(tx) = Tx::from_json(&text) {
            exercise(&tx);
        }
    });
    assert_share("transaction decoder", TX_FLOOR);
}

/// One change to a real transaction's text.
#[derive(Debug, Clone)]
enum TxEdit {
    Bytes(Vec<Edit>),
    /// The field set to a value, or removed.
    Field(&'static str, Option<Value>),
}

/// A well-formed value for transaction field `key`, of any size its type
/// allows.
fn valid_field_value(key: &str) -> BoxedStrategy<Value> {
    let bytes = |n: usize| {
        prop::collection::vec(any::<u8>(), n..=n)
            .prop_map(|b| json!(format!("0x{}", hex::encode(b))))
    };
    let quantity = any::<u64>().prop_map(|n| json!(format!("0x{n:x}")));
    match key {
        "to" | "from" => bytes(20).boxed(),
        "r" | "s" | "hash" => bytes(32).boxed(),
        "type" => (0u64..=4).prop_map(|n| json!(format!("0x{n:x}"))).boxed(),
        "v" | "yParity" => (0u64..=40).prop_map(|n| json!(format!("0x{n:x}"))).boxed(),
        "input" => prop::collection::vec(any::<u8>(), 0..200)
            .prop_map(|b| json!(format!("0x{}", hex::encode(b))))
            .boxed(),
        "accessList" => prop::collection::vec(
            (bytes(20), prop::collection::vec(bytes(32), 0..3))
                .prop_map(|(a, keys)| json!({"address": a, "storageKeys": keys})),
            0..3,
        )
        .prop_map(Value::Array)
        .boxed(),
        "blobVersionedHashes" => prop::collection::vec(bytes(32), 0..3)
            .prop_map(Value::Array)
            .boxed(),
        "authorizationList" => prop::collection::vec(
            (quantity.clone(), bytes(20), quantity.clone(), 0u8..=1, bytes(32), bytes(32)).prop_map(
                |(c, a, n, y, r, s)| {
                    json!({"chainId": c, "address": a, "nonce": n, "yParity": format!("0x{y:x}"), "r": r, "s": s})
                },
            ),
            0..3,
        )
        .prop_map(Value::Array)
        .boxed(),
        _ => quantity.boxed(),
    }
}

/// A value for any field: well formed for some field, or malformed.
fn any_field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        2 => valid_field_value("r"),
        2 => valid_field_value("to"),
        2 => valid_field_value("nonce"),
        1 => valid_field_value("input"),
        1 => valid_field_value("accessList"),
        1 => valid_field_value("authorizationList"),
        1 => field_value(),
    ]
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
    // Each field present nine times in ten, well formed for its key seven
    // times in eight: enough whole transactions get past decoding to reach
    // the payload builders and recovery.
    let fields: Vec<_> = TX_FIELDS
        .iter()
        .map(|k| {
            prop::option::weighted(
                0.97,
                prop_oneof![15 => valid_field_value(k), 1 => field_value().boxed()],
            )
        })
        .collect();
    proptest!(config(), |(t in tx_type, values in fields)| {
        let mut obj = serde_json::Map::new();
        obj.insert("type".into(), json!(format!("0x{t:x}")));
        for (key, v) in TX_FIELDS.iter().zip(values) {
            if let Some(v) = v {
                obj.insert((*key).into(), v);
            }
        }
        count_case();
        let text = Value::Object(obj).to_string();
        if let Ok(tx) = Tx::from_json(&text) {
            exercise(&tx);
        }
    });
    assert_share("signing payload builder", FIELDS_FLOOR);
}
