//! Jump-table resolution by a backward slice over the instructions that lead to an indirect
//! jump, for the switch lowerings gcc and clang emit at -O2:
//!
//! - PIC, relative: `lea B,[rip+T]; movsxd R,[B+I*4]; add R,B; jmp R` (either add order);
//! - absolute: `jmp [T+I*8]`, `jmp [B+I*8]` with `lea B,[rip+T]`, or `mov R,[..]; jmp R`.
//!
//! The entry count comes from the `cmp I,imm; ja` bounds check that dominates the jump
//! (tracked along the traversal as a [`Hint`]). Without one the jump stays unanalysable:
//! reading entries "while they look like code" runs into neighbouring tables and invents
//! block starts in the middle of instructions (seen in glibc's printf), which is worse than
//! not knowing. Code reached only through such a jump is still found by gap traversal.

use super::{JumpTable, TableFormat};
use crate::memory::CodeMemory;
use iced_x86::{Code, Instruction, Mnemonic, OpKind, Register};
use kerf_arch::x86_64::{Gpr, RegSet};
use kerf_arch::ImageAddr;

/// Largest table accepted from a bounds check; a bigger bound is not a switch.
const MAX_BOUNDED_ENTRIES: u64 = 1 << 16;

/// "Register `reg` holds at most `max` (unsigned) here", learnt from a dominating compare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Hint {
    reg: Option<Gpr>,
    max: u64,
    /// Width in bytes of the compared value. A compare of `al` bounds only the low byte until a
    /// `movzx` makes the whole register equal to it; 32-bit values are zero-extended already.
    width: u8,
    /// Where the bound starts to hold: the side of the conditional branch that implies it.
    /// The bound is only trusted if nothing else enters between here and the jump.
    origin: u64,
}

impl Hint {
    pub const NONE: Hint = Hint { reg: None, max: 0, width: 8, origin: 0 };

    pub fn new(reg: Gpr, max: u64, width: u8, origin: u64) -> Hint {
        Hint { reg: Some(reg), max, width, origin }
    }

    pub fn or(self, other: Hint) -> Hint {
        if self.reg.is_some() {
            self
        } else {
            other
        }
    }

