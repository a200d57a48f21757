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

use crate::load::AnalyzedImage;
use kerf_analysis::cfg::FuncId;
use kerf_arch::RemoteAddr;
use kerf_codegen::{At, Env, LiveAt, ThreadPointer};
use kerf_jit::table::Hash;
use kerf_jit::{closure, Layout, Module, Plugin, Region, Scope, Table, Translation};
use kerf_os::ptrace::{RegsExt, RemoteMem, TargetMemory, REACH};
use kerf_os::{SharedMem, TargetError, Tracee};
use rayon::prelude::*;
use std::collections::HashSet;
use std::fmt;
use std::time::{Duration, Instant};

const PROT_RX: i32 = libc::PROT_READ | libc::PROT_EXEC;
/// Code bytes a plugin may weave in at one block, for sizing the cache.
const PLUGIN_ROOM: u64 = 96;
/// Stops tried before a root's entry is given up because a thread stays inside its bytes.
const SPLICE_TRIES: usize = 20;
/// Single-steps allowed to bring one thread to a clean point (the longest sequence between
/// two clean points is a lookup: about 20 instructions).
const MAX_STEPS: usize = 64;

/// How the region is chosen.
#[derive(Clone, Copy, Debug)]
pub struct JitOptions {
    /// At most this many functions from the walk.
    pub budget: usize,
    /// Every function of every module (and the vDSO), so that calls through function
    /// pointers find a translation.
    pub whole_modules: bool,
}

impl Default for JitOptions {
    fn default() -> Self {
        JitOptions { budget: 1_000_000, whole_modules: true }
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
        }
    }
}

impl std::error::Error for JitFail {}

impl From<TargetError> for JitFail {
    fn from(e: TargetError) -> Self {
        JitFail::Target(e)
    }
}

/// One module's cache in the target.
pub struct Cache {
    pub module: usize,
    pub code: RemoteAddr,
    pub room: u64,
    pub data: SharedMem,
    pub translation: Translation,
}

/// A root's entry splice.
struct Entry {
    label: String,
    at: RemoteAddr,
    old: Vec<u8>,
    new: Vec<u8>,
}

/// How long each step of installation took, and the region's size.
#[derive(Clone, Debug, Default)]
pub struct JitStats {
    pub region: Region,
    pub blocks: usize,
    pub code_bytes: u64,
    pub table_entries: usize,
    /// Entries whose set was full (found by the miss path's search of the overflow list),
    /// and those the overflow list had no room for (indirect transfers to them escape).
    pub crowded: usize,
    pub lost: usize,
    pub plan: Duration,
    pub translate: Duration,
    pub write: Duration,
    /// The stop that spliced the roots.
    pub splice_pause: Duration,
}

/// A JIT installed in a process.
pub struct Jit {
    pid: i32,
    pub caches: Vec<Cache>,
    table: SharedMem,
    entries: Vec<Entry>,
    pub stats: JitStats,
    /// Modules the JIT analysed itself (the vDSO), numbered after the process's.
    extra: Vec<AnalyzedImage>,
}

/// What removal did.
#[derive(Clone, Debug, Default)]
pub struct JitRemoved {
    /// Threads brought back from a cache to the original code, and single-steps it took.
    pub moved: usize,
    pub steps: usize,
    /// Mappings left because a stack may still return into them (a signal frame's saved PC).
    pub kept: Vec<(u64, u64)>,
}

/// The span `[lo, hi)` of original addresses a module occupies.
fn span(m: &AnalyzedImage) -> (u64, u64) {
    let bias = m.bias.unwrap_or(0);
    let lo = m.segments.iter().map(|s| s.vaddr.0).min().unwrap_or(0);
    let hi = m.segments.iter().map(|s| s.vaddr.0 + s.memsz).max().unwrap_or(0);
    (lo + bias, hi + bias)
}

