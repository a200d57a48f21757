//! The patch set both targets build from a plan (DESIGN.md §3): room per probe in the code
//! heap, the data-heap layout (thread table, timer blocks, counters), the one mapping from a
//! probe's [`Action`] to codegen's `Primitive`s, the code patch of every site, and a site's
//! splice as a back-end writes it ([`Splice`], with its [`Outcome`]). Generating code is pure
//! (the plan and addresses in, bytes out, no system call and no analysis), so the sites of a
//! batch are generated in parallel.

use crate::plan::SitePlan;
use crate::probe::{Action, InstrumentError, KindRefusal, Probe, Reason, Site, ToolData, Where};
use kerf_arch::{KernelAddr, RemoteAddr};
use kerf_codegen::ir::{Op, Program};
use kerf_codegen::timer::{FIRST_LOOKUP_BYTES, THREAD_TABLE_LEN, TIMER_LEN};
use kerf_codegen::{
    lower, lower_program, sigguard, At, Clock, Context, CpuRead, Env, FlagSave, KernelReads,
    Primitive, ThreadPointer,
};
use kerf_patch::{build_patch_with, Layout};

/// An address in a target's address space, as its back-end takes it: [`RemoteAddr`] in a
/// process, [`KernelAddr`] in the kernel. Planning works in plain `u64`s of the target's
/// space (its sites, [`Site::addr`]); a back-end is handed typed ones.
pub trait TargetAddr: Copy + Eq + Ord + std::fmt::Debug {
    fn at(a: u64) -> Self;
    fn get(self) -> u64;
}

impl TargetAddr for RemoteAddr {
    fn at(a: u64) -> Self {
        RemoteAddr(a)
    }
    fn get(self) -> u64 {
        self.0
    }
}

impl TargetAddr for KernelAddr {
    fn at(a: u64) -> Self {
        KernelAddr(a)
    }
    fn get(self) -> u64 {
        self.0
    }
}

/// A springboard: its address, the bytes it replaces, and its jump to a code patch.
pub type Springboard<A> = (A, Vec<u8>, Vec<u8>);

/// One site's splice as a back-end writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Splice<A> {
    /// Where the splice goes, what is there now, and what goes there (the whole splice: a
    /// back-end that needs steps, like the kernel's int3-then-jump, takes them itself).
    pub addr: A,
    pub old: Vec<u8>,
    pub new: Vec<u8>,
    /// The code patch the splice leads to (the kernel driver routes its int3 there).
    pub patch: A,
    /// A jump2's springboard, for a back-end that writes it with the splice (the kernel's:
    /// [`crate::backend::Backend::SPRINGBOARDS_WITH_SPLICES`]); `None` where it was written
    /// before (a process, under stops of its own).
    pub springboard: Option<Springboard<A>>,
}

/// What became of one splice of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Written (or, for removal, taken out) and verified.
    Done,
    /// A thread is inside its bytes: not written, try again in a later batch.
    Later,
    /// The target refused it (the kernel's kprobe blacklist, bytes another mechanism owns):
    /// left out, with why.
    Refused(Reason),
    /// Its jump could not go in; it works as a trap (its int3 stays), with why.
    Trap(KindRefusal),
}

/// Bytes of code heap reserved per spliced address (snippet, displaced instructions, jump
/// back), plus `TIMER_PATCH` for each timer primitive there, and for each thread-slot lookup
/// the runtime's [`Runtime::lookup_room`].
pub(crate) const PATCH_SLOT: u64 = 128;
pub(crate) const TIMER_PATCH: u64 = 192;
/// Code heap for a signal-mask guard (on top of `PATCH_SLOT`).
pub(crate) const GUARD_PATCH: u64 = 640;
/// Where a guard's label ids start when it shares a patch with other primitives, whose ids
/// start at 1 (see `kerf_codegen::relabel`).
const GUARD_LABELS: u64 = 0x1000;
/// More for a probe that times through tail calls (a loop over the tail stack, three more
/// registers saved).
pub(crate) const TAIL_PATCH: u64 = 256;
/// Bytes of data heap per counter: one cache line, so threads counting different points do
/// not share one.
pub(crate) const DATA_SLOT: u64 = 64;

