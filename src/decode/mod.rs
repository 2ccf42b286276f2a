//! Pure chain types: JSON-RPC block and transaction objects in, our own typed
//! values out, plus the signing payload of every transaction type.
//!
//! `web3`'s `Transaction` drops `chainId`, `yParity`, blob and EIP-7702
//! fields, so it cannot rebuild a signing payload; we decode the raw JSON
//! ourselves. Decoding is lenient about the quirks real nodes produce (see
//! `tests/fixtures/README.md`): zero-padded or stripped quantities, `chainId`
//! on legacy txs, missing `type`, `v` without `yParity`, `to: null`.
//!
//! This module does no I/O and touches no secp256k1 context: it parses and
//! hashes. Whether a signature is usable is decided in [`crate::recover`];
//! here a missing signature field is simply `None`.

use serde::Deserialize;
use std::ops::Range;

use serde_json::Value;
use serde_json::value::RawValue;

mod scan;
mod signing;
pub use signing::keccak;

pub type Address = [u8; 20];
pub type B256 = [u8; 32];

/// A 256-bit unsigned quantity, big-endian. RLP integers are its bytes with
/// leading zeros removed ([`U256::minimal`]).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct U256(pub [u8; 32]);

impl U256 {
    pub const ZERO: U256 = U256([0; 32]);

    pub fn from_u64(v: u64) -> U256 {
        let mut b = [0u8; 32];
        b[24..].copy_from_slice(&v.to_be_bytes());
        U256(b)
    }

    /// Big-endian bytes without leading zeros (empty for zero): the RLP
    /// integer encoding.
    pub fn minimal(&self) -> &[u8] {
        let first = self.0.iter().position(|&b| b != 0).unwrap_or(32);
        &self.0[first..]
    }

    pub fn is_zero(&self) -> bool {
        self.0 == [0; 32]
    }

    pub fn to_u64(&self) -> Option<u64> {
        if self.0[..24].iter().any(|&b| b != 0) {
            return None;
        }
        Some(u64::from_be_bytes(self.0[24..].try_into().unwrap()))
    }

    /// Decimal digits, for display and PostgreSQL `NUMERIC`.
    pub fn to_decimal(&self) -> String {
        // Schoolbook division by 10^19 on four u64 limbs.
        let mut limbs = [0u64; 4];
        for (i, limb) in limbs.iter_mut().enumerate() {
            *limb = u64::from_be_bytes(self.0[i * 8..i * 8 + 8].try_into().unwrap());
        }
        const BASE: u128 = 10_000_000_000_000_000_000;
        let mut parts = Vec::new();
        while limbs.iter().any(|&l| l != 0) {
            let mut rem: u128 = 0;
            for limb in limbs.iter_mut() {
                let cur = (rem << 64) | *limb as u128;
                *limb = (cur / BASE) as u64;
                rem = cur % BASE;
            }
            parts.push(rem as u64);
        }
        match parts.split_last() {
            None => "0".to_string(),
            Some((most, rest)) => {
                let mut s = most.to_string();
                for p in rest.iter().rev() {
                    s.push_str(&format!("{p:019}"));
                }
                s
            }
        }
    }
}

impl std::fmt::Debug for U256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{}", const_hex::encode(self.minimal()))
    }
}

/// A malformed field in a JSON-RPC object. Absent fields are not errors
/// here; they are `None` and judged by whoever needs them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a JSON object: {0}")]
    Json(String),
    #[error("field {field}: {problem}: {value:?}")]
    Field {
        field: &'static str,
        problem: &'static str,
        value: String,
    },
    #[error("missing field {0}")]
    Missing(&'static str),
}

fn bad(field: &'static str, problem: &'static str, value: &[u8]) -> DecodeError {
    // The value is untrusted text: shown lossily, cut on a character boundary.
    let mut value = String::from_utf8_lossy(value).into_owned();
    if value.len() > 80 {
        let cut = (0..=80)
            .rev()
            .find(|&i| value.is_char_boundary(i))
            .unwrap_or(0);
        value.truncate(cut);
        value.push('…');
    }
    DecodeError::Field {
        field,
        problem,
        value,
    }
}

