//! The trace outputs on a known trace (`tests/trace/mod.rs`): the raw format read back equal,
//! cut or corrupted at every byte without a panic and with a typed error, text and JSON Lines
//! against their goldens (`KERF_BLESS=1` rewrites them), and the Perfetto file parsed with
//! Perfetto's own schema (`tests/trace/perfetto_check.py`) giving the expected slices; packed
//! ring records (what `kerf trace -o x.kerf-trace` writes) read back as events, decoded and
//! in the tracer's time order.

mod trace;

use kerf_tools::trace::event::Record;
use kerf_tools::trace::raw::{RawError, Reader, Writer};
use kerf_tools::trace::{self as tr, Format};
use serde_json::{json, Value as Json};
use std::path::{Path, PathBuf};
use std::process::Command;

fn raw_bytes(records: &[Record], end: bool) -> Vec<u8> {
    let mut w = Writer::new(Vec::new()).expect("header");
    for r in records {
        w.write(r).expect("record");
    }
    if end {
        w.finish().expect("finish")
    } else {
        w.abandon().expect("flush")
    }
}

/// Every record of `bytes`, and how reading stopped.
fn read_all(bytes: &[u8]) -> (Vec<Record>, Result<(), RawError>) {
    let mut out = Vec::new();
    let mut r = match Reader::new(bytes) {
        Ok(r) => r,
        Err(e) => return (out, Err(e)),
    };
    loop {
        match r.next_record() {
            Ok(Some(rec)) => out.push(rec),
            Ok(None) => return (out, Ok(())),
            Err(e) => return (out, Err(e)),
        }
    }
}

#[test]
fn raw_round_trip() {
    let sample = trace::sample();
    let bytes = raw_bytes(&sample, true);
    let (back, end) = read_all(&bytes);
    end.expect("a finished trace reads to its end");
    assert_eq!(back[..back.len() - 1], sample[..]);
    assert_eq!(back.last(), Some(&Record::End));
}

#[test]
fn raw_cut_at_every_byte() {
    let sample = trace::sample();
    let bytes = raw_bytes(&sample, true);
    for cut in 0..bytes.len() {
        let (back, end) = read_all(&bytes[..cut]);
        // Whatever came out is the trace's beginning, and the reader says why it stopped.
        assert_eq!(back[..], sample[..back.len()], "cut at {cut}");
        match end {
            Err(RawError::BadMagic) => assert!(cut < 8, "cut at {cut}"),
            Err(RawError::Truncated { records, .. }) | Err(RawError::Unfinished { records }) => {
                assert_eq!(records as usize, back.len(), "cut at {cut}")
            }
            other => panic!("cut at {cut}: {other:?}"),
        }
    }
    // Cut right after a record: unfinished, every record before it read.
    let (back, end) = read_all(&raw_bytes(&sample, false));
    assert_eq!(back, sample);
    assert!(
        matches!(end, Err(RawError::Unfinished { records }) if records as usize == sample.len())
    );
}

#[test]
fn raw_corrupt_at_every_byte() {
    let bytes = raw_bytes(&trace::sample(), true);
    for at in 0..bytes.len() {
        for x in [0xffu8, 0x80, 0x01] {
            let mut b = bytes.clone();
            b[at] ^= x;
            // No panic; reading ends in a typed error or a clean end of some trace.
            let (_, end) = read_all(&b);
            if let Err(e) = end {
                assert!(!e.to_string().is_empty());
            }
        }
    }
}

