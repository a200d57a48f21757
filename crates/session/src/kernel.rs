//! The live kernel as a target (DESIGN.md §4, issue 4): its text and modules read through
//! kerf's driver and analysed like any image (symbols from /proc/kallsyms), and probes
//! installed with the driver's protocol (Djprobe's: an int3 first, quiescence, then the jump),
//! sharing splice planning and code generation with the process target.

use crate::instrument::{Action, InstrumentError, Probe, Site};
use crate::load::{AnalyzedImage, Bytes};
use crate::plan::{differs_from_file, live_at, plan_sites, Rules, SitePlan};
use kerf_analysis::image::Image;
use kerf_analysis::{analyze, Progress};
use kerf_arch::{ImageAddr, KernelAddr};
use kerf_codegen::timer::{self, TimerSample, THREAD_TABLE_LEN, TIMER_LEN};
use kerf_codegen::{lower, Context, Env, Primitive, ThreadPointer};
use kerf_os::kernel::{Driver, KernelError, SpliceRequest};
use kerf_patch::{build_patch, jump2_bytes, jump5_bytes, SpliceKind, INT3, SPRINGBOARD_LEN};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of patch heap reserved per site, and per timer primitive at it.
const PATCH_SLOT: u64 = 128;
const TIMER_PATCH: u64 = 192;
/// Bytes of data heap per counter (one cache line).
const DATA_SLOT: u64 = 64;

