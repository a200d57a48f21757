//! Block counts from fewer counters: where to put counters in a function so that every
//! block's count follows from theirs by flow conservation, and how to work the counts out.
//!
//! Each block `b` is two nodes, `in(b)` and `out(b)`, joined by its *split edge* (a counter at
//! the block's start measures it); its ways out join `out(b)` to the next block's `in` or to a
//! virtual node `V` that stands for everything outside the function. Flow is conserved at
//! every node: what enters a block's start leaves by one of its edges. Edges no counter can
//! stand on (an unconditional jump, a fall-through, a table's jump, a call's departure and its
//! return, ways in from elsewhere) are *unmeasurable*; a conditional branch's two sides and the
//! split edges are *measurable*. The unknown flows must form a forest over the components the
//! unmeasurable edges make: then each is found by peeling leaves (Knuth 1973; Ball and Larus
//! 1994; gcov's arc profiling). The counters go on the measurable edges left out of a
//! maximum-weight spanning forest, so the edges expected to run most are the ones derived.
//!
//! Exactness rests on conservation, so every way flow can start or stop other than through
//! the function's edges must be an unmeasurable edge to `V` ([`FlowBlock::from_outside`] at a
//! block's start, [`FlowBlock::stops_inside`] inside it) or a known amount handed to
//! [`derive`] ([`Inject`]): a thread taken into the cache, or stopped there when it is left.
//! A thread killed in the middle of a block that has no edge to `V` (another thread called
//! `exit` while it computed) leaves one unit unaccounted; that is the scheme's known limit.

use crate::translate::{block_decoder, table_shape, Module};
use iced_x86::{Code, FlowControl};
use kerf_analysis::cfg::{Cfg, EdgeKind, EdgeTarget, FuncId, Terminator};
use kerf_arch::hash::{AddrMap as HashMap, AddrSet as HashSet};
use kerf_arch::x86_64::relocation_hazard;
use kerf_arch::ImageAddr;

/// One block of a function, as the placement sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowBlock {
    /// How often it is expected to run, relative to the function's other blocks.
    pub weight: u64,
    /// Flow may enter its start from outside the function's edges: the function's entry, a
    /// return site, a landing pad, a block other functions jump into, a table's target kerf
    /// may enter through the lookup.
    pub from_outside: bool,
    /// Flow may stop or start inside it: a call (departure and return), a system call (the
    /// thread may end there), an instruction that leaves for the original code.
    pub stops_inside: bool,
    /// Its ways out.
    pub outs: Vec<Out>,
    /// How often each side of its conditional branch (`[taken, not_taken]`) was taken in an
    /// earlier run, where that is known: a side's own weight. Without it a side weighs as
    /// the lighter of its two blocks, which two hot blocks joined by a side that never runs
    /// (a guard that is never true) make heavy.
    pub sides: Option<[u64; 2]>,
}

/// A way out of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Out {
    pub to: To,
    /// A conditional branch's side: a counter can stand on it.
    pub side: Option<Side>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum To {
    Block(usize),
    /// Out of the function (returns, calls' departures, tail calls, unknown targets).
    Outside,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Taken = 0,
    NotTaken = 1,
}

/// Which counters a function gets: per block, whether its start counts, and per block that
/// ends in a conditional branch, which sides count (`[taken, not_taken]`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    pub blocks: Vec<bool>,
    pub sides: Vec<[bool; 2]>,
}

impl Placement {
    /// How many counters it places (blocks' and branch sides').
    pub fn counters(&self) -> usize {
        self.blocks.iter().filter(|&&c| c).count()
            + self.sides.iter().flatten().filter(|&&c| c).count()
    }
}

/// Where a known amount of flow appears or vanishes: at a block's start (`in`) or past it,
/// inside the block (`out`). Positive: threads that started there (taken in); negative:
/// threads that stopped there (left there when kerf removed the cache).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inject {
    pub block: usize,
    pub inside: bool,
    pub amount: i64,
}

/// Why counts could not be derived.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DeriveError {
    /// The inputs do not fit the placement (a different function, or a counter missing).
    Shape { what: &'static str, expected: usize, got: usize },
    /// Known flow handed for a block the function does not have.
    NoBlock { block: usize },
    /// The placement's uncounted edges do not form a forest over the components (not the
    /// placement of these blocks): some count cannot be worked out.
    NotAForest,
    /// Conservation does not hold for the measured values: flow started or stopped where
    /// nothing said it could (a block of this count came out negative, or a part of the
    /// function does not balance by this much).
    Unbalanced { block: Option<usize>, by: i64 },
}

impl std::fmt::Display for DeriveError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DeriveError::Shape { what, expected, got } => {
                write!(f, "{what}: {got} values for a placement of {expected}")
            }
            DeriveError::NoBlock { block } => {
                write!(f, "known flow for block {block}, not one of its")
            }
            DeriveError::NotAForest => write!(f, "the uncounted edges are not a forest"),
            DeriveError::Unbalanced { block: Some(b), by } => {
                write!(f, "block {b}'s derived count came out {by}")
            }
            DeriveError::Unbalanced { block: None, by } => {
                write!(f, "the measured flow does not balance by {by}")
            }
        }
    }
}

