//! PostgreSQL binary `COPY … FROM STDIN (FORMAT binary)` rows, for the few
//! column types our schema uses.
//!
//! Binary COPY is the cheapest way into PostgreSQL (no text parsing on the
//! server), which matters because the server shares the machine's cores
//! with sender recovery. sqlx sends raw COPY data but has no row encoder,
//! and the format is small and stable (see the PostgreSQL docs, "COPY",
//! "Binary Format"), so the encoder lives here. This module only builds
//! bytes; it never talks to the database.

use crate::decode::U256;

const SIGNATURE: &[u8] = b"PGCOPY\n\xff\r\n\0";

/// Microseconds between the Unix epoch and PostgreSQL's (2000-01-01).
const PG_EPOCH_OFFSET_SECS: i64 = 946_684_800;
/// The last second `TIMESTAMPTZ` holds, 294276-12-31 23:59:59 UTC, in Unix
/// seconds (PostgreSQL's `END_TIMESTAMP`, exclusive, is a second later).
const MAX_TIMESTAMPTZ_SECS: i64 = 9_224_318_015_999;

/// One COPY stream's bytes: header, rows, trailer; sent whole
/// ([`finish`](CopyBuf::finish)) or in pieces ([`piece`](CopyBuf::piece),
/// then [`sent`](CopyBuf::sent)) so that a large batch never sits in memory
/// whole, twice (here and in the connection's write buffer).
pub struct CopyBuf {
    buf: Vec<u8>,
    fields: i16,
    rows: usize,
}

impl CopyBuf {
    /// A buffer for rows of `fields` columns.
    pub fn new(fields: i16) -> CopyBuf {
        let mut buf = Vec::with_capacity(1 << 16);
        buf.extend_from_slice(SIGNATURE);
        buf.extend_from_slice(&0i32.to_be_bytes()); // flags
        buf.extend_from_slice(&0i32.to_be_bytes()); // header extension length
        CopyBuf {
            buf,
            fields,
            rows: 0,
        }
    }

    pub fn row(&mut self) -> &mut Self {
        self.buf.extend_from_slice(&self.fields.to_be_bytes());
        self.rows += 1;
        self
    }

    /// Rows started so far.
    pub fn rows(&self) -> usize {
        self.rows
    }

    fn field(&mut self, bytes: &[u8]) -> &mut Self {
        self.buf
            .extend_from_slice(&(bytes.len() as i32).to_be_bytes());
        self.buf.extend_from_slice(bytes);
        self
    }

    pub fn null(&mut self) -> &mut Self {
        self.buf.extend_from_slice(&(-1i32).to_be_bytes());
        self
    }

    pub fn i64(&mut self, v: i64) -> &mut Self {
        self.field(&v.to_be_bytes())
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.field(&v.to_be_bytes())
    }

    pub fn i16(&mut self, v: i16) -> &mut Self {
        self.field(&v.to_be_bytes())
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.field(&[v as u8])
    }

    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.field(v)
    }

    pub fn text(&mut self, v: &str) -> &mut Self {
        self.field(v.as_bytes())
    }

    /// `TIMESTAMPTZ` from Unix seconds.
    ///
    /// NULL past the year 294276, the last `TIMESTAMPTZ` holds (the
    /// exact seconds go in a `NUMERIC` beside it): never a wrapped or
    /// saturated (`infinity`) value.
    pub fn timestamp(&mut self, unix_secs: u64) -> &mut Self {
        match i64::try_from(unix_secs) {
            Ok(secs) if secs <= MAX_TIMESTAMPTZ_SECS => {
                self.i64((secs - PG_EPOCH_OFFSET_SECS) * 1_000_000)
            }
            _ => self.null(),
        }
    }

    /// `NUMERIC` holding a non-negative integer.
    pub fn numeric(&mut self, v: &U256) -> &mut Self {
        self.signed_numeric(false, v)
    }

    /// `NUMERIC` holding `-magnitude` when `negative`, else `magnitude`:
    /// its base-10000 digits written straight into the row.
    pub fn signed_numeric(&mut self, negative: bool, v: &U256) -> &mut Self {
        let mut groups = [0u16; MAX_GROUPS];
        let n = base10000_groups(v, &mut groups);
        // Trailing zero groups are implied by the weight.
        let last = groups[..n].iter().position(|&d| d != 0).unwrap_or(n);
        let ndigits = n - last;
        let weight = if ndigits == 0 { 0 } else { n as i16 - 1 };
        // Sign: 0x4000 negative, 0 positive (zero is never negative).
        let sign: u16 = if negative && ndigits > 0 { 0x4000 } else { 0 };
        let buf = &mut self.buf;
        buf.extend_from_slice(&(8 + 2 * ndigits as i32).to_be_bytes());
        buf.extend_from_slice(&(ndigits as i16).to_be_bytes());
        buf.extend_from_slice(&weight.to_be_bytes());
        buf.extend_from_slice(&sign.to_be_bytes());
        buf.extend_from_slice(&0i16.to_be_bytes()); // display scale
        for d in groups[last..n].iter().rev() {
            buf.extend_from_slice(&d.to_be_bytes());
        }
        self
    }

    /// `JSONB` from JSON text (binary format version 1).
    pub fn jsonb(&mut self, json: &str) -> &mut Self {
        let mut field = Vec::with_capacity(1 + json.len());
        field.push(1);
        field.extend_from_slice(json.as_bytes());
        self.field(&field)
    }

    pub fn opt_bytes(&mut self, v: Option<&[u8]>) -> &mut Self {
        match v {
            Some(v) => self.bytes(v),
            None => self.null(),
        }
    }

    /// The bytes encoded since the last [`sent`](Self::sent): the next
    /// piece of the stream, to send while the rest is encoded.
    pub fn piece(&self) -> &[u8] {
        &self.buf
    }

    /// The current [`piece`](Self::piece) was sent: forgets its bytes and
    /// keeps the buffer's capacity for the next.
    pub fn sent(&mut self) {
        self.buf.clear();
    }

    /// The stream's last piece: what was not sent yet, and the trailer.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(&(-1i16).to_be_bytes());
        self.buf
    }
}

