//! Jump-table resolution by a backward slice over the instructions that lead to an indirect
//! jump. The slice is evaluated symbolically: a value is a constant, a bounded index scaled
//! and offset (`add + scale*i`, `0 <= i <= max`), or a table entry (`plus + load(table +
//! size*i)`). That covers what gcc and clang emit for switches at -O0 and -O2, PIC and not:
//!
//! - `lea B,[rip+T]; movsxd R,[B+I*4]; add R,B; jmp R` (either add order; `mov eax,[..];
//!   cdqe` at -O0; the `lea` hoisted out of a loop is found function-wide: the function's
//!   one `lea` of the register, or, where it defines the register more than once, the one
//!   that every path into the run reaching the jump last defines it by, checked again once
//!   the whole function is decoded, `build::reaching_lea`);
//! - `jmp [T+I*8]`, `mov R,[T+I*8]; jmp R`, `shl R,3; add R,T; mov R,[R]; jmp R`.
//!
//! The index bound comes from a dominating `cmp I,imm` (or `sub I,imm`) and `ja`/`jbe`,
//! with `I` a register or a stack slot (-O0 keeps variables there), tracked along the
//! traversal as a [`Hint`] (where a block between the compare and the jump is entered along
//! several edges, each must carry a bound that implies it: a switch in a loop whose dispatch
//! the check before the loop and the one at its back edge both lead to, as gcc -O2 makes of
//! bzip2's flag parsing; see `build::undominated_tables`); or from `and I,imm` or a zero-extended byte (`movzx I,r8`, an
//! interpreter's opcode). Without a bound the jump stays
//! unanalysable: reading entries "while they look like code" runs into neighbouring tables and
//! invents block starts in the middle of instructions (seen in glibc's printf), which is
//! worse than not knowing. Code reached only through such a jump is still found by gap
//! traversal.

use super::{JumpTable, TableFormat};
use crate::memory::CodeMemory;
use iced_x86::{Code, ConditionCode, Instruction, Mnemonic, OpKind, Register};
use kerf_arch::x86_64::{Gpr, RegSet};
use kerf_arch::ImageAddr;

/// Largest table accepted from a bounds check; a bigger bound is not a switch.
const MAX_ENTRIES: u64 = 1 << 16;
/// How deep the backward evaluation may recurse.
const MAX_DEPTH: u32 = 16;

/// Where a bounded value lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Loc {
    None,
    Reg(Gpr),
    /// A stack slot `[base + disp]` (base `rbp` or `rsp`), as -O0 code keeps variables.
    Slot(Register, i64),
    /// Other memory, `[base + disp]` (a field: `cmp byte [rsi+1], 9; ja; movzx ecx, byte
    /// [rsi+1]`, sqlite's record comparison); the bound holds until the base register or
    /// any memory may be written.
    Mem(Gpr, i64),
    /// A global at a fixed address (`cmp dword [rip+G], 9; ja; mov eax, [rip+G]`: GNU tar's
    /// `main` switches on its subcommand so); the bound holds until any memory may be
    /// written.
    Global(u64),
}

/// "The value in `loc` is at most `max` (unsigned) here", learnt from a dominating compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hint {
    loc: Loc,
    max: u64,
    /// Width in bytes of the compared value. A compare of `al` bounds only the low byte until a
    /// `movzx` makes the whole register equal to it; 32-bit values are zero-extended already.
    width: u8,
    /// Where the bound starts to hold: the side of the conditional branch that implies it.
    /// The bound is only trusted if nothing else enters between here and the jump.
    origin: u64,
}

/// A flag-setting instruction that a following unsigned branch turns into a bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Compare {
    loc: Loc,
    imm: u64,
    width: u8,
}

fn stack_slot(i: &Instruction, op: u32) -> Option<(Register, i64)> {
    if i.op_kind(op) != OpKind::Memory || i.memory_index() != Register::None {
        return None;
    }
    match i.memory_base() {
        b @ (Register::RBP | Register::RSP) => Some((b, i.memory_displacement64() as i64)),
        _ => None,
    }
}

