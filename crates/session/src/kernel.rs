//! The live kernel as a target (DESIGN.md §4, issue 4): its text and modules read through
//! kerf's driver and analysed like any image (symbols from /proc/kallsyms), and probes
//! installed with the driver's protocol (Djprobe's: an int3 first, quiescence, then the jump),
//! sharing splice planning and code generation with the process target.

use crate::backend::{Backend, Batches, Begin, Heap, Patch, Pauses, Splice, Springboard};
use crate::cache::CacheDir;
use crate::installer::{Cancel, PatchSet};
use crate::load::{AnalyzedImage, Bytes};
use crate::patchset::{self, DataLayout, Outcome, Runtime};
use crate::phases::Phases;
use crate::plan::{Planning, Rules, SitePlan, Sites};
use crate::probe::Where;
use crate::probe::{Action, InstrumentError, KindRefusal, Probe, Reason, Removed, ToolData};
use crate::spec::Point;
use kerf_analysis::cfg::FuncId;
use kerf_analysis::image::Image;
use kerf_analysis::Progress;
use kerf_arch::{ImageAddr, KernelAddr, RemoteAddr};
use kerf_codegen::ir::OFFCPU_TID_LIMIT;
use kerf_codegen::{Clock, Env, ThreadPointer};
use kerf_os::kernel::{Driver, KernelError, SpliceRequest};
use kerf_patch::{jump2_bytes, jump5_bytes, SpliceKind, INT3, SPRINGBOARD_LEN};
use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Why the live kernel could not be opened as a target.
#[derive(Debug)]
pub enum OpenError {
    /// kerf's driver refused or failed a request.
    Driver(KernelError),
    /// /proc/kallsyms shows no addresses (kptr_restrict).
    NoAddresses,
    /// An image's symbols (from /proc/kallsyms) could not be read.
    Symbols { image: String, error: kerf_analysis::image::ImageError },
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Driver(e) => write!(f, "{e}"),
            OpenError::NoAddresses => {
                write!(f, "/proc/kallsyms shows no addresses (kptr_restrict): run as root")
            }
            OpenError::Symbols { image, error } => write!(f, "{image}: symbols: {error}"),
        }
    }
}

impl std::error::Error for OpenError {}

impl From<KernelError> for OpenError {
    fn from(e: KernelError) -> Self {
        OpenError::Driver(e)
    }
}

/// The kernel's images (core text first, then each loaded module), analysed.
pub struct Kernel {
    pub driver: Driver,
    pub images: Vec<AnalyzedImage>,
    /// Per-CPU offset of `current_task` (how generated code finds the running task).
    pub current_task: Option<u32>,
    /// Where the kernel's fault-free readers are (`copy_from_kernel_nofault`,
    /// `copy_from_user_nofault`, `strncpy_from_kernel_nofault`, `strncpy_from_user_nofault`,
    /// in that order), for generated code that captures memory; 0 where kallsyms has none.
    pub readers: [u64; 4],
    pub kallsyms_symbols: usize,
    /// What went wrong with the analysis cache (a directory refused, an entry rejected or not
    /// written), each said once: the analyses were made without it.
    pub warnings: Vec<String>,
    /// A removal unregistered traps after its last quiescence: their patches are retired in
    /// the driver (not to be rewritten) until the next one. A later installation through
    /// this driver (a hunt's next round) quiesces first, so that it can reuse the heap.
    retired: std::sync::atomic::AtomicBool,
    /// The first byte of the patch heap no patch set has used since: each one (a hunt's
    /// round, say) takes fresh heap after the last, and starts again at the beginning only
    /// when the rest is too small. A session starts where the sessions before it stopped (the
    /// driver keeps the offset across opens, `Info::patch_next`). The driver refuses a write
    /// over a live patch's entry but cannot see a patch's extent, and a task that somehow
    /// still holds an address inside an earlier set's patch (the guest oopses CI met in `kerf
    /// hunt --kernel` looked like one) then runs that patch's own code, not the middle of a
    /// newer one.
    patch_next: std::sync::atomic::AtomicU64,
}

impl Kernel {
    /// The fault-free readers as generated code takes them.
    pub fn kernel_reads(&self) -> kerf_codegen::KernelReads {
        let [a, b, c, d] = self.readers;
        kerf_codegen::KernelReads {
            copy_from_kernel_nofault: a,
            copy_from_user_nofault: b,
            strncpy_from_kernel_nofault: c,
            strncpy_from_user_nofault: d,
        }
    }
}

