//! The JIT's per-thread counter slabs (see `kerf_jit::x86_64::Slabs`): the region kerf maps
//! in the target, each module data area's shadow in a slab, and the sums kerf reads.
//!
//! A thread's slab holds its own copy of every counter word of every module with a shadow:
//! the word at offset `o` of a data area whose shadow starts at `s` is at `s + o` in each
//! slab. A counter's value is its word in the data area (the owner/shared scheme of modules
//! without a shadow, zero otherwise) plus its copies in the slabs handed out so far, plus
//! what kerf took from the slabs of threads that ended.
//!
//! A slab whose owner has ended (no task of that id is left) is taken back while kerf is
//! idle ([`SlabRegion::reclaim`]): its copies are added to kerf's `ended` sums, the slab is
//! zeroed (its pages freed) and pushed on the header's free list, where the next claim finds
//! it. So a program that makes threads one after another does not run out of slabs. Only
//! where the target's thread ids are kerf's (the same pid namespace): elsewhere an id would
//! be looked for among other tasks.

use kerf_arch::hash::AddrMap;
use kerf_arch::RemoteAddr;
use kerf_jit::x86_64::{
    Slabs, SLABS_CLAIMED, SLABS_FREE, SLABS_HEADER, SLABS_REUSED, SLAB_NEXT, SLAB_OWNER,
    SLAB_RINGS, SLAB_SHARED, SLAB_WORDS,
};
use kerf_os::TargetError;
use kerf_os::{SharedMem, Tracee};
use std::sync::atomic::Ordering;

/// The most slabs a region has: threads past the last but one share the last
/// (`KERF_JIT_SLABS` makes it fewer, for the tests).
const MOST: u64 = 1024;
/// The fewest slabs a region is tried with where the address space has no room for more.
const LEAST_COUNT: u64 = 8;
/// The least bytes a slab has, and the most (a copy's displacement is a signed 32-bit one).
const LEAST_SPAN: u64 = 1 << 20;
const MOST_SPAN: u64 = 1 << 30;
/// Where the region goes, as near as it fits (see [`SlabRegion::map`]).
const FAR: u64 = 1 << 44;
/// The most bytes of address space the region takes (it is a sparse shared file: only the
/// pages threads write are memory).
const MOST_BYTES: u64 = 1 << 38;

/// Sums of the slabs' copies, by where they lie in a slab, a page of words at a time (only
/// pages some thread wrote). Not a map by word: kerf's summary reads every block's counter,
/// 160 k words on python3.11, and looking each up in a tree took 30 ms of its end; nor one
/// vector over a slab's used part, which is most of the region's span.
#[derive(Clone, Debug, Default)]
pub struct Copies(AddrMap<u64, Box<[u64; PAGE_WORDS]>>);

/// Words in a page of [`Copies`].
const PAGE_WORDS: usize = 512;
const PAGE: u64 = 8 * PAGE_WORDS as u64;

impl Copies {
    /// The sum of the copies at `at` bytes into a slab.
    pub fn get(&self, at: u64) -> u64 {
        self.0.get(&(at / PAGE)).map_or(0, |p| p[(at % PAGE / 8) as usize])
    }

    /// The sums that are not zero in bytes `lo..hi` of a slab, with where they lie.
    pub fn range(&self, lo: u64, hi: u64) -> impl Iterator<Item = (u64, u64)> + '_ {
        (lo / PAGE..hi.div_ceil(PAGE))
            .filter_map(|p| Some((p, self.0.get(&p)?)))
            .flat_map(|(p, words)| {
                let at = move |k: usize| p * PAGE + 8 * k as u64;
                words.iter().enumerate().filter(|(_, &n)| n != 0).map(move |(k, &n)| (at(k), n))
            })
            .filter(move |&(at, _)| (lo..hi).contains(&at))
    }

    fn add(&mut self, at: u64, n: u64) {
        let page = self.0.entry(at / PAGE).or_insert_with(|| Box::new([0; PAGE_WORDS]));
        let w = &mut page[(at % PAGE / 8) as usize];
        *w = w.wrapping_add(n);
    }
}

