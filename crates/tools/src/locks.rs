//! `locks`: waiting threads, per lock and per call site (KernInst's "average waiting threads
//! on a mutex"). In a process, every acquisition of a pthread mutex or rwlock is an interval
//! from the lock function's entry (`pthread_mutex_lock(m)`, the lock and the return address
//! captured) to its return, per thread; in the kernel, every entry into a lock's slow path
//! (mutexes, rw semaphores, queued spinlocks and rwlocks: an uncontended acquisition never
//! gets there) to its return. The time threads spend in them, divided by the time watched, is
//! the average number of threads waiting (or acquiring: an uncontended pthread call adds its
//! few nanoseconds, and each call the tracer's own cost, some 100 ns here); per lock and per
//! call site, with the calls, the longest wait and how many calls took a microsecond or more
//! (`slow_calls`).
//!
//! It runs on the tracer: its probes go into rings, and a sink of its own pairs each thread's
//! entries and exits as the reader drains them (a thread's events come in its order). An
//! interval ends at the *returns* of the lock function and of every function it reaches by
//! tail calls (`__mutex_lock_slowpath` jumps to the shared `__mutex_lock`; glibc's
//! `pthread_mutex_lock` to `__pthread_mutex_lock_full` for recursive and error-checking
//! mutexes), never at the tail jump itself, which would end the wait before it began. A lost
//! event (a full ring) is counted, and the open intervals dropped.
//!
//! The call site: in a process the return address. In the kernel that is inside the lock's
//! own wrapper (`mutex_lock`, `down_write`, `_raw_spin_lock`), so the entry captures the first
//! stack words and the site is the first of them that returns into code outside the lock
//! functions and their wrappers ([`KERNEL_WRAPPERS`]); a guess from the stack, not an unwind.

use crate::error::ToolError;
use crate::live::{run, Events, LiveOptions};
use crate::trace::event::{PointKind, Record, Tables, Value as Captured};
use crate::trace::tracer::{Output, Trace};
use crate::trace::{Sink, Summary};
use kerf_analysis::cfg::Terminator;
use kerf_session::live::Target;
use kerf_session::AnalyzedImage;
use serde_json::{json, Value};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::fmt::Write;
use std::rc::Rc;

/// The lock functions watched in a process: pthread mutexes and rwlocks (their lock argument
/// first).
pub const LOCK_FUNCTIONS: [&str; 5] = [
    "pthread_mutex_lock",
    "pthread_rwlock_rdlock",
    "pthread_rwlock_wrlock",
    "pthread_mutex_timedlock",
    "pthread_mutex_clocklock",
];

/// The kernel's lock slow paths (the lock argument first): only a contended acquisition
/// enters one, and a task waits there, spinning or asleep.
pub const KERNEL_LOCK_FUNCTIONS: [&str; 8] = [
    "__mutex_lock_slowpath",
    "__mutex_lock_killable_slowpath",
    "__mutex_lock_interruptible_slowpath",
    "rwsem_down_read_slowpath",
    "rwsem_down_write_slowpath",
    "native_queued_spin_lock_slowpath",
    "queued_read_lock_slowpath",
    "queued_write_lock_slowpath",
];

/// Kernel functions (by name prefix) that only take a lock on behalf of their caller: a return
/// address inside one is not the call site a user asks about.
pub const KERNEL_WRAPPERS: [&str; 14] = [
    "mutex_lock",
    "__mutex_lock",
    "down_read",
    "down_write",
    "__down",
    "rwsem_",
    "_raw_spin_lock",
    "_raw_read_lock",
    "_raw_write_lock",
    "do_raw_",
    "queued_",
    "native_queued_",
    "__pv_queued_",
    "lock_sock",
];

/// Stack words a kernel entry captures, to find the call site above the wrappers: as many as
/// a record's longest slot holds (each memory capture takes its value and a status word).
const KERNEL_STACK_WORDS: usize = 5;

/// Open intervals kept per thread: nested ones (a spinlock's slow path inside a mutex's, an
/// interrupt's inside a task's) stack up; more than this means exits went missing.
const MAX_NESTED: usize = 8;

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

