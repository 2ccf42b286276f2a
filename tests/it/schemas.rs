//! Several chains in one database (`database.schema`, `--schema`,
//! `DATABASE_SCHEMA`): two anvils of two chain ids indexed side by side
//! into two schemas, one process each and at the same time, each schema
//! equal to its node and untouched by the other's indexer; a node of
//! another chain than the one recorded with a schema refused before
//! anything is written, naming both chain ids and the schema; with no
//! schema set, the tables stay where they were (the connection's default
//! schema), and a database indexed before chain ids were recorded keeps
//! working and records its chain id.

use std::time::Duration;

use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

use crate::support::anvil::{Anvil, AnvilOptions, RETURN_42_INITCODE, TxKind};
use crate::support::compare::{assert_db_equals_chain, snapshot, wait_db_equals_head};
use crate::support::indexer::{self, Running};
use crate::support::{fixtures, pg, rpc_server::RpcServer};

const SYNC_LIMIT: Duration = Duration::from_secs(60);
/// The first of the ten recent mainnet fixture blocks.
const FIRST: u64 = 24_476_000;

/// A pool whose connections see `schema` alone, as the indexer's do.
async fn pool_in(url: &str, schema: &str) -> PgPool {
    let options: PgConnectOptions = url.parse().unwrap();
    PgPool::connect_with(options.options([("search_path", schema)]))
        .await
        .unwrap()
}

async fn anvil_of_chain(chain_id: u64) -> Anvil {
    Anvil::start_with(AnvilOptions {
        extra_args: vec!["--chain-id".into(), chain_id.to_string()],
        ..Default::default()
    })
    .await
}

/// The chain id recorded in `schema`.
async fn recorded_chain_id(pool: &PgPool, schema: &str) -> Option<String> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT chain_id::text FROM {schema}.chain"
    )))
    .fetch_optional(pool)
    .await
    .unwrap()
}

/// The schemas of the database that are not PostgreSQL's own.
async fn user_schemas(pool: &PgPool) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT nspname::text FROM pg_namespace
         WHERE nspname NOT LIKE 'pg\\_%' AND nspname <> 'information_schema' ORDER BY 1",
    )
    .fetch_all(pool)
    .await
    .unwrap()
}