/// The kernel's fault-free memory readers generated code may call (see [`Kernel::readers`]).
pub const READERS: [&str; 4] = [
    "copy_from_kernel_nofault",
    "copy_from_user_nofault",
    "strncpy_from_kernel_nofault",
    "strncpy_from_user_nofault",
];

/// Split /proc/kallsyms into the core kernel's lines and each module's, without the tag.
fn split_kallsyms(text: &str) -> (String, Vec<(String, String)>) {
    let mut core = String::new();
    let mut mods: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        match line.split_once('\t') {
            None => {
                core.push_str(line);
                core.push('\n');
            }
            Some((head, tag)) => {
                let name = tag.trim().trim_start_matches('[').trim_end_matches(']');
                match mods.iter_mut().find(|(n, _)| n == name) {
                    Some((_, t)) => {
                        t.push_str(head);
                        t.push('\n');
                    }
                    None => mods.push((name.to_string(), format!("{head}\n"))),
                }
            }
        }
    }
    (core, mods)
}

fn image_of(
    name: &str,
    bytes: Vec<u8>,
    base: u64,
    symbols: &str,
    cache: Option<&CacheDir>,
    progress: &dyn Progress,
) -> Result<AnalyzedImage, OpenError> {
    let t0 = Instant::now();
    let bytes = Arc::new(Bytes::Owned(bytes));
    let mut image = Image::raw(name, &bytes, ImageAddr(base));
    image
        .add_symbol_file(symbols)
        .map_err(|error| OpenError::Symbols { image: name.to_string(), error })?;
    Ok(crate::load::analyze_live_image(image, &bytes, symbols, cache, t0, progress))
}

impl Kernel {
    /// Open the driver and analyse the running kernel's text (and, with `modules`, every
    /// loaded module's), through the analysis cache in directory `cache` (`None`: none). An
    /// entry is used only for the very bytes and symbols it was made from, read now
    /// ([`crate::cache::live_key`]).
    pub fn open(
        modules: bool,
        cache: Option<&Path>,
        progress: &dyn Progress,
    ) -> Result<Kernel, OpenError> {
        let driver = Driver::open()?;
        let mut warnings = Vec::new();
        let cache =
            cache.and_then(|d| CacheDir::open(d).map_err(|e| warnings.push(e.to_string())).ok());
        let cache = cache.as_ref();
        let kallsyms = driver.kallsyms()?;
        let (core, mods) = split_kallsyms(&kallsyms);
        if core.lines().take(50).all(|l| l.starts_with("0000000000000000 ")) {
            return Err(OpenError::NoAddresses);
        }
        let current_task = core
            .lines()
            .find(|l| l.ends_with(" current_task"))
            .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
            .and_then(|a| u32::try_from(a).ok());
        let readers = READERS.map(|name| {
            let tail = format!(" {name}");
            core.lines()
                .find(|l| l.ends_with(&tail) && matches!(l.split(' ').nth(1), Some("T" | "t")))
                .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
                .unwrap_or(0)
        });
        let (stext, etext) = (driver.info.stext, driver.info.etext);
        let mut text = vec![0u8; (etext - stext) as usize];
        driver.read(KernelAddr(stext), &mut text)?;
        progress.phase("kernel text");
        let mut images = vec![image_of("vmlinux", text, stext, &core, cache, progress)?];
        if modules {
            let list = driver.modules()?;
            for line in list.lines() {
                let f: Vec<&str> = line.split_whitespace().collect();
                let (Some(name), Some(size), Some(addr)) = (f.first(), f.get(1), f.get(5)) else {
                    continue;
                };
                let (Ok(size), Ok(addr)) =
                    (size.parse::<u64>(), u64::from_str_radix(addr.trim_start_matches("0x"), 16))
                else {
                    continue;
                };
                let Some((_, syms)) = mods.iter().find(|(n, _)| n == name) else { continue };
                let (lo, hi) = driver.module_text(name, KernelAddr(addr), size);
                if hi <= lo {
                    continue;
                }
                let mut bytes = vec![0u8; (hi - lo) as usize];
                if driver.read(lo, &mut bytes).is_err() {
                    continue;
                }
                images.push(image_of(name, bytes, lo.0, syms, cache, progress)?);
            }
        }
        let kallsyms_symbols = kallsyms.lines().count();
        // An older driver reports 0 here; an offset at the heap's end (the last write filled
        // it) means the start again.
        let info = &driver.info;
        let start = if info.patch_next < info.patch_heap_size { info.patch_next } else { 0 };
        for w in images.iter().filter_map(|i| i.cache_warning.clone()) {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        Ok(Kernel {
            driver,
            images,
            warnings,
            current_task,
            readers,
            kallsyms_symbols,
            retired: std::sync::atomic::AtomicBool::new(false),
            patch_next: std::sync::atomic::AtomicU64::new(start),
        })
    }
}

/// Options of a kernel instrumentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelOptions {
    pub force_kind: Option<SpliceKind>,
    /// Run probes only while the task with this id (a thread's pid) is current.
    pub only_pid: Option<u32>,
    /// No trap splices ([`Rules::no_trap`]).
    pub no_traps: bool,
}

