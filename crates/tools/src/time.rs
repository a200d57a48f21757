//! `time`: cycle timers spliced at the entry and every exit of functions. Every interval, each
//! function's calls, time per call and concurrency (threads inside it on average: KernInst's
//! area under the curve), and totals at the end. With `callees`, each function's calls are
//! timed too, per callee (KernInst's drill-down from a slow function into the callees its
//! time goes to).
//!
//! With `virtual_time`, each timer has a twin on the threads' off-CPU clock (the target's:
//! in a process, kerf's BPF program on `sched_switch`; in the kernel, kerf's probe at the
//! context switch, `__switch_to`), probed at the same points: its total
//! is the time the function's threads spent off the CPU inside it, and wall time minus that is
//! its *virtual* time, the time they ran (KernInst's virtual timer).
//!
//! Which probes a timer takes: an entry start, a stop at each exit, and in a process, through
//! a direct tail call (`jmp g`), a tail-return probe at every return `g` may end the call with
//! (see [`timer_probes`]).

use crate::error::ToolError;
use crate::live::{resolve, site_json, Events, LiveTool, TargetKind};
use kerf_analysis::cfg::{EdgeKind, EdgeTarget, FuncId, Terminator};
use kerf_session::instrument::{tsc_and_instant, Action, Probe, ToolData};
use kerf_session::live::Installed;
use kerf_session::spec::{self, Point, Spec, SpecWhat};
use kerf_session::AnalyzedImage;
use serde_json::json;
use serde_json::Value;
use std::collections::HashMap;
use std::fmt::Write;
use std::time::Instant;

/// Rows of the live table: the busiest timers of the interval; the others are summed up.
const TOP_ROWS: usize = 40;

/// What the time tool built: its timers, and the blocks it counts (a row name `f @ +0x1c`
/// and its probe).
pub struct Built {
    pub timed: Vec<Timed>,
    pub blocks: Vec<(String, usize)>,
}

/// One timed function, or one callee's calls from a timed function.
pub struct Timed {
    pub spec: String,
    pub name: String,
    /// For a callee timer: the caller's and the callee's names.
    pub call: Option<(String, String)>,
    /// Probe index of its entry.
    pub entry: usize,
    /// Probe indices of its exits.
    pub exits: Vec<usize>,
    /// Functions it tail-calls directly, whose time is its own.
    pub tail_callees: Vec<String>,
}

/// Parse a function spec: a symbol or glob, with no offset, `@blocks` or `@exits`.
fn parse_function(text: &str) -> Result<Spec, ToolError> {
    let s = spec::parse(text)?;
    match &s.what {
        SpecWhat::Symbol { offset: 0, blocks: false, exits: false, .. } => Ok(s),
        _ => Err(ToolError::NotAFunction { spec: text.to_string() }),
    }
}

/// TSC ticks per nanosecond, from two readings of the TSC and the monotonic clock.
fn ticks_per_ns(from: (u64, Instant), to: (u64, Instant)) -> f64 {
    let ns = to.1.duration_since(from.1).as_nanos().max(1) as f64;
    (to.0.saturating_sub(from.0)) as f64 / ns
}

/// The time tool: the functions it times, whether it times their callees too, and whether
/// it keeps virtual time beside wall time.
pub struct Time {
    specs: Vec<Spec>,
    callees: bool,
    /// Callee timers only for these functions (by name), when `callees` is off.
    callees_of: Vec<String>,
    /// Callee timers left out (`caller > callee`, every call site of the pair).
    skip_calls: Vec<String>,
    virtual_time: bool,
    /// Each thread's share of every timer too (`--threads`).
    threads: bool,
    /// Functions (by name) whose basic blocks are counted too.
    blocks_of: Vec<String>,
}

impl Time {
    /// Parse the function specs (before anything is done to a target).
    pub fn new(functions: &[String], callees: bool) -> Result<Time, ToolError> {
        let specs = functions.iter().map(|s| parse_function(s)).collect::<Result<_, _>>()?;
        Ok(Time {
            specs,
            callees,
            callees_of: Vec::new(),
            skip_calls: Vec::new(),
            virtual_time: false,
            threads: false,
            blocks_of: Vec::new(),
        })
    }

    /// Time the calls of these functions (by name) per callee, as `callees` does for all.
    pub fn with_callees_of(self, names: Vec<String>) -> Time {
        Time { callees_of: names, ..self }
    }

    /// Count the basic blocks of these functions (by name) too: how often each ran.
    pub fn with_blocks_of(self, names: Vec<String>) -> Time {
        Time { blocks_of: names, ..self }
    }

