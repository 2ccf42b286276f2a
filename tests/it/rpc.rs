//! `rpc::RpcClient` against a real HTTP JSON-RPC server (`support::rpc_server`):
//! ordering under concurrency, retries through injected faults, waiting for
//! future blocks, batch-cap adaptation, and error messages.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use sender_indexer::config::{RpcSettings, Settings};
use sender_indexer::decode::RawBlock;
use sender_indexer::rpc::{RpcClient, RpcError};
use sender_indexer::testing;
use serde_json::Value;

use crate::support::rpc_server::{Fault, RpcServer, synthetic_block};

const MS: Duration = Duration::from_millis(1);

/// Fast retries so fault tests take milliseconds, not minutes.
pub(crate) fn config(url: &str) -> RpcSettings {
    RpcSettings {
        urls: vec![url.parse().expect("test url")],
        batch_size: nz(10),
        max_in_flight: nz(4),
        request_timeout: 300 * MS,
        max_retries: 5,
        backoff_initial: 5 * MS,
        backoff_max: 40 * MS,
        ..Settings::defaults().rpc
    }
}

fn nz(n: usize) -> std::num::NonZeroUsize {
    n.try_into().expect("non-zero")
}

/// Blocks `0..len`, two transactions each.
async fn chain(len: u64) -> RpcServer {
    let blocks = (0..len).map(|n| synthetic_block(n, 2)).collect();
    RpcServer::start(blocks).await.expect("start rpc server")
}

fn client(cfg: RpcSettings) -> Arc<RpcClient> {
    Arc::new(RpcClient::new(cfg).expect("valid config"))
}

/// The blocks' numbers, after checking that each transaction range holds
/// that block's transaction (synthetic blocks have two each).
fn numbers(blocks: &[RawBlock]) -> Vec<u64> {
    blocks
        .iter()
        .map(|b| {
            let n = b.header.number;
            assert_eq!(b.txs.len(), 2, "block {n}");
            for i in 0..2 {
                let tx: Value = serde_json::from_str(b.tx_json(i).unwrap()).expect("tx JSON");
                assert_eq!(tx["blockNumber"], format!("0x{n:x}"), "block {n} tx {i}");
                assert_eq!(
                    tx["transactionIndex"],
                    format!("0x{i:x}"),
                    "block {n} tx {i}"
                );
            }
            n
        })
        .collect()
}

/// Fails the test instead of hanging it if a retry loop never ends.
async fn within<T>(fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(30), fut)
        .await
        .expect("test took longer than 30s")
}

