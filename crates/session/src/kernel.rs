//! The live kernel as a target (DESIGN.md §4, issue 4): its text and modules read through
//! kerf's driver and analysed like any image (symbols from /proc/kallsyms), and probes
//! installed with the driver's protocol (Djprobe's: an int3 first, quiescence, then the jump),
//! sharing splice planning and code generation with the process target.

use crate::backend::{Backend, Outcome, Splice};
use crate::builder::{self, Batches};
use crate::load::{AnalyzedImage, Bytes};
use crate::patchset::{self, DataLayout, Job, Runtime};
use crate::plan::{differs_from_file, plan_sites, Rules, SitePlan};
use crate::probe::Where;
use crate::probe::{Action, InstrumentError, KindRefusal, Probe, Reason, Refused, Removed, Site};
use kerf_analysis::image::Image;
use kerf_analysis::{analyze, Progress};
use kerf_arch::{ImageAddr, KernelAddr};
use kerf_codegen::timer::{self, TimerSample};
use kerf_codegen::{Env, ThreadPointer};
use kerf_os::kernel::{Driver, KernelError, SpliceRequest};
use kerf_patch::{jump2_bytes, jump5_bytes, SpliceKind, INT3, SPRINGBOARD_LEN};
use std::fmt;
use std::path::PathBuf;
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
    pub kallsyms_symbols: usize,
}

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
    progress: &dyn Progress,
) -> Result<AnalyzedImage, OpenError> {
    let t0 = Instant::now();
    let bytes = Arc::new(Bytes::Owned(bytes));
    let mut image = Image::raw(name, &bytes, ImageAddr(base));
    image
        .add_symbol_file(symbols)
        .map_err(|error| OpenError::Symbols { image: name.to_string(), error })?;
    let text_bytes = image.text_bytes();
    let segments = image.segments.clone();
    // Loading is the symbol file; the phases of the analysis are timed by the analysis.
    let load_seconds = t0.elapsed().as_secs_f64();
    let analysis = analyze(&image, progress);
    drop(image);
    Ok(AnalyzedImage {
        path: PathBuf::from(name),
        file: PathBuf::from(name),
        bias: Some(0),
        analysis,
        cached: false,
        load_seconds,
        text_bytes,
        cache_warning: None,
        symbols: crate::SymbolOrigin { symbol_file: true, ..Default::default() },
        debug_warnings: Vec::new(),
        segments,
        bytes,
        from_cache: None,
    })
}

impl Kernel {
    /// Open the driver and analyse the running kernel's text (and, with `modules`, every
    /// loaded module's).
    pub fn open(modules: bool, progress: &dyn Progress) -> Result<Kernel, OpenError> {
        let driver = Driver::open()?;
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
        let (stext, etext) = (driver.info.stext, driver.info.etext);
        let mut text = vec![0u8; (etext - stext) as usize];
        driver.read(KernelAddr(stext), &mut text)?;
        progress.phase("kernel text");
        let mut images = vec![image_of("vmlinux", text, stext, &core, progress)?];
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
                images.push(image_of(name, bytes, lo.0, syms, progress)?);
            }
        }
        let kallsyms_symbols = kallsyms.lines().count();
        Ok(Kernel { driver, images, current_task, kallsyms_symbols })
    }
}

/// Options of a kernel instrumentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelOptions {
    pub force_kind: Option<SpliceKind>,
    /// Run probes only while the task with this id (a thread's pid) is current.
    pub only_pid: Option<u32>,
}

/// kerf.ko as a [`Backend`]: code written into the driver's patch heap (which no CPU reaches
/// until a splice leads there, and which the driver placed within reach of all kernel text),
/// the driver's data heap, and splices taken a whole batch per call through Djprobe's
/// protocol: every int3 of the batch, one quiescence, then every springboard and jump. A batch
/// call maps onto the driver's batch ioctl (text_poke_queue/text_poke_finish) where the driver
/// has it; here each step is the per-site requests, with one outcome per splice.
pub struct KernelBackend<'k> {
    d: &'k Driver,
    /// Patch heap handed out so far.
    used: u64,
    /// How long the last batch's int3s took to go in: the longest time during which some
    /// sites were live and others not yet (e.g. a timer's exits without its entry).
    pub int3_time: Duration,
}