    /// Leave out the callee timers of these rows (`caller > callee`).
    pub fn without_calls(self, rows: Vec<String>) -> Time {
        Time { skip_calls: rows, ..self }
    }

    /// Keep virtual time too: a twin timer on the off-CPU clock for every timer.
    pub fn with_virtual_time(self, on: bool) -> Time {
        Time { virtual_time: on, ..self }
    }

    /// Break every timer down by thread too: each thread's outermost calls and time (and
    /// virtual time), by its id where the target's thread ids are known (a process's).
    pub fn with_threads(self, on: bool) -> Time {
        Time { threads: on, ..self }
    }

    /// Count hardware event `event` per function too (`--counter`): where the CPU exposes
    /// no PMU to Linux (this project's machines and VMs), the error says so.
    pub fn with_counter(self, event: Option<&str>) -> Result<Time, ToolError> {
        let Some(event) = event else { return Ok(self) };
        let counter = |source| ToolError::Counter { event: event.to_string(), source };
        kerf_os::pmu::check(event).map_err(|e| counter(Some(e)))?;
        Err(counter(None))
    }
}

/// Off-CPU timer `t`'s total in nanoseconds: a process's clock counts them (BPF's
/// `bpf_ktime_get_ns`), the kernel's context-switch probe TSC cycles (`hz` to the ns).
fn off_cpu_ns(inst: &dyn Installed, t: usize, now: u64, hz: f64) -> u64 {
    off_cpu_to_ns(inst, inst.timer(t, now).cycles, hz)
}

/// An off-CPU timer's count `raw` in nanoseconds (see [`off_cpu_ns`]).
fn off_cpu_to_ns(inst: &dyn Installed, raw: u64, hz: f64) -> u64 {
    match inst.target() {
        kerf_session::probe::Where::Kernel => (raw as f64 / hz).round() as u64,
        _ => raw,
    }
}

/// The twin of every timer action on the off-CPU clock: timer `t`'s is `t + timers`, probed
/// where `t` is (a tail return needs no twin: it ends whatever tail calls are pending).
fn off_cpu_twins(probes: &mut Vec<Probe>, timers: usize) -> std::ops::Range<usize> {
    let twins: Vec<Probe> = probes
        .iter()
        .filter_map(|p| {
            let action = match p.action {
                Action::TimerStart(t) => Action::TimerStart(t + timers),
                Action::TimerStop(t) => Action::TimerStop(t + timers),
                Action::TimerTailCall(t) => Action::TimerTailCall(t + timers),
                _ => return None,
            };
            Some(Probe { point: p.point.clone(), action })
        })
        .collect();
    probes.extend(twins);
    timers..2 * timers
}

impl LiveTool for Time {
    type Built = Built;
    type Table = Table;

    /// In a process a timer runs through direct tail calls; the kernel's timers stop at a
    /// tail call's jump (its instrumentation has no tail stacks).
    fn build(
        &self,
        images: &[AnalyzedImage],
        aliases: &[Vec<String>],
        kind: TargetKind,
    ) -> Result<(Vec<Probe>, ToolData, Built), ToolError> {
        let through_tail_calls = kind == TargetKind::Process;
        let (mut probes, mut timed) =
            timer_probes(images, aliases, &self.specs, through_tail_calls)?;
        if self.callees || !self.callees_of.is_empty() {
            let only = (!self.callees).then_some(&self.callees_of[..]);
            callee_probes(images, &mut probes, &mut timed, only, &self.skip_calls);
        }
        let blocks = block_probes(images, aliases, &mut probes, &self.blocks_of)?;
        let mut tool = ToolData::timers(timed.len());
        if self.virtual_time {
            tool.off_cpu = off_cpu_twins(&mut probes, timed.len());
            tool.timers *= 2;
        }
        Ok((probes, tool, Built { timed, blocks }))
    }

    fn installed(&self, built: &Built, events: &mut dyn Events, inst: &dyn Installed) {
        let timed = &built.timed;
        if self.virtual_time {
            // The kernel's context-switch probe is the target's own: refused, no task's clock
            // would move, and virtual time would read as wall time.
            for r in inst.refused().iter().filter(|r| r.label.contains("(off-CPU clock)")) {
                events.warn(&format!(
                    "virtual time is wall time here: the context-switch probe {} was refused: {}",
                    r.label, r.reason
                ));
            }
        }
        for f in timed.iter().filter(|f| f.exits.is_empty()) {
            events.say(&format!(
                "{} has no exit kerf can see; its time runs until kerf stops",
                f.name
            ));
        }
    }