/// Operand `op` of `i` as a [`Loc::Mem`]: memory through a general register other than the
/// stack and frame pointers, with no index; or as a [`Loc::Global`]: memory at a fixed
/// address (PC-relative or absolute).
fn field(i: &Instruction, op: u32) -> Option<Loc> {
    if i.op_kind(op) != OpKind::Memory || i.memory_index() != Register::None {
        return None;
    }
    match i.memory_base() {
        Register::RBP | Register::RSP => None,
        Register::RIP => Some(Loc::Global(i.ip_rel_memory_address())),
        Register::None => Some(Loc::Global(i.memory_displacement64())),
        b => Some(Loc::Mem(Gpr::from_iced(b)?, i.memory_displacement64() as i64)),
    }
}

/// Whether `i` may write memory (anywhere: a store through another register may alias).
fn may_write_memory(i: &Instruction) -> bool {
    use iced_x86::{InstructionInfoFactory, OpAccess};
    if i.is_stack_instruction() || i.is_string_instruction() {
        return true;
    }
    if matches!(
        i.flow_control(),
        iced_x86::FlowControl::Call
            | iced_x86::FlowControl::IndirectCall
            | iced_x86::FlowControl::Interrupt
    ) {
        return true;
    }
    let mut info = InstructionInfoFactory::new();
    info.info(i)
        .used_memory()
        .iter()
        .any(|m| !matches!(m.access(), OpAccess::Read | OpAccess::CondRead | OpAccess::NoMemAccess))
}

fn imm_of(i: &Instruction, op: u32) -> Option<u64> {
    match i.op_kind(op) {
        OpKind::Immediate8
        | OpKind::Immediate16
        | OpKind::Immediate32
        | OpKind::Immediate64
        | OpKind::Immediate8to16
        | OpKind::Immediate8to32
        | OpKind::Immediate8to64
        | OpKind::Immediate32to64 => Some(i.immediate(op)),
        _ => None,
    }
}

fn width_mask(w: u8) -> u64 {
    match w {
        1 => 0xff,
        2 => 0xffff,
        4 => 0xffff_ffff,
        _ => u64::MAX,
    }
}

impl Compare {
    /// The compare `insn` makes, if a branch after it can bound a value: `cmp r,imm`,
    /// `cmp [slot],imm`, or `sub r,imm` whose operand was saved in a stack slot just before
    /// (clang -O0 compares by subtracting, then reloads the index from its slot). `before` are
    /// the instructions decoded before it in the same run, latest last.
    pub fn of(insn: &Instruction, before: &[&Instruction]) -> Option<Compare> {
        match insn.mnemonic() {
            Mnemonic::Cmp => {
                let imm = imm_of(insn, 1)?;
                let (loc, width) = match insn.op0_kind() {
                    OpKind::Register => (
                        Loc::Reg(Gpr::from_iced(insn.op0_register())?),
                        insn.op0_register().size() as u8,
                    ),
                    _ => {
                        let loc = match stack_slot(insn, 0) {
                            Some((b, d)) => Loc::Slot(b, d),
                            None => field(insn, 0)?,
                        };
                        (loc, insn.memory_size().size() as u8)
                    }
                };
                Some(Compare { loc, imm: imm & width_mask(width), width })
            }
            Mnemonic::Sub if insn.op0_kind() == OpKind::Register => {
                let imm = imm_of(insn, 1)?;
                let reg = insn.op0_register();
                let gpr = Gpr::from_iced(reg)?;
                let width = reg.size() as u8;
                let defines = |p: &Instruction, g: Gpr| {
                    p.op_count() > 0
                        && p.op0_kind() == OpKind::Register
                        && Gpr::from_iced(p.op0_register()) == Some(g)
                };
                // The latest stack slot stored, before the `sub` and after the last write of
                // its register, from that register or from a plain copy of it.
                for (j, p) in before.iter().enumerate().rev() {
                    if defines(p, gpr) {
                        return None;
                    }
                    if p.mnemonic() != Mnemonic::Mov || p.op1_kind() != OpKind::Register {
                        continue;
                    }
                    let Some((b, d)) = stack_slot(p, 0) else { continue };
                    let Some(stored) = Gpr::from_iced(p.op1_register()) else { continue };
                    let same = stored == gpr || {
                        // `mov ecx, eax` before the store, with neither register written
                        // in between.
                        let k = (0..j).rev().find(|k| defines(before[*k], stored));
                        k.is_some_and(|k| {
                            let c = before[k];
                            c.mnemonic() == Mnemonic::Mov
                                && c.op1_kind() == OpKind::Register
                                && Gpr::from_iced(c.op1_register()) == Some(gpr)
                                && !before[k + 1..j].iter().any(|q| defines(q, gpr))
                        })
                    };
                    if same {
                        return Some(Compare {
                            loc: Loc::Slot(b, d),
                            imm: imm & width_mask(width),
                            width,
                        });
                    }
                }
                None
            }
            _ => None,
        }
    }
}

