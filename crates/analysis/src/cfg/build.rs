//! Recursive-traversal CFG construction for one function: decode from the entry, follow
//! direct branches, resolve jump tables, and cut the decoded instructions into basic blocks.
//!
//! A block ends at a branch, a return, an undecodable byte, a call (so that each block has at
//! most one call, at its end, which keeps the liveness transfer simple), or where another
//! block begins.

use super::jumptable::{self, Compare, Hint, Resolution, Slice};
use super::tailcall::{self, FnView};
use super::{Block, Body, EdgeKind, JumpTable, PackedEdge, TableId, TargetTag, Terminator};
use crate::memory::CodeMemory;
use iced_x86::{Instruction, Mnemonic, OpKind};
use kerf_arch::x86_64::{FlagSet, Flow, Gpr, RegSet, Scanner};
use kerf_arch::ImageAddr;
use std::ops::Range;

pub(crate) type AddrMap<V> = kerf_arch::hash::AddrMap<u64, V>;
pub(crate) type AddrSet = kerf_arch::hash::AddrSet<u64>;

/// Ranges longer than this are indexed by hash rather than by a slot per byte.
const DENSE_MAX: u64 = 1 << 22;
/// Bytes past the end of a range that still get slots: an instruction that starts inside
/// can end up to 15 bytes later, and its successor is often asked about.
const DENSE_SLACK: u64 = 16;

/// Instruction indices by address, for the addresses of one function's range: a slot per
/// byte, and a hash map for addresses outside it (or for all of a very long range). Hashing
/// every decoded address and sorting the instructions by address afterwards were a fifth of
/// the whole analysis; slots make lookups an index and give the addresses in order.
struct InsnIndex {
    /// Where instructions start (so that they are found in order a word at a time).
    starts: AddrBits,
    /// The index of the instruction starting at each address `starts` holds a bit for.
    slots: Vec<u32>,
    other: AddrMap<u32>,
}

impl InsnIndex {
    fn new(range: &Range<u64>) -> InsnIndex {
        let starts = AddrBits::new(range);
        let slots = vec![0; starts.len as usize];
        InsnIndex { starts, slots, other: AddrMap::default() }
    }

    fn contains(&self, a: u64) -> bool {
        match self.starts.bit(a) {
            Some(_) => self.starts.contains(a),
            None => self.other.contains_key(&a),
        }
    }

    fn insert(&mut self, a: u64, idx: u32) {
        match self.starts.bit(a) {
            Some(k) => {
                self.starts.insert(a);
                self.slots[k as usize] = idx;
            }
            None => {
                self.other.insert(a, idx);
            }
        }
    }

    /// `(address, index)` of every instruction, in address order.
    fn in_order(&self, count: usize) -> Vec<(u64, u32)> {
        let lo = self.starts.lo;
        let mut out: Vec<(u64, u32)> = Vec::with_capacity(count);
        self.starts.each_dense(|a| out.push((a, self.slots[(a - lo) as usize])));
        if !self.other.is_empty() {
            out.extend(self.other.iter().map(|(a, i)| (*a, *i)));
            out.sort_unstable();
        }
        out
    }
}

/// A set of addresses of one function's range: a bit per byte, and a hash set for addresses
/// outside it (or for all of a very long range).
struct AddrBits {
    lo: u64,
    bits: Vec<u64>,
    len: u64,
    other: AddrSet,
}

impl AddrBits {
    fn new(range: &Range<u64>) -> AddrBits {
        let len = range.end.saturating_sub(range.start);
        let len = if len <= DENSE_MAX { len + DENSE_SLACK } else { 0 };
        AddrBits {
            lo: range.start,
            bits: vec![0; len.div_ceil(64) as usize],
            len,
            other: AddrSet::default(),
        }
    }

    fn bit(&self, a: u64) -> Option<u64> {
        a.checked_sub(self.lo).filter(|k| *k < self.len)
    }

    fn contains(&self, a: u64) -> bool {
        match self.bit(a) {
            Some(k) => self.bits[(k / 64) as usize] & (1 << (k % 64)) != 0,
            None => self.other.contains(&a),
        }
    }

    fn insert(&mut self, a: u64) {
        match self.bit(a) {
            Some(k) => self.bits[(k / 64) as usize] |= 1 << (k % 64),
            None => {
                self.other.insert(a);
            }
        }
    }

    /// Call `f` on each address held in the bits (not in `other`), in order.
    fn each_dense(&self, mut f: impl FnMut(u64)) {
        for (w, word) in self.bits.iter().enumerate() {
            let mut m = *word;
            while m != 0 {
                f(self.lo + w as u64 * 64 + m.trailing_zeros() as u64);
                m &= m - 1;
            }
        }
    }

    /// Every address in the set, in order.
    fn sorted(&self) -> Vec<u64> {
        let mut out = Vec::new();
        self.each_dense(|a| out.push(a));
        if !self.other.is_empty() {
            out.extend(self.other.iter().copied());
            out.sort_unstable();
        }
        out
    }
}

