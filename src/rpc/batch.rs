//! The hot path of the rpc stage: `eth_getBlockByNumber(n, true)` calls,
//! single or batched, sent as plain HTTP POSTs with reqwest, and answers
//! parsed once into per-call outcomes: each block's header fields and the
//! byte ranges of its transactions in the body, which its blocks share.
//!
//! Why this bypasses web3's transport: web3 parses every answer into a
//! `serde_json::Value` tree, twice (the body, then again through
//! jsonrpc-core's untagged `Output`), and the pipeline then walked and freed
//! those trees. In a 200k-transaction backfill that was ~17% of the
//! indexer's CPU for the parsing and ~17% more for turning trees into
//! transactions. A full mainnet block is ~370 KB of JSON, nearly all of it
//! transactions the client never reads: here the whole answer is scanned
//! once, nothing is copied out of it, and `decode` later parses each
//! transaction straight from its slice. `head`, `header` and the
//! other small calls go through [`post`] and [`parse_single`] too.
//!
//! Error semantics match web3's (which the project used before), so the retry policy in `retry` applies
//! unchanged: send/read failures, non-2xx statuses, JSON-RPC error objects
//! (for the batch or per call), bodies that are not JSON, and batches not
//! answered one-for-one.

use std::fmt::Write as _;
use std::sync::Arc;

use reqwest::header::CONTENT_TYPE;
use reqwest::{Client, Url};
use serde::{Deserialize, Deserializer};
use serde_json::error::Category;
use serde_json::value::RawValue;

use super::retry::Failure;
use crate::decode::{BlockWire, RawBlock, block_answers};

/// Bytes of an undecodable body quoted in its error; the rest is noise (and
/// `Failure`'s display truncates anyway).
const QUOTED_BODY_BYTES: usize = 200;

/// Largest Content-Length believed when presizing a body buffer; a bigger
/// claim (or a lie) just grows the buffer as chunks arrive.
const MAX_PRESIZE: u64 = 256 << 20;

/// One call's outcome: the block, split into header and transaction
/// ranges of the response text (`None` for `null`, a block the node has not
/// produced), or why the call failed.
pub(crate) type CallOutcome = Result<Option<RawBlock>, Failure>;

/// The request for blocks `first..first + size`: a plain call when `size` is
/// 1 (so providers without batch support still work), else a batch. Each
/// call's id is its block number, so answers in any order map back.
pub(crate) fn request_body(first: u64, size: usize) -> String {
    let call = |out: &mut String, n: u64| {
        let _ = write!(
            out,
            r#"{{"jsonrpc":"2.0","id":{n},"method":"eth_getBlockByNumber","params":["0x{n:x}",true]}}"#
        );
    };
    let mut out = String::with_capacity(96 * size + 2);
    if size == 1 {
        call(&mut out, first);
        return out;
    }
    out.push('[');
    for (i, n) in (first..first + size as u64).enumerate() {
        if i > 0 {
            out.push(',');
        }
        call(&mut out, n);
    }
    out.push(']');
    out
}

/// A reqwest error with its causes (`connection refused`, `timed out`),
/// which its own text leaves out, and without the URL, which the error
/// around it names already, redacted.
fn causes(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        let s_text = s.to_string();
        if !text.contains(&s_text) {
            text.push_str(": ");
            text.push_str(&s_text);
        }
        source = s.source();
    }
    text
}

/// POSTs `body` and returns the answer's bytes; any non-2xx status is a
/// failure. The body is read even then, as web3 does, so the connection
/// stays reusable.
pub(crate) async fn post(
    client: &Client,
    url: &Url,
    body: String,
    max_body: usize,
) -> Result<Vec<u8>, Failure> {
    let mut response = client
        .post(url.clone())
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| {
            if e.is_connect() {
                Failure::Unreachable(causes(e))
            } else {
                Failure::Transport(format!("failed to send request: {}", causes(e)))
            }
        })?;
    let status = response.status();
    let failure = (!status.is_success()).then(|| status_failure(status, response.headers()));
    // Chunks go straight into one buffer sized by Content-Length: one copy
    // of a multi-megabyte answer, instead of a growing one and a conversion.
    let mut body = Vec::with_capacity(
        response
            .content_length()
            .map_or(0, |n| n.min(MAX_PRESIZE).min(max_body as u64) as usize),
    );
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) if body.len() + chunk.len() > max_body => {
                return Err(Failure::TooLarge {
                    limit_mib: max_body >> 20,
                });
            }
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            Ok(None) => break,
            Err(e) => {
                return Err(Failure::Transport(format!(
                    "failed to read response bytes: {}",
                    causes(e)
                )));
            }
        }
    }
    match failure {
        Some(f) => Err(f),
        None => Ok(body),
    }
}

