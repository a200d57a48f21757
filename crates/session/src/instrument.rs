//! A live process as a back-end of the one patch-set builder (KernInst §3.3–3.4, Djprobe;
//! DESIGN.md §3–5, §9): code heap and shared data heap near each module, one code patch per
//! spliced address holding every probe placed there, the splices written in batches while
//! every thread is stopped and out of the way, and removal that restores every byte and
//! verifies it. The sequence is `installer::PatchSet`'s; this module is what only a process
//! does, behind [`Backend`]'s hooks ([`Instrumentation`] is `PatchSet<ProcessBackend>`).
//!
//! Code heap of a module: the code patches, one after another by room, then (in the module of
//! the first trap site) the trap dispatcher and its table.
//!
//! Data heap of a module (shared with kerf, which samples it with no system call):
//! ```text
//! +0                     thread table (codegen::timer), used by timers and --tid
//! +THREAD_TABLE_LEN      timer blocks, TIMER_LEN bytes each
//! then                   counters, one 64-byte line each
//! then                   tail stacks (codegen::timer), if the module has tail-call probes
//! then                   the signal area, SIG_AREA bytes (see below)
//! then                   a hit count per trap site (`codegen::trap`), room for every probe
//! ```
//!
//! # Trap splices and signal masks
//!
//! A trap splice's `int3` raises a forced SIGTRAP, which kills the whole process when the
//! thread blocks SIGTRAP (DESIGN.md §5). So when a process gets its first trap splice, kerf
//! makes sure no thread can block SIGTRAP while one is live:
//! 1. the dispatcher is installed with `SA_NODEFER` and an empty mask (`codegen::trap`);
//! 2. every handler whose `sa_mask` holds SIGTRAP gets it without (injected `rt_sigaction`);
//! 3. in one stop: SIGTRAP is unblocked in every thread (`PTRACE_SETSIGMASK`; a thread
//!    inside `sigsuspend`/`ppoll`/... gets an injected `rt_sigprocmask(SIG_UNBLOCK)`, since its
//!    real mask is hidden until the call returns), and a signal-mask guard
//!    (`codegen::sigguard`) goes live on every `syscall` that may change a mask afterwards
//!    (its number is one of them, or unknown);
//! 4. only then do trap splices go live.
//!
//! Removal goes the other way: splices out (the guards last), then the masks and actions kerf
//! changed are put back where the program has not changed them since, then the program's own
//! SIGTRAP action (which the guards kept while it asked for another) goes back.
//!
//! Signal area of the module holding the dispatcher:
//! ```text
//! +0    the program's SIGTRAP action (kernel struct sigaction, 32 bytes), read by the
//!       dispatcher to chain and written by the guards when the program sets one
//! +32   a sigset holding SIGTRAP alone (for injected SIG_UNBLOCK)
//! +64   scratch for injected rt_sigaction (32 bytes)
//! ```

