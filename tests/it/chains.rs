//! Chain profiles on real blocks of other chains (tests/fixtures/chains,
//! provenance in tests/fixtures/SOURCES.md): each whole block, with its
//! receipts where we have them, goes through the pipeline's own per-block
//! path by its chain's profile. It must verify as far as the profile
//! allows, with `blocks.verified` at the level reached and every sender
//! from the place the profile names; under Ethereum's rules the same block
//! is refused with an error naming the type, the block, the chain id and
//! the setting; and a changed field is caught.
//!
//! A real node with a chain's features, where anvil has them: `anvil --celo`
//! under the celo profile (`anvil --network optimism` has `op_stack`).

use serde_json::Value;

use sender_indexer::chain::{Chain, Family, SenderSource};
use sender_indexer::testing::check_block_text_on;

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/chains/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

struct Case {
    block: &'static str,
    receipts: Option<&'static str>,
    chain_id: u64,
    level: &'static str,
    sources: &'static [SenderSource],
    /// The L1 block number its verified header commits to (Arbitrum Nitro).
    l1_block: Option<u64>,
}

use SenderSource::{None as NoSender, Recovered, Reported};

const CASES: &[Case] = &[
    Case {
        block: "arb-sepolia-185232421.json",
        receipts: Some("arb-sepolia-185232421.receipts.json"),
        chain_id: 421614,
        level: "full",
        sources: &[
            NoSender, Recovered, Recovered, Recovered, Recovered, Recovered, Recovered,
        ],
        l1_block: Some(0x897f00),
    },
    Case {
        block: "arbitrum-16464264.json",
        receipts: Some("arbitrum-16464264.receipts.json"),
        chain_id: 42161,
        level: "header",
        sources: &[Reported],
        l1_block: None,
    },
    Case {
        block: "polygon-9013760.json",
        receipts: Some("polygon-9013760.receipts.json"),
        chain_id: 137,
        level: "full",
        sources: &[Recovered, Recovered, Recovered, Recovered],
        l1_block: None,
    },
    Case {
        block: "polygon-23887160.json",
        receipts: Some("polygon-23887160.receipts.json"),
        chain_id: 137,
        level: "full",
        sources: &[Recovered],
        l1_block: None,
    },
    Case {
        block: "polygon-820461.json",
        receipts: None,
        chain_id: 137,
        level: "full",
        sources: &[Recovered],
        l1_block: None,
    },
    Case {
        block: "zksync-35533.json",
        receipts: None,
        chain_id: 324,
        level: "links",
        sources: &[Reported],
        l1_block: None,
    },
];

#[test]
fn real_blocks_of_other_chains_verify_by_their_profile() {
    for c in CASES {
        let chain = Chain::resolve(c.chain_id, None);
        let receipts = c.receipts.map(fixture);
        let block = check_block_text_on(chain, &fixture(c.block), receipts.as_deref())
            .unwrap_or_else(|e| panic!("{} on {}: {e:#}", c.block, chain.describe()));
        assert_eq!(block.verified.as_str(), c.level, "{}", c.block);
        assert_eq!(block.l1_block_number, c.l1_block, "{}", c.block);
        let sources: Vec<_> = block.txs.iter().map(|t| t.recovered.source).collect();
        assert_eq!(sources, c.sources, "{}", c.block);
        for (i, t) in block.txs.iter().enumerate() {
            match t.recovered.source {
                // A recovered sender is the node's `from` on these real blocks.
                Recovered | Reported => assert_eq!(
                    t.recovered.sender.as_ref().ok(),
                    t.tx.from.as_ref(),
                    "{} tx {i}",
                    c.block
                ),
                NoSender => assert!(t.recovered.sender.is_err(), "{} tx {i}", c.block),
                SenderSource::Committed => {}
            }
        }
    }
}

#[test]
fn a_chain_type_under_another_profile_names_the_type_block_chain_and_setting() {
    let text = fixture("arb-sepolia-185232421.json");
    let err = check_block_text_on(Chain::resolve(1, None), &text, None).unwrap_err();
    let msg = format!("{err:#}");
    for want in [
        "0x6a",
        "185232421",
        "chain id 1",
        "chain.profile",
        "--chain-profile",
    ] {
        assert!(msg.contains(want), "{want:?} missing from: {msg}");
    }
    // An id no table lists, with the profile set: the same block verifies.
    let chain = Chain::resolve(999_999_999, Some(Family::Arbitrum));
    let err = check_block_text_on(chain, &text, None);
    // Its chain id is not Arbitrum Sepolia's, so the signed txs' EIP-155
    // ids differ from the chain's; they still recover and hash.
    assert!(err.is_ok(), "{:#}", err.unwrap_err());
}

