//! `locks`: waiting threads, per lock and per call site (KernInst's "average waiting threads
//! on a mutex"), in a process: every acquisition of a pthread mutex or rwlock is an interval
//! from the lock function's entry (`pthread_mutex_lock(m)`, the lock and the return address
//! captured) to its return, per thread. The time threads spend in them, divided by the time
//! watched, is the average number of threads waiting (or acquiring: an uncontended call adds
//! its few nanoseconds, and each call the tracer's own cost, some 100 ns here); per lock and
//! per call site, with the calls, the longest wait and how many calls took a microsecond or
//! more (`slow_calls`).
//!
//! It runs on the tracer: its probes (entries with `{lock=arg0, site=u64(rsp)}`, exits) go
//! into per-thread rings, and a sink of its own pairs each thread's entries and exits as the
//! reader drains them (a thread's events come in its order). A lost event (a full ring) is
//! counted, and that thread's open interval dropped.

use crate::error::ToolError;
use crate::live::{run, Events, LiveOptions};
use crate::trace::event::{PointKind, Record, Tables, Value as Captured};
use crate::trace::tracer::{Output, Trace};
use crate::trace::{Sink, Summary};
use kerf_session::live::Target;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt::Write;
use std::rc::Rc;

/// The lock functions watched: pthread mutexes and rwlocks (their lock argument first).
pub const LOCK_FUNCTIONS: [&str; 5] = [
    "pthread_mutex_lock",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
];

/// A wait this long or longer counts as contended.
const CONTENDED_NS: u64 = 1000;

/// What one lock, or one call site, saw.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Waits {
    pub calls: u64,
    pub contended: u64,
    pub total_ns: u64,
    pub longest_ns: u64,
    /// The lock function (for a call site, the one it calls).
    pub function: String,
}

impl Waits {
    fn add(&mut self, ns: u64, function: &str) {
        self.calls += 1;
        self.total_ns += ns;
        self.longest_ns = self.longest_ns.max(ns);
        if ns >= CONTENDED_NS {
            self.contended += 1;
        }
        if self.function.is_empty() {
            self.function = function.to_string();
        }
    }
}

/// Everything the sink gathered.
#[derive(Debug, Default)]
pub struct LockStats {
    /// By lock address.
    pub locks: HashMap<u64, Waits>,
    /// By call site (the lock call's return address).
    pub sites: HashMap<u64, Waits>,
    /// Per thread: the open acquisition (function, lock, site, entry time).
    open: HashMap<u32, (String, u64, u64, u64)>,
    /// Events the rings dropped, and the first and last event times.
    pub lost: u64,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    /// Intervals left open at the end (threads inside a lock call when the watch ended).
    pub unfinished: u64,
}

impl LockStats {
    /// One event of a lock function: an entry opens the thread's interval, an exit closes it.
    pub fn event(&mut self, kind: PointKind, function: &str, tid: u32, t: u64, values: &[u64]) {
        self.first_ns.get_or_insert(t);
        self.last_ns = self.last_ns.max(t);
        match kind {
            PointKind::Entry => {
                let (lock, site) = (values.first().copied(), values.get(1).copied());
                let (Some(lock), Some(site)) = (lock, site) else { return };
                self.open.insert(tid, (function.to_string(), lock, site, t));
            }
            PointKind::Exit => {
                let Some((f, lock, site, t0)) = self.open.remove(&tid) else { return };
                let ns = t.saturating_sub(t0);
                self.locks.entry(lock).or_default().add(ns, &f);
                self.sites.entry(site).or_default().add(ns, &f);
            }
            PointKind::Instant => {}
        }
    }
}

/// The sink that feeds [`LockStats`] (shared with the tool, which reads it after the run).
struct LockSink(Rc<RefCell<LockStats>>);

impl Sink for LockSink {
    fn record(&mut self, t: &Tables, r: &Record) -> std::io::Result<()> {
        let mut s = self.0.borrow_mut();
        match r {
            Record::Event(e) => {
                let Some(p) = t.probe(e) else { return Ok(()) };
                let words: Vec<u64> = e
                    .values
                    .iter()
                    .filter_map(|v| match v {
                        Captured::Unsigned(x) => Some(*x),
                        Captured::Signed(x) => Some(*x as u64),
                        _ => None,
                    })
                    .collect();
                s.event(e.kind, &p.name, e.tid, e.time_ns, &words);
            }
            Record::Loss(l) => {
                s.lost += l.count;
                // A thread's dropped exit would pair its entry with a later exit.
                s.open.clear();
            }
            _ => {}
        }
        Ok(())
    }

