//! The one integration-test binary: one `mod` per area; shared harnesses
//! (throwaway PostgreSQL, anvil) live in `support`.

mod anvil_backfill;
mod anvil_smoke;
mod backfill_fixtures;
mod cli_recover;
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
mod logs;
mod providers;
mod recover;
mod roles;
mod rpc;
mod scale_out;
mod schema;
mod secrets;
mod support;
mod terminal;
mod verify;
mod ws_heads;
