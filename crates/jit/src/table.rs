//! The lookup table an indirect transfer in the code cache searches (see
//! [`crate::x86_64::probe`]): 2^17 to 2^20 sets of four ways, as many as the translation is
//! big ([`set_bits_for`]), each way an original address and the
//! cache address of that block's indirect entry. kerf fills it; the target only reads it. An
//! empty way holds original address 0, which no target has. In the cache line after each
//! set's ways, at [`CONT`] bytes from each way, the way's *continuation*: where the
//! translation of its original address starts, which a `ret` goes to directly with the
//! program's registers and stack already restored (see [`crate::x86_64::ret_probe`]). A
//! framed `ret` reads both lines, which share a page (with the continuations in a table of
//! their own, 9 MiB away, each return site took a second page and line of the CPU's caches);
//! a frameless one reads the second line only, which holds a copy of each way's original
//! address beside its continuation ([`RET_KEY`]). Before the sets, at fixed places whatever
//! their number: the overflow list and the outer frames.
//!
//! The set is computed from the target without touching the flags: with BMI2, bits 6..22
//! (with 2^17 sets; 6..25 with 2^20) of
//! `rotr(x, 13) + 8x` (`rorx`, `lea`, then `shlx` and `shrx` to keep them; a frameless `ret`,
//! whose flags are dead, keeps them with one `and`, which leaves the set's number times 64,
//! and reads the set through an operand that doubles it): about bits 3..19 plus bits 19..35
//! (return sites are rarely under 8 bytes apart, a module's set numbers wrap every 1 MiB of
//! its code, and modules differ in the high bits); else bits 0..15 with `movzx` alone (2^16
//! sets). Bits 7..23, which an `and` keeps already times 128, put 74 of python3.11's
//! entries in the overflow list, against 7 to 14 (with address randomisation) with these. A
//! big program has many indirect targets (every return site and function entry of
//! python3.11 and its libraries: 130 k).

use kerf_arch::hash::AddrMap;

/// Bits of a set number with BMI2 ([`Hash::Mixed`]) for a translation whose walk ahead has
/// `walk` blocks, in modules of `all` blocks in all: a set for every two blocks of the walk
/// and for every four of the modules (rounded up to a power of two), at least
/// [`MIN_SET_BITS`] and at most [`MAX_SET_BITS`]. Entries come at about a third of the
/// blocks translated (clang's walk: 316 k entries for 941 k blocks; python3.11's: 27 k for
/// 80 k), and what comes on demand may outgrow the walk (clang's virtual calls: 1.8 M blocks
/// and 633 k entries in the run after it), but not the modules. A load of 2.6, clang's with
/// a fixed 2^17 sets, left 19 k of its 339 k entries nowhere. Fixed at the start: every
/// lookup of the code computes the set with these bits.
pub fn set_bits_for(walk: usize, all: usize) -> u32 {
    let sets = (walk / 2).max(all / 4).max(1).next_power_of_two();
    sets.trailing_zeros().clamp(MIN_SET_BITS, MAX_SET_BITS)
}
/// The fewest bits of a set number with BMI2: 2^17 sets, 16 MiB (kerf's table before its
/// size followed the translation's, and all a small program needs).
pub const MIN_SET_BITS: u32 = 17;
/// The most: 2^20 sets, 128 MiB, below 2 GiB in the target where there is room (only the
/// pages of the sets written are memory).
pub const MAX_SET_BITS: u32 = 20;
/// Ways per set.
pub const WAYS: usize = 4;
/// Bytes of one way, and of one set's ways (a cache line).
pub const WAY_BYTES: u64 = 16;
pub const SET_BYTES: u64 = WAY_BYTES * WAYS as u64;
/// Bytes from one set to the next: its ways, then their continuations.
pub const SET_STRIDE: u64 = 2 * SET_BYTES;
/// Where the sets start: after the overflow list and the outer frames, whose places do not
/// depend on the number of sets.
pub const SETS_AT: u64 = 1 << 18;
/// Entries the overflow list holds (searched by the miss path: entries whose set was full
/// still hit, slowly). At the table's start: its count, then `(original, entry)` pairs.
/// (One less than 4,096: the pairs and their continuations both fit before the outer frames.)
pub const OVERFLOW: usize = 4095;
/// Byte offset of the overflow list's count, and of its first pair.
pub const OVERFLOW_COUNT: u64 = 0;
pub const OVERFLOW_PAIRS: u64 = 8;
/// Byte offset of the continuation of the overflow list's first pair; pair `i`'s is
/// `16 * i` further, the pairs' own stride, so that the miss path finds it from the pair's
/// address with one `lea` ([`crate::x86_64::lazy_entry`] reads it: a return site's entry
/// that kerf never made goes there).
pub const OVERFLOW_CONTS: u64 = 1 << 16;
/// How far each way's continuation word is from the way: in the next line, with the ways'
/// own stride (the other 8 bytes of each are spare).
pub const CONT: u64 = SET_BYTES;
/// How far each way's *return key* is from the way: a copy of its original address beside
/// its continuation (in the spare 8 bytes), which a frameless `ret` compares
/// ([`crate::x86_64::fast_ret`]), so that a return reads one line of the set, not two:
/// with the key in the first line, each return site hot in a run kept both lines of its set
/// in the CPU's caches.
pub const RET_KEY: u64 = CONT + 8;

