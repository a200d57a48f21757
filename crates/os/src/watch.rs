//! What becomes of a process kerf instruments: whether it is still there, how it ended (its
//! exit code, or the signal that killed it), and whether it replaced its program (`exec`).
//!
//! kerf is not the parent of a process it attaches to, so it cannot wait for it. The exit
//! status then comes from a pidfd opened while the process lived: it polls readable when the
//! process ends, and `PIDFD_GET_INFO` with `PIDFD_INFO_EXIT` (Linux 6.15) gives the status
//! even after the parent reaped it. Before that, or on older kernels, a zombie's status is in
//! /proc/PID/stat. A command kerf launched is its child: its wait status says it all
//! ([`End::from_wait_status`]).
//!
//! What it reads of /proc goes through [`ProcSys`]; the pidfd's two system calls
//! (`pidfd_open`, the `PIDFD_GET_INFO` ioctl) and `poll` are made directly and tested
//! against real processes.

use crate::process::{self, state, ProcSys, RealSys, State};
use kerf_arch::RemoteAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How a process ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// It exited (`exit`, or a return from `main`) with this code.
    Exited(i32),
    /// A signal killed it.
    Killed { signal: i32, core_dumped: bool },
    /// It is gone, but its status could not be learnt.
    Unknown,
}

impl End {
    /// From a wait status as `waitpid` reports it (also the format of /proc/PID/stat's
    /// `exit_code` and of `pidfd_info.exit_code`).
    pub fn from_wait_status(st: i32) -> End {
        if libc::WIFEXITED(st) {
            End::Exited(libc::WEXITSTATUS(st))
        } else if libc::WIFSIGNALED(st) {
            End::Killed { signal: libc::WTERMSIG(st), core_dumped: libc::WCOREDUMP(st) }
        } else {
            End::Unknown
        }
    }

    /// "process 12 exited with code 3", "process 12 was killed by signal 11 (SIGSEGV)".
    pub fn describe(&self, pid: i32) -> String {
        match *self {
            End::Exited(code) => format!("process {pid} exited with code {code}"),
            End::Killed { signal, core_dumped } => format!(
                "process {pid} was killed by signal {signal} ({}){}",
                signal_name(signal),
                if core_dumped { ", core dumped" } else { "" }
            ),
            End::Unknown => format!("process {pid} exited (its exit status is unknown)"),
        }
    }
}

/// The name of a standard signal (`SIGSEGV`), or `SIGRTMIN+n`, or "unknown".
pub fn signal_name(signal: i32) -> String {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match signal {
        1..=31 => NAMES[signal as usize].to_string(),
        32..=64 => format!("SIGRTMIN+{}", signal - 32),
        _ => "unknown".to_string(),
    }
}

/// Wait up to `timeout` for descriptor `fd` to poll readable (a pidfd: its process ended);
/// whether it did. A sleeping loop that waits on its target's pidfd this way learns of the
/// end at once instead of at its next wake.
pub fn wait_readable(fd: std::os::fd::RawFd, timeout: Duration) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // (`ppoll`, to the nanosecond: `poll`'s milliseconds made a wait under one a spin.)
    let ts = libc::timespec {
        tv_sec: timeout.as_secs().min(i32::MAX as u64) as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one pollfd and one timespec on the stack, no signal mask; the kernel reads the
    // timespec and writes only the pollfd's `revents`.
    let n = unsafe { libc::ppoll(&mut p, 1, &ts, std::ptr::null()) };
    n > 0 && p.revents & (libc::POLLIN | libc::POLLHUP) != 0
}

/// `PIDFD_GET_INFO`: `_IOWR(0xFF, 11, struct pidfd_info)` with the first version of the
/// structure (64 bytes; the kernel accepts any size it knows).
const PIDFD_GET_INFO: u64 = (3 << 30) | (64 << 16) | (0xff << 8) | 11;
/// `PIDFD_INFO_EXIT`: ask for (and, in the answer, "here is") the exit status.
const PIDFD_INFO_EXIT: u64 = 1 << 3;
/// `exit_code` in `struct pidfd_info` (after mask, cgroupid and eleven u32 ids).
const PIDFD_INFO_EXIT_CODE: usize = 60;
/// How long a process that has ended is given for its status to show.
const STATUS_WAIT: Duration = Duration::from_millis(200);

/// Watches a process kerf is not the parent of.
pub struct ExitWatch {
    pid: i32,
    /// `None` when the kernel has no `pidfd_open` (before 5.3): /proc alone is read then.
    fd: Option<OwnedFd>,
    sys: Arc<dyn ProcSys>,
}

impl std::fmt::Debug for ExitWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExitWatch").field("pid", &self.pid).field("fd", &self.fd).finish()
    }
}

