//! Register and flag liveness (KernInst §3.2): live-in sets at every block entry, solved
//! interprocedurally where callees are known, and per instruction on demand.
//!
//! Assumptions, written down because safety depends on them:
//! - At a `ret` the caller may still need the return registers, the callee-saved registers and
//!   `rsp` (SysV), and also every register the function does not write on every path: a
//!   caller in the same image may keep a value in a caller-saved register across the call
//!   when it knows the callee leaves it alone (gcc's `-fipa-ra`, on by default at -O2: tests/
//!   fixtures/tailcall.c's `main` keeps `n` in `rcx` across `leaf_mix`). Taking only the SysV
//!   set, generated code in the callee overwrote such a register and changed the program's
//!   output. Flags are dead across calls and returns (gcc never keeps them across a call).
//! - A call to a known function reads what the callee's entry has live and kills only what
//!   the callee writes on every path to its exits (its `must_def`), so no ABI is assumed.
//! - A call to an unknown function (indirect, or through a PLT/GOT slot) reads the SysV
//!   argument registers and clobbers the caller-saved ones and all flags.
//! - An unanalysable indirect jump makes every register and flag live.

use crate::callgraph::CallGraph;
use crate::cfg::{Block, BlockId, Cfg, EdgeKind, EdgeTarget, FuncId, Terminator};
use crate::memory::CodeMemory;
use kerf_arch::x86_64::{FlagSet, RegSet, Scanner};
use kerf_arch::ImageAddr;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Registers and flags, the unit of every liveness fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Live {
    pub regs: RegSet,
    pub flags: FlagSet,
}

impl Live {
    pub const NONE: Live = Live { regs: RegSet::EMPTY, flags: FlagSet::EMPTY };
    pub const ALL: Live = Live { regs: RegSet::ALL, flags: FlagSet::ALL };

    fn union(self, o: Live) -> Live {
        Live { regs: self.regs.union(o.regs), flags: self.flags.union(o.flags) }
    }
    fn minus(self, o: Live) -> Live {
        Live { regs: self.regs.minus(o.regs), flags: self.flags.minus(o.flags) }
    }
    fn intersect(self, o: Live) -> Live {
        Live { regs: self.regs.intersect(o.regs), flags: FlagSet(self.flags.0 & o.flags.0) }
    }
    /// Every register and flag of `self` is in `o`.
    fn within(self, o: Live) -> bool {
        self.minus(o) == Live::NONE
    }
}

const AT_RETURN: Live = Live { regs: RegSet::SYSV_LIVE_AT_RETURN, flags: FlagSet::EMPTY };

/// What is live when a function whose must-def is `must` returns: the SysV set, and every
/// register the function may leave as its caller had it, which a caller that knows this
/// function may rely on (see the module comment). Registers it writes on every path are
/// never its caller's any more.
fn at_return(must: Live) -> Live {
    Live { regs: AT_RETURN.regs.union(RegSet::ALL.minus(must.regs)), flags: FlagSet::EMPTY }
}
/// What an unknown callee may read.
const UNKNOWN_CALLEE_READS: Live = Live { regs: RegSet::SYSV_ARGS, flags: FlagSet::EMPTY };
/// What an unknown callee may be assumed to clobber.
const UNKNOWN_CALLEE_KILLS: Live = Live { regs: RegSet::SYSV_CALLER_SAVED, flags: FlagSet::ALL };

fn gen_of(b: &Block) -> Live {
    Live { regs: b.gen, flags: b.flags_gen }
}
fn kill_of(b: &Block) -> Live {
    Live { regs: b.kill, flags: b.flags_kill }
}

/// Per-function facts the interprocedural solution is made of.
struct Summaries {
    live_in: Vec<Live>,
    must_def: Vec<Live>,
}

/// Solve liveness for the whole CFG, storing live-in sets in blocks and functions.
///
/// Functions are solved callees first: the call graph's strongly connected components, in
/// levels (a component's callees are all in lower levels), each level in parallel. A
/// component with recursion is iterated until its members' entry sets stop changing; every
/// other function is solved exactly once.
pub fn solve(cfg: &mut Cfg, cg: &CallGraph) {
    let n = cfg.functions.len();
    let mut sums = Summaries { live_in: vec![Live::NONE; n], must_def: vec![Live::NONE; n] };
    // Every block's set, stored into the blocks at the end, all functions in parallel (each
    // level's functions are scattered over the whole CFG).
    let mut block_live: Vec<Vec<Live>> = vec![Vec::new(); n];
    for level in levels(cg, n) {
        let results: Vec<Vec<Solved>> =
            level.par_iter().map(|scc| solve_component(cfg, scc, &sums)).collect();
        for s in results.into_iter().flatten() {
            let i = s.func.0 as usize;
            let fun = &cfg.functions[i];
            sums.live_in[i] = s.block_live[(fun.entry_block.0 - fun.blocks.start) as usize];
            sums.must_def[i] = s.must_def;
            block_live[i] = s.block_live;
        }
    }
    cfg.blocks.bodies.par_iter_mut().zip(block_live).for_each(|(body, live)| {
        for (b, l) in body.blocks.iter_mut().zip(&live) {
            b.live_in = l.regs;
            b.flags_live_in = l.flags;
        }
    });
    for (i, f) in cfg.functions.iter_mut().enumerate() {
        f.live_in = sums.live_in[i].regs;
        f.flags_live_in = sums.live_in[i].flags;
        f.must_def = sums.must_def[i].regs;
        f.flags_must_def = sums.must_def[i].flags;
    }
}

