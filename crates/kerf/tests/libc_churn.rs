//! libc instrumented in a program that does what real programs do after kerf attached
//! (tests/fixtures/churn.c): it creates threads, through glibc's clone3, whose `syscall`
//! starts a function of libc's unwind information; and it takes signals, every handler
//! returning through glibc's `__restore_rt`, which must never be spliced. The output must equal
//! an uninstrumented run's. Needs root (ptrace), gcc and libc6; a missing one fails the test.

mod common;

use kerf_analysis::image::Image;
use kerf_analysis::{analyze, Quiet};
use serde_json::Value;
use std::io::{BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";
const THREADS: u64 = 64;
const SIGNALS: u64 = 2000;

struct Churn {
    child: Child,
    pid: i32,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
}

/// Start the fixture in `mode`, waiting for "go" on its stdin.
fn start(bin: &Path, mode: &str, n: u64) -> Churn {
    let mut cmd = Command::new(bin);
    cmd.args([mode, &n.to_string()]).stdin(Stdio::piped());
    let (mut child, pid, out) = common::start_ready(cmd);
    let stdin = child.stdin.take().unwrap();
    Churn { child, pid, stdin, out }
}

/// Say "go", and return what the program printed after it; it must exit 0.
fn finish(mut c: Churn) -> String {
    c.stdin.write_all(b"go\n").unwrap();
    let mut s = String::new();
    c.out.read_to_string(&mut s).unwrap();
    let st = c.child.wait().unwrap();
    assert!(st.success(), "churn failed ({st}) after printing {s:?}");
    s
}

/// `kerf count -p PID --json ARGS` until the program has finished; its JSON summary.
fn count_while(c: Churn, args: &[String]) -> (String, Value) {
    let mut all = vec!["-p".to_string(), c.pid.to_string(), "--json".to_string()];
    all.extend_from_slice(args);
    let (k, _) = common::spawn_count(&all, "churn-cache");
    let _reaper = common::Reaper(c.pid);
    let out = finish(c);
    let ko = k.wait_with_output().unwrap();
    assert!(ko.status.success(), "kerf failed: {}", String::from_utf8_lossy(&ko.stderr));
    (out, serde_json::from_slice(&ko.stdout).expect("kerf --json output"))
}

/// The fixture, built under a name of the test's own (`tag`).
fn build(tag: &str) -> PathBuf {
    common::build_fixture("churn", "-O2", tag)
}

/// Image addresses of libc's functions whose first instruction is a `syscall`, and the one of
/// them that is clone3's (the `syscall` right after `mov eax, 435`).
fn syscall_entries() -> (Vec<u64>, u64) {
    let data = std::fs::read(LIBC).unwrap_or_else(|e| panic!("{LIBC}: {e} (Debian package libc6)"));
    let image = Image::from_elf(LIBC, &data).unwrap();
    let a = analyze(&image, &Quiet);
    let mut entries = Vec::new();
    let mut clone3 = None;
    for f in &a.cfg.functions {
        let Some((base, bytes)) = image.code_at(f.entry) else { continue };
        let off = (f.entry.0 - base.0) as usize;
        if bytes.get(off..off + 2) != Some(&[0x0f, 0x05][..]) {
            continue;
        }
        entries.push(f.entry.0);
        if off >= 5 && bytes[off - 5..off] == [0xb8, 0xb3, 0x01, 0x00, 0x00] {
            clone3 = Some(f.entry.0);
        }
    }
    (entries, clone3.expect("no libc function starts at clone3's syscall"))
}

/// Count the functions that start at a `syscall` (clone3's among them) while the program
/// creates and joins threads: each clone3 runs its `syscall` displaced into a code patch, in
/// the parent and the new thread.
fn threads_through_spliced_syscall(force: Option<&str>, want_kind: &str) {
    let bin = build(want_kind);
    let expected = finish(start(&bin, "threads", THREADS));
    let (entries, clone3) = syscall_entries();
    let mut args: Vec<String> = entries.iter().map(|a| format!("libc:{a:#x}")).collect();
    if let Some(k) = force {
        args.extend(["--force-kind".to_string(), k.to_string()]);
    }
    let (got, v) = count_while(start(&bin, "threads", THREADS), &args);
    assert_eq!(got, expected, "instrumented output differs: {v}");
    let spec = format!("libc:{clone3:#x}");
    let p = v["points"].as_array().unwrap().iter().find(|p| p["spec"] == spec.as_str());
    let p = p.unwrap_or_else(|| panic!("no point for {spec}: {v}"));
    assert_eq!(p["kind"], want_kind, "{v}");
    assert_eq!(p["count"].as_u64(), Some(THREADS), "one clone3 per thread: {v}");
}

#[test]
fn threads_created_through_a_jump5_over_clone3s_syscall() {
    // `syscall; test rax,rax` is displaced: the new thread returns into the patch.
    threads_through_spliced_syscall(None, "jump5");
}

#[test]
fn threads_created_through_a_jump2_over_clone3s_syscall() {
    // The `syscall` alone is displaced, the last instruction of its patch.
    threads_through_spliced_syscall(Some("jump2"), "jump2");
}

/// The image address range of glibc's signal return code, `mov rax, 15; syscall`, from one
/// byte before it (where libc's unwind entry for it starts).
fn restore_rt() -> (u64, u64) {
    let data = std::fs::read(LIBC).unwrap();
    let image = Image::from_elf(LIBC, &data).unwrap();
    let code = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];
    for s in image.exec_sections() {
        let bytes = image.section_bytes(s).unwrap();
        if let Some(off) = bytes.windows(code.len()).position(|w| w == code) {
            let at = s.addr.0 + off as u64;
            return (at - 1, at + code.len() as u64);
        }
    }
    panic!("no `mov rax, 15; syscall` in {LIBC}");
}

