//! kerf's raw trace format: compact, versioned, streaming, for very high event rates; read back
//! by `kerf trace convert` and written by the collector.
//!
//! Layout (all integers little-endian; "var" is unsigned LEB128, "zig" a zigzag-coded var):
//! - header: the magic `KERFTRC\0`, u16 version ([`VERSION`]), u16 flags (0), u32 reserved.
//! - records, each a u32 length then that many bytes: a tag byte and the record's fields.
//!   A source record (its probe and stream tables) comes before any record that names it, so a
//!   reader needs nothing but what it has read; an end record closes a finished trace.
//!
//! Packed records (format version 2) carry a drain's ring records as the rings hold them, for
//! rates at which decoding while tracing cannot keep up: a clock record (TSC calibration), a
//! decode record per source (how its probes' words decode), packed records (one ring's records
//! of one drain, as `ring::copy` packs them, delta-encoded: see `put_packed`) and a drain
//! record (that drain's cut: the TSC before which its records and those held back go out,
//! see [`super::unpack`]). The reader hands them out as events, decoded and in the tracer's
//! time order, so that every output sees events only.
//!
//! The length prefix lets a reader stop at the last whole record of a file cut short and say
//! so ([`RawError::Truncated`]); a file that stops between records without its end record was
//! not finished ([`RawError::Unfinished`]). Every index a record holds is checked against the
//! tables before it is handed out, so that outputs never look up what is not there.

use super::event::{
    CaptureInfo, Counters, Event, Loss, LossOrigin, PointKind, ProbeInfo, Record, Source,
    SourceKind, StreamInfo, Tables, ThreadInfo, Value,
};
use super::probe::MemKind;
use super::program::{Decode, Slot};
use super::unpack::{Clock, SourceDecode, Unpacker};
use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};

/// The first bytes of a raw trace.
pub const MAGIC: &[u8; 8] = b"KERFTRC\0";
/// The format's version: 1 has records only, 2 packed records too (written by
/// [`Writer::new_packed`]); a reader refuses others.
pub const VERSION: u16 = 1;
pub const VERSION_PACKED: u16 = 2;
/// The largest record a writer writes and a reader accepts (a longer length is corruption). A
/// reader never allocates for a length before it has read the bytes: a corrupt length in a
/// short file costs what the file holds. (Until 2026-12-04 the limit was 16 MiB and the
/// writer did not keep to it: the source record of a program with 100 k functions, node's, is
/// about 27 MB, and such traces were refused as corrupt.)
pub const MAX_RECORD: usize = 1 << 30;
/// Bytes of packed words in one packed record at most (a reader holds one whole).
const PACKED_MOST: usize = 8 << 20;

const TAG_SOURCE: u8 = 1;
const TAG_THREAD: u8 = 2;
const TAG_EVENT: u8 = 3;
const TAG_LOSS: u8 = 4;
const TAG_COUNTERS: u8 = 5;
const TAG_END: u8 = 6;
const TAG_CLOCK: u8 = 7;
const TAG_DECODE: u8 = 8;
const TAG_PACKED: u8 = 9;
const TAG_DRAIN: u8 = 10;

const VAL_UNSIGNED: u8 = 0;
const VAL_SIGNED: u8 = 1;
const VAL_BYTES: u8 = 2;
const VAL_BYTES_TRUNCATED: u8 = 3;
const VAL_FAULT: u8 = 4;

/// Why a raw trace could not be read or written.
#[derive(Debug)]
pub enum RawError {
    /// Reading or writing the underlying file or socket failed.
    Io { op: &'static str, source: io::Error },
    /// The file does not start with [`MAGIC`].
    BadMagic,
    /// A version this reader does not know.
    Version { found: u16 },
    /// The file ends inside the record starting at byte `offset`; `records` whole records came
    /// before it.
    Truncated { offset: u64, records: u64 },
    /// The file ends after `records` whole records but without the end record: the writer did
    /// not finish (killed, or the disk filled).
    Unfinished { records: u64 },
    /// The record at byte `offset` is malformed.
    Corrupt { offset: u64, what: String },
    /// A record to write is longer than a reader takes ([`MAX_RECORD`]).
    TooLong { bytes: usize },
}

impl fmt::Display for RawError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawError::Io { op, source } => write!(f, "{op}: {source}"),
            RawError::BadMagic => write!(f, "not a kerf raw trace (bad magic)"),
            RawError::Version { found } => write!(
                f,
                "raw trace version {found}; this kerf reads versions {VERSION} and {VERSION_PACKED}"
            ),
            RawError::Truncated { offset, records } => write!(
                f,
                "trace cut short: the record at byte {offset} is incomplete ({records} whole records before it)"
            ),
            RawError::Unfinished { records } => {
                write!(f, "trace not finished: {records} records and no end record")
            }
            RawError::Corrupt { offset, what } => {
                write!(f, "corrupt record at byte {offset}: {what}")
            }
            RawError::TooLong { bytes } => {
                write!(f, "a record of {bytes} bytes, longer than a raw trace holds ({MAX_RECORD})")
            }
        }
    }
}

impl std::error::Error for RawError {}

