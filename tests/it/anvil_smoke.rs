//! The anvil harness really produces each transaction kind, and its RPC
//! helpers move the chain as documented.

use std::collections::BTreeSet;

use crate::support::anvil::{Anvil, AnvilOptions, RETURN_42_INITCODE, TxKind, hex_u64};

#[tokio::test]
async fn every_tx_kind_lands_in_a_block_with_its_type() {
    let anvil = Anvil::start().await;
    let sent = anvil.send_every_kind().await;
    let create = anvil
        .send(
            0,
            TxKind::Create {
                initcode: RETURN_42_INITCODE.into(),
            },
        )
        .await;
    for (hash, _) in &sent {
        assert_eq!(anvil.receipt(hash).await["status"], "0x1", "tx {hash}");
    }
    let receipt = anvil.receipt(&create).await;
    assert!(receipt["contractAddress"].is_string(), "{receipt}");

    let mut types = BTreeSet::new();
    let mut creations = 0;
    for n in 1..=anvil.block_number().await {
        for tx in anvil.block(n).await["transactions"].as_array().unwrap() {
            types.insert(hex_u64(&tx["type"]));
            creations += usize::from(tx["to"].is_null());
        }
    }
    assert_eq!(types, BTreeSet::from([0, 1, 2, 3, 4]));
    assert_eq!(creations, 1);
    for (hash, ty) in &sent {
        assert_eq!(hex_u64(&anvil.tx(hash).await["type"]), *ty, "tx {hash}");
    }
    // The sponsored authorization was signed by account 7, not the sender.
    let auth = &anvil.tx(&sent[5].0).await["authorizationList"][0];
    assert_eq!(hex_u64(&auth["nonce"]), 0, "{auth}");
    let code = anvil.cast(&["code", anvil.account(7).0]).await;
    assert!(
        code.starts_with("0xef0100"),
        "account 7 should carry a delegation, has {code}"
    );
}

#[tokio::test]
async fn no_mining_queues_txs_and_rpc_helpers_move_the_chain() {
    let anvil = Anvil::start_with(AnvilOptions {
        no_mining: true,
        ..Default::default()
    })
    .await;
    let a = anvil.send(1, TxKind::Eip1559).await;
    let b = anvil.send(1, TxKind::Eip1559).await;
    assert_eq!(anvil.block_number().await, 0);
    anvil.mine().await;
    assert_eq!(anvil.block_number().await, 1);
    let block = anvil.block(1).await;
    let hashes: Vec<&str> = block["transactions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["hash"].as_str().unwrap())
        .collect();
    assert_eq!(hashes, [a.as_str(), b.as_str()]);

    anvil.mine().await;
    let before = anvil.block(2).await["hash"].clone();
    anvil.reorg(1).await;
    assert_eq!(anvil.block_number().await, 2);
    assert_ne!(
        anvil.block(2).await["hash"],
        before,
        "reorg replaces block 2"
    );
    anvil.rollback(1).await;
    assert_eq!(anvil.block_number().await, 1);
}
