//! Block framing: a full block's header fields, and where each of its
//! transactions lies in the JSON text it came in, read without building a
//! value tree. The header type here is the only one in the project: the
//! rpc stage, the pipeline and the store all carry [`BlockHeader`].

use std::ops::Range;

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

use super::bloom::Bloom;
use super::hex::{parse_fixed, parse_u64};
use super::{B256, DecodeError, Log};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHeader {
    pub number: u64,
    pub hash: B256,
    pub parent_hash: B256,
    pub timestamp: u64,
    /// `logsBloom`, when the node sent it.
    pub logs_bloom: Option<Box<Bloom>>,
}

/// The header fields of a block object, borrowed from its text; every
/// other field is skipped unparsed.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct HeaderWire<'a> {
    #[serde(borrow)]
    number: Option<&'a str>,
    #[serde(borrow)]
    hash: Option<&'a str>,
    #[serde(borrow)]
    parent_hash: Option<&'a str>,
    #[serde(borrow)]
    timestamp: Option<&'a str>,
    #[serde(borrow)]
    logs_bloom: Option<&'a str>,
}

impl HeaderWire<'_> {
    fn parse(&self) -> Result<BlockHeader, DecodeError> {
        fn field<'a>(name: &'static str, v: Option<&'a str>) -> Result<&'a str, DecodeError> {
            v.ok_or(DecodeError::Missing(name))
        }
        Ok(BlockHeader {
            number: parse_u64("number", field("number", self.number)?)?,
            hash: parse_fixed("hash", field("hash", self.hash)?)?,
            parent_hash: parse_fixed("parentHash", field("parentHash", self.parent_hash)?)?,
            timestamp: parse_u64("timestamp", field("timestamp", self.timestamp)?)?,
            logs_bloom: match self.logs_bloom {
                Some(b) => Some(Box::new(parse_fixed("logsBloom", b)?)),
                None => None,
            },
        })
    }
}

impl BlockHeader {
    /// The header of a block object (`eth_getBlockByNumber` with or without
    /// full transactions, a `newHeads` notification), already parsed as a
    /// JSON value.
    pub fn from_value(v: &Value) -> Result<BlockHeader, DecodeError> {
        HeaderWire::deserialize(v)
            .map_err(|e| DecodeError::Json(format!("expected a block object: {e}")))?
            .parse()
    }
}

/// A full block as the node sends it, borrowing from the text it is read
/// from; fields the index does not need are skipped unparsed. Public so
/// that a JSON-RPC answer holding several blocks is read in one pass.
///
/// The header fields repeat [`HeaderWire`]'s rather than `flatten` it:
/// serde buffers every unknown field of a flattened struct (the bloom,
/// withdrawals, uncles) into a value tree, on the hot path.
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
    #[serde(borrow)]
    logs_bloom: Option<&'a str>,
    #[serde(borrow, default)]
    transactions: Option<Vec<&'a RawValue>>,
}

impl BlockWire<'_> {
    /// The header, and where each transaction's JSON lies in `base`: the
    /// text this block was read from (a block, or a whole response).
    pub fn split(self, base: &str) -> Result<(BlockHeader, Vec<Range<usize>>), DecodeError> {
        let head = HeaderWire {
            number: self.number,
            hash: self.hash,
            parent_hash: self.parent_hash,
            timestamp: self.timestamp,
            logs_bloom: self.logs_bloom,
        }
        .parse()?;
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
