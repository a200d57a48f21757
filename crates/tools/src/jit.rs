//! `kerf jit`: JIT instrumentation of a live process (JIFL): every thread that enters a root
//! function runs from kerf's code cache, with the chosen plugins woven into each block, until
//! it leaves the region. The plugins are written against the codegen IR: `blocks` counts every
//! block's executions, `branches` both sides of every conditional branch (an add on the
//! block's or side's word), `calls` every call and return as trace records and `locks` the
//! waits in pthread lock calls ([`crate::jit_calls`]); `none` runs the cache alone. User
//! callbacks in C (`--callback`, [`crate::jit_callback`]) run at every block and exit.
//!
//! The run: open the target (a command is held at its entry point), resolve the roots, install
//! the JIT ([`kerf_session::jit`]), let the target go, wait until it ends, the duration is up
//! or a signal, read the counters, take the JIT out, and return the summary as JSON.

use crate::error::ToolError;
use crate::jit_callback::{self, Callback};
use crate::jit_calls::{self, CallTrace};
use crate::live::Events;
use kerf_codegen::ir::MAX_THREAD_RINGS_LEN;
use kerf_codegen::ir::{Addr, Cond, Op, Program, Src, Width};
use kerf_codegen::ring;
use kerf_jit::{BlockInfo, EdgeInfo, ExitInfo, Plugin};
use kerf_session::checked::analyze_rejected;
use kerf_session::jit::{self, JitOptions, Root};
use kerf_session::live::{ProcessTarget, Sampling, Stop};
use kerf_session::spec::{self, SpecWhat};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// The plugins `kerf jit` knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PluginKind {
    /// The code cache with nothing woven in.
    None,
    /// Basic-block execution counts.
    Blocks,
    /// Taken and not-taken counts of every conditional branch (JIFL's branch-hint check).
    Branches,
    /// Every call and return, as trace records.
    Calls,
    /// Time threads spend in pthread lock calls, per lock and call site.
    Locks,
}

impl PluginKind {
    pub const NAMES: [&'static str; 5] = ["none", "blocks", "branches", "calls", "locks"];

    pub fn parse(name: &str) -> Result<PluginKind, ToolError> {
        match name {
            "none" => Ok(PluginKind::None),
            "blocks" => Ok(PluginKind::Blocks),
            "branches" => Ok(PluginKind::Branches),
            "calls" => Ok(PluginKind::Calls),
            "locks" => Ok(PluginKind::Locks),
            _ => Err(ToolError::Usage(format!(
                "no JIT plugin named '{name}' (plugins: {})",
                PluginKind::NAMES.join(", ")
            ))),
        }
    }
}

/// An exact counter (JIFL's block count, inlined): the thread that owns the module's words
/// (the process's main thread) adds 1 to `word` without a lock; any other thread adds to
/// `shared` with one. The count is the sum of the two, exact whatever the threads, and a
/// single-threaded program never pays for a lock. The owner is told by its thread id where
/// the code can read one (`owner_tid`: glibc's, one register, and a forked child's main
/// thread has an id of its own), else by its thread pointer, kept at `owner`.
///
/// Where threads have counter slabs (`per_thread`: the running thread's copy of `word`, see
/// `kerf_jit::x86_64::Slabs`) it is one `inc` of that copy: no check, no lock, and no thread
/// shares a line with another's; kerf adds the copies up.
fn counter(
    p: &mut Program,
    word: u64,
    shared: u64,
    owner: u64,
    owner_tid: Option<u32>,
    per_thread: Option<i32>,
) {
    if let Some(d) = per_thread {
        p.push(Op::AddMem { addr: Addr::PerThread(d), src: Src::Imm(1), atomic: false });
        return;
    }
    // tid %t; br.ne %t, PID, shared (or: thread %t; load64 %o, [OWNER]; br.ne %t, %o, shared);
    // add [WORD], 1; done: cold; shared: atomic add [SHARED], 1; jmp done
    // (the other threads' path out of line: the owner's runs straight through). Its cold
    // part ends the program: other plugins' ops go before it.
    let t = p.vreg("t");
    let (other, done) = (p.label("shared"), p.label("done"));
    match owner_tid {
        Some(id) => {
            p.push(Op::Tid { dst: t });
            let b = Src::Imm(u64::from(id));
            p.push(Op::Branch { cond: Cond::Ne, a: t, b, target: other });
        }
        None => {
            let owner_t = p.vreg("owner");
            p.push(Op::Thread { dst: t });
            p.push(Op::Load { dst: owner_t, width: Width::W64, addr: Addr::Abs(owner) });
            p.push(Op::Branch { cond: Cond::Ne, a: t, b: Src::Reg(owner_t), target: other });
        }
    }
    p.push(Op::AddMem { addr: Addr::Abs(word), src: Src::Imm(1), atomic: false });
    p.push(Op::Label(done));
    p.push(Op::Cold);
    p.push(Op::Label(other));
    p.push(Op::AddMem { addr: Addr::Abs(shared), src: Src::Imm(1), atomic: true });
    p.push(Op::Jump { target: done });
}

/// How the plugin's counters counted: in per-thread slabs (how many threads claimed one, how
/// many shared the last, the region's bytes of address space), or not, and why.
fn counters_json(jit: &jit::Jit) -> Value {
    match (jit.slab_use(), jit.stats.no_slabs) {
        (Some(u), _) => json!({
            "per_thread": true,
            "threads": u.threads,
            "shared_slab": u.shared,
            "reclaimed": u.reclaimed,
            "region_bytes": u.bytes,
            "program_gs": u.program_gs,
        }),
        (None, why) => json!({
            "per_thread": false,
            "why_not": why.unwrap_or("no plugin counts blocks or branches or writes records"),
        }),
    }
}

/// Where the block counters went: in every block, or off a spanning tree of each function's
/// flow, with how many functions and blocks had their counts worked out from how many
/// counters, and the functions whose counts could not be.
fn placement_json(counting: bool, d: Option<&jit::DerivedCounts>) -> Value {
    match d {
        None => json!({ "counters": if counting { "every block" } else { "none" } }),
        Some(d) => json!({
            "counters": "tree",
            "functions": d.functions,
            "blocks": d.blocks,
            "counted_blocks": d.counted_blocks,
            "counted_sides": d.counted_sides,
            "counter_runs": d.counter_runs,
            "block_runs": d.block_runs,
            "failed": d.failed.iter().map(|(f, why)| json!({ "function": f, "why": why })).collect::<Vec<_>>(),
            "checked": d.checked,
            "mismatched": d.mismatched.iter().map(|(f, at, counted, derived)| json!({ "function": f, "at": format!("{at:#x}"), "counted": counted, "derived": derived })).collect::<Vec<_>>(),
            "strays": d.strays,
            "strays_unknown": d.strays_unknown,
        }),
    }
}

/// What the user must know of counts worked out from fewer counters: the functions whose
/// counts could not be, and that a count worked out where a thread's flow stopped or went
/// on unseen may be off by one: a frame a `siglongjmp` left where kerf could not tell the
/// place (`strays_unknown`), or (`held`) a signal frame that kept a cache address when kerf
/// took the cache out, so that its thread goes on in it once its handler returns.
fn placement_report(p: &Value, held: bool, events: &mut dyn Events) {
    if p["counters"] != "tree" {
        return;
    }
    if let Some(failed) = p["failed"].as_array().filter(|f| !f.is_empty()) {
        let first = &failed[0];
        events.warn(&format!(
            "the block counts of {} could not be worked out from their counters \
             (the first, {}: {}); their blocks with no counter of their own show none \
             (--counters every counts every block)",
            match failed.len() {
                1 => "1 function".to_string(),
                n => format!("{n} functions"),
            },
            first["function"].as_str().unwrap_or("?"),
            first["why"].as_str().unwrap_or("?"),
        ));
    }
    if held {
        events.warn(
            "with --counters tree, a thread that goes on in the kept cache once its signal \
             handler returns can put a worked-out count off by one where it goes on \
             (--counters every has no such limit)",
        );
    }
    if let Some(n) = p["strays_unknown"].as_u64().filter(|&n| n > 0) {
        events.warn(&format!(
            "with --counters tree, {n} frames a signal handler left by siglongjmp stopped where \
             kerf could not tell: a worked-out count in each such function may be off by one \
             (--counters every has no such limit)"
        ));
    }
}

/// The chosen plugins woven together: the call trace's record at each function's entry and
/// exits, the block counter at every block's entry, the branch profile's counter on each side
/// of every conditional branch.
struct Woven {
    blocks: bool,
    /// Block counters only where the placement off each function's flow wants them, and on
    /// the branch sides it chooses ([`JitOptions::fewer_counters`]); the other blocks' counts
    /// are worked out at the end.
    tree: bool,
    branches: bool,
    calls: Option<CallTrace>,
    callback: Option<Callback>,
}

impl Plugin for Woven {
    fn block(&self, b: &BlockInfo<'_>) -> Option<Program> {
        let mut p = Program::new();
        if let Some(c) = &self.calls {
            c.entry(&mut p, b);
        }
        if let Some(cb) = &self.callback {
            cb.call(&mut p, false, b.routines, b.state, b.start);
        }
        if self.blocks && b.counted {
            counter(&mut p, b.word, b.shared, b.owner, b.owner_tid, b.per_thread);
        }
        (!p.ops.is_empty()).then_some(p)
    }

