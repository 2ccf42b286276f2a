//! Verification: every block is recomputed from what it contains, as a
//! full node does, instead of taken on the RPC's word. Transaction hashes
//! from their signed encodings, the transactions, receipts and withdrawals
//! roots from their tries, the logs bloom from the logs, the block hash
//! from the header fields, and (in `anchors`) the chain of parent hashes
//! back to a block the user trusts. A block that passes is bound by hashes
//! to its header, and the header to the trusted block: no field of it
//! can be changed, dropped, reordered or invented without a failure here.
//!
//! Every check of a block lives in this module, and the pipeline asks once
//! per block ([`check`]), getting back the block to store or a typed
//! [`Rejection`] whose [`is_fatal`](Rejection::is_fatal) says whether
//! fetching the block again can help. What to do about it (fetch the block
//! again, stop the run) is the pipeline's. The checks are pure: values in,
//! a rejection out; they fetch nothing and write nothing. The
//! per-transaction and per-receipt encodings ([`tx_proofs`],
//! [`receipt_proof`]) are computed on the recovery threads, beside
//! decoding, and handed in with the block.
//!
//! * `check`: the one entry, [`check`], in the order a reader finds the
//!   fields.
//! * `receipts`: receipts and logs belong to their block and transaction.
//! * `header`: the block hash rebuilt for the header's fork and seal.
//! * `roots`: the ordered tries and the receipt and withdrawal encodings.
//! * `trie`: the ordered trie's root; `keccak4`: Keccak of many inputs,
//!   four at a time (the tries' leaves, the transactions' hashes).
//! * `anchors`: trusted blocks, given and built in.
//! * `trust`: linking a run to its anchors before it writes anything; the
//!   only part that reads, through the [`Source`](crate::source::Source)
//!   and [`Sink`](crate::sink::Sink) traits.
//!
//! Where a chain's rules go: a new transaction type's hash is its encoding
//! in `decode` (checked here by `check_tx`), a new receipt encoding goes in
//! `roots`, a new header layout in `header`.

mod anchors;
mod authorizations;
mod check;
mod header;
mod keccak4;
mod receipts;
mod roots;
mod trie;
mod trust;

pub use anchors::{Anchor, AnchorOrigin, Anchors, builtin_genesis};
pub use authorizations::authorization_void;
pub use check::{Checked, Proofs, Rules, Unchecked, check};
pub use header::header_hash;
pub use roots::{ordered_root, receipt_encoding, withdrawals_root};
pub use trust::link;

use crate::chain::Verifiable;
use crate::decode::{
    B256, BlockHeader, Bloom, BloomCache, DecodeError, Log, PayloadError, Receipt, Tx, U256, hex0x,
};
use crate::decode::{bloom_may_contain, keccak};

/// How far blocks are verified (`verify` in the settings, `--verify`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    /// Everything this module checks.
    #[default]
    Full,
    /// Nothing: blocks are stored as the node sent them (chains whose
    /// headers this module does not know).
    Off,
    /// Reached, not asked for: everything the chain's profile allows, which
    /// is the header hash and parent links but not every root or hash
    /// (pre-Bedrock OP Mainnet, Arbitrum Classic, a block with a type whose
    /// hash cannot be rebuilt).
    #[serde(skip)]
    Header,
    /// Reached, not asked for: parent links and what the profile allows
    /// beside them, but not the header hash (zkSync).
    #[serde(skip)]
    Links,
}

impl Level {
    /// As the `blocks.verified` column and `status` name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Full => "full",
            Level::Off => "off",
            Level::Header => "header",
            Level::Links => "links",
        }
    }
}

/// A block whose contents do not give what the node says they give.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("block {block}: {field} does not verify: the node says {node}, {computed}")]
pub struct Failure {
    pub block: u64,
    /// What failed, as a user finds it in the JSON: `hash`,
    /// `transactionsRoot`, `tx 3 hash`, `receipt 5 gasUsed`, …
    pub field: String,
    /// What the node said.
    pub node: String,
    /// What the block's own contents give instead.
    pub computed: String,
}

impl Failure {
    pub fn new(
        block: u64,
        field: impl Into<String>,
        node: impl Into<String>,
        computed: impl Into<String>,
    ) -> Failure {
        Failure {
            block,
            field: field.into(),
            node: node.into(),
            computed: computed.into(),
        }
    }

    /// The node left out a field that verification needs.
    pub fn missing(block: u64, field: impl Into<String>) -> Failure {
        Failure::new(
            block,
            field,
            "nothing (the field is missing)",
            "it is needed to verify the block; set verify = \"off\" for a chain whose blocks lack it",
        )
    }

