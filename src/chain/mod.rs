//! Chain rules as data, in one place: which family of EVM chain a chain id
//! belongs to, and per family which transaction types exist, where each
//! one's sender comes from, how it is hashed, how its receipt is encoded,
//! how the header is laid out and how much of a block can be verified.
//! `tests/fixtures/chains/README.md` (copied from the shared notes) says
//! what real data each rule was checked on.
//!
//! Pure data and small predicates over decoded values: no I/O, no crypto
//! context, no settings parsing (the `chain.profile` setting and the
//! `--chain-profile` flag are read elsewhere and handed in as a [`Family`]).
//! Encodings live in `crate::decode` (`chain_tx`) and `crate::verify`; this
//! module only says which one applies.

use std::fmt;
use std::str::FromStr;

use crate::decode::{Address, B256, BlockHeader, Tx, keccak};

#[cfg(test)]
mod tests;

/// A family of chains sharing transaction types, sender rules, receipts
/// and header layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Family {
    /// Ethereum and chains with its rules exactly (Gnosis, local anvil).
    #[default]
    Ethereum,
    /// Optimism's OP Stack: deposits 0x7e.
    OpStack,
    /// Arbitrum Nitro: unsigned 0x64-0x6a, classic 0x78.
    Arbitrum,
    /// Polygon PoS (bor): state-sync pseudo-transactions.
    Polygon,
    /// BNB Smart Chain (parlia): system txs are ordinary signed txs.
    Bnb,
    /// Avalanche C-chain (coreth): its own header layout.
    Avalanche,
    /// Celo: fee-currency txs (legacy with Celo fields, 0x7c/0x7b/0x7a),
    /// and OP deposits since its L2 migration.
    Celo,
    /// Scroll: L1 messages 0x7e.
    Scroll,
    /// zkSync Era: 0x71/0xff kept as reported, blocks not hashable.
    Zksync,
}

impl Family {
    pub const ALL: [Family; 9] = [
        Family::Ethereum,
        Family::OpStack,
        Family::Arbitrum,
        Family::Polygon,
        Family::Bnb,
        Family::Avalanche,
        Family::Celo,
        Family::Scroll,
        Family::Zksync,
    ];

    /// As the `chain.profile` setting names it.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Ethereum => "ethereum",
            Family::OpStack => "op-stack",
            Family::Arbitrum => "arbitrum",
            Family::Polygon => "polygon",
            Family::Bnb => "bnb",
            Family::Avalanche => "avalanche",
            Family::Celo => "celo",
            Family::Scroll => "scroll",
            Family::Zksync => "zksync",
        }
    }

    /// The family's rules.
    pub fn profile(self) -> &'static Profile {
        Profile::of(self)
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `chain.profile` value that names no family.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown chain profile {0:?}: expected one of {names}", names = family_names())]
pub struct UnknownFamily(pub String);

fn family_names() -> String {
    Family::ALL.map(Family::as_str).join(", ")
}

impl FromStr for Family {
    type Err = UnknownFamily;

    fn from_str(s: &str) -> Result<Family, UnknownFamily> {
        let s = s.trim().to_ascii_lowercase();
        Family::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or(UnknownFamily(s))
    }
}

// ---------------------------------------------------------------------------
// Chain ids.

/// A chain id whose family is known for certain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KnownChain {
    pub chain_id: u64,
    pub family: Family,
    pub name: &'static str,
}

const fn known(chain_id: u64, family: Family, name: &'static str) -> KnownChain {
    KnownChain {
        chain_id,
        family,
        name,
    }
}

