//! Keccak-256 of many independent inputs, four at a time: on x86_64 with
//! AVX2, four Keccak-f[1600] states live side by side in 256-bit registers
//! and one permutation advances all four (with AVX-512VL's rotate and
//! three-input logic where the CPU has them); elsewhere each input is
//! hashed alone by the scalar Keccak (XKCP's assembly, through alloy).
//! Used for the leaves of the ordered tries and the transactions' hashes,
//! most of the keccak a block's verification does. The result never
//! depends on which path ran (tests compare them); this file must not
//! decide what is hashed.

use crate::decode::B256;

/// Bytes absorbed per permutation by Keccak-256 (1600 - 2 x 256 bits).
#[cfg(target_arch = "x86_64")]
const RATE: usize = 136;

/// Blocks a message of `len` bytes takes, its padding included.
#[cfg(target_arch = "x86_64")]
fn blocks(len: usize) -> usize {
    len / RATE + 1
}

/// `keccak256(inputs[i])` into `out[i]`, for every `i`.
pub fn keccak256_many(inputs: &[&[u8]], out: &mut [B256]) {
    assert_eq!(inputs.len(), out.len(), "one output per input");
    #[cfg(target_arch = "x86_64")]
    if inputs.len() >= 4 && std::is_x86_feature_detected!("avx2") {
        // Grouped by length, so the four of a group take the same number of
        // permutations and none runs idle for long.
        let mut order: Vec<usize> = (0..inputs.len()).collect();
        order.sort_unstable_by_key(|&i| blocks(inputs[i].len()));
        let mut groups = order.chunks_exact(4);
        for g in &mut groups {
            let msgs = [inputs[g[0]], inputs[g[1]], inputs[g[2]], inputs[g[3]]];
            let hashes = if avx512() {
                // SAFETY: AVX-512F and VL were detected.
                unsafe { avx2::keccak256_x4_avx512(msgs) }
            } else {
                // SAFETY: AVX2 was detected just above.
                unsafe { avx2::keccak256_x4(msgs) }
            };
            for (k, &i) in g.iter().enumerate() {
                out[i] = hashes[k];
            }
        }
        for &i in groups.remainder() {
            out[i] = alloy_primitives::keccak256(inputs[i]).0;
        }
        return;
    }
    for (o, input) in out.iter_mut().zip(inputs) {
        *o = alloy_primitives::keccak256(input).0;
    }
}

/// AVX-512's rotate and three-input logic on the same 256-bit registers
/// (half the instructions of AVX2's shifts and ors).
#[cfg(target_arch = "x86_64")]
fn avx512() -> bool {
    std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512vl")
}

/// The last block of `msg` after Keccak's padding: the bytes after its
/// last full block, 0x01, zeros, and 0x80 in the block's last byte.
#[cfg(target_arch = "x86_64")]
fn last_block(msg: &[u8]) -> [u8; RATE] {
    let tail = &msg[(blocks(msg.len()) - 1) * RATE..];
    let mut block = [0u8; RATE];
    block[..tail.len()].copy_from_slice(tail);
    block[tail.len()] ^= 0x01;
    block[RATE - 1] ^= 0x80;
    block
}

