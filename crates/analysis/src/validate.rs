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
//! - each block's registers read and written agree with its instructions, and the padding
//!   (springboard space) is recomputed from the functions and the bytes;
//! - the call graph and liveness are solved again from the checked CFG and must equal the
//!   stored ones (generated code writes only registers liveness calls dead).
//!
//! Not re-derived: which functions exist and the classification of indirect jumps (a table,
//! a tail call, unanalysable). Those come from the traversal itself; the cache file's
//! checksum and its digest of the image's bytes (session's `cache` module) vouch for them.

use crate::callgraph::CallGraph;
use crate::cfg::{Block, EdgeKind, EdgeTarget, FuncId, TableFormat, TargetTag, Terminator};
use crate::image::Image;
use crate::memory::CodeMemory;
use crate::program::{springboard_padding, Analysis};
use kerf_arch::x86_64::{Flow, Scanner};
use kerf_arch::ImageAddr;
use rayon::prelude::*;

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
    /// Live registers or the call graph other than those solved from the CFG.
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

/// Check `a` against `image` (see the module documentation). The call graph is rebuilt from
/// the checked CFG in place.
pub fn validate(a: &mut Analysis, image: &Image<'_>) -> Result<(), Invalid> {
    check_structure(a)?;
    let cfg = &a.cfg;
    (0..cfg.functions.len())
        .into_par_iter()
        .try_for_each(|f| check_function(a, FuncId(f as u32), image))?;
    for t in &cfg.jump_tables {
        check_table(t, image)?;
    }
    check_no_splice(cfg, image)?;
    if springboard_padding(cfg, image) != cfg.padding {
        return Err(Invalid::Padding);
    }
    a.call_graph = CallGraph::build(&a.cfg);
    check_liveness(a)
}

/// Code never to be spliced (signal trampolines, unwind entries inside other code) is what
/// keeps kerf out of glibc's `__restore_rt`: every signal-frame unwind entry must be listed,
/// and every other entry in the code must start a function or be listed.
fn check_no_splice(cfg: &crate::cfg::Cfg, image: &Image<'_>) -> Result<(), Invalid> {
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
    for (i, f) in cfg.functions.iter().enumerate() {
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
    }
    Ok(())
}

