//! The one patch-set builder (DESIGN.md §9): probes planned, their code generated and written,
//! and their splices made live in any target through its [`Backend`], then taken out again,
//! in one sequence of numbered steps both targets share. What only one target does (a
//! process's thread context, signal-mask guards, trap dispatcher, parked threads, heaps next to
//! each module; the kernel's BTF lookups and driver heaps) is behind the back-end's hooks.
//!
//! Installing (`PatchSet::build`):
//! 1. **begin**: the back-end refuses what it cannot run and says how generated code runs
//!    there (thread pointer, filters) and what start-up code springboards may use;
//! 2. **plan** the probes; then the back-end's extra probes (a process with a trap: its
//!    signal-mask guards), planned again with the tool's;
//! 3. **data layout and heaps**: counters, timers and the tool's area laid out per heap,
//!    heaps mapped, the tool's first words written into each area;
//! 4. **jobs**: each site's code patch placed in its heap, one after another by room;
//! 5. **code**, generated in parallel (pure), then chunk by chunk: the bytes each site
//!    displaces read (with its springboard's padding) and checked against the module file
//!    (DESIGN.md §5: never splice over bytes that are not the file's; such a site is left
//!    out, with why), and the chunk's patches written where no splice leads yet;
//! 6. **springboards**, before any splice can lead to them (unless the back-end writes them
//!    with the splices);
//! 7. **before traps**: the back-end's step, inside which the sites that must be live before
//!    any trap (a process's guards) go live;
//! 8. **splices** through `builder::splice_in_batches`, in plan order (every site without a
//!    timer start first), each outcome recorded as soon as its batch returns;
//! 9. the record: live sites, and every probe left out with why.
//!
//! An error at any step takes out what went in: removal, below, runs on the record as far as
//! it got. Removing (`PatchSet::remove`): every live splice out in the reverse of the order
//! it went live, through `builder::remove_in_batches` (each byte restored and verified), then
//! the back-end's `after_remove` (a process: parked threads moved, pending SIGTRAPs drained,
//! signal state and springboards put back, heaps freed).

