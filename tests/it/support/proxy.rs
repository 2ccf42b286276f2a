//! Network middlemen for tests: a TCP proxy that slows every request (so
//! an indexer is still mid-range when a test stops it), and a JSON-RPC
//! proxy that dies, lags, rate-limits or lies like a provider ([`lies`]:
//! a seeded liar, as a load balancer with a bad replica). They listen on
//! 127.0.0.1 only and forward only to the test's own upstream.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

use super::rpc_server::read_request;

/// A TCP proxy on 127.0.0.1 to `upstream` (http://host:port) that holds
/// every chunk the client sends for `delay`: a slow node. Returns its URL;
/// it lives as long as the test's runtime.
pub async fn slow_proxy(upstream: &str, delay: Duration) -> String {
    let upstream = upstream.trim_start_matches("http://").to_string();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let up = async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    while let Ok(n) = cr.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        tokio::time::sleep(delay).await;
                        if sw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = sw.shutdown().await;
                };
                let down = async move {
                    let _ = tokio::io::copy(&mut sr, &mut cw).await;
                    let _ = cw.shutdown().await;
                };
                tokio::join!(up, down);
            });
        }
    });
    url
}

/// A JSON-RPC-aware HTTP proxy on 127.0.0.1 in front of a real node, that
/// misbehaves the way providers do: it can die for good after some
/// requests, lag a number of blocks behind its upstream (its
/// `eth_blockNumber` says less and blocks above that are `null`), or
/// rate-limit with HTTP 429 and `Retry-After`. It records when each
/// request arrived, so a test can check that none came before a
/// `Retry-After` it was given.
pub struct FaultProxy {
    url: String,
    state: Arc<ProxyState>,
}

struct ProxyState {
    upstream: String,
    client: reqwest::Client,
    /// Block calls forwarded before it dies (u64::MAX: never).
    die_after_blocks: AtomicU64,
    dead: AtomicBool,
    died: Notify,
    lag: AtomicU64,
    /// Blocks it serves with a changed timestamp, so they do not verify.
    corrupt: AtomicBool,
    corrupted: AtomicU64,
    throttle: Mutex<Option<Throttle>>,
    block_calls: AtomicU64,
    /// Blocks or receipts it answered `null` because it lags.
    nulled: AtomicU64,
    /// A change made to answers (see [`FaultProxy::set_edit`]).
    edit: Mutex<Option<Edit>>,
    edited: AtomicU64,
}

/// Changes one answer's `result`, given the method asked; true when it
/// changed something.
pub type Edit = Arc<dyn Fn(&str, &mut Value) -> bool + Send + Sync>;

struct Throttle {
    /// One request admitted per `interval`.
    interval: Duration,
    next_allowed: Instant,
    /// (sent at, Retry-After deadline) of every 429 answered.
    promised: Vec<(Instant, Instant)>,
    /// Arrivals before a deadline, more than the slack after its 429 (a
    /// request already in flight when the 429 left does not count).
    early: Vec<Duration>,
    admitted: u64,
    refused: u64,
}

/// Requests that left the client before it read a 429 may arrive this
/// long after it.
const IN_FLIGHT_SLACK: Duration = Duration::from_millis(50);

