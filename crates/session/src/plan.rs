//! Splice planning for a set of probes (pure: reads analysed images, writes nothing): which
//! probes share a site, where each exit probe goes in its block, and the strongest splice kind
//! each site can take (jump5, else jump2 to a springboard, else trap) with the reason a
//! stronger one was refused. Both targets use it: a process and the kernel.
//!
//! Planning is where a cached analysis is checked against the image (DESIGN.md §5): every
//! function a probe is in, with each function its liveness rests on, and every padding run a
//! springboard could take, before anything is planned from them (see [`crate::checked`]).

use crate::load::AnalyzedImage;
use crate::phases::Phases;
use crate::probe::{Action, Chosen, Foreign, InstrumentError, KindRefusal, Probe, Reason, Refused};
use crate::spec::Point;
use kerf_analysis::cfg::{Cfg, FuncId, NoSplice, Terminator};
use kerf_analysis::syscalls::SyscallSite;
use kerf_analysis::validate::Invalid;
use kerf_arch::{ImageAddr, RemoteAddr};
use kerf_codegen::{LiveAt, SpAt, SpBase};
use kerf_patch::{
    plan_jump2, plan_jump5, plan_trap, Displaced, FunctionView, SpliceKind, SPRINGBOARD_LEN,
};
use std::cell::RefCell;
use std::collections::HashMap;
use std::time::Instant;

/// Target-specific placement rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rules {
    /// A probe at a function's entry goes after its `endbr64` and its 5-byte ftrace site
    /// (`call __fentry__` or the nop ftrace leaves there): those bytes belong to ftrace.
    pub skip_entry_prefix: bool,
    /// No trap splices: a site no jump can take is refused. Every block of a kernel's core
    /// text holds tens of thousands of trap sites, some on paths every CPU runs all the time
    /// (interrupts, the scheduler); each hit is an exception until the probe is out again,
    /// and while they go in, kerf itself runs through those paths.
    pub no_trap: bool,
}

impl Rules {
    pub const PROCESS: Rules = Rules { skip_entry_prefix: false, no_trap: false };
    pub const KERNEL: Rules = Rules { skip_entry_prefix: true, no_trap: false };
}

/// One planned site: the probes placed there, its splice, and every fact about its point
/// that code generation needs (so that writing a patch never goes back to analysis).
pub struct SitePlan {
    /// The probe whose point names the site, and every probe placed there.
    pub first: usize,
    pub members: Vec<usize>,
    pub plan: Plan,
    /// What is live just before the site's first displaced instruction.
    pub live: LiveAt,
    /// For each tail-call probe among `members`: the stack pointer its exit instruction will
    /// have, in terms of the registers at the site.
    pub stacks: Vec<(usize, SpAt)>,
}

impl SitePlan {
    /// The stack fact of member `probe` (tail-call probes only).
    pub fn stack(&self, probe: usize) -> Option<SpAt> {
        self.stacks.iter().find(|s| s.0 == probe).map(|s| s.1)
    }
}

/// Every site of a probe set, and the springboard space they take, `[start, end)`.
pub struct Sites {
    pub sites: Vec<SitePlan>,
    pub springboards: Vec<(u64, u64)>,
    /// The module each of `springboards` is in.
    springboard_modules: Vec<usize>,
    /// Probes no splice kind can take (a `ud2`, an instruction that cannot be relocated):
    /// `(probe, label, address, why)`. They are reported and left out; the others go in.
    pub refused: Vec<Refused>,
    /// Where planning's time went.
    pub phases: Phases,
}

/// Plan every probe: exact points first, each address once; exits after, moved to an earlier
/// instruction of their block where a jump fits, or merged into a site already there. The
/// sites come back in the order their splices must go live.
/// `startup` is run-once code of module 0 usable for springboards. Planning stops with
/// [`InstrumentError::Interrupted`] once `cancel` is set. On [`plan_threads`] threads.
pub fn plan_sites(
    modules: &[AnalyzedImage],
    probes: &[Probe],
    force_kind: Option<SpliceKind>,
    startup: &[(u64, u64)],
    rules: Rules,
    cancel: Option<&std::sync::atomic::AtomicBool>,
) -> Result<Sites, InstrumentError> {
    plan_sites_with(modules, probes, force_kind, startup, rules, cancel, every_cpu())
}

/// How many threads planning uses unless told otherwise: every CPU kerf may run on.
pub fn every_cpu() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// How to plan: a kind forced on every point (testing), and how many threads planning runs
/// on (the result is the same on any number: see [`plan_sites_with`]).
#[derive(Clone, Copy, Debug)]
pub struct Planning {
    pub force_kind: Option<SpliceKind>,
    pub threads: usize,
}

impl Default for Planning {
    fn default() -> Planning {
        Planning { force_kind: None, threads: every_cpu() }
    }
}

/// [`plan_sites`] on `threads` threads. The result is the same for any number of them (same
/// sites in the same order, kinds, displaced bytes, springboards, refusals): what a site's
/// plan computes from the analysis and the file alone (the jump5 and jump2 layouts at each
/// exact point, the checks of the padding near it) is computed ahead in parallel, and the one
/// sequential pass, in the same order as ever, uses it where it used to compute it and decides
/// alone what depends on the sites planned before (overlaps, springboard space, shared sites).
#[allow(clippy::too_many_arguments)]
pub fn plan_sites_with(
    modules: &[AnalyzedImage],
    probes: &[Probe],
    force_kind: Option<SpliceKind>,
    startup: &[(u64, u64)],
    rules: Rules,
    cancel: Option<&std::sync::atomic::AtomicBool>,
    threads: usize,
) -> Result<Sites, InstrumentError> {
    let all = vec![true; modules.len()];
    plan_modules(modules, probes, &all, force_kind, startup, rules, cancel, threads)
}

/// Plan `probes`, the first `before` of which were planned as `prev` (from the same modules,
/// with the same `force_kind`, `startup` and `rules`): only the modules that the probes added
/// after them are in are planned again, and the sites of every other module are `prev`'s. The
/// result is what [`plan_sites`] gives for all of `probes` (the same sites in the same order,
/// the same refusals; the same springboard space): a module's plan depends on that module's
/// probes alone (sites, overlaps and springboard space never cross modules), and the order is
/// each site's first probe's place in the planning order. This is how signal-mask guards,
/// found only once a plan has a trap, join a plan without planning every module twice.
#[allow(clippy::too_many_arguments)]
pub fn plan_sites_adding(
    modules: &[AnalyzedImage],
    probes: &[Probe],
    before: usize,
    prev: Sites,
    force_kind: Option<SpliceKind>,
    startup: &[(u64, u64)],
    rules: Rules,
    cancel: Option<&std::sync::atomic::AtomicBool>,
    threads: usize,
) -> Result<Sites, InstrumentError> {
    let mut again = vec![false; modules.len()];
    for p in &probes[before..] {
        again[p.point.module] = true;
    }
    let fresh = plan_modules(modules, probes, &again, force_kind, startup, rules, cancel, threads)?;
    let kept = |probe: usize| !again[probes[probe].point.module];
    let mut sites: Vec<SitePlan> = prev.sites.into_iter().filter(|s| kept(s.first)).collect();
    sites.extend(fresh.sites);
    let mut refused: Vec<Refused> = prev.refused.into_iter().filter(|r| kept(r.probe)).collect();
    refused.extend(fresh.refused);
    // The order one plan of every probe gives: sites (and refusals) as their first probe comes
    // in the planning order, timer starts last.
    sites.sort_by_key(|s| (starts_timer(probes, s), planning_rank(probes, s.first)));
    refused.sort_by_key(|r| planning_rank(probes, r.probe));
    let mut springboards: Vec<((u64, u64), usize)> = prev
        .springboards
        .into_iter()
        .zip(prev.springboard_modules)
        .filter(|&(_, m)| !again[m])
        .collect();
    springboards.extend(fresh.springboards.into_iter().zip(fresh.springboard_modules));
    let (springboards, springboard_modules) = springboards.into_iter().unzip();
    // (The phases are this plan's only: `prev`'s were counted with it.)
    Ok(Sites { sites, springboards, springboard_modules, refused, phases: fresh.phases })
}