/// Probes spliced into the live kernel.
pub type KernelInstrumentation<'k> = PatchSet<KernelBackend<'k>>;

/// kerf.ko as a [`Backend`]: code written into the driver's patch heap (which no CPU reaches
/// until a splice leads there, and which the driver placed within reach of all kernel text),
/// the driver's data heap, and splices taken a whole batch per call through Djprobe's
/// protocol: every int3 of the batch, one quiescence, then every springboard and jump, each
/// step one call of the driver's batch ioctl (`KERF_IOC_SPLICE_BATCH`: text_poke_queue and
/// text_poke_finish), with one outcome per splice.
pub struct KernelBackend<'k> {
    kernel: &'k Kernel,
    /// Run probes only while the task with this id is current (`-p` with `--kernel`).
    only_pid: Option<u32>,
    /// No trap splices (`--no-traps`).
    no_traps: bool,
    /// Patch heap handed out so far.
    used: u64,
    /// The data heap's address, once cleared for this session.
    data: Option<u64>,
    /// How long the last batch's int3s took to go in: the longest time during which some
    /// sites were live and others not yet (e.g. a timer's exits without its entry).
    pub int3_time: Duration,
    /// The tasks' off-CPU clock, for a tool with off-CPU timers: its two tables (`out`,
    /// `table`) at the end of the data heap, and the offset of `task_struct.pid`.
    off_cpu: Option<(u64, u64, u32)>,
    /// Bytes at the end of the data heap the off-CPU tables take.
    reserved: u64,
    /// Trap entries whose int3 a jump has replaced: the driver lets them go after the next
    /// quiescence, and the next batch unregisters them then. Kept, every jump site's entry
    /// stayed in the table the driver rebuilds on each publish (once a batch): every block of
    /// core text made that O(sites) walk per batch, run while the batch's int3s were in the
    /// walk's own code, a soft lockup of 112 s.
    stale_traps: Vec<KernelAddr>,
    /// Where [`Backend::splice`]'s time went, step by step, over every batch so far.
    steps: Phases,
}

