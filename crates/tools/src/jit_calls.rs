//! `kerf jit --plugin calls` and `--plugin locks`: the call-trace plugin (JIFL's call tracing),
//! the lock-contention plugin built on it, and their reader. Every
//! function entry and every place a frame ends (`ret`, a tail call's jump) in the region
//! writes a record into the thread's own ring (`emit.thread`: the module's thread table and
//! per-thread ring area, see [`kerf_session::jit::JitOptions::rings`]), and kerf drains the
//! rings while the target runs: it counts calls and returns per function, pairs each return
//! with its call by stack pointer, and with `--trace FILE` writes every event into a raw trace
//! (packed records, as `kerf trace` writes them at high rates) that `kerf trace convert` makes
//! into Perfetto or JSON Lines, calls as slices. A full ring drops records and counts them;
//! the summary and the trace say how many, never silently. While kerf drains, a thread that
//! finds its ring full waits for room instead (until a deadline each drain moves ahead, see
//! `kerf_codegen::ring`'s `WAIT`): a busy program runs at the reader's pace rather than lose
//! its calls.
//!
//! A record: its time and CPU (the ring's header), then the stack pointer (a lock function's
//! entry also the lock and the return address). When no trace file is written, the tallies
//! read neither time nor CPU (a clock read is most of a record's cost), and a call's record
//! is one word in a compact slot: the probe and the stack pointer's low half
//! ([`CallTrace::shape`], [`widen_sp`]). Its stream id is the probe: `2k` the entry of
//! function `k` of [`CallTrace`]'s table, `2k + 1` its exit (with [`TAIL_EXIT`] at a tail
//! call's jump). The thread is the ring's (its slot's owner in the thread table); the
//! records the reader keeps for the trace carry it as their first word.
//!
//! A thread has a ring per module (each module's data area has its own thread table), so its
//! events are ordered within a module, not across modules. Pairing needs no more: the calls of
//! one module's functions, taken alone, nest as the whole does.

use crate::trace::event::{
    CaptureInfo, Counters, Loss, LossOrigin, PointKind, ProbeInfo, Record, Source, SourceKind,
    StreamInfo, ThreadInfo,
};
use crate::trace::program::{Decode, Slot};
use crate::trace::raw::Writer;
use crate::trace::tracer::{evict, prefetch};
use crate::trace::unpack::{Clock, RingWatch, SourceDecode};
use kerf_codegen::ir::{Op, Program, Rings, VReg};
use kerf_codegen::ring::{self, Shape};
use kerf_jit::{BlockInfo, ExitInfo};
use kerf_os::SharedMem;
use kerf_session::AnalyzedImage;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Words of a lock function's entry record: the stack pointer, the lock (the first
/// argument) and the return address (64-byte slots).
const LOCK_WORDS: usize = 3;
/// Words of a record in a ring: the stack pointer (32-byte slots). The thread is the ring's:
/// its owner in the module's thread table (`(pid << 32) | tid`), which the reader puts into
/// the records it keeps, as their first word.
const WORDS: usize = 1;
/// Set in the stream id of an exit at a tail call's jump. The analysis takes a direct jump
/// to another function's entry for a tail call, but in a stripped binary that entry may be a
/// fragment of the same function (its cold part, found as a function of its own) entered
/// with the frame still up: such an exit closes no frame (its stack pointer is below the
/// frame's), and the reader leaves it out. The trace never holds the bit. (Bit 30: bit 31
/// of a compact record's stream is the ring's, `ring::COMPACT_MARK`.)
const TAIL_EXIT: u32 = 1 << 30;
/// Slots of each thread's ring, unless `--ring-slots` says: 1 MiB a thread's ring per module
/// when counting (8 bytes a slot), 4 MiB with a trace file (32; pages no thread writes cost
/// nothing), 3 ms of a thread that makes 20 M calls a second.
pub const DEFAULT_SLOTS: u32 = 131072;
/// How often the reader drains the rings: every half millisecond, or as
/// `KERF_JIT_DRAIN_US` says (the tests' stand-in for a reader a busy host keeps off its CPU).
fn drain_every() -> std::time::Duration {
    let us = std::env::var("KERF_JIT_DRAIN_US").ok().and_then(|v| v.parse::<u64>().ok());
    std::time::Duration::from_micros(us.unwrap_or(500))
}
/// How long after a drain (or the keeper's look) a thread whose ring is full waits for the
/// next (`ring::WAIT`): kerf drains every half millisecond or sooner, and its keeper looks
/// every 20 ms, but either may sleep far longer: on the suite's 2-CPU virtual machines a
/// thread of kerf's that slept 20 ms was seen to wake 100-110 ms late, in a third to two
/// thirds of the runs of a 10-second trace (which then lost up to two thirds of its records
/// with a wait of 100 ms, the default until session 83); a machine busy with other work
/// keeps it off longer. A kerf that was killed or stopped costs a full ring this at most.
/// `KERF_JIT_WAIT_MS` sets it.
fn wait_for_reader_ns() -> f64 {
    const WAIT_FOR_READER_NS: f64 = 1e9;
    let ms = std::env::var("KERF_JIT_WAIT_MS").ok().and_then(|v| v.parse::<f64>().ok());
    ms.filter(|&ms| ms > 0.0).map_or(WAIT_FOR_READER_NS, |ms| ms * 1e6)
}
/// How long a record reserved and not complete holds back the trace's cut (its writer
/// preempted, or killed in the middle of the record).
const PENDING_PATIENCE_NS: f64 = 1e9;

/// The functions calls are traced in: every function of the process's modules (those kerf
/// analysed before attaching) by original entry address, each with two probes; or, for lock
/// contention (`locks`), only the pthread lock functions, whose entries also record the lock
/// and the call site. A module the program maps later (`dlopen`) gets its functions added
/// while the trace runs ([`LateRings`]): each such module is a trace source of its own, its
/// probes numbered from 0, its records in rings of its own.
pub struct CallTrace {
    pub shape: Shape,
    locks: bool,
    /// Whether the records carry their time (and CPU): for lock contention (its waits are
    /// times) and for a trace file. Counting alone reads neither, and a clock read costs
    /// more than the rest of a record (`emit.thread.untimed`).
    timed: bool,
    /// Original entry -> index in `funcs`; a cold part's entry -> its function's index.
    ids: HashMap<u64, u32>,
    parts: HashMap<u64, u32>,
    /// PLT stubs' entries (traced through: no records of their own).
    plt: HashSet<u64>,
    /// Per function: module index, name, entry.
    funcs: Vec<(usize, String, u64)>,
    /// The modules added while the trace runs, in the order they came.
    late: std::sync::RwLock<Vec<LateModule>>,
    /// The reader's keeper, once there is a reader: a late module's rings are put in its
    /// care as soon as they are added ([`LateRings`]).
    keep: std::sync::OnceLock<Arc<Keep>>,
}

