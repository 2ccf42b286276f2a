//! Harnesses shared by the integration tests.

pub mod anvil;
pub mod compare;
pub mod fixtures;
pub mod indexer;
pub mod memory_chain;
pub mod op_chain;
pub mod pg;
pub mod proxy;
pub mod rpc_server;
pub mod tls;
pub mod ws_server;
