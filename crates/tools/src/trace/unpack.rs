//! Packed ring records (as `kerf_codegen::ring::copy` appends them) made into events in one
//! time order: the live reader's decoding, and `kerf trace convert`'s for raw traces that the
//! reader wrote packed (`raw`'s packed records) to keep up with very high rates.
//!
//! The order is the reader's: a drain's records, and those held back by the drain before, sorted
//! by time (then source; a ring's own records keep their order); records stamped at or after
//! the drain's cut wait for the next one. The cut is the time the drain began (a peer in a
//! ring read earlier in the pass, the kernel's system call right after the libc wrapper that
//! made it, may not have been complete yet), or earlier where a ring holds a record reserved
//! and not complete: its writer stamps it after reserving it, so it will be younger than the
//! last read that found it not reserved yet ([`RingWatch`]). The last drain holds nothing
//! back.

use super::event::{Event, PointKind};
use super::program::Decode;
use kerf_codegen::ring;

/// TSC to CLOCK_MONOTONIC: ticks per ns, measured over the installation, and one point where
/// both were read.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clock {
    pub ticks_per_ns: f64,
    pub anchor_tsc: u64,
    pub anchor_ns: u64,
}

impl Clock {
    /// Ticks of the time stamp counter in `ns` nanoseconds.
    pub fn ticks(&self, ns: f64) -> u64 {
        (ns * self.ticks_per_ns) as u64
    }

    /// CLOCK_MONOTONIC ns of a TSC reading.
    pub fn ns(&self, tsc: u64) -> u64 {
        // The difference fits an i64 (centuries of ticks either way); no 128-bit float
        // conversions on the reader's path.
        let d = tsc.wrapping_sub(self.anchor_tsc) as i64;
        (self.anchor_ns as i64).saturating_add((d as f64 / self.ticks_per_ns) as i64).max(0) as u64
    }
}

/// What decoding one source's records needs: its process id (events of a target that gives
/// none), and per probe its kind, stream and [`Decode`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceDecode {
    pub pid: u32,
    pub probes: Vec<(PointKind, u16, Decode)>,
}

/// One ring's writers as the reader saw them, for the cut ([`RingWatch::read`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingWatch {
    /// The ring's head at its last read, and a time stamp taken before that read.
    seen: (u64, u64),
    /// The first record reserved and not complete: its number, a time its time stamp is
    /// known to be after, and when the reader first found it so.
    pending: Option<(u64, u64, u64)>,
}

impl RingWatch {
    /// A ring whose head was 0 at time stamp `start` (before the probes went in).
    pub fn new(start: u64) -> RingWatch {
        RingWatch { seen: (0, start), pending: None }
    }

    /// The ring read at time stamp `began` (taken before the read): its records were
    /// complete up to `tail`, and `head` reserved. Returns the time its first record not
    /// complete is known to be after (`None`: none), which the drain's cut must not pass;
    /// a record waited for longer than `patience` ticks (its writer killed, or stopped by a
    /// debugger) no longer holds the cut back.
    ///
    /// Record `n` reserved after a read that found `head <= n` is stamped after that read's
    /// time stamp. One reserved before the last read was behind the pending record of that
    /// read (the reader stops at the first record not complete), which was reserved after
    /// the read its bound came from, so `n` was too.
    pub fn read(&mut self, began: u64, tail: u64, head: u64, patience: u64) -> Option<u64> {
        let (seen_head, seen_at) = self.seen;
        self.seen = (head, began);
        if tail >= head {
            self.pending = None;
            return None;
        }
        let (after, since) = match self.pending {
            Some((n, after, since)) if n == tail => (after, since),
            _ if tail >= seen_head => (seen_at, began),
            Some((_, after, _)) => (after, began),
            // Not reached (a record reserved before the last read was pending then, or
            // behind one that was); the earliest time there is.
            None => (0, began),
        };
        self.pending = Some((tail, after, since));
        (began.saturating_sub(since) < patience).then_some(after)
    }
}

/// Packed records waiting for their drain's end, and the records held back from the last.
#[derive(Default)]
pub struct Unpacker {
    /// Per source id (`None`: not known yet).
    sources: Vec<Option<SourceDecode>>,
    /// Packed words of every record waiting, of any source.
    words: Vec<u64>,
    /// Per record waiting: its time, source, and where its words start.
    index: Vec<(u64, u16, usize)>,
    /// The process of a source's thread where it is not the source's own (a forked child's
    /// thread, whose records carry its thread id only): `(source, tid) -> pid`.
    pids: std::collections::HashMap<(u16, u32), u32>,
}

/// Why a packed record cannot be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnpackError {
    /// Its source has no decode table.
    NoSource(u16),
    /// Its probe is not in its source's table.
    NoProbe { source: u16, probe: u32 },
}

impl std::fmt::Display for UnpackError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UnpackError::NoSource(s) => {
                write!(f, "packed records of source {s}, which has no decode table")
            }
            UnpackError::NoProbe { source, probe } => {
                write!(f, "packed record of probe {probe}, not in source {source}'s decode table")
            }
        }
    }
}

