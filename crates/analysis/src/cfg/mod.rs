//! The control-flow graph of an image: functions, basic blocks, edges, jump tables and the
//! padding between functions. Built by recursive traversal from function entries.

pub(crate) mod build;
mod jumptable;
mod tailcall;

use kerf_arch::x86_64::{FlagSet, RegSet};
use kerf_arch::ImageAddr;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::ops::Range;

pub(crate) use build::{build_function, FuncCfg, Seed};

/// Index of a function in [`Cfg::functions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FuncId(pub u32);

/// Index of a basic block in [`Cfg::blocks`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct BlockId(pub u32);

/// Index of a jump table in [`Cfg::jump_tables`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct TableId(pub u32);

/// How a function became known.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum FuncOrigin {
    /// A function symbol (symtab, dynsym, PLT or symbol file).
    Symbol,
    /// The target of a direct call (or of a jump out of another function) with no symbol.
    CallTarget,
    /// The image's entry point, when no symbol names it.
    Entry,
    /// An FDE in `.eh_frame` with no symbol at its start.
    Unwind,
    /// A code pointer the loader writes (vtables, constructor arrays, DT_INIT) that lies
    /// outside every known function.
    Pointer,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Function {
    pub name: String,
    /// Other symbol names at the same address.
    pub aliases: Vec<String>,
    pub entry: ImageAddr,
    /// Size from the symbol; 0 when unknown.
    pub symbol_size: u64,
    pub origin: FuncOrigin,
    /// This function's blocks, sorted by address; the entry block is among them.
    pub blocks: Range<u32>,
    pub entry_block: BlockId,
    /// Sum of the lengths of the function's decoded instructions.
    pub insn_bytes: u64,
    /// Lowest and one-past-highest byte of decoded code: the function's extent.
    pub extent: Range<u64>,
    /// No path from the entry reaches a return (or the name says so).
    pub noreturn: bool,
    /// Registers and flags live on entry (interprocedural).
    pub live_in: RegSet,
    pub flags_live_in: FlagSet,
    /// Registers and flags written on every path from entry to a return or tail call.
    pub must_def: RegSet,
    pub flags_must_def: FlagSet,
    /// Every `ret` leaves through the return address its caller pushed
    /// ([`Cfg::returns_through_callers_slot`]), or, for a part split off other functions, the
    /// one its parents' callers pushed (`ret_part`): decoded once when the image is analysed
    /// and kept with the analysis, since the JIT asks it of every function it translates (a
    /// fifth of python3.11's translation when it decoded them again at each start). `false`,
    /// the cautious answer, until then.
    pub ret_through_slot: bool,
    /// `ret_through_slot` holds because the function is a part whose parents jump in with
    /// their frames ([`Cfg::part_returns_through`]): it rests on the parents' code too.
    pub ret_part: bool,
}

/// How a basic block ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Terminator {
    /// Runs into the next block (the next instruction is a branch target).
    FallThrough,
    /// Conditional branch: taken edge and fall-through edge.
    CondJump,
    /// Direct unconditional jump inside the function.
    Jump,
    /// Direct call; the fall-through edge is absent when the callee never returns.
    Call,
    /// Call through a register or memory.
    IndirectCall,
    /// Jump to another function's entry.
    TailCall,
    /// An indirect jump to another function's entry: through a single memory slot (PLT stubs,
    /// `jmp [rip+got]`, `mov r,[rip+X]; jmp r`), or taken with the frame torn down (the stack
    /// pointer at its entry value) through a function pointer (see `cfg/tailcall.rs`). The
    /// unknown callee returns to this function's caller.
    IndirectTailCall,
    /// Indirect jump through a resolved jump table.
    JumpTable(TableId),
    /// Indirect jump whose targets are unknown.
    Unanalysable,
    Return,
    /// `ud2`, `int3`, `hlt`, or undecodable bytes.
    Stop,
}

