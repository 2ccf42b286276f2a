//! Receipts and their event logs: the JSON-RPC receipt object
//! (`eth_getBlockReceipts`, `eth_getTransactionReceipt`) into our own
//! [`Receipt`] and [`Log`]. The fields that place a receipt (block hash and
//! number, transaction hash and index) are kept so the pipeline can check
//! that it belongs where it is stored. No I/O; by `hex`'s rules.

use serde::Deserialize;

use super::hex::{opt, parse_bytes, parse_fixed, parse_u64, parse_u256};
use super::{Address, B256, Bloom, DecodeError, U256};

/// One event log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Log {
    pub address: Address,
    /// At most four (LOG0..LOG4).
    pub topics: Vec<B256>,
    pub data: Vec<u8>,
    pub log_index: u64,
    pub block_number: Option<u64>,
    pub block_hash: Option<B256>,
    pub transaction_hash: Option<B256>,
    pub transaction_index: Option<u64>,
}

/// A transaction's receipt, as far as the index keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Receipt {
    pub block_hash: Option<B256>,
    pub block_number: Option<u64>,
    pub transaction_hash: Option<B256>,
    pub transaction_index: Option<u64>,
    /// The EIP-2718 type of its transaction (a missing `type` means 0).
    pub tx_type: u8,
    /// 1 success, 0 failure; `None` before Byzantium (a state root instead).
    pub status: Option<u8>,
    /// The post-transaction state root receipts carry before Byzantium.
    pub root: Option<B256>,
    /// The `logsBloom` the node reported for this receipt.
    pub logs_bloom: Option<Box<Bloom>>,
    pub gas_used: Option<u64>,
    pub cumulative_gas_used: Option<u64>,
    pub effective_gas_price: Option<U256>,
    pub contract_address: Option<Address>,
    pub logs: Vec<Log>,
    /// OP Stack deposit receipts (type 0x7e): the depositor's nonce
    /// (Regolith+) and the receipt version (Canyon+), both part of the
    /// receipt's consensus encoding when present.
    pub deposit_nonce: Option<u64>,
    pub deposit_receipt_version: Option<u64>,
    /// What the node says the transaction paid for its L1 data, where the
    /// chain reports it; `None` on chains that do not (boxed: most
    /// receipts have none).
    pub l1_costs: Option<Box<L1Costs>>,
}

/// The L1 data costs rollup nodes add to their receipts: RPC-only fields,
/// outside the receipts root, so nothing in the block commits to them and
/// they are stored as the node reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct L1Costs {
    /// `l1Fee` (OP Stack, Scroll): wei charged for the L1 data fee, on
    /// top of `gasUsed` x `effectiveGasPrice`.
    pub l1_fee: Option<U256>,
    /// `l1GasUsed` (OP Stack): the L1 gas the fee was computed from.
    pub l1_gas_used: Option<U256>,
    /// `l1GasPrice` (OP Stack): the L1 base fee the fee was computed from.
    pub l1_gas_price: Option<U256>,
    /// `gasUsedForL1` (Arbitrum): the part of `gasUsed` that paid for the
    /// L1 data.
    pub gas_used_for_l1: Option<u64>,
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(rename_all = "camelCase")]
pub(super) struct WireReceipt<'a> {
    #[serde(borrow)]
    pub(super) block_hash: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) block_number: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) transaction_hash: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) transaction_index: Option<&'a [u8]>,
    #[serde(borrow, rename = "type")]
    pub(super) tx_type: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) status: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) root: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) logs_bloom: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) gas_used: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) cumulative_gas_used: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) effective_gas_price: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) contract_address: Option<&'a [u8]>,
    #[serde(borrow, default)]
    pub(super) logs: Option<Vec<WireLog<'a>>>,
    #[serde(borrow)]
    pub(super) deposit_nonce: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) deposit_receipt_version: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) l1_fee: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) l1_gas_used: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) l1_gas_price: Option<&'a [u8]>,
    #[serde(borrow, rename = "gasUsedForL1")]
    pub(super) gas_used_for_l1: Option<&'a [u8]>,
    // Every other field (the rest of OP's `l1Fee` family, some of them
    // decimal strings such as `l1FeeScalar: "0.684"`; Arbitrum's
    // `l1BlockNumber`, `timeboosted`; zkSync's `l2ToL1Logs`) is RPC-only,
    // outside the receipts root, and skipped unread.
}