impl std::error::Error for DeriveError {}

const V: usize = 0;

fn node_in(b: usize) -> usize {
    1 + 2 * b
}

fn node_out(b: usize) -> usize {
    2 + 2 * b
}

/// What an edge of the flow graph stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Split(usize),
    Side(usize, Side),
    /// No counter can stand on it.
    Fixed,
}

#[derive(Clone, Copy, Debug)]
struct Edge {
    from: usize,
    to: usize,
    kind: Kind,
    weight: u64,
}

/// Relative costs of a counter on each kind of edge, for ties of weight: a taken side's
/// counter is out of line (the branch goes to it, it jumps on), a not-taken side's and a
/// block's sit in line.
fn cost(k: Kind) -> u8 {
    match k {
        Kind::Split(_) => 0,
        Kind::Side(_, Side::NotTaken) => 1,
        Kind::Side(_, Side::Taken) => 2,
        Kind::Fixed => 3,
    }
}

fn edges(blocks: &[FlowBlock]) -> Vec<Edge> {
    let mut v = Vec::with_capacity(blocks.len() * 4);
    for (b, fb) in blocks.iter().enumerate() {
        v.push(Edge { from: node_in(b), to: node_out(b), kind: Kind::Split(b), weight: fb.weight });
        if fb.from_outside {
            v.push(Edge { from: V, to: node_in(b), kind: Kind::Fixed, weight: 0 });
        }
        if fb.stops_inside {
            v.push(Edge { from: node_out(b), to: V, kind: Kind::Fixed, weight: 0 });
        }
        for o in &fb.outs {
            let (to, w) = match o.to {
                To::Block(t) => (node_in(t), fb.weight.min(blocks[t].weight)),
                To::Outside => (V, fb.weight / 8),
            };
            // (One more than it ran, as blocks weigh: a side that never ran still weighs.)
            let w = match (o.side, fb.sides) {
                (Some(s), Some(known)) => known[s as usize].saturating_add(1),
                _ => w,
            };
            // Two sides of one branch to one place are two edges all the same.
            let kind = o.side.map_or(Kind::Fixed, |s| Kind::Side(b, s));
            v.push(Edge { from: node_out(b), to, kind, weight: w });
        }
    }
    v
}

/// Union-find over the graph's nodes.
struct Sets(Vec<usize>);

impl Sets {
    fn new(n: usize) -> Sets {
        Sets((0..n).collect())
    }

    fn find(&mut self, mut x: usize) -> usize {
        while self.0[x] != x {
            self.0[x] = self.0[self.0[x]];
            x = self.0[x];
        }
        x
    }

    /// Join the sets of `a` and `b`; false if they were one already.
    fn join(&mut self, a: usize, b: usize) -> bool {
        let (a, b) = (self.find(a), self.find(b));
        if a == b {
            return false;
        }
        self.0[a] = b;
        true
    }
}

/// The counters for a function's blocks: every unmeasurable edge is derived (they may close
/// cycles among themselves: their flows are then not known, but no block's count needs
/// them), then measurable edges by falling weight join the derived forest where they link
/// two of its parts, and are counted where they would close a cycle.
pub fn place(blocks: &[FlowBlock]) -> Placement {
    let all = edges(blocks);
    let mut sets = Sets::new(1 + 2 * blocks.len());
    for e in all.iter().filter(|e| e.kind == Kind::Fixed) {
        sets.join(e.from, e.to);
    }
    let mut measurable: Vec<&Edge> = all.iter().filter(|e| e.kind != Kind::Fixed).collect();
    // Heaviest first; at equal weight the dearest counter is the one to leave out.
    measurable.sort_by(|a, b| b.weight.cmp(&a.weight).then(cost(b.kind).cmp(&cost(a.kind))));
    let mut p =
        Placement { blocks: vec![false; blocks.len()], sides: vec![[false; 2]; blocks.len()] };
    for e in measurable {
        if sets.join(e.from, e.to) {
            continue;
        }
        match e.kind {
            Kind::Split(b) => p.blocks[b] = true,
            Kind::Side(b, s) => p.sides[b][s as usize] = true,
            Kind::Fixed => unreachable!("fixed edges were joined first"),
        }
    }
    p
}

/// What [`derive`] works out: every block's count, and how often each side of each block's
/// conditional branch was taken (`[0, 0]` for a block with none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Flows {
    pub blocks: Vec<u64>,
    pub sides: Vec<[u64; 2]>,
}

