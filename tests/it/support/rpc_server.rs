//! A small, real HTTP JSON-RPC server standing in for an EVM node in tests
//! and benchmarks.
//!
//! It serves `eth_blockNumber`, `eth_chainId` and `eth_getBlockByNumber`
//! (full, or header-only with transaction hashes; also by hash,
//! `eth_getBlockByHash`), `net_version`, receipts (`eth_getBlockReceipts` by
//! hash, number or tag, `eth_getTransactionReceipt`) and `eth_getLogs`
//! (by range or block hash, with address and topic filters, optionally
//! capped the way real providers cap it, with their real messages), for
//! single and batch requests, from blocks serialized once at start so that serving costs
//! almost nothing next to the client under test. Knobs inject faults (HTTP
//! statuses, dropped connections, stalls, JSON-RPC errors), cap batch sizes,
//! hold back blocks above a settable head, add latency, and count traffic.
//!
//! It speaks just enough HTTP/1.1 (Content-Length bodies, keep-alive) for
//! reqwest/hyper clients; no chunked encoding, no TLS. It listens on
//! 127.0.0.1 only. When told to ([`RpcServer::set_gzip`]) it compresses
//! the answers whose request asks for gzip, as providers do, and counts the
//! bytes it sends. The benchmark includes this file with `#[path]`, so it
//! depends on nothing but std, tokio, serde_json and flate2, and knows
//! nothing of the crate under test.

// Tests and the benchmark each use a different subset of the knobs.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Largest request accepted; a batch of a few thousand calls fits easily.
const MAX_REQUEST_BYTES: usize = 16 << 20;

/// A fault injected into the next HTTP request(s).
#[derive(Debug, Clone)]
pub enum Fault {
    /// Answer with this HTTP status and a tiny body.
    Status(u16),
    /// Close the connection without answering.
    Close,
    /// Wait this long, then answer normally (clients should time out first).
    Stall(Duration),
    /// Answer every call in the request with this JSON-RPC error.
    RpcError { code: i64, message: String },
}

/// How `eth_getLogs` is capped, each the way a real provider does it and
/// answering with its own message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogsLimit {
    /// Infura: more than `n` results is -32005 "query returned more than
    /// 10000 results. Try with this block range [0x…, 0x…]."
    InfuraResults(usize),
    /// Alchemy: -32602 "Log response size exceeded. … this block range
    /// should work: [0x…, 0x…]"
    AlchemyResults(usize),
    /// reth: "query exceeds max results 20000, retry with the range A-B"
    RethResults(usize),
    /// reth: "query exceeds max block range N"
    RethRange(u64),
    /// QuickNode: -32614 "eth_getLogs is limited to a 10,000 range"
    QuickNodeRange(u64),
    /// A gateway answering HTTP 413 to a wide range.
    Http413Range(u64),
    /// Ankr: "block range is too wide"
    AnkrRange(u64),
    /// BlockPI: "eth_getLogs is limited to 1024 block range"
    BlockPiRange(u64),
    /// "exceed maximum block range: 50000"
    MaximumRange(u64),
    /// "Block range is too large"
    TooLargeRange(u64),
    /// "response size should not greater than 10000000 bytes", by count.
    ResponseSize(usize),
}

impl LogsLimit {
    /// Every provider's cap, with the given range and result limits.
    pub fn all(range: u64, results: usize) -> Vec<LogsLimit> {
        use LogsLimit::*;
        vec![
            InfuraResults(results),
            AlchemyResults(results),
            RethResults(results),
            RethRange(range),
            QuickNodeRange(range),
            Http413Range(range),
            AnkrRange(range),
            BlockPiRange(range),
            MaximumRange(range),
            TooLargeRange(range),
            ResponseSize(results),
        ]
    }
}

/// How `eth_getLogs` over a range gets one block wrong, as a node behind
/// or on another fork does (answers by block hash stay right).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeFault {
    /// The block's logs are missing, as from a node that has not got it.
    Omit,
    /// The block's logs name another block hash.
    OtherFork,
}

/// Both serializations of one block, and its receipts, made once at
/// insert time.
struct Stored {
    full: String,
    header: String,
    /// The `eth_getBlockReceipts` answer: real receipts when the test gave
    /// them ([`RpcServer::insert_receipts`]), else one plain receipt per
    /// transaction (status 1, 21,000 gas, no logs) that names it.
    receipts: String,
}

