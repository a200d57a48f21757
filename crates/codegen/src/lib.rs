//! Code generation (DESIGN.md §2): instrumentation primitives as a small IR, lowered to
//! x86-64 instructions for one point given what is live there. Pure: it chooses no address
//! and writes no memory; the patch layer places and encodes what comes out.

#![forbid(unsafe_code)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

pub mod sigguard;
pub mod templates;
pub mod timer;
pub mod trap;

use iced_x86::code_asm::*;
use iced_x86::{Instruction, Register};
use kerf_arch::x86_64::{FlagSet, Gpr, RegSet};

/// One instrumentation primitive, with the addresses of the data it updates (in the target's
/// data heap, within ±2 GiB of where the code will run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    /// Atomically add one to the 64-bit counter at `slot`.
    Count { slot: u64 },
    /// Count a call of the timer block at `timer` and, if this thread is not already inside,
    /// start its interval (see [`timer`]).
    TimerStart { timer: u64 },
    /// Leave the timer at `timer`; the outermost exit adds the thread's interval.
    TimerStop { timer: u64 },
    /// At a direct tail call of a function the timer at `timer` times: the thread stays
    /// inside, and notes a pending tail call in its tail stack (in the area at `tails`) for
    /// the stack pointer the jump has, `stack` (see [`timer`]'s "Tail calls").
    TimerTailCall { timer: u64, tails: u64, stack: SpAt },
    /// At a return (or a jump out of probed code) of a function reached by tail calls: every
    /// pending tail call of this thread noted for the stack pointer this exit has, `stack`,
    /// ends here and leaves its timer.
    TimerTailReturn { tails: u64, stack: SpAt },
}

impl Primitive {
    fn is_timer(&self) -> bool {
        !matches!(self, Primitive::Count { .. })
    }

    fn is_tail(&self) -> bool {
        matches!(self, Primitive::TimerTailCall { .. } | Primitive::TimerTailReturn { .. })
    }
}

/// The stack pointer some later instruction will have, in terms of the point's registers
/// (before the snippet saves anything): `base + disp`. An exit probe often sits a few
/// instructions before its `ret` or `jmp` (where a jump fits), and those instructions may pop
/// registers or tear the frame down (`leave`: `rbp`-based from then on).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpAt {
    pub base: SpBase,
    pub disp: i32,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpBase {
    Rsp,
    Rbp,
}

impl SpAt {
    /// The stack pointer at the point itself.
    pub const HERE: SpAt = SpAt { base: SpBase::Rsp, disp: 0 };
}

/// Where the generated code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Env {
    /// A user process: the 128 bytes below `rsp` (the SysV red zone) may hold live data, so
    /// nothing may be pushed before stepping over them.
    User,
    /// The kernel: no red zone, but interrupts may run the same code reentrantly.
    Kernel,
}

/// How generated code tells threads apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ThreadPointer {
    /// `rdfsbase`: needs the kernel to have enabled FSGSBASE (AT_HWCAP2 bit 1); never faults.
    FsBase,
    /// `mov r, fs:[0]`: the x86-64 TLS ABI keeps the thread pointer in the first word of the
    /// thread control block. Faults in a thread with no TLS (fs base 0), so the caller must
    /// have checked every thread has one.
    FsSelf,
    /// `mov r, gs:[offset]`: the kernel's per-CPU `current_task` (the running task), whose
    /// per-CPU offset the caller finds in kallsyms.
    GsSlot(u32),
}

/// What is live at the point, so generated code knows what it may clobber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveAt {
    pub regs: RegSet,
    pub flags: FlagSet,
}

impl LiveAt {
    /// Nothing known: everything live (the safe assumption).
    pub const ALL: LiveAt = LiveAt { regs: RegSet::ALL, flags: FlagSet::ALL };
}

/// Everything lowering needs to know about a point besides its primitives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Context {
    pub live: LiveAt,
    pub env: Env,
    pub thread: ThreadPointer,
    /// The data heap's thread table (used by timers).
    pub threads: u64,
    /// Run the primitives only in the thread with this thread pointer (`--tid`).
    pub only_thread: Option<u64>,
    /// Run the primitives only while the task whose 32-bit id is at this byte offset of the
    /// thread pointer's structure has this id (the kernel's `current->pid`, for `--pid`).
    pub only_id: Option<(u32, u32)>,
}

impl Context {
    /// A context for counters only, which need no thread identity.
    pub fn counting(live: LiveAt, env: Env) -> Context {
        Context {
            live,
            env,
            thread: ThreadPointer::FsBase,
            threads: 0,
            only_thread: None,
            only_id: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodegenError(pub String);

impl std::fmt::Display for CodegenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "code generation: {}", self.0)
    }
}

impl std::error::Error for CodegenError {}

impl From<IcedError> for CodegenError {
    fn from(e: IcedError) -> Self {
        CodegenError(e.to_string())
    }
}

