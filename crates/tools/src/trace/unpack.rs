//! Packed ring records (as `kerf_codegen::ring::copy` appends them) made into events in one
//! time order: the live reader's decoding, and `kerf trace convert`'s for raw traces that the
//! reader wrote packed (`raw`'s packed records) to keep up with very high rates.
//!
//! The order is the reader's: a drain's records, and those held back by the drain before, sorted
//! by time (then source; a ring's own records keep their order); records stamped after the
//! drain began wait for the next one, since a peer in a ring read earlier in the pass (the
//! kernel's system call right after the libc wrapper that made it) may not have been complete
//! yet. The last drain holds nothing back.

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

/// Packed records waiting for their drain's end, and the records held back from the last.
#[derive(Default)]
pub struct Unpacker {
    /// Per source id (`None`: not known yet).
    sources: Vec<Option<SourceDecode>>,
    /// Packed words of every record waiting, of any source.
    words: Vec<u64>,
    /// Per record waiting: its time, source, and where its words start.
    index: Vec<(u64, u16, usize)>,
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

    /// Records waiting.
    pub fn waiting(&self) -> usize {
        self.index.len()
    }

    /// The end of a drain that began at TSC `began` (`None`: the last one): every record
    /// stamped before it goes to `out` as an event, in time order; the rest wait.
    pub fn drain(&mut self, began: Option<u64>, clock: &Clock, mut out: impl FnMut(Event)) {
        // Stable: records of one ring with one time stamp keep their ring's order.
        self.index.sort_by_key(|&(time, src, _)| (time, src));
        let cut = match began {
            Some(b) => self.index.partition_point(|&(time, _, _)| time < b),
            None => self.index.len(),
        };
        for &(time, src, at) in &self.index[..cut] {
            let Some(p) = ring::packed(&self.words[at..]).next() else { continue };
            let Some(d) = self.sources.get(usize::from(src)).and_then(Option::as_ref) else {
                continue;
            };
            let Some((kind, stream, dec)) = d.probes.get(p.stream as usize) else { continue };
            out(Event {
                source: src,
                time_ns: clock.ns(time),
                tsc: time,
                pid: dec.pid(p.values).unwrap_or(d.pid),
                tid: dec.tid(p.values),
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
}
