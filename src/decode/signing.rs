//! Signing payloads: the exact bytes each transaction type's signature (and
//! each EIP-7702 authorization's) commits to, RLP-encoded with `alloy-rlp`
//! (whose length-first headers let a payload be hashed in pieces) and hashed
//! with keccak256. Pure functions of a decoded [`Tx`]; no
//! parsing, no I/O, no crypto context.

use alloy_rlp::{BufMut, EMPTY_STRING_CODE, Encodable, Header};

use super::{AccessItem, Address, Authorization, B256, PayloadError, Tx, U256};

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
    ///
    /// The payload is hashed in pieces, never assembled: the fields before
    /// `input` and after it are encoded into one small buffer, and `input`
    /// itself (often most of the payload) goes to keccak where it lies.
    pub fn signing_hash(&self) -> Result<B256, PayloadError> {
        if let Some(chain) = &self.chain {
            return super::chain_tx::signing_hash(self, chain);
        }
        let mut out = Vec::with_capacity(256 + self.lists_len_hint());
        // `head` ends where `input` goes; the rest of `out` follows it.
        let head = self.fields(&mut out, Form::Signing)?;
        let in_place = self.input_in_place();
        let mut prefix = [0u8; 10];
        let prefix = self.prefix(out.len() + in_place.len(), &mut prefix);
        Ok(keccak(&[prefix, &out[..head], in_place, &out[head..]]))
    }

    /// The signed transaction as it is hashed and stored in the block's
    /// transactions trie: the RLP list of the payload's fields and the
    /// signature (legacy), or the type byte and that list (EIP-2718; blob
    /// transactions without their sidecar). Built from the same fields as
    /// [`Tx::signing_hash`], so the two cannot disagree on any of them.
    pub fn signed_encoding(&self) -> Result<Vec<u8>, PayloadError> {
        if let Some(chain) = &self.chain {
            return super::chain_tx::signed_encoding(self, chain);
        }
        let mut body = Vec::with_capacity(256 + self.input.len() + self.lists_len_hint());
        self.fields(&mut body, Form::Signed)?;
        let mut prefix = [0u8; 10];
        let prefix = self.prefix(body.len(), &mut prefix);
        let mut out = Vec::with_capacity(prefix.len() + body.len());
        out.extend_from_slice(prefix);
        out.extend_from_slice(&body);
        Ok(out)
    }

    /// The type byte (typed transactions) and the list header of a payload
    /// of `payload_length` bytes: at most 1 + 9 bytes, written to `buf`.
    fn prefix<'b>(&self, payload_length: usize, buf: &'b mut [u8; 10]) -> &'b [u8] {
        let mut free = &mut buf[..];
        if self.tx_type != 0 {
            free.put_u8(self.tx_type);
        }
        Header {
            list: true,
            payload_length,
        }
        .encode(&mut free);
        let used = 10 - free.len();
        &buf[..used]
    }

    /// The list items of the payload (`Form::Signing`, returning where
    /// `input`'s bytes go, which it leaves out when long) or of the signed
    /// transaction (`Form::Signed`, whole; returns its length).
    fn fields(&self, out: &mut Vec<u8>, form: Form) -> Result<usize, PayloadError> {
        let ty = self.tx_type;
        let need = |field: &'static str| PayloadError::Missing(field, ty);
        let nonce = self.nonce.ok_or_else(|| need("nonce"))?;
        let gas = self.gas.ok_or_else(|| need("gas"))?;
        let value = self.value.ok_or_else(|| need("value"))?;
        let chain_id = || self.chain_id.ok_or_else(|| need("chainId"));
        let inline = form == Form::Signed;
        let head;
        match ty {
            0 => {
                let v = self.v.ok_or_else(|| need("v"))?;
                let price = self.gas_price.ok_or_else(|| need("gasPrice"))?;
                nonce.encode(out);
                price.minimal().encode(out);
                head = self.encode_call(out, &gas, &value, inline);
                match form {
                    Form::Signing => {
                        if let Some(id) = Tx::eip155_chain_id(&v) {
                            id.minimal().encode(out);
                            out.put_u8(EMPTY_STRING_CODE);
                            out.put_u8(EMPTY_STRING_CODE);
                        }
                    }
                    Form::Signed => v.minimal().encode(out),
                }
            }
            1 => {
                let price = self.gas_price.ok_or_else(|| need("gasPrice"))?;
                chain_id()?.minimal().encode(out);
                nonce.encode(out);
                price.minimal().encode(out);
                head = self.encode_call(out, &gas, &value, inline);
                self.access_list.encode(out);
            }
            // EIP-1559 and its descendants share the body; blob (3) and
            // set-code (4) transactions must name a recipient and append a tail.
            2..=4 => {
                if ty != 2 && self.to.is_none() {
                    return Err(need("to"));
                }
                let tip = self
                    .max_priority_fee_per_gas
                    .ok_or_else(|| need("maxPriorityFeePerGas"))?;
                let cap = self.max_fee_per_gas.ok_or_else(|| need("maxFeePerGas"))?;
                let blob_fee = match ty {
                    3 => Some(
                        self.max_fee_per_blob_gas
                            .ok_or_else(|| need("maxFeePerBlobGas"))?,
                    ),
                    _ => None,
                };
                let auths = match ty {
                    4 => self
                        .authorization_list
                        .iter()
                        .map(|a| SignedAuthorization::of(a).map_err(need))
                        .collect::<Result<Vec<_>, _>>()?,
                    _ => Vec::new(),
                };
                chain_id()?.minimal().encode(out);
                nonce.encode(out);
                tip.minimal().encode(out);
                cap.minimal().encode(out);
                head = self.encode_call(out, &gas, &value, inline);
                self.access_list.encode(out);
                if let Some(blob_fee) = blob_fee {
                    blob_fee.minimal().encode(out);
                    self.blob_versioned_hashes.encode(out);
                }
                if ty == 4 {
                    auths.encode(out);
                }
            }
            other => return Err(PayloadError::UnsupportedType(other)),
        }
        if form == Form::Signing {
            return Ok(head);
        }
        if ty != 0 {
            let parity = self.typed_parity().ok_or_else(|| need("yParity"))?;
            parity.minimal().encode(out);
        }
        self.r.ok_or_else(|| need("r"))?.minimal().encode(out);
        self.s.ok_or_else(|| need("s"))?.minimal().encode(out);
        Ok(out.len())
    }

    /// A typed transaction's y parity as its encoding holds it: `yParity`,
    /// or `v` where a node sends only that (0/1, or 27/28 from old clients).
    pub fn typed_parity(&self) -> Option<U256> {
        match (self.y_parity, self.v) {
            (Some(p), _) => Some(p),
            (None, Some(v)) => match v.to_u64() {
                Some(x @ (27 | 28)) => Some(U256::from_u64(x - 27)),
                _ => Some(v),
            },
            (None, None) => None,
        }
    }

    /// Room for the access, blob and authorization lists, so that the
    /// buffer is allocated once.
    fn lists_len_hint(&self) -> usize {
        64 * self.access_list.len()
            + 33 * self
                .access_list
                .iter()
                .map(|a| a.storage_keys.len())
                .sum::<usize>()
            + 33 * self.blob_versioned_hashes.len()
            + 120 * self.authorization_list.len()
    }

    /// `gas, to, value` and the header of `data` (the part every payload
    /// shares); returns where `data`'s bytes go in `out`. A short `data` is
    /// encoded whole (one byte below 0x80 is its own encoding), and so is
    /// any `data` when `inline`.
    fn encode_call(&self, out: &mut Vec<u8>, gas: &U256, value: &U256, inline: bool) -> usize {
        gas.minimal().encode(out);
        match &self.to {
            Some(to) => to.encode(out),
            None => out.put_u8(EMPTY_STRING_CODE),
        };
        value.minimal().encode(out);
        let in_place = self.input_in_place();
        if in_place.is_empty() || inline {
            // As a byte string: `Vec<u8>` itself would encode as a list.
            self.input.as_slice().encode(out);
        } else {
            Header {
                list: false,
                payload_length: in_place.len(),
            }
            .encode(out);
        }
        out.len()
    }

    /// `input`'s bytes when they are hashed where they lie, after a header
    /// in the buffer; empty when `input` is short and encoded whole there.
    fn input_in_place(&self) -> &[u8] {
        if self.input.len() > 55 {
            &self.input
        } else {
            &[]
        }
    }
}

