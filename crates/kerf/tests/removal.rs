//! Removal frees kerf's code only when no thread can come back into it, and is not fooled
//! by the trap dispatcher's dead signal frames (tests/fixtures/stale_frames.c blocks with
//! those frames in view at the top of its stack while kerf removes a trap splice) or by data
//! that happens to point into it; a live signal frame keeps it (tests/fixtures/stack_refs.c).

mod common;

use kerf_session::instrument::{Action, Instrumentation, Options, Probe, ToolData};
use kerf_session::spec;
use kerf_session::{analyze_process, LoadOptions};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};
use std::time::Duration;

/// The code heap kerf mapped in `pid` (an anonymous read-execute mapping: the fixture has
/// no other, and the vdso has a name).
fn code_heaps(pid: i32) -> Vec<(u64, u64)> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    maps.lines()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.get(1) == Some(&"r-xp") && f.len() == 5
        })
        .map(|l| {
            let (a, b) = l.split_whitespace().next().unwrap().split_once('-').unwrap();
            (u64::from_str_radix(a, 16).unwrap(), u64::from_str_radix(b, 16).unwrap())
        })
        .collect()
}

/// A fixture of tests/fixtures started with `args`, its stdin and stdout piped, with its
/// `point` function installed with a count probe (splice kind `kind`, or kerf's choice).
struct Launched {
    child: std::process::Child,
    pid: i32,
    stdin: std::process::ChildStdin,
    out: BufReader<std::process::ChildStdout>,
    inst: Instrumentation,
    /// The point's address and its bytes before the probe.
    addr: u64,
    original: [u8; 16],
}

/// Start fixture `name` (which prints "pid N" first), analyse it and install the probe.
fn launch(name: &str, args: &[&str], kind: Option<kerf_patch::SpliceKind>) -> Launched {
    let bin = common::build_fixture(name, "-O2", "removal");
    let mut child =
        Command::new(&bin).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid: i32 = line.trim().strip_prefix("pid ").unwrap().parse().unwrap();
    let opts = LoadOptions { no_cache: true, ..LoadOptions::default() };
    let (modules, _) = analyze_process(pid, &opts, &kerf_analysis::Quiet).unwrap();
    let named: Vec<(&str, &kerf_analysis::Analysis)> =
        modules.iter().map(|m| (m.analysis.image.as_str(), &m.analysis)).collect();
    let spec = spec::parse(&format!("{name}:point")).unwrap();
    let points = spec::resolve(&[spec], &named, &|_, _| None).unwrap();
    let addr = points[0].addr.0 + modules[points[0].module].bias.unwrap_or(0);
    let original = bytes_at(pid, addr);
    let probes = vec![Probe { point: points[0].clone(), action: Action::Count }];
    let opts = Options { force_kind: kind, ..Options::default() };
    let inst =
        Instrumentation::install(pid, &modules, &probes, &ToolData::default(), opts).unwrap();
    Launched { child, pid, stdin, out, inst, addr, original }
}

/// Send the byte the fixture waits for on stdin, and see it print "done" and end well.
fn finish(
    mut child: std::process::Child,
    mut stdin: std::process::ChildStdin,
    mut out: BufReader<std::process::ChildStdout>,
) {
    stdin.write_all(b"x").unwrap();
    drop(stdin);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done");
    assert!(child.wait().unwrap().success());
}

fn bytes_at(pid: i32, addr: u64) -> [u8; 16] {
    let mut now = [0u8; 16];
    std::fs::File::open(format!("/proc/{pid}/mem")).unwrap().read_exact_at(&mut now, addr).unwrap();
    now
}