/// Mainnets and testnets whose family is certain. Not listed on purpose:
/// Mantle (an OP Stack fork whose deposits hash more fields, so OP's rule
/// would reject them) and chains not checked here (Linea, Blast, opBNB, …):
/// those need `chain.profile` set.
///
/// 31337 is anvil's and hardhat's default. `anvil --network optimism`
/// (anvil 1.7.1, checked) also answers `eth_chainId` with 0x7a69 = 31337,
/// so a local OP-flavoured anvil needs `chain.profile = "op-stack"`.
pub const KNOWN_CHAINS: &[KnownChain] = &[
    known(1, Family::Ethereum, "Ethereum"),
    known(11155111, Family::Ethereum, "Sepolia"),
    known(17000, Family::Ethereum, "Holesky"),
    known(560048, Family::Ethereum, "Hoodi"),
    known(100, Family::Ethereum, "Gnosis"),
    known(10200, Family::Ethereum, "Gnosis Chiado"),
    known(31337, Family::Ethereum, "anvil/hardhat local"),
    known(10, Family::OpStack, "OP Mainnet"),
    known(11155420, Family::OpStack, "OP Sepolia"),
    known(8453, Family::OpStack, "Base"),
    known(84532, Family::OpStack, "Base Sepolia"),
    known(7777777, Family::OpStack, "Zora"),
    known(34443, Family::OpStack, "Mode"),
    known(252, Family::OpStack, "Fraxtal"),
    known(480, Family::OpStack, "World Chain"),
    known(57073, Family::OpStack, "Ink"),
    known(130, Family::OpStack, "Unichain"),
    known(1868, Family::OpStack, "Soneium"),
    known(1135, Family::OpStack, "Lisk"),
    known(42161, Family::Arbitrum, "Arbitrum One"),
    known(42170, Family::Arbitrum, "Arbitrum Nova"),
    known(421614, Family::Arbitrum, "Arbitrum Sepolia"),
    known(137, Family::Polygon, "Polygon PoS"),
    known(80002, Family::Polygon, "Polygon Amoy"),
    known(56, Family::Bnb, "BNB Smart Chain"),
    known(97, Family::Bnb, "BNB Smart Chain testnet"),
    known(43114, Family::Avalanche, "Avalanche C-chain"),
    known(43113, Family::Avalanche, "Avalanche Fuji"),
    known(42220, Family::Celo, "Celo"),
    known(44787, Family::Celo, "Celo Alfajores"),
    known(62320, Family::Celo, "Celo Baklava"),
    known(534352, Family::Scroll, "Scroll"),
    known(534351, Family::Scroll, "Scroll Sepolia"),
    known(324, Family::Zksync, "zkSync Era"),
    known(300, Family::Zksync, "zkSync Era Sepolia"),
];

/// The chain `chain_id` names, when it is in [`KNOWN_CHAINS`].
pub fn known_chain(chain_id: u64) -> Option<&'static KnownChain> {
    KNOWN_CHAINS.iter().find(|c| c.chain_id == chain_id)
}

/// The family of a chain: the `chain.profile` setting when given, else the
/// table's, else `None` (the caller must ask the user to set it).
pub fn family_of(chain_id: u64, setting: Option<Family>) -> Option<Family> {
    setting.or_else(|| known_chain(chain_id).map(|c| c.family))
}

/// The chain a run indexes: its id (from the node) and the family whose
/// rules its blocks are read and verified by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chain {
    pub id: u64,
    pub family: Family,
}

impl Chain {
    /// The chain with id `id`: the family `setting` names (`chain.profile`),
    /// else the one [`KNOWN_CHAINS`] gives, else Ethereum's.
    pub fn resolve(id: u64, setting: Option<Family>) -> Chain {
        Chain {
            id,
            family: family_of(id, setting).unwrap_or(Family::Ethereum),
        }
    }

    /// Whether the family came from neither the setting nor the table.
    pub fn is_guess(id: u64, setting: Option<Family>) -> bool {
        family_of(id, setting).is_none()
    }

    pub fn profile(&self) -> &'static Profile {
        Profile::of(self.family)
    }

    /// How logs and errors name it: `chain id 8453 (Base, op-stack)`.
    pub fn describe(&self) -> String {
        match known_chain(self.id) {
            Some(c) => format!("chain id {} ({}, {})", self.id, c.name, self.family),
            None => format!("chain id {} ({})", self.id, self.family),
        }
    }
}

// ---------------------------------------------------------------------------
// Profiles.

/// Where a transaction's sender comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SenderSource {
    /// ECDSA recovery from the signature over the signing payload.
    Recovered,
    /// The `from` (Scroll: `sender`) that the transaction hash commits to:
    /// no signature, but once the hash, the transactions root and the
    /// header hash are checked, a node cannot change it.
    Committed,
    /// No sender: a protocol pseudo-transaction or system call. Where the
    /// protocol names a fixed caller, [`TxRule::system_sender`] holds it.
    None,
    /// `from` as the node reports it: nothing in the block lets it be checked.
    Reported,
}

