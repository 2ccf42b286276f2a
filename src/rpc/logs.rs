//! `eth_getLogs` on the wire (`logs.mode = "getLogs"`): the request for a
//! block range or one block hash with the configured filters, the answer
//! read into [`Log`]s, and what a provider means when it refuses a range.
//!
//! Providers cap `eth_getLogs` by block range or by result count, and each
//! says so in its own words, sometimes with a range that would work. This
//! module reads those answers into a [`Limit`] and keeps the adaptive range
//! ([`Span`]): start wide, take the suggested range or halve on a refusal,
//! grow back after successes, never ask for the same range twice after a
//! refusal. Pure: bodies and failures in, requests and ranges out; the
//! attempts that send them are in `log_stream` (run by `driver`).

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use super::batch::Resp;
use super::retry::{Failure, halved};
use crate::config::LogsSettings;
use crate::decode::{Address, B256, Log, hex0x, logs_from_json};

/// Where the logs of one call come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocks {
    /// `fromBlock..=toBlock`; never `from > to`.
    Range(u64, u64),
    /// Exactly the block with this hash (EIP-234): the answer cannot come
    /// from another fork, and a node without the block says so.
    Hash(B256),
}

/// The filter object of `eth_getLogs` for `blocks`, with the addresses and
/// first topics of `filters` (omitted when empty: everything).
pub(crate) fn request_body(blocks: Blocks, filters: &LogsSettings) -> String {
    let mut f = String::with_capacity(128);
    match blocks {
        Blocks::Range(from, to) => {
            debug_assert!(from <= to, "a range with from > to is a bug");
            let _ = write!(f, r#""fromBlock":"0x{from:x}","toBlock":"0x{to:x}""#);
        }
        Blocks::Hash(h) => {
            let _ = write!(f, r#""blockHash":"{}""#, hex0x(&h));
        }
    }
    if !filters.addresses.is_empty() {
        f.push_str(r#","address":"#);
        list(&mut f, &filters.addresses);
    }
    if !filters.topics0.is_empty() {
        f.push_str(r#","topics":["#);
        list(&mut f, &filters.topics0);
        f.push(']');
    }
    format!(r#"{{"jsonrpc":"2.0","id":0,"method":"eth_getLogs","params":[{{{f}}}]}}"#)
}

fn list<const N: usize>(out: &mut String, items: &[[u8; N]]) {
    out.push('[');
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        let _ = write!(out, "\"{}\"", hex0x(x));
    }
    out.push(']');
}

/// The logs of an `eth_getLogs` answer, or its error.
pub(crate) fn parse_answer(body: &[u8]) -> Result<Vec<Log>, Failure> {
    let text = std::str::from_utf8(body)
        .map_err(|_| Failure::Undecodable("eth_getLogs answer is not UTF-8".into()))?;
    let resp: Resp = serde_json::from_str(text).map_err(|_| {
        let shown: String = text.chars().take(200).collect();
        Failure::Undecodable(format!("eth_getLogs answer: {shown}"))
    })?;
    if let Some(e) = resp.error {
        return Err(Failure::Rpc {
            code: e.code,
            message: e.message,
        });
    }
    let result = resp
        .result
        .ok_or_else(|| Failure::BadBatch("invalid response: neither result nor error".into()))?;
    if result.get() == "null" {
        return Err(Failure::Missing("eth_getLogs answered null".into()));
    }
    logs_from_json(result.get()).map_err(|e| Failure::Malformed(format!("eth_getLogs: {e}")))
}

/// What a provider's refusal of a range means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Limit {
    /// It names a range that would work (Infura, Alchemy, reth).
    Suggested(u64, u64),
    /// It allows at most this many blocks per call (QuickNode, BlockPI,
    /// reth's `max block range`, "exceed maximum block range: N").
    MaxBlocks(u64),
    /// Too many results or too wide, with no number to go by: halve.
    Halve,
}

/// Whether `f` refuses the size of an `eth_getLogs` range, and how.
/// Everything else (rate limits included) is for the retry policy.
pub(crate) fn limit(f: &Failure) -> Option<Limit> {
    let message = match f {
        // QuickNode and some gateways: 413 Payload Too Large.
        Failure::Status(413) => return Some(Limit::Halve),
        Failure::Rpc { message, .. } => message.to_ascii_lowercase(),
        _ => return None,
    };
    let m = message.as_str();
    const RANGE_OR_SIZE: &[&str] = &[
        "more than",
        "range",
        "response size",
        "too many",
        "max results",
        "limit exceeded",
        "size exceeded",
    ];
    if !RANGE_OR_SIZE.iter().any(|p| m.contains(p)) {
        return None;
    }
    // Infura: "... Try with this block range [0x1, 0x2]."; Alchemy: "...
    // this block range should work: [0x1, 0x2]".
    if let Some((a, b)) = bracketed_hex_pair(m) {
        return Some(Limit::Suggested(a, b));
    }
    // reth: "query exceeds max results 20000, retry with the range 100-200".
    if let Some(rest) = after(m, "retry with the range ")
        && let Some((a, b)) = rest.split_once('-')
        && let (Some(a), Some(b)) = (leading_number(a), leading_number(b))
    {
        return Some(Limit::Suggested(a, b));
    }
    // QuickNode "eth_getLogs is limited to a 10,000 range", BlockPI
    // "eth_getLogs is limited to 1024 block range", reth "query exceeds max
    // block range 100000", "exceed maximum block range: 50000".
    for marker in [
        "limited to a ",
        "limited to ",
        "max block range ",
        "maximum block range",
    ] {
        if let Some(n) = after(m, marker).and_then(leading_number) {
            return Some(Limit::MaxBlocks(n.max(1)));
        }
    }
    // Infura without a range, Ankr "block range is too wide", "Block range
    // is too large", "response size should not greater than …".
    let known = [
        "query returned more than",
        "block range is too wide",
        "block range is too large",
        "range is too large",
        "response size should not greater than",
        "response size exceeded",
        "too many results",
        "max results",
        "block range",
    ];
    known.iter().any(|k| m.contains(k)).then_some(Limit::Halve)
}

fn after<'a>(s: &'a str, marker: &str) -> Option<&'a str> {
    s.find(marker).map(|i| &s[i + marker.len()..])
}

/// The number at the start of `s` (after blanks and a colon), digits with
/// optional thousands commas: "10,000 range" is 10000.
fn leading_number(s: &str) -> Option<u64> {
    let s = s.trim_start_matches([' ', ':']);
    let digits: String = s
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == ',')
        .filter(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The first `[0xA, 0xB]` in `s`.
fn bracketed_hex_pair(s: &str) -> Option<(u64, u64)> {
    let open = s.find("[0x")?;
    let close = open + s[open..].find(']')?;
    let (a, b) = s[open + 1..close].split_once(',')?;
    let hex = |x: &str| u64::from_str_radix(x.trim().strip_prefix("0x")?, 16).ok();
    Some((hex(a)?, hex(b)?))
}

/// The adaptive width of `eth_getLogs` ranges, shared by every call in
/// flight so one refusal teaches them all.
pub(crate) struct Span {
    /// Blocks per call now.
    width: AtomicU64,
    /// The most it grows back to: the configured range, or less once a
    /// provider named its maximum.
    cap: AtomicU64,
}

impl Span {
    pub(crate) fn new(max: u64) -> Span {
        let max = max.max(1);
        Span {
            width: AtomicU64::new(max),
            cap: AtomicU64::new(max),
        }
    }

    /// Blocks the next call asks for.
    pub(crate) fn width(&self) -> u64 {
        self.width.load(Relaxed).max(1)
    }

    /// After `len` blocks were answered: grow by half again, up to the cap.
    pub(crate) fn succeeded(&self, len: u64) {
        let cap = self.cap.load(Relaxed);
        let grown = len.saturating_add(len / 2 + 1).min(cap);
        self.width.fetch_max(grown.min(cap), Relaxed);
        // A concurrent refusal may have lowered the cap meanwhile.
        self.width.fetch_min(self.cap.load(Relaxed), Relaxed);
    }

    /// After a refusal of `from..=to` for `limit`: how far the retry of
    /// `from` reaches. Always strictly inside the refused range (so no range
    /// is asked for twice), `None` when that range was one block already.
    pub(crate) fn refused(&self, from: u64, to: u64, limit: Limit) -> Option<u64> {
        let len = to - from + 1;
        if len == 1 {
            return None;
        }
        let next = match limit {
            Limit::Suggested(a, b) if a == from && a <= b && b < to => b - a + 1,
            Limit::MaxBlocks(n) => {
                self.cap.fetch_min(n, Relaxed);
                if n < len { n } else { halved(len) }
            }
            Limit::Suggested(..) | Limit::Halve => halved(len),
        }
        .clamp(1, len - 1);
        self.width.fetch_min(next, Relaxed);
        Some(from + next - 1)
    }
}

/// Whether a block with `bloom` may hold a log the filters keep: the test
/// for a `getLogs` answer that came back empty for it.
pub(crate) fn bloom_may_match(bloom: &crate::decode::Bloom, filters: &LogsSettings) -> bool {
    use crate::decode::bloom_may_contain;
    if bloom.iter().all(|b| *b == 0) {
        return false;
    }
    let any = |items: &mut dyn Iterator<Item = &[u8]>| {
        let mut items = items.peekable();
        items.peek().is_none() || items.any(|x| bloom_may_contain(bloom, x))
    };
    any(&mut filters.addresses.iter().map(|a: &Address| &a[..]))
        && any(&mut filters.topics0.iter().map(|t: &B256| &t[..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rpc(code: i64, message: &str) -> Failure {
        Failure::Rpc {
            code,
            message: message.into(),
        }
    }

    #[test]
    fn every_known_provider_refusal_is_read() {
        use Limit::*;
        let cases = [
            (
                rpc(
                    -32005,
                    "query returned more than 10000 results. Try with this block range [0x1B4, 0x1F3].",
                ),
                Some(Suggested(0x1b4, 0x1f3)),
            ),
            (
                rpc(
                    -32602,
                    "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of 10K logs in the response. Based on your parameters, this block range should work: [0x10, 0x2a]",
                ),
                Some(Suggested(0x10, 0x2a)),
            ),
            (
                rpc(-32614, "eth_getLogs is limited to a 10,000 range"),
                Some(MaxBlocks(10_000)),
            ),
            (Failure::Status(413), Some(Halve)),
            (
                rpc(
                    -32602,
                    "query exceeds max results 20000, retry with the range 100-200",
                ),
                Some(Suggested(100, 200)),
            ),
            (
                rpc(-32602, "query exceeds max block range 100000"),
                Some(MaxBlocks(100_000)),
            ),
            (rpc(-32600, "block range is too wide"), Some(Halve)),
            (
                rpc(-32000, "eth_getLogs is limited to 1024 block range"),
                Some(MaxBlocks(1024)),
            ),
            (
                rpc(-32000, "exceed maximum block range: 50000"),
                Some(MaxBlocks(50_000)),
            ),
            (rpc(-32000, "Block range is too large"), Some(Halve)),
            (
                rpc(
                    -32000,
                    "response size should not greater than 10000000 bytes",
                ),
                Some(Halve),
            ),
            // Not range limits: left to the retry policy.
            (rpc(-32005, "daily request count exceeded"), None),
            (rpc(-32016, "rate limit exceeded"), None),
            (rpc(-32000, "header not found"), None),
            (Failure::Status(429), None),
        ];
        for (f, want) in cases {
            assert_eq!(limit(&f), want, "{f}");
        }
    }

    #[test]
    fn the_range_shrinks_strictly_and_grows_back_to_the_cap() {
        let s = Span::new(10_000);
        assert_eq!(s.width(), 10_000);
        // A suggestion inside the range is taken.
        assert_eq!(
            s.refused(100, 10_099, Limit::Suggested(100, 599)),
            Some(599)
        );
        assert_eq!(s.width(), 500);
        // A suggestion that is not smaller (or starts elsewhere) halves.
        assert_eq!(s.refused(100, 599, Limit::Suggested(100, 599)), Some(349));
        assert_eq!(s.refused(100, 349, Limit::Suggested(7, 9)), Some(224));
        // A stated maximum caps growth for good.
        assert_eq!(s.refused(0, 9_999, Limit::MaxBlocks(1024)), Some(1023));
        for _ in 0..50 {
            s.succeeded(s.width());
        }
        assert_eq!(s.width(), 1024);
        // One block cannot shrink further: the caller fails.
        assert_eq!(s.refused(5, 5, Limit::Halve), None);
        assert_eq!(s.refused(5, 6, Limit::Halve), Some(5));
        assert_eq!(s.refused(5, 6, Limit::MaxBlocks(5000)), Some(5));
    }

    #[test]
    fn requests_carry_the_filters() {
        let mut f = crate::config::Settings::defaults().logs;
        let body = request_body(Blocks::Range(16, 31), &f);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(v["method"], "eth_getLogs");
        assert_eq!(
            v["params"][0],
            serde_json::json!({"fromBlock": "0x10", "toBlock": "0x1f"})
        );
        f.addresses = vec![[0xaa; 20], [0xbb; 20]];
        f.topics0 = vec![[0xcc; 32]];
        let body = request_body(Blocks::Hash([0x11; 32]), &f);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        let p = &v["params"][0];
        assert_eq!(p["blockHash"], hex0x(&[0x11; 32]));
        assert_eq!(p["address"][1], hex0x(&[0xbb; 20]));
        assert_eq!(p["topics"][0][0], hex0x(&[0xcc; 32]));
    }

    #[test]
    fn answers_are_logs_or_their_error() {
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":0,"result":[{{"address":"0x{a}","topics":["0x{t}"],"data":"0x0102","blockNumber":"0x5","blockHash":"0x{t}","transactionHash":"0x{t}","transactionIndex":"0x2","logIndex":"0x9","removed":false}}]}}"#,
            a = "aa".repeat(20),
            t = "cc".repeat(32)
        );
        let logs = parse_answer(body.as_bytes()).unwrap();
        assert_eq!(logs.len(), 1);
        assert_eq!(
            (
                logs[0].block_number,
                logs[0].transaction_index,
                logs[0].log_index
            ),
            (Some(5), Some(2), 9)
        );
        assert_eq!(logs[0].data, [1, 2]);
        let err = parse_answer(
            br#"{"jsonrpc":"2.0","id":0,"error":{"code":-32005,"message":"query returned more than 10000 results"}}"#,
        )
        .unwrap_err();
        assert_eq!(limit(&err), Some(Limit::Halve));
        assert!(matches!(
            parse_answer(br#"{"id":0,"result":[{"topics":[]}]}"#),
            Err(Failure::Malformed(_))
        ));
    }

    #[test]
    fn blooms_tell_which_empty_answers_to_doubt() {
        let mut f = crate::config::Settings::defaults().logs;
        let mut bloom = [0u8; 256];
        assert!(
            !bloom_may_match(&bloom, &f),
            "an empty bloom: no logs at all"
        );
        crate::decode::bloom_add(&mut bloom, &[0xaa; 20]);
        crate::decode::bloom_add(&mut bloom, &[0xcc; 32]);
        assert!(bloom_may_match(&bloom, &f), "no filter: any log matters");
        f.addresses = vec![[0xaa; 20]];
        f.topics0 = vec![[0xcc; 32]];
        assert!(bloom_may_match(&bloom, &f));
        f.addresses = vec![[0xbb; 20]];
        assert!(!bloom_may_match(&bloom, &f));
    }
}
