//! The record ring the IR's `emit` op writes into (logdev's capture buffer): records of
//! fixed-size slots in kerf's data heap, written by any thread of the target and read by
//! kerf without a system call.
//!
//! Ring (`ring_len(slots)` bytes; the three counters on cache lines of their own):
//! ```text
//! +0    head   u64   records reserved so far (writers: lock cmpxchg)
//! +64   tail   u64   records the reader has consumed (only the reader writes it)
//! +128  lost   u64   records dropped because the ring was full (lock inc)
//! +192  slots  [SLOT_LEN bytes; slots], record n in slot n % slots (slots a power of two)
//! ```
//! Slot (`SLOT_LEN` = 64 bytes, one cache line):
//! ```text
//! +0   seq     u64   n + 1 once record n is complete (written last)
//! +8   time    u64   time stamp counter when the record was made
//! +16  stream  u32   stream id (which probe or event kind made it)
//! +20  len     u32   bytes of values that follow (8 per value)
//! +24  values  [u64; MAX_VALUES]
//! ```
//! A writer (1) reads the time stamp counter, (2) reserves record `n = head` by moving
//! `head` from `n` to `n + 1` with `lock cmpxchg` (retrying if another writer moved it
//! first) unless `n - tail >= slots`, in which case the ring is full and it adds one to
//! `lost` instead and writes nothing, (3) writes time, stream, length and values into slot
//! `n % slots`, (4) writes `seq = n + 1`. x86 keeps stores in order, so a reader that sees
//! `seq == n + 1` sees the whole record; the reader copies it out and only then moves
//! `tail` past it, which is what lets a writer reuse the slot.
//!
//! Why a compare-and-swap and not a fetch-and-add on `head`: a writer that added first and
//! found the ring full afterwards would leave a record number that is never written, and
//! the reader could not tell it from a record still being written. With the swap, every
//! reserved record is written, and a full ring costs the writer only the `lost` count.
//! A record reserved by a thread that dies between (2) and (4) (killed, or a fault in a
//! captured load) is never completed: the reader stops there; [`read`] reports it as
//! pending, and the reader may skip it once later records are complete.

/// Offsets in a ring.
pub const HEAD: u64 = 0;
pub const TAIL: u64 = 64;
pub const LOST: u64 = 128;
pub const SLOTS: u64 = 192;

/// Bytes of one slot (a power of two: the code indexes slots with a shift).
pub const SLOT_LEN: u64 = 64;
/// Offsets in a slot.
pub const SEQ: u64 = 0;
pub const TIME: u64 = 8;
pub const STREAM: u64 = 16;
pub const LEN: u64 = 20;
pub const VALUES: u64 = 24;
/// Values one record holds at most.
pub const MAX_VALUES: usize = ((SLOT_LEN - VALUES) / 8) as usize;
const _: () = assert!(SLOT_LEN.is_power_of_two());

/// Bytes of a ring of `slots` slots.
pub fn ring_len(slots: u32) -> u64 {
    SLOTS + SLOT_LEN * slots as u64
}

/// One record as read from a ring.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Its number: records are numbered from 0 in the order they were reserved.
    pub seq: u64,
    pub time: u64,
    pub stream: u32,
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
/// u64 at that offset of the ring (from shared memory; each word is read once), `slots` is
/// the ring's slot count. Reads race with writers, which is what `seq` is for.
pub fn read(word: &dyn Fn(u64) -> u64, slots: u32) -> Batch {
    let slots = slots as u64;
    let tail = word(TAIL);
    let head = word(HEAD);
    let mut b = Batch { tail, lost: word(LOST), ..Batch::default() };
    while b.tail < head {
        let slot = SLOTS + (b.tail % slots) * SLOT_LEN;
        if word(slot + SEQ) != b.tail + 1 {
            break;
        }
        let meta = word(slot + STREAM);
        let len = ((meta >> 32) / 8).min(MAX_VALUES as u64);
        b.records.push(Record {
            seq: b.tail,
            time: word(slot + TIME),
            stream: meta as u32,
            values: (0..len).map(|k| word(slot + VALUES + 8 * k)).collect(),
        });
        b.tail += 1;
    }
    b.pending = head - b.tail;
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_stops_at_the_first_incomplete_record() {
        let slots = 4u32;
        let mut mem = vec![0u64; (ring_len(slots) / 8) as usize];
        let w = |m: &mut Vec<u64>, off: u64, v: u64| m[(off / 8) as usize] = v;
        // Records 4 and 5 complete (slots 0 and 1), 6 reserved but not written.
        w(&mut mem, TAIL, 4);
        w(&mut mem, HEAD, 7);
        w(&mut mem, LOST, 2);
        for (n, s) in [(4u64, 0u64), (5, 1)] {
            let slot = SLOTS + s * SLOT_LEN;
            w(&mut mem, slot + SEQ, n + 1);
            w(&mut mem, slot + TIME, 100 + n);
            w(&mut mem, slot + STREAM, (16u64 << 32) | 9);
            w(&mut mem, slot + VALUES, n * 10);
            w(&mut mem, slot + VALUES + 8, n * 20);
        }
        // Slot 2 still holds record 2 of the previous lap.
        w(&mut mem, SLOTS + 2 * SLOT_LEN + SEQ, 3);
        let b = read(&|o| mem[(o / 8) as usize], slots);
        assert_eq!(b.tail, 6);
        assert_eq!((b.pending, b.lost), (1, 2));
        assert_eq!(
            b.records,
            [
                Record { seq: 4, time: 104, stream: 9, values: vec![40, 80] },
                Record { seq: 5, time: 105, stream: 9, values: vec![50, 100] },
            ]
        );
    }
}
