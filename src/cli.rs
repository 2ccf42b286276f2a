//! The command line, as raw parsed flags. It validates shapes only (a
//! number is a number); merging with the config file and environment is
//! [`crate::config`]'s job, acting on them is [`crate::app`]'s.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "sender-indexer",
    version,
    about = "Index an EVM chain into PostgreSQL, recovering every transaction's sender from its signature",
    after_help = "Settings: config/default.toml documents every one; precedence is flags > environment > --config file > defaults.\nWith no DATABASE_URL, an embedded PostgreSQL cluster is managed in --data-dir."
)]
pub struct Cli {
    /// A TOML file overriding config/default.toml (env: SENDER_INDEXER_CONFIG).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Settings that several commands share; each overrides its config entry.
#[derive(Debug, Args, Default)]
pub struct GlobalArgs {
    /// JSON-RPC endpoint; repeat for failover across providers (env:
    /// RPC_URL, comma-separated).
    #[arg(long, global = true, value_name = "URL")]
    pub rpc_url: Vec<String>,
    /// WebSocket endpoint for newHeads (env: WS_URL).
    #[arg(long, global = true, value_name = "URL")]
    pub ws_url: Option<String>,
    /// PostgreSQL URL; empty uses the embedded cluster (env: DATABASE_URL).
    #[arg(long, global = true, value_name = "URL")]
    pub database_url: Option<String>,
    /// PostgreSQL schema of every table, created if missing: one per chain,
    /// so one database holds several (env: DATABASE_SCHEMA).
    #[arg(long, global = true, value_name = "NAME")]
    pub schema: Option<String>,
    /// Data directory of the embedded PostgreSQL cluster.
    #[arg(long, global = true, value_name = "DIR")]
    pub data_dir: Option<PathBuf>,
    /// Recovery threads (0: one per core).
    #[arg(long, global = true, value_name = "N")]
    pub threads: Option<usize>,
    /// Blocks per JSON-RPC batch.
    #[arg(long, global = true, value_name = "N")]
    pub batch_size: Option<usize>,
    /// JSON-RPC batches in flight at once.
    #[arg(long, global = true, value_name = "N")]
    pub concurrency: Option<usize>,
    /// Stop at the first recovered sender that differs from the node's `from`.
    #[arg(long, global = true)]
    pub strict: bool,
    /// Segments of N blocks that every backfill process on the database
    /// shares (on one machine or many); "auto" (the default) picks N from
    /// the range; 0 or "off": this process writes alone.
    #[arg(long, global = true, value_name = "N|auto|off")]
    pub segment_blocks: Option<String>,
    /// Index only blocks at least K below the head.
    #[arg(long, global = true, value_name = "K")]
    pub confirmations: Option<u64>,
    /// Head polling interval in milliseconds.
    #[arg(long, global = true, value_name = "MS")]
    pub poll_interval_ms: Option<u64>,
    /// Deepest reorg to roll back; deeper stops the process.
    #[arg(long, global = true, value_name = "N")]
    pub max_reorg_depth: Option<u64>,
    /// Where logs and receipt fields come from: `receipts`, `getLogs` or `off`.
    #[arg(long, global = true, value_name = "MODE")]
    pub logs: Option<String>,
    /// How far blocks are verified before they are stored: `full` or `off`.
    #[arg(long, global = true, value_name = "LEVEL")]
    pub verify: Option<String>,
    /// Whose rules blocks are read and verified by: `auto` (from the chain
    /// id), `ethereum`, `op-stack`, `arbitrum`, `polygon`, `bnb`,
    /// `avalanche`, `celo`, `scroll` or `zksync`.
    #[arg(long, global = true, value_name = "PROFILE")]
    pub chain_profile: Option<String>,
    /// A block whose hash you trust, NUMBER:0xHASH; every indexed range must
    /// link to one by parent hashes. May be given several times.
    #[arg(long = "trusted-block", global = true, value_name = "N:0xHASH")]
    pub trusted_blocks: Vec<String>,
    /// Serve Prometheus /metrics and /health here, e.g. 127.0.0.1:9184 (env: METRICS_ADDR).
    #[arg(long, global = true, value_name = "ADDR")]
    pub metrics_addr: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read JSON transaction objects on stdin, one per line; write one JSON
    /// result line per input line: {"hash", "sender", "source",
    /// "hash_verified", "authorities"?, "error"?}.
    #[command(
        after_help = "Each line is read by the rules of its chain: --chain-profile, else the chain its own chainId names, else the chain --chain-id names, else Ethereum's.\n\nExamples:\n  sender-indexer recover < transactions.jsonl > senders.jsonl\n  sender-indexer recover --chain-id 10 < op-deposits.jsonl"
    )]
    Recover {
        /// The chain the transactions are from, for those that carry no
        /// chainId of their own (legacy before EIP-155, OP deposits).
        #[arg(long, value_name = "ID")]
        chain_id: Option<u64>,
    },
    /// Index a block range and exit; a rerun resumes where it stopped.
    #[command(
        after_help = "Examples:\n  RPC_URL=https://eth.example/v3/KEY sender-indexer backfill --from 18000000 --to 18001000\n  sender-indexer --rpc-url http://127.0.0.1:8545 backfill --from 0 --to latest\n  sender-indexer backfill --from 0 --to 20000000   (start it on several machines at once: they share the range)"
    )]
    Backfill {
        /// First block.
        #[arg(long, value_name = "N")]
        from: u64,
        /// Last block: a number or `latest`.
        #[arg(long, value_name = "N|latest")]
        to: BlockTarget,
    },
    /// Index new blocks as they arrive, rolling back reorgs.
    #[command(
        after_help = "Examples:\n  sender-indexer follow\n  sender-indexer --ws-url wss://eth.example/ws --confirmations 2 --metrics-addr 127.0.0.1:9184 follow"
    )]
    Follow {
        /// Start here instead of after the last indexed block.
        #[arg(long, value_name = "N")]
        from: Option<u64>,
    },
    /// Backfill everything missing up to the head, then follow.
    #[command(after_help = "Example:\n  sender-indexer sync --from 19000000")]
    Sync {
        /// First block when the database is empty (default 0).
        #[arg(long, value_name = "N")]
        from: Option<u64>,
    },
    /// Show what is indexed: block range, gaps, checkpoint, rows, lag.
    #[command(after_help = "Example:\n  sender-indexer status")]
    Status,
    /// Print the stored logs of a contract with the recovered sender of the
    /// transaction that emitted each.
    #[command(
        after_help = "Examples:\n  sender-indexer logs --address 0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48\n  sender-indexer logs --address 0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48 --topic0 0xddf252ad1be2c89b69c2b068fc378daa952ba7f163c4a11628f55a4df523b3ef --from 18000000 --to 18000100"
    )]
    Logs {
        /// The emitting contract (0x-prefixed, 20 bytes).
        #[arg(long, value_name = "ADDRESS")]
        address: String,
        /// Only logs with this first topic (the event's signature hash).
        #[arg(long, value_name = "HASH")]
        topic0: Option<String>,
        /// First block (default: the first stored).
        #[arg(long, value_name = "N")]
        from: Option<u64>,
        /// Last block (default: the last stored).
        #[arg(long, value_name = "N")]
        to: Option<u64>,
        /// Print at most this many logs, oldest first.
        #[arg(long, value_name = "N", default_value_t = 100)]
        limit: u64,
    },
    /// Run a SQL query, read-only, against the configured database and
    /// print a table.
    #[command(
        after_help = "Example:\n  sender-indexer sql \"SELECT encode(sender, 'hex') AS sender, count(*) FROM transactions GROUP BY 1 ORDER BY 2 DESC LIMIT 10\""
    )]
    Sql {
        /// The query, e.g. "SELECT count(*) FROM transactions".
        query: String,
    },
}

