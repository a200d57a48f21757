//! The instrumentation IR: a program of small ops run at one point, over virtual registers
//! (`%name`) and labels, that [`crate::lower_program`] turns into x86-64 code for the point's
//! liveness. Its text form is [`crate::text`]. The tracer's captures (`reg`, `emit`),
//! coverage's one-shot flags (`load8`, `br`, `store8`) and a JIT's inlined block counters
//! (`add`, `atomic add`) are all written in it; see the goldens in `tests/ir/`.

use crate::ring::{Shape, COMPACT_SLOT_LEN, MAX_SLOT_LEN, MAX_VALUES, MIN_SLOT_LEN};
use crate::SpAt;
use kerf_arch::x86_64::Gpr;

/// A virtual register: a 64-bit value of the program, given a physical register by the
/// reservation helper for the whole program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct VReg(pub u16);

/// A label of the program, placed by [`Op::Label`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Label(pub u16);

/// A value an op reads: a virtual register or an immediate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Src {
    Reg(VReg),
    Imm(u64),
}

/// A memory address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addr {
    /// An absolute address in kerf's data heap (within ±2 GiB of the code: RIP-relative).
    Abs(u64),
    /// `base + disp`, `base` a virtual register.
    Based { base: VReg, disp: i32 },
    /// The running thread's own copy of a word, `disp` bytes into its `gs` area (in a
    /// process: the counter slab kerf's JIT gives each thread; in the kernel it would be the
    /// CPU's per-CPU area). Not moved by [`Program::relocate`].
    PerThread(i32),
}

/// Width of a memory access; loads zero-extend to 64 bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Width {
    W8,
    W16,
    W32,
    W64,
}

impl Width {
    pub fn bits(self) -> u32 {
        match self {
            Width::W8 => 8,
            Width::W16 => 16,
            Width::W32 => 32,
            Width::W64 => 64,
        }
    }
}

/// A comparison of two 64-bit values (`u` unsigned, else signed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    Eq,
    Ne,
    Ltu,
    Leu,
    Gtu,
    Geu,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Cond {
    pub const ALL: [Cond; 10] = [
        Cond::Eq,
        Cond::Ne,
        Cond::Ltu,
        Cond::Leu,
        Cond::Gtu,
        Cond::Geu,
        Cond::Lt,
        Cond::Le,
        Cond::Gt,
        Cond::Ge,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Cond::Eq => "eq",
            Cond::Ne => "ne",
            Cond::Ltu => "ltu",
            Cond::Leu => "leu",
            Cond::Gtu => "gtu",
            Cond::Geu => "geu",
            Cond::Lt => "lt",
            Cond::Le => "le",
            Cond::Gt => "gt",
            Cond::Ge => "ge",
        }
    }
}

/// The cycle-timer ops: composites lowered by the timer templates (see [`crate::timer`]),
/// which find the thread's slot themselves. Consecutive timer ops share one slot lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimerOp {
    Start {
        timer: u64,
        clock: Clock,
    },
    Stop {
        timer: u64,
        clock: Clock,
    },
    TailCall {
        timer: u64,
        clock: Clock,
        tails: u64,
        stack: SpAt,
    },
    TailReturn {
        tails: u64,
        stack: SpAt,
    },
    /// At a context switch in the kernel (`__switch_to`, where `rdi` is the task switched out
    /// and `rsi` the one switched in): keeps the tasks' off-CPU clocks, by the 32-bit id at
    /// byte `pid` of a task. `out[prev]` = the TSC now; `table[next]` += the TSC now minus
    /// `out[next]`, where that was set (then cleared). Both tables hold a word per task id;
    /// the timers of [`Clock::OffCpu`] read `table`. It needs no thread slot, and runs for
    /// every task whatever the program's predicates.
    Switch {
        out: u64,
        table: u64,
        pid: u32,
    },
}

