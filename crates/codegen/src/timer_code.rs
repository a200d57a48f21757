//! The cycle timers' code (see [`crate::timer`] for their layout and semantics): the IR's
//! timer ops are composites lowered here with fixed registers, one thread-slot lookup for a
//! run of them ([`thread_slot`], which `emit.thread` uses too).

use crate::ir::TimerOp;
use crate::{templates, timer, SpAt, SpBase, ThreadPointer};
use iced_x86::code_asm::*;
use iced_x86::Register;
use kerf_arch::x86_64::Gpr;

/// Registers every run of timer ops writes.
pub const REGS: [Gpr; 5] = [Gpr::Rax, Gpr::Rcx, Gpr::Rdx, Gpr::R10, Gpr::R11];
/// Registers the tail-call ops write besides.
pub const TAIL_REGS: [Gpr; 3] = [Gpr::Rsi, Gpr::Rdi, Gpr::R8];

/// The thread's key (`r10` = thread pointer + 1), its slot lookup, then every timer op of
/// `run`; jumps to `done` at the end. `frame` is how far the saves moved rsp below the
/// point's.
pub fn lower_timers(
    a: &mut CodeAssembler,
    run: &[TimerOp],
    thread: ThreadPointer,
    threads: u64,
    frame: i32,
    done: CodeLabel,
) -> Result<(), IcedError> {
    let mut lost = a.create_label();
    thread_slot(a, thread, threads, lost)?;
    // rcx = slot index, kept across the timers; rax, rdx, r10, r11 are scratch.
    for p in run {
        let mut after = a.create_label();
        let (t, start) = match *p {
            TimerOp::Start { timer } => (timer, true),
            TimerOp::Stop { timer } => (timer, false),
            TimerOp::TailCall { timer, tails, stack } => {
                lower_tail_call(a, timer, tails, stack, frame)?;
                continue;
            }
            TimerOp::TailReturn { tails, stack } => {
                lower_tail_return(a, tails, stack, frame)?;
                continue;
            }
        };
        // r11 = &states[slot] = timer + STATES + 16 * slot.
        a.add_instruction(templates::lea_rip(Register::R11, t + timer::STATES))?;
        a.mov(rax, rcx)?;
        a.shl(rax, 4)?;
        a.add(r11, rax)?;
        if start {
            a.add_instruction(templates::atomic_inc(t + timer::CALLS))?;
            a.mov(rdx, qword_ptr(r11))?;
            a.inc(qword_ptr(r11))?;
            a.test(rdx, rdx)?;
            a.jnz(after)?;
            a.add_instruction(templates::atomic_inc(t + timer::OUTER))?;
            a.rdtsc()?;
            a.shl(rdx, 32)?;
            a.or(rax, rdx)?;
            a.mov(qword_ptr(r11 + 8), rax)?;
        } else {
            leave_timer(a, t, after)?;
        }
        a.set_label(&mut after)?;
    }
    a.jmp(done)?;
    a.set_label(&mut lost)?;
    let mut counted = false;
    for p in run {
        if let TimerOp::Start { timer }
        | TimerOp::Stop { timer }
        | TimerOp::TailCall { timer, .. } = *p
        {
            a.add_instruction(templates::atomic_inc(timer + timer::LOST))?;
            counted = true;
        }
    }
    if !counted {
        // A tail return has no timer of its own to count in; `lost` needs an instruction.
        a.nop()?;
    }
    Ok(())
}

