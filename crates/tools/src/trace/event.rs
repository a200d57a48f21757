//! What one traced event is, independent of where it came from (a ring in a process, the
//! driver's per-CPU rings, a file, a remote sender): the records every trace output reads.
//!
//! A trace is a sequence of [`Record`]s. A [`Source`] (one target on one machine: a process or
//! the kernel) comes first and carries its probe and stream tables; every later record names
//! its source by id and indexes those tables, so events of many targets and machines merge into
//! one timeline. Losses are records of their own ([`Loss`]): a stream that dropped events says
//! how many and between which times, never silently.

/// Which kind of target a source is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// A process (its pid is the source's `pid`).
    Process,
    /// The running kernel.
    Kernel,
}

/// One traced target on one machine, with the tables its records index.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Source {
    /// The id later records name it by (unique in one trace; a collector renumbers).
    pub id: u16,
    /// The machine it runs on; empty for this machine (a trace written locally).
    pub machine: String,
    pub kind: SourceKind,
    /// The process's id (0 for the kernel).
    pub pid: u32,
    /// The process's name (its comm) or `kernel`.
    pub name: String,
    /// CLOCK_REALTIME - CLOCK_MONOTONIC on that machine when tracing began, in ns: wall-clock
    /// time of an event is its `time_ns` plus this.
    pub realtime_offset_ns: i64,
    /// The probe table: [`Event::probe`] indexes it.
    pub probes: Vec<ProbeInfo>,
    /// The stream table: [`ProbeInfo::stream`], [`Event::stream`] and losses index it.
    pub streams: Vec<StreamInfo>,
}

/// Where in a function a probe sits, which decides how outputs show its events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PointKind {
    /// A function's entry: opens a slice on the thread.
    Entry,
    /// A function's exit: closes the slice its entry opened.
    Exit,
    /// Any other point (an offset, a block): an instant.
    Instant,
}

impl PointKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PointKind::Entry => "entry",
            PointKind::Exit => "exit",
            PointKind::Instant => "instant",
        }
    }
}

/// One probe: what its events are called and what they capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeInfo {
    /// The name events are shown under; an entry and its exits share it (the function's
    /// name), so that they pair up as one slice.
    pub name: String,
    /// Where it is, as the user would write it (`libc:open@exits`, `vfs_read+0x3c`).
    pub point: String,
    pub kind: PointKind,
    /// Its stream, an index into [`Source::streams`].
    pub stream: u16,
    /// What each event captures, in the order of [`Event::values`].
    pub captures: Vec<CaptureInfo>,
}

/// One captured value's name and how to show it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureInfo {
    pub name: String,
    /// Show unsigned values in hex (addresses, flags) rather than decimal.
    pub hex: bool,
}

/// A named stream of events, with its own buffers and counters in the tracer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    pub name: String,
}

/// A thread's name and process, so that outputs can show a comm per thread (threads may rename
/// themselves; the latest record wins) and a forked child's events its process (the name is
/// empty when the thread was gone before kerf could read it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadInfo {
    pub source: u16,
    pub pid: u32,
    pub tid: u32,
    pub name: String,
}

/// One captured value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    Unsigned(u64),
    Signed(i64),
    /// A NUL-terminated string or a memory block, without its NUL; `truncated` when the capture
    /// stopped at its length limit before the NUL.
    Bytes {
        data: Vec<u8>,
        truncated: bool,
    },
    /// The capture read from `addr` and faulted: the event records the fault instead of a value.
    Fault {
        addr: u64,
    },
}

/// One traced event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub source: u16,
    /// CLOCK_MONOTONIC of the source's machine, in ns.
    pub time_ns: u64,
    /// The raw time stamp counter the tracer read (0 if none); kept so that a reader can
    /// recalibrate.
    pub tsc: u64,
    pub pid: u32,
    pub tid: u32,
    pub cpu: u32,
    /// An index into the source's probe table.
    pub probe: u32,
    /// An index into the source's stream table (the probe's stream).
    pub stream: u16,
    /// The probe's kind, copied so that an event can be shown without its table.
    pub kind: PointKind,
    /// One per capture of the probe, in its order.
    pub values: Vec<Value>,
}

/// Where a loss happened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LossOrigin {
    /// The target's ring was full: the generated code counted the event and dropped it.
    Ring,
    /// A remote sender's queue was full (the collector or the network was too slow).
    Sender,
}

