//! The translator on bytes: `tests/fixtures/jitted.c` built with gcc and analysed, every
//! function translated for a cache at a fixed address with the block counter's IR (and the
//! branch profile's on both sides of each conditional branch), and the
//! cache decoded again. Checks what the live tests found broken once: no operand or branch
//! of the cache names a label or a cache address where the program expects an original one
//! (a RIP-relative operand keeps its original target, so `lea rdi, [rip+cmp]` still hands
//! the program `cmp`), every block starts at a clean point that maps back to it, and every
//! function entry and return site is in the table.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Mnemonic, OpKind};
use kerf_analysis::cfg::FuncId;
use kerf_analysis::image::Image;
use kerf_analysis::memory::CodeMemory;
use kerf_arch::ImageAddr;
use kerf_codegen::{At, Env, LiveAt, ThreadPointer};
use kerf_jit::table::{Hash, Table};
use kerf_jit::{BlockInfo, EdgeInfo, Layout, Marks, Module, Plugin, Scope};
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::Command;

const CODE: u64 = 0x4000_0000;
const DATA: u64 = 0x5000_0000;
const TABLE: u64 = 0x7f00_0000_0000;
const MAILBOX: u64 = 0x7f10_0000_0000;

/// The fixture built once for every test here (tests run at once: two builds into one
/// file would let one test read the other's half-written output).
fn fixture() -> &'static [u8] {
    static BUILT: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    BUILT.get_or_init(build_fixture)
}

/// The fixture as an image, and its analysis.
fn analysed() -> (Image<'static>, kerf_analysis::Analysis) {
    let image = Image::from_elf("jitted", fixture()).unwrap();
    let analysis = kerf_analysis::analyze(&image, &kerf_analysis::Quiet);
    (image, analysis)
}

fn build_fixture() -> Vec<u8> {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("jitted-translate");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/jitted.c");
    let st = Command::new("gcc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc is needed (Debian package gcc)");
    assert!(st.success());
    std::fs::read(out).unwrap()
}

/// The block counter, and with `edges` the same counter on both sides of every conditional
/// branch (the branch profile).
struct Counter {
    edges: bool,
}

fn count(owner: u64, word: u64, shared: u64) -> kerf_codegen::ir::Program {
    let text = format!(
        "    thread %t\n    load64 %o, [{owner:#x}]\n    br.ne %t, %o, s\n    add [{word:#x}], 1\n    \
         jmp d\ns:\n    atomic add [{shared:#x}], 1\nd:\n"
    );
    kerf_codegen::text::parse(&text).unwrap()
}

impl Plugin for Counter {
    fn block(&self, b: &BlockInfo<'_>) -> Option<kerf_codegen::ir::Program> {
        Some(count(b.owner, b.word, b.shared))
    }

    fn counts_blocks(&self) -> bool {
        true
    }

    fn edges(&self) -> bool {
        self.edges
    }

    fn edge(&self, e: &EdgeInfo<'_>) -> Option<kerf_codegen::ir::Program> {
        self.edges.then(|| count(e.owner, e.word, e.shared))
    }
}

/// Every RIP-relative operand's target and every direct branch target of `code` at `ip`.
fn targets(code: &[u8], ip: u64) -> (Vec<u64>, Vec<u64>) {
    let (mut mem, mut branch) = (Vec::new(), Vec::new());
    let mut d = Decoder::with_ip(64, code, ip, DecoderOptions::NONE);
    while d.can_decode() {
        let i = d.decode();
        if i.is_ip_rel_memory_operand() {
            mem.push(i.ip_rel_memory_address());
        }
        if matches!(i.op0_kind(), OpKind::NearBranch64) {
            branch.push(i.near_branch_target());
        }
    }
    (mem, branch)
}

/// The continuations chained `ret`s load (`seq::chained_ret`): each `lea r, [rip+X]` that a
/// `mov [rsp], r` and a `ret` follow, by its `X`.
fn chained_continuations(code: &[u8]) -> Vec<u64> {
    let d: Vec<iced_x86::Instruction> =
        Decoder::with_ip(64, code, CODE, DecoderOptions::NONE).iter().collect();
    d.windows(3)
        .filter(|w| {
            let [lea, store, ret] = w else { return false };
            lea.code() == iced_x86::Code::Lea_r64_m
                && lea.memory_base() == iced_x86::Register::RIP
                && store.code() == iced_x86::Code::Mov_rm64_r64
                && store.memory_base() == iced_x86::Register::RSP
                && store.memory_displacement64() == 0
                && store.op1_register() == lea.op0_register()
                && ret.mnemonic() == Mnemonic::Ret
        })
        .map(|w| w[0].ip_rel_memory_address())
        .collect()
}

/// A cache at [`CODE`] with room to spare, its data at [`DATA`].
fn layout(mailbox: Option<u64>) -> Layout {
    Layout {
        code: CODE,
        room: 1 << 24,
        table: TABLE,
        hash: Hash::Mixed(kerf_jit::table::MIN_SET_BITS),
        data: DATA,
        mailbox,
        owner_tid: None,
        threads: 0,
        rings: 0,
        routines: 0,
        state: 0,
        slabs: None,
        per_thread: None,
        ring_word: None,
        load_hook: None,
    }
}

/// The fixture as the translator reads it, with everything on (as `kerf jit` has it).
fn module<'a>(
    cfg: &'a kerf_analysis::cfg::Cfg,
    image: &'a Image<'a>,
    returns: &'a std::sync::OnceLock<Vec<kerf_analysis::liveness::Live>>,
) -> Module<'a> {
    Module {
        cfg,
        mem: image,
        bias: 0,
        returns: Some(returns),
        tables: true,
        guards: true,
        fast_calls: true,
        chains: kerf_jit::translate::CHAIN_CALLERS,
        parts: true,
        inside_entries: true,
        inline: 48,
        iced: false,
        counting: None,
        profile: None,
    }
}

/// Every function of `cfg` (the image `image`, loaded at `bias`) translated for `l` with
/// `plugin`, copying callees of up to `inline` instructions, laid out by iced's encoder with
/// `iced`, the `roots` (runtime entries) as `kerf jit` was given them.
#[allow(clippy::too_many_arguments)]
fn translate_every(
    name: &str,
    image: &Image<'_>,
    cfg: &kerf_analysis::cfg::Cfg,
    roots: &HashSet<u64>,
    (bias, inline, iced): (u64, u32, bool),
    l: &Layout,
    plugin: &dyn Plugin,
) -> kerf_jit::Translation {
    let returns = std::sync::OnceLock::new();
    let funcs: Vec<FuncId> = (0..cfg.functions.len() as u32).map(FuncId).collect();
    let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
    let reached: HashSet<FuncId> = funcs.iter().copied().collect();
    let scope = Scope { roots, reached: &reached, slots: &Default::default(), marks: None };
    let m = Module { bias, inline, iced, ..module(cfg, image, &returns) };
    kerf_jit::translate(name, &m, &funcs, l, plugin, &at, &scope).unwrap()
}

