//! A JIT in a live process (JIFL with the translator in kerf): choose the region reached from
//! the roots, map a code cache and a data area near each module of it and one lookup table,
//! translate while the process runs, write the caches, then splice each root's entry to its
//! translation in one short stop. Removal splices the roots back, brings every thread that is
//! inside a cache back to the original address it stands for, and unmaps what kerf mapped.
//!
//! Threads enter the cache only through a root's entry; inside it they see original
//! addresses only (calls push original return addresses), so a thread leaves it by returning
//! past the root or through an indirect transfer with no translation (an *escape*, counted
//! per module and reported).
//!
//! On demand ([`JitOptions::on_demand`]): a miss posts its target to a mailbox and waits;
//! [`Jit::serve`] translates the function it falls in (and what that reaches) into the
//! module's reserved room, adds it to the table, links the exits that led to it, and answers.
//! A miss into a module the program mapped after kerf looked (`dlopen`) first has that module
//! analysed and given room, with the process stopped as at install ([`Jit::serve`]).

use crate::load::AnalyzedImage;
use crate::patchset::Runtime;
use crate::slabs::SlabRegion;
use kerf_analysis::cfg::FuncId;
use kerf_analysis::validate::Invalid;
use kerf_arch::hash::AddrMap;
use kerf_arch::RemoteAddr;
use kerf_codegen::{ring, At, Env, LiveAt, ThreadPointer};
use kerf_jit::mailbox as mb;
use kerf_jit::table::Hash;
use kerf_jit::table::Placed;
use kerf_jit::translate::Entry as TableEntry;
use kerf_jit::{closure, Layout, Marks, Module, Plugin, Region, Scope, Table, Translation};
use kerf_os::ptrace::{RegsExt, RemoteMem, TargetMemory, REACH};
use kerf_os::{SharedMem, TargetError, Tracee};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const PROT_RX: i32 = libc::PROT_READ | libc::PROT_EXEC;
/// Where the plugins' ring areas go, as near as they fit: 16 TiB, far below the modules and
/// the heap of a usual process, far above a non-PIE executable.
const RINGS_NEAR: u64 = 1 << 44;
/// The thread table at the start of each module's data area (see `Layout::threads`).
const THREADS_LEN: u64 = kerf_codegen::timer::THREAD_TABLE_LEN.next_multiple_of(64);
/// Stops tried before a root's entry is given up because a thread stays inside its bytes.
const SPLICE_TRIES: usize = 20;
/// Single-steps allowed to bring one thread to a clean point. Most code between two clean
/// points is short (a lookup: about 20 instructions), but not all of it: the thread table's
/// claim scans up to 256 slots (about 2,300 instructions), and a writer waiting for room in
/// a full call-trace ring loops until kerf's reader drains it (which it does while kerf
/// takes the JIT out). With 256 steps, `kerf jit --plugin calls` failed now and then at
/// Ctrl-C ("did not reach a clean point"), leaving its cache mapped in the program. A step
/// costs tens of microseconds: this many take well under a second.
const MAX_STEPS: usize = 1 << 14;
/// Single-steps allowed to a thread found inside a plugin's routine (a user's C callback:
/// it must come back to the cache, then to a clean point; a few milliseconds a thousand
/// steps).
const MAX_ROUTINE_STEPS: usize = 1 << 16;

/// Stops a flush makes before it gives up on a signal handler holding a cache address; and
/// removal before it leaves kerf's mappings in place for one. Between them kerf waits
/// [`held_pause`]: 382 ms in all. The threads waiting for kerf meanwhile (the miss that asked
/// for the flush) wait on: kerf's beat moves ([`kerf_jit::mailbox::ALIVE`]). (Five stops 2 ms
/// apart refused one flush in 153 of the suite's bounded-cache run on a slow, busy host, and
/// the only flush of the `siglongjmp` one: their handlers ran longer than that. Six, 62 ms
/// in all, refused the first flush of `jit_flush_handler` in about one run of ten with the
/// CPUs busy: its thread A, waiting in the miss path for kerf's answer, took its SIGUSR1
/// every 3 ms there, and every stop found it in its millisecond-long handler, whose frame
/// returns into the miss path of a translation the flush would free.)
const FLUSH_TRIES: u32 = 16;

/// How long to let the threads run before stop `tries + 1` of [`FLUSH_TRIES`]: 2 ms, doubled
/// at each stop up to 32 ms, so that a handler that is slow to return on a busy host gets
/// the time.
fn held_pause(tries: u32) -> Duration {
    Duration::from_millis(2 << (tries - 1).min(4))
}

/// The entries of the translations made before the cache runs (`held`), into kerf's copy of
/// the table (`index`), by rank across all of them: a set's way 0, the one the inline probes
/// compare, goes to return sites before other entries whichever piece of a module they are in.
fn insert_held(index: &mut Table, held: &mut [TableEntry]) {
    held.sort_by_key(|e| e.rank);
    index.reserve(held.len());
    for e in held.iter() {
        index.insert_ranked(e.orig, e.entry, e.cont, e.rank, e.keyed);
    }
}

/// Table ways [`Jit::retire_gone`] may leave taken by retired entries (a sixteenth of the
/// table's) before a flush makes the table anew instead.
fn retired_max(hash: Hash) -> usize {
    hash.sets() * kerf_jit::table::WAYS / 16
}
/// The cache thrashes when flushes took more than [`JitOptions::flush_share`] of the last
/// [`THRASH_WINDOW`]: a miss is then answered without a flush, and the thread leaves for the
/// original code (an escape, for the rest of its root call); no entry is made, so the next
/// miss there asks again and flushes once the window allows. Without it a limit far below
/// the working set flushed on every miss: at 36 KiB the 8-thread fixture, 30 ms natively,
/// flushed 8,924 times and took over five minutes. The default share, 0.9, leaves alone
/// limits that only make the program slower: sqlite3 at 1 MiB flushed 279 times, 40 % of its
/// run, and every count came out exact; at 0.5 a single escape there took `main`, the root,
/// and with it the rest of the run out of the cache (counts 0.004 % of the unbounded run's).
const THRASH_WINDOW: Duration = Duration::from_secs(2);

/// Stops made at attach to take threads already inside a root call into the cache
/// ([`Jit::take_in_threads`]), while some stand where they cannot be taken yet, and the pause between.
const TAKE_IN_TRIES: usize = 10;
const TAKE_IN_WAIT: Duration = Duration::from_millis(20);
/// Frames a walk of a thread's stack looks through for a root's.
const MAX_FRAMES: usize = 1024;

/// Functions one miss may bring in (the walk from the missed function over direct calls).
const BATCH_BUDGET: usize = 4096;
/// Functions translated before a waiting thread is answered: the rest of its walk (up to
/// [`BATCH_BUDGET`]) follows when kerf is idle, as many at a time. A thread gives up after
/// 250 ms with no answer (`mailbox::WAIT_NS`), and a whole walk from python3.11's
/// `Py_BytesMain` (3,279 functions) took kerf 0.6 s: that thread ran natively.
const ANSWER_BUDGET: usize = 64;
/// Functions of a late module's hint ([`Jit::late_ahead`]) translated between two wakes of
/// the threads waiting for their answers: a thread whose wait sees nothing for 250 ms
/// (`mailbox::WAIT_NS`) leaves the cache, and a wake with no answer only starts its next wait
/// (of [`kerf_jit::mailbox::TRIES`]). About 0.1 ms a function here on a quiet host
/// (libcrypto's 1,065 hinted functions in 0.1 s), two or three times that under load.
const LATE_STEP: usize = 256;
/// Room left in each module's reservation for later translations' stubs.
const STUB_ROOM: u64 = 1 << 20;

/// How the region is chosen.
#[derive(Clone, Copy, Debug)]
pub struct JitOptions {
    /// At most this many functions from the walk.
    pub budget: usize,
    /// Every function of every module (and the vDSO), so that calls through function
    /// pointers find a translation.
    pub whole_modules: bool,
    /// Misses ask kerf ([`Jit::serve`]), which translates their targets while they wait:
    /// room is reserved for every function of every module (where the address space near a
    /// module has a gap that big).
    pub on_demand: bool,
    /// Per-thread rings of this shape for the plugins' records (`emit.thread`), one area of
    /// them beside each module's data area ([`Jit::ring_areas`]).
    pub rings: Option<kerf_codegen::ring::Shape>,
    /// At most this many bytes of translated code at once (on demand): only the roots are
    /// translated ahead, and when a miss finds no room the cache is flushed
    /// ([`Jit::serve`]).
    pub cache_limit: Option<u64>,
    /// Under a cache limit, the share of the last two seconds flushes may take before misses
    /// escape instead of flushing (see [`THRASH_WINDOW`]); 1 or more: never.
    pub flush_share: f64,
    /// The process is running (attach): a big module's whole-image work, the check of
    /// every function of a cached analysis and the liveness where returns land (a second
    /// and more for libLLVM-14), comes after the cache is live (see [`later_blocks`]).
    pub early: bool,
    /// Roots wait for a library not loaded yet ([`Jit::wait_for_roots`]): the loader's
    /// debugger hook is found before anything is translated, so that its translation calls
    /// the load notice as the jump over its original will.
    pub late_roots: bool,
    /// Translate ahead what ran in earlier runs from the same roots, and nothing else of
    /// the modules that hint covers (kept beside the analysis cache: see
    /// [`AnalyzedImage::jit_hint`]), and keep what ran in this one (a function not yet known
    /// to have run carries a ran mark: [`Scope::marks`]).
    pub hints: bool,
    /// Under a plugin that counts blocks, counters off a spanning tree of each function's
    /// flow, the other blocks' counts worked out at the end ([`kerf_jit::counters`]); else a
    /// counter in every block.
    pub fewer_counters: bool,
}

impl Default for JitOptions {
    fn default() -> Self {
        JitOptions {
            budget: 1_000_000,
            whole_modules: false,
            on_demand: true,
            rings: None,
            cache_limit: None,
            flush_share: 0.9,
            early: false,
            late_roots: false,
            hints: true,
            fewer_counters: false,
        }
    }
}

/// A root: a function whose entry is spliced to its translation.
#[derive(Clone, Debug)]
pub struct Root {
    pub label: String,
    pub module: usize,
    pub func: FuncId,
}

#[derive(Debug)]
pub enum JitFail {
    Target(TargetError),
    Translate(kerf_jit::JitError),
    /// A root whose entry cannot take the jump to its translation.
    Root {
        label: String,
        why: String,
    },
    /// A thread stayed inside a root's entry bytes through every stop.
    Busy {
        label: String,
        tries: usize,
    },
    /// Bytes in the target that are not what kerf expected.
    Mismatch {
        addr: u64,
        detail: String,
    },
    /// A thread could not be brought to a clean point of the cache.
    Stranded {
        tid: i32,
        pc: u64,
    },
    /// A translation made for room that is in use, or past the room's end (kerf's own
    /// fault: nothing was written).
    Placement {
        at: u64,
        free: u64,
    },
    /// A thread's seccomp filter forbids the futex calls with which a miss waits for its
    /// translation (on demand): nothing was put in.
    MissWait(TargetError),
    /// Module `module`'s analysis came from the cache and does not describe its image (see
    /// `AnalyzedImage::check_all_code`): nothing was translated from it.
    Analysis {
        module: usize,
        path: std::path::PathBuf,
        detail: kerf_analysis::validate::Invalid,
    },
    /// A signal asked kerf to stop ([`crate::live::stop_flag`]) while it translated: what it
    /// had mapped is unmapped, nothing was put in.
    Interrupted,
}

impl fmt::Display for JitFail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JitFail::Target(e) => write!(f, "{e}"),
            JitFail::Translate(e) => write!(f, "{e}"),
            JitFail::Root { label, why } => write!(f, "cannot enter the JIT at {label}: {why}"),
            JitFail::Busy { label, tries } => {
                write!(f, "a thread stayed inside the entry of {label} through {tries} stops")
            }
            JitFail::Mismatch { addr, detail } => write!(f, "bytes at {addr:#x}: {detail}"),
            JitFail::Stranded { tid, pc } => {
                write!(f, "thread {tid} at {pc:#x} did not reach a clean point of the code cache")
            }
            JitFail::Placement { at, free } => {
                write!(f, "a translation made for {at:#x} where the free room starts at {free:#x}")
            }
            JitFail::MissWait(e) => write!(
                f,
                "{e} (a miss waits on a futex while kerf translates its target; with \
                 --no-demand it leaves for the original code instead, with no system call)"
            ),
            JitFail::Analysis { path, detail, .. } => {
                write!(f, "the cached analysis of {} does not match it ({detail})", path.display())
            }
            JitFail::Interrupted => write!(f, "interrupted before the JIT went in"),
        }
    }
}

impl std::error::Error for JitFail {}

impl From<TargetError> for JitFail {
    fn from(e: TargetError) -> Self {
        JitFail::Target(e)
    }
}

/// One translation in the target: a module's first, or one kerf made later for a miss. After
/// a flush ([`Jit::serve`] with a cache limit) the translations made before it stay listed,
/// retired: their code room is reused, their data words kept as kerf's copy (so that counts
/// made before the flush still add up), and nothing leads into them any more. A module the
/// program unmapped has its translations retired alike ([`Jit::retire_gone`]), their room
/// left as it is.
pub struct Cache {
    pub module: usize,
    pub code: RemoteAddr,
    pub data: Area,
    pub translation: Translation,
    /// Adopted before the cache ran: its linked exits may have become direct jumps
    /// ([`Jit::jump_directly`]), which cannot be unlinked while threads run.
    pub direct: bool,
}

/// A translation's part of its module's shared data area, or kerf's copy of it once the
/// translation is retired.
pub struct Area {
    mem: Arc<SharedMem>,
    off: usize,
    len: usize,
    kept: Option<Vec<u8>>,
    /// Where its words' copies start in each per-thread counter slab, if they have copies.
    shadow: Option<u64>,
}

impl Area {
    pub fn remote(&self) -> RemoteAddr {
        RemoteAddr(self.mem.remote().0 + self.off as u64)
    }

    /// Whether the target still uses it (not retired by a flush).
    pub fn is_live(&self) -> bool {
        self.kept.is_none()
    }

    /// Keep a copy of the words, with their copies in the counter slabs (`totals`, see
    /// [`SlabRegion::totals`]) added in, and stop reading the shared area (the words and the
    /// copies are zeroed after, for the translations that reuse them).
    fn retire(&mut self, totals: Option<&crate::slabs::Copies>) {
        let mut copy = vec![0u8; self.len];
        self.mem.read_bytes(self.off, &mut copy);
        if let (Some(totals), Some(shadow)) = (totals, self.shadow) {
            for (at, n) in totals.range(shadow, shadow + self.len as u64) {
                let w = &mut copy[(at - shadow) as usize..][..8];
                let sum = u64::from_le_bytes(w.try_into().unwrap_or_default()).wrapping_add(n);
                w.copy_from_slice(&sum.to_le_bytes());
            }
        }
        self.kept = Some(copy);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn load_u64(&self, offset: usize) -> u64 {
        match &self.kept {
            None => self.mem.load_u64(self.off + offset),
            Some(k) => k
                .get(offset..offset + 8)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap_or_default())),
        }
    }

    pub fn store_u64(&self, offset: usize, value: u64) {
        debug_assert!(self.kept.is_none(), "a store into a retired translation's words");
        if self.kept.is_none() {
            self.mem.store_u64(self.off + offset, value)
        }
    }

    /// Store at target address `a` (inside this area).
    fn store_at(&self, a: u64, value: u64) {
        self.store_u64((a - self.remote().0) as usize, value)
    }
}

/// What kerf reserved near a module: code room and a data area, each filled from its start.
struct Space {
    code: RemoteAddr,
    /// The code room, shared: kerf writes translations through its own mapping, and a child
    /// the target forks sees them too (it shares the table and the data words that lead
    /// there).
    code_mem: SharedMem,
    room: u64,
    /// The signal handlers' hooks' place ([`Jit::hook_handlers`]): after the routines,
    /// before `start` (a flush, which starts the room again from `start`, leaves them; the
    /// room's far end may be out of a rel32's reach of the module's data). The next free
    /// offset in it, and its end.
    hook_next: u64,
    hook_end: u64,
    /// Bytes of the room in use, and where translations start (after the routines): a flush
    /// sets `used` back to it.
    used: u64,
    start: u64,
    /// Room left unused between translations (see [`Jit::adopt`]): not counted as cache.
    gaps: u64,
    data: Arc<SharedMem>,
    data_used: u64,
    /// The per-thread rings of the plugins' records, if they have any; the thread table that
    /// indexes them is the data area's first bytes.
    rings: Option<Arc<SharedMem>>,
    /// The plugin's routines' copy at the start of the code room (0: none).
    routines: u64,
    /// Where the data area's copies start in each per-thread counter slab (see
    /// [`crate::slabs`]), if it has them; and where a thread's slab keeps the address of
    /// its ring here (`kerf_jit::Layout::ring_word`), if the module has rings.
    shadow: Option<u64>,
    ring_word: Option<i32>,
    /// In the loader's space while roots wait for a library: its debugger hook
    /// (`kerf_jit::Layout::load_hook`).
    load_hook: Option<u64>,
}

impl Space {
    fn threads(&self) -> u64 {
        self.data.remote().0
    }

    fn rings(&self) -> u64 {
        self.rings.as_ref().map_or(0, |r| r.remote().0)
    }

    fn holds(&self, a: u64) -> bool {
        a >= self.code.0 && a < self.code.0 + self.room
    }

    /// Whether `a` lies in the part of the room translations have used (a thread can have
    /// run nowhere else of it).
    fn ran_at(&self, a: u64) -> bool {
        a >= self.code.0 && a < self.code.0 + self.used
    }
}

/// What a plugin that writes records needs of a module the program maps after kerf attached
/// (`dlopen`): the module's space gets rings of its own, and the plugin names the module's
/// functions and starts reading those rings, before anything of it is translated.
pub trait LateRings: Sync {
    /// Called on kerf's miss-answering thread once module `m`'s space is mapped, with its
    /// rings and its data area (whose first bytes are the rings' thread table), before any of
    /// its code is translated.
    fn added(&self, m: &AnalyzedImage, rings: Arc<SharedMem>, data: Arc<SharedMem>);
}

/// What translating ahead of time and on demand needs to know each time.
struct Ctx {
    at: At,
    hash: Hash,
    /// The owner thread's thread pointer (see `DATA_OWNER`), and its id where the plugins
    /// can read a thread's (see `Layout::owner_tid`).
    owner: u64,
    owner_tid: Option<u32>,
    roots: HashSet<u64>,
    /// The mailbox's address in the target, on demand.
    mailbox: Option<u64>,
}

/// A root's entry splice.
struct Entry {
    label: String,
    at: RemoteAddr,
    old: Vec<u8>,
    new: Vec<u8>,
}

/// A signal handler's hook ([`Jit::hook_handlers`]): its entry splice, and in module
/// `module`'s room the return sequence a rewritten frame names and the word that says the
/// JIT is in.
struct Hook {
    entry: Entry,
    module: usize,
    back: u64,
    live: u64,
}

/// Why a hook could not be placed: its module's place for hooks has no room left.
const HOOKS_FULL: &str = "its module's place for hooks is full";

/// The place for hooks and sites at the start of each code room, each taking its length
/// rounded up to 64 bytes (a hook about 1.3 KiB, a site's notice 400 bytes: some twenty
/// handlers a module; a program of a user's trial installed sixteen from one executable).
const HOOK_PLACE: u64 = 32 * 1024;

/// What the signal handlers' hooks did ([`Jit::hook_handlers`]).
#[derive(Clone, Debug, Default)]
pub struct SignalStats {
    /// Handlers hooked (by name), and those that could not be (`name: why`).
    pub hooked: Vec<String>,
    pub unhooked: Vec<String>,
    /// Handler entries that asked kerf about a cache address, and those kerf found a clean
    /// point: the frames rewritten (`SIG_MOVED`).
    pub asked: u64,
    pub moved: u64,
    /// Signals that interrupted the cache while kerf was busy with a miss (or not listening):
    /// not asked about, their handlers saw the cache address.
    pub busy: u64,
    /// When the first hook went in, after serving began (a launched program installs its
    /// handlers after the JIT is in: until kerf looks, they see cache addresses).
    pub first_hooked: Option<Duration>,
    /// Of the rewritten frames whose handler returned: back to the cache, sent elsewhere by
    /// their handler and on in the cache there (kerf found or made a translation of the new
    /// PC), and sent elsewhere to go on in the original code.
    pub back: u64,
    pub resumed: u64,
    pub away: u64,
    /// Hooked frames (rewritten, or left with their cache address) whose handler never
    /// returned nor left by a `siglongjmp` kerf saw, where the process ended before kerf
    /// did: the handler left by a jump kerf does not follow (`setcontext`, an exception, a
    /// `siglongjmp` while kerf was not listening), from the original code, as every handler
    /// runs, so its thread went on natively for the rest of its root call, uncounted: an
    /// escape each. (Or its thread ended in it, with nothing after it to count.) Not said
    /// where kerf detached from a process still running: a handler under way then returns
    /// natively anyway.
    pub never_returned: u64,
    /// `siglongjmp`s of the original code that asked kerf (a rewritten frame was in flight in
    /// some thread), the rewritten frames they left, the jumps that stayed in the root call
    /// their frame interrupted and were sent back into the cache, and of those, the ones that
    /// went on in the cache and the ones that found no translation of their target and went
    /// on natively (an escape).
    pub longjmps_asked: u64,
    /// Frames that kept the cache address for their handler (`busy`, or asked about with no
    /// clean point there), marked by the hook, and those whose handler returned.
    pub kept: u64,
    pub kept_back: u64,
    pub left: u64,
    pub left_inside: u64,
    pub reentered: u64,
    pub stranded: u64,
    /// Signal frames of handlers not hooked (or not yet) whose interrupted PC, a clean point,
    /// a flush rewrote to its original: each thread went on natively after its handler (an
    /// escape).
    pub sent_out: u64,
    /// Signal frames whose interrupted PC, a clean point, a flush pointed at the new
    /// translation of its original (their handlers return into the new cache).
    pub put_back: u64,
    /// Handlers' questions answered to go on at once ([`mb::AT_ONCE`]: behind a miss's
    /// ticket), and of those, the ones answered while a flush waited for their frames to go
    /// ([`Jit::answer_signal_questions`]); both of `asked`.
    pub at_once: u64,
    pub asked_in_flushes: u64,
    /// Questions of the hooks (and of `siglongjmp`'s) asked again: counted answered, their
    /// slot no longer held the answer ([`mb::SIG_AGAIN`]).
    pub asked_again: u64,
    /// Times the hooks were looked for again because the caught signals changed or an
    /// `rt_sigaction` was about to install a handler not read before, and looks that failed
    /// (the process could not be stopped).
    pub looks: u64,
    /// Notices of `rt_sigaction`s (in the cache, or glibc's outside it) that asked kerf about
    /// a handler they were about to install (glibc's ask only for one not hooked yet).
    pub noticed: u64,
    pub failed: Vec<String>,
}

/// How long each step of installation took, and the region's size.
#[derive(Clone, Debug, Default)]
pub struct JitStats {
    pub region: Region,
    /// Why the counters have no per-thread slabs (see [`crate::slabs`]), where the plugin
    /// counts and they have none.
    pub no_slabs: Option<&'static str>,
    /// Why a thread whose call-trace ring is full may not wait for room (`sched_yield` and
    /// `nanosleep`, see `kerf_codegen::ring`'s `WAIT`): its seccomp filter's answer to one of
    /// those calls. Its records are then dropped (and counted) at a full ring.
    pub no_waits: Option<String>,
    pub blocks: usize,
    pub code_bytes: u64,
    pub table_entries: usize,
    /// Entries whose set was full (found by the miss path's search of the overflow list),
    /// and those the overflow list had no room for (indirect transfers to them escape).
    pub crowded: usize,
    pub lost: usize,
    /// Return sites among `lost` (see `Table::lost_returns`).
    pub lost_returns: usize,
    pub plan: Duration,
    /// Working out what each module's room asks for, after the plan ([`SpaceSize`]).
    pub sizes: Duration,
    /// The stop that mapped the rooms, the table and the mailbox.
    pub map: Duration,
    pub translate: Duration,
    /// Translations made ahead (a module's may be cut in pieces, see `pieces`).
    pub pieces: usize,
    pub write: Duration,
    /// The stop that spliced the roots.
    pub splice_pause: Duration,
    /// After [`Jit::take_in_threads`]: threads found inside a root call and taken into the cache,
    /// and those found inside one that could not be (standing in code with no translation,
    /// holding a signal for kerf to deliver, or a `gs` base of the program's own) in every
    /// try; they run natively until their root call ends.
    pub taken_in: usize,
    pub not_taken_in: usize,
    /// The longest of the stops that took them in (each try is one).
    pub take_in_pause: Duration,
    /// The roots (module, function) whose frames held the threads taken in.
    pub taken_in_roots: Vec<(usize, FuncId)>,
    /// On demand: misses kerf answered, functions it translated for them, targets it could
    /// not translate (given an escape entry), and the time it took.
    pub asked: u64,
    pub added_functions: usize,
    /// Functions translated ahead because they ran in earlier runs from the same roots (see
    /// [`AnalyzedImage::jit_hint`]); and those of modules mapped after the start, translated
    /// when kerf was idle after the first miss into them.
    pub hinted: usize,
    pub late_hinted: usize,
    pub untranslatable: usize,
    pub serving: Duration,
    /// Of `serving`, the time spent analysing (or loading the cached analyses of) modules
    /// mapped after the start.
    pub late_analysis: Duration,
    /// Modules the program mapped after kerf attached (`dlopen`) that a miss led into: those
    /// kerf analysed and gave room (their functions are then translated on demand as any
    /// module's), and those it did not, as `PATH: why` (their code runs natively, each entry
    /// an escape).
    pub late_modules: Vec<String>,
    pub late_refused: Vec<String>,
    /// Modules with room whose mapping went (`dlclose`), as `PATH`: where anything of one was
    /// translated, kerf took its translations out ([`Jit::retire_gone`], else a flush) so
    /// that nothing mapped there next runs them. `unmap_refused`: why that could not be
    /// done, if it could not (the JIT then ended, see [`Jit::serve`]).
    pub unmapped: Vec<String>,
    pub unmap_refused: Option<String>,
    /// Of `unmapped`, those whose translations were taken out alone, with no flush
    /// ([`Jit::retire_gone`]).
    pub retired: usize,
    /// Of `unmapped`, translated ones that a thread outside the cache unmapped (no notice:
    /// kerf's look every [`UNMAP_LOOK`] found them gone) and where other code was mapped by
    /// then: until kerf looked, a call from the cache to that code may have run the old
    /// module's translation.
    pub unmapped_unseen: Vec<String>,
    /// Roots in libraries the program loaded after the start ([`Jit::wait_for_roots`]), as
    /// `ROOT in PATH`, each time such a library was loaded; and, as `ROOT in PATH: why`, those
    /// found that could not be spliced (a library without the function is not said here).
    pub late_roots: Vec<String>,
    pub late_roots_refused: Vec<String>,
    /// Of the late roots' specs, those whose library the program loaded (the others it did
    /// not load while the JIT was live).
    pub late_roots_seen: Vec<String>,
    /// The `munmap` wrappers made roots of their own ([`with_unmap_roots`]).
    pub unmap_roots: Vec<String>,
    /// Wrappers left out because their first bytes in the target are not the file's (another
    /// tool's patch, or the jump of a kerf killed while it was attached), each with the bytes
    /// found there.
    pub unmap_roots_left: Vec<String>,
    /// Of `late_modules`, with a plugin that writes records (the call trace, lock waits):
    /// translated without them (their functions' calls are not in the trace; the calls they
    /// make into the modules traced are).
    pub late_untraced: Vec<String>,
    /// Under a cache limit: functions whose translation alone needs more room than the limit
    /// gives (`module: function (KiB)`, each once): they run natively, uncounted, every entry
    /// an escape.
    pub too_big: Vec<String>,
    /// Modules whose cached analysis failed its check when a miss first asked for one of
    /// their functions, as `PATH: why` (their code runs natively from then on, each entry
    /// an escape; at install such a module is analysed again instead).
    pub analysis_rejected: Vec<String>,
    /// Jump tables dispatched through a translated copy (`seq::table_dispatch`).
    pub table_copies: usize,
    /// Dispatches through those copies (dispatches through the same table with the same
    /// targets share one).
    pub table_dispatches: usize,
    /// Jumps through a fixed slot translated to go straight on (`seq::slot_guard`).
    pub slot_guards: usize,
    /// Indirect calls translated to look their target up with no frame first
    /// (`seq::fast_call`).
    pub frameless_calls: usize,
    /// Callers' return addresses compared inline by translated `ret`s (`seq::chained_ret`).
    pub chained_returns: usize,
    /// Functions whose translated `ret`s compare the callers an earlier counting run's
    /// counts chose (`Translation::hot_chains`).
    pub hot_chains: usize,
    /// `ret`s translated to look their continuation up with no frame (`seq::fast_ret`).
    pub frameless_returns: usize,
    /// Direct calls that copy their callee in place (`translate`'s `Inline`).
    pub inlined: usize,
    /// Tickets whose target kerf did not find stored within [`SLOT_WAIT`] (their threads
    /// escaped, or their handlers saw the cache address).
    pub slots_unread: u64,
    /// Times kerf, idle or after a batch of answers, found `LISTEN` cleared by a thread whose
    /// wait timed out (misses escaped without asking until it set it again).
    pub timeouts: u64,
    /// When (after serving began) a thread was found under a seccomp filter kerf had not
    /// asked: misses left for the original code from then on ([`SeccompWatch`]; `LISTEN`
    /// stays cleared).
    pub deaf_since: Option<Duration>,
    /// With a cache limit: the most code the cache held at once, and the most that one flush
    /// translated again for where the threads stood (near the limit, each miss flushes);
    /// flushes made, threads a flush left in the original code (each runs the rest of its
    /// root call natively) and those it put back into the new translations, and flushes
    /// given up, with why.
    pub cache_peak: u64,
    pub standing_peak: u64,
    /// Per module: the escapes a flush made itself (a thread waiting in the miss path leaves
    /// through it when it is brought out, then is put back into the new translations), which
    /// the module's escape count holds and the summary takes out of it.
    pub flush_escapes: BTreeMap<usize, u64>,
    pub flushes: u64,
    /// Time the flushes took (every thread stopped for all of it), and the misses answered
    /// with an escape instead of a flush because flushes took most of the last two seconds
    /// ([`THRASH_WINDOW`]).
    pub flush_time: Duration,
    /// The longest flush: the longest pause of the program. (Under load it is most often
    /// the single steps that bring a thread waiting for a miss's answer out of the miss
    /// path, about fifty: 30 us each on a quiet host, up to 180 ms each with the CPUs
    /// busy, so that one flush took 1-7 s where most take 10-30 ms.)
    pub flush_longest: Duration,
    /// Single steps the flushes made to bring threads to clean points.
    pub flush_steps: usize,
    pub thrash_escapes: u64,
    pub flush_moved: usize,
    pub flush_replaced: usize,
    /// Why flushes were refused (each reason once), and how many were.
    pub flush_refused: Vec<String>,
    pub flush_refusals: usize,
    /// The program's signal handlers: hooked so that they see original addresses.
    pub signals: SignalStats,
    /// Modules whose whole-image work came after the cache was live ([`JitOptions::early`]),
    /// and how long after `serve` began it was done (`None`: it was not, before the end).
    pub later: Vec<usize>,
    pub later_done: Option<Duration>,
    /// Set by the caller: from its start to the analyses loaded, and to the cache live.
    pub loaded: Duration,
    pub live: Duration,
}

impl JitStats {
    /// A flush refused, for `why` (kept once).
    fn refuse_flush(&mut self, why: String) {
        self.flush_refusals += 1;
        if !self.flush_refused.contains(&why) {
            self.flush_refused.push(why);
        }
    }
}

