//! Live-process control against real processes: small C programs compiled here, stopped,
//! read, written, injected into and resumed, whose output must not change. Needs ptrace
//! permission (root here); without it these tests fail with the reason, never pass.

use kerf_arch::RemoteAddr;
use kerf_os::ptrace::{self, within_reach, Tracee};
use kerf_os::{Process, TargetError};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static BUILD: Mutex<()> = Mutex::new(());

/// Compile `src` (C) to an executable in the test's temporary directory, once per run.
fn build(name: &str, src: &str, extra: &[&str]) -> PathBuf {
    let _guard = BUILD.lock().unwrap_or_else(|e| e.into_inner());
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ptrace");
    std::fs::create_dir_all(&dir).expect("tmp dir");
    let c = dir.join(format!("{name}.c"));
    let exe = dir.join(name);
    if std::fs::read_to_string(&c).ok().as_deref() == Some(src) && exe.exists() {
        return exe;
    }
    std::fs::write(&c, src).expect("write C source");
    let out = Command::new("cc")
        .args(["-O1", "-g", "-pthread", "-o"])
        .arg(&exe)
        .arg(&c)
        .args(extra)
        .output()
        .expect("run cc (a C compiler is needed for these tests)");
    assert!(out.status.success(), "cc failed: {}", String::from_utf8_lossy(&out.stderr));
    exe
}

/// A child with piped stdin/stdout whose lines arrive on a channel (so reads time out).
struct Kid {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Kid {
    fn start(exe: &Path) -> Kid {
        Kid::start_with(exe, &[])
    }

    fn start_with(exe: &Path, args: &[&str]) -> Kid {
        let mut child = Command::new(exe)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn test child");
        let stdout = child.stdout.take().expect("piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdin = child.stdin.take();
        let mut kid = Kid { child, stdin, lines: rx };
        assert_eq!(kid.line(), "ready");
        kid
    }

    fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn line(&mut self) -> String {
        self.lines
            .recv_timeout(Duration::from_secs(30))
            .unwrap_or_else(|e| panic!("no output line from child {}: {e}", self.pid()))
    }

    fn send(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(text.as_bytes()).expect("write to child");
        stdin.flush().expect("flush");
    }

    /// Close stdin, collect the remaining output and the exit status.
    fn finish(self) -> (Vec<String>, i32) {
        let (rest, status) = self.finish_status();
        (rest, status.code().unwrap_or(-1))
    }

    /// [`Kid::finish`] with the whole status (the signal that ended it).
    fn finish_status(mut self) -> (Vec<String>, std::process::ExitStatus) {
        drop(self.stdin.take());
        let mut rest = Vec::new();
        while let Ok(l) = self.lines.recv_timeout(Duration::from_secs(30)) {
            rest.push(l);
        }
        (rest, self.child.wait().expect("wait child"))
    }
}

impl Drop for Kid {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn stop(pid: i32) -> Tracee {
    Tracee::stop_all(pid).unwrap_or_else(|e| {
        panic!("stop_all({pid}) failed — these tests need ptrace permission (root): {e}")
    })
}

fn tasks(pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .expect("task dir")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort_unstable();
    v
}

/// The executable mapping of `exe` in `pid`: (start, end, file offset).
/// The executable's code mapping in `pid`: start, end, and its offset in the file.
fn exe_text(pid: i32, exe: &Path) -> (RemoteAddr, RemoteAddr, u64) {
    let exe = std::fs::canonicalize(exe).expect("canonical");
    let maps = Process::open(pid).expect("process").maps().expect("maps");
    let text = maps
        .iter()
        .find(|m| m.exec && !m.write && m.path.as_deref().map(Path::new) == Some(exe.as_path()));
    let text = text.unwrap_or_else(|| panic!("{} has no r-x mapping in {pid}", exe.display()));
    (text.start, text.end, text.offset)
}

const SIMPLE: &str = r#"
#include <stdio.h>
int main(void) {
    char line[256];
    unsigned long sum = 0;
    printf("ready\n"); fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        for (char *p = line; *p; p++) sum = sum * 31 + (unsigned char)*p;
        printf("got %s", line); fflush(stdout);
    }
    printf("done %lu\n", sum);
    return 0;
}
"#;

fn simple_sum(text: &str) -> u64 {
    text.bytes().fold(0u64, |s, b| s.wrapping_mul(31).wrapping_add(u64::from(b)))
}

#[test]
fn stop_read_write_alloc_inject_resume() {
    let exe = build("simple", SIMPLE, &[]);
    let mut kid = Kid::start(&exe);
    let pid = kid.pid();
    let (text, text_end, off) = exe_text(pid, &exe);

    let mut t = stop(pid);
    assert_eq!(t.pid(), pid);
    assert_eq!(t.threads(), &[pid]);

    // Code bytes equal the file's.
    let file = std::fs::read(&exe).expect("read exe");
    let n = 256.min((text_end - text) as usize);
    let mut code = vec![0u8; n];
    t.read(text, &mut code).expect("read code");
    assert_eq!(code, file[off as usize..off as usize + n]);

    // A short read is an error naming the address: the last bytes before a hole.
    let maps = Process::open(pid).expect("process").maps().expect("maps");
    let hole = maps.windows(2).find(|w| w[0].end < w[1].start).expect("a hole")[0].end;
    let mut big = vec![0u8; 64];
    let err = t.read(hole - 16, &mut big).unwrap_err();
    assert!(matches!(err, TargetError::Memory { write: false, done: 16, .. }), "{err:?}");
    assert!(err.to_string().contains(&format!("{:#x}", hole - 16)), "{err}");
    assert!(t.write(hole, &[0]).is_err());

    // Injected getpid/gettid; registers come back exactly.
    let before = t.regs(pid).expect("regs");
    assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(pid));
    assert_eq!(t.syscall_on(pid, libc::SYS_gettid, [0; 6]).expect("gettid"), i64::from(pid));
    assert_eq!(t.regs(pid).expect("regs"), before, "registers restored exactly");
    // A failing call returns -errno.
    let r = t.syscall(libc::SYS_close, [9999, 0, 0, 0, 0, 0]).expect("close");
    assert_eq!(r, -i64::from(libc::EBADF));

    // alloc_near: within ±2 GiB, writable, readable back.
    let near = text;
    let a = t.alloc_near(near, 10_000, libc::PROT_READ | libc::PROT_WRITE).expect("alloc");
    assert_eq!(a.align_down(4096), a);
    assert!(within_reach(near, a, 12_288), "{a:#x} not within reach of {near:#x}");
    assert!(near.distance(a) < 1 << 31);
    let data: Vec<u8> = (0..10_000u32).map(|i| (i * 7 + 3) as u8).collect();
    t.write(a, &data).expect("write");
    let mut back = vec![0u8; data.len()];
    t.read(a, &mut back).expect("read back");
    assert_eq!(back, data);
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    assert!(maps.contains(&format!("{a:x}-{:x} rw-p", a + 12_288)), "{maps}");