/// Which list [`Tx::fields`] writes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    /// What the signature signs.
    Signing,
    /// The signed transaction.
    Signed,
}

impl Encodable for AccessItem {
    fn encode(&self, out: &mut dyn BufMut) {
        Header {
            list: true,
            payload_length: self.address.length() + self.storage_keys.length(),
        }
        .encode(out);
        self.address.encode(out);
        self.storage_keys.encode(out);
    }

    fn length(&self) -> usize {
        let payload_length = self.address.length() + self.storage_keys.length();
        payload_length + alloy_rlp::length_of_length(payload_length)
    }
}

/// An EIP-7702 tuple as a type-4 payload holds it: every field present.
struct SignedAuthorization<'a> {
    chain_id: &'a U256,
    address: &'a Address,
    nonce: u64,
    y_parity: &'a U256,
    r: &'a U256,
    s: &'a U256,
}

impl<'a> SignedAuthorization<'a> {
    fn of(a: &'a Authorization) -> Result<Self, &'static str> {
        Ok(SignedAuthorization {
            chain_id: a.chain_id.as_ref().ok_or("authorizationList.chainId")?,
            address: a.address.as_ref().ok_or("authorizationList.address")?,
            nonce: a.nonce.ok_or("authorizationList.nonce")?,
            y_parity: a.y_parity.as_ref().ok_or("authorizationList.yParity")?,
            r: a.r.as_ref().ok_or("authorizationList.r")?,
            s: a.s.as_ref().ok_or("authorizationList.s")?,
        })
    }

    fn payload_length(&self) -> usize {
        self.chain_id.minimal().length()
            + self.address.length()
            + self.nonce.length()
            + self.y_parity.minimal().length()
            + self.r.minimal().length()
            + self.s.minimal().length()
    }
}

impl Encodable for SignedAuthorization<'_> {
    fn encode(&self, out: &mut dyn BufMut) {
        Header {
            list: true,
            payload_length: self.payload_length(),
        }
        .encode(out);
        self.chain_id.minimal().encode(out);
        self.address.encode(out);
        self.nonce.encode(out);
        self.y_parity.minimal().encode(out);
        self.r.minimal().encode(out);
        self.s.minimal().encode(out);
    }

