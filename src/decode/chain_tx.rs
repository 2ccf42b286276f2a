//! Transaction types that exist only on some chains: their JSON fields
//! (kept on [`Tx::chain`] as [`ChainFields`], so ordinary transactions pay
//! one null pointer), and their encodings: the bytes that go in the
//! transactions trie (whose keccak is the tx hash) and, for the signed Celo
//! types, the signing payload.
//!
//! * OP deposit 0x7e: 0x7e || rlp([sourceHash, from, to, mint, value, gas,
//!   isSystemTx, input]) (op-geth `deposit_tx.go`, op-alloy `TxDeposit`).
//! * Scroll L1 message 0x7e: 0x7e || rlp([queueIndex, gas, to, value, data,
//!   sender]).
//! * Arbitrum 0x64-0x6a: type || rlp(fields) in `arb_types.go`'s order.
//! * Celo: legacy with fee-currency fields (EIP-155), 0x7c (CIP-42),
//!   0x7b (CIP-64), 0x7a (CIP-66).
//!
//! What a type byte means is decided by the chain's family (0x7e is a
//! deposit on OP Stack and Celo, an L1 message on Scroll): the family is
//! handed to [`Tx::from_json_in`], which keeps the fields that family's
//! type has and nothing else. Pure: no I/O, no crypto context, no
//! recovery (unsigned types have no signature to recover; r = s = 0 on
//! them means exactly that).

use alloy_rlp::{BufMut, EMPTY_STRING_CODE, Encodable, Header};

use super::hex::{opt, parse_bytes, parse_fixed, parse_u64, parse_u256};
use super::tx::WireTx;
use super::{AccessItem, Address, B256, DecodeError, PayloadError, Tx, U256, keccak};
use crate::chain::Family;

/// The chain-specific fields of a transaction, by what its type means on
/// its chain. Every field is kept as the node sent it (absent = `None`);
/// whether the encoding can be built is decided when it is built, and a
/// missing field is named then.
// Always behind the `Box` of `Tx::chain`: the variants' sizes cost nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChainFields {
    OpDeposit(OpDeposit),
    ScrollL1Message(ScrollL1Message),
    Arbitrum(ArbitrumFields),
    Celo(CeloFields),
    /// A type whose hash cannot be rebuilt from its RPC object (Arbitrum
    /// classic 0x78, zkSync 0x71/0xfe/0xff): kept as reported.
    Reported,
}

/// OP Stack deposit (0x7e). `from` is [`Tx::from`]; the JSON `nonce` is
/// not part of the encoding.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpDeposit {
    pub source_hash: Option<B256>,
    /// ETH minted on L2; null, absent and 0x0 all mean 0.
    pub mint: Option<U256>,
    /// Absent means false.
    pub is_system_tx: bool,
    /// Canyon+: also on the receipt, where it is encoded.
    pub deposit_receipt_version: Option<u64>,
}

/// Scroll L1 message (0x7e).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScrollL1Message {
    pub queue_index: Option<u64>,
    /// The hashed sender; a node that leaves it out is taken at its `from`
    /// (which is then hashed, so checked all the same).
    pub sender: Option<Address>,
}

/// Arbitrum's unsigned types (0x64-0x6a), by their JSON names. The
/// gas fee cap is `maxFeePerGas` ([`Tx::max_fee_per_gas`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ArbitrumFields {
    /// `requestId` (0x64 L1RequestId, 0x66, 0x69).
    pub request_id: Option<B256>,
    /// `ticketId` (0x68).
    pub ticket_id: Option<B256>,
    /// `refundTo` (0x68 RefundTo, 0x69 FeeRefundAddr).
    pub refund_to: Option<Address>,
    pub max_refund: Option<U256>,
    pub submission_fee_refund: Option<U256>,
    pub l1_base_fee: Option<U256>,
    pub deposit_value: Option<U256>,
    /// `retryTo`; `None` (or null) for a retryable that creates a contract.
    pub retry_to: Option<Address>,
    pub retry_value: Option<U256>,
    pub retry_data: Option<Vec<u8>>,
    pub beneficiary: Option<Address>,
    pub max_submission_fee: Option<U256>,
}

/// Celo's fee-currency fields (legacy txs with `ethCompatible: false`,
/// 0x7c, 0x7b, 0x7a). Null currency/recipient encode as empty, a null
/// gateway fee as 0, as celo-blockchain's nil pointers do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CeloFields {
    pub fee_currency: Option<Address>,
    pub gateway_fee_recipient: Option<Address>,
    pub gateway_fee: Option<U256>,
    pub eth_compatible: Option<bool>,
    /// 0x7a only.
    pub max_fee_in_fee_currency: Option<U256>,
}