pub(crate) fn put_var(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_zig(out: &mut Vec<u8>, v: i64) {
    put_var(out, ((v << 1) ^ (v >> 63)) as u64);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    put_var(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Appends a record's body (tag and fields, without the length prefix) to `out`.
pub fn encode(r: &Record, out: &mut Vec<u8>) {
    match r {
        Record::Source(s) => {
            out.push(TAG_SOURCE);
            put_var(out, u64::from(s.id));
            put_bytes(out, s.machine.as_bytes());
            out.push(match s.kind {
                SourceKind::Process => 0,
                SourceKind::Kernel => 1,
            });
            put_var(out, u64::from(s.pid));
            put_bytes(out, s.name.as_bytes());
            put_zig(out, s.realtime_offset_ns);
            put_var(out, s.streams.len() as u64);
            for st in &s.streams {
                put_bytes(out, st.name.as_bytes());
            }
            put_var(out, s.probes.len() as u64);
            for p in &s.probes {
                put_bytes(out, p.name.as_bytes());
                put_bytes(out, p.point.as_bytes());
                out.push(point_kind_byte(p.kind));
                put_var(out, u64::from(p.stream));
                put_var(out, p.captures.len() as u64);
                for c in &p.captures {
                    put_bytes(out, c.name.as_bytes());
                    out.push(u8::from(c.hex));
                }
            }
        }
        Record::Thread(t) => {
            out.push(TAG_THREAD);
            put_var(out, u64::from(t.source));
            put_var(out, u64::from(t.pid));
            put_var(out, u64::from(t.tid));
            put_bytes(out, t.name.as_bytes());
        }
        Record::Event(e) => {
            out.push(TAG_EVENT);
            put_var(out, u64::from(e.source));
            put_var(out, e.time_ns);
            put_var(out, e.tsc);
            put_var(out, u64::from(e.pid));
            put_var(out, u64::from(e.tid));
            put_var(out, u64::from(e.cpu));
            put_var(out, u64::from(e.probe));
            put_var(out, u64::from(e.stream));
            out.push(point_kind_byte(e.kind));
            put_var(out, e.values.len() as u64);
            for v in &e.values {
                match v {
                    Value::Unsigned(u) => {
                        out.push(VAL_UNSIGNED);
                        put_var(out, *u);
                    }
                    Value::Signed(i) => {
                        out.push(VAL_SIGNED);
                        put_zig(out, *i);
                    }
                    Value::Bytes { data, truncated } => {
                        out.push(if *truncated { VAL_BYTES_TRUNCATED } else { VAL_BYTES });
                        put_bytes(out, data);
                    }
                    Value::Fault { addr } => {
                        out.push(VAL_FAULT);
                        put_var(out, *addr);
                    }
                }
            }
        }
        Record::Loss(l) => {
            out.push(TAG_LOSS);
            put_var(out, u64::from(l.source));
            put_var(out, u64::from(l.stream));
            put_var(out, l.count);
            put_var(out, l.from_ns);
            put_var(out, l.to_ns);
            out.push(match l.origin {
                LossOrigin::Ring => 0,
                LossOrigin::Sender => 1,
            });
        }
        Record::Counters(c) => {
            out.push(TAG_COUNTERS);
            put_var(out, u64::from(c.source));
            put_var(out, u64::from(c.stream));
            put_var(out, c.time_ns);
            put_var(out, c.emitted);
            put_var(out, c.filtered);
            put_var(out, c.delivered);
            put_var(out, c.lost);
        }
        Record::End => out.push(TAG_END),
    }
}

/// A cursor over one record's body; every read says what it was reading when bytes ran out.
struct Cursor<'a> {
    b: &'a [u8],
}

type Dec<T> = Result<T, String>;

impl<'a> Cursor<'a> {
    fn u8(&mut self, what: &str) -> Dec<u8> {
        let (&x, rest) = self.b.split_first().ok_or_else(|| format!("{what}: record too short"))?;
        self.b = rest;
        Ok(x)
    }

    fn var(&mut self, what: &str) -> Dec<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let x = self.u8(what)?;
            let bits = u64::from(x & 0x7f);
            if shift == 63 && bits > 1 {
                return Err(format!("{what}: integer overflows 64 bits"));
            }
            v |= bits << shift;
            if x & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(format!("{what}: integer longer than 10 bytes"))
    }

    fn small<T: TryFrom<u64>>(&mut self, what: &str) -> Dec<T> {
        let v = self.var(what)?;
        T::try_from(v).map_err(|_| format!("{what}: {v} out of range"))
    }

    fn zig(&mut self, what: &str) -> Dec<i64> {
        let v = self.var(what)?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    fn bytes(&mut self, what: &str) -> Dec<&'a [u8]> {
        let n = self.var(what)?;
        if n > self.b.len() as u64 {
            return Err(format!("{what}: length {n} past the record's end"));
        }
        let (x, rest) = self.b.split_at(n as usize);
        self.b = rest;
        Ok(x)
    }

    fn string(&mut self, what: &str) -> Dec<String> {
        let b = self.bytes(what)?;
        String::from_utf8(b.to_vec()).map_err(|_| format!("{what}: not UTF-8"))
    }

    /// A count of items that each take at least one byte (so a corrupt count cannot make the
    /// reader allocate more than the record holds).
    fn count(&mut self, what: &str) -> Dec<usize> {
        let n = self.var(what)?;
        if n > self.b.len() as u64 {
            return Err(format!("{what}: {n} items in a record with {} bytes left", self.b.len()));
        }
        Ok(n as usize)
    }

    fn point_kind(&mut self) -> Dec<PointKind> {
        match self.u8("point kind")? {
            0 => Ok(PointKind::Entry),
            1 => Ok(PointKind::Exit),
            2 => Ok(PointKind::Instant),
            k => Err(format!("unknown point kind {k}")),
        }
    }
}

/// Splits an unsigned LEB128 integer off the front of `b`.
pub(crate) fn split_var(b: &[u8]) -> Result<(u64, &[u8]), String> {
    let mut c = Cursor { b };
    let v = c.var("integer")?;
    Ok((v, c.b))
}

/// Splits a length-prefixed byte string off the front of `b`.
pub(crate) fn split_bytes(b: &[u8]) -> Result<(&[u8], &[u8]), String> {
    let mut c = Cursor { b };
    let v = c.bytes("byte string")?;
    Ok((v, c.b))
}

/// Reads a u32 length prefix and that many bytes into `buf`: `Ok(false)` if the input ended
/// cleanly before the prefix.
pub(crate) fn read_frame(r: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<bool> {
    let mut len = [0u8; 4];
    let n = read_full(r, &mut len)?;
    if n == 0 {
        return Ok(false);
    }
    if n < 4 {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "cut inside a frame's length"));
    }
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_RECORD {
        return Err(io::Error::new(io::ErrorKind::InvalidData, format!("frame of {len} bytes")));
    }
    if read_growing(r, buf, len)? < len {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "cut inside a frame"));
    }
    Ok(true)
}

