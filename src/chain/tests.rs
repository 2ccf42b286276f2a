//! The chain rules checked on real data of each chain
//! (`tests/fixtures/chains/`, provenance in `tests/fixtures/SOURCES.md`):
//! every hash recomputed from its fields equals the node's, every hashed
//! field matters (a provider that changes one is caught), every sender
//! that can be recovered is. Reads only this repository's fixtures.

use serde_json::{Value, json};

use super::*;
use crate::decode::{
    B256, BloomCache, ChainFields, L1Costs, PayloadError, Receipt, Tx, U256, keccak, parse_fixed,
    parse_u64,
};
use crate::recover::{pubkey_to_address, recover_tx};
use crate::verify::{header_hash, ordered_root, receipt_encoding, withdrawals_root};

fn text(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/chains/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn value(name: &str) -> Value {
    serde_json::from_str(&text(name)).expect(name)
}

fn h256(s: &str) -> B256 {
    parse_fixed("test", s).unwrap()
}

fn addr(s: &str) -> Address {
    parse_fixed("test", s).unwrap()
}

/// keccak of the encoding `family`'s rules give the transaction object.
fn tx_hash(v: &Value, family: Family) -> Result<B256, String> {
    let tx = Tx::from_value_in(v, family).map_err(|e| e.to_string())?;
    let enc = tx.signed_encoding().map_err(|e| e.to_string())?;
    Ok(keccak(&[&enc]))
}

/// The transaction hashes to its `hash`.
fn assert_hash(name: &str, v: &Value, family: Family) -> Tx {
    let tx = Tx::from_value_in(v, family).expect(name);
    let want = tx.hash.expect("hash");
    assert_eq!(
        tx_hash(v, family),
        Ok(want),
        "{name}: the recomputed hash differs"
    );
    tx
}

/// A different value for `field` of the same JSON kind.
fn changed(field: &str, v: &Value) -> Value {
    match v {
        Value::Bool(b) => Value::Bool(!b),
        Value::Null => match field {
            "isSystemTx" => Value::Bool(true),
            "to"
            | "from"
            | "sender"
            | "retryTo"
            | "refundTo"
            | "beneficiary"
            | "feeCurrency"
            | "gatewayFeeRecipient" => json!(format!("0x{}", "11".repeat(20))),
            "requestId" | "ticketId" | "sourceHash" => json!(format!("0x{}", "11".repeat(32))),
            _ => json!("0x01"),
        },
        Value::String(s) if s == "0x" => json!("0x01"),
        Value::String(s) => {
            let mut s = s.clone();
            let last = s.pop().unwrap();
            s.push(if last == '1' { '2' } else { '1' });
            json!(s)
        }
        other => panic!("{field}: cannot change {other}"),
    }
}

/// Changing any of `fields` changes the hash; changing any of `free`
/// (not hashed) does not.
fn assert_fields_matter(name: &str, v: &Value, family: Family, fields: &[&str], free: &[&str]) {
    let base = tx_hash(v, family).unwrap();
    for f in fields {
        let mut m = v.clone();
        m[*f] = changed(f, &v[*f]);
        assert_ne!(
            tx_hash(&m, family),
            Ok(base),
            "{name}: changing {f} left the hash as it was"
        );
    }
    for f in free {
        let mut m = v.clone();
        m[*f] = changed(f, &v[*f]);
        assert_eq!(tx_hash(&m, family), Ok(base), "{name}: {f} is not hashed");
    }
}

fn recovered(tx: &Tx) -> Address {
    recover_tx(tx).sender.expect("recovers")
}

// ---------------------------------------------------------------------------
// The tables.

#[test]
fn families_parse_and_display_by_their_setting_names() {
    for f in Family::ALL {
        assert_eq!(f.as_str().parse::<Family>(), Ok(f));
        assert_eq!(f.to_string(), f.as_str());
        assert_eq!(f.profile().family, f);
    }
    assert_eq!(" OP-Stack ".parse::<Family>(), Ok(Family::OpStack));
    let err = "optimism".parse::<Family>().unwrap_err().to_string();
    assert!(
        err.contains("\"optimism\"") && err.contains("op-stack, arbitrum"),
        "{err}"
    );
}

#[test]
fn known_chain_ids_are_unique_and_name_their_family() {
    let mut ids: Vec<u64> = KNOWN_CHAINS.iter().map(|c| c.chain_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), KNOWN_CHAINS.len());
    for (id, family) in [
        (1, Family::Ethereum),
        (100, Family::Ethereum),
        (31337, Family::Ethereum),
        (10, Family::OpStack),
        (8453, Family::OpStack),
        (42161, Family::Arbitrum),
        (421614, Family::Arbitrum),
        (137, Family::Polygon),
        (56, Family::Bnb),
        (43114, Family::Avalanche),
        (42220, Family::Celo),
        (534352, Family::Scroll),
        (324, Family::Zksync),
    ] {
        assert_eq!(family_of(id, None), Some(family), "{id}");
    }
    assert_eq!(family_of(5000, None), None, "Mantle is not OP's rules");
    // The setting wins: `anvil --network optimism` is chain 31337 too.
    assert_eq!(
        family_of(31337, Some(Family::OpStack)),
        Some(Family::OpStack)
    );
}