impl From<KernelError> for InstrumentError {
    fn from(e: KernelError) -> Self {
        InstrumentError::Kernel(e)
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
) -> Result<AnalyzedImage, String> {
    let t0 = Instant::now();
    let bytes = Arc::new(Bytes::Owned(bytes));
    let mut image = Image::raw(name, &bytes, ImageAddr(base));
    image.add_symbol_file(symbols).map_err(|e| format!("{name}: symbols: {e}"))?;
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
    pub fn open(modules: bool, progress: &dyn Progress) -> Result<Kernel, String> {
        let driver = Driver::open().map_err(|e| e.to_string())?;
        let kallsyms = driver.kallsyms().map_err(|e| e.to_string())?;
        let (core, mods) = split_kallsyms(&kallsyms);
        if core.lines().take(50).all(|l| l.starts_with("0000000000000000 ")) {
            return Err("/proc/kallsyms shows no addresses (kptr_restrict): run as root".into());
        }
        let current_task = core
            .lines()
            .find(|l| l.ends_with(" current_task"))
            .and_then(|l| u64::from_str_radix(l.split(' ').next()?, 16).ok())
            .and_then(|a| u32::try_from(a).ok());
        let (stext, etext) = (driver.info.stext, driver.info.etext);
        let mut text = vec![0u8; (etext - stext) as usize];
        driver.read(KernelAddr(stext), &mut text).map_err(|e| e.to_string())?;
        progress.phase("kernel text");
        let mut images = vec![image_of("vmlinux", text, stext, &core, progress)?];
        if modules {
            let list = driver.modules().map_err(|e| e.to_string())?;
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

/// A site whose int3 is in: its index in the instrumentation's sites, its plan, its code
/// patch and its original bytes.
type LiveSite<'p> = (usize, &'p SitePlan, u64, Vec<u8>);

/// Options of a kernel instrumentation.
#[derive(Clone, Copy, Debug, Default)]
pub struct KernelOptions {
    pub force_kind: Option<SpliceKind>,
    /// Run probes only while the task with this id (a thread's pid) is current.
    pub only_pid: Option<u32>,
}

/// Probes spliced into the live kernel.
pub struct KernelInstrumentation<'k> {
    kernel: &'k Kernel,
    sites: Vec<Site>,
    /// Sites the driver refused, with why (another mechanism owns the bytes, the kprobe
    /// blacklist, ...): reported, not fatal.
    pub refused: Vec<(String, u64, String)>,
    counters: Vec<Option<u64>>,
    timers: Vec<u64>,
    /// `(offset of pid in task_struct, pid)` for `--pid`.
    only_pid: Option<(u32, u32)>,
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
        if let Some(p) = probes.iter().find(|p| p.action == Action::SignalGuard) {
            // Signal masks are a process's concern: the kernel's traps go to the driver.
            return Err(InstrumentError::Point {
                label: p.point.label.clone(),
                addr: p.point.addr.0,
                detail: "a signal-mask guard belongs in a process, not the kernel".into(),
            });
        }
        if let Some(p) = probes.iter().find(|p| p.action.is_tail()) {
            return Err(InstrumentError::Point {
                label: p.point.label.clone(),
                addr: p.point.addr.0,
                detail: "timing through tail calls is for processes, not the kernel".into(),
            });
        }
        // Data heap: thread table, timers, counters; cleared (an earlier session used it).
        let counters_n = probes.iter().filter(|p| p.action == Action::Count).count() as u64;
        let need = THREAD_TABLE_LEN + timers as u64 * TIMER_LEN + counters_n * DATA_SLOT;
        if need > d.info.data_heap_size {
            return Err(InstrumentError::Point {
                label: format!("{} probes", probes.len()),
                addr: d.info.data_heap,
                detail: format!(
                    "need {need} bytes of data heap, the driver has {}",
                    d.info.data_heap_size
                ),
            });
        }
        for off in (0..need).step_by(8) {
            d.store_u64(off as usize, 0);
        }
        let timer_at: Vec<u64> =
            (0..timers as u64).map(|t| THREAD_TABLE_LEN + t * TIMER_LEN).collect();
        let mut counters = vec![None; probes.len()];
        let mut next = THREAD_TABLE_LEN + timers as u64 * TIMER_LEN;
        for (i, p) in probes.iter().enumerate() {
            if p.action == Action::Count {
                counters[i] = Some(next);
                next += DATA_SLOT;
            }
        }
        let only_pid = match opts.only_pid {
            None => None,
            Some(pid) => {
                let btf = kernel.driver.btf()?;
                let off = kerf_analysis::image::btf::member_offset(&btf, "task_struct", "pid")
                    .ok_or_else(|| InstrumentError::Point {
                        label: format!("--pid {pid}"),
                        addr: 0,
                        detail: "no task_struct.pid in /sys/kernel/btf/vmlinux".into(),
                    })?;
                Some((off, pid))
            }
        };
        let plan = plan_sites(&kernel.images, probes, opts.force_kind, &[], Rules::KERNEL, None)?;
        let refused =
            plan.refused.iter().map(|r| (r.label.clone(), r.addr, r.reason.clone())).collect();
        let mut inst = KernelInstrumentation {
            kernel,
            sites: Vec::new(),
            refused,
            counters,
            timers: timer_at,
            only_pid,
            probe_site: vec![None; probes.len()],
            installed_at: (crate::instrument::tsc(), Instant::now()),
            splice_time: Duration::ZERO,
            int3_time: Duration::ZERO,
            removed: false,
        };
        let thread = match kernel.current_task {
            Some(off) => ThreadPointer::GsSlot(off),
            None if timers > 0 || opts.only_pid.is_some() => {
                return Err(InstrumentError::Point {
                    label: "timers".into(),
                    addr: 0,
                    detail: "no current_task in /proc/kallsyms: cannot tell tasks apart".into(),
                })
            }
            None => ThreadPointer::GsSlot(0),
        };
        // 1. Code patches, each at its own place in the patch heap (unreachable so far).
        let mut used = 0u64;
        let mut staged = Vec::new();
        // In plan order: timer stops go live before timer starts (see plan::plan_sites).
        for sp in &plan.sites {
            let room: u64 = sp
                .members
                .iter()
                .map(|&i| {
                    PATCH_SLOT + if probes[i].action == Action::Count { 0 } else { TIMER_PATCH }
                })
                .sum();
            if used + room > d.info.patch_heap_size {
                return Err(InstrumentError::Point {
                    label: probes[sp.first].point.label.clone(),
                    addr: sp.plan.displaced.point,
                    detail: "the driver's patch heap is full".into(),
                });
            }
            let patch = d.info.patch_heap + used;
            let code = inst.patch_code(probes, sp, patch, thread)?;
            d.write_patch(KernelAddr(patch), &code)?;
            used += (code.len() as u64).next_multiple_of(16);
            staged.push((sp, patch));
        }
        // 2. Every splice through an int3 first: the driver sends a CPU that meets it to the
        //    patch. Refusals (bytes another mechanism owns, the kprobe blacklist) drop the
        //    site with the driver's reason.
        let mut int3s: Vec<(&SitePlan, u64, Vec<u8>)> = Vec::new();
        for (sp, patch) in staged {
            let addr = sp.plan.displaced.point;
            let mut original = vec![0u8; sp.plan.displaced.len.max(5)];
            d.read(KernelAddr(addr), &mut original)?;
            let label = probes[sp.first].point.label.clone();
            // DESIGN §5: the displaced bytes (and a springboard's padding) must still be the
            // text analysis read; anything else belongs to someone who changed it since.
            let image = &kernel.images[probes[sp.first].point.module];
            let mut foreign =
                differs_from_file(image, addr, &original[..sp.plan.displaced.len.max(1)]);
            if let (None, Some((sb, _))) = (&foreign, sp.plan.springboard) {
                let mut pad = vec![0u8; SPRINGBOARD_LEN as usize];
                d.read(KernelAddr(sb), &mut pad)?;
                foreign = differs_from_file(image, sb, &pad);
            }
            if let Some(why) = foreign {
                inst.refused.push((label, addr, why));
                continue;
            }
            match d.trap_add(KernelAddr(addr), KernelAddr(patch)) {
                Ok(()) => int3s.push((sp, patch, original)),
                Err(e) => inst.refused.push((label, addr, e.to_string())),
            }
        }
        let live = inst.splice_int3s(probes, int3s);
        if inst.sites.is_empty() {
            // The driver refused every point: that is the error.
            if let Some((label, addr, detail)) = inst.refused.first().cloned() {
                inst.removed = true;
                return Err(InstrumentError::Point { label, addr, detail });
            }
        }
        // 3. Quiesce: every CPU that was inside displaced bytes has left them.
        d.quiesce()?;
        // 4. The jumps over the int3s.
        inst.splice_jumps(live)?;
        inst.installed_at = (crate::instrument::tsc(), Instant::now());
        inst.splice_time = t0.elapsed();
        Ok(inst)
    }

    /// Step 2: the int3 of every site in one batch (whose trap is in), in the order sites must
    /// go live: every site without a timer start, then the rest (see `plan_sites`), each group
    /// in address order, so that the driver writes a group in few runs and the first group
    /// before the second. A refused int3 drops its site and its trap. Returns the live sites:
    /// (index in `sites`, plan, patch, original bytes).
    fn splice_int3s<'p>(
        &mut self,
        probes: &[Probe],
        mut int3s: Vec<(&'p SitePlan, u64, Vec<u8>)>,
    ) -> Vec<LiveSite<'p>> {
        let d = &self.kernel.driver;
        let starts = |sp: &SitePlan| {
            sp.members.iter().any(|&i| matches!(probes[i].action, Action::TimerStart(_)))
        };
        int3s.sort_by_key(|(sp, _, _)| (starts(sp), sp.plan.displaced.point));
        let reqs: Vec<SpliceRequest> = int3s
            .iter()
            .map(|(sp, _, original)| SpliceRequest {
                addr: KernelAddr(sp.plan.displaced.point),
                old: original[..1].to_vec(),
                new: vec![INT3],
                one_insn: true,
            })
            .collect();
        let t = Instant::now();
        let results = d.splice_batch(&reqs);
        self.int3_time = t.elapsed();
        let mut live = Vec::new();
        for ((sp, patch, original), r) in int3s.into_iter().zip(results) {
            let addr = sp.plan.displaced.point;
            match r {
                Ok(()) => {
                    live.push((self.sites.len(), sp, patch, original.clone()));
                    self.push_site(probes, sp, patch, original, vec![INT3]);
                }
                Err(e) => {
                    let _ = d.trap_del(KernelAddr(addr));
                    self.refused.push((probes[sp.first].point.label.clone(), addr, e.to_string()));
                }
            }
        }
        live
    }

