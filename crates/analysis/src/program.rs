//! One whole analysis of an image: function discovery, CFG construction in parallel,
//! never-returning functions, padding, call graph and liveness, with the time of each phase.

use crate::callgraph::CallGraph;
use crate::cfg::build::{is_filler, Context};
use crate::cfg::{
    build_function, BlockId, Blocks, Body, Cfg, EdgeKind, FuncCfg, FuncId, FuncOrigin, Function,
    NoSplice, NoSpliceWhy, Padding, Seed, TableId, TargetTag, Terminator,
};
use crate::image::{Binding, Image, SymbolKind};
use crate::liveness;
use crate::memory::CodeMemory;
use crate::noreturn::is_noreturn_name;
use kerf_arch::x86_64::{FlagSet, RegSet, Scanner};
use kerf_arch::ImageAddr;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Receives progress from a long analysis (a terminal progress bar, or nothing).
pub trait Progress: Sync {
    fn phase(&self, _name: &str) {}
    fn advance(&self, _done: u64, _total: u64) {}
}

/// Progress that goes nowhere.
pub struct Quiet;
impl Progress for Quiet {}

/// The counts a KernInst-style summary prints.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub functions: u64,
    pub functions_from_symbols: u64,
    pub functions_from_calls: u64,
    pub functions_from_unwind: u64,
    pub functions_from_pointers: u64,
    pub noreturn_functions: u64,
    pub blocks: u64,
    pub edges: u64,
    pub call_graph_edges: u64,
    pub instruction_bytes: u64,
    pub text_bytes: u64,
    pub jump_tables: u64,
    pub jump_table_entries: u64,
    pub unanalysable_jumps: u64,
    pub padding_runs: u64,
    pub padding_bytes: u64,
    /// Ranges no splice may touch (signal trampolines, unwind entries inside other code).
    pub no_splice_ranges: u64,
}

/// Seconds spent in each phase, in order.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Timings(pub Vec<(String, f64)>);

impl Timings {
    pub fn total(&self) -> f64 {
        self.0.iter().map(|(_, s)| s).sum()
    }
}

/// Everything known about one image's code.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Analysis {
    pub image: String,
    pub build_id: Option<Vec<u8>>,
    pub cfg: Cfg,
    pub call_graph: CallGraph,
    pub summary: Summary,
    pub timings: Timings,
}

struct Cx<'a> {
    mem: &'a dyn CodeMemory,
    /// Sorted entries of every known function.
    entries: Vec<u64>,
    noreturn: HashSet<u64>,
}

impl Context for Cx<'_> {
    fn memory(&self) -> &dyn CodeMemory {
        self.mem
    }
    fn functions_in(&self, range: std::ops::Range<u64>) -> &[u64] {
        let lo = self.entries.partition_point(|e| *e < range.start);
        let hi = self.entries.partition_point(|e| *e < range.end);
        &self.entries[lo..hi]
    }
    fn is_noreturn(&self, addr: ImageAddr) -> bool {
        self.noreturn.contains(&addr.0)
    }
}

/// Names known for one function entry, and how it became known.
struct Known {
    names: Vec<(String, Binding)>,
    size: u64,
    origin: FuncOrigin,
}

/// The `main` glibc's `_start` hands to `__libc_start_main`: the code address it loads into
/// `rdi` (`lea rdi, [rip+main]`, or `mov edi, main` in a non-PIE executable) before its first
/// call.
fn main_from_start(image: &Image<'_>) -> Option<ImageAddr> {
    use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Register};
    let (base, bytes) = image.code_at(image.entry)?;
    let off = (image.entry.0 - base.0) as usize;
    let end = bytes.len().min(off + 96);
    let mut d = Decoder::with_ip(64, bytes.get(off..end)?, image.entry.0, DecoderOptions::NONE);
    while d.can_decode() {
        let i = d.decode();
        if i.flow_control() != FlowControl::Next {
            return None;
        }
        let to_rdi = i.op_count() == 2 && i.op0_register().full_register() == Register::RDI;
        let target = match i.code() {
            Code::Lea_r64_m if to_rdi && i.memory_base() == Register::RIP => {
                i.memory_displacement64()
            }
            Code::Mov_r32_imm32 | Code::Mov_rm64_imm32 if to_rdi => i.immediate32() as u64,
            _ => continue,
        };
        return image.code_at(ImageAddr(target)).map(|_| ImageAddr(target));
    }
    None
}

