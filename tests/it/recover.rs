//! Sender and authority recovery on the real fixture transactions, each
//! node quirk, and each error case.

use std::collections::BTreeMap;

use k256::ecdsa::{RecoveryId as KRecoveryId, Signature as KSignature, VerifyingKey};
use serde_json::{Value, json};
use sha3::{Digest, Keccak256};

use sender_indexer::block::BlockTx;
use sender_indexer::decode::DecodeError;
use sender_indexer::decode::split_block;
use sender_indexer::decode::{Tx, U256, hex0x, parse_u256};
use sender_indexer::recover::{RecoverError, recover_slices, recover_tx};

use crate::support::fixtures;

fn sender_of(v: &Value) -> Result<String, RecoverError> {
    let tx = Tx::from_value(v).expect("fixture decodes");
    recover_tx(&tx).sender.map(|a| hex0x(&a))
}

/// What the pipeline does with a block's text: split it, then decode and
/// recover every transaction slice.
fn recover_block(block: &Value) -> Vec<Result<BlockTx, DecodeError>> {
    let text = block.to_string();
    let (_, ranges) = split_block(&text).expect("block splits");
    recover_slices(&text, &ranges)
}

fn from_of(v: &Value) -> String {
    v["from"].as_str().unwrap().to_lowercase()
}

fn type_of(v: &Value) -> u64 {
    v.get("type")
        .and_then(Value::as_str)
        .map_or(0, |t| u64::from_str_radix(&t[2..], 16).unwrap())
}

fn is_pre155(v: &Value) -> bool {
    type_of(v) == 0 && matches!(v["v"].as_str(), Some("0x1b") | Some("0x1c"))
}