/// Where to start a function and how far its code may extend.
#[derive(Clone, Debug)]
pub(crate) struct Seed {
    pub entry: ImageAddr,
    /// Jumps outside this range leave the function (tail calls).
    pub bound: Range<u64>,
    /// The range comes from the symbol's size (so all of it is this function's code).
    pub sized: bool,
    /// Further addresses inside the range where other functions jump in.
    pub extra: Vec<u64>,
    /// `(jump, max index)`: jump tables found to overlap the next table, cut to fit.
    pub limits: Vec<(u64, u64)>,
}

impl Seed {
    /// Where control comes into the function from outside: its entry and `extra`.
    fn entries(&self) -> Vec<u64> {
        std::iter::once(self.entry.0).chain(self.extra.iter().copied()).collect()
    }
}

/// What the traversal of one function needs to know about the rest of the image.
pub(crate) trait Context: Sync {
    fn memory(&self) -> &dyn CodeMemory;
    /// Entries of known functions inside `range`, sorted.
    fn functions_in(&self, range: Range<u64>) -> &[u64];
    /// Whether a call to `addr` never returns.
    fn is_noreturn(&self, addr: ImageAddr) -> bool;
}

/// Where an edge of a block under construction goes, before ids are assigned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RawTarget {
    Local(ImageAddr),
    Function(ImageAddr),
    None,
}

/// The CFG of one function, in its final vectors but with ids still local: blocks' `func` and
/// jump-table ids, and edge targets (local block indices, or indices into `outside`) are
/// made global when the image's CFG is assembled.
#[derive(Clone, Debug)]
pub(crate) struct FuncCfg {
    pub entry: ImageAddr,
    /// Blocks sorted by start address, and their edges; nothing in `body.far` yet.
    pub body: Body,
    /// Where the edges tagged [`TargetTag::Function`] or [`TargetTag::Address`] go: other
    /// functions, and local addresses that are not a block start.
    pub outside: Vec<ImageAddr>,
    /// Indexed by the local [`TableId`]s in the blocks' terminators.
    pub tables: Vec<JumpTable>,
    /// Call and tail-call targets (possibly not yet known as functions).
    pub callees: Vec<ImageAddr>,
    /// Jump-table targets outside the function. Not trusted to start functions: a table
    /// whose bound came from a mask wider than the index's real range runs into the next
    /// table's entries, which taken relative to this table's base land anywhere, often in
    /// the padding after another function (77 blocks of libLLVM-14 were found there).
    pub table_exits: Vec<ImageAddr>,
    pub insn_bytes: u64,
    pub extent: Range<u64>,
    /// Whether some block returns, tail-calls or jumps somewhere unknown.
    pub may_return: bool,
}

struct Insn {
    insn: Instruction,
    flow: Flow,
    reads: RegSet,
    kills: RegSet,
    clobbers: RegSet,
    flags_read: FlagSet,
    flags_killed: FlagSet,
    /// Jump-table resolution, for an indirect jump (boxed: rare, and it would double the
    /// size of every instruction record).
    resolution: Option<Box<Resolution>>,
}

impl Insn {
    fn addr(&self) -> u64 {
        self.insn.ip()
    }
    fn next(&self) -> u64 {
        self.insn.next_ip()
    }
}