/// Analyse `image`: every function reachable from its symbols, entry point and calls.
pub fn analyze(image: &Image<'_>, progress: &dyn Progress) -> Analysis {
    let mut timings = Vec::new();
    let mut t = Instant::now();
    let mut lap = |name: &str, timings: &mut Vec<(String, f64)>| {
        timings.push((name.to_string(), t.elapsed().as_secs_f64()));
        t = Instant::now();
    };

    // Phase 1: seeds from symbols (and the entry point), one per address.
    progress.phase("symbols");
    let mut known: BTreeMap<u64, Known> = BTreeMap::new();
    for s in &image.symbols {
        if s.kind != SymbolKind::Function || image.code_at(s.addr).is_none() {
            continue;
        }
        let k = known.entry(s.addr.0).or_insert(Known {
            names: Vec::new(),
            size: 0,
            origin: FuncOrigin::Symbol,
        });
        if !k.names.iter().any(|(n, _)| *n == s.name) {
            k.names.push((s.name.clone(), s.binding));
        }
        k.size = k.size.max(s.size);
    }
    // Unwind information names no function, but gives starts and sizes of the static
    // functions and `.cold` parts a stripped image has no symbol for. Two kinds of entry are
    // no function start and their code is never spliced (DESIGN.md §5): signal trampolines,
    // and entries that begin inside a padding instruction of the code before them (glibc's
    // entry for `__restore_rt` starts in the last byte of the nop before it, for unwinders
    // that look up the return address minus one).
    let mut no_splice = Vec::new();
    for u in image.unwind_ranges() {
        let addr = u.start;
        if image.code_at(addr).is_none() {
            continue;
        }
        if u.signal_frame {
            no_splice.push(NoSplice {
                start: addr,
                len: u.len,
                why: NoSpliceWhy::SignalTrampoline,
            });
            continue;
        }
        if !known.contains_key(&addr.0) {
            let from = known.range(..addr.0).next_back().map(|(a, _)| *a);
            if let Some(insn) = instruction_around(image, from, addr) {
                let why = NoSpliceWhy::UnwindInsideInstruction { insn: ImageAddr(insn) };
                no_splice.push(NoSplice { start: addr, len: u.len, why });
                continue;
            }
        }
        let k = known.entry(addr.0).or_insert(Known {
            names: Vec::new(),
            size: 0,
            origin: FuncOrigin::Unwind,
        });
        if k.size == 0 {
            k.size = u.len;
        }
    }
    no_splice.sort_unstable_by_key(|n| (n.start, n.len));
    clamp_sizes(&mut known, image);
    // Code pointers (vtables, constructor arrays) name functions called only indirectly. A
    // pointer into the middle of a known function is a code label (a computed-goto table),
    // not a function.
    let ranges: Vec<(u64, u64)> = known.iter().map(|(a, k)| (*a, *a + k.size)).collect();
    let inside_known = |a: u64| {
        let i = ranges.partition_point(|r| r.0 <= a);
        i > 0 && a < ranges[i - 1].1
    };
    let mut pointed: Vec<u64> = image
        .pointers
        .iter()
        .map(|p| p.1 .0)
        .filter(|a| !known.contains_key(a) && !inside_known(*a))
        .filter(|a| image.code_at(ImageAddr(*a)).is_some())
        .collect();
    pointed.sort_unstable();
    pointed.dedup();
    for a in pointed {
        known.insert(a, Known { names: Vec::new(), size: 0, origin: FuncOrigin::Pointer });
    }
    if image.entry.0 != 0 && image.code_at(image.entry).is_some() {
        known.entry(image.entry.0).or_insert(Known {
            names: vec![("_start".to_string(), Binding::Global)],
            size: 0,
            origin: FuncOrigin::Entry,
        });
        // A stripped executable (Debian's xz, sqlite3) names no `main`, the function users
        // name first.
        let named = |n: &str| known.values().any(|k| k.names.iter().any(|(x, _)| x == n));
        if !named("main") {
            if let Some(m) = main_from_start(image) {
                let k = known.entry(m.0).or_insert(Known {
                    names: Vec::new(),
                    size: 0,
                    origin: FuncOrigin::Entry,
                });
                k.names.push(("main".to_string(), Binding::Global));
            }
        }
    }
    lap("symbols", &mut timings);

    // Phase 2: CFGs, in parallel rounds; each round's new call targets seed the next.
    progress.phase("control flow");
    let noreturn: HashSet<u64> = known
        .iter()
        .filter(|(_, k)| k.names.iter().any(|(n, _)| is_noreturn_name(n)))
        .map(|(a, _)| *a)
        .collect();
    let mut cx = Cx { mem: image, entries: known.keys().copied().collect(), noreturn };
    let mut built: BTreeMap<u64, FuncCfg> = BTreeMap::new();
    let mut pending: Vec<u64> = cx.entries.clone();
    // Addresses inside a sized function that code elsewhere jumps to: more entries of that
    // function (an asm routine entered in the middle, a `.cold` part's way back).
    let mut inner_entries: BTreeMap<u64, Vec<u64>> = BTreeMap::new();
    let mut rebuild: Vec<u64> = Vec::new();
    let mut limits: BTreeMap<u64, Vec<(u64, u64)>> = BTreeMap::new();
    let done = AtomicU64::new(0);
    while !pending.is_empty() || !rebuild.is_empty() {
        let seeds: Vec<Seed> = pending
            .iter()
            .chain(rebuild.iter())
            .map(|a| seed_for(*a, &known, &inner_entries, &limits, &cx, image))
            .collect();
        let total = known.len() as u64;
        let results: Vec<FuncCfg> = seeds
            .par_iter()
            .filter_map(|s| {
                let r = build_function(s, &cx);
                let d = done.fetch_add(1, Ordering::Relaxed) + 1;
                if d.is_multiple_of(4096) {
                    progress.advance(d, total);
                }
                r
            })
            .collect();
        let mut fresh: Vec<u64> = Vec::new();
        let mut inner: Vec<(u64, u64)> = Vec::new();
        for r in results {
            let exits = r.table_exits.iter().map(|c| (c, true));
            for (c, from_table) in r.callees.iter().map(|c| (c, false)).chain(exits) {
                if known.contains_key(&c.0) || image.code_at(*c).is_none() {
                    continue;
                }
                // A jump into the middle of a function whose size is known is an edge into
                // that function, not the start of a new one.
                let owner =
                    known.range(..c.0).next_back().filter(|(a, k)| k.size > 0 && c.0 < *a + k.size);
                match owner {
                    Some((o, _)) => inner.push((*o, c.0)),
                    // A table's entry outside every known function starts none: real ones
                    // lead into a function known already (gcc's `.cold` parts have symbols
                    // or unwind entries), and the rest ran past the table's end.
                    None if from_table => {}
                    None => {
                        known.insert(
                            c.0,
                            Known { names: Vec::new(), size: 0, origin: FuncOrigin::CallTarget },
                        );
                        fresh.push(c.0);
                    }
                }
            }
            built.insert(r.entry.0, r);
        }
        // Entries that failed to build (not code after all) are dropped from `known`.
        for a in &pending {
            if !built.contains_key(a) {
                known.remove(a);
            }
        }
        // Owners that do not have a block where others jump in are traversed again from
        // there too.
        rebuild.clear();
        for (o, c) in inner {
            let has_block = built
                .get(&o)
                .is_some_and(|f| f.body.blocks.binary_search_by_key(&c, |b| b.start.0).is_ok());
            // Only where the owner's own instructions start: a jump into the middle of one
            // comes from bytes that are not really code (or from glibc's skip-the-lock-prefix
            // idiom, which the owner's traversal finds by itself).
            if has_block || !on_linear_boundary(image, o, known[&o].size, c) {
                continue;
            }
            let extra = inner_entries.entry(o).or_default();
            if !has_block && !extra.contains(&c) {
                extra.push(c);
                rebuild.push(o);
            }
        }
        rebuild.sort_unstable();
        rebuild.dedup();
        cx.entries = known.keys().copied().collect();
        fresh.sort_unstable();
        pending = fresh;
    }

    // A bound from `and r, mask` can exceed the table when the compiler knew more bits of the
    // index (LLVM's known-bits): the table then runs into the next one. Tables that overlap
    // the next table (of any function) are cut where it starts, and their functions rebuilt.
    for _ in 0..3 {
        let mut tables: Vec<(u64, u64, u64, u64, u64)> = Vec::new(); // start, end, size, owner, jump
        for f in built.values() {
            for t in &f.tables {
                let size = match t.format {
                    crate::cfg::TableFormat::Absolute64 => 8,
                    crate::cfg::TableFormat::Relative32 { .. } => 4,
                };
                let start = t.table.0;
                tables.push((
                    start,
                    start + size * t.targets.len() as u64,
                    size,
                    f.entry.0,
                    t.jump.0,
                ));
            }
        }
        tables.sort_unstable();
        let mut cut: Vec<u64> = Vec::new();
        for (k, &(s0, e0, size, owner, jump)) in tables.iter().enumerate() {
            // The next table that starts after this one (the same table may be listed by
            // several functions whose ranges overlap).
            let next = tables[k + 1..].iter().find(|t| t.0 > s0).map(|t| t.0);
            if let Some(s1) = next.filter(|s1| *s1 < e0) {
                limits.entry(owner).or_default().push((jump, (s1 - s0) / size - 1));
                cut.push(owner);
            }
        }
        if cut.is_empty() {
            break;
        }
        cut.sort_unstable();
        cut.dedup();
        let seeds: Vec<Seed> =
            cut.iter().map(|a| seed_for(*a, &known, &inner_entries, &limits, &cx, image)).collect();
        let rebuilt: Vec<FuncCfg> =
            seeds.par_iter().filter_map(|s| build_function(s, &cx)).collect();
        for r in rebuilt {
            built.insert(r.entry.0, r);
        }
    }

    // Functions with no path to an exit never return: their callers' CFGs were built assuming
    // they might, so rebuild those callers (a few rounds reach a fixpoint in practice).
    for _ in 0..4 {
        let newly: Vec<u64> = built
            .values()
            .filter(|f| !f.may_return && !cx.noreturn.contains(&f.entry.0))
            .map(|f| f.entry.0)
            .collect();
        if newly.is_empty() {
            break;
        }
        cx.noreturn.extend(newly.iter().copied());
        let newly: HashSet<u64> = newly.into_iter().collect();
        let redo: Vec<Seed> = built
            .values()
            .filter(|f| f.callees.iter().any(|c| newly.contains(&c.0)))
            .map(|f| seed_for(f.entry.0, &known, &inner_entries, &limits, &cx, image))
            .collect();
        let rebuilt: Vec<FuncCfg> =
            redo.par_iter().filter_map(|s| build_function(s, &cx)).collect();
        for r in rebuilt {
            built.insert(r.entry.0, r);
        }
    }
    lap("control flow", &mut timings);

    // Phase 3: number everything and resolve edge targets to ids.
    progress.phase("graph");
    let mut cfg = assemble(known, built, &cx);
    no_splice.extend(instructions_entered_inside(&cfg, image));
    no_splice.sort_unstable_by_key(|n| (n.start, n.len));
    cfg.no_splice = no_splice;
    cfg.padding = springboard_padding(&cfg, image);
    let through: Vec<bool> = (0..cfg.functions.len() as u32)
        .into_par_iter()
        .map(|f| cfg.returns_through_callers_slot(image, FuncId(f)))
        .collect();
    let parts = cfg.parts_returning_through(image, &through);
    for (f, t) in cfg.functions.iter_mut().zip(through) {
        f.ret_through_slot = t;
    }
    for p in parts {
        let f = &mut cfg.functions[p.0 as usize];
        f.ret_through_slot = true;
        f.ret_part = true;
    }
    let call_graph = CallGraph::build(&cfg);
    lap("graph", &mut timings);

    // Phase 4: liveness.
    progress.phase("liveness");
    liveness::solve(&mut cfg, &call_graph);
    lap("liveness", &mut timings);

    let summary = summarize(&cfg, &call_graph, image);
    Analysis {
        image: image.name.clone(),
        build_id: image.build_id.clone(),
        cfg,
        call_graph,
        summary,
        timings: Timings(timings),
    }
}

