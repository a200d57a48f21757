//! A real program: a counter at the entry of every function of Debian's python3.11 (about
//! 10,000 points, jump5 where Djprobe's checks allow, trap elsewhere) while it runs a script.
//! Its output must be identical to an uninstrumented run, and for a sample of 60 named
//! functions kerf's counts must equal those of kernel uprobes (`perf probe` + `perf stat`) on
//! an identical run. Needs root (ptrace, uprobes), python3.11 and perf (Debian packages
//! python3.11, linux-perf): a missing one fails the test.

mod common;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

const PY: &str = "/usr/bin/python3.11";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pywork.py")
}

/// Python blocked in sigwait until "go". The hash seed is fixed and address randomisation off
/// (`setarch -R`, util-linux), so that every run makes the same calls: with ASLR, pymalloc's
/// arenas fall differently and the counts of mmap/munmap and their callers vary by a few.
fn start_python() -> (Child, i32, BufReader<std::process::ChildStdout>) {
    assert!(Path::new(PY).exists(), "{PY} missing (Debian package python3.11)");
    let mut c = Command::new("setarch")
        .args(["x86_64", "-R", PY])
        .arg(script())
        .env("PYTHONHASHSEED", "0")
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    let pid = c.id() as i32;
    (c, pid, out)
}

fn go_and_finish(mut c: Child, pid: i32, mut out: BufReader<std::process::ChildStdout>) -> String {
    assert!(Command::new("kill").args(["-USR1", &pid.to_string()]).status().unwrap().success());
    let mut s = String::new();
    out.read_to_string(&mut s).unwrap();
    assert!(c.wait().unwrap().success(), "python failed");
    s
}

fn perf(args: &[&str]) -> std::process::Output {
    Command::new("perf").args(args).output().expect("perf (Debian package linux-perf)")
}

#[test]
fn every_python_function_counted_like_uprobes_count() {
    // Uninstrumented reference output.
    let (c, pid, out) = start_python();
    let expected = go_and_finish(c, pid, out);
    assert!(!expected.is_empty());

    let kerf_counts = kerf_run(&expected, &[]);
    // Every point forced to a trap counts the same.
    let trap_counts = kerf_run(&expected, &["--force-kind", "trap"]);
    let differ: Vec<String> = kerf_counts
        .iter()
        .filter(|(n, c)| trap_counts.get(*n) != Some(c))
        .map(|(n, c)| format!("{n}: jump5 run {c}, trap run {:?}", trap_counts.get(n)))
        .collect();
    assert!(
        differ.is_empty(),
        "{} counts differ between runs:\n{}",
        differ.len(),
        differ.join("\n")
    );
    // A sample of named functions the workload really calls, at a rate uprobes (16 us a hit
    // on this VM) can count in reasonable time.
    let sample: Vec<&String> = kerf_counts
        .iter()
        .filter(|(n, c)| !n.starts_with("func_") && !n.contains('.') && (1..=20_000).contains(*c))
        .map(|(n, _)| n)
        .take(60)
        .collect();
    assert!(sample.len() >= 50, "only {} functions to compare", sample.len());
    uprobe_run(&expected, &sample, &kerf_counts);
}

/// One run of the script under `kerf count` at every function entry: the counts by name.
fn kerf_run(expected: &str, extra: &[&str]) -> BTreeMap<String, u64> {
    let (c, pid, out) = start_python();
    let mut args = vec!["-p".to_string(), pid.to_string(), "python3.11:*".into(), "--json".into()];
    args.extend(extra.iter().map(|a| a.to_string()));
    let (k, _) = common::spawn_count(&args, "python-cache");
    let got = go_and_finish(c, pid, out);
    let ko = k.wait_with_output().unwrap();
    assert!(ko.status.success(), "kerf: {}", String::from_utf8_lossy(&ko.stderr));
    assert_eq!(got, expected, "python's output changed under instrumentation ({extra:?})");
    let v: Value = serde_json::from_slice(&ko.stdout).unwrap();
    let points = v["points"].as_array().unwrap();
    assert!(points.len() > 5000, "only {} points", points.len());
    let kerf_counts: BTreeMap<String, u64> = points
        .iter()
        .map(|p| (p["point"].as_str().unwrap().to_string(), p["count"].as_u64().unwrap()))
        .collect();
    assert!(kerf_counts.values().sum::<u64>() > 1_000_000);
    kerf_counts
}