/// The *outer frames*, after the overflow list: a word
/// per slot, each the stack pointer a thread had when it entered a root from the original
/// code (pointing at its return address), or 0. A root's return at that same stack pointer
/// is the end of the root call, and goes back to the original code; any other return of the
/// root (a call made in the cache: recursion, a caller in the region) stays in the cache.
/// The slot is chosen from the stack pointer ([`outer_slot`]) and the [`OUTER_PROBES`] words
/// from there: an entering thread takes the first that is empty or holds its own stack
/// pointer (the first word if none is), a returning one compares all of them and clears the
/// one that matches. So threads share the words without a lock, and two or three threads
/// whose stack pointers hash alike each keep their own (with one word each, such a pair made
/// the earlier thread's root call end through a missed return now and then: 1 run in 80 of
/// the suite's eight-thread fixture).
pub const OUTER: u64 = 1 << 17;
/// Bytes the hash of a stack pointer ranges over: 8,192 slots.
pub const OUTER_HASHED: u64 = 1 << 16;
/// Words an entering thread may take and a returning one compares, from its slot on.
pub const OUTER_PROBES: u64 = 4;
/// Bytes of the outer frames: the hashed slots and the probes past the last.
pub const OUTER_BYTES: u64 = OUTER_HASHED + 8 * (OUTER_PROBES - 1);
const _: () = assert!(OVERFLOW_PAIRS + 16 * OVERFLOW as u64 <= OVERFLOW_CONTS);
const _: () = assert!(OVERFLOW_CONTS + 16 * OVERFLOW as u64 <= OUTER);
const _: () = assert!(OUTER + OUTER_BYTES <= SETS_AT);

/// The byte offset of way `k` of set `s`.
fn way_at(s: usize, k: usize) -> u64 {
    SETS_AT + s as u64 * SET_STRIDE + WAY_BYTES * k as u64
}

/// The byte offsets of the overflow list's pair `i` (its original address, then its entry)
/// and of that pair's continuation.
pub fn overflow_at(i: usize) -> (u64, u64) {
    (OVERFLOW_PAIRS + 16 * i as u64, OVERFLOW_CONTS + 16 * i as u64)
}