/// Decodes one record's body (as [`encode`] wrote it). Indices are not checked here: see
/// [`check`].
pub fn decode(body: &[u8]) -> Result<Record, String> {
    let mut c = Cursor { b: body };
    let r = match c.u8("tag")? {
        TAG_SOURCE => {
            let id = c.small("source id")?;
            let machine = c.string("machine")?;
            let kind = match c.u8("source kind")? {
                0 => SourceKind::Process,
                1 => SourceKind::Kernel,
                k => return Err(format!("unknown source kind {k}")),
            };
            let pid = c.small("pid")?;
            let name = c.string("source name")?;
            let realtime_offset_ns = c.zig("realtime offset")?;
            let n = c.count("streams")?;
            let mut streams = Vec::with_capacity(n);
            for _ in 0..n {
                streams.push(StreamInfo { name: c.string("stream name")? });
            }
            let n = c.count("probes")?;
            let mut probes = Vec::with_capacity(n);
            for _ in 0..n {
                let name = c.string("probe name")?;
                let point = c.string("probe point")?;
                let kind = c.point_kind()?;
                let stream = c.small("probe stream")?;
                let k = c.count("captures")?;
                let mut captures = Vec::with_capacity(k);
                for _ in 0..k {
                    let name = c.string("capture name")?;
                    let hex = match c.u8("capture format")? {
                        0 => false,
                        1 => true,
                        f => return Err(format!("unknown capture format {f}")),
                    };
                    captures.push(CaptureInfo { name, hex });
                }
                probes.push(ProbeInfo { name, point, kind, stream, captures });
            }
            Record::Source(Source {
                id,
                machine,
                kind,
                pid,
                name,
                realtime_offset_ns,
                probes,
                streams,
            })
        }
        TAG_THREAD => Record::Thread(ThreadInfo {
            source: c.small("source")?,
            pid: c.small("pid")?,
            tid: c.small("tid")?,
            name: c.string("thread name")?,
        }),
        TAG_EVENT => {
            let source = c.small("source")?;
            let time_ns = c.var("time")?;
            let tsc = c.var("tsc")?;
            let pid = c.small("pid")?;
            let tid = c.small("tid")?;
            let cpu = c.small("cpu")?;
            let probe = c.small("probe")?;
            let stream = c.small("stream")?;
            let kind = c.point_kind()?;
            let n = c.count("values")?;
            let mut values = Vec::with_capacity(n);
            for _ in 0..n {
                values.push(match c.u8("value tag")? {
                    VAL_UNSIGNED => Value::Unsigned(c.var("value")?),
                    VAL_SIGNED => Value::Signed(c.zig("value")?),
                    t @ (VAL_BYTES | VAL_BYTES_TRUNCATED) => Value::Bytes {
                        data: c.bytes("value")?.to_vec(),
                        truncated: t == VAL_BYTES_TRUNCATED,
                    },
                    VAL_FAULT => Value::Fault { addr: c.var("fault address")? },
                    t => return Err(format!("unknown value tag {t}")),
                });
            }
            Record::Event(Event {
                source,
                time_ns,
                tsc,
                pid,
                tid,
                cpu,
                probe,
                stream,
                kind,
                values,
            })
        }
        TAG_LOSS => Record::Loss(Loss {
            source: c.small("source")?,
            stream: c.small("stream")?,
            count: c.var("count")?,
            from_ns: c.var("from")?,
            to_ns: c.var("to")?,
            origin: match c.u8("loss origin")? {
                0 => LossOrigin::Ring,
                1 => LossOrigin::Sender,
                o => return Err(format!("unknown loss origin {o}")),
            },
        }),
        TAG_COUNTERS => Record::Counters(Counters {
            source: c.small("source")?,
            stream: c.small("stream")?,
            time_ns: c.var("time")?,
            emitted: c.var("emitted")?,
            filtered: c.var("filtered")?,
            delivered: c.var("delivered")?,
            lost: c.var("lost")?,
        }),
        TAG_END => Record::End,
        t => return Err(format!("unknown record tag {t}")),
    };
    if !c.b.is_empty() {
        return Err(format!("{} bytes left over after the record", c.b.len()));
    }
    Ok(r)
}

