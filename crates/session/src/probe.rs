//! The probe model both targets share: what a probe does ([`Action`]) at which point
//! ([`Probe`]), where it went ([`Site`]), why a splice kind or a whole probe was refused
//! ([`Reason`], [`Refused`]), and what can go wrong installing or removing probes
//! ([`InstrumentError`]). Every other module of the session's instrumentation path (planning,
//! the patch-set builder, the back-ends) depends on this one, and it on none of them.

use crate::spec::Point;
use kerf_analysis::cfg::NoSplice;
use kerf_arch::x86_64::RegSet;
use kerf_os::kernel::KernelError;
use kerf_os::TargetError;
use kerf_patch::SpliceKind;
use std::fmt;

/// What a probe does at its point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Count executions.
    Count,
    /// Enter timer `t` (an index below the `timers` given to the installer).
    TimerStart(usize),
    /// Leave timer `t`.
    TimerStop(usize),
    /// Keep SIGTRAP out of the signal masks a `syscall` sets (`codegen::sigguard`). kerf adds
    /// these itself to a process that gets trap splices; tools never ask for one.
    SignalGuard,
    /// At a direct tail call (`jmp`) of a function timer `t` times: stay inside until the
    /// return that ends the tail call (codegen's `TimerTailCall`). The returns of every
    /// function the jump can lead to by tail calls need [`Action::TimerTailReturn`].
    TimerTailCall(usize),
    /// At a return, or a jump out of the functions a timed function reaches by tail calls:
    /// end the pending tail calls made with this stack pointer (codegen's `TimerTailReturn`).
    TimerTailReturn,
    /// Run the tool's IR program `program` (an index into [`ToolData::programs`]), which
    /// reads the values registers `reads` have at the point: an exit probe running it is
    /// placed before the exit only past instructions that change none of them (a return
    /// value is only there once the last write of `rax` has run).
    Program { program: usize, reads: RegSet },
    /// At the kernel's context switch: keep every task's off-CPU clock (codegen's
    /// `OffCpuSwitch`: `out` and `table` hold a word per task id, the id at byte `pid` of a
    /// task). The kernel target adds it itself for a tool with off-CPU timers.
    OffCpuSwitch { out: u64, table: u64, pid: u32 },
    /// Set byte `off` of the tool's area to 1: coverage's one-shot flag, a single `mov byte
    /// [rip+d], 1` that needs no register and leaves the flags alone, so it saves nothing. A
    /// tool reads it back through [`crate::installer::PatchSet::count`] (0 or 1).
    Flag(u64),
}

impl Action {
    /// A tool program that reads no register's value at the point.
    pub fn program(program: usize) -> Action {
        Action::Program { program, reads: RegSet::EMPTY }
    }

    /// Whether the probe takes part in timing through tail calls (it needs the thread's
    /// stack pointer at its exit, and the module's tail stacks).
    pub fn is_tail(self) -> bool {
        matches!(self, Action::TimerTailCall(_) | Action::TimerTailReturn)
    }

    /// The timer the probe enters or leaves, if any.
    pub fn timer(self) -> Option<usize> {
        match self {
            Action::TimerStart(t) | Action::TimerStop(t) | Action::TimerTailCall(t) => Some(t),
            Action::Count
            | Action::SignalGuard
            | Action::TimerTailReturn
            | Action::Program { .. }
            | Action::Flag(_)
            | Action::OffCpuSwitch { .. } => None,
        }
    }
}