/// Where probe `i` comes in the planning order: signal-mask guards first (a probe of the
/// program at the same `syscall` joins the guard's site), exits last, else in probe order.
fn planning_rank(probes: &[Probe], i: usize) -> (bool, bool, usize) {
    (probes[i].action != Action::SignalGuard, probes[i].point.at_exit, i)
}

/// Whether site `sp` starts a timer (such sites go live last).
fn starts_timer(probes: &[Probe], sp: &SitePlan) -> bool {
    sp.members.iter().any(|&i| matches!(probes[i].action, Action::TimerStart(_)))
}

/// [`plan_sites_with`] for the probes of the modules `planned` marks; the other probes are
/// left alone (not checked, not planned, not refused).
#[allow(clippy::too_many_arguments)]
fn plan_modules(
    modules: &[AnalyzedImage],
    probes: &[Probe],
    planned: &[bool],
    force_kind: Option<SpliceKind>,
    startup: &[(u64, u64)],
    rules: Rules,
    cancel: Option<&std::sync::atomic::AtomicBool>,
    threads: usize,
) -> Result<Sites, InstrumentError> {
    let mut phases = Phases::default();
    let t = Instant::now();
    check_points(modules, probes, planned)?;
    let t = phases.lap("plan: check cached functions", t);
    let exact: Vec<Vec<u64>> = (0..modules.len())
        .map(|m| {
            if !planned[m] {
                return Vec::new();
            }
            let mut v: Vec<u64> = probes
                .iter()
                .filter(|p| p.point.module == m && !p.point.at_exit)
                .map(|p| entry_target(&modules[m], &p.point, rules))
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    // Signal-mask guards first: a probe of the program at the same `syscall` joins the
    // guard's site, which takes only the kinds a guard may (see `Planner::plan`).
    let guard = |i: usize| probes[i].action == Action::SignalGuard;
    let t = phases.lap("plan: exact points", t);
    let pre = if threads > 1 {
        let idx: Vec<usize> = (0..probes.len()).collect();
        let pre = in_parallel_with(&idx, threads, |view: &mut ViewCache, &i| {
            // Cancelled: nothing more ahead; the sequential pass stops at once.
            if cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::Relaxed)) {
                return None;
            }
            let p = &probes[i].point;
            if !planned[p.module] {
                return None;
            }
            let need_j2 = guard(i) || force_kind == Some(SpliceKind::Jump2);
            (!p.at_exit)
                .then(|| precompute(modules, &exact[p.module], p, rules, need_j2, view))
                .flatten()
        });
        phases.lap("plan: layouts in parallel", t);
        pre
    } else {
        Vec::new()
    };
    let t = Instant::now();
    let mut pl = Planner {
        modules,
        force_kind,
        startup,
        exact,
        planned: Ranges::default(),
        springboards: Boards::default(),
        pre,
        go: modules
            .iter()
            .enumerate()
            .map(|(k, m)| planned[k] && kerf_analysis::image::is_go_image(&m.bytes))
            .collect(),
        no_trap: rules.no_trap,
    };
    let mut order: Vec<usize> =
        (0..probes.len()).filter(|&i| planned[probes[i].point.module]).collect();
    order.sort_by_key(|&i| planning_rank(probes, i));
    let mut sites: Vec<SitePlan> = Vec::new();
    // The module of each springboard taken (see `plan_sites_adding`).
    let mut springboard_modules: Vec<usize> = Vec::new();
    let mut at: HashMap<(usize, u64), usize> = HashMap::new();
    let mut refused = Vec::new();
    for (n, &i) in order.iter().enumerate() {
        // Planning 200,000 points takes seconds: look at the cancel flag now and then.
        if n % 1024 == 0 && cancel.is_some_and(|c| c.load(std::sync::atomic::Ordering::SeqCst)) {
            return Err(InstrumentError::Interrupted);
        }
        let p = &probes[i].point;
        let m = &modules[p.module];
        let mut addr = m.remote(p.addr).0;
        if !p.at_exit {
            addr = entry_target(m, p, rules);
        }
        if let Some(&s) = at.get(&(p.module, addr)) {
            sites[s].members.push(i);
            continue;
        }
        if p.at_exit {
            // Latest instruction of the block from which a jump5 reaches to the exit without
            // covering another site; else the exit itself.
            let starts = exit_block_starts(m, p.func, p.addr.0);
            let mut chosen = None;
            for &s in starts.iter().rev() {
                // A tool program sees the registers it reads as they are at the exit (the
                // return value): not before an instruction that may change one of them.
                if let Action::Program { reads, .. } = probes[i].action {
                    if s != p.addr.0 && !clobbers(m, s).intersect(reads).is_empty() {
                        break;
                    }
                }
                // A tail-call probe must know the stack pointer its exit will have.
                if probes[i].action.is_tail() && stack_at(m, s, p.addr.0).is_none() {
                    continue;
                }
                let a = m.remote(ImageAddr(s)).0;
                if let Some(&k) = at.get(&(p.module, a)) {
                    chosen = Some((a, Some(k)));
                    break;
                }
                if pl.jump5_clear(p, a)? {
                    chosen = Some((a, None));
                    break;
                }
            }
            match chosen {
                Some((_, Some(k))) => {
                    sites[k].members.push(i);
                    continue;
                }
                Some((a, None)) => addr = a,
                None => {}
            }
        }
        let plan = pl.plan(i, p, addr, guard(i))?;
        springboard_modules.resize(pl.springboards.list.len(), p.module);
        let plan = match plan {
            Ok(plan) => plan,
            Err(reason) => {
                refused.push(Refused { probe: i, label: p.label.clone(), addr, reason });
                continue;
            }
        };
        at.insert((p.module, addr), sites.len());
        pl.planned.insert(plan.displaced.point, plan.displaced.point + plan.displaced.len as u64);
        sites.push(SitePlan {
            first: i,
            members: vec![i],
            plan,
            live: LiveAt::ALL,
            stacks: Vec::new(),
        });
    }
    let t = phases.lap("plan: sites", t);
    // Nothing left to instrument: that is the error.
    if sites.is_empty() {
        if let Some(r) = refused.first() {
            return Err(InstrumentError::NothingPlaced(Box::new(r.clone())));
        }
    }
    for sp in &mut sites {
        point_facts(modules, probes, sp);
    }
    // Sites go live in this order, every site without a timer start first. A thread that
    // enters a timed function while its exits are not yet live would never be seen leaving
    // and would stay "inside" for good; with the starts last, a thread that entered before
    // them is at worst an unmatched exit, which is counted as such. (Sorting is stable.)
    sites.sort_by_key(|sp| starts_timer(probes, sp));
    let t = phases.lap("plan: order", t);
    let springboards = pl.springboards.list;
    check_disjoint(&sites, &springboards)?;
    phases.lap("plan: check overlaps", t);
    Ok(Sites { sites, springboards, springboard_modules, refused, phases })
}