impl SenderSource {
    pub fn as_str(self) -> &'static str {
        match self {
            SenderSource::Recovered => "recovered",
            SenderSource::Committed => "committed",
            SenderSource::None => "none",
            SenderSource::Reported => "reported",
        }
    }
}

/// How a transaction's hash (and its leaf in the transactions trie) is
/// obtained; `crate::decode::Tx::signed_encoding` builds each encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxHashing {
    /// keccak of the signed encoding (legacy RLP, or type || rlp(fields
    /// and signature)).
    Signed,
    /// keccak(type || rlp(fields)) with no signature, the sender among the
    /// fields: OP deposit, Scroll L1 message, Arbitrum unsigned types.
    Unsigned,
    /// Not reproducible from the RPC object (Arbitrum classic 0x78,
    /// zkSync 0x71/0xff/0xfe): the node's `hash` is taken as is.
    Reported,
}

/// How a receipt of the type is encoded in the receipts trie.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiptEncoding {
    /// rlp([status, cumulativeGasUsed, bloom, logs]), prefixed by the type
    /// byte when it is not 0.
    Standard,
    /// OP deposit: 0x7e || rlp([status, cumulativeGasUsed, bloom, logs,
    /// depositNonce (Regolith+), depositReceiptVersion (Canyon+)]), each of
    /// the last two only when present (as op-geth encodes it).
    OpDeposit,
    /// Not in any receipts trie that can be checked.
    Unchecked,
}

/// One transaction type of a family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxRule {
    pub tx_type: u8,
    pub name: &'static str,
    pub sender: SenderSource,
    pub hashing: TxHashing,
    pub receipt: ReceiptEncoding,
    /// The protocol's fixed caller when [`SenderSource::None`] (ArbOS for
    /// Arbitrum's internal txs): what to record instead of a sender.
    pub system_sender: Option<Address>,
}

const fn rule(
    tx_type: u8,
    name: &'static str,
    sender: SenderSource,
    hashing: TxHashing,
    receipt: ReceiptEncoding,
) -> TxRule {
    TxRule {
        tx_type,
        name,
        sender,
        hashing,
        receipt,
        system_sender: None,
    }
}

const fn signed(tx_type: u8, name: &'static str) -> TxRule {
    rule(
        tx_type,
        name,
        SenderSource::Recovered,
        TxHashing::Signed,
        ReceiptEncoding::Standard,
    )
}

const fn committed(tx_type: u8, name: &'static str) -> TxRule {
    rule(
        tx_type,
        name,
        SenderSource::Committed,
        TxHashing::Unsigned,
        ReceiptEncoding::Standard,
    )
}

const LEGACY: TxRule = signed(0x00, "legacy");
const ACCESS_LIST: TxRule = signed(0x01, "EIP-2930 access list");
const DYNAMIC_FEE: TxRule = signed(0x02, "EIP-1559 dynamic fee");
const BLOB: TxRule = signed(0x03, "EIP-4844 blob");
const SET_CODE: TxRule = signed(0x04, "EIP-7702 set code");
const OP_DEPOSIT: TxRule = TxRule {
    receipt: ReceiptEncoding::OpDeposit,
    ..committed(0x7e, "OP deposit")
};

/// ArbOS, the caller of Arbitrum's internal transactions (0x6a).
pub const ARBOS_ADDRESS: Address = [
    0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x0a, 0x4b, 0x05,
];

/// The first Nitro block of Arbitrum One; blocks below it were imported
/// from Arbitrum Classic (type 0x78 txs, receipts not reproducible).
pub const ARBITRUM_ONE_NITRO_GENESIS: u64 = 22_207_817;

/// The first Bedrock block of OP Mainnet; blocks below it are legacy OVM
/// blocks (header hash standard, transactions not checkable).
pub const OP_MAINNET_BEDROCK: u64 = 105_235_063;

/// The first OP Stack block of Celo mainnet (its L2 migration) and of
/// Alfajores.
pub const CELO_L2_MAINNET: u64 = 31_056_500;
pub const CELO_L2_ALFAJORES: u64 = 26_384_000;