/// A module mapped after the trace began: its functions (numbered from 0 in its own trace
/// source), its rings and data area, and where the reader keeps its tallies.
struct LateModule {
    path: std::path::PathBuf,
    bias: u64,
    table: FunctionTable,
    rings: Arc<SharedMem>,
    data: Arc<SharedMem>,
}

/// One module's traced functions: entry -> index, cold parts, PLT stubs, (name, entry).
#[derive(Default)]
struct FunctionTable {
    ids: HashMap<u64, u32>,
    parts: HashMap<u64, u32>,
    plt: HashSet<u64>,
    funcs: Vec<(String, u64)>,
}

impl FunctionTable {
    /// The functions of `m` (loaded at `bias`) to trace, numbered from `first`, leaving out
    /// entries `known` already has.
    fn of(
        m: &AnalyzedImage,
        bias: u64,
        locks: bool,
        first: u32,
        known: &dyn Fn(u64) -> bool,
    ) -> FunctionTable {
        let mut t = FunctionTable::default();
        let mut by_name: HashMap<&str, u32> = HashMap::new();
        let mut cold = Vec::new();
        for f in &m.analysis.cfg.functions {
            let entry = f.entry.0.wrapping_add(bias);
            if f.name.ends_with("@plt") {
                t.plt.insert(entry);
                continue;
            }
            if known(entry) || t.ids.contains_key(&entry) || (locks && !lock_function(&f.name)) {
                continue;
            }
            if let Some((parent, _)) = f.name.split_once(".cold") {
                cold.push((parent, entry));
                continue;
            }
            let id = first + t.funcs.len() as u32;
            t.ids.insert(entry, id);
            by_name.entry(&f.name).or_insert(id);
            t.funcs.push((f.name.clone(), entry));
        }
        for (parent, entry) in cold {
            match by_name.get(parent) {
                Some(&id) => {
                    t.parts.insert(entry, id);
                }
                None => {
                    t.ids.insert(entry, first + t.funcs.len() as u32);
                    t.funcs.push((format!("{parent}.cold"), entry));
                }
            }
        }
        t
    }

    /// The function (index) whose frame a `ret` or tail call at `func_entry`'s code ends.
    fn exit_id(&self, func_entry: u64) -> Option<u32> {
        self.ids.get(&func_entry).or_else(|| self.parts.get(&func_entry)).copied()
    }

    fn starts(&self, t: u64) -> bool {
        self.ids.contains_key(&t) || self.plt.contains(&t)
    }
}

impl CallTrace {
    /// Every function of `images` (PLT stubs left out: their jump would show each library
    /// call twice). A function's cold part (`f.cold`, `f.cold.1`: code the compiler moved
    /// away, which the analysis sees as a function of its own, entered by a jump from `f`)
    /// is `f`'s: entering it is no call, and its returns are `f`'s.
    pub fn new(images: &[AnalyzedImage], slots: u32, locks: bool, timed: bool) -> CallTrace {
        let mut ids = HashMap::new();
        let mut parts = HashMap::new();
        let mut plt = HashSet::new();
        let mut funcs = Vec::new();
        for (k, m) in images.iter().enumerate() {
            let Some(bias) = m.bias else { continue };
            let known = |e: u64| ids.contains_key(&e);
            let t = FunctionTable::of(m, bias, locks, funcs.len() as u32, &known);
            ids.extend(t.ids);
            parts.extend(t.parts);
            plt.extend(t.plt);
            funcs.extend(t.funcs.into_iter().map(|(name, entry)| (k, name, entry)));
        }
        let shape = CallTrace::shape(slots, locks, timed);
        let timed = timed || locks;
        let (late, keep) = Default::default();
        CallTrace { shape, locks, timed, ids, parts, plt, funcs, late, keep }
    }

    fn late(&self) -> std::sync::RwLockReadGuard<'_, Vec<LateModule>> {
        self.late.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Function `k` of the reader's tallies (the modules from the start, then each late
    /// module's in the order they came): its module's path, its name, its address in the
    /// module's file.
    fn describe(&self, k: usize, images: &[AnalyzedImage]) -> (String, String, u64) {
        match self.funcs.get(k) {
            Some((module, name, entry)) => {
                let m = &images[*module];
                (m.path.display().to_string(), name.clone(), entry - m.bias.unwrap_or(0))
            }
            None => self.late_function(k).unwrap_or_default(),
        }
    }