/// Where the label ids of a site's `k`th tool program start (after the primitives' and the
/// guard's), and how many ids one program may use.
const PROGRAM_LABELS: u64 = 0x2000;
const PROGRAM_LABEL_SPAN: u64 = 0x400;
/// Programs one site may hold (label ids must stay below 64 KiB; see `kerf_codegen::relabel`).
const MAX_SITE_PROGRAMS: usize = ((0x10000 - PROGRAM_LABELS) / PROGRAM_LABEL_SPAN) as usize;

/// Bytes of code heap reserved for a probe of this action (a multiple of 16, so that patches
/// placed one after the other by room stay aligned), where a thread-slot lookup takes
/// `lookup` bytes more ([`Runtime::lookup_room`]).
pub(crate) fn patch_room(a: Action, tool: &ToolData, lookup: u64) -> u64 {
    match a {
        Action::Count => PATCH_SLOT,
        Action::TimerStart(_) | Action::TimerStop(_) => PATCH_SLOT + TIMER_PATCH + lookup,
        Action::OffCpuSwitch { .. } => PATCH_SLOT + TIMER_PATCH,
        Action::TimerTailCall(_) | Action::TimerTailReturn => {
            PATCH_SLOT + TIMER_PATCH + TAIL_PATCH + lookup
        }
        Action::SignalGuard => PATCH_SLOT + GUARD_PATCH,
        Action::Program { program: k, .. } => {
            PATCH_SLOT + tool.programs.get(k).map_or(0, |p| program_room(p, lookup))
        }
        // `mov byte [rip+d], 1`: 7 bytes.
        Action::Flag(_) => PATCH_SLOT + 16,
    }
}

/// Coverage's one-shot flag at byte `off` of the tool's area ([`Action::Flag`]): one store of
/// an immediate, which needs no register and writes no flag, so nothing is saved around it.
/// It stores unconditionally: the probe is removed once its flag is seen, so a test before
/// the store would only make it longer.
fn flag_program(off: u64) -> Program {
    use kerf_codegen::ir::{Addr, Src, Width};
    let store = Op::Store { width: Width::W8, addr: Addr::Abs(off), src: Src::Imm(1) };
    Program { ops: vec![store], ..Program::default() }
}

/// A bound on the bytes a tool program lowers to: its saves and restores (at most every
/// general register, flags and the red-zone step: 96 bytes), then each op's longest form.
/// An underestimate is caught, not overrun: a patch longer than its room is an error.
fn program_room(p: &Program, lookup: u64) -> u64 {
    let ops: u64 = p
        .ops
        .iter()
        .map(|op| match op {
            Op::Label(_) => 0,
            // The reservation and the record (10 bytes a value); per thread, with the
            // thread-slot lookup.
            Op::Emit { values, .. } => 160 + 10 * values.len() as u64,
            Op::EmitThread { values, reads, .. } => {
                224 + lookup + 10 * values.len() as u64 + 160 * reads.len() as u64
            }
            Op::Call { args, .. } => 32 + 10 * args.len() as u64,
            Op::Timer(_) => TIMER_PATCH + TAIL_PATCH + lookup,
            _ => 16,
        })
        .sum();
    (96 + ops).next_multiple_of(16)
}

/// Room for the code patch of a site holding `members` ([`patch_room`]'s `lookup`), which
/// displaces `d`. A site of coverage flags alone gets room from what it displaces instead of
/// `PATCH_SLOT`: its stores (7 bytes each), each displaced instruction relocated (at most 16
/// bytes longer than it was: a rel8 branch made rel32 is 4 more, a `jrcxz`/`loop` rewritten
/// around a jump 8 more, a call emulated by storing its return address 20 more but then no
/// jump back) and the jump back (5); about 48 bytes where `PATCH_SLOT` reserves 144, which is
/// what bounds how many blocks kerf.ko's patch heap takes. (A patch longer than its room is
/// still caught: `PatchTooLong`.)
pub(crate) fn site_room(
    probes: &[Probe],
    members: &[usize],
    tool: &ToolData,
    lookup: u64,
    d: &kerf_patch::Displaced,
) -> u64 {
    if !members.is_empty() && members.iter().all(|&i| matches!(probes[i].action, Action::Flag(_))) {
        let stores = 7 * members.len() as u64;
        // A trap displaces a whole instruction but writes one byte (`d.len` 1); a jump padded
        // over filler writes more than its instructions hold.
        let insns: u64 = d.insns.iter().map(|i| i.len() as u64).sum();
        let relocated = insns.max(d.len as u64) + 16 * d.insns.len() as u64;
        return (stores + relocated + 5).next_multiple_of(16);
    }
    members.iter().map(|&i| patch_room(probes[i].action, tool, lookup)).sum()
}