/// The plain fixpoint the levelled solver must agree with: every function re-solved, in
/// parallel rounds, until no function's entry set changes. Kept as a reference for tests.
#[doc(hidden)]
pub fn solve_by_rounds(cfg: &mut Cfg, cg: &CallGraph) {
    let n = cfg.functions.len();
    let must_def: Vec<Live> =
        (0..n).into_par_iter().map(|f| must_def_of(cfg, FuncId(f as u32))).collect();
    let mut live_in = vec![Live::NONE; n];
    let mut dirty: Vec<FuncId> = (0..n as u32).map(FuncId).collect();
    while !dirty.is_empty() {
        let results: Vec<(FuncId, Vec<Live>)> = dirty
            .par_iter()
            .map(|f| {
                let callee = |g: FuncId| (live_in[g.0 as usize], must_def[g.0 as usize]);
                (*f, solve_function(cfg, *f, at_return(must_def[f.0 as usize]), &callee))
            })
            .collect();
        let mut next = Vec::new();
        for (f, block_live) in results {
            let fun = &cfg.functions[f.0 as usize];
            let entry = block_live[(fun.entry_block.0 - fun.blocks.start) as usize];
            for (b, l) in cfg.blocks.of_mut(f).iter_mut().zip(&block_live) {
                b.live_in = l.regs;
                b.flags_live_in = l.flags;
            }
            if entry != live_in[f.0 as usize] {
                live_in[f.0 as usize] = entry;
                next.extend_from_slice(cg.callers(f));
            }
        }
        next.sort_unstable();
        next.dedup();
        dirty = next;
    }
    for (i, f) in cfg.functions.iter_mut().enumerate() {
        f.live_in = live_in[i].regs;
        f.flags_live_in = live_in[i].flags;
        f.must_def = must_def[i].regs;
        f.flags_must_def = must_def[i].flags;
    }
}

/// One function's solution.
struct Solved {
    func: FuncId,
    must_def: Live,
    block_live: Vec<Live>,
}

/// Solve one strongly connected component whose callees outside it are final in `sums`.
fn solve_component(cfg: &Cfg, scc: &[FuncId], sums: &Summaries) -> Vec<Solved> {
    // Must-def needs nothing from callees; computed here, just before the same blocks and
    // edges are walked again, it finds them in cache.
    let must: Vec<Live> = scc.iter().map(|f| must_def_of(cfg, *f)).collect();
    let mut mine: Vec<Live> = vec![Live::NONE; scc.len()];
    let mut out: Vec<Vec<Live>> = vec![Vec::new(); scc.len()];
    loop {
        let mut changed = false;
        for (k, f) in scc.iter().enumerate() {
            let callee = |g: FuncId| match scc.iter().position(|m| *m == g) {
                Some(j) => (mine[j], must[j]),
                None => (sums.live_in[g.0 as usize], sums.must_def[g.0 as usize]),
            };
            let block_live = solve_function(cfg, *f, at_return(must[k]), &callee);
            let fun = cfg.function(*f);
            let entry = block_live[(fun.entry_block.0 - fun.blocks.start) as usize];
            if entry != mine[k] {
                mine[k] = entry;
                changed = true;
            }
            out[k] = block_live;
        }
        // A component of one function that does not call itself needs one pass.
        if !changed || (scc.len() == 1 && !calls_itself(cfg, scc[0])) {
            return scc
                .iter()
                .zip(must)
                .zip(out)
                .map(|((f, must_def), block_live)| Solved { func: *f, must_def, block_live })
                .collect();
        }
    }
}

fn calls_itself(cfg: &Cfg, f: FuncId) -> bool {
    cfg.blocks_of(f).iter().any(|b| cfg.edges_of(b).any(|e| e.target == EdgeTarget::Function(f)))
}

/// The call graph's strongly connected components (Tarjan, iterative), grouped in levels:
/// level 0 calls nothing outside itself, level k only components of lower levels.
fn levels(cg: &CallGraph, n: usize) -> Vec<Vec<Vec<FuncId>>> {
    const NONE: u32 = u32::MAX;
    let mut index = vec![NONE; n];
    let mut low = vec![0u32; n];
    let mut on_stack = vec![false; n];
    let mut comp_of = vec![NONE; n];
    let mut stack: Vec<u32> = Vec::new();
    let mut comps: Vec<Vec<FuncId>> = Vec::new();
    let mut level_of_comp: Vec<u32> = Vec::new();
    let mut next_index = 0u32;
    for root in 0..n as u32 {
        if index[root as usize] != NONE {
            continue;
        }
        // (node, position in its callee list)
        let mut frames: Vec<(u32, usize)> = vec![(root, 0)];
        index[root as usize] = next_index;
        low[root as usize] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root as usize] = true;
        while let Some(&mut (v, ref mut pos)) = frames.last_mut() {
            let callees = cg.callees(FuncId(v));
            if *pos < callees.len() {
                let w = callees[*pos].0;
                *pos += 1;
                if index[w as usize] == NONE {
                    index[w as usize] = next_index;
                    low[w as usize] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w as usize] = true;
                    frames.push((w, 0));
                } else if on_stack[w as usize] {
                    low[v as usize] = low[v as usize].min(index[w as usize]);
                }
                continue;
            }
            frames.pop();
            if let Some(&(parent, _)) = frames.last() {
                low[parent as usize] = low[parent as usize].min(low[v as usize]);
            }
            if low[v as usize] == index[v as usize] {
                let c = comps.len() as u32;
                let mut members = Vec::new();
                loop {
                    let w = stack.pop().expect("Tarjan stack holds the component");
                    on_stack[w as usize] = false;
                    comp_of[w as usize] = c;
                    members.push(FuncId(w));
                    if w == v {
                        break;
                    }
                }
                // Callees' components are complete already (Tarjan emits callees first).
                let level = members
                    .iter()
                    .flat_map(|m| cg.callees(*m))
                    .map(|g| comp_of[g.0 as usize])
                    .filter(|gc| *gc != c)
                    .map(|gc| level_of_comp[gc as usize] + 1)
                    .max()
                    .unwrap_or(0);
                level_of_comp.push(level);
                comps.push(members);
            }
        }
    }
    let depth = level_of_comp.iter().copied().max().map_or(0, |m| m as usize + 1);
    let mut out: Vec<Vec<Vec<FuncId>>> = vec![Vec::new(); depth];
    for (c, members) in comps.into_iter().enumerate() {
        out[level_of_comp[c] as usize].push(members);
    }
    out
}