    /// Step 4: the jumps, in one batch: jump5 over the int3; jump2 after its springboard
    /// (padding: one "instruction" no one runs). Springboards come first in the batch, so the
    /// driver writes every one before any jmp rel8 (and refuses a jmp rel8 whose springboard
    /// it refused). A site whose jump is refused keeps its int3: it still works, as a trap.
    ///
    /// Springboard space in the kernel is only the int3/nop padding between functions that
    /// analysis recorded (cfg.padding): bytes after a function's last return or jump and
    /// before the next symbol, which no branch, table or fall-through reaches. The 6.1 kernel
    /// puts nothing of its own there (no call-depth or FineIBT prefixes, which came later and
    /// would live in the 16 bytes before a function), and the driver refuses a springboard
    /// over bytes any patching mechanism owns. A springboard is written before the jmp rel8
    /// that uses it and removed only after that jmp is gone and a quiescence has passed.
    fn splice_jumps(&mut self, live: Vec<LiveSite<'_>>) -> Result<(), InstrumentError> {
        let d = &self.kernel.driver;
        // Per site: its springboard request (if any), its jump request, or why it has none.
        let mut boards: Vec<SpliceRequest> = Vec::new();
        let mut jumps: Vec<SpliceRequest> = Vec::new();
        let mut plan: Vec<(usize, Option<usize>, Result<usize, String>)> = Vec::new();
        for (k, sp, patch, original) in live {
            let addr = sp.plan.displaced.point;
            let len = sp.plan.displaced.len;
            // What is there now: kerf's int3, then the original bytes.
            let mut now = original;
            now[0] = INT3;
            // The jump bytes; `None` when the patch (or springboard) is out of reach, which
            // the driver's heap placement rules out, and which would leave the site a trap.
            let unreachable = || "the patch is out of a jump's reach".to_string();
            let mut jump = |new: &[u8]| {
                let old = now[..new.len()].to_vec();
                jumps.push(SpliceRequest {
                    addr: KernelAddr(addr),
                    old,
                    new: new.to_vec(),
                    one_insn: false,
                });
                jumps.len() - 1
            };
            match (sp.plan.kind, sp.plan.springboard) {
                (SpliceKind::Jump5, _) => {
                    let j = jump5_bytes(addr, patch, len).ok_or_else(unreachable);
                    plan.push((k, None, j.map(|j| jump(&j[..5]))));
                }
                (SpliceKind::Jump2, Some((sb, _))) => {
                    let mut pad = vec![0u8; SPRINGBOARD_LEN as usize];
                    d.read(KernelAddr(sb), &mut pad)?;
                    match jump5_bytes(sb, patch, SPRINGBOARD_LEN as usize)
                        .zip(jump2_bytes(addr, sb, len))
                    {
                        Some((jmp, j2)) => {
                            boards.push(SpliceRequest {
                                addr: KernelAddr(sb),
                                old: pad,
                                new: jmp[..5].to_vec(),
                                one_insn: true,
                            });
                            plan.push((k, Some(boards.len() - 1), Ok(jump(&j2[..2]))));
                        }
                        None => plan.push((k, None, Err(unreachable()))),
                    }
                }
                _ => {}
            }
        }
        // Each group in address order (the indices above move with the requests).
        let order = |reqs: &mut Vec<SpliceRequest>| {
            let mut idx: Vec<usize> = (0..reqs.len()).collect();
            idx.sort_by_key(|&i| reqs[i].addr.0);
            let mut at = vec![0; reqs.len()];
            for (pos, &i) in idx.iter().enumerate() {
                at[i] = pos;
            }
            *reqs = idx.iter().map(|&i| reqs[i].clone()).collect();
            at
        };
        let (board_at, jump_at) = (order(&mut boards), order(&mut jumps));
        let nb = boards.len();
        let all: Vec<SpliceRequest> = boards.into_iter().chain(jumps).collect();
        let results = d.splice_batch(&all);
        for (k, board, jump) in plan {
            let r = jump.and_then(|j| {
                if let Some(b) = board {
                    results[board_at[b]].as_ref().map_err(|e| e.to_string())?;
                }
                let j = nb + jump_at[j];
                results[j].as_ref().map_err(|e| e.to_string()).map(|()| all[j].new.clone())
            });
            match r {
                Ok(bytes) => self.sites[k].set_splice(bytes),
                // The int3 stays: the site still works, as a trap.
                Err(e) => {
                    self.sites[k].kind = SpliceKind::Trap;
                    self.sites[k].reason = Some(format!("no jump here: {e}"));
                }
            }
        }
        Ok(())
    }