    fn table(&self, built: &Built, _probes: usize, inst: &dyn Installed) -> Table {
        Table::new(built.timed.len(), self.virtual_time, inst.installed_at())
    }

    /// Also frees the thread table slots of the process's forked children that have ended
    /// (their timers' slots would otherwise stay taken for good).
    fn render(&self, table: &mut Table, built: &Built, inst: &dyn Installed) -> String {
        if let kerf_session::probe::Where::Process(pid) = inst.target() {
            inst.free_ended_children(pid, &|_, _| true);
        }
        table.render(&built.timed, inst)
    }

    fn summarize(
        &self,
        _table: &mut Table,
        built: &Built,
        _probes: &[Probe],
        inst: &dyn Installed,
    ) -> Value {
        let timed = &built.timed;
        let (mut summary, mut extra) = summarize(inst, timed, self.virtual_time);
        if self.threads {
            let now = tsc_and_instant();
            let hz = ticks_per_ns(inst.installed_at(), now);
            // Rows of refused timers are left out of the summary: match by function and caller.
            for (k, f) in timed.iter().enumerate() {
                let Some(v) = summary.iter_mut().find(|v| {
                    v["function"] == f.name.as_str()
                        && f.call.as_ref().is_none_or(|(caller, _)| v["caller"] == caller.as_str())
                }) else {
                    continue;
                };
                let twins = self.virtual_time.then_some(timed.len());
                v["threads"] = Value::Array(thread_rows(inst, k, twins, now.0, hz));
            }
        }
        extra["functions"] = Value::Array(summary);
        if !built.blocks.is_empty() {
            extra["blocks"] = Value::Array(block_rows(&built.blocks, inst));
        }
        extra
    }

    fn final_table(&self, summary: &Value) -> String {
        final_table(summary)
    }

    /// Per timer: `calls`, `outer` (outermost calls) and `wall_ns`, with `off_cpu_ns` too
    /// under virtual time (threads inside counted up to now).
    /// Counted blocks (`with_blocks_of`) come as rows `f @ +0x1c` with their `calls`.
    fn sample(&self, _table: &Table, built: &Built, inst: &dyn Installed) -> Option<Value> {
        let timed = &built.timed;
        let now = tsc_and_instant();
        let hz = ticks_per_ns(inst.installed_at(), now);
        let mut rows: Vec<Value> = timed
            .iter()
            .enumerate()
            .map(|(k, f)| {
                let s = inst.timer(k, now.0);
                let mut v = json!({"name": f.name, "calls": s.calls, "outer": s.outer,
                                   "wall_ns": (s.cycles as f64 / hz).round() as u64});
                if self.virtual_time {
                    v["off_cpu_ns"] = json!(off_cpu_ns(inst, k + timed.len(), now.0, hz));
                }
                if self.threads {
                    let twins = self.virtual_time.then_some(timed.len());
                    v["threads"] = Value::Array(thread_rows(inst, k, twins, now.0, hz));
                }
                v
            })
            .collect();
        rows.extend(
            block_rows(&built.blocks, inst)
                .into_iter()
                .map(|b| json!({"name": b["name"], "calls": b["count"], "outer": 0, "wall_ns": 0})),
        );
        Some(json!({ "rows": rows }))
    }
}

/// The live table: per interval, each timer that ran in it (calls, or threads inside), the
/// busiest first (at most `TOP_ROWS`), with its calls, time per outermost call, time per
/// second and threads inside; with virtual time, the CPU time per call and per second beside
/// them. One line sums up the others.
pub struct Table {
    since: (u64, Instant),
    last_at: (u64, Instant),
    /// Per timer: calls, nanoseconds and outermost calls at the last print, and its twin's
    /// off-CPU nanoseconds.
    last: Vec<(u64, u64, u64, u64)>,
    virtual_time: bool,
}

impl Table {
    fn new(timers: usize, virtual_time: bool, since: (u64, Instant)) -> Table {
        Table { since, last_at: since, last: vec![(0, 0, 0, 0); timers], virtual_time }
    }