/// Every block's count and every branch side's from the counters of placement `p`
/// (`place(blocks)`): `counted[b]` the count of block `b`'s counter where it has one,
/// `sides[b]` its branch's sides' where they have one (other values are ignored), and the
/// known flow that started or stopped away from the function's edges.
pub fn derive(
    blocks: &[FlowBlock],
    p: &Placement,
    counted: &[u64],
    sides: &[[u64; 2]],
    inject: &[Inject],
) -> Result<Flows, DeriveError> {
    let n = blocks.len();
    for (what, got) in [
        ("placement blocks", p.blocks.len()),
        ("placement sides", p.sides.len()),
        ("block counts", counted.len()),
        ("side counts", sides.len()),
    ] {
        if got != n {
            return Err(DeriveError::Shape { what, expected: n, got });
        }
    }
    let all = edges(blocks);
    let nodes = 1 + 2 * n;
    // Components of the unmeasurable edges, and the balance (in minus out) of each from the
    // measured edges and the known flow.
    let mut sets = Sets::new(nodes);
    for e in all.iter().filter(|e| e.kind == Kind::Fixed) {
        sets.join(e.from, e.to);
    }
    let mut net = vec![0i128; nodes];
    let mut tree: Vec<(usize, usize, Kind)> = Vec::new();
    let measured = |k: Kind| match k {
        Kind::Split(b) => p.blocks[b].then(|| counted[b]),
        Kind::Side(b, s) => p.sides[b][s as usize].then(|| sides[b][s as usize]),
        Kind::Fixed => None,
    };
    for e in &all {
        if e.kind == Kind::Fixed {
            continue;
        }
        let (a, b) = (sets.find(e.from), sets.find(e.to));
        match measured(e.kind) {
            Some(v) => {
                net[b] += i128::from(v);
                net[a] -= i128::from(v);
            }
            None => tree.push((a, b, e.kind)),
        }
    }
    for i in inject {
        if i.block >= n {
            return Err(DeriveError::NoBlock { block: i.block });
        }
        // Known flow on an edge between the block and `V`: what starts there left `V`.
        let at = if i.inside { node_out(i.block) } else { node_in(i.block) };
        net[sets.find(at)] += i128::from(i.amount);
        net[sets.find(V)] -= i128::from(i.amount);
    }
    // Each component's unknown edges, as one array cut by offsets.
    let mut degree = vec![0usize; nodes];
    for &(a, b, _) in &tree {
        if a == b {
            // A measurable edge inside a component of unmeasurable ones would close a cycle:
            // placed edges never do.
            return Err(DeriveError::NotAForest);
        }
        degree[a] += 1;
        degree[b] += 1;
    }
    let mut offset = vec![0usize; nodes + 1];
    for c in 0..nodes {
        offset[c + 1] = offset[c] + degree[c];
    }
    let mut fill = offset.clone();
    let mut incident = vec![0usize; offset[nodes]];
    for (k, &(a, b, _)) in tree.iter().enumerate() {
        incident[fill[a]] = k;
        fill[a] += 1;
        incident[fill[b]] = k;
        fill[b] += 1;
    }
    // Peel the forest's leaves: a component with one unknown edge left gives that edge the
    // flow that balances it.
    let mut flow: Vec<Option<i128>> = vec![None; tree.len()];
    let mut leaves: Vec<usize> = (0..nodes).filter(|&c| degree[c] == 1).collect();
    while let Some(c) = leaves.pop() {
        if degree[c] != 1 {
            continue;
        }
        let own = &incident[offset[c]..offset[c + 1]];
        let Some(&k) = own.iter().find(|&&k| flow[k].is_none()) else { continue };
        let (a, b, _) = tree[k];
        // Into c: the flow that brings its balance to zero; out of c: its surplus.
        let (f, other) = if b == c { (-net[c], a) } else { (net[c], b) };
        flow[k] = Some(f);
        net[c] = 0;
        if b == c {
            net[a] -= f;
        } else {
            net[b] += f;
        }
        degree[c] = 0;
        degree[other] -= 1;
        if degree[other] == 1 {
            leaves.push(other);
        }
    }
    // What is left balances, or the flow does not add up.
    for (c, &left) in net.iter().enumerate() {
        if sets.find(c) == c && left != 0 {
            return Err(DeriveError::Unbalanced { block: None, by: left as i64 });
        }
    }
    // The measured values where counters stood, then the tree's flows.
    let mut out = Flows {
        blocks: (0..n).map(|b| if p.blocks[b] { counted[b] } else { 0 }).collect(),
        sides: (0..n)
            .map(|b| [0, 1].map(|s| if p.sides[b][s] { sides[b][s] } else { 0 }))
            .collect(),
    };
    for (k, &(_, _, kind)) in tree.iter().enumerate() {
        let f = flow[k];
        match kind {
            Kind::Split(b) => {
                let f = f.ok_or(DeriveError::NotAForest)?;
                out.blocks[b] = u64::try_from(f)
                    .map_err(|_| DeriveError::Unbalanced { block: Some(b), by: f as i64 })?;
            }
            // (A side's flow only weighs the next placement: one that comes out below zero,
            // from flow stopped where nothing said, weighs nothing rather than failing the
            // blocks' counts.)
            Kind::Side(b, s) => {
                out.sides[b][s as usize] = f.and_then(|f| u64::try_from(f).ok()).unwrap_or(0)
            }
            Kind::Fixed => {}
        }
    }
    Ok(out)
}

