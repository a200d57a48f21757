//! Counting probes in a live process (KernInst §3.3–3.4, Djprobe; DESIGN.md §3–5): code heap
//! and shared data heap near each module, a code patch per point, the splice written in one
//! batch while every thread is stopped and out of the way, and removal that restores every
//! byte and verifies it.

use crate::load::AnalyzedImage;
use crate::spec::Point;
use kerf_analysis::cfg::{Cfg, FuncId, Terminator};
use kerf_codegen::{lower, trap, Env, LiveAt, Primitive};
use kerf_patch::{
    build_patch, jump2_bytes, jump5_bytes, plan_jump2, plan_jump5, plan_trap, Displaced,
    FunctionView, SpliceKind, INT3, SPRINGBOARD_LEN,
};
use kerf_target::ptrace::{Pause, SharedMem, Tracee};
use kerf_target::TargetError;
use std::fmt;
use std::time::Duration;

/// Bytes of code heap reserved per point (snippet, displaced instructions, jump back).
const PATCH_SLOT: u64 = 128;
/// Bytes of data heap per point: one cache line, so threads counting different points do not
/// share one.
const DATA_SLOT: usize = 64;
/// Room for the trap dispatcher's code and a `struct sigaction` scratch area.
const DISPATCHER_ROOM: u64 = 1024;
/// Stack bytes above each thread's `rsp` searched for return addresses into displaced bytes.
const STACK_SCAN: usize = 16 * 1024;
/// Tries before a point whose bytes some thread keeps sitting in is given up.
const MAX_TRIES: usize = 200;
/// Splices written per stop of the target: each costs three /proc/PID/mem accesses, and a
/// batch must keep the target's pause well under a millisecond (DESIGN.md §4).
const BATCH: usize = 32;

const PROT_RWX: i32 = libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC;
const SIGTRAP: u64 = trap::SIGTRAP as u64;
const SYS_RT_SIGACTION: i64 = trap::SYS_RT_SIGACTION as i64;

#[derive(Debug)]
pub enum InstrumentError {
    Target(TargetError),
    /// A point that cannot be spliced at all, with why.
    Point {
        label: String,
        addr: u64,
        detail: String,
    },
    /// Bytes in the target that are not what kerf wrote or expected.
    Mismatch {
        addr: u64,
        detail: String,
    },
}

impl fmt::Display for InstrumentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstrumentError::Target(e) => write!(f, "{e}"),
            InstrumentError::Point { label, addr, detail } => {
                write!(f, "cannot instrument {label} at {addr:#x}: {detail}")
            }
            InstrumentError::Mismatch { addr, detail } => write!(f, "bytes at {addr:#x}: {detail}"),
        }
    }
}

impl std::error::Error for InstrumentError {}

impl From<TargetError> for InstrumentError {
    fn from(e: TargetError) -> Self {
        InstrumentError::Target(e)
    }
}

/// One installed probe.
#[derive(Clone, Debug)]
pub struct Installed {
    pub spec: String,
    pub label: String,
    pub addr: u64,
    pub kind: SpliceKind,
    /// Why a stronger kind was refused.
    pub reason: Option<String>,
    original: Vec<u8>,
    splice: Vec<u8>,
    module: usize,
    slot: usize,
    /// The splice is written in the target.
    live: bool,
    /// For jump2: the springboard's address, the padding it replaced, and its bytes.
    springboard: Option<(u64, Vec<u8>, Vec<u8>)>,
}

/// The heaps kerf mapped next to one module.
struct Heaps {
    code: u64,
    code_len: u64,
    used: u64,
    data: SharedMem,
}

/// Counters spliced into a live process.
pub struct Instrumentation {
    pid: i32,
    points: Vec<Installed>,
    heaps: Vec<Option<Heaps>>,
    /// Trap dispatcher: its code heap module, the sigaction it replaced (kernel layout).
    trap: Option<(usize, [u64; 4])>,
    /// Padding taken by springboards, `[start, end)` in the target.
    springboards: Vec<(u64, u64)>,
    /// The longest time every thread was held stopped, over all batches.
    pub longest_pause: Duration,
    removed: bool,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Options {
    /// Use this kind for every point (for testing); a point that cannot take it fails.
    pub force_kind: Option<SpliceKind>,
}

fn function_view<'a>(
    cfg: &'a Cfg,
    f: FuncId,
    bias: u64,
    starts: &'a mut Vec<u64>,
) -> FunctionView<'a> {
    let fun = cfg.function(f);
    starts.clear();
    starts.extend(cfg.blocks_of(f).iter().map(|b| b.start.0 + bias));
    FunctionView {
        name: &fun.name,
        extent: fun.extent.start + bias..fun.extent.end + bias,
        block_starts: starts,
        has_unanalysable_jump: cfg.blocks_of(f).iter().any(|b| b.term == Terminator::Unanalysable),
    }
}

