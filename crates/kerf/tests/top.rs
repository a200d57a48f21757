//! `kerf top` driven through tmux as a person would: on tests/fixtures/virtual.c (attached by
//! pid), the table shows the functions; Enter expands the selected one into its callees (a new
//! round of probes), `m` switches the metric, `c` collapses, `b` counts the selected function's
//! blocks (collapsed again by `c`), `t` watches one thread after
//! another (the main thread, which never calls work, shows no calls), `q` quits. Afterwards the
//! program's code in memory is byte for byte its file's, and the program runs on.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tmux(args: &[&str]) -> std::process::Output {
    Command::new("tmux").args(args).output().expect("tmux is needed (Debian package tmux)")
}

/// The pane's text.
fn screen(session: &str) -> String {
    String::from_utf8_lossy(&tmux(&["capture-pane", "-p", "-t", session]).stdout).into_owned()
}

/// Wait until the pane shows what `want` accepts; the last screen otherwise.
fn wait_for(session: &str, what: &str, want: impl Fn(&str) -> bool) -> String {
    let t = Instant::now();
    loop {
        let s = screen(session);
        if want(&s) {
            return s;
        }
        assert!(t.elapsed() < Duration::from_secs(60), "waited for {what}; the screen:\n{s}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// The program's executable code as mapped, against the file's bytes at the same offsets.
fn text_matches_file(pid: u32, bin: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap();
    let file = std::fs::read(bin).unwrap();
    let mut mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
    let mut checked = 0;
    for l in maps.lines().filter(|l| l.contains(" r-xp ") && l.ends_with(bin.to_str().unwrap())) {
        let f: Vec<&str> = l.split_whitespace().collect();
        let (lo, hi) = f[0].split_once('-').unwrap();
        let (lo, hi) = (u64::from_str_radix(lo, 16).unwrap(), u64::from_str_radix(hi, 16).unwrap());
        let off = u64::from_str_radix(f[2], 16).unwrap() as usize;
        let len = ((hi - lo) as usize).min(file.len() - off);
        let mut buf = vec![0; len];
        mem.seek(SeekFrom::Start(lo)).unwrap();
        mem.read_exact(&mut buf).unwrap();
        if buf != file[off..off + len] {
            return false;
        }
        checked += len;
    }
    checked > 0
}

#[test]
fn top_expands_switches_collapses_and_quits_through_tmux() {
    let bin = common::build_fixture("virtual", "-O2", "top");
    let mut prog = Command::new(&bin).args(["2", "4000"]).stdout(Stdio::null()).spawn().unwrap();
    let pid = prog.id();
    std::thread::sleep(Duration::from_millis(300));
    let session = format!("kerf-top-{pid}");
    let cache = Path::new(env!("CARGO_TARGET_TMPDIR")).join("top-cache");
    let err = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("top-{pid}.err"));
    let cmd = format!(
        "KERF_CACHE_DIR={} {} top --virtual --interval 0.3 -p {pid} work busy 2>{}",
        cache.display(),
        env!("CARGO_BIN_EXE_kerf"),
        err.display()
    );
    let o = tmux(&["new-session", "-d", "-s", &session, "-x", "150", "-y", "30", &cmd]);
    assert!(o.status.success(), "tmux: {}", String::from_utf8_lossy(&o.stderr));
    let rows =
        |s: &str| s.lines().filter(|l| l.ends_with(" work") || l.contains(" work [-]")).count();
    let s = wait_for(&session, "the table", |s| rows(s) == 1 && s.contains(" busy"));
    assert!(s.contains("[wall time/s]") && s.contains("round 1"), "{s}");
    // The busiest row, work, is selected: expand it into its callees.
    tmux(&["send-keys", "-t", &session, "Enter"]);
    let s = wait_for(&session, "work's callees", |s| s.contains("work > nanosleep@plt"));
    assert!(s.contains("round 2") && s.contains("work [-]"), "{s}");
    tmux(&["send-keys", "-t", &session, "m"]);
    wait_for(&session, "the CPU time metric", |s| s.contains("[cpu time/s]"));
    tmux(&["send-keys", "-t", &session, "c"]);
    let s = wait_for(&session, "work collapsed", |s| s.contains("round 3") && !s.contains(" > "));
    assert!(s.contains(" busy"), "{s}");
    // work's basic blocks, counted (the entry block runs once a call), then collapsed again.
    tmux(&["send-keys", "-t", &session, "b"]);
    let s =
        wait_for(&session, "work's blocks", |s| s.contains("round 4") && s.contains("work @ +0x0"));
    assert!(s.contains("work [b]"), "{s}");
    tmux(&["send-keys", "-t", &session, "c"]);
    wait_for(&session, "blocks collapsed", |s| s.contains("round 5") && !s.contains(" @ "));
    // Threads waiting inside: work sleeps 10 ms of each call.
    tmux(&["send-keys", "-t", &session, "m"]);
    tmux(&["send-keys", "-t", &session, "m"]);
    wait_for(&session, "the waiting metric", |s| s.contains("[threads waiting inside]"));
    // One thread after another: the main thread never calls work; some other thread does.
    let work_calls = |s: &str| -> Option<f64> {
        let l = s.lines().find(|l| l.ends_with(" work"))?;
        l.trim_start_matches('>').split_whitespace().next()?.parse().ok()
    };
    tmux(&["send-keys", "-t", &session, "t"]);
    let main = format!("thread {pid} ");
    let s = wait_for(&session, "the main thread", |s| {
        s.contains(&main) && s.contains("round 6") && work_calls(s).is_some()
    });
    assert_eq!(work_calls(&s), Some(0.0), "the main thread calls work: {s}");
    let mut round = 6;
    let worker = loop {
        tmux(&["send-keys", "-t", &session, "t"]);
        round += 1;
        let r = format!("round {round}");
        let s = wait_for(&session, &r, |s| s.contains(&r) && work_calls(s).is_some());
        if !s.contains("thread ") {
            panic!("back to all threads, and no thread called work: {s}");
        }
        if work_calls(&s).unwrap_or(0.0) > 0.0 {
            break s;
        }
        assert!(round < 9, "no thread called work: {s}");
    };
    assert!(worker.contains("[threads waiting inside]"), "{worker}");
    tmux(&["send-keys", "-t", &session, "q"]);
    let t = Instant::now();
    while tmux(&["has-session", "-t", &session]).status.success() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "kerf top did not quit: {}",
            screen(&session)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    let said = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(said.contains(&format!("kerf top: {round} rounds")), "{said}");
    // The probes are out: the code is the file's, and the program runs on.
    assert!(text_matches_file(pid, &bin), "the program's code differs from its file");
    assert!(prog.try_wait().unwrap().is_none(), "the program ended");
    let _ = prog.kill();
    let _ = prog.wait();
}
