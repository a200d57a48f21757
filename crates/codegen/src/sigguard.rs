//! The signal-mask guard: code that stands in for a `syscall` instruction of a process with
//! trap splices, so that no thread ever blocks SIGTRAP while an `int3` of kerf's can be hit.
//!
//! Why: an `int3` raises a *forced* SIGTRAP. When the thread blocks SIGTRAP (xz's and
//! jemalloc's worker threads block every signal; glibc blocks every signal around `clone`; a
//! handler installed with a full `sa_mask` runs with everything blocked), the kernel resets
//! SIGTRAP to its default action and the whole process dies. kerf clears SIGTRAP from every
//! thread's mask and every handler's `sa_mask` when it installs its first trap splice, and
//! splices this guard over every `syscall` that may change a mask afterwards, so the program
//! cannot block SIGTRAP again:
//!
//! | call | what the guard passes the kernel instead |
//! |---|---|
//! | `rt_sigprocmask` (14) | the new set without SIGTRAP |
//! | `rt_sigsuspend` (130), `ppoll` (271), `epoll_pwait` (281), `epoll_pwait2` (441) | the temporary mask without SIGTRAP |
//! | `pselect6` (270), `io_pgetevents` (333) | the same, through their `{set, size}` pair |
//! | `rt_sigaction` (13), another signal | the action with SIGTRAP out of its `sa_mask` |
//! | `rt_sigaction` (13) of SIGTRAP | emulated: the program's action is kept in kerf's slot (which the trap dispatcher chains to, and which kerf puts back on removal); the kernel's stays kerf's dispatcher |
//!
//! Every copy the guard passes lives on the thread's stack below the red zone; the program's
//! own memory is never written (except the `oldact` an emulated `rt_sigaction` fills in, as
//! the kernel would). Any other system call runs unchanged, with no stack access, so a
//! `clone` on a new stack or a `vfork` through `syscall(2)` is unaffected.
//!
//! Registers: the kernel's `syscall` preserves everything but rax, rcx and r11, and so does
//! the guard (rcx and r11 are its scratch registers, free before a `syscall`); flags are saved
//! on the wrapped path. A wrapped call that the kernel restarts (`ERESTART*`) re-executes the
//! guard's own `syscall` with the same substituted arguments, which are still on the stack.

use crate::CodegenError;
use iced_x86::code_asm::*;
use iced_x86::Instruction;

/// System calls whose arguments may block SIGTRAP in a thread, directly or for a while.
pub const MASK_SYSCALLS: [u32; 8] = [
    SYS_RT_SIGACTION,
    SYS_RT_SIGPROCMASK,
    SYS_RT_SIGSUSPEND,
    SYS_PSELECT6,
    SYS_PPOLL,
    SYS_EPOLL_PWAIT,
    SYS_IO_PGETEVENTS,
    SYS_EPOLL_PWAIT2,
];

const SYS_RT_SIGACTION: u32 = 13;
const SYS_RT_SIGPROCMASK: u32 = 14;
const SYS_RT_SIGSUSPEND: u32 = 130;
const SYS_PSELECT6: u32 = 270;
const SYS_PPOLL: u32 = 271;
const SYS_EPOLL_PWAIT: u32 = 281;
const SYS_IO_PGETEVENTS: u32 = 333;
const SYS_EPOLL_PWAIT2: u32 = 441;

/// SIGTRAP's bit in a kernel `sigset_t` (signal n is bit n-1).
pub const SIGTRAP_BIT: u32 = 4;
/// Bytes of the slot holding the program's SIGTRAP action, in the kernel's `struct
/// sigaction` layout: handler, flags, restorer, mask.
pub const ACTION_LEN: u64 = 32;
/// Offset of `sa_mask` in the kernel's `struct sigaction`.
const SA_MASK: i32 = 24;
/// Scratch bytes the wrapped path reserves: a 32-byte action or 8-byte set at +0, a
/// `{set, size}` pair at +32.
const SCRATCH: i32 = 64;

/// The program's registers the wrapped path keeps on the stack while its `syscall` runs, in
/// the order they sit from [`SAVED_AT`] up (each 8 bytes), then rflags.
pub const SAVED: [&str; 6] = ["r9", "r8", "r10", "rdx", "rsi", "rdi"];
/// Offset from rsp, at the wrapped path's `syscall`, of the first saved register.
pub const SAVED_AT: u64 = SCRATCH as u64;
/// How far rsp is below the program's at the wrapped path's `syscall`: the red zone, rflags,
/// six registers and the scratch area.
pub const FRAME_BELOW: u64 = 128 + 8 + 6 * 8 + SCRATCH as u64;

