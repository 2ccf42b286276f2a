//! Plain data of the rpc stage: what a failure was about, and the error
//! type. No I/O and no policy here; the client (`rpc/client.rs`) fills them.
//! (Its settings are `crate::config::RpcSettings`, its counters
//! `crate::metrics::RpcStats`.)

use std::fmt;

/// What a failed operation was about; shown in [`RpcError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subject {
    Head,
    ChainId,
    Block(u64),
    Blocks(u64, u64),
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
            Subject::ChainId => f.write_str("chain id"),
            Subject::Block(n) => write!(f, "block {n}"),
            Subject::Blocks(a, b) => write!(f, "blocks {a}..={b}"),
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
    /// The very first requests found nothing listening (refused, or a
    /// name that does not resolve): a wrong URL, not a flaky provider.
    #[error(
        "rpc {endpoints}: {subject}: cannot reach the endpoint ({cause})\n\nhint: nothing has answered there yet. Point sender-indexer at your node's JSON-RPC URL with RPC_URL or --rpc-url (several may be given); or, to see it work first, run the quickstart scripts/demo.sh from the sender-indexer repository (it starts a local anvil and needs nothing else)"
    )]
    Unreachable {
        endpoints: String,
        subject: Subject,
        cause: String,
    },
}

impl RpcError {
    /// The first block concerned, if the error is about blocks.
    pub fn block(&self) -> Option<u64> {
        match self {
            RpcError::RetriesExhausted { subject, .. }
            | RpcError::Failed { subject, .. }
            | RpcError::Unreachable { subject, .. } => match subject {
                Subject::Block(n) | Subject::Blocks(n, _) => Some(*n),
                _ => None,
            },
            RpcError::Config { .. } => None,
        }
    }
}
