//! The JIT's per-thread counter slabs (see `kerf_jit::x86_64::Slabs`): the region kerf maps
//! in the target, each module data area's shadow in a slab, and the sums kerf reads.
//!
//! A thread's slab holds its own copy of every counter word of every module with a shadow:
//! the word at offset `o` of a data area whose shadow starts at `s` is at `s + o` in each
//! slab. A counter's value is its word in the data area (the owner/shared scheme of modules
//! without a shadow, zero otherwise) plus its copies in the slabs handed out so far.

use kerf_arch::RemoteAddr;
use kerf_jit::x86_64::{Slabs, SLABS_HEADER, SLAB_WORDS};
use kerf_os::TargetError;
use kerf_os::{SharedMem, Tracee};

/// The most slabs a region has: threads past the last but one share the last.
const MOST: u64 = 1024;
/// The least bytes a slab has, and the most (a copy's displacement is a signed 32-bit one).
const LEAST_SPAN: u64 = 1 << 20;
const MOST_SPAN: u64 = 1 << 30;
/// The most bytes of address space the region takes (it is a sparse shared file: only the
/// pages threads write are memory).
const MOST_BYTES: u64 = 1 << 38;

/// The region, in the target and in kerf.
pub struct SlabRegion {
    mem: SharedMem,
    pub seq: Slabs,
    /// Bytes of each slab given to data areas' shadows so far.
    next: u64,
}

impl SlabRegion {
    /// Map a region whose slabs have room for `data` bytes of data areas twice over (the
    /// modules of the region, and as many again for modules mapped later), in the stopped
    /// target. `tid`: the thread id's offset in the thread control block.
    pub fn map(tr: &mut Tracee, data: u64, tid: i32) -> Result<SlabRegion, TargetError> {
        let span = (SLAB_WORDS + 2 * data).next_power_of_two().clamp(LEAST_SPAN, MOST_SPAN);
        let count = (MOST_BYTES / span).min(MOST);
        let len = SLABS_HEADER + count * span;
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // Anywhere above the low 4 GiB (where the lookup table and non-PIE programs are).
        let (lo, hi) = (RemoteAddr(1 << 32), RemoteAddr(0x7fff_0000_0000));
        let mem = tr.share_within(lo, hi, lo, len, prot)?;
        let seq = Slabs {
            region: mem.remote().0,
            span_log2: span.trailing_zeros() as u8,
            count: count as u32,
            tid,
        };
        Ok(SlabRegion { mem, seq, next: SLAB_WORDS })
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

    /// How far the copies of a data area at `data`, shadowed at `shadow`, lie from its words
    /// (`kerf_jit::Layout::per_thread`).
    pub fn per_thread(data: u64, shadow: u64) -> i64 {
        (shadow as i64).wrapping_sub(data as i64)
    }

    /// How many threads have claimed a slab (some of them perhaps sharing the last).
    pub fn claimed(&self) -> u64 {
        self.mem.load_u64(0)
    }

    /// Slabs in use.
    fn used(&self) -> u64 {
        self.claimed().min(u64::from(self.seq.count))
    }

    /// Threads that shared the last slab with another (their counts may have lost
    /// updates): every claim past the last but one, less the one that had it first.
    pub fn shared(&self) -> u64 {
        self.claimed().saturating_sub(u64::from(self.seq.count))
    }

    fn slab(&self, k: u64) -> usize {
        (SLABS_HEADER + (k << self.seq.span_log2)) as usize
    }

    /// The sum of the copies at `off` (a shadow's start plus a word's offset in its area).
    pub fn sum(&self, off: u64) -> u64 {
        (0..self.used()).map(|k| self.mem.load_u64(self.slab(k) + off as usize)).sum()
    }

    /// The copies of `len` bytes at `off`, summed word by word into `into` (little-endian
    /// words), then zeroed (a flush, every thread stopped: the area's translations are
    /// retired and their copies start again from zero for the next).
    pub fn fold_and_zero(&self, off: u64, into: &mut [u8]) {
        let zeros = vec![0u8; into.len()];
        let mut copy = vec![0u8; into.len()];
        for k in 0..self.used() {
            let at = self.slab(k) + off as usize;
            self.mem.read_bytes(at, &mut copy);
            for (w, c) in into.chunks_exact_mut(8).zip(copy.chunks_exact(8)) {
                let sum = u64::from_le_bytes(w[..8].try_into().unwrap_or_default())
                    .wrapping_add(u64::from_le_bytes(c.try_into().unwrap_or_default()));
                w.copy_from_slice(&sum.to_le_bytes());
            }
            self.mem.write_bytes(at, &zeros);
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