    fn patch_code(
        &self,
        probes: &[Probe],
        sp: &SitePlan,
        patch: u64,
        thread: ThreadPointer,
    ) -> Result<Vec<u8>, InstrumentError> {
        let d = &self.kernel.driver;
        let data = d.info.data_heap;
        let p = &probes[sp.first].point;
        let prims: Vec<Primitive> = sp
            .members
            .iter()
            .filter_map(|&i| match probes[i].action {
                Action::Count => {
                    Some(Primitive::Count { slot: data + self.counters[i].unwrap_or(0) })
                }
                Action::TimerStart(t) => {
                    Some(Primitive::TimerStart { timer: data + self.timers[t] })
                }
                // Tail-call probes are refused by `install`; a plain exit if one got here.
                Action::TimerStop(t) | Action::TimerTailCall(t) => {
                    Some(Primitive::TimerStop { timer: data + self.timers[t] })
                }
                Action::TimerTailReturn => None,
                Action::SignalGuard => unreachable!("refused by install"),
            })
            .collect();
        let ctx = Context {
            live: live_at(&self.kernel.images[p.module], p.func, sp.plan.displaced.point),
            env: Env::Kernel,
            thread,
            threads: data,
            only_thread: None,
            only_id: self.only_pid,
        };
        let refuse = |detail: String| InstrumentError::Point {
            label: p.label.clone(),
            addr: sp.plan.displaced.point,
            detail,
        };
        let snippet = lower(&prims, &ctx).map_err(|e| refuse(e.to_string()))?;
        build_patch(patch, &snippet, &sp.plan.displaced).map_err(|e| refuse(e.to_string()))
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
        let site = Site::new(
            p.spec.clone(),
            p.label.clone(),
            sp.plan.displaced.point,
            sp.plan.kind,
            sp.plan.reason.clone(),
            sp.members.clone(),
            sp.plan.springboard,
            original,
            splice,
            patch,
        );
        self.sites.push(site);
    }