/// The layout of the RLP list the block hash is taken of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeaderLayout {
    /// Ethereum's: 15 legacy fields (PoW or Aura seal) and each later
    /// fork's fields, as the node sends them. Polygon's and BNB's seals sit
    /// inside `extraData`, so their headers hash this way too.
    Ethereum,
    /// coreth's: the 15 legacy fields, `extDataHash`, then baseFeePerGas,
    /// extDataGasUsed, blockGasCost, blobGasUsed, excessBlobGas,
    /// parentBeaconBlockRoot (each optional in that order).
    Avalanche,
    /// Block hashes are not keccak(rlp(header)) (zkSync Era).
    Opaque,
}

/// What can be recomputed of a block of the family.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Verifiable {
    /// Each transaction's hash from its fields (for the types whose
    /// [`TxHashing`] is not `Reported`).
    pub tx_hashes: bool,
    pub transactions_root: bool,
    pub receipts_root: bool,
    pub header_hash: bool,
    /// Each block names its parent's hash (always checkable).
    pub parent_links: bool,
}

impl Verifiable {
    pub const FULL: Verifiable = Verifiable {
        tx_hashes: true,
        transactions_root: true,
        receipts_root: true,
        header_hash: true,
        parent_links: true,
    };
    pub const LINKS_ONLY: Verifiable = Verifiable {
        tx_hashes: false,
        transactions_root: false,
        receipts_root: false,
        header_hash: false,
        parent_links: true,
    };
    pub const HEADER_ONLY: Verifiable = Verifiable {
        header_hash: true,
        ..Verifiable::LINKS_ONLY
    };
}

/// A range of blocks of one chain verified less than its family's default.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Era {
    pub chain_id: u64,
    /// Blocks below this number.
    pub below: u64,
    pub verifiable: Verifiable,
    pub why: &'static str,
}

/// A transaction a node lists in a block that is not part of the block's
/// tries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PseudoTx {
    /// bor's state-sync pseudo-transaction: type 0, from = to = 0x0, zero
    /// signature, hash = keccak("matic-bor-receipt-" || u64_be(number) ||
    /// blockHash); outside both roots, no sender.
    BorStateSync,
}

/// One family's rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Profile {
    pub family: Family,
    pub tx_types: &'static [TxRule],
    pub header: HeaderLayout,
    pub verifiable: Verifiable,
    /// Block ranges verified less (by chain id).
    pub eras: &'static [Era],
    pub pseudo_txs: &'static [PseudoTx],
    /// Whether a fee-market transaction pays its priority fee, so that it
    /// pays min(maxFeePerGas, baseFee + tip) per gas. Arbitrum's sequencer
    /// charges the base fee alone.
    pub tips_paid: bool,
    /// Where a block commits the number of the L1 block it was built on,
    /// which a block verified in full then tells (`blocks.l1_block_number`).
    pub l1_origin: L1Origin,
}

/// Where a chain's blocks commit the number of the L1 block each was built
/// on (sequenced against, or derived from).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum L1Origin {
    /// Nowhere the indexer checks.
    None,
    /// Bytes 8..16 of the header's `mixHash` (Arbitrum Nitro puts the send
    /// count, the L1 block number and the ArbOS version there), committed
    /// by the header hash.
    MixHash,
    /// The calldata of the deposit that opens each block (OP Stack's
    /// L1-attributes transaction), committed by its transaction hash and
    /// so by the transactions root.
    InfoDeposit(&'static InfoDeposit),
}

/// A deposit that carries its block's L1 origin: sent by `from` to `to`
/// as the block's first transaction, its calldata starting with one of
/// `selectors`, each a layout with the L1 block number as a big-endian
/// u64 in bytes `number_at..number_at + 8`.
#[derive(Debug, PartialEq, Eq)]
pub struct InfoDeposit {
    pub tx_type: u8,
    pub from: Address,
    pub to: Address,
    pub selectors: &'static [[u8; 4]],
    pub number_at: usize,
}

impl InfoDeposit {
    /// The L1 block number `tx` carries, when it is this deposit in one of
    /// the layouts known here; `None` for any other transaction, and for a
    /// selector a later upgrade brings (the column stays NULL, not a guess).
    pub fn l1_block(&self, tx: &Tx) -> Option<u64> {
        if tx.tx_type != self.tx_type || tx.from != Some(self.from) || tx.to != Some(self.to) {
            return None;
        }
        let selector = tx.input.get(..4)?;
        if !self.selectors.iter().any(|s| s == selector) {
            return None;
        }
        let number = tx.input.get(self.number_at..self.number_at + 8)?;
        Some(u64::from_be_bytes(number.try_into().ok()?))
    }
}

