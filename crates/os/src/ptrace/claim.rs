//! One kerf per process (DESIGN.md §5; issue 9, item 5). Two kerfs on one process corrupt
//! each other: the second takes the first's jumps for original bytes, and removal leaves
//! splices and heaps behind or puts back a SIGTRAP action that is no longer its own. So a
//! kerf claims a process before it changes anything in it, and refuses one another kerf holds:
//!
//! 1. **A lock with no file behind it**: an abstract Unix socket named after the process (pid
//!    and start time, so a reused pid is another name) is bound for as long as the claim
//!    lives. Two kerfs starting at once cannot both bind it, and the kernel releases it when
//!    kerf exits, however it exits (SIGKILL included): no stale lock file, no directory any
//!    user must be able to write.
//! 2. **What the process shows**: kerf's shared data heaps are memfds named `kerf-<kerf pid>`,
//!    so /proc/PID/maps shows `/memfd:kerf-N (deleted)`. A mapping of a kerf that is still
//!    running (pid N alive, with kerf's own command name) is a claim too: it names the other
//!    kerf, and covers kerfs the socket cannot see (another network namespace). A mapping of
//!    a kerf that is gone (SIGKILLed) does not block: its heaps are harmless once nothing
//!    runs in them, and any splice it left is caught by the check of the target's bytes
//!    against the file's before each splice (the point is refused, never spliced over).
//!
//! These are direct system calls, not through [`super::TraceSys`]: nothing here touches the
//! target, and tests exercise it with real processes.

use crate::error::TargetError;
use std::os::fd::{FromRawFd, OwnedFd};

/// A claim on a process; dropping it lets another kerf in.
#[derive(Debug)]
pub struct Claim {
    _socket: OwnedFd,
}

/// The start time of `pid` in clock ticks since boot (field 22 of /proc/PID/stat).
fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields follow the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

fn comm(pid: i32) -> Option<String> {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).ok().map(|s| s.trim_end().to_string())
}

/// The pid of a running kerf, other than this one, whose shared heap is mapped in `pid`.
pub fn other_kerf_in(pid: i32) -> Option<i32> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let me = std::process::id() as i32;
    let my_comm = comm(me);
    maps.lines()
        .filter_map(|l| l.split("/memfd:kerf-").nth(1))
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse::<i32>().ok())
        .find(|&k| k != me && comm(k).is_some() && comm(k) == my_comm)
}

/// Claim process `pid` for this kerf, or say which kerf already has it.
pub fn claim(pid: i32) -> Result<Claim, TargetError> {
    let start = start_time(pid).ok_or(TargetError::NoSuchProcess { pid })?;
    let other = |kerf| TargetError::OtherKerf { pid, kerf };
    // SAFETY: plain socket(2); the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(TargetError::Io { pid, op: "claim".into(), path: "socket".into(), source: e });
    }
    // SAFETY: a fresh descriptor nobody else owns.
    let socket = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_un is plain data.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    // Abstract namespace: a leading NUL, then the name (not NUL-terminated).
    let name = format!("kerf-os-{pid}-{start}");
    for (d, s) in addr.sun_path[1..].iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sa_family_t>() + 1 + name.len();
    // SAFETY: `addr` is a valid sockaddr_un of which the first `len` bytes are used.
    let r = unsafe {
        libc::bind(fd, (&addr as *const libc::sockaddr_un).cast(), len as libc::socklen_t)
    };
    if r != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EADDRINUSE) {
            return Err(other(other_kerf_in(pid)));
        }
        return Err(TargetError::Io { pid, op: "claim".into(), path: name.into(), source: e });
    }
    if let Some(k) = other_kerf_in(pid) {
        return Err(other(Some(k)));
    }
    Ok(Claim { _socket: socket })
}