// ---- From a module's CFG ----

/// What the placement needs to know of a whole module: block starts that more than one
/// function holds (their functions keep a counter in every block: a block translated as one
/// function's is entered from the other's blocks), and blocks other functions jump into.
#[derive(Clone, Debug, Default)]
pub struct ModuleFacts {
    shared: HashSet<ImageAddr>,
    landings: HashSet<ImageAddr>,
    /// How often blocks ran in an earlier run (by image address of their start): a
    /// function any of whose blocks is here takes these as its weights, the others static
    /// ones from their loops.
    weights: HashMap<u64, u64>,
    /// How often the sides of blocks' conditional branches were taken in that run, where
    /// they were worked out (by image address of the block's start).
    sides: HashMap<u64, [u64; 2]>,
    /// A check of the scheme (tests): every block counts all the same, so that the counts
    /// worked out from the placement's counters can be compared with them.
    pub check: bool,
}

/// How often a block ran in an earlier run (by image address of its start), and how often
/// each side of its conditional branch was taken where that was worked out
/// (`[taken, not_taken]`): what the next run's placement weighs ([`module_facts`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ran {
    pub start: u64,
    pub count: u64,
    pub sides: Option<[u64; 2]>,
}

/// What of [`ModuleFacts`] the CFG alone decides: block starts more than one function holds,
/// and blocks other functions jump or run into (both sorted). The same for every run on one
/// analysis, so the session keeps it beside the analysis: worked out for python3.11's 222 k
/// blocks it took 10-15 ms of every counting start, before anything could be placed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModuleShape {
    pub shared: Vec<ImageAddr>,
    pub landings: Vec<ImageAddr>,
}

/// [`ModuleShape`] of `cfg`: one pass over every function's blocks and edges.
pub fn module_shape(cfg: &Cfg) -> ModuleShape {
    // Every block start, sorted: a start twice is held by two functions. (Sorted and searched,
    // and a block's end first compared with the next block's start, rather than every start
    // hashed, once for the module and once a function: python3.11's 222 k blocks took 16 ms
    // of every counting start, 8 ms then.)
    let mut starts: Vec<ImageAddr> = cfg.blocks.iter().map(|b| b.start).collect();
    starts.sort_unstable();
    let mut shared: Vec<ImageAddr> =
        starts.windows(2).filter(|w| w[0] == w[1]).map(|w| w[0]).collect();
    shared.dedup();
    starts.dedup();
    let is_start = |a: ImageAddr| starts.binary_search(&a).is_ok();
    let mut landings = Vec::new();
    for f in 0..cfg.functions.len() {
        let f = FuncId(f as u32);
        let own = cfg.function(f).blocks.clone();
        // (A function's blocks are in address order.)
        let blocks = cfg.blocks_of(f);
        let its_start = |a: ImageAddr| blocks.binary_search_by_key(&a, |b| b.start).is_ok();
        for (k, b) in blocks.iter().enumerate() {
            // A block that runs off its end goes on to the block starting there in the cache,
            // edge or not (a `lock` prefix jumped over: glibc's `je +1` lands one byte into
            // `lock cmpxchg`, and the analysis gives the prefixed copy no edge on).
            let next = blocks.get(k + 1).is_some_and(|n| n.start == b.end());
            if runs_on(b.term) && !next && !its_start(b.end()) && is_start(b.end()) {
                landings.push(b.end());
            }
            for e in cfg.edges_of(b) {
                if let EdgeTarget::Block(t) = e.target {
                    if !own.contains(&t.0) {
                        landings.push(cfg.block(t).start);
                    }
                }
            }
        }
    }
    landings.sort_unstable();
    landings.dedup();
    ModuleShape { shared, landings }
}

/// [`ModuleFacts`] of `cfg`, its [`ModuleShape`] worked out here; `ran` from an earlier run
/// ([`ModuleFacts::weights`]).
pub fn module_facts(cfg: &Cfg, check: bool, ran: &[Ran]) -> ModuleFacts {
    facts_of(&module_shape(cfg), check, ran)
}

/// [`ModuleFacts`] of a module of shape `shape` (its [`module_shape`]); `ran` from an earlier
/// run ([`ModuleFacts::weights`]).
pub fn facts_of(shape: &ModuleShape, check: bool, ran: &[Ran]) -> ModuleFacts {
    ModuleFacts {
        shared: shape.shared.iter().copied().collect(),
        landings: shape.landings.iter().copied().collect(),
        weights: ran.iter().map(|r| (r.start, r.count)).collect(),
        sides: ran.iter().filter_map(|r| Some((r.start, r.sides?))).collect(),
        check,
    }
}

