//! Transactions: the JSON-RPC transaction object (its wire shape, read by
//! `scan` or serde_json) into our own [`Tx`]. Lenient about the quirks real
//! nodes produce (see `tests/fixtures/README.md`); a malformed field is an
//! error that names it. The signing payload is `signing`'s; recovery is
//! `crate::recover`'s.

use serde::Deserialize;
use serde_json::Value;

use super::chain_tx::{ChainFields, chain_fields};
use super::hex::{bad, opt, parse_bytes, parse_fixed, parse_u64, parse_u256};
use super::{Address, B256, DecodeError, U256, scan};
use crate::chain::Family;

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
pub(super) struct WireTx<'a> {
    #[serde(borrow)]
    pub(super) hash: Option<&'a [u8]>,
    #[serde(borrow, rename = "type")]
    pub(super) tx_type: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) block_hash: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) block_number: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) transaction_index: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) chain_id: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) nonce: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) gas_price: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) max_priority_fee_per_gas: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) max_fee_per_gas: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) max_fee_per_blob_gas: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) gas: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) to: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) value: Option<&'a [u8]>,
    #[serde(borrow, alias = "data")]
    pub(super) input: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) access_list: Option<Vec<WireAccessItem<'a>>>,
    #[serde(borrow)]
    pub(super) blob_versioned_hashes: Option<Vec<&'a [u8]>>,
    #[serde(borrow)]
    pub(super) authorization_list: Option<Vec<WireAuth<'a>>>,
    #[serde(borrow)]
    pub(super) v: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) y_parity: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) r: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) s: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) from: Option<&'a [u8]>,
    // Chain-specific fields (`chain_tx`): read only by the family whose
    // type has them; `scan` declines any object holding one.
    #[serde(borrow)]
    pub(super) source_hash: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) mint: Option<&'a [u8]>,
    #[serde(default, deserialize_with = "flag")]
    pub(super) is_system_tx: Option<bool>,
    #[serde(borrow)]
    pub(super) deposit_receipt_version: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) queue_index: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) sender: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) request_id: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) ticket_id: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) refund_to: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) max_refund: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) submission_fee_refund: Option<&'a [u8]>,
    #[serde(borrow, rename = "l1BaseFee")]
    pub(super) l1_base_fee: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) deposit_value: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) retry_to: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) retry_value: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) retry_data: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) beneficiary: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) max_submission_fee: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) fee_currency: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) gateway_fee_recipient: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) gateway_fee: Option<&'a [u8]>,
    pub(super) eth_compatible: Option<bool>,
    #[serde(borrow)]
    pub(super) max_fee_in_fee_currency: Option<&'a [u8]>,
}

/// A flag as nodes send it: a JSON boolean (op-geth, `isSystemTx: false`)
/// or a quantity (anvil 1.7.1 sends `"0x1"`); anything else is an error.
fn flag<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    struct Flag;
    impl serde::de::Visitor<'_> for Flag {
        type Value = Option<bool>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a boolean, \"0x0\" or \"0x1\"")
        }
        fn visit_bool<E: serde::de::Error>(self, b: bool) -> Result<Self::Value, E> {
            Ok(Some(b))
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Self::Value, E> {
            match s {
                "0x0" => Ok(Some(false)),
                "0x1" => Ok(Some(true)),
                _ => Err(E::invalid_value(serde::de::Unexpected::Str(s), &self)),
            }
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }
    }
    d.deserialize_any(Flag)
}

#[derive(Deserialize)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(rename_all = "camelCase")]
pub(super) struct WireAccessItem<'a> {
    #[serde(borrow)]
    pub(super) address: &'a [u8],
    #[serde(borrow, default)]
    pub(super) storage_keys: Vec<&'a [u8]>,
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(rename_all = "camelCase")]
pub(super) struct WireAuth<'a> {
    #[serde(borrow)]
    pub(super) chain_id: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) address: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) nonce: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) y_parity: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) v: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) r: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) s: Option<&'a [u8]>,
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
    pub block_hash: Option<B256>,
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
    /// The fields of a chain-specific type (`chain_tx`), as the chain's
    /// family reads them ([`Tx::from_json_in`]); `None` for the types every
    /// chain shares.
    pub chain: Option<Box<ChainFields>>,
}

/// Why a signing payload cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PayloadError {
    #[error("unsupported transaction type 0x{0:02x} (not a signed Ethereum transaction)")]
    UnsupportedType(u8),
    #[error("missing field {0} required by a type {1} transaction")]
    Missing(&'static str, u8),
    /// An unsigned type (OP deposit, Scroll L1 message, Arbitrum 0x64-0x6a):
    /// its sender is committed by its hash, there is nothing to recover.
    #[error(
        "transaction type 0x{0:02x} carries no signature (its sender is committed by its hash)"
    )]
    Unsigned(u8),
    /// A type whose hash cannot be rebuilt from its RPC object.
    #[error("transaction type 0x{0:02x} cannot be re-encoded from its RPC object")]
    NotReproducible(u8),
}

impl Tx {
    /// Decodes a JSON-RPC transaction object (from `eth_getBlockByNumber(n,
    /// true)` or `eth_getTransactionByHash`).
    pub fn from_value(v: &Value) -> Result<Tx, DecodeError> {
        Tx::from_value_in(v, Family::Ethereum)
    }

    /// [`Tx::from_value`] on a chain of `family`, which decides what a
    /// chain-specific type byte means and which fields it has.
    pub fn from_value_in(v: &Value, family: Family) -> Result<Tx, DecodeError> {
        let wire = WireTx::deserialize(v).map_err(|e| DecodeError::Json(e.to_string()))?;
        Tx::from_wire(wire, family)
    }

    /// Decodes one JSON text holding a transaction object, by Ethereum's
    /// rules (types 0-4; any other type fails when it is encoded).
    pub fn from_json(s: &str) -> Result<Tx, DecodeError> {
        Tx::from_json_in(s, Family::Ethereum)
    }

    /// [`Tx::from_json`] on a chain of `family`: its chain-specific types
    /// keep their fields ([`Tx::chain`]), so that they can be hashed.
    pub fn from_json_in(s: &str, family: Family) -> Result<Tx, DecodeError> {
        // The plain shape nodes send is read by `scan`; anything else, and
        // every error message, comes from serde_json.
        let wire = match scan::tx(s) {
            Some(wire) => wire,
            None => serde_json::from_str(s).map_err(|e| DecodeError::Json(e.to_string()))?,
        };
        Tx::from_wire(wire, family)
    }

    fn from_wire(w: WireTx<'_>, family: Family) -> Result<Tx, DecodeError> {
        let tx_type = match w.tx_type {
            None => 0,
            Some(t) => {
                let t64 = parse_u64("type", t)?;
                u8::try_from(t64).map_err(|_| bad("type", "not a transaction type", t))?
            }
        };
        // Families with no types of their own read nothing more.
        let chain = match family {
            Family::Ethereum | Family::Polygon | Family::Bnb | Family::Avalanche => None,
            _ => chain_fields(family, tx_type, &w)?,
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
            chain,
            hash: opt("hash", w.hash, parse_fixed)?,
            block_hash: opt("blockHash", w.block_hash, parse_fixed)?,
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
