//! The trap dispatcher a process target runs for `trap` splices: a SIGTRAP handler that looks
//! the `int3` up in a table kept by kerf and resumes the thread in that point's code patch,
//! chaining every other SIGTRAP to the program's own action.
//!
//! Its table (in the code heap: the target only reads it; kerf writes it while the target
//! is stopped):
//! ```text
//! +0   count        u64   number of table entries
//! +8   entries      [(point u64, patch u64); count], sorted by point
//! ```
//! Beside the table, in the data heap (the target writes it, kerf reads it while the program
//! runs): a hit count per entry, [`HIT_STRIDE`] bytes apart in the entries' order, so that
//! kerf can tell which trap sites the program runs often (each hit is a signal delivered:
//! microseconds, where a jump costs nanoseconds).
//!
//! The program's SIGTRAP action lives apart, in the data heap (the target writes it: the
//! signal-mask guard of [`crate::sigguard`] stores there what the program asks
//! `rt_sigaction` for), as the kernel's `struct sigaction`: handler (0 = SIG_DFL, 1 =
//! SIG_IGN), flags, restorer, mask.
//!
//! The handler is installed with `SA_NODEFER` and an empty mask: SIGTRAP is never blocked
//! while it runs, so a trap hit by a signal handler that interrupted it (or by anything it
//! chains to) is dispatched again instead of killing the process (a forced SIGTRAP on a thread
//! that blocks it resets the action to the default).

use iced_x86::code_asm::*;
use iced_x86::BlockEncoderOptions;

/// Offsets in the table.
pub const COUNT: u64 = 0;
pub const ENTRIES: u64 = 8;
/// Bytes of the table for `n` entries.
pub const fn data_len(n: usize) -> u64 {
    ENTRIES + 16 * n as u64
}
/// Bytes between two entries' hit counts: an entry's own stride, so that the offset the
/// search leaves in a register names its count too.
pub const HIT_STRIDE: u64 = 16;
// (The search's `shl r11, 4`.)
const _: () = assert!(HIT_STRIDE == (data_len(1) - ENTRIES));
/// Bytes of the hit counts for `n` entries.
pub fn hits_len(n: usize) -> u64 {
    HIT_STRIDE * n as u64
}

/// `uc_mcontext.gregs[REG_RIP]` in the x86-64 `ucontext_t` the kernel passes a handler:
/// `uc_flags`(8) + `uc_link`(8) + `uc_stack`(24) = 40, then 16 greg slots before RIP.
const UC_RIP: i32 = 40 + 16 * 8;

const SYS_RT_SIGRETURN: i32 = 15;
/// `rt_sigaction`, which installs (and later removes) the dispatcher.
pub const SYS_RT_SIGACTION: i32 = 13;
const SYS_GETPID: i32 = 39;
const SYS_GETTID: i32 = 186;
const SYS_TGKILL: i32 = 234;
pub const SIGTRAP: i32 = 5;

/// `SA_SIGINFO | SA_ONSTACK | SA_RESTORER | SA_RESTART | SA_NODEFER`: a three-argument handler
/// that runs on the program's alternate stack if it has one, returns through our restorer,
/// lets interrupted system calls restart, and leaves SIGTRAP unblocked while it runs.
pub const DISPATCHER_FLAGS: u64 = 4 | 0x0800_0000 | 0x0400_0000 | 0x1000_0000 | 0x4000_0000;
/// `si_code` of the SIGTRAP an `int3` raises (`SI_KERNEL`); a SIGTRAP sent with `kill`,
/// `tgkill` or `sigqueue` has another, and is never taken for one of kerf's traps.
const SI_KERNEL: i32 = 0x80;
/// `si_code` in `siginfo_t`, after `si_signo` and `si_errno`.
const SI_CODE: i32 = 8;

/// The kernel's `struct sigaction` (handler, flags, restorer, mask) that installs the
/// dispatcher at `code` with its restorer at `code + restorer`; nothing is blocked.
pub fn sigaction(code: u64, restorer: usize) -> [u64; 4] {
    [code, DISPATCHER_FLAGS, code + restorer as u64, 0]
}