    // An executable region near a library too, then free both.
    let x = t.alloc_near(near, 1, libc::PROT_READ | libc::PROT_EXEC).expect("alloc rx");
    assert!(within_reach(near, x, 4096));
    t.write(x, &[0xc3]).expect("write through read-only page");
    t.free(a, 10_000).expect("free");
    t.free(x, 1).expect("free");
    assert!(t.read(a, &mut back[..8]).is_err(), "freed memory is gone");

    // Writing the code (as a splice would) and restoring it.
    t.write(text, &[0xcc]).expect("write code");
    let mut one = [0u8; 1];
    t.read(text, &mut one).expect("read");
    assert_eq!(one, [0xcc]);
    t.write(text, &code[..1]).expect("restore code");

    let pause = t.resume_detach().expect("resume");
    assert!(pause.held > Duration::ZERO);

    kid.send("hello\n");
    assert_eq!(kid.line(), "got hello");
    let (rest, code) = kid.finish();
    assert_eq!(rest, vec![format!("done {}", simple_sum("hello\n"))]);
    assert_eq!(code, 0);
}

#[test]
fn injection_timing() {
    let exe = build("simple", SIMPLE, &[]);
    let kid = Kid::start(&exe);
    let pid = kid.pid();
    let mut t = stop(pid);
    t.syscall(libc::SYS_getpid, [0; 6]).expect("warm up");
    let n = 2000;
    let start = Instant::now();
    for _ in 0..n {
        assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(pid));
    }
    let per = start.elapsed() / n;
    let start = Instant::now();
    let a = t.alloc_near(RemoteAddr(0x5555_0000_0000), 4096, libc::PROT_READ).expect("alloc");
    let alloc = start.elapsed();
    t.free(a, 4096).expect("free");
    eprintln!("[timing] injected getpid: {per:?} each; alloc_near (maps + mmap): {alloc:?}");
    t.resume_detach().expect("resume");
    let (rest, code) = kid.finish();
    assert_eq!((rest, code), (vec![format!("done 0")], 0));
}

const THREADS: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static atomic_int stop_flag;
static unsigned long results[8];
static void *worker(void *arg) {
    long id = (long)arg;
#ifdef BLOCK_ALL
    if (id == 7) { sigset_t all; sigfillset(&all); pthread_sigmask(SIG_BLOCK, &all, NULL); }
#endif
    unsigned long x = id + 1;
    for (int i = 0; i < 300; i++) {
        x = x * 6364136223846793005UL + 1442695040888963407UL;
        if (id % 2 == 0) { struct timespec ts = {0, 100000}; nanosleep(&ts, NULL); }
        else { for (volatile int k = 0; k < 20000; k++); }
    }
    results[id] = x;
    while (!atomic_load(&stop_flag)) {
        if (id % 2 == 0) { struct timespec ts = {0, 200000}; nanosleep(&ts, NULL); }
        else if (id < 4) { for (volatile int k = 0; k < 100000; k++); }
        else { usleep(100); for (volatile int k = 0; k < 10000; k++); }
    }
    return NULL;
}
int main(void) {
    pthread_t t[8];
    for (long i = 0; i < 8; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    printf("ready\n"); fflush(stdout);
    char line[256];
    if (!fgets(line, sizeof line, stdin)) return 2;
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < 8; i++) pthread_join(t[i], NULL);
    for (int i = 0; i < 8; i++) printf("t%d %lx\n", i, results[i]);
    printf("line %s", line);
    return 0;
}
"#;

#[test]
fn nine_threads_two_hundred_batches() {
    let exe = build("threads", THREADS, &[]);
    let mut kid = Kid::start(&exe);
    let pid = kid.pid();
    let mut in_read = 0;
    let mut in_sleep = 0;
    let (mut total, mut longest_held, mut longest_cycle) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let rounds = 200;
    for round in 0..rounds {
        let cycle = Instant::now();
        let mut t = stop(pid);
        let mut seen = t.threads().to_vec();
        seen.sort_unstable();
        assert_eq!(seen, tasks(pid), "round {round}: every thread stopped");
        assert_eq!(seen.len(), 9, "round {round}");
        // The main thread waits for stdin in read(2), the even workers in nanosleep.
        let main = t.regs(pid).expect("regs");
        if main.orig_rax == libc::SYS_read as u64 && main.rax as i64 == -512 {
            in_read += 1;
        }
        for &tid in t.threads() {
            let r = t.regs(tid).expect("regs");
            if r.orig_rax == libc::SYS_clock_nanosleep as u64 && r.rax as i64 == -516 {
                in_sleep += 1;
            }
        }
        assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(pid));
        assert_eq!(t.regs(pid).expect("regs"), main, "round {round}: registers restored");
        let pause = t.resume_detach().expect("resume");
        let c = cycle.elapsed();
        total += c;
        longest_cycle = longest_cycle.max(c);
        longest_held = longest_held.max(pause.held);
    }
    eprintln!(
        "[timing] 9 threads: stop_all+getpid+resume_detach mean {:?}, longest {:?}; longest \
         all-stopped pause {:?}; main thread in read: {in_read}/{rounds}, sleeper stops inside \
         clock_nanosleep: {in_sleep}",
        total / rounds,
        longest_cycle,
        longest_held
    );
    assert!(in_read > rounds / 2, "main thread seldom seen blocked in read: {in_read}");
    assert!(in_sleep > 0);
    // The read interrupted 200 times still returns the line written now.
    kid.send("after the batches\n");
    let mut out = Vec::new();
    for _ in 0..9 {
        out.push(kid.line());
    }
    let (rest, code) = kid.finish();
    assert!(rest.is_empty(), "{rest:?}");
    assert_eq!(code, 0);
    let mut expected = Vec::new();
    for id in 0..8u64 {
        let mut x = id + 1;
        for _ in 0..300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        }
        expected.push(format!("t{id} {x:x}"));
    }
    expected.push("line after the batches".to_string());
    assert_eq!(out, expected);
}