struct State {
    blocks: RwLock<HashMap<u64, Stored>>,
    /// Block hash (as the node writes it) to number.
    by_hash: RwLock<HashMap<String, u64>>,
    /// Transaction hash to its receipt's JSON text, built on the first
    /// `eth_getTransactionReceipt` after blocks or receipts changed (peers
    /// ask for every receipt one by one; a scan per call would make the
    /// server, not the client, what a benchmark measures).
    /// A hash found in several blocks (a benchmark chain repeats its
    /// templates) answers the lowest such block's receipt.
    receipt_by_tx: RwLock<Option<HashMap<String, (u64, String)>>>,
    head: AtomicU64,
    chain_id: AtomicU64,
    faults: Mutex<VecDeque<Fault>>,
    batch_cap: AtomicUsize, // 0 = no cap
    /// Whether `eth_getBlockReceipts` exists (some nodes lack it).
    block_receipts: AtomicBool,
    logs_limit: Mutex<Option<LogsLimit>>,
    /// Refuse `eth_getLogs` ranges that reach past the head (some providers
    /// do), instead of clamping them.
    refuse_beyond_head: AtomicBool,
    range_fault: Mutex<Option<(u64, RangeFault)>>,
    /// (block, answers left, what): that block served wrong.
    wrong: Mutex<Option<(u64, usize, Wrong)>>,
    get_logs_calls: AtomicU64,
    get_logs_refused: AtomicU64,
    latency_us: AtomicU64, // 0 = none
    requests: AtomicU64,
    calls: AtomicU64,
    rejected_batches: AtomicU64,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
    /// Compress answers for requests that accept gzip.
    gzip: AtomicBool,
    /// Requests whose `Accept-Encoding` named gzip.
    asked_gzip: AtomicU64,
    /// Answer bodies as sent (compressed or not) and before compression.
    wire_bytes: AtomicU64,
    plain_bytes: AtomicU64,
    /// Time spent compressing, in nanoseconds (benchmarks subtract it).
    gzip_nanos: AtomicU64,
}

