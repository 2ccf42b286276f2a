//! The one integration-test binary: one `mod` per area; shared harnesses
//! (throwaway PostgreSQL, anvil) live in `support`.
//!
//! Where a new test goes:
//!
//! * A check of a block (a field, a root, a header layout) on real data:
//!   `verify` (every field changed in turn must be caught), with the
//!   fixture copied into `tests/fixtures/` and its provenance there. A
//!   unit test of one function stays beside it in `src/verify/`. Another
//!   chain's blocks by its profile: `chains` (with `anvil --celo` under the
//!   celo profile).
//! * Malformed answers fed through the per-block path: `hostile`;
//!   generated ones: `fuzz`.
//! * Sender and authority recovery: `recover`; the `recover` command:
//!   `cli_recover`.
//! * How the JSON-RPC client fetches, retries and reports: `rpc` (one
//!   endpoint), `providers` (several, through fault proxies), `get_logs`,
//!   `ws_heads`, `first_contact`, `compression` (gzip answers).
//! * The converge loop (reorgs, lagging or failing nodes) in-process on the
//!   in-memory chain: `converge`; against a real anvil: `follow`.
//! * The whole binary against anvil, database equal to the node:
//!   `anvil_backfill` (every transaction kind), `logs`; against the 42 real
//!   blocks: `backfill_fixtures`; an OP Stack anvil with deposits of
//!   every shape: `op_stack`; through a provider that lies in some of its
//!   answers (wrong blocks fetched again until right, a persistent liar
//!   stopped): `lies`.
//! * The database: `database` (it goes away), `crash` (`kill -9`),
//!   `defer_indexes`, `scale_out` (leases), `schema` (every table
//!   described), `roles`, `embedded`, `schemas` (several chains in one
//!   database, a schema each).
//! * What a person sees: `terminal`, `demo`, `secrets`.
//! * A new harness (another server, another node): `support`, which decides
//!   no outcome.

mod anvil_backfill;
mod anvil_smoke;
mod backfill_fixtures;
mod chains;
mod cli_recover;
mod compression;
mod converge;
mod crash;
mod database;
mod defer_indexes;
mod demo;
mod embedded;
mod first_contact;
mod follow;
mod fuzz;
mod get_logs;
mod hostile;
mod lies;
mod logs;
mod op_stack;
mod providers;
mod recover;
mod roles;
mod rpc;
mod scale_out;
mod schema;
mod schemas;
mod secrets;
mod support;
mod terminal;
mod verify;
mod ws_heads;
