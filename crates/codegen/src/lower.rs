//! Lowering an IR [`Program`] at one point: the reservation helper chooses physical registers
//! for its virtual registers and temporaries from what is dead there (spilling live ones
//! only when too few are dead), then each op becomes a few instructions. A value whose last
//! use is an `emit.thread` with memory reads may take a register the reads' calls write
//! ([`LOOSE`]); values kept across a clean call take callee-saved ones.
//!
//! The code of a program is, in order:
//! 1. in a process, `lea rsp,[rsp-128]` if anything goes on the stack (the red zone below
//!    `rsp` may hold the function's data);
//! 2. `pushfq` if an op writes a flag that is live (where the point allows
//!    [`FlagSave::Ah`], instead `lahf` and `seto al` after step 3, `rax` saved if live);
//! 3. `push` of every register the code writes that is live, or that a `reg` op reads
//!    (so that `reg` finds the point's value in its stack slot whatever happened since);
//! 4. the ops;
//! 5. (`add al,0x7f` and `sahf`,) the pops, `popfq`, `lea rsp,[rsp+128]`, in reverse.

use crate::ir::{
    Addr, Cond, Label, MemRead, Op, Program, ReadKind, Rings, Src, TimerOp, VReg, Width, CALL_ARGS,
};
use crate::{ring, templates, timer_code, Env, LiveAt, ThreadPointer};
use iced_x86::code_asm::{
    dword_ptr, gpr32::get_gpr32, gpr64::get_gpr64, qword_ptr, AsmRegister64, CodeAssembler,
    CodeLabel,
};
use iced_x86::{Code, IcedError, Instruction, MemoryOperand, Register};
use kerf_arch::x86_64::{Flag, FlagSet, Gpr, RegSet};
use std::fmt;

use crate::templates::{SYS_NANOSLEEP, SYS_SCHED_YIELD, WAIT_NAP_NS, WAIT_SPINS};

/// What lowering needs to know about the point besides the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct At {
    pub live: LiveAt,
    pub env: Env,
    /// How `thread` (and the timers' slot lookup) finds the thread.
    pub thread: ThreadPointer,
    /// The data heap's thread table (used by timers).
    pub threads: u64,
    /// The byte offset of the 32-bit thread id in the thread pointer's structure (glibc's
    /// `struct pthread.tid`), in a process where it is known: the thread table's lookup
    /// tells a forked child's threads from its parent's by it ([`crate::timer`]).
    pub thread_id: Option<u32>,
    /// How the CPU is read (records, `cpu`).
    pub cpu: CpuRead,
    /// In the kernel: the routines memory reads call (`None`: reads are refused there).
    pub kernel_reads: Option<KernelReads>,
    /// How live flags the code writes are kept.
    pub flags_save: FlagSave,
    /// Where a thread keeps the address of its ring of `emit.thread` (`per: thread`), once
    /// looked up: in its own slab, through `gs` (`None`: every record looks its slot up in
    /// the thread table).
    pub ring_cache: Option<SlabRing>,
}

/// A thread's ring address kept in its slab, a region of its own whose address is its `gs`
/// base (kerf's JIT with per-thread slabs): a record reads the address there, and only a
/// thread's first record (the word 0) looks its slot up in the thread table and keeps the
/// ring's address, unless the slab is shared by several threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlabRing {
    /// `gs:[word]`: the ring's address, 0 until the first record.
    pub word: i32,
    /// `gs:[shared]`: a 32-bit word, nonzero in a slab that threads share (no address is
    /// kept there: each of its threads has a ring of its own).
    pub shared: i32,
}

impl At {
    /// A point with `rdtscp` for the CPU, no kernel readers, and flags kept on the stack.
    pub fn new(live: LiveAt, env: Env, thread: ThreadPointer, threads: u64) -> At {
        At {
            live,
            env,
            thread,
            threads,
            thread_id: None,
            cpu: CpuRead::Rdtscp,
            kernel_reads: None,
            flags_save: FlagSave::Stack,
            ring_cache: None,
        }
    }
}

/// How generated code keeps the arithmetic flags it writes where they are live.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FlagSave {
    /// `pushfq` ... `popfq`: any snippet, any CPU; `popfq` is microcoded (a dozen cycles
    /// and more), the dearest part of a block counter at a point with live flags.
    #[default]
    Stack,
    /// `lahf` and `seto al` into `rax` (saved first if live), `add al,0x7f` and `sahf` at
    /// the end: a few single-cycle instructions. Only in a process whose CPU has LAHF/SAHF in
    /// 64-bit mode (`lahf_lm`: every x86-64 CPU since 2005), and only for a snippet that
    /// leaves `rax` alone (neither writes it as a fixed register nor reads the point's
    /// value of it) and makes no call: any other falls back to the stack.
    Ah,
}

/// How generated code reads the CPU it runs on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CpuRead {
    /// `rdtscp`: the time and `TSC_AUX` together; on every x86-64 CPU Linux runs on, but it
    /// waits for earlier instructions, which doubles the cost of an event (~10 -> ~20 ns).
    #[default]
    Rdtscp,
    /// `rdtsc`, then `rdpid` for `TSC_AUX`: as cheap as `rdtsc` alone; only where the CPU has
    /// RDPID (Intel Ice Lake, AMD Zen 2 and later): #UD elsewhere, so the session checks.
    Rdpid,
}

/// Kernel routines generated code calls to read memory without faulting (their addresses,
/// from kallsyms; 0: missing, and a read that needs it is refused).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelReads {
    /// `long (void *dst, const void *src, size_t size)`: 0 or -EFAULT.
    pub copy_from_kernel_nofault: u64,
    pub copy_from_user_nofault: u64,
    /// `long (char *dst, const void *src, long count)`: the length with its NUL, `count`
    /// when cut, or -EFAULT.
    pub strncpy_from_kernel_nofault: u64,
    pub strncpy_from_user_nofault: u64,
}

impl KernelReads {
    /// The routine for a read of `kind`, and whether it returns 0 for success (the copies)
    /// rather than a length (the string copies).
    pub fn routine(&self, kind: ReadKind) -> (u64, bool) {
        match kind {
            ReadKind::Bytes => (self.copy_from_kernel_nofault, true),
            ReadKind::UserBytes => (self.copy_from_user_nofault, true),
            ReadKind::Str => (self.strncpy_from_kernel_nofault, false),
            ReadKind::UserStr => (self.strncpy_from_user_nofault, false),
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LowerError {
    /// The program does not check ([`Program::check`]): the op's index and what is wrong.
    Check { op: usize, what: String },
    /// More registers are needed than the point has to give, even spilling.
    Registers { need: usize, available: usize },
    /// The assembler refused an instruction.
    Assemble(String),
    /// Op `op` (an `emit.thread`) reads memory in the kernel, which needs the driver's
    /// non-faulting reader (not there yet); a process reads with `process_vm_readv`.
    KernelMemoryRead { op: usize },
    /// A `tid` where the thread id's place is not known (not glibc's libc, or the kernel).
    NoThreadId,
}

impl fmt::Display for LowerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LowerError::Check { op, what } => write!(f, "op {op}: {what}"),
            LowerError::Registers { need, available } => {
                write!(f, "the program needs {need} registers, the point has {available}")
            }
            LowerError::Assemble(e) => write!(f, "assembling: {e}"),
            LowerError::KernelMemoryRead { op } => write!(
                f,
                "op {op}: a memory read in the kernel needs the kernel's fault-free reader for \
                 it (copy_from_kernel_nofault and kin), which kallsyms does not name"
            ),
            LowerError::NoThreadId => {
                write!(f, "a thread id is read here, but where the thread keeps it is not known")
            }
        }
    }
}

impl std::error::Error for LowerError {}

impl From<IcedError> for LowerError {
    fn from(e: IcedError) -> Self {
        LowerError::Assemble(e.to_string())
    }
}

/// The order scratch registers are taken in, among the dead ones first, then among the live
/// ones (which are spilled). `r10` and `r11` first: no ABI passes anything in them at a call
/// or a return, so they are the likeliest to be dead; callee-saved ones last.
pub const PREFERENCE: [Gpr; 15] = [
    Gpr::R10,
    Gpr::R11,
    Gpr::R9,
    Gpr::R8,
    Gpr::Rdi,
    Gpr::Rsi,
    Gpr::Rcx,
    Gpr::Rdx,
    Gpr::Rax,
    Gpr::Rbx,
    Gpr::Rbp,
    Gpr::R12,
    Gpr::R13,
    Gpr::R14,
    Gpr::R15,
];

/// Registers that survive a clean call, for values the program keeps across one.
const CALLEE_SAVED: [Gpr; 6] = [Gpr::Rbx, Gpr::R12, Gpr::R13, Gpr::R14, Gpr::R15, Gpr::Rbp];

/// Registers a value may live in when its last use is an `emit.thread` with memory reads
/// (a "loose" value): the reads' system calls or kernel calls write them, but only after
/// the values are in the record and the reads' sources in their status words, and nothing
/// in the emit before that (time, thread-slot lookup, reservation) writes them.
pub const LOOSE: [Gpr; 4] = [Gpr::R9, Gpr::R8, Gpr::Rdi, Gpr::Rsi];

/// What a snippet asks of a point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Demand {
    /// Scratch registers it needs.
    pub need: usize,
    /// Loose values besides: registers for them come from [`LOOSE`] first (clobbered or
    /// kept ones too), then from the pool.
    pub loose: usize,
    /// Fixed registers its instructions write (saved if live, never handed out but as
    /// loose registers).
    pub clobbers: RegSet,
    /// Registers whose value at the point it reads (saved if written, never handed out but
    /// as loose registers: `reg` reads a saved register from its save).
    pub keep: RegSet,
    /// Flags it writes.
    pub flags: FlagSet,
    /// Whether it uses the stack even if nothing is saved (a call).
    pub stack: bool,
}

/// The registers and saves of one snippet at one point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reservation {
    /// The scratch registers handed out: the first `loose` for loose values, then the
    /// others in the order asked for (the loose values [`LOOSE`] had no room for first).
    pub scratch: Vec<Gpr>,
    /// How many of `scratch` are from [`LOOSE`].
    pub loose: usize,
    /// Registers pushed, in push order (encoding order).
    pub saved: Vec<Gpr>,
    /// Whether RFLAGS is pushed.
    pub flags: bool,
    /// The flags kept in `rax` instead ([`FlagSave::Ah`]).
    pub ah: Option<AhSave>,
    /// Whether `rsp` steps over the red zone first.
    pub red_zone: bool,
}