#[test]
fn stop_and_resume_timing_nine_threads() {
    let exe = build("threads", THREADS, &[]);
    let mut kid = Kid::start(&exe);
    let pid = kid.pid();
    let n = 100u32;
    let (mut stop_sum, mut resume_sum, mut held_max) =
        (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    for _ in 0..n {
        let t0 = Instant::now();
        let t = stop(pid);
        let t1 = Instant::now();
        let pause = t.resume_detach().expect("resume");
        stop_sum += t1 - t0;
        resume_sum += t1.elapsed();
        held_max = held_max.max(pause.held);
    }
    eprintln!(
        "[timing] 9 threads: stop_all {:?}, resume_detach {:?} (means of {n}); longest held {:?}",
        stop_sum / n,
        resume_sum / n,
        held_max
    );
    kid.send("x\n");
    for _ in 0..9 {
        kid.line();
    }
    assert_eq!(kid.finish().1, 0);
}

#[test]
fn shared_memory_both_ways() {
    let exe = build("simple", SIMPLE, &[]);
    let kid = Kid::start(&exe);
    let pid = kid.pid();
    let (text, _, _) = exe_text(pid, &exe);
    let fds_before = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fds").count();
    let mut t = stop(pid);
    let regs = t.regs(pid).expect("regs");
    let shm = t.share_near(text, 10_000, 10_000).expect("share_near");
    assert_eq!(shm.len(), 12_288);
    assert!(within_reach(text, shm.remote(), shm.len() as u64));
    assert_eq!(t.regs(pid).expect("regs"), regs);
    // kerf → target
    shm.store_u64(0, 0x1122_3344_5566_7788);
    shm.write_bytes(100, b"from kerf");
    let mut b = [0u8; 8];
    t.read(shm.remote(), &mut b).expect("read remote");
    assert_eq!(u64::from_le_bytes(b), 0x1122_3344_5566_7788);
    let mut s = [0u8; 9];
    t.read(shm.remote() + 100, &mut s).expect("read remote");
    assert_eq!(&s, b"from kerf");
    // target → kerf
    t.write(shm.remote() + 8, &0xfeed_f00d_u64.to_le_bytes()).expect("write remote");
    assert_eq!(shm.load_u64(8), 0xfeed_f00d);
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let line = maps
        .lines()
        .find(|l| l.starts_with(&format!("{:x}-", shm.remote())))
        .expect("mapping listed");
    // Named after the kerf that made it (other kerfs tell it is taken: ptrace::claim).
    let name = format!("memfd:kerf-{}", std::process::id());
    assert!(line.contains("rw-s") && line.contains(&name), "{line}");
    t.resume_detach().expect("resume");
    assert_eq!(
        std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fds").count(),
        fds_before,
        "the target keeps no extra descriptor"
    );
    // Still shared while the target runs; the next batch unmaps its side.
    let mut t = stop(pid);
    t.write(shm.remote() + 16, &7u64.to_le_bytes()).expect("write");
    assert_eq!(shm.load_u64(16), 7);
    t.free(shm.remote(), shm.len() as u64).expect("free");
    t.resume_detach().expect("resume");
    assert_eq!(shm.load_u64(16), 7, "kerf's side stays valid until dropped");
    drop(shm);
    let (rest, code) = kid.finish();
    assert_eq!((rest, code), (vec![format!("done 0")], 0));
}

const SIGNALS: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>
static atomic_long count;
static void on_usr1(int sig) { (void)sig; atomic_fetch_add(&count, 1); }
static void *sleeper(void *a) {
    for (;;) { struct timespec ts = {0, 300000}; nanosleep(&ts, NULL); }
    return a;
}
int main(void) {
    struct sigaction sa = {0};
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t t;
    pthread_create(&t, NULL, sleeper, NULL);
    printf("ready\n"); fflush(stdout);
    char buf[64];
    while (read(0, buf, sizeof buf) > 0) {}
    printf("count %ld\n", atomic_load(&count));
    return 0;
}
"#;

/// Whether SIGUSR1 is pending for the process or any of its threads.
fn usr1_pending(pid: i32) -> bool {
    let bit = 1u64 << (libc::SIGUSR1 - 1);
    let mask = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0)
    };
    for tid in tasks(pid) {
        let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/status")) else {
            continue;
        };
        if (mask(&s, "SigPnd:") | mask(&s, "ShdPnd:")) & bit != 0 {
            return true;
        }
    }
    false
}

fn wait_not_pending(pid: i32) {
    let start = Instant::now();
    while usr1_pending(pid) {
        assert!(start.elapsed() < Duration::from_secs(10), "SIGUSR1 stays pending");
        std::thread::sleep(Duration::from_micros(200));
    }
}

#[test]
fn signals_sent_during_batches_are_delivered_once() {
    let exe = build("signals", SIGNALS, &[]);
    let kid = Kid::start(&exe);
    let pid = kid.pid();
    let kill = || {
        // SAFETY: plain kill(2) of our own child.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR1) }, 0);
    };
    let mut sent = 0;
    let (mut held_once, mut held_twice) = (0, 0);
    for round in 0..150 {
        wait_not_pending(pid);
        let mut t = stop(pid);
        match round % 3 {
            0 => {
                // Sent while stopped; the injection runs the main thread, which dequeues it.
                kill();
                sent += 1;
                t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid");
                if t.held_signals(pid) == 1 {
                    held_once += 1;
                }
            }
            1 => {
                // Two, each dequeued during an injection: one goes back with PTRACE_DETACH,
                // the other is queued again. The second is only sent once the first was
                // taken: two standard signals pending at once are one (the main thread may
                // still be in the handler of the last batch's signal, SIGUSR1 blocked).
                kill();
                sent += 1;
                t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid");
                if t.held_signals(pid) == 1 {
                    kill();
                    sent += 1;
                    // On the main thread again (left to itself, kerf would choose a thread
                    // holding no signal).
                    t.syscall_on(pid, libc::SYS_getpid, [0; 6]).expect("getpid");
                    if t.held_signals(pid) == 2 {
                        held_twice += 1;
                    }
                }
            }
            _ => {
                // Sent while stopped, nothing run: stays queued in the kernel.
                kill();
                sent += 1;
            }
        }
        t.resume_detach().expect("resume");
        if round % 5 == 0 {
            // And one while it runs normally.
            wait_not_pending(pid);
            kill();
            sent += 1;
        }
    }
    wait_not_pending(pid);
    std::thread::sleep(Duration::from_millis(20));
    eprintln!("[signals] sent {sent}; held one {held_once}×, held two {held_twice}×");
    let (rest, code) = kid.finish();
    assert_eq!(code, 0);
    assert_eq!(rest, vec![format!("count {sent}")]);
    assert!(held_once > 0 && held_twice > 0, "the re-injection paths were exercised");
}

const CHURN: &str = r#"
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <unistd.h>
static atomic_int stop_flag;
static atomic_long made;
static void *brief(void *a) { for (volatile int k = 0; k < 1000; k++); return a; }
static void *spawner(void *a) {
    while (!atomic_load(&stop_flag)) {
        pthread_t t;
        if (pthread_create(&t, NULL, brief, NULL) == 0) { pthread_join(t, NULL); atomic_fetch_add(&made, 1); }
    }
    return a;
}
int main(void) {
    pthread_t s[3];
    for (int i = 0; i < 3; i++) pthread_create(&s[i], NULL, spawner, NULL);
    printf("ready\n"); fflush(stdout);
    char line[64];
    if (!fgets(line, sizeof line, stdin)) return 2;
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < 3; i++) pthread_join(s[i], NULL);
    printf("churned %s\n", atomic_load(&made) > 0 ? "ok" : "none");
    return 0;
}
"#;

