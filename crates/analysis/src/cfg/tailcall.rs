//! Indirect jumps that are tail calls. A function that ends in `jmp *0x80(%rax)` (sqlite's
//! mutex methods, CPython's allocator hooks, redis's siphash) leaves for another function's
//! entry; counted as an unanalysable jump, it cost its whole function the jump splice.
//!
//! An indirect jump is a tail call when both hold:
//! 1. The stack pointer is back at its entry value on every path to it: whatever the function
//!    pushed or allocated is gone (callee-saved registers popped, no locals), so the jump
//!    leaves nothing of this function's frame behind, as a call-and-return would not.
//! 2. Its target is a function pointer on every path to the jump: loaded from memory without
//!    an index (a field of a struct or of a method table, a global), received from the caller
//!    in an argument register, or returned by a call.
//!    A target computed from an index (a jump table, a computed goto's label array, `table +
//!    entry`) or a code address the function makes itself (`lea`) may lie inside the function,
//!    and so may one that went through a stack slot (a label kept in a local) or a callee-saved
//!    register never written (the caller's state): those stay unanalysable. So does every jump in a function whose blocks are not all reached from its
//!    entry with a known stack pointer.
//!
//! A frameless function's switch or computed goto passes the first test; the second keeps it
//! unanalysable (tests/fixtures/tailcall.c's `jump_through_register`, computed_goto.c).

use iced_x86::{Code, Instruction, Mnemonic, OpKind, Register};
use kerf_arch::x86_64::{Gpr, RegSet};

/// One function's blocks as the classifier sees them.
pub(crate) struct FnView<'a> {
    /// Each block's instructions in order, with the registers each may write.
    pub blocks: Vec<Vec<(&'a Instruction, RegSet)>>,
    /// Local successors of each block.
    pub succs: Vec<Vec<usize>>,
    /// Blocks entered from outside the function's own edges other than at its entry (other
    /// functions jumping in, code found only by gap traversal): the stack pointer there is
    /// unknown.
    pub foreign: Vec<usize>,
    pub entry: usize,
}

/// The stack pointer and frame pointer, in bytes relative to the stack pointer at entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    rsp: Option<i64>,
    rbp: Option<i64>,
}

const UNKNOWN: Frame = Frame { rsp: None, rbp: None };

fn merge(a: Option<Frame>, b: Frame) -> Frame {
    match a {
        None => b,
        Some(a) => Frame {
            rsp: if a.rsp == b.rsp { a.rsp } else { None },
            rbp: if a.rbp == b.rbp { a.rbp } else { None },
        },
    }
}

fn imm(i: &Instruction) -> Option<i64> {
    match i.op1_kind() {
        OpKind::Immediate8to64 | OpKind::Immediate32to64 | OpKind::Immediate32 => {
            Some(i.immediate(1) as i64)
        }
        OpKind::Immediate8 => Some(i.immediate(1) as i8 as i64),
        _ => None,
    }
}

fn reg0(i: &Instruction) -> Register {
    if i.op0_kind() == OpKind::Register {
        i.op0_register()
    } else {
        Register::None
    }
}

fn reg1(i: &Instruction) -> Register {
    if i.op_count() > 1 && i.op1_kind() == OpKind::Register {
        i.op1_register()
    } else {
        Register::None
    }
}

/// `[base + disp]` of a `lea`'s source, with no index, as (base, disp).
fn lea_src(i: &Instruction) -> Option<(Register, i64)> {
    (i.op1_kind() == OpKind::Memory && i.memory_index() == Register::None)
        .then(|| (i.memory_base(), i.memory_displacement64() as i64))
}