/// Whether a block with terminator `t` may go on to the next address.
fn runs_on(t: Terminator) -> bool {
    matches!(
        t,
        Terminator::FallThrough
            | Terminator::CondJump
            | Terminator::Call
            | Terminator::IndirectCall
    )
}

/// A function's flow graph and its counters, block by block in the order of
/// [`Cfg::blocks_of`] (blocks with no bytes left out: nothing runs them in a cache).
#[derive(Clone, Debug)]
pub struct FunctionFlow {
    /// Each flow block's start and end (original image addresses), in address order as the
    /// CFG keeps a function's blocks, and the module's bias (image to runtime address).
    pub starts: Vec<ImageAddr>,
    pub ends: Vec<ImageAddr>,
    pub bias: u64,
    pub blocks: Vec<FlowBlock>,
    pub placement: Placement,
    /// The function has an indirect jump of unknown targets: the lookup may bring flow to
    /// any of its blocks, so every block's indirect entry counts what arrives there (known
    /// flow for [`derive`]), and its jump tables that go through the lookup are ways out.
    pub arrivals: bool,
}

impl FunctionFlow {
    /// The flow block that starts at `start` (a runtime address: the module's bias added).
    /// (Searched in the starts, which are in address order: a map per function was most of
    /// the placement's allocations, and its lookups missed the caches.)
    pub fn index(&self, start: u64) -> Option<usize> {
        self.starts.binary_search(&ImageAddr(start.wrapping_sub(self.bias))).ok()
    }

    /// The flow block whose bytes hold runtime address `a`.
    pub fn holding(&self, a: u64) -> Option<usize> {
        let a = a.wrapping_sub(self.bias);
        let k = self.starts.partition_point(|s| s.0 <= a).checked_sub(1)?;
        (a < self.ends[k].0).then_some(k)
    }
}

/// Whether a tail call's target `t` is the address after block `b` (a conditional branch's
/// not-taken side that runs on into the next function).
fn e_next(cfg: &Cfg, b: &kerf_analysis::cfg::Block, t: EdgeTarget) -> bool {
    match t {
        EdgeTarget::Function(g) => cfg.function(g).entry == b.end(),
        EdgeTarget::Address(a) => a == b.end(),
        _ => false,
    }
}

/// Static weights: a block in `d` loops runs about 8^d times as often as one in none.
fn loop_weights(n: usize, succ: &[Vec<usize>], entries: &[usize]) -> Vec<u64> {
    // Back edges of a depth-first walk from the ways in, then each header's natural loop
    // (the blocks that reach one of its back edges' tails without passing the header).
    let mut state = vec![0u8; n];
    let mut back: HashMap<u64, Vec<usize>> = HashMap::default();
    for &root in entries {
        if state[root] != 0 {
            continue;
        }
        let mut stack = vec![(root, 0usize)];
        state[root] = 1;
        while let Some(&mut (b, ref mut k)) = stack.last_mut() {
            if let Some(&t) = succ[b].get(*k) {
                *k += 1;
                match state[t] {
                    0 => {
                        state[t] = 1;
                        stack.push((t, 0));
                    }
                    1 => back.entry(t as u64).or_default().push(b),
                    _ => {}
                }
            } else {
                state[b] = 2;
                stack.pop();
            }
        }
    }
    let mut pred = vec![Vec::new(); n];
    for (b, ts) in succ.iter().enumerate() {
        for &t in ts {
            pred[t].push(b);
        }
    }
    let mut depth = vec![0u32; n];
    let mut mark = vec![usize::MAX; n];
    for (&h, tails) in &back {
        let h = h as usize;
        mark[h] = h;
        depth[h] += 1;
        let mut work: Vec<usize> = tails.iter().copied().filter(|&t| mark[t] != h).collect();
        for &t in &work {
            mark[t] = h;
            depth[t] += 1;
        }
        while let Some(x) = work.pop() {
            for &p in &pred[x] {
                if mark[p] != h {
                    mark[p] = h;
                    depth[p] += 1;
                    work.push(p);
                }
            }
        }
    }
    depth.iter().map(|&d| 1u64 << (3 * d.min(6))).collect()
}

