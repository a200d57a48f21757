//! The Perfetto output (`.perfetto-trace`): a `Trace` protobuf written by a small encoder of
//! our own, packet by packet as records come (field numbers from Perfetto's
//! `protos/perfetto/trace/*.proto`).
//!
//! A process track per process and a thread track per thread (`TrackDescriptor`, keyed by
//! machine, pid and tid, so kernel and process events of one thread share a track); an
//! entry opens a slice on its thread (`TYPE_SLICE_BEGIN`) and an exit closes it
//! (`TYPE_SLICE_END`); other points are instants; captures and the CPU are debug annotations.
//! Each stream that lost events gets a track of its own with an instant per loss record and a
//! counter track of the total lost; a stream's counters are an instant on its track.

use super::event::{Event, Loss, PointKind, Record, Tables, Value};
use super::{Sink, Summary};
use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

/// A protobuf message being built: fields appended in the order given.
#[derive(Default)]
struct Msg(Vec<u8>);

/// Protobuf's varint is the raw format's LEB128.
use super::raw::put_var as varint;

impl Msg {
    fn uint(&mut self, field: u32, v: u64) -> &mut Self {
        varint(&mut self.0, u64::from(field) << 3);
        varint(&mut self.0, v);
        self
    }

    /// An int32/int64 field (two's complement as a 64-bit varint, as protobuf encodes them).
    fn int(&mut self, field: u32, v: i64) -> &mut Self {
        self.uint(field, v as u64)
    }

    fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Self {
        varint(&mut self.0, u64::from(field) << 3 | 2);
        varint(&mut self.0, b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    fn msg(&mut self, field: u32, m: &Msg) -> &mut Self {
        self.bytes(field, &m.0)
    }
}

// Field numbers (perfetto/trace/trace_packet.proto and track_event/*.proto).
const TRACE_PACKET: u32 = 1;
const PKT_TIMESTAMP: u32 = 8;
const PKT_SEQUENCE_ID: u32 = 10;
const PKT_TRACK_EVENT: u32 = 11;
const PKT_SEQUENCE_FLAGS: u32 = 13;
const PKT_TRACK_DESCRIPTOR: u32 = 60;
const SEQ_INCREMENTAL_STATE_CLEARED: u64 = 1;
const TD_UUID: u32 = 1;
const TD_NAME: u32 = 2;
const TD_PROCESS: u32 = 3;
const TD_THREAD: u32 = 4;
const TD_PARENT: u32 = 5;
const TD_COUNTER: u32 = 8;
const PD_PID: u32 = 1;
const PD_NAME: u32 = 6;
const THD_PID: u32 = 1;
const THD_TID: u32 = 2;
const THD_NAME: u32 = 5;
const TE_ANNOTATIONS: u32 = 4;
const TE_TYPE: u32 = 9;
const TE_TRACK: u32 = 11;
const TE_NAME: u32 = 23;
const TE_COUNTER_VALUE: u32 = 30;
const TYPE_SLICE_BEGIN: u64 = 1;
const TYPE_SLICE_END: u64 = 2;
const TYPE_INSTANT: u64 = 3;
const TYPE_COUNTER: u64 = 4;
const DA_BOOL: u32 = 2;
const DA_UINT: u32 = 3;
const DA_INT: u32 = 4;
const DA_STRING: u32 = 6;
const DA_POINTER: u32 = 7;
const DA_NAME: u32 = 10;
/// The one packet sequence every packet is on.
const SEQUENCE: u64 = 1;

/// A track's uuid: FNV-1a of what identifies it, never 0.
fn uuid(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.iter().chain(&[0xff]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h.max(1)
}

fn annotation(name: &str, f: impl FnOnce(&mut Msg)) -> Msg {
    let mut a = Msg::default();
    a.bytes(DA_NAME, name.as_bytes());
    f(&mut a);
    a
}

/// A capture's annotations: its value, plus `NAME.truncated` for a string cut at its limit;
/// a fault is `NAME.fault` with the address.
fn value_annotations(name: &str, v: &Value, hex: bool, te: &mut Msg) {
    match v {
        Value::Unsigned(u) if hex => te.msg(
            TE_ANNOTATIONS,
            &annotation(name, |a| {
                a.uint(DA_POINTER, *u);
            }),
        ),
        Value::Unsigned(u) => te.msg(
            TE_ANNOTATIONS,
            &annotation(name, |a| {
                a.uint(DA_UINT, *u);
            }),
        ),
        Value::Signed(i) => te.msg(
            TE_ANNOTATIONS,
            &annotation(name, |a| {
                a.int(DA_INT, *i);
            }),
        ),
        Value::Bytes { data, truncated } => {
            te.msg(
                TE_ANNOTATIONS,
                &annotation(name, |a| {
                    a.bytes(DA_STRING, String::from_utf8_lossy(data).as_bytes());
                }),
            );
            if *truncated {
                te.msg(
                    TE_ANNOTATIONS,
                    &annotation(&format!("{name}.truncated"), |a| {
                        a.uint(DA_BOOL, 1);
                    }),
                );
            }
            te
        }
        Value::Fault { addr } => te.msg(
            TE_ANNOTATIONS,
            &annotation(&format!("{name}.fault"), |a| {
                a.uint(DA_POINTER, *addr);
            }),
        ),
    };
}

/// The Perfetto output.
pub struct Perfetto<W: Write> {
    out: W,
    first: bool,
    /// Process tracks emitted, by uuid.
    processes: HashSet<u64>,
    /// Thread tracks emitted, by uuid, with the name they were given.
    threads: HashMap<u64, String>,
    /// Each stream's loss track and counter track, and its total lost so far.
    streams: HashMap<(u16, u16), (u64, u64, u64)>,
}

impl<W: Write> Perfetto<W> {
    pub fn new(out: W) -> Self {
        Perfetto {
            out,
            first: true,
            processes: HashSet::new(),
            threads: HashMap::new(),
            streams: HashMap::new(),
        }
    }

    fn packet(&mut self, time_ns: Option<u64>, field: u32, body: &Msg) -> io::Result<()> {
        let mut p = Msg::default();
        if let Some(t) = time_ns {
            p.uint(PKT_TIMESTAMP, t);
        }
        p.uint(PKT_SEQUENCE_ID, SEQUENCE);
        if self.first {
            p.uint(PKT_SEQUENCE_FLAGS, SEQ_INCREMENTAL_STATE_CLEARED);
            self.first = false;
        }
        p.msg(field, body);
        let mut framed = Msg::default();
        framed.msg(TRACE_PACKET, &p);
        self.out.write_all(&framed.0)
    }

    /// The thread's track (and its process's), described the first time and again when the
    /// thread's name changed.
    fn thread_track(&mut self, t: &Tables, source: u16, pid: u32, tid: u32) -> io::Result<u64> {
        let machine = t.source(source).map_or("", |s| s.machine.as_str()).to_string();
        let p_uuid = uuid(&[b"process", machine.as_bytes(), &pid.to_le_bytes()]);
        let t_uuid = uuid(&[b"thread", machine.as_bytes(), &pid.to_le_bytes(), &tid.to_le_bytes()]);
        if self.processes.insert(p_uuid) {
            let name = match t.source(source) {
                Some(s) if s.pid == pid && s.pid != 0 => s.name.clone(),
                _ => t.comm(source, pid).to_string(),
            };
            let name = if machine.is_empty() { name } else { format!("{machine}:{name}") };
            let mut pd = Msg::default();
            pd.uint(PD_PID, u64::from(pid)).bytes(PD_NAME, name.as_bytes());
            let mut td = Msg::default();
            td.uint(TD_UUID, p_uuid).msg(TD_PROCESS, &pd);
            self.packet(None, PKT_TRACK_DESCRIPTOR, &td)?;
        }
        let comm = t.comm(source, tid);
        if self.threads.get(&t_uuid).map(String::as_str) != Some(comm) {
            self.threads.insert(t_uuid, comm.to_string());
            let mut thd = Msg::default();
            thd.uint(THD_PID, u64::from(pid))
                .uint(THD_TID, u64::from(tid))
                .bytes(THD_NAME, comm.as_bytes());
            let mut td = Msg::default();
            td.uint(TD_UUID, t_uuid).uint(TD_PARENT, p_uuid).msg(TD_THREAD, &thd);
            self.packet(None, PKT_TRACK_DESCRIPTOR, &td)?;
        }
        Ok(t_uuid)
    }

    fn event(&mut self, t: &Tables, e: &Event) -> io::Result<()> {
        let track = self.thread_track(t, e.source, e.pid, e.tid)?;
        let mut te = Msg::default();
        te.uint(TE_TRACK, track);
        let probe = t.probe(e);
        te.uint(
            TE_TYPE,
            match e.kind {
                PointKind::Entry => TYPE_SLICE_BEGIN,
                PointKind::Exit => TYPE_SLICE_END,
                PointKind::Instant => TYPE_INSTANT,
            },
        );
        if e.kind != PointKind::Exit {
            let name = probe.map_or_else(|| format!("probe#{}", e.probe), |p| p.name.clone());
            te.bytes(TE_NAME, name.as_bytes());
        }
        te.msg(
            TE_ANNOTATIONS,
            &annotation("cpu", |a| {
                a.uint(DA_UINT, u64::from(e.cpu));
            }),
        );
        if let Some(p) = probe {
            for (c, v) in p.captures.iter().zip(&e.values) {
                value_annotations(&c.name, v, c.hex, &mut te);
            }
        }
        self.packet(Some(e.time_ns), PKT_TRACK_EVENT, &te)
    }

    /// A stream's loss track and lost-counter track, described on first use.
    fn stream_tracks(&mut self, t: &Tables, source: u16, stream: u16) -> io::Result<(u64, u64)> {
        if let Some(&(a, b, _)) = self.streams.get(&(source, stream)) {
            return Ok((a, b));
        }
        let s = t.source(source);
        let machine = s.map_or("", |s| s.machine.as_str());
        let src = s.map_or("?", |s| s.name.as_str());
        let name = t.stream_name(source, stream);
        let label = if machine.is_empty() {
            format!("stream {name} ({src})")
        } else {
            format!("stream {name} ({machine}:{src})")
        };
        let id = [source.to_le_bytes(), stream.to_le_bytes()].concat();
        let track = uuid(&[b"stream", machine.as_bytes(), &id]);
        let counter = uuid(&[b"stream-lost", machine.as_bytes(), &id]);
        let mut td = Msg::default();
        td.uint(TD_UUID, track).bytes(TD_NAME, label.as_bytes());
        self.packet(None, PKT_TRACK_DESCRIPTOR, &td)?;
        let mut td = Msg::default();
        td.uint(TD_UUID, counter)
            .bytes(TD_NAME, format!("{label} lost").as_bytes())
            .msg(TD_COUNTER, &Msg::default());
        self.packet(None, PKT_TRACK_DESCRIPTOR, &td)?;
        self.streams.insert((source, stream), (track, counter, 0));
        Ok((track, counter))
    }

    fn loss(&mut self, t: &Tables, l: &Loss) -> io::Result<()> {
        let (track, counter) = self.stream_tracks(t, l.source, l.stream)?;
        let total = {
            let e = self.streams.get_mut(&(l.source, l.stream)).expect("just made");
            e.2 += l.count;
            e.2
        };
        let mut te = Msg::default();
        te.uint(TE_TRACK, track)
            .uint(TE_TYPE, TYPE_INSTANT)
            .bytes(TE_NAME, format!("lost {} events", l.count).as_bytes())
            .msg(
                TE_ANNOTATIONS,
                &annotation("count", |a| {
                    a.uint(DA_UINT, l.count);
                }),
            )
            .msg(
                TE_ANNOTATIONS,
                &annotation("from_ns", |a| {
                    a.uint(DA_UINT, l.from_ns);
                }),
            )
            .msg(
                TE_ANNOTATIONS,
                &annotation("to_ns", |a| {
                    a.uint(DA_UINT, l.to_ns);
                }),
            )
            .msg(
                TE_ANNOTATIONS,
                &annotation("origin", |a| {
                    a.bytes(DA_STRING, l.origin.as_str().as_bytes());
                }),
            );
        self.packet(Some(l.to_ns), PKT_TRACK_EVENT, &te)?;
        let mut te = Msg::default();
        te.uint(TE_TRACK, counter).uint(TE_TYPE, TYPE_COUNTER).int(TE_COUNTER_VALUE, total as i64);
        self.packet(Some(l.to_ns), PKT_TRACK_EVENT, &te)
    }
}

impl<W: Write> Sink for Perfetto<W> {
    fn record(&mut self, t: &Tables, r: &Record) -> io::Result<()> {
        match r {
            Record::Event(e) => self.event(t, e),
            Record::Loss(l) => self.loss(t, l),
            Record::Counters(c) => {
                let (track, _) = self.stream_tracks(t, c.source, c.stream)?;
                let mut te = Msg::default();
                te.uint(TE_TRACK, track).uint(TE_TYPE, TYPE_INSTANT).bytes(TE_NAME, b"counters");
                for (name, v) in [
                    ("emitted", c.emitted),
                    ("filtered", c.filtered),
                    ("delivered", c.delivered),
                    ("lost", c.lost),
                ] {
                    te.msg(
                        TE_ANNOTATIONS,
                        &annotation(name, |a| {
                            a.uint(DA_UINT, v);
                        }),
                    );
                }
                self.packet(Some(c.time_ns), PKT_TRACK_EVENT, &te)
            }
            Record::Thread(th) => {
                // A thread already shown that changed its name is described again.
                if self.threads.contains_key(&uuid(&[
                    b"thread",
                    t.source(th.source).map_or("", |s| s.machine.as_str()).as_bytes(),
                    &th.pid.to_le_bytes(),
                    &th.tid.to_le_bytes(),
                ])) {
                    self.thread_track(t, th.source, th.pid, th.tid)?;
                }
                Ok(())
            }
            Record::Source(_) | Record::End => Ok(()),
        }
    }

    fn finish(&mut self, _t: &Tables, _s: &Summary) -> io::Result<()> {
        self.out.flush()
    }
}