/// The frame after `i`.
fn step(f: Frame, i: &Instruction, writes: RegSet) -> Frame {
    let add = |v: Option<i64>, d: i64| v.map(|v| v + d);
    let (d0, s1) = (reg0(i), reg1(i));
    let mut out = f;
    match (i.mnemonic(), i.code()) {
        (Mnemonic::Push, _) | (Mnemonic::Pushfq, _) => out.rsp = add(f.rsp, -8),
        (Mnemonic::Pop, _) | (Mnemonic::Popfq, _) => {
            out.rsp = add(f.rsp, 8);
            if d0 == Register::RBP {
                out.rbp = None;
            }
            if d0 == Register::RSP {
                out.rsp = None;
            }
        }
        // A call's callee pops its own return address and keeps rbp (callee-saved).
        (Mnemonic::Call, _) => {}
        (Mnemonic::Sub, _) if d0 == Register::RSP => out.rsp = imm(i).and_then(|v| add(f.rsp, -v)),
        (Mnemonic::Add, _) if d0 == Register::RSP => out.rsp = imm(i).and_then(|v| add(f.rsp, v)),
        (Mnemonic::Lea, _) if d0 == Register::RSP || d0 == Register::RBP => {
            let v = match lea_src(i) {
                Some((Register::RSP, d)) => add(f.rsp, d),
                Some((Register::RBP, d)) => add(f.rbp, d),
                _ => None,
            };
            if d0 == Register::RSP {
                out.rsp = v;
            } else {
                out.rbp = v;
            }
        }
        (_, Code::Mov_r64_rm64 | Code::Mov_rm64_r64)
            if d0 == Register::RSP && s1 == Register::RBP =>
        {
            out.rsp = f.rbp
        }
        (_, Code::Mov_r64_rm64 | Code::Mov_rm64_r64)
            if d0 == Register::RBP && s1 == Register::RSP =>
        {
            out.rbp = f.rsp
        }
        (Mnemonic::Leave, _) => {
            out.rsp = add(f.rbp, 8);
            out.rbp = None;
        }
        _ => {
            if writes.contains(Gpr::Rsp) {
                out.rsp = None;
            }
            if writes.contains(Gpr::Rbp) {
                out.rbp = None;
            }
        }
    }
    out
}

/// The frame at the start of each block (`None`: never reached from the entry).
fn frames(view: &FnView<'_>) -> Vec<Option<Frame>> {
    frames_from(view, &[(view.entry, 0)])
}

/// [`frames`] entered at each of `seeds` (a block, and its stack pointer: where two disagree
/// it is unknown) instead of at the entry.
fn frames_from(view: &FnView<'_>, seeds: &[(usize, i64)]) -> Vec<Option<Frame>> {
    let n = view.blocks.len();
    let mut at: Vec<Option<Frame>> = vec![None; n];
    let mut work: Vec<usize> = Vec::new();
    for &(b, rsp) in seeds {
        at[b] = Some(merge(at[b], Frame { rsp: Some(rsp), rbp: None }));
        work.push(b);
    }
    for &b in &view.foreign {
        at[b] = Some(UNKNOWN);
        work.push(b);
    }
    // Every block without a predecessor but the entry is entered from elsewhere.
    let mut has_pred = vec![false; n];
    for s in view.succs.iter().flatten() {
        has_pred[*s] = true;
    }
    for b in 0..n {
        if !has_pred[b] && at[b].is_none() {
            at[b] = Some(UNKNOWN);
            work.push(b);
        }
    }
    // A block's frame can only go from unreached to known to unknown: this ends.
    while let Some(b) = work.pop() {
        let Some(mut f) = at[b] else { continue };
        for (i, w) in &view.blocks[b] {
            f = step(f, i, *w);
        }
        for &s in &view.succs[b] {
            let m = merge(at[s], f);
            if at[s] != Some(m) {
                at[s] = Some(m);
                work.push(s);
            }
        }
    }
    at
}

/// Where a value came from, as far as a tail call cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Origin {
    /// A function pointer: a load without an index from memory that is not the stack, the
    /// caller's value, a call's result, or a fixed slot (`lea r, [rip+X]` as a base).
    Pointer,
    /// A fixed address in the image (`lea r, [rip+X]`): a code address if jumped to.
    Fixed,
    /// Computed, indexed, through the stack, or unknown.
    Other,
}

/// Predecessors of each block.
fn preds(view: &FnView<'_>) -> Vec<Vec<usize>> {
    let mut p = vec![Vec::new(); view.blocks.len()];
    for (b, ss) in view.succs.iter().enumerate() {
        for s in ss {
            p[*s].push(b);
        }
    }
    p
}

/// Blocks the questions about one jump may look through, all together.
const BUDGET: u32 = 64;

/// A search for where values come from, within one function.
struct Search<'v, 'a> {
    view: &'v FnView<'a>,
    preds: Vec<Vec<usize>>,
    budget: u32,
}

/// What two paths' values make together: the same, else a fixed address and a pointer make
/// an address that is not always a function pointer, and anything else is unknown.
fn join(a: Origin, b: Origin) -> Origin {
    match (a, b) {
        _ if a == b => a,
        (Origin::Other, _) | (_, Origin::Other) => Origin::Other,
        _ => Origin::Fixed,
    }
}

/// The caller's value of `r` at the entry: a function pointer comes in an argument register
/// (or rax, r10, r11, which trampolines use); a callee-saved register holds the caller's own
/// state.
fn passed_in(r: Gpr) -> Origin {
    if RegSet::SYSV_ARGS.contains(r) || matches!(r, Gpr::Rax | Gpr::R10 | Gpr::R11) {
        Origin::Pointer
    } else {
        Origin::Other
    }
}