/// Live-in of a known callee, as stored after [`solve`].
fn callee_live(cfg: &Cfg, f: FuncId) -> Live {
    let fun = cfg.function(f);
    Live { regs: fun.live_in, flags: fun.flags_live_in }
}

fn callee_must(cfg: &Cfg, f: FuncId) -> Live {
    let fun = cfg.function(f);
    Live { regs: fun.must_def, flags: fun.flags_must_def }
}

/// What is live right after the block's last instruction, given the live-in of blocks
/// (`block_live`, indexed by global block id through `local`) and of callees, and what is
/// live where the block's function returns (`at_ret`: [`at_return`] of its must-def, or a
/// boundary [`at_continuations`] chooses).
///
/// With `exact` (the summaries of [`at_continuations`]), `callee` gives a function's `(A,
/// ALL - P)`: what it reads whatever its returns lead to, and the complement of what it lets
/// through from there (see there), so a call is `A ∪ (after ∩ P)` and a direct tail call,
/// whose callee returns where this function would, `A ∪ (at_ret ∩ P)`. Otherwise a callee's
/// entry set already holds what its returns keep, and a tail call is that set alone.
fn live_out(
    cfg: &Cfg,
    b: &Block,
    at_ret: Live,
    exact: bool,
    block_live: &dyn Fn(u32) -> Live,
    callee: &dyn Fn(FuncId) -> (Live, Live),
) -> Live {
    let mut after = Live::NONE;
    for e in cfg.edges_of(b) {
        after = after.union(match (e.kind, e.target) {
            (EdgeKind::Call, _) => Live::NONE,
            (EdgeKind::Return, _) => at_ret,
            (EdgeKind::TailCall, EdgeTarget::Function(g)) if exact => {
                let (reads, kills) = callee(g);
                reads.union(at_ret.minus(kills))
            }
            (EdgeKind::TailCall, EdgeTarget::Function(g)) => callee(g).0,
            (_, EdgeTarget::Block(t)) => block_live(t.0),
            // A target that could not be decoded or resolved: assume the worst.
            _ => Live::ALL,
        });
    }
    match b.term {
        Terminator::Unanalysable => Live::ALL,
        // An unknown function takes over and returns to our caller. It follows the ABI and
        // may write any caller-saved register, so no caller can count on more than the ABI
        // keeps: the SysV set, not what this function alone leaves alone.
        Terminator::IndirectTailCall => after.union(UNKNOWN_CALLEE_READS).union(AT_RETURN),
        Terminator::Call | Terminator::IndirectCall => {
            let known = cfg.edges_of(b).find_map(|e| match (e.kind, e.target) {
                (EdgeKind::Call, EdgeTarget::Function(g)) => Some(g),
                _ => None,
            });
            match known {
                Some(g) => {
                    let (live_in, must) = callee(g);
                    live_in.union(after.minus(must))
                }
                None => UNKNOWN_CALLEE_READS.union(after.minus(UNKNOWN_CALLEE_KILLS)),
            }
        }
        _ => after,
    }
}

fn solve_function(
    cfg: &Cfg,
    f: FuncId,
    at_ret: Live,
    callee: &dyn Fn(FuncId) -> (Live, Live),
) -> Vec<Live> {
    let fun = cfg.function(f);
    let start = fun.blocks.start;
    let blocks = cfg.blocks_of(f);
    let mut live = vec![Live::NONE; blocks.len()];
    loop {
        let mut changed = false;
        // Whether some block read a block at or before itself, whose value may still change
        // in this pass. If none did (no loops: most functions), every block was computed from
        // final values and this one pass reached the fixpoint.
        let backward = std::cell::Cell::new(false);
        for i in (0..blocks.len()).rev() {
            let b = &blocks[i];
            let out = {
                let bl = |id: u32| {
                    // Edges stay inside the function; anything else is treated as unknown.
                    let k = id.checked_sub(start).filter(|k| (*k as usize) < live.len());
                    match k {
                        Some(k) => {
                            if k as usize <= i {
                                backward.set(true);
                            }
                            live[k as usize]
                        }
                        None => Live::ALL,
                    }
                };
                live_out(cfg, b, at_ret, false, &bl, callee)
            };
            let new = gen_of(b).union(out.minus(kill_of(b)));
            if new != live[i] {
                live[i] = new;
                changed = true;
            }
        }
        if !changed || !backward.get() {
            return live;
        }
    }
}

