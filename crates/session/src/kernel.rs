//! The live kernel as a target (DESIGN.md §4, issue 4): its text and modules read through
//! kerf's driver and analysed like any image (symbols from /proc/kallsyms), and probes
//! installed with the driver's protocol (Djprobe's: an int3 first, quiescence, then the jump),
//! sharing splice planning and code generation with the process target.

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
use kerf_os::kernel::{Driver, KernelError};
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

/// Where a module's text ends: the lowest address of its other sections above `.text`, from
/// /sys/module/NAME/sections (its core allocation also holds read-only and writable data).
fn module_text(name: &str, base: u64, size: u64) -> (u64, u64) {
    let dir = format!("/sys/module/{name}/sections");
    let read = |s: &str| {
        std::fs::read_to_string(format!("{dir}/{s}"))
            .ok()
            .and_then(|t| u64::from_str_radix(t.trim().trim_start_matches("0x"), 16).ok())
    };
    let text = read(".text").unwrap_or(base);
    let mut end = base + size;
    if let Ok(rd) = std::fs::read_dir(&dir) {
        for e in rd.flatten() {
            let n = e.file_name().to_string_lossy().into_owned();
            if let Some(a) = read(&n) {
                if a > text && a < end && !n.starts_with(".text") {
                    end = a;
                }
            }
        }
    }
    (text, end)
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
                let (lo, hi) = module_text(name, addr, size);
                if hi <= lo {
                    continue;
                }
                let mut bytes = vec![0u8; (hi - lo) as usize];
                if driver.read(KernelAddr(lo), &mut bytes).is_err() {
                    continue;
                }
                images.push(image_of(name, bytes, lo, syms, progress)?);
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

/// One splice of a batch the kernel back-end writes: where, what is there, what goes there.
#[derive(Clone, Debug)]
pub struct Splice {
    pub addr: u64,
    pub old: Vec<u8>,
    pub new: Vec<u8>,
    /// The bytes may be a multi-instruction splice (the driver then needs a quiesced int3
    /// first, or takes it as a springboard in padding).
    pub first: bool,
}

/// kerf.ko as the back-end of a kernel patch set: code written into the driver's patch heap
/// (which no CPU reaches until a splice leads there), and splices taken a whole batch per call,
/// each batch under one quiescence protocol (Djprobe's: int3 first, quiesce, then the jumps).
/// A batch call maps onto the driver's batch ioctl (text_poke_queue/text_poke_finish) where
/// the driver has it; here each is the per-site requests, with one result per splice.
struct KernelBackend<'k> {
    d: &'k Driver,
}