/// `rcx` = this thread's slot in the thread table at `threads` ([`timer`]'s layout),
/// claiming a free one for a thread not there yet; jumps to `lost` when the table is full.
/// Writes `rax`, `rcx`, `rdx`, `r10` (the thread's key) and `r11` ([`REGS`]), and the flags.
/// Timers and the per-thread rings of `emit.thread` index their per-thread state by it.
pub fn thread_slot(
    a: &mut CodeAssembler,
    thread: ThreadPointer,
    threads: u64,
    lost: CodeLabel,
) -> Result<(), IcedError> {
    match thread {
        ThreadPointer::FsBase => a.rdfsbase(r10)?,
        ThreadPointer::FsSelf => a.mov(r10, qword_ptr(0u64).fs())?,
        ThreadPointer::GsSlot(off) => a.mov(r10, qword_ptr(off as u64).gs())?,
    }
    a.inc(r10)?;
    let mask = (timer::THREAD_SLOTS - 1) as u32;
    let mut probe = a.create_label();
    let mut next = a.create_label();
    let mut found = a.create_label();
    // rcx = home slot: ((key >> 12) ^ (key >> 23)) & mask, as timer::home_slot.
    a.mov(rcx, r10)?;
    a.shr(rcx, 12)?;
    a.mov(rax, r10)?;
    a.shr(rax, 23)?;
    a.xor(rcx, rax)?;
    a.and(ecx, mask)?;
    a.add_instruction(templates::lea_rip(Register::R11, threads))?;
    a.mov(edx, timer::THREAD_SLOTS as u32)?;
    // Linear probing: our key, or a free slot claimed with lock cmpxchg (rax = 0 expected).
    a.set_label(&mut probe)?;
    a.mov(rax, qword_ptr(r11 + rcx * 8))?;
    a.cmp(rax, r10)?;
    a.je(found)?;
    a.test(rax, rax)?;
    a.jnz(next)?;
    a.lock().cmpxchg(qword_ptr(r11 + rcx * 8), r10)?;
    a.je(found)?;
    a.cmp(rax, r10)?;
    a.je(found)?;
    a.set_label(&mut next)?;
    a.inc(ecx)?;
    a.and(ecx, mask)?;
    a.dec(edx)?;
    a.jnz(probe)?;
    a.jmp(lost)?;
    a.set_label(&mut found)
}

/// Leave timer `t` once (`r11` = this thread's state in it): the outermost exit adds the
/// interval; an exit with depth 0 (the thread entered before the splice) is unmatched. Ends
/// at `after` (the unmatched count falls through to it).
fn leave_timer(a: &mut CodeAssembler, t: u64, after: CodeLabel) -> Result<(), IcedError> {
    let mut unmatched = a.create_label();
    a.mov(rdx, qword_ptr(r11))?;
    a.test(rdx, rdx)?;
    a.jz(unmatched)?;
    // The start is read before the depth drops: a signal handler that runs the function
    // in between starts its own interval and must not replace ours.
    a.mov(r10, qword_ptr(r11 + 8))?;
    a.dec(qword_ptr(r11))?;
    a.cmp(rdx, 1)?;
    a.jne(after)?;
    a.rdtsc()?;
    a.shl(rdx, 32)?;
    a.or(rax, rdx)?;
    a.sub(rax, r10)?;
    a.add_instruction(templates::atomic_add(t + timer::CYCLES, Register::RAX))?;
    a.jmp(after)?;
    a.set_label(&mut unmatched)?;
    a.add_instruction(templates::atomic_inc(t + timer::UNMATCHED))
}

/// `reg` = the stack pointer `at` describes, with the saves' `frame` below the point's rsp.
fn load_sp(
    a: &mut CodeAssembler,
    reg: AsmRegister64,
    at: SpAt,
    frame: i32,
) -> Result<(), IcedError> {
    match at.base {
        SpBase::Rsp => a.lea(reg, qword_ptr(rsp + (frame + at.disp))),
        SpBase::Rbp => a.lea(reg, qword_ptr(rbp + at.disp)),
    }
}

/// `rsi` = this thread's tail stack (`rcx` = its slot).
fn tail_stack(a: &mut CodeAssembler, tails: u64) -> Result<(), IcedError> {
    a.add_instruction(templates::lea_rip(Register::RSI, tails))?;
    a.mov(rax, rcx)?;
    a.shl(rax, timer::TAIL_LEN.trailing_zeros())?;
    a.add(rsi, rax)
}

