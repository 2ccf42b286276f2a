//! The JSON-RPC client stage: fetches heads, full blocks and headers from an
//! EVM node over HTTP (and new-head notifications over WebSocket).
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
//! that cap them. It hands out each block as a [`RawBlock`]: the header
//! fields and the byte ranges of its transactions in the response text,
//! found in the one pass that parses the response (with `decode`'s pure
//! block shape), the number checked against the request. It does NOT
//! decode transactions (that is `decode`'s job), touch SQL, or decide what
//! to index. Endpoints appear in logs and errors only through
//! [`redact_url`](crate::redact::redact_url), never with credentials.
//!
//! Full blocks, the hot path, are fetched by `batch` with plain reqwest
//! POSTs instead of web3's transport: web3 parsed each answer into
//! `serde_json::Value` trees twice, which with building transactions from
//! those trees cost about a third of the indexer's CPU in a backfill (see
//! `batch`). `head`, `header` and `subscribe_heads` are small and rare and
//! still go through web3, sharing the same reqwest client and its
//! connection pool. The client is the pipeline's
//! [`Source`](crate::source::Source) (see `source`).

mod batch;
mod log_stream;
mod logs;
mod receipts;
mod retry;
mod source;
mod types;
mod wire;

use std::fmt;
use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use crate::config::{LogsMode, LogsSettings, RpcSettings};
use crate::decode::{BlockHeader, RawBlock, RawReceipts};
use crate::metrics::RpcStats;
use crate::redact::Scrubber;
use futures::{Stream, StreamExt, TryStreamExt, future::ready, stream};
use serde_json::Value;
use tracing::{debug, info, warn};
use web3::Transport;
use web3::transports::{Http, WebSocket};

use retry::{Class, Failure, backoff_delay, classify, halved};
pub use types::{RpcError, Subject};
use wire::{block_params, check_block, chunks, malformed, parse_header, quantity};

/// Log target of this module.
const TARGET: &str = "indexer::rpc";

/// Calls per `eth_getTransactionReceipt` batch at first: a block's worth
/// on most chains, halved for providers that cap batches.
const TX_RECEIPT_BATCH: usize = 200;

/// User-Agent of every HTTP request.
const USER_AGENT: &str = concat!("sender-indexer/", env!("CARGO_PKG_VERSION"));