/// The first instruction of the translation of block `b`, if it is the ran mark: a byte 1
/// stored into the block's own word.
fn marked(t: &kerf_jit::Translation, b: &kerf_jit::Translated) -> bool {
    let at = (b.cache - t.at) as usize;
    let i = Decoder::with_ip(64, &t.code[at..], b.cache, DecoderOptions::NONE).decode();
    i.code() == iced_x86::Code::Mov_rm8_imm8
        && i.is_ip_rel_memory_operand()
        && i.ip_rel_memory_address() == b.word
        && i.immediate8() == 1
}

/// Ran marks: with marks asked for, every function's entry block but those of the functions
/// known to have run starts with the mark, and so does each of their blocks that no edge of
/// its own function reaches, or that the landings name; no other block does. With none asked
/// for, or under a plugin that counts blocks (its count says as much), no block does.
#[test]
fn ran_marks_go_where_functions_not_known_to_have_run_are_entered() {
    let (image, analysis) = analysed();
    let cfg = &analysis.cfg;
    let returns = std::sync::OnceLock::new();
    let m = module(cfg, &image, &returns);
    let funcs: Vec<FuncId> = (0..cfg.functions.len() as u32).map(FuncId).collect();
    let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
    let work = cfg.functions_named("work").next().expect("work");
    let roots: HashSet<u64> = [cfg.function(work).entry.0].into();
    let reached: HashSet<FuncId> = funcs.iter().copied().collect();
    let known: HashSet<FuncId> = [work].into();
    // Whether an edge of its own function (other than into its entry) reaches block `b`.
    let own_edges = |b: &kerf_analysis::cfg::Block| {
        let f = cfg.function(b.func);
        cfg.blocks_of(b.func).iter().flat_map(|c| cfg.edges_of(c)).any(|e| {
            matches!(e.target, kerf_analysis::cfg::EdgeTarget::Block(t)
                if t != f.entry_block && cfg.block(t).start == b.start)
        })
    };
    // A block that its own function's edges reach: marked only because the landings name it.
    let inner = (funcs.iter().filter(|&&f| f != work))
        .find_map(|&f| cfg.blocks_of(f).iter().find(|b| own_edges(b)))
        .map(|b| b.start)
        .expect("a block its own function's edges reach");
    let landings: kerf_arch::hash::AddrSet<ImageAddr> = [inner].into_iter().collect();
    let slots = Default::default();
    let scope = |marks| Scope { roots: &roots, reached: &reached, slots: &slots, marks };
    let layout = layout(Some(MAILBOX));
    let none = kerf_jit::NoPlugin;
    let counter = Counter { edges: false };
    let marks = Marks { known: &known, landings: &landings };
    for (plugin, marks) in
        [(&none as &dyn Plugin, Some(marks)), (&none, None), (&counter, Some(marks))]
    {
        let t =
            kerf_jit::translate("jitted", &m, &funcs, &layout, plugin, &at, &scope(marks)).unwrap();
        let expect_any = marks.is_some() && !plugin.counts_blocks();
        let (mut entries, mut inside) = (0, 0);
        for b in &t.blocks {
            let block = cfg.blocks_of(b.func).iter().find(|c| c.start.0 == b.start).unwrap();
            let entry = b.start == cfg.function(b.func).entry.0;
            let entered = entry || !own_edges(block) || landings.contains(&block.start);
            let want = expect_any && entered && b.func != work;
            assert_eq!(marked(&t, b), want, "{} at {:#x}", cfg.function(b.func).name, b.start);
            entries += usize::from(want && entry);
            inside += usize::from(want && !entry);
        }
        assert!(!expect_any || (entries > 10 && inside >= 1), "{entries} and {inside} marks");
        let at_inner = t.blocks.iter().find(|b| b.start == inner.0).expect("inner translated");
        assert_eq!(marked(&t, at_inner), expect_any, "the landing at {:#x}", inner.0);
    }
}