#[test]
fn threads_created_and_exiting_during_attach() {
    let exe = build("churn", CHURN, &[]);
    let mut kid = Kid::start(&exe);
    let pid = kid.pid();
    for round in 0..100 {
        let mut t = stop(pid);
        let mut seen = t.threads().to_vec();
        seen.sort_unstable();
        assert_eq!(seen, tasks(pid), "round {round}: stopped threads = /proc/PID/task");
        assert!(seen.len() >= 4);
        assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(pid));
        t.resume_detach().expect("resume");
    }
    kid.send("stop\n");
    assert_eq!(kid.line(), "churned ok");
    assert_eq!(kid.finish().1, 0);
}

#[test]
fn dropping_a_tracee_lets_the_process_go() {
    let exe = build("simple", SIMPLE, &[]);
    let mut kid = Kid::start(&exe);
    {
        let mut t = stop(kid.pid());
        t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid");
        // Dropped without resume_detach (as on an error path).
    }
    kid.send("still alive\n");
    assert_eq!(kid.line(), "got still alive");
    assert_eq!(kid.finish().1, 0);
}

#[test]
fn error_dead_pid_self_and_already_traced() {
    let mut dead = Command::new("true").spawn().expect("spawn true");
    let dead_pid = dead.id() as i32;
    dead.wait().expect("wait");
    let err = Tracee::stop_all(dead_pid).unwrap_err();
    assert!(matches!(err, TargetError::NoSuchProcess { .. }), "{err:?}");
    assert_eq!(err.to_string(), format!("process {dead_pid} does not exist"));
    assert!(matches!(Tracee::stop_all(0), Err(TargetError::NoSuchProcess { pid: 0 })));
    let me = std::process::id() as i32;
    let err = Tracee::stop_all(me).unwrap_err();
    assert!(matches!(err, TargetError::TraceSelf { .. }), "{err:?}");

    let exe = build("simple", SIMPLE, &[]);
    let mut kid = Kid::start(&exe);
    let pid = kid.pid();
    let first = stop(pid);
    let err = Tracee::stop_all(pid).unwrap_err();
    // The tracer is the kerf *thread* that attached.
    let TargetError::AlreadyTraced { tracer, .. } = err else { panic!("{err:?}") };
    assert!(Path::new(&format!("/proc/{me}/task/{tracer}")).exists(), "{err:?}");
    let msg = err.to_string();
    assert!(
        msg.starts_with(&format!("process {pid} is already being traced (by a debugger?)")),
        "{msg}"
    );
    assert!(!msg.contains('\n'));
    // From another thread of kerf as well.
    let other =
        std::thread::spawn(move || Tracee::stop_all(pid).map(|_| ()).unwrap_err().to_string())
            .join()
            .expect("thread");
    assert!(other.contains("already being traced"), "{other}");
    first.resume_detach().expect("resume");
    kid.send("ok\n");
    assert_eq!(kid.line(), "got ok");
    assert_eq!(kid.finish().1, 0);
}

/// Runs itself again as user nobody (`setpriv`), with the target's pid in
/// `KERF_EPERM_TARGET`; that second run checks that `stop_all` refuses cleanly
/// (`eperm_as_nobody`) and prints the error for this one to check.
#[test]
fn eperm_as_an_unprivileged_user() {
    if let Some(pid) = std::env::var_os("KERF_EPERM_TARGET") {
        eperm_as_nobody(pid.to_str().expect("pid").parse().expect("pid"));
        return;
    }
    let mut target = Command::new("sleep").arg("30").spawn().expect("sleep");
    let exe = std::env::current_exe().expect("exe");
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&exe)
        .args(["--exact", "eperm_as_an_unprivileged_user", "--nocapture", "--test-threads=1"])
        .env("KERF_EPERM_TARGET", target.id().to_string())
        .output()
        .expect("run setpriv (util-linux) to drop privileges");
    let _ = target.kill();
    let _ = target.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "helper failed:\n{stdout}\n{stderr}");
    let line = stdout
        .lines()
        .find_map(|l| l.find("EPERM-ERROR: ").map(|at| &l[at..]))
        .unwrap_or_else(|| panic!("helper printed no error:\n{stdout}\n{stderr}"));
    assert!(line.contains(&format!("no permission to ptrace process {}", target.id())), "{line}");
    assert!(line.contains("root") && line.contains("ptrace_scope"), "{line}");
}

/// The second run of `eperm_as_an_unprivileged_user`, as user nobody: stop_all must refuse
/// cleanly.
fn eperm_as_nobody(pid: i32) {
    // SAFETY: getuid has no preconditions.
    assert_eq!(unsafe { libc::getuid() }, 65534, "helper runs unprivileged");
    let err = Tracee::stop_all(pid).unwrap_err();
    assert!(matches!(err, TargetError::PtraceDenied { .. }), "{err:?}");
    println!("EPERM-ERROR: {err}");
}

#[test]
fn spawn_and_wait_until_loaded() {
    let mut child = ptrace::spawn(&["sleep".to_string(), "30".to_string()]).expect("spawn");
    let pid = child.id() as i32;
    ptrace::wait_until_loaded(pid, Duration::from_secs(10)).expect("loaded");
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    assert!(maps.contains("libc.so"), "{maps}");
    let mut t = stop(pid);
    assert_eq!(t.threads(), &[pid]);
    assert_eq!(
        t.syscall(libc::SYS_getppid, [0; 6]).expect("getppid"),
        i64::from(std::process::id())
    );
    t.resume_detach().expect("resume");
    // The sleep is still sleeping (nanosleep restarted), and dies normally.
    std::thread::sleep(Duration::from_millis(50));
    assert!(child.try_wait().expect("try_wait").is_none());
    child.kill().expect("kill");
    child.wait().expect("wait");

    let err = ptrace::spawn(&["/nonexistent/kerf-test".to_string()]).unwrap_err();
    assert!(err.to_string().starts_with("cannot start /nonexistent/kerf-test: "), "{err}");
    assert!(ptrace::spawn(&[]).is_err());

    // A static program is ready at once.
    let exe = build(
        "static",
        "#include <unistd.h>\nint main(void) { for (;;) pause(); }\n",
        &["-static"],
    );
    if exe.exists() {
        let mut c = Command::new(&exe).spawn().expect("spawn static");
        let t0 = Instant::now();
        ptrace::wait_until_loaded(c.id() as i32, Duration::from_secs(10)).expect("loaded");
        assert!(t0.elapsed() < Duration::from_millis(50));
        let mut t = stop(c.id() as i32);
        assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(c.id()));
        t.resume_detach().expect("resume");
        c.kill().expect("kill");
        c.wait().expect("wait");
    }
}

const FLAGS_LOOP: &str = r#"
#include <pthread.h>
#include <stdio.h>
static volatile int stop;
static void *reader(void *arg) {
    char line[64];
    if (fgets(line, sizeof line, stdin)) stop = 1;
    return arg;
}
int main(void) {
    pthread_t t;
    pthread_create(&t, 0, reader, 0);
    printf("ready\n");
    fflush(stdout);
    unsigned long n = 0;
    while (!stop) {
        __asm__ volatile("pushfq\n\tpopfq" ::: "memory", "cc");
        n++;
    }
    pthread_join(t, 0);
    printf("done %d\n", n > 0);
    return 0;
}
"#;