/// A change to a block's JSON.
type Change = Box<dyn Fn(&mut Value)>;

/// `text` with `f` applied to its JSON.
fn edit(text: &str, f: impl FnOnce(&mut Value)) -> String {
    let mut v: Value = serde_json::from_str(text).unwrap();
    f(&mut v);
    v.to_string()
}

#[test]
fn a_changed_field_of_a_chain_block_is_caught() {
    let chain = Chain::resolve(421614, None);
    let text = fixture("arb-sepolia-185232421.json");
    let receipts = fixture("arb-sepolia-185232421.receipts.json");
    let changes: Vec<(&str, Change)> = vec![
        (
            "internal tx input",
            Box::new(|v| {
                let input = v["transactions"][0]["input"].as_str().unwrap().to_owned();
                let last = if input.ends_with('0') { "1" } else { "0" };
                v["transactions"][0]["input"] =
                    Value::from(format!("{}{last}", &input[..input.len() - 1]));
            }),
        ),
        (
            "signed tx value",
            Box::new(|v| {
                v["transactions"][1]["value"] = Value::from("0x1234");
            }),
        ),
        (
            "dropped tx",
            Box::new(|v| {
                v["transactions"].as_array_mut().unwrap().remove(0);
            }),
        ),
        (
            "l1BlockNumber",
            Box::new(|v| {
                v["l1BlockNumber"] = Value::from("0x897f01");
            }),
        ),
    ];
    for (what, change) in &changes {
        let changed = edit(&text, change);
        let receipts = (*what != "dropped tx").then_some(receipts.as_str());
        let err = match check_block_text_on(chain, &changed, receipts) {
            Ok(_) => panic!("{what}: not caught"),
            Err(e) => format!("{e:#}"),
        };
        if *what == "l1BlockNumber" {
            assert!(
                err.contains("l1BlockNumber") && err.contains("0x897f00"),
                "{err}"
            );
        }
    }
    let changed = edit(&receipts, |v| {
        v[2]["cumulativeGasUsed"] = Value::from("0x1");
    });
    assert!(
        check_block_text_on(chain, &text, Some(&changed)).is_err(),
        "receipt change not caught"
    );
}

/// The receipts a node serves for a case's block: its receipt set, or for
/// the zkSync block the one receipt of its one transaction.
fn served_receipts(c: &Case) -> Option<Value> {
    match (c.receipts, c.block) {
        (Some(name), _) => Some(serde_json::from_str(&fixture(name)).unwrap()),
        (None, "zksync-35533.json") => Some(Value::Array(vec![
            serde_json::from_str(&fixture("zksync-receipt-e56c1190.json")).unwrap(),
        ])),
        (None, _) => None,
    }
}

/// sender_source, sender, node_from, gas_used_for_l1, l1_fee of one
/// stored transaction.
type SourceRow = (
    String,
    Option<Vec<u8>>,
    Option<Vec<u8>>,
    Option<i64>,
    Option<String>,
);

