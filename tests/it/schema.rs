//! The table descriptions in `store::TABLES` against the migrated schema:
//! every table that holds block data is described (so rollback, replace,
//! `status` and the index build cover it), and every described column and
//! lookup index exists as the migrations create it.

use sender_indexer::store::{MIGRATOR, TABLES};

use crate::support::pg;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_block_table_is_described_and_every_description_matches_the_schema() {
    let (pool, _) = pg::fresh_db().await;
    MIGRATOR.run(&pool).await.unwrap();
    let keyed: Vec<String> = sqlx::query_scalar(
        "SELECT c.table_name::text FROM information_schema.columns c
         JOIN information_schema.tables t USING (table_schema, table_name)
         WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
           AND (column_name = 'block_number' OR (table_name = 'blocks' AND column_name = 'number'))
           AND c.table_name NOT IN ('checkpoint')
         ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut described: Vec<String> = TABLES.iter().map(|t| t.name.to_owned()).collect();
    described.sort();
    assert_eq!(keyed, described, "tables keyed by block vs store::TABLES");

    for t in TABLES {
        let columns: Vec<String> = sqlx::query_scalar(
            "SELECT column_name::text FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name = $1",
        )
        .bind(t.name)
        .fetch_all(&pool)
        .await
        .unwrap();
        for c in t.columns {
            assert!(
                columns.iter().any(|x| x == c),
                "{}.{c} is not in the schema",
                t.name
            );
        }
        for i in t.lookup_indexes {
            let def: String =
                sqlx::query_scalar("SELECT indexdef FROM pg_indexes WHERE indexname = $1")
                    .bind(i.name)
                    .fetch_one(&pool)
                    .await
                    .unwrap_or_else(|e| panic!("index {}: {e}", i.name));
            assert!(
                def.ends_with(&format!("ON public.{} USING btree ({})", t.name, i.columns)),
                "{def}"
            );
        }
    }
}

/// Every query of the README's SQL cookbook runs on the schema (with the
/// `usdc_transfers` event table it names, created as `[[events]]` does).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_readme_cookbook_runs() {
    let (_, url) = pg::fresh_db().await;
    let options: sqlx::postgres::PgConnectOptions = url.parse().unwrap();
    let store = sender_indexer::store::Store::connect(options, 2)
        .await
        .unwrap()
        .with_events(&[sender_indexer::config::EventSettings {
            signature: "Transfer(address indexed from, address indexed to, uint256 value)".into(),
            addresses: vec![],
            table: Some("usdc_transfers".into()),
        }])
        .await
        .unwrap();
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let cookbook = readme
        .split("## SQL cookbook")
        .nth(1)
        .expect("cookbook section");
    let sql = cookbook
        .split("```sql")
        .nth(1)
        .and_then(|b| b.split("```").next())
        .expect("a sql block");
    let queries: Vec<&str> = sql
        .split(";\n")
        .map(str::trim)
        .filter(|q| q.lines().any(|l| !l.trim_start().starts_with("--")))
        .collect();
    assert!(queries.len() >= 10, "{} queries", queries.len());
    for q in queries {
        sqlx::query(sqlx::AssertSqlSafe(q.trim_end_matches(';').to_owned()))
            .fetch_all(store.pool())
            .await
            .unwrap_or_else(|e| panic!("cookbook query fails: {e}\n{q}"));
    }
}