impl FaultProxy {
    pub async fn start(upstream: &str) -> FaultProxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(ProxyState {
            upstream: upstream.to_owned(),
            client: reqwest::Client::new(),
            die_after_blocks: AtomicU64::new(u64::MAX),
            dead: AtomicBool::new(false),
            died: Notify::new(),
            lag: AtomicU64::new(0),
            corrupt: AtomicBool::new(false),
            corrupted: AtomicU64::new(0),
            throttle: Mutex::new(None),
            block_calls: AtomicU64::new(0),
            nulled: AtomicU64::new(0),
            edit: Mutex::new(None),
            edited: AtomicU64::new(0),
        });
        let s = Arc::clone(&state);
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    accepted = listener.accept() => {
                        let Ok((stream, _)) = accepted else { continue };
                        let _ = stream.set_nodelay(true);
                        tokio::spawn(proxy_connection(stream, Arc::clone(&s)));
                    }
                    // Dead for good: the listener closes, so connections
                    // are refused from now on.
                    _ = s.died.notified() => return,
                }
            }
        });
        FaultProxy { url, state }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Dies for good once it has forwarded `n` more `eth_getBlockByNumber`
    /// calls: mid-range, whatever else the client asked first.
    pub fn die_after_blocks(&self, n: u64) {
        let seen = self.state.block_calls.load(Relaxed);
        self.state.die_after_blocks.store(seen + n, Relaxed);
    }

    /// Dies for good now.
    pub fn kill(&self) {
        self.state.die();
    }

    pub fn is_dead(&self) -> bool {
        self.state.dead.load(Relaxed)
    }

    /// Serves every block with its timestamp changed: a provider whose
    /// blocks do not verify.
    pub fn set_corrupt(&self, on: bool) {
        self.state.corrupt.store(on, Relaxed);
    }

    /// Blocks it served changed.
    pub fn corrupted(&self) -> u64 {
        self.state.corrupted.load(Relaxed)
    }

    /// Pretends to be `blocks` behind the upstream's head.
    pub fn set_lag(&self, blocks: u64) {
        self.state.lag.store(blocks, Relaxed);
    }

    /// Admits one request per `interval`; answers every other one with 429
    /// and a `Retry-After` (whole seconds, rounded up) for when the next
    /// is admitted.
    pub fn set_throttle(&self, interval: Duration) {
        *self.state.throttle.lock().unwrap() = Some(Throttle {
            interval,
            next_allowed: Instant::now(),
            promised: Vec::new(),
            early: Vec::new(),
            admitted: 0,
            refused: 0,
        });
    }

    /// (admitted, refused with 429, arrivals before a Retry-After).
    pub fn throttle_counts(&self) -> (u64, u64, Vec<Duration>) {
        let t = self.state.throttle.lock().unwrap();
        let t = t.as_ref().expect("throttle set");
        (t.admitted, t.refused, t.early.clone())
    }

    /// `eth_getBlockByNumber` calls forwarded (in batches or alone).
    pub fn block_calls(&self) -> u64 {
        self.state.block_calls.load(Relaxed)
    }

    /// Blocks and receipt sets it answered `null` because it lags: asked
    /// for what its head says it has not got.
    pub fn nulled(&self) -> u64 {
        self.state.nulled.load(Relaxed)
    }

    /// From now on, every answer's `result` goes through `edit` (None:
    /// answers pass unchanged), like a provider that lies about some field.
    pub fn set_edit(&self, edit: Option<Edit>) {
        *self.state.edit.lock().unwrap() = edit;
    }

    /// Answers `edit` changed.
    pub fn edited(&self) -> u64 {
        self.state.edited.load(Relaxed)
    }
}

impl ProxyState {
    fn die(&self) {
        if !self.dead.swap(true, Relaxed) {
            self.died.notify_one();
        }
    }
}

async fn proxy_connection(mut stream: TcpStream, state: Arc<ProxyState>) {
    let mut buf = Vec::with_capacity(8192);
    loop {
        if state.dead.load(Relaxed) {
            return;
        }
        let Ok(Some((head_len, body_len, close))) = read_request(&mut stream, &mut buf).await
        else {
            return;
        };
        let body = buf[head_len..head_len + body_len].to_vec();
        buf.drain(..head_len + body_len);
        if state.dead.load(Relaxed)
            || state.block_calls.load(Relaxed) >= state.die_after_blocks.load(Relaxed)
        {
            state.die();
            return; // dropped without an answer
        }
        let (status, extra, payload) = match throttled(&state) {
            Some(secs) => (
                429,
                format!("Retry-After: {secs}\r\n"),
                br#"{"jsonrpc":"2.0","id":null,"error":{"code":429,"message":"Too Many Requests"}}"#
                    .to_vec(),
            ),
            None => match forward(&state, &body).await {
                Some(p) => (200, String::new(), p),
                None => (502, String::new(), b"bad gateway".to_vec()),
            },
        };
        let head = format!(
            "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n{extra}{}\r\n",
            payload.len(),
            if close { "Connection: close\r\n" } else { "" },
        );
        if stream.write_all(head.as_bytes()).await.is_err()
            || stream.write_all(&payload).await.is_err()
            || close
        {
            return;
        }
    }
}

