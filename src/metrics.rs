//! Counters of the whole process, exported in the Prometheus text format by
//! the `prometheus` crate, and the optional `/metrics` + `/health` endpoint.
//!
//! Stages only bump counters here; this module never drives indexing. The
//! HTTP side is a deliberately tiny HTTP/1.0 responder (two GET routes,
//! then close), so that serving metrics adds no web framework.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus::{
    Encoder, Histogram, HistogramOpts, IntCounter, IntGauge, IntGaugeVec, Registry, TextEncoder,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Counters of one JSON-RPC endpoint, kept by the rpc stage's pool.
#[derive(Debug)]
pub struct EndpointStats {
    /// Redacted.
    name: String,
    requests: AtomicU64,
    errors: AtomicU64,
    throttled: AtomicU64,
    benched: AtomicU64,
    limit: AtomicU64,
    head: AtomicU64,
}

impl EndpointStats {
    pub(crate) fn new(name: String) -> Self {
        EndpointStats {
            name,
            requests: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            throttled: AtomicU64::new(0),
            benched: AtomicU64::new(0),
            limit: AtomicU64::new(0),
            head: AtomicU64::new(0),
        }
    }
    pub fn name(&self) -> &str {
        &self.name
    }
    pub(crate) fn count_request(&self) {
        self.requests.fetch_add(1, Relaxed);
    }
    pub(crate) fn count_error(&self) {
        self.errors.fetch_add(1, Relaxed);
    }
    pub(crate) fn count_throttled(&self) {
        self.throttled.fetch_add(1, Relaxed);
    }
    pub(crate) fn count_benched(&self) {
        self.benched.fetch_add(1, Relaxed);
    }
    pub(crate) fn set_limit(&self, n: usize) {
        self.limit.store(n as u64, Relaxed);
    }
    pub(crate) fn set_head(&self, n: u64) {
        self.head.store(n, Relaxed);
    }
    /// Requests sent to it (a batch counts once).
    pub fn requests(&self) -> u64 {
        self.requests.load(Relaxed)
    }
    /// Its failed round trips and answers.
    pub fn errors(&self) -> u64 {
        self.errors.load(Relaxed)
    }
    /// Its rate-limit answers (HTTP 429, rate-limit errors).
    pub fn throttled(&self) -> u64 {
        self.throttled.load(Relaxed)
    }
    /// Times it was benched after failing.
    pub fn benched(&self) -> u64 {
        self.benched.load(Relaxed)
    }
}

/// Counters for metrics; shared with the exporter through `rpc::RpcClient::stats`.
#[derive(Debug, Default)]
pub struct RpcStats {
    pub(crate) endpoints: Vec<Arc<EndpointStats>>,
    pub(crate) requests: AtomicU64,
    pub(crate) errors: AtomicU64,
    pub(crate) retries: AtomicU64,
    pub(crate) null_waits: AtomicU64,
    pub(crate) log_range_cuts: AtomicU64,
    pub(crate) log_refetches: AtomicU64,
}

impl RpcStats {
    pub(crate) fn with_endpoints(endpoints: Vec<Arc<EndpointStats>>) -> Self {
        RpcStats {
            endpoints,
            ..RpcStats::default()
        }
    }
    /// Each endpoint's counters, in configured order.
    pub fn endpoints(&self) -> &[Arc<EndpointStats>] {
        &self.endpoints
    }
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
    /// `eth_getLogs` ranges the provider refused, so narrowed.
    pub fn log_range_cuts(&self) -> u64 {
        self.log_range_cuts.load(Relaxed)
    }
    /// Blocks whose logs were asked for again by block hash.
    pub fn log_refetches(&self) -> u64 {
        self.log_refetches.load(Relaxed)
    }
}

pub struct Metrics {
    registry: Registry,
    pub head_block: IntGauge,
    pub indexed_block: IntGauge,
    pub lag_blocks: IntGauge,
    pub blocks: IntCounter,
    pub txs: IntCounter,
    pub recovered: IntCounter,
    pub unrecoverable: IntCounter,
    pub from_mismatches: IntCounter,
    pub reorgs: IntCounter,
    pub reorg_depth: Histogram,
    pub rollback_blocks: IntCounter,
    pub refetches: IntCounter,
    /// Answers of a block that did not verify, decode or match (each try).
    pub wrong_answers: IntCounter,
    /// Of them, those unlike the same block's previous wrong answer.
    pub distinct_wrong_answers: IntCounter,
    /// Blocks that came right after being fetched again.
    pub right_after_refetch: IntCounter,
    /// Runs stopped on a block answered wrong: the same answer again and
    /// again, or `index.refetch_budget_ms` spent.
    pub refetch_stops: IntCounter,
    pub verify_failures: IntCounter,
    rpc_requests: IntGauge,
    rpc_errors: IntGauge,
    rpc_retries: IntGauge,
    log_range_cuts: IntGauge,
    log_refetches: IntGauge,
    endpoint_requests: IntGaugeVec,
    endpoint_errors: IntGaugeVec,
    endpoint_throttled: IntGaugeVec,
    endpoint_benched: IntGaugeVec,
    endpoint_limit: IntGaugeVec,
    endpoint_head: IntGaugeVec,
    rpc: std::sync::Mutex<Option<Arc<RpcStats>>>,
    started: Instant,
    last_progress: std::sync::Mutex<Instant>,
}

