//! The hot path of the rpc stage: `eth_getBlockByNumber(n, true)` calls,
//! single or batched, sent as plain HTTP POSTs with reqwest, and answers
//! parsed once into per-call outcomes whose `result` stays raw JSON text.
//!
//! Why this bypasses web3's transport: web3 parses every answer into a
//! `serde_json::Value` tree, twice (the body, then again through
//! jsonrpc-core's untagged `Output`), and the pipeline then walked and freed
//! those trees. In a 200k-transaction backfill that was ~17% of the
//! indexer's CPU for the parsing and ~17% more for turning trees into
//! transactions. A full mainnet block is ~370 KB of JSON, nearly all of it
//! transactions the client never reads: here it is scanned for its extent,
//! copied out once as text, and `decode` later parses each transaction
//! straight from that text. `head`, `header` and `subscribe_heads` are small
//! and rare, so they keep using web3.
//!
//! Error semantics match web3's, so the retry policy in `retry` applies
//! unchanged: send/read failures, non-2xx statuses, JSON-RPC error objects
//! (for the batch or per call), bodies that are not JSON, and batches not
//! answered one-for-one.

use std::fmt::Write as _;

use reqwest::header::CONTENT_TYPE;
use reqwest::{Client, Url};
use serde::{Deserialize, Deserializer};
use serde_json::error::Category;
use serde_json::value::RawValue;

use super::retry::Failure;

/// Bytes of an undecodable body quoted in its error; the rest is noise (and
/// `Failure`'s display truncates anyway).
const QUOTED_BODY_BYTES: usize = 200;

/// One call's outcome: the raw `result` text (`null` for a block the node
/// has not produced), or why the call failed.
pub(crate) type CallOutcome = Result<Box<RawValue>, Failure>;

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

/// POSTs `body` and returns the answer's bytes; any non-2xx status is a
/// failure. The body is read even then, as web3 does, so the connection
/// stays reusable.
pub(crate) async fn post(client: &Client, url: &Url, body: String) -> Result<Vec<u8>, Failure> {
    let response = client
        .post(url.clone())
        .header(CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await
        .map_err(|e| Failure::Transport(format!("failed to send request: {e}")))?;
    let status = response.status();
    let bytes = response
        .bytes()
        .await
        .map_err(|e| Failure::Transport(format!("failed to read response bytes: {e}")))?;
    if !status.is_success() {
        return Err(Failure::Status(status.as_u16()));
    }
    Ok(bytes.into())
}

/// One JSON-RPC response, borrowing from the body.
#[derive(Deserialize)]
struct Resp<'a> {
    /// `null` in error objects that answer a whole batch.
    #[serde(default)]
    id: Option<u64>,
    /// `Some("null")` for a JSON `null`, `None` only when absent.
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default)]
    error: Option<ErrorObj>,
}

#[derive(Deserialize)]
struct ErrorObj {
    code: i64,
    #[serde(default)]
    message: String,
}

/// Keeps a present `null` distinct from an absent field.
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

impl Resp<'_> {
    fn outcome(self) -> CallOutcome {
        match (self.error, self.result) {
            (Some(e), _) => Err(Failure::Rpc {
                code: e.code,
                message: e.message,
            }),
            (None, Some(raw)) => Ok(raw.to_owned()),
            (None, None) => Err(Failure::BadBatch(
                "invalid response: neither result nor error".to_owned(),
            )),
        }
    }
}