/// What a tool hands the installer besides its probes: timer blocks, the IR programs its
/// [`Action::Program`] probes run, and a data area of its own.
///
/// A process has a data heap per module with probes (each within a jump of its code), the
/// kernel one: every heap that holds a `Program` probe gets an area of `area` bytes, and the
/// programs run in that heap's copy. Their data addresses are offsets in the area, which the
/// installer shifts to the heap's (`kerf_codegen::ir::Program::relocate`); a tool reads and
/// writes its areas through the installed probes (`PatchSet::area_load`, `area_store`).
#[derive(Clone, Debug, Default)]
pub struct ToolData {
    /// Timer blocks: each `TimerStart`/`TimerStop` names one, and all probes of one timer
    /// must be in one heap.
    pub timers: usize,
    /// The timers that run on the threads' off-CPU clock, not the TSC (`kerf_codegen::Clock`):
    /// their totals are the time their threads spent off the CPU inside them. The target
    /// provides the clock ([`crate::patchset::Runtime::off_cpu`]) or refuses them. A range:
    /// sampling asks about every timer, and tools give the off-CPU ones consecutive numbers.
    pub off_cpu: std::ops::Range<usize>,
    pub programs: Vec<kerf_codegen::ir::Program>,
    /// Bytes of the tool's area per heap with a `Program` probe (zeroed when mapped), within
    /// reach of the code (its program's data addresses are relative to it).
    pub area: u64,
    /// Bytes of the tool's ring area beside each area (zeroed when mapped): anywhere in the
    /// target's address space, as large as it needs (its program's ring addresses are
    /// relative to it, and the code loads them as 64-bit immediates). Pages never written
    /// cost no memory.
    pub rings: u64,
    /// Words written into every area before any splice goes live: `(offset, value)` (a
    /// tracer's stream flags, on from the first event).
    pub init: Vec<(u64, u64)>,
}

impl ToolData {
    /// Timer blocks only (what `count` and `time` need).
    pub fn timers(timers: usize) -> ToolData {
        ToolData { timers, ..ToolData::default() }
    }

    /// Whether the generated code must tell threads apart (timers, per-thread rings).
    pub fn needs_threads(&self, probes: &[Probe]) -> bool {
        self.timers > 0
            || probes.iter().any(|p| match p.action {
                Action::Program { program: k, .. } => {
                    self.programs.get(k).is_some_and(|p| p.uses_threads())
                }
                a => a.timer().is_some() || a.is_tail(),
            })
    }
}

/// One probe: an action at a point.
#[derive(Clone, Debug)]
pub struct Probe {
    pub point: Point,
    pub action: Action,
}

/// One spliced address and every probe placed there (they share one code patch).
#[derive(Clone, Debug)]
pub struct Site {
    pub spec: String,
    pub label: String,
    /// Where the splice is, in the target.
    pub addr: u64,
    pub kind: SpliceKind,
    /// Why a stronger kind was refused.
    pub reason: Option<Reason>,
    /// Indices of the probes placed here.
    pub probes: Vec<usize>,
    /// For jump2: the springboard's address and what space it took.
    pub springboard_in: Option<(u64, &'static str)>,
    /// The bytes the splice replaced.
    pub(crate) original: Vec<u8>,
    /// The splice's bytes.
    pub(crate) splice: Vec<u8>,
    /// Where the code patch is.
    pub(crate) patch: u64,
    /// The splice is written in the target (see [`Site::is_live`]).
    pub(crate) live: bool,
    /// For jump2: the springboard's address, the bytes it replaced, and its bytes.
    pub(crate) springboard: Option<(u64, Vec<u8>, Vec<u8>)>,
}

/// Why one splice kind could not be used at a site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KindRefusal {
    /// The patch layer's planner refused it.
    Patch(kerf_patch::Refusal),
    /// Its bytes would overlap another probe's splice.
    Overlap,
    /// Its displaced bytes reach code no splice may touch.
    NeverSpliced(NoSplice),
    /// jump2: no padding or start-up code within `jmp rel8` reach for its springboard.
    NoSpringboard,
    /// The patch (or the springboard) is out of the jump's reach.
    OutOfReach,
    /// kerf's kernel driver refused the jump (the site stays a trap).
    Driver { errno: Option<i32>, detail: String },
    /// Go code: a goroutine may resume at `at`, an instruction boundary inside the jump's
    /// bytes (see `plan::one_instruction_only`).
    ResumeInside { at: u64 },
    /// jump2 in Go code: a springboard may not go in padding. A thread on it has a PC between
    /// two functions, which Go's runtime attributes to the one before; when its preemption
    /// signal (SIGURG) lands there, the runtime finds the PC past that function's tables and
    /// throws "invalid runtime symbol table".
    GoPadding,
    /// Traps are off for this instrumentation (`--no-traps`).
    TrapsOff,
}

