//! Code generation (DESIGN.md §2, §8): an open instrumentation IR ([`ir`]: small ops over
//! virtual registers and labels, with a line-based text form in [`text`]) lowered to x86-64
//! instructions for one point given what is live there ([`mod@lower`]); the trap dispatcher
//! and the signal-mask guard. Pure: it chooses no address and writes no memory; the patch
//! layer places and encodes what comes out.
//!
//! [`lower()`] keeps the closed set of [`Primitive`]s the session asks for today: it writes
//! them as an IR program ([`program`]) and lowers that.
//!
//! # Adding an instrumentation op
//!
//! An op is one variant of [`ir::Op`], its lowering, and its golden test. The record `emit`
//! of the tracer is the worked example:
//! 1. **The op** ([`ir::Op::Emit`]): its operands, what it reads and writes
//!    ([`ir::Op::reads`], [`ir::Op::writes`]), what [`ir::Program::check`] must refuse
//!    (more values than a slot holds), and its data layout if it has one ([`ring`]: the
//!    ring's header and slots, with a reader for kerf's side).
//! 2. **Its text** ([`text`]): a line in `parse_line` and one in `op_text`; the round trip
//!    test `every_op_round_trips` lists every op.
//! 3. **Its needs** (`needs` in [`mod@lower`]): fixed registers it clobbers (`rdtscp` uses
//!    `rax`, `rdx` and `rcx`, `cmpxchg` `rax` and `rdx`), how many temporaries it wants
//!    (two), which flags it writes, whether it uses the stack. The reservation helper then
//!    finds registers and saves what is live; the op's lowering never saves anything itself.
//! 4. **Its lowering** (`Lowerer::emit`): the instructions, with its own labels.
//! 5. **Its golden** (`tests/ir/emit.ir`, then `KERF_BLESS=1 cargo test -p kerf-codegen
//!    --test golden`): the lowered code for every liveness situation, read once by a person
//!    and committed; and where the op can run in a test process, a case in `tests/exec.rs`
//!    that runs it (`emit_from_threads_fills_the_ring_in_order`).

#![forbid(unsafe_code)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

pub mod ir;
pub mod lower;
pub mod ring;
pub mod sigguard;
pub mod templates;
pub mod text;
pub mod timer;
mod timer_code;
pub mod trap;

use iced_x86::code_asm::IcedError;
use iced_x86::Instruction;
pub use ir::Clock;
use ir::{Addr, Cond, Op, Program, Src, TimerOp, Width};
use kerf_arch::x86_64::{FlagSet, RegSet};
pub use lower::{
    lower_program, lower_program_split, AhSave, At, CpuRead, Demand, FlagSave, KernelReads,
    LowerError, Reservation, SlabRing,
};

/// One instrumentation primitive, with the addresses of the data it updates (in the target's
/// data heap, within ±2 GiB of where the code will run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    /// Atomically add one to the 64-bit counter at `slot`.
    Count { slot: u64 },
    /// Count a call of the timer block at `timer` and, if this thread is not already inside,
    /// start its interval on `clock` (see [`timer`]).
    TimerStart { timer: u64, clock: Clock },
    /// Leave the timer at `timer`; the outermost exit adds the thread's interval.
    TimerStop { timer: u64, clock: Clock },
    /// At a direct tail call of a function the timer at `timer` times: the thread stays
    /// inside, and notes a pending tail call in its tail stack (in the area at `tails`) for
    /// the stack pointer the jump has, `stack` (see [`timer`]'s "Tail calls").
    TimerTailCall { timer: u64, clock: Clock, tails: u64, stack: SpAt },
    /// At a return (or a jump out of probed code) of a function reached by tail calls: every
    /// pending tail call of this thread noted for the stack pointer this exit has, `stack`,
    /// ends here and leaves its timer.
    TimerTailReturn { tails: u64, stack: SpAt },
    /// At the kernel's context switch: keep the tasks' off-CPU clocks in `table` (see
    /// [`ir::TimerOp::Switch`]); runs whatever the predicates.
    OffCpuSwitch { out: u64, table: u64, pid: u32 },
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
    /// Where the thread id is in the thread pointer's structure, in a process where it is
    /// known ([`lower::At::thread_id`]).
    pub thread_id: Option<u32>,
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
            thread_id: None,
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

impl From<LowerError> for CodegenError {
    fn from(e: LowerError) -> Self {
        CodegenError(e.to_string())
    }
}

/// The IR program of `prims` (run in order) under the predicates of `ctx`: counters first,
/// then the timers, all skipped by a thread that fails a predicate.
pub fn program(prims: &[Primitive], ctx: &Context) -> Program {
    let mut p = Program::new();
    let end = p.label("end");
    // Every task's context switches, before the predicates that skip the rest.
    for prim in prims {
        if let Primitive::OffCpuSwitch { out, table, pid } = *prim {
            p.push(Op::Timer(TimerOp::Switch { out, table, pid }));
        }
    }
    if ctx.only_thread.is_some() || ctx.only_id.is_some() {
        let t = p.vreg("thread");
        p.push(Op::Thread { dst: t });
        if let Some(tp) = ctx.only_thread {
            p.push(Op::Branch { cond: Cond::Ne, a: t, b: Src::Imm(tp), target: end });
        }
        if let Some((offset, id)) = ctx.only_id {
            let task = p.vreg("task");
            let addr = Addr::Based { base: t, disp: offset as i32 };
            p.push(Op::Load { dst: task, width: Width::W32, addr });
            p.push(Op::Branch { cond: Cond::Ne, a: task, b: Src::Imm(id as u64), target: end });
        }
    }
    for prim in prims {
        if let Primitive::Count { slot } = *prim {
            p.push(Op::AddMem { addr: Addr::Abs(slot), src: Src::Imm(1), atomic: true });
        }
    }
    for prim in prims {
        let t = match *prim {
            Primitive::Count { .. } | Primitive::OffCpuSwitch { .. } => continue,
            Primitive::TimerStart { timer, clock } => TimerOp::Start { timer, clock },
            Primitive::TimerStop { timer, clock } => TimerOp::Stop { timer, clock },
            Primitive::TimerTailCall { timer, clock, tails, stack } => {
                TimerOp::TailCall { timer, clock, tails, stack }
            }
            Primitive::TimerTailReturn { tails, stack } => TimerOp::TailReturn { tails, stack },
        };
        p.push(Op::Timer(t));
    }
    if p.ops.iter().any(|o| matches!(o, Op::Branch { .. })) {
        p.push(Op::Label(end));
    } else {
        p.labels.clear();
    }
    p
}

/// Lower `prims` (run in order) for a point: [`program`], then [`lower_program`]. Registers
/// the code needs are taken from the dead ones, saved and restored around it only when too
/// few are dead, and flags saved only when a flag it writes is live.
///
/// Branches inside the snippet name their targets by label id (the instruction's `ip`, small
/// numbers); the patch encoder keeps those ids and gives displaced instructions ip 0.
pub fn lower(prims: &[Primitive], ctx: &Context) -> Result<Vec<Instruction>, CodegenError> {
    let at = At { thread_id: ctx.thread_id, ..At::new(ctx.live, ctx.env, ctx.thread, ctx.threads) };
    Ok(lower_program(&program(prims, ctx), &at)?)
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
