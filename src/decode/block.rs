//! Block framing: a full block's header fields, and where each of its
//! transactions lies in the JSON text it came in, read without building a
//! value tree. The header type here is the only one in the project: the
//! rpc stage, the pipeline and the store all carry [`BlockHeader`].

use std::ops::Range;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::bloom::Bloom;
use super::hex::{opt, parse_bytes, parse_fixed, parse_u64, parse_u256};
use super::{Address, B256, DecodeError, Log, U256};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHeader {
    pub number: u64,
    pub hash: B256,
    pub parent_hash: B256,
    pub timestamp: u64,
    /// `logsBloom`, when the node sent it.
    pub logs_bloom: Option<Box<Bloom>>,
    /// The rest of what the block hash commits to, when the node sent every
    /// field of it (`crate::verify` rebuilds the hash from these); `None`
    /// for a bare header (a test chain, a minimal proxy).
    pub fields: Option<Box<HeaderFields>>,
    /// `l1BlockNumber` as the node reports it (Arbitrum's nodes send it;
    /// any chain's may): the L1 block the block was built on. Not hashed as
    /// such; `verify` holds it to the number the block commits to (the chain
    /// profile's `l1_origin`), where it commits to one.
    pub l1_block_number: Option<u64>,
}

/// The header fields besides those of [`BlockHeader`] itself, as the block
/// hash commits to them, and the block's withdrawals.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderFields {
    pub ommers_hash: B256,
    pub beneficiary: Address,
    pub state_root: B256,
    pub transactions_root: B256,
    pub receipts_root: B256,
    pub difficulty: U256,
    pub gas_limit: U256,
    pub gas_used: U256,
    pub extra_data: Vec<u8>,
    pub seal: Seal,
    /// The fields later forks append, in header order; each is `None` when
    /// the node did not send it.
    pub base_fee_per_gas: Option<U256>,
    pub withdrawals_root: Option<B256>,
    pub blob_gas_used: Option<U256>,
    pub excess_blob_gas: Option<U256>,
    pub parent_beacon_block_root: Option<B256>,
    pub requests_hash: Option<B256>,
    /// `withdrawals` (Shanghai), when the block object lists them.
    pub withdrawals: Option<Vec<Withdrawal>>,
    /// Avalanche C-chain (coreth) only: the hash of the block's atomic
    /// (extra) data, right after the 15 legacy fields; and after the base
    /// fee, the gas its atomic txs used and the block gas cost. A header
    /// with `extDataHash` is hashed with coreth's layout.
    pub ext_data_hash: Option<B256>,
    pub ext_data_gas_used: Option<U256>,
    pub block_gas_cost: Option<U256>,
}

/// How the block is sealed: proof of work's (kept as zeros after the
/// merge), or an Aura authority's (Gnosis before its merge).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seal {
    Pow { mix_hash: B256, nonce: [u8; 8] },
    Aura { step: U256, signature: Vec<u8> },
}

/// One beacon-chain withdrawal (EIP-4895).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Withdrawal {
    pub index: u64,
    pub validator_index: u64,
    pub address: Address,
    /// In Gwei.
    pub amount: u64,
}

