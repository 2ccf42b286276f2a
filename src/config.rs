//! Settings: `config/default.toml` (compiled in), overlaid by the user's
//! file, then environment variables, then flags, into one typed value.
//!
//! The defaults live in exactly one place, the TOML file that documents
//! them; nothing in the code writes a default of its own. Every layer is
//! laid on the same TOML table, which is then parsed once into typed
//! settings (durations, addresses, URLs, non-zero sizes), so a bad value
//! fails the same way wherever it came from, with an error that names the
//! setting and the layer that set it. Each stage reads its own section
//! ([`RpcSettings`], [`IndexSettings`], …); there is no second copy of
//! them elsewhere. This module acts on nothing, and its `Debug` output
//! never shows credentials.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::num::{NonZeroU32, NonZeroU64, NonZeroUsize};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use anyhow::{Context, bail};
use serde::{Deserialize, Deserializer};
use url::Url;

use crate::redact::redact_url;

/// The documented defaults, compiled in.
pub const DEFAULT_TOML: &str = include_str!("../config/default.toml");

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub rpc: RpcSettings,
    pub database: DatabaseSettings,
    pub index: IndexSettings,
    pub logs: LogsSettings,
    /// `[[events]]`: decoded event tables.
    #[serde(default)]
    pub events: Vec<EventSettings>,
    pub verify: VerifySettings,
    pub chain: ChainSettings,
    pub follow: FollowSettings,
    pub metrics: MetricsSettings,
}

/// Whose rules blocks are read by (`crate::chain`).
#[derive(Clone, Copy, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChainSettings {
    /// `None` ("auto"): from the node's chain id.
    #[serde(deserialize_with = "profile")]
    pub profile: Option<crate::chain::Family>,
}

fn profile<'de, D: Deserializer<'de>>(d: D) -> Result<Option<crate::chain::Family>, D::Error> {
    let s = String::deserialize(d)?;
    if s.trim().eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    s.parse()
        .map(Some)
        .map_err(|e: crate::chain::UnknownFamily| {
            serde::de::Error::custom(format!("{e}, or \"auto\""))
        })
}

/// How blocks are verified before they are stored (`crate::verify`).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VerifySettings {
    pub level: crate::verify::Level,
    /// `NUMBER:0xHASH` entries.
    #[serde(deserialize_with = "anchors")]
    pub trusted_blocks: Vec<crate::verify::Anchor>,
}

fn anchors<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<crate::verify::Anchor>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|s| crate::verify::Anchor::parse(s).map_err(serde::de::Error::custom))
        .collect()
}

/// The rpc stage's settings.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RpcSettings {
    /// `http://` or `https://` endpoints, at least one; may carry
    /// credentials. `url` in the file: one string, a comma-separated
    /// string, or a list.
    #[serde(rename = "url", deserialize_with = "http_urls")]
    pub urls: Vec<Url>,
    /// `ws://` or `wss://` endpoint for `newHeads`; `None` polls.
    #[serde(deserialize_with = "optional_ws_url")]
    pub ws_url: Option<Url>,
    /// Extra PEM root certificates trusted for `https://` and `wss://`
    /// endpoints (a private CA), on top of the public roots.
    #[serde(deserialize_with = "optional")]
    pub tls_ca_file: Option<PathBuf>,
    /// Requests per second sent to each endpoint at most; 0: no limit.
    #[serde(deserialize_with = "rate")]
    pub max_requests_per_second: f64,
    /// Blocks per JSON-RPC batch. Full blocks run to megabytes, so this also
    /// bounds one response's size; shrunk at run time if the provider caps it.
    pub batch_size: NonZeroUsize,
    /// Batches in flight at once; with `batch_size`, bounds buffered blocks.
    pub max_in_flight: NonZeroUsize,
    /// The largest answer read, in MiB: a broken or hostile endpoint cannot
    /// grow memory without bound.
    pub max_response_mib: NonZeroUsize,
    /// Asks for gzip-compressed answers (`Accept-Encoding: gzip`) and
    /// decodes them as they stream in; `max_response_mib` bounds the
    /// decoded size.
    pub gzip: bool,
    /// Deadline for one HTTP round trip (a whole batch).
    #[serde(rename = "request_timeout_ms", deserialize_with = "positive_millis")]
    pub request_timeout: Duration,
    /// Consecutive failed tries allowed per call or batch before giving up.
    pub max_retries: u32,
    #[serde(rename = "backoff_initial_ms", deserialize_with = "millis")]
    pub backoff_initial: Duration,
    #[serde(rename = "backoff_max_ms", deserialize_with = "millis")]
    pub backoff_max: Duration,
}