/// Build the CFG of the function at `seed.entry`. Returns `None` when the entry is not in an
/// executable region at all.
pub(crate) fn build_function(seed: &Seed, cx: &dyn Context) -> Option<FuncCfg> {
    let (base, bytes) = cx.memory().code_region(seed.entry)?;
    let mut sc = Scanner::new(bytes, base);
    // Jump tables whose bounds check turned out not to dominate the jump are distrusted and
    // the function traversed again without them (rare: a few per large library).
    let mut distrust: AddrSet = AddrSet::default();
    let Traversal { insns, order, leaders, mut callees, mut table_exits, .. } = loop {
        let t = traverse(seed, cx, &mut sc, &distrust);
        let mut bad = undominated_tables(&t);
        bad.extend(stale_bases(&t, &seed.entries(), cx));
        if bad.is_empty() {
            break t;
        }
        distrust.extend(bad);
    };
    let inner = cx.functions_in(seed.bound.clone());
    let local =
        |t: u64| seed.bound.contains(&t) && (t == seed.entry.0 || inner.binary_search(&t).is_err());

    // Step 2: cut the decoded instructions, in address order, into blocks. (Working vectors
    // with room for the most blocks there can be and the usual number of edges, so that they
    // seldom grow; they are copied to exact size at the end.)
    let mut blocks: Vec<Block> = Vec::with_capacity(order.len());
    let mut edges: Vec<(EdgeKind, RawTarget)> = Vec::with_capacity(order.len() * 2);
    let mut tables: Vec<JumpTable> = Vec::new();
    let mut insn_bytes = 0u64;
    let mut may_return = false;
    // Where each block's instructions start in `order` (a block takes the ones up to the
    // next block's first).
    let mut block_first: Vec<usize> = Vec::with_capacity(order.len());
    let mut i = 0;
    while i < order.len() {
        block_first.push(i);
        let first = &insns[order[i].2 as usize];
        let mut b = Block {
            start: ImageAddr(first.addr()),
            term: Terminator::FallThrough,
            ..Block::default()
        };
        loop {
            let ins = &insns[order[i].2 as usize];
            b.add_insn(ins.reads, ins.kills, ins.flags_read, ins.flags_killed);
            b.insns += 1;
            b.len = (ins.next() - b.start.0) as u32;
            insn_bytes += ins.insn.len() as u64;
            i += 1;
            let next = ins.next();
            let ends =
                ins.flow.ends_block() || matches!(ins.flow, Flow::Call(_) | Flow::IndirectCall);
            let contiguous = i < order.len() && insns[order[i].2 as usize].addr() == next;
            if ends || !contiguous || leaders.contains(next) {
                let e0 = edges.len() as u32;
                finish_block(
                    &mut b,
                    &mut edges,
                    ins,
                    cx,
                    &local,
                    &mut tables,
                    &mut may_return,
                    contiguous,
                );
                b.edges = e0..edges.len() as u32;
                break;
            }
        }
        blocks.push(b);
    }
    if blocks.is_empty() {
        // The entry does not decode: not code after all.
        return None;
    }
    // Step 3: unresolved indirect jumps that are tail calls (see `tailcall`).
    let unresolved: Vec<usize> =
        (0..blocks.len()).filter(|k| blocks[*k].term == Terminator::Unanalysable).collect();
    if !unresolved.is_empty() {
        block_first.push(order.len());
        let index = |a: ImageAddr| blocks.binary_search_by_key(&a, |b| b.start).ok();
        let view = FnView {
            blocks: block_first
                .windows(2)
                .map(|w| {
                    order[w[0]..w[1]]
                        .iter()
                        .map(|o| (&insns[o.2 as usize].insn, insns[o.2 as usize].clobbers))
                        .collect()
                })
                .collect(),
            succs: blocks
                .iter()
                .map(|b| {
                    edges[b.edges.start as usize..b.edges.end as usize]
                        .iter()
                        .filter_map(|(_, t)| match t {
                            RawTarget::Local(a) => index(*a),
                            _ => None,
                        })
                        .collect()
                })
                .collect(),
            foreign: seed.extra.iter().filter_map(|a| index(ImageAddr(*a))).collect(),
            entry: index(seed.entry).unwrap_or(0),
        };
        for k in tailcall::indirect_tail_calls(&view, &unresolved) {
            blocks[k].term = Terminator::IndirectTailCall;
        }
    }
    let extent = match (blocks.first(), blocks.iter().map(|b| b.end().0).max()) {
        (Some(f), Some(end)) => f.start.0..end,
        _ => seed.entry.0..seed.entry.0,
    };
    callees.sort_unstable();
    callees.dedup();
    table_exits.sort_unstable();
    table_exits.dedup();
    let (edges, outside) = pack_edges(&edges, &blocks);
    Some(FuncCfg {
        entry: seed.entry,
        // Exact sizes: these vectors live until the end, and a vector grown by pushing
        // carries up to half its size in unused capacity.
        body: Body { blocks: blocks.to_vec(), edges, far: Vec::new() },
        outside,
        tables,
        callees: callees.to_vec(),
        table_exits: table_exits.to_vec(),
        insn_bytes,
        extent,
        may_return,
    })
}

/// Edges in their stored form: a local target becomes the index of its block, any other
/// target an index into the returned list of outside addresses.
fn pack_edges(
    edges: &[(EdgeKind, RawTarget)],
    blocks: &[Block],
) -> (Vec<PackedEdge>, Vec<ImageAddr>) {
    let leaving = edges.iter().filter(|(_, t)| matches!(t, RawTarget::Function(_))).count();
    let mut outside = Vec::with_capacity(leaving);
    let far = |a: ImageAddr, outside: &mut Vec<ImageAddr>| {
        outside.push(a);
        (outside.len() - 1) as u32
    };
    let packed = edges
        .iter()
        .map(|&(kind, t)| match t {
            RawTarget::Local(a) => match blocks.binary_search_by_key(&a, |b| b.start) {
                Ok(i) => PackedEdge::new(kind, TargetTag::Block, i as u32),
                // Not a block start (cannot happen for a target the traversal decoded from;
                // kept as an address so that no edge is dropped).
                Err(_) => PackedEdge::new(kind, TargetTag::Address, far(a, &mut outside)),
            },
            RawTarget::Function(a) => {
                PackedEdge::new(kind, TargetTag::Function, far(a, &mut outside))
            }
            RawTarget::None => PackedEdge::new(kind, TargetTag::None, 0),
        })
        .collect();
    (packed, outside)
}