/// The JSON keys of [`ChainFields`]: `scan` declines an object holding one
/// (serde_json reads them), since it would otherwise skip them unread.
pub(super) fn is_chain_key(key: &[u8]) -> bool {
    matches!(
        key,
        b"sourceHash"
            | b"mint"
            | b"isSystemTx"
            | b"depositReceiptVersion"
            | b"queueIndex"
            | b"sender"
            | b"requestId"
            | b"ticketId"
            | b"refundTo"
            | b"maxRefund"
            | b"submissionFeeRefund"
            | b"l1BaseFee"
            | b"depositValue"
            | b"retryTo"
            | b"retryValue"
            | b"retryData"
            | b"beneficiary"
            | b"maxSubmissionFee"
            | b"feeCurrency"
            | b"gatewayFeeRecipient"
            | b"gatewayFee"
            | b"ethCompatible"
            | b"maxFeeInFeeCurrency"
    )
}

/// The fields `family` gives a transaction of `tx_type`, read from `w`;
/// `None` for a type with none (the types every chain shares, or one the
/// family does not have, which then fails as unsupported when encoded).
pub(super) fn chain_fields(
    family: Family,
    tx_type: u8,
    w: &WireTx<'_>,
) -> Result<Option<Box<ChainFields>>, DecodeError> {
    let fields = match (family, tx_type) {
        (Family::OpStack | Family::Celo, 0x7e) => ChainFields::OpDeposit(OpDeposit {
            source_hash: opt("sourceHash", w.source_hash, parse_fixed)?,
            mint: opt("mint", w.mint, parse_u256)?,
            is_system_tx: w.is_system_tx.unwrap_or(false),
            deposit_receipt_version: opt(
                "depositReceiptVersion",
                w.deposit_receipt_version,
                parse_u64,
            )?,
        }),
        (Family::Scroll, 0x7e) => ChainFields::ScrollL1Message(ScrollL1Message {
            queue_index: opt("queueIndex", w.queue_index, parse_u64)?,
            sender: opt("sender", w.sender, parse_fixed)?,
        }),
        (Family::Arbitrum, 0x64..=0x66 | 0x68..=0x6a) => ChainFields::Arbitrum(ArbitrumFields {
            request_id: opt("requestId", w.request_id, parse_fixed)?,
            ticket_id: opt("ticketId", w.ticket_id, parse_fixed)?,
            refund_to: opt("refundTo", w.refund_to, parse_fixed)?,
            max_refund: opt("maxRefund", w.max_refund, parse_u256)?,
            submission_fee_refund: opt("submissionFeeRefund", w.submission_fee_refund, parse_u256)?,
            l1_base_fee: opt("l1BaseFee", w.l1_base_fee, parse_u256)?,
            deposit_value: opt("depositValue", w.deposit_value, parse_u256)?,
            retry_to: match w.retry_to {
                Some(b"") | Some(b"0x") | None => None,
                Some(t) => Some(parse_fixed("retryTo", t)?),
            },
            retry_value: opt("retryValue", w.retry_value, parse_u256)?,
            retry_data: opt("retryData", w.retry_data, parse_bytes)?,
            beneficiary: opt("beneficiary", w.beneficiary, parse_fixed)?,
            max_submission_fee: opt("maxSubmissionFee", w.max_submission_fee, parse_u256)?,
        }),
        (Family::Arbitrum, 0x78) | (Family::Zksync, 0x71 | 0xfe | 0xff) => ChainFields::Reported,
        // Legacy Celo txs sign their Celo fields unless `ethCompatible`;
        // an eth-compatible one is a plain legacy tx (and the fields it
        // carries, outside what it signs, are not read).
        (Family::Celo, 0) if w.eth_compatible != Some(false) => return Ok(None),
        (Family::Celo, 0 | 0x7a..=0x7c) => ChainFields::Celo(CeloFields {
            fee_currency: opt("feeCurrency", w.fee_currency, parse_fixed)?,
            gateway_fee_recipient: opt(
                "gatewayFeeRecipient",
                w.gateway_fee_recipient,
                parse_fixed,
            )?,
            gateway_fee: opt("gatewayFee", w.gateway_fee, parse_u256)?,
            eth_compatible: w.eth_compatible,
            max_fee_in_fee_currency: opt(
                "maxFeeInFeeCurrency",
                w.max_fee_in_fee_currency,
                parse_u256,
            )?,
        }),
        _ => return Ok(None),
    };
    Ok(Some(Box::new(fields)))
}