    fn counts_blocks(&self) -> bool {
        self.blocks
    }

    fn edges(&self) -> bool {
        self.branches || self.tree
    }

    fn every_edge(&self) -> bool {
        self.branches
    }

    fn edge(&self, e: &EdgeInfo<'_>) -> Option<Program> {
        let mut p = Program::new();
        (self.branches || (self.tree && e.counted))
            .then(|| counter(&mut p, e.word, e.shared, e.owner, e.owner_tid, e.per_thread))?;
        Some(p)
    }

    fn exits(&self) -> bool {
        self.calls.is_some() || self.callback.as_ref().is_some_and(Callback::has_exit)
    }

    fn exit(&self, x: &ExitInfo<'_>) -> Option<Program> {
        let mut p = self.calls.as_ref().and_then(|c| c.exit(x)).unwrap_or_default();
        if let Some(cb) = &self.callback {
            cb.call(&mut p, true, x.routines, x.state, x.at);
        }
        (!p.ops.is_empty()).then_some(p)
    }

    fn routines(&self) -> &[u8] {
        self.callback.as_ref().map_or(&[], |c| &c.code)
    }

    fn state_len(&self) -> u64 {
        if self.callback.is_some() {
            8 * jit_callback::STATE_WORDS
        } else {
            0
        }
    }

    fn room(&self) -> u64 {
        // The counter, and a callback's clean call (its saves and arguments).
        96 + if self.callback.is_some() { CALLBACK_ROOM } else { 0 }
    }

