//! The one way every live tool runs against its target: build the tool's probes from the
//! target's images, install them (a process: through the cache check, then let a launched
//! command go; the kernel: through kerf's driver), sample them on an interval until the
//! duration, the target's end or `exec`, or a signal, take them out, and return the results
//! as data ([`Report`]). What the tool says on the way goes to its [`Events`].
//!
//! A tool is a [`LiveTool`]: how it builds its probes, its live table, and its summary.

use crate::error::ToolError;
use kerf_patch::SpliceKind;
use kerf_session::instrument::{Action, Options, Probe, Site, ToolData};
use kerf_session::live::{
    check_interrupted, sample_loop, signal_name, End, Installed, KernelTarget, ProcessTarget,
    Refusal, Sampling, Spliced, Stop, Target, TrapHit,
};
use kerf_session::spec::{self, Point, Spec};
use kerf_session::AnalyzedImage;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Options of every live tool, whatever its target.
#[derive(Clone, Copy, Debug)]
pub struct LiveOptions {
    /// Run probes only in this thread of the process.
    pub tid: Option<i32>,
    pub sampling: Sampling,
    /// Use this splice kind for every point (testing).
    pub force_kind: Option<SpliceKind>,
    /// Threads splice planning runs on in a process (`None`: every CPU).
    pub plan_threads: Option<usize>,
    /// No trap splices: a point only a trap could take is left out, with why.
    pub no_traps: bool,
    /// What to say when a process keeps hitting its trap splices.
    pub trap_warning: TrapWarning,
    /// Render the live table every interval (off with `--json`, where only the summary goes
    /// out).
    pub live_table: bool,
}

/// What a tool says when a process keeps hitting its trap splices ([`TrapWatch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrapWarning {
    /// Nothing: the tool deals with trapped sites itself (`kerf hunt` times a round again
    /// without the call sites whose returns trap).
    Off,
    /// A warning naming the sites hit most.
    On,
    /// That warning, pointing at the command's `--no-traps`.
    WithFlag,
}

/// Where a running tool's words go (the CLI prints them).
pub trait Events {
    /// A line for the user (the CLI prints it on stderr after `kerf: `).
    fn say(&mut self, line: &str);
    /// A warning (the CLI prints it after `kerf: warning: `).
    fn warn(&mut self, line: &str);
    /// One update of the live table.
    fn live(&mut self, table: &str);
    /// One sample of the tool's metrics for `--record` ([`LiveTool::sample`], with `t`, the
    /// seconds since the probes went in).
    fn record(&mut self, _sample: Value) {}
}

/// What kind of target a tool builds its probes for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetKind {
    Process,
    Kernel,
}

/// A tool that runs probes in a live target.
pub trait LiveTool {
    /// What the tool keeps with its probes (per timer, the function it times, ...).
    type Built;
    /// Its live table, with whatever it keeps between updates.
    type Table;

    /// The probes for the target's images (with their other names; empty for the kernel),
    /// the timers, programs and area they use, and what the tool keeps with them. Called
    /// again when a
    /// cached analysis is rejected and analysed afresh.
    fn build(
        &self,
        images: &[AnalyzedImage],
        aliases: &[Vec<String>],
        kind: TargetKind,
    ) -> Result<(Vec<Probe>, ToolData, Self::Built), ToolError>;

    /// Once the probes are in: anything to tell the user about what was built.
    fn installed(&self, _built: &Self::Built, _events: &mut dyn Events, _inst: &dyn Installed) {}

    /// A new live table.
    fn table(&self, built: &Self::Built, probes: usize, inst: &dyn Installed) -> Self::Table;

    /// One update of the live table.
    fn render(&self, table: &mut Self::Table, built: &Self::Built, inst: &dyn Installed) -> String;

    /// The summary's own fields (merged into the object of [`Report::json`]), read while the
    /// probes are still in (the live table's last state with them).
    fn summarize(
        &self,
        table: &mut Self::Table,
        built: &Self::Built,
        probes: &[Probe],
        inst: &dyn Installed,
    ) -> Value;

    /// How often the tool samples: the user's choice, unless the tool needs its own pace (the
    /// tracer drains its rings every few ms).
    fn sampling(&self, s: Sampling) -> Sampling {
        s
    }

    /// Once the probes are in a process and before it goes on (a launched command is still
    /// held at its entry): anything the tool puts in beside them (the tracer's kernel probes).
    fn ready(&self, _built: &Self::Built, _events: &mut dyn Events) -> Result<(), ToolError> {
        Ok(())
    }

    /// Before anything is done to process `pid`: refuse what would harm it (the tracer's
    /// memory captures make system calls a seccomp filter may forbid).
    fn check_process(&self, _pid: i32) -> Result<(), ToolError> {
        Ok(())
    }

