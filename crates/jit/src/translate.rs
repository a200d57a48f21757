//! One module's translation: every block of the chosen functions copied into the code cache
//! at a known address, with the plugin's code at each block's entry, direct branches and
//! calls linked block to block, indirect transfers through the lookup table
//! ([`crate::x86_64`]), and whatever has no translation left through the miss path. The
//! result says where each block went, what goes into the table, and which cache addresses
//! are *clean* (where a thread's state is the original program's, so kerf can send it back
//! to the original address on detach).
//!
//! Translation is one pass that writes instructions with labels, then one run of kerf's
//! encoder ([`encode`]) over the whole cache: a branch to an original address that has a
//! translation is linked to it (the first instruction of a block's translation carries the
//! block's original address as its `ip`), any other `ip` is a label id below the module.

use crate::x86_64 as seq;
use crate::x86_64::encode;
use iced_x86::{Code, FlowControl, Mnemonic, OpKind};
use iced_x86::{Decoder, DecoderOptions, Instruction, Register};
use kerf_analysis::cfg::{
    BlockId, Cfg, EdgeKind, EdgeTarget, FuncId, JumpTable, TableFormat, Terminator,
};
use kerf_analysis::liveness::Live;
use kerf_analysis::memory::CodeMemory;
use kerf_arch::hash::{AddrMap as HashMap, AddrSet as HashSet};
use kerf_arch::x86_64::{flow, relocation_hazard, FlagSet, Flow, Gpr, RegSet};
use kerf_arch::ImageAddr;
use kerf_codegen::ir::{Addr, Op, Program, Src, Width};
use kerf_codegen::{lower_program_split, At, LiveAt, SlabRing};
use std::collections::BTreeMap;
use std::fmt;

/// Words at the start of a module's data area (its block words follow).
pub const DATA_ESCAPES: u64 = 0;
/// The last original target that left the cache through the miss path.
pub const DATA_LAST_MISS: u64 = 8;
/// Returns through the miss path: to a caller with no translation (how a root call ends
/// where its outer frame was not recorded or not checked: see [`seq::outer_check`]).
pub const DATA_RETURNS: u64 = 16;
/// The thread that owns the module's block words (its thread pointer, set by kerf): a plugin
/// may let it update its word without a lock, and every other thread its shared word.
pub const DATA_OWNER: u64 = 24;
/// Threads that met a thread gate with a `gs` base of the program's own and left the cache
/// there (see [`seq::thread_gate`]).
pub const DATA_FOREIGN_GS: u64 = 48;
/// Where label ids start: in the non-canonical hole of the address space.
const LABELS: u64 = 0x8000_0000_0000_0000;

/// Of the escapes through the miss path, those that left without asking kerf (it was not
/// listening: a wait had timed out, a seccomp filter forbids the futex calls, or the JIT
/// was being taken out).
pub const DATA_UNASKED: u64 = 56;

/// Bytes of header before the first block word.
pub const DATA_HEADER: u64 = 64;

/// A module as the translator reads it: its CFG, its bytes, and its load bias (the original
/// address of image address `a` is `a + bias`).
pub struct Module<'a> {
    pub cfg: &'a Cfg,
    pub mem: &'a dyn CodeMemory,
    pub bias: u64,
    /// Per function, what is live where its returns land
    /// ([`kerf_analysis::liveness::at_continuations`], worked out when the module is first
    /// translated, or given: facts kept from an earlier start, checked); `None`: every `ret` keeps the program's registers and flags with a frame.
    pub returns: Option<&'a std::sync::OnceLock<Vec<Live>>>,
    /// Whether a jump table whose dispatch has a known shape goes through a translated copy
    /// of the table ([`seq::table_dispatch`]); `false`: through the lookup, as any indirect
    /// jump.
    pub tables: bool,
    /// Whether a tail jump through a fixed slot whose value kerf read goes straight to that
    /// value's translation while the slot holds it ([`seq::slot_guard`]); `false`: through
    /// the lookup.
    pub guards: bool,
    /// Whether an indirect call looks its target up with no frame where it can
    /// ([`seq::fast_call`]); `false`: every one with the framed probe.
    pub fast_calls: bool,
    /// Most direct callers in the translation whose return addresses a frameless `ret`
    /// compares inline first ([`seq::chained_ret`], [`CHAIN_CALLERS`] by default); 0: straight
    /// to the table.
    pub chains: usize,
    /// Whether a `ret` of a part split off other functions, which returns for its parents
    /// ([`kerf_analysis::cfg::Function::ret_part`]), goes frameless like any other; `false`:
    /// it keeps its frame.
    pub parts: bool,
    /// Whether every instruction of a function with an indirect jump of unknown targets
    /// gets a table entry ahead (any of them may be its target); `false`: only its blocks
    /// do, and kerf adds an entry for another instruction when a miss asks for it (on
    /// demand). In libLLVM-14 those entries were most of the table (107 k entries without
    /// them against 197 k), and the sets they filled lost return sites' entries: a `ret`
    /// that misses leaves the cache (an `llc-14` attach counted 28.8 M block executions in
    /// its root calls, against 2,681 M with these entries made on demand).
    pub inside_entries: bool,
    /// Up to how many instructions of a callee (with the functions it tail-calls) a direct
    /// call may copy in its place (see [`Inline`]); 0: none.
    pub inline: u32,
    /// Where a plugin that counts blocks puts fewer counters, off a spanning tree of each
    /// function's flow ([`crate::counters`]): this module's facts for it; `None`: a counter
    /// in every block.
    pub counting: Option<&'a crate::counters::ModuleFacts>,
    /// How often each block ran in an earlier run from the same roots that counted blocks
    /// (image address of its start, count): a frameless `ret` compares the return addresses
    /// of the direct calls that made most of its function's calls inline first
    /// ([`return_chains`]); `None`: only where the function has at most [`Module::chains`]
    /// direct callers.
    pub profile: Option<&'a HashMap<u64, u64>>,
    /// Whether translations are laid out by iced's `BlockEncoder` rather than kerf's own
    /// encoder ([`encode`]): the two are equivalent, iced's slower (for comparison).
    pub iced: bool,
}

/// Registers a frameless `ret` may take, first choice first: never arguments or return
/// values of the SysV ABI, then arguments (dead once a function returns, unless a caller
/// that knows the function keeps something there).
const RET_SCRATCH: [Gpr; 7] = [Gpr::R11, Gpr::R10, Gpr::R9, Gpr::R8, Gpr::Rsi, Gpr::Rdi, Gpr::Rcx];

/// Two registers a `ret` of `f` may overwrite, with the flags, for [`seq::fast_ret`]: dead
/// wherever `f`'s returns land, which are its callers' return sites only if every `ret` of
/// `f` leaves through the slot its caller pushed. Where the flags are dead there but fewer
/// than two of those registers are (a caller built with `-fipa-ra` keeps values in the ones
/// a small callee never touches: 1,531 of python3.11's 2,605 functions with a `ret`), `r11`
/// and `r10`, saved below the return slot and put back before the `ret` ([`RetScratch`]).
fn ret_scratch(m: &Module<'_>, f: FuncId) -> Option<RetScratch> {
    let live = m.continuations()?.get(f.0 as usize)?;
    let fun = m.cfg.function(f);
    if !live.flags.is_empty() || !fun.ret_through_slot || (fun.ret_part && !m.parts) {
        return None;
    }
    let mut free = RET_SCRATCH.iter().filter(|&&r| !live.regs.contains(r));
    let reg = kerf_codegen::templates::iced_gpr;
    let kept = RetScratch { regs: [Register::R11, Register::R10], saved: true };
    if takes_descriptor(m, f) {
        return Some(kept);
    }
    Some(match (free.next(), free.next()) {
        (Some(&a), Some(&b)) => RetScratch { regs: [reg(a), reg(b)], saved: false },
        _ => kept,
    })
}

/// Most direct calls a function may have in a translation for its `ret` to compare their
/// return addresses inline ([`seq::chained_ret`]), by default ([`Module::chains`]): each
/// compare that fails costs a load of the return slot and a branch before the table.
pub const CHAIN_CALLERS: usize = 2;

/// A caller's share of its callee's calls in an earlier run ([`Module::profile`]) that earns
/// its return address a compare inline in the callee's `ret`: at least one call in
/// `HOT_SHARE`, so at most two callers, and most often one. (With one call in eight, chains
/// of up to two callers made python3.11's pure-Python loop about 2 % slower than none, a
/// compare that fails often being a branch the predictor may miss; with one in two, 6 %
/// faster, and one in three 8 % slower than that: `bench/RESULTS.md`, session 84.)
const HOT_SHARE: u64 = 2;

/// Per function of `funcs` whose `ret` goes frameless ([`seq::fast_ret`]), the return sites
/// of its direct calls from `funcs` (original address, label of the translation there, which
/// `starts` holds) that its `ret` compares inline before the table, in that order: where an
/// earlier run counted how often the function was entered ([`Module::profile`]), those of
/// the calls that made at least one in [`HOT_SHARE`] of its calls, most calls first, at most
/// [`Module::chains`] of them, with the two registers free or kept
/// ([`seq::chained_ret_saved`]); otherwise, where it has two free registers and at most
/// [`Module::chains`] direct calls here, all of them. A call to a PLT stub whose slot the
/// walk read (`slots`: a library calling its own exported functions, as libsqlite3 does on
/// most calls) counts as a call to the function the slot holds, whose `ret` returns there. A
/// caller outside `funcs` (another translation, code that calls through a pointer) finds no
/// compare that matches and goes on to the table. The second of each pair: whether the chain
/// came from the counts.
fn return_chains(
    m: &Module<'_>,
    funcs: &[FuncId],
    scratch: &HashMap<FuncId, Option<RetScratch>>,
    starts: &Starts,
    slots: &std::collections::HashMap<u64, u64>,
) -> HashMap<FuncId, (Vec<(u64, u64)>, bool)> {
    // The function a PLT stub `h` leads to in this module, while its slot holds what it held.
    let through_slot = |h: FuncId| {
        let entry = m.cfg.block(m.cfg.function(h).entry_block);
        if entry.term != Terminator::IndirectTailCall {
            return None;
        }
        let jump = last_insn(m, entry.start, entry.len, entry.insns)?;
        let to = *slots.get(&crate::region::fixed_slot(&jump)?)?;
        m.cfg.function_at(ImageAddr(to.wrapping_sub(m.bias)))
    };
    // Per callee: (return address, its label, calls made there in the earlier run).
    let mut sites: HashMap<FuncId, Vec<(u64, u64, u64)>> = HashMap::default();
    for b in funcs.iter().flat_map(|&f| m.cfg.blocks_of(f)).filter(|b| b.term == Terminator::Call) {
        for e in m.cfg.edges_of(b) {
            let (EdgeKind::Call, EdgeTarget::Function(g)) = (e.kind, e.target) else { continue };
            let g = if scratch.contains_key(&g) { g } else { through_slot(g).unwrap_or(g) };
            let ret = m.runtime(b.end());
            let (Some(Some(_)), Some(&label)) = (scratch.get(&g), starts.get(&ret)) else {
                continue;
            };
            // (A block that ends in a call makes it each time it runs.)
            let calls = m.profile.and_then(|p| p.get(&b.start.0)).copied().unwrap_or(0);
            sites.entry(g).or_default().push((ret, label, calls));
        }
    }
    let mut chains = HashMap::default();
    for (g, mut v) in sites {
        v.sort_unstable();
        v.dedup_by_key(|s| s.0);
        let entry = m.cfg.function(g).entry;
        let entered = m.profile.and_then(|p| p.get(&entry.0)).copied().unwrap_or(0);
        let chain: Vec<(u64, u64)> = if entered > 0 {
            v.sort_by_key(|&(ret, _, calls)| (std::cmp::Reverse(calls), ret));
            (v.iter())
                .take_while(|&&(_, _, calls)| {
                    calls > 0 && calls.saturating_mul(HOT_SHARE) >= entered
                })
                .take(m.chains)
                .map(|&(ret, label, _)| (ret, label))
                .collect()
        } else if v.len() <= m.chains
            && matches!(scratch.get(&g), Some(Some(RetScratch { saved: false, .. })))
        {
            v.iter().map(|&(ret, label, _)| (ret, label)).collect()
        } else {
            continue;
        };
        if !chain.is_empty() {
            chains.insert(g, (chain, entered > 0));
        }
    }
    chains
}

/// Whether `f` reads memory through `rax` before it writes `rax` (as far as its first
/// instructions tell: a `push rax` counts as a write, erring towards no):
/// as a TLS descriptor's resolver does (glibc's `_dl_tlsdesc_return` is `mov rax, [rax+8];
/// ret`), and no function of the SysV ABI, where `rax` carries no pointer in. A resolver's
/// callers (`lea rax, [rip+d]; call [rax]`) keep every register but `rax` across the call,
/// so its `ret` must overwrite none of them, whatever the ABI lets the analysis assume of
/// callers it cannot see (ld.so's resolvers are called only through descriptors).
fn takes_descriptor(m: &Module<'_>, f: FuncId) -> bool {
    let b = m.cfg.block(m.cfg.function(f).entry_block);
    // (Six: an `endbr64`, and `_dl_tlsdesc_dynamic` saves two registers and loads one first.)
    for i in block_insns(m, b.start, b.len, b.insns.min(6)) {
        let mem = (0..i.op_count()).any(|k| i.op_kind(k) == OpKind::Memory);
        if mem && (i.memory_base() == Register::RAX || i.memory_index() == Register::RAX) {
            return true;
        }
        let writes_rax = i.op_count() > 0
            && i.op0_kind() == OpKind::Register
            && i.op0_register().full_register() == Register::RAX;
        if writes_rax {
            return false;
        }
    }
    false
}

/// The registers a frameless `ret` takes ([`seq::fast_ret`]), and whether they are live where
/// it returns to: then it keeps them just below the return slot meanwhile, in the red zone
/// of a function that is returning, which nothing reads any more (a caller cannot keep data
/// in its own red zone across a call, the call's push and the callee's frame go there) and a
/// signal frame never overwrites.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct RetScratch {
    regs: [Register; 2],
    saved: bool,
}

/// Registers a call's stub may take to write an original return address above 2 GiB, first
/// choice first: never arguments of the SysV ABI.
const STUB_SCRATCH: [Gpr; 2] = [Gpr::R11, Gpr::R10];

/// A register the stub of a direct call to `target` (a runtime address) may overwrite: one
/// not live where the callee's entry block begins. That set holds what the callee reads and
/// what it lets through to wherever its returns land (a caller keeping a value in a register
/// across the call, as `-fipa-ra` lets callers of a function that never touches it do), so
/// no one reads the register's old value after the stub. `None` for a target that is no
/// function entry of this module.
fn stub_scratch(m: &Module<'_>, target: u64) -> Option<Register> {
    let entry = ImageAddr(target.wrapping_sub(m.bias));
    let f = m.cfg.function_at(entry)?;
    let func = m.cfg.function(f);
    if func.entry != entry {
        return None;
    }
    let live = m.cfg.block(func.entry_block).live_in;
    let free = STUB_SCRATCH.iter().find(|&&r| !live.contains(r))?;
    Some(kerf_codegen::templates::iced_gpr(*free))
}

/// Registers the `ret` of a function copied in place of a call may take to compare its return
/// slot (a return address above 2 GiB), first choice first; one dead at the return site.
const INLINE_SCRATCH: [Gpr; 9] =
    [Gpr::R11, Gpr::R10, Gpr::R9, Gpr::R8, Gpr::Rsi, Gpr::Rdi, Gpr::Rcx, Gpr::Rdx, Gpr::Rax];

/// Up to how many functions one inlined call copies: the callee and those it tail-calls
/// (a PLT stub and the function its slot holds, or a wrapper's tail call).
const INLINE_FUNCS: usize = 3;

/// What a direct call copies in its place: its callee's blocks, and those of the functions it
/// tail-calls, each once, with the `ret`s jumping straight back to the call's continuation
/// while the return slot holds the call's return address ([`seq::inlined_ret`]). A call and
/// its return otherwise take a stub that swaps the pushed address, and a table lookup with a
/// store at the `ret`: four stores a pair for a return address above 2 GiB, one here (the
/// push). Only a function that stays inside its copy can be copied: every block its entry
/// reaches a plain jump, branch, fall-through or `ret`, a call only to a function that can be
/// copied in its turn (one level: [`INLINE_DEPTH`]), no indirect jump but a guarded slot's
/// ([`seq::slot_guard`]: a PLT stub), a tail call only to another copied function, every
/// `ret` through the slot its caller pushed, all of it translated here (its blocks' words
/// are this translation's).
#[derive(Clone, Debug)]
struct Inline {
    /// The blocks copied, each function's entry block first.
    blocks: Vec<(FuncId, BlockId)>,
    /// Calls inside the copy that copy their own callee: the call's block, its return
    /// site's check ([`return_check`]), and that copy.
    calls: Vec<(BlockId, (u64, Option<Register>), Inline)>,
    /// Instructions copied, nested copies' included.
    insns: u32,
    /// Bytes of cache the copy may take at most (as [`room_for`] counts).
    room: u64,
}

/// How deep copies nest: a copied function's calls copy their callees, theirs do not.
const INLINE_DEPTH: usize = 2;

/// The [`Inline`] of a direct call to `g`, if `g` can be copied: `here` holds the functions
/// of this translation, `guarded` the value the fixed slot of a function's entry jump held
/// (for functions whose entry jump is guarded); `depth` is how deep in other copies this one
/// would be.
fn inline_plan(
    m: &Module<'_>,
    g: FuncId,
    here: &HashSet<FuncId>,
    guarded: &dyn Fn(FuncId) -> Option<u64>,
    plugin_room: u64,
    depth: usize,
) -> Option<Inline> {
    let cfg = m.cfg;
    let mut plan = Inline { blocks: Vec::new(), calls: Vec::new(), insns: 0, room: 64 };
    let mut funcs = vec![g];
    let mut k = 0;
    while let Some(&h) = funcs.get(k) {
        k += 1;
        if !here.contains(&h) || funcs.len() > INLINE_FUNCS {
            return None;
        }
        let fun = cfg.function(h);
        let own = |t: BlockId| (fun.blocks.start..fun.blocks.end).contains(&t.0);
        // The blocks the entry reaches, in the order found.
        let first = plan.blocks.len();
        plan.blocks.push((h, fun.entry_block));
        let mut j = first;
        let mut returns = false;
        while let Some(&(_, id)) = plan.blocks.get(j) {
            j += 1;
            let b = cfg.block(id);
            plan.insns += b.insns;
            plan.room += 3 * b.len as u64 + 48 + plugin_room + 16 * b.insns as u64;
            if b.len == 0 || plan.insns > m.inline {
                return None;
            }
            let code = block_insns(m, b.start, b.len, b.insns);
            let (last, body) = code.split_last()?;
            let moves = |i: &Instruction| relocation_hazard(i).is_none();
            if code.len() != b.insns as usize
                || !code.iter().all(moves)
                || body.iter().any(|i| flow(i) != Flow::Next)
            {
                return None;
            }
            let mut callee = None;
            match b.term {
                Terminator::FallThrough | Terminator::CondJump | Terminator::Jump => {}
                Terminator::Return if last.code() == Code::Retnq => returns = true,
                Terminator::TailCall if matches!(flow(last), Flow::Jump(_)) => {}
                // A PLT stub's jump: on to the function its slot held.
                Terminator::IndirectTailCall if id == fun.entry_block && guarded(h).is_some() => {
                    let image = ImageAddr(guarded(h)?.wrapping_sub(m.bias));
                    let t = cfg.function_at(image)?;
                    if !funcs.contains(&t) {
                        funcs.push(t);
                    }
                    continue;
                }
                // A call that copies its callee too, and comes back here without the table.
                Terminator::Call if depth + 1 < INLINE_DEPTH => {
                    let c = cfg.edges_of(b).find_map(|e| match (e.kind, e.target) {
                        (EdgeKind::Call, EdgeTarget::Function(c)) => Some(c),
                        _ => None,
                    })?;
                    let back = return_check(m, h, b)?;
                    let inner = inline_plan(m, c, here, guarded, plugin_room, depth + 1)?;
                    plan.insns += inner.insns;
                    plan.room += inner.room;
                    if plan.insns > m.inline {
                        return None;
                    }
                    callee = Some(c);
                    plan.calls.push((id, back, inner));
                }
                _ => return None,
            }
            let mut back = false;
            for e in cfg.edges_of(b) {
                match (e.kind, e.target) {
                    (EdgeKind::TailCall, EdgeTarget::Function(t))
                        if b.term == Terminator::TailCall =>
                    {
                        if !funcs.contains(&t) {
                            funcs.push(t);
                        }
                    }
                    (EdgeKind::Call, EdgeTarget::Function(c)) if Some(c) == callee => {}
                    (
                        EdgeKind::FallThrough | EdgeKind::Branch | EdgeKind::Jump,
                        EdgeTarget::Block(t),
                    ) if own(t) => {
                        back |= e.kind == EdgeKind::FallThrough;
                        if !plan.blocks[first..].iter().any(|&(_, s)| s == t) {
                            plan.blocks.push((h, t));
                        }
                    }
                    (EdgeKind::Return, _) => {}
                    _ => return None,
                }
            }
            // (A call's copy needs the return site copied too.)
            if callee.is_some() && !back {
                return None;
            }
        }
        if returns && !cfg.function(h).ret_through_slot {
            return None;
        }
    }
    Some(plan)
}

