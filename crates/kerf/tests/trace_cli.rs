//! `kerf trace convert` and `kerf collect` as a user meets them: a raw trace converted by the
//! output's extension, a cut trace converted up to its last whole record with a non-zero exit
//! and a message, a reader that stops early, and a raw trace replayed with `--send` to `kerf
//! collect` and read back.

use kerf_tools::trace::event::{
    CaptureInfo, Event, PointKind, ProbeInfo, Record, Source, SourceKind, StreamInfo, Value,
};
use kerf_tools::trace::raw::Writer;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn kerf(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kerf")).args(args).output().expect("run kerf")
}

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("kerf-trace-cli-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// A raw trace of `n` calls of `open` by process 77, entry and exit.
fn write_trace(path: &Path, n: u64) {
    let mut w = Writer::new(std::fs::File::create(path).expect("create")).expect("header");
    let probe = |kind, point: &str, cap: &str| ProbeInfo {
        name: "open".into(),
        point: point.into(),
        kind,
        stream: 0,
        captures: vec![CaptureInfo { name: cap.into(), hex: false }],
    };
    w.write(&Record::Source(Source {
        id: 0,
        machine: String::new(),
        kind: SourceKind::Process,
        pid: 77,
        name: "tool".into(),
        realtime_offset_ns: 0,
        probes: vec![
            probe(PointKind::Entry, "libc:open", "flags"),
            probe(PointKind::Exit, "libc:open@exits", "ret"),
        ],
        streams: vec![StreamInfo { name: "libc".into() }],
    }))
    .expect("source");
    for i in 0..2 * n {
        let kind = if i % 2 == 0 { PointKind::Entry } else { PointKind::Exit };
        w.write(&Record::Event(Event {
            source: 0,
            time_ns: 1000 + i,
            tsc: 0,
            pid: 77,
            tid: 77,
            cpu: 0,
            probe: (i % 2) as u32,
            stream: 0,
            kind,
            values: vec![Value::Unsigned(i)],
        }))
        .expect("event");
    }
    w.finish().expect("finish");
}

#[test]
fn convert_by_extension_and_cut_input() {
    let d = dir("convert");
    let raw = d.join("t.kerf-trace");
    write_trace(&raw, 100);
    let out = d.join("t.jsonl");
    let o = kerf(&["trace", "convert", raw.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&out).expect("output");
    assert_eq!(text.lines().filter(|l| l.contains("\"type\":\"event\"")).count(), 200);

    // Cut in the middle of a record: what came before is converted, the exit says why not all.
    let bytes = std::fs::read(&raw).expect("raw");
    let cut = d.join("cut.kerf-trace");
    std::fs::write(&cut, &bytes[..bytes.len() / 2 + 3]).expect("cut");
    let o = kerf(&["trace", "convert", cut.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("cut short") && err.contains("converted what came before"), "{err}");
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.lines().filter(|l| l.contains("libc:open")).count() > 50, "{stdout}");

    let o =
        kerf(&["trace", "convert", raw.to_str().unwrap(), "-o", d.join("t.xyz").to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--format"));
    std::fs::remove_dir_all(&d).ok();
}

/// Converted into a pipe whose reader stops early (`| head`), kerf stops without a word and
/// with the status a shell gives a program SIGPIPE ended, as `cat` does (it said "standard
/// output: Broken pipe").
#[test]
fn a_reader_that_stops_early_is_no_error() {
    let d = dir("pipe");
    let raw = d.join("t.kerf-trace");
    write_trace(&raw, 200_000);
    let mut k = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["trace", "convert", raw.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kerf");
    let mut first = String::new();
    BufReader::new(k.stdout.take().unwrap()).read_line(&mut first).expect("a line");
    assert!(first.contains("libc:open"), "{first}");
    // (The reader gone: the rest of 400,000 events has nowhere to go.)
    let o = k.wait_with_output().expect("kerf ends");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(141), "{err}");
    assert!(err.is_empty(), "{err}");
    std::fs::remove_dir_all(&d).ok();
}

#[test]
fn collect_a_replayed_trace() {
    let d = dir("collect");
    let raw = d.join("t.kerf-trace");
    write_trace(&raw, 5_000);
    let collected = d.join("all.kerf-trace");
    let mut collector = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args([
            "collect",
            "--listen",
            "127.0.0.1:0",
            "-o",
            collected.to_str().unwrap(),
            "--senders",
            "1",
        ])
        .stderr(Stdio::piped())
        .spawn()
        .expect("kerf collect");
    let mut err = BufReader::new(collector.stderr.take().expect("stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("the collector says where it listens");
    let addr = line.split_whitespace().nth(2).expect("collecting on ADDR").to_string();
    let o = kerf(&["trace", "convert", raw.to_str().unwrap(), "--send", &addr, "--machine", "m1"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stderr).contains("sent 10000 events"));
    let status = collector.wait().expect("collector ends after one sender");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut err, &mut rest).expect("stderr");
    assert!(status.success(), "{rest}");
    // The per-source count line: id, machine, source, events, losses.
    assert!(
        rest.lines().any(|l| l.split_whitespace().collect::<Vec<_>>()[..6]
            == ["0", "m1", "tool", "10000", "0", "0"]),
        "{rest}"
    );
    let o = kerf(&["trace", "convert", collected.to_str().unwrap()]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(
        text.lines().filter(|l| l.trim_start().starts_with("m1:tool 77/77")).count(),
        10_000
    );
    std::fs::remove_dir_all(&d).ok();
}
