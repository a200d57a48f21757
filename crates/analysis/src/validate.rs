//! Checking an analysis that comes from outside (kerf's cache) against the image it claims to
//! describe, before splice planning relies on it (DESIGN.md §5: every input is untrusted).
//!
//! What is checked, and why each matters to a splice:
//! - every count, index and range fits (a bad one would panic, or send a lookup elsewhere);
//! - every block, re-decoded from the image's own bytes, is exactly `insns` whole
//!   instructions over `len` bytes, with no transfer of control before its last one, and ends
//!   the way its terminator says: a jump planned at a block start is then on an instruction
//!   boundary;
//! - a branch into the function's extent, a block that falls through, and a jump table's
//!   entry each land on a block start (a branch target hidden inside a block would let a
//!   jump5 cover it), and jump tables hold the entries the table's bytes hold;
//! - a block's edges are exactly those its last instruction can take: none leads elsewhere,
//!   none is missing (a dropped return or tail-call edge would make registers look dead), and
//!   a call or tail call to a known function's entry names that function (whose summary
//!   liveness then reads);
//! - each block's registers read and written agree with its instructions, and a padding run
//!   (springboard space) is the one the functions and the bytes give;
//! - liveness is a solution of its equations (`liveness::check_function`), in the function
//!   and in every function whose summary it reads, transitively: then every stored live-in
//!   holds the least solution a fresh analysis finds (generated code writes only registers
//!   liveness calls dead).
//!
//! When: the cache's file-level checks (session's `cache` module: a private directory, a
//! checksum over the entry, its key, the BLAKE3 hash of the image's bytes) already catch a
//! damaged, foreign or stale entry, so this check is defence in depth, against kerf's own
//! format or logic drifting and against an entry that passes the checksum but is wrong.
//! Checking a whole large image costs about as much as decoding it again (libLLVM-14:
//! ~2 s), which would undo the cache; so [`Checker::new`] checks only what is cheap and
//! whole-entry at load (indices and ranges), and the rest is checked at the point of use,
//! per function ([`Checker::function`], memoised), by whatever is about to rely on a
//! function: splice planning. [`validate`] checks everything at once (`kerf analyze
//! --validate`, the tests). A caller that kept evidence that this very build passed
//! [`Checker::all_code`] on this very entry and image (the session's cache keeps a stamp)
//! may take it as passed ([`Checker::vouch_all`]): the check reads nothing else.
//!
//! Not re-derived: which functions exist, their names, which never return, and the
//! classification of indirect jumps (a table, a tail call, unanalysable). Those come from the
//! traversal itself; the cache file's checksum and its digest of the image's bytes vouch for
//! them.

use crate::callgraph::CallGraph;
use crate::cfg::{Block, Cfg, EdgeKind, EdgeTarget, FuncId, TableFormat, TargetTag, Terminator};
use crate::image::Image;
use crate::memory::CodeMemory;
use crate::program::{padding_between, springboard_padding, Analysis};
use kerf_arch::x86_64::{Flow, Scanner};
use kerf_arch::ImageAddr;
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// Why an analysis does not describe the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Invalid {
    /// Counts, indices or ranges that do not fit together.
    Structure(String),
    /// A block that does not match the instructions at its address.
    Block { function: String, addr: u64, detail: String },
    /// A jump table whose entries are not what the table's bytes hold.
    JumpTable { jump: u64, detail: String },
    /// Padding runs other than those the functions and bytes give.
    Padding,
    /// An unwind entry that is neither a function nor code never to be spliced.
    NoSplice { addr: u64 },
    /// Live registers or summaries that are no solution of the liveness equations.
    Liveness { function: String },
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::Structure(d) => write!(f, "{d}"),
            Invalid::Block { function, addr, detail } => {
                write!(f, "block at {addr:#x} of {function}: {detail}")
            }
            Invalid::JumpTable { jump, detail } => write!(f, "jump table of {jump:#x}: {detail}"),
            Invalid::Padding => write!(f, "padding differs from the image's"),
            Invalid::NoSplice { addr } => write!(
                f,
                "the unwind entry at {addr:#x} is neither a function nor listed as never spliced"
            ),
            Invalid::Liveness { function } => write!(f, "liveness of {function} differs"),
        }
    }
}

impl std::error::Error for Invalid {}

fn structure<T>(what: impl Into<String>) -> Result<T, Invalid> {
    Err(Invalid::Structure(what.into()))
}

