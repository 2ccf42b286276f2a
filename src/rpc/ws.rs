//! New-head notifications over WebSocket: `eth_subscribe newHeads` on a
//! `ws://` or `wss://` endpoint (TLS by rustls, with the same roots as the
//! HTTP client: the public web roots plus `rpc.tls_ca_file`), kept alive
//! for as long as the consumer listens.
//!
//! A background task owns the socket. When it drops (closed, reset, silent
//! for too long) or cannot be opened, the task waits a doubling backoff and
//! subscribes again; meanwhile the stream simply yields nothing and
//! `follow`, which polls the head anyway, carries on polling. The task
//! ends when the stream is dropped.
//!
//! It only wakes `follow`: it fetches no block, decides nothing about what
//! to index, and never logs the endpoint but through its [`Scrubber`].

use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::time::{Instant, sleep, timeout};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::{Connector, connect_async_tls_with_config};
use tracing::{debug, info, warn};

use super::TARGET;
use super::wire::quantity;
use crate::redact::Scrubber;
use crate::source::Heads;

/// A ping leaves after this long without a message from the node.
const PING_AFTER: Duration = Duration::from_secs(30);
/// The socket counts as dead after this long without any message (a pong
/// included): a half-open TCP connection otherwise goes unnoticed.
const DEAD_AFTER: Duration = Duration::from_secs(75);
/// Head numbers buffered for a consumer that is busy indexing; more are
/// dropped (the next poll reads the head anyway).
const BUFFERED: usize = 16;

/// How the subscription task connects and backs off.
#[derive(Clone)]
pub(crate) struct WsSettings {
    pub(crate) url: url::Url,
    pub(crate) tls: Arc<rustls::ClientConfig>,
    /// Limit of the connect and of the subscribe answer.
    pub(crate) timeout: Duration,
    pub(crate) backoff_initial: Duration,
    pub(crate) backoff_max: Duration,
}

/// Block numbers of new heads from `settings.url`, for as long as the
/// stream lives; reconnects by itself (see the module comment).
pub(crate) fn new_heads(settings: WsSettings) -> Heads {
    let (tx, mut rx) = mpsc::channel(BUFFERED);
    tokio::spawn(keep_subscribed(settings, tx));
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx)).boxed()
}

/// Why one session with the socket ended.
enum End {
    /// The consumer is gone: stop for good.
    Unwanted,
    /// The socket failed or closed; `subscribed` says whether it got as
    /// far as a subscription (then the backoff starts over).
    Dropped { cause: String, subscribed: bool },
}

async fn keep_subscribed(s: WsSettings, tx: mpsc::Sender<u64>) {
    let scrub = Scrubber::new(s.url.as_str());
    let endpoint = scrub.endpoint().to_owned();
    let mut delay = s.backoff_initial;
    let mut failures = 0u64;
    loop {
        let end = tokio::select! {
            end = session(&s, &scrub, &tx) => end,
            () = tx.closed() => End::Unwanted,
        };
        let (cause, subscribed) = match end {
            End::Unwanted => return,
            End::Dropped { cause, subscribed } => (cause, subscribed),
        };
        if subscribed {
            delay = s.backoff_initial;
            failures = 0;
        }
        failures += 1;
        // The first failure of a streak is worth a warning; the rest of
        // an outage would fill the log.
        if failures == 1 {
            warn!(target: TARGET, endpoint, "newHeads: {cause}; polling the head meanwhile, subscribing again in {delay:?}");
        } else {
            debug!(target: TARGET, endpoint, failures, "newHeads: {cause}; subscribing again in {delay:?}");
        }
        tokio::select! {
            () = sleep(delay) => {}
            () = tx.closed() => return,
        }
        delay = (delay * 2).min(s.backoff_max);
    }
}