/// Where each probe's data is, per data heap (a process has one per module with probes, the
/// kernel one for all):
/// ```text
/// +0                     thread table (codegen::timer), used by timers and thread filters
/// +THREAD_TABLE_LEN      the heap's timer blocks, TIMER_LEN bytes each
/// then                   its counters, DATA_SLOT bytes each
/// then (64-aligned)      the tool's area (`ToolData::area` bytes), if a probe here runs a
///                        tool program
/// then (`end`)           what the target adds (a process's tail stacks and signal area)
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataLayout {
    /// Per probe: the heap and offset of its counter (`Count` probes).
    pub counters: Vec<Option<(usize, u64)>>,
    /// Per probe: the heap and offset of its byte (`Flag` probes: in the heap's tool area).
    pub flags: Vec<Option<(usize, u64)>>,
    /// Per timer: the heap and offset of its block (`None`: no probe uses it).
    pub timers: Vec<Option<(usize, u64)>>,
    /// Per heap: the offset of the tool's area (`None`: no tool program runs there).
    pub areas: Vec<Option<u64>>,
    /// Per heap: the offset of the tool's ring area, once the back-end has mapped the heap
    /// and placed it ([`crate::backend::Heap::rings`]).
    pub rings: Vec<Option<u64>>,
    /// Per heap: the offset of its tail stacks, once mapped ([`crate::backend::Heap::tails`]).
    pub tails: Vec<Option<u64>>,
    /// Per heap: the end of the layout.
    pub end: Vec<u64>,
}

impl DataLayout {
    /// Lay out the timers and area of `tool` and the counters of `probes` in `heaps` heaps;
    /// `heap_of` maps a module to its heap. Every probe of one timer must be in one heap.
    pub(crate) fn new(
        probes: &[Probe],
        tool: &ToolData,
        heaps: usize,
        heap_of: impl Fn(usize) -> usize,
    ) -> Result<DataLayout, InstrumentError> {
        let mut timer_heap: Vec<Option<usize>> = vec![None; tool.timers];
        for p in probes {
            let Some(t) = p.action.timer() else { continue };
            let h = heap_of(p.point.module);
            match timer_heap[t] {
                None => timer_heap[t] = Some(h),
                Some(other) if other != h => {
                    return Err(InstrumentError::TimerSpansModules {
                        label: p.point.label.clone(),
                        addr: p.point.addr.0,
                        timer: t,
                    })
                }
                Some(_) => {}
            }
        }
        let mut next = vec![THREAD_TABLE_LEN; heaps];
        let timers = timer_heap
            .iter()
            .map(|h| {
                h.map(|h| {
                    let at = next[h];
                    next[h] += TIMER_LEN;
                    (h, at)
                })
            })
            .collect();
        let counters = probes
            .iter()
            .map(|p| {
                (p.action == Action::Count).then(|| {
                    let h = heap_of(p.point.module);
                    let at = next[h];
                    next[h] += DATA_SLOT;
                    (h, at)
                })
            })
            .collect();
        let mut areas = vec![None; heaps];
        for p in
            probes.iter().filter(|p| matches!(p.action, Action::Program { .. } | Action::Flag(_)))
        {
            let h = heap_of(p.point.module);
            if areas[h].is_none() {
                let at = next[h].next_multiple_of(64);
                areas[h] = Some(at);
                next[h] = at + tool.area;
            }
        }
        let mut flags = Vec::with_capacity(probes.len());
        for p in probes {
            flags.push(match p.action {
                Action::Flag(off) => {
                    if off >= tool.area {
                        return Err(InstrumentError::FlagOutsideArea {
                            label: p.point.label.clone(),
                            off,
                            area: tool.area,
                        });
                    }
                    let h = heap_of(p.point.module);
                    areas[h].map(|at| (h, at + off))
                }
                _ => None,
            });
        }
        let none = vec![None; heaps];
        Ok(DataLayout {
            counters,
            flags,
            timers,
            areas,
            rings: none.clone(),
            tails: none,
            end: next,
        })
    }
}