/// OP Stack's L1-attributes deposit: from the depositor account
/// 0xdead…0001 to the L1Block predeploy 0x4200…0015. Its layouts by
/// upgrade: Bedrock's `setL1BlockValues(uint64 _number, …)` (0x015d8eb9,
/// ABI-encoded: the number right-aligned in the first 32-byte word, so in
/// bytes 28..36), then packed: `setL1BlockValuesEcotone()` (0x440a5e20),
/// `…Isthmus()` (0x098999be) and `…Jovian()` (0x3db6be2b), each starting
/// basefeeScalar u32, blobBaseFeeScalar u32, sequenceNumber u64, timestamp
/// u64, number u64: bytes 28..36 again (op-node's l1_block_info.go).
pub const OP_L1_ATTRIBUTES: InfoDeposit = InfoDeposit {
    tx_type: 0x7e,
    from: [
        0xde, 0xad, 0xde, 0xad, 0xde, 0xad, 0xde, 0xad, 0xde, 0xad, 0xde, 0xad, 0xde, 0xad, 0xde,
        0xad, 0xde, 0xad, 0x00, 0x01,
    ],
    to: [
        0x42, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x15,
    ],
    selectors: &[
        [0x01, 0x5d, 0x8e, 0xb9],
        [0x44, 0x0a, 0x5e, 0x20],
        [0x09, 0x89, 0x99, 0xbe],
        [0x3d, 0xb6, 0xbe, 0x2b],
    ],
    number_at: 28,
};

const ETHEREUM: Profile = Profile {
    family: Family::Ethereum,
    tx_types: &[LEGACY, ACCESS_LIST, DYNAMIC_FEE, BLOB, SET_CODE],
    header: HeaderLayout::Ethereum,
    verifiable: Verifiable::FULL,
    eras: &[],
    pseudo_txs: &[],
    tips_paid: true,
    l1_origin: L1Origin::None,
};

const OP_STACK: Profile = Profile {
    family: Family::OpStack,
    tx_types: &[LEGACY, ACCESS_LIST, DYNAMIC_FEE, SET_CODE, OP_DEPOSIT],
    header: HeaderLayout::Ethereum,
    verifiable: Verifiable::FULL,
    eras: &[Era {
        chain_id: 10,
        below: OP_MAINNET_BEDROCK,
        verifiable: Verifiable::HEADER_ONLY,
        why: "legacy OVM block (pre-Bedrock): L1-queue txs carry no checkable signature",
    }],
    pseudo_txs: &[],
    tips_paid: true,
    l1_origin: L1Origin::InfoDeposit(&OP_L1_ATTRIBUTES),
};

const ARBITRUM: Profile = Profile {
    family: Family::Arbitrum,
    tx_types: &[
        LEGACY,
        ACCESS_LIST,
        DYNAMIC_FEE,
        SET_CODE,
        committed(0x64, "Arbitrum deposit"),
        committed(0x65, "Arbitrum unsigned"),
        committed(0x66, "Arbitrum contract"),
        committed(0x68, "Arbitrum retry"),
        committed(0x69, "Arbitrum submit retryable"),
        TxRule {
            sender: SenderSource::None,
            system_sender: Some(ARBOS_ADDRESS),
            ..committed(0x6a, "Arbitrum internal")
        },
        rule(
            0x78,
            "Arbitrum classic (legacy)",
            SenderSource::Reported,
            TxHashing::Reported,
            ReceiptEncoding::Unchecked,
        ),
    ],
    header: HeaderLayout::Ethereum,
    verifiable: Verifiable::FULL,
    eras: &[Era {
        chain_id: 42161,
        below: ARBITRUM_ONE_NITRO_GENESIS,
        verifiable: Verifiable::HEADER_ONLY,
        why: "Arbitrum Classic block: classic tx hashes, receipts not reproducible",
    }],
    pseudo_txs: &[],
    tips_paid: false,
    l1_origin: L1Origin::MixHash,
};

