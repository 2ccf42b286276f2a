//! Quantities and hex: the one set of rules for every `0x` string the
//! project reads, from any source (block headers, transactions, receipts,
//! heads). A quantity accepts leading zeros, odd digit counts and a bare
//! `0x` as zero, as real nodes send them; data must have an even digit
//! count; fixed-size values must have exactly their length. Errors name the
//! field and quote the (untrusted) value, cut short. No I/O, no allocation
//! beyond the parsed value.

/// A 256-bit unsigned quantity, big-endian. RLP integers are its bytes with
/// leading zeros removed ([`U256::minimal`]).
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct U256(pub [u8; 32]);

impl U256 {
    pub const ZERO: U256 = U256([0; 32]);

    pub fn from_u64(v: u64) -> U256 {
        let mut b = [0u8; 32];
        b[24..].copy_from_slice(&v.to_be_bytes());
        U256(b)
    }

    /// Big-endian bytes without leading zeros (empty for zero): the RLP
    /// integer encoding.
    pub fn minimal(&self) -> &[u8] {
        let first = self.0.iter().position(|&b| b != 0).unwrap_or(32);
        &self.0[first..]
    }

    pub fn is_zero(&self) -> bool {
        self.0 == [0; 32]
    }

    pub fn to_u64(&self) -> Option<u64> {
        if self.0[..24].iter().any(|&b| b != 0) {
            return None;
        }
        Some(u64::from_be_bytes(self.0[24..].try_into().unwrap()))
    }

    /// Decimal digits, for display and PostgreSQL `NUMERIC`.
    pub fn to_decimal(&self) -> String {
        // Schoolbook division by 10^19 on four u64 limbs.
        let mut limbs = [0u64; 4];
        for (i, limb) in limbs.iter_mut().enumerate() {
            *limb = u64::from_be_bytes(self.0[i * 8..i * 8 + 8].try_into().unwrap());
        }
        const BASE: u128 = 10_000_000_000_000_000_000;
        let mut parts = Vec::new();
        while limbs.iter().any(|&l| l != 0) {
            let mut rem: u128 = 0;
            for limb in limbs.iter_mut() {
                let cur = (rem << 64) | *limb as u128;
                *limb = (cur / BASE) as u64;
                rem = cur % BASE;
            }
            parts.push(rem as u64);
        }
        match parts.split_last() {
            None => "0".to_string(),
            Some((most, rest)) => {
                let mut s = most.to_string();
                for p in rest.iter().rev() {
                    s.push_str(&format!("{p:019}"));
                }
                s
            }
        }
    }
}

impl std::fmt::Debug for U256 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "0x{}", const_hex::encode(self.minimal()))
    }
}

/// A malformed field in a JSON-RPC object. Absent fields are not errors
/// here; they are `None` and judged by whoever needs them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("not a JSON object: {0}")]
    Json(String),
    #[error("field {field}: {problem}: {value:?}")]
    Field {
        field: &'static str,
        problem: &'static str,
        value: String,
    },
    #[error("missing field {0}")]
    Missing(&'static str),
}

pub(super) fn bad(field: &'static str, problem: &'static str, value: &[u8]) -> DecodeError {
    // The value is untrusted text: shown lossily, cut on a character boundary.
    let mut value = String::from_utf8_lossy(value).into_owned();
    if value.len() > 80 {
        let cut = (0..=80)
            .rev()
            .find(|&i| value.is_char_boundary(i))
            .unwrap_or(0);
        value.truncate(cut);
        value.push('…');
    }
    DecodeError::Field {
        field,
        problem,
        value,
    }
}

fn strip_0x<'a>(field: &'static str, s: &'a [u8]) -> Result<&'a [u8], DecodeError> {
    s.strip_prefix(b"0x")
        .or_else(|| s.strip_prefix(b"0X"))
        .ok_or_else(|| bad(field, "expected 0x-prefixed hex", s))
}

/// A hex quantity. Accepts leading zeros (zero-padded r/s), odd digit
/// counts, and `0x` alone as zero.
pub fn parse_u256(
    field: &'static str,
    s: &(impl AsRef<[u8]> + ?Sized),
) -> Result<U256, DecodeError> {
    let s = s.as_ref();
    let digits = strip_0x(field, s)?;
    let digits = &digits[digits
        .iter()
        .position(|&c| c != b'0')
        .unwrap_or(digits.len())..];
    if digits.len() > 64 {
        return Err(bad(field, "quantity exceeds 256 bits", s));
    }
    if digits.len() <= 16 {
        // Fees, gas, nonces, values, v: most quantities fit a u64. No branch
        // per digit: one on digit-or-letter mispredicts on real hex.
        let (mut v, mut invalid) = (0u64, 0u8);
        for &c in digits {
            let nibble = HEX_VALUE[usize::from(c)];
            invalid |= nibble;
            v = (v << 4) | u64::from(nibble & 0x0f);
        }
        return if invalid > 0x0f {
            Err(bad(field, "invalid hex digit", s))
        } else {
            Ok(U256::from_u64(v))
        };
    }
    // Longer ones (r, s, some values): right-align the digits in 64 zeros and
    // decode them as 32 bytes in one vectorised pass (a nibble loop here was
    // a third of all decoding time).
    let mut padded = [b'0'; 64];
    padded[64 - digits.len()..].copy_from_slice(digits);
    let mut out = [0u8; 32];
    const_hex::decode_to_slice(padded, &mut out).map_err(|_| bad(field, "invalid hex digit", s))?;
    Ok(U256(out))
}