use crate::backend::{Backend, Batches, Begin, Heap, Patch, Pauses, Splice, Springboard};
pub use crate::forked::ForkStats;
use crate::forked::ForkedCopies;
pub use crate::installer::{tsc, tsc_and_instant, Cancel, PatchSet};
use crate::load::AnalyzedImage;
use crate::patchset::{self, DataLayout, Outcome, Runtime, GUARD_PATCH};
use crate::phases::Phases;
use crate::plan::{every_cpu, Planning, Rules, SitePlan, Sites};
use crate::probe::Where;
pub use crate::probe::{Action, InstrumentError, Probe, Reason, Refused, Removed, Site, ToolData};
use crate::spec::Point;
use kerf_arch::{ImageAddr, RemoteAddr};
use kerf_codegen::ir::OFFCPU_TID_LIMIT;
use kerf_codegen::timer;
use kerf_codegen::{sigguard, trap, Clock, Env, ThreadPointer};
use kerf_os::ptrace::{RegsExt, RemoteMem, SharedMem, TargetMemory, TraceSys, Tracee};
use kerf_os::TargetError;
use kerf_patch::{jump2_bytes, jump5_bytes, Layout, SpliceKind, INT3, SPRINGBOARD_LEN};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Signal handlers whose masks one stop fixes (two injected system calls each, about 0.1 ms
/// together on the development machine).
const HANDLERS_PER_STOP: usize = 4;
/// Room for the trap dispatcher's code.
const DISPATCHER_ROOM: u64 = 1024;
/// The signal area at the end of every data heap (see the module comment), and its parts.
const SIG_AREA: usize = 128;
const SIG_ACTION: usize = 0;
const SIG_TRAP_SET: usize = 32;
const SIG_SCRATCH: usize = 64;
/// SIGTRAP's bit in a signal mask.
const SIGTRAP_BIT: u64 = 1 << (trap::SIGTRAP - 1);
/// Stack bytes above each thread's `rsp` searched for return addresses into displaced bytes.
const STACK_SCAN: usize = 16 * 1024;
/// Tries before a point whose bytes some thread keeps sitting in is given up.
const MAX_TRIES: usize = 200;

/// How long the threads run between two of removal's checks for a thread still in kerf's
/// code: 2 ms at first, then longer, up to 20 ms. On a loaded machine a runnable thread can
/// wait longer than 2 ms for a CPU, and one stopped again at every check may never get to
/// leave the patch it sits in. That is the likely (not proven) cause of the one failure
/// "a thread stayed inside kerf's code through 200 checks" seen under load 8. All tries
/// together sleep at most about 2 s.
fn settle_time(attempt: usize) -> Duration {
    Duration::from_millis((2 + attempt.saturating_sub(20) / 10) as u64)
        .min(Duration::from_millis(20))
}
/// Splices removed per stop of the target (and code patches written per chunk): each removal
/// costs three /proc/PID/mem accesses, and a batch must keep the target's pause well under a
/// millisecond (DESIGN.md §4).
const BATCH: usize = 32;
/// Splices written per stop when they go in: each costs one /proc/PID/mem write (the batch's
/// stretch of text is read once before and once after, where the sites lie close together),
/// so twice as many fit in the same pause, and half as many stops are needed (a stop and
/// its release cost about 70-100 us here).
const SPLICE_BATCH: usize = 64;

/// The code heap is read-execute only: kerf writes it through /proc/PID/mem (as it writes
/// the program's own text), and no generated code stores to it (the trap dispatcher's table
/// is written by kerf and only read in the target; `rt_sigaction`'s scratch, which the kernel
/// writes, is in the data heap).
const PROT_RX: i32 = libc::PROT_READ | libc::PROT_EXEC;
const SIGTRAP: u64 = trap::SIGTRAP as u64;
/// `AT_HWCAP2` and its FSGSBASE bit: the kernel lets user code run `rdfsbase`.
const AT_HWCAP2: u64 = 26;
const HWCAP2_FSGSBASE: u64 = 2;

/// The heaps kerf mapped next to one module: its code heap (code patches from `code`, the
/// trap dispatcher and its table at `dispatcher`, after room for every patch) and data heap.
struct Heaps {
    code: u64,
    code_len: u64,
    dispatcher: u64,
    data: SharedMem,
    /// Offset of the signal area in `data`; the trap sites' hit counts follow it.
    sig_area: usize,
    /// Trap sites the hit counts have room for.
    trap_room: usize,
}

impl Heaps {
    /// Offset in `data` of the first trap site's hit count.
    fn hits(&self) -> usize {
        self.sig_area + SIG_AREA
    }
}

/// What kerf changed in a process's signal state for its trap splices (see the module
/// comment), to put back on removal.
#[derive(Debug, Default)]
struct SignalFixes {
    /// Threads whose mask blocked SIGTRAP: `(tid, mask before)`.
    masks: Vec<(i32, u64)>,
    /// Handlers whose `sa_mask` held SIGTRAP: `(signal, action before, action kerf set)`.
    actions: Vec<(u64, [u64; 4], [u64; 4])>,
}

/// Probes spliced into a live process.
pub type Instrumentation = PatchSet<ProcessBackend>;

/// A live process as a [`Backend`]: ptrace stops of the whole thread group (through a
/// replaceable [`TraceSys`], so that tests run it on `kerf_os::ptrace::fake`), code written
/// through /proc/PID/mem, data heaps shared with kerf; and what only a process needs around
/// its splices (thread context, signal-mask guards and the trap dispatcher, parked threads,
/// heaps next to each module: see the module comment).
pub struct ProcessBackend {
    pid: i32,
    sys: Arc<dyn TraceSys>,
    /// This kerf's claim on the process, held until removal is over (one kerf at a time).
    _claim: Option<kerf_os::ptrace::Claim>,
    /// /proc/PID/mem, opened in a stop, for code written while the target runs.
    mem: Option<RemoteMem>,
    /// The longest time every thread was held stopped, and the longest stop that wrote or
    /// removed a batch of splices.
    longest_pause: Duration,
    longest_splice_pause: Duration,
    /// Run probes only in this thread (`--tid`).
    only_thread: Option<i32>,
    /// No trap splices ([`Options::no_traps`]).
    no_traps: bool,
    /// Per module: the heaps kerf mapped next to it.
    heaps: Vec<Option<Heaps>>,
    /// The runtime's `lookup_room`, set by `begin` (patch rooms are sized by it).
    lookup_room: u64,
    /// The module whose heaps hold the trap dispatcher and the program's SIGTRAP action.
    sig_module: Option<usize>,
    /// Trap dispatcher: its module and address, once installed.
    trap: Option<(usize, u64)>,
    /// The dispatcher's table in order: trap site `i`'s hit count is the `i`th.
    trap_points: Vec<u64>,
    /// The signal state kerf changed.
    fixes: SignalFixes,
    /// Where a thread asleep in a system call inside a code patch has its PC, and where to
    /// move it on removal (see `patch_exits`).
    parked: std::collections::HashMap<u64, Parked>,
    /// Return addresses inside code patches: the PC after each `call` they make (process
    /// patches make none today; relocated calls return to the original code). A stack word
    /// in kerf's code that is neither one of these nor a signal frame's saved PC is data.
    returns: std::collections::HashSet<u64>,
    /// What the dispatcher's signal frames hold, to tell its dead frames on a stack from
    /// live references into kerf's code.
    dispatcher_frames: Option<DispatcherFrames>,
    /// The threads' off-CPU clock (a BPF program kerf holds), and where its table is mapped
    /// in the target and how long, where the tool has off-CPU timers.
    off_cpu: Option<(kerf_os::bpf::OffCpuClock, RemoteAddr, u64)>,
    /// The process's forked children (and theirs), which get the splices taken out of it
    /// taken out too (see `crate::forked`).
    forks: ForkedCopies,
}

impl ProcessBackend {
    /// Process `pid`, claimed for this kerf (another kerf there is refused).
    pub fn claim(pid: i32) -> Result<ProcessBackend, InstrumentError> {
        let claim = kerf_os::ptrace::claim(pid)?;
        let sys = Arc::new(kerf_os::ptrace::RealTraceSys::new());
        Ok(ProcessBackend { _claim: Some(claim), ..ProcessBackend::with_sys(pid, sys) })
    }

    /// Process `pid` as `sys` shows it (no claim: for tests on a fake).
    pub fn with_sys(pid: i32, sys: Arc<dyn TraceSys>) -> ProcessBackend {
        ProcessBackend {
            pid,
            sys,
            _claim: None,
            mem: None,
            longest_pause: Duration::ZERO,
            longest_splice_pause: Duration::ZERO,
            only_thread: None,
            no_traps: false,
            heaps: Vec::new(),
            lookup_room: 0,
            sig_module: None,
            trap: None,
            trap_points: Vec::new(),
            fixes: SignalFixes::default(),
            parked: Default::default(),
            returns: Default::default(),
            off_cpu: None,
            dispatcher_frames: None,
            forks: ForkedCopies::default(),
        }
    }

    /// The springboards put back in the process go back in its forked copies too, after
    /// everything else (the copies were found while the heaps were mapped).
    fn springboards_out_of_forks(&mut self, boards: &[Springboard<RemoteAddr>]) {
        let back = boards.iter().map(|(sb, pad, jmp)| (sb.0, &jmp[..], &pad[..]));
        self.forks.springboards_out(back);
        self.sync_forks();
    }

    /// Take what went out of the process out of its forked copies too (see `crate::forked`).
    fn sync_forks(&mut self) {
        let heap = self.heaps.iter().flatten().next().map(|h| h.data.remote().0);
        self.forks.sync(self.pid, heap, &self.sys, &kerf_os::process::RealSys);
    }

    /// Stop every thread of the process.
    fn stop(&self) -> Result<Tracee, TargetError> {
        Tracee::stop_all_with(self.pid, self.sys.clone(), kerf_os::ptrace::DEFAULT_STOP_TIMEOUT)
    }

    /// Let the threads go, noting how long they were held (`splicing`: the stop wrote or
    /// removed splices, DESIGN.md §4).
    fn resume(&mut self, tr: Tracee, splicing: bool) -> Result<(), TargetError> {
        let held = tr.resume_detach()?.held;
        self.longest_pause = self.longest_pause.max(held);
        if splicing {
            self.longest_splice_pause = self.longest_splice_pause.max(held);
        }
        Ok(())
    }

    /// Run `f` with every thread stopped, then let them go (also when `f` fails).
    fn stopped<T>(
        &mut self,
        f: impl FnOnce(&mut Self, &mut Tracee) -> Result<T, InstrumentError>,
    ) -> Result<T, InstrumentError> {
        let mut tr = self.stop()?;
        let r = f(self, &mut tr);
        self.resume(tr, false)?;
        r
    }

    /// /proc/PID/mem (opened in a stop of its own the first time, unless `begin` has opened it
    /// already).
    fn mem(&mut self) -> Result<&RemoteMem, InstrumentError> {
        if self.mem.is_none() {
            let mem = self.stopped(|_, tr| Ok(tr.memory()))?;
            self.mem = Some(mem);
        }
        Ok(self.mem.as_ref().expect("opened above"))
    }

    /// With every thread stopped (`tr`): write each splice of `batch` whose bytes no thread is
    /// in (Djprobe's freeze check: a PC, a restarting system call or a stacked return address
    /// inside bytes 1.. of the splice); the others are `Later`.
    /// Outcomes go to `done` as they happen (see [`Backend::splice`]).
    fn splice_stopped(
        tr: &Tracee,
        batch: &[Splice<RemoteAddr>],
        done: &mut Vec<Outcome>,
    ) -> Result<(), InstrumentError> {
        // Every PC and stack word, sorted once: a batch asks about each splice three times,
        // and 33 threads give about 70,000 words (a scan of them all per question held a
        // process 3-9 ms in every batch).
        let lo = batch.iter().map(|s| s.addr.0).min().unwrap_or(0);
        let hi = batch.iter().map(|s| s.addr.0 + s.new.len() as u64).max().unwrap_or(0);
        let busy = BusyValues::new(&busy_ranges(tr, None)?, lo, hi);
        let free =
            |s: &Splice<RemoteAddr>| !busy.any_within(s.addr.0 + 1, s.addr.0 + s.new.len() as u64);
        // As `write_verified` for each, with one read of the batch's stretch of text before
        // the writes and one after where the sites lie close together (every thread is
        // stopped, and the sites' bytes do not overlap). A splice counts as written from its
        // write on (a failed write may have written part of it): it must come out again.
        let ranges: Vec<(u64, usize)> =
            batch.iter().filter(|s| free(s)).map(|s| (s.addr.0, s.new.len())).collect();
        let before = Window::read(tr, ranges.iter().copied());
        // Where the window holds every site, the splices go in with one write of the whole
        // stretch: the bytes as read, each site's new bytes in place (every thread is stopped,
        // so the bytes between the sites are written back as they are). One write instead of
        // one per site: each write is a page walk in the target (2.8 M sites of libLLVM-14
        // took 44,000 stops of about 1.2 ms).
        let mut stretch = (!before.bytes.is_empty()).then(|| before.bytes.clone());
        let first = done.len();
        for s in batch {
            if !free(s) {
                done.push(Outcome::Later);
                continue;
            }
            let cur = before.bytes(tr, s.addr.0, s.old.len())?;
            if cur != s.old {
                if stretch.is_some() {
                    // Nothing of this batch is written yet.
                    done.truncate(first);
                }
                return Err(mismatch_before(s.addr.0, &s.old, &cur));
            }
            done.push(Outcome::Done);
            match stretch.as_mut() {
                Some(b) => {
                    let off = (s.addr.0 - before.start) as usize;
                    b[off..off + s.new.len()].copy_from_slice(&s.new);
                }
                None => tr.write(s.addr, &s.new)?,
            }
        }
        if let Some(b) = stretch {
            tr.write(RemoteAddr(before.start), &b)?;
        }
        let after = Window::read(tr, ranges.iter().copied());
        for s in batch.iter().filter(|s| free(s)) {
            let back = after.bytes(tr, s.addr.0, s.new.len())?;
            if back != s.new {
                return Err(mismatch_after(s.addr.0, &s.new, &back));
            }
        }
        Ok(())
    }
}

impl Backend for ProcessBackend {
    type Addr = RemoteAddr;
    type Data = SharedMem;

    /// Springboards go into padding no thread runs, each under a stop before any splice
    /// (they used to make the longest pause when written with the splices).
    const SPRINGBOARDS_WITH_SPLICES: bool = false;

    fn target(&self) -> Where {
        Where::Process(self.pid)
    }

    fn alloc_code(
        &mut self,
        near: RemoteAddr,
        preferred: RemoteAddr,
        len: u64,
    ) -> Result<RemoteAddr, InstrumentError> {
        self.stopped(|_, tr| Ok(tr.alloc_near_preferring(near, preferred, len, PROT_RX)?))
    }

    fn map_data(
        &mut self,
        near: RemoteAddr,
        len: u64,
        in_reach: u64,
    ) -> Result<SharedMem, InstrumentError> {
        self.stopped(|_, tr| Ok(tr.share_near(near, len, in_reach)?))
    }

    fn write_code(&mut self, at: RemoteAddr, code: &[u8]) -> Result<(), InstrumentError> {
        Ok(self.mem()?.write(at, code)?)
    }

    fn splice(
        &mut self,
        batch: &[Splice<RemoteAddr>],
        done: &mut Vec<Outcome>,
    ) -> Result<(), InstrumentError> {
        let tr = self.stop()?;
        let r = ProcessBackend::splice_stopped(&tr, batch, done);
        self.resume(tr, true)?;
        r
    }

    fn remove(&mut self, batch: &[Splice<RemoteAddr>]) -> Result<Vec<Outcome>, InstrumentError> {
        let tr = self.stop()?;
        let r = batch.iter().try_for_each(|s| write_verified(&tr, s.addr.0, &s.new, &s.old));
        self.resume(tr, true)?;
        r?;
        self.forks.taken_out(batch.iter().map(|s| (s.addr.0, &s.new[..], &s.old[..])));
        Ok(vec![Outcome::Done; batch.len()])
    }

    /// The forked copies follow, once per run of removals (see `crate::forked`).
    fn removals_done(&mut self) {
        self.sync_forks();
    }

    /// The process ended: what was still in goes out of the copies that outlive it.
    fn ended_with(
        &mut self,
        groups: &[Vec<Splice<RemoteAddr>>],
        boards: &[Springboard<RemoteAddr>],
    ) -> Vec<i32> {
        for g in groups.iter().filter(|g| !g.is_empty()) {
            self.forks.taken_out(g.iter().map(|s| (s.addr.0, &s.new[..], &s.old[..])));
        }
        // (Springboards after every splice, and the look for copies with them.)
        self.springboards_out_of_forks(boards);
        self.forks.known()
    }

    fn forks(&self) -> ForkStats {
        self.forks.stats
    }

    /// The dispatcher's counts (a thread of a copy the process forked shares the data heap:
    /// its hits count too).
    fn trap_hits(&self) -> Option<Vec<(u64, u64)>> {
        let Some(h) = self.trap.and_then(|(m, _)| self.heaps.get(m)?.as_ref()) else {
            return Some(Vec::new());
        };
        let at = |i: usize| h.hits() + i * trap::HIT_STRIDE as usize;
        Some(
            self.trap_points
                .iter()
                .enumerate()
                .map(|(i, &a)| (a, h.data.load_u64(at(i))))
                .collect(),
        )
    }

    fn rules(&self) -> Rules {
        Rules { no_trap: self.no_traps, ..Rules::PROCESS }
    }

    fn chunk(&self) -> usize {
        BATCH
    }

    fn batches(&self, _n: usize) -> Batches {
        Batches { size: SPLICE_BATCH, tries: MAX_TRIES, pause: Duration::from_millis(1) }
    }

    fn remove_batch(&self, _n: usize) -> usize {
        BATCH
    }

    /// The first stop: how generated code tells threads apart (and the thread probes are
    /// restricted to), the start-up code the program is past, and /proc/PID/mem opened for
    /// the code written while the target runs.
    fn begin(
        &mut self,
        modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        phases: &mut Phases,
    ) -> Result<Begin, InstrumentError> {
        // Each step that injects system calls has a stop of its own: a stop lasts as long as
        // the work done in it (an injected call is a register swap, a single-step and a wait,
        // about 80 us here, plus reading /proc/PID/maps), and DESIGN §6 allows 1 ms a stop.
        // Nothing refers to a heap until a splice does, so the target may run between them.
        let t = Instant::now();
        self.heaps = (0..modules.len()).map(|_| None).collect();
        let only = self.only_thread;
        let (thread, only_thread, startup) = self.stopped(|me, tr| {
            let (thread, only_thread) =
                thread_context(tr, me.pid, tool.needs_threads(probes), only)?;
            let startup = modules.first().and_then(|m| startup_ranges(tr, m)).unwrap_or_default();
            me.mem = Some(tr.memory());
            Ok((thread, only_thread, startup))
        })?;
        phases.lap("first stop (thread context, start-up code)", t);
        // The thread table tells a forked child's threads by their ids, with system calls in
        // a thread's first lookup; under seccomp it keys on thread pointers alone. A tool with
        // no thread table (counters only) needs neither look.
        let thread_id = if !tool.needs_threads(probes)
            || kerf_os::process::seccomp_restricted(&kerf_os::process::RealSys, self.pid)
        {
            None
        } else {
            glibc_tid_offset(modules)
        };
        let target = Where::Process(self.pid);
        let runtime = Runtime {
            target,
            env: Env::User,
            thread,
            thread_id,
            only_thread,
            only_id: None,
            cpu: Runtime::cpu_read(),
            flags_save: Runtime::flags_save(),
            kernel_reads: None,
            off_cpu: None,
        };
        let runtime = if tool.off_cpu.is_empty() {
            runtime
        } else {
            let t = Instant::now();
            let clock = self.off_cpu_clock(modules)?;
            phases.lap("off-CPU clock (BPF on sched_switch, table mapped)", t);
            Runtime { off_cpu: Some(clock), ..runtime }
        };
        self.lookup_room = runtime.lookup_room();
        Ok(Begin { runtime, startup })
    }

    /// A trap anywhere: every `syscall` that may change a signal mask gets a guard (module
    /// comment, step 3).
    fn extra_probes(
        &mut self,
        modules: &[AnalyzedImage],
        planned: &Sites,
        phases: &mut Phases,
    ) -> Result<Option<Vec<Probe>>, InstrumentError> {
        if !planned.sites.iter().any(|s| s.plan.kind == SpliceKind::Trap) {
            return Ok(None);
        }
        let t = Instant::now();
        let guards = guard_probes(modules)?;
        phases.lap("find the system calls to guard", t);
        Ok(Some(guards))
    }

    /// Code and data heaps next to every module that has probes, each mapped under a stop of
    /// its own (see `begin`).
    fn map_heaps(
        &mut self,
        modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        layout: &DataLayout,
        _sites: &[SitePlan],
    ) -> Result<Vec<Option<Heap<RemoteAddr>>>, InstrumentError> {
        let mut code = vec![0u64; modules.len()];
        let mut tails = vec![false; modules.len()];
        for p in probes {
            let m = p.point.module;
            code[m] += patchset::patch_room(p.action, tool, self.lookup_room);
            tails[m] |= p.action.is_tail();
            if p.action == Action::SignalGuard {
                code[m] += GUARD_PATCH;
            }
        }
        let mut out = Vec::with_capacity(modules.len());
        for m in 0..modules.len() {
            if code[m] == 0 {
                out.push(None);
                continue;
            }
            let first = modules[m].analysis.cfg.functions.first();
            let near = modules[m].remote(first.map_or(ImageAddr(0), |f| f.entry));
            // The dispatcher goes into one module's heap (the first trap site's, known only
            // after planning), after room for every patch, and its table lists the trap
            // sites of every module: room for all of them in each heap (pages never written
            // cost no memory).
            let code_len =
                (code[m] + DISPATCHER_ROOM + trap::data_len(probes.len())).next_multiple_of(4096);
            let tails_at = layout.end[m] as usize;
            let tails_len = if tails[m] { timer::TAIL_AREA_LEN as usize } else { 0 };
            let sig_area = tails_at + tails_len;
            // What the code reaches rip-relative ends with the signal area and the trap
            // sites' hit counts (room for every probe, as the table's: see above); the tool's
            // rings (64-bit immediates) come after, on pages of their own, as large as they
            // are.
            let hits_len = trap::hits_len(probes.len()) as usize;
            let near_len = ((sig_area + SIG_AREA + hits_len) as u64).next_multiple_of(4096);
            let rings_at = layout.areas[m].map(|_| near_len);
            let data_len = rings_at.map_or(near_len, |at| at + tool.rings);
            // Anywhere in reach of the module's code; preferably at a fresh spot a few pages to
            // a few MB past its end, so that a process instrumented again does not get its
            // heap where the last one was: stale words on its stacks that pointed into the old
            // heap would then look like live references to the new one.
            let end = modules[m].segments.iter().map(|s| s.vaddr + s.memsz).max();
            let end = modules[m].remote(end.unwrap_or(ImageAddr(0)));
            let preferred = end.align_up(4096) + 4096 * spread_pages();
            let code_at = self.alloc_code(near, preferred, code_len)?;
            let data = match self.map_data(code_at, data_len.next_multiple_of(4096), near_len) {
                Ok(d) => d,
                Err(e) => {
                    // Not recorded in self.heaps yet, so removal would not free it.
                    let _ = self.stopped(|_, tr| Ok(tr.free(code_at, code_len)?));
                    return Err(e);
                }
            };
            let heap = Heap {
                code: code_at,
                data: data.remote(),
                tails: tails[m].then(|| data.remote() + tails_at as u64),
                rings: rings_at.map(|at| data.remote() + at),
            };
            let dispatcher = code_at.0 + code[m];
            let code = code_at.0;
            // The copies' mark, while the process surely maps it (see `crate::forked`).
            self.forks.mark(self.pid, data.remote().0, &kerf_os::process::RealSys);
            let trap_room = probes.len();
            self.heaps[m] = Some(Heaps { code, code_len, dispatcher, data, sig_area, trap_room });
            out.push(Some(heap));
        }
        Ok(out)
    }

    /// The dispatcher goes into the heaps of the first trap site's module, whose signal area
    /// keeps the program's SIGTRAP action.
    fn guard_action(&mut self, trap_module: Option<usize>) -> Option<u64> {
        self.sig_module = trap_module;
        let h = self.heaps.get(trap_module?)?.as_ref()?;
        Some(h.data.remote().0 + (h.sig_area + SIG_ACTION) as u64)
    }

    /// One read of the stretch holding every range where they lie close together (see
    /// `Window`), through /proc/PID/mem while the target runs.
    fn read(&mut self, ranges: &[(RemoteAddr, usize)]) -> Result<Vec<Vec<u8>>, InstrumentError> {
        let m: &dyn TargetMemory = self.mem()?;
        let window = Window::read(m, ranges.iter().map(|&(a, n)| (a.0, n)));
        Ok(ranges.iter().map(|&(a, n)| window.bytes(m, a.0, n)).collect::<Result<_, _>>()?)
    }

    /// Adjacent patches merged into one write (see `PatchWrites`); where a thread may come
    /// to sleep in each is noted for removal (see `Parked`).
    fn write_chunk(&mut self, patches: &[Patch<'_, RemoteAddr>]) -> Result<(), InstrumentError> {
        for p in patches {
            let exits = patch_exits(p.at.0, &p.code.bytes, p.displaced, p.code.layout);
            self.parked.extend(exits.parked);
            self.returns.extend(exits.returns);
        }
        let m: &dyn TargetMemory = self.mem()?;
        let mut writes = PatchWrites::default();
        for p in patches {
            writes.add(m, p.at.0, &p.code.bytes)?;
        }
        Ok(writes.flush(m)?)
    }

    /// The whole displaced length is written (the jump, then int3s); a jump out of reach is
    /// an error (the heaps were placed in reach).
    fn make_splice(
        &self,
        sp: &SitePlan,
        label: &str,
        patch: RemoteAddr,
        displaced: &[u8],
        pad: Option<&[u8]>,
    ) -> Result<Splice<RemoteAddr>, InstrumentError> {
        let d = &sp.plan.displaced;
        let addr = d.point;
        let out_of_reach = |what| InstrumentError::OutOfReach {
            target: Where::Process(self.pid),
            label: label.to_string(),
            addr,
            what,
        };
        let mut springboard = None;
        let new = match (sp.plan.kind, sp.plan.springboard) {
            (SpliceKind::Jump5, _) => {
                jump5_bytes(addr, patch.0, d.len).ok_or_else(|| out_of_reach("the patch"))?
            }
            (SpliceKind::Jump2, Some((sb, _))) => {
                // The springboard goes into space no path executes any more, before
                // anything can reach it.
                let jmp = jump5_bytes(sb, patch.0, SPRINGBOARD_LEN as usize)
                    .ok_or_else(|| out_of_reach("the patch (from the springboard)"))?;
                let pad = pad.unwrap_or_default();
                springboard = Some((RemoteAddr(sb), pad[..jmp.len().min(pad.len())].to_vec(), jmp));
                jump2_bytes(addr, sb, d.len).ok_or_else(|| out_of_reach("the springboard"))?
            }
            _ => vec![INT3],
        };
        // The bytes the splice replaces, as read for the foreign-bytes check.
        let old = match displaced.get(..new.len()) {
            Some(b) => b.to_vec(),
            None => {
                let mut b = vec![0u8; new.len()];
                let mem = self.mem.as_ref().expect("opened in `begin`");
                mem.read(RemoteAddr(addr), &mut b)?;
                b
            }
        };
        Ok(Splice { addr: RemoteAddr(addr), old, new, patch, springboard })
    }

    /// Under a stop, each verified: the springboards go into the modules' own text.
    fn write_springboards(
        &mut self,
        boards: &[Springboard<RemoteAddr>],
    ) -> Result<(), InstrumentError> {
        self.stopped(|_, tr| {
            boards.iter().try_for_each(|(sb, pad, jmp)| write_verified(tr, sb.0, pad, jmp))
        })
    }

    /// Module comment, steps 1-3: the trap dispatcher goes in (with any trap or guard: a
    /// guard keeps the program's SIGTRAP action where the dispatcher's removal finds it),
    /// handlers' masks lose SIGTRAP, then in one stop SIGTRAP is unblocked in every thread
    /// and the guards go live.
    fn before_traps(
        &mut self,
        sites: &[Site],
        first: &[Splice<RemoteAddr>],
        phases: &mut Phases,
        settled: &mut dyn FnMut(usize, Outcome),
    ) -> Result<(), InstrumentError> {
        let t = Instant::now();
        if sites.iter().any(|p| p.kind == SpliceKind::Trap) || !first.is_empty() {
            self.stopped(|me, tr| me.install_dispatcher(tr, sites))?;
        }
        let t = phases.lap("trap dispatcher", t);
        if !first.is_empty() {
            // A stop for a few handlers at a time: each takes two injected system calls, and
            // a Go program has a handler for nearly every signal (sixty-odd in one stop held
            // it 3-4 ms, against DESIGN §4's 1 ms). Each handler's read and write are in one
            // stop, so none changes between them.
            let caught = self.stopped(|_, tr| Ok(tr.caught_signals()?))?;
            for some in caught.chunks(HANDLERS_PER_STOP) {
                self.stopped(|me, tr| me.clear_handler_masks(tr, some))?;
            }
            self.guards_live(sites, first, settled)?;
        }
        phases.lap("signal-mask guards live", t);
        Ok(())
    }

    fn gone(&self, e: &InstrumentError) -> bool {
        matches!(e, InstrumentError::Target(TargetError::NoSuchProcess { .. }))
    }

    /// Let pending traps drain, move threads parked in a patch's system call back to the
    /// original code, wait until no thread runs in (or may return into) kerf's code, then
    /// put back the signal state kerf changed, the program's SIGTRAP action and the
    /// springboards, and unmap the heaps. A target that has exited needs nothing.
    fn after_remove(
        &mut self,
        springboards: Vec<Springboard<RemoteAddr>>,
    ) -> Result<Removed, InstrumentError> {
        let gone = |e: &TargetError| matches!(e, TargetError::NoSuchProcess { .. });
        // Threads that hit an int3 just before it went have a SIGTRAP on its way to the
        // dispatcher, which still routes it to the patch; give them time to take it.
        if self.trap.is_some() {
            std::thread::sleep(Duration::from_millis(20));
        }
        let boards: Vec<(u64, u64)> =
            springboards.iter().map(|(sb, pad, _)| (sb.0, sb.0 + pad.len() as u64)).collect();
        let mut last_blocker = String::new();
        for attempt in 1..=MAX_TRIES {
            let mut tr = match self.stop() {
                Ok(t) => t,
                Err(e) if gone(&e) => return Ok(Removed::default()),
                Err(e) => return Err(e.into()),
            };
            // Threads asleep in a system call inside a patch would keep it busy for as long as
            // they sleep: they go back to the original code (see `Parked`).
            self.move_parked_threads(&mut tr)?;
            // A PC in kerf's code, or a value on a stack that a thread may go on at there
            // (the saved PC of a signal frame when a handler interrupted a thread inside a
            // patch: `Busy::may_resume`). The dispatcher's own dead frames are left out (see
            // `DispatcherFrames`).
            let mut busy = busy_ranges(&tr, self.dispatcher_frames.as_ref())?;
            let restorer = self.dispatcher_frames.as_ref().map(|d| d.restorer);
            busy.retain(|b| b.may_resume(&self.returns, restorer));
            let code: Vec<(u64, u64)> =
                self.heaps.iter().flatten().map(|h| (h.code, h.code + h.code_len)).collect();
            let in_code = |b: &&Busy| code.iter().any(|&(lo, hi)| b.within(lo, hi));
            let in_springboard = |b: &&Busy| boards.iter().any(|&(lo, hi)| b.within(lo, hi));
            let blocker = busy.iter().find(|b| in_code(b) || in_springboard(b));
            // A thread that hit an int3 before it was removed but has not taken the SIGTRAP
            // yet (descheduled, on a loaded machine) needs the dispatcher still in place.
            let trap_in_flight = self.trap.is_some()
                && tr.threads().iter().any(|t| tr.signal_pending(*t, SIGTRAP as i32));
            if blocker.is_none() && !trap_in_flight {
                self.restore_signal_state(&mut tr)?;
                let left = self.uninstall_dispatcher(&mut tr)?;
                // Springboards last: no splice leads to them any more and no thread is in one.
                restore_springboards(&tr, &springboards)?;
                let mut removed = self.free_heaps(&mut tr);
                self.resume(tr, false)?;
                self.springboards_out_of_forks(&springboards);
                if let Some((why, kept)) = left {
                    removed.kept.extend(kept);
                    removed.why = Some(why);
                }
                return Ok(removed);
            }
            last_blocker = match blocker {
                Some(b) => b.to_string(),
                None => "a SIGTRAP from a removed trap splice is still pending".into(),
            };
            // Out of tries, and what is left is only values on stacks that point into a code
            // heap: a dead frame's leftovers look the same as a live signal frame, and a heap
            // freed under a live one would crash the thread when its handler returns. Leave
            // the heaps mapped (harmless: nothing jumps to them any more) and say so.
            let only_stack_values = !trap_in_flight
                && busy
                    .iter()
                    .filter(|b| in_code(b) || in_springboard(b))
                    .all(|b| b.stack_offset.is_some() && !in_springboard(&b));
            if attempt == MAX_TRIES && only_stack_values {
                self.restore_signal_state(&mut tr)?;
                let left = self.uninstall_dispatcher(&mut tr)?;
                restore_springboards(&tr, &springboards)?;
                let mut kept: Vec<(u64, u64)> = self
                    .heaps
                    .iter_mut()
                    .filter_map(Option::take)
                    .flat_map(|h| [(h.code, h.code_len), (h.data.remote().0, h.data.len() as u64)])
                    .collect();
                kept.extend(left.into_iter().flat_map(|l| l.1));
                self.resume(tr, false)?;
                self.springboards_out_of_forks(&springboards);
                let why = format!("a stack may still return into them: {last_blocker}");
                return Ok(Removed { kept, why: Some(why), ..Removed::default() });
            }
            self.resume(tr, false)?;
            std::thread::sleep(settle_time(attempt));
        }
        Err(InstrumentError::StillInside { pid: self.pid, tries: MAX_TRIES, last: last_blocker })
    }

    fn load_u64(&self, heap: usize, off: u64) -> u64 {
        match self.heaps.get(heap).and_then(Option::as_ref) {
            Some(h) => h.data.load_u64(off as usize),
            None => 0,
        }
    }

    fn data_words(&self, heap: usize) -> Option<&[std::sync::atomic::AtomicU64]> {
        Some(self.heaps.get(heap)?.as_ref()?.data.words())
    }

    fn store_u64(&self, heap: usize, off: u64, v: u64) {
        if let Some(h) = self.heaps.get(heap).and_then(Option::as_ref) {
            h.data.store_u64(off as usize, v);
        }
    }

    fn pauses(&self) -> Pauses {
        Pauses {
            longest: self.longest_pause,
            longest_splice: self.longest_splice_pause,
            int3: None,
        }
    }

    /// (An `exec` in the target, which replaces its memory, takes them away.)
    fn off_cpu_now(&self, tid: i32) -> Option<u64> {
        self.off_cpu.as_ref()?.0.now(tid)
    }

    fn off_cpu_missed(&self) -> Option<u64> {
        self.off_cpu.as_ref()?.0.missed_switches()
    }

    fn off_cpu_unreported(&self) -> Option<u64> {
        self.off_cpu.as_ref()?.0.unreported_switches()
    }

    fn code_heaps(&self) -> Vec<RemoteAddr> {
        self.heaps.iter().flatten().map(|h| RemoteAddr(h.code)).collect()
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Use this kind for every point (for testing); a point that cannot take it fails.
    pub force_kind: Option<SpliceKind>,
    /// Run probes only in this thread (`--tid`).
    pub only_thread: Option<i32>,
    /// Threads planning runs on (`None`: every CPU).
    pub plan_threads: Option<usize>,
    /// No trap splices: a point only an `int3` could take is left out, with why (`--no-traps`:
    /// a trap in hot code costs a signal per hit).
    pub no_traps: bool,
}

impl PatchSet<ProcessBackend> {
    /// Splice `probes` into process `pid`, whose modules are `modules`, with `tool`'s timer
    /// blocks, programs and area (see [`ToolData`]).
    pub fn install(
        pid: i32,
        modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        opts: Options,
    ) -> Result<Instrumentation, InstrumentError> {
        // Before anything changes in the target: another kerf there is refused.
        let be = ProcessBackend::claim(pid)?;
        Instrumentation::install_with(be, modules, probes, tool, opts, None)
    }

    /// [`Instrumentation::install`] through back-end `be` (claimed with
    /// [`ProcessBackend::claim`], or a fake one in tests), stopping once `cancel` becomes true
    /// (see [`Cancel`]).
    pub fn install_with(
        mut be: ProcessBackend,
        modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        opts: Options,
        cancel: Cancel<'_>,
    ) -> Result<Instrumentation, InstrumentError> {
        be.only_thread = opts.only_thread;
        be.no_traps = opts.no_traps;
        let planning = Planning {
            force_kind: opts.force_kind,
            threads: opts.plan_threads.unwrap_or_else(every_cpu),
        };
        PatchSet::build(be, modules, probes, tool, planning, cancel)
    }
}

/// How generated code tells threads apart in process `pid`, and the thread pointer of the
/// thread probes are restricted to (`only`). `rdfsbase` when the kernel allows it; else the
/// TCB's self pointer, which needs every thread to have TLS.
fn thread_context(
    tr: &Tracee,
    pid: i32,
    threads: bool,
    only: Option<i32>,
) -> Result<(ThreadPointer, Option<u64>), InstrumentError> {
    if !threads && only.is_none() {
        return Ok((ThreadPointer::FsBase, None));
    }
    let fsgsbase = tr.auxv(AT_HWCAP2)?.unwrap_or(0) & HWCAP2_FSGSBASE != 0;
    if !fsgsbase {
        for &t in tr.threads() {
            if tr.regs(t)?.fs_base == 0 {
                return Err(InstrumentError::NoThreadPointer { pid, tid: t });
            }
        }
    }
    let only = match only {
        None => None,
        Some(t) if tr.threads().contains(&t) => Some(tr.regs(t)?.fs_base),
        Some(t) => return Err(InstrumentError::NoSuchThread { pid, tid: t }),
    };
    let kind = if fsgsbase { ThreadPointer::FsBase } else { ThreadPointer::FsSelf };
    Ok((kind, only))
}

/// The offset of the thread id in glibc's `struct pthread` (from the thread pointer), from
/// the descriptor glibc exports for libthread_db (`_thread_db_pthread_tid`: bits, count,
/// offset), if a module of `images` is glibc's libc.
pub fn glibc_tid_offset(images: &[AnalyzedImage]) -> Option<u32> {
    for img in images {
        let name = crate::spec::module_name(&img.path.to_string_lossy()).to_string();
        if !name.starts_with("libc.so") && !name.starts_with("libc-") {
            continue;
        }
        let elf = kerf_analysis::image::Image::from_elf(&name, &img.bytes).ok()?;
        let sym = elf.symbols_named("_thread_db_pthread_tid").next()?;
        let seg = elf
            .segments
            .iter()
            .find(|s| sym.addr.0 >= s.vaddr.0 && sym.addr.0 + 12 <= s.vaddr.0 + s.filesz)?;
        let off = (seg.file_offset + sym.addr.0 - seg.vaddr.0) as usize;
        let word = |k: usize| {
            let b = img.bytes.get(off + 4 * k..off + 4 * k + 4)?;
            Some(u32::from_le_bytes(b.try_into().ok()?))
        };
        // 32 bits, one of them.
        if word(0)? == 32 && word(1)? == 1 {
            return word(2);
        }
    }
    None
}

/// Put the padding back where springboards were written (their splices must be gone).
fn restore_springboards(
    tr: &Tracee,
    boards: &[Springboard<RemoteAddr>],
) -> Result<(), InstrumentError> {
    boards.iter().try_for_each(|(sb, pad, jmp)| write_verified(tr, sb.0, jmp, pad))
}

impl ProcessBackend {
    /// The SIGTRAP dispatcher and its table, then the handler; the program's own action goes
    /// to the signal area, where the dispatcher chains to it and the guards keep it.
    fn install_dispatcher(
        &mut self,
        tr: &mut Tracee,
        sites: &[Site],
    ) -> Result<(), InstrumentError> {
        let m = self.sig_module.expect("a trap site names the dispatcher's module");
        let h = self.heaps[m].as_mut().expect("heap of a module with traps");
        let code_at = h.dispatcher;
        let table_at = code_at + DISPATCHER_ROOM;
        let area = h.data.remote().0 + h.sig_area as u64;
        // Table: sorted (point, patch) pairs of every trap site.
        let mut entries: Vec<(u64, u64)> = sites
            .iter()
            .filter(|s| s.kind == SpliceKind::Trap)
            .map(|s| (s.addr, s.patch))
            .collect();
        entries.sort_unstable();
        if entries.len() > h.trap_room {
            let detail = format!("{} trap sites, room for {}", entries.len(), h.trap_room);
            return Err(InstrumentError::Mismatch { addr: code_at, detail });
        }
        let hits_at = h.data.remote().0 + h.hits() as u64;
        let (code, restorer) =
            trap::dispatcher(code_at, table_at, hits_at, area + SIG_ACTION as u64)
                .map_err(|e| InstrumentError::Mismatch { addr: code_at, detail: e.to_string() })?;
        tr.write(RemoteAddr(code_at), &code)?;
        let mut resumes: Vec<u64> = entries.iter().map(|e| e.1).collect();
        resumes.sort_unstable();
        self.dispatcher_frames =
            Some(DispatcherFrames { restorer: code_at + restorer as u64, resumes });
        let mut table = Vec::with_capacity(trap::data_len(entries.len()) as usize);
        table.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        for (a, b) in &entries {
            table.extend_from_slice(&a.to_le_bytes());
            table.extend_from_slice(&b.to_le_bytes());
        }
        tr.write(RemoteAddr(table_at), &table)?;
        h.data.write_bytes(h.sig_area + SIG_TRAP_SET, &SIGTRAP_BIT.to_le_bytes());
        // The new action from the scratch slot, the old one straight into its place.
        let act = trap::sigaction(code_at, restorer);
        h.data.write_bytes(h.sig_area + SIG_SCRATCH, &words_bytes(&act));
        let (new_at, old_at) = (area + SIG_SCRATCH as u64, area + SIG_ACTION as u64);
        let r = tr.syscall(libc::SYS_rt_sigaction, [SIGTRAP, new_at, old_at, 8, 0, 0])?;
        if r != 0 {
            let pid = self.pid;
            return Err(InstrumentError::Injected {
                pid,
                call: "rt_sigaction",
                arg: SIGTRAP,
                result: r,
            });
        }
        self.trap = Some((m, code_at));
        self.trap_points = entries.iter().map(|e| e.0).collect();
        Ok(())
    }

    /// The signal area of the dispatcher's module: its address in the target, and kerf's view.
    fn sig_area(&self) -> Option<(u64, &SharedMem, usize)> {
        let (m, _) = self.trap?;
        let h = self.heaps[m].as_ref()?;
        Some((h.data.remote().0 + h.sig_area as u64, &h.data, h.sig_area))
    }

    /// `rt_sigaction(sig, new, &old)` injected, through the signal area's scratch slot.
    fn sigaction_in(
        &self,
        tr: &mut Tracee,
        tid: Option<i32>,
        sig: u64,
        new: Option<[u64; 4]>,
    ) -> Result<[u64; 4], InstrumentError> {
        let (area, data, off) = self.sig_area().expect("the dispatcher is installed");
        let scratch = area + SIG_SCRATCH as u64;
        if let Some(a) = new {
            data.write_bytes(off + SIG_SCRATCH, &words_bytes(&a));
        }
        let old_at = if new.is_some() { 0 } else { scratch };
        let args = [sig, if new.is_some() { scratch } else { 0 }, old_at, 8, 0, 0];
        let r = match tid {
            Some(t) => tr.syscall_on(t, libc::SYS_rt_sigaction, args)?,
            None => tr.syscall(libc::SYS_rt_sigaction, args)?,
        };
        if r != 0 {
            let pid = self.pid;
            return Err(InstrumentError::Injected {
                pid,
                call: "rt_sigaction",
                arg: sig,
                result: r,
            });
        }
        let mut b = [0u8; 32];
        data.read_bytes(off + SIG_SCRATCH, &mut b);
        Ok(bytes_words(&b))
    }

    /// Step 2 of the module comment, for the handlers of `sigs`: take SIGTRAP out of every
    /// handler's `sa_mask` (a handler runs with its mask blocked, and might hit a trap).
    fn clear_handler_masks(
        &mut self,
        tr: &mut Tracee,
        sigs: &[u64],
    ) -> Result<(), InstrumentError> {
        for &sig in sigs {
            if sig == SIGTRAP {
                continue;
            }
            let act = self.sigaction_in(tr, None, sig, None)?;
            if act[3] & SIGTRAP_BIT != 0 {
                let mut set = act;
                set[3] &= !SIGTRAP_BIT;
                self.sigaction_in(tr, None, sig, Some(set))?;
                self.fixes.actions.push((sig, act, set));
            }
        }
        Ok(())
    }

    /// Step 3 of the module comment, in one stop (repeated while a guard's bytes are in some
    /// thread's way): SIGTRAP unblocked in every thread, the dispatcher checked to be still
    /// the SIGTRAP action, and every guard written. Each guard's outcome goes to `settled`
    /// (its index in `guards`) as soon as its stop is over.
    fn guards_live(
        &mut self,
        sites: &[Site],
        guards: &[Splice<RemoteAddr>],
        settled: &mut dyn FnMut(usize, Outcome),
    ) -> Result<(), InstrumentError> {
        let mut todo: Vec<usize> = (0..guards.len()).collect();
        for _ in 0..MAX_TRIES {
            let mut tr = self.stop()?;
            let mut done = Vec::new();
            let r = self.unblock_sigtrap(&mut tr).and_then(|()| {
                let batch: Vec<Splice<RemoteAddr>> =
                    todo.iter().map(|&k| guards[k].clone()).collect();
                ProcessBackend::splice_stopped(&tr, &batch, &mut done)
            });
            let resumed = self.resume(tr, true);
            // Whatever went in counts as live before any error is returned: it must come out.
            let mut later = Vec::new();
            for (&k, o) in todo.iter().zip(done) {
                match o {
                    Outcome::Done => settled(k, o),
                    _ => later.push(k),
                }
            }
            r?;
            resumed?;
            // (Those the batch never reached, after an error, are not in `done`.)
            todo = later;
            if todo.is_empty() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        let p = &guards[todo[0]];
        let addr = p.addr.0;
        let label =
            sites.iter().find(|s| s.addr == addr).map_or_else(String::new, |s| s.label.clone());
        let target = self.target();
        Err(InstrumentError::StillBusy { target, label, addr, tries: MAX_TRIES })
    }

    /// SIGTRAP out of every thread's mask, and the dispatcher back if the program replaced it
    /// before the guards were in (its action then goes to the signal area, as a guard would
    /// have put it).
    fn unblock_sigtrap(&mut self, tr: &mut Tracee) -> Result<(), InstrumentError> {
        let (area, _, _) = self.sig_area().expect("the dispatcher is installed");
        for &t in tr.threads().to_vec().iter() {
            if tr.in_masking_call(t)? {
                // Its real mask is hidden until the call returns; an injected call in this
                // thread runs after the kernel has put it back (see target::ptrace).
                let set = area + SIG_TRAP_SET as u64;
                tr.syscall_on(
                    t,
                    libc::SYS_rt_sigprocmask,
                    [libc::SIG_UNBLOCK as u64, set, 0, 8, 0, 0],
                )?;
                continue;
            }
            let m = tr.sigmask(t)?;
            if m & SIGTRAP_BIT != 0 {
                tr.set_sigmask(t, m & !SIGTRAP_BIT)?;
                if !self.fixes.masks.iter().any(|f| f.0 == t) {
                    self.fixes.masks.push((t, m));
                }
            }
        }
        let (_, dispatcher) = self.trap.expect("installed");
        let now = self.sigaction_in(tr, None, SIGTRAP, None)?;
        if now[0] != dispatcher {
            let (_, data, off) = self.sig_area().expect("installed");
            data.write_bytes(off + SIG_ACTION, &words_bytes(&now));
            let restorer = self.dispatcher_frames.as_ref().map_or(0, |d| d.restorer - dispatcher);
            let ours = trap::sigaction(dispatcher, restorer as usize);
            self.sigaction_in(tr, None, SIGTRAP, Some(ours))?;
        }
        Ok(())
    }

    /// Put back the masks and handler masks kerf changed, where the program has not changed
    /// them since (all splices must be out).
    fn restore_signal_state(&mut self, tr: &mut Tracee) -> Result<(), InstrumentError> {
        let fixes = std::mem::take(&mut self.fixes);
        for (t, before) in fixes.masks {
            if tr.threads().contains(&t)
                && !tr.in_masking_call(t)?
                && tr.sigmask(t)? == before & !SIGTRAP_BIT
            {
                tr.set_sigmask(t, before)?;
            }
        }
        for (sig, before, set) in fixes.actions {
            if self.sigaction_in(tr, None, sig, None)? == set {
                self.sigaction_in(tr, None, sig, Some(before))?;
            }
        }
        Ok(())
    }

    /// Move every thread whose PC is right after a `syscall` in a code patch (asleep in it,
    /// or just back from it) to the same point of the original code, whose bytes are back:
    /// the state there is the same, the guard's registers restored from its frame. A call the
    /// kernel restarts then restarts at the original `syscall`. (Every splice is out.)
    fn move_parked_threads(&self, tr: &mut Tracee) -> Result<(), InstrumentError> {
        if self.parked.is_empty() {
            return Ok(());
        }
        for t in tr.threads().to_vec() {
            let mut r = tr.regs(t)?;
            let Some(p) = self.parked.get(&r.rip) else { continue };
            if p.guard_frame {
                let mut saved = [0u8; 56];
                tr.read(r.sp() + sigguard::SAVED_AT, &mut saved)?;
                let word = |k: usize| {
                    u64::from_le_bytes(saved[k * 8..k * 8 + 8].try_into().unwrap_or_default())
                };
                r.r9 = word(0);
                r.r8 = word(1);
                r.r10 = word(2);
                r.rdx = word(3);
                r.rsi = word(4);
                r.rdi = word(5);
                r.eflags = word(6);
                r.rsp += sigguard::FRAME_BELOW;
            }
            r.rip = p.resume;
            tr.set_regs(t, &r)?;
        }
        Ok(())
    }

    /// Give SIGTRAP the program's action: the one it had before the dispatcher, or the last
    /// it asked for since (the guards kept it in the signal area); if the action is still
    /// kerf's. If something else has set another since, that one stays, and so do the heaps
    /// holding the dispatcher and the action it chains to: the new handler may chain to the
    /// dispatcher, having saved it as the old action. Returns those heaps and why they stay
    /// (`None`: all put back).
    fn uninstall_dispatcher(
        &mut self,
        tr: &mut Tracee,
    ) -> Result<Option<LeftMapped>, InstrumentError> {
        let Some((m, dispatcher)) = self.trap else { return Ok(None) };
        let (_, data, off) = self.sig_area().expect("the dispatcher's heap outlives it");
        let mut b = [0u8; 32];
        data.read_bytes(off + SIG_ACTION, &mut b);
        let program = bytes_words(&b);
        let now = self.sigaction_in(tr, None, SIGTRAP, None)?;
        if now[0] != dispatcher {
            self.trap = None;
            let h = self.heaps[m].take().expect("checked above");
            let why = format!(
                "the SIGTRAP action is no longer kerf's (handler {:#x}), so it was left as it \
                 is, and kerf's dispatcher with it",
                now[0]
            );
            return Ok(Some((
                why,
                vec![(h.code, h.code_len), (h.data.remote().0, h.data.len() as u64)],
            )));
        }
        self.sigaction_in(tr, None, SIGTRAP, Some(program))?;
        self.trap = None;
        Ok(None)
    }

    /// Every heap unmapped in the target; one that could not be (the injected `munmap`
    /// failed) is returned with why, so that removal says what stayed instead of claiming
    /// the process is as it was.
    /// The off-CPU clock of virtual time: kerf's BPF program counts the process's threads'
    /// time off the CPU into a table (see `kerf_os::bpf`), which the target maps read-only
    /// (under a stop of its own); generated code finds a thread's word by glibc's thread id,
    /// which it reads with a load (no system call: seccomp does not matter).
    fn off_cpu_clock(&mut self, modules: &[AnalyzedImage]) -> Result<Clock, InstrumentError> {
        let target = Where::Process(self.pid);
        let refuse = |why: String| InstrumentError::NoOffCpuClock { target, why };
        let tid = glibc_tid_offset(modules).ok_or_else(|| {
            refuse("its threads' ids are not where glibc keeps them (no glibc?)".into())
        })?;
        let clock =
            kerf_os::bpf::OffCpuClock::start(self.pid).map_err(|e| refuse(e.to_string()))?;
        let len = clock.table_len();
        let fd = clock.table_fd();
        let table = self.stopped(|_, tr| Ok(tr.map_kerf_fd(fd, len)?)).map_err(|e| match e {
            InstrumentError::Target(e) => refuse(format!("mapping the table in the target: {e}")),
            e => e,
        })?;
        self.off_cpu = Some((clock, table, len));
        let c = Clock::OffCpu { table: table.0, tid };
        if table.0 % OFFCPU_TID_LIMIT as u64 != 0 || tid >= OFFCPU_TID_LIMIT {
            return Err(refuse(format!("table at {:#x}, thread id at byte {tid}", table.0)));
        }
        Ok(c)
    }

    fn free_heaps(&mut self, tr: &mut Tracee) -> Removed {
        let mut left = Removed::default();
        if let Some((_, at, len)) = self.off_cpu.take() {
            if let Err(e) = tr.free(at, len) {
                left.kept.push((at.0, len));
                left.why = Some(format!("unmapping the off-CPU table at {:#x}: {e}", at.0));
            }
        }
        for h in self.heaps.iter_mut().filter_map(Option::take) {
            for (at, len) in [(h.code, h.code_len), (h.data.remote().0, h.data.len() as u64)] {
                if let Err(e) = tr.free(RemoteAddr(at), len) {
                    left.kept.push((at, len));
                    left.why = Some(format!("unmapping {len} bytes at {at:#x}: {e}"));
                }
            }
        }
        left
    }
}

/// Run-once start-up code of the main executable `m` that no thread can run again, usable
/// for springboards: `_start` up to the end of its call into `__libc_start_main`. That call
/// never returns (the program ends in `exit`), and the bytes from its return address on are
/// left alone. The program is past `_start` once that return address is on the main thread's
/// stack; until then (a command kerf has just launched) the space is not used.
fn startup_ranges(tr: &Tracee, m: &AnalyzedImage) -> Option<Vec<(u64, u64)>> {
    m.bias?; // a module of the process only
    let cfg = &m.analysis.cfg;
    let f = cfg.functions.iter().find(|f| f.name == "_start")?;
    let (base, bytes) = m.code_region(f.entry)?;
    let mut sc = kerf_arch::x86_64::Scanner::new(bytes, base);
    let mut a = f.entry.0;
    let call_end = loop {
        let i = sc.decode(ImageAddr(a))?;
        a = i.next_ip();
        if i.is_call_near() || i.is_call_near_indirect() {
            break a;
        }
        if a >= f.extent.end || i.flow_control() != iced_x86::FlowControl::Next {
            return None;
        }
    };
    let ret = m.remote(ImageAddr(call_end)).0;
    // The main thread's stack, from its rsp to the top of the [stack] mapping.
    let maps = tr.maps().ok()?;
    let top = maps.iter().find(|m| m.path.as_deref() == Some("[stack]"))?.end.0;
    let mut at = tr.regs(tr.pid()).ok()?.rsp & !7;
    let mut buf = vec![0u8; 64 * 1024];
    let mut found = false;
    while at < top && !found {
        let n = ((top - at) as usize).min(buf.len());
        tr.read(RemoteAddr(at), &mut buf[..n]).ok()?;
        found = buf[..n]
            .chunks_exact(8)
            .any(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()) == ret);
        at += n as u64;
    }
    found.then(|| vec![(m.remote(f.entry).0, ret)])
}

/// A place in a code patch where a thread may sleep: right after a `syscall`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Parked {
    /// The same point in the original code: right after the original `syscall`.
    resume: u64,
    /// The `syscall` of a guard's wrapped path: the program's registers are in its frame.
    guard_frame: bool,
}

/// The ways out of a code patch that leave a thread somewhere kerf must know of on removal.
#[derive(Debug, Default, PartialEq)]
struct PatchExits {
    /// After every `syscall`: where a thread asleep in it has its PC (see `Parked`).
    parked: Vec<(u64, Parked)>,
    /// After every `call`: the return address a thread in the callee has on its stack.
    returns: Vec<u64>,
}

/// The exits of the code patch `code` at `patch` (decoded linearly: a patch holds only
/// instructions). For its `syscall`s, a guard (`Layout::ReplacesFirst`) stands in for the
/// first displaced instruction with two of them, the plain path's and then the wrapped path's
/// (`codegen::sigguard`); every other `syscall` is a displaced one, relocated in order.
fn patch_exits(patch: u64, code: &[u8], d: &kerf_patch::Displaced, layout: Layout) -> PatchExits {
    let mut dec = iced_x86::Decoder::with_ip(64, code, patch, iced_x86::DecoderOptions::NONE);
    let mut ends = Vec::new();
    let mut returns = Vec::new();
    while dec.can_decode() {
        let i = dec.decode();
        if i.mnemonic() == iced_x86::Mnemonic::Syscall {
            ends.push(i.next_ip());
        } else if i.is_call_near() || i.is_call_near_indirect() {
            returns.push(i.next_ip());
        }
    }
    let mut originals: Vec<(u64, bool)> = Vec::new();
    let skip = match layout {
        Layout::ReplacesFirst => {
            let after = d.insns.first().map_or(d.point, |i| i.next_ip());
            originals.push((after, false));
            originals.push((after, true));
            1
        }
        Layout::Before => 0,
    };
    originals.extend(
        d.insns
            .iter()
            .skip(skip)
            .filter(|i| i.mnemonic() == iced_x86::Mnemonic::Syscall)
            .map(|i| (i.next_ip(), false)),
    );
    // Not the layout this reading assumes: better no move than a wrong one.
    let parked = if ends.len() != originals.len() {
        Vec::new()
    } else {
        ends.into_iter()
            .zip(originals)
            .map(|(pc, (resume, guard_frame))| (pc, Parked { resume, guard_frame }))
            .collect()
    };
    PatchExits { parked, returns }
}

/// The guard probes a process with trap splices needs: one on every `syscall` of its
/// modules that may change a signal mask (its number is one that can, or is unknown).
fn guard_probes(modules: &[AnalyzedImage]) -> Result<Vec<Probe>, InstrumentError> {
    let mut v = Vec::new();
    for (m, img) in modules.iter().enumerate() {
        let cfg = &img.analysis.cfg;
        for s in crate::plan::syscall_sites(modules, m)? {
            // Code never spliced (a signal trampoline: its `rt_sigreturn` sets no new mask)
            // gets no guard either.
            let never = cfg.no_splice_in(s.addr.0, s.addr.0 + 2).is_some();
            if never || s.nr.is_some_and(|nr| !sigguard::needs_guard(nr)) {
                continue;
            }
            let f = cfg.function(s.func);
            let label = format!("{}+{:#x} (signal-mask guard)", f.name, s.addr.0 - f.entry.0);
            v.push(Probe {
                point: Point {
                    spec: "(signal-mask guard)".into(),
                    label,
                    module: m,
                    func: s.func,
                    addr: s.addr,
                    at_exit: false,
                },
                action: Action::SignalGuard,
            });
        }
    }
    Ok(v)
}

fn words_bytes(w: &[u64; 4]) -> [u8; 32] {
    let mut b = [0u8; 32];
    for (k, v) in w.iter().enumerate() {
        b[k * 8..k * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    b
}

fn bytes_words(b: &[u8; 32]) -> [u64; 4] {
    std::array::from_fn(|k| u64::from_le_bytes(b[k * 8..k * 8 + 8].try_into().unwrap_or_default()))
}

/// A stretch of the target's memory read with one system call for a batch of sites that lie
/// close together (one read instead of one per site: each costs a page lookup in the target
/// and a copy in the kernel). Ranges outside it are read on their own.
#[derive(Default)]
pub(crate) struct Window {
    start: u64,
    bytes: Vec<u8>,
}

impl Window {
    /// The most read at once; sites farther apart (another module) are read one by one.
    const MAX: u64 = 64 * 1024;

    /// The smallest stretch holding every one of `ranges`, if it is at most `MAX` bytes and
    /// readable; else an empty window.
    pub(crate) fn read(
        tr: &dyn TargetMemory,
        ranges: impl Iterator<Item = (u64, usize)>,
    ) -> Window {
        let (mut lo, mut hi) = (u64::MAX, 0);
        for (a, len) in ranges {
            lo = lo.min(a);
            hi = hi.max(a + len as u64);
        }
        if lo >= hi || hi - lo > Self::MAX {
            return Window::default();
        }
        let mut bytes = vec![0u8; (hi - lo) as usize];
        match tr.read(RemoteAddr(lo), &mut bytes) {
            Ok(()) => Window { start: lo, bytes },
            Err(_) => Window::default(),
        }
    }

    /// The `len` bytes at `addr`: from the window, else read now.
    pub(crate) fn bytes(
        &self,
        tr: &dyn TargetMemory,
        addr: u64,
        len: usize,
    ) -> Result<Vec<u8>, TargetError> {
        if let Some(b) = self.get(addr, len) {
            return Ok(b.to_vec());
        }
        let mut b = vec![0u8; len];
        tr.read(RemoteAddr(addr), &mut b)?;
        Ok(b)
    }

    fn get(&self, addr: u64, len: usize) -> Option<&[u8]> {
        let off = usize::try_from(addr.checked_sub(self.start)?).ok()?;
        self.bytes.get(off..off.checked_add(len)?)
    }
}

/// Code patches of a batch, gathered into runs of nearby patches and written one run at a
/// time: a module's patches follow each other in its code heap, each in a room of its own
/// (`patchset::site_room`), and a patch is shorter than its room.
#[derive(Default)]
struct PatchWrites {
    start: u64,
    bytes: Vec<u8>,
}

impl PatchWrites {
    /// Gaps up to this long are written with the run. The gap between two patches is the
    /// rest of a room: zeros in a fresh heap, where nothing else is written before every
    /// patch is (the trap dispatcher goes after the last room), so writing it changes
    /// nothing. (Runs broken at every room took one write per site: 10,722 for python3.11.)
    const MAX_GAP: u64 = 4096;

    /// Add `code`, to go at `at`: after the current run if it follows it within
    /// [`Self::MAX_GAP`] (the gap written as the zeros the heap holds there), else the run is
    /// written first and a new one starts.
    fn add(&mut self, tr: &dyn TargetMemory, at: u64, code: &[u8]) -> Result<(), TargetError> {
        let end = self.start + self.bytes.len() as u64;
        let follows = !self.bytes.is_empty() && at >= end && at - end <= Self::MAX_GAP;
        if !follows {
            self.flush(tr)?;
            self.start = at;
        }
        self.bytes.resize((at - self.start) as usize, 0);
        self.bytes.extend_from_slice(code);
        Ok(())
    }

    fn flush(&mut self, tr: &dyn TargetMemory) -> Result<(), TargetError> {
        if !self.bytes.is_empty() {
            tr.write(RemoteAddr(self.start), &self.bytes)?;
            self.bytes.clear();
        }
        Ok(())
    }
}

/// Write `new` at `addr` after checking the bytes there are `old`, then read it back.
pub(crate) fn write_verified(
    tr: &dyn TargetMemory,
    addr: u64,
    old: &[u8],
    new: &[u8],
) -> Result<(), InstrumentError> {
    let mut cur = vec![0u8; old.len()];
    tr.read(RemoteAddr(addr), &mut cur)?;
    if cur != old {
        return Err(mismatch_before(addr, old, &cur));
    }
    tr.write(RemoteAddr(addr), new)?;
    let mut back = vec![0u8; new.len()];
    tr.read(RemoteAddr(addr), &mut back)?;
    if back != new {
        return Err(mismatch_after(addr, new, &back));
    }
    Ok(())
}

/// The bytes at `addr` are not `old`, which kerf expected there (nothing was written).
fn mismatch_before(addr: u64, old: &[u8], cur: &[u8]) -> InstrumentError {
    let detail = format!("expected {old:02x?}, found {cur:02x?} (changed by someone else?)");
    InstrumentError::Mismatch { addr, detail }
}

/// `new` was written at `addr` and reads back as `back`.
fn mismatch_after(addr: u64, new: &[u8], back: &[u8]) -> InstrumentError {
    InstrumentError::Mismatch { addr, detail: format!("wrote {new:02x?}, read back {back:02x?}") }
}

/// A heap left mapped on purpose, and why: `(why, (address, bytes))`.
type LeftMapped = (String, Vec<(u64, u64)>);

/// The trap dispatcher's signal frames, as they stay behind on a thread's stack below its
/// stack pointer after `rt_sigreturn` and come back into view when the thread later runs
/// deeper: the frame's first word is the `sa_restorer` (kerf's, in the code heap) and its
/// saved PC is the code patch the dispatcher resumed the thread in. Such a frame is dead
/// whenever no thread's PC is in kerf's code: the dispatcher returns straight through the
/// restorer once it has rewritten the PC, and it rewrites the PC only for kerf's own traps
/// (a SIGTRAP it chains to the program's handler keeps the program's PC, so that frame,
/// live while the program's handler runs, is not taken for dead).
#[derive(Clone, Debug)]
struct DispatcherFrames {
    restorer: u64,
    /// Patch addresses the dispatcher resumes threads in, sorted.
    resumes: Vec<u64>,
}

impl DispatcherFrames {
    /// Words from a frame's start (the `pretcode` word of the kernel's `rt_sigframe`) to its
    /// saved PC: `pretcode`, then `uc_flags`, `uc_link`, `uc_stack` (3 words) and 16 general
    /// registers of `uc_mcontext` before RIP.
    const RIP_WORD: usize = 1 + 2 + 3 + 16;

    /// Indices of `words` (a stack, from its stack pointer up) where such a frame starts.
    fn frames_in<'a>(&'a self, words: &'a [u64]) -> impl Iterator<Item = usize> + 'a {
        (0..words.len().saturating_sub(Self::RIP_WORD)).filter(move |&k| {
            words[k] == self.restorer
                && self.resumes.binary_search(&words[k + Self::RIP_WORD]).is_ok()
        })
    }
}

/// A random number of pages, below 4096 (16 MB), from the standard library's per-process
/// random hash keys: enough spread that successive heaps rarely land on the same pages.
fn spread_pages() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64),
    );
    h.finish() % 4096
}

/// A value that may send a thread into kerf's code next: its PC, or an 8-byte value in the top
/// of its stack (a return address, or the saved PC of a signal frame).
#[derive(Clone, Copy, Debug)]
struct Busy {
    tid: i32,
    value: u64,
    /// Bytes above the stack pointer, or `None` for the PC.
    stack_offset: Option<u64>,
    /// A stack word in the slot where a signal frame keeps the PC it resumes
    /// ([`saved_pc_slot`]).
    signal_pc: bool,
}

impl Busy {
    fn within(&self, lo: u64, hi: u64) -> bool {
        self.value >= lo && self.value < hi
    }

    /// Whether the thread may go on at this value, if it lies in code kerf is taking away:
    /// its PC; the saved PC of a signal frame, resumed when the handler returns; a return
    /// address after a `call` in kerf's code (`returns`); or the trap dispatcher's restorer,
    /// which the program's SIGTRAP handler the dispatcher chained to returns into. Any other
    /// stack word is data: code patches push no code addresses, and relocated calls return
    /// to the original code.
    fn may_resume(&self, returns: &std::collections::HashSet<u64>, restorer: Option<u64>) -> bool {
        self.stack_offset.is_none()
            || self.signal_pc
            || returns.contains(&self.value)
            || restorer == Some(self.value)
    }
}

/// `__USER_CS`, the code segment of 64-bit user mode, and `__USER_DS`, its stack segment.
const USER_CS: u64 = 0x33;
const USER_DS: u64 = 0x2b;

/// Whether `words[k]` (a stack, from its stack pointer up) sits where the kernel's x86-64
/// signal frame keeps the interrupted PC, `uc_mcontext.rip`: the word after it is the saved
/// `eflags` (bit 1 always set, nothing above ID, bit 21), and the next holds `cs, gs, fs, ss`
/// as 16-bit fields: 64-bit user mode's code segment, two zeros (the kernel writes none
/// other there), and `__USER_DS` (or 0, before Linux 4.8 saved it: then either counts). A
/// random stack word next to such a pair is rare (the low 16 bits alone let more data
/// through: a cache address a JIT `ret` left in a slot nothing wrote since, beside a small
/// number and any word ending in 0x33, such as the number 51, would refuse a flush); a copy
/// of a frame a handler made on its stack matches too, and counts (it may be resumed with
/// `setcontext`).
///
/// And only from word `RIP_WORD - 1` on: a live frame begins at or above the stack pointer
/// (the handler runs below its `pretcode` word, the restorer one word above it after the
/// handler's `ret`), and a `ucontext_t` copy in a live stack frame has its PC as far into it.
/// Nearer the stack pointer such a triple is what a returned handler's frame left in slots
/// the thread's later calls did not write: session 77 found one 14 words above the stack
/// pointer of a thread in a JIT's cache, on half the runs of a loaded host, and it refused
/// the cache's flush every time.
///
/// A word whose frame would go on past `words` counts unless `stack_ends` (the stack's
/// mapping ends there, so no frame does): the words beyond were not read. Callers read two
/// words more than they scan, so that this happens only where they do not know: at the last
/// words of a whole window it made every cache address a JIT `ret` had left there a held
/// frame (one flush in about 180 of python3.11's start under `--plugin calls`, session 78).
pub(crate) fn saved_pc_slot(words: &[u64], k: usize, stack_ends: bool) -> bool {
    static SS_SAVED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let ss_saved = *SS_SAVED
        .get_or_init(|| kerf_os::sys::kernel_at_least(&kerf_os::sys::RealSys, 4, 8) == Some(true));
    saved_pc_slot_with(words, k, ss_saved, stack_ends)
}

/// [`saved_pc_slot`] on a kernel that saves `ss` in the frame (`ss_saved`: 4.8 and later), or
/// may not.
fn saved_pc_slot_with(words: &[u64], k: usize, ss_saved: bool, stack_ends: bool) -> bool {
    if k + 1 < DispatcherFrames::RIP_WORD {
        return false;
    }
    match (words.get(k + 1), words.get(k + 2)) {
        (Some(&flags), Some(&segments)) => {
            let (cs_gs_fs, ss) = (segments & 0xffff_ffff_ffff, segments >> 48);
            let ss_ok = ss == USER_DS || (ss == 0 && !ss_saved);
            flags & 2 != 0 && flags >> 22 == 0 && cs_gs_fs == USER_CS && ss_ok
        }
        // The frame's end is beyond the words read: no telling, so it counts, unless the
        // stack ends there.
        _ => !stack_ends,
    }
}

/// The values of a set of [`Busy`] that lie in `[lo, hi)` (the stretch a batch of splices
/// covers: most stack words are data, and sorting them all cost milliseconds), sorted, for
/// asking many times whether any lies in a range inside it.
struct BusyValues(Vec<u64>);

impl BusyValues {
    fn new(busy: &[Busy], lo: u64, hi: u64) -> BusyValues {
        let mut v: Vec<u64> = busy.iter().map(|b| b.value).filter(|&x| x >= lo && x < hi).collect();
        v.sort_unstable();
        BusyValues(v)
    }

    /// Whether any value is in `[lo, hi)` (as [`Busy::within`]).
    fn any_within(&self, lo: u64, hi: u64) -> bool {
        let i = self.0.partition_point(|&v| v < lo);
        self.0.get(i).is_some_and(|&v| v < hi)
    }
}

impl fmt::Display for Busy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stack_offset {
            None => write!(f, "thread {} has its PC at {:#x}", self.tid, self.value),
            Some(o) => {
                write!(f, "thread {} has {:#x} on its stack at rsp+{o:#x}", self.tid, self.value)
            }
        }
    }
}