/// What a timer measures its intervals with (see [`crate::timer`]'s "Clocks").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Clock {
    /// The TSC: wall-clock time, in cycles.
    #[default]
    Cycles,
    /// The thread's off-CPU time: the 64-bit word at `table + 8 * id`, `id` being the 32-bit
    /// thread id at byte `tid` of the thread pointer's structure (glibc's `struct pthread` in
    /// a process). Something outside the generated code advances a thread's word each time
    /// the thread is switched back in, by the time it spent off the CPU (kerf's BPF program
    /// on `sched_switch`, in nanoseconds): a timer on it adds up the time its threads spent
    /// off the CPU inside the function, and wall time minus that is their virtual time. The
    /// table is page-aligned and `tid` below [`OFFCPU_TID_LIMIT`] (a pending tail call keeps
    /// both in one word).
    OffCpu { table: u64, tid: u32 },
}

/// `Clock::OffCpu`'s `tid` is below this, and its table a multiple of it.
pub const OFFCPU_TID_LIMIT: u32 = 4096;

impl TimerOp {
    /// The clock of the timer the op names (a tail return names none: the pending tail calls
    /// it ends keep theirs).
    pub fn clock(&self) -> Option<Clock> {
        match *self {
            TimerOp::Start { clock, .. }
            | TimerOp::Stop { clock, .. }
            | TimerOp::TailCall { clock, .. } => Some(clock),
            TimerOp::TailReturn { .. } | TimerOp::Switch { .. } => None,
        }
    }
}

/// One op. Text forms (see [`crate::text`]) in the comments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `NAME:`
    Label(Label),
    /// `thread %t`: the thread pointer ([`crate::ThreadPointer`]: fs base, `fs:[0]`, or the
    /// kernel's current task from `gs:[offset]`); the key of thread predicates.
    Thread { dst: VReg },
    /// `tid %v`: the thread's id (32 bits, zero-extended), read from the thread pointer's
    /// structure at the offset the point knows ([`crate::lower::At::thread_id`]: glibc's
    /// `struct pthread.tid`, which a forked child's thread has of its own); a process only.
    Tid { dst: VReg },
    /// `reg %v, rdi`: the point's register as it was there, even if the snippet saved it or
    /// uses it (`rsp` is the point's stack pointer).
    Reg { dst: VReg, reg: Gpr },
    /// `mov %v, SRC`
    Mov { dst: VReg, src: Src },
    /// `load8|load16|load32|load64 %v, [ADDR]` (zero-extended).
    Load { dst: VReg, width: Width, addr: Addr },
    /// `store8|store16|store32|store64 [ADDR], SRC`
    Store { width: Width, addr: Addr, src: Src },
    /// `add %v, SRC`
    Add { dst: VReg, src: Src },
    /// `add [ADDR], SRC` or `atomic add [ADDR], SRC`: a 64-bit add in memory, plain (the
    /// counter is the thread's or CPU's own) or locked (shared).
    AddMem { addr: Addr, src: Src, atomic: bool },
    /// `rdtsc %t`: the time stamp counter, 64 bits.
    Rdtsc { dst: VReg },
    /// `cpu %c`: the number of the CPU the thread runs on now (from `rdtscp`, as records
    /// take it: see [`crate::ring`]); what filters on the CPU compare.
    Cpu { dst: VReg },
    /// `br.COND %a, SRC, LABEL`: go to LABEL if `a COND src`.
    Branch { cond: Cond, a: VReg, b: Src, target: Label },
    /// `jmp LABEL`
    Jump { target: Label },
    /// `cold`: the ops after it are a rarely taken path, out of line: reached only by
    /// branches from before it, they end with a `jmp` back to a label before it. Lowering
    /// puts them after the epilogue (jumped over), or hands them apart to a JIT that places
    /// them away from the hot code ([`crate::lower_program_split`]), so that the common path
    /// runs straight through without a taken jump.
    Cold,
    /// `emit ring=ADDR, slots=N, slot=B, stream=S, %v...`: one record into the ring at `ring`
    /// of `shape` (N slots of B bytes; see [`crate::ring`]: header with stream, length and
    /// timestamp, then the values), or one more loss counted there when it is full.
    Emit { ring: u64, shape: Shape, stream: u32, values: Vec<VReg> },
    /// `emit.thread rings=ADDR, slots=N, slot=B, stream=S, %v..., read(%p+D, LEN)...`: the same
    /// record into this thread's own ring of the per-thread area at `rings` (see
    /// [`crate::ring`]'s "Per-thread rings"), found by the thread table slot as timers find
    /// it; written with no locked instruction. A thread with no slot counts one event in the
    /// area's `no_slot`. Each of `reads` copies memory into the record after the values
    /// ([`MemRead`]); in the kernel they need the driver's readers ([`crate::KernelReads`]).
    ///
    /// `emit.cpu rings=ADDR, cpus=N, slots=N, slot=B, stream=S, ...` (`per` = [`Rings::Cpu`]): the
    /// same record into the ring of the CPU the writer runs on, ring `cpu % N` of an area of
    /// N rings in the same layout (see [`crate::ring`]'s "Per-CPU rings"); the reservation
    /// and the loss count are locked, as a writer may move to another CPU after it read its
    /// own.
    ///
    /// `emit.thread.untimed`, `emit.cpu.untimed` (`timed` false): the record's time and CPU
    /// are 0, and no clock is read (`rdtsc` costs about 10 ns on the machines kerf is
    /// measured on, several times the rest of a record): for a reader that uses neither,
    /// as the JIT's call trace does when it only counts. With `slot=8` (compact slots,
    /// [`crate::ring`]'s "Compact records") an untimed per-thread record is one word: the
    /// stream above the low 32 bits of its one value, no reads.
    EmitThread {
        rings: u64,
        per: Rings,
        shape: Shape,
        stream: u32,
        values: Vec<VReg>,
        reads: Vec<MemRead>,
        timed: bool,
    },
    /// `call ADDR, SRC...` or `call %r, ADDR, SRC...`: a clean call of a routine in kerf's
    /// code heap (never the target's own code, DESIGN.md §5), SysV integer arguments, the
    /// caller-saved general registers and the flags saved where live, the stack aligned to 16
    /// bytes; `%r` gets its return value. Vector and x87 state is not saved: the routine
    /// must leave it alone (kerf's routines are integer code).
    Call { target: u64, args: Vec<Src>, ret: Option<VReg> },
    /// `timer.start ADDR`, `timer.stop ADDR`, `timer.tailcall ADDR, tails=ADDR, sp=rsp+N`,
    /// `timer.tailreturn tails=ADDR, sp=rbp-N`.
    Timer(TimerOp),
}