impl Compare {
    /// A compare of a byte or word register bounds the whole register when the run last wrote
    /// it by zero-extending a value no wider, directly or through register copies (`movzx
    /// edx, byte [rdi]; mov rax, rdx; cmp al, 6; ja`, then `rax` indexes the table: sqlite's
    /// record comparison). `before` is the run before the compare, with what each instruction
    /// may write.
    pub fn widened(self, before: &[(&Instruction, RegSet)]) -> Compare {
        let Loc::Reg(mut g) = self.loc else { return self };
        if self.width >= 4 {
            return self;
        }
        let mut end = before.len();
        while let Some(k) = (0..end).rev().find(|k| before[*k].1.contains(g)) {
            let w = before[k].0;
            let dst_full = w.op0_kind() == OpKind::Register
                && w.op0_register().size() >= 4
                && Gpr::from_iced(w.op0_register()) == Some(g);
            if !dst_full {
                return self;
            }
            match (w.mnemonic(), w.op1_kind()) {
                (Mnemonic::Movzx, OpKind::Register | OpKind::Memory) => {
                    let src = match w.op1_kind() {
                        OpKind::Register => w.op1_register().size(),
                        _ => w.memory_size().size(),
                    };
                    return if src > 0 && src <= self.width as usize {
                        Compare { width: 8, ..self }
                    } else {
                        self
                    };
                }
                (Mnemonic::Mov, OpKind::Register) if w.op1_register().size() >= 4 => {
                    let Some(src) = Gpr::from_iced(w.op1_register()) else { return self };
                    g = src;
                    end = k;
                }
                _ => return self,
            }
        }
        self
    }
}

impl Hint {
    pub const NONE: Hint = Hint { loc: Loc::None, max: 0, width: 8, origin: 0 };

    pub fn is_none(&self) -> bool {
        self.loc == Loc::None
    }

    /// Where the bound starts to hold (kept as the bound moves along copies and extensions).
    pub fn origin(&self) -> u64 {
        self.origin
    }

    /// Whether this bound, carried into a block along one edge, implies `held` there: the
    /// same location and width, a maximum no greater. When every edge into a block carries a
    /// bound that implies the one a jump table's run carried into it, that bound holds there
    /// whichever way the block was entered (a switch inside a loop, whose dispatch both the
    /// bounds check before the loop and the one at its back edge lead to).
    pub fn implies(&self, held: &Hint) -> bool {
        self.loc != Loc::None
            && self.loc == held.loc
            && self.width == held.width
            && self.max <= held.max
    }

    fn new(loc: Loc, max: u64, width: u8, origin: u64) -> Hint {
        Hint { loc, max, width, origin }
    }