#[test]
fn the_cache_keeps_original_addresses_and_maps_back() {
    let (image, analysis) = analysed();
    let cfg = &analysis.cfg;
    let returns = std::sync::OnceLock::new();
    let m = module(cfg, &image, &returns);
    let funcs: Vec<FuncId> = (0..cfg.functions.len() as u32).map(FuncId).collect();
    let layout = layout(Some(MAILBOX));
    let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
    let work = cfg.functions_named("work").next().expect("work");
    let roots: HashSet<u64> = [cfg.function(work).entry.0].into();
    let reached: HashSet<FuncId> = [work].into();
    let scope = Scope { roots: &roots, reached: &reached, slots: &Default::default(), marks: None };
    // Both sides of every conditional branch counted too: their code must keep every check
    // below true.
    let plugin = Counter { edges: true };
    let t = kerf_jit::translate("jitted", &m, &funcs, &layout, &plugin, &at, &scope).unwrap();
    let end = CODE + t.code.len() as u64;

    // 1. RIP-relative operands: the original code's targets are all still there, and the only
    //    others are kerf's data area (the counters).
    let mut original: BTreeMap<u64, usize> = BTreeMap::new();
    for b in &t.blocks {
        let (base, code) = image.code_region(kerf_arch::ImageAddr(b.start)).unwrap();
        let off = (b.start - base.0) as usize;
        let block = cfg.blocks.iter().find(|x| x.start.0 == b.start).unwrap();
        let (mem, _) = targets(&code[off..off + block.len as usize], b.start);
        for a in mem {
            *original.entry(a).or_default() += 1;
        }
    }
    let (mem, branches) = targets(&t.code, CODE);
    // (But for a chained `ret`'s continuation: `lea r, [rip+cont]; mov [rsp], r; ret`, which
    // the `ret` takes at once, as a frameless `ret` takes the one it reads from the table.)
    let chained = chained_continuations(&t.code);
    let mut cached: BTreeMap<u64, usize> = BTreeMap::new();
    for a in mem.into_iter().filter(|a| !chained.contains(a)) {
        assert!(!(CODE..end).contains(&a), "an operand points into the cache: {a:#x}");
        if !(DATA..DATA + t.data_len).contains(&a) {
            *cached.entry(a).or_default() += 1;
        }
    }
    assert_eq!(cached, original, "RIP-relative targets changed");
    assert!(original.len() > 10, "{original:?}");

    // 2. Direct branches go into the cache or to original code, never to a label.
    for b in branches {
        let in_module = image.code_region(kerf_arch::ImageAddr(b)).is_some();
        assert!((CODE..end).contains(&b) || in_module, "branch to {b:#x}");
    }

    // 3. Every block's translation starts at a clean point that maps back to it; every exit
    //    that kerf may link later has its word in the data area, past the predictions, and
    //    its slow path in the cache.
    for b in &t.blocks {
        assert_eq!(t.clean.get(&b.cache), Some(&b.start), "block {:#x}", b.start);
    }
    let alone = kerf_jit::translate("jitted", &m, &[work], &layout, &plugin, &at, &scope).unwrap();
    let alone_end = CODE + alone.code.len() as u64;
    let callees: Vec<u64> = alone.links.iter().map(|l| l.target).collect();
    assert!(callees.len() >= 2, "work's calls to other functions: {callees:x?}");
    for l in &alone.links {
        assert!((alone.preds.end..DATA + alone.data_len).contains(&l.word), "{l:?}");
        assert!((CODE..alone_end).contains(&l.slow), "{l:?}");
        assert!(alone.exits.contains_key(&l.target), "{l:?}");
        assert!(t.cache_of(l.target).is_some(), "{l:?} leads to no function");
    }

    // Every translated conditional branch has four words of its own (two a side), between
    // the blocks' words and the predictions, and its taken side's code is a clean point for
    // its target besides the target block's own.
    let conds = t
        .blocks
        .iter()
        .filter(|b| {
            let block = cfg.blocks.iter().find(|x| x.start.0 == b.start).unwrap();
            block.term == kerf_analysis::cfg::Terminator::CondJump
        })
        .count();
    assert!(conds > 20, "{conds} conditional branches");
    assert_eq!(t.branches.len(), conds);
    let mut words = HashSet::new();
    let first = DATA + kerf_jit::translate::DATA_HEADER + 16 * t.blocks.len() as u64;
    for b in &t.branches {
        for w in b.taken.into_iter().chain(b.not_taken) {
            assert!((first..t.preds.start).contains(&w), "{b:x?}");
            assert!(words.insert(w), "a word twice: {b:x?}");
        }
        let cleans = t.clean.values().filter(|&&o| o == b.target).count();
        let translated = t.cache_of(b.target).is_some() as usize;
        assert!(cleans > translated, "{b:x?}: {cleans} clean points for its target");
    }

    // The miss path asks kerf through the mailbox, and the table's continuation words are
    // read past the ways.
    let mut d = Decoder::with_ip(64, &t.code, CODE, DecoderOptions::NONE);
    let asks = d
        .iter()
        .filter(|i| i.code() == iced_x86::Code::Mov_r64_imm64 && i.immediate64() == MAILBOX);
    assert!(asks.count() >= 2, "the miss path does not name the mailbox");

    // 4. The table finds every function entry and every return site.
    let mut table = Table::new(Hash::Mixed(kerf_jit::table::MIN_SET_BITS));
    for e in &t.entries {
        table.insert(e.orig, e.entry, e.cont);
    }
    for &f in &funcs {
        let entry = cfg.function(f).entry.0;
        if t.cache_of(entry).is_some() {
            assert!(table.find(entry).is_some(), "entry of {}", cfg.function(f).name);
        }
    }
    let calls = {
        let (base, code) = image.code_region(cfg.function(work).entry).unwrap();
        let f = cfg.function(work);
        let off = (f.entry.0 - base.0) as usize;
        let len = (f.extent.end - f.extent.start) as usize;
        let mut d = Decoder::with_ip(64, &code[off..off + len], f.entry.0, DecoderOptions::NONE);
        let mut v = Vec::new();
        while d.can_decode() {
            let i = d.decode();
            if i.flow_control() == FlowControl::Call
                || i.flow_control() == FlowControl::IndirectCall
            {
                v.push(i.next_ip());
            }
        }
        v
    };
    assert!(calls.len() >= 4, "{calls:?}");
    for r in calls {
        assert!(table.find(r).is_some(), "return site {r:#x} of work");
        // Said so whatever its rank (`setjmp`'s is also `longjmp`'s target): kerf writes
        // return sites into the live table before the entries that lead into the code.
        let e = t.entries.iter().find(|e| e.orig == r).unwrap();
        assert!(e.returned_to, "return site {r:#x} of work (rank {})", e.rank);
        // 5. A `ret` to a return site goes to its continuation: the instruction after the
        //    translated `call`, whose stub puts that same original return address on the
        //    stack (so the CPU's return predictor, which saw the `call`, foresees the `ret`).
        let c = table.continuation(r).expect("a return site's continuation");
        let at = (c - 5 - CODE) as usize;
        let mut d = Decoder::with_ip(64, &t.code[at..], c - 5, DecoderOptions::NONE);
        let call = d.decode();
        assert_eq!(call.code(), iced_x86::Code::Call_rel32_64, "before {c:#x}: {call}");
        let stub = (call.near_branch_target() - CODE) as usize;
        let mut d =
            Decoder::with_ip(64, &t.code[stub..], call.near_branch_target(), DecoderOptions::NONE);
        // Below 2 GiB the original return address is one sign-extended 32-bit store; else it
        // goes through r11 (saved and put back).
        let first = d.decode();
        let pushed = if r <= i32::MAX as u64 {
            assert_eq!(first.code(), iced_x86::Code::Mov_rm64_imm32, "{first}");
            assert_eq!(first.memory_base(), iced_x86::Register::RSP, "{first}");
            first.immediate32to64() as u64
        } else {
            let load = d.decode();
            assert_eq!(load.code(), iced_x86::Code::Mov_r64_imm64, "{load}");
            load.immediate64()
        };
        assert_eq!(pushed, r, "the stub of the call before {c:#x} pushes {pushed:#x}");
    }

    // 6. The root's jump from the original code goes to its outer entry, which records the
    //    stack pointer and goes on to the root's translation; every `ret` of the root and of
    //    the functions it tail-calls, and no other, checks the outer frames first.
    let entry = cfg.function(work).entry.0;
    let outer = t.outers.get(&entry).copied().expect("the root's outer entry");
    assert_eq!(t.entered_at(entry), Some(outer));
    assert_eq!(t.outers.len(), 1, "{:x?}", t.outers);
    let at = (outer - CODE) as usize;
    // (The probes of the slot's words branch ahead to the store: `jrcxz`; the sequence ends
    // at its one unconditional jump.)
    let stub: Vec<_> = Decoder::with_ip(64, &t.code[at..], outer, DecoderOptions::NONE)
        .into_iter()
        .take_while(|i| i.flow_control() != FlowControl::UnconditionalBranch)
        .collect();
    assert!(stub
        .iter()
        .all(|i| matches!(i.flow_control(), FlowControl::Next | FlowControl::ConditionalBranch)));
    let recorded = stub.iter().any(|i| {
        i.code() == iced_x86::Code::Mov_rm64_r64
            && i.memory_base() == iced_x86::Register::RDX
            && i.op1_register() == iced_x86::Register::RSP
    });
    assert!(recorded, "the outer entry stores the stack pointer: {stub:?}");
    let last = stub.last().unwrap();
    let jump = Decoder::with_ip(
        64,
        &t.code[(last.next_ip() - CODE) as usize..],
        last.next_ip(),
        DecoderOptions::NONE,
    )
    .decode();
    assert_eq!(jump.near_branch_target(), t.cache_of(entry).unwrap(), "{jump}");
    let mut ending = HashSet::from([work]);
    let mut todo = vec![work];
    while let Some(f) = todo.pop() {
        for b in cfg.blocks_of(f) {
            for e in cfg.edges_of(b) {
                if let (kind, kerf_analysis::cfg::EdgeTarget::Function(g)) = (e.kind, e.target) {
                    if kind != kerf_analysis::cfg::EdgeKind::Call && ending.insert(g) {
                        todo.push(g);
                    }
                }
            }
        }
    }
    let rets: usize = ending
        .iter()
        .map(|&f| {
            cfg.blocks_of(f)
                .iter()
                .filter(|b| b.term == kerf_analysis::cfg::Terminator::Return)
                .count()
        })
        .sum();
    assert!(rets >= 1, "work returns");
    let hashes = Decoder::with_ip(64, &t.code, CODE, DecoderOptions::NONE)
        .into_iter()
        .filter(|i| {
            i.code() == iced_x86::Code::VEX_Rorx_r64_rm64_imm8
                && i.op1_register() == iced_x86::Register::RSP
        })
        .count();
    assert_eq!(hashes, 1 + rets, "the outer entry and a check per ret of {ending:?}");
}

