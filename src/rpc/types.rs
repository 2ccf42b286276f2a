//! Plain data of the rpc stage: settings, header info, metric counters and
//! the error type. No I/O and no policy here; the client in `rpc/mod.rs`
//! fills and reads them.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::redact_url;

/// Connection and retry settings; filled in by `config`.
#[derive(Clone)]
pub struct RpcConfig {
    /// `http://` or `https://` endpoint; may carry credentials.
    pub url: String,
    /// Blocks per JSON-RPC batch. Full blocks run to megabytes, so this also
    /// bounds one response's size; shrunk at run time if the provider caps it.
    pub batch_size: usize,
    /// Batches in flight at once; with `batch_size`, bounds buffered blocks.
    pub max_in_flight: usize,
    /// Deadline for one HTTP round trip (a whole batch).
    pub request_timeout: Duration,
    /// Consecutive failed tries allowed per call or batch before giving up.
    pub max_retries: u32,
    pub backoff_initial: Duration,
    pub backoff_max: Duration,
}

impl RpcConfig {
    /// Defaults suited to a public provider: 50-block batches, 4 in flight.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            batch_size: 50,
            max_in_flight: 4,
            request_timeout: Duration::from_secs(30),
            max_retries: 8,
            backoff_initial: Duration::from_millis(250),
            backoff_max: Duration::from_secs(30),
        }
    }
}

// Hand-written so that `{:?}` of a config never prints credentials.
impl fmt::Debug for RpcConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RpcConfig")
            .field("url", &redact_url(&self.url))
            .field("batch_size", &self.batch_size)
            .field("max_in_flight", &self.max_in_flight)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_initial", &self.backoff_initial)
            .field("backoff_max", &self.backoff_max)
            .finish()
    }
}

/// The parts of a header the reorg walk-back compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeaderInfo {
    pub number: u64,
    pub hash: [u8; 32],
    pub parent_hash: [u8; 32],
}

/// Counters for metrics; shared with the exporter through [`RpcClient::stats`](super::RpcClient::stats).
#[derive(Debug, Default)]
pub struct RpcStats {
    pub(crate) requests: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) null_waits: AtomicU64,
}

impl RpcStats {
    /// HTTP round trips sent (a batch counts once).
    pub fn requests(&self) -> u64 {
        self.requests.load(Relaxed)
    }
    /// Failed round trips plus failed calls inside batches.
    pub fn errors(&self) -> u64 {
        self.errors.load(Relaxed)
    }
    /// Backoff sleeps taken after retryable errors.
    pub fn retries(&self) -> u64 {
        self.retries.load(Relaxed)
    }
    /// Polls for blocks the node answered with `null` (not produced yet).
    pub fn null_waits(&self) -> u64 {
        self.null_waits.load(Relaxed)
    }
}

/// What a failed operation was about; shown in [`RpcError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Head,
    Block(u64),
    Blocks(u64, u64),
    Subscribe,
}

impl Subject {
    pub(crate) fn range(first: u64, last: u64) -> Self {
        if first == last {
            Subject::Block(first)
        } else {
            Subject::Blocks(first, last)
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Head => f.write_str("head"),
            Subject::Block(n) => write!(f, "block {n}"),
            Subject::Blocks(a, b) => write!(f, "blocks {a}..={b}"),
            Subject::Subscribe => f.write_str("subscribe newHeads"),
        }
    }
}

/// Errors of the rpc stage. `endpoint` is always redacted.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    #[error("rpc {endpoint}: invalid configuration: {reason}")]
    Config { endpoint: String, reason: String },
    #[error("rpc {endpoint}: {subject}: gave up after {retries} retries (last error: {last})")]
    RetriesExhausted {
        endpoint: String,
        subject: Subject,
        retries: u32,
        last: String,
    },
    #[error("rpc {endpoint}: {subject}: {cause}")]
    Failed {
        endpoint: String,
        subject: Subject,
        cause: String,
    },
}

impl RpcError {
    /// The first block concerned, if the error is about blocks.
    pub fn block(&self) -> Option<u64> {
        match self {
            RpcError::RetriesExhausted { subject, .. } | RpcError::Failed { subject, .. } => {
                match subject {
                    Subject::Block(n) | Subject::Blocks(n, _) => Some(*n),
                    _ => None,
                }
            }
            RpcError::Config { .. } => None,
        }
    }
}