#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    use super::{RATE, blocks, last_block};

    const RC: [u64; 24] = [
        0x0000000000000001,
        0x0000000000008082,
        0x800000000000808a,
        0x8000000080008000,
        0x000000000000808b,
        0x0000000080000001,
        0x8000000080008081,
        0x8000000000008009,
        0x000000000000008a,
        0x0000000000000088,
        0x0000000080008009,
        0x000000008000000a,
        0x000000008000808b,
        0x800000000000008b,
        0x8000000000008089,
        0x8000000000008003,
        0x8000000000008002,
        0x8000000000000080,
        0x000000000000800a,
        0x800000008000000a,
        0x8000000080008081,
        0x8000000000008080,
        0x0000000080000001,
        0x8000000080008008,
    ];

    /// ρ and π: `b[y, 2x + 3y] = rot(a[x, y], r[x, y])`, with the
    /// rotation `$rot!` of each instruction set.
    macro_rules! rho_pi {
        ($a:ident, $rot:ident) => {
            [
                $rot!($a[0], 0),
                $rot!($a[6], 44),
                $rot!($a[12], 43),
                $rot!($a[18], 21),
                $rot!($a[24], 14),
                $rot!($a[3], 28),
                $rot!($a[9], 20),
                $rot!($a[10], 3),
                $rot!($a[16], 45),
                $rot!($a[22], 61),
                $rot!($a[1], 1),
                $rot!($a[7], 6),
                $rot!($a[13], 25),
                $rot!($a[19], 8),
                $rot!($a[20], 18),
                $rot!($a[4], 27),
                $rot!($a[5], 36),
                $rot!($a[11], 10),
                $rot!($a[17], 15),
                $rot!($a[23], 56),
                $rot!($a[2], 62),
                $rot!($a[8], 55),
                $rot!($a[14], 39),
                $rot!($a[15], 41),
                $rot!($a[21], 2),
            ]
        };
    }

    #[inline(always)]
    unsafe fn rotl<const L: i32, const R: i32>(x: __m256i) -> __m256i {
        unsafe { _mm256_or_si256(_mm256_slli_epi64::<L>(x), _mm256_srli_epi64::<R>(x)) }
    }

    /// One Keccak-f[1600] on four states; `a[x + 5y]` holds lane (x, y)
    /// of each.
    #[target_feature(enable = "avx2")]
    unsafe fn permute(a: &mut [__m256i; 25]) {
        macro_rules! rot {
            ($x:expr, 0) => {
                $x
            };
            ($x:expr, $n:literal) => {
                rotl::<$n, { 64 - $n }>($x)
            };
        }
        for rc in RC {
            unsafe {
                // θ
                let c: [__m256i; 5] = std::array::from_fn(|x| {
                    _mm256_xor_si256(
                        _mm256_xor_si256(_mm256_xor_si256(a[x], a[x + 5]), a[x + 10]),
                        _mm256_xor_si256(a[x + 15], a[x + 20]),
                    )
                });
                for x in 0..5 {
                    let d = _mm256_xor_si256(c[(x + 4) % 5], rot!(c[(x + 1) % 5], 1));
                    for y in 0..5 {
                        a[x + 5 * y] = _mm256_xor_si256(a[x + 5 * y], d);
                    }
                }
                let b: [__m256i; 25] = rho_pi!(a, rot);
                // χ
                for y in 0..5 {
                    for x in 0..5 {
                        a[x + 5 * y] = _mm256_xor_si256(
                            b[x + 5 * y],
                            _mm256_andnot_si256(b[(x + 1) % 5 + 5 * y], b[(x + 2) % 5 + 5 * y]),
                        );
                    }
                }
                // ι
                a[0] = _mm256_xor_si256(a[0], _mm256_set1_epi64x(rc as i64));
            }
        }
    }

    /// [`permute`] with AVX-512VL: one rotate instruction instead of three,
    /// and θ's and χ's three-input logic in one instruction each.
    #[target_feature(enable = "avx2,avx512f,avx512vl")]
    unsafe fn permute_avx512(a: &mut [__m256i; 25]) {
        macro_rules! rot {
            ($x:expr, 0) => {
                $x
            };
            ($x:expr, $n:literal) => {
                _mm256_rol_epi64::<$n>($x)
            };
        }
        // a ^ b ^ c, and a ^ (!b & c), as truth tables of (a, b, c).
        const XOR3: i32 = 0x96;
        const CHI: i32 = 0xd2;
        for rc in RC {
            let c: [__m256i; 5] = std::array::from_fn(|x| {
                let t = _mm256_ternarylogic_epi64::<XOR3>(a[x], a[x + 5], a[x + 10]);
                _mm256_ternarylogic_epi64::<XOR3>(t, a[x + 15], a[x + 20])
            });
            for x in 0..5 {
                let (left, right) = (c[(x + 4) % 5], rot!(c[(x + 1) % 5], 1));
                for y in 0..5 {
                    a[x + 5 * y] = _mm256_ternarylogic_epi64::<XOR3>(a[x + 5 * y], left, right);
                }
            }
            let b: [__m256i; 25] = rho_pi!(a, rot);
            for y in 0..5 {
                for x in 0..5 {
                    a[x + 5 * y] = _mm256_ternarylogic_epi64::<CHI>(
                        b[x + 5 * y],
                        b[(x + 1) % 5 + 5 * y],
                        b[(x + 2) % 5 + 5 * y],
                    );
                }
            }
            a[0] = _mm256_xor_si256(a[0], _mm256_set1_epi64x(rc as i64));
        }
    }

    macro_rules! keccak256_x4 {
        ($(#[$doc:meta])* $name:ident, $permute:ident, $features:literal) => {
    $(#[$doc])*
    #[target_feature(enable = $features)]
    pub unsafe fn $name(msgs: [&[u8]; 4]) -> [[u8; 32]; 4] {
        let n = msgs.map(|m| blocks(m.len()));
        // Each message's last block, padded; past it, zeros.
        let pads = msgs.map(last_block);
        const ZEROS: [u8; RATE] = [0; RATE];
        let mut out = [[0u8; 32]; 4];
        unsafe {
            let mut a = [_mm256_setzero_si256(); 25];
            for block in 0..n.into_iter().max().unwrap_or(0) {
                let src: [&[u8]; 4] = std::array::from_fn(|k| match (block + 1).cmp(&n[k]) {
                    std::cmp::Ordering::Less => &msgs[k][block * RATE..(block + 1) * RATE],
                    std::cmp::Ordering::Equal => &pads[k][..],
                    std::cmp::Ordering::Greater => &ZEROS[..],
                });
                for (lane, state) in a.iter_mut().enumerate().take(RATE / 8) {
                    let w = src.map(|b| {
                        let mut word = [0u8; 8];
                        word.copy_from_slice(&b[lane * 8..lane * 8 + 8]);
                        u64::from_le_bytes(word) as i64
                    });
                    let v = _mm256_set_epi64x(w[3], w[2], w[1], w[0]);
                    *state = _mm256_xor_si256(*state, v);
                }
                $permute(&mut a);
                for k in 0..4 {
                    if n[k] == block + 1 {
                        let mut lanes = [[0u64; 4]; 4];
                        for (j, l) in lanes.iter_mut().enumerate() {
                            _mm256_storeu_si256(l.as_mut_ptr().cast(), a[j]);
                        }
                        for j in 0..4 {
                            out[k][8 * j..8 * j + 8].copy_from_slice(&lanes[j][k].to_le_bytes());
                        }
                    }
                }
            }
        }
        out
    }
        };
    }

    keccak256_x4!(
        /// Keccak-256 of four messages of any lengths.
        keccak256_x4, permute, "avx2"
    );
    keccak256_x4!(
        /// [`keccak256_x4`] with AVX-512VL's rotates and logic.
        keccak256_x4_avx512, permute_avx512, "avx2,avx512f,avx512vl"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn expected(inputs: &[Vec<u8>]) -> Vec<B256> {
        inputs
            .iter()
            .map(|i| alloy_primitives::keccak256(i).0)
            .collect()
    }

    fn many(inputs: &[Vec<u8>]) -> Vec<B256> {
        let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
        let mut out = vec![[0u8; 32]; inputs.len()];
        keccak256_many(&refs, &mut out);
        out
    }

    /// Every length around the block boundaries, where padding differs
    /// (0x01 and 0x80 in one byte at 135, a block of padding alone at 136).
    #[test]
    fn agrees_with_scalar_keccak_at_every_boundary() {
        let lengths: Vec<usize> = (0..=280).chain([407, 408, 409, 1000, 4096]).collect();
        let inputs: Vec<Vec<u8>> = lengths
            .iter()
            .map(|&n| (0..n).map(|i| (i * 31 + n) as u8).collect())
            .collect();
        assert_eq!(many(&inputs), expected(&inputs));
        // The same lengths again in groups of four that all differ, and
        // reversed, so each lane of the state meets every length.
        let rev: Vec<Vec<u8>> = inputs.iter().rev().cloned().collect();
        assert_eq!(many(&rev), expected(&rev));
    }

    /// Both four-way paths directly, lengths 0..=560 four at a time, each
    /// group rotated so every lane of the state meets every length.
    #[cfg(target_arch = "x86_64")]
    #[test]
    fn both_four_way_paths_agree_with_scalar_keccak() {
        // This machine and CI's have AVX2; without it only the scalar path
        // would have run above, so say so by failing.
        assert!(
            std::is_x86_feature_detected!("avx2"),
            "no AVX2: the four-way Keccak is not tested on this machine"
        );
        let msgs: Vec<Vec<u8>> = (0..=560usize)
            .map(|n| (0..n).map(|i| (i * 7 + n) as u8).collect())
            .collect();
        type FourWay<'a> = dyn Fn([&[u8]; 4]) -> [[u8; 32]; 4] + 'a;
        let check = |name: &str, f: &FourWay| {
            for group in msgs.chunks_exact(4) {
                for turn in 0..4 {
                    let m: [&[u8]; 4] = std::array::from_fn(|k| group[(k + turn) % 4].as_slice());
                    let got = f(m);
                    for k in 0..4 {
                        let want = alloy_primitives::keccak256(m[k]).0;
                        assert_eq!(got[k], want, "{name}: {} bytes in lane {k}", m[k].len());
                    }
                }
            }
        };
        // SAFETY: AVX2 asserted above.
        check("avx2", &|m| unsafe { avx2::keccak256_x4(m) });
        if avx512() {
            // SAFETY: AVX-512F and VL detected.
            check("avx512", &|m| unsafe { avx2::keccak256_x4_avx512(m) });
        } else {
            eprintln!("NOTE: no AVX-512 here: its four-way Keccak path was not tested");
        }
    }

    proptest! {
        #[test]
        fn agrees_with_scalar_keccak(inputs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..700), 0..23)) {
            prop_assert_eq!(many(&inputs), expected(&inputs));
        }
    }
}