/// Which ring of an area of rings an `emit.thread` or `emit.cpu` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Rings {
    /// The ring of the thread's slot in the thread table (one ring per slot).
    Thread,
    /// The ring of the CPU the writer runs on, modulo this many rings (a power of two).
    Cpu(u32),
}

impl Rings {
    /// How many rings an area of them holds.
    pub fn count(self) -> u64 {
        match self {
            Rings::Thread => crate::timer::THREAD_SLOTS,
            Rings::Cpu(n) => u64::from(n),
        }
    }
}

/// One memory capture of an emit: `len` bytes (1..=MAX_READ) from `base + disp`, copied
/// into the record after its values, without ever faulting.
///
/// In the record it is a status word (an i64: the bytes read, fewer than `len` when the
/// range runs into an unmapped page, or `-errno` when not even its first byte is readable)
/// and `ceil(len / 8)` words holding the bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemRead {
    pub base: VReg,
    pub disp: i32,
    pub len: u16,
    pub kind: ReadKind,
}

/// How a memory capture is read, and from which address space. In a process every kind reads
/// the process's own memory the same way (`process_vm_readv`); in the kernel each calls its
/// own fault-free reader (`crate::KernelReads`). A string read stops at its NUL in the
/// kernel; the reader finds the NUL either way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadKind {
    /// `read(%p+D, LEN)`: bytes at a kernel (or the process's) address.
    Bytes,
    /// `str(%p+D, LEN)`: a NUL-terminated string.
    Str,
    /// `uread(...)`, `ustr(...)`: the same at a user address, read from the kernel.
    UserBytes,
    UserStr,
}

impl ReadKind {
    pub const ALL: [ReadKind; 4] =
        [ReadKind::Bytes, ReadKind::Str, ReadKind::UserBytes, ReadKind::UserStr];