/// What a body holds beyond records: the packed format's frames.
enum Frame {
    Record(Record),
    Clock(Clock),
    Decode(u16, SourceDecode),
    Packed(u16, Vec<u64>),
    Drain(u64),
}

fn put_decode(out: &mut Vec<u8>, source: u16, d: &SourceDecode) {
    out.push(TAG_DECODE);
    put_var(out, u64::from(source));
    put_var(out, u64::from(d.pid));
    put_var(out, d.probes.len() as u64);
    for (kind, stream, dec) in &d.probes {
        out.push(point_kind_byte(*kind));
        put_var(out, u64::from(*stream));
        out.push(u8::from(dec.tid) | u8::from(dec.pair) << 1);
        put_var(out, dec.captures.len() as u64);
        for c in &dec.captures {
            match *c {
                Slot::Word(k) => {
                    out.push(0);
                    put_var(out, k as u64);
                }
                Slot::Cpu => out.push(1),
                Slot::Read { r, addr, disp, kind } => {
                    out.push(2);
                    put_var(out, r as u64);
                    put_var(out, addr as u64);
                    put_zig(out, i64::from(disp));
                    match kind {
                        MemKind::Int { bytes, signed } => {
                            out.push(0);
                            out.push(bytes);
                            out.push(u8::from(signed));
                        }
                        MemKind::Str { max, user } => {
                            out.push(1);
                            put_var(out, u64::from(max));
                            out.push(u8::from(user));
                        }
                    }
                }
            }
        }
        put_var(out, dec.reads.len() as u64);
        for &(k, len) in &dec.reads {
            put_var(out, k as u64);
            put_var(out, u64::from(len));
        }
    }
}

fn point_kind_byte(k: PointKind) -> u8 {
    match k {
        PointKind::Entry => 0,
        PointKind::Exit => 1,
        PointKind::Instant => 2,
    }
}

/// Appends `words` (whole packed records, as `ring::copy` makes them) encoded: per record a
/// byte (1: its header word is the previous record's, 0: the header follows as a var), the
/// time as a zigzag delta from the previous record's, then each word as a zigzag delta from
/// the same word of the previous record when the headers are the same (else from 0). A
/// ring's records are mostly one probe's, of one thread, with counters and times close
/// together: an event with two captures and the thread id takes about 6 bytes, not 40,
/// which is what lets a file keep up with 20 M events/s.
fn put_packed(out: &mut Vec<u8>, words: &[u64]) {
    // This runs 20 M times a second: the bytes go straight into the vector's spare capacity,
    // reserved once (a record of w words takes at most 10 bytes a word and its flag byte),
    // not through a `Vec::push` a byte with its capacity check.
    out.reserve(11 * words.len());
    let start = out.len();
    let spare = out.spare_capacity_mut();
    let mut n = 0;
    let (mut time, mut meta) = (0u64, u64::MAX);
    let mut prev: &[u64] = &[];
    for p in kerf_codegen::ring::packed(words) {
        let m = u64::from(p.stream) | (8 * p.values.len() as u64) << 32 | u64::from(p.cpu) << 48;
        let same = m == meta;
        spare[n].write(u8::from(same));
        n += 1;
        if !same {
            n = var_at(spare, n, m);
            prev = &[];
        }
        n = var_at(spare, n, zig(p.time.wrapping_sub(time)));
        for (k, &v) in p.values.iter().enumerate() {
            n = var_at(spare, n, zig(v.wrapping_sub(prev.get(k).copied().unwrap_or(0))));
        }
        (time, meta, prev) = (p.time, m, p.values);
    }
    // SAFETY: the `n` bytes after the old length were each written above (`spare[..n]`),
    // and `n` is within the capacity reserved (indexing `spare` checked every write).
    unsafe { out.set_len(start + n) };
}

/// A difference as a zigzag code (small either way: small code).
fn zig(d: u64) -> u64 {
    let v = d as i64;
    ((v << 1) ^ (v >> 63)) as u64
}

/// `v` as a var into `buf` at `at`; returns the end.
fn var_at(buf: &mut [std::mem::MaybeUninit<u8>], mut at: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        buf[at].write(v as u8 | 0x80);
        v >>= 7;
        at += 1;
    }
    buf[at].write(v as u8);
    at + 1
}