/// Flags kept in `rax`: SF, ZF, AF, PF and CF by `lahf` into `ah` (`low`), OF by `seto al`
/// (`of`). Restoring OF is `add al,0x7f` (0x80 overflows, 0x7f does not), which writes every
/// flag: with it, the five are restored after it by `sahf` whenever any of them is live,
/// written by the snippet or not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AhSave {
    pub low: bool,
    pub of: bool,
}

impl Reservation {
    /// Reserve what `d` asks for at a point where `live` is live: scratch registers from
    /// `pool` (in its order: dead ones first, then live ones, which are saved), and saves
    /// of the registers and flags the snippet writes that are live.
    pub fn new(
        d: &Demand,
        pool: &[Gpr],
        live: LiveAt,
        env: Env,
        save: FlagSave,
    ) -> Result<Reservation, LowerError> {
        let Demand { need, loose, clobbers, keep, flags, stack } = *d;
        let kept = FlagSet(live.flags.0 & flags.0);
        let rax = RegSet::of(&[Gpr::Rax]);
        let in_ah = save == FlagSave::Ah
            && env == Env::User
            && !kept.is_empty()
            && !stack
            && clobbers.intersect(rax).is_empty()
            && keep.intersect(rax).is_empty();
        if in_ah {
            // rax holds the flags from the prologue to the epilogue: a fixed register the
            // snippet writes. Too few registers left for the rest: keep them on the stack.
            let d = Demand { clobbers: clobbers.union(rax), flags: FlagSet::EMPTY, ..*d };
            if let Ok(mut r) = Reservation::new(&d, pool, live, env, FlagSave::Stack) {
                let of_set = FlagSet(1 << Flag::Of as u8);
                let of = kept.contains(Flag::Of);
                let low =
                    !kept.minus(of_set).is_empty() || (of && !live.flags.minus(of_set).is_empty());
                r.ah = Some(AhSave { low, of });
                return Ok(r);
            }
        }
        let dead_first = |regs: &[Gpr], n: usize| -> Vec<Gpr> {
            let dead = regs.iter().filter(|r| !live.regs.contains(**r));
            let spilled = regs.iter().filter(|r| live.regs.contains(**r));
            dead.chain(spilled).copied().take(n).collect()
        };
        let mut scratch = dead_first(&LOOSE, loose);
        let taken = RegSet::of(&scratch);
        let rest = need + loose - scratch.len();
        let usable: Vec<Gpr> = pool
            .iter()
            .copied()
            .filter(|r| *r != Gpr::Rsp && !clobbers.contains(*r) && !keep.contains(*r))
            .filter(|r| !taken.contains(*r))
            .collect();
        if usable.len() < rest {
            let available = usable.len() + scratch.len();
            return Err(LowerError::Registers { need: need + loose, available });
        }
        let loose = scratch.len();
        scratch.extend(dead_first(&usable, rest));
        let written = clobbers.union(RegSet::of(&scratch));
        let saved: Vec<Gpr> = written.intersect(live.regs.union(keep)).iter().collect();
        let flags = live.flags.0 & flags.0 != 0;
        let red_zone = env == Env::User && (!saved.is_empty() || flags || stack);
        Ok(Reservation { scratch, loose, saved, flags, ah: None, red_zone })
    }

    /// How far below the point's `rsp` the saves leave it.
    pub fn frame(&self) -> i32 {
        let red = if self.red_zone { templates::RED_ZONE as i32 } else { 0 };
        red + 8 * (self.saved.len() as i32 + i32::from(self.flags))
    }

    /// Where `r`'s saved value is, as an offset from `rsp` after the saves.
    pub fn slot(&self, r: Gpr) -> Option<i32> {
        let k = self.saved.iter().position(|s| *s == r)?;
        Some(8 * (self.saved.len() - 1 - k) as i32)
    }

    pub fn prologue(&self) -> Vec<Instruction> {
        let mut v = Vec::new();
        if self.red_zone {
            v.push(templates::adjust_rsp(-templates::RED_ZONE));
        }
        if self.flags {
            v.push(Instruction::with(Code::Pushfq));
        }
        v.extend(self.saved.iter().map(|r| templates::push(*r)));
        if let Some(ah) = self.ah {
            v.extend(templates::flags_to_rax(ah.low, ah.of));
        }
        v
    }

    pub fn epilogue(&self) -> Vec<Instruction> {
        let mut v = Vec::new();
        if let Some(ah) = self.ah {
            v.extend(templates::flags_from_rax(ah.low, ah.of));
        }
        v.extend(self.saved.iter().rev().map(|r| templates::pop(*r)));
        if self.flags {
            v.push(Instruction::with(Code::Popfq));
        }
        if self.red_zone {
            v.push(templates::adjust_rsp(templates::RED_ZONE));
        }
        v
    }
}

/// What one op needs of the point: fixed registers it writes, temporaries, flags it writes,
/// whether it puts anything on the stack itself.
struct Needs {
    clobbers: RegSet,
    temps: usize,
    flags: FlagSet,
    stack: bool,
}

/// `rcx` and `r10` saved below the red zone, by the parts of a record whose ring is kept in
/// the thread's slab that write them (its first lookup, a wait at a full ring): the record's
/// own code leaves them to the point ([`CACHED_RING`]).
fn keep_rcx_r10(a: &mut CodeAssembler) -> Result<(), IcedError> {
    use iced_x86::code_asm::{r10, rcx, rsp};
    a.lea(rsp, qword_ptr(rsp - templates::RED_ZONE as i32))?;
    a.push(rcx)?;
    a.push(r10)
}

/// What a full ring's writer keeps below the red zone while it waits
/// (`Lowerer::wait_for_room`): with `keep`, `rcx` and `r10`; then `rdi`, `rsi` and `r8`,
/// which the wait sets: `rdi` the address of a `struct timespec` of [`WAIT_NAP_NS`] pushed
/// last (`nanosleep`'s time), `rsi` 0 (its remainder, not wanted), `r8d` the looks made, 0.
/// `sched_yield` takes no arguments, so both calls run with the same registers.
fn wait_frame(a: &mut CodeAssembler, keep: bool) -> Result<(), IcedError> {
    use iced_x86::code_asm::{esi, r8, r8d, rdi, rsi, rsp};
    if keep {
        keep_rcx_r10(a)?;
    } else {
        a.lea(rsp, qword_ptr(rsp - templates::RED_ZONE as i32))?;
    }
    a.push(rdi)?;
    a.push(rsi)?;
    a.push(r8)?;
    // tv_nsec, then tv_sec at the lower address.
    a.push(WAIT_NAP_NS)?;
    a.push(0)?;
    a.mov(rdi, rsp)?;
    a.xor(esi, esi)?;
    a.xor(r8d, r8d)
}

/// [`wait_frame`] undone (the flags are left as they are).
fn wait_frame_off(a: &mut CodeAssembler, keep: bool) -> Result<(), IcedError> {
    use iced_x86::code_asm::{r8, rdi, rsi, rsp};
    a.lea(rsp, qword_ptr(rsp + 16))?;
    a.pop(r8)?;
    a.pop(rsi)?;
    a.pop(rdi)?;
    if keep {
        put_back_rcx_r10(a)
    } else {
        a.lea(rsp, qword_ptr(rsp + templates::RED_ZONE as i32))
    }
}

/// [`keep_rcx_r10`] undone.
fn put_back_rcx_r10(a: &mut CodeAssembler) -> Result<(), IcedError> {
    use iced_x86::code_asm::{r10, rcx, rsp};
    a.pop(r10)?;
    a.pop(rcx)?;
    a.lea(rsp, qword_ptr(rsp + templates::RED_ZONE as i32))
}

fn fits_i32(v: u64) -> bool {
    i32::try_from(v as i64).is_ok()
}

fn needs(op: &Op, at: &At) -> Needs {
    let none = Needs { clobbers: RegSet::EMPTY, temps: 0, flags: FlagSet::EMPTY, stack: false };
    let imm_temp = |s: &Src| usize::from(matches!(s, Src::Imm(v) if !fits_i32(*v)));
    match op {
        Op::Label(_)
        | Op::Thread { .. }
        | Op::Tid { .. }
        | Op::Reg { .. }
        | Op::Mov { .. }
        | Op::Load { .. } => none,
        Op::Jump { .. } | Op::Cold => none,
        Op::Store { width, src, .. } => {
            Needs { temps: usize::from(*width == Width::W64) * imm_temp(src), ..none }
        }
        Op::Add { src, .. } => Needs { temps: imm_temp(src), flags: FlagSet::ALL, ..none },
        Op::AddMem { src, .. } => {
            let flags = if *src == Src::Imm(1) { templates::INC_FLAGS } else { FlagSet::ALL };
            Needs { temps: imm_temp(src), flags, ..none }
        }
        Op::Branch { b, .. } => Needs { temps: imm_temp(b), flags: FlagSet::ALL, ..none },
        Op::Rdtsc { .. } => {
            Needs { clobbers: RegSet::of(&[Gpr::Rax, Gpr::Rdx]), flags: FlagSet::ALL, ..none }
        }
        // rdtscp writes rcx too.
        Op::Cpu { .. } => Needs { clobbers: RDTSCP, flags: FlagSet::ALL, ..none },
        // rdtscp's registers (rax and rdx the reservation's, rcx the CPU); the ring, then the
        // slot, and the reservation's seq while the time is read, in temporaries.
        Op::Emit { .. } => Needs { clobbers: RDTSCP, temps: 2, flags: FlagSet::ALL, ..none },
        // The thread-slot lookup's registers (rdtscp's among them); the reservation's seq while
        // the time is read, and a CPU's ring's CPU, in temporaries (neither for an untimed
        // record in the thread's ring). Memory reads make system calls: every caller-saved
        // register, and a frame on the stack.
        // With the ring kept in the thread's slab, the lookup runs only for a thread's first
        // record, and saves what it writes beyond the reservation's registers itself.
        Op::EmitThread { reads, per: Rings::Thread, timed: false, .. }
            if reads.is_empty() && at.ring_cache.is_some() =>
        {
            Needs { clobbers: CACHED_RING, flags: FlagSet::ALL, ..none }
        }
        Op::EmitThread { reads, per: Rings::Thread, .. }
            if reads.is_empty() && at.ring_cache.is_some() =>
        {
            let clobbers = CACHED_RING.union(RegSet::of(&[Gpr::Rcx]));
            Needs { clobbers, temps: 2, flags: FlagSet::ALL, ..none }
        }
        Op::EmitThread { reads, per: Rings::Thread, timed: false, .. } if reads.is_empty() => {
            Needs { clobbers: RegSet::of(&timer_code::REGS), flags: FlagSet::ALL, ..none }
        }
        Op::EmitThread { reads, .. } if reads.is_empty() => {
            Needs { clobbers: RegSet::of(&timer_code::REGS), temps: 2, flags: FlagSet::ALL, ..none }
        }
        Op::EmitThread { .. } => Needs {
            clobbers: RegSet::SYSV_CALLER_SAVED,
            temps: 2,
            flags: FlagSet::ALL,
            stack: true,
        },
        Op::Call { .. } => Needs {
            clobbers: RegSet::SYSV_CALLER_SAVED,
            temps: 1,
            flags: FlagSet::ALL,
            stack: true,
        },
        Op::Timer(t) => {
            let mut clobbers = RegSet::of(&timer_code::REGS);
            if matches!(t, TimerOp::TailCall { .. } | TimerOp::TailReturn { .. }) {
                clobbers = clobbers.union(RegSet::of(&timer_code::TAIL_REGS));
            }
            Needs { clobbers, flags: FlagSet::ALL, ..none }
        }
    }
}

