//! sender-indexer: index an EVM chain into PostgreSQL, recovering every
//! transaction's sender from its signature instead of trusting the node's
//! `from` field.
//!
//! Data flows one way, one module per stage, and a block enters
//! [`verify`] once:
//!
//! ```text
//!   rpc ──text──▶ decode + recover ──txs, senders──▶ pipeline ──▶ verify ──▶ store
//!  (I/O)          (pure; CPU pool)                   (joins a     (pure)     (SQL)
//!   impl Source                                       block)                 impl Sink
//! ```
//!
//! * [`rpc`] talks JSON-RPC (batching, one retry driver, ordering); it
//!   decodes no transaction and checks no answer.
//! * [`decode`] turns JSON transaction objects into our own types and builds
//!   signing hashes; no I/O, no crypto context.
//! * [`recover`] owns the one process-wide secp256k1 context and the bounded
//!   worker pool; no async, no SQL, no verification.
//! * [`block`] is the checked block a sink stores: neither recover's nor
//!   the store's.
//! * [`verify`] holds every check of a block (receipts and logs against
//!   their block, transaction hashes, the tries, the bloom, the header hash,
//!   the anchors) behind one call, [`verify::check`], and links a run to its
//!   trust anchors ([`verify::link`]); its answer says whether fetching the
//!   block again can help.
//! * [`store`] owns every SQL statement; it does not know about RPC.
//! * [`pipeline`] wires the stages with bounded channels and handles
//!   checkpoints, reorgs, refetches and shutdown. It reaches the chain
//!   through a [`source::Source`] (the rpc client is one) and storage
//!   through a [`sink::Sink`] (the store is one), and nothing else.
//! * [`chain`] holds each chain family's rules as data (tx types, sender
//!   sources, receipt and header layouts, what can be verified); pure.
//! * [`app`] runs a command: settings, the database, clients, signals, the
//!   metrics server, the read-only commands; [`config`] parses settings.
//!
//! Where a change goes: README.md, Design. A new table is one description
//! in `store/tables.rs` plus its migration; a new check of a block is a
//! function in `verify`; a new chain source is one `impl Source`; a new
//! storage backend one `impl Sink`.

pub mod app;
pub mod block;
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
#[doc(hidden)]
pub mod testing;
pub mod verify;
