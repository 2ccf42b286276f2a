//! Trust anchors: blocks whose hash the user vouches for
//! (`--trusted-block N:0xHASH`, `verify.trusted_blocks`) and the genesis
//! blocks of the well-known chains, built in. Every stored block must link
//! to one by parent hashes; `crate::app` checks a range can before it is
//! indexed and the pipeline checks each anchor's block as it arrives. Pure.

use crate::decode::{B256, hex0x, parse_fixed};

/// Where an anchor came from, as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AnchorOrigin {
    /// Given by the user.
    Trusted,
    /// The built-in genesis of a known chain.
    Genesis(&'static str),
}

/// A block whose hash is trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    pub number: u64,
    pub hash: B256,
    pub origin: AnchorOrigin,
}

impl Anchor {
    /// Parses `N:0xHASH` (the form of `--trusted-block`).
    pub fn parse(s: &str) -> Result<Anchor, String> {
        let (n, h) = s
            .split_once(':')
            .ok_or_else(|| format!("{s:?}: expected NUMBER:0xHASH, e.g. 0:0xd4e5…8fa3"))?;
        let number = n
            .trim()
            .parse::<u64>()
            .map_err(|_| format!("{s:?}: {n:?} is not a block number"))?;
        let hash = parse_fixed::<32>("hash", h.trim())
            .map_err(|_| format!("{s:?}: {h:?} is not a 32-byte 0x-prefixed hash"))?;
        Ok(Anchor {
            number,
            hash,
            origin: AnchorOrigin::Trusted,
        })
    }

    /// How `status` and errors name it: `block 0 (0xd4e5…, mainnet genesis)`.
    pub fn describe(&self) -> String {
        match &self.origin {
            AnchorOrigin::Trusted => {
                format!("trusted block {} ({})", self.number, hex0x(&self.hash))
            }
            AnchorOrigin::Genesis(chain) => {
                format!("{chain} genesis block 0 ({})", hex0x(&self.hash))
            }
        }
    }
}

/// The hashes blocks of a run must have: its anchors, and the stored
/// blocks a range must join (the block above a range indexed below stored
/// blocks). Checked on each block as it arrives, after its own hash.
#[derive(Debug, Default, Clone)]
pub struct Anchors {
    by_number: std::collections::HashMap<u64, (B256, String)>,
}

impl Anchors {
    /// Block `number` must have `hash`; `what` names where that comes from.
    pub fn insert(&mut self, number: u64, hash: B256, what: String) {
        self.by_number.insert(number, (hash, what));
    }

    pub fn is_empty(&self) -> bool {
        self.by_number.is_empty()
    }

    /// `header` (whose hash is already verified) has the hash its anchor
    /// gives, and its parent the hash the anchor below it gives.
    pub fn check(&self, header: &crate::decode::BlockHeader) -> Result<(), super::Failure> {
        let n = header.number;
        if let Some((hash, what)) = self.by_number.get(&n).filter(|(h, _)| *h != header.hash) {
            return Err(super::Failure::new(
                n,
                "hash",
                hex0x(&header.hash),
                format!("{what} is {}", hex0x(hash)),
            ));
        }
        let below = n.checked_sub(1).and_then(|p| self.by_number.get(&p));
        if let Some((hash, what)) = below.filter(|(h, _)| *h != header.parent_hash) {
            return Err(super::Failure::new(
                n,
                "parentHash",
                hex0x(&header.parent_hash),
                format!("{what} is {}", hex0x(hash)),
            ));
        }
        Ok(())
    }
}

/// The genesis hashes of the well-known chains, by chain id.
const GENESIS: [(u64, &str, &str); 6] = [
    (
        1,
        "mainnet",
        "0xd4e56740f876aef8c010b86a40d5f56745a118d0906a34e69aec8c0db1cb8fa3",
    ),
    (
        5,
        "Goerli",
        "0xbf7e331f7f7c1dd2e05159666b3bf8bc7a8a3a9eb1d518969eab529dd9b88c1a",
    ),
    (
        100,
        "Gnosis",
        "0x4f1dd23188aab3a76b463e4af801b52b1248ef073c648cbdc4c9333d3da79756",
    ),
    (
        17000,
        "Holesky",
        "0xb5f7f912443c940f21fd611f12828d75b534364ed9e95ca4e307729a4661bde4",
    ),
    (
        560048,
        "Hoodi",
        "0xbbe312868b376a3001692a646dd2d7d1e4406380dfd86b98aa8a34d1557c971b",
    ),
    (
        11155111,
        "Sepolia",
        "0x25a5cc106eea7138acab33231d7160d69cb777ee0c2c553fcddf5138993e6dd9",
    ),
];

/// The built-in genesis anchor of chain `chain_id`, if it is a known one.
pub fn builtin_genesis(chain_id: u64) -> Option<Anchor> {
    GENESIS
        .iter()
        .find(|(id, ..)| *id == chain_id)
        .map(|(_, name, hash)| Anchor {
            number: 0,
            hash: parse_fixed::<32>("hash", hash).expect("built-in genesis hashes are well formed"),
            origin: AnchorOrigin::Genesis(name),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses_trusted_blocks() {
        let a = Anchor::parse(
            "24476000:0xf66c0322ac6864981313e0eacdae35b3d4c02c23b84082ac5d4877f0e49f81a6",
        )
        .unwrap();
        assert_eq!(a.number, 24476000);
        assert_eq!(a.hash[0], 0xf6);
        for bad in ["12", "x:0x00", "1:0x1234", "1:f66c"] {
            let err = Anchor::parse(bad).unwrap_err();
            assert!(err.contains(bad), "{err}");
        }
        assert_eq!(builtin_genesis(1).unwrap().hash[..2], [0xd4, 0xe5]);
        assert!(builtin_genesis(31337).is_none());
    }
}
