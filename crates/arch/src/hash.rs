//! A hasher for maps keyed by addresses and small ids: std's SipHash, made to resist
//! flooding by untrusted keys, was a twentieth of translating a module (its lookups of block
//! labels and return sites), where the keys are addresses kerf chose or read from an image.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// Addresses are already well mixed in their low bits; a multiply is all the hashing they
/// need. Several words (a tuple key) are folded one after the other; one word alone hashes
/// as `(n ^ n >> 29) * φ`.
#[derive(Clone, Copy, Debug, Default)]
pub struct AddrHasher(u64);

impl AddrHasher {
    fn fold(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(26) ^ n ^ (n >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

impl Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.fold(n as u64);
    }
    fn write_u32(&mut self, n: u32) {
        self.fold(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.fold(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.fold(n as u64);
    }
}

/// A `HashMap` with [`AddrHasher`] (`AddrMap::default()` makes one).
pub type AddrMap<K, V> = HashMap<K, V, BuildHasherDefault<AddrHasher>>;
/// A `HashSet` with [`AddrHasher`].
pub type AddrSet<K> = HashSet<K, BuildHasherDefault<AddrHasher>>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::{BuildHasher, Hash};

    fn hash<T: Hash>(t: &T) -> u64 {
        BuildHasherDefault::<AddrHasher>::default().hash_one(t)
    }

    #[test]
    fn one_word_is_a_multiply_and_pairs_differ_by_order() {
        let n = 0x7f12_3456_7890u64;
        assert_eq!(hash(&n), (n ^ (n >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15));
        assert_ne!(hash(&(1u64, 2u64)), hash(&(2u64, 1u64)));
        assert_ne!(hash(&(1u64, 2u64)), hash(&2u64));
        let mut m: AddrMap<(u64, u32), u8> = AddrMap::default();
        m.insert((1, 2), 3);
        assert_eq!(m.get(&(1, 2)), Some(&3));
    }
}