use crate::backend::{Backend, Heap, Patch, Pauses, Splice, Springboard};
use crate::builder;
use crate::load::AnalyzedImage;
use crate::patchset::{self, DataLayout, Job, Outcome, TargetAddr};
use crate::phases::Phases;
use crate::plan::{
    differs_from_file, plan_sites_adding, plan_sites_with, Plan, Planning, SitePlan,
};
use crate::probe::{
    Action, InstrumentError, KindRefusal, Probe, Reason, Refused, Removed, Site, ToolData,
};
use kerf_arch::RemoteAddr;
use kerf_codegen::timer::{self, ThreadShare, TimerSample};
use kerf_patch::{SpliceKind, INT3, SPRINGBOARD_LEN};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A timer block's words by offset, and each thread slot's clock now (see
/// [`PatchSet::timer`]).
type Words<'a> = &'a dyn Fn(u64) -> u64;
type Clocks<'a> = &'a dyn Fn(u64) -> Option<u64>;

/// A flag that, once true, stops an installation (a signal handler sets it): it is checked
/// between batches while planning, writing code patches and splicing; what went in is taken
/// out and [`InstrumentError::Interrupted`] returned.
pub type Cancel<'a> = Option<&'a AtomicBool>;

/// The splicing step of the installation under way in this process: splices settled, and
/// splices to settle (0 when none is splicing). Only a front end's progress display reads it.
static SPLICE_PROGRESS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

/// How far the splicing of the installation under way has got: `(settled, total)`, `(0, 0)`
/// when none is splicing. Every block of core text takes minutes in a TCG guest.
pub fn splice_progress() -> (usize, usize) {
    let [done, total] = &SPLICE_PROGRESS;
    (done.load(Ordering::Relaxed), total.load(Ordering::Relaxed))
}

fn cancelled(cancel: Cancel<'_>) -> Result<(), InstrumentError> {
    match cancel {
        Some(c) if c.load(Ordering::SeqCst) => Err(InstrumentError::Interrupted),
        _ => Ok(()),
    }
}

/// The target's TSC (the same counter generated code reads: kerf runs on the same machine).
pub fn tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions; x86-64 always has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The TSC and the monotonic clock read together (`kerf_os::clock::tsc_and_instant`): the
/// pairs that calibrate timers' cycles to nanoseconds.
pub fn tsc_and_instant() -> (u64, Instant) {
    kerf_os::clock::tsc_and_instant()
}

/// Probes installed in a target through back-end `B`: what a tool reads (counts, timers,
/// sites, what was left out), and what removal needs.
pub struct PatchSet<B: Backend> {
    be: B,
    /// Every site written, those holding a tool's probe first (`user_sites` of them), in plan
    /// order.
    sites: Vec<Site>,
    user_sites: usize,
    /// Sites that went live before any trap (a process's signal-mask guards).
    guard_sites: Vec<usize>,
    /// Per probe: the index of its site (`None`: left out).
    probe_site: Vec<Option<usize>>,
    /// Probes left out, with why (no splice kind, bytes not the file's, the driver refused
    /// them, a thread kept sitting in their bytes): reported, not fatal.
    pub refused: Vec<Refused>,
    /// Sites that could not go live after their code was written (their springboards are
    /// still put back on removal).
    left_out: Vec<Site>,
    /// Where each counter and timer is: heap and offset.
    layout: DataLayout,
    /// Sites in the order they went live (removal goes the other way).
    live_order: Vec<usize>,
    /// TSC when the last splice went in, and the matching monotonic time.
    pub installed_at: (u64, Instant),
    /// Where the installation's time went, phase by phase.
    pub phases: Phases,
    /// How long the whole installation took.
    pub splice_time: Duration,
    /// Removal has run (or must not: the target's memory is no longer the one instrumented).
    removed: bool,
    /// The tool's off-CPU timers ([`ToolData::off_cpu`]), sampled on their threads' clocks.
    off_cpu: std::ops::Range<usize>,
}

impl<B: Backend> PatchSet<B> {
    /// Install `probes` (with the timers, programs and area of `tool`) in `modules` of the
    /// target behind `be`, in the steps of the module documentation. Every probe of one
    /// timer must be in one heap. On an error, whatever went in is taken out before it is
    /// returned.
    pub fn build(
        be: B,
        modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        planning: Planning,
        cancel: Cancel<'_>,
    ) -> Result<PatchSet<B>, InstrumentError> {
        let t0 = Instant::now();
        let mut set = PatchSet {
            be,
            sites: Vec::new(),
            user_sites: 0,
            guard_sites: Vec::new(),
            probe_site: vec![None; probes.len()],
            refused: Vec::new(),
            left_out: Vec::new(),
            layout: DataLayout {
                counters: vec![None; probes.len()],
                flags: vec![None; probes.len()],
                timers: vec![None; tool.timers],
                areas: Vec::new(),
                rings: Vec::new(),
                tails: Vec::new(),
                end: Vec::new(),
            },
            live_order: Vec::new(),
            installed_at: tsc_and_instant(),
            phases: Phases::default(),
            splice_time: Duration::ZERO,
            removed: false,
            off_cpu: tool.off_cpu.clone(),
        };
        if let Err(e) = set.steps(modules, probes, tool, planning, cancel) {
            // Every exit path restores the target (DESIGN.md §5).
            set.removed = true;
            let removal = set.take_out();
            return Err(e.after_removal(removal));
        }
        set.installed_at = tsc_and_instant();
        set.splice_time = t0.elapsed();
        Ok(set)
    }

    fn steps(
        &mut self,
        modules: &[AnalyzedImage],
        probes: &[Probe],
        tool: &ToolData,
        planning: Planning,
        cancel: Cancel<'_>,
    ) -> Result<(), InstrumentError> {
        let Planning { force_kind, threads } = planning;
        // 1. How generated code runs in the target.
        let begin = self.be.begin(modules, probes, tool, &mut self.phases)?;
        let rules = self.be.rules();
        // 2. Plan (planning reads the modules' files: a process keeps running meanwhile).
        let t = Instant::now();
        let mut planned =
            plan_sites_with(modules, probes, force_kind, &begin.startup, rules, cancel, threads)?;
        let mut t = self.phases.lap("plan", t);
        for (n, d) in planned.phases.iter() {
            self.phases.add(n, d);
        }
        // The target's own probes, planned together with the tool's (a guard's `syscall` may
        // not be covered by another site's jump).
        let mut all: Vec<Probe> = probes.to_vec();
        if let Some(extra) = self.be.extra_probes(modules, &planned, &mut self.phases)? {
            t = Instant::now();
            if !extra.is_empty() {
                all.extend(extra);
                // Only the modules the extra probes are in are planned again.
                let before = probes.len();
                planned = plan_sites_adding(
                    modules,
                    &all,
                    before,
                    planned,
                    force_kind,
                    &begin.startup,
                    rules,
                    cancel,
                    threads,
                )?;
            }
            t = self.phases.lap("plan again with signal-mask guards", t);
            for (n, d) in planned.phases.iter() {
                self.phases.add(n, d);
            }
        }
        let n_user = probes.len();
        let probes: &[Probe] = &all;
        self.probe_site.resize(probes.len(), None);
        self.refused = planned.refused;
        // Sites holding a tool's probe first (what `sites()` shows), in plan order; sites
        // with only the target's own probes after them.
        let (mut site_plans, own): (Vec<SitePlan>, Vec<SitePlan>) =
            planned.sites.into_iter().partition(|s| s.members.iter().any(|&i| i < n_user));
        site_plans.extend(own);

        // 3. Data layout and heaps.
        let heaps = self.be.heaps(modules.len());
        let be = &self.be;
        self.layout = DataLayout::new(probes, tool, heaps, |m| be.heap_of(m))?;
        let heaps = self.be.map_heaps(modules, probes, tool, &self.layout, &site_plans)?;
        for (h, heap) in heaps.iter().enumerate() {
            if let Some(heap) = heap {
                self.layout.rings[h] = heap.rings.map(|r| r.get() - heap.data.get());
                self.layout.tails[h] = heap.tails.map(|r| r.get() - heap.data.get());
            }
        }
        // The tool's first words, in every area, before any of its code can run.
        for (h, at) in self.layout.areas.iter().enumerate() {
            if let Some(at) = at {
                for &(off, v) in &tool.init {
                    self.be.store_u64(h, at + off, v);
                }
            }
        }
        let t = self.phases.lap("map heaps", t);
        let trap_module = site_plans
            .iter()
            .find(|s| s.plan.kind == SpliceKind::Trap)
            .map(|s| probes[s.first].point.module);
        let guard_action = self.be.guard_action(trap_module);

        // 4. Jobs: every code patch at its place in its heap, one after the other by room.
        let mut used = vec![0u64; heaps.len()];
        let mut jobs = Vec::with_capacity(site_plans.len());
        for sp in &site_plans {
            let p = &probes[sp.first].point;
            let h = self.be.heap_of(p.module);
            let heap: &Heap<B::Addr> =
                heaps[h].as_ref().expect("a heap mapped for every module with probes");
            let patch_at = heap.code.get() + used[h];
            let lookup = begin.runtime.lookup_room();
            used[h] += patchset::site_room(probes, &sp.members, tool, lookup, &sp.plan.displaced);
            let (data, tails) = (heap.data.get(), heap.tails.map_or(0, TargetAddr::get));
            let area = self.layout.areas[h].map_or(0, |off| data + off);
            let rings = self.layout.rings[h].map_or(0, |off| data + off);
            jobs.push(Job {
                site: sp,
                label: &p.label,
                patch_at,
                data,
                tails,
                area,
                rings,
                guard_action,
            });
        }
        cancelled(cancel)?;

        // 5. Code, generated in parallel (pure), then written chunk by chunk with the
        //    foreign-bytes check. Room for every site first: growing the vector later copies
        //    megabytes.
        let codes = patchset::generate(probes, tool, &self.layout, &begin.runtime, &jobs);
        let mut codes: Vec<Option<_>> = codes.into_iter().map(Some).collect();
        self.sites.reserve(site_plans.len());
        let t = self.phases.lap("code patches: generate", t);
        let mut boards: Vec<(usize, Springboard<B::Addr>)> = Vec::new();
        let chunk = self.be.chunk().max(1);
        for (jobs, codes) in jobs.chunks(chunk).zip(codes.chunks_mut(chunk)) {
            cancelled(cancel)?;
            // The chunk's bytes to splice, in one read where they lie close together.
            let t = Instant::now();
            let ranges: Vec<(B::Addr, usize)> = jobs
                .iter()
                .flat_map(|j| spliced_ranges(&j.site.plan))
                .map(|(a, n)| (B::Addr::at(a), n))
                .collect();
            let mut read = self.be.read(&ranges)?.into_iter();
            self.phases.lap("code patches: read the bytes to splice", t);
            let mut staged = Vec::with_capacity(jobs.len());
            for (job, code) in jobs.iter().zip(codes.iter_mut()) {
                let sp = job.site;
                let displaced = read.next().unwrap_or_default();
                let pad = sp.plan.springboard.map(|_| read.next().unwrap_or_default());
                // DESIGN §5: never splice over bytes that are not the file's (the displaced
                // ones, and the padding a springboard takes).
                let module = &modules[probes[sp.first].point.module];
                let foreign = differs_from_file(module, sp.plan.displaced.point, &displaced)
                    .or_else(|| {
                        let (sb, _) = sp.plan.springboard?;
                        differs_from_file(module, sb, pad.as_deref()?)
                    });
                if let Some(f) = foreign {
                    let why = Reason::Foreign(f);
                    self.refused.extend(builder::refusals(probes, sp, &why));
                    continue;
                }
                let code = code.take().expect("each site's code is written once")?;
                staged.push((job, code, displaced, pad));
            }
            let patches: Vec<Patch<'_, B::Addr>> = (staged.iter())
                .map(|(job, code, _, _)| Patch {
                    at: B::Addr::at(job.patch_at),
                    code,
                    displaced: &job.site.plan.displaced,
                })
                .collect();
            let t = Instant::now();
            self.be.write_chunk(&patches)?;
            let t = self.phases.lap("code patches: write", t);
            for (job, _, displaced, pad) in &staged {
                let at = B::Addr::at(job.patch_at);
                let s = self.be.make_splice(job.site, job.label, at, displaced, pad.as_deref())?;
                let k = self.record(modules, probes, job.site, &s);
                boards.extend(s.springboard.map(|b| (k, b)));
            }
            self.phases.lap("code patches: springboards, site records", t);
        }
        let t = self.phases.lap("code patches", t);

        // 6. Springboards, into padding no path runs any more, before anything leads there; a
        //    site records its springboard once it is written (removal puts back what it
        //    records).
        for batch in boards.chunks(chunk) {
            cancelled(cancel)?;
            let these: Vec<Springboard<B::Addr>> = batch.iter().map(|(_, b)| b.clone()).collect();
            self.be.write_springboards(&these)?;
            for (k, (at, pad, jmp)) in batch {
                self.sites[*k].springboard = Some((at.get(), pad.clone(), jmp.clone()));
            }
        }
        self.phases.lap("springboards", t);
        if self.sites.is_empty() {
            if let Some(r) = self.refused.first() {
                return Err(InstrumentError::NothingPlaced(Box::new(r.clone())));
            }
        }
        // The tool's sites came first; some may have been left out on the way.
        self.user_sites =
            self.sites.iter().take_while(|s| s.probes.iter().any(|&p| p < n_user)).count();
        // A probe the target needs left out (a `syscall` left unguarded could block SIGTRAP in
        // a thread, and a trap would then kill the process): no trap goes in at all.
        if let Some(r) = self.refused.iter().find(|r| r.probe >= n_user) {
            return Err(InstrumentError::Unguarded(Box::new(r.clone())));
        }
        self.guard_sites = (0..self.sites.len())
            .filter(|&i| {
                self.sites[i].probes.iter().any(|&p| probes[p].action == Action::SignalGuard)
            })
            .collect();

        // 7. The target's step before traps; the guards go live inside it.
        let boards_with = B::SPRINGBOARDS_WITH_SPLICES;
        let first: Vec<Splice<B::Addr>> =
            self.guard_sites.iter().map(|&i| self.sites[i].as_splice(boards_with)).collect();
        let guards = self.guard_sites.clone();
        let mut outcomes = Vec::new();
        let r = self.be.before_traps(&self.sites, &first, &mut self.phases, &mut |k, o| {
            outcomes.push((guards[k], o))
        });
        let mut refused = Vec::new();
        for (i, o) in outcomes {
            self.settle(i, o, &mut refused);
        }
        r?;
        let t = Instant::now();

        // 8. Every other site, in plan order (timer stops go live before timer starts: see
        //    plan::plan_sites), in batches.
        let mut todo: Vec<usize> =
            (0..self.sites.len()).filter(|i| !self.guard_sites.contains(i)).collect();
        if self.be.by_address() {
            let starts = |s: &Site| {
                s.probes.iter().any(|&i| matches!(probes[i].action, Action::TimerStart(_)))
            };
            todo.sort_by_key(|&i| (starts(&self.sites[i]), self.sites[i].addr));
        }
        let splices: Vec<Splice<B::Addr>> =
            self.sites.iter().map(|s| s.as_splice(boards_with)).collect();
        let batches = self.be.batches(todo.len());
        let mut outcomes = Vec::new();
        let [p_done, p_total] = &SPLICE_PROGRESS;
        p_done.store(0, Ordering::Relaxed);
        p_total.store(todo.len(), Ordering::Relaxed);
        let r = builder::splice_in_batches(
            &mut self.be,
            &splices,
            todo,
            batches,
            || cancelled(cancel),
            |i, o| {
                outcomes.push((i, o));
                p_done.fetch_add(1, Ordering::Relaxed);
            },
        );
        p_total.store(0, Ordering::Relaxed);
        p_done.store(0, Ordering::Relaxed);
        // Whatever went in is recorded before any error is returned: it must come out.
        for (i, o) in outcomes {
            self.settle(i, o, &mut refused);
        }
        let still = r?;
        if !still.is_empty() && self.live_order.is_empty() {
            let p = &self.sites[still[0]];
            let (target, label, addr) = (self.be.target(), p.label.clone(), p.addr);
            return Err(InstrumentError::StillBusy { target, label, addr, tries: batches.tries });
        }
        // A thread parked for good where a jump would go (asleep in a system call the jump's
        // bytes would cover) must not hold up every other point: these are left out, and
        // said so, like points no splice kind can take.
        let busy = Reason::Busy { tries: batches.tries };
        refused.extend(still.into_iter().map(|i| (i, busy.clone())));
        if !refused.is_empty() {
            self.leave_out(&refused);
        }
        self.phases.lap("splices", t);
        for (n, d) in self.be.take_splice_steps().iter() {
            self.phases.add(n, d);
        }
        // 9. Nothing live at all (the target refused every point): that is the error.
        if self.sites.is_empty() {
            if let Some(r) = self.refused.first() {
                return Err(InstrumentError::NothingPlaced(Box::new(r.clone())));
            }
        }
        Ok(())
    }

    /// Record the site of `sp` with splice `s` (not live yet); returns its index. An exit's
    /// site is named by where it is in its function.
    fn record(
        &mut self,
        modules: &[AnalyzedImage],
        probes: &[Probe],
        sp: &SitePlan,
        s: &Splice<B::Addr>,
    ) -> usize {
        let p = &probes[sp.first].point;
        let m = &modules[p.module];
        let label = if p.at_exit {
            let fun = m.analysis.cfg.function(p.func);
            let image_addr = m.image_addr(RemoteAddr(s.addr.get()));
            format!("{}+{:#x}", fun.name, image_addr - fun.entry)
        } else {
            p.label.clone()
        };
        let k = self.sites.len();
        for &i in &sp.members {
            self.probe_site[i] = Some(k);
        }
        // A springboard the back-end writes on its own is recorded once it is written.
        let board = if B::SPRINGBOARDS_WITH_SPLICES { s.springboard.clone() } else { None };
        let mut splice = s.clone();
        splice.springboard = board;
        self.sites.push(Site::planned(&p.spec, label, sp, splice, false));
        k
    }

    /// What became of site `i`'s splice: live, live as a trap (its jump refused), or to be
    /// left out (`refused`).
    fn settle(&mut self, i: usize, o: Outcome, refused: &mut Vec<(usize, Reason)>) {
        match o {
            Outcome::Done => {
                let s = &mut self.sites[i];
                s.live = true;
                self.live_order.push(i);
                // A jump out of reach that the back-end made an int3.
                if s.kind != SpliceKind::Trap && s.splice == [INT3] {
                    demote(s, KindRefusal::OutOfReach);
                }
            }
            Outcome::Trap(why) => {
                let s = &mut self.sites[i];
                s.live = true;
                s.splice = vec![INT3];
                s.original.truncate(1);
                s.springboard = None;
                self.live_order.push(i);
                demote(s, why);
            }
            Outcome::Refused(why) => refused.push((i, why)),
            // (Never settled: `splice_in_batches` returns these.)
            Outcome::Later => {}
        }
    }

    /// Take sites that never went live out of `sites` (into `left_out`, whose springboards
    /// are still put back on removal) and report their probes as left out.
    fn leave_out(&mut self, out: &[(usize, Reason)]) {
        let mut map = vec![usize::MAX; self.sites.len()];
        let mut kept = Vec::with_capacity(self.sites.len());
        let mut user_sites = 0;
        for (i, site) in std::mem::take(&mut self.sites).into_iter().enumerate() {
            if let Some((_, why)) = out.iter().find(|(o, _)| *o == i) {
                for &p in &site.probes {
                    self.probe_site[p] = None;
                    self.refused.push(Refused {
                        probe: p,
                        label: site.label.clone(),
                        addr: site.addr,
                        reason: why.clone(),
                    });
                }
                self.left_out.push(site);
                continue;
            }
            map[i] = kept.len();
            user_sites += usize::from(i < self.user_sites);
            kept.push(site);
        }
        self.sites = kept;
        self.user_sites = user_sites;
        for s in self.probe_site.iter_mut().flatten() {
            *s = map[*s];
        }
        for v in [&mut self.guard_sites, &mut self.live_order] {
            *v = v.iter().map(|&i| map[i]).collect();
        }
    }

    /// Every site holding a probe a tool asked for, with its probes (the target's own, a
    /// process's signal-mask guards, are left out: see [`PatchSet::guards`]).
    pub fn sites(&self) -> &[Site] {
        &self.sites[..self.user_sites]
    }

    /// The site probe `i` is placed at (`None`: it was left out).
    pub fn site_of(&self, i: usize) -> Option<&Site> {
        self.probe_site.get(i).copied().flatten().map(|s| &self.sites[s])
    }

    /// How many sites went live before any trap (a process's guarded `syscall`s).
    pub fn guards(&self) -> usize {
        self.guard_sites.len()
    }

    /// The current count of `Count` probe `i`, or the byte of `Flag` probe `i` (0 or 1),
    /// read from the shared data heap (no system call); 0 for other probes.
    pub fn count(&self, i: usize) -> u64 {
        if let Some((h, off)) = self.layout.counters.get(i).copied().flatten() {
            return self.be.load_u64(h, off);
        }
        match self.layout.flags.get(i).copied().flatten() {
            Some((h, off)) => (self.be.load_u64(h, off & !7) >> (8 * (off & 7))) & 0xff,
            None => 0,
        }
    }

    /// The data heap holding `Flag` probe `i`'s byte (in its tool area, at the offset the
    /// probe names), for readers that scan many flags a word at a time.
    pub fn flag_heap(&self, i: usize) -> Option<usize> {
        self.layout.flags.get(i).copied().flatten().map(|(h, _)| h)
    }

    /// Take the splices of `sites` (indexes into [`PatchSet::sites`]) out while the others
    /// stay live: coverage's probes, once their flags are set. Each goes out as in
    /// [`PatchSet::remove`] (its bytes restored and verified, a batch per stop of a process),
    /// in the order given; what it leaves behind is harmless until the final removal takes
    /// it: its code patch (a thread still running it goes back to the original code, whose
    /// bytes are the file's), a process's springboard in padding (nothing jumps to it now),
    /// and a process's trap-table entry (a SIGTRAP already raised by the int3 still finds its
    /// patch). Sites already out, and the target's own, are passed over; so is a site that
    /// also holds a signal-mask guard (a tool probe at a guarded `syscall` joins the guard's
    /// site): the guard must stay in while any trap is in (see `take_out`). Returns how many
    /// went out; on an error those before it are out and marked so.
    pub fn retire(&mut self, sites: &[usize]) -> Result<usize, InstrumentError> {
        let boards_with = B::SPRINGBOARDS_WITH_SPLICES;
        // `remove_in_batches` takes its list last first.
        let live: Vec<(usize, Splice<B::Addr>)> = (sites.iter().rev().copied())
            .filter(|&i| i < self.user_sites && self.sites[i].live)
            .filter(|i| !self.guard_sites.contains(i))
            .map(|i| (i, self.sites[i].as_splice(boards_with)))
            .collect();
        let size = self.be.retire_batch(live.len());
        let sites = &mut self.sites;
        match builder::remove_in_batches(&mut self.be, &live, size, |i| sites[i].live = false) {
            Ok(()) => Ok(live.len()),
            // A target that is gone keeps nothing to take out.
            Err(e) if self.be.gone(&e) => Ok(0),
            Err(e) => Err(e),
        }
    }

    /// Which target the probes are in.
    pub fn target(&self) -> crate::probe::Where {
        self.be.target()
    }

    /// The heaps holding the tool's area (see [`ToolData`]), in heap order.
    pub fn areas(&self) -> Vec<usize> {
        (self.layout.areas.iter().enumerate()).filter_map(|(h, a)| a.map(|_| h)).collect()
    }

    /// The 8 bytes at `off` of the tool's area in heap `heap` (shared memory: no system call).
    pub fn area_load(&self, heap: usize, off: u64) -> u64 {
        match self.layout.areas.get(heap).copied().flatten() {
            Some(at) => self.be.load_u64(heap, at + off),
            None => 0,
        }
    }

    /// The owner word of thread table slot `slot` in heap `heap` (`(pid << 32) | tid`, or 0:
    /// not known; see `kerf_codegen::timer`), from shared memory.
    pub fn thread_owner(&self, heap: usize, slot: u64) -> u64 {
        if slot >= timer::THREAD_SLOTS {
            return 0;
        }
        self.be.load_u64(heap, timer::OWNERS + 8 * slot)
    }

    /// Free the thread table slots whose owners are threads of another process of `pid`'s
    /// (a forked child) that has ended (gone, or a zombie), where `drained(heap, slot)` says
    /// nothing of the slot's is still to be read (a tracer's rings). The program's code never
    /// frees them: a thread takes over only its own process's dead threads' slots, as it may
    /// not signal another process to ask (see `kerf_codegen::timer`), so without this each
    /// child that ran probed code keeps a slot per thread for good. Returns how many were
    /// freed.
    pub fn free_ended_children(&self, pid: i32, drained: &dyn Fn(usize, u64) -> bool) -> usize {
        use kerf_os::process::{self, RealSys};
        let mut ended: std::collections::HashMap<u32, bool> = Default::default();
        let mut freed = 0;
        for h in 0..self.layout.end.len() {
            for k in 0..timer::THREAD_SLOTS {
                let owner = self.thread_owner(h, k);
                let of = (owner >> 32) as u32;
                if owner == 0 || of == 0 || of == pid as u32 {
                    continue;
                }
                let gone = *ended.entry(of).or_insert_with(|| process::ended(&RealSys, of as i32));
                if gone && drained(h, k) && self.free_thread_slot(h, k, owner) {
                    freed += 1;
                }
            }
        }
        freed
    }

    /// Free slot `slot` of heap `heap` if its owner word is still `owner` (a thread that will
    /// never run again): 1. the owner cleared, so that no other thread takes the slot for
    /// its own meanwhile; 2. the thread's timer states and tail stack cleared (only it wrote
    /// them: a depth it left above zero would count it inside for ever, and be inherited);
    /// 3. the key cleared, after which a thread of the target may claim the slot.
    fn free_thread_slot(&self, heap: usize, slot: u64, owner: u64) -> bool {
        use std::sync::atomic::Ordering::SeqCst;
        let Some(w) = self.be.data_words(heap) else { return false };
        let word = |off: u64| w.get((off / 8) as usize);
        let (Some(key), Some(own)) = (word(8 * slot), word(timer::OWNERS + 8 * slot)) else {
            return false;
        };
        // 1.
        if own.compare_exchange(owner, 0, SeqCst, SeqCst).is_err() {
            return false;
        }
        // 2.
        let timers = self.layout.timers.iter().flatten().filter(|(h, _)| *h == heap);
        for &(_, at) in timers {
            let state = at + timer::STATES + timer::STATE_LEN * slot;
            (0..timer::STATE_LEN / 8)
                .filter_map(|i| word(state + 8 * i))
                .for_each(|x| x.store(0, SeqCst));
        }
        if let Some(tails) = self.layout.tails.get(heap).copied().flatten() {
            let stack = tails + timer::TAIL_LEN * slot;
            (0..timer::TAIL_LEN / 8)
                .filter_map(|i| word(stack + 8 * i))
                .for_each(|x| x.store(0, SeqCst));
        }
        // 3.
        let k = key.load(SeqCst);
        k != 0 && key.compare_exchange(k, 0, SeqCst, SeqCst).is_ok()
    }

    /// The tool's area in heap `heap` as words (to the heap's end), for readers of many words.
    pub fn area_words(&self, heap: usize) -> Option<&[std::sync::atomic::AtomicU64]> {
        let at = self.layout.areas.get(heap).copied().flatten()?;
        self.be.data_words(heap)?.get((at / 8) as usize..)
    }

    /// Store `v` at `off` of the tool's area in heap `heap` (a stream's flag); the target's
    /// code sees it at once.
    pub fn area_store(&self, heap: usize, off: u64, v: u64) {
        if let Some(at) = self.layout.areas.get(heap).copied().flatten() {
            self.be.store_u64(heap, at + off, v);
        }
    }

    /// The tool's ring area in heap `heap` as words (to the heap's end).
    pub fn ring_words(&self, heap: usize) -> Option<&[std::sync::atomic::AtomicU64]> {
        let at = self.layout.rings.get(heap).copied().flatten()?;
        self.be.data_words(heap)?.get((at / 8) as usize..)
    }

    /// Store `v` at `off` of the tool's ring area in heap `heap` (a ring's tail).
    pub fn ring_store(&self, heap: usize, off: u64, v: u64) {
        if let Some(at) = self.layout.rings.get(heap).copied().flatten() {
            self.be.store_u64(heap, at + off, v);
        }
    }

    /// Timer `t` as it stands at TSC time `now` (threads inside counted up to `now`); an
    /// off-CPU timer's threads inside are counted up to their off-CPU clocks now (a thread
    /// whose id the thread table does not have adds nothing for the interval in progress).
    pub fn timer(&self, t: usize, now: u64) -> TimerSample {
        self.read_timer(t, now, &|word, now_of| timer::sample_each(word, now_of))
            .unwrap_or_default()
    }

    /// Each thread's share of timer `t` at TSC time `now` (as [`PatchSet::timer`] counts
    /// threads inside), with the owner of its slot (`(pid << 32) | tid`, 0 where the target's
    /// thread ids are not known).
    pub fn timer_threads(&self, t: usize, now: u64) -> Vec<(u64, ThreadShare)> {
        let Some(Some((h, _))) = self.layout.timers.get(t).copied() else { return Vec::new() };
        let shares = self.read_timer(t, now, &|word, now_of| timer::sample_threads(word, now_of));
        let shares = shares.unwrap_or_default();
        shares.into_iter().map(|s| (self.thread_owner(h, s.slot), s)).collect()
    }

    /// `read(word, now_of)` on timer `t`'s block: `word` loads its words, `now_of(slot)` is the
    /// slot's thread's clock now (`now` on the TSC; an off-CPU timer's thread has a clock of
    /// its own, found by its id). `None`: no such timer.
    fn read_timer<R>(
        &self,
        t: usize,
        now: u64,
        read: &dyn Fn(Words<'_>, Clocks<'_>) -> R,
    ) -> Option<R> {
        let (h, off) = self.layout.timers.get(t).copied().flatten()?;
        let word = |o| self.be.load_u64(h, off + o);
        if !self.off_cpu.contains(&t) {
            return Some(read(&word, &|_| Some(now)));
        }
        let now_of = |slot| match self.thread_owner(h, slot) as u32 {
            0 => None,
            tid => self.be.off_cpu_now(tid as i32),
        };
        Some(read(&word, &now_of))
    }

    /// Context switches the off-CPU clock missed ([`Backend::off_cpu_missed`]).
    pub fn off_cpu_missed(&self) -> Option<u64> {
        self.be.off_cpu_missed()
    }

    /// Switches back in the kernel did not report ([`Backend::off_cpu_unreported`]).
    pub fn off_cpu_unreported(&self) -> Option<u64> {
        self.be.off_cpu_unreported()
    }

    /// How the target was held while the probes went in.
    pub fn pauses(&self) -> Pauses {
        self.be.pauses()
    }

    /// What taking probes out did in the target's forked children (see
    /// [`Backend::removals_done`]).
    pub fn forks(&self) -> crate::forked::ForkStats {
        self.be.forks()
    }

    /// How often each trap site was hit so far, with its label, most first (`None`: the
    /// back-end cannot tell; see [`Backend::trap_hits`]).
    pub fn trap_hits(&self) -> Option<Vec<crate::live::TrapHit>> {
        let hits = self.be.trap_hits()?;
        let label: std::collections::HashMap<u64, &str> =
            self.sites.iter().map(|s| (s.addr, s.label.as_str())).collect();
        let guards: std::collections::HashSet<u64> =
            self.guard_sites.iter().map(|&i| self.sites[i].addr).collect();
        let mut out: Vec<crate::live::TrapHit> = hits
            .into_iter()
            .map(|(addr, hits)| {
                let label =
                    label.get(&addr).map_or_else(|| format!("{addr:#x}"), |l| l.to_string());
                crate::live::TrapHit { label, addr, hits, guard: guards.contains(&addr) }
            })
            .collect();
        out.sort_by(|a, b| b.hits.cmp(&a.hits).then(a.addr.cmp(&b.addr)));
        Some(out)
    }

    /// Where kerf's code heaps start in the target (see [`Backend::code_heaps`]).
    pub fn code_heaps(&self) -> Vec<RemoteAddr> {
        self.be.code_heaps()
    }

    /// Forget the target without touching it: after an `exec` the splices and heaps went with
    /// the old program's memory, and their addresses may now hold anything of the new one.
    /// Counts read before stay valid (kerf's side of the data heaps is its own mapping).
    /// Processes it forked before keep their copy of the old program, splices and all: those
    /// go out of them (their pids are returned, as [`Removed::copies_after_end`]).
    pub fn abandon(mut self) -> Vec<i32> {
        self.removed = true;
        self.out_of_copies()
    }

    /// The target is gone (it ended, or `exec` replaced its memory): every splice still in,
    /// and the springboards, go out of the processes it forked that still run its copy (see
    /// [`Backend::ended_with`]), in the order and groups they would have left it in. Their
    /// pids.
    fn out_of_copies(&mut self) -> Vec<i32> {
        let boards_with = B::SPRINGBOARDS_WITH_SPLICES;
        let boards = self.springboards(boards_with);
        let is_guard = |i: &usize| self.guard_sites.contains(i);
        let trap = |i: &usize| self.sites[*i].kind == SpliceKind::Trap;
        let live: Vec<usize> =
            self.live_order.iter().copied().filter(|i| self.sites[*i].live).rev().collect();
        let splice = |i: &usize| self.sites[*i].as_splice(boards_with);
        let groups = [
            live.iter().filter(|i| !is_guard(i)).map(splice).collect(),
            live.iter().filter(|i| is_guard(i) && trap(i)).map(splice).collect(),
            live.iter().filter(|i| is_guard(i) && !trap(i)).map(splice).collect(),
        ];
        self.sites.iter_mut().for_each(|s| s.live = false);
        self.be.ended_with(&groups, &boards)
    }

    /// Springboards the back-end wrote on its own, to put back once no thread can be in one
    /// (none where they go with their splices: the kernel's).
    fn springboards(&mut self, boards_with: bool) -> Vec<Springboard<B::Addr>> {
        if boards_with {
            return Vec::new();
        }
        (self.sites.iter_mut().chain(self.left_out.iter_mut()))
            .filter_map(|s| s.springboard.take())
            .map(|(at, pad, jmp)| (B::Addr::at(at), pad, jmp))
            .collect()
    }

    /// Take every probe out: each byte restored and verified, then the target's own removal
    /// step (see the module documentation). A target that is gone needs nothing.
    pub fn remove(mut self) -> Result<Removed, InstrumentError> {
        self.removed = true;
        self.take_out()
    }

    fn take_out(&mut self) -> Result<Removed, InstrumentError> {
        // In the reverse of the order they went live: timer starts before stops, the guards
        // after every trap.
        // The guards go last, and of them the traps first, all in one batch: a trap guard
        // works only while every `syscall` that may set a mask keeps SIGTRAP out of it. Were
        // one guard out while a trap guard is still in, a thread could block SIGTRAP there
        // (pthread_create blocks every signal for the thread it makes) and then meet the
        // int3 (that new thread's first system call, in start_thread, restores its mask
        // through a guarded `syscall`): a forced SIGTRAP it blocks kills the process. Seen
        // with a program creating threads all the time, between two removal batches.
        let boards_with = B::SPRINGBOARDS_WITH_SPLICES;
        let splice = |i: usize| (i, self.sites[i].as_splice(boards_with));
        let is_guard = |i: &usize| self.guard_sites.contains(i);
        let live = |i: &usize| self.sites[*i].live;
        let order = self.live_order.iter().copied().filter(live);
        let tool: Vec<(usize, Splice<B::Addr>)> =
            order.clone().filter(|i| !is_guard(i)).map(splice).collect();
        let trap = |i: &usize| self.sites[*i].kind == SpliceKind::Trap;
        let trap_guards: Vec<(usize, Splice<B::Addr>)> =
            order.clone().filter(|i| is_guard(i) && trap(i)).map(splice).collect();
        let other_guards: Vec<(usize, Splice<B::Addr>)> =
            order.filter(|i| is_guard(i) && !trap(i)).map(splice).collect();
        let size = self.be.remove_batch(tool.len());
        let sites = &mut self.sites;
        let r = builder::remove_in_batches(&mut self.be, &tool, size, |i| sites[i].live = false)
            .and_then(|()| {
                let all = trap_guards.len().max(1);
                builder::remove_in_batches(&mut self.be, &trap_guards, all, |i| {
                    sites[i].live = false
                })
            })
            .and_then(|()| {
                let size = self.be.remove_batch(other_guards.len());
                builder::remove_in_batches(&mut self.be, &other_guards, size, |i| {
                    sites[i].live = false
                })
            });
        match r {
            Ok(()) => {}
            // The target is gone, but copies it forked may still run every splice still in.
            Err(e) if self.be.gone(&e) => {
                let copies = self.out_of_copies();
                return Ok(Removed { copies_after_end: copies, ..Removed::default() });
            }
            Err(e) => return Err(e),
        }
        let boards = self.springboards(boards_with);
        self.be.after_remove(boards)
    }
}

/// Site `s` keeps its int3 and works as a trap: its jump could not go in, for `why`.
fn demote(s: &mut Site, why: KindRefusal) {
    let mut refused = match s.reason.take() {
        Some(Reason::Kinds { refused, .. }) => refused,
        _ => Vec::new(),
    };
    refused.push((s.kind, why));
    s.kind = SpliceKind::Trap;
    s.reason = Some(Reason::Kinds { chosen: None, refused });
}

impl<B: Backend> Drop for PatchSet<B> {
    /// Every exit path restores the target: a patch set dropped without `remove` (an error or
    /// a panic unwinding) removes itself.
    fn drop(&mut self) {
        if !self.removed {
            self.removed = true;
            let _ = self.take_out();
        }
    }
}

/// The ranges of the target a planned site changes, `(address, length)`: the bytes it
/// displaces, and the padding its springboard takes.
pub(crate) fn spliced_ranges(plan: &Plan) -> impl Iterator<Item = (u64, usize)> {
    let d = &plan.displaced;
    let sb = plan.springboard.map(|(sb, _)| (sb, SPRINGBOARD_LEN as usize));
    std::iter::once((d.point, d.len.max(1))).chain(sb)
}

/// A back-end for tests without a target (no process, no driver, no root): its "text" is a
/// module file's, it records every call in order, and it can be told to find bytes that are
/// not the file's, to say `Later` for a splice a number of times, to refuse one, or to fail a
/// batch.
#[cfg(test)]
pub(crate) mod fake {
    use super::*;
    use crate::backend::{Batches, Begin};
    use crate::patchset::{Runtime, Splice};
    use crate::plan::{Rules, Sites};
    use crate::probe::Where;
    use kerf_codegen::{Env, ThreadPointer};
    use kerf_patch::{jump2_bytes, jump5_bytes};
    use std::collections::BTreeMap;
    use std::sync::{Arc, Mutex};

    /// Where the fake "loads" a module, and its heaps.
    pub const BASE: u64 = 0x5555_0000_0000;
    pub const CODE: u64 = BASE + 0x100_0000;
    pub const DATA: u64 = BASE + 0x200_0000;

    /// What the fake saw, shared with the test (a failed build drops its back-end).
    #[derive(Default, Debug)]
    pub struct Log {
        /// Every call, in order.
        pub events: Vec<String>,
        /// Splices live now, and every batch spliced and removed.
        pub live: Vec<u64>,
        pub spliced: Vec<Vec<u64>>,
        pub removed: Vec<Vec<u64>>,
        /// Springboards written and not yet put back.
        pub boards: Vec<u64>,
    }

    impl Log {
        /// Where event `what` (its start) first happened.
        pub fn at(&self, what: &str) -> usize {
            (self.events.iter().position(|e| e.starts_with(what)))
                .unwrap_or_else(|| panic!("no {what} in {:#?}", self.events))
        }
    }

    #[derive(Default)]
    pub struct Fake {
        pub log: Arc<Mutex<Log>>,
        /// The target's bytes: the module file's text at `BASE`, then what was written.
        pub text: BTreeMap<u64, u8>,
        /// The probes `extra_probes` adds (`None`: nothing).
        pub extra: Option<Vec<Probe>>,
        /// An address read as something else than the file holds.
        pub foreign: Option<u64>,
        /// `(address, tries)`: `Later` there while tries are left.
        pub busy: Vec<(u64, usize)>,
        /// A splice refused with `Busy { tries: 0 }`.
        pub refuse: Option<u64>,
        /// A splice (or removal) whose batch fails.
        pub fail_at: Option<u64>,
        /// Splices per batch (the builder's own tests), 2 by default.
        pub batch: usize,
        /// What `after_remove` says it left mapped (default: nothing).
        pub keeps: Removed,
        /// The data heaps' words written, by (heap, offset); unwritten words read 0.
        pub data: Mutex<BTreeMap<(usize, u64), u64>>,
    }

    impl Fake {
        /// A target holding module `m`'s text (its file's bytes) at `BASE`.
        pub fn holding(m: &AnalyzedImage) -> Fake {
            let mut f = Fake { batch: 2, ..Fake::default() };
            for s in &m.segments {
                let Some((base, bytes)) = m.code_region(s.vaddr) else { continue };
                for (k, b) in bytes.iter().enumerate() {
                    f.text.insert(BASE + base.0 + k as u64, *b);
                }
            }
            f
        }

        fn event(&mut self, e: impl Into<String>) {
            self.log().events.push(e.into());
        }

        pub fn log(&self) -> std::sync::MutexGuard<'_, Log> {
            self.log.lock().unwrap()
        }
    }

    fn addrs(batch: &[Splice<RemoteAddr>]) -> Vec<u64> {
        batch.iter().map(|s| s.addr.0).collect()
    }

    impl Backend for Fake {
        type Addr = RemoteAddr;
        type Data = ();
        const SPRINGBOARDS_WITH_SPLICES: bool = false;

        fn target(&self) -> Where {
            Where::Process(1)
        }
        fn alloc_code(
            &mut self,
            _: RemoteAddr,
            _: RemoteAddr,
            _: u64,
        ) -> Result<RemoteAddr, InstrumentError> {
            Ok(RemoteAddr(CODE))
        }
        fn map_data(&mut self, _: RemoteAddr, _: u64, _: u64) -> Result<(), InstrumentError> {
            Ok(())
        }
        fn write_code(&mut self, _: RemoteAddr, _: &[u8]) -> Result<(), InstrumentError> {
            Ok(())
        }
        fn splice(
            &mut self,
            batch: &[Splice<RemoteAddr>],
            done: &mut Vec<Outcome>,
        ) -> Result<(), InstrumentError> {
            self.event(format!("splice {:x?}", addrs(batch)));
            self.log().spliced.push(addrs(batch));
            for s in batch {
                if Some(s.addr.0) == self.fail_at {
                    return Err(InstrumentError::Interrupted);
                }
                if let Some(b) = self.busy.iter_mut().find(|b| b.0 == s.addr.0 && b.1 > 0) {
                    b.1 -= 1;
                    done.push(Outcome::Later);
                } else if Some(s.addr.0) == self.refuse {
                    done.push(Outcome::Refused(Reason::Busy { tries: 0 }));
                } else {
                    self.log().live.push(s.addr.0);
                    done.push(Outcome::Done);
                }
            }
            Ok(())
        }
        fn remove(
            &mut self,
            batch: &[Splice<RemoteAddr>],
        ) -> Result<Vec<Outcome>, InstrumentError> {
            self.event(format!("remove {:x?}", addrs(batch)));
            self.log().removed.push(addrs(batch));
            if batch.iter().any(|s| Some(s.addr.0) == self.fail_at) {
                return Err(InstrumentError::Interrupted);
            }
            self.log().live.retain(|a| !batch.iter().any(|s| s.addr.0 == *a));
            Ok(vec![Outcome::Done; batch.len()])
        }
        fn rules(&self) -> Rules {
            Rules::PROCESS
        }
        fn chunk(&self) -> usize {
            2
        }
        fn batches(&self, _: usize) -> Batches {
            Batches { size: self.batch, tries: 3, pause: Duration::ZERO }
        }
        fn remove_batch(&self, _: usize) -> usize {
            self.batch
        }
        fn begin(
            &mut self,
            _: &[AnalyzedImage],
            _: &[Probe],
            _: &ToolData,
            _: &mut Phases,
        ) -> Result<Begin, InstrumentError> {
            self.event("begin");
            let runtime = Runtime {
                target: Where::Process(1),
                env: Env::User,
                thread: ThreadPointer::FsBase,
                thread_id: None,
                only_thread: None,
                only_id: None,
                cpu: kerf_codegen::CpuRead::Rdtscp,
                flags_save: kerf_codegen::FlagSave::Stack,
                kernel_reads: None,
                off_cpu: None,
            };
            Ok(Begin { runtime, startup: Vec::new() })
        }
        fn extra_probes(
            &mut self,
            _: &[AnalyzedImage],
            _: &Sites,
            _: &mut Phases,
        ) -> Result<Option<Vec<Probe>>, InstrumentError> {
            self.event("extra probes");
            Ok(self.extra.clone())
        }
        fn map_heaps(
            &mut self,
            modules: &[AnalyzedImage],
            _: &[Probe],
            _: &ToolData,
            _: &DataLayout,
            _: &[SitePlan],
        ) -> Result<Vec<Option<Heap<RemoteAddr>>>, InstrumentError> {
            self.event("heaps");
            let heap =
                Heap { code: RemoteAddr(CODE), data: RemoteAddr(DATA), tails: None, rings: None };
            Ok(vec![Some(heap); modules.len()])
        }
        fn guard_action(&mut self, _: Option<usize>) -> Option<u64> {
            Some(DATA + 0x1000)
        }
        fn read(
            &mut self,
            ranges: &[(RemoteAddr, usize)],
        ) -> Result<Vec<Vec<u8>>, InstrumentError> {
            self.event("read");
            let byte = |a: u64| {
                let b = self.text.get(&a).copied().unwrap_or(0);
                if self.foreign == Some(a) {
                    !b
                } else {
                    b
                }
            };
            Ok(ranges.iter().map(|&(a, n)| (a.0..a.0 + n as u64).map(byte).collect()).collect())
        }
        fn write_chunk(
            &mut self,
            patches: &[Patch<'_, RemoteAddr>],
        ) -> Result<(), InstrumentError> {
            self.event(format!("code {}", patches.len()));
            Ok(())
        }
        fn make_splice(
            &self,
            sp: &SitePlan,
            _: &str,
            patch: RemoteAddr,
            displaced: &[u8],
            pad: Option<&[u8]>,
        ) -> Result<Splice<RemoteAddr>, InstrumentError> {
            let d = &sp.plan.displaced;
            let mut springboard = None;
            let new = match (sp.plan.kind, sp.plan.springboard) {
                (SpliceKind::Jump5, _) => jump5_bytes(d.point, patch.0, d.len).unwrap(),
                (SpliceKind::Jump2, Some((sb, _))) => {
                    let jmp = jump5_bytes(sb, patch.0, SPRINGBOARD_LEN as usize).unwrap();
                    springboard = Some((RemoteAddr(sb), pad.unwrap().to_vec(), jmp));
                    jump2_bytes(d.point, sb, d.len).unwrap()
                }
                _ => vec![INT3],
            };
            let old = displaced[..new.len()].to_vec();
            Ok(Splice { addr: RemoteAddr(d.point), old, new, patch, springboard })
        }
        fn write_springboards(
            &mut self,
            boards: &[Springboard<RemoteAddr>],
        ) -> Result<(), InstrumentError> {
            self.event("springboards");
            self.log().boards.extend(boards.iter().map(|b| b.0 .0));
            Ok(())
        }
        /// The default step, noted.
        fn before_traps(
            &mut self,
            _: &[Site],
            first: &[Splice<RemoteAddr>],
            _: &mut Phases,
            settled: &mut dyn FnMut(usize, Outcome),
        ) -> Result<(), InstrumentError> {
            self.event(format!("before traps {:x?}", addrs(first)));
            crate::backend::splice_first(self, first, settled)
        }
        fn after_remove(
            &mut self,
            springboards: Vec<Springboard<RemoteAddr>>,
        ) -> Result<Removed, InstrumentError> {
            self.event(format!("after remove, {} springboards back", springboards.len()));
            self.log().boards.retain(|b| !springboards.iter().any(|s| s.0 .0 == *b));
            Ok(self.keeps.clone())
        }
        fn load_u64(&self, heap: usize, off: u64) -> u64 {
            self.data.lock().unwrap().get(&(heap, off)).copied().unwrap_or(0)
        }
        fn store_u64(&self, heap: usize, off: u64, v: u64) {
            self.data.lock().unwrap().insert((heap, off), v);
        }
        fn data_words(&self, _: usize) -> Option<&[std::sync::atomic::AtomicU64]> {
            None
        }
        fn pauses(&self) -> Pauses {
            Pauses::default()
        }
        fn code_heaps(&self) -> Vec<RemoteAddr> {
            vec![RemoteAddr(CODE)]
        }
    }
}

/// The builder's steps on the fake back-end: their order, what a failure takes out, and
/// what is left out on the way.
#[cfg(test)]
mod tests {
    use super::fake::{Fake, BASE};
    use super::*;
    use crate::spec::Point;
    use kerf_analysis::cfg::FuncId;
    use std::path::PathBuf;
    use std::sync::{Mutex, OnceLock};

    /// The `counted` fixture built with gcc and analysed once, "loaded" at `BASE`.
    fn counted() -> AnalyzedImage {
        static BUILT: OnceLock<Mutex<Option<PathBuf>>> = OnceLock::new();
        let mut built = BUILT.get_or_init(Default::default).lock().unwrap();
        let path = built.get_or_insert_with(|| {
            let dir = std::env::temp_dir().join(format!("kerf-installer-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let out = dir.join("counted");
            let src = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/counted.c");
            let st = std::process::Command::new("gcc")
                .args(["-O2", "-pthread", "-o"])
                .arg(&out)
                .arg(src)
                .status()
                .expect("gcc is needed (Debian package gcc)");
            assert!(st.success(), "gcc failed on counted.c");
            out
        });
        let opts = crate::LoadOptions { cache_dir: None, ..Default::default() };
        let mut m = crate::analyze_file(path, &opts, &kerf_analysis::Quiet).unwrap();
        m.bias = Some(BASE);
        m
    }

    fn entry(m: &AnalyzedImage, name: &str, action: Action) -> Probe {
        let i = m.analysis.cfg.functions.iter().position(|f| f.name == name).unwrap();
        let func = FuncId(i as u32);
        let addr = m.analysis.cfg.function(func).entry;
        let point =
            Point { spec: name.into(), label: name.into(), module: 0, func, addr, at_exit: false };
        Probe { point, action }
    }

    /// A timer over two functions, a counter, and (the target's own) a guard on a third.
    fn probes(m: &AnalyzedImage) -> (Vec<Probe>, Probe) {
        let tool = vec![
            entry(m, "branchy", Action::TimerStart(0)),
            entry(m, "leaf", Action::Count),
            entry(m, "spin_point", Action::TimerStop(0)),
        ];
        (tool, entry(m, "switchy", Action::SignalGuard))
    }

    fn build(
        fake: Fake,
        m: &AnalyzedImage,
        probes: &[Probe],
        kind: Option<SpliceKind>,
    ) -> Result<PatchSet<Fake>, InstrumentError> {
        PatchSet::build(
            fake,
            std::slice::from_ref(m),
            probes,
            &ToolData::timers(1),
            Planning { force_kind: kind, ..Planning::default() },
            None,
        )
    }

    /// begin, plan (with the target's extra probes), heaps, code (each chunk read, then
    /// written), the step before traps with the guard live inside it, then the traps; removal
    /// in the reverse order, the guard last, then `after_remove`.
    #[test]
    fn steps_go_in_order_and_removal_goes_back() {
        let m = counted();
        let (tool, guard) = probes(&m);
        let fake = Fake { extra: Some(vec![guard]), ..Fake::holding(&m) };
        let log = fake.log.clone();
        let set = build(fake, &m, &tool, Some(SpliceKind::Trap)).unwrap();
        let guard_at = set.sites[set.guard_sites[0]].addr;
        assert_eq!(set.sites().len(), 3, "the guard is not one of the tool's sites");
        assert_eq!(set.guards(), 1);
        let start = set.site_of(0).unwrap().addr;
        let went_in: Vec<u64> = {
            let l = log.lock().unwrap();
            let order = ["begin", "extra probes", "heaps", "read", "code", "before traps"];
            let at: Vec<usize> = order.iter().map(|e| l.at(e)).collect();
            assert!(at.windows(2).all(|w| w[0] < w[1]), "{:#?}", l.events);
            // The guard went live inside the step before traps, every trap after it.
            assert_eq!(l.spliced[0], vec![guard_at]);
            assert_eq!(l.events[l.at("before traps") + 1], format!("splice [{guard_at:x}]"));
            let traps: Vec<u64> = l.spliced[1..].concat();
            assert_eq!(traps.len(), 3);
            // Timer stops before timer starts.
            assert_eq!(traps.last(), Some(&start), "{traps:x?}");
            l.spliced.concat()
        };
        let events = log.lock().unwrap().events.len();
        set.remove().unwrap();
        let l = log.lock().unwrap();
        // Removal: in the reverse of the order they went in, then the target's own step.
        let back: Vec<u64> = l.removed.concat();
        assert_eq!(back, went_in.iter().rev().copied().collect::<Vec<_>>());
        assert!(l.live.is_empty());
        let tail = &l.events[events..];
        assert!(tail.last().unwrap().starts_with("after remove"), "{tail:#?}");
        assert!(tail[..tail.len() - 1].iter().all(|e| e.starts_with("remove")), "{tail:#?}");
    }

    /// A batch that fails part-way: what went in (the guard, the batches before) comes out
    /// again, in reverse, before the error is returned, and then `after_remove` runs.
    #[test]
    fn a_failure_in_the_middle_takes_out_what_went_in() {
        let m = counted();
        let (tool, guard) = probes(&m);
        // The order the traps go in, then a build whose batch holding the last one fails.
        let fake = Fake { extra: Some(vec![guard.clone()]), ..Fake::holding(&m) };
        let log = fake.log.clone();
        build(fake, &m, &tool, Some(SpliceKind::Trap)).unwrap().remove().unwrap();
        let last = *log.lock().unwrap().spliced.concat().last().unwrap();
        let fake = Fake { extra: Some(vec![guard]), fail_at: Some(last), ..Fake::holding(&m) };
        let log = fake.log.clone();
        let e = build(fake, &m, &tool, Some(SpliceKind::Trap)).err().expect("a failed batch");
        assert!(matches!(e, InstrumentError::Interrupted), "{e:?}");
        let l = log.lock().unwrap();
        let went_in: Vec<u64> = l.spliced.concat().into_iter().filter(|&a| a != last).collect();
        assert_eq!(went_in.len(), 3, "the guard and a batch of two: {:#?}", l.events);
        assert!(l.live.is_empty(), "left live: {:x?}", l.live);
        assert_eq!(l.removed.concat(), went_in.iter().rev().copied().collect::<Vec<_>>());
        assert!(l.events.last().unwrap().starts_with("after remove"), "{:#?}", l.events);
        drop(l);
        // The same failure where removal had to leave memory mapped: the error says so
        // instead of claiming every probe is out.
        let keeps = Removed {
            kept: vec![(fake::CODE, 8192)],
            why: Some("a stack value".into()),
            ..Removed::default()
        };
        let fake = Fake { fail_at: Some(last), keeps, ..Fake::holding(&m) };
        let e = build(fake, &m, &tool, Some(SpliceKind::Trap)).err().expect("a failed batch");
        let InstrumentError::NotRestored { cause, left } = &e else { panic!("{e:?}") };
        assert!(matches!(**cause, InstrumentError::Interrupted), "{e:?}");
        assert!(left.contains("8 KiB") && left.contains("a stack value"), "{left}");
        assert!(
            e.to_string().starts_with("interrupted while installing probes; every splice"),
            "{e}"
        );
    }

    /// Trap guards come out together, in one batch, after every other probe and before the
    /// jump guards (see `take_out`), even where batches are smaller.
    #[test]
    fn trap_guards_come_out_in_one_batch() {
        let m = counted();
        let (tool, _) = probes(&m);
        let guards: Vec<Probe> = ["switchy", "near_start", "main"]
            .iter()
            .map(|n| entry(&m, n, Action::SignalGuard))
            .collect();
        let fake = Fake { extra: Some(guards), ..Fake::holding(&m) };
        let log = fake.log.clone();
        let set = build(fake, &m, &tool, Some(SpliceKind::Trap)).unwrap();
        assert_eq!(set.guards(), 3);
        let kind_of = |trap: bool| -> Vec<u64> {
            let mut v: Vec<u64> = (set.guard_sites.iter().map(|&g| &set.sites[g]))
                .filter(|s| (s.kind == SpliceKind::Trap) == trap)
                .map(|s| s.addr)
                .collect();
            v.sort();
            v
        };
        let (traps, jumps) = (kind_of(true), kind_of(false));
        assert!(
            !traps.is_empty() && !jumps.is_empty(),
            "both kinds of guard: {traps:x?} {jumps:x?}"
        );
        let tool_sites = set.sites().len();
        set.remove().unwrap();
        let l = log.lock().unwrap();
        let batches: Vec<Vec<u64>> = (l.removed.iter())
            .map(|b| {
                let mut b = b.clone();
                b.sort();
                b
            })
            .collect();
        // The tool's sites first (batches of 2), then the trap guards as one batch, then the
        // jump guards.
        let tool_batches = tool_sites.div_ceil(2);
        assert_eq!(batches[tool_batches], traps, "{:x?}", l.removed);
        assert_eq!(batches[tool_batches + 1..].concat(), jumps, "{:x?}", l.removed);
    }

    /// Coverage's flags: each probe's byte in the tool's area (read back through `count`), and
    /// retiring sites takes out only theirs (in the order given); the rest stay live until
    /// removal, which does not touch the retired ones again.
    #[test]
    fn retired_sites_go_out_alone_and_removal_takes_the_rest() {
        let m = counted();
        let names = ["branchy", "leaf", "spin_point", "switchy"];
        let probes: Vec<Probe> =
            (names.iter().enumerate()).map(|(i, n)| entry(&m, n, Action::Flag(i as u64))).collect();
        let fake = Fake::holding(&m);
        let log = fake.log.clone();
        let tool = ToolData { area: 64, ..ToolData::default() };
        let mut set = PatchSet::build(
            fake,
            std::slice::from_ref(&m),
            &probes,
            &tool,
            Planning::default(),
            None,
        )
        .unwrap();
        assert_eq!(set.sites().len(), 4);
        // The flag bytes: probe 2's byte set, as its code would.
        let h = set.flag_heap(2).unwrap();
        set.area_store(h, 0, 1 << 16);
        assert_eq!((0..4).map(|i| set.count(i)).collect::<Vec<_>>(), vec![0, 0, 1, 0]);
        let site = |set: &PatchSet<Fake>, p: usize| {
            set.sites().iter().position(|s| s.probes.contains(&p)).unwrap()
        };
        let (s2, s0) = (site(&set, 2), site(&set, 0));
        let (a2, a0) = (set.sites()[s2].addr, set.sites()[s0].addr);
        assert_eq!(set.retire(&[s2, s0]).unwrap(), 2);
        assert!(!set.sites()[s2].is_live() && !set.sites()[s0].is_live());
        assert_eq!(set.retire(&[s2]).unwrap(), 0, "already out");
        {
            let l = log.lock().unwrap();
            assert_eq!(l.removed.concat(), vec![a2, a0]);
            assert_eq!(l.live.len(), 2);
        }
        set.remove().unwrap();
        let l = log.lock().unwrap();
        assert!(l.live.is_empty());
        let out = l.removed.concat();
        assert_eq!(out.len(), 4, "each site out once: {out:x?}");
    }

    /// A site whose bytes are not the file's is left out, with why, and nothing leads there;
    /// a site the target refuses is left out too; the rest go in (jump5, and jump2 with its
    /// springboard written before any splice and put back after removal).
    #[test]
    fn foreign_bytes_and_refusals_leave_a_site_out() {
        let m = counted();
        let (tool, _) = probes(&m);
        let fake = Fake::holding(&m);
        let log = fake.log.clone();
        // Where each site goes, from a first run.
        let set = build(fake, &m, &tool, None).unwrap();
        let (leaf, stop) = (set.site_of(1).unwrap().addr, set.site_of(2).unwrap().addr);
        set.remove().unwrap();
        assert!(log.lock().unwrap().live.is_empty());
        let fake = Fake { foreign: Some(leaf), refuse: Some(stop), ..Fake::holding(&m) };
        let log = fake.log.clone();
        let set = build(fake, &m, &tool, None).unwrap();
        assert!(set.site_of(1).is_none() && set.site_of(2).is_none());
        let why = |p: usize| &set.refused.iter().find(|r| r.probe == p).unwrap().reason;
        assert!(matches!(why(1), Reason::Foreign(_)), "{:?}", why(1));
        assert_eq!(why(2), &Reason::Busy { tries: 0 });
        assert_eq!(set.sites().len(), 1);
        {
            let l = log.lock().unwrap();
            assert!(!l.spliced.concat().contains(&leaf), "{:#?}", l.events);
            if let Some(b) = l.events.iter().position(|e| e == "springboards") {
                assert!(b < l.at("splice"), "{:#?}", l.events);
            }
        }
        set.remove().unwrap();
        let l = log.lock().unwrap();
        assert!(l.live.is_empty() && l.boards.is_empty(), "{l:#?}");
    }
}