impl<'k> KernelBackend<'k> {
    pub fn new(kernel: &'k Kernel, opts: KernelOptions) -> KernelBackend<'k> {
        KernelBackend {
            kernel,
            only_pid: opts.only_pid,
            no_traps: opts.no_traps,
            used: kernel.patch_next.load(std::sync::atomic::Ordering::Relaxed),
            data: None,
            int3_time: Duration::ZERO,
            off_cpu: None,
            reserved: 0,
            stale_traps: Vec::new(),
            steps: Phases::default(),
        }
    }
}

/// Splices a kernel batch takes at most. Every splice of a batch is a trap (an int3 and an
/// exception on each hit) from its int3's write until its jmp goes in after the batch's
/// quiescence, so a batch bounds how much of the kernel runs through exceptions at once:
/// every block of core text (700 k) in one batch made the guest crawl for over ten minutes
/// with most of its hot paths trapping; in batches of this size it went live in 11 minutes (82
/// batches, each with its own quiescence).
const KERNEL_SPLICE_BATCH: usize = 8192;

/// The kernel function whose entry is every context switch: `__switch_to(prev, next)`, called
/// (jumped to) by `__switch_to_asm` once the stack is next's.
const SWITCH: &str = "__switch_to";

impl<'k> KernelBackend<'k> {
    /// The tasks' off-CPU clock: two tables of a word per task id (`pid_max` of them) at the
    /// end of the driver's data heap, zeroed: `out` (when a task was switched out) and the
    /// clock itself, which the context-switch probe keeps in TSC cycles.
    fn off_cpu_clock(&mut self) -> Result<Clock, InstrumentError> {
        let refuse = |why: String| InstrumentError::NoOffCpuClock { target: Where::Kernel, why };
        let btf = self.kernel.driver.btf()?;
        let pid = kerf_analysis::image::btf::member_offset(&btf, "task_struct", "pid")
            .ok_or_else(|| refuse("no task_struct.pid in /sys/kernel/btf/vmlinux".into()))?;
        if pid >= OFFCPU_TID_LIMIT {
            return Err(refuse(format!("task_struct.pid at byte {pid}")));
        }
        let ids = kerf_os::bpf::pid_max().map_err(|e| refuse(e.to_string()))?;
        let d = &self.kernel.driver;
        let len = (ids as u64 * 8).next_multiple_of(OFFCPU_TID_LIMIT as u64);
        // At most half the heap: the probes' data goes before the tables.
        if 4 * len > d.info.data_heap_size {
            let have = d.info.data_heap_size;
            return Err(refuse(format!(
                "pid_max {ids} needs 2 x {len} bytes of the driver's {have}"
            )));
        }
        let at = d.info.data_heap_size - 2 * len;
        for off in (at..d.info.data_heap_size).step_by(8) {
            d.store_u64(off as usize, 0);
        }
        let (out, table) = (d.info.data_heap + at, d.info.data_heap + at + len);
        self.off_cpu = Some((out, table, pid));
        self.reserved = 2 * len;
        Ok(Clock::OffCpu { table, tid: pid })
    }
}

impl<'k> PatchSet<KernelBackend<'k>> {
    /// Plan, write and splice `probes` (with `tool`'s timers, programs and area) into the
    /// kernel; `cancel` stops it between batches (what went in comes out).
    pub fn install(
        kernel: &'k Kernel,
        probes: &[Probe],
        tool: &ToolData,
        opts: KernelOptions,
        cancel: Cancel<'_>,
    ) -> Result<KernelInstrumentation<'k>, InstrumentError> {
        let be = KernelBackend::new(kernel, opts);
        let planning = Planning { force_kind: opts.force_kind, ..Planning::default() };
        PatchSet::build(be, &kernel.images, probes, tool, planning, cancel)
    }
}

/// `reqs` in address order (the driver writes a run of close sites together), with where
/// each request went.
fn by_address(reqs: Vec<SpliceRequest>) -> (Vec<SpliceRequest>, Vec<usize>) {
    let mut idx: Vec<usize> = (0..reqs.len()).collect();
    idx.sort_by_key(|&i| reqs[i].addr.0);
    let mut at = vec![0; reqs.len()];
    for (pos, &i) in idx.iter().enumerate() {
        at[i] = pos;
    }
    (idx.iter().map(|&i| reqs[i].clone()).collect(), at)
}