/// An acquisition under way: the lock function, the lock, the call site, the entry time.
type Open = (String, u64, u64, u64);

/// The call site from the words an entry captured after the lock.
type SiteOf = Box<dyn Fn(&[u64]) -> u64>;

/// Everything the sink gathered.
#[derive(Debug, Default)]
pub struct LockStats {
    /// By lock address.
    pub locks: HashMap<u64, Waits>,
    /// By call site (the lock call's return address).
    pub sites: HashMap<u64, Waits>,
    /// Per thread (see [`thread_key`]): its open acquisitions, innermost last (function, lock,
    /// site, entry time).
    open: HashMap<(u32, u32), Vec<Open>>,
    /// Events the rings dropped, and the first and last event times.
    pub lost: u64,
    pub first_ns: Option<u64>,
    pub last_ns: u64,
    /// Intervals left open at the end (threads inside a lock call when the watch ended), and
    /// those dropped because too many were open on one thread.
    pub unfinished: u64,
    pub dropped: u64,
    /// Seconds from the start of the probes' installation to the end of their removal.
    pub watched: Option<f64>,
    /// What became of the target (the live summary's `target`: a launched command's exit
    /// code among it).
    pub target: Value,
    /// Names of call sites in modules the process mapped after kerf looked at it (a JVM's
    /// `libjvm.so`, loaded by the launcher), found while it ran (see [`LateNames`]).
    pub late_names: HashMap<u64, String>,
}

/// Whose interval an event belongs to: the thread, except that the kernel's idle tasks all
/// have id 0 (one per CPU, and an idle task never moves).
pub fn thread_key(tid: u32, cpu: u32) -> (u32, u32) {
    (tid, if tid == 0 { cpu } else { 0 })
}

impl LockStats {
    /// One event of a lock function: an entry (with its lock and call site) opens an interval
    /// of the thread, an exit closes the innermost one.
    pub fn event(
        &mut self,
        kind: PointKind,
        function: &str,
        thread: (u32, u32),
        t: u64,
        lock_site: Option<(u64, u64)>,
    ) {
        self.first_ns.get_or_insert(t);
        self.last_ns = self.last_ns.max(t);
        match kind {
            PointKind::Entry => {
                let Some((lock, site)) = lock_site else { return };
                let open = self.open.entry(thread).or_default();
                if open.len() == MAX_NESTED {
                    open.remove(0);
                    self.dropped += 1;
                }
                open.push((function.to_string(), lock, site, t));
            }
            PointKind::Exit => {
                let Some(open) = self.open.get_mut(&thread) else { return };
                let Some((f, lock, site, t0)) = open.pop() else { return };
                let ns = t.saturating_sub(t0);
                self.locks.entry(lock).or_default().add(ns, &f);
                self.sites.entry(site).or_default().add(ns, &f);
            }
            PointKind::Instant => {}
        }
    }

    /// The events are all in: what is still open is unfinished.
    pub fn finish(&mut self) {
        self.unfinished = self.open.values().map(|v| v.len() as u64).sum();
    }
}

/// The sink that feeds [`LockStats`] (shared with the tool, which reads it after the run).
struct LockSink {
    stats: Rc<RefCell<LockStats>>,
    site: SiteOf,
    /// A process's: names for locks and call sites in modules mapped after kerf looked.
    late: Option<Rc<RefCell<LateNames>>>,
}

impl Sink for LockSink {
    fn record(&mut self, t: &Tables, r: &Record) -> std::io::Result<()> {
        let mut s = self.stats.borrow_mut();
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
                let key = thread_key(e.tid, e.cpu);
                // The exits are returns, plain points to the tracer: they capture nothing.
                if p.kind == PointKind::Exit || p.captures.is_empty() {
                    s.event(PointKind::Exit, &p.name, key, e.time_ns, None);
                } else if let Some((&lock, rest)) = words.split_first() {
                    let site = (self.site)(rest);
                    if let Some(l) = &self.late {
                        let mut l = l.borrow_mut();
                        l.note(lock);
                        l.note(site);
                    }
                    s.event(PointKind::Entry, &p.name, key, e.time_ns, Some((lock, site)));
                }
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
        self.stats.borrow_mut().finish();
        Ok(())
    }
}

