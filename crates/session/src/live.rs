//! Live targets, chosen once for every tool: a process kerf attached to or launched (held at
//! its entry point until the probes are in, its end or `exec` watched), or the running kernel;
//! why sampling stopped; the signals that end it; and [`Installed`], what a tool reads from
//! probes installed in either (one patch set, [`PatchSet`], over either back-end).
//!
//! The only code that knows the two targets apart is `install` and `finish` of
//! [`ProcessTarget`] and [`KernelTarget`]: tools name neither back-end.

use crate::backend::Backend;
use crate::checked::{self, CheckedError};
use crate::installer::PatchSet;
use crate::instrument::{InstrumentError, Instrumentation, Options, Probe, Removed, Site};
use crate::kernel::{Kernel, KernelInstrumentation, KernelOptions};
use crate::load::{analyze_process, process_aliases, AnalyzedImage, LoadError, LoadOptions};
use crate::probe::{ToolData, Where};
use kerf_arch::RemoteAddr;
use kerf_codegen::timer::{ThreadShare, TimerSample};
use kerf_os::watch::{all_mapped, program, ExitWatch};
use kerf_os::TargetError;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use kerf_os::inherit::record as record_inherited_signals;
pub use kerf_os::watch::{signal_name, End};

static STOP: AtomicBool = AtomicBool::new(false);
/// The pid of a launched command kerf holds at its entry point (0: none).
static HELD: AtomicI32 = AtomicI32::new(0);
/// What kerf says when a signal ends it while it holds a command.
static HELD_NOTE: OnceLock<String> = OnceLock::new();
/// The summary file (`--output`) kerf created, which a signal that ends it while it holds a
/// command removes: nothing was written to it yet.
static UNWRITTEN: OnceLock<std::ffi::CString> = OnceLock::new();

/// Name the summary file kerf just created (empty), for [`end_held`] to remove: a Ctrl-C
/// while the command is held left a file that read as a summary of nothing (or JSON that
/// does not parse). Call it once, before the command is launched.
pub fn remove_if_ended_early(path: &std::path::Path) {
    use std::os::unix::ffi::OsStrExt;
    if let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) {
        let _ = UNWRITTEN.set(c);
    }
}

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
    end_held();
}

/// If kerf holds a command it launched, kill it, say so and exit 1. A command held at its
/// entry point (or still on its way there) has run none of its own code and has no probe
/// kerf would need to restore, so kerf need not finish an analysis that may have seconds
/// to go. Called from the signal handler: only async-signal-safe calls.
fn end_held() {
    let held = HELD.load(Ordering::SeqCst);
    if held > 0 {
        // SAFETY: kill, write, unlink and _exit are async-signal-safe; the note was set
        // before HELD, the summary's name before the command was launched, and neither is
        // changed after.
        unsafe {
            libc::kill(held, libc::SIGKILL);
            if let Some(n) = HELD_NOTE.get() {
                libc::write(2, n.as_ptr().cast(), n.len());
            }
            if let Some(p) = UNWRITTEN.get() {
                libc::unlink(p.as_ptr());
            }
            libc::_exit(1);
        }
    }
}

/// Ctrl-C, SIGTERM and SIGHUP end the sampling loop (and so restore the target) instead of
/// killing kerf with its splices in place; before that, they end kerf (and a command it
/// holds) or stop the installation early. Call this before anything is done to a target.
///
/// SIGINT and SIGTERM are caught even when kerf was started with them ignored: a script
/// stops a kerf it ran in the background with `kill -INT`, and a non-interactive shell starts
/// background jobs with SIGINT ignored (kerf left it ignored once, and the suite's guest
/// scripts waited for it until their timeout). SIGHUP started ignored stays ignored: that
/// is `nohup kerf ...`, whose point is to outlive the terminal. The command kerf launches
/// gets every signal back as kerf was given it (`kerf_os::inherit`).
pub fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        if sig == libc::SIGHUP && kerf_os::inherit::ignored_at_start(sig) {
            continue;
        }
        // SAFETY: the handler only makes async-signal-safe calls and stores to atomics; the
        // function pointer has the C ABI `signal` expects.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// The flag the signal handler raises: an installation given it stops early.
pub fn stop_flag() -> &'static AtomicBool {
    &STOP
}

/// An error if a signal asked kerf to stop (checked between the steps that come before the
/// probes go in).
pub fn check_interrupted() -> Result<(), LiveError> {
    if STOP.load(Ordering::SeqCst) {
        return Err(LiveError::Interrupted);
    }
    Ok(())
}