fn strip_0x<'a>(field: &'static str, s: &'a [u8]) -> Result<&'a [u8], DecodeError> {
    s.strip_prefix(b"0x")
        .or_else(|| s.strip_prefix(b"0X"))
        .ok_or_else(|| bad(field, "expected 0x-prefixed hex", s))
}

/// A hex quantity. Accepts leading zeros (zero-padded r/s), odd digit
/// counts, and `0x` alone as zero.
pub fn parse_u256(
    field: &'static str,
    s: &(impl AsRef<[u8]> + ?Sized),
) -> Result<U256, DecodeError> {
    let s = s.as_ref();
    let digits = strip_0x(field, s)?;
    let digits = &digits[digits
        .iter()
        .position(|&c| c != b'0')
        .unwrap_or(digits.len())..];
    if digits.len() > 64 {
        return Err(bad(field, "quantity exceeds 256 bits", s));
    }
    if digits.len() <= 16 {
        // Fees, gas, nonces, values, v: most quantities fit a u64. No branch
        // per digit: one on digit-or-letter mispredicts on real hex.
        let (mut v, mut invalid) = (0u64, 0u8);
        for &c in digits {
            let nibble = HEX_VALUE[usize::from(c)];
            invalid |= nibble;
            v = (v << 4) | u64::from(nibble & 0x0f);
        }
        return if invalid > 0x0f {
            Err(bad(field, "invalid hex digit", s))
        } else {
            Ok(U256::from_u64(v))
        };
    }
    // Longer ones (r, s, some values): right-align the digits in 64 zeros and
    // decode them as 32 bytes in one vectorised pass (a nibble loop here was
    // a third of all decoding time).
    let mut padded = [b'0'; 64];
    padded[64 - digits.len()..].copy_from_slice(digits);
    let mut out = [0u8; 32];
    const_hex::decode_to_slice(padded, &mut out).map_err(|_| bad(field, "invalid hex digit", s))?;
    Ok(U256(out))
}

pub fn parse_u64(field: &'static str, s: &(impl AsRef<[u8]> + ?Sized)) -> Result<u64, DecodeError> {
    parse_u256(field, s)?
        .to_u64()
        .ok_or_else(|| bad(field, "quantity exceeds 64 bits", s.as_ref()))
}

/// Each byte's value as a hex digit, or 0xff if it is not one.
const HEX_VALUE: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// Hex data of any length (even digit count).
pub fn parse_bytes(
    field: &'static str,
    s: &(impl AsRef<[u8]> + ?Sized),
) -> Result<Vec<u8>, DecodeError> {
    let s = s.as_ref();
    const_hex::decode(strip_0x(field, s)?).map_err(|_| bad(field, "invalid hex data", s))
}

/// Hex data of exactly `N` bytes (addresses, hashes).
pub fn parse_fixed<const N: usize>(
    field: &'static str,
    s: &(impl AsRef<[u8]> + ?Sized),
) -> Result<[u8; N], DecodeError> {
    let s = s.as_ref();
    let mut out = [0u8; N];
    const_hex::decode_to_slice(strip_0x(field, s)?, &mut out).map_err(|_| {
        if s.len() == 2 + 2 * N {
            bad(field, "invalid hex digit", s)
        } else {
            bad(field, "wrong length", s)
        }
    })?;
    Ok(out)
}