    pub fn or(self, other: Hint) -> Hint {
        if self.loc != Loc::None {
            self
        } else {
            other
        }
    }

    /// The bounds a conditional branch after `cmp` implies on its taken side and on its
    /// fall-through side (unsigned conditions only: a jump-table index is unsigned).
    pub fn from_branch(cmp: Option<Compare>, jcc: &Instruction) -> (Hint, Hint) {
        let Some(Compare { loc, imm, width: w }) = cmp else {
            return (Hint::NONE, Hint::NONE);
        };
        let (taken, fall) = (jcc.near_branch_target(), jcc.next_ip());
        match jcc.condition_code() {
            ConditionCode::a => (Hint::NONE, Hint::new(loc, imm, w, fall)),
            ConditionCode::ae if imm > 0 => (Hint::NONE, Hint::new(loc, imm - 1, w, fall)),
            ConditionCode::be => (Hint::new(loc, imm, w, taken), Hint::NONE),
            ConditionCode::b if imm > 0 => (Hint::new(loc, imm - 1, w, taken), Hint::NONE),
            _ => (Hint::NONE, Hint::NONE),
        }
    }

    /// The hint after `insn` runs: kept if its location survives, moved along a register copy
    /// (`mov edx, eax`) or a zero extension of the compared width (`movzx eax, al`), dropped
    /// otherwise.
    pub fn after(self, insn: &Instruction, clobbers: RegSet) -> Hint {
        match self.loc {
            Loc::None => self,
            Loc::Reg(r) => {
                if insn.op0_kind() == OpKind::Register
                    && insn.op1_kind() == OpKind::Register
                    && Gpr::from_iced(insn.op1_register()) == Some(r)
                    && insn.op0_register().size() >= 4
                {
                    let src = insn.op1_register().size() as u8;
                    let dst = Gpr::from_iced(insn.op0_register());
                    match (insn.mnemonic(), dst) {
                        (Mnemonic::Mov, Some(d)) if src >= 4 => {
                            return Hint::new(Loc::Reg(d), self.max, 8, self.origin)
                        }
                        // The low bytes were compared, or the whole register is bounded by
                        // a value the low bytes hold whole.
                        (Mnemonic::Movzx, Some(d))
                            if src == self.width
                                || (self.width >= 4 && self.max <= width_mask(src)) =>
                        {
                            return Hint::new(Loc::Reg(d), self.max, 8, self.origin)
                        }
                        _ => {}
                    }
                }
                if clobbers.contains(r) {
                    Hint::NONE
                } else {
                    self
                }
            }
            Loc::Mem(base, _) => {
                if clobbers.contains(base) || may_write_memory(insn) {
                    Hint::NONE
                } else {
                    self
                }
            }
            Loc::Global(_) => {
                if may_write_memory(insn) {
                    Hint::NONE
                } else {
                    self
                }
            }
            Loc::Slot(base, disp) => {
                let writes_slot = insn.op_count() > 0
                    && stack_slot(insn, 0) == Some((base, disp))
                    && !matches!(insn.mnemonic(), Mnemonic::Cmp | Mnemonic::Test);
                let moves_base = Gpr::from_iced(base).is_some_and(|g| clobbers.contains(g));
                if writes_slot || moves_base {
                    Hint::NONE
                } else {
                    self
                }
            }
        }
    }
}

/// What a backward slice found out about an indirect jump.
#[derive(Clone, Debug)]
pub(crate) enum Resolution {
    /// A table, and the address from which its bound must hold (see [`Hint`]).
    Table(JumpTable, u64),
    Unknown,
}

/// A symbolic value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sym {
    Const(u64),
    /// `add + scale*i` for `0 <= i <= max`; the bound holds from `origin`.
    Idx {
        scale: u64,
        add: u64,
        max: u64,
        origin: u64,
    },
    /// `plus + load(table + size*i)` for `0 <= i <= max`, the load sign- or zero-extended.
    Entry {
        table: u64,
        size: u8,
        signed: bool,
        plus: u64,
        max: u64,
        origin: u64,
    },
}