/// The tracer's probe lines for `target`'s lock functions: an entry line per lock function
/// `target` has, with the lock and the call site (or the stack words it is found in), and a
/// line per return of it and of what it reaches by tail calls, capturing nothing.
fn lock_lines(target: &Target) -> Vec<String> {
    let (images, aliases, functions, prefix, captures): (_, &[Vec<String>], &[&str], _, _) =
        match target {
            Target::Process(p) => (
                &p.modules,
                &p.aliases,
                &LOCK_FUNCTIONS[..],
                "libc:",
                "{lock=arg0, site=u64(rsp)}".to_string(),
            ),
            Target::Kernel(k) => {
                let words: Vec<String> =
                    (0..KERNEL_STACK_WORDS).map(|i| format!("s{i}=u64(rsp+{})", i * 8)).collect();
                let caps = format!("{{lock=arg0, {}}}", words.join(", "));
                (&k.kernel.images, &[][..], &KERNEL_LOCK_FUNCTIONS[..], "", caps)
            }
        };
    let (mut lines, mut exits) = (Vec::new(), HashSet::new());
    for f in functions {
        let Ok(spec) = kerf_session::spec::parse(&format!("{prefix}{f}")) else { continue };
        // Only those the target has (a static program may lack rwlocks; a kernel its
        // paravirtual spinlocks).
        let Ok(points) = crate::live::resolve(images, aliases, &[spec]) else { continue };
        let Some(entry) = points.first() else { continue };
        lines.push(format!("{prefix}{f} {captures}"));
        let closure = crate::time::tail_closure(images, vec![(entry.module, entry.func)]);
        for (m, g) in closure {
            for line in returns_of(images, m, g) {
                if exits.insert(line.clone()) {
                    lines.push(line);
                }
            }
        }
    }
    lines
}

/// A point line (`MODULE:0xADDR`) for each `ret` of function `g` of module `m`.
fn returns_of(images: &[AnalyzedImage], m: usize, g: kerf_analysis::cfg::FuncId) -> Vec<String> {
    let img = &images[m];
    let cfg = &img.analysis.cfg;
    let module = kerf_session::spec::module_name(&img.analysis.image);
    let Ok(spec) = kerf_session::spec::parse(&format!("{module}:{}@exits", cfg.function(g).name))
    else {
        return Vec::new();
    };
    let Ok(points) = crate::live::resolve(&images[m..=m], &[], &[spec]) else { return Vec::new() };
    points
        .into_iter()
        .filter(|p| p.func == g)
        .filter(|p| {
            cfg.block_containing(g, p.addr).map(|b| cfg.block(b).term) == Some(Terminator::Return)
        })
        .map(|p| format!("{module}:{:#x}", p.addr.0))
        .collect()
}

/// Watch the lock functions of `target` (a process's pthread locks, or the kernel's slow
/// paths) with `opts`' sampling, and return what was seen.
pub fn watch(
    target: &mut Target,
    opts: &LiveOptions,
    events: &mut dyn Events,
) -> Result<LockStats, ToolError> {
    let kernel = matches!(target, Target::Kernel(_));
    let late = match &*target {
        Target::Process(p) => {
            Some(Rc::new(RefCell::new(LateNames::new(p.pid, Namer::new(target)))))
        }
        Target::Kernel(_) => None,
    };
    let lines = lock_lines(target);
    if lines.is_empty() {
        return Err(ToolError::Usage(if kernel {
            format!("the kernel has none of {}", KERNEL_LOCK_FUNCTIONS.join(", "))
        } else {
            "the process has no pthread lock functions in libc".into()
        }));
    }
    let site: SiteOf = if kernel {
        let namer = Namer::new(target);
        Box::new(move |words| kernel_site(words, &|a| namer.function(a).map(str::to_string)))
    } else {
        Box::new(|words| words.first().copied().unwrap_or(0))
    };
    let stats = Rc::new(RefCell::new(LockStats::default()));
    let sink = LockSink { stats: stats.clone(), site, late: late.clone() };
    let tool = Trace::new(&lines, kernel, None, Vec::new(), None, Output::Sink(Box::new(sink)))?;
    let started = std::time::Instant::now();
    let report = run(&tool, target, opts, events)?;
    let watched = started.elapsed().as_secs_f64();
    if let Some(e) = report.error {
        return Err(e);
    }
    drop(tool);
    // Taken out whoever else still holds the sink: never an empty report in its place.
    let mut s = std::mem::take(&mut *stats.borrow_mut());
    s.late_names = late.map(|l| std::mem::take(&mut l.borrow_mut().names)).unwrap_or_default();
    s.watched = Some(watched);
    s.target = report.json["target"].clone();
    Ok(s)
}