#[test]
fn an_unknown_type_names_the_type_block_chain_and_setting() {
    let err = Profile::of(Family::Ethereum)
        .require(0x7e, 123_456, 10)
        .unwrap_err();
    let msg = err.to_string();
    for part in [
        "block 123456",
        "type 0x7e",
        "ethereum profile",
        "chain id 10, OP Mainnet",
        "chain.profile",
        "--chain-profile",
        "op-stack",
    ] {
        assert!(msg.contains(part), "{part:?} missing from {msg}");
    }
    let rule = Profile::of(Family::OpStack).require(0x7e, 1, 10).unwrap();
    assert_eq!(rule.sender, SenderSource::Committed);
    assert_eq!(rule.receipt, ReceiptEncoding::OpDeposit);
    let scroll = Profile::of(Family::Scroll).rule(0x7e).unwrap();
    assert_eq!(scroll.receipt, ReceiptEncoding::Standard);
    let internal = Profile::of(Family::Arbitrum).rule(0x6a).unwrap();
    assert_eq!(
        (internal.sender, internal.system_sender),
        (SenderSource::None, Some(ARBOS_ADDRESS))
    );
    assert_eq!(
        Profile::of(Family::Zksync).sender_source(0x71),
        Some(SenderSource::Reported)
    );
    assert_eq!(Profile::of(Family::Avalanche).rule(0x03), None);
}

#[test]
fn what_is_verifiable_follows_the_family_and_era() {
    let arb = Profile::of(Family::Arbitrum);
    assert_eq!(
        arb.verifiable_at(42161, 16_464_264),
        Verifiable::HEADER_ONLY
    );
    assert_eq!(
        arb.verifiable_at(42161, ARBITRUM_ONE_NITRO_GENESIS),
        Verifiable::FULL
    );
    assert_eq!(arb.verifiable_at(421614, 0), Verifiable::FULL);
    let op = Profile::of(Family::OpStack);
    assert_eq!(op.verifiable_at(10, 103_110_422), Verifiable::HEADER_ONLY);
    assert_eq!(op.verifiable_at(8453, 1), Verifiable::FULL);
    let zk = Profile::of(Family::Zksync).verifiable_at(324, 35533);
    assert!(zk.parent_links && zk.tx_hashes);
    assert!(!zk.header_hash && !zk.transactions_root && !zk.receipts_root);
    assert_eq!(Profile::of(Family::Zksync).header, HeaderLayout::Opaque);
    assert_eq!(
        Profile::of(Family::Avalanche).header,
        HeaderLayout::Avalanche
    );
}

// ---------------------------------------------------------------------------
// OP Stack.

const OP_DEPOSITS: [&str; 4] = [
    "op-tx-0bf1845c.json",
    "op-tx-4fae8f6c.json",
    "op-tx-8298e19f.json",
    "op-tx-bc9329af.json",
];

#[test]
fn op_deposits_hash_from_their_fields_and_commit_their_sender() {
    for name in OP_DEPOSITS {
        let v = value(name);
        let tx = assert_hash(name, &v, Family::OpStack);
        assert!(matches!(
            tx.chain.as_deref(),
            Some(ChainFields::OpDeposit(_))
        ));
        assert_eq!(tx.committed_sender(), tx.from, "{name}");
        assert!(!tx.has_signature(), "{name}: r = s = 0 is no signature");
        assert_eq!(tx.signing_hash(), Err(PayloadError::Unsigned(0x7e)));
        assert_fields_matter(
            name,
            &v,
            Family::OpStack,
            &[
                "sourceHash",
                "from",
                "to",
                "mint",
                "value",
                "gas",
                "isSystemTx",
                "input",
            ],
            // The JSON nonce is the account nonce at execution, not hashed.
            &["nonce", "gasPrice", "depositReceiptVersion"],
        );
        // mint: null, absent and 0x0 are the same 0.
        for mint in [Value::Null, json!("0x0"), json!("0x")] {
            let mut m = v.clone();
            m["mint"] = mint;
            assert_eq!(tx_hash(&m, Family::OpStack), Ok(tx.hash.unwrap()));
        }
        let mut m = v.clone();
        m.as_object_mut().unwrap().remove("mint");
        assert_eq!(tx_hash(&m, Family::OpStack), Ok(tx.hash.unwrap()));
        // isSystemTx absent is false.
        m["isSystemTx"] = json!(false);
        assert_eq!(tx_hash(&m, Family::OpStack), Ok(tx.hash.unwrap()));
        // A contract creation encodes `to` as empty, not as 0x0.
        let mut m = v.clone();
        m["to"] = Value::Null;
        assert_ne!(tx_hash(&m, Family::OpStack), Ok(tx.hash.unwrap()));
    }
    // The L1-attributes deposit comes from the depositor account.
    let l1 = Tx::from_value_in(&value("op-tx-bc9329af.json"), Family::OpStack).unwrap();
    assert_eq!(
        l1.committed_sender(),
        Some(addr("0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001"))
    );
}

