//! Live control of a process (DESIGN.md §4 "Process"): stop every thread of a thread group
//! with ptrace, read and write its memory through /proc/PID/mem, run system calls inside it
//! (to map code and data heaps near its modules, or share memory with kerf), and let it go
//! again with no signal lost. One stop → work → resume is a *batch*; [`Pause`] says how long
//! the threads were held.
//!
//! Every system call goes through [`TraceSys`], so the logic here is tested with a fake
//! kernel (see the unit tests) as well as against real processes (tests/ptrace.rs).
//!
//! # Techniques, and why
//!
//! * **`PTRACE_SEIZE` + `PTRACE_INTERRUPT`**, not `PTRACE_ATTACH`: no SIGSTOP is sent, so a
//!   stop never turns into a job-control stop the target or its shell could see; group-stops
//!   and interrupt-stops are told apart from signal-delivery-stops by `PTRACE_EVENT_STOP`.
//!   Options: only `PTRACE_O_TRACECLONE` (threads created while kerf stops the others are
//!   attached by the kernel) and `PTRACE_O_TRACESYSGOOD` (see below). Never
//!   `PTRACE_O_EXITKILL`: kerf dying must not kill the target.
//! * **Rescanning /proc/PID/task** until a scan, made after every known thread is stopped,
//!   shows no new thread: a thread created before its creator was seized is found by the
//!   scan, one created after by `PTRACE_EVENT_CLONE`.
//! * **Signals are never lost** (while kerf lives). A signal that the kernel dequeues for a
//!   thread kerf holds is reported as a signal-delivery-stop. kerf records its siginfo and
//!   either leaves the thread in that stop (then `PTRACE_DETACH` delivers it) or, when it
//!   must run the thread (a call, a single-step), suppresses it and re-injects it at resume:
//!   the first one through `PTRACE_SETSIGINFO` + `PTRACE_DETACH(sig)` from a
//!   signal-delivery-stop (the one the thread is in, or that of a stand-in kerf queues for
//!   a thread it parked, see `enter_stand_in_stop`: exact siginfo), any further ones with
//!   `rt_tgsigqueueinfo` (same pid, uid and value; `si_code` becomes `SI_QUEUE` when the
//!   kernel forbids queueing the original one). Held ones die with a killed kerf.
//!   Signals still queued in the kernel are not touched: they arrive after the detach.
//! * **Injected system calls** run through a *restorer* kerf places in the process at its
//!   first call (see `restorer`: after the vDSO's image, which needs no call, or in a page
//!   of its own): the thread's registers are written on its stack below the red zone, the
//!   thread runs to the restorer's `syscall` under `PTRACE_SYSCALL` (its entry stop), then
//!   makes the call and is parked in an interrupt stop (`PTRACE_INTERRUPT`, `PTRACE_CONT`)
//!   before its next user instruction, where kerf reads the result and puts its registers
//!   back exactly (`PTRACE_SETREGS`, so that a thread that was inside `read` or `nanosleep`
//!   gets the restart the kernel had planned for it when it resumes: the restart is applied
//!   after the last ptrace-stop, from the restored `orig_rax`/`rax`; the injected call runs
//!   with `orig_rax = -1` so that the kernel's restart logic leaves its registers alone).
//!   kerf killed (SIGKILL) at any point of that leaves a thread that runs the call and then
//!   the restorer's code, which pops its registers back: nothing of kerf's stays in the
//!   thread. A syscall-stop is harmless to leave, under `PTRACE_O_TRACESYSGOOD`. The
//!   restorer is taken out when the threads are let go.
//! * **Where the restorer cannot serve** (mapping and unmapping its page, a stack with no
//!   room for the frame), the call executes an existing `syscall` instruction of the target
//!   (found once, in the vdso first) with `PTRACE_SINGLESTEP`. The step's trap leaves the
//!   thread in a SIGTRAP signal-delivery-stop with the trap flag set, which a tracer that
//!   dies leaves in place: the kernel would deliver the SIGTRAP and trap again. So the
//!   thread is then *parked* in an interrupt stop (`PTRACE_INTERRUPT`, `PTRACE_CONT` with no
//!   signal: the kernel takes the interrupt before it runs any of the thread's code), which
//!   a dying kerf leaves harmless. What remains there: kerf dying during such a call
//!   (between setting its registers and putting the thread's back, tens of microseconds)
//!   leaves the thread to run on with the call's registers.
//! * **Single-steps** ([`Tracee::step`], a JIT bringing a thread out of its code cache) end
//!   in the same SIGTRAP stop, and the thread runs with the trap flag between the request
//!   and the parking. While kerf steps, SIGTRAP's action is the restorer's *trap guard*
//!   (where the program has no handler of its own; the program's action goes back before
//!   the threads are let go), which takes the trap a dying kerf leaves and returns. A step or
//!   a call that a signal came first to holds the asynchronous signals back in the thread's
//!   mask; the thread and the program's mask are written beside the restorer first, and the
//!   guard (after a step) or the restorer's code (after a call) puts the mask back if kerf
//!   dies before it does.
//! * **Memory** goes through /proc/PID/mem, which writes through read-only code pages
//!   (copy-on-write, like a debugger's breakpoint) and costs one `pread`/`pwrite`.
//! * **Shared memory** is a memfd created *in the target* (injected `memfd_create`,
//!   `ftruncate`, `mmap`, `close`) and mapped by kerf through /proc/PID/fd/N. The other way
//!   round (the target opening /proc/KERF/fd/N) fails whenever the target may not ptrace kerf
//!   (kerf runs as root, the target does not) or lives in another PID namespace; kerf, being
//!   the target's tracer, can always open the target's descriptors.
//!
//! The kernel makes the attaching *thread* the tracer: every ptrace request must come from
//! the thread that called [`Tracee::stop_all`], so a [`Tracee`] is not `Send`.

mod claim;
mod layout;
mod mem;
mod restorer;
mod shared;
mod spawn;
mod sys;

/// The fake kernel the ptrace logic is tested on, for other crates' tests too (feature
/// `fake`).
#[cfg(any(test, feature = "fake"))]
pub mod fake;
#[cfg(test)]
mod tests;

pub use claim::{claim, other_kerf_in, Claim};
pub use layout::{window_near, within_reach, MARGIN, PAGE, REACH};
pub use mem::{RemoteMem, TargetMemory};
pub use shared::{FutexWaker, SharedMem};
pub use spawn::{
    spawn, spawn_at_entry, spawn_at_entry_with, wait_until_loaded, wait_until_loaded_with,
    EntryHold,
};
pub use sys::{RealTraceSys, Regs, RegsExt, SigInfo, TraceSys};

use crate::error::TargetError;
use kerf_analysis::image::maps::{parse_maps, Mapping};
use kerf_arch::RemoteAddr;
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long [`Tracee::stop_all`] waits for every thread to stop, and a single-step for its
/// trap, before giving up with [`TargetError::StopTimeout`].
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(5);

const PTRACE_EVENT_CLONE: i32 = 3;
const PTRACE_EVENT_STOP: i32 = 128;
const SI_QUEUE: i32 = -1;
const SI_TKILL: i32 = -6;
const MFD_CLOEXEC: u64 = 1;
/// The kernel-internal restart codes (-512 ..= -516) a system call returns when a signal
/// interrupted it; an injected call that sees one is simply run again.
const ERESTART_RANGE: std::ops::RangeInclusive<i64> = -516..=-512;
/// Bound on stops seen while single-stepping one injected `syscall` (each is a signal or a
/// job-control event that arrived in between): beyond it something keeps the thread busy.
const MAX_STEP_STOPS: usize = 10_000;

/// How long a batch held the target, as measured by [`Tracee::resume_detach`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pause {
    /// From the first `PTRACE_SEIZE` until the last thread was seen stopped.
    pub stopping: Duration,
    /// From the last thread's stop until the first thread was let go: the time every thread
    /// of the target was stopped at once (the "pause" of DESIGN.md §6).
    pub held: Duration,
    /// From the first thread let go until the last.
    pub resuming: Duration,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Seized or resumed: a stop is on its way.
    Running,
    /// In an interrupt-, group- or event-stop (`PTRACE_CONT`'s signal would be ignored).
    Event,
    /// In a signal-delivery-stop (the signal given to `PTRACE_DETACH` is delivered).
    Signal,
    /// In a `PTRACE_EVENT_CLONE` stop: an event stop (as `Event`) *inside* `clone(2)`, whose
    /// result the kernel writes into `rax` when the thread goes on. Registers set now are
    /// overwritten: no system call may be injected here (an injected `syscall` would run
    /// with the new thread's id as its number, and the program's clone would return
    /// `-ENOSYS`: seen with a program creating threads all the time while kerf stopped it
    /// for hundreds of batches).
    InClone,
}

#[derive(Debug)]
struct Thread {
    tid: i32,
    state: State,
    /// Signals the kernel dequeued for this thread that must still be delivered, in order.
    pending: VecDeque<SigInfo>,
}

/// Processes whose end kerf's own waits took (the leader's wait status as a thread group
/// ends while kerf stops it): `(pid, raw status)`. A launched command's parent (kerf) then
/// finds no status left to wait for, and asks here ([`ended_status`]).
static ENDED: std::sync::Mutex<Vec<(i32, i32)>> = std::sync::Mutex::new(Vec::new());

/// Keep the raw wait status `s` of process `pid`'s end, which one of kerf's ptrace waits took
/// (the parent's own wait then finds nothing: `ECHILD`).
fn keep_end(pid: i32, s: i32) {
    if let Ok(mut ended) = ENDED.lock() {
        ended.retain(|(p, _)| *p != pid);
        ended.push((pid, s));
    }
}

/// The raw wait status of process `pid`'s end, if kerf's ptrace waits took it (see `ENDED`).
pub fn ended_status(pid: i32) -> Option<i32> {
    ENDED.lock().ok()?.iter().find(|(p, _)| *p == pid).map(|&(_, s)| s)
}

/// `PTRACE_SEIZE`'s options: threads created while kerf holds the others are attached by
/// the kernel (`PTRACE_O_TRACECLONE`), and system-call stops report `SIGTRAP | 0x80`
/// (`PTRACE_O_TRACESYSGOOD`). The latter also makes a syscall-stop harmless to leave: a
/// tracer that dies leaves the stop's code as the signal to send, and `SIGTRAP | 0x80` is no
/// signal (the kernel refuses it), where a plain SIGTRAP would kill the program.
const SEIZE_OPTIONS: i32 = libc::PTRACE_O_TRACECLONE | libc::PTRACE_O_TRACESYSGOOD;
/// The stop signal of a syscall-stop under `PTRACE_O_TRACESYSGOOD`.
const SYSCALL_STOP: i32 = libc::SIGTRAP | 0x80;

/// Where the restorer of a [`Tracee`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Restorer {
    /// Not placed yet.
    NotYet,
    /// In the room after the vDSO's image (zeros to put back at the end).
    InVdso(RemoteAddr),
    /// In that room, where a killed kerf left it (left there at the end: the program's
    /// SIGTRAP action may be its guard).
    LeftInVdso(RemoteAddr),
    /// In a page of its own, mapped by kerf (to unmap at the end).
    Mapped(RemoteAddr),
    /// It could not be placed: calls are single-stepped.
    Unavailable,
}

/// SIGTRAP's action while kerf single-steps: the restorer's trap guard (see `restorer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TrapGuard {
    /// No step yet.
    NotYet,
    /// Not installed: the program has an action of its own, or it could not be done.
    Off,
    /// The guard is SIGTRAP's action; the program's is kept in the restorer at `at`
    /// (`restorer::PUT_BACK`).
    On(RemoteAddr),
}

/// How the call of [`Tracee::call_in_stub`] ended.
enum InStub {
    Done(i64),
    SignalFirst,
    /// The thread stopped elsewhere than after the stub's `syscall` (the wait status).
    Unexpected(i32),
}

/// How an injected call through the restorer ended.
enum ThroughRestorer {
    Done(i64),
    /// It could not be made that way (no room for a frame on the thread's stack): the
    /// thread is as it was; make it the old way.
    Declined,
    /// A signal arrived first, now held: the thread is as it was, in that signal's delivery
    /// stop; try again.
    SignalFirst,
}

/// A decoded `waitpid` status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Status {
    Gone,
    Stopped { sig: i32, event: i32 },
}

fn decode(status: i32) -> Status {
    if status & 0xff == 0x7f {
        Status::Stopped { sig: (status >> 8) & 0xff, event: (status >> 16) & 0xff }
    } else {
        Status::Gone
    }
}