    /// The hint after `insn` runs: kept if the register survives, moved along a plain
    /// register copy (`mov edx, eax` keeps the bound) or a zero extension of the compared
    /// width (`movzx eax, al`), dropped otherwise.
    pub fn after(self, insn: &Instruction, clobbers: RegSet) -> Hint {
        let Some(r) = self.reg else { return self };
        if insn.op0_kind() == OpKind::Register
            && insn.op1_kind() == OpKind::Register
            && Gpr::from_iced(insn.op1_register()) == Some(r)
            && insn.op0_register().size() >= 4
        {
            let src = insn.op1_register().size() as u8;
            let dst = Gpr::from_iced(insn.op0_register());
            match (insn.mnemonic(), dst) {
                (Mnemonic::Mov, Some(d)) if src >= 4 => {
                    return Hint::new(d, self.max, 8, self.origin)
                }
                (Mnemonic::Movzx, Some(d)) if src == self.width => {
                    return Hint::new(d, self.max, 8, self.origin)
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

    fn bound_for(self, r: Gpr) -> Option<(u64, u64)> {
        (self.reg == Some(r) && self.width >= 4).then_some((self.max, self.origin))
    }
}

/// What a backward slice found out about an indirect jump.
#[derive(Clone, Debug)]
pub(crate) enum Resolution {
    /// A table, and the address from which its bound must hold (see [`Hint`]).
    Table(JumpTable, u64),
    /// A jump through one fixed memory slot (a PLT stub or a GOT load): leaves the function.
    IndirectTail,
    Unknown,
}

/// Resolve the indirect jump `jmp` at the end of `slice` (the instructions decoded linearly
/// before it, with what each clobbers). `hints[k]` is the bound hint before `slice[k]`;
/// `hints[slice.len()]` the one before the jump.
pub(crate) fn resolve(
    slice: &[(&Instruction, RegSet)],
    jmp: &Instruction,
    hints: &[Hint],
    mem: &dyn CodeMemory,
) -> Resolution {
    let s = Slice { insns: slice };
    let n = slice.len();
    if jmp.op0_kind() == OpKind::Memory {
        let base = jmp.memory_base();
        if base == Register::RIP {
            return Resolution::IndirectTail;
        }
        if jmp.memory_index() == Register::None || jmp.memory_index_scale() != 8 {
            return Resolution::Unknown;
        }
        let Some(idx) = Gpr::from_iced(jmp.memory_index()) else {
            return Resolution::Unknown;
        };
        let table = match base {
            Register::None => jmp.memory_displacement64(),
            b => match Gpr::from_iced(b).and_then(|g| s.value_of(g, n)) {
                Some(v) => v.wrapping_add(jmp.memory_displacement64()),
                None => return Resolution::Unknown,
            },
        };
        let count = hints[n].bound_for(idx);
        return read_table(jmp, table, TableFormat::Absolute64, count, mem);
    }
    if jmp.op0_kind() != OpKind::Register {
        return Resolution::Unknown;
    }
    let Some(r) = Gpr::from_iced(jmp.op0_register()) else {
        return Resolution::Unknown;
    };
    let Some(d) = s.def_before(r, n) else {
        return Resolution::Unknown;
    };
    let def = slice[d].0;
    match def.mnemonic() {
        Mnemonic::Add
            if def.op0_kind() == OpKind::Register && def.op1_kind() == OpKind::Register =>
        {
            let (Some(x), Some(y)) =
                (Gpr::from_iced(def.op0_register()), Gpr::from_iced(def.op1_register()))
            else {
                return Resolution::Unknown;
            };
            for (base_reg, load_reg) in [(x, y), (y, x)] {
                let Some(base) = s.value_of(base_reg, d) else {
                    continue;
                };
                let Some(l) = s.def_before(load_reg, d) else {
                    continue;
                };
                let load = slice[l].0;
                let signed = matches!(load.code(), Code::Movsxd_r64_rm32);
                if !(signed || load.code() == Code::Mov_r32_rm32)
                    || load.op1_kind() != OpKind::Memory
                    || load.memory_index_scale() != 4
                {
                    continue;
                }
                let Some(idx) = Gpr::from_iced(load.memory_index()) else {
                    continue;
                };
                let table = match load.memory_base() {
                    Register::None => load.memory_displacement64(),
                    b => match Gpr::from_iced(b).and_then(|g| s.value_of(g, l)) {
                        Some(v) => v.wrapping_add(load.memory_displacement64()),
                        None => continue,
                    },
                };
                let format = TableFormat::Relative32 { base: ImageAddr(base) };
                return read_table(jmp, table, format, hints[l].bound_for(idx), mem);
            }
            Resolution::Unknown
        }
        Mnemonic::Mov if def.op1_kind() == OpKind::Memory => {
            if def.memory_base() == Register::RIP {
                return Resolution::IndirectTail;
            }
            if def.memory_index_scale() != 8 {
                return Resolution::Unknown;
            }
            let Some(idx) = Gpr::from_iced(def.memory_index()) else {
                return Resolution::Unknown;
            };
            let table = match def.memory_base() {
                Register::None => def.memory_displacement64(),
                b => match Gpr::from_iced(b).and_then(|g| s.value_of(g, d)) {
                    Some(v) => v.wrapping_add(def.memory_displacement64()),
                    None => return Resolution::Unknown,
                },
            };
            read_table(jmp, table, TableFormat::Absolute64, hints[d].bound_for(idx), mem)
        }
        _ => Resolution::Unknown,
    }
}

struct Slice<'a, 'b> {
    insns: &'a [(&'b Instruction, RegSet)],
}

impl Slice<'_, '_> {
    /// The last instruction before position `pos` that may write `r`.
    fn def_before(&self, r: Gpr, pos: usize) -> Option<usize> {
        (0..pos).rev().find(|k| self.insns[*k].1.contains(r))
    }

    /// The constant `r` holds before position `pos`, if its definition is `lea r,[rip+X]` or
    /// `mov r, imm`.
    fn value_of(&self, r: Gpr, pos: usize) -> Option<u64> {
        let d = self.insns[self.def_before(r, pos)?].0;
        match d.mnemonic() {
            Mnemonic::Lea if d.memory_base() == Register::RIP => Some(d.ip_rel_memory_address()),
            Mnemonic::Mov
                if matches!(
                    d.op1_kind(),
                    OpKind::Immediate32to64 | OpKind::Immediate64 | OpKind::Immediate32
                ) =>
            {
                Some(d.immediate(1))
            }
            _ => None,
        }
    }
}

fn read_table(
    jmp: &Instruction,
    table: u64,
    format: TableFormat,
    bound: Option<(u64, u64)>,
    mem: &dyn CodeMemory,
) -> Resolution {
    let Some((max, origin)) = bound else {
        return Resolution::Unknown;
    };
    let size = match format {
        TableFormat::Absolute64 => 8,
        TableFormat::Relative32 { .. } => 4,
    };
    let entry = |i: u64| -> Option<u64> {
        let b = mem.read(ImageAddr(table.wrapping_add(i * size)), size as usize)?;
        Some(match format {
            TableFormat::Absolute64 => u64::from_le_bytes(b.try_into().ok()?),
            TableFormat::Relative32 { base } => {
                base.0.wrapping_add(i32::from_le_bytes(b.try_into().ok()?) as i64 as u64)
            }
        })
    };
    let in_code = |t: u64| mem.code_region(ImageAddr(t)).is_some();
    if max >= MAX_BOUNDED_ENTRIES {
        return Resolution::Unknown;
    }
    let mut targets = Vec::new();
    for i in 0..=max {
        match entry(i) {
            // Targets leave the function only for gcc's .cold parts; they must at least be
            // code.
            Some(t) if in_code(t) => targets.push(ImageAddr(t)),
            _ => return Resolution::Unknown,
        }
    }
    if targets.is_empty() {
        return Resolution::Unknown;
    }
    let t = JumpTable { jump: ImageAddr(jmp.ip()), table: ImageAddr(table), format, targets };
    Resolution::Table(t, origin)
}
