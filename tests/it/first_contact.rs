//! The first contact fails fast and says what to do: an RPC endpoint where
//! nothing listens, and a database URL where nothing listens, each end the
//! run within seconds (not after the whole retry budget) with the redacted
//! URL, the cause and a hint. An endpoint that has answered before gets the
//! long budget instead (`providers.rs`, `database.rs`).

use std::time::{Duration, Instant};

use crate::follow::free_local_addr;
use crate::support::{indexer, pg};

const FAST: Duration = Duration::from_secs(10);

/// A backfill against these URLs, which must fail within [`FAST`]; its
/// stderr.
async fn fails_fast(rpc: String, db: String) -> String {
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        indexer::run(&rpc, &db, &["backfill", "--from", "0", "--to", "10"])
    })
    .await
    .unwrap();
    let took = started.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "{err}");
    assert!(took < FAST, "took {took:?}:\n{err}");
    err
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rpc_url_where_nothing_listens_fails_within_seconds_with_a_hint() {
    let (_pool, db) = pg::fresh_db().await;
    let rpc = format!("http://user:Secret123pw@{}/", free_local_addr());
    let err = fails_fast(rpc, db).await;
    assert!(err.contains("cannot reach the endpoint"), "{err}");
    assert!(
        err.contains("RPC_URL") && err.contains("--rpc-url"),
        "{err}"
    );
    assert!(
        err.contains("http://127.0.0.1:"),
        "the endpoint is named: {err}"
    );
    assert!(!err.contains("Secret123pw"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_url_where_nothing_listens_fails_within_seconds_with_a_hint() {
    let db = format!("postgres://alice:Secret456pw@{}/senders", free_local_addr());
    let err = fails_fast("http://127.0.0.1:1/".into(), db).await;
    assert!(err.contains("database postgres://127.0.0.1:"), "{err}");
    assert!(err.contains("DATABASE_URL"), "{err}");
    assert!(!err.contains("Secret456pw"), "{err}");
}