    /// Its name in the text form.
    pub fn name(self) -> &'static str {
        match self {
            ReadKind::Bytes => "read",
            ReadKind::Str => "str",
            ReadKind::UserBytes => "uread",
            ReadKind::UserStr => "ustr",
        }
    }
}

/// Bytes one [`MemRead`] copies at most.
pub const MAX_READ: u16 = 64;

impl MemRead {
    /// Words the read takes in a record: its status, then its bytes.
    pub fn words(&self) -> usize {
        1 + (self.len as usize).div_ceil(8)
    }
}

/// Slots a ring has at most (the code compares and masks record numbers with imm32s).
pub const MAX_SLOTS: u32 = 1 << 30;

/// Bytes an area of per-thread or per-CPU rings may have at most: 16 GiB, where 256 thread
/// rings of 2^18 slots and their headers fit (the code finds a ring with an imm32 multiply by
/// its length, and reaches the area with a 64-bit immediate, so it may lie anywhere; pages
/// never written cost nothing).
pub const MAX_THREAD_RINGS_LEN: u64 = 1 << 34;

/// Per-CPU rings an `emit.cpu` area may have at most (the CPU in a record's header has 12 bits).
pub const MAX_CPU_RINGS: u32 = 4096;

/// Registers a clean call passes its arguments in, in order.
pub const CALL_ARGS: [Gpr; 6] = [Gpr::Rdi, Gpr::Rsi, Gpr::Rdx, Gpr::Rcx, Gpr::R8, Gpr::R9];

/// A program: its ops, and the names of its virtual registers and labels (indexed by
/// [`VReg`] and [`Label`]), kept for the text form.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Program {
    pub ops: Vec<Op>,
    pub vregs: Vec<String>,
    pub labels: Vec<String>,
}

impl Program {
    pub fn new() -> Program {
        Program::default()
    }

    /// The virtual register called `name`, made if new.
    pub fn vreg(&mut self, name: &str) -> VReg {
        if let Some(i) = self.vregs.iter().position(|n| n == name) {
            return VReg(i as u16);
        }
        self.vregs.push(name.to_string());
        VReg(self.vregs.len() as u16 - 1)
    }

    /// The label called `name`, made if new (placed by pushing [`Op::Label`]).
    pub fn label(&mut self, name: &str) -> Label {
        if let Some(i) = self.labels.iter().position(|n| n == name) {
            return Label(i as u16);
        }
        self.labels.push(name.to_string());
        Label(self.labels.len() as u16 - 1)
    }

    pub fn push(&mut self, op: Op) {
        self.ops.push(op);
    }

