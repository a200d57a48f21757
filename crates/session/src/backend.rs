//! The one back-end interface a patch set is installed through (DESIGN.md §3-5, §9): code heap
//! near an address, code written where nothing leads yet, splices written a batch at a time
//! with every thread (or CPU) out of their bytes, the data heap mapped and read, and a batch
//! taken out again and verified; and the hooks through which the one patch-set builder
//! ([`crate::installer::PatchSet`]) asks a target for what only it does (how generated code
//! runs there, the probes it adds, its heaps, its step before traps and after removal). A
//! process implements it with ptrace ([`crate::instrument::ProcessBackend`]), the kernel with
//! kerf.ko ([`crate::kernel::KernelBackend`]).
//!
//! Addresses are the target's own type ([`Backend::Addr`]: `RemoteAddr` in a process,
//! `KernelAddr` in the kernel); a bare `u64` is a length or an offset.

use crate::load::AnalyzedImage;
use crate::patchset::{Code, DataLayout, Runtime, TargetAddr};
pub use crate::patchset::{Outcome, Splice, Springboard};
use crate::phases::Phases;
use crate::plan::{Rules, SitePlan, Sites};
use crate::probe::{InstrumentError, Probe, Removed, Site, ToolData, Where};
use kerf_arch::RemoteAddr;
use kerf_patch::Displaced;
use std::time::Duration;

/// What a target says before planning (the builder's step 1).
pub struct Begin {
    /// How generated code runs there.
    pub runtime: Runtime,
    /// Run-once start-up code no thread can run again, usable for springboards, `[start,
    /// end)` (a process's `_start`, once it is past it).
    pub startup: Vec<(u64, u64)>,
}

/// Where a heap the builder places code patches and data in starts in the target.
#[derive(Clone, Copy, Debug)]
pub struct Heap<A> {
    /// Where the first code patch goes (the builder places them one after another, by
    /// room, up to the room the back-end sized the heap for).
    pub code: A,
    /// The data heap (its layout: [`DataLayout`]), and its tail stacks if it has them.
    pub data: A,
    pub tails: Option<A>,
    /// The tool's ring area ([`crate::instrument::ToolData::rings`]), in the data heap's
    /// mapping wherever the back-end put it, if the heap has the tool's area.
    pub rings: Option<A>,
}

/// One code patch to write: where, its bytes and layout, and the instructions it displaces.
pub struct Patch<'a, A> {
    pub at: A,
    pub code: &'a Code,
    pub displaced: &'a Displaced,
}

/// How the target was held while probes went in (for the line a tool says).
#[derive(Clone, Copy, Debug, Default)]
pub struct Pauses {
    /// The longest time every thread was held stopped, and the longest stop that wrote or
    /// removed a batch of splices (a process; zero in the kernel, which splices running).
    pub longest: Duration,
    pub longest_splice: Duration,
    /// How long the last batch's int3s took to go in (the kernel).
    pub int3: Option<Duration>,
}

/// How a patch set's splices are batched.
#[derive(Clone, Copy, Debug)]
pub struct Batches {
    /// Splices per call of [`Backend::splice`] (a process: per stop of every thread).
    pub size: usize,
    /// Rounds a `Later` splice is tried again before it is given up.
    pub tries: usize,
    /// How long the threads in the way get to move on before a retry.
    pub pause: Duration,
}

/// A target probes are installed in.
pub trait Backend {
    /// An address in the target.
    type Addr: TargetAddr;
    /// kerf's view of a data heap mapped in the target.
    type Data;

    /// Whether a jump2's springboard goes in with its splice, inside the back-end's
    /// quiescence (the kernel), rather than before any splice, through
    /// [`Backend::write_springboards`] (a process: it goes into padding no thread runs).
    const SPRINGBOARDS_WITH_SPLICES: bool;

    /// Which target, for errors.
    fn target(&self) -> Where;

    /// `len` bytes of code heap within a rel32 jump of `near`, at `preferred` if it can be.
    fn alloc_code(
        &mut self,
        near: Self::Addr,
        preferred: Self::Addr,
        len: u64,
    ) -> Result<Self::Addr, InstrumentError>;

    /// A data heap of `len` bytes, shared with kerf, whose first `in_reach` bytes are within
    /// reach of rip-relative operands at `near` (the rest, a tool's ring area, may lie
    /// anywhere).
    fn map_data(
        &mut self,
        near: Self::Addr,
        len: u64,
        in_reach: u64,
    ) -> Result<Self::Data, InstrumentError>;

    /// Write `code` at `at`, where no splice leads yet (so no thread can be there).
    fn write_code(&mut self, at: Self::Addr, code: &[u8]) -> Result<(), InstrumentError>;