impl fmt::Display for KindRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KindRefusal::Patch(r) => write!(f, "{r}"),
            KindRefusal::Overlap => write!(f, "would overlap another probe's splice"),
            KindRefusal::TrapsOff => write!(f, "traps are off (--no-traps)"),
            KindRefusal::NeverSpliced(n) => {
                write!(f, "the displaced bytes reach code never spliced: {n}")
            }
            KindRefusal::NoSpringboard => write!(f, "no padding or start-up code within reach"),
            KindRefusal::OutOfReach => write!(f, "the patch is out of a jump's reach"),
            KindRefusal::Driver { detail, .. } => write!(f, "the driver refused it: {detail}"),
            KindRefusal::ResumeInside { at } => write!(
                f,
                "Go code: a goroutine may resume at {at:#x}, inside its bytes (one instruction \
                 at most)"
            ),
            KindRefusal::GoPadding => write!(
                f,
                "Go code: no springboard in padding (Go's preemption signal there kills the \
                 program)"
            ),
        }
    }
}

/// What chose a weaker kind before any was tried.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chosen {
    /// The options forced one kind.
    Forced,
    /// A signal-mask guard takes jump2 or trap (see `plan::Planner::plan`).
    Guard,
}

/// Why a site did not get a stronger splice kind, or why a probe was left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The kinds tried, strongest first, each with why it was refused; `chosen` when a weaker
    /// kind was asked for.
    Kinds { chosen: Option<Chosen>, refused: Vec<(SpliceKind, KindRefusal)> },
    /// The point itself is in code no splice may touch.
    NeverSpliced(NoSplice),
    /// The point is not in its module's code.
    NotCode,
    /// The bytes in the target (the displaced ones, or a springboard's padding) are not the
    /// module file's (DESIGN.md §5).
    Foreign(Foreign),
    /// A thread kept its PC (or a return address) inside the bytes to replace through every
    /// check.
    Busy { tries: usize },
    /// kerf's kernel driver refused the splice.
    Driver { errno: Option<i32>, detail: String },
}

impl Reason {
    /// The reason of a site a kind was asked for (`chosen`) and got.
    pub fn chosen(chosen: Chosen) -> Reason {
        Reason::Kinds { chosen: Some(chosen), refused: Vec::new() }
    }

    /// A driver's refusal.
    pub fn driver(e: &KernelError) -> Reason {
        Reason::Driver { errno: e.errno(), detail: e.to_string() }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Kinds { chosen, refused } => {
                let mut sep = "";
                match chosen {
                    Some(Chosen::Forced) => {
                        write!(f, "forced")?;
                        sep = "; ";
                    }
                    Some(Chosen::Guard) => {
                        write!(f, "a signal-mask guard takes jump2 or trap")?;
                        sep = "; ";
                    }
                    None => {}
                }
                for (k, (kind, r)) in refused.iter().enumerate() {
                    let kind = match kind {
                        SpliceKind::Jump5 => "jump5",
                        SpliceKind::Jump2 => "jump2",
                        SpliceKind::Trap if k > 0 => "and no trap",
                        SpliceKind::Trap => "trap",
                    };
                    write!(f, "{sep}{kind}: {r}")?;
                    sep = "; ";
                }
                Ok(())
            }
            Reason::NeverSpliced(n) => write!(f, "{n}"),
            Reason::NotCode => write!(f, "not in the module's code"),
            Reason::Foreign(x) => write!(f, "{x}"),
            Reason::Busy { tries } => write!(
                f,
                "a thread kept its PC (or a return address) in the bytes to replace through \
                 {tries} checks"
            ),
            Reason::Driver { detail, .. } => write!(f, "{detail}"),
        }
    }
}