/// The failure of a non-2xx answer: throttling (429, or 503 naming a
/// Retry-After) keeps the wait the provider asked for.
fn status_failure(status: reqwest::StatusCode, headers: &reqwest::header::HeaderMap) -> Failure {
    let code = status.as_u16();
    let retry_after = headers
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| super::retry::retry_after(v, std::time::SystemTime::now()));
    match (code, retry_after) {
        (429, _) | (503, Some(_)) => Failure::Throttled {
            status: code,
            retry_after,
        },
        _ => Failure::Status(code),
    }
}

/// One JSON-RPC response read as a block, borrowing from the body: the
/// one-pass shape every well-formed answer takes.
#[derive(Deserialize)]
struct BlockResp<'a> {
    /// `null` in error objects that answer a whole batch.
    #[serde(default)]
    id: Option<u64>,
    /// `Some(None)` for a JSON `null`, `None` only when absent.
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<Option<BlockWire<'a>>>,
    #[serde(default)]
    error: Option<ErrorObj>,
}

/// One JSON-RPC response whose result is kept as raw text: the fallback
/// when some result is not block-shaped, so that each call still gets an
/// outcome (and a bad block its own error); also how `receipts` reads
/// its answers.
#[derive(Deserialize)]
pub(super) struct Resp<'a> {
    #[serde(default)]
    pub(super) id: Option<u64>,
    /// `Some("null")` for a JSON `null`, `None` only when absent.
    #[serde(default, borrow, deserialize_with = "present")]
    pub(super) result: Option<&'a RawValue>,
    #[serde(default)]
    pub(super) error: Option<ErrorObj>,
}

#[derive(Deserialize)]
pub(super) struct ErrorObj {
    pub(super) code: i64,
    #[serde(default)]
    pub(super) message: String,
}

/// Keeps a present `null` distinct from an absent field.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// The outcome of a response, once its result is (or is not) a block.
fn outcome(
    error: Option<ErrorObj>,
    result: Option<Option<Result<BlockWire<'_>, String>>>,
    body: &Arc<String>,
) -> CallOutcome {
    match (error, result) {
        (Some(e), _) => Err(Failure::Rpc {
            code: e.code,
            message: e.message,
        }),
        (None, Some(None)) => Ok(None),
        (None, Some(Some(block))) => {
            let (header, txs) = block
                .and_then(|b| b.split(body).map_err(|e| e.to_string()))
                .map_err(Failure::Malformed)?;
            Ok(Some(RawBlock {
                text: Arc::clone(body),
                header,
                txs,
                receipts: None,
                logs: None,
            }))
        }
        (None, None) => Err(Failure::BadBatch(
            "invalid response: neither result nor error".to_owned(),
        )),
    }
}

impl BlockResp<'_> {
    fn outcome(self, body: &Arc<String>) -> (Option<u64>, CallOutcome) {
        let result = self.result.map(|r| r.map(Ok));
        (self.id, outcome(self.error, result, body))
    }
}

impl Resp<'_> {
    fn outcome(self, body: &Arc<String>) -> (Option<u64>, CallOutcome) {
        let result = self.result.map(|raw| {
            (raw.get() != "null").then(|| {
                serde_json::from_str::<BlockWire>(raw.get())
                    .map_err(|e| format!("expected a block object: {e}"))
            })
        });
        (self.id, outcome(self.error, result, body))
    }
}

