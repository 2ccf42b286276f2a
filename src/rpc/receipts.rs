//! Receipts on the wire: `eth_getBlockReceipts(blockHash)` for a batch of
//! blocks, or, for nodes without that method, `eth_getTransactionReceipt`
//! for each of their transactions, batched the same way. Asking by block
//! hash means the receipts are those of the very block fetched, not of
//! another fork at the same height. Answers are read in one pass into each
//! receipt's byte range of the body, which the blocks share (as `batch`
//! does for blocks); `decode` parses each receipt from its range on the
//! recovery pool. Pure: bodies in, ranges out.

use std::fmt::Write as _;
use std::ops::Range;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::batch::{ErrorObj, Resp};
use super::retry::Failure;
use crate::decode::{B256, RawReceipts, block_receipt_lists, hex0x};

/// One call of a batch: its id and method with one string parameter.
fn call(out: &mut String, id: usize, method: &str, param: &B256) {
    let _ = write!(
        out,
        r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":["{}"]}}"#,
        hex0x(param)
    );
}

/// A batch of `method(param)` calls, ids 0.. in order.
pub(crate) fn request_body(method: &str, params: &[B256]) -> String {
    let mut out = String::with_capacity(120 * params.len() + 2);
    out.push('[');
    for (i, p) in params.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        call(&mut out, i, method, p);
    }
    out.push(']');
    out
}

/// One answer of an `eth_getBlockReceipts` batch, its result read as the
/// list of raw receipts in the same pass over the body (`null` and absent
/// alike `None`).
#[derive(Deserialize)]
struct ListResp<'a> {
    #[serde(default)]
    id: Option<u64>,
    #[serde(default, borrow)]
    result: Option<Vec<&'a RawValue>>,
    #[serde(default)]
    error: Option<ErrorObj>,
}

/// The answers to a batch of `calls` calls, by id, each a result's raw
/// text (`None` for `null`), borrowing from `body`.
fn results(body: &str, calls: usize) -> Result<Vec<Option<&RawValue>>, Failure> {
    let resps: Vec<Resp> = match serde_json::from_str(body) {
        Ok(r) => r,
        Err(_) => return Err(not_a_batch(body)),
    };
    by_id(
        resps.into_iter().map(|r| {
            let result = r.result.filter(|v| v.get() != "null");
            (r.id, result, r.error)
        }),
        calls,
    )
}

/// Why `body` is not a list of answers: a whole-batch error object
/// ("method not found" for every call of a provider without the method,
/// or "batch too large"), or not JSON-RPC at all.
fn not_a_batch(body: &str) -> Failure {
    if let Ok(Resp { error: Some(e), .. }) = serde_json::from_str::<Resp>(body) {
        return Failure::Rpc {
            code: e.code,
            message: e.message,
        };
    }
    let shown: String = body.chars().take(200).collect();
    Failure::Undecodable(format!("receipts answer: {shown}"))
}

/// Answers `(id, result, error)` put in the order of their ids, 0 to
/// `calls - 1`: each id once, no error.
fn by_id<T>(
    resps: impl ExactSizeIterator<Item = (Option<u64>, Option<T>, Option<ErrorObj>)>,
    calls: usize,
) -> Result<Vec<Option<T>>, Failure> {
    if resps.len() != calls {
        return Err(Failure::BadBatch(format!(
            "invalid response: {} answers for {calls} receipt calls",
            resps.len()
        )));
    }
    let mut out: Vec<Option<Option<T>>> = (0..calls).map(|_| None).collect();
    for (id, result, error) in resps {
        if let Some(e) = error {
            return Err(Failure::Rpc {
                code: e.code,
                message: e.message,
            });
        }
        let slot = id
            .and_then(|id| usize::try_from(id).ok())
            .and_then(|id| out.get_mut(id))
            .filter(|s| s.is_none());
        let Some(slot) = slot else {
            return Err(Failure::BadBatch(format!(
                "invalid response: unexpected or repeated id {id:?}"
            )));
        };
        *slot = Some(result);
    }
    Ok(out.into_iter().flatten().collect())
}