    /// Before building for the kernel: the offsets of `task_struct.pid` and `.tgid` from the
    /// kernel's BTF (`None`: not found), for tools that read a task's ids.
    fn kernel_task_ids(&self, _pid: Option<u32>, _tgid: Option<u32>) {}

    /// Before building for the kernel: the one task probes are restricted to (`--pid`), for
    /// tools whose programs must check it themselves (primitives get it from the target).
    fn kernel_only_task(&self, _pid: Option<u32>) {}

    /// The final table, from the summary.
    fn final_table(&self, summary: &Value) -> String;

    /// Sites (indexes into [`Installed::sites`]) whose probes have done their work, to be
    /// taken out now while the others stay, in the order they should go (called every tick,
    /// after [`LiveTool::render`]): coverage's one-shot flags. A failure to take them out is
    /// told and ends sampling.
    fn retire(
        &self,
        _table: &mut Self::Table,
        _built: &Self::Built,
        _inst: &dyn Installed,
    ) -> Vec<usize> {
        Vec::new()
    }

    /// Whether the tool follows a process into the program it runs with `exec`: it attaches
    /// to the new program and runs again there, and the two summaries become one
    /// ([`LiveTool::merge_runs`]). Other tools stop at `exec`.
    fn follows_exec(&self) -> bool {
        false
    }

    /// The summary of a run that followed `exec` (`later`) joined with the one before it.
    fn merge_runs(&self, _earlier: Value, later: Value) -> Value {
        later
    }

    /// Whether the probes left out are many and expected (coverage's blocks no splice kind
    /// could take): then kerf says how many, not each, and the summary's `refused` is their
    /// number (the tool reports them itself).
    fn many_refusals(&self) -> bool {
        false
    }

    /// Whether the tool wants sampling to end now (checked every tick): `kerf top` changes
    /// its probes this way.
    fn stop_requested(&self) -> bool {
        false
    }

    /// The tool's metrics now, for `--record` (after each update of the live table): totals
    /// since the probes went in, `{"rows": [{"name": NAME, METRIC: NUMBER, ...}, ...]}` (see
    /// [`crate::plot`] for the metrics it draws). `None`: the tool records nothing.
    fn sample(
        &self,
        _table: &Self::Table,
        _built: &Self::Built,
        _inst: &dyn Installed,
    ) -> Option<Value> {
        None
    }
}

/// A tool whose sampling also ends when `stop` is set (by whoever holds the flag: `kerf top`
/// sets it from its keys to change the probes); everything else is the tool's.
pub struct Until<'a, T> {
    pub tool: T,
    pub stop: &'a std::cell::Cell<bool>,
}

impl<T: LiveTool> LiveTool for Until<'_, T> {
    type Built = T::Built;
    type Table = T::Table;
    fn build(
        &self,
        images: &[AnalyzedImage],
        aliases: &[Vec<String>],
        kind: TargetKind,
    ) -> Result<(Vec<Probe>, ToolData, T::Built), ToolError> {
        self.tool.build(images, aliases, kind)
    }
    fn installed(&self, built: &T::Built, events: &mut dyn Events, inst: &dyn Installed) {
        self.tool.installed(built, events, inst)
    }
    fn table(&self, built: &T::Built, probes: usize, inst: &dyn Installed) -> T::Table {
        self.tool.table(built, probes, inst)
    }
    fn render(&self, table: &mut T::Table, built: &T::Built, inst: &dyn Installed) -> String {
        self.tool.render(table, built, inst)
    }
    fn summarize(
        &self,
        table: &mut T::Table,
        built: &T::Built,
        probes: &[Probe],
        inst: &dyn Installed,
    ) -> Value {
        self.tool.summarize(table, built, probes, inst)
    }
    fn sampling(&self, s: Sampling) -> Sampling {
        self.tool.sampling(s)
    }
    fn ready(&self, built: &T::Built, events: &mut dyn Events) -> Result<(), ToolError> {
        self.tool.ready(built, events)
    }
    fn check_process(&self, pid: i32) -> Result<(), ToolError> {
        self.tool.check_process(pid)
    }
    fn kernel_task_ids(&self, pid: Option<u32>, tgid: Option<u32>) {
        self.tool.kernel_task_ids(pid, tgid)
    }
    fn kernel_only_task(&self, pid: Option<u32>) {
        self.tool.kernel_only_task(pid)
    }
    fn final_table(&self, summary: &Value) -> String {
        self.tool.final_table(summary)
    }
    fn sample(&self, table: &T::Table, built: &T::Built, inst: &dyn Installed) -> Option<Value> {
        self.tool.sample(table, built, inst)
    }
    fn stop_requested(&self) -> bool {
        self.stop.get() || self.tool.stop_requested()
    }
    fn retire(&self, table: &mut T::Table, built: &T::Built, inst: &dyn Installed) -> Vec<usize> {
        self.tool.retire(table, built, inst)
    }
    fn many_refusals(&self) -> bool {
        self.tool.many_refusals()
    }
    fn follows_exec(&self) -> bool {
        self.tool.follows_exec()
    }
    fn merge_runs(&self, earlier: Value, later: Value) -> Value {
        self.tool.merge_runs(earlier, later)
    }
}

