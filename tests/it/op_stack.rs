//! An OP Stack chain end to end: `anvil --network optimism` answering as
//! Base (support/op_chain.rs), deposits of every shape mixed with signed
//! transactions, indexed by `backfill` then `follow` with default settings
//! (the op-stack profile from `eth_chainId`, verification on). The
//! database must equal the node, every block verified in full, every
//! deposit's sender `committed` with its signed fields stored, every other
//! sender `recovered`, each block's L1 origin from its L1-attributes
//! deposit; a provider that changes a deposit's `from`, `mint` or calldata,
//! or reports another L1 block number, is caught and nothing of that block
//! is stored.

use std::sync::Arc;
use std::time::Duration;

use alloy_primitives::Address;
use serde_json::Value;
use sqlx::PgPool;

use crate::support::anvil::{Anvil, hex_u64, mine_empty};
use crate::support::compare::{assert_db_equals_chain, chain, wait_db_equals_head};
use crate::support::indexer::{self, Running};
use crate::support::op_chain::{
    Deposit, L1_ATTRIBUTES_DEPOSITOR, L1_BLOCK, deposits_of_every_shape, l1_origin_of_round,
    mine_op_round, start_op_anvil,
};
use crate::support::pg;
use crate::support::proxy::FaultProxy;

const SYNC_LIMIT: Duration = Duration::from_secs(60);

fn is_deposit(tx: &Value) -> bool {
    tx["type"]
        .as_str()
        .is_some_and(|t| t.eq_ignore_ascii_case("0x7e"))
}

/// block_number, tx_index, sender_source, source_hash, mint, is_system_tx,
/// contract_address, status of one stored transaction.
type TxRow = (
    i64,
    i32,
    String,
    Option<Vec<u8>>,
    Option<String>,
    Option<bool>,
    Option<Vec<u8>>,
    Option<i16>,
);

/// Per stored transaction, what the node and the deposits sent say it must
/// be: sender source, and for deposits (source hash, mint, is_system_tx).
async fn assert_sources_and_deposit_fields(pool: &PgPool, anvil: &Anvil, deposits: &[Deposit]) {
    let head = anvil.block_number().await;
    let rows: Vec<TxRow> =
        sqlx::query_as(
            "SELECT block_number, tx_index, sender_source, source_hash, mint::text, is_system_tx, contract_address, status \
             FROM transactions ORDER BY block_number, tx_index",
        )
        .fetch_all(pool)
        .await
        .unwrap();
    let mut i = 0;
    let mut seen_deposits = 0;
    for b in chain(anvil, 0, head).await {
        for tx in b["transactions"].as_array().unwrap() {
            let (n, idx, source, source_hash, mint, system, contract, status) = &rows[i];
            i += 1;
            let at = format!("block {n} tx {idx} ({})", tx["hash"]);
            assert_eq!(
                (*n as u64, *idx as u64),
                (hex_u64(&b["number"]), hex_u64(&tx["transactionIndex"])),
                "{at}"
            );
            let receipt = anvil.receipt(tx["hash"].as_str().unwrap()).await;
            assert_eq!(
                contract.as_ref().map(|c| format!("0x{}", hex::encode(c))),
                receipt["contractAddress"].as_str().map(str::to_lowercase),
                "{at}: contract address"
            );
            assert_eq!(
                *status as Option<i16>,
                Some(hex_u64(&receipt["status"]) as i16),
                "{at}: status"
            );
            if is_deposit(tx) {
                seen_deposits += 1;
                let d = deposits
                    .iter()
                    .find(|d| format!("{}", d.hash()) == tx["hash"].as_str().unwrap())
                    .unwrap_or_else(|| panic!("{at}: a deposit this test did not send"));
                assert_eq!(source, "committed", "{at}");
                assert_eq!(
                    source_hash.as_deref(),
                    Some(d.source_hash.as_slice()),
                    "{at}"
                );
                assert_eq!(mint.as_deref(), Some(d.mint.to_string().as_str()), "{at}");
                assert_eq!(*system, Some(d.is_system_tx), "{at}");
            } else {
                assert_eq!(source, "recovered", "{at}");
                assert_eq!((source_hash, mint, system), (&None, &None, &None), "{at}");
            }
        }
    }
    assert_eq!(i, rows.len(), "rows beyond the node's transactions");
    assert_eq!(seen_deposits, deposits.len(), "deposits stored");
}

