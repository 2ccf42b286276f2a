//! The indexing commands (`backfill`, `follow`, `sync`): everything around
//! the pipeline that a running service needs. Opens the database, builds
//! the JSON-RPC source and refuses a node of another chain than the
//! tables' (recording the chain id on the first run), takes the writer
//! lock, listens for signals, serves
//! `/metrics`, then runs the pipeline's converge loop with typed values and
//! prints the summary (also when the run stops with an error). The indexing itself is [`crate::pipeline`]'s.

use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context as _;

use crate::chain::Chain;
use crate::cli::BlockTarget;
use crate::config::{LogsMode, SegmentBlocks, Settings};
use crate::decode::EventSpec;
use crate::metrics::Metrics;
use crate::pipeline::{ConvergeEnd, Ctx, FollowStart, PipelineSettings};
use crate::recover::Pool;
use crate::rpc::RpcClient;
use crate::store::{LockMode, Reconnecting, StoreError};

use super::{Database, Migrations, open_database};

pub async fn backfill(settings: Settings, from: u64, to: BlockTarget) -> anyhow::Result<ExitCode> {
    let (segment_blocks, lease) = (settings.index.segment_blocks, settings.index.lease);
    let role = match segment_blocks {
        SegmentBlocks::Off => Role::Alone,
        SegmentBlocks::Auto | SegmentBlocks::Blocks(_) => Role::Shared,
    };
    run(settings, "backfill", role, |ctx, sink| async move {
        let to = match to {
            BlockTarget::Number(n) => n,
            BlockTarget::Latest => ctx.source.head().await?,
        };
        anyhow::ensure!(from <= to, "--from {from} is above --to {to}");
        let size = match segment_blocks {
            SegmentBlocks::Off => return crate::pipeline::backfill(&ctx, from, to).await,
            SegmentBlocks::Auto => crate::pipeline::auto_segment_blocks(from, to),
            SegmentBlocks::Blocks(n) => n.get(),
        };
        crate::pipeline::leased_backfill(&ctx, sink, from, to, size, lease).await
    })
    .await
}

pub async fn follow(settings: Settings, from: Option<u64>) -> anyhow::Result<ExitCode> {
    let start = from.map_or(FollowStart::Resume, FollowStart::At);
    run(settings, "follow", Role::Leader, |ctx, _| async move {
        crate::pipeline::follow(&ctx, start).await
    })
    .await
}

pub async fn sync(settings: Settings, from: Option<u64>) -> anyhow::Result<ExitCode> {
    let start = FollowStart::CatchUp {
        from: from.unwrap_or(0),
    };
    run(settings, "sync", Role::Leader, |ctx, _| async move {
        crate::pipeline::follow(&ctx, start).await
    })
    .await
}

/// How a run holds the database's writer lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    /// The only writer (`backfill` with `index.segment_blocks` off);
    /// another writer present is an error.
    Alone,
    /// The leader of `follow`/`sync`: while another leads, this one waits
    /// as a hot standby and takes over the moment it is gone.
    Leader,
    /// One of any number of backfills sharing ranges by leased segments
    /// (the default); a writer alone present is an error.
    Shared,
}

