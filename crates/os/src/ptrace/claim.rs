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
//! What it reads of /proc goes through [`ProcSys`] (tested with a fake); the socket's two
//! system calls are made directly (nothing here touches the target) and tested with real
//! processes.

use crate::error::TargetError;
use crate::process::{self, ProcSys, RealSys};
use kerf_analysis::image::maps::parse_maps;
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::PathBuf;

/// A claim on a process; dropping it lets another kerf in.
#[derive(Debug)]
pub struct Claim {
    _socket: OwnedFd,
}

/// The pid of a running kerf, other than this one, whose shared heap is mapped in `pid`.
pub fn other_kerf_in(pid: i32) -> Option<i32> {
    other_kerf_in_with(&RealSys, pid, std::process::id() as i32)
}

/// [`other_kerf_in`] through `sys`, for the kerf whose pid is `me`: a mapping of
/// `/memfd:kerf-N` whose N is a live process with `me`'s command name.
pub fn other_kerf_in_with(sys: &dyn ProcSys, pid: i32, me: i32) -> Option<i32> {
    let text = sys.read_to_string(&PathBuf::from(format!("/proc/{pid}/maps"))).ok()?;
    let maps = parse_maps(&text).ok()?;
    let my_comm = process::comm(sys, me);
    maps.iter()
        .filter_map(|m| m.path.as_deref()?.strip_prefix("/memfd:kerf-"))
        .filter_map(|rest| rest.split(|c: char| !c.is_ascii_digit()).next()?.parse::<i32>().ok())
        .find(|&k| k != me && my_comm.is_some() && process::comm(sys, k) == my_comm)
}

/// Claim process `pid` for this kerf, or say which kerf already has it.
pub fn claim(pid: i32) -> Result<Claim, TargetError> {
    let start = process::start_time(&RealSys, pid).ok_or(TargetError::NoSuchProcess { pid })?;
    let other = |kerf| TargetError::OtherKerf { pid, kerf };
    // SAFETY: plain socket(2); the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(TargetError::Claim { pid, op: "socket", name: String::new(), source: e });
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
        return Err(TargetError::Claim { pid, op: "bind", name, source: e });
    }
    if let Some(k) = other_kerf_in(pid) {
        return Err(other(Some(k)));
    }
    Ok(Claim { _socket: socket })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::tests::FakeSys;

    /// Only a mapping of a live kerf (same command name as this one) names another kerf.
    #[test]
    fn other_kerf_from_the_maps() {
        let maps = "\
555500000000-555500010000 r-xp 00000000 08:01 5 /bin/app
7f0000000000-7f0000010000 rw-s 00000000 00:01 77 /memfd:kerf-300 (deleted)
7f0000010000-7f0000020000 rw-s 00000000 00:01 78 /memfd:kerf-400 (deleted)
7f0000020000-7f0000030000 rw-s 00000000 00:01 79 /memfd:kerf-200 (deleted)
";
        let sys = FakeSys::default()
            .file("/proc/9/maps", maps)
            .file("/proc/200/comm", "kerf\n")
            .file("/proc/300/comm", "bash\n")
            .file("/proc/400/comm", "kerf\n");
        // 300 is another program now (its pid reused); 400 is a kerf; 200 is this kerf.
        assert_eq!(other_kerf_in_with(&sys, 9, 200), Some(400));
        let gone = FakeSys::default().file("/proc/9/maps", maps).file("/proc/200/comm", "kerf\n");
        assert_eq!(other_kerf_in_with(&gone, 9, 200), None);
        assert_eq!(other_kerf_in_with(&FakeSys::default(), 9, 200), None);
    }
}
