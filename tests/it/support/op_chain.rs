//! An OP Stack chain on a real node: `anvil --network optimism` (anvil
//! 1.7.1, pinned by scripts/install.sh) with deposits of every shape mixed
//! with signed transactions. Deposits are sent as raw `0x7e` transactions,
//! which that anvil accepts and mines as op-geth would; their encoding here
//! is written from the OP Stack specification (deposits.md), not from the
//! indexer's code, so the two check each other.
//!
//! anvil answers `eth_chainId` 31337 even with `--network optimism`; these
//! chains are started as Base (8453) so that, as on Base itself, the
//! indexer picks the op-stack profile from the chain id with no setting.
//! Base starts with Bedrock at genesis, and no built-in anchor pins its
//! genesis, so anvil's own block 0 is a fine trusted start.
//!
//! Must not: touch the network beyond 127.0.0.1, or read files outside
//! this repository (fixtures live in `tests/fixtures/`).

#![allow(dead_code)] // shared helpers: not every test module uses each one

use alloy_primitives::{Address, B256, U256, keccak256};
use alloy_rlp::{Encodable, Header};
use serde_json::json;

use super::anvil::{Anvil, AnvilOptions, RETURN_42_INITCODE, TxKind};

/// The chain id the OP anvils answer with: Base's.
pub const OP_CHAIN_ID: u64 = 8453;

/// The depositor account of L1-attributes deposits.
pub const L1_ATTRIBUTES_DEPOSITOR: &str = "0xdeaddeaddeaddeaddeaddeaddeaddeaddead0001";
/// The L1Block predeploy they call.
pub const L1_BLOCK: &str = "0x4200000000000000000000000000000000000015";

/// An OP Stack deposit transaction (type 0x7e), as deposits.md defines it.
#[derive(Debug, Clone)]
pub struct Deposit {
    pub source_hash: B256,
    pub from: Address,
    /// `None`: a contract creation.
    pub to: Option<Address>,
    pub mint: U256,
    pub value: U256,
    pub gas: u64,
    pub is_system_tx: bool,
    pub data: Vec<u8>,
}

impl Deposit {
    /// `0x7e ‖ rlp([sourceHash, from, to, mint, value, gas, isSystemTx, data])`.
    pub fn raw(&self) -> Vec<u8> {
        let mut body = Vec::new();
        self.source_hash.encode(&mut body);
        self.from.encode(&mut body);
        match &self.to {
            Some(to) => to.encode(&mut body),
            None => body.push(alloy_rlp::EMPTY_STRING_CODE),
        }
        self.mint.encode(&mut body);
        self.value.encode(&mut body);
        self.gas.encode(&mut body);
        self.is_system_tx.encode(&mut body);
        self.data.as_slice().encode(&mut body);
        let mut out = vec![0x7e];
        Header {
            list: true,
            payload_length: body.len(),
        }
        .encode(&mut out);
        out.extend(body);
        out
    }

    /// Its transaction hash: keccak256 of the raw encoding.
    pub fn hash(&self) -> B256 {
        keccak256(self.raw())
    }
}

/// An L1 address as its messages appear on L2 (L1→L2 address aliasing:
/// plus 0x1111000000000000000000000000000000001111, modulo 2^160).
pub fn aliased(l1: Address) -> Address {
    let offset = U256::from_str_radix("1111000000000000000000000000000000001111", 16).unwrap();
    let sum: U256 = (U256::from_be_slice(l1.as_slice()) + offset) % (U256::from(1) << 160);
    Address::from_slice(&sum.to_be_bytes::<32>()[12..])
}

/// A distinct source hash per deposit (on a real chain, the L1 log's).
fn source(n: u64) -> B256 {
    keccak256(format!("test deposit {n}"))
}

fn addr(s: &str) -> Address {
    s.parse().unwrap()
}

