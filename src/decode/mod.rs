//! Pure chain types: JSON-RPC block and transaction objects in, our own typed
//! values out, plus the signing payload of every transaction type.
//!
//! `web3`'s `Transaction` drops `chainId`, `yParity`, blob and EIP-7702
//! fields, so it cannot rebuild a signing payload; we decode the raw JSON
//! ourselves. Decoding is lenient about the quirks real nodes produce (see
//! `tests/fixtures/README.md`): zero-padded or stripped quantities, `chainId`
//! on legacy txs, missing `type`, `v` without `yParity`, `to: null`.
//!
//! This module does no I/O and touches no secp256k1 context: it parses and
//! hashes. Whether a signature is usable is decided in [`crate::recover`];
//! here a missing signature field is simply `None`.
//!
//! * `hex`: quantities and hex data, with one set of rules for everything.
//! * `tx`: transaction objects into [`Tx`]; `scan` reads their plain shape
//!   in one pass, serde_json the rest.
//! * `block`: block framing, the one header type ([`BlockHeader`]) and
//!   each transaction's place in the response text ([`RawBlock`]).
//! * `receipt`: receipt objects and their logs into [`Receipt`], [`Log`].
//! * `bloom`: the header's logs bloom.
//! * `event`: logs decoded by an event signature (`[[events]]`).
//! * `signing`: signing payloads and their keccak hash.
//! * `chain_tx`: the fields and encodings of chain-specific types (OP
//!   deposits, Scroll L1 messages, Arbitrum's unsigned types, Celo's
//!   fee-currency txs), read by the family [`crate::chain::Family`] names.

mod block;
mod bloom;
mod chain_tx;
mod event;
mod hex;
mod receipt;
mod scan;
mod signing;
mod tx;

pub use block::{
    BlockHeader, BlockWire, HeaderFields, RawBlock, RawReceipts, Seal, Withdrawal, split_block,
};
pub use bloom::{Bloom, BloomCache, bloom_add, bloom_may_contain};
pub use chain_tx::{ArbitrumFields, CeloFields, ChainFields, OpDeposit, ScrollL1Message};
pub use event::{ColumnKind, EventSpec, Param, SignatureError, Value};
pub use hex::{DecodeError, U256, hex0x, parse_bytes, parse_fixed, parse_u64, parse_u256};
pub use receipt::{L1Costs, Log, Receipt, logs_from_json, receipts_from_slices};
#[cfg(test)]
pub(crate) use scan::{BlockAnswer, ReceiptList, corruptions as scan_corruptions};
pub(crate) use scan::{block_answers, block_receipt_lists};
pub use signing::keccak;
pub use tx::{AccessItem, Authorization, PayloadError, Tx};

pub type Address = [u8; 20];
pub type B256 = [u8; 32];
