//! `validate` on real libraries: a fresh analysis passes (else every cache read would be
//! rejected), and each kind of poisoning a cache file could carry is caught: a block start
//! moved into an instruction, a block cut short, liveness, padding, a jump-table entry, a
//! function entry, an index out of range, an edge dropped with liveness solved again to
//! match, a function said to return through its caller's slot that does not, or through its
//! parents' as a part split off them. And the same
//! checks at the point of use (`Checker`): a function is trusted only with every function
//! its liveness rests on, and padding run by run.
//!
//! Needs the libraries (libc6, libstdc++6, libllvm14); a missing one fails the test with the
//! package to install.

use kerf_analysis::cfg::{BlockId, EdgeKind, EdgeTarget, FuncId, Terminator};
use kerf_analysis::image::Image;
use kerf_analysis::validate::{validate, Checker, Invalid};
use kerf_analysis::{analyze, Analysis, Quiet};
use kerf_arch::ImageAddr;
use std::time::Instant;

const LIBDIR: &str = "/usr/lib/x86_64-linux-gnu";

fn load(name: &str, package: &str) -> Vec<u8> {
    let path = format!("{LIBDIR}/{name}");
    std::fs::read(&path)
        .unwrap_or_else(|e| panic!("{path}: {e} (install the Debian package {package})"))
}

/// A fresh analysis of `name` validates; prints how long analysis and validation took.
fn fresh_passes(name: &str, package: &str) {
    let data = load(name, package);
    let image = Image::from_elf(name, &data).unwrap();
    let t = Instant::now();
    let mut a = analyze(&image, &Quiet);
    let analysed = t.elapsed();
    let t = Instant::now();
    validate(&mut a, &image).unwrap_or_else(|e| panic!("{name}: {e}"));
    eprintln!("{name}: analysis {analysed:?}, validation {:?}", t.elapsed());
}

#[test]
fn fresh_analyses_of_real_libraries_pass() {
    fresh_passes("libc.so.6", "libc6");
    fresh_passes("libstdc++.so.6", "libstdc++6");
}

#[test]
fn fresh_analysis_of_libllvm14_passes() {
    fresh_passes("libLLVM-14.so.1", "libllvm14");
}

/// libc's analysis, poisoned by `poison`, must be rejected with an error `expect` accepts.
fn poisoned(poison: impl FnOnce(&mut Analysis), expect: impl FnOnce(&Invalid) -> bool) {
    let data = load("libc.so.6", "libc6");
    let image = Image::from_elf("libc", &data).unwrap();
    let mut a = analyze(&image, &Quiet);
    poison(&mut a);
    match validate(&mut a, &image) {
        Ok(()) => panic!("a poisoned analysis passed"),
        Err(e) => assert!(expect(&e), "unexpected rejection: {e}"),
    }
}

/// A function of libc with at least `n` blocks.
fn some_function(a: &Analysis, n: usize) -> FuncId {
    (0..a.cfg.functions.len() as u32)
        .map(FuncId)
        .find(|f| a.cfg.blocks_of(*f).len() >= n)
        .expect("a function with enough blocks")
}

#[test]
fn a_block_start_moved_into_an_instruction_is_caught() {
    // What the issue saw: one u64 changed, and kerf spliced inside an instruction.
    poisoned(
        |a| {
            let f = some_function(a, 4);
            let b = &mut a.cfg.blocks.of_mut(f)[2];
            b.start = ImageAddr(b.start.0 + 1);
        },
        |e| matches!(e, Invalid::Block { .. }),
    );
}

#[test]
fn a_block_cut_short_is_caught() {
    poisoned(
        |a| {
            let f = some_function(a, 4);
            let b = a.cfg.blocks.of_mut(f).iter_mut().find(|b| b.insns > 1).expect("a long block");
            b.insns -= 1;
        },
        |e| matches!(e, Invalid::Block { .. } | Invalid::Structure(_)),
    );
}

#[test]
fn a_live_register_called_dead_is_caught() {
    poisoned(
        |a| {
            let f = some_function(a, 4);
            let b = a
                .cfg
                .blocks
                .of_mut(f)
                .iter_mut()
                .find(|b| !b.live_in.is_empty())
                .expect("a block with live registers");
            b.live_in = kerf_arch::x86_64::RegSet::EMPTY;
        },
        |e| matches!(e, Invalid::Liveness { .. }),
    );
}

