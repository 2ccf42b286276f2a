//! A one-pass reader for transaction and receipt objects in the shape nodes
//! send: an object of hex strings, `null`s and flags, with the access,
//! blob-hash and authorization lists, and a receipt's logs and their topics,
//! as arrays; and for the batch answers they come in (blocks with their
//! header fields, receipt lists), each transaction or receipt skipped over
//! and kept as its text. It returns exactly the [`WireTx`], [`WireReceipt`]
//! or [`BlockWire`] that serde_json would build from the same text, or
//! declines (`None`) and lets serde_json read the text and give its own
//! answer or error.
//!
//! It must never accept text that serde_json rejects, nor read accepted
//! text differently: the tests below compare the two on every fixture
//! transaction and on every one-byte corruption of several of them. So it
//! declines anything outside the plain shape: escapes, numbers, nested
//! values under unknown keys, duplicate keys, trailing commas.
//!
//! Why it exists: decoding is the largest cost of the recovery path after
//! keccak, and serde_json was 55 of the 76 million instructions of decoding
//! the 4,492 fixture transactions (about 50 tokens each, most of them
//! short). This reader finds each string's end 16 bytes at a time and
//! matches keys on their bytes; decoding now takes 46 million. It does no
//! hex parsing (that is [`Tx::from_wire`](super::Tx)'s) and allocates only
//! the lists it returns. Receipts, read the same way, took 6% of the
//! indexer's instructions through serde_json on the backfill bench (four
//! logs each, every log a dozen strings).

use super::block::{BlockWire, TxTexts, WireWithdrawal};
use super::receipt::{WireLog, WireReceipt};
use super::tx::{WireAccessItem, WireAuth, WireTx};

/// Reads `text` as one transaction object, or declines.
pub(super) fn tx(text: &str) -> Option<WireTx<'_>> {
    whole(text, |c| {
        let mut w = WireTx::default();
        let mut seen = Seen(0);
        c.object(|c, key| {
            let (bit, slot) = match key {
                b"hash" => (1 << 0, &mut w.hash),
                b"type" => (1 << 1, &mut w.tx_type),
                b"blockNumber" => (1 << 2, &mut w.block_number),
                b"transactionIndex" => (1 << 3, &mut w.transaction_index),
                b"chainId" => (1 << 4, &mut w.chain_id),
                b"nonce" => (1 << 5, &mut w.nonce),
                b"gasPrice" => (1 << 6, &mut w.gas_price),
                b"maxPriorityFeePerGas" => (1 << 7, &mut w.max_priority_fee_per_gas),
                b"maxFeePerGas" => (1 << 8, &mut w.max_fee_per_gas),
                b"maxFeePerBlobGas" => (1 << 9, &mut w.max_fee_per_blob_gas),
                b"gas" => (1 << 10, &mut w.gas),
                b"to" => (1 << 11, &mut w.to),
                b"value" => (1 << 12, &mut w.value),
                // `data` is serde's alias of `input`: the same field.
                b"input" | b"data" => (1 << 13, &mut w.input),
                b"v" => (1 << 14, &mut w.v),
                b"yParity" => (1 << 15, &mut w.y_parity),
                b"r" => (1 << 16, &mut w.r),
                b"s" => (1 << 17, &mut w.s),
                b"from" => (1 << 18, &mut w.from),
                b"blockHash" => (1 << 22, &mut w.block_hash),
                b"accessList" => {
                    seen.first(1 << 19)?;
                    w.access_list = c.opt_array(access_item)?;
                    return Some(());
                }
                b"blobVersionedHashes" => {
                    seen.first(1 << 20)?;
                    w.blob_versioned_hashes = c.opt_array(Cursor::string)?;
                    return Some(());
                }
                b"authorizationList" => {
                    seen.first(1 << 21)?;
                    w.authorization_list = c.opt_array(authorization)?;
                    return Some(());
                }
                // Chain-specific fields are serde_json's to read (`chain_tx`).
                _ if super::chain_tx::is_chain_key(key) => return None,
                _ => return c.unknown(),
            };
            seen.first(bit)?;
            *slot = c.opt_string()?;
            Some(())
        })?;
        Some(w)
    })
}