/// The facts about a site's point that code generation needs: liveness at the point, and the
/// stack pointer at the exit of each tail-call probe there (left out where it is not known:
/// writing such a site fails).
fn point_facts(modules: &[AnalyzedImage], probes: &[Probe], sp: &mut SitePlan) {
    let first = &probes[sp.first].point;
    let m = &modules[first.module];
    let at = m.image_addr(RemoteAddr(sp.plan.displaced.point)).0;
    // Coverage's flags need no register and leave the flags alone: whatever is live there,
    // for their many sites no return facts are worked out.
    let plain = sp.members.iter().all(|&i| matches!(probes[i].action, Action::Flag(_)));
    sp.live = if plain { block_live_at(m, first.func, at) } else { live_at(m, first.func, at) };
    sp.stacks = sp
        .members
        .iter()
        .filter(|&&i| probes[i].action.is_tail())
        .filter_map(|&i| Some((i, stack_at(m, at, probes[i].point.addr.0)?)))
        .collect();
}

/// A cached analysis failed its check in module `module`: nothing may be planned from it.
fn rejected(modules: &[AnalyzedImage], module: usize, detail: Invalid) -> InstrumentError {
    InstrumentError::Analysis { module, path: modules[module].path.clone(), detail }
}

/// Before the points of a cached analysis are planned: their functions, and every function
/// whose liveness they rest on, match the image ([`AnalyzedImage::check_functions`]), and each
/// point is an instruction of one of its function's checked blocks (points were resolved from
/// the unchecked analysis).
fn check_points(
    modules: &[AnalyzedImage],
    probes: &[Probe],
    planned: &[bool],
) -> Result<(), InstrumentError> {
    for (k, m) in modules.iter().enumerate().filter(|&(k, m)| planned[k] && m.unchecked()) {
        let points = || probes.iter().map(|p| &p.point).filter(|p| p.module == k);
        let mut funcs: Vec<FuncId> = points().map(|p| p.func).collect();
        funcs.sort_unstable();
        funcs.dedup();
        m.check_functions(&funcs).map_err(|e| rejected(modules, k, e))?;
        for p in points() {
            if !on_boundary(m, p) {
                let function = m.analysis.cfg.function(p.func).name.clone();
                let detail = "a point resolved from it is no instruction of its blocks".into();
                let bad = Invalid::Block { function, addr: p.addr.0, detail };
                return Err(rejected(modules, k, bad));
            }
        }
    }
    Ok(())
}

/// Whether point `p` starts an instruction of one of its function's blocks.
fn on_boundary(m: &AnalyzedImage, p: &Point) -> bool {
    let cfg = &m.analysis.cfg;
    cfg.block_containing(p.func, p.addr).is_some_and(|b| {
        let b = cfg.block(b);
        let Some((base, bytes)) = m.code_region(b.start) else { return false };
        let mut sc = kerf_arch::x86_64::Scanner::new(bytes, base);
        let mut a = b.start.0;
        while a < p.addr.0 {
            match sc.decode(ImageAddr(a)) {
                Some(i) => a = i.next_ip(),
                None => return false,
            }
        }
        a == p.addr.0
    })
}

/// Every padding run of module `module` that a springboard for the site at target address
/// `addr` could use, checked (see `check_points`; runs are sorted, as the cache's load check
/// makes sure).
fn check_padding_near(
    modules: &[AnalyzedImage],
    module: usize,
    addr: u64,
) -> Result<(), InstrumentError> {
    let m = &modules[module];
    if !m.unchecked() {
        return Ok(());
    }
    let pads = &m.analysis.cfg.padding;
    let bias = m.bias.unwrap_or(0);
    // The reach of `springboard_in`, in image addresses.
    let (lo, hi) = ((addr + 2).saturating_sub(128 + bias), (addr + 2 + 127 - bias));
    let first = pads.partition_point(|p| p.start.0 + p.len as u64 <= lo);
    for (i, p) in pads.iter().enumerate().skip(first) {
        if p.start.0 > hi {
            break;
        }
        m.check_padding(i).map_err(|e| rejected(modules, module, e))?;
    }
    Ok(())
}

/// The `syscall` instructions of module `module` (to guard them: see `instrument`). Of a
/// cached analysis, every function whose code holds the bytes of a `syscall` (`0f 05`) is
/// checked first: the sites are found from its blocks, and the number in eax from the
/// instructions before the `syscall` in its block, so a block that lies could hide one.
pub fn syscall_sites(
    modules: &[AnalyzedImage],
    module: usize,
) -> Result<Vec<SyscallSite>, InstrumentError> {
    let m = &modules[module];
    let cfg = &m.analysis.cfg;
    if m.unchecked() {
        let holds_syscall = |f: &kerf_analysis::cfg::Function| {
            let code = m.code_region(f.entry).and_then(|(base, bytes)| {
                let lo = usize::try_from(f.extent.start.checked_sub(base.0)?).ok()?;
                let hi = usize::try_from(f.extent.end.checked_sub(base.0)?).ok()?;
                bytes.get(lo..hi)
            });
            // (Code outside one region is not what analysis makes: the check says so.)
            code.is_none_or(kerf_analysis::syscalls::holds_syscall_bytes)
        };
        let funcs: Vec<FuncId> = (0..cfg.functions.len() as u32)
            .map(FuncId)
            .filter(|&f| holds_syscall(cfg.function(f)))
            .collect();
        // In parallel; the first failure in function order is the one reported.
        let checked = in_parallel(&funcs, every_cpu(), |&f| m.check_code(f));
        if let Some(Err(e)) = checked.into_iter().find(Result::is_err) {
            return Err(rejected(modules, module, e));
        }
    }
    Ok(kerf_analysis::syscalls::syscall_sites(cfg, m))
}

/// [`entry_site`] as an address in the target.
fn entry_target(m: &AnalyzedImage, p: &Point, rules: Rules) -> u64 {
    m.remote(ImageAddr(entry_site(m, p, rules))).0
}

