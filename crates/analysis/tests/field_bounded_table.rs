//! A switch on a field that is compared in memory and then loaded (`cmp byte [rsi+1], 3; ja
//! default; movzx ecx, byte [rsi+1]`, then a PC-relative table: sqlite's record comparison
//! on a record's serial type). The compare bounds the field while nothing may write memory
//! or the base register: then the loaded index is bounded by it and the table's 4 entries are
//! read. A store in between (it may alias the field) leaves the jump unanalysable; so does
//! the zero-extended byte alone here, whose 256 "entries" run into what follows the table.

mod common;

use kerf_analysis::cfg::{TableFormat, Terminator};
use kerf_arch::ImageAddr;

const BASE: u64 = 0x1000;
const TABLE: u64 = 0x1040;

/// `run` at 0x1000 (`store`: a byte store between the compare and the load), handlers at
/// 0x1020, 0x1026, 0x102c and 0x1032 (eax = 10..13), the table at 0x1040, then words that
/// are no code offsets.
fn image_bytes(store: bool) -> Vec<u8> {
    let mut code = vec![0x41u8; 0x40 + 4 * 256];
    let mut put = |at: u64, bytes: &[u8]| {
        let o = (at - BASE) as usize;
        code[o..o + bytes.len()].copy_from_slice(bytes);
    };
    put(0x1000, &[0x80, 0x7e, 0x01, 0x03]); // cmp byte [rsi+1], 3
    put(0x1004, &[0x77, 0x17]); // ja 0x101d
    if store {
        put(0x1006, &[0xc6, 0x07, 0x00]); // mov byte [rdi], 0
    } else {
        put(0x1006, &[0x0f, 0x1f, 0x00]); // nop
    }
    put(0x1009, &[0x0f, 0xb6, 0x4e, 0x01]); // movzx ecx, byte [rsi+1]
    put(0x100d, &[0x4c, 0x8d, 0x05, 0x2c, 0, 0, 0]); // lea r8, [rip+TABLE]
    put(0x1014, &[0x49, 0x63, 0x0c, 0x88]); // movsxd rcx, [r8+rcx*4]
    put(0x1018, &[0x4c, 0x01, 0xc1]); // add rcx, r8
    put(0x101b, &[0xff, 0xe1]); // jmp rcx
    put(0x101d, &[0x31, 0xc0, 0xc3]); // xor eax, eax; ret
    for (k, at) in [0x1020u64, 0x1026, 0x102c, 0x1032].into_iter().enumerate() {
        put(at, &[0xb8, 10 + k as u8, 0, 0, 0, 0xc3]); // mov eax, 10+k; ret
        put(TABLE + 4 * k as u64, &((at as i64 - TABLE as i64) as i32).to_le_bytes());
    }
    put(0x1038, &[0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0]); // padding
    code
}

fn analysed(store: bool) -> kerf_analysis::Analysis {
    common::analysed_run(&image_bytes(store), BASE, 0x38)
}

#[test]
fn a_field_compared_in_memory_bounds_the_index_loaded_from_it() {
    let a = analysed(false);
    let t = a.cfg.jump_tables.first().expect("the switch's table is resolved");
    assert_eq!(t.format, TableFormat::Relative32 { base: ImageAddr(TABLE) });
    assert_eq!(t.table.0, TABLE);
    assert_eq!(t.targets.len(), 4);
    let starts: Vec<u64> = a.cfg.blocks.iter().map(|b| b.start.0).collect();
    for h in [0x1020, 0x1026, 0x102c, 0x1032] {
        assert!(starts.contains(&h), "no block at {h:#x}: {starts:x?}");
    }
    assert!(a.cfg.blocks.iter().all(|b| b.term != Terminator::Unanalysable));
}

#[test]
fn a_store_between_the_compare_and_the_load_bounds_nothing() {
    let a = analysed(true);
    assert!(a.cfg.jump_tables.is_empty(), "{:?}", a.cfg.jump_tables);
    assert!(a.cfg.blocks.iter().any(|b| b.term == Terminator::Unanalysable));
}