/// [`TimerOp::TailCall`], after the thread lookup (`rcx` = slot; `rax`, `rdx`, `rsi`,
/// `rdi`, `r8`, `r10`, `r11` scratch). A thread that entered before the splice, or whose tail
/// stack is full, leaves here as at a plain exit. The entry is written so that a signal
/// handler that interrupts it (and runs timed code of its own) never finds a half-written
/// entry that could match: its stack pointer is 0 until last, and it is claimed before it is
/// filled.
fn lower_tail_call(
    a: &mut CodeAssembler,
    t: u64,
    tails: u64,
    at: SpAt,
    frame: i32,
) -> Result<(), IcedError> {
    let mut push = a.create_label();
    let mut plain = a.create_label();
    let mut after = a.create_label();
    let top = |k: i32| qword_ptr(rax + k);
    // r11 = &states[slot]; rdx = depth.
    a.add_instruction(templates::lea_rip(Register::R11, t + timer::STATES))?;
    a.mov(rax, rcx)?;
    a.shl(rax, 4)?;
    a.add(r11, rax)?;
    a.mov(rdx, qword_ptr(r11))?;
    a.test(rdx, rdx)?;
    a.jz(plain)?;
    tail_stack(a, tails)?;
    load_sp(a, rdi, at, frame)?;
    a.add_instruction(templates::lea_rip(Register::R8, t))?;
    // The same tail call again (a tail-recursive loop through the entry): one more level.
    a.mov(rdx, qword_ptr(rsi))?;
    a.test(rdx, rdx)?;
    a.jz(push)?;
    a.mov(rax, rdx)?;
    a.shl(rax, timer::TAIL_ENTRY.trailing_zeros())?;
    a.add(rax, rsi)?;
    a.cmp(top(0), rdi)?;
    a.jne(push)?;
    a.cmp(top(8), r8)?;
    a.jne(push)?;
    a.inc(top(16))?;
    a.jmp(after)?;
    a.set_label(&mut push)?;
    a.cmp(rdx, timer::TAIL_ENTRIES as i32)?;
    a.jae(plain)?;
    a.lea(rax, qword_ptr(rdx + 1))?;
    a.shl(rax, timer::TAIL_ENTRY.trailing_zeros())?;
    a.add(rax, rsi)?;
    a.mov(top(0), 0)?;
    a.inc(qword_ptr(rsi))?;
    a.mov(top(8), r8)?;
    a.mov(top(16), 1)?;
    a.mov(top(0), rdi)?;
    a.jmp(after)?;
    a.set_label(&mut plain)?;
    leave_timer(a, t, after)?;
    a.set_label(&mut after)?;
    a.nop()
}

/// [`TimerOp::TailReturn`], after the thread lookup (registers as for
/// [`lower_tail_call`]): pops every pending tail call noted for this stack pointer, newest
/// first, and leaves its timer by its levels; the one that reaches depth 0 adds the interval.
fn lower_tail_return(
    a: &mut CodeAssembler,
    tails: u64,
    at: SpAt,
    frame: i32,
) -> Result<(), IcedError> {
    let mut next = a.create_label();
    let mut outermost = a.create_label();
    let mut after = a.create_label();
    tail_stack(a, tails)?;
    load_sp(a, rdi, at, frame)?;
    a.set_label(&mut next)?;
    a.mov(rdx, qword_ptr(rsi))?;
    a.test(rdx, rdx)?;
    a.jz(after)?;
    a.mov(rax, rdx)?;
    a.shl(rax, timer::TAIL_ENTRY.trailing_zeros())?;
    a.add(rax, rsi)?;
    a.cmp(qword_ptr(rax), rdi)?;
    a.jne(after)?;
    a.mov(r8, qword_ptr(rax + 8))?;
    a.mov(r10, qword_ptr(rax + 16))?;
    a.dec(qword_ptr(rsi))?;
    // r11 = &states[slot] of that timer.
    a.mov(r11, rcx)?;
    a.shl(r11, 4)?;
    a.add(r11, r8)?;
    a.add(r11, timer::STATES as i32)?;
    a.mov(rdx, qword_ptr(r11))?;
    a.test(rdx, rdx)?;
    a.jz(next)?;
    // The start is read before the depth drops (see the plain exit).
    a.mov(rax, qword_ptr(r11 + 8))?;
    a.sub(rdx, r10)?;
    a.jbe(outermost)?;
    a.mov(qword_ptr(r11), rdx)?;
    a.jmp(next)?;
    a.set_label(&mut outermost)?;
    a.mov(qword_ptr(r11), 0)?;
    a.mov(r10, rax)?;
    a.rdtsc()?;
    a.shl(rdx, 32)?;
    a.or(rax, rdx)?;
    a.sub(rax, r10)?;
    a.lock().add(qword_ptr(r8 + timer::CYCLES as i32), rax)?;
    a.jmp(next)?;
    a.set_label(&mut after)?;
    a.nop()
}