    fn render(&mut self, timed: &[Timed], inst: &dyn Installed) -> String {
        let now = tsc_and_instant();
        let hz = ticks_per_ns(self.since, now);
        let secs = now.1.duration_since(self.last_at.1).as_secs_f64().max(1e-9);
        let n = timed.len();
        let mut rows = Vec::new();
        let mut idle = 0usize;
        for (k, f) in timed.iter().enumerate() {
            let s = inst.timer(k, now.0);
            let (calls, ns) = (s.calls - self.last[k].0, (s.cycles as f64 / hz) as u64);
            let outer = s.outer - self.last[k].2;
            let dns = ns.saturating_sub(self.last[k].1);
            let off = if self.virtual_time { off_cpu_ns(inst, k + n, now.0, hz) } else { 0 };
            let doff = off.saturating_sub(self.last[k].3);
            self.last[k] = (s.calls, ns, s.outer, off);
            if calls == 0 && s.inside == 0 {
                idle += 1;
                continue;
            }
            let per_call = |ns: u64| {
                if outer > 0 {
                    fmt_ns(ns as f64 / outer as f64)
                } else {
                    "-".into()
                }
            };
            let mut row = format!("{:>12.0} {:>12}", calls as f64 / secs, per_call(dns));
            if self.virtual_time {
                let _ = write!(row, " {:>12}", per_call(dns.saturating_sub(doff)));
            }
            let _ = write!(row, " {:>12}", fmt_ns(dns as f64 / secs));
            if self.virtual_time {
                let _ = write!(row, " {:>12}", fmt_ns(dns.saturating_sub(doff) as f64 / secs));
            }
            let _ = writeln!(row, " {:>8.2}  {}", dns as f64 / (secs * 1e9), f.name);
            rows.push((dns, row));
        }
        self.last_at = now;
        rows.sort_by_key(|r| std::cmp::Reverse(r.0));
        let mut t = format!("{:>12} {:>12}", "calls/s", "avg/call");
        if self.virtual_time {
            let _ = write!(t, " {:>12}", "cpu/call");
        }
        let _ = write!(t, " {:>12}", "time/s");
        if self.virtual_time {
            let _ = write!(t, " {:>12}", "cpu/s");
        }
        let _ = writeln!(t, " {:>8}  function", "threads");
        for (_, row) in rows.iter().take(TOP_ROWS) {
            t.push_str(row);
        }
        let more = rows.len().saturating_sub(TOP_ROWS);
        let more = if more > 0 { format!("{more} more ran, ") } else { String::new() };
        let _ = writeln!(t, "{:>12}  ({more}{idle} functions idle)", "");
        t
    }
}

/// Per timer, its totals (timers whose entry the kernel's driver refused are left out), and
/// the fields every summary has (`timed_seconds`, `tsc_ghz`). With virtual time, each has its
/// off-CPU time and virtual time (wall minus off-CPU) too.
fn summarize(inst: &dyn Installed, timed: &[Timed], virtual_time: bool) -> (Vec<Value>, Value) {
    let now = tsc_and_instant();
    let hz = ticks_per_ns(inst.installed_at(), now);
    let elapsed_ns = now.1.duration_since(inst.installed_at().1).as_nanos().max(1) as f64;
    let summary = timed
        .iter()
        .enumerate()
        .filter_map(|(k, f)| {
            let s = inst.timer(k, now.0);
            let total_ns = s.cycles as f64 / hz;
            let mut v = site_json(inst.site(f.entry)?);
            v["spec"] = json!(f.spec);
            v["function"] = json!(f.name);
            if let Some((caller, callee)) = &f.call {
                v["caller"] = json!(caller);
                v["callee"] = json!(callee);
            }
            v["calls"] = json!(s.calls);
            v["count"] = json!(s.calls);
            v["outermost_calls"] = json!(s.outer);
            v["total_ns"] = json!(total_ns.round() as u64);
            // Per outermost call: a recursion's inner calls are inside its interval.
            let per_call = |ns: f64| if s.outer > 0 { ns / s.outer as f64 } else { 0.0 };
            v["avg_ns"] = json!(per_call(total_ns));
            v["concurrency"] = json!(total_ns / elapsed_ns);
            if virtual_time {
                let off = inst.timer(k + timed.len(), now.0);
                let off_ns = off_cpu_ns(inst, k + timed.len(), now.0, hz);
                let virtual_ns = (total_ns - off_ns as f64).max(0.0);
                v["off_cpu_ns"] = json!(off_ns);
                v["virtual_ns"] = json!(virtual_ns.round() as u64);
                v["avg_virtual_ns"] = json!(per_call(virtual_ns));
                // Threads running inside on average (concurrency counts waiting ones too).
                v["running"] = json!(virtual_ns / elapsed_ns);
                v["lost"] = json!(s.lost.max(off.lost));
            } else {
                v["lost"] = json!(s.lost);
            }
            v["threads_inside"] = json!(s.inside);
            v["unmatched_exits"] = json!(s.unmatched);
            // An exit spliced as a trap takes its time stamp after the trap's delivery (a
            // signal: microseconds), which each interval then includes.
            let trapped = f
                .exits
                .iter()
                .any(|&i| inst.site(i).is_some_and(|s| s.kind == kerf_patch::SpliceKind::Trap));
            v["trap_exit"] = json!(trapped);
            v["exits"] = json!(f
                .exits
                .iter()
                .filter_map(|&i| inst.site(i).map(site_json))
                .collect::<Vec<_>>());
            if !f.tail_callees.is_empty() {
                v["tail_callees"] = json!(f.tail_callees);
            }
            Some(v)
        })
        .collect();
    let mut extra = json!({"timed_seconds": elapsed_ns / 1e9, "tsc_ghz": hz});
    if virtual_time {
        // A switch the off-CPU clock's program did not run for: its time off the CPU is counted
        // late (raw tracepoint) or not at all (the perf-event fallback). Said, not hidden.
        extra["off_cpu_missed_switches"] = json!(inst.off_cpu_missed());
        // A switch back in the kernel did not report: the thread's wait then is counted at its
        // next switch, possibly in a later call (totals stay right).
        extra["off_cpu_unreported_switches"] = json!(inst.off_cpu_unreported());
    }
    (summary, extra)
}

