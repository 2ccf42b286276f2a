//! Read-only queries for people: `status` and the `sql` command's table.
//! Nothing here writes.

use sqlx::{AssertSqlSafe, Column, Executor, PgPool, Row, SqlSafeStr};

use super::Result;

/// What is indexed.
#[derive(Debug, Default)]
pub struct Status {
    pub lowest: Option<u64>,
    pub highest: Option<u64>,
    pub blocks: u64,
    /// Missing ranges between lowest and highest (at most 20 shown).
    pub gaps: Vec<(u64, u64)>,
    pub missing_blocks: u64,
    pub checkpoint: Option<(u64, String)>,
    pub rows: Vec<(String, u64)>,
    pub reorgs: u64,
    /// Blocks by how they were verified: `full`, `header`, `links`, `off`, or `None` (stored
    /// before verification existed).
    pub verified: Vec<(Option<String>, u64)>,
    /// Transactions by where their sender came from (`recovered`,
    /// `committed`, `none`, `reported`).
    pub senders: Vec<(String, u64)>,
    pub anchors: Vec<AnchorStatus>,
}

/// A trusted block the stored chain was linked to, and the stored blocks
/// that link to it by parent hashes now.
#[derive(Debug)]
pub struct AnchorStatus {
    pub number: u64,
    pub origin: String,
    /// The contiguous, parent-linked run of stored blocks holding the
    /// anchor (or starting right above it); `None` if none does now.
    pub linked: Option<(u64, u64)>,
}

pub async fn status(pool: &PgPool) -> Result<Status> {
    let mut s = Status::default();
    let (lo, hi, n): (Option<i64>, Option<i64>, i64) =
        sqlx::query_as("SELECT min(number), max(number), count(*) FROM blocks")
            .fetch_one(pool)
            .await?;
    s.lowest = lo.map(|v| v as u64);
    s.highest = hi.map(|v| v as u64);
    s.blocks = n as u64;
    if let (Some(lo), Some(hi)) = (lo, hi) {
        s.missing_blocks = (hi - lo + 1 - n) as u64;
        if s.missing_blocks > 0 {
            let gaps: Vec<(i64, i64)> = sqlx::query_as(
                "SELECT number + 1, next - 1 FROM (
                   SELECT number, lead(number) OVER (ORDER BY number) AS next FROM blocks
                 ) s WHERE next > number + 1 ORDER BY number LIMIT 20",
            )
            .fetch_all(pool)
            .await?;
            s.gaps = gaps
                .into_iter()
                .map(|(a, b)| (a as u64, b as u64))
                .collect();
        }
    }
    let cp: Option<(i64, String)> =
        sqlx::query_as("SELECT block_number, '0x' || encode(block_hash, 'hex') FROM checkpoint")
            .fetch_optional(pool)
            .await?;
    s.checkpoint = cp.map(|(n, h)| (n as u64, h));
    let verified: Vec<(Option<String>, i64)> =
        sqlx::query_as("SELECT verified, count(*) FROM blocks GROUP BY verified ORDER BY verified")
            .fetch_all(pool)
            .await?;
    s.verified = verified.into_iter().map(|(v, n)| (v, n as u64)).collect();
    let senders: Vec<(String, i64)> = sqlx::query_as(
        "SELECT sender_source, count(*) FROM transactions GROUP BY sender_source ORDER BY sender_source",
    )
    .fetch_all(pool)
    .await?;
    s.senders = senders.into_iter().map(|(v, n)| (v, n as u64)).collect();
    let anchors: Vec<(i64, Vec<u8>, String)> =
        sqlx::query_as("SELECT number, hash, origin FROM trust_anchors ORDER BY number")
            .fetch_all(pool)
            .await?;
    for (number, hash, origin) in anchors {
        // The anchor's own block, or the one above it naming it as parent.
        let start: Option<i64> = sqlx::query_scalar(
            "SELECT number FROM blocks WHERE (number = $1 AND hash = $2) OR (number = $1 + 1 AND parent_hash = $2)
             ORDER BY number LIMIT 1",
        )
        .bind(number)
        .bind(&hash)
        .fetch_optional(pool)
        .await?;
        let linked = match start {
            None => None,
            Some(start) => {
                // Runs of stored blocks each linked to the one below.
                let run: (Option<i64>, Option<i64>) = sqlx::query_as(
                    "WITH s AS (
                       SELECT number, CASE WHEN number = lag(number) OVER w + 1 AND parent_hash = lag(hash) OVER w
                                      THEN 0 ELSE 1 END AS brk
                       FROM blocks WINDOW w AS (ORDER BY number)),
                     g AS (SELECT number, sum(brk) OVER (ORDER BY number) AS grp FROM s)
                     SELECT min(number), max(number) FROM g WHERE grp = (SELECT grp FROM g WHERE number = $1)",
                )
                .bind(start)
                .fetch_one(pool)
                .await?;
                match run {
                    // A run that starts above the anchor links to it only
                    // from the anchor's own child.
                    (Some(lo), Some(hi)) if lo <= start => Some((lo as u64, hi as u64)),
                    _ => None,
                }
            }
        };
        s.anchors.push(AnchorStatus {
            number: number as u64,
            origin,
            linked,
        });
    }
    let events: Vec<String> = sqlx::query_scalar("SELECT name FROM event_tables ORDER BY name")
        .fetch_all(pool)
        .await?;
    let tables = super::TABLES.iter().map(|t| t.name.to_owned());
    for table in tables.chain(events).chain(["reorgs".to_owned()]) {
        // Names are the schema's, or event tables' checked identifiers.
        let n: i64 = sqlx::query_scalar(AssertSqlSafe(format!("SELECT count(*) FROM {table}")))
            .fetch_one(pool)
            .await?;
        if table == "reorgs" {
            s.reorgs = n as u64;
        }
        s.rows.push((table.to_string(), n as u64));
    }
    Ok(s)
}