/// A source record longer than 16 MiB (the call trace of a program with 100 k functions,
/// node's, names two probes of each: about 27 MB) is written and read back whole; a length
/// far past a short file's end reads as a cut trace, with no allocation for the length.
#[test]
fn long_records_read_back_and_a_huge_length_is_a_cut_trace() {
    let mut big = trace::app(0);
    let long = "f".repeat(200);
    big.probes = (0..100_000u32)
        .map(|k| {
            let (name, point) = (format!("{long}{k}"), format!("libbig:{long}{k}@exits"));
            trace::probe(&name, &point, kerf_tools::trace::event::PointKind::Exit, 0, vec![])
        })
        .collect();
    let bytes = raw_bytes(&[Record::Source(big.clone())], true);
    assert!(bytes.len() > 32 << 20, "{} bytes", bytes.len());
    let (records, end) = read_all(&bytes);
    assert_eq!(end.map_err(|e| e.to_string()), Ok(()));
    // The source and the end record (compared without printing: 40 MB).
    assert_eq!(records.len(), 2);
    assert!(records[0] == Record::Source(big), "the source read back differs");
    // A length of 768 MiB (within the limit) and 5 bytes of it.
    let mut b = raw_bytes(&[], false);
    b.extend_from_slice(&(768u32 << 20).to_le_bytes());
    b.extend_from_slice(&[1, 2, 3, 4, 5]);
    assert!(matches!(read_all(&b).1, Err(RawError::Truncated { offset: 16, records: 0 })));
}

#[test]
fn raw_corruptions_are_named() {
    use kerf_tools::trace::event::{PointKind, Value};
    let check = |records: Vec<Record>, want: &str| {
        let (_, end) = read_all(&raw_bytes(&records, true));
        match end {
            Err(RawError::Corrupt { what, .. }) => assert!(what.contains(want), "{what}"),
            other => panic!("wanted a corrupt record ({want}), got {other:?}"),
        }
    };
    let ev = |probe, values| trace::event(0, probe, 0, PointKind::Entry, 1, 1, values);
    check(vec![ev(0, vec![])], "source 0 not defined");
    check(vec![Record::Source(trace::app(0)), ev(9, vec![])], "probe 9 of source 0 does not exist");
    check(
        vec![Record::Source(trace::app(0)), ev(0, vec![Value::Unsigned(1)])],
        "captures 2 values, the event has 1",
    );
    check(vec![Record::Source(trace::app(0)), Record::Source(trace::app(0))], "defined twice");

    let mut b = raw_bytes(&[], true);
    b[8] = 3;
    assert!(matches!(read_all(&b).1, Err(RawError::Version { found: 3 })));
    let mut b = raw_bytes(&[], false);
    b.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(matches!(read_all(&b).1, Err(RawError::Corrupt { offset: 16, .. })));
    let mut b = raw_bytes(&[], false);
    b.extend_from_slice(&[1, 0, 0, 0, 99]);
    assert!(
        matches!(read_all(&b).1, Err(RawError::Corrupt { ref what, .. }) if what.contains("unknown record tag 99"))
    );
}

fn converted(format: Format, bytes: &[u8]) -> (Vec<u8>, tr::Summary) {
    let mut out = Vec::new();
    let summary = {
        let mut sink = tr::sink(format, &mut out).expect("sink");
        tr::convert(bytes, &mut *sink).expect("convert")
    };
    (out, summary)
}

fn golden(name: &str, got: &[u8]) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/trace").join(name);
    if std::env::var_os("KERF_BLESS").is_some() {
        std::fs::write(&path, got).expect("bless");
        return;
    }
    let want = std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (KERF_BLESS=1 makes it)", path.display()));
    assert_eq!(
        String::from_utf8_lossy(got),
        String::from_utf8_lossy(&want),
        "{name} differs from its golden"
    );
}

#[test]
fn text_and_jsonl_goldens() {
    let bytes = raw_bytes(&trace::sample(), true);
    let (text, summary) = converted(Format::Text, &bytes);
    assert_eq!((summary.events, summary.lost, summary.incomplete.as_deref()), (9, 7, None));
    golden("sample.txt", &text);
    let (jsonl, _) = converted(Format::JsonLines, &bytes);
    golden("sample.jsonl", &jsonl);
    // Every line is one JSON object; the last is the summary.
    let lines: Vec<Json> = std::str::from_utf8(&jsonl)
        .expect("UTF-8")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON object per line"))
        .collect();
    assert_eq!(lines.iter().filter(|l| l["type"] == "event").count(), 9);
    assert_eq!(lines.last().expect("lines")["lost"], 7);
}