impl Unpacker {
    /// The decode table of source `id` (replacing any before).
    pub fn source(&mut self, id: u16, d: SourceDecode) {
        let i = usize::from(id);
        if self.sources.len() <= i {
            self.sources.resize(i + 1, None);
        }
        self.sources[i] = Some(d);
    }

    /// Takes source `src`'s packed records (whole records, as `ring::copy` made them), checking
    /// that each names a probe of the source's table: nothing is taken if one does not.
    pub fn add(&mut self, src: u16, words: &[u64]) -> Result<(), UnpackError> {
        let d = self
            .sources
            .get(usize::from(src))
            .and_then(Option::as_ref)
            .ok_or(UnpackError::NoSource(src))?;
        if let Some(p) = ring::packed(words).find(|p| p.stream as usize >= d.probes.len()) {
            return Err(UnpackError::NoProbe { source: src, probe: p.stream });
        }
        let base = self.words.len();
        let mut at = base;
        for p in ring::packed(words) {
            self.index.push((p.time, src, at));
            at += 2 + p.values.len();
        }
        self.words.extend_from_slice(&words[..at - base]);
        Ok(())
    }

    /// Thread `tid` of source `src` belongs to process `pid` (a forked child), from now on:
    /// its records' events carry that process id rather than the source's.
    pub fn thread_pid(&mut self, src: u16, tid: u32, pid: u32) {
        let own = self.sources.get(usize::from(src)).and_then(Option::as_ref).map(|d| d.pid);
        if own == Some(pid) || pid == 0 {
            self.pids.remove(&(src, tid));
        } else {
            self.pids.insert((src, tid), pid);
        }
    }

    /// Records waiting.
    pub fn waiting(&self) -> usize {
        self.index.len()
    }

