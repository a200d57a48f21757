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

/// Keep the arithmetic flags in `rax`: `lahf` (SF, ZF, AF, PF, CF into `ah`) if `low`,
/// `seto al` if `of`. Flags untouched.
pub fn flags_to_rax(low: bool, of: bool) -> Vec<Instruction> {
    let mut v = Vec::new();
    if low {
        v.push(Instruction::with(Code::Lahf));
    }
    if of {
        v.push(op(Instruction::with1(Code::Seto_rm8, Register::AL)));
    }
    v
}

/// Put back what [`flags_to_rax`] kept: `add al,0x7f` sets OF exactly when `al` is 1 (and
/// writes every other flag), then `sahf` the five from `ah`. The caller asks for `low`
/// whenever one of the five is live and `of` is kept.
pub fn flags_from_rax(low: bool, of: bool) -> Vec<Instruction> {
    let mut v = Vec::new();
    if of {
        v.push(op(Instruction::with2(Code::Add_AL_imm8, Register::AL, 0x7f)));
    }
    if low {
        v.push(Instruction::with(Code::Sahf));
    }
    v
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

/// `mov reg, imm64`: an address anywhere in the address space.
pub fn mov_imm64(reg: Register, value: u64) -> Instruction {
    op(Instruction::with2(Code::Mov_r64_imm64, reg, value))
}

/// `r` as iced's 64-bit register.
pub fn iced_gpr(r: Gpr) -> Register {
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

/// System call numbers (x86-64 Linux) that generated code makes at run time: those of
/// [`record_reads`]; the thread table's getpid and tgkill (`timer_code`); a call-trace writer's
/// `sched_yield` and `nanosleep` while it waits for room (`Lowerer::wait_for_room`). Where a target runs
/// under seccomp, the JIT asks its filters about them first, and the probe tools leave them
/// out.
pub const SYS_GETPID: u32 = 39;
pub const SYS_PROCESS_VM_READV: u32 = 310;
pub const SYS_TGKILL: u32 = 234;
pub const SYS_SCHED_YIELD: u32 = 24;
pub const SYS_NANOSLEEP: u32 = 35;
/// How many looks a writer waiting for room in a full call-trace ring makes with
/// `sched_yield` before it sleeps between looks instead.
pub const WAIT_SPINS: u32 = 256;
/// How long such a writer sleeps between its later looks: the reader drains every 500 µs,
/// and the kernel's timer slack (50 µs by default) adds to it.
pub const WAIT_NAP_NS: i32 = 50_000;

/// One memory read of a record for [`record_reads`]: `len` bytes from `base + disp` into the
/// slot at `status + 8`, its status word at `status` (offsets in the slot).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlotRead {
    pub base: Register,
    pub disp: i32,
    pub status: i32,
    pub len: u16,
    pub kind: crate::ir::ReadKind,
}

/// The memory reads of a record whose slot is at `r11` in the kernel (`rdx` = the `seq` it
/// gets afterwards), each by a call of the kernel's fault-free reader for its kind
/// (`kr`, see [`crate::KernelReads`]). Leaves `r11` and `rdx` as they were; writes the other
/// caller-saved registers and the flags; uses at most 40 bytes of stack below `rsp` (the
/// kernel has no red zone). The bases must not be among the registers it writes.
///
/// 1. Each read's source address `base + disp` into its status word, first: the bases need
///    not survive the calls.
/// 2. `r11` and `rdx` pushed, then the stack aligned to 16 bytes for the calls (the old
///    `rsp` kept on the aligned stack, with a word of padding).
/// 3. For each read, `r11` reloaded (the calls write it), `routine(slot + status + 8,
///    src, len)`; a copy's 0 becomes `len` (its success), anything else is kept: the string
///    copies' length (with the NUL, or `len` when cut) or -EFAULT.
/// 4. The old `rsp` back, then `rdx` and `r11`.
pub fn record_reads_kernel(reads: &[SlotRead], kr: &crate::KernelReads) -> Vec<Instruction> {
    use iced_x86::code_asm::*;
    let body = |a: &mut CodeAssembler| -> Result<(), iced_x86::IcedError> {
        // 1.
        for r in reads {
            let base = gpr64::get_gpr64(r.base).expect("a 64-bit base register");
            a.lea(rax, qword_ptr(base + r.disp))?;
            a.mov(qword_ptr(r11 + r.status), rax)?;
        }
        // 2. [old rsp] = rdx, [old rsp + 8] = r11.
        a.push(r11)?;
        a.push(rdx)?;
        a.mov(rax, rsp)?;
        a.and(rsp, -16)?;
        a.push(rax)?;
        a.push(rax)?;
        // 3. [rsp] and [rsp + 8] hold the old rsp.
        for r in reads {
            let (routine, zero_is_ok) = kr.routine(r.kind);
            a.mov(rax, qword_ptr(rsp))?;
            a.mov(r11, qword_ptr(rax + 8))?;
            a.lea(rdi, qword_ptr(r11 + (r.status + 8)))?;
            a.mov(rsi, qword_ptr(r11 + r.status))?;
            a.mov(edx, r.len as u32)?;
            a.call(routine)?;
            if zero_is_ok {
                a.mov(ecx, r.len as u32)?;
                a.test(rax, rax)?;
                a.cmovz(rax, rcx)?;
            }
            a.mov(rcx, qword_ptr(rsp))?;
            a.mov(r11, qword_ptr(rcx + 8))?;
            a.mov(qword_ptr(r11 + r.status), rax)?;
        }
        // 4.
        a.pop(rax)?;
        a.pop(rsp)?;
        a.pop(rdx)?;
        a.pop(r11)?;
        Ok(())
    };
    let mut a = CodeAssembler::new(64).expect("64-bit mode");
    body(&mut a).expect("template instruction is well formed");
    a.take_instructions()
}

/// The stack frame of [`record_reads`], offsets from its `rsp`: the local iovec `{dst, len}`,
/// the two remote ones `[{src, n0}, {src + n0, len - n0}]`, and what must survive the
/// system calls (which write `rax`, `rcx`, `r11` and the argument registers).
const LOCAL_IOV: i32 = 0;
const REMOTE_IOV: i32 = 16;
const SAVED_SLOT: i32 = 48;
const SAVED_SEQ: i32 = 56;
const SAVED_PID: i32 = 64;
/// Bytes [`record_reads`] puts below `rsp` (8-aligned: the system calls need no more).
pub const READ_FRAME: i32 = 72;
/// Bytes of a page: a remote range is split where its first page ends.
const PAGE: u32 = 4096;

/// The memory reads of a record whose slot is at `r11` (the record not complete yet: `rdx`
/// is the `seq` it gets afterwards), each with `process_vm_readv` on this process, which
/// never faults: an unreadable byte ends the copy and the call returns what it copied, or
/// `-EFAULT` if that is nothing. Leaves `r11` and `rdx` as they were; writes `rax`, `rcx`,
/// `rsi`, `rdi`, `r8`-`r10` and the flags, and uses [`READ_FRAME`] bytes of stack below
/// `rsp` (the caller has stepped over the red zone). The bases must not be among the
/// registers it writes.
///
/// 1. Each read's source address `base + disp` into its status word, first: the bases need
///    not survive the calls, only the slot pointer and `seq`, which go on the stack.
/// 2. `pid = getpid()`, for every record: a forked child has another pid, and reading its
///    parent's memory would be wrong.
/// 3. For each read, `process_vm_readv(pid, {slot + status + 8, len}, 1, [{src, n0}, {src +
///    n0, len - n0}], 2, 0)` with `n0 = min(len, 4096 - (src & 4095))`, the range split
///    where its first page ends, so that a string ending just before an unmapped page comes
///    back as a partial read rather than as nothing even where the kernel does what
///    process_vm_readv(2) says ("won't perform a partial transfer that splits a single iovec
///    element"). Linux 6.18 copies page by page and returns a partial count within one
///    iovec too (seen with the split taken out: `tests/exec.rs` still reads 10 bytes), so
///    there the split only costs a few instructions. The result (bytes read, or `-errno`)
///    goes into the status word.
/// 4. `r11`, `rdx` back; the frame freed.
pub fn record_reads(reads: &[SlotRead]) -> Vec<Instruction> {
    use iced_x86::code_asm::*;
    let body = |a: &mut CodeAssembler| -> Result<(), iced_x86::IcedError> {
        // 1.
        for r in reads {
            let base = gpr64::get_gpr64(r.base).expect("a 64-bit base register");
            a.lea(rax, qword_ptr(base + r.disp))?;
            a.mov(qword_ptr(r11 + r.status), rax)?;
        }
        // 2.
        a.lea(rsp, qword_ptr(rsp - READ_FRAME))?;
        a.mov(qword_ptr(rsp + SAVED_SLOT), r11)?;
        a.mov(qword_ptr(rsp + SAVED_SEQ), rdx)?;
        a.mov(eax, SYS_GETPID)?;
        a.syscall()?;
        a.mov(qword_ptr(rsp + SAVED_PID), rax)?;
        a.mov(r11, qword_ptr(rsp + SAVED_SLOT))?;
        // 3.
        for r in reads {
            a.lea(rax, qword_ptr(r11 + (r.status + 8)))?;
            a.mov(qword_ptr(rsp + LOCAL_IOV), rax)?;
            a.mov(qword_ptr(rsp + (LOCAL_IOV + 8)), r.len as i32)?;
            a.mov(rax, qword_ptr(r11 + r.status))?;
            a.mov(qword_ptr(rsp + REMOTE_IOV), rax)?;
            // edx = n0 = min(len, PAGE - (src & (PAGE - 1))), ecx = len - n0.
            a.mov(ecx, eax)?;
            a.and(ecx, (PAGE - 1) as i32)?;
            a.mov(edx, PAGE)?;
            a.sub(edx, ecx)?;
            a.mov(ecx, r.len as u32)?;
            a.cmp(edx, ecx)?;
            a.cmova(edx, ecx)?;
            a.mov(qword_ptr(rsp + (REMOTE_IOV + 8)), rdx)?;
            a.add(rax, rdx)?;
            a.mov(qword_ptr(rsp + (REMOTE_IOV + 16)), rax)?;
            a.sub(ecx, edx)?;
            a.mov(qword_ptr(rsp + (REMOTE_IOV + 24)), rcx)?;
            a.mov(rdi, qword_ptr(rsp + SAVED_PID))?;
            a.mov(rsi, rsp)?;
            a.mov(edx, 1)?;
            a.lea(r10, qword_ptr(rsp + REMOTE_IOV))?;
            a.mov(r8d, 2)?;
            a.xor(r9d, r9d)?;
            a.mov(eax, SYS_PROCESS_VM_READV)?;
            a.syscall()?;
            a.mov(r11, qword_ptr(rsp + SAVED_SLOT))?;
            a.mov(qword_ptr(r11 + r.status), rax)?;
        }
        // 4.
        a.mov(rdx, qword_ptr(rsp + SAVED_SEQ))?;
        a.lea(rsp, qword_ptr(rsp + READ_FRAME))?;
        Ok(())
    };
    let mut a = CodeAssembler::new(64).expect("64-bit mode");
    // Fixed registers and small offsets: every instruction is well formed.
    body(&mut a).expect("template instruction is well formed");
    a.take_instructions()
}