/// Sizes come from the file and are not trusted: one `.dynsym` entry with a huge `st_size`
/// made its function take in all the text after it (every function decoded twice, the gap
/// refill running over the whole text again and again). A function's code ends at its
/// section's end and at the next function symbol's entry; an unwind entry's, at the next known
/// entry of any kind. (An unwind entry inside a symbol's range is a part of that function,
/// such as the child's path in glibc's `clone`; it stays inside the symbol's range, and the
/// traversal of the symbol treats it as another function.)
fn clamp_sizes(known: &mut BTreeMap<u64, Known>, image: &Image<'_>) {
    let mut next_symbol = u64::MAX;
    let mut next_any = u64::MAX;
    for (a, k) in known.iter_mut().rev() {
        let section_end =
            image.code_at(ImageAddr(*a)).map_or(*a, |(b, bytes)| b.0 + bytes.len() as u64);
        let next = if k.origin == FuncOrigin::Symbol { next_symbol } else { next_any };
        k.size = k.size.min(section_end.min(next).saturating_sub(*a));
        if k.origin == FuncOrigin::Symbol {
            next_symbol = *a;
        }
        next_any = *a;
    }
}

/// The range a function's code may occupy: its symbol size, else up to the next known entry.
fn seed_for(
    entry: u64,
    known: &BTreeMap<u64, Known>,
    inner: &BTreeMap<u64, Vec<u64>>,
    limits: &BTreeMap<u64, Vec<(u64, u64)>>,
    cx: &Cx<'_>,
    image: &Image<'_>,
) -> Seed {
    let region_end =
        image.code_at(ImageAddr(entry)).map(|(b, bytes)| b.0 + bytes.len() as u64).unwrap_or(entry);
    let size = known.get(&entry).map_or(0, |k| k.size);
    let end = if size > 0 {
        entry.saturating_add(size).min(region_end)
    } else {
        let i = cx.entries.partition_point(|e| *e <= entry);
        cx.entries.get(i).copied().unwrap_or(region_end).min(region_end)
    };
    let extra = inner.get(&entry).cloned().unwrap_or_default();
    let limits = limits.get(&entry).cloned().unwrap_or_default();
    Seed {
        entry: ImageAddr(entry),
        bound: entry..end.max(entry + 1),
        sized: size > 0,
        extra,
        limits,
    }
}