/// Connects, subscribes and forwards heads until the socket ends.
async fn session(s: &WsSettings, scrub: &Scrubber, tx: &mpsc::Sender<u64>) -> End {
    let dropped = |cause: String, subscribed| End::Dropped {
        cause: scrub.scrub(&cause),
        subscribed,
    };
    let connector = Connector::Rustls(Arc::clone(&s.tls));
    let connect = connect_async_tls_with_config(s.url.as_str(), None, true, Some(connector));
    let mut socket = match timeout(s.timeout, connect).await {
        Err(_) => return dropped(format!("no connection within {:?}", s.timeout), false),
        Ok(Err(e)) => return dropped(format!("cannot connect: {e}"), false),
        Ok(Ok((socket, _))) => socket,
    };
    let call =
        json!({"jsonrpc": "2.0", "id": 1, "method": "eth_subscribe", "params": ["newHeads"]});
    if let Err(e) = socket.send(Message::text(call.to_string())).await {
        return dropped(format!("cannot send eth_subscribe: {e}"), false);
    }
    let deadline = Instant::now() + s.timeout;
    let id = loop {
        let msg = match tokio::time::timeout_at(deadline, socket.next()).await {
            Err(_) => {
                return dropped(
                    format!("no answer to eth_subscribe within {:?}", s.timeout),
                    false,
                );
            }
            Ok(None) => return dropped("closed before answering eth_subscribe".into(), false),
            Ok(Some(Err(e))) => return dropped(format!("socket error: {e}"), false),
            Ok(Some(Ok(m))) => m,
        };
        let Some(answer) = json_of(&msg) else {
            continue;
        };
        if answer["id"] != 1 {
            continue;
        }
        match (&answer["result"], &answer["error"]) {
            (Value::String(id), _) => break id.clone(),
            (_, Value::Null) => {
                return dropped(format!("eth_subscribe answered {answer}"), false);
            }
            (_, error) => return dropped(format!("eth_subscribe refused: {error}"), false),
        }
    };
    info!(target: TARGET, endpoint = scrub.endpoint(), "subscribed to newHeads");
    let mut last_heard = Instant::now();
    let mut pinged = false;
    loop {
        let wait = if pinged { DEAD_AFTER } else { PING_AFTER };
        let msg = match tokio::time::timeout_at(last_heard + wait, socket.next()).await {
            Err(_) if pinged => {
                return dropped(format!("silent for {DEAD_AFTER:?}, ping unanswered"), true);
            }
            Err(_) => {
                pinged = true;
                if let Err(e) = socket.send(Message::Ping(Vec::new().into())).await {
                    return dropped(format!("cannot ping: {e}"), true);
                }
                continue;
            }
            Ok(None) => return dropped("closed by the node".into(), true),
            Ok(Some(Err(e))) => return dropped(format!("socket error: {e}"), true),
            Ok(Some(Ok(m))) => m,
        };
        last_heard = Instant::now();
        pinged = false;
        if let Message::Close(frame) = &msg {
            let why = frame
                .as_ref()
                .map(|f| format!(" ({} {})", f.code, f.reason))
                .unwrap_or_default();
            return dropped(format!("closed by the node{why}"), true);
        }
        let Some(note) = json_of(&msg) else { continue };
        if note["method"] != "eth_subscription" || note["params"]["subscription"] != id.as_str() {
            continue;
        }
        let number = &note["params"]["result"]["number"];
        let Some(n) = quantity(number) else {
            debug!(target: TARGET, %number, "newHeads: a head without a readable number");
            continue;
        };
        match tx.try_send(n) {
            Ok(()) | Err(mpsc::error::TrySendError::Full(_)) => {}
            Err(mpsc::error::TrySendError::Closed(_)) => return End::Unwanted,
        }
    }
}

/// The JSON of a text (or binary) frame; `None` for control frames and
/// text that is not JSON.
fn json_of(msg: &Message) -> Option<Value> {
    match msg {
        Message::Text(t) => serde_json::from_str(t.as_str()).ok(),
        Message::Binary(b) => serde_json::from_slice(b).ok(),
        _ => None,
    }
}