/// Where the data goes.
#[derive(Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    /// `postgres://` URL; `None` runs the embedded cluster.
    #[serde(deserialize_with = "optional_postgres_url")]
    pub url: Option<Url>,
    /// The embedded cluster's data directory; `None`: the per-user default.
    #[serde(deserialize_with = "optional")]
    pub data_dir: Option<PathBuf>,
    /// The PostgreSQL schema of every table, created if missing; `None`:
    /// the connection's default (`search_path`), as before it existed.
    #[serde(deserialize_with = "optional_schema")]
    pub schema: Option<crate::store::SchemaName>,
    pub max_connections: NonZeroU32,
    /// How long a run keeps trying to reach a database that went away
    /// mid-run before it exits.
    #[serde(rename = "reconnect_budget_ms", deserialize_with = "millis")]
    pub reconnect_budget: Duration,
}

/// The recovery pool and the writer.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IndexSettings {
    /// Recovery threads; 0 means one per core.
    pub threads: usize,
    pub write_batch_txs: NonZeroUsize,
    pub write_batch_blocks: NonZeroUsize,
    pub strict: bool,
    /// 0 never defers the lookup indexes.
    pub defer_indexes_min_blocks: u64,
    /// Optional lookup indexes to build and keep, by name.
    #[serde(deserialize_with = "optional_indexes")]
    pub optional_indexes: Vec<String>,
    /// How `backfill` cuts its range into leased segments, so that every
    /// backfill process on the database shares it.
    #[serde(deserialize_with = "segment_blocks")]
    pub segment_blocks: SegmentBlocks,
    /// A segment's lease lasts this long unless renewed (a third of it).
    #[serde(rename = "lease_ms", deserialize_with = "positive_millis")]
    pub lease: Duration,
    /// How long a block answered wrong (it does not verify, does not
    /// decode, or its receipts or logs do not match it) is fetched again,
    /// from its first wrong answer; zero stops at the first.
    #[serde(rename = "refetch_budget_ms", deserialize_with = "millis")]
    pub refetch_budget: Duration,
}

/// `index.segment_blocks`: how `backfill` cuts its range into the leased
/// segments that every backfill process on the database shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentBlocks {
    /// `"auto"` (the default): a size the pipeline picks from the range.
    Auto,
    /// `0` or `"off"`: no segments; the process writes alone, under the
    /// writer lock.
    Off,
    /// Segments of this many blocks.
    Blocks(std::num::NonZeroU64),
}

impl FromStr for SegmentBlocks {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "auto" => Ok(SegmentBlocks::Auto),
            "off" | "0" => Ok(SegmentBlocks::Off),
            n => n
                .parse::<u64>()
                .ok()
                .and_then(std::num::NonZeroU64::new)
                .map(SegmentBlocks::Blocks)
                .ok_or_else(|| format!("{n:?} is not a number of blocks, \"auto\" or \"off\" (0)")),
        }
    }
}