/// Bytes in the target that are not what the module's file holds there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Foreign {
    pub addr: u64,
    /// What the target holds.
    pub live: Vec<u8>,
    /// What the file holds (`None`: the address is not in the module's code).
    pub file: Option<Vec<u8>>,
    pub path: std::path::PathBuf,
}

impl fmt::Display for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (addr, live, path) = (self.addr, &self.live, self.path.display());
        match &self.file {
            Some(file) => write!(
                f,
                "bytes at {addr:#x} differ from the file's: {live:02x?} in the target, \
                 {file:02x?} in {path} (another tool's breakpoint or patch, another kerf, or \
                 code changed at run time)"
            ),
            None => write!(f, "bytes at {addr:#x} are not in {path}'s code"),
        }
    }
}

/// A probe left out, with why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refused {
    pub probe: usize,
    pub label: String,
    pub addr: u64,
    pub reason: Reason,
}

/// Which target an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Where {
    Process(i32),
    Kernel,
}

impl fmt::Display for Where {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Where::Process(pid) => write!(f, "process {pid}"),
            Where::Kernel => write!(f, "the kernel"),
        }
    }
}

#[derive(Debug)]
pub enum InstrumentError {
    Target(TargetError),
    /// A request kerf's kernel driver refused.
    Kernel(KernelError),
    /// No probe could be placed: every one was refused (the first, with why).
    NothingPlaced(Box<Refused>),
    /// A `syscall` that needs a signal-mask guard could not get one, so no trap may go in.
    Unguarded(Box<Refused>),
    /// Code generation failed for the probes at a site.
    Codegen {
        target: Where,
        label: String,
        addr: u64,
        error: kerf_codegen::CodegenError,
    },
    /// The displaced instructions could not be laid out in a code patch.
    Layout {
        target: Where,
        label: String,
        addr: u64,
        error: kerf_patch::PatchError,
    },
    /// A site's code patch came out longer than the room reserved for it.
    PatchTooLong {
        target: Where,
        label: String,
        addr: u64,
        len: usize,
        room: u64,
    },
    /// The code patch (or the springboard) is out of reach of the splice's jump.
    OutOfReach {
        target: Where,
        label: String,
        addr: u64,
        what: &'static str,
    },
    /// A tail-call probe's exit has no known stack pointer at the site planned for it.
    NoStackFact {
        label: String,
        addr: u64,
    },
    /// The probes of one timer are in more than one module.
    TimerSpansModules {
        label: String,
        addr: u64,
        timer: usize,
    },
    /// Two planned splices, or a splice and a springboard, would share bytes (a planner bug,
    /// caught before anything is written).
    PlanOverlap {
        first: String,
        second: String,
    },
    /// A [`Action::Flag`] probe's byte lies past the tool's area.
    FlagOutsideArea {
        label: String,
        off: u64,
        area: u64,
    },
    /// Generated code cannot tell threads apart: no `rdfsbase` and a thread without TLS.
    NoThreadPointer {
        pid: i32,
        tid: i32,
    },
    /// Off-CPU timers (virtual time) cannot run in this target: why.
    NoOffCpuClock {
        target: Where,
        why: String,
    },
    /// `--tid`: no such thread in the process.
    NoSuchThread {
        pid: i32,
        tid: i32,
    },
    /// The kernel has no `current_task` symbol: timers and `--pid` cannot tell tasks apart.
    NoCurrentTask,
    /// `--pid` in the kernel: BTF has no `task_struct.pid`.
    NoTaskPid {
        pid: u32,
    },
    /// A probe of a kind only a process takes, asked of the kernel.
    NotInKernel {
        label: String,
        addr: u64,
        action: Action,
    },
    /// The kernel driver's data heap is too small for the probes.
    DataHeapFull {
        need: u64,
        have: u64,
    },
    /// The kernel driver's patch heap is full at this site.
    PatchHeapFull {
        label: String,
        addr: u64,
        have: u64,
    },
    /// A splice could not be written: a thread stayed inside its bytes through every check.
    StillBusy {
        target: Where,
        label: String,
        addr: u64,
        tries: usize,
    },
    /// kerf's code could not be freed: some thread kept pointing into it.
    StillInside {
        pid: i32,
        tries: usize,
        /// What kept it, the last time it was checked.
        last: String,
    },
    /// Bytes in the target that are not what kerf wrote or expected.
    Mismatch {
        addr: u64,
        detail: String,
    },
    /// A system call kerf injected (`rt_sigaction`) failed.
    Injected {
        pid: i32,
        call: &'static str,
        arg: u64,
        result: i64,
    },
    /// A cached analysis of module `module` (its index in the modules given) failed the check
    /// made before a splice is planned from it: nothing was spliced, and the module must be
    /// analysed again (see [`crate::checked`]).
    Analysis {
        module: usize,
        path: std::path::PathBuf,
        detail: kerf_analysis::validate::Invalid,
    },
    /// The caller's cancel flag was raised while the probes went in: the installation
    /// stopped and what had gone in was taken out again.
    Interrupted,
    /// An installation failed with `cause`, and taking out what had gone in did not leave
    /// the target as it was: `left` says what stayed (memory still mapped, or the error
    /// removal ended with).
    NotRestored {
        cause: Box<InstrumentError>,
        left: String,
    },
}