/// The running server; stops (and drops its connections) when dropped.
pub struct RpcServer {
    addr: SocketAddr,
    state: Arc<State>,
    shutdown: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl RpcServer {
    /// Serves `blocks` (JSON block objects with full transactions, as a node
    /// returns them) on 127.0.0.1 and a free port. The head starts at the
    /// highest block number given.
    pub async fn start(blocks: Vec<Value>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            blocks: RwLock::new(HashMap::new()),
            by_hash: RwLock::new(HashMap::new()),
            receipt_by_tx: RwLock::new(None),
            block_receipts: AtomicBool::new(true),
            logs_limit: Mutex::new(None),
            refuse_beyond_head: AtomicBool::new(false),
            range_fault: Mutex::new(None),
            wrong: Mutex::new(None),
            get_logs_calls: AtomicU64::new(0),
            get_logs_refused: AtomicU64::new(0),
            head: AtomicU64::new(0),
            chain_id: AtomicU64::new(1),
            faults: Mutex::new(VecDeque::new()),
            batch_cap: AtomicUsize::new(0),
            latency_us: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            calls: AtomicU64::new(0),
            rejected_batches: AtomicU64::new(0),
            in_flight: AtomicUsize::new(0),
            max_in_flight: AtomicUsize::new(0),
            gzip: AtomicBool::new(false),
            asked_gzip: AtomicU64::new(0),
            wire_bytes: AtomicU64::new(0),
            plain_bytes: AtomicU64::new(0),
            gzip_nanos: AtomicU64::new(0),
        });
        let (shutdown, shutdown_rx) = watch::channel(false);
        let server = Self {
            addr,
            accept: tokio::spawn(accept_loop(listener, Arc::clone(&state), shutdown_rx)),
            state,
            shutdown,
        };
        let mut head = 0;
        for b in blocks {
            head = head.max(server.insert_block(b));
        }
        server.set_head(head);
        Ok(server)
    }

    /// `http://127.0.0.1:PORT/`
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Adds or replaces (e.g. to script a fork) a block; returns its number.
    /// Panics on a block without a hex `number`.
    pub fn insert_block(&self, block: Value) -> u64 {
        let n = block
            .get("number")
            .and_then(quantity)
            .expect("block with a hex number");
        let full = block.to_string();
        let receipts = plain_receipts(&block).to_string();
        if let Some(h) = block.get("hash").and_then(Value::as_str) {
            self.state.by_hash.write().unwrap().insert(h.to_owned(), n);
        }
        let mut header = block;
        if let Some(Value::Array(txs)) = header.get_mut("transactions") {
            for tx in txs.iter_mut() {
                if let Some(hash) = tx.get("hash").cloned() {
                    *tx = hash;
                }
            }
        }
        let header = header.to_string();
        *self.state.receipt_by_tx.write().unwrap() = None;
        self.state.blocks.write().unwrap().insert(
            n,
            Stored {
                full,
                header,
                receipts,
            },
        );
        n
    }

    /// Serves `receipts` (a JSON list, as `eth_getBlockReceipts` returns it)
    /// for block `n` instead of the plain ones.
    pub fn insert_receipts(&self, n: u64, receipts: &Value) {
        let mut blocks = self.state.blocks.write().unwrap();
        let stored = blocks.get_mut(&n).expect("insert the block first");
        stored.receipts = receipts.to_string();
        *self.state.receipt_by_tx.write().unwrap() = None;
    }

    /// Like [`insert_receipts`](Self::insert_receipts), from JSON text
    /// (benchmarks build millions of logs; a `Value` tree would dominate).
    pub fn insert_receipts_text(&self, n: u64, receipts: String) {
        let mut blocks = self.state.blocks.write().unwrap();
        let stored = blocks.get_mut(&n).expect("insert the block first");
        stored.receipts = receipts;
        *self.state.receipt_by_tx.write().unwrap() = None;
    }

    /// Whether the server knows `eth_getBlockReceipts` (default yes); without
    /// it, only `eth_getTransactionReceipt` answers.
    pub fn set_block_receipts(&self, on: bool) {
        self.state.block_receipts.store(on, Relaxed);
    }

    /// Caps `eth_getLogs` like a provider (`None`: no cap).
    pub fn set_logs_limit(&self, limit: Option<LogsLimit>) {
        *self.state.logs_limit.lock().unwrap() = limit;
    }

    /// `eth_getLogs` ranges past the head are refused, as some providers
    /// do, instead of clamped.
    pub fn set_refuse_beyond_head(&self, on: bool) {
        self.state.refuse_beyond_head.store(on, Relaxed);
    }

    /// The next `times` answers for block `n` (its full block, or its
    /// `eth_getBlockReceipts`, as `what` says) are wrong in the way `what`
    /// says.
    pub fn set_wrong(&self, n: u64, times: usize, what: Wrong) {
        *self.state.wrong.lock().unwrap() = Some((n, times, what));
    }

    /// `eth_getLogs` over ranges that include block `n` gets it wrong.
    pub fn set_range_fault(&self, fault: Option<(u64, RangeFault)>) {
        *self.state.range_fault.lock().unwrap() = fault;
    }

    /// `eth_getLogs` calls answered with logs, and refused by the cap.
    pub fn get_logs_calls(&self) -> (u64, u64) {
        (
            self.state.get_logs_calls.load(Relaxed),
            self.state.get_logs_refused.load(Relaxed),
        )
    }

    /// Blocks above `n` are answered with `null`, as a node does for blocks
    /// it has not produced; `eth_blockNumber` returns `n`.
    pub fn set_head(&self, n: u64) {
        self.state.head.store(n, Relaxed);
    }

    pub fn head(&self) -> u64 {
        self.state.head.load(Relaxed)
    }

    pub fn set_chain_id(&self, id: u64) {
        self.state.chain_id.store(id, Relaxed);
    }

    /// The next `n` HTTP requests get `fault` (after any already queued).
    pub fn fail_next(&self, n: usize, fault: Fault) {
        let mut q = self.state.faults.lock().unwrap();
        q.extend(std::iter::repeat_n(fault, n));
    }

    /// Faults not yet consumed.
    pub fn pending_faults(&self) -> usize {
        self.state.faults.lock().unwrap().len()
    }

    /// Batches of more than `cap` calls get a JSON-RPC error object
    /// ("batch too large") instead of an array; `None` lifts the cap.
    pub fn set_batch_cap(&self, cap: Option<usize>) {
        self.state.batch_cap.store(cap.unwrap_or(0), Relaxed);
    }

    /// Delays each answer by a pseudo-random time in [0, max], so batches
    /// sent together complete out of order.
    pub fn set_latency(&self, max: Duration) {
        let us = u64::try_from(max.as_micros()).unwrap_or(u64::MAX);
        self.state.latency_us.store(us, Relaxed);
    }

    /// HTTP requests received (including faulted ones).
    pub fn requests(&self) -> u64 {
        self.state.requests.load(Relaxed)
    }

    /// JSON-RPC calls answered normally (a batch of 10 counts 10).
    pub fn calls(&self) -> u64 {
        self.state.calls.load(Relaxed)
    }

    /// Batches refused for exceeding the cap.
    pub fn rejected_batches(&self) -> u64 {
        self.state.rejected_batches.load(Relaxed)
    }

    /// Most requests ever being handled at the same time.
    pub fn max_concurrent(&self) -> usize {
        self.state.max_in_flight.load(Relaxed)
    }

    /// Whether answers to requests that accept gzip are sent compressed
    /// (`Content-Encoding: gzip`), as providers do; off by default.
    pub fn set_gzip(&self, on: bool) {
        self.state.gzip.store(on, Relaxed);
    }

    /// Traffic so far: (requests that asked for gzip, answer body bytes as
    /// sent, the same bodies before compression, nanoseconds compressing).
    pub fn wire(&self) -> (u64, u64, u64, u64) {
        let s = &self.state;
        (
            s.asked_gzip.load(Relaxed),
            s.wire_bytes.load(Relaxed),
            s.plain_bytes.load(Relaxed),
            s.gzip_nanos.load(Relaxed),
        )
    }
}