/// A plugin with code only where frames end: an add on one word.
struct Exits;

/// The word the exit code adds to (within a rel32 of the cache).
const MARK: u64 = DATA - 0x1000;

impl Plugin for Exits {
    fn block(&self, _b: &BlockInfo<'_>) -> Option<kerf_codegen::ir::Program> {
        None
    }

    fn exits(&self) -> bool {
        true
    }

    fn exit(&self, _x: &kerf_jit::ExitInfo<'_>) -> Option<kerf_codegen::ir::Program> {
        Some(kerf_codegen::text::parse(&format!("    add [{MARK:#x}], 1\n")).unwrap())
    }
}

/// The exit code (the call trace's returns) goes before every `ret` and tail call of the
/// region, once per such block, and starts at a clean point for that instruction.
#[test]
fn every_end_of_a_frame_gets_the_exit_code_at_a_clean_point() {
    use kerf_analysis::cfg::Terminator;
    let (image, analysis) = analysed();
    let cfg = &analysis.cfg;
    let returns = std::sync::OnceLock::new();
    let m = module(cfg, &image, &returns);
    let funcs: Vec<FuncId> = (0..cfg.functions.len() as u32).map(FuncId).collect();
    let layout = layout(None);
    let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
    let (roots, reached) = (HashSet::new(), funcs.iter().copied().collect());
    let scope = Scope { roots: &roots, reached: &reached, slots: &Default::default(), marks: None };
    let t = kerf_jit::translate("jitted", &m, &funcs, &layout, &Exits, &at, &scope).unwrap();
    // The blocks that end a frame, and the original address of their last instruction.
    let mut ends = BTreeMap::new();
    for b in &t.blocks {
        let block = cfg.blocks.iter().find(|x| x.start.0 == b.start).unwrap();
        let ends_frame = matches!(
            block.term,
            Terminator::Return | Terminator::TailCall | Terminator::IndirectTailCall
        );
        if !ends_frame {
            continue;
        }
        let (base, code) = image.code_region(block.start).unwrap();
        let off = (block.start.0 - base.0) as usize;
        let mut d = Decoder::with_ip(
            64,
            &code[off..off + block.len as usize],
            block.start.0,
            DecoderOptions::NONE,
        );
        // (Padding after a call that does not return can end a "function" the analysis found
        // at it: no `ret` or jump there, nothing to put code before.)
        let last = d.iter().last().unwrap();
        let ends_here = matches!(
            last.flow_control(),
            FlowControl::Return | FlowControl::UnconditionalBranch | FlowControl::IndirectBranch
        );
        if ends_here {
            ends.insert(last.ip(), last.flow_control());
        }
    }
    assert!(ends.len() > 20, "{} blocks end a frame", ends.len());
    let mut d = Decoder::with_ip(64, &t.code, CODE, DecoderOptions::NONE);
    let adds: Vec<u64> = d
        .iter()
        .filter(|i| i.is_ip_rel_memory_operand() && i.ip_rel_memory_address() == MARK)
        .map(|i| i.ip())
        .collect();
    assert_eq!(adds.len(), ends.len(), "one exit sequence per block that ends a frame");
    // Each sequence is a clean point for the instruction it comes before (flags may be live
    // there: `lea rsp, [rsp-128]` and `pushfq` may come first, 6 bytes).
    for a in adds {
        let clean = t.clean.range(a.saturating_sub(6)..=a).next_back().map(|(_, &o)| o);
        let orig = clean.unwrap_or_else(|| panic!("the exit code at {a:#x} is no clean point"));
        assert!(ends.contains_key(&orig), "the exit code at {a:#x} is clean for {orig:#x}");
    }
}

/// Where the fixture's asm leaves return, the callers keep registers a frameless `ret` could
/// take (`keep_all` all seven, `keep_two` r11 and r10): the analysis sees them live there,
/// so `keep_leaf`'s `ret` saves the two it takes (see the next test) and `keep_leaf2`'s takes
/// two other registers (some
/// of the rest are live too: `work` passes its next unknown callee, `qsort`, every argument
/// register it has not written, as far as kerf can tell).
#[test]
fn registers_a_caller_keeps_across_a_call_are_live_where_the_callee_returns() {
    use kerf_arch::x86_64::Gpr::*;
    let (_, analysis) = analysed();
    let cfg = &analysis.cfg;
    let cont = kerf_analysis::liveness::at_continuations(cfg);
    let of = |name: &str| {
        let f = cfg.functions_named(name).next().unwrap_or_else(|| panic!("no {name}"));
        cont[f.0 as usize]
    };
    let all = of("keep_leaf");
    for r in [R11, R10, R9, R8, Rsi, Rdi, Rcx] {
        assert!(all.regs.contains(r), "keep_leaf: {r:?} not live at its return: {}", all.regs);
    }
    let two = of("keep_leaf2");
    assert!(two.regs.contains(R11) && two.regs.contains(R10), "keep_leaf2: {}", two.regs);
    let free = [R9, R8, Rsi, Rdi, Rcx].iter().filter(|&&r| !two.regs.contains(r)).count();
    assert!(free >= 2, "keep_leaf2: fewer than two registers free: {}", two.regs);
    assert!(two.flags.is_empty(), "keep_leaf2: flags {}", two.flags);
}

