//! Pure helpers for the JSON-RPC wire format: block-range chunking, request
//! params, and the few fields the client itself must read (block number,
//! headers), read with `decode`'s parsers. Transactions are left as raw
//! JSON for `decode`.

use std::ops::RangeInclusive;

use serde_json::{Value, json};

use super::retry::Failure;
use crate::decode::{BlockHeader, RawBlock};

/// Splits `range` into consecutive sub-ranges of at most `size` blocks.
pub(crate) fn chunks(
    range: RangeInclusive<u64>,
    size: usize,
) -> impl Iterator<Item = RangeInclusive<u64>> {
    let (start, end) = range.into_inner();
    let span = size.max(1) as u64 - 1;
    let mut next = (start <= end).then_some(start);
    std::iter::from_fn(move || {
        let s = next?;
        let e = s.saturating_add(span).min(end);
        next = (e < end).then(|| e + 1);
        Some(s..=e)
    })
}

pub(crate) fn block_params(n: u64, full: bool) -> Vec<Value> {
    vec![json!(format!("0x{n:x}")), json!(full)]
}

/// `None` means "not produced yet"; anything else must be block `n`.
pub(crate) fn check_block(n: u64, block: Option<RawBlock>) -> Result<Option<RawBlock>, Failure> {
    match block {
        Some(b) if b.header.number != n => Err(Failure::Malformed(format!(
            "asked for block {n}, got block {}",
            b.header.number
        ))),
        other => Ok(other),
    }
}

/// The header of a block object, as the `decode` stage reads it.
pub(crate) fn parse_header(v: &Value) -> Result<BlockHeader, Failure> {
    BlockHeader::from_value(v).map_err(|e| Failure::Malformed(e.to_string()))
}

pub(crate) fn malformed(what: &str, got: &Value) -> Failure {
    let got = got.to_string();
    let end = got.char_indices().nth(80).map_or(got.len(), |(i, _)| i);
    Failure::Malformed(format!("bad {what}: {}", &got[..end]))
}

/// A JSON-RPC quantity, by `decode`'s rules (the one set in the project).
pub(crate) fn quantity(v: &Value) -> Option<u64> {
    crate::decode::parse_u64("number", v.as_str()?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::retry::{Class, classify};

    #[test]
    fn chunks_cover_range_exactly() {
        let got: Vec<_> = chunks(0..=9, 4).collect();
        assert_eq!(got, vec![0..=3, 4..=7, 8..=9]);
        assert_eq!(chunks(5..=5, 50).collect::<Vec<_>>(), vec![5..=5]);
        assert_eq!(chunks(RangeInclusive::new(6, 5), 50).count(), 0);
        let top: Vec<_> = chunks(u64::MAX - 2..=u64::MAX, 2).collect();
        assert_eq!(top, vec![u64::MAX - 2..=u64::MAX - 1, u64::MAX..=u64::MAX]);
        assert_eq!(chunks(0..=3, 0).count(), 4);
    }

    #[test]
    fn quantities_and_headers() {
        assert_eq!(quantity(&json!("0x1b4")), Some(436));
        assert_eq!(quantity(&json!("0x0")), Some(0));
        // The same rules as every other quantity: `0x` alone is zero.
        assert_eq!(quantity(&json!("0x")), Some(0));
        assert_eq!(quantity(&json!("1b4")), None);
        assert_eq!(quantity(&json!(436)), None);
        let h = format!("0x{}", "ab".repeat(32));
        let p = format!("0x{}", "01".repeat(32));
        let v = json!({ "number": "0x10", "hash": h, "parentHash": p, "timestamp": "0x5" });
        let got = parse_header(&v).unwrap();
        assert_eq!(
            (got.number, got.hash, got.parent_hash, got.timestamp),
            (16, [0xab; 32], [1; 32], 5)
        );
        let err = parse_header(&json!({ "number": "0x10", "hash": "0x12" })).unwrap_err();
        assert!(err.to_string().contains("hash"), "{err}");
    }

    #[test]
    fn blocks_are_checked_against_the_request() {
        assert!(check_block(3, None).unwrap().is_none());
        let h = format!("0x{}", "11".repeat(32));
        let block = |n: &str| {
            let text = format!(
                r#"{{"number":"{n}","hash":"{h}","parentHash":"{h}","timestamp":"0x1","transactions":[{{"x":1}}]}}"#
            );
            let (header, txs) = crate::decode::split_block(&text).unwrap();
            RawBlock {
                text: std::sync::Arc::new(text),
                header,
                txs,
                receipts: None,
                logs: None,
            }
        };
        let ok = check_block(3, Some(block("0x3"))).unwrap().unwrap();
        assert_eq!(ok.tx_json(0), Some(r#"{"x":1}"#), "passed on as it came");
        let err = check_block(3, Some(block("0x4"))).unwrap_err();
        assert_eq!(
            err.to_string(),
            "malformed response: asked for block 3, got block 4"
        );
        assert_eq!(classify(&err, true), Class::Fatal);
    }
}