impl InstrumentError {
    /// `self`, the error an installation ended with, after `removal` took out what had gone
    /// in: unchanged when the target is as it was, else saying what was left.
    pub fn after_removal(self, removal: Result<Removed, InstrumentError>) -> InstrumentError {
        let left = match removal {
            Ok(r) if r.kept.is_empty() => return self,
            Ok(r) => r.describe(),
            Err(e) => format!("taking the probes out failed: {e}"),
        };
        InstrumentError::NotRestored { cause: Box::new(self), left }
    }
}

impl fmt::Display for InstrumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use InstrumentError as E;
        match self {
            E::Target(e) => write!(f, "{e}"),
            E::Kernel(e) => write!(f, "{e}"),
            E::NothingPlaced(r) => {
                write!(f, "cannot instrument {} at {:#x}: {}", r.label, r.addr, r.reason)
            }
            E::Unguarded(r) => write!(
                f,
                "cannot instrument {} at {:#x}: cannot guard signal masks for trap splices: {}",
                r.label, r.addr, r.reason
            ),
            E::Codegen { target, label, addr, error } => {
                write!(f, "{target}: cannot generate code for {label} at {addr:#x}: {error}")
            }
            E::Layout { target, label, addr, error } => {
                write!(
                    f,
                    "{target}: cannot lay out the code patch of {label} at {addr:#x}: {error}"
                )
            }
            E::PatchTooLong { target, label, addr, len, room } => write!(
                f,
                "{target}: the code patch of {label} at {addr:#x} is {len} bytes, room for {room}"
            ),
            E::OutOfReach { target, label, addr, what } => {
                write!(f, "{target}: cannot instrument {label} at {addr:#x}: {what} out of reach")
            }
            E::NoStackFact { label, addr } => write!(
                f,
                "cannot instrument {label} at {addr:#x}: the stack pointer at its exit is not \
                 known here"
            ),
            E::TimerSpansModules { label, addr, timer } => write!(
                f,
                "cannot instrument {label} at {addr:#x}: timer {timer}'s probes must all be in \
                 one module"
            ),
            E::PlanOverlap { first, second } => write!(
                f,
                "internal error, nothing written: the plan has a {first} and a {second} that \
                 share bytes"
            ),
            E::FlagOutsideArea { label, off, area } => write!(
                f,
                "cannot instrument {label}: its flag at byte {off} is past the tool's area of \
                 {area} bytes"
            ),
            E::NoThreadPointer { pid, tid } => write!(
                f,
                "process {pid}, thread {tid}: this kernel does not allow rdfsbase and the thread \
                 has no TLS, so timers and --tid cannot tell threads apart"
            ),
            E::NoSuchThread { pid, tid } => {
                write!(f, "--tid {tid}: no thread {tid} in process {pid}")
            }
            E::NoOffCpuClock { target, why } => {
                write!(f, "{target}: no virtual time (the threads' off-CPU clock): {why}")
            }
            E::NoCurrentTask => {
                write!(f, "timers: no current_task in /proc/kallsyms: cannot tell tasks apart")
            }
            E::NoTaskPid { pid } => {
                write!(f, "--pid {pid}: no task_struct.pid in /sys/kernel/btf/vmlinux")
            }
            E::NotInKernel { label, addr, action } => write!(
                f,
                "cannot instrument {label} at {addr:#x} in the kernel: {action:?} probes are for \
                 processes"
            ),
            E::DataHeapFull { need, have } => {
                write!(f, "the probes need {need} bytes of data heap, the driver has {have}")
            }
            E::PatchHeapFull { label, addr, have } => write!(
                f,
                "cannot instrument {label} at {addr:#x}: the driver's patch heap ({have} bytes) is \
                 full"
            ),
            E::StillBusy { target, label, addr, tries } => write!(
                f,
                "{target}: cannot instrument {label} at {addr:#x}: a thread stayed inside \
                 the bytes to replace through {tries} checks"
            ),
            E::Mismatch { addr, detail } => write!(f, "bytes at {addr:#x}: {detail}"),
            E::Injected { pid, call, arg, result } => {
                write!(f, "process {pid}: injected {call}({arg}) failed: {result}")
            }
            E::Analysis { path, detail, .. } => {
                write!(f, "the cached analysis of {} does not match it: {detail}", path.display())
            }
            E::Interrupted => {
                write!(f, "interrupted while installing probes; every one is taken out again")
            }
            E::NotRestored { cause: c, left } => match &**c {
                E::Interrupted => write!(f, "interrupted while installing probes; {left}"),
                c => write!(f, "{c}; and then {left}"),
            },
            E::StillInside { pid, tries, last } => write!(
                f,
                "process {pid}: a thread stayed inside kerf's code through {tries} checks \
                 (last: {last})"
            ),
        }
    }
}