    fn finish(&mut self, _t: &Tables, _s: &Summary) -> std::io::Result<()> {
        let mut s = self.0.borrow_mut();
        s.unfinished = s.open.len() as u64;
        Ok(())
    }
}

/// Watch the lock functions of `target` (a process) with `opts`' sampling, and return what
/// was seen.
pub fn watch(
    target: &mut Target,
    opts: &LiveOptions,
    events: &mut dyn Events,
) -> Result<LockStats, ToolError> {
    if matches!(target, Target::Kernel(_)) {
        return Err(ToolError::Usage("kerf locks watches a process's pthread locks".into()));
    }
    let stats = Rc::new(RefCell::new(LockStats::default()));
    let mut lines = Vec::new();
    for f in LOCK_FUNCTIONS {
        // Only those the process has (a static program may lack rwlocks).
        if resolvable(target, f) {
            lines.push(format!("libc:{f} {{lock=arg0, site=u64(rsp)}}"));
            lines.push(format!("libc:{f}@exits"));
        }
    }
    if lines.is_empty() {
        return Err(ToolError::Usage("the process has no pthread lock functions in libc".into()));
    }
    let sink = LockSink(stats.clone());
    let tool = Trace::new(&lines, false, None, Vec::new(), None, Output::Sink(Box::new(sink)))?;
    let report = run(&tool, target, opts, events)?;
    if let Some(e) = report.error {
        return Err(e);
    }
    drop(tool);
    // Taken out whoever else still holds the sink: never an empty report in its place.
    let s = std::mem::take(&mut *stats.borrow_mut());
    Ok(s)
}

fn resolvable(target: &Target, f: &str) -> bool {
    let Target::Process(p) = target else { return false };
    let Ok(s) = kerf_session::spec::parse(&format!("libc:{f}")) else { return false };
    crate::live::resolve(&p.modules, &p.aliases, &[s]).is_ok()
}

/// A name for an address of the target, from `name_of` (a symbol and offset), else hex.
fn named(addr: u64, name_of: &dyn Fn(u64) -> Option<String>) -> String {
    name_of(addr).unwrap_or_else(|| format!("{addr:#x}"))
}

/// The report: per lock and per call site, most waited first, with the average number of
/// threads waiting over the time watched. `name_of` names addresses (a lock in a module's
/// data, a call site in its code).
pub fn report(s: &LockStats, seconds: f64, name_of: &dyn Fn(u64) -> Option<String>) -> Value {
    let secs = seconds.max(1e-9);
    let rows = |m: &HashMap<u64, Waits>| {
        let mut v: Vec<(&u64, &Waits)> = m.iter().collect();
        v.sort_by(|a, b| b.1.total_ns.cmp(&a.1.total_ns).then(a.0.cmp(b.0)));
        v.into_iter()
            .map(|(a, w)| {
                json!({"address": format!("{a:#x}"), "name": named(*a, name_of),
                       "function": w.function, "calls": w.calls, "slow_calls": w.contended,
                       "wait_ns": w.total_ns, "longest_ns": w.longest_ns,
                       "waiting_threads": w.total_ns as f64 / 1e9 / secs})
            })
            .collect::<Vec<_>>()
    };
    let total: u64 = s.locks.values().map(|w| w.total_ns).sum();
    json!({"seconds": seconds, "waiting_threads": total as f64 / 1e9 / secs,
           "locks": rows(&s.locks), "sites": rows(&s.sites), "lost_events": s.lost,
           "unfinished": s.unfinished})
}

/// The report as two tables.
pub fn table(v: &Value, most: usize) -> String {
    let mut t = format!(
        "average waiting threads {:.3} over {:.2} s\n",
        v["waiting_threads"].as_f64().unwrap_or(0.0),
        v["seconds"].as_f64().unwrap_or(0.0)
    );
    for (title, key) in [("lock", "locks"), ("call site", "sites")] {
        let _ = writeln!(
            t,
            "\n{:>9} {:>10} {:>10} {:>12} {:>12}  {title}",
            "waiting", "calls", ">=1us", "wait", "longest"
        );
        for r in v[key].as_array().into_iter().flatten().take(most) {
            let _ = writeln!(
                t,
                "{:>9.3} {:>10} {:>10} {:>12} {:>12}  {} ({})",
                r["waiting_threads"].as_f64().unwrap_or(0.0),
                r["calls"].as_u64().unwrap_or(0),
                r["slow_calls"].as_u64().unwrap_or(0),
                crate::time::fmt_ns(r["wait_ns"].as_f64().unwrap_or(0.0)),
                crate::time::fmt_ns(r["longest_ns"].as_f64().unwrap_or(0.0)),
                r["name"].as_str().unwrap_or(""),
                r["function"].as_str().unwrap_or("")
            );
        }
    }
    if v["lost_events"].as_u64().unwrap_or(0) > 0 {
        let _ = writeln!(t, "\n{} events lost (rings full): counts are low", v["lost_events"]);
    }
    t
}