/// A function of libc with a `ret` that does not leave through its caller's slot.
fn returning_elsewhere(a: &Analysis) -> FuncId {
    let returns = |f: &FuncId| a.cfg.blocks_of(*f).iter().any(|b| b.term == Terminator::Return);
    (0..a.cfg.functions.len() as u32)
        .map(FuncId)
        .find(|f| returns(f) && !a.cfg.function(*f).ret_through_slot)
        .expect("a function of libc whose returns leave through a slot it wrote")
}

#[test]
fn a_return_through_a_slot_it_wrote_called_its_callers_is_caught() {
    // The dangerous way: a function whose `ret` may leave for anywhere (glibc's `setcontext`
    // loads a stack pointer, then returns) said to return where its callers pushed, and the
    // JIT's frameless `ret` would take registers live where it really lands.
    poisoned(
        |a| {
            let f = returning_elsewhere(a);
            a.cfg.functions[f.0 as usize].ret_through_slot = true;
        },
        |e| matches!(e, Invalid::Block { detail, .. } if detail.contains("caller's slot")),
    );
}

#[test]
fn a_part_said_to_return_for_parents_it_does_not_have_is_caught() {
    // The same danger by the other door: a function whose `ret` may leave for anywhere said to
    // be a part split off other functions, returning for them (`ret_part`). Its own code
    // cannot settle that; the check over every function must.
    poisoned(
        |a| {
            let f = returning_elsewhere(a);
            let fun = &mut a.cfg.functions[f.0 as usize];
            fun.ret_through_slot = true;
            fun.ret_part = true;
        },
        |e| matches!(e, Invalid::Block { detail, .. } if detail.contains("parent's jump")),
    );
}

#[test]
fn padding_that_is_code_is_caught() {
    poisoned(
        |a| {
            // Springboard space claimed over the first bytes of a function.
            let f = &a.cfg.functions[100];
            a.cfg.padding.push(kerf_analysis::cfg::Padding { start: f.entry, len: 8 });
            a.cfg.padding.sort_by_key(|p| p.start);
        },
        |e| matches!(e, Invalid::Padding),
    );
}

#[test]
fn a_jump_table_entry_changed_is_caught() {
    poisoned(
        |a| {
            // (A table whose second and third entries differ: the change must change it.)
            let t = (a.cfg.jump_tables.iter_mut())
                .find(|t| t.targets.len() > 2 && t.targets[1] != t.targets[2])
                .expect("a table");
            t.targets[1] = t.targets[2];
        },
        |e| matches!(e, Invalid::JumpTable { .. } | Invalid::Block { .. }),
    );
}

#[test]
fn a_terminator_that_lies_is_caught() {
    poisoned(
        |a| {
            let f = (0..a.cfg.functions.len() as u32)
                .map(FuncId)
                .find(|f| a.cfg.blocks_of(*f).iter().any(|b| b.term == Terminator::CondJump))
                .expect("a conditional branch");
            let b = a.cfg.blocks.of_mut(f).iter_mut().find(|b| b.term == Terminator::CondJump);
            b.expect("found above").term = Terminator::Return;
        },
        |e| matches!(e, Invalid::Block { .. }),
    );
}

#[test]
fn an_entry_block_elsewhere_is_caught() {
    poisoned(
        |a| {
            let f = some_function(a, 4);
            a.cfg.functions[f.0 as usize].entry_block = BlockId(u32::MAX);
        },
        |e| matches!(e, Invalid::Structure(_)),
    );
}

#[test]
fn a_function_entry_moved_is_caught() {
    poisoned(
        |a| {
            let f = some_function(a, 4);
            let fun = &mut a.cfg.functions[f.0 as usize];
            fun.entry = ImageAddr(fun.entry.0 + 1);
        },
        |e| matches!(e, Invalid::Structure(_) | Invalid::Block { .. }),
    );
}