/// Each thread's share of timer `k` (and of its off-CPU twin `k + n` under virtual time,
/// `timers` = `Some(n)`) at TSC time `now`: its id (`tid`, with its process's `pid`; `null` where the target's
/// thread ids are not known, with the thread table's `slot`), its outermost calls and wall
/// time, and its off-CPU time where there is a twin. The most time first.
fn thread_rows(
    inst: &dyn Installed,
    k: usize,
    timers: Option<usize>,
    now: u64,
    hz: f64,
) -> Vec<Value> {
    let off: Option<HashMap<u64, u64>> = timers.map(|n| {
        inst.timer_threads(k + n, now).into_iter().map(|(_, s)| (s.slot, s.cycles)).collect()
    });
    let mut rows: Vec<(u64, Value)> = inst
        .timer_threads(k, now)
        .into_iter()
        .map(|(owner, s)| {
            let (pid, tid) = ((owner >> 32) as u32, owner as u32);
            let wall = (s.cycles as f64 / hz).round() as u64;
            let mut v = json!({"slot": s.slot, "tid": (tid != 0).then_some(tid),
                               "pid": (pid != 0).then_some(pid), "outer": s.outer,
                               "wall_ns": wall, "inside": s.inside});
            if let Some(off) = &off {
                let raw = off.get(&s.slot).copied().unwrap_or(0);
                v["off_cpu_ns"] = json!(off_cpu_to_ns(inst, raw, hz));
            }
            (wall, v)
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.0));
    rows.into_iter().map(|(_, v)| v).collect()
}

/// A counter at every basic block of each function of `names` (`f@blocks`), appended to
/// `probes`: each block's row name (`f @ +0x1c`, its offset in the function) and probe.
fn block_probes(
    images: &[AnalyzedImage],
    aliases: &[Vec<String>],
    probes: &mut Vec<Probe>,
    names: &[String],
) -> Result<Vec<(String, usize)>, ToolError> {
    let mut rows = Vec::new();
    for name in names {
        let spec = spec::parse(&format!("{name}@blocks"))?;
        for point in resolve(images, aliases, &[spec])? {
            let f = images[point.module].analysis.cfg.function(point.func);
            let row = format!("{name} @ +{:#x}", point.addr.0 - f.entry.0);
            rows.push((row, probes.len()));
            probes.push(Probe { point, action: Action::Count });
        }
    }
    Ok(rows)
}

/// The counted blocks' rows: `name`, `count`, and where each is (`site_json`).
fn block_rows(blocks: &[(String, usize)], inst: &dyn Installed) -> Vec<Value> {
    blocks
        .iter()
        .filter_map(|(name, i)| {
            let mut v = site_json(inst.site(*i)?);
            v["name"] = json!(name);
            v["count"] = json!(inst.count(*i));
            Some(v)
        })
        .collect()
}