/// A frameless `ret` whose callers keep every register it could take (`keep_leaf`) saves
/// `r11` and `r10` just below its return slot and puts them back before the `ret`; one with
/// two registers dead where it returns (`keep_leaf2`) saves nothing, and compares its one
/// caller's return address inline.
#[test]
fn a_frameless_ret_saves_the_registers_its_callers_keep() {
    use iced_x86::{Code, Register};
    let (image, analysis) = analysed();
    let cfg = &analysis.cfg;
    let none = HashSet::new();
    let plain = (0, 0, false);
    let t =
        translate_every("jitted", &image, cfg, &none, plain, &layout(None), &kerf_jit::NoPlugin);
    let code = |name: &str| {
        let f = cfg.functions_named(name).next().unwrap();
        let start = t.cache_of(cfg.function(f).entry.0).unwrap();
        let d =
            Decoder::with_ip(64, &t.code[(start - CODE) as usize..], start, DecoderOptions::NONE);
        d.into_iter().take_while(|i| i.mnemonic() != Mnemonic::Ret).collect::<Vec<_>>()
    };
    let rsp_store = |i: &iced_x86::Instruction, disp: i64, r: Register| {
        i.code() == Code::Mov_rm64_r64
            && i.memory_base() == Register::RSP
            && i.memory_displacement64() as i64 == disp
            && i.op1_register() == r
    };
    let rsp_load = |i: &iced_x86::Instruction, disp: i64, r: Register| {
        i.code() == Code::Mov_r64_rm64
            && i.memory_base() == Register::RSP
            && i.memory_displacement64() as i64 == disp
            && i.op0_register() == r
    };
    let leaf = code("keep_leaf");
    assert!(
        rsp_store(&leaf[0], -8, Register::R11) && rsp_store(&leaf[1], -16, Register::R10),
        "{leaf:?}"
    );
    assert!(rsp_load(&leaf[2], 0, Register::R10), "{leaf:?}");
    let n = leaf.len();
    assert!(
        rsp_load(&leaf[n - 2], -8, Register::R11) && rsp_load(&leaf[n - 1], -16, Register::R10),
        "{leaf:?}"
    );
    // keep_leaf2 has one caller, keep_two: its `ret` compares that call's return address
    // first (`seq::chained_ret`), and writes the continuation into the return slot as an
    // immediate (the cache lies below 2 GiB here; above, through a register other than the
    // two keep_two keeps: `tests/chains.rs` runs both forms).
    let leaf2 = code("keep_leaf2");
    let [cmp, jne, store] = &leaf2[..] else { panic!("{leaf2:?}") };
    assert!(
        cmp.code() == Code::Cmp_rm64_imm32
            && cmp.memory_base() == Register::RSP
            && jne.mnemonic() == Mnemonic::Jne
            && store.code() == Code::Mov_rm64_imm32
            && store.memory_base() == Register::RSP
            && store.memory_displacement64() == 0,
        "{leaf2:?}"
    );
    // The continuation it writes is the translation of keep_two's return site (the block
    // after its call).
    let keep_two = cfg.functions_named("keep_two").next().unwrap();
    let call = kerf_analysis::cfg::Terminator::Call;
    let site = cfg.blocks_of(keep_two).iter().find(|b| b.term == call).unwrap();
    assert_eq!(Some(store.immediate32to64() as u64), t.cache_of(site.end().0), "{leaf2:?}");
    assert!(
        !leaf2
            .iter()
            .any(|i| i.memory_base() == Register::RSP && (i.memory_displacement64() as i64) < 0),
        "{leaf2:?}"
    );
}

/// Counts from an earlier run (`Module::profile`): a frameless `ret` compares first the return
/// address of a direct call that made at least half of its function's calls, also where it
/// keeps its two registers (`seq::chained_ret_saved`: keep_leaf keeps r11 and r10, which its
/// caller keep_all keeps across the call); a caller that made fewer gets no compare, and
/// without counts keep_leaf has none (a `ret` that keeps its registers is chained only by
/// counts).
#[test]
fn a_ret_compares_first_the_caller_that_made_most_of_its_calls_in_an_earlier_run() {
    use iced_x86::{Code, Register};
    let (image, analysis) = analysed();
    let cfg = &analysis.cfg;
    let leaf = cfg.functions_named("keep_leaf").next().unwrap();
    let keep_all = cfg.functions_named("keep_all").next().unwrap();
    let call = kerf_analysis::cfg::Terminator::Call;
    let site = cfg.blocks_of(keep_all).iter().find(|b| b.term == call).unwrap();
    let funcs: Vec<FuncId> = (0..cfg.functions.len() as u32).map(FuncId).collect();
    let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
    let roots = HashSet::new();
    let reached: HashSet<FuncId> = funcs.iter().copied().collect();
    let scope = Scope { roots: &roots, reached: &reached, slots: &Default::default(), marks: None };
    // keep_leaf's translation up to its first `ret`, and how many hot chains there were.
    let leaf_code = |profile: Option<&kerf_arch::hash::AddrMap<u64, u64>>| {
        let returns = std::sync::OnceLock::new();
        let m = Module { profile, ..module(cfg, &image, &returns) };
        let t = kerf_jit::translate(
            "jitted",
            &m,
            &funcs,
            &layout(None),
            &kerf_jit::NoPlugin,
            &at,
            &scope,
        )
        .unwrap();
        let start = t.cache_of(cfg.function(leaf).entry.0).unwrap();
        let d =
            Decoder::with_ip(64, &t.code[(start - CODE) as usize..], start, DecoderOptions::NONE);
        let code: Vec<_> = d.into_iter().take_while(|i| i.mnemonic() != Mnemonic::Ret).collect();
        (code, t.hot_chains, t.cache_of(site.end().0))
    };
    let counts = |calls: u64| -> kerf_arch::hash::AddrMap<u64, u64> {
        [(cfg.function(leaf).entry.0, 10), (site.start.0, calls)].into_iter().collect()
    };
    let saved_fast_ret = |code: &[iced_x86::Instruction]| {
        code.len() > 2
            && code[0].code() == Code::Mov_rm64_r64
            && code[0].memory_base() == Register::RSP
            && code[0].memory_displacement64() as i64 == -8
    };
    // Six calls of ten from keep_all: compared first.
    let (code, hot, cont) = leaf_code(Some(&counts(6)));
    assert_eq!(hot, 1, "{code:?}");
    let [cmp, jne, store] = &code[..] else { panic!("{code:?}") };
    assert!(
        cmp.code() == Code::Cmp_rm64_imm32
            && cmp.memory_base() == Register::RSP
            && cmp.memory_displacement64() == 0
            && cmp.immediate32to64() as u64 == site.end().0
            && jne.mnemonic() == Mnemonic::Jne,
        "{code:?}"
    );
    // The continuation into the slot as an immediate (the cache is below 2 GiB): the two
    // registers the callers keep are not touched (above 2 GiB the chain keeps one just below
    // the slot while it holds the continuation: `tests/chains.rs`).
    assert!(
        store.code() == Code::Mov_rm64_imm32
            && store.memory_base() == Register::RSP
            && store.memory_displacement64() == 0,
        "{code:?}"
    );
    assert_eq!(Some(store.immediate32to64() as u64), cont, "{code:?}");
    // Four of ten: the table, as with no counts at all.
    for profile in [Some(counts(4)), None] {
        let (code, hot, _) = leaf_code(profile.as_ref());
        assert_eq!(hot, 0, "{code:?}");
        assert!(saved_fast_ret(&code), "{code:?}");
    }
}

/// Every instruction of a function with an indirect jump of unknown targets (the fixture's
/// `inside_jump`) gets a table entry of rank `INSIDE` ahead with `inside_entries`, none
/// without (kerf makes one when a miss asks); block starts and return sites get theirs either
/// way, and nothing else changes in the entries.
#[test]
fn entries_inside_blocks_are_made_ahead_only_when_asked_to() {
    use kerf_jit::table::INSIDE;
    let (image, analysis) = analysed();
    let cfg = &analysis.cfg;
    let returns = std::sync::OnceLock::new();
    let f = cfg.functions_named("inside_jump").next().expect("inside_jump");
    let funcs = [f];
    let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
    let roots: HashSet<u64> = HashSet::new();
    let reached: HashSet<FuncId> = [f].into();
    let scope = Scope { roots: &roots, reached: &reached, slots: &Default::default(), marks: None };
    let plugin = Counter { edges: false };
    let entries = |inside_entries: bool| {
        let m = Module { inside_entries, ..module(cfg, &image, &returns) };
        let t =
            kerf_jit::translate("jitted", &m, &funcs, &layout(Some(MAILBOX)), &plugin, &at, &scope)
                .unwrap();
        let mut e: Vec<(u64, u8)> = t.entries.iter().map(|e| (e.orig, e.rank)).collect();
        e.sort();
        e
    };
    let (ahead, asked) = (entries(true), entries(false));
    let inside: Vec<u64> = ahead.iter().filter(|e| e.1 >= INSIDE).map(|e| e.0).collect();
    // Of its eleven instructions, eight start no block.
    assert_eq!(inside.len(), 8, "{ahead:?}");
    assert!(asked.iter().all(|e| e.1 < INSIDE), "{asked:?}");
    let rest: Vec<(u64, u8)> = ahead.iter().copied().filter(|e| e.1 < INSIDE).collect();
    assert_eq!(rest, asked);
    // The instruction the indirect jump lands on is one of them.
    let mid = cfg.function(f).entry.0 + 0x19;
    assert!(inside.contains(&mid), "{:#x} not among {inside:x?}", mid);
}

