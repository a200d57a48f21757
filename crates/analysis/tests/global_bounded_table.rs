//! A switch on a global compared in memory and then loaded (`cmp dword [rip+G], 3; ja
//! default; mov eax, [rip+G]`, then a PC-relative table: GNU tar's `main` switches on its
//! subcommand so, and was unanalysable, so `kerf jit main` refused it as a root). The compare
//! bounds the global while nothing may write memory: then the loaded index is bounded by it
//! and the table's 4 entries are read. A store in between (it may alias the global), or a load
//! of another global, leaves the jump unanalysable.

mod common;

use kerf_analysis::cfg::{TableFormat, Terminator};
use kerf_arch::ImageAddr;

const BASE: u64 = 0x1000;
const TABLE: u64 = 0x1040;
/// The compared global, after the table.
const G: u64 = 0x1050;
const OTHER: u64 = 0x1058;

/// How the run between the compare and the load goes.
#[derive(Clone, Copy, PartialEq)]
enum Between {
    Nothing,
    /// `mov byte [rdi], 0`: may write the global.
    Store,
    /// The load reads another global.
    OtherGlobal,
}

/// `run` at 0x1000, handlers at 0x1026, 0x102c, 0x1032 and 0x1038 (eax = 10..13), the table
/// at 0x1040, the globals after it, then words that are no code offsets.
fn image_bytes(between: Between) -> Vec<u8> {
    let mut code = vec![0x41u8; 0x40 + 4 * 256];
    let mut put = |at: u64, bytes: &[u8]| {
        let o = (at - BASE) as usize;
        code[o..o + bytes.len()].copy_from_slice(bytes);
    };
    let rel = |to: u64, next: u64| ((to as i64 - next as i64) as i32).to_le_bytes();
    // cmp dword [rip+G], 3
    put(0x1000, &[0x83, 0x3d]);
    put(0x1002, &rel(G, 0x1007));
    put(0x1006, &[0x03]);
    put(0x1007, &[0x77, 0x19]); // ja 0x1022
    match between {
        Between::Store => put(0x1009, &[0xc6, 0x07, 0x00]), // mov byte [rdi], 0
        _ => put(0x1009, &[0x0f, 0x1f, 0x00]),              // nop
    }
    // mov eax, [rip+G] (or the other global)
    put(0x100c, &[0x8b, 0x05]);
    let loaded = if between == Between::OtherGlobal { OTHER } else { G };
    put(0x100e, &rel(loaded, 0x1012));
    put(0x1012, &[0x4c, 0x8d, 0x05]); // lea r8, [rip+TABLE]
    put(0x1015, &rel(TABLE, 0x1019));
    put(0x1019, &[0x49, 0x63, 0x04, 0x80]); // movsxd rax, [r8+rax*4]
    put(0x101d, &[0x4c, 0x01, 0xc0]); // add rax, r8
    put(0x1020, &[0xff, 0xe0]); // jmp rax
    put(0x1022, &[0x31, 0xc0, 0xc3, 0x90]); // xor eax, eax; ret; nop
    for (k, at) in [0x1026u64, 0x102c, 0x1032, 0x1038].into_iter().enumerate() {
        put(at, &[0xb8, 10 + k as u8, 0, 0, 0, 0xc3]); // mov eax, 10+k; ret
        put(TABLE + 4 * k as u64, &rel(at, TABLE));
    }
    put(0x103e, &[0x66, 0x90]); // padding
    put(G, &2u64.to_le_bytes());
    put(OTHER, &2u64.to_le_bytes());
    code
}

fn analysed(between: Between) -> kerf_analysis::Analysis {
    common::analysed_run(&image_bytes(between), BASE, 0x3e)
}

#[test]
fn a_global_compared_in_memory_bounds_the_index_loaded_from_it() {
    let a = analysed(Between::Nothing);
    let t = a.cfg.jump_tables.first().expect("the switch's table is resolved");
    assert_eq!(t.format, TableFormat::Relative32 { base: ImageAddr(TABLE) });
    assert_eq!(t.table.0, TABLE);
    assert_eq!(t.targets.len(), 4);
    let starts: Vec<u64> = a.cfg.blocks.iter().map(|b| b.start.0).collect();
    for h in [0x1026, 0x102c, 0x1032, 0x1038] {
        assert!(starts.contains(&h), "no block at {h:#x}: {starts:x?}");
    }
    assert!(a.cfg.blocks.iter().all(|b| b.term != Terminator::Unanalysable));
}

#[test]
fn a_store_between_or_another_global_loaded_bounds_nothing() {
    for between in [Between::Store, Between::OtherGlobal] {
        let a = analysed(between);
        assert!(a.cfg.jump_tables.is_empty(), "{:?}", a.cfg.jump_tables);
        assert!(a.cfg.blocks.iter().any(|b| b.term == Terminator::Unanalysable));
    }
}
