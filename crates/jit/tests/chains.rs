//! A chained `ret` whose two registers are live where it returns ([`chained_ret_saved`]) runs
//! in this process: while the return slot holds the caller's original return address it
//! returns to that caller's continuation, and otherwise it goes on to what follows it; either
//! way the register it takes (`r11`) comes through as it was. Both forms: the original address
//! as a 32-bit immediate, and one that needs 64 bits (held in the register for the compare, put
//! back when the compare fails); and each with the code below 2 GiB, where the continuation
//! goes into the slot as an immediate (`encode::store_label`), and above.

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
fn harness(orig: u64, low: bool) -> Vec<Instruction> {
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
    v.extend(chained_ret_saved(orig, R11, (CONT, low), 0, (NEXT, MISS)));
    v.extend([
        labelled(op(Instruction::with2(Code::Mov_r32_imm32, EAX, 2)), NEXT),
        op(Instruction::with2(Code::Lea_r64_m, RSP, at(RSP, 8))),
        op(Instruction::with_branch(Code::Jmp_rel32_64, CONT)),
    ]);
    v
}

/// `H` laid out in an executable mapping (below 2 GiB with `low`), called with return slot
/// `slot`: `rax` and `r11` at `CONT`.
fn run(orig: u64, slot: u64, low: bool) -> (u64, u64) {
    let len = 4096;
    let map = Mapping::new(low.then_some(0x3100_0000), len, true);
    let code = map.addr();
    assert_eq!(code < 1 << 31, low, "{code:#x}");
    let insns = harness(orig, low);
    let laid = encode::lay_out(&insns, code).unwrap();
    // Laid out alike by iced's encoder (which takes the label's store as the real one).
    assert_eq!(laid.code, encode::lay_out_iced(&insns, code).unwrap().code);
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
        for low in [false, true] {
            assert_eq!(run(orig, orig, low), (1, KEPT), "{orig:#x} {low}: the caller's address");
            assert_eq!(run(orig, orig + 1, low), (2, KEPT), "{orig:#x} {low}: another address");
        }
    }
}

#[test]
fn a_label_as_an_immediate_needs_the_label_below_2_gib() {
    let v = [encode::store_label(CONT), labelled(Instruction::with(Code::Retnq), CONT)];
    let low = encode::lay_out(&v, 0x3100_0000).unwrap();
    // `mov qword [rsp], 0x31000008`, then the `ret` it names.
    assert_eq!(low.code, [0x48, 0xc7, 0x04, 0x24, 0x08, 0x00, 0x00, 0x31, 0xc3]);
    assert_eq!(encode::lay_out_iced(&v, 0x3100_0000).unwrap().code, low.code);
    let high = encode::lay_out(&v, 0x7fff_fff8);
    assert_eq!(high.unwrap_err(), encode::EncodeError::FarLabel(0x8000_0000));
    let nowhere = [encode::store_label(CONT), Instruction::with(Code::Retnq)];
    assert_eq!(
        encode::lay_out(&nowhere, 0x3100_0000).unwrap_err(),
        encode::EncodeError::FarLabel(CONT)
    );
}
