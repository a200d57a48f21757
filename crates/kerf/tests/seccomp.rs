//! kerf never makes a system call in a program that the program's seccomp filter would punish:
//! `traced seccomp NR` runs under a filter that kills the process at system call NR. A tool
//! whose attach needs that call (memfd_create for kerf's shared memory) fails with the reason
//! and leaves the program running; the JIT's miss path needs futex (refused, and with
//! `--no-demand` it runs without); the call trace's wait for room needs sched_yield and nanosleep (its full
//! rings then drop instead, and kerf says so).

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Output};

fn kerf(pid: i32, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(args)
        .args(["-p", &pid.to_string(), "--duration", "0.5"])
        .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("seccomp-cache"))
        .output()
        .unwrap()
}

/// `traced seccomp NR`, ready.
fn filtered(bin: &std::path::Path, nr: u32) -> (Child, i32) {
    let mut cmd = Command::new(bin);
    cmd.args(["seccomp", &nr.to_string()]);
    let (child, pid, _out) = common::start_ready(cmd);
    (child, pid)
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

#[test]
fn no_call_a_seccomp_filter_punishes_is_made() {
    let bin = common::build_fixture("traced", "-O2", "seccomp");

    // memfd_create (319) kills: every tool's attach needs it, and none makes it.
    let (mut prog, pid) = filtered(&bin, 319);
    let _reap = common::Reaper(pid);
    for tool in [&["count", "step"][..], &["jit", "step"]] {
        let o = kerf(pid, tool);
        let said = text(&o.stderr);
        assert!(!o.status.success(), "{tool:?} went in: {said}");
        assert!(said.contains("runs under seccomp") && said.contains("system call 319"), "{said}");
    }
    assert!(prog.try_wait().unwrap().is_none(), "the program was killed");

    // futex (202) kills: the JIT's misses wait on one, so on demand it is refused; without
    // demand it runs.
    let (mut prog, pid) = filtered(&bin, 202);
    let _reap = common::Reaper(pid);
    let o = kerf(pid, &["jit", "step"]);
    let said = text(&o.stderr);
    assert!(!o.status.success() && said.contains("system call 202"), "{said}");
    assert!(said.contains("--no-demand"), "{said}");
    let o = kerf(pid, &["jit", "step", "--no-demand"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains(":step"), "{}", text(&o.stdout));
    assert!(prog.try_wait().unwrap().is_none(), "the program was killed");

    // sched_yield (24) or nanosleep (35; the fixture sleeps with clock_nanosleep) kills: the
    // call trace runs, its full rings drop instead of waiting.
    for (nr, name) in [(24, "sched_yield"), (35, "nanosleep")] {
        let (mut prog, pid) = filtered(&bin, nr);
        let _reap = common::Reaper(pid);
        let o = kerf(pid, &["jit", "step", "--plugin", "calls"]);
        let said = text(&o.stderr);
        assert!(o.status.success(), "{said}");
        assert!(said.contains("drops its records instead of waiting") && said.contains(name));
        assert!(text(&o.stdout).contains(":step"), "{}", text(&o.stdout));
        assert!(prog.try_wait().unwrap().is_none(), "the program was killed");
    }

    // A filter that allows all: nothing is refused, and nothing is said about waiting.
    let mut cmd = Command::new(&bin);
    cmd.arg("seccomp");
    let (mut prog, pid, _out) = common::start_ready(cmd);
    let _reap = common::Reaper(pid);
    let o = kerf(pid, &["jit", "step", "--plugin", "calls", "--json"]);
    let said = text(&o.stderr);
    assert!(o.status.success() && !said.contains("seccomp"), "{said}");
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("kerf's JSON");
    assert!(v["calls"]["waits_stopped"].is_null(), "{}", v["calls"]);
    assert!(v["jit"]["on_demand"]["deaf_since"].is_null(), "{}", v["jit"]["on_demand"]);
    assert!(prog.try_wait().unwrap().is_none(), "the program was killed");
}

/// A filter a thread installs after kerf asked (`traced seccomp late`: a second after kerf
/// went in): kerf cannot ask it, so the cache makes no more system calls of its own: misses
/// leave for the original code, full rings drop. Both are reported with when.
#[test]
fn a_filter_installed_later_stops_the_caches_own_calls() {
    let bin = common::build_fixture("traced", "-O2", "seccomp-late");
    let mut cmd = Command::new(&bin);
    cmd.args(["seccomp", "late"]);
    let (mut prog, pid, _out) = common::start_ready(cmd);
    let _reap = common::Reaper(pid);
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["jit", "-p", &pid.to_string(), "--duration", "2", "--json", "step"])
        .args(["--plugin", "calls"])
        .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("seccomp-cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).expect("kerf's JSON");
    // The filter comes about a second after "ready": seen within kerf's poll (0.2 s).
    let stopped = v["calls"]["waits_stopped"].as_f64().expect("waits stopped");
    let deaf = v["jit"]["on_demand"]["deaf_since"].as_f64().expect("misses stopped waiting");
    for t in [stopped, deaf] {
        assert!((0.3..1.9).contains(&t), "seen at {t} s: {}", v["jit"]["on_demand"]);
    }
    assert!(v["calls"]["calls"].as_u64().unwrap() > 50, "{}", v["calls"]);
    assert!(prog.try_wait().unwrap().is_none(), "the program was killed");
}