#[test]
fn the_l1_attributes_deposit_tells_its_l1_block_in_every_layout() {
    let deposit = |name: &str| Tx::from_value_in(&value(name), Family::OpStack).unwrap();
    // Real L1-attributes deposits of OP Mainnet: two Ecotone (0x440a5e20),
    // one Jovian (0x3db6be2b). Expected: bytes 28..36 of their input read
    // with Python's int.from_bytes, and the L1 timestamp beside them
    // (bytes 20..28) dates each to its L1 block (Nov 2024, May 2026).
    for (name, l1) in [
        ("op-tx-4fae8f6c.json", 21_246_467),
        ("op-tx-bc9329af.json", 21_095_047),
        ("op-tx-8298e19f.json", 25_086_365),
    ] {
        assert_eq!(
            OP_L1_ATTRIBUTES.l1_block(&deposit(name)),
            Some(l1),
            "{name}"
        );
    }
    // A user deposit (to the L2 cross-domain messenger) carries none.
    assert_eq!(
        OP_L1_ATTRIBUTES.l1_block(&deposit("op-tx-0bf1845c.json")),
        None
    );
    let ecotone = deposit("op-tx-4fae8f6c.json");
    let with_input = |input: Vec<u8>| Tx {
        input,
        ..ecotone.clone()
    };
    // Bedrock: setL1BlockValues(uint64 _number, uint64 _timestamp, …),
    // ABI-encoded by alloy from the signature, not by hand.
    let bedrock = alloy_json_abi::Function::parse(
        "setL1BlockValues(uint64,uint64,uint256,bytes32,uint64,bytes32,uint256,uint256)",
    )
    .unwrap();
    use alloy_dyn_abi::{DynSolValue, JsonAbiExt};
    let word = |n: u64| DynSolValue::Uint(alloy_primitives::U256::from(n), 256);
    let args = [
        DynSolValue::Uint(alloy_primitives::U256::from(17_422_590u64), 64),
        DynSolValue::Uint(alloy_primitives::U256::from(1_686_068_903u64), 64),
        word(30),
        DynSolValue::FixedBytes(alloy_primitives::B256::repeat_byte(1), 32),
        DynSolValue::Uint(alloy_primitives::U256::from(5u64), 64),
        DynSolValue::FixedBytes(alloy_primitives::B256::repeat_byte(2), 32),
        word(188),
        word(684_000),
    ];
    let input = bedrock.abi_encode_input(&args).unwrap();
    assert_eq!(&input[..4], [0x01, 0x5d, 0x8e, 0xb9], "Bedrock's selector");
    assert_eq!(
        OP_L1_ATTRIBUTES.l1_block(&with_input(input)),
        Some(17_422_590)
    );
    // Isthmus: Ecotone's packed fields and two more; the same place.
    let mut isthmus = ecotone.input.clone();
    isthmus[..4].copy_from_slice(&[0x09, 0x89, 0x99, 0xbe]);
    isthmus.extend([0; 12]);
    assert_eq!(
        OP_L1_ATTRIBUTES.l1_block(&with_input(isthmus)),
        Some(21_246_467)
    );
    // A layout a later upgrade brings, or calldata too short: none, not a guess.
    let mut unknown = ecotone.input.clone();
    unknown[..4].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
    assert_eq!(OP_L1_ATTRIBUTES.l1_block(&with_input(unknown)), None);
    assert_eq!(
        OP_L1_ATTRIBUTES.l1_block(&with_input(ecotone.input[..35].to_vec())),
        None
    );
    // The same calldata from another sender, or to another contract: none.
    let other = Tx {
        from: Some(addr("0xdeaddeaddeaddeaddeaddeaddeaddeaddead0002")),
        ..ecotone.clone()
    };
    assert_eq!(OP_L1_ATTRIBUTES.l1_block(&other), None);
    let other = Tx {
        to: Some(addr("0x4200000000000000000000000000000000000016")),
        ..ecotone.clone()
    };
    assert_eq!(OP_L1_ATTRIBUTES.l1_block(&other), None);
    // Where the rule is: OP Stack chains and Celo; Arbitrum's is its
    // header's; no other family has one.
    for family in Family::ALL {
        let expected = match family {
            Family::OpStack | Family::Celo => L1Origin::InfoDeposit(&OP_L1_ATTRIBUTES),
            Family::Arbitrum => L1Origin::MixHash,
            _ => L1Origin::None,
        };
        assert_eq!(family.profile().l1_origin, expected, "{family}");
    }
}

#[test]
fn the_family_decides_what_0x7e_is() {
    let v = value("op-tx-0bf1845c.json");
    // Ethereum's rules know no 0x7e: unsupported, as before.
    assert_eq!(
        tx_hash(&v, Family::Ethereum),
        Err(PayloadError::UnsupportedType(0x7e).to_string())
    );
    // Scroll's 0x7e needs a queue index this object does not have.
    let err = tx_hash(&v, Family::Scroll).unwrap_err();
    assert!(err.contains("queueIndex"), "{err}");
    // Celo L2 deposits are OP deposits.
    assert_eq!(
        tx_hash(&v, Family::Celo).unwrap(),
        h256("0x0bf1845c5d7a82ec92365d5027f7310793d53004f3c86aa80965c67bf7e7dc80")
    );
}

#[test]
fn bad_chain_fields_are_errors_that_name_them() {
    let mut v = value("op-tx-0bf1845c.json");
    v["sourceHash"] = json!("0x12");
    let err = Tx::from_value_in(&v, Family::OpStack)
        .unwrap_err()
        .to_string();
    assert!(err.contains("sourceHash"), "{err}");
    v.as_object_mut().unwrap().remove("sourceHash");
    assert_eq!(
        tx_hash(&v, Family::OpStack),
        Err(PayloadError::Missing("sourceHash", 0x7e).to_string())
    );
    let mut v = value("op-tx-0bf1845c.json");
    v["isSystemTx"] = json!("yes");
    let err = Tx::from_value_in(&v, Family::OpStack)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("isSystemTx") || err.contains("boolean"),
        "{err}"
    );
    // The text path (scan declines chain fields) decodes the same.
    let t = text("op-tx-0bf1845c.json");
    assert_eq!(
        Tx::from_json_in(&t, Family::OpStack).unwrap(),
        Tx::from_value_in(&value("op-tx-0bf1845c.json"), Family::OpStack).unwrap()
    );
}