/// Block `b`'s live-in worked out again from its successors' stored sets, `depth` blocks
/// deep (through blocks of at most four edges), where an edge into another function's body (gcc's `.cold` part jumping back into
/// its function) reads that block's stored set: [`solve`] takes such an edge as reading
/// everything, since it solves one function at a time. Never more than the stored set.
///
/// Why it is sound: the stored sets `S` of a checked analysis solve the equations with
/// foreign edges read as everything (`S = F(S)`), and the equations that link the functions
/// (`F'`) read less (`F'(X) ⊆ F(X)`), so `S ⊇ F'(S)`: `S` holds the least solution of `F'`,
/// which is the liveness, and by monotonicity so does every `F'ᵏ(S)`.
pub fn live_in_linked(cfg: &Cfg, b: BlockId, depth: u32) -> Live {
    LinkedLook::default().live_in(cfg, b, depth)
}

/// [`live_in_linked`] for many blocks of one image, each block's answer at each depth worked
/// out once: the targets of a jump table mostly lead to the same few blocks (the JIT looks
/// from every target of every table it copies).
#[derive(Default)]
pub struct LinkedLook {
    memo: std::cell::RefCell<HashMap<(BlockId, u32), Live>>,
}

impl LinkedLook {
    /// What [`live_in_linked`] gives for block `b` looking `depth` blocks further.
    pub fn live_in(&self, cfg: &Cfg, b: BlockId, depth: u32) -> Live {
        if let Some(&l) = self.memo.borrow().get(&(b, depth)) {
            return l;
        }
        let blk = cfg.block(b);
        let stored = Live { regs: blk.live_in, flags: blk.flags_live_in };
        // (A block with many successors, a dispatch, is taken as stored: the look stays
        // cheap.)
        let live = if depth == 0 || cfg.edges_of(blk).len() > 4 {
            stored
        } else {
            let at_ret = at_return(callee_must(cfg, blk.func));
            let callee = |g: FuncId| (callee_live(cfg, g), callee_must(cfg, g));
            let next = |id: u32| self.live_in(cfg, BlockId(id), depth - 1);
            let out = live_out(cfg, blk, at_ret, false, &next, &callee);
            gen_of(blk).union(out.minus(kill_of(blk))).intersect(stored)
        };
        self.memo.borrow_mut().insert((b, depth), live);
        live
    }
}

/// [`solve_function`] with [`live_out`]'s `exact` for two boundaries at once, nothing and everything live
/// where `f` returns (what [`at_continuations`] needs of every function): one walk of the
/// blocks and edges per pass for both.
///
/// It iterates up from `from` (from nothing live where `from` has no set per block).
/// Starting from the solution the same equations had with smaller callee summaries is
/// sound: that solution is below the new least one and no greater than a pass over it, so
/// the passes climb to the least solution, in fewer steps than from nothing.
fn solve_pair(cfg: &Cfg, f: FuncId, callee: &dyn Fn(FuncId) -> (Live, Live), from: Sets) -> Sets {
    let fun = cfg.function(f);
    let start = fun.blocks.start;
    let blocks = cfg.blocks_of(f);
    let (mut none, mut all) = from;
    if none.len() != blocks.len() || all.len() != blocks.len() {
        none = vec![Live::NONE; blocks.len()];
        all = vec![Live::NONE; blocks.len()];
    }
    loop {
        let mut changed = false;
        let backward = std::cell::Cell::new(false);
        for i in (0..blocks.len()).rev() {
            let b = &blocks[i];
            let local = |id: u32| {
                let k = id.checked_sub(start).filter(|k| (*k as usize) < blocks.len());
                if k.is_some_and(|k| k as usize <= i) {
                    backward.set(true);
                }
                k.map(|k| k as usize)
            };
            let (n, a) = {
                // A block of another function (a jump into its body: gcc's `.cold` parts
                // jump back into their hot function after a call) is read with its stored
                // set when nothing is live at the returns: that set was solved with the SysV
                // set and more live there, so it holds what the block reads whatever its
                // returns lead to (taking everything there made every flag live where the
                // callee of such a cold part returns, and that callee's every `ret` framed:
                // python3.11's `PyLong_FromLong`). With everything live at the returns,
                // everything is still taken: its pass-through is not stored.
                let stored = |id: u32| match (id as usize) < cfg.blocks.len() {
                    true => {
                        let b = cfg.block(BlockId(id));
                        Live { regs: b.live_in, flags: b.flags_live_in }
                    }
                    false => Live::ALL,
                };
                let bn = |id: u32| local(id).map_or_else(|| stored(id), |k| none[k]);
                let ba = |id: u32| local(id).map_or(Live::ALL, |k| all[k]);
                (
                    live_out(cfg, b, Live::NONE, true, &bn, callee),
                    live_out(cfg, b, Live::ALL, true, &ba, callee),
                )
            };
            let n = gen_of(b).union(n.minus(kill_of(b)));
            let a = gen_of(b).union(a.minus(kill_of(b)));
            if n != none[i] || a != all[i] {
                none[i] = n;
                all[i] = a;
                changed = true;
            }
        }
        if !changed || !backward.get() {
            return (none, all);
        }
    }
}