/// Step 1 of [`build_function`]: decode everything reachable from the entry. Returns the
/// instructions (in decode order), the block leaders, and the call and tail-call targets.
fn traverse(seed: &Seed, cx: &dyn Context, sc: &mut Scanner<'_>, distrust: &AddrSet) -> Traversal {
    // Sized for the usual density of code (an instruction per 4 bytes) so that it rarely
    // grows: growing copies it, and showed up as 6 % of the analysis.
    let span = (seed.bound.end - seed.bound.start).min(1 << 20) as usize;
    let mut insns: Vec<Insn> = Vec::with_capacity(span / 4);
    let mut at = InsnIndex::new(&seed.bound);
    let mut leaders = AddrBits::new(&seed.bound);
    let mut work: Vec<(u64, Hint)> = vec![(seed.entry.0, Hint::NONE)];
    leaders.insert(seed.entry.0);
    for e in &seed.extra {
        work.push((*e, Hint::NONE));
        leaders.insert(*e);
    }
    let mut callees: Vec<ImageAddr> = Vec::new();
    let mut table_exits: Vec<ImageAddr> = Vec::new();
    // Other functions' entries inside our range (aliases aside, usually none): a jump there
    // is a tail call, not a branch inside this function.
    let inner = cx.functions_in(seed.bound.clone());
    let local =
        |t: u64| seed.bound.contains(&t) && (t == seed.entry.0 || inner.binary_search(&t).is_err());

    // Step 1: traversal. Each work item is decoded linearly (through conditional branches'
    // fall-throughs and calls) until control cannot continue or reaches decoded code; the
    // run's instructions and the bound hints before each are kept for jump-table slicing.
    let mut run: Vec<u32> = Vec::new();
    let mut run_hints: Vec<Hint> = Vec::new();
    // The bounds that hold before an instruction, and those each edge carries into its
    // target, where there is one (few instructions: a bound lives from a compare to the
    // jump it guards): see `undominated_tables`.
    let mut held: AddrMap<Hint> = AddrMap::default();
    let mut entering: AddrMap<Vec<Hint>> = AddrMap::default();
    let mut enter = |t: u64, h: Hint| {
        if !h.is_none() {
            entering.entry(t).or_default().push(h);
        }
    };
    let mut pending: Vec<Pending> = Vec::new();
    let mut based: Vec<Based> = Vec::new();
    let mut boundaries: Option<Vec<u64>> = None;
    // Stretches of the range where a gap may still hold code (step 1b): the whole range at
    // first, then only what is left of the gaps the last round traversed from.
    let mut open: Vec<Range<u64>> = vec![seed.bound.clone()];
    loop {
        while let Some((start, hint0)) = work.pop() {
            let mut a = start;
            let mut hint = hint0;
            let mut last_cmp: Option<Compare> = None;
            run.clear();
            run_hints.clear();
            loop {
                if at.contains(a) {
                    leaders.insert(a);
                    break;
                }
                if !local(a) && a != start {
                    // Ran off the end of the function's range without a transfer: treat the
                    // next function as a fall-through tail call.
                    callees.push(ImageAddr(a));
                    break;
                }
                let Some(insn) = sc.decode(ImageAddr(a)) else {
                    break;
                };
                let f = sc.facts(&insn);
                let idx = insns.len() as u32;
                at.insert(a, idx);
                run.push(idx);
                run_hints.push(hint);
                if !hint.is_none() {
                    held.insert(a, hint);
                }
                hint = hint.after(&insn, f.clobbers);
                let next = insn.next_ip();
                let mut item = Insn {
                    insn,
                    flow: f.flow,
                    reads: f.reads,
                    kills: f.kills,
                    clobbers: f.clobbers,
                    flags_read: f.flags_read,
                    flags_killed: f.flags_killed,
                    resolution: None,
                };
                let cmp_now = match insn.mnemonic() {
                    Mnemonic::Cmp => Compare::of(&insn, &[]).map(|c| {
                        let before: Vec<(&Instruction, RegSet)> = run[..run.len() - 1]
                            .iter()
                            .map(|i| (&insns[*i as usize].insn, insns[*i as usize].clobbers))
                            .collect();
                        c.widened(&before)
                    }),
                    Mnemonic::Sub => {
                        let before: Vec<&Instruction> =
                            run[..run.len() - 1].iter().map(|i| &insns[*i as usize].insn).collect();
                        Compare::of(&insn, &before)
                    }
                    _ => None,
                };
                if matches!(f.flow, Flow::Next | Flow::Call(_) | Flow::IndirectCall) {
                    enter(next, hint);
                }
                match f.flow {
                    Flow::Next => {
                        insns.push(item);
                        a = next;
                    }
                    Flow::Call(t) => {
                        insns.push(item);
                        callees.push(t);
                        if cx.is_noreturn(t) {
                            break;
                        }
                        leaders.insert(next);
                        a = next;
                    }
                    Flow::IndirectCall => {
                        insns.push(item);
                        leaders.insert(next);
                        a = next;
                    }
                    Flow::CondJump(t) => {
                        insns.push(item);
                        let (taken, fall) = Hint::from_branch(last_cmp, &insn);
                        if local(t.0) {
                            leaders.insert(t.0);
                            // Only a bound this branch establishes may travel with it; one
                            // from earlier in the run need not hold where the target is also
                            // reached from elsewhere.
                            work.push((t.0, taken));
                        } else {
                            callees.push(t);
                        }
                        leaders.insert(next);
                        hint = fall.or(hint);
                        if local(t.0) {
                            enter(t.0, taken);
                        }
                        enter(next, hint);
                        a = next;
                    }
                    Flow::Jump(t) => {
                        insns.push(item);
                        if local(t.0) {
                            leaders.insert(t.0);
                            work.push((t.0, Hint::NONE));
                        } else {
                            callees.push(t);
                        }
                        break;
                    }
                    Flow::IndirectJump => {
                        // The run so far, without the jump itself (not pushed yet).
                        let slice: Vec<(&Instruction, RegSet)> = run[..run.len() - 1]
                            .iter()
                            .map(|i| (&insns[*i as usize].insn, insns[*i as usize].clobbers))
                            .collect();
                        let res = if distrust.contains(&a) {
                            Resolution::Unknown
                        } else {
                            let s = Slice { insns: &slice, hints: &run_hints, global: &|_| None };
                            jumptable::resolve(&s, &insn, cx.memory())
                        };
                        if matches!(res, Resolution::Unknown) && !distrust.contains(&a) {
                            pending.push(Pending {
                                jump: idx,
                                slice: run[..run.len() - 1].to_vec(),
                                hints: run_hints.clone(),
                            });
                        }
                        let res = fit_table(res, a, seed, sc, &mut boundaries);
                        if let Resolution::Table(t, _) = &res {
                            follow(t, &local, &mut leaders, &mut work, &mut table_exits);
                        }
                        item.resolution = Some(Box::new(res));
                        insns.push(item);
                        break;
                    }
                    Flow::Return | Flow::Stop => {
                        insns.push(item);
                        break;
                    }
                }
                last_cmp = match cmp_now {
                    Some(c) => Some(c),
                    None if f.flags_killed.is_empty() => last_cmp,
                    None => None,
                };
            }
        }

        // Step 1b: code inside the symbol's range that no branch reached (exception landing
        // pads, reached by the unwinder; targets of unresolved jumps) is traversed from the first
        // non-padding instruction of each gap. Only for functions whose symbol gives their size:
        // without one, the range may hold other functions.
        // Step 1a: jumps whose slice lacked a definition (a table base hoisted out of a loop)
        // are tried again now that the whole function is decoded.
        if !pending.is_empty() {
            let mut resolved_any = false;
            // (Not with another jump whose targets are unknown: it might lead anywhere.)
            let others = pending.len() > 1 || has_unknown_jump(&insns, &pending);
            let preds = (!others).then(|| predecessors(&insns, cx));
            let outside = seed.entries();
            for p in std::mem::take(&mut pending) {
                // Where the run that ends in the jump began: what holds there is the value
                // of a register the run does not define.
                let start = p
                    .slice
                    .first()
                    .map_or(insns[p.jump as usize].addr(), |&k| insns[k as usize].addr());
                // (Each base found so is checked again once the function is whole: the
                // table's targets may define the register too. See `stale_bases`.)
                let used = std::cell::RefCell::new(Vec::new());
                let reaching = |r: Gpr| {
                    let x = reaching_lea(&insns, preds.as_ref()?, start, &outside, r)?;
                    used.borrow_mut().push(Based { jump: 0, start, reg: r, value: x });
                    Some(x)
                };
                let global = |r: Gpr| unique_lea(&insns, r).or_else(|| reaching(r));
                let slice: Vec<(&Instruction, RegSet)> = p
                    .slice
                    .iter()
                    .map(|i| (&insns[*i as usize].insn, insns[*i as usize].clobbers))
                    .collect();
                let s = Slice { insns: &slice, hints: &p.hints, global: &global };
                let jmp = insns[p.jump as usize].insn;
                let res = jumptable::resolve(&s, &jmp, cx.memory());
                let res = fit_table(res, jmp.ip(), seed, sc, &mut boundaries);
                if let Resolution::Table(t, _) = &res {
                    resolved_any = true;
                    follow(t, &local, &mut leaders, &mut work, &mut table_exits);
                    insns[p.jump as usize].resolution = Some(Box::new(res));
                    let jump = jmp.ip();
                    based.extend(used.take().into_iter().map(|b| Based { jump, ..b }));
                }
            }
            if resolved_any {
                continue;
            }
        }
        let order: Vec<(u64, u64, u32)> = at
            .in_order(insns.len())
            .into_iter()
            .map(|(a, k)| (a, insns[k as usize].next(), k))
            .collect();
        let gaps = if seed.sized { gap_starts(&order, &mut open, inner, sc) } else { Vec::new() };
        if gaps.is_empty() {
            return Traversal {
                insns,
                order,
                leaders,
                callees,
                table_exits,
                held,
                entering,
                based,
            };
        }
        for a in gaps {
            leaders.insert(a);
            work.push((a, Hint::NONE));
        }
    }
}