    /// Write a batch of splices with every thread out of their bytes. The batch goes in as
    /// one: a process holds all its threads stopped for it, the kernel takes it through one
    /// quiescence protocol. Each splice's outcome is pushed to `done` as soon as it is known,
    /// in order, so that when an error stops the batch the splices already written are known
    /// and can be taken out (every exit path restores the target, DESIGN.md §5).
    fn splice(
        &mut self,
        batch: &[Splice<Self::Addr>],
        done: &mut Vec<Outcome>,
    ) -> Result<(), InstrumentError>;

    /// Take a batch of live splices out, in the order given, restoring and verifying every
    /// byte (springboards when no thread can be in one any more: the kernel after its
    /// quiescence, a process in [`Backend::after_remove`], once its code heaps are free).
    fn remove(&mut self, batch: &[Splice<Self::Addr>]) -> Result<Vec<Outcome>, InstrumentError>;

    /// Where [`Backend::splice`]'s time went, step by step, since the last call (phases named
    /// `splices: ...`, which the installer adds to its own); none by default.
    fn take_splice_steps(&mut self) -> crate::phases::Phases {
        crate::phases::Phases::default()
    }

    /// A run of [`Backend::remove`] calls is over (also when one failed): a process takes the
    /// same splices out of the children it forked (`crate::forked`).
    fn removals_done(&mut self) {}

    /// The target ended with these splices still in (in groups, each to go out at once, in
    /// order) and these springboards: a process takes them out of the copies it forked that
    /// outlive it (a daemon's double fork, whose launcher exits at once), and says which
    /// copies it found (pids). Nothing is written in the target (it is gone).
    fn ended_with(
        &mut self,
        _groups: &[Vec<Splice<Self::Addr>>],
        _boards: &[Springboard<Self::Addr>],
    ) -> Vec<i32> {
        Vec::new()
    }

    // The builder's hooks, in the order the builder calls them (DESIGN.md §9).

    /// How this target's sites are planned.
    fn rules(&self) -> Rules;

    /// Sites per chunk of code patches written (and read for the foreign-bytes check), and
    /// springboards per call of [`Backend::write_springboards`].
    fn chunk(&self) -> usize;

    /// How `n` splices are batched when they go in, and how many are taken out per call of
    /// [`Backend::remove`].
    fn batches(&self, n: usize) -> Batches;
    fn remove_batch(&self, n: usize) -> usize;

    /// Splices per call of [`Backend::remove`] when `n` sites are retired while the others
    /// stay live ([`crate::installer::PatchSet::retire`]): as for removal unless the target
    /// can take more at a time within its pause budget.
    fn retire_batch(&self, n: usize) -> usize {
        self.remove_batch(n)
    }

    /// Whether splices go in sorted by address within each group of the plan order (every
    /// site without a timer start first): the kernel's driver writes runs of close sites
    /// together. A process takes them in plan order.
    fn by_address(&self) -> bool {
        false
    }

    /// Step 1: refuse what the target cannot run (`probes`, with `tool`'s timers and
    /// programs), and say how generated code runs there. Times itself into `phases`.
    fn begin(
        &mut self,
        modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        phases: &mut Phases,
    ) -> Result<Begin, InstrumentError>;

    /// Step 2: once the tool's probes are planned, the probes the target needs besides
    /// (`Some`, planned again with the tool's: a process with a trap splice guards every
    /// `syscall` that may change a signal mask); `None`: nothing to add.
    fn extra_probes(
        &mut self,
        _modules: &[AnalyzedImage],
        _planned: &Sites,
        _phases: &mut Phases,
    ) -> Result<Option<Vec<Probe>>, InstrumentError> {
        Ok(None)
    }

    /// Data heaps: how many for `modules` modules, and which holds a module's data (and
    /// code patches). One per module unless the target says otherwise.
    fn heaps(&self, modules: usize) -> usize {
        modules
    }
    fn heap_of(&self, module: usize) -> usize {
        module
    }

    /// Step 3: map the heaps: code heap with room for the patches of `sites` (of `probes`),
    /// data heap for `layout` (and what the target adds after it). `None`: a heap with no
    /// probes.
    fn map_heaps(
        &mut self,
        modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        layout: &DataLayout,
        sites: &[SitePlan],
    ) -> Result<Vec<Option<Heap<Self::Addr>>>, InstrumentError>;

    /// Where a signal-mask guard keeps the program's SIGTRAP action, given the module of the
    /// first trap site (`None`: no trap; a process puts its dispatcher there). The kernel has
    /// no guards.
    fn guard_action(&mut self, _trap_module: Option<usize>) -> Option<u64> {
        None
    }

    /// Step 5, with [`Backend::write_chunk`]: the target's bytes at `ranges` (what a chunk of
    /// sites displaces, and their springboards' padding), read in as few calls as the target
    /// allows.
    fn read(&mut self, ranges: &[(Self::Addr, usize)]) -> Result<Vec<Vec<u8>>, InstrumentError>;

