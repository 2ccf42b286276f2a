//! Decoded event tables (`[[events]]`): each configured event becomes one
//! more [`Table`] of the store, described at start like the fixed ones, so
//! writing, replacing a block and rolling back a reorg cover it with no
//! code of its own. Its rows come from the block's stored logs that match
//! the event (selector, indexed-parameter count, addresses), decoded by
//! `decode::EventSpec`; a matching log that does not decode is counted and
//! logged with its block and index, never a reason to stop.
//!
//! Creating the tables is the one place this module runs SQL: `CREATE
//! TABLE IF NOT EXISTS`, and a check against `event_tables`, which records
//! the signature each table was created for, so a changed signature is a
//! clear error instead of values decoded into the wrong columns.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use sqlx::{AssertSqlSafe, PgPool};

use super::copy::CopyBuf;
use super::tables::{Rows, Table, block_number, log_indexes};
use super::{Result, StoreError};
use crate::block::Block;
use crate::config::EventSettings;
use crate::decode::{Address, EventSpec, Value, hex0x};

/// Columns every event table starts with, before one per parameter.
const FIXED_COLUMNS: [&str; 4] = ["block_number", "log_index", "tx_index", "address"];

/// Names an event table may not take: the schema's own tables and views.
const RESERVED: &[&str] = &[
    "blocks",
    "transactions",
    "authorizations",
    "logs",
    "logs_with_sender",
    "checkpoint",
    "reorgs",
    "event_tables",
    "index_builds",
];

/// The rows side of one event table.
pub struct EventTable {
    pub spec: EventSpec,
    addresses: Vec<Address>,
    table: String,
    undecodable: AtomicU64,
}

impl EventTable {
    /// Logs that matched the event but did not decode, since start.
    pub fn undecodable(&self) -> u64 {
        self.undecodable.load(Relaxed)
    }

    pub(super) fn encode(&self, block: &Block, out: &mut CopyBuf) -> Result<()> {
        let number = block_number(block)?;
        let n = block.header.number;
        for log in &block.logs {
            if !self.spec.matches(log)
                || !(self.addresses.is_empty() || self.addresses.contains(&log.address))
            {
                continue;
            }
            let values = match self.spec.decode(log) {
                Ok(v) => v,
                Err(error) => {
                    self.undecodable.fetch_add(1, Relaxed);
                    tracing::warn!(target: "indexer::events", block = n, log_index = log.log_index, address = %hex0x(&log.address), table = %self.table, error, "log does not decode as its event; left out of the event table (it stays in logs)");
                    continue;
                }
            };
            let (index, tx) = log_indexes(n, log)?;
            out.row().i64(number).i32(index).i32(tx).bytes(&log.address);
            for v in &values {
                match v {
                    Value::Bytes(b) => out.bytes(b),
                    Value::Bool(b) => out.bool(*b),
                    Value::Numeric {
                        negative,
                        magnitude,
                    } => out.signed_numeric(*negative, magnitude),
                    Value::Text(t) => out.text(t),
                    Value::Json(j) => out.jsonb(j),
                };
            }
        }
        Ok(())
    }
}

