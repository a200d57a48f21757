//! Code someone else has changed (issue 9, items 5 and 6; DESIGN.md §5): a point whose bytes
//! in the process are not the file's (another tool's breakpoint) is refused, never spliced
//! over; a second kerf on a process another kerf instruments refuses, naming the first, and
//! the first goes on working and removes cleanly, leaving the file's bytes.

mod common;

use common::Reaper;
use serde_json::Value;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::{Child, Command};

/// Start the `counted` fixture (4 threads, waiting for SIGUSR1 before its counted phase).
fn start(bin: &Path) -> (Child, i32, BufReader<std::process::ChildStdout>) {
    common::start_counted(bin, &["4", "20000"])
}

/// Release the fixture's counted phase and return the rest of its output.
fn finish(mut c: Child, pid: i32, mut out: BufReader<std::process::ChildStdout>) -> String {
    assert!(Command::new("kill").args(["-USR1", &pid.to_string()]).status().unwrap().success());
    let mut s = String::new();
    out.read_to_string(&mut s).unwrap();
    assert!(c.wait().unwrap().success());
    s
}

/// Where `symbol` of the fixture `bin` is in process `pid`.
fn address(bin: &Path, pid: i32, symbol: &str) -> u64 {
    let nm = Command::new("nm").arg(bin).output().expect("nm (binutils)");
    let text = String::from_utf8_lossy(&nm.stdout);
    let off = text
        .lines()
        .find(|l| l.ends_with(&format!(" {symbol}")))
        .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
        .unwrap_or_else(|| panic!("no {symbol} in {text}"));
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let name = bin.file_name().unwrap().to_str().unwrap();
    let l = maps.lines().find(|l| l.ends_with(name)).unwrap();
    u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap() + off
}

fn mem(pid: i32) -> std::fs::File {
    std::fs::OpenOptions::new().read(true).write(true).open(format!("/proc/{pid}/mem")).unwrap()
}

fn read(pid: i32, addr: u64, len: usize) -> Vec<u8> {
    let mut b = vec![0u8; len];
    mem(pid).read_exact_at(&mut b, addr).unwrap();
    b
}

fn kerf_count(pid: i32, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["count", "-p", &pid.to_string(), "--json"])
        .args(args)
        .env("KERF_CACHE_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("patchers-cache"))
        .output()
        .unwrap()
}

#[test]
fn bytes_that_are_not_the_files_are_refused_not_spliced() {
    let bin = common::build_fixture("counted", "-O2", "foreign");
    let (c, pid, out) = start(&bin);
    let _reaper = Reaper(pid);
    // Another tool's breakpoint on branchy (which runs only after "go").
    let at = address(&bin, pid, "branchy");
    let original = read(pid, at, 1);
    mem(pid).write_all_at(&[0xcc], at).unwrap();
    let o = kerf_count(pid, &["branchy", "switchy", "--duration", "0.3"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let refused = v["refused"].as_array().unwrap();
    assert!(
        refused.iter().any(|r| r["point"] == "branchy"
            && r["reason"].as_str().unwrap().contains("differ from the file's")),
        "branchy was not refused: {v}\n{err}"
    );
    let spliced: Vec<&str> =
        v["points"].as_array().unwrap().iter().map(|p| p["point"].as_str().unwrap()).collect();
    assert_eq!(spliced, ["switchy"], "{v}");
    // The breakpoint is still there, untouched; put the byte back and let the program run.
    assert_eq!(read(pid, at, 1), [0xcc]);
    mem(pid).write_all_at(&original, at).unwrap();
    assert!(finish(c, pid, out).contains("checksum"));
}

#[test]
fn a_second_kerf_refuses_and_the_first_goes_on_and_removes_cleanly() {
    let bin = common::build_fixture("counted", "-O2", "twokerfs");
    let expected = {
        let (c, pid, out) = start(&bin);
        let _r = Reaper(pid);
        finish(c, pid, out)
    };
    let (c, pid, out) = start(&bin);
    let _reaper = Reaper(pid);
    let points = ["branchy", "switchy", "leaf", "spin_point"];
    let addrs: Vec<u64> = points.iter().map(|p| address(&bin, pid, p)).collect();
    let before: Vec<Vec<u8>> = addrs.iter().map(|a| read(pid, *a, 16)).collect();
    // Traps too, so that the first kerf's SIGTRAP dispatcher is in place.
    let args: Vec<String> =
        ["-p", &pid.to_string(), "--json", "--duration", "2", "--force-kind", "trap"]
            .iter()
            .map(|s| s.to_string())
            .chain(points.iter().map(|s| s.to_string()))
            .collect();
    let (first, _) = common::spawn_count(&args, "patchers-cache");
    let first_pid = first.id();
    let second = kerf_count(pid, &["branchy", "leaf", "--duration", "0.3"]);
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success(), "a second kerf went in: {err}");
    assert!(
        err.contains("another kerf") && err.contains(&format!("pid {first_pid}")),
        "the refusal does not name the first kerf ({first_pid}): {err}"
    );
    // The first one counted all along and removes every byte.
    let o = first.wait_with_output().unwrap();
    assert!(o.status.success(), "the first kerf failed");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let spin = v["points"].as_array().unwrap().iter().find(|p| p["point"] == "spin_point").unwrap();
    assert!(spin["count"].as_u64().unwrap() > 0, "{v}");
    let after: Vec<Vec<u8>> = addrs.iter().map(|a| read(pid, *a, 16)).collect();
    assert_eq!(after, before, "code bytes differ from the file's after removal");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    assert!(!maps.contains("memfd:kerf") && !maps.contains("rwxp"), "{maps}");
    assert_eq!(finish(c, pid, out), expected, "the program's output changed");
}