/// One tick of a live tool: its table rendered (and shown), its sample recorded, and the sites
/// it is done with taken out. A failure to take them out is kept in `failed` (told once
/// sampling has ended, which it makes end).
fn tick<T: LiveTool, I: Installed>(
    tool: &T,
    table: &mut T::Table,
    built: &T::Built,
    inst: &mut I,
    opts: &LiveOptions,
    events: &mut dyn Events,
    failed: &mut Option<kerf_session::instrument::InstrumentError>,
) {
    let text = tool.render(table, built, inst);
    if opts.live_table {
        events.live(&text);
    }
    record(tool, table, built, inst, events);
    if failed.is_some() {
        return;
    }
    let done = tool.retire(table, built, inst);
    if !done.is_empty() {
        if let Err(e) = inst.retire(&done) {
            *failed = Some(e);
        }
    }
}

/// [`LiveTool::sample`] with its time, to `events`.
fn record<T: LiveTool>(
    tool: &T,
    table: &T::Table,
    built: &T::Built,
    inst: &dyn Installed,
    events: &mut dyn Events,
) {
    if let Some(mut s) = tool.sample(table, built, inst) {
        s["t"] = json!(inst.installed_at().1.elapsed().as_secs_f64());
        events.record(s);
    }
}

/// Repeated hits of a process's trap splices beyond which kerf warns: each is a signal the
/// program takes (about 2 us on the development machine, where a jump to a patch costs
/// nanoseconds), so a trap in a hot loop can slow a program many times over (`kerf count` of
/// every block of sqlite3's `sqlite3VdbeExec`, 41 traps among 1,699 points: 61 s instead of
/// 1 s) while the start-up line only tallied the splice kinds.
const TRAP_WARN_HITS: u64 = 10_000;
/// ... and per second since the probes went in.
const TRAP_WARN_RATE: f64 = 2_000.0;
/// Trap sites the warning and the summary name.
const TRAP_NAMED: usize = 5;

/// Watches a process's trap splices while it samples and warns, once, when the program
/// takes them often. Hits past each site's first count: probes that take themselves out
/// once hit (`kerf cover`) hit each trap about once, and that costs nothing to warn about.
struct TrapWatch {
    say: TrapWarning,
    warned: bool,
    /// When to look next (doubling: reading every site's count is not free with many).
    next: Option<Duration>,
}

impl TrapWatch {
    /// Look at the counts when due (`last`: always, at the end): warn once past the
    /// thresholds, and at the end return the summary's `trap_hits` (`None` where the
    /// target has no trap sites or cannot count them).
    fn check(
        &mut self,
        inst: &dyn Installed,
        events: &mut dyn Events,
        last: bool,
    ) -> Option<Value> {
        let since = inst.installed_at().1.elapsed();
        if !last && (self.warned || since < self.next.unwrap_or(Duration::from_secs(1))) {
            return None;
        }
        self.next = Some(since * 2);
        let hits = inst.trap_hits()?;
        if hits.is_empty() {
            return None;
        }
        let repeated: u64 = hits.iter().map(|h| h.hits.saturating_sub(1)).sum();
        let total: u64 = hits.iter().map(|h| h.hits).sum();
        let secs = since.as_secs_f64().max(1e-3);
        let hot: Vec<&TrapHit> = hits.iter().filter(|h| h.hits > 1).take(TRAP_NAMED).collect();
        let often = |r: u64| r >= TRAP_WARN_HITS && r as f64 / secs >= TRAP_WARN_RATE;
        if !self.warned && self.say != TrapWarning::Off && often(repeated) {
            self.warned = true;
            // What `--no-traps` would leave out: the tool's points that are traps (not the
            // guards, which go with them), out of all of its points (`sites` are the tool's).
            let points = inst.sites().len();
            let traps = hits.iter().filter(|h| !h.guard).count();
            let advice = match self.say {
                TrapWarning::WithFlag if traps >= points => format!(
                    ". Every point here needs a trap ({traps} of {points}): `--no-traps` would \
                     leave them all out"
                ),
                TrapWarning::WithFlag => format!(
                    ". `--no-traps` leaves out the points only a trap could take ({traps} of \
                     {points})"
                ),
                _ => String::new(),
            };
            let named: Vec<String> =
                hot.iter().map(|h| format!("{} ({})", h.label, h.hits)).collect();
            events.warn(&format!(
                "trap splices were hit {total} times in {secs:.1} s ({:.0} a second): each hit \
                 is a signal the program takes, microseconds where a jump costs nanoseconds, \
                 so it runs slower while they are in. Most hit: {}{advice}",
                total as f64 / secs,
                named.join(", ")
            ));
        }
        last.then(|| {
            let sites: Vec<Value> = hot
                .iter()
                .map(|h| json!({"point": h.label, "address": format!("{:#x}", h.addr), "hits": h.hits}))
                .collect();
            // (The signal-mask guards that are traps apart: kerf adds them, no tool asks.)
            let (guards, points): (Vec<&TrapHit>, Vec<&TrapHit>) =
                hits.iter().partition(|h| h.guard);
            let sum = |v: &[&TrapHit]| v.iter().map(|h| h.hits).sum::<u64>();
            json!({"sites": points.len(), "total": sum(&points), "guard_sites": guards.len(),
                   "guard_hits": sum(&guards), "most_hit": sites})
        })
    }
}

