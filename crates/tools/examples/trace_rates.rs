//! Benchmark of the trace output side on synthetic events (bench/trace_rates.sh runs it):
//! raw write and read rates, conversion to Perfetto and text, and collection throughput over
//! loopback (a sender that blocks, and one that drops under backpressure). Prints events/s,
//! the median of `--runs` runs. Events: a function entry with two integer captures.

use kerf_tools::trace::collect::{Backpressure, Collector, Sender};
use kerf_tools::trace::event::{
    CaptureInfo, Event, PointKind, ProbeInfo, Record, Source, SourceKind, StreamInfo, Value,
};
use kerf_tools::trace::raw::{Reader, Writer};
use kerf_tools::trace::{self as tr, Format};
use std::io::{BufReader, BufWriter};
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

fn source() -> Source {
    Source {
        id: 0,
        machine: String::new(),
        kind: SourceKind::Process,
        pid: 1000,
        name: "bench".into(),
        realtime_offset_ns: 0,
        probes: vec![ProbeInfo {
            name: "f".into(),
            point: "app:f".into(),
            kind: PointKind::Instant,
            stream: 0,
            captures: vec![
                CaptureInfo { name: "a".into(), hex: false },
                CaptureInfo { name: "b".into(), hex: true },
            ],
        }],
        streams: vec![StreamInfo { name: "app".into() }],
    }
}

fn event(i: u64) -> Record {
    Record::Event(Event {
        source: 0,
        time_ns: 1_000_000_000 + i * 37,
        tsc: 3_000_000_000 + i * 111,
        pid: 1000,
        tid: 1000 + (i % 4) as u32,
        cpu: (i % 2) as u32,
        probe: 0,
        stream: 0,
        kind: PointKind::Instant,
        values: vec![Value::Unsigned(i), Value::Unsigned(0x7fff_0000_0000 + i * 8)],
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rate(name: &str, n: u64, runs: usize, mut f: impl FnMut() -> Duration) {
    let secs: Vec<f64> = (0..runs).map(|_| f().as_secs_f64()).collect();
    let m = median(secs);
    println!("{name:<34} {:>12.0} events/s  ({n} events, median {m:.3} s of {runs})", n as f64 / m);
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(2_000_000, |a| a.parse().expect("N events"));
    let runs: usize = args.next().map_or(3, |a| a.parse().expect("runs"));
    let dir = std::env::temp_dir().join(format!("kerf-trace-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let raw = dir.join("t.kerf-trace");
    let records: Vec<Record> = (0..n).map(event).collect();

    rate("raw write (file)", n, runs, || {
        let t = Instant::now();
        let f = BufWriter::with_capacity(1 << 20, std::fs::File::create(&raw).expect("create"));
        let mut w = Writer::new(f).expect("header");
        w.write(&Record::Source(source())).expect("source");
        for r in &records {
            w.write(r).expect("event");
        }
        w.finish().expect("finish");
        t.elapsed()
    });
    let size = std::fs::metadata(&raw).expect("raw").len();
    println!("{:<34} {:>12.1} bytes/event", "raw size", size as f64 / n as f64);

    rate("raw read and check", n, runs, || {
        let t = Instant::now();
        let mut r = Reader::new(BufReader::with_capacity(
            1 << 20,
            std::fs::File::open(&raw).expect("open"),
        ))
        .expect("header");
        let mut k = 0u64;
        while let Some(rec) = r.next_record().expect("record") {
            k += u64::from(matches!(rec, Record::Event(_)));
        }
        assert_eq!(k, n);
        t.elapsed()
    });

    for (name, format, file) in [
        ("convert to perfetto", Format::Perfetto, "t.perfetto-trace"),
        ("convert to text", Format::Text, "t.txt"),
        ("convert to jsonl", Format::JsonLines, "t.jsonl"),
    ] {
        let out = dir.join(file);
        rate(name, n, runs, || {
            let t = Instant::now();
            let input = BufReader::with_capacity(1 << 20, std::fs::File::open(&raw).expect("open"));
            let w = BufWriter::with_capacity(1 << 20, std::fs::File::create(&out).expect("create"));
            let mut sink = tr::sink(format, w).expect("sink");
            let s = tr::convert(input, &mut *sink).expect("convert");
            assert_eq!(s.events, n);
            t.elapsed()
        });
    }

    for (name, policy) in [
        ("collect over loopback (block)", Backpressure::Block),
        ("collect over loopback (drop)", Backpressure::Drop),
    ] {
        let mut dropped = Vec::new();
        rate(name, n, runs, || {
            let out = BufWriter::with_capacity(
                1 << 20,
                std::fs::File::create(dir.join("c.kerf-trace")).expect("create"),
            );
            let c = Collector::bind("127.0.0.1:0", Box::new(out)).expect("bind");
            let addr = c.local_addr().expect("addr").to_string();
            let th = std::thread::spawn(move || {
                static NEVER: AtomicBool = AtomicBool::new(false);
                c.run(&NEVER, Some(1)).expect("collect")
            });
            let t = Instant::now();
            let s = Sender::new(&addr, "bench", vec![source()], 1 << 16, policy).expect("sender");
            for r in &records {
                s.send(r);
            }
            let stats = s.finish(Duration::from_secs(120)).expect("acked");
            let e = t.elapsed();
            let report = th.join().expect("collector");
            assert_eq!(report.sources[0].events + report.sources[0].lost_sender, n);
            dropped.push(stats.dropped);
            e
        });
        println!("{:<34} {:?} of {n} per run", "  dropped by the sender", dropped);
    }
    std::fs::remove_dir_all(&dir).ok();
}