/// Splits the answer to [`request_body`]`(first, size)` into one outcome per
/// block, in block order. `Err` means the answer as a whole is unusable.
pub(crate) fn parse_answer(
    body: &[u8],
    first: u64,
    size: usize,
) -> Result<Vec<CallOutcome>, Failure> {
    let opening = body.iter().find(|b| !b.is_ascii_whitespace());
    if size == 1 {
        let resp: Resp = serde_json::from_slice(body).map_err(|e| undecodable(&e, body))?;
        return Ok(vec![resp.outcome()]);
    }
    match opening {
        Some(b'[') => {}
        Some(b'{') => {
            // Providers refuse a batch with one error object ("batch too
            // large"); a success object is as wrong, and as retryable.
            let resp: Resp = serde_json::from_slice(body).map_err(|e| undecodable(&e, body))?;
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
            return Err(
                match serde_json::from_slice::<serde::de::IgnoredAny>(body) {
                    Ok(_) => Failure::BadBatch(
                        "invalid response: a batch answered by a non-array".to_owned(),
                    ),
                    Err(e) => undecodable(&e, body),
                },
            );
        }
    }
    let resps: Vec<Resp> = serde_json::from_slice(body).map_err(|e| undecodable(&e, body))?;
    if resps.len() != size {
        return Err(Failure::BadBatch(format!(
            "invalid response: unexpected number of responses ({} for {size} calls)",
            resps.len()
        )));
    }
    let mut slots: Vec<Option<CallOutcome>> = (0..size).map(|_| None).collect();
    for resp in resps {
        let slot = resp
            .id
            .and_then(|id| id.checked_sub(first))
            .and_then(|i| usize::try_from(i).ok())
            .and_then(|i| slots.get_mut(i))
            .filter(|s| s.is_none());
        let Some(slot) = slot else {
            return Err(Failure::BadBatch(format!(
                "invalid response: unexpected or repeated id {:?}",
                resp.id
            )));
        };
        *slot = Some(resp.outcome());
    }
    // `size` answers, each to a distinct call: every slot is filled.
    Ok(slots.into_iter().flatten().collect())
}

/// A body that failed to parse: JSON of the wrong shape is a bad batch
/// (retryable, or a batch cap); anything else is not JSON at all.
fn undecodable(e: &serde_json::Error, body: &[u8]) -> Failure {
    if e.classify() == Category::Data {
        return Failure::BadBatch(format!("undecodable response: {e}"));
    }
    let quoted = String::from_utf8_lossy(&body[..body.len().min(QUOTED_BODY_BYTES)]);
    Failure::Undecodable(format!("{e}: {quoted}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rpc::retry::{Class, classify};

    fn texts(r: Vec<CallOutcome>) -> Vec<String> {
        r.into_iter()
            .map(|o| match o {
                Ok(raw) => raw.get().to_owned(),
                Err(f) => format!("err: {f}"),
            })
            .collect()
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
    fn batch_answers_map_back_by_id_and_keep_results_raw() {
        let body = br#"[{"jsonrpc":"2.0","id":6,"result":null},
            {"jsonrpc":"2.0","id":5,"result":{"number":"0x5", "transactions":[{"a":"\u0041"}]}},
            {"jsonrpc":"2.0","id":7,"error":{"code":-32000,"message":"header not found"}}]"#;
        let got = texts(parse_answer(body, 5, 3).unwrap());
        assert_eq!(
            got,
            [
                r#"{"number":"0x5", "transactions":[{"a":"\u0041"}]}"#,
                "null",
                "err: json-rpc error -32000: header not found"
            ]
        );
        let single = br#"{"jsonrpc":"2.0","id":4,"result":{"number":"0x4"}}"#;
        assert_eq!(
            texts(parse_answer(single, 4, 1).unwrap()),
            [r#"{"number":"0x4"}"#]
        );
    }

    #[test]
    fn unusable_batch_answers_are_classified_like_web3s() {
        let fail = |body: &[u8]| parse_answer(body, 1, 2).unwrap_err();
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
        let neither = parse_answer(br#"[{"id":1,"result":null},{"id":2}]"#, 1, 2).unwrap();
        assert!(matches!(&neither[1], Err(Failure::BadBatch(_))));
        let html = fail(b"<html>502 Bad Gateway</html>");
        assert!(matches!(html, Failure::Undecodable(_)), "{html:?}");
        assert_eq!(classify(&html, true), Class::Retry);
        assert!(html.to_string().contains("<html>502"), "{html}");
        let cut = fail(br#"[{"id":1,"result":{"number":"0x1""#);
        assert_eq!(classify(&cut, true), Class::Retry);
    }
}