impl Terminator {
    pub fn name(self) -> &'static str {
        match self {
            Terminator::FallThrough => "fallthrough",
            Terminator::CondJump => "condjump",
            Terminator::Jump => "jump",
            Terminator::Call => "call",
            Terminator::IndirectCall => "indcall",
            Terminator::TailCall => "tailcall",
            Terminator::IndirectTailCall => "indtailcall",
            Terminator::JumpTable(_) => "jumptable",
            Terminator::Unanalysable => "unanalysable",
            Terminator::Return => "return",
            Terminator::Stop => "stop",
        }
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Block {
    pub start: ImageAddr,
    pub len: u32,
    pub insns: u32,
    pub func: FuncId,
    pub term: Terminator,
    /// Outgoing edges, a range of the function's edges (see [`Cfg::edges_of`]).
    pub edges: Range<u32>,
    /// Registers read before being killed in the block, and killed in it (the call at its end,
    /// if any, contributes only its own use of the stack pointer).
    pub gen: RegSet,
    pub kill: RegSet,
    pub flags_gen: FlagSet,
    pub flags_kill: FlagSet,
    /// Registers and flags live at the block's first instruction.
    pub live_in: RegSet,
    pub flags_live_in: FlagSet,
}

impl Default for Block {
    fn default() -> Self {
        Block {
            start: ImageAddr(0),
            len: 0,
            insns: 0,
            func: FuncId(0),
            term: Terminator::Stop,
            edges: 0..0,
            gen: RegSet::EMPTY,
            kill: RegSet::EMPTY,
            flags_gen: FlagSet::EMPTY,
            flags_kill: FlagSet::EMPTY,
            live_in: RegSet::EMPTY,
            flags_live_in: FlagSet::EMPTY,
        }
    }
}

impl Block {
    pub fn end(&self) -> ImageAddr {
        ImageAddr(self.start.0 + self.len as u64)
    }

    /// Add the next instruction's registers and flags to the block's read-before-written
    /// (`gen`) and written (`kill`) sets.
    /// (Analysis builds blocks with it; the cache's check recomputes them with it.)
    pub(crate) fn add_insn(
        &mut self,
        reads: RegSet,
        kills: RegSet,
        fread: FlagSet,
        fkill: FlagSet,
    ) {
        self.gen = self.gen.union(reads.minus(self.kill));
        self.kill = self.kill.union(kills);
        self.flags_gen = self.flags_gen.union(fread.minus(self.flags_kill));
        self.flags_kill = self.flags_kill.union(fkill);
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EdgeKind {
    FallThrough,
    /// Taken side of a conditional branch.
    Branch,
    Jump,
    /// One distinct target of a jump table.
    Table,
    Call,
    TailCall,
    /// The block returns to its caller (no target).
    Return,
}

impl EdgeKind {
    pub fn name(self) -> &'static str {
        match self {
            EdgeKind::FallThrough => "fallthrough",
            EdgeKind::Branch => "branch",
            EdgeKind::Jump => "jump",
            EdgeKind::Table => "table",
            EdgeKind::Call => "call",
            EdgeKind::TailCall => "tailcall",
            EdgeKind::Return => "return",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum EdgeTarget {
    Block(BlockId),
    Function(FuncId),
    /// A call or tail call to an address outside every known function (should not happen
    /// once discovery has run; kept so no edge is silently dropped).
    Address(ImageAddr),
    None,
}

/// One edge, as [`Cfg::edges_of`] hands it out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edge {
    pub kind: EdgeKind,
    pub target: EdgeTarget,
}

/// What a [`PackedEdge`]'s payload means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum TargetTag {
    /// A block: local to the function while it is built, global once the CFG is assembled.
    Block,
    /// A function id; while the function is built, an index into its outside targets.
    Function,
    /// An index into the function's list of unresolved addresses (its outside targets while
    /// it is built).
    Address,
    None,
}

/// An edge as stored: 8 bytes where an [`Edge`] takes 24 (libLLVM has 4.8 million edges, and
/// fresh memory is the dearest part of analysing it). The rare address target keeps its
/// 64-bit address in a side list of its function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct PackedEdge {
    pub payload: u32,
    pub kind: EdgeKind,
    pub tag: TargetTag,
}

const _: () = assert!(std::mem::size_of::<PackedEdge>() == 8);

impl PackedEdge {
    pub const fn new(kind: EdgeKind, tag: TargetTag, payload: u32) -> PackedEdge {
        PackedEdge { payload, kind, tag }
    }