/// The region, in the target and in kerf.
pub struct SlabRegion {
    mem: SharedMem,
    pub seq: Slabs,
    /// Bytes of each slab given to data areas' shadows so far, and to ring words.
    next: u64,
    next_ring: u64,
    /// The copies taken from the slabs of threads that ended, by where they lay in a slab;
    /// how many slabs were taken back; and whether they may be (see the module comment).
    ended: Copies,
    pub reclaimed: u64,
    reclaims: bool,
    pid: i32,
}

impl SlabRegion {
    /// Map a region whose slabs have room for `data` bytes of data areas twice over (the
    /// modules of the region, and as many again for modules mapped later), in the stopped
    /// target. `tid`: the thread id's offset in the thread control block.
    pub fn map(tr: &mut Tracee, data: u64, tid: i32) -> Result<SlabRegion, TargetError> {
        let span = (SLAB_WORDS + 2 * data).next_power_of_two().clamp(LEAST_SPAN, MOST_SPAN);
        let most = std::env::var("KERF_JIT_SLABS").ok().and_then(|v| v.parse().ok());
        let mut count = (MOST_BYTES / span).min(most.unwrap_or(MOST).clamp(2, MOST));
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // Above the low 4 GiB (where the lookup table and non-PIE programs are), as near 16
        // TiB as it fits: far from the addresses programs ask for by number (just above 4
        // GiB, Windows images' preferred bases, where Wine maps them: a region there made
        // Wine load `cmd.exe` elsewhere and fail), and from the modules and heaps; where the
        // address space has no room (a limit on it, `ulimit -v`), fewer slabs.
        let (lo, hi) = (RemoteAddr(1 << 32), RemoteAddr(0x7fff_0000_0000));
        // The region is a power of two of bytes, all of it kerf's, so that a gate can tell a
        // `gs` base of the program's own by a shift (`kerf_jit::x86_64::thread_gate`): the
        // header and `count` slabs, and the room up to the next power of two (with 1024 slabs,
        // the last slab's room goes to the header: 1023 slabs).
        let (mem, len) = loop {
            let len = (count * span).next_power_of_two();
            count = count.min((len - SLABS_HEADER) / span);
            match tr.share_within(lo, hi, RemoteAddr(FAR), len, prot) {
                Ok(mem) => break (mem, len),
                Err(_) if count > LEAST_COUNT => count = (count / 8).max(LEAST_COUNT),
                Err(e) => return Err(e),
            }
        };
        let seq = Slabs {
            region: mem.remote().0,
            span_log2: span.trailing_zeros() as u8,
            size_log2: len.trailing_zeros() as u8,
            count: count as u32,
            tid,
        };
        let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/pid")).ok();
        let reclaims = ns("self").is_some() && ns("self") == ns(&tr.pid().to_string());
        // The last slab, which threads may share, marked so (never taken back: it keeps it).
        let last = (SLABS_HEADER + ((count - 1) << seq.span_log2)) as usize;
        mem.store_u32(last + SLAB_SHARED as usize, 1);
        Ok(SlabRegion {
            mem,
            seq,
            next: SLAB_WORDS,
            next_ring: SLAB_RINGS,
            ended: Copies::default(),
            reclaimed: 0,
            reclaims,
            pid: tr.pid(),
        })
    }

    /// Room in every slab for the copies of a data area of `len` bytes: where they start in
    /// a slab, or `None` when the slabs have no room left (that module's counters then tell
    /// the owner thread from the others, as without slabs).
    pub fn shadow(&mut self, len: u64) -> Option<u64> {
        let span = 1u64 << self.seq.span_log2;
        let at = self.next;
        let end = at.checked_add(len.next_multiple_of(64))?;
        (end <= span).then(|| {
            self.next = end;
            at
        })
    }

    /// A word in every slab for a thread's ring address in one more module
    /// (`kerf_jit::Layout::ring_word`), or `None` when the first page has none left (that
    /// module's records look the thread's slot up each time). Never given twice: a module
    /// unmapped leaves its word unread.
    pub fn ring_word(&mut self) -> Option<i32> {
        let at = self.next_ring;
        (at + 8 <= SLAB_WORDS).then(|| {
            self.next_ring = at + 8;
            at as i32
        })
    }