fn modules_of<'a>(images: &[&'a AnalyzedImage]) -> Vec<Module<'a>> {
    images
        .iter()
        .map(|&m| Module { cfg: &m.analysis.cfg, mem: m, bias: m.bias.unwrap_or(0) })
        .collect()
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
    let mem: RemoteMem = {
        let tr = Tracee::stop_all(pid)?;
        let m = tr.memory();
        tr.resume_detach()?;
        m
    };
    let extra: Vec<AnalyzedImage> = vdso_image(pid, &mem).into_iter().collect();
    let all: Vec<&AnalyzedImage> = images.iter().chain(&extra).collect();
    let images = &all[..];
    let mods = modules_of(images);
    let slot = |a: u64| {
        let mut b = [0u8; 8];
        mem.read(RemoteAddr(a), &mut b).ok().map(|()| u64::from_le_bytes(b))
    };
    let starts: Vec<(usize, FuncId)> = roots.iter().map(|r| (r.module, r.func)).collect();
    let mut region = closure(&mods, &starts, &slot, opts.budget, opts.whole_modules);
    if opts.whole_modules {
        // The vDSO is reached only through pointers libc loads at run time: all of it.
        let own = images.len() - extra.len();
        for (k, m) in images.iter().enumerate().skip(own) {
            let n = m.analysis.cfg.functions.len() as u32;
            region.funcs[k] = (0..n).map(FuncId).collect();
        }
    }
    let mut stats = JitStats { plan: t0.elapsed(), ..JitStats::default() };

    // 1. Map a cache and a data area within reach of each module of the region, and the table.
    let mut tr = Tracee::stop_all(pid)?;
    let hwcap2 = tr.auxv(26).ok().flatten().unwrap_or(0);
    // The thread that owns the block words (see `DATA_OWNER`): the main thread.
    let owner = tr.regs(pid).map(|r| r.fs_base).unwrap_or(0);
    let thread = if hwcap2 & 2 != 0 { ThreadPointer::FsBase } else { ThreadPointer::FsSelf };
    let mut caches = Vec::new();
    let mut table = None;
    let mapped = (|| -> Result<(), TargetError> {
        let exe = images.first().map_or(0, |m| span(m).0);
        table = Some(tr.share_near(RemoteAddr(exe), kerf_jit::table::TABLE_BYTES, 0)?);
        for (k, funcs) in region.funcs.iter().enumerate() {
            if funcs.is_empty() {
                continue;
            }
            let (lo, hi) = span(images[k]);
            let room = kerf_jit::room_for(&mods[k], funcs, PLUGIN_ROOM);
            let window_lo = RemoteAddr(hi.saturating_sub(REACH));
            let window_hi = RemoteAddr(lo.saturating_add(REACH));
            let code = tr.alloc_within(window_lo, window_hi, RemoteAddr(hi), room, PROT_RX)?;
            let data_len = kerf_jit::data_for(&mods[k], funcs);
            let data = tr.share_near(code, data_len, data_len)?;
            caches.push((k, code, room, data));
        }
        Ok(())
    })();
    let table = match (mapped, table.take()) {
        (Ok(()), Some(t)) => t,
        (Ok(()), None) => unreachable!("the table is mapped first"),
        (Err(e), mut table) => {
            // Whatever was mapped before the failure goes again.
            for (_, code, room, data) in caches.drain(..) {
                let _ = tr.free(code, room);
                let _ = tr.free(data.remote(), data.len() as u64);
            }
            if let Some(t) = table.take() {
                let _ = tr.free(t.remote(), t.len() as u64);
            }
            let _ = tr.resume_detach();
            return Err(e.into());
        }
    };
    tr.resume_detach()?;

    // 2. Translate while the process runs.
    let t1 = Instant::now();
    let at = At::new(LiveAt::ALL, Env::User, thread, 0);
    // kerf runs on the target's machine: its CPU's features are the target's.
    let hash = if std::arch::is_x86_feature_detected!("bmi2") { Hash::Mixed } else { Hash::Low16 };
    let root_entries: HashSet<u64> = roots
        .iter()
        .map(|r| images[r.module].analysis.cfg.function(r.func).entry.0 + mods[r.module].bias)
        .collect();
    // Modules in parallel, the biggest first.
    let mut caches = caches;
    caches.sort_by_key(|c| std::cmp::Reverse(c.2));
    let results: Vec<(Cache, Option<JitFail>)> = caches
        .into_par_iter()
        .map(|(k, code, room, data)| {
            let layout =
                Layout { code: code.0, room, table: table.remote().0, hash, data: data.remote().0 };
            let name = images[k].path.display().to_string();
            let reached: HashSet<FuncId> = region.reached[k].iter().copied().collect();
            let scope = Scope { roots: &root_entries, reached: &reached };
            let funcs = &region.funcs[k];
            match kerf_jit::translate(&name, &mods[k], funcs, &layout, plugin, &at, &scope) {
                Ok(translation) => {
                    data.store_u64(kerf_jit::translate::DATA_OWNER as usize, owner);
                    // Every site predicts the way that matches nothing until it has seen one.
                    let none = data.remote().0 + kerf_jit::translate::DATA_NO_WAY;
                    let base = data.remote().0;
                    for w in translation.preds.clone().step_by(8) {
                        data.store_u64((w - base) as usize, none);
                    }
                    (Cache { module: k, code, room, data, translation }, None)
                }
                Err(e) => {
                    let translation = Translation::default();
                    (
                        Cache { module: k, code, room, data, translation },
                        Some(JitFail::Translate(e)),
                    )
                }
            }
        })
        .collect();
    let mut failed = None;
    let mut done = Vec::with_capacity(results.len());
    for (c, e) in results {
        failed = failed.or(e);
        done.push(c);
    }
    done.sort_by_key(|c| c.module);
    stats.translate = t1.elapsed();
    let mut jit = Jit { pid, caches: done, table, entries: Vec::new(), stats, extra: Vec::new() };
    if let Some(e) = failed {
        let _ = jit.unmap();
        return Err(e);
    }

    // 3. Write the caches (no thread can be in them: nothing leads there yet) and the table.
    let t2 = Instant::now();
    let mut t = Table::new(hash);
    for c in &jit.caches {
        mem.write(c.code, &c.translation.code)?;
        jit.stats.blocks += c.translation.blocks.len();
        jit.stats.code_bytes += c.translation.code.len() as u64;
    }
    // Function entries and return sites first: if sets fill up, rarer targets are left out.
    let mut all: Vec<kerf_jit::Entry> =
        jit.caches.iter().flat_map(|c| c.translation.entries.iter().copied()).collect();
    all.sort_by_key(|e| e.rank);
    for e in all {
        t.insert(e.orig, e.entry, e.cont);
    }
    jit.table.write_bytes(0, &t.bytes());
    jit.stats.table_entries = t.entries;
    if let Some(dir) = std::env::var_os("KERF_JIT_DUMP") {
        dump(std::path::Path::new(&dir), images, &jit, &t);
    }
    jit.stats.write = t2.elapsed();
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
    if let Err(e) = jit.splice_entries(&mem, entries) {
        let _ = jit.unmap();
        return Err(e);
    }
    jit.extra = extra;
    Ok(jit)
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
        .find(|c| c.module == r.module)
        .and_then(|c| c.translation.cache_of(entry))
        .ok_or_else(|| why("its entry block has no translation".into()))?;
    let mut starts: Vec<u64> = cfg.blocks_of(r.func).iter().map(|b| b.start.0 + bias).collect();
    starts.sort_unstable();
    let view = kerf_patch::FunctionView {
        name: &f.name,
        extent: f.extent.start + bias..f.extent.end + bias,
        block_starts: &starts,
        has_unanalysable_jump: cfg
            .blocks_of(r.func)
            .iter()
            .any(|b| b.term == kerf_analysis::cfg::Terminator::Unanalysable),
    };
    let d = kerf_patch::plan_jump5(bytes, base.0 + bias, entry, &view)
        .map_err(|e| why(e.to_string()))?;
    let off = (f.entry.0 - base.0) as usize;
    let old = bytes[off..off + d.len].to_vec();
    let new = kerf_patch::jump5_bytes(entry, target, d.len)
        .ok_or_else(|| why("its translation is out of a rel32's reach".into()))?;
    Ok(Entry { label: r.label.clone(), at: RemoteAddr(entry), old, new })
}

