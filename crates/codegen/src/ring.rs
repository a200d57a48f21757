//! The record ring the IR's `emit` op writes into (logdev's capture buffer): records of
//! fixed-size slots in kerf's data heap, written by any thread of the target and read by
//! kerf without a system call.
//!
//! Ring (`ring_len(slots)` bytes; the three counters on cache lines of their own):
//! ```text
//! +0    head   u64   records reserved so far (writers: lock cmpxchg)
//! +64   tail   u64   records the reader has consumed (only the reader writes it)
//! +72   wait   u64   a deadline (time stamp counter): before it, a per-thread writer that
//!                    finds the ring full waits for room (only the reader writes it)
//! +128  lost   u64   records dropped because the ring was full (lock inc)
//! +192  slots  [slot_len bytes; slots], record n in slot n % slots
//! ```
//! A ring's [`Shape`] is its slot count and slot length, both powers of two (the code finds a
//! slot with a mask and a shift). A slot is 32, 64 or 128 bytes: the shortest that holds the
//! longest record of the ring's writers ([`Shape::fitting`]). A short record in a short slot
//! is one cache line for the writer to write and for the reader to take from the writer's CPU,
//! where a 128-byte slot is two, and twice the records in the same memory.
//!
//! Slot:
//! ```text
//! +0   seq     u64   n + 1 once record n is complete (written last)
//! +8   time    u64   time stamp counter when the record was made
//! +16  stream  u32   stream id (which probe or event kind made it)
//! +20  len     u16   bytes of words that follow (8 per word)
//! +22  cpu     u16   the CPU the writer ran on when it took the time
//! +24  values  [u64; MAX_VALUES]
//! ```
//! The words are the emit's values, then for each memory read of an `emit.thread` (see
//! [`crate::ir::MemRead`]) a status word (an i64: bytes read, or `-errno`) and
//! `ceil(len / 8)` words of bytes, of which the status says how many are valid (the rest
//! are whatever the slot held before).
//!
//! An untimed writer (`emit.thread.untimed`, `emit.cpu.untimed`) reads no clock and writes
//! time 0 and CPU 0 (a CPU's ring: its CPU), for readers that use neither; the steps are
//! otherwise the same.
//!
//! The time and the CPU come from one `rdtscp`: Linux keeps `(node << 12) | cpu` in
//! `TSC_AUX`, so the CPU is the low 12 bits of `ecx`, read at the same instant as the time
//! (the thread may migrate right after; the pair is still one consistent sample).
//!
//! A writer (1) reserves record `n = head` by moving `head` from `n` to `n + 1` with `lock
//! cmpxchg` (retrying if another writer moved it first) unless `n - tail >= slots`, in which
//! case the ring is full and it adds one to `lost` instead and writes nothing (a `tail` past
//! `n` means other writers and the reader moved both after `head` was read: `n` is stale,
//! and the writer retries rather than taking the negative difference for a full ring), (2)
//! reads the time stamp counter and the CPU, (3) writes time, stream, length, CPU and values
//! into slot `n % slots` (and, for memory reads, copies the bytes in with
//! `process_vm_readv`), (4) writes `seq = n + 1`. x86 keeps stores in order, so a reader
//! that sees `seq == n + 1` sees the whole record; the reader copies it out and only then
//! moves `tail` past it, which is what lets a writer reuse the slot.
//!
//! Why the time after the reservation: a record's time is then later than the moment its
//! number was taken. A reader that saw `head <= n` when it read the ring at some time `T`
//! knows record `n`, reserved or not, will carry a time after `T`; one that finds `n`
//! reserved and not complete holds back what other rings gave it from `T` on until `n` is
//! done (`kerf_tools`' reader). Stamped before the reservation, a writer preempted between
//! the two would make a record older than records the reader had already put out.
//!
//! Why a compare-and-swap and not a fetch-and-add on `head`: a writer that added first and
//! found the ring full afterwards would leave a record number that is never written, and
//! the reader could not tell it from a record still being written. With the swap, every
//! reserved record is written, and a full ring costs the writer only the `lost` count.
//! A record reserved by a thread that dies between (2) and (4) (killed, or a fault in a
//! captured load) is never completed: the reader stops there; [`read`] reports it as
//! pending, and the reader may skip it once later records are complete.
//!
//! # Per-thread rings (`emit.thread`)
//!
//! The shared ring's `lock cmpxchg` costs every event a locked instruction and makes all
//! threads fight over one cache line. The per-thread rings give each thread of the thread
//! table ([`crate::timer`]) a ring of its own, in the same layout, found from its slot there:
//! ```text
//! +0    no_slot  u64   events of threads that found no slot in the thread table (lock inc)
//! +64   rings    [ring_len(slots) bytes; THREAD_SLOTS], ring k for thread table slot k
//! ```
//! Only the owning thread writes a ring's `head`, `lost` and slots, so the writer's steps
//! are those of the shared ring with no `lock`: `cmpxchg` and `inc` on memory are single
//! instructions, and the only code that can run on the same thread between the writer's
//! instructions is a signal handler (an interrupt, in the kernel), which runs to completion
//! before the writer goes on. A handler that emits before the writer's `cmpxchg` takes
//! record `n` itself, and the writer's `cmpxchg` finds `head` moved and retries (if the
//! reader drained meanwhile, `tail` is past the `n` it read: it retries then too); one that
//! emits after it takes `n + 1`. So every reserved record number is written exactly once (a
//! plain `head = n + 1` store after the record, without the reservation, would let the
//! handler's record and the interrupted one share slot `n` and lose one without a count).
//! `tests/exec.rs` interrupts the writer at every instruction in turn to check this.
//!
//! A per-thread writer in a process that finds its ring full drops the record (counted in
//! `lost`) unless the time stamp counter is still before the ring's `wait`: then it waits
//! for the reader to make room, giving the CPU up meanwhile (`sched_yield` at its first
//! looks, then 50 µs naps: a long wait is not to hold a CPU, which the reader may need),
//! and reserves again; once the deadline passes it drops. A reader that counts on every
//! event (the JIT's call trace) moves the deadline of every ring in use ahead at each drain,
//! so a writer waits as long as the reader is alive and drains, however slowly, and a reader
//! that was killed or stalls costs each full ring at most the rest of the last deadline; the
//! tracer's readers leave it 0 (a trace at a high rate drops, as LTTng's default does,
//! rather than slow the program).
//!
//! # Compact records (8-byte slots)
//!
//! A per-thread ring whose slots are [`COMPACT_SLOT_LEN`] bytes holds records of one word:
//! the low 32 bits of the emit's one value in the low half, the stream id (below 2^31) in
//! the high half, whose bit 31 ([`COMPACT_MARK`]) marks the record complete
//! (`emit.thread.untimed` only, one value, no memory reads: the IR refuses the rest). No
//! `seq`, no time, no length: eight records share a cache line where a 32-byte slot puts
//! two, so the writer's stores and the reader's loads move a quarter of the lines between
//! the CPUs (the JIT's call trace when it only counts, bench/RESULTS.md session 86).
//!
//! The writer reserves record `n` as above (plain `cmpxchg` on `head`, full when
//! `n - tail >= slots`), then writes the value's low half, then the high half: the stream with bit
//! 31 set to the lap's mark, bit `log2(slots)` of `n` inverted (1 on the first lap, so a
//! zeroed ring holds no record; the bit flips every lap, so a slot's record from the lap
//! before never looks complete). The halves are one aligned word, stored in that order, so
//! a reader's load of the word that sees the mark also sees the value. The reader
//! ([`each_compact`]) reads from its tail to `head` and stops at the first record whose mark
//! is not its lap's (reserved, not written yet: pending). Writing into the reserved slot
//! only is what keeps a signal handler that emits in the middle safe: one that writes into
//! slot `n` before the interrupted writer's reservation, and is published, would otherwise
//! be written over (the suite's exec tests interrupt the writer at every instruction with a
//! handler that emits and leaves its record in the ring).
//!
//! # Per-CPU rings (`emit.cpu`)
//!
//! The kernel has more tasks than a thread table has slots, and most of them never emit:
//! its rings are per CPU instead, in the same area layout (ring k for CPU `k % count`,
//! `no_slot` unused). The writer reads its CPU first (`rdpid`, or `rdtscp`) and takes ring
//! `cpu % count`, then runs the shared ring's steps, `lock cmpxchg` and `lock inc`
//! included, its time read after the reservation (`rdtsc`; the record's CPU is the ring's):
//! it may be preempted and moved to another CPU at any point after that read, so two
//! writers on two CPUs can meet in one ring. A writer preempted between its reservation and
//! `seq` holds up its ring's reader until it runs again (the reader never skips a reserved
//! record; the last drain counts it lost), and records after it in the ring may be older
//! or younger than it: the reader sorts by time.
//!
//! The reader relies on x86's ordering (TSO): the writer's stores become visible to other
//! CPUs in program order, so a reader that loads `seq == n + 1` and then the record's other
//! words sees them as written; and loads are not reordered with older loads, so it reads
//! `seq` before the words. The writer does not reuse slot `n % slots` until `tail` has
//! passed `n`, which the reader stores only after copying the record out. [`copy`] copies
//! a ring's complete records out packed (kerf's reader, which orders the records of many
//! rings itself: `trace::unpack` in kerf-tools); [`read`] reads them as [`Record`]s, and
//! [`merge`] puts those of many rings into one time order (the tests' reference).