    /// How far the copies of a data area at `data`, shadowed at `shadow`, lie from its words
    /// (`kerf_jit::Layout::per_thread`).
    pub fn per_thread(data: u64, shadow: u64) -> i64 {
        (shadow as i64).wrapping_sub(data as i64)
    }

    /// How many slabs were handed out fresh (the last perhaps to several threads).
    fn fresh(&self) -> u64 {
        self.mem.load_u64(SLABS_CLAIMED as usize)
    }

    /// How many threads have claimed a slab: fresh ones, and ones taken back before.
    pub fn claimed(&self) -> u64 {
        self.fresh() + self.mem.load_u64(SLABS_REUSED as usize)
    }

    /// Slabs in use.
    fn used(&self) -> u64 {
        self.fresh().min(u64::from(self.seq.count))
    }

    /// Threads that shared the last slab with another (their counts may have lost
    /// updates): every claim past the last but one, less the one that had it first.
    pub fn shared(&self) -> u64 {
        self.fresh().saturating_sub(u64::from(self.seq.count))
    }

    fn slab(&self, k: u64) -> usize {
        (SLABS_HEADER + (k << self.seq.span_log2)) as usize
    }

    /// Every copy's sum over the claimed slabs, by where it lies in a slab (copies no
    /// thread wrote are left out). Only the pages threads wrote are read: reading the rest
    /// through the mapping would give each a page of memory, in every slab.
    pub fn totals(&self) -> Copies {
        let mut out = self.ended.clone();
        for k in 0..self.used() {
            self.add_copies(k, &mut out);
        }
        out
    }

    /// Slab `k`'s copies added into `out`.
    fn add_copies(&self, k: u64, out: &mut Copies) {
        let (slab, len) = (self.slab(k), self.next as usize);
        let parts = self.mem.data_in(slab, len).unwrap_or_else(|| vec![(slab, slab + len)]);
        for (a, b) in parts {
            // (The owner word and the rest of the first line are not copies.)
            for at in (a.max(slab + SLAB_WORDS as usize)..b).step_by(8) {
                let v = self.mem.load_u64(at);
                if v != 0 {
                    out.add((at - slab) as u64, v);
                }
            }
        }
    }

    /// Take back the slabs whose owners have ended (the last, shared, excepted): their
    /// copies into the `ended` sums, the slab zeroed, its owner word cleared, and the slab
    /// pushed on the free list. While the target runs: no thread writes a slab whose owner
    /// has ended (a thread it made claimed a slab of its own before counting), and a claim
    /// writes the owner word only of a slab it has just taken off the list or fresh. How
    /// many it took back.
    pub fn reclaim(&mut self) -> u64 {
        if !self.reclaims {
            return 0;
        }
        let mut n = 0;
        // The target's threads, read at once; an owner among none of them (a thread of a
        // forked child, which shares the region) looked for by itself.
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{}/task", self.pid)) else { return 0 };
        let live: std::collections::HashSet<u32> =
            tasks.flatten().filter_map(|e| e.file_name().to_str()?.parse().ok()).collect();
        for k in 0..self.used().min(u64::from(self.seq.count) - 1) {
            let owner = self.mem.load_u32(self.slab(k) + SLAB_OWNER as usize);
            if owner == 0
                || live.contains(&owner)
                || std::path::Path::new(&format!("/proc/{owner}")).exists()
            {
                continue;
            }
            let mut ended = std::mem::take(&mut self.ended);
            self.add_copies(k, &mut ended);
            self.ended = ended;
            let slab = self.slab(k);
            // (The ring words too: the slab's next thread looks its rings up again.)
            self.mem.zero(slab + SLAB_RINGS as usize, self.next as usize - SLAB_RINGS as usize);
            self.mem.store_u32(slab + SLAB_OWNER as usize, 0);
            let head = &self.mem.words()[SLABS_FREE as usize / 8];
            let mut h = head.load(Ordering::Acquire);
            loop {
                self.mem.store_u64(slab + SLAB_NEXT as usize, h & 0xffff_ffff);
                let new = ((h >> 32) + 1) << 32 | (k + 1);
                match head.compare_exchange(h, new, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => break,
                    Err(now) => h = now,
                }
            }
            n += 1;
        }
        self.reclaimed += n;
        n
    }