/// Re-decode every block of `f` and check its boundaries, its end, its register facts and
/// its edges inside the function against where its last instruction can go.
fn check_function(a: &Analysis, f: FuncId, mem: &dyn CodeMemory) -> Result<(), Invalid> {
    let cfg = &a.cfg;
    let fun = cfg.function(f);
    let blocks = cfg.blocks_of(f);
    let bad = |b: &Block, detail: String| Invalid::Block {
        function: fun.name.clone(),
        addr: b.start.0,
        detail,
    };
    let is_start = |t: u64| blocks.binary_search_by_key(&t, |b| b.start.0).is_ok();
    let (base, bytes) = mem
        .code_region(fun.entry)
        .ok_or_else(|| bad(&blocks[0], "not in executable code".into()))?;
    let mut sc = Scanner::new(bytes, base);
    // A direct branch into the function's extent goes to one of its blocks; another
    // function's entry, or bytes that do not decode (no block can be there), are the
    // exceptions analysis makes too.
    let lands_well = |sc: &mut Scanner, t: u64| {
        !fun.extent.contains(&t)
            || is_start(t)
            || cfg.function_at(ImageAddr(t)).is_some()
            || sc.decode(ImageAddr(t)).is_none()
    };
    let returns = |c: ImageAddr| cfg.function_at(c).is_none_or(|g| !cfg.function(g).noreturn);
    for (k, b) in blocks.iter().enumerate() {
        let mut check = Block { start: b.start, ..Block::default() };
        let mut at = b.start.0;
        let mut last = None;
        for n in 0..b.insns {
            let d = sc
                .decode_facts(ImageAddr(at))
                .ok_or_else(|| bad(b, format!("no instruction decodes at {at:#x}")))?;
            let f = &d.facts;
            check.add_insn(f.reads, f.kills, f.flags_read, f.flags_killed);
            at = d.insn.next_ip();
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
        // Where edges inside the function may go, and the ones that must be there.
        let mut may: Vec<(EdgeKind, u64)> = Vec::new();
        let consistent = match (b.term, last.facts.flow) {
            (Terminator::FallThrough, Flow::Next) => {
                may.push((EdgeKind::FallThrough, next));
                is_start(next)
            }
            // Off the end of the function's range into the next one (see `build`).
            (Terminator::TailCall, Flow::Next) => true,
            (Terminator::Call, Flow::Call(c)) if returns(c) => {
                may.push((EdgeKind::FallThrough, next));
                true
            }
            (Terminator::Call, Flow::Call(_)) => true,
            (Terminator::IndirectCall, Flow::IndirectCall) => {
                may.push((EdgeKind::FallThrough, next));
                true
            }
            (Terminator::CondJump, Flow::CondJump(t)) => {
                may.extend([(EdgeKind::Branch, t.0), (EdgeKind::FallThrough, next)]);
                lands_well(&mut sc, t.0)
            }
            (Terminator::Jump, Flow::Jump(t)) => {
                may.push((EdgeKind::Jump, t.0));
                lands_well(&mut sc, t.0)
            }
            (Terminator::TailCall, Flow::Jump(t)) => lands_well(&mut sc, t.0),
            (Terminator::JumpTable(t), Flow::IndirectJump) => {
                let table = &cfg.jump_tables[t.0 as usize];
                may.extend(table.targets.iter().map(|t| (EdgeKind::Table, t.0)));
                table.jump.0 == last.insn.ip()
                    && table.targets.iter().all(|t| lands_well(&mut sc, t.0))
            }
            (Terminator::IndirectTailCall | Terminator::Unanalysable, Flow::IndirectJump) => true,
            (Terminator::Return, Flow::Return) | (Terminator::Stop, Flow::Stop) => true,
            _ => false,
        };
        if !consistent {
            let flow = last.facts.flow.name();
            return Err(bad(b, format!("ends in a {flow} but is a {}", b.term.name())));
        }
        // Liveness flows along these edges: none may be missing or lead elsewhere.
        let local: Vec<(EdgeKind, u64)> = cfg
            .edges_of(b)
            .filter_map(|e| match (e.kind, e.target) {
                (
                    EdgeKind::FallThrough | EdgeKind::Branch | EdgeKind::Jump | EdgeKind::Table,
                    EdgeTarget::Block(t),
                ) if fun.blocks.contains(&t.0) => {
                    Some((e.kind, blocks[(t.0 - fun.blocks.start) as usize].start.0))
                }
                _ => None,
            })
            .collect();
        if let Some(e) = local.iter().find(|e| !may.contains(e)) {
            return Err(bad(b, format!("a {} edge to {:#x} it cannot take", e.0.name(), e.1)));
        }
        // (A branch to another function's entry is a tail call, even where a block of this
        // function starts there too: analysis seeds blocks at entries inside its range.)
        let required =
            |t: u64| is_start(t) && (t == fun.entry.0 || cfg.function_at(ImageAddr(t)).is_none());
        // Nor is there a fall-through edge from a block another block starts inside (glibc
        // branches over the `lock` prefix of `lock cmpxchg`): analysis cuts it there.
        let overlapped = blocks.get(k + 1).is_some_and(|n| n.start < b.end());
        let required =
            |e: &(EdgeKind, u64)| required(e.1) && !(e.0 == EdgeKind::FallThrough && overlapped);
        if let Some(e) = may.iter().find(|e| required(e) && !local.contains(e)) {
            return Err(bad(b, format!("its {} edge to {:#x} is missing", e.0.name(), e.1)));
        }
    }
    Ok(())
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

/// Solve liveness again from the checked CFG, in place (a rejected analysis is dropped); it
/// must equal what was stored.
fn check_liveness(a: &mut Analysis) -> Result<(), Invalid> {
    let cfg = &mut a.cfg;
    let of_fn =
        |x: &crate::cfg::Function| (x.live_in, x.flags_live_in, x.must_def, x.flags_must_def);
    let stored_fns: Vec<_> = cfg.functions.iter().map(of_fn).collect();
    let stored_blocks: Vec<_> = cfg.blocks.iter().map(|b| (b.live_in, b.flags_live_in)).collect();
    crate::liveness::solve(cfg, &a.call_graph);
    let blocks_differ =
        cfg.blocks.iter().zip(&stored_blocks).position(|(b, s)| (b.live_in, b.flags_live_in) != *s);
    let fns_differ = cfg.functions.iter().zip(&stored_fns).position(|(f, s)| of_fn(f) != *s);
    let f = match (fns_differ, blocks_differ) {
        (Some(f), _) => f,
        (None, Some(b)) => cfg.blocks[crate::cfg::BlockId(b as u32)].func.0 as usize,
        (None, None) => return Ok(()),
    };
    Err(Invalid::Liveness { function: cfg.functions[f].name.clone() })
}