/// Machine code of the dispatcher, placed at `code`, with its table at `data`, the entries'
/// hit counts at `hits` and the program's SIGTRAP action at `action`. Returns `(bytes, restorer offset)`: the handler is at
/// offset 0 and the `sa_restorer` (which only calls rt_sigreturn) at the returned offset.
///
/// The handler may clobber any register: the kernel restores the interrupted thread's state
/// from the signal frame when the handler returns. It keeps rdi/rsi/rdx (signal number,
/// siginfo, ucontext) intact for chaining to the previous handler.
pub fn dispatcher(
    code: u64,
    data: u64,
    hits: u64,
    action: u64,
) -> Result<(Vec<u8>, usize), IcedError> {
    let mut a = CodeAssembler::new(64)?;
    let mut lp = a.create_label();
    let mut less = a.create_label();
    let mut found = a.create_label();
    let mut not_found = a.create_label();
    let mut default = a.create_label();
    let mut ignore = a.create_label();
    let mut sigreturn = a.create_label();

    // Only a SIGTRAP the kernel raised for an int3 can be one of kerf's.
    a.cmp(dword_ptr(rsi + SI_CODE), SI_KERNEL)?;
    a.jne(not_found)?;
    // rax = address of the int3 that trapped.
    a.mov(rax, qword_ptr(rdx + UC_RIP))?;
    a.dec(rax)?;
    a.mov(rcx, data)?;
    a.mov(r8, qword_ptr(rcx + COUNT as i32))?;
    a.xor(r9d, r9d)?;
    // Binary search over [r9, r8).
    a.set_label(&mut lp)?;
    a.cmp(r9, r8)?;
    a.jae(not_found)?;
    a.lea(r10, qword_ptr(r9 + r8))?;
    a.shr(r10, 1)?;
    a.mov(r11, r10)?;
    a.shl(r11, 4)?;
    a.cmp(rax, qword_ptr(rcx + r11 + ENTRIES as i32))?;
    a.je(found)?;
    a.jb(less)?;
    a.lea(r9, qword_ptr(r10 + 1))?;
    a.jmp(lp)?;
    a.set_label(&mut less)?;
    a.mov(r8, r10)?;
    a.jmp(lp)?;
    // Counted (threads may trap at once: a locked add), then resumed in the point's code
    // patch. r11 = the entry's index times 16 = its count's offset (`HIT_STRIDE`).
    a.set_label(&mut found)?;
    a.mov(r8, hits)?;
    a.lock().inc(qword_ptr(r8 + r11))?;
    a.mov(rax, qword_ptr(rcx + r11 + (ENTRIES + 8) as i32))?;
    a.mov(qword_ptr(rdx + UC_RIP), rax)?;
    a.ret()?;
    // Not ours: hand it to the program's previous handler, as if it had been called directly.
    a.set_label(&mut not_found)?;
    a.mov(rcx, action)?;
    a.mov(rax, qword_ptr(rcx))?;
    a.cmp(rax, 1)?;
    a.jb(default)?;
    a.je(ignore)?;
    a.jmp(rax)?;
    // SIG_DFL: restore the default action and send the signal again; it is delivered (and
    // kills the process as it would have) once this handler returns and unblocks it.
    a.set_label(&mut default)?;
    a.sub(rsp, 40)?;
    a.xor(eax, eax)?;
    // struct sigaction { handler = SIG_DFL, flags = 0, restorer = 0, mask = 0 } on the stack.
    a.mov(qword_ptr(rsp), rax)?;
    a.mov(qword_ptr(rsp + 8), rax)?;
    a.mov(qword_ptr(rsp + 16), rax)?;
    a.mov(qword_ptr(rsp + 24), rax)?;
    a.mov(eax, SYS_RT_SIGACTION)?;
    a.mov(edi, SIGTRAP)?;
    a.mov(rsi, rsp)?;
    a.xor(edx, edx)?;
    a.mov(r10d, 8)?;
    a.syscall()?;
    a.mov(eax, SYS_GETPID)?;
    a.syscall()?;
    a.mov(qword_ptr(rsp + 32), rax)?;
    a.mov(eax, SYS_GETTID)?;
    a.syscall()?;
    a.mov(rsi, rax)?;
    a.mov(rdi, qword_ptr(rsp + 32))?;
    a.mov(edx, SIGTRAP)?;
    a.mov(eax, SYS_TGKILL)?;
    a.syscall()?;
    a.add(rsp, 40)?;
    a.ret()?;
    // SIG_IGN: nothing to do.
    a.set_label(&mut ignore)?;
    a.ret()?;
    // sa_restorer: the handler returns here; rt_sigreturn restores the interrupted context.
    a.set_label(&mut sigreturn)?;
    a.mov(eax, SYS_RT_SIGRETURN)?;
    a.syscall()?;
    a.ud2()?;
    let r = a.assemble_options(code, BlockEncoderOptions::RETURN_NEW_INSTRUCTION_OFFSETS)?;
    let off = (r.label_ip(&sigreturn)? - code) as usize;
    Ok((r.inner.code_buffer, off))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dispatcher_assembles_and_restorer_calls_rt_sigreturn() {
        let (code, off) = dispatcher(0x7000_0000, 0x7000_1000, 0x7100_1000, 0x7100_0000).unwrap();
        assert!(code.len() > 60 && code.len() < 400, "{}", code.len());
        // mov eax, 15; syscall
        assert_eq!(&code[off..off + 7], &[0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05]);
        assert_eq!(data_len(3), 56);
        assert_eq!(hits_len(3), 48);
    }
}