/// Every relation in `schema` (tables, partitions, indexes, views).
async fn relations(pool: &PgPool, schema: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT relname::text FROM pg_class
         WHERE relnamespace = (SELECT oid FROM pg_namespace WHERE nspname = $1) ORDER BY 1",
    )
    .bind(schema)
    .fetch_all(pool)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_chains_are_indexed_side_by_side_into_two_schemas_of_one_database() {
    let (pool, url) = pg::fresh_db().await;
    let (devnet, testnet) = (anvil_of_chain(31337).await, anvil_of_chain(424242).await);
    // Different transactions on each, a block each (automine).
    let delegate = devnet.account(8).0.to_string();
    for kind in [
        TxKind::Legacy,
        TxKind::AccessList,
        TxKind::Eip1559,
        TxKind::SetCode { delegate },
        TxKind::Create {
            initcode: RETURN_42_INITCODE.into(),
        },
    ] {
        devnet.send(1, kind).await;
    }
    for from in [2, 3] {
        testnet.send(from, TxKind::Legacy).await;
    }

    // devnet's indexer follows (and holds its schema's writer lock) while
    // testnet's backfills, which refuses to run beside another writer of
    // its own schema: the two schemas' writers do not exclude each other.
    let mut follower = Running::spawn(devnet.url(), &url, &["--schema", "devnet", "sync"]);
    let devnet_pool = pool_in(&url, "devnet").await;
    // Its tables exist once it has committed (`snapshot` needs them).
    let started = std::time::Instant::now();
    while pg::checkpoint(&devnet_pool).await.is_none() {
        assert!(follower.is_running(), "sync exited:\n{}", follower.stderr());
        assert!(
            started.elapsed() < SYNC_LIMIT,
            "no checkpoint:\n{}",
            follower.stderr()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    wait_db_equals_head(&devnet_pool, &devnet, SYNC_LIMIT, "devnet sync").await;
    let mut backfill = indexer::command(
        testnet.url(),
        &url,
        &["backfill", "--from", "0", "--to", "latest"],
    );
    backfill.env("DATABASE_SCHEMA", "testnet");
    let out = indexer::finish(backfill, &["backfill (DATABASE_SCHEMA=testnet)"]);
    assert!(
        out.status.success(),
        "testnet's backfill beside devnet's sync: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let testnet_pool = pool_in(&url, "testnet").await;
    let testnet_head = testnet.block_number().await;
    assert_db_equals_chain(&testnet_pool, &testnet, 0, testnet_head).await;

    // More blocks on devnet reach its schema only.
    let before = snapshot(&testnet_pool).await;
    for from in [4, 5, 6] {
        devnet.send(from, TxKind::Eip1559).await;
    }
    wait_db_equals_head(&devnet_pool, &devnet, SYNC_LIMIT, "devnet after new blocks").await;
    follower.terminate().await;
    assert_db_equals_chain(&devnet_pool, &devnet, 0, devnet.block_number().await).await;
    assert_eq!(
        snapshot(&testnet_pool).await,
        before,
        "testnet's schema changed"
    );
    assert_eq!(before.blocks.len() as u64, testnet_head + 1);

    // Everything the indexer creates is in the two schemas, with each its
    // chain id; public holds none of it.
    assert_eq!(user_schemas(&pool).await, ["devnet", "public", "testnet"]);
    assert_eq!(relations(&pool, "public").await, Vec::<String>::new());
    for schema in ["devnet", "testnet"] {
        let rels = relations(&pool, schema).await;
        for t in [
            "_sqlx_migrations",
            "blocks",
            "transactions",
            "checkpoint",
            "segments",
            "chain",
        ] {
            assert!(rels.iter().any(|r| r == t), "{schema} has no {t}: {rels:?}");
        }
    }
    assert_eq!(
        recorded_chain_id(&pool, "devnet").await.as_deref(),
        Some("31337")
    );
    assert_eq!(
        recorded_chain_id(&pool, "testnet").await.as_deref(),
        Some("424242")
    );

    // The read-only commands see the schema they are given.
    let out = indexer::run_ok(
        testnet.url(),
        &url,
        &[
            "--schema",
            "testnet",
            "sql",
            "SELECT count(*) AS n FROM blocks",
        ],
    );
    let table = String::from_utf8_lossy(&out.stdout);
    let want = (testnet_head + 1).to_string();
    assert!(table.lines().any(|l| l.trim() == want), "{table}");
    let out = indexer::run_ok(devnet.url(), &url, &["--schema", "devnet", "status"]);
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.contains("chain:          chain id 31337 (anvil/hardhat local), in schema devnet"),
        "{status}"
    );
    // The README's query over two chains, from no schema in particular.
    let union = "SELECT chain, count(*) AS txs FROM (
           SELECT 'devnet' AS chain, sender FROM devnet.transactions
           UNION ALL SELECT 'testnet', sender FROM testnet.transactions) t
         GROUP BY chain ORDER BY chain";
    let out = indexer::run_ok(testnet.url(), &url, &["sql", union]);
    let table = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<Vec<&str>> = table
        .lines()
        .filter(|l| l.contains('|'))
        .skip(1)
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows, [["devnet", "8"], ["testnet", "2"]], "{table}");
    // A mistyped schema is an error for the read-only commands, not a
    // new empty schema.
    for cmd in [&["sql", "SELECT 1"][..], &["status"]] {
        let args = [&["--schema", "nowhere"][..], cmd].concat();
        let out = indexer::run(testnet.url(), &url, &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("schema nowhere does not exist"),
            "{cmd:?}: {err}"
        );
    }
    assert!(!user_schemas(&pool).await.contains(&"nowhere".to_owned()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_another_chain_is_refused_before_anything_is_written() {
    let server = RpcServer::start(fixtures::recent_mainnet()).await.unwrap();
    let (pool, url) = pg::fresh_db().await;
    let range = |a: u64, b: u64| [(FIRST + a).to_string(), (FIRST + b).to_string()];
    let [from, to] = range(0, 4);
    let first = [
        "--schema", "mainnet", "--logs", "off", "backfill", "--from", &from, "--to", &to,
    ];
    indexer::run_ok(&server.url(), &url, &first);
    let mainnet = pool_in(&url, "mainnet").await;
    assert_eq!(
        recorded_chain_id(&pool, "mainnet").await.as_deref(),
        Some("1")
    );
    let before = (snapshot(&mainnet).await, relations(&pool, "mainnet").await);

    // The same URL now answers for another chain, one of Ethereum's rules as
    // these mainnet blocks are (Base's would rightly refuse their blob
    // transactions: OP Stack chains have none). The run would create an
    // event table and write five blocks; it writes nothing.
    server.set_chain_id(17000);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("events.toml");
    std::fs::write(
        &config,
        "[[events]]\nsignature = \"Transfer(address indexed from, address indexed to, uint256 value)\"\ntable = \"transfers\"\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let [from, to] = range(5, 9);
    let args = [
        "--config", config, "--schema", "mainnet", "--logs", "off", "backfill", "--from", &from,
        "--to", &to,
    ];
    let out = indexer::run(&server.url(), &url, &args);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success(),
        "a node of chain 17000 indexed into chain 1's schema: {err}"
    );
    for part in [
        "schema mainnet",
        "holds chain id 1, but the node says chain id 17000; nothing was written",
        "point --rpc-url / RPC_URL at a node of chain 1",
        "--schema NAME (DATABASE_SCHEMA, database.schema)",
    ] {
        assert!(err.contains(part), "{part:?} not in:\n{err}");
    }
    assert_eq!(
        (snapshot(&mainnet).await, relations(&pool, "mainnet").await),
        before,
        "the refused run changed the schema"
    );
    assert_eq!(
        recorded_chain_id(&pool, "mainnet").await.as_deref(),
        Some("1")
    );

    // Into a schema of its own, that node is indexed.
    indexer::run_ok(
        &server.url(),
        &url,
        &args.map(|a| if a == "mainnet" { "holesky" } else { a }),
    );
    assert_eq!(
        recorded_chain_id(&pool, "holesky").await.as_deref(),
        Some("17000")
    );
    let holesky = pool_in(&url, "holesky").await;
    let stored: Vec<i64> = snapshot(&holesky)
        .await
        .blocks
        .iter()
        .map(|b| b.0)
        .collect();
    assert_eq!(
        stored,
        (FIRST + 5..=FIRST + 9)
            .map(|n| n as i64)
            .collect::<Vec<_>>()
    );
    let transfers: bool = sqlx::query_scalar("SELECT to_regclass('holesky.transfers') IS NOT NULL")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(transfers, "the event table is created in the run's schema");
    assert_eq!(snapshot(&mainnet).await, before.0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_schema_set_the_tables_stay_where_they_were() {
    let server = RpcServer::start(fixtures::recent_mainnet()).await.unwrap();
    let (pool, url) = pg::fresh_db().await;
    let range = |a: u64, b: u64| [(FIRST + a).to_string(), (FIRST + b).to_string()];
    let [from, to] = range(0, 2);
    indexer::run_ok(
        &server.url(),
        &url,
        &["--logs", "off", "backfill", "--from", &from, "--to", &to],
    );
    assert_eq!(user_schemas(&pool).await, ["public"]);
    let rels = relations(&pool, "public").await;
    for t in [
        "_sqlx_migrations",
        "blocks",
        "transactions",
        "checkpoint",
        "chain",
    ] {
        assert!(rels.iter().any(|r| r == t), "public has no {t}: {rels:?}");
    }
    assert_eq!(
        recorded_chain_id(&pool, "public").await.as_deref(),
        Some("1")
    );

    // A database indexed by the version before chain ids were recorded:
    // no `chain` table, and its migration not applied.
    sqlx::query("DROP TABLE chain")
        .execute(&pool)
        .await
        .unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = 20261205000001")
        .execute(&pool)
        .await
        .unwrap();
    let [from, to] = range(3, 5);
    indexer::run_ok(
        &server.url(),
        &url,
        &["--logs", "off", "backfill", "--from", &from, "--to", &to],
    );
    let stored: Vec<i64> = snapshot(&pool).await.blocks.iter().map(|b| b.0).collect();
    assert_eq!(
        stored,
        (FIRST..=FIRST + 5).map(|n| n as i64).collect::<Vec<_>>()
    );
    assert_eq!(
        recorded_chain_id(&pool, "public").await.as_deref(),
        Some("1")
    );
    let out = indexer::run_ok(&server.url(), &url, &["status"]);
    let status = String::from_utf8_lossy(&out.stdout);
    assert!(
        status.contains("chain:          chain id 1 (") && status.contains("in schema public"),
        "{status}"
    );

    // And the default schema is checked like any other.
    server.set_chain_id(10);
    let [from, to] = range(6, 7);
    let out = indexer::run(
        &server.url(),
        &url,
        &["--logs", "off", "backfill", "--from", &from, "--to", &to],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("schema public")
            && err.contains("holds chain id 1, but the node says chain id 10"),
        "{err}"
    );
    assert_eq!(snapshot(&pool).await.blocks.len(), 6);
}
