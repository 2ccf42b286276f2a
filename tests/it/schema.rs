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