/// Every thread's PC and every 8-byte value in the top of its stack: addresses some thread may
/// execute or return to next.
/// Every PC (and restarting `syscall`) and the words near the top of each stack of a stopped
/// process, as values: what a thread may still resume at (a forked copy's springboard check).
pub(crate) fn busy_values(tr: &Tracee) -> Result<Vec<u64>, TargetError> {
    Ok(busy_ranges(tr, None)?.into_iter().map(|b| b.value).collect())
}

fn busy_ranges(
    tr: &Tracee,
    dead_frames: Option<&DispatcherFrames>,
) -> Result<Vec<Busy>, TargetError> {
    let mut v = Vec::new();
    for &t in tr.threads() {
        let r = tr.regs(t)?;
        v.push(Busy { tid: t, value: r.rip, stack_offset: None, signal_pc: false });
        if kerf_os::ptrace::restarts_syscall(&r) {
            // Its `syscall` runs again when it resumes (target::ptrace::restarts_syscall).
            let value = r.rip.wrapping_sub(2);
            v.push(Busy { tid: t, value, stack_offset: None, signal_pc: false });
        }
        // Two words past the scan: a saved PC in its last words has its frame's next words
        // read; a shorter read ended at the stack's end, past which no frame goes.
        let words = stack_words(tr, t, STACK_SCAN + 16)?;
        let ends = words.len() < (STACK_SCAN + 16) / 8;
        let mut skip = vec![false; words.len()];
        if let Some(d) = dead_frames {
            for k in d.frames_in(&words) {
                skip[k] = true;
                skip[k + DispatcherFrames::RIP_WORD] = true;
            }
        }
        let scanned = words.len().min(STACK_SCAN / 8);
        let words_scanned = words[..scanned].iter().enumerate();
        v.extend(words_scanned.filter(|(k, _)| !skip[*k]).map(|(k, &value)| Busy {
            tid: t,
            value,
            stack_offset: Some(8 * k as u64),
            signal_pc: saved_pc_slot(&words, k, ends),
        }));
    }
    Ok(v)
}