    fn call_room(&self) -> u64 {
        // A record's code: the thread table lookup (its first-lookup path included), the
        // reservation, the time, the saves around it (about 760 bytes measured with the
        // first, three-word records).
        let record = if self.calls.is_some() { CALL_RECORD_ROOM } else { 0 };
        let exit = self.callback.as_ref().is_some_and(Callback::has_exit);
        record + if exit { CALLBACK_ROOM } else { 0 }
    }
}

/// Bytes of code one call-trace record takes at most.
const CALL_RECORD_ROOM: u64 = 1024;
/// Bytes of code a callback's clean call takes at most: nine registers and the flags saved
/// and restored, the stack aligned, two 64-bit arguments, the call.
const CALLBACK_ROOM: u64 = 160;

/// What `kerf jit` was asked to do.
#[derive(Clone, Debug)]
pub struct JitTool {
    pub roots: Vec<String>,
    pub plugins: Vec<PluginKind>,
    pub options: JitOptions,
    /// With the call trace: the raw trace file, and slots per thread's ring.
    pub trace: Option<String>,
    pub ring_slots: Option<u32>,
    /// A C file of callbacks (`--callback`).
    pub callback: Option<std::path::PathBuf>,
    /// How many blocks the summary lists, the most executed first (ties in address order,
    /// as a stable sort by count leaves them); `None`: every block that ran, in address
    /// order. A row is a JSON object of four strings and a count: made for each of
    /// python3.11's 36 k blocks that ran where the table shows 20, they took 17 ms after the
    /// program ended.
    pub rows: Option<usize>,
}

/// What a run used to the end, handed back by [`run`] beside the summary: the JIT (its
/// translations, index and kerf's mappings of the target's memory; the target's code cache
/// is gone) and the target (its modules' analyses). Dropping it frees them (freeing
/// python3.11's took 10-12 ms after its program had ended); a caller that exits next may
/// leave that to the exit (`std::mem::forget`), as the command line does.
pub struct Leftovers {
    _held: Box<dyn std::any::Any + Send>,
}

/// Run `tool` on process `pid` or a launched `command`; `events` hears what it says.
/// Returns the summary and what the run used ([`Leftovers`]).
pub fn run(
    tool: &JitTool,
    pid: Option<i32>,
    command: &[String],
    sampling: Sampling,
    events: &mut dyn Events,
) -> Result<(Value, Leftovers), ToolError> {
    let began = Instant::now();
    if tool.roots.is_empty() {
        return Err(ToolError::Usage("kerf jit needs at least one ROOT function".into()));
    }
    let calls = tool.plugins.contains(&PluginKind::Calls);
    let locks = tool.plugins.contains(&PluginKind::Locks);
    if calls && locks {
        return Err(ToolError::Usage("--plugin calls and locks: one of them at a time".into()));
    }
    if tool.trace.is_some() && !calls {
        return Err(ToolError::Usage("--trace FILE needs --plugin calls".into()));
    }
    if let Some(n) = tool.ring_slots {
        if !calls && !locks {
            return Err(ToolError::Usage("--ring-slots needs --plugin calls or locks".into()));
        }
        let timed = tool.trace.is_some();
        let fits = |n: u32| {
            ring::thread_rings_len(CallTrace::shape(n, locks, timed)) <= MAX_THREAD_RINGS_LEN
        };
        if !n.is_power_of_two() || n < 16 || !fits(n) {
            let most = (4..31).map(|k| 1u32 << k).take_while(|&m| fits(m)).last().unwrap_or(16);
            let why = format!(
                "--ring-slots {n}: a power of two from 16 to {most} (a ring for every thread table \
                 slot in each module: {} GiB at most)",
                MAX_THREAD_RINGS_LEN >> 30
            );
            return Err(ToolError::Usage(why));
        }
    }
    if tool.options.cache_limit.is_some() && (tool.options.whole_modules || !tool.options.on_demand)
    {
        let why = "--cache-limit needs translation on demand (not --whole or --no-demand)";
        return Err(ToolError::Usage(why.into()));
    }
    // Compiled before anything is done to the target (a file that does not build is refused).
    let callback = tool.callback.as_deref().map(Callback::build).transpose()?;
    let pid_given = pid.is_some();
    let mut target = ProcessTarget::open(pid, command)?;
    let pid = target.pid;
    for w in &target.warnings {
        events.warn(w);
    }
    let counting = tool.plugins.contains(&PluginKind::Blocks);
    let branches = tool.plugins.contains(&PluginKind::Branches);
    let slots = tool.ring_slots.unwrap_or(jit_calls::DEFAULT_SLOTS);
    let tracing = calls || locks;
    // The trace file is made before anything is done to the target.
    let file = match &tool.trace {
        Some(p) => Some((
            p.as_str(),
            std::fs::File::create(p).map_err(|e| ToolError::TraceOutput(format!("{p}: {e}")))?,
        )),
        None => None,
    };
    let t = Instant::now();
    let loaded = began.elapsed();
    let clock_start = kerf_os::clock::tsc_and_monotonic();
    let mut callback = callback;
    // A module whose cached analysis fails its check is analysed again and everything made
    // from the modules made again (roots, the call trace's function ids); a fresh analysis
    // is never rejected, so this ends.
    let (roots, waiting, woven, mut jit) = loop {
        let (roots, waiting) = resolve_roots(&target, &tool.roots)?;
        // (Times only where something reads them: see `CallTrace::timed`.)
        let timed = tool.trace.is_some();
        let calls = tracing.then(|| CallTrace::new(&target.modules, slots, locks, timed));
        let mut options = tool.options;
        options.late_roots = !waiting.is_empty();
        options.rings = calls.as_ref().map(|c| c.shape);
        // A running process runs natively until the cache is live: a big module's
        // whole-image work comes after (a launched command is held until then anyway).
        options.early = pid_given;
        // Fewer counters only where blocks are counted: under `none` or the call trace the
        // facts, the weights' read and the counting entries were work for nothing at the start
        // and at every entry made on demand.
        let tree = counting && options.fewer_counters;
        options.fewer_counters = tree;
        let woven = Woven { blocks: counting, tree, branches, calls, callback };
        let (module, path, detail) =
            match jit::install(pid, &target.modules, &roots, &woven, options) {
                Ok(jit) => break (roots, waiting, woven, jit),
                Err(jit::JitFail::Analysis { module, path, detail }) => (module, path, detail),
                // (As a signal before any probe went in: nothing to take out.)
                Err(jit::JitFail::Interrupted) => {
                    return Err(kerf_session::live::LiveError::Interrupted.into())
                }
                Err(source) => return Err(ToolError::Jit { pid, source }),
            };
        callback = woven.callback;
        let quiet = &kerf_analysis::Quiet;
        let again = match target.modules.get(module) {
            Some(_) => analyze_rejected(&mut target.modules, module, &detail, quiet),
            None => None,
        };
        // (`None`: not a cached analysis, which no check rejects: the error stands.)
        let Some(said) = again else {
            let source = jit::JitFail::Analysis { module, path, detail };
            return Err(ToolError::Jit { pid, source });
        };
        for w in said.map_err(ToolError::Load)? {
            events.warn(&w);
        }
    };
    let plugin: &dyn Plugin = &woven;
    jit.stats.loaded = loaded;
    jit.stats.live = began.elapsed();
    let translated = t.elapsed();
    let waiting_texts: Vec<String> = waiting.iter().map(|w| w.text.clone()).collect();
    // Roots in libraries not loaded yet: waited for at the loader (before the program runs,
    // when kerf launched it).
    if !waiting.is_empty() {
        let names: Vec<&str> = waiting_texts.iter().map(String::as_str).collect();
        if let Err(source) = jit.wait_for_roots(&target.modules, waiting) {
            let _ = jit.remove();
            return Err(ToolError::Jit { pid, source });
        }
        // (A warning: a misspelt library name waits in vain, and says so only at the end.)
        events.warn(&format!(
            "{} in a library not loaded: kerf splices {} when the program loads one of that \
             name (a name misspelt waits in vain)",
            names.join(", "),
            if names.len() == 1 { "it" } else { "them" }
        ));
    }
    // The call trace's reader is ready before the target goes on.
    let mut reader = match &woven.calls {
        Some(c) => {
            let areas = jit.ring_areas();
            let waits = jit.stats.no_waits.is_none().then(|| jit.seccomp_watch());
            if let Some(why) = &jit.stats.no_waits {
                events.warn(&format!(
                    "a thread whose call-trace ring is full drops its records instead of \
                     waiting for kerf: {why}"
                ));
            }
            Some(jit_calls::Reader::new(c, areas, &target.modules, pid, clock_start, file, waits))
        }
        None => None,
    };
    // Attached: threads already inside a root call are taken in, now that their records have
    // a reader (a full ring's writer waits for it until the drains begin: `hold`). Under a
    // plugin that pairs events, their frames' calls were made before: the returns of those
    // frames are counted apart (`before_attach`), and so are lock waits under way
    // (`under_way_at_attach`).
    // (Until session 68 they were left out there: `-p PID main --plugin calls` on a server,
    // whose threads never enter `main` again, recorded nothing.)
    if pid_given {
        if let Some(r) = &reader {
            r.hold();
        }
        if let Err(source) = jit.take_in_threads(&target.modules, plugin) {
            let _ = jit.remove();
            return Err(ToolError::Jit { pid, source });
        }
        if let (Some(r), true) = (reader.as_mut(), jit.stats.taken_in > 0) {
            r.taken_in();
        }
    }
    // (Said once threads were taken in: a test that acts on the program at this line finds
    // them in the cache.)
    let s = &jit.stats;
    events.say(&format!(
        "jit: {} functions ({} blocks, {} KiB of code) in {} modules translated in {:.2} s; \
         {} spliced, live {:.2} s after kerf started (analyses loaded in {:.2} s; \
         plan {:.2} s, mapping {:.2} s, translation {:.2} s, writing {:.2} s)",
        s.region.len(),
        s.blocks,
        s.code_bytes / 1024,
        // (A module's translation may be in pieces: modules, not translations.)
        jit.caches.iter().map(|c| c.module).collect::<std::collections::BTreeSet<_>>().len(),
        translated.as_secs_f64(),
        roots_said(&roots),
        s.live.as_secs_f64(),
        s.loaded.as_secs_f64(),
        s.plan.as_secs_f64(),
        s.map.as_secs_f64(),
        s.translate.as_secs_f64(),
        s.write.as_secs_f64(),
    ));
    if s.lost > 0 {
        events.warn(&format!(
            "{} of {} lookup-table entries found their set and the overflow list full: \
             indirect transfers to them leave the cache{}{}",
            s.lost,
            s.table_entries + s.crowded,
            lost_returns(s.lost_returns),
            bigger_table(jit.table_sets())
        ));
    }
    let lost_before = s.lost;
    if s.taken_in + s.not_taken_in > 0 {
        events.say(&format!(
            "jit: {} thread{} already inside a root call taken into the cache{}",
            s.taken_in,
            if s.taken_in == 1 { "" } else { "s" },
            match s.not_taken_in {
                0 => String::new(),
                n => format!(
                    "; {n} not (standing in code kerf cannot translate, in a signal \
                     handler or with a signal pending, or with a gs base of the program's \
                     own): they finish their root call natively"
                ),
            }
        ));
    }
    target.release()?;
    // (A duration counts the time the JIT is live, from `sample` below, not kerf's
    // translation before it.)
    let heaps: Vec<_> = jit.caches.iter().map(|c| c.code).collect();
    // Go's runtime preempts a goroutine with a signal (SIGURG) whose handler looks the
    // interrupted PC up in Go's own tables, and finds no safe point at a cache address: a
    // goroutine looping in the cache without a call is never preempted, and one that spins
    // waiting for another goroutine (GOMAXPROCS=1, or a stop-the-world collection) waits
    // forever (a user trial's program hung under every plugin). kerf hooks the handlers so
    // that they see original addresses (`kerf_jit::x86_64::signal`), which needs the miss
    // mailbox: without it (or with the hooks turned off), said before the program runs.
    let hooks_off =
        !tool.options.on_demand || std::env::var_os("KERF_JIT_NO_SIGNAL_HOOKS").is_some();
    let go: Vec<&str> = (target.modules.iter())
        .filter(|m| kerf_analysis::image::is_go_image(&m.bytes))
        .filter_map(|m| m.path.file_name()?.to_str())
        .collect();
    if !go.is_empty() && hooks_off {
        events.warn(&format!(
            "{} is Go code, and kerf does not hook signal handlers here ({}): the Go runtime cannot preempt a goroutine while it runs from the code \
             cache (its signal handler finds no Go function at the cache's addresses), so a \
             goroutine that spins in a loop without calls, waiting for another one (with \
             GOMAXPROCS=1, or while a garbage collection stops the world), can hang the \
             program; Ctrl-C to kerf takes the JIT out and lets it go on",
            go.join(", "),
            if tool.options.on_demand {
                "KERF_JIT_NO_SIGNAL_HOOKS is set"
            } else {
                "the hooks ask kerf, and with --no-demand kerf answers nothing"
            }
        ));
    }
    // kerf answers the misses on a thread of its own while the target runs (on demand).
    let modules = std::mem::take(&mut target.modules);
    let done = AtomicBool::new(false);
    // The call trace names a late module's functions and reads its rings.
    let late = woven.calls.as_ref().map(|c| c as &dyn kerf_session::jit::LateRings);
    let waker = jit.serve_waker();
    // A server that could not drop a module the program unmapped stops answering: the JIT
    // must then go at once (`JitStats::unmap_refused`).
    let gave_up = AtomicBool::new(false);
    let (mut stop, mut reader) = std::thread::scope(|s| {
        let server = s.spawn(|| {
            jit.serve(&modules, plugin, late, &done);
            gave_up.store(jit.stats.unmap_refused.is_some(), Ordering::Relaxed);
        });
        let drainer = s.spawn(|| {
            let mut r = reader?;
            jit_calls::drain_until(&mut r, &done);
            Some(r)
        });
        let stop = target.sample_until(sampling, &heaps, || gave_up.load(Ordering::Relaxed), || {});
        done.store(true, Ordering::Relaxed);
        // A wake that lands between the server's look at `done` and its futex wait finds no
        // waiter and is lost (the server would sleep its 20 ms): wake until it has gone.
        if let Some(w) = waker {
            while !server.is_finished() {
                w.wake();
                // (Short: a woken server is gone in microseconds, and the summary waits.)
                std::thread::sleep(std::time::Duration::from_micros(100));
            }
        }
        let _ = server.join();
        let stop = match stop {
            Stop::Interrupted if gave_up.load(Ordering::Relaxed) => Stop::Withdrawn(
                "code kerf had translated was unmapped and the cache could not be emptied".into(),
            ),
            stop => stop,
        };
        (stop, drainer.join().ok().flatten())
    });
    // (The call trace is finished after the removal below, which it goes on draining: the
    // threads make records until they are out of the cache. Until then a full ring's writer
    // waits.)
    if let Some(r) = &reader {
        r.hold();
    }
    target.modules = modules;
    // What misses brought in, for the next run from these roots to translate ahead.
    jit.keep_hints(&target.modules);
    let s = &jit.stats;
    if s.lost > lost_before {
        events.warn(&format!(
            "{} more lookup-table entries made while the program ran found no room{}{}",
            s.lost - lost_before,
            lost_returns(s.lost_returns),
            bigger_table(jit.table_sets())
        ));
    }
    if !s.late_untraced.is_empty() {
        events.warn(&format!(
            "mapped after the trace began, translated without records of their own (no room \
             for their rings: calls of their functions are not traced; the calls they make \
             into the traced modules are): {}",
            s.late_untraced.join(", ")
        ));
    }
    // The roots are translated whatever the limit: a limit below them is passed at once.
    if let Some(limit) = tool.options.cache_limit.filter(|&l| jit.roots_bytes() > l) {
        events.warn(&format!(
            "the roots' translations alone take {} bytes, more than --cache-limit {limit}: \
             everything else they call escapes; raise the limit",
            jit.roots_bytes()
        ));
    }
    let live = jit.serving_for().unwrap_or_default();
    if let Some(w) = serving_warning(s, live, tool.options.cache_limit) {
        events.warn(&w);
    }
    if s.thrash_escapes > 0 {
        events.warn(&format!(
            "the code cache thrashed: flushes took over {} % of two seconds, so {} misses ran \
             natively instead of flushing again (counted as escapes: each thread left for the \
             rest of its root call); the cache limit is too small for the working set: raise \
             --cache-limit",
            // (`--max-flush-share 0.0001` said "over 0 %".)
            match tool.options.flush_share * 100.0 {
                p if p >= 1.0 => format!("{p:.0}"),
                p => format!("{p:.2}"),
            },
            s.thrash_escapes
        ));
    }
    if s.untranslatable > 0 {
        // (node: V8's generated code, reached from `main` at once; `zstd -d`: a decoder loop
        // in assembly found by no symbol or direct call, with nearly the whole run after it;
        // the summary's escapes said 1 and nothing more.)
        events.warn(&format!(
            "{} where kerf's analysis knows no code: outside every module (code the program \
             generated at run time, as a JavaScript or regular-expression JIT does), or inside \
             one but in code the analysis never found (hand-written assembly reached only \
             through a pointer: zstd's decoder); kerf cannot translate it, so each thread that \
             went there ran natively, uncounted, for the rest of its root call (counted as \
             escapes; `last_escape` in --json says where one left)",
            match s.untranslatable {
                1 => "1 jump target lay".to_string(),
                n => format!("{n} jump targets lay"),
            }
        ));
    }
    if s.timeouts > 0 {
        // (A user trial's first `kerf jit main -- java`: the miss into libjvm's `.init` waited
        // while kerf analysed the 20 MB library, gave up, and the whole JVM ran natively;
        // only `wait_timeouts` in the JSON said so. Since kerf's beat, a thread waits while
        // kerf lives: a give-up means kerf was stopped, or stuck for the longest wait.)
        events.warn(&format!(
            "{} a thread waiting for kerf to translate a miss gave up: kerf showed no sign of \
             life for {} ms (its process stopped or off the CPU that long), or gave no answer \
             for {} s: the thread ran natively, uncounted, for the rest of its root call, and \
             misses left without asking kerf until it listened again (escapes; \
             `escapes_unasked` in --json)",
            match s.timeouts {
                1 => "once".to_string(),
                n => format!("{n} times"),
            },
            kerf_jit::mailbox::WAIT_NS / 1_000_000,
            u64::from(kerf_jit::mailbox::TRIES) * kerf_jit::mailbox::WAIT_NS / 1_000_000_000
        ));
    }
    // Modules whose code ran natively for want of a trustworthy analysis, or which kerf
    // did not take in when a miss led there: their escapes are in the summary, the why here.
    for m in &s.analysis_rejected {
        events.warn(&format!(
            "the cached analysis of {m}: rejected when a miss first led there; that module's \
             code ran natively from then on, uncounted (each entry an escape)"
        ));
    }
    // By file name, the first few (gdk-pixbuf-query-loaders unmaps 28 in a run).
    let names = s.unmapped.iter().map(|p| p.rsplit('/').next().unwrap_or(p));
    let mut unmapped = counted(names, "times");
    if unmapped.len() > 4 {
        let more = unmapped.len() - 3;
        unmapped.truncate(3);
        unmapped.push(format!("{more} more"));
    }
    let unmapped = unmapped.join(", ");
    if !s.unmap_roots_left.is_empty() {
        events.warn(&format!(
            "the dynamic loader's munmap wrapper is changed in the target ({}: a jump left by \
             a kerf killed while attached, or another tool's patch), so it is no root of this \
             run: a dlclose outside the root calls is seen by kerf's look every 100 ms only",
            s.unmap_roots_left.join("; ")
        ));
    }
    if !s.unmapped_unseen.is_empty() {
        let names = s.unmapped_unseen.iter().map(|p| p.rsplit('/').next().unwrap_or(p));
        events.warn(&format!(
            "unmapped by a thread outside the root calls, and found gone only by kerf's look \
             every 100 ms, with other code mapped at their addresses by then: {}; calls from \
             the cache into that code before kerf looked may have run the old library's \
             translation (make the function that loads and closes libraries part of a root \
             call to have every unmap seen at once)",
            counted(names, "times").join(", ")
        ));
    }
    match &s.unmap_refused {
        None if !s.unmapped.is_empty() => events.say(&format!(
            "{} unmapped while translated (dlclose: {unmapped}); where any of their code had \
             run from the cache kerf took its translations out ({}), so that code mapped \
             there next runs its own translation",
            match s.unmapped.len() {
                1 => "1 module".to_string(),
                n => format!("{n} modules"),
            },
            match (s.retired, s.flushes) {
                (_, 0) => "the rest of the cache stayed".to_string(),
                (r, 1) => format!("{r} alone, the others by emptying the cache once"),
                (r, n) => format!("{r} alone, the others by emptying the cache {n} times"),
            }
        )),
        None => {}
        // (A forked copy's unmap: the target unmapped nothing, `why` says what went.)
        Some(why) if s.unmapped.is_empty() => events.warn(&format!(
            "{why}: kerf could not keep its translations for both, so the JIT was taken out \
             then, and the program ran natively from there"
        )),
        Some(why) => events.warn(&format!(
            "the program unmapped {unmapped}, which kerf had translated, and kerf could not \
             empty the cache ({why}): the JIT was taken out then, and the program ran natively \
             from there"
        )),
    }
    for m in &s.late_refused {
        events.warn(&format!(
            "a library mapped after kerf attached was not taken in ({m}): its code ran \
             natively, uncounted (each entry an escape)"
        ));
    }
    // (The call trace's and the lock plugin's slabs keep only each thread's ring address,
    // never in the shared slab: their records lose nothing there.)
    if let Some(jit::SlabUse { threads: claimed, shared, .. }) =
        jit.slab_use().filter(|u| u.shared > 0 && (counting || branches))
    {
        events.warn(&format!(
            "{shared} of the {claimed} threads that ran counted code found no counter slab of \
             their own and shared the last one: their counts may be low"
        ));
    }
    if let Some(n) = jit.slab_use().map(|u| u.program_gs).filter(|&n| n > 0) {
        events.warn(&format!(
            "{n} times a thread came to a way into the code cache (a root's entry, the \
             instruction after a system call or a wrgsbase) with a gs base of the program's \
             own (arch_prctl(ARCH_SET_GS), wrgsbase): it ran the original code from there, \
             neither counted nor traced (KERF_JIT_NO_SLABS=1 takes such threads in, \
             without per-thread slabs)"
        ));
    }
    signal_report(&s.signals, events);
    if !s.too_big.is_empty() {
        let (n, them) = match s.too_big.len() {
            1 => ("1 function needs".to_string(), "it ran"),
            n => (format!("{n} functions need"), "they ran"),
        };
        events.warn(&format!(
            "{n} more room than the cache limit leaves beside the roots, by kerf's estimate of \
             the translation ({}): {them} natively, uncounted, each entry an escape (the \
             thread runs the rest of its root call natively)",
            s.too_big.join(", ")
        ));
    }
    let mut calls_summary = None;
    // How a launched command ended once kerf had taken the cache out (or it went with the
    // old program at an `exec`), when kerf waited for it.
    let mut later_end = None;
    let removed = if stop.is_exec() {
        // The cache went with the old program; a launched command runs on in the new one,
        // and kerf waits for it as after any sampling (its exit status is kerf's; kerf left
        // at once and exited 0 before, the program still running).
        target.wait(&mut |l| events.say(l));
        later_end = target.fate();
        None
    } else {
        // Drained meanwhile: a thread waiting for room in a full ring (`--trace` to a slow
        // file) gets it, writes its record and comes to a clean point, where it would
        // otherwise spin in its wait until its deadline, far past the steps kerf takes to
        // bring a thread out (kerf failed so on Ctrl-C); and what the threads record until
        // they are out is read, not left in the rings.
        let out = AtomicBool::new(false);
        let r = std::thread::scope(|s| {
            if let Some(rd) = reader.as_mut() {
                s.spawn(|| jit_calls::drain_until(rd, &out));
            }
            let r = jit.remove();
            out.store(true, Ordering::Relaxed);
            r
        });
        // (Finished whether the removal failed or not: the trace file is whole either way.)
        calls_summary = reader.take().map(|r| r.finish(&target.modules));
        let r = r.map_err(|source| ToolError::Jit { pid, source });
        target.wait(&mut |l| events.say(l));
        // A target killed while the JIT was live or being taken out. (A launched command
        // kerf waited for after `--duration` or a withdrawal, with the JIT gone, ended after
        // kerf's work: a Ctrl-C then is not "killed while instrumented"; its end, whatever
        // it was, is said after the stop.)
        match (target.fate(), &stop) {
            (end, Stop::Duration | Stop::Withdrawn(_)) => {
                later_end = end.filter(|_| target.launched());
            }
            (Some(end @ kerf_session::live::End::Killed { .. }), _) => stop = Stop::Ended(end),
            _ => {}
        }
        Some(r?)
    };
    // The summary once the threads are out of the cache (or the program ended): no counter
    // moves while it is read, and where the threads came in and left is known
    // (`Jit::derived_counts`).
    let mut summary = summarize(&target, &jit, &roots, &woven, tool.rows);
    let held = removed.as_ref().is_some_and(|r| r.held.is_some());
    placement_report(&summary["jit"]["placement"], held, events);
    if let Some(never) = summary["jit"]["roots_never_entered"].as_array().filter(|a| !a.is_empty())
    {
        let names = with_counts(never.iter().filter_map(Value::as_str));
        // (A thread with a gs base of the program's own enters a root's original code: the
        // entry block's count cannot tell that from no entry at all.)
        let why = match (jit.slab_use().is_some_and(|u| u.program_gs > 0), command.is_empty()) {
            (true, _) => {
                "or entered only with a gs base of the program's own, running the original \
                 code; or it is inlined into its callers"
            }
            // (Attached: a thread already inside a root call is taken in, where it can be.)
            (false, true) => {
                "no thread called it while kerf was attached, and none inside a call of it could \
                 be taken in; a function inlined into its callers is never called"
            }
            (false, false) => "a function inlined into its callers is never called",
        };
        events.warn(&format!(
            "no thread entered {} while the JIT was live ({why}: `kerf analyze --function \
             NAME` shows its callers)",
            names.join(", ")
        ));
    }
    // Roots whose library never came, or came without them.
    let never_loaded: Vec<&str> = (tool.roots.iter())
        .filter(|t| waiting_texts.contains(t) && !jit.stats.late_roots_seen.contains(t))
        .map(String::as_str)
        .collect();
    if !never_loaded.is_empty() {
        events.warn(&format!(
            "the program did not load the library of {} while the JIT was live: never spliced",
            never_loaded.join(", ")
        ));
    }
    summary["jit"]["late_roots"]["never_loaded"] = json!(never_loaded);
    if !jit.stats.late_roots_refused.is_empty() {
        events.warn(&format!(
            "roots in a library loaded after the start not spliced: {}",
            jit.stats.late_roots_refused.join("; ")
        ));
    }
    if let Some(state) = jit.state() {
        // The callbacks' words that are not zero, by index.
        let words: serde_json::Map<String, Value> = (0..jit_callback::STATE_WORDS)
            .map(|k| (k, state.load_u64(8 * k as usize)))
            .filter(|&(_, v)| v != 0)
            .map(|(k, v)| (k.to_string(), json!(v)))
            .collect();
        summary["callback"] = json!({ "words": words });
    }
    let calls_summary = calls_summary.or_else(|| reader.map(|r| r.finish(&target.modules)));
    // (Counted in the summary too; said here whatever its form.)
    if let Some(c) = calls_summary.as_ref().filter(|c| c["lost"].as_u64() > Some(0)) {
        events.warn(&format!(
            "{} call and return records lost ({} in full rings while kerf did not drain for \
             {}; {} of threads that found no slot in a thread table); the counts per \
             function are of the {} read",
            c["lost"],
            c["lost_ring_full"],
            crate::time::fmt_ns(c["wait_seconds"].as_f64().unwrap_or(0.0) * 1e9),
            c["lost_no_slot"],
            c["records"]
        ));
    }
    if let Some(c) = calls_summary {
        summary["calls"] = c;
    }
    let mut v = summary;
    match crate::live::after_probes(&stop, later_end, pid) {
        Some((target, ended)) => {
            v["ended"] = json!(ended);
            v["target"] = target;
        }
        None => {
            v["ended"] = json!(stop.describe(pid));
            v["target"] = crate::live::stop_json(&stop);
        }
    }
    if let Some(r) = removed {
        let mut removed = json!({ "threads_moved": r.moved, "steps": r.steps, "stops": r.stops,
                                  "kept": r.kept.len(), "copies": r.copies,
                                  "copies_kept": r.copies_kept });
        if let Some(h) = r.held {
            removed["kept_bytes"] = json!(r.kept.iter().map(|m| m.1).sum::<u64>());
            removed["held_by"] = json!({
                "tid": h.tid,
                "stack_address": format!("{:#x}", h.at),
                "cache_address": format!("{:#x}", h.pc),
                "stands_for": h.original.map(|o| where_is(&target, o)),
            });
        }
        v["jit"]["removed"] = removed;
    }
    // A target killed by a signal (a SIGPIPE, Ctrl-C to its process group) leaves its counts
    // in kerf's mappings: the summary is written, then kerf fails ([`killed`]).
    Ok((v, Leftovers { _held: Box::new((jit, target)) }))
}

/// `summary` as JSON text, as `serde_json::to_string` writes it, with its block rows (the
/// first key, where there are any) written side by side: python3.11's 38 k rows took 8-11 ms
/// on one core after its program ended.
pub fn json_text(summary: &mut Value) -> String {
    use rayon::prelude::*;
    // (Only where "blocks" is the first key, which serde_json writes first: its maps keep
    // their keys sorted, and every other key of a summary sorts after it.)
    let first = summary.as_object().and_then(|o| o.keys().next()).map(String::as_str);
    if first != Some("blocks") {
        return serde_json::to_string(summary).unwrap_or_default();
    }
    let rows = match summary.as_object_mut().and_then(|o| o.remove("blocks")) {
        Some(Value::Array(rows)) => rows,
        other => {
            if let (Some(o), Some(v)) = (summary.as_object_mut(), other) {
                o.insert("blocks".into(), v);
            }
            return serde_json::to_string(summary).unwrap_or_default();
        }
    };
    let rest = serde_json::to_string(summary).unwrap_or_default();
    let parts: Vec<String> = rows
        .par_chunks(2048)
        .map(|c| {
            c.iter()
                .map(|r| serde_json::to_string(r).unwrap_or_default())
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    let text = match rest.strip_prefix('{') {
        Some("}") => format!("{{\"blocks\":[{}]}}", parts.join(",")),
        Some(tail) => format!("{{\"blocks\":[{}],{tail}", parts.join(",")),
        None => rest,
    };
    if let Some(o) = summary.as_object_mut() {
        o.insert("blocks".into(), Value::Array(rows));
    }
    text
}

/// The failure a summary's target says it met: killed by a signal while instrumented, or
/// after its probes were gone (it ran `exec`, or ran on after `--duration`).
pub fn killed(summary: &Value) -> Option<ToolError> {
    let signal = summary["target"]["signal"].as_u64()?;
    let target = &summary["target"];
    Some(ToolError::Killed {
        ended: summary["ended"].as_str().unwrap_or("the process was killed").to_string(),
        after_exec: target.get("exec").is_some() || target.get("after_probes").is_some(),
        signal: signal as i32,
    })
}

/// How each module's return facts were had (`ensure_returns`): checked (kept by an earlier
/// start), stamped (kept, and checked by an earlier start of this build of kerf), solved (and
/// kept for the next), or rejected (kept ones that failed, with why).
fn return_facts(modules: &[kerf_session::AnalyzedImage]) -> Value {
    use kerf_session::load::ReturnsHow;
    let (mut checked, mut stamped, mut solved, mut rejected) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for m in modules {
        let path = m.path.display().to_string();
        match m.returns_how.get() {
            Some(ReturnsHow::Checked) => checked.push(path),
            Some(ReturnsHow::Stamped) => stamped.push(path),
            Some(ReturnsHow::Solved) => solved.push(path),
            Some(ReturnsHow::Rejected(why)) => rejected.push(format!("{path}: {why}")),
            None => {}
        }
    }
    json!({"checked": checked, "stamped": stamped, "solved": solved, "rejected": rejected})
}

/// What to do about entries with no room in a table of `sets` sets: a bigger one, where
/// kerf makes one (its size is chosen from the program's blocks at the start).
fn bigger_table(sets: usize) -> String {
    use kerf_jit::table::MAX_SET_BITS;
    match sets.trailing_zeros() {
        bits if bits < MAX_SET_BITS => format!(
            " (the table has 2^{bits} sets, sized from the blocks kerf walked to; \
             KERF_JIT_SET_BITS={MAX_SET_BITS} makes the biggest)"
        ),
        bits => format!(" (the table has 2^{bits} sets, the most kerf makes)"),
    }
}

/// What a warning about lost table entries adds when `n` of them are return sites.
fn lost_returns(n: usize) -> String {
    match n {
        0 => String::new(),
        n => format!(
            "; {n} of them return sites, where a `ret` leaves the cache uncounted (not an \
             escape): the rest of that root call runs natively"
        ),
    }
}

/// The roots `texts` resolved in `target`'s modules, and, apart, those that name a library
/// the process has not loaded (yet): kerf waits for it ([`kerf_session::jit::Jit::wait_for_roots`]).
/// A path to a file that does not exist is refused: it cannot be loaded.
fn resolve_roots(
    target: &ProcessTarget,
    texts: &[String],
) -> Result<(Vec<Root>, Vec<spec::Spec>), ToolError> {
    let specs: Vec<spec::Spec> = texts.iter().map(|t| spec::parse(t)).collect::<Result<_, _>>()?;
    for s in &specs {
        let plain =
            matches!(&s.what, SpecWhat::Symbol { offset: 0, blocks: false, exits: false, .. });
        if !plain {
            let why =
                format!("{}: kerf jit's roots are functions ([MODULE:]SYMBOL), not points", s.text);
            return Err(ToolError::Usage(why));
        }
    }
    let names: Vec<(String, &kerf_analysis::Analysis)> =
        target.modules.iter().map(|m| (m.path.display().to_string(), &m.analysis)).collect();
    let mods: Vec<(&str, &kerf_analysis::Analysis)> =
        names.iter().map(|(n, a)| (n.as_str(), *a)).collect();
    let code = |k: usize, a: kerf_arch::ImageAddr| {
        target.modules[k].code_region(a).map(|(b, bytes)| (b, bytes.to_vec()))
    };
    let (mut loaded, mut waiting) = (Vec::new(), Vec::new());
    for s in specs {
        match spec::resolve_with_aliases(std::slice::from_ref(&s), &mods, &target.aliases, &code) {
            Err(spec::SpecError::NoModule { module, .. })
                if !module.contains('/') || std::path::Path::new(&module).exists() =>
            {
                waiting.push(s)
            }
            _ => loaded.push(s),
        }
    }
    let points = spec::resolve_with_aliases(&loaded, &mods, &target.aliases, &code)?;
    let roots = points.into_iter().map(|p| Root { label: p.label, module: p.module, func: p.func });
    Ok((roots.collect(), waiting))
}

/// Names in first-seen order, each once, with how many functions bore it when more than
/// one did (a name with two symbol versions, such as libc's `pthread_cond_wait`).
fn with_counts<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    counted(names, "functions of that name")
}

/// Each of `names` once, in their order, with how many times it came when more than once
/// (`NAME (K WHAT)`).
fn counted<'a>(names: impl Iterator<Item = &'a str>, what: &str) -> Vec<String> {
    let mut seen: Vec<(&str, usize)> = Vec::new();
    for n in names {
        match seen.iter_mut().find(|(m, _)| *m == n) {
            Some((_, k)) => *k += 1,
            None => seen.push((n, 1)),
        }
    }
    seen.into_iter()
        .map(|(n, k)| if k > 1 { format!("{n} ({k} {what})") } else { n.into() })
        .collect()
}

/// "N roots" for the summary line, and the names they came from when fewer (a name that
/// names several functions: symbol versions).
fn roots_said(roots: &[Root]) -> String {
    let names: std::collections::BTreeSet<&str> = roots.iter().map(|r| r.label.as_str()).collect();
    match (roots.len(), names.len()) {
        (1, _) => "1 root".into(),
        (n, k) if k < n => format!("{n} roots (of {k} names)"),
        (n, _) => format!("{n} roots"),
    }
}

/// An original address as `module+0xOFF (function+0xOFF)` when a module holds it.
fn where_is(target: &ProcessTarget, a: u64) -> String {
    for m in &target.modules {
        let Some(bias) = m.bias else { continue };
        let ia = kerf_arch::ImageAddr(a.wrapping_sub(bias));
        if m.code_region(ia).is_none() {
            continue;
        }
        let name = m.path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned());
        let cfg = &m.analysis.cfg;
        return match cfg.function_holding(ia) {
            Some(f) => {
                let f = cfg.function(f);
                format!("{name}+{:#x} ({}+{:#x})", ia.0, f.name, ia.0 - f.entry.0)
            }
            None => format!("{name}+{:#x}", ia.0),
        };
    }
    format!("{a:#x}")
}