/// What went wrong finding, launching or releasing a target.
#[derive(Debug)]
pub enum LiveError {
    /// A signal asked kerf to stop before any probe went in.
    Interrupted,
    /// Neither a pid nor a command was given.
    NoTarget,
    /// Launching the command failed.
    Launch(TargetError),
    /// Analysing the process's modules failed.
    Analyze { pid: i32, source: LoadError },
    /// Letting the launched command run from its entry point failed.
    Release { pid: i32, source: TargetError },
    /// Opening the kernel (kerf's driver, kallsyms, the kernel's images) failed.
    Kernel(crate::kernel::OpenError),
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LiveError::Interrupted => {
                write!(f, "interrupted before any probe went in; the target is as it was")
            }
            LiveError::NoTarget => write!(f, "give -p PID or a command after --"),
            LiveError::Launch(e) => write!(f, "{e}"),
            LiveError::Analyze { source, .. } => write!(f, "{source}"),
            LiveError::Release { source, .. } => write!(f, "{source}"),
            LiveError::Kernel(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for LiveError {}

/// A failed installation in a process, with what happened to the process if it has ended (a
/// failed installation may be the target's death, kerf's doing or not).
#[derive(Debug)]
pub struct InstallError<E> {
    pub pid: i32,
    /// How the process ended, if it has (its [`End::describe`]).
    pub ended: Option<String>,
    pub source: CheckedError<E>,
}

impl<E: fmt::Display> fmt::Display for InstallError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.ended {
            Some(end) => write!(f, "{end} while kerf installed its probes ({})", self.source),
            None => write!(f, "{}", self.source),
        }
    }
}

impl<E: fmt::Debug + fmt::Display> std::error::Error for InstallError<E> {}

/// Why sampling stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    Duration,
    Interrupted,
    /// The target ended.
    Ended(End),
    /// The target ran `exec` (now running this program): its probes went with its old one.
    Exec(Option<String>),
    /// The tool took its instrumentation out before the end for the reason given (`kerf jit`
    /// after an unmap it could not follow); the target runs on.
    Withdrawn(String),
}

impl Stop {
    /// The `stopped` text of the summary.
    pub fn describe(&self, pid: i32) -> String {
        match self {
            Stop::Duration => "duration reached".into(),
            Stop::Interrupted => "interrupted".into(),
            Stop::Ended(end) => end.describe(pid),
            Stop::Exec(program) => format!(
                "process {pid} ran exec ({}): its probes went with its old program",
                program.as_deref().unwrap_or("a program kerf cannot name")
            ),
            Stop::Withdrawn(why) => format!("taken out early: {why}"),
        }
    }

    /// Whether a signal killed the target while it was instrumented (kerf then fails, after
    /// its summary).
    pub fn killed(&self) -> bool {
        matches!(self, Stop::Ended(End::Killed { .. }))
    }

    /// Whether the target's memory is no longer the one kerf instrumented.
    pub fn is_exec(&self) -> bool {
        matches!(self, Stop::Exec(_))
    }
}

/// How long sampling goes on, and how often a tool looks at its probes.
#[derive(Clone, Copy, Debug)]
pub struct Sampling {
    /// Seconds between ticks (at least 0.001 are taken; the CLI asks users for 0.05).
    pub interval: f64,
    /// Seconds from the target's `started` until sampling stops (`None`: until the target
    /// ends, or a signal).
    pub duration: Option<f64>,
    /// The first tick at once, not an interval after sampling starts: the tracer drains
    /// rings that a launched command fills from its first instruction on (at 20 M events/s
    /// a ring of 16384 slots fills in 0.8 ms, well before a 2 ms interval is up).
    pub at_once: bool,
}

/// Call `tick` every interval until the duration (counted from `started`) is reached, `gone`
/// says the target is gone, or a signal arrives; returns why it stopped.
pub fn sample_loop(
    started: Instant,
    sampling: Sampling,
    gone: impl FnMut() -> Option<Stop>,
    tick: impl FnMut(),
) -> Stop {
    sample_loop_napping(started, sampling, gone, tick, std::thread::sleep)
}

/// [`sample_loop`], sleeping between looks with `nap` (which may return early, as a wait on
/// the target's pidfd does when it ends).
pub fn sample_loop_napping(
    started: Instant,
    sampling: Sampling,
    mut gone: impl FnMut() -> Option<Stop>,
    mut tick: impl FnMut(),
    mut nap: impl FnMut(Duration),
) -> Stop {
    let deadline = sampling.duration.map(|d| started + Duration::from_secs_f64(d));
    // Tools may sample every few ms (the tracer drains its rings); users' intervals are
    // checked on the command line.
    let interval = Duration::from_secs_f64(sampling.interval.max(0.001));
    let most = interval.min(Duration::from_millis(10));
    let mut next = Instant::now() + if sampling.at_once { Duration::ZERO } else { interval };
    loop {
        if STOP.load(Ordering::SeqCst) {
            return Stop::Interrupted;
        }
        if let Some(w) = gone() {
            return w;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Stop::Duration;
        }
        let now = Instant::now();
        if now >= next {
            tick();
            // A tick that ran late (the tracer draining busy rings for up to 50 ms) is
            // followed by the next at once, without a nap: rings of 16384 slots fill in under
            // 2 ms at 10 M events/s. Ticks never bunch up to catch up, though.
            next = (next + interval).max(now);
            continue;
        }
        nap((next - now).min(most));
    }
}

