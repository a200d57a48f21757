//! Register and flag liveness (KernInst §3.2): live-in sets at every block entry, solved
//! interprocedurally where callees are known, and per instruction on demand.
//!
//! Assumptions, written down because safety depends on them:
//! - At a `ret` the caller may still need the return registers, the callee-saved registers and
//!   `rsp` (SysV); flags are dead across calls and returns.
//! - A call to a known function reads what the callee's entry has live and kills only what
//!   the callee writes on every path to its exits (its `must_def`), so no ABI is assumed.
//! - A call to an unknown function (indirect, or through a PLT/GOT slot) reads the SysV
//!   argument registers and clobbers the caller-saved ones and all flags.
//! - An unanalysable indirect jump makes every register and flag live.

use crate::callgraph::CallGraph;
use crate::cfg::{Block, Cfg, EdgeKind, EdgeTarget, FuncId, Terminator};
use crate::memory::CodeMemory;
use kerf_arch::x86_64::{FlagSet, RegSet, Scanner};
use kerf_arch::ImageAddr;
use rayon::prelude::*;

/// Registers and flags, the unit of every liveness fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
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
}

const AT_RETURN: Live = Live { regs: RegSet::SYSV_LIVE_AT_RETURN, flags: FlagSet::EMPTY };
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

/// Solve liveness for the whole CFG, storing live-in sets in blocks and functions. Runs in
/// rounds: each round re-solves, in parallel, the functions whose callees changed.
pub fn solve(cfg: &mut Cfg, cg: &CallGraph) {
    let n = cfg.functions.len();
    let must_def: Vec<Live> =
        (0..n).into_par_iter().map(|f| must_def_of(cfg, FuncId(f as u32))).collect();
    let mut sums = Summaries { live_in: vec![Live::NONE; n], must_def };
    let mut dirty: Vec<FuncId> = (0..n as u32).map(FuncId).collect();
    let mut mark = vec![false; n];
    while !dirty.is_empty() {
        let results: Vec<(FuncId, Vec<Live>)> =
            dirty.par_iter().map(|f| (*f, solve_function(cfg, *f, &sums))).collect();
        let mut next = Vec::new();
        for (f, block_live) in results {
            let fun = &cfg.functions[f.0 as usize];
            let entry = block_live[(fun.entry_block.0 - fun.blocks.start) as usize];
            let start = fun.blocks.start as usize;
            for (i, l) in block_live.iter().enumerate() {
                let b = &mut cfg.blocks[start + i];
                b.live_in = l.regs;
                b.flags_live_in = l.flags;
            }
            if entry != sums.live_in[f.0 as usize] {
                sums.live_in[f.0 as usize] = entry;
                for c in cg.callers(f) {
                    if !mark[c.0 as usize] {
                        mark[c.0 as usize] = true;
                        next.push(*c);
                    }
                }
            }
        }
        for c in &next {
            mark[c.0 as usize] = false;
        }
        dirty = next;
    }
    for (i, f) in cfg.functions.iter_mut().enumerate() {
        f.live_in = sums.live_in[i].regs;
        f.flags_live_in = sums.live_in[i].flags;
        f.must_def = sums.must_def[i].regs;
        f.flags_must_def = sums.must_def[i].flags;
    }
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
/// (`block_live`, indexed by global block id through `local`) and of callees.
fn live_out(
    cfg: &Cfg,
    b: &Block,
    block_live: &dyn Fn(u32) -> Live,
    callee: &dyn Fn(FuncId) -> (Live, Live),
) -> Live {
    let mut after = Live::NONE;
    for e in cfg.edges_of(b) {
        after = after.union(match (e.kind, e.target) {
            (EdgeKind::Call, _) => Live::NONE,
            (EdgeKind::Return, _) => AT_RETURN,
            (EdgeKind::TailCall, EdgeTarget::Function(g)) => callee(g).0,
            (_, EdgeTarget::Block(t)) => block_live(t.0),
            // A target that could not be decoded or resolved: assume the worst.
            _ => Live::ALL,
        });
    }
    match b.term {
        Terminator::Unanalysable => Live::ALL,
        // An unknown function takes over and returns to our caller.
        Terminator::IndirectTailCall => after.union(UNKNOWN_CALLEE_READS).union(AT_RETURN),
        Terminator::Call | Terminator::IndirectCall => {
            let known = cfg.edges_of(b).iter().find_map(|e| match (e.kind, e.target) {
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

fn solve_function(cfg: &Cfg, f: FuncId, sums: &Summaries) -> Vec<Live> {
    let fun = cfg.function(f);
    let start = fun.blocks.start;
    let blocks = cfg.blocks_of(f);
    let mut live = vec![Live::NONE; blocks.len()];
    let callee = |g: FuncId| (sums.live_in[g.0 as usize], sums.must_def[g.0 as usize]);
    loop {
        let mut changed = false;
        for i in (0..blocks.len()).rev() {
            let b = &blocks[i];
            let out = {
                let bl = |id: u32| {
                    // Edges stay inside the function; anything else is treated as unknown.
                    id.checked_sub(start)
                        .and_then(|k| live.get(k as usize).copied())
                        .unwrap_or(Live::ALL)
                };
                live_out(cfg, b, &bl, &callee)
            };
            let new = gen_of(b).union(out.minus(kill_of(b)));
            if new != live[i] {
                live[i] = new;
                changed = true;
            }
        }
        if !changed {
            return live;
        }
    }
}

/// Registers and flags written on every path from the entry to an exit, ignoring what calls
/// inside the function write (a safe under-approximation).
fn must_def_of(cfg: &Cfg, f: FuncId) -> Live {
    let fun = cfg.function(f);
    let start = fun.blocks.start;
    let blocks = cfg.blocks_of(f);
    let nb = blocks.len();
    let entry = (fun.entry_block.0 - start) as usize;
    let mut preds: Vec<Vec<usize>> = vec![Vec::new(); nb];
    for (i, b) in blocks.iter().enumerate() {
        for e in cfg.edges_of(b) {
            if let EdgeTarget::Block(t) = e.target {
                if let Some(k) = t.0.checked_sub(start).filter(|k| (*k as usize) < nb) {
                    preds[k as usize].push(i);
                }
            }
        }
    }
    let mut out = vec![Live::ALL; nb];
    loop {
        let mut changed = false;
        for i in 0..nb {
            let mut inn = if i == entry { Live::NONE } else { Live::ALL };
            for p in &preds[i] {
                inn = inn.intersect(out[*p]);
            }
            if preds[i].is_empty() && i != entry {
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
        if !changed {
            break;
        }
    }
    let mut result: Option<Live> = None;
    for (i, b) in blocks.iter().enumerate() {
        let exit = match b.term {
            Terminator::Return | Terminator::TailCall | Terminator::Unanalysable => out[i],
            Terminator::IndirectTailCall => out[i].union(UNKNOWN_CALLEE_KILLS),
            Terminator::CondJump
                if cfg.edges_of(b).iter().any(|e| e.kind == EdgeKind::TailCall) =>
            {
                out[i]
            }
            _ => continue,
        };
        result = Some(result.map_or(exit, |r| r.intersect(exit)));
    }
    result.unwrap_or(Live::NONE)
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
        let blk = &cfg.blocks[id as usize];
        Live { regs: blk.live_in, flags: blk.flags_live_in }
    };
    let callee = |g: FuncId| (callee_live(cfg, g), callee_must(cfg, g));
    let mut live = live_out(cfg, b, &bl, &callee);
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