/// A register a jump at `f`'s entry through a fixed slot may overwrite, with the flags, for
/// [`seq::slot_guard`]: not an argument (the target reads them) and dead wherever `f`'s
/// returns land, which is where the target's returns land (nothing is pushed before it).
fn tail_scratch(m: &Module<'_>, f: FuncId) -> Option<Register> {
    if !m.guards {
        return None;
    }
    let live = m.continuations()?.get(f.0 as usize)?;
    if !live.flags.is_empty() {
        return None;
    }
    let args = kerf_arch::x86_64::RegSet::SYSV_ARGS;
    let free =
        [Gpr::R11, Gpr::R10].into_iter().find(|&r| !live.regs.contains(r) && !args.contains(r));
    free.map(kerf_codegen::templates::iced_gpr)
}

/// A jump-table dispatch that can go through a translated copy of its table
/// ([`seq::table_dispatch`]), in one of two shapes compilers emit:
///
/// - absolute (non-PIE code, an interpreter's computed goto): `mov r, [T+i*8]; jmp r` or
///   `jmp [T+i*8]`, the table's address in the operand or in a base register (checked at
///   run time), the copy read through an absolute 32-bit address;
/// - PC-relative (PIC switches, SQLite's bytecode loop): `lea b, [rip+T]` in the block, then
///   `movsxd r, [b+i*4]; add r, b; jmp r`, the copy found with a `lea` of its own into `r`.
///
/// And the flags dead at every target (the bounds check clobbers them).
pub(crate) struct TableShape {
    /// Original address of the instruction that reads the table.
    at: u64,
    /// How the copy is read (see [`seq::CopyAt`]).
    copy: seq::CopyAt,
    index: Register,
    /// The register the dispatch jumps through (`None`: `jmp [T+index*8]`).
    reg: Option<Register>,
    /// Per entry: its target's original address, and the registers the dispatch changed
    /// that the target may read, with the values the original left there (`reg`: the
    /// target's address; a near copy's base: the table's), which a [`seq::table_stub`]
    /// puts back first.
    targets: Vec<(u64, Vec<(Register, u64)>)>,
}

/// What [`table_shape`] looks at once per table rather than once per dispatch: an
/// interpreter's handlers each end in a dispatch through the same table (python3.11's
/// `_PyEval_EvalFrameDefault` has 287, each of 256 targets, and the analysis keeps a table
/// per dispatch), and looking at every target from every dispatch was three quarters of that
/// function's translation.
#[derive(Default)]
pub(crate) struct TableLook {
    look: kerf_analysis::liveness::LinkedLook,
    /// Per table address: its targets (image addresses), and what [`table_targets`] found
    /// for them.
    targets: std::cell::RefCell<HashMap<u64, KnownTable>>,
}

/// Each target of a jump table: its runtime address and the registers it may read.
type TableTargets = std::rc::Rc<[(u64, RegSet)]>;

/// A table's targets (image addresses) and what [`table_targets`] found for them.
type KnownTable = (Vec<ImageAddr>, Option<TableTargets>);

/// The targets of jump table `t` as [`TableShape`] needs them; `None` where one is not a
/// block's start in a function, or may read the flags.
fn table_targets(m: &Module<'_>, t: &JumpTable, look: &TableLook) -> Option<TableTargets> {
    if let Some((targets, known)) = look.targets.borrow().get(&t.table.0) {
        if *targets == t.targets {
            return known.clone();
        }
    }
    let cfg = m.cfg;
    let found = (|| {
        let mut targets = Vec::with_capacity(t.targets.len());
        for &tg in &t.targets {
            let f = cfg.function_holding(tg)?;
            let id = cfg.block_containing(f, tg)?;
            // A `.cold` part's block that jumps back into its function reads everything as
            // stored; a few blocks' look further finds what it really reads.
            let live = look.look.live_in(cfg, id, 3);
            if cfg.block(id).start != tg || !live.flags.is_empty() {
                return None;
            }
            targets.push((m.runtime(tg), live.regs));
        }
        Some(TableTargets::from(targets))
    })();
    look.targets.borrow_mut().insert(t.table.0, (t.targets.clone(), found.clone()));
    found
}

/// The [`TableShape`] of block `b`, if its dispatch has one.
pub(crate) fn table_shape(
    m: &Module<'_>,
    b: &kerf_analysis::cfg::Block,
    look: &TableLook,
) -> Option<TableShape> {
    let Terminator::JumpTable(t) = b.term else { return None };
    let cfg = m.cfg;
    let table = cfg.jump_tables.get(t.0 as usize)?;
    if !m.tables || table.targets.is_empty() {
        return None;
    }
    let insns = block_insns(m, b.start, b.len, b.insns);
    let t_at = m.runtime(table.table);
    let (at, copy, index, reg) = match table.format {
        TableFormat::Absolute64 => absolute_dispatch(&insns, t_at)?,
        TableFormat::Relative32 { base } if m.runtime(base) == t_at => {
            relative_dispatch(&insns, t_at)?
        }
        TableFormat::Relative32 { .. } => return None,
    };
    let known = table_targets(m, table, look)?;
    let targets = known
        .iter()
        .map(|&(target, live)| {
            let reads = |r: Register| Gpr::from_iced(r).is_none_or(|g| live.contains(g));
            // The jump register held the target; a near copy's own base (when the index is
            // the jump register) held the table.
            let changed = reg.map(|r| (r, target)).into_iter().chain(match copy {
                seq::CopyAt::Near { base: Some(b) } => Some((b, t_at)),
                _ => None,
            });
            (target, changed.filter(|&(r, _)| reads(r)).collect())
        })
        .collect();
    Some(TableShape { at, copy, index, reg, targets })
}

/// A 64-bit general register other than `rsp` (and not `rip`).
fn plain_gpr(r: Register) -> bool {
    r.size() == 8 && r != Register::RSP && r != Register::RIP
}

/// The absolute shape at the end of a block's instructions `insns`, the table at `t_at`.
fn absolute_dispatch(
    insns: &[Instruction],
    t_at: u64,
) -> Option<(u64, seq::CopyAt, Register, Option<Register>)> {
    // `[T + index*8]`, or `[base + index*8 + d]` where the analysis found `base + d` to be T
    // (checked at run time), and nothing else.
    let reads_table = |i: &Instruction, k: u32| {
        let ok = i.op_kind(k) == OpKind::Memory
            && i.memory_index_scale() == 8
            && plain_gpr(i.memory_index())
            && i.segment_prefix() == Register::None;
        let base = match i.memory_base() {
            Register::None if i.memory_displacement64() == t_at => None,
            b if plain_gpr(b) && b != i.memory_index() => {
                let want = t_at.wrapping_sub(i.memory_displacement64());
                // `cmp base, imm32` sign-extends its immediate.
                if want as i64 != want as i32 as i64 {
                    return None;
                }
                Some((b, want))
            }
            _ => return None,
        };
        ok.then_some((seq::CopyAt::Absolute { base }, i.memory_index()))
    };
    let jmp = insns.last()?;
    Some(match jmp.op0_kind() {
        OpKind::Memory => {
            let (copy, index) = reads_table(jmp, 0)?;
            (jmp.ip(), copy, index, None)
        }
        OpKind::Register => {
            let r = jmp.op0_register();
            let load = insns.get(insns.len().checked_sub(2)?)?;
            if load.code() != Code::Mov_r64_rm64 || load.op0_register() != r {
                return None;
            }
            let (copy, index) = reads_table(load, 1)?;
            (load.ip(), copy, index, Some(r))
        }
        _ => return None,
    })
}

/// The PC-relative shape at the end of a block's instructions `insns`, the table (and the
/// base its entries are relative to) at `t_at`: `lea b, [rip+T]`, nothing else writing `b`
/// after it, then `movsxd r, [b+i*4]; add r, b; jmp r` last.
fn relative_dispatch(
    insns: &[Instruction],
    t_at: u64,
) -> Option<(u64, seq::CopyAt, Register, Option<Register>)> {
    let n = insns.len();
    let [load, add, jmp] = insns.get(n.checked_sub(3)?..)? else { return None };
    let r = jmp.op0_register();
    let (b, i) = (load.memory_base(), load.memory_index());
    let shape = jmp.op0_kind() == OpKind::Register
        && load.code() == Code::Movsxd_r64_rm32
        && load.op0_register() == r
        && load.memory_index_scale() == 4
        && load.memory_displacement64() == 0
        && load.segment_prefix() == Register::None
        && matches!(add.code(), Code::Add_r64_rm64 | Code::Add_rm64_r64)
        && add.op0_kind() == OpKind::Register
        && add.op0_register() == r
        && add.op1_kind() == OpKind::Register
        && add.op1_register() == b
        && plain_gpr(r)
        && plain_gpr(b)
        && plain_gpr(i)
        && r != b
        && b != i;
    if !shape {
        return None;
    }
    // The last write of `b` before the load is the `lea` of the table.
    let mut info = iced_x86::InstructionInfoFactory::new();
    let writes_b = |x: &Instruction, info: &mut iced_x86::InstructionInfoFactory| {
        info.info(x).used_registers().iter().any(|u| {
            u.register().full_register() == b
                && !matches!(u.access(), iced_x86::OpAccess::Read | iced_x86::OpAccess::CondRead)
        })
    };
    let def = insns[..n - 3].iter().rev().find(|x| writes_b(x, &mut info))?;
    let lea_of_table = def.code() == Code::Lea_r64_m
        && def.op0_register() == b
        && def.memory_base() == Register::RIP
        && def.ip_rel_memory_address() == t_at;
    // The copy's address goes into the jump register, or, when that is the index too, into
    // the base (which the original no longer needs after the load).
    let copy = seq::CopyAt::Near { base: (r == i).then_some(b) };
    lea_of_table.then_some((load.ip(), copy, i, Some(r)))
}

/// Words of the table copies (and bytes of their dispatch and stubs) a block may need.
fn table_words(m: &Module<'_>, b: &kerf_analysis::cfg::Block) -> u64 {
    match b.term {
        Terminator::JumpTable(t) if m.tables => {
            m.cfg.jump_tables.get(t.0 as usize).map_or(0, |t| t.targets.len() as u64)
        }
        _ => 0,
    }
}

impl Module<'_> {
    /// What is live where each function's returns land ([`Module::returns`]), worked out
    /// on first use unless kerf's session filled it first (from facts kept beside the cache,
    /// checked); `None` when returns keep their frame.
    pub fn continuations(&self) -> Option<&Vec<Live>> {
        let at = || kerf_analysis::liveness::at_continuations(self.cfg);
        self.returns.map(|r| r.get_or_init(at))
    }

    /// What plugin code at the start of block `b` of `f` must keep: the block's live-in, and
    /// the registers `f`'s callers may read as results it hands back outside the SysV ABI
    /// ([`kerf_analysis::liveness::beyond_abi_returns`]: the block sets call them dead; a
    /// `kerf_block` callback that took `rsi` for its argument in OpenSSL's
    /// `_aesni_ctr32_ghash_6x` broke AES-GCM). Without return facts yet (a big module early
    /// in an attach) the block's set alone.
    pub fn live_in(&self, f: FuncId, b: &kerf_analysis::cfg::Block) -> LiveAt {
        let lands = self.continuations().and_then(|c| c.get(f.0 as usize));
        let beyond = lands.map(|l| kerf_analysis::liveness::beyond_abi_returns(self.cfg, f, l));
        let regs = beyond.map_or(b.live_in, |r| b.live_in.union(r));
        LiveAt { regs, flags: b.flags_live_in }
    }

    pub fn runtime(&self, a: ImageAddr) -> u64 {
        a.0.wrapping_add(self.bias)
    }
}

/// Where a module's translation lives in the target.
#[derive(Clone, Copy, Debug)]
pub struct Layout {
    /// The code cache's first byte, and how many bytes it has.
    pub code: u64,
    pub room: u64,
    /// The lookup table (anywhere: addressed with a 64-bit immediate), and how a target
    /// chooses its set.
    pub table: u64,
    pub hash: crate::table::Hash,
    /// The module's data area (header, then an 8-byte word per block, then a shared word per
    /// block, then the indirect sites' prediction words and the exits' link words), within a
    /// rel32 of the cache.
    pub data: u64,
    /// The mailbox a miss asks kerf through (see [`crate::mailbox`]), if kerf translates on
    /// demand.
    pub mailbox: Option<u64>,
    /// The id of the thread that owns the data words (the main thread's: the process id),
    /// where the plugins' code can read a thread's id (`tid`, glibc's): a plugin tells the
    /// owner by it rather than by the thread pointer at [`DATA_OWNER`], which takes one
    /// register less, and a child forked from the main thread (same thread pointer, an id
    /// of its own) is then not taken for it.
    pub owner_tid: Option<u32>,
    /// The module's thread table (within a rel32 of the cache: the lookup addresses it
    /// rip-relative) and its per-thread ring area (anywhere), for a plugin that emits
    /// records (`emit.thread`); 0 when there are none. One table per module, shared by all
    /// its translations, so that a thread has one slot, and so one ring, in the module.
    pub threads: u64,
    pub rings: u64,
    /// The plugin's routines' copy near this module and its state ([`Plugin::routines`];
    /// 0: none).
    pub routines: u64,
    pub state: u64,
    /// Per-thread counters ([`seq::Slabs`]): where threads get their slabs (then every
    /// translation gates the ways in, whatever its module), and how far this module's data
    /// words lie from their copies in a slab (a word at `w` has the running thread's copy at
    /// `gs:[w + per_thread]`; `None`: the module's words have no copies, and the plugins'
    /// counters tell the owner thread from the others).
    pub slabs: Option<seq::Slabs>,
    pub per_thread: Option<i64>,
    /// Where in a thread's slab the address of its ring in this module is kept
    /// (`gs:[ring_word]`, [`seq::SLAB_RINGS`]), where threads have slabs and the module
    /// has rings; `None`: each record looks the thread's slot up in the thread table.
    pub ring_word: Option<i32>,
    /// The original address of the dynamic loader's debugger hook, in the loader's layout
    /// while roots wait for a library (see [`load_hook`]): its translation calls
    /// [`seq::load_notice`] first, as the jump over the original sends it to.
    pub load_hook: Option<u64>,
}

impl Layout {
    /// The displacement of the running thread's copy of data word `w` ([`Layout::per_thread`]).
    pub fn thread_copy(&self, w: u64) -> Option<i32> {
        self.per_thread.and_then(|d| i32::try_from((w as i64).wrapping_add(d)).ok())
    }
}

/// Where a thread leaves the region: a root call made from the original code ends at the
/// root's return at the stack pointer its outer entry recorded ([`seq::outer_check`]); and a
/// direct call to a root from a function the walk from the roots did not reach (`main`
/// calling the root) gets no return site in the table, so that the root's return goes back to
/// the original code where the check did not send it.
#[derive(Clone, Copy, Debug)]
pub struct Scope<'a> {
    /// Original entries of the roots.
    pub roots: &'a std::collections::HashSet<u64>,
    /// The module's functions the walk reached.
    pub reached: &'a std::collections::HashSet<FuncId>,
    /// Fixed slots read when the walk was made: slot address -> value then (see
    /// [`crate::region::Region::slots`]).
    pub slots: &'a std::collections::HashMap<u64, u64>,
    /// Which blocks carry ran marks (see [`block_program`]); `None`, none. None does under a
    /// plugin that counts blocks ([`Plugin::counts_blocks`]): its counts say as much.
    pub marks: Option<Marks<'a>>,
}

/// Which blocks carry ran marks ([`block_program`]): in every function but those `known` to
/// have run already, its entry block, and each block that a jump enters other than through
/// the entry block (a GCC `.cold` part, which the analysis finds as a function of its own
/// and its hot part jumps into half-way, never passes its entry block; glibc's string
/// functions jump into each other's bodies): one that no edge of its own function reaches
/// (landing pads are too), or one in `landings`.
#[derive(Clone, Copy, Debug)]
pub struct Marks<'a> {
    pub known: &'a std::collections::HashSet<FuncId>,
    /// Blocks that other functions jump to ([`landings`] of the functions translated with
    /// these, or around them): a jump from a function translated apart, into a block its own
    /// function also reaches, leaves no mark (the function's first miss there joins the hint
    /// instead).
    pub landings: &'a HashSet<ImageAddr>,
}