/// The byte offset from [`OUTER`] of the slot for stack pointer `sp`, as the code computes it
/// ([`crate::x86_64::outer_entry`]): with BMI2, the low 13 bits of `rotr(sp, 12) + sp`,
/// which mix the offset in a stack with the stack's place (glibc's thread stacks lie 8 MiB
/// and a guard page apart, and the same depth in each falls in a different slot); else the
/// low 16 bits of `sp` (an 8-byte aligned stack pointer, as every call leaves it).
pub fn outer_slot(hash: Hash, sp: u64) -> u64 {
    match hash {
        Hash::Mixed(_) => sp.rotate_right(12).wrapping_add(sp).wrapping_mul(8) & (OUTER_HASHED - 1),
        Hash::Low16 => sp & (OUTER_HASHED - 1),
    }
}

/// The original address kerf's copy keeps in a way whose entry was retired
/// ([`Table::retire`]): never a target, so nothing finds it, and not 0, so no entry takes the
/// way until the table is made anew (the live table holds 0 there).
const RETIRED: u64 = 1;

/// The rank of a table entry for an instruction inside a block (see
/// [`Table::insert_ranked`]).
pub const INSIDE: u8 = 3;
/// The rank of a return site's entry (the instruction after a call).
pub const RETURN: u8 = 1;

/// Which bits of a target choose its set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hash {
    /// Bits 0..15 (`movzx`): any x86-64 CPU. 2^16 sets.
    Low16,
    /// Bits 6.. of `rotr(x, 13) + 8x`, this many of them ([`set_bits_for`]): CPUs with BMI2.
    Mixed(u32),
}

impl Hash {
    /// The set an original address falls in.
    pub fn set_of(self, target: u64) -> usize {
        match self {
            Hash::Low16 => (target & 0xffff) as usize,
            Hash::Mixed(bits) => {
                let mixed = target.rotate_right(13).wrapping_add(target.wrapping_mul(8));
                ((mixed >> 6) & ((1u64 << bits) - 1)) as usize
            }
        }
    }

    /// Bits of a set number.
    pub fn set_bits(self) -> u32 {
        match self {
            Hash::Low16 => 16,
            Hash::Mixed(bits) => bits,
        }
    }

    /// Sets in the table.
    pub fn sets(self) -> usize {
        1 << self.set_bits()
    }

    /// Bytes of the whole table: the overflow list and the outer frames, then the sets.
    pub fn table_bytes(self) -> u64 {
        SETS_AT + self.sets() as u64 * SET_STRIDE
    }
}

/// kerf's copy of the table, and where each entry went.
#[derive(Clone, Debug)]
pub struct Table {
    hash: Hash,
    /// The sets that hold an entry, by number. (Only those: the whole table is 16 MiB, whose
    /// every page a vector of its sets touched, in a process where a first touch of a page
    /// costs about 3 us; python3.11's translation ahead has 27 k entries.)
    ways: AddrMap<u32, [Way; WAYS]>,
    /// Entries that found every way of their set taken, in the overflow list (the first
    /// [`OVERFLOW`]; indirect transfers to the rest leave the cache, counted as escapes).
    /// Each `(original, entry, continuation)`.
    pub crowded: Vec<(u64, u64, u64)>,
    pub entries: usize,
    /// Return sites among the entries with no room: a `ret` to one misses and leaves the
    /// cache as a thread leaving its root does, which no escape counts.
    pub lost_returns: usize,
    /// Ways whose entry [`Table::retire`] took out, held until the table is made anew.
    pub retired: usize,
}

/// One way: an original address, its indirect entry, its continuation, and whether its
/// return key is written (`keyed`, see [`Table::insert_ranked`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Way {
    orig: u64,
    entry: u64,
    cont: u64,
    keyed: bool,
}

/// Where in the table an entry went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// A way of its set: the byte offset of the way's pair (its continuation is [`CONT`]
    /// bytes further).
    Way(u64),
    /// The overflow list, at this index (its pair and continuation at [`overflow_at`]).
    Overflow(usize),
}

/// The byte offsets of the two original-address words of the way at `way`: its key, which
/// lookups compare, and its return key, which frameless returns compare.
fn way_keys(way: u64) -> [u64; 2] {
    [way, way + RET_KEY]
}