/// What is live at a point: the block's live-in at a block start, everything otherwise.
fn live_at(cfg: &Cfg, f: FuncId, addr: u64) -> LiveAt {
    match cfg.block_containing(f, kerf_arch::ImageAddr(addr)).map(|b| cfg.block(b)) {
        Some(b) if b.start.0 == addr => LiveAt { regs: b.live_in, flags: b.flags_live_in },
        _ => LiveAt::ALL,
    }
}

impl Instrumentation {
    /// Splice a counter at every point of process `pid`, whose modules are `modules`.
    pub fn install(
        pid: i32,
        modules: &[AnalyzedImage],
        points: &[Point],
        opts: Options,
    ) -> Result<Instrumentation, InstrumentError> {
        let mut inst = Instrumentation {
            pid,
            points: Vec::new(),
            heaps: (0..modules.len()).map(|_| None).collect(),
            trap: None,
            springboards: Vec::new(),
            longest_pause: Duration::ZERO,
            removed: false,
        };
        if let Err(e) = inst.prepare(modules, points, opts) {
            // Nothing is spliced yet: put back the SIGTRAP action if the dispatcher went in,
            // free what was mapped and let the target go.
            inst.removed = true;
            if let Ok(mut tr) = Tracee::stop_all(pid) {
                let _ = inst.uninstall_dispatcher(&mut tr);
                let _ = inst.restore_springboards(&tr);
                inst.free_heaps(&mut tr);
                let _ = tr.resume_detach();
            }
            return Err(e);
        }
        let todo = (0..inst.points.len()).collect();
        inst.splice_all(todo)?;
        Ok(inst)
    }

    fn note(&mut self, p: Pause) {
        self.longest_pause = self.longest_pause.max(p.held);
    }

    pub fn points(&self) -> &[Installed] {
        &self.points
    }

    /// The current count of point `i`, read from the shared data heap (no system call).
    pub fn count(&self, i: usize) -> u64 {
        let p = &self.points[i];
        self.heaps[p.module].as_ref().map_or(0, |h| h.data.load_u64(p.slot))
    }

    /// Step 1: heaps, code patches and (for traps) the dispatcher, all written while the
    /// target is stopped and before anything can reach them.
    fn prepare(
        &mut self,
        modules: &[AnalyzedImage],
        points: &[Point],
        opts: Options,
    ) -> Result<(), InstrumentError> {
        let mut tr = Tracee::stop_all(self.pid)?;
        let r = self.alloc_heaps(&mut tr, modules, points);
        self.note(tr.resume_detach()?);
        r?;
        // Patches are unreachable until their splices exist, so they are written in small
        // batches, each under its own short stop.
        let mut slots = vec![0usize; modules.len()];
        for chunk in points.chunks(BATCH) {
            let tr = Tracee::stop_all(self.pid)?;
            let r = self.write_patches(&tr, modules, chunk, opts, &mut slots);
            self.note(tr.resume_detach()?);
            r?;
        }
        if self.points.iter().any(|p| p.kind == SpliceKind::Trap) {
            let mut tr = Tracee::stop_all(self.pid)?;
            let r = self.install_dispatcher(&mut tr);
            self.note(tr.resume_detach()?);
            r?;
        }
        Ok(())
    }

