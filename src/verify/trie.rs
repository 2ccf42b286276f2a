//! The root of an ordered Merkle-Patricia trie (key: RLP of the index),
//! as a block's transactions and receipts tries are built, computed in two
//! passes: every leaf node is encoded first and the large ones hashed
//! together ([`keccak4`](super::keccak4): four at a time where the CPU
//! can), then the branches and extensions above them, one by one. The
//! leaves are most of the hashing (a receipt with its bloom and logs is
//! several Keccak blocks; a branch is one node for up to 16 of them). Gives
//! exactly what `alloy_trie::root::ordered_trie_root_encoded` gives (tests
//! compare them); pure, no I/O.

use alloy_rlp::{EMPTY_STRING_CODE, Encodable, Header};

use super::keccak4::keccak256_many;
use crate::decode::B256;

/// The ordered trie root of `items`, each already encoded.
pub fn ordered_root<T: AsRef<[u8]>>(items: &[T]) -> B256 {
    if items.is_empty() {
        // The root of the empty trie: the hash of an empty string's RLP.
        return alloy_primitives::keccak256([EMPTY_STRING_CODE]).0;
    }
    // The keys in the trie's order (RLP of 1..=127, then of 0, then 128..),
    // as nibbles.
    let keys: Vec<Key> = sorted_indexes(items.len()).map(Key::of).collect();

    // Pass 1: where each key becomes a leaf, and the leaf's encoding.
    let mut leaves = Vec::with_capacity(keys.len());
    leaf_depths(&keys, 0, 0, &mut leaves);
    let mut buf =
        Vec::with_capacity(items.iter().map(|i| i.as_ref().len() + 12).sum::<usize>() + 16);
    let mut spans = Vec::with_capacity(keys.len());
    for &(k, depth) in &leaves {
        let start = buf.len();
        encode_leaf(&keys[k], depth, items[keys[k].index].as_ref(), &mut buf);
        spans.push(start..buf.len());
    }
    let big: Vec<usize> = (0..spans.len()).filter(|&i| spans[i].len() >= 32).collect();
    let inputs: Vec<&[u8]> = big.iter().map(|&i| &buf[spans[i].clone()]).collect();
    let mut hashes = vec![[0u8; 32]; inputs.len()];
    keccak256_many(&inputs, &mut hashes);
    let mut refs: Vec<NodeRef> = spans.iter().map(|s| NodeRef::Inline(s.clone())).collect();
    for (&i, h) in big.iter().zip(hashes) {
        refs[i] = NodeRef::Hash(h);
    }

    // Pass 2: the nodes above the leaves.
    let mut next_leaf = 0;
    let root = node(&keys, 0, &refs, &buf, &mut next_leaf);
    let mut out = Vec::new();
    match root {
        Built::Leaf(i) => match &refs[i] {
            NodeRef::Hash(h) => return *h,
            NodeRef::Inline(span) => out.extend_from_slice(&buf[span.clone()]),
        },
        Built::Node(encoded) => out = encoded,
    }
    alloy_primitives::keccak256(&out).0
}

/// The indexes 0..n in the order of their keys' bytes.
fn sorted_indexes(n: usize) -> impl Iterator<Item = usize> {
    (1..n.min(128)).chain(std::iter::once(0)).chain(128..n)
}

/// An index and its key's nibbles (the RLP of a 64-bit index is at most
/// 9 bytes).
#[derive(Clone, Copy)]
struct Key {
    index: usize,
    nibbles: [u8; 18],
    len: usize,
}

