//! The database going away mid-run, on a PostgreSQL cluster of the test's
//! own (`pg::OwnCluster`): restarted with `pg_ctl stop -m immediate` twice
//! during a backfill, the run reconnects and ends equal to the node; gone
//! for longer than `database.reconnect_budget_ms`, the run exits non-zero
//! naming the database without its password, and a rerun resumes. And TLS
//! to a server with a private CA: verify-full, require, and refusals.
//!
//! The anvil chain holds blob transactions, which anvil's transactions
//! root gets wrong (see `anvil_backfill.rs`): `--verify off`.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::follow::no_mining_anvil;
use crate::providers::chain_of;
use crate::support::compare::assert_db_equals_chain;
use crate::support::indexer::{self, Running};
use crate::support::pg::{self, OwnCluster};
use crate::support::proxy::slow_proxy;
use crate::support::tls::TestCa;

const RUN_LIMIT: Duration = Duration::from_secs(120);

/// Waits until the checkpoint is at least `at`.
async fn wait_past(pool: &sqlx::PgPool, at: u64, run: &mut Running) {
    let deadline = Instant::now() + RUN_LIMIT;
    while pg::checkpoint(pool).await.is_none_or(|c| c < at) {
        assert!(run.is_running(), "the indexer exited:\n{}", run.stderr());
        assert!(Instant::now() < deadline, "checkpoint {at} in time");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A backfill of `0..=to` from a slow node (so it is mid-range for
/// seconds), writing a batch per block that arrives.
fn slow_backfill(node: &str, db: &str, to: u64, extra: &[&str]) -> Command {
    let to = to.to_string();
    let mut args = vec![
        "backfill",
        "--verify",
        "off",
        "--from",
        "0",
        "--to",
        &to,
        "--batch-size",
        "1",
        "--concurrency",
        "1",
    ];
    args.extend_from_slice(extra);
    let mut cmd = indexer::command(node, db, &args);
    cmd.env("RUST_LOG", "info");
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_survives_postgresql_restarting_twice() {
    let anvil = no_mining_anvil().await;
    let target = chain_of(&anvil, 2, 40).await;
    let node = slow_proxy(anvil.url(), Duration::from_millis(30)).await;
    let mut cluster = OwnCluster::start();
    let (pool, url) = cluster.fresh_db("restarts").await;
    let mut run = Running::start(slow_backfill(&node, &url, target, &[]));
    for at in [target / 4, target / 2] {
        wait_past(&pool, at, &mut run).await;
        cluster.stop_immediate();
        // Down long enough for statements to fail, not just to reconnect.
        tokio::time::sleep(Duration::from_millis(700)).await;
        cluster.start_again();
    }
    let status = run.wait(RUN_LIMIT).await;
    let log = run.stderr();
    assert!(status.success(), "backfill failed ({status}):\n{log}");
    assert_db_equals_chain(&pool, &anvil, 0, target).await;
    assert!(log.contains("database connection lost"), "{log}");
    assert!(
        log.matches("database is back").count() >= 2,
        "two outages, two recoveries:\n{log}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_gone_longer_than_the_budget_stops_the_run_and_a_rerun_resumes() {
    let anvil = no_mining_anvil().await;
    let target = chain_of(&anvil, 1, 40).await;
    let node = slow_proxy(anvil.url(), Duration::from_millis(30)).await;
    let mut cluster = OwnCluster::start();
    let (pool, url) = cluster.fresh_db("budget").await;
    // The password is never checked on the socket (trust); it must never
    // be printed either.
    let url = url.replacen("sender_indexer@", "sender_indexer:hunter2secret@", 1);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[database]\nreconnect_budget_ms = 2000\n").unwrap();
    let config = config.to_str().unwrap().to_owned();
    let mut run = Running::start(slow_backfill(&node, &url, target, &["--config", &config]));
    wait_past(&pool, target / 3, &mut run).await;
    cluster.stop_immediate();
    let stopped = Instant::now();
    let status = run.wait(RUN_LIMIT).await;
    let gave_up = stopped.elapsed();
    let log = run.stderr();
    assert!(!status.success(), "exited 0 with no database:\n{log}");
    assert!(
        gave_up < Duration::from_secs(30),
        "gave up {gave_up:?} after the database went, with a budget of 2 s"
    );
    let last = log.lines().last().unwrap_or_default().to_owned();
    assert!(log.contains("reconnect_budget_ms"), "{log}");
    assert!(
        log.contains("a rerun resumes after the last committed block"),
        "{log}"
    );
    assert!(
        !log.contains("hunter2secret"),
        "the password leaked:\n{log}"
    );
    assert!(
        log.contains("database postgres://"),
        "the database is named:\n{last}"
    );

    cluster.start_again();
    let before = pg::checkpoint(&pool)
        .await
        .expect("a checkpoint was committed");
    assert!(before < target, "stopped mid-range");
    let out = indexer::finish(
        slow_backfill(&node, &url, target, &["--config", &config]),
        &["rerun"],
    );
    let rerun = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "rerun failed:\n{rerun}");
    assert!(
        rerun.contains("resuming: blocks of the range written before"),
        "{rerun}"
    );
    assert_db_equals_chain(&pool, &anvil, 0, target).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_postgresql_with_a_private_ca_verify_full_and_require() {
    let anvil = no_mining_anvil().await;
    let target = chain_of(&anvil, 1, 5).await;
    let ca = TestCa::new();
    let cluster = OwnCluster::start_tls(&ca).await;
    let (pool, _) = cluster.fresh_db("tls").await;
    let ca_file = ca.ca_file();
    let ca_file = ca_file.to_str().unwrap();
    let to = target.to_string();
    let args = ["backfill", "--verify", "off", "--from", "0", "--to", &to];

    // verify-full with the CA: the certificate and the name are checked.
    let url = cluster.tcp_url("tls", &format!("sslmode=verify-full&sslrootcert={ca_file}"));
    indexer::run_ok(anvil.url(), &url, &args);
    assert_db_equals_chain(&pool, &anvil, 0, target).await;
    // Every connection the server saw on TCP was TLS (it rejects the rest),
    // and `sql` works over it too.
    let out = indexer::run_ok(
        anvil.url(),
        &url,
        &[
            "sql",
            "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
        ],
    );
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .any(|l| l.trim() == "true")
    );

    // require: encrypted, certificate not checked (libpq's meaning).
    let url = cluster.tcp_url("tls", "sslmode=require");
    indexer::run_ok(anvil.url(), &url, &args);

    // verify-full without the CA: refused, and the error says why.
    let url = cluster.tcp_url("tls", "sslmode=verify-full");
    let out = indexer::run(anvil.url(), &url, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "an untrusted certificate was accepted"
    );
    assert!(err.contains("database postgres://"), "{err}");
    assert!(err.to_lowercase().contains("certificate"), "{err}");

    // No TLS at all: the server refuses it.
    let url = cluster.tcp_url("tls", "sslmode=disable");
    let out = indexer::run(anvil.url(), &url, &args);
    assert!(!out.status.success(), "a plain connection was accepted");
}
