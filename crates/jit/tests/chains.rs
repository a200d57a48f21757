//! A chained `ret` whose two registers are live where it returns ([`chained_ret_saved`]) runs
//! in this process: while the return slot holds the caller's original return address it
//! returns to that caller's continuation, and otherwise it goes on to what follows it; either
//! way the register it takes (`r11`) comes through as it was. Both forms: the original address
//! as a 32-bit immediate, and one that needs 64 bits (held in the register for the compare, put
//! back when the compare fails).

use iced_x86::{Code, Instruction, Register};
use kerf_jit::x86_64::{chained_ret_saved, encode};
use std::arch::asm;

mod common;
use common::{at, labelled, op, Mapping};

/// Labels: non-canonical addresses, as the translator's.
const L: u64 = 0x8000_0000_0000_0000;
const H: u64 = L + 1;
const CONT: u64 = L + 2;
const STUB: u64 = L + 3;
const CALLEE: u64 = L + 4;
const NEXT: u64 = L + 5;
const MISS: u64 = L + 6;

/// What the callee leaves in `r11` for the `ret` to keep.
const KEPT: u64 = 0x1234_5678_9abc_def0;

/// `H(slot, out)`: calls `STUB`, which writes `slot` over the return address it was called
/// with (as kerf's call stubs write the original one) and jumps to `CALLEE`. The callee sets
/// `eax` 1 and `r11` to [`KEPT`], then the chained `ret` for `orig`; what follows it (a miss)
/// sets `eax` 2 and goes back to `CONT` by a jump. At `CONT`, `H` stores `rax` and `r11` in
/// `out[0..2]`.
fn harness(orig: u64) -> Vec<Instruction> {
    use Register::*;
    let mut v = vec![
        labelled(op(Instruction::with1(Code::Push_r64, RBX)), H),
        op(Instruction::with2(Code::Mov_r64_rm64, RBX, RSI)),
        op(Instruction::with_branch(Code::Call_rel32_64, STUB)),
        labelled(op(Instruction::with2(Code::Mov_rm64_r64, at(RBX, 0), RAX)), CONT),
        op(Instruction::with2(Code::Mov_rm64_r64, at(RBX, 8), R11)),
        op(Instruction::with1(Code::Pop_r64, RBX)),
        Instruction::with(Code::Retnq),
        labelled(op(Instruction::with2(Code::Mov_rm64_r64, at(RSP, 0), RDI)), STUB),
        op(Instruction::with_branch(Code::Jmp_rel32_64, CALLEE)),
        labelled(op(Instruction::with2(Code::Mov_r32_imm32, EAX, 1)), CALLEE),
        op(Instruction::with2(Code::Mov_r64_imm64, R11, KEPT)),
    ];
    v.extend(chained_ret_saved(orig, R11, CONT, 0, (NEXT, MISS)));
    v.extend([
        labelled(op(Instruction::with2(Code::Mov_r32_imm32, EAX, 2)), NEXT),
        op(Instruction::with2(Code::Lea_r64_m, RSP, at(RSP, 8))),
        op(Instruction::with_branch(Code::Jmp_rel32_64, CONT)),
    ]);
    v
}

/// `H` laid out in an executable mapping, called with return slot `slot`:
/// `rax` and `r11` at `CONT`.
fn run(orig: u64, slot: u64) -> (u64, u64) {
    let len = 4096;
    let map = Mapping::new(None, len, true);
    let code = map.addr();
    let laid = encode::lay_out(&harness(orig), code).unwrap();
    assert!(laid.code.len() <= len);
    // SAFETY: the laid-out bytes fit the mapping, which nothing else uses.
    unsafe { std::ptr::copy_nonoverlapping(laid.code.as_ptr(), code as *mut u8, laid.code.len()) };
    let mut out = [0u64; 2];
    // SAFETY: `H` is the harness's first instruction: it calls the stub, writes `out` through
    // `rsi` and keeps `rbx`; it clobbers what a call may (and `r11`), and its callee uses the
    // stack below `rsp` (no `nostack`).
    unsafe {
        asm!(
            "call {h}",
            h = in(reg) code,
            in("rdi") slot,
            in("rsi") out.as_mut_ptr(),
            clobber_abi("sysv64"),
        );
    }
    (out[0], out[1])
}

#[test]
fn a_chained_ret_that_keeps_its_register_returns_only_for_its_caller() {
    // 32 bits (below 2 GiB, as a non-PIE executable's return addresses) and 64.
    for orig in [0x52_ebe6u64, 0x7f12_3456_7890] {
        assert_eq!(run(orig, orig), (1, KEPT), "{orig:#x}: the caller's address");
        assert_eq!(run(orig, orig + 1), (2, KEPT), "{orig:#x}: another address");
    }
}