impl LossOrigin {
    pub fn as_str(self) -> &'static str {
        match self {
            LossOrigin::Ring => "ring",
            LossOrigin::Sender => "sender",
        }
    }
}

/// A stream lost `count` events between `from_ns` and `to_ns` (the times of the first and last
/// lost event, or of the last delivered one before and first one after, as the tracer knows).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loss {
    pub source: u16,
    pub stream: u16,
    pub count: u64,
    pub from_ns: u64,
    pub to_ns: u64,
    pub origin: LossOrigin,
}

/// A stream's counters at a moment (the tracer writes them at the end, and may write them
/// periodically): emitted = filtered + delivered + lost once the rings are drained.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counters {
    pub source: u16,
    pub stream: u16,
    pub time_ns: u64,
    /// Events the probes ran for.
    pub emitted: u64,
    /// Events a filter rejected.
    pub filtered: u64,
    /// Events the reader got.
    pub delivered: u64,
    /// Events dropped on a full ring.
    pub lost: u64,
}

/// One record of a trace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Record {
    Source(Source),
    Thread(ThreadInfo),
    Event(Event),
    Loss(Loss),
    Counters(Counters),
    /// The trace ended cleanly: a file without it was cut short.
    End,
}

impl Record {
    /// The source a record belongs to (`None` for the end).
    pub fn source(&self) -> Option<u16> {
        match self {
            Record::Source(s) => Some(s.id),
            Record::Thread(t) => Some(t.source),
            Record::Event(e) => Some(e.source),
            Record::Loss(l) => Some(l.source),
            Record::Counters(c) => Some(c.source),
            Record::End => None,
        }
    }

    /// The same record under another source id (a collector renumbering its senders' sources).
    pub fn with_source(mut self, id: u16) -> Record {
        match &mut self {
            Record::Source(s) => s.id = id,
            Record::Thread(t) => t.source = id,
            Record::Event(e) => e.source = id,
            Record::Loss(l) => l.source = id,
            Record::Counters(c) => c.source = id,
            Record::End => {}
        }
        self
    }
}

/// The sources seen so far in a trace, by id, with the threads' names: what outputs look
/// records up in.
#[derive(Default, Debug)]
pub struct Tables {
    sources: Vec<Option<Source>>,
    threads: std::collections::HashMap<(u16, u32), String>,
    /// The same names by machine and tid, for a source that names no threads itself (the
    /// kernel, whose events run in the threads of processes).
    machine_threads: std::collections::HashMap<(String, u32), String>,
}

impl Tables {
    /// Takes note of a source or a thread name; other records change nothing.
    pub fn note(&mut self, r: &Record) {
        match r {
            Record::Source(s) => {
                let i = usize::from(s.id);
                if self.sources.len() <= i {
                    self.sources.resize(i + 1, None);
                }
                self.sources[i] = Some(s.clone());
            }
            // A record with no name (a thread gone before kerf could read it, recorded for
            // its process) names nothing: the source's name stands.
            Record::Thread(t) if !t.name.is_empty() => {
                self.threads.insert((t.source, t.tid), t.name.clone());
                let machine = self.source(t.source).map_or(String::new(), |s| s.machine.clone());
                self.machine_threads.insert((machine, t.tid), t.name.clone());
            }
            _ => {}
        }
    }

    pub fn source(&self, id: u16) -> Option<&Source> {
        self.sources.get(usize::from(id)).and_then(Option::as_ref)
    }

    /// Every source seen, in id order.
    pub fn sources(&self) -> impl Iterator<Item = &Source> {
        self.sources.iter().flatten()
    }

    /// The thread's name if a record of its source gave one, else if another source on the
    /// same machine did, else the source's name.
    pub fn comm(&self, source: u16, tid: u32) -> &str {
        if let Some(n) = self.threads.get(&(source, tid)) {
            return n;
        }
        let Some(s) = self.source(source) else { return "?" };
        if self.machine_threads.is_empty() {
            return &s.name;
        }
        match self.machine_threads.get(&(s.machine.clone(), tid)) {
            Some(n) => n,
            None => &s.name,
        }
    }

    /// The probe an event names (the reader has checked that it exists).
    pub fn probe(&self, e: &Event) -> Option<&ProbeInfo> {
        self.source(e.source)?.probes.get(e.probe as usize)
    }

    /// A stream's name.
    pub fn stream_name(&self, source: u16, stream: u16) -> &str {
        self.source(source)
            .and_then(|s| s.streams.get(usize::from(stream)))
            .map_or("?", |s| s.name.as_str())
    }
}