/// `blocks.l1_block_number` is the number in the block's first
/// transaction when that is the L1-attributes deposit of a round (read here
/// from the node's block, bytes 28..36 of Ecotone's layout), NULL for any
/// other block; and every round's deposit opened its block.
async fn assert_l1_origins(pool: &PgPool, anvil: &Anvil, rounds: std::ops::Range<u64>) {
    let stored: Vec<(i64, Option<i64>)> =
        sqlx::query_as("SELECT number, l1_block_number FROM blocks ORDER BY number")
            .fetch_all(pool)
            .await
            .unwrap();
    let head = stored.last().unwrap().0 as u64;
    let mut seen = Vec::new();
    for (b, (number, l1)) in chain(anvil, 0, head).await.iter().zip(&stored) {
        let first = b["transactions"].as_array().unwrap().first();
        let expected = first
            .filter(|tx| {
                is_deposit(tx)
                    && tx["from"]
                        .as_str()
                        .is_some_and(|a| a.eq_ignore_ascii_case(L1_ATTRIBUTES_DEPOSITOR))
                    && tx["to"]
                        .as_str()
                        .is_some_and(|a| a.eq_ignore_ascii_case(L1_BLOCK))
            })
            .map(|tx| {
                let input = hex::decode(&tx["input"].as_str().unwrap()[2..]).unwrap();
                u64::from_be_bytes(input[28..36].try_into().unwrap()) as i64
            });
        assert_eq!(*l1, expected, "block {number}");
        seen.extend(expected);
    }
    let rounds: Vec<i64> = rounds.map(|r| l1_origin_of_round(r) as i64).collect();
    assert_eq!(
        seen, rounds,
        "each round's L1-attributes deposit first in its block"
    );
}

