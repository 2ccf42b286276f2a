//! Retry policy of the rpc stage: which failures deserve another try, which
//! mean "your batch is too big", and how long to wait between tries.
//!
//! Pure functions only: no I/O, no clock and no randomness of its own (the
//! jitter draw is passed in), so every rule is unit-tested here. The retry
//! loop itself, which applies them, is `driver`.

use std::fmt;
use std::time::Duration;

/// Longest cause text kept in logs and errors; some transport errors embed the
/// whole response body, which for a block can be megabytes.
const MAX_CAUSE_CHARS: usize = 300;

/// What went wrong with one round trip, or with one call inside a batch.
/// Transport-neutral: every path (blocks, receipts, logs, head, header)
/// builds these directly, so all share one classification and one wording.
#[derive(Debug)]
pub(crate) enum Failure {
    /// No answer within the per-request timeout.
    Timeout(Duration),
    /// An HTTP status other than 2xx.
    Status(u16),
    /// HTTP 429 (or 503 with a Retry-After): the provider sheds load, and
    /// may say when to come back.
    Throttled {
        status: u16,
        retry_after: Option<Duration>,
    },
    /// The request could not be sent or the answer not read (connection
    /// reset, body cut short).
    Transport(String),
    /// No connection could be made: refused, or the name does not resolve.
    Unreachable(String),
    /// A JSON-RPC error object, for the whole batch or for one call.
    Rpc { code: i64, message: String },
    /// The body is not JSON at all (a proxy's error page, a truncated body).
    Undecodable(String),
    /// JSON, but not one response per call: a non-array or a success object
    /// for a batch, the wrong number of responses, unknown ids.
    BadBatch(String),
    /// The node answered, but not with what we asked for.
    Malformed(String),
    /// The answer is larger than `rpc.max_response_mib`.
    TooLarge { limit_mib: usize },
    /// The node has not got what it just served (receipts of a block it
    /// answered with): a lagging or load-balanced node; worth retrying.
    Missing(String),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Failure::Timeout(d) => format!("timed out after {d:?}"),
            Failure::Status(c) => format!("http status {c}"),
            Failure::Throttled {
                status,
                retry_after: Some(d),
            } => format!("http status {status} (retry after {d:?})"),
            Failure::Throttled { status, .. } => format!("http status {status}"),
            Failure::Transport(m) | Failure::BadBatch(m) | Failure::Unreachable(m) => m.clone(),
            Failure::Rpc { code, message } => format!("json-rpc error {code}: {message}"),
            Failure::Undecodable(m) => format!("failed to deserialize response: {m}"),
            Failure::Malformed(m) => format!("malformed response: {m}"),
            Failure::Missing(m) => m.clone(),
            Failure::TooLarge { limit_mib } => {
                format!("the answer is larger than rpc.max_response_mib ({limit_mib} MiB)")
            }
        };
        f.write_str(&truncate(text))
    }
}

fn truncate(mut s: String) -> String {
    if let Some((cut, _)) = s.char_indices().nth(MAX_CAUSE_CHARS) {
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

/// Words of JSON-RPC errors that mean "you send too much", not "this
/// request is too big".
const RATE_LIMITED: &[&str] = &[
    "rate limit",
    "too many requests",
    "request limit",
    "requests limit",
    "exceeded the quota",
    "throughput",
];

impl Failure {
    /// `Some(retry_after)` when the provider is shedding load (HTTP 429,
    /// a rate-limit error), with the wait it asked for if it named one.
    pub(crate) fn throttled(&self) -> Option<Option<Duration>> {
        match self {
            Failure::Throttled { retry_after, .. } => Some(*retry_after),
            Failure::Status(429) => Some(None),
            Failure::Rpc { code, message } => {
                let m = message.to_ascii_lowercase();
                (matches!(code, -32016 | 429) || RATE_LIMITED.iter().any(|w| m.contains(w)))
                    .then_some(None)
            }
            _ => None,
        }
    }
}

/// Longest Retry-After honoured; a provider naming a day (a spent daily
/// quota) is asked again after this, and the wait is logged.
pub(crate) const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// A `Retry-After` header: delay-seconds or an HTTP date, as RFC 9110
/// allows; `None` when absent or unreadable. Capped at [`MAX_RETRY_AFTER`].
pub(crate) fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let v = value.trim();
    let d = match v.parse::<u64>() {
        Ok(secs) => Duration::from_secs(secs),
        Err(_) => httpdate::parse_http_date(v)
            .ok()?
            .duration_since(now)
            .unwrap_or(Duration::ZERO),
    };
    Some(d.min(MAX_RETRY_AFTER))
}

/// What to do about a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Class {
    /// Transient: back off and try again, counting against the budget.
    Retry,
    /// The provider refuses batches this large: halve and resend.
    BatchTooLarge,
    /// Retrying cannot help (bad params, unknown method, auth).
    Fatal,
}