    /// Code and data heaps next to every module that has points.
    fn alloc_heaps(
        &mut self,
        tr: &mut Tracee,
        modules: &[AnalyzedImage],
        points: &[Point],
    ) -> Result<(), InstrumentError> {
        let mut per_module = vec![0usize; modules.len()];
        for p in points {
            per_module[p.module] += 1;
        }
        for (m, n) in per_module.iter().enumerate() {
            if *n == 0 {
                continue;
            }
            let bias = modules[m].bias.unwrap_or(0);
            let near = modules[m].analysis.cfg.functions.first().map_or(bias, |f| f.entry.0 + bias);
            let code_len = (*n as u64 * PATCH_SLOT + DISPATCHER_ROOM + trap::data_len(*n))
                .next_multiple_of(4096);
            let code = tr.alloc_near(near, code_len, PROT_RWX)?;
            let data = tr.share_near(code, ((*n * DATA_SLOT) as u64).next_multiple_of(4096))?;
            self.heaps[m] = Some(Heaps { code, code_len, used: 0, data });
        }
        Ok(())
    }

    /// Plan each point's splice and write its code patch.
    fn write_patches(
        &mut self,
        tr: &Tracee,
        modules: &[AnalyzedImage],
        points: &[Point],
        opts: Options,
        slots: &mut [usize],
    ) -> Result<(), InstrumentError> {
        let mut starts = Vec::new();
        for p in points {
            let a = &modules[p.module].analysis;
            let bias = modules[p.module].bias.unwrap_or(0);
            let addr = p.addr.0 + bias;
            let mut live = [0u8; 32];
            tr.read(addr, &mut live)?;
            let view = function_view(&a.cfg, p.func, bias, &mut starts);
            let refuse =
                |detail: String| InstrumentError::Point { label: p.label.clone(), addr, detail };
            // The strongest kind the point can take: jump5, else jump2 to a springboard in
            // padding within reach, else trap; each refusal is kept as the reason.
            let jump2 = |why: String, sb: &mut dyn FnMut() -> Option<u64>| {
                plan_jump2(&live, addr, addr, &view)
                    .map_err(|r| format!("{why}; jump2: {r}"))
                    .and_then(|d| {
                        sb().map(|s| (d, s)).ok_or(format!("{why}; jump2: no padding within reach"))
                    })
            };
            let pads = &modules[p.module].analysis.cfg.padding;
            let used = &mut self.springboards;
            let mut find_sb = || springboard_near(pads, bias, addr, used);
            let (kind, reason, displaced, sb): (
                SpliceKind,
                Option<String>,
                Displaced,
                Option<u64>,
            ) = match opts.force_kind {
                Some(SpliceKind::Trap) => (
                    SpliceKind::Trap,
                    Some("forced".into()),
                    plan_trap(&live, addr, addr).map_err(|r| refuse(r.to_string()))?,
                    None,
                ),
                Some(SpliceKind::Jump5) => (
                    SpliceKind::Jump5,
                    None,
                    plan_jump5(&live, addr, addr, &view).map_err(|r| refuse(r.to_string()))?,
                    None,
                ),
                Some(SpliceKind::Jump2) => {
                    let (d, s) = jump2("forced".into(), &mut find_sb).map_err(refuse)?;
                    (SpliceKind::Jump2, Some("forced".into()), d, Some(s))
                }
                None => match plan_jump5(&live, addr, addr, &view) {
                    Ok(d) => (SpliceKind::Jump5, None, d, None),
                    Err(r) => match jump2(r.to_string(), &mut find_sb) {
                        Ok((d, s)) => (SpliceKind::Jump2, Some(r.to_string()), d, Some(s)),
                        Err(why) => (
                            SpliceKind::Trap,
                            Some(why.clone()),
                            plan_trap(&live, addr, addr)
                                .map_err(|t| refuse(format!("{why}; and no trap: {t}")))?,
                            None,
                        ),
                    },
                },
            };
            let h =
                self.heaps[p.module].as_mut().expect("heap mapped for every module with points");
            let slot = slots[p.module] * DATA_SLOT;
            slots[p.module] += 1;
            let patch_at = h.code + h.used;
            let snippet = lower(
                &[Primitive::Count { slot: h.data.remote() + slot as u64 }],
                live_at(&a.cfg, p.func, p.addr.0),
                Env::User,
            );
            let code =
                build_patch(patch_at, &snippet, &displaced).map_err(|e| refuse(e.to_string()))?;
            if code.len() as u64 > PATCH_SLOT {
                return Err(refuse(format!("code patch of {} bytes", code.len())));
            }
            tr.write(patch_at, &code)?;
            h.used += PATCH_SLOT;
            let mut springboard = None;
            let splice = match (kind, sb) {
                (SpliceKind::Jump5, _) => jump5_bytes(addr, patch_at, displaced.len)
                    .ok_or_else(|| refuse("patch out of reach".into()))?,
                (SpliceKind::Jump2, Some(sb)) => {
                    // The springboard goes into padding no path executes, before anything
                    // can reach it.
                    let jmp = jump5_bytes(sb, patch_at, SPRINGBOARD_LEN as usize)
                        .ok_or_else(|| refuse("patch out of reach of the springboard".into()))?;
                    let mut pad = vec![0u8; jmp.len()];
                    tr.read(sb, &mut pad)?;
                    write_verified(tr, sb, &pad, &jmp)?;
                    springboard = Some((sb, pad, jmp));
                    jump2_bytes(addr, sb, displaced.len)
                        .ok_or_else(|| refuse("springboard out of reach".into()))?
                }
                _ => vec![INT3],
            };
            self.points.push(Installed {
                spec: p.spec.clone(),
                label: p.label.clone(),
                addr,
                kind,
                reason,
                original: live[..splice.len()].to_vec(),
                splice,
                module: p.module,
                slot,
                live: false,
                springboard,
            });
        }
        Ok(())
    }