/// A direct call to a small function copies it in place (`Module::inline`): the fixture's
/// leaves (`keep_leaf`, `redirect_leaf`, `redirect_nop`) and `mix2`, whose copy copies its two
/// calls of `mix` too. Where a call is copied its translation has no `call`: the return
/// address is pushed, and each copied `ret` compares the return slot with it before it jumps
/// back (the `cmp` a copy's `ret` starts with), so the copies' `ret`s are at least the calls
/// copied. Every return site still has its table entry (a copied function that changed its
/// return slot returns through the table, as `redirect_leaf` does); with no copying (`inline`
/// 0) the same entries are made and no `cmp [rsp]` appears.
#[test]
fn calls_copy_small_callees_in_place() {
    let (image, analysis) = analysed();
    let cfg = &analysis.cfg;
    let returns = std::sync::OnceLock::new();
    let funcs: Vec<FuncId> = (0..cfg.functions.len() as u32).map(FuncId).collect();
    let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
    let work = cfg.functions_named("work").next().expect("work");
    let roots: HashSet<u64> = [cfg.function(work).entry.0].into();
    let reached: HashSet<FuncId> = funcs.iter().copied().collect();
    let scope = Scope { roots: &roots, reached: &reached, slots: &Default::default(), marks: None };
    let plugin = Counter { edges: false };
    let translate = |inline: u32| {
        let m = Module { inline, ..module(cfg, &image, &returns) };
        kerf_jit::translate("jitted", &m, &funcs, &layout(Some(MAILBOX)), &plugin, &at, &scope)
            .unwrap()
    };
    // A copied `ret`: `cmp qword [rsp], imm32` (an address below 2 GiB) or `cmp [rsp], reg`,
    // then past the `jne` the slot popped by `lea rsp, [rsp+8]` (a chained `ret`'s compare is
    // followed by the `lea` of its continuation instead).
    let slot_compares = |code: &[u8]| {
        let d: Vec<iced_x86::Instruction> =
            Decoder::with_ip(64, code, CODE, DecoderOptions::NONE).iter().collect();
        d.windows(3)
            .filter(|w| {
                let (i, pop) = (&w[0], &w[2]);
                matches!(i.code(), iced_x86::Code::Cmp_rm64_imm32 | iced_x86::Code::Cmp_rm64_r64)
                    && i.op0_kind() == OpKind::Memory
                    && i.memory_base() == iced_x86::Register::RSP
                    && i.memory_displacement64() == 0
                    && pop.code() == iced_x86::Code::Lea_r64_m
                    && pop.op0_register() == iced_x86::Register::RSP
            })
            .count()
    };
    let (copying, plain) = (translate(48), translate(0));
    assert_eq!(plain.inlined, 0);
    assert_eq!(slot_compares(&plain.code), 0);
    // keep_all's and keep_two's leaves, redirect's two, mix2 from work, and mix twice in
    // mix2's own translation.
    assert!(copying.inlined >= 6, "{} calls copied", copying.inlined);
    let compares = slot_compares(&copying.code);
    assert!(compares >= copying.inlined, "{compares} copied rets for {}", copying.inlined);
    let orig = |t: &kerf_jit::Translation| {
        let mut v: Vec<(u64, u8)> = t.entries.iter().map(|e| (e.orig, e.rank)).collect();
        v.sort();
        v
    };
    assert_eq!(orig(&copying), orig(&plain), "the table's entries changed");
    // Copies share their blocks' words: no block is translated twice.
    assert_eq!(copying.blocks, {
        let mut b = plain.blocks.clone();
        for (x, y) in b.iter_mut().zip(&copying.blocks) {
            x.cache = y.cache;
        }
        b
    });
    // The return address of a copied call is pushed, never called: keep_all's translation
    // has no `call` to keep_leaf's translation's stub.
    let keep_all = cfg.functions_named("keep_all").next().unwrap();
    let start = copying.cache_of(cfg.function(keep_all).entry.0).unwrap();
    let mut d =
        Decoder::with_ip(64, &copying.code[(start - CODE) as usize..], start, DecoderOptions::NONE);
    let first: Vec<_> = d.iter().take(40).collect();
    assert!(
        first
            .iter()
            .any(|i| i.code() == iced_x86::Code::Push_rm64
                || i.code() == iced_x86::Code::Pushq_imm32),
        "keep_all: {first:?}"
    );
    assert!(!first.iter().any(|i| i.flow_control() == FlowControl::Call), "keep_all: {first:?}");
}

/// kerf's own encoder against iced's `BlockEncoder` on whole modules (the fixture and libc,
/// every function, with the block counter): the same instructions in the same order, each
/// branch and RIP-relative operand naming the same instruction (or the same address outside
/// the cache), every block, clean point, table entry and link at the same instruction; only
/// a branch's form (short or near) may differ. And none of it left to iced's encoder.
#[test]
fn kerf_lays_out_translations_as_iceds_encoder_does() {
    let (image, analysis) = analysed();
    same_under_both_encoders("jitted", &image, &analysis);
    let libc = std::fs::read("/usr/lib/x86_64-linux-gnu/libc.so.6").expect("libc");
    let image = Image::from_elf("libc.so.6", &libc).unwrap();
    let analysis = kerf_analysis::analyze(&image, &kerf_analysis::Quiet);
    same_under_both_encoders("libc.so.6", &image, &analysis);
    assert_eq!(kerf_jit::x86_64::encode::iced_fallbacks(), 0, "a translation needed iced's");
}