/// Receipts and event logs.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogsSettings {
    pub mode: LogsMode,
    #[serde(deserialize_with = "hex_list")]
    pub addresses: Vec<[u8; 20]>,
    #[serde(deserialize_with = "hex_list")]
    pub topics0: Vec<[u8; 32]>,
    /// Widest block range of one `eth_getLogs` call (`getLogs` mode): where
    /// the adaptive range starts, and the most it grows back to.
    pub get_logs_range: NonZeroU64,
}

/// `logs.mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub enum LogsMode {
    /// Every block's receipts, and the logs in them.
    #[serde(rename = "receipts")]
    Receipts,
    /// The logs the filters ask for, by block range with `eth_getLogs`; no
    /// receipt fields.
    #[serde(rename = "getLogs", alias = "getlogs")]
    GetLogs,
    /// Neither.
    #[serde(rename = "off")]
    Off,
}

/// One `[[events]]` entry: an event whose logs are decoded into a table.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EventSettings {
    /// Human-readable signature, with `indexed` and parameter names:
    /// `Transfer(address indexed from, address indexed to, uint256 value)`.
    pub signature: String,
    /// Only logs of these contracts; empty: any contract.
    #[serde(default, deserialize_with = "hex_list")]
    pub addresses: Vec<[u8; 20]>,
    /// The table's name; default: the event's name in snake case.
    #[serde(default)]
    pub table: Option<String>,
}

impl LogsSettings {
    /// Whether a log of `address` with first topic `topic0` is stored.
    pub fn keeps(&self, address: &[u8; 20], topic0: Option<&[u8; 32]>) -> bool {
        (self.addresses.is_empty() || self.addresses.contains(address))
            && (self.topics0.is_empty() || topic0.is_some_and(|t| self.topics0.contains(t)))
    }
}

/// A list of 0x-prefixed hex values of exactly `N` bytes.
fn hex_list<'de, D: Deserializer<'de>, const N: usize>(d: D) -> Result<Vec<[u8; N]>, D::Error> {
    Vec::<String>::deserialize(d)?
        .iter()
        .map(|s| {
            crate::decode::parse_fixed::<N>("value", s).map_err(|_| {
                serde::de::Error::custom(format_args!(
                    "{s:?} is not a 0x-prefixed {N}-byte hex value"
                ))
            })
        })
        .collect()
}

/// The converge loop at the head.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FollowSettings {
    #[serde(rename = "poll_interval_ms", deserialize_with = "positive_millis")]
    pub poll_interval: Duration,
    pub confirmations: u64,
    pub max_reorg_depth: NonZeroU64,
}

/// The `/metrics` and `/health` endpoint.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsSettings {
    #[serde(deserialize_with = "optional")]
    pub listen: Option<SocketAddr>,
    pub max_lag_blocks: u64,
    #[serde(rename = "max_stall_ms", deserialize_with = "millis")]
    pub max_stall: Duration,
}

// Hand-written so that `{:?}` of the settings never prints credentials.
impl std::fmt::Debug for RpcSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RpcSettings")
            .field(
                "urls",
                &self
                    .urls
                    .iter()
                    .map(|u| redact_url(u.as_str()))
                    .collect::<Vec<_>>(),
            )
            .field(
                "ws_url",
                &self.ws_url.as_ref().map(|u| redact_url(u.as_str())),
            )
            .field("tls_ca_file", &self.tls_ca_file)
            .field("max_requests_per_second", &self.max_requests_per_second)
            .field("batch_size", &self.batch_size)
            .field("max_in_flight", &self.max_in_flight)
            .field("max_response_mib", &self.max_response_mib)
            .field("gzip", &self.gzip)
            .field("request_timeout", &self.request_timeout)
            .field("max_retries", &self.max_retries)
            .field("backoff_initial", &self.backoff_initial)
            .field("backoff_max", &self.backoff_max)
            .finish()
    }
}

impl std::fmt::Debug for DatabaseSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DatabaseSettings")
            .field("url", &self.url.as_ref().map(|u| redact_url(u.as_str())))
            .field("data_dir", &self.data_dir)
            .field("schema", &self.schema)
            .field("max_connections", &self.max_connections)
            .field("reconnect_budget", &self.reconnect_budget)
            .finish()
    }
}