    fn unpack(self, far: &[ImageAddr]) -> Edge {
        let target = match self.tag {
            TargetTag::Block => EdgeTarget::Block(BlockId(self.payload)),
            TargetTag::Function => EdgeTarget::Function(FuncId(self.payload)),
            TargetTag::Address => EdgeTarget::Address(far[self.payload as usize]),
            TargetTag::None => EdgeTarget::None,
        };
        Edge { kind: self.kind, target }
    }
}

/// Entry format of a jump table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TableFormat {
    /// 8-byte absolute addresses (non-PIC code).
    Absolute64,
    /// 4-byte signed offsets added to a base address (PIC code, gcc and clang).
    Relative32 { base: ImageAddr },
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JumpTable {
    /// The indirect jump that uses the table.
    pub jump: ImageAddr,
    pub table: ImageAddr,
    pub format: TableFormat,
    /// One target per entry, in table order (duplicates kept: entries, not cases). The count
    /// comes from the bounds check that dominates the jump.
    pub targets: Vec<ImageAddr>,
}

/// A run of padding (`int3` or `nop` bytes) between functions: springboard space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Padding {
    pub start: ImageAddr,
    pub len: u32,
}

/// Code that no splice may touch (DESIGN.md §5), whatever function a symbol makes of it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NoSplice {
    pub start: ImageAddr,
    pub len: u64,
    pub why: NoSpliceWhy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NoSpliceWhy {
    /// An unwind entry whose CIE has the `S` augmentation: a signal trampoline, which the
    /// kernel enters when a signal handler returns (glibc's `__restore_rt`).
    SignalTrampoline,
    /// An unwind entry that starts inside the padding instruction (a nop) at `insn`: another
    /// instruction stream owns those bytes, so the entry is not taken for a function.
    UnwindInsideInstruction { insn: ImageAddr },
    /// The inner bytes of the instruction at `insn`, inside which a block starts at `entry`
    /// (a branch over a prefix: two instruction streams share these bytes).
    InsideInstruction { insn: ImageAddr, entry: ImageAddr },
}

impl NoSplice {
    pub fn end(&self) -> u64 {
        self.start.0 + self.len
    }
}

impl std::fmt::Display for NoSplice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (start, end) = (self.start.0, self.end());
        match self.why {
            NoSpliceWhy::SignalTrampoline => write!(
                f,
                "{start:#x}..{end:#x} is a signal trampoline (unwind entry with the S \
                 augmentation), never spliced"
            ),
            NoSpliceWhy::UnwindInsideInstruction { insn } => write!(
                f,
                "the unwind entry {start:#x}..{end:#x} starts inside the padding \
                 instruction at {:#x}, never spliced",
                insn.0
            ),
            NoSpliceWhy::InsideInstruction { insn, entry } => write!(
                f,
                "{start:#x}..{end:#x} lies inside the instruction at {:#x}, and a block starts \
                 at {:#x} within it (two instruction streams share the bytes), never spliced",
                insn.0, entry.0
            ),
        }
    }
}

/// The blocks and edges of one function, in the vectors [`build_function`] made them in: the
/// CFG is never copied into one flat array (at millions of blocks a second copy costs more
/// fresh memory than anything else in the analysis).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Body {
    /// Sorted by start address.
    pub(crate) blocks: Vec<Block>,
    /// Each block's `edges` is a range of this vector.
    pub(crate) edges: Vec<PackedEdge>,
    /// Targets of [`TargetTag::Address`] edges (usually none).
    pub(crate) far: Vec<ImageAddr>,
}

/// Every block of an image, numbered globally ([`BlockId`]) in function order and, inside a
/// function, in address order, but stored per function.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Blocks {
    /// One per function, in [`FuncId`] order.
    pub(crate) bodies: Vec<Body>,
    /// The id of each function's first block, and the total at the end.
    pub(crate) first: Vec<u32>,
}

impl Blocks {
    pub(crate) fn new(bodies: Vec<Body>) -> Blocks {
        let mut first = Vec::with_capacity(bodies.len() + 1);
        let mut n = 0u32;
        for b in &bodies {
            first.push(n);
            n += b.blocks.len() as u32;
        }
        first.push(n);
        Blocks { bodies, first }
    }

    pub fn len(&self) -> usize {
        self.first.last().copied().unwrap_or(0) as usize
    }

    /// Every function's blocks and edges, in [`FuncId`] order: the bulk of an analysis, which
    /// the cache stores in parts apart from the rest and decodes side by side.
    pub fn bodies(&self) -> &[Body] {
        &self.bodies
    }

    /// The numbering alone, with no bodies (what [`Blocks::set_bodies`] fills again).
    pub fn numbering(&self) -> Blocks {
        Blocks { bodies: Vec::new(), first: self.first.clone() }
    }