/// A JIT installed in a process.
pub struct Jit {
    pid: i32,
    /// This kerf's claim on the process (one kerf per process, DESIGN.md §5): a second kerf
    /// is refused, naming this one, before it changes anything.
    _claim: kerf_os::ptrace::Claim,
    pub caches: Vec<Cache>,
    /// The lookup table (shared with a thread that writes it at install, see [`install`]).
    table: Arc<SharedMem>,
    entries: Vec<Entry>,
    /// The signal handlers' hooks, and the caught signals (`SigCgt`) they were made for.
    hooks: Vec<Hook>,
    caught: Option<u64>,
    /// Handlers a look has read (hooked or not): a translated `rt_sigaction` that installs
    /// one of them again makes kerf look no more.
    handlers_seen: HashSet<u64>,
    /// Handlers the last look found in no module kerf has room for (a library `dlopen`ed
    /// outside the cache): [`Jit::look_and_place`] loads their libraries.
    unplaced: Vec<u64>,
    /// Handlers, with their restorers, that translated `rt_sigaction`s are about to install
    /// (their notices): the next look hooks them with the installed ones, whatever
    /// `SigCgt` says. One stays while a thread stands in its first instructions, or its
    /// library waits to be loaded.
    pending: Vec<(u64, u64)>,
    /// The jumps over the `rt_sigaction`s of the original code in libc and ld.so (see
    /// [`Jit::splice_action_sites`]), and whether they were placed (the first look).
    sites: Vec<Entry>,
    sites_placed: bool,
    /// Whether glibc's `siglongjmp` and `__longjmp_chk` were spliced (among `sites`, once a
    /// handler is hooked: see [`Jit::splice_longjmps`]), and where their hooks' code is, and
    /// in it their landings.
    longjmps_placed: bool,
    longjmp_hooks: Vec<(std::ops::Range<u64>, std::ops::Range<u64>)>,
    /// Where they are ([`Jit::find_action_sites`]).
    action_sites: Option<Vec<(usize, u64)>>,
    /// Roots naming a library not loaded when the JIT went in ([`Jit::wait_for_roots`]):
    /// each library the program loads is looked at for them (the jump over the loader's
    /// debugger hook is among `sites`).
    late_roots: Vec<crate::spec::Spec>,
    /// The loader's debugger hook where install found one ([`JitOptions::late_roots`]): its
    /// module, original address and first five bytes.
    load_hook: Option<(usize, u64, [u8; 5])>,
    /// Modules mapped after the start that were looked at for late roots (by index).
    late_checked: HashSet<usize>,
    /// When kerf began answering misses (and looking for handlers).
    serving_since: Option<Instant>,
    pub stats: JitStats,
    /// The per-thread slabs, where the plugin counts or writes rings and threads can have them, and
    /// their copies' sums as first read after the start or the last flush ([`Jit::word`]).
    slabs: Option<SlabRegion>,
    slab_totals: std::sync::Mutex<Option<crate::slabs::Copies>>,
    /// The threads' seccomp state when kerf asked their filters ([`runtime_calls`]).
    seccomp_asked: kerf_os::process::SeccompLevel,
    /// Modules the JIT analysed itself (the vDSO), numbered after the process's.
    extra: Vec<AnalyzedImage>,
    /// By module: the room reserved near it.
    spaces: Vec<Option<Space>>,
    /// kerf's copy of the table.
    index: Table,
    /// By module: the functions translated.
    done: Vec<HashSet<FuncId>>,
    /// Original block start -> its translation, for linking exits.
    starts: HashMap<u64, u64>,
    /// Original target -> the link words of exits to it not linked yet (cache, word).
    unlinked: HashMap<u64, Vec<(usize, kerf_jit::translate::Link)>>,
    mailbox: Option<SharedMem>,
    /// The plugin's routines' state ([`kerf_jit::Plugin::state_len`]), and the routines'
    /// length (their copy starts each module's code room).
    state: Option<SharedMem>,
    routines_len: u64,
    ctx: Ctx,
    mem: RemoteMem,
    /// Each cache's escapes when kerf stopped answering misses, and of them those that left
    /// without asking ([`kerf_jit::translate::DATA_UNASKED`]).
    live_escapes: Option<Vec<(u64, u64)>>,
    /// The shape of the plugins' rings, if they write records: a module mapped after attach
    /// gets rings of its own when the serving thread is given a [`LateRings`] to name its
    /// functions, else none.
    rings: Option<ring::Shape>,
    /// The cache limit ([`JitOptions::cache_limit`]), the roots' functions, translated
    /// again after each flush, and the code they took the last time.
    limit: Option<u64>,
    root_funcs: Vec<(usize, FuncId)>,
    roots_bytes: u64,
    /// The recent flushes, as (when each ended, how long it took): what the thrash guard
    /// weighs ([`THRASH_WINDOW`]), and the share of it allowed.
    flush_share: f64,
    recent_flushes: std::collections::VecDeque<(Instant, Duration)>,
    /// Modules whose cached analysis failed its check on a miss, with why: never translated.
    refused: HashMap<usize, kerf_analysis::validate::Invalid>,
    /// Modules the program unmapped (`dlclose`): no address is theirs any more (what is mapped
    /// there next is a module of its own, [`Jit::load_late`]).
    gone: HashSet<usize>,
    /// Walks that a miss's answer stopped early ([`ANSWER_BUDGET`]): where each stopped, and
    /// how many more functions of it are still to come when kerf is idle.
    deferred: Vec<(Vec<(usize, FuncId)>, usize)>,
    /// What ran of modules mapped after the start, by their hints ([`Jit::hint_late`]): a
    /// walk from those functions with as many functions as they are, made before the misses
    /// that brought the module in are answered ([`LATE_STEP`] at a time). Made in the
    /// background, a chunk at a time as a miss's rest is, it left the threads missing into the
    /// module meanwhile (python3.11 hashing in four threads: 13 misses into libcrypto every
    /// run).
    late_ahead: Vec<(Vec<(usize, FuncId)>, usize)>,
    /// Every fixed slot a walk read, with its value then (see `Region::slots`): what the
    /// translations' slot guards compare with.
    slots: HashMap<u64, u64>,
    /// Table entries of translations adopted before the cache runs (see `insert_held`).
    held: Vec<TableEntry>,
    /// By module: its whole-image work is still to come ([`JitOptions::early`]): its
    /// translations keep every `ret`'s frame, from functions checked one by one.
    later: Vec<bool>,
    /// When the target started ([`kerf_os::process::start_time`]): a copy forked from it
    /// started since ([`Jit::copies`]).
    started: Option<u64>,
    /// Entries for instructions inside blocks are made when a miss asks for one, not ahead
    /// (on demand: see [`Module::inside_entries`]).
    lazy: bool,
    /// [`JitOptions::fewer_counters`].
    pub fewer_counters: bool,
    /// Under fewer counters with hints, the roots' key the blocks' counts are kept under for
    /// the next run's placement ([`Jit::keep_weights`]).
    weights_key: Option<u64>,
    /// Under fewer counters, the indirect entries misses made into translated blocks
    /// ([`Jit::answer`]): flow that enters there comes from no edge the placement knew, so
    /// each counts its arrivals in words of its own ([`StubCount`]).
    stub_counts: Vec<StubCount>,
    /// Those that could not count (no data room left), by module and original address:
    /// their functions' counts cannot be worked out.
    stub_targets: Vec<(usize, u64)>,
    /// Under fewer counters, where threads came into the cache other than through a way in
    /// (taken in at attach: `+1`) or left it for good (brought out at removal: `-1`), each
    /// flow a placement's graph cannot see ([`Stray`]).
    strays: Vec<Stray>,
    /// Threads whose flow stopped where kerf could not tell (a frame a `siglongjmp` left
    /// whose handler was entered while kerf was busy, with no clean point known).
    strays_unknown: usize,
    /// What this run knows of which functions ran, when it uses and keeps hints.
    hints: Option<Hints>,
}

/// [`kerf_jit::translate::landings`] of `funcs`, where one of them is not `known` to have run
/// (none carries marks otherwise).
fn landings_for(
    cfg: &kerf_analysis::cfg::Cfg,
    funcs: &[FuncId],
    known: &HashSet<FuncId>,
) -> kerf_arch::hash::AddrSet<kerf_arch::ImageAddr> {
    if funcs.iter().all(|f| known.contains(f)) {
        return Default::default();
    }
    kerf_jit::translate::landings(cfg, funcs)
}

/// A run's hints (see [`Jit::keep_hints`]): what they are kept under (a hash of the roots),
/// and per module (the vDSO and modules mapped later included) what is known of it.
struct Hints {
    key: u64,
    modules: Vec<Ran>,
}

/// What a run knows of which functions of one module ran.
#[derive(Clone, Default)]
struct Ran {
    /// Those its hint named: their translations carry no ran mark ([`Scope::marks`]).
    known: HashSet<FuncId>,
    /// Whether it had a hint at all (one that names nothing says that nothing ran).
    read: bool,
    /// Those misses asked into: they ran, however they were entered (marks miss one entered
    /// by a jump from a function translated in a later batch, into a block its own function
    /// also reaches: see `kerf_jit::Marks`).
    asked: BTreeSet<FuncId>,
}

impl Ran {
    /// What module `m`'s hint under `key` says.
    fn read(m: &AnalyzedImage, key: u64) -> Ran {
        let hint = m.jit_hint(key);
        let read = hint.is_some();
        Ran { known: hint.into_iter().flatten().collect(), read, asked: BTreeSet::new() }
    }
}

/// A conditional branch's address, its sides' counts summed over translations, and in how
/// many of them each side's counter was placed ([`Jit::derived_counts`]).
type SideCounts = (u64, [u64; 2], [u32; 2]);

/// A translated block's data words summed over the translations that hold it
/// ([`Jit::block_words`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BlockWords {
    /// Its module and start (a runtime address).
    pub at: (usize, u64),
    /// The function of the first translation that holds it.
    pub func: FuncId,
    /// The sum of its words: its count where it counted, else nothing or a ran mark.
    pub words: u64,
    /// How many translations hold it.
    pub held: u32,
}

/// Block counts derived from counters off a spanning tree ([`Jit::derived_counts`]).
#[derive(Clone, Debug, Default)]
pub struct DerivedCounts {
    /// By place in the blocks handed to [`Jit::derived_counts`].
    pub counts: Vec<(usize, u64)>,
    /// How often the sides of those blocks' conditional branches were taken
    /// (`[taken, not_taken]`), by the same places.
    pub sides: Vec<(usize, [u64; 2])>,
    /// Functions whose counts were derived, their blocks, and the counters they had.
    pub functions: usize,
    pub blocks: usize,
    pub counted_blocks: usize,
    pub counted_sides: usize,
    /// How often their counters ran, and their blocks.
    pub counter_runs: u64,
    pub block_runs: u64,
    /// Functions whose counts could not be derived, and why.
    pub failed: Vec<(String, String)>,
    /// Under `KERF_JIT_TREE_CHECK` (every block counted too): blocks whose counts were
    /// compared, and those that differ (start, counted, worked out).
    pub checked: usize,
    pub mismatched: Vec<(String, u64, u64, u64)>,
    /// Where threads came into the cache or left it other than by a way in or out of a
    /// function's graph, taken into the sums ([`Stray`]), and how many such stops kerf could
    /// not place (each may put a worked-out count off by one).
    pub strays: usize,
    pub strays_unknown: usize,
}

/// An indirect entry a miss made into a translated block under fewer counters, and the
/// words its counter adds its arrivals to (an area of its module's data of its own, retired
/// at a flush as a translation's is).
pub struct StubCount {
    pub module: usize,
    /// The original address it enters at.
    pub target: u64,
    area: Area,
    /// Where in `area` its two words are (the thread's own, then the shared one).
    word: usize,
}

/// A thread that came into the cache, or left it, where no way in or out of a function's
/// flow graph is: taken in at attach at its PC (`amount` 1), or brought out at removal
/// (`amount` -1). `past`: it stood past the plugin's code at `at` (the block's counter, where
/// `at` starts a block).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stray {
    pub at: u64,
    pub past: bool,
    pub amount: i64,
}

/// One function's part of [`Jit::derived_counts`]: why its counts could not be worked out,
/// or its counts (by module and block start) and what it adds to the totals.
enum Worked {
    Failed(String, String),
    Derived {
        blocks: usize,
        counts: Vec<(usize, u64)>,
        sides: Vec<(usize, [u64; 2])>,
        counter_runs: u64,
        block_runs: u64,
        counted_blocks: usize,
        counted_sides: usize,
        checked: usize,
        mismatched: Vec<(String, u64, u64, u64)>,
    },
}

/// The data words of the translations, read many at a time ([`Jit::words`]): the counter
/// slabs' sums looked up once for all of them, where [`Jit::word`] locks them for each. It
/// holds that lock: drop it before anything else reads a word.
pub struct Words<'a> {
    jit: &'a Jit,
    totals: std::sync::MutexGuard<'a, Option<crate::slabs::Copies>>,
}

impl Words<'_> {
    /// [`Jit::word`].
    pub fn get(&self, cache: usize, word: u64) -> u64 {
        let c = &self.jit.caches[cache];
        self.area(&c.data, word - c.data.remote().0)
    }

    /// The word at offset `off` of data area `a`, its copies in the slabs added in.
    fn area(&self, a: &Area, off: u64) -> u64 {
        let copies = match (self.totals.as_ref(), a.shadow, a.is_live()) {
            (Some(totals), Some(shadow), true) => totals.get(shadow + off),
            _ => 0,
        };
        a.load_u64(off as usize).wrapping_add(copies)
    }
}

/// What removal did.
#[derive(Clone, Debug, Default)]
pub struct JitRemoved {
    /// Threads brought back from a cache to the original code, and single-steps it took.
    pub moved: usize,
    pub steps: usize,
    /// Times the target was stopped (more than one when a signal frame held a cache address
    /// at the first: see [`Jit::remove`]).
    pub stops: u32,
    /// Mappings left because a stack may still return into them (a signal frame's saved PC),
    /// and the first such word found.
    pub kept: Vec<(u64, u64)>,
    pub held: Option<HeldBy>,
    /// Processes forked from the target (a daemon's fork, a worker) that ran from the cache
    /// too, taken out of it the same way: their pids, and those that keep kerf's mappings
    /// (a stack may return into them).
    pub copies: Vec<i32>,
    pub copies_kept: usize,
    /// Threads a flush left in a `siglongjmp`'s hook (see [`Jit::bring_back`]).
    pub in_longjmp: Vec<i32>,
    /// Where the flow of each thread brought out stopped, in the order they were moved:
    /// the original address, and whether past the plugin's code there ([`Jit::stopped_at`]).
    pub moved_to: Vec<(u64, bool)>,
}

/// A word on a thread's stack that kept the code cache mapped at removal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldBy {
    pub tid: i32,
    /// Where the word is, and the cache address it holds.
    pub at: u64,
    pub pc: u64,
    /// The original address of the clean point at that cache address, or of the one before
    /// it (the instruction whose glue it lies in).
    pub original: Option<u64>,
}

/// A live signal frame that keeps an address of the caches ([`Jit::signal_frames`]).
struct HeldFrame {
    held: HeldBy,
    kind: FrameKind,
}

enum FrameKind {
    /// The kernel's frame of a handler kerf did not hook (or not yet), its interrupted PC at
    /// `held.at`: the original that PC stands for if it is a clean point, and whether the
    /// thread stood at the copied instruction (any plugin code for it run) rather than before
    /// that code.
    Saved { clean: Option<(u64, bool)> },
    /// A frame a hook rewrote, its `ucontext` at `uc`: the cache address it keeps (which the
    /// hook's return puts back), the original it wrote, the program's restorer.
    Hooked { uc: u64, cache: u64, orig: u64, restorer: u64 },
}

impl HeldFrame {
    /// A kernel frame whose PC is no clean point: nothing can stand for it.
    fn unclean(&self) -> bool {
        matches!(self.kind, FrameKind::Saved { clean: None })
    }
}

/// A frame [`Jit::unhold_frames`] rewrote before a flush: where its words are, the original
/// address, and how the thread stood there ([`FrameKind::Saved`]); after the flush it gets
/// the new translation's address if there is one.
struct Unheld {
    /// The thread whose stack holds the frame.
    tid: i32,
    at: u64,
    orig: u64,
    at_insn: bool,
    /// For a hooked frame: its `ucontext` and restorer.
    hooked: Option<(u64, u64)>,
}

/// How the plugins' code tells threads apart. `mov r, fs:[0]` (the TLS ABI's self pointer,
/// which glibc and musl keep in the first word of every thread's control block) when every
/// thread has a thread pointer and the main thread's (`owner`) points to itself: much
/// cheaper than `rdfsbase` (a block counter with it took sqlite3 from 2.9 s under the cache
/// alone to 7.2 s; with `fs:[0]`, and its lock path out of line, to 4.9 s). It would fault
/// in a thread with no thread pointer (fs base 0), which no thread library makes: such a
/// thread at attach, or a self pointer that is not one, and kerf uses `rdfsbase` where the
/// kernel allows it (`fsgsbase`), never faulting.
fn thread_pointer(
    tr: &Tracee,
    owner: u64,
    fsgsbase: bool,
    word: &dyn Fn(u64) -> Option<u64>,
) -> ThreadPointer {
    let every_thread = tr.threads().iter().all(|&t| tr.regs(t).is_ok_and(|r| r.fs_base != 0));
    let points_to_itself = owner != 0 && word(owner) == Some(owner);
    if (every_thread && points_to_itself) || !fsgsbase {
        ThreadPointer::FsSelf
    } else {
        ThreadPointer::FsBase
    }
}

/// Address `a` of process `pid` as `file+0xoffset` (the file offset its mapping gives), or
/// bare where no file maps it.
fn mapped_name(pid: i32, a: u64) -> String {
    let maps = kerf_os::process::Process::open(pid).and_then(|p| p.maps()).unwrap_or_default();
    let m = maps.iter().find(|m| m.contains(RemoteAddr(a)));
    match m.and_then(|m| Some((m, m.path.as_deref()?))) {
        Some((m, path)) if path.starts_with('/') => {
            let file = path.rsplit('/').next().unwrap_or(path);
            format!("{file}+{:#x}", a - m.start.0 + m.offset)
        }
        _ => format!("{a:#x}"),
    }
}

/// Why the plugin's counters get no per-thread slabs ([`crate::slabs`]) in the stopped
/// process, if they cannot: the kernel must let a thread write its own `gs` base
/// (`FSGSBASE`, `hwcap2` bit 1), the code must read a thread's id (glibc's, by a thread
/// pointer that points to itself), and no thread may use its `gs` base already (a program's
/// own use, or slabs a killed kerf left: a kerf that detaches clears them).
/// `KERF_JIT_NO_SLABS` turns them off (to compare).
fn why_no_slabs(
    tr: &Tracee,
    hwcap2: u64,
    tid: Option<u32>,
    thread: ThreadPointer,
) -> Option<&'static str> {
    if std::env::var_os("KERF_JIT_NO_SLABS").is_some() {
        Some("KERF_JIT_NO_SLABS is set")
    } else if hwcap2 & 2 == 0 {
        Some("the kernel does not let threads set their gs base (no FSGSBASE)")
    } else if !bmi2() {
        // The thread gates tell a gs base of the program's own with `shrx`.
        Some("the CPU has no BMI2")
    } else if tid.is_none() || thread != ThreadPointer::FsSelf {
        Some("no glibc thread id to read")
    } else if tr.threads().iter().any(|&t| tr.regs(t).map_or(true, |r| r.gs_base != 0)) {
        Some("a thread already has a gs base")
    } else {
        None
    }
}

/// Whether the translated code may use BMI2 (`rorx`, `shrx`): the CPU has it (kerf runs on
/// the target's machine: its CPU's features are the target's), and `KERF_JIT_NO_BMI2` does
/// not ask for the code made for CPUs without it (so that a test runs that code here).
fn bmi2() -> bool {
    std::arch::is_x86_feature_detected!("bmi2") && std::env::var_os("KERF_JIT_NO_BMI2").is_none()
}

/// The lookup table's set bits for a walk of `walk` blocks in modules of `all`
/// ([`kerf_jit::table::set_bits_for`]; `KERF_JIT_SET_BITS`, for the tests and benchmarks,
/// within the same bounds).
fn set_bits(walk: usize, all: usize) -> u32 {
    use kerf_jit::table::{set_bits_for, MAX_SET_BITS, MIN_SET_BITS};
    let asked = std::env::var("KERF_JIT_SET_BITS").ok().and_then(|v| v.parse::<u32>().ok());
    asked.map_or_else(|| set_bits_for(walk, all), |b| b.clamp(MIN_SET_BITS, MAX_SET_BITS))
}

/// Bytes of code room and data area a module's space asks for: `full` for every function
/// it may translate, `small` where the address space near the module has no gap that big.
#[derive(Clone, Copy, Debug)]
struct SpaceSize {
    full: (u64, u64),
    small: (u64, u64),
}

/// The [`SpaceSize`] of module `module` whose every function asks for `full`, `ahead` of
/// them translated ahead: room for every function of the module; where the address space
/// near it has no gap that big (a 100 MB library asks for 600 MB), room for what is
/// translated ahead and as much again: later misses that find no room escape, counted.
/// Worked out before the threads are stopped.
fn space_size(
    full: (u64, u64),
    module: &Module<'_>,
    ahead: &[FuncId],
    plugin: &dyn Plugin,
) -> SpaceSize {
    let few = space_wanted(module, ahead, plugin);
    SpaceSize { full, small: (full.0.min(2 * few.0), full.1.min(2 * few.1)) }
}

/// The code room and data area `funcs` of `module` ask for (and what each further piece of
/// the translation ahead needs of its own, see `pieces`).
fn space_wanted(module: &Module<'_>, funcs: &[FuncId], plugin: &dyn Plugin) -> (u64, u64) {
    let more = MOST_PIECES.saturating_sub(1) as u64;
    let (piece, piece_data) =
        (kerf_jit::room_for(module, &[], plugin), kerf_jit::data_for(module, &[]));
    let code = room_side_by_side(module, funcs, plugin) + STUB_ROOM + more * piece + HOOK_PLACE;
    (code, THREADS_LEN + kerf_jit::data_for(module, funcs) + STUB_ROOM + more * piece_data)
}

/// [`space_wanted`] of all `n` functions of `image` (`module`, as the translator reads it),
/// kept beside its cache entry for the next run with the same options ([`room_options`]):
/// sizing every function of python3.11 took 10 ms of each start on two cores, before the
/// threads stop.
fn whole_module_size(
    image: &AnalyzedImage,
    module: &Module<'_>,
    n: u32,
    plugin: &dyn Plugin,
) -> (u64, u64) {
    let every = || (0..n).map(FuncId).collect::<Vec<_>>();
    let Some(options) = room_options(module, plugin) else {
        return space_wanted(module, &every(), plugin);
    };
    if let Some(kept) = image.jit_room(options) {
        return kept;
    }
    let full = space_wanted(module, &every(), plugin);
    image.keep_jit_room(options, full);
    full
}

/// What [`space_wanted`] of a module depends on besides its analysis, hashed: kerf's build
/// (its bounds are kerf's code), the plugin's room and the translation options that change
/// a function's room. `None` when kerf has no build-id: nothing is kept then.
fn room_options(m: &Module<'_>, plugin: &dyn Plugin) -> Option<u64> {
    let build = crate::cache::kerf_build()?;
    let words = [
        plugin.room(),
        plugin.call_room(),
        plugin.routines().len() as u64,
        plugin.exits() as u64,
        plugin.every_edge() as u64,
        m.inline as u64,
        m.returns.is_some() as u64,
        m.chains as u64,
        m.tables as u64,
    ];
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    Some(crate::cache::fnv64(&[build, &bytes]))
}

/// [`kerf_jit::room_for`] of `funcs`, in chunks side by side (every function of python3.11,
/// 222 k blocks, took 8 ms on one core at every start).
fn room_side_by_side(module: &Module<'_>, funcs: &[FuncId], plugin: &dyn Plugin) -> u64 {
    use rayon::prelude::*;
    let here: kerf_arch::hash::AddrSet<FuncId> = funcs.iter().copied().collect();
    let within = |g: FuncId| here.contains(&g);
    let parts = (funcs.par_chunks(1024))
        .map(|c| kerf_jit::room_parts(module, c, &within, plugin))
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    kerf_jit::room_total(plugin, parts)
}

/// Map module `m`'s room with every thread of the process stopped (`tr`): code within a
/// rel32 of every byte of the module, sized as `size` says (its `small` size where the
/// address space near it has no gap for the `full` one), a data area beside it, the
/// plugin's rings far away, and the plugin's routines copied to the start of the code room.
/// What it mapped before a failure is unmapped again.
fn map_space(
    tr: &mut Tracee,
    m: &AnalyzedImage,
    size: SpaceSize,
    plugin: &dyn Plugin,
    rings: Option<ring::Shape>,
) -> Result<Space, TargetError> {
    let (lo, hi) = span(m);
    let window_lo = RemoteAddr(hi.saturating_sub(REACH));
    let window_hi = RemoteAddr(lo.saturating_add(REACH));
    let SpaceSize { full, small } = size;
    let mut got = None;
    for (room, data_len) in [full, small] {
        match tr.share_within(window_lo, window_hi, RemoteAddr(hi), room, PROT_RX) {
            Ok(code) => {
                got = Some((code, room, data_len));
                break;
            }
            Err(e) if room == small.0 => return Err(e),
            Err(_) => {}
        }
    }
    let Some((code_mem, room, data_len)) = got else { unreachable!("the smaller room returns") };
    let code = code_mem.remote();
    let data = match tr.share_near(code, data_len, data_len) {
        Ok(d) => Arc::new(d),
        Err(e) => {
            let _ = tr.free(code, room);
            return Err(e);
        }
    };
    // The rings are addressed by 64-bit immediates: anywhere, and away from the
    // modules (a gigabyte of them near each would take the room later caches and data
    // areas need within a rel32 of their module).
    let rw = libc::PROT_READ | libc::PROT_WRITE;
    let (lo, hi) = (RemoteAddr(1 << 32), RemoteAddr(0x7fff_0000_0000));
    let far = |s| tr.share_within(lo, hi, RemoteAddr(RINGS_NEAR), ring::thread_rings_len(s), rw);
    let rings = match rings.map(far) {
        None => None,
        Some(Ok(r)) => Some(Arc::new(r)),
        Some(Err(e)) => {
            let _ = tr.free(code, room);
            let _ = tr.free(data.remote(), data.len() as u64);
            return Err(e);
        }
    };
    let data_used = THREADS_LEN;
    // The plugin's routines first (before anything can run in the room).
    let routines = plugin.routines();
    let hook_next = (routines.len() as u64).next_multiple_of(64);
    let used = hook_next + HOOK_PLACE;
    code_mem.write_bytes(0, routines);
    let at = if routines.is_empty() { 0 } else { code.0 };
    Ok(Space {
        code,
        code_mem,
        room,
        hook_next,
        hook_end: used,
        used,
        start: used,
        gaps: 0,
        data,
        data_used,
        rings,
        routines: at,
        shadow: None,
        ring_word: None,
        load_hook: None,
    })
}

/// The clean points for original address `orig` inside the copy of its block in translation
/// `t` (from the block's start to the next block's, or to the end of the blocks): the first
/// (before any plugin code for `orig`) and the last (the copied instruction). A plugin's code
/// placed apart from the blocks (a branch side's counter) is not among them.
fn clean_points(t: &Translation, orig: u64) -> Option<(u64, u64)> {
    let i = t.blocks.partition_point(|b| b.start <= orig).checked_sub(1)?;
    let lo = t.blocks[i].cache;
    let hi = t.blocks.iter().map(|b| b.cache).filter(|&c| c > lo).min().unwrap_or(t.blocks_end);
    let mut pcs = t.clean.range(lo..hi).filter(|&(_, &o)| o == orig).map(|(&pc, _)| pc);
    let first = pcs.next()?;
    Some((first, pcs.next_back().unwrap_or(first)))
}

/// Bytes of a stack a flush looks through for the frames of a thread it brings out.
const FRAME_SCAN: usize = 256 * 1024;

/// How far above a `siglongjmp`'s stack pointer kerf looks for the rewritten frames it leaves
/// ([`Jit::longjmp_out`]).
const LONGJMP_SCAN: u64 = 64 * 1024;

/// The words of the target's memory from `from` towards `to` (8-byte aligned), as far as they
/// read, a page at a time.
fn read_words(mem: &RemoteMem, from: u64, to: u64) -> Vec<u64> {
    const PAGE: u64 = 4096;
    let mut bytes = Vec::new();
    let mut at = from;
    while at < to {
        let n = (PAGE - at % PAGE).min(to - at) as usize;
        let mut page = vec![0u8; n];
        if mem.read(RemoteAddr(at), &mut page).is_err() {
            break;
        }
        bytes.extend(page);
        at += n as u64;
    }
    bytes.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

/// Bytes of each stack (above its stack pointer) searched for signal frames that keep a cache
/// address ([`Jit::signal_frames`]).
const SIGNAL_SCAN: usize = 64 * 1024;

/// Whether module `m`'s file is still mapped at the start of each of its executable segments
/// (by path, as the maps name it), with the offset it had there.
fn still_mapped(m: &AnalyzedImage, maps: &[kerf_analysis::image::maps::Mapping]) -> bool {
    let bias = m.bias.unwrap_or(0);
    let path = m.path.to_string_lossy();
    // (A file replaced on disk while mapped is still the code that was read.)
    let named = |p: &str| p.strip_suffix(" (deleted)").unwrap_or(p) == path;
    m.segments.iter().filter(|s| s.executable).all(|s| {
        let a = RemoteAddr(s.vaddr.0 + bias);
        maps.iter().any(|p| {
            p.start <= a
                && a < p.end
                && p.exec
                && p.path.as_deref().is_some_and(named)
                && p.offset + (a.0 - p.start.0) == s.file_offset
        })
    })
}

/// The span `[lo, hi)` of original addresses a module occupies.
fn span(m: &AnalyzedImage) -> (u64, u64) {
    let bias = m.bias.unwrap_or(0);
    let lo = m.segments.iter().map(|s| s.vaddr.0).min().unwrap_or(0);
    let hi = m.segments.iter().map(|s| s.vaddr.0 + s.memsz).max().unwrap_or(0);
    (lo + bias, hi + bias)
}

/// The translator's view of `images`; a module whose whole-image work comes later
/// (`later[k]`, see [`JitOptions::early`]) has every `ret` keep its frame meanwhile. With
/// `lazy` (on demand), instructions inside blocks get table entries only when a miss asks
/// for one ([`Jit::answer`]), not ahead (see [`Module::inside_entries`]). With `copies`,
/// small callees are copied in place of their calls ([`Module::inline`]); not under a cache
/// limit, whose room they would spend on speed (the working set of the cache-limit test
/// grew past its limit with them).
fn modules_of<'a>(
    images: &[&'a AnalyzedImage],
    later: &[bool],
    lazy: bool,
    copies: bool,
    counting: bool,
) -> Vec<Module<'a>> {
    images
        .iter()
        .enumerate()
        .map(|(k, &m)| Module {
            cfg: &m.analysis.cfg,
            mem: m,
            bias: m.bias.unwrap_or(0),
            // `KERF_JIT_FRAME_RETS`: every `ret` with a frame, as before frameless returns
            // (for benchmarks that compare the two).
            returns: (std::env::var_os("KERF_JIT_FRAME_RETS").is_none()
                && !later.get(k).copied().unwrap_or(false))
            .then_some(&m.returns),
            // `KERF_JIT_LOOKUP_TABLES`: every jump table through the lookup, as before table
            // copies (for benchmarks that compare the two).
            tables: std::env::var_os("KERF_JIT_LOOKUP_TABLES").is_none(),
            // `KERF_JIT_SLOT_LOOKUP`: every jump through a fixed slot through the lookup, as
            // before slot guards (for benchmarks that compare the two).
            guards: std::env::var_os("KERF_JIT_SLOT_LOOKUP").is_none(),
            // `KERF_JIT_FRAMED_CALLS`: every indirect call through the framed probe, as
            // before frameless ones (for benchmarks that compare the two).
            fast_calls: std::env::var_os("KERF_JIT_FRAMED_CALLS").is_none(),
            // `KERF_JIT_NO_CHAINS`: every frameless `ret` straight to the table, as before
            // chained returns; `KERF_JIT_CHAIN_CALLERS=N`: chains up to N callers long (for
            // benchmarks that compare them).
            chains: match std::env::var_os("KERF_JIT_NO_CHAINS") {
                Some(_) => 0,
                // (At most 8: each caller adds 34 bytes of room to every `ret`'s block.)
                None => std::env::var("KERF_JIT_CHAIN_CALLERS")
                    .ok()
                    .and_then(|v| v.parse::<usize>().ok())
                    .map_or(kerf_jit::translate::CHAIN_CALLERS, |n| n.min(8)),
            },
            // `KERF_JIT_FRAMED_PARTS`: the `ret`s of parts split off other functions with
            // their frames, as before they were known to return for their parents (for
            // benchmarks that compare the two).
            parts: std::env::var_os("KERF_JIT_FRAMED_PARTS").is_none(),
            inside_entries: !lazy,
            // `KERF_JIT_INLINE_INSNS`: the most instructions a call copies in its place (0:
            // none, as before inlined calls, for benchmarks that compare the two).
            inline: if copies {
                std::env::var("KERF_JIT_INLINE_INSNS")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(INLINE_INSNS)
            } else {
                0
            },
            // `KERF_JIT_ICED_ENCODER`: laid out by iced's block encoder, as before kerf's own
            // (for benchmarks that compare the two).
            iced: std::env::var_os("KERF_JIT_ICED_ENCODER").is_some(),
            // (A module mapped after the start: with no weights.)
            counting: counting.then(|| m.counting.get_or_init(|| counting_facts(m, &[]))),
            // `KERF_JIT_NO_PROFILE`: no chains from an earlier run's counts (for benchmarks
            // that compare).
            profile: m.profile.get().filter(|_| std::env::var_os("KERF_JIT_NO_PROFILE").is_none()),
        })
        .collect()
}

/// What fewer counters need of image `m` ([`kerf_jit::counters::facts_of`] its shape, kept
/// beside its analysis: [`AnalyzedImage::counting_shape`]), with the weights of an earlier
/// run. `KERF_JIT_TREE_CHECK`: every block counts all the same, and the
/// counts worked out are checked against them (`Jit::derived_counts`).
fn counting_facts(
    m: &AnalyzedImage,
    weights: &[kerf_jit::counters::Ran],
) -> kerf_jit::counters::ModuleFacts {
    let check = std::env::var_os("KERF_JIT_TREE_CHECK").is_some();
    kerf_jit::counters::facts_of(&m.counting_shape(), check, weights)
}

/// The process's vDSO, analysed from its memory: libc calls `clock_gettime` and friends
/// there through pointers, and a call that left the cache for it would not come back.
fn vdso_image(pid: i32, mem: &RemoteMem) -> Option<AnalyzedImage> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let line = maps.lines().find(|l| l.ends_with("[vdso]"))?;
    let (lo, hi) = line.split_whitespace().next()?.split_once('-')?;
    let (lo, hi) = (u64::from_str_radix(lo, 16).ok()?, u64::from_str_radix(hi, 16).ok()?);
    let mut bytes = vec![0u8; usize::try_from(hi.checked_sub(lo)?).ok()?];
    mem.read(RemoteAddr(lo), &mut bytes).ok()?;
    let mut m = crate::load::analyze_bytes("[vdso]", bytes).ok()?;
    let first = m.segments.iter().map(|s| s.vaddr.0).min()?;
    m.bias = Some(lo - first);
    Some(m)
}

/// Before anything is translated from a module whose analysis came from the cache (DESIGN
/// §5: the cache is untrusted input), every function of it is checked against its image
/// ([`AnalyzedImage::check_all_code`]): the translator reads the blocks, edges, tables and
/// live registers of the functions it copies, and where a `ret` may leave without a frame
/// rests on every function's blocks (the liveness at its callers' return sites, callers'
/// callers, and so on). Per-function checks as splicing makes them would not cover that.
/// A module whose whole-image work comes later (`later[k]`), translated with every `ret`
/// keeping its frame until then, needs only those: `funcs` and what their liveness rests
/// on (their callees, transitively; [`AnalyzedImage::check_functions`]).
fn check_funcs(m: &AnalyzedImage, funcs: &[FuncId], later: bool) -> Result<(), Invalid> {
    if later {
        m.check_functions(funcs)
    } else {
        m.check_all_code()
    }
}

/// What the threads' seccomp filters let the cache's own code do ([`runtime_calls`]).
struct RuntimeCalls {
    /// Why a thread whose call-trace ring is full may not wait for room, if it may not.
    no_waits: Option<String>,
    /// Whether the thread table may tell threads by their ids: its first lookup in a thread
    /// calls getpid and, for a slot whose owner may be gone, tgkill (as `kerf count` does
    /// only where no thread runs under seccomp).
    thread_ids: bool,
}

/// Whether every thread's seccomp state lets the cache's own system calls run, asked of the
/// stopped threads with the calls' real arguments (`ip` a code room's address): a miss's
/// futex wake and wait on the mailbox at `mailbox` (on demand), refused with
/// [`TargetError::Seccomp`] unless allowed; the `sched_yield` and `nanosleep` of a thread
/// waiting for room in a full call-trace ring, without which full rings drop (the sleep's
/// time is on the thread's stack, its address not known here: asked with 0); the thread
/// table's getpid and tgkill, without which it keys on thread pointers alone. Threads made
/// later inherit their creator's filters; one a thread installs after this is noticed by
/// [`SeccompWatch`].
fn runtime_calls(
    tr: &mut Tracee,
    ip: u64,
    mailbox: Option<u64>,
) -> Result<RuntimeCalls, TargetError> {
    use kerf_codegen::templates::{SYS_GETPID, SYS_NANOSLEEP, SYS_SCHED_YIELD, SYS_TGKILL};
    use kerf_os::seccomp::Call;
    let call =
        |nr: u32, args: [u64; 3]| Call { nr, ip, args: [args[0], args[1], args[2], 0, 0, 0] };
    let futex = |word: u64, op: u32, timeout: u64| Call {
        args: [word, op.into(), 0, timeout, 0, 0],
        ..call(mb::SYS_FUTEX, [0; 3])
    };
    let mut must = Vec::new();
    if let Some(m) = mailbox {
        must.push(futex(m + mb::POSTED, mb::FUTEX_WAKE, 0));
        must.push(futex(m + mb::ANSWERED, mb::FUTEX_WAIT, m + mb::TIMEOUT));
    }
    let waits = [("sched_yield", SYS_SCHED_YIELD), ("nanosleep", SYS_NANOSLEEP)];
    let mut r = RuntimeCalls { no_waits: None, thread_ids: true };
    let pid = tr.pid();
    for tid in tr.threads().to_vec() {
        for c in &must {
            let action = tr.seccomp_verdict(tid, c)?;
            if !action.allows() {
                return Err(TargetError::Seccomp { pid, tid, nr: c.nr.into(), action });
            }
        }
        for (name, nr) in waits {
            let action = tr.seccomp_verdict(tid, &call(nr, [0; 3]))?;
            if !action.allows() && r.no_waits.is_none() {
                r.no_waits =
                    Some(format!("thread {tid}'s seccomp filter answers {name} with \"{action}\""));
            }
        }
        // (A tgkill with signal 0 at a thread of this process: is it there?)
        let ids = [call(SYS_GETPID, [0; 3]), call(SYS_TGKILL, [pid as u64, tid as u64, 0])];
        for c in &ids {
            r.thread_ids &= tr.seccomp_verdict(tid, c)?.allows();
        }
    }
    Ok(r)
}