/// Check all of `a` against `image` at once (see the module documentation), and rebuild its
/// call graph from the checked CFG in place.
pub fn validate(a: &mut Analysis, image: &Image<'_>) -> Result<(), Invalid> {
    Checker::new(a)?.everything(a, image)?;
    check_no_splice(&a.cfg, image)?;
    a.call_graph = CallGraph::build(&a.cfg);
    Ok(())
}

/// A function not checked yet; its own blocks, edges and equations checked; and those of every
/// function its liveness rests on too.
const UNCHECKED: u8 = 0;
const OWN: u8 = 1;
const CLOSED: u8 = 2;

/// What has been checked of one analysis so far: the analysis and the image's bytes never
/// change, so a function found good stays good. Shared between threads (planning may check
/// functions in parallel); a function checked twice at once is harmless.
pub struct Checker {
    funcs: Vec<AtomicU8>,
    pads: Vec<AtomicU8>,
    entries: Entries,
    /// Every function passed [`Checker::all_code`].
    all: AtomicBool,
}

impl Checker {
    /// The whole-entry checks done at load: counts, indices and ranges of every function,
    /// block, edge and jump table, and the call graph's shape. They read no code (libLLVM-14:
    /// a few tens of milliseconds) and make every later lookup in `a` stay in bounds.
    pub fn new(a: &Analysis) -> Result<Checker, Invalid> {
        check_structure(a)?;
        let n = a.cfg.functions.len();
        if !a.call_graph.fits(n) {
            return structure("the call graph does not fit the functions");
        }
        Ok(Checker {
            funcs: (0..n).map(|_| AtomicU8::new(UNCHECKED)).collect(),
            pads: (0..a.cfg.padding.len()).map(|_| AtomicU8::new(UNCHECKED)).collect(),
            entries: Entries::new(&a.cfg),
            all: AtomicBool::new(false),
        })
    }

    /// Whether every function passed [`Checker::all_code`] (or was vouched for by
    /// [`Checker::vouch_all`]).
    pub fn all_checked(&self) -> bool {
        self.all.load(Ordering::Acquire)
    }

    /// Take every function as checked whole, as [`Checker::all_code`] would leave them, without
    /// reading any code: for a caller that holds evidence that this very build of kerf passed
    /// `all_code` on this very analysis and image before (the session's cache keeps such a
    /// stamp beside an entry). The check is a function of those three alone, so it would pass
    /// again; padding runs are not covered (they are checked where a springboard goes).
    pub fn vouch_all(&self) {
        for f in 0..self.funcs.len() {
            self.mark(FuncId(f as u32), CLOSED);
        }
        self.all.store(true, Ordering::Release);
    }

    fn state(&self, f: FuncId) -> u8 {
        self.funcs[f.0 as usize].load(Ordering::Relaxed)
    }

    fn mark(&self, f: FuncId, s: u8) {
        self.funcs[f.0 as usize].fetch_max(s, Ordering::Relaxed);
    }

    /// Function `f` as code: its blocks re-decoded, their edges, its jump tables and its
    /// liveness equations (with its callees' summaries as stored). Enough to read its
    /// instructions and blocks; not yet to trust its live registers.
    pub fn code(&self, a: &Analysis, mem: &dyn CodeMemory, f: FuncId) -> Result<(), Invalid> {
        if self.state(f) >= OWN {
            return Ok(());
        }
        check_function(a, &self.entries, f, mem)?;
        let cfg = &a.cfg;
        for b in cfg.blocks_of(f) {
            if let Terminator::JumpTable(t) = b.term {
                check_table(&cfg.jump_tables[t.0 as usize], mem)?;
            }
        }
        crate::liveness::check_function(cfg, f)
            .map_err(|_| Invalid::Liveness { function: cfg.function(f).name.clone() })?;
        self.mark(f, OWN);
        Ok(())
    }

    /// Function `f` as splice planning uses it: [`Checker::code`] for `f` and for every
    /// function whose stored summary its liveness reads, transitively (its callees and tail
    /// callees, and functions whose blocks its edges enter), so that its live registers are
    /// those a fresh analysis would give or more (see `liveness::check_function`).
    pub fn function(&self, a: &Analysis, mem: &dyn CodeMemory, f: FuncId) -> Result<(), Invalid> {
        self.functions(a, mem, &[f])
    }

