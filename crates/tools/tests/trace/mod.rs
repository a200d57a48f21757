//! A known trace shared by the trace tests: a process (two threads) and the kernel, nested
//! entry/exit pairs across both, an instant, a string cut at its limit, a faulting capture,
//! a loss and a stream's counters.

#![allow(dead_code)]

use kerf_tools::trace::event::{
    CaptureInfo, Counters, Event, Loss, LossOrigin, PointKind, ProbeInfo, Record, Source,
    SourceKind, StreamInfo, ThreadInfo, Value,
};

fn cap(name: &str, hex: bool) -> CaptureInfo {
    CaptureInfo { name: name.into(), hex }
}

pub fn probe(
    name: &str,
    point: &str,
    kind: PointKind,
    stream: u16,
    caps: Vec<CaptureInfo>,
) -> ProbeInfo {
    ProbeInfo { name: name.into(), point: point.into(), kind, stream, captures: caps }
}

/// The process source (id 0, pid 4242 `app`): open's entry and exits in stream `libc`, a
/// block of `parse` in stream `app`.
pub fn app(id: u16) -> Source {
    Source {
        id,
        machine: String::new(),
        kind: SourceKind::Process,
        pid: 4242,
        name: "app".into(),
        realtime_offset_ns: 1_700_000_000_000_000_000,
        streams: vec![StreamInfo { name: "libc".into() }, StreamInfo { name: "app".into() }],
        probes: vec![
            probe(
                "open",
                "libc:open",
                PointKind::Entry,
                0,
                vec![cap("path", false), cap("flags", true)],
            ),
            probe("open", "libc:open@exits", PointKind::Exit, 0, vec![cap("ret", false)]),
            probe("parse+0x10", "app:parse+0x10", PointKind::Instant, 1, vec![cap("rdi", true)]),
        ],
    }
}

/// The kernel source (id 1): do_sys_openat2's entry (a user string) and exit.
pub fn kernel(id: u16) -> Source {
    Source {
        id,
        machine: String::new(),
        kind: SourceKind::Kernel,
        pid: 0,
        name: "kernel".into(),
        realtime_offset_ns: 1_700_000_000_000_000_000,
        streams: vec![StreamInfo { name: "vfs".into() }],
        probes: vec![
            probe(
                "do_sys_openat2",
                "do_sys_openat2",
                PointKind::Entry,
                0,
                vec![cap("dfd", false), cap("name", false)],
            ),
            probe(
                "do_sys_openat2",
                "do_sys_openat2@exits",
                PointKind::Exit,
                0,
                vec![cap("ret", false)],
            ),
        ],
    }
}

pub fn event(
    source: u16,
    probe: u32,
    stream: u16,
    kind: PointKind,
    t: u64,
    tid: u32,
    values: Vec<Value>,
) -> Record {
    Record::Event(Event {
        source,
        time_ns: t,
        tsc: t * 3,
        pid: 4242,
        tid,
        cpu: tid % 2,
        probe,
        stream,
        kind,
        values,
    })
}

pub fn text(s: &str) -> Value {
    Value::Bytes { data: s.as_bytes().to_vec(), truncated: false }
}

/// The known trace, without its end record.
pub fn sample() -> Vec<Record> {
    use PointKind::*;
    vec![
        Record::Source(app(0)),
        Record::Source(kernel(1)),
        Record::Thread(ThreadInfo { source: 0, pid: 4242, tid: 4242, name: "app".into() }),
        Record::Thread(ThreadInfo { source: 0, pid: 4242, tid: 4243, name: "worker".into() }),
        // Thread 4242: open("/etc/hosts") enters the kernel, which opens it: fd 3.
        event(
            0,
            0,
            0,
            Entry,
            1_000_000_100,
            4242,
            vec![text("/etc/hosts"), Value::Unsigned(0x80000)],
        ),
        event(1, 0, 0, Entry, 1_000_000_200, 4242, vec![Value::Signed(-100), text("/etc/hosts")]),
        event(1, 1, 0, Exit, 1_000_000_300, 4242, vec![Value::Signed(3)]),
        event(0, 1, 0, Exit, 1_000_000_450, 4242, vec![Value::Signed(3)]),
        // Thread 4243: a block, then an open of a bad pointer (the capture faults) and of a
        // long name cut at its limit.
        event(0, 2, 1, Instant, 1_000_000_150, 4243, vec![Value::Unsigned(0x7fff_0000_1000)]),
        event(
            0,
            0,
            0,
            Entry,
            1_000_000_500,
            4243,
            vec![Value::Fault { addr: 0xdead }, Value::Unsigned(0)],
        ),
        event(0, 1, 0, Exit, 1_000_000_600, 4243, vec![Value::Signed(-14)]),
        event(
            0,
            0,
            0,
            Entry,
            1_000_000_700,
            4243,
            vec![
                Value::Bytes { data: b"/very/long/na".to_vec(), truncated: true },
                Value::Unsigned(2),
            ],
        ),
        event(0, 1, 0, Exit, 1_000_000_800, 4243, vec![Value::Signed(-2)]),
        Record::Loss(Loss {
            source: 0,
            stream: 1,
            count: 7,
            from_ns: 1_000_000_160,
            to_ns: 1_000_000_400,
            origin: LossOrigin::Ring,
        }),
        Record::Counters(Counters {
            source: 0,
            stream: 1,
            time_ns: 1_000_000_900,
            emitted: 8,
            filtered: 0,
            delivered: 1,
            lost: 7,
        }),
    ]
}

/// `n` synthetic events in one source, alternating entry and exit on four threads.
pub fn synthetic(source: u16, n: u64, t0: u64) -> impl Iterator<Item = Record> {
    (0..n).map(move |i| {
        let tid = 4242 + (i / 2 % 4) as u32;
        if i % 2 == 0 {
            event(
                source,
                0,
                0,
                PointKind::Entry,
                t0 + i * 10,
                tid,
                vec![text("/tmp/x"), Value::Unsigned(i)],
            )
        } else {
            event(source, 1, 0, PointKind::Exit, t0 + i * 10, tid, vec![Value::Signed(i as i64)])
        }
    })
}