fn add(a: Sym, b: Sym) -> Option<Sym> {
    use Sym::*;
    Some(match (a, b) {
        (Const(x), Const(y)) => Const(x.wrapping_add(y)),
        (Const(c), Idx { scale, add, max, origin })
        | (Idx { scale, add, max, origin }, Const(c)) => {
            Idx { scale, add: add.wrapping_add(c), max, origin }
        }
        (Const(c), Entry { table, size, signed, plus, max, origin })
        | (Entry { table, size, signed, plus, max, origin }, Const(c)) => {
            Entry { table, size, signed, plus: plus.wrapping_add(c), max, origin }
        }
        _ => return None,
    })
}

fn scale(a: Sym, k: u64) -> Option<Sym> {
    Some(match a {
        Sym::Const(x) => Sym::Const(x.wrapping_mul(k)),
        Sym::Idx { scale, add, max, origin } => {
            Sym::Idx { scale: scale.wrapping_mul(k), add: add.wrapping_mul(k), max, origin }
        }
        Sym::Entry { .. } => return None,
    })
}

/// The slice the evaluator works on.
pub(crate) struct Slice<'a> {
    /// Instructions before the jump, in execution order, with what each may write.
    pub insns: &'a [(&'a Instruction, RegSet)],
    /// `hints[k]`: the bound hint before `insns[k]`; `hints[insns.len()]` before the jump.
    pub hints: &'a [Hint],
    /// The value of a register defined nowhere in the slice, if the whole function defines
    /// it exactly once, as `lea r,[rip+X]` (a table base hoisted out of a loop).
    pub global: &'a dyn Fn(Gpr) -> Option<u64>,
}