    /// A slab for thread `tid`, claimed by kerf as a gate's claim ([`kerf_jit::x86_64::
    /// claim_slab`]) would: off the free list if it has one, else the next fresh one, or the
    /// last when none is left; its owner word set. Every thread of the target stopped (no
    /// claim of its own races this one). Returns the slab's address in the target: the
    /// thread's `gs` base.
    pub fn claim_for(&mut self, tid: u32) -> u64 {
        let words = self.mem.words();
        let head = words[SLABS_FREE as usize / 8].load(Ordering::Acquire);
        let k = match head & 0xffff_ffff {
            0 => {
                let fresh = words[SLABS_CLAIMED as usize / 8].fetch_add(1, Ordering::AcqRel);
                fresh.min(u64::from(self.seq.count) - 1)
            }
            first => {
                let k = first - 1;
                let next = self.mem.load_u64(self.slab(k) + SLAB_NEXT as usize);
                let new = ((head >> 32) + 1) << 32 | (next & 0xffff_ffff);
                words[SLABS_FREE as usize / 8].store(new, Ordering::Release);
                words[SLABS_REUSED as usize / 8].fetch_add(1, Ordering::AcqRel);
                k
            }
        };
        self.mem.store_u32(self.slab(k) + SLAB_OWNER as usize, tid);
        self.mem.remote().0 + self.slab(k) as u64
    }

    /// Whether `base` is in the region (a slab's address, or room past the slabs).
    pub fn holds(&self, base: u64) -> bool {
        let at = self.mem.remote().0;
        (at..at + self.mem.len() as u64).contains(&base)
    }

    /// Whether `base` is the address of a slab whose owner is thread `tid`.
    pub fn owns(&self, base: u64, tid: u32) -> bool {
        let off = base.wrapping_sub(self.mem.remote().0);
        let span = 1u64 << self.seq.span_log2;
        off >= SLABS_HEADER
            && (off - SLABS_HEADER).is_multiple_of(span)
            && (off - SLABS_HEADER) / span < u64::from(self.seq.count)
            && self.mem.load_u32(off as usize + SLAB_OWNER as usize) == tid
    }

    /// Zero every claimed slab's copies (a flush, every thread stopped, once [`totals`]
    /// were folded into kerf's copy of the retired translations' words); each slab keeps its
    /// owner.
    ///
    /// [`totals`]: SlabRegion::totals
    pub fn clear(&mut self) {
        self.ended = Copies::default();
        for k in 0..self.used() {
            let at = self.slab(k) + SLAB_WORDS as usize;
            self.mem.zero(at, self.next as usize - SLAB_WORDS as usize);
        }
    }

    pub fn remote(&self) -> RemoteAddr {
        self.mem.remote()
    }

    /// Bytes of address space the region takes in the target.
    pub fn bytes(&self) -> u64 {
        self.mem.len() as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_add_up_by_place_and_a_range_gives_only_its_own() {
        let mut c = Copies::default();
        c.add(8, 3);
        c.add(8, 4);
        c.add(PAGE - 8, 1);
        c.add(PAGE, 2);
        c.add(5 * PAGE + 16, 9);
        assert_eq!((c.get(8), c.get(16), c.get(PAGE), c.get(7 * PAGE)), (7, 0, 2, 0));
        let all: Vec<_> = c.range(0, 6 * PAGE).collect();
        assert_eq!(all, [(8, 7), (PAGE - 8, 1), (PAGE, 2), (5 * PAGE + 16, 9)]);
        // Bounds inside pages: `lo` in, `hi` out.
        assert_eq!(c.range(16, PAGE).collect::<Vec<_>>(), [(PAGE - 8, 1)]);
        assert_eq!(c.range(PAGE - 8, PAGE + 8).collect::<Vec<_>>(), [(PAGE - 8, 1), (PAGE, 2)]);
        assert_eq!(c.range(6 * PAGE, 9 * PAGE).count(), 0);
    }
}
