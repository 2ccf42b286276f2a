//! The 2048-bit logs bloom of a block header: which addresses and topics
//! may have been logged in it. The rpc stage asks it whether a block whose
//! `eth_getLogs` answer came back empty could have held matching logs (a
//! lagging or load-balanced node answers "nothing" for blocks it has not
//! got). Pure: bytes in, bits out.

use super::keccak;

/// A header's `logsBloom`.
pub type Bloom = [u8; 256];

/// The three bits `item` (an address or a topic) sets, as (byte, mask).
fn bits(item: &[u8]) -> [(usize, u8); 3] {
    let h = keccak(&[item]);
    [0, 2, 4].map(|i| {
        let bit = ((usize::from(h[i]) << 8) | usize::from(h[i + 1])) & 2047;
        (255 - bit / 8, 1u8 << (bit % 8))
    })
}

/// Whether `item` may be in `bloom` (no false negatives).
pub fn bloom_may_contain(bloom: &Bloom, item: &[u8]) -> bool {
    bits(item)
        .iter()
        .all(|&(byte, mask)| bloom[byte] & mask != 0)
}

/// Adds `item` to `bloom`, as a node does for each log's address and topics.
pub fn bloom_add(bloom: &mut Bloom, item: &[u8]) {
    for (byte, mask) in bits(item) {
        bloom[byte] |= mask;
    }
}

/// [`bloom_add`] for the logs of many receipts, remembering each address's
/// and topic's bits: the same few contracts and event signatures recur in
/// a block, and each costs a keccak otherwise. One per recovery job.
#[derive(Default)]
pub struct BloomCache {
    addresses: std::collections::HashMap<[u8; 20], [(usize, u8); 3]>,
    topics: std::collections::HashMap<[u8; 32], [(usize, u8); 3]>,
}

impl BloomCache {
    /// Adds a log's address and topics to `bloom`.
    pub fn add_log(&mut self, bloom: &mut Bloom, address: &[u8; 20], topics: &[[u8; 32]]) {
        let set = |bloom: &mut Bloom, b: &[(usize, u8); 3]| {
            for &(byte, mask) in b {
                bloom[byte] |= mask;
            }
        };
        set(
            bloom,
            self.addresses
                .entry(*address)
                .or_insert_with(|| bits(address)),
        );
        for t in topics {
            set(bloom, self.topics.entry(*t).or_insert_with(|| bits(t)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_item_sets_at_most_three_bits_and_is_found_again() {
        // Yellow paper M3:2048: three bits (fewer when two coincide).
        // tests/it/get_logs.rs checks it against real receipts' blooms.
        let mut b = [0u8; 256];
        let addr = [0u8; 20];
        bloom_add(&mut b, &addr);
        assert!(bloom_may_contain(&b, &addr));
        assert!((1..=3).contains(&b.iter().map(|x| x.count_ones()).sum::<u32>()));
        assert!(!bloom_may_contain(&b, &[1u8; 32]));
        // The cache sets the same bits, the second time from memory.
        let mut cache = BloomCache::default();
        let (mut c, topic) = ([0u8; 256], [9u8; 32]);
        bloom_add(&mut b, &topic);
        cache.add_log(&mut c, &addr, &[topic]);
        cache.add_log(&mut c, &addr, &[topic]);
        assert_eq!(b, c);
    }
}