/// Splits the answer to [`request_body`]`(first, size)` into one outcome per
/// block, in block order. `Err` means the answer as a whole is unusable.
///
/// A well-formed answer is read in one pass: each result straight into its
/// header fields and transaction ranges, all borrowing from the body, which
/// the blocks then share. Only when that fails is it read again, result by
/// result, to tell a bad block from a bad answer.
pub(crate) fn parse_answer(
    body: Vec<u8>,
    first: u64,
    size: usize,
) -> Result<Vec<CallOutcome>, Failure> {
    let body = match String::from_utf8(body) {
        Ok(text) => Arc::new(text),
        Err(e) => {
            let bytes = e.as_bytes();
            let quoted = String::from_utf8_lossy(&bytes[..bytes.len().min(QUOTED_BODY_BYTES)]);
            return Err(Failure::Undecodable(format!(
                "response is not UTF-8: {quoted}"
            )));
        }
    };
    let text = body.as_str();
    if size == 1 {
        let (_, outcome) = match serde_json::from_str::<BlockResp>(text) {
            Ok(resp) => resp.outcome(&body),
            Err(_) => serde_json::from_str::<Resp>(text)
                .map_err(|e| undecodable(&e, text))?
                .outcome(&body),
        };
        return Ok(vec![outcome]);
    }
    match text.bytes().find(|b| !b.is_ascii_whitespace()) {
        Some(b'[') => {}
        Some(b'{') => {
            // Providers refuse a batch with one error object ("batch too
            // large"); a success object is as wrong, and as retryable.
            let resp: Resp = serde_json::from_str(text).map_err(|e| undecodable(&e, text))?;
            return Err(match resp.error {
                Some(e) => Failure::Rpc {
                    code: e.code,
                    message: e.message,
                },
                None => Failure::BadBatch(
                    "invalid response: a single success object for a batch".to_owned(),
                ),
            });
        }
        _ => {
            return Err(match serde_json::from_str::<serde::de::IgnoredAny>(text) {
                Ok(_) => Failure::BadBatch(
                    "invalid response: a batch answered by a non-array".to_owned(),
                ),
                Err(e) => undecodable(&e, text),
            });
        }
    }
    // The one-pass reader where the answers have the plain shape (no
    // error); else serde_json, the same way.
    let outcomes: Vec<(Option<u64>, CallOutcome)> = match block_answers(text) {
        Some(answers) => answers
            .into_iter()
            .map(|(id, result)| (id, outcome(None, result.map(|r| r.map(Ok)), &body)))
            .collect(),
        None => match serde_json::from_str::<Vec<BlockResp>>(text) {
            Ok(resps) => resps.into_iter().map(|r| r.outcome(&body)).collect(),
            Err(_) => serde_json::from_str::<Vec<Resp>>(text)
                .map_err(|e| undecodable(&e, text))?
                .into_iter()
                .map(|r| r.outcome(&body))
                .collect(),
        },
    };
    if outcomes.len() != size {
        return Err(Failure::BadBatch(format!(
            "invalid response: unexpected number of responses ({} for {size} calls)",
            outcomes.len()
        )));
    }
    let mut slots: Vec<Option<CallOutcome>> = (0..size).map(|_| None).collect();
    for (id, outcome) in outcomes {
        let slot = id
            .and_then(|id| id.checked_sub(first))
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| slots.get_mut(i))
            .filter(|s| s.is_none());
        let Some(slot) = slot else {
            return Err(Failure::BadBatch(format!(
                "invalid response: unexpected or repeated id {id:?}"
            )));
        };
        *slot = Some(outcome);
    }
    // `size` answers, each to a distinct call: every slot is filled.
    Ok(slots.into_iter().flatten().collect())
}

/// A body that failed to parse: JSON of the wrong shape is a bad batch
/// (retryable, or a batch cap); anything else is not JSON at all.
/// The `result` of a single (non-batch) call's answer, or its error.
pub(crate) fn parse_single(body: &[u8]) -> Result<serde_json::Value, Failure> {
    let text = std::str::from_utf8(body).map_err(|_| {
        let quoted = String::from_utf8_lossy(&body[..body.len().min(QUOTED_BODY_BYTES)]);
        Failure::Undecodable(format!("response is not UTF-8: {quoted}"))
    })?;
    let resp: Resp = serde_json::from_str(text).map_err(|e| undecodable(&e, text))?;
    match (resp.error, resp.result) {
        (Some(e), _) => Err(Failure::Rpc {
            code: e.code,
            message: e.message,
        }),
        (None, Some(raw)) => serde_json::from_str(raw.get())
            .map_err(|e| Failure::BadBatch(format!("undecodable response: {e}"))),
        (None, None) => Err(Failure::BadBatch(
            "invalid response: neither result nor error".to_owned(),
        )),
    }
}