/// Which virtual registers are *fused* thread ids: written by a `tid` and read only by the
/// `br.eq`/`br.ne` right after it, against an immediate that fits 32 bits. Where the thread id is read
/// through `fs` (`FsSelf`), the two become one `cmp dword ptr fs:[off], imm` and the value
/// needs no register (a JIT's block counter then needs none at all).
fn fused_ids(p: &Program, at: &At) -> Vec<bool> {
    let mut fused = vec![false; p.vregs.len()];
    let (ThreadPointer::FsSelf, Some(_)) = (at.thread, at.thread_id) else { return fused };
    for (k, pair) in p.ops.windows(2).enumerate() {
        let [Op::Tid { dst }, Op::Branch { cond: Cond::Eq | Cond::Ne, a, b: Src::Imm(v), .. }] =
            pair
        else {
            continue;
        };
        let read_elsewhere = p.ops.iter().enumerate().any(|(j, o)| {
            j != k + 1 && (o.reads().contains(dst) || (j != k && o.writes() == Some(*dst)))
        });
        if a == dst && u32::try_from(*v).is_ok() && !read_elsewhere {
            fused[dst.0 as usize] = true;
        }
    }
    fused
}

/// Which virtual registers are loose ([`LOOSE`]): their last use is an `emit.thread` with
/// memory reads, and no op from their first use up to it writes a loose register. Only in a
/// program that branches only forwards (so that text order is an order of execution) and
/// makes no clean call (whose values all live in callee-saved registers).
fn loose_values(p: &Program, at: &At) -> Vec<bool> {
    let nv = p.vregs.len();
    let mut placed = vec![usize::MAX; p.labels.len()];
    for (k, op) in p.ops.iter().enumerate() {
        if let Op::Label(l) = op {
            placed[l.0 as usize] = k;
        }
    }
    let backward = p.ops.iter().enumerate().any(|(k, op)| {
        matches!(op, Op::Branch { target, .. } | Op::Jump { target } if placed[target.0 as usize] < k)
    });
    if backward || p.ops.iter().any(|o| matches!(o, Op::Call { .. })) {
        return vec![false; nv];
    }
    let (mut first, mut last) = (vec![usize::MAX; nv], vec![0; nv]);
    for (k, op) in p.ops.iter().enumerate() {
        for v in op.reads().into_iter().chain(op.writes()) {
            first[v.0 as usize] = first[v.0 as usize].min(k);
            last[v.0 as usize] = k;
        }
    }
    let loose = RegSet::of(&LOOSE);
    (0..nv)
        .map(|v| {
            let reads =
                matches!(&p.ops[last[v]], Op::EmitThread { reads, .. } if !reads.is_empty());
            reads
                && first[v] < last[v]
                && p.ops[first[v]..last[v]]
                    .iter()
                    .all(|op| needs(op, at).clobbers.intersect(loose) == RegSet::EMPTY)
        })
        .collect()
}

/// Registers an `emit.thread` whose ring is kept in the thread's slab writes: the ring
/// (`r11`), and the reservation's record number and head (`rax`, `rdx`). The time stamp
/// writes `rcx` too (the CPU).
const CACHED_RING: RegSet = RegSet::of(&[Gpr::Rax, Gpr::Rdx, Gpr::R11]);
/// Registers `rdtscp` writes: the time in `edx:eax`, `TSC_AUX` (the CPU) in `ecx`.
const RDTSCP: RegSet = RegSet::of(&[Gpr::Rax, Gpr::Rcx, Gpr::Rdx]);
/// The CPU's bits in `TSC_AUX` (Linux keeps `(node << 12) | cpu` there).
const TSC_AUX_CPU: i32 = 0xfff;

/// Lower `p` at a point described by `at`. Branches inside the code name their targets by
/// label id (the instruction's `ip`, small numbers), as the patch encoder expects.
pub fn lower_program(p: &Program, at: &At) -> Result<Vec<Instruction>, LowerError> {
    let (mut hot, cold) = lower_parts(p, at, false)?;
    if cold.is_empty() {
        return Ok(hot);
    }
    // In line: the hot code jumps over the cold code to a nop after it, labelled with an id
    // past every one the program's code uses.
    let over = hot.iter().chain(&cold).map(|i| i.ip()).max().unwrap_or(0) + 1;
    hot.push(ok(Instruction::with_branch(Code::Jmp_rel32_64, over))?);
    hot.extend(cold);
    let mut nop = Instruction::with(Code::Nopd);
    nop.set_ip(over);
    hot.push(nop);
    Ok(hot)
}

/// [`lower_program`], with the ops after an [`Op::Cold`] lowered apart: the first vector
/// is the program's code without them (prologue, ops, epilogue), the second the cold code,
/// which the caller places anywhere within reach (empty without `cold` and slow paths).
/// Branches between the two name each other's label ids (instruction `ip`s), as within one.
/// The slow paths of a per-thread `emit.thread` (a full ring's wait, the ring's first
/// lookup, no thread slot) go to the cold code too: in line they made up most of a record's
/// bytes, and the JIT's call trace puts a record at every function entry and exit (sqlite3's
/// translated code was 2.5 times as large as with no plugin).
pub fn lower_program_split(
    p: &Program,
    at: &At,
) -> Result<(Vec<Instruction>, Vec<Instruction>), LowerError> {
    lower_parts(p, at, true)
}

/// [`lower_program_split`]; with `outline`, slow paths go to the cold code, else they stay
/// in line (jumped over).
fn lower_parts(
    p: &Program,
    at: &At,
    outline: bool,
) -> Result<(Vec<Instruction>, Vec<Instruction>), LowerError> {
    p.check().map_err(|(op, what)| LowerError::Check { op, what })?;
    let mut clobbers = RegSet::EMPTY;
    let mut temps = 0;
    let mut flags = FlagSet::EMPTY;
    let mut keep = RegSet::EMPTY;
    let mut call = false;
    let mut stack = false;
    for (k, op) in p.ops.iter().enumerate() {
        if let Op::EmitThread { reads, .. } = op {
            let missing = |r: &MemRead| at.kernel_reads.is_none_or(|kr| kr.routine(r.kind).0 == 0);
            if at.env == Env::Kernel && reads.iter().any(missing) {
                return Err(LowerError::KernelMemoryRead { op: k });
            }
        }
        let n = needs(op, at);
        clobbers = clobbers.union(n.clobbers);
        temps = temps.max(n.temps);
        flags = flags.union(n.flags);
        stack |= n.stack;
        match op {
            Op::Reg { reg, .. } if *reg != Gpr::Rsp => keep.insert(*reg),
            Op::Call { .. } => call = true,
            // A tail-call timer reads the point's rbp when its stack pointer is rbp-based.
            Op::Timer(TimerOp::TailCall { stack, .. } | TimerOp::TailReturn { stack, .. })
                if stack.base == crate::SpBase::Rbp =>
            {
                keep.insert(Gpr::Rbp)
            }
            _ => {}
        }
    }
    // Values kept across a call live in registers the callee preserves.
    let pool: &[Gpr] = if call { &CALLEE_SAVED } else { &PREFERENCE };
    let nv = p.vregs.len();
    let loose = loose_values(p, at);
    let nloose = loose.iter().filter(|l| **l).count();
    let fused = fused_ids(p, at);
    let nfused = fused.iter().filter(|f| **f).count();
    let need = nv - nloose - nfused + temps;
    let demand = Demand { need, loose: nloose, clobbers, keep, flags, stack };
    let res = Reservation::new(&demand, pool, at.live, at.env, at.flags_save)?;
    // Loose values take the loose registers, then every value and the temporaries the rest.
    let (mut from_loose, mut rest) =
        (res.scratch[..res.loose].iter(), res.scratch[res.loose..].iter());
    let regs: Vec<Gpr> = loose
        .iter()
        .zip(&fused)
        .map(|(l, f)| {
            // A fused thread id has no register (never asked for one).
            if *f {
                return Gpr::Rax;
            }
            *if *l { from_loose.next().or_else(|| rest.next()) } else { rest.next() }
                .expect("reserved")
        })
        .collect();
    let temps: Vec<Gpr> = rest.copied().collect();
    let mut l = Lowerer::new(p, at, &res, regs, temps)?;
    l.fused = fused;
    l.outline = outline.then(Vec::new);
    let mut split = None;
    for (k, op) in p.ops.iter().enumerate() {
        if *op == Op::Cold {
            l.epilogue()?;
            split = Some(l.a.instructions().len());
            continue;
        }
        if let Op::Timer(_) = op {
            // A run of timer ops shares one thread-slot lookup.
            if k > 0 && matches!(p.ops[k - 1], Op::Timer(_)) {
                continue;
            }
            let run: Vec<TimerOp> = p.ops[k..]
                .iter()
                .map_while(|o| if let Op::Timer(t) = o { Some(*t) } else { None })
                .collect();
            l.timers(&run)?;
        } else {
            l.op(op)?;
        }
    }
    if split.is_none() {
        l.epilogue()?;
    }
    let ranges = l.outline.take().unwrap_or_default();
    let all = l.a.take_instructions();
    let split = split.unwrap_or(all.len());
    // The slow paths after the cold ops (in the order they came), the rest where it was.
    let mut moved = vec![false; all.len()];
    for r in &ranges {
        moved[r.clone()].fill(true);
    }
    let (mut hot, mut cold, mut slow) = (Vec::new(), Vec::new(), Vec::new());
    for (k, i) in all.into_iter().enumerate() {
        match (moved[k], k < split) {
            (true, _) => slow.push(i),
            (false, true) => hot.push(i),
            (false, false) => cold.push(i),
        }
    }
    cold.extend(slow);
    Ok((hot, cold))
}