impl Table {
    pub fn new(hash: Hash) -> Table {
        Table {
            hash,
            ways: AddrMap::default(),
            crowded: Vec::new(),
            entries: 0,
            lost_returns: 0,
            retired: 0,
        }
    }

    /// Room for `n` more entries' sets without growing the map of sets by steps.
    pub fn reserve(&mut self, n: usize) {
        self.ways.reserve(n);
    }

    pub fn hash(&self) -> Hash {
        self.hash
    }

    /// Add `orig -> entry`, with its continuation `cont`. An address already present keeps
    /// its first entry (`None`). A full set sends it to the overflow list (recorded in
    /// `crowded`: a `ret` searches only the sets' continuations, and finds the overflow
    /// list's through their entries, by the miss path), or nowhere once that is full too
    /// (`None`).
    pub fn insert(&mut self, orig: u64, entry: u64, cont: u64) -> Option<Placed> {
        self.insert_ranked(orig, entry, cont, 0, true)
    }

    /// [`Table::insert`] for an entry of `rank` (see `translate::Entry`): one of rank
    /// [`INSIDE`] or more (an instruction inside a block, a target only an indirect jump of
    /// unknown targets might have) takes only ways 2 and 3. Such entries come by the
    /// thousand in a row of short instructions, which share a set (the set is chosen from
    /// bits 2 and up): filling every way, they left libLLVM's function entries translated
    /// later on demand no way and no room in the overflow list (2,300 entries lost, 700
    /// escapes in a second of `llc-14`).
    ///
    /// `keyed`: the way's return key holds `orig`, so that a frameless `ret` or indirect call
    /// goes straight to `cont` with the program's registers. Without (0 there, which no
    /// target matches), they take the framed probe to the entry: for a target kerf cannot
    /// translate (its continuation is the original address, and the entry counts the escape)
    /// and for an entry that counts the lookup's arrivals.
    pub fn insert_ranked(
        &mut self,
        orig: u64,
        entry: u64,
        cont: u64,
        rank: u8,
        keyed: bool,
    ) -> Option<Placed> {
        debug_assert!(orig != 0);
        let s = self.hash.set_of(orig);
        let set = self.ways.entry(s as u32).or_default();
        if set.iter().any(|w| w.orig == orig) {
            return None;
        }
        let first = if rank >= INSIDE { WAYS - 2 } else { 0 };
        let free = set.iter().enumerate().skip(first).find(|(_, w)| w.orig == 0).map(|(k, _)| k);
        let Some(k) = free else {
            if self.crowded.iter().any(|c| c.0 == orig) {
                return None;
            }
            self.crowded.push((orig, entry, cont));
            let i = self.crowded.len() - 1;
            self.lost_returns += usize::from(i >= OVERFLOW && rank == RETURN);
            return (i < OVERFLOW).then_some(Placed::Overflow(i));
        };
        set[k] = Way { orig, entry, cont, keyed };
        self.entries += 1;
        Some(Placed::Way(way_at(s, k)))
    }

    /// The entry for `orig`, as the probe and the miss path find it.
    pub fn find(&self, orig: u64) -> Option<u64> {
        let set = self.set(orig).iter().map(|w| (w.orig, w.entry));
        let mut over = self.crowded.iter().take(OVERFLOW).map(|c| (c.0, c.1));
        set.chain(&mut over).find(|w| w.0 == orig && orig != 0).map(|w| w.1)
    }

    /// The continuation of `orig`, as a `ret` finds it (the sets only).
    pub fn continuation(&self, orig: u64) -> Option<u64> {
        self.set(orig).iter().find(|w| w.orig == orig && orig != 0).map(|w| w.cont)
    }

    /// The ways of `orig`'s set (all empty where no entry went there).
    fn set(&self, orig: u64) -> &[Way; WAYS] {
        const EMPTY: [Way; WAYS] = [Way { orig: 0, entry: 0, cont: 0, keyed: false }; WAYS];
        self.ways.get(&(self.hash.set_of(orig) as u32)).unwrap_or(&EMPTY)
    }