impl std::error::Error for InstrumentError {}

impl From<TargetError> for InstrumentError {
    fn from(e: TargetError) -> Self {
        InstrumentError::Target(e)
    }
}

impl From<KernelError> for InstrumentError {
    fn from(e: KernelError) -> Self {
        InstrumentError::Kernel(e)
    }
}

/// What a removal left behind.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Removed {
    /// Code and data heaps left mapped in the target, `(address, bytes)`: every splice is
    /// gone, but some stack still held a value pointing into them that could not be told
    /// from a live signal frame.
    pub kept: Vec<(u64, u64)>,
    /// The last such value, when `kept` is not empty.
    pub why: Option<String>,
    /// The target had ended: forked copies of it (pids) that still ran with kerf's splices,
    /// which were taken out of them (see `crate::forked`).
    pub copies_after_end: Vec<i32>,
}

impl Removed {
    /// What stayed, in words: "every splice is removed, but N KiB ... stay mapped: why".
    pub fn describe(&self) -> String {
        let bytes: u64 = self.kept.iter().map(|k| k.1).sum();
        format!(
            "every splice is removed, but {} KiB of kerf's code and data stay mapped ({} \
             ranges): {}",
            bytes.div_ceil(1024),
            self.kept.len(),
            self.why.as_deref().unwrap_or("unknown")
        )
    }
}