/// The blocks of functions other than their own that the functions `from` jump to, other
/// than function entries (see [`Marks`]). Block starts.
pub fn landings(cfg: &Cfg, from: &[FuncId]) -> HashSet<ImageAddr> {
    let mut out = HashSet::default();
    for &f in from {
        // A function's blocks are numbered in one range.
        let own = cfg.function(f).blocks.clone();
        for b in cfg.blocks_of(f) {
            for e in cfg.edges_of(b) {
                match e.target {
                    EdgeTarget::Block(t) if !own.contains(&t.0) => {
                        let t = cfg.block(t);
                        if cfg.function(t.func).entry != t.start {
                            out.insert(t.start);
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    out
}

/// Where the ran marks of functions `funcs` go ([`Marks`]). Block starts.
fn marks_at(cfg: &Cfg, funcs: &[FuncId], marks: &Marks<'_>) -> HashSet<ImageAddr> {
    let mut out = HashSet::default();
    for &f in funcs.iter().filter(|f| !marks.known.contains(f)) {
        let func = cfg.function(f);
        let own = func.blocks.clone();
        let mut reached = vec![false; own.len()];
        for b in cfg.blocks_of(f) {
            for e in cfg.edges_of(b) {
                match e.target {
                    EdgeTarget::Block(t) if own.contains(&t.0) && t != func.entry_block => {
                        reached[(t.0 - own.start) as usize] = true
                    }
                    _ => {}
                }
            }
        }
        for (b, r) in cfg.blocks_of(f).iter().zip(reached) {
            if !r || marks.landings.contains(&b.start) {
                out.insert(b.start);
            }
        }
    }
    out
}

/// What a plugin sees of a block it may instrument.
#[derive(Clone, Copy, Debug)]
pub struct BlockInfo<'a> {
    pub func: &'a str,
    /// The original address of its function's entry (the block starts a call when it is
    /// the block's own `start`).
    pub func_entry: u64,
    /// The block's original address, length and instruction count.
    pub start: u64,
    pub len: u32,
    pub insns: u32,
    /// What is live at its first instruction (the plugin's code may clobber the rest).
    pub live: LiveAt,
    /// The block's own 8-byte word in the data area (zero at start; at a function's entry
    /// block the translator's unless the plugin counts blocks, see
    /// [`Plugin::counts_blocks`]), its shared word (in
    /// another part of the area: threads that update it do not share a cache line with the
    /// owner's words), and the word holding the owner thread's thread pointer, or (better,
    /// where there is one) the owner's thread id for the IR's `tid`.
    pub word: u64,
    pub shared: u64,
    pub owner: u64,
    pub owner_tid: Option<u32>,
    /// The running thread's copy of `word` (`gs:[per_thread]`, see [`Layout::per_thread`]),
    /// where threads have slabs: a counter there needs no check and no lock.
    pub per_thread: Option<i32>,
    /// Whether a block counter goes here: false where the count follows from the function's
    /// other counters ([`Module::counting`]).
    pub counted: bool,
    /// The module's per-thread ring area ([`Layout::rings`]; 0: none).
    pub rings: u64,
    /// The plugin's routines and state ([`Layout::routines`], [`Layout::state`]).
    pub routines: u64,
    pub state: u64,
}

/// What a plugin sees of a place where a function's frame ends: a `ret`, or a tail call's
/// jump to another function's entry (the callee then returns in its place). The code it
/// chooses runs just before that instruction, with the stack as the instruction finds it
/// (`[rsp]` the return address).
#[derive(Clone, Copy, Debug)]
pub struct ExitInfo<'a> {
    pub func: &'a str,
    pub func_entry: u64,
    /// The instruction's original address, whether it is a tail call, and a direct tail
    /// call's target.
    pub at: u64,
    pub tail: bool,
    pub target: Option<u64>,
    /// What is live just before it.
    pub live: LiveAt,
    /// The module's per-thread ring area ([`Layout::rings`]; 0: none).
    pub rings: u64,
    /// As a block's ([`BlockInfo::owner_tid`]): set where the code can read a thread's id.
    pub owner_tid: Option<u32>,
    /// As a block's ([`BlockInfo::routines`], [`BlockInfo::state`]).
    pub routines: u64,
    pub state: u64,
}

/// What a plugin sees of one side of a conditional branch: the code it chooses runs each
/// time control goes that way, before the block the branch leads to.
#[derive(Clone, Copy, Debug)]
pub struct EdgeInfo<'a> {
    pub func: &'a str,
    /// The branch's original address, and where this side leads (its target when `taken`,
    /// else the instruction after it).
    pub branch: u64,
    pub to: u64,
    pub taken: bool,
    /// What is live where it leads (everything when that is not a block of a translated
    /// function).
    pub live: LiveAt,
    /// The side's own word and shared word in the data area (as a block's), and the owner
    /// as a block's ([`BlockInfo::owner`], [`BlockInfo::owner_tid`]).
    pub word: u64,
    pub shared: u64,
    pub owner: u64,
    pub owner_tid: Option<u32>,
    /// As a block's ([`BlockInfo::per_thread`]).
    pub per_thread: Option<i32>,
    /// Whether a plugin that counts blocks needs this side counted for them (see
    /// [`BlockInfo::counted`]).
    pub counted: bool,
}

/// A JIT plugin: the code it weaves in, as IR, lowered where it runs. Modules are translated
/// in parallel, so a plugin is shared between threads.
pub trait Plugin: Sync {
    /// The program to run at the entry of `block`, if any.
    fn block(&self, block: &BlockInfo<'_>) -> Option<Program>;
    /// Whether [`Plugin::edge`] may return code: the translator then gives every conditional
    /// branch two words a side and asks for each side's program.
    fn edges(&self) -> bool {
        false
    }
    /// Whether every conditional branch's sides may carry code, not only those a counter
    /// placement chooses ([`Module::counting`]): callees are then not copied in place of
    /// calls (a copy carries no side's code).
    fn every_edge(&self) -> bool {
        self.edges()
    }
    /// The program to run on one side of a conditional branch, if any.
    fn edge(&self, _edge: &EdgeInfo<'_>) -> Option<Program> {
        None
    }
    /// Whether [`Plugin::exit`] may return code (the translator then works out the liveness
    /// at every `ret` and tail call).
    fn exits(&self) -> bool {
        false
    }
    /// The program to run where a function's frame ends, if any.
    fn exit(&self, _exit: &ExitInfo<'_>) -> Option<Program> {
        None
    }
    /// Whether [`Plugin::block`] counts every block's executions in its own word
    /// ([`BlockInfo::word`]): the translator then leaves the word to it, and the count of a
    /// function's entry block says whether the function ran. Otherwise the entry block's word
    /// is the translator's, for its ran mark ([`Scope::marks`]).
    fn counts_blocks(&self) -> bool {
        false
    }
    /// Bytes of code the plugin weaves in at one block's entry or a branch's side at most,
    /// for sizing the cache.
    fn room(&self) -> u64 {
        96
    }
    /// Bytes more it weaves in at a function's entry and at each exit ([`Plugin::exit`]).
    fn call_room(&self) -> u64 {
        0
    }
    /// Routines its programs call (`call`): position-independent code that kerf copies to the
    /// start of every module's code room (a call reaches only a rel32), at
    /// [`BlockInfo::routines`].
    fn routines(&self) -> &[u8] {
        &[]
    }
    /// Bytes of zeroed memory, shared with kerf, for the routines' state (at
    /// [`BlockInfo::state`]).
    fn state_len(&self) -> u64 {
        0
    }
}

/// The plugin that weaves in nothing: the code cache alone.
pub struct NoPlugin;

impl Plugin for NoPlugin {
    fn block(&self, _block: &BlockInfo<'_>) -> Option<Program> {
        None
    }
}

/// One translated block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Translated {
    pub func: FuncId,
    /// Original address, and where its translation starts.
    pub start: u64,
    pub cache: u64,
    /// Its words in the data area.
    pub word: u64,
    pub shared: u64,
}

/// Why an original instruction is not run from the cache: the thread leaves for the original
/// code there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leaves {
    /// A direct branch or call to code with no translation.
    Untranslated,
    /// An instruction that reports its own address (`int3`, `ud2`) or cannot move.
    Hazard(&'static str),
    /// A `ret n` that pops more than the lookup frame allows.
    BigReturn,
}

/// An entry of the lookup table: an original address, its indirect entry, its continuation
/// (where a `ret` to it goes), and its rank: entries of a lower rank go in first (when sets
/// fill up, the rarely used ones are those left out): 0 a function entry, 1 a return site, 2
/// another block, 3 an instruction inside a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub orig: u64,
    pub entry: u64,
    pub cont: u64,
    pub rank: u8,
    /// Whether a frameless `ret` or indirect call may go straight to `cont` (see
    /// [`crate::table::Table::insert_ranked`]): not where the indirect entry counts the
    /// lookup's arrivals.
    pub keyed: bool,
    /// Whether a call of the translation returns here, whatever its rank: a return site
    /// that is also another block's target (`setjmp`'s, which `longjmp` jumps to) keeps
    /// that block's rank, but must be in the live table before any entry that leads into
    /// the translation, since a `ret` that misses leaves the cache without asking kerf.
    pub returned_to: bool,
}

/// A translated conditional branch, for a plugin with edges: its original address, its
/// target, and the words of its taken and not-taken sides (`[own, shared]` each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Branch {
    pub func: FuncId,
    pub at: u64,
    pub target: u64,
    pub taken: [u64; 2],
    pub not_taken: [u64; 2],
    /// Whether the plugin's code went on each side (`[taken, not_taken]`).
    pub placed: [bool; 2],
}

/// A module's translation.
#[derive(Clone, Debug, Default)]
pub struct Translation {
    /// Where its code and its data go in the target (the layout's `code` and `data`).
    pub at: u64,
    pub data_at: u64,
    pub code: Vec<u8>,
    pub blocks: Vec<Translated>,
    /// What goes into the lookup table.
    pub entries: Vec<Entry>,
    /// Clean points: cache address -> original address.
    pub clean: BTreeMap<u64, u64>,
    /// The clean points where a branch side's code starts (cache address -> the branch's
    /// original address). The clean point names where the side goes, but a thread there has
    /// not run the side's code: it stands at the end of the branch's block.
    pub sides: BTreeMap<u64, u64>,
    /// Where the cache leaves for original code, by original target, and why.
    pub exits: BTreeMap<u64, Leaves>,
    /// Bytes of data area used (header and block words).
    pub data_len: u64,
    /// Where the shared miss path starts.
    pub miss: u64,
    /// Where the blocks' copies end (the out-of-line code follows: the last function's call
    /// stubs, a branch side's plugin code, entries, the miss paths; other functions' stubs
    /// lie after their own blocks, and have no clean points).
    pub blocks_end: u64,
    /// The indirect sites' prediction words: each must hold the address of a way of the
    /// lookup table before the cache runs (kerf gives them the first).
    pub preds: std::ops::Range<u64>,
    /// The exits that kerf may link to a translation later: each link word must hold its
    /// `slow` address before the cache runs.
    pub links: Vec<Link>,
    /// The conditional branches, with words for each side (only for a plugin with edges).
    pub branches: Vec<Branch>,
    /// The jump tables' translated copies: each copy's first word in the data area and its
    /// words' values (cache addresses), to write after the prediction words (the copies lie
    /// among them) and before the cache runs.
    pub tables: Vec<(u64, Vec<u64>)>,
    /// Dispatches through those copies: more than copies where dispatches share one.
    pub table_dispatches: usize,
    /// Jumps through a fixed slot that go straight on while the slot holds what it held
    /// ([`seq::slot_guard`]).
    pub slot_guards: usize,
    /// Indirect calls that look their target up with no frame first ([`seq::fast_call`]).
    pub frameless_calls: usize,
    /// Callers' return addresses compared inline by `ret`s ([`seq::chained_ret`]).
    pub chained_returns: usize,
    /// Functions whose `ret`s compare the callers an earlier run's counts chose
    /// ([`Module::profile`]).
    pub hot_chains: usize,
    /// `ret`s that look their continuation up with no frame ([`seq::fast_ret`]).
    pub frameless_returns: usize,
    /// Data words (among the prediction words) and the values they must hold, written after
    /// the prediction words and before the cache runs: the return addresses of calls that
    /// copy their callee in place.
    pub constants: Vec<(u64, u64)>,
    /// Direct calls that copy their callee in place (see `Inline`).
    pub inlined: usize,
    /// The roots' outer entries ([`seq::outer_entry`]), by the root's original entry: where
    /// the root's jump in the original code goes.
    pub outers: BTreeMap<u64, u64>,
    /// Blocks whose indirect entries count the lookup's arrivals (fewer counters, see
    /// [`crate::counters::FunctionFlow::arrivals`]): the block's start and the counter's own
    /// word (its shared word the next).
    pub arrivals: Vec<(u64, u64)>,
    /// The functions translated with fewer counters, and their flow graphs and counters.
    pub flows: Vec<(FuncId, crate::counters::FunctionFlow)>,
}

/// A linkable exit (see [`seq::linked_exit_stub`]): its word in the data area, the original
/// target, the exit's slow path (which leaves through the miss path), and where its `jmp
/// [word]` is (6 bytes, which kerf may turn into a direct `jmp` before the cache runs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Link {
    pub word: u64,
    pub target: u64,
    pub slow: u64,
    pub jump: Option<u64>,
}

impl Translation {
    /// Where a jump from the original code to root entry `orig` goes: the root's outer entry
    /// (see [`seq::outer_entry`]), else where its block starts.
    pub fn entered_at(&self, orig: u64) -> Option<u64> {
        self.outers.get(&orig).copied().or_else(|| self.cache_of(orig))
    }

    /// Where block `orig` starts in the cache.
    pub fn cache_of(&self, orig: u64) -> Option<u64> {
        let i = self.blocks.binary_search_by_key(&orig, |b| b.start).ok()?;
        Some(self.blocks[i].cache)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum JitError {
    /// The block encoder refused the module's cache.
    Encode { module: String, detail: String },
    /// The cache needs more room than was reserved.
    Room { module: String, need: u64, room: u64 },
    /// A plugin's program could not be lowered at a block.
    Lower { block: u64, detail: String },
    /// A root's first instructions cannot be copied for the threads that must run them
    /// outside the cache (see [`springboard`]).
    Springboard { module: String, entry: u64, why: String },
}

impl fmt::Display for JitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            JitError::Encode { module, detail } => {
                write!(f, "cannot encode the code cache of {module}: {detail}")
            }
            JitError::Room { module, need, room } => {
                write!(f, "the code cache of {module} needs {need} bytes, {room} were reserved")
            }
            JitError::Lower { block, detail } => {
                write!(f, "cannot lower the plugin's code at block {block:#x}: {detail}")
            }
            JitError::Springboard { module, entry, why } => {
                write!(f, "cannot copy the first instructions of the root at {entry:#x} in {module}: {why}")
            }
        }
    }
}

impl std::error::Error for JitError {}

/// Bytes of cache to reserve for `funcs` of `m` with `plugin`'s code woven in: a bound the
/// translation stays under (each byte of code at most 3, plus each block's entry, plugin
/// code and indirect entry, plus each instruction's lookup if it is an indirect transfer).
pub fn room_for(m: &Module<'_>, funcs: &[FuncId], plugin: &dyn Plugin) -> u64 {
    let inlining = m.inline > 0 && m.returns.is_some() && !plugin.every_edge() && !plugin.exits();
    let here: HashSet<FuncId> = match inlining {
        true => funcs.iter().copied().collect(),
        false => HashSet::default(),
    };
    room_total(plugin, room_parts(m, funcs, &|g| here.contains(&g), plugin))
}

/// [`room_for`] from its parts ([`room_parts`]), summed over any split of the functions.
pub fn room_total(plugin: &dyn Plugin, (own, copies): (u64, u64)) -> u64 {
    let own = room_base(plugin) + own;
    own + copies.min(own / 2)
}

/// The room any translation takes besides its blocks': a page, the plugin's routines.
fn room_base(plugin: &dyn Plugin) -> u64 {
    4096 + plugin.routines().len() as u64
}

/// The parts of [`room_for`] that add up over functions, so that a caller may split a long
/// list (python3.11's 10 k functions took 8 ms on one core at every start): the room of
/// `funcs`' blocks (without [`room_base`]), and of the callees (those `within` holds) copied
/// in place of their calls.
pub fn room_parts(
    m: &Module<'_>,
    funcs: &[FuncId],
    within: &(dyn Fn(FuncId) -> bool + Sync),
    plugin: &dyn Plugin,
) -> (u64, u64) {
    let own = blocks_room(m, funcs, plugin);
    let inlining = m.inline > 0 && m.returns.is_some() && !plugin.every_edge() && !plugin.exits();
    if !inlining {
        return (own, 0);
    }
    // And room for callees copied in place of calls (see `Inline`): each direct call to a
    // small function of `funcs`, its blocks' room once more, up to half as much again. (A
    // hint: `translate` copies only within the room it is given beyond its blocks' own.)
    let small = |g: FuncId| m.cfg.blocks_of(g).iter().map(|b| b.insns).sum::<u32>() <= m.inline;
    // (Per callee once, small or not: a function is called from many places, and summing a
    // callee's instructions at every call was most of the room of python3.11's whole module,
    // worked out at every start.)
    let mut callee_room: HashMap<FuncId, Option<u64>> = HashMap::default();
    let mut copies = 0;
    for b in funcs.iter().flat_map(|&f| m.cfg.blocks_of(f)) {
        if b.term != Terminator::Call {
            continue;
        }
        for e in m.cfg.edges_of(b) {
            if let (EdgeKind::Call, EdgeTarget::Function(g)) = (e.kind, e.target) {
                if within(g) {
                    let room = callee_room.entry(g).or_insert_with(|| {
                        small(g).then(|| room_base(plugin) + blocks_room(m, &[g], plugin))
                    });
                    copies += room.unwrap_or(0);
                }
            }
        }
    }
    (own, copies)
}

/// The room of `funcs`' blocks (each byte of code at most 3, plus each block's entry, plugin
/// code and indirect entry, plus each instruction's lookup if it is an indirect transfer).
fn blocks_room(m: &Module<'_>, funcs: &[FuncId], plugin: &dyn Plugin) -> u64 {
    let (plugin_bytes, call_bytes) = (plugin.room(), plugin.call_room());
    let mut n = 0;
    for &f in funcs {
        let entry = m.cfg.function(f).entry;
        let region = m.mem.code_region(entry);
        for b in m.cfg.blocks_of(f) {
            n += 3 * b.len as u64 + 48 + plugin_bytes + 16 * b.insns as u64;
            if b.term == Terminator::CondJump {
                // Each side's code, the taken side's jump back, a nop.
                n += 2 * plugin_bytes + 16;
            }
            let tail_table = plugin.exits() && tail_call_table(m.cfg, b);
            if b.start == entry || ends_frame(b.term) || tail_table {
                n += call_bytes;
            }
            if b.term == Terminator::IndirectCall {
                // A frameless lookup before the framed one (`seq::fast_call`).
                n += 48;
            }
            if b.term == Terminator::Return {
                // Up to `m.chains` callers compared first (`seq::chained_ret`, at most 34
                // bytes each; `seq::chained_ret_saved`, at most 52).
                n += 56 * m.chains as u64;
            }
            // A table's dispatch, and a stub per entry at most.
            n += 16 * table_words(m, b);
            // A thread gate and its way out after each `syscall` or `wrgsbase`, and an unmap's
            // notice (counted by their opcode bytes, wherever they are: a bound).
            n += 200 * gs_setter_bytes(m, region, b);
        }
    }
    n
}

/// Whether `i` may give the thread a new `gs` base: a `syscall` (`arch_prctl(ARCH_SET_GS)`,
/// and `clone`, whose child starts after it with its parent's base) or a `wrgsbase`. A thread
/// gate follows each in the cache.
fn sets_gs(i: &Instruction) -> bool {
    matches!(i.code(), Code::Syscall | Code::Wrgsbase_r32 | Code::Wrgsbase_r64)
}

/// Whether `i` is a `munmap` `syscall`, its number set by the instruction right before it
/// (`before`), as glibc's and ld.so's wrappers do. A number set further back, or in a
/// register, is not seen (a `dlclose` goes through ld.so's wrapper). (`mremap` returns an
/// address, and nothing moves a library's text with it.)
fn unmaps(before: Option<&Instruction>, i: &Instruction) -> bool {
    is_syscall(before, i, 11)
}

/// Whether `i` is an `rt_sigaction` `syscall`, its number set right before it (glibc's
/// `__libc_sigaction`, Go's runtime), as [`unmaps`] sees a `munmap`.
fn sets_action(before: Option<&Instruction>, i: &Instruction) -> bool {
    is_syscall(before, i, 13)
}

/// Whether `i` is a `syscall` whose number the instruction right before it does not set
/// (glibc's `syscall()`, Go's `Syscall6`): it may be an `rt_sigaction`, which only the number
/// in `eax` at run time tells ([`seq::action_check`]).
fn number_unknown(before: Option<&Instruction>, i: &Instruction) -> bool {
    i.code() == Code::Syscall
        && !before
            .is_some_and(|b| b.code() == Code::Mov_r32_imm32 && b.op0_register() == Register::EAX)
}