/// Offsets in a ring.
pub const HEAD: u64 = 0;
pub const TAIL: u64 = 64;
/// On the reader's line, which a writer reads for `tail` anyway.
pub const WAIT: u64 = 72;
pub const LOST: u64 = 128;
pub const SLOTS: u64 = 192;

/// Bytes of the shortest and of the longest slot a ring may have, besides the compact slot.
pub const MIN_SLOT_LEN: u32 = 32;
pub const MAX_SLOT_LEN: u32 = 128;
/// Bytes of a compact slot: one word, the stream id above the value's low 32 bits (see the
/// module's "Compact records").
pub const COMPACT_SLOT_LEN: u32 = 8;
/// In a compact record's high half, the bit that marks it complete for its lap.
pub const COMPACT_MARK: u32 = 1 << 31;

/// The mark (bit 63 of the word) a complete compact record `n` of a ring of `slots` slots
/// carries: bit `log2(slots)` of `n`, inverted.
pub fn compact_mark(n: u64, slots: u32) -> u64 {
    !(n >> slots.trailing_zeros()) & 1
}
/// Offsets in a slot.
pub const SEQ: u64 = 0;
pub const TIME: u64 = 8;
pub const STREAM: u64 = 16;
pub const LEN: u64 = 20;
pub const CPU: u64 = 22;
pub const VALUES: u64 = 24;
/// Words (values, and the status and bytes of memory reads) one record holds at most, in the
/// longest slot.
pub const MAX_VALUES: usize = (MAX_SLOT_LEN as usize - VALUES as usize) / 8;
const _: () = assert!(MIN_SLOT_LEN.is_power_of_two() && MAX_SLOT_LEN.is_power_of_two());
const _: () = assert!(MIN_SLOT_LEN as u64 > VALUES);

