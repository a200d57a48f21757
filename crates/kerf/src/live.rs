//! What `kerf count` and `kerf time` share: finding or launching the target process,
//! analysing its modules, resolving specs, the sampling loop with its stop conditions
//! (duration, target exit, Ctrl-C, SIGTERM), and the JSON fields every point reports.

use kerf_codegen::timer::TimerSample;
use kerf_os::watch::{all_mapped, program, signal_name, End, ExitWatch};
use kerf_patch::SpliceKind;
use kerf_session::instrument::{InstrumentError, Instrumentation, Options, Probe, Removed, Site};
use kerf_session::kernel::KernelInstrumentation;
use kerf_session::spec::{self, Point, Spec};
use kerf_session::{analyze_process, process_aliases, AnalyzedImage, LoadOptions};
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Options of every live tool.
#[derive(clap::Args, Clone, Debug)]
pub struct LiveArgs {
    /// Process to instrument; with --kernel, the task (thread id) probes are restricted to.
    #[arg(short, long, conflicts_with = "command")]
    pub pid: Option<i32>,
    /// Run probes only in this thread of the process.
    #[arg(long)]
    pub tid: Option<i32>,
    /// Seconds between table updates (at least 0.05).
    #[arg(long, default_value_t = 1.0, value_parser = seconds, value_name = "SECONDS")]
    pub interval: f64,
    /// Stop after this many seconds (default: until the target ends or runs exec, or
    /// Ctrl-C). The summary says how the target ended; kerf exits 1 if a signal killed it.
    #[arg(long, value_parser = seconds, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// End with one JSON object summarising every point (instead of the final table).
    #[arg(long)]
    pub json: bool,
    /// Write the summary (the JSON object, or the final table) to FILE. Without it the
    /// summary and the live table go to stdout, except when kerf launches a command: that
    /// command keeps stdout to itself, and kerf's output goes to stderr (the JSON object on a
    /// line of its own).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Use this splice kind for every point (testing): jump5, jump2 or trap.
    #[arg(long, value_parser = ["jump5", "jump2", "trap"])]
    pub force_kind: Option<String>,
    /// Instrument the running kernel (needs kerf's driver, kerf.ko).
    #[arg(long, conflicts_with_all = ["tid", "command"])]
    pub kernel: bool,
    /// Command to launch (held at its entry point until the probes are in): `-- CMD ARGS`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// The longest `--duration` or `--interval` taken: about 31 years, far below what a
/// `Duration` or an `Instant` can hold.
const MAX_SECONDS: f64 = 1e9;

/// A number of seconds for `--duration` and `--interval`, checked when the arguments are
/// read, before anything is done to a target: finite, above zero, at most [`MAX_SECONDS`].
pub(crate) fn seconds(text: &str) -> Result<f64, String> {
    let v: f64 = text.trim().parse().map_err(|_| "not a number of seconds".to_string())?;
    if !v.is_finite() {
        return Err("not a finite number of seconds".into());
    }
    if v <= 0.0 {
        return Err("must be more than 0 seconds".into());
    }
    if v > MAX_SECONDS {
        return Err(format!("more than {MAX_SECONDS:e} seconds"));
    }
    Ok(v)
}

impl LiveArgs {
    /// The options of a kernel instrumentation: with --kernel, `-p` names the task.
    pub fn kernel_options(&self) -> kerf_session::kernel::KernelOptions {
        kerf_session::kernel::KernelOptions {
            force_kind: self.force_kind(),
            only_pid: self.pid.map(|p| p as u32),
        }
    }

    pub fn force_kind(&self) -> Option<SpliceKind> {
        match self.force_kind.as_deref() {
            Some("trap") => Some(SpliceKind::Trap),
            Some("jump5") => Some(SpliceKind::Jump5),
            Some("jump2") => Some(SpliceKind::Jump2),
            _ => None,
        }
    }
}

/// Where one kind of kerf's output goes.
enum Sink {
    Stdout,
    Stderr,
    File(std::fs::File),
}

/// Where kerf writes the live table and the final summary (see `--output`): never into the
/// stdout of a command it launched, which belongs to that command.
pub struct Output {
    live: Sink,
    summary: Sink,
}

impl Output {
    /// Open `--output` (before anything is done to a target, so that a bad path costs
    /// nothing).
    pub fn open(args: &LiveArgs) -> Result<Output, String> {
        let ours = || if args.command.is_empty() { Sink::Stdout } else { Sink::Stderr };
        let summary = match &args.output {
            Some(p) => {
                Sink::File(std::fs::File::create(p).map_err(|e| format!("{}: {e}", p.display()))?)
            }
            None => ours(),
        };
        Ok(Output { live: ours(), summary })
    }