fn same_under_both_encoders(name: &str, image: &Image<'_>, analysis: &kerf_analysis::Analysis) {
    let cfg = &analysis.cfg;
    let roots: HashSet<u64> = cfg.functions.first().map(|f| f.entry.0).into_iter().collect();
    let l = Layout { room: 1 << 26, ..layout(Some(MAILBOX)) };
    let plugin = Counter { edges: true };
    let translate =
        |iced: bool| translate_every(name, image, cfg, &roots, (0, 48, iced), &l, &plugin);
    let (kerf, iced) = (translate(false), translate(true));
    let decode = |t: &kerf_jit::Translation| -> Vec<iced_x86::Instruction> {
        Decoder::with_ip(64, &t.code, t.at, DecoderOptions::NONE).iter().collect()
    };
    let (a, b) = (decode(&kerf), decode(&iced));
    if let Some(k) = a.iter().zip(&b).position(|(x, y)| x.mnemonic() != y.mnemonic()) {
        panic!(
            "{name}: {:?}\n against {:?}",
            &a[k.saturating_sub(3)..k + 4],
            &b[k.saturating_sub(3)..k + 4]
        );
    }
    assert_eq!(
        a.len(),
        b.len(),
        "{name}: instructions {:?}\n against {:?}",
        &a[a.len() - 5..],
        &b[b.len() - 5..]
    );
    assert!(a.iter().all(|i| !i.is_invalid()), "{name}: kerf's cache decodes");
    let index = |v: &[iced_x86::Instruction]| -> BTreeMap<u64, usize> {
        v.iter().enumerate().map(|(k, i)| (i.ip(), k)).collect()
    };
    let (ka, kb) = (index(&a), index(&b));
    let inside =
        |t: &kerf_jit::Translation, x: u64| (t.at..t.at + t.code.len() as u64).contains(&x);
    // Where `x` (in kerf's cache or out of it) and `y` (in iced's) are the same place.
    let same = |x: u64, y: u64| match (inside(&kerf, x), inside(&iced, y)) {
        (true, true) => ka.contains_key(&x) && ka.get(&x) == kb.get(&y),
        (false, false) => x == y,
        _ => false,
    };
    let mut shorter = 0;
    // Bytes of original encodings kerf kept beyond iced's shorter ones.
    let mut kept_longer = 0;
    for (x, y) in a.iter().zip(&b) {
        let what = format!("{name}: {:#x} {x:?} against {:#x} {y:?}", x.ip(), y.ip());
        if x.op0_kind() == OpKind::NearBranch64 {
            assert_eq!(x.mnemonic(), y.mnemonic(), "{what}");
            assert!(same(x.near_branch_target(), y.near_branch_target()), "{what}");
            shorter += (x.len() < y.len()) as usize;
        } else if x.is_ip_rel_memory_operand() {
            assert!(same(x.ip_rel_memory_address(), y.ip_rel_memory_address()), "{what}");
            let (mut x, mut y) = (*x, *y);
            x.set_memory_displacement64(0);
            y.set_memory_displacement64(0);
            assert_eq!(x, y, "{what}");
        } else if x.code() == iced_x86::Code::Mov_rm64_imm32
            && inside(&kerf, x.immediate32to64() as u64)
        {
            // A label's address stored as an immediate (`encode::store_label`): the same place.
            let (a, b) = (x.immediate32to64() as u64, y.immediate32to64() as u64);
            assert!(same(a, b) && x.code() == y.code(), "{what}");
        } else {
            let bytes = |t: &kerf_jit::Translation, i: &iced_x86::Instruction| {
                let o = (i.ip() - t.at) as usize;
                t.code[o..o + i.len()].to_vec()
            };
            // kerf keeps the bytes of an instruction it copies unchanged, iced encodes it
            // again (its prefixes in an order of its own): the same instruction.
            let text = |i: &iced_x86::Instruction| {
                let mut out = String::new();
                iced_x86::Formatter::format(&mut iced_x86::IntelFormatter::new(), i, &mut out);
                out
            };
            if bytes(&kerf, x) != bytes(&iced, y) {
                assert_eq!(text(x), text(y), "{what}");
                kept_longer += x.len().saturating_sub(y.len());
            }
        }
    }
    assert_eq!(kerf.blocks.len(), iced.blocks.len());
    for (x, y) in kerf.blocks.iter().zip(&iced.blocks) {
        assert!(x.start == y.start && same(x.cache, y.cache), "{name}: block {:#x}", x.start);
    }
    // iced's gives no offset for a branch it rewrote into a longer sequence (a copied
    // `jrcxz` or `loop` whose target is out of a rel8's reach: it, a short `jmp` over the
    // next, a near `jmp` to the target), so its clean point is lost; kerf's keeps it.
    let at = |c: &BTreeMap<u64, u64>, k: &BTreeMap<u64, usize>| -> BTreeSet<(usize, u64)> {
        c.iter().map(|(c, o)| (k[c], *o)).collect()
    };
    let (ca, cb) = (at(&kerf.clean, &ka), at(&iced.clean, &kb));
    assert!(cb.is_subset(&ca), "{name}: a clean point of iced's layout is not kerf's");
    for &(k, o) in ca.difference(&cb) {
        let long = matches!(a[k].mnemonic(), Mnemonic::Jrcxz | Mnemonic::Loop)
            && a[k + 1].mnemonic() == Mnemonic::Jmp
            && a[k + 1].near_branch_target() == a[k + 3].ip();
        assert!(long, "{name}: clean point for {o:#x} only kerf's: {:?}", a[k]);
    }
    assert_eq!(kerf.entries.len(), iced.entries.len());
    for (x, y) in kerf.entries.iter().zip(&iced.entries) {
        assert!(x.orig == y.orig && same(x.entry, y.entry) && same(x.cont, y.cont), "{name}");
    }
    assert_eq!(kerf.links.len(), iced.links.len());
    for (x, y) in kerf.links.iter().zip(&iced.links) {
        assert!(same(x.slow, y.slow) && x.jump.is_some() == y.jump.is_some(), "{name}: link");
    }
    assert!(same(kerf.miss, iced.miss) && same(kerf.blocks_end, iced.blocks_end));
    assert!(
        kerf.code.len() <= iced.code.len() + kept_longer,
        "{name}: {} bytes against iced's {} ({kept_longer} of original encodings kept)",
        kerf.code.len(),
        iced.code.len()
    );
    eprintln!(
        "{name}: {} instructions, {} bytes (iced's {}), {shorter} branches shorter",
        a.len(),
        kerf.code.len(),
        iced.code.len()
    );
}

