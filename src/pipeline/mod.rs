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
//! * `range`: one range, fetch → recover → write as three stages.
//! * `follow`: the converge loops (`backfill`, `follow`, `sync`) and reorgs.
//! * `defer_indexes`: when a load is large enough to build the lookup
//!   indexes after it rather than during it.

mod defer_indexes;
mod follow;
mod range;

pub use follow::{ConvergeEnd, FollowStart, backfill, follow};
pub use range::{Step, index_range};

use std::sync::Arc;

use crate::config::{FollowSettings, IndexSettings};
use crate::metrics::Metrics;
use crate::progress::Progress;
use crate::recover::Pool;
use crate::shutdown::Shutdown;
use crate::sink::Sink;
use crate::source::Source;

/// Everything a running indexer shares.
pub struct Ctx {
    pub source: Arc<dyn Source>,
    pub sink: Arc<dyn Sink>,
    pub pool: Arc<Pool>,
    pub index: IndexSettings,
    pub follow: FollowSettings,
    pub metrics: Arc<Metrics>,
    pub shutdown: Shutdown,
    pub progress: tokio::sync::Mutex<Progress>,
}

impl Ctx {
    /// A context over `source` and `sink`, with a progress display fed by
    /// `metrics`.
    pub fn new(
        source: Arc<dyn Source>,
        sink: Arc<dyn Sink>,
        pool: Arc<Pool>,
        index: IndexSettings,
        follow: FollowSettings,
        metrics: Arc<Metrics>,
        shutdown: Shutdown,
    ) -> Ctx {
        Ctx {
            progress: tokio::sync::Mutex::new(Progress::new(Arc::clone(&metrics), None)),
            source,
            sink,
            pool,
            index,
            follow,
            metrics,
            shutdown,
        }
    }
}