/// The padding runs springboards may use: [`find_padding`]'s, less any that meets code no
/// splice may touch (`cfg.no_splice`, which must be set).
pub fn springboard_padding(cfg: &Cfg, image: &dyn CodeMemory) -> Vec<Padding> {
    find_padding(cfg, image)
        .into_iter()
        .filter(|p| cfg.no_splice_in(p.start.0, p.start.0 + p.len as u64).is_none())
        .collect()
}

/// The start of the padding instruction (a nop or an int3) that `addr` lies strictly inside,
/// in a linear decode of the code from `from` (a known function entry before `addr`; the start
/// of `addr`'s section when there is none, or when it lies in another section). `None` when
/// `addr` starts an instruction of that decode or lies inside one that is not padding. As
/// objdump does, bytes that do not decode are stepped over one at a time, and a run of zero
/// bytes (padding in some sections; `00 00` would decode as `add [rax], al` and run an
/// odd-length run into the code after it) is skipped whole. Every entry is checked from the
/// known entry just before it, so the decodes of a whole image cover its code about once.
/// The inner bytes of every instruction that another block starts inside (glibc jumps over
/// the `lock` prefix of `lock cmpxchg` where only one thread runs: the block at the
/// `cmpxchg` lies one byte into the locked one). No splice may touch them: an int3 at the
/// inner block would turn the prefixed instruction into `lock int3`, which raises SIGILL,
/// and a jump anywhere across them would break one of the two instruction streams.
fn instructions_entered_inside(cfg: &Cfg, image: &Image<'_>) -> Vec<NoSplice> {
    let mut out = Vec::new();
    for f in 0..cfg.functions.len() {
        let blocks = cfg.blocks_of(FuncId(f as u32));
        for (k, b) in blocks.iter().enumerate() {
            let end = b.start.0 + b.len as u64;
            // Blocks are in address order: the ones that start inside this one follow it.
            for n in blocks[k + 1..].iter().take_while(|n| n.start.0 < end) {
                let Some(insn) = instruction_holding(image, b.start, n.start) else { continue };
                let (at, len) = insn;
                if at < n.start.0 {
                    let why =
                        NoSpliceWhy::InsideInstruction { insn: ImageAddr(at), entry: n.start };
                    out.push(NoSplice { start: ImageAddr(at + 1), len: len - 1, why });
                }
            }
        }
    }
    out.sort_unstable_by_key(|n| (n.start, n.len));
    out.dedup();
    out
}