#[test]
fn op_headers_hash_with_the_standard_layout() {
    for name in [
        "optimism-151534212.hashes.json",
        "optimism-103110422.hashes.json",
    ] {
        let h = BlockHeader::from_value(&value(name)).unwrap();
        assert_eq!(header_hash(&h).unwrap(), h.hash, "{name}");
    }
    // Jovian: blobGasUsed is the DA footprint, opaque but hashed.
    let jovian = BlockHeader::from_value(&value("optimism-151534212.hashes.json")).unwrap();
    let f = jovian.fields.as_deref().unwrap();
    assert!(!f.blob_gas_used.unwrap().is_zero());
    // Isthmus+: withdrawalsRoot is a storage root, not the root of [].
    assert_eq!(f.withdrawals.as_deref(), Some(&[][..]));
    assert_ne!(Some(withdrawals_root(&[])), f.withdrawals_root);
    assert!(Profile::of(Family::OpStack).withdrawals_root_is_storage_root(&jovian));
    assert!(!Profile::of(Family::Ethereum).withdrawals_root_is_storage_root(&jovian));
    let legacy = BlockHeader::from_value(&value("optimism-103110422.hashes.json")).unwrap();
    assert!(!Profile::of(Family::OpStack).withdrawals_root_is_storage_root(&legacy));
}

#[test]
fn rollup_receipts_keep_the_l1_costs_their_node_reports_outside_the_encoding() {
    let u = |x: u64| U256::from_u64(x);
    // OP Mainnet (Ecotone): l1Fee, l1GasUsed, l1GasPrice as op-geth sends them.
    let op = Receipt::from_json(&text("optimism-receipt-2bc7cb46.json")).unwrap();
    let want = L1Costs {
        l1_fee: Some(u(0x105d4b2024)),
        l1_gas_used: Some(u(0x800)),
        l1_gas_price: Some(u(0x5d749a07e)),
        gas_used_for_l1: None,
    };
    assert_eq!(op.l1_costs.as_deref(), Some(&want));
    // Arbitrum One and Sepolia: gasUsedForL1, 0x0 for the internal 0x6a.
    let arb = Receipt::from_json(&text("arbitrum-receipt-21be7a93.json")).unwrap();
    let arb_costs = arb.l1_costs.as_deref().unwrap();
    assert_eq!(arb_costs.gas_used_for_l1, Some(0x113076));
    assert_eq!(arb_costs.l1_fee, None);
    let sepolia: Vec<Value> =
        serde_json::from_str(&text("arb-sepolia-185232421.receipts.json")).unwrap();
    let used: Vec<Option<u64>> = sepolia
        .iter()
        .map(|r| {
            Receipt::from_json(&r.to_string())
                .unwrap()
                .l1_costs
                .unwrap()
                .gas_used_for_l1
        })
        .collect();
    assert_eq!(used, [0, 0x35, 0x34, 0x127, 0x35, 0x7f, 0xa6].map(Some));
    // Ethereum-family receipts report none: nothing kept.
    let polygon = Receipt::from_json(&text("polygon-receipt-e4733eb7.json")).unwrap();
    assert_eq!(polygon.l1_costs, None);

    // Outside the receipts root: the encoding does not change with them.
    let mut cache = BloomCache::default();
    let mut bare = value("optimism-receipt-2bc7cb46.json");
    for k in ["l1Fee", "l1GasUsed", "l1GasPrice"] {
        bare.as_object_mut().unwrap().remove(k);
    }
    let bare = Receipt::from_json(&bare.to_string()).unwrap();
    assert_eq!(bare.l1_costs, None);
    assert_eq!(
        receipt_encoding(&op, &mut cache).unwrap().0,
        receipt_encoding(&bare, &mut cache).unwrap().0
    );

    // A string that is not a quantity of its size is an error naming the
    // field.
    for (field, bad) in [
        ("l1Fee", json!("0.684")),
        ("l1GasPrice", json!("0xzz")),
        ("gasUsedForL1", json!("0x10000000000000000")),
    ] {
        let mut v = value("optimism-receipt-2bc7cb46.json");
        v[field] = bad.clone();
        let err = Receipt::from_json(&v.to_string()).unwrap_err().to_string();
        assert!(err.contains(field), "{field} = {bad}: {err}");
    }
    // Not a string at all: refused as for every other quantity.
    let mut v = value("optimism-receipt-2bc7cb46.json");
    v["l1GasUsed"] = json!(12);
    assert!(Receipt::from_json(&v.to_string()).is_err());
}

#[test]
fn op_receipts_keep_rpc_only_fields_out_and_deposits_encode_their_nonce() {
    let r = Receipt::from_json(&text("optimism-receipt-2bc7cb46.json")).unwrap();
    assert_eq!(r.logs.len(), 1);
    assert_eq!((r.deposit_nonce, r.deposit_receipt_version), (None, None));
    // Pre-Ecotone receipts carry l1FeeScalar as a decimal string.
    let mut v = value("optimism-receipt-2bc7cb46.json");
    v["l1FeeScalar"] = json!("0.684");
    v["operatorFeeScalar"] = json!("0x0");
    v["daFootprintGasScalar"] = json!(400);
    assert_eq!(Receipt::from_json(&v.to_string()).unwrap(), r);

    // A deposit receipt: rlp([status, cumGas, bloom, logs, depositNonce,
    // depositReceiptVersion]) after 0x7e (op-geth's encoding; no OP
    // receiptsRoot in the data to check it against).
    let base = json!({"type": "0x7e", "status": "0x1", "cumulativeGasUsed": "0xb6e4", "logs": []});
    let mut cache = BloomCache::default();
    let enc = |v: &Value, cache: &mut BloomCache| {
        receipt_encoding(&Receipt::from_json(&v.to_string()).unwrap(), cache).map(|(e, _)| e)
    };
    let bedrock = enc(&base, &mut cache).unwrap();
    let mut regolith = base.clone();
    regolith["depositNonce"] = json!("0x7");
    let mut canyon = regolith.clone();
    canyon["depositReceiptVersion"] = json!("0x1");
    let canyon_enc = enc(&canyon, &mut cache).unwrap();
    let regolith_enc = enc(&regolith, &mut cache).unwrap();
    let mut want = vec![
        0x7e, 0xf9, 0x01, 0x0a, 0x01, 0x82, 0xb6, 0xe4, 0xb9, 0x01, 0x00,
    ];
    want.extend([0u8; 256]);
    want.extend([0xc0, 0x07, 0x01]);
    assert_eq!(canyon_enc, want);
    assert_eq!(regolith_enc.len() + 1, canyon_enc.len());
    assert_eq!(bedrock.len() + 1, regolith_enc.len());
    // A version without a nonce cannot be encoded; Scroll's 0x7e receipts
    // (no depositNonce) stay standard.
    let mut odd = base.clone();
    odd["depositReceiptVersion"] = json!("0x1");
    assert_eq!(enc(&odd, &mut cache), Err("depositNonce"));
}