impl<'k> KernelBackend<'k> {
    pub fn new(d: &'k Driver) -> KernelBackend<'k> {
        KernelBackend { d, used: 0, int3_time: Duration::ZERO }
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
    /// The data heap's address in the kernel (kerf reads it through the driver's mapping).
    type Data = u64;

    fn target(&self) -> Where {
        Where::Kernel
    }

    /// The next `len` bytes of the driver's patch heap (in reach of all text by placement).
    fn alloc_code(
        &mut self,
        _near: u64,
        _preferred: u64,
        len: u64,
    ) -> Result<u64, InstrumentError> {
        let have = self.d.info.patch_heap_size;
        if self.used + len > have {
            let (label, addr) = ("(patch heap)".to_string(), self.d.info.patch_heap + self.used);
            return Err(InstrumentError::PatchHeapFull { label, addr, have });
        }
        self.used += len;
        Ok(self.d.info.patch_heap + self.used - len)
    }

    /// The driver's one data heap, cleared (an earlier session used it).
    fn map_data(&mut self, _near: u64, len: u64) -> Result<u64, InstrumentError> {
        let have = self.d.info.data_heap_size;
        if len > have {
            return Err(InstrumentError::DataHeapFull { need: len, have });
        }
        for off in (0..len).step_by(8) {
            self.d.store_u64(off as usize, 0);
        }
        Ok(self.d.info.data_heap)
    }

    fn write_code(&mut self, at: u64, code: &[u8]) -> Result<(), InstrumentError> {
        Ok(self.d.write_patch(KernelAddr(at), code)?)
    }

    /// 1. every splice's trap registered, then every int3 in one driver batch (a CPU that
    ///    meets one goes to the patch; a refusal unregisters it and leaves the site out); 2.
    ///    quiescence: every CPU that was inside displaced bytes has left them; 3. every
    ///    springboard (into padding no CPU runs) and then every jump over its quiesced int3,
    ///    in one batch (the driver refuses a jmp rel8 whose springboard it refused). A jump
    ///    that does not go in leaves its site a trap. The caller orders the batch as sites
    ///    must go live (timer starts last, each group in address order).
    fn splice(&mut self, batch: &[Splice], done: &mut Vec<Outcome>) -> Result<(), InstrumentError> {
        let d = self.d;
        let trapped: Vec<Result<(), KernelError>> =
            batch.iter().map(|s| d.trap_add(KernelAddr(s.addr), KernelAddr(s.patch))).collect();
        let reqs: Vec<SpliceRequest> = batch
            .iter()
            .zip(&trapped)
            .filter(|(_, t)| t.is_ok())
            .map(|(s, _)| SpliceRequest {
                addr: KernelAddr(s.addr),
                old: s.old[..1].to_vec(),
                new: vec![INT3],
                one_insn: true,
            })
            .collect();
        let t = Instant::now();
        let mut int3s = d.splice_batch(&reqs).into_iter();
        self.int3_time = t.elapsed();
        // What went in is in `done` before anything else can fail.
        for (s, t) in batch.iter().zip(trapped) {
            let r = t.and_then(|()| int3s.next().unwrap_or(Ok(())));
            done.push(match r {
                Ok(()) => Outcome::Done,
                Err(e) => {
                    let _ = d.trap_del(KernelAddr(s.addr));
                    Outcome::Refused(Reason::driver(&e))
                }
            });
        }
        if !done.contains(&Outcome::Done) {
            return Ok(());
        }
        d.quiesce()?;
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
                    addr: KernelAddr(*sb),
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
                addr: KernelAddr(s.addr),
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
        let driver =
            |e: &KernelError| KindRefusal::Driver { errno: e.errno(), detail: e.to_string() };
        for (k, board, jump) in sites {
            let board = board.map_or(Ok(()), |b| results[board_at[b]].as_ref().map(|_| ()));
            if let Err(e) = board.and_then(|()| results[nb + jump_at[jump]].as_ref().map(|_| ())) {
                done[k] = Outcome::Trap(driver(e));
            }
        }
        Ok(())
    }

    /// Every splice out in one batch (the driver restores and checks the original bytes), a
    /// quiescence, the springboards in another, another quiescence, then the traps
    /// unregistered. Every step is taken for every splice; the first failure is returned
    /// after.
    fn remove(&mut self, batch: &[Splice]) -> Result<Vec<Outcome>, InstrumentError> {
        let d = self.d;
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
        unsplice(batch.iter().map(|s| KernelAddr(s.addr)).collect());
        d.quiesce()?;
        unsplice(
            batch.iter().filter_map(|s| s.springboard.as_ref()).map(|b| KernelAddr(b.0)).collect(),
        );
        d.quiesce()?;
        for s in batch {
            let _ = d.trap_del(KernelAddr(s.addr));
        }
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(vec![Outcome::Done; batch.len()]),
        }
    }
}

/// Probes spliced into the live kernel.
pub struct KernelInstrumentation<'k> {
    kernel: &'k Kernel,
    sites: Vec<Site>,
    /// Probes left out, with why (no splice kind, another mechanism owns the bytes, the kprobe
    /// blacklist, ...): reported, not fatal.
    pub refused: Vec<Refused>,
    layout: DataLayout,
    probe_site: Vec<Option<usize>>,
    pub installed_at: (u64, Instant),
    pub splice_time: Duration,
    /// How long the int3s took to go in (step 2's driver calls): the longest time during
    /// which some sites were live and others not yet, e.g. a timer's exits without its entry.
    pub int3_time: Duration,
    removed: bool,
}