    /// The sets that hold an entry, in the order of their numbers.
    fn sets(&self) -> Vec<(usize, &[Way; WAYS])> {
        let mut v: Vec<(usize, &[Way; WAYS])> =
            self.ways.iter().map(|(&s, set)| (s as usize, set)).collect();
        v.sort_unstable_by_key(|&(s, _)| s);
        v
    }

    /// The byte offsets of the original-address words of every entry placed (each way's key
    /// and its return key, then the overflow list): zeroing them, and them only, makes every lookup miss while a thread
    /// that read a word before sees its entry word still whole.
    pub fn key_offsets(&self) -> Vec<u64> {
        let ways = self.sets().into_iter().flat_map(|(s, set)| {
            set.iter()
                .enumerate()
                .filter(|(_, w)| w.orig != 0)
                .flat_map(move |(k, _)| way_keys(way_at(s, k)))
        });
        let over = (0..self.crowded.len().min(OVERFLOW)).map(|i| overflow_at(i).0);
        ways.chain(over).collect()
    }

    /// Take out every entry whose original address `gone` says is in code that went: the
    /// byte offsets of their original-address words, for the caller to zero in the live
    /// table (as [`Table::key_offsets`]'s). Their ways are not given to another entry until
    /// the table is made anew: a thread that matched the old address a moment before may
    /// still be about to read the entry word, which must then still be the old one (the
    /// translation it leads to stays mapped).
    pub fn retire(&mut self, gone: impl Fn(u64) -> bool) -> Vec<u64> {
        let mut keys = Vec::new();
        let mut sets: Vec<(&u32, &mut [Way; WAYS])> = self.ways.iter_mut().collect();
        sets.sort_unstable_by_key(|&(&s, _)| s);
        for (&s, set) in sets {
            for (k, w) in set.iter_mut().enumerate() {
                if w.orig != 0 && w.orig != RETIRED && gone(w.orig) {
                    w.orig = RETIRED;
                    self.entries -= 1;
                    self.retired += 1;
                    keys.extend(way_keys(way_at(s as usize, k)));
                }
            }
        }
        for (i, c) in self.crowded.iter_mut().enumerate() {
            if c.0 != RETIRED && gone(c.0) {
                c.0 = RETIRED;
                keys.extend((i < OVERFLOW).then_some(overflow_at(i).0));
            }
        }
        keys
    }

    /// Entries neither the sets nor the overflow list hold.
    pub fn lost(&self) -> usize {
        self.crowded.len().saturating_sub(OVERFLOW)
    }

    /// The parts of [`Table::bytes`] that are not zero, each at its offset: every set with an
    /// entry (its ways and their continuations), then the overflow list. Into memory that is
    /// zero already (a table just mapped), that writes the whole table: python3.11's 17 MiB
    /// built and copied took a tenth of the writing at install.
    pub fn write_to(&self, mut write: impl FnMut(u64, &[u8])) {
        let mut set = [0u8; SET_STRIDE as usize];
        for (s, ways) in self.sets() {
            if ways.iter().all(|w| w.orig == 0) {
                continue;
            }
            for (k, w) in ways.iter().enumerate() {
                let at = k * WAY_BYTES as usize;
                let orig = if w.orig == RETIRED { 0 } else { w.orig };
                set[at..at + 8].copy_from_slice(&orig.to_le_bytes());
                set[at + 8..at + 16].copy_from_slice(&w.entry.to_le_bytes());
                let c = at + CONT as usize;
                set[c..c + 8].copy_from_slice(&w.cont.to_le_bytes());
                let r = at + RET_KEY as usize;
                let key = if w.keyed { orig } else { 0 };
                set[r..r + 8].copy_from_slice(&key.to_le_bytes());
            }
            write(way_at(s, 0), &set);
        }
        let over: Vec<&(u64, u64, u64)> = self.crowded.iter().take(OVERFLOW).collect();
        if !over.is_empty() {
            for (i, &&(_, _, c)) in over.iter().enumerate() {
                write(overflow_at(i).1, &c.to_le_bytes());
            }
            let mut v = (over.len() as u64).to_le_bytes().to_vec();
            for &&(o, e, _) in &over {
                let o = if o == RETIRED { 0 } else { o };
                v.extend_from_slice(&o.to_le_bytes());
                v.extend_from_slice(&e.to_le_bytes());
            }
            write(OVERFLOW_COUNT, &v);
        }
    }

