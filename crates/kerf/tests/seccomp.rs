//! kerf never makes a system call in a program that the program's seccomp filter would punish:
//! `traced seccomp NR` runs under a filter that kills the process at system call NR. A tool
//! whose attach needs that call (memfd_create for kerf's shared memory) fails with the reason
//! and leaves the program running; the JIT's miss path needs futex (refused, and with
//! `--no-demand` it runs without); the call trace's wait for room needs sched_yield (its full
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

    // sched_yield (24) kills: the call trace runs, its full rings drop instead of waiting.
    let (mut prog, pid) = filtered(&bin, 24);
    let _reap = common::Reaper(pid);
    let o = kerf(pid, &["jit", "step", "--plugin", "calls"]);
    let said = text(&o.stderr);
    assert!(o.status.success(), "{said}");
    assert!(said.contains("drops its records instead of waiting") && said.contains("sched_yield"));
    assert!(text(&o.stdout).contains(":step"), "{}", text(&o.stdout));
    assert!(prog.try_wait().unwrap().is_none(), "the program was killed");

    // A filter that allows all: nothing is refused, and nothing is said about waiting.
    let mut cmd = Command::new(&bin);
    cmd.arg("seccomp");
    let (mut prog, pid, _out) = common::start_ready(cmd);
    let _reap = common::Reaper(pid);
    let o = kerf(pid, &["jit", "step", "--plugin", "calls"]);
    let said = text(&o.stderr);
    assert!(o.status.success() && !said.contains("seccomp"), "{said}");
    assert!(prog.try_wait().unwrap().is_none(), "the program was killed");
}