/// A number of blocks, `"auto"` or `"off"`, from the file (a TOML integer
/// or string) or a flag or variable (a string).
fn segment_blocks<'de, D: Deserializer<'de>>(d: D) -> Result<SegmentBlocks, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum NumberOrWord {
        Number(u64),
        Word(String),
    }
    match NumberOrWord::deserialize(d)? {
        NumberOrWord::Number(n) => {
            Ok(std::num::NonZeroU64::new(n).map_or(SegmentBlocks::Off, SegmentBlocks::Blocks))
        }
        NumberOrWord::Word(w) => w.parse().map_err(serde::de::Error::custom),
    }
}

/// Names of optional lookup indexes, each one the store describes.
fn optional_indexes<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    let names = Vec::<String>::deserialize(d)?;
    let known = || crate::store::optional_indexes();
    if let Some(name) = names.iter().find(|n| !known().any(|k| k == n.as_str())) {
        return Err(serde::de::Error::custom(format!(
            "{name} is not an optional index; the optional ones are: {}",
            known().collect::<Vec<_>>().join(", ")
        )));
    }
    Ok(names)
}

/// Milliseconds, as the file writes durations.
fn millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    u64::deserialize(d).map(Duration::from_millis)
}

fn positive_millis<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    match u64::deserialize(d)? {
        0 => Err(serde::de::Error::custom(
            "must be at least 1 (milliseconds)",
        )),
        ms => Ok(Duration::from_millis(ms)),
    }
}

/// A string parsed with `FromStr`; the empty string means "not set".
fn optional<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: std::fmt::Display,
{
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Ok(None);
    }
    s.parse().map(Some).map_err(|e| {
        // The value may be a URL with credentials: never echo it.
        serde::de::Error::custom(format_args!("{e}: {}", redact_url(&s)))
    })
}

/// One URL, a comma-separated list of them (as `RPC_URL` holds), or a
/// TOML list; at least one, each `http(s)://`, none twice.
fn http_urls<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Url>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    let items = match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    };
    let mut urls: Vec<Url> = Vec::new();
    let each = items.iter().flat_map(|s| s.split(','));
    for s in each.map(str::trim).filter(|s| !s.is_empty()) {
        let url: Url = s.parse().map_err(|e| {
            // The value may be a URL with credentials: never echo it.
            serde::de::Error::custom(format_args!("{e}: {}", redact_url(s)))
        })?;
        let url = with_scheme(url, &["http", "https"])?;
        if urls.contains(&url) {
            return Err(serde::de::Error::custom(format_args!(
                "{} is listed twice",
                redact_url(url.as_str())
            )));
        }
        urls.push(url);
    }
    if urls.is_empty() {
        return Err(serde::de::Error::custom("must not be empty"));
    }
    Ok(urls)
}

fn optional_ws_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Url>, D::Error> {
    optional(d)?
        .map(|u| with_scheme(u, &["ws", "wss"]))
        .transpose()
}

/// A non-negative number (integer or not); 0 means "no limit".
fn rate<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Number {
        Int(i64),
        Float(f64),
    }
    let v = match Number::deserialize(d)? {
        Number::Int(i) => i as f64,
        Number::Float(f) => f,
    };
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(serde::de::Error::custom(
            "must be a number of requests per second, 0 or more (0: no limit)",
        ))
    }
}

/// A plain identifier ([`crate::store::SchemaName`]); empty: not set.
fn optional_schema<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<crate::store::SchemaName>, D::Error> {
    let s = String::deserialize(d)?;
    if s.is_empty() {
        return Ok(None);
    }
    s.parse().map(Some).map_err(serde::de::Error::custom)
}