/// Whether the sets stored for function `f` are a solution of its equations, given the sets
/// stored for the functions it calls (read as [`solve`] reads them): every block's live-in is
/// gen ∪ (live-out − kill), the function's live-in is its entry block's, and its must-def is
/// what [`must_def_of`] computes from its blocks. `Err` names the block (its index in the
/// function), or `None` for the function's own sets.
///
/// Why a local check is enough for safety (the cache's check of a function, see
/// `validate::Checker`): the live-in sets [`solve`] finds are the *least* solution of the
/// equations (it iterates up from the empty set), and by Knaster-Tarski any other assignment
/// that satisfies them, or only `X ⊇ F(X)`, is at least as large on every block that the
/// equations connect. So if every function a block's value depends on (its own function and,
/// transitively, the callees whose summaries it reads) passes this check, its stored live-in
/// holds every register the analysis would call live, and code that writes only the others
/// is as safe as with a fresh analysis. Must-def has no callee input and is recomputed.
pub(crate) fn check_function(cfg: &Cfg, f: FuncId) -> Result<(), Option<usize>> {
    let fun = cfg.function(f);
    let start = fun.blocks.start;
    let blocks = cfg.blocks_of(f);
    let stored = |b: &Block| Live { regs: b.live_in, flags: b.flags_live_in };
    // As `solve_function` reads them: blocks of `f` as stored, edges leaving it unknown.
    let bl = |id: u32| match id.checked_sub(start).map(|k| k as usize) {
        Some(k) if k < blocks.len() => stored(&blocks[k]),
        _ => Live::ALL,
    };
    let callee = |g: FuncId| (callee_live(cfg, g), callee_must(cfg, g));
    for (i, b) in blocks.iter().enumerate() {
        let out = live_out(cfg, b, at_return(callee_must(cfg, f)), false, &bl, &callee);
        if gen_of(b).union(out.minus(kill_of(b))) != stored(b) {
            return Err(Some(i));
        }
    }
    let entry = &blocks[(fun.entry_block.0 - start) as usize];
    if callee_live(cfg, f) != stored(entry) || callee_must(cfg, f) != must_def_of(cfg, f) {
        return Err(None);
    }
    Ok(())
}

/// Registers and flags written on every path from the entry to an exit, ignoring what calls
/// inside the function write (a safe under-approximation).
fn must_def_of(cfg: &Cfg, f: FuncId) -> Live {
    let fun = cfg.function(f);
    let start = fun.blocks.start;
    let blocks = cfg.blocks_of(f);
    let nb = blocks.len();
    let entry = (fun.entry_block.0 - start) as usize;
    // Predecessors of each block, in one array (`preds[pred_start[k]..pred_start[k + 1]]`):
    // a vector per block was millions of small allocations.
    let local_succs = |b: &Block| {
        cfg.edges_of(b).filter_map(move |e| match e.target {
            EdgeTarget::Block(t) => t.0.checked_sub(start).filter(|k| (*k as usize) < nb),
            _ => None,
        })
    };
    let mut pred_start = vec![0u32; nb + 1];
    for b in blocks {
        for k in local_succs(b) {
            pred_start[k as usize + 1] += 1;
        }
    }
    for k in 0..nb {
        pred_start[k + 1] += pred_start[k];
    }
    let mut preds = vec![0u32; pred_start[nb] as usize];
    let mut fill = pred_start.clone();
    for (i, b) in blocks.iter().enumerate() {
        for k in local_succs(b) {
            preds[fill[k as usize] as usize] = i as u32;
            fill[k as usize] += 1;
        }
    }
    let preds_of = |k: usize| &preds[pred_start[k] as usize..pred_start[k + 1] as usize];
    let mut out = vec![Live::ALL; nb];
    // With every predecessor before its block (no loops), one pass reaches the fixpoint.
    let forward = (0..nb).all(|k| preds_of(k).iter().all(|p| (*p as usize) < k));
    loop {
        let mut changed = false;
        for i in 0..nb {
            let mut inn = if i == entry { Live::NONE } else { Live::ALL };
            for p in preds_of(i) {
                inn = inn.intersect(out[*p as usize]);
            }
            if preds_of(i).is_empty() && i != entry {
                // Reached only through an edge we do not model (e.g. a table target of a
                // removed block): nothing is known to be written.
                inn = Live::NONE;
            }
            let new = inn.union(kill_of(&blocks[i]));
            if new != out[i] {
                out[i] = new;
                changed = true;
            }
        }
        if !changed || forward {
            break;
        }
    }
    let mut result: Option<Live> = None;
    for (i, b) in blocks.iter().enumerate() {
        let exit = match b.term {
            Terminator::Return | Terminator::TailCall | Terminator::Unanalysable => out[i],
            Terminator::IndirectTailCall => out[i].union(UNKNOWN_CALLEE_KILLS),
            Terminator::CondJump if cfg.edges_of(b).any(|e| e.kind == EdgeKind::TailCall) => out[i],
            _ => continue,
        };
        result = Some(result.map_or(exit, |r| r.intersect(exit)));
    }
    result.unwrap_or(Live::NONE)
}

/// A function's `(A, ALL - P)` for [`at_continuations`]: what it reads whatever its returns
/// lead to, and the complement of what it lets through from there.
type Summary = (Live, Live);
/// A function's block sets with nothing, and with everything, live where it returns.
type Sets = (Vec<Live>, Vec<Live>);