pub fn parse_u64(field: &'static str, s: &(impl AsRef<[u8]> + ?Sized)) -> Result<u64, DecodeError> {
    parse_u256(field, s)?
        .to_u64()
        .ok_or_else(|| bad(field, "quantity exceeds 64 bits", s.as_ref()))
}

/// Each byte's value as a hex digit, or 0xff if it is not one.
const HEX_VALUE: [u8; 256] = {
    let mut table = [0xff; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// Hex data of any length (even digit count).
pub fn parse_bytes(
    field: &'static str,
    s: &(impl AsRef<[u8]> + ?Sized),
) -> Result<Vec<u8>, DecodeError> {
    let s = s.as_ref();
    const_hex::decode(strip_0x(field, s)?).map_err(|_| bad(field, "invalid hex data", s))
}

/// Hex data of exactly `N` bytes (addresses, hashes).
pub fn parse_fixed<const N: usize>(
    field: &'static str,
    s: &(impl AsRef<[u8]> + ?Sized),
) -> Result<[u8; N], DecodeError> {
    let s = s.as_ref();
    let mut out = [0u8; N];
    const_hex::decode_to_slice(strip_0x(field, s)?, &mut out).map_err(|_| {
        if s.len() == 2 + 2 * N {
            bad(field, "invalid hex digit", s)
        } else {
            bad(field, "wrong length", s)
        }
    })?;
    Ok(out)
}

pub(super) fn opt<T>(
    field: &'static str,
    s: Option<&[u8]>,
    parse: impl Fn(&'static str, &[u8]) -> Result<T, DecodeError>,
) -> Result<Option<T>, DecodeError> {
    s.map(|s| parse(field, s)).transpose()
}
pub fn hex0x(bytes: &[u8]) -> String {
    format!("0x{}", const_hex::encode(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantities_accept_padding_stripping_and_odd_lengths() {
        let a = parse_u256(
            "r",
            "0x00000000000000000000000000000000000000000000000000000000000abc",
        )
        .unwrap();
        let b = parse_u256("r", "0xabc").unwrap();
        assert_eq!(a, b);
        assert_eq!(b.minimal(), &[0x0a, 0xbc]);
        assert_eq!(parse_u256("v", "0x").unwrap(), U256::ZERO);
        assert!(parse_u256("v", "12").is_err());
        assert!(parse_u256("v", "0xzz").is_err());
        assert!(parse_u256("v", &format!("0x1{}", "0".repeat(64))).is_err());
        // Every digit position, both cases, against a reference parse.
        let digits = "0123456789abcdefABCDEF0123456789abcdef0123456789ABCDEF0123456789";
        for len in 0..=64 {
            let text = format!("0x{}", &digits[..len]);
            let want = (0..len).fold([0u8; 32], |mut acc, i| {
                let nib = u8::from_str_radix(&digits[i..=i], 16).unwrap();
                let pos = len - 1 - i; // nibble index from the right
                acc[31 - pos / 2] |= nib << ((pos % 2) * 4);
                acc
            });
            assert_eq!(parse_u256("x", &text).unwrap().0, want, "{text}");
        }
        // A bad digit anywhere, including in the padded middle.
        for bad in [
            "0xg",
            "0x1g",
            &format!("0x{}g{}", "1".repeat(40), "2".repeat(20)),
        ] {
            let err = parse_u256("r", bad).unwrap_err().to_string();
            assert!(err.contains("invalid hex digit"), "{bad}: {err}");
        }
    }

    #[test]
    fn u64_quantities_are_exact_and_bounded() {
        assert_eq!(parse_u64("nonce", "0x0").unwrap(), 0);
        assert_eq!(parse_u64("nonce", "0x").unwrap(), 0);
        assert_eq!(parse_u64("nonce", "0x00ff").unwrap(), 255);
        assert_eq!(parse_u64("nonce", "0xFFFFFFFFFFFFFFFF").unwrap(), u64::MAX);
        assert_eq!(
            parse_u64("nonce", &format!("0x{}1", "0".repeat(70))).unwrap(),
            1
        );
        let too_big = parse_u64("nonce", "0x10000000000000000").unwrap_err();
        assert!(too_big.to_string().contains("exceeds 64 bits"), "{too_big}");
        let bad = parse_u64("nonce", "0x1x").unwrap_err();
        assert!(bad.to_string().contains("invalid hex digit"), "{bad}");
        let bad = parse_u64("nonce", "0x1234567890abcdefx").unwrap_err();
        assert!(bad.to_string().contains("invalid hex digit"), "{bad}");
    }

    #[test]
    fn quoted_bad_values_are_cut_on_a_character_boundary() {
        // 79 ASCII bytes, then a 3-byte character across the 80-byte cut.
        let value = format!("0x{}€€", "1".repeat(77));
        let err = parse_u256("value", &value).unwrap_err().to_string();
        assert!(err.contains(&format!("0x{}…", "1".repeat(77))), "{err}");
    }

    #[test]
    fn decimal_rendering_is_exact() {
        assert_eq!(U256::ZERO.to_decimal(), "0");
        assert_eq!(
            U256::from_u64(u64::MAX).to_decimal(),
            "18446744073709551615"
        );
        let max = U256([0xff; 32]);
        assert_eq!(
            max.to_decimal(),
            "115792089237316195423570985008687907853269984665640564039457584007913129639935"
        );
        let ten_pow_19 = parse_u256("x", "0x8ac7230489e80000").unwrap();
        assert_eq!(ten_pow_19.to_decimal(), "10000000000000000000");
    }
}