impl KernelBackend<'_> {
    /// Write code no CPU can reach yet (patch heap).
    fn write_code(&self, at: u64, code: &[u8]) -> Result<(), KernelError> {
        self.d.write_patch(KernelAddr(at), code)
    }

    /// Read kernel text.
    fn read(&self, at: u64, buf: &mut [u8]) -> Result<(), KernelError> {
        self.d.read(KernelAddr(at), buf)
    }

    /// Step 2 for a batch: register each site's trap (a CPU meeting its int3 goes to the
    /// patch) and write the int3. One result per site; a refused one is unregistered again.
    fn traps(&self, batch: &[(u64, u64, u8)]) -> Vec<Result<(), KernelError>> {
        batch
            .iter()
            .map(|&(addr, patch, orig)| {
                let r = self
                    .d
                    .trap_add(KernelAddr(addr), KernelAddr(patch))
                    .and_then(|()| self.d.splice(KernelAddr(addr), &[orig], &[INT3], true));
                if r.is_err() {
                    let _ = self.d.trap_del(KernelAddr(addr));
                }
                r
            })
            .collect()
    }

    /// Step 3: every CPU that was inside displaced bytes has left them.
    fn quiesce(&self) -> Result<(), KernelError> {
        self.d.quiesce()
    }

    /// Step 4 for a batch: splices over bytes no CPU can be inside (springboards into padding,
    /// then jumps over quiesced int3s). One result per splice.
    fn splice(&self, batch: &[Splice]) -> Vec<Result<(), KernelError>> {
        batch.iter().map(|s| self.d.splice(KernelAddr(s.addr), &s.old, &s.new, s.first)).collect()
    }

    /// Removal of a batch: each address's splice taken out (the driver restores and checks
    /// the original bytes). One result per address.
    fn unsplice(&self, addrs: &[u64]) -> Vec<Result<(), KernelError>> {
        addrs.iter().map(|&a| self.d.unsplice(KernelAddr(a)).map(|_| ())).collect()
    }

    fn trap_del(&self, addrs: &[u64]) {
        for &a in addrs {
            let _ = self.d.trap_del(KernelAddr(a));
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
        let be = KernelBackend { d };
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
        // Data heap: thread table, timers, counters (one heap for every image); cleared (an
        // earlier session used it).
        let layout = DataLayout::new(probes, timers, 1, |_| 0)?;
        let need = layout.end[0];
        if need > d.info.data_heap_size {
            return Err(InstrumentError::DataHeapFull { need, have: d.info.data_heap_size });
        }
        for off in (0..need).step_by(8) {
            d.store_u64(off as usize, 0);
        }
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
            removed: false,
        };
        // 1. Code patches, each at its own place in the patch heap (unreachable so far),
        //    generated in parallel, in plan order: timer stops go live before timer starts
        //    (see plan::plan_sites).
        let mut used = 0u64;
        let mut jobs = Vec::with_capacity(plan.sites.len());
        for sp in &plan.sites {
            let room = patchset::site_room(probes, &sp.members);
            let label = &probes[sp.first].point.label;
            if used + room > d.info.patch_heap_size {
                return Err(InstrumentError::PatchHeapFull {
                    label: label.clone(),
                    addr: sp.plan.displaced.point,
                    have: d.info.patch_heap_size,
                });
            }
            let patch_at = d.info.patch_heap + used;
            used += room;
            let data = d.info.data_heap;
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
        let mut staged: Vec<(&SitePlan, u64, Vec<u8>)> = Vec::new();
        for job in &jobs {
            let sp = job.site;
            let addr = sp.plan.displaced.point;
            let mut original = vec![0u8; sp.plan.displaced.len.max(5)];
            be.read(addr, &mut original)?;
            let image = &kernel.images[probes[sp.first].point.module];
            let mut foreign =
                differs_from_file(image, addr, &original[..sp.plan.displaced.len.max(1)]);
            if let (None, Some((sb, _))) = (&foreign, sp.plan.springboard) {
                let mut pad = vec![0u8; SPRINGBOARD_LEN as usize];
                be.read(sb, &mut pad)?;
                foreign = differs_from_file(image, sb, &pad);
            }
            match foreign {
                Some(f) => inst.refuse(probes, sp, Reason::Foreign(f)),
                None => staged.push((sp, job.patch_at, original)),
            }
        }
        // 2. Every splice through an int3 first, the whole batch: the driver sends a CPU that
        //    meets it to the patch. Refusals (bytes another mechanism owns, the kprobe
        //    blacklist) drop the site with the driver's reason.
        let traps: Vec<(u64, u64, u8)> = staged
            .iter()
            .map(|(sp, patch, orig)| (sp.plan.displaced.point, *patch, orig[0]))
            .collect();
        let mut live: Vec<(usize, &SitePlan, u64, Vec<u8>)> = Vec::new();
        for ((sp, patch, original), r) in staged.into_iter().zip(be.traps(&traps)) {
            match r {
                Ok(()) => {
                    live.push((inst.sites.len(), sp, patch, original.clone()));
                    inst.push_site(probes, sp, patch, original, vec![INT3]);
                }
                Err(e) => inst.refuse(probes, sp, Reason::driver(&e)),
            }
        }
        if inst.sites.is_empty() {
            // The driver refused every point: that is the error.
            if let Some(r) = inst.refused.first().cloned() {
                inst.removed = true;
                return Err(InstrumentError::NothingPlaced(Box::new(r)));
            }
        }
        // 3. Quiesce: every CPU that was inside displaced bytes has left them.
        be.quiesce()?;
        // 4. The jumps, as a batch: springboards first (into padding no CPU runs), then jump5
        //    and jump2 over their quiesced int3s.
        //
        //    Springboard space in the kernel is only the int3/nop padding between functions
        //    that analysis recorded (cfg.padding): bytes after a function's last return or
        //    jump and before the next symbol, which no branch, table or fall-through reaches.
        //    The 6.1 kernel puts nothing of its own there (no call-depth or FineIBT prefixes,
        //    which came later and would live in the 16 bytes before a function), and the
        //    driver refuses a springboard over bytes any patching mechanism owns. A
        //    springboard is written before the jmp rel8 that uses it and removed only after
        //    that jmp is gone and a quiescence has passed.
        let mut springboards: Vec<(usize, Splice)> = Vec::new();
        let mut jumps: Vec<(usize, Splice)> = Vec::new();
        for (k, sp, patch, original) in live {
            let addr = sp.plan.displaced.point;
            let len = sp.plan.displaced.len;
            // What is there now: kerf's int3, then the original bytes.
            let mut now = original;
            now[0] = INT3;
            // `None` when the patch (or springboard) is out of reach, which the driver's heap
            // placement rules out, and which leaves the site a trap.
            match (sp.plan.kind, sp.plan.springboard) {
                (SpliceKind::Jump5, _) => match jump5_bytes(addr, patch, len) {
                    Some(j) => jumps.push((
                        k,
                        Splice { addr, old: now[..5].to_vec(), new: j[..5].to_vec(), first: false },
                    )),
                    None => inst.demote(k, KindRefusal::OutOfReach),
                },
                (SpliceKind::Jump2, Some((sb, _))) => {
                    match jump5_bytes(sb, patch, SPRINGBOARD_LEN as usize)
                        .zip(jump2_bytes(addr, sb, len))
                    {
                        Some((jmp, j2)) => {
                            let mut pad = vec![0u8; SPRINGBOARD_LEN as usize];
                            be.read(sb, &mut pad)?;
                            springboards.push((
                                k,
                                Splice { addr: sb, old: pad, new: jmp[..5].to_vec(), first: true },
                            ));
                            jumps.push((
                                k,
                                Splice {
                                    addr,
                                    old: now[..2].to_vec(),
                                    new: j2[..2].to_vec(),
                                    first: false,
                                },
                            ));
                        }
                        None => inst.demote(k, KindRefusal::OutOfReach),
                    }
                }
                _ => {}
            }
        }
        let batch: Vec<Splice> = springboards.iter().map(|s| s.1.clone()).collect();
        let mut no_springboard = Vec::new();
        for ((k, _), r) in springboards.iter().zip(be.splice(&batch)) {
            if let Err(e) = r {
                no_springboard.push(*k);
                inst.demote(*k, KindRefusal::Driver { errno: e.errno(), detail: e.to_string() });
            }
        }
        jumps.retain(|(k, _)| !no_springboard.contains(k));
        let batch: Vec<Splice> = jumps.iter().map(|s| s.1.clone()).collect();
        for ((k, s), r) in jumps.iter().zip(be.splice(&batch)) {
            match r {
                Ok(()) => inst.sites[*k].splice = s.new.clone(),
                // The int3 stays: the site still works, as a trap.
                Err(e) => {
                    inst.demote(*k, KindRefusal::Driver { errno: e.errno(), detail: e.to_string() })
                }
            }
        }
        inst.installed_at = (crate::instrument::tsc(), Instant::now());
        inst.splice_time = t0.elapsed();
        Ok(inst)
    }

    /// Every probe of `sp` left out, with why.
    fn refuse(&mut self, probes: &[Probe], sp: &SitePlan, reason: Reason) {
        let addr = sp.plan.displaced.point;
        self.refused.extend(sp.members.iter().map(|&i| Refused {
            probe: i,
            label: probes[i].point.label.clone(),
            addr,
            reason: reason.clone(),
        }));
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

    fn push_site(
        &mut self,
        probes: &[Probe],
        sp: &SitePlan,
        patch: u64,
        original: Vec<u8>,
        splice: Vec<u8>,
    ) {
        let p = &probes[sp.first].point;
        for &i in &sp.members {
            self.probe_site[i] = Some(self.sites.len());
        }
        self.sites.push(Site {
            spec: p.spec.clone(),
            label: p.label.clone(),
            addr: sp.plan.displaced.point,
            kind: sp.plan.kind,
            reason: sp.plan.reason.clone(),
            probes: sp.members.clone(),
            springboard_in: sp.plan.springboard,
            original,
            splice,
            patch,
            live: true,
            springboard: None,
        });
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
        let be = KernelBackend { d: &self.kernel.driver };
        let mut first_err = None;
        let addrs: Vec<u64> = self.sites.iter().map(|s| s.addr).collect();
        for r in be.unsplice(&addrs) {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        be.quiesce()?;
        let sbs: Vec<u64> =
            self.sites.iter().filter_map(|s| s.springboard_in.map(|x| x.0)).collect();
        for r in be.unsplice(&sbs) {
            if let Err(e) = r {
                first_err.get_or_insert(e);
            }
        }
        be.quiesce()?;
        be.trap_del(&addrs);
        match first_err {
            Some(e) => Err(e.into()),
            None => Ok(()),
        }
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