    /// The table as the target reads it (little-endian words): [`Table::write_to`] over
    /// zeros.
    pub fn bytes(&self) -> Vec<u8> {
        let mut v = vec![0u8; self.hash.table_bytes() as usize];
        self.write_to(|at, b| v[at as usize..at as usize + b.len()].copy_from_slice(b));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_offsets_name_every_entry_placed() {
        let mut t = Table::new(Hash::Low16);
        for k in 0..5u64 {
            t.insert(0x5555_0000_1234 + (k << 16), 0xa + k, 0x1a + k);
        }
        t.insert(0x7777_0000_0040, 0xb, 0x1b);
        let bytes = t.bytes();
        let word =
            |o: u64| u64::from_le_bytes(bytes[o as usize..o as usize + 8].try_into().unwrap());
        let mut keys: Vec<u64> = t.key_offsets().into_iter().map(word).collect();
        keys.sort_unstable();
        // Each way's address twice (its key and its return key), the overflow list's once.
        let ways = (0..4u64).map(|k| 0x5555_0000_1234 + (k << 16)).chain([0x7777_0000_0040]);
        let mut want: Vec<u64> = ways.flat_map(|a| [a, a]).collect();
        want.push(0x5555_0004_1234);
        want.sort_unstable();
        assert_eq!(keys, want);
    }

    #[test]
    fn retired_entries_are_found_no_more_and_their_ways_stay_taken() {
        let mut t = Table::new(Hash::Low16);
        for k in 0..4u64 {
            t.insert(0x5555_0000_1234 + (k << 16), 0xa + k, 0x1a + k);
        }
        t.insert(0x5555_0009_1234, 0xf, 0x1f);
        t.insert(0x7777_0000_0040, 0xb, 0x1b);
        let gone = |a: u64| (0x5555_0001_0000..0x5555_000a_0000).contains(&a);
        let mut keys = t.retire(gone);
        keys.sort_unstable();
        // The overflow list's first pair (before the sets), and ways 1 to 3 of the set (each
        // its key and its return key).
        let set = SETS_AT + 0x1234 * SET_STRIDE;
        let r = RET_KEY;
        let want = [set + 16, set + 32, set + 48, set + 16 + r, set + 32 + r, set + 48 + r];
        assert_eq!(keys, [&[OVERFLOW_PAIRS], &want[..]].concat());
        assert_eq!(t.retire(gone), [], "retired once");
        assert_eq!((t.entries, t.retired), (2, 3));
        assert_eq!(t.find(0x5555_0001_1234), None);
        assert_eq!(t.find(0x5555_0009_1234), None, "nor from the overflow list");
        assert_eq!(t.continuation(0x5555_0002_1234), None);
        assert_eq!(t.find(0x5555_0000_1234), Some(0xa), "outside the range: kept");
        // The same address again (code mapped where the old was) takes no retired way: the
        // set is full, so the overflow list.
        assert_eq!(t.insert(0x5555_0001_1234, 0xc, 0x1c), Some(Placed::Overflow(1)));
        assert_eq!(t.find(0x5555_0001_1234), Some(0xc));
        // A table written anew holds no retired address.
        let bytes = t.bytes();
        let word = |o: u64| u64::from_le_bytes(bytes[o as usize..][..8].try_into().unwrap());
        assert_eq!([word(set + 16), word(set + 32), word(OVERFLOW_PAIRS)], [0, 0, 0]);
        assert_eq!([word(set + 16 + r), word(set + 32 + r)], [0, 0]);
        assert_eq!(word(set + RET_KEY), 0x5555_0000_1234, "a live way's return key");
        assert_eq!(word(set), 0x5555_0000_1234);
    }

    #[test]
    fn four_ways_then_crowded() {
        let mut t = Table::new(Hash::Low16);
        for k in 0..4u64 {
            let placed = t.insert(0x5555_0000_1234 + (k << 16), 0xa + k, 0x1a + k);
            assert_eq!(placed, Some(Placed::Way(SETS_AT + 0x1234 * SET_STRIDE + 16 * k)));
        }
        assert_eq!(t.insert(0x5555_0009_1234, 0xf, 0x1f), Some(Placed::Overflow(0)));
        assert_eq!(t.crowded, [(0x5555_0009_1234, 0xf, 0x1f)]);
        assert_eq!(t.insert(0x5555_0000_1234, 0xd, 0x1d), None, "first entry kept");
        assert_eq!(t.find(0x5555_0001_1234), Some(0xb));
        assert_eq!(t.continuation(0x5555_0001_1234), Some(0x1b));
        assert_eq!(
            t.continuation(0x5555_0009_1234),
            None,
            "a `ret` reads no continuation of the overflow list"
        );
        assert_eq!(t.find(0x5555_0009_1234), Some(0xf), "from the overflow list");
        assert_eq!(t.lost(), 0);
        let b = t.bytes();
        assert_eq!(b.len() as u64, SETS_AT + (1 << 16) * SET_STRIDE);
        let o = OVERFLOW_COUNT as usize;
        assert_eq!(u64::from_le_bytes(b[o..o + 8].try_into().unwrap()), 1);
        assert_eq!(u64::from_le_bytes(b[o + 8..o + 16].try_into().unwrap()), 0x5555_0009_1234);
        assert_eq!(u64::from_le_bytes(b[o + 16..o + 24].try_into().unwrap()), 0xf);
        let c = OVERFLOW_CONTS as usize;
        assert_eq!(u64::from_le_bytes(b[c..c + 8].try_into().unwrap()), 0x1f, "its continuation");
        let at = (SETS_AT + 0x1234 * SET_STRIDE + 16) as usize;
        assert_eq!(u64::from_le_bytes(b[at..at + 8].try_into().unwrap()), 0x5555_0001_1234);
        assert_eq!(u64::from_le_bytes(b[at + 8..at + 16].try_into().unwrap()), 0xb);
        let c = at + CONT as usize;
        assert_eq!(u64::from_le_bytes(b[c..c + 8].try_into().unwrap()), 0x1b, "continuation");
    }

    #[test]
    fn entries_inside_blocks_leave_two_ways_to_the_others() {
        let mut t = Table::new(Hash::Low16);
        let at = |k: u64| 0x5555_0000_1234 + (k << 16);
        // Three entries inside blocks: ways 2 and 3, then the overflow list.
        let inside: Vec<_> = (0..3).map(|k| t.insert_ranked(at(k), 1, 1, INSIDE, true)).collect();
        let way = |k: u64| Some(Placed::Way(SETS_AT + 0x1234 * SET_STRIDE + 16 * k));
        assert_eq!(inside, [way(2), way(3), Some(Placed::Overflow(0))]);
        // A function entry and a return site translated later still find ways 0 and 1.
        assert_eq!(t.insert_ranked(at(7), 2, 2, 0, true), way(0));
        assert_eq!(t.insert_ranked(at(8), 3, 3, 1, true), way(1));
        assert_eq!(t.insert_ranked(at(9), 4, 4, 2, true), Some(Placed::Overflow(1)));
        assert_eq!(t.find(at(7)), Some(2));
        assert_eq!(t.continuation(at(8)), Some(3));
    }

    #[test]
    fn return_sites_with_no_room_are_counted_apart() {
        let mut t = Table::new(Hash::Low16);
        let at = |k: u64| 0x5555_0000_1234 + (k << 16);
        // Four ways, then the whole overflow list, all in one set.
        for k in 0..(WAYS + OVERFLOW) as u64 {
            assert!(t.insert_ranked(at(k), 1, 1, 2, true).is_some());
        }
        let n = (WAYS + OVERFLOW) as u64;
        assert_eq!(t.insert_ranked(at(n), 1, 1, 2, true), None);
        assert_eq!(t.insert_ranked(at(n + 1), 1, 1, RETURN, true), None);
        assert_eq!(t.insert_ranked(at(n + 2), 1, 1, 0, true), None);
        assert_eq!((t.lost(), t.lost_returns), (3, 1));
    }

    #[test]
    fn a_set_for_every_two_blocks_within_bounds() {
        assert_eq!(set_bits_for(0, 0), MIN_SET_BITS);
        assert_eq!(set_bits_for(140_453, 310_000), MIN_SET_BITS, "python3.11");
        assert_eq!(set_bits_for(1 << 18, 1 << 19), 17);
        assert_eq!(set_bits_for((1 << 18) + 2, 0), 18);
        assert_eq!(set_bits_for(0, (1 << 19) + 4), 18);
        assert_eq!(set_bits_for(941_000, 0), 19, "clang's walk");
        assert_eq!(set_bits_for(usize::MAX / 2, 0), MAX_SET_BITS);
        // The sets lie past the fixed part and end with the table.
        let h = Hash::Mixed(19);
        assert_eq!(h.table_bytes(), SETS_AT + (1 << 19) * SET_STRIDE);
        let last = way_at(h.sets() - 1, WAYS - 1) + RET_KEY + 8;
        assert_eq!(last, h.table_bytes());
    }

    #[test]
    fn clangs_entries_find_room_with_the_sets_its_walk_asks_for() {
        // 339,501 entries (clang and its libraries, 16-byte aligned entries and return
        // sites between), in 2^17 sets: about 19 k of them had no room. In the 2^19 its
        // walk's 941 k blocks ask for: every one in a way or the overflow list.
        let mut x = 0x7f3a_1200_0000u64;
        let mut lcg = 0x2545_f491_4f6c_dd1du64;
        let entries: Vec<u64> = (0..339_501)
            .map(|_| {
                lcg = lcg.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                x += 2 + (lcg >> 59);
                x
            })
            .collect();
        let fill = |bits: u32| {
            let mut t = Table::new(Hash::Mixed(bits));
            for &e in &entries {
                t.insert(e, 1, 2);
            }
            t.lost()
        };
        assert!(fill(MIN_SET_BITS) > 1000, "{}", fill(MIN_SET_BITS));
        assert_eq!(fill(set_bits_for(941_000, 0)), 0);
    }

    #[test]
    fn aligned_entries_spread_over_sets_with_bmi2() {
        // 16-byte aligned function entries all fall in 1 of every 16 sets by low bits.
        let entries: Vec<u64> = (0..20_000u64).map(|k| 0x7f00_0000_0000 + 0x40 * k).collect();
        let mut low = Table::new(Hash::Low16);
        let mut mid = Table::new(Hash::Mixed(MIN_SET_BITS));
        for &e in &entries {
            low.insert(e, 1, 2);
            mid.insert(e, 1, 2);
        }
        assert!(mid.crowded.is_empty(), "{}", mid.crowded.len());
        assert!(!low.crowded.is_empty());
        // Bits 3.. choose the set: return sites 8 bytes apart fall in different ones.
        let set = |a: u64| mid.hash().set_of(a);
        assert_eq!(set(0x7f00_0000_0048), set(0x7f00_0000_0040) + 1);
        // The same offset in two modules 1 MiB apart falls in different sets.
        assert_ne!(set(0x7f00_0010_0040), set(0x7f00_0000_0040));
    }
}
