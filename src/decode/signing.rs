//! Signing payloads: the exact bytes each transaction type's signature (and
//! each EIP-7702 authorization's) commits to, RLP-encoded with the `rlp`
//! crate and hashed with keccak256. Pure functions of a decoded [`Tx`]; no
//! parsing, no I/O, no crypto context.

use rlp::RlpStream;
use sha3::{Digest, Keccak256};

use super::{Authorization, B256, PayloadError, Tx, U256};

impl Tx {
    /// For a legacy transaction, the chain id that `v` encodes (EIP-155:
    /// v = 2·chainId + 35 + parity), or `None` when `v` is 27/28
    /// (pre-EIP-155). Decided from `v` alone: nodes report `chainId` 0, null
    /// or even the real chain id on pre-155 transactions.
    pub fn eip155_chain_id(v: &U256) -> Option<U256> {
        if v.to_u64().is_some_and(|v| v == 27 || v == 28) || *v < U256::from_u64(35) {
            return None;
        }
        // chain_id = (v - 35) >> 1, on 256-bit big-endian bytes.
        let mut x = v.0;
        let mut sub = 35u8;
        for b in x.iter_mut().rev() {
            let (res, borrow) = b.overflowing_sub(sub);
            *b = res;
            sub = borrow as u8;
        }
        let mut carry = 0u8;
        for b in x.iter_mut() {
            let next = *b & 1;
            *b = (*b >> 1) | (carry << 7);
            carry = next;
        }
        Some(U256(x))
    }

    /// keccak256 of the unsigned payload this transaction's signature signs;
    /// typed payloads are prefixed with their type byte.
    pub fn signing_hash(&self) -> Result<B256, PayloadError> {
        let ty = self.tx_type;
        let need = |field: &'static str| PayloadError::Missing(field, ty);
        let nonce = self.nonce.ok_or_else(|| need("nonce"))?;
        let gas = self.gas.ok_or_else(|| need("gas"))?;
        let value = self.value.ok_or_else(|| need("value"))?;
        let chain_id = || self.chain_id.ok_or_else(|| need("chainId"));
        let fees = |s: &mut RlpStream| -> Result<(), PayloadError> {
            let tip = self
                .max_priority_fee_per_gas
                .ok_or_else(|| need("maxPriorityFeePerGas"))?;
            let cap = self.max_fee_per_gas.ok_or_else(|| need("maxFeePerGas"))?;
            s.append(&tip.minimal()).append(&cap.minimal());
            Ok(())
        };
        let mut s;
        match ty {
            0 => {
                let v = self.v.ok_or_else(|| need("v"))?;
                let eip155 = Tx::eip155_chain_id(&v);
                s = RlpStream::new_list_with_buffer(
                    self.payload_buffer(),
                    if eip155.is_some() { 9 } else { 6 },
                );
                let price = self.gas_price.ok_or_else(|| need("gasPrice"))?;
                s.append(&nonce).append(&price.minimal());
                self.append_call(&mut s, &gas, &value);
                if let Some(id) = eip155 {
                    s.append(&id.minimal())
                        .append_empty_data()
                        .append_empty_data();
                }
                return Ok(keccak(&[s.as_raw()]));
            }
            1 => {
                s = RlpStream::new_list_with_buffer(self.payload_buffer(), 8);
                let price = self.gas_price.ok_or_else(|| need("gasPrice"))?;
                s.append(&chain_id()?.minimal())
                    .append(&nonce)
                    .append(&price.minimal());
                self.append_call(&mut s, &gas, &value);
                self.append_access_list(&mut s);
            }
            // EIP-1559 and its descendants share the body; blob (3) and
            // set-code (4) transactions must name a recipient and append a tail.
            2..=4 => {
                if ty != 2 && self.to.is_none() {
                    return Err(need("to"));
                }
                let blob_fee = match ty {
                    3 => Some(
                        self.max_fee_per_blob_gas
                            .ok_or_else(|| need("maxFeePerBlobGas"))?,
                    ),
                    _ => None,
                };
                let fields = [9, 11, 10][usize::from(ty - 2)];
                s = RlpStream::new_list_with_buffer(self.payload_buffer(), fields);
                s.append(&chain_id()?.minimal()).append(&nonce);
                fees(&mut s)?;
                self.append_call(&mut s, &gas, &value);
                self.append_access_list(&mut s);
                if let Some(blob_fee) = blob_fee {
                    s.append(&blob_fee.minimal());
                    s.begin_list(self.blob_versioned_hashes.len());
                    for h in &self.blob_versioned_hashes {
                        s.append(&&h[..]);
                    }
                }
                if ty == 4 {
                    s.begin_list(self.authorization_list.len());
                    for a in &self.authorization_list {
                        let field = |x: Option<U256>, name| x.ok_or_else(|| need(name));
                        s.begin_list(6);
                        s.append(&field(a.chain_id, "authorizationList.chainId")?.minimal());
                        s.append(&&a.address.ok_or_else(|| need("authorizationList.address"))?[..]);
                        s.append(&a.nonce.ok_or_else(|| need("authorizationList.nonce"))?);
                        s.append(&field(a.y_parity, "authorizationList.yParity")?.minimal());
                        s.append(&field(a.r, "authorizationList.r")?.minimal());
                        s.append(&field(a.s, "authorizationList.s")?.minimal());
                    }
                }
            }
            other => return Err(PayloadError::UnsupportedType(other)),
        }
        Ok(keccak(&[&[ty], s.as_raw()]))
    }

    /// A buffer the whole payload fits in, so a large `input` is not copied
    /// again by every doubling of a small one.
    fn payload_buffer(&self) -> bytes::BytesMut {
        let list_bytes = 64 * self.access_list.len()
            + 33 * self
                .access_list
                .iter()
                .map(|a| a.storage_keys.len())
                .sum::<usize>()
            + 33 * self.blob_versioned_hashes.len()
            + 120 * self.authorization_list.len();
        bytes::BytesMut::with_capacity(256 + self.input.len() + list_bytes)
    }

    /// `gas, to, value, data`: the part every payload shares.
    fn append_call(&self, s: &mut RlpStream, gas: &U256, value: &U256) {
        s.append(&gas.minimal());
        match &self.to {
            Some(to) => s.append(&&to[..]),
            None => s.append_empty_data(),
        };
        s.append(&value.minimal()).append(&self.input.as_slice());
    }

    fn append_access_list(&self, s: &mut RlpStream) {
        s.begin_list(self.access_list.len());
        for item in &self.access_list {
            s.begin_list(2).append(&&item.address[..]);
            s.begin_list(item.storage_keys.len());
            for k in &item.storage_keys {
                s.append(&&k[..]);
            }
        }
    }
}

impl Authorization {
    /// keccak256(0x05 || rlp([chainId, address, nonce])): what an EIP-7702
    /// authority signs. `None` when a field is missing.
    pub fn signing_hash(&self) -> Option<B256> {
        let mut s = RlpStream::new_list(3);
        s.append(&self.chain_id?.minimal())
            .append(&&self.address?[..])
            .append(&self.nonce?);
        Some(keccak(&[&[0x05], s.as_raw()]))
    }
}

pub fn keccak(parts: &[&[u8]]) -> B256 {
    let mut h = Keccak256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}
