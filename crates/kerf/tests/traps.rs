//! Trap splices in programs that block signals, nest signal handlers and keep changing their
//! masks (DESIGN.md §5: a forced SIGTRAP on a thread that blocks it kills the process), and
//! splices next to threads asleep in system calls: the target must never be harmed, its
//! output must equal an uninstrumented run's, and counts must equal the program's own.

mod common;

use common::Reaper;
use serde_json::Value;
use std::io::{BufReader, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// Start a fixture that prints "pid N" and "ready" and then waits for SIGUSR1.
fn start(bin: &Path, args: &[&str]) -> (Child, i32, BufReader<std::process::ChildStdout>) {
    let mut cmd = Command::new(bin);
    cmd.args(args).stderr(Stdio::piped());
    common::start_ready(cmd)
}

/// Send SIGUSR1 ("go").
fn go(pid: i32) {
    assert!(Command::new("kill").args(["-USR1", &pid.to_string()]).status().unwrap().success());
}

/// The rest of a fixture's stdout, its stderr, and its exit status (which must be success).
fn finish(mut c: Child, mut out: BufReader<std::process::ChildStdout>) -> (String, String) {
    let mut text = String::new();
    out.read_to_string(&mut text).unwrap();
    let mut err = String::new();
    c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let st = c.wait().unwrap();
    assert!(st.success(), "the target did not exit normally: {st}; stdout {text:?} stderr {err:?}");
    (text, err)
}

/// An uninstrumented run of a fixture with "auto": its stdout after "ready".
fn reference(bin: &Path, args: &[&str]) -> String {
    let (c, _, out) = start(bin, args);
    finish(c, out).0
}

/// `kerf count -p PID --json ARGS`, once its probes are in.
fn kerf_count(pid: i32, args: &[&str]) -> Child {
    let mut all = vec!["-p".to_string(), pid.to_string(), "--json".to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    common::spawn_count(&all, "traps-cache").0
}

fn kerf_json(k: Child) -> Value {
    let o = k.wait_with_output().unwrap();
    assert!(o.status.success(), "kerf failed: {}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).expect("kerf --json output")
}

fn count_of(v: &Value, point: &str) -> u64 {
    v["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["point"] == point)
        .unwrap_or_else(|| panic!("no point {point}: {v}"))["count"]
        .as_u64()
        .unwrap()
}

/// The signals each thread of `pid` blocks (SigBlk of /proc/PID/task/*/status), by tid.
fn blocked(pid: i32) -> std::collections::BTreeMap<i32, u64> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .filter_map(|e| {
            let tid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let st = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")).ok()?;
            let blk = st.lines().find_map(|l| l.strip_prefix("SigBlk:"))?;
            Some((tid, u64::from_str_radix(blk.trim(), 16).ok()?))
        })
        .collect()
}

const SIGTRAP_BIT: u64 = 1 << 4;

/// Every call of `work` hits a trap: from a thread that blocked every signal before kerf
/// came, one parked in sigsuspend with everything blocked, threads that block everything
/// after kerf came, a SIGALRM handler with a full mask every millisecond (nested in the
/// dispatcher now and then), a SIGUSR2 handler; and the program installs its own SIGTRAP
/// handler and raises SIGTRAP while kerf's dispatcher is in. Before kerf guarded signal
/// masks, the first trap in a blocking thread killed the process.
#[test]
fn traps_work_whatever_the_threads_block() {
    const ITERS: u64 = 50_000;
    let bin = common::build_fixture("sigmask", "-O2", "traps");
    let iters = ITERS.to_string();
    let expected = reference(&bin, &[&iters, "auto"]);
    assert!(expected.contains("own SIGTRAP handler ran 1 time(s), still installed: yes"));

    let (c, pid, out) = start(&bin, &[&iters]);
    let _reaper = Reaper(pid);
    let before = blocked(pid);
    assert!(before.values().any(|m| m & SIGTRAP_BIT != 0), "a thread blocks SIGTRAP: {before:?}");
    let k = kerf_count(pid, &["--force-kind", "trap", "work", "in_handler"]);
    go(pid);
    let (text, err) = finish(c, out);
    assert_eq!(text, expected, "instrumented output differs");
    let v = kerf_json(k);
    // The program's own count of work's calls (alarms make it vary from run to run).
    let calls: u64 = err
        .lines()
        .find_map(|l| l.strip_prefix("calls "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no calls line in {err:?}"));
    assert_eq!(count_of(&v, "work"), calls, "{v}");
    // in_handler runs once per SIGALRM, once for SIGUSR2 and once in the program's own SIGTRAP
    // handler, and calls work once each time.
    assert_eq!(count_of(&v, "in_handler"), calls - 5 * ITERS, "{v}");
    assert!(count_of(&v, "in_handler") >= 2, "the handlers ran: {v}");
}

/// What kerf changed in the signal state for its traps is put back when it detaches: the
/// threads that blocked SIGTRAP block it again.
#[test]
fn detach_puts_back_the_signal_masks() {
    let bin = common::build_fixture("sigmask", "-O2", "masks");
    let (c, pid, out) = start(&bin, &["1000"]);
    let _reaper = Reaper(pid);
    std::thread::sleep(Duration::from_millis(100));
    let before = blocked(pid);
    let k = kerf_count(pid, &["--force-kind", "trap", "work", "--duration", "0.3"]);
    let v = kerf_json(k);
    assert_eq!(count_of(&v, "work"), 0, "{v}");
    assert_eq!(blocked(pid), before, "signal masks after kerf");
    go(pid);
    finish(c, out);
}

/// xz -T2's worker threads block every signal; `liblzma:*` has trap points. Before kerf
/// guarded signal masks, xz was killed by SIGTRAP every time.
#[test]
fn xz_with_two_threads_under_liblzma_probes() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("traps-xz");
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("input.txt");
    // 3 MB of varied text: enough blocks for both worker threads.
    let mut text = String::new();
    let mut x: u64 = 1;
    while text.len() < 3_000_000 {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        text.push_str(&format!("{:x} {}\n", x >> 17, x % 1000));
    }
    std::fs::write(&input, &text).unwrap();
    let plain = dir.join("plain.xz");
    let o = Command::new("xz").args(["-T2", "-k", "-c"]).arg(&input).output().expect("xz");
    assert!(o.status.success());
    std::fs::write(&plain, &o.stdout).unwrap();
    for round in 0..3 {
        let packed = dir.join("input.txt.xz");
        let _ = std::fs::remove_file(&packed);
        let summary = dir.join("summary.json");
        let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
            .args(["count", "--json", "-o"])
            .arg(&summary)
            .args(["liblzma:*", "--", "xz", "-T2", "-k"])
            .arg(&input)
            .env("KERF_CACHE_DIR", dir.join("cache"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "round {round}: kerf failed: {err}");
        let v: Value =
            serde_json::from_slice(&std::fs::read(&summary).unwrap()).expect("kerf --json summary");
        let stopped = v["stopped"].as_str().unwrap_or("");
        assert!(stopped.contains("exited with code 0"), "round {round}: {stopped}");
        let traps = v["points"].as_array().unwrap().iter().filter(|p| p["kind"] == "trap");
        assert!(traps.count() > 0, "no trap points to test: {err}");
        assert_eq!(
            std::fs::read(&packed).unwrap(),
            std::fs::read(&plain).unwrap(),
            "round {round}: xz's output differs"
        );
    }
}

/// A thread asleep in pause() right after the `syscall` that ends a jump5's displaced bytes:
/// kerf's stop interrupts the call and the kernel restarts it by moving the PC back onto the
/// `syscall`, inside the jump. That point is left out (and said so) instead of crashing the
/// thread; the other points go in.
#[test]
fn a_sleeping_system_call_about_to_restart_is_not_spliced_over() {
    let bin = common::build_fixture("restart", "-O2", "traps");
    let (c, pid, out) = start(&bin, &[]);
    let _reaper = Reaper(pid);
    // Let the sleeper reach pause().
    std::thread::sleep(Duration::from_millis(200));
    let k = kerf_count(pid, &["sleep_site", "do_pause", "--duration", "0.3"]);
    let v = kerf_json(k);
    let refused = v["refused"].as_array().unwrap();
    assert!(refused.iter().any(|r| r["point"] == "sleep_site"), "{v}");
    go(pid);
    let (text, _) = finish(c, out);
    assert_eq!(text, "woke\n");
}

/// `libc:*` in a process that creates threads after kerf attached, and in one that takes a
/// SIGALRM every millisecond, 20 times each: every run ends normally with the output of an
/// uninstrumented run.
#[test]
fn all_of_libc_under_thread_churn_and_alarms() {
    let bin = common::build_fixture("thread_alarm", "-O2", "traps");
    for mode in ["threads", "alarms"] {
        let expected = reference(&bin, &[mode, "300", "auto"]);
        for round in 0..20 {
            let (c, pid, out) = start(&bin, &[mode, "300"]);
            let _reaper = Reaper(pid);
            let k = kerf_count(pid, &["libc:*"]);
            go(pid);
            let (text, _) = finish(c, out);
            assert_eq!(text, expected, "{mode}, round {round}: output differs");
            let v = kerf_json(k);
            assert!(v["stopped"].as_str().unwrap_or("").contains("exited"), "{v}");
        }
    }
}
