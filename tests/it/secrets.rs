//! No secret leaves the process: runs with credentials in every URL (a
//! user and password, an API key in the path and one in the query, for
//! the JSON-RPC endpoints, the WebSocket endpoint and the database) are
//! scanned, every line of their debug logs, their errors, `status`, and
//! the `/metrics` and `/health` bodies, for any of them.

use std::time::Duration;

use crate::follow::{free_local_addr, http_get};
use crate::support::indexer::{self, Running};
use crate::support::{fixtures, pg, rpc_server::RpcServer};

const FIRST: u64 = 24_476_000;

/// The secrets, each a string that appears nowhere else.
const SECRETS: &[&str] = &[
    "rpcUserSecret1",
    "rpcPassSecret2",
    "PathKeySecret3",
    "QueryKeySecret4",
    "wsPassSecret5",
    "WsKeySecret6",
    "dbPassSecret7",
    "DeadPassSecret8",
];

fn assert_clean(what: &str, text: &str) {
    for secret in SECRETS {
        if let Some(line) = text.lines().find(|l| l.contains(secret)) {
            panic!("{what} holds {secret}:\n{line}");
        }
    }
}

/// `http://user:pass@host:port/v3/KEY?apikey=KEY`, as providers hand out.
fn with_credentials(url: &str) -> String {
    let host = url.trim_start_matches("http://").trim_end_matches('/');
    format!("http://rpcUserSecret1:rpcPassSecret2@{host}/v3/PathKeySecret3?apikey=QueryKeySecret4")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_credential_appears_in_logs_errors_status_or_metrics() {
    let blocks = fixtures::recent_mainnet();
    let server = RpcServer::start(blocks).await.unwrap();
    server.set_head(FIRST + 3);
    let (pool, db) = pg::fresh_db().await;
    // Trust auth on the socket: the password is sent, never checked.
    let db = db.replacen("sender_indexer@", "sender_indexer:dbPassSecret7@", 1);
    // A second endpoint that refuses every connection, so errors about an
    // endpoint are logged too; and a WebSocket endpoint nobody serves.
    let dead = format!(
        "http://u:DeadPassSecret8@{}/PathKeySecret3",
        free_local_addr()
    );
    let rpc = format!("{},{dead}", with_credentials(&server.url()));
    let ws = format!("ws://u:wsPassSecret5@{}/WsKeySecret6", free_local_addr());
    let metrics = free_local_addr();
    let from = FIRST.to_string();
    let mut cmd = indexer::command(
        &rpc,
        &db,
        &[
            "follow",
            "--logs",
            "off",
            "--from",
            &from,
            "--poll-interval-ms",
            "200",
            "--metrics-addr",
            &metrics,
        ],
    );
    cmd.env("WS_URL", &ws).env("RUST_LOG", "debug");
    let mut run = Running::start(cmd);
    pg::wait_for_checkpoint(&pool, FIRST + 3, Duration::from_secs(60), || {
        run.is_running()
    })
    .await;
    let body = http_get(&metrics, "/metrics").await;
    assert!(body.contains("rpc_endpoint_requests_total"), "{body}");
    assert_clean("/metrics", &body);
    assert_clean("/health", &http_get(&metrics, "/health").await);
    let log = run.terminate().await;
    assert!(log.contains("127.0.0.1"), "endpoints are named: {log}");
    assert!(log.lines().count() > 20, "a debug log: {log}");
    assert_clean("the debug log of follow", &log);

    let out = indexer::run_ok(&rpc, &db, &["status"]);
    assert_clean("status", &String::from_utf8_lossy(&out.stdout));
    assert_clean("status's log", &String::from_utf8_lossy(&out.stderr));

    // Errors: an endpoint that never answers, and a database that does not
    // exist.
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fast-failure.toml");
    std::fs::write(
        &config,
        "[rpc]\nmax_retries = 1\nbackoff_initial_ms = 10\nbackoff_max_ms = 10\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let args = [
        "--config", config, "backfill", "--from", "0", "--to", "3", "--logs", "off",
    ];
    let out = indexer::run(&dead, &db, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "backfill from a dead endpoint: {err}"
    );
    assert_clean("the error of a dead endpoint", &err);
    let missing = db.replacen(pool_db_name(&db), "no_such_database", 1);
    let out = indexer::run(&rpc, &missing, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "backfill into a missing database: {err}"
    );
    assert!(
        err.contains("no_such_database"),
        "the database is named: {err}"
    );
    assert_clean("the error of a missing database", &err);
}

/// The database name of a `postgres://…/NAME?…` URL.
fn pool_db_name(url: &str) -> &str {
    let path = url.rsplit('/').next().unwrap();
    path.split('?').next().unwrap()
}