    /// The name of function `k` of the reader's tallies (see [`CallTrace::describe`]),
    /// borrowed where it can be (the lock reader asks once a record).
    fn name(&self, k: usize) -> std::borrow::Cow<'_, str> {
        match self.funcs.get(k) {
            Some((_, name, _)) => name.as_str().into(),
            None => self.late_function(k).map(|(_, name, _)| name).unwrap_or_default().into(),
        }
    }

    /// [`CallTrace::describe`] of a late module's function.
    fn late_function(&self, k: usize) -> Option<(String, String, u64)> {
        let mut k = k.checked_sub(self.funcs.len())?;
        for l in self.late().iter() {
            match l.table.funcs.get(k) {
                Some((name, entry)) => {
                    return Some((l.path.display().to_string(), name.clone(), entry - l.bias))
                }
                None => k -= l.table.funcs.len(),
            }
        }
        None
    }

    /// The rings' shape with `slots` slots: for calls that only count (no times: no trace
    /// file), compact slots of one word (the probe and the stack pointer's low half, see
    /// [`widen_sp`]), a quarter of the lines for the program to write and kerf to read;
    /// else slots that fit the words (lock contention's three, a call's one).
    pub fn shape(slots: u32, locks: bool, timed: bool) -> Shape {
        if !locks && !timed {
            return Shape::compact(slots);
        }
        Shape::fitting(slots, if locks { LOCK_WORDS } else { WORDS })
    }

    /// The ops of one record of probe `probe` into the rings at `rings`, appended to `p`
    /// (`lock`: a lock function's entry, with its lock and return address too).
    fn emit(&self, p: &mut Program, rings: u64, probe: u32, lock: bool) {
        let sp = p.vreg("sp");
        p.push(Op::Reg { dst: sp, reg: kerf_arch::x86_64::Gpr::Rsp });
        let mut values: Vec<VReg> = vec![sp];
        if lock {
            let (m, ret) = (p.vreg("lock"), p.vreg("ret"));
            p.push(Op::Reg { dst: m, reg: kerf_arch::x86_64::Gpr::Rdi });
            let top = kerf_codegen::ir::Addr::Based { base: sp, disp: 0 };
            p.push(Op::Load { dst: ret, width: kerf_codegen::ir::Width::W64, addr: top });
            values.extend([m, ret]);
        }
        p.push(Op::EmitThread {
            rings,
            per: Rings::Thread,
            shape: self.shape,
            stream: probe,
            values,
            reads: Vec::new(),
            timed: self.timed,
        });
    }

    /// A function's entry record, for a block that starts a function: its own, or another
    /// that shares it (a function the analysis found inside another's extent, as the cold
    /// fragments of a stripped binary are: the block is translated as the first's).
    pub fn entry(&self, p: &mut Program, b: &BlockInfo<'_>) {
        if b.rings == 0 {
            return;
        }
        if let Some(&k) = self.ids.get(&b.start) {
            self.emit(p, b.rings, 2 * k, self.locks);
        } else if let Some(k) = self.late().iter().find_map(|l| l.table.ids.get(&b.start).copied())
        {
            // A late module's function: its own source's probe, in its own rings.
            self.emit(p, b.rings, 2 * k, self.locks);
        }
    }

    /// A function's exit record.
    pub fn exit(&self, x: &ExitInfo<'_>) -> Option<Program> {
        let late = self.late();
        let k = (self.ids.get(&x.func_entry).or_else(|| self.parts.get(&x.func_entry)).copied())
            .or_else(|| late.iter().find_map(|l| l.table.exit_id(x.func_entry)))?;
        // A direct jump to code that starts no function goes on with the frame: into the
        // function's own cold part, or into another function's body (glibc's `mempcpy`
        // jumps into `memcpy` past its entry), whose `ret` then closes this frame. (A jump
        // to a PLT stub is a tail call: the stub goes on to the function's entry.)
        let starts = |t: &u64| {
            self.ids.contains_key(t)
                || self.plt.contains(t)
                || late.iter().any(|l| l.table.starts(*t))
        };
        if x.target.is_some_and(|t| !starts(&t)) {
            return None;
        }
        // A lock function's tail call goes on acquiring (glibc's `pthread_mutex_lock` jumps
        // to `__pthread_mutex_lock_full` for the kinds it does not handle itself): the
        // acquisition ends at the `ret` that comes back to the caller.
        if x.rings == 0 || (self.locks && x.tail) {
            return None;
        }
        let mut p = Program::new();
        let probe = if x.tail { TAIL_EXIT | (2 * k + 1) } else { 2 * k + 1 };
        self.emit(&mut p, x.rings, probe, false);
        Some(p)
    }

    /// The trace's source record of the modules traced from the start (source 0: its probe
    /// table, an entry and an exit per function) and decode table.
    fn source(&self, images: &[AnalyzedImage], pid: u32) -> (Source, SourceDecode) {
        let file = |k: usize| file_name(&images[k].path);
        let funcs = self.funcs.iter().map(|(k, name, _)| (file(*k), name.as_str()));
        source_record(0, funcs, pid)
    }
}

/// A module's file name, as points name it.
fn file_name(path: &std::path::Path) -> String {
    path.file_name().map_or(String::new(), |n| n.to_string_lossy().into_owned())
}

/// A source record and decode table: source `id`, an entry and an exit probe for each of
/// `funcs` (module file, function name), in order.
fn source_record<'a>(
    id: u16,
    funcs: impl ExactSizeIterator<Item = (String, &'a str)>,
    pid: u32,
) -> (Source, SourceDecode) {
    let mut probes = Vec::with_capacity(2 * funcs.len());
    let mut decode = Vec::with_capacity(2 * funcs.len());
    // As the reader keeps them: the thread and its process, then the stack pointer.
    let captures = vec![CaptureInfo { name: "sp".into(), hex: true }];
    let dec = Decode { tid: true, pair: true, captures: vec![Slot::Word(1)], reads: Vec::new() };
    for (m, name) in funcs {
        for kind in [PointKind::Entry, PointKind::Exit] {
            let point = match kind {
                PointKind::Exit => format!("{m}:{name}@exits"),
                _ => format!("{m}:{name}"),
            };
            probes.push(ProbeInfo {
                name: name.to_string(),
                point,
                kind,
                stream: 0,
                captures: captures.clone(),
            });
            decode.push((kind, 0, dec.clone()));
        }
    }
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    let offset = kerf_os::clock::realtime_ns() as i64 - kerf_os::clock::monotonic_ns() as i64;
    let source = Source {
        id,
        machine: String::new(),
        kind: SourceKind::Process,
        pid,
        name: comm.trim().to_string(),
        realtime_offset_ns: offset,
        probes,
        streams: vec![StreamInfo { name: "calls".into() }],
    };
    (source, SourceDecode { pid, probes: decode })
}

/// Whether `name` is one of the pthread lock functions or what they reach by tail calls
/// (`__pthread_mutex_lock_full`, `___pthread_mutex_lock`): its leading underscores left
/// out, it starts with the name of one of [`crate::locks::LOCK_FUNCTIONS`].
fn lock_function(name: &str) -> bool {
    let bare = name.trim_start_matches('_');
    crate::locks::LOCK_FUNCTIONS.iter().any(|f| bare.starts_with(f))
}

/// A module mapped after the trace began: its functions are named (a source of their own)
/// before any of its code is translated, and the reader adopts its rings at its next drain.
impl kerf_session::jit::LateRings for CallTrace {
    fn added(&self, m: &AnalyzedImage, rings: Arc<SharedMem>, data: Arc<SharedMem>) {
        let Some(bias) = m.bias else { return };
        let table = FunctionTable::of(m, bias, self.locks, 0, &|_| false);
        // Its rings' writers wait for room from now on, and the keeper moves their deadlines
        // with the others': the reader adopts the rings at its next drain, which a busy
        // host may hold off for longer than a thread takes to fill its ring (with a deadline
        // of 0 until then, the suite's late-root fixture once dropped 157 k of its 855 k
        // records).
        if let Some(keep) = self.keep.get() {
            keep.areas.lock().unwrap_or_else(|e| e.into_inner()).push(rings.clone());
            keep.keep();
        }
        let late = LateModule { path: m.path.clone(), bias, table, rings, data };
        self.late.write().unwrap_or_else(|e| e.into_inner()).push(late);
    }
}

/// One thread's open calls in one module's rings: (function, stack pointer at entry).
type Frames = Vec<(u32, u64)>;

/// A compact record's stack pointer (its low 32 bits, `low`) made whole again for pairing:
/// the value with those low bits nearest the thread's innermost open frame's (within 2 GiB
/// either way, as all of one stack's frames are), or near an arbitrary base when none is
/// open (pairing compares stack pointers only with each other). A frame pushed then is
/// the reference for the next. A signal handler on an alternate stack far from the thread's
/// may look nested or not, as with whole stack pointers on an alternate stack above the
/// thread's.
fn widen_sp(frames: &Frames, low: u32) -> u64 {
    const BASE: u64 = 1 << 40;
    let near = frames.last().map_or(BASE, |&(_, sp)| sp);
    near.wrapping_add(i64::from(low.wrapping_sub(near as u32) as i32) as u64)
}

