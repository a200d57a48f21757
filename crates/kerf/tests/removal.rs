//! Removal frees kerf's code only when no thread can come back into it, and is not fooled
//! by the trap dispatcher's dead signal frames: tests/fixtures/stale_frames.c blocks with
//! those frames in view at the top of its stack while kerf removes a trap splice.

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

#[test]
fn dead_dispatcher_frames_do_not_keep_the_code_heap() {
    let bin = common::build_fixture("stale_frames", "-O2", "removal");
    let mut child =
        Command::new(&bin).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid: i32 = line.trim().strip_prefix("pid ").unwrap().parse().unwrap();

    let opts = LoadOptions { no_cache: true, ..LoadOptions::default() };
    let (modules, _) = analyze_process(pid, &opts, &kerf_analysis::Quiet).unwrap();
    let named: Vec<(&str, &kerf_analysis::Analysis)> =
        modules.iter().map(|m| (m.analysis.image.as_str(), &m.analysis)).collect();
    let points =
        spec::resolve(&[spec::parse("stale_frames:point").unwrap()], &named, &|_, _| None).unwrap();
    let addr = points[0].addr.0 + modules[points[0].module].bias.unwrap_or(0);
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut original = [0u8; 16];
    mem.read_exact_at(&mut original, addr).unwrap();

    let probes = vec![Probe { point: points[0].clone(), action: Action::Count }];
    let opts = Options {
        force_kind: Some(kerf_patch::SpliceKind::Trap),
        only_thread: None,
        plan_threads: None,
    };
    let inst =
        Instrumentation::install(pid, &modules, &probes, &ToolData::default(), opts).unwrap();
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
    let mut now = [0u8; 16];
    mem.read_exact_at(&mut now, addr).unwrap();
    assert_eq!(now, original, "point's bytes are not restored");

    stdin.write_all(b"y").unwrap();
    drop(stdin);
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "done");
    assert!(child.wait().unwrap().success());
}