// ---------------------------------------------------------------------------
// Arbitrum.

/// The items of an RLP list.
fn rlp_items(mut raw: &[u8]) -> Vec<Vec<u8>> {
    let list = alloy_rlp::Header::decode(&mut raw).unwrap();
    assert!(list.list && raw.len() == list.payload_length);
    let mut items = Vec::new();
    while !raw.is_empty() {
        let h = alloy_rlp::Header::decode(&mut raw).unwrap();
        assert!(!h.list, "no nested lists in these types");
        items.push(raw[..h.payload_length].to_vec());
        raw = &raw[h.payload_length..];
    }
    items
}

fn hex(b: &[u8]) -> String {
    format!("0x{}", const_hex::encode(b))
}

fn quantity(b: &[u8]) -> String {
    if b.is_empty() { "0x0".into() } else { hex(b) }
}

/// The JSON a Nitro node gives the raw unsigned tx (`arb_types.go` field
/// order, JSON names of its `RPCTransaction`).
fn arbitrum_json(ty: u8, items: &[Vec<u8>], hash: &str) -> Value {
    let q = |i: usize| json!(quantity(&items[i]));
    let b = |i: usize| json!(hex(&items[i]));
    let to = |i: usize| {
        if items[i].is_empty() {
            Value::Null
        } else {
            b(i)
        }
    };
    let mut v = json!({"type": format!("0x{ty:x}"), "hash": hash, "chainId": q(0),
                       "v": "0x0", "r": "0x0", "s": "0x0"});
    let fields: Vec<(&str, Value)> = match ty {
        0x64 => vec![
            ("requestId", b(1)),
            ("from", b(2)),
            ("to", b(3)),
            ("value", q(4)),
        ],
        0x65 => vec![
            ("from", b(1)),
            ("nonce", q(2)),
            ("maxFeePerGas", q(3)),
            ("gas", q(4)),
            ("to", to(5)),
            ("value", q(6)),
            ("input", b(7)),
        ],
        0x68 => vec![
            ("nonce", q(1)),
            ("from", b(2)),
            ("maxFeePerGas", q(3)),
            ("gas", q(4)),
            ("to", to(5)),
            ("value", q(6)),
            ("input", b(7)),
            ("ticketId", b(8)),
            ("refundTo", b(9)),
            ("maxRefund", q(10)),
            ("submissionFeeRefund", q(11)),
        ],
        0x69 => vec![
            ("requestId", b(1)),
            ("from", b(2)),
            ("l1BaseFee", q(3)),
            ("depositValue", q(4)),
            ("maxFeePerGas", q(5)),
            ("gas", q(6)),
            ("retryTo", to(7)),
            ("retryValue", q(8)),
            ("beneficiary", b(9)),
            ("maxSubmissionFee", q(10)),
            ("refundTo", b(11)),
            ("retryData", b(12)),
            // Derived by the node, not hashed.
            ("to", json!("0x000000000000000000000000000000000000006e")),
            ("input", json!("0xc9f95d32")),
            ("value", json!("0x0")),
        ],
        0x6a => vec![("input", b(1)), ("from", json!(hex(&ARBOS_ADDRESS)))],
        other => panic!("type {other:#x}"),
    };
    for (k, val) in fields {
        v[k] = val;
    }
    v
}