/// The instruction (start, length) of the stream decoded from `from` that holds `addr`.
fn instruction_holding(image: &Image<'_>, from: ImageAddr, addr: ImageAddr) -> Option<(u64, u64)> {
    let (base, bytes) = image.code_at(from)?;
    let mut sc = Scanner::new(bytes, base);
    let mut a = from.0;
    while a <= addr.0 {
        let next = sc.decode(ImageAddr(a))?.next_ip();
        if next > addr.0 {
            return Some((a, next - a));
        }
        a = next;
    }
    None
}

fn instruction_around(image: &Image<'_>, from: Option<u64>, addr: ImageAddr) -> Option<u64> {
    let (base, bytes) = image.code_at(addr)?;
    let from = from.filter(|f| *f >= base.0).unwrap_or(base.0);
    let mut sc = Scanner::new(bytes, base);
    let byte = |a: u64| bytes.get((a - base.0) as usize).copied();
    let mut a = from;
    while a < addr.0 {
        if byte(a) == Some(0) && byte(a + 1) == Some(0) {
            while a < addr.0 && byte(a) == Some(0) {
                a += 1;
            }
            continue;
        }
        let insn = sc.decode(ImageAddr(a));
        let next = insn.map_or(a + 1, |i| i.next_ip());
        if next > addr.0 {
            // Only padding is trusted to be what it decodes as: past the end of a function
            // (a noreturn call, then one byte of zero padding) a linear decode can run out of
            // step with the code and straddle a real entry with a made-up instruction.
            return insn.filter(is_filler).map(|_| a);
        }
        a = next;
    }
    None
}