/// The words of thread `tid`'s stack from its stack pointer up, at most `len` bytes (fewer
/// where the stack ends sooner).
pub(crate) fn stack_words(tr: &Tracee, tid: i32, len: usize) -> Result<Vec<u64>, TargetError> {
    const PAGE: usize = 4096;
    let sp = tr.regs(tid)?.sp();
    let mut stack = vec![0u8; len];
    let mut len = len;
    if tr.read(sp, &mut stack).is_err() {
        // The stack ends nearer: as far as it reads, to the page (by the pages' last bytes,
        // a binary search). Halving the length instead lost up to half of it, the outermost
        // frames (`main`'s, `Py_RunMain`'s): a flush did not translate them again, and the
        // thread left the cache when it returned there.
        let reads = |n: usize| tr.read(RemoteAddr(sp.0 + n as u64 - 1), &mut [0u8; 1]).is_ok();
        let first = PAGE - (sp.0 as usize % PAGE);
        if len <= first || !reads(first) {
            len = len.min(first);
        } else {
            let (mut ok, mut not) = (0, (len - first) / PAGE + 1);
            while not - ok > 1 {
                let mid = (ok + not) / 2;
                if reads(first + mid * PAGE) {
                    ok = mid;
                } else {
                    not = mid;
                }
            }
            len = (first + ok * PAGE).min(len);
        }
        if tr.read(sp, &mut stack[..len]).is_err() {
            return Ok(Vec::new());
        }
    }
    Ok(stack[..len]
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect())
}