/// A full block as the node sends it, borrowing from the text it is read
/// from; fields the index does not need are skipped unparsed. Public so
/// that a JSON-RPC answer holding several blocks is read in one pass (and
/// a header alone, [`BlockHeader::from_value`], the same way).
#[derive(Deserialize, Default, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct BlockWire<'a> {
    #[serde(borrow)]
    pub(super) number: Option<&'a str>,
    #[serde(borrow)]
    pub(super) hash: Option<&'a str>,
    #[serde(borrow)]
    pub(super) parent_hash: Option<&'a str>,
    #[serde(borrow)]
    pub(super) timestamp: Option<&'a str>,
    #[serde(borrow)]
    pub(super) logs_bloom: Option<&'a str>,
    #[serde(borrow)]
    pub(super) sha3_uncles: Option<&'a str>,
    #[serde(borrow)]
    pub(super) miner: Option<&'a str>,
    #[serde(borrow)]
    pub(super) state_root: Option<&'a str>,
    #[serde(borrow)]
    pub(super) transactions_root: Option<&'a str>,
    #[serde(borrow)]
    pub(super) receipts_root: Option<&'a str>,
    #[serde(borrow)]
    pub(super) difficulty: Option<&'a str>,
    #[serde(borrow)]
    pub(super) gas_limit: Option<&'a str>,
    #[serde(borrow)]
    pub(super) gas_used: Option<&'a str>,
    #[serde(borrow)]
    pub(super) extra_data: Option<&'a str>,
    #[serde(borrow)]
    pub(super) mix_hash: Option<&'a str>,
    #[serde(borrow)]
    pub(super) nonce: Option<&'a str>,
    #[serde(borrow)]
    pub(super) aura_step: Option<&'a str>,
    #[serde(borrow)]
    pub(super) aura_seal: Option<&'a str>,
    #[serde(borrow)]
    pub(super) base_fee_per_gas: Option<&'a str>,
    #[serde(borrow)]
    pub(super) withdrawals_root: Option<&'a str>,
    #[serde(borrow)]
    pub(super) blob_gas_used: Option<&'a str>,
    #[serde(borrow)]
    pub(super) excess_blob_gas: Option<&'a str>,
    #[serde(borrow)]
    pub(super) parent_beacon_block_root: Option<&'a str>,
    #[serde(borrow)]
    pub(super) requests_hash: Option<&'a str>,
    #[serde(borrow, default)]
    pub(super) withdrawals: Option<Vec<WireWithdrawal<'a>>>,
    #[serde(borrow)]
    pub(super) ext_data_hash: Option<&'a str>,
    #[serde(borrow)]
    pub(super) ext_data_gas_used: Option<&'a str>,
    #[serde(borrow)]
    pub(super) block_gas_cost: Option<&'a str>,
    #[serde(borrow)]
    pub(super) l1_block_number: Option<&'a str>,
    #[serde(borrow, default)]
    pub(super) transactions: Option<TxTexts<'a>>,
}

#[derive(Deserialize, Default, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub(super) struct WireWithdrawal<'a> {
    #[serde(borrow)]
    pub(super) index: Option<&'a str>,
    #[serde(borrow)]
    pub(super) validator_index: Option<&'a str>,
    #[serde(borrow)]
    pub(super) address: Option<&'a str>,
    #[serde(borrow)]
    pub(super) amount: Option<&'a str>,
}

/// A block's transactions as their JSON texts, each borrowed from the text
/// the block is read from: serde_json finds them as raw values, the
/// one-pass reader (`scan::block_answers`) by skipping over them.
#[derive(Default, Debug, PartialEq)]
pub(super) struct TxTexts<'a>(pub(super) Vec<&'a str>);

impl<'de: 'a, 'a> Deserialize<'de> for TxTexts<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Vec::<&'de RawValue>::deserialize(d)?;
        Ok(TxTexts(raw.into_iter().map(RawValue::get).collect()))
    }
}

fn field<'a>(name: &'static str, v: Option<&'a str>) -> Result<&'a str, DecodeError> {
    v.ok_or(DecodeError::Missing(name))
}

/// Field `name`, which must be present, parsed by `parse`.
fn req<'a, T>(
    name: &'static str,
    v: Option<&'a str>,
    parse: impl Fn(&'static str, &'a str) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    parse(name, field(name, v)?)
}