/// Reads `text` as one receipt object, or declines.
pub(super) fn receipt(text: &str) -> Option<WireReceipt<'_>> {
    whole(text, |c| {
        let mut w = WireReceipt::default();
        let mut seen = Seen(0);
        c.object(|c, key| {
            let (bit, slot) = match key {
                b"blockHash" => (1 << 0, &mut w.block_hash),
                b"blockNumber" => (1 << 1, &mut w.block_number),
                b"transactionHash" => (1 << 2, &mut w.transaction_hash),
                b"transactionIndex" => (1 << 3, &mut w.transaction_index),
                b"type" => (1 << 4, &mut w.tx_type),
                b"status" => (1 << 5, &mut w.status),
                b"root" => (1 << 6, &mut w.root),
                b"logsBloom" => (1 << 7, &mut w.logs_bloom),
                b"gasUsed" => (1 << 8, &mut w.gas_used),
                b"cumulativeGasUsed" => (1 << 9, &mut w.cumulative_gas_used),
                b"effectiveGasPrice" => (1 << 10, &mut w.effective_gas_price),
                b"contractAddress" => (1 << 11, &mut w.contract_address),
                b"depositNonce" => (1 << 12, &mut w.deposit_nonce),
                b"depositReceiptVersion" => (1 << 13, &mut w.deposit_receipt_version),
                b"l1Fee" => (1 << 15, &mut w.l1_fee),
                b"l1GasUsed" => (1 << 16, &mut w.l1_gas_used),
                b"l1GasPrice" => (1 << 17, &mut w.l1_gas_price),
                b"gasUsedForL1" => (1 << 18, &mut w.gas_used_for_l1),
                b"logs" => {
                    seen.first(1 << 14)?;
                    w.logs = c.opt_array(log)?;
                    return Some(());
                }
                _ => return c.unknown(),
            };
            seen.first(bit)?;
            *slot = c.opt_string()?;
            Some(())
        })?;
        Some(w)
    })
}

fn log<'a>(c: &mut Cursor<'a>) -> Option<WireLog<'a>> {
    let mut l = WireLog::default();
    let mut seen = Seen(0);
    c.object(|c, key| {
        let (bit, slot) = match key {
            b"address" => (1 << 0, &mut l.address),
            b"data" => (1 << 1, &mut l.data),
            b"logIndex" => (1 << 2, &mut l.log_index),
            b"blockNumber" => (1 << 3, &mut l.block_number),
            b"blockHash" => (1 << 4, &mut l.block_hash),
            b"transactionHash" => (1 << 5, &mut l.transaction_hash),
            b"transactionIndex" => (1 << 6, &mut l.transaction_index),
            b"topics" => {
                // A list, never `null` (serde_json: "invalid type: null").
                seen.first(1 << 7)?;
                l.topics = c.array(Cursor::string)?;
                return Some(());
            }
            _ => return c.unknown(),
        };
        seen.first(bit)?;
        *slot = c.opt_string()?;
        Some(())
    })?;
    Some(l)
}

/// One answer of an `eth_getBlockReceipts` batch as [`block_receipt_lists`]
/// reads it: its `id`, and where each receipt of its result lies in the
/// text (`None` for a `null` or absent result).
pub(crate) type ReceiptList = (Option<u64>, Option<Vec<std::ops::Range<usize>>>);

/// Reads `text` as a batch of `eth_getBlockReceipts` answers, each receipt
/// skipped over as JSON and kept as its byte range; or declines, as for an
/// answer with an `error`, and lets serde_json read it. Accepts only text
/// serde_json reads as the same answers with the same raw receipts.
pub(crate) fn block_receipt_lists(text: &str) -> Option<Vec<ReceiptList>> {
    let answers = answers(text, |c| {
        c.opt_array(|c| {
            c.skip_ws();
            let start = c.at;
            c.skip_value(0)?;
            Some(start..c.at)
        })
    })?;
    Some(
        answers
            .into_iter()
            .map(|(id, result)| (id, result.flatten()))
            .collect(),
    )
}

/// Reads `text` as a batch of JSON-RPC answers, each its `id` and its
/// `result` read by `result` (`None` when absent), or declines: an answer
/// with an `error` is serde_json's to read (and the batch's failure), and
/// so is any other shape than the plain one.
fn answers<'a, T>(
    text: &'a str,
    mut result: impl FnMut(&mut Cursor<'a>) -> Option<T>,
) -> Option<Vec<(Option<u64>, Option<T>)>> {
    whole(text, |c| {
        c.array(|c| {
            let (mut id, mut value) = (None, None);
            let mut seen = Seen(0);
            c.object(|c, key| match key {
                b"id" => {
                    seen.first(1)?;
                    id = match c.peek()? {
                        b'n' => c.null().map(|()| None)?,
                        _ => Some(c.u64()?),
                    };
                    Some(())
                }
                b"result" => {
                    seen.first(2)?;
                    value = Some(result(c)?);
                    Some(())
                }
                // `null` is no error.
                b"error" => {
                    seen.first(4)?;
                    c.null()
                }
                _ => c.skip_value(0),
            })?;
            Some((id, value))
        })
    })
}

