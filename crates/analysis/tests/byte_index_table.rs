//! An interpreter's dispatch on an opcode byte (`movzx eax, byte [rdi]; mov rax,
//! [T+rax*8]; jmp rax`, CPython 3.11's computed goto in Debian's non-PIE build) has no
//! compare to bound its index, but a zero-extended byte is at most 255: the table's 256
//! entries are read and the handlers become blocks. A 32-bit load in its place bounds
//! nothing, and the jump stays unanalysable.

mod common;

use kerf_analysis::cfg::{TableFormat, Terminator};

const BASE: u64 = 0x1000;
const TABLE: u64 = 0x1100;

/// `run` at 0x1000 (dispatch; `byte`: the index is a zero-extended byte, else a 32-bit load),
/// handlers at 0x100d and 0x1013, and the 256-entry table at 0x1100.
fn image_bytes(byte: bool) -> Vec<u8> {
    let mut code = vec![0xcc; 0x100 + 8 * 256];
    let mut put = |at: u64, bytes: &[u8]| {
        let o = (at - BASE) as usize;
        code[o..o + bytes.len()].copy_from_slice(bytes);
    };
    if byte {
        put(0x1000, &[0x0f, 0xb6, 0x07]); // movzx eax, byte [rdi]
    } else {
        put(0x1000, &[0x8b, 0x07, 0x90]); // mov eax, [rdi]; nop
    }
    put(0x1003, &[0x48, 0x8b, 0x04, 0xc5]); // mov rax, [rax*8 + TABLE]
    put(0x1007, &(TABLE as u32).to_le_bytes());
    put(0x100b, &[0xff, 0xe0]); // jmp rax
    put(0x100d, &[0xb8, 1, 0, 0, 0, 0xc3]); // mov eax, 1; ret
    put(0x1013, &[0xb8, 2, 0, 0, 0, 0xc3]); // mov eax, 2; ret
    for k in 0..256u64 {
        let target = if k % 2 == 0 { 0x100du64 } else { 0x1013 };
        put(TABLE + 8 * k, &target.to_le_bytes());
    }
    code
}

fn analysed(byte: bool) -> kerf_analysis::Analysis {
    common::analysed_run(&image_bytes(byte), BASE, 0x19)
}

#[test]
fn a_zero_extended_byte_bounds_a_table_of_256_entries() {
    let a = analysed(true);
    let t = a.cfg.jump_tables.first().expect("the dispatch's table is resolved");
    assert_eq!(t.format, TableFormat::Absolute64);
    assert_eq!(t.table.0, TABLE);
    assert_eq!(t.targets.len(), 256);
    let starts: Vec<u64> = a.cfg.blocks.iter().map(|b| b.start.0).collect();
    assert!(starts.contains(&0x100d) && starts.contains(&0x1013), "blocks {starts:x?}");
    assert!(a.cfg.blocks.iter().all(|b| b.term != Terminator::Unanalysable));
}

#[test]
fn a_32_bit_load_bounds_nothing() {
    let a = analysed(false);
    assert!(a.cfg.jump_tables.is_empty(), "{:?}", a.cfg.jump_tables);
    assert!(a.cfg.blocks.iter().any(|b| b.term == Terminator::Unanalysable));
}