#[test]
fn convert_cut_trace_says_so() {
    let bytes = raw_bytes(&trace::sample(), true);
    // Cut inside the seventh record (an exit of the kernel).
    let (text, summary) = converted(Format::Text, &bytes[..bytes.len() - 60]);
    let text = String::from_utf8(text).expect("UTF-8");
    assert!(summary.incomplete.as_deref().is_some_and(|w| w.contains("cut short")), "{summary:?}");
    assert!(text.lines().last().expect("summary line").contains("cut short"), "{text}");
    assert!(text.contains("libc:open path=\"/etc/hosts\""), "{text}");
}

fn python() -> String {
    std::env::var("KERF_PYTHON").unwrap_or_else(|_| "python3".into())
}

/// Runs the check script on a Perfetto file; fails (never skips) if Python or the packages are
/// missing.
fn perfetto_check(path: &Path) -> Json {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/trace/perfetto_check.py");
    let out = Command::new(python())
        .arg(&script)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}: install Python 3 (scripts/deps.sh)", python()));
    assert!(
        out.status.success(),
        "perfetto_check.py failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("the script prints JSON")
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kerf-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d.join(name)
}

#[test]
fn perfetto_slices_from_the_official_schema() {
    let bytes = raw_bytes(&trace::sample(), true);
    let (pf, _) = converted(Format::Perfetto, &bytes);
    let path = tmp("sample.perfetto-trace");
    std::fs::write(&path, &pf).expect("write");
    let got = perfetto_check(&path);
    std::fs::remove_file(&path).ok();

    assert_eq!(got["processes"], json!({"4242": "app"}));
    assert_eq!(
        got["threads"],
        json!({"4242": {"pid": 4242, "name": "app", "in_process": 4242},
               "4243": {"pid": 4242, "name": "worker", "in_process": 4242}})
    );
    // The process's open and the kernel's do_sys_openat2 nest on one thread track; the exit's
    // captures join the entry's.
    assert_eq!(
        got["slices"],
        json!([
            {"pid": 4242, "tid": 4242, "name": "open", "ts": 1_000_000_100u64, "dur": 350, "depth": 0,
             "args": {"cpu": 0, "path": "/etc/hosts", "flags": 0x80000, "ret": 3}},
            {"pid": 4242, "tid": 4242, "name": "do_sys_openat2", "ts": 1_000_000_200u64, "dur": 100, "depth": 1,
             "args": {"cpu": 0, "dfd": -100, "name": "/etc/hosts", "ret": 3}},
            {"pid": 4242, "tid": 4243, "name": "open", "ts": 1_000_000_500u64, "dur": 100, "depth": 0,
             "args": {"cpu": 1, "path.fault": 0xdead, "flags": 0, "ret": -14}},
            {"pid": 4242, "tid": 4243, "name": "open", "ts": 1_000_000_700u64, "dur": 100, "depth": 0,
             "args": {"cpu": 1, "path": "/very/long/na", "path.truncated": true, "flags": 2, "ret": -2}},
        ])
    );
    let stream = "stream app (app)";
    assert_eq!(
        got["instants"],
        json!([
            {"pid": 4242, "tid": 4243, "name": "parse+0x10", "ts": 1_000_000_150u64, "depth": 0,
             "args": {"cpu": 1, "rdi": 0x7fff_0000_1000u64}},
            {"track": stream, "name": "lost 7 events", "ts": 1_000_000_400u64, "depth": 0,
             "args": {"count": 7, "from_ns": 1_000_000_160u64, "to_ns": 1_000_000_400u64, "origin": "ring"}},
            {"track": stream, "name": "counters", "ts": 1_000_000_900u64, "depth": 0,
             "args": {"emitted": 8, "filtered": 0, "delivered": 1, "lost": 7}},
        ])
    );
    assert_eq!(
        got["counters"],
        json!([{"track": "stream app (app) lost", "ts": 1_000_000_400u64, "value": 7}])
    );
}

#[test]
fn perfetto_many_events() {
    // 10,000 synthetic entry/exit pairs on four threads: as many slices, none left open.
    let mut records = vec![Record::Source(trace::app(0))];
    records.extend(trace::synthetic(0, 20_000, 1_000));
    let (pf, _) = converted(Format::Perfetto, &raw_bytes(&records, true));
    let path = tmp("many.perfetto-trace");
    std::fs::write(&path, &pf).expect("write");
    let got = perfetto_check(&path);
    std::fs::remove_file(&path).ok();
    let slices = got["slices"].as_array().expect("slices");
    assert_eq!(slices.len(), 10_000);
    assert!(slices.iter().all(|s| s["dur"] == 10 && s["depth"] == 0), "{:?}", &slices[..3]);
}

