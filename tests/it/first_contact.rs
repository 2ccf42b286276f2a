//! The first contact fails fast and says what to do: an RPC endpoint where
//! nothing listens, one whose name does not resolve, and a database URL
//! where nothing listens, each end the run within seconds (not after the
//! whole retry budget) with the redacted URL, the cause and a hint. An
//! endpoint that has answered before gets the long budget instead
//! (`providers.rs`, `database.rs`).

use std::process::Command;
use std::time::{Duration, Instant};

use crate::follow::free_local_addr;
use crate::support::{indexer, pg};

const FAST: Duration = Duration::from_secs(10);

/// A backfill against these URLs, which must fail within [`FAST`]; its
/// stderr.
async fn fails_fast(rpc: String, db: String) -> String {
    fails_fast_with(rpc, db, |cmd| cmd).await
}

/// [`fails_fast`], with the command adjusted (or wrapped) by `adjust`.
async fn fails_fast_with(
    rpc: String,
    db: String,
    adjust: impl FnOnce(Command) -> Command + Send + 'static,
) -> String {
    let started = Instant::now();
    let out = tokio::task::spawn_blocking(move || {
        let args = ["backfill", "--from", "0", "--to", "10"];
        indexer::finish(adjust(indexer::command(&rpc, &db, &args)), &args)
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

/// `cmd` run in a network namespace of its own (`unshare --net`, as root):
/// no interface but a downed loopback, so a name lookup fails at once and
/// no DNS query leaves the machine. The database is reached over its unix
/// socket, which a network namespace does not hide.
fn without_network(cmd: Command) -> Command {
    let mut wrapped = Command::new("unshare");
    wrapped
        .arg("--net")
        .arg(cmd.get_program())
        .args(cmd.get_args());
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => wrapped.env(k, v),
            None => wrapped.env_remove(k),
        };
    }
    wrapped.stdin(std::process::Stdio::null());
    wrapped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rpc_name_that_does_not_resolve_fails_within_seconds_with_a_hint() {
    let (_pool, db) = pg::fresh_db().await;
    // `.invalid` never resolves (RFC 6761); the namespace keeps the lookup
    // on this machine.
    let rpc = "https://user:Secret789pw@no-such-node.invalid/v3/abcdef0123456789".to_owned();
    let err = fails_fast_with(rpc, db, without_network).await;
    assert!(err.contains("cannot reach the endpoint"), "{err}");
    assert!(
        err.contains("no-such-node.invalid"),
        "the endpoint is named: {err}"
    );
    assert!(
        err.contains("dns") || err.contains("resolve") || err.contains("lookup"),
        "the cause is the name: {err}"
    );
    assert!(
        err.contains("RPC_URL") && err.contains("--rpc-url") && err.contains("scripts/demo.sh"),
        "{err}"
    );
    assert!(!err.contains("Secret789pw"), "{err}");
    assert!(!err.contains("abcdef0123456789"), "{err}");
}