impl Search<'_, '_> {
    /// Where the value of `r` just before instruction `k` of block `b` came from.
    fn origin(&mut self, r: Gpr, b: usize, k: usize, depth: u32) -> Origin {
        // The stack pointer (and so `mov rbp, rsp`) points at this function's frame.
        if depth > 8 || r == Gpr::Rsp {
            return Origin::Other;
        }
        let mut seen = Vec::new();
        self.origin_in(r, b, k, depth, &mut seen).unwrap_or(Origin::Other)
    }

    /// [`Search::origin`]: its definition in block `b` before `k`, else what every way into
    /// the block brings (each predecessor's end, and the caller's value at the entry). `seen`
    /// holds the blocks whose end this search has already asked about, so that it neither goes
    /// round a loop nor asks twice; `None` when every way in was asked about already.
    fn origin_in(
        &mut self,
        r: Gpr,
        b: usize,
        k: usize,
        depth: u32,
        seen: &mut Vec<usize>,
    ) -> Option<Origin> {
        if self.budget == 0 {
            return Some(Origin::Other);
        }
        self.budget -= 1;
        let insns = &self.view.blocks[b];
        // A call leaves its result in rax (and rdx). Other registers a compiler reads after a
        // call without writing them first are ones it knows the callee keeps (gcc's
        // interprocedural register allocation keeps values in caller-saved registers across
        // calls to functions it has seen): the value is the one from before the call.
        let writes = |j: usize| {
            insns[j].1.contains(r)
                || (insns[j].0.mnemonic() == Mnemonic::Call && matches!(r, Gpr::Rax | Gpr::Rdx))
        };
        if let Some(j) = (0..k).rev().find(|j| writes(*j)) {
            return Some(self.defined_by(insns[j].0, r, b, j, depth));
        }
        if self.preds[b].is_empty() && b != self.view.entry {
            // Entered only from outside this function's edges: unknown.
            return Some(Origin::Other);
        }
        let mut got: Option<Origin> = (b == self.view.entry).then(|| passed_in(r));
        for i in 0..self.preds[b].len() {
            let p = self.preds[b][i];
            if seen.contains(&p) {
                continue;
            }
            seen.push(p);
            let end = self.view.blocks[p].len();
            if let Some(o) = self.origin_in(r, p, end, depth, seen) {
                got = Some(got.map_or(o, |g| join(g, o)));
            }
            if got == Some(Origin::Other) {
                break;
            }
        }
        got
    }

    /// Where the value instruction `j` of block `b` writes to `r` came from.
    fn defined_by(&mut self, i: &Instruction, r: Gpr, b: usize, j: usize, depth: u32) -> Origin {
        match (i.mnemonic(), i.code()) {
            // The callee's result.
            (Mnemonic::Call, _) if matches!(r, Gpr::Rax | Gpr::Rdx) => Origin::Pointer,
            (Mnemonic::Mov, Code::Mov_r64_rm64) if i.op1_kind() == OpKind::Memory => {
                self.memory(i, b, j, depth)
            }
            (Mnemonic::Mov, Code::Mov_r64_rm64 | Code::Mov_rm64_r64)
                if i.op1_kind() == OpKind::Register =>
            {
                match Gpr::from_iced(i.op1_register()) {
                    Some(src) => self.origin(src, b, j, depth + 1),
                    None => Origin::Other,
                }
            }
            (Mnemonic::Lea, _) if i.memory_base() == Register::RIP => Origin::Fixed,
            _ => Origin::Other,
        }
    }

    /// Where a 64-bit value loaded by the memory operand of instruction `j` of block `b` came
    /// from: a function pointer when the address has no index and its base is itself a
    /// pointer (or a fixed slot); anything on the stack, indexed or computed is not.
    fn memory(&mut self, i: &Instruction, b: usize, j: usize, depth: u32) -> Origin {
        if i.memory_index() != Register::None || i.segment_prefix() != Register::None {
            return Origin::Other;
        }
        // A base of rbp is followed like any other: set from rsp it is a frame pointer
        // (stack), loaded from memory an ordinary pointer (sqlite3_free keeps sqlite3Config
        // there).
        match i.memory_base() {
            Register::RIP => Origin::Pointer,
            Register::RSP | Register::None => Origin::Other,
            base => match Gpr::from_iced(base) {
                Some(g) => match self.origin(g, b, j, depth + 1) {
                    Origin::Pointer | Origin::Fixed => Origin::Pointer,
                    Origin::Other => Origin::Other,
                },
                None => Origin::Other,
            },
        }
    }
}