/// What the reader counted.
#[derive(Default)]
struct Tally {
    entries: Vec<u64>,
    exits: Vec<u64>,
    /// Returns that met their call; returns from code the analysis put in another function
    /// (a fragment the caller jumped to); calls left without a return because a call or
    /// return further out came first (`longjmp`, an exception; also a frame that ends in a
    /// jump the analysis does not take for a tail call: the lazy binder's, which jumps to the
    /// function it bound); calls replaced by a
    /// conditional tail call (which has no exit record); and returns with no call open at
    /// their stack pointer (a call into a block that starts no function the analysis knows;
    /// one of a thread that was inside a root call at attach is `before`).
    matched: u64,
    elsewhere: u64,
    unwound: u64,
    replaced: u64,
    unmatched: u64,
    /// Returns with no call open on their thread at all, where threads were taken in inside a
    /// root call at attach ([`Reader::taken_in`]): theirs are the returns of the frames that
    /// were open then, whose calls came before the trace (a thread's outer frames come back
    /// one by one, the root's last).
    before: u64,
    taken_in: bool,
    /// Lock waits under way when their threads were taken in (an exit of a lock function with
    /// no entry): their lock and start are unknown; the longest lasted at least
    /// `before_lock_ns` after the take-in (`taken_in_tsc`).
    before_locks: u64,
    before_lock_ns: u64,
    taken_in_tsc: u64,
    /// Tail calls' exits that closed no frame: jumps into a fragment of the same function
    /// (the frame goes on), left out of the trace.
    fragment_jumps: u64,
    /// Records read, those the trace keeps, drains that found any, and the most one drain
    /// found.
    records: u64,
    events: u64,
    drains: u64,
    busiest: u64,
}

impl Tally {
    /// Count one record of a thread's ring (stream `stream`, stack pointer `sp`; a record
    /// with no words is counted and nothing else) against the
    /// thread's open frames, whose functions' tallies start at `base`; the probe the trace
    /// keeps it as, if any: each exit names the function whose frame it closes, and a tail
    /// call's exit that closes none (a jump into a fragment, see [`TAIL_EXIT`]) is left out.
    fn pair(
        &mut self,
        frames: &mut Vec<(u32, u64)>,
        base: usize,
        stream: u32,
        sp: Option<u64>,
    ) -> Option<u32> {
        self.records += 1;
        let sp = sp?;
        let tail = stream & TAIL_EXIT != 0;
        let probe = stream & !TAIL_EXIT;
        let (k, exit) = (base + (probe / 2) as usize, probe % 2 == 1);
        if k >= self.entries.len() {
            return None;
        }
        // Frames below this stack pointer were left without a return (`longjmp`, an
        // exception): a call or a return further out shows it.
        while frames.last().is_some_and(|&(_, s)| s < sp) {
            frames.pop();
            self.unwound += 1;
        }
        let mut keep = Some(probe);
        if !exit {
            self.entries[k] += 1;
            // A frame at the same stack pointer was replaced by a tail call that has no exit
            // record (a conditional one: `jne f`).
            while frames.last().is_some_and(|&(_, s)| s == sp) {
                frames.pop();
                self.replaced += 1;
            }
            frames.push((k as u32, sp));
        } else {
            // An exit closes the frame at its stack pointer, whichever function the analysis
            // put the instruction in: a stripped binary's cold fragments (code the compiler
            // moved apart, entered by a jump) are functions of their own to it, and return
            // for the function that jumped there. The frame's function is credited, and named
            // in the trace.
            match frames.last() {
                Some(&(f, s)) if s == sp => {
                    frames.pop();
                    self.exits[f as usize] += 1;
                    if f as usize == k {
                        self.matched += 1;
                    } else {
                        self.elsewhere += 1;
                    }
                    keep = Some(2 * (f - base as u32) + 1);
                }
                _ if tail => {
                    self.fragment_jumps += 1;
                    keep = None;
                }
                None if self.taken_in => self.before += 1,
                _ => self.unmatched += 1,
            }
        }
        self.events += u64::from(keep.is_some());
        keep
    }
}

/// What lets a thread other than the reader move the rings' deadlines on
/// ([`drain_until`]'s keeper): a reader blocked in a trace file's `write` (the kernel's
/// dirty-page throttling held one over 100 ms, the wait then) let full rings drop although
/// kerf was alive.
/// The keeper moves them only while the reader began a drain within [`KEEP_FOR`], so a
/// reader stuck for longer (a bug, a dead disk) still lets the threads go.
struct Keep {
    /// Every ring area.
    areas: std::sync::Mutex<Vec<Arc<SharedMem>>>,
    /// CLOCK_MONOTONIC ns when the reader last began a drain.
    beat: std::sync::atomic::AtomicU64,
    /// Time stamp counter ticks of a deadline past now; 0 while threads may not wait.
    wait_ticks: std::sync::atomic::AtomicU64,
    shape: Shape,
    /// The longest the keeper found the reader in one drain (ns since the drain began):
    /// past [`KEEP_FOR`], full rings dropped.
    longest_drain: std::sync::atomic::AtomicU64,
}

/// How long after the reader's last drain began the keeper still moves deadlines on: a
/// drain held in a write this long means a stuck disk or a stuck kerf, and the threads go
/// on without it (a killed or stopped kerf's keeper stops at once, and the deadlines lapse
/// a wait later: [`wait_for_reader_ns`]).
const KEEP_FOR: std::time::Duration = std::time::Duration::from_secs(10);
/// How often the keeper looks.
const KEEP_EVERY: std::time::Duration = std::time::Duration::from_millis(20);

impl Keep {
    /// Move every ring's deadline to `wait_ticks` past now, if the reader is alive: the
    /// unclaimed ones too, since a thread that claims a slot fills 16 records in
    /// microseconds, long before a drain under load finds it claimed, and its deadline must
    /// not have lapsed then (the suite's FIFO test lost a quarter of its records so, beside
    /// other tests).
    fn keep(&self) {
        self.keep_times(1);
    }

    /// [`Keep::keep`] with deadlines `times` as far past now.
    fn keep_times(&self, times: u64) {
        let ticks = self.wait_ticks.load(Ordering::Relaxed).saturating_mul(times);
        let beat = self.beat.load(Ordering::Relaxed);
        let since = kerf_os::clock::monotonic_ns().saturating_sub(beat);
        self.longest_drain.fetch_max(since, Ordering::Relaxed);
        if ticks == 0 || since >= KEEP_FOR.as_nanos() as u64 {
            return;
        }
        let deadline = kerf_os::clock::tsc() + ticks;
        let areas = self.areas.lock().unwrap_or_else(|e| e.into_inner());
        for rings in areas.iter() {
            for k in 0..kerf_codegen::timer::THREAD_SLOTS {
                let base = ring::thread_ring(k, self.shape);
                rings.store_u64((base + ring::WAIT) as usize, deadline);
            }
        }
    }
}