    /// Put back the bodies [`Blocks::bodies`] gave. Nothing here checks that they fit the
    /// numbering: a cached analysis gets that from `validate::Checker::new`.
    pub fn set_bodies(&mut self, bodies: Vec<Body>) {
        self.bodies = bodies;
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All blocks, in id order.
    pub fn iter(&self) -> impl Iterator<Item = &Block> + '_ {
        self.bodies.iter().flat_map(|b| b.blocks.iter())
    }

    /// The function's blocks, in address order.
    pub fn of(&self, f: FuncId) -> &[Block] {
        &self.bodies[f.0 as usize].blocks
    }

    pub fn of_mut(&mut self, f: FuncId) -> &mut [Block] {
        &mut self.bodies[f.0 as usize].blocks
    }

    /// Function and index within it of a block id.
    fn locate(&self, id: BlockId) -> (usize, usize) {
        // The last function whose first block is at or before `id` holds it (a function with
        // no blocks, were one kept, would share its start with the next and be passed over).
        let f = self.first.partition_point(|s| *s <= id.0) - 1;
        (f, (id.0 - self.first[f]) as usize)
    }
}

impl std::ops::Index<BlockId> for Blocks {
    type Output = Block;
    fn index(&self, id: BlockId) -> &Block {
        let (f, i) = self.locate(id);
        &self.bodies[f].blocks[i]
    }
}

impl std::ops::IndexMut<BlockId> for Blocks {
    fn index_mut(&mut self, id: BlockId) -> &mut Block {
        let (f, i) = self.locate(id);
        &mut self.bodies[f].blocks[i]
    }
}

impl<'a> IntoIterator for &'a Blocks {
    type Item = &'a Block;
    type IntoIter = std::iter::FlatMap<
        std::slice::Iter<'a, Body>,
        std::slice::Iter<'a, Block>,
        fn(&'a Body) -> std::slice::Iter<'a, Block>,
    >;
    fn into_iter(self) -> Self::IntoIter {
        self.bodies.iter().flat_map(|b| b.blocks.iter())
    }
}

/// The whole CFG of one image.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Cfg {
    pub functions: Vec<Function>,
    pub blocks: Blocks,
    pub jump_tables: Vec<JumpTable>,
    pub padding: Vec<Padding>,
    /// Code no splice may touch, sorted by start.
    pub no_splice: Vec<NoSplice>,
}

impl Cfg {
    /// A copy of everything but the blocks' bodies (see [`Blocks::bodies`]).
    pub fn without_bodies(&self) -> Cfg {
        Cfg {
            functions: self.functions.clone(),
            blocks: self.blocks.numbering(),
            jump_tables: self.jump_tables.clone(),
            padding: self.padding.clone(),
            no_splice: self.no_splice.clone(),
        }
    }

