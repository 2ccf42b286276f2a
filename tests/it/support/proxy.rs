//! Network middlemen for tests: a TCP proxy that slows every request, so
//! an indexer is still mid-range when a test stops it. Listens on
//! 127.0.0.1 only and forwards only to the test's own upstream.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A TCP proxy on 127.0.0.1 to `upstream` (http://host:port) that holds
/// every chunk the client sends for `delay`: a slow node. Returns its URL;
/// it lives as long as the test's runtime.
pub async fn slow_proxy(upstream: &str, delay: Duration) -> String {
    let upstream = upstream.trim_start_matches("http://").to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let upstream = upstream.clone();
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
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