/// `Some(Retry-After seconds)` when this request is refused.
fn throttled(state: &ProxyState) -> Option<u64> {
    let mut guard = state.throttle.lock().unwrap();
    let t = guard.as_mut()?;
    let now = Instant::now();
    for &(sent, deadline) in &t.promised {
        if now > sent + IN_FLIGHT_SLACK && now < deadline {
            t.early.push(deadline - now);
        }
    }
    if now >= t.next_allowed {
        t.next_allowed = now + t.interval;
        t.admitted += 1;
        return None;
    }
    let secs = (t.next_allowed - now).as_secs_f64().ceil().max(1.0) as u64;
    t.promised.push((now, now + Duration::from_secs(secs)));
    t.refused += 1;
    Some(secs)
}

/// Forwards `body` to the upstream and, when lagging, rewrites the answer:
/// a lower head, and `null` for blocks and receipts above it.
async fn forward(state: &ProxyState, body: &[u8]) -> Option<Vec<u8>> {
    let calls: Value = serde_json::from_slice(body).ok()?;
    let list: Vec<&Value> = match &calls {
        Value::Array(a) => a.iter().collect(),
        one => vec![one],
    };
    let blocks = list
        .iter()
        .filter(|c| c["method"] == "eth_getBlockByNumber")
        .count();
    state.block_calls.fetch_add(blocks as u64, Relaxed);
    let lag = state.lag.load(Relaxed);
    // The upstream head before forwarding: blocks up to it exist then.
    let visible = if lag > 0 {
        let head = post(
            state,
            &json!({"jsonrpc":"2.0","id":0,"method":"eth_blockNumber","params":[]}),
        )
        .await?;
        Some(quantity(&head["result"])?.saturating_sub(lag))
    } else {
        None
    };
    let mut answer: Value = serde_json::from_slice(&post_raw(state, body.to_vec()).await?).ok()?;
    if state.corrupt.load(Relaxed) {
        let mut change = |a: &mut Value| {
            if let Some(t) = quantity(&a["result"]["timestamp"]) {
                a["result"]["timestamp"] = json!(format!("0x{:x}", t + 1));
                state.corrupted.fetch_add(1, Relaxed);
            }
        };
        match &mut answer {
            Value::Array(a) => a.iter_mut().for_each(&mut change),
            one => change(one),
        }
    }
    let by_id: HashMap<String, &Value> = list.iter().map(|c| (c["id"].to_string(), *c)).collect();
    let edit = state.edit.lock().unwrap().clone();
    if let Some(edit) = edit {
        let mut change = |a: &mut Value| {
            let method = by_id
                .get(&a["id"].to_string())
                .and_then(|c| c["method"].as_str())
                .unwrap_or_default();
            if edit(method, &mut a["result"]) {
                state.edited.fetch_add(1, Relaxed);
            }
        };
        match &mut answer {
            Value::Array(a) => a.iter_mut().for_each(&mut change),
            one => change(one),
        }
    }
    let Some(visible) = visible else {
        return serde_json::to_vec(&answer).ok();
    };
    let rewrite = |a: &mut Value| {
        let Some(call) = by_id.get(&a["id"].to_string()) else {
            return;
        };
        match call["method"].as_str() {
            Some("eth_blockNumber") => a["result"] = json!(format!("0x{visible:x}")),
            Some("eth_getBlockByNumber" | "eth_getBlockReceipts") => {
                // By number ("latest" and such count as its head), or for
                // receipts asked by block hash, the number they carry.
                let number = match &call["params"][0] {
                    Value::String(p) if p.len() == 66 => {
                        quantity(&a["result"][0]["blockNumber"]).unwrap_or(0)
                    }
                    p => quantity(p).unwrap_or(u64::MAX),
                };
                if number > visible && !a["result"].is_null() {
                    a["result"] = Value::Null;
                    state.nulled.fetch_add(1, Relaxed);
                }
            }
            _ => {}
        }
    };
    match &mut answer {
        Value::Array(a) => a.iter_mut().for_each(rewrite),
        one => rewrite(one),
    }
    serde_json::to_vec(&answer).ok()
}