struct Lowerer<'a> {
    a: CodeAssembler,
    at: &'a At,
    res: &'a Reservation,
    /// Physical register of each virtual register, then the temporaries.
    regs: Vec<Gpr>,
    temps: Vec<Gpr>,
    /// The code label of each program label (adjacent labels share one).
    labels: Vec<Option<CodeLabel>>,
    /// A label set after the last instruction so far (waiting for one to sit on).
    pending_label: Option<CodeLabel>,
    /// By virtual register: a thread id fused into the compare after it ([`fused_ids`]).
    fused: Vec<bool>,
    /// Where slow paths go out of line ([`lower_program_split`]): the ranges of instructions
    /// (indices) to move to the cold code. Each starts where nothing falls into it and ends
    /// with a jump.
    outline: Option<Vec<std::ops::Range<usize>>>,
}

fn iced(r: Gpr) -> Register {
    crate::templates::iced_gpr(r)
}

fn iced_w(r: Gpr, w: Width) -> Register {
    let i = r as usize;
    let base = match w {
        // AL, CL, DL, BL, then AH..BH, then SPL, BPL, SIL, DIL, R8L..: skip the high bytes.
        Width::W8 if i >= 4 => Register::SPL as usize - 4,
        Width::W8 => Register::AL as usize,
        Width::W16 => Register::AX as usize,
        Width::W32 => Register::EAX as usize,
        Width::W64 => Register::RAX as usize,
    };
    Register::try_from(base + i).expect("a GPR")
}

fn asm(r: Gpr) -> AsmRegister64 {
    get_gpr64(iced(r)).expect("a 64-bit GPR")
}

fn ok(r: Result<Instruction, IcedError>) -> Result<Instruction, LowerError> {
    r.map_err(LowerError::from)
}