/// A table of every timer of a summary: calls, total time, time per call, concurrency; with
/// virtual time (`virtual_ns` in the summary), CPU time in all and per call too.
pub fn final_table(v: &Value) -> String {
    let functions: Vec<&Value> = v["functions"].as_array().into_iter().flatten().collect();
    let virtual_time = functions.iter().any(|f| f.get("virtual_ns").is_some());
    let mut t = format!("{:>12} {:>12} {:>12}", "calls", "total", "avg/call");
    if virtual_time {
        let _ = write!(t, " {:>12} {:>12}", "cpu", "cpu/call");
    }
    let _ = writeln!(t, " {:>8}  function", "threads");
    let dash = |ns: f64| if ns > 0.0 { fmt_ns(ns) } else { "-".into() };
    for v in functions {
        let calls = v["calls"].as_u64().unwrap_or(0);
        let total = v["total_ns"].as_u64().unwrap_or(0) as f64;
        let avg = v["avg_ns"].as_f64().unwrap_or(0.0);
        let _ = write!(t, "{calls:>12} {:>12} {:>12}", fmt_ns(total), dash(avg));
        if virtual_time {
            let cpu = v["virtual_ns"].as_u64().unwrap_or(0) as f64;
            let cpu_avg = v["avg_virtual_ns"].as_f64().unwrap_or(0.0);
            let _ = write!(t, " {:>12} {:>12}", fmt_ns(cpu), dash(cpu_avg));
        }
        // A trap at an exit delivers a signal before the stop's time stamp: microseconds
        // in every interval that ends there.
        let trap =
            if v["trap_exit"] == true { ", a trap exit: times include its delivery" } else { "" };
        let _ = writeln!(
            t,
            " {:>8.2}  {} ({} {}{trap})",
            v["concurrency"].as_f64().unwrap_or(0.0),
            v["function"].as_str().unwrap_or(""),
            v["kind"].as_str().unwrap_or(""),
            v["address"].as_str().unwrap_or("")
        );
        // Per thread (`--threads`): outermost calls, time, per call, CPU time.
        for r in v["threads"].as_array().into_iter().flatten() {
            let outer = r["outer"].as_u64().unwrap_or(0);
            let wall = r["wall_ns"].as_u64().unwrap_or(0) as f64;
            let per = |ns: f64| if outer > 0 { dash(ns / outer as f64) } else { "-".into() };
            let _ = write!(t, "{outer:>12} {:>12} {:>12}", fmt_ns(wall), per(wall));
            if virtual_time {
                let cpu = (wall - r["off_cpu_ns"].as_u64().unwrap_or(0) as f64).max(0.0);
                let _ = write!(t, " {:>12} {:>12}", fmt_ns(cpu), per(cpu));
            }
            let who = match r["tid"].as_u64() {
                Some(tid) => format!("thread {tid}"),
                None => format!("thread slot {}", r["slot"]),
            };
            let _ = writeln!(t, " {:>8}    {who}", "");
        }
    }
    t
}

/// A timer per function: a start probe at its entry and a stop probe at each exit. With
/// `through_tail_calls`, a direct tail call (`jmp g`) is not an exit: the timer runs on until
/// the return that `g` (or what `g` tail-calls in turn) makes to the function's caller, so
/// every return of those functions gets a tail-return probe (see codegen's timer module).
fn timer_probes(
    images: &[AnalyzedImage],
    aliases: &[Vec<String>],
    specs: &[Spec],
    through_tail_calls: bool,
) -> Result<(Vec<Probe>, Vec<Timed>), ToolError> {
    let mut probes = Vec::new();
    let mut timed: Vec<Timed> = Vec::new();
    let mut by_func: HashMap<(usize, u32), usize> = HashMap::new();
    let mut exit_points: Vec<(usize, Point)> = Vec::new();
    for s in specs {
        for point in resolve(images, aliases, std::slice::from_ref(s))? {
            let key = (point.module, point.func.0);
            if by_func.contains_key(&key) {
                continue;
            }
            by_func.insert(key, timed.len());
            let name = images[point.module].analysis.cfg.function(point.func).name.clone();
            timed.push(Timed {
                spec: s.text.clone(),
                name,
                call: None,
                entry: probes.len(),
                exits: Vec::new(),
                tail_callees: Vec::new(),
            });
            probes.push(Probe { point, action: Action::TimerStart(timed.len() - 1) });
        }
        let SpecWhat::Symbol { pattern, .. } = &s.what else { continue };
        let exits = Spec {
            text: s.text.clone(),
            module: s.module.clone(),
            what: SpecWhat::Symbol {
                pattern: pattern.clone(),
                offset: 0,
                blocks: false,
                exits: true,
            },
        };
        // A function without a return or tail call (it loops forever or only ends the
        // program) has no exits; resolving them then fails, which is not an error here.
        for point in resolve(images, aliases, &[exits]).unwrap_or_default() {
            if let Some(&t) = by_func.get(&(point.module, point.func.0)) {
                exit_points.push((t, point));
            }
        }
    }
    // Each exit: a tail call to follow, or the end of the call.
    let mut roots: Vec<(usize, FuncId)> = Vec::new();
    let mut exits: Vec<Probe> = Vec::new();
    for (t, point) in exit_points {
        let img = &images[point.module];
        let target = if through_tail_calls { direct_tail_jump(img, &point) } else { None };
        let action = match target {
            Some(g) => {
                roots.extend([(point.module, point.func), (point.module, g)]);
                timed[t].tail_callees.push(img.analysis.cfg.function(g).name.clone());
                Action::TimerTailCall(t)
            }
            None => Action::TimerStop(t),
        };
        exits.push(Probe { point, action });
    }
    // The returns that may end a tail call, planned before the timers' own exits so that
    // where both meet the tail return (which must know the stack pointer at its exit) picks
    // the site.
    for (m, h) in tail_closure(images, roots) {
        let img = &images[m];
        let cfg = &img.analysis.cfg;
        let fun = cfg.function(h);
        for b in cfg.blocks_of(h) {
            if !matches!(b.term, Terminator::Return | Terminator::IndirectTailCall) {
                continue;
            }
            let Some(a) = last_instruction(img, b) else { continue };
            let point = Point {
                spec: format!("{} (returns of tail calls)", fun.name),
                label: format!("{}+{:#x}", fun.name, a.0 - fun.entry.0),
                module: m,
                func: h,
                addr: a,
                at_exit: true,
            };
            probes.push(Probe { point, action: Action::TimerTailReturn });
        }
    }
    for p in exits {
        if let Action::TimerStop(t) | Action::TimerTailCall(t) = p.action {
            timed[t].exits.push(probes.len());
        }
        probes.push(p);
    }
    Ok((probes, timed))
}