impl ExitWatch {
    /// Start watching `pid` (a live process: open this before doing anything to it, so that
    /// the pidfd is sure to name it and not a later process with its number).
    pub fn open(pid: i32) -> ExitWatch {
        ExitWatch::open_with(pid, Arc::new(RealSys))
    }

    /// [`ExitWatch::open`], reading /proc through `sys`.
    pub fn open_with(pid: i32, sys: Arc<dyn ProcSys>) -> ExitWatch {
        // SAFETY: pidfd_open takes two integers and returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        // SAFETY: a descriptor pidfd_open just returned, owned by nothing else.
        let fd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as i32) });
        ExitWatch { pid, fd, sys }
    }

    /// Whether the process still runs, from its pidfd (or /proc) alone: no `wait` call, so
    /// that the parent of a launched command can poll it while another of kerf's threads
    /// traces it (a `waitpid` without `__WNOTHREAD` would take that thread's ptrace stops).
    pub fn running(&self) -> bool {
        match &self.fd {
            Some(fd) => {
                let mut p = libc::pollfd { fd: fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
                // SAFETY: one pollfd, with a zero timeout.
                let n = unsafe { libc::poll(&mut p, 1, 0) };
                n <= 0 || p.revents & (libc::POLLIN | libc::POLLHUP) == 0
            }
            None => state(&*self.sys, self.pid) == State::Live,
        }
    }

    /// The pidfd's descriptor, if there is one: [`wait_readable`] on it ends when the
    /// process does. Valid while this watch lives.
    pub fn raw_fd(&self) -> Option<std::os::fd::RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// How the process ended, once it has; `None` while it runs.
    pub fn ended(&self) -> Option<End> {
        if self.running() {
            return None;
        }
        let deadline = Instant::now() + STATUS_WAIT;
        loop {
            let zombie = || process::zombie_status(&*self.sys, self.pid);
            if let Some(st) = self.pidfd_status().or_else(zombie) {
                return Some(End::from_wait_status(st));
            }
            if Instant::now() >= deadline {
                return Some(End::Unknown);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// The exit status the kernel keeps with the pidfd of an ended process (Linux 6.15).
    fn pidfd_status(&self) -> Option<i32> {
        let fd = self.fd.as_ref()?;
        let mut info = [0u8; 64];
        info[..8].copy_from_slice(&PIDFD_INFO_EXIT.to_le_bytes());
        // SAFETY: the kernel reads and writes at most the 64 bytes the request encodes.
        let r = unsafe { libc::ioctl(fd.as_raw_fd(), PIDFD_GET_INFO as _, info.as_mut_ptr()) };
        let mask = u64::from_le_bytes(info[..8].try_into().ok()?);
        if r != 0 || mask & PIDFD_INFO_EXIT == 0 {
            return None;
        }
        let at = PIDFD_INFO_EXIT_CODE;
        Some(i32::from_le_bytes(info[at..at + 4].try_into().ok()?))
    }
}

/// Whether process `pid` still has each of `addrs` (kerf's code heaps) inside an anonymous
/// read-execute mapping: an `exec` replaces every mapping, so kerf's heaps vanish with it.
/// (Not "the start of a mapping": the kernel merges two heaps that end up side by side into
/// one mapping.) `None` when its maps cannot be read or are empty (it is gone or going).
pub fn all_mapped(pid: i32, addrs: &[RemoteAddr]) -> Option<bool> {
    all_mapped_with(&RealSys, pid, addrs)
}

/// [`all_mapped`], reading /proc through `sys`.
pub fn all_mapped_with(sys: &dyn ProcSys, pid: i32, addrs: &[RemoteAddr]) -> Option<bool> {
    let path = std::path::PathBuf::from(format!("/proc/{pid}/maps"));
    let maps = kerf_analysis::image::maps::parse_maps(&sys.read_to_string(&path).ok()?).ok()?;
    if maps.is_empty() {
        return None;
    }
    // kerf's code heaps: anonymous private memory, or a memfd kerf made and the target maps
    // shared (a JIT's code room). The kernel names an anonymous mapping `[heap]` when the
    // program's brk range touches it, as it does when kerf's heap lies where the brk area of
    // the program's data would grow (python3.11's, in 2 of 28 runs; taken for an exec, the
    // probes were forgotten while in and the program died), or `[anon:NAME]` when it was
    // named: neither is a file.
    let anonymous =
        |p: &Option<String>| p.as_deref().is_none_or(|p| p == "[heap]" || p.starts_with("[anon:"));
    let kerf_memfd =
        |p: &Option<String>| p.as_deref().is_some_and(|p| p.starts_with("/memfd:kerf-"));
    let heaps: Vec<_> = maps
        .iter()
        .filter(|m| m.read && !m.write && m.exec)
        .filter(|m| (m.private && anonymous(&m.path)) || kerf_memfd(&m.path))
        .collect();
    Some(addrs.iter().all(|&a| heaps.iter().any(|m| m.contains(a))))
}

/// The program process `pid` runs now (/proc/PID/exe; see [`process::exe`]).
pub fn program(pid: i32) -> Option<String> {
    process::exe(&RealSys, pid)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn wait_statuses() {
        assert_eq!(End::from_wait_status(3 << 8), End::Exited(3));
        assert_eq!(End::from_wait_status(11), End::Killed { signal: 11, core_dumped: false });
        assert_eq!(End::from_wait_status(0x86), End::Killed { signal: 6, core_dumped: true });
        assert_eq!(
            End::Killed { signal: 11, core_dumped: false }.describe(7),
            "process 7 was killed by signal 11 (SIGSEGV)"
        );
        assert_eq!(End::Exited(0).describe(7), "process 7 exited with code 0");
        assert_eq!(signal_name(34), "SIGRTMIN+2");
    }

    /// kerf's code heaps are anonymous read-execute mappings; after an `exec` they are gone.
    #[test]
    fn heaps_mapped_or_gone() {
        use crate::process::tests::FakeSys;
        let maps = "\
555500000000-555500010000 r-xp 00000000 08:01 5 /bin/fake
7f0000000000-7f0000003000 r-xp 00000000 00:00 0
7f0000003000-7f0000004000 rw-p 00000000 00:00 0
";
        let sys = FakeSys::default().file("/proc/5/maps", maps);
        let r = RemoteAddr;
        assert_eq!(
            all_mapped_with(&sys, 5, &[r(0x7f00_0000_0000), r(0x7f00_0000_2fff)]),
            Some(true)
        );
        // Not in a file's code, not in writable memory, not past the end.
        for outside in [0x5555_0000_0000, 0x7f00_0000_3000, 0x7f00_0000_4000] {
            assert_eq!(all_mapped_with(&sys, 5, &[r(outside)]), Some(false), "{outside:#x}");
        }
        // The kernel names an anonymous mapping the brk range touches `[heap]`.
        let named = "\
555500000000-555500010000 r-xp 00000000 08:01 5 /bin/fake
555500010000-555502000000 r-xp 00000000 00:00 0                          [heap]
7f0000000000-7f0000003000 r-xp 00000000 00:00 0                          [anon:kerf]
";
        let sys = FakeSys::default().file("/proc/5/maps", named);
        let heaps = [r(0x5555_0001_0000), r(0x7f00_0000_0000)];
        assert_eq!(all_mapped_with(&sys, 5, &heaps), Some(true));
        assert_eq!(all_mapped_with(&FakeSys::default().file("/proc/5/maps", ""), 5, &[]), None);
        assert_eq!(all_mapped_with(&FakeSys::default(), 5, &[]), None);
    }

    /// A process this test's child (a shell) starts and reaps: not a child of the watcher.
    #[test]
    fn status_of_a_process_that_is_not_a_child() {
        let mut sh = Command::new("sh")
            .args(["-c", "sleep 0.3 & echo $!; wait $!; sleep 1"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(sh.stdout.take().unwrap()),
            &mut line,
        )
        .unwrap();
        let pid: i32 = line.trim().parse().unwrap();
        let w = ExitWatch::open(pid);
        assert_eq!(w.ended(), None);
        let deadline = Instant::now() + Duration::from_secs(5);
        let end = loop {
            if let Some(e) = w.ended() {
                break e;
            }
            assert!(Instant::now() < deadline, "never ended");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(end, End::Exited(0));
        sh.wait().unwrap();
    }

    /// A wait on a live process's pidfd lasts its timeout, even one under a millisecond (no
    /// spin), and one on a process that has ended returns at once, readable.
    #[test]
    fn a_pidfd_wait_lasts_until_the_end() {
        let mut child = Command::new("sleep").arg("0.2").spawn().unwrap();
        let w = ExitWatch::open(child.id() as i32);
        let fd = w.raw_fd().expect("pidfd_open");
        for d in [Duration::from_micros(600), Duration::from_millis(20)] {
            let t = Instant::now();
            assert!(!wait_readable(fd, d), "readable while it runs");
            assert!(t.elapsed() >= d, "{d:?} took {:?}", t.elapsed());
        }
        let t = Instant::now();
        assert!(wait_readable(fd, Duration::from_secs(5)), "its end");
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        child.wait().unwrap();
        assert!(wait_readable(fd, Duration::from_secs(5)));
    }
}