/// Names of addresses in a process's modules: the ELF symbol (code or data) that holds an
/// address, with the offset into it, as `module:symbol+0x10`; in code without a sized symbol
/// (a stripped library's local functions), the function kerf's analysis found there.
pub struct Namer {
    modules: Vec<Named>,
}

/// A module's name, its load bias, and its sized symbols (address, size, name) by address.
type Named = (String, u64, Vec<(u64, u64, String)>);

impl Namer {
    /// The symbols of `target`'s modules (a process; the kernel names nothing here).
    pub fn new(target: &Target) -> Namer {
        let mut modules = Vec::new();
        if let Target::Process(p) = target {
            for m in &p.modules {
                let Some(bias) = m.bias else { continue };
                let name = kerf_session::spec::module_name(&m.analysis.image).to_string();
                let Ok(img) = kerf_analysis::image::Image::from_elf(&name, &m.bytes) else {
                    continue;
                };
                let mut syms: Vec<(u64, u64, String)> = img
                    .symbols
                    .iter()
                    .filter(|s| s.size > 0)
                    .map(|s| (s.addr.0, s.size, s.name.clone()))
                    .collect();
                let sized: std::collections::HashSet<u64> = syms.iter().map(|s| s.0).collect();
                syms.extend(
                    m.analysis
                        .cfg
                        .functions
                        .iter()
                        .filter(|f| !sized.contains(&f.entry.0) && f.extent.end > f.extent.start)
                        .map(|f| (f.entry.0, f.extent.end - f.entry.0, f.name.clone())),
                );
                syms.sort();
                modules.push((name, bias, syms));
            }
        }
        Namer { modules }
    }

    /// The name of `addr`, if a symbol holds it.
    pub fn name(&self, addr: u64) -> Option<String> {
        for (module, bias, syms) in &self.modules {
            let Some(a) = addr.checked_sub(*bias) else { continue };
            let i = syms.partition_point(|s| s.0 <= a);
            let Some((start, size, name)) = i.checked_sub(1).map(|i| &syms[i]) else { continue };
            if a < start + size {
                let off = a - start;
                return Some(if off == 0 {
                    format!("{module}:{name}")
                } else {
                    format!("{module}:{name}+{off:#x}")
                });
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_and_exits_pair_per_thread() {
        let mut s = LockStats::default();
        // Thread 1 waits 5 us on lock A from site X; thread 2 meanwhile 100 ns on A from Y.
        s.event(PointKind::Entry, "pthread_mutex_lock", 1, 1_000, &[0xa, 0x10]);
        s.event(PointKind::Entry, "pthread_mutex_lock", 2, 1_500, &[0xa, 0x20]);
        s.event(PointKind::Exit, "pthread_mutex_lock", 2, 1_600, &[]);
        s.event(PointKind::Exit, "pthread_mutex_lock", 1, 6_000, &[]);
        // An exit with no entry (the thread was inside when the probes went in): nothing.
        s.event(PointKind::Exit, "pthread_mutex_lock", 3, 7_000, &[]);
        let a = &s.locks[&0xa];
        assert_eq!((a.calls, a.contended, a.total_ns, a.longest_ns), (2, 1, 5_100, 5_000));
        assert_eq!(s.sites[&0x10].total_ns, 5_000);
        assert_eq!(s.sites[&0x20].calls, 1);
        let v = report(&s, 0.001, &|a| (a == 0xa).then(|| "app:big_lock".to_string()));
        assert_eq!(v["locks"][0]["name"], "app:big_lock");
        // 5.1 us of waiting in 1 ms: 0.0051 threads on average.
        assert!((v["waiting_threads"].as_f64().unwrap() - 0.0051).abs() < 1e-9, "{v}");
        assert!(table(&v, 5).contains("app:big_lock"));
    }
}
