//! The client's methods: construction, heads and headers, blocks by
//! range (streamed in order) and again one by one, receipts, and the
//! round trip every call makes. The one [`RpcClient`] impl of the stage
//! (besides `source`, which adapts it to the pipeline, and `log_stream`,
//! the `eth_getLogs` side); the struct, its constants and the module docs
//! are in `rpc/mod.rs`. Every call that may be tried again is an
//! [`Attempt`] run by `driver`'s one loop: this file decides nothing about
//! retries, budgets or backoff. It does not decode transactions or touch
//! SQL.

use std::ops::RangeInclusive;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use futures::{Stream, StreamExt, TryStreamExt, future::ready, stream};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde_json::Value;
use tracing::{debug, info, warn};

use super::driver::{Attempt, Step, Try, retrying};
use super::pool::{Lease, Pool, PoolSettings, Want};
use super::retry::{Class, Failure, classify, halved};
use super::wire::{block_params, check_block, chunks, malformed, parse_header, quantity};
use super::{
    GetLogs, RpcClient, RpcError, SERVED_SLOTS, Subject, TARGET, TX_RECEIPT_BATCH, USER_AGENT,
    batch, logs, receipts, ws,
};
use crate::config::{LogsMode, LogsSettings, RpcSettings};
use crate::decode::{BlockHeader, RawBlock, RawReceipts};
use crate::metrics::RpcStats;
use crate::redact::Scrubber;