impl Key {
    fn of(index: usize) -> Key {
        // RLP of an integer: 0x80 for 0, the byte itself below 0x80, else
        // 0x80 + length and the big-endian bytes.
        let be = (index as u64).to_be_bytes();
        let skip = be.iter().take_while(|&&b| b == 0).count();
        let mut buf = [0u8; 9];
        let rlp: &[u8] = match index {
            0 => &[EMPTY_STRING_CODE],
            1..=0x7f => {
                buf[0] = index as u8;
                &buf[..1]
            }
            _ => {
                buf[0] = EMPTY_STRING_CODE + (8 - skip) as u8;
                buf[1..1 + 8 - skip].copy_from_slice(&be[skip..]);
                &buf[..1 + 8 - skip]
            }
        };
        let mut nibbles = [0u8; 18];
        for (j, b) in rlp.iter().enumerate() {
            nibbles[2 * j] = b >> 4;
            nibbles[2 * j + 1] = b & 0x0f;
        }
        Key {
            index,
            nibbles,
            len: 2 * rlp.len(),
        }
    }

    fn path(&self) -> &[u8] {
        &self.nibbles[..self.len]
    }
}

/// Nibbles the keys (sorted, two or more) share from `depth` on.
fn shared(keys: &[Key], depth: usize) -> usize {
    let (first, last) = (keys[0].path(), keys[keys.len() - 1].path());
    first[depth..]
        .iter()
        .zip(&last[depth..])
        .take_while(|(a, b)| a == b)
        .count()
}

/// The keys (sorted) split by their nibble at `depth`: each run's nibble
/// and range, in order. RLP keys are prefix-free, so every key has one.
fn runs(keys: &[Key], depth: usize) -> impl Iterator<Item = (u8, std::ops::Range<usize>)> + '_ {
    let mut start = 0;
    std::iter::from_fn(move || {
        if start == keys.len() {
            return None;
        }
        let nibble = keys[start].nibbles[depth];
        let len = keys[start..]
            .iter()
            .take_while(|k| k.nibbles[depth] == nibble)
            .count();
        let run = start..start + len;
        start += len;
        Some((nibble, run))
    })
}

/// Appends (key position, depth) of every leaf under `keys` (which start
/// at position `base` and share their first `depth` nibbles), in order.
fn leaf_depths(keys: &[Key], base: usize, depth: usize, out: &mut Vec<(usize, usize)>) {
    if keys.len() == 1 {
        out.push((base, depth));
        return;
    }
    let depth = depth + shared(keys, depth);
    for (_, run) in runs(keys, depth) {
        leaf_depths(&keys[run.clone()], base + run.start, depth + 1, out);
    }
}

/// Hex-prefix encoding of `nibbles` (Yellow Paper, appendix C): the flag
/// and, for an odd count, the first nibble in one byte, then the rest
/// packed two to a byte. Returns the buffer and how much of it is used.
fn hex_prefix(nibbles: &[u8], leaf: bool) -> ([u8; 10], usize) {
    let mut hp = [0u8; 10];
    let flag = if leaf { 2 } else { 0 };
    let odd = nibbles.len() % 2;
    hp[0] = (flag + odd as u8) << 4;
    let mut rest = nibbles;
    if odd == 1 {
        hp[0] |= nibbles[0];
        rest = &nibbles[1..];
    }
    for (j, pair) in rest.chunks(2).enumerate() {
        hp[1 + j] = pair[0] << 4 | pair[1];
    }
    (hp, 1 + rest.len() / 2)
}

/// A leaf node: `[hex-prefix(rest of key, leaf), value]`.
fn encode_leaf(key: &Key, depth: usize, value: &[u8], out: &mut Vec<u8>) {
    let (hp, len) = hex_prefix(&key.path()[depth..], true);
    let hp = &hp[..len];
    Header {
        list: true,
        payload_length: hp.length() + value.length(),
    }
    .encode(out);
    hp.encode(out);
    value.encode(out);
}

/// A node as its parent holds it: its encoding when shorter than 32 bytes,
/// else its hash.
enum NodeRef {
    Inline(std::ops::Range<usize>),
    Hash(B256),
}

/// What `node` built: a leaf of pass 1 (by position), or a node encoded
/// here.
enum Built {
    Leaf(usize),
    Node(Vec<u8>),
}