/// One module's rings as the reader reads them.
#[derive(Clone)]
struct Area {
    rings: Arc<SharedMem>,
    /// Its data area (the thread table first).
    data: Arc<SharedMem>,
    /// Its trace source (0: the modules traced from the start; a late module's own), and
    /// where its functions' tallies start.
    source: u16,
    base: usize,
}

/// The reader: drains every ring area, tallies, and writes the trace.
pub struct Reader<'a> {
    calls: &'a CallTrace,
    /// Per module: its rings.
    areas: Vec<Area>,
    /// Late modules whose rings are among `areas` (see [`LateRings`]).
    adopted: usize,
    tally: Tally,
    stacks: HashMap<(usize, u32), Frames>,
    /// Per ring (area `a`, slot `k`: `a * THREAD_SLOTS + k`), once it had records: a vector,
    /// not a map, since every drain asks for every ring, most of them empty.
    watch: Vec<Option<RingWatch>>,
    out: Option<Writer<Box<dyn Write + Send>>>,
    path: Option<String>,
    /// Threads seen (`(pid << 32) | tid`), and those not yet named in the trace.
    threads: HashSet<u64>,
    unnamed: Vec<u64>,
    pid: u32,
    start_tsc: u64,
    clock: Clock,
    /// One ring's records as read, and those the trace keeps.
    words: Vec<u64>,
    kept: Vec<u64>,
    error: Option<String>,
    /// For lock contention: the acquisitions, and each thread's open ones by stack pointer.
    lock_stats: crate::locks::LockStats,
    since: std::time::Instant,
    /// How long past a drain a full ring's writer may wait for the next: 0 (drop at once)
    /// where a seccomp filter forbids its `sched_yield` or `nanosleep`.
    wait_ns: f64,
    /// While threads may wait: what notices a seccomp filter installed after kerf asked the
    /// threads' (then they may not, from the next drain on).
    seccomp: Option<kerf_session::jit::SeccompWatch>,
    keep: Arc<Keep>,
}