/// Per function, what is live where its returns may land: the SysV return set (a caller
/// outside the image, or through a pointer, assumes no more), what is live at the return
/// site of every direct call to it, and, for a function reached by a direct tail call or a
/// jump into its body, all that the jumping function's returns may land on. What may
/// overwrite registers just before a `ret` (the JIT's frameless return) asks this, together
/// with [`Cfg::returns_through_callers_slot`] (a `ret` that leaves through a slot it wrote
/// lands anywhere).
///
/// The block sets [`solve`] stores are too wide for this: a function's entry set keeps every
/// register its returns might keep for a caller (`-fipa-ra`), so every call passes nearly
/// everything through to the code before it. Here each function gets a summary instead,
/// callees first (components of the call graph, iterated where they recurse): solved with
/// nothing live at its returns it gives `A`, what it reads whatever its returns lead to,
/// and solved with everything live there `A ∪ P`, `P` what it lets through (liveness is a
/// union per register, so for a boundary `X` its set is `A ∪ (X ∩ P)`, at every block). A
/// call is then `A ∪ (after ∩ P)`. The same two solutions give each return site `s` of a
/// caller `C` its `A_s` and `P_s`, and, callers first, `cont(g) = SysV ∪ ⋃ (A_s ∪ (cont(C) ∩
/// P_s))` over the calls to `g`, iterated up from the SysV set until nothing changes.
pub fn at_continuations(cfg: &Cfg) -> Vec<Live> {
    let cg = CallGraph::build(cfg);
    lands(cfg, &summaries(cfg, &cg, true).1)
}

/// [`at_continuations`] with every function solved from nothing each time it is solved
/// again: the reference the tests hold the warm start to.
pub fn at_continuations_cold(cfg: &Cfg) -> Vec<Live> {
    let cg = CallGraph::build(cfg);
    lands(cfg, &summaries(cfg, &cg, false).1)
}

/// Per function, what [`at_continuations`] finds and the summary it rests on: what the JIT
/// keeps beside a module's cached analysis (a file of its own, written the first time the
/// JIT solves them), so that a later start checks them in one parallel pass
/// ([`check_return_facts`]) instead of solving them (python3.11: about 100 ms of one core,
/// on the way to its first translation). Not part of the analysis: only the JIT reads them,
/// and solving them for libLLVM-14 takes 0.4 s that every analysis would pay.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReturnFacts {
    /// What the function reads whatever its returns lead to (`A`).
    pub reads: Live,
    /// What it does not let through from where its returns lead (`ALL - P`).
    pub blocks: Live,
    /// What is live where its returns may land.
    pub lands: Live,
}

/// [`ReturnFacts`] of every function, solved; their `lands` are [`at_continuations`].
pub fn return_facts(cfg: &Cfg) -> Vec<ReturnFacts> {
    let cg = CallGraph::build(cfg);
    let (sums, solved) = summaries(cfg, &cg, true);
    let lands = lands(cfg, &solved);
    sums.into_iter()
        .zip(lands)
        .map(|((reads, blocks), lands)| ReturnFacts { reads, blocks, lands })
        .collect()
}

/// Whether `facts` (one per function of `cfg`, from outside: a file beside the cache) hold up,
/// and then what is live where each function's returns land (their `lands`); else the name
/// of a function whose facts do not.
///
/// One pass, every function on its own and in parallel: each function's two solutions with
/// its callees' given summaries, its own summary from them no greater than the given one,
/// and each given landing set holding what every call, tail call and the SysV set put there.
/// Why that is enough: the facts are the least solution of monotone equations, and any
/// assignment `S` with `F(S) ⊆ S` lies above the least one (Knaster-Tarski), so facts that
/// pass hold every register and flag the solved ones would; code that overwrites only what
/// they leave out is as safe as with facts solved here (the argument the cache's liveness
/// check rests on). Summaries order the other way in their second part: letting more through
/// is greater.
pub fn check_return_facts(cfg: &Cfg, facts: &[ReturnFacts]) -> Result<Vec<Live>, String> {
    let n = cfg.functions.len();
    if facts.len() != n {
        return Err(format!("{} facts for {n} functions", facts.len()));
    }
    let callee = |g: FuncId| (facts[g.0 as usize].reads, facts[g.0 as usize].blocks);
    let solved: Vec<Sets> = (0..n as u32)
        .into_par_iter()
        .map(|f| solve_pair(cfg, FuncId(f), &callee, Sets::default()))
        .collect();
    let name = |f: usize| cfg.functions[f].name.clone();
    for (f, (none, all)) in solved.iter().enumerate() {
        let fun = &cfg.functions[f];
        let e = (fun.entry_block.0 - fun.blocks.start) as usize;
        // (No entry set: reads and lets through everything, as `summaries` takes it.)
        let (a, p) = match (none.get(e), all.get(e)) {
            (Some(&a), Some(&p)) => (a, p),
            _ => (Live::ALL, Live::ALL),
        };
        // Reads no more than given, lets no more through than given.
        let r = facts[f];
        if !a.within(r.reads) || !p.within(Live::ALL.minus(r.blocks)) {
            return Err(name(f));
        }
    }
    let lands: Vec<Live> = facts.iter().map(|f| f.lands).collect();
    let (calls, tails) = landing_sites(cfg, &solved);
    for c in 0..n {
        if !AT_RETURN.within(lands[c]) {
            return Err(name(c));
        }
        let through = lands[c];
        let put = calls[c].iter().map(|&(g, a, p)| (g, a.union(through.intersect(p))));
        for (g, live) in put.chain(tails[c].iter().map(|&g| (g, through))) {
            if !live.within(lands[g.0 as usize]) {
                return Err(name(g.0 as usize));
            }
        }
    }
    Ok(lands)
}