/// The image address an exact point's probe goes to: the point itself, except that under
/// `skip_entry_prefix` a function entry moves past its `endbr64` and ftrace site.
fn entry_site(m: &AnalyzedImage, p: &Point, rules: Rules) -> u64 {
    let addr = p.addr.0;
    let cfg = &m.analysis.cfg;
    if !rules.skip_entry_prefix || cfg.function(p.func).entry.0 != addr {
        return addr;
    }
    let Some((base, bytes)) = m.code_region(ImageAddr(addr)) else { return addr };
    let mut sc = kerf_arch::x86_64::Scanner::new(bytes, base);
    let mut a = addr;
    if let Some(i) = sc.decode(ImageAddr(a)) {
        if i.code() == iced_x86::Code::Endbr64 {
            a = i.next_ip();
        }
    }
    if let Some(i) = sc.decode(ImageAddr(a)) {
        // ftrace leaves a 5-byte nop at every traceable function's start (a call while it
        // traces the function).
        if i.len() == 5 && (i.mnemonic() == iced_x86::Mnemonic::Nop || i.is_call_near()) {
            a = i.next_ip();
        }
    }
    a
}

struct Planner<'a> {
    modules: &'a [AnalyzedImage],
    force_kind: Option<SpliceKind>,
    startup: &'a [(u64, u64)],
    /// Per module, the sorted target addresses of every exact point.
    exact: Vec<Vec<u64>>,
    /// The bytes each planned splice covers; they never overlap.
    planned: Ranges,
    /// Springboard space taken so far.
    springboards: Boards,
    /// Per probe, what [`precompute`] found at its site (empty on one thread).
    pre: Vec<Option<Pre>>,
    /// Per module: Go code, where a jump may displace one instruction only (see
    /// [`one_instruction_only`]).
    go: Vec<bool>,
    /// [`Rules::no_trap`].
    no_trap: bool,
}

/// What `Planner::plan` computes at an exact point from the analysis and the file alone.
struct Pre {
    /// The target address of the site.
    addr: u64,
    jump5: Result<Displaced, kerf_patch::Refusal>,
    /// Computed where jump2 is sure to be tried (jump5 refused, a guard, forced); else on
    /// demand.
    jump2: Option<Result<Displaced, kerf_patch::Refusal>>,
}

/// [`Pre`] for exact point `p` (`None` where planning refuses it before any layout, which the
/// sequential pass finds again). The padding a springboard near it could take is checked too
/// (checks are memoised; one that fails is found again, in order, by the sequential pass).
fn precompute(
    modules: &[AnalyzedImage],
    exact: &[u64],
    p: &Point,
    rules: Rules,
    need_jump2: bool,
    cache: &mut ViewCache,
) -> Option<Pre> {
    let m = &modules[p.module];
    let bias = m.bias.unwrap_or(0);
    let addr = entry_target(m, p, rules);
    check_padding_near(modules, p.module, addr).ok()?;
    let live = code_bytes(m, addr)?;
    if never_spliced(m, addr, 1).is_some() {
        return None;
    }
    // Probes come in function order (every block of a function, one after another): the
    // view's block starts, sorted, are made once per function, not once per probe.
    let cfg = &m.analysis.cfg;
    if cache.key != Some((p.module, p.func)) {
        block_starts(cfg, p.func, bias, exact, &mut cache.starts);
        cache.unanalysable = has_unanalysable_jump(cfg, p.func);
        cache.key = Some((p.module, p.func));
    }
    let view = view_of(cfg, p.func, bias, &cache.starts, cache.unanalysable);
    let jump5 = plan_jump5(live, addr, addr, &view);
    let jump2 = (need_jump2 || jump5.is_err()).then(|| plan_jump2(live, addr, addr, &view));
    Some(Pre { addr, jump5, jump2 })
}

/// What [`precompute`] last made of a function's view: `key` is `(module, function)`.
#[derive(Default)]
struct ViewCache {
    key: Option<(usize, FuncId)>,
    starts: Vec<u64>,
    unanalysable: bool,
}

/// `f` of every item, on up to `threads` threads (contiguous runs of items each), in the
/// items' order.
fn in_parallel<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    f: impl Fn(&T) -> R + Sync,
) -> Vec<R> {
    in_parallel_with(items, threads, |_: &mut (), t| f(t))
}

/// [`in_parallel`], with state each thread keeps from one item to the next of its run.
fn in_parallel_with<T: Sync, R: Send, S: Default>(
    items: &[T],
    threads: usize,
    f: impl Fn(&mut S, &T) -> R + Sync,
) -> Vec<R> {
    if threads <= 1 || items.len() < 2 {
        let mut state = S::default();
        return items.iter().map(|t| f(&mut state, t)).collect();
    }
    let per = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|s| {
        let parts: Vec<_> = items
            .chunks(per)
            .map(|c| {
                s.spawn(move || {
                    let mut state = S::default();
                    c.iter().map(|t| f(&mut state, t)).collect::<Vec<R>>()
                })
            })
            .collect();
        parts
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    })
}