/// Which target a tool runs against, as the user named it.
#[derive(Clone, Debug, Default)]
pub struct Choice {
    /// A process to attach to; with `kernel`, the task probes are restricted to.
    pub pid: Option<i32>,
    /// A command to launch and hold at its entry point until the probes are in.
    pub command: Vec<String>,
    /// The running kernel (through kerf's driver).
    pub kernel: bool,
}

/// The one target a tool runs against, chosen once from the command line.
pub enum Target {
    Process(ProcessTarget),
    Kernel(KernelTarget),
}

impl Target {
    /// Open the target `choice` names: attach to or launch a process and analyse its modules,
    /// or open the kernel and analyse its images.
    /// Count a new sampling's duration from now (the hunt's rounds on one target).
    pub fn restart_clock(&mut self) {
        match self {
            Target::Process(p) => p.started = Instant::now(),
            Target::Kernel(k) => k.started = Instant::now(),
        }
    }

    pub fn open(choice: &Choice) -> Result<Target, LiveError> {
        if choice.kernel {
            KernelTarget::open(choice.pid).map(Target::Kernel)
        } else {
            ProcessTarget::open(choice.pid, &choice.command).map(Target::Process)
        }
    }

    /// When kerf began with the target (durations count from here).
    pub fn started(&self) -> Instant {
        match self {
            Target::Process(p) => p.started,
            Target::Kernel(k) => k.started,
        }
    }
}

/// How often the sampling loop looks for an `exec` in the target (a read of its maps).
const EXEC_CHECK: Duration = Duration::from_millis(250);

/// A process being instrumented, and the child kerf started, if it did.
pub struct ProcessTarget {
    pub pid: i32,
    pub child: Option<std::process::Child>,
    /// How kerf learns how a process it did not start ends, and whether one it started
    /// still runs (see [`ProcessTarget::fate`]).
    watch: Option<ExitWatch>,
    /// A launched command waiting at its entry point for the probes.
    hold: Option<kerf_os::ptrace::EntryHold>,
    pub started: Instant,
    /// When the sampling of the program an `exec` replaced began, carried into the new one
    /// (one duration across both); `None`: the next sampling's duration counts from its own
    /// start.
    pub sampling_since: Option<Instant>,
    /// When the last sampling's duration began (what an `exec` carries on).
    sampled_from: Option<Instant>,
    pub modules: Vec<AnalyzedImage>,
    /// Further names of each module (see `process_aliases`).
    pub aliases: Vec<Vec<String>>,
    /// What analysing the modules warned about (separate debug files, a cache refused: each
    /// said once), for the tool to pass on.
    pub warnings: Vec<String>,
    /// /proc/PID/auxv when the probes went in: an `exec` writes a new one (its entry point,
    /// its random bytes on the new stack), so kerf's heaps missing from the maps is taken for
    /// an exec only when it changed.
    auxv: Option<Vec<u8>>,
}

impl ProcessTarget {
    /// The threads of process `pid` now, by id.
    pub fn threads_of(pid: i32) -> Vec<i32> {
        kerf_os::process::threads(&kerf_os::sys::RealSys, pid)
    }

    /// Attach to `pid`, or launch `command` and hold it at its entry point (libraries loaded,
    /// none of its own code run) until [`ProcessTarget::release`]; then analyse its modules.
    pub fn open(pid: Option<i32>, command: &[String]) -> Result<ProcessTarget, LiveError> {
        let started = Instant::now();
        let mut t = match (pid, command.is_empty()) {
            (Some(pid), _) => ProcessTarget {
                pid,
                child: None,
                // Opened first, while `pid` surely names the process the user meant.
                watch: Some(ExitWatch::open(pid)),
                hold: None,
                started,
                sampling_since: None,
                sampled_from: None,
                modules: Vec::new(),
                aliases: Vec::new(),
                warnings: Vec::new(),
                auxv: None,
            },
            (None, false) => {
                check_interrupted()?;
                // From the moment the command exists, a signal ends it (see `end_held`).
                let mut on_start = |pid: i32| {
                    let note = format!(
                        "kerf: interrupted while the command was held at its entry point: \
                         killed process {pid}\n"
                    );
                    if HELD_NOTE.set(note).is_ok() {
                        HELD.store(pid, Ordering::SeqCst);
                        if STOP.load(Ordering::SeqCst) {
                            end_held(); // the signal came while it was being started
                        }
                    }
                };
                let (c, hold) = kerf_os::ptrace::spawn_at_entry_with(
                    command,
                    Duration::from_secs(10),
                    &mut on_start,
                )
                .map_err(LiveError::Launch)?;
                let pid = c.id() as i32;
                ProcessTarget {
                    pid,
                    child: Some(c),
                    // kerf's child is not reaped before kerf waits for it: the pidfd names it.
                    watch: Some(ExitWatch::open(pid)),
                    hold: Some(hold),
                    started,
                    sampling_since: None,
                    sampled_from: None,
                    modules: Vec::new(),
                    aliases: Vec::new(),
                    warnings: Vec::new(),
                    auxv: None,
                }
            }
            (None, true) => return Err(LiveError::NoTarget),
        };
        // On an error from here on, dropping `t` ends a command kerf launched.
        t.modules = analyze_process(t.pid, &LoadOptions::default(), &kerf_analysis::Quiet)
            .map_err(|source| LiveError::Analyze { pid: t.pid, source })?
            .0;
        t.warnings = t.modules.iter().flat_map(|m| m.debug_warnings.iter().cloned()).collect();
        // A cache refused or an entry rejected is said once, not once per module.
        let mut cache: Vec<&str> = Vec::new();
        for w in t.modules.iter().filter_map(|m| m.cache_warning.as_deref()) {
            if !cache.contains(&w) {
                cache.push(w);
            }
        }
        t.warnings.extend(cache.into_iter().map(String::from));
        t.aliases = process_aliases(t.pid, command.first().map(String::as_str), &t.modules);
        Ok(t)
    }