/// Base-10000 digits a `U256` may need (it is below 10^78).
const MAX_GROUPS: usize = 20;

/// The base-10000 digits of `v`, least significant first, into `out`;
/// returns how many there are up to the most significant non-zero one (0
/// for zero). Schoolbook division by 10^16 on four u64 limbs; one u64
/// alone takes the short way.
fn base10000_groups(v: &U256, out: &mut [u16; MAX_GROUPS]) -> usize {
    let mut n = 0;
    if let Some(mut x) = v.to_u64() {
        while x != 0 {
            out[n] = (x % 10_000) as u16;
            x /= 10_000;
            n += 1;
        }
        return n;
    }
    let mut limbs = [0u64; 4];
    for (i, limb) in limbs.iter_mut().enumerate() {
        *limb = u64::from_be_bytes(v.0[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    }
    const CHUNK: u128 = 10_000_000_000_000_000;
    while limbs.iter().any(|&l| l != 0) {
        let mut rem: u128 = 0;
        for limb in limbs.iter_mut() {
            let cur = (rem << 64) | *limb as u128;
            *limb = (cur / CHUNK) as u64;
            rem = cur % CHUNK;
        }
        let mut r = rem as u64;
        for _ in 0..4 {
            out[n] = (r % 10_000) as u16;
            r /= 10_000;
            n += 1;
        }
    }
    while n > 0 && out[n - 1] == 0 {
        n -= 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The encoding as it was written before: from the decimal text.
    fn numeric_from_decimal(negative: bool, v: &U256) -> Vec<u8> {
        let dec = v.to_decimal();
        let digits: Vec<i16> = if dec == "0" {
            Vec::new()
        } else {
            let dec = dec.as_bytes();
            let head = dec.len() % 4;
            let group = |s: &[u8]| s.iter().fold(0i16, |acc, c| acc * 10 + (c - b'0') as i16);
            let mut out = Vec::new();
            if head > 0 {
                out.push(group(&dec[..head]));
            }
            out.extend(dec[head..].chunks(4).map(group));
            out
        };
        let ndigits = digits.iter().rposition(|&d| d != 0).map_or(0, |i| i + 1);
        let weight = digits.len() as i16 - 1;
        let mut field = Vec::new();
        field.extend_from_slice(&(8 + 2 * ndigits as i32).to_be_bytes());
        field.extend_from_slice(&(ndigits as i16).to_be_bytes());
        field.extend_from_slice(&(if ndigits == 0 { 0 } else { weight }).to_be_bytes());
        let sign: u16 = if negative && ndigits > 0 { 0x4000 } else { 0 };
        field.extend_from_slice(&sign.to_be_bytes());
        field.extend_from_slice(&0i16.to_be_bytes());
        for d in &digits[..ndigits] {
            field.extend_from_slice(&d.to_be_bytes());
        }
        field
    }

    fn numeric_field(negative: bool, v: &U256) -> Vec<u8> {
        let mut buf = CopyBuf::new(1);
        let header = buf.buf.len();
        buf.signed_numeric(negative, v);
        buf.buf[header..].to_vec()
    }

    #[test]
    fn numeric_groups() {
        let groups = |v: &U256| {
            let mut out = [0u16; MAX_GROUPS];
            let n = base10000_groups(v, &mut out);
            out[..n].iter().rev().copied().collect::<Vec<u16>>()
        };
        assert_eq!(groups(&U256::ZERO), Vec::<u16>::new());
        assert_eq!(groups(&U256::from_u64(12345)), vec![1, 2345]);
        assert_eq!(groups(&U256::from_u64(100_000_000)), vec![1, 0, 0]);
        assert_eq!(groups(&U256([0xff; 32])).len(), MAX_GROUPS);
    }

    #[test]
    fn numeric_fields_match_the_decimal_text() {
        let mut values = vec![U256::ZERO, U256([0xff; 32])];
        for shift in 0..256 {
            let mut b = [0u8; 32];
            b[31 - shift / 8] = 1 << (shift % 8);
            values.push(U256(b));
        }
        // Powers of ten and their neighbours, across the u64 boundary.
        let mut ten = U256::from_u64(1);
        for _ in 0..77 {
            values.push(ten);
            let mut t = [0u64; 4];
            let mut carry = 0u128;
            for i in (0..4).rev() {
                let limb = u64::from_be_bytes(ten.0[i * 8..i * 8 + 8].try_into().unwrap());
                let cur = limb as u128 * 10 + carry;
                t[i] = cur as u64;
                carry = cur >> 64;
            }
            for (i, limb) in t.iter().enumerate() {
                ten.0[i * 8..i * 8 + 8].copy_from_slice(&limb.to_be_bytes());
            }
            // 10^k - 1 where the lowest byte allows it (all nines).
            let mut below = ten;
            if below.0[31] > 0 {
                below.0[31] -= 1;
                values.push(below);
            }
        }
        let mut rng = fastrand::Rng::with_seed(28);
        for _ in 0..2000 {
            let mut b = [0u8; 32];
            let len = rng.usize(0..=32);
            for x in &mut b[32 - len..] {
                *x = rng.u8(..);
            }
            values.push(U256(b));
        }
        for v in &values {
            for negative in [false, true] {
                assert_eq!(
                    numeric_field(negative, v),
                    numeric_from_decimal(negative, v),
                    "{v:?} negative {negative}"
                );
            }
        }
    }
}