impl<'a> Lowerer<'a> {
    fn new(
        p: &Program,
        at: &'a At,
        res: &'a Reservation,
        regs: Vec<Gpr>,
        temps: Vec<Gpr>,
    ) -> Result<Lowerer<'a>, LowerError> {
        let mut a = CodeAssembler::new(64)?;
        for i in res.prologue() {
            a.add_instruction(i)?;
        }
        // Labels with no instruction between them are one place: one code label.
        let mut labels: Vec<Option<CodeLabel>> = vec![None; p.labels.len()];
        let mut prev: Option<CodeLabel> = None;
        for op in &p.ops {
            if let Op::Label(l) = op {
                let c = prev.unwrap_or_else(|| a.create_label());
                labels[l.0 as usize] = Some(c);
                prev = Some(c);
            } else {
                prev = None;
            }
        }
        Ok(Lowerer {
            a,
            at,
            res,
            regs,
            temps,
            labels,
            pending_label: None,
            fused: Vec::new(),
            outline: None,
        })
    }

    fn r(&self, v: VReg) -> Gpr {
        self.regs[v.0 as usize]
    }

    fn add(&mut self, i: Instruction) -> Result<(), LowerError> {
        self.a.add_instruction(i)?;
        self.pending_label = None;
        Ok(())
    }

    fn code_label(&self, l: Label) -> CodeLabel {
        self.labels[l.0 as usize].expect("checked: every label is placed")
    }

    /// Place `c` at the next instruction (after a nop if a label is there already).
    fn place(&mut self, c: &mut CodeLabel) -> Result<(), LowerError> {
        // One label per instruction: a second one here gets a nop of its own.
        if self.pending_label.is_some() {
            self.add(Instruction::with(Code::Nopd))?;
        }
        self.a.set_label(c)?;
        self.pending_label = Some(*c);
        Ok(())
    }

    fn mem(&self, addr: Addr) -> MemoryOperand {
        match addr {
            // iced keeps a RIP-relative operand's absolute target in the displacement.
            Addr::Abs(a) => MemoryOperand::with_base_displ(Register::RIP, a as i64),
            Addr::Based { base, disp } => {
                MemoryOperand::with_base_displ(iced(self.r(base)), disp as i64)
            }
            Addr::PerThread(disp) => kerf_arch::x86_64::segment_operand(Register::GS, disp),
        }
    }

    /// The source as a register: itself, or an immediate loaded into temporary 0 when it
    /// does not fit a sign-extended imm32 (otherwise `None`, use the immediate).
    fn wide(&mut self, s: Src) -> Result<Option<Register>, LowerError> {
        match s {
            Src::Reg(v) => Ok(Some(iced(self.r(v)))),
            Src::Imm(v) if fits_i32(v) => Ok(None),
            Src::Imm(v) => {
                let t = iced(self.temps[0]);
                self.add(ok(Instruction::with2(Code::Mov_r64_imm64, t, v))?)?;
                Ok(Some(t))
            }
        }
    }

    /// The epilogue; a label waiting for an instruction sits on its first one, or on a nop.
    fn epilogue(&mut self) -> Result<(), LowerError> {
        if self.pending_label.is_some() && self.res.epilogue().is_empty() {
            self.add(Instruction::with(Code::Nopd))?;
        }
        for i in self.res.epilogue() {
            self.add(i)?;
        }
        Ok(())
    }

    fn op(&mut self, op: &Op) -> Result<(), LowerError> {
        match op {
            // The caller splits the code there.
            Op::Cold => {}
            Op::Label(l) => {
                let mut c = self.code_label(*l);
                // Adjacent labels share one code label, placed once.
                if self.pending_label != Some(c) {
                    self.place(&mut c)?;
                }
            }
            Op::Thread { dst } => {
                let d = asm(self.r(*dst));
                match self.at.thread {
                    ThreadPointer::FsBase => self.a.rdfsbase(d)?,
                    ThreadPointer::FsSelf => self.a.mov(d, qword_ptr(0u64).fs())?,
                    ThreadPointer::GsSlot(off) => self.a.mov(d, qword_ptr(off as u64).gs())?,
                }
                self.pending_label = None;
            }
            // Read by the compare after it.
            Op::Tid { dst } if self.fused.get(dst.0 as usize) == Some(&true) => {}
            Op::Tid { dst } => {
                let r = self.r(*dst);
                let d32 = get_gpr32(iced_w(r, Width::W32)).expect("a 32-bit GPR");
                let d = asm(r);
                match (self.at.thread, self.at.thread_id) {
                    (ThreadPointer::FsSelf, Some(off)) => {
                        self.a.mov(d32, dword_ptr(off as u64).fs())?
                    }
                    (ThreadPointer::FsBase, Some(off)) => {
                        self.a.rdfsbase(d)?;
                        self.a.mov(d32, dword_ptr(d + off as i32))?;
                    }
                    _ => return Err(LowerError::NoThreadId),
                }
                self.pending_label = None;
            }
            Op::Reg { dst, reg } => {
                let d = iced(self.r(*dst));
                let i = if *reg == Gpr::Rsp {
                    let m = MemoryOperand::with_base_displ(Register::RSP, self.res.frame() as i64);
                    Instruction::with2(Code::Lea_r64_m, d, m)
                } else if let Some(off) = self.res.slot(*reg) {
                    let m = MemoryOperand::with_base_displ(Register::RSP, off as i64);
                    Instruction::with2(Code::Mov_r64_rm64, d, m)
                } else {
                    Instruction::with2(Code::Mov_r64_rm64, d, iced(*reg))
                };
                self.add(ok(i)?)?;
            }
            Op::Mov { dst, src } => {
                let d = iced(self.r(*dst));
                let i = match *src {
                    Src::Reg(s) => Instruction::with2(Code::Mov_r64_rm64, d, iced(self.r(s))),
                    Src::Imm(v) if fits_i32(v) => {
                        Instruction::with2(Code::Mov_rm64_imm32, d, v as i64 as i32)
                    }
                    Src::Imm(v) => Instruction::with2(Code::Mov_r64_imm64, d, v),
                };
                self.add(ok(i)?)?;
            }
            Op::Load { dst, width, addr } => {
                let m = self.mem(*addr);
                let r = self.r(*dst);
                let i = match width {
                    Width::W8 => Instruction::with2(Code::Movzx_r32_rm8, iced_w(r, Width::W32), m),
                    Width::W16 => {
                        Instruction::with2(Code::Movzx_r32_rm16, iced_w(r, Width::W32), m)
                    }
                    Width::W32 => Instruction::with2(Code::Mov_r32_rm32, iced_w(r, Width::W32), m),
                    Width::W64 => Instruction::with2(Code::Mov_r64_rm64, iced(r), m),
                };
                self.add(ok(i)?)?;
            }
            Op::Store { width, addr, src } => {
                let m = self.mem(*addr);
                let i = match (*src, width) {
                    (Src::Reg(v), w) => {
                        let code = match w {
                            Width::W8 => Code::Mov_rm8_r8,
                            Width::W16 => Code::Mov_rm16_r16,
                            Width::W32 => Code::Mov_rm32_r32,
                            Width::W64 => Code::Mov_rm64_r64,
                        };
                        Instruction::with2(code, m, iced_w(self.r(v), *w))
                    }
                    (Src::Imm(v), Width::W8) => {
                        Instruction::with2(Code::Mov_rm8_imm8, m, v as u8 as u32)
                    }
                    (Src::Imm(v), Width::W16) => {
                        Instruction::with2(Code::Mov_rm16_imm16, m, v as u16 as u32)
                    }
                    (Src::Imm(v), Width::W32) => {
                        Instruction::with2(Code::Mov_rm32_imm32, m, v as u32)
                    }
                    (s @ Src::Imm(v), Width::W64) => match self.wide(s)? {
                        Some(t) => Instruction::with2(Code::Mov_rm64_r64, m, t),
                        None => Instruction::with2(Code::Mov_rm64_imm32, m, v as i64 as i32),
                    },
                };
                self.add(ok(i)?)?;
            }
            Op::Add { dst, src } => {
                let d = iced(self.r(*dst));
                let i = match self.wide(*src)? {
                    Some(s) => Instruction::with2(Code::Add_rm64_r64, d, s),
                    None => imm_op(Code::Add_rm64_imm8, Code::Add_rm64_imm32, d, *src),
                };
                self.add(ok(i)?)?;
            }
            Op::AddMem { addr, src, atomic } => {
                let m = self.mem(*addr);
                let mut i = if *src == Src::Imm(1) {
                    ok(Instruction::with1(Code::Inc_rm64, m))?
                } else {
                    match self.wide(*src)? {
                        Some(s) => ok(Instruction::with2(Code::Add_rm64_r64, m, s))?,
                        None => ok(imm_op(Code::Add_rm64_imm8, Code::Add_rm64_imm32, m, *src))?,
                    }
                };
                i.set_has_lock_prefix(*atomic);
                self.add(i)?;
            }
            Op::Rdtsc { dst } => {
                self.rdtsc()?;
                let i = Instruction::with2(Code::Mov_r64_rm64, iced(self.r(*dst)), Register::RAX);
                self.add(ok(i)?)?;
            }
            Op::Cpu { dst } => {
                let d = iced_w(self.r(*dst), Width::W32);
                if self.at.cpu == CpuRead::Rdpid {
                    self.add(ok(Instruction::with1(Code::Rdpid_r64, iced(self.r(*dst))))?)?;
                } else {
                    self.a.rdtscp()?;
                    self.add(ok(Instruction::with2(Code::Mov_r32_rm32, d, Register::ECX))?)?;
                }
                self.add(ok(Instruction::with2(Code::And_rm32_imm32, d, TSC_AUX_CPU))?)?;
            }
            Op::Branch { cond, a, b: Src::Imm(v), target }
                if self.fused.get(a.0 as usize) == Some(&true) =>
            {
                let off = self.at.thread_id.ok_or(LowerError::NoThreadId)?;
                self.a.cmp(dword_ptr(off as u64).fs(), *v as u32 as i32)?;
                self.pending_label = None;
                let l = self.code_label(*target);
                self.jcc(*cond, l)?;
            }
            Op::Branch { cond, a, b, target } => {
                let x = iced(self.r(*a));
                let i = match self.wide(*b)? {
                    Some(s) => Instruction::with2(Code::Cmp_rm64_r64, x, s),
                    None => imm_op(Code::Cmp_rm64_imm8, Code::Cmp_rm64_imm32, x, *b),
                };
                self.add(ok(i)?)?;
                let l = self.code_label(*target);
                self.jcc(*cond, l)?;
            }
            Op::Jump { target } => {
                let l = self.code_label(*target);
                self.a.jmp(l)?;
                self.pending_label = None;
            }
            Op::Emit { ring, shape, stream, values } => {
                self.emit(*ring, *shape, *stream, values)?
            }
            Op::EmitThread { .. } => self.emit_thread(op)?,
            Op::Call { target, args, ret } => self.call(*target, args, *ret)?,
            Op::Timer(_) => unreachable!("runs of timer ops are lowered together"),
        }
        Ok(())
    }

    fn jcc(&mut self, cond: Cond, l: CodeLabel) -> Result<(), LowerError> {
        let a = &mut self.a;
        match cond {
            Cond::Eq => a.je(l)?,
            Cond::Ne => a.jne(l)?,
            Cond::Ltu => a.jb(l)?,
            Cond::Leu => a.jbe(l)?,
            Cond::Gtu => a.ja(l)?,
            Cond::Geu => a.jae(l)?,
            Cond::Lt => a.jl(l)?,
            Cond::Le => a.jle(l)?,
            Cond::Gt => a.jg(l)?,
            Cond::Ge => a.jge(l)?,
        }
        self.pending_label = None;
        Ok(())
    }

    /// `rax` = the 64-bit time stamp counter (`rdx` clobbered).
    fn rdtsc(&mut self) -> Result<(), LowerError> {
        self.a.rdtsc()?;
        self.a.shl(iced_x86::code_asm::rdx, 32)?;
        self.a.or(iced_x86::code_asm::rax, iced_x86::code_asm::rdx)?;
        self.pending_label = None;
        Ok(())
    }

    /// `meta` = the CPU this code runs on and the record's length, as a slot's `len`/`cpu`
    /// dword wants them (`(cpu << 16) | 8 * words`): `rdpid`, or `rdtscp` (its time unused).
    /// Writes `rcx` (and `rax`, `rdx` with `rdtscp`).
    fn cpu_meta(&mut self, meta: AsmRegister64, words: usize) -> Result<(), LowerError> {
        use iced_x86::code_asm::{ecx, rcx};
        let a = &mut self.a;
        if self.at.cpu == CpuRead::Rdpid {
            a.rdpid(rcx)?;
        } else {
            a.rdtscp()?;
        }
        a.and(ecx, TSC_AUX_CPU)?;
        a.shl(ecx, 16)?;
        a.or(ecx, 8 * words as i32)?;
        if Register::from(meta) != Register::RCX {
            a.mov(meta, rcx)?;
        }
        Ok(())
    }

    /// The time of the record just reserved in the slot at `t` (`rdx` = its `seq`), with its
    /// length and CPU: `meta` if the ring was chosen by CPU already ([`Self::cpu_meta`]),
    /// else read now with the time (`rdtscp`, or `rdtsc` and `rdpid`). `rdx` is kept in
    /// `save` meanwhile; writes `rax` and `rcx`.
    ///
    /// The time is read after the reservation, not before: a writer preempted (or, in a
    /// process, descheduled) between the two would otherwise reserve, later, a record stamped
    /// earlier than records other rings gave the reader meanwhile, which the reader has then
    /// put out already. Read after, a record's time is later than its reservation, which the
    /// reader sees (a reserved record not complete yet) and holds younger records back for.
    fn stamp(
        &mut self,
        t: AsmRegister64,
        save: AsmRegister64,
        words: usize,
        meta: Option<AsmRegister64>,
    ) -> Result<(), LowerError> {
        use iced_x86::code_asm::{dword_ptr, ecx, rax, rcx, rdx};
        let rdpid = self.at.cpu == CpuRead::Rdpid;
        let a = &mut self.a;
        a.mov(save, rdx)?;
        if rdpid || meta.is_some() {
            a.rdtsc()?;
        } else {
            a.rdtscp()?;
        }
        a.shl(rdx, 32)?;
        a.or(rax, rdx)?;
        a.mov(qword_ptr(t + ring::TIME as i32), rax)?;
        match meta {
            Some(m) => {
                let m32 = get_gpr32(Register::from(m).full_register32()).expect("a 32-bit GPR");
                a.mov(dword_ptr(t + ring::LEN as i32), m32)?;
            }
            None => {
                if rdpid {
                    a.rdpid(rcx)?;
                }
                a.and(ecx, TSC_AUX_CPU)?;
                a.shl(ecx, 16)?;
                a.or(ecx, 8 * words as i32)?;
                a.mov(dword_ptr(t + ring::LEN as i32), ecx)?;
            }
        }
        a.mov(rdx, save)?;
        self.pending_label = None;
        Ok(())
    }

    /// An untimed record's header in the slot at `t`: time 0, and its length with the CPU
    /// of its ring (`meta`, for a CPU's ring) or 0. Reads no clock; writes no register.
    fn unstamped(
        &mut self,
        t: AsmRegister64,
        words: usize,
        meta: Option<AsmRegister64>,
    ) -> Result<(), LowerError> {
        use iced_x86::code_asm::dword_ptr;
        let a = &mut self.a;
        a.mov(qword_ptr(t + ring::TIME as i32), 0)?;
        match meta {
            Some(m) => {
                let m32 = get_gpr32(Register::from(m).full_register32()).expect("a 32-bit GPR");
                a.mov(dword_ptr(t + ring::LEN as i32), m32)?;
            }
            None => a.mov(dword_ptr(t + ring::LEN as i32), 8 * words as u32)?,
        }
        self.pending_label = None;
        Ok(())
    }

    /// [`Op::Emit`], the steps of [`crate::ring`]'s writer. Temporaries: `t` = the ring, then
    /// the slot; `save` = `seq` while the time is read. `rax` = record number, `rdx` = the
    /// head after it.
    fn emit(
        &mut self,
        at: u64,
        shape: ring::Shape,
        stream: u32,
        values: &[VReg],
    ) -> Result<(), LowerError> {
        use iced_x86::code_asm::rdx;
        let t = asm(self.temps[0]);
        let save = asm(self.temps[1]);
        let mut full = self.a.create_label();
        let mut done = self.a.create_label();
        // 1. Reserve record n = head (other writers race: lock cmpxchg); t = its slot. The
        //    ring may lie anywhere (see `Program::relocate`): a 64-bit immediate.
        self.a.add_instruction(templates::mov_imm64(iced(self.temps[0]), at))?;
        self.reserve(t, shape, true, full)?;
        // 2. Its time and CPU; 3. the rest, and seq = n + 1, stored last.
        self.stamp(t, save, values.len(), None)?;
        self.fill(t, stream, values)?;
        let a = &mut self.a;
        a.mov(qword_ptr(t + ring::SEQ as i32), rdx)?;
        a.jmp(done)?;
        a.set_label(&mut full)?;
        a.lock().inc(qword_ptr(t + ring::LOST as i32))?;
        self.pending_label = None;
        self.place(&mut done)
    }

    /// Reserve record `n` of the ring at `t` and point `t` at its slot (`rax` = its offset
    /// in the slots, `rdx` = `n + 1`); go to `full` with `t` unchanged if `n - tail >=
    /// shape.slots`. The `cmpxchg` on `head` is locked where other threads write it. A tail past
    /// `n` (others moved head and the reader moved tail since head was read) is a stale `n`,
    /// not a full ring: retry.
    fn reserve(
        &mut self,
        t: AsmRegister64,
        shape: ring::Shape,
        locked: bool,
        full: CodeLabel,
    ) -> Result<CodeLabel, LowerError> {
        use iced_x86::code_asm::rax;
        let retry = self.reserve_number(t, shape, locked, full)?;
        let a = &mut self.a;
        a.and(rax, (shape.slots - 1) as i32)?;
        a.shl(rax, shape.slot_len.trailing_zeros())?;
        a.lea(t, qword_ptr(t + rax + ring::SLOTS as i32))?;
        Ok(retry)
    }

    /// [`Self::reserve`]'s reservation alone: `rax` = `n`, `rdx` = `n + 1`, `t` unchanged.
    fn reserve_number(
        &mut self,
        t: AsmRegister64,
        shape: ring::Shape,
        locked: bool,
        full: CodeLabel,
    ) -> Result<CodeLabel, LowerError> {
        use iced_x86::code_asm::{rax, rdx};
        let a = &mut self.a;
        let mut retry = a.create_label();
        a.set_label(&mut retry)?;
        a.mov(rax, qword_ptr(t + ring::HEAD as i32))?;
        a.mov(rdx, rax)?;
        a.sub(rdx, qword_ptr(t + ring::TAIL as i32))?;
        a.js(retry)?;
        a.cmp(rdx, shape.slots as i32)?;
        a.jae(full)?;
        a.lea(rdx, qword_ptr(rax + 1))?;
        if locked {
            a.lock().cmpxchg(qword_ptr(t + ring::HEAD as i32), rdx)?;
        } else {
            a.cmpxchg(qword_ptr(t + ring::HEAD as i32), rdx)?;
        }
        a.jne(retry)?;
        Ok(retry)
    }

    /// A full per-thread ring at `r11`: while the time stamp counter is before the ring's
    /// `wait` (a deadline the reader moves ahead as it drains), give the CPU up and reserve
    /// again at `retry` once the reader has made room; past it (or with `wait` 0, a reader
    /// that never waits) go on to the drop that follows. The first [`WAIT_SPINS`] looks
    /// `sched_yield` (a reader that is draining makes room within microseconds, and a thread
    /// that slept would lose the rest of a 50 µs nap each time), later ones sleep
    /// [`WAIT_NAP_NS`] (`nanosleep`: a reader held up for long, as by a slow trace file, is
    /// not to cost a CPU per waiting thread; yielding in a loop also held kerf's own threads
    /// off the CPUs). Writes `rax`, `rcx`, `rdx`, `r10` and the flags, which the lookup and
    /// the reservation write already; `r11` is the ring again wherever it leaves. The
    /// registers the wait uses besides ([`wait_frame`]), and with `keep` (a ring kept in the
    /// thread's slab, whose code has no lookup to write `rcx` and `r10`) those two, are
    /// saved below the red zone while it waits and put back wherever it leaves.
    fn wait_for_room(
        &mut self,
        shape: ring::Shape,
        retry: CodeLabel,
        keep: bool,
    ) -> Result<(), LowerError> {
        use iced_x86::code_asm::{eax, r10, r11, r8d, rax, rdx};
        let a = &mut self.a;
        let mut look = a.create_label();
        let mut call = a.create_label();
        let mut drop = a.create_label();
        let mut room = a.create_label();
        let mut out = a.create_label();
        // 1. No deadline (the tracer's rings): drop, as cheaply as before waits. Else the
        //    frame, and the ring kept in r10 (the system calls write rcx and r11).
        a.cmp(qword_ptr(r11 + ring::WAIT as i32), 0)?;
        a.je(out)?;
        wait_frame(a, keep)?;
        a.mov(r10, r11)?;
        // 2. Past the deadline: drop.
        a.set_label(&mut look)?;
        a.rdtsc()?;
        a.shl(rdx, 32)?;
        a.or(rax, rdx)?;
        a.cmp(rax, qword_ptr(r10 + ring::WAIT as i32))?;
        a.jae(drop)?;
        // 3. Yield, or after WAIT_SPINS looks sleep (r8d counts the looks).
        a.mov(eax, SYS_SCHED_YIELD)?;
        a.inc(r8d)?;
        a.cmp(r8d, WAIT_SPINS as i32)?;
        a.jbe(call)?;
        a.mov(eax, SYS_NANOSLEEP)?;
        a.set_label(&mut call)?;
        a.syscall()?;
        a.mov(r11, r10)?;
        // 4. Room: reserve again; else look again.
        a.mov(rax, qword_ptr(r11 + ring::HEAD as i32))?;
        a.sub(rax, qword_ptr(r11 + ring::TAIL as i32))?;
        a.cmp(rax, shape.slots as i32)?;
        a.jae(look)?;
        a.set_label(&mut room)?;
        wait_frame_off(a, keep)?;
        a.jmp(retry)?;
        a.set_label(&mut drop)?;
        wait_frame_off(a, keep)?;
        a.set_label(&mut out)?;
        Ok(())
    }

    /// The record of an emit but its time, length, CPU ([`Self::stamp`]) and `seq`, into
    /// the slot at `t`.
    fn fill(&mut self, t: AsmRegister64, stream: u32, values: &[VReg]) -> Result<(), LowerError> {
        use iced_x86::code_asm::dword_ptr;
        let a = &mut self.a;
        a.mov(dword_ptr(t + ring::STREAM as i32), stream)?;
        for (k, v) in values.iter().enumerate() {
            let r = asm(self.regs[v.0 as usize]);
            a.mov(qword_ptr(t + (ring::VALUES as i32 + 8 * k as i32)), r)?;
        }
        Ok(())
    }

    /// [`Op::EmitThread`], [`crate::ring`]'s per-thread writer: `rcx` = the thread's slot
    /// (the timers' lookup, which writes `rax`, `rdx`, `r10`, `r11`); `r11` = its ring; then
    /// the shared ring's steps with no `lock` (`rax` = record number, `rdx` = the head after
    /// it), only this thread writing the ring: the time after the reservation
    /// ([`Self::stamp`], temporary `save`), the values, the memory reads
    /// ([`templates::record_reads`]), `seq`.
    ///
    /// With [`At::ring_cache`] (per thread), `r11` = the ring's address kept in the thread's
    /// slab; the lookup only where that is 0, out of line, with `rcx` and `r10` saved below
    /// the red zone ([`Self::look_ring_up`]).
    ///
    /// `emit.cpu` ([`Rings::Cpu`]): the ring is the CPU's, from the CPU read first into
    /// temporary `meta` ([`Self::cpu_meta`]), and the reservation and loss count are locked
    /// (see [`crate::ring`]'s "Per-CPU rings").
    fn emit_thread(&mut self, op: &Op) -> Result<(), LowerError> {
        use iced_x86::code_asm::{ecx, r11, rcx, rdx};
        let Op::EmitThread { rings, per, shape, stream, values, reads, timed } = op else {
            unreachable!("an emit.thread")
        };
        let (rings, shape) = (*rings, *shape);
        // (An untimed record in the thread's ring has no temporaries: see `needs`.)
        let temp = |k: usize| self.temps.get(k).map(|&g| asm(g));
        let (save, meta) = (temp(0), temp(1));
        let words = op.record_words();
        let no_slot = self.a.create_label();
        let mut full = self.a.create_label();
        let mut done = self.a.create_label();
        let cache = self.at.ring_cache.filter(|_| matches!(per, Rings::Thread));
        let look = self.a.create_label();
        // 1. r11 = the ring: kept in the thread's slab (0: not yet); else rcx = the ring's
        //    index (the thread's slot in the thread table, or the CPU, bits 16.. of meta's
        //    low half, modulo the rings) and r11 = rings + RINGS + index * ring_len(shape)
        //    (checked to fit an imm32). The rings may lie anywhere, beyond the reach of a
        //    rip-relative address (see `Program::relocate`): a 64-bit immediate.
        let locked = match (*per, cache) {
            (Rings::Thread, Some(c)) => {
                let a = &mut self.a;
                a.mov(r11, qword_ptr(c.word as u64).gs())?;
                a.test(r11, r11)?;
                a.jz(look)?;
                false
            }
            (Rings::Thread, None) => {
                let (thread, tid, threads) = (self.at.thread, self.at.thread_id, self.at.threads);
                timer_code::thread_slot(&mut self.a, thread, tid, threads, no_slot)?;
                false
            }
            (Rings::Cpu(n), _) => {
                let meta = meta.expect("emit.cpu's temporaries");
                self.cpu_meta(meta, words)?;
                let meta32 =
                    get_gpr32(Register::from(meta).full_register32()).expect("a 32-bit GPR");
                let a = &mut self.a;
                a.mov(ecx, meta32)?;
                a.shr(ecx, 16)?;
                a.and(ecx, (n - 1) as i32)?;
                true
            }
        };
        if cache.is_none() {
            let a = &mut self.a;
            a.imul_3(rcx, rcx, ring::ring_len(shape) as i32)?;
            a.add_instruction(templates::mov_imm64(Register::R11, rings + ring::RINGS))?;
            a.add(r11, rcx)?;
        }
        if shape.is_compact() {
            // 2-3. Reserve, the value, the stream with the lap mark (crate::ring's "Compact
            //    records").
            let retry = self.compact_record(shape, *stream, values[0], full)?;
            return self.emit_thread_tail(shape, retry, cache, rings, look, no_slot, full, done);
        }
        // 2. Reserve record n = head; r11 = its slot. Per thread a plain cmpxchg: only this
        //    thread writes head, and a signal handler that emitted in between moved it, so
        //    this retries (see crate::ring). Per CPU a locked one.
        let retry = self.reserve(r11, shape, locked, full)?;
        // 3. Its time (and CPU, per thread), or zeros untimed, then the values, the reads
        //    after them, and seq = n + 1 last.
        let cpu = if matches!(per, Rings::Cpu(_)) { meta } else { None };
        match (timed, save) {
            (true, Some(save)) => self.stamp(r11, save, words, cpu)?,
            _ => self.unstamped(r11, words, cpu)?,
        }
        self.fill(r11, *stream, values)?;
        if !reads.is_empty() {
            let slot_reads = self.slot_reads(values.len(), reads);
            let code = match (self.at.env, self.at.kernel_reads) {
                (Env::Kernel, Some(kr)) => templates::record_reads_kernel(&slot_reads, &kr),
                _ => templates::record_reads(&slot_reads),
            };
            for i in code {
                self.a.add_instruction(i)?;
            }
        }
        let a = &mut self.a;
        a.mov(qword_ptr(r11 + ring::SEQ as i32), rdx)?;
        if locked {
            // Full: a CPU's ring may have writers on two CPUs: a locked count, no wait.
            let a = &mut self.a;
            a.jmp(done)?;
            a.set_label(&mut full)?;
            a.lock().inc(qword_ptr(r11 + ring::LOST as i32))?;
            self.pending_label = None;
            return self.place(&mut done);
        }
        self.emit_thread_tail(shape, retry, cache, rings, look, no_slot, full, done)
    }

    /// The out-of-line end of a per-thread [`Self::emit_thread`] whose ring is at `r11`, its
    /// record written: at `full`, a process's thread waits for room until the reader's
    /// deadline (never in the kernel, where this may run with interrupts off), going back to
    /// `retry`, then counts the record lost (only this thread writes the count; a single
    /// `inc` is whole to its handlers); the ring's lookup for a ring kept in the slab
    /// (`cache`, at `look`); and at `no_slot` the shared count of threads the thread table
    /// had no slot for; then `done`. All of it goes to the cold code where the lowering puts
    /// slow paths out of line ([`lower_program_split`]), else in line, jumped over.
    #[allow(clippy::too_many_arguments)]
    fn emit_thread_tail(
        &mut self,
        shape: ring::Shape,
        retry: CodeLabel,
        cache: Option<SlabRing>,
        rings: u64,
        look: CodeLabel,
        mut no_slot: CodeLabel,
        mut full: CodeLabel,
        mut done: CodeLabel,
    ) -> Result<(), LowerError> {
        use iced_x86::code_asm::r11;
        let start = match self.outline {
            Some(_) => self.a.instructions().len(),
            None => {
                self.a.jmp(done)?;
                0
            }
        };
        let a = &mut self.a;
        a.set_label(&mut full)?;
        if self.at.env == Env::User {
            self.wait_for_room(shape, retry, cache.is_some())?;
        }
        let a = &mut self.a;
        a.inc(qword_ptr(r11 + ring::LOST as i32))?;
        a.jmp(done)?;
        if let Some(c) = cache {
            // (Back to the reservation with the ring.)
            self.look_ring_up(c, rings, shape, look, retry, no_slot)?;
        }
        // No slot in the thread table: the rare shared count, locked; r11 is free (the
        // lookup's scratch).
        let a = &mut self.a;
        a.set_label(&mut no_slot)?;
        a.add_instruction(templates::mov_imm64(Register::R11, rings + ring::NO_SLOT))?;
        a.lock().inc(qword_ptr(r11))?;
        if let Some(ranges) = &mut self.outline {
            a.jmp(done)?;
            ranges.push(start..a.instructions().len());
        }
        self.pending_label = None;
        self.place(&mut done)
    }

    /// A compact record (crate::ring's "Compact records") of `stream` and the low half of
    /// `value` into the thread's ring at `r11`: (2) reserve `n` ([`Self::reserve_number`]:
    /// `rax` = `n` after it), `full` if the ring has no room; (3) the value's low half into
    /// slot `n % slots` (`rdx` = its index), then the high half: the stream with the lap's
    /// mark in bit 31 (bit `log2(slots)` of `n`, inverted: a zeroed ring holds no record),
    /// stored last. Writes `rax`, `rdx` and the flags. Returns (2)'s label.
    fn compact_record(
        &mut self,
        shape: ring::Shape,
        stream: u32,
        value: VReg,
        full: CodeLabel,
    ) -> Result<CodeLabel, LowerError> {
        use iced_x86::code_asm::{dword_ptr, eax, edx, r11, rdx};
        let v = Register::from(asm(self.regs[value.0 as usize])).full_register32();
        let v32 = get_gpr32(v).expect("a 32-bit GPR");
        let retry = self.reserve_number(r11, shape, false, full)?;
        let a = &mut self.a;
        a.mov(edx, eax)?;
        a.and(edx, (shape.slots - 1) as i32)?;
        let slot = ring::SLOTS as i32;
        a.mov(dword_ptr(r11 + rdx * 8 + slot), v32)?;
        // The lap's bit of n to bit 31, inverted, with the stream (below 2^31: the IR's
        // check).
        let lap = shape.slots.trailing_zeros();
        a.shl(eax, 31 - lap)?;
        a.and(eax, ring::COMPACT_MARK as i32)?;
        a.xor(eax, (stream | ring::COMPACT_MARK) as i32)?;
        a.mov(dword_ptr(r11 + rdx * 8 + (slot + 4)), eax)?;
        self.pending_label = None;
        Ok(retry)
    }

    /// A thread's first record with its ring kept in its slab ([`At::ring_cache`]), at
    /// `look`: `rcx` and `r10` saved below the red zone, the thread table's lookup, `r11` =
    /// the ring, kept in the slab unless the slab is shared; back to `have` with `rcx` and
    /// `r10` as they were, or on to `no_slot` (the table full).
    fn look_ring_up(
        &mut self,
        c: SlabRing,
        rings: u64,
        shape: ring::Shape,
        mut look: CodeLabel,
        have: CodeLabel,
        no_slot: CodeLabel,
    ) -> Result<(), LowerError> {
        use iced_x86::code_asm::{dword_ptr, r11, rcx};
        let (thread, tid, threads) = (self.at.thread, self.at.thread_id, self.at.threads);
        let a = &mut self.a;
        let mut none = a.create_label();
        let mut shared = a.create_label();
        a.set_label(&mut look)?;
        keep_rcx_r10(a)?;
        timer_code::thread_slot(a, thread, tid, threads, none)?;
        a.imul_3(rcx, rcx, ring::ring_len(shape) as i32)?;
        a.add_instruction(templates::mov_imm64(Register::R11, rings + ring::RINGS))?;
        a.add(r11, rcx)?;
        // Kept only in a slab of this thread's own: a shared slab's threads would write one
        // ring at once.
        a.cmp(dword_ptr(c.shared as u64).gs(), 0)?;
        a.jne(shared)?;
        a.mov(qword_ptr(c.word as u64).gs(), r11)?;
        a.set_label(&mut shared)?;
        put_back_rcx_r10(a)?;
        a.jmp(have)?;
        a.set_label(&mut none)?;
        put_back_rcx_r10(a)?;
        a.jmp(no_slot)?;
        Ok(())
    }

    /// Where each of `reads` goes in a slot whose record has `nvalues` values before them.
    fn slot_reads(&self, nvalues: usize, reads: &[MemRead]) -> Vec<templates::SlotRead> {
        let mut status = ring::VALUES as i32 + 8 * nvalues as i32;
        reads
            .iter()
            .map(|r| {
                let s = templates::SlotRead {
                    base: iced(self.r(r.base)),
                    disp: r.disp,
                    status,
                    len: r.len,
                    kind: r.kind,
                };
                status += 8 * r.words() as i32;
                s
            })
            .collect()
    }

    /// [`Op::Call`]: the stack aligned to 16 bytes (the old `rsp` in a temporary the callee
    /// preserves), arguments in SysV order, the callee's result taken from `rax`.
    fn call(&mut self, target: u64, args: &[Src], ret: Option<VReg>) -> Result<(), LowerError> {
        use iced_x86::code_asm::rsp;
        let t = asm(self.temps[0]);
        self.a.mov(t, rsp)?;
        self.a.and(rsp, -16)?;
        for (k, s) in args.iter().enumerate() {
            let d = iced(CALL_ARGS[k]);
            let i = match *s {
                // Arguments come from callee-saved registers: no move overwrites another's
                // source.
                Src::Reg(v) => Instruction::with2(Code::Mov_r64_rm64, d, iced(self.r(v))),
                Src::Imm(v) if fits_i32(v) => {
                    Instruction::with2(Code::Mov_rm64_imm32, d, v as i64 as i32)
                }
                Src::Imm(v) => Instruction::with2(Code::Mov_r64_imm64, d, v),
            };
            self.a.add_instruction(ok(i)?)?;
        }
        self.a.add_instruction(Instruction::with_branch(Code::Call_rel32_64, target)?)?;
        self.a.mov(rsp, t)?;
        if let Some(r) = ret {
            let i = Instruction::with2(Code::Mov_r64_rm64, iced(self.r(r)), Register::RAX);
            self.a.add_instruction(ok(i)?)?;
        }
        self.pending_label = None;
        Ok(())
    }

    fn timers(&mut self, run: &[TimerOp]) -> Result<(), LowerError> {
        let mut done = self.a.create_label();
        timer_code::lower_timers(
            &mut self.a,
            run,
            self.at.thread,
            self.at.thread_id,
            self.at.threads,
            self.res.frame(),
            done,
        )?;
        self.pending_label = None;
        self.place(&mut done)
    }
}