    fn hashes(
        block: u64,
        field: impl Into<String>,
        node: &[u8],
        computed: &[u8],
        what: &str,
    ) -> Failure {
        Failure::new(
            block,
            field,
            hex0x(node),
            format!("{what} give {}", hex0x(computed)),
        )
    }
}

/// Why a block may not be stored. Every kind but [`Rejection::Refused`]
/// may be a lagging or load-balanced node's answer, so the block is worth
/// fetching again; `Refused` would be refused again whatever the node says
/// (reth's `StageError::is_fatal` draws the same line).
#[derive(Debug, thiserror::Error)]
pub enum Rejection {
    /// The block's contents do not give what the node says they give.
    #[error(transparent)]
    Failure(#[from] Failure),
    /// A receipt or log that does not belong to the block it came with
    /// (another fork's, a node behind).
    #[error("{0}")]
    Mismatch(String),
    /// A transaction or receipt of the block that does not decode.
    #[error("block {block} tx {index}: malformed {what} from the node")]
    Malformed {
        block: u64,
        index: usize,
        what: &'static str,
        #[source]
        cause: DecodeError,
    },
    /// Refused whatever the node answers next (the run's own rules, such
    /// as `--strict`, or a block that cannot be indexed at all).
    #[error("{0}")]
    Refused(String),
}

impl Rejection {
    /// Fetching the block again cannot help: the run stops.
    pub fn is_fatal(&self) -> bool {
        matches!(self, Rejection::Refused(_))
    }
}

/// A transaction's signed encoding and its hash, computed on a recovery
/// thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TxProof {
    pub hash: B256,
    /// Dropped once the transactions root is checked.
    pub encoding: Vec<u8>,
}

/// The transactions' proofs, from their signed encodings (made beside
/// decoding, `Tx::signed_encoding`): all of a job's hashed together, four
/// at a time where the CPU can, the same hashes as one by one.
pub fn tx_proofs(
    encodings: Vec<Result<Vec<u8>, PayloadError>>,
) -> Vec<Result<TxProof, PayloadError>> {
    let inputs: Vec<&[u8]> = encodings.iter().flatten().map(Vec::as_slice).collect();
    let mut hashes = vec![[0u8; 32]; inputs.len()];
    keccak4::keccak256_many(&inputs, &mut hashes);
    let mut hashes = hashes.into_iter();
    encodings
        .into_iter()
        .map(|e| {
            e.map(|encoding| TxProof {
                // One hash per encoding, in order.
                hash: hashes.next().unwrap_or_default(),
                encoding,
            })
        })
        .collect()
}

/// A receipt's consensus encoding and the bloom of its logs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiptProof {
    pub encoding: Vec<u8>,
    pub bloom: Box<Bloom>,
}

/// `r`'s consensus encoding and bloom, or the name of the field it lacks;
/// `cache` holds the bits of addresses and topics seen before.
pub fn receipt_proof(r: &Receipt, cache: &mut BloomCache) -> Result<ReceiptProof, &'static str> {
    let (encoding, bloom) = receipt_encoding(r, cache)?;
    Ok(ReceiptProof {
        encoding,
        bloom: Box::new(bloom),
    })
}

/// One transaction of a block as [`check_block`] sees it.
pub struct TxParts<'a> {
    pub tx: &'a Tx,
    pub proof: &'a Result<TxProof, PayloadError>,
    /// The recovered sender, when it was recovered.
    pub sender: Option<&'a [u8; 20]>,
    /// Its receipt and the receipt's proof, when receipts are fetched.
    pub receipt: Option<(&'a Receipt, &'a Result<ReceiptProof, &'static str>)>,
    /// The chain's rule for its type.
    pub rule: TxScope,
}

/// What the chain's profile lets be checked of one transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxScope {
    /// Its hash from its encoding, its leaf in both tries.
    Full,
    /// A pseudo-transaction outside both tries (Polygon's state-sync).
    Outside,
    /// In the tries, but its hash cannot be rebuilt from its RPC object
    /// (its receipt neither): the roots cannot be checked.
    Reported,
}

/// What the chain's profile lets be checked of a whole block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockScope {
    pub verifiable: Verifiable,
    /// The header's `withdrawalsRoot` is not the root of `withdrawals` (OP
    /// Stack from Isthmus: a storage root).
    pub withdrawals_root_is_storage_root: bool,
    /// Fee-market transactions pay their tip (not on Arbitrum).
    pub tips_paid: bool,
}

impl BlockScope {
    /// Ethereum's: everything.
    pub const FULL: BlockScope = BlockScope {
        verifiable: Verifiable::FULL,
        withdrawals_root_is_storage_root: false,
        tips_paid: true,
    };