/// Single-stepping a `pushfq` must not leave the trap flag in the pushed word: the `popfq`
/// after it would make it the program's own, and the thread would die of SIGTRAP once
/// detached (kerf jit's removal steps threads through `pushfq`/`popfq` pairs).
#[test]
fn stepping_a_pushf_leaves_no_trap_flag_behind() {
    let exe = build("flags_loop", FLAGS_LOOP, &[]);
    let mut kid = Kid::start(&exe);
    let pid = kid.pid();
    let mut t = stop(pid);
    let mut pushes = 0;
    for _ in 0..10_000 {
        let pc = t.regs(pid).expect("regs").rip;
        let mut insn = [0u8; 1];
        t.read(RemoteAddr(pc), &mut insn).expect("read code");
        let after = t.step(pid).expect("step");
        if insn == [0x9c] {
            pushes += 1;
            let mut word = [0u8; 8];
            t.read(RemoteAddr(after.rsp), &mut word).expect("read stack");
            assert_eq!(u64::from_le_bytes(word) & 0x100, 0, "TF pushed at {pc:#x}");
            // Step the popfq too, then a little further.
            for _ in 0..3 {
                t.step(pid).expect("step");
            }
            if pushes == 3 {
                break;
            }
        }
    }
    assert_eq!(pushes, 3, "the loop's pushfq was never stepped");
    t.resume_detach().expect("resume");
    std::thread::sleep(Duration::from_millis(200));
    kid.send("stop\n");
    let (rest, code) = kid.finish();
    assert_eq!((rest, code), (vec!["done 1".to_string()], 0), "the child died after detach");
}

const TIMER_LOOP: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/time.h>
static volatile int stop;
static volatile long alarms;
static void on_alarm(int sig) { (void)sig; alarms++; }
static void *reader(void *arg) {
    char line[64];
    if (fgets(line, sizeof line, stdin)) stop = 1;
    return arg;
}
int main(void) {
    signal(SIGALRM, on_alarm);
    struct itimerval every = {{0, 10}, {0, 10}};
    setitimer(ITIMER_REAL, &every, 0);
    pthread_t t;
    pthread_create(&t, 0, reader, 0);
    printf("ready\n");
    fflush(stdout);
    unsigned long n = 1;
    while (!stop) {
        n = n * 31 + 7;
        __asm__ volatile("" ::: "memory");
    }
    pthread_join(t, 0);
    printf("alarms %d %d\n", alarms > 0, n != 0);
    return 0;
}
"#;

/// A program's timer signal waits while kerf single-steps a thread: every other thread is
/// stopped, so a process-directed signal can only go to the stepped one, and one that comes
/// before each try (a timer faster than kerf's round trip, as a 2 ms one is under load) used
/// to stop the step first, again and again (a flush in CI ran out of its 5 s on one
/// instruction). Once one came, the step holds the rest back in the thread's mask: they
/// stay pending, the mask is the program's between steps, and the program goes on and ends
/// normally once kerf lets go (its output shows no more: its handler had run before).
#[test]
fn a_step_holds_back_the_programs_timer_signal() {
    let exe = build("timer_loop", TIMER_LOOP, &[]);
    let mut kid = Kid::start(&exe);
    let pid = kid.pid();
    let mut t = stop(pid);
    let mut moved = 0;
    const STEPS: usize = 300;
    for _ in 0..STEPS {
        let before = t.regs(pid).expect("regs").rip;
        let mask = t.sigmask(pid).expect("mask");
        let mut insn = [0u8; 2];
        t.read(RemoteAddr(before), &mut insn).expect("read code");
        let after = t.step(pid).expect("step");
        moved += usize::from(after.rip != before);
        // (The timer's handler returns by `rt_sigreturn`, which sets the mask itself.)
        if insn != [0x0f, 0x05] {
            assert_eq!(t.sigmask(pid).expect("mask"), mask, "the mask after a step at {before:#x}");
        }
    }
    assert_eq!(moved, STEPS, "every step ran an instruction");
    // About the one that came first, a step (SIGALRM is not queued: more are one), and one
    // or two for the call that made the trap guard SIGTRAP's action before the first step
    // (302 in one run of five beside a busy machine, not explained); without the hold the
    // first step alone met 10,000.
    let held = t.held_signals(pid);
    assert!((1..=STEPS + 10).contains(&held), "{held} signals came first in {STEPS} steps");
    assert!(t.signal_pending(pid, libc::SIGALRM), "the timer's signal waits, pending");
    t.resume_detach().expect("resume");
    std::thread::sleep(Duration::from_millis(100));
    kid.send("stop\n");
    let (rest, code) = kid.finish();
    assert_eq!((rest, code), (vec!["alarms 1 1".to_string()], 0));
}

/// kerf killed (SIGKILL) after it made a system call in a program it holds: the program runs
/// on unharmed. The injected call single-steps a `syscall` instruction; a thread left in
/// that step's trap stop would get the SIGTRAP delivered, with the trap flag still set,
/// once its tracer is gone (the kernel clears neither for a tracer that dies), and die of
/// it (seen: python3.11 under `kerf jit`, killed by a user during the start). The tracer
/// here is this test binary run again (`KERF_TEST_TRACER=PID`), which stops the program,
/// makes its calls and kills itself without detaching.
/// In the tracer's run of test `name` (`env` names the program's pid): stop the program,
/// `before` (with the stopped tracee), make two calls in it, then die by SIGKILL without
/// detaching, as a killed kerf does. Returns without doing anything in the test's own run.
fn tracer_side(env: &str, before: impl FnOnce(i32, &mut Tracee)) {
    let Ok(pid) = std::env::var(env) else { return };
    let pid: i32 = pid.parse().expect("a pid");
    let mut t = stop(pid);
    before(pid, &mut t);
    assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(pid));
    let r = t.syscall(libc::SYS_close, [9999, 0, 0, 0, 0, 0]).expect("close");
    assert_eq!(r, -i64::from(libc::EBADF));
    // SAFETY: kill and getpid cannot fail here; this process ends now, as kerf killed.
    unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    unreachable!("SIGKILL returned");
}

/// Run this test binary again as the tracer of `kid` (test `name`, `env` its pid) and check
/// that it got as far as its SIGKILL.
fn run_tracer(name: &str, env: &str, kid: &Kid, round: usize) {
    let me = std::env::current_exe().expect("this test binary");
    let tracer = Command::new(me)
        .args(["--exact", name, "--nocapture", "--test-threads=1"])
        .env(env, kid.pid().to_string())
        .output()
        .expect("run the tracer");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(
        tracer.status.signal(),
        Some(libc::SIGKILL),
        "round {round}: the tracer did not get as far as its end: {}",
        String::from_utf8_lossy(&tracer.stderr)
    );
}