impl Cursor<'_> {
    /// `n` records as [`put_packed`] wrote them, appended to `words` as `ring::copy` packs
    /// them.
    fn packed_records(&mut self, n: usize, words: &mut Vec<u64>) -> Dec<()> {
        let (mut time, mut meta) = (0u64, u64::MAX);
        let mut prev: Option<usize> = None;
        for _ in 0..n {
            match self.u8("packed record flag")? {
                1 if meta != u64::MAX => {}
                0 => {
                    meta = self.var("packed record header")?;
                    let len = meta >> 32 & 0xffff;
                    if len % 8 != 0 || len / 8 > kerf_codegen::ring::MAX_VALUES as u64 {
                        return Err(format!("packed record of {len} bytes of words"));
                    }
                    prev = None;
                }
                f => return Err(format!("packed record flag {f}")),
            }
            time = time.wrapping_add(self.zig("packed record time")? as u64);
            let at = words.len();
            words.push(time);
            words.push(meta);
            for k in 0..(meta >> 32 & 0xffff) as usize / 8 {
                let base = prev.map_or(0, |p| words[p + 2 + k]);
                words.push(base.wrapping_add(self.zig("packed record word")? as u64));
            }
            prev = Some(at);
        }
        Ok(())
    }

    fn flag(&mut self, what: &str) -> Dec<bool> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            f => Err(format!("{what}: {f} is not 0 or 1")),
        }
    }

    fn decode_table(&mut self) -> Dec<(u16, SourceDecode)> {
        let source = self.small("source")?;
        let pid = self.small("pid")?;
        let n = self.count("decoded probes")?;
        let mut probes = Vec::with_capacity(n);
        for _ in 0..n {
            let kind = self.point_kind()?;
            let stream = self.small("probe stream")?;
            let flags = self.u8("decode flags")?;
            if flags > 3 {
                return Err(format!("unknown decode flags {flags}"));
            }
            let k = self.count("decoded captures")?;
            let mut captures = Vec::with_capacity(k);
            for _ in 0..k {
                captures.push(match self.u8("capture slot")? {
                    0 => Slot::Word(self.small("capture word")?),
                    1 => Slot::Cpu,
                    2 => {
                        let r = self.small("memory capture")?;
                        let addr = self.small("address word")?;
                        let disp = i32::try_from(self.zig("displacement")?)
                            .map_err(|_| "displacement out of range".to_string())?;
                        let kind = match self.u8("memory kind")? {
                            0 => {
                                let bytes = self.u8("integer bytes")?;
                                if ![1, 2, 4, 8].contains(&bytes) {
                                    return Err(format!("integer of {bytes} bytes"));
                                }
                                MemKind::Int { bytes, signed: self.flag("signed")? }
                            }
                            1 => MemKind::Str {
                                max: self.small("string length")?,
                                user: self.flag("user string")?,
                            },
                            k => return Err(format!("unknown memory kind {k}")),
                        };
                        Slot::Read { r, addr, disp, kind }
                    }
                    t => return Err(format!("unknown capture slot {t}")),
                });
            }
            let k = self.count("memory reads")?;
            let mut reads = Vec::with_capacity(k);
            for _ in 0..k {
                reads.push((self.small("read capture")?, self.small("read length")?));
            }
            // Every read a capture names is there, of the length its kind reads (decoding
            // indexes them and takes that many bytes).
            for c in &captures {
                if let Slot::Read { r, kind, .. } = *c {
                    let want = match kind {
                        MemKind::Int { bytes, .. } => u16::from(bytes),
                        MemKind::Str { max, .. } => max,
                    };
                    if reads.get(r).map(|&(_, len)| len) != Some(want) {
                        return Err(format!("memory capture {r}: no read of {want} bytes"));
                    }
                }
            }
            probes.push((
                kind,
                stream,
                Decode { tid: flags & 1 != 0, pair: flags & 2 != 0, captures, reads },
            ));
        }
        Ok((source, SourceDecode { pid, probes }))
    }
}

/// Decodes a body: a record, or one of the packed format's frames.
fn decode_frame(body: &[u8]) -> Result<Frame, String> {
    let mut c = Cursor { b: body };
    let f = match c.u8("tag")? {
        TAG_CLOCK => {
            let bits = c.b.get(..8).ok_or("clock: record too short")?;
            let ticks_per_ns = f64::from_le_bytes(bits.try_into().unwrap_or_default());
            c.b = &c.b[8..];
            if !(ticks_per_ns.is_finite() && ticks_per_ns > 0.0) {
                return Err(format!("clock: {ticks_per_ns} ticks per ns"));
            }
            Frame::Clock(Clock {
                ticks_per_ns,
                anchor_tsc: c.var("anchor tsc")?,
                anchor_ns: c.var("anchor ns")?,
            })
        }
        TAG_DECODE => {
            let (s, d) = c.decode_table()?;
            Frame::Decode(s, d)
        }
        TAG_PACKED => {
            let source = c.small("source")?;
            let n = c.count("packed records")?;
            let mut words = Vec::with_capacity(n * 4);
            c.packed_records(n, &mut words)?;
            Frame::Packed(source, words)
        }
        TAG_DRAIN => Frame::Drain(c.var("drain time")?),
        _ => return decode(body).map(Frame::Record),
    };
    if !c.b.is_empty() {
        return Err(format!("{} bytes left over after the record", c.b.len()));
    }
    Ok(f)
}