/// Whether `i` is a `syscall` whose number `nr` the instruction right before it sets.
fn is_syscall(before: Option<&Instruction>, i: &Instruction, nr: u32) -> bool {
    i.code() == Code::Syscall
        && before.is_some_and(|b| {
            b.code() == Code::Mov_r32_imm32
                && b.op0_register() == Register::EAX
                && b.immediate32() == nr
        })
}

/// The instructions the jump at root `f`'s entry displaces: a `jump5` planned as any other
/// (`kerf_patch::plan_jump5`), so that the splice kerf writes there and the copy a thread
/// runs instead ([`springboard`]) cover the same bytes.
pub fn entry_displaced(m: &Module<'_>, f: FuncId) -> Result<kerf_patch::Displaced, String> {
    let cfg = m.cfg;
    let func = cfg.function(f);
    let (base, bytes) = m.mem.code_region(func.entry).ok_or("no code bytes")?;
    let mut starts: Vec<u64> = cfg.blocks_of(f).iter().map(|b| m.runtime(b.start)).collect();
    starts.sort_unstable();
    let view = kerf_patch::FunctionView {
        name: &func.name,
        extent: func.extent.start.wrapping_add(m.bias)..func.extent.end.wrapping_add(m.bias),
        block_starts: &starts,
        has_unanalysable_jump: (cfg.blocks_of(f).iter())
            .any(|b| b.term == Terminator::Unanalysable),
    };
    kerf_patch::plan_jump5(bytes, m.runtime(base), m.runtime(func.entry), &view)
        .map_err(|e| e.to_string())
}

/// At label `label`, the root's original first instructions `d` (what its entry splice
/// displaced), then on in the original code: where a thread whose `gs` base is the program's
/// own goes instead of the root's translation. Each copy is clean for its original
/// instruction; a copied call returns to the original code after it.
fn springboard(e: &mut Emitter, label: u64, d: &kerf_patch::Displaced) {
    let code = kerf_patch::patch_instructions(&[], d, kerf_patch::Layout::Before);
    for (k, mut i) in code.into_iter().enumerate() {
        // Copies are named by no label (their original addresses would be taken for them).
        let copy = d.insns.iter().any(|o| o.ip() == i.ip() && o.code() == i.code());
        let clean = (copy && i.ip() != 0).then(|| i.ip());
        i.set_ip(if k == 0 { label } else { 0 });
        e.push(i, if k == 0 { Some(d.point) } else { clean });
    }
}

/// How many times the opcode bytes of a `syscall` (`0f 05`) or a `wrgsbase` (`0f ae /3`,
/// register form) occur in block `b`, an instruction's or not.
///
/// `region` is the code region ([`CodeMemory::code_region`]) of the block's function, looked
/// up once for all its blocks (sizing every function of python3.11 and its libraries looked
/// it up per block: a quarter of the time).
fn gs_setter_bytes(
    m: &Module<'_>,
    region: Option<(ImageAddr, &[u8])>,
    b: &kerf_analysis::cfg::Block,
) -> u64 {
    let inside = |(base, bytes): (ImageAddr, &[u8])| {
        b.start >= base && b.start.0 - base.0 < bytes.len() as u64
    };
    let Some((base, bytes)) = region.filter(|&r| inside(r)).or_else(|| m.mem.code_region(b.start))
    else {
        return 0;
    };
    let off = (b.start.0 - base.0) as usize;
    let end = (off + b.len as usize).min(bytes.len());
    let Some(v) = bytes.get(off..end) else { return 0 };
    // Both start with 0x0f: look only after those. (A plain loop: blocks are a few dozen
    // bytes, shorter than a vector search pays for.)
    let at = |i: usize| v.get(i).copied();
    let sets = |i: usize| match at(i + 1) {
        Some(0x05) => true,
        Some(0xae) => at(i + 2).is_some_and(|b| b & 0xf8 == 0xd8),
        _ => false,
    };
    (0..v.len()).filter(|&i| v[i] == 0x0f && sets(i)).count() as u64
}

/// The functions of `m` whose `ret` may end a root call (see [`seq::outer_check`]): its
/// roots (`roots`: original entries, of any module), and the functions they tail-call in `m`,
/// transitively. (A root that tail-calls another module's function, through its PLT stub,
/// ends there unchecked: that return finds its caller's translation, as any return does.)
pub fn ending_roots(m: &Module<'_>, roots: &std::collections::HashSet<u64>) -> HashSet<FuncId> {
    let cfg = m.cfg;
    let mut todo: Vec<FuncId> = (roots.iter())
        .filter_map(|&r| {
            let a = ImageAddr(r.wrapping_sub(m.bias));
            cfg.function_at(a).filter(|&f| cfg.function(f).entry == a)
        })
        .collect();
    let mut out = HashSet::default();
    while let Some(f) = todo.pop() {
        if out.insert(f) {
            let edges = cfg.blocks_of(f).iter().flat_map(|b| cfg.edges_of(b));
            todo.extend(edges.filter_map(|e| match (e.kind, e.target) {
                (EdgeKind::Call, _) => None,
                (_, EdgeTarget::Function(g)) => Some(g),
                _ => None,
            }));
        }
    }
    out
}

/// Whether a block that ends with `term` ends its function's frame there (see [`ExitInfo`]):
/// its last instruction leaves the frame whichever way it goes. (A conditional tail call
/// leaves only on one side, where block-level exit code cannot go; unlike
/// `kerf_analysis::liveness::in_last_block`, which asks what code placed there may touch, it
/// is not one here, and the call trace counts the callee's frame as `replaced`.)
fn ends_frame(term: Terminator) -> bool {
    matches!(term, Terminator::Return | Terminator::TailCall | Terminator::IndirectTailCall)
}

/// Whether block `b` ends in a jump through a table whose every target is a function's entry:
/// an array of function pointers that the analysis reads as a jump table (`table[i](x)` in
/// tail position is a load and `jmp rax`, as a switch's dispatch is), so an indirect tail call
/// that ends the frame as [`ends_frame`]'s do. (Found by a user trial of the call trace:
/// such a function's frames were all counted as replaced, none returned.)
fn tail_call_table(cfg: &Cfg, b: &kerf_analysis::cfg::Block) -> bool {
    matches!(b.term, Terminator::JumpTable(_))
        && cfg.edges_of(b).len() > 0
        && cfg.edges_of(b).all(|e| e.kind == EdgeKind::TailCall)
}

/// Bytes of data area for `funcs` of `m`.
pub fn data_for(m: &Module<'_>, funcs: &[FuncId]) -> u64 {
    // Two words per block, and a prediction or link word per instruction at most, and a link
    // word per block for its fall-through, and two words a side of each conditional branch
    // (pages never touched cost nothing).
    // And a word per entry of each jump table's copy.
    let blocks = funcs.iter().flat_map(|&f| m.cfg.blocks_of(f));
    let (n, insns, conds) = blocks.fold((0, 0, 0), |(n, k, c), b| {
        (n + 1, k + b.insns as u64 + table_words(m, b), c + (b.term == Terminator::CondJump) as u64)
    });
    DATA_HEADER + 24 * n + 8 * insns + 32 * conds
}

/// The translation's blocks by original start (a runtime address): each one's place in the
/// translation's order (which names its data words), its label, and what is live at its
/// start where a plugin with edges needs that. One map for the three: there were three,
/// each as large as the module's translated blocks, and python3.11's lookups into them were
/// 40 % of the translator's own samples under block counting (one map built instead of
/// three; the translation's wall time did not move).
struct Starts {
    at: HashMap<u64, u32>,
    labels: Vec<u64>,
    live: Vec<LiveAt>,
}

impl Starts {
    /// The label of the block that starts at `a`.
    fn get(&self, a: &u64) -> Option<&u64> {
        self.at.get(a).map(|&n| &self.labels[n as usize])
    }

    fn contains_key(&self, a: &u64) -> bool {
        self.at.contains_key(a)
    }

    /// The block's place in the translation's order.
    fn position(&self, a: u64) -> Option<usize> {
        self.at.get(&a).map(|&n| n as usize)
    }

    /// What is live at the start of the block at `a` (everything where not worked out).
    fn live(&self, a: u64) -> LiveAt {
        self.at.get(&a).and_then(|&n| self.live.get(n as usize)).copied().unwrap_or(LiveAt::ALL)
    }
}

impl std::ops::Index<&u64> for Starts {
    type Output = u64;

    fn index(&self, a: &u64) -> &u64 {
        self.get(a).expect("a block of the translation")
    }
}

/// (Its default has nothing written yet, its labels from the first.)
#[derive(Default)]
struct Emitter {
    insns: Vec<Instruction>,
    /// Parallel to `insns`: the original address the instruction's start is clean for, or 0
    /// (no code lies at 0). (Words, not `Option`s, and `copied` a flag: at 64 bytes an
    /// instruction these lists were the biggest memory of a translation, whose first touch
    /// is most of what memory costs kerf.)
    clean: Vec<u64>,
    /// Parallel to `insns`: whether the instruction is copied unchanged from the original
    /// address it is clean for (the layout takes its bytes as they are).
    copied: Vec<bool>,
    next_label: u64,
    exits: BTreeMap<u64, (u64, Leaves)>,
    mark: Option<(usize, u64)>,
    /// The next indirect site's prediction word (see [`seq::predicted_probe`]).
    next_pred: u64,
    /// The calls' stubs, placed after the blocks.
    stubs: Vec<Stub>,
    /// The conditional branch the last block copied ended with: its address, target, and the
    /// address after it.
    cond: Option<(u64, u64, u64)>,
    /// Out-of-line code placed after the blocks: the taken sides of conditional branches
    /// with a plugin's code (a label, the code, where it is clean for, where it goes on).
    tails: Vec<Tail>,
    /// Where a branch side's code starts (the index of its first instruction), and the
    /// branch (see [`Translation::sides`]).
    sides: Vec<(usize, u64)>,
    /// The plugins' cold code (see `Op::Cold`), placed after the blocks: no clean point.
    cold: Vec<Instruction>,
    /// The shared second probe of returns by bytes popped: its label, a label per way, and
    /// its tail's.
    ret_seconds: BTreeMap<i32, (u64, [u64; 3], u64)>,
    /// Per `pop`, the label of the [`seq::slow_ret`] of frameless returns (made once).
    ret_slows: BTreeMap<i32, u64>,
    /// Per `pop` and scratch pair, the label of the way back of frameless returns whose way 0
    /// missed (made once): the [`seq::other_ways`], or with saved registers their
    /// [`seq::restore_scratch`] and then the [`seq::slow_ret`].
    ret_ways: BTreeMap<(i32, RetScratch), u64>,
    /// Per-thread counters lowered once per point's liveness (see [`lower_counter`]).
    counters: HashMap<u64, Vec<LoweredCounter>>,
    /// The label of the translation's [`seq::claim_slab`], once a gate needs it.
    claim: Option<u64>,
    /// Where threads with a `gs` base of the program's own leave after a `syscall` or
    /// `wrgsbase` (a label, the next original instruction).
    foreign_exits: Vec<(u64, u64)>,
    /// The jump tables' translated copies: each copy's first word, and per entry the label
    /// its word must hold the address of.
    tables: Vec<(u64, Vec<u64>)>,
    /// The label of the [`seq::table_stub`] per target and registers put back (made once).
    table_stubs: HashMap<(u64, Vec<(Register, u64)>), u64>,
    /// The words of each translated table copy made, by the labels its words hold.
    table_copies: HashMap<Vec<u64>, u64>,
    /// Dispatches through translated copies (see [`Translation::table_dispatches`]).
    table_dispatches: usize,
    /// Slot guards emitted (see [`Translation::slot_guards`]).
    slot_guards: usize,
    /// Frameless indirect calls emitted (see [`Translation::frameless_calls`]).
    frameless_calls: usize,
    /// Chained return compares emitted (see [`Translation::chained_returns`]).
    chained_returns: usize,
    /// Frameless `ret`s emitted (see [`Translation::frameless_returns`]).
    frameless_returns: usize,
    /// Data words and the values they must hold before the cache runs (see
    /// [`Translation::constants`]).
    constants: Vec<(u64, u64)>,
    /// Calls that copied their callee in place (see [`Translation::inlined`]), and the data
    /// word holding each such call's return address ([`return_word`]).
    inlined: usize,
    return_words: HashMap<u64, u64>,
    /// Each indirect site's prediction word, by original address (see [`lookup`]).
    site_preds: HashMap<u64, u64>,
    /// The label of the routine a translated `munmap` calls
    /// ([`seq::unmap_notice`]), where the cache has a mailbox, and whether one called it.
    notice: Option<u64>,
    noticed: bool,
    /// The same for a translated `rt_sigaction` ([`seq::action_notice`]).
    action: Option<u64>,
    actioned: bool,
    /// The same for a `syscall` whose number is known only at run time
    /// ([`seq::action_check`]).
    check: Option<u64>,
    checked: bool,
    /// The same for glibc's own `rt_sigaction` ([`seq::glibc_action_notice`]), in a module
    /// that is glibc's ([`glibc_module`]).
    glibc_action: Option<u64>,
    glibc_actioned: bool,
    /// The same for the loader's debugger hook ([`seq::load_notice`], [`Layout::load_hook`]).
    load: Option<u64>,
    loaded: bool,
}

/// A translated call's stub (see [`seq::call_stub`]): the original return address, then the
/// callee's translation (a label) or the lookup of an indirect call's target.
struct Stub {
    label: u64,
    ret: u64,
    then: Callee,
    /// A register dead where the callee begins (see [`stub_scratch`]).
    scratch: Option<Register>,
}

struct Tail {
    label: u64,
    code: Vec<Instruction>,
    clean: u64,
    then: u64,
    /// The branch whose side it is.
    branch: u64,
}

enum Callee {
    Direct(u64),
    /// With `fast`, the lookup starts with no frame ([`seq::fast_call`]), the stub's
    /// `scratch` one of [`seq::CALL_SCRATCH`] the call's operand does not read.
    Indirect {
        call: Instruction,
        fast: bool,
    },
}

/// A place an indirect transfer may go to: its original address, the label of its
/// translation (where its indirect entry jumps), the index of the instruction there (whose
/// address is the table's continuation), and its table rank.
#[derive(Clone, Copy)]
struct Site {
    orig: u64,
    to: u64,
    first: usize,
    rank: u8,
}

impl Emitter {
    /// A new label: a non-canonical address, which no branch target or RIP-relative operand
    /// of real code can be (iced's encoder links both to the instruction whose `ip` they
    /// name, so a label equal to a data address would move that operand into the cache).
    fn label(&mut self) -> u64 {
        self.next_label += 1;
        LABELS + self.next_label
    }

    /// A [`seq::thread_gate`] (`skip` as there), its claim's label made on first use; a
    /// thread with a `gs` base of the program's own is counted at `count` and leaves for
    /// label `foreign`.
    fn gate(
        &mut self,
        skip: i32,
        slabs: &seq::Slabs,
        foreign: u64,
        count: u64,
    ) -> Vec<Instruction> {
        let claim = match self.claim {
            Some(l) => l,
            None => {
                let l = self.label();
                *self.claim.insert(l)
            }
        };
        seq::thread_gate(skip, slabs, [claim, foreign, count], &mut || self.label())
    }

    fn push(&mut self, mut i: Instruction, clean: Option<u64>) {
        if let Some((k, ip)) = self.mark {
            if k == self.insns.len() {
                i.set_ip(ip);
                self.mark = None;
            }
        }
        self.insns.push(i);
        self.clean.push(clean.unwrap_or(0));
        self.copied.push(false);
    }

    /// [`Emitter::push`] of an original instruction copied unchanged from `orig`.
    fn push_copy(&mut self, i: Instruction, orig: u64) {
        self.push(i, Some(orig));
        if let Some(c) = self.copied.last_mut() {
            *c = true;
        }
    }

    /// The instruction pushed next (index `k`) carries original address `ip`.
    fn mark(&mut self, k: usize, ip: u64) {
        self.mark = Some((k, ip));
    }

    fn extend(&mut self, v: Vec<Instruction>, clean: Option<u64>) {
        for (k, i) in v.into_iter().enumerate() {
            self.push(i, if k == 0 { clean } else { None });
        }
    }

    /// The label of the second probe for returns that pop `pop` bytes (made once per `pop`).
    fn ret_second(&mut self, pop: i32) -> u64 {
        if let Some(s) = self.ret_seconds.get(&pop) {
            return s.0;
        }
        let s = (self.label(), [self.label(), self.label(), self.label()], self.label());
        self.ret_seconds.insert(pop, s);
        s.0
    }

    /// The label of the way back of frameless returns that pop `pop` bytes with `scratch`
    /// (made once per `pop` and scratch).
    fn ret_ways(&mut self, pop: i32, scratch: RetScratch) -> u64 {
        if let Some(&l) = self.ret_ways.get(&(pop, scratch)) {
            return l;
        }
        self.ret_slow(pop);
        let l = self.label();
        self.ret_ways.insert((pop, scratch), l);
        l
    }

    fn ret_slow(&mut self, pop: i32) -> u64 {
        if let Some(&l) = self.ret_slows.get(&pop) {
            return l;
        }
        self.ret_second(pop);
        let l = self.label();
        self.ret_slows.insert(pop, l);
        l
    }

    /// The label of the exit to `target` (made once per target).
    fn exit(&mut self, target: u64, why: Leaves) -> u64 {
        if let Some(&(l, _)) = self.exits.get(&target) {
            return l;
        }
        let l = self.label();
        self.exits.insert(target, (l, why));
        l
    }
}