#[test]
fn a_tracer_killed_after_an_injection_leaves_the_program_running() {
    tracer_side("KERF_TEST_TRACER", |_, _| {});
    let exe = build("simple", SIMPLE, &[]);
    for round in 0..3 {
        let mut kid = Kid::start(&exe);
        let name = "a_tracer_killed_after_an_injection_leaves_the_program_running";
        run_tracer(name, "KERF_TEST_TRACER", &kid, round);
        // The program, no longer traced, reads and answers as before.
        kid.send("after the tracer died\n");
        assert_eq!(kid.line(), "got after the tracer died", "round {round}");
        let (rest, code) = kid.finish();
        let sum = simple_sum("after the tracer died\n");
        assert_eq!((rest, code), (vec![format!("done {sum}")], 0), "round {round}");
    }
}

/// A program that counts SIGUSR1 (its handler restarts `read`) and says the count with every
/// line it echoes.
const COUNTS_USR1: &str = r#"
#include <signal.h>
#include <stdio.h>
#include <string.h>
static volatile sig_atomic_t usr1;
static void on_usr1(int s) { (void)s; usr1++; }
int main(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    char line[256];
    printf("ready\n"); fflush(stdout);
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        printf("got %s usr1=%d\n", line, (int)usr1); fflush(stdout);
    }
    return 0;
}
"#;

/// A signal that reaches a thread while kerf holds it is held (to be handed back exactly);
/// kerf's calls in that thread still go through the restorer, so a kerf killed after them
/// leaves the program running. Single-stepped as they were, those calls left the thread in
/// the step's SIGTRAP stop with the trap flag set, and the program died of SIGTRAP when kerf
/// was killed (python3.11 with a 2 ms SIGALRM under `kerf jit -p`, killed during its start;
/// here: every round). The tracer is this test binary run again
/// (`KERF_TEST_HELD_TRACER=PID`).
#[test]
fn a_tracer_killed_while_a_thread_holds_a_signal_leaves_the_program_running() {
    tracer_side("KERF_TEST_HELD_TRACER", |pid, t| {
        // SAFETY: kill cannot fail for the live program the test started.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR1) }, 0);
        assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(pid));
        assert_eq!(t.held_signals(pid), 1, "SIGUSR1 came first and is held");
    });
    let exe = build("counts_usr1", COUNTS_USR1, &[]);
    for round in 0..3 {
        let mut kid = Kid::start(&exe);
        let name = "a_tracer_killed_while_a_thread_holds_a_signal_leaves_the_program_running";
        run_tracer(name, "KERF_TEST_HELD_TRACER", &kid, round);
        kid.send("after\n");
        // The held signal itself dies with the tracer (the kernel does not deliver a
        // delivery stop's signal to a thread whose tracer exits): 0, or 1 had the kernel
        // dequeued it after the tracer's end. Never twice, and the program runs on.
        let line = kid.line();
        assert!(["got after usr1=0", "got after usr1=1"].contains(&line.as_str()), "{line}");
        let (rest, code) = kid.finish();
        assert_eq!((rest, code), (vec![], 0), "round {round}");
    }
}

/// The real kernel, except that once armed this process kills itself (SIGKILL, as a user
/// kills kerf) right after its `at`-th request that changes or learns a thread's state: a
/// resume, registers, memory, a signal or a mask written, a stop seen.
struct DiesAt {
    real: ptrace::RealTraceSys,
    armed: std::sync::atomic::AtomicBool,
    count: std::sync::atomic::AtomicUsize,
    at: usize,
}

impl DiesAt {
    fn tick<T>(&self, r: std::io::Result<T>) -> std::io::Result<T> {
        use std::sync::atomic::Ordering::SeqCst;
        if self.armed.load(SeqCst) && self.count.fetch_add(1, SeqCst) + 1 == self.at {
            // SAFETY: kill and getpid cannot fail here; this process ends now.
            unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
        }
        r
    }
}

impl ptrace::TraceSys for DiesAt {
    fn seize(&self, tid: i32, o: i32) -> std::io::Result<()> {
        self.tick(self.real.seize(tid, o))
    }
    fn interrupt(&self, tid: i32) -> std::io::Result<()> {
        self.tick(self.real.interrupt(tid))
    }
    fn single_step(&self, tid: i32, s: i32) -> std::io::Result<()> {
        self.tick(self.real.single_step(tid, s))
    }
    fn syscall(&self, tid: i32, s: i32) -> std::io::Result<()> {
        self.tick(self.real.syscall(tid, s))
    }
    fn detach(&self, tid: i32, s: i32) -> std::io::Result<()> {
        self.tick(self.real.detach(tid, s))
    }
    fn cont(&self, tid: i32, s: i32) -> std::io::Result<()> {
        self.tick(self.real.cont(tid, s))
    }
    fn get_regs(&self, tid: i32) -> std::io::Result<ptrace::Regs> {
        self.real.get_regs(tid)
    }
    fn set_regs(&self, tid: i32, r: &ptrace::Regs) -> std::io::Result<()> {
        self.tick(self.real.set_regs(tid, r))
    }
    fn get_siginfo(&self, tid: i32) -> std::io::Result<ptrace::SigInfo> {
        self.real.get_siginfo(tid)
    }
    fn set_siginfo(&self, tid: i32, i: &ptrace::SigInfo) -> std::io::Result<()> {
        self.tick(self.real.set_siginfo(tid, i))
    }
    fn get_sigmask(&self, tid: i32) -> std::io::Result<u64> {
        self.real.get_sigmask(tid)
    }
    fn set_sigmask(&self, tid: i32, m: u64) -> std::io::Result<()> {
        self.tick(self.real.set_sigmask(tid, m))
    }
    fn event_msg(&self, tid: i32) -> std::io::Result<u64> {
        self.real.event_msg(tid)
    }
    fn wait_nohang(&self, tid: i32) -> std::io::Result<Option<i32>> {
        match self.real.wait_nohang(tid) {
            Ok(Some(s)) => self.tick(Ok(Some(s))),
            other => other,
        }
    }
    fn queue_signal(&self, p: i32, tid: i32, i: &ptrace::SigInfo) -> std::io::Result<()> {
        self.tick(self.real.queue_signal(p, tid, i))
    }
    fn list_threads(&self, p: i32) -> std::io::Result<Vec<i32>> {
        self.real.list_threads(p)
    }
    fn read_text(&self, p: &Path) -> std::io::Result<String> {
        self.real.read_text(p)
    }
    fn read_bytes(&self, p: &Path) -> std::io::Result<Vec<u8>> {
        self.real.read_bytes(p)
    }
    fn read_mem(&self, p: i32, a: RemoteAddr, b: &mut [u8]) -> std::io::Result<usize> {
        self.real.read_mem(p, a, b)
    }
    fn write_mem(&self, p: i32, a: RemoteAddr, d: &[u8]) -> std::io::Result<usize> {
        self.tick(self.real.write_mem(p, a, d))
    }
    fn map_shared(
        &self,
        p: i32,
        fd: i32,
        len: usize,
    ) -> std::io::Result<(*mut u8, Option<std::fs::File>)> {
        self.real.map_shared(p, fd, len)
    }
    unsafe fn unmap_local(&self, p: *mut u8, len: usize) {
        // SAFETY: passed through unchanged from the caller, who guarantees it.
        unsafe { self.real.unmap_local(p, len) }
    }
    fn self_pid(&self) -> i32 {
        self.real.self_pid()
    }
    fn seccomp_filter(&self, tid: i32, index: usize) -> std::io::Result<Option<Vec<u8>>> {
        self.real.seccomp_filter(tid, index)
    }
}

