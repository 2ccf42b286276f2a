//! The `sender-indexer` binary: parse the command line, hand it to the
//! library, turn the outcome into an exit status. No logic lives here;
//! the one process-wide choice made here is the allocator (jemalloc, for
//! a lower, steadier peak RSS than glibc's malloc over a long run) and its
//! options.

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = sender_indexer::cli::Cli::parse();
    match sender_indexer::app::run(cli) {
        Ok(code) => code,
        Err(err) => {
            eprintln!("sender-indexer: {err:#}");
            ExitCode::from(2)
        }
    }
}

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read before `main`: pages freed are kept for reuse
/// rather than handed back to the kernel (`dirty_decay_ms:-1`). Answers
/// of several MB arrive and are freed many times a second; given back, each
/// page is faulted in and zeroed again when the next answer lands (~170,000
/// faults per 200,000 transactions), about 4 µs of CPU per transaction in
/// the 1M backfill bench (docs/performance.md). Every stage is bounded, so
/// what is kept is at most the run's own peak. `_RJEM_MALLOC_CONF` in the
/// environment overrides it (`dirty_decay_ms:10000` is jemalloc's default).
#[unsafe(export_name = "_rjem_malloc_conf")]
static MALLOC_CONF: &[u8; 18] = b"dirty_decay_ms:-1\0";