#[tokio::test]
async fn stream_delivers_blocks_in_order_across_concurrent_batches() {
    let server = chain(2000).await;
    // Random latency makes later batches finish before earlier ones.
    server.set_latency(8 * MS);
    let rpc = client(RpcSettings {
        batch_size: nz(7),
        max_in_flight: nz(8),
        ..config(&server.url())
    });

    let got: Vec<RawBlock> = within(
        Arc::clone(&rpc)
            .block_stream(0..=1999)
            .map(|r| r.unwrap())
            .collect(),
    )
    .await;
    assert_eq!(numbers(&got), (0..2000).collect::<Vec<_>>());
    // The header and each transaction's text are the server's block's.
    let b5 = synthetic_block(5, 2);
    let hash = |v: &Value| hex::decode(v.as_str().unwrap().trim_start_matches("0x")).unwrap();
    assert_eq!(got[5].header.hash.to_vec(), hash(&b5["hash"]));
    assert_eq!(got[5].header.parent_hash.to_vec(), hash(&b5["parentHash"]));
    for i in 0..2 {
        let tx: Value = serde_json::from_str(got[5].tx_json(i).unwrap()).unwrap();
        assert_eq!(tx, b5["transactions"][i], "full transaction {i}");
    }
    assert!(server.max_concurrent() > 1, "batches were not concurrent");
    assert!(
        server.max_concurrent() <= 8,
        "more than max_in_flight batches"
    );

    let some = within(testing::blocks(&rpc, 100..=250)).await.unwrap();
    assert_eq!(numbers(&some), (100..=250).collect::<Vec<_>>());
    assert!(
        within(testing::blocks(&rpc, std::ops::RangeInclusive::new(5, 4)))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(rpc.stats().retries(), 0);
}

#[tokio::test]
async fn retries_through_transient_faults() {
    let server = chain(30).await;
    let rpc = client(config(&server.url()));
    let faults = [
        Fault::Status(429),
        Fault::Status(500),
        Fault::Status(503),
        Fault::Close,
        Fault::Stall(Duration::from_secs(2)),
        Fault::RpcError {
            code: -32005,
            message: "limit exceeded".into(),
        },
        Fault::RpcError {
            code: -32000,
            message: "Too Many Requests".into(),
        },
    ];
    for fault in faults {
        let retries = rpc.stats().retries();
        server.fail_next(2, fault.clone());
        let got = within(testing::blocks(&rpc, 0..=29))
            .await
            .unwrap_or_else(|e| panic!("{fault:?}: {e}"));
        assert_eq!(numbers(&got), (0..30).collect::<Vec<_>>(), "{fault:?}");
        assert_eq!(server.pending_faults(), 0, "{fault:?}");
        assert!(rpc.stats().retries() >= retries + 2, "{fault:?}");
    }
    // head() and header() go through the same policy.
    server.fail_next(2, Fault::Status(502));
    assert_eq!(within(rpc.head()).await.unwrap(), 29);
    server.fail_next(1, Fault::Close);
    assert!(within(rpc.header(3)).await.unwrap().is_some());
}

#[tokio::test]
async fn waits_for_null_blocks_until_head_rises() {
    let server = chain(40).await;
    server.set_head(19);
    let rpc = client(config(&server.url()));
    assert_eq!(rpc.head().await.unwrap(), 19);
    assert_eq!(rpc.header(30).await.unwrap(), None, "header does not wait");

    let fetch = tokio::spawn({
        let rpc = Arc::clone(&rpc);
        async move { testing::blocks(&rpc, 10..=39).await }
    });
    tokio::time::sleep(300 * MS).await;
    assert!(
        !fetch.is_finished(),
        "returned before blocks 20..=39 existed"
    );
    assert!(rpc.stats().null_waits() > 0);

    server.set_head(39);
    let got = within(fetch).await.unwrap().unwrap();
    assert_eq!(numbers(&got), (10..=39).collect::<Vec<_>>());
    // Waiting is not failing: the error budget is untouched.
    assert_eq!(rpc.stats().retries(), 0);
    assert_eq!(rpc.stats().errors(), 0);
}

#[tokio::test]
async fn adapts_to_a_provider_batch_cap() {
    let server = chain(300).await;
    server.set_batch_cap(Some(8));
    let rpc = client(RpcSettings {
        batch_size: nz(50),
        max_in_flight: nz(3),
        ..config(&server.url())
    });

    let got: Vec<RawBlock> = within(
        Arc::clone(&rpc)
            .block_stream(0..=299)
            .map(|r| r.unwrap())
            .collect(),
    )
    .await;
    assert_eq!(numbers(&got), (0..300).collect::<Vec<_>>());
    assert!(
        testing::batch_size(&rpc) <= 8,
        "batch size {}",
        testing::batch_size(&rpc)
    );
    assert!(server.rejected_batches() >= 1);
    assert_eq!(
        rpc.stats().retries(),
        0,
        "a batch cap is not an error to retry"
    );

    // A provider refusing batches outright: down to single requests.
    server.set_batch_cap(Some(1));
    let got = within(testing::blocks(&rpc, 0..=20)).await.unwrap();
    assert_eq!(numbers(&got), (0..=20).collect::<Vec<_>>());
    assert_eq!(testing::batch_size(&rpc), 1);
}

#[tokio::test]
async fn exhausted_retries_name_endpoint_and_block_without_credentials() {
    let server = chain(10).await;
    let port = server.addr().port();
    let url = format!("http://alice:hunter22@127.0.0.1:{port}/?apikey=sekrit99");
    let rpc = client(RpcSettings {
        batch_size: nz(1),
        max_retries: 3,
        ..config(&url)
    });

    server.fail_next(100, Fault::Status(503));
    let err = within(testing::blocks(&rpc, 5..=5)).await.unwrap_err();
    let msg = err.to_string();
    assert_eq!(
        msg,
        format!(
            "rpc http://127.0.0.1:{port}/: block 5: gave up after 3 retries (last error: http status 503)"
        )
    );
    assert_eq!(err.block(), Some(5));
    assert!(matches!(err, RpcError::RetriesExhausted { retries: 3, .. }));
    assert_eq!(server.requests(), 4, "one try plus three retries");

    // reqwest puts the full URL into connection errors; it must not leak.
    let closed = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let url = format!("http://alice:hunter22@127.0.0.1:{closed}/?apikey=sekrit99");
    let rpc = client(RpcSettings {
        max_retries: 1,
        ..config(&url)
    });
    let msg = within(testing::blocks(&rpc, 7..=9))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with(&format!(
            "rpc http://127.0.0.1:{closed}/: blocks 7..=9: gave up"
        )),
        "{msg}"
    );
    for secret in ["alice", "hunter22", "sekrit99"] {
        assert!(!msg.contains(secret), "{secret} leaked: {msg}");
    }
}

#[tokio::test]
async fn non_retryable_errors_fail_at_once() {
    let server = chain(10).await;
    let rpc = client(config(&server.url()));
    server.fail_next(
        1,
        Fault::RpcError {
            code: -32602,
            message: "invalid params".into(),
        },
    );
    let mut stream = Arc::clone(&rpc).block_stream(0..=9);
    let err = within(stream.next()).await.unwrap().unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "rpc {}: block 0: json-rpc error -32602: invalid params",
            server.url()
        )
    );
    assert!(
        within(stream.next()).await.is_none(),
        "stream ends after an error"
    );
    assert_eq!(rpc.stats().retries(), 0);

    server.fail_next(1, Fault::Status(401));
    let err = within(rpc.head()).await.unwrap_err();
    assert!(
        err.to_string().ends_with(": head: http status 401"),
        "{err}"
    );
    assert_eq!(rpc.stats().retries(), 0);
}

#[tokio::test]
async fn header_gives_hashes_for_reorg_checks() {
    let server = chain(50).await;
    let rpc = client(config(&server.url()));
    let h = within(rpc.header(42)).await.unwrap().unwrap();
    let blocks = testing::blocks(&rpc, 41..=42).await.unwrap();
    assert_eq!(h.number, 42);
    assert_eq!(h.hash, blocks[1].header.hash);
    assert_eq!(h.parent_hash, blocks[0].header.hash);
    assert_eq!(h.parent_hash, blocks[1].header.parent_hash);
    assert_eq!(within(rpc.header(1000)).await.unwrap(), None);
}