#[derive(Deserialize, Default)]
#[cfg_attr(test, derive(Debug, PartialEq))]
#[serde(rename_all = "camelCase")]
pub(super) struct WireLog<'a> {
    #[serde(borrow)]
    pub(super) address: Option<&'a [u8]>,
    #[serde(borrow, default)]
    pub(super) topics: Vec<&'a [u8]>,
    #[serde(borrow)]
    pub(super) data: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) log_index: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) block_number: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) block_hash: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) transaction_hash: Option<&'a [u8]>,
    #[serde(borrow)]
    pub(super) transaction_index: Option<&'a [u8]>,
}

impl Receipt {
    /// Decodes one JSON text holding a receipt object.
    pub fn from_json(s: &str) -> Result<Receipt, DecodeError> {
        // The one-pass reader takes the plain shape nodes send; serde_json
        // reads anything else, and says what is wrong with it.
        let w: WireReceipt = match super::scan::receipt(s) {
            Some(w) => w,
            None => serde_json::from_str(s).map_err(|e| DecodeError::Json(e.to_string()))?,
        };
        let status = match opt("status", w.status, parse_u64)? {
            None => None,
            Some(v @ (0 | 1)) => Some(v as u8),
            Some(_) => {
                return Err(DecodeError::Field {
                    field: "status",
                    problem: "expected 0x0 or 0x1",
                    value: String::from_utf8_lossy(w.status.unwrap_or_default()).into_owned(),
                });
            }
        };
        let l1_costs = L1Costs::from_wire(&w)?;
        // Every receipt has its logs, if only `[]`: a receipt without them
        // would pass its logs off as none.
        let logs = w
            .logs
            .ok_or(DecodeError::Missing("logs"))?
            .into_iter()
            .map(Log::from_wire)
            .collect::<Result<_, _>>()?;
        Ok(Receipt {
            block_hash: opt("blockHash", w.block_hash, parse_fixed)?,
            block_number: opt("blockNumber", w.block_number, parse_u64)?,
            transaction_hash: opt("transactionHash", w.transaction_hash, parse_fixed)?,
            transaction_index: opt("transactionIndex", w.transaction_index, parse_u64)?,
            tx_type: match opt("type", w.tx_type, parse_u64)? {
                None => 0,
                Some(t) => u8::try_from(t).map_err(|_| DecodeError::Field {
                    field: "type",
                    problem: "not a transaction type",
                    value: t.to_string(),
                })?,
            },
            status,
            root: opt("root", w.root, parse_fixed)?,
            logs_bloom: opt("logsBloom", w.logs_bloom, parse_fixed)?.map(Box::new),
            gas_used: opt("gasUsed", w.gas_used, parse_u64)?,
            cumulative_gas_used: opt("cumulativeGasUsed", w.cumulative_gas_used, parse_u64)?,
            effective_gas_price: opt("effectiveGasPrice", w.effective_gas_price, parse_u256)?,
            contract_address: opt("contractAddress", w.contract_address, parse_fixed)?,
            logs,
            deposit_nonce: opt("depositNonce", w.deposit_nonce, parse_u64)?,
            deposit_receipt_version: opt(
                "depositReceiptVersion",
                w.deposit_receipt_version,
                parse_u64,
            )?,
            l1_costs,
        })
    }
}

impl L1Costs {
    /// `None` when the receipt reports none of them (every Ethereum
    /// receipt): nothing allocated.
    fn from_wire(w: &WireReceipt<'_>) -> Result<Option<Box<L1Costs>>, DecodeError> {
        if w.l1_fee.is_none()
            && w.l1_gas_used.is_none()
            && w.l1_gas_price.is_none()
            && w.gas_used_for_l1.is_none()
        {
            return Ok(None);
        }
        Ok(Some(Box::new(L1Costs {
            l1_fee: opt("l1Fee", w.l1_fee, parse_u256)?,
            l1_gas_used: opt("l1GasUsed", w.l1_gas_used, parse_u256)?,
            l1_gas_price: opt("l1GasPrice", w.l1_gas_price, parse_u256)?,
            gas_used_for_l1: opt("gasUsedForL1", w.gas_used_for_l1, parse_u64)?,
        })))
    }
}