mod packed {
    use super::{read_all, trace};
    use kerf_tools::trace::event::{Loss, LossOrigin, PointKind, Record, Value};
    use kerf_tools::trace::probe::MemKind;
    use kerf_tools::trace::program::{Decode, Slot};
    use kerf_tools::trace::raw::{RawError, Writer};
    use kerf_tools::trace::unpack::{Clock, SourceDecode};

    /// How `trace::app`'s probes decode: open {path=str(arg0, 16), flags}, its exit {ret},
    /// parse+0x10 {rdi}; each record starts with the thread id.
    fn app_decode() -> SourceDecode {
        let read =
            Slot::Read { r: 0, addr: 1, disp: 0, kind: MemKind::Str { max: 16, user: false } };
        let word = |captures| Decode { tid: true, pair: false, captures, reads: vec![] };
        SourceDecode {
            pid: 4242,
            probes: vec![
                (
                    PointKind::Entry,
                    0,
                    Decode { reads: vec![(0, 16)], ..word(vec![read, Slot::Word(2)]) },
                ),
                (PointKind::Exit, 0, word(vec![Slot::Word(1)])),
                (PointKind::Instant, 1, word(vec![Slot::Word(1)])),
            ],
        }
    }

    /// One packed record, as `ring::copy` makes it.
    fn rec(out: &mut Vec<u64>, time: u64, probe: u32, cpu: u16, words: &[u64]) {
        out.push(time);
        out.push(u64::from(cpu) << 48 | (8 * words.len() as u64) << 32 | u64::from(probe));
        out.extend_from_slice(words);
    }