/// A resolved table cut to the limit found for its jump (see [`Seed::limits`]) and to
/// instruction boundaries; no table at all if nothing is left.
fn fit_table(
    res: Resolution,
    jump: u64,
    seed: &Seed,
    sc: &mut Scanner<'_>,
    boundaries: &mut Option<Vec<u64>>,
) -> Resolution {
    let Resolution::Table(mut t, origin) = res else { return res };
    if let Some((_, max)) = seed.limits.iter().find(|l| l.0 == jump) {
        t.targets.truncate(*max as usize + 1);
    }
    trim_to_boundaries(&mut t, seed, sc, boundaries);
    if t.targets.is_empty() {
        Resolution::Unknown
    } else {
        Resolution::Table(t, origin)
    }
}

/// Queue a table's targets: this function's as blocks to decode, others' as table exits.
fn follow(
    t: &JumpTable,
    local: &dyn Fn(u64) -> bool,
    leaders: &mut AddrBits,
    work: &mut Vec<(u64, Hint)>,
    exits: &mut Vec<ImageAddr>,
) {
    for tg in &t.targets {
        if local(tg.0) {
            leaders.insert(tg.0);
            work.push((tg.0, Hint::NONE));
        } else {
            exits.push(*tg);
        }
    }
}

/// A table runs past its real end when its bound came from a mask wider than the index's
/// true range (LLVM shrinks tables by known bits): the extra entries belong to the next
/// table and, taken relative to this one's base, land in the middle of instructions. In a
/// function whose extent is known (symbol or unwind info), compiled code decodes linearly
/// without gaps, so every real target is an instruction boundary of that decode; the table is
/// cut at the first entry that is not.
fn trim_to_boundaries(
    t: &mut JumpTable,
    seed: &Seed,
    sc: &mut Scanner<'_>,
    bits: &mut Option<Vec<u64>>,
) {
    if !seed.sized {
        return;
    }
    let (lo, hi) = (seed.bound.start, seed.bound.end);
    let bits = bits.get_or_insert_with(|| {
        let mut v = vec![0u64; ((hi - lo) as usize).div_ceil(64)];
        let mut a = lo;
        while a < hi {
            let k = (a - lo) as usize;
            v[k / 64] |= 1 << (k % 64);
            a = sc.decode(ImageAddr(a)).map_or(a + 1, |i| i.next_ip());
        }
        v
    });
    let on = |a: u64| {
        let k = (a - lo) as usize;
        bits[k / 64] & (1 << (k % 64)) != 0
    };
    if let Some(bad) = t.targets.iter().position(|x| x.0 >= lo && x.0 < hi && !on(x.0)) {
        t.targets.truncate(bad);
    }
}

