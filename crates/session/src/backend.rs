//! The one back-end interface a patch set is installed through (DESIGN.md §3-5): code heap
//! near an address, code written where nothing leads yet, splices written a batch at a time
//! with every thread (or CPU) out of their bytes, the data heap mapped and read, and a batch
//! taken out again and verified. A process implements it with ptrace
//! ([`crate::instrument::ProcessBackend`]), the kernel with kerf.ko
//! ([`crate::kernel::KernelBackend`]); the installers build the patch set once
//! ([`crate::patchset`]) and drive it through this, splicing and removing in batches
//! through the shared `builder` module.

use crate::probe::{InstrumentError, KindRefusal, Reason, Where};

/// One site's splice as a back-end writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Splice {
    /// Where the splice goes, what is there now, and what goes there (the whole splice: a
    /// back-end that needs steps, like the kernel's int3-then-jump, takes them itself).
    pub addr: u64,
    pub old: Vec<u8>,
    pub new: Vec<u8>,
    /// The code patch the splice leads to (the kernel driver routes its int3 there).
    pub patch: u64,
    /// A jump2's springboard, `(address, bytes there, jump)`, for a back-end that writes it
    /// with the splice (the kernel's); `None` where it was written with the code (a process,
    /// under a stop of its own).
    pub springboard: Option<(u64, Vec<u8>, Vec<u8>)>,
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

/// A target probes are installed in.
pub trait Backend {
    /// kerf's view of a data heap mapped in the target.
    type Data;

    /// Which target, for errors.
    fn target(&self) -> Where;

    /// `len` bytes of code heap within a rel32 jump of `near`, at `preferred` if it can be.
    fn alloc_code(&mut self, near: u64, preferred: u64, len: u64) -> Result<u64, InstrumentError>;

    /// A data heap of `len` bytes near `near`, shared with kerf.
    fn map_data(&mut self, near: u64, len: u64) -> Result<Self::Data, InstrumentError>;

    /// Write `code` at `at`, where no splice leads yet (so no thread can be there).
    fn write_code(&mut self, at: u64, code: &[u8]) -> Result<(), InstrumentError>;

    /// Write a batch of splices with every thread out of their bytes. The batch goes in as
    /// one: a process holds all its threads stopped for it, the kernel takes it through one
    /// quiescence protocol. Each splice's outcome is pushed to `done` as soon as it is known,
    /// in order, so that when an error stops the batch the splices already written are known
    /// and can be taken out (every exit path restores the target, DESIGN.md §5).
    fn splice(&mut self, batch: &[Splice], done: &mut Vec<Outcome>) -> Result<(), InstrumentError>;

    /// Take a batch of live splices out, in the order given, restoring and verifying every
    /// byte (springboards when no thread can be in one any more: the kernel after its
    /// quiescence, a process once its code heaps are free, which its installer checks).
    fn remove(&mut self, batch: &[Splice]) -> Result<Vec<Outcome>, InstrumentError>;
}