// ---------------------------------------------------------------------------
// Encodings.

/// An RLP list being written: its items, then a header in front.
struct List(Vec<u8>);

impl List {
    fn new(hint: usize) -> List {
        List(Vec::with_capacity(hint))
    }
    fn quantity(&mut self, v: &U256) -> &mut Self {
        v.minimal().encode(&mut self.0);
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        v.encode(&mut self.0);
        self
    }
    fn address(&mut self, a: &Address) -> &mut Self {
        a.encode(&mut self.0);
        self
    }
    /// An address, or the empty string for none (creation, nil pointer).
    fn opt_address(&mut self, a: &Option<Address>) -> &mut Self {
        match a {
            Some(a) => a.encode(&mut self.0),
            None => self.0.put_u8(EMPTY_STRING_CODE),
        }
        self
    }
    fn hash(&mut self, h: &B256) -> &mut Self {
        h.encode(&mut self.0);
        self
    }
    fn bytes(&mut self, b: &[u8]) -> &mut Self {
        b.encode(&mut self.0);
        self
    }
    fn bool(&mut self, b: bool) -> &mut Self {
        b.encode(&mut self.0);
        self
    }
    fn access_list(&mut self, l: &[AccessItem]) -> &mut Self {
        alloy_rlp::encode_list::<AccessItem, AccessItem>(l, &mut self.0);
        self
    }
    /// `type` (unless 0) || list header || items.
    fn finish(&self, tx_type: u8) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.0.len() + 10);
        if tx_type != 0 {
            out.put_u8(tx_type);
        }
        Header {
            list: true,
            payload_length: self.0.len(),
        }
        .encode(&mut out);
        out.extend_from_slice(&self.0);
        out
    }
}

/// Which bytes [`encode`] builds.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Form {
    Signing,
    Signed,
}

impl Tx {
    /// The committed sender of an unsigned type: the `from` (Scroll: the
    /// `sender`) its hash commits to. `None` for other types, and for
    /// Arbitrum's internal txs, whose hash commits to no sender.
    pub fn committed_sender(&self) -> Option<Address> {
        match self.chain.as_deref()? {
            ChainFields::OpDeposit(_) => self.from,
            ChainFields::ScrollL1Message(m) => m.sender.or(self.from),
            ChainFields::Arbitrum(_) if self.tx_type != 0x6a => self.from,
            _ => None,
        }
    }

    /// Whether the transaction carries a signature: r and s present and
    /// not both zero. Unsigned types report r = s = 0; that is no
    /// signature, not a bad one.
    pub fn has_signature(&self) -> bool {
        match (&self.r, &self.s) {
            (Some(r), Some(s)) => !(r.is_zero() && s.is_zero()),
            _ => false,
        }
    }
}

/// The signing hash of a transaction with chain fields.
pub(super) fn signing_hash(tx: &Tx, chain: &ChainFields) -> Result<B256, PayloadError> {
    Ok(keccak(&[&encode(tx, chain, Form::Signing)?]))
}

/// The trie encoding of a transaction with chain fields.
pub(super) fn signed_encoding(tx: &Tx, chain: &ChainFields) -> Result<Vec<u8>, PayloadError> {
    encode(tx, chain, Form::Signed)
}