    /// Whether the program has a problem lowering would trip over: a label used but never
    /// placed or placed twice, a virtual register read before an op above it writes it, a
    /// call with more than six arguments, an emit (shared or per-thread) with more words
    /// (values, and its reads' status and bytes) than a slot holds or a ring whose slot count
    /// is not a power of two (up to [`MAX_SLOTS`]), a memory read of 0 or more than
    /// [`MAX_READ`] bytes, per-thread rings larger than [`MAX_THREAD_RINGS_LEN`] in all or
    /// one of them beyond an imm32, an off-CPU clock whose table and thread id offset a
    /// pending tail call could not keep in one word ([`OFFCPU_TID_LIMIT`]).
    /// Returns the index of the op and what is wrong.
    pub fn check(&self) -> Result<(), (usize, String)> {
        let mut placed = vec![false; self.labels.len()];
        let mut written = vec![false; self.vregs.len()];
        for (k, op) in self.ops.iter().enumerate() {
            if let Op::Label(l) = op {
                if placed[l.0 as usize] {
                    return Err((k, format!("label {} placed twice", self.labels[l.0 as usize])));
                }
                placed[l.0 as usize] = true;
            }
        }
        if let Some(c) = self.ops.iter().position(|o| *o == Op::Cold) {
            let why = if self.ops[c + 1..].contains(&Op::Cold) {
                Some("a second cold")
            } else if !matches!(self.ops.last(), Some(Op::Jump { .. })) || c + 1 == self.ops.len() {
                Some("cold code that does not end with a jmp")
            } else {
                None
            };
            if let Some(why) = why {
                return Err((c, why.to_string()));
            }
        }
        for (k, op) in self.ops.iter().enumerate() {
            let name = |l: Label| &self.labels[l.0 as usize];
            match op {
                Op::Branch { target, .. } | Op::Jump { target } if !placed[target.0 as usize] => {
                    return Err((k, format!("label {} is never placed", name(*target))));
                }
                Op::EmitThread { per: Rings::Cpu(n), .. }
                    if !n.is_power_of_two() || *n > MAX_CPU_RINGS =>
                {
                    return Err((
                        k,
                        format!("per-CPU rings: {n} is not a power of two up to {MAX_CPU_RINGS}"),
                    ));
                }
                Op::Emit { shape, .. } | Op::EmitThread { shape, .. }
                    if !shape.valid() || shape.slots > MAX_SLOTS =>
                {
                    return Err((
                        k,
                        format!(
                            "ring slots {} is not a power of two up to {MAX_SLOTS}, or slot \
                             length {} not one from {MIN_SLOT_LEN} to {MAX_SLOT_LEN} (or \
                             {COMPACT_SLOT_LEN}, compact)",
                            shape.slots, shape.slot_len
                        ),
                    ));
                }
                Op::Emit { shape, .. } if shape.is_compact() => {
                    return Err((k, "compact slots are for emit.thread.untimed only".into()));
                }
                Op::EmitThread { shape, per, values, reads, timed, stream, .. }
                    if shape.is_compact()
                        && (*timed
                            || !matches!(per, Rings::Thread)
                            || values.len() != 1
                            || !reads.is_empty()
                            || stream & crate::ring::COMPACT_MARK != 0) =>
                {
                    return Err((
                        k,
                        "compact slots (8 bytes) take one value and no reads, untimed, in \
                         the thread's ring, a stream below 2^31"
                            .into(),
                    ));
                }
                Op::EmitThread { shape, per, .. }
                    if crate::ring::rings_len(per.count(), *shape) > MAX_THREAD_RINGS_LEN
                        || crate::ring::ring_len(*shape) > i32::MAX as u64 =>
                {
                    return Err((
                        k,
                        format!(
                            "{} rings of {} slots of {} bytes exceed {MAX_THREAD_RINGS_LEN} \
                             bytes, or one of them 2 GiB",
                            per.count(),
                            shape.slots,
                            shape.slot_len
                        ),
                    ));
                }
                Op::Timer(t)
                    if matches!(t.clock(), Some(Clock::OffCpu { table, tid })
                        if table % OFFCPU_TID_LIMIT as u64 != 0 || tid >= OFFCPU_TID_LIMIT) =>
                {
                    return Err((
                        k,
                        format!(
                            "an off-CPU clock's table is not a multiple of \
                             {OFFCPU_TID_LIMIT}, or its thread id offset not below it"
                        ),
                    ));
                }
                Op::EmitThread { reads, .. }
                    if reads.iter().any(|r| r.len == 0 || r.len > MAX_READ) =>
                {
                    return Err((k, format!("a memory read takes 1 to {MAX_READ} bytes")));
                }
                Op::Emit { shape, .. } | Op::EmitThread { shape, .. }
                    if op.record_words() > shape.max_values() =>
                {
                    return Err((
                        k,
                        format!(
                            "emit of {} words (a slot of {} bytes holds {}, of {MAX_SLOT_LEN} \
                             {MAX_VALUES}; a read takes 1 + ceil(len / 8))",
                            op.record_words(),
                            shape.slot_len,
                            shape.max_values(),
                        ),
                    ));
                }
                Op::Call { args, .. } if args.len() > CALL_ARGS.len() => {
                    return Err((k, format!("call with {} arguments (at most 6)", args.len())));
                }
                _ => {}
            }
            for r in op.reads() {
                if !written[r.0 as usize] {
                    let n = &self.vregs[r.0 as usize];
                    return Err((k, format!("%{n} is read before it is written")));
                }
            }
            if let Some(d) = op.writes() {
                written[d.0 as usize] = true;
            }
        }
        Ok(())
    }