impl Log {
    fn from_wire(w: WireLog<'_>) -> Result<Log, DecodeError> {
        if w.topics.len() > 4 {
            return Err(DecodeError::Field {
                field: "logs.topics",
                problem: "more than four topics",
                value: w.topics.len().to_string(),
            });
        }
        Ok(Log {
            address: parse_fixed(
                "logs.address",
                w.address.ok_or(DecodeError::Missing("logs.address"))?,
            )?,
            topics: w
                .topics
                .into_iter()
                .map(|t| parse_fixed("logs.topics", t))
                .collect::<Result<_, _>>()?,
            data: parse_bytes(
                "logs.data",
                w.data.ok_or(DecodeError::Missing("logs.data"))?,
            )?,
            log_index: parse_u64(
                "logs.logIndex",
                w.log_index.ok_or(DecodeError::Missing("logs.logIndex"))?,
            )?,
            block_number: opt("logs.blockNumber", w.block_number, parse_u64)?,
            block_hash: opt("logs.blockHash", w.block_hash, parse_fixed)?,
            transaction_hash: opt("logs.transactionHash", w.transaction_hash, parse_fixed)?,
            transaction_index: opt("logs.transactionIndex", w.transaction_index, parse_u64)?,
        })
    }
}

/// Decodes an `eth_getLogs` result: a JSON list of log objects.
pub fn logs_from_json(s: &str) -> Result<Vec<Log>, DecodeError> {
    let wire: Vec<WireLog> = serde_json::from_str(s)
        .map_err(|e| DecodeError::Json(format!("expected a list of logs: {e}")))?;
    wire.into_iter().map(Log::from_wire).collect()
}

/// Decodes the receipts at `ranges` of `text`, in order; a malformed one
/// yields its error in place.
pub fn receipts_from_slices(
    text: &str,
    ranges: &[std::ops::Range<usize>],
) -> Vec<Result<Receipt, DecodeError>> {
    ranges
        .iter()
        .map(|r| Receipt::from_json(&text[r.clone()]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_status_gas_creation_and_logs() {
        let r = Receipt::from_json(
            r#"{"blockHash":"0x1111111111111111111111111111111111111111111111111111111111111111",
                "blockNumber":"0x10","transactionHash":"0x2222222222222222222222222222222222222222222222222222222222222222",
                "transactionIndex":"0x3","status":"0x1","gasUsed":"0x5208","cumulativeGasUsed":"0x7000",
                "effectiveGasPrice":"0x3b9aca00","contractAddress":null,
                "logs":[{"address":"0x3333333333333333333333333333333333333333","topics":[],
                         "data":"0x","logIndex":"0x7","removed":false}]}"#,
        )
        .unwrap();
        assert_eq!(r.status, Some(1));
        assert_eq!(r.gas_used, Some(21000));
        assert_eq!(r.effective_gas_price, Some(U256::from_u64(1_000_000_000)));
        assert_eq!(r.contract_address, None);
        assert_eq!(r.transaction_index, Some(3));
        assert_eq!(r.logs.len(), 1);
        assert_eq!((r.logs[0].log_index, r.logs[0].data.len()), (7, 0));
        // Pre-Byzantium: a root, no status.
        let old = Receipt::from_json(&format!(
            r#"{{"root":"0x{}","gasUsed":"0x1","logs":[]}}"#,
            "01".repeat(32)
        ))
        .unwrap();
        assert_eq!(old.status, None);
    }

    #[test]
    fn malformed_receipts_name_the_field() {
        let err = Receipt::from_json(r#"{"status":"0x2"}"#).unwrap_err();
        assert!(err.to_string().contains("status"), "{err}");
        let five = format!(
            r#"{{"logs":[{{"address":"0x{}","topics":["0x{t}","0x{t}","0x{t}","0x{t}","0x{t}"],"data":"0x","logIndex":"0x0"}}]}}"#,
            "33".repeat(20),
            t = "44".repeat(32)
        );
        let err = Receipt::from_json(&five).unwrap_err();
        assert!(err.to_string().contains("more than four topics"), "{err}");
        let err = Receipt::from_json(r#"{"logs":[{"topics":[],"logIndex":"0x0"}]}"#).unwrap_err();
        assert_eq!(err, DecodeError::Missing("logs.address"));
    }
}