    /// The SIGTRAP dispatcher and its table, then the handler, chaining to the old one.
    fn install_dispatcher(&mut self, tr: &mut Tracee) -> Result<(), InstrumentError> {
        let m =
            self.points.iter().find(|p| p.kind == SpliceKind::Trap).map(|p| p.module).unwrap_or(0);
        let h = self.heaps[m].as_mut().expect("heap of a module with traps");
        let code_at = h.code + h.used;
        let data_at = code_at + DISPATCHER_ROOM - 64;
        let table_at = data_at + 64;
        let (code, restorer) = trap::dispatcher(code_at, table_at)
            .map_err(|e| InstrumentError::Mismatch { addr: code_at, detail: e.to_string() })?;
        tr.write(code_at, &code)?;
        // Table: sorted (point, patch) pairs of every trap point. Patches were laid out in
        // point order within each module's heap.
        let mut entries: Vec<(u64, u64)> = Vec::new();
        let mut index_in_module = vec![0u64; self.heaps.len()];
        for p in &self.points {
            let base = self.heaps[p.module].as_ref().map_or(0, |h| h.code);
            let patch = base + index_in_module[p.module] * PATCH_SLOT;
            index_in_module[p.module] += 1;
            if p.kind == SpliceKind::Trap {
                entries.push((p.addr, patch));
            }
        }
        entries.sort_unstable();
        let mut table = Vec::with_capacity(trap::data_len(entries.len()) as usize);
        table.extend_from_slice(&0u64.to_le_bytes()); // old handler, filled below
        table.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        for (a, b) in &entries {
            table.extend_from_slice(&a.to_le_bytes());
            table.extend_from_slice(&b.to_le_bytes());
        }
        tr.write(table_at, &table)?;
        // The new action, and room after it for the old one.
        let act = trap::sigaction(code_at, restorer);
        let act_bytes: Vec<u8> = act.iter().flat_map(|v| v.to_le_bytes()).collect();
        tr.write(data_at, &act_bytes)?;
        let old_at = data_at + 32;
        let r = tr.syscall(SYS_RT_SIGACTION, [SIGTRAP, data_at, old_at, 8, 0, 0])?;
        if r != 0 {
            return Err(InstrumentError::Mismatch {
                addr: data_at,
                detail: format!("rt_sigaction failed: {r}"),
            });
        }
        let mut old = [0u8; 32];
        tr.read(old_at, &mut old)?;
        let old: [u64; 4] = std::array::from_fn(|k| {
            u64::from_le_bytes(old[k * 8..k * 8 + 8].try_into().unwrap_or_default())
        });
        tr.write(table_at, &old[0].to_le_bytes())?;
        let h = self.heaps[m].as_mut().expect("heap");
        h.used += DISPATCHER_ROOM + trap::data_len(entries.len()).next_multiple_of(64);
        self.trap = Some((m, old));
        Ok(())
    }

