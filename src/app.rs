//! Runs one command: sets up logging and the runtime, resolves settings,
//! opens the database, and hands over to the stage that does the work.
//! Errors come back as `anyhow` chains for `main` to print; nothing here
//! decodes, recovers or writes SQL itself.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

use crate::cli::{Cli, Command};
use crate::config::Settings;
use crate::recover::Pool;

pub fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    init_logging();
    let settings = Settings::load(&cli)?;
    tracing::debug!(?settings, "settings");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(dispatch(cli.command, settings))
}

fn init_logging() {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info,sqlx=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}

async fn dispatch(command: Command, settings: Settings) -> anyhow::Result<ExitCode> {
    match command {
        Command::Recover => {
            let pool = Arc::new(Pool::from_setting(settings.index.threads));
            let totals = crate::jsonl::run(tokio::io::stdin(), tokio::io::stdout(), pool)
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
        other => crate::pipeline::run_command(other, settings).await,
    }
}