#[cfg(test)]
mod dead_frame_tests {
    use super::DispatcherFrames;

    /// A stack with a dispatcher frame at word 3 (restorer, then the saved PC 22 words on)
    /// and, at word 30, a program's own signal frame whose saved PC is in a patch.
    #[test]
    fn only_the_dispatchers_frames_are_recognised() {
        let d = DispatcherFrames { restorer: 0x5000_01eb, resumes: vec![0x5000_0000, 0x5000_0040] };
        let mut w = vec![0u64; 64];
        w[3] = 0x5000_01eb;
        w[3 + DispatcherFrames::RIP_WORD] = 0x5000_0040;
        w[30] = 0x7f00_1234; // libc's __restore_rt
        w[30 + DispatcherFrames::RIP_WORD] = 0x5000_0000;
        // The restorer with a saved PC that is not a resume point: a chained handler's frame.
        w[40] = 0x5000_01eb;
        w[40 + DispatcherFrames::RIP_WORD] = 0x5000_0010;
        assert_eq!(d.frames_in(&w).collect::<Vec<_>>(), vec![3]);
        // A frame cut off by the end of the scanned stack is not taken for dead.
        w[60] = 0x5000_01eb;
        assert_eq!(d.frames_in(&w).collect::<Vec<_>>(), vec![3]);
    }
}