/// A call's stub writes a return address above 2 GiB (the fixture loaded high, as a PIE is)
/// through a register dead where the callee begins, when there is one: `movabs r, ret; mov
/// [rsp], r; jmp callee`; otherwise through `r11` kept in the red zone meanwhile.
#[test]
fn call_stubs_write_high_return_addresses_through_a_register_dead_in_the_callee() {
    const BIAS: u64 = 0x5555_0000_0000;
    let (image, analysis) = analysed();
    let cfg = &analysis.cfg;
    let work = cfg.functions_named("work").next().expect("work");
    let roots: HashSet<u64> = [cfg.function(work).entry.0 + BIAS].into();
    let l = Layout { code: BIAS + CODE, data: BIAS + DATA, ..layout(Some(MAILBOX)) };
    let plugin = Counter { edges: false };
    let t = translate_every("jitted", &image, cfg, &roots, (BIAS, 0, false), &l, &plugin);
    let d: Vec<iced_x86::Instruction> =
        Decoder::with_ip(64, &t.code, t.at, DecoderOptions::NONE).iter().collect();
    let block_at: BTreeMap<u64, u64> = t.blocks.iter().map(|b| (b.cache, b.start)).collect();
    let (mut short, mut kept, mut indirect) = (0, 0, 0);
    for w in d.windows(3) {
        let [load, store, jmp] = w else { unreachable!() };
        let stub = load.code() == iced_x86::Code::Mov_r64_imm64
            && store.code() == iced_x86::Code::Mov_rm64_r64
            && store.memory_base() == iced_x86::Register::RSP
            && store.memory_displacement64() == 0
            && store.op1_register() == load.op0_register();
        if !stub {
            continue;
        }
        // The stub without one puts `r11` back from the red zone right after the store.
        let put_back = jmp.code() == iced_x86::Code::Mov_r64_rm64
            && jmp.op0_register() == iced_x86::Register::R11
            && jmp.memory_base() == iced_x86::Register::RSP
            && jmp.memory_displacement64() as i64 == -8;
        if put_back {
            kept += 1;
            continue;
        }
        // An indirect call's stub: its frameless lookup follows, the target into `r11` or
        // the site's prediction into `r10` (`seq::fast_call`).
        let lookup = jmp.code() == iced_x86::Code::Mov_r64_rm64
            && (jmp.op0_register() == iced_x86::Register::R11
                || (jmp.op0_register() == iced_x86::Register::R10
                    && jmp.memory_base() == iced_x86::Register::RIP));
        if lookup {
            indirect += 1;
            continue;
        }
        // The callee's translation: its entry block does not read the register.
        assert_eq!(jmp.mnemonic(), Mnemonic::Jmp, "{jmp:?}");
        let Some(&orig) = block_at.get(&jmp.near_branch_target()) else { continue };
        let f = cfg.function_at(kerf_arch::ImageAddr(orig - BIAS)).unwrap();
        let live = cfg.block(cfg.function(f).entry_block).live_in;
        let r = match load.op0_register() {
            iced_x86::Register::R11 => kerf_arch::x86_64::Gpr::R11,
            iced_x86::Register::R10 => kerf_arch::x86_64::Gpr::R10,
            other => panic!("a stub took {other:?}"),
        };
        assert!(!live.contains(r), "{r:?} is live where {:#x} begins", orig - BIAS);
        short += 1;
    }
    assert!(
        short > 0,
        "no stub took a dead register ({kept} kept r11 in the red zone, {indirect} indirect)"
    );
}

/// `action_sites` finds the `rt_sigaction` whose number is set right before its `syscall`
/// (`raw_action` of tests/fixtures/action_sites.c), and neither the same bytes inside another
/// instruction's immediate (`disguised`) nor a call whose number is set further back
/// (`earlier`).
#[test]
fn action_sites_are_a_mov_of_13_right_before_a_syscall() {
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("action-sites");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/action_sites.c");
    let st = Command::new("gcc").args(["-O2", "-o"]).arg(&out).arg(&src).status().unwrap();
    assert!(st.success(), "gcc is needed (Debian package gcc)");
    let bytes = std::fs::read(&out).unwrap();
    let image = Image::from_elf("action_sites", &bytes).unwrap();
    let analysis = kerf_analysis::analyze(&image, &kerf_analysis::Quiet);
    let cfg = &analysis.cfg;
    let returns = std::sync::OnceLock::new();
    let m = Module { bias: 0x1000_0000, ..module(cfg, &image, &returns) };
    let sites = kerf_jit::action_sites(&m);
    let named = |a: u64| {
        let f = cfg.function_holding(ImageAddr(a - m.bias)).expect("in a function");
        cfg.function(f).name.clone()
    };
    assert_eq!(sites.iter().map(|&a| named(a)).collect::<Vec<_>>(), ["raw_action"], "{sites:x?}");
    // The site is the `mov eax, 13` itself.
    let (base, code) = image.code_region(ImageAddr(sites[0] - m.bias)).unwrap();
    let off = (sites[0] - m.bias - base.0) as usize;
    assert_eq!(code[off..off + 7], [0xb8, 0x0d, 0, 0, 0, 0x0f, 0x05]);
}

/// An entry a miss makes into a translated block under fewer counters counts its arrivals
/// with the plugin's side counter on the two words after the data header it is given, then
/// goes on to the block as any indirect entry; a plugin with no side counter gets none made.
#[test]
fn an_entry_made_on_demand_counts_its_arrivals() {
    use kerf_jit::translate::DATA_HEADER;
    let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
    let l = layout(None);
    let to = CODE + 0x10_0000;
    let counting = Counter { edges: true };
    let code = kerf_jit::counting_entry_stub("t", &l, &counting, &at, 0x40_1234, to).unwrap();
    let code = code.expect("a counter");
    let (mem, branch) = targets(&code, l.code);
    let (word, shared) = (DATA + DATA_HEADER, DATA + DATA_HEADER + 8);
    assert!(mem.contains(&word) && mem.contains(&shared), "{mem:x?}");
    assert!(mem.iter().all(|&a| (DATA..DATA + DATA_HEADER + 16).contains(&a)), "{mem:x?}");
    assert!(branch.contains(&to), "{branch:x?}");
    let none = Counter { edges: false };
    assert!(kerf_jit::counting_entry_stub("t", &l, &none, &at, 0x40_1234, to).unwrap().is_none());
}

/// Under fewer counters a function with an indirect jump of unknown targets (`inside_jump`)
/// counts what the lookup brings to its blocks, except at a block flow enters from outside
/// anyway (its entry, a return site): what arrives there is an unmeasured edge of the flow
/// graph, a count of it would change no count worked out, and its entry stays keyed so that
/// a frameless `ret` or an indirect call goes straight to it rather than through the framed
/// lookup.
#[test]
fn arrivals_count_only_where_the_flow_graph_needs_them() {
    let (image, analysis) = analysed();
    let cfg = &analysis.cfg;
    let returns = std::sync::OnceLock::new();
    let facts = kerf_jit::counters::module_facts(cfg, false, &[]);
    let m =
        Module { counting: Some(&facts), inside_entries: false, ..module(cfg, &image, &returns) };
    let funcs: Vec<FuncId> = (0..cfg.functions.len() as u32).map(FuncId).collect();
    let at = At::new(LiveAt::ALL, Env::User, ThreadPointer::FsSelf, 0);
    let work = cfg.functions_named("work").next().expect("work");
    let roots: HashSet<u64> = [cfg.function(work).entry.0].into();
    let reached: HashSet<FuncId> = funcs.iter().copied().collect();
    let scope = Scope { roots: &roots, reached: &reached, slots: &Default::default(), marks: None };
    let plugin = Counter { edges: true };
    let t = kerf_jit::translate("jitted", &m, &funcs, &layout(None), &plugin, &at, &scope).unwrap();
    let f = cfg.functions_named("inside_jump").next().expect("inside_jump");
    let flow = kerf_jit::counters::function_flow(&m, &facts, f).expect("a flow graph");
    assert!(flow.arrivals, "inside_jump's jump has no known targets");
    let counting: HashSet<u64> = t.arrivals.iter().map(|a| a.0).collect();
    let (mut counted, mut keyed) = (0, 0);
    for (i, start) in flow.starts.iter().enumerate() {
        let outside = flow.blocks[i].from_outside;
        assert_eq!(counting.contains(&start.0), !outside, "the block at {:#x}", start.0);
        let e = t.entries.iter().find(|e| e.orig == start.0).expect("an entry for every block");
        assert_eq!(e.keyed, outside, "the entry of {:#x}", start.0);
        counted += usize::from(!outside);
        keyed += usize::from(outside);
    }
    // (The entry; the two blocks its branch reaches.)
    assert!(counted >= 2 && keyed >= 1, "{counted} counted, {keyed} keyed");
}