/// Through the whole binary and PostgreSQL: each real block, served by a
/// node answering its chain's id, is stored by `backfill` with default
/// settings at the level its profile reached, each sender with its source.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_stores_blocks_of_other_chains_at_the_level_reached() {
    use crate::support::rpc_server::RpcServer;
    use crate::support::{indexer, pg};

    let mut levels = std::collections::BTreeSet::new();
    for c in CASES {
        let Some(receipts) = served_receipts(c) else {
            continue;
        };
        let block: Value = serde_json::from_str(&fixture(c.block)).unwrap();
        let number = block["number"].as_str().unwrap();
        let n = u64::from_str_radix(number.trim_start_matches("0x"), 16).unwrap();
        let server = RpcServer::start(vec![block.clone()]).await.unwrap();
        server.set_chain_id(c.chain_id);
        server.insert_receipts(n, &receipts);
        let (pool, url) = pg::fresh_db().await;
        let n_text = n.to_string();
        indexer::run_ok(
            &server.url(),
            &url,
            &["backfill", "--from", &n_text, "--to", &n_text],
        );
        let (verified, l1_block): (Option<String>, Option<i64>) =
            sqlx::query_as("SELECT verified, l1_block_number FROM blocks WHERE number = $1")
                .bind(n as i64)
                .fetch_one(&pool)
                .await
                .unwrap();
        assert_eq!(verified.as_deref(), Some(c.level), "{}", c.block);
        assert_eq!(l1_block, c.l1_block.map(|b| b as i64), "{}", c.block);
        levels.insert(c.level);
        let rows: Vec<SourceRow> = sqlx::query_as(
            "SELECT sender_source, sender, node_from, gas_used_for_l1, l1_fee::text \
             FROM transactions ORDER BY tx_index",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        let want: Vec<&str> = c.sources.iter().map(|s| s.as_str()).collect();
        let got: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(got, want, "{}", c.block);
        let served = receipts.as_array().unwrap();
        for (i, (source, sender, from, for_l1, l1_fee)) in rows.iter().enumerate() {
            match source.as_str() {
                "none" => assert!(sender.is_none(), "{} tx {i}", c.block),
                _ => assert_eq!(sender, from, "{} tx {i}", c.block),
            }
            // Arbitrum's gasUsedForL1 as its node reported it; no l1Fee on
            // these chains.
            let want = served[i]["gasUsedForL1"]
                .as_str()
                .map(|h| i64::from_str_radix(h.trim_start_matches("0x"), 16).unwrap());
            assert_eq!(*for_l1, want, "{} tx {i}", c.block);
            assert_eq!(*l1_fee, None, "{} tx {i}", c.block);
            if c.chain_id == 421614 {
                assert!(for_l1.is_some(), "{} tx {i}", c.block);
            }
        }
    }
    // Each level a profile can reach below full is stored, not refused by
    // the table.
    assert_eq!(levels, ["full", "header", "links"].into());
}

/// `anvil --celo` (anvil's Celo features; it answers chain id 31337, so
/// the profile is set, as for a Celo devnet of one's own): every signed
/// type a Celo L2 block can hold on anvil (legacy, EIP-2930, EIP-1559,
/// EIP-7702 self-signed and sponsored), backfilled with `--chain-profile
/// celo`: the database equals the node, every block verified in full,
/// every sender recovered and equal to the node's `from`, both
/// authorizations valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anvil_celo_chain_under_the_celo_profile_equals_the_node_verified_in_full() {
    use crate::support::anvil::{Anvil, AnvilOptions, TxKind, hex_u64};
    use crate::support::compare::assert_db_equals_chain;
    use crate::support::{indexer, pg};

    let anvil = Anvil::start_with(AnvilOptions {
        extra_args: vec!["--celo".into()],
        ..AnvilOptions::default()
    })
    .await;
    let delegate = anvil.account(8).0.to_string();
    let kinds = [
        (1, TxKind::Legacy, 0),
        (2, TxKind::AccessList, 1),
        (3, TxKind::Eip1559, 2),
        (
            5,
            TxKind::SetCode {
                delegate: delegate.clone(),
            },
            4,
        ),
        (
            6,
            TxKind::SponsoredSetCode {
                authority: 7,
                delegate,
            },
            4,
        ),
    ];
    for (from, kind, tx_type) in kinds {
        let hash = anvil.send(from, kind.clone()).await;
        let receipt = anvil.receipt(&hash).await;
        assert_eq!(hex_u64(&receipt["type"]), tx_type, "{kind:?}");
        assert_eq!(hex_u64(&receipt["status"]), 1, "{kind:?}");
    }
    let head = anvil.block_number().await;
    let (pool, url) = pg::fresh_db().await;
    let to = head.to_string();
    indexer::run_ok(
        anvil.url(),
        &url,
        &[
            "backfill",
            "--from",
            "0",
            "--to",
            &to,
            "--chain-profile",
            "celo",
        ],
    );
    assert_db_equals_chain(&pool, &anvil, 0, head).await;
    let (blocks, full): (i64, i64) =
        sqlx::query_as("SELECT count(*), count(*) FILTER (WHERE verified = 'full') FROM blocks")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!((blocks, full), (head as i64 + 1, head as i64 + 1));
    let senders: Vec<(String, Option<bool>)> = sqlx::query_as(
        "SELECT sender_source, from_matches FROM transactions ORDER BY block_number, tx_index",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(senders, vec![("recovered".to_string(), Some(true)); 5]);
    let valid: Vec<Option<bool>> = sqlx::query_scalar("SELECT valid FROM authorizations")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(valid, [Some(true), Some(true)]);
}