/// The same run under kernel uprobes only, at the sampled functions, compared with kerf.
fn uprobe_run(expected: &str, sample: &[&String], kerf_counts: &BTreeMap<String, u64>) {
    let _ = perf(&["probe", "-q", "-d", "probe_python3:*"]);
    for name in sample {
        let o = perf(&["probe", "-q", "-x", PY, "-a", name]);
        assert!(o.status.success(), "perf probe {name}: {}", String::from_utf8_lossy(&o.stderr));
    }
    let (c, pid, out) = start_python();
    let stat = Command::new("perf")
        .args(["stat", "-x,", "-e", "probe_python3:*", "-p", &pid.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(800));
    let got2 = go_and_finish(c, pid, out);
    let so = stat.wait_with_output().unwrap();
    let _ = perf(&["probe", "-q", "-d", "probe_python3:*"]);
    assert_eq!(got2, expected);
    let text = String::from_utf8_lossy(&so.stderr);
    let mut mismatches = Vec::new();
    let mut compared = 0;
    for l in text.lines() {
        let f: Vec<&str> = l.split(',').collect();
        let (Some(n), Some(ev)) = (f.first(), f.get(2)) else { continue };
        let Some(name) = ev.strip_prefix("probe_python3:") else { continue };
        let Ok(n) = n.parse::<u64>() else { continue };
        compared += 1;
        if kerf_counts.get(name) != Some(&n) {
            mismatches.push(format!("{name}: kerf {:?}, uprobe {n}", kerf_counts.get(name)));
        }
    }
    assert!(compared >= 50, "perf reported {compared} probes:\n{text}");
    assert!(
        mismatches.is_empty(),
        "{} of {compared} differ:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
}

/// The executable text of python3.11 in process `pid` and the same bytes of the file.
fn text_and_file(pid: i32) -> (Vec<u8>, Vec<u8>) {
    use std::os::unix::fs::FileExt;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let line = maps
        .lines()
        .find(|l| l.ends_with(PY) && l.split_whitespace().nth(1) == Some("r-xp"))
        .unwrap_or_else(|| panic!("no text of {PY}:\n{maps}"));
    let f: Vec<&str> = line.split_whitespace().collect();
    let (lo, hi) = f[0].split_once('-').unwrap();
    let (lo, hi) = (u64::from_str_radix(lo, 16).unwrap(), u64::from_str_radix(hi, 16).unwrap());
    let off = u64::from_str_radix(f[2], 16).unwrap();
    let mut live = vec![0u8; (hi - lo) as usize];
    std::fs::File::open(format!("/proc/{pid}/mem")).unwrap().read_exact_at(&mut live, lo).unwrap();
    let mut file = vec![0u8; live.len()];
    let n = std::fs::File::open(PY).unwrap().read_at(&mut file, off).unwrap();
    file.truncate(n);
    live.truncate(n);
    (live, file)
}

/// SIGTERM a moment after kerf starts putting probes at every block of python3.11 (about
/// 200,000 points, which take many seconds to plan, write and splice): kerf stops installing
/// instead of finishing first, says so and fails, and leaves the process as it found it: its
/// text equal to the file's, no mapping of kerf's, and the script's output unchanged.
#[test]
fn sigterm_during_a_long_installation_stops_it_and_restores_everything() {
    let (c, pid, out) = start_python();
    let _reaper = common::Reaper(pid);
    let expected_maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let mut k = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["count", "-p", &pid.to_string(), "python3.11:*@blocks"])
        .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("python-cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // kerf plans first (most of the time), then maps its heaps, writes the code patches and
    // splices: SIGTERM once the heaps are there.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    loop {
        let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
        if maps.contains("memfd:kerf") {
            break;
        }
        assert!(k.try_wait().unwrap().is_none(), "kerf ended before installing");
        assert!(std::time::Instant::now() < deadline, "kerf never started installing");
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert!(Command::new("kill").args(["-TERM", &k.id().to_string()]).status().unwrap().success());
    let o = k.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(!err.contains("points spliced"), "kerf finished installing first: {err}");
    assert!(err.contains("interrupted"), "{err}");
    let (live, file) = text_and_file(pid);
    let differ = live.iter().zip(&file).filter(|(a, b)| a != b).count();
    assert_eq!(differ, 0, "{differ} bytes of python3.11's text differ from the file");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert_eq!(maps, expected_maps, "kerf left mappings behind; kerf said: {err}");
    let (c2, pid2, out2) = start_python();
    assert_eq!(go_and_finish(c, pid, out), go_and_finish(c2, pid2, out2));
}

/// `kerf time --threads` on python3.11 (tests/fixtures/pythreads.py): three threads call
/// `os.getpid()` N, 2N and 3N times; each thread's row must hold exactly its own calls, by the
/// thread ids the script prints, and the rows must add up to the function's.
#[test]
fn per_thread_rows_match_what_each_python_thread_did() {
    assert!(Path::new(PY).exists(), "{PY} missing (Debian package python3.11)");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/pythreads.py");
    let out = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["time", "--threads", "--json", "libc:getpid", "--", PY])
        .arg(&fixture)
        .arg("20000")
        .env("KERF_CACHE_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("pythreads-cache"))
        .output()
        .unwrap();
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "kerf failed: {stderr}");
    assert!(stdout.ends_with("done\n"), "{stdout}");
    let own: BTreeMap<u64, u64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("thread "))
        .filter_map(|l| l.split_once(' '))
        .map(|(t, n)| (t.parse().unwrap(), n.parse().unwrap()))
        .collect();
    assert_eq!(own.values().copied().collect::<Vec<_>>().len(), 3, "{stdout}");
    let v: Value = stderr
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON: {stderr}"));
    let f = &v["functions"][0];
    let rows: BTreeMap<u64, u64> = f["threads"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["tid"].as_u64().unwrap(), r["outer"].as_u64().unwrap()))
        .collect();
    // The interpreter's own thread may call getpid too (at start-up, at exit): only the three
    // workers are the script's, and each must match exactly.
    for (tid, n) in &own {
        assert_eq!(rows.get(tid), Some(n), "thread {tid}: kerf {rows:?}, the script {own:?}");
    }
    assert_eq!(rows.values().sum::<u64>(), f["outermost_calls"].as_u64().unwrap(), "{v}");
}