/// Whether system call `nr` needs the guard.
pub fn needs_guard(nr: u32) -> bool {
    MASK_SYSCALLS.contains(&nr)
}

/// The guard, standing in for one `syscall` instruction: it executes the system call itself.
/// `action` is the address of the [`ACTION_LEN`]-byte slot of the program's SIGTRAP action (in
/// the data heap, shared by every guard and the trap dispatcher).
pub fn signal_guard(action: u64) -> Result<Vec<Instruction>, CodegenError> {
    let mut a = CodeAssembler::new(64)?;
    let mut wrap = a.create_label();
    let mut end = a.create_label();
    // Fast path: `lea ecx,[rax-N]; jrcxz` compares eax with N without touching flags or the
    // stack (rcx is clobbered by `syscall` anyway). The kernel reads the number from eax.
    for nr in MASK_SYSCALLS {
        a.lea(ecx, ptr(rax - nr as i32))?;
        a.jrcxz(wrap)?;
    }
    a.syscall()?;
    a.jmp(end)?;

    a.set_label(&mut wrap)?;
    let mut call = a.create_label();
    a.lea(rsp, ptr(rsp - 128))?;
    a.pushfq()?;
    for r in [rdi, rsi, rdx, r10, r8, r9] {
        a.push(r)?;
    }
    a.sub(rsp, SCRATCH)?;
    let mut set_rsi = a.create_label();
    let mut set_rdi = a.create_label();
    let mut set_r10 = a.create_label();
    let mut set_r8 = a.create_label();
    let mut pair_r9 = a.create_label();
    let mut action_rsi = a.create_label();
    a.cmp(eax, SYS_RT_SIGPROCMASK)?;
    a.je(set_rsi)?;
    a.cmp(eax, SYS_RT_SIGACTION)?;
    a.je(action_rsi)?;
    a.cmp(eax, SYS_RT_SIGSUSPEND)?;
    a.je(set_rdi)?;
    a.cmp(eax, SYS_PPOLL)?;
    a.je(set_r10)?;
    a.cmp(eax, SYS_EPOLL_PWAIT)?;
    a.je(set_r8)?;
    a.cmp(eax, SYS_EPOLL_PWAIT2)?;
    a.je(set_r8)?;
    // pselect6 and io_pgetevents: r9 points to { const sigset_t *set; size_t size }.
    a.set_label(&mut pair_r9)?;
    a.test(r9, r9)?;
    a.jz(call)?;
    a.mov(rcx, qword_ptr(r9))?;
    a.test(rcx, rcx)?;
    a.jz(call)?;
    a.mov(rcx, qword_ptr(rcx))?;
    a.btr(rcx, SIGTRAP_BIT)?;
    a.mov(qword_ptr(rsp), rcx)?;
    a.mov(qword_ptr(rsp + 32), rsp)?;
    a.mov(rcx, qword_ptr(r9 + 8))?;
    a.mov(qword_ptr(rsp + 40), rcx)?;
    a.lea(r9, ptr(rsp + 32))?;
    a.jmp(call)?;
    // A set in a register: copy it without SIGTRAP and pass the copy.
    for (label, reg) in
        [(&mut set_rsi, rsi), (&mut set_rdi, rdi), (&mut set_r10, r10), (&mut set_r8, r8)]
    {
        a.set_label(label)?;
        a.test(reg, reg)?;
        a.jz(call)?;
        a.mov(rcx, qword_ptr(reg))?;
        a.btr(rcx, SIGTRAP_BIT)?;
        a.mov(qword_ptr(rsp), rcx)?;
        a.mov(reg, rsp)?;
        a.jmp(call)?;
    }
    // rt_sigaction(sig = edi, act = rsi, oldact = rdx, size = r10).
    let mut emulate = a.create_label();
    a.set_label(&mut action_rsi)?;
    a.cmp(edi, 5)?;
    a.je(emulate)?;
    a.test(rsi, rsi)?;
    a.jz(call)?;
    copy_action(&mut a, rsp, rsi)?;
    a.btr(qword_ptr(rsp + SA_MASK), SIGTRAP_BIT)?;
    a.mov(rsi, rsp)?;
    a.jmp(call)?;
    // Of SIGTRAP: read the new action first and write the old one after, as the kernel
    // does (act and oldact may be the same buffer); then make the call a no-op that returns
    // 0: rt_sigprocmask(SIG_BLOCK, NULL, NULL, 8).
    a.set_label(&mut emulate)?;
    let mut no_old = a.create_label();
    let mut no_new = a.create_label();
    a.mov(r11, action)?;
    a.test(rsi, rsi)?;
    a.jz(no_old)?;
    copy_action(&mut a, rsp, rsi)?;
    a.set_label(&mut no_old)?;
    let mut old_done = a.create_label();
    a.test(rdx, rdx)?;
    a.jz(old_done)?;
    copy_action(&mut a, rdx, r11)?;
    a.set_label(&mut old_done)?;
    a.test(rsi, rsi)?;
    a.jz(no_new)?;
    copy_action(&mut a, r11, rsp)?;
    a.set_label(&mut no_new)?;
    a.mov(eax, SYS_RT_SIGPROCMASK)?;
    a.xor(edi, edi)?;
    a.xor(esi, esi)?;
    a.xor(edx, edx)?;
    a.mov(r10d, 8)?;

    a.set_label(&mut call)?;
    a.syscall()?;
    a.add(rsp, SCRATCH)?;
    for r in [r9, r8, r10, rdx, rsi, rdi] {
        a.pop(r)?;
    }
    a.popfq()?;
    a.lea(rsp, ptr(rsp + 128))?;
    // `end` labels the instruction after the guard (a label needs an instruction).
    a.set_label(&mut end)?;
    a.nop()?;
    Ok(a.take_instructions())
}