    fn str_words(s: &str) -> [u64; 3] {
        let mut b = [0u8; 16];
        b[..s.len()].copy_from_slice(s.as_bytes());
        let w = |k: usize| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().unwrap());
        [s.len() as u64 + 1, w(0), w(1)]
    }

    /// Two rings of one process over two drains, a loss between.
    fn packed_trace(version_one: bool) -> Vec<u8> {
        let mut w =
            if version_one { Writer::new(Vec::new()) } else { Writer::new_packed(Vec::new()) }
                .unwrap();
        w.write(&Record::Source(trace::app(0))).unwrap();
        w.clock(&Clock { ticks_per_ns: 2.0, anchor_tsc: 0, anchor_ns: 1000 }).unwrap();
        w.decode_table(0, &app_decode()).unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let p = str_words("/etc/a");
        rec(&mut a, 100, 0, 1, &[10, 0x7000, 0x42, p[0], p[1], p[2]]);
        rec(&mut a, 300, 1, 1, &[10, 3]);
        rec(&mut b, 200, 2, 0, &[11, 0xdead]);
        rec(&mut b, 400, 2, 0, &[11, 7]);
        let loss =
            Loss { source: 0, stream: 1, count: 5, from_ns: 1, to_ns: 2, origin: LossOrigin::Ring };
        w.write(&Record::Loss(loss)).unwrap();
        w.packed(0, &a).unwrap();
        w.packed(0, &b).unwrap();
        w.drain(350).unwrap();
        let mut c = Vec::new();
        rec(&mut c, 360, 2, 1, &[10, 1]);
        w.packed(0, &c).unwrap();
        w.finish().unwrap()
    }

    fn events(records: &[Record]) -> Vec<(u64, u32, u32, Vec<Value>)> {
        records
            .iter()
            .filter_map(|r| match r {
                Record::Event(e) => Some((e.time_ns, e.tid, e.probe, e.values.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn packed_records_come_out_decoded_in_time_order() {
        let (back, end) = read_all(&packed_trace(false));
        end.expect("a finished packed trace reads to its end");
        let u = Value::Unsigned;
        let path = Value::Bytes { data: b"/etc/a".to_vec(), truncated: false };
        // TSC t is 1000 + t / 2 ns; 400 was drained before 360 but comes out after it.
        assert_eq!(
            events(&back),
            [
                (1050, 10, 0, vec![path, u(0x42)]),
                (1100, 11, 2, vec![u(0xdead)]),
                (1150, 10, 1, vec![u(3)]),
                (1180, 10, 2, vec![u(1)]),
                (1200, 11, 2, vec![u(7)]),
            ]
        );
        // The loss, written before the first drain's records, comes out before its events.
        assert!(matches!(back[1], Record::Loss(ref l) if l.count == 5), "{:?}", back[1]);
        assert_eq!(back.last(), Some(&Record::End));
        match &back[2] {
            Record::Event(e) => {
                assert_eq!((e.pid, e.cpu, e.kind, e.tsc), (4242, 1, PointKind::Entry, 100))
            }
            r => panic!("{r:?}"),
        }
    }

    /// Cut anywhere: no panic, a typed error, and the events that came out are some of the
    /// trace's, in time order (a cut before a drain's end gives its records all at once).
    #[test]
    fn packed_cut_at_every_byte() {
        let bytes = packed_trace(false);
        let all = events(&read_all(&bytes).0);
        for cut in 0..bytes.len() {
            let (back, end) = read_all(&bytes[..cut]);
            let got = events(&back);
            assert!(got.iter().all(|e| all.contains(e)), "cut at {cut}: {got:?}");
            assert!(got.windows(2).all(|w| w[0].0 <= w[1].0), "cut at {cut}: {got:?}");
            match end {
                Err(
                    RawError::BadMagic | RawError::Truncated { .. } | RawError::Unfinished { .. },
                ) => {}
                other => panic!("cut at {cut}: {other:?}"),
            }
        }
    }

    #[test]
    fn packed_corrupt_at_every_byte() {
        let bytes = packed_trace(false);
        for at in 0..bytes.len() {
            for x in [0xffu8, 0x80, 0x01] {
                let mut b = bytes.clone();
                b[at] ^= x;
                // No panic; reading ends in a typed error or a clean end of some trace.
                if let Err(e) = read_all(&b).1 {
                    assert!(!e.to_string().is_empty());
                }
            }
        }
    }

    #[test]
    fn packed_corruptions_are_named() {
        let corrupt = |b: &[u8], want: &str| match read_all(b).1 {
            Err(RawError::Corrupt { what, .. }) => assert!(what.contains(want), "{what}"),
            other => panic!("wanted a corrupt record ({want}), got {other:?}"),
        };
        corrupt(&packed_trace(true), "a packed record in a version 1 trace");
        let mut w = Writer::new_packed(Vec::new()).unwrap();
        w.write(&Record::Source(trace::app(0))).unwrap();
        let mut r = Vec::new();
        rec(&mut r, 1, 9, 0, &[1, 2]);
        let mut early = Writer::new_packed(Vec::new()).unwrap();
        early.write(&Record::Source(trace::app(0))).unwrap();
        early.packed(0, &r).unwrap();
        corrupt(&early.finish().unwrap(), "before the clock record");
        w.clock(&Clock { ticks_per_ns: 1.0, anchor_tsc: 0, anchor_ns: 0 }).unwrap();
        let mut undefined = Writer::new_packed(Vec::new()).unwrap();
        undefined.decode_table(3, &app_decode()).unwrap();
        corrupt(&undefined.finish().unwrap(), "decode table of source 3, not defined before");
        let mut short = app_decode();
        short.probes.pop();
        let mut few = Writer::new_packed(Vec::new()).unwrap();
        few.write(&Record::Source(trace::app(0))).unwrap();
        few.decode_table(0, &short).unwrap();
        corrupt(&few.finish().unwrap(), "decode table of 2 probes for a source of 3");
        let mut short_read = app_decode();
        short_read.probes[0].2.reads[0].1 = 4;
        let mut bad = Writer::new_packed(Vec::new()).unwrap();
        bad.write(&Record::Source(trace::app(0))).unwrap();
        bad.decode_table(0, &short_read).unwrap();
        corrupt(&bad.finish().unwrap(), "memory capture 0: no read of 16 bytes");
        w.decode_table(0, &app_decode()).unwrap();
        w.packed(0, &r).unwrap();
        corrupt(&w.finish().unwrap(), "probe 9, not in source 0");
    }
}