    /// The program with every *data* address moved: absolute memory operands
    /// ([`Addr::Abs`]) and the timers' blocks and tail areas up by `base`, rings
    /// ([`Op::Emit`], [`Op::EmitThread`]) up by `rings`. Code addresses ([`Op::Call`]'s
    /// target) stay: they are not in the data heap. The session generates a tool's program
    /// with data addresses relative to the tool's area (within reach of the code: operands
    /// are rip-relative) and ring addresses relative to its ring area (anywhere: the code
    /// loads them as 64-bit immediates), and shifts them to where each lies in each heap.
    pub fn relocate(&self, base: u64, rings: u64) -> Program {
        let at = |a: u64| a.wrapping_add(base);
        let ring_at = |a: u64| a.wrapping_add(rings);
        let addr = |a: Addr| match a {
            Addr::Abs(x) => Addr::Abs(at(x)),
            based => based,
        };
        let ops = self
            .ops
            .iter()
            .map(|op| match op.clone() {
                Op::Load { dst, width, addr: a } => Op::Load { dst, width, addr: addr(a) },
                Op::Store { width, addr: a, src } => Op::Store { width, addr: addr(a), src },
                Op::AddMem { addr: a, src, atomic } => Op::AddMem { addr: addr(a), src, atomic },
                Op::Emit { ring, shape, stream, values } => {
                    Op::Emit { ring: ring_at(ring), shape, stream, values }
                }
                Op::EmitThread { rings, per, shape, stream, values, reads, timed } => {
                    let rings = ring_at(rings);
                    Op::EmitThread { rings, per, shape, stream, values, reads, timed }
                }
                Op::Timer(t) => Op::Timer(match t {
                    // An off-CPU clock's table is not in the data heap.
                    TimerOp::Start { timer, clock } => TimerOp::Start { timer: at(timer), clock },
                    TimerOp::Stop { timer, clock } => TimerOp::Stop { timer: at(timer), clock },
                    TimerOp::TailCall { timer, clock, tails, stack } => {
                        TimerOp::TailCall { timer: at(timer), clock, tails: at(tails), stack }
                    }
                    TimerOp::TailReturn { tails, stack } => {
                        TimerOp::TailReturn { tails: at(tails), stack }
                    }
                    // Its tables are not in the data heap either.
                    switch @ TimerOp::Switch { .. } => switch,
                }),
                // Listed so that a new op with a data address cannot be forgotten here.
                other @ (Op::Label(_)
                | Op::Thread { .. }
                | Op::Tid { .. }
                | Op::Reg { .. }
                | Op::Mov { .. }
                | Op::Add { .. }
                | Op::Rdtsc { .. }
                | Op::Cpu { .. }
                | Op::Branch { .. }
                | Op::Jump { .. }
                | Op::Cold
                | Op::Call { .. }) => other,
            })
            .collect();
        Program { ops, vregs: self.vregs.clone(), labels: self.labels.clone() }
    }
}

impl Op {
    /// Words the record of an emit takes after its header (see [`crate::ring`]): its
    /// values, then each read's status and bytes; 0 for other ops.
    pub fn record_words(&self) -> usize {
        match self {
            Op::Emit { values, .. } => values.len(),
            Op::EmitThread { values, reads, .. } => {
                values.len() + reads.iter().map(MemRead::words).sum::<usize>()
            }
            _ => 0,
        }
    }

    /// The virtual register this op writes, if any.
    pub fn writes(&self) -> Option<VReg> {
        match *self {
            Op::Thread { dst }
            | Op::Tid { dst }
            | Op::Reg { dst, .. }
            | Op::Mov { dst, .. }
            | Op::Load { dst, .. }
            | Op::Add { dst, .. }
            | Op::Rdtsc { dst }
            | Op::Cpu { dst } => Some(dst),
            Op::Call { ret, .. } => ret,
            _ => None,
        }
    }