const POLYGON: Profile = Profile {
    family: Family::Polygon,
    tx_types: &[LEGACY, ACCESS_LIST, DYNAMIC_FEE, SET_CODE],
    header: HeaderLayout::Ethereum,
    verifiable: Verifiable::FULL,
    eras: &[],
    pseudo_txs: &[PseudoTx::BorStateSync],
    tips_paid: true,
    l1_origin: L1Origin::None,
};

const BNB: Profile = Profile {
    family: Family::Bnb,
    tx_types: &[LEGACY, ACCESS_LIST, DYNAMIC_FEE, BLOB, SET_CODE],
    header: HeaderLayout::Ethereum,
    verifiable: Verifiable::FULL,
    eras: &[],
    pseudo_txs: &[],
    tips_paid: true,
    l1_origin: L1Origin::None,
};

const AVALANCHE: Profile = Profile {
    family: Family::Avalanche,
    tx_types: &[LEGACY, ACCESS_LIST, DYNAMIC_FEE],
    header: HeaderLayout::Avalanche,
    verifiable: Verifiable::FULL,
    eras: &[],
    pseudo_txs: &[],
    tips_paid: true,
    l1_origin: L1Origin::None,
};

const CELO: Profile = Profile {
    family: Family::Celo,
    tx_types: &[
        // Legacy txs with `ethCompatible: false` sign the Celo fields too.
        LEGACY,
        ACCESS_LIST,
        DYNAMIC_FEE,
        // EIP-7702, from Celo's Isthmus upgrade (Optimism's, with Prague's
        // execution EIPs; specs.celo.org/upgrades/isthmus.html).
        SET_CODE,
        signed(0x7a, "Celo CIP-66 denominated fee"),
        signed(0x7b, "Celo CIP-64 fee currency"),
        signed(0x7c, "Celo CIP-42 fee currency"),
        OP_DEPOSIT,
    ],
    header: HeaderLayout::Ethereum,
    verifiable: Verifiable::FULL,
    // Celo's own L1 (before its move to the OP Stack) hashed headers of
    // another layout (no difficulty or nonce, a BLS seal) and receipts with
    // a block receipt: transaction hashes and parent links only.
    eras: &[
        Era {
            chain_id: 42220,
            below: CELO_L2_MAINNET,
            verifiable: Verifiable {
                tx_hashes: true,
                ..Verifiable::LINKS_ONLY
            },
            why: "Celo L1 block: header layout and block receipt not rebuilt",
        },
        Era {
            chain_id: 44787,
            below: CELO_L2_ALFAJORES,
            verifiable: Verifiable {
                tx_hashes: true,
                ..Verifiable::LINKS_ONLY
            },
            why: "Celo L1 block: header layout and block receipt not rebuilt",
        },
    ],
    pseudo_txs: &[],
    tips_paid: true,
    l1_origin: L1Origin::InfoDeposit(&OP_L1_ATTRIBUTES),
};

const SCROLL: Profile = Profile {
    family: Family::Scroll,
    tx_types: &[
        LEGACY,
        ACCESS_LIST,
        DYNAMIC_FEE,
        committed(0x7e, "Scroll L1 message"),
    ],
    header: HeaderLayout::Ethereum,
    verifiable: Verifiable::FULL,
    eras: &[],
    pseudo_txs: &[],
    tips_paid: true,
    l1_origin: L1Origin::None,
};

const ZKSYNC: Profile = Profile {
    family: Family::Zksync,
    tx_types: &[
        TxRule {
            receipt: ReceiptEncoding::Unchecked,
            ..LEGACY
        },
        TxRule {
            receipt: ReceiptEncoding::Unchecked,
            ..ACCESS_LIST
        },
        TxRule {
            receipt: ReceiptEncoding::Unchecked,
            ..DYNAMIC_FEE
        },
        rule(
            0x71,
            "zkSync EIP-712",
            SenderSource::Reported,
            TxHashing::Reported,
            ReceiptEncoding::Unchecked,
        ),
        rule(
            0xfe,
            "zkSync protocol upgrade",
            SenderSource::Reported,
            TxHashing::Reported,
            ReceiptEncoding::Unchecked,
        ),
        rule(
            0xff,
            "zkSync L1 priority op",
            SenderSource::Reported,
            TxHashing::Reported,
            ReceiptEncoding::Unchecked,
        ),
    ],
    header: HeaderLayout::Opaque,
    // Signed txs of types 0-2 hash as on Ethereum; nothing else can be
    // rebuilt: the roots are zero and block hashes are not header hashes.
    verifiable: Verifiable {
        tx_hashes: true,
        ..Verifiable::LINKS_ONLY
    },
    eras: &[],
    pseudo_txs: &[],
    tips_paid: true,
    l1_origin: L1Origin::None,
};