    fn length(&self) -> usize {
        let payload_length = self.payload_length();
        payload_length + alloy_rlp::length_of_length(payload_length)
    }
}

impl Authorization {
    /// keccak256(0x05 || rlp([chainId, address, nonce])): what an EIP-7702
    /// authority signs. `None` when a field is missing.
    pub fn signing_hash(&self) -> Option<B256> {
        let (chain_id, address, nonce) = (self.chain_id?, self.address?, self.nonce?);
        let mut out = Vec::with_capacity(64);
        out.put_u8(0x05);
        Header {
            list: true,
            payload_length: chain_id.minimal().length() + address.length() + nonce.length(),
        }
        .encode(&mut out);
        chain_id.minimal().encode(&mut out);
        address.encode(&mut out);
        nonce.encode(&mut out);
        Some(keccak(&[&out]))
    }
}

/// Keccak-256 of `parts`, one after the other: the one keccak of the
/// project (hashes, senders, signing hashes, blooms), on alloy's hasher,
/// which with its `asm-keccak` feature runs XKCP's assembly. The tries'
/// leaves and the transaction hashes verification checks are the
/// exception: `verify::keccak4` hashes them four at a time where the CPU
/// has AVX2, and with this same hasher where it does not.
pub fn keccak(parts: &[&[u8]]) -> B256 {
    let mut h = alloy_primitives::Keccak256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().0
}