/// Translate `funcs` of `m` (image order kept) for a cache at `layout`, weaving in `plugin`'s
/// code lowered with `at` (its liveness replaced by each block's). `name` is the module's, for
/// errors.
pub fn translate(
    name: &str,
    m: &Module<'_>,
    funcs: &[FuncId],
    layout: &Layout,
    plugin: &dyn Plugin,
    at: &At,
    scope: &Scope<'_>,
) -> Result<Translation, JitError> {
    let cfg = m.cfg;
    // Records go through the module's thread table, or the ring kept in the thread's slab.
    let ring_cache = layout
        .ring_word
        .filter(|_| layout.slabs.is_some() && layout.rings != 0)
        .map(|word| SlabRing { word, shared: seq::SLAB_SHARED });
    let at = &At { threads: layout.threads, ring_cache, ..*at };
    let mut funcs = funcs.to_vec();
    funcs.sort_by_key(|&f| cfg.function(f).entry);
    funcs.dedup();
    let mut e = Emitter::default();
    // Every block start that gets a translation (the first function holding it keeps it),
    // and its label. Branches link by label, never by original address: iced's encoder also
    // moves a RIP-relative operand that names an instruction's `ip` (`lea rdi, [rip+cmp]`
    // would hand the program a cache address).
    // (Sized once: grown a doubling at a time, each list and map left its old copies in
    // memory touched for nothing.)
    let most: usize = funcs.iter().map(|&f| cfg.blocks_of(f).len()).sum();
    let mut order: Vec<(FuncId, usize)> = Vec::with_capacity(most);
    let mut starts = Starts {
        at: HashMap::with_capacity_and_hasher(most, Default::default()),
        labels: Vec::with_capacity(most),
        live: Vec::new(),
    };
    for &f in &funcs {
        for (k, b) in cfg.blocks_of(f).iter().enumerate() {
            if b.len > 0 && !starts.contains_key(&m.runtime(b.start)) {
                starts.at.insert(m.runtime(b.start), order.len() as u32);
                starts.labels.push(e.label());
                order.push((f, k));
            }
        }
    }
    // (Room for the copies and three times as much for what goes around them: grown a
    // doubling at a time, the instruction list was a tenth of the translation's time; and
    // with room for twice the copies, python3.11's pieces (2.3-2.4 instructions a copy with
    // nothing woven in, 3 counting blocks) grew once anyway, the new list written beside the
    // old: 10 MB more memory touched a piece. Room never written costs nothing.)
    let copied: usize = order.iter().map(|&(f, k)| cfg.blocks_of(f)[k].insns as usize).sum();
    e.insns.reserve(4 * copied + 256);
    e.clean.reserve(4 * copied + 256);
    e.copied.reserve(4 * copied + 256);
    // The data area: header, a word and a shared word per block, for a plugin with edges two
    // words and two shared words per conditional branch, then the sites' predictions.
    let edges = plugin.edges();
    let conds = if edges {
        order.iter().filter(|&&(f, k)| cfg.blocks_of(f)[k].term == Terminator::CondJump).count()
    } else {
        0
    };
    let edge_words = layout.data + DATA_HEADER + 16 * order.len() as u64;
    let mut branches = Vec::with_capacity(conds);
    // What is live at each block start, for the sides' code.
    if edges {
        starts.live = order.iter().map(|&(f, k)| m.live_in(f, &cfg.blocks_of(f)[k])).collect();
    }
    e.next_pred = edge_words + 32 * conds as u64;
    // A plugin may tell the owner by its id only where the code can read a thread's.
    let owner_tid = at.thread_id.and(layout.owner_tid);
    let preds_from = e.next_pred;
    let (second, miss, miss_ret) = (e.label(), e.label(), e.label());
    e.notice = layout.mailbox.map(|_| e.label());
    e.action = layout.mailbox.map(|_| e.label());
    e.check = layout.mailbox.map(|_| e.label());
    e.glibc_action = layout.mailbox.filter(|_| glibc_module(name)).map(|_| e.label());
    e.load = layout.mailbox.and(layout.load_hook).map(|_| e.label());
    let hits = [e.label(), e.label(), e.label()];
    let mut blocks = Vec::with_capacity(order.len());
    let mut ret_sites: Vec<Site> = Vec::new();
    // A function with an indirect jump whose targets are unknown: any of its instructions may
    // be one (python3.11's computed gotos land where no block was found).
    let unknown_jump: HashMap<FuncId, bool> = funcs
        .iter()
        .map(|&f| {
            let unknown = cfg.blocks_of(f).iter().any(|b| b.term == Terminator::Unanalysable);
            (f, unknown && m.inside_entries)
        })
        .collect();
    let ends_root = ending_roots(m, scope.roots);
    // (Under the scheme's check every block and side counts as well.)
    let check = m.counting.is_some_and(|f| f.check);
    // Per function, where its block counters go, if fewer than one a block.
    let flows: HashMap<FuncId, crate::counters::FunctionFlow> = match m.counting {
        Some(facts) if plugin.counts_blocks() => funcs
            .iter()
            .filter_map(|&f| Some((f, crate::counters::function_flow(m, facts, f)?)))
            .collect(),
        _ => HashMap::default(),
    };
    // Per function with a `ret`: the registers its returns may take (see `ret_scratch`).
    let scratch: HashMap<FuncId, Option<RetScratch>> = funcs
        .iter()
        .filter(|&&f| cfg.blocks_of(f).iter().any(|b| b.term == Terminator::Return))
        .map(|&f| (f, ret_scratch(m, f)))
        .collect();
    // Per function whose `ret` goes frameless: the callers' return sites it compares first
    // (see `return_chains`).
    let chains = if m.chains > 0 {
        return_chains(m, &funcs, &scratch, &starts, scope.slots)
    } else {
        HashMap::default()
    };
    // Per function that begins with a jump through a slot the walk read (a PLT stub): the
    // register its guard may take (see `tail_scratch`).
    let slot_jumps: HashMap<FuncId, Register> = funcs
        .iter()
        .filter(|&&f| {
            let func = cfg.function(f);
            let entry = cfg.block(func.entry_block);
            let insns = block_insns(m, entry.start, entry.len, entry.insns);
            let Some((jump, before)) = insns.split_last() else { return false };
            // Nothing before it but `endbr64` and `nop`s: the stack as the caller left it.
            let idle = |i: &Instruction| matches!(i.mnemonic(), Mnemonic::Endbr64 | Mnemonic::Nop);
            entry.term == Terminator::IndirectTailCall
                && before.iter().all(idle)
                && crate::region::fixed_slot(jump).is_some_and(|a| scope.slots.contains_key(&a))
        })
        .filter_map(|&f| Some((f, tail_scratch(m, f)?)))
        .collect();
    // Direct calls copy small callees in their place (see `Inline`), within the room the
    // translation has beyond its blocks' own (`room_for` reserves half as much again).
    let inlining = m.inline > 0 && m.returns.is_some() && !plugin.every_edge() && !plugin.exits();
    let mut inline_room = if inlining {
        let own = blocks_room(m, &funcs, plugin);
        layout.room.saturating_sub(own).min(own / 2)
    } else {
        0
    };
    let here: HashSet<FuncId> = funcs.iter().copied().collect();
    let mut plans: HashMap<FuncId, Option<Inline>> = HashMap::default();
    let guarded = |h: FuncId| {
        slot_jumps.get(&h)?;
        let entry = cfg.block(cfg.function(h).entry_block);
        let jump = last_insn(m, entry.start, entry.len, entry.insns)?;
        scope.slots.get(&crate::region::fixed_slot(&jump)?).copied()
    };
    let weave = Weave {
        m,
        layout,
        plugin,
        at,
        starts: &starts,
        blocks: order.len(),
        owner_tid,
        second,
        scratch: &scratch,
        slot_jumps: &slot_jumps,
        slots: scope.slots,
        marks: scope.marks,
        flows: &flows,
    };
    // (What the blocks a jump table leads to read, looked at once each.)
    let look = TableLook::default();
    // Where this translation's ran marks go.
    let marks_at = scope.marks.map(|k| marks_at(cfg, &funcs, &k)).unwrap_or_default();
    let mut block_first = Vec::with_capacity(order.len());
    for (n, &(f, k)) in order.iter().enumerate() {
        let func = cfg.function(f);
        let b = &cfg.blocks_of(f)[k];
        let start = m.runtime(b.start);
        let mut info = block_info(m, layout, owner_tid, f, b, n, order.len());
        let placed = flows.get(&f).and_then(|ff| Some((ff, ff.index(start)?)));
        info.counted = check || placed.is_none_or(|(ff, k)| ff.placement.blocks[k]);
        let (word, shared) = (info.word, info.shared);
        blocks.push(Translated { func: f, start, cache: 0, word, shared });
        block_first.push(e.insns.len());
        let func_entry = info.func_entry;
        let marked = marks_at.contains(&b.start);
        if let Some(p) = block_program(plugin, marked, &info) {
            let code = lower_at(&p, at, info.live, start, &mut e)?;
            e.extend(code, Some(start));
        }
        // A direct call that ends the block, to a function it may copy in its place.
        let mut inline = None;
        if inlining && b.term == Terminator::Call {
            let callee = cfg.edges_of(b).find_map(|e| match (e.kind, e.target) {
                (EdgeKind::Call, EdgeTarget::Function(g)) => Some(g),
                _ => None,
            });
            let outside = !scope.reached.contains(&f);
            let plan = callee
                .filter(|&g| !(outside && scope.roots.contains(&m.runtime(cfg.function(g).entry))))
                .and_then(|g| {
                    let room = plugin.room();
                    plans
                        .entry(g)
                        .or_insert_with(|| inline_plan(m, g, &here, &guarded, room, 0))
                        .clone()
                })
                .filter(|p| p.room <= inline_room && sides_free(p, &flows));
            let back = || {
                let (ret, scratch) = return_check(m, f, b)?;
                Some((ret, *starts.get(&ret)?, scratch))
            };
            if let Some((plan, (ret, cont, scratch))) = plan.and_then(|p| Some((p, back()?))) {
                inline_room -= plan.room;
                let word = return_word(&mut e, ret);
                inline =
                    Some((plan, Copied { labels: HashMap::default(), ret, word, scratch, cont }));
            }
        }
        // Where the frame ends (the block's last instruction), the plugin's exit code.
        let mut exit = None;
        let tail_table = plugin.exits() && tail_call_table(cfg, b);
        if plugin.exits() && (ends_frame(b.term) || tail_table) {
            if let Some(i) = last_insn(m, b.start, b.len, b.insns) {
                let last = i.ip();
                let image = ImageAddr(last.wrapping_sub(m.bias));
                // (With what is live where the function's returns land: see
                // `live_before_exit`. A function whose `ret` leaves through a slot it wrote
                // lands anywhere, so everything: glibc's `swapcontext` loads the next
                // context's registers, `rdi` among them, then `ret`s into it, and the call
                // trace's record took `rdi`, which it writes on every path, for scratch: a
                // coroutine's first argument came out one more.)
                let slot = func.ret_through_slot;
                let lands = m.continuations().and_then(|c| c.get(f.0 as usize)).copied();
                let lands = lands.filter(|_| slot);
                let live = kerf_analysis::liveness::live_before_exit(cfg, m.mem, f, image, lands)
                    .map_or(LiveAt::ALL, |l| LiveAt { regs: l.regs, flags: l.flags });
                let tail = b.term != Terminator::Return;
                let direct = matches!(flow(&i), Flow::Jump(_));
                let x = ExitInfo {
                    func: &func.name,
                    func_entry,
                    at: last,
                    tail,
                    target: direct.then(|| i.near_branch_target()),
                    live,
                    rings: layout.rings,
                    owner_tid,
                    routines: layout.routines,
                    state: layout.state,
                };
                if let Some(p) = plugin.exit(&x) {
                    exit = Some((last, lower_at(&p, at, live, last, &mut e)?));
                }
            }
        }
        // The block's first instruction carries its original address: branches link to it.
        let first = e.insns.len();
        let end = copy_block(
            m,
            b.start,
            b.len,
            b.insns,
            layout,
            &starts,
            &mut e,
            second,
            &mut ret_sites,
            (!scope.reached.contains(&f)).then_some(scope.roots),
            unknown_jump[&f],
            exit,
            scratch.get(&f).copied().flatten(),
            chains.get(&f).map_or(&[][..], |c| c.0.as_slice()),
            ends_root.contains(&f),
            // (A table of tail calls under exit code goes through the lookup: its translated
            // copy would jump past the code before the `jmp`.)
            table_shape(m, b, &look).filter(|_| !tail_table).as_ref(),
            slot_jumps.get(&f).filter(|_| b.start == func.entry).map(|&r| (scope.slots, r)),
            inline.as_ref().map(|(_, c)| c.word),
            None,
        );
        if let Some(fi) = e.insns.get_mut(block_first[n]) {
            fi.set_ip(starts.labels[n]);
        }
        let end = match (end, inline) {
            (End::Inlined, Some((plan, copied))) => {
                copy_inlined(&weave, &mut e, &plan, copied, &mut ret_sites)?;
                e.inlined += 1;
                End::Call { site: true }
            }
            (end, _) => end,
        };
        let cond = e.cond.take().filter(|_| edges && b.term == Terminator::CondJump);
        if let Some((branch, target, after)) = cond {
            let j = branches.len() as u64;
            let words = |side: u64| {
                let own = edge_words + 16 * j + 8 * side;
                [own, own + 16 * conds as u64]
            };
            let mut br = Branch {
                func: f,
                at: branch,
                target,
                taken: words(0),
                not_taken: words(1),
                placed: [false; 2],
            };
            let counted = |s: usize| placed.is_some_and(|(ff, k)| ff.placement.sides[k][s]);
            let side = |taken: bool, to: u64, [word, shared]: [u64; 2]| EdgeInfo {
                func: &func.name,
                branch,
                to,
                taken,
                live: starts.live(to),
                word,
                shared,
                owner: layout.data + DATA_OWNER,
                owner_tid,
                per_thread: layout.thread_copy(word),
                counted: check || counted(usize::from(!taken)),
            };
            // The taken side: the branch goes to its code, out of line, which goes on to
            // where the branch went.
            let taken = side(true, target, br.taken);
            if let Some(p) = plugin.edge(&taken) {
                let code = lower_at(&p, at, taken.live, branch, &mut e)?;
                let label = e.label();
                // copy_block left the branch last.
                let jcc = e
                    .insns
                    .last_mut()
                    .filter(|i| i.flow_control() == FlowControl::ConditionalBranch);
                if let Some(jcc) = jcc {
                    let then = jcc.near_branch_target();
                    jcc.set_near_branch64(label);
                    e.tails.push(Tail { label, code, clean: target, then, branch });
                    br.placed[0] = true;
                }
            }
            // The other side's code right after the branch, before the block's fall-through.
            let not_taken = side(false, after, br.not_taken);
            if let Some(p) = plugin.edge(&not_taken) {
                let code = lower_at(&p, at, not_taken.live, branch, &mut e)?;
                if !code.is_empty() {
                    e.sides.push((e.insns.len(), branch));
                }
                e.extend(code, Some(after));
                br.placed[1] = true;
            }
            branches.push(br);
        }
        if e.clean.get(first) == Some(&0) {
            e.clean[first] = start;
        }
        // A block that runs off its end goes on to the next block's translation, placed next
        // unless the next one here starts elsewhere.
        let next = m.runtime(b.end());
        let next_here = order.get(n + 1).map(|&(g, j)| m.runtime(cfg.blocks_of(g)[j].start));
        match end {
            End::Falls if next_here != Some(next) => {
                let t = match starts.get(&next) {
                    Some(&l) => l,
                    None => e.exit(next, Leaves::Untranslated),
                };
                e.push(seq::jmp(t), None);
            }
            // A call ended the block: it returns to the instruction after its `call`, the next
            // block's translation if that comes next, else a jump to it; that is the return
            // site's continuation (and it gets a table entry unless the call leaves the
            // region). A return site with no translation has none: a `ret` there leaves.
            End::Call { site } => {
                // (The next block's label straight from the order where it comes next.)
                let here = (next_here == Some(next)).then(|| starts.labels[n + 1]);
                if let Some(l) = here.or_else(|| starts.get(&next).copied()) {
                    let first = e.insns.len();
                    let to = if next_here == Some(next) {
                        l
                    } else {
                        let to = e.label();
                        e.mark(first, to);
                        e.push(seq::jmp(l), None);
                        to
                    };
                    if site {
                        ret_sites.push(Site { orig: next, to, first, rank: crate::table::RETURN });
                    }
                }
            }
            _ => {}
        }
        // A function's calls' stubs go right after its blocks (the caller's code, the stub
        // and often the callee on nearby lines and pages; placed after all of a module's
        // blocks they were megabytes from both), where nothing runs into them: not where the
        // last block goes on into the next one placed here.
        let last = order.get(n + 1).is_none_or(|&(g, _)| g != f);
        let goes_on = matches!(end, End::Falls | End::Call { .. }) && next_here == Some(next);
        if last && !goes_on && e.mark.is_none() {
            place_stubs(&mut e, layout, second);
        }
    }
    // Out-of-line: the calls' stubs left, each block's indirect entry, the exit stubs, the
    // shared second probes and miss paths.
    let blocks_end = e.insns.len();
    place_stubs(&mut e, layout, second);
    for t in std::mem::take(&mut e.tails) {
        let mut code = t.code;
        if code.is_empty() {
            code.push(Instruction::with(Code::Nopd));
        }
        code[0].set_ip(t.label);
        e.sides.push((e.insns.len(), t.branch));
        e.extend(code, Some(t.clean));
        e.push(seq::jmp(t.then), None);
    }
    let cold = std::mem::take(&mut e.cold);
    e.extend(cold, None);
    // The roots' outer entries, where their jumps in the original code go.
    let mut outer_at = Vec::new();
    for &f in &funcs {
        let entry = m.runtime(cfg.function(f).entry);
        if let Some(&to) = starts.get(&entry).filter(|_| scope.roots.contains(&entry)) {
            let (l, spring) = (e.label(), e.label());
            outer_at.push((entry, e.insns.len()));
            // A thread coming from the original code may have no slab yet; one whose `gs`
            // base is the program's own runs the root's original instructions instead.
            let foreign = layout.data + DATA_FOREIGN_GS;
            let mut gate = layout.slabs.map(|s| e.gate(0, &s, spring, foreign)).unwrap_or_default();
            let outer = match gate.first_mut() {
                Some(first) => {
                    first.set_ip(l);
                    e.label()
                }
                None => l,
            };
            gate.extend(seq::outer_entry(outer, e.label(), layout.table, layout.hash, to));
            e.extend(gate, None);
            if layout.slabs.is_some() {
                let d = entry_displaced(m, f).map_err(|why| JitError::Springboard {
                    module: name.to_string(),
                    entry,
                    why: why.to_string(),
                })?;
                springboard(&mut e, spring, &d);
            }
        }
    }
    if let (Some(label), Some(slabs)) = (e.claim, layout.slabs) {
        let claim = seq::claim_slab(label, &slabs, &mut || e.label());
        e.extend(claim, None);
    }
    let targets = indirect_targets(m, &funcs, scope);
    let mut entry_labels = Vec::with_capacity(blocks.len());
    let mut entered: HashSet<u64> = HashSet::default();
    let entries_of_functions: HashSet<u64> =
        funcs.iter().map(|&f| m.runtime(cfg.function(f).entry)).collect();
    let block_targets =
        blocks.iter().zip(&block_first).filter(|(b, _)| targets.contains_key(&b.start)).map(
            |(b, &first)| Site {
                orig: b.start,
                to: starts[&b.start],
                first,
                rank: if entries_of_functions.contains(&b.start) { 0 } else { 2 },
            },
        );
    // Blocks of functions whose placement counts the lookup's arrivals (an indirect jump of
    // unknown targets: see `counters::FunctionFlow::arrivals`): their indirect entries count
    // (the lookup left `rax`, `rcx` and `rdx` in its frame, the flags as the program's).
    // (With the flags live at the block: its counter keeps them only where the block reads
    // them.) Not a block flow enters from outside anyway (the function's entry, a return
    // site, a landing pad): what comes in there is an unmeasured edge of the flow graph, and
    // a known amount added to it changes no count. Its entry stays keyed, so that a
    // frameless `ret` goes straight back: python3.11's eval loop has an indirect jump of
    // unknown targets, and every return into it took the framed lookup under `blocks`, 7-9 %
    // of the loop's samples.
    let arriving: HashMap<u64, FlagSet> = order
        .iter()
        .filter_map(|&(f, k)| {
            let ff = flows.get(&f).filter(|ff| ff.arrivals)?;
            let b = &cfg.blocks_of(f)[k];
            let start = m.runtime(b.start);
            if ff.index(start).is_some_and(|i| ff.blocks[i].from_outside) {
                return None;
            }
            Some((start, m.live_in(f, b).flags))
        })
        .collect();
    let mut arrivals = Vec::new();
    // Each site once (a block target first), and whether it is a return site: a block that
    // is a target only as one too, unless its entry counts the lookup's arrivals.
    let sites: Vec<(Site, bool)> = (block_targets.chain(ret_sites.iter().copied()))
        .filter(|site| entered.insert(site.orig))
        .map(|site| {
            let only = targets.get(&site.orig) == Some(&true) && !arriving.contains_key(&site.orig);
            (site, site.rank == crate::table::RETURN || only)
        })
        .collect();
    // Return sites share one indirect entry, which reads the continuation from the table
    // (`seq::lazy_entry`, placed at the first): a `ret` never takes the entry, and a stub of
    // five instructions for each was a sixth of python3.11's translation. (Where there are
    // at least two: for one, its own stub is the shorter.)
    let mut shared: Option<usize> = None;
    let share = sites.iter().filter(|s| s.1).nth(1).is_some();
    for (site, returned) in sites {
        if returned && share {
            let k = *shared.get_or_insert_with(|| {
                let (k, l) = (e.insns.len(), e.label());
                e.extend(seq::lazy_entry(l), None);
                k
            });
            entry_labels.push((site, k));
            continue;
        }
        let l = e.label();
        entry_labels.push((site, e.insns.len()));
        let flags = arriving.get(&site.orig).filter(|_| site.rank != crate::table::RETURN);
        let counted = flags
            .map(|&flags| arrival_counter(plugin, layout, owner_tid, &mut e, at, site.orig, flags))
            .transpose()?
            .flatten();
        match counted {
            Some((mut code, word)) => {
                arrivals.push((site.orig, word));
                code[0].set_ip(l);
                let inner = e.label();
                code.extend(seq::indirect_entry(inner, site.to));
                e.extend(code, None);
            }
            None => e.extend(seq::indirect_entry(l, site.to), None),
        }
    }
    let exits: Vec<(u64, (u64, Leaves))> = e.exits.iter().map(|(t, v)| (*t, *v)).collect();
    let quiet = e.label();
    // Never linked: a thread with the program's own `gs` base must not come back in.
    for (label, target) in std::mem::take(&mut e.foreign_exits) {
        e.extend(seq::exit_stub(label, target, quiet), None);
    }
    if let (Some(notice), Some(mailbox), true) = (e.notice, layout.mailbox, e.noticed) {
        let code = seq::unmap_notice(notice, mailbox, &mut || e.label());
        e.extend(code, None);
    }
    if let (Some(check), Some(action), true) = (e.check, e.action, e.checked) {
        let code = seq::action_check(check, action, &mut || e.label());
        e.extend(code, None);
    }
    if let (Some(action), Some(mailbox), true) = (e.action, layout.mailbox, e.actioned || e.checked)
    {
        let code = seq::action_notice(action, mailbox, &mut || e.label());
        e.extend(code, None);
    }
    if let (Some(action), Some(mailbox), true) = (e.glibc_action, layout.mailbox, e.glibc_actioned)
    {
        let code = seq::glibc_action_notice(action, mailbox, &mut || e.label());
        e.extend(code, None);
    }
    if let (Some(load), Some(mailbox), true) = (e.load, layout.mailbox, e.loaded) {
        let code = seq::load_notice(load, mailbox, &mut || e.label());
        e.extend(code, None);
    }
    let mut links = Vec::new();
    for &(target, (label, why)) in &exits {
        if why == Leaves::Untranslated {
            let (word, slow) = (e.next_pred, e.label());
            e.next_pred += 8;
            links.push((word, target, e.insns.len() + 1));
            e.extend(seq::linked_exit_stub(label, word, slow, target, miss), None);
        } else {
            e.extend(seq::exit_stub(label, target, quiet), None);
        }
    }
    e.extend(seq::second_probe(second, hits, miss), None);
    for ((pop, RetScratch { regs, saved }), label) in std::mem::take(&mut e.ret_ways) {
        let slow = e.ret_slow(pop);
        let code = if saved {
            seq::restore_scratch(label, regs, slow)
        } else {
            let labels = [label, e.label(), e.label(), e.label(), e.label()];
            seq::other_ways(labels, (layout.table, layout.hash), pop, regs, slow)
        };
        e.extend(code, None);
    }
    for (pop, slow) in std::mem::take(&mut e.ret_slows) {
        let (second, hit) = (e.ret_second(pop), e.label());
        e.extend(seq::slow_ret(slow, hit, layout.table, layout.hash, pop, second), None);
    }
    for (pop, (second, hits, tail)) in std::mem::take(&mut e.ret_seconds) {
        e.extend(seq::second_ret_probe(second, hits, tail, miss_ret, pop), None);
    }
    let miss_at = e.insns.len();
    let last = layout.data + DATA_LAST_MISS;
    let ask = layout.mailbox.map(|mailbox| seq::Ask {
        mailbox,
        table: layout.table,
        hash: layout.hash,
        unasked: layout.data + DATA_UNASKED,
    });
    let path = seq::MissPath {
        miss,
        quiet,
        overflow: layout.table + crate::table::OVERFLOW_COUNT,
        count: layout.data + DATA_ESCAPES,
        last,
        ask,
    };
    let code = seq::miss(&path, &mut || e.label());
    e.extend(code, None);
    // A return that misses leaves the region: kerf is not asked.
    let quiet_ret = e.label();
    let path = seq::MissPath {
        miss: miss_ret,
        quiet: quiet_ret,
        count: layout.data + DATA_RETURNS,
        ask: None,
        ..path
    };
    let code = seq::miss(&path, &mut || e.label());
    e.extend(code, None);
    // Where each label is, for the table copies' words.
    let label_at: HashMap<u64, usize> = if e.tables.is_empty() {
        HashMap::default()
    } else {
        let n = e.insns.iter().filter(|i| i.ip() >= LABELS).count();
        let mut at = HashMap::with_capacity_and_hasher(n, Default::default());
        at.extend(
            (e.insns.iter().enumerate())
                .filter(|(_, i)| i.ip() >= LABELS)
                .map(|(k, i)| (i.ip(), k)),
        );
        at
    };
    // (An instruction copied unchanged keeps its original bytes.)
    let original = |k: usize| {
        let (&copied, &a, i) = (e.copied.get(k)?, e.clean.get(k)?, e.insns.get(k)?);
        (copied && a != 0).then(|| m.mem.read(ImageAddr(a.wrapping_sub(m.bias)), i.len())).flatten()
    };
    let r = match m.iced {
        true => encode::lay_out_iced(&e.insns, layout.code),
        false => encode::lay_out_from(&e.insns, layout.code, &original),
    }
    .map_err(|err| JitError::Encode { module: name.into(), detail: err.to_string() })?;
    if r.code.len() as u64 > layout.room {
        return Err(JitError::Room {
            module: name.into(),
            need: r.code.len() as u64,
            room: layout.room,
        });
    }
    let at_offset = |k: usize| -> Option<u64> {
        let o = *r.offsets.get(k)?;
        (o != u32::MAX).then_some(layout.code + o as u64)
    };
    for (b, &k) in blocks.iter_mut().zip(&block_first) {
        b.cache = at_offset(k).unwrap_or(0);
    }
    // (Collected, not inserted one by one: offsets grow with `k`, so the map is built in
    // one pass from a sorted run, where inserts searched the tree for each of python3.11's
    // 700 k clean points.)
    let mut sorted = Vec::with_capacity(e.clean.len());
    sorted.extend(
        (e.clean.iter().enumerate())
            .filter(|(_, &c)| c != 0)
            .filter_map(|(k, &c)| Some((at_offset(k)?, c))),
    );
    let clean: BTreeMap<u64, u64> = sorted.into_iter().collect();
    let sides = e.sides.iter().filter_map(|&(k, b)| Some((at_offset(k)?, b))).collect();
    let counting: HashSet<u64> = arrivals.iter().map(|&(orig, _)| orig).collect();
    // (The sites deduplicated above by their first kind: a block target first.)
    let returned_to: HashSet<u64> =
        (ret_sites.iter()).filter(|s| s.rank == crate::table::RETURN).map(|s| s.orig).collect();
    let entries = entry_labels
        .iter()
        .filter_map(|&(s, k)| {
            Some(Entry {
                orig: s.orig,
                entry: at_offset(k)?,
                cont: at_offset(s.first)?,
                rank: s.rank,
                keyed: !counting.contains(&s.orig),
                returned_to: returned_to.contains(&s.orig),
            })
        })
        .collect();
    blocks.sort_by_key(|b| b.start);
    let data_len = e.next_pred - layout.data;
    let preds = preds_from..links.first().map_or(e.next_pred, |l: &(u64, u64, usize)| l.0);
    let links = links
        .into_iter()
        .filter_map(|(word, target, k)| {
            // (`jmp [rip+word]`: FF 25 and a rel32; anything else is never rewritten.)
            let jump = at_offset(k - 1).filter(|&a| {
                let o = (a - layout.code) as usize;
                r.code.get(o..o + 2) == Some(&[0xff, 0x25][..])
            });
            Some(Link { word, target, slow: at_offset(k)?, jump })
        })
        .collect();
    let blocks_end = at_offset(blocks_end).unwrap_or(layout.code + r.code.len() as u64);
    let outers = outer_at.into_iter().filter_map(|(o, k)| Some((o, at_offset(k)?))).collect();
    let tables = std::mem::take(&mut e.tables)
        .into_iter()
        .map(|(words, labels)| {
            let values = labels.iter().map(|l| at_offset(*label_at.get(l)?));
            let values: Option<Vec<u64>> = values.collect();
            // Every label named is an instruction's; a word left unset would send a thread
            // anywhere.
            let detail = "a jump table copy names a label that was not placed".to_string();
            values.map(|v| (words, v)).ok_or(JitError::Encode { module: name.into(), detail })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Translation {
        at: layout.code,
        data_at: layout.data,
        code: r.code,
        blocks,
        entries,
        clean,
        sides,
        exits: exits.into_iter().map(|(t, (_, why))| (t, why)).collect(),
        data_len,
        preds,
        links,
        miss: at_offset(miss_at).unwrap_or(0),
        blocks_end,
        branches,
        tables,
        table_dispatches: e.table_dispatches,
        slot_guards: e.slot_guards,
        frameless_calls: e.frameless_calls,
        chained_returns: e.chained_returns,
        hot_chains: chains.values().filter(|c| c.1).count(),
        frameless_returns: e.frameless_returns,
        constants: e.constants,
        arrivals,
        flows: flows.into_iter().collect(),
        inlined: e.inlined,
        outers,
    })
}

/// The stubs of the calls copied since the last ones were placed ([`seq::call_stub`], then the
/// callee's jump or an indirect callee's lookup), here.
fn place_stubs(e: &mut Emitter, layout: &Layout, second: u64) {
    for s in std::mem::take(&mut e.stubs) {
        e.extend(seq::call_stub(s.label, s.ret, s.scratch), None);
        match s.then {
            Callee::Direct(t) => e.push(seq::jmp(t), None),
            Callee::Indirect { call, fast: false } => {
                e.extend(seq::enter(0), None);
                e.push(load_target(Register::RCX, &call, seq::FRAME + 8), None);
                lookup(e, layout, second, call.ip());
            }
            Callee::Indirect { call, fast: true } => {
                // (The return address pushed: a stack operand is 8 bytes further.)
                let [target, _] = seq::CALL_SCRATCH;
                let through = call.op0_kind() == OpKind::Register && call.op0_register() == target;
                let load = (!through).then(|| load_target(target, &call, 8));
                let slow = e.label();
                let pred = pred_word(e, call.ip());
                e.frameless_calls += 1;
                e.extend(seq::fast_call(load, pred, slow), None);
                let mut framed = seq::enter(0);
                framed[0].set_ip(slow);
                framed.push(seq::target_from_reg(Register::RCX, target));
                e.extend(framed, None);
                lookup(e, layout, second, call.ip());
            }
        }
    }
}

/// What a plugin sees of block `b` of `f`, the `n`th of the translation's `blocks`.
fn block_info<'m>(
    m: &Module<'m>,
    layout: &Layout,
    owner_tid: Option<u32>,
    f: FuncId,
    b: &kerf_analysis::cfg::Block,
    n: usize,
    blocks: usize,
) -> BlockInfo<'m> {
    let func = m.cfg.function(f);
    let word = layout.data + DATA_HEADER + 8 * n as u64;
    BlockInfo {
        func: &func.name,
        func_entry: m.runtime(func.entry),
        start: m.runtime(b.start),
        len: b.len,
        insns: b.insns,
        live: m.live_in(f, b),
        word,
        shared: layout.data + DATA_HEADER + 8 * (blocks + n) as u64,
        owner: layout.data + DATA_OWNER,
        owner_tid,
        per_thread: layout.thread_copy(word),
        counted: true,
        rings: layout.rings,
        routines: layout.routines,
        state: layout.state,
    }
}