/// A transaction type the chain's profile does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "block {block}: transaction type 0x{tx_type:02x} is not a type of the {family} profile \
     (chain id {chain_id}{known}); if this chain is not {family}, set chain.profile \
     (--chain-profile) to one of: {names}",
    known = match known_chain(*chain_id) { Some(c) => format!(", {}", c.name), None => String::new() },
    names = family_names()
)]
pub struct UnknownTxType {
    pub tx_type: u8,
    pub block: u64,
    pub chain_id: u64,
    pub family: Family,
}

impl Profile {
    pub fn of(family: Family) -> &'static Profile {
        match family {
            Family::Ethereum => &ETHEREUM,
            Family::OpStack => &OP_STACK,
            Family::Arbitrum => &ARBITRUM,
            Family::Polygon => &POLYGON,
            Family::Bnb => &BNB,
            Family::Avalanche => &AVALANCHE,
            Family::Celo => &CELO,
            Family::Scroll => &SCROLL,
            Family::Zksync => &ZKSYNC,
        }
    }

    /// The rule of `tx_type`, if the family has that type.
    pub fn rule(&self, tx_type: u8) -> Option<&'static TxRule> {
        self.tx_types.iter().find(|r| r.tx_type == tx_type)
    }

    /// The rule of `tx_type`, or the error to show for a type the family
    /// does not have.
    pub fn require(
        &self,
        tx_type: u8,
        block: u64,
        chain_id: u64,
    ) -> Result<&'static TxRule, UnknownTxType> {
        self.rule(tx_type).ok_or(UnknownTxType {
            tx_type,
            block,
            chain_id,
            family: self.family,
        })
    }

    pub fn sender_source(&self, tx_type: u8) -> Option<SenderSource> {
        self.rule(tx_type).map(|r| r.sender)
    }

    /// What can be verified of block `number` of chain `chain_id`.
    pub fn verifiable_at(&self, chain_id: u64, number: u64) -> Verifiable {
        self.eras
            .iter()
            .find(|e| e.chain_id == chain_id && number < e.below)
            .map_or(self.verifiable, |e| e.verifiable)
    }

    /// Whether `header`'s withdrawalsRoot is not the root of its
    /// `withdrawals` list and must not be recomputed from it: on OP Stack
    /// chains from Isthmus (recognised by its `requestsHash`), it is the
    /// storage root of the L2ToL1MessagePasser (0x4200…0016).
    pub fn withdrawals_root_is_storage_root(&self, header: &BlockHeader) -> bool {
        matches!(self.family, Family::OpStack | Family::Celo)
            && header
                .fields
                .as_ref()
                .is_some_and(|f| f.withdrawals_root.is_some() && f.requests_hash.is_some())
    }

    /// The pseudo-transaction `tx` is, when it is one: not in the block's
    /// tries, no sender. Decided by its hash, which only the protocol's
    /// rule gives, so a real transaction cannot be passed off as one.
    pub fn pseudo_tx(&self, tx: &Tx, header: &BlockHeader) -> Option<PseudoTx> {
        self.pseudo_txs.iter().copied().find(|p| match p {
            PseudoTx::BorStateSync => is_bor_state_sync(tx, header.number, &header.hash),
        })
    }
}

/// The hash bor gives the state-sync pseudo-transaction of block `number`:
/// keccak("matic-bor-receipt-" || u64_be(number) || blockHash).
pub fn bor_state_sync_hash(number: u64, block_hash: &B256) -> B256 {
    keccak(&[b"matic-bor-receipt-", &number.to_be_bytes(), block_hash])
}

/// Whether `tx` is the state-sync pseudo-transaction of the block
/// (`number`, `block_hash`): its `hash` is the one the rule gives.
pub fn is_bor_state_sync(tx: &Tx, number: u64, block_hash: &B256) -> bool {
    tx.hash == Some(bor_state_sync_hash(number, block_hash))
}