/// `"name"`: an identifier PostgreSQL takes as written, reserved words and
/// capitals included.
fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `OwnershipTransferred` → `ownership_transferred`.
fn snake_case(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 4);
    for (i, c) in name.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 && !out.ends_with('_') {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

fn invalid(event: &EventSettings, reason: String) -> StoreError {
    StoreError::Events(format!("[[events]] {:?}: {reason}", event.signature))
}

/// The tables for `events`, checked: signatures that parse, table names
/// that are plain lower-case identifiers not taken by the schema or by
/// another event, parameter names that are distinct and do not shadow the
/// fixed columns. Each description lives for the rest of the process.
pub(super) fn describe(events: &[EventSettings]) -> Result<Vec<&'static Table>> {
    let mut out: Vec<&'static Table> = Vec::with_capacity(events.len());
    for event in events {
        let spec =
            EventSpec::parse(&event.signature).map_err(|e| StoreError::Events(e.to_string()))?;
        let name = event
            .table
            .clone()
            .unwrap_or_else(|| snake_case(&spec.name));
        let plain = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
            && name.len() <= 63;
        if !plain {
            return Err(invalid(
                event,
                format!(
                    "table name {name:?} must be a lower-case identifier (a-z, 0-9, _; at most 63 characters); set `table`"
                ),
            ));
        }
        if RESERVED.contains(&name.as_str()) {
            return Err(invalid(
                event,
                format!("table name {name:?} is one of sender-indexer's own; set another `table`"),
            ));
        }
        if out.iter().any(|t| t.name == name) {
            return Err(invalid(
                event,
                format!(
                    "another [[events]] entry writes table {name:?} too; give one of them a `table`"
                ),
            ));
        }
        let mut columns: Vec<&'static str> = FIXED_COLUMNS.to_vec();
        for p in &spec.params {
            if FIXED_COLUMNS.contains(&p.name.as_str()) {
                return Err(invalid(
                    event,
                    format!(
                        "parameter {:?} has the name of a column every event table has; rename it in the signature",
                        p.name
                    ),
                ));
            }
            let col: &'static str = Box::leak(quoted(&p.name).into_boxed_str());
            if columns.contains(&col) {
                return Err(invalid(
                    event,
                    format!("two parameters are named {:?}", p.name),
                ));
            }
            columns.push(col);
        }
        let table = Table {
            name: Box::leak(name.clone().into_boxed_str()),
            block_column: "block_number",
            columns: Box::leak(columns.into_boxed_slice()),
            lookup_indexes: &[],
            rows: Rows::Event(Box::new(EventTable {
                spec,
                addresses: event.addresses.clone(),
                table: name,
                undecodable: AtomicU64::new(0),
            })),
        };
        out.push(Box::leak(Box::new(table)));
    }
    Ok(out)
}

/// `CREATE TABLE` for an event table.
pub(super) fn create_statement(table: &Table, spec: &EventSpec) -> String {
    let mut cols = vec![
        "block_number BIGINT NOT NULL".to_owned(),
        "log_index INT NOT NULL".to_owned(),
        "tx_index INT NOT NULL".to_owned(),
        "address BYTEA NOT NULL".to_owned(),
    ];
    for (p, col) in spec
        .params
        .iter()
        .zip(&table.columns[FIXED_COLUMNS.len()..])
    {
        cols.push(format!("{col} {}", p.kind.sql_type()));
    }
    cols.push("PRIMARY KEY (block_number, log_index)".to_owned());
    format!(
        "CREATE TABLE IF NOT EXISTS {} (\n    {}\n) PARTITION BY RANGE (block_number)",
        table.name,
        cols.join(",\n    ")
    )
}