impl<'a> Reader<'a> {
    /// A reader of `areas`; with `file` (its path and the file, opened before the JIT went
    /// in), the raw trace goes there. `start` is the time stamp
    /// counter and CLOCK_MONOTONIC read before the JIT went in (the clock's calibration).
    pub fn new(
        calls: &'a CallTrace,
        areas: Vec<(Arc<SharedMem>, Arc<SharedMem>)>,
        images: &[AnalyzedImage],
        pid: i32,
        start: (u64, u64),
        file: Option<(&str, std::fs::File)>,
        waits: Option<kerf_session::jit::SeccompWatch>,
    ) -> Reader<'a> {
        let end = kerf_os::clock::tsc_and_monotonic();
        let ticks_per_ns = (end.0 - start.0) as f64 / (end.1 - start.1).max(1) as f64;
        let clock = Clock { ticks_per_ns, anchor_tsc: end.0, anchor_ns: end.1 };
        let path = file.as_ref().map(|(p, _)| p.to_string());
        // A trace file that cannot be written is reported in the summary; the JIT is in by
        // now, and the run goes on without it.
        let mut error = None;
        let out = file.and_then(|(p, f)| {
            let f: Box<dyn Write + Send> = Box::new(std::io::BufWriter::with_capacity(1 << 20, f));
            let (source, decode) = calls.source(images, pid as u32);
            let head = |mut w: Writer<_>| -> Result<_, crate::trace::raw::RawError> {
                w.write(&Record::Source(source))?;
                w.decode_table(0, &decode)?;
                w.clock(&clock)?;
                Ok(w)
            };
            Writer::new_packed(f).and_then(head).map_err(|e| error = Some(format!("{p}: {e}"))).ok()
        });
        // Each ring's counters, read once now (before the target runs): the first read of a
        // page of kerf's mapping faults, and a first drain that took all those faults (768
        // for three modules) took 8 ms, long enough for busy threads to fill their rings.
        // And every ring's writer waits for room rather than drop, until a deadline each drain
        // moves ahead (`ring::WAIT`).
        let wait_ns = if waits.is_some() { wait_for_reader_ns() } else { 0.0 };
        let deadline = deadline(&clock, end.0, wait_ns);
        for (area, _) in &areas {
            prime(area, calls.shape, deadline);
        }
        let n = calls.funcs.len();
        let keep = Arc::new(Keep {
            areas: std::sync::Mutex::new(areas.iter().map(|(rings, _)| rings.clone()).collect()),
            beat: std::sync::atomic::AtomicU64::new(end.1),
            wait_ticks: std::sync::atomic::AtomicU64::new(deadline.saturating_sub(end.0)),
            shape: calls.shape,
            longest_drain: std::sync::atomic::AtomicU64::new(0),
        });
        // (One reader a trace.)
        let _ = calls.keep.set(keep.clone());
        let areas = (areas.into_iter())
            .map(|(rings, data)| Area { rings, data, source: 0, base: 0 })
            .collect();
        Reader {
            calls,
            areas,
            adopted: 0,
            tally: Tally { entries: vec![0; n], exits: vec![0; n], ..Tally::default() },
            stacks: HashMap::new(),
            watch: Vec::new(),
            out,
            path,
            threads: HashSet::new(),
            unnamed: Vec::new(),
            pid: pid as u32,
            start_tsc: start.0,
            clock,
            words: Vec::with_capacity(1 << 16),
            kept: Vec::with_capacity(1 << 16),
            error,
            lock_stats: crate::locks::LockStats::default(),
            since: std::time::Instant::now(),
            wait_ns,
            seccomp: waits,
            keep,
        }
    }

    /// Threads were taken into the cache inside a root call at attach: a return that finds
    /// no call open on its thread is one of the frames open then (counted as `before_attach`,
    /// not as unmatched).
    pub fn taken_in(&mut self) {
        self.tally.taken_in = true;
        self.tally.taken_in_tsc = kerf_os::clock::tsc();
    }

    /// One drain of every ring (`last`: the target is done, nothing held back). Returns
    /// whether a ring was an eighth full or more.
    pub fn drain(&mut self, last: bool) -> bool {
        let shape = self.calls.shape;
        let began = kerf_os::clock::tsc_before_loads();
        let patience = (self.clock.ticks_per_ns * PENDING_PATIENCE_NS) as u64;
        let mut cut = began;
        let mut found = 0;
        let mut busy = false;
        // After `began`: a late module's records are older than the cut only once its rings
        // are read in this drain.
        self.adopt_late();
        let areas = self.areas.clone();
        let per_area = kerf_codegen::timer::THREAD_SLOTS as usize;
        self.watch.resize_with(areas.len() * per_area, || None);
        self.keep.beat.store(kerf_os::clock::monotonic_ns(), Ordering::Relaxed);
        if self.wait_ns > 0.0 && self.seccomp.as_mut().is_some_and(|w| w.changed()) {
            self.wait_ns = 0.0;
            self.keep.wait_ticks.store(0, Ordering::Relaxed);
        }
        for (a, Area { rings: area, data, source, base: first }) in areas.iter().enumerate() {
            let shared = area.words();
            for k in 0..kerf_codegen::timer::THREAD_SLOTS {
                let base = ring::thread_ring(k, shape);
                let word = |o: u64| shared[((base + o) / 8) as usize].load(Ordering::Acquire);
                let at = a * per_area + k as usize;
                // A slot no thread ever claimed (its key 0) has an empty ring: its head, a
                // line of its own, is not read (most of the 256 of every module). A claimed
                // one's writer may wait for room until a deadline further on: from now, not
                // from the drain's start, which a write of the trace file may have held long
                // enough to put it behind the keeper's.
                let claimed = data.load_u64((8 * k) as usize) != 0;
                if claimed {
                    let d = deadline(&self.clock, kerf_os::clock::tsc(), self.wait_ns);
                    area.store_u64((base + ring::WAIT) as usize, d);
                }
                if self.watch[at].is_none() && (!claimed || word(ring::HEAD) == word(ring::TAIL)) {
                    continue;
                }
                self.words.clear();
                // The ring's thread: `(pid << 32) | tid` where the code knows thread ids.
                let owner = data.load_u64((kerf_codegen::timer::OWNERS + 8 * k) as usize);
                let owner = if owner == 0 { u64::from(self.pid) << 32 } else { owner };
                // The slots were just written on another CPU: ask for them ahead.
                let ahead = |o: u64| prefetch(shared, base + o);
                // Counted where they lie unless a trace file or lock contention wants them.
                let in_place = self.out.is_none() && !self.calls.locks;
                let c = if in_place {
                    let (t, stack) = (&mut self.tally, (a, owner as u32));
                    let mut frames = self.stacks.remove(&stack).unwrap_or_default();
                    // Compact records (when nothing wants times, see `CallTrace::shape`): the
                    // stack pointer's low half.
                    let c = if shape.is_compact() {
                        ring::each_compact(&word, &ahead, shape, |w| {
                            let sp = widen_sp(&frames, w as u32);
                            t.pair(&mut frames, *first, (w >> 32) as u32, Some(sp));
                        })
                    } else {
                        ring::each_ahead(&word, &ahead, shape, |_, meta, slot| {
                            let sp = (meta >> 32 & 0xffff != 0).then(|| word(slot + ring::VALUES));
                            t.pair(&mut frames, *first, meta as u32, sp);
                        })
                    };
                    self.stacks.insert(stack, frames);
                    c
                } else {
                    ring::copy_ahead(&word, &ahead, shape, &mut self.words)
                };
                // The lines taken, out of this CPU's caches before the writer comes round
                // to them (ring::read_lines): without it sqlite3's call trace took 2.5 times
                // as long.
                for line in ring::read_lines(shape, c.tail - c.records, c.tail) {
                    evict(shared, base + line);
                }
                area.store_u64((base + ring::TAIL) as usize, c.tail);
                let start = self.start_tsc;
                let w = self.watch[at].get_or_insert_with(|| RingWatch::new(start));
                if let Some(bound) = w.read(began, c.tail, c.tail + c.pending, patience) {
                    cut = cut.min(bound);
                }
                found += c.records;
                busy |= c.records >= u64::from(shape.slots / 8);
                if c.records > 0 && self.threads.insert(owner) {
                    self.unnamed.push(owner);
                }
                if !in_place {
                    self.tally_words(a, owner, *first);
                }
                if let Some(out) = self.out.as_mut() {
                    if let Err(e) = out.packed(*source, &self.kept) {
                        self.error.get_or_insert(e.to_string());
                        self.out = None;
                    }
                }
            }
        }
        let new = std::mem::take(&mut self.unnamed);
        if let Some(out) = self.out.as_mut() {
            for owner in new {
                let (pid, tid) = ((owner >> 32) as u32, owner as u32);
                let name = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm"))
                    .unwrap_or_default();
                let t = ThreadInfo { source: 0, pid, tid, name: name.trim().into() };
                let _ = out.write(&Record::Thread(t));
            }
            let cut = if last { u64::MAX } else { cut };
            if let Err(e) = out.drain(cut) {
                self.error.get_or_insert(e.to_string());
                self.out = None;
            }
        }
        if found > 0 {
            self.tally.drains += 1;
            self.tally.busiest = self.tally.busiest.max(found);
        }
        busy
    }

    /// The rings of modules added since the last drain ([`LateRings`]): their source
    /// record and decode table go into the trace, their tallies after the others.
    fn adopt_late(&mut self) {
        let late = self.calls.late();
        for (j, l) in late.iter().enumerate().skip(self.adopted) {
            let source = (j + 1) as u16;
            let base = self.tally.entries.len();
            let n = base + l.table.funcs.len();
            self.tally.entries.resize(n, 0);
            self.tally.exits.resize(n, 0);
            // Their pages faulted in now, not in the middle of a drain (see `new`).
            let now = kerf_os::clock::tsc_before_loads();
            prime(&l.rings, self.calls.shape, deadline(&self.clock, now, self.wait_ns));
            if let Some(out) = self.out.as_mut() {
                let file = file_name(&l.path);
                let funcs = l.table.funcs.iter().map(|(name, _)| (file.clone(), name.as_str()));
                let (src, decode) = source_record(source, funcs, self.pid);
                let r =
                    out.write(&Record::Source(src)).and_then(|_| out.decode_table(source, &decode));
                if let Err(e) = r {
                    self.error.get_or_insert(e.to_string());
                    self.out = None;
                }
            }
            let (rings, data) = (l.rings.clone(), l.data.clone());
            // (In the keeper's care already where the reader was made before they came.)
            let mut kept = self.keep.areas.lock().unwrap_or_else(|e| e.into_inner());
            if !kept.iter().any(|k| Arc::ptr_eq(k, &rings)) {
                kept.push(rings.clone());
            }
            drop(kept);
            self.areas.push(Area { rings, data, source, base });
            self.adopted = j + 1;
        }
    }

    /// Count and pair the records of one ring of area `a` (in `self.words`), whose functions'
    /// tallies start at `base`, and put those the trace keeps into `self.kept`: each exit
    /// names the function whose frame it closes, and a tail call's exit that closes none (a
    /// jump into a fragment, see [`TAIL_EXIT`]) is left out.
    fn tally_words(&mut self, a: usize, owner: u64, base: usize) {
        if self.calls.locks {
            return self.tally_locks(a, owner, base);
        }
        let words = std::mem::take(&mut self.words);
        self.kept.clear();
        // (Records are kept only for a trace file: the tallies need none.)
        let tracing = self.out.is_some();
        let t = &mut self.tally;
        let tid = owner as u32;
        let mut frames = self.stacks.remove(&(a, tid)).unwrap_or_default();
        let mut at = 0;
        while let (Some(&time), Some(&meta)) = (words.get(at), words.get(at + 1)) {
            let len = (meta >> 32 & 0xffff) as usize / 8;
            let Some(values) = words.get(at + 2..at + 2 + len) else { break };
            at += 2 + len;
            let sp = values.first().copied();
            let Some(probe) = t.pair(&mut frames, base, meta as u32, sp) else { continue };
            // (A record kept has its stack pointer: `pair` keeps none without one.)
            if let (true, Some(sp)) = (tracing, sp) {
                // Its thread first: one word more than the ring's record.
                let meta = meta & !(0xffff << 32 | 0xffff_ffff) | 16 << 32 | u64::from(probe);
                self.kept.extend_from_slice(&[time, meta, owner, sp]);
            }
        }
        self.stacks.insert((a, tid), frames);
        self.words = words;
    }

    /// Lock contention: the records of one ring of area `a` (in `self.words`) as the
    /// acquisitions of its thread. An acquisition starts at a lock function's entry and ends
    /// at the `ret` with the entry's stack pointer, which comes back to the caller (whichever
    /// lock function holds it: tail calls go on acquiring); an entry at the stack pointer of
    /// an acquisition under way is that tail call's, and returns of what the lock functions
    /// call (deeper) are not the end.
    fn tally_locks(&mut self, a: usize, owner: u64, base: usize) {
        use crate::locks::thread_key;
        use crate::trace::event::PointKind;
        let thread = thread_key(owner as u32, 0);
        let open = self.stacks.entry((a, owner as u32)).or_default();
        for p in ring::packed(&self.words) {
            self.tally.records += 1;
            let (k, exit) = (base + (p.stream / 2) as usize, p.stream % 2 == 1);
            let Some(&sp) = p.values.first() else { continue };
            if k >= self.tally.entries.len() {
                continue;
            }
            let name = &self.calls.name(k);
            // Acquisitions left by a longjmp out of a lock function (a signal handler's).
            while open.last().is_some_and(|&(_, s)| s < sp) {
                open.pop();
                self.tally.unwound += 1;
            }
            let ns = self.clock.ns(p.time);
            let top = open.last().map(|&(_, s)| s);
            match (exit, p.values.get(1..3)) {
                (false, Some(&[lock, site])) if top != Some(sp) => {
                    open.push((k as u32, sp));
                    self.tally.entries[k] += 1;
                    self.lock_stats.event(PointKind::Entry, name, thread, ns, Some((lock, site)));
                }
                (true, _) if top == Some(sp) => {
                    open.pop();
                    self.tally.exits[k] += 1;
                    self.lock_stats.event(PointKind::Exit, name, thread, ns, None);
                }
                // A wait that was under way when its thread was taken in (nothing open at
                // all: an exit deeper than an open acquisition is one of its callees').
                (true, _) if top.is_none() && self.tally.taken_in => {
                    let t = &mut self.tally;
                    t.before_locks += 1;
                    let since = self.clock.ns(p.time).saturating_sub(self.clock.ns(t.taken_in_tsc));
                    t.before_lock_ns = t.before_lock_ns.max(since);
                }
                _ => {}
            }
        }
    }

    /// The rings' loss counts: records dropped on a full ring, and events of threads that
    /// found no slot in a thread table.
    fn lost(&self) -> (u64, u64) {
        let shape = self.calls.shape;
        let (mut full, mut no_slot) = (0, 0);
        for Area { rings: area, .. } in &self.areas {
            no_slot += area.load_u64(ring::NO_SLOT as usize);
            for k in 0..kerf_codegen::timer::THREAD_SLOTS {
                full += area.load_u64((ring::thread_ring(k, shape) + ring::LOST) as usize);
            }
        }
        (full, no_slot)
    }

    /// The last drain done: the trace finished and the summary.
    pub fn finish(mut self, images: &[AnalyzedImage]) -> Value {
        let (full, no_slot) = self.lost();
        let lost = full + no_slot;
        let open: u64 = self.stacks.values().map(|f| f.len() as u64).sum();
        if let Some(mut out) = self.out.take() {
            let now = kerf_os::clock::monotonic_ns();
            let mut put = |r: Record| out.write(&r).map(|_| ());
            let mut r = Ok(());
            if lost > 0 {
                let loss = Loss {
                    source: 0,
                    stream: 0,
                    count: lost,
                    from_ns: self.clock.ns(self.start_tsc),
                    to_ns: now,
                    origin: LossOrigin::Ring,
                };
                r = r.and(put(Record::Loss(loss)));
            }
            let delivered = self.tally.events;
            let c = Counters {
                source: 0,
                stream: 0,
                time_ns: now,
                emitted: delivered + lost,
                filtered: 0,
                delivered,
                lost,
            };
            r = r.and(put(Record::Counters(c)));
            if let Err(e) = r.and_then(|()| out.finish().map(|_| ())) {
                self.error.get_or_insert(e.to_string());
            }
        }
        // Lock contention: the acquisitions per lock and call site, as `kerf locks` reports
        // them (over the time the JIT was live).
        let locks = self.calls.locks.then(|| {
            self.lock_stats.finish();
            self.lock_stats.lost = lost;
            let namer = crate::locks::Namer::of(images, false);
            let seconds = self.since.elapsed().as_secs_f64();
            crate::locks::report(&self.lock_stats, seconds, &|a| namer.name(a))
        });
        let t = &self.tally;
        let mut rows: Vec<(u64, usize)> =
            t.entries.iter().enumerate().filter(|(_, &n)| n > 0).map(|(k, &n)| (n, k)).collect();
        rows.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let functions: Vec<Value> = rows
            .iter()
            .map(|&(n, k)| {
                let (module, name, addr) = self.calls.describe(k, images);
                json!({
                    "module": module,
                    "function": name,
                    "addr": format!("{addr:#x}"),
                    "calls": n,
                    "returns": t.exits[k],
                })
            })
            .collect();
        // How long a thread waited at a full ring past the last drain (0: not at all, its
        // seccomp filter forbids the wait's calls).
        let wait = if self.seccomp.is_some() { wait_for_reader_ns() / 1e9 } else { 0.0 };
        let mut v = json!({
            "records": t.records,
            "events": t.events,
            "fragment_jumps": t.fragment_jumps,
            "calls": t.entries.iter().sum::<u64>(),
            "returns": t.exits.iter().sum::<u64>() + t.unmatched + t.before,
            "matched": t.matched,
            "returns_from_fragments": t.elsewhere,
            "unwound": t.unwound,
            "replaced": t.replaced,
            "unmatched": t.unmatched,
            "before_attach": t.before,
            "open_at_end": open,
            "lost": lost,
            "lost_ring_full": full,
            "lost_no_slot": no_slot,
            "thread_slots": kerf_codegen::timer::THREAD_SLOTS,
            "threads": self.threads.len(),
            "drains": t.drains,
            "busiest_drain": t.busiest,
            "ring_slots": self.calls.shape.slots,
            // Whether the records carried their time (a trace file, or lock waits).
            "timed": self.calls.timed,
            "file": self.path,
            "error": self.error,
            // Seconds after the reader began when a thread was found under a seccomp filter
            // kerf had not asked: full rings dropped from then on instead of waiting.
            "waits_stopped": self.seccomp.and_then(|w| w.since).map(|d| d.as_secs_f64()),
            "wait_seconds": wait,
            // The longest one drain took, as the keeper saw it (a trace file's writes).
            "longest_drain": self.keep.longest_drain.load(Ordering::Relaxed) as f64 / 1e9,
            "functions": functions,
        });
        if let Some(mut l) = locks {
            l["under_way_at_attach"] = json!(t.before_locks);
            l["under_way_longest_after_attach_ns"] = json!(t.before_lock_ns);
            v["locks"] = l;
        }
        v
    }
}

