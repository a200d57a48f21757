//! A switch in a loop whose table base lives in a register set before the loop, and set
//! again, to something else, on the way out of it (gzip's and coreutils `echo`'s `main`: the
//! base in `rbx` or `r12`, reused after the option loop). The function defines the register
//! twice, so "the one `lea` that defines it" finds none; what reaches the dispatch along every
//! path is the one before the loop, and the table is read. Where a case sets the register to
//! something else before it goes round again, the base no longer holds on every path once
//! the cases are decoded, and the jump stays unanalysable.

mod common;

use kerf_analysis::cfg::{TableFormat, Terminator};

const BASE: u64 = 0x1000;
const TABLE: u64 = 0x1080;
const OTHER: u64 = 0x1090;
/// The cases' starts.
const CASES: [u64; 4] = [0x1034, 0x1038, 0x103d, 0x1042];

/// `run`: `rbx` = the table before the loop; the loop reads an index, bounds it (`cmp eax, 3;
/// ja done`) and dispatches through the table of 32-bit offsets from `rbx`; each case adds to
/// `esi` and goes round again; `done` sets `rbx` to another address. With `clobbering`, the
/// last case sets `rbx` to that address too before going round.
fn image_bytes(clobbering: bool) -> Vec<u8> {
    let mut code = vec![0xcc; 0xa0];
    let mut put = |at: u64, bytes: &[u8]| {
        let o = (at - BASE) as usize;
        code[o..o + bytes.len()].copy_from_slice(bytes);
    };
    let rel32 = |to: u64, next: u64| ((to as i64 - next as i64) as i32).to_le_bytes();
    put(0x1000, &[0x48, 0x8d, 0x1d]); // lea rbx, [rip + TABLE]
    put(0x1003, &rel32(TABLE, 0x1007));
    put(0x1007, &[0xeb, 0x17]); // jmp head
    put(0x1020, &[0x8b, 0x07]); // head: mov eax, [rdi]
    put(0x1022, &[0x48, 0x83, 0xc7, 0x04]); // add rdi, 4
    put(0x1026, &[0x83, 0xf8, 0x03]); // cmp eax, 3
    put(0x1029, &[0x77, 0x20]); // ja done
    put(0x102b, &[0x48, 0x63, 0x04, 0x83]); // movsxd rax, [rbx + rax*4]
    put(0x102f, &[0x48, 0x01, 0xd8]); // add rax, rbx
    put(0x1032, &[0xff, 0xe0]); // jmp rax
    put(0x1034, &[0xff, 0xc6, 0xeb, 0xe8]); // inc esi; jmp head
    put(0x1038, &[0x83, 0xc6, 0x02, 0xeb, 0xe3]); // add esi, 2; jmp head
    put(0x103d, &[0x83, 0xc6, 0x03, 0xeb, 0xde]); // add esi, 3; jmp head
    if clobbering {
        put(0x1042, &[0x48, 0x8d, 0x1d]); // lea rbx, [rip + OTHER]
        put(0x1045, &rel32(OTHER, 0x1049));
    } else {
        put(0x1042, &[0x83, 0xc6, 0x04, 0x90, 0x90, 0x90, 0x90]); // add esi, 4; nop x4
    }
    put(0x1049, &[0xeb, 0xd5]); // jmp head
    put(0x104b, &[0x48, 0x8d, 0x1d]); // done: lea rbx, [rip + OTHER]
    put(0x104e, &rel32(OTHER, 0x1052));
    put(0x1052, &[0x8b, 0x03, 0x01, 0xf0, 0xc3]); // mov eax, [rbx]; add eax, esi; ret
    for (k, case) in CASES.iter().enumerate() {
        put(TABLE + 4 * k as u64, &((*case as i64 - TABLE as i64) as i32).to_le_bytes());
    }
    put(OTHER, &7u64.to_le_bytes());
    code
}

#[test]
fn a_base_set_before_the_loop_and_again_after_it_is_the_one_the_dispatch_reads() {
    let a = common::analysed_run(&image_bytes(false), BASE, 0x57);
    let t = a.cfg.jump_tables.first().expect("the dispatch's table is resolved");
    assert_eq!(t.table.0, TABLE);
    assert!(matches!(t.format, TableFormat::Relative32 { .. }), "{:?}", t.format);
    let targets: Vec<u64> = t.targets.iter().map(|x| x.0).collect();
    assert_eq!(targets, CASES);
    assert!(a.cfg.blocks.iter().all(|b| b.term != Terminator::Unanalysable));
}

#[test]
fn a_case_that_sets_the_base_to_something_else_leaves_the_jump_unanalysable() {
    let a = common::analysed_run(&image_bytes(true), BASE, 0x57);
    assert!(a.cfg.jump_tables.is_empty(), "{:?}", a.cfg.jump_tables);
    assert!(a.cfg.blocks.iter().any(|b| b.term == Terminator::Unanalysable));
}