    pub fn sites(&self) -> &[Site] {
        &self.sites
    }

    /// The site probe `i` is at, or `None` if the driver refused it.
    pub fn site_of(&self, i: usize) -> Option<&Site> {
        self.probe_site[i].map(|s| &self.sites[s])
    }

    pub fn count(&self, i: usize) -> u64 {
        self.counters[i].map_or(0, |off| self.kernel.driver.load_u64(off as usize))
    }

    pub fn timer(&self, t: usize, now: u64) -> TimerSample {
        let off = self.timers[t];
        timer::sample(&|o| self.kernel.driver.load_u64((off + o) as usize), now)
    }

    /// Restore every byte (jumps first, then, after quiescence, springboards and traps).
    pub fn remove(mut self) -> Result<(), InstrumentError> {
        self.removed = true;
        self.remove_all()
    }

    fn remove_all(&mut self) -> Result<(), InstrumentError> {
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
        unsplice(self.sites.iter().map(|s| KernelAddr(s.addr)).collect());
        d.quiesce()?;
        unsplice(
            self.sites
                .iter()
                .filter_map(|s| s.springboard_in)
                .map(|(sb, _)| KernelAddr(sb))
                .collect(),
        );
        d.quiesce()?;
        for s in &self.sites {
            let _ = d.trap_del(KernelAddr(s.addr));
        }
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