/// Function `f`'s flow graph and counters, or `None` where every block must count: a block
/// another function also holds, an indirect jump whose targets are unknown where every
/// instruction of the function gets an entry ahead ([`Module::inside_entries`]: flow may
/// start inside any block), or no blocks.
pub fn function_flow(m: &Module<'_>, facts: &ModuleFacts, f: FuncId) -> Option<FunctionFlow> {
    let cfg = m.cfg;
    let func = cfg.function(f);
    let all = cfg.blocks_of(f);
    if all.iter().any(|b| facts.shared.contains(&b.start)) {
        return None;
    }
    let arrivals = all.iter().any(|b| b.term == Terminator::Unanalysable);
    if arrivals && m.inside_entries {
        return None;
    }
    // (Which dispatches go through the lookup, where arrivals count.)
    let look = crate::translate::TableLook::default();
    let kept: Vec<usize> = (0..all.len()).filter(|&k| all[k].len > 0).collect();
    if kept.is_empty() {
        return None;
    }
    let starts: Vec<ImageAddr> = kept.iter().map(|&k| all[k].start).collect();
    let ends: Vec<ImageAddr> = kept.iter().map(|&k| all[k].end()).collect();
    let at: HashMap<u64, usize> = starts.iter().enumerate().map(|(i, s)| (s.0, i)).collect();
    // A block of another function is outside, even where it lies inside this one's bytes.
    let target = |t: EdgeTarget| match t {
        EdgeTarget::Block(id) if func.blocks.contains(&id.0) => {
            at.get(&cfg.block(id).start.0).map_or(To::Outside, |&i| To::Block(i))
        }
        _ => To::Outside,
    };
    let mut blocks: Vec<FlowBlock> = Vec::with_capacity(kept.len());
    let mut return_sites: Vec<usize> = Vec::new();
    for &k in &kept {
        let b = &all[k];
        let (hazard, stops) = block_stops(m, b);
        let stops = stops || b.term == Terminator::Stop;
        let cond = b.term == Terminator::CondJump && !hazard;
        let mut outs = Vec::new();
        // Where running off the end goes (the translation links it whatever the edges say).
        let next = at.get(&b.end().0).map_or(To::Outside, |&i| To::Block(i));
        let mut ran_on = false;
        let looked_up = arrivals
            && matches!(b.term, Terminator::JumpTable(_))
            && table_shape(m, b, &look).is_none();
        for e in cfg.edges_of(b) {
            ran_on |= e.kind == EdgeKind::FallThrough
                || (b.term == Terminator::CondJump
                    && e.kind == EdgeKind::TailCall
                    && e_next(cfg, b, e.target));
            let side =
                |taken: bool| cond.then_some(if taken { Side::Taken } else { Side::NotTaken });
            let out = match (b.term, e.kind) {
                (Terminator::Call | Terminator::IndirectCall, EdgeKind::FallThrough) => {
                    // The call's return: flow comes back to the return site from outside.
                    if let To::Block(r) = target(e.target) {
                        return_sites.push(r);
                    }
                    continue;
                }
                (_, EdgeKind::Call | EdgeKind::Return) => Out { to: To::Outside, side: None },
                // A table the translation reads through the lookup: its targets' entries
                // count the arrival.
                (_, EdgeKind::Table) if looked_up => Out { to: To::Outside, side: None },
                (Terminator::CondJump, EdgeKind::Branch) => {
                    Out { to: target(e.target), side: side(true) }
                }
                (Terminator::CondJump, EdgeKind::FallThrough) => {
                    Out { to: target(e.target), side: side(false) }
                }
                (Terminator::CondJump, EdgeKind::TailCall) => {
                    // Either side may leave the function: the one to the next address is the
                    // fall-through.
                    Out { to: To::Outside, side: side(!e_next(cfg, b, e.target)) }
                }
                _ => Out { to: target(e.target), side: None },
            };
            outs.push(out);
        }
        if !ran_on {
            match b.term {
                Terminator::FallThrough => outs.push(Out { to: next, side: None }),
                Terminator::CondJump => {
                    let side = cond.then_some(Side::NotTaken);
                    outs.push(Out { to: next, side });
                }
                Terminator::Call | Terminator::IndirectCall => {
                    if let To::Block(r) = next {
                        return_sites.push(r);
                    }
                }
                _ => {}
            }
        }
        if matches!(b.term, Terminator::Call | Terminator::IndirectCall | Terminator::Unanalysable)
            || outs.is_empty()
        {
            outs.push(Out { to: To::Outside, side: None });
        }
        blocks.push(FlowBlock {
            weight: 1,
            from_outside: b.start == func.entry || facts.landings.contains(&b.start),
            stops_inside: stops,
            outs,
            sides: None,
        });
    }
    for r in return_sites {
        blocks[r].from_outside = true;
    }
    // Blocks no edge of the function reaches enter from outside (landing pads, code reached
    // through pointers); a conditional branch whose two sides go to one place keeps both.
    let mut reached = vec![false; blocks.len()];
    let mut succ = vec![Vec::new(); blocks.len()];
    for (b, fb) in blocks.iter().enumerate() {
        for o in &fb.outs {
            if let To::Block(t) = o.to {
                reached[t] = true;
                succ[b].push(t);
            }
        }
    }
    for (fb, r) in blocks.iter_mut().zip(&reached) {
        if !r {
            fb.from_outside = true;
        }
    }
    // Weights: how often each block ran before where that is known (one more, so that a
    // block that never ran still weighs), and its branch's sides, else from the loops it is
    // in.
    let known: Vec<Option<u64>> = starts.iter().map(|s| facts.weights.get(&s.0).copied()).collect();
    if known.iter().any(Option::is_some) {
        for ((fb, w), s) in blocks.iter_mut().zip(&known).zip(&starts) {
            fb.weight = w.unwrap_or(0).saturating_add(1);
            fb.sides = facts.sides.get(&s.0).copied();
        }
    } else {
        let entries: Vec<usize> = (0..blocks.len()).filter(|&b| blocks[b].from_outside).collect();
        for (fb, w) in blocks.iter_mut().zip(loop_weights(succ.len(), &succ, &entries)) {
            fb.weight = w;
        }
    }
    let placement = place(&blocks);
    Some(FunctionFlow { starts, ends, bias: m.bias, blocks, placement, arrivals })
}

