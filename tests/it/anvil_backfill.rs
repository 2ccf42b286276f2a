//! `backfill` against a real anvil chain holding every transaction kind:
//! the database must equal the node's chain exactly, a rerun changes
//! nothing, and a run killed part-way then restarted ends with the rows of
//! a clean run. Also home of [`assert_db_equals_chain`], shared with the
//! `follow` tests.
//!
//! anvil 1.7.1 (the latest release) computes `transactionsRoot` over blob
//! transactions with their sidecars (foundry-rs/foundry#15132, fixed after
//! it), so runs whose chain holds blob transactions use `--verify off`;
//! `verify.rs` shows that failure caught and covers the rest on anvil.

use std::collections::BTreeSet;
use std::time::Duration;

use nix::sys::signal::Signal;

use crate::support::anvil::{Anvil, AnvilOptions, hex_u64, mine_empty, mine_every_kind};
use crate::support::compare::{assert_db_equals_chain, chain, snapshot};
use crate::support::indexer::Running;
use crate::support::proxy::slow_proxy;
use crate::support::{indexer, pg};

async fn every_kind_chain() -> Anvil {
    let anvil = Anvil::start_with(AnvilOptions {
        no_mining: true,
        ..Default::default()
    })
    .await;
    let mut sent = Vec::new();
    for _ in 0..3 {
        sent.extend(mine_every_kind(&anvil).await);
        mine_empty(&anvil, 2).await;
    }
    // Every tx really landed (anvil drops some mixed-fee pending txs).
    for h in &sent {
        assert_eq!(anvil.receipt(h).await["status"], "0x1", "tx {h}");
    }
    let head = anvil.block_number().await;
    let mut types = BTreeSet::new();
    let mut creations = 0;
    for b in chain(&anvil, 0, head).await {
        for tx in b["transactions"].as_array().unwrap() {
            types.insert(hex_u64(&tx["type"]));
            creations += usize::from(tx["to"].is_null());
        }
    }
    assert_eq!(types, BTreeSet::from([0, 1, 2, 3, 4]));
    assert_eq!(creations, 3);
    anvil
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_of_every_tx_kind_equals_the_node_and_reruns_change_nothing() {
    let anvil = every_kind_chain().await;
    let head = anvil.block_number().await;
    let (pool, url) = pg::fresh_db().await;
    indexer::run_ok(
        anvil.url(),
        &url,
        &[
            "backfill", "--verify", "off", "--from", "0", "--to", "latest",
        ],
    );
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    let auths: i64 = sqlx::query_scalar("SELECT count(*) FROM authorizations")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(auths, 6, "two type-4 txs in each of three blocks");
    // The self-sponsored authority is the sender; the sponsored one is
    // account 7, not the sender.
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = sqlx::query_as(
        "SELECT t.sender, a.authority FROM authorizations a JOIN transactions t USING (block_number, tx_index)",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let acct = |i: usize| hex::decode(anvil.account(i).0.trim_start_matches("0x")).unwrap();
    for (sender, authority) in &pairs {
        if *sender == acct(5) {
            assert_eq!(*authority, acct(5));
        } else {
            assert_eq!((sender, authority), (&acct(6), &acct(7)));
        }
    }

    let before = snapshot(&pool).await;
    indexer::run_ok(
        anvil.url(),
        &url,
        &[
            "backfill", "--verify", "off", "--from", "0", "--to", "latest",
        ],
    );
    indexer::run_ok(
        anvil.url(),
        &url,
        &["backfill", "--verify", "off", "--from", "2", "--to", "5"],
    );
    assert_eq!(snapshot(&pool).await, before, "a rerun changed rows");
    let reorgs: i64 = sqlx::query_scalar("SELECT count(*) FROM reorgs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(reorgs, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_killed_part_way_then_restarted_equals_a_clean_run() {
    let anvil = every_kind_chain().await;
    mine_empty(&anvil, 400).await;
    mine_every_kind(&anvil).await;
    let head = anvil.block_number().await;
    let to = head.to_string();
    let args = [
        "backfill",
        "--verify",
        "off",
        "--from",
        "0",
        "--to",
        &to,
        "--batch-size",
        "5",
        "--concurrency",
        "1",
    ];

    let (clean_pool, clean_url) = pg::fresh_db().await;
    indexer::run_ok(anvil.url(), &clean_url, &args);
    assert_db_equals_chain(&clean_pool, &anvil, 0, head).await;
    let clean = snapshot(&clean_pool).await;

    let (pool, url) = pg::fresh_db().await;
    // Tables exist before the binary starts, for polling the checkpoint.
    sender_indexer::store::MIGRATOR.run(&pool).await.unwrap();
    // Through a slow proxy, so the kill lands while most of the range is
    // still to fetch.
    let slow = slow_proxy(anvil.url(), Duration::from_millis(10)).await;
    let mut run = Running::spawn(&slow, &url, &args);
    let killed_at = run
        .signal_after_checkpoint(&pool, 0, Signal::SIGKILL, Duration::from_secs(60))
        .await;
    let status = run.wait(Duration::from_secs(10)).await;
    assert!(!status.success(), "killed run exited {status}");
    assert!(killed_at < head, "killed at {killed_at}, head {head}");
    // What the killed run left is a consistent prefix of the chain.
    let cp: i64 = sqlx::query_scalar("SELECT block_number FROM checkpoint")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(
        (cp as u64) < head,
        "the kill came too late: checkpoint {cp}"
    );
    assert_db_equals_chain(&pool, &anvil, 0, cp as u64).await;

    indexer::run_ok(anvil.url(), &url, &args);
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert_eq!(snapshot(&pool).await, clean);
}
