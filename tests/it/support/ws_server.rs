//! A WebSocket JSON-RPC endpoint that serves `eth_subscribe newHeads` and
//! nothing else: each client that subscribes gets every header the test
//! announces with [`WsHeads::announce`], as a node sends them. Built on
//! soketto, the library web3's ws transport speaks to. Listens on
//! 127.0.0.1 only.

use std::net::SocketAddr;

use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio_util::compat::TokioAsyncReadCompatExt;

pub struct WsHeads {
    addr: SocketAddr,
    heads: broadcast::Sender<Value>,
    accept: JoinHandle<()>,
}

impl WsHeads {
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let (heads, _) = broadcast::channel(64);
        let tx = heads.clone();
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                tokio::spawn(serve(stream, tx.subscribe()));
            }
        });
        Ok(WsHeads {
            addr,
            heads,
            accept,
        })
    }

    pub fn url(&self) -> String {
        format!("ws://{}", self.addr)
    }

    /// Sends `header` (a block object) to every subscriber; returns how
    /// many connections will send it.
    pub fn announce(&self, header: Value) -> usize {
        self.heads.send(header).unwrap_or(0)
    }
}

impl Drop for WsHeads {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

const SUBSCRIPTION: &str = "0x9cef478923ff08bf67fde6c64013158d";

/// One connection: handshake, one `eth_subscribe`, then notifications.
async fn serve(stream: tokio::net::TcpStream, mut heads: broadcast::Receiver<Value>) {
    let mut server = soketto::handshake::Server::new(stream.compat());
    let Ok(req) = server.receive_request().await else {
        return;
    };
    let accept = soketto::handshake::server::Response::Accept {
        key: req.key(),
        protocol: None,
    };
    if server.send_response(&accept).await.is_err() {
        return;
    }
    let (mut sender, mut receiver) = server.into_builder().finish();
    let mut msg = Vec::new();
    if receiver.receive_data(&mut msg).await.is_err() {
        return;
    }
    let Ok(call) = serde_json::from_slice::<Value>(&msg) else {
        return;
    };
    let answer = if call["method"] == "eth_subscribe" && call["params"][0] == "newHeads" {
        json!({"jsonrpc": "2.0", "id": call["id"], "result": SUBSCRIPTION})
    } else {
        json!({"jsonrpc": "2.0", "id": call["id"], "error": {"code": -32601, "message": "method not found"}})
    };
    if sender.send_text(answer.to_string()).await.is_err() || sender.flush().await.is_err() {
        return;
    }
    while let Ok(header) = heads.recv().await {
        let note = json!({"jsonrpc": "2.0", "method": "eth_subscription",
            "params": {"subscription": SUBSCRIPTION, "result": header}});
        if sender.send_text(note.to_string()).await.is_err() || sender.flush().await.is_err() {
            return;
        }
    }
}
