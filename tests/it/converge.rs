//! The converge loop in-process: `pipeline::backfill` and `pipeline::follow`
//! over an in-memory chain (`support::memory_chain`) into a real PostgreSQL
//! store. Reorgs of every depth up to the limit and one past it, a reorg
//! during a catch-up, a node that lags behind our tip, a node whose blocks
//! never chain, a failing node, shutdown mid-batch, and blocks too large for
//! one COPY piece: each ends with the database equal to the chain (or
//! unchanged, with the error), in seconds.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use sqlx::PgPool;

use sender_indexer::block::Block;
use sender_indexer::chain::Chain;
use sender_indexer::config::Settings;
use sender_indexer::decode::B256;
use sender_indexer::metrics::Metrics;
use sender_indexer::pipeline::{ConvergeEnd, Ctx, FollowStart, PipelineSettings};
use sender_indexer::recover::Pool;
use sender_indexer::shutdown::ShutdownTrigger;
use sender_indexer::sink::{Sink, Written};
use sender_indexer::store::Store;
use sender_indexer::verify::Anchor;

use crate::support::memory_chain::MemoryChain;
use crate::support::pg;

/// Longest any converge step here may take before the test fails.
const LIMIT: Duration = Duration::from_secs(30);

/// The deepest reorg these tests roll back.
const MAX_DEPTH: u64 = 8;

struct Run {
    ctx: Arc<Ctx>,
    trigger: ShutdownTrigger,
    pool: PgPool,
}

async fn store() -> (Store, PgPool) {
    let (pool, url) = pg::fresh_db().await;
    let store = Store::connect(url.parse().unwrap(), 4).await.unwrap();
    (store, pool)
}

/// A context over `chain` and `sink`: a fast poll, small write batches (so
/// a range commits in several transactions), two recovery threads.
fn context(chain: &Arc<MemoryChain>, sink: Arc<dyn Sink>, pool: PgPool) -> Run {
    context_with_depth(chain, sink, pool, MAX_DEPTH)
}

fn context_with_depth(
    chain: &Arc<MemoryChain>,
    sink: Arc<dyn Sink>,
    pool: PgPool,
    max_depth: u64,
) -> Run {
    let mut s = Settings::defaults();
    // The memory chain's hashes are labels, not keccak of sealed headers.
    s.verify.level = sender_indexer::verify::Level::Off;
    s.follow.poll_interval = Duration::from_millis(10);
    s.follow.max_reorg_depth = max_depth.try_into().unwrap();
    s.index.write_batch_blocks = 16.try_into().unwrap();
    let (trigger, shutdown) = sender_indexer::shutdown::channel();
    let ctx = Ctx::new(
        Chain::resolve(31337, None),
        Arc::clone(chain) as _,
        sink,
        Arc::new(Pool::new(2, 8)),
        PipelineSettings::from(s),
        Metrics::new(),
        shutdown,
    );
    Run {
        ctx: Arc::new(ctx),
        trigger,
        pool,
    }
}

async fn run_on_store(chain: &Arc<MemoryChain>) -> Run {
    let (store, pool) = store().await;
    context(chain, Arc::new(store), pool)
}

/// Stored (number, hash, tx hashes in order) and the checkpoint, read in
/// one snapshot while the indexer may be writing.
async fn stored(pool: &PgPool) -> (Vec<(u64, B256, Vec<String>)>, Option<u64>) {
    let mut snap = pool.begin().await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
        .execute(&mut *snap)
        .await
        .unwrap();
    let blocks: Vec<(i64, Vec<u8>)> = sqlx::query_as("SELECT number, hash FROM blocks ORDER BY 1")
        .fetch_all(&mut *snap)
        .await
        .unwrap();
    let txs: Vec<(i64, String, bool)> = sqlx::query_as(
        "SELECT block_number, encode(hash, 'hex'), coalesce(from_matches, false)
         FROM transactions ORDER BY block_number, tx_index",
    )
    .fetch_all(&mut *snap)
    .await
    .unwrap();
    let checkpoint: Option<i64> = sqlx::query_scalar("SELECT block_number FROM checkpoint")
        .fetch_optional(&mut *snap)
        .await
        .unwrap();
    snap.commit().await.unwrap();
    let mut out: Vec<(u64, B256, Vec<String>)> = blocks
        .into_iter()
        .map(|(n, h)| (n as u64, h.try_into().unwrap(), Vec::new()))
        .collect();
    for (n, hash, matches) in txs {
        assert!(matches, "block {n} tx {hash}: recovered sender != from");
        let slot = out.iter_mut().find(|b| b.0 == n as u64);
        slot.unwrap_or_else(|| panic!("tx {hash} of unstored block {n}"))
            .2
            .push(hash);
    }
    (out, checkpoint.map(|c| c as u64))
}