    fn write(sink: &mut Sink, text: &str) {
        use std::io::Write;
        // A closed pipe or a full disk ends nothing: the target must still be restored.
        let _ = match sink {
            Sink::Stdout => std::io::stdout().lock().write_all(text.as_bytes()),
            Sink::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
            Sink::File(f) => f.write_all(text.as_bytes()),
        };
    }

    /// One update of the live table.
    pub fn live(&mut self, text: &str) {
        Output::write(&mut self.live, text);
    }

    /// The final summary.
    pub fn summary(&mut self, text: &str) {
        Output::write(&mut self.summary, text);
    }
}

static STOP: AtomicBool = AtomicBool::new(false);
/// The pid of a launched command kerf holds at its entry point (0: none).
static HELD: AtomicI32 = AtomicI32::new(0);
/// What kerf says when a signal ends it while it holds a command.
static HELD_NOTE: OnceLock<String> = OnceLock::new();

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
        // SAFETY: kill, write and _exit are async-signal-safe; the note was set before
        // HELD, and is never changed after.
        unsafe {
            libc::kill(held, libc::SIGKILL);
            if let Some(n) = HELD_NOTE.get() {
                libc::write(2, n.as_ptr().cast(), n.len());
            }
            libc::_exit(1);
        }
    }
}

/// Ctrl-C, SIGTERM and SIGHUP end the sampling loop (and so restore the target) instead of
/// killing kerf with its splices in place; before that, they end kerf (and a command it
/// holds) or stop the installation early. Call this before anything is done to a target.
pub fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
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
pub fn check_interrupted() -> Result<(), String> {
    if STOP.load(Ordering::SeqCst) {
        return Err("interrupted before any probe went in; the target is as it was".into());
    }
    Ok(())
}

/// Why sampling stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    Duration,
    Interrupted,
    /// The target ended.
    Ended(End),
    /// The target ran `exec` (now running this program): its probes went with its old one.
    Exec(Option<String>),
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
        }
    }

    /// The summary's `target` object: what became of the target (`null`: it runs on).
    pub fn json(&self) -> serde_json::Value {
        match self {
            Stop::Ended(End::Exited(code)) => json!({"exit_code": code}),
            Stop::Ended(End::Killed { signal, core_dumped }) => json!({
                "signal": signal, "signal_name": signal_name(*signal), "core_dumped": core_dumped,
            }),
            Stop::Ended(End::Unknown) => json!({"exited": true}),
            Stop::Exec(program) => json!({"exec": program}),
            Stop::Duration | Stop::Interrupted => serde_json::Value::Null,
        }
    }

    /// kerf's error when a signal killed the target while it was instrumented (kerf then
    /// exits non-zero, after its summary).
    pub fn failure(&self, pid: i32) -> Option<String> {
        matches!(self, Stop::Ended(End::Killed { .. }))
            .then(|| format!("{} while instrumented", self.describe(pid)))
    }

    /// Whether the target's memory is no longer the one kerf instrumented.
    pub fn is_exec(&self) -> bool {
        matches!(self, Stop::Exec(_))
    }
}

/// How often the sampling loop looks for an `exec` in the target (a read of its maps).
const EXEC_CHECK: Duration = Duration::from_millis(250);

/// A process being instrumented, and the child kerf started, if it did.
pub struct Target {
    pub pid: i32,
    pub child: Option<std::process::Child>,
    /// How kerf learns how a process it did not start ends.
    watch: Option<ExitWatch>,
    /// A launched command waiting at its entry point for the probes.
    hold: Option<kerf_os::ptrace::EntryHold>,
    pub started: Instant,
    pub modules: Vec<AnalyzedImage>,
    /// Further names of each module (see `process_aliases`).
    pub aliases: Vec<Vec<String>>,
}