async fn assert_every_block_verified_in_full(pool: &PgPool) {
    let levels: Vec<(Option<String>, i64)> =
        sqlx::query_as("SELECT verified, count(*) FROM blocks GROUP BY verified")
            .fetch_all(pool)
            .await
            .unwrap();
    assert_eq!(levels.len(), 1, "{levels:?}");
    assert_eq!(levels[0].0.as_deref(), Some("full"), "{levels:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_then_follow_of_an_op_stack_chain_equal_the_node_every_block_verified() {
    let anvil = start_op_anvil().await;
    let mut deposits = Vec::new();
    for salt in 0..3 {
        deposits.extend(mine_op_round(&anvil, salt, false).await.deposits);
        mine_empty(&anvil, 1).await;
    }
    // The chain holds what the test means: deposits of every shape, with
    // the receipt fields OP gives them, and every signed type.
    let head = anvil.block_number().await;
    let mut types = std::collections::BTreeSet::new();
    for b in chain(&anvil, 0, head).await {
        for tx in b["transactions"].as_array().unwrap() {
            types.insert(hex_u64(&tx["type"]));
            if is_deposit(tx) {
                let r = anvil.receipt(tx["hash"].as_str().unwrap()).await;
                assert!(r.get("depositNonce").is_some(), "{r}");
            }
        }
    }
    assert_eq!(types, [0, 1, 2, 0x7e].into());

    let (pool, url) = pg::fresh_db().await;
    let to = head.to_string();
    indexer::run_ok(anvil.url(), &url, &["backfill", "--from", "0", "--to", &to]);
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert_every_block_verified_in_full(&pool).await;
    assert_sources_and_deposit_fields(&pool, &anvil, &deposits).await;
    assert_l1_origins(&pool, &anvil, 0..3).await;

    // `status` counts senders by source.
    let out = indexer::run_ok(anvil.url(), &url, &["status"]);
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(status.contains("committed"), "{status}");

    // Following the head from there, new rounds land the same way.
    let mut run = Running::spawn(anvil.url(), &url, &["follow", "--poll-interval-ms", "200"]);
    for salt in 3..5 {
        deposits.extend(mine_op_round(&anvil, salt, false).await.deposits);
        wait_db_equals_head(&pool, &anvil, SYNC_LIMIT, &format!("round {salt}")).await;
    }
    assert!(
        run.try_status().is_none(),
        "follow exited:\n{}",
        run.stderr()
    );
    run.terminate().await;
    assert_every_block_verified_in_full(&pool).await;
    assert_sources_and_deposit_fields(&pool, &anvil, &deposits).await;
    assert_l1_origins(&pool, &anvil, 0..5).await;
}

/// A proxy that changes `field` of the first deposit of every block it
/// serves to `to`.
fn lie_about_deposits(proxy: &FaultProxy, field: &'static str, to: &'static str) {
    proxy.set_edit(Some(Arc::new(move |method, result| {
        if method != "eth_getBlockByNumber" {
            return false;
        }
        let Some(txs) = result["transactions"].as_array_mut() else {
            return false;
        };
        match txs.iter_mut().find(|t| is_deposit(t)) {
            Some(tx) => {
                tx[field] = Value::from(to);
                true
            }
            None => false,
        }
    })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_changes_a_deposits_from_mint_or_calldata_is_caught() {
    let anvil = start_op_anvil().await;
    mine_op_round(&anvil, 0, false).await;
    let head = anvil.block_number().await;
    assert_eq!(head, 1);
    // The first deposit is the L1-attributes one: another L1 block number
    // in its calldata changes its hash too.
    let round_0 = deposits_of_every_shape(0, Address::ZERO, false);
    let mut input = round_0[0].data.clone();
    input[28..36].copy_from_slice(&(l1_origin_of_round(0) + 1).to_be_bytes());
    let input: &'static str = format!("0x{}", hex::encode(input)).leak();
    for (field, to) in [
        ("from", "0x00000000000000000000000000000000000b0b01"),
        ("mint", "0xde0b6b3a7640000"),
        ("input", input),
    ] {
        let proxy = FaultProxy::start(anvil.url()).await;
        lie_about_deposits(&proxy, field, to);
        let (pool, url) = pg::fresh_db().await;
        let out = indexer::run(proxy.url(), &url, &["backfill", "--from", "0", "--to", "1"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success(),
            "a deposit's {field} changed: not caught\n{err}"
        );
        assert!(proxy.edited() > 0, "the proxy changed nothing");
        assert!(err.contains("block 1"), "{field}: {err}");
        assert!(err.contains("hash"), "{field}: {err}");
        let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM blocks WHERE number = 1")
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(stored, 0, "{field}: the lied-about block was stored");
    }
}

/// A node that reports `l1BlockNumber` (as Arbitrum's do) is held to the
/// number the L1-attributes deposit commits: equal, the block is stored
/// with it; different, the run stops naming the field and nothing of the
/// block is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reported_l1_block_number_must_be_the_deposits() {
    let anvil = start_op_anvil().await;
    mine_op_round(&anvil, 0, false).await;
    let committed = l1_origin_of_round(0);
    for (reported, ok) in [(committed, true), (committed + 1, false)] {
        let proxy = FaultProxy::start(anvil.url()).await;
        proxy.set_edit(Some(Arc::new(move |method, result| {
            if method != "eth_getBlockByNumber" || result["number"] != "0x1" {
                return false;
            }
            result["l1BlockNumber"] = Value::from(format!("{reported:#x}"));
            true
        })));
        let (pool, url) = pg::fresh_db().await;
        let out = indexer::run(proxy.url(), &url, &["backfill", "--from", "0", "--to", "1"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(proxy.edited() > 0, "the proxy changed nothing");
        let stored: Option<Option<i64>> =
            sqlx::query_scalar("SELECT l1_block_number FROM blocks WHERE number = 1")
                .fetch_optional(&pool)
                .await
                .unwrap();
        if ok {
            assert!(out.status.success(), "{err}");
            assert_eq!(stored, Some(Some(committed as i64)));
        } else {
            assert!(!out.status.success(), "a different l1BlockNumber passed");
            assert!(
                err.contains("block 1") && err.contains("l1BlockNumber"),
                "{err}"
            );
            assert!(err.contains("L1-attributes deposit"), "{err}");
            assert_eq!(stored, None, "the block was stored");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposit_creation_is_checked_by_its_deposit_nonce() {
    let anvil = start_op_anvil().await;
    let round = mine_op_round(&anvil, 0, true).await;
    let creation = round.deposits.iter().find(|d| d.to.is_none()).unwrap();
    let hash = format!("{}", creation.hash());
    let receipt = anvil.receipt(&hash).await;
    let deposit_nonce = hex_u64(&receipt["depositNonce"]);
    // anvil's own receipt: the address of the nonce before the deposit,
    // and depositNonce one past it (op-geth: the same nonce in both).
    let (pool, url) = pg::fresh_db().await;
    let out = indexer::run(anvil.url(), &url, &["backfill", "--from", "0", "--to", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "anvil's deposit creation verified:\n{err}"
    );
    let index = hex_u64(&receipt["transactionIndex"]);
    for part in [
        "block 1".to_owned(),
        format!("receipt {index} contractAddress does not verify"),
        format!(
            "the node says {}",
            receipt["contractAddress"].as_str().unwrap().to_lowercase()
        ),
        "the sender and depositNonce give".to_owned(),
    ] {
        assert!(err.contains(&part), "{part:?} not in:\n{err}");
    }
    assert!(deposit_nonce >= 1, "{receipt}");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM blocks WHERE number = 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}

/// What the proxy below reports as a signed transaction's `l1Fee`,
/// `l1GasUsed` and `l1GasPrice` (in wei and gas; each row different).
fn l1_costs_of(block: u64, index: u64) -> [u128; 3] {
    [
        0x10_5d4b_2024 * u128::from(block + 1) + u128::from(index),
        0x800 + u128::from(index),
        0x5_d749_a07e + u128::from(block),
    ]
}

/// A proxy that adds to each receipt of a signed transaction the L1 costs
/// op-geth reports there ([`l1_costs_of`]; a deposit's receipt has none),
/// or with `l1_fee` set, that `l1Fee` instead.
fn report_l1_costs(proxy: &FaultProxy, l1_fee: Option<&'static str>) {
    proxy.set_edit(Some(Arc::new(move |method, result| {
        if method != "eth_getBlockReceipts" && method != "eth_getTransactionReceipt" {
            return false;
        }
        let receipts: Vec<&mut Value> = match result {
            Value::Array(list) => list.iter_mut().collect(),
            Value::Object(_) => vec![result],
            _ => return false,
        };
        let mut edited = false;
        for r in receipts {
            if is_deposit(r) {
                continue;
            }
            let (block, index) = (hex_u64(&r["blockNumber"]), hex_u64(&r["transactionIndex"]));
            let [fee, used, price] = l1_costs_of(block, index);
            r["l1Fee"] = Value::from(l1_fee.map_or(format!("{fee:#x}"), String::from));
            r["l1GasUsed"] = Value::from(format!("{used:#x}"));
            r["l1GasPrice"] = Value::from(format!("{price:#x}"));
            edited = true;
        }
        edited
    })));
}

/// block_number, tx_index, tx_type, l1_fee, l1_gas_used, l1_gas_price,
/// gas_used_for_l1 of one stored transaction.
type L1Row = (
    i64,
    i32,
    i16,
    Option<String>,
    Option<String>,
    Option<String>,
    Option<i64>,
);

/// The L1 costs an OP node adds to its receipts are outside the receipts
/// root: blocks carrying them verify in full, and each is stored as the
/// node reported it (none for deposits). One that is not a quantity stops
/// the run naming the block and the field, and nothing of it is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_l1_costs_an_op_node_reports_are_stored_as_reported() {
    let anvil = start_op_anvil().await;
    mine_op_round(&anvil, 0, false).await;
    mine_op_round(&anvil, 1, false).await;
    let head = anvil.block_number().await;
    let proxy = FaultProxy::start(anvil.url()).await;
    report_l1_costs(&proxy, None);
    let (pool, url) = pg::fresh_db().await;
    let to = head.to_string();
    indexer::run_ok(proxy.url(), &url, &["backfill", "--from", "0", "--to", &to]);
    assert!(proxy.edited() > 0, "the proxy reported no L1 costs");
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    assert_every_block_verified_in_full(&pool).await;
    let rows: Vec<L1Row> = sqlx::query_as(
        "SELECT block_number, tx_index, tx_type, l1_fee::text, l1_gas_used::text, \
                l1_gas_price::text, gas_used_for_l1 \
         FROM transactions ORDER BY block_number, tx_index",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let (mut signed, mut deposits) = (0, 0);
    for (block, index, tx_type, fee, used, price, for_l1) in &rows {
        let got = [fee.clone(), used.clone(), price.clone()];
        if *tx_type == 0x7e {
            deposits += 1;
            assert_eq!(got, [None, None, None], "deposit {block}/{index}");
        } else {
            signed += 1;
            let want = l1_costs_of(*block as u64, *index as u64).map(|v| Some(v.to_string()));
            assert_eq!(got, want, "tx {block}/{index}");
        }
        assert_eq!(*for_l1, None, "tx {block}/{index}");
    }
    assert!(
        signed > 0 && deposits > 0,
        "{signed} signed, {deposits} deposits"
    );

    report_l1_costs(&proxy, Some("0.684"));
    let (pool, url) = pg::fresh_db().await;
    let out = indexer::run(proxy.url(), &url, &["backfill", "--from", "1", "--to", "1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "l1Fee 0.684 accepted:\n{err}");
    assert!(err.contains("block 1") && err.contains("l1Fee"), "{err}");
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM transactions")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 0, "a block with a malformed l1Fee was stored");
}
