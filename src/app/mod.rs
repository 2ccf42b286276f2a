//! Runs one command: sets up logging and the runtime, resolves settings
//! from the command line, the environment and the files, opens the
//! database, builds the source and the sink, and hands typed values to the
//! stage that does the work (the recovery pool for `recover`, the pipeline
//! for `backfill`/`follow`/`sync`, `store`'s read-only queries for
//! `status`/`sql`). Errors come back as `anyhow` chains for `main` to
//! print; nothing here decodes, recovers or writes SQL itself.
//!
//! * `settings`: flags and environment variables as settings overrides.
//! * `database`: the configured PostgreSQL, or the embedded cluster.
//! * `index`: the indexing commands: writer lock, signals, metrics server.
//! * `status`: the `status` report.

mod database;
mod index;
mod settings;
mod status;

use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command};
use crate::config::Settings;
use crate::recover::Pool;

pub use database::{Database, Migrations, open_database};

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    init_logging();
    let settings = settings::load(&cli)?;
    tracing::debug!(?settings, "settings");
    // One thread runs everything async. The pipeline's futures are polled
    // here, in `block_on`, and recovery has threads of its own
    // (`recover::Pool`), so the worker threads of a multi-thread runtime
    // would only read sockets and wake this thread: two context switches
    // for each answer that arrives (docs/performance.md, 2026-12-07
    // seventh: half the context switches, less system time and RSS).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(dispatch(cli.command, settings))
}

/// Log lines on stderr; coloured only on a terminal, and never when
/// `NO_COLOR` is set (<https://no-color.org>), so a log captured to a file
/// holds no escape sequences.
fn init_logging() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(crate::progress::LogWriter)
        .with_ansi(colour(
            std::io::stderr().is_terminal(),
            std::env::var_os("NO_COLOR").as_deref(),
        ))
        .try_init();
}

/// Whether to colour: on a terminal, unless `NO_COLOR` is set to anything
/// but the empty string.
fn colour(terminal: bool, no_color: Option<&std::ffi::OsStr>) -> bool {
    terminal && no_color.is_none_or(|v| v.is_empty())
}

async fn dispatch(command: Command, settings: Settings) -> anyhow::Result<ExitCode> {
    match command {
        Command::Recover { chain_id } => recover(&settings, chain_id).await,
        Command::Sql { query } => {
            let database = open_database(&settings, Migrations::AsIs).await?;
            let table = crate::store::query::run_sql(database.store.pool(), &query)
                .await
                .map_err(|e| match &e {
                    crate::store::StoreError::Sql(sqlx::Error::Database(d))
                        if d.code().as_deref() == Some("25006") =>
                    {
                        anyhow::anyhow!("{e}\n\nhint: `sql` runs every statement read-only, so it can be handed to analysts; make changes with psql")
                    }
                    _ => e.into(),
                })?;
            print!("{table}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Logs {
            address,
            topic0,
            from,
            to,
            limit,
        } => {
            let filter = crate::store::query::LogFilter {
                address: crate::decode::parse_fixed("address", &address).with_context(|| {
                    format!("--address {address}: expected a 0x-prefixed 20-byte address")
                })?,
                topic0: topic0
                    .as_deref()
                    .map(|t| {
                        crate::decode::parse_fixed("topic0", t).with_context(|| {
                            format!("--topic0 {t}: expected a 0x-prefixed 32-byte hash")
                        })
                    })
                    .transpose()?,
                from,
                to,
                limit,
            };
            if let (Some(f), Some(t)) = (from, to) {
                anyhow::ensure!(f <= t, "--from {f} is above --to {t}");
            }
            let database = open_database(&settings, Migrations::ApplyExisting).await?;
            let table = crate::store::query::logs(database.store.pool(), &filter).await?;
            print!("{table}");
            if table.rows.len() as u64 == limit {
                println!("(at most --limit {limit} shown; raise it, or narrow --from/--to)");
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Status => {
            let database = open_database(&settings, Migrations::ApplyExisting).await?;
            print!("{}", status::report(&settings, &database.store).await?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Backfill { from, to } => index::backfill(settings, from, to).await,
        Command::Follow { from } => index::follow(settings, from).await,
        Command::Sync { from } => index::sync(settings, from).await,
    }
}

/// The `recover` command: JSON lines in, JSON lines out.
async fn recover(settings: &Settings, chain_id: Option<u64>) -> anyhow::Result<ExitCode> {
    let pool = Arc::new(Pool::from_setting(settings.index.threads));
    let rules = crate::jsonl::Rules {
        profile: settings.chain.profile,
        chain_id,
    };
    let totals = crate::jsonl::run(tokio::io::stdin(), tokio::io::stdout(), pool, rules)
        .await
        .or_else(|e| match e.kind() {
            // `| head` closed our stdout: not an error.
            std::io::ErrorKind::BrokenPipe => Ok(Default::default()),
            _ => Err(e),
        })
        .context("recover: stdin/stdout")?;
    tracing::info!(
        lines = totals.lines,
        recovered = totals.recovered,
        unrecoverable = totals.failed,
        "recover done"
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::colour;
    use std::ffi::OsStr;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(colour(true, None));
        assert!(colour(true, Some(OsStr::new(""))));
        assert!(!colour(true, Some(OsStr::new("1"))));
        assert!(!colour(false, None));
    }
}