#[test]
fn every_fixture_sender_equals_the_verified_from() {
    let txs = fixtures::transactions();
    assert_eq!(txs.len(), 4492);
    // (type, pre-155) -> (recovered == from, total)
    let mut per_kind: BTreeMap<(u64, bool), (usize, usize)> = BTreeMap::new();
    let mut failures = Vec::new();
    for f in &txs {
        let entry = per_kind
            .entry((type_of(&f.tx), is_pre155(&f.tx)))
            .or_default();
        entry.1 += 1;
        match sender_of(&f.tx) {
            Ok(s) if s == from_of(&f.tx) => entry.0 += 1,
            other => failures.push(format!("{} {}: {other:?}", f.network, f.tx["hash"])),
        }
    }
    for ((ty, pre155), (ok, total)) in &per_kind {
        println!(
            "type {ty}{}: {ok}/{total}",
            if *pre155 { " pre-155" } else { "" }
        );
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // Every kind the fixtures promise is really exercised.
    for kind in [
        (0, true),
        (0, false),
        (1, false),
        (2, false),
        (3, false),
        (4, false),
    ] {
        assert!(per_kind.contains_key(&kind), "no fixture of kind {kind:?}");
    }
    assert_eq!(per_kind[&(0, true)].1, 33);
}

#[test]
fn every_transaction_of_every_whole_block_recovers() {
    let mut checked = 0;
    for (name, block) in fixtures::blocks() {
        let txs = block["transactions"].as_array().unwrap();
        for (i, r) in recover_block(&block).into_iter().enumerate() {
            let r = r.unwrap_or_else(|e| panic!("{name} tx {i}: {e}"));
            let sender = r
                .recovered
                .sender
                .unwrap_or_else(|e| panic!("{name} tx {i}: {e}"));
            assert_eq!(hex0x(&sender), from_of(&txs[i]), "{name} tx {i}");
            checked += 1;
        }
    }
    assert!(checked > 2000, "only {checked} block transactions");
}

/// rlp of a short list of byte strings (enough for an authorization tuple),
/// written here independently of the crate's encoder.
fn rlp_short_list(items: &[&[u8]]) -> Vec<u8> {
    let mut payload = Vec::new();
    for item in items {
        match item {
            [b] if *b < 0x80 => payload.push(*b),
            _ => {
                assert!(item.len() < 56);
                payload.push(0x80 + item.len() as u8);
                payload.extend_from_slice(item);
            }
        }
    }
    assert!(payload.len() < 56);
    let mut out = vec![0xc0 + payload.len() as u8];
    out.extend(payload);
    out
}

fn minimal_be(hex_quantity: &str) -> Vec<u8> {
    let digits = hex_quantity
        .trim_start_matches("0x")
        .trim_start_matches('0');
    let padded = if digits.len() % 2 == 1 {
        format!("0{digits}")
    } else {
        digits.to_string()
    };
    hex::decode(padded).unwrap()
}

/// The authority of one JSON authorization, by k256 (a second, pure-Rust
/// secp256k1 implementation) over an independently encoded payload.
fn independent_authority(a: &Value) -> String {
    let address = hex::decode(&a["address"].as_str().unwrap()[2..]).unwrap();
    let chain_id = minimal_be(a["chainId"].as_str().unwrap());
    let nonce = minimal_be(a["nonce"].as_str().unwrap());
    let mut preimage = vec![0x05];
    preimage.extend(rlp_short_list(&[&chain_id, &address, &nonce]));
    let digest = Keccak256::digest(&preimage);
    let parity = a
        .get("yParity")
        .or(a.get("v"))
        .and_then(Value::as_str)
        .unwrap();
    let parity = u8::try_from(u64::from_str_radix(&parity[2..], 16).unwrap()).unwrap();
    let mut rs = [0u8; 64];
    let r = minimal_be(a["r"].as_str().unwrap());
    let s = minimal_be(a["s"].as_str().unwrap());
    rs[32 - r.len()..32].copy_from_slice(&r);
    rs[64 - s.len()..].copy_from_slice(&s);
    let sig = KSignature::from_slice(&rs).unwrap();
    let key =
        VerifyingKey::recover_from_prehash(&digest, &sig, KRecoveryId::from_byte(parity).unwrap())
            .unwrap();
    let point = key.to_encoded_point(false);
    let hash = Keccak256::digest(&point.as_bytes()[1..]);
    hex0x(&hash[12..])
}

#[test]
fn eip7702_authorities_match_an_independent_computation() {
    let mut checked = 0;
    let mut five = false;
    for f in fixtures::transactions()
        .into_iter()
        .filter(|f| type_of(&f.tx) == 4)
    {
        let tx = Tx::from_value(&f.tx).unwrap();
        let got = recover_tx(&tx);
        let list = f.tx["authorizationList"].as_array().unwrap();
        assert_eq!(got.authorities.len(), list.len());
        five |= list.len() == 5;
        for (a, ours) in list.iter().zip(&got.authorities) {
            let ours = ours.as_ref().map(|x| hex0x(x)).expect("authority recovers");
            assert_eq!(ours, independent_authority(a), "tx {}", f.tx["hash"]);
            checked += 1;
        }
    }
    assert_eq!(checked, 16, "authorization tuples in the fixtures");
    assert!(five, "the 5-authorization tx is covered");
}

fn find(pred: impl Fn(&Value) -> bool) -> Vec<Value> {
    let found: Vec<_> = fixtures::transactions()
        .into_iter()
        .map(|f| f.tx)
        .filter(|t| pred(t))
        .collect();
    assert!(!found.is_empty(), "the fixtures hold no such transaction");
    found
}

fn assert_all_recover(txs: &[Value]) {
    for t in txs {
        assert_eq!(sender_of(t).as_deref(), Ok(from_of(t).as_str()), "{t}");
    }
}

#[test]
fn quirk_legacy_chain_id_field_is_ignored_for_pre155() {
    // As found: pre-155 txs carrying chainId 0x0, a real id, or null.
    assert_all_recover(&find(|t| is_pre155(t) && t.get("chainId").is_some()));
    // Synthetic: every variant of that field on one pre-155 tx.
    let base = find(is_pre155).remove(0);
    for chain_id in [json!("0x0"), json!("0x1"), json!("0x539"), Value::Null] {
        let mut t = base.clone();
        t["chainId"] = chain_id;
        assert_all_recover(&[t]);
    }
    let mut t = base.clone();
    t.as_object_mut().unwrap().remove("chainId");
    t.as_object_mut().unwrap().remove("type");
    assert_all_recover(&[t]);
}

#[test]
fn quirk_missing_type_field_and_parity_null_chain_id() {
    assert_all_recover(&find(|t| t.get("type").is_none()));
    assert_all_recover(&find(|t| t.get("chainId") == Some(&Value::Null)));
}

#[test]
fn quirk_stripped_and_padded_scalars() {
    let stripped =
        find(|t| t["r"].as_str().unwrap().len() < 66 || t["s"].as_str().unwrap().len() < 66);
    assert!(stripped.len() > 700, "{} stripped", stripped.len());
    assert_all_recover(&stripped);
    // Zero-pad them to 32 bytes and beyond: same sender.
    for t in stripped.iter().take(50) {
        let mut t = t.clone();
        for k in ["r", "s"] {
            let digits = t[k].as_str().unwrap()[2..].to_string();
            t[k] = json!(format!("0x{digits:0>64}"));
        }
        assert_all_recover(&[t]);
    }
}

#[test]
fn quirk_typed_v_without_y_parity() {
    assert_all_recover(&find(|t| type_of(t) > 0 && t.get("yParity").is_none()));
    // And synthetically: drop yParity from typed txs that had both.
    for t in find(|t| type_of(t) > 0 && t.get("yParity").is_some())
        .iter()
        .take(50)
    {
        let mut t = t.clone();
        t.as_object_mut().unwrap().remove("yParity");
        assert_all_recover(&[t]);
    }
}

#[test]
fn quirk_huge_legacy_v_and_creations_and_blobs() {
    // The hive chain id 0xc72dd9d5e883e puts v near 7e15: past 2^52, where
    // a float-based JSON decoder would start to lose it.
    let huge = find(|t| {
        type_of(t) == 0
            && parse_u256("v", t["v"].as_str().unwrap()).unwrap() > U256::from_u64(1 << 52)
    });
    assert!(huge.len() >= 20, "{}", huge.len());
    assert_all_recover(&huge);
    assert_all_recover(&find(|t| t["to"].is_null()));
    let blobs = find(|t| type_of(t) == 3);
    let counts: std::collections::BTreeSet<_> = blobs
        .iter()
        .map(|t| t["blobVersionedHashes"].as_array().unwrap().len())
        .collect();
    assert!(counts.contains(&1) && counts.contains(&6), "{counts:?}");
    assert_all_recover(&blobs);
}

#[test]
fn legacy_v_beyond_2_pow_53_and_beyond_64_bits() {
    // No real tx has such a chain id, so sign one here with k256 and check
    // that our recovery finds k256's address.
    let key = k256::ecdsa::SigningKey::from_slice(&[0x42; 32]).unwrap();
    let point = key.verifying_key().to_encoded_point(false);
    let expected = hex0x(&Keccak256::digest(&point.as_bytes()[1..])[12..]);
    for chain_id_hex in ["1000000000000000", "123456789abcdef0123"] {
        let chain_id = parse_u256("chainId", &format!("0x{chain_id_hex}")).unwrap();
        let mut tx = Tx {
            nonce: Some(7),
            gas_price: Some(U256::from_u64(1_000_000_000)),
            gas: Some(U256::from_u64(21_000)),
            to: Some([0x11; 20]),
            value: Some(U256::from_u64(5)),
            // v only needs to select EIP-155 with this chain id for hashing.
            v: Some(times_two_plus(&chain_id, 35)),
            ..Tx::default()
        };
        let hash = tx.signing_hash().unwrap();
        let (sig, recid) = key.sign_prehash_recoverable(&hash).unwrap();
        let bytes = sig.to_bytes();
        tx.r = Some(U256(bytes[..32].try_into().unwrap()));
        tx.s = Some(U256(bytes[32..].try_into().unwrap()));
        tx.v = Some(times_two_plus(&chain_id, 35 + recid.to_byte() as u64));
        assert!(tx.v.unwrap() > U256::from_u64(1 << 53));
        let got = recover_tx(&tx).sender.map(|a| hex0x(&a));
        assert_eq!(
            got.as_deref(),
            Ok(expected.as_str()),
            "chain id 0x{chain_id_hex}"
        );
    }
}

/// 2·x + k, on 256-bit big-endian numbers (x well below 2^255).
fn times_two_plus(x: &U256, k: u64) -> U256 {
    let mut out = [0u8; 32];
    let mut carry = 0u16;
    for i in (0..32).rev() {
        let v = (x.0[i] as u16) * 2 + carry;
        out[i] = v as u8;
        carry = v >> 8;
    }
    let mut add = k as u128;
    for i in (0..32).rev() {
        let v = out[i] as u128 + (add & 0xff);
        out[i] = v as u8;
        add = (add >> 8) + (v >> 8);
    }
    U256(out)
}

/// n - s on 32-byte big-endian numbers.
fn curve_order_minus(s: &str) -> String {
    let n =
        hex::decode("fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141").unwrap();
    let s = parse_u256("s", s).unwrap().0;
    let mut out = [0u8; 32];
    let mut borrow = 0i16;
    for i in (0..32).rev() {
        let d = n[i] as i16 - s[i] as i16 - borrow;
        borrow = (d < 0) as i16;
        out[i] = (d + 256 * borrow) as u8;
    }
    hex0x(&out)
}

#[test]
fn high_s_signatures_recover_as_before_homestead() {
    // (r, n - s) with the other parity is the same signer: the malleable
    // twin that Homestead outlawed for new txs but that old blocks hold.
    let t = find(is_pre155).remove(0);
    let mut twin = t.clone();
    twin["s"] = json!(curve_order_minus(t["s"].as_str().unwrap()));
    twin["v"] = json!(if t["v"] == "0x1b" { "0x1c" } else { "0x1b" });
    assert_ne!(twin["s"], t["s"]);
    assert_all_recover(&[twin]);
}

/// Whether an error is the one a case expects.
type Expect = fn(&RecoverError) -> bool;

#[test]
fn unrecoverable_signatures_give_typed_errors() {
    let base = find(|t| type_of(t) == 2).remove(0);
    let n = "0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141";
    let cases: Vec<(&str, Value, Expect)> = vec![
        ("r zero", json!({"r": "0x0"}), |e| {
            *e == RecoverError::Zero("r")
        }),
        ("s zero", json!({"s": "0x"}), |e| {
            *e == RecoverError::Zero("s")
        }),
        ("s = n", json!({"s": n}), |e| {
            *e == RecoverError::OutOfRange("s")
        }),
        ("r = n", json!({"r": n}), |e| {
            *e == RecoverError::OutOfRange("r")
        }),
        ("yParity 2", json!({"yParity": "0x2", "v": "0x2"}), |e| {
            matches!(e, RecoverError::InvalidParity(_))
        }),
        ("no r", json!({"r": null}), |e| {
            *e == RecoverError::MissingSignature("r")
        }),
        ("deposit", json!({"type": "0x7e"}), |e| {
            e.to_string().contains("0x7e")
        }),
        ("type 5", json!({"type": "0x5"}), |e| {
            e.to_string().contains("unsupported")
        }),
        ("no chainId", json!({"chainId": null}), |e| {
            e.to_string().contains("chainId")
        }),
        (
            "legacy v 1",
            json!({"type": "0x0", "v": "0x1", "gasPrice": "0x1"}),
            |e| matches!(e, RecoverError::InvalidV(_)),
        ),
    ];
    for (name, patch, expected) in cases {
        let mut t = base.clone();
        for (k, v) in patch.as_object().unwrap() {
            t[k] = v.clone();
        }
        let err = sender_of(&t).expect_err(name);
        assert!(expected(&err), "{name}: {err}");
    }
}

#[test]
fn a_bad_transaction_never_stops_its_neighbours() {
    let good = find(|t| type_of(t) == 2).remove(0);
    let mut bad_sig = good.clone();
    bad_sig["r"] = json!("0x0");
    let bad_hex = json!({"hash": good["hash"], "nonce": "0xnope"});
    let deposit = json!({
        "type": "0x7e", "hash": good["hash"], "from": good["from"], "to": good["to"],
        "sourceHash": good["hash"], "mint": "0x0", "value": "0x0", "gas": "0xf4240",
        "isSystemTx": false, "input": "0x", "nonce": "0x1", "v": "0x0", "r": "0x0", "s": "0x0"
    });
    let block = json!({
        "number": "0x1", "hash": good["hash"], "parentHash": good["hash"], "timestamp": "0x1",
        "transactions": [good.clone(), bad_sig, bad_hex, deposit, good.clone()],
    });
    let out = recover_block(&block);
    assert!(out[0].as_ref().unwrap().recovered.sender.is_ok());
    assert_eq!(
        out[1].as_ref().unwrap().recovered.sender,
        Err(RecoverError::Zero("r"))
    );
    let err = out[2].as_ref().unwrap_err().to_string();
    assert!(err.contains("nonce"), "{err}");
    let dep = out[3].as_ref().unwrap();
    assert!(
        dep.recovered
            .sender
            .as_ref()
            .unwrap_err()
            .to_string()
            .contains("0x7e")
    );
    assert_eq!(dep.tx.nonce, Some(1));
    assert!(out[4].as_ref().unwrap().recovered.sender.is_ok());
}

#[test]
fn a_bad_authorization_spoils_only_its_own_authority() {
    let t =
        find(|t| type_of(t) == 4 && t["authorizationList"].as_array().unwrap().len() > 1).remove(0);
    let mut broken = t.clone();
    broken["authorizationList"][0]["yParity"] = json!("0x5");
    broken["authorizationList"][0]
        .as_object_mut()
        .unwrap()
        .remove("v");
    // The outer signature covers the authorization list, so the sender
    // changes; what matters is that each result stands on its own.
    let tx = Tx::from_value(&broken).unwrap();
    let got = recover_tx(&tx);
    assert!(matches!(
        got.authorities[0],
        Err(RecoverError::InvalidParity(_))
    ));
    assert!(got.authorities[1..].iter().all(Result::is_ok));
    assert!(got.sender.is_ok());
}