/// Which stack words removal must take for places a thread may go on at in kerf's code.
#[cfg(test)]
mod resume_tests {
    use super::USER_CS;
    use super::{patch_exits, saved_pc_slot, saved_pc_slot_with, Busy, Layout, Parked, PatchExits};
    use std::collections::HashSet;

    /// Where [`stack`] puts its words: from here on a stack word may be a frame's saved PC
    /// (`RIP_WORD - 1`).
    const O: usize = 21;

    /// A stack with a signal frame's saved PC at word `O + 5` (eflags 0x246, then `cs` = 0x33
    /// and `ss` = 0x2b), a value at word `O + 9` with data around it, and small numbers at
    /// words `O + 12..O + 14` that look like eflags but not like the segment word.
    fn stack() -> Vec<u64> {
        let mut w = vec![0u64; O + 20];
        w[O + 5] = 0x5000_0040;
        w[O + 6] = 0x246;
        w[O + 7] = USER_CS | 0x2b << 48;
        w[O + 9] = 0x5000_0080;
        w[O + 10] = 7;
        w[O + 12] = 0x5000_00c0;
        w[O + 13] = 0x202;
        w[O + 14] = 0x20;
        // Data whose low 16 bits are the code segment's, after a word like eflags.
        w[O + 15] = 0x5000_0100;
        w[O + 16] = 0x6;
        w[O + 17] = 0x7f00_1234_0033;
        w
    }