impl Jit {
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// Module `k` of a cache: one of the process's `images`, or one the JIT analysed itself.
    pub fn image<'a>(&'a self, images: &'a [AnalyzedImage], k: usize) -> &'a AnalyzedImage {
        images.get(k).unwrap_or_else(|| &self.extra[k - images.len()])
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

    /// The word of a block in a cache's data area (a plugin's counter).
    pub fn word(&self, cache: usize, word: u64) -> u64 {
        let c = &self.caches[cache];
        c.data.load_u64((word - c.data.remote().0) as usize)
    }

    /// Write the entry splices with every thread stopped and none inside their bytes (after
    /// the first), trying again after a pause while one is.
    fn splice_entries(&mut self, mem: &RemoteMem, entries: Vec<Entry>) -> Result<(), JitFail> {
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
                    Err(x) => err = Some(x),
                }
            }
            self.entries = written;
            self.stats.splice_pause = t.elapsed();
            tr.resume_detach()?;
            return match err {
                Some(e) => Err(e),
                None => Ok(()),
            };
        }
        unreachable!("the last attempt returns")
    }

    /// Unmap everything kerf mapped (nothing may lead into it any more).
    fn unmap(&mut self) -> Result<(), JitFail> {
        let mut tr = Tracee::stop_all(self.pid)?;
        for c in &self.caches {
            let _ = tr.free(c.code, c.room);
            let _ = tr.free(c.data.remote(), c.data.len() as u64);
        }
        let _ = tr.free(self.table.remote(), self.table.len() as u64);
        tr.resume_detach()?;
        Ok(())
    }

    /// Where cache address `pc` goes back to, if it is a clean point of some cache.
    fn clean_original(&self, pc: u64) -> Option<u64> {
        self.caches.iter().find_map(|c| c.translation.clean.get(&pc).copied())
    }

    fn in_cache(&self, a: u64) -> bool {
        self.caches.iter().any(|c| a >= c.code.0 && a < c.code.0 + c.room)
    }

    /// Take the JIT out: restore the roots' entries, bring every thread in a cache back to
    /// the original address of its clean point, and unmap the caches, data and table (unless
    /// a stack still holds a cache address, which only a signal frame's saved PC can be:
    /// then they stay mapped, harmless, and are reported).
    pub fn remove(mut self) -> Result<JitRemoved, JitFail> {
        let mut tr = match Tracee::stop_all(self.pid) {
            Ok(t) => t,
            Err(TargetError::NoSuchProcess { .. }) => return Ok(JitRemoved::default()),
            Err(e) => return Err(e.into()),
        };
        let mem = tr.memory();
        let mut out = JitRemoved::default();
        let r = (|| -> Result<(), JitFail> {
            for e in self.entries.drain(..).rev() {
                write_checked(&mem, e.at, &e.new, &e.old)?;
            }
            for tid in tr.threads().to_vec() {
                let mut regs = tr.regs(tid)?;
                let mut steps = 0;
                if !self.in_cache(regs.pc().0) {
                    continue;
                }
                loop {
                    let pc = regs.pc().0;
                    if let Some(orig) = self.clean_original(pc) {
                        regs.set_pc(RemoteAddr(orig));
                        tr.set_regs(tid, &regs)?;
                        out.moved += 1;
                        break;
                    }
                    if !self.in_cache(pc) {
                        // It left through the miss path for original code.
                        out.moved += 1;
                        break;
                    }
                    if steps == MAX_STEPS {
                        return Err(JitFail::Stranded { tid, pc });
                    }
                    regs = tr.step(tid)?;
                    steps += 1;
                }
                out.steps += steps;
            }
            // A cache address left on a stack (a signal handler interrupted a thread in the
            // cache and has not returned): keep the mappings.
            let mut stack = vec![0u8; 64 * 1024];
            let mut held = false;
            for &tid in tr.threads() {
                let sp = tr.regs(tid)?.sp();
                let mut len = stack.len();
                while len >= 64 && tr.read(sp, &mut stack[..len]).is_err() {
                    len /= 2;
                }
                if len < 64 {
                    continue;
                }
                held |= stack[..len]
                    .chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                    .any(|w| self.in_cache(w));
            }
            if held {
                for c in &self.caches {
                    out.kept.push((c.code.0, c.room));
                    out.kept.push((c.data.remote().0, c.data.len() as u64));
                }
                out.kept.push((self.table.remote().0, self.table.len() as u64));
            } else {
                for c in &self.caches {
                    tr.free(c.code, c.room)?;
                    tr.free(c.data.remote(), c.data.len() as u64)?;
                }
                tr.free(self.table.remote(), self.table.len() as u64)?;
            }
            Ok(())
        })();
        let resumed = tr.resume_detach();
        r?;
        resumed?;
        Ok(out)
    }
}

/// For whoever debugs the translator (`KERF_JIT_DUMP=DIR`): each cache's bytes as
/// `cache-ADDR.bin` (read them with `objdump -D -b binary -m i386:x86-64 --adjust-vma=ADDR`),
/// and `index.txt`: each cache's module, its miss path, its exits, and the table entries
/// that went to the overflow list.
fn dump(dir: &std::path::Path, images: &[&AnalyzedImage], jit: &Jit, t: &Table) {
    use std::fmt::Write;
    let mut index = String::new();
    for c in &jit.caches {
        let _ = std::fs::write(dir.join(format!("cache-{:x}.bin", c.code.0)), &c.translation.code);
        let path = images[c.module].path.display();
        let _ = writeln!(index, "cache {:#x} miss {:#x} {path}", c.code.0, c.translation.miss);
        for (target, why) in &c.translation.exits {
            let _ = writeln!(index, "  exit {target:#x} {why:?}");
        }
    }
    for (a, e) in &t.crowded {
        let _ = writeln!(index, "overflow {a:#x} -> {e:#x}");
    }
    let _ = std::fs::write(dir.join("index.txt"), index);
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