    /// Write a chunk of code patches, where no splice leads yet, in as few calls as the target
    /// allows (a process merges adjacent patches into one write).
    fn write_chunk(&mut self, patches: &[Patch<'_, Self::Addr>]) -> Result<(), InstrumentError>;

    /// The splice of planned site `sp` whose patch is at `patch`, from the bytes it displaces
    /// now (`displaced`) and its springboard's padding (`pad`, for a jump2). A jump that
    /// cannot reach is the target's call: an error, or an int3 the builder records as a
    /// trap.
    fn make_splice(
        &self,
        sp: &SitePlan,
        label: &str,
        patch: Self::Addr,
        displaced: &[u8],
        pad: Option<&[u8]>,
    ) -> Result<Splice<Self::Addr>, InstrumentError>;

    /// Step 6 (unless [`Backend::SPRINGBOARDS_WITH_SPLICES`]): write a batch of springboards,
    /// each verified, before any splice leads to them.
    fn write_springboards(
        &mut self,
        _boards: &[Springboard<Self::Addr>],
    ) -> Result<(), InstrumentError> {
        Ok(())
    }

    /// Step 7: what the target does before any trap goes live, with every site recorded
    /// (`sites`). `first` (a process's signal-mask guards) must go live inside it; each one's
    /// outcome goes to `settled` (its index in `first`) as soon as it is known. Unless the
    /// target has more to do: `first` spliced as one batch.
    fn before_traps(
        &mut self,
        _sites: &[Site],
        first: &[Splice<Self::Addr>],
        _phases: &mut Phases,
        settled: &mut dyn FnMut(usize, Outcome),
    ) -> Result<(), InstrumentError> {
        splice_first(self, first, settled)
    }

    /// After removal: whether an error says the target is gone (nothing is left to restore).
    fn gone(&self, _e: &InstrumentError) -> bool {
        false
    }

    /// The last step of removal, once every splice is out (also after a failed
    /// installation): what the target needs put back, the springboards kerf wrote on their
    /// own (`springboards`), and the heaps freed. Returns what stays mapped, and why.
    fn after_remove(
        &mut self,
        springboards: Vec<Springboard<Self::Addr>>,
    ) -> Result<Removed, InstrumentError>;

    /// The 8 bytes at `off` of data heap `heap` (kerf's shared view: no system call).
    fn load_u64(&self, heap: usize, off: u64) -> u64;

    /// Store 8 bytes at `off` of data heap `heap` through kerf's shared view.
    fn store_u64(&self, heap: usize, off: u64, v: u64);

    /// Data heap `heap` as words (kerf's shared view), for readers of many words.
    fn data_words(&self, heap: usize) -> Option<&[std::sync::atomic::AtomicU64]>;

    /// How the target was held while the probes went in.
    fn pauses(&self) -> Pauses;

    /// What removals did in the children the target forked (a process; see
    /// [`Backend::removals_done`]).
    fn forks(&self) -> crate::forked::ForkStats {
        Default::default()
    }

    /// Each trap site's address and how often its `int3` was taken so far (`None`: the
    /// target cannot tell, as the kernel's driver does not count).
    fn trap_hits(&self) -> Option<Vec<(u64, u64)>> {
        None
    }

    /// Where kerf's code heaps start (a process's vanish from its maps on `exec`; the kernel
    /// has none of its own).
    fn code_heaps(&self) -> Vec<RemoteAddr>;

    /// Thread `tid`'s off-CPU clock now (the clock of off-CPU timers, see
    /// [`crate::instrument::ToolData::off_cpu`]), where the target keeps one.
    fn off_cpu_now(&self, _tid: i32) -> Option<u64> {
        None
    }

    /// Context switches the off-CPU clock missed (`None`: no such clock, or it cannot say):
    /// each may have lost a thread's time off the CPU.
    fn off_cpu_missed(&self) -> Option<u64> {
        None
    }

    /// Switches back in that the kernel did not report to the off-CPU clock (`None`: no such
    /// clock, or it cannot tell): each delays a thread's count of one wait to its next switch.
    fn off_cpu_unreported(&self) -> Option<u64> {
        None
    }
}

/// `first` spliced through `be` as one batch, each outcome to `settled` with its index (the
/// default step before traps).
pub(crate) fn splice_first<B: Backend + ?Sized>(
    be: &mut B,
    first: &[Splice<B::Addr>],
    settled: &mut dyn FnMut(usize, Outcome),
) -> Result<(), InstrumentError> {
    if first.is_empty() {
        return Ok(());
    }
    let mut done = Vec::new();
    let r = be.splice(first, &mut done);
    for (k, o) in done.into_iter().enumerate() {
        settled(k, o);
    }
    r
}