/// Where the call that ends block `b` of `f` returns, if a copy of its callee can go back
/// there without the table: its original address, and the register the copy's `ret`s may
/// take to compare an address above 2 GiB (`None` below), with the flags dead there.
fn return_check(
    m: &Module<'_>,
    f: FuncId,
    b: &kerf_analysis::cfg::Block,
) -> Option<(u64, Option<Register>)> {
    let ret = m.runtime(b.end());
    let (live, _) = kerf_analysis::liveness::live_at(m.cfg, m.mem, f, b.end())?;
    if !live.flags.is_empty() {
        return None;
    }
    let scratch = match i32::try_from(ret) {
        Ok(_) => None,
        Err(_) => {
            let free = INLINE_SCRATCH.iter().find(|&&r| !live.regs.contains(r))?;
            Some(kerf_codegen::templates::iced_gpr(*free))
        }
    };
    Some((ret, scratch))
}

/// The data word a copy's push reads its return address `ret` from (0 for one below 2 GiB,
/// which needs none): a word of the data area holding `ret` before the cache runs, one per
/// return address (the copies of one function share their calls' words), so that no more
/// words are taken than the module has calls ([`data_for`] counts a word per instruction).
fn return_word(e: &mut Emitter, ret: u64) -> u64 {
    if i32::try_from(ret).is_ok() {
        return 0;
    }
    if let Some(&w) = e.return_words.get(&ret) {
        return w;
    }
    let w = e.next_pred;
    e.next_pred += 8;
    e.constants.push((w, ret));
    e.return_words.insert(ret, w);
    w
}

/// The counter an indirect entry of block `orig` carries where the lookup's arrivals count:
/// the plugin's side counter on two fresh data words (zero before the cache runs), lowered
/// where the lookup's registers are free (it puts them back after), the flags live only as
/// the block reads them (`flags`), and every other register live. `None` if the plugin gives
/// no counter.
fn arrival_counter(
    plugin: &dyn Plugin,
    layout: &Layout,
    owner_tid: Option<u32>,
    e: &mut Emitter,
    at: &At,
    orig: u64,
    flags: FlagSet,
) -> Result<Option<(Vec<Instruction>, u64)>, JitError> {
    let word = e.next_pred;
    e.next_pred += 16;
    e.constants.push((word, 0));
    e.constants.push((word + 8, 0));
    let free = RegSet::of(&[Gpr::Rax, Gpr::Rcx, Gpr::Rdx]);
    let live = LiveAt { regs: RegSet::ALL.minus(free), flags };
    let info = EdgeInfo {
        func: "",
        branch: orig,
        to: orig,
        taken: true,
        live,
        word,
        shared: word + 8,
        owner: layout.data + DATA_OWNER,
        owner_tid,
        per_thread: layout.thread_copy(word),
        counted: true,
    };
    let Some(p) = plugin.edge(&info) else { return Ok(None) };
    let code = lower_at(&p, at, live, orig, e)?;
    Ok((!code.is_empty()).then_some((code, word)))
}

/// What copying a callee in place needs of its translation.
struct Weave<'a, 'm> {
    m: &'a Module<'m>,
    layout: &'a Layout,
    plugin: &'a dyn Plugin,
    at: &'a At,
    /// Labels of the translation's blocks, and their places (their words).
    starts: &'a Starts,
    blocks: usize,
    owner_tid: Option<u32>,
    second: u64,
    scratch: &'a HashMap<FuncId, Option<RetScratch>>,
    slot_jumps: &'a HashMap<FuncId, Register>,
    slots: &'a std::collections::HashMap<u64, u64>,
    marks: Option<Marks<'a>>,
    /// Per function with fewer counters, where they go ([`Module::counting`]).
    flows: &'a HashMap<FuncId, crate::counters::FunctionFlow>,
}

/// Whether a copy of `plan` carries every counter its functions' placements want: none of
/// them counts a branch's side (a copy places no side's code).
fn sides_free(plan: &Inline, flows: &HashMap<FuncId, crate::counters::FunctionFlow>) -> bool {
    let counts_sides =
        |h: &FuncId| flows.get(h).is_some_and(|ff| ff.placement.sides.iter().flatten().any(|&c| c));
    !plan.blocks.iter().any(|(h, _)| counts_sides(h))
        && plan.calls.iter().all(|(_, _, inner)| sides_free(inner, flows))
}

/// The code at the entry of block `info`: the plugin's, after a ran mark where `marked` (see
/// [`Marks`]). The mark is one byte stored into the block's own word (`mov byte [word], 1`:
/// no register, no flag), which kerf reads when the run ends to learn which functions ran and
/// keeps as a hint for the next run from the same roots ([`ran`]); it costs a store per call
/// of a function not yet known to have run (or per jump into one), and nothing once one is.
fn block_program(plugin: &dyn Plugin, marked: bool, info: &BlockInfo<'_>) -> Option<Program> {
    let p = plugin.block(info);
    if !marked || (plugin.counts_blocks() && info.counted) {
        return p;
    }
    let mut p = p.unwrap_or_default();
    // (First: a plugin's program may end in its cold part.)
    p.ops.insert(0, Op::Store { width: Width::W8, addr: Addr::Abs(info.word), src: Src::Imm(1) });
    Some(p)
}

/// Whether a function ran while the cache was live, from its entry block's words (`own` and
/// `shared`, at [`Translated::word`] and [`Translated::shared`]): its ran mark or, under a
/// plugin that counts blocks, its count. Only a function that carried a mark or was counted
/// can say yes.
pub fn ran(own: u64, shared: u64) -> bool {
    own | shared != 0
}

/// Copy `plan`'s functions after a call's pushed return address (see [`Inline`]): each
/// function's entry block first, every block once, each with the plugin's code for it (its
/// words are the block's own: a count made in a copy is the block's count).
fn copy_inlined(
    w: &Weave<'_, '_>,
    e: &mut Emitter,
    plan: &Inline,
    mut copied: Copied,
    ret_sites: &mut Vec<Site>,
) -> Result<(), JitError> {
    let (m, cfg) = (w.m, w.m.cfg);
    // A block two copied functions share is copied once.
    let mut seen = HashSet::default();
    let order: Vec<(FuncId, BlockId, &kerf_analysis::cfg::Block)> = (plan.blocks.iter())
        .map(|&(h, id)| (h, id, cfg.block(id)))
        .filter(|(_, _, b)| seen.insert(b.start))
        .collect();
    for (_, _, b) in &order {
        let l = e.label();
        copied.labels.insert(m.runtime(b.start), l);
    }
    // Where the copies' ran marks go (as in their own translations).
    let copies: Vec<FuncId> =
        order.iter().map(|&(h, _, _)| h).collect::<HashSet<_>>().into_iter().collect();
    let marks_at = w.marks.map(|k| marks_at(cfg, &copies, &k)).unwrap_or_default();
    let check = m.counting.is_some_and(|f| f.check);
    for (j, &(h, id, b)) in order.iter().enumerate() {
        let start = m.runtime(b.start);
        let n = w.starts.position(start).ok_or_else(|| JitError::Encode {
            module: cfg.function(h).name.clone(),
            detail: format!("a copied block at {start:#x} has no translation"),
        })?;
        let first = e.insns.len();
        let mut info = block_info(m, w.layout, w.owner_tid, h, b, n, w.blocks);
        let placed = w.flows.get(&h).and_then(|ff| Some((ff, ff.index(start)?)));
        info.counted = check || placed.is_none_or(|(ff, k)| ff.placement.blocks[k]);
        let marked = marks_at.contains(&b.start);
        if let Some(p) = block_program(w.plugin, marked, &info) {
            let code = lower_at(&p, w.at, info.live, start, e)?;
            e.extend(code, Some(start));
        }
        let entry = cfg.function(h).entry;
        // A call that copies its callee too (see `inline_plan`): back to this copy's block
        // after it.
        let inner = plan.calls.iter().find(|(c, _, _)| *c == id).and_then(|(_, back, inner)| {
            let (ret, scratch) = *back;
            Some((inner, ret, scratch, *copied.labels.get(&ret)?))
        });
        let word = inner.map(|(_, ret, _, _)| return_word(e, ret));
        let end = copy_block(
            m,
            b.start,
            b.len,
            b.insns,
            w.layout,
            w.starts,
            e,
            w.second,
            ret_sites,
            None,
            false,
            None,
            w.scratch.get(&h).copied().flatten(),
            &[],
            false,
            None,
            w.slot_jumps.get(&h).filter(|_| b.start == entry).map(|&r| (w.slots, r)),
            word,
            Some(&copied),
        );
        e.cond = None;
        if let Some(fi) = e.insns.get_mut(first) {
            fi.set_ip(copied.labels[&start]);
        }
        let end = match (end, inner, word) {
            (End::Inlined, Some((inner, ret, scratch, cont)), Some(word)) => {
                let labels = HashMap::default();
                copy_inlined(w, e, inner, Copied { labels, ret, word, scratch, cont }, ret_sites)?;
                End::Call { site: false }
            }
            (end, _, _) => end,
        };
        if e.clean.get(first) == Some(&0) {
            e.clean[first] = start;
        }
        if matches!(end, End::Falls | End::Call { .. }) {
            let next = m.runtime(b.end());
            if order.get(j + 1).map(|(_, _, nb)| m.runtime(nb.start)) != Some(next) {
                let to = match copied.labels.get(&next).or(w.starts.get(&next)) {
                    Some(&l) => l,
                    None => e.exit(next, Leaves::Untranslated),
                };
                e.push(seq::jmp(to), None);
            }
        }
    }
    Ok(())
}

