//! Named instruction templates the primitives and code patches are built from, so that no
//! byte sequence is poked by hand elsewhere.

use crate::Env;
use iced_x86::{Code, Instruction, MemoryOperand, Register};
use kerf_arch::x86_64::{FlagSet, Gpr};

/// The SysV red zone below `rsp` that user code may use without moving `rsp`.
pub const RED_ZONE: i64 = 128;

/// Flags `inc` writes (all arithmetic flags but CF).
pub const INC_FLAGS: FlagSet = FlagSet(0x3e);

fn rip_mem(target: u64) -> MemoryOperand {
    // iced keeps the absolute target of a RIP-relative operand in the displacement; the
    // block encoder turns it into rel32 for wherever the code lands.
    MemoryOperand::with_base_displ(Register::RIP, target as i64)
}

fn op(r: Result<Instruction, iced_x86::IcedError>) -> Instruction {
    // Every template below uses fixed, valid operand combinations.
    r.expect("template instruction is well formed")
}

/// `lock inc qword ptr [rip+slot]`.
pub fn atomic_inc(slot: u64) -> Instruction {
    let mut i = op(Instruction::with1(Code::Inc_rm64, rip_mem(slot)));
    i.set_has_lock_prefix(true);
    i
}

/// `lock add qword ptr [rip+slot], reg`.
pub fn atomic_add(slot: u64, reg: Register) -> Instruction {
    let mut i = op(Instruction::with2(Code::Add_rm64_r64, rip_mem(slot), reg));
    i.set_has_lock_prefix(true);
    i
}

/// `lea reg, [rip+target]`: a data address into a register, position-independently.
pub fn lea_rip(reg: Register, target: u64) -> Instruction {
    op(Instruction::with2(Code::Lea_r64_m, reg, rip_mem(target)))
}

fn iced_gpr(r: Gpr) -> Register {
    // Gpr is numbered in encoding order, as iced's RAX..R15 are.
    Register::try_from(Register::RAX as usize + r as usize).expect("a 64-bit GPR")
}

/// `push r64`.
pub fn push(r: Gpr) -> Instruction {
    op(Instruction::with1(Code::Push_r64, iced_gpr(r)))
}

/// `pop r64`.
pub fn pop(r: Gpr) -> Instruction {
    op(Instruction::with1(Code::Pop_r64, iced_gpr(r)))
}

/// `lea rsp, [rsp+delta]`: moves the stack pointer without touching flags.
pub fn adjust_rsp(delta: i64) -> Instruction {
    op(Instruction::with2(
        Code::Lea_r64_m,
        Register::RSP,
        MemoryOperand::with_base_displ(Register::RSP, delta),
    ))
}

/// Save RFLAGS on the stack (stepping over the red zone first in user space).
pub fn save_flags(env: Env) -> Vec<Instruction> {
    let mut v = Vec::new();
    if env == Env::User {
        v.push(adjust_rsp(-RED_ZONE));
    }
    v.push(Instruction::with(Code::Pushfq));
    v
}

/// Undo [`save_flags`].
pub fn restore_flags(env: Env) -> Vec<Instruction> {
    let mut v = vec![Instruction::with(Code::Popfq)];
    if env == Env::User {
        v.push(adjust_rsp(RED_ZONE));
    }
    v
}

/// `jmp rel32` to `target`.
pub fn jmp(target: u64) -> Instruction {
    op(Instruction::with_branch(Code::Jmp_rel32_64, target))
}

/// A call relocated out of its place, emulated so that the callee returns to the original
/// code (`ret_to`) rather than into a code patch that may be freed while it runs: the return
/// address is stored as two dwords below a lowered `rsp`, then control jumps to the callee.
/// `rsp` is lowered first so a signal arriving in between cannot overwrite the slot.
pub fn emulated_call_prefix(ret_to: u64) -> Vec<Instruction> {
    vec![
        adjust_rsp(-8),
        op(Instruction::with2(
            Code::Mov_rm32_imm32,
            MemoryOperand::with_base(Register::RSP),
            ret_to as u32,
        )),
        op(Instruction::with2(
            Code::Mov_rm32_imm32,
            MemoryOperand::with_base_displ(Register::RSP, 4),
            (ret_to >> 32) as u32,
        )),
    ]
}