    /// Let a launched command run from its entry point (once its probes are in).
    /// On failure the hold stays, and dropping the target ends the command.
    pub fn release(&mut self) -> Result<(), LiveError> {
        let Some(hold) = &self.hold else { return Ok(()) };
        let pid = self.pid;
        let err = |source| LiveError::Release { pid, source };
        let mut tr = kerf_os::ptrace::Tracee::stop_all(pid).map_err(err)?;
        let r = hold.release(&mut tr).map_err(err);
        if r.is_ok() {
            // From here on a signal stops the sampling (and restores the probes).
            HELD.store(0, Ordering::SeqCst);
            self.hold = None;
        }
        tr.resume_detach().map_err(err)?;
        r
    }

    /// Install the probes `build` makes from the process's modules and their other names
    /// (with their timers, programs and area, and whatever else the tool keeps with them), until
    /// done or a signal asks kerf to stop. A cached analysis is checked where planning uses
    /// it; one that fails is analysed again, and the probes built again from the new one
    /// (`crate::checked`); each such rejection is a warning returned with the probes.
    #[allow(clippy::type_complexity)]
    pub fn install<T, E>(
        &mut self,
        opts: Options,
        mut build: impl FnMut(&[AnalyzedImage], &[Vec<String>]) -> Result<(Vec<Probe>, ToolData, T), E>,
    ) -> Result<(Instrumentation, Vec<Probe>, T, Vec<String>), InstallError<E>> {
        let quiet = &kerf_analysis::Quiet;
        let aliases = self.aliases.clone();
        let cancel = Some(stop_flag());
        self.auxv = self.read_auxv();
        let done = checked::install(self.pid, &mut self.modules, opts, cancel, quiet, |m| {
            build(m, &aliases)
        });
        match done {
            Ok(d) => Ok((d.inst, d.probes, d.built, d.warnings)),
            Err(source) => Err(InstallError {
                pid: self.pid,
                ended: self.fate().map(|end| end.describe(self.pid)),
                source,
            }),
        }
    }

    /// The process's auxiliary vector now, if it can be read.
    fn read_auxv(&self) -> Option<Vec<u8>> {
        use kerf_os::process::ProcSys;
        let path = std::path::PathBuf::from(format!("/proc/{}/auxv", self.pid));
        kerf_os::sys::RealSys.read(&path).ok()
    }

    /// Whether the process ran `exec` since its probes went in: its auxiliary vector changed
    /// (or either reading of it failed: then the maps alone tell, as before).
    fn execed(&self) -> bool {
        match (&self.auxv, self.read_auxv()) {
            (Some(then), Some(now)) => *then != now,
            _ => true,
        }
    }