impl Planner<'_> {
    /// Whether a jump5 at `addr` (an instruction start in `p`'s function) is allowed and
    /// covers no address of another site or exact point.
    fn jump5_clear(&self, p: &Point, addr: u64) -> Result<bool, InstrumentError> {
        let m = &self.modules[p.module];
        let bias = m.bias.unwrap_or(0);
        let Some(bytes) = code_bytes(m, addr) else { return Ok(false) };
        let mut starts = Vec::new();
        let view = function_view(&m.analysis.cfg, p.func, bias, &self.exact[p.module], &mut starts);
        let Ok(d) = plan_jump5(bytes, addr, addr, &view) else { return Ok(false) };
        Ok(!overlaps(addr, d.len, &self.planned, &self.springboards)
            && never_spliced(m, addr, d.len).is_none()
            && !(self.go[p.module] && one_instruction_only(&d).is_some()))
    }

    /// Plan the strongest splice kind the site at `addr` can take: jump5, else jump2 to a
    /// springboard within reach, else trap; each refusal is kept as the reason.
    ///
    /// A signal-mask guard (`guard`) sits on a `syscall` and takes jump2, else trap, never
    /// jump5: a thread asleep in that system call has its PC right after the `syscall`, which
    /// a jump5 over the following instructions would cover, so the splice could not be written
    /// while it sleeps (and guards must all be in before any trap goes live). jump2 and trap
    /// change only the `syscall`'s own bytes.
    /// `Ok(Err(reason))`: no kind can take the site; `Err`: planning cannot go on at all (a
    /// cached analysis failed its check).
    fn plan(
        &mut self,
        i: usize,
        p: &Point,
        addr: u64,
        guard: bool,
    ) -> Result<Result<Plan, Reason>, InstrumentError> {
        check_padding_near(self.modules, p.module, addr)?;
        let m = &self.modules[p.module];
        let a = &m.analysis;
        let bias = m.bias.unwrap_or(0);
        let Some(live) = code_bytes(m, addr) else { return Ok(Err(Reason::NotCode)) };
        // What was computed ahead for this probe's site, if it is this site (an exit moved
        // to another instruction of its block has none).
        let pre = self.pre.get_mut(i).and_then(Option::take).filter(|pre| pre.addr == addr);
        let (pre5, mut pre2) = match pre {
            Some(pre) => (Some(pre.jump5), pre.jump2),
            None => (None, None),
        };
        let exact = &self.exact[p.module];
        let layout = |jump: fn(&[u8], u64, u64, &FunctionView<'_>) -> Result<Displaced, _>| {
            let mut starts = Vec::new();
            let view = function_view(&a.cfg, p.func, bias, exact, &mut starts);
            jump(live, addr, addr, &view)
        };
        let planned = &self.planned;
        // Code no splice may touch (a signal trampoline, bytes an unwind entry claims inside
        // another instruction stream) refuses every kind, whatever function it is found in.
        if let Some(n) = never_spliced(m, addr, 1) {
            return Ok(Err(Reason::NeverSpliced(*n)));
        }
        // Taken out for this site: a jump2 adds to it while the checks of every kind read it.
        let boards = RefCell::new(std::mem::take(&mut self.springboards));
        let go = self.go[p.module];
        let clear = |d: Displaced| {
            if overlaps(addr, d.len, planned, &boards.borrow()) {
                Err(KindRefusal::Overlap)
            } else if let Some(n) = never_spliced(m, addr, d.len) {
                Err(KindRefusal::NeverSpliced(*n))
            } else if let Some(at) = go.then(|| one_instruction_only(&d)).flatten() {
                Err(KindRefusal::ResumeInside { at })
            } else {
                Ok(d)
            }
        };
        let j5 = || {
            pre5.unwrap_or_else(|| layout(plan_jump5)).map_err(KindRefusal::Patch).and_then(clear)
        };
        let pads = &a.cfg.padding;
        let startup: &[(u64, u64)] = if p.module == 0 { self.startup } else { &[] };
        let mut jump2 = || -> Result<(Displaced, (u64, &'static str)), KindRefusal> {
            let d = pre2
                .take()
                .unwrap_or_else(|| layout(plan_jump2))
                .map_err(KindRefusal::Patch)
                .and_then(clear)?;
            // Not in a Go module's padding (see `KindRefusal::GoPadding`).
            let used = &mut *boards.borrow_mut();
            // The site's own bytes too: a jump2 after a `ret` may cover the filler after it.
            let own = (addr, addr + d.len as u64);
            let near = if go { None } else { springboard_near(pads, bias, own, used, planned) };
            let sb = near
                .map(|s| (s, "padding"))
                .or_else(|| {
                    springboard_in(startup.iter().copied(), own, used, planned)
                        .map(|s| (s, "startup code"))
                })
                .ok_or(if go { KindRefusal::GoPadding } else { KindRefusal::NoSpringboard })?;
            Ok((d, sb))
        };
        // The kinds refused so far, and what chose a weaker kind first.
        let reason = |chosen: Option<Chosen>, refused: Vec<(SpliceKind, KindRefusal)>| {
            (chosen.is_some() || !refused.is_empty()).then_some(Reason::Kinds { chosen, refused })
        };
        let no_trap = self.no_trap;
        let trap =
            |chosen: Option<Chosen>, mut refused: Vec<(SpliceKind, KindRefusal)>| match plan_trap(
                live, addr, addr,
            ) {
                Ok(_) if no_trap => {
                    refused.push((SpliceKind::Trap, KindRefusal::TrapsOff));
                    Err(Reason::Kinds { chosen, refused })
                }
                // The int3 alone is written, but an earlier jump's displaced bytes (padded
                // over filler) or a springboard may hold this address.
                Ok(_) if overlaps(addr, 1, planned, &boards.borrow()) => {
                    refused.push((SpliceKind::Trap, KindRefusal::Overlap));
                    Err(Reason::Kinds { chosen, refused })
                }
                Ok(d) => Ok(Plan {
                    kind: SpliceKind::Trap,
                    reason: reason(chosen, refused),
                    displaced: d,
                    springboard: None,
                }),
                Err(t) => {
                    refused.push((SpliceKind::Trap, KindRefusal::Patch(t)));
                    Err(Reason::Kinds { chosen, refused })
                }
            };
        let jump2_plan =
            |chosen: Option<Chosen>, refused: Vec<(SpliceKind, KindRefusal)>, (d, s)| Plan {
                kind: SpliceKind::Jump2,
                reason: reason(chosen, refused),
                displaced: d,
                springboard: Some(s),
            };
        let chosen =
            if guard { Some(Chosen::Guard) } else { self.force_kind.map(|_| Chosen::Forced) };
        let res = match (guard, self.force_kind) {
            (true, _) => match jump2() {
                Ok(j) => Ok(jump2_plan(chosen, Vec::new(), j)),
                Err(r) => trap(chosen, vec![(SpliceKind::Jump2, r)]),
            },
            (false, Some(SpliceKind::Trap)) => trap(chosen, Vec::new()),
            (false, Some(SpliceKind::Jump5)) => match j5() {
                Ok(d) => Ok(Plan {
                    kind: SpliceKind::Jump5,
                    reason: None,
                    displaced: d,
                    springboard: None,
                }),
                Err(r) => {
                    Err(Reason::Kinds { chosen: None, refused: vec![(SpliceKind::Jump5, r)] })
                }
            },
            (false, Some(SpliceKind::Jump2)) => match jump2() {
                Ok(j) => Ok(jump2_plan(chosen, Vec::new(), j)),
                Err(r) => Err(Reason::Kinds { chosen, refused: vec![(SpliceKind::Jump2, r)] }),
            },
            (false, None) => match j5() {
                Ok(d) => Ok(Plan {
                    kind: SpliceKind::Jump5,
                    reason: None,
                    displaced: d,
                    springboard: None,
                }),
                Err(r5) => match jump2() {
                    Ok(j) => Ok(jump2_plan(None, vec![(SpliceKind::Jump5, r5)], j)),
                    Err(r2) => trap(None, vec![(SpliceKind::Jump5, r5), (SpliceKind::Jump2, r2)]),
                },
            },
        };
        self.springboards = boards.into_inner();
        Ok(res)
    }
}

fn function_view<'a>(
    cfg: &'a Cfg,
    f: FuncId,
    bias: u64,
    others: &[u64],
    starts: &'a mut Vec<u64>,
) -> FunctionView<'a> {
    block_starts(cfg, f, bias, others, starts);
    view_of(cfg, f, bias, starts, has_unanalysable_jump(cfg, f))
}

/// Into `starts`: the sorted block starts of function `f` and the other probed addresses
/// (`others`, sorted) in its reach, as target addresses.
fn block_starts(cfg: &Cfg, f: FuncId, bias: u64, others: &[u64], starts: &mut Vec<u64>) {
    let fun = cfg.function(f);
    starts.clear();
    starts.extend(cfg.blocks_of(f).iter().map(|b| b.start.0 + bias));
    // Other probed addresses (sorted) count as branch targets: no splice may cover one. Past
    // the extent too: a jump after a final `ret` may be padded over the filler that follows
    // (up to 4 more bytes, ending inside a filler instruction of at most 15), and an entry
    // found in that filler is no less a site.
    let (lo, hi) = (fun.extent.start + bias, fun.extent.end + bias + 20);
    let from = others.partition_point(|a| *a < lo);
    let to = others.partition_point(|a| *a < hi);
    starts.extend_from_slice(&others[from..to]);
    starts.sort_unstable();
    starts.dedup();
}

