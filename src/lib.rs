//! sender-indexer: index an EVM chain into PostgreSQL, recovering every
//! transaction's sender from its signature instead of trusting the node's
//! `from` field.
//!
//! Data flows one way, one module per stage:
//!
//! ```text
//!   rpc  ──JSON──▶  decode  ──typed txs──▶  recover  ──senders──▶  store
//!  (I/O)           (pure)                 (CPU pool)              (SQL)
//!                     ▲                                              │
//!                     └──────────────── pipeline ◀───────────────────┘
//!                        (backfill, follow: orchestration only)
//! ```
//!
//! * [`rpc`] talks JSON-RPC (batching, retries, ordering); it does not decode.
//! * [`decode`] turns JSON transaction objects into our own types and builds
//!   signing hashes; no I/O, no crypto context.
//! * [`recover`] owns the one process-wide secp256k1 context and the bounded
//!   worker pool; no async, no SQL.
//! * [`verify`] recomputes each block (transaction hashes, the tries, the
//!   bloom, the header hash) and checks it against its trust anchors; pure,
//!   called by the pipeline between recovery and the store.
//! * [`store`] owns every SQL statement; it does not know about RPC.
//! * [`pipeline`] wires the stages with bounded channels and handles
//!   checkpoints, reorgs and shutdown. It reaches the chain through a
//!   [`source::Source`] (the rpc client is one) and storage through a
//!   [`sink::Sink`] (the store is one), and nothing else.
//! * [`chain`] holds each chain family's rules as data (tx types, sender
//!   sources, receipt and header layouts, what can be verified); pure.
//! * [`app`] runs a command: settings, the database, clients, signals, the
//!   metrics server, the read-only commands; [`config`] parses settings.
//!
//! Where a change goes: a new table is one description in `store/tables.rs`
//! plus its migration; a new chain source is one `impl Source`; a new
//! storage backend one `impl Sink`.

pub mod app;
pub mod chain;
pub mod cli;
pub mod config;
pub mod decode;
pub mod embedded_pg;
pub mod jsonl;
pub mod metrics;
pub mod pipeline;
pub mod progress;
pub mod recover;
pub mod redact;
pub mod rpc;
pub mod shutdown;
pub mod sink;
pub mod source;
pub mod store;
pub mod verify;