/// A plugin's program lowered for a point with `live` live (`at` otherwise), its labels
/// moved above `e`'s; if its first instruction carries a label, a `nop` comes first (the
/// caller gives the first instruction its own label or address). Its cold code (after an
/// `Op::Cold`) goes to `e`'s cold code, placed after every block. `block`: for errors.
fn lower_at(
    p: &Program,
    at: &At,
    live: LiveAt,
    block: u64,
    e: &mut Emitter,
) -> Result<Vec<Instruction>, JitError> {
    let here = At { live, ..*at };
    let (mut code, cold) = match lower_counter(p, &here, e) {
        Some(lowered) => lowered,
        None => lower_program_split(p, &here)
            .map_err(|err| JitError::Lower { block, detail: err.to_string() })?,
    };
    // One relabelling for both: their branches name each other's labels.
    let hot = code.len();
    code.extend(cold);
    relabel(&mut code, &mut e.next_label);
    e.cold.extend(code.split_off(hot));
    if code.first().is_some_and(|i| i.ip() != 0) {
        code.insert(0, Instruction::with(Code::Nopd));
    }
    Ok(code)
}

/// A per-thread counter (`add gs:[d], n`, the block counters' op with slabs) lowered at a
/// point, with a stand-in for `d`: where the stand-in is, and what the lowering gave.
struct LoweredCounter {
    at: At,
    op: Op,
    hot: Vec<Instruction>,
    cold: Vec<Instruction>,
    /// Indices into `hot` then `cold` (as one) of the operands that name the word.
    words: Vec<usize>,
}

/// Two displacements no counter word has (a slab is far smaller): a counter lowered with
/// each must differ only in operands that hold them.
const STAND_INS: [i32; 2] = [0x3eed_0008, 0x3eed_1010];

/// `p` lowered at `here` when it is one per-thread counter, from the lowering of the same
/// counter at the same point kept in `e` (made the first time): python3.11's 66 k counted
/// blocks and sides were lowered one by one, a tenth of the translation's time under
/// `--plugin blocks`, for a handful of different codes. `None`: not such a program, or one
/// whose lowering does not take the word as a plain displacement (then lowered each time).
fn lower_counter(
    p: &Program,
    here: &At,
    e: &mut Emitter,
) -> Option<(Vec<Instruction>, Vec<Instruction>)> {
    let [Op::AddMem { addr: Addr::PerThread(d), src, atomic }] = p.ops[..] else { return None };
    let op = |disp: i32| Op::AddMem { addr: Addr::PerThread(disp), src, atomic };
    let key = u64::from(here.live.regs.0) | u64::from(here.live.flags.0) << 16;
    let known = e.counters.entry(key).or_default();
    let k = match known.iter().position(|c| c.at == *here && c.op == op(STAND_INS[0])) {
        Some(k) => k,
        None => {
            let lower = |disp: i32| {
                let q = Program { ops: vec![op(disp)], ..p.clone() };
                lower_program_split(&q, here).ok()
            };
            let (a, b) = (lower(STAND_INS[0])?, lower(STAND_INS[1])?);
            let (one, two) = (a.0.iter().chain(&a.1), b.0.iter().chain(&b.1));
            let mut words = Vec::new();
            let same = a.0.len() == b.0.len()
                && a.1.len() == b.1.len()
                && one.zip(two).enumerate().all(|(k, (x, y))| {
                    let names = |i: &Instruction, s: i32| {
                        i.memory_segment() == Register::GS
                            && i.memory_displacement64() == s as i64 as u64
                    };
                    if names(x, STAND_INS[0]) && names(y, STAND_INS[1]) {
                        let mut y = *y;
                        y.set_memory_displacement64(STAND_INS[0] as i64 as u64);
                        words.push(k);
                        x.eq_all_bits(&y)
                    } else {
                        x.eq_all_bits(y)
                    }
                });
            // (Kept with no words when it does not: lowered each time.)
            if !same {
                words.clear();
            }
            known.push(LoweredCounter {
                at: *here,
                op: op(STAND_INS[0]),
                hot: a.0,
                cold: a.1,
                words,
            });
            known.len() - 1
        }
    };
    let c = known.get(k).filter(|c| !c.words.is_empty())?;
    let (mut hot, mut cold) = (c.hot.clone(), c.cold.clone());
    for &w in &c.words {
        let i = if w < hot.len() { &mut hot[w] } else { &mut cold[w - c.hot.len()] };
        i.set_memory_displacement64(d as i64 as u64);
    }
    Some((hot, cold))
}

/// The blocks of `funcs` an indirect transfer may reach, which get an indirect entry and a
/// table entry: function entries, return sites (after a call), jump-table targets, blocks no
/// edge of their function reaches (landing pads, code reached only through pointers), and
/// every block of a function with an indirect jump whose targets are unknown.
fn indirect_targets(m: &Module<'_>, funcs: &[FuncId], scope: &Scope<'_>) -> HashMap<u64, bool> {
    let cfg = m.cfg;
    // Each target, and whether it is one only as the return site of a call (a block that
    // ends in a call, and whose next block nothing else enters indirectly).
    let mut out: HashMap<u64, bool> = HashMap::default();
    for &f in funcs {
        let blocks = cfg.blocks_of(f);
        let mut reached: HashSet<BlockId> = HashSet::default();
        let outside = !scope.reached.contains(&f);
        for b in blocks {
            let call = matches!(b.term, Terminator::Call | Terminator::IndirectCall);
            // A call to a root from outside the walk: its return leaves the region.
            let leaves = outside
                && cfg.edges_of(b).any(|edge| match edge.target {
                    EdgeTarget::Function(g) if edge.kind == EdgeKind::Call => {
                        scope.roots.contains(&m.runtime(cfg.function(g).entry))
                    }
                    _ => false,
                });
            for edge in cfg.edges_of(b) {
                if let EdgeTarget::Block(t) = edge.target {
                    let via_table = edge.kind == EdgeKind::Table;
                    let after_call = call && !leaves && edge.kind == EdgeKind::FallThrough;
                    if via_table {
                        out.insert(m.runtime(cfg.block(t).start), false);
                    } else if after_call {
                        out.entry(m.runtime(cfg.block(t).start)).or_insert(true);
                    } else {
                        reached.insert(t);
                    }
                }
            }
        }
        let first = cfg.function(f).blocks.start;
        // An indirect jump with unknown targets may land on any block of its function.
        let unknown = blocks.iter().any(|b| b.term == Terminator::Unanalysable);
        for (k, b) in blocks.iter().enumerate() {
            // (A return site no edge of its function reaches stays one: that is how calls
            // reach it.)
            if unknown {
                out.insert(m.runtime(b.start), false);
            } else if !reached.contains(&BlockId(first + k as u32)) {
                out.entry(m.runtime(b.start)).or_insert(false);
            }
        }
        out.insert(m.runtime(cfg.function(f).entry), false);
    }
    out
}

/// Move a lowered program's label ids (small numbers from 1) above `next`, and `next` past
/// them.
fn relabel(code: &mut [Instruction], next: &mut u64) {
    let base = *next;
    let mut top = 0;
    for i in code.iter_mut() {
        if i.ip() != 0 {
            top = top.max(i.ip());
            i.set_ip(LABELS + base + i.ip());
        }
        let near = matches!(
            i.op0_kind(),
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
        );
        if near && i.near_branch_target() != 0 && i.near_branch_target() < 0x1_0000 {
            top = top.max(i.near_branch_target());
            i.set_near_branch64(LABELS + base + i.near_branch_target());
        }
    }
    *next = base + top;
}

/// How a block's copy ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum End {
    /// Control runs off its end.
    Falls,
    /// A call is its last instruction: control comes back at the block's end (`site`: the
    /// return site gets a table entry).
    Call { site: bool },
    /// Control never runs off its end.
    Stops,
    /// A call to be copied in place ([`Inline`]): its return address is pushed; the callee's
    /// copy follows.
    Inlined,
}

/// A copy of a callee in place of a call ([`Inline`]): the labels of its blocks, and what its
/// `ret`s compare and where they go ([`seq::inlined_ret`]).
struct Copied {
    labels: HashMap<u64, u64>,
    ret: u64,
    word: u64,
    scratch: Option<Register>,
    cont: u64,
}

/// Copy one block's instructions; returns how it ends. With `outside_roots`, the block's
/// function is outside the walk: a call to one of those roots gets no return site. With
/// `every_insn`, every instruction gets an indirect entry (as a return site does). `second`
/// is the shared second probe of indirect jumps and calls. `exit`: a plugin's code to put
/// before the instruction at its address (a `ret` or a tail call's jump). With `inline`
/// (a data word holding the return address), a direct call that ends the block pushes its
/// return address and the block ends [`End::Inlined`]; the caller copies the callee next.
/// With `copied`, the block is part of such a copy: its branches go to the copy's blocks,
/// and its `ret`s back to the call's continuation. With `ends_root` (and no copy), its
/// function may end a root call: its `ret`s check the outer frames first.
#[allow(clippy::too_many_arguments)]
fn copy_block(
    m: &Module<'_>,
    start: ImageAddr,
    len: u32,
    insns: u32,
    layout: &Layout,
    starts: &Starts,
    e: &mut Emitter,
    second: u64,
    ret_sites: &mut Vec<Site>,
    outside_roots: Option<&std::collections::HashSet<u64>>,
    every_insn: bool,
    mut exit: Option<(u64, Vec<Instruction>)>,
    ret_scratch: Option<RetScratch>,
    chain: &[(u64, u64)],
    ends_root: bool,
    table: Option<&TableShape>,
    slot_jump: Option<(&std::collections::HashMap<u64, u64>, Register)>,
    inline: Option<u64>,
    copied: Option<&Copied>,
) -> End {
    let rt_start = m.runtime(start);
    let Some((base, bytes)) = m.mem.code_region(start) else {
        // No bytes: leave for the original code at once.
        let l = e.exit(rt_start, Leaves::Hazard("no bytes for the block"));
        e.push(seq::jmp(l), Some(rt_start));
        return End::Stops;
    };
    let off = (start.0 - base.0) as usize;
    let end = (off + len as usize).min(bytes.len());
    let mut d = Decoder::with_ip(64, &bytes[off.min(end)..end], rt_start, DecoderOptions::NONE);
    let link =
        |e: &mut Emitter, t: u64| match copied.and_then(|c| c.labels.get(&t)).or(starts.get(&t)) {
            Some(&l) => l,
            None => e.exit(t, Leaves::Untranslated),
        };
    let block_end = rt_start + len as u64;
    let mut end = End::Falls;
    // A return site inside the block (calls do not end blocks): the instruction after a call
    // carries a label, which its table entry's indirect entry and continuation name.
    let mut after_call = false;
    let mut prev: Option<Instruction> = None;
    for _ in 0..insns {
        if !d.can_decode() {
            break;
        }
        let i = d.decode();
        let before = prev.replace(i);
        let here = Some(i.ip());
        let inside = i.ip() != rt_start;
        let returned_to = std::mem::take(&mut after_call);
        if returned_to || (every_insn && inside) {
            let (k, l) = (e.insns.len(), e.label());
            ret_sites.push(Site {
                orig: i.ip(),
                to: l,
                first: k,
                rank: if returned_to { crate::table::RETURN } else { crate::table::INSIDE },
            });
            e.mark(k, l);
        }
        end = End::Falls;
        // The loader's debugger hook, while roots wait for a library: kerf hears of the maps'
        // change before the loader goes on, as from the jump over the original.
        if let Some(load) = e.load.filter(|_| layout.load_hook == Some(i.ip())) {
            e.loaded = true;
            e.extend(vec![seq::move_rsp(-128), seq::call(load), seq::move_rsp(128)], None);
        }
        let ends_frame = matches!(flow(&i), Flow::Return | Flow::Jump(_) | Flow::IndirectJump);
        if ends_frame && exit.as_ref().is_some_and(|(a, _)| *a == i.ip()) {
            // Clean for the instruction: the plugin's code leaves the state as it found it.
            if let Some((_, code)) = exit.take() {
                e.extend(code, here);
            }
        }
        if i.is_invalid() {
            let l = e.exit(i.ip(), Leaves::Hazard("bytes that do not decode"));
            e.push(seq::jmp(l), here);
            return End::Stops;
        }
        if let Some(why) = relocation_hazard(&i) {
            let l = e.exit(i.ip(), Leaves::Hazard(why));
            e.push(seq::jmp(l), here);
            return End::Stops;
        }
        if let Some(t) = table.filter(|t| t.at == i.ip()) {
            if let Some(generic) = table_dispatch(e, t, &link, here) {
                // Then the original instruction at `generic` (for the register form, the jump
                // after it follows), through the lookup as any indirect jump.
                if t.reg.is_some() {
                    let mut c = i;
                    c.set_ip(generic);
                    e.push(c, None);
                    continue;
                }
                e.mark(e.insns.len(), generic);
            }
        }
        match flow(&i) {
            Flow::Next => {
                // Before an `rt_sigaction` (or a `syscall` that may be one), past the red
                // zone of the code that made the call, as the gate goes: kerf hooks the
                // handler before the kernel has it.
                let action = e.action.filter(|_| sets_action(before.as_ref(), &i));
                let glibc = action.and(e.glibc_action);
                let action = action.filter(|_| glibc.is_none());
                let check = e.check.filter(|_| number_unknown(before.as_ref(), &i));
                if let Some(routine) = glibc.or(action).or(check) {
                    e.glibc_actioned |= glibc.is_some();
                    e.actioned |= action.is_some();
                    e.checked |= check.is_some();
                    e.extend(
                        vec![seq::move_rsp(-128), seq::call(routine), seq::move_rsp(128)],
                        None,
                    );
                }
                let mut c = i;
                c.set_ip(0);
                e.push_copy(c, i.ip());
                // A thread that `clone` made starts here, with its parent's slab; one that
                // set a `gs` base of its own (`arch_prctl`, `wrgsbase`) leaves here.
                if let Some(slabs) = layout.slabs.filter(|_| sets_gs(&i)) {
                    let out = e.label();
                    e.foreign_exits.push((out, i.next_ip()));
                    let gate = e.gate(128, &slabs, out, layout.data + DATA_FOREIGN_GS);
                    e.extend(gate, Some(i.next_ip()));
                }
                // Past the red zone of the code that made the call, as the gate goes.
                if let Some(notice) = e.notice.filter(|_| unmaps(before.as_ref(), &i)) {
                    e.noticed = true;
                    e.extend(
                        vec![seq::move_rsp(-128), seq::call(notice), seq::move_rsp(128)],
                        None,
                    );
                }
            }
            Flow::Jump(t) | Flow::CondJump(t) => {
                if matches!(flow(&i), Flow::CondJump(_)) {
                    e.cond = Some((i.ip(), t.0, i.next_ip()));
                }
                let mut c = i;
                c.set_ip(0);
                let t = link(e, t.0);
                c.set_near_branch64(t);
                e.push(c, here);
                if matches!(flow(&i), Flow::Jump(_)) {
                    end = End::Stops;
                }
            }
            Flow::Call(_) if inline.is_some() && i.next_ip() == block_end => {
                let word = inline.unwrap_or_default();
                e.push(seq::push_return_address(i.next_ip(), word), here);
                return End::Inlined;
            }
            Flow::Call(t) => {
                let leaves = outside_roots.is_some_and(|r| r.contains(&t.0)) || copied.is_some();
                let stub = e.label();
                e.push(seq::call(stub), here);
                let scratch = stub_scratch(m, t.0);
                let t = link(e, t.0);
                e.stubs.push(Stub {
                    label: stub,
                    ret: i.next_ip(),
                    then: Callee::Direct(t),
                    scratch,
                });
                after_call = !leaves;
                end = End::Call { site: !leaves };
            }
            Flow::IndirectCall => {
                let stub = e.label();
                e.push(seq::call(stub), here);
                let scratch =
                    m.fast_calls.then(|| fast_call_scratch(before.as_ref(), &i)).flatten();
                e.stubs.push(Stub {
                    label: stub,
                    ret: i.next_ip(),
                    then: Callee::Indirect { call: i, fast: scratch.is_some() },
                    scratch,
                });
                // (A copy makes no return site: its original address is the copied
                // function's own translation's.)
                after_call = copied.is_none();
                end = End::Call { site: after_call };
            }
            Flow::IndirectJump => {
                // Through a slot the walk read: straight on while it holds what it held.
                let slot = crate::region::fixed_slot(&i).filter(|_| i.code() == Code::Jmp_rm64);
                let guard = slot_jump.and_then(|(v, r)| Some((slot?, *v.get(&slot?)?, r)));
                let here = match guard {
                    Some((slot, value, scratch)) => {
                        let (hit, other) = (link(e, value), e.label());
                        e.extend(seq::slot_guard(slot, value, scratch, hit, other), here);
                        e.slot_guards += 1;
                        e.mark(e.insns.len(), other);
                        None
                    }
                    None => here,
                };
                e.extend(seq::enter(0), here);
                e.push(load_target(Register::RCX, &i, seq::FRAME), None);
                lookup(e, layout, second, i.ip());
                end = End::Stops;
            }
            Flow::Return => {
                let pop = match i.code() {
                    Code::Retnq => Some(0),
                    Code::Retnq_imm16 if i.immediate16() <= 120 => Some(i.immediate16() as i32),
                    _ => None,
                };
                let Some(pop) = pop else {
                    let why = if i.code() == Code::Retnq_imm16 {
                        Leaves::BigReturn
                    } else {
                        Leaves::Hazard("a return other than a near ret")
                    };
                    let l = e.exit(i.ip(), why);
                    e.push(seq::jmp(l), here);
                    return End::Stops;
                };
                let here = match copied {
                    Some(c) if pop == 0 => {
                        let slow = e.label();
                        let back = seq::inlined_ret(c.ret, c.word, c.scratch, c.cont, slow);
                        e.extend(back, here);
                        e.mark(e.insns.len(), slow);
                        None
                    }
                    // The end of a root call made from the original code goes back there.
                    None if ends_root => {
                        let (outer, normal) = (e.label(), e.label());
                        let (table, hash) = (layout.table, layout.hash);
                        e.extend(seq::outer_check(table, hash, pop, [outer, normal]), here);
                        e.mark(e.insns.len(), normal);
                        None
                    }
                    _ => here,
                };
                if let Some(scratch) = ret_scratch {
                    let slow = e.ret_ways(pop, scratch);
                    let RetScratch { regs, saved } = scratch;
                    let mut here = here;
                    // (A continuation as an immediate where all of the cache is below 2 GiB.)
                    let low = layout.code.saturating_add(layout.room) <= i32::MAX as u64;
                    for &(ret, cont) in chain {
                        let next = e.label();
                        let compare = if saved {
                            let miss = e.label();
                            seq::chained_ret_saved(ret, regs[0], (cont, low), pop, (next, miss))
                        } else {
                            seq::chained_ret(ret, regs[0], (cont, low), pop, next)
                        };
                        e.extend(compare, here);
                        e.chained_returns += 1;
                        e.mark(e.insns.len(), next);
                        here = None;
                    }
                    let (table, hash) = (layout.table, layout.hash);
                    e.extend(seq::fast_ret(table, hash, pop, regs, saved, slow), here);
                    e.frameless_returns += 1;
                } else {
                    e.extend(seq::enter(-8 - pop), here);
                    e.push(seq::target_of_ret(pop), None);
                    let (hit, second) = (e.label(), e.ret_second(pop));
                    e.extend(seq::ret_probe(layout.table, layout.hash, pop, hit, second), None);
                }
                end = End::Stops;
            }
            Flow::Stop => {
                let l = e.exit(i.ip(), Leaves::Hazard("an instruction that stops the path"));
                e.push(seq::jmp(l), here);
                return End::Stops;
            }
        }
    }
    end
}