/// The view of function `f` with its block starts ([`block_starts`]) and whether it has an
/// unanalysable jump already found.
fn view_of<'a>(
    cfg: &'a Cfg,
    f: FuncId,
    bias: u64,
    starts: &'a [u64],
    has_unanalysable_jump: bool,
) -> FunctionView<'a> {
    let fun = cfg.function(f);
    FunctionView {
        name: &fun.name,
        extent: fun.extent.start + bias..fun.extent.end + bias,
        block_starts: starts,
        has_unanalysable_jump,
    }
}

fn has_unanalysable_jump(cfg: &Cfg, f: FuncId) -> bool {
    cfg.blocks_of(f).iter().any(|b| b.term == Terminator::Unanalysable)
}

/// What is live just before the instruction at image address `addr`: from the block's
/// live-in at a block start, else by decoding the block backwards; everything when unknown.
/// In a block that ends the frame (a `ret`, a tail call: where `@exits` probes go), also what
/// is live where the function's returns land (`liveness::live_before_exit`: hand-written code
/// may return values in any register), from the module's return facts (solved, or kept and
/// checked, once per module).
pub fn live_at(m: &AnalyzedImage, f: FuncId, addr: u64) -> LiveAt {
    let cfg = &m.analysis.cfg;
    let a = ImageAddr(addr);
    if kerf_analysis::liveness::in_last_block(cfg, f, a) {
        // (A function whose `ret` leaves through a slot it wrote, as glibc's `swapcontext`,
        // lands anywhere: everything. A trace record at its exit took `rdi`, which it loads
        // for the next context, and a coroutine started with a wrong argument.)
        let through = cfg.function(f).ret_through_slot;
        let lands = m.ensure_returns().ok().and_then(|r| r.get(f.0 as usize).copied());
        let lands = lands.filter(|_| through);
        return kerf_analysis::liveness::live_before_exit(cfg, m, f, a, lands)
            .map_or(LiveAt::ALL, |l| LiveAt { regs: l.regs, flags: l.flags });
    }
    block_live_at(m, f, addr)
}

/// [`live_at`] from the block sets alone (the SysV ABI at every `ret`).
fn block_live_at(m: &AnalyzedImage, f: FuncId, addr: u64) -> LiveAt {
    let cfg = &m.analysis.cfg;
    match cfg.block_containing(f, ImageAddr(addr)).map(|b| cfg.block(b)) {
        Some(b) if b.start.0 == addr => LiveAt { regs: b.live_in, flags: b.flags_live_in },
        Some(_) => kerf_analysis::liveness::live_at(cfg, m, f, ImageAddr(addr))
            .map_or(LiveAt::ALL, |(before, _)| LiveAt { regs: before.regs, flags: before.flags }),
        None => LiveAt::ALL,
    }
}

/// Instruction starts of the block holding the exit instruction at image address `exit`,
/// from the block start to the exit, in order.
fn exit_block_starts(m: &AnalyzedImage, f: FuncId, exit: u64) -> Vec<u64> {
    let cfg = &m.analysis.cfg;
    let Some(b) = cfg.block_containing(f, ImageAddr(exit)).map(|b| cfg.block(b)) else {
        return vec![exit];
    };
    let Some((base, bytes)) = m.code_region(b.start) else { return vec![exit] };
    let mut sc = kerf_arch::x86_64::Scanner::new(bytes, base);
    let mut v = Vec::new();
    let mut a = b.start.0;
    while a <= exit {
        v.push(a);
        match sc.decode(ImageAddr(a)) {
            Some(i) => a = i.next_ip(),
            None => break,
        }
    }
    if v.last() != Some(&exit) {
        return vec![exit];
    }
    v
}

/// The registers the instruction at image address `a` may change (all of them if it does
/// not decode).
fn clobbers(m: &AnalyzedImage, a: u64) -> kerf_arch::x86_64::RegSet {
    let Some((base, bytes)) = m.code_region(ImageAddr(a)) else {
        return kerf_arch::x86_64::RegSet::ALL;
    };
    let mut sc = kerf_arch::x86_64::Scanner::new(bytes, base);
    match sc.decode(ImageAddr(a)) {
        Some(i) => sc.facts(&i).clobbers,
        None => kerf_arch::x86_64::RegSet::ALL,
    }
}

/// The stack pointer the instruction at image address `to` will have when it runs, in terms
/// of the registers at `from`, an earlier instruction of the same straight-line block (an
/// exit probe placed before a function's epilogue); `None` when the instructions between
/// move it in a way this does not follow.
pub fn stack_at(m: &AnalyzedImage, from: u64, to: u64) -> Option<SpAt> {
    let (base, bytes) = m.code_region(ImageAddr(from))?;
    stack_delta(bytes, base, from, to)
}

/// [`stack_at`] over `bytes` (the first at `base`): pushes and pops, `add`/`sub`/`lea` of
/// `rsp`, and `leave` or `mov rsp, rbp` / `lea rsp, [rbp+d]`, after which the stack pointer
/// is `rbp`-based (`rbp` as at `from`: only while nothing before has changed it).
fn stack_delta(bytes: &[u8], base: ImageAddr, from: u64, to: u64) -> Option<SpAt> {
    use iced_x86::{Mnemonic, OpKind, Register};
    use kerf_arch::x86_64::Gpr;
    let mut sc = kerf_arch::x86_64::Scanner::new(bytes, base);
    let mut at = SpAt::HERE;
    let mut rbp_changed = false;
    let mut a = from;
    while a < to {
        let i = sc.decode(ImageAddr(a))?;
        let facts = sc.facts(&i);
        a = i.next_ip();
        let reg = |k: u32| (i.op_kind(k) == OpKind::Register).then(|| i.op_register(k));
        let to_rbp = |disp: i64, rbp_changed: bool| -> Option<SpAt> {
            (!rbp_changed).then_some(SpAt { base: SpBase::Rbp, disp: i32::try_from(disp).ok()? })
        };
        let rsp_dest = reg(0) == Some(Register::RSP);
        at = match i.mnemonic() {
            Mnemonic::Leave => {
                let next = to_rbp(8, rbp_changed)?;
                rbp_changed = true;
                next
            }
            Mnemonic::Mov if rsp_dest && reg(1) == Some(Register::RBP) => to_rbp(0, rbp_changed)?,
            Mnemonic::Lea if rsp_dest && i.memory_index() == Register::None => {
                let d = i.memory_displacement64() as i64;
                match i.memory_base() {
                    Register::RSP => SpAt { disp: at.disp + i32::try_from(d).ok()?, ..at },
                    Register::RBP => to_rbp(d, rbp_changed)?,
                    _ => return None,
                }
            }
            Mnemonic::Add | Mnemonic::Sub if rsp_dest => {
                let imm = match i.op_kind(1) {
                    OpKind::Immediate8to64 | OpKind::Immediate32to64 | OpKind::Immediate8 => {
                        i32::try_from(i.immediate(1) as i64).ok()?
                    }
                    _ => return None,
                };
                let d = if i.mnemonic() == Mnemonic::Add { imm } else { -imm };
                SpAt { disp: at.disp.checked_add(d)?, ..at }
            }
            // push, pop, pushf, popf: the decoder knows by how much.
            _ if i.stack_pointer_increment() != 0 && !rsp_dest => {
                if facts.clobbers.contains(Gpr::Rbp) {
                    rbp_changed = true;
                }
                SpAt { disp: at.disp + i.stack_pointer_increment(), ..at }
            }
            _ if facts.clobbers.contains(Gpr::Rsp) => return None,
            _ => {
                if facts.clobbers.contains(Gpr::Rbp) {
                    rbp_changed = true;
                }
                at
            }
        };
    }
    (a == to).then_some(at)
}