/// `op r/m, imm8` or `op r/m, imm32` for an immediate that fits a sign-extended imm32.
fn imm_op<T>(short: Code, long: Code, dst: T, v: Src) -> Result<Instruction, IcedError>
where
    T: Copy,
    Instruction: WithImm<T>,
{
    let Src::Imm(v) = v else { unreachable!("an immediate") };
    let v = v as i64;
    if i8::try_from(v).is_ok() {
        Instruction::with_imm(short, dst, v as i32)
    } else {
        Instruction::with_imm(long, dst, v as i32)
    }
}

/// `Instruction::with2(code, dst, imm)` for a register or memory destination.
trait WithImm<T> {
    fn with_imm(code: Code, dst: T, imm: i32) -> Result<Instruction, IcedError>;
}

impl WithImm<Register> for Instruction {
    fn with_imm(code: Code, dst: Register, imm: i32) -> Result<Instruction, IcedError> {
        Instruction::with2(code, dst, imm)
    }
}

impl WithImm<MemoryOperand> for Instruction {
    fn with_imm(code: Code, dst: MemoryOperand, imm: i32) -> Result<Instruction, IcedError> {
        Instruction::with2(code, dst, imm)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn demand(need: usize) -> Demand {
        Demand {
            need,
            loose: 0,
            clobbers: RegSet::EMPTY,
            keep: RegSet::EMPTY,
            flags: FlagSet::EMPTY,
            stack: false,
        }
    }

    fn live(regs: &[Gpr], flags: FlagSet) -> LiveAt {
        LiveAt { regs: RegSet::of(regs).union(RegSet::of(&[Gpr::Rsp])), flags }
    }

    #[test]
    fn cold_code_comes_apart_and_the_hot_path_has_no_jump() {
        let src = "    thread %t\n    load64 %o, [0x7200]\n    br.ne %t, %o, other\n    \
                   add [0x7208], 1\ndone:\n    cold\nother:\n    atomic add [0x7210], 1\n    \
                   jmp done\n";
        let p = crate::text::parse(src).unwrap();
        let at = At::new(live(&[Gpr::Rdi], FlagSet::ALL), Env::User, ThreadPointer::FsSelf, 0);
        let (hot, cold) = lower_program_split(&p, &at).unwrap();
        use iced_x86::FlowControl as F;
        assert!(hot.iter().all(|i| i.flow_control() != F::UnconditionalBranch), "{hot:?}");
        let jne = hot.iter().find(|i| i.flow_control() == F::ConditionalBranch).unwrap();
        assert_eq!(jne.near_branch_target(), cold[0].ip(), "the branch leads to the cold code");
        assert!(cold[0].has_lock_prefix());
        let back = cold.last().unwrap();
        assert_eq!(back.flow_control(), F::UnconditionalBranch);
        // Back to `done`: the epilogue's first instruction (flags were saved: `popfq`).
        let done = hot.iter().find(|i| i.ip() == back.near_branch_target()).unwrap();
        assert_eq!(done.code(), Code::Popfq);
        // In line, the hot code jumps over the cold code.
        let inline = lower_program(&p, &at).unwrap();
        assert_eq!(inline.len(), hot.len() + cold.len() + 2);
        assert_eq!(inline[hot.len()].flow_control(), F::UnconditionalBranch);
        // Cold code must end by jumping back.
        let bad = crate::text::parse("    cold\n    add [0x7208], 1\n").unwrap_err();
        assert!(bad.to_string().contains("does not end with a jmp"), "{bad}");
    }

    #[test]
    fn a_thread_id_compared_at_once_needs_no_register() {
        let src = "    tid %t\n    br.ne %t, 4242, other\n    add [0x7208], 1\ndone:\n    cold\n\
                   other:\n    atomic add [0x7210], 1\n    jmp done\n";
        let p = crate::text::parse(src).unwrap();
        // Every register live, flags dead: a register would have to be saved.
        let every = LiveAt { regs: RegSet::ALL, flags: FlagSet::EMPTY };
        let at =
            At { thread_id: Some(0x2d0), ..At::new(every, Env::User, ThreadPointer::FsSelf, 0) };
        let (hot, _) = lower_program_split(&p, &at).unwrap();
        assert_eq!(hot[0].code(), Code::Cmp_rm32_imm32, "{hot:?}");
        assert_eq!(
            (hot[0].segment_prefix(), hot[0].memory_displacement64()),
            (Register::FS, 0x2d0)
        );
        assert_eq!(hot[0].immediate32(), 4242);
        assert!(hot.iter().all(|i| i.code() != Code::Push_r64), "nothing saved: {hot:?}");
        // With `rdfsbase`, the id is loaded into a register first.
        let base = At { thread: ThreadPointer::FsBase, ..at };
        let (hot, _) = lower_program_split(&p, &base).unwrap();
        assert!(hot.iter().any(|i| i.code() == Code::Rdfsbase_r64), "{hot:?}");
        // Without the id's place, no `tid`.
        let none = At { thread_id: None, ..at };
        assert_eq!(lower_program(&p, &none).unwrap_err(), LowerError::NoThreadId);
    }

    #[test]
    fn dead_registers_come_first_and_nothing_is_saved() {
        let at = live(&[Gpr::R10, Gpr::R9, Gpr::Rdi], FlagSet::ALL);
        let r = Reservation::new(&demand(2), &PREFERENCE, at, Env::User, FlagSave::Stack).unwrap();
        assert_eq!(r.scratch, [Gpr::R11, Gpr::R8]);
        assert_eq!((r.saved.len(), r.flags, r.red_zone), (0, false, false));
        assert!(r.prologue().is_empty() && r.epilogue().is_empty());
    }

    #[test]
    fn live_registers_are_spilled_only_when_too_few_are_dead() {
        let all_but_rbx: Vec<Gpr> = Gpr::ALL.into_iter().filter(|r| *r != Gpr::Rbx).collect();
        let at = live(&all_but_rbx, FlagSet::EMPTY);
        let r = Reservation::new(&demand(2), &PREFERENCE, at, Env::User, FlagSave::Stack).unwrap();
        // rbx is dead: taken first; then the first live one in preference order, saved.
        assert_eq!(r.scratch, [Gpr::Rbx, Gpr::R10]);
        assert_eq!(r.saved, [Gpr::R10]);
        assert!(r.red_zone, "a push in a process steps over the red zone first");
        assert_eq!(r.frame(), 128 + 8);
        let k =
            Reservation::new(&demand(2), &PREFERENCE, at, Env::Kernel, FlagSave::Stack).unwrap();
        assert_eq!((k.saved.clone(), k.red_zone, k.frame()), (vec![Gpr::R10], false, 8));
    }

    #[test]
    fn clobbers_and_kept_registers_are_never_handed_out() {
        let d = Demand {
            clobbers: RegSet::of(&[Gpr::Rax, Gpr::Rdx]),
            keep: RegSet::of(&[Gpr::Rdx, Gpr::R10]),
            flags: FlagSet(0x3e),
            ..demand(1)
        };
        // Nothing live but carry, which the snippet does not write.
        let r =
            Reservation::new(&d, &PREFERENCE, live(&[], FlagSet(1)), Env::User, FlagSave::Stack)
                .unwrap();
        assert_eq!(r.scratch, [Gpr::R11]);
        // rdx is written (a clobber) and read by `reg`: saved although dead; rax is not kept.
        assert_eq!(r.saved, [Gpr::Rdx]);
        assert_eq!(r.slot(Gpr::Rdx), Some(0));
        assert!(!r.flags);
        let too_many = Demand { need: 13, ..d };
        let e = Reservation::new(&too_many, &PREFERENCE, LiveAt::ALL, Env::User, FlagSave::Stack)
            .unwrap_err();
        assert_eq!(e, LowerError::Registers { need: 13, available: 12 });
    }

    #[test]
    fn only_values_dying_at_a_read_with_no_loose_register_written_before_are_loose() {
        let loose = |src: &str| {
            let p = crate::text::parse(src).unwrap();
            let names = |v: Vec<bool>| -> Vec<String> {
                p.vregs.iter().zip(v).filter(|(_, l)| *l).map(|(n, _)| n.clone()).collect()
            };
            names(loose_values(&p, &At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0)))
        };
        let emit = "emit.thread rings=0x9000, slots=4, stream=1";
        // %t is used after the emit; %a and %b die there.
        let p = format!(
            "thread %t\n reg %a, rdi\n reg %b, rsi\n {emit}, %a, read(%b, 8)\n \
                         store64 [0x7000], %t\n"
        );
        assert_eq!(loose(&p), ["a", "b"]);
        // %a lives through an earlier emit with reads (its calls write the loose registers),
        // %b through a tail timer (rsi, rdi, r8); %c is made after both.
        let p = format!(
            "reg %a, rdi\n reg %b, rsi\n {emit}, %a, read(%a, 8)\n \
                         timer.tailreturn tails=0xb000, sp=rsp\n reg %c, rdx\n \
                         {emit}, %a, %b, %c, read(%c, 8)\n"
        );
        assert_eq!(loose(&p), ["c"]);
        // No emit with reads, an emit without, a backward branch, a clean call: none.
        assert!(loose("reg %a, rdi\n store64 [0x7000], %a\n").is_empty());
        assert!(loose(&format!("reg %a, rdi\n {emit}, %a\n")).is_empty());
        // (%a, made before the loop, would be written by the first round's reads.)
        let back = format!(
            "reg %a, rdi\n top:\n {emit}, %a, read(%a, 8)\n reg %z, rsi\n br.eq %z, 0, top\n"
        );
        assert!(loose(&back).is_empty());
        let call = format!("reg %a, rdi\n call 0x5000\n reg %b, rsi\n {emit}, read(%b, 8)\n");
        assert!(loose(&call).is_empty());
    }

    #[test]
    fn an_rbp_based_tail_timer_keeps_rbp_even_where_it_is_dead() {
        use iced_x86::{InstructionInfoFactory, OpAccess};
        // Three registers wanted; the timers take the caller-saved ones, so the third
        // would be rbp (dead here), which the tail return reads.
        let p = crate::text::parse(
            "thread %t\n mov %u, 5\n br.ne %t, 0x7f1234567640, end\n \
             timer.tailreturn tails=0xb000, sp=rbp-16\nend:\n",
        )
        .unwrap();
        let nothing = LiveAt { regs: RegSet::of(&[Gpr::Rsp]), flags: FlagSet::EMPTY };
        let at = At::new(nothing, Env::User, ThreadPointer::FsBase, 0);
        let code = lower_program(&p, &at).unwrap();
        let mut info = InstructionInfoFactory::new();
        for i in &code {
            for u in info.info(i).used_registers() {
                let writes = matches!(
                    u.access(),
                    OpAccess::Write | OpAccess::ReadWrite | OpAccess::CondWrite
                );
                assert!(!(writes && u.register().full_register() == Register::RBP), "{i}");
            }
        }
    }
}
