//! Attach, splice, detach a thousand times on a process whose 8 threads run through the
//! points all the while: it never crashes, and after every detach its code bytes equal those
//! at the start.

mod common;

use kerf_session::instrument::{Action, Instrumentation, Options, Probe, ToolData};
use kerf_session::spec;
use kerf_session::{analyze_process, LoadOptions};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::process::{Command, Stdio};

#[test]
fn thousand_attach_splice_detach_cycles() {
    let bin = common::build_fixture("counted", "-O2", "loop");
    // 8 threads, practically endless counted loops, started at once.
    let mut child = Command::new(&bin)
        .args(["8", "4000000000", "auto"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid: i32 = line.trim().strip_prefix("pid ").unwrap().parse().unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));

    let opts = LoadOptions { no_cache: true, ..LoadOptions::default() };
    let (modules, _) = analyze_process(pid, &opts, &kerf_analysis::Quiet).unwrap();
    let named: Vec<(&str, &kerf_analysis::Analysis)> =
        modules.iter().map(|m| (m.analysis.image.as_str(), &m.analysis)).collect();
    let specs: Vec<spec::Spec> = [
        "counted:branchy",
        "counted:switchy",
        "counted:leaf",
        "counted:recurse",
        "counted:switchy@blocks",
    ]
    .iter()
    .map(|s| spec::parse(s).unwrap())
    .collect();
    let points = spec::resolve(&specs, &named, &|_, _| None).unwrap();
    assert!(points.len() > 8, "{} points", points.len());
    // A timer on the recursive function as well: its start and stop share sites with the
    // counters at its entry (and exits, where those fit).
    let reader = |m: usize, a: kerf_arch::ImageAddr| {
        let (base, bytes) = modules[m].code_region(a)?;
        let off = (a.0 - base.0) as usize;
        Some((a, bytes.get(off..)?.to_vec()))
    };
    let timer_specs = [spec::parse("counted:recurse").unwrap()];
    let exit_specs = [spec::parse("counted:recurse@exits").unwrap()];
    let mut probes: Vec<Probe> =
        points.iter().map(|p| Probe { point: p.clone(), action: Action::Count }).collect();
    for p in spec::resolve(&timer_specs, &named, &reader).unwrap() {
        probes.push(Probe { point: p, action: Action::TimerStart(0) });
    }
    let exits = spec::resolve(&exit_specs, &named, &reader).unwrap();
    assert!(!exits.is_empty());
    for p in exits {
        probes.push(Probe { point: p, action: Action::TimerStop(0) });
    }
    // Every executable byte of the fixture: points, moved exits, springboards in padding.
    let m = &modules[points[0].module];
    let text: Vec<(u64, usize)> = m
        .segments
        .iter()
        .filter(|s| s.executable)
        .map(|s| (s.vaddr.0 + m.bias.unwrap_or(0), s.filesz as usize))
        .collect();
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let snapshot = || -> Vec<Vec<u8>> {
        text.iter()
            .map(|&(a, len)| {
                let mut b = vec![0u8; len];
                mem.read_exact_at(&mut b, a).unwrap();
                b
            })
            .collect()
    };
    let before = snapshot();
    let mut longest = std::time::Duration::ZERO;
    let mut total = 0u64;
    let mut timer_calls = 0u64;
    // Heaps a removal left mapped because some stack still pointed into them.
    let mut kept: Vec<(u64, u64)> = Vec::new();
    for cycle in 0..1000 {
        // The default choice (jump5, jump2 or trap per point), then every point forced to a trap.
        let kind = if cycle % 2 == 0 { None } else { Some(kerf_patch::SpliceKind::Trap) };
        let opts = Options { force_kind: kind, ..Options::default() };
        let inst = Instrumentation::install(pid, &modules, &probes, &ToolData::timers(1), opts)
            .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        if let Some(st) = child.try_wait().unwrap() {
            panic!("cycle {cycle}: the target died after splicing: {st}");
        }
        assert_ne!(snapshot(), before, "cycle {cycle}: nothing spliced");
        if cycle == 0 {
            // The heaps are visible while installed (so their absence later means something).
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
            assert!(maps.contains("memfd:kerf") && maps.lines().any(code_heap), "{maps}");
        }
        total += (0..points.len()).map(|i| inst.count(i)).sum::<u64>();
        timer_calls += inst.timer(0, kerf_session::instrument::tsc()).calls;
        longest = longest.max(inst.pauses().longest);
        let removed = inst.remove().unwrap_or_else(|e| panic!("cycle {cycle}: remove: {e}"));
        if !removed.kept.is_empty() {
            eprintln!("cycle {cycle}: heaps kept: {:x?} ({:?})", removed.kept, removed.why);
            kept.extend(removed.kept);
        }
        assert_eq!(snapshot(), before, "cycle {cycle}: bytes not restored");
        assert!(child.try_wait().unwrap().is_none(), "cycle {cycle}: the target died");
    }
    eprintln!(
        "1000 cycles, {} points, {total} hits counted, longest pause {longest:?}, {} heaps kept",
        points.len(),
        kept.len()
    );
    // Leaving a heap mapped is the safe answer to a stack value kerf cannot explain; the
    // dispatcher's own dead frames are explained, so here it should (almost) never happen.
    assert!(kept.len() <= 4, "{} heaps kept: {kept:x?}", kept.len());
    assert!(total > 0 && timer_calls > 0, "{total} counts, {timer_calls} timed calls");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let left: Vec<&str> = maps
        .lines()
        .filter(|l| l.contains("memfd:kerf") || code_heap(l))
        .filter(|l| {
            let start = u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap();
            !kept.iter().any(|k| k.0 == start)
        })
        .collect();
    assert!(left.is_empty(), "mappings left behind:\n{maps}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A line of /proc/PID/maps that is a kerf code heap: anonymous and read-execute (the
/// fixture maps no other such memory; the vdso has a name).
fn code_heap(line: &str) -> bool {
    let f: Vec<&str> = line.split_whitespace().collect();
    f.get(1) == Some(&"r-xp") && f.len() == 5
}