/// A ring's geometry: how many slots, and how many bytes each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// A power of two (the code masks record numbers).
    pub slots: u32,
    /// A power of two from [`MIN_SLOT_LEN`] to [`MAX_SLOT_LEN`] (the code shifts by it).
    pub slot_len: u32,
}

impl Shape {
    /// `slots` slots of the longest length.
    pub const fn long(slots: u32) -> Shape {
        Shape { slots, slot_len: MAX_SLOT_LEN }
    }

    /// `slots` slots of the shortest length that holds a record of `words` words (at most
    /// [`MAX_VALUES`]; more get the longest slot, which the IR then refuses).
    pub fn fitting(slots: u32, words: usize) -> Shape {
        let bytes = (VALUES as usize + 8 * words).next_power_of_two();
        let slot_len = bytes.clamp(MIN_SLOT_LEN as usize, MAX_SLOT_LEN as usize) as u32;
        Shape { slots, slot_len }
    }

    /// `slots` compact slots: records of one 32-bit value (see the module's "Compact
    /// records").
    pub const fn compact(slots: u32) -> Shape {
        Shape { slots, slot_len: COMPACT_SLOT_LEN }
    }

    /// Whether its slots are compact: one word a record, completion by the lap's mark.
    pub fn is_compact(self) -> bool {
        self.slot_len == COMPACT_SLOT_LEN
    }

    /// Whether the IR can generate code for it: powers of two, slot length in range or
    /// compact.
    pub fn valid(self) -> bool {
        self.slots.is_power_of_two()
            && self.slot_len.is_power_of_two()
            && ((MIN_SLOT_LEN..=MAX_SLOT_LEN).contains(&self.slot_len) || self.is_compact())
    }

    /// Words one record holds at most (a compact record: one value, of which its low 32
    /// bits).
    pub fn max_values(self) -> usize {
        if self.is_compact() {
            return 1;
        }
        (self.slot_len as usize).saturating_sub(VALUES as usize) / 8
    }

    /// Offset of record `n`'s slot in the ring.
    pub fn slot(self, n: u64) -> u64 {
        SLOTS + (n & u64::from(self.slots).wrapping_sub(1)) * u64::from(self.slot_len)
    }
}

/// Bytes of a ring of this shape.
pub fn ring_len(shape: Shape) -> u64 {
    SLOTS + u64::from(shape.slot_len) * u64::from(shape.slots)
}

/// One record as read from a ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its number: records are numbered from 0 in the order they were reserved.
    pub seq: u64,
    pub time: u64,
    pub stream: u32,
    /// The CPU the writer ran on when it took `time`.
    pub cpu: u16,
    /// The record's words: its values, then its memory reads' status and byte words.
    pub values: Vec<u64>,
}

/// What one [`read`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Batch {
    /// Complete records from the tail on, in order.
    pub records: Vec<Record>,
    /// The new tail: the reader stores it at [`TAIL`] once it has copied the records.
    pub tail: u64,
    /// Records reserved after the last complete one (being written now, or abandoned).
    pub pending: u64,
    /// The ring's loss count.
    pub lost: u64,
}