#[test]
fn arbitrum_unsigned_types_rebuild_their_raw_encoding_from_json_fields() {
    let set = value("arb-sepolia-raw-txs.json");
    let mut seen = Vec::new();
    for entry in set.as_array().unwrap() {
        let raw = const_hex::decode(entry["raw"].as_str().unwrap()).unwrap();
        let ty = raw[0];
        let hash = entry["hash"].as_str().unwrap();
        assert_eq!(keccak(&[&raw]), h256(hash));
        let v = arbitrum_json(ty, &rlp_items(&raw[1..]), hash);
        let tx = Tx::from_value_in(&v, Family::Arbitrum).unwrap();
        assert_eq!(tx.signed_encoding().unwrap(), raw, "type {ty:#x}");
        assert_eq!(tx.signing_hash(), Err(PayloadError::Unsigned(ty)));
        assert!(!tx.has_signature());
        let name = format!("raw type {ty:#x}");
        let (hashed, free): (&[&str], &[&str]) = match ty {
            0x64 => (
                &["chainId", "requestId", "from", "to", "value"],
                &["nonce", "input"],
            ),
            0x65 => (
                &[
                    "chainId",
                    "from",
                    "nonce",
                    "maxFeePerGas",
                    "gas",
                    "to",
                    "value",
                    "input",
                ],
                &["requestId"],
            ),
            0x68 => (
                &[
                    "chainId",
                    "nonce",
                    "from",
                    "maxFeePerGas",
                    "gas",
                    "to",
                    "value",
                    "input",
                    "ticketId",
                    "refundTo",
                    "maxRefund",
                    "submissionFeeRefund",
                ],
                &["requestId"],
            ),
            0x69 => (
                &[
                    "chainId",
                    "requestId",
                    "from",
                    "l1BaseFee",
                    "depositValue",
                    "maxFeePerGas",
                    "gas",
                    "retryTo",
                    "retryValue",
                    "beneficiary",
                    "maxSubmissionFee",
                    "refundTo",
                    "retryData",
                ],
                &["to", "input", "value", "nonce"],
            ),
            0x6a => (&["chainId", "input"], &["from", "to", "nonce", "gas"]),
            _ => unreachable!(),
        };
        assert_fields_matter(&name, &v, Family::Arbitrum, hashed, free);
        if ty == 0x6a {
            assert_eq!(tx.committed_sender(), None, "ArbOS is not in the hash");
        } else {
            assert_eq!(tx.committed_sender(), tx.from);
        }
        seen.push(ty);
    }
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen, [0x64, 0x65, 0x68, 0x69, 0x6a]);
    // A missing hashed field is named.
    let v = json!({"type": "0x69", "chainId": "0x66eee", "from": hex(&[1; 20])});
    let err = tx_hash(&v, Family::Arbitrum).unwrap_err();
    assert!(err.contains("requestId"), "{err}");
}

#[test]
fn arbitrum_internal_txs_from_json_hash_to_their_hash() {
    for name in [
        "arbitrum-tx-61d48ab9.json",
        "arbitrum-tx-7144169e.json",
        "arbitrum-tx-af256a9c.json",
    ] {
        let v = value(name);
        let tx = assert_hash(name, &v, Family::Arbitrum);
        assert_eq!(tx.from, Some(ARBOS_ADDRESS));
        assert_fields_matter(name, &v, Family::Arbitrum, &["chainId", "input"], &["from"]);
    }
}

#[test]
fn arbitrum_sepolia_block_verifies_whole() {
    let block = value("arb-sepolia-185232421.json");
    let header = BlockHeader::from_value(&block).unwrap();
    assert_eq!(header_hash(&header).unwrap(), header.hash);
    let f = header.fields.as_deref().unwrap();
    let mut encodings = Vec::new();
    for (i, t) in block["transactions"].as_array().unwrap().iter().enumerate() {
        let tx = assert_hash(&format!("tx {i}"), t, Family::Arbitrum);
        let rule = Profile::of(Family::Arbitrum).require(tx.tx_type, header.number, 421614);
        match rule.unwrap().sender {
            SenderSource::Recovered => assert_eq!(Some(recovered(&tx)), tx.from, "tx {i}"),
            SenderSource::None => assert_eq!(tx.tx_type, 0x6a),
            other => panic!("tx {i}: {other:?}"),
        }
        encodings.push(tx.signed_encoding().unwrap());
    }
    assert_eq!(ordered_root(&encodings), f.transactions_root);
    let receipts = value("arb-sepolia-185232421.receipts.json");
    let mut cache = BloomCache::default();
    let encoded: Vec<Vec<u8>> = receipts
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            let r = Receipt::from_json(&r.to_string()).unwrap();
            // The encoding takes the node's bloom; it must be its logs'.
            let mut own = [0u8; 256];
            for log in &r.logs {
                cache.add_log(&mut own, &log.address, &log.topics);
            }
            assert_eq!(Some(&own), r.logs_bloom.as_deref());
            receipt_encoding(&r, &mut cache).unwrap().0
        })
        .collect();
    assert_eq!(ordered_root(&encoded), f.receipts_root);
}

#[test]
fn arbitrum_headers_and_the_classic_block() {
    for name in [
        "arb-sepolia-0.json",
        "arbitrum-86011219.hashes.json",
        "arbitrum-96223351.hashes.json",
        "arbitrum-331395311.hashes.json",
        "arbitrum-16464264.json",
    ] {
        let h = BlockHeader::from_value(&value(name)).unwrap();
        assert_eq!(header_hash(&h).unwrap(), h.hash, "{name}");
    }
    let classic = value("arbitrum-16464264.json");
    let t = &classic["transactions"][0];
    let tx = Tx::from_value_in(t, Family::Arbitrum).unwrap();
    assert_eq!(tx.chain.as_deref(), Some(&ChainFields::Reported));
    assert_eq!(
        tx.signed_encoding(),
        Err(PayloadError::NotReproducible(0x78))
    );
    assert_eq!(
        Profile::of(Family::Arbitrum).sender_source(0x78),
        Some(SenderSource::Reported)
    );
    assert!(
        !Profile::of(Family::Arbitrum)
            .verifiable_at(42161, 16_464_264)
            .receipts_root
    );
    // RPC-only receipt fields are skipped.
    for name in ["arbitrum-16464264.receipts.json"] {
        for r in value(name).as_array().unwrap() {
            Receipt::from_json(&r.to_string()).unwrap();
        }
    }
    let r = Receipt::from_json(&text("arbitrum-receipt-21be7a93.json")).unwrap();
    assert!(!r.logs.is_empty());
}

// ---------------------------------------------------------------------------
// Scroll.