/// Whether `addr` starts an instruction of a linear decode of `[entry, entry+size)`.
fn on_linear_boundary(image: &Image<'_>, entry: u64, size: u64, addr: u64) -> bool {
    let Some((base, bytes)) = image.code_at(ImageAddr(entry)) else { return false };
    let mut sc = Scanner::new(bytes, base);
    let mut a = entry;
    while a < addr && a < entry + size {
        match sc.decode(ImageAddr(a)) {
            Some(i) => a = i.next_ip(),
            None => return false,
        }
    }
    a == addr
}

/// The name to show for a function with several symbols: global before weak before local,
/// then the one with fewest leading underscores, then the shortest.
fn pick_name(names: &[(String, Binding)]) -> usize {
    let rank = |(n, b): &(String, Binding)| {
        let bind = match b {
            Binding::Global => 0,
            Binding::Weak => 1,
            Binding::Local => 2,
        };
        (bind, n.len() - n.trim_start_matches('_').len(), n.len())
    };
    (0..names.len()).min_by_key(|i| rank(&names[*i])).unwrap_or(0)
}

/// Number functions, blocks and jump tables in address order and make every id global, in
/// place: the blocks and edges stay in the vectors `build_function` made.
fn assemble(known: BTreeMap<u64, Known>, built: BTreeMap<u64, FuncCfg>, cx: &Cx<'_>) -> Cfg {
    let mut funcs: Vec<FuncCfg> = built.into_values().collect();
    // What is known of each built function, in the same order, to be moved (not copied) into
    // its `Function`.
    let mut known: Vec<Known> = known
        .into_iter()
        .filter(|(a, _)| funcs.binary_search_by_key(a, |f| f.entry.0).is_ok())
        .map(|(_, k)| k)
        .collect();
    let entries: Vec<u64> = funcs.iter().map(|f| f.entry.0).collect();
    // Where each function's blocks and tables start in the global numbering.
    let (mut b_first, mut t_first) = (Vec::new(), Vec::new());
    let (mut nb, mut nt) = (0u32, 0u32);
    for f in &funcs {
        b_first.push(nb);
        t_first.push(nt);
        nb += f.body.blocks.len() as u32;
        nt += f.tables.len() as u32;
    }
    let outside: Vec<Vec<ImageAddr>> =
        funcs.iter_mut().map(|f| std::mem::take(&mut f.outside)).collect();
    let func_id = |a: ImageAddr| entries.binary_search(&a.0).ok().map(|i| FuncId(i as u32));
    // Blocks are sorted by start, so a local target is found by binary search.
    let block_id = |fi: usize, a: ImageAddr| {
        funcs[fi]
            .body
            .blocks
            .binary_search_by_key(&a, |b| b.start)
            .ok()
            .map(|i| BlockId(b_first[fi] + i as u32))
    };
    // Each outside address of each function, resolved to a function, a block of another
    // function, or (with its index in `outside`) an address no function or block starts at.
    let resolved: Vec<Vec<(TargetTag, u32)>> = outside
        .par_iter()
        .map(|out| {
            out.iter()
                .enumerate()
                .map(|(k, &a)| match func_id(a) {
                    Some(g) => (TargetTag::Function, g.0),
                    // Into the middle of another function (a `.cold` part jumping back into
                    // its parent): that function's block, if it has one there.
                    None => entries
                        .partition_point(|e| *e <= a.0)
                        .checked_sub(1)
                        .and_then(|g| block_id(g, a))
                        .map_or((TargetTag::Address, k as u32), |b| (TargetTag::Block, b.0)),
                })
                .collect()
        })
        .collect();
    let functions: Vec<Function> = funcs
        .par_iter()
        .zip(&mut known)
        .enumerate()
        .map(|(fi, (fc, k))| {
            let entry = fc.entry.0;
            let (name, aliases) = if k.names.is_empty() {
                (format!("func_{entry:x}"), Vec::new())
            } else {
                let p = pick_name(&k.names);
                let name = k.names.remove(p).0;
                (name, std::mem::take(&mut k.names).into_iter().map(|(n, _)| n).collect())
            };
            Function {
                name,
                aliases,
                entry: fc.entry,
                symbol_size: k.size,
                origin: k.origin,
                blocks: b_first[fi]..b_first[fi] + fc.body.blocks.len() as u32,
                entry_block: block_id(fi, fc.entry).unwrap_or(BlockId(b_first[fi])),
                insn_bytes: fc.insn_bytes,
                extent: fc.extent.clone(),
                noreturn: cx.noreturn.contains(&entry),
                live_in: RegSet::EMPTY,
                flags_live_in: FlagSet::EMPTY,
                must_def: RegSet::EMPTY,
                flags_must_def: FlagSet::EMPTY,
                ret_through_slot: false,
                ret_part: false,
            }
        })
        .collect();
    funcs.par_iter_mut().zip(resolved).zip(outside).enumerate().for_each(
        |(fi, ((fc, res), out))| {
            let body = &mut fc.body;
            for b in &mut body.blocks {
                b.func = FuncId(fi as u32);
                if let Terminator::JumpTable(TableId(t)) = b.term {
                    b.term = Terminator::JumpTable(TableId(t_first[fi] + t));
                }
            }
            for e in &mut body.edges {
                let (tag, payload) = match e.tag {
                    TargetTag::Block => (TargetTag::Block, b_first[fi] + e.payload),
                    TargetTag::Function => res[e.payload as usize],
                    // A local address that is no block start.
                    TargetTag::Address => (TargetTag::Address, e.payload),
                    TargetTag::None => (TargetTag::None, 0),
                };
                (e.tag, e.payload) = match tag {
                    TargetTag::Address => {
                        body.far.push(out[payload as usize]);
                        (TargetTag::Address, body.far.len() as u32 - 1)
                    }
                    other => (other, payload),
                };
            }
        },
    );
    let mut bodies: Vec<Body> = Vec::with_capacity(funcs.len());
    let mut jump_tables = Vec::with_capacity(nt as usize);
    for f in funcs {
        bodies.push(f.body);
        jump_tables.extend(f.tables);
    }
    Cfg {
        functions,
        blocks: Blocks::new(bodies),
        jump_tables,
        padding: Vec::new(),
        no_splice: Vec::new(),
    }
}