/// Read the complete records of a ring from its tail on: `word(offset)` loads the aligned
/// u64 at that offset of the ring (from shared memory; each word is read once), `shape` is
/// the ring's. Reads race with writers, which is what `seq` is for.
pub fn read<F: Fn(u64) -> u64 + ?Sized>(word: &F, shape: Shape) -> Batch {
    let mut words = Vec::new();
    let c = copy(word, shape, &mut words);
    let first = c.tail - c.records;
    let records = packed(&words)
        .enumerate()
        .map(|(k, p)| Record {
            seq: first + k as u64,
            time: p.time,
            stream: p.stream,
            cpu: p.cpu,
            values: p.values.to_vec(),
        })
        .collect();
    Batch { records, tail: c.tail, pending: c.pending, lost: c.lost }
}

/// What one [`copy`] found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Copied {
    /// Complete records copied.
    pub records: u64,
    /// The new tail: the reader stores it at [`TAIL`] once it has copied the records.
    pub tail: u64,
    /// Records reserved after the last complete one (being written now, or abandoned).
    pub pending: u64,
    /// The ring's loss count.
    pub lost: u64,
    /// The time stamp of the last record copied (0 if none).
    pub last_time: u64,
}

/// [`read`] without a value per record: the complete records from the tail on are appended
/// to `out` packed, each as its time, its header word (stream in the low 32 bits, bytes of
/// words in the next 16, CPU in the top 16; the byte count is clamped to what a slot holds), then
/// its words. [`packed`] reads them back. This is the reader's fast path: no allocation per
/// record, and the packed words go to a raw trace as they are.
pub fn copy<F: Fn(u64) -> u64 + ?Sized>(word: &F, shape: Shape, out: &mut Vec<u64>) -> Copied {
    copy_ahead(word, &|_| {}, shape, out)
}

/// How many slots ahead of the one it reads [`copy_ahead`] asks for a prefetch.
pub const PREFETCH_AHEAD: u64 = 8;

/// [`copy`], calling `prefetch(offset)` for the slot [`PREFETCH_AHEAD`] records ahead while
/// that record is already reserved (never a slot a writer may still be about to take: a
/// prefetch of a line the writer then writes would cost it an invalidation). The slots were
/// just written on another CPU, so each read of one is a transfer from that CPU's cache;
/// asking early overlaps them.
pub fn copy_ahead<F, P>(word: &F, prefetch: &P, shape: Shape, out: &mut Vec<u64>) -> Copied
where
    F: Fn(u64) -> u64 + ?Sized,
    P: Fn(u64) + ?Sized,
{
    if shape.is_compact() {
        return each_compact(word, prefetch, shape, |w| {
            out.extend([0, w >> 32 | 8 << 32, w & 0xffff_ffff]);
        });
    }
    let max = shape.max_values() as u64;
    each_ahead(word, prefetch, shape, |time, meta, slot| {
        let len = ((meta >> 32 & 0xffff) / 8).min(max);
        out.push(time);
        out.push(meta & !(0xffff << 32) | (len * 8) << 32);
        out.extend((0..len).map(|k| word(slot + VALUES + 8 * k)));
    })
}

/// Bytes of a cache line: the unit in which [`read_lines`] gives a ring's slots back.
pub const LINE: u64 = 64;

/// The offsets (from the ring's start) of the cache lines that records `from..to` filled and
/// that no record from `to` on shares, each once and in order: the lines a reader that has
/// just taken those records may hand back to memory (`clflushopt`). Why: a line the reader
/// read stays in its CPU's caches, and when the writer comes round the ring to it again,
/// its store must first take the line from that CPU, one cross-core transfer for every two
/// 32-byte records: `kerf jit --plugin calls` on sqlite3 took 2.5 times as long for it
/// (bench/RESULTS.md, session 85). A line whose last record is not yet taken (the one `to`
/// falls in) is left for the next call, which starts with it. `to - from` is at most the
/// ring's slots (a reader never holds more).
pub fn read_lines(shape: Shape, from: u64, to: u64) -> impl Iterator<Item = u64> {
    let len = u128::from(shape.slot_len);
    // The ring's bytes, a power of two: a mask, where the reader's loop has no room for a
    // 128-bit remainder (a call).
    let mask = u64::from(shape.slots) * u64::from(shape.slot_len) - 1;
    // Lines of the ring's unwrapped byte stream (record n at bytes n * len..), as u128: n *
    // len could pass 2^64 in a very long trace. Only their low bits matter after that (2^64
    // is a multiple of the ring's bytes).
    let first = u128::from(from) * len / u128::from(LINE);
    let end = u128::from(to) * len / u128::from(LINE);
    let first_low = first as u64;
    (0..(end - first) as u64)
        .map(move |k| SLOTS + (first_low.wrapping_add(k).wrapping_mul(LINE) & mask))
}