impl BlockWire<'_> {
    fn header(&self) -> Result<BlockHeader, DecodeError> {
        Ok(BlockHeader {
            number: req("number", self.number, parse_u64)?,
            hash: req("hash", self.hash, parse_fixed)?,
            parent_hash: req("parentHash", self.parent_hash, parse_fixed)?,
            timestamp: req("timestamp", self.timestamp, parse_u64)?,
            logs_bloom: match self.logs_bloom {
                Some(b) => Some(Box::new(parse_fixed("logsBloom", b)?)),
                None => None,
            },
            fields: self.fields()?.map(Box::new),
            l1_block_number: opt(
                "l1BlockNumber",
                self.l1_block_number.map(str::as_bytes),
                parse_u64,
            )?,
        })
    }

    /// The hashed fields, if the node sent the Frontier ones; a field that
    /// is present but malformed is an error that names it.
    fn fields(&self) -> Result<Option<HeaderFields>, DecodeError> {
        let frontier = [
            self.sha3_uncles,
            self.miner,
            self.state_root,
            self.transactions_root,
            self.receipts_root,
            self.difficulty,
            self.gas_limit,
            self.gas_used,
            self.extra_data,
        ];
        if frontier.iter().any(Option::is_none) {
            return Ok(None);
        }
        let q = |name, v: Option<&str>| opt(name, v.map(str::as_bytes), parse_u256);
        let h = |name, v: Option<&str>| opt(name, v.map(str::as_bytes), parse_fixed::<32>);
        let seal = match (self.aura_step, self.aura_seal) {
            (Some(step), Some(sig)) => Seal::Aura {
                step: parse_u256("auraStep", step)?,
                signature: parse_bytes("auraSeal", sig)?,
            },
            _ => Seal::Pow {
                mix_hash: req("mixHash", self.mix_hash, parse_fixed)?,
                nonce: req("nonce", self.nonce, parse_fixed)?,
            },
        };
        let withdrawals = match &self.withdrawals {
            None => None,
            Some(list) => Some(
                list.iter()
                    .map(|w| {
                        Ok(Withdrawal {
                            index: req("withdrawals.index", w.index, parse_u64)?,
                            validator_index: req(
                                "withdrawals.validatorIndex",
                                w.validator_index,
                                parse_u64,
                            )?,
                            address: req("withdrawals.address", w.address, parse_fixed)?,
                            amount: req("withdrawals.amount", w.amount, parse_u64)?,
                        })
                    })
                    .collect::<Result<_, DecodeError>>()?,
            ),
        };
        Ok(Some(HeaderFields {
            ommers_hash: req("sha3Uncles", self.sha3_uncles, parse_fixed)?,
            beneficiary: req("miner", self.miner, parse_fixed)?,
            state_root: req("stateRoot", self.state_root, parse_fixed)?,
            transactions_root: req("transactionsRoot", self.transactions_root, parse_fixed)?,
            receipts_root: req("receiptsRoot", self.receipts_root, parse_fixed)?,
            difficulty: req("difficulty", self.difficulty, parse_u256)?,
            gas_limit: req("gasLimit", self.gas_limit, parse_u256)?,
            gas_used: req("gasUsed", self.gas_used, parse_u256)?,
            extra_data: req("extraData", self.extra_data, parse_bytes)?,
            seal,
            base_fee_per_gas: q("baseFeePerGas", self.base_fee_per_gas)?,
            withdrawals_root: h("withdrawalsRoot", self.withdrawals_root)?,
            blob_gas_used: q("blobGasUsed", self.blob_gas_used)?,
            excess_blob_gas: q("excessBlobGas", self.excess_blob_gas)?,
            parent_beacon_block_root: h("parentBeaconBlockRoot", self.parent_beacon_block_root)?,
            requests_hash: h("requestsHash", self.requests_hash)?,
            withdrawals,
            ext_data_hash: h("extDataHash", self.ext_data_hash)?,
            ext_data_gas_used: q("extDataGasUsed", self.ext_data_gas_used)?,
            block_gas_cost: q("blockGasCost", self.block_gas_cost)?,
        }))
    }
}

impl BlockHeader {
    /// The header of a block object (`eth_getBlockByNumber` with or without
    /// full transactions, a `newHeads` notification), already parsed as a
    /// JSON value. Not on the hot path: the value is printed and read again,
    /// so that it is read by the same [`BlockWire`] as every block.
    pub fn from_value(v: &Value) -> Result<BlockHeader, DecodeError> {
        let text = v.to_string();
        let wire: BlockWire = serde_json::from_str(&text)
            .map_err(|e| DecodeError::Json(format!("expected a block object: {e}")))?;
        wire.header()
    }
}

impl BlockWire<'_> {
    /// The header, and where each transaction's JSON lies in `base`: the
    /// text this block was read from (a block, or a whole response).
    pub fn split(self, base: &str) -> Result<(BlockHeader, Vec<Range<usize>>), DecodeError> {
        let head = self.header()?;
        let base_start = base.as_ptr() as usize;
        let mut txs = Vec::new();
        for tx in self.transactions.unwrap_or_default().0 {
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
    /// The block's receipts, when they were fetched.
    pub receipts: Option<RawReceipts>,
    /// Its logs from `eth_getLogs` (`logs.mode = "getLogs"`): those the
    /// filters ask for, each checked to name this block's hash.
    pub logs: Option<Vec<Log>>,
}

/// A block's receipts: each one's JSON as a byte range of `text`, the
/// response body they came in, one per transaction, in order.
#[derive(Debug, Clone)]
pub struct RawReceipts {
    pub text: std::sync::Arc<String>,
    pub ranges: Vec<Range<usize>>,
}

impl RawBlock {
    /// The JSON text of transaction `i`.
    pub fn tx_json(&self, i: usize) -> Option<&str> {
        self.txs.get(i).map(|r| &self.text[r.clone()])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
                logs_bloom: None,
                fields: None,
                l1_block_number: None,
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