/// The kernel call site among the stack words an entry captured: the first that lies in a
/// function other than the lock functions' wrappers; else the first word.
pub fn kernel_site(words: &[u64], function_of: &dyn Fn(u64) -> Option<String>) -> u64 {
    words
        .iter()
        .copied()
        .find(|&w| {
            function_of(w).is_some_and(|f| !KERNEL_WRAPPERS.iter().any(|p| f.starts_with(p)))
        })
        .or_else(|| words.first().copied())
        .unwrap_or(0)
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
           "unfinished": s.unfinished, "target": s.target})
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

/// Names of addresses in a target's modules: the ELF symbol (code or data) that holds an
/// address, with the offset into it, as `module:symbol+0x10`; in code without a sized symbol
/// (a stripped library's local functions, the kernel's kallsyms), the function kerf's
/// analysis found there.
pub struct Namer {
    modules: Vec<Named>,
}

/// A module's name, its load bias, its sized symbols and its functions (start, one past the
/// end, name), each by address.
struct Named {
    name: String,
    bias: u64,
    symbols: Vec<(u64, u64, String)>,
    functions: Vec<(u64, u64, String)>,
}

impl Namer {
    /// The symbols of `target`'s modules (a process's, at their load bias; the kernel's and
    /// its modules', at their addresses).
    pub fn new(target: &Target) -> Namer {
        match target {
            Target::Process(p) => Namer::of(&p.modules, false),
            Target::Kernel(k) => Namer::of(&k.kernel.images, true),
        }
    }

    /// The symbols of `images`, a process's modules (or, `kernel`, the kernel's).
    pub fn of(images: &[AnalyzedImage], kernel: bool) -> Namer {
        let mut modules = Vec::new();
        for m in images {
            let bias = match (m.bias, kernel) {
                (Some(b), _) => b,
                (None, true) => 0,
                (None, false) => continue,
            };
            let name = kerf_session::spec::module_name(&m.analysis.image).to_string();
            let mut functions: Vec<(u64, u64, String)> = m
                .analysis
                .cfg
                .functions
                .iter()
                .filter(|f| f.extent.end > f.extent.start)
                .map(|f| (f.entry.0, f.extent.end, f.name.clone()))
                .collect();
            functions.sort();
            // The kernel's symbols are kallsyms, which kerf's analysis already made functions.
            let mut symbols = if kernel { Vec::new() } else { sized_symbols(&name, &m.bytes) };
            let sized: HashSet<u64> = symbols.iter().map(|s| s.0).collect();
            symbols.extend(functions.iter().filter(|f| !sized.contains(&f.0)).cloned());
            symbols.sort();
            modules.push(Named { name, bias, symbols, functions });
        }
        Namer { modules }
    }

    /// The name of `addr`, if a symbol holds it.
    pub fn name(&self, addr: u64) -> Option<String> {
        for m in &self.modules {
            let Some(a) = addr.checked_sub(m.bias) else { continue };
            let Some((start, name)) = holder(&m.symbols, a) else { continue };
            let off = a - start;
            return Some(if off == 0 {
                format!("{}:{name}", m.name)
            } else {
                format!("{}:{name}+{off:#x}", m.name)
            });
        }
        None
    }