/// Classifies a failure; `in_batch` is true when it answered a batch of more
/// than one call, where a refusal usually means "too many calls at once".
pub(crate) fn classify(failure: &Failure, in_batch: bool) -> Class {
    let batchy = |c| if in_batch { Class::BatchTooLarge } else { c };
    match failure {
        Failure::Timeout(_) | Failure::Throttled { .. } => Class::Retry,
        Failure::Malformed(_) => Class::Fatal,
        Failure::Status(code) => classify_http(*code, in_batch),
        Failure::Rpc { code, message } => classify_rpc(*code, message, in_batch),
        // Connection refused/reset, body read failures, garbage from a
        // proxy: all worth another try within the budget.
        Failure::Transport(_)
        | Failure::Unreachable(_)
        | Failure::Undecodable(_)
        | Failure::Missing(_) => Class::Retry,
        // A batch answered by a non-array, by a success object, or by the
        // wrong number of responses: providers that cap batches do this.
        Failure::BadBatch(_) => batchy(Class::Retry),
        // Smaller batches may fit; one call that does not fit never will.
        Failure::TooLarge { .. } => batchy(Class::Fatal),
    }
}

/// HTTP status of a failed round trip.
pub(crate) fn classify_http(code: u16, in_batch: bool) -> Class {
    match code {
        413 if in_batch => Class::BatchTooLarge,
        408 | 425 | 429 | 500..=599 => Class::Retry,
        _ => Class::Fatal,
    }
}

/// JSON-RPC error object, for the whole batch or for one call.
pub(crate) fn classify_rpc(code: i64, message: &str, in_batch: bool) -> Class {
    let m = message.to_ascii_lowercase();
    if in_batch && m.contains("batch") {
        // "batch too large", "exceeds max batch size", "batch limit
        // exceeded", "batch requests not supported": all fixed by sending
        // fewer calls at once, down to single requests.
        return Class::BatchTooLarge;
    }
    const TRANSIENT: &[&str] = &[
        "rate limit",
        "too many requests",
        "request limit",
        "capacity",
        "timeout",
        "timed out",
        "try again",
        "temporarily",
        "unavailable",
        "overloaded",
        "busy",
    ];
    // -32005 limit exceeded (EIP-1474), -32016 rate limit, 429 echoed as a
    // code by some gateways, -32603 internal error (overloaded backends).
    if matches!(code, -32005 | -32016 | 429 | -32603) || TRANSIENT.iter().any(|t| m.contains(t)) {
        Class::Retry
    } else {
        Class::Fatal
    }
}

/// Delay before retry number `attempt` (0-based): `initial * 2^attempt`,
/// capped at `max`, then "equal jitter": a uniform draw in [base/2, base].
/// `jitter` is that draw in [0, 1]; callers pass `fastrand::f64()`.
/// Jitter keeps concurrent batches that failed together from retrying in
/// lockstep against a provider that is already shedding load.
pub(crate) fn backoff_delay(
    attempt: u32,
    initial: Duration,
    max: Duration,
    jitter: f64,
) -> Duration {
    let factor = 2u32.saturating_pow(attempt.min(31));
    let base = initial.saturating_mul(factor).min(max);
    base.mul_f64(0.5 + 0.5 * jitter.clamp(0.0, 1.0))
}