/// What one single-step of a thread met (with its registers after, and the wait status).
enum Stepped {
    /// The step's own trap: a kernel-generated SIGTRAP.
    Trap(Regs, i32),
    /// A signal that arrived first, kept for re-injection.
    Signal(Regs, i32),
    /// Another stop, absorbed.
    Other,
}

/// A thread group held stopped by kerf. See the module documentation for how.
pub struct Tracee {
    pid: i32,
    sys: Arc<dyn TraceSys>,
    threads: Vec<Thread>,
    tids: Vec<i32>,
    /// Where an injected call executes when it cannot go through the restorer (found once;
    /// forgotten when kerf writes over it).
    syscall_insn: Cell<Option<RemoteAddr>>,
    /// The restorer (see `restorer`), placed at the first injected call.
    restorer: Restorer,
    /// SIGTRAP's action, guarded from the first single-step until the threads go.
    guard: TrapGuard,
    /// During a single-step: the stepped thread and the program's mask for it.
    stepping: Option<(i32, u64)>,
    /// The restorer where a thread and the program's mask for it are written
    /// (`restorer::MASKED_TID`) while kerf has changed that thread's mask.
    noted: Option<RemoteAddr>,
    /// The writable mappings of the process (`[start, end)`), read once: the stacks frames
    /// go on (kerf maps and unmaps only its own memory while it holds the threads).
    writable: std::cell::OnceCell<Vec<(u64, u64)>>,
    /// Each thread's seccomp state, read when first needed (it cannot change while the
    /// thread is stopped).
    seccomp: HashMap<i32, crate::seccomp::Mode>,
    timeout: Duration,
    started: Instant,
    all_stopped: Instant,
    released: bool,
    /// ptrace requests are only valid from the attaching thread.
    _not_send: PhantomData<*const ()>,
}

impl std::fmt::Debug for Tracee {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tracee")
            .field("pid", &self.pid)
            .field("threads", &self.tids)
            .finish_non_exhaustive()
    }
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(0)
}

/// Between two non-blocking waits: yield for the first ~1000 polls (a stop normally arrives
/// within tens of microseconds, and a blocking `waitpid` measured slower: the wake-up costs
/// more than the polling), then sleep briefly, then 1 ms at a time.
fn backoff(spins: &mut u32) {
    *spins += 1;
    if *spins < 1000 {
        std::thread::yield_now();
    } else if *spins < 3000 {
        std::thread::sleep(Duration::from_micros(20));
    } else {
        std::thread::sleep(Duration::from_millis(1));
    }
}

impl Tracee {
    /// Attach to every thread of process `pid` with `PTRACE_SEIZE` (option
    /// `PTRACE_O_TRACECLONE`, never `PTRACE_O_EXITKILL`) and stop each with
    /// `PTRACE_INTERRUPT`, waiting for every stop; rescan /proc/PID/task until no new thread
    /// appears. Threads that exit meanwhile are dropped; signals dequeued meanwhile are kept
    /// for [`Tracee::resume_detach`]. `pid` may name any thread: the whole group is stopped.
    ///
    /// Errors: [`TargetError::NoSuchProcess`] (dead pid, or nothing left to attach),
    /// [`TargetError::AlreadyTraced`] (a debugger, or another [`Tracee`]),
    /// [`TargetError::PtraceDenied`] (EPERM: not root, ptrace_scope),
    /// [`TargetError::TraceSelf`], [`TargetError::StopTimeout`].
    pub fn stop_all(pid: i32) -> Result<Tracee, TargetError> {
        Tracee::stop_all_with(pid, Arc::new(RealTraceSys::new()), DEFAULT_STOP_TIMEOUT)
    }

    /// [`Tracee::stop_all`] through `sys` (tests pass a fake), waiting at most `timeout` for
    /// the threads to stop.
    pub fn stop_all_with(
        pid: i32,
        sys: Arc<dyn TraceSys>,
        timeout: Duration,
    ) -> Result<Tracee, TargetError> {
        if pid <= 0 {
            return Err(TargetError::NoSuchProcess { pid });
        }
        let pid = thread_group_of(&*sys, pid)?;
        if pid == sys.self_pid() {
            return Err(TargetError::TraceSelf { pid });
        }
        let now = Instant::now();
        let mut t = Tracee {
            pid,
            sys,
            threads: Vec::new(),
            tids: Vec::new(),
            syscall_insn: Cell::new(None),
            restorer: Restorer::NotYet,
            guard: TrapGuard::NotYet,
            stepping: None,
            noted: None,
            writable: std::cell::OnceCell::new(),
            seccomp: HashMap::new(),
            timeout,
            started: now,
            all_stopped: now,
            released: false,
            _not_send: PhantomData,
        };
        let deadline = now + timeout;
        loop {
            let tids = match t.sys.list_threads(pid) {
                Ok(tids) => tids,
                Err(e) if e.kind() == io::ErrorKind::NotFound || errno(&e) == libc::ESRCH => {
                    return Err(TargetError::NoSuchProcess { pid })
                }
                Err(e) => {
                    let path = PathBuf::from(format!("/proc/{pid}/task"));
                    return Err(TargetError::from_io(pid, "list", path, e));
                }
            };
            let mut found_new = false;
            let mut zombies = 0;
            for tid in tids {
                if t.index(tid).is_some() {
                    continue;
                }
                match t.sys.seize(tid, SEIZE_OPTIONS) {
                    Ok(()) => {}
                    Err(e) if errno(&e) == libc::ESRCH => continue, // exited meanwhile
                    Err(e) if errno(&e) == libc::EPERM => {
                        // A zombie (an exited leader) or dead thread: nothing to stop.
                        zombies += usize::from(t.refused(tid)?);
                        continue;
                    }
                    Err(source) => {
                        return Err(TargetError::Ptrace { pid, tid, op: "PTRACE_SEIZE", source })
                    }
                }
                t.threads.push(Thread { tid, state: State::Running, pending: VecDeque::new() });
                found_new = true;
                match t.sys.interrupt(tid) {
                    // ESRCH: it died after the seize; its exit is reported to the wait below.
                    Err(e) if errno(&e) != libc::ESRCH => {
                        return Err(TargetError::Ptrace {
                            pid,
                            tid,
                            op: "PTRACE_INTERRUPT",
                            source: e,
                        })
                    }
                    _ => {}
                }
            }
            t.wait_all("stop_all", deadline)?;
            if found_new {
                continue;
            }
            // No new thread in a scan made while every known thread was stopped. But a
            // directory read of /proc/PID/task is positional and can skip a thread when
            // others exit meanwhile (unknown threads still run and may exit), so confirm
            // with the kernel's exact count of live threads (zombies included).
            match t.live_threads() {
                Some(n) if n > t.threads.len() + zombies => {
                    if Instant::now() >= deadline {
                        return Err(t.timeout_err(pid, "stop_all (a thread stays unlisted)"));
                    }
                    std::thread::yield_now();
                }
                _ => break,
            }
        }
        t.sync_tids();
        if t.threads.is_empty() {
            t.released = true;
            return Err(TargetError::NoSuchProcess { pid });
        }
        t.all_stopped = Instant::now();
        Ok(t)
    }

    /// The thread group (process id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The stopped threads, in the order they were attached.
    pub fn threads(&self) -> &[i32] {
        &self.tids
    }

    /// The value of `key` in the process's auxiliary vector (`AT_HWCAP2` = 26, ...).
    pub fn auxv(&self, key: u64) -> Result<Option<u64>, TargetError> {
        let path = std::path::PathBuf::from(format!("/proc/{}/auxv", self.pid));
        let bytes = self
            .sys
            .read_bytes(&path)
            .map_err(|e| TargetError::from_io(self.pid, "read", path, e))?;
        Ok(spawn::auxv_entries(&bytes).into_iter().find(|&(k, _)| k == key).map(|(_, v)| v))
    }

    /// When the last thread of this batch was seen stopped.
    pub fn stopped_at(&self) -> Instant {
        self.all_stopped
    }

    /// How many signals kerf holds for `tid` (to be delivered at resume).
    pub fn held_signals(&self, tid: i32) -> usize {
        self.index(tid).map_or(0, |i| self.threads[i].pending.len())
    }

    /// Whether signal `sig` is on its way to thread `tid`: held by kerf for re-delivery, or
    /// pending for the thread or the whole process (SigPnd/ShdPnd of /proc). A trap splice's
    /// dispatcher must stay installed while a SIGTRAP from one of its `int3`s is in flight.
    pub fn signal_pending(&self, tid: i32, sig: i32) -> bool {
        let held = self
            .index(tid)
            .is_some_and(|i| self.threads[i].pending.iter().any(|s| s.signo() == sig));
        let path = format!("/proc/{}/task/{tid}/status", self.pid);
        let status = self.sys.read_text(std::path::Path::new(&path)).unwrap_or_default();
        let bit = 1u64 << (sig - 1);
        let queued = status
            .lines()
            .filter(|l| l.starts_with("SigPnd:") || l.starts_with("ShdPnd:"))
            .filter_map(|l| u64::from_str_radix(l.split_whitespace().nth(1)?, 16).ok())
            .any(|m| m & bit != 0);
        held || queued
    }

    /// The signals stopped thread `tid` blocks (bit n-1 for signal n). For a thread stopped
    /// inside a system call that set a temporary mask (`sigsuspend`, `ppoll`, ...), that
    /// temporary mask: the thread's own comes back when the call returns.
    pub fn sigmask(&self, tid: i32) -> Result<u64, TargetError> {
        self.stopped(tid)?;
        self.sys.get_sigmask(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETSIGMASK", e))
    }

    /// Set the signals stopped thread `tid` blocks.
    pub fn set_sigmask(&mut self, tid: i32, mask: u64) -> Result<(), TargetError> {
        self.stopped(tid)?;
        self.sys.set_sigmask(tid, mask).map_err(|e| self.ptrace_err(tid, "PTRACE_SETSIGMASK", e))
    }

    /// Whether stopped thread `tid` was stopped inside a system call that runs with a
    /// temporary signal mask and will restart (see [`in_masking_call`]).
    pub fn in_masking_call(&self, tid: i32) -> Result<bool, TargetError> {
        Ok(in_masking_call(&self.regs(tid)?))
    }

    /// The signals the process has a handler for (`SigCgt` of /proc/PID/status), as numbers.
    pub fn caught_signals(&self) -> Result<Vec<u64>, TargetError> {
        let path = std::path::PathBuf::from(format!("/proc/{}/status", self.pid));
        let status = self
            .sys
            .read_text(&path)
            .map_err(|e| TargetError::from_io(self.pid, "read", path, e))?;
        let mask = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0);
        Ok((1..=64).filter(|s| mask & (1 << (s - 1)) != 0).collect())
    }