/// How often [`SeccompWatch`] looks.
const SECCOMP_POLL: Duration = Duration::from_millis(200);

/// Notices a seccomp filter a thread installs after kerf asked the threads' filters
/// ([`runtime_calls`]), as a launched program that sandboxes itself at its start does. kerf
/// cannot ask a filter without stopping the process, so from then on the cache's own system
/// calls stop: misses leave for the original code instead of waiting on a futex, full
/// call-trace rings drop instead of waiting. It looks every [`SECCOMP_POLL`] at most (a
/// thread that installs a filter and misses within that time is not covered).
pub struct SeccompWatch {
    pid: i32,
    asked: kerf_os::process::SeccompLevel,
    began: Instant,
    next: Instant,
    /// When a new filter was first seen, after `began`.
    pub since: Option<Duration>,
}

impl SeccompWatch {
    /// Whether a thread runs under a filter kerf did not ask (sticky once seen).
    pub fn changed(&mut self) -> bool {
        let now = Instant::now();
        if self.since.is_none() && now >= self.next {
            self.next = now + SECCOMP_POLL;
            let level = kerf_os::process::seccomp_level(&kerf_os::process::RealSys, self.pid);
            if level.is_some_and(|l| l != self.asked) {
                self.since = Some(now - self.began);
            }
        }
        self.since.is_some()
    }
}

/// Blocks from which a module's whole-image work waits until the cache is live when
/// attaching ([`JitOptions::early`]): libLLVM-14 has 2.8 million (its whole check about
/// 0.9 s on two cores, the liveness where its returns land 0.5 s), python3.11 and libc
/// under half a million. `KERF_JIT_LATER_BLOCKS` sets it (the tests, with small fixtures).
fn later_blocks() -> usize {
    const LATER_BLOCKS: usize = 1 << 20;
    size_from_env("KERF_JIT_LATER_BLOCKS", LATER_BLOCKS)
}

/// Functions of the walk translated before the cache goes live when a module's whole-image
/// work is left for later ([`later_blocks`]): the rest follows while the program runs.
/// `KERF_JIT_EARLY_AHEAD` sets it (the tests, with small fixtures).
fn early_ahead() -> usize {
    const EARLY_AHEAD: usize = 512;
    size_from_env("KERF_JIT_EARLY_AHEAD", EARLY_AHEAD)
}

/// The most instructions of a callee (and the functions it tail-calls) a direct call copies
/// in its place ([`Module::inline`]).
const INLINE_INSNS: u32 = 48;

/// A positive number from environment variable `name` (the tests' way to make kerf's size
/// bounds fit their small fixtures), else `default`.
fn size_from_env(name: &str, default: usize) -> usize {
    let set = std::env::var(name).ok().and_then(|v| v.parse().ok());
    set.filter(|&n: &usize| n > 0).unwrap_or(default)
}

/// What a JIT's hints are kept under ([`AnalyzedImage::jit_hint`]): a hash of its roots,
/// each as its image's digest and its entry; `None` when a root's image has no cache entry.
fn roots_key(images: &[&AnalyzedImage], roots: &[Root]) -> Option<u64> {
    let mut named: Vec<([u8; 32], u64)> = (roots.iter())
        .map(|r| {
            let m = images[r.module];
            Some((m.cache_digest()?, m.analysis.cfg.function(r.func).entry.0))
        })
        .collect::<Option<_>>()?;
    named.sort();
    named.dedup();
    let bytes: Vec<u8> =
        named.iter().flat_map(|(d, e)| d.iter().copied().chain(e.to_le_bytes())).collect();
    Some(crate::cache::fnv64(&[&bytes]))
}

