//! What a person sees while indexing: an `indicatif` bar (blocks, txs/s,
//! ETA) on a terminal, plain periodic log lines otherwise, and the final
//! summary. It reads the counters in [`crate::metrics`]; it never changes
//! what gets indexed.

use std::io::IsTerminal;
use std::sync::Arc;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::metrics::Metrics;

/// Plain log lines are at most this frequent when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(10);

pub struct Progress {
    bar: Option<ProgressBar>,
    metrics: Arc<Metrics>,
    last_log: Instant,
    start_txs: u64,
    started: Instant,
}

impl Progress {
    /// `total`: blocks to index, when known (backfill).
    pub fn new(metrics: Arc<Metrics>, total: Option<u64>) -> Progress {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = match total {
                Some(t) => ProgressBar::new(t),
                None => ProgressBar::new_spinner(),
            };
            bar.set_style(
                ProgressStyle::with_template(
                    "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} blocks  {msg}  eta {eta}",
                )
                .expect("valid template"),
            );
            bar.enable_steady_tick(Duration::from_millis(200));
            bar
        });
        Progress {
            bar,
            start_txs: metrics.txs.get(),
            metrics,
            last_log: Instant::now(),
            started: Instant::now(),
        }
    }

    pub fn set_total(&self, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
        }
    }

    fn rate(&self) -> f64 {
        (self.metrics.txs.get() - self.start_txs) as f64
            / self.started.elapsed().as_secs_f64().max(1e-3)
    }

    /// Called after each committed batch.
    pub fn advance(&mut self, blocks: u64, last_block: u64) {
        let rate = self.rate();
        match &self.bar {
            Some(bar) => {
                bar.inc(blocks);
                bar.set_message(format!("block {last_block}  {rate:.0} txs/s"));
            }
            None if self.last_log.elapsed() >= LOG_EVERY => {
                self.last_log = Instant::now();
                tracing::info!(target: "indexer::progress", block = last_block, txs = self.metrics.txs.get(), txs_per_s = rate as u64, "progress");
            }
            None => {}
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// The closing summary, on stderr.
pub fn summary(metrics: &Metrics, what: &str) -> String {
    let elapsed = metrics.elapsed().as_secs_f64();
    format!(
        "{what}: {} blocks, {} txs, {} senders verified, {} mismatches with the node's from, {} unrecoverable, {} verification failures (fetched again), {} reorgs, {:.1}s ({:.0} txs/s)",
        metrics.blocks.get(),
        metrics.txs.get(),
        metrics.recovered.get() - metrics.from_mismatches.get(),
        metrics.from_mismatches.get(),
        metrics.unrecoverable.get(),
        metrics.verify_failures.get(),
        metrics.reorgs.get(),
        elapsed,
        metrics.txs.get() as f64 / elapsed.max(1e-3),
    )
}