/// Drop the edges of a block of libc chosen by `pick` (`keep` says which of its edges stay, as
/// a range relative to its first), then solve liveness again from the changed CFG, so that
/// the stored sets agree with it: what a writer of the cache who knows kerf could make.
fn drop_edges_and_resolve(
    a: &mut Analysis,
    pick: impl Fn(&Analysis, &kerf_analysis::cfg::Block) -> bool,
    keep: impl Fn(std::ops::Range<u32>) -> std::ops::Range<u32>,
) {
    let f = (0..a.cfg.functions.len() as u32)
        .map(FuncId)
        .find(|f| a.cfg.blocks_of(*f).iter().any(|b| pick(a, b)))
        .expect("a block to poison");
    let i = a.cfg.blocks_of(f).iter().position(|b| pick(a, b)).expect("found above");
    let b = &mut a.cfg.blocks.of_mut(f)[i];
    b.edges = keep(b.edges.clone());
    kerf_analysis::liveness::solve(&mut a.cfg, &a.call_graph);
}

#[test]
fn a_return_without_its_return_edge_is_caught() {
    // Without the edge, nothing is live after the `ret`: the return value and callee-saved
    // registers would look free to generated code there.
    poisoned(
        |a| {
            drop_edges_and_resolve(
                a,
                |_, b| b.term == Terminator::Return && b.edges.len() == 1,
                |r| r.start..r.start,
            )
        },
        |e| matches!(e, Invalid::Block { .. }),
    );
}

#[test]
fn a_conditional_tail_call_without_its_edge_is_caught() {
    // `jcc other_function` whose tail-call edge is gone: what the other function reads would
    // look dead on that path.
    poisoned(
        |a| {
            drop_edges_and_resolve(
                a,
                |a, b| {
                    b.term == Terminator::CondJump
                        && a.cfg.edges_of(b).next().is_some_and(|e| e.kind == EdgeKind::TailCall)
                },
                |r| r.start + 1..r.end,
            )
        },
        |e| matches!(e, Invalid::Block { .. }),
    );
}

// The checks at the point of use (`Checker`, what splice planning runs on a cached analysis):
// the function about to be used and every function its liveness rests on, nothing else.

/// libc analysed, and a function `f` with a direct callee `g` that calls nobody (so that what
/// `f` rests on is known to include `g`), with `g` having at least two blocks.
fn caller_and_leaf(a: &Analysis) -> (FuncId, FuncId) {
    let cfg = &a.cfg;
    let calls = |f: FuncId| -> Vec<FuncId> {
        cfg.blocks_of(f)
            .iter()
            .flat_map(|b| cfg.edges_of(b))
            .filter_map(|e| match (e.kind, e.target) {
                (EdgeKind::Call | EdgeKind::TailCall, EdgeTarget::Function(g)) => Some(g),
                _ => None,
            })
            .collect()
    };
    (0..cfg.functions.len() as u32)
        .map(FuncId)
        .find_map(|f| {
            let g = *calls(f)
                .iter()
                .find(|g| **g != f && calls(**g).is_empty() && cfg.blocks_of(**g).len() >= 2)?;
            Some((f, g))
        })
        .expect("a function calling a leaf")
}

#[test]
fn a_function_is_checked_where_it_is_used_and_its_callees_with_it() {
    let data = load("libc.so.6", "libc6");
    let image = Image::from_elf("libc", &data).unwrap();
    let mut a = analyze(&image, &Quiet);
    let (f, g) = caller_and_leaf(&a);
    // A block start of the callee moved into an instruction. The caller's own blocks and
    // equations are untouched (they read only the callee's entry summary).
    let b = &mut a.cfg.blocks.of_mut(g)[1];
    b.start = ImageAddr(b.start.0 + 1);
    let c = Checker::new(&a).expect("indices still fit");
    assert!(c.code(&a, &image, f).is_ok(), "the caller's own facts are right");
    match c.function(&a, &image, f) {
        Err(Invalid::Block { function, .. }) => {
            assert_eq!(function, a.cfg.function(g).name, "rejected for the wrong function")
        }
        other => panic!("the caller was trusted with a bad callee: {other:?}"),
    }
    // A function resting on nothing bad is fine, and stays so (memoised).
    let other = (0..a.cfg.functions.len() as u32)
        .map(FuncId)
        .find(|h| *h != f && *h != g && c.function(&a, &image, *h).is_ok())
        .expect("some function that does not rest on the bad one");
    assert!(c.function(&a, &image, other).is_ok());
}