    /// The name of the function whose code holds `addr` (code only: never a data symbol).
    pub fn function(&self, addr: u64) -> Option<&str> {
        self.modules.iter().find_map(|m| {
            let a = addr.checked_sub(m.bias)?;
            holder(&m.functions, a).map(|(_, n)| n)
        })
    }
}

/// Named spans of addresses: (start, end, name), sorted by start.
type Spans = Vec<(u64, u64, String)>;

/// Names for addresses in modules a process mapped after kerf analysed it, looked up in
/// /proc/PID/maps while the process still runs (at the end it may be gone): the file that
/// maps the address, at its first mapping's start, and the file's own symbols.
struct LateNames {
    pid: i32,
    known: Namer,
    /// The process's maps as last read: read again only for an address none holds (a
    /// program with a mutex in each of 100,000 heap objects reads them once).
    maps: Vec<kerf_analysis::image::maps::Mapping>,
    /// Per file: where it is mapped, and its sized symbols.
    files: HashMap<String, (u64, Spans)>,
    /// Addresses looked up, and the names found.
    seen: HashSet<u64>,
    names: HashMap<u64, String>,
}

impl LateNames {
    fn new(pid: i32, known: Namer) -> LateNames {
        let (maps, files) = (Vec::new(), HashMap::new());
        LateNames { pid, known, maps, files, seen: HashSet::new(), names: HashMap::new() }
    }

    /// Name `addr` if no module kerf analysed holds it (once per address).
    fn note(&mut self, addr: u64) {
        if addr == 0 || !self.seen.insert(addr) || self.known.name(addr).is_some() {
            return;
        }
        let held = |maps: &[kerf_analysis::image::maps::Mapping]| {
            maps.iter().any(|m| (m.start.0..m.end.0).contains(&addr))
        };
        if !held(&self.maps) {
            let text = std::fs::read_to_string(format!("/proc/{}/maps", self.pid));
            let maps = text.ok().and_then(|t| kerf_analysis::image::maps::parse_maps(&t).ok());
            self.maps = maps.unwrap_or_default();
        }
        let maps = &self.maps;
        let Some(path) = maps
            .iter()
            .find(|m| (m.start.0..m.end.0).contains(&addr))
            .and_then(|m| m.path.clone())
            .filter(|p| p.starts_with('/'))
        else {
            return;
        };
        if !self.files.contains_key(&path) {
            // The ELF headers' first segment is at offset 0: its mapping's start is the base.
            let Some(base) =
                maps.iter().filter(|m| m.path.as_deref() == Some(&path)).map(|m| m.start.0).min()
            else {
                return;
            };
            let file = std::fs::read(format!("/proc/{}/root{path}", self.pid));
            let symbols = file.map(|bytes| sized_symbols(&path, &bytes)).unwrap_or_default();
            self.files.insert(path.clone(), (base, symbols));
        }
        let (base, symbols) = &self.files[&path];
        let module = kerf_session::spec::module_name(&path);
        let a = addr - base;
        let name = match holder(symbols, a) {
            Some((start, name)) if a == start => format!("{module}:{name}"),
            Some((start, name)) => format!("{module}:{name}+{:#x}", a - start),
            None => format!("{module}+{a:#x}"),
        };
        self.names.insert(addr, name);
    }
}

/// The ELF symbols of file `bytes` that have a size, as sorted spans (none if it does not
/// parse).
fn sized_symbols(name: &str, bytes: &[u8]) -> Spans {
    let Ok(img) = kerf_analysis::image::Image::from_elf(name, bytes) else { return Vec::new() };
    let mut v: Spans = (img.symbols.iter())
        .filter(|s| s.size > 0)
        .map(|s| (s.addr.0, s.addr.0 + s.size, s.name.clone()))
        .collect();
    v.sort();
    v
}