/// One answer of an `eth_getBlockByNumber` batch as [`block_answers`]
/// reads it: its id, and its result as serde_json reads a field that keeps
/// a present `null` apart from an absent one (`Some(None)` for `null`).
pub(crate) type BlockAnswer<'a> = (Option<u64>, Option<Option<BlockWire<'a>>>);

/// Reads `text` as a batch of `eth_getBlockByNumber` answers: each block's
/// header fields by name, its withdrawals, and each transaction skipped
/// over and kept as its text; or declines, as for an answer with an
/// `error`, and lets serde_json read it. Accepts only text serde_json reads
/// as the same answers with the same blocks.
pub(crate) fn block_answers(text: &str) -> Option<Vec<BlockAnswer<'_>>> {
    answers(text, |c| match c.peek()? {
        b'n' => c.null().map(|()| None),
        _ => block(c, text).map(Some),
    })
}

/// One block object of `text` at the cursor, as serde_json reads a
/// [`BlockWire`]: any value under a key it has no field for, a string or
/// `null` under each it has, each at most once.
fn block<'a>(c: &mut Cursor<'a>, text: &'a str) -> Option<BlockWire<'a>> {
    let mut b = BlockWire::default();
    let mut seen = Seen(0);
    c.object(|c, key| {
        let (bit, slot) = match key {
            b"number" => (1 << 0, &mut b.number),
            b"hash" => (1 << 1, &mut b.hash),
            b"parentHash" => (1 << 2, &mut b.parent_hash),
            b"timestamp" => (1 << 3, &mut b.timestamp),
            b"logsBloom" => (1 << 4, &mut b.logs_bloom),
            b"sha3Uncles" => (1 << 5, &mut b.sha3_uncles),
            b"miner" => (1 << 6, &mut b.miner),
            b"stateRoot" => (1 << 7, &mut b.state_root),
            b"transactionsRoot" => (1 << 8, &mut b.transactions_root),
            b"receiptsRoot" => (1 << 9, &mut b.receipts_root),
            b"difficulty" => (1 << 10, &mut b.difficulty),
            b"gasLimit" => (1 << 11, &mut b.gas_limit),
            b"gasUsed" => (1 << 12, &mut b.gas_used),
            b"extraData" => (1 << 13, &mut b.extra_data),
            b"mixHash" => (1 << 14, &mut b.mix_hash),
            b"nonce" => (1 << 15, &mut b.nonce),
            b"auraStep" => (1 << 16, &mut b.aura_step),
            b"auraSeal" => (1 << 17, &mut b.aura_seal),
            b"baseFeePerGas" => (1 << 18, &mut b.base_fee_per_gas),
            b"withdrawalsRoot" => (1 << 19, &mut b.withdrawals_root),
            b"blobGasUsed" => (1 << 20, &mut b.blob_gas_used),
            b"excessBlobGas" => (1 << 21, &mut b.excess_blob_gas),
            b"parentBeaconBlockRoot" => (1 << 22, &mut b.parent_beacon_block_root),
            b"requestsHash" => (1 << 23, &mut b.requests_hash),
            b"extDataHash" => (1 << 24, &mut b.ext_data_hash),
            b"extDataGasUsed" => (1 << 25, &mut b.ext_data_gas_used),
            b"blockGasCost" => (1 << 26, &mut b.block_gas_cost),
            b"l1BlockNumber" => (1 << 29, &mut b.l1_block_number),
            b"withdrawals" => {
                seen.first(1 << 27)?;
                b.withdrawals = c.opt_array(withdrawal)?;
                return Some(());
            }
            b"transactions" => {
                seen.first(1 << 28)?;
                let texts = c.opt_array(|c| {
                    c.skip_ws();
                    let start = c.at;
                    c.skip_value(0)?;
                    // Both ends are at ASCII bytes of `text`.
                    text.get(start..c.at)
                })?;
                b.transactions = texts.map(TxTexts);
                return Some(());
            }
            _ => return c.skip_value(0),
        };
        seen.first(bit)?;
        *slot = c.opt_str()?;
        Some(())
    })?;
    Some(b)
}

