//! The block the pipeline hands to a [`Sink`](crate::sink::Sink): its
//! header, each transaction with what recovery found and its receipt, and
//! the logs to store. Plain data, shared by the stages that make it
//! (`recover`, the pipeline) and the one that stores it (`store`), so that
//! neither has to import the other.
//!
//! It holds what is stored, nothing else: the encodings and proofs a block
//! is verified with are `verify`'s business and are dropped before a block
//! reaches this type. No I/O, no policy, no crypto.

use crate::chain::SenderSource;
use crate::decode::{Address, BlockHeader, Log, PayloadError, Receipt, Tx, U256};

/// A block ready to store: every transaction went through recovery, in
/// block order, and the block was checked at level `verified`.
#[derive(Debug, Clone)]
pub struct Block {
    pub header: BlockHeader,
    pub txs: Vec<BlockTx>,
    /// The block's stored logs, in log-index order, each with the index of
    /// the transaction that emitted it (from the receipts, which keep none
    /// of them then, or from `eth_getLogs`).
    pub logs: Vec<Log>,
    /// How it was verified before it was stored.
    pub verified: crate::verify::Level,
    /// The L1 block it was built on, where a block verified in full
    /// commits to one (the chain profile's `l1_origin`: Arbitrum Nitro's
    /// `mixHash`, OP Stack's L1-attributes deposit); `None` elsewhere.
    pub l1_block_number: Option<u64>,
}

/// One transaction of a [`Block`].
#[derive(Debug, Clone)]
pub struct BlockTx {
    pub tx: Tx,
    pub recovered: Recovered,
    /// Its receipt, when receipts are fetched (attached by the pipeline).
    pub receipt: Option<Receipt>,
    /// For type 4, per authorization in order: why the rules that need no
    /// state keep it from taking effect (`None`: they let it). Filled by
    /// `verify::check`, which knows the chain.
    pub void_authorizations: Vec<Option<&'static str>>,
}

/// What recovery found for one transaction: its sender and where it came
/// from, and for type 4 one authority per authorization, in order. Each is
/// recovered on its own: a bad authorization tuple does not hide the
/// sender, nor the reverse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recovered {
    pub sender: Result<Address, RecoverError>,
    /// How `sender` was obtained (the chain profile's rule for the type).
    pub source: SenderSource,
    pub authorities: Vec<Result<Address, RecoverError>>,
}

/// Why a sender (or an EIP-7702 authority) cannot be recovered. The
/// transaction is still indexed, with a NULL sender.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecoverError {
    #[error(transparent)]
    Payload(#[from] PayloadError),
    #[error("missing signature field {0}")]
    MissingSignature(&'static str),
    #[error("invalid v {0:?} for a legacy transaction (expected 27, 28 or 2*chainId+35/36)")]
    InvalidV(U256),
    #[error("invalid y parity {0:?} (expected 0 or 1)")]
    InvalidParity(U256),
    #[error("signature {0} is zero")]
    Zero(&'static str),
    #[error("signature {0} is not below the curve order")]
    OutOfRange(&'static str),
    #[error("no public key recovers from this signature")]
    NoKey,
    /// An unsigned type whose hash commits to its sender, without one.
    #[error("missing field {0}, the sender this unsigned transaction type commits to")]
    MissingCommitted(&'static str),
    /// A system transaction: the chain gives it no sender.
    #[error("a system transaction: the chain gives it no sender")]
    NoSender,
}