impl<'k> KernelInstrumentation<'k> {
    /// Plan, write and splice `probes` (with `timers` timer blocks) into the kernel.
    pub fn install(
        kernel: &'k Kernel,
        probes: &[Probe],
        timers: usize,
        opts: KernelOptions,
    ) -> Result<KernelInstrumentation<'k>, InstrumentError> {
        let t0 = Instant::now();
        let d = &kernel.driver;
        let mut be = KernelBackend::new(d);
        // Signal masks are a process's concern (the kernel's traps go to the driver), and
        // timing through tail calls is for processes too.
        if let Some(p) =
            probes.iter().find(|p| p.action == Action::SignalGuard || p.action.is_tail())
        {
            return Err(InstrumentError::NotInKernel {
                label: p.point.label.clone(),
                addr: p.point.addr.0,
                action: p.action,
            });
        }
        // Data heap: thread table, timers, counters (one heap for every image).
        let layout = DataLayout::new(probes, timers, 1, |_| 0)?;
        let data = be.map_data(0, layout.end[0])?;
        let only_id = match opts.only_pid {
            None => None,
            Some(pid) => {
                let btf = kernel.driver.btf()?;
                let off = kerf_analysis::image::btf::member_offset(&btf, "task_struct", "pid")
                    .ok_or(InstrumentError::NoTaskPid { pid })?;
                Some((off, pid))
            }
        };
        let thread = match kernel.current_task {
            Some(off) => ThreadPointer::GsSlot(off),
            None if timers > 0 || opts.only_pid.is_some() => {
                return Err(InstrumentError::NoCurrentTask)
            }
            None => ThreadPointer::GsSlot(0),
        };
        let plan = plan_sites(&kernel.images, probes, opts.force_kind, &[], Rules::KERNEL, None)?;
        let mut inst = KernelInstrumentation {
            kernel,
            sites: Vec::new(),
            refused: plan.refused,
            layout,
            probe_site: vec![None; probes.len()],
            installed_at: (crate::instrument::tsc(), Instant::now()),
            splice_time: Duration::ZERO,
            int3_time: Duration::ZERO,
            removed: false,
        };
        // 1. Code patches, each at its own place in the patch heap (unreachable so far),
        //    generated in parallel, in plan order: timer stops go live before timer starts
        //    (see plan::plan_sites).
        let mut jobs = Vec::with_capacity(plan.sites.len());
        for sp in &plan.sites {
            let room = patchset::site_room(probes, &sp.members);
            let label = &probes[sp.first].point.label;
            let patch_at =
                be.alloc_code(sp.plan.displaced.point, 0, room).map_err(|e| match e {
                    InstrumentError::PatchHeapFull { have, .. } => InstrumentError::PatchHeapFull {
                        label: label.clone(),
                        addr: sp.plan.displaced.point,
                        have,
                    },
                    e => e,
                })?;
            jobs.push(Job { site: sp, label, patch_at, data, tails: 0, guard_action: None });
        }
        let rt =
            Runtime { target: Where::Kernel, env: Env::Kernel, thread, only_thread: None, only_id };
        let codes = patchset::generate(probes, &inst.layout, &rt, &jobs);
        for (job, code) in jobs.iter().zip(codes) {
            be.write_code(job.patch_at, &code?.bytes)?;
        }
        // DESIGN §5: the displaced bytes (and a springboard's padding) must still be the text
        // analysis read; anything else belongs to someone who changed it since.
        let mut staged: Vec<(&SitePlan, Splice)> = Vec::new();
        for job in &jobs {
            let sp = job.site;
            let (addr, len) = (sp.plan.displaced.point, sp.plan.displaced.len);
            let mut original = vec![0u8; len.max(5)];
            d.read(KernelAddr(addr), &mut original)?;
            let image = &kernel.images[probes[sp.first].point.module];
            let mut foreign = differs_from_file(image, addr, &original[..len.max(1)]);
            let mut pad = vec![0u8; SPRINGBOARD_LEN as usize];
            if let (None, Some((sb, _))) = (&foreign, sp.plan.springboard) {
                d.read(KernelAddr(sb), &mut pad)?;
                foreign = differs_from_file(image, sb, &pad);
            }
            if let Some(f) = foreign {
                inst.refuse(probes, sp, Reason::Foreign(f));
                continue;
            }
            // The splice's bytes; a jump out of reach (which the driver's heap placement
            // rules out) leaves the site a trap.
            let patch = job.patch_at;
            let (new, springboard) = match (sp.plan.kind, sp.plan.springboard) {
                (SpliceKind::Jump5, _) => match jump5_bytes(addr, patch, len) {
                    Some(j) => (j[..5].to_vec(), None),
                    None => (vec![INT3], None),
                },
                (SpliceKind::Jump2, Some((sb, _))) => {
                    match jump5_bytes(sb, patch, SPRINGBOARD_LEN as usize)
                        .zip(jump2_bytes(addr, sb, len))
                    {
                        Some((jmp, j2)) => (j2[..2].to_vec(), Some((sb, pad, jmp[..5].to_vec()))),
                        None => (vec![INT3], None),
                    }
                }
                _ => (vec![INT3], None),
            };
            let old = original[..new.len()].to_vec();
            staged.push((sp, Splice { addr, old, new, patch, springboard }));
        }
        // 2-4. The whole batch through the driver's protocol (int3s, quiescence, jumps).
        //
        //    Springboard space in the kernel is only the int3/nop padding between functions
        //    that analysis recorded (cfg.padding): bytes after a function's last return or
        //    jump and before the next symbol, which no branch, table or fall-through reaches.
        //    The 6.1 kernel puts nothing of its own there (no call-depth or FineIBT prefixes,
        //    which came later and would live in the 16 bytes before a function), and the
        //    driver refuses a springboard over bytes any patching mechanism owns. A
        //    springboard is written before the jmp rel8 that uses it and removed only after
        //    that jmp is gone and a quiescence has passed.
        // In the order sites must go live: every site without a timer start, then the rest
        // (see `plan_sites`), each group in address order, so that the driver writes a group
        // in few runs and the first group before the second.
        let starts = |sp: &SitePlan| {
            sp.members.iter().any(|&i| matches!(probes[i].action, Action::TimerStart(_)))
        };
        staged.sort_by_key(|(sp, s)| (starts(sp), s.addr));
        let batch: Vec<Splice> = staged.iter().map(|(_, s)| s.clone()).collect();
        // One batch: the driver's protocol takes every splice at once, and a CPU is never
        // inside a splice's bytes after its quiescence (the driver never says Later).
        let whole = Batches { size: batch.len().max(1), tries: 1, pause: Duration::ZERO };
        // (An error here leaves the int3s that went in to the caller's drop, which takes out
        // every site recorded: `splice_in_batches` reports them before it returns the error.)
        let r = builder::splice_in_batches(
            &mut be,
            &batch,
            (0..batch.len()).collect(),
            whole,
            || Ok(()),
            |i, outcome| {
                let (sp, mut s) = (staged[i].0, staged[i].1.clone());
                let planned_jump = s.new != [INT3];
                match outcome {
                    Outcome::Refused(why) => inst.refuse(probes, sp, why),
                    Outcome::Trap(why) => {
                        s.new = vec![INT3];
                        s.springboard = None;
                        let k = inst.push_site(probes, sp, s);
                        inst.demote(k, why);
                    }
                    Outcome::Done => {
                        let k = inst.push_site(probes, sp, s);
                        if sp.plan.kind != SpliceKind::Trap && !planned_jump {
                            inst.demote(k, KindRefusal::OutOfReach);
                        }
                    }
                    // (Never settled: returned below.)
                    Outcome::Later => {}
                }
            },
        );
        inst.int3_time = be.int3_time;
        // Not written (a Later the driver never reports): left out, with why.
        for i in r? {
            inst.refuse(probes, staged[i].0, Reason::Busy { tries: 1 });
        }
        if inst.sites.is_empty() {
            // The driver refused every point: that is the error.
            if let Some(r) = inst.refused.first().cloned() {
                inst.removed = true;
                return Err(InstrumentError::NothingPlaced(Box::new(r)));
            }
        }
        inst.installed_at = (crate::instrument::tsc(), Instant::now());
        inst.splice_time = t0.elapsed();
        Ok(inst)
    }

    /// Every probe of `sp` left out, with why.
    fn refuse(&mut self, probes: &[Probe], sp: &SitePlan, reason: Reason) {
        self.refused.extend(builder::refusals(probes, sp, &reason));
    }

    /// Site `k` keeps its int3 and works as a trap: its jump could not go in.
    fn demote(&mut self, k: usize, why: KindRefusal) {
        let s = &mut self.sites[k];
        let mut refused = match s.reason.take() {
            Some(Reason::Kinds { refused, .. }) => refused,
            _ => Vec::new(),
        };
        refused.push((s.kind, why));
        s.kind = SpliceKind::Trap;
        s.reason = Some(Reason::Kinds { chosen: None, refused });
    }

    /// Record the site of `sp`, live with splice `s`; returns its index.
    fn push_site(&mut self, probes: &[Probe], sp: &SitePlan, s: Splice) -> usize {
        let p = &probes[sp.first].point;
        let k = self.sites.len();
        for &i in &sp.members {
            self.probe_site[i] = Some(k);
        }
        self.sites.push(Site::planned(&p.spec, p.label.clone(), sp, s, true));
        k
    }

    pub fn sites(&self) -> &[Site] {
        &self.sites
    }

    /// The site probe `i` is at, or `None` if the driver refused it.
    pub fn site_of(&self, i: usize) -> Option<&Site> {
        self.probe_site[i].map(|s| &self.sites[s])
    }

    pub fn count(&self, i: usize) -> u64 {
        self.layout.counters[i].map_or(0, |(_, off)| self.kernel.driver.load_u64(off as usize))
    }

    pub fn timer(&self, t: usize, now: u64) -> TimerSample {
        let Some((_, off)) = self.layout.timers[t] else { return TimerSample::default() };
        timer::sample(&|o| self.kernel.driver.load_u64((off + o) as usize), now)
    }

    /// Restore every byte (jumps first, then, after quiescence, springboards and traps). The
    /// driver restores and checks each address's original bytes; nothing is left behind.
    pub fn remove(mut self) -> Result<Removed, InstrumentError> {
        self.removed = true;
        self.remove_all().map(|()| Removed::default())
    }

    fn remove_all(&mut self) -> Result<(), InstrumentError> {
        // The sites went live in the order recorded; one batch takes them all out (the
        // driver's protocol quiesces once per step for the whole batch).
        let live: Vec<(usize, Splice)> = (self.sites.iter().enumerate())
            .filter(|(_, s)| s.live)
            .map(|(i, s)| {
                let splice = Splice {
                    addr: s.addr,
                    old: s.original.clone(),
                    new: s.splice.clone(),
                    patch: s.patch,
                    springboard: s.springboard.clone(),
                };
                (i, splice)
            })
            .collect();
        let mut be = KernelBackend::new(&self.kernel.driver);
        let sites = &mut self.sites;
        builder::remove_in_batches(&mut be, &live, live.len(), |i| sites[i].live = false)
    }
}

impl Drop for KernelInstrumentation<'_> {
    /// An instrumentation dropped without `remove` (an error, a panic) removes itself; if
    /// kerf dies instead, closing /dev/kerf makes the driver restore everything.
    fn drop(&mut self) {
        if !self.removed {
            self.removed = true;
            let _ = self.remove_all();
        }
    }
}