impl Drop for RpcServer {
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
        self.accept.abort();
    }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, shutdown: watch::Receiver<bool>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let state = Arc::clone(&state);
        let mut shutdown = shutdown.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = serve_connection(stream, state) => {}
                _ = shutdown.changed() => {}
            }
        });
    }
}

/// One keep-alive connection: read a request, answer it, repeat until the
/// peer closes, asks to close, or a fault closes it.
async fn serve_connection(mut stream: TcpStream, state: Arc<State>) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(8192);
    loop {
        let Some((head_len, body_len, close)) = read_request(&mut stream, &mut buf).await? else {
            return Ok(());
        };
        let body = buf[head_len..head_len + body_len].to_vec();
        let accepts_gzip = accepts_gzip(&buf[..head_len]);
        buf.drain(..head_len + body_len);
        if accepts_gzip {
            state.asked_gzip.fetch_add(1, Relaxed);
        }

        let n = state.requests.fetch_add(1, Relaxed);
        let now = state.in_flight.fetch_add(1, Relaxed) + 1;
        state.max_in_flight.fetch_max(now, Relaxed);
        let answer = answer_request(&state, n, &body).await;
        state.in_flight.fetch_sub(1, Relaxed);

        let Some((status, mut payload)) = answer else {
            return Ok(()); // injected close
        };
        state.plain_bytes.fetch_add(payload.len() as u64, Relaxed);
        let compress = accepts_gzip && state.gzip.load(Relaxed);
        if compress {
            let started = std::time::Instant::now();
            payload = gzip(&payload);
            let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            state.gzip_nanos.fetch_add(nanos, Relaxed);
        }
        state.wire_bytes.fetch_add(payload.len() as u64, Relaxed);
        let head = format!(
            "HTTP/1.1 {status} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{}{}\r\n",
            reason(status),
            payload.len(),
            if compress {
                "Content-Encoding: gzip\r\n"
            } else {
                ""
            },
            if close { "Connection: close\r\n" } else { "" },
        );
        // Two writes, no concatenation: a batch of full blocks is megabytes,
        // and TCP_NODELAY (set at accept) keeps the split from stalling.
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&payload).await?;
        if close {
            return Ok(());
        }
    }
}

/// Whether a request's head has an `Accept-Encoding` naming gzip.
fn accepts_gzip(head: &[u8]) -> bool {
    String::from_utf8_lossy(head).split("\r\n").any(|line| {
        line.split_once(':').is_some_and(|(name, value)| {
            name.trim().eq_ignore_ascii_case("accept-encoding")
                && value.split(',').any(|v| v.trim().starts_with("gzip"))
        })
    })
}

/// `bytes` gzip-compressed at the default level, as web servers do.
pub fn gzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Write as _;
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).expect("writing to memory");
    e.finish().expect("writing to memory")
}