    /// The registers of stopped thread `tid` (`PTRACE_GETREGS`).
    pub fn regs(&self, tid: i32) -> Result<Regs, TargetError> {
        self.stopped(tid)?;
        self.sys.get_regs(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETREGS", e))
    }

    /// Set the registers of stopped thread `tid` (`PTRACE_SETREGS`); they take effect when it
    /// resumes.
    pub fn set_regs(&mut self, tid: i32, regs: &Regs) -> Result<(), TargetError> {
        self.stopped(tid)?;
        self.sys.set_regs(tid, regs).map_err(|e| self.ptrace_err(tid, "PTRACE_SETREGS", e))
    }

    /// Read `buf.len()` bytes of target memory at `addr` (one `pread` of /proc/PID/mem). A
    /// short read (part of the range unmapped) is an error.
    pub fn read(&self, addr: RemoteAddr, buf: &mut [u8]) -> Result<(), TargetError> {
        mem::read(&*self.sys, self.pid, addr, buf)
    }

    /// Write `data` into target memory at `addr` (one `pwrite` of /proc/PID/mem; read-only
    /// code pages are written through, copy-on-write). A short write is an error.
    ///
    /// Writing code that a thread may be executing is the caller's responsibility: all
    /// threads are stopped while a [`Tracee`] exists, but their PCs are not checked here.
    pub fn write(&self, addr: RemoteAddr, data: &[u8]) -> Result<(), TargetError> {
        if let Some(s) = self.syscall_insn.get() {
            if addr < s + 2 && s < RemoteAddr(addr.0.saturating_add(data.len() as u64)) {
                self.syscall_insn.set(None); // kerf may have patched over it: search again
            }
        }
        mem::write(&*self.sys, self.pid, addr, data)
    }

    /// This process's memory, for use after the threads are let go: see [`RemoteMem`] for
    /// what it may be used for.
    pub fn memory(&self) -> RemoteMem {
        RemoteMem::new(self.pid, self.sys.clone())
    }

    /// Run system call `nr` with `args` in the target, on the thread kerf prefers for
    /// injection (the thread group leader when it is attached), and return its raw result
    /// (a negative errno on failure). See [`Tracee::syscall_on`].
    pub fn syscall(&mut self, nr: i64, args: [u64; 6]) -> Result<i64, TargetError> {
        let tid = self.inject_tid()?;
        self.syscall_on(tid, nr, args)
    }

    /// Run system call `nr` with `args` in stopped thread `tid` and return its raw result
    /// (a call the kernel reports as interrupted, `-ERESTART*`, is run again).
    ///
    /// The call runs through the restorer (see `restorer`), placed in the process at the
    /// first call: the thread's registers go on its stack below the red zone, the thread
    /// runs to the stub's `syscall` under `PTRACE_SYSCALL`, makes the call and is parked in an
    /// interrupt stop, where the result is read and its registers put back exactly. kerf
    /// killed at any point of that leaves a thread that finishes the call and restores
    /// itself. A thread holding signals is no exception (they go back to it from a
    /// stand-in's delivery stop when it is let go, `enter_stand_in_stop`). Where that
    /// cannot be done (mapping the restorer's page, where it needs one, and unmapping it at
    /// the end; no room on its stack), the call is single-stepped at an existing `syscall`
    /// instruction of the target instead (see `syscall_by_step`).
    ///
    /// A call the thread's seccomp filters would not let run as it is (kill, SIGSYS, an
    /// errno, a supervisor's answer) is not made: [`TargetError::Seccomp`].
    pub fn syscall_on(&mut self, tid: i32, nr: i64, args: [u64; 6]) -> Result<i64, TargetError> {
        let i = self.stopped(tid)?;
        if self.threads[i].state == State::InClone {
            return Err(TargetError::InsideClone { pid: self.pid, tid });
        }
        if let Some(stub) = self.restorer(tid)? {
            let call = crate::seccomp::Call { nr: nr as u32, ip: stub.0, args };
            self.allowed(tid, nr, &call)?;
            // A thread holding signals goes through the restorer too (it gets back into a
            // delivery stop for them when let go, `enter_stand_in_stop`): single-stepped, its
            // calls each left a window for a dying kerf (the call's registers, or the step's
            // SIGTRAP), and since a signal for the process goes to the one thread kerf runs,
            // a program with a fast timer had every call of an attach made so (python3.11
            // with a 2 ms SIGALRM: 3 of 20 kills during `kerf jit -p`'s start ended it).
            // Once a signal came first, the asynchronous ones wait in the thread's mask for
            // the rest of the call, as in a step (see `step_unmasked`): with a program's
            // 10 us timer, the one call of the step test's trap guard otherwise met a signal
            // first at each of its 10,000 tries.
            let (mut hold, mut first) = (None, true);
            for _ in 0..MAX_STEP_STOPS {
                match self.syscall_by_restorer(tid, nr, args, stub, hold)? {
                    ThroughRestorer::Done(r) => return Ok(r),
                    ThroughRestorer::Declined => break,
                    ThroughRestorer::SignalFirst if first => {
                        first = false;
                        hold = self.holdable(tid, nr)?;
                    }
                    ThroughRestorer::SignalFirst => {}
                }
            }
        }
        self.syscall_by_step(tid, nr, args)
    }

    /// Whether the asynchronous signals ([`HELD_SIGNALS`]) may be held in stopped thread
    /// `tid`'s mask for an injected call `nr`: its mask if so; `None` where the call may read
    /// or set the mask itself, or the thread is inside a call with a temporary one (see
    /// [`in_masking_call`]).
    fn holdable(&mut self, tid: i32, nr: i64) -> Result<Option<u64>, TargetError> {
        const MASK_CALLS: [i64; 10] = [
            libc::SYS_rt_sigprocmask,
            libc::SYS_rt_sigreturn,
            libc::SYS_rt_sigsuspend,
            libc::SYS_rt_sigtimedwait,
            libc::SYS_ppoll,
            libc::SYS_pselect6,
            libc::SYS_epoll_pwait,
            libc::SYS_epoll_pwait2,
            libc::SYS_signalfd,
            libc::SYS_signalfd4,
        ];
        let regs = self.sys.get_regs(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETREGS", e))?;
        if MASK_CALLS.contains(&nr) || in_masking_call(&regs) {
            return Ok(None);
        }
        let m =
            self.sys.get_sigmask(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETSIGMASK", e))?;
        Ok(Some(m))
    }

    /// [`TargetError::Seccomp`] unless `tid`'s seccomp state lets `call` run.
    fn allowed(
        &mut self,
        tid: i32,
        nr: i64,
        call: &crate::seccomp::Call,
    ) -> Result<(), TargetError> {
        let action = self.seccomp_verdict(tid, call)?;
        if action.allows() {
            Ok(())
        } else {
            Err(TargetError::Seccomp { pid: self.pid, tid, nr, action })
        }
    }

    /// The restorer's address, placed if it is not yet: after the vDSO's image if there is
    /// room (no call needed), else in a page mapped by a single-stepped `mmap` on `tid`;
    /// `None` if neither can be.
    fn restorer(&mut self, tid: i32) -> Result<Option<RemoteAddr>, TargetError> {
        match self.restorer {
            Restorer::InVdso(a) | Restorer::LeftInVdso(a) | Restorer::Mapped(a) => {
                return Ok(Some(a))
            }
            Restorer::Unavailable => return Ok(None),
            Restorer::NotYet => {}
        }
        if let Some((at, left)) = self.vdso_room() {
            let page = restorer::page_bytes(at);
            let written = if left {
                // A killed kerf's: its code is these bytes already, and a thread it left in
                // the stub may still read the slot and the mask (and the guard the program's
                // action): only its action is written again and its note of a thread
                // taken away.
                let action = restorer::GUARD_ACTION as usize..restorer::MASKED_TID as usize;
                self.write(at + restorer::GUARD_ACTION, &page[action])
                    .and_then(|()| self.write(at + restorer::MASKED_TID, &0u64.to_le_bytes()))
            } else {
                self.write(at, &page)
            };
            if written.is_ok() {
                self.restorer = if left { Restorer::LeftInVdso(at) } else { Restorer::InVdso(at) };
                return Ok(Some(at));
            }
        }
        let prot = (libc::PROT_READ | libc::PROT_EXEC) as u64;
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        let len = layout::page_up(restorer::LEN);
        self.restorer = Restorer::Unavailable;
        let r = match self.syscall_by_step(tid, libc::SYS_mmap, [0, len, prot, flags, u64::MAX, 0])
        {
            Ok(r) => r,
            // Refused by this thread's seccomp filters: asked again at the next call (on
            // another thread, maybe).
            Err(TargetError::Seccomp { .. }) => {
                self.restorer = Restorer::NotYet;
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if r < 0 {
            return Ok(None);
        }
        let at = RemoteAddr(r as u64);
        if self.write(at, &restorer::page_bytes(at)).is_err() {
            let _ = self.syscall_by_step(tid, libc::SYS_munmap, [at.0, len, 0, 0, 0, 0]);
            return Ok(None);
        }
        self.restorer = Restorer::Mapped(at);
        Ok(Some(at))
    }

    /// Where the restorer fits after the vDSO's image (see `restorer::vdso_room`), if it does,
    /// and whether a killed kerf's is there already.
    fn vdso_room(&self) -> Option<(RemoteAddr, bool)> {
        let maps = self.maps().ok()?;
        // The same read serves the frames' stack check (see `writable`).
        let _ = self.writable.set(writable_ranges(&maps));
        let vdso = maps.iter().find(|m| m.path.as_deref() == Some("[vdso]") && m.exec)?;
        if vdso.len() > 1 << 20 {
            return None;
        }
        let mut image = vec![0u8; vdso.len() as usize];
        self.read(vdso.start, &mut image).ok()?;
        let off = restorer::vdso_room(&image)?;
        Some((vdso.start + off, restorer::left_by_kerf(&image[off as usize..])))
    }

    /// Take the restorer out, if it was placed: zeros back after the vDSO's image, or its
    /// page unmapped (single-stepped: the thread must not return into it). Not while its
    /// guard is SIGTRAP's action, nor one a killed kerf left. Best effort: what is left
    /// harms nothing.
    fn unmap_restorer(&mut self) {
        if let TrapGuard::On(_) = self.guard {
            return;
        }
        let len = restorer::LEN as usize;
        match std::mem::replace(&mut self.restorer, Restorer::Unavailable) {
            Restorer::InVdso(at) => {
                let _ = self.write(at, &vec![0; len]);
            }
            Restorer::Mapped(at) => {
                if let Ok(tid) = self.inject_tid() {
                    let len = layout::page_up(len as u64);
                    let _ = self.syscall_by_step(tid, libc::SYS_munmap, [at.0, len, 0, 0, 0, 0]);
                }
            }
            Restorer::LeftInVdso(_) | Restorer::NotYet | Restorer::Unavailable => {}
        }
    }

    /// Make the restorer's trap guard SIGTRAP's action before the first single-step, where
    /// the program has no handler for SIGTRAP (see `restorer`): were kerf killed during a
    /// step, the step's trap would reach the program, and end it (an ignored trap too: the
    /// next instruction traps again, and the kernel forces that one through). Best effort:
    /// without it the steps are made as before.
    fn guard_traps(&mut self, tid: i32) {
        if self.guard != TrapGuard::NotYet {
            return;
        }
        self.guard = TrapGuard::Off;
        let Some(ignored) = self.sigtrap_uncaught() else { return };
        // (Any thread may make the call: the one kerf prefers for calls if it can.)
        let tid = self.inject_tid().unwrap_or(tid);
        let Ok(Some(at)) = self.restorer(tid) else { return };
        // The program's action as /proc tells it, until the exact one is read: the guard
        // gives it back to a SIGTRAP of the program's from the moment it is SIGTRAP's action.
        let mut guess = [0u8; restorer::ACTION_LEN as usize];
        guess[0] = u8::from(ignored); // SIG_IGN is 1, SIG_DFL 0
        if self.write(at + restorer::PUT_BACK, &guess).is_err() {
            return;
        }
        if let Ok(Some(was)) = self.swap_trap_action(tid, at + restorer::GUARD_ACTION) {
            self.guard = TrapGuard::On(at);
            let _ = self.write(at + restorer::PUT_BACK, &was);
        }
    }

    /// The program's own SIGTRAP action back, if the guard is on. Left on (with the
    /// restorer) if that cannot be done.
    fn unguard_traps(&mut self) {
        let TrapGuard::On(at) = self.guard else { return };
        let Ok(tid) = self.inject_tid() else { return };
        let Ok(Some(was)) = self.swap_trap_action(tid, at + restorer::PUT_BACK) else { return };
        self.guard = TrapGuard::Off;
        if restorer::handler(&was) != (at + restorer::GUARD_AT).0 {
            // Another action of kerf's replaced the guard while the threads were held: it
            // stays.
            if self.write(at + restorer::PUT_BACK, &was).is_ok() {
                let _ = self.swap_trap_action(tid, at + restorer::PUT_BACK);
            }
        }
    }

    /// Whether the process has no handler for SIGTRAP (`SigCgt` of /proc/PID/status): then
    /// whether it ignores it (`SigIgn`). `None` if it has one, or either cannot be read.
    fn sigtrap_uncaught(&self) -> Option<bool> {
        let path = PathBuf::from(format!("/proc/{}/status", self.pid));
        let status = self.sys.read_text(&path).ok()?;
        let mask = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        };
        let (caught, ignored) = (mask("SigCgt:")?, mask("SigIgn:")?);
        (caught & SIGTRAP_BIT == 0).then_some(ignored & SIGTRAP_BIT != 0)
    }

    /// `rt_sigaction(SIGTRAP, new, &old)` made in stopped thread `tid` and the old action,
    /// read through the scratch bytes below its red zone (their own bytes put back after);
    /// `None` if those cannot be used.
    fn swap_trap_action(
        &mut self,
        tid: i32,
        new: RemoteAddr,
    ) -> Result<Option<[u8; restorer::ACTION_LEN as usize]>, TargetError> {
        let spot = restorer::scratch_at(self.regs(tid)?.sp());
        let mut own = [0u8; restorer::ACTION_LEN as usize];
        if !self.writable(spot.0, spot.0 + restorer::ACTION_LEN)
            || self.read(spot, &mut own).is_err()
        {
            return Ok(None);
        }
        let sig = libc::SIGTRAP as u64;
        let r = self.syscall_on(tid, libc::SYS_rt_sigaction, [sig, new.0, spot.0, 8, 0, 0]);
        let mut was = [0u8; restorer::ACTION_LEN as usize];
        let read = self.read(spot, &mut was);
        self.write(spot, &own)?;
        let r = r?;
        if r != 0 {
            return Err(self.injected(tid, "rt_sigaction", r));
        }
        read?;
        Ok(Some(was))
    }

    /// Whether `[lo, hi)` lies in one writable mapping of the process.
    fn writable(&self, lo: u64, hi: u64) -> bool {
        let maps = self
            .writable
            .get_or_init(|| self.maps().map(|m| writable_ranges(&m)).unwrap_or_default());
        maps.iter().any(|&(start, end)| start <= lo && hi <= end)
    }

    /// Make one call through the restorer at `stub` (see [`Tracee::syscall_on`]). The
    /// numbered steps keep this true at every instant: were kerf killed, the thread would
    /// either be as kerf found it or run the call and the stub's restore.
    fn syscall_by_restorer(
        &mut self,
        tid: i32,
        nr: i64,
        args: [u64; 6],
        stub: RemoteAddr,
        hold: Option<u64>,
    ) -> Result<ThroughRestorer, TargetError> {
        let saved =
            self.sys.get_regs(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETREGS", e))?;
        // 1. The frame, on the thread's stack below its red zone, and where to go on, in the
        //    slot. Nothing points at them yet.
        let (frame_at, frame, resume) = restorer::frame(&saved);
        let mut old = vec![0u8; frame.len()];
        if !self.writable(frame_at.0, saved.rsp) || self.read(frame_at, &mut old).is_err() {
            return Ok(ThroughRestorer::Declined);
        }
        self.write(frame_at, &frame)?;
        self.write(stub + restorer::SLOT, &resume.0.to_le_bytes())?;
        // 2. The call's registers: from here the thread, let go, runs the stub.
        let mut regs = call_regs(&saved, stub, nr, args);
        regs.set_sp(frame_at);
        let mut widened = None;
        let made = self.call_in_stub(tid, &regs, stub, hold, &mut widened);
        // 5. The mask back first (a thread let go still runs the stub, which puts the same
        //    mask back), then its own registers, in the interrupt stop: the kernel restarts
        //    an interrupted call of the thread's own when it resumes. Then the stack's bytes.
        let unheld = widened.map_or(Ok(()), |m| self.put_mask_back(tid, m));
        let made = match made {
            Ok(made) => made,
            Err(e) => {
                // (The thread gone, or out of kerf's hands: what can be put back is.)
                if unheld.is_ok() {
                    self.unnote_mask();
                }
                let _ = self.restore_regs(tid, &saved);
                return Err(e);
            }
        };
        unheld?;
        self.restore_regs(tid, &saved)?;
        self.unnote_mask();
        self.write(frame_at, &old)?;
        match made {
            InStub::Done(r) => Ok(ThroughRestorer::Done(r)),
            // A signal came first (now held): the thread sits in its delivery stop, which is
            // where it must be to get it back exactly.
            InStub::SignalFirst => Ok(ThroughRestorer::SignalFirst),
            InStub::Unexpected(status) => {
                let op = "syscall injection";
                Err(TargetError::UnexpectedStop { pid: self.pid, tid, op, status })
            }
        }
    }

    /// Steps 2-4 of [`Tracee::syscall_by_restorer`]: thread `tid` given the call's `regs`
    /// (again after an interrupted call), with `hold` (the program's mask) the asynchronous
    /// signals held in its mask while its registers are the stub's (`widened` says so), run
    /// to the call's entry stop, and parked once the call is made.
    fn call_in_stub(
        &mut self,
        tid: i32,
        regs: &Regs,
        stub: RemoteAddr,
        hold: Option<u64>,
        widened: &mut Option<u64>,
    ) -> Result<InStub, TargetError> {
        let mut result = 0;
        for _ in 0..16 {
            self.sys.set_regs(tid, regs).map_err(|e| self.ptrace_err(tid, "PTRACE_SETREGS", e))?;
            if let (Some(m), None) = (hold, *widened) {
                // The program's mask written for the stub first: kerf killed from here on
                // leaves a thread that puts it back itself.
                self.note_mask(stub, tid, m);
                self.sys
                    .set_sigmask(tid, m | HELD_SIGNALS)
                    .map_err(|e| self.ptrace_err(tid, "PTRACE_SETSIGMASK", e))?;
                *widened = Some(m);
            }
            // 3. To the call's entry stop (a syscall-stop left by a dying kerf sends no
            //    signal, see `SEIZE_OPTIONS`).
            if !self.run_to_entry_stop(tid)? {
                return Ok(InStub::SignalFirst);
            }
            // 4. The call runs and the thread is parked in an interrupt stop before it gets
            //    back to user code, its result in `rax`: let go there, it would run the
            //    stub's restore.
            let status = self.park_now(tid, "park after a syscall injection")?;
            let now =
                self.sys.get_regs(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETREGS", e))?;
            if now.pc() != stub + 2 {
                return Ok(InStub::Unexpected(status));
            }
            result = now.rax as i64;
            if !ERESTART_RANGE.contains(&result) {
                break;
            }
        }
        Ok(InStub::Done(result))
    }

    /// Registers `saved` back on thread `tid` unless it is gone or running.
    fn restore_regs(&mut self, tid: i32, saved: &Regs) -> Result<(), TargetError> {
        match self.index(tid) {
            Some(i) if self.threads[i].state != State::Running => {
                self.sys.set_regs(tid, saved).map_err(|e| self.ptrace_err(tid, "PTRACE_SETREGS", e))
            }
            _ => Ok(()),
        }
    }

    /// Resume stopped thread `tid` with `PTRACE_SYSCALL` until the entry stop of the stub's
    /// call: `true` there, `false` if a signal-delivery-stop came first (the signal held).
    /// Other stops are absorbed.
    fn run_to_entry_stop(&mut self, tid: i32) -> Result<bool, TargetError> {
        const OP: &str = "syscall entry";
        let deadline = Instant::now() + self.timeout;
        for _ in 0..MAX_STEP_STOPS {
            self.sys.syscall(tid, 0).map_err(|e| self.ptrace_err(tid, "PTRACE_SYSCALL", e))?;
            let i = self.stopped(tid)?;
            self.threads[i].state = State::Running;
            let status = self.wait_one(tid, OP, deadline)?;
            match decode(status) {
                Status::Stopped { sig: SYSCALL_STOP, event: 0 } => {
                    let i = self.index(tid).expect("stopped thread is tracked");
                    self.threads[i].state = State::Event;
                    return Ok(true);
                }
                Status::Stopped { event: 0, .. } => {
                    self.absorb(tid, status, OP)?;
                    return Ok(false);
                }
                _ => self.absorb(tid, status, OP)?,
            }
            if self.index(tid).is_none() {
                return Err(TargetError::ThreadExited { pid: self.pid, tid, op: OP });
            }
        }
        Err(TargetError::StepInterrupted { pid: self.pid, tid, op: OP, stops: MAX_STEP_STOPS })
    }

    /// Run system call `nr` with `args` in stopped thread `tid` by single-stepping an existing
    /// `syscall` instruction of the target, and return its raw result.
    ///
    /// Saves the thread's registers; points `rip` at the `syscall` instruction (searched
    /// once, vdso first, and searched again if kerf writes over it); sets `rax = nr`,
    /// `rdi, rsi, rdx, r10, r8, r9 = args` and `orig_rax = -1` (so the kernel does not take
    /// the thread for one returning from an interrupted system call); single-steps; reads
    /// `rax`; restores the saved registers exactly. Signals dequeued during the step are kept
    /// for re-injection and the step is retried; a call that the kernel reports as
    /// interrupted (`-ERESTART*`) is run again. kerf killed between setting the registers and
    /// putting them back leaves the thread to run on after that instruction with the call's
    /// registers: only what cannot go through the restorer is made so.
    fn syscall_by_step(&mut self, tid: i32, nr: i64, args: [u64; 6]) -> Result<i64, TargetError> {
        let insn = self.syscall_insn()?;
        let call = crate::seccomp::Call { nr: nr as u32, ip: insn.0, args };
        self.allowed(tid, nr, &call)?;
        let saved =
            self.sys.get_regs(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETREGS", e))?;
        let regs = call_regs(&saved, insn, nr, args);
        let mut result = 0;
        for _ in 0..16 {
            let after = self.step_syscall(tid, &regs, insn);
            // Put the thread back as it was, whatever happened (unless it is gone).
            let restored = match self.index(tid) {
                Some(i) if self.threads[i].state != State::Running => self
                    .sys
                    .set_regs(tid, &saved)
                    .map_err(|e| self.ptrace_err(tid, "PTRACE_SETREGS", e)),
                _ => Ok(()),
            };
            let after = after?;
            restored?;
            result = after.rax as i64;
            if !ERESTART_RANGE.contains(&result) {
                break;
            }
        }
        self.park(tid, "park after a syscall injection")?;
        Ok(result)
    }

    /// Move stopped thread `tid` from the signal-delivery-stop of a single-step's trap into
    /// an interrupt stop, without running any of its instructions, so that kerf dying from
    /// here on (SIGKILL) leaves it to run on as it was. Left in the trap's stop, the kernel
    /// would, once its tracer is gone, deliver the SIGTRAP kept as the stop's signal and
    /// keep the trap flag the step set (a tracer's exit does not clear it, as
    /// `PTRACE_DETACH` does): the program dies of SIGTRAP (seen: python3.11 killed so when
    /// `kerf jit` was killed during its start).
    ///
    /// `PTRACE_INTERRUPT` marks a trap to come, `PTRACE_CONT` with no signal drops the
    /// SIGTRAP and clears the trap flag, and the kernel's signal loop takes the marked trap
    /// before it would return to the thread's code: the thread stops again at once, in an
    /// event stop, which a dying tracer leaves harmless. So is a thread with signals kerf
    /// holds for it: left in the trap's stop (the first of them goes back with its exact
    /// siginfo only from a signal-delivery-stop, see `release`), a dying kerf left it the trap
    /// flag, and the program died of SIGTRAP (python3.11 with a 2 ms SIGALRM, whose every
    /// call kerf made in a thread holding one was stepped: 3 of 20 kills of `kerf jit -p`
    /// during its start). It gets back into a delivery stop when it is let go
    /// ([`Tracee::enter_stand_in_stop`]).
    fn park(&mut self, tid: i32, op: &'static str) -> Result<(), TargetError> {
        let i = self.stopped(tid)?;
        if self.threads[i].state != State::Signal {
            return Ok(());
        }
        if !self.threads[i].pending.is_empty() {
            // Only from the trap's stop: the delivery stop of a signal it holds (one that
            // came during the step) is no danger.
            let info = self
                .sys
                .get_siginfo(tid)
                .map_err(|e| self.ptrace_err(tid, "PTRACE_GETSIGINFO", e))?;
            if info.signo() != libc::SIGTRAP || info.code() <= 0 {
                return Ok(());
            }
        }
        self.park_now(tid, op).map(drop)
    }

    /// Move thread `tid`, in an interrupt stop and holding signals (parked after a step, or
    /// after a call through the restorer), into the delivery stop of a stand-in for the
    /// first of them, from which `release` hands that one back with its exact siginfo: the
    /// stand-in queued by kerf (`SI_QUEUE`, kerf's pid: a kerf that dies before the thread
    /// takes it leaves it to the thread, not exact, not lost), then reached with `PTRACE_CONT`
    /// (the kernel dequeues it before the thread runs any instruction). Signals that come
    /// first are held as any.
    fn enter_stand_in_stop(&mut self, tid: i32, op: &'static str) -> Result<(), TargetError> {
        let i = self.stopped(tid)?;
        if self.threads[i].state != State::Event {
            // (A signal came before the interrupt: its delivery stop serves.)
            return Ok(());
        }
        let Some(first) = self.threads[i].pending.front() else { return Ok(()) };
        let me = self.sys.self_pid();
        let stand_in = SigInfo::new(first.signo(), SI_QUEUE, me, 0);
        if self.sys.queue_signal(self.pid, tid, &stand_in).is_err() {
            // (Then it stays parked: a dying kerf loses the held signals, as before.)
            return Ok(());
        }
        let deadline = Instant::now() + self.timeout;
        for _ in 0..MAX_STEP_STOPS {
            self.sys.cont(tid, 0).map_err(|e| self.ptrace_err(tid, "PTRACE_CONT", e))?;
            let i = self.index(tid).expect("stopped thread is tracked");
            self.threads[i].state = State::Running;
            let status = self.wait_one(tid, op, deadline)?;
            match decode(status) {
                Status::Gone => {
                    self.remove(tid);
                    return Err(TargetError::ThreadExited { pid: self.pid, tid, op });
                }
                Status::Stopped { event: 0, .. } => {
                    let (i, info) = self.in_signal_stop(tid)?;
                    let ours = info.code() == SI_QUEUE && info.sender_pid() == me;
                    if info.signo() == stand_in.signo() && ours {
                        return Ok(());
                    }
                    // Another signal first: held. One of the same number means the kernel
                    // had one pending already and dropped the stand-in (a standard signal
                    // is pending once): its stop serves. Else on to the stand-in, which is
                    // still pending (so the thread stops again before it runs).
                    let same = info.signo() == stand_in.signo();
                    self.threads[i].pending.push_back(info);
                    if same {
                        return Ok(());
                    }
                }
                Status::Stopped { .. } => {
                    let i = self.index(tid).expect("stopped thread is tracked");
                    self.threads[i].state = State::Event;
                }
            }
        }
        Err(TargetError::StepInterrupted { pid: self.pid, tid, op, stops: MAX_STEP_STOPS })
    }

    /// Thread `tid`, just seen in a signal-delivery-stop: marked so, with its index and the
    /// stop's siginfo (for the caller to hold, or not).
    fn in_signal_stop(&mut self, tid: i32) -> Result<(usize, SigInfo), TargetError> {
        let info =
            self.sys.get_siginfo(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETSIGINFO", e))?;
        let i = self.index(tid).expect("stopped thread is tracked");
        self.threads[i].state = State::Signal;
        Ok((i, info))
    }

    /// Move stopped thread `tid` into an interrupt stop (see [`Tracee::park`]) from whatever
    /// stop it is in.
    fn park_now(&mut self, tid: i32, op: &'static str) -> Result<i32, TargetError> {
        let i = self.stopped(tid)?;
        self.sys.interrupt(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_INTERRUPT", e))?;
        self.sys.cont(tid, 0).map_err(|e| self.ptrace_err(tid, "PTRACE_CONT", e))?;
        self.threads[i].state = State::Running;
        let deadline = Instant::now() + self.timeout;
        let status = self.wait_one(tid, op, deadline)?;
        match decode(status) {
            Status::Gone => {
                self.remove(tid);
                Err(TargetError::ThreadExited { pid: self.pid, tid, op })
            }
            Status::Stopped { event: 0, .. } => {
                // (Not expected: the trap comes before any signal is dequeued.) Kept.
                let (i, info) = self.in_signal_stop(tid)?;
                self.threads[i].pending.push_back(info);
                Ok(status)
            }
            Status::Stopped { .. } => {
                let i = self.index(tid).expect("stopped thread is tracked");
                self.threads[i].state = State::Event;
                Ok(status)
            }
        }
    }

    /// What stopped thread `tid`'s seccomp state answers to `call` (the filters read once
    /// per thread and stop). Filters kerf cannot read answer [`Action::Unknown`].
    pub fn seccomp_verdict(
        &mut self,
        tid: i32,
        call: &crate::seccomp::Call,
    ) -> Result<crate::seccomp::Action, TargetError> {
        use crate::seccomp::{verdict, Action, Insn, Mode};
        self.stopped(tid)?;
        if let Some(mode) = self.seccomp.get(&tid) {
            return Ok(verdict(mode, call));
        }
        let path = format!("/proc/{}/task/{tid}/status", self.pid);
        let status = self.sys.read_text(std::path::Path::new(&path)).unwrap_or_default();
        let mode = match crate::seccomp::mode_number(&status) {
            Some(0) => Mode::Off,
            Some(1) => Mode::Strict,
            // No line at all: a kernel without seccomp.
            None if !status.is_empty() => Mode::Off,
            _ => {
                let mut filters = Vec::new();
                for index in 0.. {
                    match self.sys.seccomp_filter(tid, index) {
                        Ok(Some(bytes)) => filters.push(Insn::parse(&bytes)),
                        Ok(None) => break,
                        // Unreadable (no CAP_SYS_ADMIN, no CONFIG_CHECKPOINT_RESTORE): assume
                        // the worst.
                        Err(_) => return Ok(Action::Unknown),
                    }
                }
                if filters.is_empty() {
                    return Ok(Action::Unknown);
                }
                Mode::Filters(filters)
            }
        };
        let v = verdict(&mode, call);
        self.seccomp.insert(tid, mode);
        Ok(v)
    }

    /// Map a fresh anonymous private region of `len` bytes (rounded up to pages) with
    /// protection `prot` (`libc::PROT_*`) in the target, every byte within [`REACH`]
    /// (±2 GiB less [`MARGIN`]) of `near`, so that rel32 jumps and disp32 operands at `near`
    /// reach all of it. Picks the free gap of /proc/PID/maps nearest to `near` (never in
    /// the growth room above `[heap]` or below `[stack]`), maps it with
    /// `MAP_FIXED_NOREPLACE`, and tries the next gaps on `EEXIST`. Returns the address.
    pub fn alloc_near(
        &mut self,
        near: RemoteAddr,
        len: u64,
        prot: i32,
    ) -> Result<RemoteAddr, TargetError> {
        self.alloc_near_preferring(near, near, len, prot)
    }

    /// Like [`Tracee::alloc_near`], placed as near as it fits to `preferred` rather than to
    /// `near` (which still decides what is in reach).
    pub fn alloc_near_preferring(
        &mut self,
        near: RemoteAddr,
        preferred: RemoteAddr,
        len: u64,
        prot: i32,
    ) -> Result<RemoteAddr, TargetError> {
        let (lo, hi) = layout::window_near(near);
        self.alloc_within(lo, hi, preferred, len, prot)
    }

    /// Like [`Tracee::alloc_near`], with the window `[lo, hi)` given by the caller (for a
    /// whole module: `[module_end - 2 GiB, module_start + 2 GiB)`); the gap nearest to
    /// `near` wins.
    pub fn alloc_within(
        &mut self,
        lo: RemoteAddr,
        hi: RemoteAddr,
        near: RemoteAddr,
        len: u64,
        prot: i32,
    ) -> Result<RemoteAddr, TargetError> {
        let flags = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
        self.map_in_window(lo, hi, near, len, len, prot, flags, u64::MAX)
    }

    /// Memory shared by kerf and the target: `len` bytes (rounded up to pages) mapped
    /// `MAP_SHARED` read/write in the target within [`REACH`] of `near`, and in kerf.
    ///
    /// The target creates a memfd named `kerf-<kerf's pid>` (injected `memfd_create` whose name is written on the
    /// stopped thread's stack below its red zone, or on a scratch page if that fails, the
    /// bytes put back afterwards), sizes it (`ftruncate`), kerf opens it through
    /// /proc/PID/fd/N and maps it, the target maps it near `near` (`MAP_FIXED_NOREPLACE`)
    /// and closes the descriptor. Unmap the target's side with [`Tracee::free`]; kerf's side
    /// goes when the [`SharedMem`] is dropped.
    ///
    /// Only the first `in_reach` bytes need be within reach when that is less than `len`: the
    /// rest may lie anywhere (memory the target's code addresses with 64-bit immediates).
    pub fn share_near(
        &mut self,
        near: RemoteAddr,
        len: u64,
        in_reach: u64,
    ) -> Result<SharedMem, TargetError> {
        let (lo, hi) = layout::window_near(near);
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        self.share_in(Placement { lo, hi, near, in_reach }, len, prot)
    }

    /// Like [`Tracee::share_near`], mapped with `prot` in the target (kerf's side is always
    /// read/write) somewhere in `[lo, hi)`, as near `near` as it fits: code that kerf keeps
    /// writing after the target runs it (a JIT's cache, which a forked child shares too).
    pub fn share_within(
        &mut self,
        lo: RemoteAddr,
        hi: RemoteAddr,
        near: RemoteAddr,
        len: u64,
        prot: i32,
    ) -> Result<SharedMem, TargetError> {
        self.share_in(Placement { lo, hi, near, in_reach: len }, len, prot)
    }

    fn share_in(&mut self, at: Placement, len: u64, prot: i32) -> Result<SharedMem, TargetError> {
        let len = layout::page_up(len.max(1));
        let tid = self.inject_tid()?;
        // Named after this kerf, so that another kerf sees whose heap it is (see `claim`).
        let name = format!("kerf-{}\0", std::process::id());
        let name = name.as_bytes();
        let rsp = self.regs(tid)?.sp();
        let spot = restorer::scratch_at(rsp);
        let mut old = vec![0u8; name.len()];
        let on_stack = self.read(spot, &mut old).is_ok() && self.write(spot, name).is_ok();
        let name_at = if on_stack {
            spot
        } else {
            let page = self.alloc_near(at.near, PAGE, libc::PROT_READ | libc::PROT_WRITE)?;
            self.write(page, name)?;
            page
        };
        let fd = self.syscall_on(tid, libc::SYS_memfd_create, [name_at.0, MFD_CLOEXEC, 0, 0, 0, 0]);
        let cleanup = if on_stack { self.write(spot, &old) } else { self.free(name_at, PAGE) };
        let fd = fd?;
        cleanup?;
        if fd < 0 {
            return Err(self.injected(tid, "memfd_create", fd));
        }
        let shared = self.share_fd(tid, fd, at, len, prot);
        let closed = self.syscall_on(tid, libc::SYS_close, [fd as u64, 0, 0, 0, 0, 0]);
        let shared = shared?;
        match closed {
            Ok(0) => Ok(shared),
            Ok(r) => Err(self.injected(tid, "close", r)),
            Err(e) => Err(e),
        }
    }

    fn share_fd(
        &mut self,
        tid: i32,
        fd: i64,
        at: Placement,
        len: u64,
        prot: i32,
    ) -> Result<SharedMem, TargetError> {
        let r = self.syscall_on(tid, libc::SYS_ftruncate, [fd as u64, len, 0, 0, 0, 0])?;
        if r != 0 {
            return Err(self.injected(tid, "ftruncate", r));
        }
        let (local, file) =
            self.sys.map_shared(self.pid, fd as i32, len as usize).map_err(|e| {
                let path = PathBuf::from(format!("/proc/{}/fd/{fd}", self.pid));
                TargetError::from_io(self.pid, "map", path, e)
            })?;
        let flags = libc::MAP_SHARED as u64;
        let Placement { lo, hi, near, in_reach } = at;
        match self.map_in_window(lo, hi, near, len, in_reach, prot, flags, fd as u64) {
            Ok(remote) => Ok(SharedMem::new(local, len as usize, remote, file, self.sys.clone())),
            Err(e) => {
                // SAFETY: the mapping `map_shared` just made, not handed out to anyone.
                unsafe { self.sys.unmap_local(local, len as usize) };
                Err(e)
            }
        }
    }

    /// Map `len` bytes of kerf's file descriptor `fd` read-only and shared in the target,
    /// anywhere; returns where. The target takes a copy of the descriptor from kerf (injected
    /// `pidfd_open` of kerf and `pidfd_getfd`: the target must be allowed to ptrace kerf, as
    /// a root target is), maps it and closes both descriptors, so its descriptor table ends
    /// as it was. For memory only the kernel and kerf make (a BPF map: kerf's off-CPU table),
    /// which the target cannot open by a path. Unmap it with [`Tracee::free`].
    pub fn map_kerf_fd(&mut self, fd: i32, len: u64) -> Result<RemoteAddr, TargetError> {
        let tid = self.inject_tid()?;
        let args = |a: u64, b: u64, c: u64| [a, b, c, 0, 0, 0];
        let pidfd =
            self.syscall_on(tid, libc::SYS_pidfd_open, args(std::process::id() as u64, 0, 0))?;
        if pidfd < 0 {
            return Err(self.injected(tid, "pidfd_open", pidfd));
        }
        let copy = self.syscall_on(tid, libc::SYS_pidfd_getfd, args(pidfd as u64, fd as u64, 0));
        let closed = self.syscall_on(tid, libc::SYS_close, args(pidfd as u64, 0, 0));
        let copy = copy?;
        closed?;
        if copy < 0 {
            return Err(self.injected(tid, "pidfd_getfd", copy));
        }
        let len = layout::page_up(len.max(1));
        let (prot, flags) = (libc::PROT_READ as u64, libc::MAP_SHARED as u64);
        let at = self.syscall_on(tid, libc::SYS_mmap, [0, len, prot, flags, copy as u64, 0]);
        let closed = self.syscall_on(tid, libc::SYS_close, args(copy as u64, 0, 0));
        let at = at?;
        closed?;
        // mmap's errors are the top 4095 values.
        if (-4095..0).contains(&at) {
            return Err(self.injected(tid, "mmap", at));
        }
        Ok(RemoteAddr(at as u64))
    }

    /// Unmap `[addr, addr + len)` in the target (injected `munmap`; `len` rounded up to
    /// pages).
    pub fn free(&mut self, addr: RemoteAddr, len: u64) -> Result<(), TargetError> {
        let tid = self.inject_tid()?;
        let r = self.syscall_on(
            tid,
            libc::SYS_munmap,
            [addr.0, layout::page_up(len.max(1)), 0, 0, 0, 0],
        )?;
        if r != 0 {
            return Err(self.injected(tid, "munmap", r));
        }
        Ok(())
    }

    /// Let every thread go: re-inject the signals kerf held (see the module documentation)
    /// and `PTRACE_DETACH`, so the target runs at full speed and gets its signals normally
    /// between batches. Returns how long the batch held the target. A thread that died
    /// meanwhile is reaped, not an error; the first other failure is returned after every
    /// thread has been dealt with.
    pub fn resume_detach(mut self) -> Result<Pause, TargetError> {
        let first_resume = Instant::now();
        let result = self.release_all();
        let pause = Pause {
            stopping: self.all_stopped.saturating_duration_since(self.started),
            held: first_resume.saturating_duration_since(self.all_stopped),
            resuming: first_resume.elapsed(),
        };
        result.map(|()| pause)
    }

    // ---- internals ----

    fn index(&self, tid: i32) -> Option<usize> {
        self.threads.iter().position(|t| t.tid == tid)
    }

    fn sync_tids(&mut self) {
        self.tids = self.threads.iter().map(|t| t.tid).collect();
    }

    fn remove(&mut self, tid: i32) {
        self.threads.retain(|t| t.tid != tid);
        self.sync_tids();
    }

    fn stopped(&self, tid: i32) -> Result<usize, TargetError> {
        match self.index(tid) {
            Some(i) if self.threads[i].state != State::Running && !self.released => Ok(i),
            _ => Err(TargetError::NotStopped { pid: self.pid, tid }),
        }
    }

    fn ptrace_err(&self, tid: i32, op: &'static str, e: io::Error) -> TargetError {
        if errno(&e) == libc::ESRCH {
            TargetError::ThreadExited { pid: self.pid, tid, op }
        } else {
            TargetError::Ptrace { pid: self.pid, tid, op, source: e }
        }
    }

    fn injected(&self, tid: i32, call: &'static str, r: i64) -> TargetError {
        TargetError::Injected { pid: self.pid, tid, call, errno: (-r) as i32 }
    }

    /// EPERM from `PTRACE_SEIZE`: tell a traced thread from a forbidden one from a zombie.
    /// Ok means "skip this thread": `true` if it is a zombie (still counted by the kernel),
    /// `false` if it is gone.
    fn refused(&self, tid: i32) -> Result<bool, TargetError> {
        let path = PathBuf::from(format!("/proc/{}/task/{tid}/status", self.pid));
        let Ok(status) = self.sys.read_text(&path) else { return Ok(false) }; // gone
        let field = |name: &str| {
            status.lines().find_map(|l| l.strip_prefix(name)).map(str::trim).unwrap_or("")
        };
        if field("State:").starts_with(['Z', 'X']) {
            return Ok(true);
        }
        match field("TracerPid:").parse::<i32>() {
            Ok(tracer) if tracer != 0 => {
                Err(TargetError::AlreadyTraced { pid: self.pid, tid, tracer })
            }
            _ => Err(TargetError::PtraceDenied { pid: self.pid, tid }),
        }
    }

    /// The kernel's count of the group's threads (`Threads:` of /proc/PID/status), if known.
    fn live_threads(&self) -> Option<usize> {
        let status =
            self.sys.read_text(&PathBuf::from(format!("/proc/{}/status", self.pid))).ok()?;
        status.lines().find_map(|l| l.strip_prefix("Threads:")).and_then(|v| v.trim().parse().ok())
    }

    /// Wait until no thread is `Running`, absorbing every status that arrives.
    fn wait_all(&mut self, op: &'static str, deadline: Instant) -> Result<(), TargetError> {
        let mut spins = 0;
        loop {
            let running: Vec<i32> =
                self.threads.iter().filter(|t| t.state == State::Running).map(|t| t.tid).collect();
            let Some(&first) = running.first() else { return Ok(()) };
            let mut progress = false;
            for tid in running {
                if let Some(status) = self.poll(tid, op)? {
                    self.absorb(tid, status, op)?;
                    progress = true;
                }
            }
            if !progress {
                if Instant::now() >= deadline {
                    return Err(self.timeout_err(first, op));
                }
                backoff(&mut spins);
            }
        }
    }

    /// Wait for the next status of one thread.
    fn wait_one(
        &mut self,
        tid: i32,
        op: &'static str,
        deadline: Instant,
    ) -> Result<i32, TargetError> {
        let mut spins = 0;
        loop {
            if let Some(status) = self.poll(tid, op)? {
                return Ok(status);
            }
            if self.index(tid).is_none() {
                return Err(TargetError::ThreadExited { pid: self.pid, tid, op });
            }
            if Instant::now() >= deadline {
                return Err(self.timeout_err(tid, op));
            }
            backoff(&mut spins);
        }
    }

    fn timeout_err(&self, tid: i32, op: &'static str) -> TargetError {
        let waited_ms = self.timeout.as_millis() as u64;
        TargetError::StopTimeout { pid: self.pid, tid, op, waited_ms }
    }

    /// One non-blocking wait for `tid`. ECHILD (no longer kerf's tracee) drops the thread.
    /// The leader's end, when it comes here, is kept for [`ended_status`].
    fn poll(&mut self, tid: i32, op: &'static str) -> Result<Option<i32>, TargetError> {
        match self.sys.wait_nohang(tid) {
            Ok(Some(s)) if tid == self.pid && decode(s) == Status::Gone => {
                keep_end(tid, s);
                Ok(Some(s))
            }
            Ok(s) => Ok(s),
            Err(e) if errno(&e) == libc::ECHILD => {
                self.remove(tid);
                Ok(None)
            }
            Err(e) => Err(TargetError::Ptrace { pid: self.pid, tid, op, source: e }),
        }
    }

    /// Record what a wait status says about thread `tid` (outside single-steps).
    fn absorb(&mut self, tid: i32, status: i32, op: &'static str) -> Result<(), TargetError> {
        let state = match decode(status) {
            Status::Gone => {
                self.remove(tid);
                return Ok(());
            }
            Status::Stopped { event: 0, .. } => {
                let info = self
                    .sys
                    .get_siginfo(tid)
                    .map_err(|e| self.ptrace_err(tid, "PTRACE_GETSIGINFO", e))?;
                if let Some(i) = self.index(tid) {
                    self.threads[i].pending.push_back(info);
                }
                State::Signal
            }
            Status::Stopped { event: PTRACE_EVENT_CLONE, .. } => {
                let new = self
                    .sys
                    .event_msg(tid)
                    .map_err(|e| self.ptrace_err(tid, "PTRACE_GETEVENTMSG", e))?;
                self.adopt(new as i32, op)?;
                State::InClone
            }
            // An interrupt- or group-stop, or another event stop: PTRACE_DETACH's signal
            // would be ignored in any of them.
            Status::Stopped { event: PTRACE_EVENT_STOP, .. } | Status::Stopped { .. } => {
                State::Event
            }
        };
        if let Some(i) = self.index(tid) {
            self.threads[i].state = state;
        }
        Ok(())
    }

    /// A task the kernel attached for kerf after `PTRACE_EVENT_CLONE`: a new thread of the
    /// group is tracked (its first stop is on its way); a new *process* (clone without
    /// CLONE_THREAD and with an exit signal other than SIGCHLD) is let go at once.
    fn adopt(&mut self, new: i32, op: &'static str) -> Result<(), TargetError> {
        if self.index(new).is_some() {
            return Ok(());
        }
        let ours = thread_group_of(&*self.sys, new).map_or(true, |tgid| tgid == self.pid);
        if ours {
            self.threads.push(Thread { tid: new, state: State::Running, pending: VecDeque::new() });
            self.sync_tids();
            return Ok(());
        }
        let deadline = Instant::now() + self.timeout;
        let mut spins = 0;
        while Instant::now() < deadline {
            match self.sys.wait_nohang(new) {
                Ok(Some(s)) if matches!(decode(s), Status::Stopped { .. }) => {
                    let _ = self.sys.detach(new, 0);
                    return Ok(());
                }
                Ok(None) => backoff(&mut spins),
                _ => return Ok(()),
            }
        }
        Err(self.timeout_err(new, op))
    }

    /// Set `regs` on `tid` and single-step until the trap after the `syscall` at `insn`.
    /// Returns the registers after the call.
    ///
    /// The single-step trap is a *forced* SIGTRAP: were the thread blocking SIGTRAP, the
    /// kernel would reset the process's SIGTRAP action to the default (losing the program's
    /// handler, or kerf's trap dispatcher) and unblock it. So SIGTRAP is unblocked for the
    /// step and blocked again after it. A thread stopped inside a call with a temporary mask
    /// (`sigsuspend`, `ppoll`, ...) is the exception: the kernel puts its real mask back
    /// before the injected call runs, so neither mask can be edited from here;
    /// [`Tracee::inject_tid`] avoids such threads, and kerf injects into one only to unblock
    /// SIGTRAP in its real mask, which the injected call itself does before the trap.
    fn step_syscall(
        &mut self,
        tid: i32,
        regs: &Regs,
        insn: RemoteAddr,
    ) -> Result<Regs, TargetError> {
        self.step_masked(tid, |t, _| t.step_syscall_unmasked(tid, regs, insn))
    }

    /// Run `step` on `tid` with SIGTRAP unblocked in its mask (see [`Tracee::step_syscall`]),
    /// the mask put back after. `step` is given the mask in effect when kerf may edit it (the
    /// thread is in no call with a temporary one), for [`Tracee::step_unmasked`]'s hold.
    fn step_masked<T>(
        &mut self,
        tid: i32,
        step: impl FnOnce(&mut Self, Option<u64>) -> Result<T, TargetError>,
    ) -> Result<T, TargetError> {
        let saved =
            self.sys.get_regs(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETREGS", e))?;
        let mask = if in_masking_call(&saved) {
            None
        } else {
            Some(
                self.sys
                    .get_sigmask(tid)
                    .map_err(|e| self.ptrace_err(tid, "PTRACE_GETSIGMASK", e))?,
            )
        };
        let changed = mask.filter(|m| m & SIGTRAP_BIT != 0);
        self.stepping = mask.map(|m| (tid, m));
        if let Some(m) = changed {
            self.note_step_mask();
            if let Err(e) = self.sys.set_sigmask(tid, m & !SIGTRAP_BIT) {
                self.stepping = None;
                self.unnote_mask();
                return Err(self.ptrace_err(tid, "PTRACE_SETSIGMASK", e));
            }
        }
        let r = step(self, mask.map(|m| m & !SIGTRAP_BIT));
        let back = changed.map_or(Ok(()), |m| self.put_mask_back(tid, m));
        self.stepping = None;
        self.unnote_mask();
        back?;
        r
    }

    /// Before kerf changes the stepped thread's mask (see [`Tracee::step_masked`]): the
    /// thread and the program's mask for it, for the trap guard, which puts that mask back
    /// if kerf dies before it does (the thread has the trap flag until it is parked, so a
    /// dying kerf leaves it a SIGTRAP, which the guard takes).
    fn note_step_mask(&mut self) {
        if let (TrapGuard::On(at), Some((tid, m))) = (self.guard, self.stepping) {
            self.note_mask(at, tid, m);
        }
    }

    /// Before kerf changes thread `tid`'s mask: the thread and the program's mask `m`
    /// written in the restorer at `at`, where its trap guard and its stub put it back if
    /// kerf dies first (what was there before is replaced). Best effort.
    fn note_mask(&mut self, at: RemoteAddr, tid: i32, m: u64) {
        let words = [u64::from(tid as u32), m];
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        if self.write(at + restorer::MASKED_TID, &bytes).is_ok() {
            self.noted = Some(at);
        }
    }

    /// The mask is the program's again: no thread for the guard or the stub.
    fn unnote_mask(&mut self) {
        if let Some(at) = self.noted.take() {
            let _ = self.write(at + restorer::MASKED_TID, &0u64.to_le_bytes());
        }
    }

    /// Set `tid`'s mask back to `m` after a step, unless the thread is gone.
    fn put_mask_back(&mut self, tid: i32, m: u64) -> Result<(), TargetError> {
        if self.index(tid).is_some() {
            self.sys
                .set_sigmask(tid, m)
                .map_err(|e| self.ptrace_err(tid, "PTRACE_SETSIGMASK", e))?;
        }
        Ok(())
    }

    /// Run one instruction of stopped thread `tid` (a single-step) and return its registers
    /// after it. A signal that arrives first is kept for re-injection at resume and the step
    /// taken again, with the asynchronous signals held back from then on where that is safe
    /// (see [`Tracee::step_unmasked`]). (A JIT brings a thread out of a code cache sequence
    /// this way.)
    ///
    /// From the first step until the threads are let go, SIGTRAP's action is the restorer's
    /// trap guard where the program has no handler for it (see `restorer`), so that a
    /// kerf killed during a step leaves the program running.
    pub fn step(&mut self, tid: i32) -> Result<Regs, TargetError> {
        self.guard_traps(tid);
        let before =
            self.sys.get_regs(tid).map_err(|e| self.ptrace_err(tid, "PTRACE_GETREGS", e))?;
        let mut insn = [0u8; 2];
        let read = self.read(before.pc(), &mut insn).is_ok();
        let flags_op = if read { flags_op(insn) } else { None };
        // What a `popf` will pop (read before it runs).
        let mut popped = [0u8; 2];
        if let Some(FlagsOp::Pop) = flags_op {
            self.read(before.sp(), &mut popped)?;
        }
        // Asynchronous signals may be held for the step unless it may run a system call (a
        // `syscall` there, or one the kernel restarts when the thread resumes), which may
        // read or set the mask itself (`rt_sigprocmask`, `rt_sigreturn`): the mask put back
        // after would undo its change.
        let hold = read && !calls_kernel(insn) && !restarts_syscall(&before);
        // Parked before a mask that blocks SIGTRAP is put back: a dying kerf would leave the
        // step's SIGTRAP blocked in its stop, and the kernel forces a blocked trap through
        // with the default action, guard or not (seen: threads of the kill-point test found
        // with every signal blocked, just after the program started them).
        let mut after = self.step_masked(tid, |t, mask| {
            let after = t.step_unmasked(tid, mask.filter(|_| hold))?;
            t.park(tid, "park after a single-step")?;
            Ok(after)
        })?;
        // The trap flag the step sets must not become the program's: a stepped `pushf`
        // pushes it (the kernel hides it only from the registers it reports), and once a
        // `popf` was stepped the kernel takes the flag for the program's own (this kernel
        // reports it set from the step after). Left so, the thread dies of SIGTRAP once
        // kerf detaches (python3.11 did, after kerf jit stepped threads through a block
        // counter's `pushfq`/`popfq`). So the pushed word gets the flag as the program had
        // it, and the flag after a step is the program's: what a `popf` popped, else as it
        // was before.
        let moved = after.pc() != before.pc();
        let own = before.eflags & TRAP_FLAG != 0;
        if let Some(FlagsOp::Push(width)) = flags_op {
            if moved && !own && after.sp().0 == before.sp().0.wrapping_sub(width) {
                let mut w = [0u8; 2];
                self.read(after.sp(), &mut w)?;
                let v = u16::from_le_bytes(w) & !(TRAP_FLAG as u16);
                self.write(after.sp(), &v.to_le_bytes())?;
            }
        }
        let should = match flags_op {
            Some(FlagsOp::Pop) if moved => u16::from_le_bytes(popped) & TRAP_FLAG as u16 != 0,
            _ => own,
        };
        if after.eflags & TRAP_FLAG != 0 && !should {
            after.eflags &= !TRAP_FLAG;
            self.sys
                .set_regs(tid, &after)
                .map_err(|e| self.ptrace_err(tid, "PTRACE_SETREGS", e))?;
        }
        Ok(after)
    }

    /// [`Tracee::step`]'s single-step, taken again after each signal that comes first. With
    /// `hold` (the thread's mask, which kerf may edit and the step cannot change), once one
    /// has come the asynchronous signals ([`HELD_SIGNALS`]) are blocked for the rest of the
    /// step and the mask put back after: one that comes meanwhile waits, pending, until the
    /// thread is let go. Let through, each one stops the step before its instruction again:
    /// with the other threads stopped, a process-directed signal can only go to the stepped
    /// thread, and under load (four busy loops beside it on two cores) a program's 2 ms
    /// timer came before a step up to 168 times in a row, 812 ms for one instruction; a
    /// flush that steps a few hundred times ran over kerf's 5 s limit in CI. (Only then:
    /// kerf killed while the mask is widened leaves it so, and most steps meet no signal.)
    fn step_unmasked(&mut self, tid: i32, hold: Option<u64>) -> Result<Regs, TargetError> {
        const OP: &str = "single-step";
        let deadline = Instant::now() + self.timeout;
        let mut widened = None;
        let mut r =
            Err(TargetError::StepInterrupted { pid: self.pid, tid, op: OP, stops: MAX_STEP_STOPS });
        for stops in 0..MAX_STEP_STOPS {
            match self.step_once(tid, OP, deadline) {
                Ok(Stepped::Trap(now, _)) => {
                    r = Ok(now);
                    break;
                }
                Ok(_) => {
                    if let (Some(m), None) = (hold, widened) {
                        self.note_step_mask();
                        if let Err(e) = self.sys.set_sigmask(tid, m | HELD_SIGNALS) {
                            r = Err(self.ptrace_err(tid, "PTRACE_SETSIGMASK", e));
                            break;
                        }
                        widened = Some(m);
                    }
                }
                // Out of time after signals came first: they, not a thread that would not
                // stop, are what the step could not get past.
                Err(TargetError::StopTimeout { .. }) if stops > 0 => {
                    r = Err(TargetError::StepInterrupted { pid: self.pid, tid, op: OP, stops });
                    break;
                }
                Err(e) => {
                    r = Err(e);
                    break;
                }
            }
        }
        if let Some(m) = widened {
            self.put_mask_back(tid, m)?;
        }
        r
    }

    fn step_syscall_unmasked(
        &mut self,
        tid: i32,
        regs: &Regs,
        insn: RemoteAddr,
    ) -> Result<Regs, TargetError> {
        const OP: &str = "syscall injection";
        self.sys.set_regs(tid, regs).map_err(|e| self.ptrace_err(tid, "PTRACE_SETREGS", e))?;
        let deadline = Instant::now() + self.timeout;
        for _ in 0..MAX_STEP_STOPS {
            match self.step_once(tid, OP, deadline)? {
                // Our trap: just after the instruction.
                Stepped::Trap(now, _) if now.pc() == insn + 2 => return Ok(now),
                // A signal that arrived first (kept): step again, from where it was.
                Stepped::Trap(now, status) | Stepped::Signal(now, status) if now.pc() != insn => {
                    return Err(TargetError::UnexpectedStop { pid: self.pid, tid, op: OP, status });
                }
                _ => {}
            }
        }
        Err(TargetError::StepInterrupted { pid: self.pid, tid, op: OP, stops: MAX_STEP_STOPS })
    }

    /// One single-step of stopped thread `tid`: its trap (a kernel-generated SIGTRAP), or a
    /// signal that came first (kept for re-injection at resume), with the registers after; a
    /// stop for anything else is absorbed.
    fn step_once(
        &mut self,
        tid: i32,
        op: &'static str,
        deadline: Instant,
    ) -> Result<Stepped, TargetError> {
        self.sys.single_step(tid, 0).map_err(|e| self.ptrace_err(tid, "PTRACE_SINGLESTEP", e))?;
        let i = self.stopped(tid)?;
        self.threads[i].state = State::Running;
        let status = self.wait_one(tid, op, deadline)?;
        match decode(status) {
            Status::Gone => {
                self.remove(tid);
                Err(TargetError::ThreadExited { pid: self.pid, tid, op })
            }
            Status::Stopped { sig, event: 0 } => {
                let info = self
                    .sys
                    .get_siginfo(tid)
                    .map_err(|e| self.ptrace_err(tid, "PTRACE_GETSIGINFO", e))?;
                let now = self
                    .sys
                    .get_regs(tid)
                    .map_err(|e| self.ptrace_err(tid, "PTRACE_GETREGS", e))?;
                let i = self.index(tid).expect("stopped thread is tracked");
                self.threads[i].state = State::Signal;
                if sig == libc::SIGTRAP && info.code() > 0 {
                    return Ok(Stepped::Trap(now, status));
                }
                self.threads[i].pending.push_back(info);
                Ok(Stepped::Signal(now, status))
            }
            Status::Stopped { .. } => {
                self.absorb(tid, status, op)?;
                Ok(Stepped::Other)
            }
        }
    }

    /// The thread injected system calls run on: among the stopped threads, preferably one
    /// not inside a system call with a temporary signal mask (whose real mask kerf cannot
    /// see, see [`Tracee::step_syscall`]), then the leader if it holds no signal, then one
    /// not holding a signal-delivery-stop, then any.
    fn inject_tid(&self) -> Result<i32, TargetError> {
        if self.released || self.threads.is_empty() {
            return Err(TargetError::NotStopped { pid: self.pid, tid: self.pid });
        }
        let plain = |t: &&Thread| self.sys.get_regs(t.tid).is_ok_and(|r| !in_masking_call(&r));
        // Never a thread inside clone(2) (see `State::InClone`): its new thread, stopped too,
        // is always there instead.
        let stopped =
            || self.threads.iter().filter(|t| !matches!(t.state, State::Running | State::InClone));
        let plain_stopped = || stopped().filter(plain);
        // A thread holding signals takes a signal that comes first, and its calls are tried
        // again (see `syscall_on`): one holding none goes first.
        plain_stopped()
            .find(|t| t.tid == self.pid && t.pending.is_empty())
            .or_else(|| plain_stopped().find(|t| t.state == State::Event))
            .or_else(|| plain_stopped().find(|t| t.tid == self.pid))
            .or_else(|| plain_stopped().next())
            .or_else(|| stopped().find(|t| t.tid == self.pid))
            .or_else(|| stopped().next())
            .map(|t| t.tid)
            .ok_or(TargetError::NotStopped { pid: self.pid, tid: self.pid })
    }

    /// The address of a `syscall` instruction (0f 05) in executable memory of the target:
    /// the vdso's first, then any executable mapping. Only the two bytes matter (they need
    /// not be an instruction boundary of the surrounding code): the thread executes exactly
    /// them.
    fn syscall_insn(&self) -> Result<RemoteAddr, TargetError> {
        if let Some(a) = self.syscall_insn.get() {
            return Ok(a);
        }
        let maps = self.maps()?;
        let mut exec: Vec<&Mapping> =
            maps.iter().filter(|m| m.exec && m.path.as_deref() != Some("[vsyscall]")).collect();
        exec.sort_by_key(|m| m.path.as_deref() != Some("[vdso]"));
        const CHUNK: u64 = 1 << 16;
        for m in exec {
            let mut at = m.start;
            while at + 1 < m.end {
                let n = (m.end - at).min(CHUNK) as usize;
                let mut buf = vec![0u8; n];
                if self.read(at, &mut buf).is_err() {
                    break;
                }
                if let Some(k) = buf.windows(2).position(|w| w == [0x0f, 0x05]) {
                    self.syscall_insn.set(Some(at + k as u64));
                    return Ok(at + k as u64);
                }
                at += n as u64 - 1; // overlap one byte: 0f | 05 across chunks
            }
        }
        Err(TargetError::NoSyscallInstruction { pid: self.pid })
    }

    /// Where the process's brk area starts (`start_brk`, field 47 of /proc/PID/stat), if it
    /// can be read.
    fn start_brk(&self) -> Option<RemoteAddr> {
        let stat = self.sys.read_text(&PathBuf::from(format!("/proc/{}/stat", self.pid))).ok()?;
        // The command name, in parentheses, may itself hold spaces and parentheses.
        let (_, rest) = stat.rsplit_once(')')?;
        let at: u64 = rest.split_whitespace().nth(47 - 3)?.parse().ok()?;
        (at != 0).then_some(RemoteAddr(at))
    }

    /// The mappings of the process (/proc/PID/maps, through kerf's one maps parser).
    pub fn maps(&self) -> Result<Vec<Mapping>, TargetError> {
        let path = PathBuf::from(format!("/proc/{}/maps", self.pid));
        let text = self
            .sys
            .read_text(&path)
            .map_err(|e| TargetError::from_io(self.pid, "read", path, e))?;
        parse_maps(&text).map_err(|source| TargetError::Maps { pid: self.pid, source })
    }

    /// Injected `mmap(at, len, prot, flags | MAP_FIXED_NOREPLACE, fd, 0)` at the best
    /// candidate whose first `in_window` bytes lie in `[lo, hi)` (`layout::candidates`),
    /// trying further candidates (and a fresh maps) on EEXIST.
    #[allow(clippy::too_many_arguments)]
    fn map_in_window(
        &mut self,
        lo: RemoteAddr,
        hi: RemoteAddr,
        near: RemoteAddr,
        len: u64,
        in_window: u64,
        prot: i32,
        flags: u64,
        fd: u64,
    ) -> Result<RemoteAddr, TargetError> {
        let len = layout::page_up(len.max(1));
        let tid = self.inject_tid()?;
        let flags = flags | libc::MAP_FIXED_NOREPLACE as u64;
        for _round in 0..3 {
            let mut maps = self.maps()?;
            // A program that has not grown its brk area yet has no `[heap]` mapping, but its
            // brk area starts at `start_brk` all the same: reserve its growth room there too.
            // (A heap of kerf's placed over it took the program's brk away, and the kernel
            // named kerf's mapping `[heap]`.)
            if !maps.iter().any(|m| m.path.as_deref() == Some("[heap]")) {
                maps.extend(self.start_brk().map(layout::brk_start));
            }
            let mut clash = false;
            let found = layout::candidates(&maps, lo, hi, len, in_window, near);
            for at in found.into_iter().take(32) {
                let r =
                    self.syscall_on(tid, libc::SYS_mmap, [at.0, len, prot as u64, flags, fd, 0])?;
                if r as u64 == at.0 {
                    return Ok(at);
                }
                if r == -(libc::EEXIST as i64) {
                    clash = true;
                    continue;
                }
                if r >= 0 {
                    // A kernel older than 4.17 takes MAP_FIXED_NOREPLACE for a hint: undo.
                    self.syscall_on(tid, libc::SYS_munmap, [r as u64, len, 0, 0, 0, 0])?;
                    clash = true;
                    continue;
                }
                return Err(self.injected(tid, "mmap", r));
            }
            if !clash {
                break;
            }
        }
        Err(TargetError::NoRoom { pid: self.pid, lo, hi, len })
    }

    /// Detach from every thread; see [`Tracee::resume_detach`].
    fn release_all(&mut self) -> Result<(), TargetError> {
        if self.released {
            return Ok(());
        }
        // Its page goes first, while a thread can still make the call (unless something went
        // wrong with a thread: then kerf wastes no time on it and leaves the page).
        if self.threads.iter().all(|t| t.state != State::Running) {
            self.unguard_traps();
            self.unmap_restorer();
        }
        let mut first_err = None;
        // Threads holding signals outside a delivery stop (parked after kerf's steps or
        // calls) into one, for the exact handback.
        let parked: Vec<i32> = (self.threads.iter())
            .filter(|t| t.state == State::Event && !t.pending.is_empty())
            .map(|t| t.tid)
            .collect();
        for tid in parked {
            if let Err(e) = self.enter_stand_in_stop(tid, "back to a held signal's stop") {
                first_err.get_or_insert(e);
            }
        }
        self.released = true;
        let threads = std::mem::take(&mut self.threads);
        for mut t in threads {
            if let Err(e) = self.release(&mut t) {
                first_err.get_or_insert(e);
            }
        }
        self.sync_tids();
        first_err.map_or(Ok(()), Err)
    }

    fn release(&mut self, t: &mut Thread) -> Result<(), TargetError> {
        let pid = self.pid;
        let tid = t.tid;
        if t.state == State::Running {
            // Only after an error: give it a moment to reach its stop, or we cannot detach.
            let deadline = Instant::now() + self.timeout.min(Duration::from_millis(500));
            let mut spins = 0;
            loop {
                match self.sys.wait_nohang(tid) {
                    Ok(Some(status)) => match decode(status) {
                        Status::Gone => {
                            if tid == pid {
                                keep_end(tid, status);
                            }
                            return Ok(());
                        }
                        Status::Stopped { event: 0, .. } => {
                            if let Ok(info) = self.sys.get_siginfo(tid) {
                                t.pending.push_back(info);
                            }
                            t.state = State::Signal;
                            break;
                        }
                        Status::Stopped { .. } => {
                            t.state = State::Event;
                            break;
                        }
                    },
                    Ok(None) if Instant::now() < deadline => backoff(&mut spins),
                    _ => return Err(self.timeout_err(tid, "detach")),
                }
            }
        }
        // ESRCH from here on: the thread was killed while stopped (SIGKILL wakes even traced
        // threads), typically because a thread let go before it ended the process; the
        // signals it held die with it. Not an error: reap it and go on.
        let mut sig = 0;
        if t.state == State::Signal {
            if let Some(first) = t.pending.pop_front() {
                match self.sys.set_siginfo(tid, &first) {
                    Ok(()) => sig = first.signo(),
                    Err(e) if errno(&e) == libc::ESRCH => {
                        self.reap(tid);
                        return Ok(());
                    }
                    Err(e) => return Err(self.ptrace_err(tid, "PTRACE_SETSIGINFO", e)),
                }
            }
        }
        let mut result = Ok(());
        for mut info in t.pending.drain(..) {
            // The kernel refuses si_code >= 0 and SI_TKILL from another process.
            if info.code() >= 0 || info.code() == SI_TKILL {
                info.set_code(SI_QUEUE);
            }
            match self.sys.queue_signal(pid, tid, &info) {
                Ok(()) => {}
                Err(e) if errno(&e) == libc::ESRCH => {}
                Err(e) => {
                    let e = TargetError::Ptrace { pid, tid, op: "rt_tgsigqueueinfo", source: e };
                    result = result.and(Err(e));
                }
            }
        }
        match self.sys.detach(tid, sig) {
            Ok(()) => result,
            Err(e) if errno(&e) == libc::ESRCH => {
                self.reap(tid);
                result
            }
            Err(e) => {
                result.and(Err(TargetError::Ptrace { pid, tid, op: "PTRACE_DETACH", source: e }))
            }
        }
    }

    /// Reap `tid`, killed while kerf traced it, so that the real parent can collect the
    /// process (a bounded wait: it may already be reaped).
    fn reap(&self, tid: i32) {
        let deadline = Instant::now() + Duration::from_millis(200);
        let mut spins = 0;
        while Instant::now() < deadline {
            match self.sys.wait_nohang(tid) {
                Ok(None) => backoff(&mut spins),
                Ok(Some(s)) if tid == self.pid && decode(s) == Status::Gone => {
                    keep_end(tid, s);
                    break;
                }
                _ => break,
            }
        }
    }
}

impl Drop for Tracee {
    /// Best effort: let every thread go (re-injecting held signals) so that the target is
    /// never left stopped, even when kerf fails half-way.
    fn drop(&mut self) {
        let _ = self.release_all();
    }
}

/// SIGTRAP's bit in a signal mask.
const SIGTRAP_BIT: u64 = bit(libc::SIGTRAP);
/// The signals a single-step holds back ([`Tracee::step_unmasked`]): all but those an
/// instruction raises itself (a fault, a trap, a seccomp `SIGSYS`), which the kernel forces
/// through a blocked mask by resetting the program's handler, and `SIGKILL` and `SIGSTOP`,
/// which no mask blocks.
const HELD_SIGNALS: u64 = !(bit(libc::SIGTRAP)
    | bit(libc::SIGSEGV)
    | bit(libc::SIGBUS)
    | bit(libc::SIGILL)
    | bit(libc::SIGFPE)
    | bit(libc::SIGSYS)
    | bit(libc::SIGKILL)
    | bit(libc::SIGSTOP));
/// The trap flag (TF) in `eflags`: set, the CPU traps after each instruction.
const TRAP_FLAG: u64 = 1 << 8;

/// Whether an instruction that starts with `insn` makes a system call: `syscall`,
/// `int 0x80`, `sysenter`.
fn calls_kernel(insn: [u8; 2]) -> bool {
    matches!(insn, [0x0f, 0x05] | [0xcd, 0x80] | [0x0f, 0x34])
}

/// Signal `sig`'s bit in a mask.
const fn bit(sig: i32) -> u64 {
    1 << (sig - 1)
}

/// A `pushf` (and how many bytes it pushes) or a `popf`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FlagsOp {
    Push(u64),
    Pop,
}

/// Whether an instruction that starts with `insn` is a `pushf`/`popf`: `pushfq` (`9c`, with or
/// without `rex.w`) pushes 8 bytes, `pushfw` (`66 9c`) 2; `popf` is `9d` likewise.
fn flags_op(insn: [u8; 2]) -> Option<FlagsOp> {
    match insn {
        [0x9c, _] | [0x48, 0x9c] => Some(FlagsOp::Push(8)),
        [0x66, 0x9c] => Some(FlagsOp::Push(2)),
        [0x9d, _] | [0x48 | 0x66, 0x9d] => Some(FlagsOp::Pop),
        _ => None,
    }
}

/// System calls that run with a temporary signal mask the kernel swaps back when they
/// return: `rt_sigsuspend`, `pselect6`, `ppoll`, `epoll_pwait`, `io_pgetevents`,
/// `epoll_pwait2`.
const MASKING_CALLS: [u64; 6] = [130, 270, 271, 281, 333, 441];

/// Whether a thread with registers `r`, stopped, was interrupted in a system call that the
/// kernel restarts when it resumes (`orig_rax` holds a call, `rax` an `-ERESTART*` code): it
/// then moves the PC back onto the `syscall` instruction (2 bytes), unless a signal handler
/// runs first and the call returns `EINTR` at the PC as it is. Both are places the thread may
/// execute next.
pub fn restarts_syscall(r: &Regs) -> bool {
    (r.orig_rax as i64) >= 0 && ERESTART_RANGE.contains(&(r.rax as i64))
}

/// `restart_syscall`, what the kernel runs to resume a call that returned
/// `-ERESTART_RESTARTBLOCK` (`nanosleep`, `clock_nanosleep`, `poll`, ...).
const NR_RESTART_SYSCALL: u64 = 219;
const ERESTART_RESTARTBLOCK: i64 = -516;

/// The registers a thread stopped with `saved` resumes with when no signal handler runs
/// first, made ahead: for a call the kernel restarts ([`restarts_syscall`]) `rax` holds the
/// call again (`restart_syscall` for `-ERESTART_RESTARTBLOCK`), the PC is back on the
/// `syscall`, and `orig_rax` is -1, so that the kernel does not restart it a second time;
/// any other thread's registers as they are. (The one difference from the kernel's own
/// restart: a signal with a handler that arrives before the call is made again restarts the
/// call after the handler instead of failing it with `EINTR`.)
pub fn restart_made(saved: &Regs) -> Regs {
    let mut r = *saved;
    if restarts_syscall(saved) {
        r.rax = if saved.rax as i64 == ERESTART_RESTARTBLOCK {
            NR_RESTART_SYSCALL
        } else {
            saved.orig_rax
        };
        r.rip = saved.rip.wrapping_sub(2);
        r.orig_rax = u64::MAX;
    }
    r
}

/// Whether a thread with registers `r`, stopped, was interrupted in one of
/// [`MASKING_CALLS`] that the kernel will restart (`orig_rax` names it and `rax` holds an
/// `-ERESTART*` code): its blocked mask is then the call's temporary one.
pub fn in_masking_call(r: &Regs) -> bool {
    MASKING_CALLS.contains(&r.orig_rax) && ERESTART_RANGE.contains(&(r.rax as i64))
}

/// A thread's registers `saved` made into those of system call `nr` with `args` at the
/// `syscall` instruction at `pc`: the call's number in `rax`, its arguments where the
/// syscall ABI takes them (the 4th in `r10`), and `orig_rax = -1`, so that the kernel does
/// not take the thread for one returning from an interrupted call it should restart.
fn call_regs(saved: &Regs, pc: RemoteAddr, nr: i64, args: [u64; 6]) -> Regs {
    let mut regs = *saved;
    regs.set_pc(pc);
    regs.rax = nr as u64;
    regs.orig_rax = u64::MAX;
    [regs.rdi, regs.rsi, regs.rdx, regs.r10, regs.r8, regs.r9] = args;
    regs
}

/// The `[start, end)` of every writable mapping in `maps`.
fn writable_ranges(maps: &[Mapping]) -> Vec<(u64, u64)> {
    maps.iter().filter(|m| m.write).map(|m| (m.start.0, m.end.0)).collect()
}

/// The thread group (`Tgid` of /proc/TID/status) that `tid` belongs to.
fn thread_group_of(sys: &dyn TraceSys, tid: i32) -> Result<i32, TargetError> {
    let path = PathBuf::from(format!("/proc/{tid}/status"));
    match sys.read_text(&path) {
        Ok(text) => Ok(text
            .lines()
            .find_map(|l| l.strip_prefix("Tgid:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(tid)),
        Err(e) if e.kind() == io::ErrorKind::NotFound || errno(&e) == libc::ESRCH => {
            Err(TargetError::NoSuchProcess { pid: tid })
        }
        Err(e) => Err(TargetError::from_io(tid, "read", path, e)),
    }
}

/// Where a shared mapping may go in the target: within `[lo, hi)`, as near `near` as it fits,
/// its first `in_reach` bytes at least.
#[derive(Clone, Copy)]
struct Placement {
    lo: RemoteAddr,
    hi: RemoteAddr,
    near: RemoteAddr,
    in_reach: u64,
}