impl Target {
    /// Attach to `-p PID`, or launch the command and hold it at its entry point (libraries
    /// loaded, none of its own code run) until [`Target::release`]; then analyse its modules.
    pub fn open(args: &LiveArgs) -> Result<Target, String> {
        let started = Instant::now();
        let mut t = match (args.pid, args.command.is_empty()) {
            (Some(pid), _) => Target {
                pid,
                child: None,
                // Opened first, while `pid` surely names the process the user meant.
                watch: Some(ExitWatch::open(pid)),
                hold: None,
                started,
                modules: Vec::new(),
                aliases: Vec::new(),
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
                    &args.command,
                    Duration::from_secs(10),
                    &mut on_start,
                )
                .map_err(|e| e.to_string())?;
                let pid = c.id() as i32;
                Target {
                    pid,
                    child: Some(c),
                    watch: None,
                    hold: Some(hold),
                    started,
                    modules: Vec::new(),
                    aliases: Vec::new(),
                }
            }
            (None, true) => return Err("give -p PID or a command after --".into()),
        };
        // On an error from here on, dropping `t` ends a command kerf launched.
        t.modules = analyze_process(t.pid, &LoadOptions::default(), &kerf_analysis::Quiet)
            .map_err(|e| e.to_string())?
            .0;
        for w in t.modules.iter().flat_map(|m| &m.debug_warnings) {
            eprintln!("kerf: warning: {w}");
        }
        // A cache refused or an entry rejected is said once, not once per module.
        let mut warned: Vec<&str> = Vec::new();
        for w in t.modules.iter().filter_map(|m| m.cache_warning.as_deref()) {
            if !warned.contains(&w) {
                eprintln!("kerf: warning: {w}");
                warned.push(w);
            }
        }
        t.aliases = process_aliases(t.pid, args.command.first().map(String::as_str), &t.modules);
        Ok(t)
    }

    /// Let a launched command run from its entry point (once its probes are in).
    /// On failure the hold stays, and dropping the target ends the command.
    pub fn release(&mut self) -> Result<(), String> {
        let Some(hold) = &self.hold else { return Ok(()) };
        let mut tr = kerf_os::ptrace::Tracee::stop_all(self.pid).map_err(|e| e.to_string())?;
        let r = hold.release(&mut tr).map_err(|e| e.to_string());
        if r.is_ok() {
            // From here on a signal stops the sampling (and restores the probes).
            HELD.store(0, Ordering::SeqCst);
            self.hold = None;
        }
        tr.resume_detach().map_err(|e| e.to_string())?;
        r
    }

    /// Install the probes `build` makes from the process's modules and their other names
    /// (with the number of timer blocks, and whatever else the tool keeps with them), until
    /// done or a signal asks kerf to stop. A cached analysis is checked where planning uses
    /// it; one that fails is analysed again, with a warning, and the probes built again from
    /// the new one (`kerf_session::checked`).
    pub fn install<T>(
        &mut self,
        opts: Options,
        mut build: impl FnMut(
            &[AnalyzedImage],
            &[Vec<String>],
        ) -> Result<(Vec<Probe>, usize, T), String>,
    ) -> Result<(Instrumentation, Vec<Probe>, T), String> {
        let quiet = &kerf_analysis::Quiet;
        let aliases = self.aliases.clone();
        let cancel = Some(stop_flag());
        let done =
            kerf_session::checked::install(self.pid, &mut self.modules, opts, cancel, quiet, |m| {
                build(m, &aliases)
            });
        let done = match done {
            Ok(d) => d,
            Err(e) => return Err(self.explain(e)),
        };
        for w in &done.warnings {
            eprintln!("kerf: warning: {w}");
        }
        Ok((done.inst, done.probes, done.built))
    }

    /// How the target ended, if it has.
    pub fn fate(&mut self) -> Option<End> {
        if let Some(c) = &mut self.child {
            use std::os::unix::process::ExitStatusExt;
            return match c.try_wait() {
                Ok(Some(st)) => Some(End::from_wait_status(st.into_raw())),
                _ => None,
            };
        }
        self.watch.as_ref()?.ended()
    }

    /// An error of kerf's, with what happened to the target if it has ended (a failed
    /// installation may be the target's death, kerf's doing or not).
    pub fn explain(&mut self, err: impl std::fmt::Display) -> String {
        match self.fate() {
            Some(end) => {
                format!("{} while kerf installed its probes ({err})", end.describe(self.pid))
            }
            None => err.to_string(),
        }
    }

    /// Call `tick` every `interval` until the duration is reached, the target ends or runs
    /// `exec` (kerf's code heaps, starting at `heaps`, vanish from its maps), or a signal
    /// arrives; returns why it stopped.
    pub fn sample(
        &mut self,
        args: &LiveArgs,
        heaps: &[kerf_arch::RemoteAddr],
        tick: impl FnMut(),
    ) -> Stop {
        let (started, pid) = (self.started, self.pid);
        let mut next_exec_check = Instant::now() + EXEC_CHECK;
        let gone = || {
            if let Some(end) = self.fate() {
                return Some(Stop::Ended(end));
            }
            if Instant::now() >= next_exec_check {
                next_exec_check += EXEC_CHECK;
                if all_mapped(pid, heaps) == Some(false) {
                    // Gone meanwhile, or replaced by exec.
                    return Some(match self.fate() {
                        Some(end) => Stop::Ended(end),
                        None => Stop::Exec(program(pid)),
                    });
                }
            }
            None
        };
        sample_loop(started, args, gone, tick)
    }

    /// Wait for a launched command after the instrumentation is gone.
    pub fn finish(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.wait();
        }
    }
}

