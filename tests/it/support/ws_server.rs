//! A WebSocket JSON-RPC endpoint that serves `eth_subscribe newHeads` and
//! nothing else: each client that subscribes gets every header the test
//! announces with [`WsHeads::announce`], as a node sends them. Plain
//! `ws://`, or `wss://` with a certificate of its own test CA
//! ([`TestCa`], `support::tls`). It can drop every connection and refuse new ones for a
//! while, like a provider's socket going down. Built on tokio-tungstenite
//! (the library the indexer's client uses). Listens on 127.0.0.1 only.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};

use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::Message;

pub use super::tls::TestCa;

pub struct WsHeads {
    addr: SocketAddr,
    tls: bool,
    heads: broadcast::Sender<Value>,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

#[derive(Default)]
struct State {
    /// Refuse (close at once) new connections.
    down: AtomicBool,
    /// Subscriptions answered so far.
    subscriptions: AtomicUsize,
}

impl WsHeads {
    /// A plain `ws://` server.
    pub async fn start() -> std::io::Result<Self> {
        Self::serve(None).await
    }

    /// A `wss://` server with a certificate of `ca`.
    pub async fn start_tls(ca: &TestCa) -> std::io::Result<Self> {
        Self::serve(Some(ca.acceptor())).await
    }

    async fn serve(tls: Option<TlsAcceptor>) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (heads, _) = broadcast::channel(64);
        let state = Arc::new(State::default());
        let (tx, st, is_tls) = (heads.clone(), Arc::clone(&state), tls.is_some());
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                if st.down.load(Relaxed) {
                    drop(stream);
                    continue;
                }
                let (rx, st, tls) = (tx.subscribe(), Arc::clone(&st), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        Some(acceptor) => {
                            if let Ok(s) = acceptor.accept(stream).await {
                                serve(s, rx, st).await;
                            }
                        }
                        None => serve(stream, rx, st).await,
                    }
                });
            }
        });
        Ok(WsHeads {
            addr,
            tls: is_tls,
            heads,
            state,
            accept,
        })
    }

    /// `ws://127.0.0.1:port`, or `wss://localhost:port` with TLS (the name
    /// the certificate is for).
    pub fn url(&self) -> String {
        match self.tls {
            true => format!("wss://localhost:{}", self.addr.port()),
            false => format!("ws://{}", self.addr),
        }
    }

    /// Sends `header` (a block object) to every subscriber; returns how
    /// many connections will send it.
    pub fn announce(&self, header: Value) -> usize {
        self.heads.send(header).unwrap_or(0)
    }

    /// Drops every open connection and refuses new ones (`true`), or
    /// accepts again (`false`).
    pub fn set_down(&self, down: bool) {
        self.state.down.store(down, Relaxed);
        if down {
            // Subscribers see a closed channel and hang up.
            let _ = self.heads.send(Value::Null);
        }
    }

    /// `eth_subscribe` calls answered so far, over every connection.
    pub fn subscriptions(&self) -> usize {
        self.state.subscriptions.load(Relaxed)
    }
}

impl Drop for WsHeads {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

const SUBSCRIPTION: &str = "0x9cef478923ff08bf67fde6c64013158d";

/// One connection: handshake, one `eth_subscribe`, then notifications.
async fn serve<S>(stream: S, mut heads: broadcast::Receiver<Value>, state: Arc<State>)
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let Ok(mut socket) = tokio_tungstenite::accept_async(stream).await else {
        return;
    };
    let call = loop {
        match socket.next().await {
            Some(Ok(Message::Text(t))) => match serde_json::from_str::<Value>(t.as_str()) {
                Ok(v) => break v,
                Err(_) => return,
            },
            Some(Ok(_)) => continue,
            _ => return,
        }
    };
    let answer = if call["method"] == "eth_subscribe" && call["params"][0] == "newHeads" {
        state.subscriptions.fetch_add(1, Relaxed);
        json!({"jsonrpc": "2.0", "id": call["id"], "result": SUBSCRIPTION})
    } else {
        json!({"jsonrpc": "2.0", "id": call["id"], "error": {"code": -32601, "message": "method not found"}})
    };
    if socket
        .send(Message::text(answer.to_string()))
        .await
        .is_err()
    {
        return;
    }
    loop {
        tokio::select! {
            header = heads.recv() => {
                let header = match header {
                    Ok(Value::Null) | Err(_) => return, // going down
                    Ok(h) => h,
                };
                let note = json!({"jsonrpc": "2.0", "method": "eth_subscription",
                    "params": {"subscription": SUBSCRIPTION, "result": header}});
                if socket.send(Message::text(note.to_string())).await.is_err() {
                    return;
                }
            }
            // Reads answer pings and notice a client that hung up.
            msg = socket.next() => match msg {
                Some(Ok(_)) => {}
                _ => return,
            },
        }
    }
}