/// Next size after a provider refused `tried` (calls in a batch, blocks in
/// an `eth_getLogs` range) at once: half, never below one. Every halving of
/// the stage goes through here.
pub(crate) fn halved<N>(tried: N) -> N
where
    N: Copy + Ord + From<u8> + std::ops::Div<Output = N>,
{
    (tried / N::from(2)).max(N::from(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn backoff_doubles_and_caps() {
        let (init, max) = (100 * MS, 1000 * MS);
        assert_eq!(backoff_delay(0, init, max, 1.0), 100 * MS);
        assert_eq!(backoff_delay(1, init, max, 1.0), 200 * MS);
        assert_eq!(backoff_delay(3, init, max, 1.0), 800 * MS);
        assert_eq!(backoff_delay(4, init, max, 1.0), max);
        assert_eq!(backoff_delay(200, init, max, 1.0), max);
        assert_eq!(backoff_delay(u32::MAX, Duration::MAX, max, 1.0), max);
    }

    #[test]
    fn jitter_stays_within_half_to_full() {
        let (init, max) = (100 * MS, 1000 * MS);
        assert_eq!(backoff_delay(2, init, max, 0.0), 200 * MS);
        assert_eq!(backoff_delay(2, init, max, 0.5), 300 * MS);
        for _ in 0..1000 {
            let d = backoff_delay(2, init, max, fastrand::f64());
            assert!((200 * MS..=400 * MS).contains(&d), "{d:?}");
        }
        // Out-of-range draws are clamped, not trusted.
        assert_eq!(backoff_delay(0, init, max, 7.0), 100 * MS);
    }

    #[test]
    fn halving_stops_at_one() {
        assert_eq!(halved(50), 25);
        assert_eq!(halved(3), 1);
        assert_eq!(halved(1), 1);
        assert_eq!(halved(0usize), 1);
        assert_eq!(halved(7u64), 3);
    }

    #[test]
    fn http_statuses() {
        for code in [408, 429, 500, 502, 503, 504] {
            assert_eq!(classify_http(code, false), Class::Retry, "{code}");
        }
        for code in [400, 401, 403, 404, 405] {
            assert_eq!(classify_http(code, true), Class::Fatal, "{code}");
        }
        assert_eq!(classify_http(413, true), Class::BatchTooLarge);
        assert_eq!(classify_http(413, false), Class::Fatal);
    }

    #[test]
    fn json_rpc_errors() {
        assert_eq!(classify_rpc(-32005, "limit exceeded", false), Class::Retry);
        assert_eq!(classify_rpc(-32016, "over rate limit", false), Class::Retry);
        assert_eq!(classify_rpc(429, "x", false), Class::Retry);
        assert_eq!(
            classify_rpc(-32000, "Too Many Requests", false),
            Class::Retry
        );
        assert_eq!(
            classify_rpc(-32000, "request timed out", false),
            Class::Retry
        );
        assert_eq!(classify_rpc(-32601, "method not found", true), Class::Fatal);
        assert_eq!(classify_rpc(-32602, "invalid params", false), Class::Fatal);
        assert_eq!(
            classify_rpc(-32000, "execution reverted", false),
            Class::Fatal
        );
        assert_eq!(
            classify_rpc(-32600, "batch too large", true),
            Class::BatchTooLarge
        );
        assert_eq!(
            classify_rpc(-32000, "exceeds max batch size 10", true),
            Class::BatchTooLarge
        );
        // Outside a batch the same words cannot be fixed by splitting.
        assert_eq!(classify_rpc(-32600, "batch too large", false), Class::Fatal);
    }

    #[test]
    fn transport_failures() {
        let t = |m: &str| Failure::Transport(m.into());
        assert_eq!(
            classify(&t("failed to send request: connection refused"), false),
            Class::Retry
        );
        assert_eq!(
            classify(
                &Failure::Transport("failed to read response bytes".into()),
                true
            ),
            Class::Retry
        );
        assert_eq!(classify(&Failure::Timeout(MS), true), Class::Retry);
        assert_eq!(
            classify(&Failure::Malformed("x".into()), false),
            Class::Fatal
        );
        let non_array = Failure::BadBatch("undecodable response: invalid type: string".into());
        assert_eq!(classify(&non_array, true), Class::BatchTooLarge);
        assert_eq!(classify(&non_array, false), Class::Retry);
        let short = Failure::BadBatch("unexpected number of responses".into());
        assert_eq!(classify(&short, true), Class::BatchTooLarge);
        // A proxy's HTML error page is not a batch refusal.
        let html = Failure::Undecodable("expected value at line 1 column 1: <html>".into());
        assert_eq!(classify(&html, true), Class::Retry);
        assert_eq!(classify(&Failure::Status(429), true), Class::Retry);
        assert_eq!(classify(&Failure::Status(413), true), Class::BatchTooLarge);
        assert_eq!(classify(&Failure::Status(401), true), Class::Fatal);
        let rpc = |code: i64, message: &str| Failure::Rpc {
            code,
            message: message.into(),
        };
        assert_eq!(classify(&rpc(-32602, "invalid params"), true), Class::Fatal);
        assert_eq!(
            classify(&rpc(-32005, "limit exceeded"), false),
            Class::Retry
        );
        assert_eq!(
            classify(&rpc(-32600, "batch too large"), true),
            Class::BatchTooLarge
        );
        assert_eq!(
            rpc(-32602, "invalid params").to_string(),
            "json-rpc error -32602: invalid params"
        );
        let raw = Failure::Rpc {
            code: -32602,
            message: "invalid params".into(),
        };
        assert_eq!(raw.to_string(), "json-rpc error -32602: invalid params");
        assert_eq!(classify(&raw, false), Class::Fatal);
    }

    #[test]
    fn rate_limits_are_told_from_other_failures() {
        let now = std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000);
        assert_eq!(retry_after("3", now), Some(Duration::from_secs(3)));
        assert_eq!(retry_after(" 0 ", now), Some(Duration::ZERO));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(7));
        assert_eq!(retry_after(&date, now), Some(Duration::from_secs(7)));
        assert_eq!(retry_after("soon", now), None);
        assert_eq!(retry_after("999999999", now), Some(MAX_RETRY_AFTER));
        let t = Failure::Throttled {
            status: 429,
            retry_after: Some(Duration::from_secs(2)),
        };
        assert_eq!(t.throttled(), Some(Some(Duration::from_secs(2))));
        assert_eq!(t.to_string(), "http status 429 (retry after 2s)");
        assert_eq!(classify(&t, true), Class::Retry);
        assert_eq!(Failure::Status(429).throttled(), Some(None));
        let rpc = |code, m: &str| Failure::Rpc {
            code,
            message: m.into(),
        };
        assert_eq!(
            rpc(-32005, "daily request limit reached").throttled(),
            Some(None)
        );
        assert_eq!(rpc(-32016, "x").throttled(), Some(None));
        assert_eq!(
            rpc(-32005, "query returned more than 10000 results").throttled(),
            None
        );
        assert_eq!(Failure::Status(502).throttled(), None);
        assert_eq!(Failure::Timeout(MS).throttled(), None);
    }

    #[test]
    fn causes_are_lowercase_and_bounded() {
        let long = Failure::Malformed("x".repeat(10_000));
        let text = long.to_string();
        assert!(text.len() < MAX_CAUSE_CHARS + 40, "{}", text.len());
        assert!(text.ends_with("..."));
        assert_eq!(Failure::Status(503).to_string(), "http status 503");
    }
}