fn opt<T>(
    field: &'static str,
    s: Option<&[u8]>,
    parse: impl Fn(&'static str, &[u8]) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    s.map(|s| parse(field, s)).transpose()
}

// ---------------------------------------------------------------------------
// Wire shapes: borrowed strings, so decoding from `&Value` or `&str` copies
// nothing until hex is parsed. `scan` fills them in one pass; serde_json
// reads what `scan` declines. Hex fields are borrowed as bytes, not `&str`:
// serde_json then finds a string's end with a vectorised `memchr2` instead
// of a loop that also looks for control characters, and nothing is lost,
// since the hex parsers reject every byte that is not a digit.

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(rename_all = "camelCase")]
struct WireTx<'a> {
    #[serde(borrow)]
    hash: Option<&'a [u8]>,
    #[serde(borrow, rename = "type")]
    tx_type: Option<&'a [u8]>,
    #[serde(borrow)]
    block_number: Option<&'a [u8]>,
    #[serde(borrow)]
    transaction_index: Option<&'a [u8]>,
    #[serde(borrow)]
    chain_id: Option<&'a [u8]>,
    #[serde(borrow)]
    nonce: Option<&'a [u8]>,
    #[serde(borrow)]
    gas_price: Option<&'a [u8]>,
    #[serde(borrow)]
    max_priority_fee_per_gas: Option<&'a [u8]>,
    #[serde(borrow)]
    max_fee_per_gas: Option<&'a [u8]>,
    #[serde(borrow)]
    max_fee_per_blob_gas: Option<&'a [u8]>,
    #[serde(borrow)]
    gas: Option<&'a [u8]>,
    #[serde(borrow)]
    to: Option<&'a [u8]>,
    #[serde(borrow)]
    value: Option<&'a [u8]>,
    #[serde(borrow, alias = "data")]
    input: Option<&'a [u8]>,
    #[serde(borrow)]
    access_list: Option<Vec<WireAccessItem<'a>>>,
    #[serde(borrow)]
    blob_versioned_hashes: Option<Vec<&'a [u8]>>,
    #[serde(borrow)]
    authorization_list: Option<Vec<WireAuth<'a>>>,
    #[serde(borrow)]
    v: Option<&'a [u8]>,
    #[serde(borrow)]
    y_parity: Option<&'a [u8]>,
    #[serde(borrow)]
    r: Option<&'a [u8]>,
    #[serde(borrow)]
    s: Option<&'a [u8]>,
    #[serde(borrow)]
    from: Option<&'a [u8]>,
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(rename_all = "camelCase")]
struct WireAccessItem<'a> {
    #[serde(borrow)]
    address: &'a [u8],
    #[serde(borrow, default)]
    storage_keys: Vec<&'a [u8]>,
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(rename_all = "camelCase")]
struct WireAuth<'a> {
    #[serde(borrow)]
    chain_id: Option<&'a [u8]>,
    #[serde(borrow)]
    address: Option<&'a [u8]>,
    #[serde(borrow)]
    nonce: Option<&'a [u8]>,
    #[serde(borrow)]
    y_parity: Option<&'a [u8]>,
    #[serde(borrow)]
    v: Option<&'a [u8]>,
    #[serde(borrow)]
    r: Option<&'a [u8]>,
    #[serde(borrow)]
    s: Option<&'a [u8]>,
}

// ---------------------------------------------------------------------------
// Our types.

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessItem {
    pub address: Address,
    pub storage_keys: Vec<B256>,
}

/// An EIP-7702 authorization tuple. Signature fields stay optional: a bad
/// tuple makes only its own authority unrecoverable, never the transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Authorization {
    pub chain_id: Option<U256>,
    pub address: Option<Address>,
    pub nonce: Option<u64>,
    /// `yParity`, or `v` where a node reports that instead.
    pub y_parity: Option<U256>,
    pub r: Option<U256>,
    pub s: Option<U256>,
}

/// A transaction as the node described it. Absent fields are `None`;
/// whether the signing payload can be built is decided by [`Tx::signing_hash`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tx {
    pub hash: Option<B256>,
    pub block_number: Option<u64>,
    pub index: Option<u64>,
    /// The EIP-2718 type; a missing `type` field means legacy (0).
    pub tx_type: u8,
    pub chain_id: Option<U256>,
    pub nonce: Option<u64>,
    pub gas_price: Option<U256>,
    pub max_priority_fee_per_gas: Option<U256>,
    pub max_fee_per_gas: Option<U256>,
    pub max_fee_per_blob_gas: Option<U256>,
    pub gas: Option<U256>,
    /// `None` for a contract creation.
    pub to: Option<Address>,
    pub value: Option<U256>,
    pub input: Vec<u8>,
    pub access_list: Vec<AccessItem>,
    pub blob_versioned_hashes: Vec<B256>,
    pub authorization_list: Vec<Authorization>,
    pub v: Option<U256>,
    pub y_parity: Option<U256>,
    pub r: Option<U256>,
    pub s: Option<U256>,
    /// The sender the node claims; we recover our own and compare.
    pub from: Option<Address>,
}