impl Drop for Target {
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

/// Resolve spec texts against analysed images (a process's modules or the kernel's), which
/// also answer to `aliases` (per image; may be empty).
pub fn resolve(
    images: &[AnalyzedImage],
    aliases: &[Vec<String>],
    specs: &[Spec],
) -> Result<Vec<Point>, String> {
    let named: Vec<(&str, &kerf_analysis::Analysis)> =
        images.iter().map(|m| (m.analysis.image.as_str(), &m.analysis)).collect();
    let reader = |m: usize, a: kerf_arch::ImageAddr| {
        let (base, bytes) = images[m].code_region(a)?;
        let off = (a.0 - base.0) as usize;
        Some((a, bytes.get(off..(off + 4096).min(bytes.len()))?.to_vec()))
    };
    spec::resolve_with_aliases(specs, &named, aliases, &reader).map_err(|e| e.to_string())
}

/// After sampling, take the probes out of the target, or forget them after an `exec` (they
/// went with the old program), then wait for a command kerf launched. A target that a
/// signal killed meanwhile, or that ran `exec` while kerf restored it, updates `stop`.
pub fn finish_session(
    target: &mut Target,
    inst: Instrumentation,
    stop: &mut Stop,
) -> Result<Removed, InstrumentError> {
    if stop.is_exec() {
        inst.abandon();
        target.finish();
        return Ok(Removed::default());
    }
    let heaps = inst.code_heaps();
    let mut removal = inst.remove();
    if !matches!(stop, Stop::Ended(_)) {
        match target.fate() {
            Some(end @ End::Killed { .. }) => *stop = Stop::Ended(end),
            None if removal.is_err() && all_mapped(target.pid, &heaps) == Some(false) => {
                *stop = Stop::Exec(program(target.pid));
                removal = Ok(Removed::default());
            }
            _ => {}
        }
    }
    target.finish();
    removal
}

/// Call `tick` every interval until the duration (counted from `started`) is reached, `gone`
/// says the target is gone, or a signal arrives; returns why it stopped.
pub fn sample_loop(
    started: Instant,
    args: &LiveArgs,
    mut gone: impl FnMut() -> Option<Stop>,
    mut tick: impl FnMut(),
) -> Stop {
    let deadline = args.duration.map(|d| started + Duration::from_secs_f64(d));
    let interval = Duration::from_secs_f64(args.interval.max(0.05));
    let mut next = Instant::now() + interval;
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
        if Instant::now() >= next {
            tick();
            next += interval;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Probes installed in a process or in the kernel, as the tools read them.
pub trait Installed {
    /// The site probe `i` is at (`None`: the kernel's driver refused it).
    fn site(&self, i: usize) -> Option<&Site>;
    fn count(&self, i: usize) -> u64;
    fn timer(&self, t: usize, now: u64) -> TimerSample;
    /// TSC and monotonic time when the probes went in.
    fn installed_at(&self) -> (u64, Instant);
}

impl Installed for Instrumentation {
    fn site(&self, i: usize) -> Option<&Site> {
        self.site_of(i)
    }
    fn count(&self, i: usize) -> u64 {
        Instrumentation::count(self, i)
    }
    fn timer(&self, t: usize, now: u64) -> TimerSample {
        Instrumentation::timer(self, t, now)
    }
    fn installed_at(&self) -> (u64, Instant) {
        self.installed_at
    }
}

impl Installed for KernelInstrumentation<'_> {
    fn site(&self, i: usize) -> Option<&Site> {
        self.site_of(i)
    }
    fn count(&self, i: usize) -> u64 {
        KernelInstrumentation::count(self, i)
    }
    fn timer(&self, t: usize, now: u64) -> TimerSample {
        KernelInstrumentation::timer(self, t, now)
    }
    fn installed_at(&self) -> (u64, Instant) {
        self.installed_at
    }
}

/// The line printed once every kernel probe is in.
pub fn kernel_spliced_line(inst: &KernelInstrumentation<'_>) -> String {
    let kinds = |k: SpliceKind| inst.sites().iter().filter(|p| p.kind == k).count();
    format!(
        "kerf: {} points spliced in the kernel ({} jump5, {} jump2, {} trap; {} left out) in {:.1} ms (int3s {:.1} ms); Ctrl-C to stop",
        inst.sites().len(),
        kinds(SpliceKind::Jump5),
        kinds(SpliceKind::Jump2),
        kinds(SpliceKind::Trap),
        inst.refused.len(),
        inst.splice_time.as_secs_f64() * 1e3,
        inst.int3_time.as_secs_f64() * 1e3,
    )
}

/// Probes left out (no splice kind could take them, or the kernel's driver refused them) as
/// JSON, after printing each as a warning.
pub fn refused_json<'a>(
    refused: impl Iterator<Item = (&'a str, u64, String)>,
) -> serde_json::Value {
    json!(refused
        .map(|(label, addr, why)| {
            eprintln!("kerf: not spliced: {label} at {addr:#x}: {why}");
            json!({"point": label, "address": format!("{addr:#x}"), "reason": why})
        })
        .collect::<Vec<_>>())
}

/// [`refused_json`] of a process instrumentation.
pub fn process_refused(inst: &Instrumentation) -> serde_json::Value {
    refused_json(inst.refused.iter().map(|r| (r.label.as_str(), r.addr, r.reason.to_string())))
}

/// [`refused_json`] of a kernel instrumentation.
pub fn kernel_refused(inst: &KernelInstrumentation<'_>) -> serde_json::Value {
    refused_json(inst.refused.iter().map(|r| (r.label.as_str(), r.addr, r.reason.to_string())))
}

/// The outcome of removing a process's probes, as the CLI reports it: an error, or a
/// warning on stderr for kerf's code left mapped in the target (every splice is gone).
pub fn removal_outcome(removal: Result<Removed, InstrumentError>, pid: i32) -> Result<(), String> {
    let r = removal.map_err(|e| format!("restoring process {pid}: {e}"))?;
    if !r.kept.is_empty() {
        let bytes: u64 = r.kept.iter().map(|k| k.1).sum();
        eprintln!(
            "kerf: every splice is removed, but {} KiB of kerf's code and data stay mapped in process {pid}: {}",
            bytes / 1024,
            r.why.as_deref().unwrap_or("unknown")
        );
    }
    Ok(())
}

/// The line printed once every probe is in.
pub fn spliced_line(inst: &Instrumentation, pid: i32, took: Duration) -> String {
    let kinds = |k: SpliceKind| inst.sites().iter().filter(|p| p.kind == k).count();
    let n = inst.sites().len();
    let guards = match inst.guards() {
        0 => String::new(),
        g => format!(", {g} system calls guarded for them"),
    };
    format!(
        "kerf: {n} points spliced in process {pid} ({} jump5, {} jump2, {} trap{guards}) in {:.1} ms ({:.1} us a point; longest pause {} us, of a splice batch {} us); Ctrl-C to stop",
        kinds(SpliceKind::Jump5),
        kinds(SpliceKind::Jump2),
        kinds(SpliceKind::Trap),
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / n.max(1) as f64,
        inst.longest_pause.as_micros(),
        inst.longest_splice_pause.as_micros()
    )
}

/// The JSON fields describing where and how a site is spliced.
pub fn site_json(s: &Site) -> serde_json::Value {
    let mut v = json!({
        "point": s.label, "address": format!("{:#x}", s.addr), "kind": s.kind.name(),
    });
    if let Some(r) = &s.reason {
        v["reason"] = json!(r.to_string());
    }
    if let Some((at, space)) = s.springboard_in {
        v["springboard"] = json!({"address": format!("{at:#x}"), "in": space});
    }
    v
}