/// Copy a 32-byte `struct sigaction` from `[from]` to `[to]` through rcx.
fn copy_action(
    a: &mut CodeAssembler,
    to: AsmRegister64,
    from: AsmRegister64,
) -> Result<(), IcedError> {
    for off in (0..ACTION_LEN as i32).step_by(8) {
        a.mov(rcx, qword_ptr(from + off))?;
        a.mov(qword_ptr(to + off), rcx)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{BlockEncoder, BlockEncoderOptions, Decoder, DecoderOptions, InstructionBlock};
    use iced_x86::{Mnemonic, Register};

    fn encode() -> Vec<iced_x86::Instruction> {
        let g = signal_guard(0x7f00_0000_0000).unwrap();
        let b = BlockEncoder::encode(
            64,
            InstructionBlock::new(&g, 0x7f00_1000_0000),
            BlockEncoderOptions::NONE,
        )
        .unwrap();
        let mut d = Decoder::with_ip(64, &b.code_buffer, 0x7f00_1000_0000, DecoderOptions::NONE);
        let mut v = Vec::new();
        while d.can_decode() {
            v.push(d.decode());
        }
        v
    }

    /// The layout the removal code relies on (see `FRAME_BELOW`): two `syscall`s, the plain
    /// one first; at the wrapped one rsp is `FRAME_BELOW` under the program's, with the six
    /// registers from `SAVED_AT` and rflags above them.
    #[test]
    fn two_syscalls_and_the_saved_frame() {
        let v = encode();
        let calls: Vec<usize> =
            (0..v.len()).filter(|&k| v[k].mnemonic() == Mnemonic::Syscall).collect();
        assert_eq!(calls.len(), 2, "{v:?}");
        // The plain path leaves at once.
        assert_eq!(v[calls[0] + 1].mnemonic(), Mnemonic::Jmp);
        // Walk the wrapped path's stack changes up to its syscall.
        let start = v
            .iter()
            .position(|i| i.mnemonic() == Mnemonic::Lea && i.op0_register() == Register::RSP)
            .unwrap();
        let mut depth = 0i64;
        let mut pushed = Vec::new();
        for i in &v[start..] {
            match i.mnemonic() {
                Mnemonic::Lea if i.op0_register() == Register::RSP => {
                    depth -= i.memory_displacement64() as i64
                }
                Mnemonic::Pushfq => {
                    depth += 8;
                    pushed.push("rflags".to_string())
                }
                Mnemonic::Push => {
                    depth += 8;
                    pushed.push(format!("{:?}", i.op0_register()).to_lowercase())
                }
                Mnemonic::Sub if i.op0_register() == Register::RSP => {
                    depth += i.immediate32() as i64;
                    break;
                }
                _ => {}
            }
        }
        assert_eq!(depth as u64, FRAME_BELOW);
        pushed.reverse();
        assert_eq!(pushed[..6], SAVED);
        assert_eq!(pushed[6], "rflags");
    }
}
