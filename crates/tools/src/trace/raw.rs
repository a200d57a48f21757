//! kerf's raw trace format: compact, versioned, streaming, for very high event rates; read back
//! by `kerf trace convert` and written by the collector.
//!
//! Layout (all integers little-endian; "var" is unsigned LEB128, "zig" a zigzag-coded var):
//! - header: the magic `KERFTRC\0`, u16 version ([`VERSION`]), u16 flags (0), u32 reserved.
//! - records, each a u32 length then that many bytes: a tag byte and the record's fields.
//!   A source record (its probe and stream tables) comes before any record that names it, so a
//!   reader needs nothing but what it has read; an end record closes a finished trace.
//!
//! The length prefix lets a reader stop at the last whole record of a file cut short and say
//! so ([`RawError::Truncated`]); a file that stops between records without its end record was
//! not finished ([`RawError::Unfinished`]). Every index a record holds is checked against the
//! tables before it is handed out, so that outputs never look up what is not there.

use super::event::{
    CaptureInfo, Counters, Event, Loss, LossOrigin, PointKind, ProbeInfo, Record, Source,
    SourceKind, StreamInfo, Tables, ThreadInfo, Value,
};
use std::fmt;
use std::io::{self, Read, Write};

/// The first bytes of a raw trace.
pub const MAGIC: &[u8; 8] = b"KERFTRC\0";
/// The format's version; a reader refuses others.
pub const VERSION: u16 = 1;
/// The largest record accepted (a longer length is corruption, not a record to allocate for).
pub const MAX_RECORD: usize = 16 << 20;

const TAG_SOURCE: u8 = 1;
const TAG_THREAD: u8 = 2;
const TAG_EVENT: u8 = 3;
const TAG_LOSS: u8 = 4;
const TAG_COUNTERS: u8 = 5;
const TAG_END: u8 = 6;

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
}

impl fmt::Display for RawError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawError::Io { op, source } => write!(f, "{op}: {source}"),
            RawError::BadMagic => write!(f, "not a kerf raw trace (bad magic)"),
            RawError::Version { found } => {
                write!(f, "raw trace version {found}; this kerf reads version {VERSION}")
            }
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
                out.push(match p.kind {
                    PointKind::Entry => 0,
                    PointKind::Exit => 1,
                    PointKind::Instant => 2,
                });
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
            out.push(match e.kind {
                PointKind::Entry => 0,
                PointKind::Exit => 1,
                PointKind::Instant => 2,
            });
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
    buf.resize(len, 0);
    if read_full(r, buf)? < len {
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
    pub fn new(mut out: W) -> Result<Self, RawError> {
        let mut h = Vec::with_capacity(16);
        h.extend_from_slice(MAGIC);
        h.extend_from_slice(&VERSION.to_le_bytes());
        h.extend_from_slice(&0u16.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        out.write_all(&h)
            .map_err(|source| RawError::Io { op: "writing the trace header", source })?;
        Ok(Writer { out, buf: Vec::with_capacity(256), records: 0 })
    }

    /// Appends one record.
    pub fn write(&mut self, r: &Record) -> Result<(), RawError> {
        self.buf.clear();
        self.buf.extend_from_slice(&[0; 4]);
        encode(r, &mut self.buf);
        let n = (self.buf.len() - 4) as u32;
        self.buf[..4].copy_from_slice(&n.to_le_bytes());
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

/// Reads a raw trace record by record, checking each against the tables before it.
pub struct Reader<R: Read> {
    input: R,
    buf: Vec<u8>,
    offset: u64,
    records: u64,
    tables: Tables,
    ended: bool,
}

/// Reads into `buf` until it is full or the input ends; returns how many bytes came.
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
        if version != VERSION {
            return Err(RawError::Version { found: version });
        }
        Ok(Reader {
            input,
            buf: Vec::new(),
            offset: 16,
            records: 0,
            tables: Tables::default(),
            ended: false,
        })
    }

    /// The next record; `Ok(None)` after the end record. A file that stops early gives
    /// [`RawError::Truncated`] or [`RawError::Unfinished`] after its last whole record.
    pub fn next_record(&mut self) -> Result<Option<Record>, RawError> {
        if self.ended {
            return Ok(None);
        }
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
        self.buf.resize(len, 0);
        let got = read_full(&mut self.input, &mut self.buf)
            .map_err(|source| RawError::Io { op: "reading a trace record", source })?;
        if got < len {
            return Err(RawError::Truncated { offset: start, records: self.records });
        }
        let r = decode(&self.buf)
            .and_then(|r| check(&self.tables, &r).map(|()| r))
            .map_err(|what| RawError::Corrupt { offset: start, what })?;
        self.offset += 4 + len as u64;
        self.records += 1;
        self.tables.note(&r);
        if r == Record::End {
            self.ended = true;
        }
        Ok(Some(r))
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