/// What the tracer of [`a_tracer_killed_at_any_point_of_an_injected_call_harms_nothing`]
/// does when it is not killed first: it exits with this code, having made every call.
const MADE_EVERY_CALL: i32 = 3;

/// In the tracer's run of a kill-point test (`KERF_TEST_TRACER` the program's pid,
/// `KERF_TEST_DIE_AT` the kill point): stop the program, arm [`DiesAt`], run `work`, and exit
/// with [`MADE_EVERY_CALL`] without detaching (as if killed after the last request). Returns
/// without doing anything in the test's own run.
fn tracer_dying_at(work: impl FnOnce(i32, &mut Tracee)) {
    let (Ok(pid), Ok(at)) = (std::env::var("KERF_TEST_TRACER"), std::env::var("KERF_TEST_DIE_AT"))
    else {
        return;
    };
    let pid: i32 = pid.parse().expect("a pid");
    let sys = std::sync::Arc::new(DiesAt {
        real: ptrace::RealTraceSys::new(),
        armed: false.into(),
        count: 0.into(),
        at: at.parse().expect("a count"),
    });
    let mut t = Tracee::stop_all_with(pid, sys.clone(), Duration::from_secs(5)).expect("stop");
    sys.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    work(pid, &mut t);
    std::process::exit(MADE_EVERY_CALL);
}

/// Run test `name`'s tracer ([`tracer_dying_at`]) on a new `exe` killed at its first, second,
/// ... request until it gets to its end; after each kill `after` checks the program (its
/// pid), and the program must answer its `end` line exactly as without kerf. At least
/// `least` kill points.
fn every_kill_point(name: &str, exe: &Path, least: usize, after: &dyn Fn(i32, usize)) {
    let want = {
        let mut kid = Kid::start(exe);
        kid.send("end\n");
        kid.finish()
    };
    assert_eq!(want.1, 0);
    let me = std::env::current_exe().expect("this test binary");
    for at in 1..=2000 {
        let mut kid = Kid::start(exe);
        let pid = kid.pid();
        let tracer = Command::new(&me)
            .args(["--exact", name, "--nocapture", "--test-threads=1"])
            .env("KERF_TEST_TRACER", pid.to_string())
            .env("KERF_TEST_DIE_AT", at.to_string())
            .output()
            .expect("run the tracer");
        use std::os::unix::process::ExitStatusExt;
        let ended = tracer.status.code() == Some(MADE_EVERY_CALL);
        assert!(
            ended || tracer.status.signal() == Some(libc::SIGKILL),
            "kill point {at}: the tracer failed: {:?} {}",
            tracer.status,
            String::from_utf8_lossy(&tracer.stderr)
        );
        after(pid, at);
        // The program, no longer traced, answers as without kerf.
        let stdin = kid.stdin.as_mut().expect("stdin open");
        if stdin.write_all(b"end\n").and_then(|()| stdin.flush()).is_err() {
            panic!("killed at request {at}: the program ended: {:?}", kid.child.wait());
        }
        let (rest, status) = kid.finish_status();
        assert_eq!((rest, status.code().unwrap_or(-1)), want, "killed at request {at}: {status:?}");
        if ended {
            let killed = at - 1;
            assert!(killed >= least, "only {killed} kill points: the work was not all done");
            eprintln!("{killed} kill points, the program right after each");
            return;
        }
    }
    panic!("the tracer never got to its end");
}

/// kerf killed at *any* point of its injected system calls leaves the program running
/// correctly. The tracer (this test binary run again, see [`tracer_dying_at`]) stops the
/// program, makes a call on the leader (placing the restorer after the vDSO's image), then
/// one on every thread, and is killed right after its N-th state-changing request (see
/// [`DiesAt`]); N goes from 1 until the tracer gets to the end. The program: its main thread
/// blocked in `read` (an interrupted call the kernel must restart), four threads in
/// `nanosleep` (restarted through `restart_syscall`) and four computing. After each kill it
/// must answer exactly as without kerf. (On a kernel whose vDSO has no room after its image,
/// the restorer's own page is mapped by a single-stepped call, which this does not cover.)
#[test]
fn a_tracer_killed_at_any_point_of_an_injected_call_harms_nothing() {
    tracer_dying_at(|pid, t| {
        assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(pid));
        for tid in t.threads().to_vec() {
            assert_eq!(
                t.syscall_on(tid, libc::SYS_gettid, [0; 6]).expect("gettid"),
                i64::from(tid)
            );
        }
    });
    let name = "a_tracer_killed_at_any_point_of_an_injected_call_harms_nothing";
    every_kill_point(name, &build("threads", THREADS, &[]), 20, &|_, _| {});
}

/// kerf killed at any point of its single-steps (a JIT brings threads out of its cache so)
/// leaves the program running correctly: each step ends in a SIGTRAP stop with the trap flag
/// set, which a dying tracer leaves to the program, and SIGTRAP's default action would end
/// it: the trap guard takes it. The tracer steps every thread but the leader (blocked in `read`) twice, killed at each of
/// its requests in turn as in [`a_tracer_killed_at_any_point_of_an_injected_call_harms_nothing`].
/// One of the threads blocks every signal (SIGTRAP too, which kerf unblocks for its steps).
#[test]
fn a_tracer_killed_at_any_point_of_a_single_step_harms_nothing() {
    tracer_dying_at(|pid, t| {
        for tid in t.threads().to_vec().into_iter().filter(|&tid| tid != pid) {
            for _ in 0..2 {
                t.step(tid).expect("step");
            }
        }
    });
    let name = "a_tracer_killed_at_any_point_of_a_single_step_harms_nothing";
    every_kill_point(name, &build("threads_blocking", THREADS, &["-DBLOCK_ALL"]), 50, &|_, _| {});
}

/// Check, after a tracer of `pid` was killed at request `at`, that its main thread's mask
/// is the program's own again (nothing blocked). (Its handler blocks SIGALRM while it runs,
/// every few microseconds: a mask with nothing blocked must be seen at least once.)
fn mask_as_it_was(pid: i32, at: usize) {
    let blocked = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/status"))
            .expect("the thread's status");
        let hex = status.lines().find_map(|l| l.strip_prefix("SigBlk:")).expect("SigBlk");
        u64::from_str_radix(hex.trim(), 16).expect("hex")
    };
    let mut last = 0;
    for _ in 0..2000 {
        last = blocked();
        if last == 0 {
            return;
        }
        std::thread::sleep(Duration::from_micros(500));
    }
    panic!("killed at request {at}: the thread's mask stays {last:#x}");
}