/// What a live tool found: its summary as JSON (or as the tool's final table) and how the
/// run ended.
pub struct Report {
    pub json: Value,
    /// How sampling stopped, to say before a final table (`None`: `error` says it).
    pub stopped: Option<String>,
    /// A warning to give after the summary (kerf's code left mapped in the target).
    pub warning_after: Option<String>,
    /// How the run failed after its summary (restoring the target failed, or a signal killed
    /// it while instrumented).
    pub error: Option<ToolError>,
}

/// Run `tool` against `target`: install, sample, restore (see the module documentation).
pub fn run<T: LiveTool>(
    tool: &T,
    target: &mut Target,
    opts: &LiveOptions,
    events: &mut dyn Events,
) -> Result<Report, ToolError> {
    match target {
        Target::Process(p) => run_process(tool, p, opts, events),
        Target::Kernel(k) => run_kernel(tool, k, opts, events),
    }
}

/// [`run`] in a process: warnings of its analysis, the probes in (through the cache checks),
/// a launched command let go, sampling until the duration, its end or `exec`, or a signal,
/// and the probes out (or forgotten, after an `exec`).
fn run_process<T: LiveTool>(
    tool: &T,
    p: &mut ProcessTarget,
    opts: &LiveOptions,
    events: &mut dyn Events,
) -> Result<Report, ToolError> {
    for w in std::mem::take(&mut p.warnings) {
        events.warn(&w);
    }
    check_interrupted()?;
    let t = Instant::now();
    let o = Options {
        force_kind: opts.force_kind,
        only_thread: opts.tid,
        plan_threads: opts.plan_threads,
        no_traps: opts.no_traps,
    };
    tool.check_process(p.pid)?;
    let (inst, probes, built, warnings) =
        p.install(o, |m, a| tool.build(m, a, TargetKind::Process))?;
    for w in warnings.iter().chain(&ifunc_warnings(&p.modules, &probes)) {
        events.warn(w);
    }
    let splice_time = t.elapsed();
    if let Err(e) = tool.ready(&built, events) {
        // The process's probes out again before the error is told.
        let mut stop = kerf_session::live::Stop::Interrupted;
        let _ = p.finish(inst, &mut stop, &mut |l| events.say(l));
        return Err(e);
    }
    // The table before the command goes on: the tracer's reader calibrates its clock over at
    // least 20 ms from the start, and a command running meanwhile (at 20 M events/s) would
    // fill its rings before the first drain.
    let mut table = tool.table(&built, probes.len(), &inst);
    p.release()?;
    events.say(&spliced_line(&inst, p.pid, splice_time));
    let refused = refused_json(&inst, events, tool.many_refusals());
    tool.installed(&built, events, &inst);
    let heaps = Installed::code_heaps(&inst);
    let failed = std::cell::RefCell::new(None);
    let stop_requested = || tool.stop_requested() || failed.borrow().is_some();
    let mut inst = inst;
    let mut traps = TrapWatch { say: opts.trap_warning, warned: false, next: None };
    // (The duration counts from here: see `sample_until`.)
    let mut stop = p.sample_until(tool.sampling(opts.sampling), &heaps, stop_requested, || {
        tick(tool, &mut table, &built, &mut inst, opts, events, &mut failed.borrow_mut());
        traps.check(&inst, events, false);
    });
    let failed = failed.into_inner();
    // Results first: the shared data heap stays readable here even after the target
    // is gone. The record ends with the totals the summary has.
    record(tool, &table, &built, &inst, events);
    let fields = tool.summarize(&mut table, &built, &probes, &inst);
    let trap_hits = traps.check(&inst, events, true);
    let Spliced { longest_pause: pause, longest_splice_pause: batch_pause, phases, .. } =
        inst.spliced();
    // In the order they first ran: `[name, microseconds]`.
    let phases: Vec<Value> = phases.iter().map(|(n, d)| json!([n, d.as_micros() as u64])).collect();
    // A tool that follows exec keeps a launched command's handle for the next round (finish
    // would wait for the command to end).
    let child = if tool.follows_exec() { p.child.take() } else { None };
    let removal = p.finish(inst, &mut stop, &mut |l| events.say(l));
    let pid = p.pid;
    // (Only now is it known whether the target ran exec: a retirement or the removal that
    // found its memory gone tells.)
    let follow = stop.is_exec() && tool.follows_exec();
    if let (Some(e), false) = (&failed, matches!(stop, Stop::Exec(_) | Stop::Ended(_))) {
        events.warn(&format!("taking out probes that had done their work failed: {e}"));
    }
    // A launched command that ran `exec`, or ran on after `--duration`, was waited for by
    // `finish`: how it ended then. (A process given by -p that ends after kerf left is not
    // kerf's to report.)
    let then = (!follow).then(|| p.fate()).flatten().filter(|_| p.launched() || stop.is_exec());
    let (target, stopped) = match after_probes(&stop, then, pid) {
        Some(t) => t,
        None => (stop_json(&stop), stop.describe(pid)),
    };
    let killed = stop.killed() || target["signal"].is_u64();
    let failure = killed.then(|| ToolError::Killed {
        ended: stopped.clone(),
        after_exec: target.get("exec").is_some() || target.get("after_probes").is_some(),
        signal: target["signal"].as_u64().unwrap_or(0) as i32,
    });
    let mut v = json!({"pid": pid, "stopped": stopped, "target": target,
           "refused": refused,
           "longest_pause_us": pause.as_micros() as u64,
           "longest_splice_pause_us": batch_pause.as_micros() as u64,
           "splice_seconds": splice_time.as_secs_f64(),
           "splice_phases_us": phases,
           "seconds": p.started.elapsed().as_secs_f64()});
    merge(&mut v, fields);
    if let Some(t) = trap_hits {
        v["trap_hits"] = t;
    }
    // A daemon's fork: its launcher exited at once, and the daemon ran kerf's probes, which
    // went out of it with the rest. A tool that follows exec follows a single such copy too
    // (not after Ctrl-C or the duration, nor when a signal killed the launcher).
    let mut copy = None;
    if let Ok(r) = &removal {
        let copies = &r.copies_after_end;
        if !copies.is_empty() {
            v["copies_after_end"] = json!(copies.len());
            let ours = tool.follows_exec() && matches!(stop, Stop::Ended(_)) && !stop.killed();
            copy = (ours && copies.len() == 1).then(|| copies[0]);
            let then = match copy {
                Some(c) => format!("following process {c}"),
                None => "what they run from now on is not measured (run kerf on a pid for \
                         that)"
                    .to_string(),
            };
            let what = if stop.is_exec() { "ran exec" } else { "ended" };
            events.say(&format!(
                "process {pid} {what} while {} process(es) it forked ({}) still ran kerf's \
                 probes: taken out of them too; {then}",
                copies.len(),
                copies.iter().map(i32::to_string).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if follow && removal.is_ok() {
        return follow_into(tool, p, pid, child, v, opts, events);
    }
    if let Some(c) = copy {
        // The launcher is reaped first: it is not the copy's parent.
        if child.is_some() {
            p.child = child;
            p.wait(&mut |l| events.say(l));
        }
        return follow_into(tool, p, c, None, v, opts, events);
    }
    if child.is_some() {
        p.child = child;
        p.wait(&mut |l| events.say(l));
    }
    // A failure is kerf's last line; other ends are said with the summary.
    let stopped = failure.is_none().then(|| v["stopped"].as_str().unwrap_or_default().to_string());
    let (warning_after, error) = match removal {
        Err(source) => (None, Some(ToolError::Restore { pid, source })),
        Ok(r) => {
            let warning = (!r.kept.is_empty()).then(|| format!("process {pid}: {}", r.describe()));
            (warning, failure)
        }
    };
    Ok(Report { json: v, stopped, warning_after, error })
}

/// After process `p` ran `exec` (`pid` is `p`'s), or ended leaving one forked copy that ran
/// its probes (`pid` is the copy's): attach to `pid` and run `tool` there (the clock (from the
/// start, and from the first probes in, for the duration) and a launched command's handle
/// carried over), then join the summaries. If `pid` cannot be attached to, the summary so far
/// is the result, with a warning.
fn follow_into<T: LiveTool>(
    tool: &T,
    p: &mut ProcessTarget,
    pid: i32,
    child: Option<std::process::Child>,
    before: Value,
    opts: &LiveOptions,
    events: &mut dyn Events,
) -> Result<Report, ToolError> {
    if pid == p.pid {
        events.say(&format!(
            "{}: following it into its new program",
            before["stopped"].as_str().unwrap_or("exec")
        ));
    }
    match ProcessTarget::open(Some(pid), &[]) {
        Ok(mut next) => {
            next.child = child;
            next.started = p.started;
            next.sampling_since = p.sampled_from();
            let r = run_process(tool, &mut next, opts, events);
            *p = next;
            let r = match r {
                Ok(r) => r,
                // Probes that could not be taken out, or a signal: the run failed. Anything
                // else (the program ended while its probes went in, a module kerf could not
                // analyse) leaves the summary of what came before, with a warning.
                Err(e) => {
                    let stopped = before["stopped"].as_str().map(str::to_string);
                    let (warning_after, error) = match e {
                        ToolError::Restore { .. } | ToolError::Killed { .. } => (None, Some(e)),
                        e => (Some(format!("process {pid}: not followed: {e} (the summary is of what came before)")), None),
                    };
                    return Ok(Report { json: before, stopped, warning_after, error });
                }
            };
            let copies = |v: &Value| v["copies_after_end"].as_u64().unwrap_or(0);
            let n = copies(&before) + copies(&r.json);
            let mut json = tool.merge_runs(before, r.json);
            if n > 0 {
                json["copies_after_end"] = json!(n);
            }
            Ok(Report { json, ..r })
        }
        Err(e) => {
            events.warn(&format!("process {pid}: cannot attach to it: {e}"));
            p.child = child;
            p.wait(&mut |l| events.say(l));
            let stopped = before["stopped"].as_str().map(str::to_string);
            Ok(Report { json: before, stopped, warning_after: None, error: None })
        }
    }
}

/// [`run`] in the kernel, through kerf's driver: sampling ends with the duration or a signal.
fn run_kernel<T: LiveTool>(
    tool: &T,
    k: &KernelTarget,
    opts: &LiveOptions,
    events: &mut dyn Events,
) -> Result<Report, ToolError> {
    for w in &k.kernel.warnings {
        events.warn(w);
    }
    tool.kernel_task_ids(k.task_pid_offset(), k.task_tgid_offset());
    tool.kernel_only_task(k.only_pid);
    let (probes, data, built) = tool.build(&k.kernel.images, &[], TargetKind::Kernel)?;
    check_interrupted()?;
    let mut inst = k
        .install(&probes, &data, opts.force_kind, opts.no_traps)
        .map_err(ToolError::KernelInstall)?;
    events.say(&kernel_spliced_line(&inst));
    let refused = refused_json(&inst, events, tool.many_refusals());
    tool.installed(&built, events, &inst);
    let mut table = tool.table(&built, probes.len(), &inst);
    let failed = std::cell::RefCell::new(None);
    let why = sample_loop(
        Instant::now(), // (the duration counts from the probes in, as in a process)
        tool.sampling(opts.sampling),
        || (tool.stop_requested() || failed.borrow().is_some()).then_some(Stop::Interrupted),
        || tick(tool, &mut table, &built, &mut inst, opts, events, &mut failed.borrow_mut()),
    )
    .describe(0);
    if let Some(e) = failed.into_inner() {
        events.warn(&format!("taking out probes that had done their work failed: {e}"));
    }
    record(tool, &table, &built, &inst, events);
    let fields = tool.summarize(&mut table, &built, &probes, &inst);
    let spliced = inst.spliced();
    let splice_seconds = spliced.splice_time.unwrap_or_default().as_secs_f64();
    // In the order they first ran: `[name, microseconds]` (as in a process).
    let phases: Vec<Value> =
        spliced.phases.iter().map(|(n, d)| json!([n, d.as_micros() as u64])).collect();
    let removal = k.finish(inst);
    let mut v = json!({"kernel": true, "stopped": why, "refused": refused,
           "splice_seconds": splice_seconds, "splice_phases_us": phases,
           "seconds": k.started.elapsed().as_secs_f64()});
    merge(&mut v, fields);
    Ok(Report {
        json: v,
        stopped: Some(why),
        warning_after: None,
        error: removal.err().map(ToolError::RestoreKernel),
    })
}

/// Warnings at most about single GNU indirect functions; more are said in one line.
const IFUNC_WARNINGS: usize = 3;

/// A warning for each function probed (at its entry or its exits) that is a GNU indirect function's
/// resolver (glibc's `memcpy`, `strlen`): the loader runs it once per binding to choose an
/// implementation, so its count says nothing about calls. Names the implementations it may
/// choose from (functions named `__NAME_...` in the same module) when the module has them.
/// Coverage's flags are left out (a resolver's blocks are blocks like any), and more than
/// [`IFUNC_WARNINGS`] (every function of libc probed: about 50) make one line.
fn ifunc_warnings(modules: &[AnalyzedImage], probes: &[Probe]) -> Vec<String> {
    let mut out = Vec::new();
    let mut names = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut resolvers: Vec<Option<Vec<kerf_arch::ImageAddr>>> = vec![None; modules.len()];
    for probe in probes.iter().filter(|p| !matches!(p.action, Action::Flag(_))) {
        let (m, f) = (probe.point.module, probe.point.func);
        let Some(image) = modules.get(m) else { continue };
        let cfg = &image.analysis.cfg;
        let fun = cfg.function(f);
        // (At its entry or its exits: a resolver's `@exits` see the address it binds, not
        // a copy's return.)
        if !seen.insert((m, f)) {
            continue;
        }
        let r = resolvers[m].get_or_insert_with(|| {
            kerf_analysis::image::Image::ifunc_resolvers(image.bytes.as_ref())
        });
        if r.binary_search(&fun.entry).is_err() {
            continue;
        }
        let module = spec::module_name(&image.analysis.image);
        // (`memcpy@@GLIBC_2.14`: the version is no part of the implementations' names.)
        let base = fun.name.split('@').next().unwrap_or(&fun.name);
        let prefix = format!("__{base}_");
        let mut chosen: Vec<&str> = (cfg.functions.iter())
            .map(|g| g.name.as_str())
            .filter(|n| n.starts_with(&prefix))
            .collect();
        chosen.sort_unstable();
        chosen.dedup();
        let among = match chosen.len() {
            0 => String::new(),
            n => {
                let some: Vec<String> =
                    chosen.iter().take(4).map(|c| format!("{module}:{c}")).collect();
                let more = if n > 4 { format!(" and {} more", n - 4) } else { String::new() };
                format!(
                    "; it chooses among {}{more} (probe those: '{module}:{prefix}*')",
                    some.join(", ")
                )
            }
        };
        out.push(format!(
            "{module}:{} is a GNU indirect function: its code is the resolver the loader runs \
             once to bind the symbol, not the function callers run, so it counts bindings, not \
             calls{among}",
            fun.name
        ));
        names.push(format!("{module}:{base}"));
    }
    if out.len() > IFUNC_WARNINGS {
        let more = names.len() - IFUNC_WARNINGS;
        return vec![format!(
            "{} of the functions probed are GNU indirect functions ({} and \
             {more} more): their code is the resolver the loader runs once to bind the symbol, \
             so they count bindings, not calls (probe the implementations, \
             '{}_*' and the like, for calls)",
            names.len(),
            names[..IFUNC_WARNINGS].join(", "),
            names[0].replacen(':', ":__", 1),
        )];
    }
    out
}

/// Add the fields of object `extra` to object `v`.
fn merge(v: &mut Value, extra: Value) {
    if let (Some(o), Value::Object(e)) = (v.as_object_mut(), extra) {
        o.extend(e);
    }
}

/// Resolve spec texts against analysed images (a process's modules or the kernel's), which
/// also answer to `aliases` (per image; may be empty).
pub fn resolve(
    images: &[AnalyzedImage],
    aliases: &[Vec<String>],
    specs: &[Spec],
) -> Result<Vec<Point>, ToolError> {
    let named: Vec<(&str, &kerf_analysis::Analysis)> =
        images.iter().map(|m| (m.analysis.image.as_str(), &m.analysis)).collect();
    let reader = |m: usize, a: kerf_arch::ImageAddr| {
        let (base, bytes) = images[m].code_region(a)?;
        let off = (a.0 - base.0) as usize;
        Some((a, bytes.get(off..(off + 4096).min(bytes.len()))?.to_vec()))
    };
    Ok(spec::resolve_with_aliases(specs, &named, aliases, &reader)?)
}

/// The summary's `target` object: what became of the target (`null`: it runs on).
pub fn stop_json(stop: &Stop) -> Value {
    match stop {
        Stop::Ended(End::Exited(code)) => json!({"exit_code": code}),
        Stop::Ended(End::Killed { signal, core_dumped }) => json!({
            "signal": signal, "signal_name": signal_name(*signal), "core_dumped": core_dumped,
        }),
        Stop::Ended(End::Unknown) => json!({"exited": true}),
        Stop::Exec(program) => json!({"exec": program}),
        Stop::Duration | Stop::Interrupted | Stop::Withdrawn(_) => Value::Null,
    }
}

/// The summary's `target` and its text for a launched command that kerf waited for once its
/// probes were gone (it ran `exec`, and its probes went with its old program; `--duration`
/// was reached; or they were taken out early) and that ended then, as `then` says: its exit
/// code or signal, so that kerf exits with the code, or fails, as for a command that ends
/// under the probes (kerf exited 0 whatever the command's end, and the summary said only
/// "duration reached"). `None` for any other stop, or an end not known.
pub fn after_probes(stop: &Stop, then: Option<End>, pid: i32) -> Option<(Value, String)> {
    let mut target = match stop {
        Stop::Exec(_) => stop_json(stop),
        Stop::Duration | Stop::Withdrawn(_) => json!({ "after_probes": true }),
        _ => return None,
    };
    let end = then?;
    if let Value::Object(m) = stop_json(&Stop::Ended(end)) {
        for (k, x) in m {
            target[k] = x;
        }
    }
    Some((target, format!("{}; then {}", stop.describe(pid), end.describe(pid))))
}

/// How many of `sites` have splice kind `k`.
fn kinds(sites: &[Site], k: SpliceKind) -> usize {
    sites.iter().filter(|p| p.kind == k).count()
}

/// The line said once every kernel probe is in.
fn kernel_spliced_line(inst: &dyn Installed) -> String {
    let sites = inst.sites();
    let spliced = inst.spliced();
    format!(
        "{} points spliced in the kernel ({} jump5, {} jump2, {} trap; {} left out) in {:.1} ms (int3s {:.1} ms); Ctrl-C to stop",
        sites.len(),
        kinds(sites, SpliceKind::Jump5),
        kinds(sites, SpliceKind::Jump2),
        kinds(sites, SpliceKind::Trap),
        inst.refused().len(),
        spliced.splice_time.unwrap_or_default().as_secs_f64() * 1e3,
        spliced.int3_time.unwrap_or_default().as_secs_f64() * 1e3,
    )
}

/// The line said once every probe is in a process.
fn spliced_line(inst: &dyn Installed, pid: i32, took: Duration) -> String {
    let sites = inst.sites();
    let n = sites.len();
    let spliced = inst.spliced();
    let guards = match spliced.guards {
        0 => String::new(),
        g => format!(", {g} system calls guarded for them"),
    };
    format!(
        "{n} points spliced in process {pid} ({} jump5, {} jump2, {} trap{guards}) in {:.1} ms ({:.1} us a point; longest pause {} us, of a splice batch {} us); Ctrl-C to stop",
        kinds(sites, SpliceKind::Jump5),
        kinds(sites, SpliceKind::Jump2),
        kinds(sites, SpliceKind::Trap),
        took.as_secs_f64() * 1e3,
        took.as_secs_f64() * 1e6 / n.max(1) as f64,
        spliced.longest_pause.as_micros(),
        spliced.longest_splice_pause.as_micros()
    )
}

/// Probes left out (no splice kind could take them, or the kernel's driver refused them) as
/// JSON, after saying each.
fn refused_json(inst: &dyn Installed, events: &mut dyn Events, many: bool) -> Value {
    if many {
        let n = inst.refused().len();
        if n > 0 {
            events.say(&format!("{n} points left out (no splice kind could take them)"));
        }
        return json!(n);
    }
    json!(inst
        .refused()
        .into_iter()
        .map(|Refusal { label, addr, reason, .. }| {
            events.say(&format!("not spliced: {label} at {addr:#x}: {reason}"));
            json!({"point": label, "address": format!("{addr:#x}"), "reason": reason})
        })
        .collect::<Vec<_>>())
}

/// The JSON fields describing where and how a site is spliced.
pub fn site_json(s: &Site) -> Value {
    let mut v = json!({
        "point": s.label, "address": format!("{:#x}", s.addr), "kind": s.kind.name(),
        "patch": format!("{:#x}", s.patch()),
    });
    if let Some(r) = &s.reason {
        v["reason"] = json!(r.to_string());
    }
    if let Some((at, space)) = s.springboard_in {
        v["springboard"] = json!({"address": format!("{at:#x}"), "in": space});
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_object_says_what_became_of_the_target() {
        let cases = [
            (Stop::Ended(End::Exited(3)), json!({"exit_code": 3})),
            (
                Stop::Ended(End::Killed { signal: 9, core_dumped: false }),
                json!({"signal": 9, "signal_name": "SIGKILL", "core_dumped": false}),
            ),
            (Stop::Ended(End::Unknown), json!({"exited": true})),
            (Stop::Exec(Some("/bin/true".into())), json!({"exec": "/bin/true"})),
            (Stop::Exec(None), json!({"exec": null})),
            (Stop::Duration, Value::Null),
            (Stop::Interrupted, Value::Null),
            (Stop::Withdrawn("why".into()), Value::Null),
        ];
        for (stop, v) in cases {
            assert_eq!(stop_json(&stop), v, "{stop:?}");
        }
    }

    #[test]
    fn merged_fields_join_the_summary() {
        let mut v = json!({"pid": 7, "stopped": "duration reached"});
        merge(&mut v, json!({"points": [], "tsc_ghz": 2.5}));
        assert_eq!(
            v,
            json!({"pid": 7, "stopped": "duration reached", "points": [], "tsc_ghz": 2.5})
        );
    }
}
