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

/// One COPY stream's bytes: header, rows, trailer.
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

    /// `NUMERIC` holding `-magnitude` when `negative`, else `magnitude`.
    pub fn signed_numeric(&mut self, negative: bool, v: &U256) -> &mut Self {
        let digits = base10000_digits(v);
        let mut field = Vec::with_capacity(8 + 2 * digits.len());
        // Trailing zero groups are implied by the weight.
        let ndigits = digits.iter().rposition(|&d| d != 0).map_or(0, |i| i + 1);
        let weight = digits.len() as i16 - 1;
        field.extend_from_slice(&(ndigits as i16).to_be_bytes());
        field.extend_from_slice(&(if ndigits == 0 { 0 } else { weight }).to_be_bytes());
        // Sign: 0x4000 negative, 0 positive (zero is never negative).
        let sign: u16 = if negative && ndigits > 0 { 0x4000 } else { 0 };
        field.extend_from_slice(&sign.to_be_bytes());
        field.extend_from_slice(&0i16.to_be_bytes()); // display scale
        for d in &digits[..ndigits] {
            field.extend_from_slice(&d.to_be_bytes());
        }
        self.field(&field)
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

    /// The finished stream.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(&(-1i16).to_be_bytes());
        self.buf
    }
}

/// Base-10000 digits, most significant first (empty for zero).
fn base10000_digits(v: &U256) -> Vec<i16> {
    let dec = v.to_decimal();
    if dec == "0" {
        return Vec::new();
    }
    let dec = dec.as_bytes();
    let head = dec.len() % 4;
    let mut out = Vec::with_capacity(dec.len() / 4 + 1);
    let group = |s: &[u8]| s.iter().fold(0i16, |acc, c| acc * 10 + (c - b'0') as i16);
    if head > 0 {
        out.push(group(&dec[..head]));
    }
    for chunk in dec[head..].chunks(4) {
        out.push(group(chunk));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_groups() {
        assert_eq!(base10000_digits(&U256::ZERO), Vec::<i16>::new());
        assert_eq!(base10000_digits(&U256::from_u64(12345)), vec![1, 2345]);
        assert_eq!(
            base10000_digits(&U256::from_u64(100_000_000)),
            vec![1, 0, 0]
        );
    }
}