/// Reads until `buf` holds one whole request; returns (header length, body
/// length, close requested), or `None` at a clean end of stream.
pub async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
) -> std::io::Result<Option<(usize, usize, bool)>> {
    let bad = |m: &str| std::io::Error::new(std::io::ErrorKind::InvalidData, m.to_owned());
    let mut chunk = [0u8; 8192];
    loop {
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..pos]).map_err(|_| bad("non-utf8 header"))?;
            let mut body_len = 0;
            let mut close = false;
            for line in head.split("\r\n").skip(1) {
                let Some((name, value)) = line.split_once(':') else {
                    continue;
                };
                let (name, value) = (name.trim(), value.trim());
                if name.eq_ignore_ascii_case("content-length") {
                    body_len = value.parse().map_err(|_| bad("bad content-length"))?;
                } else if name.eq_ignore_ascii_case("connection") {
                    close = value.eq_ignore_ascii_case("close");
                } else if name.eq_ignore_ascii_case("transfer-encoding") {
                    return Err(bad("chunked bodies are not supported"));
                }
            }
            if body_len > MAX_REQUEST_BYTES {
                return Err(bad("request too large"));
            }
            let head_len = pos + 4;
            while buf.len() < head_len + body_len {
                let n = stream.read(&mut chunk).await?;
                if n == 0 {
                    return Err(bad("eof inside body"));
                }
                buf.extend_from_slice(&chunk[..n]);
            }
            return Ok(Some((head_len, body_len, close)));
        }
        if buf.len() > MAX_REQUEST_BYTES {
            return Err(bad("header too large"));
        }
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(bad("eof inside header"))
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Status and body for one HTTP request, or `None` to drop the connection.
/// The body is assembled in one buffer: each stored block is copied once.
async fn answer_request(state: &State, n: u64, body: &[u8]) -> Option<(u16, Vec<u8>)> {
    let latency = state.latency_us.load(Relaxed);
    if latency > 0 {
        tokio::time::sleep(Duration::from_micros(mix(n) % (latency + 1))).await;
    }
    let fault = state.faults.lock().unwrap().pop_front();
    let mut forced = None;
    match fault {
        None => {}
        Some(Fault::Status(code)) => return Some((code, br#"{"error":"injected"}"#.to_vec())),
        Some(Fault::Close) => return None,
        Some(Fault::Stall(d)) => tokio::time::sleep(d).await,
        Some(Fault::RpcError { code, message }) => forced = Some((code, message)),
    }
    let forced = forced.as_ref().map(|(c, m)| (*c, m.as_str()));
    let request: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => return Some((200, error(&Value::Null, -32700, "parse error").into_bytes())),
    };
    if let Some(Err(LogsRefusal::Http(code))) = (request.get("method")
        == Some(&json!("eth_getLogs")))
    .then(|| get_logs(state, request.get("params")))
    {
        return Some((code, br#"{"error":"payload too large"}"#.to_vec()));
    }
    let mut payload = Vec::new();
    match &request {
        Value::Array(calls) if calls.is_empty() => {
            payload.extend_from_slice(error(&Value::Null, -32600, "empty batch").as_bytes())
        }
        Value::Array(calls) => {
            let cap = state.batch_cap.load(Relaxed);
            if cap > 0 && calls.len() > cap {
                state.rejected_batches.fetch_add(1, Relaxed);
                let msg = format!(
                    "batch too large: {} calls exceeds max batch size {cap}",
                    calls.len()
                );
                payload.extend_from_slice(error(&Value::Null, -32600, &msg).as_bytes());
            } else {
                payload.push(b'[');
                for (i, c) in calls.iter().enumerate() {
                    if i > 0 {
                        payload.push(b',');
                    }
                    answer_call(state, c, forced, &mut payload);
                }
                payload.push(b']');
            }
        }
        call => answer_call(state, call, forced, &mut payload),
    }
    Some((200, payload))
}

/// Appends the response to one call to `out`.
fn answer_call(state: &State, call: &Value, forced: Option<(i64, &str)>, out: &mut Vec<u8>) {
    let id = call.get("id").unwrap_or(&Value::Null);
    if let Some((code, message)) = forced {
        return out.extend_from_slice(error(id, code, message).as_bytes());
    }
    let params = call.get("params").and_then(Value::as_array);
    let head = state.head.load(Relaxed);
    let result = |out: &mut Vec<u8>, text: &[u8]| {
        state.calls.fetch_add(1, Relaxed);
        out.extend_from_slice(format!(r#"{{"jsonrpc":"2.0","id":{id},"result":"#).as_bytes());
        out.extend_from_slice(text);
        out.push(b'}');
    };
    match call.get("method").and_then(Value::as_str) {
        Some("eth_blockNumber") => result(out, format!("\"0x{head:x}\"").as_bytes()),
        Some("eth_chainId") => result(
            out,
            format!("\"0x{:x}\"", state.chain_id.load(Relaxed)).as_bytes(),
        ),
        Some("net_version") => result(
            out,
            format!("\"{}\"", state.chain_id.load(Relaxed)).as_bytes(),
        ),
        Some("eth_getBlockByHash") => {
            let hash = params.and_then(|p| p.first()).and_then(Value::as_str);
            let full = params.and_then(|p| p.get(1)).and_then(Value::as_bool);
            let n = hash.and_then(|h| state.by_hash.read().unwrap().get(h).copied());
            let blocks = state.blocks.read().unwrap();
            match (n.filter(|&n| n <= head).and_then(|n| blocks.get(&n)), full) {
                (Some(b), Some(true)) => result(out, b.full.as_bytes()),
                (Some(b), Some(false)) => result(out, b.header.as_bytes()),
                (None, Some(_)) => result(out, b"null"),
                (_, None) => out.extend_from_slice(error(id, -32602, "invalid params").as_bytes()),
            }
        }
        Some("eth_getBlockByNumber") => {
            let tag = params.and_then(|p| p.first());
            let full = params.and_then(|p| p.get(1)).and_then(Value::as_bool);
            let n = match tag.and_then(Value::as_str) {
                Some("latest" | "pending" | "safe" | "finalized") => Some(head),
                Some("earliest") => Some(0),
                _ => tag.and_then(quantity),
            };
            let (Some(n), Some(full)) = (n, full) else {
                return out.extend_from_slice(error(id, -32602, "invalid params").as_bytes());
            };
            let blocks = state.blocks.read().unwrap();
            match blocks.get(&n).filter(|_| n <= head) {
                Some(b) if full && serve_wrong(state, n, Wrong::MalformedTransaction) => result(
                    out,
                    b.full.replacen(r#""r":"0x"#, r#""r":"0xzz"#, 1).as_bytes(),
                ),
                Some(b) if full => result(out, b.full.as_bytes()),
                Some(b) => result(out, b.header.as_bytes()),
                None => result(out, b"null"),
            }
        }
        Some("eth_getBlockReceipts") if state.block_receipts.load(Relaxed) => {
            // A block hash, or (as geth and reth also take) a number or tag.
            let tag = params.and_then(|p| p.first());
            let hash = tag.and_then(Value::as_str).filter(|h| h.len() == 66);
            let n = match (hash, tag.and_then(Value::as_str)) {
                (Some(h), _) => state.by_hash.read().unwrap().get(h).copied(),
                (None, Some("latest" | "pending" | "safe" | "finalized")) => Some(head),
                (None, Some("earliest")) => Some(0),
                (None, _) => tag.and_then(quantity),
            };
            let blocks = state.blocks.read().unwrap();
            let wrong = |what| n.is_some_and(|n| serve_wrong(state, n, what));
            // Another block's receipts are scripted for requests by hash.
            let (garbled, other_block) = (
                wrong(Wrong::MalformedReceipt),
                hash.is_some() && wrong(Wrong::ReceiptsOfAnotherBlock),
            );
            match n.filter(|&n| n <= head).and_then(|n| blocks.get(&n)) {
                Some(b) if garbled => result(
                    out,
                    b.receipts
                        .replacen(r#""gasUsed":"0x"#, r#""gasUsed":"0xzz"#, 1)
                        .as_bytes(),
                ),
                Some(b) if other_block => {
                    let hash = hash.unwrap_or_default();
                    let other = format!("0x{}", "ee".repeat(32));
                    result(out, b.receipts.replace(hash, &other).as_bytes())
                }
                Some(b) => result(out, b.receipts.as_bytes()),
                None => result(out, b"null"),
            }
        }
        Some("eth_getTransactionReceipt") => {
            let hash = params.and_then(|p| p.first()).and_then(Value::as_str);
            match hash.and_then(|h| receipt_of(state, h)) {
                Some(r) => result(out, r.as_bytes()),
                None => result(out, b"null"),
            }
        }
        Some("eth_getLogs") => match get_logs(state, call.get("params")) {
            Ok(logs) => result(out, Value::Array(logs).to_string().as_bytes()),
            Err(LogsRefusal::Rpc(code, message)) => {
                out.extend_from_slice(error(id, code, &message).as_bytes())
            }
            Err(LogsRefusal::Http(_)) => {
                out.extend_from_slice(error(id, -32000, "payload too large").as_bytes())
            }
        },
        _ => out.extend_from_slice(error(id, -32601, "method not found").as_bytes()),
    }
}

/// The receipt of transaction `hash` in a block at or below the head.
fn receipt_of(state: &State, hash: &str) -> Option<String> {
    let head = state.head.load(Relaxed);
    let blocks = state.blocks.read().unwrap();
    if state.receipt_by_tx.read().unwrap().is_none() {
        let mut index = HashMap::<String, (u64, String)>::new();
        let mut numbers: Vec<&u64> = blocks.keys().collect();
        numbers.sort_unstable();
        for n in numbers.into_iter().rev() {
            let list: Vec<Value> = serde_json::from_str(&blocks[n].receipts).unwrap_or_default();
            for r in list {
                if let Some(h) = r["transactionHash"].as_str() {
                    index.insert(h.to_owned(), (*n, r.to_string()));
                }
            }
        }
        *state.receipt_by_tx.write().unwrap() = Some(index);
    }
    let index = state.receipt_by_tx.read().unwrap();
    let (n, r) = index.as_ref()?.get(hash)?;
    (*n <= head).then(|| r.clone())
}

enum LogsRefusal {
    Rpc(i64, String),
    Http(u16),
}

/// The logs an `eth_getLogs` filter selects from the served receipts, or
/// the cap's refusal.
fn get_logs(state: &State, params: Option<&Value>) -> Result<Vec<Value>, LogsRefusal> {
    let invalid = |m: &str| LogsRefusal::Rpc(-32602, m.to_owned());
    let filter = params
        .and_then(|p| p.get(0))
        .ok_or_else(|| invalid("missing filter"))?;
    let head = state.head.load(Relaxed);
    let (from, to) = match filter.get("blockHash").and_then(Value::as_str) {
        Some(h) => {
            let n = state.by_hash.read().unwrap().get(h).copied();
            match n.filter(|&n| n <= head) {
                Some(n) => (n, n),
                None => return Err(LogsRefusal::Rpc(-32000, "unknown block".into())),
            }
        }
        None => {
            let bound = |k: &str| filter.get(k).and_then(quantity);
            let (Some(from), Some(to)) = (bound("fromBlock"), bound("toBlock")) else {
                return Err(invalid("fromBlock and toBlock must be quantities"));
            };
            if from > to {
                return Err(invalid("invalid block range params: fromBlock > toBlock"));
            }
            if to > head && state.refuse_beyond_head.load(Relaxed) {
                return Err(LogsRefusal::Rpc(
                    -32000,
                    format!("toBlock {to:#x} is beyond the current head block {head:#x}"),
                ));
            }
            (from, to.min(head))
        }
    };
    let addresses: Vec<String> = match filter.get("address") {
        Some(Value::String(a)) => vec![a.to_lowercase()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_lowercase)
            .collect(),
        _ => Vec::new(),
    };
    let topics0: Vec<String> = match filter.get("topics").and_then(|t| t.get(0)) {
        Some(Value::String(t)) => vec![t.to_lowercase()],
        Some(Value::Array(t)) => t
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_lowercase)
            .collect(),
        _ => Vec::new(),
    };
    let limit = *state.logs_limit.lock().unwrap();
    let by_hash = filter.get("blockHash").is_some();
    let range = to.saturating_sub(from) + 1;
    let refuse = |r: LogsRefusal| {
        state.get_logs_refused.fetch_add(1, Relaxed);
        Err(r)
    };
    if !by_hash {
        use LogsLimit::*;
        let m = |s: String| LogsRefusal::Rpc(-32000, s);
        let over = |cap: u64| range > cap;
        match limit {
            Some(RethRange(c)) if over(c) => {
                return refuse(m(format!("query exceeds max block range {c}")));
            }
            Some(QuickNodeRange(c)) if over(c) => {
                return refuse(LogsRefusal::Rpc(
                    -32614,
                    format!("eth_getLogs is limited to a {} range", thousands(c)),
                ));
            }
            Some(Http413Range(c)) if over(c) => return refuse(LogsRefusal::Http(413)),
            Some(AnkrRange(c)) if over(c) => {
                return refuse(LogsRefusal::Rpc(-32600, "block range is too wide".into()));
            }
            Some(BlockPiRange(c)) if over(c) => {
                return refuse(m(format!("eth_getLogs is limited to {c} block range")));
            }
            Some(MaximumRange(c)) if over(c) => {
                return refuse(m(format!("exceed maximum block range: {c}")));
            }
            Some(TooLargeRange(c)) if over(c) => {
                return refuse(m("Block range is too large".into()));
            }
            _ => {}
        }
    }
    let blocks = state.blocks.read().unwrap();
    let mut out = Vec::new();
    // (block, logs so far): where a result cap would have cut.
    let mut fits_to = None;
    for n in from..=to {
        let Some(b) = blocks.get(&n) else { continue };
        let receipts: Value = serde_json::from_str(&b.receipts).unwrap_or(Value::Null);
        for r in receipts.as_array().into_iter().flatten() {
            for l in r["logs"].as_array().into_iter().flatten() {
                let addr = l["address"].as_str().unwrap_or_default().to_lowercase();
                let t0 = l["topics"][0].as_str().map(str::to_lowercase);
                let keep = (addresses.is_empty() || addresses.contains(&addr))
                    && (topics0.is_empty() || t0.is_some_and(|t| topics0.contains(&t)));
                let fault = *state.range_fault.lock().unwrap();
                match fault {
                    Some((f, RangeFault::Omit)) if keep && f == n && !by_hash => {}
                    Some((f, RangeFault::OtherFork)) if keep && f == n && !by_hash => {
                        let mut l = l.clone();
                        l["blockHash"] = json!(format!("0x{}", "ee".repeat(32)));
                        out.push(l);
                    }
                    _ if keep => out.push(l.clone()),
                    _ => {}
                }
            }
        }
        let cap = match limit {
            Some(LogsLimit::InfuraResults(c) | LogsLimit::AlchemyResults(c))
            | Some(LogsLimit::RethResults(c) | LogsLimit::ResponseSize(c)) => c,
            _ => usize::MAX,
        };
        if out.len() <= cap {
            fits_to = Some(n);
        }
    }
    if !by_hash {
        use LogsLimit::*;
        let fit = fits_to.unwrap_or(from).max(from);
        match limit {
            Some(InfuraResults(c)) if out.len() > c => {
                return refuse(LogsRefusal::Rpc(
                    -32005,
                    format!(
                        "query returned more than {c} results. Try with this block range [{from:#x}, {fit:#x}]."
                    ),
                ));
            }
            Some(AlchemyResults(c)) if out.len() > c => {
                return refuse(LogsRefusal::Rpc(
                    -32602,
                    format!(
                        "Log response size exceeded. You can make eth_getLogs requests with up to a 2K block range and no limit on the response size, or you can request any block range with a cap of {c} logs in the response. Based on your parameters, this block range should work: [{from:#x}, {fit:#x}]"
                    ),
                ));
            }
            Some(RethResults(c)) if out.len() > c => {
                return refuse(LogsRefusal::Rpc(
                    -32602,
                    format!("query exceeds max results {c}, retry with the range {from}-{fit}"),
                ));
            }
            Some(ResponseSize(c)) if out.len() > c => {
                return refuse(LogsRefusal::Rpc(
                    -32000,
                    "response size should not greater than 10000000 bytes".into(),
                ));
            }
            _ => {}
        }
    }
    state.get_logs_calls.fetch_add(1, Relaxed);
    Ok(out)
}

/// 10000 as "10,000".
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// How [`RpcServer::set_wrong`] serves a block wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wrong {
    /// Its first transaction's `r` is not hex: the block does not decode.
    MalformedTransaction,
    /// Its first receipt's `gasUsed` is not hex.
    MalformedReceipt,
    /// Its receipts name another block hash, as from a node on another
    /// fork.
    ReceiptsOfAnotherBlock,
}

/// Whether this answer for block `n` is to be wrong as `what` (counted
/// down).
fn serve_wrong(state: &State, n: u64, what: Wrong) -> bool {
    let mut m = state.wrong.lock().unwrap();
    match *m {
        Some((b, left, w)) if b == n && w == what && left > 0 => {
            *m = Some((b, left - 1, w));
            true
        }
        _ => false,
    }
}

/// One receipt per transaction of `block` that names it: status 1, 21,000
/// gas each, no logs.
pub fn plain_receipts(block: &Value) -> Value {
    let txs = block["transactions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let receipts: Vec<Value> = txs
        .iter()
        .enumerate()
        .map(|(i, tx)| {
            json!({
                "blockHash": block["hash"],
                "blockNumber": block["number"],
                "transactionHash": tx["hash"],
                "transactionIndex": format!("{i:#x}"),
                "status": "0x1",
                "gasUsed": "0x5208",
                "cumulativeGasUsed": format!("{:#x}", 21000 * (i + 1)),
                "effectiveGasPrice": tx.get("gasPrice").cloned().unwrap_or(json!("0x1")),
                "contractAddress": null,
                "logs": [],
            })
        })
        .collect();
    Value::Array(receipts)
}

fn error(id: &Value, code: i64, message: &str) -> String {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } }).to_string()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        413 => "Payload Too Large",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        _ => "Injected",
    }
}

fn quantity(v: &Value) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok()
}

/// splitmix64: cheap, deterministic spread for latencies.
fn mix(n: u64) -> u64 {
    let mut z = n.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A plausible block `n` with `txs` legacy-looking transactions (fields are
/// well-formed hex but signatures are not valid). Hashes are derived from
/// `n` so that parent links hold across a synthetic chain.
pub fn synthetic_block(n: u64, txs: usize) -> Value {
    let h = |tag: u64, n: u64| {
        format!(
            "0x{:016x}{:016x}{:016x}{:016x}",
            tag,
            n,
            mix(n),
            mix(n ^ tag)
        )
    };
    let transactions: Vec<Value> = (0..txs as u64)
        .map(|i| {
            json!({
                "hash": h(2, (n << 16) | i),
                "nonce": format!("0x{i:x}"),
                "blockHash": h(1, n),
                "blockNumber": format!("0x{n:x}"),
                "transactionIndex": format!("0x{i:x}"),
                "from": format!("0x{:040x}", mix(i)),
                "to": format!("0x{:040x}", mix(i + 1)),
                "value": "0x0",
                "gas": "0x5208",
                "gasPrice": "0x3b9aca00",
                "input": "0x",
                "type": "0x0",
                "v": "0x25",
                "r": h(3, i),
                "s": h(4, i),
            })
        })
        .collect();
    json!({
        "number": format!("0x{n:x}"),
        "hash": h(1, n),
        "parentHash": if n == 0 { format!("0x{}", "0".repeat(64)) } else { h(1, n - 1) },
        "timestamp": format!("0x{:x}", 1_700_000_000 + n * 12),
        "transactions": transactions,
    })
}