fn optional_postgres_url<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Url>, D::Error> {
    optional(d)?
        .map(|u| with_scheme(u, &["postgres", "postgresql"]))
        .transpose()
}

fn with_scheme<E: serde::de::Error>(url: Url, schemes: &[&str]) -> Result<Url, E> {
    if schemes.contains(&url.scheme()) {
        return Ok(url);
    }
    Err(E::custom(format_args!(
        "unsupported scheme {} in {} (want {})",
        url.scheme(),
        redact_url(url.as_str()),
        schemes.join(" or ")
    )))
}

/// Overrides from outside the files, each with the setting it sets and
/// where it came from; `crate::app` fills it from the environment and the
/// command line.
#[derive(Debug, Default)]
pub struct Overrides {
    layers: Vec<(&'static str, toml::Value, String)>,
}

impl Overrides {
    /// Sets `setting` (`section.key`) to `value`, naming `origin` (e.g.
    /// `flag --batch-size`, `environment RPC_URL`) in errors.
    pub fn set(&mut self, setting: &'static str, value: impl Into<toml::Value>, origin: String) {
        self.layers.push((setting, value.into(), origin));
    }

    /// Reads `name` from the environment into `setting` when it is set and
    /// not empty.
    pub fn env(&mut self, setting: &'static str, name: &str) {
        if let Some(v) = std::env::var(name).ok().filter(|v| !v.is_empty()) {
            self.set(setting, v, format!("environment {name}"));
        }
    }
}

impl Settings {
    /// Defaults, then the user's file (if any), then `overrides` in order.
    pub fn load(file: Option<&Path>, overrides: Overrides) -> anyhow::Result<Settings> {
        let mut table: toml::Table = toml::from_str(DEFAULT_TOML).context("built-in defaults")?;
        let mut origins: HashMap<String, String> = HashMap::new();
        if let Some(path) = file {
            let user = read_file(path)?;
            for (section, v) in &user {
                let keys = v.as_table().map(|t| t.keys().cloned().collect::<Vec<_>>());
                for key in keys.unwrap_or_default() {
                    origins.insert(
                        format!("{section}.{key}"),
                        format!("config file {}", path.display()),
                    );
                }
            }
            merge(&mut table, user);
        }
        for (setting, value, origin) in overrides.layers {
            let (section, key) = setting.split_once('.').expect("section.key");
            let slot = table
                .entry(section)
                .or_insert_with(|| toml::Value::Table(Default::default()));
            if let toml::Value::Table(t) = slot {
                t.insert(key.to_owned(), value);
            }
            origins.insert(setting.to_owned(), origin);
        }
        serde_path_to_error::deserialize(toml::Value::Table(table)).map_err(|e| {
            let path = e.path().to_string();
            let message = e.inner().message();
            let origin = match (origins.get(&path), file) {
                (Some(origin), _) => format!(" (from {origin})"),
                // Only the user's file can hold keys the defaults do not.
                (None, Some(p)) if message.starts_with("unknown field") => {
                    format!(" (in config file {})", p.display())
                }
                _ => String::new(),
            };
            anyhow::anyhow!("setting {path}{origin}: {message}")
        })
    }

