//! The JSON-RPC client stage: fetches heads, full blocks and headers from an
//! EVM node over HTTP (and new-head notifications over WebSocket, `ws`).
//!
//! With `logs.mode`, each block also comes with its receipts
//! (`receipts`: `eth_getBlockReceipts` by block hash, or batched
//! `eth_getTransactionReceipt`) or with its logs (`log_stream`, `logs`:
//! `eth_getLogs` over adaptive ranges, checked against the block's hash and
//! bloom).
//!
//! It owns the wire: batching, bounded concurrency, in-order delivery,
//! per-request timeouts, retries with capped doubling backoff, waiting for
//! blocks the node has not produced yet, and shrinking batches for providers
//! that cap them. It hands out each block as a
//! [`RawBlock`](crate::decode::RawBlock): the header fields and the byte
//! ranges of its transactions in the response text, found in the one pass
//! that parses the response (with `decode`'s pure block shape), the
//! number checked against the request. It does NOT decode transactions
//! (that is `decode`'s job), touch SQL, or decide what to index.
//! Endpoints appear in logs and errors only through
//! [`redact_url`](crate::redact::redact_url), never with credentials.
//!
//! Every call is a plain reqwest POST (`batch`): web3's transport parsed
//! each answer into `serde_json::Value` trees twice, which with building
//! transactions from those trees cost about a third of the indexer's CPU
//! in a backfill. TLS is rustls everywhere, for `https://` and `wss://`
//! alike, with the public web roots plus `rpc.tls_ca_file`. The client is
//! the pipeline's [`Source`](crate::source::Source) (see `source`).
//!
//! Where things are: this file has the client's struct and constants;
//! `client` its methods; `driver` the one retry loop every call that may
//! be tried again runs in; `retry` the pure policy that loop applies;
//! `pool` which endpoint a request goes to, and when; `batch`, `wire`,
//! `receipts` and `logs` the requests and answers on the wire;
//! `log_stream` the `eth_getLogs` side of `logs.mode = "getLogs"`; `ws`
//! new heads over WebSocket; `types` the error type.

mod batch;
mod client;
mod driver;
mod log_stream;
mod logs;
mod pool;
mod receipts;
mod retry;
mod source;
mod types;
mod wire;
mod ws;

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

use crate::config::{LogsSettings, RpcSettings};
use crate::metrics::RpcStats;

use pool::Pool;
pub use types::{RpcError, Subject};

/// Log target of this module.
const TARGET: &str = "indexer::rpc";

/// Calls per `eth_getTransactionReceipt` batch at first: a block's worth
/// on most chains, halved for providers that cap batches.
const TX_RECEIPT_BATCH: usize = 200;

/// User-Agent of every HTTP request.
const USER_AGENT: &str = concat!("sender-indexer/", env!("CARGO_PKG_VERSION"));

/// Blocks whose serving endpoints (of the block, of its receipts) are
/// remembered, so that fetching one again asks others (see
/// [`RpcClient::block_again`]).
const SERVED_SLOTS: usize = 4096;

/// JSON-RPC client over HTTP, over one or several endpoints of one chain
/// (see `pool`). Cheap to share behind an `Arc`.
pub struct RpcClient {
    cfg: RpcSettings,
    /// One connection pool for every endpoint.
    client: reqwest::Client,
    pool: Pool,
    /// The redacted endpoints, comma-separated, for errors about them all.
    names: String,
    stats: Arc<RpcStats>,
    /// Fetch each block's receipts with it.
    receipts: bool,
    /// `getLogs` mode: each block's logs from `eth_getLogs` (`log_stream`).
    get_logs: Option<GetLogs>,
    /// `(block, endpoint)` of recently served blocks, by block % slots.
    served: Mutex<Vec<(u64, usize)>>,
    /// The same for their receipts.
    served_receipts: Mutex<Vec<(u64, usize)>>,
    /// The newHeads socket's settings, when `rpc.ws_url` is set.
    ws: Option<ws::WsSettings>,
    /// Some endpoint has answered something (even an error): from then on
    /// a refused connection is an outage to wait out, not a wrong URL.
    answered: AtomicBool,
}

/// What `getLogs` mode keeps between calls.
struct GetLogs {
    filters: LogsSettings,
    /// The adaptive block range of one call.
    span: logs::Span,
    cut_logged: AtomicBool,
}

impl fmt::Debug for RpcClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RpcClient")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}