fn withdrawal<'a>(c: &mut Cursor<'a>) -> Option<WireWithdrawal<'a>> {
    let mut w = WireWithdrawal::default();
    let mut seen = Seen(0);
    c.object(|c, key| {
        let (bit, slot) = match key {
            b"index" => (1 << 0, &mut w.index),
            b"validatorIndex" => (1 << 1, &mut w.validator_index),
            b"address" => (1 << 2, &mut w.address),
            b"amount" => (1 << 3, &mut w.amount),
            _ => return c.skip_value(0),
        };
        seen.first(bit)?;
        *slot = c.opt_str()?;
        Some(())
    })?;
    Some(w)
}

/// Nesting a skipped value may have; deeper declines (serde_json stops at
/// 128, and this reader recurses on the stack).
const MAX_DEPTH: u32 = 64;

fn access_item<'a>(c: &mut Cursor<'a>) -> Option<WireAccessItem<'a>> {
    let (mut address, mut storage_keys) = (None, None);
    let mut seen = Seen(0);
    c.object(|c, key| match key {
        b"address" => {
            seen.first(1)?;
            address = Some(c.string()?);
            Some(())
        }
        b"storageKeys" => {
            seen.first(2)?;
            storage_keys = Some(c.array(Cursor::string)?);
            Some(())
        }
        _ => c.unknown(),
    })?;
    Some(WireAccessItem {
        // serde_json: "missing field `address`"; let it say so.
        address: address?,
        storage_keys: storage_keys.unwrap_or_default(),
    })
}

fn authorization<'a>(c: &mut Cursor<'a>) -> Option<WireAuth<'a>> {
    let mut a = WireAuth::default();
    let mut seen = Seen(0);
    c.object(|c, key| {
        let (bit, slot) = match key {
            b"chainId" => (1 << 0, &mut a.chain_id),
            b"address" => (1 << 1, &mut a.address),
            b"nonce" => (1 << 2, &mut a.nonce),
            b"yParity" => (1 << 3, &mut a.y_parity),
            b"v" => (1 << 4, &mut a.v),
            b"r" => (1 << 5, &mut a.r),
            b"s" => (1 << 6, &mut a.s),
            _ => return c.unknown(),
        };
        seen.first(bit)?;
        *slot = c.opt_string()?;
        Some(())
    })?;
    Some(a)
}

/// Reads all of `text` with `read`: declines where `read` does, or where
/// anything but whitespace follows what it read.
fn whole<'a, T>(text: &'a str, read: impl FnOnce(&mut Cursor<'a>) -> Option<T>) -> Option<T> {
    let mut c = Cursor {
        text: text.as_bytes(),
        at: 0,
    };
    let out = read(&mut c)?;
    c.skip_ws();
    (c.at == c.text.len()).then_some(out)
}

/// Fields already read in one object, one bit each: serde_json rejects a
/// repeated field (`input` and its alias `data` are one field), so a
/// repeat declines.
struct Seen(u32);

impl Seen {
    fn first(&mut self, bit: u32) -> Option<()> {
        if self.0 & bit != 0 {
            return None;
        }
        self.0 |= bit;
        Some(())
    }
}