/// The region of a run with hints of what ran (per module in `ran`): the roots `starts` and
/// the functions known to have run, and (the walk from them) what they reach in modules with
/// no hint, within `budget`; and how many hinted functions it holds. `None` (plan from the
/// walk) when a root's module has no hint, or no function ran. What else a run needs comes
/// on demand, marked, and joins the hint.
fn ran_region(
    mods: &[Module<'_>],
    starts: &[(usize, FuncId)],
    ran: &[Ran],
    slot: &dyn Fn(u64) -> Option<u64>,
    budget: usize,
) -> Option<(Region, usize)> {
    if !starts.iter().all(|&(k, _)| ran[k].read) || ran.iter().all(|r| r.known.is_empty()) {
        return None;
    }
    let mut from: Vec<(usize, FuncId)> = (ran.iter().enumerate())
        .flat_map(|(k, r)| r.known.iter().map(move |&f| (k, f)))
        .filter(|f| !starts.contains(f))
        .collect();
    // (In order: the budget may cut the walk.)
    from.sort_unstable();
    from.splice(0..0, starts.iter().copied());
    let out = |k: usize, f: FuncId| {
        ran[k].read && !ran[k].known.contains(&f) && !starts.contains(&(k, f))
    };
    let region = closure(mods, &from, slot, budget, false, &out);
    let hinted = (region.funcs.iter().enumerate())
        .map(|(k, fs)| fs.iter().filter(|f| ran[k].known.contains(f)).count())
        .sum();
    Some((region, hinted))
}

fn check_region(
    images: &[&AnalyzedImage],
    region: &kerf_jit::Region,
    later: &[bool],
) -> Result<(), JitFail> {
    for (k, funcs) in region.funcs.iter().enumerate() {
        if funcs.is_empty() {
            continue;
        }
        check_funcs(images[k], funcs, later[k]).map_err(|detail| JitFail::Analysis {
            module: k,
            path: images[k].path.clone(),
            detail,
        })?;
    }
    Ok(())
}

/// What the per-thread counter slabs saw ([`Jit::slab_use`]): threads that claimed one, those
/// that shared the last with another (their counts may have lost updates), slabs taken back
/// from threads that ended ([`SlabRegion::reclaim`]), and the region's bytes of address space
/// in the target.
#[derive(Clone, Copy, Debug)]
pub struct SlabUse {
    pub threads: u64,
    pub shared: u64,
    pub reclaimed: u64,
    pub bytes: u64,
    /// Times a thread met a gate with a `gs` base of the program's own and left the cache
    /// (`kerf_jit::x86_64::thread_gate`), in the caches live now.
    pub program_gs: u64,
}

/// kerf's beat in the mailbox ([`mb::ALIVE`]): well within one wait of a thread
/// ([`mb::WAIT_NS`]).
const KEEP_WAITING: Duration = Duration::from_millis(50);
/// How often kerf, idle, looks for counter slabs of threads that ended.
const RECLAIM: Duration = Duration::from_millis(50);
/// How often kerf, idle, looks for modules unmapped by a thread outside the cache (one read
/// of the process's maps): a thread in the cache that unmaps one asks at once.
const UNMAP_LOOK: Duration = Duration::from_millis(100);
/// How long kerf waits for a thread that took a ticket to store its target (see
/// `answer_misses`): past it the thread's miss escapes (`slots_unread`). At 2 ms, a thread
/// preempted between the two on a busy host (two CPUs, the suite running) escaped once in a
/// while, to a page-aligned target kerf never saw (a library's code just loaded); only a
/// thread killed in those two instructions makes kerf wait this long.
const SLOT_WAIT: Duration = Duration::from_millis(100);
/// How often kerf reads the caught signals (`SigCgt`) to hook handlers the program installed
/// since ([`Jit::look_for_handlers`]): one small /proc read. At 100 ms, a launched program's
/// handler that decides by the PC saw cache addresses for its first 3,000 faults.
const HANDLER_LOOK: Duration = Duration::from_millis(10);

/// Where the lookup table goes if it fits: the range of addresses below 2 GiB, above the
/// first 16 MiB (a non-PIE executable's text and heap start low), its end a 32-bit displacement.
const LOW_TABLE: (u64, u64) = (16 << 20, (1 << 31) - (1 << 20));

/// Install a JIT for `roots` in process `pid` (whose modules are `images`), weaving in
/// `plugin`. The process may be running; it is stopped twice, briefly: to map the caches,
/// and to splice the roots.
pub fn install(
    pid: i32,
    images: &[AnalyzedImage],
    roots: &[Root],
    plugin: &dyn Plugin,
    opts: JitOptions,
) -> Result<Jit, JitFail> {
    let t0 = Instant::now();
    let claim = kerf_os::ptrace::claim(pid)?;
    let mem: RemoteMem = {
        let tr = Tracee::stop_all(pid)?;
        let m = tr.memory();
        tr.resume_detach()?;
        m
    };
    // Where a thread keeps its id (glibc's libc): the plugins tell the owner of the block
    // words by it (see `Layout::owner_tid`).
    let tid_offset = crate::instrument::glibc_tid_offset(images);
    let extra: Vec<AnalyzedImage> = vdso_image(pid, &mem).into_iter().collect();
    let all: Vec<&AnalyzedImage> = images.iter().chain(&extra).collect();
    let images = &all[..];
    // Fewer counters: each module's facts, with how often its blocks ran in the last run from
    // these roots that counted them (where hints are used), before anything is translated.
    // The same counts serve every plugin as a profile: which callers' return addresses a
    // `ret` compares first (`Module::profile`).
    // (Beside the walk and the hint below, which read neither: python3.11's facts took 8 ms
    // before anything else of the plan could begin, on one core.)
    let profile_key = opts.hints.then(|| roots_key(images, roots)).flatten();
    let weights_key = profile_key.filter(|_| opts.fewer_counters);
    let facts = || {
        use rayon::prelude::*;
        images.par_iter().for_each(|m| {
            let weights = profile_key.and_then(|k| m.jit_weights(k)).unwrap_or_default();
            let _ = m.profile.set(weights.iter().map(|r| (r.start, r.count)).collect());
            if opts.fewer_counters {
                let _ = m.counting.set(counting_facts(m, &weights));
            }
        });
    };
    // (No counting facts and no profile in these: the walk, the hint and the roots read
    // neither, and the modules the translation uses are made again below.)
    let mods = modules_of(images, &[], opts.on_demand, opts.cache_limit.is_none(), false);
    // The hints are kept under the roots the user named.
    let user_roots = roots;
    let live = |a: u64, b: &mut [u8]| mem.read(RemoteAddr(a), b).is_ok();
    let (roots, unmap_roots_left) = with_unmap_roots(images, &mods, roots, opts.on_demand, &live);
    let roots = &roots[..];
    let slot = |a: u64| {
        let mut b = [0u8; 8];
        mem.read(RemoteAddr(a), &mut b).ok().map(|()| u64::from_le_bytes(b))
    };
    let starts: Vec<(usize, FuncId)> = roots.iter().map(|r| (r.module, r.func)).collect();
    // With a cache limit only the roots go ahead: the rest comes on demand, into the room left.
    let budget = if opts.cache_limit.is_some() { starts.len() } else { opts.budget };
    // What ran in earlier runs from the same roots goes ahead, and nothing else of the
    // modules the hint covers (python3.11: 1,841 of the 4,647 functions its walk reaches,
    // 80,140 of 140,453 blocks), the rest on demand: a run with no hint translates the walk and
    // marks what runs (`Scope::marks`). Not with a cache limit (only the roots go ahead),
    // every module whole, or a module whose whole-image work waits (`later` below: its walk
    // is cut short).
    let hinted_region = |later: bool| {
        let hint_key = (opts.hints
            && opts.on_demand
            && opts.cache_limit.is_none()
            && !opts.whole_modules
            && !later)
            .then(|| roots_key(images, user_roots))
            .flatten();
        let hints = hint_key
            .map(|key| Hints { key, modules: images.iter().map(|m| Ran::read(m, key)).collect() });
        let planned =
            hints.as_ref().and_then(|h| ran_region(&mods, &starts, &h.modules, &slot, budget));
        (hints, planned)
    };
    let walk = || closure(&mods, &starts, &slot, budget, opts.whole_modules, &|_, _| false);
    // Launching, no module's work waits (`later` needs `early`), so the hint's region does not
    // depend on the walk: the two go side by side (python3.11: 4-5 ms and 3 ms, one after the
    // other on one core before).
    let (mut region, hinted_first) = match opts.early {
        true => (rayon::join(walk, facts).0, None),
        false => {
            let ((w, h), ()) = rayon::join(|| rayon::join(walk, || hinted_region(false)), facts);
            (w, Some(h))
        }
    };
    if opts.whole_modules {
        // The vDSO is reached only through pointers libc loads at run time: all of it.
        let own = images.len() - extra.len();
        for (k, m) in images.iter().enumerate().skip(own) {
            let n = m.analysis.cfg.functions.len() as u32;
            region.funcs[k] = (0..n).map(FuncId).collect();
        }
    }
    // The lookup table is sized for the whole walk, though a hint or a deferred walk sends
    // less of it ahead, and for the modules it may grow into on demand.
    let walk_blocks: usize = (region.funcs.iter().enumerate())
        .flat_map(|(k, fs)| fs.iter().map(move |&f| (k, f)))
        .map(|(k, f)| images[k].analysis.cfg.function(f).blocks.len())
        .sum();
    let grown = (images.iter().zip(&region.funcs))
        .filter(|(_, fs)| opts.on_demand || !fs.is_empty())
        .map(|(m, _)| m.analysis.cfg.blocks.len())
        .sum();
    let hash = match bmi2() {
        true => Hash::Mixed(set_bits(walk_blocks, grown)),
        false => Hash::Low16,
    };
    // Attaching, a big module's whole check and liveness where returns land come after the
    // cache is live ([`Jit::serve`]): meanwhile it is translated with every `ret` keeping
    // its frame, from its functions checked one by one.
    let later: Vec<bool> = (0..images.len())
        .map(|k| {
            let m = images[k];
            opts.early
                && opts.on_demand
                && !opts.whole_modules
                && !region.funcs[k].is_empty()
                && m.returns.get().is_none()
                && m.analysis.cfg.blocks.len() >= later_blocks()
        })
        .collect();
    // And only the start of the walk goes ahead (`early_ahead`), the rest when kerf is idle
    // after the cache is live, as the rest of a miss's walk does ([`Jit::translate_deferred`]).
    let mut deferred = Vec::new();
    if later.contains(&true) && region.len() > early_ahead() {
        let ahead = closure(&mods, &starts, &slot, early_ahead(), false, &|_, _| false);
        deferred.push((ahead.rest.clone(), budget - ahead.len()));
        // (Capped by the budget or not, as the whole walk was.)
        region = kerf_jit::Region { capped: region.capped, ..ahead };
    }
    let (hints, planned) = match hinted_first {
        Some(h) => h,
        None => hinted_region(later.contains(&true)),
    };
    let mut hinted = 0;
    if let Some((r, n)) = planned {
        (region, hinted) = (r, n);
    }
    // The unmap roots go ahead whatever the budget (the walk may have stopped before them).
    for r in &roots[user_roots.len()..] {
        for funcs in [&mut region.funcs[r.module], &mut region.reached[r.module]] {
            if !funcs.contains(&r.func) {
                funcs.push(r.func);
            }
        }
    }
    let mods =
        modules_of(images, &later, opts.on_demand, opts.cache_limit.is_none(), opts.fewer_counters);
    check_region(images, &region, &later)?;
    // Roots that wait for a library: the loader's debugger hook, found before anything of it
    // is translated (see `Jit::wait_for_roots`).
    let load_hook = match opts.late_roots {
        false => None,
        true => {
            let fail = |why: &str| JitFail::Root {
                label: "a root in a library not loaded yet".into(),
                why: why.into(),
            };
            if !opts.on_demand {
                return Err(fail("waiting for its library needs translation on demand"));
            }
            let found = (0..images.len())
                .find_map(|k| kerf_jit::load_hook(&mods[k]).map(|(site, old)| (k, site, old)));
            Some(found.ok_or_else(|| {
                fail(
                    "kerf found no hook of the dynamic loader (`_dl_debug_state`, of a form it \
                     knows) to wait for its library at",
                )
            })?)
        }
    };
    // Every root's entry takes a jump (its splice; and its first instructions are copied for
    // threads with a gs base of the program's own): refused now, before anything is mapped.
    for r in roots {
        kerf_jit::translate::entry_displaced(&mods[r.module], r.func)
            .map_err(|why| JitFail::Root { label: r.label.clone(), why })?;
    }
    let mut stats = JitStats { plan: t0.elapsed(), hinted, ..JitStats::default() };
    stats.unmap_roots = roots[user_roots.len()..].iter().map(|r| r.label.clone()).collect();
    stats.unmap_roots_left = unmap_roots_left;
    stats.later = (0..images.len()).filter(|&k| later[k]).collect();

    // What each module's space asks for (of every module, on demand: any may be asked for),
    // worked out side by side before the threads stop.
    use rayon::prelude::*;
    let t_sizes = Instant::now();
    let sizes: Vec<Option<SpaceSize>> = (0..images.len())
        .into_par_iter()
        .map(|k| {
            let (m, funcs) = (&mods[k], &region.funcs[k]);
            let full = if opts.on_demand {
                let n = images[k].analysis.cfg.functions.len() as u32;
                (n > 0).then(|| whole_module_size(images[k], m, n, plugin))
            } else {
                (!funcs.is_empty()).then(|| space_wanted(m, funcs, plugin))
            };
            full.map(|full| space_size(full, m, funcs, plugin))
        })
        .collect();
    stats.sizes = t_sizes.elapsed();

    // 1. Map room for code and a data area within reach of each module of the region, the
    //    table, and the mailbox.
    let t_map = Instant::now();
    let mut tr = Tracee::stop_all(pid)?;
    let hwcap2 = tr.auxv(26).ok().flatten().unwrap_or(0);
    // The thread that owns the block words (see `DATA_OWNER`): the main thread.
    let owner = tr.regs(pid).map(|r| r.fs_base).unwrap_or(0);
    let thread = thread_pointer(&tr, owner, hwcap2 & 2 != 0, &slot);
    let mut spaces: Vec<Option<Space>> = (0..images.len()).map(|_| None).collect();
    let mut table = None;
    let mut mailbox = None;
    let mut state = None;
    let mut slabs = None;
    let mut thread_ids = true;
    let mut seccomp_asked = kerf_os::process::SeccompLevel::default();
    // Slabs for counters, and for each thread's ring addresses where the plugins emit
    // records into per-thread rings.
    let per_thread = plugin.counts_blocks() || plugin.edges() || opts.rings.is_some();
    let no_slabs = per_thread.then(|| why_no_slabs(&tr, hwcap2, tid_offset, thread)).flatten();
    stats.no_slabs = no_slabs;
    let mapped = (|| -> Result<(), TargetError> {
        let exe = images.first().map_or(0, |m| span(m).0);
        // Below 2 GiB where there is room (a PIE's and its libraries' addresses are far
        // above), as high as it fits (a non-PIE executable's heap grows up from low down):
        // the lookups then name it by a 32-bit displacement (`x86_64::fast_ret`).
        let bytes = hash.table_bytes();
        let (lo, hi) = (RemoteAddr(LOW_TABLE.0), RemoteAddr(LOW_TABLE.1));
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        // (`KERF_JIT_TABLE_HIGH`: near the executable, as before, for the tests and
        // benchmarks that compare the two.)
        let low = match std::env::var_os("KERF_JIT_TABLE_HIGH") {
            Some(_) => None,
            None => tr.share_within(lo, hi, hi, bytes, prot).ok(),
        };
        table = Some(match low {
            Some(t) => t,
            None => tr.share_near(RemoteAddr(exe), bytes, 0)?,
        });
        if plugin.state_len() > 0 {
            state = Some(tr.share_near(RemoteAddr(exe), plugin.state_len(), 0)?);
        }
        if opts.on_demand {
            let mut m = tr.share_near(RemoteAddr(exe), mb::BYTES, 0)?;
            // kerf's beat, from now until the mailbox is dropped: a thread whose wait timed
            // out while kerf was busy (translating at attach, analysing a big library) waits
            // again, and gives up only once kerf is gone.
            m.beat(mb::ALIVE as usize, KEEP_WAITING);
            mailbox = Some(m);
        }
        for (k, size) in sizes.iter().enumerate() {
            if let Some(size) = *size {
                spaces[k] = Some(map_space(&mut tr, images[k], size, plugin, opts.rings)?);
            }
        }
        let code_at = spaces.iter().flatten().next().map_or(0, |sp| sp.code.0);
        let mail_at = mailbox.as_ref().map(|m: &SharedMem| m.remote().0);
        let allowed = runtime_calls(&mut tr, code_at, mail_at)?;
        stats.no_waits = allowed.no_waits;
        thread_ids = allowed.thread_ids;
        // (What was asked, to notice a filter installed later: the threads are stopped.)
        let sys = kerf_os::process::RealSys;
        seccomp_asked = kerf_os::process::seccomp_level(&sys, pid).unwrap_or_default();
        if let (true, None, Some(tid)) = (per_thread, no_slabs, tid_offset) {
            let data = spaces.iter().flatten().map(|sp| sp.data.len() as u64).sum();
            // (Without them the counters tell the owner thread from the others.)
            if let Ok(mut region) = SlabRegion::map(&mut tr, data, tid as i32) {
                for sp in spaces.iter_mut().flatten() {
                    sp.shadow = region.shadow(sp.data.len() as u64);
                    if sp.rings.is_some() {
                        sp.ring_word = region.ring_word();
                    }
                }
                slabs = Some(region);
            }
        }
        Ok(())
    })();
    if per_thread && no_slabs.is_none() && slabs.is_none() {
        stats.no_slabs = Some("no room for the counter slabs in the address space");
    }
    if let Some((k, site, _)) = load_hook {
        if let Some(sp) = spaces[k].as_mut() {
            sp.load_hook = Some(site);
        }
    }
    let (table, mailbox) = match (mapped, table.take()) {
        (Ok(()), Some(t)) => (t, mailbox),
        (Ok(()), None) => unreachable!("the table is mapped first"),
        (Err(e), mut table) => {
            // Whatever was mapped before the failure goes again.
            for sp in spaces.iter().flatten() {
                let _ = tr.free(sp.code, sp.room);
                let _ = tr.free(sp.data.remote(), sp.data.len() as u64);
                if let Some(r) = &sp.rings {
                    let _ = tr.free(r.remote(), r.len() as u64);
                }
            }
            for t in table.take().into_iter().chain(mailbox).chain(state) {
                let _ = tr.free(t.remote(), t.len() as u64);
            }
            if let Some(s) = slabs.take() {
                let _ = tr.free(s.remote(), s.bytes());
            }
            let _ = tr.resume_detach();
            return Err(match e {
                TargetError::Seccomp { nr, .. } if nr == i64::from(mb::SYS_FUTEX) => {
                    JitFail::MissWait(e)
                }
                e => e.into(),
            });
        }
    };
    tr.resume_detach()?;
    if let Some(m) = &mailbox {
        let ts = [mb::WAIT_NS / 1_000_000_000, mb::WAIT_NS % 1_000_000_000];
        m.store_u64(mb::TIMEOUT as usize, ts[0]);
        m.store_u64(mb::TIMEOUT as usize + 8, ts[1]);
        // Listening from the start: a miss before `serve` runs waits for it.
        m.store_u32(mb::LISTEN as usize, 1);
    }

    stats.map = t_map.elapsed();

    // 2. Translate while the process runs: modules in parallel, the biggest first.
    let t1 = Instant::now();
    let root_entries: HashSet<u64> = roots
        .iter()
        .map(|r| images[r.module].analysis.cfg.function(r.func).entry.0 + mods[r.module].bias)
        .collect();
    let mailbox_at = mailbox.as_ref().map(|m| m.remote().0);
    let state_at = state.as_ref().map_or(0, |s| s.remote().0);
    let (cpu, flags_save) = (Runtime::cpu_read(), Runtime::flags_save());
    let at = At {
        thread_id: tid_offset.filter(|_| thread_ids),
        cpu,
        flags_save,
        ..At::new(LiveAt::ALL, Env::User, thread, 0)
    };
    // The main thread's id is the process id.
    let owner_tid = tid_offset.map(|_| pid as u32);
    let ctx = Ctx { at, hash, owner, owner_tid, roots: root_entries, mailbox: mailbox_at };
    // Per module of the region: its pieces (see `pieces`), each with its functions and where
    // it goes.
    let most = MOST_PIECES.min(2 * rayon::current_num_threads());
    let least = piece_blocks();
    let mut work: Vec<(usize, Vec<Piece>)> = spaces
        .iter()
        .enumerate()
        .filter(|(k, _)| !region.funcs[*k].is_empty())
        .filter_map(|(k, sp)| {
            let sp = sp.as_ref()?;
            let whole = Layout {
                code: sp.code.0 + sp.used,
                room: sp.room - STUB_ROOM - sp.used,
                table: table.remote().0,
                hash,
                data: sp.data.remote().0 + sp.data_used,
                mailbox: mailbox_at,
                owner_tid,
                threads: sp.threads(),
                rings: sp.rings(),
                routines: sp.routines,
                state: state_at,
                slabs: slabs.as_ref().map(|s| s.seq),
                per_thread: sp.shadow.map(|h| SlabRegion::per_thread(sp.data.remote().0, h)),
                ring_word: sp.ring_word,
                load_hook: sp.load_hook,
            };
            let data_room = sp.data.len() as u64 - sp.data_used;
            let funcs = &region.funcs[k];
            let split = pieces(&mods[k], funcs, least, most);
            let placed = (split.len() > 1)
                .then(|| place(&mods[k], split, &whole, data_room, plugin))
                .flatten();
            Some((k, placed.unwrap_or_else(|| vec![(funcs.clone(), whole)])))
        })
        .collect();
    work.sort_by_key(|w| std::cmp::Reverse(w.1.iter().map(|p| p.1.room).sum::<u64>()));
    // Where the region's jumps land in other functions' bodies, per module with a hint: its
    // pieces are translated apart (see `Marks`).
    let landings: Vec<_> = (region.funcs.iter().enumerate())
        .map(|(k, funcs)| {
            let ran = hints.as_ref().and_then(|h| h.modules.get(k));
            ran.map(|r| landings_for(&images[k].analysis.cfg, funcs, &r.known)).unwrap_or_default()
        })
        .collect();
    let one = |k: usize, funcs: &[FuncId], layout: &Layout| {
        let name = images[k].path.display().to_string();
        let reached: HashSet<FuncId> = region.reached[k].iter().copied().collect();
        let marks = (hints.as_ref().and_then(|h| h.modules.get(k)))
            .map(|r| Marks { known: &r.known, landings: &landings[k] });
        let scope = Scope { roots: &ctx.roots, reached: &reached, slots: &region.slots, marks };
        let t = kerf_jit::translate(&name, &mods[k], funcs, layout, plugin, &ctx.at, &scope);
        // Its code into the room at once, on this core, while others may still translate
        // (one thread wrote every piece after the last was done, the other core idle).
        // Nothing leads there yet; `adopt` checks the place again.
        let written = t.as_ref().is_ok_and(|t| {
            let sp = spaces[k].as_ref().expect("a piece is made for a module with room");
            let off = t.at.wrapping_sub(sp.code.0);
            let fits = off.checked_add(t.code.len() as u64).is_some_and(|e| e <= sp.room);
            if fits {
                sp.code_mem.write_bytes(off as usize, &t.code);
            }
            fits
        });
        (k, funcs.to_vec(), t.map(|t| (t, written)))
    };
    // Every module the region touches gets its return summaries first (before the program
    // goes on: a region with no `ret` in a module, as python3.11's `main`, one jump, would
    // leave them to the first miss there, whose thread waits at most 250 ms), then its
    // pieces are translated: all of it one pool's tasks, biggest module first, so a core
    // done with a small module's takes a piece of a big one (python3.11's summaries take
    // 0.07 s, its translation 0.32 s on one core).
    let results = std::sync::Mutex::new(Vec::new());
    // Ctrl-C meanwhile: the pieces not begun are left (`--whole` on node took 10-20 s here,
    // and kerf went live before it acted on the signal), and nothing goes in.
    let stop = crate::live::stop_flag();
    rayon::scope_fifo(|s| {
        for (k, pieces) in &work {
            let (one, results, mods) = (&one, &results, &mods);
            s.spawn_fifo(move |s| {
                // (Kept facts checked, or solved and kept: see `ensure_returns`. The whole
                // check passed before the region was planned.)
                if mods[*k].returns.is_some() {
                    let _ = images[*k].ensure_returns();
                }
                for (funcs, layout) in pieces {
                    s.spawn_fifo(move |_| {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        let r = one(*k, funcs, layout);
                        results.lock().unwrap_or_else(|e| e.into_inner()).push(r);
                    });
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    stats.pieces = results.len();
    stats.translate = t1.elapsed();
    let mut jit = Jit {
        pid,
        _claim: claim,
        caches: Vec::new(),
        table: Arc::new(table),
        entries: Vec::new(),
        hooks: Vec::new(),
        caught: None,
        handlers_seen: HashSet::default(),
        unplaced: Vec::new(),
        pending: Vec::new(),
        sites: Vec::new(),
        sites_placed: false,
        longjmps_placed: false,
        longjmp_hooks: Vec::new(),
        action_sites: None,
        late_roots: Vec::new(),
        load_hook,
        late_checked: HashSet::new(),
        serving_since: None,
        stats,
        slabs,
        slab_totals: Default::default(),
        seccomp_asked,
        extra: Vec::new(),
        spaces,
        index: Table::new(hash),
        done: (0..images.len()).map(|_| HashSet::new()).collect(),
        starts: HashMap::new(),
        unlinked: HashMap::new(),
        mailbox,
        state,
        routines_len: plugin.routines().len() as u64,
        ctx,
        mem: mem.clone(),
        live_escapes: None,
        rings: opts.rings,
        limit: opts.cache_limit,
        root_funcs: starts.clone(),
        roots_bytes: 0,
        flush_share: opts.flush_share,
        recent_flushes: Default::default(),
        refused: HashMap::new(),
        gone: HashSet::new(),
        deferred,
        late_ahead: Vec::new(),
        lazy: opts.on_demand,
        fewer_counters: opts.fewer_counters,
        weights_key,
        stub_counts: Vec::new(),
        stub_targets: Vec::new(),
        strays: Vec::new(),
        strays_unknown: 0,
        hints,
        slots: region.slots.clone(),
        held: Vec::new(),
        later,
        started: kerf_os::process::start_time(&kerf_os::process::RealSys, pid),
    };
    if stop.load(Ordering::Relaxed) {
        let _ = jit.unmap();
        return Err(JitFail::Interrupted);
    }
    let mut translations = Vec::new();
    for (k, funcs, r) in results {
        match r {
            Ok(t) => translations.push((k, funcs, t)),
            Err(e) => {
                let _ = jit.unmap();
                return Err(JitFail::Translate(e));
            }
        }
    }
    // A module's pieces in the order of their room.
    translations.sort_by_key(|t| (t.0, t.2 .0.at));

    // 3. Write the caches (no thread can be in them: nothing leads there yet) and the table:
    //    the table on a thread of its own, from every translation's entries, while this one
    //    adopts the translations (which leaves the table alone before the cache runs); each
    //    piece's code is in its room already (`one`). python3.11: adopting 7-9 ms, the
    //    table's entries 4 ms and its pages 10-13 ms, one after the other before.
    let t2 = Instant::now();
    let mut held: Vec<TableEntry> =
        translations.iter().flat_map(|(_, _, (t, _))| t.entries.iter().copied()).collect();
    let mut index = std::mem::replace(&mut jit.index, Table::new(hash));
    let table = jit.table.clone();
    let adopted = std::thread::scope(|s| {
        let writer = s.spawn(move || {
            insert_held(&mut index, &mut held);
            // (The table was just mapped: all zero.)
            index.write_to(|at, b| table.write_bytes(at as usize, b));
            index
        });
        let mut adopted = Ok(());
        for (k, funcs, (t, written)) in translations {
            if let Err(e) = jit.adopt(k, t, funcs, false, written) {
                adopted = Err(e);
                break;
            }
        }
        // (The entries went in on the other thread.)
        jit.held.clear();
        jit.index = writer.join().expect("the table's writer does not panic");
        adopted
    });
    if let Err(e) = adopted {
        let _ = jit.unmap();
        return Err(e);
    }
    jit.stats.table_entries = jit.index.entries;
    jit.stats.crowded = jit.index.crowded.len();
    jit.stats.lost = jit.index.lost();
    jit.stats.lost_returns = jit.index.lost_returns;
    if let Some(dir) = std::env::var_os("KERF_JIT_DUMP") {
        dump(std::path::Path::new(&dir), images, &jit);
    }
    jit.stats.write = t2.elapsed();
    // (With a limit only the roots went ahead.)
    jit.roots_bytes = jit.cache_bytes();
    region.funcs = jit.done.iter().map(|d| d.iter().copied().collect()).collect();
    jit.stats.region = region;

    // 4. The roots' entries, in one stop.
    let mut entries = Vec::new();
    for r in roots {
        match entry_splice(images, &jit, r) {
            Ok(e) => entries.push(e),
            Err(e) => {
                let _ = jit.unmap();
                return Err(e);
            }
        }
    }
    if let Err(e) = jit.splice_entries(&mem, entries, images) {
        // (An entry that could not be put back keeps the cache it jumps to.)
        if jit.entries.is_empty() {
            let _ = jit.unmap();
        }
        return Err(e);
    }
    // (Threads already inside a root call are taken in by the caller, once it is ready for
    // their records: `Jit::take_in_threads`.)
    jit.extra = extra;
    Ok(jit)
}

/// `roots` and, translating on demand (the notice needs the mailbox), the dynamic loader's
/// `munmap` wrapper (`__munmap`: a function whose first instructions are `mov eax, 11;
/// syscall`), which `dlclose` unmaps libraries with, as a root of its own. A thread outside
/// the root calls that closes a library then runs the translated wrapper, whose notice
/// ([`kerf_jit::x86_64::unmap_notice`]) makes kerf take the library's translations out before
/// the thread goes on, as for a thread inside; without it kerf's look at the maps came up to
/// [`UNMAP_LOOK`] later, and a library loaded there meanwhile and called from the cache ran
/// the old one's translation (wrong results; a thread that left a stale translation
/// mid-function into the new library's code looped forever). Each such call is a root call:
/// its blocks counted, and in the call trace, as any; the loader alone calls it (libc's own
/// `munmap`, which `free` and thread exits call all the time, is left out: those calls would
/// be counted outside the roots, and libraries are not unmapped with it). A wrapper whose
/// entry cannot take a jump is left out (`KERF_JIT_NO_UNMAP_ROOTS`: none, for the test of
/// what happens without it), and so is one whose first bytes in the target (`live` reads
/// them) are not the file's: returned second, each with the bytes found.
fn with_unmap_roots(
    images: &[&AnalyzedImage],
    mods: &[Module<'_>],
    roots: &[Root],
    on_demand: bool,
    live: &dyn Fn(u64, &mut [u8]) -> bool,
) -> (Vec<Root>, Vec<String>) {
    const WRAPPER: [u8; 7] = [0xb8, 0x0b, 0x00, 0x00, 0x00, 0x0f, 0x05];
    let mut all = roots.to_vec();
    let mut left = Vec::new();
    if !on_demand || std::env::var_os("KERF_JIT_NO_UNMAP_ROOTS").is_some() {
        return (all, left);
    }
    // The dynamic loader's only: `dlclose` unmaps with it, and nothing else calls it but the
    // loader (libc's `munmap`, which `free` and thread exits call all the time, would count
    // those calls outside the roots).
    let loader = |k: usize| {
        images[k].path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("ld-"))
    };
    for (k, m) in mods.iter().enumerate().filter(|(k, _)| loader(*k)) {
        for (i, f) in m.cfg.functions.iter().enumerate() {
            let func = FuncId(i as u32);
            let starts = m.mem.code_region(f.entry).is_some_and(|(base, bytes)| {
                let off = (f.entry.0 - base.0) as usize;
                bytes.get(off..off + WRAPPER.len()) == Some(&WRAPPER[..])
            });
            if !starts
                || all.iter().any(|r| (r.module, r.func) == (k, func))
                || kerf_jit::translate::entry_displaced(m, func).is_err()
            {
                continue;
            }
            // Its bytes in the target, not the file's: a wrapper spliced already (by a kerf
            // killed while attached, whose jump and cache the program keeps) cannot take
            // this kerf's jump, and failing the whole attach for a root the user did not ask
            // for would leave that process out of reach of every later `kerf jit`.
            let mut now = [0u8; WRAPPER.len()];
            let at = f.entry.0 + images[k].bias.unwrap_or(0);
            if !live(at, &mut now) || now != WRAPPER {
                left.push(format!("{} at {at:#x}: {now:02x?}", f.name));
                continue;
            }
            all.push(Root { label: format!("{} (kerf: unmaps)", f.name), module: k, func });
        }
    }
    (all, left)
}

/// Where a thread stands in a root call ([`Jit::root_frame`]): the outermost root frame's
/// function (module, function), the stack pointer that frame had at its entry, the return
/// addresses of the frames inside it (innermost first), and whether the thread is in a
/// signal handler that interrupted that call (a signal frame lies between).
struct RootFrame {
    root: (usize, FuncId),
    outer_sp: u64,
    inside: Vec<u64>,
    in_handler: bool,
}

/// The bytes of the x86-64 signal restorer a handler returns to (glibc's `__restore_rt`,
/// musl's: `mov rax, 15` (`rt_sigreturn`); `syscall`).
const RESTORER: [u8; 9] = [0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];

/// If return address `ra` is the signal restorer, the registers the signal interrupted, read
/// from the frame the kernel pushed (`sp`, just past the return address, is its `ucontext`):
/// `rip`, `rsp` and `rbp` of its `mcontext` (x86-64's `struct rt_sigframe`).
fn signal_frame(word: &dyn Fn(u64) -> Option<u64>, ra: u64, sp: u64) -> Option<(u64, u64, u64)> {
    let bytes: Vec<u8> =
        (0..2).filter_map(|k| word(ra + 8 * k)).flat_map(u64::to_le_bytes).collect();
    if bytes.get(..RESTORER.len()) != Some(&RESTORER[..]) {
        return None;
    }
    // uc_flags, uc_link and uc_stack (8 + 8 + 24 bytes), then the general registers in
    // `<sys/ucontext.h>`'s order: rbp is the 10th, rsp the 15th, rip the 16th.
    let gregs = sp + 40;
    Some((word(gregs + 8 * 16)?, word(gregs + 8 * 15)?, word(gregs + 8 * 10)?))
}

/// Per module whose whole-image work was left for later: whether it was done ([`whole_later`]).
type WholeDone = Vec<(usize, Result<bool, Invalid>)>;

/// The whole-image work of modules `later` of `images` left for after the cache is live
/// ([`JitOptions::early`]): every function of a cached analysis checked, then the liveness
/// where returns land worked out; per module, `Ok(true)` when both were done, `Ok(false)`
/// when `stop` came first. On a pool of its own, so that the misses' answers (which may
/// use the global one) never queue behind it.
fn whole_later(images: &[AnalyzedImage], later: &[usize], stop: &AtomicBool) -> WholeDone {
    let each = |k: usize| {
        let m = &images[k];
        let checked = m.check_all_code_until(stop);
        if !matches!(checked, Ok(true)) || stop.load(Ordering::Relaxed) {
            return (k, checked.map(|_| false));
        }
        (k, m.ensure_returns().map(|_| true))
    };
    let run = || later.iter().map(|&k| each(k)).collect();
    match rayon::ThreadPoolBuilder::new().num_threads(rayon::current_num_threads()).build() {
        Ok(pool) => pool.install(run),
        Err(_) => run(),
    }
}

/// A piece of a module's translation ahead: its functions and where it goes.
type Piece = (Vec<FuncId>, Layout);

/// Pieces a module's translation ahead is cut into at most (see [`pieces`]): twice the
/// cores kerf has, up to this.
const MOST_PIECES: usize = 16;

/// Blocks a piece of a module's translation ahead has at least (see [`pieces`]);
/// `KERF_JIT_PIECE_BLOCKS` sets it (the tests split their small fixtures with it).
fn piece_blocks() -> usize {
    const PIECE_BLOCKS: usize = 24_576;
    size_from_env("KERF_JIT_PIECE_BLOCKS", PIECE_BLOCKS)
}

/// `funcs` of `m` cut into pieces of consecutive functions (by entry) with about as many
/// blocks each, at most `most` of them and each of `least` blocks or more, to be translated
/// side by side: one module's translation is one core's work otherwise, and python3.11's is
/// most of what kerf does before the program starts. A call from one piece to another goes
/// through a link word, as one to a function translated on demand does.
fn pieces(m: &Module<'_>, funcs: &[FuncId], least: usize, most: usize) -> Vec<Vec<FuncId>> {
    let mut funcs = funcs.to_vec();
    funcs.sort_by_key(|&f| m.cfg.function(f).entry);
    let blocks = |f: FuncId| m.cfg.blocks_of(f).len();
    let total: usize = funcs.iter().map(|&f| blocks(f)).sum();
    let n = (total / least.max(1)).clamp(1, most.max(1));
    let mut out: Vec<Vec<FuncId>> = vec![Vec::new()];
    let mut seen = 0;
    for f in funcs {
        // Piece `j` ends once the blocks so far reach `j + 1` shares.
        let j = out.len();
        if j < n && seen * n >= j * total && !out[j - 1].is_empty() {
            out.push(Vec::new());
        }
        seen += blocks(f);
        out.last_mut().expect("one piece at least").push(f);
    }
    out
}

/// Where each piece goes: one after another from `whole`'s start, each with the most room
/// and data its functions could need (`room_for`, `data_for`); `None` when together they
/// would not fit `whole`'s room and the `data_room` bytes of data left.
fn place(
    m: &Module<'_>,
    pieces: Vec<Vec<FuncId>>,
    whole: &Layout,
    data_room: u64,
    plugin: &dyn Plugin,
) -> Option<Vec<Piece>> {
    let (mut code, mut data) = (whole.code, whole.data);
    let mut out = Vec::with_capacity(pieces.len());
    for funcs in pieces {
        let room = kerf_jit::room_for(m, &funcs, plugin);
        out.push((funcs.clone(), Layout { code, room, data, ..*whole }));
        code += room.next_multiple_of(64);
        data += kerf_jit::data_for(m, &funcs).next_multiple_of(64);
    }
    (code - whole.code <= whole.room && data - whole.data <= data_room).then_some(out)
}

/// The jump at root `r`'s entry to its translation, checked as any `jump5` is.
fn entry_splice(images: &[&AnalyzedImage], jit: &Jit, r: &Root) -> Result<Entry, JitFail> {
    let m = images[r.module];
    let cfg = &m.analysis.cfg;
    let bias = m.bias.unwrap_or(0);
    let f = cfg.function(r.func);
    let why = |why: String| JitFail::Root { label: r.label.clone(), why };
    let (base, bytes) = m.code_region(f.entry).ok_or_else(|| why("no code bytes".into()))?;
    let entry = f.entry.0 + bias;
    let target = jit
        .caches
        .iter()
        .filter(|c| c.module == r.module)
        .find_map(|c| c.translation.entered_at(entry))
        .ok_or_else(|| why("its entry block has no translation".into()))?;
    // (Planned as the translation's springboard for it was.)
    let module = &modules_of(&[m], &[], false, false, false)[0];
    let d = kerf_jit::translate::entry_displaced(module, r.func).map_err(why)?;
    let off = (f.entry.0 - base.0) as usize;
    let old = bytes[off..off + d.len].to_vec();
    let new = kerf_patch::jump5_bytes(entry, target, d.len)
        .ok_or_else(|| why("its translation is out of a rel32's reach".into()))?;
    Ok(Entry { label: r.label.clone(), at: RemoteAddr(entry), old, new })
}

impl Jit {
    /// Where the lookup table lies in the target.
    pub fn table_at(&self) -> u64 {
        self.table.remote().0
    }

    /// How many sets the lookup table has.
    pub fn table_sets(&self) -> usize {
        self.ctx.hash.sets()
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Module `k` of a cache: one of the process's `images`, or one the JIT analysed itself.
    pub fn image<'a>(&'a self, images: &'a [AnalyzedImage], k: usize) -> &'a AnalyzedImage {
        images.get(k).unwrap_or_else(|| &self.extra[k - images.len()])
    }

    /// Functions of module `k` translated so far (ahead of time and on demand).
    pub fn functions(&self, k: usize) -> usize {
        self.done.get(k).map_or(0, HashSet::len)
    }

    /// Functions translated so far, in every module.
    pub fn function_count(&self) -> usize {
        self.done.iter().map(HashSet::len).sum()
    }

    /// Cache `k`'s escapes while the JIT was live: up to the moment kerf stopped answering
    /// misses, if it answered them (afterwards a thread that misses leaves, as the JIT is
    /// being taken out).
    pub fn live_escapes(&self, k: usize) -> u64 {
        self.live_escapes_asked(k).0
    }

    /// [`Jit::live_escapes`], and how many of them left without asking kerf (it was not
    /// listening).
    pub fn live_escapes_asked(&self, k: usize) -> (u64, u64) {
        use kerf_jit::translate::{DATA_ESCAPES, DATA_UNASKED};
        let data = &self.caches[k].data;
        let now = (data.load_u64(DATA_ESCAPES as usize), data.load_u64(DATA_UNASKED as usize));
        match &self.live_escapes {
            Some(v) => v.get(k).copied().unwrap_or(now),
            None => now,
        }
    }

    /// Escapes through the miss path so far, per cache, and the last target that escaped.
    pub fn escapes(&self) -> Vec<(usize, u64, u64)> {
        self.caches
            .iter()
            .map(|c| {
                let d = &c.data;
                let n = d.load_u64(kerf_jit::translate::DATA_ESCAPES as usize);
                (c.module, n, d.load_u64(kerf_jit::translate::DATA_LAST_MISS as usize))
            })
            .collect()
    }

    /// The per-thread ring areas of the plugins' records, one per module with room, each
    /// with the data area whose first bytes are the thread table that indexes it (kerf's
    /// mappings: the reader drains the rings while the target runs, and finds each ring's
    /// thread among the table's owners).
    pub fn ring_areas(&self) -> Vec<(Arc<SharedMem>, Arc<SharedMem>)> {
        let spaces = self.spaces.iter().flatten();
        spaces.filter_map(|sp| Some((sp.rings.clone()?, sp.data.clone()))).collect()
    }

    /// The plugin's routines' state, kerf's mapping of it.
    pub fn state(&self) -> Option<&SharedMem> {
        self.state.as_ref()
    }

    /// The word of a block in a cache's data area (a plugin's counter).
    ///
    /// With per-thread slabs, the threads' copies are added up once, at the first read after
    /// the start or the last flush (reading every slab's written pages): read the counts once
    /// the threads are done.
    pub fn word(&self, cache: usize, word: u64) -> u64 {
        self.words().get(cache, word)
    }

    /// A reader of many words at once ([`Words`]), with the slabs' sums as first read after
    /// the start, the last flush or the removal.
    pub fn words(&self) -> Words<'_> {
        let mut totals = self.slab_totals.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(slabs), None) = (&self.slabs, totals.as_ref()) {
            *totals = Some(slabs.totals());
        }
        Words { jit: self, totals }
    }

    /// How long kerf has served misses (since the cache went live), if it has.
    pub fn serving_for(&self) -> Option<Duration> {
        self.serving_since.map(|t| t.elapsed())
    }

    /// The per-thread counter slabs, if the counters have them.
    pub fn slab_use(&self) -> Option<SlabUse> {
        self.slabs.as_ref().map(|s| SlabUse {
            threads: s.claimed(),
            shared: s.shared(),
            reclaimed: s.reclaimed,
            bytes: s.bytes(),
            program_gs: (self.caches.iter())
                .map(|c| c.data.load_u64(kerf_jit::translate::DATA_FOREIGN_GS as usize))
                .sum(),
        })
    }

    /// Write the entry splices with every thread stopped and none inside their bytes (after
    /// the first), trying again after a pause while one is.
    fn splice_entries(
        &mut self,
        mem: &RemoteMem,
        entries: Vec<Entry>,
        all: &[&AnalyzedImage],
    ) -> Result<(), JitFail> {
        // (Found before the threads stop.)
        if self.ctx.mailbox.is_some() {
            self.find_action_sites(all);
        }
        for attempt in 1..=SPLICE_TRIES {
            let t = Instant::now();
            let tr = Tracee::stop_all(self.pid)?;
            let busy = entries.iter().find(|e| {
                tr.threads().iter().any(|&tid| {
                    tr.regs(tid).is_ok_and(|r| {
                        let pc = r.pc().0;
                        pc > e.at.0 && pc < e.at.0 + e.old.len() as u64
                    })
                })
            });
            if let Some(b) = busy {
                let label = b.label.clone();
                tr.resume_detach()?;
                if attempt == SPLICE_TRIES {
                    return Err(JitFail::Busy { label, tries: SPLICE_TRIES });
                }
                std::thread::sleep(Duration::from_millis(2 * attempt as u64));
                continue;
            }
            let mut written: Vec<Entry> = Vec::new();
            let mut err = None;
            for e in entries {
                if err.is_some() {
                    break;
                }
                match write_checked(mem, e.at, &e.old, &e.new) {
                    Ok(()) => written.push(e),
                    Err(x) => err = Some(left_by_a_gone_kerf(self.pid, mem, e.at, x)),
                }
            }
            if err.is_some() {
                // All or none: the entries written before the one that failed are put back
                // while the threads are still stopped, since the caller unmaps the cache they
                // jump to. (Left in, the next call of such a root jumped into unmapped
                // memory: redis-server died of SIGSEGV in `processCommand` when the ld.so
                // unmap root, after it, was found spliced by a kerf killed earlier.) One that
                // cannot be put back stays recorded, and the cache with it.
                written.retain(|e| write_checked(mem, e.at, &e.new, &e.old).is_err());
            }
            self.entries = written;
            // In the same stop, before a launched program runs any of its own code: the
            // jumps over the `rt_sigaction`s of the original code.
            if let (None, Some(mbox)) = (&err, self.ctx.mailbox) {
                if std::env::var_os("KERF_JIT_NO_SIGNAL_HOOKS").is_none() {
                    let pcs: Vec<u64> = (tr.threads().iter())
                        .filter_map(|&t| tr.regs(t).ok())
                        .map(|r| r.pc().0)
                        .collect();
                    self.splice_action_sites(mem, all, &pcs, mbox);
                }
            }
            self.stats.splice_pause = t.elapsed();
            tr.resume_detach()?;
            return match err {
                Some(e) => Err(e),
                None => Ok(()),
            };
        }
        unreachable!("the last attempt returns")
    }

    /// Take translation `t` of module `k` (made for the next free bytes of its room) into the
    /// target: write its code, set up its data words, link exits in both directions, and add
    /// its entries to the table (`live`: also write them into the target's table, the way's
    /// original address last, so that a thread that matches it finds the rest). Returns the
    /// new cache's index.
    fn adopt(
        &mut self,
        k: usize,
        t: Translation,
        funcs: Vec<FuncId>,
        live: bool,
        written: bool,
    ) -> Result<usize, JitFail> {
        use kerf_jit::translate::DATA_OWNER;
        let sp = self.spaces[k].as_mut().expect("a translation is made for a module with room");
        // A translation goes where it was made for, in room nothing uses yet: after the
        // last one adopted (pieces of one module made side by side leave a gap between them,
        // each made for the most room it could need).
        let (off, data_off) =
            (t.at.wrapping_sub(sp.code.0), t.data_at.wrapping_sub(sp.data.remote().0));
        let end = off.checked_add(t.code.len() as u64).filter(|&e| off >= sp.used && e <= sp.room);
        let data_end = (data_off.checked_add(t.data_len))
            .filter(|&e| data_off >= sp.data_used && e <= sp.data.len() as u64);
        let (Some(end), Some(data_end)) = (end, data_end) else {
            return Err(JitFail::Placement { at: t.at, free: sp.code.0 + sp.used });
        };
        let code = RemoteAddr(t.at);
        // (`written`: by the thread that translated it, at this place.)
        if !written {
            sp.code_mem.write_bytes(off as usize, &t.code);
        }
        let data = Area {
            mem: sp.data.clone(),
            off: data_off as usize,
            len: t.data_len as usize,
            kept: None,
            shadow: sp.shadow.map(|s| s + data_off),
        };
        sp.gaps += off - sp.used;
        sp.used = end.next_multiple_of(64);
        sp.data_used = data_end.next_multiple_of(64);
        data.store_u64(DATA_OWNER as usize, self.ctx.owner);
        // Every site predicts a way of the table until it has seen its own: the first way of
        // the first set, which matches its own target if any (a prediction is only where to
        // compare first), and whose continuation line a frameless call reads too.
        let none = self.table.remote().0;
        for w in t.preds.clone().step_by(8) {
            data.store_at(w, none);
        }
        // The jump tables' copies lie among the prediction words.
        self.stats.table_copies += t.tables.len();
        self.stats.table_dispatches += t.table_dispatches;
        self.stats.slot_guards += t.slot_guards;
        self.stats.frameless_calls += t.frameless_calls;
        self.stats.chained_returns += t.chained_returns;
        self.stats.hot_chains += t.hot_chains;
        self.stats.frameless_returns += t.frameless_returns;
        self.stats.inlined += t.inlined;
        for (words, values) in &t.tables {
            for (k, v) in values.iter().enumerate() {
                data.store_at(words + 8 * k as u64, *v);
            }
        }
        for &(word, value) in &t.constants {
            data.store_at(word, value);
        }
        let here = self.caches.len();
        for b in &t.blocks {
            self.starts.insert(b.start, b.cache);
        }
        // An exit to a block that has a translation is linked; before anything runs (at
        // install: a module's pieces, see `pieces`) its `jmp [word]` becomes a direct jump,
        // which saves a load and an indirect branch on every call from one piece into another.
        let mut direct = Vec::new();
        for l in &t.links {
            match self.starts.get(&l.target) {
                Some(&to) => {
                    data.store_at(l.word, to);
                    direct.extend(l.jump.map(|j| (j, to)));
                }
                None => {
                    data.store_at(l.word, l.slow);
                    self.unlinked.entry(l.target).or_default().push((here, *l));
                }
            }
        }
        if live {
            // Into the live table before any earlier code leads here (the links below): a
            // thread that comes in by an entry and calls must find the return site when it
            // returns, since a `ret` that misses leaves the region without asking kerf (one
            // that followed a new link to `keep_all` of the 8-thread fixture before its
            // return site was in left its root call early). Ways are chosen by rank; return
            // sites are written first, then the entries that lead into the new code. Every
            // return site, whatever its rank: `start_thread`'s after `setjmp`, also
            // `longjmp`'s target, went in after the function's entry, and threads made
            // meanwhile entered by it and left the cache at that `ret` (one thread in about
            // 150 runs of the 8-thread fixture from `main`, on a busy host).
            let mut entries = t.entries.clone();
            entries.sort_by_key(|e| e.rank);
            let placed: Vec<_> = (entries.iter())
                .map(|e| (e, self.index.insert_ranked(e.orig, e.entry, e.cont, e.rank, e.keyed)))
                .collect();
            let returns = placed.iter().filter(|(e, _)| e.returned_to);
            for &(e, p) in returns.chain(placed.iter().filter(|(e, _)| !e.returned_to)) {
                self.publish(e, p);
            }
        } else {
            // Before the cache runs every translation's entries go in together, by rank (see
            // `insert_held`).
            self.held.extend(t.entries.iter().copied());
        }
        // Exits of earlier translations to blocks that have one now.
        for b in &t.blocks {
            for (c, l) in self.unlinked.remove(&b.start).unwrap_or_default() {
                let area = if c == here { &data } else { &self.caches[c].data };
                area.store_at(l.word, b.cache);
                direct.extend(l.jump.map(|j| (j, b.cache)));
            }
        }
        if !live {
            for (jump, to) in direct {
                self.jump_directly(jump, to);
            }
        }
        self.stats.blocks += t.blocks.len();
        self.stats.code_bytes += t.code.len() as u64;
        self.stats.cache_peak = self.stats.cache_peak.max(self.cache_bytes());
        self.done[k].extend(funcs);
        self.caches.push(Cache { module: k, code, data, translation: t, direct: !live });
        Ok(here)
    }

    /// Turn a linked exit's `jmp [word]` at `jump` (6 bytes) into `jmp to` and a `nop`, where
    /// `to` is within a rel32. Only before the cache runs: a thread must never see the
    /// instruction half written.
    fn jump_directly(&self, jump: u64, to: u64) {
        let Some(sp) = self.spaces.iter().flatten().find(|sp| sp.holds(jump)) else { return };
        let Ok(rel) = i32::try_from(to.wrapping_sub(jump + 5) as i64) else { return };
        let mut bytes = [0x90u8; 6];
        bytes[0] = 0xe9;
        bytes[1..5].copy_from_slice(&rel.to_le_bytes());
        sp.code_mem.write_bytes((jump - sp.code.0) as usize, &bytes);
    }

    /// Add a table entry (see `translate::Entry`) in kerf's copy, and with `live` in the
    /// target's table too.
    fn insert(&mut self, e: TableEntry, live: bool) {
        let placed = self.index.insert_ranked(e.orig, e.entry, e.cont, e.rank, e.keyed);
        if live {
            self.publish(&e, placed);
        }
    }

    /// Write an entry kerf's copy of the table placed (`placed`) into the target's table:
    /// its original address last, so that a thread searching meanwhile finds it whole or not
    /// at all.
    fn publish(&self, e: &TableEntry, placed: Option<Placed>) {
        use kerf_jit::table::{overflow_at, CONT, OVERFLOW, OVERFLOW_COUNT, RET_KEY};
        let (t, orig, entry) = (&self.table, e.orig, e.entry);
        match placed {
            Some(Placed::Way(off)) => {
                t.store_u64(off as usize + 8, entry);
                t.store_u64((CONT + off) as usize, e.cont);
                t.store_u64((RET_KEY + off) as usize, if e.keyed { orig } else { 0 });
                t.store_u64(off as usize, orig);
            }
            Some(Placed::Overflow(i)) => {
                let (at, cont) = overflow_at(i);
                let at = at as usize;
                t.store_u64(cont as usize, e.cont);
                t.store_u64(at + 8, entry);
                t.store_u64(at, orig);
                let n = self.index.crowded.len().min(OVERFLOW);
                t.store_u64(OVERFLOW_COUNT as usize, n as u64);
            }
            None => {}
        }
    }

    /// Answer misses until `stop` (on demand; without a mailbox it returns at once). Each
    /// answer translates what was asked for ([`Jit::answer`]) before `ANSWERED` moves past
    /// its ticket; when it returns, no thread waits any more and none will.
    ///
    /// Meanwhile the modules whose whole-image work was left for later ([`JitOptions::early`])
    /// get it on other threads ([`whole_later`]); once a module's is done, what is translated
    /// of it from then on has frameless returns where liveness allows.
    pub fn serve(
        &mut self,
        images: &[AnalyzedImage],
        plugin: &dyn Plugin,
        late: Option<&dyn LateRings>,
        stop: &AtomicBool,
    ) {
        let later: Vec<usize> =
            (0..images.len()).filter(|&k| self.later.get(k).copied().unwrap_or(false)).collect();
        std::thread::scope(|s| {
            let whole = (!later.is_empty() && self.mailbox.is_some())
                .then(|| s.spawn(|| whole_later(images, &later, stop)));
            self.answer_misses(images, plugin, late, stop, whole);
        });
    }

    /// Every translated block's words ([`BlockWords`]), sorted by module and start: one
    /// entry a block, the sum over the translations that hold it, named after the first
    /// translation's function (a block of two functions, the second translated on demand
    /// after the first, counts in both).
    pub fn block_words(&self) -> Vec<BlockWords> {
        let words = self.words();
        let held: usize = self.caches.iter().map(|c| c.translation.blocks.len()).sum();
        let mut v = Vec::with_capacity(held);
        for (k, c) in self.caches.iter().enumerate() {
            for b in &c.translation.blocks {
                let n = words.get(k, b.word) + words.get(k, b.shared);
                v.push(BlockWords { at: (c.module, b.start), func: b.func, words: n, held: 1 });
            }
        }
        // (Stable: the first translation's first.)
        v.sort_by_key(|b| b.at);
        v.dedup_by(|later, first| {
            let same = later.at == first.at;
            if same {
                first.words += later.words;
                first.held += later.held;
            }
            same
        });
        v
    }

    /// Block counts worked out from counters placed off a spanning tree of each function's
    /// flow ([`JitOptions::fewer_counters`]), for every translated function that had such
    /// counters, by place in `blocks` (this JIT's [`Jit::block_words`]); `None` without
    /// them. A function whose counters do not balance, or whose branch counter did not go
    /// where the placement wanted it, is named in [`DerivedCounts::failed`] and gets no
    /// counts here. (The words read once for the rows and here, and no map of them: with
    /// the CI running beside it, the second pass over python3.11's 80 k blocks and its map
    /// took 22 ms of the end, the counts' and sides' maps into the rows 12-20 ms more.)
    pub fn derived_counts(
        &self,
        images: &[AnalyzedImage],
        blocks: &[BlockWords],
    ) -> Option<DerivedCounts> {
        use kerf_jit::counters::{derive, FunctionFlow, Inject};
        use rayon::prelude::*;
        if !self.fewer_counters {
            return None;
        }
        let all: Vec<&AnalyzedImage> = images.iter().chain(&self.extra).collect();
        let mods = modules_of(&all, &self.later, self.lazy, self.limit.is_none(), true);
        let words = self.words();
        // Each function's flow as its translations placed its counters (any one of them: the
        // placement is a function of the module alone).
        let mut flows: AddrMap<(usize, FuncId), &FunctionFlow> = AddrMap::default();
        for c in &self.caches {
            for (f, flow) in &c.translation.flows {
                flows.entry((c.module, *f)).or_insert(flow);
            }
        }
        // Summed over every translation that held them: branches' sides, and how many
        // translations placed each side's code.
        let mut sides: AddrMap<(usize, FuncId), Vec<SideCounts>> = AddrMap::default();
        // What the lookup brought to blocks whose indirect entries count it.
        let mut arrived: AddrMap<(usize, u64), u64> = AddrMap::default();
        for (j, c) in self.caches.iter().enumerate() {
            for &(start, w) in &c.translation.arrivals {
                *arrived.entry((c.module, start)).or_default() +=
                    words.get(j, w) + words.get(j, w + 8);
            }
            for br in &c.translation.branches {
                let mut v = [0u64; 2];
                for (s, w) in [br.taken, br.not_taken].iter().enumerate() {
                    v[s] = words.get(j, w[0]) + words.get(j, w[1]);
                }
                let placed = br.placed.map(u32::from);
                sides.entry((c.module, br.func)).or_default().push((br.at, v, placed));
            }
        }
        // (In order, so that what fails is said in the same order run after run.)
        let mut funcs: Vec<(usize, FuncId)> = flows.keys().copied().collect();
        funcs.sort_unstable();
        // What came in through the entries misses made, by module: where, and how much.
        let mut stubs: AddrMap<usize, Vec<(u64, u64)>> = AddrMap::default();
        for sc in &self.stub_counts {
            let n = words.area(&sc.area, sc.word as u64) + words.area(&sc.area, sc.word as u64 + 8);
            stubs.entry(sc.module).or_default().push((sc.target, n));
        }
        drop(words);
        // The threads that came in or left where the graphs have no way, by function.
        let mut strays: AddrMap<(usize, FuncId), Vec<Stray>> = AddrMap::default();
        for st in &self.strays {
            let Some(k) = self.module_at(&all, st.at) else { continue };
            let Some(f) = kerf_jit::region::function_containing(&mods[k], st.at) else { continue };
            strays.entry((k, f)).or_default().push(*st);
        }
        let uncounted = &self.stub_targets;
        // One function's counts (functions apart, side by side).
        let one = |&(k, f): &(usize, FuncId)| -> Option<Worked> {
            let m = &mods[k];
            let flow = *flows.get(&(k, f))?;
            let n = flow.blocks.len();
            let start = |i: usize| m.runtime(flow.starts[i]);
            let mut counted = vec![0u64; n];
            let mut side_counts = vec![[0u64; 2]; n];
            let mut placed = vec![[0u32; 2]; n];
            // (The branch ends its block: its address is the block's last instruction's.)
            for &(at, v, p) in sides.get(&(k, f)).into_iter().flatten() {
                if let Some(i) = flow.holding(at) {
                    for s in 0..2 {
                        side_counts[i][s] += v[s];
                        placed[i][s] += p[s];
                    }
                }
            }
            // Each block's place in `blocks` (a block no translation held ran nothing).
            let place: Vec<Option<usize>> = (0..n)
                .map(|i| blocks.binary_search_by_key(&(k, start(i)), |b| b.at).ok())
                .collect();
            let own: Vec<(u64, u32)> = place
                .iter()
                .map(|p| p.map_or((0, 0), |p| (blocks[p].words, blocks[p].held)))
                .collect();
            let mut missing = None;
            for (i, &(v, held)) in own.iter().enumerate() {
                if flow.placement.blocks[i] {
                    counted[i] = v;
                }
                for s in 0..2 {
                    if flow.placement.sides[i][s] && placed[i][s] != held {
                        missing = Some(start(i));
                    } else if !flow.placement.sides[i][s] {
                        side_counts[i][s] = 0;
                    }
                }
            }
            let name = &m.cfg.function(f).name;
            // Entered by an indirect jump where the placement knew no way in, by an entry
            // that could not count: inside a block, or at the start of one no edge from
            // outside reaches.
            let entered = uncounted.iter().filter(|&&(j, _)| j == k).find_map(|&(_, t)| {
                let i = flow.holding(t)?;
                (t != start(i) || !flow.blocks[i].from_outside).then_some(t)
            });
            if let Some(at) = entered {
                let why =
                    format!("entered at {at:#x} by an indirect jump its flow graph does not have");
                return Some(Worked::Failed(name.clone(), why));
            }
            if let Some(at) = missing {
                let why = format!("the branch counter at the end of block {at:#x} was not placed");
                return Some(Worked::Failed(name.clone(), why));
            }
            let mut inject: Vec<Inject> = (0..n)
                .filter_map(|i| {
                    let amount = *arrived.get(&(k, start(i)))?;
                    let amount = i64::try_from(amount).ok()?;
                    Some(Inject { block: i, inside: false, amount })
                })
                .collect();
            // What came in through the entries misses made, and the threads taken in or
            // brought out: at a block's start before its counter, or past it.
            for &(target, amount) in stubs.get(&k).into_iter().flatten() {
                let Some(i) = flow.holding(target) else { continue };
                let Ok(amount) = i64::try_from(amount) else { continue };
                inject.push(Inject { block: i, inside: target != start(i), amount });
            }
            for st in strays.get(&(k, f)).into_iter().flatten() {
                let Some(i) = flow.holding(st.at) else { continue };
                let inside = st.at != start(i) || st.past;
                inject.push(Inject { block: i, inside, amount: st.amount });
            }
            let flows = match derive(&flow.blocks, &flow.placement, &counted, &side_counts, &inject)
            {
                Ok(flows) => flows,
                Err(e) => return Some(Worked::Failed(name.clone(), e.to_string())),
            };
            let counts = flows.blocks;
            // (The sides of blocks that end in a conditional branch the flow graph has.)
            let sides = (flows.sides.into_iter().enumerate())
                .filter(|&(i, _)| flow.blocks[i].outs.iter().any(|o| o.side.is_some()))
                .filter_map(|(i, s)| Some((place[i]?, s)))
                .collect();
            let check = m.counting.is_some_and(|f| f.check);
            let mismatched = (counts.iter().zip(&own).enumerate())
                .filter(|&(_, (&c, &(v, _)))| check && v != c)
                .map(|(i, (&c, &(v, _)))| (name.clone(), start(i), v, c))
                .collect();
            Some(Worked::Derived {
                counter_runs: counted.iter().sum::<u64>()
                    + side_counts.iter().flatten().sum::<u64>(),
                block_runs: counts.iter().sum::<u64>(),
                counted_blocks: flow.placement.blocks.iter().filter(|&&c| c).count(),
                counted_sides: flow.placement.sides.iter().flatten().filter(|&&c| c).count(),
                checked: if check { n } else { 0 },
                mismatched,
                blocks: n,
                counts: (counts.into_iter().enumerate())
                    .filter_map(|(i, c)| Some((place[i]?, c)))
                    .collect(),
                sides,
            })
        };
        let worked: Vec<Option<Worked>> = funcs.par_iter().map(one).collect();
        let mut out = DerivedCounts {
            strays: self.strays.len(),
            strays_unknown: self.strays_unknown,
            counts: Vec::with_capacity(blocks.len()),
            ..DerivedCounts::default()
        };
        for w in worked.into_iter().flatten() {
            match w {
                Worked::Failed(name, why) => out.failed.push((name, why)),
                Worked::Derived {
                    blocks,
                    counts,
                    sides,
                    counter_runs,
                    block_runs,
                    counted_blocks,
                    counted_sides,
                    checked,
                    mismatched,
                } => {
                    out.functions += 1;
                    out.blocks += blocks;
                    out.counter_runs += counter_runs;
                    out.block_runs += block_runs;
                    out.counted_blocks += counted_blocks;
                    out.counted_sides += counted_sides;
                    out.checked += checked;
                    out.mismatched.extend(mismatched);
                    out.counts.extend(counts);
                    out.sides.extend(sides);
                }
            }
        }
        Some(out)
    }

    /// Keep how often each module's blocks ran (`blocks` that ran, [`Jit::block_words`] with
    /// their worked-out counts in) and their branches' sides where they were worked out
    /// (`sides`, [`DerivedCounts::sides`]), for the next run's counter placement from the
    /// same roots ([`JitOptions::fewer_counters`]); nothing without it or without hints.
    pub fn keep_weights(
        &self,
        images: &[AnalyzedImage],
        blocks: &[BlockWords],
        sides: &[(usize, [u64; 2])],
    ) {
        let Some(key) = self.weights_key else { return };
        let mut side_of: Vec<Option<[u64; 2]>> = vec![None; blocks.len()];
        for &(p, s) in sides {
            if let Some(o) = side_of.get_mut(p) {
                *o = Some(s);
            }
        }
        let mut by_module: BTreeMap<usize, Vec<kerf_jit::counters::Ran>> = BTreeMap::new();
        for (b, &sides) in blocks.iter().zip(&side_of).filter(|(b, _)| b.words != 0) {
            let (k, start) = b.at;
            let Some(m) = images.get(k) else { continue };
            let start = start.wrapping_sub(m.bias.unwrap_or(0));
            let count = b.words;
            by_module.entry(k).or_default().push(kerf_jit::counters::Ran { start, count, sides });
        }
        for (k, w) in by_module {
            images[k].keep_jit_weights(key, &w);
        }
    }

    /// Keep beside the cache entry of each module this run translated the functions known to
    /// have run from the same roots ([`AnalyzedImage::keep_jit_hint`]): those the hint named,
    /// with those this run found ran (their marks, or under a plugin that counts blocks their
    /// blocks' counts, and those misses asked into). The next run translates them ahead.
    pub fn keep_hints(&self, images: &[AnalyzedImage]) {
        let Some(h) = &self.hints else { return };
        // (Modules mapped after the start too.)
        for (k, (m, r)) in images.iter().chain(&self.extra).zip(&h.modules).enumerate() {
            let mut caches =
                self.caches.iter().enumerate().filter(|(_, c)| c.module == k).peekable();
            if caches.peek().is_none() {
                continue;
            }
            let mut ran: BTreeSet<FuncId> = r.known.iter().chain(&r.asked).copied().collect();
            for (j, c) in caches {
                // Marks lie in the words of entry blocks and of blocks entered from elsewhere
                // (`kerf_jit::translate::Scope::marks`); a word no mark or count was written
                // to holds 0.
                let unknown = c.translation.blocks.iter().filter(|b| !r.known.contains(&b.func));
                for b in unknown {
                    if kerf_jit::translate::ran(self.word(j, b.word), self.word(j, b.shared)) {
                        ran.insert(b.func);
                    }
                }
            }
            if ran.len() > r.known.len() || !r.read {
                m.keep_jit_hint(h.key, &ran.into_iter().collect::<Vec<_>>());
            }
        }
    }

    /// `LISTEN`'s value while kerf answers misses: 1, or 0 once a thread runs under a seccomp
    /// filter kerf did not ask (`JitStats::deaf_since`: no thread may wait on a futex).
    fn listen(&self) -> u32 {
        u32::from(self.stats.deaf_since.is_none())
    }

    /// A watch for seccomp filters installed after kerf asked the threads' ([`SeccompWatch`]).
    pub fn seccomp_watch(&self) -> SeccompWatch {
        let now = Instant::now();
        SeccompWatch {
            pid: self.pid,
            asked: self.seccomp_asked,
            began: now,
            next: now,
            since: None,
        }
    }

    /// What ends [`Jit::serve`]'s idle wait at once once its `stop` is set (it waits on the
    /// mailbox's `POSTED` word, at most 20 ms at a time): the caller wakes it after setting
    /// `stop`, until it returns (a wake before its wait begins is lost), so that kerf's
    /// summary does not wait for the timeout. `None` without a mailbox.
    pub fn serve_waker(&self) -> Option<kerf_os::ptrace::FutexWaker> {
        self.mailbox.as_ref().map(|m| m.waker(mb::POSTED as usize))
    }

    /// A module's whole-image work, done by [`whole_later`]: its translations from now on may
    /// have frameless returns; one whose whole check failed keeps translating with frames,
    /// from functions checked one by one (as splicing would), and the failure is reported.
    fn whole_done(&mut self, images: &[AnalyzedImage], done: WholeDone) {
        for (k, r) in done {
            match r {
                Ok(true) => self.later[k] = false,
                Ok(false) => {}
                Err(detail) => {
                    let path = images[k].path.display();
                    let why = format!(
                        "{path}: {detail} (found by its whole check after the cache was live: \
                         its functions are still checked one by one, and their returns keep \
                         their frames)"
                    );
                    self.stats.analysis_rejected.push(why);
                }
            }
        }
    }

    /// [`Jit::serve`]'s loop; `whole`, the thread doing the whole-image work left for later.
    fn answer_misses(
        &mut self,
        images: &[AnalyzedImage],
        plugin: &dyn Plugin,
        late: Option<&dyn LateRings>,
        stop: &AtomicBool,
        mut whole: Option<std::thread::ScopedJoinHandle<'_, WholeDone>>,
    ) {
        let Some(mbox) = self.mailbox.take() else { return };
        let mut extra = std::mem::take(&mut self.extra);
        let (posted_at, answered_at) = (mb::POSTED as usize, mb::ANSWERED as usize);
        self.publish_ranges(&images.iter().chain(&extra).collect::<Vec<_>>(), &mbox);
        let began = Instant::now();
        self.serving_since = Some(began);
        self.look_and_place(images, &mut extra, plugin, late, &mbox);
        mbox.store_u32(mb::LISTEN as usize, 1);
        let mut last_hook_look = began;
        let mut last_reclaim = began;
        let mut last_look = began;
        let mut seccomp = self.seccomp_watch();
        // (`KERF_JIT_SLOW_ANSWERS=MS`: each batch of questions answered that much later, as
        // by a kerf busy past a thread's wait, for the test of that.)
        let slow = std::env::var("KERF_JIT_SLOW_ANSWERS").ok().and_then(|v| v.parse().ok());
        let slow = slow.map(Duration::from_millis);
        while !stop.load(Ordering::Relaxed) {
            // A filter kerf did not ask may forbid the futex calls: no thread waits from now
            // on (the tickets already posted are still answered).
            if self.stats.deaf_since.is_none() && seccomp.changed() {
                self.stats.deaf_since = seccomp.since;
                mbox.store_u32(mb::LISTEN as usize, 0);
            }
            if whole.as_ref().is_some_and(|h| h.is_finished()) {
                if let Some(Ok(done)) = whole.take().map(|h| h.join()) {
                    self.stats.later_done = Some(began.elapsed());
                    self.whole_done(images, done);
                }
            }
            let (posted, answered) = (mbox.load_u32(posted_at), mbox.load_u32(answered_at));
            if posted == answered {
                // A thread whose wait timed out cleared LISTEN; one that gave up just after
                // kerf's last answer set it again would leave it cleared for good (no miss
                // asks any more, so no answer sets it). kerf is here and idle: listen again.
                if mbox.load_u32(mb::LISTEN as usize) == 0 && self.stats.deaf_since.is_none() {
                    self.stats.timeouts += 1;
                    mbox.store_u32(mb::LISTEN as usize, 1);
                }
                // Idle: the counter slabs of threads that ended taken back (a thread that
                // ends and a thread made next, as a pool of short-lived threads does, would
                // otherwise run them out); then the rest of a walk an answer left for later,
                // a step at a time. First, a module a thread outside the cache unmapped (its
                // `munmap` is not translated, so it asks nothing): looked for now and then.
                if last_look.elapsed() >= UNMAP_LOOK {
                    last_look = Instant::now();
                    if !self.drop_unmapped(images, &extra, plugin, &mbox, false) {
                        break;
                    }
                }
                if last_hook_look.elapsed() >= HANDLER_LOOK {
                    last_hook_look = Instant::now();
                    self.look_and_place(images, &mut extra, plugin, late, &mbox);
                }
                if let Some(s) = self.slabs.as_mut().filter(|_| last_reclaim.elapsed() >= RECLAIM) {
                    if s.reclaim() > 0 {
                        *self.slab_totals.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
                    }
                    last_reclaim = Instant::now();
                }
                if !self.deferred.is_empty() {
                    let all: Vec<&AnalyzedImage> = images.iter().chain(&extra).collect();
                    let t = Instant::now();
                    self.translate_deferred(
                        &all,
                        &modules_of(
                            &all,
                            &self.later,
                            self.lazy,
                            self.limit.is_none(),
                            self.fewer_counters,
                        ),
                        plugin,
                    );
                    self.stats.serving += t.elapsed();
                    continue;
                }
                mbox.futex_wait(posted_at, posted, Duration::from_millis(20));
                continue;
            }
            if let Some(d) = slow {
                std::thread::sleep(d);
            }
            let t = Instant::now();
            let mut targets = Vec::new();
            let mut resumes = Vec::new();
            // (Signal handlers' questions: not misses.)
            let mut questions = 0u64;
            let mut unmapped = false;
            let mut loaded = false;
            let mut handlers = Vec::new();
            let mut ticket = answered;
            // The tickets from `answered` on that are answered in their slots as they are read
            // (signal handlers' questions, `siglongjmp`'s) are counted answered before this
            // batch's work (see below); `early` is the first ticket past them.
            let mut early = answered;
            // Whether a handler's question was answered to go on at once (it is woken), and
            // whether a miss's ticket (or an unmap's, or the loader's) came before.
            let mut at_once = false;
            let mut miss_ahead = false;
            while ticket != posted {
                let slot = mb::slot(ticket) as usize;
                // A thread stores its target just after taking its ticket, tagged with it:
                // whatever else the slot holds (the target or answer of a ticket 256 before)
                // is not this one's. A thread stalled between the two (preempted on a busy
                // machine) is waited for a while; past that its miss goes unanswered (it
                // escapes), and its target, stored late, is never taken for another's.
                let deadline = Instant::now() + SLOT_WAIT;
                let word = loop {
                    let w = mbox.load_u64(slot);
                    let read = mb::question_of(w, ticket).is_some();
                    if read || mb::answered_in_slot(w, ticket) || Instant::now() > deadline {
                        break w;
                    }
                    std::hint::spin_loop();
                };
                if mb::answered_in_slot(word, ticket) {
                    // A handler's question answered while a flush waited
                    // (`answer_signal_questions`): its thread went on.
                    questions += 1;
                    if early == ticket {
                        early = ticket.wrapping_add(1);
                    }
                    ticket = ticket.wrapping_add(1);
                    continue;
                }
                let target = mb::question_of(word, ticket).unwrap_or(0);
                if target == 0 {
                    self.stats.slots_unread += 1;
                }
                if target & mb::ACTION == mb::ACTION {
                    // A translated `rt_sigaction` is about to install the action at this
                    // address: its handler is hooked (if it must be) before the ticket is
                    // counted answered.
                    mbox.store_u64(slot, 0);
                    // (A restorer in no module kerf knows is no action: a process forked
                    // from the target posts here too, and its action's address is read in
                    // the target's memory.)
                    let all = || images.iter().chain(&extra);
                    let action = self.action_at(target & mb::ADDRESS);
                    handlers.extend(action.filter(|&(_, r)| {
                        all().any(|m| {
                            let (lo, hi) = span(m);
                            (lo..hi).contains(&r)
                        })
                    }));
                    questions += 1;
                    ticket = ticket.wrapping_add(1);
                    continue;
                }
                if target & (mb::UNMAPPED | mb::LONGJMP) == mb::LONGJMP {
                    // A `siglongjmp` in the original code while a handler's frame was
                    // rewritten: answered in the slot, before the ticket is counted answered.
                    let back_in = self.longjmp_out(target & mb::ADDRESS, &mbox);
                    mbox.store_u64(slot, mb::answer_word(ticket, u64::from(back_in)));
                    questions += 1;
                    if early == ticket {
                        early = ticket.wrapping_add(1);
                    }
                    ticket = ticket.wrapping_add(1);
                    continue;
                }
                if target & mb::REVERSE != 0 {
                    // A signal handler's entry: answered in the slot, before the ticket is
                    // counted answered; behind a miss's ticket, which stays open while kerf
                    // translates (and may flush), marked to go on at once (`AT_ONCE`). Not
                    // behind other questions only: the entries of other threads, which ask
                    // only while every open ticket is a question, would then keep the cache
                    // address (in 4 threads faulting at once, 8,000 of 40,000 frames did).
                    mbox.store_u64(slot, self.reverse_answer(ticket, target, miss_ahead));
                    at_once |= miss_ahead;
                    questions += 1;
                    if early == ticket {
                        early = ticket.wrapping_add(1);
                    }
                    ticket = ticket.wrapping_add(1);
                    continue;
                }
                if target == mb::LOADED {
                    // The loader mapped or unmapped libraries: answered once the roots of
                    // any new library that late roots name are spliced.
                    mbox.store_u64(slot, 0);
                    loaded = true;
                    miss_ahead = true;
                    questions += 1;
                    ticket = ticket.wrapping_add(1);
                    continue;
                }
                if target & mb::RESUME != 0 {
                    // A handler sent its thread elsewhere: translated as a miss's target,
                    // answered after that.
                    let to = target & mb::ADDRESS;
                    resumes.push((ticket, slot, to));
                    targets.push(to);
                    questions += 1;
                    ticket = ticket.wrapping_add(1);
                    continue;
                }
                mbox.store_u64(slot, 0);
                miss_ahead = true;
                if target & mb::UNMAPPED != 0 {
                    unmapped = true;
                } else if target != 0 {
                    targets.push(target);
                }
                ticket = ticket.wrapping_add(1);
            }
            // A handler's question answered in its slot counts answered now, when no other
            // ticket is before it: its thread waits behind nothing of this batch. (It waited for
            // the batch's translation, and for a flush that waited for that thread's handler
            // to return: the flush was refused after all its stops, seen once in 78 flushes
            // of the suite's bounded-cache run, with kerf's beat keeping the handler waiting.)
            if early != answered {
                mbox.store_u32(answered_at, early);
            }
            if early != answered || at_once {
                mbox.futex_wake_all(answered_at);
            }
            targets.sort_unstable();
            targets.dedup();
            // Before anything is translated for these targets: one of them may be in a
            // library mapped where a module that went was.
            if unmapped && !self.drop_unmapped(images, &extra, plugin, &mbox, true) {
                break;
            }
            let known = extra.len();
            self.load_late(images, &mut extra, &targets, plugin, late);
            // (Also for a library a miss brought in: one whose notice kerf answered too late,
            // busy analysing a big library, ran before its roots were spliced.)
            if loaded || extra.len() != known {
                self.roots_loaded(images, &mut extra, plugin, late, loaded);
            }
            if extra.len() != known {
                self.publish_ranges(&images.iter().chain(&extra).collect::<Vec<_>>(), &mbox);
            }
            if self.new_handlers(&handlers) {
                self.look_and_place(images, &mut extra, plugin, late, &mbox);
                // (Unless a thread stood in a handler's first instructions: the next look.)
                if self.caught.is_some() {
                    self.handlers_seen.extend(handlers.iter().map(|h| h.0));
                }
            }
            let all: Vec<&AnalyzedImage> = images.iter().chain(&extra).collect();
            let mods =
                modules_of(&all, &self.later, self.lazy, self.limit.is_none(), self.fewer_counters);
            for (from, n) in std::mem::take(&mut self.late_ahead) {
                let mut walk = Some((from, n));
                while let Some((rest, left)) = walk.take() {
                    walk = self.translate_walk(&all, &mods, plugin, rest, left, LATE_STEP);
                    // (No answer yet: the waiting threads wait again.)
                    mbox.futex_wake_all(answered_at);
                }
            }
            for &target in &targets {
                self.answer(&all, &mods, plugin, target, &mbox);
            }
            for (ticket, slot, to) in resumes {
                let at = self.cache_at(to, false).unwrap_or(0);
                mbox.store_u64(slot, mb::answer_word(ticket, at));
            }
            self.stats.asked += u64::from(posted.wrapping_sub(answered)) - questions;
            self.stats.table_entries = self.index.entries;
            self.stats.crowded = self.index.crowded.len();
            self.stats.lost = self.index.lost();
            self.stats.lost_returns = self.index.lost_returns;
            // A flush meanwhile answered tickets past `posted`: ANSWERED never goes back.
            if (posted.wrapping_sub(mbox.load_u32(answered_at)) as i32) > 0 {
                mbox.store_u32(answered_at, posted);
            }
            // (A thread's wait gave up meanwhile: counted as when idle.)
            if mbox.load_u32(mb::LISTEN as usize) == 0 && self.listen() == 1 {
                self.stats.timeouts += 1;
            }
            mbox.store_u32(mb::LISTEN as usize, self.listen());
            mbox.futex_wake_all(answered_at);
            self.stats.serving += t.elapsed();
            // (Busy with misses, as at a launched program's start, when it installs its
            // handlers: looked for between the batches too.)
            if last_hook_look.elapsed() >= HANDLER_LOOK {
                last_hook_look = Instant::now();
                self.look_and_place(images, &mut extra, plugin, late, &mbox);
            }
        }
        // No more answers: every thread waiting goes, and no thread asks again. What escapes
        // from now on escapes while the JIT is being taken out.
        // The dump again, with what was translated on demand (and late modules).
        if let Some(dir) = std::env::var_os("KERF_JIT_DUMP") {
            let all: Vec<&AnalyzedImage> = images.iter().chain(&extra).collect();
            dump(std::path::Path::new(&dir), &all, self);
        }
        use kerf_jit::translate::{DATA_ESCAPES, DATA_UNASKED};
        let words = |c: &Cache| {
            (c.data.load_u64(DATA_ESCAPES as usize), c.data.load_u64(DATA_UNASKED as usize))
        };
        self.live_escapes = Some(self.caches.iter().map(words).collect());
        mbox.store_u32(mb::LISTEN as usize, 0);
        mbox.store_u32(answered_at, mbox.load_u32(posted_at));
        mbox.futex_wake_all(answered_at);
        self.signal_counts(&mbox);
        self.mailbox = Some(mbox);
        self.extra = extra;
    }

    /// The spans of the modules kerf translates from (`all`, but those gone), in the mailbox's
    /// `RANGES`, which a translated unmap compares its range with ([`kerf_jit::x86_64::
    /// unmap_notice`]); more than it holds: a count that makes every unmap ask.
    fn publish_ranges(&self, all: &[&AnalyzedImage], mbox: &SharedMem) {
        // Each module keeps its place (one that went has an empty range there) and modules
        // mapped later come after: a thread reading meanwhile finds every pair it reads whole
        // (the count is written after the pairs).
        let spans: Vec<(u64, u64)> = (0..all.len())
            .filter(|k| self.spaces.get(*k).is_some_and(Option::is_some))
            .map(|k| if self.gone.contains(&k) { (0, 0) } else { span(all[k]) })
            .collect();
        let at = mb::RANGES as usize;
        if spans.len() as u64 > mb::RANGES_MAX {
            mbox.store_u64(at, u64::MAX);
            return;
        }
        for (j, (lo, hi)) in spans.iter().enumerate() {
            mbox.store_u64(at + 8 + 16 * j, *lo);
            mbox.store_u64(at + 16 + 16 * j, *hi);
        }
        mbox.store_u64(at, spans.len() as u64);
        // And the code rooms, which a signal handler's hook compares the interrupted PC with
        // (rooms are never unmapped while kerf serves; more than the mailbox holds: the
        // first ones, whose handlers then see cache addresses of the rest).
        let rooms: Vec<(u64, u64)> =
            self.spaces.iter().flatten().map(|sp| (sp.code.0, sp.code.0 + sp.room)).collect();
        let at = mb::ROOMS as usize;
        let n = rooms.len().min(mb::ROOMS_MAX as usize);
        for (j, (lo, hi)) in rooms.iter().take(n).enumerate() {
            mbox.store_u64(at + 8 + 16 * j, *lo);
            mbox.store_u64(at + 16 + 16 * j, *hi);
        }
        mbox.store_u64(at, n as u64);
    }

    /// After a thread unmapped memory over a module kerf translates from (or, idle, now and
    /// then): the modules whose file is no longer mapped where it was are gone
    /// ([`Jit::gone`]), and where anything of them was translated the cache is emptied
    /// ([`Jit::flush`]) so that no table entry, link or prediction leads into their
    /// translations (a library mapped there next would run them: `dlclose` then `dlopen` of
    /// another library put it at the same address, and it ran the first one's code). The
    /// thread that asked waits in [`kerf_jit::x86_64::unmap_notice`] meanwhile; the flush
    /// steps it out and back to its clean point. With `copies_too` (a thread's notice: it may
    /// be a forked copy's), first the target's forked copies ([`Jit::copy_unmapped`]).
    /// Returns false where the flush could not be made (a forked copy shares the cache, a
    /// signal handler's frame holds a cache address) or a copy unmapped what the target
    /// keeps: then kerf answers no more, so the JIT ends ([`JitStats::unmap_refused`]).
    fn drop_unmapped(
        &mut self,
        images: &[AnalyzedImage],
        extra: &[AnalyzedImage],
        plugin: &dyn Plugin,
        mbox: &SharedMem,
        copies_too: bool,
    ) -> bool {
        let all: Vec<&AnalyzedImage> = images.iter().chain(extra).collect();
        let Ok(maps) = kerf_os::process::Process::open(self.pid).and_then(|p| p.maps()) else {
            // The process is gone: nothing of it runs.
            return true;
        };
        // A target that is ending (once its address space is taken down its maps are empty,
        // until it is reaped) runs nothing from the cache: it unmapped nothing kerf must
        // answer for. (Read as unmaps, every module went: a Go program's end was reported as
        // a `dlclose` of its executable and vDSO.)
        if maps.is_empty() {
            return true;
        }
        // Nor one that ran `exec`: its maps are the new program's, which holds nothing of
        // kerf's (the session sees the exec and ends the JIT). Read as unmaps, every module
        // went by `dlclose`, and kerf said so.
        if !self.maps_table(&maps) {
            return true;
        }
        let went: Vec<usize> = (0..all.len())
            .filter(|&k| self.spaces.get(k).is_some_and(Option::is_some) && !self.gone.contains(&k))
            .filter(|&k| !still_mapped(all[k], &maps))
            .collect();
        if copies_too {
            if let Some(why) = self.copy_unmapped(&all, &went) {
                self.give_up(why);
                return false;
            }
        }
        if went.is_empty() {
            return true;
        }
        for &k in &went {
            self.gone.insert(k);
            self.stats.unmapped.push(all[k].path.display().to_string());
            // Its roots' entries went with its code (a late root's library closed): none is
            // put back at the end, where other code may be mapped by then.
            let (lo, hi) = span(all[k]);
            self.entries.retain(|e| !(lo..hi).contains(&e.at.0));
            // Seen by the idle look, not a notice: unmapped outside the cache, and where code
            // is mapped at its addresses again by now, that code may have run the module's
            // translations from the cache meanwhile (a table hit asks kerf nothing).
            let (lo, hi) = span(all[k]);
            let again = maps.iter().any(|m| m.exec && m.start.0 < hi && lo < m.end.0);
            if !copies_too && again && self.done.get(k).is_some_and(|d| !d.is_empty()) {
                self.stats.unmapped_unseen.push(all[k].path.display().to_string());
            }
        }
        self.publish_ranges(&all, mbox);
        // Nothing translated from them (a library's dependencies whose code never ran in the
        // cache): no table entry, link or prediction leads there, and the cache stays. (An
        // escape entry for an address there leaves for whatever is mapped there then.)
        if went.iter().all(|&k| self.done.get(k).is_none_or(HashSet::is_empty)) {
            return true;
        }
        // (`KERF_JIT_NO_RETIRE`: always the flush, for the test of that path.)
        if std::env::var_os("KERF_JIT_NO_RETIRE").is_none() && self.retire_gone(&all, &went) {
            return true;
        }
        let mods =
            modules_of(&all, &self.later, self.lazy, self.limit.is_none(), self.fewer_counters);
        if self.flush(&all, &mods, plugin, mbox, 0) {
            return true;
        }
        let why = self.stats.flush_refused.last().cloned().unwrap_or_default();
        self.give_up(why);
        false
    }

    /// Take out the translations of modules `went` (gone: the program unmapped them) without
    /// a flush, while the threads run: no thread is in them (their code is unmapped, so a
    /// thread there would have no code to run natively either), so it is enough that nothing
    /// leads there any more, and the rest of the cache stays.
    ///
    /// 1. Their table entries are taken out ([`Table::retire`]): the original-address words
    ///    zeroed in the live table, so lookups and predictions (which name table ways) miss
    ///    and ask kerf, which translates what is mapped there now as a module of its own.
    /// 2. Exits of other modules' translations linked into them go back to their slow path
    ///    and wait, unlinked, for a translation of their target (a slot guard of a PLT entry
    ///    whose slot pointed there: the original code jumps to whatever is mapped there).
    /// 3. Their exits waiting for a link, their block starts and the walks still to come in
    ///    them are dropped, and their data words kept as kerf's copy (the counts stand).
    ///
    /// Their code room stays mapped until the JIT is taken out (a thread that read a table
    /// entry just before step 1 may still jump there). Returns false, changing nothing, where
    /// a flush must be made instead: an exit of a translation made before the cache ran
    /// leads into them (it may be a direct jump now), or the retired table ways would be too
    /// many ([`retired_max`]: no entry takes them until a flush makes the table anew).
    fn retire_gone(&mut self, all: &[&AnalyzedImage], went: &[usize]) -> bool {
        let spans: Vec<(u64, u64)> = went.iter().map(|&k| span(all[k])).collect();
        let gone = |a: u64| spans.iter().any(|&(lo, hi)| (lo..hi).contains(&a));
        let going = |c: &Cache| self.gone.contains(&c.module);
        let into: Vec<(usize, kerf_jit::translate::Link)> = (self.caches.iter().enumerate())
            .filter(|(_, c)| c.data.is_live() && !going(c))
            .flat_map(|(i, c)| c.translation.links.iter().map(move |l| (i, *l)))
            .filter(|(_, l)| gone(l.target))
            .collect();
        if into.iter().any(|(i, l)| self.caches[*i].direct && l.jump.is_some()) {
            return false;
        }
        let retiring = (self.caches.iter())
            .filter(|c| c.data.is_live() && went.contains(&c.module))
            .map(|c| c.translation.entries.len())
            .sum::<usize>();
        if self.index.retired + retiring > retired_max(self.ctx.hash) {
            return false;
        }
        // 1.
        for o in self.index.retire(gone) {
            self.table.store_u64(o as usize, 0);
        }
        // 2.
        for (i, l) in into {
            let waiting = self.unlinked.get(&l.target).is_some_and(|w| w.contains(&(i, l)));
            if !waiting {
                self.caches[i].data.store_at(l.word, l.slow);
                self.unlinked.entry(l.target).or_default().push((i, l));
            }
        }
        // 3.
        let dead: HashSet<usize> = (self.caches.iter().enumerate())
            .filter(|(_, c)| went.contains(&c.module))
            .map(|(i, _)| i)
            .collect();
        for waiting in self.unlinked.values_mut() {
            waiting.retain(|(i, _)| !dead.contains(i));
        }
        self.unlinked.retain(|_, w| !w.is_empty());
        self.starts.retain(|&a, _| !gone(a));
        for (walk, _) in self.deferred.iter_mut().chain(self.late_ahead.iter_mut()) {
            walk.retain(|(k, _)| !went.contains(k));
        }
        let totals = self.slabs.as_ref().map(SlabRegion::totals);
        for &i in &dead {
            if self.caches[i].data.is_live() {
                self.caches[i].data.retire(totals.as_ref());
            }
        }
        for sc in self.stub_counts.iter_mut().filter(|sc| went.contains(&sc.module)) {
            if sc.area.is_live() {
                sc.area.retire(totals.as_ref());
            }
        }
        self.stats.retired += went.iter().filter(|&&k| !self.done[k].is_empty()).count();
        true
    }

    /// Where translations may lead to code that is no longer what they were made from, and
    /// the cache cannot be emptied: every table entry's original address zeroed (not its
    /// entry word: a thread that read the first sees the second whole), so that every lookup
    /// misses and, with kerf no longer answering (the caller ends [`Jit::serve`]), leaves for
    /// the original code; predictions name table ways, so they miss too. The thread that
    /// asked leaves at its target, and the JIT is taken out next, `why` said
    /// ([`JitStats::unmap_refused`]). (A forked copy leaves as well.)
    fn give_up(&mut self, why: String) {
        for o in self.index.key_offsets() {
            self.table.store_u64(o as usize, 0);
        }
        self.stats.unmap_refused = Some(why);
    }

    /// Whether `maps` (a process's) hold kerf's lookup table: the target and its forked
    /// copies do until they end or run `exec`.
    fn maps_table(&self, maps: &[kerf_analysis::image::maps::Mapping]) -> bool {
        let table = self.table.remote();
        maps.iter().any(|m| m.start <= table && table < m.end)
    }

    /// A forked copy of the target (it shares the table) that no longer maps a module the
    /// target still does (not one of `went`, which the target unmapped too) and that kerf
    /// translated from: what the copy maps there next would run those translations, found by
    /// original address (a worker that `dlclose`s a library its parent keeps, then `dlopen`s
    /// another where it was). One table serves both, and the target still needs its entries,
    /// so no flush or retire can serve the copy: `Some(why)` for [`Jit::give_up`]. Read on a
    /// thread's notice only: a copy's maps are read from /proc, and the copies found by a
    /// look at every process started since the target.
    fn copy_unmapped(&self, all: &[&AnalyzedImage], went: &[usize]) -> Option<String> {
        let translated: Vec<usize> = (0..all.len())
            .filter(|&k| self.spaces.get(k).is_some_and(Option::is_some) && !self.gone.contains(&k))
            .filter(|&k| !went.contains(&k) && self.done.get(k).is_some_and(|d| !d.is_empty()))
            .collect();
        if translated.is_empty() {
            return None;
        }
        let Some(copies) = self.copies() else {
            return Some("kerf could not tell which processes share its code cache".into());
        };
        copies.into_iter().find_map(|c| {
            let maps = kerf_os::process::Process::open(c).and_then(|p| p.maps()).ok()?;
            // (A copy that ended or ran `exec` since it was found maps nothing of kerf's, and
            // runs nothing from the cache: an ending process's maps are empty.)
            if !self.maps_table(&maps) {
                return None;
            }
            let k = translated.iter().find(|&&k| !still_mapped(all[k], &maps))?;
            Some(format!(
                "process {c}, forked from the target, unmapped {}, whose translations it \
                 shares with the target",
                all[*k].path.display()
            ))
        })
    }

    /// Give room to the modules that `targets` fall in and that the program mapped after kerf
    /// looked (`dlopen`): analysed (from kerf's cache when it has them), then a space mapped
    /// near each with the process stopped, as at install; appended to `extra`. Where the
    /// plugins write records, the space gets rings of its own and `late` is told (before
    /// anything of the module is translated), so that it names the module's functions and
    /// reads its rings; with no `late`, or rings that find no room, the module is translated
    /// with none (`late_untraced`). A target in no file-backed module (code the program
    /// generated) is left to [`Jit::answer`]'s escape.
    fn load_late(
        &mut self,
        images: &[AnalyzedImage],
        extra: &mut Vec<AnalyzedImage>,
        targets: &[u64],
        plugin: &dyn Plugin,
        late: Option<&dyn LateRings>,
    ) {
        for &t in targets {
            let known = images.iter().chain(extra.iter()).enumerate().any(|(k, m)| {
                let (lo, hi) = span(m);
                (lo..hi).contains(&t) && !self.gone.contains(&k)
            });
            if known || self.index.find(t).is_some() {
                continue;
            }
            let path = match crate::load::module_path_at(self.pid, RemoteAddr(t)) {
                Ok(Some(path)) => path,
                // In no module of the target: perhaps a library that a process forked from
                // it mapped after the fork (nginx's workers load libnss and libm once
                // forked). kerf maps room in the target only, so its code runs natively
                // there: said, once per library.
                Ok(None) => {
                    if let Some((path, child)) = self.forked_module_at(t) {
                        let said = format!("{path}: ");
                        if !self.stats.late_refused.iter().any(|r| r.starts_with(&said)) {
                            self.stats.late_refused.push(format!(
                                "{path}: mapped by process {child}, forked from the target, \
                                 after the fork (kerf takes in the target's own libraries only)"
                            ));
                        }
                    }
                    continue;
                }
                Err(_) => continue,
            };
            // Once per module: its later misses find the escape entries `answer` gives.
            if self.stats.late_refused.iter().any(|r| r.starts_with(&format!("{path}: "))) {
                continue;
            }
            if let Some(why) = self.copy_maps_otherwise(t) {
                self.stats.late_refused.push(format!("{path}: {why}"));
                continue;
            }
            // (A module that went is not this one, even from the same file: `dlopen` again.)
            let known: Vec<&std::path::Path> = (images.iter().chain(extra.iter()).enumerate())
                .filter(|(k, _)| !self.gone.contains(k))
                .map(|(_, m)| m.path.as_path())
                .collect();
            let opts = crate::load::LoadOptions::default();
            let began = Instant::now();
            let analysed = crate::load::analyze_module_at(self.pid, RemoteAddr(t), &known, &opts);
            self.stats.late_analysis += began.elapsed();
            let m = match analysed {
                Ok(Some(m)) => m,
                Ok(None) => continue,
                // The program ended meanwhile: nothing of it will run (and "process N does
                // not exist" is no reason to give for the module).
                Err(_) if self.target_gone() => return,
                Err(e) => {
                    self.stats.late_refused.push(format!("{path}: {e}"));
                    continue;
                }
            };
            let n = m.analysis.cfg.functions.len() as u32;
            let module =
                &modules_of(&[&m], &[], self.lazy, self.limit.is_none(), self.fewer_counters)[0];
            let shape = late.and(self.rings);
            let size = space_size(whole_module_size(&m, module, n, plugin), module, &[], plugin);
            let space = Tracee::stop_all(self.pid).and_then(|mut tr| {
                // Rings that find no room: the module is translated without them.
                let sp = map_space(&mut tr, &m, size, plugin, shape).or_else(|e| {
                    if shape.is_none() {
                        return Err(e);
                    }
                    map_space(&mut tr, &m, size, plugin, None)
                });
                // The mapping's own failure first (a failed detach follows from it). A space
                // mapped before a failed detach stays in the target, unused.
                let resumed = tr.resume_detach();
                let sp = sp?;
                resumed.map(|_| sp)
            });
            match space {
                Ok(mut sp) => {
                    sp.shadow = self.slabs.as_mut().and_then(|s| s.shadow(sp.data.len() as u64));
                    if sp.rings.is_some() {
                        sp.ring_word = self.slabs.as_mut().and_then(SlabRegion::ring_word);
                    }
                    match (&sp.rings, late) {
                        (Some(rings), Some(late)) => late.added(&m, rings.clone(), sp.data.clone()),
                        _ if self.rings.is_some() => self.stats.late_untraced.push(path.clone()),
                        _ => {}
                    }
                    self.hint_late(images.len() + extra.len(), &m);
                    self.spaces.push(Some(sp));
                    self.done.push(HashSet::new());
                    extra.push(m);
                    self.stats.late_modules.push(path);
                }
                Err(_) if self.target_gone() => return,
                Err(e) => self.stats.late_refused.push(format!("{path}: {e}")),
            }
        }
    }

    /// Hints for module `k`, `m`, which the program mapped after the start: what ran of it
    /// in earlier runs from the same roots is translated before the misses that brought the
    /// module in are answered ([`Jit::late_ahead`]; python3.11's `lib-dynload` modules
    /// otherwise cost their misses again every run), and the rest of it carries ran marks.
    /// Nothing without hints.
    fn hint_late(&mut self, k: usize, m: &AnalyzedImage) {
        let Some(h) = self.hints.as_mut() else { return };
        let ran = Ran::read(m, h.key);
        if !ran.known.is_empty() {
            // (A walk from them with as many functions as they are: themselves, first.)
            let mut from: Vec<(usize, FuncId)> = ran.known.iter().map(|&f| (k, f)).collect();
            from.sort_unstable();
            self.stats.late_hinted += from.len();
            self.late_ahead.push((from, ran.known.len()));
        }
        h.modules.resize(k, Ran::default());
        h.modules.push(ran);
    }

    /// Translate more of a walk that a miss's answer stopped early (see [`ANSWER_BUDGET`]),
    /// from where it stopped, while the process runs (as any miss's answer is made):
    /// [`ANSWER_BUDGET`] functions at a time, so that a miss meanwhile waits no longer than
    /// for its own answer, up to [`BATCH_BUDGET`] in all.
    fn translate_deferred(
        &mut self,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
    ) {
        let Some((rest, left)) = self.deferred.pop() else { return };
        if let Some(more) = self.translate_walk(all, mods, plugin, rest, left, ANSWER_BUDGET) {
            self.deferred.push(more);
        }
    }

    /// Translate `step` functions (at most `left`) of a walk from `rest`; what is left of it
    /// (where it stopped, and how many functions more), if anything.
    fn translate_walk(
        &mut self,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
        rest: Vec<(usize, FuncId)>,
        left: usize,
        step: usize,
    ) -> Option<(Vec<(usize, FuncId)>, usize)> {
        // (`walk` takes its starting points as they are, and a miss since may have
        // translated some.)
        let from: Vec<(usize, FuncId)> =
            rest.into_iter().filter(|&(j, g)| !self.done[j].contains(&g)).collect();
        if from.is_empty() {
            return None;
        }
        let region = self.walk(mods, &from, step.min(left));
        self.slots.extend(&region.slots);
        let taken = region.len();
        // (A walk that took nothing would be made again and again.)
        let more = (region.capped && taken > 0 && left > taken)
            .then(|| (region.rest.clone(), left - taken));
        for (j, funcs) in region.funcs.into_iter().enumerate() {
            if !funcs.is_empty() && self.translate_more(all, mods, plugin, j, funcs, None).is_err()
            {
                break;
            }
        }
        more
    }

    /// Make `target` findable in the table: translate the function it falls in and what that
    /// reaches (up to [`BATCH_BUDGET`] functions not translated yet), give a translated block
    /// start or instruction that has no entry one, and anything else an escape entry (code
    /// outside every module, or inside an instruction, or a function there is no room left
    /// for): the thread leaves for the original code, counted, and no later miss asks for it
    /// again.
    fn answer(
        &mut self,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
        target: u64,
        mbox: &SharedMem,
    ) {
        if self.index.find(target).is_some() {
            return;
        }
        let k = self.module_at(all, target);
        let f = k.and_then(|k| Some((k, kerf_jit::region::function_containing(&mods[k], target)?)));
        let mut thrashing = false;
        // `f` was not translated for a reason of its own (too big for the cache limit, its
        // analysis refused, its translation failed): its escape is counted as that, not as
        // code kerf's analysis does not know (a `--cache-limit` run warned of both).
        let mut refused = false;
        if let Some((k, f)) = f {
            // (A thread stands in `f`: it ran, whether or not through its entry.)
            if let Some(r) = self.hints.as_mut().and_then(|h| h.modules.get_mut(k)) {
                r.asked.insert(f);
            }
            if !self.done[k].contains(&f) {
                // Without a cache limit, only the start of the walk before the answer; the
                // rest when idle (`translate_deferred`). Under a limit the walk is small
                // already and a later one could flush.
                let most = if self.limit.is_some() { BATCH_BUDGET } else { ANSWER_BUDGET };
                let mut region = self.batch(mods, k, f, plugin, most);
                // No room left under the cache limit: flush, unless `f` could never fit. The
                // thread that asked stands at `target` then, so the flush translates `f` first
                // of the functions threads stand in (step 7); its callees come on demand. (A
                // walk starts from `f` even when it is translated.)
                let ever = self.could_fit(mods, k, f, plugin);
                thrashing = region.is_none() && ever && self.thrashing();
                if thrashing {
                    self.stats.thrash_escapes += 1;
                }
                if region.is_none() && ever && !thrashing {
                    if !self.flush(all, mods, plugin, mbox, target) {
                        // Known code with no room, the flush refused (a handler's frame held
                        // the cache, a forked copy shares it): an escape said as that, not as
                        // code kerf's analysis does not know.
                        refused = true;
                    } else if !self.done[k].contains(&f) {
                        region = self.batch(mods, k, f, plugin, most);
                    }
                }
                if region.is_none() && !ever {
                    self.note_too_big(all, mods, plugin, k, f);
                    refused = true;
                }
                if let Some(r) = &region {
                    self.slots.extend(&r.slots);
                }
                if let Some(r) = region.as_ref().filter(|r| r.capped && self.limit.is_none()) {
                    self.deferred.push((r.rest.clone(), BATCH_BUDGET - ANSWER_BUDGET));
                }
                for (j, funcs) in
                    region.map(|r| r.funcs).unwrap_or_default().into_iter().enumerate()
                {
                    // No room left (or the write failed): the escape entry below.
                    if !funcs.is_empty()
                        && self.translate_more(all, mods, plugin, j, funcs, None).is_err()
                    {
                        refused = true;
                        break;
                    }
                }
            }
        }
        if thrashing || self.index.find(target).is_some() {
            return;
        }
        // A block start with no entry, or an instruction inside a translated block (the
        // copied instruction's clean point: the program's state there is the thread's), gets
        // an indirect entry.
        let inside = || self.cache_at(target, false);
        match self.starts.get(&target).copied().or_else(inside) {
            Some(to) => {
                let k = k.expect("a translated block is in a module");
                // Under fewer counters the entry counts what comes in by it; one that could
                // not leaves its function's counts underivable, said so.
                let counted = self.fewer_counters
                    && self.add_counting_stub(k, target, to, plugin).unwrap_or(false);
                if !counted && self.add_stub(k, target, Some(to)).is_ok() && self.fewer_counters {
                    self.stub_targets.push((k, target));
                }
            }
            None => {
                let home = self.caches.first().map(|c| c.module);
                if let Some(home) = home {
                    if !refused {
                        self.stats.untranslatable += 1;
                    }
                    let _ = self.add_stub(home, target, None);
                }
            }
        }
    }

    /// Whether flushes took more than [`JitOptions::flush_share`] of the last
    /// [`THRASH_WINDOW`] (those older than it are forgotten here).
    fn thrashing(&mut self) -> bool {
        if self.flush_share >= 1.0 {
            return false;
        }
        let now = Instant::now();
        while self.recent_flushes.front().is_some_and(|&(end, _)| now - end > THRASH_WINDOW) {
            self.recent_flushes.pop_front();
        }
        let busy: Duration = self.recent_flushes.iter().map(|&(_, took)| took).sum();
        busy.as_secs_f64() > THRASH_WINDOW.as_secs_f64() * self.flush_share
    }

    /// Whether function `f` of module `k` fits the limit beside the roots (kerf's estimate):
    /// else no flush makes room for it.
    fn could_fit(&self, mods: &[Module<'_>], k: usize, f: FuncId, plugin: &dyn Plugin) -> bool {
        let need = kerf_jit::room_for(&mods[k], &[f], plugin);
        self.limit.is_none_or(|l| self.roots_bytes + need <= l)
    }

    /// Under a cache limit, function `f` of module `k` cannot fit even in an emptied cache
    /// (beside the roots): said once per function (`JitStats::too_big`), with what kerf's
    /// estimate says its translation needs.
    fn note_too_big(
        &mut self,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
        k: usize,
        f: FuncId,
    ) {
        let name = &mods[k].cfg.function(f).name;
        let module = all[k].path.file_name().map_or(String::new(), |n| n.to_string_lossy().into());
        let need = kerf_jit::room_for(&mods[k], &[f], plugin).div_ceil(1024);
        let said = format!("{module}: {name} ({need} KiB)");
        if !self.stats.too_big.contains(&said) {
            self.stats.too_big.push(said);
        }
    }

    /// The walk over direct calls (and fixed slots, as they are in the target now) from
    /// `from`, up to `budget` functions, never into one translated already.
    fn walk(
        &self,
        mods: &[Module<'_>],
        from: &[(usize, FuncId)],
        budget: usize,
    ) -> kerf_jit::Region {
        let slot = |a: u64| {
            let mut b = [0u8; 8];
            self.mem.read(RemoteAddr(a), &mut b).ok().map(|()| u64::from_le_bytes(b))
        };
        let skip = |j: usize, g: FuncId| self.done[j].contains(&g);
        closure(mods, from, &slot, budget, false, &skip)
    }

    /// What a miss at function `f` of module `k` brings in: the walk from it over direct
    /// calls, up to `most` functions not translated yet, and under a cache limit
    /// only as many as fit in the room left by kerf's estimate (`room_for`, an upper bound)
    /// and in a quarter of the limit: `None` when not even `f` fits the room left.
    fn batch(
        &self,
        mods: &[Module<'_>],
        k: usize,
        f: FuncId,
        plugin: &dyn Plugin,
        most: usize,
    ) -> Option<kerf_jit::Region> {
        let mut budget = most;
        loop {
            let region = self.walk(mods, &[(k, f)], budget);
            let Some(limit) = self.limit else { return Some(region) };
            let need: u64 = (region.funcs.iter().enumerate())
                .filter(|(_, fs)| !fs.is_empty())
                .map(|(j, fs)| kerf_jit::room_for(&mods[j], fs, plugin))
                .sum();
            // One miss's batch takes at most a quarter of the limit (so that a flush is
            // followed by several misses' worth of room, not filled by the first), but the
            // function asked for alone may take all the room left.
            let share = budget == 1 || need <= limit / 4;
            if self.cache_bytes() + need <= limit && share {
                return Some(region);
            }
            if budget == 1 {
                return None;
            }
            budget = (budget / 4).max(1);
        }
    }

    /// Translate `funcs` of module `k` into the rest of its room, and adopt them live; with
    /// `cap`, only if the cache then holds no more code than that (else nothing is done).
    fn translate_more(
        &mut self,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
        k: usize,
        funcs: Vec<FuncId>,
        cap: Option<u64>,
    ) -> Result<(), JitFail> {
        let Some(sp) = &self.spaces[k] else { return Ok(()) };
        // As at install (`check_region`); a module that fails is refused for the rest of the
        // run: its misses get escape entries and the thread runs the original code.
        let later = self.later.get(k).copied().unwrap_or(false);
        let checked = match self.refused.get(&k) {
            Some(detail) => Err(detail.clone()),
            None => check_funcs(all[k], &funcs, later).inspect_err(|detail| {
                let path = all[k].path.display();
                self.stats.analysis_rejected.push(format!("{path}: {detail}"));
                self.refused.insert(k, detail.clone());
            }),
        };
        if let Err(detail) = checked {
            return Err(JitFail::Analysis { module: k, path: all[k].path.clone(), detail });
        }
        let data_need = kerf_jit::data_for(&mods[k], &funcs);
        if sp.data_used + data_need > sp.data.len() as u64 {
            return Ok(());
        }
        // (A module first reached on demand: its kept facts checked, or solved and kept.)
        if mods[k].returns.is_some() {
            let _ = all[k].ensure_returns();
        }
        let layout = self.next_layout(sp, STUB_ROOM / 2);
        let name = all[k].path.display().to_string();
        let reached: HashSet<FuncId> = funcs.iter().copied().collect();
        let ran = self.hints.as_ref().and_then(|h| h.modules.get(k));
        let landings = ran.map(|r| landings_for(&all[k].analysis.cfg, &funcs, &r.known));
        let marks = ran.zip(landings.as_ref()).map(|(r, l)| Marks { known: &r.known, landings: l });
        let scope = Scope { roots: &self.ctx.roots, reached: &reached, slots: &self.slots, marks };
        let t = kerf_jit::translate(&name, &mods[k], &funcs, &layout, plugin, &self.ctx.at, &scope)
            .map_err(JitFail::Translate)?;
        if cap.is_some_and(|l| self.cache_bytes() + t.code.len() as u64 > l) {
            return Ok(());
        }
        self.stats.added_functions += funcs.len();
        self.adopt(k, t, funcs, true, false)?;
        Ok(())
    }

    /// Write a table entry's stub into module `k`'s room: an indirect entry for the block
    /// translated at `to`, or (`None`) an escape entry for `target`, counted in the module's
    /// first translation's data.
    fn add_stub(&mut self, k: usize, target: u64, to: Option<u64>) -> Result<(), JitFail> {
        let name = String::from("stub");
        let Some(sp) = &self.spaces[k] else { return Ok(()) };
        let at = sp.code.0 + sp.used;
        let bytes = match to {
            Some(to) => kerf_jit::entry_stub(&name, at, to),
            None => {
                let Some(c) = self.live_caches().find(|c| c.module == k) else { return Ok(()) };
                kerf_jit::escape_stub(&name, at, target, c.data.remote().0)
            }
        }
        .map_err(JitFail::Translate)?;
        if sp.used + bytes.len() as u64 > sp.room {
            return Ok(());
        }
        sp.code_mem.write_bytes(sp.used as usize, &bytes);
        if let Some(sp) = self.spaces[k].as_mut() {
            sp.used = (sp.used + bytes.len() as u64).next_multiple_of(16);
        }
        // A `ret` to an escape target goes straight to it.
        // (A translated block with no entry, or a target kerf cannot translate: either may
        // be anywhere, as any block.)
        // (Keyed only for a translation: a frameless call to an escape target takes the
        // framed probe, whose entry counts it.)
        let e = TableEntry {
            orig: target,
            entry: at,
            cont: to.unwrap_or(target),
            rank: 2,
            keyed: to.is_some(),
            returned_to: false,
        };
        self.insert(e, true);
        Ok(())
    }

    /// Where code made now for module room `sp` goes: its next free bytes (`keep` of the
    /// room's end left for the stubs misses make) and data words.
    fn next_layout(&self, sp: &Space, keep: u64) -> Layout {
        Layout {
            code: sp.code.0 + sp.used,
            room: sp.room.saturating_sub(sp.used + keep),
            table: self.table.remote().0,
            hash: self.ctx.hash,
            data: sp.data.remote().0 + sp.data_used,
            mailbox: self.ctx.mailbox,
            owner_tid: self.ctx.owner_tid,
            threads: sp.threads(),
            rings: sp.rings(),
            routines: sp.routines,
            state: self.state.as_ref().map_or(0, |s| s.remote().0),
            slabs: self.slabs.as_ref().map(|s| s.seq),
            per_thread: sp.shadow.map(|h| SlabRegion::per_thread(sp.data.remote().0, h)),
            ring_word: sp.ring_word,
            load_hook: sp.load_hook,
        }
    }

    /// [`Jit::add_stub`] for a translated block at `to` under fewer counters: an entry for
    /// `target` that counts its arrivals ([`kerf_jit::counting_entry_stub`]) in a data area
    /// of its own ([`StubCount`]). `false` where it made none (no room left, or the plugin
    /// counts nothing there).
    fn add_counting_stub(
        &mut self,
        k: usize,
        target: u64,
        to: u64,
        plugin: &dyn Plugin,
    ) -> Result<bool, JitFail> {
        use kerf_jit::translate::{DATA_HEADER, DATA_OWNER};
        let Some(sp) = &self.spaces[k] else { return Ok(false) };
        // The header (the owner word that counters without slabs read) and the two words.
        let need = DATA_HEADER + 16;
        if sp.data_used + need > sp.data.len() as u64 {
            return Ok(false);
        }
        let layout = self.next_layout(sp, 0);
        let stub = kerf_jit::counting_entry_stub("stub", &layout, plugin, &self.ctx.at, target, to)
            .map_err(JitFail::Translate)?;
        let Some(bytes) = stub.filter(|b| sp.used + b.len() as u64 <= sp.room) else {
            return Ok(false);
        };
        let off = sp.data_used;
        let area = Area {
            mem: sp.data.clone(),
            off: off as usize,
            len: need as usize,
            kept: None,
            shadow: sp.shadow.map(|s| s + off),
        };
        // (Fresh words: a flush zeroes what it frees, and nothing used these before.)
        area.store_u64(DATA_OWNER as usize, self.ctx.owner);
        area.store_u64(DATA_HEADER as usize, 0);
        area.store_u64(DATA_HEADER as usize + 8, 0);
        sp.code_mem.write_bytes(sp.used as usize, &bytes);
        let at = layout.code;
        if let Some(sp) = self.spaces[k].as_mut() {
            sp.used = (sp.used + bytes.len() as u64).next_multiple_of(16);
            sp.data_used = (off + need).next_multiple_of(64);
        }
        let word = DATA_HEADER as usize;
        self.stub_counts.push(StubCount { module: k, target, area, word });
        // (Not keyed: the entry counts the arrival.)
        let e = TableEntry {
            orig: target,
            entry: at,
            cont: to,
            rank: 2,
            keyed: false,
            returned_to: false,
        };
        self.insert(e, true);
        Ok(true)
    }

    /// Hook the program's signal handlers when the signals it catches changed since the last
    /// look (at the start of serving, then every [`HANDLER_LOOK`], idle or between batches: a
    /// program launched by kerf installs its handlers after the JIT is in). A handler that
    /// replaces another on a signal already caught changes nothing here: it is seen only if
    /// the cache installed it ([`Jit::notice_handlers`]). See [`Jit::hook_handlers`].
    fn look_for_handlers(&mut self, all: &[&AnalyzedImage]) {
        if self.ctx.mailbox.is_none() || std::env::var_os("KERF_JIT_NO_SIGNAL_HOOKS").is_some() {
            return;
        }
        let caught = kerf_os::process::caught_signals(&kerf_os::process::RealSys, self.pid);
        let unchanged = caught.is_none_or(|c| c == 0) || caught == self.caught;
        let longjmps = self.longjmps_placed || self.hooks.is_empty();
        if unchanged && self.pending.is_empty() && self.sites_placed && longjmps {
            return;
        }
        self.caught = caught;
        self.stats.signals.looks += 1;
        if let Err(e) = self.hook_handlers(all, caught.unwrap_or(0)) {
            // (A process that ended meanwhile needs no hooks, nor one that ran `exec`: the
            // signals the new program catches are not the ones kerf looked for.)
            if !self.target_gone() && !self.target_execed() {
                self.stats.signals.failed.push(e.to_string());
            }
        }
    }

    /// The handler and restorer of the kernel's `struct sigaction` at `at` in the target, as
    /// a translated `rt_sigaction` is about to give it (its notice, see
    /// [`kerf_jit::x86_64::action_notice`]); `None` for `SIG_DFL`, `SIG_IGN`, an action
    /// without a restorer (the hook needs one) or one kerf cannot read (the call will fail
    /// with `EFAULT`).
    fn action_at(&self, at: u64) -> Option<(u64, u64)> {
        const SA_RESTORER: u64 = 0x0400_0000;
        let mut b = [0u8; 24];
        self.mem.read(RemoteAddr(at), &mut b).ok()?;
        let w = |k: usize| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        let (handler, flags, restorer) = (w(0), w(1), w(2));
        (handler > 1 && flags & SA_RESTORER != 0).then_some((handler, restorer))
    }

    /// Whether any of `handlers` (with their restorers), which translated `rt_sigaction`s are
    /// about to install, is one kerf has not read before: then they wait in
    /// [`Jit::pending`] for the look kerf makes now, whatever `SigCgt` says (a handler that
    /// replaces another changes nothing there, and the kernel does not have it yet), while the
    /// threads that install them wait.
    fn new_handlers(&mut self, handlers: &[(u64, u64)]) -> bool {
        self.stats.signals.noticed += handlers.len() as u64;
        let new: Vec<(u64, u64)> = (handlers.iter())
            .filter(|(h, _)| !self.handlers_seen.contains(h))
            .filter(|(h, _)| !self.hooks.iter().any(|k| k.entry.at.0 == *h))
            .copied()
            .collect();
        for a in &new {
            if !self.pending.contains(a) {
                self.pending.push(*a);
            }
        }
        !new.is_empty()
    }

    /// [`Jit::look_for_handlers`]; then, for handlers it found in a library kerf has not
    /// loaded (`dlopen`ed by code outside the cache: a JVM's handlers are in `libjvm.so`),
    /// that library loaded as a miss into it would load it ([`Jit::load_late`]: analysed,
    /// given a code room) and the handlers looked at again. One whose library cannot be
    /// loaded is named in `signals.unhooked`.
    fn look_and_place(
        &mut self,
        images: &[AnalyzedImage],
        extra: &mut Vec<AnalyzedImage>,
        plugin: &dyn Plugin,
        late: Option<&dyn LateRings>,
        mbox: &SharedMem,
    ) {
        self.look_for_handlers(&images.iter().chain(extra.iter()).collect::<Vec<_>>());
        let unplaced = std::mem::take(&mut self.unplaced);
        if unplaced.is_empty() {
            return;
        }
        let known = extra.len();
        self.load_late(images, extra, &unplaced, plugin, late);
        if extra.len() != known {
            let all: Vec<&AnalyzedImage> = images.iter().chain(extra.iter()).collect();
            self.publish_ranges(&all, mbox);
            self.caught = None;
            self.look_for_handlers(&all);
        }
        for h in std::mem::take(&mut self.unplaced) {
            self.pending.retain(|p| p.0 != h);
            let name = mapped_name(self.pid, h);
            let line = format!("{name}: in no module kerf could give a code room");
            if !self.stats.signals.unhooked.contains(&line) {
                self.stats.signals.unhooked.push(line);
            }
        }
    }

    /// Hook every handler of the signals in `caught` not hooked yet, with every thread
    /// stopped (see [`kerf_jit::x86_64::signal`]): a handler that interrupts a thread in
    /// the cache then sees the original address it stands for as the interrupted PC (at a
    /// clean point; elsewhere it sees the cache address, as without the hook), and the thread
    /// goes on in the cache after it unless the handler sent it elsewhere.
    ///
    /// 1. Each action read with an injected `rt_sigaction(sig, NULL, scratch)` (the scratch
    ///    words are the mailbox's): its handler, flags and restorer.
    /// 2. A handler with a restorer, whose entry is the entry of a function of a module
    ///    with a code room, not a root's entry, and whose first instructions can be moved
    ///    (as a root's entry splice moves them), gets its hook in that room's place for them
    ///    ([`Space::hook_next`]: a flush leaves it), then the jump to it at its entry (checked
    ///    against the file's bytes). A handler with a thread inside its first instructions
    ///    waits for the next look.
    fn hook_handlers(&mut self, all: &[&AnalyzedImage], caught: u64) -> Result<(), JitFail> {
        let mut tr = Tracee::stop_all(self.pid)?;
        let r = self.hook_stopped(&mut tr, all, caught);
        let resumed = tr.resume_detach();
        r?;
        resumed?;
        Ok(())
    }

    fn hook_stopped(
        &mut self,
        tr: &mut Tracee,
        all: &[&AnalyzedImage],
        caught: u64,
    ) -> Result<(), JitFail> {
        // The kernel's `struct sigaction`: handler, flags, restorer, mask.
        const SA_RESTORER: u64 = 0x0400_0000;
        let Some(mbox) = self.ctx.mailbox else { return Ok(()) };
        let scratch = mbox + mb::SCRATCH;
        let mem = tr.memory();
        let pcs: Vec<u64> =
            tr.threads().iter().filter_map(|&t| tr.regs(t).ok()).map(|r| r.pc().0).collect();
        if !self.sites_placed {
            self.splice_action_sites(&mem, all, &pcs, mbox);
        }
        let mut actions: Vec<(u64, u64)> = Vec::new();
        // (Not glibc's own SIGCANCEL and SIGSETXID, 32 and 33: their handlers never read the
        // interrupted PC, and libc may have no code room to hook them from.)
        let glibc_internal = |n: u64| n == 32 || n == 33;
        for sig in (1..=64u64).filter(|&n| caught & (1 << (n - 1)) != 0 && !glibc_internal(n)) {
            if tr.syscall(libc::SYS_rt_sigaction, [sig, 0, scratch, 8, 0, 0])? != 0 {
                continue;
            }
            let mut b = [0u8; 24];
            mem.read(RemoteAddr(scratch), &mut b)?;
            let w = |k: usize| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"));
            let (handler, flags, restorer) = (w(0), w(1), w(2));
            if handler > 1 && flags & SA_RESTORER != 0 && !actions.iter().any(|a| a.0 == handler) {
                actions.push((handler, restorer));
            }
        }
        // Those the kernel does not have yet (their threads wait in the notice).
        let pending = std::mem::take(&mut self.pending);
        for &(handler, restorer) in &pending {
            if !actions.iter().any(|a| a.0 == handler) {
                actions.push((handler, restorer));
            }
        }
        let mut again = Vec::new();
        for (handler, restorer) in actions {
            let spliced = |e: &Entry| (e.at.0..e.at.0 + e.old.len() as u64).contains(&handler);
            if self.hooks.iter().any(|h| spliced(&h.entry)) || self.entries.iter().any(spliced) {
                continue;
            }
            if self.module_at(all, handler).is_none() {
                self.unplaced.push(handler);
                again.push(handler);
                continue;
            }
            match self.hook_one(&mem, all, handler, restorer, &pcs) {
                Ok(Some(h)) => {
                    if self.stats.signals.first_hooked.is_none() {
                        self.stats.signals.first_hooked = self.serving_since.map(|t| t.elapsed());
                    }
                    self.stats.signals.hooked.push(h.entry.label.clone());
                    self.hooks.push(h);
                }
                // A thread stands in its first instructions: the next look.
                Ok(None) => {
                    self.caught = None;
                    again.push(handler);
                }
                Err(why) => {
                    let name = match self.module_at(all, handler) {
                        Some(k) => {
                            let m = all[k];
                            let file = m.path.file_name().unwrap_or_default().to_string_lossy();
                            let f = m.analysis.cfg.function_at(kerf_arch::ImageAddr(
                                handler.wrapping_sub(m.bias.unwrap_or(0)),
                            ));
                            let f = f.map(|f| m.analysis.cfg.function(f).name.clone());
                            format!("{file}:{}", f.unwrap_or_else(|| format!("{handler:#x}")))
                        }
                        // (A library kerf has not loaded, as one `dlopen` mapped: its file
                        // and the offset in it, as the maps say.)
                        None => mapped_name(self.pid, handler),
                    };
                    let line = format!("{name}: {why}");
                    if !self.stats.signals.unhooked.contains(&line) {
                        self.stats.signals.unhooked.push(line);
                    }
                }
            }
        }
        self.pending.extend(pending.into_iter().filter(|p| again.contains(&p.0)));
        self.publish_handlers(&mem, mbox)?;
        if !self.hooks.is_empty() && !self.longjmps_placed {
            self.splice_longjmps(&mem, all, &pcs, mbox);
        }
        Ok(())
    }

    /// Send glibc's `siglongjmp` (alias `longjmp`, `_longjmp`) and `__longjmp_chk` through a
    /// hook in libc's hook place ([`kerf_jit::longjmp_hook`]), with every thread stopped
    /// (their PCs `pcs`), once a handler is hooked: a handler that interrupted the cache and
    /// leaves by `siglongjmp` then goes on in the cache where it lands, if that is still in
    /// its root call (see [`kerf_jit::x86_64::signal`]). A function with a thread inside its
    /// first instructions is tried again at the next look; one that cannot be hooked is said
    /// in `signals.failed` (its jumps out of handlers stay escapes, counted).
    fn splice_longjmps(&mut self, mem: &RemoteMem, all: &[&AnalyzedImage], pcs: &[u64], mbox: u64) {
        const NAMES: [&str; 3] = ["siglongjmp", "__libc_siglongjmp", "__longjmp_chk"];
        self.longjmps_placed = true;
        for (k, m) in all.iter().enumerate() {
            if !kerf_jit::glibc_module(&m.path.to_string_lossy())
                || self.spaces[k].is_none()
                || self.gone.contains(&k)
            {
                continue;
            }
            let cfg = &m.analysis.cfg;
            let mut funcs: Vec<FuncId> =
                NAMES.iter().flat_map(|n| cfg.functions_named(n)).collect();
            funcs.sort_by_key(|&f| cfg.function(f).entry);
            funcs.dedup_by_key(|f| cfg.function(*f).entry);
            for f in funcs {
                let at = cfg.function(f).entry.0.wrapping_add(m.bias.unwrap_or(0));
                let under = |e: &Entry| e.at.0 < at + 5 && at < e.at.0 + e.old.len() as u64;
                if self.sites.iter().chain(&self.entries).any(under)
                    || self.hooks.iter().any(|h| under(&h.entry))
                {
                    continue;
                }
                let name = cfg.function(f).name.clone();
                match self.splice_longjmp(mem, m, k, f, pcs, mbox) {
                    Ok(true) => {}
                    Ok(false) => self.longjmps_placed = false,
                    Err(why) => {
                        let file = m.path.file_name().unwrap_or_default().to_string_lossy();
                        let line = format!("{file}: {name}: {why}");
                        if !self.stats.signals.failed.contains(&line) {
                            self.stats.signals.failed.push(line);
                        }
                    }
                }
            }
        }
    }

    /// [`Jit::splice_longjmps`] for function `f` of module `m` (the `k`th): `false` if a thread
    /// stands inside its first instructions.
    fn splice_longjmp(
        &mut self,
        mem: &RemoteMem,
        m: &AnalyzedImage,
        k: usize,
        f: FuncId,
        pcs: &[u64],
        mbox: u64,
    ) -> Result<bool, String> {
        let (mut code, mut landing) = (0..0, 0..0);
        let entry = self.splice_hook(mem, m, k, f, pcs, |name, at, d| {
            let (bytes, entry) =
                kerf_jit::longjmp_hook(name, at, d, mbox).map_err(|e| e.to_string())?;
            // (The landing comes first, the entry after it.)
            (code, landing) = (at..at + bytes.len() as u64, at..entry);
            Ok((bytes, entry))
        })?;
        let Some(entry) = entry else { return Ok(false) };
        self.sites.push(entry);
        self.longjmp_hooks.push((code, landing));
        Ok(true)
    }

    /// Write the handlers hooked so far into the mailbox's `HANDLERS` (the first
    /// [`mb::HANDLERS_MAX`]), with every thread stopped: glibc's `rt_sigaction` outside the
    /// cache asks nothing for them ([`kerf_jit::x86_64::action_site`]).
    fn publish_handlers(&self, mem: &RemoteMem, mbox: u64) -> Result<(), JitFail> {
        let hooked: Vec<u64> =
            (self.hooks.iter().map(|h| h.entry.at.0)).take(mb::HANDLERS_MAX as usize).collect();
        let mut words = vec![hooked.len() as u64];
        words.extend(&hooked);
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        mem.write(RemoteAddr(mbox + mb::HANDLERS), &bytes)?;
        Ok(())
    }

    /// Send the `rt_sigaction`s of libc and ld.so (`mov eax, 13` right before a `syscall`,
    /// [`kerf_jit::action_sites`]: glibc's `__libc_sigaction`) through a notice in their
    /// module's hook place ([`kerf_jit::action_site`]), with every thread stopped (their PCs
    /// `pcs`): a jump over the `mov`, which the notice's code does again before going back
    /// to the `syscall`. Then a handler installed by code outside the cache (before the root
    /// is called, by a thread in no root call, inside a signal handler) is hooked before the
    /// kernel has it, as one installed in the cache is; the 10 ms look missed one that
    /// replaced another, and came late for one used at once. Only libc and the loader, which
    /// stay mapped: a site in a library that goes would leave its jump nowhere to be put
    /// back. A site with a thread inside its `mov` is tried again at the next look.
    fn splice_action_sites(
        &mut self,
        mem: &RemoteMem,
        all: &[&AnalyzedImage],
        pcs: &[u64],
        mailbox: u64,
    ) {
        self.sites_placed = true;
        for (k, site) in self.find_action_sites(all) {
            let file = all[k].path.file_name().unwrap_or_default().to_string_lossy().into_owned();
            if self.spaces[k].is_none() || self.gone.contains(&k) {
                continue;
            }
            {
                // (Placed at an earlier look, or under a root's or a handler's entry splice.)
                let under = |e: &Entry| e.at.0 < site + 5 && site < e.at.0 + e.old.len() as u64;
                let hooked = self.hooks.iter().any(|h| under(&h.entry));
                if self.sites.iter().chain(&self.entries).any(under) || hooked {
                    continue;
                }
                if pcs.iter().any(|&pc| pc > site && pc < site + 5) {
                    self.sites_placed = false;
                    continue;
                }
                let placed = self.splice_action_site(mem, k, site, mailbox, &file);
                if let Err(why) = placed {
                    let line = format!("{file}: rt_sigaction at {site:#x}: {why}");
                    if !self.stats.signals.failed.contains(&line) {
                        self.stats.signals.failed.push(line);
                    }
                }
            }
        }
    }

    /// The `rt_sigaction`s of glibc's modules among `all` (module, original address), found
    /// once ([`kerf_jit::action_sites`] walks every block of libc: 2 ms, not to be spent
    /// with the threads stopped; [`Jit::splice_entries`] asks before it stops them).
    fn find_action_sites(&mut self, all: &[&AnalyzedImage]) -> Vec<(usize, u64)> {
        if let Some(found) = &self.action_sites {
            return found.clone();
        }
        let mut found = Vec::new();
        for (k, m) in all.iter().enumerate() {
            if kerf_jit::glibc_module(&m.path.to_string_lossy()) && self.spaces[k].is_some() {
                let module = &modules_of(&[m], &[], false, false, false)[0];
                found.extend(kerf_jit::action_sites(module).into_iter().map(|a| (k, a)));
            }
        }
        self.action_sites = Some(found.clone());
        found
    }

    /// Roots `specs`, each naming a library the process has not loaded (yet): a jump over
    /// the dynamic loader's debugger hook sends the loader to a notice of kerf's each time it
    /// maps or unmaps libraries ([`kerf_jit::load_site`]), and kerf looks at each library it
    /// maps then for them ([`Jit::roots_loaded`]), before the loader relocates it or runs any
    /// of its code. Before the program is let go (a launched command) or while it runs (one
    /// attached to: a library it loads from then on). Fails, changing nothing, where kerf
    /// cannot wait: no translation on demand (no mailbox to post to), or no loader hook of a
    /// form kerf knows ([`kerf_jit::load_hook`]).
    pub fn wait_for_roots(
        &mut self,
        images: &[AnalyzedImage],
        specs: Vec<crate::spec::Spec>,
    ) -> Result<(), JitFail> {
        let Some(first) = specs.first() else { return Ok(()) };
        let label = first.text.clone();
        let fail = |why: &str| JitFail::Root { label: label.clone(), why: why.to_string() };
        let mailbox = self.ctx.mailbox.ok_or_else(|| {
            fail("its library is not loaded, and waiting for it needs translation on demand")
        })?;
        let all: Vec<&AnalyzedImage> = images.iter().chain(&self.extra).collect();
        // (Found at install, asked by `JitOptions::late_roots`.)
        let (k, site, old) = self
            .load_hook
            .ok_or_else(|| fail("the JIT was not installed to wait for libraries"))?;
        let file = all[k].path.file_name().unwrap_or_default().to_string_lossy().into_owned();
        let sp = self.spaces[k].as_mut().ok_or_else(|| fail("no code room"))?;
        let at = sp.code.0 + sp.hook_next;
        let bytes = kerf_jit::load_site(&file, at, mailbox).map_err(|e| fail(&e.to_string()))?;
        let len = (bytes.len() as u64).next_multiple_of(64);
        if sp.hook_next + len > sp.hook_end {
            return Err(fail("the loader's place for hooks is full"));
        }
        let new = kerf_patch::jump5_bytes(site, at, 5).ok_or_else(|| fail("out of reach"))?;
        sp.code_mem.write_bytes((at - sp.code.0) as usize, &bytes);
        sp.hook_next += len;
        let entry = Entry { label, at: RemoteAddr(site), old: old.to_vec(), new };
        self.write_stopped(&entry)?;
        self.sites.push(Entry { label: format!("{file}: _dl_debug_state"), ..entry });
        self.late_roots = specs;
        Ok(())
    }

    /// Write `e` (its `new` over its `old`) with every thread stopped and none inside the
    /// bytes it replaces (past their first: a thread there would resume in the middle of the
    /// jump), retried as the roots' entries are ([`SPLICE_TRIES`]).
    fn write_stopped(&mut self, e: &Entry) -> Result<(), JitFail> {
        let (lo, hi) = (e.at.0, e.at.0 + e.old.len() as u64);
        for attempt in 1..=SPLICE_TRIES {
            let tr = Tracee::stop_all(self.pid)?;
            let inside = (tr.threads().iter())
                .any(|&t| tr.regs(t).is_ok_and(|r| r.pc().0 > lo && r.pc().0 < hi));
            if !inside {
                let written = write_checked(&self.mem, e.at, &e.old, &e.new);
                tr.resume_detach()?;
                return written;
            }
            tr.resume_detach()?;
            std::thread::sleep(Duration::from_millis(2 * attempt as u64));
        }
        Err(JitFail::Busy { label: e.label.clone(), tries: SPLICE_TRIES })
    }

    /// The loader's notice ([`mb::LOADED`], `look`): each library mapped now
    /// that a late root names ([`Jit::wait_for_roots`]) and kerf has not seen is analysed and
    /// given room as any module mapped after the start ([`Jit::load_late`]); then each such
    /// module not looked at yet (these, or one a miss brought in) gets the roots found in it
    /// translated and their entries spliced, as at install. The loader waits meanwhile: the
    /// library's code has not run. A library closed and loaded again gets its roots again.
    ///
    /// An analysis takes seconds for a big library not in the analysis cache (libcrypto under
    /// load), far past one wait of the loader's ([`mb::WAIT_NS`]): kerf's beat in
    /// [`mb::ALIVE`] goes on meanwhile, and a wait that times out while it moves waits again,
    /// up to [`mb::TRIES`] times. (Without it the loader went on after 250 ms, the library's
    /// code ran natively, and its root counted nothing: a user trial, 4 runs of 4 with the
    /// CPUs busy.)
    fn roots_loaded(
        &mut self,
        images: &[AnalyzedImage],
        extra: &mut Vec<AnalyzedImage>,
        plugin: &dyn Plugin,
        late: Option<&dyn LateRings>,
        look: bool,
    ) {
        if self.late_roots.is_empty() {
            return;
        }
        if look {
            self.load_named(images, extra, plugin, late);
        }
        self.splice_late_roots(images, extra, plugin);
    }

    /// [`Jit::roots_loaded`]'s look: the libraries mapped now that a late root names and kerf
    /// has not seen, loaded as modules mapped after the start.
    fn load_named(
        &mut self,
        images: &[AnalyzedImage],
        extra: &mut Vec<AnalyzedImage>,
        plugin: &dyn Plugin,
        late: Option<&dyn LateRings>,
    ) {
        let named = |path: &str| self.late_roots.iter().any(|s| crate::spec::names_module(s, path));
        let Ok(maps) = kerf_os::process::Process::open(self.pid).and_then(|p| p.maps()) else {
            return;
        };
        let seen = |a: u64, extra: &[AnalyzedImage]| {
            images.iter().chain(extra).enumerate().any(|(k, m)| {
                let (lo, hi) = span(m);
                (lo..hi).contains(&a) && !self.gone.contains(&k)
            })
        };
        let at: Vec<u64> = (maps.iter())
            .filter(|m| m.exec && !seen(m.start.0, extra))
            .filter(|m| m.path.as_deref().is_some_and(named))
            .map(|m| m.start.0)
            .collect();
        if !at.is_empty() {
            self.load_late(images, extra, &at, plugin, late);
        }
    }

    /// [`Jit::roots_loaded`]'s splices: in each module mapped after the start and not looked
    /// at yet, the late roots found there.
    fn splice_late_roots(
        &mut self,
        images: &[AnalyzedImage],
        extra: &[AnalyzedImage],
        plugin: &dyn Plugin,
    ) {
        let all: Vec<&AnalyzedImage> = images.iter().chain(extra.iter()).collect();
        for (k, &m) in all.iter().enumerate().skip(images.len()) {
            if self.gone.contains(&k) || !self.late_checked.insert(k) {
                continue;
            }
            let path = m.path.display().to_string();
            let specs: Vec<crate::spec::Spec> = (self.late_roots.iter())
                .filter(|s| crate::spec::names_module(s, &path))
                .cloned()
                .collect();
            for spec in specs {
                if !self.stats.late_roots_seen.contains(&spec.text) {
                    self.stats.late_roots_seen.push(spec.text.clone());
                }
                let code = |_: usize, a: kerf_arch::ImageAddr| {
                    m.code_region(a).map(|(b, bytes)| (b, bytes.to_vec()))
                };
                let mods = [(path.as_str(), &m.analysis)];
                let points = match crate::spec::resolve_with_aliases(&[spec], &mods, &[], &code) {
                    Ok(p) => p,
                    Err(e) => {
                        self.stats.late_roots_refused.push(format!("{e} (in {path})"));
                        continue;
                    }
                };
                for p in points {
                    let root = Root { label: p.label, module: k, func: p.func };
                    match self.splice_late_root(&all, plugin, &root) {
                        Ok(()) => self.stats.late_roots.push(format!("{} in {path}", root.label)),
                        Err(e) => self
                            .stats
                            .late_roots_refused
                            .push(format!("{} in {path}: {e}", root.label)),
                    }
                }
            }
        }
    }

    /// [`Jit::roots_loaded`] for one root: made a root of the translation (before anything of
    /// its module is translated: its entry block gets the outer entry, its returns the outer
    /// check), translated, and its entry spliced with every thread stopped.
    fn splice_late_root(
        &mut self,
        all: &[&AnalyzedImage],
        plugin: &dyn Plugin,
        root: &Root,
    ) -> Result<(), JitFail> {
        let m = all[root.module];
        let mods =
            modules_of(all, &self.later, self.lazy, self.limit.is_none(), self.fewer_counters);
        kerf_jit::translate::entry_displaced(&mods[root.module], root.func)
            .map_err(|why| JitFail::Root { label: root.label.clone(), why })?;
        let entry = m.analysis.cfg.function(root.func).entry.0 + m.bias.unwrap_or(0);
        self.ctx.roots.insert(entry);
        self.root_funcs.push((root.module, root.func));
        if !self.done[root.module].contains(&root.func) {
            self.translate_more(all, &mods, plugin, root.module, vec![root.func], None)?;
        }
        let e = entry_splice(all, self, root)?;
        self.write_stopped(&e)?;
        self.entries.push(e);
        Ok(())
    }

    /// [`Jit::splice_action_sites`] for one site of module `k`.
    fn splice_action_site(
        &mut self,
        mem: &RemoteMem,
        k: usize,
        site: u64,
        mailbox: u64,
        file: &str,
    ) -> Result<(), String> {
        const MOV_EAX_13: [u8; 5] = [0xb8, 0x0d, 0, 0, 0];
        let sp = self.spaces[k].as_mut().ok_or("no code room")?;
        let at = sp.code.0 + sp.hook_next;
        let bytes = kerf_jit::action_site(file, at, site, mailbox).map_err(|e| e.to_string())?;
        let len = (bytes.len() as u64).next_multiple_of(64);
        if sp.hook_next + len > sp.hook_end {
            return Err("its module's place for hooks is full".into());
        }
        let new = kerf_patch::jump5_bytes(site, at, 5).ok_or("out of a rel32's reach")?;
        sp.code_mem.write_bytes((at - sp.code.0) as usize, &bytes);
        sp.hook_next += len;
        write_checked(mem, RemoteAddr(site), &MOV_EAX_13, &new).map_err(|e| e.to_string())?;
        let label = format!("{file}: rt_sigaction at {site:#x}");
        self.sites.push(Entry { label, at: RemoteAddr(site), old: MOV_EAX_13.to_vec(), new });
        Ok(())
    }

    /// [`Jit::hook_handlers`]' step 2 for one handler: the hook made and spliced, `None` if a
    /// thread (at `pcs`) stands inside the first instructions, or why it cannot be.
    fn hook_one(
        &mut self,
        mem: &RemoteMem,
        all: &[&AnalyzedImage],
        handler: u64,
        restorer: u64,
        pcs: &[u64],
    ) -> Result<Option<Hook>, String> {
        let mailbox = self.ctx.mailbox.ok_or("no mailbox")?;
        let k = self.module_at(all, handler).ok_or("in no module kerf gave a code room")?;
        let m = all[k];
        let bias = m.bias.unwrap_or(0);
        let cfg = &m.analysis.cfg;
        let f = cfg
            .function_at(kerf_arch::ImageAddr(handler.wrapping_sub(bias)))
            .filter(|&f| cfg.function(f).entry.0.wrapping_add(bias) == handler)
            .ok_or("not the entry of a function the analysis found")?;
        let n = self.hooks.iter().filter(|h| h.module == k).count();
        let mut made = None;
        let entry = self.splice_hook(mem, m, k, f, pcs, |name, at, d| {
            let hook = kerf_jit::signal_hook(name, at, d, restorer, mailbox).map_err(|e| {
                format!("{e} (at {at:#x}, handler {handler:#x}, mailbox {mailbox:#x})")
            })?;
            let entry = hook.entry;
            made = Some((hook.back, hook.live));
            Ok((hook.bytes, entry))
        });
        let full = |e: String| match e.ends_with(HOOKS_FULL) {
            true => format!("{e} ({n} hooked handlers)"),
            false => e,
        };
        let entry = entry.map_err(full)?;
        let (Some(entry), Some((back, live))) = (entry, made) else { return Ok(None) };
        Ok(Some(Hook { entry, module: k, back, live }))
    }

    /// Splice the entry of function `f` of module `m` (the `k`th) to a hook that `build` makes
    /// at a given address of the module's hook place, with every thread stopped (their PCs
    /// `pcs`): its displaced instructions planned as a root's entry splice plans them (the
    /// original bytes from the file, checked against memory as they are replaced). `build`
    /// gets the function's name, the hook's address and the displaced instructions, and gives
    /// the hook's bytes and where the splice jumps to. `None` if a thread stands inside the
    /// first instructions (try again at the next look).
    fn splice_hook(
        &mut self,
        mem: &RemoteMem,
        m: &AnalyzedImage,
        k: usize,
        f: FuncId,
        pcs: &[u64],
        build: impl FnOnce(&str, u64, &kerf_patch::Displaced) -> Result<(Vec<u8>, u64), String>,
    ) -> Result<Option<Entry>, String> {
        let cfg = &m.analysis.cfg;
        let at = cfg.function(f).entry.0.wrapping_add(m.bias.unwrap_or(0));
        let module = &modules_of(&[m], &[], false, false, false)[0];
        let d = kerf_jit::translate::entry_displaced(module, f)?;
        if pcs.iter().any(|&pc| pc > at && pc < at + d.len as u64) {
            return Ok(None);
        }
        let (base, bytes) = m.code_region(cfg.function(f).entry).ok_or("no code bytes")?;
        let off = (cfg.function(f).entry.0 - base.0) as usize;
        let old = bytes[off..off + d.len].to_vec();
        let sp = self.spaces[k].as_mut().ok_or("no code room")?;
        let place = sp.code.0 + sp.hook_next;
        let name = cfg.function(f).name.clone();
        let (code, entry) = build(&name, place, &d)?;
        let len = (code.len() as u64).next_multiple_of(64);
        if sp.hook_next + len > sp.hook_end {
            return Err(HOOKS_FULL.into());
        }
        let new = kerf_patch::jump5_bytes(at, entry, d.len)
            .ok_or("its hook is out of a rel32's reach")?;
        sp.code_mem.write_bytes((place - sp.code.0) as usize, &code);
        sp.hook_next += len;
        write_checked(mem, RemoteAddr(at), &old, &new).map_err(|e| e.to_string())?;
        Ok(Some(Entry { label: name, at: RemoteAddr(at), old, new }))
    }

    /// kerf's answer to a `siglongjmp` of the original code ([`mb::LONGJMP`]; see
    /// [`kerf_jit::x86_64::signal`]), whose four words are at `record` on its thread's stack:
    /// the stack pointer at its entry, the stack pointer and PC it jumps to, and its process
    /// (one forked from the target posts here too: its words are not in the target's memory,
    /// and it is answered no). The hooked frames (rewritten, or marked as keeping the cache
    /// address) between the first two (at most [`LONGJMP_SCAN`] bytes: a handler on an
    /// alternate stack is near its stack pointer, the place it jumps to may be far) are left
    /// by the jump: each is counted ([`mb::SIG_LEFT`]) and its check word cleared.
    /// Whether the thread is to go on in the cache: the jump stays in the root call that the
    /// outermost of those frames interrupted (an outer-frame word of the table, the stack
    /// pointer at that root call's entry, lies above both the interrupted stack pointer and
    /// the jump's, in the interrupted stack's mapping).
    fn longjmp_out(&mut self, record: u64, mbox: &SharedMem) -> bool {
        use kerf_jit::x86_64::signal::{busy_marked, left_words, rewritten, rewritten_as, UC_RSP};
        let mut b = [0u8; 32];
        if self.mem.read(RemoteAddr(record), &mut b).is_err() {
            return false;
        }
        let w = |k: usize| u64::from_le_bytes(b[8 * k..8 * k + 8].try_into().expect("8 bytes"));
        let (sp, to_sp, pid) = (w(0), w(1), w(3));
        if pid != self.pid as u64 {
            return false;
        }
        self.stats.signals.longjmps_asked += 1;
        let end = if to_sp > sp { to_sp.min(sp + LONGJMP_SCAN) } else { sp + LONGJMP_SCAN };
        let words = read_words(&self.mem, sp, end);
        let mut left = 0;
        let mut interrupted = None;
        for k in 0..words.len() {
            let uc = &words[k + 1..];
            if !self.hooks.iter().any(|h| h.back == words[k]) || !(rewritten(uc) || busy_marked(uc))
            {
                continue;
            }
            // The interrupted flow stops where the signal found it, for good.
            if self.fewer_counters {
                let at = rewritten_as(uc).and_then(|(cache, _, _)| self.signal_original(cache));
                match at {
                    Some((orig, pc)) => {
                        let (at, past) = self.stopped_at(pc, orig);
                        self.strays.push(Stray { at, past, amount: -1 });
                    }
                    None => self.strays_unknown += 1,
                }
            }
            let uc = sp + 8 * (k as u64 + 1);
            for (off, v) in left_words() {
                let _ = self.mem.write(RemoteAddr(uc + off), &v.to_le_bytes());
            }
            // And its return address, as a handler's return clears it.
            let _ = self.mem.write(RemoteAddr(uc - 8), &0u64.to_le_bytes());
            left += 1;
            interrupted = words.get(k + 1 + UC_RSP as usize / 8).copied();
        }
        if left == 0 {
            return false;
        }
        self.stats.signals.left += left;
        mbox.store_u64(mb::SIG_LEFT as usize, self.stats.signals.left);
        let Some(at) = interrupted else { return false };
        let Ok(Some(stack)) = crate::load::mapping_at(self.pid, RemoteAddr(at)) else {
            return false;
        };
        use kerf_jit::table::{OUTER, OUTER_BYTES};
        let inside = (0..OUTER_BYTES / 8).any(|j| {
            let entry_sp = self.table.load_u64((OUTER + 8 * j) as usize);
            entry_sp > at && entry_sp > to_sp && entry_sp < stack.end.0
        });
        if inside {
            self.stats.signals.left_inside += 1;
        }
        inside
    }

    /// The hooks' words: what their entries and returns counted (the mailbox's).
    fn signal_counts(&mut self, mbox: &SharedMem) {
        let s = &mut self.stats.signals;
        s.moved = mbox.load_u64(mb::SIG_MOVED as usize);
        s.back = mbox.load_u64(mb::SIG_BACK as usize);
        s.away = mbox.load_u64(mb::SIG_AWAY as usize);
        s.resumed = mbox.load_u64(mb::SIG_RESUMED as usize);
        s.busy = mbox.load_u64(mb::SIG_BUSY as usize);
        s.reentered = mbox.load_u64(mb::SIG_REENTERED as usize);
        s.stranded = mbox.load_u64(mb::SIG_STRANDED as usize);
        s.kept = mbox.load_u64(mb::SIG_KEPT as usize);
        s.kept_back = mbox.load_u64(mb::SIG_KEPT_BACK as usize);
        s.asked_again = mbox.load_u64(mb::SIG_AGAIN as usize);
        // (Read once the process has ended: every handler that was going to return has.)
        if self.target_gone() {
            let s = &mut self.stats.signals;
            let done = s.back + s.resumed + s.away + s.kept_back + s.left;
            s.never_returned = (s.moved + s.kept).saturating_sub(done);
        }
    }

    /// Whether the process has ended (exited, or a zombie).
    fn target_gone(&self) -> bool {
        kerf_os::process::ended(&kerf_os::process::RealSys, self.pid)
    }

    /// Whether the target ran `exec`: its maps (readable, not empty: a process that is
    /// ending has none) no longer hold kerf's lookup table.
    fn target_execed(&self) -> bool {
        let maps = kerf_os::process::Process::open(self.pid).and_then(|p| p.maps());
        maps.is_ok_and(|m| !m.is_empty() && !self.maps_table(&m))
    }

    /// Unmap everything kerf mapped (nothing may lead into it any more).
    fn unmap(&mut self) -> Result<(), JitFail> {
        let mut tr = Tracee::stop_all(self.pid)?;
        for (a, len) in self.mappings() {
            let _ = tr.free(RemoteAddr(a), len);
        }
        tr.resume_detach()?;
        Ok(())
    }

    /// Everything kerf mapped in the target: `(address, length)`.
    fn mappings(&self) -> Vec<(u64, u64)> {
        let mut v = Vec::new();
        for sp in self.spaces.iter().flatten() {
            v.push((sp.code.0, sp.room));
            v.push((sp.data.remote().0, sp.data.len() as u64));
            if let Some(r) = &sp.rings {
                v.push((r.remote().0, r.len() as u64));
            }
        }
        for m in std::iter::once(&*self.table).chain(&self.mailbox).chain(&self.state) {
            v.push((m.remote().0, m.len() as u64));
        }
        if let Some(s) = &self.slabs {
            v.push((s.remote().0, s.bytes()));
        }
        v
    }

    /// Where cache address `pc` goes back to, if it is a clean point of some cache.
    fn clean_original(&self, pc: u64) -> Option<u64> {
        self.live_caches().find_map(|c| c.translation.clean.get(&pc).copied())
    }

    /// What a signal handler's hook is told cache address `pc` stands for: its clean point's
    /// original, or that of the clean point a direct jump or a `nop` there leads to (they
    /// change nothing but the PC). A block counter's out-of-line path ends in a jump back
    /// after its `lock inc`, and a timer signal lands there most often: a goroutine spinning
    /// on another thread than the module's owner was found at a clean point by 1 of 404
    /// preemption signals, at that jump by most of the rest. The bytes read are the room's
    /// (kerf links jumps there after translating). `None` elsewhere: the state there is not
    /// the program's.
    fn signal_original(&self, pc: u64) -> Option<(u64, u64)> {
        let mut pc = pc;
        for _ in 0..4 {
            if let Some(o) = self.clean_original(pc) {
                return Some((o, pc));
            }
            let sp = self.spaces.iter().flatten().find(|sp| sp.ran_at(pc))?;
            let off = (pc - sp.code.0) as usize;
            let mut b = [0u8; 16];
            let n = b.len().min(sp.used as usize - off);
            sp.code_mem.read_bytes(off, &mut b[..n]);
            let mut d = iced_x86::Decoder::with_ip(64, &b[..n], pc, iced_x86::DecoderOptions::NONE);
            let i = d.decode();
            pc = match i.code() {
                iced_x86::Code::Jmp_rel8_64 | iced_x86::Code::Jmp_rel32_64 => {
                    i.near_branch_target()
                }
                _ if i.mnemonic() == iced_x86::Mnemonic::Nop => i.next_ip(),
                _ => return None,
            };
        }
        None
    }

    /// The translations threads may be running: all but those a flush retired.
    fn live_caches(&self) -> impl Iterator<Item = &Cache> {
        self.caches.iter().filter(|c| c.data.is_live())
    }

    /// The module with room whose span holds original address `a`.
    fn module_at(&self, all: &[&AnalyzedImage], a: u64) -> Option<usize> {
        (0..all.len()).find(|&k| {
            self.spaces[k].is_some() && !self.gone.contains(&k) && {
                let (lo, hi) = span(all[k]);
                (lo..hi).contains(&a)
            }
        })
    }

    /// Bytes of the roots' translations (at install, or after the last flush).
    pub fn roots_bytes(&self) -> u64 {
        self.roots_bytes
    }

    /// The cache limit it was installed with.
    pub fn cache_limit(&self) -> Option<u64> {
        self.limit
    }

    /// Bytes of translated code the rooms hold now (the routines' copies not counted).
    pub fn cache_bytes(&self) -> u64 {
        self.spaces.iter().flatten().map(|sp| sp.used - sp.start - sp.gaps).sum()
    }

    fn in_cache(&self, a: u64) -> bool {
        self.spaces.iter().flatten().any(|sp| sp.holds(a))
    }

    /// Whether `a` lies in a room's place for hooks and sites ([`Space::hook_next`]).
    fn in_hook_place(&self, a: u64) -> bool {
        self.spaces.iter().flatten().any(|sp| {
            let end = sp.code.0 + sp.hook_end;
            (end - HOOK_PLACE..end).contains(&a)
        })
    }

    fn in_routines(&self, a: u64) -> bool {
        let len = self.routines_len;
        self.spaces
            .iter()
            .flatten()
            .any(|sp| sp.routines != 0 && (sp.routines..sp.routines + len).contains(&a))
    }

    /// Bring every thread of `tr` that is inside a cache to the original address of its
    /// next clean point (single-stepping it there; a thread in a plugin's routine first runs
    /// it to its end), counting them and their steps in `out`. Returns each thread moved:
    /// the original address it is at, and whether it stood at the copied instruction itself
    /// (any plugin code for that address run) rather than before that code. `flushing`: for a
    /// flush, which leaves the threads in a `siglongjmp`'s hook where they are.
    fn bring_back(
        &self,
        tr: &mut Tracee,
        out: &mut JitRemoved,
        flushing: bool,
    ) -> Result<Vec<(i32, u64, bool)>, JitFail> {
        let mut moved = Vec::new();
        for tid in tr.threads().to_vec() {
            let mut regs = tr.regs(tid)?;
            let mut steps = 0;
            if !self.in_cache(regs.pc().0) {
                continue;
            }
            // A thread in a `siglongjmp`'s hook is left where it is by a flush (the hook
            // place stays): it asks again once kerf listens (see `kerf_jit::x86_64::signal`),
            // where it would otherwise go on natively, out of its root call's cache. Taken out,
            // one in a landing goes to the jump's original target: no escape (its count as
            // stranded is taken back), every thread goes on natively then.
            let pc = regs.pc().0;
            if flushing && self.longjmp_hooks.iter().any(|(code, _)| code.contains(&pc)) {
                out.in_longjmp.push(tid);
                continue;
            }
            let landing = self.longjmp_hooks.iter().any(|(_, l)| l.contains(&pc));
            // A thread in a hook or a site's notice came from original code (a handler's
            // entry, an `rt_sigaction` outside the cache) and goes back there, not into the
            // cache after a flush.
            let from_hooks = self.in_hook_place(pc);
            let stranded = |tr: &Tracee| {
                let mbox = self.ctx.mailbox?;
                let mut w = [0u8; 8];
                tr.memory().read(RemoteAddr(mbox + mb::SIG_STRANDED), &mut w).ok()?;
                Some((mbox + mb::SIG_STRANDED, u64::from_le_bytes(w)))
            };
            let before = if landing { stranded(tr) } else { None };
            // A thread inside a plugin's routine (a C callback) runs it to its end first.
            let budget = if self.in_routines(regs.pc().0) { MAX_ROUTINE_STEPS } else { MAX_STEPS };
            loop {
                let pc = regs.pc().0;
                if let Some(orig) = self.clean_original(pc) {
                    regs.set_pc(RemoteAddr(orig));
                    tr.set_regs(tid, &regs)?;
                    out.moved += 1;
                    moved.push((tid, orig, self.past_plugin_code(pc, orig)));
                    out.moved_to.push(self.stopped_at(pc, orig));
                    break;
                }
                if !self.in_cache(pc) {
                    // It left through the miss path for original code.
                    out.moved += 1;
                    if !from_hooks {
                        moved.push((tid, pc, false));
                        out.moved_to.push((pc, false));
                    }
                    if let (Some((at, was)), Some((_, now))) = (before, stranded(tr)) {
                        if now == was + 1 {
                            tr.memory().write(RemoteAddr(at), &was.to_le_bytes())?;
                        }
                    }
                    break;
                }
                if steps == budget {
                    return Err(JitFail::Stranded { tid, pc });
                }
                regs = tr.step(tid)?;
                steps += 1;
            }
            out.steps += steps;
        }
        Ok(moved)
    }

    /// The first word on a stack of a thread of `tr` that holds a cache address where a
    /// signal frame keeps the interrupted PC (a signal handler interrupted a thread in the
    /// cache and may not have returned): that code must stay as it is.
    fn stacks_hold_cache(&self, tr: &Tracee) -> Result<Option<HeldBy>, JitFail> {
        if let Some(f) = self.signal_frames(tr)?.into_iter().next() {
            return Ok(Some(f.held));
        }
        // And a frame a hook marked as keeping the cache address (kerf busy, or no clean
        // point there) whose handler has not returned: it returns through the hook's return
        // sequence, in a code room, though a flush may have made its PC an original address.
        use kerf_jit::x86_64::signal::busy_marked;
        for &tid in tr.threads() {
            let sp = tr.regs(tid)?.sp().0;
            let words = crate::instrument::stack_words(tr, tid, SIGNAL_SCAN)?;
            for (k, &w) in words.iter().enumerate() {
                if self.hooks.iter().any(|h| h.back == w) && busy_marked(&words[k + 1..]) {
                    return Ok(Some(HeldBy { tid, at: sp + 8 * k as u64, pc: w, original: None }));
                }
            }
        }
        Ok(None)
    }

    /// Every live signal frame on the threads' stacks (the 64 KiB above each stack pointer)
    /// that keeps an address of the caches (see [`Jit::stacks_hold_cache`]).
    fn signal_frames(&self, tr: &Tracee) -> Result<Vec<HeldFrame>, JitFail> {
        use kerf_jit::x86_64::signal::rewritten_as;
        let mut frames = Vec::new();
        for &tid in tr.threads() {
            let sp = tr.regs(tid)?.sp().0;
            // Two words past the window, for the frames of its last words; a shorter read
            // ended at the stack's end, past which no frame goes.
            let words = crate::instrument::stack_words(tr, tid, SIGNAL_SCAN + 16)?;
            let ends = words.len() < (SIGNAL_SCAN + 16) / 8;
            let scanned = words.len().min(SIGNAL_SCAN / 8);
            // Only where a signal frame keeps the interrupted PC: the cache pushes no
            // cache address that outlives the instruction after it, and any other word
            // is data (a small number falls in the room reserved below a non-PIE
            // executable at 0x400000); and only in the part of a room translations used
            // (an earlier kerf's heap at the same place, whose int3 handler left frames
            // on the stacks, is no reason). A frame whose handler has returned may still
            // lie there, in a later frame's unwritten slots: no telling (a handler may
            // unblock its own signal, or longjmp out), so it counts too.
            let ran = |w: u64| self.spaces.iter().flatten().any(|sp| sp.ran_at(w));
            // And a signal frame a handler's hook rewrote, whose handler has not returned: its
            // return address is the hook's return sequence (an exact address, no data), which
            // puts the cache address back. (The hook's return clears both the return address
            // and the check word of the frame it returns from: a handler that returned leaves
            // no such frame behind.)
            let hooked = |k: usize| {
                let ours = self.hooks.iter().any(|h| h.back == words[k]);
                ours.then(|| rewritten_as(&words[k + 1..])).flatten()
            };
            for (k, &w) in words[..scanned].iter().enumerate() {
                let at = sp + 8 * k as u64;
                if let Some((cache, orig, restorer)) = hooked(k) {
                    // The frame's `ucontext` follows the return address: the original PC the
                    // hook wrote, and the cache address it keeps in its spare words.
                    let held = HeldBy { tid, at, pc: cache, original: Some(orig) };
                    let kind = FrameKind::Hooked { uc: at + 8, cache, orig, restorer };
                    frames.push(HeldFrame { held, kind });
                } else if ran(w) && crate::instrument::saved_pc_slot(&words, k, ends) {
                    // What it stands for: its clean point's original, or the one before it
                    // (the instruction whose glue it is in).
                    let original = self
                        .live_caches()
                        .filter_map(|c| c.translation.clean.range(..=w).next_back())
                        .max_by_key(|(at, _)| **at)
                        .map(|(_, o)| *o);
                    let held = HeldBy { tid, at, pc: w, original };
                    let clean = self
                        .signal_original(w)
                        .map(|(orig, pc)| (orig, self.past_plugin_code(pc, orig)));
                    frames.push(HeldFrame { held, kind: FrameKind::Saved { clean } });
                }
            }
        }
        Ok(frames)
    }

    /// Before the caches are emptied, every thread out of them: the signal frames that keep a
    /// cache address made to keep none ([`Jit::signal_frames`]). A kernel frame whose PC is a
    /// clean point gets its original (the handler would return to the original code); a frame
    /// a hook rewrote forgets its cache address (its return would ask kerf where to go on).
    /// Returns what it rewrote, which [`Jit::put_back_frames`] points at the new translations
    /// once they are made; `None`, having changed nothing, if a frame keeps a cache address
    /// that is no clean point (a handler interrupted glue code: the flush must not go on).
    fn unhold_frames(&mut self, tr: &Tracee) -> Result<Option<Vec<Unheld>>, JitFail> {
        use kerf_jit::x86_64::signal::rewrite_words;
        let frames = self.signal_frames(tr)?;
        if frames.iter().any(HeldFrame::unclean) {
            return Ok(None);
        }
        let mem = tr.memory();
        let mut out = Vec::new();
        for f in frames {
            match f.kind {
                FrameKind::Saved { clean: Some((orig, at_insn)) } => {
                    mem.write(RemoteAddr(f.held.at), &orig.to_le_bytes())?;
                    out.push(Unheld {
                        tid: f.held.tid,
                        at: f.held.at,
                        orig,
                        at_insn,
                        hooked: None,
                    });
                }
                FrameKind::Hooked { uc, cache, orig, restorer } => {
                    for (off, v) in rewrite_words(0, orig, restorer) {
                        mem.write(RemoteAddr(uc + off), &v.to_le_bytes())?;
                    }
                    let at_insn = self.past_plugin_code(cache, orig);
                    out.push(Unheld {
                        tid: f.held.tid,
                        at: uc,
                        orig,
                        at_insn,
                        hooked: Some((uc, restorer)),
                    });
                }
                FrameKind::Saved { clean: None } => unreachable!("refused above"),
            }
        }
        Ok(Some(out))
    }

    /// After a flush made the new translations: each frame [`Jit::unhold_frames`] rewrote
    /// goes back into the cache at the new translation of its original, at the same kind of
    /// clean point, as the threads are put back; one with none keeps what `unhold_frames`
    /// wrote (its thread goes on natively after its handler: an escape, counted; or, hooked,
    /// its return asks kerf).
    fn put_back_frames(&mut self, tr: &Tracee, frames: Vec<Unheld>) -> Result<(), JitFail> {
        use kerf_jit::x86_64::signal::rewrite_words;
        let mem = tr.memory();
        for f in frames {
            match (self.cache_at(f.orig, f.at_insn), f.hooked) {
                (Some(pc), None) => {
                    mem.write(RemoteAddr(f.at), &pc.to_le_bytes())?;
                    self.stats.signals.put_back += 1;
                }
                (Some(pc), Some((uc, restorer))) => {
                    for (off, v) in rewrite_words(pc, f.orig, restorer) {
                        mem.write(RemoteAddr(uc + off), &v.to_le_bytes())?;
                    }
                    self.stats.signals.put_back += 1;
                }
                (None, None) => self.stats.signals.sent_out += 1,
                (None, Some(_)) => {}
            }
        }
        Ok(())
    }

    /// Empty the code cache to make room (the cache limit, [`JitOptions::cache_limit`]), with
    /// every thread stopped:
    ///
    /// 1. no other process shares the rooms (a child forked after attach runs the same code,
    ///    and kerf cannot stop it): otherwise nothing is done;
    /// 2. every thread stopped; no signal frame holds a cache address (that code must stay):
    ///    otherwise no flush;
    /// 3. while they are stopped, `LISTEN` cleared and every ticket answered (with nothing): a
    ///    thread waiting in the miss path finds its `futex` wait over when it is stepped (the
    ///    kernel restarts the interrupted wait, which returns at once), and none starts one;
    /// 4. every thread in a cache is brought to the original address of its next clean point
    ///    (a waiting one leaves through the miss path, an escape), and the return sites of its
    ///    frames made in the cache noted (stack words with a table entry);
    /// 5. the roots' entries given their original bytes back, so that kerf killed from here
    ///    on leaves a program that runs natively;
    /// 6. every translation retired (its words copied to kerf, zeroed in the target), the
    ///    rooms, the table and kerf's indices emptied;
    /// 7. the roots translated again; if that fails the entries stay original (the JIT is
    ///    then out of the way, as after removal);
    /// 8. the functions the threads stand in and those of their frames translated (as far as
    ///    the limit allows; first the one whose miss asked for the flush, `first`), and each
    ///    thread put back at the new translation of its address (one with none finishes its
    ///    root call natively);
    /// 9. the roots' entry jumps pointed at the new translations;
    /// 10. `LISTEN` set again, then the threads let go.
    ///
    /// Misses are not answered with the process running and `LISTEN` cleared: every thread
    /// that missed meanwhile would leave the cache for its whole root call (tried first:
    /// hundreds of escapes a flush on an 8-thread fixture). Returns whether it flushed.
    fn flush(
        &mut self,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
        mbox: &SharedMem,
        first: u64,
    ) -> bool {
        // (A copy anywhere, not only below the target: a daemon's double fork shares it too.
        // Copies that cannot be told refuse it as well.)
        let copies = self.copies();
        if copies.as_ref().is_none_or(|c| !c.is_empty()) {
            let why = match copies.as_deref().and_then(<[i32]>::first) {
                Some(c) => format!("process {c}, forked from the target, shares the code cache"),
                None => "kerf could not tell which processes share the code cache".to_string(),
            };
            self.stats.refuse_flush(why);
            return false;
        }
        // A thread that a signal interrupted in the cache keeps a cache address in its signal
        // frame until its handler returns, which is soon: stop again a few times, a moment
        // apart, before the flush is refused.
        let mut tries = 1;
        let began = Instant::now();
        let done = loop {
            let mut tr = match Tracee::stop_all(self.pid) {
                Ok(tr) => tr,
                Err(e) => break Err(e.into()),
            };
            let held = self.signal_frames(&tr).map(|v| v.iter().any(HeldFrame::unclean));
            if tries < FLUSH_TRIES && matches!(held, Ok(true)) {
                // (The handler may wait for kerf's answer, behind the ticket of the miss that
                // asked for this flush: a frame that held glue code's address then stayed
                // through every stop, and the flush was refused.)
                self.answer_signal_questions(mbox);
                if let Err(e) = tr.resume_detach() {
                    break Err(e.into());
                }
                std::thread::sleep(held_pause(tries));
                tries += 1;
                continue;
            }
            let r = self.flush_stopped(&mut tr, all, mods, plugin, mbox, first);
            mbox.store_u32(mb::LISTEN as usize, self.listen());
            let resumed = tr.resume_detach().map_err(JitFail::from);
            break r.and_then(|done| resumed.map(|_| done));
        };
        let took = began.elapsed();
        self.stats.flush_time += took;
        self.stats.flush_longest = self.stats.flush_longest.max(took);
        self.recent_flushes.push_back((Instant::now(), took));
        match done {
            Ok(true) => {
                self.stats.flushes += 1;
                true
            }
            Ok(false) => false,
            Err(e) => {
                self.stats.refuse_flush(e.to_string());
                false
            }
        }
    }

    /// The questions of signal handlers' entries ([`mb::REVERSE`]) posted since kerf last
    /// counted tickets answered, answered in their slots, where the entries see them at once
    /// (their tickets are counted answered with the next batch). Only those: a miss's answer
    /// is a translation, made in its batch.
    fn answer_signal_questions(&mut self, mbox: &SharedMem) {
        let (mut ticket, posted) =
            (mbox.load_u32(mb::ANSWERED as usize), mbox.load_u32(mb::POSTED as usize));
        let mut any = false;
        while ticket != posted {
            let slot = mb::slot(ticket) as usize;
            let question = mb::question_of(mbox.load_u64(slot), ticket);
            if let Some(q) =
                question.filter(|q| q & (mb::REVERSE | mb::RESUME | mb::UNMAPPED) == mb::REVERSE)
            {
                mbox.store_u64(slot, self.reverse_answer(ticket, q, true));
                self.stats.signals.asked_in_flushes += 1;
                any = true;
            }
            ticket = ticket.wrapping_add(1);
        }
        if any {
            mbox.futex_wake_all(mb::ANSWERED as usize);
        }
    }

    /// kerf's answer to the handler's question `q` ([`mb::REVERSE`]) of `ticket`: the original
    /// of the interrupted cache address, or 0; with `at_once`, marked [`mb::AT_ONCE`].
    fn reverse_answer(&mut self, ticket: u32, q: u64, at_once: bool) -> u64 {
        let orig = self.signal_original(q & mb::ADDRESS).map_or(0, |(o, _)| o);
        self.stats.signals.asked += 1;
        if at_once {
            self.stats.signals.at_once += 1;
            mb::answer_at_once(ticket, orig)
        } else {
            mb::answer_word(ticket, orig)
        }
    }

    /// Steps 2-9 of [`Jit::flush`], every thread stopped in `tr`.
    fn flush_stopped(
        &mut self,
        tr: &mut Tracee,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
        mbox: &SharedMem,
        first: u64,
    ) -> Result<bool, JitFail> {
        let refuse = |jit: &mut Jit| {
            let why = "a signal handler's frame holds an address in the cache".to_string();
            jit.stats.refuse_flush(why);
            Ok(false)
        };
        if self.signal_frames(tr)?.iter().any(HeldFrame::unclean) {
            return refuse(self);
        }
        mbox.store_u32(mb::LISTEN as usize, 0);
        mbox.store_u32(mb::ANSWERED as usize, mbox.load_u32(mb::POSTED as usize));
        mbox.futex_wake_all(mb::ANSWERED as usize);
        let mut out = JitRemoved::default();
        let escapes = |jit: &Jit| -> Vec<(usize, u64)> {
            let live = jit.caches.iter().filter(|c| c.data.is_live());
            live.map(|c| (c.module, c.data.load_u64(kerf_jit::translate::DATA_ESCAPES as usize)))
                .collect()
        };
        let before = escapes(self);
        let moved = self.bring_back(tr, &mut out, true)?;
        // A thread at a branch side's code goes back to where the side goes, its counter
        // not run: under fewer counters its flow stops at the end of the branch's block and
        // starts again there (each moved thread's place, in the same order).
        if self.fewer_counters {
            for (m, &(at, past)) in moved.iter().zip(&out.moved_to) {
                if (at, past) != (m.1, m.2) {
                    self.strays.push(Stray { at, past, amount: -1 });
                    self.strays.push(Stray { at: m.1, past: m.2, amount: 1 });
                }
            }
        }
        self.stats.flush_steps += out.steps;
        for ((m, a), (_, b)) in before.into_iter().zip(escapes(self)) {
            *self.stats.flush_escapes.entry(m).or_default() += b.saturating_sub(a);
        }
        // The frames now (bringing the threads back may have finished a hook's rewrite): none
        // may keep a cache address the emptied rooms would give other code.
        let Some(unheld) = self.unhold_frames(tr)? else {
            return refuse(self);
        };
        // Their frames made in the cache: the stack words that are original addresses with a
        // table entry now (return sites, innermost first). Their functions are translated
        // again, so that returning to them finds a translation instead of leaving the cache
        // (a `ret` that misses leaves the region without asking kerf). Also of each thread in
        // a signal handler that interrupted the cache: it goes back into the cache when the
        // handler returns, and returns from there (missed, a thread in a handler while
        // another's miss flushed ran the rest of its root call natively, uncounted, seen only
        // as a `returns_out`).
        // And of each thread left in a `siglongjmp`'s hook: it goes on in the cache after the
        // flush, in the root call it was in.
        let mut tids: Vec<i32> = (moved.iter().map(|m| m.0))
            .chain(unheld.iter().map(|f| f.tid))
            .chain(out.in_longjmp.iter().copied())
            .collect();
        tids.sort_unstable();
        tids.dedup();
        let mut frames: Vec<u64> = Vec::new();
        for tid in tids {
            for w in crate::instrument::stack_words(tr, tid, FRAME_SCAN)? {
                if self.index.find(w).is_some() && !frames.contains(&w) {
                    frames.push(w);
                }
            }
        }
        // No way into the old translations from here on: the roots' entries get their
        // original bytes back before anything of the rooms is retired, zeroed or written
        // again, and lead into the new translations only once the threads are back in them
        // (the end). Killed in between, kerf leaves every thread in the original code (at
        // the original address `bring_back` gave it) and the roots unspliced: the program
        // runs on natively. (Before, the entries led into the old translations while their
        // data words were zeroed and their code written over: kerf killed during a flush
        // crashed the 8-thread fixture, at address 0, in 8 of 20 kills.)
        let mem = tr.memory();
        for e in &mut self.entries {
            write_checked(&mem, e.at, &e.new, &e.old)?;
            e.new.clone_from(&e.old);
        }
        let totals = self.slabs.as_ref().map(SlabRegion::totals);
        for c in self.caches.iter_mut().filter(|c| c.data.is_live()) {
            c.data.retire(totals.as_ref());
        }
        for sc in self.stub_counts.iter_mut().filter(|sc| sc.area.is_live()) {
            sc.area.retire(totals.as_ref());
        }
        if let Some(s) = &mut self.slabs {
            s.clear();
        }
        *self.slab_totals.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        for sp in self.spaces.iter_mut().flatten() {
            let zeros = vec![0u8; (sp.data_used - THREADS_LEN) as usize];
            sp.data.write_bytes(THREADS_LEN as usize, &zeros);
            sp.data_used = THREADS_LEN;
            sp.used = sp.start;
            sp.gaps = 0;
        }
        // Every word the old entries were written to, zero (the rest is zero already, and
        // the outer frames are kept: the threads in a root call are still in it).
        let old = std::mem::replace(&mut self.index, Table::new(self.ctx.hash));
        let zeros = [0u8; kerf_jit::table::SET_STRIDE as usize];
        old.write_to(|at, b| {
            for (k, part) in b.chunks(zeros.len()).enumerate() {
                self.table.write_bytes(at as usize + k * zeros.len(), &zeros[..part.len()]);
            }
        });
        self.starts.clear();
        self.unlinked.clear();
        self.done.iter_mut().for_each(HashSet::clear);
        die_in_flush(self.stats.flushes + 1);
        if let Err(e) = self.translate_roots(all, mods, plugin) {
            // (The entries are original already: the JIT is out of the way, as after removal.)
            self.entries.clear();
            return Err(e);
        }
        self.roots_bytes = self.cache_bytes();
        // The threads brought out go back in: their functions translated (`translate_at`),
        // each at the new translation of its original address, at the same kind of clean
        // point it left (the copied instruction, or before the plugin code for it), so no
        // block counts twice or not at all. One whose address has no translation now
        // finishes its root call natively.
        let at: Vec<u64> = std::iter::once(first)
            .chain(moved.iter().map(|m| m.1))
            .chain(frames)
            .chain(unheld.iter().map(|f| f.orig))
            .collect();
        self.translate_at(all, mods, plugin, &at);
        // (The entries are pointed at the new translations whether or not every thread could
        // be put back: one that could not runs natively until it enters a root again.)
        let back = self.put_back_frames(tr, unheld).and_then(|()| {
            for (tid, orig, at_insn) in moved {
                match self.cache_at(orig, at_insn) {
                    Some(pc) => {
                        let mut regs = tr.regs(tid)?;
                        regs.set_pc(RemoteAddr(pc));
                        tr.set_regs(tid, &regs)?;
                        self.stats.flush_replaced += 1;
                    }
                    None => self.stats.flush_moved += 1,
                }
            }
            Ok(())
        });
        if let Err(e) = self.respliced(&mem) {
            for e in self.entries.drain(..).rev() {
                let _ = write_checked(&mem, e.at, &e.new, &e.old);
            }
            return Err(e);
        }
        back.map(|()| true)
    }

    /// Attached to a running process, take the threads already inside a root call into the
    /// cache ([`Jit::take_in`]), a stop each try while some stand where they cannot be taken
    /// yet (in code not translated, or holding a signal), at most [`TAKE_IN_TRIES`]. Called
    /// once the plugins' records have a reader: a thread taken in writes them at once, and a
    /// call-trace ring filled before its reader set the deadline for its writer's wait
    /// dropped records (a user trial: 30-440 k records of a sqlite3 attached with `-p`, none
    /// launched).
    pub fn take_in_threads(
        &mut self,
        images: &[AnalyzedImage],
        plugin: &dyn Plugin,
    ) -> Result<(), JitFail> {
        let extra = std::mem::take(&mut self.extra);
        let all: Vec<&AnalyzedImage> = images.iter().chain(&extra).collect();
        let mods =
            modules_of(&all, &self.later, self.lazy, self.limit.is_none(), self.fewer_counters);
        let mut result = Ok(());
        for attempt in 1..=TAKE_IN_TRIES {
            let t = Instant::now();
            let Ok(mut tr) = Tracee::stop_all(self.pid) else { break };
            let left = self.take_in(&mut tr, &all, &mods, plugin);
            let resumed = tr.resume_detach();
            self.stats.take_in_pause = self.stats.take_in_pause.max(t.elapsed());
            self.stats.not_taken_in = left.len();
            if let Err(e) = resumed {
                result = Err(e.into());
                break;
            }
            if left.is_empty() || attempt == TAKE_IN_TRIES {
                break;
            }
            std::thread::sleep(TAKE_IN_WAIT);
        }
        drop(mods);
        drop(all);
        self.extra = extra;
        result
    }

    /// Take every thread of `tr` (all stopped) that is inside a root call made from the
    /// original code into the cache (attach, [`Jit::take_in_threads`]). Its stack is walked by
    /// the modules' unwind tables ([`root_frame`]); where a frame is a root's, the thread is
    /// in a root call, and the outermost such frame is the call's outer frame:
    ///
    /// 1. the functions of the frames inside the root call are translated where they are
    ///    not yet (their returns must find their return sites);
    /// 2. the thread goes to the clean point of its PC before any plugin code for it (a call
    ///    the kernel would restart is made ahead, [`kerf_os::ptrace::restart_made`], so the
    ///    thread starts at the translated `syscall`);
    /// 3. where the plugin counts into slabs, the thread gets one as at a gate;
    /// 4. its outer frame is recorded as a root's outer entry records it, so that the root's
    ///    return goes back to the original caller.
    ///
    /// Counting starts there: the rest of the block the thread stood in is not counted (under
    /// fewer counters, where it came in is kept as a [`Stray`]: no edge of the placement's
    /// graph brought it there).
    /// Returns the threads inside a root call that it could not take (see
    /// [`JitStats::not_taken_in`]).
    fn take_in(
        &mut self,
        tr: &mut Tracee,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
    ) -> Vec<i32> {
        let mut images: HashMap<usize, Option<kerf_analysis::image::Image<'_>>> = HashMap::new();
        // A frame of a root, or of a function a root tail-calls (python3.11's `main` jumps to
        // `Py_BytesMain`, whose frame is then the root call's), by module.
        let entries: std::collections::HashSet<u64> =
            self.root_funcs.iter().map(|&(k, f)| entry_of(mods, k, f)).collect();
        let ending: Vec<_> =
            mods.iter().map(|m| kerf_jit::translate::ending_roots(m, &entries)).collect();
        // Per root, the functions whose frames are its call's (itself and what it tail-calls
        // in its module), to say which roots the threads taken in were inside.
        let roots: Vec<_> = (self.root_funcs.iter())
            .map(|&(k, f)| {
                let entry = std::collections::HashSet::from([entry_of(mods, k, f)]);
                ((k, f), kerf_jit::translate::ending_roots(&mods[k], &entry))
            })
            .collect();
        let mut left = Vec::new();
        for tid in tr.threads().to_vec() {
            let Ok(regs) = tr.regs(tid) else { continue };
            if self.in_cache(regs.pc().0) || self.in_routines(regs.pc().0) {
                continue;
            }
            let found = self.root_frame(tr, &regs, all, mods, &ending, &mut images);
            let Some(RootFrame { root, outer_sp, inside, in_handler }) = found else {
                continue;
            };
            // A signal handler runs in the original code (its hook rewrites only the frame):
            // a thread in one is taken at a later try, once back in the root call.
            if in_handler || tr.held_signals(tid) > 0 {
                left.push(tid);
                continue;
            }
            let mut regs = kerf_os::ptrace::restart_made(&regs);
            let at: Vec<u64> = std::iter::once(regs.pc().0).chain(inside).collect();
            self.translate_at(all, mods, plugin, &at);
            let Some(pc) = self.cache_at(regs.pc().0, false) else {
                left.push(tid);
                continue;
            };
            if let Some(slabs) = &mut self.slabs {
                match regs.gs_base {
                    0 => regs.gs_base = slabs.claim_for(tid as u32),
                    gs if slabs.owns(gs, tid as u32) => {}
                    gs if slabs.holds(gs) => regs.gs_base = slabs.claim_for(tid as u32),
                    // The program's own base: its counters would write the program's memory.
                    _ => {
                        left.push(tid);
                        continue;
                    }
                }
            }
            let orig = regs.pc().0;
            regs.set_pc(RemoteAddr(pc));
            if tr.set_regs(tid, &regs).is_err() {
                continue;
            }
            // (Before any plugin code at its PC: a block it stands at the start of counts it.)
            self.strays.push(Stray { at: orig, past: false, amount: 1 });
            let slot =
                kerf_jit::table::OUTER + kerf_jit::table::outer_slot(self.ctx.hash, outer_sp);
            let word = (0..kerf_jit::table::OUTER_PROBES)
                .map(|k| (slot + 8 * k) as usize)
                .find(|&w| [0, outer_sp].contains(&self.table.load_u64(w)))
                .unwrap_or(slot as usize);
            self.table.store_u64(word, outer_sp);
            self.stats.taken_in += 1;
            // The roots whose call that frame is (the root itself, or each root that
            // tail-calls its function).
            let (k, f) = root;
            for ((rk, rf), theirs) in &roots {
                if *rk == k
                    && theirs.contains(&f)
                    && !self.stats.taken_in_roots.contains(&(*rk, *rf))
                {
                    self.stats.taken_in_roots.push((*rk, *rf));
                }
            }
        }
        left
    }

    /// Where thread registers `regs` stand in a root call made from the original code: walked
    /// up its stack by the unwind tables of the modules `all` (`images` keeps each parsed),
    /// the outermost root frame's function (module, function: a root's or one a root
    /// tail-calls, `ending`, by module), the stack pointer that frame had at its entry
    /// (pointing at the return address into its caller), and the return addresses of the
    /// frames inside that call, innermost first, and whether a signal frame lies between
    /// ([`RootFrame`]; the walk goes on below one from the registers the kernel saved in it).
    /// `None` where no root frame is found before the walk ends: an address in no module or
    /// with no plain unwind rule (generated code), a read that fails, or [`MAX_FRAMES`].
    fn root_frame<'a>(
        &self,
        tr: &Tracee,
        regs: &kerf_os::ptrace::Regs,
        all: &[&'a AnalyzedImage],
        mods: &[Module<'_>],
        ending: &[kerf_arch::hash::AddrSet<FuncId>],
        images: &mut HashMap<usize, Option<kerf_analysis::image::Image<'a>>>,
    ) -> Option<RootFrame> {
        use kerf_analysis::image::{FrameBase, Image, SavedRbp};
        let word = |a: u64| {
            let mut b = [0u8; 8];
            tr.read(RemoteAddr(a), &mut b).ok().map(|()| u64::from_le_bytes(b))
        };
        let (mut pc, mut sp, mut rbp) = (regs.rip, regs.rsp, Some(regs.rbp));
        let mut found = None;
        let mut ras = Vec::new();
        // Whether the walk has passed a signal frame, and whether `pc` is a return address.
        let (mut crossed, mut returned) = (false, false);
        for _ in 0..MAX_FRAMES {
            // A handler's return address is the signal restorer: the interrupted registers
            // are in the frame the kernel pushed, and the walk goes on from them. (Its unwind
            // rule is an expression kerf's frame rules do not take: a thread stopped in a
            // SIGALRM handler on top of `main` was passed over, found in no root call.)
            if returned {
                if let Some((at_pc, at_sp, at_rbp)) = signal_frame(&word, pc, sp) {
                    (pc, sp, rbp, crossed, returned) = (at_pc, at_sp, Some(at_rbp), true, false);
                    ras.clear();
                    continue;
                }
            }
            // A caller's frame is looked up at its call: the return address may be past the
            // end of its function.
            let look = if returned { pc.wrapping_sub(1) } else { pc };
            let Some(k) = self.module_at(all, look).filter(|&k| k < mods.len()) else { break };
            let image = images.entry(k).or_insert_with(|| {
                Image::from_elf(&all[k].path.to_string_lossy(), &all[k].bytes).ok()
            });
            let Some(rule) = image
                .as_ref()
                .and_then(|i| i.frame_rule(kerf_arch::ImageAddr(look.wrapping_sub(mods[k].bias))))
            else {
                break;
            };
            let base = match rule.base {
                FrameBase::Rsp => sp,
                FrameBase::Rbp => match rbp {
                    Some(r) => r,
                    None => break,
                },
            };
            let cfa = base.wrapping_add(rule.offset as u64);
            let ra_at = cfa.wrapping_add(rule.ra_at as u64);
            let root = kerf_jit::region::function_containing(&mods[k], look)
                .filter(|f| ending[k].contains(f));
            if let Some(f) = root {
                let (root, outer_sp, inside) = ((k, f), ra_at, ras.clone());
                found = Some(RootFrame { root, outer_sp, inside, in_handler: crossed });
            }
            let Some(ra) = word(ra_at) else { break };
            rbp = match rule.rbp {
                SavedRbp::Same => rbp,
                SavedRbp::At(n) => word(cfa.wrapping_add(n as u64)),
                SavedRbp::Lost => None,
            };
            if ra == 0 || cfa <= sp {
                break;
            }
            ras.push(ra);
            (pc, sp, returned) = (ra, cfa, true);
        }
        found
    }

    /// Translate the functions holding original addresses `at` (after a flush), in order,
    /// each if the room left under the limit fits it.
    fn translate_at(
        &mut self,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
        at: &[u64],
    ) {
        let before = self.cache_bytes();
        for &orig in at {
            let Some(k) = self.module_at(all, orig) else { continue };
            let Some(f) = kerf_jit::region::function_containing(&mods[k], orig) else { continue };
            if self.done[k].contains(&f) {
                continue;
            }
            // By the translation's own size: kerf's estimate is two to three times that, and
            // by it a thread in libc's `memcpy` found no room left at 40 KiB and left.
            let _ = self.translate_more(all, mods, plugin, k, vec![f], self.limit);
        }
        let standing = self.cache_bytes() - before;
        self.stats.standing_peak = self.stats.standing_peak.max(standing);
    }

    /// Whether a thread at clean point `pc` (for original address `orig`) stands at the
    /// copied instruction itself, past the plugin's code for `orig`: the clean point before
    /// `pc` is that code's, for the same address (the two are adjacent: the plugin's code
    /// has no clean point of its own). Wherever the block was copied: in its function's
    /// translation, or in a copy of the function in place of a call (`translate::Inline`),
    /// which lies among its caller's blocks.
    fn past_plugin_code(&self, pc: u64, orig: u64) -> bool {
        let t = self
            .live_caches()
            .find(|c| (c.code.0..c.code.0 + c.translation.code.len() as u64).contains(&pc))
            .map(|c| &c.translation);
        // (A branch side's code before a block is clean for the block's start too, and is
        // not the block's plugin code.)
        t.and_then(|t| t.clean.range(..pc).next_back().filter(|(q, _)| !t.sides.contains_key(q)))
            .is_some_and(|(_, &before)| before == orig)
    }

    /// Where the flow of a thread at clean point `pc` (for original address `orig`) stands,
    /// for the sums of fewer counters ([`Stray`]): at a branch side's code, at the end of the
    /// branch's block (the side's counter not run yet); else at `orig`, past the plugin's
    /// code there or not ([`Jit::past_plugin_code`]).
    fn stopped_at(&self, pc: u64, orig: u64) -> (u64, bool) {
        let side = self.live_caches().find_map(|c| c.translation.sides.get(&pc).copied());
        side.map_or_else(|| (orig, self.past_plugin_code(pc, orig)), |branch| (branch, true))
    }

    /// The live cache address clean for original address `orig` in its block's copy: the
    /// copied instruction itself (`at_insn`), or the start of the plugin code before it.
    fn cache_at(&self, orig: u64, at_insn: bool) -> Option<u64> {
        let (first, last) = self.live_caches().find_map(|c| clean_points(&c.translation, orig))?;
        Some(if at_insn { last } else { first })
    }

    /// Translate the roots' functions again (after a flush), module by module.
    fn translate_roots(
        &mut self,
        all: &[&AnalyzedImage],
        mods: &[Module<'_>],
        plugin: &dyn Plugin,
    ) -> Result<(), JitFail> {
        let mut by_module: Vec<Vec<FuncId>> = vec![Vec::new(); self.spaces.len()];
        for &(k, f) in &self.root_funcs {
            if !by_module[k].contains(&f) {
                by_module[k].push(f);
            }
        }
        for (k, funcs) in by_module.into_iter().enumerate() {
            if !funcs.is_empty() {
                self.translate_more(all, mods, plugin, k, funcs, None)?;
            }
        }
        Ok(())
    }

    /// Point each root's entry jump at its root's live translation (after a flush).
    fn respliced(&mut self, mem: &RemoteMem) -> Result<(), JitFail> {
        for i in 0..self.entries.len() {
            let (at, len) = (self.entries[i].at, self.entries[i].old.len());
            let to = self.live_caches().find_map(|c| c.translation.entered_at(at.0));
            let label = &self.entries[i].label;
            let why = |why: &str| JitFail::Root { label: label.clone(), why: why.into() };
            let to = to.ok_or_else(|| why("its entry block has no translation after a flush"))?;
            let new = kerf_patch::jump5_bytes(at.0, to, len)
                .ok_or_else(|| why("its translation is out of a rel32's reach"))?;
            write_checked(mem, at, &self.entries[i].new, &new)?;
            self.entries[i].new = new;
        }
        Ok(())
    }

    /// Take the JIT out: restore the roots' entries, bring every thread in a cache back to
    /// the original address of its clean point, and unmap the caches, data and table (unless
    /// a stack still holds a cache address, which only a signal frame's saved PC can be:
    /// then they stay mapped, harmless, and are reported).
    ///
    /// A handler that interrupted a thread in the cache is most often still running (it
    /// returns soon): the threads are let go and stopped again a moment later
    /// ([`held_pause`]), up to `FLUSH_TRIES` stops, each bringing back the threads that went
    /// on in the cache meanwhile (the roots' entries are original from the first, so none
    /// comes in anew).
    pub fn remove(&mut self) -> Result<JitRemoved, JitFail> {
        let mut out = JitRemoved::default();
        for tries in 1..=FLUSH_TRIES {
            let mut tr = match Tracee::stop_all(self.pid) {
                Ok(tr) => tr,
                Err(TargetError::NoSuchProcess { .. }) => break,
                Err(e) => return Err(e.into()),
            };
            let again = tries > 1;
            out.stops = tries;
            let r = self.take_out(&mut tr, &mut out, false, again, tries == FLUSH_TRIES);
            let resumed = tr.resume_detach();
            r?;
            resumed?;
            if out.held.is_none() || tries == FLUSH_TRIES {
                break;
            }
            std::thread::sleep(held_pause(tries));
        }
        // Then its forked copies, alive or not the target: their roots' entries jump into
        // the cache as the target's did, and without kerf a miss there would wait for an
        // answer that never comes. A copy that cannot be stopped (it ended, another tracer
        // holds it) is passed over: it is not the target.
        for c in self.copies().unwrap_or_default() {
            let Ok(mut tr) = Tracee::stop_all(c) else { continue };
            let mut theirs = JitRemoved::default();
            let r = self.take_out(&mut tr, &mut theirs, true, false, true);
            let _ = tr.resume_detach();
            if r.is_ok() {
                out.copies.push(c);
                out.copies_kept += usize::from(theirs.held.is_some());
                out.moved += theirs.moved;
                out.steps += theirs.steps;
                out.moved_to.extend(theirs.moved_to);
            }
        }
        // (The copies count into the same words.)
        let left = out.moved_to.iter().map(|&(at, past)| Stray { at, past, amount: -1 });
        self.strays.extend(left);
        // The slabs' sums are read anew: the threads counted until they were out.
        *self.slab_totals.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(out)
    }

    /// With every thread of the target, or of a forked copy of it (`copy`), stopped: its
    /// roots' entries restored (checked; in a copy, an entry already original is passed over
    /// and one that is neither is left; `again`: restored by an earlier stop), its threads
    /// brought out of the caches, and kerf's mappings freed unless a stack may return into
    /// them: then (`out.held`) kept if this is the `last` stop (`out.kept`).
    fn take_out(
        &self,
        tr: &mut Tracee,
        out: &mut JitRemoved,
        copy: bool,
        again: bool,
        last: bool,
    ) -> Result<(), JitFail> {
        let mem = tr.memory();
        let entries = if again { &[][..] } else { &self.entries[..] };
        let hooks = if again { &[][..] } else { &self.hooks[..] };
        let sites = if again { &[][..] } else { &self.sites[..] };
        // The handlers' hooks first: no handler enters its hook from now on, and a frame one
        // rewrote returns to its original address (its thread goes on natively).
        for h in hooks {
            if let Some(sp) = &self.spaces[h.module] {
                sp.code_mem.write_bytes((h.live - sp.code.0) as usize, &0u64.to_le_bytes());
            }
        }
        // (Sites first: no thread goes into a notice of kerf's from then on.)
        for e in entries.iter().chain(hooks.iter().map(|h| &h.entry)).chain(sites).rev() {
            if copy {
                let mut cur = vec![0u8; e.new.len()];
                tr.read(e.at, &mut cur)?;
                if cur != e.new {
                    continue;
                }
            }
            write_checked(&mem, e.at, &e.new, &e.old)?;
        }
        self.bring_back(tr, out, false)?;
        out.held = self.stacks_hold_cache(tr)?;
        if out.held.is_some() {
            if last {
                out.kept = self.mappings();
            }
        } else {
            // No thread keeps a `gs` base in the slabs about to go (nothing reads it once no
            // code of the cache can run, and a kerf attaching later must find none).
            if let Some(s) = &self.slabs {
                let (lo, hi) = (s.remote().0, s.remote().0 + s.bytes());
                for t in tr.threads().to_vec() {
                    let mut regs = tr.regs(t)?;
                    if (lo..hi).contains(&regs.gs_base) {
                        regs.gs_base = 0;
                        tr.set_regs(t, &regs)?;
                    }
                }
            }
            for (a, len) in self.mappings() {
                tr.free(RemoteAddr(a), len)?;
            }
        }
        Ok(())
    }

    /// The module holding original address `a` in a process forked from the target that
    /// shares its cache (not in the target itself), and that process.
    fn forked_module_at(&self, a: u64) -> Option<(String, i32)> {
        self.copies()?.into_iter().find_map(|c| {
            crate::load::module_path_at(c, RemoteAddr(a)).ok().flatten().map(|p| (p, c))
        })
    }

    /// Why the translation of a module the target mapped after attach, at `a`, must not go
    /// into the table that the target's forked copies share, if it must not: a copy forked
    /// before the target mapped it does not map that file there (it may map nothing there
    /// yet, and later a library of its own, whose code would then run kerf's translation of
    /// the target's; under python's `multiprocessing` with fork, parent and worker load their
    /// extension modules at the same addresses). Only a copy forked after it maps the same
    /// file at the same place, and the table entries are right for both. `None`: no copy,
    /// or every copy maps it alike.
    fn copy_maps_otherwise(&self, a: u64) -> Option<String> {
        let Some(copies) = self.copies() else {
            return Some("kerf could not tell which processes share its code cache".into());
        };
        if copies.is_empty() {
            return None;
        }
        let here = crate::load::mapping_at(self.pid, RemoteAddr(a)).ok().flatten()?;
        let alike = |m: &kerf_analysis::image::maps::Mapping| {
            (m.start, m.end, m.offset, &m.dev, m.inode)
                == (here.start, here.end, here.offset, &here.dev, here.inode)
        };
        copies.into_iter().find_map(|c| match crate::load::mapping_at(c, RemoteAddr(a)) {
            Ok(Some(m)) if alike(&m) => None,
            // (A copy that ended meanwhile maps nothing and runs nothing.)
            Err(_) if !std::path::Path::new(&format!("/proc/{c}")).exists() => None,
            _ => Some(format!(
                "mapped after process {c} was forked from the target: that copy shares \
                 kerf's code cache and does not map it there"
            )),
        })
    }

    /// Processes other than the target that map the lookup table's memory file at its
    /// address: only a `fork` of the target gives that (`exec` drops every mapping). The
    /// file is told by its inode, read from kerf's own mapping of it, which is there as long
    /// as the table is (`None`: kerf could not read it).
    fn copies(&self) -> Option<Vec<i32>> {
        let sys = kerf_os::process::RealSys;
        let me = std::process::id() as i32;
        let inode = crate::forked::mapped_inode(&sys, me, self.table.as_ptr() as u64)?;
        let at = self.table.remote().0;
        Some(crate::forked::sharing(&sys, at, inode, &[self.pid], self.started))
    }
}

/// For whoever debugs the translator (`KERF_JIT_DUMP=DIR`): each cache's bytes as
/// `cache-ADDR.bin` (read them with `objdump -D -b binary -m i386:x86-64 --adjust-vma=ADDR`),
/// and `index.txt`: each cache's module, its miss path, its exits, and the table entries
/// that went to the overflow list.
fn dump(dir: &std::path::Path, images: &[&AnalyzedImage], jit: &Jit) {
    use std::fmt::Write;
    let mut index = String::new();
    for c in &jit.caches {
        let _ = std::fs::write(dir.join(format!("cache-{:x}.bin", c.code.0)), &c.translation.code);
        // Its clean points, `CACHE ORIGINAL` a line (for profiles of the cache).
        let mut clean = String::new();
        for (pc, orig) in &c.translation.clean {
            let _ = writeln!(clean, "{pc:x} {orig:x}");
        }
        let _ = std::fs::write(dir.join(format!("cache-{:x}.clean", c.code.0)), clean);
        let path = images[c.module].path.display();
        let _ = writeln!(index, "cache {:#x} miss {:#x} {path}", c.code.0, c.translation.miss);
        for (target, why) in &c.translation.exits {
            let _ = writeln!(index, "  exit {target:#x} {why:?}");
        }
    }
    for (a, e, _) in &jit.index.crowded {
        let _ = writeln!(index, "overflow {a:#x} -> {e:#x}");
    }
    let _ = std::fs::write(dir.join("index.txt"), index);
}

/// The original address of function `f` of module `k`'s entry.
fn entry_of(mods: &[Module<'_>], k: usize, f: FuncId) -> u64 {
    mods[k].runtime(mods[k].cfg.function(f).entry)
}

/// A root's entry found changed (`e`), said more plainly where it is a jump into the code
/// cache of a kerf that is gone (one killed with SIGKILL leaves its jumps and cache, which the
/// program runs on): that kerf's id, from the name of the mapping the jump goes to.
fn left_by_a_gone_kerf(pid: i32, mem: &RemoteMem, at: RemoteAddr, e: JitFail) -> JitFail {
    let JitFail::Mismatch { addr, detail } = e else { return e };
    let mut b = [0u8; 5];
    let target = match mem.read(at, &mut b) {
        Ok(()) if b[0] == 0xe9 => {
            let rel = i32::from_le_bytes([b[1], b[2], b[3], b[4]]);
            at.0.wrapping_add(5).wrapping_add(rel as i64 as u64)
        }
        _ => return JitFail::Mismatch { addr, detail },
    };
    let maps = kerf_os::process::Process::open(pid).and_then(|p| p.maps()).unwrap_or_default();
    let owner = maps.iter().find(|m| m.contains(RemoteAddr(target))).and_then(|m| {
        m.path
            .as_deref()?
            .split("kerf-")
            .nth(1)?
            .split(|c: char| !c.is_ascii_digit())
            .next()?
            .parse::<i32>()
            .ok()
    });
    let detail = match owner {
        Some(k) if kerf_os::process::ended(&kerf_os::process::RealSys, k) => format!(
            "{detail}: a jump into the code cache of kerf {k}, which is gone (killed?); the \
             program runs that cache from this root until it ends, and no kerf can splice \
             this root again before"
        ),
        Some(k) => format!("{detail}: a jump into the code cache of kerf {k}, which runs"),
        None => detail,
    };
    JitFail::Mismatch { addr, detail }
}

/// For the tests of a kerf killed during a flush (`KERF_JIT_DIE_IN_FLUSH=N`): kerf kills
/// itself (`SIGKILL`, nothing cleaned up) in flush `n` when it is `N`, at the flush's most
/// delicate point: the rooms emptied and their data zeroed, nothing translated again yet, the
/// threads stopped in the original code.
fn die_in_flush(n: u64) {
    static AT: std::sync::OnceLock<Option<u64>> = std::sync::OnceLock::new();
    let at = AT.get_or_init(|| std::env::var("KERF_JIT_DIE_IN_FLUSH").ok()?.parse().ok());
    if *at == Some(n) {
        // SAFETY: kill(2) on this process; nothing runs after it.
        unsafe { libc::kill(libc::getpid(), libc::SIGKILL) };
    }
}

/// Write `new` over `old` at `at`, checking the bytes before and after (the probes' own check).
fn write_checked(mem: &RemoteMem, at: RemoteAddr, old: &[u8], new: &[u8]) -> Result<(), JitFail> {
    use crate::probe::InstrumentError;
    crate::instrument::write_verified(mem, at.0, old, new).map_err(|e| match e {
        InstrumentError::Target(t) => JitFail::Target(t),
        InstrumentError::Mismatch { addr, detail } => JitFail::Mismatch { addr, detail },
        other => JitFail::Mismatch { addr: at.0, detail: other.to_string() },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_jit::translate::{BlockInfo, NoPlugin};

    /// A plugin whose code takes room in every block: its sizes are not `NoPlugin`'s.
    struct Roomy;

    impl Plugin for Roomy {
        fn block(&self, _block: &BlockInfo<'_>) -> Option<kerf_codegen::ir::Program> {
            None
        }
        fn room(&self) -> u64 {
            1024
        }
    }

    #[test]
    fn a_whole_module_s_room_is_kept_per_options_and_read_back() {
        let dir = std::env::temp_dir().join(format!("kerf-jit-rooms-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let opts = crate::load::LoadOptions { cache_dir: Some(dir.clone()), ..Default::default() };
        let path = std::path::Path::new("/usr/bin/true");
        let image = crate::load::analyze_file(path, &opts, &kerf_analysis::Quiet).unwrap();
        let m = &modules_of(&[&image], &[], true, true, false)[0];
        let n = image.analysis.cfg.functions.len() as u32;
        assert!(n > 0, "functions in {}", path.display());
        let every: Vec<FuncId> = (0..n).map(FuncId).collect();
        let options = room_options(m, &NoPlugin).expect("the test binary has a build-id");
        assert_eq!(image.jit_room(options), None, "nothing kept before the first start");
        let worked_out = space_wanted(m, &every, &NoPlugin);
        assert_eq!(whole_module_size(&image, m, n, &NoPlugin), worked_out);
        assert_eq!(image.jit_room(options), Some(worked_out), "kept by the first start");
        // Another plugin's options are another entry, and both stay kept.
        let roomy = room_options(m, &Roomy).unwrap();
        assert_ne!(roomy, options);
        assert_eq!(image.jit_room(roomy), None);
        let bigger = space_wanted(m, &every, &Roomy);
        assert!(bigger.0 > worked_out.0, "{bigger:?} against {worked_out:?}");
        assert_eq!(whole_module_size(&image, m, n, &Roomy), bigger);
        assert_eq!(image.jit_room(options), Some(worked_out));
        // What is kept is what a later start reserves: not worked out again.
        image.keep_jit_room(options, (12_345, 678));
        assert_eq!(whole_module_size(&image, m, n, &NoPlugin), (12_345, 678));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