/// Why a signing payload cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("unsupported transaction type 0x{0:02x} (not a signed Ethereum transaction)")]
    UnsupportedType(u8),
    #[error("missing field {0} required by a type {1} transaction")]
    Missing(&'static str, u8),
}

impl Tx {
    /// Decodes a JSON-RPC transaction object (from `eth_getBlockByNumber(n,
    /// true)` or `eth_getTransactionByHash`).
    pub fn from_value(v: &Value) -> Result<Tx, DecodeError> {
        let wire = WireTx::deserialize(v).map_err(|e| DecodeError::Json(e.to_string()))?;
        Tx::from_wire(wire)
    }

    /// Decodes one JSON text holding a transaction object.
    pub fn from_json(s: &str) -> Result<Tx, DecodeError> {
        // The plain shape nodes send is read by `scan`; anything else, and
        // every error message, comes from serde_json.
        let wire = match scan::tx(s) {
            Some(wire) => wire,
            None => serde_json::from_str(s).map_err(|e| DecodeError::Json(e.to_string()))?,
        };
        Tx::from_wire(wire)
    }

    fn from_wire(w: WireTx<'_>) -> Result<Tx, DecodeError> {
        let tx_type = match w.tx_type {
            None => 0,
            Some(t) => {
                let t64 = parse_u64("type", t)?;
                u8::try_from(t64).map_err(|_| bad("type", "not a transaction type", t))?
            }
        };
        let access_list = w
            .access_list
            .unwrap_or_default()
            .into_iter()
            .map(|item| {
                Ok(AccessItem {
                    address: parse_fixed("accessList.address", item.address)?,
                    storage_keys: item
                        .storage_keys
                        .into_iter()
                        .map(|k| parse_fixed("accessList.storageKeys", k))
                        .collect::<Result<_, _>>()?,
                })
            })
            .collect::<Result<_, DecodeError>>()?;
        let authorization_list = w
            .authorization_list
            .unwrap_or_default()
            .into_iter()
            .map(|a| {
                Ok(Authorization {
                    chain_id: opt("authorizationList.chainId", a.chain_id, parse_u256)?,
                    address: opt("authorizationList.address", a.address, parse_fixed)?,
                    nonce: opt("authorizationList.nonce", a.nonce, parse_u64)?,
                    y_parity: opt("authorizationList.yParity", a.y_parity.or(a.v), parse_u256)?,
                    r: opt("authorizationList.r", a.r, parse_u256)?,
                    s: opt("authorizationList.s", a.s, parse_u256)?,
                })
            })
            .collect::<Result<_, DecodeError>>()?;
        // `to: ""` or `"0x"` appears for creations on some nodes.
        let to = match w.to {
            Some(b"") | Some(b"0x") | None => None,
            Some(t) => Some(parse_fixed("to", t)?),
        };
        Ok(Tx {
            hash: opt("hash", w.hash, parse_fixed)?,
            block_number: opt("blockNumber", w.block_number, parse_u64)?,
            index: opt("transactionIndex", w.transaction_index, parse_u64)?,
            tx_type,
            chain_id: opt("chainId", w.chain_id, parse_u256)?,
            nonce: opt("nonce", w.nonce, parse_u64)?,
            gas_price: opt("gasPrice", w.gas_price, parse_u256)?,
            max_priority_fee_per_gas: opt(
                "maxPriorityFeePerGas",
                w.max_priority_fee_per_gas,
                parse_u256,
            )?,
            max_fee_per_gas: opt("maxFeePerGas", w.max_fee_per_gas, parse_u256)?,
            max_fee_per_blob_gas: opt("maxFeePerBlobGas", w.max_fee_per_blob_gas, parse_u256)?,
            gas: opt("gas", w.gas, parse_u256)?,
            to,
            value: opt("value", w.value, parse_u256)?,
            input: opt("input", w.input, parse_bytes)?.unwrap_or_default(),
            access_list,
            blob_versioned_hashes: w
                .blob_versioned_hashes
                .unwrap_or_default()
                .into_iter()
                .map(|h| parse_fixed("blobVersionedHashes", h))
                .collect::<Result<_, _>>()?,
            authorization_list,
            v: opt("v", w.v, parse_u256)?,
            y_parity: opt("yParity", w.y_parity, parse_u256)?,
            r: opt("r", w.r, parse_u256)?,
            s: opt("s", w.s, parse_u256)?,
            from: opt("from", w.from, parse_fixed)?,
        })
    }
}

