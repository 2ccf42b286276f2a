//! The embedded default database: with no DATABASE_URL the binary manages
//! its own PostgreSQL cluster in --data-dir (as the `postgres` user when run
//! as root), and `sql` / `status` read it.
//!
//! The server's receipts for these blocks are generated: `--logs off`.

use crate::support::{fixtures, indexer, pg, rpc_server::RpcServer};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backfill_then_query_with_no_database_configured() {
    let blocks: Vec<_> = fixtures::recent_mainnet();
    let server = RpcServer::start(blocks).await.unwrap();
    let dir = pg::server_tempdir("si-embedded-");
    let data_dir = dir.path().join("pg");
    let data_dir = data_dir.to_str().unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["--data-dir", data_dir];
        all.extend_from_slice(args);
        indexer::run_ok(&server.url(), "", &all)
    };
    run(&[
        "backfill", "--logs", "off", "--from", "24476000", "--to", "24476004",
    ]);
    let out = run(&[
        "sql",
        "SELECT count(*) AS blocks, count(DISTINCT number) AS distinct_blocks FROM blocks",
    ]);
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(table.contains("blocks | distinct_blocks"), "{table}");
    assert!(table.lines().any(|l| l.trim() == "5      | 5"), "{table}");
    let out = run(&[
        "sql",
        "SELECT count(*) FROM transactions WHERE sender IS NULL OR from_matches IS NOT TRUE",
    ]);
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .any(|l| l.trim() == "0")
    );
    let out = run(&["status"]);
    let status = String::from_utf8(out.stdout).unwrap();
    assert!(
        status.contains("blocks indexed: 24476000..=24476004 (5 blocks)"),
        "{status}"
    );
    assert!(status.contains("checkpoint:     24476004"), "{status}");
    // `sql` is read-only: a change is refused, and says why.
    let mut all = vec!["--data-dir", data_dir];
    all.extend_from_slice(&["sql", "DELETE FROM blocks"]);
    let out = indexer::run(&server.url(), "", &all);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "a DELETE went through `sql`");
    assert!(err.contains("read-only transaction"), "{err}");
    assert!(err.contains("make changes with psql"), "{err}");
    let out = run(&["sql", "SELECT count(*) AS n FROM blocks"]);
    assert!(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .any(|l| l.trim() == "5"),
        "the blocks are all still there"
    );
    // The server we started was stopped when each command ended.
    assert!(!dir.path().join("pg/postmaster.pid").exists());
}