/// Checks a record against the tables read before it: its source exists (and a source is not
/// defined twice), its probe and stream exist, an event has one value per capture.
pub fn check(t: &Tables, r: &Record) -> Result<(), String> {
    let src = |id: u16| t.source(id).ok_or_else(|| format!("source {id} not defined before use"));
    let stream = |id: u16, st: u16| -> Result<(), String> {
        let s = src(id)?;
        if usize::from(st) >= s.streams.len() {
            return Err(format!("stream {st} of source {id} does not exist"));
        }
        Ok(())
    };
    match r {
        Record::Source(s) => {
            if t.source(s.id).is_some() {
                return Err(format!("source {} defined twice", s.id));
            }
            for (i, p) in s.probes.iter().enumerate() {
                if usize::from(p.stream) >= s.streams.len() {
                    return Err(format!("probe {i} names stream {} that does not exist", p.stream));
                }
            }
        }
        Record::Thread(th) => {
            src(th.source)?;
        }
        Record::Event(e) => {
            let s = src(e.source)?;
            let p = s.probes.get(e.probe as usize).ok_or_else(|| {
                format!("probe {} of source {} does not exist", e.probe, e.source)
            })?;
            stream(e.source, e.stream)?;
            if p.captures.len() != e.values.len() {
                return Err(format!(
                    "probe {} captures {} values, the event has {}",
                    e.probe,
                    p.captures.len(),
                    e.values.len()
                ));
            }
        }
        Record::Loss(l) => stream(l.source, l.stream)?,
        Record::Counters(c) => stream(c.source, c.stream)?,
        Record::End => {}
    }
    Ok(())
}

/// Writes a raw trace record by record (nothing is held but one record's bytes).
pub struct Writer<W: Write> {
    out: W,
    buf: Vec<u8>,
    records: u64,
}

impl<W: Write> Writer<W> {
    /// Writes the header. Give a buffered writer: each record is one `write_all`.
    pub fn new(out: W) -> Result<Self, RawError> {
        Self::with_version(out, VERSION)
    }

    /// [`Writer::new`] for a trace that will hold packed records ([`Writer::clock`] first).
    pub fn new_packed(out: W) -> Result<Self, RawError> {
        Self::with_version(out, VERSION_PACKED)
    }

    fn with_version(mut out: W, version: u16) -> Result<Self, RawError> {
        let mut h = Vec::with_capacity(16);
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&version.to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        out.write_all(&h)
            .map_err(|source| RawError::Io { op: "writing the trace header", source })?;
        Ok(Writer { out, buf: Vec::with_capacity(256), records: 0 })
    }

    /// Appends one record.
    pub fn write(&mut self, r: &Record) -> Result<(), RawError> {
        self.frame(|b| encode(r, b))
    }

    /// The TSC calibration packed records are converted with (before any of them).
    pub fn clock(&mut self, c: &Clock) -> Result<(), RawError> {
        self.frame(|b| {
            b.push(TAG_CLOCK);
            b.extend_from_slice(&c.ticks_per_ns.to_le_bytes());
            put_var(b, c.anchor_tsc);
            put_var(b, c.anchor_ns);
        })
    }

    /// Source `source`'s decode table (after its source record, before its packed records).
    pub fn decode_table(&mut self, source: u16, d: &SourceDecode) -> Result<(), RawError> {
        self.frame(|b| put_decode(b, source, d))
    }

    /// Packed records of `source` (whole records, as `ring::copy` packs them), encoded (see
    /// [`put_packed`]) in one record; at most [`MAX_RECORD`] bytes of words go in one.
    /// Room for the packed record of `words` words, its pages written once now (see
    /// [`put_packed`]'s reservation).
    pub fn room_for(&mut self, words: usize) {
        let bytes = 11 * words + 64;
        self.buf.reserve(bytes);
        self.buf.resize(bytes, 0);
        self.buf.clear();
    }

    pub fn packed(&mut self, source: u16, words: &[u64]) -> Result<(), RawError> {
        // Encoded, a record is never longer than its words and 10 bytes (a var of a header
        // and of the time, a byte of flag): split ahead of time so that no frame can exceed
        // the limit.
        let most = PACKED_MOST;
        let mut from = 0;
        while from < words.len() {
            let (mut to, mut n) = (from, 0u64);
            for p in kerf_codegen::ring::packed(&words[from..]) {
                if (to - from + 2 + p.values.len()) * 8 > most {
                    break;
                }
                to += 2 + p.values.len();
                n += 1;
            }
            if to == from {
                break; // not a whole record (never made by ring::copy)
            }
            let chunk = &words[from..to];
            self.frame(|b| {
                b.push(TAG_PACKED);
                put_var(b, u64::from(source));
                put_var(b, n);
                put_packed(b, chunk);
            })?;
            from = to;
        }
        Ok(())
    }

    /// The end of a drain whose cut is TSC `cut`: a reader orders the packed records before
    /// it and hands out those stamped before the cut.
    pub fn drain(&mut self, cut: u64) -> Result<(), RawError> {
        self.frame(|b| {
            b.push(TAG_DRAIN);
            put_var(b, cut);
        })
    }

