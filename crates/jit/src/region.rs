//! Which functions a JIT translates ahead of execution: the roots, everything their direct
//! calls and tail calls reach, and the targets of calls and jumps through a memory slot whose
//! value kerf can read now (PLT stubs' GOT slots, `call [rip+X]`: the predicted target, which
//! the lookup table then finds), within a budget of functions. Optionally the whole of every
//! module, so that function pointers and virtual calls (targets no static walk
//! sees) find a translation too: the default, since a thread that leaves the cache for code
//! with no translation does not come back before it returns past the root.

use crate::translate::Module;
use iced_x86::{Decoder, DecoderOptions, Instruction, OpKind, Register};
use kerf_analysis::cfg::{EdgeKind, EdgeTarget, FuncId, Terminator};
use kerf_arch::ImageAddr;
use std::collections::{HashMap, HashSet, VecDeque};

/// The functions to translate, per module.
#[derive(Clone, Debug, Default)]
pub struct Region {
    pub funcs: Vec<Vec<FuncId>>,
    /// The functions the walk reached (the rest of `funcs` came with their whole module): a
    /// call from outside them to a root returns to the original code.
    pub reached: Vec<Vec<FuncId>>,
    /// Indirect transfers whose slot named a function now (followed), and those with no
    /// target known before they run.
    pub predicted: usize,
    pub unknown: usize,
    /// The fixed slots the walk read that named a function's entry: slot address -> its
    /// value then (a jump through one is translated to go straight to that function's
    /// translation while the slot still holds it, see `seq::slot_guard`).
    pub slots: HashMap<u64, u64>,
    /// The budget stopped the walk; and the functions it had found but not reached then (a
    /// walk from them goes on where this one stopped).
    pub capped: bool,
    pub rest: Vec<(usize, FuncId)>,
}

impl Region {
    pub fn len(&self) -> usize {
        self.funcs.iter().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The function of module `m` whose code holds original address `a` (its extent).
pub fn function_containing(m: &Module<'_>, a: u64) -> Option<FuncId> {
    m.cfg.function_holding(ImageAddr(a.wrapping_sub(m.bias)))
}

/// The function of any module whose entry is original address `a`.
pub fn function_at(mods: &[Module<'_>], a: u64) -> Option<(usize, FuncId)> {
    mods.iter().enumerate().find_map(|(k, m)| {
        let ia = ImageAddr(a.wrapping_sub(m.bias));
        let f = m.cfg.function_at(ia)?;
        (m.cfg.function(f).entry == ia).then_some((k, f))
    })
}

/// The last instruction of a block, decoded at its original address.
fn last_insn(m: &Module<'_>, start: ImageAddr, len: u32) -> Option<Instruction> {
    let (base, bytes) = m.mem.code_region(start)?;
    let off = (start.0 - base.0) as usize;
    let end = (off + len as usize).min(bytes.len());
    let mut d = Decoder::with_ip(64, bytes.get(off..end)?, m.runtime(start), DecoderOptions::NONE);
    let mut last = None;
    while d.can_decode() {
        last = Some(d.decode());
    }
    last
}

/// The memory slot an indirect transfer reads its target from, when it is one fixed address.
pub fn fixed_slot(i: &Instruction) -> Option<u64> {
    if i.op0_kind() != OpKind::Memory || i.memory_index() != Register::None {
        return None;
    }
    match i.memory_base() {
        Register::RIP | Register::None => Some(i.memory_displacement64()),
        _ => None,
    }
}

/// Walk from `roots` (module index, function) over direct calls and tail calls, and through
/// fixed slots read with `slot` (original address -> its 8-byte value now), up to `budget`
/// functions, never into a function `skip` names (one already translated). With `whole`,
/// every function of every module is added after.
pub fn closure(
    mods: &[Module<'_>],
    roots: &[(usize, FuncId)],
    slot: &dyn Fn(u64) -> Option<u64>,
    budget: usize,
    whole: bool,
    skip: &dyn Fn(usize, FuncId) -> bool,
) -> Region {
    let mut seen: HashSet<(usize, FuncId)> = HashSet::new();
    let mut work: VecDeque<(usize, FuncId)> = VecDeque::new();
    let mut r = Region { funcs: vec![Vec::new(); mods.len()], ..Region::default() };
    for &root in roots {
        if seen.insert(root) {
            work.push_back(root);
        }
    }
    while let Some((k, f)) = work.pop_front() {
        if r.len() >= budget {
            r.capped = true;
            r.rest = std::iter::once((k, f)).chain(work).collect();
            break;
        }
        r.funcs[k].push(f);
        let m = &mods[k];
        let mut next = Vec::new();
        for b in m.cfg.blocks_of(f) {
            for edge in m.cfg.edges_of(b) {
                if matches!(edge.kind, EdgeKind::Call | EdgeKind::TailCall) {
                    if let EdgeTarget::Function(g) = edge.target {
                        next.push((k, g));
                    }
                }
            }
            let indirect = matches!(
                b.term,
                Terminator::IndirectCall | Terminator::IndirectTailCall | Terminator::Unanalysable
            );
            if indirect {
                let at = last_insn(m, b.start, b.len).and_then(|i| fixed_slot(&i));
                let value = at.and_then(slot);
                match (at, value, value.and_then(|v| function_at(mods, v))) {
                    (Some(at), Some(v), Some(t)) => {
                        r.predicted += 1;
                        r.slots.insert(at, v);
                        next.push(t);
                    }
                    _ => r.unknown += 1,
                }
            }
        }
        for n in next {
            if !skip(n.0, n.1) && seen.insert(n) {
                work.push_back(n);
            }
        }
    }
    r.reached = r.funcs.clone();
    for v in &mut r.reached {
        v.sort();
    }
    if whole {
        // Every module, reached or not: a pointer may lead anywhere (a destructor of a library
        // the walk never saw runs at exit, called by the loader through a pointer).
        for (k, m) in mods.iter().enumerate() {
            let have: HashSet<FuncId> = r.funcs[k].iter().copied().collect();
            let more = (0..m.cfg.functions.len() as u32).map(FuncId).filter(|f| !have.contains(f));
            r.funcs[k].extend(more);
        }
    }
    for v in &mut r.funcs {
        v.sort();
    }
    r
}
