//! Orchestration: wires rpc → decode → recover → store for the commands
//! that index (`backfill`, `follow`, `sync`) and the ones that only read
//! (`status`, `sql`). It owns the run's shared context, the database choice
//! (a configured URL, or the embedded cluster), metrics and shutdown; the
//! stages themselves do the work.

mod defer_indexes;
mod follow;
mod range;

pub use follow::{ConvergeEnd, backfill, follow};
pub use range::{Step, index_range};

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use sqlx::postgres::PgConnectOptions;

use crate::cli::{BlockTarget, Command};
use crate::config::Settings;
use crate::embedded_pg::{Cluster, ClusterOptions};
use crate::metrics::Metrics;
use crate::progress::Progress;
use crate::recover::Pool;
use crate::rpc::{RpcClient, RpcConfig};
use crate::shutdown::Shutdown;
use crate::store::Store;

/// Everything a running indexer shares.
pub struct Ctx {
    pub settings: Settings,
    pub rpc: Arc<RpcClient>,
    pub store: Store,
    pub pool: Arc<Pool>,
    pub metrics: Arc<Metrics>,
    pub shutdown: Shutdown,
    pub progress: tokio::sync::Mutex<Progress>,
}

/// The database the settings name, and the embedded server if we started
/// one (stopped when this is dropped).
pub struct Database {
    pub store: Store,
    embedded: Option<Cluster>,
}

impl Drop for Database {
    fn drop(&mut self) {
        if let Some(cluster) = self.embedded.take().filter(|c| !c.reused()) {
            let _ = cluster.stop();
        }
    }
}

/// Database name used inside the embedded cluster.
const EMBEDDED_DB: &str = "sender_indexer";

pub async fn open_database(settings: &Settings) -> anyhow::Result<Database> {
    let db = &settings.database;
    if !db.url.is_empty() {
        let options: PgConnectOptions = db.url.parse().with_context(|| {
            format!(
                "setting database.url: cannot parse {}",
                crate::rpc::redact_url(&db.url)
            )
        })?;
        let store = Store::connect(options, db.max_connections)
            .await
            .with_context(|| format!("database {}", crate::rpc::redact_url(&db.url)))?;
        return Ok(Database {
            store,
            embedded: None,
        });
    }
    let data_dir = if db.data_dir.is_empty() {
        crate::embedded_pg::default_data_dir()?
    } else {
        db.data_dir.clone().into()
    };
    let opts = ClusterOptions::new(&data_dir);
    let cluster = tokio::task::spawn_blocking(move || Cluster::start(&opts))
        .await?
        .with_context(|| format!("embedded database in {}", data_dir.display()))?;
    cluster.create_database_if_missing(EMBEDDED_DB).await?;
    let store = Store::connect(cluster.connect_options(EMBEDDED_DB), db.max_connections).await?;
    Ok(Database {
        store,
        embedded: Some(cluster),
    })
}

pub fn rpc_client(settings: &Settings) -> anyhow::Result<Arc<RpcClient>> {
    let r = &settings.rpc;
    let cfg = RpcConfig {
        url: r.url.clone(),
        batch_size: r.batch_size,
        max_in_flight: r.max_in_flight,
        request_timeout: r.request_timeout(),
        max_retries: r.max_retries,
        backoff_initial: Duration::from_millis(r.backoff_initial_ms),
        backoff_max: Duration::from_millis(r.backoff_max_ms),
    };
    Ok(Arc::new(RpcClient::new(cfg)?))
}

/// Runs an indexing or reading command to completion.
pub async fn run_command(command: Command, settings: Settings) -> anyhow::Result<ExitCode> {
    let database = open_database(&settings).await?;
    match command {
        Command::Sql { query } => {
            let table = crate::store::query::run_sql(database.store.pool(), &query).await?;
            print!("{table}");
            return Ok(ExitCode::SUCCESS);
        }
        Command::Status => {
            print!(
                "{}",
                follow::status_report(&settings, &database.store).await?
            );
            return Ok(ExitCode::SUCCESS);
        }
        _ => {}
    }
    let lock = database.store.lock_writer().await?;
    let (trigger, shutdown) = crate::shutdown::channel();
    crate::shutdown::listen_for_signals(trigger);
    let metrics = Metrics::new();
    let rpc = rpc_client(&settings)?;
    metrics.attach_rpc(rpc.stats());
    if !settings.metrics.listen.is_empty() {
        let listener = tokio::net::TcpListener::bind(&settings.metrics.listen)
            .await
            .with_context(|| {
                format!(
                    "setting metrics.listen: cannot listen on {}",
                    settings.metrics.listen
                )
            })?;
        tracing::info!(target: "indexer::metrics", addr = %listener.local_addr()?, "serving /metrics and /health");
        tokio::spawn(crate::metrics::serve(
            listener,
            Arc::clone(&metrics),
            settings.metrics.max_lag_blocks,
            Duration::from_millis(settings.metrics.max_stall_ms),
        ));
    }
    let ctx = Ctx {
        pool: Arc::new(Pool::from_setting(settings.index.threads)),
        store: database.store.clone(),
        progress: tokio::sync::Mutex::new(Progress::new(Arc::clone(&metrics), None)),
        settings,
        rpc,
        metrics,
        shutdown,
    };
    let (what, end) = match command {
        Command::Backfill { from, to } => {
            let to = match to {
                BlockTarget::Number(n) => n,
                BlockTarget::Latest => ctx.rpc.head().await?,
            };
            anyhow::ensure!(from <= to, "--from {from} is above --to {to}");
            ("backfill", backfill(&ctx, from, to).await?)
        }
        Command::Follow { from } => ("follow", follow(&ctx, from, false).await?),
        Command::Sync { from } => ("sync", follow(&ctx, Some(from.unwrap_or(0)), true).await?),
        Command::Recover | Command::Sql { .. } | Command::Status => unreachable!("handled above"),
    };
    ctx.progress.lock().await.finish();
    lock.release().await?;
    let summary = crate::progress::summary(&ctx.metrics, what);
    match end {
        ConvergeEnd::Complete => tracing::info!(target: "indexer", "{summary}"),
        ConvergeEnd::Shutdown => tracing::info!(target: "indexer", "stopped by signal; {summary}"),
    }
    Ok(ExitCode::SUCCESS)
}