fn undecodable(e: &serde_json::Error, body: &str) -> Failure {
    if e.classify() == Category::Data {
        return Failure::BadBatch(format!("undecodable response: {e}"));
    }
    let mut cut = body.len().min(QUOTED_BODY_BYTES);
    while !body.is_char_boundary(cut) {
        cut -= 1;
    }
    Failure::Undecodable(format!("{e}: {}", &body[..cut]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::retry::{Class, classify};

    /// Each outcome as text: a block as its number and its transactions'
    /// JSON, read back through the ranges.
    fn texts(r: Vec<CallOutcome>) -> Vec<String> {
        r.into_iter()
            .map(|o| match o {
                Ok(Some(b)) => {
                    let txs: Vec<&str> = (0..b.txs.len()).map(|i| b.tx_json(i).unwrap()).collect();
                    format!("block {}: {}", b.header.number, txs.join(" | "))
                }
                Ok(None) => "null".to_owned(),
                Err(f) => format!("err: {f}"),
            })
            .collect()
    }

    fn answer(body: &[u8], first: u64, size: usize) -> Result<Vec<CallOutcome>, Failure> {
        parse_answer(body.to_vec(), first, size)
    }

    const H: &str = "0x1111111111111111111111111111111111111111111111111111111111111111";

    /// A block object with the header fields the index reads.
    fn block(number: &str, txs: &str) -> String {
        format!(
            r#"{{"number":{number},"hash":"{H}","parentHash":"{H}","timestamp":"0x1","transactions":{txs}}}"#
        )
    }

    #[test]
    fn requests_are_plain_for_one_block_and_batched_for_more() {
        let one: serde_json::Value = serde_json::from_str(&request_body(26, 1)).unwrap();
        assert_eq!(
            one,
            serde_json::json!({"jsonrpc": "2.0", "id": 26, "method": "eth_getBlockByNumber", "params": ["0x1a", true]})
        );
        let many: serde_json::Value = serde_json::from_str(&request_body(9, 3)).unwrap();
        let ids: Vec<_> = many
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_u64().unwrap())
            .collect();
        assert_eq!(ids, [9, 10, 11]);
        assert_eq!(many[2]["params"], serde_json::json!(["0xb", true]));
    }

    #[test]
    fn batch_answers_map_back_by_id_and_split_blocks_in_one_pass() {
        let body = format!(
            r#"[{{"jsonrpc":"2.0","id":6,"result":null}},
            {{"jsonrpc":"2.0","id":5,"result":{}}},
            {{"jsonrpc":"2.0","id":7,"error":{{"code":-32000,"message":"header not found"}}}}]"#,
            block(r#""0x5""#, r#"[{"a":"\u0041"}, {"nonce":"0x2"}]"#)
        );
        let got = answer(body.as_bytes(), 5, 3).unwrap();
        // Both blocks of a batch share the response text.
        if let Ok(Some(b)) = &got[0] {
            assert_eq!(b.text.as_str(), body, "ranges index the whole body");
        }
        assert_eq!(
            texts(got),
            [
                r#"block 5: {"a":"\u0041"} | {"nonce":"0x2"}"#,
                "null",
                "err: json-rpc error -32000: header not found"
            ]
        );
        let single = format!(
            r#"{{"jsonrpc":"2.0","id":4,"result":{}}}"#,
            block(r#""0x4""#, "[]")
        );
        assert_eq!(
            texts(answer(single.as_bytes(), 4, 1).unwrap()),
            ["block 4: "]
        );
    }

    /// What serde_json makes of a batch of block answers: each answer's id
    /// and its block; `None` where it refuses the text or an answer holds
    /// an error.
    fn serde_answers(text: &str) -> Option<Vec<crate::decode::BlockAnswer<'_>>> {
        let resps: Vec<BlockResp> = serde_json::from_str(text).ok()?;
        resps
            .into_iter()
            .map(|r| r.error.is_none().then_some((r.id, r.result)))
            .collect()
    }

    #[test]
    fn the_one_pass_reader_reads_block_batches_as_serde_json_does() {
        // Every fixture block (mainnet, Gnosis's Aura seals, the testnets,
        // withdrawals, blobs) in one batch, in the shape a node sends, then
        // every one-byte corruption of a short batch: the reader accepts
        // only what serde_json reads the same way.
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/blocks");
        let mut answers = Vec::new();
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        names.sort();
        for (id, path) in names.iter().enumerate() {
            let mut text = String::new();
            let file = std::fs::File::open(path).unwrap();
            std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(file), &mut text)
                .unwrap();
            answers.push(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{text}}}"#));
        }
        assert!(answers.len() >= 40, "{} fixture blocks", answers.len());
        let body = format!("[{}]", answers.join(",\n"));
        let fast = block_answers(&body).expect("the plain shape");
        assert_eq!(Some(&fast), serde_answers(&body).as_ref());
        // Arbitrum's `l1BlockNumber`, read by both readers alike.
        let arb = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/chains/arb-sepolia-185232421.json"
        ))
        .unwrap();
        assert!(arb.contains(r#""l1BlockNumber""#));
        let arb = format!(r#"[{{"jsonrpc":"2.0","id":0,"result":{arb}}}]"#);
        let fast_arb = block_answers(&arb).expect("the plain shape");
        assert_eq!(Some(&fast_arb), serde_answers(&arb).as_ref());
        // The whole path: the same blocks as the fallback reads them.
        let got = answer(body.as_bytes(), 0, answers.len()).unwrap();
        let txs: usize = got
            .iter()
            .map(|o| o.as_ref().unwrap().as_ref().unwrap().txs.len())
            .sum();
        assert!(txs > 1_000, "{txs} transactions");
        let outcomes = texts(got);
        let shared = Arc::new(body.clone());
        let slow: Vec<CallOutcome> = serde_json::from_str::<Vec<BlockResp>>(&shared)
            .unwrap()
            .into_iter()
            .map(|r| r.outcome(&shared).1)
            .collect();
        let slow = texts(slow);
        let differ = (0..slow.len()).find(|&i| outcomes.get(i) != slow.get(i));
        assert!(
            differ.is_none() && outcomes.len() == slow.len(),
            "answer {differ:?} differs"
        );

        let short = r#"[{"jsonrpc":"2.0","id":0,"result":{"number":"0x1","hash":null,"uncles":["0x2",{}],"size":-1.5e3,"withdrawals":[{"index":"0x0","x":[true,false]}],"transactions":[{"a":"0x1","b":[null,{}]},"0x3"]}},{"id":12,"result":null,"error":null}]"#;
        assert!(block_answers(short).is_some());
        let (mut tried, mut accepted) = (0, 0);
        for v in crate::decode::scan_corruptions(short, b"\"\\,:{}[] 0159-.enx\x01") {
            tried += 1;
            if let Some(fast) = block_answers(&v) {
                accepted += 1;
                assert_eq!(Some(fast), serde_answers(&v), "differ on {v}");
            }
        }
        assert!(
            accepted > tried / 5 && accepted < tried * 3 / 4,
            "{accepted} of {tried}"
        );
        // Left to serde_json: an error to read, a repeated field (of the
        // answer, the block, a withdrawal), a key or value with an escape,
        // an id that is not a u64, nesting deeper than the reader goes.
        let deep = format!(
            r#"[{{"id":0,"result":{{"transactions":[{}]}}}}]"#,
            "[".repeat(70) + &"]".repeat(70)
        );
        for text in [
            r#"[{"id":0,"error":{"code":1,"message":"m"}}]"#,
            r#"[{"id":0,"id":1,"result":null}]"#,
            r#"[{"id":0,"result":{"number":"0x1","number":"0x2"}}]"#,
            r#"[{"id":0,"result":{"l1BlockNumber":"0x1","l1BlockNumber":"0x1"}}]"#,
            r#"[{"id":0,"result":{"withdrawals":[{"index":"0x1","index":"0x1"}]}}]"#,
            r#"[{"id":0,"result":{"n\u0075mber":"0x1"}}]"#,
            r#"[{"id":0,"result":{"number":"0x\u0031"}}]"#,
            r#"[{"id":0,"result":{"number":1}}]"#,
            r#"[{"id":-1,"result":null}]"#,
            r#"[{"id":1.0,"result":null}]"#,
            &deep,
        ] {
            assert!(block_answers(text).is_none(), "{text}");
        }
    }

    #[test]
    fn a_malformed_block_fails_alone_and_fatally() {
        // Shapes the one-pass read rejects, read again result by result, and
        // values it accepts but cannot parse: each fails its own call.
        for (bad, why) in [
            (block("4", "[]"), "expected a block object"),
            (r#""0x3""#.to_owned(), "expected a block object"),
            (
                block(r#""4""#, "[]"),
                "field number: expected 0x-prefixed hex",
            ),
            (
                r#"{"hash":"0x1","transactions":[]}"#.to_owned(),
                "missing field number",
            ),
            (
                block(r#""0x2""#, r#"["0xabc"]"#),
                "expected full transaction objects",
            ),
        ] {
            let body = format!(
                r#"[{{"id":1,"result":{}}},{{"id":2,"result":{bad}}}]"#,
                block(r#""0x1""#, "[]")
            );
            let got = answer(body.as_bytes(), 1, 2).unwrap();
            assert!(
                matches!(&got[0], Ok(Some(b)) if b.header.number == 1),
                "{bad}"
            );
            let err = got[1].as_ref().unwrap_err();
            assert!(
                matches!(err, Failure::Malformed(m) if m.contains(why)),
                "{bad}: {err}"
            );
            assert_eq!(classify(err, true), Class::Fatal, "{bad}");
            // Alone, as a plain call, the same.
            let single = format!(r#"{{"id":2,"result":{bad}}}"#);
            let got = answer(single.as_bytes(), 2, 1).unwrap();
            assert!(
                matches!(&got[0], Err(Failure::Malformed(m)) if m.contains(why)),
                "{bad}"
            );
        }
    }

    #[test]
    fn unusable_batch_answers_are_classified_like_web3s() {
        let fail = |body: &[u8]| answer(body, 1, 2).unwrap_err();
        let capped = fail(
            br#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"batch too large"}}"#,
        );
        assert_eq!(capped.to_string(), "json-rpc error -32600: batch too large");
        assert_eq!(classify(&capped, true), Class::BatchTooLarge);
        for body in [
            &br#"[{"jsonrpc":"2.0","id":1,"result":null}]"#[..],
            br#"[{"id":1,"result":null},{"id":1,"result":null}]"#,
            br#"[{"id":1,"result":null},{"id":9,"result":null}]"#,
            br#"[{"id":1,"result":null},{"id":"2","result":null}]"#,
            br#"{"id":1,"result":null}"#,
            br#""batch requests are not supported""#,
        ] {
            let f = fail(body);
            let shown = String::from_utf8_lossy(body);
            assert!(matches!(f, Failure::BadBatch(_)), "{shown}: {f:?}");
            assert_eq!(classify(&f, true), Class::BatchTooLarge, "{shown}");
        }
        // A response with neither result nor error fails its own call only.
        let neither = answer(br#"[{"id":1,"result":null},{"id":2}]"#, 1, 2).unwrap();
        assert!(matches!(&neither[1], Err(Failure::BadBatch(_))));
        let html = fail(b"<html>502 Bad Gateway</html>");
        assert!(matches!(html, Failure::Undecodable(_)), "{html:?}");
        assert_eq!(classify(&html, true), Class::Retry);
        assert!(html.to_string().contains("<html>502"), "{html}");
        let cut = fail(br#"[{"id":1,"result":{"number":"0x1""#);
        assert_eq!(classify(&cut, true), Class::Retry);
        let latin1 = fail(b"[{\"id\":1,\"result\":\"\xe9\"}]");
        assert!(
            matches!(&latin1, Failure::Undecodable(m) if m.contains("not UTF-8")),
            "{latin1}"
        );
        assert_eq!(classify(&latin1, true), Class::Retry);
    }
}