/// The function an exit point jumps to, when it is a direct tail call (`jmp g`; not a fall
/// through into the next function, whose stack pointer at the transfer the probe cannot
/// know).
fn direct_tail_jump(img: &AnalyzedImage, point: &Point) -> Option<FuncId> {
    let cfg = &img.analysis.cfg;
    let b = cfg.block(cfg.block_containing(point.func, point.addr)?);
    if b.term != Terminator::TailCall {
        return None;
    }
    let (base, bytes) = img.code_region(point.addr)?;
    let insn = kerf_arch::x86_64::Scanner::new(bytes, base).decode(point.addr)?;
    if !insn.is_jmp_short_or_near() {
        return None;
    }
    cfg.edges_of(b).find_map(|e| match (e.kind, e.target) {
        (EdgeKind::TailCall, EdgeTarget::Function(g)) => Some(g),
        _ => None,
    })
}

/// Every function reachable from `roots` by direct tail calls (jumps, conditional jumps,
/// jump-table entries and falls into the next function), roots included: a tail call's
/// frame may end at any of their returns.
pub(crate) fn tail_closure(
    images: &[AnalyzedImage],
    roots: Vec<(usize, FuncId)>,
) -> Vec<(usize, FuncId)> {
    let mut seen: std::collections::HashSet<(usize, FuncId)> = roots.iter().copied().collect();
    let mut todo = roots;
    let mut out = Vec::new();
    while let Some((m, h)) = todo.pop() {
        out.push((m, h));
        let cfg = &images[m].analysis.cfg;
        for b in cfg.blocks_of(h) {
            for e in cfg.edges_of(b) {
                if let (EdgeKind::TailCall, EdgeTarget::Function(g)) = (e.kind, e.target) {
                    if seen.insert((m, g)) {
                        todo.push((m, g));
                    }
                }
            }
        }
    }
    out.sort_unstable_by_key(|&(m, h)| (m, h.0));
    out
}