    /// Settings as the defaults file gives them (for tests and tools).
    pub fn defaults() -> Settings {
        Settings::load(None, Overrides::default()).expect("config/default.toml is valid")
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

fn read_file(path: &Path) -> anyhow::Result<toml::Table> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read config file {}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).with_context(|| format!("config file {}", path.display()))?;
    for (section, v) in &table {
        // `[[events]]` is a list of tables; everything else is a section.
        let events =
            section == "events" && v.as_array().is_some_and(|a| a.iter().all(|e| e.is_table()));
        if !v.is_table() && !events {
            bail!(
                "config file {}: {section} is not a [section]; settings are grouped as [rpc], [database], [index], [logs], [verify], [follow], [metrics] and [[events]]",
                path.display()
            );
        }
    }
    Ok(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(toml: &str, overrides: Overrides) -> anyhow::Result<Settings> {
        let dir = std::env::temp_dir().join(format!(
            "sender-indexer-config-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::write(&dir, toml).unwrap();
        let r = Settings::load(Some(&dir), overrides);
        let _ = std::fs::remove_file(&dir);
        r
    }

    #[test]
    fn defaults_parse_into_typed_values() {
        let s = Settings::defaults();
        assert_eq!(s.follow.max_reorg_depth.get(), 128);
        assert_eq!(s.rpc.urls[0].as_str(), "http://127.0.0.1:8545/");
        assert_eq!(s.rpc.urls.len(), 1);
        assert_eq!(s.rpc.max_requests_per_second, 0.0);
        assert_eq!(s.rpc.request_timeout, Duration::from_secs(30));
        assert_eq!(s.follow.poll_interval, Duration::from_secs(2));
        assert!(s.rpc.ws_url.is_none() && s.database.url.is_none());
        assert!(s.database.schema.is_none(), "no schema: today's tables");
        assert!(s.metrics.listen.is_none());
    }

    #[test]
    fn segment_blocks_is_auto_by_default_a_number_or_off() {
        use std::num::NonZeroU64;
        assert_eq!(
            Settings::defaults().index.segment_blocks,
            SegmentBlocks::Auto
        );
        let from_flag = |v: &str| {
            let mut o = Overrides::default();
            o.set("index.segment_blocks", v, "flag --segment-blocks".into());
            Settings::load(None, o).map(|s| s.index.segment_blocks)
        };
        assert_eq!(from_flag("auto").unwrap(), SegmentBlocks::Auto);
        assert_eq!(from_flag("off").unwrap(), SegmentBlocks::Off);
        assert_eq!(from_flag("0").unwrap(), SegmentBlocks::Off);
        assert_eq!(
            from_flag("10000").unwrap(),
            SegmentBlocks::Blocks(NonZeroU64::new(10_000).unwrap())
        );
        let err = from_flag("many").unwrap_err().to_string();
        assert!(
            err.contains("index.segment_blocks")
                && err.contains("--segment-blocks")
                && err.contains("\"many\" is not a number of blocks"),
            "{err}"
        );
        let file = |v: &str| {
            load(
                &format!("[index]\nsegment_blocks = {v}\n"),
                Overrides::default(),
            )
            .map(|s| s.index.segment_blocks)
        };
        assert_eq!(file("0").unwrap(), SegmentBlocks::Off);
        assert_eq!(
            file("25").unwrap(),
            SegmentBlocks::Blocks(NonZeroU64::new(25).unwrap())
        );
        assert_eq!(file("\"auto\"").unwrap(), SegmentBlocks::Auto);
    }

    #[test]
    fn errors_name_the_setting_and_where_it_was_set() {
        let err = load("[rpc]\nbatchsize = 5\n", Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("batchsize") && err.contains("config file"),
            "{err}"
        );

        let err = load("[rpc]\nbatch_size = 0\n", Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("setting rpc.batch_size (from config file"),
            "{err}"
        );
        assert!(err.contains("nonzero"), "{err}");

        let mut o = Overrides::default();
        o.set(
            "follow.poll_interval_ms",
            0,
            "flag --poll-interval-ms".into(),
        );
        let err = Settings::load(None, o).unwrap_err().to_string();
        assert_eq!(
            err,
            "setting follow.poll_interval_ms (from flag --poll-interval-ms): must be at least 1 (milliseconds)"
        );

        let mut o = Overrides::default();
        o.set(
            "metrics.listen",
            "localhost",
            "environment METRICS_ADDR".into(),
        );
        let err = Settings::load(None, o).unwrap_err().to_string();
        assert!(
            err.starts_with(
                "setting metrics.listen (from environment METRICS_ADDR): invalid socket address"
            ),
            "{err}"
        );
    }

    #[test]
    fn urls_are_checked_at_load_without_echoing_credentials() {
        let mut o = Overrides::default();
        o.set("rpc.url", "ws://u:hunter2@h:1/", "flag --rpc-url".into());
        let err = Settings::load(None, o).unwrap_err().to_string();
        assert_eq!(
            err,
            "setting rpc.url (from flag --rpc-url): unsupported scheme ws in ws://h:1/ (want http or https)"
        );
        let mut o = Overrides::default();
        o.set(
            "database.url",
            "mysql://u:hunter2@h/x",
            "environment DATABASE_URL".into(),
        );
        let err = Settings::load(None, o).unwrap_err().to_string();
        assert!(
            err.contains("want postgres or postgresql") && !err.contains("hunter2"),
            "{err}"
        );
        let mut o = Overrides::default();
        o.set("rpc.url", "not a url hunter2", "flag --rpc-url".into());
        let err = Settings::load(None, o).unwrap_err().to_string();
        assert!(
            err.starts_with("setting rpc.url") && !err.contains("hunter2"),
            "{err}"
        );
    }

    #[test]
    fn several_rpc_urls_from_a_list_or_a_comma_separated_string() {
        let mut o = Overrides::default();
        o.set(
            "rpc.url",
            "http://a:1/, https://k:pw@b/v3/x",
            "environment RPC_URL".into(),
        );
        let s = Settings::load(None, o).unwrap();
        let urls: Vec<_> = s.rpc.urls.iter().map(|u| u.as_str()).collect();
        assert_eq!(urls, ["http://a:1/", "https://k:pw@b/v3/x"]);
        let s = load(
            "[rpc]\nurl = [\"http://a:1\", \"http://b:2\"]\n",
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(s.rpc.urls.len(), 2);
        let err = load(
            "[rpc]\nurl = [\"http://a:1\", \"http://a:1/\"]\n",
            Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("setting rpc.url") && err.contains("listed twice"),
            "{err}"
        );
        let err = load("[rpc]\nurl = []\n", Overrides::default())
            .unwrap_err()
            .to_string();
        assert!(err.contains("must not be empty"), "{err}");
        let mut o = Overrides::default();
        o.set(
            "rpc.url",
            "http://a:1/,ws://u:hunter2@b/",
            "flag --rpc-url".into(),
        );
        let err = Settings::load(None, o).unwrap_err().to_string();
        assert!(
            err.contains("unsupported scheme ws") && !err.contains("hunter2"),
            "{err}"
        );
        let err = load(
            "[rpc]\nmax_requests_per_second = -1\n",
            Overrides::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.starts_with("setting rpc.max_requests_per_second"),
            "{err}"
        );
        let s = load(
            "[rpc]\nmax_requests_per_second = 2.5\n",
            Overrides::default(),
        )
        .unwrap();
        assert_eq!(s.rpc.max_requests_per_second, 2.5);
        let mut o = Overrides::default();
        o.set("rpc.ws_url", "http://h/", "environment WS_URL".into());
        let err = Settings::load(None, o).unwrap_err().to_string();
        assert!(err.contains("want ws or wss"), "{err}");
    }

    #[test]
    fn later_layers_win() {
        let mut o = Overrides::default();
        o.set("rpc.batch_size", 3, "environment X".into());
        o.set("rpc.batch_size", 4, "flag --batch-size".into());
        let s = load("[rpc]\nbatch_size = 2\nmax_in_flight = 5\n", o).unwrap();
        assert_eq!((s.rpc.batch_size.get(), s.rpc.max_in_flight.get()), (4, 5));
    }

    #[test]
    fn debug_output_hides_credentials() {
        let mut s = Settings::defaults();
        s.database.url = Some("postgres://alice:hunter2@db/x".parse().unwrap());
        s.rpc.urls = vec!["https://bob:secret@node.example/".parse().unwrap()];
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("secret"),
            "{shown}"
        );
    }
}