#[test]
fn a_callee_summary_that_lies_is_caught_through_its_caller() {
    let data = load("libc.so.6", "libc6");
    let image = Image::from_elf("libc", &data).unwrap();
    let mut a = analyze(&image, &Quiet);
    let (f, g) = caller_and_leaf(&a);
    // The callee claims to write every register on every path (so nothing the caller holds
    // across the call would be live before it) and to read none.
    let fun = &mut a.cfg.functions[g.0 as usize];
    fun.must_def = kerf_arch::x86_64::RegSet::ALL;
    let c = Checker::new(&a).expect("indices still fit");
    assert!(
        matches!(c.function(&a, &image, f), Err(Invalid::Liveness { .. })),
        "a caller was trusted with its callee's false summary"
    );
}

#[test]
fn padding_is_checked_run_by_run() {
    let data = load("libc.so.6", "libc6");
    let image = Image::from_elf("libc", &data).unwrap();
    let mut a = analyze(&image, &Quiet);
    let good = a.cfg.padding.len() / 2;
    // A run made longer: it now starts inside the previous function's code.
    let p = &mut a.cfg.padding[good + 1];
    p.start = ImageAddr(p.start.0 - 4);
    p.len += 4;
    let c = Checker::new(&a).expect("indices still fit");
    assert!(c.padding(&a, &image, good).is_ok());
    assert_eq!(c.padding(&a, &image, good + 1), Err(Invalid::Padding));
}

#[test]
fn a_block_without_its_fall_through_edge_is_caught() {
    // A block that runs on into the next one, its edge gone: what the next block reads would
    // look dead at its end.
    poisoned(
        |a| {
            drop_edges_and_resolve(
                a,
                |a, b| {
                    b.term == Terminator::FallThrough
                        && a.cfg.edges_of(b).all(|e| e.kind == EdgeKind::FallThrough)
                        && b.edges.len() == 1
                },
                |r| r.start..r.start,
            )
        },
        |e| matches!(e, Invalid::Block { detail, .. } if detail.contains("fallthrough edge")),
    );
}

/// Hand-written assembly (libsodium's, libx264's, libdav1d's): a routine (found by a call,
/// with no symbol) whose conditional branch, not taken, falls into the entry of another
/// routine that a jump from a third reaches, so analysis finds that entry after it built the
/// first routine (whose blocks then hold the second's code too, reached by a fall-through). A fresh analysis of it passes its
/// check; before, every cache entry of such a library was rejected as "a fallthrough edge
/// ... it cannot take", analysed again, and rejected again at the next read.
#[test]
fn a_fall_through_onto_an_entry_found_later_passes() {
    let base = 0x1000u64;
    #[rustfmt::skip]
    let code: Vec<u8> = vec![
        // first (0x1000): cmp rdi, 0; jbe out (0x100e); then on into `second`.
        0x48, 0x83, 0xff, 0x00,       // cmp rdi, 0
        0x0f, 0x86, 0x04, 0x00, 0x00, 0x00, // jbe 0x100e
        // second (0x100a), a function only as the target of `third`'s jump:
        0x48, 0x89, 0xf8,             // mov rax, rdi
        0xc3,                         // ret
        // out (0x100e):
        0x31, 0xc0,                   // xor eax, eax
        0xc3,                         // ret
        // third (0x1011): call first; jmp second
        0xe8, 0xea, 0xff, 0xff, 0xff, // call 0x1000
        0xeb, 0xf2,                   // jmp 0x100a
    ];
    let mut image = Image::raw("asm", &code, ImageAddr(base));
    let symbols = format!("{:016x} {:016x} T third\n", base + 0x11, 7);
    assert_eq!(image.add_symbol_file(&symbols), Ok(1));
    let mut a = analyze(&image, &Quiet);
    let second = a.cfg.function_at(ImageAddr(base + 0xa));
    assert!(
        second.is_some_and(|f| a.cfg.function(f).entry.0 == base + 0xa),
        "the jump's target is a function of its own"
    );
    validate(&mut a, &image).unwrap_or_else(|e| panic!("{e}"));
}
