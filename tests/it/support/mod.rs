//! Harnesses shared by the integration tests.

pub mod anvil;
pub mod fixtures;
pub mod indexer;
pub mod pg;
pub mod rpc_server;
pub mod ws_server;