/// The header fields a block row needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHeader {
    pub number: u64,
    pub hash: B256,
    pub parent_hash: B256,
    pub timestamp: u64,
}

/// A full block as the node sends it, borrowing from the text it is read
/// from; fields the index does not need are skipped unparsed. Public so
/// that a JSON-RPC answer holding several blocks is read in one pass.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BlockWire<'a> {
    #[serde(borrow)]
    number: Option<&'a str>,
    #[serde(borrow)]
    hash: Option<&'a str>,
    #[serde(borrow)]
    parent_hash: Option<&'a str>,
    #[serde(borrow)]
    timestamp: Option<&'a str>,
    #[serde(borrow, default)]
    transactions: Option<Vec<&'a RawValue>>,
}

impl BlockWire<'_> {
    /// The header, and where each transaction's JSON lies in `base`: the
    /// text this block was read from (a block, or a whole response).
    pub fn split(self, base: &str) -> Result<(BlockHeader, Vec<Range<usize>>), DecodeError> {
        fn field<'a>(name: &'static str, v: Option<&'a str>) -> Result<&'a str, DecodeError> {
            v.ok_or(DecodeError::Missing(name))
        }
        let head = BlockHeader {
            number: parse_u64("number", field("number", self.number)?)?,
            hash: parse_fixed("hash", field("hash", self.hash)?)?,
            parent_hash: parse_fixed("parentHash", field("parentHash", self.parent_hash)?)?,
            timestamp: parse_u64("timestamp", field("timestamp", self.timestamp)?)?,
        };
        let base_start = base.as_ptr() as usize;
        let mut txs = Vec::new();
        for raw in self.transactions.unwrap_or_default() {
            let tx = raw.get();
            // Hashes instead of objects: the node ignored `true`, or a proxy
            // rewrote the call. Say so rather than fail on every transaction.
            if !tx.starts_with('{') {
                let shown: String = tx.chars().take(80).collect();
                return Err(DecodeError::Field {
                    field: "transactions",
                    problem: "expected full transaction objects (eth_getBlockByNumber with true)",
                    value: shown,
                });
            }
            // `raw` borrows from `base`, so its offset is a subtraction.
            let start = (tx.as_ptr() as usize)
                .checked_sub(base_start)
                .filter(|s| s + tx.len() <= base.len())
                .ok_or_else(|| DecodeError::Json("block not read from this text".into()))?;
            txs.push(start..start + tx.len());
        }
        Ok((head, txs))
    }
}

/// Reads a full block's header and where each transaction's JSON lies in
/// `text` (byte ranges), without building a value tree. The one-block form
/// of [`BlockWire::split`]; the rpc stage reads whole answers instead.
pub fn split_block(text: &str) -> Result<(BlockHeader, Vec<Range<usize>>), DecodeError> {
    let wire: BlockWire = serde_json::from_str(text)
        .map_err(|e| DecodeError::Json(format!("expected a block object: {e}")))?;
    wire.split(text)
}

/// A fetched block: its header, and its transactions as byte ranges of
/// `text`, the response body it came in (shared with the other blocks of
/// its batch, so nothing is copied per block or per transaction).
#[derive(Debug, Clone)]
pub struct RawBlock {
    pub text: std::sync::Arc<String>,
    pub header: BlockHeader,
    pub txs: Vec<Range<usize>>,
}