/// The blocks of `view` that end in an indirect jump that is a tail call (see the module
/// documentation). `candidates` are the blocks to judge (those ending in an unresolved
/// indirect jump).
pub(crate) fn indirect_tail_calls(view: &FnView<'_>, candidates: &[usize]) -> Vec<usize> {
    // Every block has a frame: blocks with no way in from the entry are seeded unknown, so a
    // path from one of them makes the stack pointer unknown wherever it joins.
    let at = frames(view);
    let mut search = Search { view, preds: preds(view), budget: BUDGET };
    candidates
        .iter()
        .copied()
        .filter(|&b| {
            let insns = &view.blocks[b];
            let Some(((jmp, _), before)) = insns.split_last() else { return false };
            // A near jump through a register or memory (no far jump through a selector).
            if jmp.code() != Code::Jmp_rm64 {
                return false;
            }
            let mut f = at[b].unwrap_or(UNKNOWN);
            for (i, w) in before {
                f = step(f, i, *w);
            }
            if f.rsp != Some(0) {
                return false;
            }
            let k = insns.len() - 1;
            match jmp.op0_kind() {
                // One budget for all the questions about this jump.
                OpKind::Register => match Gpr::from_iced(jmp.op0_register()) {
                    Some(r) => {
                        search.budget = BUDGET;
                        search.origin(r, b, k, 0) == Origin::Pointer
                    }
                    None => false,
                },
                OpKind::Memory => {
                    search.budget = BUDGET;
                    search.memory(jmp, b, k, 0) == Origin::Pointer
                }
                _ => false,
            }
        })
        .collect()
}

/// Whether every `ret` of the function leaves through the return address its caller pushed:
/// every block reached from the entry with a known stack pointer, the stack pointer back at
/// its entry value at each `ret` (`ret n` included), and no write that may reach the entry's
/// return slot (the 8 bytes at the entry stack pointer) through `rsp`, or through `rbp`
/// while it holds a known stack address: at such an offset, at an indexed one, or by a push
/// or call from above it. A `ret` that fails this may leave for anywhere (glibc's
/// `setcontext` loads a stack pointer then returns, a retpoline thunk returns through a slot
/// it wrote, `push; ret` is a jump), so what is live there is not what the callers' return
/// sites read. Not seen: a write through some other register holding a stack address (a
/// copy of `rsp`, a pointer to a local), which a correct program never aims at its own
/// return address.
///
/// `seeds` are where the function is entered and the stack pointer there, relative to the
/// one whose slot the `ret`s must read: `[(entry, 0)]` for a function called, the blocks its
/// parents jump to with their own stack pointers for a part split off other functions (GCC's
/// `.cold`: its `ret`s are its parents', see `Cfg::part_returns_through`). Blocks entered
/// otherwise count as unknown.
pub(crate) fn returns_through_slot(view: &FnView<'_>, seeds: &[(usize, i64)]) -> bool {
    use iced_x86::{InstructionInfoFactory, OpAccess};
    let at = frames_from(view, seeds);
    let mut info = InstructionInfoFactory::new();
    for (b, insns) in view.blocks.iter().enumerate() {
        let Some(mut f) = at[b] else { continue };
        for (i, w) in insns {
            let Some(rsp) = f.rsp else { return false };
            for m in info.info(i).used_memory() {
                let written = matches!(
                    m.access(),
                    OpAccess::Write
                        | OpAccess::CondWrite
                        | OpAccess::ReadWrite
                        | OpAccess::ReadCondWrite
                );
                // The slot-relative offset of the write (`None`: unknown).
                let off = match (m.base(), f.rbp) {
                    (Register::RSP, _) => Some(rsp),
                    (Register::RBP, Some(rbp)) => Some(rbp),
                    _ => continue,
                };
                let off = off
                    .filter(|_| m.index() == Register::None)
                    .map(|o| o + m.displacement() as i64);
                let len = m.memory_size().size().max(1) as i64;
                if written && off.is_none_or(|o| o < 8 && o + len > 0) {
                    return false;
                }
            }
            if i.mnemonic() == Mnemonic::Ret && rsp != 0 {
                return false;
            }
            f = step(f, i, *w);
        }
    }
    true
}

/// The stack pointer, relative to the entry's, at the end of each block of `blocks` (ways
/// into other functions: a jump, which leaves it as it is, or a fall-through past the
/// function's last instruction, whose own effect counts): `None` where it is not known.
pub(crate) fn rsp_at_end(view: &FnView<'_>, blocks: &[usize]) -> Vec<Option<i64>> {
    let at = frames(view);
    blocks
        .iter()
        .map(|&b| {
            let mut f = at.get(b).copied().flatten()?;
            for (i, w) in view.blocks.get(b)? {
                f = step(f, i, *w);
            }
            f.rsp
        })
        .collect()
}