    #[test]
    fn a_signal_frames_saved_pc_is_told_from_data() {
        let mut w = stack();
        let slots: Vec<usize> = (0..O + 18).filter(|&k| saved_pc_slot(&w, k, false)).collect();
        assert_eq!(slots, [O + 5]);
        // A kernel before 4.8 left `ss` zero; a later one never does (then 51 is data).
        w[O + 7] = USER_CS;
        assert!(saved_pc_slot_with(&w, O + 5, false, false));
        assert!(!saved_pc_slot_with(&w, O + 5, true, false));
        // The last two words: the frame would go on beyond what was read, so they count,
        // unless the stack ends there.
        assert!(saved_pc_slot(&w, O + 18, false) && saved_pc_slot(&w, O + 19, false));
        assert!(!saved_pc_slot(&w, O + 18, true) && !saved_pc_slot(&w, O + 19, true));
    }

    /// The same three words nearer the stack pointer than a live frame's saved PC can be are
    /// a returned frame's leftovers; at `O` a thread in the restorer still has its frame.
    #[test]
    fn a_saved_pc_nearer_the_stack_pointer_than_a_frame_allows_is_data() {
        let frame = [0x5000_0040, 0x246, USER_CS | 0x2b << 48];
        for (k, live) in [(3, false), (14, false), (O - 1, false), (O, true), (O + 1, true)] {
            let mut w = vec![0u64; O + 20];
            w[k..k + 3].copy_from_slice(&frame);
            assert_eq!(saved_pc_slot(&w, k, false), live, "word {k}");
        }
    }