/// `--to`: a block number or the head at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BlockTarget {
    Number(u64),
    Latest,
}

impl std::str::FromStr for BlockTarget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "latest" {
            return Ok(BlockTarget::Latest);
        }
        s.parse()
            .map(BlockTarget::Number)
            .map_err(|_| format!("expected a block number or `latest`, got {s:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn every_command_shows_an_example_invocation() {
        let mut cli = Cli::command();
        for sub in cli.get_subcommands_mut() {
            let name = sub.get_name().to_owned();
            let help = sub.render_long_help().to_string();
            assert!(
                help.contains("Example"),
                "{name} --help has no example:\n{help}"
            );
            let runs = help.contains(&format!("sender-indexer {name}"))
                || help.contains(&format!(" {name} --"))
                || help.contains(&format!(" {name}\n"));
            assert!(runs, "{name}'s example does not run it:\n{help}");
        }
    }

    #[test]
    fn to_accepts_latest_or_a_number() {
        let cli = Cli::try_parse_from(["x", "backfill", "--from", "1", "--to", "latest"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Backfill {
                from: 1,
                to: BlockTarget::Latest
            }
        ));
        let err =
            Cli::try_parse_from(["x", "backfill", "--from", "1", "--to", "soon"]).unwrap_err();
        assert!(err.to_string().contains("latest"), "{err}");
    }
}