#[test]
fn scroll_l1_messages_hash_from_their_fields() {
    let name = "scroll-tx-36199419.json";
    let v = value(name);
    let tx = assert_hash(name, &v, Family::Scroll);
    assert_eq!(
        tx.committed_sender(),
        Some(addr("0x7885bcbd5cecef1336b5300fb5186a12ddd8c478"))
    );
    assert!(!tx.has_signature());
    assert_fields_matter(
        name,
        &v,
        Family::Scroll,
        &["queueIndex", "gas", "to", "value", "input", "sender"],
        &["from", "nonce", "gasPrice"],
    );
    // Without `sender`, the hashed sender is `from`.
    let mut m = v.clone();
    m.as_object_mut().unwrap().remove("sender");
    assert_eq!(tx_hash(&m, Family::Scroll), Ok(tx.hash.unwrap()));
    // On OP Stack this object is no deposit.
    let err = tx_hash(&v, Family::OpStack).unwrap_err();
    assert!(err.contains("sourceHash"), "{err}");
}

// ---------------------------------------------------------------------------
// Polygon.

#[test]
fn polygon_blocks_verify_and_state_sync_is_outside_the_roots() {
    for name in [
        "polygon-820461.json",
        "polygon-9013760.json",
        "polygon-23887160.json",
    ] {
        let block = value(name);
        let header = BlockHeader::from_value(&block).unwrap();
        assert_eq!(header_hash(&header).unwrap(), header.hash, "{name}");
        let f = header.fields.as_deref().unwrap();
        let mut encodings = Vec::new();
        for t in block["transactions"].as_array().unwrap() {
            let tx = assert_hash(name, t, Family::Polygon);
            assert_eq!(Profile::of(Family::Polygon).pseudo_tx(&tx, &header), None);
            assert_eq!(Some(recovered(&tx)), tx.from, "{name}");
            encodings.push(tx.signed_encoding().unwrap());
        }
        assert_eq!(ordered_root(&encodings), f.transactions_root, "{name}");
    }
    for name in ["polygon-9013760", "polygon-23887160"] {
        let block = BlockHeader::from_value(&value(&format!("{name}.json"))).unwrap();
        let mut cache = BloomCache::default();
        let encoded: Vec<Vec<u8>> = value(&format!("{name}.receipts.json"))
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let r = Receipt::from_json(&r.to_string()).unwrap();
                receipt_encoding(&r, &mut cache).unwrap().0
            })
            .collect();
        assert_eq!(
            ordered_root(&encoded),
            block.fields.unwrap().receipts_root,
            "{name}"
        );
    }
    // Header-only blocks: the seal inside extraData is hashed with it.
    for name in [
        "polygon-19098443.hashes.json",
        "polygon-43352696.hashes.json",
        "polygon-43352848.hashes.json",
    ] {
        let h = BlockHeader::from_value(&value(name)).unwrap();
        assert_eq!(header_hash(&h).unwrap(), h.hash, "{name}");
        assert!(h.fields.unwrap().extra_data.len() >= 32 + 65, "{name}");
    }

    // The state-sync pseudo-tx: its hash is bor's rule.
    let v = value("polygon-tx-e4733eb7.json");
    let tx = Tx::from_value_in(&v, Family::Polygon).unwrap();
    let number = parse_u64("blockNumber", v["blockNumber"].as_str().unwrap()).unwrap();
    let block_hash = tx.block_hash.unwrap();
    assert_eq!(bor_state_sync_hash(number, &block_hash), tx.hash.unwrap());
    assert!(is_bor_state_sync(&tx, number, &block_hash));
    assert!(!tx.has_signature());
    let header = BlockHeader {
        number,
        hash: block_hash,
        parent_hash: [0; 32],
        timestamp: 0,
        logs_bloom: None,
        fields: None,
        l1_block_number: None,
    };
    let polygon = Profile::of(Family::Polygon);
    assert_eq!(
        polygon.pseudo_tx(&tx, &header),
        Some(PseudoTx::BorStateSync)
    );
    assert_eq!(Profile::of(Family::Ethereum).pseudo_tx(&tx, &header), None);
    // Another block, or another hash, is not the pseudo-tx.
    assert!(!is_bor_state_sync(&tx, number + 1, &block_hash));
    let mut other = tx.clone();
    other.hash = Some([0x11; 32]);
    assert_eq!(polygon.pseudo_tx(&other, &header), None);
    // Its receipt decodes (gasUsed 0, from 0x0).
    let r = Receipt::from_json(&text("polygon-receipt-e4733eb7.json")).unwrap();
    assert_eq!(r.gas_used, Some(0));
}

// ---------------------------------------------------------------------------
// BNB Smart Chain.

#[test]
fn bnb_blocks_link_and_system_txs_recover_to_the_validator() {
    let blocks = value("bsc-1-10.reth-format.json");
    // BSC's genesis hash.
    let mut parent = h256("0x0d21840abff46b96c84b2ac9e10e4f5cdaeb5693cb665db62a2f3b02d2d57b5b");
    let mut system_txs = 0;
    for b in blocks.as_array().unwrap() {
        let mut head = b["header"].clone();
        head["hash"] = json!(hex(&[0; 32]));
        let header = BlockHeader::from_value(&head).unwrap();
        assert_eq!(header.parent_hash, parent, "block {}", header.number);
        parent = header_hash(&header).unwrap();
        let f = header.fields.as_deref().unwrap();
        let mut encodings = Vec::new();
        for t in b["body"]["transactions"].as_array().unwrap() {
            let tx = assert_hash("bsc", t, Family::Bnb);
            if tx.gas_price == Some(U256::ZERO) {
                assert_eq!(recovered(&tx), f.beneficiary, "block {}", header.number);
                system_txs += 1;
            }
            encodings.push(tx.signed_encoding().unwrap());
        }
        assert_eq!(ordered_root(&encodings), f.transactions_root);
    }
    assert_eq!(system_txs, 13);
    let h = BlockHeader::from_value(&value("bsc-26803.hashes.json")).unwrap();
    assert_eq!(header_hash(&h).unwrap(), h.hash);
    for name in [
        "bsc-tx-0ff20222.json",
        "bsc-tx-caf9dc7f.json",
        "bsc-tx-eac6fc61.json",
    ] {
        let tx = assert_hash(name, &value(name), Family::Bnb);
        assert_eq!(Some(recovered(&tx)), tx.from, "{name}");
    }
}