    /// [`Checker::function`] for each of `fs`: what they rest on is gathered first (reading
    /// only edges, whose indices [`Checker::new`] checked), then checked in parallel (a
    /// function high in a large library's call graph can rest on thousands).
    pub fn functions(
        &self,
        a: &Analysis,
        mem: &dyn CodeMemory,
        fs: &[FuncId],
    ) -> Result<(), Invalid> {
        let cfg = &a.cfg;
        // (A bitmap, not a hash set: planning every function of a large image asks for them
        // all at once.)
        let mut seen = vec![false; cfg.functions.len()];
        let mut first_sight = |f: FuncId| !std::mem::replace(&mut seen[f.0 as usize], true);
        let mut todo: Vec<FuncId> =
            fs.iter().copied().filter(|f| self.state(*f) != CLOSED && first_sight(*f)).collect();
        let mut all = todo.clone();
        while let Some(g) = todo.pop() {
            // Most edges stay in `g` (already seen): they are told by their block id alone,
            // without looking the block up (a binary search over every function's first id).
            // `Checker::new` made sure every block's `func` is the function it is kept with.
            let own = cfg.blocks.first[g.0 as usize]..cfg.blocks.first[g.0 as usize + 1];
            for b in cfg.blocks_of(g) {
                for e in cfg.edges_of(b) {
                    let d = match e.target {
                        EdgeTarget::Function(d) => d,
                        EdgeTarget::Block(t) if own.contains(&t.0) => continue,
                        EdgeTarget::Block(t) => cfg.block(t).func,
                        _ => continue,
                    };
                    if self.state(d) != CLOSED && first_sight(d) {
                        todo.push(d);
                        all.push(d);
                    }
                }
            }
        }
        all.par_iter().try_for_each(|g| self.code(a, mem, *g))?;
        // Every function reached was checked, and so was everything it rests on.
        for g in all {
            self.mark(g, CLOSED);
        }
        Ok(())
    }

    /// Padding run `i` of `a.cfg.padding` (springboard space) is the run between the function
    /// whose entry it ends at and the one before, as the bytes give it; that function's extent
    /// comes from its checked blocks.
    pub fn padding(&self, a: &Analysis, mem: &dyn CodeMemory, i: usize) -> Result<(), Invalid> {
        if self.pads[i].load(Ordering::Relaxed) != UNCHECKED {
            return Ok(());
        }
        let cfg = &a.cfg;
        let p = cfg.padding[i];
        let next = cfg.function_at(ImageAddr(p.start.0.saturating_add(p.len as u64)));
        let prev = next.and_then(|n| n.0.checked_sub(1)).map(FuncId);
        let (Some(prev), Some(next)) = (prev, next) else { return Err(Invalid::Padding) };
        self.code(a, mem, prev)?;
        if padding_between(cfg.function(prev), cfg.function(next), mem) != Some(p) {
            return Err(Invalid::Padding);
        }
        // Springboards never go into code no splice may touch.
        if cfg.no_splice_in(p.start.0, p.start.0 + p.len as u64).is_some() {
            return Err(Invalid::Padding);
        }
        self.pads[i].store(OWN, Ordering::Relaxed);
        Ok(())
    }

    /// Every function as code ([`Checker::code`]), in parallel: what a whole-image result
    /// computed from the analysis (the JIT's liveness where returns land) rests on. Memoised:
    /// once it has passed, it returns at once.
    pub fn all_code(&self, a: &Analysis, mem: &dyn CodeMemory) -> Result<(), Invalid> {
        self.all_code_until(a, mem, &AtomicBool::new(false)).map(|_| ())
    }

    /// [`Checker::all_code`], given up as soon as `stop` is set (what was checked stays
    /// checked): `Ok(false)` when it was.
    pub fn all_code_until(
        &self,
        a: &Analysis,
        mem: &dyn CodeMemory,
        stop: &AtomicBool,
    ) -> Result<bool, Invalid> {
        if self.all.load(Ordering::Acquire) {
            return Ok(true);
        }
        let n = a.cfg.functions.len();
        let each = |f: usize| match stop.load(Ordering::Relaxed) {
            true => Err(None),
            false => self.code(a, mem, FuncId(f as u32)).map_err(Some),
        };
        match (0..n).into_par_iter().try_for_each(each) {
            Ok(()) => {}
            Err(Some(bad)) => return Err(bad),
            Err(None) => return Ok(false),
        }
        check_parts(&a.cfg, mem)?;
        for f in 0..n {
            self.mark(FuncId(f as u32), CLOSED);
        }
        self.all.store(true, Ordering::Release);
        Ok(true)
    }