    /// The level a block checked with this scope and `txs` reaches.
    pub fn level(&self, txs: &[TxParts<'_>]) -> Level {
        let v = self.verifiable;
        let all = v == Verifiable::FULL && txs.iter().all(|p| p.rule != TxScope::Reported);
        if all {
            Level::Full
        } else if v.header_hash {
            Level::Header
        } else {
            Level::Links
        }
    }
}

/// Checks a whole block against its header and the header against its
/// hash. `logs` are the block's logs from `eth_getLogs` (then there are
/// no receipts), each of which must be in the header's bloom.
pub fn check_block(
    header: &BlockHeader,
    txs: &[TxParts<'_>],
    logs: Option<&[Log]>,
    scope: &BlockScope,
) -> Result<(), Failure> {
    let n = header.number;
    let v = scope.verifiable;
    let fields = header::fields(header)?;
    let mut encodings = Vec::with_capacity(txs.len());
    let mut reported = false;
    for (i, p) in txs.iter().enumerate() {
        match p.rule {
            TxScope::Outside => continue,
            TxScope::Reported => {
                reported = true;
                check_place(header, i, p.tx)?;
                continue;
            }
            TxScope::Full => {}
        }
        if v.tx_hashes {
            check_tx(header, i, p)?;
        }
        if let Ok(proof) = p.proof {
            encodings.push(proof.encoding.as_slice());
        }
    }
    let root = ordered_root(&encodings);
    if v.transactions_root && !reported && root != fields.transactions_root {
        return Err(Failure::hashes(
            n,
            "transactionsRoot",
            &fields.transactions_root,
            &root,
            &format!("the {} transactions", txs.len()),
        ));
    }
    let withdrawals = if scope.withdrawals_root_is_storage_root {
        (&None, &None)
    } else {
        (&fields.withdrawals, &fields.withdrawals_root)
    };
    match withdrawals {
        (Some(ws), Some(node)) => {
            let root = withdrawals_root(ws);
            if root != *node {
                return Err(Failure::hashes(
                    n,
                    "withdrawalsRoot",
                    node,
                    &root,
                    &format!("the {} withdrawals", ws.len()),
                ));
            }
        }
        (None, Some(_)) => return Err(Failure::missing(n, "withdrawals")),
        (Some(_), None) => return Err(Failure::missing(n, "withdrawalsRoot")),
        (None, None) => {}
    }
    let in_trie: Vec<&TxParts<'_>> = txs.iter().filter(|p| p.rule != TxScope::Outside).collect();
    if v.receipts_root && !reported && in_trie.iter().all(|p| p.receipt.is_some()) {
        check_receipts(header, fields.receipts_root, &in_trie, scope)?;
    }
    // Last: a changed root is named above rather than as a changed hash.
    let computed = if v.header_hash {
        header_hash(header)?
    } else {
        header.hash
    };
    if computed != header.hash {
        return Err(Failure::hashes(
            n,
            "hash",
            &header.hash,
            &computed,
            "the header's fields",
        ));
    }
    if let Some(logs) = logs {
        let bloom = header
            .logs_bloom
            .as_deref()
            .ok_or_else(|| Failure::missing(n, "logsBloom"))?;
        for log in logs {
            let items = std::iter::once(&log.address[..]).chain(log.topics.iter().map(|t| &t[..]));
            for item in items {
                if !bloom_may_contain(bloom, item) {
                    return Err(Failure::new(
                        n,
                        format!("log {}", log.log_index),
                        format!(
                            "a log of {} with {} topics",
                            hex0x(&log.address),
                            log.topics.len()
                        ),
                        format!("the header's logsBloom does not hold {}", hex0x(item)),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Where the node says a transaction is (its block hash, number and
/// index) against where it is.
fn check_place(header: &BlockHeader, i: usize, tx: &Tx) -> Result<(), Failure> {
    let n = header.number;
    let at = |field: &str| {
        let hash = tx.hash.map(|h| hex0x(&h)).unwrap_or_default();
        format!("tx {i} ({hash}) {field}")
    };
    if let Some(h) = tx.block_hash.filter(|h| *h != header.hash) {
        return Err(Failure::hashes(
            n,
            at("blockHash"),
            &h,
            &header.hash,
            "the block's fields",
        ));
    }
    if let Some(b) = tx.block_number.filter(|b| *b != n) {
        return Err(Failure::new(
            n,
            at("blockNumber"),
            b.to_string(),
            format!("it is in block {n}"),
        ));
    }
    if let Some(x) = tx.index.filter(|x| *x != i as u64) {
        return Err(Failure::new(
            n,
            at("transactionIndex"),
            x.to_string(),
            format!("it is at index {i}"),
        ));
    }
    Ok(())
}

/// What a transaction says about itself against its encoding and place.
fn check_tx(header: &BlockHeader, i: usize, p: &TxParts<'_>) -> Result<(), Failure> {
    let n = header.number;
    let tx = p.tx;
    let proof = match p.proof {
        Ok(proof) => proof,
        Err(e) => {
            return Err(Failure::new(
                n,
                format!("tx {i}"),
                format!("a transaction of type {}", tx.tx_type),
                format!("it cannot be encoded: {e}"),
            ));
        }
    };
    let node_hash = tx
        .hash
        .ok_or_else(|| Failure::missing(n, format!("tx {i} hash")))?;
    if proof.hash != node_hash {
        return Err(Failure::hashes(
            n,
            format!("tx {i} hash"),
            &node_hash,
            &proof.hash,
            "its signed fields",
        ));
    }
    check_place(header, i, tx)?;
    let at = |field: &str| format!("tx {i} ({}) {field}", hex0x(&node_hash));
    // A legacy transaction's `chainId` and `yParity` are not hashed: when
    // `v` encodes a chain (EIP-155) they must repeat what it says. (Before
    // EIP-155 nodes send all sorts of `chainId`; it is not stored.)
    if let (0, Some(v)) = (tx.tx_type, tx.v)
        && let Some(id) = Tx::eip155_chain_id(&v)
    {
        if let Some(c) = tx.chain_id.filter(|c| *c != id) {
            return Err(Failure::new(
                n,
                at("chainId"),
                c.to_decimal(),
                format!("v gives chain {}", id.to_decimal()),
            ));
        }
        let parity = U256::from_u64(u64::from(1 - (v.0[31] & 1)));
        if let Some(p) = tx.y_parity.filter(|p| *p != parity) {
            return Err(Failure::new(
                n,
                at("yParity"),
                p.to_decimal(),
                format!("v gives {}", parity.to_decimal()),
            ));
        }
    }
    // A typed transaction's `v` is not hashed: it must repeat `yParity`.
    if let (true, Some(v), Some(p)) = (tx.tx_type != 0, tx.v, tx.y_parity)
        && v != p
    {
        return Err(Failure::new(
            n,
            at("v"),
            v.to_decimal(),
            format!("yParity is {}", p.to_decimal()),
        ));
    }
    // The fee-market transactions' `gasPrice` is not hashed either: it is
    // the price paid, min(maxFeePerGas, baseFee + maxPriorityFeePerGas).
    if let (Some(paid), Some(expected)) = (tx.gas_price, effective_price(header, tx, true))
        && tx.tx_type >= 2
        && paid != expected
    {
        return Err(Failure::new(
            n,
            at("gasPrice"),
            paid.to_decimal(),
            format!("its fees and the base fee give {}", expected.to_decimal()),
        ));
    }
    Ok(())
}

/// The price per gas `tx` paid: its `gasPrice` (legacy, access-list), or
/// min(maxFeePerGas, baseFee + maxPriorityFeePerGas). `None` when a field
/// it needs is absent.
/// `tips_paid` false: the base fee alone (what Arbitrum charges, in its
/// receipts; its transaction objects report the usual formula).
fn effective_price(header: &BlockHeader, tx: &Tx, tips_paid: bool) -> Option<U256> {
    // Chain-specific types price gas their own way (OP deposits buy it on
    // L1, Celo's in a fee currency): nothing to derive here.
    if tx.tx_type > 4 {
        return None;
    }
    if tx.tx_type < 2 {
        return tx.gas_price;
    }
    let base = header.fields.as_ref()?.base_fee_per_gas?;
    let (cap, tip) = (tx.max_fee_per_gas?, tx.max_priority_fee_per_gas?);
    if !tips_paid {
        return Some(base.min(cap));
    }
    Some(add(&base, &tip).map_or(cap, |sum| sum.min(cap)))
}

/// a + b, or `None` on overflow.
fn add(a: &U256, b: &U256) -> Option<U256> {
    let mut out = [0u8; 32];
    let mut carry = 0u16;
    for i in (0..32).rev() {
        let s = u16::from(a.0[i]) + u16::from(b.0[i]) + carry;
        out[i] = s as u8;
        carry = s >> 8;
    }
    (carry == 0).then_some(U256(out))
}

/// The receipts against the header (root, bloom) and against their
/// transactions (gas used, price paid, created address).
fn check_receipts(
    header: &BlockHeader,
    node_root: B256,
    txs: &[&TxParts<'_>],
    scope: &BlockScope,
) -> Result<(), Failure> {
    let n = header.number;
    let mut encodings = Vec::with_capacity(txs.len());
    let mut bloom = [0u8; 256];
    let mut cumulative = 0u64;
    for (i, p) in txs.iter().enumerate() {
        let Some((r, proof)) = p.receipt else {
            continue;
        };
        let proof = proof
            .as_ref()
            .map_err(|field| Failure::missing(n, format!("receipt {i} {field}")))?;
        // The node's own bloom is in the encoding when it sent one (see
        // `receipt_encoding`): a wrong one is caught by the root below.
        for (b, x) in bloom.iter_mut().zip(proof.bloom.iter()) {
            *b |= x;
        }
        encodings.push(proof.encoding.as_slice());
        // Gas used is not in the trie; the cumulative gas is.
        let total = r.cumulative_gas_used.unwrap_or_default();
        let used = total.checked_sub(cumulative);
        if let Some(g) = r.gas_used.filter(|g| Some(*g) != used) {
            return Err(Failure::new(
                n,
                format!("receipt {i} gasUsed"),
                g.to_string(),
                format!(
                    "the cumulative gas gives {}",
                    used.map_or("less than the receipt before".into(), |u| u.to_string())
                ),
            ));
        }
        cumulative = total;
        if let (Some(paid), Some(expected)) = (
            r.effective_gas_price,
            effective_price(header, p.tx, scope.tips_paid),
        ) && paid != expected
        {
            return Err(Failure::new(
                n,
                format!("receipt {i} effectiveGasPrice"),
                paid.to_decimal(),
                format!("the transaction's fees give {}", expected.to_decimal()),
            ));
        }
        if let Some(node) = r.contract_address {
            // An OP deposit's own nonce field is not signed; from Regolith
            // its receipt's depositNonce (in receiptsRoot) is the nonce it
            // created with, as op-geth derives the address.
            let (nonce, what) = match (p.tx.tx_type, r.deposit_nonce) {
                (0x7e, Some(deposit_nonce)) => (Some(deposit_nonce), "the sender and depositNonce"),
                _ => (p.tx.nonce, "the sender and nonce"),
            };
            let expected = match (p.tx.to, p.sender, nonce) {
                (None, Some(sender), Some(nonce)) => Some(create_address(sender, nonce)),
                (None, _, _) => None, // no sender to derive it from
                (Some(_), _, _) => {
                    return Err(Failure::new(
                        n,
                        format!("receipt {i} contractAddress"),
                        hex0x(&node),
                        "the transaction is a call, not a creation",
                    ));
                }
            };
            if let Some(expected) = expected.filter(|e| *e != node) {
                return Err(Failure::hashes(
                    n,
                    format!("receipt {i} contractAddress"),
                    &node,
                    &expected,
                    what,
                ));
            }
        }
    }
    let root = ordered_root(&encodings);
    if root != node_root {
        return Err(Failure::hashes(
            n,
            "receiptsRoot",
            &node_root,
            &root,
            &format!("the {} receipts", encodings.len()),
        ));
    }
    let node_bloom = header
        .logs_bloom
        .as_deref()
        .ok_or_else(|| Failure::missing(n, "logsBloom"))?;
    if *node_bloom != bloom {
        return Err(Failure::hashes(
            n,
            "logsBloom",
            node_bloom,
            &bloom,
            "the receipts' logs",
        ));
    }
    Ok(())
}

/// The address a creation by `sender` at `nonce` deploys to:
/// keccak256(rlp([sender, nonce]))[12..].
fn create_address(sender: &[u8; 20], nonce: u64) -> [u8; 20] {
    use alloy_rlp::{Encodable, Header};
    let mut out = Vec::with_capacity(32);
    Header {
        list: true,
        payload_length: sender.length() + nonce.length(),
    }
    .encode(&mut out);
    sender.encode(&mut out);
    nonce.encode(&mut out);
    keccak(&[&out])[12..].try_into().expect("20 bytes")
}

/// Log indexes of a block's receipts run 0, 1, 2, … across the block:
/// `next` is the index the first log of this receipt must have.
pub fn check_log_indexes(block: u64, i: usize, r: &Receipt, next: &mut u64) -> Result<(), Failure> {
    for log in &r.logs {
        if log.log_index != *next {
            return Err(Failure::new(
                block,
                format!("receipt {i} logIndex"),
                log.log_index.to_string(),
                format!("the logs before it give {next}"),
            ));
        }
        *next += 1;
    }
    Ok(())
}
