//! Orchestration: indexes blocks from a [`Source`] into a [`Sink`], through
//! the recovery pool, for the commands that index (`backfill`, `follow`,
//! `sync`). It decides what to index next, handles checkpoints, reorgs and
//! shutdown, and wires the stages with bounded channels; the stages do the
//! work.
//!
//! It sees the chain and the database only through the two traits, and
//! receives typed values (a resolved range, a [`FollowStart`]), never
//! command-line types: choosing the database, building clients, signals
//! and the metrics server are [`crate::app`]'s.
//!
//! * `range`: one range, fetch → recover → write as three stages; each
//!   block is checked once, by [`crate::verify::check`], between recovery
//!   and the write, and fetched again when the answer is not fatal.
//! * `refetch`: whether a block answered wrong is fetched again (answers
//!   that differ, within `index.refetch_budget_ms`) or stops the run (the
//!   same answer again and again). `backfill`, `follow`, `sync` and leased
//!   segments all index through `range`, so all behave alike.
//! * `follow`: the converge loops (`backfill`, `follow`, `sync`) and reorgs;
//!   each run is first linked to its trust anchors ([`crate::verify::link`]),
//!   which are then passed to every range it indexes.
//! * `leased`: `backfill` by leased segments (the default), shared by every
//!   backfill process on the database.
//! * `defer_indexes`: when a load is large enough to build the lookup
//!   indexes after it rather than during it.

mod defer_indexes;
mod follow;
mod leased;
pub(crate) mod range;
mod refetch;

pub use follow::{ConvergeEnd, FollowStart, backfill, follow};
pub use leased::{auto_segment_blocks, leased_backfill};
pub use range::{PENDING_TXS, Step, index_range};

use std::sync::Arc;

use crate::chain::Chain;
use crate::config::{FollowSettings, IndexSettings, LogsSettings, VerifySettings};
use crate::metrics::Metrics;
use crate::progress::Progress;
use crate::recover::Pool;
use crate::shutdown::Shutdown;
use crate::sink::Sink;
use crate::source::Source;

/// The settings sections the pipeline reads.
pub struct PipelineSettings {
    pub index: IndexSettings,
    pub follow: FollowSettings,
    pub logs: LogsSettings,
    pub verify: VerifySettings,
}

impl From<crate::config::Settings> for PipelineSettings {
    fn from(s: crate::config::Settings) -> Self {
        PipelineSettings {
            index: s.index,
            follow: s.follow,
            logs: s.logs,
            verify: s.verify,
        }
    }
}

/// Everything a running indexer shares.
pub struct Ctx {
    /// The chain indexed: its id and the rules its blocks are read by.
    pub chain: Chain,
    pub source: Arc<dyn Source>,
    pub sink: Arc<dyn Sink>,
    pub pool: Arc<Pool>,
    pub index: IndexSettings,
    pub follow: FollowSettings,
    /// Which logs of the receipts the source delivers are kept.
    pub logs: LogsSettings,
    pub verify: VerifySettings,
    pub metrics: Arc<Metrics>,
    pub shutdown: Shutdown,
    pub progress: tokio::sync::Mutex<Progress>,
}

impl Ctx {
    /// A context over `source` and `sink`, with a progress display fed by
    /// `metrics`.
    pub fn new(
        chain: Chain,
        source: Arc<dyn Source>,
        sink: Arc<dyn Sink>,
        pool: Arc<Pool>,
        settings: PipelineSettings,
        metrics: Arc<Metrics>,
        shutdown: Shutdown,
    ) -> Ctx {
        Ctx {
            chain,
            progress: tokio::sync::Mutex::new(Progress::new(Arc::clone(&metrics), None)),
            source,
            sink,
            pool,
            index: settings.index,
            follow: settings.follow,
            logs: settings.logs,
            verify: settings.verify,
            metrics,
            shutdown,
        }
    }
}