/// An indirect jump left unresolved by its run's slice, kept for a second try.
struct Pending {
    jump: u32,
    slice: Vec<u32>,
    hints: Vec<Hint>,
}

/// The constant a register holds if the function defines it exactly once, by
/// `lea r, [rip+X]`.
fn unique_lea(insns: &[Insn], r: Gpr) -> Option<u64> {
    let mut defs = insns.iter().filter(|i| i.clobbers.contains(r));
    let d = defs.next()?;
    if defs.next().is_some() {
        return None;
    }
    (d.insn.mnemonic() == Mnemonic::Lea && d.insn.memory_base() == iced_x86::Register::RIP)
        .then(|| d.insn.ip_rel_memory_address())
}

/// Whether an indirect jump of `insns` other than the `pending` ones has no table: it could
/// lead anywhere (a tail call through a register too, until step 3 says it is one).
fn has_unknown_jump(insns: &[Insn], pending: &[Pending]) -> bool {
    insns.iter().enumerate().any(|(k, i)| {
        i.flow == Flow::IndirectJump
            && !matches!(i.resolution.as_deref(), Some(Resolution::Table(..)))
            && !pending.iter().any(|p| p.jump as usize == k)
    })
}

/// Where control comes from into each decoded address: the instructions (indices) that fall
/// through, branch, call and return (not a call of a function that never returns: `cx`
/// says, as the traversal asked it), or jump through a table there.
fn predecessors(insns: &[Insn], cx: &dyn Context) -> AddrMap<Vec<u32>> {
    let mut preds: AddrMap<Vec<u32>> = AddrMap::default();
    for (k, i) in insns.iter().enumerate() {
        if matches!(i.flow, Flow::Call(t) if cx.is_noreturn(t)) {
            continue;
        }
        successors(i, &mut |a| preds.entry(a).or_default().push(k as u32));
    }
    preds
}

/// Every address control may go to from `i` inside what the traversal decoded: the next
/// instruction (after a call too), a branch's target, each distinct target of its table.
fn successors(i: &Insn, to: &mut dyn FnMut(u64)) {
    match i.flow {
        Flow::Next | Flow::Call(_) | Flow::IndirectCall => to(i.next()),
        Flow::CondJump(t) => {
            to(t.0);
            to(i.next());
        }
        Flow::Jump(t) => to(t.0),
        Flow::IndirectJump => {
            if let Some(Resolution::Table(t, _)) = i.resolution.as_deref() {
                let mut seen: Vec<ImageAddr> = Vec::new();
                for tg in &t.targets {
                    if !seen.contains(tg) {
                        seen.push(*tg);
                        to(tg.0);
                    }
                }
            }
        }
        Flow::Return | Flow::Stop => {}
    }
}

/// The constant register `r` holds at address `at` when every path into `at` last defines it
/// by the same `lea r, [rip+X]` (a jump table's base set before a loop and redefined on
/// other paths of the function, where [`unique_lea`] finds several definitions: gzip's
/// `main`). `None` when a path defines it otherwise, or comes from outside the function
/// (its entry, `outside`; or code nothing known leads to, found in a gap) without defining
/// it.
fn reaching_lea(
    insns: &[Insn],
    preds: &AddrMap<Vec<u32>>,
    at: u64,
    outside: &[u64],
    r: Gpr,
) -> Option<u64> {
    const MOST: usize = 1 << 16;
    let mut found = None;
    let mut seen = AddrSet::default();
    let mut todo = vec![at];
    while let Some(a) = todo.pop() {
        if outside.contains(&a) || seen.len() > MOST {
            return None;
        }
        if !seen.insert(a) {
            continue;
        }
        let from = preds.get(&a).map_or(&[][..], Vec::as_slice);
        if from.is_empty() {
            return None;
        }
        for &k in from {
            let p = &insns[k as usize];
            if !p.clobbers.contains(r) {
                todo.push(p.addr());
                continue;
            }
            let lea = p.insn.mnemonic() == Mnemonic::Lea
                && p.insn.memory_base() == iced_x86::Register::RIP;
            let x = lea.then(|| p.insn.ip_rel_memory_address())?;
            if *found.get_or_insert(x) != x {
                return None;
            }
        }
    }
    found
}