/// The `ring::WAIT` word for a drain at `now`: `wait_ns` later, or 0 (a full ring drops at
/// once) when threads may not wait.
fn deadline(clock: &Clock, now: u64, wait_ns: f64) -> u64 {
    if wait_ns > 0.0 {
        now + clock.ticks(wait_ns)
    } else {
        0
    }
}

/// Every ring of a ring area before its first drain: a page of kerf's mapping faults at its
/// first read, so each ring's head is read now, not in the middle of a drain; and each ring's
/// writer is to wait for room until `deadline` (`ring::WAIT`), which drains then move ahead.
fn prime(rings: &SharedMem, shape: Shape, deadline: u64) {
    for k in 0..kerf_codegen::timer::THREAD_SLOTS {
        let ring = ring::thread_ring(k, shape);
        rings.load_u64((ring + ring::HEAD) as usize);
        rings.store_u64((ring + ring::WAIT) as usize, deadline);
    }
}

/// How many deadlines' worth (of a second) [`Reader::hold`] gives full rings' writers.
const HOLD_TIMES: u64 = 2;

impl Reader<'_> {
    /// Give every ring's writer [`HOLD_TIMES`] waits' worth (2 s) to wait for room, once:
    /// for the time between one [`drain_until`] and the next (kerf's summary, before the
    /// removal drains again), so that what the threads record meanwhile is read, not dropped
    /// (the program waits at a full ring instead). A kerf killed then lets them go 2 s later.
    pub fn hold(&self) {
        self.keep.keep_times(HOLD_TIMES);
    }
}