/// Runs of `int3`/`nop` that end exactly at a function's entry and start after the previous
/// function's code: alignment padding no path executes, usable as springboard space.
pub(crate) fn find_padding(cfg: &Cfg, mem: &dyn CodeMemory) -> Vec<Padding> {
    cfg.functions.windows(2).filter_map(|w| padding_between(&w[0], &w[1], mem)).collect()
}

/// The padding run between function `prev` and the next one, `next`, if there is one (see
/// [`find_padding`]; the cache's check recomputes single runs with it).
pub(crate) fn padding_between(
    prev: &Function,
    next: &Function,
    mem: &dyn CodeMemory,
) -> Option<Padding> {
    let (prev_end, next) = (prev.extent.end, next.entry.0);
    if prev_end >= next || next - prev_end > 4096 {
        return None;
    }
    let (base, bytes) = mem.code_region(ImageAddr(prev_end))?;
    if next > base.0 + bytes.len() as u64 {
        return None;
    }
    let mut sc = Scanner::new(bytes, base);
    let mut a = prev_end;
    let mut run_start = a;
    while a < next {
        match sc.decode(ImageAddr(a)) {
            Some(i) if is_filler(&i) => a = i.next_ip(),
            Some(i) => {
                a = i.next_ip();
                run_start = a;
            }
            None => {
                a += 1;
                run_start = a;
            }
        }
    }
    (a == next && run_start < next)
        .then(|| Padding { start: ImageAddr(run_start), len: (next - run_start) as u32 })
}