/// [`copy_ahead`]'s walk without the copy: `visit(time, meta, slot)` for each complete record
/// from the tail on, in order (`meta` its stream, length and CPU word; its values at `slot +
/// VALUES`), for a reader that uses each record once, where it lies (the JIT's call-trace
/// tallies: a copy was half of their time). The caller stores the new tail after.
pub fn each_ahead<F, P, V>(word: &F, prefetch: &P, shape: Shape, mut visit: V) -> Copied
where
    F: Fn(u64) -> u64 + ?Sized,
    P: Fn(u64) + ?Sized,
    V: FnMut(u64, u64, u64),
{
    debug_assert!(shape.valid(), "the IR refuses other shapes");
    let tail = word(TAIL);
    let head = word(HEAD);
    let mut c = Copied { tail, lost: word(LOST), ..Copied::default() };
    while c.tail < head {
        // Slots are a power of two (the writer masks too): no division on the reader's path.
        let slot = shape.slot(c.tail);
        if c.tail + PREFETCH_AHEAD < head {
            prefetch(shape.slot(c.tail + PREFETCH_AHEAD));
        }
        if word(slot + SEQ) != c.tail + 1 {
            break;
        }
        // stream, len and cpu are one word: one load sees all three as written.
        let meta = word(slot + STREAM);
        c.last_time = word(slot + TIME);
        visit(c.last_time, meta, slot);
        c.tail += 1;
        c.records += 1;
    }
    c.pending = head - c.tail;
    c
}

/// [`each_ahead`] for a ring of compact slots ([`Shape::compact`]): `visit(word)` for each
/// complete record from the tail on (up to the `head` read once at the start, and the first
/// whose mark is not its lap's: see the module's "Compact records"), its stream in the high
/// half (the mark cleared), its value's low 32 bits in the low half; `prefetch` for the line
/// [`COMPACT_AHEAD`] records on, once a line, while that whole line is below `head` (as
/// [`copy_ahead`], never a line a writer may still store into: the prefetch would cost it
/// the line). The caller stores the new tail after.
pub fn each_compact<F, P, V>(word: &F, prefetch: &P, shape: Shape, mut visit: V) -> Copied
where
    F: Fn(u64) -> u64 + ?Sized,
    P: Fn(u64) + ?Sized,
    V: FnMut(u64),
{
    debug_assert!(shape.is_compact() && shape.valid());
    let tail = word(TAIL);
    let head = word(HEAD);
    let mask = u64::from(shape.slots) - 1;
    let per_line = LINE / u64::from(COMPACT_SLOT_LEN);
    let mut n = tail;
    while n < head {
        if n.is_multiple_of(per_line) && n + COMPACT_AHEAD + per_line <= head {
            prefetch(SLOTS + ((n + COMPACT_AHEAD) & mask) * u64::from(COMPACT_SLOT_LEN));
        }
        let w = word(SLOTS + (n & mask) * u64::from(COMPACT_SLOT_LEN));
        if w >> 63 != compact_mark(n, shape.slots) {
            break;
        }
        visit(w & !(1 << 63));
        n += 1;
    }
    let records = n - tail;
    Copied { records, tail: n, pending: head - n, lost: word(LOST), last_time: 0 }
}

/// How many records ahead of the one it reads [`each_compact`] asks for a prefetch: eight
/// lines.
pub const COMPACT_AHEAD: u64 = 64;

/// One record of [`copy`]'s packed words.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packed<'a> {
    pub time: u64,
    pub stream: u32,
    pub cpu: u16,
    pub values: &'a [u64],
}

/// The records of packed words (as [`copy`] appends them), in order. Words that end inside a
/// record (never made by `copy`) end the iteration there.
pub fn packed(words: &[u64]) -> impl Iterator<Item = Packed<'_>> {
    let mut at = 0;
    std::iter::from_fn(move || {
        let (&time, &meta) = (words.get(at)?, words.get(at + 1)?);
        let len = (meta >> 32 & 0xffff) as usize / 8;
        let values = words.get(at + 2..at + 2 + len)?;
        at += 2 + len;
        Some(Packed { time, stream: meta as u32, cpu: (meta >> 48) as u16, values })
    })
}

/// Offset of the count of events that found no thread table slot, in a per-thread area.
pub const NO_SLOT: u64 = 0;
/// Offset of the first ring in a per-thread area.
pub const RINGS: u64 = 64;

/// Bytes of an area of `count` rings of this shape.
pub fn rings_len(count: u64, shape: Shape) -> u64 {
    RINGS + count * ring_len(shape)
}

/// Bytes of a per-thread area of rings of this shape, one per thread table slot.
pub fn thread_rings_len(shape: Shape) -> u64 {
    rings_len(crate::timer::THREAD_SLOTS, shape)
}

/// Offset, in a per-thread area, of the ring of thread table slot `thread`.
pub fn thread_ring(thread: u64, shape: Shape) -> u64 {
    RINGS + thread * ring_len(shape)
}

/// What one [`read_threads`] found: a [`Batch`] per ring (indexed by thread table slot),
/// and the events of threads that had no ring.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ThreadBatches {
    pub rings: Vec<Batch>,
    pub no_slot: u64,
}

