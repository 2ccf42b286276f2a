//! The `sender-indexer` binary: parse the command line, hand it to the
//! library, turn the outcome into an exit status. No logic lives here;
//! the one process-wide choice made here is the allocator (jemalloc, for
//! a lower, steadier peak RSS than glibc's malloc over a long run).

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