/// A timer per (timed function, callee): started at each call instruction to that callee and
/// stopped at the call's return address. An indirect call counts as the callee
/// `(indirect)`; calls that never return (no return address block) are left out. A path that
/// reaches a return address without the call (another branch joining there) only counts as
/// an unmatched exit.
fn callee_probes(
    images: &[AnalyzedImage],
    probes: &mut Vec<Probe>,
    timed: &mut Vec<Timed>,
    only: Option<&[String]>,
    skip: &[String],
) {
    let callers: Vec<(usize, usize)> = timed
        .iter()
        .enumerate()
        .filter(|(_, t)| only.is_none_or(|names| names.contains(&t.name)))
        .map(|(k, t)| (k, t.entry))
        .collect();
    let mut by_callee: HashMap<(usize, u32, String), usize> = HashMap::new();
    for (k, entry) in callers {
        let (m, f) = (probes[entry].point.module, probes[entry].point.func);
        let img = &images[m];
        let cfg = &img.analysis.cfg;
        let caller = cfg.function(f).name.clone();
        for b in cfg.blocks_of(f) {
            if !matches!(b.term, Terminator::Call | Terminator::IndirectCall) {
                continue;
            }
            let edges = cfg.edges_of(b);
            let callee = edges
                .clone()
                .find(|e| e.kind == EdgeKind::Call)
                .and_then(|e| match e.target {
                    EdgeTarget::Function(g) => Some(cfg.function(g).name.clone()),
                    _ => None,
                })
                .unwrap_or_else(|| "(indirect)".to_string());
            let ret = edges.clone().find_map(|e| match (e.kind, e.target) {
                (EdgeKind::FallThrough, EdgeTarget::Block(r)) => Some(cfg.block(r).start),
                _ => None,
            });
            let (Some(ret), Some(call)) = (ret, last_instruction(img, b)) else { continue };
            if skip.iter().any(|s| *s == format!("{caller} > {callee}")) {
                continue;
            }
            let key = (m, f.0, callee.clone());
            // A new timer's `entry` is its first call site, pushed just below.
            let t = *by_callee.entry(key).or_insert_with(|| {
                timed.push(Timed {
                    spec: timed[k].spec.clone(),
                    name: format!("{caller} > {callee}"),
                    call: Some((caller.clone(), callee.clone())),
                    entry: probes.len(),
                    exits: Vec::new(),
                    tail_callees: Vec::new(),
                });
                timed.len() - 1
            });
            let fun = cfg.function(f);
            let spec = timed[k].spec.clone();
            let point = |a: kerf_arch::ImageAddr| Point {
                spec: spec.clone(),
                label: format!("{}+{:#x}", fun.name, a.0 - fun.entry.0),
                module: m,
                func: f,
                addr: a,
                at_exit: false,
            };
            probes.push(Probe { point: point(call), action: Action::TimerStart(t) });
            timed[t].exits.push(probes.len());
            probes.push(Probe { point: point(ret), action: Action::TimerStop(t) });
        }
    }
}

/// The address of a block's last instruction.
fn last_instruction(
    img: &kerf_session::AnalyzedImage,
    b: &kerf_analysis::cfg::Block,
) -> Option<kerf_arch::ImageAddr> {
    let (base, bytes) = img.code_region(b.start)?;
    let mut sc = kerf_arch::x86_64::Scanner::new(bytes, base);
    let mut a = b.start;
    loop {
        let next = kerf_arch::ImageAddr(sc.decode(a)?.next_ip());
        if next >= b.end() {
            return Some(a);
        }
        a = next;
    }
}

/// Nanoseconds, shortened with a unit.
pub fn fmt_ns(ns: f64) -> String {
    if ns >= 1e9 {
        format!("{:.2} s", ns / 1e9)
    } else if ns >= 1e6 {
        format!("{:.2} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} us", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_shortened_with_their_unit() {
        let cases = [
            (0.0, "0 ns"),
            (999.4, "999 ns"),
            (1_500.0, "1.50 us"),
            (2_345_678.0, "2.35 ms"),
            (3.2e9, "3.20 s"),
        ];
        for (ns, text) in cases {
            assert_eq!(fmt_ns(ns), text, "{ns} ns");
        }
    }

    #[test]
    fn final_table_has_a_row_per_function_and_a_dash_for_no_outermost_call() {
        let v = json!({"functions": [
            {"calls": 10, "total_ns": 5000, "avg_ns": 500.0, "concurrency": 0.25,
             "function": "leaf", "kind": "jump5", "address": "0x401000"},
            {"calls": 0, "total_ns": 0, "avg_ns": 0.0, "concurrency": 0.0,
             "function": "main > puts", "kind": "trap", "address": "0x401100"},
        ]});
        let rows: Vec<String> = final_table(&v).lines().map(str::to_string).collect();
        assert_eq!(rows.len(), 3);
        assert_eq!(
            rows[0],
            format!(
                "{:>12} {:>12} {:>12} {:>8}  function",
                "calls", "total", "avg/call", "threads"
            )
        );
        assert_eq!(
            rows[1],
            format!(
                "{:>12} {:>12} {:>12} {:>8}  leaf (jump5 0x401000)",
                10, "5.00 us", "500 ns", "0.25"
            )
        );
        assert_eq!(
            rows[2],
            format!(
                "{:>12} {:>12} {:>12} {:>8}  main > puts (trap 0x401100)",
                0, "0 ns", "-", "0.00"
            )
        );
    }
}