/// Appends how a parent holds `child`.
fn append_ref(child: &Built, refs: &[NodeRef], buf: &[u8], out: &mut Vec<u8>) {
    let hash;
    let inline: &[u8] = match child {
        Built::Leaf(i) => match &refs[*i] {
            NodeRef::Hash(h) => {
                out.push(EMPTY_STRING_CODE + 32);
                out.extend_from_slice(h);
                return;
            }
            NodeRef::Inline(span) => &buf[span.clone()],
        },
        Built::Node(encoded) if encoded.len() >= 32 => {
            hash = alloy_primitives::keccak256(encoded).0;
            out.push(EMPTY_STRING_CODE + 32);
            out.extend_from_slice(&hash);
            return;
        }
        Built::Node(encoded) => encoded,
    };
    out.extend_from_slice(inline);
}

/// Builds the node for `keys` (sorted, sharing their first `depth`
/// nibbles); leaves are taken from pass 1 in order.
fn node(keys: &[Key], depth: usize, refs: &[NodeRef], buf: &[u8], next_leaf: &mut usize) -> Built {
    if keys.len() == 1 {
        *next_leaf += 1;
        return Built::Leaf(*next_leaf - 1);
    }
    let shared = shared(keys, depth);
    let branch = {
        let at = depth + shared;
        let mut payload = Vec::with_capacity(17 * 33);
        let mut nibble = 0u8;
        for (n, run) in runs(keys, at) {
            while nibble < n {
                payload.push(EMPTY_STRING_CODE);
                nibble += 1;
            }
            let child = node(&keys[run], at + 1, refs, buf, next_leaf);
            append_ref(&child, refs, buf, &mut payload);
            nibble += 1;
        }
        while nibble < 17 {
            payload.push(EMPTY_STRING_CODE);
            nibble += 1;
        }
        list(payload)
    };
    if shared == 0 {
        return branch;
    }
    let mut payload = Vec::with_capacity(40);
    let (hp, len) = hex_prefix(&keys[0].path()[depth..depth + shared], false);
    hp[..len].encode(&mut payload);
    append_ref(&branch, refs, buf, &mut payload);
    list(payload)
}

fn list(payload: Vec<u8>) -> Built {
    let mut out = Vec::with_capacity(payload.len() + 3);
    Header {
        list: true,
        payload_length: payload.len(),
    }
    .encode(&mut out);
    out.extend_from_slice(&payload);
    Built::Node(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn alloy(items: &[Vec<u8>]) -> B256 {
        alloy_trie::root::ordered_trie_root_encoded(items).0
    }

    /// Sizes where the trie's shape changes: one leaf, the first branch,
    /// 16 and 17 keys under one nibble, the jump from one-byte to
    /// two-byte keys at 128, and from two to three bytes at 256.
    #[test]
    fn agrees_with_alloy_trie_on_every_shape() {
        for n in (0..=300).chain([1000, 4096]) {
            // Values of every kind: tiny (a leaf inline in its parent),
            // one byte below 0x80 (its own RLP), and receipt-sized.
            let items: Vec<Vec<u8>> = (0..n)
                .map(|i| match i % 5 {
                    0 => vec![],
                    1 => vec![(i % 128) as u8],
                    2 => vec![0xc0 | (i as u8 & 0x3f); 3],
                    3 => (0..40 + i % 300).map(|j| (i + j) as u8).collect(),
                    _ => vec![(i % 256) as u8; 700],
                })
                .collect();
            assert_eq!(ordered_root(&items), alloy(&items), "{n} items");
        }
    }

    /// Only tiny values: every leaf inline, so branches may be inline too.
    #[test]
    fn agrees_when_every_node_is_small() {
        for n in 0..=140 {
            let items: Vec<Vec<u8>> = (0..n).map(|i| vec![(i % 100) as u8]).collect();
            assert_eq!(ordered_root(&items), alloy(&items), "{n} items");
            let empty: Vec<Vec<u8>> = vec![vec![]; n];
            assert_eq!(ordered_root(&empty), alloy(&empty), "{n} empty items");
        }
    }

    proptest! {
        #[test]
        fn agrees_with_alloy_trie(items in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..200), 0..300)) {
            prop_assert_eq!(ordered_root(&items), alloy(&items));
        }
    }
}