/// Deposits of every shape, one per sender (anvil's pool keys deposits by
/// sender and nonce, like signed transactions, so two from one sender
/// replace each other): an L1-attributes-like call by the depositor
/// account, a pre-Regolith system transaction in odd rounds (`salt`), user
/// deposits from aliased L1 addresses with and without `mint`, one with
/// calldata, and with `creation` a contract creation. `salt` keeps source
/// hashes (hence tx hashes) unique across rounds; `to` receives value.
///
/// anvil 1.7.1 puts the sender's nonce *after* a deposit in its receipt's
/// `depositNonce` (op-geth and reth: before it; fixed after 1.7.1 by
/// foundry-rs/foundry#16940), while its `contractAddress` uses the nonce
/// before: a deposit creation's receipt contradicts itself there, and a
/// verifying run rightly refuses its block (`op_stack` shows it).
pub fn deposits_of_every_shape(salt: u64, to: Address, creation: bool) -> Vec<Deposit> {
    let user = aliased(addr("0x00000000000000000000000000000000000a11ce"));
    let other = aliased(addr("0x000000000000000000000000000000000000b0b0"));
    let creator = aliased(addr("0x00000000000000000000000000000000000c0de0"));
    let eth = U256::from(10).pow(U256::from(18));
    // setL1BlockValuesEcotone() with its packed fields (the OP Stack
    // specification's l1-attributes layout): basefeeScalar and
    // blobBaseFeeScalar (here the salt), sequenceNumber, timestamp, the L1
    // block number, then basefee, blobBaseFee, hash and batcherHash.
    let mut l1_info = hex::decode("440a5e20").unwrap();
    l1_info.extend(salt.to_be_bytes());
    l1_info.extend(0u64.to_be_bytes());
    l1_info.extend([7u8; 8]);
    l1_info.extend(l1_origin_of_round(salt).to_be_bytes());
    l1_info.extend([7u8; 128]);
    assert_eq!(l1_info.len(), 164, "Ecotone's L1-attributes calldata");
    let mut deposits = vec![
        Deposit {
            source_hash: source(salt * 10),
            from: addr(L1_ATTRIBUTES_DEPOSITOR),
            to: Some(addr(L1_BLOCK)),
            mint: U256::ZERO,
            value: U256::ZERO,
            gas: 1_000_000,
            is_system_tx: salt % 2 == 1,
            data: l1_info,
        },
        Deposit {
            source_hash: source(salt * 10 + 2),
            from: user,
            to: Some(to),
            mint: eth,
            value: eth / U256::from(2),
            gas: 100_000,
            is_system_tx: false,
            data: Vec::new(),
        },
        Deposit {
            source_hash: source(salt * 10 + 3),
            from: other,
            to: Some(to),
            mint: U256::ZERO,
            value: U256::ZERO,
            gas: 100_000,
            is_system_tx: false,
            data: hex::decode("deadbeef").unwrap(),
        },
    ];
    if creation {
        deposits.push(Deposit {
            source_hash: source(salt * 10 + 4),
            from: creator,
            to: None,
            mint: U256::from(12345),
            value: U256::ZERO,
            gas: 200_000,
            is_system_tx: false,
            data: hex::decode(RETURN_42_INITCODE.trim_start_matches("0x")).unwrap(),
        });
    }
    deposits
}

/// The L1 block number the L1-attributes deposit of round `salt` names.
pub fn l1_origin_of_round(salt: u64) -> u64 {
    20_000_000 + salt
}

/// Starts an OP Stack anvil (see the module docs); blocks are mined by
/// [`Anvil::mine`] only, so deposits and signed transactions share blocks,
/// in the order they were sent.
pub async fn start_op_anvil() -> Anvil {
    Anvil::start_with(AnvilOptions {
        no_mining: true,
        optimism: true,
        // In the order sent, as a sequencer orders a block: the
        // L1-attributes deposit first, then user deposits, then the rest
        // (anvil's default orders by fee, which puts deposits last).
        extra_args: vec![
            "--chain-id".into(),
            OP_CHAIN_ID.to_string(),
            "--order".into(),
            "fifo".into(),
        ],
        ..AnvilOptions::default()
    })
    .await
}

/// What one round sent: every tx hash, and the deposits among them.
pub struct Round {
    pub hashes: Vec<String>,
    pub deposits: Vec<Deposit>,
}

/// Sends deposits of every shape and signed transactions of the types an
/// OP Stack chain has (legacy, EIP-2930, EIP-1559, a creation; no blobs),
/// and mines them into one block; with `creation`, a deposit creation too.
pub async fn mine_op_round(anvil: &Anvil, salt: u64, creation: bool) -> Round {
    let to = addr(anvil.account(9).0);
    let deposits = deposits_of_every_shape(salt, to, creation);
    let mut hashes = Vec::new();
    for d in &deposits {
        let sent = anvil
            .rpc(
                "eth_sendRawTransaction",
                json!([format!("0x{}", hex::encode(d.raw()))]),
            )
            .await;
        assert_eq!(
            sent.as_str(),
            Some(format!("{}", d.hash()).as_str()),
            "anvil's hash of a deposit differs from the spec's"
        );
        hashes.push(sent.as_str().unwrap().to_owned());
    }
    hashes.push(anvil.send(1, TxKind::Legacy).await);
    hashes.push(anvil.send(2, TxKind::AccessList).await);
    hashes.push(anvil.send(3, TxKind::Eip1559).await);
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
    for h in &hashes {
        let r = anvil.receipt(h).await;
        assert!(!r.is_null(), "tx {h} not mined");
    }
    Round { hashes, deposits }
}
