//! Hashers for maps whose keys already are (or carry) a good hash: ufids, and ukeys keyed by
//! the megaflow hash the datapath computed. The standard SipHash over a 512-byte megaflow key
//! cost more than the rest of recording a ukey; these cost one multiply.
//!
//! Not for keys an adversary picks freely: ufids and megaflow hashes come from our own
//! datapath (a megaflow's hash is CRC32-C of its masked words; a flood of colliding ones
//! degrades to a long probe in one map, it cannot corrupt anything).

use std::hash::{BuildHasherDefault, Hasher};

/// Mixes the integer written into it with one multiply (Fibonacci hashing), so that the high
/// bits hashbrown uses for its control bytes depend on every input bit.
#[derive(Debug, Default, Clone, Copy)]
pub struct MixHasher(u64);

impl Hasher for MixHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        // Only reached by keys that hash more than integers: fold them in 8 bytes at a time.
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    fn write_u32(&mut self, n: u32) {
        self.write_u64(u64::from(n));
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15)
            .rotate_left(29);
    }

    fn write_u128(&mut self, n: u128) {
        self.write_u64(n as u64 ^ (n >> 64) as u64);
    }
}

/// `BuildHasher` of [`MixHasher`].
pub type MixBuild = BuildHasherDefault<MixHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;
    use std::hash::BuildHasher;

    #[test]
    fn sequential_keys_spread_over_high_bits() {
        let b = MixBuild::default();
        let mut tops = std::collections::HashSet::new();
        for i in 0u128..1024 {
            tops.insert(b.hash_one((1u128 << 127) | i) >> 57);
        }
        assert!(tops.len() > 100, "{} of 128 top-7-bit values", tops.len());
        let mut m: HashMap<u128, u32, MixBuild> = HashMap::default();
        for i in 0..10_000u128 {
            m.insert(i << 3, i as u32);
        }
        assert!((0..10_000u128).all(|i| m[&(i << 3)] == i as u32));
    }
}