/// The summary, once the threads are out of the caches (kerf's own mappings of the words
/// stay): the region, the escapes, and with the block counter every block that ran.
fn summarize(
    target: &ProcessTarget,
    jit: &jit::Jit,
    roots: &[Root],
    woven: &Woven,
    rows: Option<usize>,
) -> Value {
    let counting = woven.blocks;
    let s = &jit.stats;
    // Modules whose whole-image work came after the cache was live, by path.
    let path = |k: usize| target.modules.get(k).map(|m| m.path.display().to_string());
    let later: Vec<Option<String>> = s.later.iter().map(|&k| path(k)).collect();
    let mut modules = Vec::new();
    let (mut escapes, mut escapes_leaving, mut returns, mut at_flushes) = (0, 0, 0, 0);
    let mut unasked_all = 0;
    // A module's first translation, and those kerf added on demand: one row.
    let mut order: Vec<usize> = jit.caches.iter().map(|c| c.module).collect();
    order.sort_unstable();
    order.dedup();
    for module in order {
        let caches = jit.caches.iter().enumerate().filter(|(_, c)| c.module == module);
        let m = jit.image(&target.modules, module);
        let word = |c: &jit::Cache, w: u64| c.data.load_u64(w as usize);
        let (mut esc, mut leaving, mut rets, mut last, mut unasked) = (0, 0, 0, 0, 0);
        let (mut blocks, mut bytes, mut exits, mut translations) = (0, 0, 0, 0);
        let (mut tables, mut dispatches, mut guards) = (0, 0, 0);
        for (k, c) in caches {
            let (live, live_unasked) = jit.live_escapes_asked(k);
            esc += live;
            unasked += live_unasked;
            leaving += word(c, kerf_jit::translate::DATA_ESCAPES) - live;
            rets += word(c, kerf_jit::translate::DATA_RETURNS);
            last = match word(c, kerf_jit::translate::DATA_LAST_MISS) {
                0 => last,
                l => l,
            };
            blocks += c.translation.blocks.len();
            bytes += c.translation.code.len();
            exits += c.translation.exits.len();
            tables += c.translation.tables.len();
            dispatches += c.translation.table_dispatches;
            guards += c.translation.slot_guards;
            translations += 1;
        }
        // (A thread waiting for a miss's answer when the cache was flushed left through the
        // miss path, counted there, and was put back: no escape.)
        let flushed = s.flush_escapes.get(&module).copied().unwrap_or(0);
        let esc = esc.saturating_sub(flushed);
        at_flushes += flushed;
        escapes += esc;
        unasked_all += unasked;
        escapes_leaving += leaving;
        returns += rets;
        modules.push(json!({
            "module": m.path.display().to_string(),
            "functions": jit.functions(module),
            "translations": translations,
            "blocks": blocks,
            "code_bytes": bytes,
            "static_exits": exits,
            "table_copies": tables,
            "table_dispatches": dispatches,
            "slot_guards": guards,
            "escapes": esc,
            "escapes_unasked": unasked,
            "escapes_detaching": leaving,
            "waiting_at_flushes": flushed,
            "returns_out": rets,
            // Where the module's last miss went, which the escape went to if it was the
            // last: said only for a module with escapes (a miss kerf answered is none).
            "last_escape": (esc + leaving + rets > 0 && last != 0).then(|| where_is(target, last)),
        }));
    }
    // A thread a signal handler sent to code kerf could not translate, whose handler's frame a
    // flush rewrote to the original address, whose handler left by a jump kerf did not see,
    // or left by `siglongjmp` for code kerf could not translate, goes on natively for the rest
    // of its root call: an escape, of no module's cache.
    let g = &s.signals;
    escapes += g.away + g.sent_out + g.never_returned + g.stranded;
    // And a thread a flush brought out of the cache that found no new translation to go back
    // to (the limit reached): it too runs the rest of its root call natively.
    escapes += s.flush_moved as u64;
    // A block two translations hold (a block of two functions, the second translated on
    // demand after the first) counts in both: one row, their sum, named after the first.
    let mut by_block: Vec<jit::BlockWords> = if counting { jit.block_words() } else { Vec::new() };
    // Blocks whose counts follow from fewer counters: their words hold no count (or a ran
    // mark); the worked-out counts replace them.
    let derived = counting.then(|| jit.derived_counts(&target.modules, &by_block)).flatten();
    if let Some(d) = &derived {
        for &(p, n) in &d.counts {
            by_block[p].words = n;
        }
    }
    let ran = by_block.iter().filter(|b| b.words != 0);
    let listed: Vec<&jit::BlockWords> = match rows {
        None => ran.collect(),
        Some(top) => {
            let mut most: Vec<_> = ran.collect();
            // (Stable: equal counts stay in address order.)
            most.sort_by_key(|b| std::cmp::Reverse(b.words));
            most.truncate(top);
            most
        }
    };
    // (Each module's path made once for its rows; the rows side by side: python3.11's 36 k
    // blocks that ran took 17 ms one by one, after its program had ended.)
    let mut paths: std::collections::BTreeMap<usize, String> = Default::default();
    for b in &listed {
        let module = b.at.0;
        paths
            .entry(module)
            .or_insert_with(|| jit.image(&target.modules, module).path.display().to_string());
    }
    use rayon::prelude::*;
    let blocks: Vec<Value> = std::thread::scope(|sc| {
        // How often each block ran, kept for the next run's placement while the rows are
        // made (its files written, renamed, 4 ms; once a write stalled 44 ms).
        if let Some(d) = &derived {
            sc.spawn(|| jit.keep_weights(&target.modules, &by_block, &d.sides));
        }
        listed
            .par_iter()
            .map(|b| {
                let (module, start) = b.at;
                let m = jit.image(&target.modules, module);
                let mut row = point_row(m, &paths[&module], b.func, start);
                row.insert("count".into(), json!(b.words));
                Value::Object(row)
            })
            .collect()
    });
    // Counting, a root whose entry block never ran: no thread called it while the JIT was
    // live (a function inlined into its callers, or one the program calls only at other
    // times), which an empty table alone does not tell.
    let never_entered: Vec<&str> = roots
        .iter()
        .filter(|r| {
            counting && !s.taken_in_roots.contains(&(r.module, r.func)) && {
                let m = jit.image(&target.modules, r.module);
                let entry = m.analysis.cfg.function(r.func).entry.0 + m.bias.unwrap_or(0);
                let at = by_block.binary_search_by_key(&(r.module, entry), |b| b.at);
                !at.is_ok_and(|k| by_block[k].words != 0)
            }
        })
        .map(|r| r.label.as_str())
        .collect();
    let cache = json!({
        "limit": jit.cache_limit(),
        "bytes": jit.cache_bytes(),
        "peak": s.cache_peak,
        "standing_peak": s.standing_peak,
        "flushes": s.flushes,
        "flush_seconds": s.flush_time.as_secs_f64(),
        "flush_longest_seconds": s.flush_longest.as_secs_f64(),
        "flush_steps": s.flush_steps,
        "thrash_escapes": s.thrash_escapes,
        "threads_moved": s.flush_moved,
        "threads_replaced": s.flush_replaced,
        "refused": s.flush_refused,
        "refusals": s.flush_refusals,
    });
    let mut v = json!({
        "jit": {
            "roots": roots.iter().map(|r| r.label.clone()).collect::<Vec<_>>(),
            "roots_never_entered": never_entered,
            "taken_in": s.taken_in,
            "not_taken_in": s.not_taken_in,
            "functions": jit.function_count(),
            "blocks": s.blocks,
            "code_bytes": s.code_bytes,
            "predicted_indirect": s.region.predicted,
            "unknown_indirect": s.region.unknown,
            "table_copies": s.table_copies,
            "slot_guards": s.slot_guards,
            "return_facts": return_facts(&target.modules),
            "inlined_calls": s.inlined,
            "pieces": s.pieces,
            "later": {
                "modules": later,
                "done_after": s.later_done.map(|d| d.as_secs_f64()),
            },
            "capped": s.region.capped,
            "table_entries": s.table_entries,
            "table_at": jit.table_at(),
            "crowded": s.crowded,
            // (Table entries with no room, not records: `calls.lost` counts those.)
            "table_lost": s.lost,
            "table_lost_returns": s.lost_returns,
            "escapes": escapes,
            "escapes_detaching": escapes_leaving,
            "waiting_at_flushes": at_flushes,
            "returns_out": returns,
            "counters": counters_json(jit),
            "on_demand": {
                "asked": s.asked,
                "functions": s.added_functions,
                "hinted_ahead": s.hinted,
                "late_hinted": s.late_hinted,
                "untranslatable": s.untranslatable,
                "too_big": s.too_big,
                "seconds": s.serving.as_secs_f64(),
                "late_modules": s.late_modules,
                "late_refused": s.late_refused,
                "late_untraced": s.late_untraced,
                "analysis_rejected": s.analysis_rejected,
                "wait_timeouts": s.timeouts,
                "deaf_since": s.deaf_since.map(|d| d.as_secs_f64()),
            },
            "cache": cache,
            "modules": modules,
            "seconds": {
                "loaded": s.loaded.as_secs_f64(),
                "plan": s.plan.as_secs_f64(),
                "sizes": s.sizes.as_secs_f64(),
                "map": s.map.as_secs_f64(),
                "translate": s.translate.as_secs_f64(),
                "write": s.write.as_secs_f64(),
                "splice_pause": s.splice_pause.as_secs_f64(),
                "take_in_pause": s.take_in_pause.as_secs_f64(),
                "live": s.live.as_secs_f64(),
            },
        },
    });
    // (Beside the object above, whose size is at `json!`'s recursion limit.)
    v["jit"]["escapes_unasked"] = json!(unasked_all);
    v["jit"]["frameless_calls"] = json!(s.frameless_calls);
    v["jit"]["chained_returns"] = json!(s.chained_returns);
    v["jit"]["hot_chains"] = json!(s.hot_chains);
    v["jit"]["frameless_returns"] = json!(s.frameless_returns);
    v["jit"]["table_sets"] = json!(jit.table_sets());
    v["jit"]["on_demand"]["slots_unread"] = json!(s.slots_unread);
    v["jit"]["on_demand"]["unmapped"] = json!(s.unmapped);
    v["jit"]["on_demand"]["unmap_refused"] = json!(s.unmap_refused);
    v["jit"]["on_demand"]["retired"] = json!(s.retired);
    v["jit"]["on_demand"]["unmapped_unseen"] = json!(s.unmapped_unseen);
    v["jit"]["on_demand"]["unmap_roots"] = json!(s.unmap_roots);
    v["jit"]["late_roots"] = json!({
        "spliced": s.late_roots,
        "refused": s.late_roots_refused,
        "loaded": s.late_roots_seen,
    });
    v["jit"]["on_demand"]["unmap_roots_left"] = json!(s.unmap_roots_left);
    let g = &s.signals;
    v["jit"]["signals"] = json!({
        "hooked": g.hooked,
        "unhooked": g.unhooked,
        "asked": g.asked,
        "moved": g.moved,
        "busy": g.busy,
        "first_hooked_after": g.first_hooked.map(|d| d.as_secs_f64()),
        "back": g.back,
        "resumed": g.resumed,
        "away": g.away,
        "sent_out_by_flushes": g.sent_out,
        "never_returned": g.never_returned,
        "kept": g.kept,
        "kept_back": g.kept_back,
        "longjmps_asked": g.longjmps_asked,
        "left_by_longjmp": g.left,
        "longjmps_back_in": g.left_inside,
        "longjmps_reentered": g.reentered,
        "longjmps_stranded": g.stranded,
        "put_back_by_flushes": g.put_back,
        "at_once": g.at_once,
        "asked_in_flushes": g.asked_in_flushes,
        "asked_again": g.asked_again,
        "looks": g.looks,
        "noticed": g.noticed,
        "failed": g.failed,
    });
    // (Set apart: one more field in the `json!` above passes the macro's recursion limit.)
    v["jit"]["table_dispatches"] = json!(s.table_dispatches);
    if counting {
        // (Moved in: `json!` would copy every row.)
        v["blocks"] = Value::Array(blocks);
        v["jit"]["placement"] = placement_json(counting, derived.as_ref());
    }
    if woven.branches {
        v["branches"] = Value::Array(branch_profile(target, jit));
    }
    v
}