/// Every function's summary `(A, ALL - P)` and its blocks' sets for both boundaries, solved
/// callees first (see [`at_continuations`]); with `warm` a member of a recursive component
/// solved again (a function it calls changed) starts from its last solution, which is below
/// the new one: the callees' summaries only grow as the component is solved (python3.11's
/// component of 1,342 functions: 117 ms to 73 ms).
fn summaries(cfg: &Cfg, cg: &CallGraph, warm: bool) -> (Vec<Summary>, Vec<Sets>) {
    let n = cfg.functions.len();
    // Per function: (A, ALL - P) as `live_out` takes a callee with `exact`, and its blocks'
    // sets for both boundaries.
    let mut sums: Vec<Summary> = vec![(Live::NONE, Live::ALL); n];
    let mut solved: Vec<Sets> = vec![(Vec::new(), Vec::new()); n];
    for level in levels(cg, n) {
        let results: Vec<Vec<(FuncId, Summary, Sets)>> = level
            .par_iter()
            .map(|scc| {
                let mut mine: Vec<(Live, Live)> = vec![(Live::NONE, Live::ALL); scc.len()];
                let mut out = vec![(Vec::new(), Vec::new()); scc.len()];
                // A worklist: a member is solved again only when a member it calls changed
                // (the components of a big interpreter hold hundreds of functions).
                let index: HashMap<FuncId, usize> =
                    scc.iter().enumerate().map(|(k, &f)| (f, k)).collect();
                let mut dirty: Vec<usize> = (0..scc.len()).collect();
                let mut queued = vec![true; scc.len()];
                while let Some(k) = dirty.pop() {
                    queued[k] = false;
                    let f = scc[k];
                    let callee = |g: FuncId| match index.get(&g) {
                        Some(&j) => mine[j],
                        None => sums[g.0 as usize],
                    };
                    let last = if warm { std::mem::take(&mut out[k]) } else { Sets::default() };
                    let (none, all) = solve_pair(cfg, f, &callee, last);
                    let fun = cfg.function(f);
                    let e = (fun.entry_block.0 - fun.blocks.start) as usize;
                    let sum = match (none.get(e), all.get(e)) {
                        (Some(&a), Some(&p)) => (a, Live::ALL.minus(p)),
                        _ => (Live::ALL, Live::NONE),
                    };
                    out[k] = (none, all);
                    if sum != mine[k] {
                        mine[k] = sum;
                        for &c in cg.callers(f) {
                            if let Some(&j) = index.get(&c) {
                                if !queued[j] {
                                    queued[j] = true;
                                    dirty.push(j);
                                }
                            }
                        }
                    }
                }
                scc.iter()
                    .zip(mine)
                    .zip(out)
                    .map(|((&f, sum), sets)| (f, sum, sets))
                    .collect::<Vec<_>>()
            })
            .collect();
        for (f, sum, sets) in results.into_iter().flatten() {
            sums[f.0 as usize] = sum;
            solved[f.0 as usize] = sets;
        }
    }
    (sums, solved)
}

/// Per function, its calls' return sites `(callee, A_s, P_s)`, and the functions it enters
/// by a direct tail call or a jump into their body, from its blocks' sets `solved`.
type Sites = (Vec<Vec<(FuncId, Live, Live)>>, Vec<Vec<FuncId>>);

fn landing_sites(cfg: &Cfg, solved: &[Sets]) -> Sites {
    let n = cfg.functions.len();
    // Per caller: its calls (callee, A_s, P_s) and its direct tail calls.
    let mut calls: Vec<Vec<(FuncId, Live, Live)>> = vec![Vec::new(); n];
    let mut tails: Vec<Vec<FuncId>> = vec![Vec::new(); n];
    for c in 0..n {
        let start = cfg.function(FuncId(c as u32)).blocks.start;
        let (none, all) = &solved[c];
        for b in cfg.blocks_of(FuncId(c as u32)) {
            let (mut g, mut after) = (None, None);
            for e in cfg.edges_of(b) {
                match (e.kind, e.target) {
                    (EdgeKind::Call, EdgeTarget::Function(t)) => g = Some(t),
                    (EdgeKind::TailCall, EdgeTarget::Function(t)) => tails[c].push(t),
                    // A jump into another function's body: its returns may be this one's.
                    (_, EdgeTarget::Block(t)) if cfg.block(t).func.0 as usize != c => {
                        tails[c].push(cfg.block(t).func)
                    }
                    (EdgeKind::FallThrough, EdgeTarget::Block(t)) => after = Some(t),
                    _ => {}
                }
            }
            if let (Some(g), Some(t), Terminator::Call) = (g, after, b.term) {
                let k = t.0.checked_sub(start).map(|k| k as usize);
                match k.and_then(|k| Some((*none.get(k)?, *all.get(k)?))) {
                    Some((a, p)) => calls[c].push((g, a, p)),
                    // A return site outside the caller: assume the worst.
                    None => calls[c].push((g, Live::ALL, Live::NONE)),
                }
            }
        }
    }
    (calls, tails)
}