impl RpcClient {
    pub fn new(cfg: RpcSettings) -> Result<Self, RpcError> {
        let names = cfg
            .urls
            .iter()
            .map(|u| Scrubber::new(u.as_str()).endpoint().to_owned())
            .collect::<Vec<_>>()
            .join(", ");
        for url in &cfg.urls {
            if !matches!(url.scheme(), "http" | "https") {
                return Err(RpcError::Config {
                    endpoint: Scrubber::new(url.as_str()).endpoint().to_owned(),
                    reason: format!("unsupported scheme {} (want http or https)", url.scheme()),
                });
            }
        }
        let bad = |reason: String| RpcError::Config {
            endpoint: names.clone(),
            reason,
        };
        let extra_roots = match &cfg.tls_ca_file {
            Some(path) => read_ca_file(path).map_err(bad)?,
            None => Vec::new(),
        };
        let mut builder = reqwest::Client::builder()
            .user_agent(USER_AGENT)
            .gzip(cfg.gzip);
        for der in &extra_roots {
            let cert = reqwest::Certificate::from_der(der.as_ref())
                .map_err(|e| bad(format!("setting rpc.tls_ca_file: {e}")))?;
            builder = builder.add_root_certificate(cert);
        }
        let ws = match &cfg.ws_url {
            Some(url) => Some(ws::WsSettings {
                url: url.clone(),
                tls: tls_config(extra_roots).map_err(|reason| RpcError::Config {
                    endpoint: Scrubber::new(url.as_str()).endpoint().to_owned(),
                    reason,
                })?,
                timeout: cfg.request_timeout,
                backoff_initial: cfg.backoff_initial,
                backoff_max: cfg.backoff_max,
            }),
            None => None,
        };
        let client = builder
            .build()
            .map_err(|e| bad(format!("failed to build client: {e}")))?;
        let pool = Pool::new(
            &cfg.urls,
            &PoolSettings {
                max_in_flight: cfg.max_in_flight.get(),
                batch_size: cfg.batch_size.get(),
                tx_receipt_batch: TX_RECEIPT_BATCH,
                max_requests_per_second: cfg.max_requests_per_second,
                backoff_initial: cfg.backoff_initial,
                backoff_max: cfg.backoff_max,
            },
        );
        let stats = Arc::new(RpcStats::with_endpoints(
            pool.endpoints()
                .iter()
                .map(|e| Arc::clone(&e.stats))
                .collect(),
        ));
        Ok(Self {
            cfg,
            client,
            pool,
            names,
            stats,
            receipts: false,
            get_logs: None,
            served: Mutex::new(vec![(u64::MAX, 0); SERVED_SLOTS]),
            served_receipts: Mutex::new(vec![(u64::MAX, 0); SERVED_SLOTS]),
            ws,
            answered: AtomicBool::new(false),
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

    /// Block numbers of new heads from `eth_subscribe newHeads` on
    /// `rpc.ws_url` (`None` when it is not set). The stream lives as long
    /// as the caller keeps it: a dropped socket is subscribed again with
    /// backoff, and yields nothing meanwhile (see `ws`).
    pub fn new_heads(&self) -> Option<crate::source::Heads> {
        self.ws.clone().map(ws::new_heads)
    }

    /// The endpoints as they may be logged, comma-separated.
    pub fn endpoint(&self) -> &str {
        &self.names
    }

    pub fn stats(&self) -> Arc<RpcStats> {
        Arc::clone(&self.stats)
    }

    /// Batch size in use now on the first endpoint (smaller than configured
    /// if the provider capped it).
    pub(crate) fn effective_batch_size(&self) -> usize {
        self.pool.endpoints()[0].batch_size.get()
    }

    /// `text` without any endpoint's secrets.
    pub(super) fn scrub(&self, text: &str) -> String {
        self.pool
            .endpoints()
            .iter()
            .fold(text.to_owned(), |t, e| e.scrub.scrub(&t))
    }

    /// Latest block number (`eth_blockNumber`): the highest any healthy
    /// endpoint reports. Every endpoint that is not benched is asked, so
    /// the pool knows how far behind each one is.
    pub async fn head(&self) -> Result<u64, RpcError> {
        struct Head;
        impl Attempt for Head {
            type Out = u64;
            fn want(&self) -> Option<Want> {
                None
            }
            async fn run<'c>(&mut self, t: Try<'_, 'c>) -> Result<Step<'c, u64>, RpcError> {
                let c = t.client;
                let (best, failure) = c
                    .ask_each("eth_blockNumber", |v| {
                        quantity(v).ok_or_else(|| malformed("number", v))
                    })
                    .await;
                if let Some((head, _)) = best.iter().max_by_key(|(h, _)| *h) {
                    for (h, i) in &best {
                        c.pool.reported_head(*i, *h);
                    }
                    return Ok(Step::Done(*head));
                }
                let (f, lease) = failure.expect("an answer or a failure per endpoint");
                Ok(Step::FailedAt(lease, f))
            }
        }
        retrying(self, Subject::Head, Head).await
    }

    /// The chain id (`eth_chainId`), which every endpoint that answers must
    /// agree on: endpoints of two chains would interleave their blocks.
    pub async fn chain_id(&self) -> Result<u64, RpcError> {
        struct ChainId;
        impl Attempt for ChainId {
            type Out = u64;
            fn want(&self) -> Option<Want> {
                None
            }
            async fn run<'c>(&mut self, t: Try<'_, 'c>) -> Result<Step<'c, u64>, RpcError> {
                let c = t.client;
                let (ids, failure) = c
                    .ask_each("eth_chainId", |v| {
                        quantity(v).ok_or_else(|| malformed("chain id", v))
                    })
                    .await;
                if let Some((first, i)) = ids.first() {
                    if let Some((other, j)) = ids.iter().find(|(id, _)| id != first) {
                        let name = |i: usize| c.pool.endpoints()[i].scrub.endpoint().to_owned();
                        return Err(RpcError::Config {
                            endpoint: c.names.clone(),
                            reason: format!(
                                "the endpoints are on different chains: {} says chain id {first}, {} says {other}",
                                name(*i),
                                name(*j)
                            ),
                        });
                    }
                    return Ok(Step::Done(*first));
                }
                let (f, lease) = failure.expect("an answer or a failure per endpoint");
                Ok(Step::FailedAt(lease, f))
            }
        }
        retrying(self, Subject::ChainId, ChainId).await
    }

    /// Calls `method` once on every endpoint not benched now (or on the
    /// first to become ready when all are), reading each answer with
    /// `read`: the answers with their endpoints, and the first failure.
    async fn ask_each<'a, T, R>(
        &'a self,
        method: &str,
        read: R,
    ) -> (Vec<(T, usize)>, Option<(Failure, Lease<'a>)>)
    where
        R: Fn(&Value) -> Result<T, Failure>,
    {
        let available = self.pool.available();
        let targets: Vec<Option<usize>> = if available.is_empty() {
            vec![None]
        } else {
            available.into_iter().map(Some).collect()
        };
        let read = &read;
        let answers = futures::future::join_all(targets.into_iter().map(|only| async move {
            let lease = self
                .pool
                .acquire(Want {
                    only,
                    ..Want::default()
                })
                .await;
            match self.call_on(&lease, method, Vec::new()).await {
                Ok(v) => match read(&v) {
                    Ok(t) => Ok((t, lease)),
                    Err(f) => Err((f, lease)),
                },
                Err(f) => Err((f, lease)),
            }
        }))
        .await;
        let mut ok = Vec::new();
        let mut failure = None;
        for a in answers {
            match a {
                Ok((t, lease)) => ok.push((t, lease.ep.index)),
                Err((f, lease)) => {
                    if failure.is_none() {
                        failure = Some((f, lease));
                    } else {
                        self.pool.failed(&lease, &f);
                    }
                }
            }
        }
        if !ok.is_empty()
            && let Some((f, lease)) = failure.take()
        {
            self.pool.failed(&lease, &f);
            let error = self.scrub(&f.to_string());
            warn!(target: TARGET, endpoint = lease.ep.scrub.endpoint(), method, error, "endpoint failed; using the others");
        }
        (ok, failure)
    }

    /// Header of block `n` (`eth_getBlockByNumber(n, false)`); `None` if the
    /// node has no such block. Does not wait for it.
    pub async fn header(&self, n: u64) -> Result<Option<BlockHeader>, RpcError> {
        struct Header(u64);
        impl Attempt for Header {
            type Out = Option<BlockHeader>;
            fn want(&self) -> Option<Want> {
                Some(Want {
                    block: Some(self.0),
                    ..Want::default()
                })
            }
            async fn run<'c>(&mut self, t: Try<'_, 'c>) -> Result<Step<'c, Self::Out>, RpcError> {
                let (c, n) = (t.client, self.0);
                let answer = c
                    .call_on(t.lease(), "eth_getBlockByNumber", block_params(n, false))
                    .await
                    .and_then(|v| {
                        if v.is_null() {
                            Ok(None)
                        } else {
                            parse_header(&v).map(Some)
                        }
                    });
                Ok(match answer {
                    Ok(h) => {
                        if h.is_some() {
                            c.pool.has_block(t.lease(), n);
                        }
                        Step::Done(h)
                    }
                    Err(f) => Step::Failed(f),
                })
            }
        }
        retrying(self, Subject::Block(n), Header(n)).await
    }

    /// Full blocks with transactions, split into header fields and
    /// transaction ranges of their JSON text ([`RawBlock`]), in block order,
    /// each checked to be the block asked for, all at once in a `Vec` (for
    /// tests and tools; the pipeline streams them: [`Source::blocks`]).
    /// Waits for blocks the node has not produced yet.
    ///
    /// [`Source::blocks`]: crate::source::Source::blocks
    pub(crate) async fn blocks_vec(
        &self,
        range: RangeInclusive<u64>,
    ) -> Result<Vec<RawBlock>, RpcError> {
        stream::iter(chunks(range, self.cfg.batch_size.get()))
            .map(|r| self.fetch_range(r))
            .buffered(self.depth())
            .try_concat()
            .await
    }

    /// Batches in flight at once: `max_in_flight` per endpoint.
    pub(super) fn depth(&self) -> usize {
        self.cfg.max_in_flight.get() * self.pool.endpoints().len()
    }

    /// Full blocks of `range`, split as [`RawBlock`]s, streamed: up to `max_in_flight`
    /// batches per endpoint are fetched concurrently and blocks come out
    /// strictly in order. Nothing is fetched beyond what the consumer pulls
    /// plus the in-flight window, so memory stays bounded. Ends after the
    /// first error.
    pub fn block_stream(
        self: Arc<Self>,
        range: RangeInclusive<u64>,
    ) -> impl Stream<Item = Result<RawBlock, RpcError>> + Send + 'static {
        let depth = self.depth();
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
    /// With several endpoints, it is asked of another endpoint than the one
    /// that served it last (it is fetched again because it did not verify,
    /// did not decode, or its receipts did not match it), and so are its
    /// receipts.
    pub async fn block_again(&self, n: u64) -> Result<Option<RawBlock>, RpcError> {
        struct BlockAgain(Want);
        impl Attempt for BlockAgain {
            type Out = Option<RawBlock>;
            fn want(&self) -> Option<Want> {
                Some(self.0)
            }
            async fn run<'c>(&mut self, t: Try<'_, 'c>) -> Result<Step<'c, Self::Out>, RpcError> {
                let c = t.client;
                let n = self.0.block.expect("a block");
                let f = match c.fetch_chunk(t.lease(), n, 1).await {
                    Ok(mut r) => match r.pop().map(|o| o.and_then(|v| check_block(n, v))) {
                        // The other endpoint has not got it (yet): the one
                        // that served it is the only source left.
                        Some(Ok(None)) if self.0.avoid.take().is_some() => return Ok(Step::Again),
                        Some(Ok(None)) => return Ok(Step::Done(None)),
                        Some(Ok(Some(b))) => {
                            c.record_served(n, t.lease().ep.index);
                            return Ok(Step::Done(Some(b)));
                        }
                        Some(Err(f)) => f,
                        None => Failure::BadBatch("invalid response: no answer".into()),
                    },
                    Err(f) => f,
                };
                Ok(Step::Failed(f))
            }
        }
        let want = Want {
            block: Some(n),
            avoid: self.served_by(n),
            only: None,
        };
        let Some(mut block) = retrying(self, Subject::Block(n), BlockAgain(want)).await? else {
            return Ok(None);
        };
        if self.receipts {
            let avoid = self.receipts_served_by(n);
            self.attach_receipts(std::slice::from_mut(&mut block), avoid)
                .await?;
        }
        if self.get_logs.is_some() {
            block.logs = Some(self.logs_by_hash(&block.header).await?);
        }
        Ok(Some(block))
    }

    fn record_served(&self, n: u64, endpoint: usize) {
        self.record_in(&self.served, n, endpoint);
    }

    fn served_by(&self, n: u64) -> Option<usize> {
        Self::lookup(&self.served, n)
    }

    fn record_receipts_served(&self, n: u64, endpoint: usize) {
        self.record_in(&self.served_receipts, n, endpoint);
    }

    fn receipts_served_by(&self, n: u64) -> Option<usize> {
        Self::lookup(&self.served_receipts, n)
    }

    fn record_in(&self, table: &Mutex<Vec<(u64, usize)>>, n: u64, endpoint: usize) {
        if self.pool.endpoints().len() > 1 {
            let mut s = table.lock().unwrap_or_else(|p| p.into_inner());
            s[(n % SERVED_SLOTS as u64) as usize] = (n, endpoint);
        }
    }

    fn lookup(table: &Mutex<Vec<(u64, usize)>>, n: u64) -> Option<usize> {
        let s = table.lock().unwrap_or_else(|p| p.into_inner());
        let (m, e) = s[(n % SERVED_SLOTS as u64) as usize];
        (m == n).then_some(e)
    }

    /// POSTs `body` to `url`, reading at most `rpc.max_response_mib`.
    pub(super) fn post<'a>(
        &'a self,
        url: &'a url::Url,
        body: String,
    ) -> impl Future<Output = Result<Vec<u8>, Failure>> + 'a {
        batch::post(
            &self.client,
            url,
            body,
            self.cfg.max_response_mib.get() << 20,
        )
    }

    /// One JSON-RPC call to the endpoint of `lease`: its `result`.
    async fn call_on(
        &self,
        lease: &Lease<'_>,
        method: &str,
        params: Vec<Value>,
    ) -> Result<Value, Failure> {
        let body =
            serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let answer = self
            .round_trip(lease, self.post(&lease.ep.url, body.to_string()))
            .await?;
        batch::parse_single(&answer)
    }

    /// Blocks `range` in order, in as many sub-batches as the current batch
    /// size needs; retries failures (on another endpoint when one is
    /// healthy) and waits for `null` (future) blocks.
    async fn fetch_range(&self, range: RangeInclusive<u64>) -> Result<Vec<RawBlock>, RpcError> {
        let (first, last) = range.into_inner();
        let len = usize::try_from(last - first + 1).expect("range bounded by batch size");
        let mut slots: Vec<Option<RawBlock>> = (0..len).map(|_| None).collect();
        let fetch = FetchRange {
            first,
            slots: &mut slots,
            next: 0,
        };
        retrying(self, Subject::range(first, last), fetch).await?;
        let mut blocks: Vec<RawBlock> = slots.into_iter().flatten().collect();
        if self.receipts {
            self.attach_receipts(&mut blocks, None).await?;
        }
        Ok(blocks)
    }

    /// Fetches the receipts of `blocks` by their hashes and attaches them,
    /// in batches no larger than the endpoint takes; not from `avoid` while
    /// another endpoint is healthy (it served them wrong).
    async fn attach_receipts(
        &self,
        blocks: &mut [RawBlock],
        avoid: Option<usize>,
    ) -> Result<(), RpcError> {
        let (Some(first), Some(last)) = (blocks.first(), blocks.last()) else {
            return Ok(());
        };
        let subject = Subject::range(first.header.number, last.header.number);
        let attempt = AttachReceipts {
            blocks,
            done: 0,
            avoid,
        };
        retrying(self, subject, attempt).await
    }

    /// `eth_getBlockReceipts` for every block, in one batch.
    async fn block_receipts(
        &self,
        lease: &Lease<'_>,
        blocks: &[RawBlock],
    ) -> Result<Vec<RawReceipts>, Failure> {
        let hashes: Vec<_> = blocks.iter().map(|b| b.header.hash).collect();
        let body = receipts::request_body("eth_getBlockReceipts", &hashes);
        let answer = self
            .round_trip(lease, self.post(&lease.ep.url, body))
            .await?;
        receipts::parse_block_receipts(answer, blocks.len())
    }

    /// `eth_getTransactionReceipt` for every transaction of `b`, in batches
    /// of at most `tx_receipt_batch` calls, read into one list. The batches
    /// share `lease`'s slot. A batch the provider refuses as too large is
    /// sent again at once, halved ([`shrink`](Self::shrink)); any other
    /// failure is the caller's try failing ([`AttachReceipts`]), so this
    /// is paging, not a retry loop.
    async fn tx_receipts(&self, lease: &Lease<'_>, b: &RawBlock) -> Result<RawReceipts, Failure> {
        let ep = lease.ep;
        let hashes = (0..b.txs.len())
            .map(|i| receipts::tx_hash(b.tx_json(i).unwrap_or_default()))
            .collect::<Result<Vec<_>, _>>()?;
        let mut parts = Vec::new();
        let mut done = 0;
        while done < hashes.len() {
            let size = ep.tx_receipt_batch.get().min(hashes.len() - done);
            let body =
                receipts::request_body("eth_getTransactionReceipt", &hashes[done..done + size]);
            let answer = self.round_trip(lease, self.post(&ep.url, body)).await;
            match answer.and_then(|a| receipts::parse_tx_receipts(a, size)) {
                Ok(part) => {
                    parts.push(part);
                    done += size;
                }
                Err(f) if size > 1 && classify(&f, true) == Class::BatchTooLarge => {
                    self.shrink(lease, Batch::TxReceipts, size, &f);
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
        lease: &Lease<'_>,
        first: u64,
        size: usize,
    ) -> Result<Vec<batch::CallOutcome>, Failure> {
        let body = batch::request_body(first, size);
        let answer = self
            .round_trip(lease, self.post(&lease.ep.url, body))
            .await?;
        batch::parse_answer(answer, first, size).inspect_err(|_| {
            self.stats.errors.fetch_add(1, Relaxed);
        })
    }

    /// Sends with the per-request timeout and counts the outcome. A
    /// failure is told to the pool by the retry driver (`driver::weigh`;
    /// a refused batch size or a missing method is no fault of the
    /// endpoint's), a success here.
    pub(super) async fn round_trip<T, E>(
        &self,
        lease: &Lease<'_>,
        fut: impl Future<Output = Result<T, E>>,
    ) -> Result<T, Failure>
    where
        Failure: From<E>,
    {
        self.stats.requests.fetch_add(1, Relaxed);
        let res = match tokio::time::timeout(self.cfg.request_timeout, fut).await {
            Ok(Ok(v)) => {
                self.answered.store(true, Relaxed);
                self.pool.succeeded(lease);
                return Ok(v);
            }
            Ok(Err(e)) => Failure::from(e),
            Err(_) => Failure::Timeout(self.cfg.request_timeout),
        };
        if !matches!(res, Failure::Unreachable(_) | Failure::Timeout(_)) {
            self.answered.store(true, Relaxed);
        }
        self.stats.errors.fetch_add(1, Relaxed);
        Err(res)
    }

    /// Halves `lease`'s endpoint's `batch` size after it refused `tried`
    /// calls at once: the one place a refused batch size is lowered and
    /// said (a warning the first time per endpoint and kind, then debug).
    fn shrink(&self, lease: &Lease<'_>, batch: Batch, tried: usize, failure: &Failure) {
        let ep = lease.ep;
        let (cap, what) = match batch {
            Batch::Blocks => (&ep.batch_size, "batches"),
            Batch::TxReceipts => (&ep.tx_receipt_batch, "receipt batches"),
        };
        let to = halved(tried);
        let from = cap.lower(to);
        if to >= from {
            return; // another batch already shrank it at least as far
        }
        let error = self.scrub(&failure.to_string());
        if !cap.logged.swap(true, Relaxed) {
            warn!(target: TARGET, endpoint = ep.scrub.endpoint(), from, to, error, "provider caps batch size; shrinking {what}");
        } else {
            debug!(target: TARGET, endpoint = ep.scrub.endpoint(), from, to, "shrinking {what} again");
        }
    }

    pub(super) fn failed_on(
        &self,
        lease: &Lease<'_>,
        subject: Subject,
        failure: &Failure,
    ) -> RpcError {
        RpcError::Failed {
            endpoint: lease.ep.scrub.endpoint().to_owned(),
            subject,
            cause: self.scrub(&failure.to_string()),
        }
    }
}

/// [`RpcClient::fetch_range`]'s tries: blocks from `first` into `slots`,
/// in as many sub-batches as the endpoint's batch size needs.
struct FetchRange<'s> {
    first: u64,
    slots: &'s mut [Option<RawBlock>],
    /// The first slot still missing.
    next: usize,
}

impl Attempt for FetchRange<'_> {
    type Out = ();

    fn want(&self) -> Option<Want> {
        Some(Want {
            block: Some(self.first + self.slots.len() as u64 - 1),
            ..Want::default()
        })
    }

    async fn run<'c>(&mut self, mut t: Try<'_, 'c>) -> Result<Step<'c, ()>, RpcError> {
        let (c, lease) = (t.client, t.lease());
        let len = self.slots.len();
        let lo = self.first + self.next as u64;
        let size = lease.ep.batch_size.get().min(len - self.next);
        let in_batch = size > 1;
        let results = match c.fetch_chunk(lease, lo, size).await {
            Ok(results) => results,
            Err(f) if in_batch && classify(&f, true) == Class::BatchTooLarge => {
                c.shrink(lease, Batch::Blocks, size, &f);
                return Ok(Step::Again);
            }
            Err(failure) => {
                return Ok(Step::FailedOn {
                    subject: Subject::range(lo, lo + size as u64 - 1),
                    failure,
                    in_batch,
                });
            }
        };
        let (mut retry, mut too_large) = (None, None);
        let mut null = None;
        for (i, result) in results.into_iter().enumerate() {
            let n = lo + i as u64;
            match result.and_then(|v| check_block(n, v)) {
                Ok(None) => {
                    null.get_or_insert(n); // not produced yet
                }
                Ok(Some(v)) => {
                    c.pool.has_block(lease, n);
                    c.record_served(n, lease.ep.index);
                    self.slots[self.next + i] = Some(v)
                }
                Err(f) => match classify(&f, in_batch) {
                    // No other endpoint to ask: the driver fails at once.
                    Class::Fatal if !c.pool.has_other(lease.ep.index) => {
                        return Ok(Step::FailedOn {
                            subject: Subject::Block(n),
                            failure: f,
                            in_batch: false,
                        });
                    }
                    Class::BatchTooLarge => too_large = Some(f),
                    Class::Retry | Class::Fatal => {
                        c.stats.errors.fetch_add(1, Relaxed);
                        retry.get_or_insert((n, f));
                    }
                },
            }
        }
        if let Some(n) = null {
            c.pool.lacks_block(lease, n);
        }
        let before = self.next;
        while self.next < len && self.slots[self.next].is_some() {
            self.next += 1;
        }
        if self.next > before {
            t.progress();
        }
        Ok(if self.next == len {
            Step::Done(())
        } else if let Some(f) = too_large {
            c.shrink(lease, Batch::Blocks, size, &f);
            Step::Again
        } else if let Some((n, failure)) = retry {
            Step::FailedOn {
                subject: Subject::Block(n),
                failure,
                in_batch: false,
            }
        } else if self.next - before < size {
            // A gap inside what we just fetched: the node answered null.
            Step::NotYet(self.first + self.next as u64)
        } else {
            Step::Again
        })
    }
}

/// [`RpcClient::attach_receipts`]' tries: the receipts of `blocks` from
/// `done` on, in batches no larger than the endpoint takes.
struct AttachReceipts<'b> {
    blocks: &'b mut [RawBlock],
    done: usize,
    /// An endpoint not to ask while another is healthy.
    avoid: Option<usize>,
}

impl Attempt for AttachReceipts<'_> {
    type Out = ();

    fn want(&self) -> Option<Want> {
        Some(Want {
            block: self.blocks.last().map(|b| b.header.number),
            avoid: self.avoid,
            ..Want::default()
        })
    }

    async fn run<'c>(&mut self, mut t: Try<'_, 'c>) -> Result<Step<'c, ()>, RpcError> {
        let (c, lease) = (t.client, t.lease());
        let ep = lease.ep;
        let by_tx = ep.no_block_receipts.load(Relaxed);
        let size = if by_tx {
            1
        } else {
            ep.batch_size.get().min(self.blocks.len() - self.done)
        };
        let part = &mut self.blocks[self.done..self.done + size];
        let subject = Subject::range(part[0].header.number, part[part.len() - 1].header.number);
        let fetched = if by_tx {
            c.tx_receipts(lease, &part[0]).await.map(|r| vec![r])
        } else {
            c.block_receipts(lease, part).await
        };
        Ok(match fetched {
            Ok(all) => {
                for (b, r) in part.iter_mut().zip(all) {
                    c.record_receipts_served(b.header.number, ep.index);
                    b.receipts = Some(r);
                }
                self.done += size;
                t.progress();
                if self.done == self.blocks.len() {
                    Step::Done(())
                } else {
                    Step::Again
                }
            }
            Err(f) if !by_tx && receipts::method_missing(&f) => {
                if !ep.no_block_receipts.swap(true, Relaxed) {
                    let error = c.scrub(&f.to_string());
                    info!(target: TARGET, endpoint = ep.scrub.endpoint(), error, "node has no eth_getBlockReceipts; fetching receipts with eth_getTransactionReceipt");
                }
                Step::Again
            }
            Err(f) if size > 1 && classify(&f, true) == Class::BatchTooLarge => {
                c.shrink(lease, Batch::Blocks, size, &f);
                Step::Again
            }
            Err(failure) => Step::FailedOn {
                subject,
                failure,
                in_batch: false,
            },
        })
    }
}

/// Which of an endpoint's batch sizes a refusal lowers.
#[derive(Clone, Copy)]
enum Batch {
    /// Blocks per `eth_getBlockByNumber` batch (and block receipts per
    /// `eth_getBlockReceipts` batch, which follow it).
    Blocks,
    /// Calls per `eth_getTransactionReceipt` batch.
    TxReceipts,
}

/// The certificates of the PEM file `rpc.tls_ca_file`.
fn read_ca_file(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let pem = std::fs::read(path).map_err(|e| {
        format!(
            "setting rpc.tls_ca_file: cannot read {}: {e}",
            path.display()
        )
    })?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            format!(
                "setting rpc.tls_ca_file: {} is not a PEM certificate file: {e}",
                path.display()
            )
        })?;
    if certs.is_empty() {
        return Err(format!(
            "setting rpc.tls_ca_file: {} holds no PEM certificate",
            path.display()
        ));
    }
    Ok(certs)
}

/// rustls settings for `wss://`: the public web roots plus `extra`, with
/// the ring provider (the one sqlx and reqwest use too).
fn tls_config(extra: Vec<CertificateDer<'static>>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    for cert in extra {
        roots
            .add(cert)
            .map_err(|e| format!("setting rpc.tls_ca_file: unusable certificate: {e}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS: {e}"))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn errors_name_endpoint_and_block_without_secrets() {
        let with_url = |url: &str| {
            let mut cfg = crate::config::Settings::defaults().rpc;
            cfg.urls = vec![url.parse().unwrap()];
            RpcClient::new(cfg)
        };
        let client = with_url("http://u:pw12@127.0.0.1:1/?key=zzzz").unwrap();
        assert_eq!(client.endpoint(), "http://127.0.0.1:1/");
        let e = RpcError::Failed {
            endpoint: client.endpoint().to_owned(),
            subject: Subject::Block(123),
            cause: client.scrub(&Failure::Timeout(Duration::from_secs(2)).to_string()),
        };
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
