//! Errors of the OS layer about processes. Each variant carries its context as data (the
//! process, the thread, the operation, the address, the file, the OS's own error) and says it
//! in one line, so that the CLI can print it as is and callers can match on what happened.

use kerf_analysis::image::maps::MapsError;
use kerf_arch::RemoteAddr;
use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum TargetError {
    /// No process with this PID (or it exited while kerf was looking at it).
    NoSuchProcess { pid: i32 },
    /// The PID names a kernel thread: it has no user-space code to instrument.
    KernelThread { pid: i32 },
    /// The process has exited and waits for its parent to reap it.
    Zombie { pid: i32 },
    /// The kernel refused (EACCES/EPERM) operation `op` (`read`, `list`, `map`) on `path`:
    /// reading another user's process needs root or ptrace access (see
    /// /proc/sys/kernel/yama/ptrace_scope).
    PermissionDenied { pid: i32, op: &'static str, path: PathBuf },
    /// Any other I/O failure of operation `op` on `path`.
    Io { pid: i32, op: &'static str, path: PathBuf, source: io::Error },
    /// /proc/PID/maps has a line kerf's parser does not understand.
    Maps { pid: i32, source: MapsError },
    /// `PTRACE_SEIZE` was refused (EPERM) and no other tracer holds the thread: kerf lacks
    /// the right to trace it (not root, another user's process, or Yama's ptrace_scope).
    PtraceDenied { pid: i32, tid: i32 },
    /// Another tracer (a debugger, strace, another kerf) already traces thread `tid`.
    AlreadyTraced { pid: i32, tid: i32, tracer: i32 },
    /// kerf was asked to stop its own thread group.
    TraceSelf { pid: i32 },
    /// A ptrace request, a wait or another system call about one thread failed.
    Ptrace { pid: i32, tid: i32, op: &'static str, source: io::Error },
    /// A thread did not reach a ptrace-stop in time (uninterruptible sleep, vfork parent).
    StopTimeout { pid: i32, tid: i32, op: &'static str, waited_ms: u64 },
    /// A thread exited while kerf needed it stopped.
    ThreadExited { pid: i32, tid: i32, op: &'static str },
    /// `tid` is not a stopped thread of this tracee.
    NotStopped { pid: i32, tid: i32 },
    /// A system call was to be injected into thread `tid`, which is stopped inside clone(2)
    /// (its registers are the kernel's until the call returns).
    InsideClone { pid: i32, tid: i32 },
    /// A ptrace-stop kerf cannot interpret (raw wait status).
    UnexpectedStop { pid: i32, tid: i32, op: &'static str, status: i32 },
    /// Reading or writing target memory through /proc/PID/mem failed or was short.
    Memory {
        pid: i32,
        write: bool,
        addr: RemoteAddr,
        len: usize,
        done: usize,
        source: Option<io::Error>,
    },
    /// A system call injected into the target returned an error.
    Injected { pid: i32, tid: i32, call: &'static str, errno: i32 },
    /// No `syscall` instruction (0f 05) in any executable mapping of the target.
    NoSyscallInstruction { pid: i32 },
    /// Thread `tid`'s seccomp filters (or strict mode) would answer system call `nr` with
    /// `action` (kill, SIGSYS, an error, ...): kerf did not make it.
    Seccomp { pid: i32, tid: i32, nr: i64, action: crate::seccomp::Action },
    /// No free gap of `len` bytes in the address window `lo..hi` of the target.
    NoRoom { pid: i32, lo: RemoteAddr, hi: RemoteAddr, len: u64 },
    /// A single-step over an injected `syscall` (operation `op`) kept being interrupted by
    /// signals (`stops` of them) and never completed.
    StepInterrupted { pid: i32, tid: i32, op: &'static str, stops: usize },
    /// A single-step over an injected `syscall` ended at `pc`, not right after it.
    StepMissed { pid: i32, tid: i32, op: &'static str, pc: RemoteAddr },
    /// Starting a command failed (no process exists, so [`TargetError::pid`] is 0).
    Spawn { program: String, source: io::Error },
    /// A command kerf launched ended (raw wait `status`) before reaching its entry point.
    ExitedBeforeEntry { pid: i32, status: i32 },
    /// A command kerf launched stopped with `signal` where kerf expected the stop after
    /// `execve` (SIGTRAP).
    NotStoppedAtExec { pid: i32, signal: i32 },
    /// Claiming the process for this kerf failed in `op` (`socket`, `bind` of `name`).
    Claim { pid: i32, op: &'static str, name: String, source: io::Error },
    /// Waiting for a launched process to finish loading its libraries timed out.
    LoadTimeout { pid: i32, waited_ms: u64 },
    /// A launched process held at its entry point is no longer in kerf's hold loop.
    HoldLost { pid: i32, pc: RemoteAddr },
    /// Another kerf instruments this process (its pid, when kerf can tell).
    OtherKerf { pid: i32, kerf: Option<i32> },
}

impl TargetError {
    /// Classify an I/O error from operation `op` on `path` of process `pid`.
    pub(crate) fn from_io(
        pid: i32,
        op: &'static str,
        path: PathBuf,
        source: io::Error,
    ) -> TargetError {
        const ESRCH: i32 = 3;
        if source.kind() == io::ErrorKind::PermissionDenied {
            return TargetError::PermissionDenied { pid, op, path };
        }
        if source.raw_os_error() == Some(ESRCH) {
            return TargetError::NoSuchProcess { pid };
        }
        TargetError::Io { pid, op, path, source }
    }

    pub fn pid(&self) -> i32 {
        match self {
            TargetError::NoSuchProcess { pid }
            | TargetError::KernelThread { pid }
            | TargetError::Zombie { pid }
            | TargetError::PermissionDenied { pid, .. }
            | TargetError::Io { pid, .. }
            | TargetError::Maps { pid, .. }
            | TargetError::PtraceDenied { pid, .. }
            | TargetError::AlreadyTraced { pid, .. }
            | TargetError::TraceSelf { pid }
            | TargetError::Ptrace { pid, .. }
            | TargetError::StopTimeout { pid, .. }
            | TargetError::ThreadExited { pid, .. }
            | TargetError::NotStopped { pid, .. }
            | TargetError::InsideClone { pid, .. }
            | TargetError::UnexpectedStop { pid, .. }
            | TargetError::Memory { pid, .. }
            | TargetError::Injected { pid, .. }
            | TargetError::NoSyscallInstruction { pid }
            | TargetError::Seccomp { pid, .. }
            | TargetError::NoRoom { pid, .. }
            | TargetError::StepInterrupted { pid, .. }
            | TargetError::StepMissed { pid, .. }
            | TargetError::ExitedBeforeEntry { pid, .. }
            | TargetError::NotStoppedAtExec { pid, .. }
            | TargetError::Claim { pid, .. }
            | TargetError::LoadTimeout { pid, .. }
            | TargetError::HoldLost { pid, .. }
            | TargetError::OtherKerf { pid, .. } => *pid,
            TargetError::Spawn { .. } => 0,
        }
    }
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::NoSuchProcess { pid } => write!(f, "process {pid} does not exist"),
            TargetError::OtherKerf { pid, kerf } => {
                let who = kerf.map_or("another kerf (starting up)".to_string(), |k| {
                    format!("another kerf (pid {k})")
                });
                write!(
                    f,
                    "process {pid} is already instrumented by {who}; one kerf at a time can \
                     instrument a process: stop that one first"
                )
            }
            TargetError::KernelThread { pid } => write!(
                f,
                "process {pid} is a kernel thread: it has no user-space code (use --kernel for \
                 the kernel)"
            ),
            TargetError::Zombie { pid } => write!(
                f,
                "process {pid} is a zombie: it has exited and its parent has not reaped it yet"
            ),
            TargetError::PermissionDenied { op, path, .. } => {
                write!(f, "no permission to {op} {} (need root or ptrace access)", path.display())
            }
            TargetError::Io { pid, op, path, source } => {
                write!(f, "cannot {op} {} (process {pid}): {source}", path.display())?;
                // (A user trial: `ulimit -v 1500000`, which kerf and the command it launches
                // share, left room for the program but not for kerf's side of the cache.)
                if *op == "map" && source.raw_os_error() == Some(libc::ENOMEM) {
                    write!(
                        f,
                        " (out of memory, or an address-space limit such as `ulimit -v` too \
                         small for kerf's mappings of the target's memory: raise it)"
                    )?;
                }
                Ok(())
            }
            TargetError::Maps { pid, source } => {
                write!(f, "cannot parse /proc/{pid}/maps: {source}")
            }
            TargetError::PtraceDenied { pid, tid } => write!(
                f,
                "no permission to ptrace process {pid} (thread {tid}): run kerf as root or as \
                 the process's user, and check /proc/sys/kernel/yama/ptrace_scope"
            ),
            TargetError::AlreadyTraced { pid, tid, tracer } => write!(
                f,
                "process {pid} is already being traced (by a debugger?): thread {tid} has \
                 tracer (thread) {tracer}"
            ),
            TargetError::TraceSelf { pid } => {
                write!(f, "process {pid} is kerf itself and cannot be stopped by it")
            }
            TargetError::Ptrace { pid, tid, op, source } => {
                write!(f, "{op} failed for thread {tid} of process {pid}: {source}")
            }
            TargetError::StopTimeout { pid, tid, op, waited_ms } => write!(
                f,
                "thread {tid} of process {pid} did not stop within {waited_ms} ms during {op} \
                 (uninterruptible sleep?)"
            ),
            TargetError::ThreadExited { pid, tid, op } => {
                write!(f, "thread {tid} of process {pid} exited during {op}")
            }
            TargetError::InsideClone { pid, tid } => write!(
                f,
                "process {pid}: thread {tid} is stopped inside clone(2): no system call can be \
                 injected there"
            ),
            TargetError::NotStopped { pid, tid } => {
                write!(f, "thread {tid} is not a thread of process {pid} stopped by kerf")
            }
            TargetError::UnexpectedStop { pid, tid, op, status } => write!(
                f,
                "unexpected wait status {status:#x} of thread {tid} of process {pid} during {op}"
            ),
            TargetError::Memory { pid, write, addr, len, done, source } => {
                let verb = if *write { "write" } else { "read" };
                match source {
                    Some(e) => {
                        write!(f, "cannot {verb} {len} bytes at {addr} in process {pid}: {e}")
                    }
                    None => write!(
                        f,
                        "cannot {verb} {len} bytes at {addr} in process {pid}: only {done} \
                         transferred (unmapped memory?)"
                    ),
                }
            }
            TargetError::Injected { pid, tid, call, errno } => write!(
                f,
                "injected {call} in thread {tid} of process {pid} failed: {}",
                io::Error::from_raw_os_error(*errno)
            ),
            TargetError::NoSyscallInstruction { pid } => write!(
                f,
                "no syscall instruction (0f 05) in any executable mapping of process {pid}"
            ),
            TargetError::Seccomp { pid, tid, nr, action } => write!(
                f,
                "process {pid}: thread {tid} runs under seccomp, whose answer to system call \
                 {nr}, which kerf needs to make there, is to {action}: kerf did not make it"
            ),
            TargetError::NoRoom { pid, lo, hi, len } => {
                write!(f, "no free gap of {len} bytes between {lo} and {hi} in process {pid}")
            }
            TargetError::StepInterrupted { pid, tid, op, stops } => write!(
                f,
                "{op} in thread {tid} of process {pid} did not complete: {stops} signals \
                 interrupted its single-step"
            ),
            TargetError::StepMissed { pid, tid, op, pc } => write!(
                f,
                "{op} in thread {tid} of process {pid}: the single-step ended at {pc}, not after \
                 the syscall instruction"
            ),
            TargetError::Spawn { program, source } => write!(f, "cannot start {program}: {source}"),
            TargetError::ExitedBeforeEntry { pid, status } => write!(
                f,
                "process {pid} ended before reaching its entry point (wait status {status:#x})"
            ),
            TargetError::NotStoppedAtExec { pid, signal } => {
                write!(f, "process {pid} stopped by signal {signal} instead of at its execve")
            }
            TargetError::Claim { pid, op, name, source } => {
                write!(f, "cannot claim process {pid} for this kerf: {op} {name}: {source}")
            }
            TargetError::LoadTimeout { pid, waited_ms } => write!(
                f,
                "process {pid} did not finish loading its libraries within {waited_ms} ms"
            ),
            TargetError::HoldLost { pid, pc } => write!(
                f,
                "process {pid} left the loop kerf held it in at its entry point (its PC is {pc})"
            ),
        }
    }
}

impl std::error::Error for TargetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TargetError::Io { source, .. }
            | TargetError::Ptrace { source, .. }
            | TargetError::Spawn { source, .. }
            | TargetError::Claim { source, .. } => Some(source),
            TargetError::Maps { source, .. } => Some(source),
            TargetError::Memory { source: Some(source), .. } => Some(source),
            _ => None,
        }
    }
}