impl Site {
    /// The record of a site planned as `sp`, named `label`, whose splice `s` is written
    /// (`live`) or about to be.
    pub(crate) fn planned<A: TargetAddr>(
        spec: &str,
        label: String,
        sp: &SitePlan,
        s: Splice<A>,
        live: bool,
    ) -> Site {
        Site {
            spec: spec.to_string(),
            label,
            addr: s.addr.get(),
            kind: sp.plan.kind,
            reason: sp.plan.reason.clone(),
            probes: sp.members.clone(),
            springboard_in: sp.plan.springboard,
            original: s.old,
            splice: s.new,
            patch: s.patch.get(),
            live,
            springboard: s.springboard.map(|(at, pad, jmp)| (at.get(), pad, jmp)),
        }
    }
}

impl Site {
    /// Whether the site's splice is in the target now (it goes out on removal, or earlier
    /// when a tool retires it).
    pub fn is_live(&self) -> bool {
        self.live
    }

    /// Where the site's code patch is: what an address in an oops or a core dump inside
    /// kerf's code heap is matched against.
    pub fn patch(&self) -> u64 {
        self.patch
    }

    /// The site's splice as a back-end writes it, with its springboard where the back-end
    /// writes springboards with their splices (`boards`).
    pub(crate) fn as_splice<A: TargetAddr>(&self, boards: bool) -> Splice<A> {
        let board = self.springboard.as_ref().filter(|_| boards);
        Splice {
            addr: A::at(self.addr),
            old: self.original.clone(),
            new: self.splice.clone(),
            patch: A::at(self.patch),
            springboard: board.map(|(at, pad, jmp)| (A::at(*at), pad.clone(), jmp.clone())),
        }
    }
}

/// How generated code runs in this target (the same for every site).
#[derive(Clone, Copy, Debug)]
pub struct Runtime {
    pub target: Where,
    pub env: Env,
    pub thread: ThreadPointer,
    /// Where the thread id is in the thread pointer's structure (glibc's), in a process
    /// where it is known: the thread table tells forked children's threads apart by it.
    pub thread_id: Option<u32>,
    pub only_thread: Option<u64>,
    pub only_id: Option<(u32, u32)>,
    /// How generated code reads the CPU it runs on.
    pub cpu: CpuRead,
    /// How generated code keeps live flags it writes.
    pub flags_save: FlagSave,
    /// The kernel's fault-free readers (memory captures in the kernel); `None` in a process.
    pub kernel_reads: Option<KernelReads>,
    /// The threads' off-CPU clock, where the tool has off-CPU timers
    /// ([`ToolData::off_cpu`]) and the target provides it.
    pub off_cpu: Option<Clock>,
}

impl Runtime {
    /// Bytes a thread-slot lookup's first-event path takes in each patch that has one: only
    /// where the lookup checks thread ids (a process with glibc's, not under seccomp).
    pub fn lookup_room(&self) -> u64 {
        if self.thread_id.is_some() {
            FIRST_LOOKUP_BYTES
        } else {
            0
        }
    }

    /// How generated code reads the CPU on this machine: `rdpid` where the CPUs have it
    /// (an event costs half what `rdtscp` makes it cost), else `rdtscp`.
    pub fn cpu_read() -> CpuRead {
        if kerf_os::clock::cpu_has("rdpid") {
            CpuRead::Rdpid
        } else {
            CpuRead::Rdtscp
        }
    }

    /// How generated code in a process keeps live flags on this machine: in `rax` by
    /// `lahf`/`sahf` where the CPUs have them in 64-bit mode, else on the stack. (The kernel
    /// keeps `pushfq`/`popfq`: not measured there.)
    pub fn flags_save() -> FlagSave {
        if kerf_os::clock::cpu_has("lahf_lm") {
            FlagSave::Ah
        } else {
            FlagSave::Stack
        }
    }
}

/// One site to generate: its plan and where its patch and data are in the target.
pub(crate) struct Job<'a> {
    pub site: &'a SitePlan,
    /// The label errors name.
    pub label: &'a str,
    /// Where the code patch goes.
    pub patch_at: u64,
    /// The data heap of the site's module, and its tail stacks (0: none).
    pub data: u64,
    pub tails: u64,
    /// Where the tool's area and ring area are in that heap (0: none).
    pub area: u64,
    pub rings: u64,
    /// For a site with a signal-mask guard: where the program's SIGTRAP action is kept.
    pub guard_action: Option<u64>,
}