// ---------------------------------------------------------------------------
// Avalanche.

#[test]
fn avalanche_headers_need_the_coreth_layout() {
    for name in [
        "avalanche-13274596.hashes.json",
        "avalanche-30806757.hashes.json",
    ] {
        let h = BlockHeader::from_value(&value(name)).unwrap();
        assert_eq!(header_hash(&h).unwrap(), h.hash, "{name}");
        // Without extDataHash (the standard layout) it does not hash.
        let mut standard = h.clone();
        let f = standard.fields.as_deref_mut().unwrap();
        f.ext_data_hash = None;
        f.ext_data_gas_used = None;
        f.block_gas_cost = None;
        assert_ne!(header_hash(&standard).unwrap(), h.hash, "{name}");
        // Each coreth field is hashed.
        let mut m = h.clone();
        m.fields.as_deref_mut().unwrap().block_gas_cost = Some(U256::from_u64(1));
        assert_ne!(header_hash(&m).unwrap(), h.hash, "{name}");
    }
    for name in ["avalanche-tx-027c4627.json", "avalanche-tx-3dee39f6.json"] {
        let tx = assert_hash(name, &value(name), Family::Avalanche);
        assert_eq!(Some(recovered(&tx)), tx.from, "{name}");
    }
}

// ---------------------------------------------------------------------------
// Celo.

#[test]
fn celo_mainnet_txs_hash_and_recover() {
    for name in ["celo-tx-b733188a.json", "celo-tx-af717775.json"] {
        let tx = assert_hash(name, &value(name), Family::Celo);
        assert_eq!(Some(recovered(&tx)), tx.from, "{name}");
    }
    // The eth-compatible legacy tx ignores its (malformed) gateway field.
    let tx = Tx::from_value_in(&value("celo-tx-af717775.json"), Family::Celo).unwrap();
    assert_eq!(tx.chain, None);
    assert_fields_matter(
        "celo 0x7c",
        &value("celo-tx-b733188a.json"),
        Family::Celo,
        &[
            "gatewayFeeRecipient",
            "gatewayFee",
            "feeCurrency",
            "chainId",
            "input",
        ],
        &["ethCompatible", "gasPrice"],
    );
}

#[test]
fn celo_fee_currency_txs_recover_their_signer() {
    let vectors = value("celo-op-geth-vectors.json");
    for (i, vector) in vectors.as_array().unwrap().iter().enumerate() {
        let t = &vector["tx"];
        let tx = assert_hash(&format!("vector {i}"), t, Family::Celo);
        assert!(matches!(tx.chain.as_deref(), Some(ChainFields::Celo(_))));
        let Some(key) = vector["signer_key"].as_str() else {
            assert!(!tx.has_signature());
            continue;
        };
        let key = k256::ecdsa::SigningKey::from_slice(&const_hex::decode(key).unwrap()).unwrap();
        let point = key.verifying_key().to_encoded_point(false);
        let signer = pubkey_to_address(point.as_bytes().try_into().unwrap());
        assert_eq!(recovered(&tx), signer, "vector {i}");
        if tx.tx_type == 0 {
            // Ethereum's legacy rule signs another payload: a wrong sender.
            let plain = Tx::from_value_in(t, Family::Ethereum).unwrap();
            assert_ne!(recover_tx(&plain).sender, Ok(signer));
            assert_ne!(tx_hash(t, Family::Ethereum), tx_hash(t, Family::Celo));
        }
        let celo: &[&str] = match tx.tx_type {
            0 | 0x7c => &["feeCurrency", "gatewayFeeRecipient", "gatewayFee"],
            _ => &["feeCurrency"],
        };
        assert_fields_matter(&format!("vector {i}"), t, Family::Celo, celo, &[]);
        // A null fee currency (CELO itself) encodes as empty.
        let mut m = t.clone();
        m["feeCurrency"] = Value::Null;
        assert_ne!(tx_hash(&m, Family::Celo), tx_hash(t, Family::Celo));
    }
    let v = &vectors[2]["tx"];
    assert_fields_matter("0x7a", v, Family::Celo, &["maxFeeInFeeCurrency"], &[]);
}

// ---------------------------------------------------------------------------
// zkSync Era.

#[test]
fn zksync_keeps_0x71_as_reported_and_hashes_signed_types() {
    let block = value("zksync-35533.json");
    let t = &block["transactions"][0];
    let tx = Tx::from_value_in(t, Family::Zksync).unwrap();
    assert_eq!(tx.chain.as_deref(), Some(&ChainFields::Reported));
    assert_eq!(
        tx.signed_encoding(),
        Err(PayloadError::NotReproducible(0x71))
    );
    assert_eq!(
        Profile::of(Family::Zksync).sender_source(0x71),
        Some(SenderSource::Reported)
    );
    let name = "zksync-tx-b2adc4d2.json";
    let tx = assert_hash(name, &value(name), Family::Zksync);
    assert_eq!(Some(recovered(&tx)), tx.from);
    let r = Receipt::from_json(&text("zksync-receipt-e56c1190.json")).unwrap();
    assert!(!r.logs.is_empty());
}