/// Emit block `t`'s dispatch through a translated copy of its table (its words taken from
/// the data area, which must lie below 2 GiB where the dispatch reads them through an
/// absolute address), clean for `here`; returns the label where the original instruction must
/// follow for an index outside the table, or `None` (nothing emitted) when the copy cannot
/// be addressed that way.
fn table_dispatch(
    e: &mut Emitter,
    t: &TableShape,
    link: &dyn Fn(&mut Emitter, u64) -> u64,
    here: Option<u64>,
) -> Option<u64> {
    let n = t.targets.len() as u64;
    let absolute = matches!(t.copy, seq::CopyAt::Absolute { .. });
    // (Checked for a new copy's words: a copy shared below them fits as well.)
    if absolute && e.next_pred.checked_add(8 * n)? > i32::MAX as u64 {
        return None;
    }
    let mut labels = Vec::with_capacity(t.targets.len());
    for (target, put_back) in &t.targets {
        let to = link(e, *target);
        let label = if put_back.is_empty() {
            to
        } else {
            let key = (*target, put_back.clone());
            match e.table_stubs.get(&key) {
                Some(&l) => l,
                None => {
                    let l = e.label();
                    e.cold.extend(seq::table_stub(l, put_back, to));
                    e.table_stubs.insert(key, l);
                    l
                }
            }
        };
        labels.push(label);
    }
    // Dispatches whose copies would hold the same words share one (an interpreter's
    // handlers each dispatch through the same table: python3.11's 287 copies of 2 KiB each
    // were half a megabyte of data its loop read from).
    let words = match e.table_copies.get(&labels) {
        Some(&words) => words,
        None => {
            let words = e.next_pred;
            e.next_pred += 8 * n;
            e.table_copies.insert(labels.clone(), words);
            e.tables.push((words, labels));
            words
        }
    };
    e.table_dispatches += 1;
    let generic = e.label();
    e.extend(seq::table_dispatch(t.copy, t.index, n, words, t.reg, generic), here);
    Some(generic)
}

/// A decoder of the `len` bytes of the block at `start`, at their original addresses (`None`:
/// no code bytes there).
pub(crate) fn block_decoder<'m>(
    m: &'m Module<'_>,
    start: ImageAddr,
    len: u32,
) -> Option<Decoder<'m>> {
    let (base, bytes) = m.mem.code_region(start)?;
    let off = (start.0 - base.0) as usize;
    let end = (off + len as usize).min(bytes.len());
    let code = &bytes[off.min(end)..end];
    Some(Decoder::with_ip(64, code, m.runtime(start), DecoderOptions::NONE))
}

/// The instructions of the block at `start` (`len` bytes, `insns` instructions), at their
/// original addresses.
pub(crate) fn block_insns(
    m: &Module<'_>,
    start: ImageAddr,
    len: u32,
    insns: u32,
) -> Vec<Instruction> {
    let Some(mut d) = block_decoder(m, start, len) else { return Vec::new() };
    let mut v = Vec::with_capacity(insns as usize);
    while v.len() < insns as usize && d.can_decode() {
        v.push(d.decode());
    }
    v
}

/// The original address of the last instruction of the block at `start` (`len` bytes,
/// `insns` instructions).
fn last_insn(m: &Module<'_>, start: ImageAddr, len: u32, insns: u32) -> Option<Instruction> {
    block_insns(m, start, len, insns).pop()
}

/// The target of an indirect jump or call into `dst`.
fn load_target(dst: Register, i: &Instruction, rsp_moved: i32) -> Instruction {
    if i.op0_kind() == OpKind::Register {
        seq::target_from_reg(dst, i.op0_register())
    } else {
        seq::target_from_mem(dst, i, rsp_moved)
    }
}

/// For an indirect call `i` (after `before`) that may look its target up with no frame
/// ([`seq::fast_call`]): the one of [`seq::CALL_SCRATCH`] its stub writes the original return
/// address through, one the call's operand does not read (the target is loaded after the
/// store). `None` for an operand that reads both, and for the call of a TLS descriptor
/// (`lea rax, [rip+d]; call [rax]`, the sequence the ABI fixes), whose callee keeps every
/// register but `rax`, so its caller may keep values in the scratch registers across it.
fn fast_call_scratch(before: Option<&Instruction>, i: &Instruction) -> Option<Register> {
    let [a, b] = seq::CALL_SCRATCH;
    let reads = |r: Register| {
        if i.op0_kind() == OpKind::Register {
            i.op0_register() == r
        } else {
            i.memory_base() == r || i.memory_index() == r
        }
    };
    let descriptor = i.op0_kind() == OpKind::Memory
        && i.memory_base() == Register::RAX
        && i.memory_index() == Register::None
        && i.memory_displacement64() == 0
        && before.is_some_and(|p| {
            p.code() == Code::Lea_r64_m
                && p.op0_register() == Register::RAX
                && p.memory_base() == Register::RIP
        });
    if descriptor {
        return None;
    }
    [a, b].into_iter().find(|&r| !reads(r))
}

/// The lookup of an indirect transfer's target (in `rcx`, the frame open), with the site's
/// own prediction word: one per original instruction `site` (a copied PLT stub's lookup, see
/// `Inline`, shares its stub's), so that no more words are taken than [`data_for`] counts.
fn lookup(e: &mut Emitter, layout: &Layout, second: u64, site: u64) {
    let labels = [e.label(), e.label()];
    let pred = pred_word(e, site);
    e.extend(seq::predicted_probe(layout.table, layout.hash, pred, labels, second), None);
}

/// The prediction word of the indirect transfer at original address `site`.
fn pred_word(e: &mut Emitter, site: u64) -> u64 {
    match e.site_preds.get(&site) {
        Some(&w) => w,
        None => {
            let w = e.next_pred;
            e.next_pred += 8;
            e.site_preds.insert(site, w);
            w
        }
    }
}

/// Encode a short sequence at `code` (its labels as in a translation; branches to other
/// addresses absolute): what kerf adds to a cache after its translation.
fn assemble(name: &str, code: u64, insns: &[Instruction]) -> Result<Vec<u8>, JitError> {
    encode::lay_out(insns, code)
        .map(|r| r.code)
        .map_err(|err| JitError::Encode { module: name.into(), detail: err.to_string() })
}

/// An indirect entry at `code` for a translated block at cache address `to` that the
/// translation gave none (a target the analysis did not know an indirect transfer reaches).
pub fn entry_stub(name: &str, code: u64, to: u64) -> Result<Vec<u8>, JitError> {
    assemble(name, code, &seq::indirect_entry(LABELS + 1, to))
}

/// An indirect entry at `layout.code` for a translated block at cache address `to` that a
/// miss asked for at original address `orig` (the block's start, or an instruction inside
/// it), which counts its arrivals as the lookup's are counted where fewer counters count
/// them ([`arrival_counter`]), on the two words at `layout.data + DATA_HEADER`: flow that
/// enters there is on no edge the placement knew. The flags are taken as live there (what
/// the instruction reads is not looked up: such entries are few). `None` if the plugin gives
/// no counter.
pub fn counting_entry_stub(
    name: &str,
    layout: &Layout,
    plugin: &dyn Plugin,
    at: &At,
    orig: u64,
    to: u64,
) -> Result<Option<Vec<u8>>, JitError> {
    let at = &At { threads: layout.threads, ..*at };
    let owner_tid = at.thread_id.and(layout.owner_tid);
    let mut e = Emitter { next_pred: layout.data + DATA_HEADER, ..Emitter::default() };
    let counted = arrival_counter(plugin, layout, owner_tid, &mut e, at, orig, FlagSet::ALL)?;
    let Some((mut code, _)) = counted else { return Ok(None) };
    let l = e.label();
    code[0].set_ip(l);
    let inner = e.label();
    code.extend(seq::indirect_entry(inner, to));
    code.append(&mut e.cold);
    assemble(name, layout.code, &code).map(Some)
}

/// The indirect entry at `code` of a target kerf cannot translate: it leaves for `target`,
/// counted as an escape in the data area at `data`.
pub fn escape_stub(name: &str, code: u64, target: u64, data: u64) -> Result<Vec<u8>, JitError> {
    let (count, last) = (data + DATA_ESCAPES, data + DATA_LAST_MISS);
    assemble(name, code, &seq::escape_entry(LABELS + 1, target, count, last))
}

/// Whether the module at `path` is glibc's libc or loader, whose one `rt_sigaction` (in
/// `__libc_sigaction`) passes glibc's own copy of the action (see
/// [`seq::glibc_action_notice`], [`action_sites`]).
pub fn glibc_module(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    file.starts_with("libc.so") || file.starts_with("ld-linux")
}

/// `mov eax, 13; syscall`: an `rt_sigaction`, its number set right before it.
const ACTION_CALL: [u8; 7] = [0xb8, 0x0d, 0, 0, 0, 0x0f, 0x05];

/// The `rt_sigaction`s of module `m` (original addresses of their `mov eax, 13`, each right
/// before its `syscall`) in code the analysis found: an instruction of a block, the
/// `syscall` next. glibc has one, in `__libc_sigaction`; ld.so one.
pub fn action_sites(m: &Module<'_>) -> Vec<u64> {
    let mut sites = Vec::new();
    for b in m.cfg.blocks.iter() {
        let Some((base, bytes)) = m.mem.code_region(b.start) else { continue };
        let off = (b.start.0 - base.0) as usize;
        // The block's bytes and the `syscall` that may follow its last instruction.
        let Some(code) = bytes.get(off..(off + b.len as usize + 2).min(bytes.len())) else {
            continue;
        };
        if !code.windows(ACTION_CALL.len()).any(|w| w == ACTION_CALL) {
            continue;
        }
        let mut d = Decoder::with_ip(64, code, m.runtime(b.start), DecoderOptions::NONE);
        let end = m.runtime(b.start) + u64::from(b.len);
        let mut before: Option<Instruction> = None;
        while d.can_decode() && d.ip() < end + 2 {
            let i = d.decode();
            if i.is_invalid() {
                break;
            }
            if let Some(mov) = before.filter(|_| sets_action(before.as_ref(), &i)) {
                if mov.len() == 5 && !sites.contains(&mov.ip()) {
                    sites.push(mov.ip());
                }
            }
            if i.ip() >= end {
                break;
            }
            before = Some(i);
        }
    }
    sites.sort_unstable();
    sites
}

/// The code at `at` in a code room that the `rt_sigaction` at original address `site` (its
/// `mov eax, 13`, see [`action_sites`]) is sent to ([`seq::action_site`]).
pub fn action_site(name: &str, at: u64, site: u64, mailbox: u64) -> Result<Vec<u8>, JitError> {
    let mut next = LABELS;
    let mut labels = move || {
        next += 1;
        next
    };
    let start = labels();
    let insns = seq::action_site(start, site, mailbox, &mut labels);
    assemble(name, at, &insns)
}

/// The dynamic loader's debugger hook (`_dl_debug_state`) in module `m`, if `m` has one of the
/// form [`load_site`] replaces: its original address and the 5 bytes a jump there covers.
/// glibc's is an empty function: `ret` (or `endbr64; ret`) and the padding to the next
/// function, which nothing runs or jumps into. `None` for any other form (it is not
/// relocated: a longer body would need its displaced instructions copied).
pub fn load_hook(m: &Module<'_>) -> Option<(u64, [u8; 5])> {
    const FORMS: [&[u8]; 2] = [&[0xc3], &[0xf3, 0x0f, 0x1e, 0xfa, 0xc3]];
    let cfg = m.cfg;
    let f = cfg.functions.iter().find(|f| f.name == "_dl_debug_state")?;
    let (base, bytes) = m.mem.code_region(f.entry)?;
    let off = (f.entry.0 - base.0) as usize;
    let old: [u8; 5] = bytes.get(off..off + 5)?.try_into().ok()?;
    let body = FORMS.iter().find(|form| old.starts_with(form))?;
    // The rest of the five bytes in no block: padding, not code.
    let code_at = |a: ImageAddr| cfg.function_holding(a).and_then(|g| cfg.block_containing(g, a));
    let free = (body.len()..5).all(|k| code_at(ImageAddr(f.entry.0 + k as u64)).is_none());
    free.then(|| (m.runtime(f.entry), old))
}

/// The code at `at` in a code room that the loader's debugger hook is sent to
/// ([`seq::load_site`], see [`load_hook`]).
pub fn load_site(name: &str, at: u64, mailbox: u64) -> Result<Vec<u8>, JitError> {
    let mut next = LABELS;
    let mut labels = move || {
        next += 1;
        next
    };
    let start = labels();
    let insns = seq::load_site(start, mailbox, &mut labels);
    assemble(name, at, &insns)
}

/// The hook of glibc's `siglongjmp` (or `__longjmp_chk`) at `at`, whose entry splice displaced
/// `d`, asking through the mailbox at `mailbox` (see [`crate::x86_64::signal`]): the landing,
/// then the entry and the function's displaced instructions (copied as a root's springboard
/// copies them) and a jump back to the rest of the function. Returns the bytes and where the
/// entry splice jumps to.
pub fn longjmp_hook(
    name: &str,
    at: u64,
    d: &kerf_patch::Displaced,
    mailbox: u64,
) -> Result<(Vec<u8>, u64), JitError> {
    use seq::signal;
    let mut next = LABELS;
    let mut labels = move || {
        next += 1;
        next
    };
    let first = labels();
    let land = assemble(name, at, &signal::longjmp_land(first, mailbox, &mut labels))?;
    let entry = (at + land.len() as u64).next_multiple_of(16);
    let (start, go_on) = (labels(), labels());
    let mut insns = signal::longjmp_entry(start, mailbox, at, go_on, &mut labels);
    let copies = kerf_patch::patch_instructions(&[], d, kerf_patch::Layout::Before);
    for (k, mut i) in copies.into_iter().enumerate() {
        // (As in `signal_hook`: copies are named by no label.)
        i.set_ip(if k == 0 { go_on } else { 0 });
        insns.push(i);
    }
    let code = assemble(name, entry, &insns)?;
    let mut bytes = land;
    bytes.resize((entry - at) as usize, 0xcc);
    bytes.extend(code);
    Ok((bytes, entry))
}

/// A signal handler's hook in a code room (see [`crate::x86_64::signal`]).
#[derive(Clone, Debug)]
pub struct SignalHook {
    /// What to write at the hook's address.
    pub bytes: Vec<u8>,
    /// Where the handler's entry splice jumps to.
    pub entry: u64,
    /// The return sequence, which a rewritten frame's return address names.
    pub back: u64,
    /// The word the return sequence reads to know the JIT is still in (1; kerf writes 0
    /// when it takes the JIT out).
    pub live: u64,
}

/// The hook at `at` for the handler whose entry splice displaced `d`, installed with
/// restorer `restorer`, asking through the mailbox at `mailbox`: the live word, the return
/// sequence, then the entry and the handler's displaced instructions (copied as a root's
/// springboard copies them) and a jump back to the rest of the handler.
pub fn signal_hook(
    name: &str,
    at: u64,
    d: &kerf_patch::Displaced,
    restorer: u64,
    mailbox: u64,
) -> Result<SignalHook, JitError> {
    use seq::signal;
    let mut next = LABELS;
    let mut labels = move || {
        next += 1;
        next
    };
    let (live, back) = (at, at + 16);
    let first = labels();
    let ret = assemble(name, back, &signal::signal_return(first, mailbox, live, &mut labels))?;
    let entry = (back + ret.len() as u64).next_multiple_of(16);
    let (start, go_on) = (labels(), labels());
    let mut insns = signal::signal_entry(start, mailbox, restorer, back, go_on, &mut labels);
    let copies = kerf_patch::patch_instructions(&[], d, kerf_patch::Layout::Before);
    for (k, mut i) in copies.into_iter().enumerate() {
        // Copies are named by no label (their original addresses would be taken for them).
        i.set_ip(if k == 0 { go_on } else { 0 });
        insns.push(i);
    }
    let code = assemble(name, entry, &insns)?;
    let mut bytes = vec![0u8; (entry - at) as usize];
    bytes[..8].copy_from_slice(&1u64.to_le_bytes());
    bytes[16..16 + ret.len()].copy_from_slice(&ret);
    bytes.extend(code);
    Ok(SignalHook { bytes, entry, back, live })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_codegen::{Env, FlagSave, ThreadPointer};

    /// A per-thread counter copied from the one lowered first at a point is what lowering it
    /// afresh gives, at every liveness of flags and registers and every way of keeping flags,
    /// for displacements small, large and negative; one lowering is kept per point.
    #[test]
    fn a_counter_lowered_once_is_each_blocks_own() {
        let counter = |d: i32| Program {
            ops: vec![Op::AddMem { addr: Addr::PerThread(d), src: Src::Imm(1), atomic: false }],
            ..Program::default()
        };
        let lives = [
            LiveAt::ALL,
            LiveAt { regs: RegSet::ALL, flags: FlagSet::EMPTY },
            LiveAt { regs: RegSet::EMPTY, flags: FlagSet::ALL },
            LiveAt { regs: RegSet::of(&[Gpr::Rax]), flags: FlagSet::ALL },
        ];
        for save in [FlagSave::Stack, FlagSave::Ah] {
            let mut e = Emitter::default();
            for live in lives {
                let mut at = At::new(live, Env::User, ThreadPointer::FsSelf, 0);
                at.flags_save = save;
                for d in [8, 0x1238, 0x7ff_fff8, -64] {
                    let p = counter(d);
                    let memo = lower_counter(&p, &at, &mut e).expect("a counter is kept");
                    let fresh = lower_program_split(&p, &at).unwrap();
                    let same = |a: &[Instruction], b: &[Instruction]| {
                        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.eq_all_bits(y))
                    };
                    assert!(same(&memo.0, &fresh.0) && same(&memo.1, &fresh.1), "{live:?} {d}");
                }
            }
            let kept: usize = e.counters.values().map(Vec::len).sum();
            assert_eq!(kept, lives.len(), "one lowering a point");
        }
        // Anything else is lowered each time.
        let mut p = counter(8);
        p.ops.push(Op::AddMem { addr: Addr::PerThread(16), src: Src::Imm(1), atomic: false });
        let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
        assert!(lower_counter(&p, &at, &mut Emitter::default()).is_none());
    }
}