/// A site's generated code patch.
#[derive(Clone, Debug)]
pub struct Code {
    pub bytes: Vec<u8>,
    pub layout: Layout,
}

/// The primitive of probe `i` (`None` for a signal-mask guard or a tool program, which are
/// not primitives).
fn primitive(
    probes: &[Probe],
    tool: &ToolData,
    rt: &Runtime,
    data: &DataLayout,
    job: &Job<'_>,
    i: usize,
) -> Result<Option<Primitive>, InstrumentError> {
    let timer = |t: usize| data.timers[t].map_or(0, |(_, off)| job.data + off);
    let clock = |t: usize| {
        if !tool.off_cpu.contains(&t) {
            return Ok(Clock::Cycles);
        }
        rt.off_cpu.ok_or_else(|| InstrumentError::NoOffCpuClock {
            target: rt.target,
            why: "the target set up no off-CPU clock".into(),
        })
    };
    let stack = || {
        job.site.stack(i).ok_or_else(|| InstrumentError::NoStackFact {
            label: job.label.to_string(),
            addr: job.site.plan.displaced.point,
        })
    };
    Ok(Some(match probes[i].action {
        Action::Count => {
            let (_, off) = data.counters[i].expect("a counter laid out for every Count");
            Primitive::Count { slot: job.data + off }
        }
        Action::TimerStart(t) => Primitive::TimerStart { timer: timer(t), clock: clock(t)? },
        Action::TimerStop(t) => Primitive::TimerStop { timer: timer(t), clock: clock(t)? },
        Action::TimerTailCall(t) => Primitive::TimerTailCall {
            timer: timer(t),
            clock: clock(t)?,
            tails: job.tails,
            stack: stack()?,
        },
        Action::TimerTailReturn => Primitive::TimerTailReturn { tails: job.tails, stack: stack()? },
        Action::OffCpuSwitch { out, table, pid } => Primitive::OffCpuSwitch { out, table, pid },
        Action::SignalGuard | Action::Program { .. } | Action::Flag(_) => return Ok(None),
    }))
}

/// The code patch of one site: the primitives of its probes, then its tool programs (each
/// lowered on its own, with its addresses moved into this heap's area), then (for a guard)
/// the guard, which runs the `syscall` itself, then the displaced instructions and the jump
/// back.
pub(crate) fn site_code(
    probes: &[Probe],
    tool: &ToolData,
    data: &DataLayout,
    rt: &Runtime,
    job: &Job<'_>,
) -> Result<Code, InstrumentError> {
    let (label, addr) = (job.label, job.site.plan.displaced.point);
    let codegen = |error| InstrumentError::Codegen {
        target: rt.target,
        label: label.to_string(),
        addr,
        error,
    };
    let mut prims = Vec::new();
    let mut programs = Vec::new();
    let mut flags = Vec::new();
    let mut guarded = false;
    for &i in &job.site.members {
        match (primitive(probes, tool, rt, data, job, i)?, probes[i].action) {
            (Some(p), _) => prims.push(p),
            (None, Action::Program { program: k, .. }) => programs.push(k),
            (None, Action::Flag(off)) => flags.push(off),
            (None, _) => guarded = true,
        }
    }
    let ctx = Context {
        live: job.site.live,
        env: rt.env,
        thread: rt.thread,
        threads: job.data,
        thread_id: rt.thread_id,
        only_thread: rt.only_thread,
        only_id: rt.only_id,
    };
    let mut snippet =
        if prims.is_empty() { Vec::new() } else { lower(&prims, &ctx).map_err(codegen)? };
    if programs.len() > MAX_SITE_PROGRAMS {
        let what =
            format!("{} tool programs at one site (at most {MAX_SITE_PROGRAMS})", programs.len());
        return Err(codegen(kerf_codegen::CodegenError(what)));
    }
    let at = At {
        live: job.site.live,
        env: rt.env,
        thread: rt.thread,
        threads: job.data,
        thread_id: rt.thread_id,
        cpu: rt.cpu,
        kernel_reads: rt.kernel_reads,
        flags_save: rt.flags_save,
        // (Spliced probes have no slabs.)
        ring_cache: None,
    };
    for (n, &k) in programs.iter().enumerate() {
        let program = tool
            .programs
            .get(k)
            .ok_or_else(|| codegen(kerf_codegen::CodegenError(format!("no tool program {k}"))))?;
        let mut code = lower_program(&program.relocate(job.area, job.rings), &at)
            .map_err(|e| codegen(kerf_codegen::CodegenError::from(e)))?;
        kerf_codegen::relabel(&mut code, PROGRAM_LABELS + n as u64 * PROGRAM_LABEL_SPAN);
        snippet.extend(code);
    }
    // Flags after the programs: a program that reads a register reads the point's, and a
    // flag's store touches none.
    for off in flags {
        let code = lower_program(&flag_program(off).relocate(job.area, job.rings), &at)
            .map_err(|e| codegen(kerf_codegen::CodegenError::from(e)))?;
        snippet.extend(code);
    }
    let layout = if guarded {
        let action = job.guard_action.ok_or_else(|| {
            codegen(kerf_codegen::CodegenError("a guard with no trap dispatcher".into()))
        })?;
        let mut g = sigguard::signal_guard(action).map_err(codegen)?;
        kerf_codegen::relabel(&mut g, GUARD_LABELS);
        snippet.extend(g);
        Layout::ReplacesFirst
    } else {
        Layout::Before
    };
    let bytes = build_patch_with(job.patch_at, &snippet, &job.site.plan.displaced, layout)
        .map_err(|error| InstrumentError::Layout {
            target: rt.target,
            label: label.to_string(),
            addr,
            error,
        })?;
    let room =
        site_room(probes, &job.site.members, tool, rt.lookup_room(), &job.site.plan.displaced);
    if bytes.len() as u64 > room {
        return Err(InstrumentError::PatchTooLong {
            target: rt.target,
            label: label.to_string(),
            addr,
            len: bytes.len(),
            room,
        });
    }
    Ok(Code { bytes, layout })
}

