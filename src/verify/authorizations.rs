//! Whether each EIP-7702 authorization of a type-4 transaction could take
//! effect, by the rules that need no state (EIP-7702, "Behavior"): its
//! chain id is 0 or the chain's own, its nonce is below 2^64-1, its
//! signature's `s` is at most n/2 and `yParity` is 0 or 1, and an
//! authority recovers from it. A tuple that fails one is skipped by the
//! chain, yet the transaction is valid: it is stored, marked with the
//! reason, so that delegation queries do not count it. The rules that need
//! state (the authority's nonce equals the tuple's, its code is empty or a
//! delegation) cannot be checked from JSON-RPC: a tuple that passes here
//! may still have been skipped.
//!
//! Pure: no I/O, no recovery (the authority comes from `recover`).

use crate::block::RecoverError;
use crate::decode::{Address, Authorization, U256};

/// secp256k1's group order n, halved (rounded down): EIP-2's bound on `s`,
/// which EIP-7702 applies to authorizations.
const HALF_N: U256 = U256([
    0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0x5d, 0x57, 0x6e, 0x73, 0x57, 0xa4, 0x50, 0x1d, 0xdf, 0xe9, 0x2f, 0x46, 0x68, 0x1b, 0x20, 0xa0,
]);

/// Why `auth` (whose recovered authority is `authority`) cannot take effect
/// on chain `chain_id`, or `None` when the stateless rules let it.
pub fn authorization_void(
    auth: &Authorization,
    authority: &Result<Address, RecoverError>,
    chain_id: u64,
) -> Option<&'static str> {
    match auth.chain_id {
        Some(c) if c.is_zero() || c == U256::from_u64(chain_id) => {}
        Some(_) => return Some("chainId is neither 0 nor this chain's"),
        None => return Some("no chainId"),
    }
    if auth.nonce.is_none_or(|n| n == u64::MAX) {
        return Some("nonce is not below 2^64-1");
    }
    if auth.s.is_some_and(|s| s > HALF_N) {
        return Some("s is above n/2");
    }
    match authority {
        Ok(_) => None,
        Err(RecoverError::InvalidParity(_)) => Some("yParity is neither 0 nor 1"),
        Err(_) => Some("no authority recovers from its signature"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn auth(chain_id: u64, nonce: u64, s: U256) -> Authorization {
        Authorization {
            chain_id: Some(U256::from_u64(chain_id)),
            address: Some(Address::default()),
            nonce: Some(nonce),
            y_parity: Some(U256::ZERO),
            r: Some(U256::from_u64(1)),
            s: Some(s),
        }
    }

    #[test]
    fn each_stateless_rule_voids_a_tuple_by_name() {
        let ok: Result<Address, RecoverError> = Ok(Address::default());
        let low = U256::from_u64(7);
        assert_eq!(authorization_void(&auth(1, 0, low), &ok, 1), None);
        assert_eq!(
            authorization_void(&auth(0, 5, HALF_N), &ok, 1),
            None,
            "0 is any chain; n/2 itself is allowed"
        );
        assert_eq!(
            authorization_void(&auth(10, 0, low), &ok, 1),
            Some("chainId is neither 0 nor this chain's")
        );
        assert_eq!(
            authorization_void(&auth(1, u64::MAX, low), &ok, 1),
            Some("nonce is not below 2^64-1")
        );
        let mut above = HALF_N;
        above.0[31] += 1;
        assert_eq!(
            authorization_void(&auth(1, 0, above), &ok, 1),
            Some("s is above n/2")
        );
        let parity = Err(RecoverError::InvalidParity(U256::from_u64(2)));
        assert_eq!(
            authorization_void(&auth(1, 0, low), &parity, 1),
            Some("yParity is neither 0 nor 1")
        );
        assert_eq!(
            authorization_void(&auth(1, 0, low), &Err(RecoverError::NoKey), 1),
            Some("no authority recovers from its signature")
        );
    }
}
