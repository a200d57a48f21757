//! The lookup table an indirect transfer in the code cache searches (see
//! [`crate::x86_64::probe`]): 2^16 sets of two ways, each way an original address and the
//! cache address of that block's indirect entry. The set is the target's low 16 bits, which
//! a flag-free `movzx` takes. kerf fills it; the target only reads it. An empty way holds
//! original address 0, which no target has.

/// Sets in the table.
pub const SETS: usize = 1 << 16;
/// Ways per set.
pub const WAYS: usize = 2;
/// Bytes of one set (two 16-byte ways).
pub const SET_BYTES: u64 = 32;
/// Bytes of the whole table.
pub const TABLE_BYTES: u64 = SETS as u64 * SET_BYTES;

/// The set an original address falls in.
pub fn set_of(target: u64) -> usize {
    (target & 0xffff) as usize
}

/// kerf's copy of the table, and where each entry went.
#[derive(Clone, Debug)]
pub struct Table {
    ways: Vec<[(u64, u64); WAYS]>,
    /// Entries that found both ways of their set taken: indirect transfers to them leave the
    /// cache (counted as escapes).
    pub crowded: Vec<u64>,
    pub entries: usize,
}

impl Default for Table {
    fn default() -> Self {
        Table { ways: vec![[(0, 0); WAYS]; SETS], crowded: Vec::new(), entries: 0 }
    }
}

/// Where in the table a write went: the byte offset of the way's pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Placed {
    pub offset: u64,
}

impl Table {
    /// Add `orig -> entry`. An address already present keeps its first entry (`None`), as
    /// does a full set (recorded in `crowded`).
    pub fn insert(&mut self, orig: u64, entry: u64) -> Option<Placed> {
        debug_assert!(orig != 0);
        let s = set_of(orig);
        let set = &mut self.ways[s];
        if set.iter().any(|w| w.0 == orig) {
            return None;
        }
        let Some(k) = set.iter().position(|w| w.0 == 0) else {
            self.crowded.push(orig);
            return None;
        };
        set[k] = (orig, entry);
        self.entries += 1;
        Some(Placed { offset: s as u64 * SET_BYTES + 16 * k as u64 })
    }

    /// The entry for `orig`, as the probe finds it.
    pub fn find(&self, orig: u64) -> Option<u64> {
        self.ways[set_of(orig)].iter().find(|w| w.0 == orig && orig != 0).map(|w| w.1)
    }

    /// The table as the target reads it (little-endian words).
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(TABLE_BYTES as usize);
        for set in &self.ways {
            for &(o, e) in set {
                v.extend_from_slice(&o.to_le_bytes());
                v.extend_from_slice(&e.to_le_bytes());
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_ways_then_crowded() {
        let mut t = Table::default();
        assert_eq!(t.insert(0x5555_0000_1234, 0xa), Some(Placed { offset: 0x1234 * 32 }));
        assert_eq!(t.insert(0x5555_0001_1234, 0xb), Some(Placed { offset: 0x1234 * 32 + 16 }));
        assert_eq!(t.insert(0x5555_0002_1234, 0xc), None);
        assert_eq!(t.crowded, [0x5555_0002_1234]);
        assert_eq!(t.insert(0x5555_0000_1234, 0xd), None, "first entry kept");
        assert_eq!(t.find(0x5555_0001_1234), Some(0xb));
        assert_eq!(t.find(0x5555_0002_1234), None);
        let b = t.bytes();
        assert_eq!(b.len() as u64, TABLE_BYTES);
        let at = 0x1234 * 32 + 16;
        assert_eq!(u64::from_le_bytes(b[at..at + 8].try_into().unwrap()), 0x5555_0001_1234);
        assert_eq!(u64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap()), 0xb);
    }
}