/// The module's code at target address `addr` as its file holds it (32 bytes, or fewer at
/// the end of its segment; `None` outside its code). Planning reads the file, not the target,
/// so it needs no stop; the bytes in the target are checked against the file's before each
/// splice is written ([`differs_from_file`]).
fn code_bytes(m: &AnalyzedImage, addr: u64) -> Option<&[u8]> {
    let a = m.image_addr(RemoteAddr(addr));
    m.code_region(a).and_then(|(base, bytes)| {
        let off = (a.0 - base.0) as usize;
        bytes.get(off..(off + 32).min(bytes.len()))
    })
}

/// Why the bytes `live`, read from the target at target address `addr` of module `m`, must
/// not be spliced: they are not what the module's file (for the kernel: its text as read at
/// analysis time) holds there. Planning decided on the file's bytes and the code patch
/// relocates them, so anything else there (another tool's breakpoint, another kerf's jump,
/// a JIT, a relocation kerf did not expect) would be overwritten and lost, or worse, taken
/// for the original and put back later. `None` when they match.
pub fn differs_from_file(m: &AnalyzedImage, addr: u64, live: &[u8]) -> Option<Foreign> {
    let a = m.image_addr(RemoteAddr(addr));
    let file = m.code_region(a).and_then(|(base, bytes)| {
        let off = usize::try_from(a.0 - base.0).ok()?;
        bytes.get(off..off.checked_add(live.len())?)
    });
    if file == Some(live) {
        return None;
    }
    Some(Foreign {
        addr,
        live: live.to_vec(),
        file: file.map(<[u8]>::to_vec),
        path: m.path.clone(),
    })
}

/// The planned splice of one site.
pub struct Plan {
    pub kind: SpliceKind,
    /// Why a stronger kind was not taken.
    pub reason: Option<Reason>,
    pub displaced: Displaced,
    pub springboard: Option<(u64, &'static str)>,
}

/// Disjoint address ranges, `start -> end`.
#[derive(Default)]
struct Ranges(std::collections::BTreeMap<u64, u64>);

impl Ranges {
    fn insert(&mut self, start: u64, end: u64) {
        self.0.insert(start, end);
    }