/// The answer's text, shared by the receipts read from it.
fn utf8(body: Vec<u8>) -> Result<Arc<String>, Failure> {
    String::from_utf8(body)
        .map(Arc::new)
        .map_err(|_| Failure::Undecodable("receipts answer is not UTF-8".into()))
}

/// Where `raw`, a slice of `body`, lies in it.
fn range_of(body: &str, raw: &RawValue) -> Range<usize> {
    let start = raw.get().as_ptr() as usize - body.as_ptr() as usize;
    start..start + raw.get().len()
}

/// The answer to `eth_getBlockReceipts` for `blocks` block hashes: each
/// block's receipts as ranges of the shared body. A `null` (the node does
/// not have the block) is a failure to retry.
pub(crate) fn parse_block_receipts(
    body: Vec<u8>,
    blocks: usize,
) -> Result<Vec<RawReceipts>, Failure> {
    let body = utf8(body)?;
    let text = body.as_str();
    // One pass: each result read as its list of receipts, by the one-pass
    // reader where the answers have the plain shape (no error), else by
    // serde_json. A body that is not such a batch is read again the general
    // way, for what it says.
    let lists: Vec<Option<Vec<Range<usize>>>> = match block_receipt_lists(text) {
        Some(answers) => by_id(
            answers.into_iter().map(|(id, result)| (id, result, None)),
            blocks,
        )?,
        None => match serde_json::from_str::<Vec<ListResp>>(text) {
            Ok(resps) => by_id(resps.into_iter().map(|r| (r.id, r.result, r.error)), blocks)?,
            Err(_) => results(text, blocks)?
                .into_iter()
                .map(|r| r.map(|raw| serde_json::from_str(raw.get())).transpose())
                .collect::<Result<Vec<Option<Vec<&RawValue>>>, _>>()
                .map_err(|e| Failure::Malformed(format!("receipts: expected a list: {e}")))?,
        }
        .into_iter()
        .map(|list| list.map(|l| l.iter().map(|r| range_of(text, r)).collect()))
        .collect(),
    };
    let mut out = Vec::with_capacity(blocks);
    for (i, ranges) in lists.into_iter().enumerate() {
        let Some(ranges) = ranges else {
            return Err(Failure::Missing(format!(
                "no receipts for the block fetched (call {i}): the node has not got it"
            )));
        };
        out.push(RawReceipts {
            text: Arc::clone(&body),
            ranges,
        });
    }
    Ok(out)
}

/// The answer to `eth_getTransactionReceipt` for `txs` hashes: each
/// receipt's range of the body, in order. A `null` is a failure to retry.
pub(crate) fn parse_tx_receipts(
    body: Vec<u8>,
    txs: usize,
) -> Result<(Arc<String>, Vec<Range<usize>>), Failure> {
    let body = utf8(body)?;
    let text = body.as_str();
    let mut ranges = Vec::with_capacity(txs);
    for (i, result) in results(text, txs)?.into_iter().enumerate() {
        let Some(result) = result else {
            return Err(Failure::Missing(format!(
                "no receipt for transaction {i} of the batch: the node has not got it"
            )));
        };
        ranges.push(range_of(text, result));
    }
    Ok((body, ranges))
}

/// One list of receipts from the answers of several batches (the texts
/// joined, each range moved with its text).
pub(crate) fn joined(parts: Vec<(Arc<String>, Vec<Range<usize>>)>) -> RawReceipts {
    if parts.len() == 1 {
        let (text, ranges) = parts.into_iter().next().expect("one part");
        return RawReceipts { text, ranges };
    }
    let mut text = String::with_capacity(parts.iter().map(|(t, _)| t.len()).sum());
    let mut ranges = Vec::new();
    for (t, rs) in &parts {
        let base = text.len();
        text.push_str(t);
        ranges.extend(rs.iter().map(|r| r.start + base..r.end + base));
    }
    RawReceipts {
        text: Arc::new(text),
        ranges,
    }
}