impl ThreadBatches {
    /// Every event the writers dropped: each ring's `lost`, plus those with no ring.
    pub fn lost(&self) -> u64 {
        self.no_slot + self.rings.iter().map(|b| b.lost).sum::<u64>()
    }
}

/// Read every ring of a per-thread area (`word(offset)` as for [`read`], offsets from the
/// area's start) from its tail on. The reader stores each ring's new tail at
/// `thread_ring(k, shape) + TAIL` once it has copied the records out.
pub fn read_threads<F: Fn(u64) -> u64 + ?Sized>(word: &F, shape: Shape) -> ThreadBatches {
    read_rings(word, shape, crate::timer::THREAD_SLOTS)
}

/// [`read_threads`] for an area of `count` rings (per-CPU rings: `no_slot` stays 0).
pub fn read_rings<F: Fn(u64) -> u64 + ?Sized>(word: &F, shape: Shape, count: u64) -> ThreadBatches {
    let rings = (0..count)
        .map(|k| {
            let base = thread_ring(k, shape);
            read(&|o| word(base + o), shape)
        })
        .collect();
    ThreadBatches { rings, no_slot: word(NO_SLOT) }
}

/// One record of a merged stream, with the ring it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Merged {
    pub ring: usize,
    pub record: Record,
}

/// The records of `batches` (ring `k` is `batches[k]`) in one order: by time stamp, then
/// ring, then record number. Each ring's own records stay in their order when its clock
/// goes forward, as one thread's time stamp counter does. Losses and pending records stay
/// in the batches, counted per ring.
pub fn merge(batches: &[Batch]) -> Vec<Merged> {
    let mut out: Vec<Merged> = batches
        .iter()
        .enumerate()
        .flat_map(|(ring, b)| b.records.iter().map(move |r| Merged { ring, record: r.clone() }))
        .collect();
    out.sort_by_key(|m| (m.record.time, m.ring, m.record.seq));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(m: &mut [u64], off: u64, v: u64) {
        m[(off / 8) as usize] = v;
    }

    /// Write record `n` (complete) into the ring at `base` of this shape.
    fn record(m: &mut [u64], base: u64, shape: Shape, n: u64, time: u64, values: &[u64]) {
        let slot = base + SLOTS + (n % shape.slots as u64) * shape.slot_len as u64;
        put(m, slot + TIME, time);
        put(m, slot + STREAM, ((8 * values.len() as u64) << 32) | 3);
        for (k, v) in values.iter().enumerate() {
            put(m, slot + VALUES + 8 * k as u64, *v);
        }
        put(m, slot + SEQ, n + 1);
    }

    /// The lines given back are those wholly filled by the records taken: a half-taken line
    /// waits for the next call, which gives it first; the ring's end wraps to its start; 64-
    /// and 128-byte slots give one and two lines a record.
    #[test]
    fn read_lines_are_the_whole_lines_of_the_records_taken_once_each() {
        let small = Shape { slots: 8, slot_len: 32 };
        let lines = |shape, from, to| read_lines(shape, from, to).collect::<Vec<_>>();
        // Records 0..3: line 0 whole (records 0 and 1), line 1 half (record 2).
        assert_eq!(lines(small, 0, 3), [SLOTS]);
        // Then 3..9: line 1 (records 2, 3), 2, 3, and the wrapped record 8 in line 0 half.
        assert_eq!(lines(small, 3, 9), [SLOTS + 64, SLOTS + 128, SLOTS + 192]);
        assert_eq!(lines(small, 9, 10), [SLOTS]);
        assert_eq!(lines(small, 10, 10), Vec::<u64>::new());
        // A whole ring at once: every line once.
        assert_eq!(lines(small, 16, 24), [SLOTS, SLOTS + 64, SLOTS + 128, SLOTS + 192]);
        let wide = Shape { slots: 4, slot_len: 128 };
        assert_eq!(lines(wide, 3, 5), [SLOTS + 384, SLOTS + 448, SLOTS, SLOTS + 64]);
        // Record numbers whose bytes pass 2^64.
        let mid = Shape { slots: 4, slot_len: 64 };
        assert_eq!(lines(mid, u64::MAX - 1, u64::MAX), [SLOTS + 128]);
    }

    /// A compact ring: words from the tail to the head read once, in order, wrapping; the
    /// line ahead asked for once a line while it is below the head; the copy's packed form
    /// the stream and the value's low half; 8-byte slots valid, other short ones not.
    #[test]
    fn a_compact_ring_is_read_from_tail_to_head_wrapping() {
        let shape = Shape::compact(128);
        assert!(shape.valid() && shape.is_compact() && shape.max_values() == 1);
        assert!(!Shape { slots: 128, slot_len: 16 }.valid());
        let mut mem = vec![0u64; (ring_len(shape) / 8) as usize];
        let word = |n: u64| (n + 1) << 32 | (0xffff_0000 + n);
        // Records 100..300 (slots 100..127, 0..127, 0..43), the first 100 taken already,
        // marked for their laps; record 300 reserved and not written (its slot still holds
        // record 172, of the lap before).
        for n in 100..300 {
            mem[((SLOTS + (n % 128) * 8) / 8) as usize] = word(n) | compact_mark(n, 128) << 63;
        }
        assert_eq!(
            (compact_mark(127, 128), compact_mark(128, 128), compact_mark(256, 128)),
            (1, 0, 1)
        );
        mem[(HEAD / 8) as usize] = 301;
        mem[(TAIL / 8) as usize] = 190;
        mem[(LOST / 8) as usize] = 7;
        let read = |o: u64| mem[(o / 8) as usize];
        let asked = std::cell::RefCell::new(Vec::new());
        let ahead = |o: u64| asked.borrow_mut().push(o);
        let mut seen = Vec::new();
        let c = each_compact(&read, &ahead, shape, |w| seen.push(w));
        assert_eq!(seen, (190..300).map(word).collect::<Vec<_>>());
        assert_eq!((c.records, c.tail, c.pending, c.lost), (110, 300, 1, 7));
        // At records 192, 200, .. 224 the lines of records 256 (slot 0), 264, .. 288; at 232
        // the line of 296..303 holds records from the head (301) on: not asked for.
        let lines: Vec<u64> = (0..5).map(|k| SLOTS + 64 * k).collect();
        assert_eq!(*asked.borrow(), lines);
        let mut out = Vec::new();
        copy(&read, shape, &mut out);
        let first: Vec<Packed<'_>> = packed(&out).take(1).collect();
        let values = [0xffff_0000 + 190];
        assert_eq!(first, [Packed { time: 0, stream: 191, cpu: 0, values: &values }]);
        assert_eq!(packed(&out).count(), 110);
    }

    #[test]
    fn a_shape_fits_the_shortest_slot_that_holds_its_records() {
        let lens: Vec<(usize, u32)> =
            [0, 1, 2, 5, 6, 13].iter().map(|&w| (w, Shape::fitting(8, w).slot_len)).collect();
        assert_eq!(lens, [(0, 32), (1, 32), (2, 64), (5, 64), (6, 128), (13, 128)]);
        for (w, len) in lens {
            let shape = Shape { slots: 8, slot_len: len };
            assert!(shape.valid() && shape.max_values() >= w, "{w} words, {len}-byte slot");
        }
        // Longer than any slot: the longest, which the IR refuses to fill.
        assert_eq!(Shape::fitting(8, MAX_VALUES + 1), Shape::long(8));
        assert!(
            !Shape { slots: 8, slot_len: 16 }.valid() && !Shape { slots: 6, slot_len: 64 }.valid()
        );
        assert_eq!(Shape { slots: 8, slot_len: 64 }.slot(9), SLOTS + 64);
    }

    #[test]
    fn read_wraps_around_and_reads_a_full_ring_whole() {
        let slots = Shape::long(4);
        let mut mem = vec![0u64; (ring_len(slots) / 8) as usize];
        // Records 6..10 (slots 2, 3, 0, 1): the ring is full, and 3 more were dropped.
        for n in 6..10 {
            record(&mut mem, 0, slots, n, 1000 + n, &[n]);
        }
        put(&mut mem, TAIL, 6);
        put(&mut mem, HEAD, 10);
        put(&mut mem, LOST, 3);
        let b = read(&|o| mem[(o / 8) as usize], slots);
        let got: Vec<(u64, u64, u64)> =
            b.records.iter().map(|r| (r.seq, r.time, r.values[0])).collect();
        assert_eq!(got, [(6, 1006, 6), (7, 1007, 7), (8, 1008, 8), (9, 1009, 9)]);
        assert_eq!((b.tail, b.pending, b.lost), (10, 0, 3));
    }

    #[test]
    fn read_threads_reads_each_ring_and_counts_losses_apart() {
        let slots = Shape::long(2);
        let mut mem = vec![0u64; (thread_rings_len(slots) / 8) as usize];
        put(&mut mem, NO_SLOT, 5);
        // Thread slot 0: two records, one lost. Slot 7: one complete, one reserved only
        // (a signal handler's record 1 completed while record 0 was still being written).
        let r0 = thread_ring(0, slots);
        record(&mut mem, r0, slots, 0, 10, &[1]);
        record(&mut mem, r0, slots, 1, 20, &[2]);
        put(&mut mem, r0 + HEAD, 2);
        put(&mut mem, r0 + LOST, 1);
        let r7 = thread_ring(7, slots);
        record(&mut mem, r7, slots, 1, 15, &[9]);
        put(&mut mem, r7 + HEAD, 2);
        let t = read_threads(&|o| mem[(o / 8) as usize], slots);
        assert_eq!(t.rings.len() as u64, crate::timer::THREAD_SLOTS);
        assert_eq!((t.rings[0].records.len(), t.rings[0].lost, t.rings[0].tail), (2, 1, 2));
        // Record 0 of ring 7 is not complete: the reader stops before it.
        assert_eq!((t.rings[7].records.len(), t.rings[7].pending, t.rings[7].tail), (0, 2, 0));
        assert_eq!(t.lost(), 6);
        let others = t.rings.iter().enumerate().filter(|(k, _)| *k != 0 && *k != 7);
        assert!(others.into_iter().all(|(_, b)| *b == Batch::default()));
    }

    #[test]
    fn copy_packs_what_read_reads() {
        let slots = Shape::long(4);
        let mut mem = vec![0u64; (ring_len(slots) / 8) as usize];
        for n in 6..9 {
            record(&mut mem, 0, slots, n, 1000 + n, &vec![n; n as usize - 5]);
        }
        // A header claiming more words than a slot holds is clamped, as `read` does.
        // (Record 8 is in slot 0.)
        put(&mut mem, SLOTS + STREAM, (0x7u64 << 48) | (0xfff8 << 32) | 3);
        put(&mut mem, TAIL, 6);
        put(&mut mem, HEAD, 10);
        put(&mut mem, LOST, 2);
        let mut words = vec![42];
        let c = copy(&|o| mem[(o / 8) as usize], slots, &mut words);
        assert_eq!(c, Copied { records: 3, tail: 9, pending: 1, lost: 2, last_time: 1008 });
        assert_eq!(words[0], 42, "copy appends");
        let got: Vec<(u64, u32, u16, usize)> =
            packed(&words[1..]).map(|p| (p.time, p.stream, p.cpu, p.values.len())).collect();
        assert_eq!(got, [(1006, 3, 0, 1), (1007, 3, 0, 2), (1008, 3, 7, MAX_VALUES)]);
        let b = read(&|o| mem[(o / 8) as usize], slots);
        let read: Vec<(u64, u32, u16, usize)> =
            b.records.iter().map(|r| (r.time, r.stream, r.cpu, r.values.len())).collect();
        assert_eq!(read, got);
        assert_eq!(b.records.iter().map(|r| r.seq).collect::<Vec<_>>(), [6, 7, 8]);
        // Words cut inside a record end the iteration before it.
        assert_eq!(packed(&words[1..words.len() - 1]).count(), 2);
    }

    #[test]
    fn merge_orders_by_time_then_ring_then_sequence() {
        let rec = |seq, time| Record { seq, time, stream: 1, cpu: 0, values: vec![] };
        let batch = |records| Batch { records, ..Batch::default() };
        let batches = [
            batch(vec![rec(0, 5), rec(1, 7), rec(2, 7)]),
            batch(vec![]),
            batch(vec![rec(4, 3), rec(5, 7), rec(6, 9)]),
        ];
        let got: Vec<(usize, u64, u64)> =
            merge(&batches).iter().map(|m| (m.ring, m.record.time, m.record.seq)).collect();
        assert_eq!(got, [(2, 3, 4), (0, 5, 0), (0, 7, 1), (0, 7, 2), (2, 7, 5), (2, 9, 6)]);
    }

    #[test]
    fn read_stops_at_the_first_incomplete_record() {
        let slots = Shape::long(4);
        let mut mem = vec![0u64; (ring_len(slots) / 8) as usize];
        let w = |m: &mut Vec<u64>, off: u64, v: u64| m[(off / 8) as usize] = v;
        // Records 4 and 5 complete (slots 0 and 1), 6 reserved but not written.
        w(&mut mem, TAIL, 4);
        w(&mut mem, HEAD, 7);
        w(&mut mem, LOST, 2);
        for (n, s) in [(4u64, 0u64), (5, 1)] {
            let slot = SLOTS + s * MAX_SLOT_LEN as u64;
            w(&mut mem, slot + SEQ, n + 1);
            w(&mut mem, slot + TIME, 100 + n);
            // CPU 0x801 (above a byte: the reader must not take it for part of len).
            w(&mut mem, slot + STREAM, (0x801 + n) << 48 | (16u64 << 32) | 9);
            w(&mut mem, slot + VALUES, n * 10);
            w(&mut mem, slot + VALUES + 8, n * 20);
        }
        // Slot 2 still holds record 2 of the previous lap.
        w(&mut mem, SLOTS + 2 * MAX_SLOT_LEN as u64 + SEQ, 3);
        let b = read(&|o| mem[(o / 8) as usize], slots);
        assert_eq!(b.tail, 6);
        assert_eq!((b.pending, b.lost), (1, 2));
        assert_eq!(
            b.records,
            [
                Record { seq: 4, time: 104, stream: 9, cpu: 0x805, values: vec![40, 80] },
                Record { seq: 5, time: 105, stream: 9, cpu: 0x806, values: vec![50, 100] },
            ]
        );
    }
}