/// A row naming original address `at` of function `func` of module `m`: the module, the
/// function, `FUNCTION+0xOFF` and the image address.
fn point_json(m: &kerf_session::AnalyzedImage, func: kerf_analysis::cfg::FuncId, at: u64) -> Value {
    Value::Object(point_row(m, &m.path.display().to_string(), func, at))
}

/// [`point_json`]'s fields, the module's path given (made once for a module's rows: a
/// summary of every block has 50 k of them).
fn point_row(
    m: &kerf_session::AnalyzedImage,
    path: &str,
    func: kerf_analysis::cfg::FuncId,
    at: u64,
) -> serde_json::Map<String, Value> {
    let bias = m.bias.unwrap_or(0);
    let f = m.analysis.cfg.function(func);
    let mut row = serde_json::Map::new();
    row.insert("module".into(), path.into());
    row.insert("function".into(), f.name.as_str().into());
    row.insert("point".into(), format!("{}+{:#x}", f.name, at - bias - f.entry.0).into());
    row.insert("addr".into(), format!("{:#x}", at - bias).into());
    row
}

/// Every conditional branch that ran: its taken and not-taken counts, and whether its bias
/// contradicts the compiler's layout (JIFL's branch-hint check). Compilers make the path they
/// expect the fall-through of a forward branch and the taken side of a backward one (a
/// loop's), and put code they expect cold apart from its function (a branch there is expected
/// not taken, as a forward one); a forward branch taken more often than not, or a backward
/// one left more often than taken, is laid out against what it does, and `against` counts
/// the executions that went the unexpected way. A branch two translations hold counts once, their sum.
fn branch_profile(target: &ProcessTarget, jit: &jit::Jit) -> Vec<Value> {
    type Key = (usize, u64);
    let mut by_branch: std::collections::BTreeMap<Key, (kerf_jit::Branch, u64, u64)> =
        std::collections::BTreeMap::new();
    let words = jit.words();
    for (k, c) in jit.caches.iter().enumerate() {
        for b in &c.translation.branches {
            let count = |[own, shared]: [u64; 2]| words.get(k, own) + words.get(k, shared);
            let e = by_branch.entry((c.module, b.at)).or_insert((*b, 0, 0));
            e.1 += count(b.taken);
            e.2 += count(b.not_taken);
        }
    }
    let mut out = Vec::new();
    for (&(module, at), &(b, taken, not_taken)) in &by_branch {
        if taken + not_taken == 0 {
            continue;
        }
        let m = jit.image(&target.modules, module);
        let f = m.analysis.cfg.function(b.func);
        // A branch to before it in its own function (a loop's); one that leaves the function
        // (to its cold part, which compilers place apart, or a conditional tail call) is
        // expected not taken, as a forward one.
        let inside = f.extent.contains(&(b.target.wrapping_sub(m.bias.unwrap_or(0))));
        let backward = b.target <= at && inside;
        let against = if backward { not_taken } else { taken };
        let expected = if backward { taken } else { not_taken };
        let mut row = point_json(m, b.func, at);
        row["target"] = json!(where_is(target, b.target));
        row["backward"] = json!(backward);
        row["taken"] = json!(taken);
        row["not_taken"] = json!(not_taken);
        row["against_layout"] = json!(against > expected);
        row["against"] = json!(against);
        out.push(row);
    }
    out
}