fn encode(tx: &Tx, chain: &ChainFields, form: Form) -> Result<Vec<u8>, PayloadError> {
    let ty = tx.tx_type;
    let need = |field: &'static str| PayloadError::Missing(field, ty);
    let gas = || tx.gas.ok_or_else(|| need("gas"));
    let value = || tx.value.ok_or_else(|| need("value"));
    let from = || tx.from.ok_or_else(|| need("from"));
    let mut l = List::new(200 + tx.input.len());
    let unsigned = !matches!(chain, ChainFields::Celo(_));
    if unsigned && form == Form::Signing {
        return Err(PayloadError::Unsigned(ty));
    }
    match chain {
        ChainFields::Reported => return Err(PayloadError::NotReproducible(ty)),
        ChainFields::OpDeposit(d) => {
            if ty != 0x7e {
                return Err(PayloadError::UnsupportedType(ty));
            }
            let source_hash = d.source_hash.ok_or_else(|| need("sourceHash"))?;
            l.hash(&source_hash)
                .address(&from()?)
                .opt_address(&tx.to)
                .quantity(&d.mint.unwrap_or_default())
                .quantity(&value()?)
                .quantity(&gas()?)
                .bool(d.is_system_tx)
                .bytes(&tx.input);
        }
        ChainFields::ScrollL1Message(m) => {
            if ty != 0x7e {
                return Err(PayloadError::UnsupportedType(ty));
            }
            let queue_index = m.queue_index.ok_or_else(|| need("queueIndex"))?;
            let sender = m.sender.or(tx.from).ok_or_else(|| need("sender"))?;
            l.u64(queue_index)
                .quantity(&gas()?)
                .opt_address(&tx.to)
                .quantity(&value()?)
                .bytes(&tx.input)
                .address(&sender);
        }
        ChainFields::Arbitrum(a) => arbitrum(tx, a, &mut l)?,
        ChainFields::Celo(c) => celo(tx, c, form, &mut l)?,
    }
    Ok(l.finish(ty))
}

/// Arbitrum's unsigned types, in `arb_types.go`'s field order.
fn arbitrum(tx: &Tx, a: &ArbitrumFields, l: &mut List) -> Result<(), PayloadError> {
    let ty = tx.tx_type;
    let need = |field: &'static str| PayloadError::Missing(field, ty);
    let chain_id = tx.chain_id.ok_or_else(|| need("chainId"))?;
    let from = || tx.from.ok_or_else(|| need("from"));
    let gas = || tx.gas.ok_or_else(|| need("gas"));
    let value = || tx.value.ok_or_else(|| need("value"));
    let nonce = || tx.nonce.ok_or_else(|| need("nonce"));
    let fee_cap = || tx.max_fee_per_gas.ok_or_else(|| need("maxFeePerGas"));
    let request_id = || a.request_id.ok_or_else(|| need("requestId"));
    l.quantity(&chain_id);
    match ty {
        // ArbitrumDepositTx: chainId, L1RequestId, from, to, value.
        0x64 => {
            let to = tx.to.ok_or_else(|| need("to"))?;
            l.hash(&request_id()?)
                .address(&from()?)
                .address(&to)
                .quantity(&value()?);
        }
        // ArbitrumUnsignedTx: chainId, from, nonce, gasFeeCap, gas, to, value, data.
        0x65 => {
            l.address(&from()?)
                .u64(nonce()?)
                .quantity(&fee_cap()?)
                .quantity(&gas()?)
                .opt_address(&tx.to)
                .quantity(&value()?)
                .bytes(&tx.input);
        }
        // ArbitrumContractTx: chainId, requestId, from, gasFeeCap, gas, to, value, data.
        0x66 => {
            l.hash(&request_id()?)
                .address(&from()?)
                .quantity(&fee_cap()?)
                .quantity(&gas()?)
                .opt_address(&tx.to)
                .quantity(&value()?)
                .bytes(&tx.input);
        }
        // ArbitrumRetryTx: chainId, nonce, from, gasFeeCap, gas, to, value,
        // data, ticketId, refundTo, maxRefund, submissionFeeRefund.
        0x68 => {
            l.u64(nonce()?)
                .address(&from()?)
                .quantity(&fee_cap()?)
                .quantity(&gas()?)
                .opt_address(&tx.to)
                .quantity(&value()?)
                .bytes(&tx.input)
                .hash(&a.ticket_id.ok_or_else(|| need("ticketId"))?)
                .address(&a.refund_to.ok_or_else(|| need("refundTo"))?)
                .quantity(&a.max_refund.ok_or_else(|| need("maxRefund"))?)
                .quantity(
                    &a.submission_fee_refund
                        .ok_or_else(|| need("submissionFeeRefund"))?,
                );
        }
        // ArbitrumSubmitRetryableTx: chainId, requestId, from, l1BaseFee,
        // depositValue, gasFeeCap, gas, retryTo, retryValue, beneficiary,
        // maxSubmissionFee, feeRefundAddr (`refundTo`), retryData. Its JSON
        // `to`, `value` and `input` are derived (the ArbRetryableTx
        // precompile and its calldata), not hashed.
        0x69 => {
            l.hash(&request_id()?)
                .address(&from()?)
                .quantity(&a.l1_base_fee.ok_or_else(|| need("l1BaseFee"))?)
                .quantity(&a.deposit_value.ok_or_else(|| need("depositValue"))?)
                .quantity(&fee_cap()?)
                .quantity(&gas()?)
                .opt_address(&a.retry_to)
                .quantity(&a.retry_value.ok_or_else(|| need("retryValue"))?)
                .address(&a.beneficiary.ok_or_else(|| need("beneficiary"))?)
                .quantity(
                    &a.max_submission_fee
                        .ok_or_else(|| need("maxSubmissionFee"))?,
                )
                .address(&a.refund_to.ok_or_else(|| need("refundTo"))?)
                .bytes(a.retry_data.as_deref().ok_or_else(|| need("retryData"))?);
        }
        // ArbitrumInternalTx: chainId, data.
        0x6a => {
            l.bytes(&tx.input);
        }
        other => return Err(PayloadError::UnsupportedType(other)),
    }
    Ok(())
}

