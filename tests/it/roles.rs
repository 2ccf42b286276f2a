//! The least-privilege roles of the README, on the test cluster: the
//! indexer runs as a role that only owns its schema (no superuser, no
//! CREATE on the database), and `sql` works for a role that may only
//! read, and changes nothing even for the indexer's own role. With
//! `--schema`, the owner of that schema indexes into it as it is.

use crate::support::{fixtures, indexer, pg, rpc_server::RpcServer};

const FIRST: u64 = 24_476_000;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_indexer_runs_as_a_schema_owner_and_sql_as_a_reader() {
    let server = RpcServer::start(fixtures::recent_mainnet()).await.unwrap();
    let (pool, url) = pg::fresh_db().await;
    // Roles are the cluster's, which each test binary starts anew; no
    // other test creates roles.
    let (writer, reader) = ("si_writer", "si_reader");
    for stmt in [
        format!("CREATE ROLE \"{writer}\" LOGIN"),
        format!("CREATE SCHEMA senders AUTHORIZATION \"{writer}\""),
        format!("ALTER ROLE \"{writer}\" SET search_path = senders"),
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC".to_owned(),
        format!("CREATE ROLE \"{reader}\" LOGIN"),
        format!("GRANT USAGE ON SCHEMA senders TO \"{reader}\""),
        format!(
            "ALTER DEFAULT PRIVILEGES FOR ROLE \"{writer}\" IN SCHEMA senders GRANT SELECT ON TABLES TO \"{reader}\""
        ),
        format!("ALTER ROLE \"{reader}\" SET search_path = senders"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(stmt))
            .execute(&pool)
            .await
            .unwrap();
    }
    let as_role = |role: &str| url.replacen("sender_indexer@", &format!("{role}@"), 1);
    let (w, r) = (as_role(writer), as_role(reader));
    let (from, to) = (FIRST.to_string(), (FIRST + 4).to_string());
    indexer::run_ok(
        &server.url(),
        &w,
        &["backfill", "--logs", "off", "--from", &from, "--to", &to],
    );
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM senders.blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 5, "the indexer's tables are in its own schema");

    // A partition the indexer's role did not create and may not write to
    // directly (here handed to another role) still takes rows through its
    // table: a write copies straight into partitions only where it may.
    let partition = sender_indexer::store::partition_name("transactions", 24);
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "ALTER TABLE senders.{partition} OWNER TO \"{reader}\""
    )))
    .execute(&pool)
    .await
    .unwrap();
    let (from, to) = ((FIRST + 5).to_string(), (FIRST + 9).to_string());
    indexer::run_ok(
        &server.url(),
        &w,
        &["backfill", "--logs", "off", "--from", &from, "--to", &to],
    );
    let (blocks, txs): (i64, i64) = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT (SELECT count(*) FROM senders.blocks), (SELECT count(*) FROM senders.{partition})"
    )))
    .fetch_one(&pool)
    .await
    .unwrap();
    let in_blocks: i64 = sqlx::query_scalar("SELECT sum(tx_count)::bigint FROM senders.blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((blocks, txs), (10, in_blocks));

    let out = indexer::run_ok(
        &server.url(),
        &r,
        &["sql", "SELECT count(*) AS n FROM blocks"],
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.lines().any(|l| l.trim() == "10"), "{table}");
    for role in [&r, &w] {
        let out = indexer::run(&server.url(), role, &["sql", "DELETE FROM blocks"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "a DELETE went through `sql`: {err}");
        assert!(err.contains("read-only"), "{err}");
    }
    let still: i64 = sqlx::query_scalar("SELECT count(*) FROM senders.blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(still, 10);
}

/// `--schema` with a role that owns that schema and nothing else (no
/// CREATE on the database, no `search_path` of its own): the schema is
/// used as it is, never created; a schema it may not create is refused
/// with what to do; a reader runs `sql` in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_owner_indexes_into_the_schema_the_setting_names() {
    let server = RpcServer::start(fixtures::recent_mainnet()).await.unwrap();
    let (pool, url) = pg::fresh_db().await;
    let (writer, reader) = ("si_base_writer", "si_base_reader");
    for stmt in [
        format!("CREATE ROLE \"{writer}\" LOGIN"),
        format!("CREATE SCHEMA base AUTHORIZATION \"{writer}\""),
        "REVOKE CREATE ON SCHEMA public FROM PUBLIC".to_owned(),
        format!("CREATE ROLE \"{reader}\" LOGIN"),
        format!("GRANT USAGE ON SCHEMA base TO \"{reader}\""),
        format!(
            "ALTER DEFAULT PRIVILEGES FOR ROLE \"{writer}\" IN SCHEMA base GRANT SELECT ON TABLES TO \"{reader}\""
        ),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(stmt))
            .execute(&pool)
            .await
            .unwrap();
    }
    let as_role = |role: &str| url.replacen("sender_indexer@", &format!("{role}@"), 1);
    let (w, r) = (as_role(writer), as_role(reader));
    let (from, to) = (FIRST.to_string(), (FIRST + 4).to_string());
    let backfill = |schema| {
        [
            "--schema", schema, "--logs", "off", "backfill", "--from", &from, "--to", &to,
        ]
    };
    indexer::run_ok(&server.url(), &w, &backfill("base"));
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM base.blocks")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(stored, 5);

    let out = indexer::run_ok(
        &server.url(),
        &r,
        &[
            "--schema",
            "base",
            "sql",
            "SELECT count(*) AS n FROM blocks",
        ],
    );
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.lines().any(|l| l.trim() == "5"), "{table}");

    let out = indexer::run(&server.url(), &w, &backfill("arbitrum"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains(
            "schema arbitrum does not exist in this database, and this role may not create it"
        ) && err.contains("CREATE SCHEMA arbitrum AUTHORIZATION"),
        "{err}"
    );
}