/// Flags any of the thread-aware sequences may write (shifts, xor, cmp, inc, add...).
const ALL_ARITH: FlagSet = FlagSet(0x3f);

/// Lower `prims` (run in order) for a point. Registers the code needs are saved and restored
/// around it only when live there, and flags only when a flag it writes is live.
///
/// Branches inside the snippet name their targets by label id (the instruction's `ip`, small
/// numbers); the patch encoder keeps those ids and gives displaced instructions ip 0.
pub fn lower(prims: &[Primitive], ctx: &Context) -> Result<Vec<Instruction>, CodegenError> {
    let thread_aware =
        ctx.only_thread.is_some() || ctx.only_id.is_some() || prims.iter().any(Primitive::is_timer);
    if !thread_aware {
        // The common case, kept minimal: one `lock inc` per counter.
        let mut body = Vec::new();
        for p in prims {
            if let Primitive::Count { slot } = *p {
                body.push(templates::atomic_inc(slot));
            }
        }
        return Ok(wrap(body, RegSet::EMPTY, templates::INC_FLAGS, ctx));
    }
    let timers = prims.iter().any(Primitive::is_timer);
    let mut used = if timers {
        RegSet::of(&[Gpr::Rax, Gpr::Rcx, Gpr::Rdx, Gpr::R10, Gpr::R11])
    } else {
        RegSet::of(&[Gpr::R10, Gpr::R11])
    };
    if prims.iter().any(Primitive::is_tail) {
        used = used.union(RegSet::of(&[Gpr::Rsi, Gpr::Rdi, Gpr::R8]));
    }
    let (save, restore) = saves(used, ALL_ARITH, ctx);
    // How far the saves move rsp: the point's rsp is rsp + frame once they are done.
    let frame: i32 = save
        .iter()
        .map(|i| match i.code() {
            iced_x86::Code::Pushfq | iced_x86::Code::Push_r64 => 8,
            iced_x86::Code::Lea_r64_m => templates::RED_ZONE as i32,
            _ => 0,
        })
        .sum();
    let mut a = CodeAssembler::new(64)?;
    let mut done = a.create_label();
    for i in save {
        a.add_instruction(i)?;
    }
    // r10 = key of this thread (thread pointer + 1).
    match ctx.thread {
        ThreadPointer::FsBase => a.rdfsbase(r10)?,
        ThreadPointer::FsSelf => a.mov(r10, qword_ptr(0u64).fs())?,
        ThreadPointer::GsSlot(off) => a.mov(r10, qword_ptr(off as u64).gs())?,
    }
    a.inc(r10)?;
    if let Some(tp) = ctx.only_thread {
        a.mov(r11, timer::thread_key(tp))?;
        a.cmp(r10, r11)?;
        a.jne(done)?;
    }
    if let Some((offset, id)) = ctx.only_id {
        // r10 is the thread pointer + 1.
        a.mov(r11d, dword_ptr(r10 + (offset as i32 - 1)))?;
        a.cmp(r11d, id)?;
        a.jne(done)?;
    }
    for p in prims {
        if let Primitive::Count { slot } = *p {
            a.add_instruction(templates::atomic_inc(slot))?;
        }
    }
    if timers {
        lower_timers(&mut a, prims, ctx.threads, frame, done)?;
    }
    // `done` labels the first instruction after the body: the restore sequence, or a nop
    // when nothing needs restoring (a label needs an instruction to sit on).
    a.set_label(&mut done)?;
    if restore.is_empty() {
        a.nop()?;
    }
    for i in restore {
        a.add_instruction(i)?;
    }
    Ok(a.take_instructions())
}

/// Shift the label ids of a snippet by `offset`, so that it can be placed after another
/// snippet whose ids start at 1 as well: every labelled instruction (non-zero `ip`) and every
/// branch to a label id (a small target, below 64 KiB) moves up by `offset`.
pub fn relabel(insns: &mut [Instruction], offset: u64) {
    for i in insns.iter_mut() {
        if i.ip() != 0 {
            i.set_ip(i.ip() + offset);
        }
        let near = matches!(
            i.op0_kind(),
            iced_x86::OpKind::NearBranch16
                | iced_x86::OpKind::NearBranch32
                | iced_x86::OpKind::NearBranch64
        );
        if near && i.near_branch_target() != 0 && i.near_branch_target() < 0x1_0000 {
            i.set_near_branch64(i.near_branch_target() + offset);
        }
    }
}

