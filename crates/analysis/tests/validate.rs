//! `validate` on real libraries: a fresh analysis passes (else every cache read would be
//! rejected), and each kind of poisoning a cache file could carry is caught: a block start
//! moved into an instruction, a block cut short, liveness, padding, a jump-table entry, a
//! function entry, an index out of range.
//!
//! Needs the libraries (libc6, libstdc++6, libllvm14); a missing one fails the test with the
//! package to install.

use kerf_analysis::cfg::{BlockId, FuncId, Terminator};
use kerf_analysis::image::Image;
use kerf_analysis::validate::{validate, Invalid};
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
            let t = a.cfg.jump_tables.iter_mut().find(|t| t.targets.len() > 2).expect("a table");
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