#[test]
fn dead_dispatcher_frames_do_not_keep_the_code_heap() {
    let Launched { child, pid, mut stdin, mut out, inst, addr, original } =
        launch("stale_frames", &[], Some(kerf_patch::SpliceKind::Trap));
    let mut line = String::new();
    std::thread::sleep(Duration::from_millis(200));
    // The program's module holds the dispatcher (its trap site's); the trap also brought
    // signal-mask guards, with heaps next to libc and ld.so.
    let heaps = code_heaps(pid);
    let dispatcher_heap = inst.code_heaps()[0].0;
    let (lo, hi) = *heaps
        .iter()
        .find(|h| h.0 == dispatcher_heap)
        .unwrap_or_else(|| panic!("no r-xp mapping at {dispatcher_heap:#x}: {heaps:x?}"));

    // Stop the loop: the main thread goes into deep_wait() and blocks there.
    stdin.write_all(b"x").unwrap();
    stdin.flush().unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    let mut f = line.split_whitespace().skip(1);
    let buf = u64::from_str_radix(f.next().unwrap().trim_start_matches("0x"), 16).unwrap();
    let len: usize = f.next().unwrap().parse().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let hits = inst.count(0);
    assert!(hits > 100, "the trap splice was hit {hits} times");

    // The scenario is real: words of the dead frames, pointing into the code heap, lie in
    // the buffer now at the top of the blocked thread's stack.
    let mut stack = vec![0u8; len];
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    mem.read_exact_at(&mut stack, buf).unwrap();
    let stale = stack
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .filter(|v| (lo..hi).contains(v))
        .count();
    assert!(stale >= 2, "{stale} words of the buffer point into the code heap");

    let removed = inst.remove().expect("removal");
    assert!(removed.kept.is_empty(), "heaps kept: {removed:x?}");
    assert!(code_heaps(pid).is_empty(), "the code heap is still mapped");
    assert_eq!(bytes_at(pid, addr), original, "point's bytes are not restored");

    finish(child, stdin, out);
}

/// A signal handler blocks with the frame of the thread it interrupted inside a code patch
/// (the saved PC points into it): removal takes the splice out, but leaves the code heap
/// mapped and says why, and the handler later returns into the patch and on, unharmed.
#[test]
fn a_live_signal_frame_in_a_patch_keeps_the_code_heap() {
    let Launched { child, pid, stdin, mut out, inst, addr, original } =
        launch("stack_refs", &["hold"], None);
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pc = u64::from_str_radix(line.trim().strip_prefix("held 0x").unwrap(), 16).unwrap();
    let heap = inst.code_heaps()[0].0;
    let (lo, hi) = *code_heaps(pid).iter().find(|h| h.0 == heap).unwrap();
    assert!(
        (lo..hi).contains(&pc),
        "interrupted at {pc:#x}, not in the code heap {lo:#x}..{hi:#x}"
    );

    let removed = inst.remove().expect("removal");
    assert!(removed.kept.iter().any(|k| k.0 == lo), "code heap not kept: {removed:x?}");
    let why = removed.why.unwrap_or_default();
    assert!(why.contains("stack may still return") && why.contains(&format!("{pc:#x}")), "{why}");
    assert_eq!(bytes_at(pid, addr), original, "point's bytes are not restored");

    finish(child, stdin, out);
}

/// Plain data on a stack that happens to point into kerf's code (the case that once left
/// python3.11 with 50 MB of kerf's heaps after an interrupted installation) does not keep the
/// code: it is no return address, no signal frame's PC.
#[test]
fn stack_data_that_points_into_a_patch_does_not_keep_the_code_heap() {
    let Launched { child, pid, mut stdin, mut out, inst, addr, original } =
        launch("stack_refs", &["plant"], None);
    let heap = inst.code_heaps()[0].0;
    // The start of the first patch, on 64 words of the blocked main thread's stack.
    writeln!(stdin, "{heap:x}").unwrap();
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "planted");
    let removed = inst.remove().expect("removal");
    assert!(removed.kept.is_empty(), "heaps kept: {removed:x?}");
    assert!(code_heaps(pid).is_empty(), "the code heap is still mapped");
    assert_eq!(bytes_at(pid, addr), original, "point's bytes are not restored");
    finish(child, stdin, out);
}