    /// How the target ended, if it has or has started to: a process whose leader is exiting
    /// is waited for (its mappings go before its end can be seen, and an `exec` must not be
    /// concluded from them), up to a second.
    fn ending(&mut self) -> Option<End> {
        let deadline = Instant::now() + Duration::from_secs(1);
        loop {
            if let Some(end) = self.fate() {
                return Some(end);
            }
            let exiting = kerf_os::process::exiting(&kerf_os::process::RealSys, self.pid);
            if !exiting || Instant::now() >= deadline {
                return exiting.then_some(End::Unknown);
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Whether kerf launched the target (a command), rather than attached to it (`-p`).
    pub fn launched(&self) -> bool {
        self.child.is_some()
    }

    /// How the target ended, if it has.
    pub fn fate(&mut self) -> Option<End> {
        if let Some(c) = &mut self.child {
            use std::os::unix::process::ExitStatusExt;
            // Not `try_wait` while it runs: a `waitpid` from this thread also takes the stops
            // of a ptrace session another of kerf's threads holds on it (the JIT's miss
            // server), which then waits for a stop that never comes.
            if self.watch.as_ref().is_some_and(ExitWatch::running) {
                return None;
            }
            return match c.try_wait() {
                Ok(Some(st)) => Some(End::from_wait_status(st.into_raw())),
                Ok(None) => None,
                // ECHILD: kerf's own ptrace waits took its exit status (the leader's wait
                // while every thread was being stopped, as a tool took probes out); they kept
                // it.
                Err(_) => Some(match kerf_os::ptrace::ended_status(self.pid) {
                    Some(st) => End::from_wait_status(st),
                    None => End::Unknown,
                }),
            };
        }
        self.watch.as_ref()?.ended()
    }

    /// Call `tick` every interval until the duration is reached, the target ends or runs
    /// `exec` (kerf's code heaps, starting at `heaps`, vanish from its maps), or a signal
    /// arrives; returns why it stopped.
    pub fn sample(&mut self, sampling: Sampling, heaps: &[RemoteAddr], tick: impl FnMut()) -> Stop {
        self.sample_until(sampling, heaps, || false, tick)
    }

    /// [`ProcessTarget::sample`], also stopping (as interrupted) once `stop` says so (a tool
    /// that changes its probes: `kerf top`).
    pub fn sample_until(
        &mut self,
        sampling: Sampling,
        heaps: &[RemoteAddr],
        stop: impl Fn() -> bool,
        tick: impl FnMut(),
    ) -> Stop {
        // A duration counts the time the probes are in, from here, not the analysis and
        // installation before (which took longer than `--duration 6` on postgres's 320,000
        // blocks), or from the start carried over an exec; each call (the hunt's rounds on
        // one target) counts its own.
        let since = self.sampling_since.take().unwrap_or_else(Instant::now);
        self.sampled_from = Some(since);
        let pid = self.pid;
        let mut next_exec_check = Instant::now() + EXEC_CHECK;
        // Naps wait on the pidfd, which polls readable when the process ends: kerf sees the
        // end at once rather than up to 10 ms later. Once it has polled readable (the end
        // seen, or a leader gone before its threads), naps are plain sleeps, so that a look
        // that does not count it as gone yet cannot spin.
        let pidfd = self.watch.as_ref().and_then(ExitWatch::raw_fd);
        let mut readable = false;
        let gone = || {
            if stop() {
                return Some(Stop::Interrupted);
            }
            if let Some(end) = self.fate() {
                return Some(Stop::Ended(end));
            }
            if Instant::now() >= next_exec_check {
                next_exec_check += EXEC_CHECK;
                if all_mapped(pid, heaps) == Some(false) {
                    // Gone meanwhile, going (its mappings torn down as it exits), or replaced
                    // by exec. Anything else (the maps misread) is no reason to forget
                    // probes that are in: sampling goes on, and removal finds out.
                    match self.ending() {
                        Some(end) => return Some(Stop::Ended(end)),
                        None if self.execed() => return Some(Stop::Exec(program(pid))),
                        None => {}
                    }
                }
            }
            None
        };
        let nap = |d: Duration| match pidfd {
            Some(fd) if !readable => readable = kerf_os::watch::wait_readable(fd, d),
            _ => std::thread::sleep(d),
        };
        sample_loop_napping(since, sampling, gone, tick, nap)
    }

    /// When the last sampling's duration began: for the program an `exec` runs next.
    pub fn sampled_from(&self) -> Option<Instant> {
        self.sampled_from
    }

    /// After sampling, take the probes out of the target, or forget them after an `exec` (they
    /// went with the old program), then wait for a command kerf launched. A target that a
    /// signal killed meanwhile, or that ran `exec` while kerf restored it, updates `stop`.
    /// `say` tells the user about a wait for a command that runs on ([`Self::wait`]).
    pub fn finish(
        &mut self,
        inst: Instrumentation,
        stop: &mut Stop,
        say: &mut dyn FnMut(&str),
    ) -> Result<Removed, InstrumentError> {
        let heaps = inst.code_heaps();
        // An exec the sampling did not see (it stopped for another reason first: a
        // retirement that failed on the new program's bytes).
        if !stop.is_exec()
            && !matches!(stop, Stop::Ended(_))
            && all_mapped(self.pid, &heaps) == Some(false)
            && self.ending().is_none()
            && self.execed()
        {
            *stop = Stop::Exec(program(self.pid));
        }
        if stop.is_exec() {
            // (Processes forked before the exec still run the old program's splices.)
            let copies = inst.abandon();
            self.wait(say);
            return Ok(Removed { copies_after_end: copies, ..Removed::default() });
        }
        let mut removal = inst.remove();
        if !matches!(stop, Stop::Ended(_)) {
            match self.fate() {
                Some(end @ End::Killed { .. }) => *stop = Stop::Ended(end),
                None if removal.is_err() && all_mapped(self.pid, &heaps) == Some(false) => {
                    *stop = match self.ending() {
                        Some(end) => Stop::Ended(end),
                        None => Stop::Exec(program(self.pid)),
                    };
                    removal = Ok(Removed::default());
                }
                _ => {}
            }
        }
        self.wait(say);
        removal
    }

    /// Wait for a launched command after the instrumentation is gone, for its exit status.
    /// One that runs on (a server after `--duration`) is told of through `say` (the tool's
    /// events: this layer writes nothing to the terminal), and a signal to
    /// kerf (Ctrl-C) ends the wait, leaving it running; after a Ctrl-C that ended the
    /// sampling (in a terminal the command had it too, and is likely ending), kerf waits a
    /// second at most.
    pub fn wait(&mut self, say: &mut dyn FnMut(&str)) {
        let Some(c) = &mut self.child else { return };
        if let Some(w) = &self.watch {
            let asked = STOP.swap(false, Ordering::SeqCst);
            let grace = Instant::now() + Duration::from_secs(1);
            let mut said = false;
            while w.running() {
                if STOP.load(Ordering::SeqCst) || (asked && Instant::now() >= grace) {
                    say(&format!("process {} left running, without kerf's probes", self.pid));
                    return;
                }
                if !said && !asked {
                    say(&format!(
                        "the probes are out; process {} runs on: kerf waits for its end and \
                         exit status (Ctrl-C: leave it running)",
                        self.pid
                    ));
                    said = true;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = c.wait();
    }
}

impl Drop for ProcessTarget {
    /// A command kerf launched but never let past its entry point (kerf failed before its
    /// probes were in) is ended rather than left spinning.
    fn drop(&mut self) {
        if self.hold.is_some() {
            HELD.store(0, Ordering::SeqCst);
            if let Some(c) = &mut self.child {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// The running kernel, analysed, with the options its probes go in with.
pub struct KernelTarget {
    pub kernel: Kernel,
    /// The task probes are restricted to (`-p` with `--kernel`).
    pub only_pid: Option<u32>,
    pub started: Instant,
}

impl KernelTarget {
    /// Open kerf's driver and analyse the kernel's text and modules.
    pub fn open(only_pid: Option<i32>) -> Result<KernelTarget, LiveError> {
        let started = Instant::now();
        let cache = crate::cache::default_dir();
        let kernel = Kernel::open(true, cache.as_deref(), &kerf_analysis::Quiet)
            .map_err(LiveError::Kernel)?;
        Ok(KernelTarget { kernel, only_pid: only_pid.map(|p| p as u32), started })
    }

    /// Plan, write and splice `probes` (with `tool`'s timers, programs and area) into the
    /// kernel.
    pub fn install(
        &self,
        probes: &[Probe],
        tool: &ToolData,
        force_kind: Option<kerf_patch::SpliceKind>,
        no_traps: bool,
    ) -> Result<KernelInstrumentation<'_>, InstrumentError> {
        let opts = KernelOptions { force_kind, only_pid: self.only_pid, no_traps };
        let installed =
            KernelInstrumentation::install(&self.kernel, probes, tool, opts, Some(stop_flag()));
        // A cached analysis that failed its check: nothing went in. Its entry goes, so that
        // the next run analyses the kernel afresh (the probes were resolved from this one,
        // and the images are borrowed here, so this run cannot start over as a process does).
        if let Err(InstrumentError::Analysis { module, .. }) = &installed {
            self.kernel.images[*module].forget_cache_entry();
        }
        installed
    }

    /// The offset of `task_struct.pid` in the running kernel, from its BTF (`None`: no BTF,
    /// or no such member).
    pub fn task_pid_offset(&self) -> Option<u32> {
        self.task_member("pid")
    }

    /// The offset of `task_struct.tgid` (the process id of a task), from BTF.
    pub fn task_tgid_offset(&self) -> Option<u32> {
        self.task_member("tgid")
    }

    fn task_member(&self, name: &str) -> Option<u32> {
        let btf = self.kernel.driver.btf().ok()?;
        kerf_analysis::image::btf::member_offset(&btf, "task_struct", name)
    }

    /// Take the probes out of the kernel.
    pub fn finish(&self, inst: KernelInstrumentation<'_>) -> Result<(), InstrumentError> {
        inst.remove().map(|_| ())
    }
}

/// How the splicing went, for the line a tool says once its probes are in.
#[derive(Clone, Debug, Default)]
pub struct Spliced {
    /// System calls guarded for trap splices (a process).
    pub guards: usize,
    /// The longest time the target was stopped, and the longest of one splice batch (a
    /// process; zero in the kernel, whose driver splices with the machine running).
    pub longest_pause: Duration,
    pub longest_splice_pause: Duration,
    /// How long planning, writing and splicing took, as the installer measured it (in a
    /// process the tool measures its own, around the cache checks).
    pub splice_time: Option<Duration>,
    /// Of that, the time the kernel's int3s took to go in (the kernel).
    pub int3_time: Option<Duration>,
    /// Where the installation spent its time: each phase with its total, in the order they
    /// first ran.
    pub phases: Vec<(&'static str, Duration)>,
}

/// A probe left out: no splice kind could take it, or the kernel's driver refused it.
#[derive(Clone, Debug)]
pub struct Refusal<'a> {
    /// The probe left out (an index into the tool's probes).
    pub probe: usize,
    pub label: &'a str,
    pub addr: u64,
    pub reason: String,
}

/// A trap splice and how often a thread took its `int3` (a signal each).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrapHit {
    pub label: String,
    pub addr: u64,
    pub hits: u64,
    /// A signal-mask guard kerf added for its traps (a trap itself where no jump fits), not
    /// a point the tool asked for.
    pub guard: bool,
}

/// Probes installed in a process or in the kernel, as the tools read them.
pub trait Installed {
    /// The site probe `i` is at (`None`: the kernel's driver refused it).
    fn site(&self, i: usize) -> Option<&Site>;
    /// Every site spliced for the tool's probes.
    fn sites(&self) -> &[Site];
    /// A `Count` probe's count, or a `Flag` probe's byte.
    fn count(&self, i: usize) -> u64;
    /// Take these sites' splices out while the others stay live
    /// ([`crate::installer::PatchSet::retire`]).
    fn retire(&mut self, sites: &[usize]) -> Result<usize, InstrumentError>;
    /// The data heap whose tool area holds `Flag` probe `i`'s byte.
    fn flag_heap(&self, i: usize) -> Option<usize>;
    fn timer(&self, t: usize, now: u64) -> TimerSample;
    /// Each thread's share of timer `t`, with its slot's owner ([`Installed::thread_owner`]).
    fn timer_threads(&self, t: usize, now: u64) -> Vec<(u64, ThreadShare)>;
    /// TSC and monotonic time when the probes went in.
    fn installed_at(&self) -> (u64, Instant);
    /// The probes left out.
    fn refused(&self) -> Vec<Refusal<'_>>;
    fn spliced(&self) -> Spliced;
    /// Where kerf's code heaps start in the target (a process: they vanish from its maps
    /// when it runs `exec`; none in the kernel).
    fn code_heaps(&self) -> Vec<RemoteAddr>;
    /// Which target the probes are in.
    fn target(&self) -> Where;
    /// The heaps holding the tool's area (see [`ToolData`]).
    fn areas(&self) -> Vec<usize>;
    /// The 8 bytes at `off` of the tool's area in heap `heap` (shared memory).
    fn area_load(&self, heap: usize, off: u64) -> u64;
    /// Store 8 bytes at `off` of the tool's area in heap `heap`.
    fn area_store(&self, heap: usize, off: u64, v: u64);
    /// The tool's area in heap `heap` as words (to the heap's end): a reader of many words
    /// loads them straight.
    fn area_words(&self, heap: usize) -> Option<&[std::sync::atomic::AtomicU64]>;
    /// The tool's ring area in heap `heap` as words ([`ToolData::rings`]).
    fn ring_words(&self, heap: usize) -> Option<&[std::sync::atomic::AtomicU64]>;
    /// Store 8 bytes at `off` of the tool's ring area in heap `heap`.
    fn ring_store(&self, heap: usize, off: u64, v: u64);
    /// The owner of thread table slot `slot` in heap `heap`: `(pid << 32) | tid` of the
    /// thread whose per-thread state (and ring) it is, or 0 where the target's thread ids
    /// are not known.
    fn thread_owner(&self, heap: usize, slot: u64) -> u64;
    /// Free the thread table slots of `pid`'s forked children that have ended, where
    /// `drained(heap, slot)`; how many ([`PatchSet::free_ended_children`]).
    fn free_ended_children(&self, pid: i32, drained: &dyn Fn(usize, u64) -> bool) -> usize;
    /// What taking probes out did in the children the target forked.
    fn forks(&self) -> crate::instrument::ForkStats;
    /// How often each trap splice was taken so far, most first (`None`: the target cannot
    /// tell).
    fn trap_hits(&self) -> Option<Vec<TrapHit>>;
    /// Context switches the off-CPU clock of virtual time missed (`None`: no such clock, or
    /// the kernel cannot say).
    fn off_cpu_missed(&self) -> Option<u64>;
    /// Switches back in that the kernel did not report to that clock (`None`: no such clock,
    /// or it cannot tell).
    fn off_cpu_unreported(&self) -> Option<u64>;
}

impl<B: Backend> Installed for PatchSet<B> {
    fn site(&self, i: usize) -> Option<&Site> {
        self.site_of(i)
    }
    fn sites(&self) -> &[Site] {
        PatchSet::sites(self)
    }
    fn count(&self, i: usize) -> u64 {
        PatchSet::count(self, i)
    }
    fn retire(&mut self, sites: &[usize]) -> Result<usize, InstrumentError> {
        PatchSet::retire(self, sites)
    }
    fn flag_heap(&self, i: usize) -> Option<usize> {
        PatchSet::flag_heap(self, i)
    }
    fn timer(&self, t: usize, now: u64) -> TimerSample {
        PatchSet::timer(self, t, now)
    }
    fn forks(&self) -> crate::instrument::ForkStats {
        PatchSet::forks(self)
    }
    fn trap_hits(&self) -> Option<Vec<TrapHit>> {
        PatchSet::trap_hits(self)
    }
    fn off_cpu_missed(&self) -> Option<u64> {
        PatchSet::off_cpu_missed(self)
    }
    fn off_cpu_unreported(&self) -> Option<u64> {
        PatchSet::off_cpu_unreported(self)
    }
    fn timer_threads(&self, t: usize, now: u64) -> Vec<(u64, ThreadShare)> {
        PatchSet::timer_threads(self, t, now)
    }
    fn installed_at(&self) -> (u64, Instant) {
        self.installed_at
    }
    fn refused(&self) -> Vec<Refusal<'_>> {
        let r = self.refused.iter();
        r.map(|r| Refusal {
            probe: r.probe,
            label: &r.label,
            addr: r.addr,
            reason: r.reason.to_string(),
        })
        .collect()
    }
    fn spliced(&self) -> Spliced {
        let pauses = self.pauses();
        Spliced {
            guards: self.guards(),
            longest_pause: pauses.longest,
            longest_splice_pause: pauses.longest_splice,
            splice_time: Some(self.splice_time),
            int3_time: pauses.int3,
            phases: self.phases.iter().collect(),
        }
    }
    fn code_heaps(&self) -> Vec<RemoteAddr> {
        PatchSet::code_heaps(self)
    }
    fn target(&self) -> Where {
        self.target()
    }
    fn areas(&self) -> Vec<usize> {
        PatchSet::areas(self)
    }
    fn area_load(&self, heap: usize, off: u64) -> u64 {
        PatchSet::area_load(self, heap, off)
    }
    fn area_store(&self, heap: usize, off: u64, v: u64) {
        PatchSet::area_store(self, heap, off, v)
    }
    fn area_words(&self, heap: usize) -> Option<&[std::sync::atomic::AtomicU64]> {
        PatchSet::area_words(self, heap)
    }
    fn ring_words(&self, heap: usize) -> Option<&[std::sync::atomic::AtomicU64]> {
        PatchSet::ring_words(self, heap)
    }
    fn ring_store(&self, heap: usize, off: u64, v: u64) {
        PatchSet::ring_store(self, heap, off, v)
    }
    fn thread_owner(&self, heap: usize, slot: u64) -> u64 {
        PatchSet::thread_owner(self, heap, slot)
    }
    fn free_ended_children(&self, pid: i32, drained: &dyn Fn(usize, u64) -> bool) -> usize {
        PatchSet::free_ended_children(self, pid, drained)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_say_how_sampling_ended() {
        let cases = [
            (Stop::Duration, "duration reached"),
            (Stop::Interrupted, "interrupted"),
            (Stop::Ended(End::Exited(0)), "process 7 exited with code 0"),
            (
                Stop::Exec(Some("/bin/sh".into())),
                "process 7 ran exec (/bin/sh): its probes went with its old program",
            ),
            (
                Stop::Exec(None),
                "process 7 ran exec (a program kerf cannot name): its probes went with its old program",
            ),
            (Stop::Withdrawn("why".into()), "taken out early: why"),
        ];
        for (stop, text) in cases {
            assert_eq!(stop.describe(7), text);
            assert!(!stop.killed(), "{stop:?}");
        }
        assert!(Stop::Ended(End::Killed { signal: 9, core_dumped: false }).killed());
        assert!(Stop::Exec(None).is_exec() && !Stop::Duration.is_exec());
    }

    #[test]
    fn sampling_stops_when_the_target_is_gone_before_any_tick() {
        let mut ticks = 0;
        let long = Sampling { interval: 0.05, duration: Some(60.0), at_once: false };
        let stop = sample_loop(Instant::now(), long, || Some(Stop::Exec(None)), || ticks += 1);
        assert_eq!(stop, Stop::Exec(None));
        assert_eq!(ticks, 0);
    }

    /// `at_once`: the first tick before an interval has passed (the target here is gone at
    /// the second look, 10 ms in, long before the 60 s interval).
    #[test]
    fn sampling_at_once_ticks_before_the_first_interval() {
        for (at_once, want) in [(true, 1), (false, 0)] {
            let (mut ticks, mut looks) = (0, 0);
            let s = Sampling { interval: 60.0, duration: None, at_once };
            let gone = || {
                looks += 1;
                (looks > 1).then_some(Stop::Exec(None))
            };
            assert_eq!(sample_loop(Instant::now(), s, gone, || ticks += 1), Stop::Exec(None));
            assert_eq!(ticks, want, "at_once {at_once}");
        }
    }

    #[test]
    fn sampling_stops_at_a_duration_already_past() {
        let mut ticks = 0;
        let started = Instant::now() - Duration::from_secs(2);
        let past = Sampling { interval: 0.05, duration: Some(1.0), at_once: false };
        assert_eq!(sample_loop(started, past, || None, || ticks += 1), Stop::Duration);
        assert_eq!(ticks, 0);
    }

    #[test]
    fn a_process_target_needs_a_pid_or_a_command() {
        let e = ProcessTarget::open(None, &[]).err().expect("nothing to open");
        assert!(matches!(e, LiveError::NoTarget));
        assert_eq!(e.to_string(), "give -p PID or a command after --");
    }
}