async fn post(state: &ProxyState, call: &Value) -> Option<Value> {
    serde_json::from_slice(&post_raw(state, call.to_string().into_bytes()).await?).ok()
}

async fn post_raw(state: &ProxyState, body: Vec<u8>) -> Option<Vec<u8>> {
    let res = state
        .client
        .post(&state.upstream)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .ok()?;
    Some(res.bytes().await.ok()?.to_vec())
}

fn quantity(v: &Value) -> Option<u64> {
    u64::from_str_radix(v.as_str()?.strip_prefix("0x")?, 16).ok()
}

/// A liar for [`FaultProxy::set_edit`]: a load-balanced provider with a
/// bad replica. Each full block (`eth_getBlockByNumber` with transactions)
/// and each receipt list (`eth_getBlockReceipts`) of a block `lie_about`
/// picks is changed with probability `percent`/100, drawn from `seed`: a
/// transaction's value or recipient, a transaction dropped, a transaction
/// hash replaced; a log's data, a receipt's cumulative gas or transaction
/// hash. Every reported block hash stays the node's. The new values are
/// random, so two lies about one block differ (a block loses a
/// transaction once at most); an answer with nothing to change (no
/// transactions, no receipts) is passed on as it is.
pub fn lies(
    seed: u64,
    percent: u64,
    lie_about: impl Fn(u64) -> bool + Send + Sync + 'static,
) -> Edit {
    struct Liar {
        rng: u64,
        /// Blocks that lost a transaction already (a count that differs
        /// reads the same whichever one is dropped).
        dropped: HashSet<u64>,
    }
    impl Liar {
        /// splitmix64.
        fn next(&mut self) -> u64 {
            self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.rng;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn bytes(&mut self, n: usize) -> String {
            let b: Vec<u8> = (0..n).map(|_| self.next() as u8).collect();
            format!("0x{}", hex::encode(b))
        }
    }
    let liar = Mutex::new(Liar {
        rng: seed,
        dropped: HashSet::new(),
    });
    Arc::new(move |method: &str, result: &mut Value| {
        let mut l = liar.lock().unwrap();
        match method {
            "eth_getBlockByNumber" => {
                let Some(n) = quantity(&result["number"]).filter(|&n| lie_about(n)) else {
                    return false;
                };
                let Some(txs) = result["transactions"].as_array_mut() else {
                    return false;
                };
                if txs.is_empty() || !txs[0].is_object() || l.below(100) as u64 >= percent {
                    return false;
                }
                let i = l.below(txs.len());
                match l.below(4) {
                    0 => txs[i]["value"] = json!(format!("0x{:x}", l.next() >> 1)),
                    1 => txs[i]["to"] = json!(l.bytes(20)),
                    2 if l.dropped.insert(n) => {
                        txs.remove(i);
                    }
                    _ => txs[i]["hash"] = json!(l.bytes(32)),
                }
                true
            }
            "eth_getBlockReceipts" => {
                let Some(receipts) = result.as_array_mut() else {
                    return false;
                };
                let n = receipts.first().and_then(|r| quantity(&r["blockNumber"]));
                if !n.is_some_and(&lie_about) || l.below(100) as u64 >= percent {
                    return false;
                }
                let i = l.below(receipts.len());
                let logs = receipts[i]["logs"].as_array().map_or(0, Vec::len);
                match l.below(3) {
                    0 if logs > 0 => {
                        let j = l.below(logs);
                        receipts[i]["logs"][j]["data"] = json!(l.bytes(32));
                    }
                    1 => {
                        receipts[i]["cumulativeGasUsed"] = json!(format!("0x{:x}", l.next() >> 8));
                    }
                    _ => receipts[i]["transactionHash"] = json!(l.bytes(32)),
                }
                true
            }
            _ => false,
        }
    })
}