fn summarize(cfg: &Cfg, cg: &CallGraph, image: &Image<'_>) -> Summary {
    let mut s = Summary {
        functions: cfg.functions.len() as u64,
        blocks: cfg.blocks.len() as u64,
        edges: cfg.edge_count() as u64,
        call_graph_edges: cg.edge_count() as u64,
        text_bytes: image.text_bytes(),
        jump_tables: cfg.jump_tables.len() as u64,
        jump_table_entries: cfg.jump_tables.iter().map(|t| t.targets.len() as u64).sum(),
        padding_runs: cfg.padding.len() as u64,
        padding_bytes: cfg.padding.iter().map(|p| p.len as u64).sum(),
        no_splice_ranges: cfg.no_splice.len() as u64,
        ..Summary::default()
    };
    for f in &cfg.functions {
        s.instruction_bytes += f.insn_bytes;
        match f.origin {
            FuncOrigin::CallTarget => s.functions_from_calls += 1,
            FuncOrigin::Unwind => s.functions_from_unwind += 1,
            FuncOrigin::Pointer => s.functions_from_pointers += 1,
            _ => s.functions_from_symbols += 1,
        }
        s.noreturn_functions += f.noreturn as u64;
    }
    s.unanalysable_jumps =
        cfg.blocks.iter().filter(|b| b.term == Terminator::Unanalysable).count() as u64;
    let _ = EdgeKind::Call;
    s
}