/// Sets up a run, hands `converge` the context, and tears it down.
async fn run<F, Fut>(
    mut settings: Settings,
    what: &str,
    role: Role,
    converge: F,
) -> anyhow::Result<ExitCode>
where
    F: FnOnce(Arc<Ctx>, Arc<dyn crate::sink::Segments>) -> Fut,
    Fut: Future<Output = anyhow::Result<ConvergeEnd>>,
{
    narrow_to_events(&mut settings)?;
    let database = open_database(&settings, Migrations::Apply).await?;
    let rpc = Arc::new(RpcClient::new(settings.rpc.clone())?.with_logs(&settings.logs));
    let chain_id = check_chain(&database, &rpc).await?;
    let lock = match role {
        Role::Alone => match database.store.lock_writer(LockMode::Exclusive).await {
            Err(StoreError::Locked) => anyhow::bail!(
                "another sender-indexer is writing to this database, and this backfill was set to write alone (index.segment_blocks = 0 or \"off\")\n\n\
                 hint: without --segment-blocks 0, backfill processes share a range (index.segment_blocks = \"auto\", the default); \
                 otherwise stop the other one first, or point this one at another database"
            ),
            other => other?,
        },
        Role::Shared => match database.store.lock_writer(LockMode::Shared).await {
            Err(StoreError::Locked) => anyhow::bail!(
                "a sender-indexer that writes alone (follow, sync, or a backfill with --segment-blocks 0) is writing to this database; backfill processes share a range only with one another\n\n\
                 hint: stop it first and run it again once this backfill is done (follow and sync resume from the checkpoint), or point this one at another database"
            ),
            other => other?,
        },
        Role::Leader => match database.store.lock_writer(LockMode::Exclusive).await {
            Err(StoreError::Locked) => {
                tracing::info!(target: "indexer", "another sender-indexer writes to this database; standing by to take over when it stops");
                let lock = database
                    .store
                    .lock_writer_within(LockMode::Exclusive, None)
                    .await?;
                tracing::info!(target: "indexer", "the writer lock is free: taking over");
                lock
            }
            other => other?,
        },
    };
    let store = database
        .store
        .clone()
        .with_events(&settings.events)
        .await?
        .with_optional_indexes(&settings.index.optional_indexes)?;
    let sink = Arc::new(
        Reconnecting::new(
            store.clone(),
            lock,
            database.name.clone(),
            settings.database.reconnect_budget,
        )
        .with_lease_time(settings.index.lease),
    );
    let (trigger, shutdown) = crate::shutdown::channel();
    crate::shutdown::listen_for_signals(trigger);
    let metrics = Metrics::new();
    let rpc_stats = rpc.stats();
    metrics.attach_rpc(Arc::clone(&rpc_stats));
    if let Some(addr) = settings.metrics.listen {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .with_context(|| format!("setting metrics.listen: cannot listen on {addr}"))?;
        tracing::info!(target: "indexer::metrics", addr = %listener.local_addr()?, "serving /metrics and /health");
        tokio::spawn(crate::metrics::serve(
            listener,
            Arc::clone(&metrics),
            settings.metrics.max_lag_blocks,
            settings.metrics.max_stall,
        ));
    }
    let chain = resolve_chain(chain_id, &settings);
    let ctx = Arc::new(Ctx::new(
        chain,
        rpc,
        Arc::clone(&sink) as Arc<dyn crate::sink::Sink>,
        Arc::new(Pool::from_setting(settings.index.threads)),
        PipelineSettings::from(settings),
        metrics,
        shutdown,
    ));
    let end = match converge(Arc::clone(&ctx), Arc::clone(&sink) as _).await {
        Ok(end) => end,
        Err(e) => {
            // What the run did before it stopped (wrong answers met, blocks
            // fetched again), above the error `main` prints.
            if let Ok(progress) = ctx.progress.try_lock() {
                progress.finish();
            }
            let summary = crate::progress::summary(&ctx.metrics, what);
            tracing::info!(target: "indexer", "stopped by an error; {summary}");
            return Err(e);
        }
    };
    ctx.progress.lock().await.finish();
    sink.release().await?;
    let summary = crate::progress::summary(&ctx.metrics, what);
    match end {
        ConvergeEnd::Complete => tracing::info!(target: "indexer", "{summary}"),
        ConvergeEnd::Shutdown => tracing::info!(target: "indexer", "stopped by signal; {summary}"),
    }
    for ep in rpc_stats.endpoints() {
        tracing::info!(
            target: "indexer::rpc",
            endpoint = ep.name(),
            requests = ep.requests(),
            errors = ep.errors(),
            throttled = ep.throttled(),
            benched = ep.benched(),
            "endpoint totals"
        );
    }
    let undecodable = store.undecodable_logs();
    if undecodable > 0 {
        tracing::warn!(target: "indexer::events", undecodable, "logs matched an [[events]] signature but did not decode (each is logged above with its block and index; they stay in logs)");
    }
    Ok(ExitCode::SUCCESS)
}

/// The chain the node serves, and whose rules its blocks are read by.
fn resolve_chain(id: u64, settings: &Settings) -> Chain {
    let setting = settings.chain.profile;
    let chain = Chain::resolve(id, setting);
    if Chain::is_guess(id, setting) {
        tracing::info!(target: "indexer", "{}: a chain id this indexer does not list, read by Ethereum's rules; if it is an OP Stack, Arbitrum Orbit or other chain, set chain.profile (--chain-profile)", chain.describe());
    } else {
        tracing::info!(target: "indexer", "indexing {}", chain.describe());
    }
    chain
}

/// The node's chain id against the one recorded with the tables, before
/// the run writes anything: the first run into an empty schema records it,
/// a node of another chain is refused, so one schema never mixes chains.
async fn check_chain(database: &Database, rpc: &RpcClient) -> anyhow::Result<u64> {
    let node = rpc.chain_id().await?;
    let recorded = database.store.record_chain_id(node).await?;
    if recorded != node {
        let schema = database.store.schema().unwrap_or("none");
        anyhow::bail!(
            "schema {schema} of database {} holds chain id {recorded}, but the node says chain id {node}; nothing was written\n\nhint: point --rpc-url / RPC_URL at a node of chain {recorded}, or index chain {node} into a schema of its own with --schema NAME (DATABASE_SCHEMA, database.schema)",
            database.name
        );
    }
    tracing::debug!(target: "indexer", chain_id = node, schema = database.store.schema(), "chain id matches the tables'");
    Ok(node)
}

/// In `getLogs` mode with no filters of its own, ask the node only for the
/// logs the `[[events]]` tables want: their selectors, and their contracts
/// when every entry names some.
fn narrow_to_events(settings: &mut Settings) -> anyhow::Result<()> {
    let logs = &mut settings.logs;
    let unfiltered = logs.addresses.is_empty() && logs.topics0.is_empty();
    if logs.mode != LogsMode::GetLogs || settings.events.is_empty() || !unfiltered {
        return Ok(());
    }
    for e in &settings.events {
        let spec = EventSpec::parse(&e.signature)?;
        if !logs.topics0.contains(&spec.topic0) {
            logs.topics0.push(spec.topic0);
        }
    }
    if settings.events.iter().all(|e| !e.addresses.is_empty()) {
        for a in settings.events.iter().flat_map(|e| &e.addresses) {
            if !logs.addresses.contains(a) {
                logs.addresses.push(*a);
            }
        }
    }
    tracing::info!(target: "indexer::events", topics0 = logs.topics0.len(), addresses = logs.addresses.len(), "getLogs mode without logs filters: asking only for the [[events]] logs");
    Ok(())
}