impl Slice<'_> {
    fn bound_at(&self, pos: usize, loc: Loc) -> Option<Sym> {
        let h = self.hints[pos];
        (h.loc == loc && loc != Loc::None && h.width >= 4).then_some(Sym::Idx {
            scale: 1,
            add: 0,
            max: h.max,
            origin: h.origin,
        })
    }

    /// The value of `r` just before position `pos`.
    fn reg(&self, r: Gpr, pos: usize, depth: u32) -> Option<Sym> {
        if depth > MAX_DEPTH {
            return None;
        }
        if let Some(b) = self.bound_at(pos, Loc::Reg(r)) {
            return Some(b);
        }
        match (0..pos).rev().find(|k| self.insns[*k].1.contains(r)) {
            Some(k) => self.def(k, r, depth + 1),
            None => (self.global)(r).map(Sym::Const),
        }
    }

    /// The value in stack slot `[base+disp]` just before `pos`.
    fn slot(&self, base: Register, disp: i64, pos: usize, depth: u32) -> Option<Sym> {
        if let Some(b) = self.bound_at(pos, Loc::Slot(base, disp)) {
            return Some(b);
        }
        let k = (0..pos).rev().find(|k| stack_slot(self.insns[*k].0, 0) == Some((base, disp)))?;
        let st = self.insns[k].0;
        if st.mnemonic() != Mnemonic::Mov || st.op1_kind() != OpKind::Register {
            return None;
        }
        self.reg(Gpr::from_iced(st.op1_register())?, k, depth + 1)
    }

    /// The address a memory operand of instruction `k` names.
    fn address(&self, i: &Instruction, k: usize, depth: u32) -> Option<Sym> {
        let mut v = Sym::Const(i.memory_displacement64());
        match i.memory_base() {
            Register::None => {}
            Register::RIP => return Some(Sym::Const(i.ip_rel_memory_address())),
            b => v = add(v, self.reg(Gpr::from_iced(b)?, k, depth)?)?,
        }
        match i.memory_index() {
            Register::None => {}
            x => {
                let s =
                    scale(self.reg(Gpr::from_iced(x)?, k, depth)?, i.memory_index_scale() as u64)?;
                v = add(v, s)?;
            }
        }
        Some(v)
    }

    /// A load of `size` bytes from what a memory operand of instruction `k` names.
    fn load(&self, i: &Instruction, k: usize, size: u8, signed: bool, depth: u32) -> Option<Sym> {
        if let Some((b, d)) = stack_slot(i, 1) {
            return self.slot(b, d, k, depth);
        }
        match self.address(i, k, depth)? {
            Sym::Idx { scale, add, max, origin } if scale == size as u64 => {
                Some(Sym::Entry { table: add, size, signed, plus: 0, max, origin })
            }
            _ => None,
        }
    }

    /// The value instruction `k` leaves in `r`.
    fn def(&self, k: usize, r: Gpr, depth: u32) -> Option<Sym> {
        let i = self.insns[k].0;
        let dst = (i.op_count() > 0 && i.op0_kind() == OpKind::Register)
            .then(|| i.op0_register())
            .filter(|d| Gpr::from_iced(*d) == Some(r));
        match (i.code(), i.mnemonic()) {
            (Code::Cdqe, _) => return sext32(self.reg(Gpr::Rax, k, depth)?),
            (_, _) if dst.is_none() => return None,
            _ => {}
        }
        let dst = dst?;
        let wide = dst.size() == 8;
        let src_reg = |op: u32| {
            (i.op_kind(op) == OpKind::Register).then(|| Gpr::from_iced(i.op_register(op))).flatten()
        };
        match i.mnemonic() {
            // A load of the field a dominating compare bounded, as wide as the compare (the
            // whole register then holds the bounded value).
            Mnemonic::Movzx | Mnemonic::Mov
                if field(i, 1).is_some_and(|l| {
                    let h = self.hints[k];
                    let size = i.memory_size().size();
                    h.loc == l
                        && h.width as usize == size
                        && (size >= 4 || i.mnemonic() == Mnemonic::Movzx)
                        && dst.size() >= 4
                }) =>
            {
                let h = self.hints[k];
                Some(Sym::Idx { scale: 1, add: 0, max: h.max, origin: h.origin })
            }
            Mnemonic::Mov => match i.op1_kind() {
                OpKind::Register => self.reg(src_reg(1)?, k, depth),
                OpKind::Memory if dst.size() >= 4 => {
                    self.load(i, k, dst.size() as u8, false, depth)
                }
                _ => imm_of(i, 1).map(Sym::Const),
            },
            Mnemonic::Movsxd => match i.op1_kind() {
                OpKind::Register => sext32(self.reg(src_reg(1)?, k, depth)?),
                _ => self.load(i, k, 4, true, depth),
            },
            Mnemonic::Lea => self.address(i, k, depth),
            Mnemonic::Add if wide => {
                let a = self.reg(r, k, depth)?;
                let b = match src_reg(1) {
                    Some(s) => self.reg(s, k, depth)?,
                    None => Sym::Const(imm_of(i, 1)?),
                };
                add(a, b)
            }
            Mnemonic::Sub if wide => {
                add(self.reg(r, k, depth)?, Sym::Const(imm_of(i, 1)?.wrapping_neg()))
            }
            Mnemonic::Shl => scale(self.reg(r, k, depth)?, 1 << (imm_of(i, 1)? & 63)),
            // A zero-extended byte is at most 255 whatever path led here (an interpreter's
            // computed goto on its opcode byte: `movzx eax, sil; mov rax, [T+rax*8]; jmp rax`);
            // no other path may join between it and the jump.
            Mnemonic::Movzx if i.memory_size().size() == 1 || i.op1_register().size() == 1 => {
                Some(Sym::Idx { scale: 1, add: 0, max: 0xff, origin: i.next_ip() })
            }
            // `and r, imm` bounds the value whatever path led here; no other path may join
            // between it and the jump.
            Mnemonic::And => {
                let m = imm_of(i, 1)? & width_mask(dst.size() as u8);
                (m < MAX_ENTRIES).then_some(Sym::Idx {
                    scale: 1,
                    add: 0,
                    max: m,
                    origin: i.next_ip(),
                })
            }
            _ => None,
        }
    }
}