    #[test]
    fn only_pcs_saved_pcs_returns_and_the_restorer_may_resume() {
        let w = stack();
        let at = |k: usize| Busy {
            tid: 1,
            value: w[k],
            stack_offset: Some(8 * k as u64),
            signal_pc: saved_pc_slot(&w, k, false),
        };
        let none = HashSet::new();
        assert!(at(O + 5).may_resume(&none, None));
        assert!(!at(O + 9).may_resume(&none, None));
        assert!(!at(O + 12).may_resume(&none, None));
        assert!(at(O + 9).may_resume(&HashSet::from([0x5000_0080]), None));
        assert!(at(O + 12).may_resume(&none, Some(0x5000_00c0)));
        let pc = Busy { tid: 1, value: 0x5000_0080, stack_offset: None, signal_pc: false };
        assert!(pc.may_resume(&none, None));
    }

    /// A patch with a `call`, an indirect `call` and the relocated `syscall` of its point.
    #[test]
    fn a_patch_exits_after_its_calls_and_its_syscalls() {
        let syscall = [0x0f, 0x05];
        let mut dec = iced_x86::Decoder::with_ip(64, &syscall, 0x1000, 0);
        let d = kerf_patch::Displaced { point: 0x1000, insns: vec![dec.decode()], len: 2 };
        // call +0; call rax; syscall; jmp back.
        let code = [0xe8, 0, 0, 0, 0, 0xff, 0xd0, 0x0f, 0x05, 0xe9, 0, 0, 0, 0];
        let exits = patch_exits(0x5000, &code, &d, Layout::Before);
        let parked = vec![(0x5009, Parked { resume: 0x1002, guard_frame: false })];
        assert_eq!(exits, PatchExits { parked, returns: vec![0x5005, 0x5007] });
    }
}

/// The splice writer and the freeze check on the ptrace fake (kerf-os feature `fake`): no
/// process, no root.
#[cfg(test)]
mod fake_tests {
    use super::{busy_ranges, write_verified, BusyValues, InstrumentError, PatchWrites};
    use kerf_os::ptrace::fake::{regs_at, Fake, PID, STACK_TOP};
    use kerf_os::ptrace::Tracee;
    use std::sync::Arc;
    use std::time::Duration;

    const CODE: u64 = 0x40_0000;
    const ORIGINAL: [u8; 5] = [0x55, 0x48, 0x89, 0xe5, 0x90];
    const JUMP: [u8; 5] = [0xe9, 0x11, 0x22, 0x33, 0x44];

    /// A fake process: thread PID with its PC at `pc`, `word` on top of its stack, and the
    /// original bytes at CODE.
    fn process(pc: u64, word: u64) -> (Arc<Fake>, Tracee) {
        let fake = Arc::new(Fake::new(&[PID]));
        {
            let mut st = fake.state();
            st.threads.get_mut(&PID).unwrap().regs = regs_at(pc);
            st.mem.push((CODE, ORIGINAL.to_vec()));
            // The word at rsp+8, in the fake's stack (or a new one).
            let at = STACK_TOP - 0x1000 + 8;
            let seg = st.mem.iter_mut().find(|(b, m)| at >= *b && at + 8 <= *b + m.len() as u64);
            match seg {
                Some((b, m)) => {
                    let off = (at - *b) as usize;
                    m[off..off + 8].copy_from_slice(&word.to_le_bytes());
                }
                None => {
                    let mut stack = vec![0u8; 0x1000];
                    stack[8..16].copy_from_slice(&word.to_le_bytes());
                    st.mem.push((STACK_TOP - 0x1000, stack));
                }
            }
        }
        let tr = Tracee::stop_all_with(PID, fake.clone(), Duration::from_millis(300)).unwrap();
        (fake, tr)
    }

    fn bytes(fake: &Fake) -> Vec<u8> {
        let st = fake.state();
        st.mem.iter().find(|(b, _)| *b == CODE).expect("the code segment").1.clone()
    }

    #[test]
    fn a_splice_goes_in_and_comes_out_byte_for_byte() {
        let (fake, tr) = process(0x7000_0000, 0);
        write_verified(&tr, CODE, &ORIGINAL, &JUMP).unwrap();
        assert_eq!(bytes(&fake), JUMP);
        write_verified(&tr, CODE, &JUMP, &ORIGINAL).unwrap();
        assert_eq!(bytes(&fake), ORIGINAL);
        tr.resume_detach().unwrap();
    }

    /// Bytes that are not what kerf expects (someone else changed them) are left alone.
    #[test]
    fn unexpected_bytes_are_not_overwritten() {
        let (fake, tr) = process(0x7000_0000, 0);
        let e = write_verified(&tr, CODE, &JUMP, &ORIGINAL).unwrap_err();
        assert!(matches!(e, InstrumentError::Mismatch { addr: CODE, .. }), "{e:?}");
        assert_eq!(bytes(&fake), ORIGINAL);
        tr.resume_detach().unwrap();
    }

    /// The sorted index answers as a scan of every value would, at both ends of a range.
    #[test]
    fn busy_values_answer_like_a_scan() {
        let busy: Vec<super::Busy> = [7u64, 3, 20, 10, 10]
            .iter()
            .map(|&value| super::Busy { tid: 1, value, stack_offset: None, signal_pc: false })
            .collect();
        let index = BusyValues::new(&busy, 0, 26);
        for lo in 0..25 {
            for hi in lo..26 {
                let scan = busy.iter().any(|b| b.within(lo, hi));
                assert_eq!(index.any_within(lo, hi), scan, "[{lo}, {hi})");
            }
        }
    }

    /// Code patches in consecutive rooms go out in one write, the rest of each room as the
    /// zeros a fresh heap holds; a patch beyond `MAX_GAP` starts a new write.
    #[test]
    fn patches_in_nearby_rooms_are_written_at_once() {
        const HEAP: u64 = 0x50_0000;
        let (fake, tr) = process(0x7000_0000, 0);
        fake.state().mem.push((HEAP, vec![0u8; 0x4000]));
        let mut w = PatchWrites::default();
        let far = HEAP + 66 + PatchWrites::MAX_GAP + 1;
        for (at, code) in
            [(HEAP, &[1u8, 2, 3][..]), (HEAP + 32, &[4]), (HEAP + 64, &[5, 6]), (far, &[7])]
        {
            w.add(&tr, at, code).unwrap();
        }
        w.flush(&tr).unwrap();
        let st = fake.state();
        let writes: Vec<(u64, usize)> =
            st.writes.iter().filter(|(a, _)| *a >= HEAP).map(|(a, d)| (*a, d.len())).collect();
        assert_eq!(writes, [(HEAP, 66), (far, 1)]);
        let heap = &st.mem.iter().find(|(b, _)| *b == HEAP).unwrap().1;
        let mut want = vec![0u8; 0x4000];
        want[..3].copy_from_slice(&[1, 2, 3]);
        want[32] = 4;
        want[64..66].copy_from_slice(&[5, 6]);
        want[(far - HEAP) as usize] = 7;
        assert_eq!(heap, &want);
        drop(st);
        tr.resume_detach().unwrap();
    }

    /// Djprobe's freeze check sees a PC inside bytes 1.. of a splice, and a return address
    /// into them on the stack; a PC at the splice's first byte is no obstacle.
    #[test]
    fn the_freeze_check_sees_pcs_and_return_addresses_inside() {
        let inside = |pc: u64, word: u64| {
            let (_fake, tr) = process(pc, word);
            let busy = busy_ranges(&tr, None).unwrap();
            tr.resume_detach().unwrap();
            let scanned = busy.iter().any(|b| b.within(CODE + 1, CODE + 5));
            assert_eq!(
                BusyValues::new(&busy, CODE, CODE + 5).any_within(CODE + 1, CODE + 5),
                scanned
            );
            scanned
        };
        assert!(inside(CODE + 2, 0));
        assert!(inside(0x7000_0000, CODE + 4));
        assert!(!inside(CODE, 0));
        assert!(!inside(0x7000_0000, CODE + 5));
    }
}

/// A batch that fails part-way on the ptrace fake still says which splices went in.
#[cfg(test)]
mod batch_tests {
    use super::{Outcome, ProcessBackend, Splice};
    use crate::backend::Backend;
    use crate::probe::InstrumentError;
    use kerf_arch::RemoteAddr;
    use kerf_os::ptrace::fake::{regs_at, Fake, PID, SYSCALL_AT};
    use std::sync::Arc;

    const CODE: u64 = 0x40_0000;

    /// A batch of three splices, `gap` bytes apart, on the fake; the second finds bytes
    /// someone else changed. What the batch reported, and the code after it.
    fn second_of_three_changed(gap: u64) -> (Vec<Outcome>, Vec<u8>) {
        let fake = Arc::new(Fake::new(&[PID]));
        {
            let mut st = fake.state();
            st.threads.get_mut(&PID).unwrap().regs = regs_at(SYSCALL_AT + 0x100);
            st.mem.push((CODE, vec![0x90; 2 * gap as usize + 8]));
        }
        let splice = |at: u64, old: u8| Splice {
            addr: RemoteAddr(CODE + at),
            old: vec![old; 5],
            new: vec![0xe9, 1, 2, 3, 4],
            patch: RemoteAddr(0),
            springboard: None,
        };
        let mut be = ProcessBackend::with_sys(PID, fake.clone());
        let mut done = Vec::new();
        let batch = [splice(0, 0x90), splice(gap, 0xcc), splice(2 * gap, 0x90)];
        let e = be.splice(&batch, &mut done);
        assert!(matches!(e, Err(InstrumentError::Mismatch { addr, .. }) if addr == CODE + gap));
        let st = fake.state();
        (done, st.mem.iter().find(|(b, _)| *b == CODE).unwrap().1.clone())
    }

    /// Sites close together go in with one write of their stretch, after every site's bytes
    /// are checked: one found changed, nothing is written and nothing reported in.
    #[test]
    fn close_sites_go_in_together_or_not_at_all() {
        let (done, code) = second_of_three_changed(8);
        assert_eq!(done, vec![]);
        assert!(code.iter().all(|b| *b == 0x90));
    }

    /// Sites too far apart for one stretch go in one by one: the error comes back, and the
    /// first splice, already written, is reported so (it must be taken out again).
    #[test]
    fn what_went_in_before_an_error_is_reported() {
        let gap = 64 * 1024;
        let (done, code) = second_of_three_changed(gap);
        assert_eq!(done, vec![Outcome::Done]);
        assert_eq!(code[..5], [0xe9, 1, 2, 3, 4]);
        assert_eq!(code[gap as usize..gap as usize + 5], [0x90; 5]);
    }
}