/// Thread-slot lookup, then every timer primitive; jumps to `done` at the end. `frame` is
/// how far the saves moved rsp below the point's.
fn lower_timers(
    a: &mut CodeAssembler,
    prims: &[Primitive],
    threads: u64,
    frame: i32,
    done: CodeLabel,
) -> Result<(), IcedError> {
    let mask = (timer::THREAD_SLOTS - 1) as u32;
    let mut probe = a.create_label();
    let mut next = a.create_label();
    let mut found = a.create_label();
    let mut lost = a.create_label();
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
    a.set_label(&mut found)?;
    // rcx = slot index, kept across the timers; rax, rdx, r10, r11 are scratch.
    let timers: Vec<Primitive> = prims.iter().copied().filter(Primitive::is_timer).collect();
    for p in &timers {
        let mut after = a.create_label();
        let (t, start) = match *p {
            Primitive::TimerStart { timer } => (timer, true),
            Primitive::TimerStop { timer } => (timer, false),
            Primitive::TimerTailCall { timer, tails, stack } => {
                lower_tail_call(a, timer, tails, stack, frame)?;
                continue;
            }
            Primitive::TimerTailReturn { tails, stack } => {
                lower_tail_return(a, tails, stack, frame)?;
                continue;
            }
            Primitive::Count { .. } => continue,
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
    for p in &timers {
        if let Primitive::TimerStart { timer }
        | Primitive::TimerStop { timer }
        | Primitive::TimerTailCall { timer, .. } = *p
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

/// [`Primitive::TimerTailCall`], after the thread lookup (`rcx` = slot; `rax`, `rdx`, `rsi`,
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

/// [`Primitive::TimerTailReturn`], after the thread lookup (registers as for
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

/// Surround `body` with the saves it needs: the red zone stepped over in user space, flags
/// if `writes` meets the live flags, and every register of `used` that is live.
fn wrap(body: Vec<Instruction>, used: RegSet, writes: FlagSet, ctx: &Context) -> Vec<Instruction> {
    let (save, restore) = saves(used, writes, ctx);
    let mut out = save;
    out.extend(body);
    out.extend(restore);
    out
}

fn saves(used: RegSet, writes: FlagSet, ctx: &Context) -> (Vec<Instruction>, Vec<Instruction>) {
    let regs: Vec<Gpr> = used.intersect(ctx.live.regs).iter().collect();
    let flags = ctx.live.flags.0 & writes.0 != 0;
    let mut save = Vec::new();
    let mut restore = Vec::new();
    if regs.is_empty() && !flags {
        return (save, restore);
    }
    if ctx.env == Env::User {
        save.push(templates::adjust_rsp(-templates::RED_ZONE));
    }
    if flags {
        save.push(Instruction::with(iced_x86::Code::Pushfq));
    }
    for r in &regs {
        save.push(templates::push(*r));
    }
    for r in regs.iter().rev() {
        restore.push(templates::pop(*r));
    }
    if flags {
        restore.push(Instruction::with(iced_x86::Code::Popfq));
    }
    if ctx.env == Env::User {
        restore.push(templates::adjust_rsp(templates::RED_ZONE));
    }
    (save, restore)
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Formatter, IntelFormatter};

    fn text(v: &[Instruction]) -> Vec<String> {
        let mut f = IntelFormatter::new();
        v.iter()
            .map(|i| {
                let mut s = String::new();
                f.format(i, &mut s);
                s
            })
            .collect()
    }

    #[test]
    fn counter_without_live_flags_is_one_locked_increment() {
        let live = LiveAt { regs: RegSet::ALL, flags: FlagSet::EMPTY };
        let v = lower(&[Primitive::Count { slot: 0x7000 }], &Context::counting(live, Env::User))
            .unwrap();
        // iced shows a RIP-relative operand by its absolute target.
        assert_eq!(text(&v), ["lock inc qword ptr [7000h]"]);
        assert_eq!(v[0].memory_base(), iced_x86::Register::RIP);
        assert!(v[0].has_lock_prefix());
    }

    #[test]
    fn live_flags_are_saved_below_the_red_zone_in_user_space() {
        let v =
            lower(&[Primitive::Count { slot: 0x7000 }], &Context::counting(LiveAt::ALL, Env::User))
                .unwrap();
        assert_eq!(
            text(&v),
            [
                "lea rsp,[rsp-80h]",
                "pushfq",
                "lock inc qword ptr [7000h]",
                "popfq",
                "lea rsp,[rsp+80h]"
            ]
        );
        let k = lower(
            &[Primitive::Count { slot: 0x7000 }],
            &Context::counting(LiveAt::ALL, Env::Kernel),
        )
        .unwrap();
        assert_eq!(text(&k), ["pushfq", "lock inc qword ptr [7000h]", "popfq"]);
    }

    #[test]
    fn only_carry_live_needs_no_save() {
        // inc leaves CF alone.
        let live = LiveAt { regs: RegSet::ALL, flags: FlagSet(1) };
        let v = lower(&[Primitive::Count { slot: 0x7000 }], &Context::counting(live, Env::User))
            .unwrap();
        assert_eq!(v.len(), 1);
    }
}
