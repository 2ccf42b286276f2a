//! Settings: `config/default.toml` (compiled in), overlaid by the user's
//! file, then environment variables, then flags, into one typed value.
//!
//! The defaults live in exactly one place, the TOML file that documents
//! them. This module validates and merges; it does not act on settings, and
//! its `Debug` output never shows credentials.

use std::path::Path;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::Deserialize;

use crate::cli::Cli;

/// The documented defaults, compiled in.
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub rpc: RpcSettings,
    pub database: DatabaseSettings,
    pub index: IndexSettings,
    pub follow: FollowSettings,
    pub metrics: MetricsSettings,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcSettings {
    pub url: String,
    pub ws_url: String,
    pub batch_size: usize,
    pub max_in_flight: usize,
    pub request_timeout_ms: u64,
    pub max_retries: u32,
    pub backoff_initial_ms: u64,
    pub backoff_max_ms: u64,
}

#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    pub url: String,
    pub data_dir: String,
    pub max_connections: u32,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexSettings {
    pub threads: usize,
    pub write_batch_txs: usize,
    pub write_batch_blocks: usize,
    pub strict: bool,
    pub defer_indexes_min_blocks: u64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FollowSettings {
    pub poll_interval_ms: u64,
    pub confirmations: u64,
    pub max_reorg_depth: u64,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSettings {
    pub listen: String,
    pub max_lag_blocks: u64,
    pub max_stall_ms: u64,
}

impl RpcSettings {
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms)
    }
}

impl FollowSettings {
    pub fn poll_interval(&self) -> Duration {
        Duration::from_millis(self.poll_interval_ms)
    }
}

impl std::fmt::Debug for RpcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcSettings")
            .field("url", &crate::rpc::redact_url(&self.url))
            .field("ws_url", &crate::rpc::redact_url(&self.ws_url))
            .field("batch_size", &self.batch_size)
            .field("max_in_flight", &self.max_in_flight)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("max_retries", &self.max_retries)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for DatabaseSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseSettings")
            .field("url", &crate::rpc::redact_url(&self.url))
            .field("data_dir", &self.data_dir)
            .field("max_connections", &self.max_connections)
            .finish()
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("rpc", &self.rpc)
            .field("database", &self.database)
            .field("index", &self.index)
            .field("follow", &self.follow)
            .field("metrics", &self.metrics)
            .finish()
    }
}

/// Recursively lays `over` on top of `base`.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (k, v) in over {
        match (base.get_mut(&k), v) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            (_, v) => {
                base.insert(k, v);
            }
        }
    }
}

/// Environment variables the settings read, and where they go.
fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

impl Settings {
    /// Defaults, then the user's file, then the environment, then the flags.
    pub fn load(cli: &Cli) -> anyhow::Result<Settings> {
        let mut table: toml::Table = toml::from_str(DEFAULT_TOML).context("built-in defaults")?;
        let file = cli
            .config
            .clone()
            .or_else(|| env("SENDER_INDEXER_CONFIG").map(Into::into));
        if let Some(path) = &file {
            merge(&mut table, read_file(path)?);
        }
        let mut s: Settings = table
            .try_into()
            .map_err(|e| anyhow::anyhow!("{}: {e}", file_name(file.as_deref())))?;
        s.apply_env();
        s.apply_flags(cli);
        s.validate()?;
        Ok(s)
    }

    /// Settings as the defaults file gives them (for tests and tools).
    pub fn defaults() -> Settings {
        toml::from_str(DEFAULT_TOML).expect("config/default.toml is valid")
    }

    fn apply_env(&mut self) {
        let set = |slot: &mut String, name| {
            if let Some(v) = env(name) {
                *slot = v;
            }
        };
        set(&mut self.rpc.url, "RPC_URL");
        set(&mut self.rpc.ws_url, "WS_URL");
        set(&mut self.database.url, "DATABASE_URL");
        set(&mut self.database.data_dir, "SENDER_INDEXER_DATA_DIR");
        set(&mut self.metrics.listen, "METRICS_ADDR");
    }

    fn apply_flags(&mut self, cli: &Cli) {
        let g = &cli.global;
        if let Some(v) = &g.rpc_url {
            self.rpc.url = v.clone();
        }
        if let Some(v) = &g.ws_url {
            self.rpc.ws_url = v.clone();
        }
        if let Some(v) = &g.database_url {
            self.database.url = v.clone();
        }
        if let Some(v) = &g.data_dir {
            self.database.data_dir = v.display().to_string();
        }
        if let Some(v) = g.batch_size {
            self.rpc.batch_size = v;
        }
        if let Some(v) = g.concurrency {
            self.rpc.max_in_flight = v;
        }
        if let Some(v) = g.threads {
            self.index.threads = v;
        }
        if g.strict {
            self.index.strict = true;
        }
        if let Some(v) = g.confirmations {
            self.follow.confirmations = v;
        }
        if let Some(v) = g.poll_interval_ms {
            self.follow.poll_interval_ms = v;
        }
        if let Some(v) = g.max_reorg_depth {
            self.follow.max_reorg_depth = v;
        }
        if let Some(v) = &g.metrics_addr {
            self.metrics.listen = v.clone();
        }
    }

    fn validate(&self) -> anyhow::Result<()> {
        let positive = [
            ("rpc.batch_size", self.rpc.batch_size as u64),
            ("rpc.max_in_flight", self.rpc.max_in_flight as u64),
            ("rpc.request_timeout_ms", self.rpc.request_timeout_ms),
            (
                "database.max_connections",
                self.database.max_connections as u64,
            ),
            ("index.write_batch_txs", self.index.write_batch_txs as u64),
            (
                "index.write_batch_blocks",
                self.index.write_batch_blocks as u64,
            ),
            ("follow.poll_interval_ms", self.follow.poll_interval_ms),
            ("follow.max_reorg_depth", self.follow.max_reorg_depth),
        ];
        for (name, v) in positive {
            if v == 0 {
                bail!("setting {name} must be at least 1");
            }
        }
        url::Url::parse(&self.rpc.url).with_context(|| {
            format!(
                "setting rpc.url: not a URL: {}",
                crate::rpc::redact_url(&self.rpc.url)
            )
        })?;
        if !self.metrics.listen.is_empty() {
            self.metrics
                .listen
                .parse::<std::net::SocketAddr>()
                .with_context(|| {
                    format!(
                        "setting metrics.listen: not an address: {}",
                        self.metrics.listen
                    )
                })?;
        }
        Ok(())
    }
}

fn file_name(path: Option<&Path>) -> String {
    path.map_or("built-in defaults".into(), |p| {
        format!("config file {}", p.display())
    })
}

fn read_file(path: &Path) -> anyhow::Result<toml::Table> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    toml::from_str(&text).with_context(|| format!("config file {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_parse_and_validate() {
        let s = Settings::defaults();
        s.validate().unwrap();
        assert_eq!(s.follow.max_reorg_depth, 128);
    }

    #[test]
    fn unknown_settings_are_named() {
        let mut t: toml::Table = toml::from_str(DEFAULT_TOML).unwrap();
        merge(&mut t, toml::from_str("[rpc]\nbatchsize = 5").unwrap());
        let err = t.try_into::<Settings>().err().unwrap().to_string();
        assert!(err.contains("batchsize"), "{err}");
    }

    #[test]
    fn debug_output_hides_credentials() {
        let mut s = Settings::defaults();
        s.database.url = "postgres://alice:hunter2@db/x".into();
        s.rpc.url = "https://bob:secret@node.example/".into();
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("secret"),
            "{shown}"
        );
    }
}