    /// The end of a range that meets `[lo, hi)`, if one does. The ranges are disjoint, so
    /// only the last one starting below `hi` can.
    fn meets(&self, lo: u64, hi: u64) -> Option<u64> {
        self.0.range(..hi).next_back().filter(|(_, e)| **e > lo).map(|(_, e)| *e)
    }
}

/// The range of module `m` that no splice may touch and that `[addr, addr+len)` (target
/// addresses) meets, if any.
fn never_spliced(m: &AnalyzedImage, addr: u64, len: usize) -> Option<&NoSplice> {
    let lo = m.image_addr(RemoteAddr(addr)).0;
    m.analysis.cfg.no_splice_in(lo, lo + len as u64)
}

/// In Go code, where a jump may cover only its first instruction: the start of the second
/// displaced instruction, if there is one. Go's runtime resumes goroutines at addresses no
/// call leads to, on stacks no thread runs on while kerf splices, so neither the analysis
/// nor the freeze check can see them: every goroutine returns to `runtime.goexit`+1 (past a
/// one-byte `nop`), and one preempted by a signal resumes at whatever instruction it was
/// stopped at. A jump that covers an instruction boundary would send such a goroutine into
/// the middle of itself; one instruction, with no boundary inside, cannot (a trap's int3 is
/// one byte: a goroutine resuming at the next instruction never sees it).
fn one_instruction_only(d: &Displaced) -> Option<u64> {
    d.insns.get(1).map(|i| i.ip())
}

/// DESIGN.md §5: no two splices and no splice and springboard share a byte (one would
/// overwrite the other, and removal would restore bytes that are not the original). The
/// planner keeps this as it goes; this checks the finished plan once, so a slip anywhere in
/// it is an error before anything is written, not a corrupted target.
fn check_disjoint(sites: &[SitePlan], springboards: &[(u64, u64)]) -> Result<(), InstrumentError> {
    let mut all: Vec<(u64, u64, Option<usize>)> = sites
        .iter()
        .enumerate()
        .map(|(k, sp)| {
            let d = &sp.plan.displaced;
            (d.point, d.point + d.len as u64, Some(k))
        })
        .chain(springboards.iter().map(|&(a, b)| (a, b, None)))
        .collect();
    all.sort_unstable();
    let what = |e: &(u64, u64, Option<usize>)| match e.2 {
        Some(k) => format!("{:?} splice [{:#x}, {:#x})", sites[k].plan.kind, e.0, e.1),
        None => format!("springboard [{:#x}, {:#x})", e.0, e.1),
    };
    match all.windows(2).find(|w| w[1].0 < w[0].1) {
        Some(w) => Err(InstrumentError::PlanOverlap { first: what(&w[0]), second: what(&w[1]) }),
        None => Ok(()),
    }
}

/// Springboards taken, in the order taken (the installer writes them so), and as ranges to
/// look up: a large plan takes tens of thousands, and every site checks against them.
#[derive(Default)]
struct Boards {
    list: Vec<(u64, u64)>,
    ranges: Ranges,
}

impl Boards {
    fn push(&mut self, start: u64, end: u64) {
        self.list.push((start, end));
        self.ranges.insert(start, end);
    }
}

/// Whether `[addr, addr+len)` meets the bytes of a planned splice or a springboard.
fn overlaps(addr: u64, len: usize, planned: &Ranges, springboards: &Boards) -> bool {
    let end = addr + len as u64;
    planned.meets(addr, end).is_some() || springboards.ranges.meets(addr, end).is_some()
}

/// Five bytes of `ranges` (target addresses, `[start, end)`) for a springboard within
/// `jmp rel8` reach of the jump2 at `site.0` (so that `point + 2 - 128 <= sb <= point + 2 +
/// 127`), not yet used and outside the site's own bytes `[site.0, site.1)`; the bytes taken
/// are added to `used`.
fn springboard_in(
    ranges: impl Iterator<Item = (u64, u64)>,
    site: (u64, u64),
    used: &mut Boards,
    planned: &Ranges,
) -> Option<u64> {
    let point = site.0;
    let (lo, hi) = ((point + 2).saturating_sub(128), point + 2 + 127);
    for (start, end) in ranges {
        let mut sb = start.max(lo);
        while sb + SPRINGBOARD_LEN <= end && sb <= hi {
            // Padding may also be covered by a jump splice after a return.
            let taken = planned.meets(sb, sb + SPRINGBOARD_LEN);
            let springboard = used.ranges.meets(sb, sb + SPRINGBOARD_LEN);
            let own = (sb < site.1 && site.0 < sb + SPRINGBOARD_LEN).then_some(site.1);
            match taken.or(springboard).or(own) {
                Some(b) => sb = b,
                None => {
                    used.push(sb, sb + SPRINGBOARD_LEN);
                    return Some(sb);
                }
            }
        }
    }
    None
}

/// Five bytes of padding for a springboard within `jmp rel8` reach of the jump2 `site` (its
/// bytes, `[start, end)`), not yet used.
/// `pads` are the module's padding runs in image addresses, `bias` its load bias.
fn springboard_near(
    pads: &[kerf_analysis::cfg::Padding],
    bias: u64,
    site: (u64, u64),
    used: &mut Boards,
    planned: &Ranges,
) -> Option<u64> {
    // Only the runs within reach (the runs are sorted and disjoint; a large library has
    // ~90,000, and every jump2 and trap site asks).
    let lo = (site.0 + 2).saturating_sub(128 + bias);
    let first = pads.partition_point(|p| p.start.0 + p.len as u64 <= lo);
    let hi = site.0 + 2 + 127 - bias.min(site.0 + 2 + 127);
    let near = pads[first..].iter().take_while(|p| p.start.0 <= hi);
    let ranges = near.map(|p| (p.start.0 + bias, p.start.0 + bias + p.len as u64));
    springboard_in(ranges, site, used, planned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The stack pointer at the last instruction of `code` (at 0x1000), from its first.
    fn at_last(code: &[u8]) -> Option<SpAt> {
        let mut sc = kerf_arch::x86_64::Scanner::new(code, ImageAddr(0x1000));
        let mut a = 0x1000;
        let mut last = a;
        while let Some(i) = sc.decode(ImageAddr(a)) {
            last = a;
            a = i.next_ip();
        }
        stack_delta(code, ImageAddr(0x1000), 0x1000, last)
    }

    fn rsp(disp: i32) -> Option<SpAt> {
        Some(SpAt { base: SpBase::Rsp, disp })
    }

    fn rbp(disp: i32) -> Option<SpAt> {
        Some(SpAt { base: SpBase::Rbp, disp })
    }

    #[test]
    fn epilogues() {
        // ret alone; pop rbx; pop rbp; pop r12; ret
        assert_eq!(at_last(&[0xc3]), rsp(0));
        assert_eq!(at_last(&[0x5b, 0x5d, 0x41, 0x5c, 0xc3]), rsp(24));
        // add rsp, 0x18; pop rbx; ret
        assert_eq!(at_last(&[0x48, 0x83, 0xc4, 0x18, 0x5b, 0xc3]), rsp(0x20));
        // sub rsp, 8; push rax; jmp rel32 (a tail call after moving the stack)
        assert_eq!(at_last(&[0x48, 0x83, 0xec, 0x08, 0x50, 0xe9, 0, 0, 0, 0]), rsp(-16));
        // lea rsp, [rsp+0x28]; ret
        assert_eq!(at_last(&[0x48, 0x8d, 0x64, 0x24, 0x28, 0xc3]), rsp(0x28));
        // mov eax, 1 (no stack change); leave; ret
        assert_eq!(at_last(&[0xb8, 1, 0, 0, 0, 0xc9, 0xc3]), rbp(8));
        // mov rsp, rbp; pop rbp; ret
        assert_eq!(at_last(&[0x48, 0x89, 0xec, 0x5d, 0xc3]), rbp(8));
        // lea rsp, [rbp-0x28]; pop rbx; ret
        assert_eq!(at_last(&[0x48, 0x8d, 0x65, 0xd8, 0x5b, 0xc3]), rbp(-0x20));
    }

    #[test]
    fn what_is_not_followed() {
        // pop rbp; mov rsp, rbp; ret: rbp is no longer the point's.
        assert_eq!(at_last(&[0x5d, 0x48, 0x89, 0xec, 0xc3]), None);
        // mov rsp, rax; ret
        assert_eq!(at_last(&[0x48, 0x89, 0xc4, 0xc3]), None);
        // and rsp, -16; ret
        assert_eq!(at_last(&[0x48, 0x83, 0xe4, 0xf0, 0xc3]), None);
    }

    /// A jump2 padded over the filler after its `ret` covers `[0x1000, 0x100b)`: its
    /// springboard goes after that, not into its own bytes (which it would overwrite).
    #[test]
    fn springboard_not_in_the_sites_own_bytes() {
        let mut used = Boards::default();
        let planned = Ranges::default();
        let pad = [(0x1001, 0x1010)];
        let sb = springboard_in(pad.iter().copied(), (0x1000, 0x100b), &mut used, &planned);
        assert_eq!(sb, Some(0x100b));
        // The next one takes what is left, or nothing.
        let sb = springboard_in(pad.iter().copied(), (0x1000, 0x1001), &mut used, &planned);
        assert_eq!(sb, Some(0x1001));
        let again = |used: &mut Boards| {
            springboard_in(pad.iter().copied(), (0x1000, 0x1001), used, &planned)
        };
        assert_eq!(again(&mut used), Some(0x1006));
        assert_eq!(again(&mut used), None);
        assert_eq!(used.list, [(0x100b, 0x1010), (0x1001, 0x1006), (0x1006, 0x100b)]);
    }

    fn site(kind: SpliceKind, point: u64, len: usize) -> SitePlan {
        SitePlan {
            first: 0,
            members: vec![0],
            plan: Plan {
                kind,
                reason: None,
                displaced: Displaced { point, insns: Vec::new(), len },
                springboard: None,
            },
            live: LiveAt::ALL,
            stacks: Vec::new(),
        }
    }

    #[test]
    fn a_plan_whose_bytes_overlap_is_refused() {
        let ok = [site(SpliceKind::Jump5, 0x1000, 16), site(SpliceKind::Trap, 0x1010, 3)];
        assert!(check_disjoint(&ok, &[(0x1020, 0x1025)]).is_ok());
        // A trap inside a jump's padded bytes (libLLVM-14, before table exits stopped
        // starting functions in padding).
        let bad = [site(SpliceKind::Jump5, 0x1063, 13), site(SpliceKind::Trap, 0x106c, 1)];
        let e = check_disjoint(&bad, &[]).unwrap_err().to_string();
        assert!(e.contains("Jump5 splice [0x1063, 0x1070)") && e.contains("Trap splice"), "{e}");
        // A springboard in a site's bytes, in any order of the sites.
        let bad = [site(SpliceKind::Trap, 0x2000, 1), site(SpliceKind::Jump2, 0x1000, 11)];
        let e = check_disjoint(&bad, &[(0x1001, 0x1006)]).unwrap_err().to_string();
        assert!(e.contains("springboard [0x1001, 0x1006)"), "{e}");
    }
}