/// [`site_code`] of every job, in parallel over the machine's CPUs (pure: no system call),
/// results in the jobs' order.
pub(crate) fn generate(
    probes: &[Probe],
    tool: &ToolData,
    data: &DataLayout,
    rt: &Runtime,
    jobs: &[Job<'_>],
) -> Vec<Result<Code, InstrumentError>> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    // Below a few hundred sites a thread costs more than it saves.
    let per = jobs.len().div_ceil(workers).max(256);
    if jobs.len() <= per {
        return jobs.iter().map(|j| site_code(probes, tool, data, rt, j)).collect();
    }
    std::thread::scope(|s| {
        let handles: Vec<_> = jobs
            .chunks(per)
            .map(|chunk| {
                s.spawn(move || {
                    chunk.iter().map(|j| site_code(probes, tool, data, rt, j)).collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Point;
    use kerf_analysis::cfg::FuncId;
    use kerf_arch::ImageAddr;

    fn probe(module: usize, action: Action) -> Probe {
        let point = Point {
            spec: "f".into(),
            label: "f".into(),
            module,
            func: FuncId(0),
            addr: ImageAddr(0x1000),
            at_exit: false,
        };
        Probe { point, action }
    }

    /// Per heap: thread table, then that heap's timers, then its counters, one line each.
    #[test]
    fn data_layout_per_heap() {
        let probes = [
            probe(0, Action::Count),
            probe(1, Action::TimerStart(1)),
            probe(1, Action::TimerStop(1)),
            probe(1, Action::Count),
            probe(0, Action::TimerStart(0)),
            probe(0, Action::Count),
        ];
        let d = DataLayout::new(&probes, &ToolData::timers(3), 2, |m| m).unwrap();
        let t = THREAD_TABLE_LEN;
        assert_eq!(d.timers, vec![Some((0, t)), Some((1, t)), None]);
        assert_eq!(
            d.counters,
            vec![
                Some((0, t + TIMER_LEN)),
                None,
                None,
                Some((1, t + TIMER_LEN)),
                None,
                Some((0, t + TIMER_LEN + DATA_SLOT))
            ]
        );
        assert_eq!(d.end, vec![t + TIMER_LEN + 2 * DATA_SLOT, t + TIMER_LEN + DATA_SLOT]);
        // One heap for all (the kernel's).
        let one = DataLayout::new(&probes, &ToolData::timers(3), 1, |_| 0).unwrap();
        assert_eq!(one.end, vec![t + 2 * TIMER_LEN + 3 * DATA_SLOT]);
    }

    /// A tool's area goes after the counters, 64-aligned, once in each heap where one of its
    /// programs runs, and nowhere else.
    #[test]
    fn tool_areas_per_heap() {
        let probes = [
            probe(0, Action::Count),
            probe(2, Action::program(0)),
            probe(2, Action::program(1)),
            probe(0, Action::program(0)),
        ];
        let tool = ToolData { area: 1000, ..ToolData::default() };
        let d = DataLayout::new(&probes, &tool, 3, |m| m).unwrap();
        let t = THREAD_TABLE_LEN;
        assert_eq!(d.areas, vec![Some(t + DATA_SLOT), None, Some(t)]);
        assert_eq!(d.end, vec![t + DATA_SLOT + 1000, t, t + 1000]);
    }

    #[test]
    fn a_timer_in_two_heaps_is_refused() {
        let probes = [probe(0, Action::TimerStart(0)), probe(1, Action::TimerStop(0))];
        let e = DataLayout::new(&probes, &ToolData::timers(1), 2, |m| m).unwrap_err();
        assert!(matches!(e, InstrumentError::TimerSpansModules { timer: 0, .. }), "{e:?}");
        assert!(DataLayout::new(&probes, &ToolData::timers(1), 1, |_| 0).is_ok());
    }

    #[test]
    fn rooms_are_aligned() {
        for a in [
            Action::Count,
            Action::TimerStart(0),
            Action::TimerTailCall(0),
            Action::TimerTailReturn,
            Action::SignalGuard,
            Action::program(0),
        ] {
            let mut p = Program::new();
            let v = p.vreg("v");
            p.push(Op::Reg { dst: v, reg: kerf_arch::x86_64::Gpr::Rdi });
            let tool = ToolData { programs: vec![p], ..ToolData::default() };
            for lookup in [0, FIRST_LOOKUP_BYTES] {
                assert_eq!(patch_room(a, &tool, lookup) % 16, 0, "{a:?}");
            }
        }
    }

    /// A flag site's room holds its real patch (the store, the displaced instructions
    /// relocated, the jump back) for the instructions that grow most when moved, spliced by
    /// a trap (one byte written, the whole instruction displaced) and by a jump5.
    #[test]
    fn flag_room_holds_the_patch() {
        use iced_x86::{Code, Instruction, MemoryOperand, Register};
        const AT: u64 = 0x7f00_0000_1000;
        let patch = AT + 0x4000_0000;
        let probes = [probe(0, Action::Flag(0))];
        let store = Instruction::with2(
            Code::Mov_rm8_imm8,
            MemoryOperand::with_base_displ(Register::RIP, (patch + 0x2000) as i64),
            1u32,
        )
        .unwrap();
        let cases: [(&str, &[u8]); 6] = [
            ("call [rax+0x98]", &[0xff, 0x90, 0x98, 0, 0, 0]),
            ("call rel32", &[0xe8, 0x10, 0, 0, 0]),
            ("jrcxz", &[0xe3, 0x10]),
            ("loop", &[0xe2, 0x10]),
            ("jne rel8", &[0x75, 0x10]),
            ("mov rax, [rip+x]", &[0x48, 0x8b, 0x05, 0x10, 0, 0, 0]),
        ];
        for (what, first) in cases {
            // The instruction, then enough one-byte nops for a jump5 after it.
            let mut code = first.to_vec();
            code.extend([0x90; 8]);
            let ends = [AT + code.len() as u64];
            let view = kerf_patch::FunctionView {
                name: "f",
                extent: AT..AT + code.len() as u64,
                block_starts: &ends,
                has_unanalysable_jump: false,
            };
            let trap = kerf_patch::plan_trap(&code, AT, AT).unwrap();
            let jump5 = kerf_patch::plan_jump5(&code, AT, AT, &view);
            for d in std::iter::once(trap).chain(jump5.ok()) {
                let built = kerf_patch::build_patch(patch, &[store], &d).unwrap();
                let room = site_room(&probes, &[0], &ToolData::default(), 0, &d);
                assert!(
                    built.len() as u64 <= room,
                    "{what} ({} displaced): patch of {} bytes, room {room}",
                    d.insns.len(),
                    built.len()
                );
            }
        }
    }
}