/// Creates the tables that do not exist yet and records their signatures;
/// refuses a table recorded for another signature, or one that exists but
/// was not created for an event.
/// `schema` (where the tables go) keeps the creation lock the schema's own.
pub(super) async fn create(
    pool: &PgPool,
    tables: &[&'static Table],
    schema: Option<&str>,
) -> Result<()> {
    for table in tables {
        let Rows::Event(event) = &table.rows else {
            continue;
        };
        let spec = &event.spec;
        let mut tx = pool.begin().await?;
        // One process at a time creates and records (two starting together
        // would race on the registry row).
        sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
            .bind(match schema {
                None | Some("public") => format!("sender-indexer event table {}", table.name),
                Some(s) => format!("sender-indexer event table {s}.{}", table.name),
            })
            .execute(&mut *tx)
            .await?;
        let recorded: Option<String> =
            sqlx::query_scalar("SELECT signature FROM event_tables WHERE name = $1")
                .bind(table.name)
                .fetch_optional(&mut *tx)
                .await?;
        match recorded {
            Some(sig) if sig == spec.full_signature => {}
            Some(sig) => {
                return Err(StoreError::Events(format!(
                    "table {} was created for `{sig}`, and [[events]] now says `{}`; \
                     to index the new signature, give it another `table`, or drop the old one \
                     (DROP TABLE {}; DELETE FROM event_tables WHERE name = '{}';) and re-index",
                    table.name, spec.full_signature, table.name, table.name
                )));
            }
            None => {
                let exists: bool = sqlx::query_scalar("SELECT to_regclass($1) IS NOT NULL")
                    .bind(table.name)
                    .fetch_one(&mut *tx)
                    .await?;
                if exists {
                    return Err(StoreError::Events(format!(
                        "a table named {} exists and is not an event table of sender-indexer; \
                         give `{}` another `table`",
                        table.name, spec.full_signature
                    )));
                }
                // Names are checked identifiers and quoted columns (see `describe`).
                sqlx::query(AssertSqlSafe(create_statement(table, spec)))
                    .execute(&mut *tx)
                    .await?;
                sqlx::query("INSERT INTO event_tables (name, signature) VALUES ($1, $2)")
                    .bind(table.name)
                    .bind(&spec.full_signature)
                    .execute(&mut *tx)
                    .await?;
                tracing::info!(target: "indexer::events", table = table.name, signature = %spec.full_signature, "created event table");
            }
        }
        tx.commit().await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(signature: &str, table: Option<&str>) -> EventSettings {
        EventSettings {
            signature: signature.into(),
            addresses: Vec::new(),
            table: table.map(str::to_owned),
        }
    }

    const TRANSFER: &str = "Transfer(address indexed from, address indexed to, uint256 value)";

    #[test]
    fn tables_are_described_with_quoted_parameter_columns() {
        let t = describe(&[event(TRANSFER, None)]).unwrap();
        assert_eq!(t[0].name, "transfer");
        assert_eq!(
            t[0].copy_statement(),
            r#"COPY transfer (block_number, log_index, tx_index, address, "from", "to", "value") FROM STDIN (FORMAT binary)"#
        );
        let Rows::Event(e) = &t[0].rows else { panic!() };
        assert_eq!(
            create_statement(t[0], &e.spec),
            "CREATE TABLE IF NOT EXISTS transfer (\n    block_number BIGINT NOT NULL,\n    log_index INT NOT NULL,\n    tx_index INT NOT NULL,\n    address BYTEA NOT NULL,\n    \"from\" BYTEA,\n    \"to\" BYTEA,\n    \"value\" NUMERIC(78,0),\n    PRIMARY KEY (block_number, log_index)\n) PARTITION BY RANGE (block_number)"
        );
        let t = describe(&[event(
            "OwnershipTransferred(address indexed previousOwner, address indexed newOwner)",
            None,
        )])
        .unwrap();
        assert_eq!(t[0].name, "ownership_transferred");
        assert!(t[0].columns.contains(&"\"previousOwner\""));
    }

    #[test]
    fn clashing_or_unsafe_names_are_refused_with_the_fix() {
        let two = describe(&[
            event(TRANSFER, None),
            event(
                "Transfer(address indexed from, address indexed to, uint256 indexed id)",
                None,
            ),
        ]);
        let err = two.err().unwrap().to_string();
        assert!(
            err.contains("another [[events]] entry writes table \"transfer\""),
            "{err}"
        );
        for (sig, table, want) in [
            (TRANSFER, Some("logs"), "one of sender-indexer's own"),
            (
                TRANSFER,
                Some("x; DROP TABLE blocks"),
                "lower-case identifier",
            ),
            (TRANSFER, Some("Transfers"), "lower-case identifier"),
            ("E(address address)", None, "column every event table has"),
            ("E(uint256 a, uint256 a)", None, "two parameters are named"),
            ("E(uint7 a)", None, "event signature"),
        ] {
            let err = describe(&[event(sig, table)]).err().unwrap().to_string();
            assert!(err.contains(want), "{sig} {table:?}: {err}");
        }
    }
}