/// What is live where each function's returns land, iterated up from the SysV set over the
/// landing sites of `solved` (see [`at_continuations`]).
fn lands(cfg: &Cfg, solved: &[Sets]) -> Vec<Live> {
    let n = cfg.functions.len();
    let (calls, tails) = landing_sites(cfg, solved);
    let mut cont = vec![AT_RETURN; n];
    loop {
        let mut changed = false;
        for c in 0..n {
            let through = cont[c];
            let lands = calls[c].iter().map(|&(g, a, p)| (g, a.union(through.intersect(p))));
            for (g, live) in lands.chain(tails[c].iter().map(|&g| (g, through))) {
                let u = cont[g.0 as usize].union(live);
                if u != cont[g.0 as usize] {
                    cont[g.0 as usize] = u;
                    changed = true;
                }
            }
        }
        if !changed {
            return cont;
        }
    }
}

/// Whether the block of `f` holding `addr` ends the frame: it returns or leaves by a tail call
/// (a conditional one included).
pub fn in_last_block(cfg: &Cfg, f: FuncId, addr: ImageAddr) -> bool {
    let Some(b) = cfg.block_containing(f, addr).map(|b| cfg.block(b)) else { return false };
    match b.term {
        Terminator::Return | Terminator::TailCall | Terminator::IndirectTailCall => true,
        Terminator::CondJump => cfg.edges_of(b).any(|e| e.kind == EdgeKind::TailCall),
        _ => false,
    }
}

/// What code placed just before the instruction at `addr` may not overwrite, where its block
/// ends `f`'s frame ([`in_last_block`]): what [`live_at`] finds there, and what is live where
/// `f`'s returns land (`lands`, `f`'s [`at_continuations`]; `None`: not known, so
/// everything). The set at a `ret` alone assumes callers that follow the SysV ABI, and code
/// written by hand may hand results back in any register: OpenSSL's `_aesni_ctr32_6x`
/// returns its advanced `rsi` and `rdi` to `aesni_gcm_encrypt`, and a call-trace record at
/// its `ret` that took `rsi` for scratch broke AES-GCM. `None` where `live_at` knows nothing.
/// Where a `ret` of `f` does not leave through the slot its caller pushed
/// ([`Cfg::returns_through_callers_slot`]: glibc's `swapcontext` loads the next context's
/// stack and registers, then `ret`s into it), its returns land anywhere: the caller passes
/// `None` (asked there, not here, so that it decodes `f` once for all its exits).
pub fn live_before_exit(
    cfg: &Cfg,
    mem: &dyn CodeMemory,
    f: FuncId,
    addr: ImageAddr,
    lands: Option<Live>,
) -> Option<Live> {
    let (before, _) = live_at(cfg, mem, f, addr)?;
    Some(before.union(lands.unwrap_or(Live::ALL)))
}

/// The registers a caller may read where `f` returns to it (`lands`, `f`'s
/// [`at_continuations`]) that `f`'s own block sets take for dead at its returns: ones `f`
/// writes on every path that the SysV ABI does not return (see [`at_return`]). Code written
/// by hand hands results back that way (OpenSSL's `_aesni_ctr32_ghash_6x` and
/// `_aesni_ctr32_6x` return their advanced `rsi` and `rdi` to `aesni_gcm_encrypt`): after its
/// last write such a register is a result on its way back, whatever the block sets say, so
/// code placed anywhere in `f` keeps these too. Mostly they are no result at all but a
/// caller's reads taken wide (an unknown callee later on reads every argument register):
/// 17 % of libc's functions get some, which costs code placed in them a scratch register
/// now and then, never a wrong result.
pub fn beyond_abi_returns(cfg: &Cfg, f: FuncId, lands: &Live) -> RegSet {
    lands.regs.minus(at_return(callee_must(cfg, f)).regs)
}

/// Liveness just before and just after the instruction at `addr` of function `f`, computed on
/// demand by re-decoding its block backwards from the block's live-out.
pub fn live_at(
    cfg: &Cfg,
    mem: &dyn CodeMemory,
    f: FuncId,
    addr: ImageAddr,
) -> Option<(Live, Live)> {
    let bid = cfg.block_containing(f, addr)?;
    let b = cfg.block(bid);
    let bl = |id: u32| {
        let blk = cfg.block(BlockId(id));
        Live { regs: blk.live_in, flags: blk.flags_live_in }
    };
    let callee = |g: FuncId| (callee_live(cfg, g), callee_must(cfg, g));
    let mut live = live_out(cfg, b, at_return(callee_must(cfg, f)), false, &bl, &callee);
    let (base, bytes) = mem.code_region(b.start)?;
    let mut sc = Scanner::new(bytes, base);
    let mut facts = Vec::with_capacity(b.insns as usize);
    let mut a = b.start;
    while a < b.end() {
        let d = sc.decode_facts(a)?;
        a = d.next_addr();
        facts.push(d);
    }
    for d in facts.iter().rev() {
        let after = live;
        live = Live {
            regs: d.facts.reads.union(live.regs.minus(d.facts.kills)),
            flags: d.facts.flags_read.union(live.flags.minus(d.facts.flags_killed)),
        };
        if d.addr() == addr {
            return Some((live, after));
        }
    }
    None
}