/// Whether `f` says the node lacks `eth_getBlockReceipts`.
pub(crate) fn method_missing(f: &Failure) -> bool {
    match f {
        Failure::Rpc { code, message } => {
            let m = message.to_ascii_lowercase();
            *code == -32601
                || m.contains("method not found")
                || m.contains("does not exist")
                || m.contains("not supported")
                || m.contains("unsupported method")
        }
        _ => false,
    }
}

/// The `hash` of a transaction object's JSON.
pub(crate) fn tx_hash(json: &str) -> Result<B256, Failure> {
    #[derive(Deserialize)]
    struct Hash<'a> {
        #[serde(borrow)]
        hash: Option<&'a str>,
    }
    let h: Hash =
        serde_json::from_str(json).map_err(|e| Failure::Malformed(format!("transaction: {e}")))?;
    let h = h
        .hash
        .ok_or_else(|| Failure::Malformed("transaction without hash".into()))?;
    crate::decode::parse_fixed("hash", h).map_err(|e| Failure::Malformed(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_receipts_map_back_by_id_as_ranges_of_the_body() {
        let body = br#"[{"jsonrpc":"2.0","id":1,"result":[]},{"jsonrpc":"2.0","id":0,"result":[{"a":1},{"b":[2]}]}]"#;
        let got = parse_block_receipts(body.to_vec(), 2).unwrap();
        let texts: Vec<Vec<&str>> = got
            .iter()
            .map(|r| r.ranges.iter().map(|x| &r.text[x.clone()]).collect())
            .collect();
        assert_eq!(texts, vec![vec![r#"{"a":1}"#, r#"{"b":[2]}"#], vec![]]);
        let null = br#"[{"id":0,"result":null}]"#;
        assert!(matches!(
            parse_block_receipts(null.to_vec(), 1),
            Err(Failure::Missing(_))
        ));
    }

    #[test]
    fn answers_that_are_not_lists_of_receipts_are_named() {
        let not_a_list = br#"[{"id":0,"result":[]},{"id":1,"result":{"a":1}}]"#;
        let f = parse_block_receipts(not_a_list.to_vec(), 2).unwrap_err();
        assert!(
            matches!(&f, Failure::Malformed(m) if m.contains("expected a list")),
            "{f}"
        );
        let short = br#"[{"id":0,"result":[]}]"#;
        let f = parse_block_receipts(short.to_vec(), 2).unwrap_err();
        assert!(
            matches!(&f, Failure::BadBatch(m) if m.contains("1 answers for 2")),
            "{f}"
        );
        let repeated = br#"[{"id":0,"result":[]},{"id":0,"result":[]}]"#;
        let f = parse_block_receipts(repeated.to_vec(), 2).unwrap_err();
        assert!(
            matches!(&f, Failure::BadBatch(m) if m.contains("repeated id")),
            "{f}"
        );
        let error = br#"[{"id":0,"result":[]},{"id":1,"error":{"code":-32000,"message":"busy"}}]"#;
        let f = parse_block_receipts(error.to_vec(), 2).unwrap_err();
        assert!(matches!(&f, Failure::Rpc { code: -32000, .. }), "{f}");
    }

    #[test]
    fn a_node_without_the_method_is_recognised() {
        for body in [
            &br#"[{"id":0,"error":{"code":-32601,"message":"the method eth_getBlockReceipts does not exist/is not available"}}]"#[..],
            br#"{"id":null,"error":{"code":-32601,"message":"Method not found"}}"#,
        ] {
            let f = parse_block_receipts(body.to_vec(), 1).unwrap_err();
            assert!(method_missing(&f), "{f}");
        }
        let f = Failure::Rpc {
            code: -32000,
            message: "header not found".into(),
        };
        assert!(!method_missing(&f));
    }

    /// What serde_json makes of a batch of receipt lists: each answer's id
    /// and its receipts' ranges; `None` where it refuses the text or an
    /// answer holds an error.
    fn serde_lists(text: &str) -> Option<Vec<crate::decode::ReceiptList>> {
        let resps: Vec<ListResp> = serde_json::from_str(text).ok()?;
        resps
            .into_iter()
            .map(|r| {
                r.error.is_none().then(|| {
                    let ranges = r
                        .result
                        .map(|l| l.iter().map(|raw| range_of(text, raw)).collect());
                    (r.id, ranges)
                })
            })
            .collect()
    }

    #[test]
    fn the_one_pass_reader_splits_batches_as_serde_json_does() {
        // Two real receipt sets (mainnet 47218, 483920) in one batch, in the
        // shape a node sends, then every one-byte corruption of a short
        // batch: the reader accepts only what serde_json reads the same way.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/receipts");
        let mut sets = Vec::new();
        for name in ["mainnet-47218", "mainnet-483920"] {
            let mut text = String::new();
            let file = std::fs::File::open(format!("{dir}/{name}.json.gz")).unwrap();
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text)
                .unwrap();
            sets.push(text);
        }
        let body = format!(
            r#"[{{"jsonrpc":"2.0","id":1,"result":{}}}, {{"jsonrpc":"2.0","id":0,"result":{}}}]"#,
            sets[0], sets[1]
        );
        let fast = crate::decode::block_receipt_lists(&body).expect("the plain shape");
        assert_eq!(Some(&fast), serde_lists(&body).as_ref());
        assert!(
            fast.iter()
                .all(|(_, l)| l.as_ref().is_some_and(|l| !l.is_empty()))
        );

        let short = r#"[{"jsonrpc":"2.0","id":0,"result":[{"a":"0x1","b":[null,true,false,-1.5e3,{}],"c":{"d":"e"}},{}]},{"id":12,"result":null,"error":null}]"#;
        assert!(crate::decode::block_receipt_lists(short).is_some());
        let (mut tried, mut accepted) = (0, 0);
        for v in crate::decode::scan_corruptions(short, b"\"\\,:{}[] 0159-.enx\x01") {
            tried += 1;
            if let Some(fast) = crate::decode::block_receipt_lists(&v) {
                accepted += 1;
                assert_eq!(Some(fast), serde_lists(&v), "differ on {v}");
            }
        }
        assert!(
            accepted > tried / 5 && accepted < tried * 3 / 4,
            "{accepted} of {tried}"
        );
        // Left to serde_json: an error to read, a repeated field, an id
        // that is not a u64, nesting deeper than the reader goes.
        let deep = format!(
            r#"[{{"id":0,"result":[{}]}}]"#,
            "[".repeat(70) + &"]".repeat(70)
        );
        for text in [
            r#"[{"id":0,"error":{"code":1,"message":"m"}}]"#,
            r#"[{"id":0,"id":1,"result":[]}]"#,
            r#"[{"id":-1,"result":[]}]"#,
            r#"[{"id":1.0,"result":[]}]"#,
            r#"[{"id":18446744073709551616,"result":[]}]"#,
            &deep,
        ] {
            assert!(crate::decode::block_receipt_lists(text).is_none(), "{text}");
        }
    }

    #[test]
    fn requests_name_each_hash() {
        let body = request_body("eth_getBlockReceipts", &[[0x11; 32], [0x22; 32]]);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v[1]["id"], 1);
        assert_eq!(v[1]["params"][0], hex0x(&[0x22; 32]));
        assert_eq!(
            tx_hash(&format!(
                r#"{{"nonce":"0x1","hash":"{}"}}"#,
                hex0x(&[7; 32])
            ))
            .unwrap(),
            [7; 32]
        );
    }
}