    /// The end of a drain whose cut is TSC `cut` (`None`: the last one): every record
    /// stamped before it goes to `out` as an event, in time order; the rest wait.
    pub fn drain(&mut self, cut: Option<u64>, clock: &Clock, mut out: impl FnMut(Event)) {
        // Stable: records of one ring with one time stamp keep their ring's order.
        self.index.sort_by_key(|&(time, src, _)| (time, src));
        let cut = match cut {
            Some(b) => self.index.partition_point(|&(time, _, _)| time < b),
            None => self.index.len(),
        };
        for &(time, src, at) in &self.index[..cut] {
            let Some(p) = ring::packed(&self.words[at..]).next() else { continue };
            let Some(d) = self.sources.get(usize::from(src)).and_then(Option::as_ref) else {
                continue;
            };
            let Some((kind, stream, dec)) = d.probes.get(p.stream as usize) else { continue };
            let tid = dec.tid(p.values);
            let child = || self.pids.get(&(src, tid)).copied();
            out(Event {
                source: src,
                time_ns: clock.ns(time),
                tsc: time,
                pid: dec.pid(p.values).or_else(child).unwrap_or(d.pid),
                tid,
                cpu: u32::from(p.cpu),
                probe: p.stream,
                stream: *stream,
                kind: *kind,
                values: dec.values(p.values, p.cpu),
            });
        }
        // What waits moves to the front of fresh buffers (few records: those of the last
        // moments of the drain).
        let mut words = Vec::new();
        let mut index = Vec::with_capacity(self.index.len() - cut);
        for &(time, src, at) in &self.index[cut..] {
            let n = 2 + (self.words[at + 1] >> 32 & 0xffff) as usize / 8;
            index.push((time, src, words.len()));
            words.extend_from_slice(&self.words[at..at + n]);
        }
        self.words = words;
        self.index = index;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::event::Value;
    use crate::trace::program::Slot;

    fn rec(out: &mut Vec<u64>, time: u64, probe: u32, cpu: u16, values: &[u64]) {
        out.push(time);
        out.push(u64::from(cpu) << 48 | (8 * values.len() as u64) << 32 | u64::from(probe));
        out.extend_from_slice(values);
    }

    fn decode_tid_and_one() -> Decode {
        Decode { tid: true, pair: false, captures: vec![Slot::Word(1), Slot::Cpu], reads: vec![] }
    }

    /// Two sources, records across two drains: each drain gives what was stamped before it
    /// began, in time order (source breaks ties), values decoded; the last gives the rest.
    #[test]
    fn drains_give_time_order_and_hold_back_the_late() {
        let clock = Clock { ticks_per_ns: 2.0, anchor_tsc: 1000, anchor_ns: 5_000 };
        let mut u = Unpacker::default();
        let probes = vec![(PointKind::Entry, 0, decode_tid_and_one())];
        u.source(0, SourceDecode { pid: 77, probes: probes.clone() });
        u.source(1, SourceDecode { pid: 88, probes });
        let (mut a, mut b) = (Vec::new(), Vec::new());
        rec(&mut a, 1100, 0, 1, &[7, 1]);
        rec(&mut a, 1300, 0, 1, &[7, 3]);
        rec(&mut b, 1100, 0, 0, &[8, 2]);
        rec(&mut b, 1200, 0, 0, &[8, 4]);
        u.add(0, &a).unwrap();
        u.add(1, &b).unwrap();
        let mut got = Vec::new();
        u.drain(Some(1250), &clock, |e| got.push(e));
        let key = |e: &Event| (e.source, e.time_ns, e.pid, e.tid, e.values.clone());
        let one = |v: u64, cpu: u64| vec![Value::Unsigned(v), Value::Unsigned(cpu)];
        assert_eq!(
            got.iter().map(key).collect::<Vec<_>>(),
            [(0, 5050, 77, 7, one(1, 1)), (1, 5050, 88, 8, one(2, 0)), (1, 5100, 88, 8, one(4, 0))]
        );
        assert_eq!(u.waiting(), 1);
        let mut c = Vec::new();
        rec(&mut c, 1250, 0, 0, &[8, 5]);
        u.add(1, &c).unwrap();
        got.clear();
        u.drain(None, &clock, |e| got.push(e));
        assert_eq!(
            got.iter().map(key).collect::<Vec<_>>(),
            [(1, 5125, 88, 8, one(5, 0)), (0, 5150, 77, 7, one(3, 1))]
        );
        assert_eq!(u.waiting(), 0);
    }

    #[test]
    fn records_of_unknown_sources_or_probes_are_refused_whole() {
        let mut u = Unpacker::default();
        let mut w = Vec::new();
        rec(&mut w, 1, 0, 0, &[1, 2]);
        assert_eq!(u.add(3, &w), Err(UnpackError::NoSource(3)));
        u.source(
            3,
            SourceDecode { pid: 1, probes: vec![(PointKind::Instant, 0, decode_tid_and_one())] },
        );
        rec(&mut w, 2, 1, 0, &[1, 2]);
        assert_eq!(u.add(3, &w), Err(UnpackError::NoProbe { source: 3, probe: 1 }));
        assert_eq!(u.waiting(), 0);
    }

    /// The bound a ring's first record not complete puts on the cut, drain by drain.
    #[test]
    fn a_pending_record_bounds_the_cut_by_the_read_before_its_reservation() {
        const PATIENCE: u64 = 1000;
        let mut w = RingWatch::new(5);
        // Nothing reserved, then all complete: no bound.
        assert_eq!(w.read(10, 0, 0, PATIENCE), None);
        assert_eq!(w.read(20, 4, 4, PATIENCE), None);
        // Record 4 reserved since the read at 20 (head was 4): stamped after 20.
        assert_eq!(w.read(30, 4, 6, PATIENCE), Some(20));
        // Still waiting: the same bound, however late the read.
        assert_eq!(w.read(40, 4, 9, PATIENCE), Some(20));
        // 4 is done; 5, reserved before the read at 40, was behind it: 20 still holds.
        assert_eq!(w.read(50, 5, 9, PATIENCE), Some(20));
        // 5 done too; 9 was reserved after the read at 50 (head 9): 50.
        assert_eq!(w.read(60, 9, 10, PATIENCE), Some(50));
        // Complete again: no bound; a later reservation is bounded by this read.
        assert_eq!(w.read(70, 10, 10, PATIENCE), None);
        assert_eq!(w.read(80, 10, 11, PATIENCE), Some(70));
        // Waited for longer than the patience: it no longer holds the cut.
        assert_eq!(w.read(80 + PATIENCE - 1, 10, 11, PATIENCE), Some(70));
        assert_eq!(w.read(80 + PATIENCE, 10, 11, PATIENCE), None);
        // A ring first read with a record pending: bounded by the start.
        assert_eq!(RingWatch::new(5).read(10, 0, 1, PATIENCE), Some(5));
    }

    /// A record stamped before the cut of an earlier drain never comes after that drain's
    /// events: the case the cut exists for, two rings and a writer preempted mid-record.
    #[test]
    fn a_preempted_writers_record_keeps_its_place_in_time() {
        let clock = Clock { ticks_per_ns: 1.0, anchor_tsc: 0, anchor_ns: 0 };
        let probes = vec![(PointKind::Instant, 0, decode_tid_and_one())];
        let mut u = Unpacker::default();
        u.source(0, SourceDecode { pid: 1, probes });
        let (mut a, mut b) = (RingWatch::new(0), RingWatch::new(0));
        let mut out = Vec::new();
        // Drain at 100: ring A has record 0 reserved, not complete; ring B has one stamped 60.
        let mut cut = 100u64;
        if let Some(after) = a.read(100, 0, 1, u64::MAX) {
            cut = cut.min(after);
        }
        let mut w = Vec::new();
        rec(&mut w, 60, 0, 0, &[2, 0]);
        u.add(0, &w).unwrap();
        b.read(100, 1, 1, u64::MAX);
        u.drain(Some(cut), &clock, |e| out.push(e.time_ns));
        assert!(out.is_empty(), "B's record waits: A's may be older");
        // Drain at 200: A's record is complete, stamped 50.
        let mut w = Vec::new();
        rec(&mut w, 50, 0, 0, &[1, 0]);
        u.add(0, &w).unwrap();
        assert_eq!(a.read(200, 1, 1, u64::MAX), None);
        u.drain(Some(200), &clock, |e| out.push(e.time_ns));
        assert_eq!(out, [50, 60]);
    }
}
