//! Attach, splice, detach a thousand times on a process whose 8 threads run through the
//! points all the while: it never crashes, and after every detach its code bytes equal those
//! at the start.

use kerf_session::instrument::{Instrumentation, Options};
use kerf_session::spec;
use kerf_session::{analyze_process, LoadOptions};
use std::io::{BufRead, BufReader};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

#[test]
fn thousand_attach_splice_detach_cycles() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("splice_loop");
    std::fs::create_dir_all(&dir).unwrap();
    let bin = dir.join("counted");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/counted.c");
    let st = Command::new("gcc").args(["-O2", "-pthread", "-o"]).arg(&bin).arg(&src).status();
    assert!(st.expect("gcc (Debian package gcc)").success());
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
    let addrs: Vec<u64> =
        points.iter().map(|p| p.addr.0 + modules[p.module].bias.unwrap_or(0)).collect();
    let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let snapshot = || -> Vec<[u8; 16]> {
        addrs
            .iter()
            .map(|a| {
                let mut b = [0u8; 16];
                mem.read_exact_at(&mut b, *a).unwrap();
                b
            })
            .collect()
    };
    let before = snapshot();
    let mut longest = std::time::Duration::ZERO;
    let mut total = 0u64;
    for cycle in 0..1000 {
        // The default choice (jump5, jump2 or trap per point), then every point forced to a trap.
        let kind = if cycle % 2 == 0 { None } else { Some(kerf_patch::SpliceKind::Trap) };
        let inst = Instrumentation::install(pid, &modules, &points, Options { force_kind: kind })
            .unwrap_or_else(|e| panic!("cycle {cycle}: {e}"));
        if let Some(st) = child.try_wait().unwrap() {
            panic!("cycle {cycle}: the target died after splicing: {st}");
        }
        assert_ne!(snapshot(), before, "cycle {cycle}: nothing spliced");
        if cycle == 0 {
            // The heaps are visible while installed (so their absence later means something).
            let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
            assert!(maps.contains("memfd:kerf") && maps.contains("rwxp"), "{maps}");
        }
        total += (0..points.len()).map(|i| inst.count(i)).sum::<u64>();
        longest = longest.max(inst.longest_pause);
        inst.remove().unwrap_or_else(|e| panic!("cycle {cycle}: remove: {e}"));
        assert_eq!(snapshot(), before, "cycle {cycle}: bytes not restored");
        assert!(child.try_wait().unwrap().is_none(), "cycle {cycle}: the target died");
    }
    eprintln!(
        "1000 cycles, {} points, {total} hits counted, longest pause {longest:?}",
        points.len()
    );
    assert!(total > 0);
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(
        !maps.contains("memfd:kerf") && !maps.contains("rwxp"),
        "mappings left behind:\n{maps}"
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