/// What the signal handlers' hooks did (see `kerf_jit::x86_64::signal`), said when they did
/// anything, and warned of where a handler could not be hooked.
fn signal_report(g: &kerf_session::jit::SignalStats, events: &mut dyn Events) {
    let left = g.busy + g.asked.saturating_sub(g.moved);
    if left > 0 {
        events.say(&format!(
            "{left} signal frames that interrupted the cache kept its address for their handler \
             ({} at no clean point, {} while kerf was busy with a miss)",
            g.asked.saturating_sub(g.moved),
            g.busy
        ));
    }
    if g.moved > 0 {
        events.say(&format!(
            "signal handlers saw original addresses: {} signal frames interrupted the cache at a \
             clean point and were rewritten ({} went back into the cache; {} were sent elsewhere \
             by their handler, {} of them went on in the cache there and {} natively)",
            g.moved,
            g.back,
            g.resumed + g.away,
            g.resumed,
            g.away
        ));
    }
    if g.left > 0 {
        events.say(&format!(
            "{} signal handlers that interrupted the cache left by siglongjmp: {} of the jumps \
             stayed in their root call and went on in the cache ({} natively, no translation)",
            g.left, g.reentered, g.stranded
        ));
    }
    if g.never_returned > 0 {
        events.warn(&format!(
            "{} signal handlers that interrupted the cache never returned (they left by a jump \
             kerf does not follow, such as setcontext or a C++ exception, or their thread ended \
             in them): each thread went on natively for the rest of its root call, uncounted; \
             counted as escapes",
            g.never_returned
        ));
    }
    if !g.unhooked.is_empty() {
        events.warn(&format!(
            "signal handlers kerf could not hook ({}): a signal that interrupts the cache shows \
             them a cache address as the interrupted PC (a handler that decides by it, as Go's \
             preemption does, may then never act)",
            g.unhooked.join("; ")
        ));
    }
    if !g.failed.is_empty() {
        events.warn(&format!(
            "looking for the program's signal handlers failed: {}",
            g.failed.join("; ")
        ));
    }
}