/// The span of `spans` (start, end, name; sorted by start) that holds `a`: its start and name.
fn holder(spans: &[(u64, u64, String)], a: u64) -> Option<(u64, &str)> {
    let i = spans.partition_point(|s| s.0 <= a);
    let (start, end, name) = &spans[i.checked_sub(1)?];
    (a < *end).then_some((*start, name.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_module_kerf_never_analysed_is_named_from_the_maps_and_its_own_symbols() {
        // This test's own process, with no module known: libc's `getpid` by its dynamic
        // symbol, and an anonymous page by nothing.
        let mut late = LateNames::new(std::process::id() as i32, Namer::of(&[], false));
        let getpid = libc::getpid as *const () as u64;
        late.note(getpid);
        late.note(getpid + 1);
        assert_eq!(late.names[&getpid], "libc.so.6:getpid");
        assert_eq!(late.names[&(getpid + 1)], "libc.so.6:getpid+0x1");
        let heap = Box::new(0u64);
        let at = &*heap as *const u64 as u64;
        late.note(at);
        assert!(!late.names.contains_key(&at), "{:?}", late.names.get(&at));
    }

    fn entry(s: &mut LockStats, tid: u32, t: u64, lock: u64, site: u64) {
        s.event(PointKind::Entry, "pthread_mutex_lock", thread_key(tid, 0), t, Some((lock, site)));
    }

    fn exit(s: &mut LockStats, tid: u32, t: u64) {
        s.event(PointKind::Exit, "pthread_mutex_lock", thread_key(tid, 0), t, None);
    }

    #[test]
    fn entries_and_exits_pair_per_thread() {
        let mut s = LockStats::default();
        // Thread 1 waits 5 us on lock A from site X; thread 2 meanwhile 100 ns on A from Y.
        entry(&mut s, 1, 1_000, 0xa, 0x10);
        entry(&mut s, 2, 1_500, 0xa, 0x20);
        exit(&mut s, 2, 1_600);
        exit(&mut s, 1, 6_000);
        // An exit with no entry (the thread was inside when the probes went in): nothing.
        exit(&mut s, 3, 7_000);
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

    #[test]
    fn nested_waits_close_innermost_first() {
        // A kernel task waits 10 us in a mutex's slow path (lock M); inside it, 2 us in the
        // slow path of the mutex's own spinlock (lock S): both are counted, each its own time.
        let mut s = LockStats::default();
        entry(&mut s, 7, 0, 0x40, 0x1);
        entry(&mut s, 7, 3_000, 0x50, 0x2);
        exit(&mut s, 7, 5_000);
        exit(&mut s, 7, 10_000);
        assert_eq!(s.locks[&0x40].total_ns, 10_000);
        assert_eq!(s.locks[&0x50].total_ns, 2_000);
        // Idle tasks share id 0: one per CPU, never paired across CPUs.
        s.event(PointKind::Entry, "f", thread_key(0, 0), 20_000, Some((0x50, 0x3)));
        s.event(PointKind::Entry, "f", thread_key(0, 1), 20_500, Some((0x50, 0x3)));
        s.event(PointKind::Exit, "f", thread_key(0, 0), 21_000, None);
        s.event(PointKind::Exit, "f", thread_key(0, 1), 23_500, None);
        assert_eq!(s.sites[&0x3].total_ns, 1_000 + 3_000);
        // Exits that went missing do not grow a thread's stack without bound.
        for i in 0..(MAX_NESTED as u64 + 3) {
            entry(&mut s, 9, 30_000 + i, 0x60, 0x4);
        }
        assert_eq!(s.dropped, 3);
        assert_eq!(s.open[&thread_key(9, 0)].len(), MAX_NESTED);
    }

    #[test]
    fn kernel_site_skips_the_lock_wrappers() {
        let f = |a: u64| match a {
            0x100 => Some("mutex_lock".to_string()),
            0x200 => Some("down_write".to_string()),
            0x300 => Some("pipe_write".to_string()),
            _ => None,
        };
        // A saved register (no function), the wrappers, then the caller.
        assert_eq!(kernel_site(&[0xdead, 0x100, 0x200, 0x300, 0x100], &f), 0x300);
        // None outside the wrappers: the first word, so that the site is still shown.
        assert_eq!(kernel_site(&[0x100, 0x200], &f), 0x100);
        assert_eq!(kernel_site(&[], &f), 0);
    }
}