/// Of block `b`: whether the cache leaves it or it does not decode whole (a hazard: flow
/// stops there), and whether flow may stop or start inside it: a hazard, a call before the
/// last instruction (its return lands inside), a system call (a thread ends, a clone's child
/// starts), a `gs` base set by the thread (it leaves the cache there), a trap. Decoded an
/// instruction at a time into one `Instruction` (a vector of them a block was a sixth of
/// the placement's time on python3.11).
fn block_stops(m: &Module<'_>, b: &kerf_analysis::cfg::Block) -> (bool, bool) {
    let Some(mut d) = block_decoder(m, b.start, b.len) else { return (true, true) };
    let mut i = iced_x86::Instruction::default();
    let (mut n, mut hazard, mut stops, mut call_before) = (0u32, false, false, false);
    while n < b.insns && d.can_decode() {
        d.decode_out(&mut i);
        // (A call is "before the last" once another instruction follows it.)
        stops |= call_before;
        hazard |= relocation_hazard(&i).is_some();
        stops |= matches!(i.code(), Code::Syscall | Code::Sysenter | Code::Int_imm8 | Code::Int3)
            || matches!(i.code(), Code::Wrgsbase_r32 | Code::Wrgsbase_r64);
        call_before = matches!(i.flow_control(), FlowControl::Call | FlowControl::IndirectCall);
        n += 1;
    }
    hazard |= n < b.insns;
    (hazard, stops || hazard)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift), so that failures reproduce.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// A random function of `n` blocks: block 0 the entry; each block ends in a fall-through,
    /// a jump, a conditional branch, a call (a departure with its return site the next
    /// block), or a return.
    fn function(r: &mut Rng, n: usize) -> Vec<FlowBlock> {
        let mut v: Vec<FlowBlock> = (0..n)
            .map(|_| FlowBlock {
                weight: 1 << r.below(12),
                from_outside: false,
                stops_inside: r.below(10) == 0,
                outs: Vec::new(),
                sides: None,
            })
            .collect();
        v[0].from_outside = true;
        for b in 0..n {
            let any = |r: &mut Rng| {
                if r.below(12) == 0 {
                    To::Outside
                } else {
                    To::Block(r.below(n as u64) as usize)
                }
            };
            let next = if b + 1 < n { To::Block(b + 1) } else { To::Outside };
            match r.below(6) {
                0 => v[b].outs.push(Out { to: next, side: None }),
                1 => {
                    let t = any(r);
                    v[b].outs.push(Out { to: t, side: None })
                }
                2 | 3 => {
                    let t = any(r);
                    v[b].outs.push(Out { to: t, side: Some(Side::Taken) });
                    v[b].outs.push(Out { to: next, side: Some(Side::NotTaken) });
                }
                4 => {
                    v[b].outs.push(Out { to: To::Outside, side: None });
                    if let To::Block(t) = next {
                        v[t].from_outside = true;
                    }
                }
                _ => v[b].outs.push(Out { to: To::Outside, side: None }),
            }
        }
        v
    }

    /// What really ran: walks from the entry (and from other ways in), each block and side
    /// counted as it goes. Walks stop at a way out, or inside a block that may stop; with
    /// `strays`, some also start and stop inside blocks that say neither (threads taken in
    /// and left), and those are handed back as known flow.
    struct Truth {
        blocks: Vec<u64>,
        sides: Vec<[u64; 2]>,
        inject: Vec<Inject>,
    }

    fn walk(r: &mut Rng, f: &[FlowBlock], walks: usize, strays: bool) -> Truth {
        let n = f.len();
        let mut t = Truth { blocks: vec![0; n], sides: vec![[0; 2]; n], inject: Vec::new() };
        let starts: Vec<usize> = (0..n).filter(|&b| f[b].from_outside).collect();
        for _ in 0..walks {
            // Where it starts: a way in (counted at the block's start), inside a block that
            // may start flow, or (a stray) inside any block.
            let (mut b, mut inside) = match r.below(8) {
                0 => match (0..n).find(|&b| f[b].stops_inside && r.below(3) == 0) {
                    Some(b) => (b, true),
                    None => (0, false),
                },
                1 if strays => {
                    let b = r.below(n as u64) as usize;
                    t.inject.push(Inject { block: b, inside: true, amount: 1 });
                    (b, true)
                }
                _ => (starts[r.below(starts.len() as u64) as usize], false),
            };
            for step in 0.. {
                if step == 200 {
                    // A walk that went on too long stops here: told.
                    t.inject.push(Inject { block: b, inside: false, amount: -1 });
                    break;
                }
                if !inside {
                    t.blocks[b] += 1;
                }
                inside = false;
                if f[b].stops_inside && r.below(6) == 0 {
                    break;
                }
                if strays && r.below(40) == 0 {
                    t.inject.push(Inject { block: b, inside: true, amount: -1 });
                    break;
                }
                if f[b].outs.is_empty() {
                    break;
                }
                let o = f[b].outs[r.below(f[b].outs.len() as u64) as usize];
                if let Some(s) = o.side {
                    t.sides[b][s as usize] += 1;
                }
                match o.to {
                    To::Block(x) => b = x,
                    To::Outside => break,
                }
            }
        }
        t
    }

    fn check(seed: u64, strays: bool) {
        let mut r = Rng(seed);
        let n = 1 + r.below(30) as usize;
        let f = function(&mut r, n);
        let p = place(&f);
        let t = walk(&mut r, &f, 300, strays);
        let got = derive(&f, &p, &t.blocks, &t.sides, &t.inject);
        let want = Flows { blocks: t.blocks.clone(), sides: t.sides.clone() };
        assert_eq!(got.as_ref(), Ok(&want), "seed {seed}: {f:?}\n{p:?}");
        // Weighed by what ran, blocks and sides, the counters run least: no other placement
        // (the one from the made-up weights above) runs them fewer times.
        let runs = |p: &Placement| -> u64 {
            (0..n)
                .map(|b| {
                    u64::from(p.blocks[b]) * t.blocks[b]
                        + (0..2).map(|s| u64::from(p.sides[b][s]) * t.sides[b][s]).sum::<u64>()
                })
                .sum()
        };
        let mut weighed = f.clone();
        for (b, fb) in weighed.iter_mut().enumerate() {
            fb.weight = t.blocks[b] + 1;
            fb.sides = Some(t.sides[b]);
        }
        let best = place(&weighed);
        assert_eq!(best.counters(), p.counters(), "seed {seed}");
        assert!(runs(&best) <= runs(&p), "seed {seed}: {} > {}", runs(&best), runs(&p));
        let got = derive(&weighed, &best, &t.blocks, &t.sides, &t.inject);
        assert_eq!(got.as_ref().map(|d| &d.blocks), Ok(&t.blocks), "seed {seed}");
    }

    #[test]
    fn counts_derived_from_the_placement_equal_what_ran() {
        for seed in 1..=2000 {
            check(seed, false);
        }
    }

    #[test]
    fn flow_started_and_stopped_anywhere_is_exact_when_it_is_told() {
        for seed in 1..=2000 {
            check(seed * 7919, true);
        }
    }

    #[test]
    fn a_stop_inside_a_loop_is_exact_when_told_and_wrong_when_not() {
        // The entry, then a loop of two blocks left by block 1's taken side.
        let f = vec![
            FlowBlock {
                weight: 1,
                from_outside: true,
                stops_inside: false,
                outs: vec![Out { to: To::Block(1), side: None }],
                sides: None,
            },
            FlowBlock {
                weight: 64,
                from_outside: false,
                stops_inside: false,
                outs: vec![
                    Out { to: To::Outside, side: Some(Side::Taken) },
                    Out { to: To::Block(2), side: Some(Side::NotTaken) },
                ],
                sides: None,
            },
            FlowBlock {
                weight: 64,
                from_outside: false,
                stops_inside: false,
                outs: vec![Out { to: To::Block(1), side: None }],
                sides: None,
            },
        ];
        let p = place(&f);
        // One counter in the loop, one at the way out: the entry's is derived.
        assert_eq!(p.counters(), 2, "{p:?}");
        // Entered twice: one thread went from block 1 to block 2 ten times, then out; the
        // other went from block 1 to block 2 five times and was stopped in block 2.
        let truth = [2, 11 + 5, 10 + 5];
        let sides = [[0, 0], [1, 15], [0, 0]];
        let counted: Vec<u64> = (0..3).map(|b| if p.blocks[b] { truth[b] } else { 0 }).collect();
        let told = [Inject { block: 2, inside: true, amount: -1 }];
        let blocks = |d: Result<Flows, DeriveError>| d.map(|d| d.blocks);
        assert_eq!(blocks(derive(&f, &p, &counted, &sides, &told)), Ok(truth.to_vec()));
        assert_ne!(blocks(derive(&f, &p, &counted, &sides, &[])), Ok(truth.to_vec()));
    }

    #[test]
    fn every_block_counted_needs_nothing_derived() {
        let f = vec![FlowBlock {
            weight: 1,
            from_outside: true,
            stops_inside: true,
            outs: vec![Out { to: To::Outside, side: None }],
            sides: None,
        }];
        let p = place(&f);
        assert_eq!(p.blocks, vec![true]);
        assert_eq!(derive(&f, &p, &[5], &[[0, 0]], &[]).map(|d| d.blocks), Ok(vec![5]));
    }
}