    /// Everything, in parallel: every function, and the padding list as a whole (no run
    /// missing or added).
    pub fn everything(&self, a: &Analysis, mem: &dyn CodeMemory) -> Result<(), Invalid> {
        self.all_code(a, mem)?;
        if springboard_padding(&a.cfg, mem) != a.cfg.padding {
            return Err(Invalid::Padding);
        }
        for p in &self.pads {
            p.store(OWN, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// Code never to be spliced (signal trampolines, unwind entries inside other code) is what
/// keeps kerf out of glibc's `__restore_rt`: every signal-frame unwind entry must be listed,
/// and every other entry in the code must start a function or be listed.
pub fn check_no_splice(cfg: &crate::cfg::Cfg, image: &Image<'_>) -> Result<(), Invalid> {
    for u in image.unwind_ranges() {
        if image.code_at(u.start).is_none() {
            continue;
        }
        let listed = cfg.no_splice.iter().any(|n| n.start == u.start && n.len == u.len);
        let ok = if u.signal_frame { listed } else { listed || cfg.function_at(u.start).is_some() };
        if !ok {
            return Err(Invalid::NoSplice { addr: u.start.0 });
        }
    }
    Ok(())
}

/// Indices and ranges, so that nothing below (nor any later lookup) indexes out of bounds.
fn check_structure(a: &Analysis) -> Result<(), Invalid> {
    let cfg = &a.cfg;
    let blocks = &cfg.blocks;
    let n = cfg.functions.len();
    if blocks.bodies.len() != n {
        return structure(format!("{} bodies for {n} functions", blocks.bodies.len()));
    }
    let mut first = Vec::with_capacity(n + 1);
    let mut total = 0u64;
    for b in &blocks.bodies {
        first.push(total as u32);
        total += b.blocks.len() as u64;
    }
    if total > u32::MAX as u64 {
        return structure("more blocks than ids");
    }
    first.push(total as u32);
    if blocks.first != first {
        return structure("block numbering does not match the functions' blocks");
    }
    if !cfg.functions.windows(2).all(|w| w[0].entry < w[1].entry) {
        return structure("functions are not sorted by entry");
    }
    // (Springboard space is looked up by address.)
    if !cfg.padding.windows(2).all(|w| w[0].start.0 + w[0].len as u64 <= w[1].start.0) {
        return structure("padding runs are not sorted");
    }
    // Each function's own ranges, in parallel (a few tens of milliseconds for libLLVM-14's
    // 2.8 million blocks, at every cached load).
    (0..n).into_par_iter().try_for_each(|i| {
        let f = &cfg.functions[i];
        let body = &blocks.bodies[i];
        if f.blocks != (first[i]..first[i + 1]) || body.blocks.is_empty() {
            return structure(format!("{}: block range", f.name));
        }
        if !f.blocks.contains(&f.entry_block.0)
            || body.blocks[(f.entry_block.0 - f.blocks.start) as usize].start != f.entry
        {
            return structure(format!("{}: entry block", f.name));
        }
        if !body.blocks.windows(2).all(|w| w[0].start < w[1].start) {
            return structure(format!("{}: blocks not sorted", f.name));
        }
        let lo = body.blocks[0].start.0;
        let hi = body.blocks.iter().map(|b| b.end().0).max().unwrap_or(lo);
        if f.extent != (lo..hi) {
            return structure(format!("{}: extent is not its blocks'", f.name));
        }
        if f.insn_bytes != body.blocks.iter().map(|b| b.len as u64).sum::<u64>() {
            return structure(format!("{}: instruction bytes", f.name));
        }
        for b in &body.blocks {
            if b.func.0 as usize != i || b.len == 0 || b.insns == 0 || b.insns > b.len {
                return structure(format!("{}: block at {:#x}", f.name, b.start.0));
            }
            if b.edges.start > b.edges.end || b.edges.end as usize > body.edges.len() {
                return structure(format!("{}: edges of block {:#x}", f.name, b.start.0));
            }
            if let Terminator::JumpTable(t) = b.term {
                if t.0 as usize >= cfg.jump_tables.len() {
                    return structure(format!("{}: jump table id", f.name));
                }
            }
        }
        for e in &body.edges {
            let ok = match e.tag {
                TargetTag::Block => (e.payload as u64) < total,
                TargetTag::Function => (e.payload as usize) < n,
                TargetTag::Address => (e.payload as usize) < body.far.len(),
                TargetTag::None => true,
            };
            if !ok {
                return structure(format!("{}: edge target out of range", f.name));
            }
        }
        Ok(())
    })
}

/// The functions' entries as one compact sorted array, and which never return: what checking
/// a function looks up at every call and branch. (A binary search over the functions' own
/// records, which are large, missed the cache at every step: a fifth of the check's time.)
struct Entries {
    at: Vec<u64>,
    noreturn: Vec<bool>,
}

impl Entries {
    fn new(cfg: &crate::cfg::Cfg) -> Entries {
        Entries {
            at: cfg.functions.iter().map(|f| f.entry.0).collect(),
            noreturn: cfg.functions.iter().map(|f| f.noreturn).collect(),
        }
    }

    /// The function whose entry is `x` (as `Cfg::function_at`), seen from function `f`: an
    /// address between `f`'s entry and the next function's is no entry, without a search.
    fn function_at(&self, f: FuncId, x: u64) -> Option<FuncId> {
        let i = f.0 as usize;
        let next = self.at.get(i + 1).copied().unwrap_or(u64::MAX);
        if x == self.at[i] {
            Some(f)
        } else if self.at[i] < x && x < next {
            None
        } else {
            self.at.binary_search(&x).ok().map(|i| FuncId(i as u32))
        }
    }
}

/// An edge as the check compares it: its kind and where it leads (`None`: a return).
type Leg = (EdgeKind, Option<u64>);

/// Re-decode every block of `f` and check its boundaries, its end, its register facts and
/// its edges against where its last instruction can go.
fn check_function(
    a: &Analysis,
    ix: &Entries,
    f: FuncId,
    mem: &dyn CodeMemory,
) -> Result<(), Invalid> {
    let cfg = &a.cfg;
    let fun = cfg.function(f);
    let blocks = cfg.blocks_of(f);
    let bad = |b: &Block, detail: String| Invalid::Block {
        function: fun.name.clone(),
        addr: b.start.0,
        detail,
    };
    let is_start = |t: u64| blocks.binary_search_by_key(&t, |b| b.start.0).is_ok();
    let function_at = |x: u64| ix.function_at(f, x);
    let (base, bytes) = mem
        .code_region(fun.entry)
        .ok_or_else(|| bad(&blocks[0], "not in executable code".into()))?;
    let mut sc = Scanner::new(bytes, base);
    // A direct branch into the function's extent goes to one of its blocks; another
    // function's entry, or bytes that do not decode (no block can be there), are the
    // exceptions analysis makes too.
    let lands_well = |sc: &mut Scanner<'_>, t: u64| {
        !fun.extent.contains(&t)
            || is_start(t)
            || function_at(t).is_some()
            || sc.decode(ImageAddr(t)).is_none()
    };
    let returns = |c: ImageAddr| function_at(c.0).is_none_or(|g| !ix.noreturn[g.0 as usize]);
    // The edges a block's last instruction allows, and groups (of one or two) of which at
    // least one must be there; and the block's edges as stored. Kept across blocks: a fresh
    // vector per block and group was most of the allocations of a check.
    let mut may: Vec<Leg> = Vec::new();
    let mut must: Vec<(Leg, Option<Leg>)> = Vec::new();
    let mut stored: Vec<Leg> = Vec::new();
    for (k, b) in blocks.iter().enumerate() {
        let mut check = Block { start: b.start, ..Block::default() };
        let mut at = b.start.0;
        let mut last = None;
        for n in 0..b.insns {
            let d = sc
                .decode_facts(ImageAddr(at))
                .ok_or_else(|| bad(b, format!("no instruction decodes at {at:#x}")))?;
            // A block that starts inside this instruction (a branch over a `lock` prefix)
            // must lie in code no splice touches: a probe there would break this one.
            let end = d.insn.next_ip();
            let inside = blocks[k + 1..].iter().take_while(|n| n.start.0 < b.end().0);
            if let Some(n) = inside.map(|n| n.start.0).find(|&s| at < s && s < end) {
                if cfg.no_splice_in(n, n + 1).is_none() {
                    let why = format!("the block at {n:#x} starts inside an instruction and is not listed as never spliced");
                    return Err(bad(b, why));
                }
            }
            let f = &d.facts;
            check.add_insn(f.reads, f.kills, f.flags_read, f.flags_killed);
            at = end;
            if at > b.end().0 {
                return Err(bad(b, "an instruction crosses its end".into()));
            }
            let ends = d.facts.flow.ends_block()
                || matches!(d.facts.flow, Flow::Call(_) | Flow::IndirectCall);
            if ends && n + 1 < b.insns {
                return Err(bad(b, "a transfer of control before its last instruction".into()));
            }
            last = Some(d);
        }
        if at != b.end().0 {
            return Err(bad(b, "its instructions do not fill it".into()));
        }
        if (check.gen, check.kill, check.flags_gen, check.flags_kill)
            != (b.gen, b.kill, b.flags_gen, b.flags_kill)
        {
            return Err(bad(b, "registers read or written differ from its instructions'".into()));
        }
        let Some(last) = last else { return Err(bad(b, "no instructions".into())) };
        let next = last.insn.next_ip();
        // The edges the last instruction allows, as (kind, where to), and groups of which at
        // least one must be there. A direct transfer to `t` is a local edge of `kind` or, when
        // analysis found `t` outside the function, a tail call.
        may.clear();
        must.clear();
        stored.clear();
        let to =
            |may: &mut Vec<Leg>, must: &mut Vec<(Leg, Option<Leg>)>, kind, t: u64, tail: bool| {
                let local = (kind, Some(t));
                let tail = tail.then_some((EdgeKind::TailCall, Some(t)));
                may.push(local);
                may.extend(tail);
                must.push((local, tail));
            };
        // (A branch to another function's entry is a tail call, even where a block of this
        // function starts there too: analysis seeds blocks at entries inside its range.)
        // Nor is there a fall-through edge from a block another block starts inside (glibc
        // branches over the `lock` prefix of `lock cmpxchg`): analysis cuts it there.
        let overlapped = blocks.get(k + 1).is_some_and(|n| n.start < b.end());
        // (Most blocks end where the next one starts.)
        let next_is_start =
            || blocks.get(k + 1).is_some_and(|n| n.start.0 == next) || is_start(next);
        let fall = |may: &mut Vec<Leg>, must: &mut Vec<(Leg, Option<Leg>)>| {
            let leg = (EdgeKind::FallThrough, Some(next));
            may.push(leg);
            let required = !overlapped
                && next_is_start()
                && (next == fun.entry.0 || function_at(next).is_none());
            if required {
                must.push((leg, None));
            }
        };
        let consistent = match (b.term, last.facts.flow) {
            (Terminator::FallThrough, Flow::Next) => {
                fall(&mut may, &mut must);
                next_is_start()
            }
            // Off the end of the function's range into the next one (see `build`).
            (Terminator::TailCall, Flow::Next) => {
                to(&mut may, &mut must, EdgeKind::TailCall, next, false);
                true
            }
            (Terminator::Call, Flow::Call(c)) => {
                to(&mut may, &mut must, EdgeKind::Call, c.0, false);
                if returns(c) {
                    fall(&mut may, &mut must);
                }
                true
            }
            (Terminator::IndirectCall, Flow::IndirectCall) => {
                fall(&mut may, &mut must);
                true
            }
            (Terminator::CondJump, Flow::CondJump(t)) => {
                to(&mut may, &mut must, EdgeKind::Branch, t.0, true);
                // Past the function's range: on into the next function, a tail call (see
                // `build`). Onto another function's entry inside it: a tail call where that
                // function was known when this one was built, else a fall-through to a block
                // of this one, which holds that code too (libsodium's hand-written
                // `func_274a0` falls into `func_2750a`, which another routine jumps to): both
                // say the one path, and every block of this function is checked here.
                if !fun.extent.contains(&next) {
                    to(&mut may, &mut must, EdgeKind::TailCall, next, false);
                } else if next != fun.entry.0 && function_at(next).is_some() {
                    to(&mut may, &mut must, EdgeKind::FallThrough, next, true);
                } else {
                    fall(&mut may, &mut must);
                }
                lands_well(&mut sc, t.0)
            }
            (Terminator::Jump, Flow::Jump(t)) => {
                to(&mut may, &mut must, EdgeKind::Jump, t.0, false);
                lands_well(&mut sc, t.0)
            }
            (Terminator::TailCall, Flow::Jump(t)) => {
                to(&mut may, &mut must, EdgeKind::TailCall, t.0, false);
                lands_well(&mut sc, t.0)
            }
            (Terminator::JumpTable(t), Flow::IndirectJump) => {
                let table = &cfg.jump_tables[t.0 as usize];
                for t in &table.targets {
                    to(&mut may, &mut must, EdgeKind::Table, t.0, true);
                }
                table.jump.0 == last.insn.ip()
                    && table.targets.iter().all(|t| lands_well(&mut sc, t.0))
            }
            (Terminator::IndirectTailCall | Terminator::Unanalysable, Flow::IndirectJump) => true,
            (Terminator::Return, Flow::Return) => {
                may.push((EdgeKind::Return, None));
                must.push(((EdgeKind::Return, None), None));
                true
            }
            (Terminator::Stop, Flow::Stop) => true,
            _ => false,
        };
        if !consistent {
            let flow = last.facts.flow.name();
            return Err(bad(b, format!("ends in a {flow} but is a {}", b.term.name())));
        }
        // Liveness flows along these edges: none may lead elsewhere, be missing, or stand for
        // its target in another form than analysis gives it (see `program::assemble`): a local
        // edge is a block of this function or an address no block of it starts at; a call or
        // tail call to a function's entry names that function, whose summary liveness reads.
        for e in cfg.edges_of(b) {
            let at = match e.target {
                // A block of this function (most are) without the lookup by id.
                EdgeTarget::Block(t) if fun.blocks.contains(&t.0) => {
                    Some(blocks[(t.0 - fun.blocks.start) as usize].start.0)
                }
                EdgeTarget::Block(t) => Some(cfg.block(t).start.0),
                EdgeTarget::Function(g) => Some(ix.at[g.0 as usize]),
                EdgeTarget::Address(x) => Some(x.0),
                EdgeTarget::None => None,
            };
            let form = match (e.kind, e.target) {
                (EdgeKind::Return, EdgeTarget::None) => true,
                (EdgeKind::Return, _) | (_, EdgeTarget::None) => false,
                (EdgeKind::Call | EdgeKind::TailCall, t) => match at.map(ImageAddr) {
                    Some(x) => function_at(x.0).is_none_or(|g| t == EdgeTarget::Function(g)),
                    None => false,
                },
                (_, EdgeTarget::Block(t)) => fun.blocks.contains(&t.0),
                (_, EdgeTarget::Address(x)) => !is_start(x.0),
                (_, EdgeTarget::Function(_)) => false,
            };
            if !form || !may.contains(&(e.kind, at)) {
                let where_to = at.map_or("nowhere".to_string(), |x| format!("{x:#x}"));
                return Err(bad(
                    b,
                    format!("a {} edge to {where_to} it cannot take", e.kind.name()),
                ));
            }
            stored.push((e.kind, at));
        }
        let found = |leg: &Option<Leg>| leg.is_some_and(|l| stored.contains(&l));
        if let Some(g) = must.iter().find(|(one, other)| !found(&Some(*one)) && !found(other)) {
            let (kind, at) = g.0;
            let where_to = at.map_or(String::new(), |x| format!(" to {x:#x}"));
            return Err(bad(b, format!("its {} edge{where_to} is missing", kind.name())));
        }
    }
    // Whether its returns leave through the caller's slot, kept with the analysis for the
    // JIT (a frameless `ret` rests on it): worked out again from the code checked above. A
    // part split off other functions rests on its parents' code too: checked with every
    // function ([`check_parts`]). (Nothing reads a part's answer before that: the JIT and
    // `@exits` probes read it beside the return facts, which wait for every function's
    // check.)
    let fits = match (fun.ret_through_slot, fun.ret_part) {
        (true, true) => true,
        (through, false) => cfg.returns_through_callers_slot(mem, f) == through,
        (false, true) => false,
    };
    if !fits {
        return Err(Invalid::Block {
            function: fun.name.clone(),
            addr: fun.entry.0,
            detail: "whether its returns leave through its caller's slot is not what its code says"
                .into(),
        });
    }
    Ok(())
}

/// Every part split off other functions whose returns are taken to leave through its
/// parents' slot ([`crate::cfg::Function::ret_part`]) is entered only by its parents' jumps,
/// with their frames where its `ret`s read ([`Cfg::part_returns_through`]): what
/// [`check_function`] cannot see from the part alone. Rests on every function's own check
/// (the parents' answers).
fn check_parts(cfg: &Cfg, mem: &dyn CodeMemory) -> Result<(), Invalid> {
    let part = |f: FuncId| cfg.function(f).ret_part;
    let own = |g: FuncId| {
        let fun = cfg.function(g);
        fun.ret_through_slot && !fun.ret_part
    };
    let ways = cfg.ways_in(&part);
    let depths = cfg.jump_depths(mem, ways.values().flatten().map(|&(from, _)| from));
    let parts: Vec<FuncId> =
        (0..cfg.functions.len() as u32).map(FuncId).filter(|&f| part(f)).collect();
    parts.par_iter().try_for_each(|&f| {
        let ways = ways.get(&f).map_or(&[][..], Vec::as_slice);
        if cfg.part_returns_through(mem, f, ways, &own, &depths) {
            return Ok(());
        }
        let fun = cfg.function(f);
        Err(Invalid::Block {
            function: fun.name.clone(),
            addr: fun.entry.0,
            detail: "its returns are taken for its parents', but not every way in is a parent's jump with its frame where they read".into(),
        })
    })
}

/// The table's entries, read again from the image, are its targets.
fn check_table(t: &crate::cfg::JumpTable, mem: &dyn CodeMemory) -> Result<(), Invalid> {
    let bad = |detail: String| Invalid::JumpTable { jump: t.jump.0, detail };
    for (i, target) in t.targets.iter().enumerate() {
        let matches = match t.format {
            TableFormat::Absolute64 => {
                mem.pointer(ImageAddr(t.table.0.wrapping_add(8 * i as u64))) == Some(target.0)
            }
            TableFormat::Relative32 { base } => {
                let slot = ImageAddr(t.table.0.wrapping_add(4 * i as u64));
                match mem.read(slot, 4).and_then(|b| <[u8; 4]>::try_from(b).ok()) {
                    // Signed or unsigned entries, as the code reading the table extends them.
                    Some(b) => {
                        let signed = base.0.wrapping_add(i32::from_le_bytes(b) as i64 as u64);
                        let unsigned = base.0.wrapping_add(u32::from_le_bytes(b) as u64);
                        target.0 == signed || target.0 == unsigned
                    }
                    None => false,
                }
            }
        };
        if !matches {
            return Err(bad(format!("entry {i} is not {:#x}", target.0)));
        }
        if mem.code_region(*target).is_none() {
            return Err(bad(format!("entry {i} is not code")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cfg::PackedEdge;

    /// libc analysed afresh (the check's own lookups are what is tested here).
    fn libc() -> (Vec<u8>, Analysis) {
        let path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
        let data = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e} (install libc6)"));
        let a = crate::analyze(&Image::from_elf("libc", &data).unwrap(), &crate::Quiet);
        (data, a)
    }

    #[test]
    fn a_call_edge_naming_another_function_is_caught() {
        // The callee's entry is looked up in a compact index, not by a search over the
        // functions: an edge naming the wrong function must still be told apart.
        let (data, mut a) = libc();
        let image = Image::from_elf("libc", &data).unwrap();
        let n = a.cfg.functions.len() as u32;
        let (f, k) = (0..a.cfg.blocks.bodies.len())
            .find_map(|f| {
                let body = &a.cfg.blocks.bodies[f];
                let k = body.edges.iter().position(|e| {
                    e.kind == EdgeKind::Call && e.tag == TargetTag::Function && e.payload + 1 < n
                })?;
                Some((f, k))
            })
            .expect("a call to a function");
        let e: &mut PackedEdge = &mut a.cfg.blocks.bodies[f].edges[k];
        e.payload += 1;
        let err = validate(&mut a, &image).expect_err("a call edge to the wrong function passed");
        assert!(matches!(err, Invalid::Block { .. }), "unexpected rejection: {err}");
    }

    /// glibc's malloc branches over the `lock` prefix of `lock cmpxchg` (`je 1f; lock; 1:
    /// cmpxchg`): analysis lists the locked instruction's inner bytes as never spliced, and a
    /// cached analysis without them is refused (a probe at the inner block killed a
    /// multi-threaded program with SIGILL).
    #[test]
    fn blocks_inside_an_instruction_must_be_listed_never_spliced() {
        let (data, mut a) = libc();
        let image = Image::from_elf("libc", &data).unwrap();
        let inside = |n: &crate::cfg::NoSplice| {
            matches!(n.why, crate::cfg::NoSpliceWhy::InsideInstruction { .. })
        };
        let listed: Vec<_> = a.cfg.no_splice.iter().filter(|n| inside(n)).copied().collect();
        assert!(!listed.is_empty(), "none found in libc: {:?}", a.cfg.no_splice);
        for n in &listed {
            let crate::cfg::NoSpliceWhy::InsideInstruction { insn, entry } = n.why else {
                unreachable!()
            };
            // The instruction holds a lock prefix, and the inner block starts right after it.
            let (base, bytes) = image.code_at(insn).unwrap();
            assert_eq!(bytes[(insn.0 - base.0) as usize], 0xf0, "{n}");
            assert_eq!((n.start, entry.0), (ImageAddr(insn.0 + 1), insn.0 + 1), "{n}");
        }
        validate(&mut a, &image).expect("the fresh analysis passes");
        a.cfg.no_splice.retain(|n| !inside(n));
        let err = validate(&mut a, &image).expect_err("a block inside an instruction passed");
        assert!(err.to_string().contains("starts inside an instruction"), "{err}");
    }
}