fn gauge(r: &Registry, name: &str, help: &str) -> IntGauge {
    let g = IntGauge::new(name, help).expect("valid metric");
    r.register(Box::new(g.clone())).expect("unique metric");
    g
}

fn endpoint_gauge(r: &Registry, name: &str, help: &str) -> IntGaugeVec {
    let g =
        IntGaugeVec::new(prometheus::Opts::new(name, help), &["endpoint"]).expect("valid metric");
    r.register(Box::new(g.clone())).expect("unique metric");
    g
}

fn counter(r: &Registry, name: &str, help: &str) -> IntCounter {
    let c = IntCounter::new(name, help).expect("valid metric");
    r.register(Box::new(c.clone())).expect("unique metric");
    c
}

impl Metrics {
    pub fn new() -> Arc<Metrics> {
        let r = Registry::new_custom(Some("sender_indexer".into()), None).expect("registry");
        let reorg_depth = Histogram::with_opts(
            HistogramOpts::new("reorg_depth", "depth of each reorg rolled back, in blocks")
                .buckets(vec![1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0]),
        )
        .expect("valid metric");
        r.register(Box::new(reorg_depth.clone()))
            .expect("unique metric");
        Arc::new(Metrics {
            head_block: gauge(&r, "head_block", "latest block number the node reported"),
            indexed_block: gauge(&r, "indexed_block", "last block committed to the database"),
            lag_blocks: gauge(&r, "lag_blocks", "head_block minus indexed_block"),
            blocks: counter(&r, "blocks_total", "blocks committed"),
            txs: counter(&r, "transactions_total", "transactions committed"),
            recovered: counter(&r, "recoveries_total", "senders recovered from signatures"),
            unrecoverable: counter(
                &r,
                "unrecoverable_total",
                "transactions whose sender could not be recovered",
            ),
            from_mismatches: counter(
                &r,
                "from_mismatches_total",
                "recovered senders that differ from the node's from",
            ),
            reorgs: counter(&r, "reorgs_total", "reorgs rolled back"),
            rollback_blocks: counter(
                &r,
                "rollback_blocks_total",
                "blocks deleted by reorg rollbacks",
            ),
            refetches: counter(
                &r,
                "block_refetches_total",
                "blocks fetched again because they did not verify or their receipts or logs did not match them",
            ),
            wrong_answers: counter(
                &r,
                "block_wrong_answers_total",
                "answers of a block that did not verify, decode, or match its receipts or logs (each try counts)",
            ),
            distinct_wrong_answers: counter(
                &r,
                "block_wrong_answers_distinct_total",
                "wrong answers unlike the same block's previous one (a flaky provider: the block is fetched again)",
            ),
            right_after_refetch: counter(
                &r,
                "block_refetch_recoveries_total",
                "blocks that verified after being fetched again",
            ),
            refetch_stops: counter(
                &r,
                "block_refetch_stops_total",
                "runs stopped on a block answered wrong: the same answer 6 times in a row, or index.refetch_budget_ms spent",
            ),
            verify_failures: counter(
                &r,
                "verify_failures_total",
                "blocks that did not verify as the node sent them (each try counts)",
            ),
            reorg_depth,
            rpc_requests: gauge(&r, "rpc_requests_total", "JSON-RPC HTTP requests sent"),
            rpc_errors: gauge(&r, "rpc_errors_total", "JSON-RPC requests that failed"),
            rpc_retries: gauge(&r, "rpc_retries_total", "JSON-RPC requests retried"),
            log_range_cuts: gauge(
                &r,
                "get_logs_range_cuts_total",
                "eth_getLogs ranges the provider refused, so narrowed",
            ),
            log_refetches: gauge(
                &r,
                "get_logs_refetches_total",
                "blocks whose logs were asked for again by block hash",
            ),
            endpoint_requests: endpoint_gauge(
                &r,
                "rpc_endpoint_requests_total",
                "JSON-RPC HTTP requests sent to each endpoint",
            ),
            endpoint_errors: endpoint_gauge(
                &r,
                "rpc_endpoint_errors_total",
                "failed requests and answers of each endpoint",
            ),
            endpoint_throttled: endpoint_gauge(
                &r,
                "rpc_endpoint_throttled_total",
                "rate-limit answers (HTTP 429, rate-limit errors) of each endpoint",
            ),
            endpoint_benched: endpoint_gauge(
                &r,
                "rpc_endpoint_benched_total",
                "times each endpoint was benched after failing",
            ),
            endpoint_limit: endpoint_gauge(
                &r,
                "rpc_endpoint_in_flight_limit",
                "requests each endpoint may have in flight now (adaptive)",
            ),
            endpoint_head: endpoint_gauge(
                &r,
                "rpc_endpoint_head_block",
                "highest block each endpoint is known to have",
            ),
            rpc: std::sync::Mutex::new(None),
            started: Instant::now(),
            last_progress: std::sync::Mutex::new(Instant::now()),
            registry: r,
        })
    }