/// `Err` with the first difference between the database and the chain's
/// blocks `0..=hi`: blocks, their hashes and transactions, nothing else,
/// checkpoint at `hi`.
async fn differs(pool: &PgPool, chain: &MemoryChain, hi: u64) -> Result<(), String> {
    let want: Vec<_> = chain
        .canonical()
        .into_iter()
        .take(hi as usize + 1)
        .collect();
    let (got, checkpoint) = stored(pool).await;
    if checkpoint != Some(hi) {
        return Err(format!("checkpoint {checkpoint:?}, want {hi}"));
    }
    if got.len() != want.len() {
        return Err(format!("{} blocks stored, want {}", got.len(), want.len()));
    }
    for (g, w) in got.iter().zip(&want) {
        if g != w {
            return Err(format!("block {}: stored {g:?}, chain {w:?}", w.0));
        }
    }
    Ok(())
}

/// Polls until the database equals the chain up to its tip.
async fn wait_equal(run: &Run, chain: &MemoryChain, what: &str) {
    let deadline = Instant::now() + LIMIT;
    loop {
        match differs(&run.pool, chain, chain.tip()).await {
            Ok(()) => return,
            Err(e) if Instant::now() > deadline => panic!("{what}: {e}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
        }
    }
}

async fn reorgs(pool: &PgPool) -> Vec<(i64, i32)> {
    sqlx::query_as("SELECT ancestor, depth FROM reorgs ORDER BY id")
        .fetch_all(pool)
        .await
        .unwrap()
}

type Following = tokio::task::JoinHandle<anyhow::Result<ConvergeEnd>>;

fn spawn_follow(run: &Run, start: FollowStart) -> Following {
    let ctx = Arc::clone(&run.ctx);
    tokio::spawn(async move { sender_indexer::pipeline::follow(&ctx, start).await })
}

async fn ended(task: Following) -> anyhow::Result<ConvergeEnd> {
    tokio::time::timeout(LIMIT, task)
        .await
        .expect("the converge loop did not end")
        .expect("the converge loop panicked")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reorgs_of_every_depth_to_the_limit_roll_back_and_one_deeper_stops() {
    let chain = MemoryChain::new(30, 2);
    let run = run_on_store(&chain).await;
    let task = spawn_follow(&run, FollowStart::CatchUp { from: 0 });
    wait_equal(&run, &chain, "caught up").await;
    for depth in 1..=MAX_DEPTH {
        chain.reorg(depth);
        wait_equal(&run, &chain, &format!("reorg of depth {depth}")).await;
        let tip = chain.tip() as i64;
        assert_eq!(
            reorgs(&run.pool).await.last(),
            Some(&(tip - depth as i64, depth as i32)),
            "depth {depth}"
        );
        // The chain grows on the new fork as well.
        chain.extend(1);
        wait_equal(&run, &chain, &format!("growth after depth {depth}")).await;
    }
    assert_eq!(run.ctx.metrics.reorgs.get(), MAX_DEPTH);

    let before = stored(&run.pool).await;
    chain.reorg(MAX_DEPTH + 1);
    let err = ended(task).await.expect_err("a reorg past the limit stops");
    let msg = format!("{err:#}");
    assert!(
        msg.contains(&format!(
            "reorg deeper than follow.max_reorg_depth ({MAX_DEPTH})"
        )) && msg.contains("the database is left unchanged"),
        "{msg}"
    );
    assert_eq!(stored(&run.pool).await, before, "nothing rolled back");
    assert_eq!(reorgs(&run.pool).await.len(), MAX_DEPTH as usize);
}

/// `impl Sink for $ty`, whose `store` field answers every call but
/// `write_blocks`, which `$write` does (`$sink` is `self`).
macro_rules! sink_over_store {
    ($ty:ty, |$sink:ident, $blocks:ident| $write:block) => {
        #[async_trait::async_trait]
        impl Sink for $ty {
            async fn write_blocks(&self, $blocks: &[Block]) -> anyhow::Result<Written> {
                let $sink = self;
                $write
            }
            async fn checkpoint(&self) -> anyhow::Result<Option<(u64, B256)>> {
                Ok(self.store.checkpoint().await?)
            }
            async fn block_hash(&self, n: u64) -> anyhow::Result<Option<B256>> {
                Ok(self.store.block_hash(n).await?)
            }
            async fn parent_hash(&self, n: u64) -> anyhow::Result<Option<B256>> {
                Ok(self.store.parent_hash(n).await?)
            }
            async fn linked(&self, from: u64, to: u64) -> anyhow::Result<bool> {
                Ok(self.store.linked(from, to).await?)
            }
            async fn record_anchor(&self, anchor: &Anchor) -> anyhow::Result<()> {
                Ok(self.store.record_anchor(anchor).await?)
            }
            async fn rollback_to(&self, ancestor: u64, new: Option<&B256>) -> anyhow::Result<u64> {
                Ok(self.store.rollback_to(ancestor, new).await?)
            }
            async fn stored_blocks(&self, from: u64, to: u64) -> anyhow::Result<(u64, u64)> {
                Ok(self.store.stored_blocks(from, to).await?)
            }
            async fn missing_lookup_indexes(&self) -> anyhow::Result<Vec<&'static str>> {
                Ok(self.store.missing_lookup_indexes().await?)
            }
            async fn drop_lookup_indexes(&self) -> anyhow::Result<()> {
                Ok(self.store.drop_lookup_indexes().await?)
            }
            async fn build_lookup_indexes(&self) -> anyhow::Result<()> {
                self.store.build_lookup_indexes().await?;
                Ok(())
            }
        }
    };
}

/// A sink that forks the chain once the store has committed block `at`:
/// a reorg that lands while a catch-up is writing.
struct ForkAfter {
    store: Store,
    chain: Arc<MemoryChain>,
    at: u64,
    fork_from: u64,
    done: AtomicBool,
}

sink_over_store!(ForkAfter, |sink, blocks| {
    let written = sink.store.write_blocks(blocks).await?;
    let last = blocks.last().map(|b| b.header.number);
    if matches!(written, Written::Committed(_))
        && last >= Some(sink.at)
        && !sink.done.swap(true, Ordering::SeqCst)
    {
        let len = sink.chain.tip() + 1 - sink.fork_from;
        sink.chain.fork_at(sink.fork_from, len);
    }
    Ok(written)
});

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reorg_during_a_catch_up_is_rolled_back_and_the_catch_up_completes() {
    let chain = MemoryChain::new(400, 2);
    // Slow enough that the fetch stage is only a little ahead of the
    // writer when the fork lands, so the blocks after it come from the new
    // fork (a fixed range is not re-checked once written).
    chain.set_block_delay(Duration::from_millis(2));
    let (store, pool) = store().await;
    let sink = Arc::new(ForkAfter {
        store,
        chain: Arc::clone(&chain),
        at: 150,
        fork_from: 120,
        done: AtomicBool::new(false),
    });
    // Deep enough for every old-fork block written or in flight.
    let run = context_with_depth(&chain, sink, pool, 256);
    let end = sender_indexer::pipeline::backfill(&run.ctx, 0, 399)
        .await
        .unwrap();
    assert_eq!(end, ConvergeEnd::Complete);
    differs(&run.pool, &chain, 399).await.unwrap();
    let r = reorgs(&run.pool).await;
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!(r[0].0, 119, "rolled back to the block below the fork");
    assert!(
        r[0].1 >= 150 - 119,
        "every stored block of the old fork: {r:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_behind_our_tip_with_our_hashes_is_waited_out() {
    let chain = MemoryChain::new(30, 1);
    let run = run_on_store(&chain).await;
    let task = spawn_follow(&run, FollowStart::CatchUp { from: 0 });
    wait_equal(&run, &chain, "caught up").await;
    let before = stored(&run.pool).await;

    // A replica five blocks behind: its head is below our checkpoint.
    chain.set_lag(5);
    tokio::time::sleep(Duration::from_millis(300)).await; // ~30 polls
    assert_eq!(stored(&run.pool).await, before, "nothing rolled back");
    assert!(!task.is_finished(), "still following");

    chain.extend(3);
    chain.set_lag(0);
    wait_equal(&run, &chain, "caught up again").await;
    assert!(reorgs(&run.pool).await.is_empty());
    assert_eq!(run.ctx.metrics.reorgs.get(), 0);
    run.trigger.trigger();
    assert_eq!(ended(task).await.unwrap(), ConvergeEnd::Shutdown);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_blocks_never_chain_is_an_error_not_a_spin() {
    let chain = MemoryChain::new(10, 1);
    let run = run_on_store(&chain).await;
    let task = spawn_follow(&run, FollowStart::CatchUp { from: 0 });
    wait_equal(&run, &chain, "caught up").await;
    let before = stored(&run.pool).await;

    chain.set_unchained(true);
    chain.extend(2);
    let err = ended(task).await.expect_err("unchained blocks stop follow");
    let msg = format!("{err:#}");
    assert!(
        msg.starts_with("block 10: its parent hash does not match block 9")
            && msg.contains("do not form a chain"),
        "{msg}"
    );
    assert_eq!(
        stored(&run.pool).await,
        before,
        "nothing written or deleted"
    );
    assert!(reorgs(&run.pool).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_mid_batch_commits_whole_blocks_and_a_rerun_completes() {
    let chain = MemoryChain::new(300, 3);
    chain.set_block_delay(Duration::from_millis(3));
    let run = run_on_store(&chain).await;
    let ctx = Arc::clone(&run.ctx);
    let task = tokio::spawn(async move { sender_indexer::pipeline::backfill(&ctx, 0, 299).await });
    let deadline = Instant::now() + LIMIT;
    while pg::checkpoint(&run.pool).await.is_none_or(|c| c < 40) {
        assert!(Instant::now() < deadline, "no progress");
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    run.trigger.trigger();
    assert_eq!(ended(task).await.unwrap(), ConvergeEnd::Shutdown);
    let (blocks, checkpoint) = stored(&run.pool).await;
    let cp = checkpoint.expect("a checkpoint");
    assert!(cp < 299, "stopped before the end, at {cp}");
    // Whole blocks, contiguous, each with every transaction.
    differs(&run.pool, &chain, cp).await.unwrap();
    assert_eq!(blocks.len() as u64, cp + 1);

    chain.set_block_delay(Duration::ZERO);
    let rerun = run_on_store_with(&chain, run.pool.clone()).await;
    let end = sender_indexer::pipeline::backfill(&rerun.ctx, 0, 299).await;
    assert_eq!(end.unwrap(), ConvergeEnd::Complete);
    differs(&run.pool, &chain, 299).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_node_stops_the_run_with_its_error_and_a_consistent_prefix() {
    let chain = MemoryChain::new(200, 2);
    let run = run_on_store(&chain).await;
    let ctx = Arc::clone(&run.ctx);
    chain.set_block_delay(Duration::from_millis(1));
    let task = tokio::spawn(async move { sender_indexer::pipeline::backfill(&ctx, 0, 199).await });
    while chain.blocks_served() < 60 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    chain.fail_next(1);
    let err = ended(task).await.expect_err("the failure ends the run");
    assert!(format!("{err:#}").contains("injected failure"), "{err:#}");
    if let Some(cp) = stored(&run.pool).await.1 {
        assert!(cp < 199);
        differs(&run.pool, &chain, cp).await.unwrap();
    }
    let rerun = run_on_store_with(&chain, run.pool.clone()).await;
    let end = sender_indexer::pipeline::backfill(&rerun.ctx, 0, 199).await;
    assert_eq!(end.unwrap(), ConvergeEnd::Complete);
    differs(&run.pool, &chain, 199).await.unwrap();
}

/// A second run on the database behind `pool` (a restart).
async fn run_on_store_with(chain: &Arc<MemoryChain>, pool: PgPool) -> Run {
    let store = Store::connect((*pool.connect_options()).clone(), 4)
        .await
        .unwrap();
    context(chain, Arc::new(store), pool)
}

/// Blocks whose rows are larger than one COPY piece (1 MiB) each: the rows
/// go to PostgreSQL in pieces while the rest are encoded, and every block
/// is stored whole, in order, each sender recovered and equal to `from`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blocks_larger_than_one_copy_piece_are_stored_whole() {
    let chain = MemoryChain::new(4, 6_000);
    let run = run_on_store(&chain).await;
    let end = sender_indexer::pipeline::backfill(&run.ctx, 0, 3).await;
    assert_eq!(end.unwrap(), ConvergeEnd::Complete);
    differs(&run.pool, &chain, 3).await.unwrap();
    // The stored size is below the COPY's (which adds a length to each
    // field), so each block's COPY data passed a piece.
    let smallest: i64 = sqlx::query_scalar(
        "SELECT min(size)::int8 FROM (SELECT sum(pg_column_size(t.*)) AS size
         FROM transactions t GROUP BY block_number) b",
    )
    .fetch_one(&run.pool)
    .await
    .unwrap();
    assert!(smallest > 1 << 20, "a block's rows take {smallest} bytes");
}

/// A sink whose writes wait until `gate` has permits: a writer stuck on a
/// batch, as behind a PostgreSQL that stopped answering. Each batch's
/// length is noted as it arrives.
struct Gated {
    store: Store,
    gate: Arc<tokio::sync::Semaphore>,
    batches: std::sync::Mutex<Vec<usize>>,
}

sink_over_store!(Gated, |sink, blocks| {
    sink.batches.lock().unwrap().push(blocks.len());
    let _pass = sink.gate.acquire().await?;
    Ok(sink.store.write_blocks(blocks).await?)
});

/// While the writer is stuck on its first batch, the range holds that
/// batch, one more gathered for it (`index.write_batch_blocks`, 16 here),
/// the blocks queued or recovered up to `PENDING_TXS`, and the one block
/// the fetching stage waits to queue: it fetches that many and no more.
/// None of it is lost once the writer goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_writer_stops_fetching_one_batch_ahead_of_it() {
    const TXS_PER_BLOCK: usize = 200;
    let chain = MemoryChain::new(400, TXS_PER_BLOCK);
    let (store, pool) = store().await;
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let sink = Arc::new(Gated {
        store,
        gate: Arc::clone(&gate),
        batches: Default::default(),
    });
    let run = context(&chain, Arc::clone(&sink) as _, pool);
    let ctx = Arc::clone(&run.ctx);
    let task = tokio::spawn(async move { sender_indexer::pipeline::backfill(&ctx, 0, 399).await });
    let deadline = Instant::now() + LIMIT;
    let first = loop {
        if let Some(&n) = sink.batches.lock().unwrap().first() {
            break n;
        }
        assert!(Instant::now() < deadline, "no batch reached the writer");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let queued = sender_indexer::pipeline::PENDING_TXS / TXS_PER_BLOCK;
    let bound = (first + run.ctx.index.write_batch_blocks.get() + queued + 1) as u64;
    while chain.blocks_served() < bound {
        assert!(
            Instant::now() < deadline,
            "fetching stopped at {} blocks, short of {bound}",
            chain.blocks_served()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        chain.blocks_served(),
        bound,
        "blocks fetched while the writer is stuck"
    );
    assert_eq!(sink.batches.lock().unwrap().len(), 1);
    gate.add_permits(1 << 20);
    assert_eq!(ended(task).await.unwrap(), ConvergeEnd::Complete);
    differs(&run.pool, &chain, 399).await.unwrap();
}