/// Celo's signed types: the signing payload, or with the signature the
/// trie encoding.
fn celo(tx: &Tx, c: &CeloFields, form: Form, l: &mut List) -> Result<(), PayloadError> {
    let ty = tx.tx_type;
    let need = |field: &'static str| PayloadError::Missing(field, ty);
    let nonce = tx.nonce.ok_or_else(|| need("nonce"))?;
    let gas = tx.gas.ok_or_else(|| need("gas"))?;
    let value = tx.value.ok_or_else(|| need("value"))?;
    let gateway_fee = c.gateway_fee.unwrap_or_default();
    if ty == 0 {
        // [nonce, gasPrice, gas, feeCurrency, gatewayFeeRecipient,
        //  gatewayFee, to, value, data] + EIP-155 [chainId, 0, 0] or [v, r, s].
        let v = tx.v.ok_or_else(|| need("v"))?;
        let price = tx.gas_price.ok_or_else(|| need("gasPrice"))?;
        l.u64(nonce)
            .quantity(&price)
            .quantity(&gas)
            .opt_address(&c.fee_currency)
            .opt_address(&c.gateway_fee_recipient)
            .quantity(&gateway_fee)
            .opt_address(&tx.to)
            .quantity(&value)
            .bytes(&tx.input);
        match form {
            Form::Signing => {
                if let Some(id) = Tx::eip155_chain_id(&v) {
                    l.quantity(&id).quantity(&U256::ZERO).quantity(&U256::ZERO);
                }
            }
            Form::Signed => {
                let r = tx.r.ok_or_else(|| need("r"))?;
                let s = tx.s.ok_or_else(|| need("s"))?;
                l.quantity(&v).quantity(&r).quantity(&s);
            }
        }
        return Ok(());
    }
    let chain_id = tx.chain_id.ok_or_else(|| need("chainId"))?;
    let tip = tx
        .max_priority_fee_per_gas
        .ok_or_else(|| need("maxPriorityFeePerGas"))?;
    let cap = tx.max_fee_per_gas.ok_or_else(|| need("maxFeePerGas"))?;
    l.quantity(&chain_id)
        .u64(nonce)
        .quantity(&tip)
        .quantity(&cap)
        .quantity(&gas);
    match ty {
        // CIP-42: ..., gas, feeCurrency, gatewayFeeRecipient, gatewayFee,
        // to, value, data, accessList.
        0x7c => {
            l.opt_address(&c.fee_currency)
                .opt_address(&c.gateway_fee_recipient)
                .quantity(&gateway_fee)
                .opt_address(&tx.to)
                .quantity(&value)
                .bytes(&tx.input)
                .access_list(&tx.access_list);
        }
        // CIP-64: ..., gas, to, value, data, accessList, feeCurrency;
        // CIP-66 adds maxFeeInFeeCurrency.
        0x7a | 0x7b => {
            l.opt_address(&tx.to)
                .quantity(&value)
                .bytes(&tx.input)
                .access_list(&tx.access_list)
                .opt_address(&c.fee_currency);
            if ty == 0x7a {
                l.quantity(
                    &c.max_fee_in_fee_currency
                        .ok_or_else(|| need("maxFeeInFeeCurrency"))?,
                );
            }
        }
        other => return Err(PayloadError::UnsupportedType(other)),
    }
    if form == Form::Signed {
        let parity = tx.typed_parity().ok_or_else(|| need("yParity"))?;
        let r = tx.r.ok_or_else(|| need("r"))?;
        let s = tx.s.ok_or_else(|| need("s"))?;
        l.quantity(&parity).quantity(&r).quantity(&s);
    }
    Ok(())
}