impl RawBlock {
    /// The JSON text of transaction `i`.
    pub fn tx_json(&self, i: usize) -> Option<&str> {
        self.txs.get(i).map(|r| &self.text[r.clone()])
    }
}

pub fn hex0x(bytes: &[u8]) -> String {
    format!("0x{}", const_hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_accept_padding_stripping_and_odd_lengths() {
        let a = parse_u256(
            "r",
            "0x00000000000000000000000000000000000000000000000000000000000abc",
        )
        .unwrap();
        let b = parse_u256("r", "0xabc").unwrap();
        assert_eq!(a, b);
        assert_eq!(b.minimal(), &[0x0a, 0xbc]);
        assert_eq!(parse_u256("v", "0x").unwrap(), U256::ZERO);
        assert!(parse_u256("v", "12").is_err());
        assert!(parse_u256("v", "0xzz").is_err());
        assert!(parse_u256("v", &format!("0x1{}", "0".repeat(64))).is_err());
        // Every digit position, both cases, against a reference parse.
        let digits = "0123456789abcdefABCDEF0123456789abcdef0123456789ABCDEF0123456789";
        for len in 0..=64 {
            let text = format!("0x{}", &digits[..len]);
            let want = (0..len).fold([0u8; 32], |mut acc, i| {
                let nib = u8::from_str_radix(&digits[i..=i], 16).unwrap();
                let pos = len - 1 - i; // nibble index from the right
                acc[31 - pos / 2] |= nib << ((pos % 2) * 4);
                acc
            });
            assert_eq!(parse_u256("x", &text).unwrap().0, want, "{text}");
        }
        // A bad digit anywhere, including in the padded middle.
        for bad in [
            "0xg",
            "0x1g",
            &format!("0x{}g{}", "1".repeat(40), "2".repeat(20)),
        ] {
            let err = parse_u256("r", bad).unwrap_err().to_string();
            assert!(err.contains("invalid hex digit"), "{bad}: {err}");
        }
    }

    #[test]
    fn u64_quantities_are_exact_and_bounded() {
        assert_eq!(parse_u64("nonce", "0x0").unwrap(), 0);
        assert_eq!(parse_u64("nonce", "0x").unwrap(), 0);
        assert_eq!(parse_u64("nonce", "0x00ff").unwrap(), 255);
        assert_eq!(parse_u64("nonce", "0xFFFFFFFFFFFFFFFF").unwrap(), u64::MAX);
        assert_eq!(
            parse_u64("nonce", &format!("0x{}1", "0".repeat(70))).unwrap(),
            1
        );
        let too_big = parse_u64("nonce", "0x10000000000000000").unwrap_err();
        assert!(too_big.to_string().contains("exceeds 64 bits"), "{too_big}");
        let bad = parse_u64("nonce", "0x1x").unwrap_err();
        assert!(bad.to_string().contains("invalid hex digit"), "{bad}");
        let bad = parse_u64("nonce", "0x1234567890abcdefx").unwrap_err();
        assert!(bad.to_string().contains("invalid hex digit"), "{bad}");
    }

    #[test]
    fn quoted_bad_values_are_cut_on_a_character_boundary() {
        // 79 ASCII bytes, then a 3-byte character across the 80-byte cut.
        let value = format!("0x{}€€", "1".repeat(77));
        let err = parse_u256("value", &value).unwrap_err().to_string();
        assert!(err.contains(&format!("0x{}…", "1".repeat(77))), "{err}");
    }

    #[test]
    fn decimal_rendering_is_exact() {
        assert_eq!(U256::ZERO.to_decimal(), "0");
        assert_eq!(
            U256::from_u64(u64::MAX).to_decimal(),
            "18446744073709551615"
        );
        let max = U256([0xff; 32]);
        assert_eq!(
            max.to_decimal(),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935"
        );
        let ten_pow_19 = parse_u256("x", "0x8ac7230489e80000").unwrap();
        assert_eq!(ten_pow_19.to_decimal(), "10000000000000000000");
    }

    #[test]
    fn eip155_is_decided_from_v() {
        assert_eq!(Tx::eip155_chain_id(&U256::from_u64(27)), None);
        assert_eq!(Tx::eip155_chain_id(&U256::from_u64(28)), None);
        assert_eq!(
            Tx::eip155_chain_id(&U256::from_u64(37)),
            Some(U256::from_u64(1))
        );
        assert_eq!(
            Tx::eip155_chain_id(&U256::from_u64(38)),
            Some(U256::from_u64(1))
        );
        // v beyond 2^53: the hive chain id 0xc72dd9d5e883e.
        let id = 0xc72dd9d5e883e_u64;
        assert_eq!(
            Tx::eip155_chain_id(&U256::from_u64(id * 2 + 36)),
            Some(U256::from_u64(id))
        );
        // A v that wraps past one byte while subtracting 35.
        assert_eq!(
            Tx::eip155_chain_id(&U256::from_u64(291)),
            Some(U256::from_u64(128))
        );
    }

    #[test]
    fn malformed_fields_are_named() {
        let err = Tx::from_json(r#"{"hash":"0x12","type":"0x2"}"#).unwrap_err();
        assert!(err.to_string().contains("hash"), "{err}");
        let err = Tx::from_json(r#"{"nonce":7}"#).unwrap_err();
        assert!(matches!(err, DecodeError::Json(_)), "{err}");
    }

    const H1: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";
    const H2: &str = "0x2222222222222222222222222222222222222222222222222222222222222222";

    fn block(txs: &str) -> String {
        format!(
            r#"{{"number":"0x2a","hash":"{H1}","parentHash":"{H2}","timestamp":"0x64","uncles":[],"transactions":{txs},"size":"0x1"}}"#
        )
    }

    #[test]
    fn splits_header_and_transaction_slices() {
        let text = block(r#"[ {"hash":"0x01"} , {"nonce":"0x2","blobs":["0xabcd"]}]"#);
        let (head, ranges) = split_block(&text).unwrap();
        assert_eq!(
            head,
            BlockHeader {
                number: 42,
                hash: [0x11; 32],
                parent_hash: [0x22; 32],
                timestamp: 100,
            }
        );
        let slices: Vec<_> = ranges.iter().map(|r| &text[r.clone()]).collect();
        assert_eq!(
            slices,
            [
                r#"{"hash":"0x01"}"#,
                r#"{"nonce":"0x2","blobs":["0xabcd"]}"#
            ]
        );
        for empty in ["[]", "null"] {
            assert!(split_block(&block(empty)).unwrap().1.is_empty(), "{empty}");
        }
    }

    #[test]
    fn ranges_are_only_taken_from_the_text_read() {
        let text = block(r#"[{"hash":"0x01"}]"#);
        let wire: BlockWire = serde_json::from_str(&text).unwrap();
        let other = text.clone();
        let err = wire.split(&other).unwrap_err();
        assert!(err.to_string().contains("not read from this text"), "{err}");
    }

    #[test]
    fn malformed_blocks_name_the_problem() {
        let hashes = block(&format!(r#"["{H1}"]"#));
        let err = split_block(&hashes).unwrap_err().to_string();
        assert!(
            err.contains("expected full transaction objects (eth_getBlockByNumber with true)"),
            "{err}"
        );
        assert!(err.contains(H1), "{err}");
        let no_ts = block("[]").replace(r#""timestamp":"0x64","#, "");
        assert_eq!(
            split_block(&no_ts).unwrap_err(),
            DecodeError::Missing("timestamp")
        );
        let bad_hash = block("[]").replace(H1, "0x11");
        assert!(matches!(
            split_block(&bad_hash).unwrap_err(),
            DecodeError::Field { field: "hash", .. }
        ));
        let err = split_block("[1,2]").unwrap_err().to_string();
        assert!(
            err.starts_with("not a JSON object: expected a block object"),
            "{err}"
        );
    }
}