/// What step 1 found.
struct Traversal {
    /// In decode order.
    insns: Vec<Insn>,
    /// `(address, next address, index in insns)`, sorted by address.
    order: Vec<(u64, u64, u32)>,
    leaders: AddrBits,
    /// Call and tail-call targets.
    callees: Vec<ImageAddr>,
    /// Jump-table targets outside the function (see [`FuncCfg::table_exits`]).
    table_exits: Vec<ImageAddr>,
    /// The bound before each instruction that has one, and the bounds edges carry into
    /// their targets (see [`undominated_tables`]).
    held: AddrMap<Hint>,
    entering: AddrMap<Vec<Hint>>,
    /// Table bases found by [`reaching_lea`], to be checked again on the whole function.
    based: Vec<Based>,
}

/// A jump table's base register whose value [`reaching_lea`] found at `start` (where the run
/// ending in `jump` began) before the function was whole.
#[derive(Clone, Copy, Debug)]
struct Based {
    jump: u64,
    start: u64,
    reg: Gpr,
    value: u64,
}

/// Jumps whose table base [`reaching_lea`] found while parts of the function were still to be
/// decoded (the code the table leads to, perhaps back into the loop), and which no longer
/// holds on the whole function, or no longer can be told (another jump of unknown targets).
fn stale_bases(t: &Traversal, outside: &[u64], cx: &dyn Context) -> Vec<u64> {
    if t.based.is_empty() {
        return Vec::new();
    }
    let unknown = has_unknown_jump(&t.insns, &[]);
    let preds = predecessors(&t.insns, cx);
    (t.based.iter())
        .filter(|b| {
            unknown || reaching_lea(&t.insns, &preds, b.start, outside, b.reg) != Some(b.value)
        })
        .map(|b| b.jump)
        .collect()
}

/// Indirect jumps whose table bound came from a compare that does not dominate them: some
/// block between the compare's branch and the jump is also entered from elsewhere.
fn undominated_tables(t: &Traversal) -> Vec<u64> {
    let (insns, leaders) = (&t.insns, &t.leaders);
    let guarded: Vec<(u64, u64)> = insns
        .iter()
        .filter_map(|i| match i.resolution.as_deref() {
            Some(Resolution::Table(_, origin)) => Some((*origin, i.addr())),
            _ => None,
        })
        .collect();
    if guarded.is_empty() {
        return Vec::new();
    }
    // Predecessor counts of the leaders, from every edge the traversal found.
    let mut preds: AddrMap<u32> = AddrMap::default();
    let mut add = |a: u64| {
        if leaders.contains(a) {
            *preds.entry(a).or_insert(0) += 1;
        }
    };
    for i in insns {
        successors(i, &mut add);
    }
    // The bound holds from `origin` (entered only by the compare's branch) through straight-
    // line code to the jump: every leader in [origin, jump] must have exactly one entry, or
    // be entered only along edges whose own bounds imply the one the run carried in there
    // (that bound, still the table's: its origin is the table's).
    let joined = |l: u64, origin: u64, n: u32| {
        let Some(h) = t.held.get(&l).filter(|h| h.origin() == origin) else { return false };
        let edges = t.entering.get(&l).map_or(&[][..], Vec::as_slice);
        edges.len() == n as usize && edges.iter().all(|e| e.implies(h))
    };
    let sorted = leaders.sorted();
    guarded
        .into_iter()
        .filter(|(origin, jump)| {
            let lo = sorted.partition_point(|l| l < origin);
            let hi = sorted.partition_point(|l| l <= jump);
            sorted[lo..hi].iter().any(|&l| match preds.get(&l).copied().unwrap_or(0) {
                1 => false,
                n => !joined(l, *origin, n),
            })
        })
        .map(|(_, jump)| jump)
        .collect()
}