    /// Step 2: write the splices, in batches while every thread is stopped, skipping (and
    /// retrying later) points where a thread's PC or a stacked return address lies inside the
    /// bytes to be replaced (Djprobe's freeze check).
    fn splice_all(&mut self, mut todo: Vec<usize>) -> Result<(), InstrumentError> {
        let mut tries = 0;
        while !todo.is_empty() && tries < MAX_TRIES {
            let tr = Tracee::stop_all(self.pid)?;
            let busy = busy_ranges(&tr)?;
            let mut later = Vec::new();
            let batch: Vec<usize> = todo.drain(..todo.len().min(BATCH)).collect();
            for i in batch {
                let p = self.points[i].clone();
                let (lo, hi) = (p.addr + 1, p.addr + p.splice.len() as u64);
                if busy.iter().any(|v| *v >= lo && *v < hi) {
                    later.push(i);
                    continue;
                }
                write_verified(&tr, p.addr, &p.original, &p.splice)?;
                self.points[i].live = true;
            }
            let pause: Pause = tr.resume_detach()?;
            self.longest_pause = self.longest_pause.max(pause.held);
            if !later.is_empty() {
                // Give the threads in the way a moment to move on, then try those again.
                tries += 1;
                todo.extend(later);
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        if todo.is_empty() {
            return Ok(());
        }
        let p = &self.points[todo[0]];
        Err(InstrumentError::Point {
            label: p.label.clone(),
            addr: p.addr,
            detail: "a thread stayed inside the bytes to replace".into(),
        })
    }

    /// Restore every spliced byte (verified), let pending traps drain, put the old SIGTRAP
    /// action back, wait until no thread runs in a code patch, and unmap the heaps. A target
    /// that has exited needs nothing.
    pub fn remove(mut self) -> Result<(), InstrumentError> {
        self.removed = true;
        let gone = |e: &TargetError| matches!(e, TargetError::NoSuchProcess { .. });
        // In batches, like the splicing: each restored point is whole and consistent.
        let live: Vec<usize> = (0..self.points.len()).filter(|i| self.points[*i].live).collect();
        for batch in live.chunks(BATCH) {
            let tr = match Tracee::stop_all(self.pid) {
                Ok(t) => t,
                Err(e) if gone(&e) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            for &i in batch {
                let p = &self.points[i];
                write_verified(&tr, p.addr, &p.splice, &p.original)?;
            }
            let pause = tr.resume_detach()?;
            self.longest_pause = self.longest_pause.max(pause.held);
            for &i in batch {
                self.points[i].live = false;
            }
        }
        // Threads that hit an int3 just before it went have a SIGTRAP on its way to the
        // dispatcher, which still routes it to the patch; give them time to take it.
        std::thread::sleep(Duration::from_millis(20));
        for _ in 0..MAX_TRIES {
            let mut tr = match Tracee::stop_all(self.pid) {
                Ok(t) => t,
                Err(e) if gone(&e) => return Ok(()),
                Err(e) => return Err(e.into()),
            };
            // A PC in a code patch, or a value on a stack that points into one (the saved PC
            // of a signal frame when a handler interrupted a thread inside a patch).
            let busy = busy_ranges(&tr)?;
            let in_patch = self
                .heaps
                .iter()
                .flatten()
                .map(|h| (h.code, h.code + h.code_len))
                .chain(self.springboards.iter().copied())
                .any(|(lo, hi)| busy.iter().any(|v| *v >= lo && *v < hi));
            // A thread that hit an int3 before it was removed but has not taken the SIGTRAP
            // yet (descheduled, on a loaded machine) needs the dispatcher still in place.
            let trap_in_flight = self.trap.is_some()
                && tr.threads().iter().any(|t| tr.signal_pending(*t, SIGTRAP as i32));
            if in_patch || trap_in_flight {
                tr.resume_detach()?;
                std::thread::sleep(Duration::from_millis(2));
                continue;
            }
            self.uninstall_dispatcher(&mut tr)?;
            // Springboards last: no splice leads to them any more and no thread is in one.
            self.restore_springboards(&tr)?;
            self.free_heaps(&mut tr);
            tr.resume_detach()?;
            return Ok(());
        }
        Err(InstrumentError::Mismatch {
            addr: 0,
            detail: "a thread stayed inside a code patch".into(),
        })
    }

    /// Put the padding back where springboards were written (their splices must be gone).
    fn restore_springboards(&mut self, tr: &Tracee) -> Result<(), InstrumentError> {
        for p in self.points.iter_mut() {
            if let Some((sb, pad, jmp)) = p.springboard.take() {
                write_verified(tr, sb, &jmp, &pad)?;
            }
        }
        self.springboards.clear();
        Ok(())
    }

    /// Give SIGTRAP back the action it had before the dispatcher.
    fn uninstall_dispatcher(&mut self, tr: &mut Tracee) -> Result<(), InstrumentError> {
        let Some((m, old)) = self.trap.take() else { return Ok(()) };
        let h = self.heaps[m].as_ref().expect("the dispatcher's heap outlives it");
        let scratch = h.code + h.code_len - 64;
        let bytes: Vec<u8> = old.iter().flat_map(|v| v.to_le_bytes()).collect();
        tr.write(scratch, &bytes)?;
        tr.syscall(SYS_RT_SIGACTION, [SIGTRAP, scratch, 0, 8, 0, 0])?;
        Ok(())
    }

    fn free_heaps(&mut self, tr: &mut Tracee) {
        for h in self.heaps.iter_mut().filter_map(Option::take) {
            let _ = tr.free(h.code, h.code_len);
            let _ = tr.free(h.data.remote(), h.data.len() as u64);
        }
    }
}

impl Drop for Instrumentation {
    /// Every exit path restores the target: an instrumentation dropped without `remove`
    /// (an error or a panic unwinding) removes itself.
    fn drop(&mut self) {
        if !self.removed {
            let me = Instrumentation {
                pid: self.pid,
                points: std::mem::take(&mut self.points),
                heaps: std::mem::take(&mut self.heaps),
                trap: self.trap.take(),
                springboards: std::mem::take(&mut self.springboards),
                longest_pause: self.longest_pause,
                removed: false,
            };
            self.removed = true;
            let _ = me.remove();
        }
    }
}

/// Five bytes of padding for a springboard within `jmp rel8` reach of `point` (so that
/// `point + 2 - 128 <= sb <= point + 2 + 127`), not yet used. `pads` are the module's padding
/// runs in image addresses, `bias` its load bias.
fn springboard_near(
    pads: &[kerf_analysis::cfg::Padding],
    bias: u64,
    point: u64,
    used: &mut Vec<(u64, u64)>,
) -> Option<u64> {
    let (lo, hi) = ((point + 2).saturating_sub(128), point + 2 + 127);
    for pad in pads {
        let (start, end) = (pad.start.0 + bias, pad.start.0 + bias + pad.len as u64);
        let mut sb = start.max(lo);
        while sb + SPRINGBOARD_LEN <= end && sb <= hi {
            match used.iter().find(|(a, b)| sb < *b && *a < sb + SPRINGBOARD_LEN) {
                Some((_, b)) => sb = *b,
                None => {
                    used.push((sb, sb + SPRINGBOARD_LEN));
                    return Some(sb);
                }
            }
        }
    }
    None
}

/// Write `new` at `addr` after checking the bytes there are `old`, then read it back.
fn write_verified(tr: &Tracee, addr: u64, old: &[u8], new: &[u8]) -> Result<(), InstrumentError> {
    let mut cur = vec![0u8; old.len()];
    tr.read(addr, &mut cur)?;
    if cur != old {
        return Err(InstrumentError::Mismatch {
            addr,
            detail: format!("expected {old:02x?}, found {cur:02x?} (changed by someone else?)"),
        });
    }
    tr.write(addr, new)?;
    let mut back = vec![0u8; new.len()];
    tr.read(addr, &mut back)?;
    if back != new {
        return Err(InstrumentError::Mismatch {
            addr,
            detail: format!("wrote {new:02x?}, read back {back:02x?}"),
        });
    }
    Ok(())
}

/// Every thread's PC and every 8-byte value in the top of its stack: addresses some thread may
/// execute or return to next.
fn busy_ranges(tr: &Tracee) -> Result<Vec<u64>, InstrumentError> {
    let mut v = Vec::new();
    let mut stack = vec![0u8; STACK_SCAN];
    for &t in tr.threads() {
        let r = tr.regs(t)?;
        v.push(r.rip);
        // A short read at the top of the stack mapping is fine: scan what there is.
        let mut len = STACK_SCAN;
        while len >= 64 && tr.read(r.rsp, &mut stack[..len]).is_err() {
            len /= 2;
        }
        if len >= 64 {
            v.extend(
                stack[..len]
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default())),
            );
        }
    }
    Ok(v)
}