    /// The virtual registers this op reads.
    pub fn reads(&self) -> Vec<VReg> {
        let src = |s: &Src| match s {
            Src::Reg(r) => Some(*r),
            Src::Imm(_) => None,
        };
        let addr = |a: &Addr| match a {
            Addr::Based { base, .. } => Some(*base),
            Addr::Abs(_) | Addr::PerThread(_) => None,
        };
        match self {
            Op::Mov { src: s, .. } => src(s).into_iter().collect(),
            Op::Load { addr: a, .. } => addr(a).into_iter().collect(),
            Op::Store { addr: a, src: s, .. } | Op::AddMem { addr: a, src: s, .. } => {
                addr(a).into_iter().chain(src(s)).collect()
            }
            Op::Add { dst, src: s } => std::iter::once(*dst).chain(src(s)).collect(),
            Op::Branch { a, b, .. } => std::iter::once(*a).chain(src(b)).collect(),
            Op::Emit { values, .. } => values.clone(),
            Op::EmitThread { values, reads, .. } => {
                values.iter().copied().chain(reads.iter().map(|r| r.base)).collect()
            }
            Op::Call { args, .. } => args.iter().filter_map(src).collect(),
            _ => Vec::new(),
        }
    }
}

impl Program {
    /// Whether the program tells threads apart (its thread pointer, a per-thread ring, a
    /// timer), so that the target must give every thread a thread pointer.
    pub fn uses_threads(&self) -> bool {
        self.ops.iter().any(|o| {
            matches!(o, Op::Thread { .. } | Op::Tid { .. } | Op::EmitThread { .. } | Op::Timer(_))
        })
    }
}

#[cfg(test)]
mod tests {
    use crate::text::{parse, print};

    #[test]
    fn relocate_moves_every_data_address_and_no_code_address() {
        let p = parse(
            "thread %t
    load8 %f, [0x7000]
    load64 %g, [%t+16]
    store32 [0x7008], %f
    store64 [%g-8], 1
    atomic add [0x7010], %f
    add [0x7018], 1
    emit ring=0x8000, slots=4, slot=128, stream=1, %f
    emit.thread rings=0x9000, slots=4, slot=128, stream=2, %f, read(%g+8, 16)
    call %r, 0x5000, %f, 0x7000
    timer.start 0xa000
    timer.stop 0xa000
    timer.tailcall 0xa000, tails=0xb000, sp=rsp+8
    timer.tailreturn tails=0xb000, sp=rbp-16
    timer.start 0xa800, offcpu=0x7d0000000000, tid=0x2d0
    timer.tailcall 0xa800, offcpu=0x7d0000000000, tid=0x2d0, tails=0xb000, sp=rsp
",
        )
        .unwrap();
        let moved = print(&p.relocate(0x7f00_0000_0000, 0x7e00_0000_0000));
        // Immediates (0x7000 as a call argument), registers' addresses and the call's
        // target stay; every absolute data address moves, rings by the ring area's base.
        assert_eq!(
            moved,
            "    thread %t
    load8 %f, [0x7f0000007000]
    load64 %g, [%t+0x10]
    store32 [0x7f0000007008], %f
    store64 [%g-8], 1
    atomic add [0x7f0000007010], %f
    add [0x7f0000007018], 1
    emit ring=0x7e0000008000, slots=4, slot=128, stream=1, %f
    emit.thread rings=0x7e0000009000, slots=4, slot=128, stream=2, %f, read(%g+8, 16)
    call %r, 0x5000, %f, 0x7000
    timer.start 0x7f000000a000
    timer.stop 0x7f000000a000
    timer.tailcall 0x7f000000a000, tails=0x7f000000b000, sp=rsp+8
    timer.tailreturn tails=0x7f000000b000, sp=rbp-16
    timer.start 0x7f000000a800, offcpu=0x7d0000000000, tid=0x2d0
    timer.tailcall 0x7f000000a800, offcpu=0x7d0000000000, tid=0x2d0, tails=0x7f000000b000, sp=rsp
"
        );
        assert_eq!(p.relocate(0, 0), p);
        let twice = p.relocate(0x1000, 0x10_0000).relocate(0x2000, 0x20_0000);
        assert_eq!(twice, p.relocate(0x3000, 0x30_0000));
    }
}
