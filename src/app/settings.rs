//! The command line and the environment as settings overrides, laid on
//! the files by [`crate::config`], which parses and checks them all in one
//! place. Each override names its origin (`flag --batch-size`,
//! `environment RPC_URL`) so an error says where a bad value came from.

use crate::cli::Cli;
use crate::config::{Overrides, Settings};

/// Defaults, then the config file, then the environment, then the flags.
pub fn load(cli: &Cli) -> anyhow::Result<Settings> {
    let file = cli.config.clone().or_else(|| {
        std::env::var_os("SENDER_INDEXER_CONFIG")
            .filter(|v| !v.is_empty())
            .map(Into::into)
    });
    Settings::load(file.as_deref(), overrides(cli))
}

fn overrides(cli: &Cli) -> Overrides {
    let mut o = Overrides::default();
    o.env("rpc.url", "RPC_URL");
    o.env("rpc.ws_url", "WS_URL");
    o.env("database.url", "DATABASE_URL");
    o.env("database.data_dir", "SENDER_INDEXER_DATA_DIR");
    o.env("database.schema", "DATABASE_SCHEMA");
    o.env("metrics.listen", "METRICS_ADDR");
    let g = &cli.global;
    let flag = |name: &str| format!("flag --{name}");
    // TOML integers are i64; a larger flag value saturates and then fails
    // the setting's own range check, naming the flag.
    let int = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
    if !g.rpc_url.is_empty() {
        let urls: Vec<toml::Value> = g.rpc_url.iter().map(|v| v.as_str().into()).collect();
        o.set("rpc.url", urls, flag("rpc-url"));
    }
    if let Some(v) = &g.ws_url {
        o.set("rpc.ws_url", v.as_str(), flag("ws-url"));
    }
    if let Some(v) = &g.database_url {
        o.set("database.url", v.as_str(), flag("database-url"));
    }
    if let Some(v) = &g.schema {
        o.set("database.schema", v.as_str(), flag("schema"));
    }
    if let Some(v) = &g.data_dir {
        o.set(
            "database.data_dir",
            v.display().to_string(),
            flag("data-dir"),
        );
    }
    if let Some(v) = g.batch_size {
        o.set("rpc.batch_size", int(v as u64), flag("batch-size"));
    }
    if let Some(v) = g.concurrency {
        o.set("rpc.max_in_flight", int(v as u64), flag("concurrency"));
    }
    if let Some(v) = g.threads {
        o.set("index.threads", int(v as u64), flag("threads"));
    }
    if g.strict {
        o.set("index.strict", true, flag("strict"));
    }
    if let Some(v) = &g.segment_blocks {
        o.set("index.segment_blocks", v.as_str(), flag("segment-blocks"));
    }
    if let Some(v) = g.confirmations {
        o.set("follow.confirmations", int(v), flag("confirmations"));
    }
    if let Some(v) = g.poll_interval_ms {
        o.set("follow.poll_interval_ms", int(v), flag("poll-interval-ms"));
    }
    if let Some(v) = g.max_reorg_depth {
        o.set("follow.max_reorg_depth", int(v), flag("max-reorg-depth"));
    }
    if let Some(v) = &g.logs {
        o.set("logs.mode", v.as_str(), flag("logs"));
    }
    if let Some(v) = &g.verify {
        o.set("verify.level", v.as_str(), flag("verify"));
    }
    if let Some(v) = &g.chain_profile {
        o.set("chain.profile", v.as_str(), flag("chain-profile"));
    }
    if !g.trusted_blocks.is_empty() {
        let list: Vec<toml::Value> = g.trusted_blocks.iter().map(|s| s.as_str().into()).collect();
        o.set("verify.trusted_blocks", list, flag("trusted-block"));
    }
    if let Some(v) = &g.metrics_addr {
        o.set("metrics.listen", v.as_str(), flag("metrics-addr"));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[test]
    fn a_bad_flag_value_names_the_flag_and_the_setting() {
        let cli = Cli::try_parse_from(["x", "--batch-size", "0", "status"]).unwrap();
        let err = Settings::load(None, overrides(&cli))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("setting rpc.batch_size (from flag --batch-size):"),
            "{err}"
        );
        let cli = Cli::try_parse_from(["x", "--metrics-addr", "nowhere", "status"]).unwrap();
        let err = Settings::load(None, overrides(&cli))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("setting metrics.listen (from flag --metrics-addr):"),
            "{err}"
        );
        let cli = Cli::try_parse_from(["x", "--schema", "Base", "status"]).unwrap();
        let err = Settings::load(None, overrides(&cli))
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with(
                "setting database.schema (from flag --schema): \"Base\" is not a plain identifier"
            ),
            "{err}"
        );
        let cli = Cli::try_parse_from(["x", "--schema", "base", "status"]).unwrap();
        let s = Settings::load(None, overrides(&cli)).unwrap();
        assert_eq!(s.database.schema.unwrap().as_str(), "base");
        let cli = Cli::try_parse_from(["x", "--threads", "3", "--strict", "status"]).unwrap();
        let s = Settings::load(None, overrides(&cli)).unwrap();
        assert_eq!((s.index.threads, s.index.strict), (3, true));
    }
}
