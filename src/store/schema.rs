//! The PostgreSQL schema that holds the tables (`database.schema`), so
//! that one database holds several chains side by side, one schema and one
//! indexer process each: the name, checked to be a plain identifier and
//! quoted; every connection's `search_path` set to it; creating it when
//! missing, without asking for more privilege than owning it when it
//! exists; and the advisory-lock keys, which are the schema's own so that
//! indexers of two schemas never wait for each other.
//!
//! With no schema set, nothing changes: the tables live in the first
//! schema of the connection's `search_path` (usually `public`), as they
//! did before the setting existed.

use std::fmt;
use std::str::FromStr;

use sqlx::PgPool;
use sqlx::postgres::PgConnectOptions;

use super::{Result, StoreError};

/// PostgreSQL cuts identifiers at 63 bytes.
const MAX_NAME: usize = 63;

/// A schema name that needs no quoting to mean itself: lowercase ASCII
/// letters, digits and `_`, not starting with a digit, at most 63 bytes,
/// and not `pg_…` (reserved for PostgreSQL's own schemas). Written the same
/// in a query (`base.transactions`) as in the setting, since PostgreSQL
/// folds unquoted names to lowercase.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SchemaName(String);

impl FromStr for SchemaName {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Self, String> {
        let mut chars = s.chars();
        let plain = chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && s.len() <= MAX_NAME;
        if !plain {
            return Err(format!(
                "{s:?} is not a plain identifier: use lowercase letters, digits and _, \
                 starting with a letter or _, at most {MAX_NAME} characters (e.g. mainnet, base, arbitrum_one)"
            ));
        }
        if s.starts_with("pg_") {
            return Err(format!(
                "{s:?}: names starting with pg_ are reserved for PostgreSQL's own schemas"
            ));
        }
        Ok(SchemaName(s.to_owned()))
    }
}

impl fmt::Display for SchemaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl SchemaName {
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// As a quoted SQL identifier.
    pub fn quoted(&self) -> String {
        // A plain identifier holds no `"` to double.
        format!("\"{}\"", self.0)
    }
}

/// `options` with every connection's `search_path` set to `schema` alone,
/// so that every unqualified name (the tables, sqlx's `_sqlx_migrations`)
/// is created and found there. Sent in the startup packet, it outlives
/// reconnects and overrides the role's own `search_path`.
pub(super) fn in_schema(options: PgConnectOptions, schema: &SchemaName) -> PgConnectOptions {
    options.options([("search_path", schema.quoted())])
}

/// Whether `schema` exists in the database.
pub(super) async fn exists(pool: &PgPool, schema: &SchemaName) -> Result<bool> {
    Ok(
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)")
            .bind(schema.as_str())
            .fetch_one(pool)
            .await?,
    )
}

/// Creates `schema` unless it exists. Only a missing schema is created:
/// `CREATE SCHEMA IF NOT EXISTS` needs `CREATE` on the database even when
/// the schema is there, which a role that only owns its schema lacks.
pub(super) async fn create_if_missing(pool: &PgPool, schema: &SchemaName) -> Result<()> {
    if exists(pool, schema).await? {
        return Ok(());
    }
    // The name is a checked plain identifier, quoted.
    let created = sqlx::query(sqlx::AssertSqlSafe(format!(
        "CREATE SCHEMA IF NOT EXISTS {}",
        schema.quoted()
    )))
    .execute(pool)
    .await;
    match created {
        Ok(_) => {
            tracing::info!(target: "indexer::store", schema = %schema, "created schema");
            Ok(())
        }
        // Another process created it at the same moment.
        Err(sqlx::Error::Database(e))
            if matches!(e.code().as_deref(), Some("42P06" | "23505"))
                && exists(pool, schema).await? =>
        {
            Ok(())
        }
        Err(sqlx::Error::Database(e)) if e.code().as_deref() == Some("42501") => {
            Err(StoreError::SchemaNotCreated {
                schema: schema.clone(),
                reason: e.message().to_owned(),
            })
        }
        Err(e) => Err(e.into()),
    }
}

/// The schema unqualified names resolve to on this pool's connections:
/// `database.schema`, or the first existing schema of the role's
/// `search_path`; `None` when none of those exists.
pub(super) async fn current(pool: &PgPool) -> Result<Option<String>> {
    Ok(sqlx::query_scalar("SELECT current_schema()::text")
        .fetch_one(pool)
        .await?)
}

/// The advisory-lock key `base` for the tables of `schema`: `base` itself
/// in `public` (so an indexer of an earlier version, which used `base`
/// everywhere, still excludes this one there), another key for every other
/// schema, so that the writers of two chains in one database never wait
/// for each other.
pub(super) fn lock_key(base: i64, schema: Option<&str>) -> i64 {
    match schema {
        None | Some("public") => base,
        Some(name) => base ^ fnv1a(name.as_bytes()) as i64,
    }
}

/// FNV-1a, 64 bits: stable across builds and versions (unlike std's
/// hasher), which lock keys shared by processes must be.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_identifiers_are_schema_names() {
        for ok in [
            "mainnet",
            "base",
            "arbitrum_one",
            "_x",
            "op2",
            &"a".repeat(63),
        ] {
            let name: SchemaName = ok.parse().unwrap();
            assert_eq!(name.as_str(), ok);
            assert_eq!(name.quoted(), format!("\"{ok}\""));
        }
        for bad in [
            "",
            "Base",
            "2chain",
            "main-net",
            "main net",
            "a\"b",
            "x;drop",
            "mäinnet",
            &"a".repeat(64),
        ] {
            let err = bad.parse::<SchemaName>().unwrap_err();
            assert!(err.contains("not a plain identifier"), "{bad}: {err}");
        }
        let err = "pg_temp".parse::<SchemaName>().unwrap_err();
        assert!(err.contains("reserved"), "{err}");
    }

    #[test]
    fn lock_keys_are_the_schemas_own_and_unchanged_in_public() {
        let base = 0x5e4d_e21d_e7e1;
        assert_eq!(lock_key(base, None), base);
        assert_eq!(lock_key(base, Some("public")), base);
        let (a, b) = (
            lock_key(base, Some("mainnet")),
            lock_key(base, Some("base")),
        );
        assert!(a != base && b != base && a != b);
        assert_eq!(a, lock_key(base, Some("mainnet")), "stable");
        // FNV-1a's published vectors: processes of different builds agree.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