    fn frame(&mut self, body: impl FnOnce(&mut Vec<u8>)) -> Result<(), RawError> {
        self.buf.clear();
        self.buf.extend_from_slice(&[0; 4]);
        body(&mut self.buf);
        let n = self.buf.len() - 4;
        if n > MAX_RECORD {
            return Err(RawError::TooLong { bytes: n });
        }
        self.buf[..4].copy_from_slice(&(n as u32).to_le_bytes());
        self.out
            .write_all(&self.buf)
            .map_err(|source| RawError::Io { op: "writing a trace record", source })?;
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes without the end record, so that readers see the trace as unfinished (what an
    /// incomplete input converts to), and hands the writer back.
    pub fn abandon(mut self) -> Result<W, RawError> {
        self.out.flush().map_err(|source| RawError::Io { op: "flushing the trace", source })?;
        Ok(self.out)
    }

    /// Writes the end record, flushes, and hands the writer back.
    pub fn finish(mut self) -> Result<W, RawError> {
        self.write(&Record::End)?;
        self.out.flush().map_err(|source| RawError::Io { op: "flushing the trace", source })?;
        Ok(self.out)
    }
}

/// Reads a raw trace record by record, checking each against the tables before it. Packed
/// records come out as events, in the tracer's order.
pub struct Reader<R: Read> {
    input: R,
    buf: Vec<u8>,
    offset: u64,
    records: u64,
    tables: Tables,
    ended: bool,
    /// Version 2: packed frames allowed.
    packed: bool,
    clock: Option<Clock>,
    unpacker: Unpacker,
    /// Records ready to hand out (a drain's events, then what followed them).
    queue: VecDeque<Record>,
    /// An error met after packed records were waiting: reported once they are out.
    deferred: Option<RawError>,
}

/// Reads into `buf` until it is full or the input ends; returns how many bytes came.
/// Up to `len` bytes into `buf` (replacing what it held), as many as `r` has: the buffer grows
/// with what is read, never to `len` ahead of it. How many.
fn read_growing(r: &mut impl Read, buf: &mut Vec<u8>, len: usize) -> io::Result<usize> {
    buf.clear();
    if buf.capacity() < len {
        // (Room ahead for an ordinary record; a long one grows as its bytes come.)
        buf.reserve(len.min(1 << 20));
    }
    Read::take(&mut *r, len as u64).read_to_end(buf)
}

fn read_full(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match r.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

impl<R: Read> Reader<R> {
    /// Reads and checks the header. Give a buffered reader.
    pub fn new(mut input: R) -> Result<Self, RawError> {
        let mut h = [0u8; 16];
        let n = read_full(&mut input, &mut h)
            .map_err(|source| RawError::Io { op: "reading the trace header", source })?;
        if n < 8 || &h[..8] != MAGIC {
            return Err(RawError::BadMagic);
        }
        if n < 16 {
            return Err(RawError::Truncated { offset: 0, records: 0 });
        }
        let version = u16::from_le_bytes([h[8], h[9]]);
        if version != VERSION && version != VERSION_PACKED {
            return Err(RawError::Version { found: version });
        }
        Ok(Reader {
            input,
            buf: Vec::new(),
            offset: 16,
            records: 0,
            tables: Tables::default(),
            ended: false,
            packed: version == VERSION_PACKED,
            clock: None,
            unpacker: Unpacker::default(),
            queue: VecDeque::new(),
            deferred: None,
        })
    }

    /// The next record; `Ok(None)` after the end record. A file that stops early gives
    /// [`RawError::Truncated`] or [`RawError::Unfinished`] after its last whole record (and
    /// after the events of the packed records before it).
    pub fn next_record(&mut self) -> Result<Option<Record>, RawError> {
        loop {
            if let Some(r) = self.queue.pop_front() {
                self.tables.note(&r);
                return Ok(Some(r));
            }
            if let Some(e) = self.deferred.take() {
                return Err(e);
            }
            if self.ended {
                return Ok(None);
            }
            match self.next_frame() {
                Ok(Frame::Record(r)) => {
                    if r == Record::End {
                        self.ended = true;
                        self.unpack(None);
                    }
                    if self.queue.is_empty() {
                        self.tables.note(&r);
                        return Ok(Some(r));
                    }
                    self.queue.push_back(r);
                }
                Ok(_) => {}
                // What was packed before a cut or corruption still comes out, then the error.
                Err(e) if self.unpacker.waiting() > 0 => {
                    self.unpack(None);
                    self.deferred = Some(e);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The events of the packed records waiting, up to TSC `cut` (`None`: all), to the queue.
    fn unpack(&mut self, cut: Option<u64>) {
        let Some(clock) = self.clock else { return };
        let q = &mut self.queue;
        self.unpacker.drain(cut, &clock, |e| q.push_back(Record::Event(e)));
    }

    /// The next frame, checked; packed ones are taken in (a drain's end queues its events).
    fn next_frame(&mut self) -> Result<Frame, RawError> {
        let start = self.offset;
        let mut len = [0u8; 4];
        let n = read_full(&mut self.input, &mut len)
            .map_err(|source| RawError::Io { op: "reading a trace record", source })?;
        if n == 0 {
            return Err(RawError::Unfinished { records: self.records });
        }
        if n < 4 {
            return Err(RawError::Truncated { offset: start, records: self.records });
        }
        let len = u32::from_le_bytes(len) as usize;
        if len == 0 || len > MAX_RECORD {
            return Err(RawError::Corrupt { offset: start, what: format!("record length {len}") });
        }
        let got = read_growing(&mut self.input, &mut self.buf, len)
            .map_err(|source| RawError::Io { op: "reading a trace record", source })?;
        if got < len {
            return Err(RawError::Truncated { offset: start, records: self.records });
        }
        let corrupt = |what| RawError::Corrupt { offset: start, what };
        let f = decode_frame(&self.buf).map_err(corrupt)?;
        if !self.packed && !matches!(f, Frame::Record(_)) {
            return Err(corrupt("a packed record in a version 1 trace".into()));
        }
        match &f {
            // Checked against the tables as they will be when it comes out: records queued
            // before it (events only) change none.
            Frame::Record(r) => {
                check(&self.tables, r).map_err(corrupt)?;
                // A thread named with another process's id (a forked child's): its packed
                // records that follow come out under that process.
                if let Record::Thread(th) = r {
                    self.unpacker.thread_pid(th.source, th.tid, th.pid);
                }
            }
            Frame::Clock(c) => self.clock = Some(*c),
            Frame::Decode(id, d) => {
                let s = self.tables.source(*id).ok_or_else(|| {
                    corrupt(format!("decode table of source {id}, not defined before"))
                })?;
                if d.probes.len() != s.probes.len() {
                    return Err(corrupt(format!(
                        "decode table of {} probes for a source of {}",
                        d.probes.len(),
                        s.probes.len()
                    )));
                }
                for (k, (_, stream, dec)) in d.probes.iter().enumerate() {
                    let want = s.probes[k].captures.len();
                    if usize::from(*stream) >= s.streams.len() || dec.captures.len() != want {
                        return Err(corrupt(format!("decode table of probe {k} does not fit it")));
                    }
                }
                self.unpacker.source(*id, d.clone());
            }
            Frame::Packed(id, words) => {
                if self.clock.is_none() {
                    return Err(corrupt("packed records before the clock record".into()));
                }
                self.unpacker.add(*id, words).map_err(|e| corrupt(e.to_string()))?;
            }
            Frame::Drain(cut) => self.unpack(Some(*cut)),
        }
        self.offset += 4 + len as u64;
        self.records += 1;
        Ok(f)
    }

    /// The sources and thread names read so far.
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Whole records read so far (the end record included).
    pub fn records(&self) -> u64 {
        self.records
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The room made ahead holds the largest packed record of that many words, so that
    /// writing it neither grows nor moves the buffer (what the reader relies on).
    #[test]
    fn room_made_ahead_holds_the_largest_packed_record() {
        let mut w = Writer::new_packed(Vec::new()).unwrap();
        // Records of 13 words whose times and words jump by about 2^62 from one record to
        // the next: deltas of 9 bytes each, close to the worst case.
        let far = |k: u64| if k.is_multiple_of(2) { 0 } else { u64::MAX / 3 };
        let header = (0xfff << 48) | ((8 * 13) << 32) | 7;
        let words: Vec<u64> = (0..1000u64)
            .flat_map(|k| [far(k), header].into_iter().chain((0..13).map(move |_| far(k + 1))))
            .collect();
        w.room_for(words.len());
        let (cap, at) = (w.buf.capacity(), w.buf.as_ptr());
        w.packed(0, &words).unwrap();
        assert_eq!((w.buf.capacity(), w.buf.as_ptr()), (cap, at), "the buffer grew");
        assert!(w.buf.len() > 8 * words.len(), "{} bytes: not near the worst case", w.buf.len());
    }

    /// The extremes of every integer encoding come back as they went in; an 11th varint byte
    /// or a 64-bit overflow is corruption, not a wrapped value.
    #[test]
    fn integer_extremes() {
        let e = Record::Event(Event {
            source: u16::MAX,
            time_ns: u64::MAX,
            tsc: 0,
            pid: u32::MAX,
            tid: 0,
            cpu: u32::MAX,
            probe: u32::MAX,
            stream: u16::MAX,
            kind: PointKind::Exit,
            values: vec![
                Value::Unsigned(u64::MAX),
                Value::Signed(i64::MIN),
                Value::Signed(i64::MAX),
                Value::Signed(-1),
                Value::Bytes { data: Vec::new(), truncated: true },
                Value::Fault { addr: u64::MAX },
            ],
        });
        let mut b = Vec::new();
        encode(&e, &mut b);
        assert_eq!(decode(&b), Ok(e));

        let mut over = vec![TAG_LOSS];
        over.extend_from_slice(&[0xff; 9]);
        over.push(0x02); // bit 64
        assert!(decode(&over).unwrap_err().contains("overflows"));
        let mut long = vec![TAG_LOSS];
        long.extend_from_slice(&[0x80; 10]);
        long.push(0);
        assert!(decode(&long).unwrap_err().contains("longer than 10 bytes"));
        // A u16 field given a larger number.
        let mut wide = vec![TAG_THREAD];
        put_var(&mut wide, 70_000);
        assert!(decode(&wide).unwrap_err().contains("out of range"));
    }
}