/// kerf killed at any point of single-steps that hold the program's signals back (its 10 us
/// timer comes first, see [`a_step_holds_back_the_programs_timer_signal`]) leaves the
/// stepped thread's mask as the program had it: the trap guard puts it back (and the
/// restorer's stub, for the injected call that puts the guard in, which holds them too).
/// Before it did, a kill there left the thread with its asynchronous signals blocked for
/// good.
#[test]
fn a_tracer_killed_in_steps_that_hold_signals_leaves_the_mask_as_it_was() {
    tracer_dying_at(|pid, t| {
        for _ in 0..12 {
            t.step(pid).expect("step");
        }
    });
    let name = "a_tracer_killed_in_steps_that_hold_signals_leaves_the_mask_as_it_was";
    every_kill_point(name, &build("timer_loop", TIMER_LOOP, &[]), 50, &mask_as_it_was);
}

/// The same for injected calls: kerf killed at any point of calls that hold the program's
/// signals back leaves the thread's mask as it was (the restorer's stub puts it back).
#[test]
fn a_tracer_killed_in_calls_that_hold_signals_leaves_the_mask_as_it_was() {
    tracer_dying_at(|pid, t| {
        for _ in 0..8 {
            let r = t.syscall_on(pid, libc::SYS_getpid, [0; 6]).expect("getpid");
            assert_eq!(r, i64::from(pid));
        }
    });
    let name = "a_tracer_killed_in_calls_that_hold_signals_leaves_the_mask_as_it_was";
    every_kill_point(name, &build("timer_loop", TIMER_LOOP, &[]), 50, &mask_as_it_was);
}

/// A program that raises SIGTRAP on the line `trap` (with a handler that counts them if run
/// with the argument `handler`, ignored with `ignore`), echoes every line with that count, and
/// keeps a thread computing for kerf to step.
const TRAPS: &str = r#"
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
static volatile sig_atomic_t traps;
static atomic_int stop_flag;
static void on_trap(int s) { (void)s; traps++; }
static void *spin(void *a) {
    (void)a;
    while (!atomic_load(&stop_flag)) for (volatile int k = 0; k < 1000; k++);
    return NULL;
}
int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "handler")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_trap;
        sigaction(SIGTRAP, &sa, NULL);
    }
    if (argc > 1 && !strcmp(argv[1], "ignore")) signal(SIGTRAP, SIG_IGN);
    pthread_t t;
    pthread_create(&t, NULL, spin, NULL);
    printf("ready\n"); fflush(stdout);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = 0;
        if (!strcmp(line, "trap")) raise(SIGTRAP);
        printf("got %s traps=%d\n", line, (int)traps); fflush(stdout);
    }
    atomic_store(&stop_flag, 1);
    pthread_join(t, NULL);
    return 0;
}
"#;

/// Whether process `pid` has a handler for SIGTRAP (`SigCgt`).
fn catches_sigtrap(pid: i32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let hex = status.lines().find_map(|l| l.strip_prefix("SigCgt:")).expect("SigCgt");
    u64::from_str_radix(hex.trim(), 16).expect("hex") & (1 << (libc::SIGTRAP - 1)) != 0
}

/// Send `trap` to `kid` and check that it dies of SIGTRAP, as it does without kerf.
fn dies_of_its_trap(mut kid: Kid) {
    kid.send("trap\n");
    let status = kid.child.wait().expect("wait");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGTRAP), "{status:?}");
}

/// While kerf steps a thread, SIGTRAP's action is its guard, and once it lets the threads go
/// the program's own is back: the default (the program's `raise(SIGTRAP)` ends it as
/// before), or its handler, which no guard replaces. A kerf killed after its steps leaves the
/// guard on: the program runs on, and its own SIGTRAP still does what the program's action
/// says (the default ends it; ignored, it goes on); another tracer's calls and steps go
/// through the restorer the killed one left. (The tracer of those parts is this test binary
/// run again, `KERF_TEST_GUARD_TRACER=PID`.)
#[test]
fn the_trap_guard_is_on_only_while_kerf_steps_and_leaves_the_programs_traps_alone() {
    tracer_side("KERF_TEST_GUARD_TRACER", |pid, t| {
        let worker = *t.threads().iter().find(|&&tid| tid != pid).expect("a worker");
        t.step(worker).expect("step");
    });
    let exe = build("traps", TRAPS, &[]);
    let mut kid = Kid::start(&exe);
    let pid = kid.pid();
    assert!(!catches_sigtrap(pid), "the program leaves SIGTRAP to the default");
    for round in 0..2 {
        let mut t = stop(pid);
        let worker = *t.threads().iter().find(|&&tid| tid != pid).expect("a worker");
        t.step(worker).expect("step");
        assert!(catches_sigtrap(pid), "round {round}: the guard is on while the threads are held");
        t.step(worker).expect("step");
        t.resume_detach().expect("resume");
        assert!(!catches_sigtrap(pid), "round {round}: the default is back");
    }
    kid.send("a\n");
    assert_eq!(kid.line(), "got a traps=0");
    dies_of_its_trap(kid);

    let mut kid = Kid::start(&exe);
    let name = "the_trap_guard_is_on_only_while_kerf_steps_and_leaves_the_programs_traps_alone";
    run_tracer(name, "KERF_TEST_GUARD_TRACER", &kid, 0);
    assert!(catches_sigtrap(kid.pid()), "the guard stays after a killed tracer");
    // Another tracer makes its calls through the restorer the killed one left, and steps.
    let pid = kid.pid();
    let mut t = stop(pid);
    assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(pid));
    let worker = *t.threads().iter().find(|&&tid| tid != pid).expect("a worker");
    t.step(worker).expect("step");
    t.resume_detach().expect("resume");
    kid.send("b\n");
    assert_eq!(kid.line(), "got b traps=0");
    dies_of_its_trap(kid);

    let mut kid = Kid::start_with(&exe, &["ignore"]);
    run_tracer(name, "KERF_TEST_GUARD_TRACER", &kid, 1);
    assert!(catches_sigtrap(kid.pid()), "the guard stays after a killed tracer");
    kid.send("trap\n");
    assert_eq!(kid.line(), "got trap traps=0", "ignored, as the program asked");
    let (rest, code) = kid.finish();
    assert_eq!((rest, code), (vec![], 0));

    let mut kid = Kid::start_with(&exe, &["handler"]);
    let pid = kid.pid();
    let mut t = stop(pid);
    let worker = *t.threads().iter().find(|&&tid| tid != pid).expect("a worker");
    t.step(worker).expect("step");
    t.resume_detach().expect("resume");
    kid.send("trap\n");
    assert_eq!(kid.line(), "got trap traps=1", "the program's handler, as it set it");
    let (rest, code) = kid.finish();
    assert_eq!((rest, code), (vec![], 0));
}