/// The warning for a run in which kerf spent most of the time the cache was live (`live`)
/// translating on demand, if it did: at least a second, and half of that time. (A user
/// trial's node under `--cache-limit 1M`: 82 k misses, 72 s of a 77.5 s run, and no word
/// of it.)
fn serving_warning(
    s: &jit::JitStats,
    live: std::time::Duration,
    cache_limit: Option<u64>,
) -> Option<String> {
    let (serving, live) = (s.serving.as_secs_f64(), live.as_secs_f64());
    if serving < 1.0 || serving < 0.5 * live {
        return None;
    }
    // Mostly the analysis of libraries the program loaded: said as such (a second run finds
    // it in the analysis cache).
    let analysing = s.late_analysis.as_secs_f64();
    if analysing >= 0.5 * serving {
        return Some(format!(
            "kerf spent {serving:.1} s of the {live:.1} s the cache was live on demand, {analysing:.1} \
             s of it analysing libraries the program loaded ({}; their threads waited, and \
             the next run finds the analyses cached)",
            s.late_modules.join(", ")
        ));
    }
    let why = match cache_limit {
        Some(limit) => format!(
            "; with --cache-limit {limit} the cache holds less than the program runs ({} \
             flushes): a larger limit, or none, translates each function once",
            s.flushes
        ),
        None => String::new(),
    };
    Some(format!(
        "kerf spent {serving:.1} s of the {live:.1} s the cache was live translating on demand \
         ({} misses, each of which its thread waited for, and the walks after them){why}",
        s.asked
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A warning of lookup-table entries with no room names the table's size, and the
    /// setting that makes the biggest where it is not that already.
    #[test]
    fn a_table_with_no_room_says_how_to_make_it_bigger() {
        let small = bigger_table(1 << 17);
        assert!(small.contains("2^17 sets") && small.contains("KERF_JIT_SET_BITS=20"), "{small}");
        let most = bigger_table(1 << 20);
        assert!(most.contains("the most kerf makes") && !most.contains("KERF_JIT"), "{most}");
    }

    /// The summary's text with its rows written side by side is serde_json's, whatever keys
    /// come after the rows or whether there are any.
    #[test]
    fn json_text_is_serde_jsons() {
        let rows: Vec<Value> = (0..5000)
            .map(|k| json!({"addr": format!("{k:#x}"), "count": k, "module": "m\"q"}))
            .collect();
        for mut v in [
            json!({"blocks": rows.clone(), "ended": "x", "jit": {"a": [1, 2]}, "target": null}),
            json!({"blocks": rows.clone()}),
            json!({"blocks": [], "jit": 1}),
            json!({"jit": 1, "target": {"exit_code": 0}}),
            json!({"blocks": 3, "jit": 1}),
            json!({"addr": 1, "blocks": rows.clone(), "jit": 1}),
        ] {
            let want = serde_json::to_string(&v).unwrap();
            assert_eq!(json_text(&mut v), want);
            assert_eq!(serde_json::to_string(&v).unwrap(), want, "the summary is as it was");
        }
    }

    /// Kerf's time on misses is said when it was most of the live time (and at least a
    /// second), with the cache limit's part in it when there is one; not otherwise.
    #[test]
    fn most_of_the_live_time_on_misses_is_said() {
        use std::time::Duration;
        let s = |serving: f64| jit::JitStats {
            serving: Duration::from_secs_f64(serving),
            asked: 82_000,
            flushes: 640,
            ..Default::default()
        };
        let live = Duration::from_secs_f64(77.5);
        let w = serving_warning(&s(72.0), live, Some(1 << 20)).unwrap();
        assert!(w.starts_with("kerf spent 72.0 s of the 77.5 s"), "{w}");
        assert!(w.contains("82000 misses"), "{w}");
        assert!(w.contains("--cache-limit 1048576") && w.contains("640 flushes"), "{w}");
        let w = serving_warning(&s(40.0), live, None).unwrap();
        assert!(!w.contains("--cache-limit"), "{w}");
        // Mostly analysing a library the program loaded: said as such.
        let mut a = s(1.1);
        a.late_analysis = Duration::from_secs_f64(0.9);
        a.late_modules = vec!["/usr/lib/x86_64-linux-gnu/libcrypto.so.3".into()];
        let w = serving_warning(&a, Duration::from_secs_f64(1.2), None).unwrap();
        assert!(w.contains("0.9 s of it analysing libraries") && w.contains("libcrypto"), "{w}");
        // A third of the time, or under a second of a short run: nothing.
        assert_eq!(serving_warning(&s(25.0), live, None), None);
        assert_eq!(serving_warning(&s(0.9), Duration::from_secs_f64(1.0), None), None);
        assert!(serving_warning(&s(1.0), Duration::from_secs_f64(1.5), None).is_some());
    }

    /// A name two functions bear (two symbol versions) is said once, with the count; the
    /// summary line counts roots and, when fewer, the names they came from.
    #[test]
    fn roots_of_one_name_are_said_once() {
        let said = with_counts(["a", "b", "a"].into_iter());
        assert_eq!(said, ["a (2 functions of that name)", "b"]);
        let root = |l: &str, f: u32| Root {
            label: l.into(),
            module: 0,
            func: kerf_analysis::cfg::FuncId(f),
        };
        assert_eq!(roots_said(&[root("a", 1)]), "1 root");
        assert_eq!(roots_said(&[root("a", 1), root("b", 2)]), "2 roots");
        assert_eq!(roots_said(&[root("a", 1), root("a", 2), root("b", 3)]), "3 roots (of 2 names)");
    }
}
