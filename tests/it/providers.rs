//! Several providers and adaptive load, against real anvil and PostgreSQL
//! behind fault-injecting JSON-RPC proxies (`support::proxy::FaultProxy`):
//! one provider dies for good mid-run while another lags 20 blocks behind,
//! and a provider answers most requests with 429 and `Retry-After`.
//!
//! anvil's blob transactions do not verify (see `anvil_backfill.rs`), so
//! these runs use `--verify off`; what they check is where requests go.

use std::time::{Duration, Instant};

use crate::follow::{free_local_addr, http_get, migrated_db, no_mining_anvil};
use crate::support::anvil::{Anvil, mine_empty, mine_every_kind};
use crate::support::compare::{assert_db_equals_chain, wait_db_equals_head};
use crate::support::indexer::{self, Running};
use crate::support::proxy::{FaultProxy, slow_proxy};

const RUN_LIMIT: Duration = Duration::from_secs(120);

/// A chain of a few dozen blocks holding every transaction kind.
pub(crate) async fn chain_of(anvil: &Anvil, rounds: usize, empty: u64) -> u64 {
    for _ in 0..rounds {
        mine_every_kind(anvil).await;
        mine_empty(anvil, empty).await;
    }
    anvil.block_number().await
}

/// The `endpoint totals` line the run logs at its end for the endpoint on
/// `port`, as (requests, errors, throttled, benched).
fn totals(stderr: &str, url: &str) -> (u64, u64, u64, u64) {
    let port = url.rsplit(':').next().unwrap();
    let line = stderr
        .lines()
        .find(|l| l.contains("endpoint totals") && l.contains(&format!(":{port}")))
        .unwrap_or_else(|| panic!("no endpoint totals for {url} in:\n{stderr}"));
    let field = |name: &str| -> u64 {
        let rest = line
            .split(&format!("{name}="))
            .nth(1)
            .unwrap_or_else(|| panic!("no {name} in {line}"));
        rest.split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    (
        field("requests"),
        field("errors"),
        field("throttled"),
        field("benched"),
    )
}

/// The value of `metric{endpoint="…:port…"}` in a /metrics body.
fn endpoint_metric(text: &str, metric: &str, url: &str) -> Option<f64> {
    let port = url.rsplit(':').next().unwrap();
    text.lines()
        .filter(|l| l.starts_with(&format!("sender_indexer_{metric}{{")))
        .find(|l| l.contains(&format!(":{port}")))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
}

async fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_survives_a_provider_dying_for_good_and_another_lagging_20_blocks() {
    let anvil = no_mining_anvil().await;
    let target = chain_of(&anvil, 2, 30).await;
    let dying = FaultProxy::start(anvil.url()).await;
    let lagging = FaultProxy::start(anvil.url()).await;
    lagging.set_lag(20);
    // Three batches of four blocks, then gone: the blocks above the
    // lagging provider's head are left to it once it catches up.
    dying.die_after_blocks(12);
    let (pool, url) = migrated_db().await;
    let rpc = format!("{},{}", dying.url(), lagging.url());
    let to = target.to_string();
    let mut cmd = indexer::command(
        &rpc,
        &url,
        &[
            "backfill",
            "--verify",
            "off",
            "--from",
            "0",
            "--to",
            &to,
            "--batch-size",
            "4",
        ],
    );
    cmd.env("RUST_LOG", "info");
    let mut run = Running::start(cmd);
    wait_until("the first provider dies", RUN_LIMIT, || dying.is_dead()).await;
    // The lagging one now has nothing above target - 20 ...
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(run.is_running(), "backfill ended early:\n{}", run.stderr());
    // ... until the chain moves on and it catches up to the target.
    mine_empty(&anvil, 21).await;
    let status = run.wait(RUN_LIMIT).await;
    let stderr = run.stderr();
    assert!(status.success(), "backfill failed ({status}):\n{stderr}");
    assert_db_equals_chain(&pool, &anvil, 0, target).await;

    let (requests, errors, _, benched) = totals(&stderr, dying.url());
    assert!(requests > 0, "the dying provider was used first:\n{stderr}");
    assert!(
        errors > 0 && benched > 0,
        "its death was noticed:\n{stderr}"
    );
    let (requests, ..) = totals(&stderr, lagging.url());
    assert!(requests > 0, "the lagging provider took over:\n{stderr}");
    assert!(
        lagging.block_calls() > 0 && lagging.nulled() > 0,
        "the lagging provider served blocks ({}) and was asked for ones it had not got \
         while it was the only one left ({})",
        lagging.block_calls(),
        lagging.nulled()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_provider_is_not_asked_for_blocks_beyond_its_head() {
    let anvil = no_mining_anvil().await;
    let head = chain_of(&anvil, 2, 20).await;
    // The current provider is the slower one, so the pool prefers the
    // lagging one for the blocks it has (otherwise, on a loaded machine, one
    // slow answer from it could leave it unused and the test vacuous).
    let current =
        FaultProxy::start(&slow_proxy(anvil.url(), Duration::from_millis(30)).await).await;
    let lagging = FaultProxy::start(anvil.url()).await;
    lagging.set_lag(20);
    let (pool, url) = migrated_db().await;
    let rpc = format!("{},{}", lagging.url(), current.url());
    let out = tokio::task::spawn_blocking(move || {
        indexer::run_ok(
            &rpc,
            &url,
            &[
                "backfill",
                "--verify",
                "off",
                "--from",
                "0",
                "--to",
                "latest",
                "--batch-size",
                "4",
            ],
        )
    })
    .await
    .unwrap();
    assert!(out.status.success());
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert!(
        lagging.block_calls() > 0,
        "the lagging provider served the blocks it has"
    );
    assert_eq!(
        lagging.nulled(),
        0,
        "the lagging provider was asked for blocks above its head while another had them"
    );
    assert!(current.block_calls() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn follow_fails_over_from_a_dead_provider_and_metrics_show_it() {
    let anvil = no_mining_anvil().await;
    chain_of(&anvil, 1, 10).await;
    let dying = FaultProxy::start(anvil.url()).await;
    let lagging = FaultProxy::start(anvil.url()).await;
    lagging.set_lag(20);
    let (pool, url) = migrated_db().await;
    let metrics = free_local_addr();
    let rpc = format!("{},{}", dying.url(), lagging.url());
    let mut run = Running::spawn(
        &rpc,
        &url,
        &[
            "follow",
            "--verify",
            "off",
            "--from",
            "0",
            "--poll-interval-ms",
            "100",
            "--metrics-addr",
            &metrics,
        ],
    );
    wait_db_equals_head(&pool, &anvil, RUN_LIMIT, "both providers up").await;
    mine_every_kind(&anvil).await;
    wait_db_equals_head(&pool, &anvil, RUN_LIMIT, "new blocks, both up").await;

    dying.kill();
    mine_every_kind(&anvil).await;
    mine_empty(&anvil, 3).await;
    // Only the lagging provider is left: follow keeps going as far as it
    // has blocks, and all the way once it catches up.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(run.is_running(), "follow exited:\n{}", run.stderr());
    lagging.set_lag(0);
    wait_db_equals_head(&pool, &anvil, RUN_LIMIT, "after the failover").await;
    mine_every_kind(&anvil).await;
    wait_db_equals_head(&pool, &anvil, RUN_LIMIT, "on the survivor").await;

    let text = http_get(&metrics, "/metrics").await;
    let errors = endpoint_metric(&text, "rpc_endpoint_errors_total", dying.url());
    assert!(errors.is_some_and(|e| e > 0.0), "{text}");
    let benched = endpoint_metric(&text, "rpc_endpoint_benched_total", dying.url());
    assert!(benched.is_some_and(|b| b > 0.0), "{text}");
    let served = endpoint_metric(&text, "rpc_endpoint_requests_total", lagging.url());
    assert!(served.is_some_and(|r| r > 0.0), "{text}");
    let head = anvil.block_number().await as f64;
    let survivor_head = endpoint_metric(&text, "rpc_endpoint_head_block", lagging.url());
    assert_eq!(survivor_head, Some(head), "{text}");
    // Endpoint names are redacted URLs of 127.0.0.1, never anything else.
    assert!(!text.contains("password"), "{text}");
    run.terminate().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limiting_provider_is_obeyed_to_its_retry_after() {
    let anvil = no_mining_anvil().await;
    let head = chain_of(&anvil, 1, 20).await;
    let proxy = FaultProxy::start(anvil.url()).await;
    // One request a second; the rest get 429 with Retry-After: 1.
    proxy.set_throttle(Duration::from_secs(1));
    let (pool, url) = migrated_db().await;
    let started = Instant::now();
    let rpc = proxy.url().to_owned();
    let mut cmd = indexer::command(
        &rpc,
        &url,
        &[
            "backfill",
            "--verify",
            "off",
            "--from",
            "0",
            "--to",
            "latest",
            "--batch-size",
            "10",
        ],
    );
    cmd.env("RUST_LOG", "info");
    let out = tokio::task::spawn_blocking(move || indexer::finish(cmd, &["backfill"]))
        .await
        .unwrap();
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "backfill failed:\n{stderr}");
    assert_db_equals_chain(&pool, &anvil, 0, head).await;

    let (admitted, refused, early) = proxy.throttle_counts();
    assert!(refused > 0, "the provider never had to refuse anything");
    assert!(
        early.is_empty(),
        "{} requests came before their Retry-After (by {early:?})",
        early.len()
    );
    // Each admitted request may be followed by one 429 per request then in
    // flight; a client that kept hammering would collect far more.
    assert!(
        refused <= 4 * admitted,
        "{refused} refused for {admitted} admitted"
    );
    let rate = (admitted + refused) as f64 / elapsed.as_secs_f64();
    assert!(
        rate < 5.0,
        "{rate:.1} requests/s at a provider allowing 1/s"
    );
    let (requests, _, throttled, _) = totals(&stderr, proxy.url());
    assert_eq!(throttled, refused, "{stderr}");
    assert_eq!(requests, admitted + refused, "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_that_do_not_verify_on_one_provider_are_fetched_from_another() {
    let anvil = no_mining_anvil().await;
    // Empty blocks: anvil seals them right (its blob roots are wrong), so
    // the run verifies every header in full.
    mine_empty(&anvil, 30).await;
    let head = anvil.block_number().await;
    let liar = FaultProxy::start(anvil.url()).await;
    liar.set_corrupt(true);
    let honest = FaultProxy::start(anvil.url()).await;
    let (pool, url) = migrated_db().await;
    let rpc = format!("{},{}", liar.url(), honest.url());
    let to = head.to_string();
    let mut cmd = indexer::command(
        &rpc,
        &url,
        &["backfill", "--from", "0", "--to", &to, "--batch-size", "2"],
    );
    cmd.env("RUST_LOG", "info");
    let out = tokio::task::spawn_blocking(move || indexer::finish(cmd, &["backfill"]))
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "backfill failed:\n{stderr}");
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert!(liar.corrupted() > 0, "the liar served no block:\n{stderr}");
    assert!(
        stderr.contains("does not verify"),
        "its blocks were caught:\n{stderr}"
    );
    let verified: i64 = sqlx::query_scalar("SELECT count(*) FROM blocks WHERE verified = 'full'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(verified as u64, head + 1, "every stored block verified");
}