fn sext32(v: Sym) -> Option<Sym> {
    match v {
        Sym::Entry { table, size: 4, plus: 0, max, origin, .. } => {
            Some(Sym::Entry { table, size: 4, signed: true, plus: 0, max, origin })
        }
        Sym::Const(c) => Some(Sym::Const(c as u32 as i32 as i64 as u64)),
        idx @ Sym::Idx { .. } => Some(idx),
        _ => None,
    }
}

/// Resolve the indirect jump `jmp` at the end of `slice`.
pub(crate) fn resolve(s: &Slice<'_>, jmp: &Instruction, mem: &dyn CodeMemory) -> Resolution {
    let n = s.insns.len();
    let value = match jmp.op0_kind() {
        OpKind::Memory => match s.address(jmp, n, 0) {
            Some(Sym::Idx { scale: 8, add, max, origin }) => {
                Some(Sym::Entry { table: add, size: 8, signed: false, plus: 0, max, origin })
            }
            _ => None,
        },
        OpKind::Register => {
            let Some(r) = Gpr::from_iced(jmp.op0_register()) else {
                return Resolution::Unknown;
            };
            // `mov r,[rip+X]; jmp r`: a pointer from one slot, like a PLT stub's, is no table;
            // whether the jump is a tail call is for `tailcall` to say (with the stack back at
            // its entry value: a function that pushed, then jumped through a slot holding a
            // label of its own, was once taken for a tail call, and a splice could cover the
            // label).
            if let Some(k) = (0..n).rev().find(|k| s.insns[*k].1.contains(r)) {
                let d = s.insns[k].0;
                if d.mnemonic() == Mnemonic::Mov
                    && d.op1_kind() == OpKind::Memory
                    && d.memory_base() == Register::RIP
                {
                    return Resolution::Unknown;
                }
            }
            s.reg(r, n, 0)
        }
        _ => None,
    };
    match value {
        Some(Sym::Entry { table, size, signed, plus, max, origin }) => {
            read_table(jmp, table, size, signed, plus, max, origin, mem)
        }
        _ => Resolution::Unknown,
    }
}

#[allow(clippy::too_many_arguments)]
fn read_table(
    jmp: &Instruction,
    table: u64,
    size: u8,
    signed: bool,
    plus: u64,
    max: u64,
    origin: u64,
    mem: &dyn CodeMemory,
) -> Resolution {
    if max >= MAX_ENTRIES {
        return Resolution::Unknown;
    }
    let format = match size {
        8 if plus == 0 => TableFormat::Absolute64,
        4 => TableFormat::Relative32 { base: ImageAddr(plus) },
        _ => return Resolution::Unknown,
    };
    let entry = |i: u64| -> Option<u64> {
        let slot = ImageAddr(table.wrapping_add(i * size as u64));
        Some(match size {
            // In position-independent code an absolute table is filled in by relocations.
            8 => mem.pointer(slot)?,
            _ => {
                let b: [u8; 4] = mem.read(slot, 4)?.try_into().ok()?;
                let v = if signed {
                    i32::from_le_bytes(b) as i64 as u64
                } else {
                    u32::from_le_bytes(b) as u64
                };
                plus.wrapping_add(v)
            }
        })
    };
    let mut targets = Vec::new();
    for i in 0..=max {
        match entry(i) {
            // Targets leave the function only for gcc's .cold parts; they must at least be
            // code.
            Some(t) if mem.code_region(ImageAddr(t)).is_some() => targets.push(ImageAddr(t)),
            _ => return Resolution::Unknown,
        }
    }
    let t = JumpTable { jump: ImageAddr(jmp.ip()), table: ImageAddr(table), format, targets };
    Resolution::Table(t, origin)
}
