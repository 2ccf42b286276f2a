//! What a person sees while indexing: an `indicatif` bar (blocks, txs/s,
//! ETA) on a terminal, plain periodic log lines otherwise, and the final
//! summary. Log lines go through [`LogWriter`], which lifts the bar while a
//! line is written so the two never share a line. It reads the counters in
//! [`crate::metrics`]; it never changes what gets indexed.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};

use crate::metrics::Metrics;

/// Plain log lines are at most this frequent when stderr is not a terminal.
const LOG_EVERY: Duration = Duration::from_secs(10);

/// The bar on screen, if any, for [`LogWriter`] to lift.
static SHOWN: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn shown() -> Option<ProgressBar> {
    SHOWN.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// `tracing_subscriber`'s writer: stderr, with the bar cleared while a log
/// line is written and drawn again below it.
pub struct LogWriter;

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for LogWriter {
    type Writer = LogWriter;
    fn make_writer(&'a self) -> LogWriter {
        LogWriter
    }
}

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match shown() {
            Some(bar) => bar.suspend(|| std::io::stderr().write(buf)),
            None => std::io::stderr().write(buf),
        }
    }
    /// The formatter hands over a whole line at once: lift the bar once.
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        match shown() {
            Some(bar) => bar.suspend(|| std::io::stderr().write_all(buf)),
            None => std::io::stderr().write_all(buf),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

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
            *SHOWN.lock().unwrap_or_else(|e| e.into_inner()) = Some(bar.clone());
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
            SHOWN.lock().unwrap_or_else(|e| e.into_inner()).take();
            bar.finish_and_clear();
        }
    }
}

/// A run that ends in an error takes its bar off the screen too, before
/// `main` prints the error.
impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// The closing summary, on stderr.
pub fn summary(metrics: &Metrics, what: &str) -> String {
    let elapsed = metrics.elapsed().as_secs_f64();
    format!(
        "{what}: {} blocks, {} txs, {} senders verified, {} mismatches with the node's from, {} unrecoverable, {} verification failures, {} wrong answers ({} distinct), {} refetches, {} blocks right after refetching, {} reorgs, {:.1}s ({:.0} txs/s)",
        metrics.blocks.get(),
        metrics.txs.get(),
        metrics.recovered.get() - metrics.from_mismatches.get(),
        metrics.from_mismatches.get(),
        metrics.unrecoverable.get(),
        metrics.verify_failures.get(),
        metrics.wrong_answers.get(),
        metrics.distinct_wrong_answers.get(),
        metrics.refetches.get(),
        metrics.right_after_refetch.get(),
        metrics.reorgs.get(),
        elapsed,
        metrics.txs.get() as f64 / elapsed.max(1e-3),
    )
}
