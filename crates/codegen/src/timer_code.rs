//! The cycle timers' code (see [`crate::timer`] for their layout and semantics): the IR's
//! timer ops are composites lowered here with fixed registers, one thread-slot lookup for a
//! run of them ([`thread_slot`], which `emit.thread` uses too).

use crate::ir::{Clock, TimerOp, OFFCPU_TID_LIMIT};
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
    tid: Option<u32>,
    threads: u64,
    frame: i32,
    done: CodeLabel,
) -> Result<(), IcedError> {
    let mut lost = a.create_label();
    // Context switches first: they need no thread slot.
    for p in run {
        if let TimerOp::Switch { out, table, pid } = *p {
            lower_switch(a, out, table, pid)?;
        }
    }
    if run.iter().all(|p| matches!(p, TimerOp::Switch { .. })) {
        a.jmp(done)?;
        a.set_label(&mut lost)?;
        return a.nop();
    }
    thread_slot(a, thread, tid, threads, lost)?;
    // rcx = slot index, kept across the timers; rax, rdx, r10, r11 are scratch.
    for p in run {
        let mut after = a.create_label();
        let (t, clock, start) = match *p {
            TimerOp::Start { timer, clock } => (timer, clock, true),
            TimerOp::Stop { timer, clock } => (timer, clock, false),
            TimerOp::TailCall { timer, clock, tails, stack } => {
                lower_tail_call(a, timer, clock, thread, tails, stack, frame)?;
                continue;
            }
            TimerOp::TailReturn { tails, stack } => {
                lower_tail_return(a, thread, tails, stack, frame)?;
                continue;
            }
            TimerOp::Switch { .. } => continue,
        };
        // r11 = &states[slot] = timer + STATES + STATE_LEN * slot.
        state_of_slot(a, t)?;
        if start {
            a.add_instruction(templates::atomic_inc(t + timer::CALLS))?;
            a.mov(rdx, qword_ptr(r11 + timer::STATE_DEPTH as i32))?;
            a.inc(qword_ptr(r11 + timer::STATE_DEPTH as i32))?;
            a.test(rdx, rdx)?;
            a.jnz(after)?;
            a.add_instruction(templates::atomic_inc(t + timer::OUTER))?;
            a.inc(qword_ptr(r11 + timer::STATE_OUTER as i32))?;
            read_clock(a, clock, thread)?;
            a.mov(qword_ptr(r11 + timer::STATE_START as i32), rax)?;
        } else {
            leave_timer(a, t, clock, thread, after)?;
        }
        a.set_label(&mut after)?;
    }
    a.jmp(done)?;
    a.set_label(&mut lost)?;
    let mut counted = false;
    for p in run {
        if let TimerOp::Start { timer, .. }
        | TimerOp::Stop { timer, .. }
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

/// `r11` = this thread's state in timer `t` (`rcx` = its slot). Writes `rax` and the flags.
fn state_of_slot(a: &mut CodeAssembler, t: u64) -> Result<(), IcedError> {
    a.add_instruction(templates::lea_rip(Register::R11, t + timer::STATES))?;
    a.mov(rax, rcx)?;
    a.shl(rax, timer::STATE_LEN.trailing_zeros())?;
    a.add(r11, rax)
}

/// `rcx` = this thread's slot in the thread table at `threads` ([`timer`]'s layout),
/// claiming a free one for a thread not there yet; jumps to `lost` when the table is full.
/// Writes `rax`, `rcx`, `rdx`, `r10` (the thread's key) and `r11` ([`REGS`]), and the flags.
/// Timers and the per-thread rings of `emit.thread` index their per-thread state by it.
///
/// With `tid` (the byte offset of the 32-bit thread id in the thread pointer's structure, in
/// a process), a slot is this thread's only if its owner has this thread's id too, and a
/// thread's first lookup takes over a dead owner's slot or claims one ([`timer`]'s "Forked
/// children"). That first lookup makes system calls, with four registers saved below the
/// red zone: `tid` is only for user code.
pub fn thread_slot(
    a: &mut CodeAssembler,
    thread: ThreadPointer,
    tid: Option<u32>,
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
    let owners = timer::OWNERS as i32;
    let mut probe = a.create_label();
    let mut next = a.create_label();
    let mut found = a.create_label();
    let mut first = a.create_label();
    home_slot(a, rcx, ecx)?;
    a.add_instruction(templates::lea_rip(Register::R11, threads))?;
    a.mov(edx, timer::THREAD_SLOTS as u32)?;
    a.set_label(&mut probe)?;
    a.mov(rax, qword_ptr(r11 + rcx * 8))?;
    a.cmp(rax, r10)?;
    match tid {
        // Linear probing: our key, or a free slot claimed with lock cmpxchg (rax = 0 expected).
        None => {
            a.je(found)?;
            a.test(rax, rax)?;
            a.jnz(next)?;
            a.lock().cmpxchg(qword_ptr(r11 + rcx * 8), r10)?;
            a.je(found)?;
            a.cmp(rax, r10)?;
            a.je(found)?;
        }
        // 1. Our key and our thread id; another thread's slot with our key is passed over; a
        //    free slot ends the chain.
        Some(off) => {
            let mut other = a.create_label();
            a.jne(other)?;
            thread_id(a, off)?;
            a.cmp(dword_ptr(r11 + rcx * 8 + owners), eax)?;
            a.je(found)?;
            a.jmp(next)?;
            a.set_label(&mut other)?;
            a.test(rax, rax)?;
            a.jz(first)?;
        }
    }
    a.set_label(&mut next)?;
    a.inc(ecx)?;
    a.and(ecx, mask)?;
    a.dec(edx)?;
    a.jnz(probe)?;
    match tid {
        None => a.jmp(lost)?,
        Some(off) => {
            a.set_label(&mut first)?;
            first_lookup(a, off, threads, lost, found)?;
        }
    }
    a.set_label(&mut found)
}

/// `reg` (`low` its 32 bits) = the home slot of the key in `r10`, `((key >> 12) ^ (key >>
/// 23)) & mask` as [`timer::home_slot`]. Writes `rax`.
fn home_slot(
    a: &mut CodeAssembler,
    reg: AsmRegister64,
    low: AsmRegister32,
) -> Result<(), IcedError> {
    a.mov(reg, r10)?;
    a.shr(reg, 12)?;
    a.mov(rax, r10)?;
    a.shr(rax, 23)?;
    a.xor(reg, rax)?;
    a.and(low, (timer::THREAD_SLOTS - 1) as u32)
}

/// A thread's first lookup (steps 2 and 3 of [`timer`]'s "Forked children"), the key in
/// `r10`: `rcx` = the slot taken over or claimed, then on to `found`; or on to `lost`.
/// `rdi`, `rsi`, `r8` and `r9` are saved below the red zone and a probe count above them:
/// `r8` = the slot probed, `r9` = our owner word once a slot is to be written (the system
/// calls write `rcx` and `r11`).
fn first_lookup(
    a: &mut CodeAssembler,
    tid: u32,
    threads: u64,
    lost: CodeLabel,
    found: CodeLabel,
) -> Result<(), IcedError> {
    let owners = timer::OWNERS as i32;
    let mut take_over = a.create_label();
    let mut pass = a.create_label();
    let mut unclaimed = a.create_label();
    let mut took = a.create_label();
    a.lea(rsp, qword_ptr(rsp - RED_ZONE))?;
    for r in [rdi, rsi, r8, r9] {
        a.push(r)?;
    }
    a.push(0)?;
    let probes = qword_ptr(rsp);
    // r9 = our owner word once needed (0 until then: a pid is never 0).
    a.xor(r9d, r9d)?;
    // 3. The first free slot of the chain: its key claimed, then its owner written. First, so
    //    that a dead thread's slot keeps that thread's per-thread shares apart for as long as
    //    the table has room.
    home_slot(a, r8, r8d)?;
    a.add_instruction(templates::lea_rip(Register::R11, threads))?;
    let mut probe = a.create_label();
    a.set_label(&mut probe)?;
    a.mov(rax, qword_ptr(r11 + r8 * 8))?;
    a.test(rax, rax)?;
    a.jnz(unclaimed)?;
    a.lock().cmpxchg(qword_ptr(r11 + r8 * 8), r10)?;
    a.jne(unclaimed)?;
    owner_word(a, tid, threads)?;
    a.mov(qword_ptr(r11 + r8 * 8 + owners), r9)?;
    a.jmp(took)?;
    a.set_label(&mut unclaimed)?;
    next_in_chain(a, probe)?;
    // 2. The table full: each slot with our key and an owner of our process that is gone is
    //    taken over (a thread on a dead thread's stack reuses its slot, as with keys alone).
    home_slot(a, r8, r8d)?;
    a.mov(probes, 0)?;
    a.set_label(&mut take_over)?;
    a.add_instruction(templates::lea_rip(Register::R11, threads))?;
    a.mov(rax, qword_ptr(r11 + r8 * 8))?;
    a.cmp(rax, r10)?;
    a.jne(pass)?;
    owner_word(a, tid, threads)?;
    a.mov(rax, qword_ptr(r11 + r8 * 8 + owners))?;
    a.mov(esi, eax)?;
    a.test(esi, esi)?;
    a.jz(pass)?;
    // Another process's thread (a forked child's, its parent's) is never signalled: seccomp
    // policies commonly punish a kill aimed outside the process (Chromium's renderers, forked
    // from a zygote, crash on one).
    a.mov(rdi, rax)?;
    a.shr(rdi, 32)?;
    a.mov(rdx, r9)?;
    a.shr(rdx, 32)?;
    a.cmp(rdi, rdx)?;
    a.jne(pass)?;
    a.xor(edx, edx)?;
    a.mov(eax, SYS_TGKILL)?;
    a.syscall()?;
    a.cmp(rax, -ESRCH)?;
    a.jne(pass)?;
    // The owner just found gone, if no other thread took the slot meanwhile.
    a.mov(rax, rdi)?;
    a.shl(rax, 32)?;
    a.or(rax, rsi)?;
    a.add_instruction(templates::lea_rip(Register::R11, threads))?;
    a.lock().cmpxchg(qword_ptr(r11 + r8 * 8 + owners), r9)?;
    a.je(took)?;
    a.set_label(&mut pass)?;
    next_in_chain(a, take_over)?;
    restore(a)?;
    a.jmp(lost)?;
    a.set_label(&mut took)?;
    a.mov(rcx, r8)?;
    restore(a)?;
    a.jmp(found)
}

/// `eax` = this thread's id, the 32 bits at `fs:[off]`; 0 for a thread with no thread
/// pointer (key 1: a thread made by a bare `clone`, whose `fs` base is 0, where the load
/// would fault). Such threads share a slot, as they did with keys alone. Writes the flags.
fn thread_id(a: &mut CodeAssembler, off: u32) -> Result<(), IcedError> {
    let mut none = a.create_label();
    a.xor(eax, eax)?;
    a.cmp(r10, 1)?;
    a.je(none)?;
    a.mov(eax, dword_ptr(off as u64).fs())?;
    a.set_label(&mut none)?;
    Ok(())
}

/// [`first_lookup`]'s step to the next slot of the chain (`r8`), back to `again` unless the
/// probe count (on the stack) says every slot was seen.
fn next_in_chain(a: &mut CodeAssembler, again: CodeLabel) -> Result<(), IcedError> {
    a.inc(r8d)?;
    a.and(r8d, (timer::THREAD_SLOTS - 1) as i32)?;
    a.inc(qword_ptr(rsp))?;
    a.cmp(qword_ptr(rsp), timer::THREAD_SLOTS as i32)?;
    a.jb(again)
}

/// `r9` = this thread's owner word, `(getpid() << 32) | tid`, unless it is there already (not
/// 0: a pid never is); then `r11` = the thread table again. Writes `rax`, `rcx`. Only when a
/// slot with our key is to be looked at or a slot is to be written: a thread that finds the
/// table full of other keys makes no system call.
fn owner_word(a: &mut CodeAssembler, tid: u32, threads: u64) -> Result<(), IcedError> {
    let mut known = a.create_label();
    a.test(r9, r9)?;
    a.jnz(known)?;
    a.mov(eax, templates::SYS_GETPID)?;
    a.syscall()?;
    a.mov(r9, rax)?;
    a.shl(r9, 32)?;
    thread_id(a, tid)?;
    a.or(r9, rax)?;
    a.add_instruction(templates::lea_rip(Register::R11, threads))?;
    a.set_label(&mut known)?;
    Ok(())
}

/// Bytes below `rsp` a leaf function of the program may use (System V red zone).
const RED_ZONE: i32 = 128;
use crate::templates::SYS_TGKILL;
const ESRCH: i32 = 3;

/// The probe count and `first_lookup`'s saved registers off the stack, then the red zone back
/// (`lea`, not `add`: the flags are the caller's to clobber, but `lea` is what the saves used).
fn restore(a: &mut CodeAssembler) -> Result<(), IcedError> {
    a.lea(rsp, qword_ptr(rsp + 8))?;
    for r in [r9, r8, rsi, rdi] {
        a.pop(r)?;
    }
    a.lea(rsp, qword_ptr(rsp + RED_ZONE))
}

/// `rax` = the 32-bit thread id at byte `tid` of the thread pointer's structure
/// (zero-extended), or 0 for a thread without a thread pointer. Unlike [`thread_id`] it
/// loads the thread pointer again: `r10` holds the key only until a clock or a tail op
/// reuses it.
fn thread_id_of(a: &mut CodeAssembler, thread: ThreadPointer, tid: u32) -> Result<(), IcedError> {
    let mut none = a.create_label();
    thread_pointer(a, rax, thread)?;
    a.test(rax, rax)?;
    a.jz(none)?;
    a.mov(eax, dword_ptr(rax + tid as i32))?;
    a.set_label(&mut none)?;
    a.nop()
}

/// `reg` = the thread pointer (0 for a thread without one).
fn thread_pointer(
    a: &mut CodeAssembler,
    reg: AsmRegister64,
    thread: ThreadPointer,
) -> Result<(), IcedError> {
    match thread {
        ThreadPointer::FsBase => a.rdfsbase(reg),
        ThreadPointer::FsSelf => a.mov(reg, qword_ptr(0u64).fs()),
        ThreadPointer::GsSlot(off) => a.mov(reg, qword_ptr(off as u64).gs()),
    }
}

/// A pending tail call's clock word: 0 for cycles, the off-CPU table with the thread id's
/// offset in its low bits (the table is a multiple of [`OFFCPU_TID_LIMIT`]).
fn clock_word(clock: Clock) -> u64 {
    match clock {
        Clock::Cycles => 0,
        Clock::OffCpu { table, tid } => table | tid as u64,
    }
}

/// `rax` = the clock of a pending tail call's word in `r10` ([`clock_word`]) now. Writes `rdx`
/// and `r10` too.
fn read_clock_word(a: &mut CodeAssembler, thread: ThreadPointer) -> Result<(), IcedError> {
    let mut off_cpu = a.create_label();
    let mut none = a.create_label();
    let mut done = a.create_label();
    a.test(r10, r10)?;
    a.jnz(off_cpu)?;
    read_clock(a, Clock::Cycles, thread)?;
    a.jmp(done)?;
    a.set_label(&mut off_cpu)?;
    // rax = the thread id at the word's offset (0 without a thread pointer), r10 = the table.
    a.mov(eax, r10d)?;
    a.and(eax, (OFFCPU_TID_LIMIT - 1) as i32)?;
    thread_pointer(a, rdx, thread)?;
    a.test(rdx, rdx)?;
    a.jz(none)?;
    a.mov(eax, dword_ptr(rdx + rax))?;
    a.and(r10, -(OFFCPU_TID_LIMIT as i32))?;
    a.mov(rax, qword_ptr(r10 + rax * 8))?;
    a.jmp(done)?;
    a.set_label(&mut none)?;
    a.and(r10, -(OFFCPU_TID_LIMIT as i32))?;
    a.mov(rax, qword_ptr(r10))?;
    a.set_label(&mut done)?;
    a.nop()
}

/// Leave timer `t` once (`r11` = this thread's state in it): the outermost exit adds the
/// interval; an exit with depth 0 (the thread entered before the splice) is unmatched. Ends
/// at `after` (the unmatched count falls through to it).
fn leave_timer(
    a: &mut CodeAssembler,
    t: u64,
    clock: Clock,
    thread: ThreadPointer,
    after: CodeLabel,
) -> Result<(), IcedError> {
    let mut unmatched = a.create_label();
    a.mov(rdx, qword_ptr(r11 + timer::STATE_DEPTH as i32))?;
    a.test(rdx, rdx)?;
    a.jz(unmatched)?;
    // The start is read before the depth drops: a signal handler that runs the function
    // in between starts its own interval and must not replace ours.
    a.mov(r10, qword_ptr(r11 + timer::STATE_START as i32))?;
    a.dec(qword_ptr(r11 + timer::STATE_DEPTH as i32))?;
    a.cmp(rdx, 1)?;
    a.jne(after)?;
    read_clock(a, clock, thread)?;
    a.sub(rax, r10)?;
    a.add_instruction(templates::atomic_add(t + timer::CYCLES, Register::RAX))?;
    a.add(qword_ptr(r11 + timer::STATE_CYCLES as i32), rax)?;
    a.jmp(after)?;
    a.set_label(&mut unmatched)?;
    a.add_instruction(templates::atomic_inc(t + timer::UNMATCHED))
}

/// `rax` = `clock` now (see [`Clock`]). Writes `rdx` too, and nothing else.
fn read_clock(a: &mut CodeAssembler, clock: Clock, thread: ThreadPointer) -> Result<(), IcedError> {
    match clock {
        Clock::Cycles => {
            a.rdtsc()?;
            a.shl(rdx, 32)?;
            a.or(rax, rdx)
        }
        Clock::OffCpu { table, tid } => {
            thread_id_of(a, thread, tid)?;
            a.add_instruction(templates::mov_imm64(Register::RDX, table))?;
            a.mov(rax, qword_ptr(rdx + rax * 8))
        }
    }
}

/// [`TimerOp::Switch`] at `__switch_to` (`rdi` = the task switched out, `rsi` = the one
/// switched in, both the point's: the timer templates write neither). Writes `rax`, `rcx`,
/// `rdx`, `r10`, `r11` and the flags. The words are written by the CPU that switches, with
/// interrupts off; only `next` reads its `table` word, after this, on this CPU.
fn lower_switch(a: &mut CodeAssembler, out: u64, table: u64, pid: u32) -> Result<(), IcedError> {
    let mut done = a.create_label();
    // rdx = now; out[prev] = now.
    a.rdtsc()?;
    a.shl(rdx, 32)?;
    a.or(rdx, rax)?;
    a.mov(eax, dword_ptr(rdi + pid as i32))?;
    a.add_instruction(templates::mov_imm64(Register::R10, out))?;
    a.mov(qword_ptr(r10 + rax * 8), rdx)?;
    // table[next] += now - out[next], once out[next] was set by a switch kerf saw.
    a.mov(eax, dword_ptr(rsi + pid as i32))?;
    a.mov(rcx, qword_ptr(r10 + rax * 8))?;
    a.test(rcx, rcx)?;
    a.jz(done)?;
    a.mov(qword_ptr(r10 + rax * 8), 0)?;
    a.sub(rdx, rcx)?;
    a.add_instruction(templates::mov_imm64(Register::R11, table))?;
    a.add(qword_ptr(r11 + rax * 8), rdx)?;
    a.set_label(&mut done)?;
    a.nop()
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
    clock: Clock,
    thread: ThreadPointer,
    tails: u64,
    at: SpAt,
    frame: i32,
) -> Result<(), IcedError> {
    let mut push = a.create_label();
    let mut plain = a.create_label();
    let mut after = a.create_label();
    let top = |k: i32| qword_ptr(rax + k);
    // r11 = &states[slot]; rdx = depth.
    state_of_slot(a, t)?;
    a.mov(rdx, qword_ptr(r11 + timer::STATE_DEPTH as i32))?;
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
    match clock_word(clock) {
        0 => a.mov(top(24), 0)?,
        w => {
            a.add_instruction(templates::mov_imm64(Register::R10, w))?;
            a.mov(top(24), r10)?;
        }
    }
    a.mov(top(0), rdi)?;
    a.jmp(after)?;
    a.set_label(&mut plain)?;
    leave_timer(a, t, clock, thread, after)?;
    a.set_label(&mut after)?;
    a.nop()
}

/// [`TimerOp::TailReturn`], after the thread lookup (registers as for
/// [`lower_tail_call`]): pops every pending tail call noted for this stack pointer, newest
/// first, and leaves its timer by its levels; the one that reaches depth 0 adds the interval.
fn lower_tail_return(
    a: &mut CodeAssembler,
    thread: ThreadPointer,
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
    // The whole entry is read before it is popped (a signal handler may push another there
    // afterwards): r8 = the timer, r10 = its clock word, rax = the levels.
    a.mov(r8, qword_ptr(rax + 8))?;
    a.mov(r10, qword_ptr(rax + 24))?;
    a.mov(rax, qword_ptr(rax + 16))?;
    a.dec(qword_ptr(rsi))?;
    // r11 = &states[slot] of that timer.
    a.mov(r11, rcx)?;
    a.shl(r11, timer::STATE_LEN.trailing_zeros())?;
    a.add(r11, r8)?;
    a.add(r11, timer::STATES as i32)?;
    a.mov(rdx, qword_ptr(r11 + timer::STATE_DEPTH as i32))?;
    a.test(rdx, rdx)?;
    a.jz(next)?;
    a.sub(rdx, rax)?;
    a.jbe(outermost)?;
    a.mov(qword_ptr(r11 + timer::STATE_DEPTH as i32), rdx)?;
    a.jmp(next)?;
    a.set_label(&mut outermost)?;
    // rdi = the start, read before the depth drops (as in `leave_timer`); it is the stack
    // pointer again before the next entry is looked at.
    a.mov(rdi, qword_ptr(r11 + timer::STATE_START as i32))?;
    a.mov(qword_ptr(r11 + timer::STATE_DEPTH as i32), 0)?;
    read_clock_word(a, thread)?;
    a.sub(rax, rdi)?;
    a.lock().add(qword_ptr(r8 + timer::CYCLES as i32), rax)?;
    a.add(qword_ptr(r11 + timer::STATE_CYCLES as i32), rax)?;
    load_sp(a, rdi, at, frame)?;
    a.jmp(next)?;
    a.set_label(&mut after)?;
    a.nop()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lookup_bytes(tid: Option<u32>) -> usize {
        let mut a = CodeAssembler::new(64).unwrap();
        let lost = a.create_label();
        thread_slot(&mut a, ThreadPointer::FsBase, tid, 0x10_0000, lost).unwrap();
        a.nop().unwrap();
        a.assemble(0x10_0000).unwrap().len()
    }

    /// The rooms the session reserves for a lookup's first-event path hold it.
    #[test]
    fn first_lookup_fits_its_room() {
        let extra = lookup_bytes(Some(0x2d0)) - lookup_bytes(None);
        assert!(extra as u64 <= timer::FIRST_LOOKUP_BYTES, "{extra} bytes");
    }
}