    pub fn attach_rpc(&self, stats: Arc<RpcStats>) {
        *self.rpc.lock().unwrap() = Some(stats);
    }

    pub fn set_head(&self, head: u64) {
        self.head_block.set(head as i64);
        self.update_lag();
    }

    pub fn set_indexed(&self, n: u64) {
        self.indexed_block.set(n as i64);
        *self.last_progress.lock().unwrap() = Instant::now();
        self.update_lag();
    }

    fn update_lag(&self) {
        self.lag_blocks
            .set((self.head_block.get() - self.indexed_block.get()).max(0));
    }

    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The exposition text.
    pub fn render(&self) -> String {
        if let Some(rpc) = self.rpc.lock().unwrap().as_ref() {
            self.rpc_requests.set(rpc.requests() as i64);
            self.rpc_errors.set(rpc.errors() as i64);
            self.rpc_retries.set(rpc.retries() as i64);
            self.log_range_cuts.set(rpc.log_range_cuts() as i64);
            self.log_refetches.set(rpc.log_refetches() as i64);
            for e in rpc.endpoints() {
                let l = [e.name()];
                let set = |g: &IntGaugeVec, v: u64| g.with_label_values(&l).set(v as i64);
                set(&self.endpoint_requests, e.requests());
                set(&self.endpoint_errors, e.errors());
                set(&self.endpoint_throttled, e.throttled());
                set(&self.endpoint_benched, e.benched());
                set(&self.endpoint_limit, e.limit.load(Relaxed));
                set(&self.endpoint_head, e.head.load(Relaxed));
            }
        }
        let mut out = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut out)
            .expect("text encoding");
        String::from_utf8(out).expect("utf-8")
    }

    /// `Err(reason)` when the indexer has fallen behind or stopped moving.
    pub fn health(&self, max_lag: u64, max_stall: Duration) -> Result<(), String> {
        let lag = self.lag_blocks.get() as u64;
        if lag > max_lag {
            return Err(format!(
                "indexed block is {lag} blocks behind the head (limit {max_lag})"
            ));
        }
        let stalled = self.last_progress.lock().unwrap().elapsed();
        if lag > 0 && stalled > max_stall {
            return Err(format!(
                "no block indexed for {}s while {lag} behind",
                stalled.as_secs()
            ));
        }
        Ok(())
    }
}

/// Serves `/metrics` and `/health` on `listener` until the process ends.
pub async fn serve(
    listener: tokio::net::TcpListener,
    metrics: Arc<Metrics>,
    max_lag: u64,
    max_stall: Duration,
) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        let metrics = Arc::clone(&metrics);
        tokio::spawn(async move {
            let mut req = vec![0u8; 4096];
            let n = match tokio::time::timeout(Duration::from_secs(5), sock.read(&mut req)).await {
                Ok(Ok(n)) => n,
                _ => return,
            };
            let line = String::from_utf8_lossy(&req[..n]);
            let path = line.split_whitespace().nth(1).unwrap_or("");
            let (status, body, ctype) = match path {
                "/metrics" => ("200 OK", metrics.render(), "text/plain; version=0.0.4"),
                "/health" => match metrics.health(max_lag, max_stall) {
                    Ok(()) => ("200 OK", "ok\n".to_string(), "text/plain"),
                    Err(why) => ("503 Service Unavailable", format!("{why}\n"), "text/plain"),
                },
                _ => (
                    "404 Not Found",
                    "try /metrics or /health\n".to_string(),
                    "text/plain",
                ),
            };
            let resp = format!(
                "HTTP/1.0 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = sock.write_all(resp.as_bytes()).await;
            let _ = sock.shutdown().await;
        });
    }
}