/// The first instruction that is not padding in each stretch of the `open` parts of the
/// function's range that no decoded instruction covers. A stretch that starts at another
/// function's entry (`inner`, sorted: an unwind entry inside a symbol's range) is that
/// function's code and is left alone. `open` becomes the stretches code was found in, from
/// that code on: the rest stays padding (or another function's code) whatever the traversal
/// from the new starts finds, so each round looks only where the last one found code, and the
/// refill costs about one pass over the range rather than one per round.
fn gap_starts(
    covered: &[(u64, u64, u32)],
    open: &mut Vec<Range<u64>>,
    inner: &[u64],
    sc: &mut Scanner<'_>,
) -> Vec<u64> {
    let mut out = Vec::new();
    let mut still_open = Vec::new();
    for r in std::mem::take(open) {
        let mut a = r.start;
        // The first instruction that ends after `a`.
        let mut k = covered.partition_point(|c| c.1 <= a);
        while a < r.end {
            while k < covered.len() && covered[k].1 <= a {
                k += 1;
            }
            if k < covered.len() && covered[k].0 <= a {
                a = covered[k].1;
                continue;
            }
            let gap_end = covered.get(k).map_or(r.end, |c| c.0.min(r.end));
            while a < gap_end {
                if inner.binary_search(&a).is_ok() {
                    break;
                }
                match sc.decode(ImageAddr(a)) {
                    Some(i) if is_filler(&i) => a = i.next_ip(),
                    Some(i) if i.next_ip() <= gap_end => {
                        out.push(a);
                        still_open.push(a..gap_end);
                        break;
                    }
                    // An instruction that would overlap decoded code, or bytes that do not
                    // decode: not code we can use.
                    _ => a += 1,
                }
            }
            a = gap_end;
        }
    }
    *open = still_open;
    out
}

/// Instructions compilers use to pad between blocks and functions.
pub(crate) fn is_filler(i: &Instruction) -> bool {
    matches!(i.mnemonic(), Mnemonic::Nop | Mnemonic::Int3)
        || (i.mnemonic() == Mnemonic::Xchg
            && i.op0_kind() == OpKind::Register
            && i.op1_kind() == OpKind::Register
            && i.op0_register() == i.op1_register())
}

/// Set the terminator and out-edges of a block from its last instruction.
#[allow(clippy::too_many_arguments)]
fn finish_block(
    b: &mut Block,
    edges: &mut Vec<(EdgeKind, RawTarget)>,
    last: &Insn,
    cx: &dyn Context,
    local: &dyn Fn(u64) -> bool,
    tables: &mut Vec<JumpTable>,
    may_return: &mut bool,
    next_decoded: bool,
) {
    let next = last.next();
    let to = |t: ImageAddr| {
        if local(t.0) {
            RawTarget::Local(t)
        } else {
            RawTarget::Function(t)
        }
    };
    let fall = |edges: &mut Vec<(EdgeKind, RawTarget)>| {
        if next_decoded {
            edges.push((EdgeKind::FallThrough, RawTarget::Local(ImageAddr(next))));
        }
    };
    match last.flow {
        Flow::Next => {
            b.term = Terminator::FallThrough;
            if local(next) {
                fall(edges);
            } else {
                // Straight into the next function.
                *may_return = true;
                b.term = Terminator::TailCall;
                edges.push((EdgeKind::TailCall, RawTarget::Function(ImageAddr(next))));
            }
        }
        Flow::Call(t) => {
            b.term = Terminator::Call;
            edges.push((EdgeKind::Call, RawTarget::Function(t)));
            if !cx.is_noreturn(t) {
                fall(edges);
            }
        }
        Flow::IndirectCall => {
            b.term = Terminator::IndirectCall;
            fall(edges);
        }
        Flow::CondJump(t) => {
            b.term = Terminator::CondJump;
            match to(t) {
                RawTarget::Local(_) => edges.push((EdgeKind::Branch, RawTarget::Local(t))),
                other => {
                    *may_return = true;
                    edges.push((EdgeKind::TailCall, other));
                }
            }
            if local(next) {
                fall(edges);
            } else {
                // Not taken, it runs on past the function's end into the next one, as a
                // `Flow::Next` does: glibc's `__memmove_chk_*` is `cmp; jb __chk_fail`, then
                // padding and `__memmove_*`. Without this edge the registers that function
                // reads (the copy's source and destination) were taken for dead at
                // `__memmove_chk`'s entry, and a probe there used them as scratch.
                *may_return = true;
                edges.push((EdgeKind::TailCall, RawTarget::Function(ImageAddr(next))));
            }
        }
        Flow::Jump(t) => match to(t) {
            RawTarget::Local(_) => {
                b.term = Terminator::Jump;
                edges.push((EdgeKind::Jump, RawTarget::Local(t)));
            }
            other => {
                *may_return = true;
                b.term = Terminator::TailCall;
                edges.push((EdgeKind::TailCall, other));
            }
        },
        Flow::IndirectJump => match last.resolution.as_deref() {
            Some(Resolution::Table(t, _)) => {
                b.term = Terminator::JumpTable(TableId(tables.len() as u32));
                let mut seen: Vec<ImageAddr> = Vec::with_capacity(t.targets.len());
                for tg in &t.targets {
                    if !seen.contains(tg) {
                        seen.push(*tg);
                        match to(*tg) {
                            RawTarget::Local(a) => {
                                edges.push((EdgeKind::Table, RawTarget::Local(a)))
                            }
                            other => {
                                *may_return = true;
                                edges.push((EdgeKind::TailCall, other))
                            }
                        }
                    }
                }
                tables.push(t.clone());
            }
            _ => {
                *may_return = true;
                b.term = Terminator::Unanalysable;
            }
        },
        Flow::Return => {
            *may_return = true;
            b.term = Terminator::Return;
            edges.push((EdgeKind::Return, RawTarget::None));
        }
        Flow::Stop => b.term = Terminator::Stop,
    }
}
