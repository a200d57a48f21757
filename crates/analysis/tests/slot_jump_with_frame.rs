//! An indirect jump through one fixed memory slot (`jmp [rip+X]`, or `mov rdx, [rip+X]; jmp
//! rdx`) is a tail call, as in a PLT stub, only with the stack pointer back at its entry
//! value. After a `push` the function still has a frame: the slot may hold one of its own
//! labels (hand-written code can), so the jump stays unanalysable, and no splice may cover
//! its instructions' insides. (The jump was once taken for a tail call whatever the stack.)

mod common;

use kerf_analysis::cfg::Terminator;

const BASE: u64 = 0x1000;
const SLOT: u64 = 0x1040;

/// `run` at 0x1000: optionally `push rbx`, then a jump through the slot at 0x1040 (through
/// `rdx`, or the memory operand itself), then `add rax, 3; (pop rbx;) ret`, the slot's label
/// (a target inside the function). Returns the bytes and the function's length.
fn image_bytes(push: bool, through_reg: bool) -> (Vec<u8>, u64) {
    let mut code: Vec<u8> = Vec::new();
    if push {
        code.push(0x53); // push rbx
    }
    let rel = |code: &Vec<u8>, len: usize| {
        (SLOT as i64 - (BASE as i64 + (code.len() + len) as i64)) as i32
    };
    if through_reg {
        let r = rel(&code, 7);
        code.extend([0x48, 0x8b, 0x15]); // mov rdx, [rip+SLOT]
        code.extend(r.to_le_bytes());
        code.extend([0xff, 0xe2]); // jmp rdx
    } else {
        let r = rel(&code, 6);
        code.extend([0xff, 0x25]); // jmp [rip+SLOT]
        code.extend(r.to_le_bytes());
    }
    let label = BASE + code.len() as u64;
    code.extend([0x48, 0x83, 0xc0, 0x03]); // add rax, 3
    if push {
        code.push(0x5b); // pop rbx
    }
    code.push(0xc3); // ret
    let len = code.len() as u64;
    code.resize((SLOT - BASE) as usize, 0xcc);
    code.extend(label.to_le_bytes());
    (code, len)
}

fn jump_terminator(push: bool, through_reg: bool) -> Terminator {
    let (code, len) = image_bytes(push, through_reg);
    let a = common::analysed_run(&code, BASE, len);
    let jumps: Vec<Terminator> = a
        .cfg
        .blocks
        .iter()
        .map(|b| b.term)
        .filter(|t| matches!(t, Terminator::IndirectTailCall | Terminator::Unanalysable))
        .collect();
    assert_eq!(jumps.len(), 1, "push {push}, through a register {through_reg}: {jumps:?}");
    jumps[0]
}

#[test]
fn a_jump_through_a_slot_is_a_tail_call_only_with_no_frame() {
    for through_reg in [false, true] {
        assert_eq!(jump_terminator(false, through_reg), Terminator::IndirectTailCall);
        assert_eq!(jump_terminator(true, through_reg), Terminator::Unanalysable);
    }
}