/// Where libc is loaded in `pid`: the start of its mapping at file offset 0.
fn libc_bias(pid: i32) -> u64 {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let l = maps
        .lines()
        .find(|l| l.contains("libc.so.6") && l.split_whitespace().nth(2) == Some("00000000"))
        .expect("libc mapped at offset 0");
    u64::from_str_radix(l.split('-').next().unwrap(), 16).unwrap()
}

#[test]
fn signal_handlers_return_with_every_libc_function_counted() {
    let bin = build("signals");
    let expected = finish(start(&bin, "signals", SIGNALS));
    let c = start(&bin, "signals", SIGNALS);
    let bias = libc_bias(c.pid);
    // The vDSO is mapped, and kerf takes no module from it (nothing there is ever spliced).
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", c.pid)).unwrap();
    assert!(maps.contains("[vdso]"), "{maps}");
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["analyze", "--json", "-p", &c.pid.to_string()])
        .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("churn-cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let a: Value = serde_json::from_slice(&o.stdout).unwrap();
    let paths: Vec<&str> =
        a["per_image"].as_array().unwrap().iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert!(paths.iter().any(|p| p.ends_with("libc.so.6")), "{paths:?}");
    assert!(!paths.iter().any(|p| p.contains("vdso")), "{paths:?}");
    let (got, v) = count_while(c, &["libc:*".to_string()]);
    assert_eq!(got, expected, "instrumented output differs");
    let (lo, hi) = restore_rt();
    for p in v["points"].as_array().unwrap() {
        let a = u64::from_str_radix(p["address"].as_str().unwrap().trim_start_matches("0x"), 16)
            .unwrap();
        let a = a.wrapping_sub(bias);
        assert!(!(lo..hi).contains(&a), "a splice in the signal return code: {p}");
    }
    let n = v["points"].as_array().unwrap().len();
    assert!(n > 1000, "libc:* gave only {n} points");
}

#[test]
fn threads_created_with_every_libc_function_counted() {
    let bin = build("threads_all");
    let expected = finish(start(&bin, "threads", THREADS));
    let (got, v) = count_while(start(&bin, "threads", THREADS), &["libc:*".to_string()]);
    assert_eq!(got, expected, "instrumented output differs");
    // Every thread went through pthread_create and was joined.
    let count = |name: &str| {
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["point"] == name)
            .and_then(|p| p["count"].as_u64())
    };
    assert_eq!(count("pthread_create"), Some(THREADS), "{v}");
    assert_eq!(count("pthread_join"), Some(THREADS), "{v}");
}