impl Backend for KernelBackend<'_> {
    type Addr = KernelAddr;
    /// The data heap's address in the kernel (kerf reads it through the driver's mapping).
    type Data = KernelAddr;

    /// Springboard space in the kernel is only the int3/nop padding between functions that
    /// analysis recorded (cfg.padding): bytes after a function's last return or jump and
    /// before the next symbol, which no branch, table or fall-through reaches. The 6.1 kernel
    /// puts nothing of its own there (no call-depth or FineIBT prefixes, which came later and
    /// would live in the 16 bytes before a function), and the driver refuses a springboard
    /// over bytes any patching mechanism owns. A springboard is written in the splice's
    /// batch, after the int3s' quiescence and before the jmp rel8 that uses it, and removed
    /// only after that jmp is gone and a quiescence has passed.
    const SPRINGBOARDS_WITH_SPLICES: bool = true;

    fn target(&self) -> Where {
        Where::Kernel
    }

    /// The next `len` bytes of the driver's patch heap (in reach of all text by placement).
    fn alloc_code(
        &mut self,
        _near: KernelAddr,
        _preferred: KernelAddr,
        len: u64,
    ) -> Result<KernelAddr, InstrumentError> {
        let info = &self.kernel.driver.info;
        let have = info.patch_heap_size;
        if self.used + len > have {
            let (label, addr) = ("(patch heap)".to_string(), info.patch_heap + self.used);
            return Err(InstrumentError::PatchHeapFull { label, addr, have });
        }
        self.used += len;
        self.kernel.patch_next.store(self.used, std::sync::atomic::Ordering::Relaxed);
        Ok(KernelAddr(info.patch_heap + self.used - len))
    }

    /// The driver's one data heap, cleared (an earlier session used it); all of it is in
    /// reach of the patch heap.
    fn map_data(
        &mut self,
        _near: KernelAddr,
        len: u64,
        _in_reach: u64,
    ) -> Result<KernelAddr, InstrumentError> {
        let d = &self.kernel.driver;
        let have = d.info.data_heap_size;
        if len > have {
            return Err(InstrumentError::DataHeapFull { need: len, have });
        }
        for off in (0..len).step_by(8) {
            d.store_u64(off as usize, 0);
        }
        self.data = Some(d.info.data_heap);
        Ok(KernelAddr(d.info.data_heap))
    }

    fn write_code(&mut self, at: KernelAddr, code: &[u8]) -> Result<(), InstrumentError> {
        Ok(self.kernel.driver.write_patch(at, code)?)
    }

    /// 1. every splice's trap registered, then every int3 in one driver batch (a CPU that
    ///    meets one goes to the patch; a refusal unregisters it and leaves the site out); 2.
    ///    quiescence: every CPU that was inside displaced bytes has left them; 3. every
    ///    springboard (into padding no CPU runs) and then every jump over its quiesced int3,
    ///    in one batch (the driver refuses a jmp rel8 whose springboard it refused). A jump
    ///    that does not go in leaves its site a trap. The caller orders the batch as sites
    ///    must go live (timer starts last, each group in address order).
    fn splice(
        &mut self,
        batch: &[Splice<KernelAddr>],
        done: &mut Vec<Outcome>,
    ) -> Result<(), InstrumentError> {
        let d = &self.kernel.driver;
        let t = Instant::now();
        let traps: Vec<(KernelAddr, KernelAddr)> =
            batch.iter().map(|s| (s.addr, s.patch)).collect();
        let trapped = d.trap_add_batch(&traps);
        let t = self.steps.lap("splices: traps registered", t);
        let reqs: Vec<SpliceRequest> = batch
            .iter()
            .zip(&trapped)
            .filter(|(_, t)| t.is_ok())
            .map(|(s, _)| SpliceRequest {
                addr: s.addr,
                old: s.old[..1].to_vec(),
                new: vec![INT3],
                one_insn: true,
            })
            .collect();
        let mut int3s = d.splice_batch(&reqs).into_iter();
        self.int3_time = t.elapsed();
        let t = self.steps.lap("splices: int3s", t);
        // What went in is in `done` before anything else can fail.
        let mut refused = Vec::new();
        for (s, t) in batch.iter().zip(trapped) {
            let r = t.and_then(|()| int3s.next().unwrap_or(Ok(())));
            done.push(match r {
                Ok(()) => Outcome::Done,
                Err(e) => {
                    refused.push(s.addr);
                    Outcome::Refused(Reason::driver(&e))
                }
            });
        }
        // `refused` also holds sites whose trap entry did not go in (`EEXIST`: an earlier
        // splice's entry at that address). Deleting that entry is safe: the driver refuses
        // (`EBUSY`) while its int3 is live and until a quiescence after the int3 went, so
        // only an entry no CPU can still need goes early.
        let _ = d.trap_del_batch(&refused);
        if !done.contains(&Outcome::Done) {
            return Ok(());
        }
        d.quiesce()?;
        let t = self.steps.lap("splices: quiescence", t);
        // The previous batches' replaced int3s are a quiescence old now. An entry the driver
        // keeps (it never should) only costs table space: removal unregisters it again.
        let _ = d.trap_del_batch(&std::mem::take(&mut self.stale_traps));
        let t = self.steps.lap("splices: replaced traps unregistered", t);
        // Per site with a jump: its springboard request (if any) and its jump request.
        let mut boards = Vec::new();
        let mut jumps = Vec::new();
        let mut sites = Vec::new();
        for (k, s) in batch.iter().enumerate() {
            if done[k] != Outcome::Done || s.new == [INT3] {
                continue;
            }
            let board = s.springboard.as_ref().map(|(sb, pad, jmp)| {
                boards.push(SpliceRequest {
                    addr: *sb,
                    old: pad.clone(),
                    new: jmp.clone(),
                    one_insn: true,
                });
                boards.len() - 1
            });
            // What is there now: kerf's int3, then the original bytes.
            let mut now = s.old.clone();
            now[0] = INT3;
            jumps.push(SpliceRequest {
                addr: s.addr,
                old: now,
                new: s.new.clone(),
                one_insn: false,
            });
            sites.push((k, board, jumps.len() - 1));
        }
        let ((boards, board_at), (jumps, jump_at)) = (by_address(boards), by_address(jumps));
        let nb = boards.len();
        let all: Vec<SpliceRequest> = boards.into_iter().chain(jumps).collect();
        let results = d.splice_batch(&all);
        let t = self.steps.lap("splices: springboards and jumps", t);
        let driver =
            |e: &KernelError| KindRefusal::Driver { errno: e.errno(), detail: e.to_string() };
        let (mut untrap, mut unboard) = (Vec::new(), Vec::new());
        for (k, board, jump) in sites {
            let board_in = board.is_some_and(|b| results[board_at[b]].is_ok());
            let board = board.map_or(Ok(()), |b| results[board_at[b]].as_ref().map(|_| ()));
            match board.and_then(|()| results[nb + jump_at[jump]].as_ref().map(|_| ())) {
                Err(e) if self.no_traps => {
                    untrap.push((k, e));
                    if let Some(b) = batch[k].springboard.as_ref().filter(|_| board_in) {
                        unboard.push(b.0);
                    }
                }
                Err(e) => done[k] = Outcome::Trap(driver(e)),
                Ok(()) => self.stale_traps.push(batch[k].addr),
            }
        }
        // With traps off, a site whose jump the driver refused does not stay a trap: its int3
        // comes out (its entry goes with the next batch's quiescence) and it is left out.
        untrap.sort_by_key(|&(k, _)| batch[k].addr.0);
        let addrs: Vec<KernelAddr> = untrap.iter().map(|&(k, _)| batch[k].addr).collect();
        for ((k, e), out) in untrap.into_iter().zip(d.unsplice_batch(&addrs)) {
            done[k] = match out {
                Ok(_) => {
                    self.stale_traps.push(batch[k].addr);
                    Outcome::Refused(Reason::driver(e))
                }
                Err(_) => Outcome::Trap(driver(e)),
            };
        }
        // Their springboards that went in (padding no CPU runs, and no jmp rel8 uses them):
        // out too, or they would stay until the device is closed.
        unboard.sort_by_key(|a| a.0);
        let _ = d.unsplice_batch(&unboard);
        self.steps.lap("splices: refused jumps out", t);
        Ok(())
    }

    /// Every splice out in one batch (the driver restores and checks the original bytes), a
    /// quiescence, the springboards in another, another quiescence, then the traps
    /// unregistered. Every step is taken for every splice; the first failure is returned
    /// after.
    fn remove(&mut self, batch: &[Splice<KernelAddr>]) -> Result<Vec<Outcome>, InstrumentError> {
        let d = &self.kernel.driver;
        let mut first_err = None;
        // Each batch in address order: few runs in the driver.
        let mut unsplice = |mut addrs: Vec<KernelAddr>| {
            addrs.sort_by_key(|a| a.0);
            for r in d.unsplice_batch(&addrs) {
                if let Err(e) = r {
                    first_err.get_or_insert(e);
                }
            }
        };
        unsplice(batch.iter().map(|s| s.addr).collect());
        d.quiesce()?;
        unsplice(batch.iter().filter_map(|s| s.springboard.as_ref()).map(|b| b.0).collect());
        d.quiesce()?;
        let _ = d.trap_del_batch(&batch.iter().map(|s| s.addr).collect::<Vec<_>>());
        self.kernel.retired.store(true, std::sync::atomic::Ordering::Relaxed);
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(vec![Outcome::Done; batch.len()]),
        }
    }

    fn take_splice_steps(&mut self) -> Phases {
        std::mem::take(&mut self.steps)
    }

    fn rules(&self) -> Rules {
        Rules { no_trap: self.no_traps, ..Rules::KERNEL }
    }

    /// Code patches are written one driver call each: a chunk is only how often the
    /// builder's cancellation check runs.
    fn chunk(&self) -> usize {
        256
    }

    /// Up to [`KERNEL_SPLICE_BATCH`] splices a batch: the driver's protocol takes a batch at
    /// once (three syncs for all, not three per site), and a CPU is never inside a splice's
    /// bytes after its quiescence (the driver never says Later).
    fn batches(&self, n: usize) -> Batches {
        Batches { size: n.clamp(1, KERNEL_SPLICE_BATCH), tries: 1, pause: Duration::ZERO }
    }

    /// One batch: the driver quiesces once per step for the whole batch.
    fn remove_batch(&self, n: usize) -> usize {
        n.max(1)
    }

    fn by_address(&self) -> bool {
        true
    }

    // (No `extra_probes` and the default `before_traps`: the kernel's traps go to the driver,
    // not to a signal handler, so it has no signal masks to guard and nothing must be live
    // before them.)

    /// Signal masks are a process's concern (the kernel's traps go to the driver), and timing
    /// through tail calls is for processes too. Tasks are told apart by `current_task`; `-p`
    /// needs the offset of `task_struct.pid` from BTF.
    fn begin(
        &mut self,
        _modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        phases: &mut Phases,
    ) -> Result<Begin, InstrumentError> {
        let t = Instant::now();
        // Patches an earlier removal retired are reusable after a quiescence (see `retired`).
        if self.kernel.retired.swap(false, std::sync::atomic::Ordering::Relaxed) {
            self.kernel.driver.quiesce()?;
            phases.lap("quiescence after the last removal", t);
        }
        if let Some(p) =
            probes.iter().find(|p| p.action == Action::SignalGuard || p.action.is_tail())
        {
            return Err(InstrumentError::NotInKernel {
                label: p.point.label.clone(),
                addr: p.point.addr.0,
                action: p.action,
            });
        }
        let only_id = match self.only_pid {
            None => None,
            Some(pid) => {
                let btf = self.kernel.driver.btf()?;
                let off = kerf_analysis::image::btf::member_offset(&btf, "task_struct", "pid")
                    .ok_or(InstrumentError::NoTaskPid { pid })?;
                Some((off, pid))
            }
        };
        let thread = match self.kernel.current_task {
            Some(off) => ThreadPointer::GsSlot(off),
            None if tool.needs_threads(probes) || self.only_pid.is_some() => {
                return Err(InstrumentError::NoCurrentTask)
            }
            None => ThreadPointer::GsSlot(0),
        };
        phases.lap("task context", t);
        let runtime = Runtime {
            target: Where::Kernel,
            env: Env::Kernel,
            thread,
            thread_id: None,
            only_thread: None,
            only_id,
            cpu: Runtime::cpu_read(),
            flags_save: kerf_codegen::FlagSave::Stack,
            kernel_reads: Some(self.kernel.kernel_reads()),
            off_cpu: None,
        };
        let runtime = if tool.off_cpu.is_empty() {
            runtime
        } else {
            let t = Instant::now();
            let clock = self.off_cpu_clock()?;
            phases.lap("off-CPU tables", t);
            Runtime { off_cpu: Some(clock), ..runtime }
        };
        Ok(Begin { runtime, startup: Vec::new() })
    }

    /// One data heap for every image (the driver's).
    fn heaps(&self, _modules: usize) -> usize {
        1
    }

    fn heap_of(&self, _module: usize) -> usize {
        0
    }

    /// The driver's data heap, and patch heap for every site; a site that no longer fits is
    /// named in the error.
    /// With off-CPU timers: the probe at the context switch that keeps the tasks' clocks
    /// (KernInst's virtual timers paused and resumed there), at `__switch_to`'s entry, where
    /// `rdi` is the task switched out and `rsi` the one switched in.
    fn extra_probes(
        &mut self,
        modules: &[AnalyzedImage],
        _planned: &Sites,
        _phases: &mut Phases,
    ) -> Result<Option<Vec<Probe>>, InstrumentError> {
        let Some((out, table, pid)) = self.off_cpu else { return Ok(None) };
        let refuse = |why: String| InstrumentError::NoOffCpuClock { target: Where::Kernel, why };
        let cfg = &modules.first().ok_or_else(|| refuse("no kernel image".into()))?.analysis.cfg;
        let (func, f) = cfg
            .functions
            .iter()
            .enumerate()
            .find(|(_, f)| f.name == SWITCH)
            .ok_or_else(|| refuse(format!("no {SWITCH} in the kernel's text")))?;
        let point = Point {
            spec: format!("{SWITCH} (off-CPU clock)"),
            label: format!("{SWITCH} (off-CPU clock)"),
            module: 0,
            func: FuncId(func as u32),
            addr: f.entry,
            at_exit: false,
        };
        Ok(Some(vec![Probe { point, action: Action::OffCpuSwitch { out, table, pid } }]))
    }

    fn map_heaps(
        &mut self,
        _modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        layout: &DataLayout,
        sites: &[SitePlan],
    ) -> Result<Vec<Option<Heap<KernelAddr>>>, InstrumentError> {
        // The tool's rings after everything else in the driver's data heap (and before the
        // off-CPU tables at its end).
        let rings_at = layout.areas[0].map(|_| layout.end[0].next_multiple_of(64));
        let len = rings_at.map_or(layout.end[0], |at| at + tool.rings);
        let have = self.kernel.driver.info.data_heap_size;
        if self.reserved > 0 && len + self.reserved > have {
            return Err(InstrumentError::DataHeapFull { need: len + self.reserved, have });
        }
        let data = self.map_data(KernelAddr(0), len, len)?;
        let have = self.kernel.driver.info.patch_heap_size;
        // No thread ids in the kernel: no first-lookup path (`Runtime::lookup_room` 0).
        let rooms = sites
            .iter()
            .map(|sp| patchset::site_room(probes, &sp.members, tool, 0, &sp.plan.displaced));
        // What the earlier sets left is too small: start again at the beginning (every
        // earlier set is out, and the driver quiesced after it: `begin`).
        if self.used + rooms.clone().sum::<u64>() > have {
            self.used = 0;
        }
        let mut room = 0;
        for (sp, r) in sites.iter().zip(rooms) {
            room += r;
            if self.used + room > have {
                let label = probes[sp.first].point.label.clone();
                let addr = sp.plan.displaced.point;
                return Err(InstrumentError::PatchHeapFull { label, addr, have });
            }
        }
        let code = self.alloc_code(KernelAddr(0), KernelAddr(0), room)?;
        let rings = rings_at.map(|at| data + at);
        Ok(vec![Some(Heap { code, data, tails: None, rings })])
    }

    fn read(&mut self, ranges: &[(KernelAddr, usize)]) -> Result<Vec<Vec<u8>>, InstrumentError> {
        let d = &self.kernel.driver;
        let read = |&(a, n): &(KernelAddr, usize)| {
            let mut b = vec![0u8; n];
            d.read(a, &mut b).map(|()| b)
        };
        Ok(ranges.iter().map(read).collect::<Result<_, _>>()?)
    }

    fn write_chunk(&mut self, patches: &[Patch<'_, KernelAddr>]) -> Result<(), InstrumentError> {
        patches.iter().try_for_each(|p| self.write_code(p.at, &p.code.bytes))
    }

    /// The jump itself, 5 or 2 bytes (the driver pokes one instruction); a jump out of reach
    /// (which the driver's heap placement rules out) leaves the site a trap.
    fn make_splice(
        &self,
        sp: &SitePlan,
        _label: &str,
        patch: KernelAddr,
        displaced: &[u8],
        pad: Option<&[u8]>,
    ) -> Result<Splice<KernelAddr>, InstrumentError> {
        let (addr, len) = (sp.plan.displaced.point, sp.plan.displaced.len);
        let trap = (vec![INT3], None);
        let (new, springboard) = match (sp.plan.kind, sp.plan.springboard, pad) {
            (SpliceKind::Jump5, _, _) => match jump5_bytes(addr, patch.0, len) {
                Some(j) => (j[..5].to_vec(), None),
                None => trap,
            },
            (SpliceKind::Jump2, Some((sb, _)), Some(pad)) => {
                match jump5_bytes(sb, patch.0, SPRINGBOARD_LEN as usize)
                    .zip(jump2_bytes(addr, sb, len))
                {
                    Some((jmp, j2)) => {
                        let board = (KernelAddr(sb), pad.to_vec(), jmp[..5].to_vec());
                        (j2[..2].to_vec(), Some(board))
                    }
                    None => trap,
                }
            }
            _ => trap,
        };
        let old = displaced.get(..new.len()).map(<[u8]>::to_vec).ok_or_else(|| {
            InstrumentError::Mismatch {
                addr,
                detail: "fewer displaced bytes than the splice".into(),
            }
        })?;
        Ok(Splice { addr: KernelAddr(addr), old, new, patch, springboard })
    }

    /// Nothing: the driver restored every byte and springboard in `remove`, its heaps are its
    /// own (freed when /dev/kerf is closed), and no CPU can be in a patch after its
    /// quiescence.
    fn after_remove(
        &mut self,
        _springboards: Vec<Springboard<KernelAddr>>,
    ) -> Result<Removed, InstrumentError> {
        Ok(Removed::default())
    }

    fn load_u64(&self, _heap: usize, off: u64) -> u64 {
        match self.data {
            Some(_) => self.kernel.driver.load_u64(off as usize),
            None => 0,
        }
    }

    fn data_words(&self, _heap: usize) -> Option<&[std::sync::atomic::AtomicU64]> {
        self.data.map(|_| self.kernel.driver.data_words())
    }

    fn store_u64(&self, _heap: usize, off: u64, v: u64) {
        if self.data.is_some() {
            self.kernel.driver.store_u64(off as usize, v);
        }
    }

    fn pauses(&self) -> Pauses {
        Pauses { int3: Some(self.int3_time), ..Pauses::default() }
    }

    /// None: the kernel's code heap is the driver's.
    fn code_heaps(&self) -> Vec<RemoteAddr> {
        Vec::new()
    }
}