/// Which logs the `logs` command prints.
pub struct LogFilter {
    pub address: [u8; 20],
    pub topic0: Option<[u8; 32]>,
    pub from: Option<u64>,
    pub to: Option<u64>,
    pub limit: u64,
}

/// Stored logs of one contract, oldest first, each with the sender
/// recovered for its transaction, the transaction's hash and status.
pub async fn logs(pool: &PgPool, f: &LogFilter) -> Result<Table> {
    let hex = |c: &str| format!("'0x' || encode({c}, 'hex')");
    let sql = format!(
        "SELECT ARRAY[block_number::text, log_index::text, {}, {}, status::text, {}, {}, {}, {}, {}]
         FROM logs_with_sender
         WHERE address = $1 AND ($2::bytea IS NULL OR topic0 = $2)
           AND block_number BETWEEN $3 AND $4
         ORDER BY block_number, log_index
         LIMIT $5",
        hex("tx_hash"),
        hex("sender"),
        hex("topic0"),
        hex("topic1"),
        hex("topic2"),
        hex("topic3"),
        hex("data"),
    );
    let clamp = |n: u64| i64::try_from(n).unwrap_or(i64::MAX);
    let rows: Vec<(Vec<Option<String>>,)> = sqlx::query_as(AssertSqlSafe(sql))
        .bind(&f.address[..])
        .bind(f.topic0.as_ref().map(|t| t.to_vec()))
        .bind(f.from.map_or(0, clamp))
        .bind(f.to.map_or(i64::MAX, clamp))
        .bind(clamp(f.limit))
        .fetch_all(pool)
        .await?;
    let columns = [
        "block", "log", "tx", "sender", "status", "topic0", "topic1", "topic2", "topic3", "data",
    ];
    Ok(Table {
        columns: columns.iter().map(|c| c.to_string()).collect(),
        rows: rows.into_iter().map(|(r,)| r).collect(),
        affected: None,
    })
}

/// A query's result as text: column names and rows (NULL as `None`).
pub struct Table {
    pub columns: Vec<String>,
    pub rows: Vec<Vec<Option<String>>>,
    /// For statements that return no rows: how many rows they touched.
    pub affected: Option<u64>,
}

/// Runs `query` in a read-only transaction that is never committed.
/// Row-returning statements are wrapped so every value comes back as text
/// in column order whatever its type (bytea as `\x…`).
pub async fn run_sql(pool: &PgPool, query: &str) -> Result<Table> {
    let q = query.trim().trim_end_matches(';');
    let first = q
        .split_whitespace()
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    // Read-only, whatever the statement: `sql` can be handed to analysts
    // on the indexer's own role. Nothing is committed.
    let mut tx = pool.begin().await?;
    sqlx::query("SET TRANSACTION READ ONLY")
        .execute(&mut *tx)
        .await?;
    if !matches!(first.as_str(), "select" | "with" | "values" | "table") {
        let r = (&mut *tx).execute(AssertSqlSafe(q.to_string())).await?;
        return Ok(Table {
            columns: vec![],
            rows: vec![],
            affected: Some(r.rows_affected()),
        });
    }
    // Column names come from a zero-row probe so an empty result still
    // shows its header.
    let wrapped = format!(
        "SELECT ARRAY(SELECT key FROM json_each(j)), ARRAY(SELECT value FROM json_each_text(j))
         FROM (SELECT row_to_json(q) AS j FROM ({q}) q) s"
    );
    // The `sql` command runs what its user typed, by design.
    let rows = sqlx::query(AssertSqlSafe(wrapped))
        .fetch_all(&mut *tx)
        .await?;
    let mut columns = Vec::new();
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        if columns.is_empty() {
            columns = row.get::<Vec<String>, _>(0);
        }
        out.push(row.get::<Vec<Option<String>>, _>(1));
    }
    if columns.is_empty() {
        let described = (&mut *tx)
            .describe(AssertSqlSafe(q.to_string()).into_sql_str())
            .await?;
        columns = described
            .columns()
            .iter()
            .map(|c| c.name().to_string())
            .collect();
    }
    Ok(Table {
        columns,
        rows: out,
        affected: None,
    })
}

impl std::fmt::Display for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if let Some(n) = self.affected {
            return writeln!(f, "{n} rows affected");
        }
        let cell = |v: &Option<String>| v.clone().unwrap_or_else(|| "NULL".into());
        let mut widths: Vec<usize> = self.columns.iter().map(|c| c.chars().count()).collect();
        for row in &self.rows {
            for (w, v) in widths.iter_mut().zip(row) {
                *w = (*w).max(cell(v).chars().count());
            }
        }
        let line = |f: &mut std::fmt::Formatter<'_>, vals: Vec<String>| {
            let cells: Vec<String> = vals
                .iter()
                .zip(&widths)
                .map(|(v, w)| format!("{v:<w$}"))
                .collect();
            writeln!(f, " {}", cells.join(" | ").trim_end())
        };
        line(f, self.columns.clone())?;
        let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
        writeln!(f, "-{}-", rule.join("-+-"))?;
        for row in &self.rows {
            line(f, row.iter().map(cell).collect())?;
        }
        writeln!(
            f,
            "({} row{})",
            self.rows.len(),
            if self.rows.len() == 1 { "" } else { "s" }
        )
    }
}