struct Cursor<'a> {
    text: &'a [u8],
    at: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\t' | b'\r') = self.text.get(self.at) {
            self.at += 1;
        }
    }

    #[inline]
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.text.get(self.at).copied()
    }

    #[inline]
    fn eat(&mut self, byte: u8) -> Option<()> {
        (self.peek()? == byte).then(|| self.at += 1)
    }

    /// A string without escapes or control characters: the bytes between
    /// its quotes, as serde_json lends them to a `&[u8]` field. (serde_json
    /// takes control characters in such a field, and the hex parsers then
    /// reject them; declining here leads to that same error.)
    #[inline]
    fn string(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let rest = &self.text[self.at..];
        let end = find_special(rest)?;
        if rest[end] != b'"' {
            return None;
        }
        self.at += end + 1;
        Some(&rest[..end])
    }

    fn null(&mut self) -> Option<()> {
        self.literal(b"null")
    }

    /// `null` or a string, as serde_json reads an `Option<&[u8]>`.
    #[inline]
    fn opt_string(&mut self) -> Option<Option<&'a [u8]>> {
        match self.peek()? {
            b'"' => self.string().map(Some),
            b'n' => self.null().map(|()| None),
            _ => None,
        }
    }

    /// `null` or a string, as serde_json reads an `Option<&str>`.
    #[inline]
    fn opt_str(&mut self) -> Option<Option<&'a str>> {
        // Its bytes lie between two quotes of text that was a `str`, and
        // hold no escape: they are that text's own characters.
        self.opt_string()?.map(std::str::from_utf8).transpose().ok()
    }

    /// The value of a key no field takes. serde_json skips any value
    /// there; this reader takes `null`, strings and flags (a log's
    /// `removed`) only.
    fn unknown(&mut self) -> Option<()> {
        match self.peek()? {
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            _ => self.opt_string().map(|_| ()),
        }
    }

    /// Exactly `word` (what follows it is the caller's to check).
    fn literal(&mut self, word: &[u8]) -> Option<()> {
        self.skip_ws();
        self.text[self.at..]
            .starts_with(word)
            .then(|| self.at += word.len())
    }

    /// `{ "key": value, ... }`; `field` reads each value.
    fn object(&mut self, mut field: impl FnMut(&mut Self, &'a [u8]) -> Option<()>) -> Option<()> {
        self.sequence(b'{', b'}', |c| {
            let key = c.string()?;
            c.eat(b':')?;
            field(c, key)
        })
    }

    /// `[ item, ... ]`.
    fn array<T>(&mut self, mut item: impl FnMut(&mut Self) -> Option<T>) -> Option<Vec<T>> {
        let mut out = Vec::new();
        self.sequence(b'[', b']', |c| {
            out.push(item(c)?);
            Some(())
        })?;
        Some(out)
    }

    /// `open`, then entries read by `entry` and separated by commas (none
    /// trailing), then `close`: what objects and arrays share.
    fn sequence(
        &mut self,
        open: u8,
        close: u8,
        mut entry: impl FnMut(&mut Self) -> Option<()>,
    ) -> Option<()> {
        self.eat(open)?;
        if self.eat(close).is_some() {
            return Some(());
        }
        loop {
            entry(self)?;
            match self.peek()? {
                b',' => self.at += 1,
                b if b == close => {
                    self.at += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// Any JSON value, skipped: strings without escapes, numbers,
    /// literals, and objects and arrays of them nested at most
    /// [`MAX_DEPTH`] deep.
    fn skip_value(&mut self, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        match self.peek()? {
            b'"' => self.string().map(|_| ()),
            b'{' => self.object(|c, _| c.skip_value(depth + 1)),
            b'[' => self.sequence(b'[', b']', |c| c.skip_value(depth + 1)),
            b'n' => self.null(),
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// A JSON number: `-`, then `0` or digits not led by `0`, then an
    /// optional fraction and exponent.
    fn number(&mut self) -> Option<()> {
        self.skip_ws();
        let t = self.text;
        let mut at = self.at;
        if t.get(at) == Some(&b'-') {
            at += 1;
        }
        let digits = |at: &mut usize| {
            let start = *at;
            while t.get(*at).is_some_and(u8::is_ascii_digit) {
                *at += 1;
            }
            *at > start
        };
        match t.get(at)? {
            b'0' => at += 1,
            b'1'..=b'9' => {
                digits(&mut at);
            }
            _ => return None,
        }
        if t.get(at) == Some(&b'.') {
            at += 1;
            digits(&mut at).then_some(())?;
        }
        if let Some(b'e' | b'E') = t.get(at) {
            at += 1;
            if let Some(b'+' | b'-') = t.get(at) {
                at += 1;
            }
            digits(&mut at).then_some(())?;
        }
        self.at = at;
        Some(())
    }

    /// An unsigned integer that fits a `u64`, digits only.
    fn u64(&mut self) -> Option<u64> {
        self.skip_ws();
        let start = self.at;
        self.number()?;
        let digits = &self.text[start..self.at];
        if digits.len() > 1 && digits[0] == b'0' {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    }

    /// `null` or an array, as serde_json reads an `Option<Vec<T>>`.
    fn opt_array<T>(&mut self, item: impl FnMut(&mut Self) -> Option<T>) -> Option<Option<Vec<T>>> {
        match self.peek()? {
            b'[' => self.array(item).map(Some),
            b'n' => self.null().map(|()| None),
            _ => None,
        }
    }
}

/// Where the first `"`, `\\` or control character (below 0x20) is in `s`:
/// the end of a JSON string, or what this reader declines inside one.
/// The bytes after a string are JSON text too, so the search runs in whole
/// 16-byte blocks through the text and only its last few bytes go one by one.
fn find_special(s: &[u8]) -> Option<usize> {
    // SAFETY: the build targets SSE2 (every x86_64 CPU has it).
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    return unsafe { find_special_sse2(s) };
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
    return find_special_bytewise(s);
}

fn find_special_bytewise(s: &[u8]) -> Option<usize> {
    s.iter().position(|&b| b == b'"' || b == b'\\' || b < 0x20)
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[target_feature(enable = "sse2")]
fn find_special_sse2(s: &[u8]) -> Option<usize> {
    use std::arch::x86_64::*;
    let quote = _mm_set1_epi8(b'"' as i8);
    let backslash = _mm_set1_epi8(b'\\' as i8);
    let control_max = _mm_set1_epi8(0x1f);
    let mut at = 0;
    while at + 16 <= s.len() {
        // SAFETY: `at + 16 <= s.len()`, and the load has no alignment need.
        let v = unsafe { _mm_loadu_si128(s.as_ptr().add(at).cast()) };
        let control = _mm_cmpeq_epi8(_mm_min_epu8(v, control_max), v);
        let delimiter = _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash));
        let mask = _mm_movemask_epi8(_mm_or_si128(delimiter, control)) as u32;
        if mask != 0 {
            return Some(at + mask.trailing_zeros() as usize);
        }
        at += 16;
    }
    find_special_bytewise(&s[at..]).map(|i| at + i)
}

/// Every one-byte corruption of `text` the reader's tests try: each byte
/// replaced by each of `swaps`, each byte cut, every prefix, and a space
/// put before each byte. `text` is ASCII.
#[cfg(test)]
pub(crate) fn corruptions(text: &str, swaps: &[u8]) -> Vec<String> {
    let text = text.as_bytes();
    let mut out: Vec<Vec<u8>> = Vec::new();
    for at in 0..text.len() {
        for &b in swaps {
            let mut v = text.to_vec();
            v[at] = b;
            out.push(v);
        }
        let mut cut = text.to_vec();
        cut.remove(at);
        out.push(cut);
        out.push(text[..at].to_vec());
        let mut spaced = text.to_vec();
        spaced.insert(at, b' ');
        out.push(spaced);
    }
    out.into_iter()
        .map(|v| String::from_utf8(v).expect("ASCII text"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::value::RawValue;
    use std::io::Read;

    /// The transaction objects of `tests/fixtures/transactions.jsonl.gz`,
    /// as the text each line holds them in.
    fn fixture_txs() -> Vec<String> {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/transactions.jsonl.gz"
        );
        let mut text = String::new();
        flate2::read::GzDecoder::new(std::fs::File::open(path).expect("fixture"))
            .read_to_string(&mut text)
            .expect("gzip");
        #[derive(Deserialize)]
        struct Line<'a> {
            #[serde(borrow)]
            tx: &'a RawValue,
        }
        text.lines()
            .map(|l| {
                serde_json::from_str::<Line>(l)
                    .expect("line")
                    .tx
                    .get()
                    .to_string()
            })
            .collect()
    }

    fn serde(text: &str) -> Result<WireTx<'_>, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The contract: what the scan accepts, serde_json reads the same way.
    fn agrees<'a, T>(text: &'a str, scan: impl Fn(&'a str) -> Option<T>) -> bool
    where
        T: Deserialize<'a> + PartialEq + std::fmt::Debug,
    {
        match scan(text) {
            None => false,
            Some(fast) => {
                assert_eq!(
                    serde_json::from_str::<T>(text).ok(),
                    Some(fast),
                    "scan and serde_json differ on {text:?}"
                );
                true
            }
        }
    }

    fn check(text: &str) -> bool {
        agrees(text, tx)
    }

    #[test]
    fn every_fixture_transaction_is_read_as_serde_json_reads_it() {
        let txs = fixture_txs();
        assert_eq!(txs.len(), 4492);
        for t in &txs {
            assert!(check(t), "the plain shape was declined: {t}");
        }
    }

    #[test]
    fn corrupted_transactions_are_declined_or_read_as_serde_json_reads_them() {
        // One of each kind, under 2,500 bytes: legacy (pre-155, 155,
        // creation), types 1-4 with and without access lists, blobs,
        // authorizations.
        let txs = fixture_txs();
        let picks = [0, 1, 2, 6, 8, 30, 127, 171, 176, 179, 4456];
        let swaps = b"\"\\,:{}[] \n0xnlu\x01\x7f";
        let (mut tried, mut accepted) = (0, 0);
        for &i in &picks {
            for v in corruptions(&txs[i], swaps) {
                tried += 1;
                accepted += usize::from(check(&v));
            }
        }
        // Whitespace between tokens and changed letters inside strings keep
        // the shape; broken structure does not. Both kinds must be many.
        assert!(
            accepted > tried / 4 && accepted < tried * 3 / 4,
            "{accepted} of {tried}"
        );
    }

    #[test]
    fn outside_the_plain_shape_serde_json_decides() {
        let declined = [
            // `data` is an alias of `input`: serde_json says duplicate field.
            r#"{"input":"0x","data":"0x"}"#,
            r#"{"r":"0x1","r":"0x1"}"#,
            // An escape in a key, which serde_json unescapes and matches.
            r#"{"h\u0061sh":"0x01"}"#,
            // Values this reader does not take, under unknown keys.
            r#"{"isSystemTx":false,"l1Fee":12}"#,
            r#"{"extra":{"a":"b"}}"#,
            // Chain-specific fields, which `chain_tx` reads from serde_json's.
            r#"{"type":"0x7e","sourceHash":"0x01"}"#,
            r#"{"queueIndex":"0x1","sender":"0x02"}"#,
            r#"{"feeCurrency":null}"#,
            // Trailing comma, trailing text, a number where hex belongs.
            r#"{"nonce":"0x1",}"#,
            r#"{"nonce":"0x1"} x"#,
            r#"{"nonce":1}"#,
            r#"{"accessList":[{"storageKeys":[]}]}"#,
            "{\"from\":\"0x\x01\"}",
        ];
        for text in declined {
            assert!(tx(text).is_none(), "accepted {text}");
        }
        // serde_json still reads the ones it can.
        let hash = serde(r#"{"h\u0061sh":"0x01"}"#).expect("serde_json reads it");
        assert_eq!(hash.hash, Some(&b"0x01"[..]));
        assert!(serde(r#"{"isSystemTx":false,"l1Fee":12}"#).is_ok());
        // A flag is a boolean (op-geth) or a quantity (anvil), nothing else.
        for (text, want) in [
            (r#"{"isSystemTx":true}"#, Some(true)),
            (r#"{"isSystemTx":"0x1"}"#, Some(true)),
            (r#"{"isSystemTx":"0x0"}"#, Some(false)),
            (r#"{"isSystemTx":null}"#, None),
            (r#"{}"#, None),
        ] {
            assert_eq!(serde(text).unwrap().is_system_tx, want, "{text}");
        }
        for text in [r#"{"isSystemTx":"0x2"}"#, r#"{"isSystemTx":1}"#] {
            assert!(serde(text).is_err(), "{text}");
        }
        // A chain field is hex like every other: a number there is refused.
        assert!(serde(r#"{"mint":12}"#).is_err());
        assert!(serde(r#"{"input":"0x","data":"0x"}"#).is_err());

        // Pretty-printed, nulls, empty lists: the plain shape.
        let pretty = "{\n  \"to\" : null,\n  \"accessList\" : [ ],\n  \"input\":\"0x00\"\r\n}\n";
        assert!(check(pretty));
        assert_eq!(
            tx(pretty).and_then(|w| w.access_list).map(|l| l.len()),
            Some(0)
        );
    }

    /// Every receipt object of the fixtures (Ethereum's receipt sets, and
    /// the chains' receipts: Arbitrum, OP Mainnet, Polygon, zkSync), as
    /// `(file, text)`.
    fn fixture_receipts() -> Vec<(String, String)> {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures");
        let mut files: Vec<std::path::PathBuf> = ["receipts", "chains"]
            .iter()
            .flat_map(|d| std::fs::read_dir(format!("{dir}/{d}")).expect("fixture dir"))
            .map(|e| e.expect("entry").path())
            .filter(|p| {
                let name = p.file_name().unwrap().to_string_lossy();
                p.starts_with(format!("{dir}/receipts")) || name.contains("receipt")
            })
            .collect();
        files.sort();
        let mut out = Vec::new();
        for path in files {
            let mut text = String::new();
            let file = std::fs::File::open(&path).expect("fixture");
            if path.extension().is_some_and(|e| e == "gz") {
                flate2::read::GzDecoder::new(file).read_to_string(&mut text)
            } else {
                std::io::BufReader::new(file).read_to_string(&mut text)
            }
            .expect("read");
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            let raws: Vec<&RawValue> = match text.trim_start().starts_with('[') {
                true => serde_json::from_str(&text).expect("a list"),
                false => vec![serde_json::from_str(&text).expect("an object")],
            };
            out.extend(raws.iter().map(|r| (name.clone(), r.get().to_owned())));
        }
        out
    }

    fn serde_receipt(text: &str) -> Result<WireReceipt<'_>, serde_json::Error> {
        serde_json::from_str(text)
    }

    fn check_receipt(text: &str) -> bool {
        agrees(text, receipt)
    }

    #[test]
    fn every_fixture_receipt_is_read_as_serde_json_reads_it() {
        let receipts = fixture_receipts();
        let mut declined = Vec::new();
        for (file, text) in &receipts {
            if !check_receipt(text) {
                declined.push(file.as_str());
            }
        }
        assert!(receipts.len() > 200, "{} receipts", receipts.len());
        // Only zkSync's receipt carries nested values under its own keys
        // (`l2ToL1Logs`), which serde_json reads.
        assert_eq!(declined, ["zksync-receipt-e56c1190.json"]);
        let (_, zksync) = receipts
            .iter()
            .find(|(f, _)| f.starts_with("zksync"))
            .unwrap();
        assert!(serde_receipt(zksync).is_ok());
    }

    #[test]
    fn corrupted_receipts_are_declined_or_read_as_serde_json_reads_them() {
        // A receipt with three logs (topics, data, `removed`), one with
        // none and a created contract, OP's deposit receipt.
        let receipts = fixture_receipts();
        let pick = |file: &str, want: &dyn Fn(&str) -> bool| {
            receipts
                .iter()
                .find(|(f, t)| f == file && t.len() < 4000 && want(t))
                .map(|(_, t)| t.clone())
                .unwrap_or_else(|| panic!("no such receipt in {file}"))
        };
        let picks = [
            pick("mainnet-17000000.json.gz", &|t| {
                t.matches("logIndex").count() == 3
            }),
            pick("mainnet-18000000.json.gz", &|t| {
                t.contains("\"logs\": []") || t.contains("\"logs\":[]")
            }),
            pick("optimism-receipt-2bc7cb46.json", &|_| true),
        ];
        let swaps = b"\"\\,:{}[] \n0xntf\x01";
        let (mut tried, mut accepted) = (0, 0);
        for text in &picks {
            for v in corruptions(text, swaps) {
                tried += 1;
                accepted += usize::from(check_receipt(&v));
            }
        }
        assert!(
            accepted > tried / 4 && accepted < tried * 3 / 4,
            "{accepted} of {tried}"
        );
    }

    #[test]
    fn receipts_outside_the_plain_shape_are_left_to_serde_json() {
        for text in [
            // Topics are a list; `null` is serde_json's error to give.
            r#"{"logs":[{"address":"0x01","topics":null}]}"#,
            r#"{"status":"0x1","status":"0x1"}"#,
            r#"{"logs":[],"logs":[]}"#,
            r#"{"logs":[{"data":"0x","data":"0x"}]}"#,
            // A flag that is not one, nested values, numbers.
            r#"{"logs":[{"removed":fals}]}"#,
            r#"{"logs":[{"removed":truex}]}"#,
            r#"{"l2ToL1Logs":[]}"#,
            r#"{"l1FeeScalar":0.684}"#,
            r#"{"logs":[{"topics":["0x01",]}]}"#,
            // The L1 costs it keeps: each once, each a string.
            r#"{"l1Fee":"0x1","l1Fee":"0x1"}"#,
            r#"{"gasUsedForL1":"0x0","gasUsedForL1":"0x0"}"#,
            r#"{"gasUsedForL1":12}"#,
        ] {
            assert!(receipt(text).is_none(), "accepted {text}");
        }
        // Flags, nulls and OP's decimal strings under other keys are the
        // plain shape; a missing `logs` is `None`, as serde_json has it.
        for text in [
            r#"{"logs":[{"removed":false,"topics":[]}],"timeboosted":true}"#,
            r#"{"logs":null,"l1FeeScalar":"0.684","to":null}"#,
            r#"{"status":"0x0"}"#,
            r#"{"l1Fee":"0x105d4b2024","l1GasUsed":"0x800","l1GasPrice":"0x5d749a07e","logs":[]}"#,
            r#"{"gasUsedForL1":"0x113076","l1BlockNumber":"0x105fbf6","l1Fee":null}"#,
        ] {
            assert!(check_receipt(text), "declined {text}");
        }
    }

    #[test]
    fn the_block_search_finds_what_the_bytewise_search_finds() {
        let mut rng = fastrand::Rng::with_seed(7);
        let alphabet = b"0123456789abcdefx\"\\\x00\x1f\x20\x7f\x80\xff";
        for len in 0..80 {
            for _ in 0..200 {
                let s: Vec<u8> = (0..len)
                    .map(|_| {
                        if rng.u8(..) < 8 {
                            alphabet[rng.usize(..alphabet.len())]
                        } else {
                            b'a' + rng.u8(..6)
                        }
                    })
                    .collect();
                assert_eq!(find_special(&s), find_special_bytewise(&s), "{s:?}");
            }
        }
    }
}