/// JSON-RPC client over HTTP. Cheap to share behind an `Arc`.
pub struct RpcClient {
    cfg: RpcSettings,
    /// For the block hot path (`batch`); the same client sits inside `http`.
    client: reqwest::Client,
    /// The endpoint with its credentials (reqwest turns userinfo into basic
    /// auth); never logged.
    url: url::Url,
    http: Http,
    scrub: Scrubber,
    /// Current batch size; only ever shrinks, shared by all in-flight batches
    /// so one refusal teaches every task.
    batch_size: AtomicUsize,
    shrink_logged: AtomicBool,
    stats: Arc<RpcStats>,
    /// Fetch each block's receipts with it.
    receipts: bool,
    /// The node answered that it has no `eth_getBlockReceipts`: receipts
    /// come from `eth_getTransactionReceipt` instead (found out once).
    no_block_receipts: AtomicBool,
    /// `getLogs` mode: each block's logs from `eth_getLogs` (`log_stream`).
    get_logs: Option<GetLogs>,
    /// Calls per `eth_getTransactionReceipt` batch; only ever shrinks.
    tx_receipt_batch: AtomicUsize,
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

impl RpcClient {
    pub fn new(cfg: RpcSettings) -> Result<Self, RpcError> {
        let scrub = Scrubber::new(cfg.url.as_str());
        let bad = |reason: String| RpcError::Config {
            endpoint: scrub.endpoint().to_owned(),
            reason,
        };
        let url = cfg.url.clone();
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!(
                "unsupported scheme {} (want http or https)",
                url.scheme()
            )));
        }
        let client = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .build()
            .map_err(|e| bad(scrub.scrub(&format!("failed to build client: {e}"))))?;
        let http = Http::with_client(client.clone(), url.clone());
        Ok(Self {
            batch_size: AtomicUsize::new(cfg.batch_size.get()),
            cfg,
            client,
            url,
            http,
            scrub,
            shrink_logged: AtomicBool::new(false),
            stats: Arc::default(),
            receipts: false,
            no_block_receipts: AtomicBool::new(false),
            get_logs: None,
            tx_receipt_batch: AtomicUsize::new(TX_RECEIPT_BATCH),
        })
    }

    /// Also fetch what `logs.mode` asks for with every block: its receipts
    /// (see `receipts`), or its logs from `eth_getLogs` (see `log_stream`).
    pub fn with_logs(mut self, logs: &LogsSettings) -> Self {
        self.receipts = logs.mode == LogsMode::Receipts;
        self.get_logs = (logs.mode == LogsMode::GetLogs).then(|| GetLogs {
            filters: logs.clone(),
            span: logs::Span::new(logs.get_logs_range.get()),
            cut_logged: AtomicBool::new(false),
        });
        self
    }

    /// Whether blocks come with their `eth_getLogs` logs.
    pub(crate) fn fetches_logs(&self) -> bool {
        self.get_logs.is_some()
    }

    /// The `newHeads` endpoint of the settings, if any.
    pub fn ws_url(&self) -> Option<&url::Url> {
        self.cfg.ws_url.as_ref()
    }

    /// The endpoint as it may be logged.
    pub fn endpoint(&self) -> &str {
        self.scrub.endpoint()
    }

    pub fn stats(&self) -> Arc<RpcStats> {
        Arc::clone(&self.stats)
    }

    /// Batch size in use now (smaller than configured if the provider capped it).
    pub fn effective_batch_size(&self) -> usize {
        self.batch_size.load(Relaxed)
    }

    /// Latest block number (`eth_blockNumber`).
    pub async fn head(&self) -> Result<u64, RpcError> {
        let v = self.call(Subject::Head, "eth_blockNumber", vec![]).await?;
        quantity(&v).ok_or_else(|| self.failed(Subject::Head, &malformed("number", &v)))
    }

    /// The chain id (`eth_chainId`).
    pub async fn chain_id(&self) -> Result<u64, RpcError> {
        let v = self.call(Subject::ChainId, "eth_chainId", vec![]).await?;
        quantity(&v).ok_or_else(|| self.failed(Subject::ChainId, &malformed("chain id", &v)))
    }

    /// Header of block `n` (`eth_getBlockByNumber(n, false)`); `None` if the
    /// node has no such block. Does not wait for it.
    pub async fn header(&self, n: u64) -> Result<Option<BlockHeader>, RpcError> {
        let subject = Subject::Block(n);
        let v = self
            .call(subject, "eth_getBlockByNumber", block_params(n, false))
            .await?;
        if v.is_null() {
            return Ok(None);
        }
        parse_header(&v)
            .map(Some)
            .map_err(|f| self.failed(subject, &f))
    }

    /// Full blocks with transactions, split into header fields and
    /// transaction ranges of their JSON text ([`RawBlock`]), in block order,
    /// each checked to be the block asked for. Waits for blocks the node
    /// has not produced yet.
    pub async fn blocks(&self, range: RangeInclusive<u64>) -> Result<Vec<RawBlock>, RpcError> {
        stream::iter(chunks(range, self.cfg.batch_size.get()))
            .map(|r| self.fetch_range(r))
            .buffered(self.cfg.max_in_flight.get())
            .try_concat()
            .await
    }

    /// Like [`blocks`](Self::blocks), but streamed: up to `max_in_flight`
    /// batches are fetched concurrently and blocks come out strictly in
    /// order. Nothing is fetched beyond what the consumer pulls plus the
    /// in-flight window, so memory stays bounded. Ends after the first error.
    pub fn block_stream(
        self: Arc<Self>,
        range: RangeInclusive<u64>,
    ) -> impl Stream<Item = Result<RawBlock, RpcError>> + Send + 'static {
        let depth = self.cfg.max_in_flight.get();
        stream::iter(chunks(range, self.cfg.batch_size.get()))
            .map(move |r| {
                let client = Arc::clone(&self);
                async move { client.fetch_range(r).await }
            })
            // `buffered`, not `buffer_unordered`: completion order varies,
            // delivery order must not.
            .buffered(depth)
            .flat_map(|res| match res {
                Ok(blocks) => stream::iter(blocks).map(Ok).left_stream(),
                Err(e) => stream::once(ready(Err(e))).right_stream(),
            })
            .scan(false, |failed, item| {
                if *failed {
                    return ready(None);
                }
                *failed = item.is_err();
                ready(Some(item))
            })
    }

    /// Block `n` alone, with its receipts or (`getLogs` mode) its logs by
    /// block hash; `None` when the node has not got it. Does not wait.
    pub async fn block_again(&self, n: u64) -> Result<Option<RawBlock>, RpcError> {
        let mut attempts = 0;
        let mut block = loop {
            let f = match self.fetch_chunk(n, 1).await {
                Ok(mut r) => match r.pop().map(|o| o.and_then(|v| check_block(n, v))) {
                    Some(Ok(None)) => return Ok(None),
                    Some(Ok(Some(b))) => break b,
                    Some(Err(f)) => f,
                    None => Failure::BadBatch("invalid response: no answer".into()),
                },
                Err(f) => f,
            };
            self.retry_or_fail(Subject::Block(n), f, false, &mut attempts)
                .await?;
        };
        if self.receipts {
            self.attach_receipts(std::slice::from_mut(&mut block))
                .await?;
        }
        if self.get_logs.is_some() {
            block.logs = Some(self.logs_by_hash(&block.header).await?);
        }
        Ok(Some(block))
    }

    /// Block numbers of new heads, from `eth_subscribe newHeads` on
    /// `ws_url`. The stream ends when the connection drops; callers fall back
    /// to polling [`head`](Self::head) then, or if this errors.
    pub async fn subscribe_heads(
        &self,
        ws_url: &url::Url,
    ) -> Result<impl Stream<Item = u64> + Send + Unpin + 'static, RpcError> {
        let scrub = Scrubber::new(ws_url.as_str());
        let fail = |cause: String| RpcError::Failed {
            endpoint: scrub.endpoint().to_owned(),
            subject: Subject::Subscribe,
            cause: scrub.scrub(&cause),
        };
        let deadline = self.cfg.request_timeout;
        let timed_out = || fail(Failure::Timeout(deadline).to_string());
        let ws = tokio::time::timeout(deadline, WebSocket::new(ws_url.as_str()))
            .await
            .map_err(|_| timed_out())?
            .map_err(|e| fail(Failure::from(e).to_string()))?;
        let sub = tokio::time::timeout(
            deadline,
            web3::Web3::new(ws).eth_subscribe().subscribe_new_heads(),
        )
        .await
        .map_err(|_| timed_out())?
        .map_err(|e| fail(Failure::from(e).to_string()))?;
        let endpoint = scrub.endpoint().to_owned();
        info!(target: TARGET, endpoint, "subscribed to new heads");
        Ok(sub.filter_map(move |item| {
            ready(match item {
                Ok(h) => h.number.map(|n| n.as_u64()),
                Err(e) => {
                    debug!(target: TARGET, endpoint, error = %Failure::from(e), "undecodable head");
                    None
                }
            })
        }))
    }

    /// One call, retried per policy.
    async fn call(
        &self,
        subject: Subject,
        method: &str,
        params: Vec<Value>,
    ) -> Result<Value, RpcError> {
        let mut attempts = 0;
        loop {
            let (id, call) = self.http.prepare(method, params.clone());
            match self.round_trip(self.http.send(id, call)).await {
                Ok(v) => return Ok(v),
                Err(f) => self.retry_or_fail(subject, f, false, &mut attempts).await?,
            }
        }
    }

    /// Blocks `range` in order, in as many sub-batches as the current batch
    /// size needs; retries failures and waits for `null` (future) blocks.
    async fn fetch_range(&self, range: RangeInclusive<u64>) -> Result<Vec<RawBlock>, RpcError> {
        let first = *range.start();
        let len = usize::try_from(range.end() - first + 1).expect("range bounded by batch size");
        let mut slots: Vec<Option<RawBlock>> = (0..len).map(|_| None).collect();
        let mut next = 0; // first slot still missing
        let mut attempts = 0; // consecutive failures without progress
        let mut null_polls = 0;
        while next < len {
            let size = self.effective_batch_size().min(len - next);
            let lo = first + next as u64;
            let in_batch = size > 1;
            let results = match self.fetch_chunk(lo, size).await {
                Ok(results) => results,
                Err(f) if in_batch && classify(&f, true) == Class::BatchTooLarge => {
                    self.shrink(size, &f);
                    continue;
                }
                Err(f) => {
                    let subject = Subject::range(lo, lo + size as u64 - 1);
                    self.retry_or_fail(subject, f, in_batch, &mut attempts)
                        .await?;
                    continue;
                }
            };
            let (mut retry, mut too_large) = (None, None);
            for (i, result) in results.into_iter().enumerate() {
                let n = lo + i as u64;
                match result.and_then(|v| check_block(n, v)) {
                    Ok(None) => {} // not produced yet
                    Ok(Some(v)) => slots[next + i] = Some(v),
                    Err(f) => match classify(&f, in_batch) {
                        Class::Fatal => return Err(self.failed(Subject::Block(n), &f)),
                        Class::BatchTooLarge => too_large = Some(f),
                        Class::Retry => {
                            self.stats.errors.fetch_add(1, Relaxed);
                            retry.get_or_insert((n, f));
                        }
                    },
                }
            }
            let before = next;
            while next < len && slots[next].is_some() {
                next += 1;
            }
            if next > before {
                attempts = 0;
                null_polls = 0;
            }
            if let Some(f) = too_large {
                self.shrink(size, &f);
            } else if let Some((n, f)) = retry {
                self.retry_or_fail(Subject::Block(n), f, false, &mut attempts)
                    .await?;
            } else if next < len && next - before < size {
                // A gap inside what we just fetched: the node answered null.
                let n = first + next as u64;
                let delay = backoff_delay(
                    null_polls,
                    self.cfg.backoff_initial,
                    self.cfg.backoff_max,
                    fastrand::f64(),
                );
                let level_info = null_polls == 0;
                null_polls = null_polls.saturating_add(1);
                self.stats.null_waits.fetch_add(1, Relaxed);
                if level_info {
                    info!(target: TARGET, endpoint = self.endpoint(), n, "waiting for block");
                } else {
                    debug!(target: TARGET, endpoint = self.endpoint(), n, ?delay, "block still null");
                }
                tokio::time::sleep(delay).await;
            }
        }
        let mut blocks: Vec<RawBlock> = slots.into_iter().flatten().collect();
        if self.receipts {
            self.attach_receipts(&mut blocks).await?;
        }
        Ok(blocks)
    }

    /// Fetches the receipts of `blocks` by their hashes and attaches them,
    /// in batches no larger than the provider takes.
    async fn attach_receipts(&self, blocks: &mut [RawBlock]) -> Result<(), RpcError> {
        let mut done = 0;
        let mut attempts = 0;
        while done < blocks.len() {
            let by_tx = self.no_block_receipts.load(Relaxed);
            let size = if by_tx {
                1
            } else {
                self.effective_batch_size().min(blocks.len() - done)
            };
            let part = &mut blocks[done..done + size];
            let subject = Subject::range(part[0].header.number, part[part.len() - 1].header.number);
            let fetched = if by_tx {
                self.tx_receipts(&part[0]).await.map(|r| vec![r])
            } else {
                self.block_receipts(part).await
            };
            match fetched {
                Ok(all) => {
                    for (b, r) in part.iter_mut().zip(all) {
                        b.receipts = Some(r);
                    }
                    done += size;
                    attempts = 0;
                }
                Err(f) if !by_tx && receipts::method_missing(&f) => {
                    if !self.no_block_receipts.swap(true, Relaxed) {
                        let error = self.scrub.scrub(&f.to_string());
                        info!(target: TARGET, endpoint = self.endpoint(), error, "node has no eth_getBlockReceipts; fetching receipts with eth_getTransactionReceipt");
                    }
                }
                Err(f) if size > 1 && classify(&f, true) == Class::BatchTooLarge => {
                    self.shrink(size, &f);
                }
                Err(f) => self.retry_or_fail(subject, f, false, &mut attempts).await?,
            }
        }
        Ok(())
    }

    /// `eth_getBlockReceipts` for every block, in one batch.
    async fn block_receipts(&self, blocks: &[RawBlock]) -> Result<Vec<RawReceipts>, Failure> {
        let hashes: Vec<_> = blocks.iter().map(|b| b.header.hash).collect();
        let body = receipts::request_body("eth_getBlockReceipts", &hashes);
        let answer = self
            .round_trip(batch::post(&self.client, &self.url, body))
            .await?;
        receipts::parse_block_receipts(answer, blocks.len())
    }

    /// `eth_getTransactionReceipt` for every transaction of `b`, in batches
    /// of at most `tx_receipt_batch` calls (halved when the provider caps
    /// batches), read into one list.
    async fn tx_receipts(&self, b: &RawBlock) -> Result<RawReceipts, Failure> {
        let hashes = (0..b.txs.len())
            .map(|i| receipts::tx_hash(b.tx_json(i).unwrap_or_default()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut parts = Vec::new();
        let mut done = 0;
        while done < hashes.len() {
            let size = self.tx_receipt_batch.load(Relaxed).min(hashes.len() - done);
            let body =
                receipts::request_body("eth_getTransactionReceipt", &hashes[done..done + size]);
            let answer = self
                .round_trip(batch::post(&self.client, &self.url, body))
                .await;
            match answer.and_then(|a| receipts::parse_tx_receipts(a, size)) {
                Ok(part) => {
                    parts.push(part);
                    done += size;
                }
                Err(f) if size > 1 && classify(&f, true) == Class::BatchTooLarge => {
                    let to = halved(size);
                    if self.tx_receipt_batch.fetch_min(to, Relaxed) > to {
                        let error = self.scrub.scrub(&f.to_string());
                        warn!(target: TARGET, endpoint = self.endpoint(), from = size, to, error, "provider caps batch size; shrinking receipt batches");
                    }
                }
                Err(f) => return Err(f),
            }
        }
        Ok(receipts::joined(parts))
    }

    /// One round trip for `size` blocks from `first` (see
    /// [`batch::request_body`]). Inner `Result`s are per-call outcomes.
    async fn fetch_chunk(
        &self,
        first: u64,
        size: usize,
    ) -> Result<Vec<batch::CallOutcome>, Failure> {
        let body = batch::request_body(first, size);
        let answer = self
            .round_trip(batch::post(&self.client, &self.url, body))
            .await?;
        batch::parse_answer(answer, first, size).inspect_err(|_| {
            self.stats.errors.fetch_add(1, Relaxed);
        })
    }

    /// Sends with the per-request timeout and counts the outcome.
    async fn round_trip<T, E>(&self, fut: impl Future<Output = Result<T, E>>) -> Result<T, Failure>
    where
        Failure: From<E>,
    {
        self.stats.requests.fetch_add(1, Relaxed);
        let res = match tokio::time::timeout(self.cfg.request_timeout, fut).await {
            Ok(Ok(v)) => return Ok(v),
            Ok(Err(e)) => Failure::from(e),
            Err(_) => Failure::Timeout(self.cfg.request_timeout),
        };
        self.stats.errors.fetch_add(1, Relaxed);
        Err(res)
    }

    /// Fails at once on a fatal error or an exhausted budget, else sleeps
    /// the backoff for this attempt and returns so the caller retries.
    async fn retry_or_fail(
        &self,
        subject: Subject,
        failure: Failure,
        in_batch: bool,
        attempts: &mut u32,
    ) -> Result<(), RpcError> {
        if classify(&failure, in_batch) == Class::Fatal {
            return Err(self.failed(subject, &failure));
        }
        if *attempts >= self.cfg.max_retries {
            return Err(RpcError::RetriesExhausted {
                endpoint: self.endpoint().to_owned(),
                subject,
                retries: *attempts,
                last: self.scrub.scrub(&failure.to_string()),
            });
        }
        let delay = backoff_delay(
            *attempts,
            self.cfg.backoff_initial,
            self.cfg.backoff_max,
            fastrand::f64(),
        );
        *attempts += 1;
        self.stats.retries.fetch_add(1, Relaxed);
        let error = self.scrub.scrub(&failure.to_string());
        warn!(target: TARGET, endpoint = self.endpoint(), %subject, attempt = *attempts, ?delay, error, "retrying");
        tokio::time::sleep(delay).await;
        Ok(())
    }

    /// Halves the shared batch size after the provider refused `tried` calls.
    fn shrink(&self, tried: usize, failure: &Failure) {
        let to = halved(tried);
        let from = self.batch_size.fetch_min(to, Relaxed);
        if to >= from {
            return; // another batch already shrank it at least as far
        }
        let error = self.scrub.scrub(&failure.to_string());
        if !self.shrink_logged.swap(true, Relaxed) {
            warn!(target: TARGET, endpoint = self.endpoint(), from, to, error, "provider caps batch size; shrinking batches");
        } else {
            debug!(target: TARGET, endpoint = self.endpoint(), from, to, "shrinking batches again");
        }
    }

    fn failed(&self, subject: Subject, failure: &Failure) -> RpcError {
        RpcError::Failed {
            endpoint: self.endpoint().to_owned(),
            subject,
            cause: self.scrub.scrub(&failure.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn errors_name_endpoint_and_block_without_secrets() {
        let with_url = |url: &str| {
            let mut cfg = crate::config::Settings::defaults().rpc;
            cfg.url = url.parse().unwrap();
            RpcClient::new(cfg)
        };
        let client = with_url("http://u:pw12@127.0.0.1:1/?key=zzzz").unwrap();
        assert_eq!(client.endpoint(), "http://127.0.0.1:1/");
        let e = client.failed(
            Subject::Block(123),
            &Failure::Timeout(Duration::from_secs(2)),
        );
        assert_eq!(
            e.to_string(),
            "rpc http://127.0.0.1:1/: block 123: timed out after 2s"
        );
        assert_eq!(e.block(), Some(123));
        assert!(!format!("{client:?}").contains("pw12"));
        let bad = with_url("ws://u:pw12@h:1").unwrap_err();
        assert_eq!(
            bad.to_string(),
            "rpc ws://h:1/: invalid configuration: unsupported scheme ws (want http or https)"
        );
    }
}