/// Drain `reader` every [`drain_every`] until `done`, then once more (nothing held back);
/// meanwhile a keeper thread moves the rings' deadlines on every [`KEEP_EVERY`] while the
/// reader is alive ([`Keep`]), so that a drain blocked in writing the trace does not make
/// full rings drop. (`kerf jit` drains so twice: while the JIT is live, and while it takes
/// the JIT out.)
pub fn drain_until(reader: &mut Reader<'_>, done: &std::sync::atomic::AtomicBool) {
    let keep = reader.keep.clone();
    let drained = std::sync::atomic::AtomicBool::new(false);
    let every = drain_every();
    std::thread::scope(|s| {
        s.spawn(|| {
            while !drained.load(Ordering::Relaxed) {
                std::thread::sleep(KEEP_EVERY);
                keep.keep();
            }
        });
        while !done.load(Ordering::Relaxed) {
            // A drain that found rings an eighth full goes again at once.
            if !reader.drain(false) {
                std::thread::sleep(every);
            }
        }
        reader.drain(true);
        drained.store(true, Ordering::Relaxed);
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A compact record's stack pointer comes back whole relative to the innermost open
    /// frame, across a 4 GiB boundary of the low half either way; with no frame open, near
    /// the base, so that records pair alike whatever their high half.
    #[test]
    fn a_stack_pointers_low_half_is_widened_near_the_innermost_frame() {
        let frames: Frames = vec![(0, 0x7ffd_0000_0010), (1, 0x7ffc_ffff_ff80)];
        assert_eq!(widen_sp(&frames, 0xffff_ff00), 0x7ffc_ffff_ff00);
        assert_eq!(widen_sp(&frames, 0x0000_0008), 0x7ffd_0000_0008);
        assert_eq!(widen_sp(&frames, 0xffff_ff80), 0x7ffc_ffff_ff80);
        let none = Frames::new();
        let (a, b) = (widen_sp(&none, 0x1000), widen_sp(&none, 0x0ff8));
        assert_eq!(a - b, 8);
        // A call and its return seen only through the low halves pair as whole ones do.
        let mut t = Tally { entries: vec![0; 2], exits: vec![0; 2], ..Tally::default() };
        let mut f = Frames::new();
        for (probe, sp) in [
            (0u32, 0x7ffd_0000_0008u64),
            (2, 0x7ffc_ffff_fff8),
            (3, 0x7ffc_ffff_fff8),
            (1, 0x7ffd_0000_0008),
        ] {
            let whole = widen_sp(&f, sp as u32);
            t.pair(&mut f, 0, probe, Some(whole));
        }
        assert_eq!((t.matched, t.unwound, t.unmatched, f.len()), (2, 0, 0, 0));
    }

    /// A thread's records as the reader pairs them: two functions (probes 0/1 and 2/3).
    fn pair_all(t: &mut Tally, records: &[(u32, u64)]) {
        let mut frames = Frames::new();
        for &(probe, sp) in records {
            t.pair(&mut frames, 0, probe, Some(sp));
        }
    }

    /// A return that finds no frame open on its thread is unmatched, unless threads were
    /// taken in at attach: then it is one of the frames open when its thread went in. A
    /// return at a stack pointer deeper than an open frame's is unmatched either way.
    #[test]
    fn returns_of_frames_open_before_the_trace_are_counted_apart_when_threads_were_taken_in() {
        // Inside f1 (sp 0x900) when it went in: calls f0 (0x800), both return, then f1's
        // caller's frame (f0 at 0xa00) returns; then a stray return deeper than an open call.
        let records = [(0, 0x800), (1, 0x800), (3, 0x900), (1, 0xa00), (0, 0x700), (3, 0x600)];
        for taken_in in [false, true] {
            let mut t =
                Tally { entries: vec![0; 2], exits: vec![0; 2], taken_in, ..Tally::default() };
            pair_all(&mut t, &records);
            assert_eq!((t.matched, t.records), (1, 6));
            let (before, unmatched) = if taken_in { (2, 1) } else { (0, 3) };
            assert_eq!((t.before, t.unmatched), (before, unmatched), "taken_in {taken_in}");
            assert_eq!((t.entries[0], t.exits[0], t.exits[1]), (2, 1, 0));
        }
    }
}