    /// A range no splice may touch that meets `[lo, hi)` (image addresses). The list is short
    /// (glibc's libc has six: its signal trampoline and five instructions entered inside) and
    /// its ranges may overlap, so it is searched whole.
    pub fn no_splice_in(&self, lo: u64, hi: u64) -> Option<&NoSplice> {
        self.no_splice.iter().find(|n| n.start.0 < hi && lo < n.end())
    }
    pub fn function(&self, id: FuncId) -> &Function {
        &self.functions[id.0 as usize]
    }
    pub fn block(&self, id: BlockId) -> &Block {
        &self.blocks[id]
    }
    pub fn blocks_of(&self, f: FuncId) -> &[Block] {
        self.blocks.of(f)
    }
    /// The outgoing edges of `b`, a block of this CFG (its `func` tells where they are kept).
    pub fn edges_of<'s>(&'s self, b: &Block) -> impl ExactSizeIterator<Item = Edge> + Clone + 's {
        let body = &self.blocks.bodies[b.func.0 as usize];
        body.edges[b.edges.start as usize..b.edges.end as usize]
            .iter()
            .map(move |e| e.unpack(&body.far))
    }
    /// Number of edges of all blocks.
    pub fn edge_count(&self) -> usize {
        self.blocks.bodies.iter().map(|b| b.edges.len()).sum()
    }
    /// The function whose code (its extent) holds `addr`.
    pub fn function_holding(&self, addr: ImageAddr) -> Option<FuncId> {
        // Functions are sorted by entry address.
        let i = self.functions.partition_point(|f| f.entry <= addr).checked_sub(1)?;
        self.functions[i].extent.contains(&addr.0).then_some(FuncId(i as u32))
    }
    /// The function whose entry is `addr`.
    pub fn function_at(&self, addr: ImageAddr) -> Option<FuncId> {
        // Functions are sorted by entry address.
        self.functions.binary_search_by_key(&addr, |f| f.entry).ok().map(|i| FuncId(i as u32))
    }
    /// Functions with this name or alias.
    pub fn functions_named<'s>(&'s self, name: &'s str) -> impl Iterator<Item = FuncId> + 's {
        self.functions
            .iter()
            .enumerate()
            .filter(move |(_, f)| f.name == name || f.aliases.iter().any(|a| a == name))
            .map(|(i, _)| FuncId(i as u32))
    }
    /// Whether every `ret` of `f` leaves through the return address its caller pushed (its
    /// stack pointer tracked from the entry, its return slot never written: see
    /// `tailcall::returns_through_slot`), decoding its blocks from `mem`. `false` when a block
    /// does not decode.
    pub fn returns_through_callers_slot(
        &self,
        mem: &dyn crate::memory::CodeMemory,
        f: FuncId,
    ) -> bool {
        self.with_view(mem, f, |v| tailcall::returns_through_slot(v, &[(v.entry, 0)]))
            .unwrap_or(false)
    }

    /// The functions not in `through` ([`Cfg::returns_through_callers_slot`] of each) whose
    /// returns are their parents' ([`Cfg::part_returns_through`]), `through` being what
    /// the parents' own code says.
    pub fn parts_returning_through(
        &self,
        mem: &dyn crate::memory::CodeMemory,
        through: &[bool],
    ) -> Vec<FuncId> {
        use rayon::prelude::*;
        let own = |g: FuncId| through.get(g.0 as usize).copied().unwrap_or(false);
        // Only functions with a `ret`, entered from others by jumps alone, from parents that
        // return through their callers' slots, are worth decoding.
        let returns = |f: FuncId| self.blocks_of(f).iter().any(|b| b.term == Terminator::Return);
        let mut ways = self.ways_in(&|f| !through[f.0 as usize] && returns(f));
        ways.retain(|_, w| {
            w.iter().all(|&(from, e)| e.kind != EdgeKind::Call && own(self.block(from).func))
        });
        let depths = self.jump_depths(mem, ways.values().flatten().map(|&(from, _)| from));
        let mut parts: Vec<FuncId> = ways
            .par_iter()
            .filter(|(&f, ways)| self.part_returns_through(mem, f, ways, &own, &depths))
            .map(|(&f, _)| f)
            .collect();
        parts.sort_unstable();
        parts
    }

    /// The stack pointer at the end of each block of `sites` (a way into another function:
    /// a jump, or a fall-through), relative to its function's entry stack pointer (`None`:
    /// not known): each function decoded once.
    pub fn jump_depths(
        &self,
        mem: &dyn crate::memory::CodeMemory,
        sites: impl Iterator<Item = BlockId>,
    ) -> HashMap<BlockId, Option<i64>> {
        use rayon::prelude::*;
        let mut by_func: HashMap<FuncId, Vec<BlockId>> = HashMap::new();
        for b in sites {
            by_func.entry(self.block(b).func).or_default().push(b);
        }
        by_func
            .par_iter()
            .flat_map_iter(|(&g, sites)| {
                let start = self.function(g).blocks.start;
                let ks: Vec<usize> = sites.iter().map(|b| (b.0 - start) as usize).collect();
                let rsp = self.with_view(mem, g, |v| tailcall::rsp_at_end(v, &ks));
                let rsp = rsp.unwrap_or_else(|| vec![None; ks.len()]);
                sites.clone().into_iter().zip(rsp)
            })
            .collect()
    }

    /// Every way into each function `want` picks from the other functions: the block it
    /// leaves from, and its edge.
    pub fn ways_in(&self, want: &dyn Fn(FuncId) -> bool) -> HashMap<FuncId, Vec<(BlockId, Edge)>> {
        let mut ways: HashMap<FuncId, Vec<(BlockId, Edge)>> = HashMap::new();
        for (g, fun) in self.functions.iter().enumerate() {
            for (k, b) in self.blocks_of(FuncId(g as u32)).iter().enumerate() {
                for e in self.edges_of(b) {
                    let to = match e.target {
                        EdgeTarget::Function(t) => t,
                        EdgeTarget::Block(t) => self.block(t).func,
                        _ => continue,
                    };
                    if to.0 as usize != g && want(to) {
                        ways.entry(to).or_default().push((BlockId(fun.blocks.start + k as u32), e));
                    }
                }
            }
        }
        ways
    }

    /// Whether `f` is a part split off other functions that returns for them (GCC's `.cold`
    /// parts, which pop the parent's frame and `ret` for it): entered from other functions
    /// (`ways`, [`Cfg::ways_in`]) only by jumps, none by a call, each from a parent whose own
    /// returns leave through its caller's slot (`own`), and every `ret` of `f` leaves through
    /// that slot, its stack pointer tracked from the blocks the parents jump to with theirs
    /// (`tailcall::returns_through_slot`; where two disagree, unknown). Its `ret` then reads
    /// the parent's return address and lands where the parent's returns land, which is what
    /// [`crate::liveness::at_continuations`] gives a function jumped into. `depths`: the
    /// parents' stack pointers at their jumps ([`Cfg::jump_depths`]). A way in kerf
    /// cannot see (a pointer) would enter with no parent's frame under it: no correct
    /// program takes one, as the part's `ret` would take a word of the caller's frame.
    pub fn part_returns_through(
        &self,
        mem: &dyn crate::memory::CodeMemory,
        f: FuncId,
        ways: &[(BlockId, Edge)],
        own: &dyn Fn(FuncId) -> bool,
        depths: &HashMap<BlockId, Option<i64>>,
    ) -> bool {
        let fun = self.function(f);
        let n = self.blocks_of(f).len();
        let local =
            |t: BlockId| t.0.checked_sub(fun.blocks.start).map(|k| k as usize).filter(|&k| k < n);
        let mut seeds = Vec::with_capacity(ways.len());
        for &(from, e) in ways {
            let to = match e.target {
                EdgeTarget::Function(t) if t == f => local(fun.entry_block),
                EdgeTarget::Block(t) => local(t),
                _ => None,
            };
            let rsp = depths.get(&from).copied().flatten();
            match (e.kind != EdgeKind::Call && own(self.block(from).func), to, rsp) {
                (true, Some(t), Some(rsp)) => seeds.push((t, rsp)),
                _ => return false,
            }
        }
        !seeds.is_empty()
            && self
                .with_view(mem, f, |v| tailcall::returns_through_slot(v, &seeds))
                .unwrap_or(false)
    }

    /// `then` of `f`'s blocks decoded from `mem` as the stack-pointer tracking of
    /// `tailcall` sees them; `None` when a block does not decode.
    fn with_view<T>(
        &self,
        mem: &dyn crate::memory::CodeMemory,
        f: FuncId,
        then: impl FnOnce(&tailcall::FnView<'_>) -> T,
    ) -> Option<T> {
        let blocks = self.blocks_of(f);
        let start = self.functions[f.0 as usize].blocks.start;
        let mut decoded: Vec<Vec<(iced_x86::Instruction, RegSet)>> =
            Vec::with_capacity(blocks.len());
        for b in blocks {
            let (base, bytes) = mem.code_region(b.start)?;
            let mut sc = kerf_arch::x86_64::Scanner::new(bytes, base);
            let mut v = Vec::with_capacity(b.insns as usize);
            let mut a = b.start;
            while a < b.end() {
                let d = sc.decode_facts(a)?;
                a = d.next_addr();
                v.push((d.insn, d.facts.clobbers));
            }
            decoded.push(v);
        }
        let local = |t: BlockId| t.0.checked_sub(start).filter(|&k| (k as usize) < blocks.len());
        let view = tailcall::FnView {
            blocks: decoded.iter().map(|v| v.iter().map(|(i, w)| (i, *w)).collect()).collect(),
            succs: blocks
                .iter()
                .map(|b| {
                    self.edges_of(b)
                        .filter_map(|e| match e.target {
                            EdgeTarget::Block(t) => local(t).map(|k| k as usize),
                            _ => None,
                        })
                        .collect()
                })
                .collect(),
            foreign: Vec::new(),
            entry: (self.functions[f.0 as usize].entry_block.0 - start) as usize,
        };
        Some(then(&view))
    }

    /// The block of function `f` that contains `addr`.
    pub fn block_containing(&self, f: FuncId, addr: ImageAddr) -> Option<BlockId> {
        let start = self.functions[f.0 as usize].blocks.start;
        let blocks = self.blocks.of(f);
        let i = blocks.partition_point(|b| b.start <= addr);
        let b = blocks.get(i.checked_sub(1)?)?;
        (addr < b.end()).then_some(BlockId(start + i as u32 - 1))
    }
}
