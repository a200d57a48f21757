//! The outer frames' sequences run in this process: a root entered through its outer entry
//! ([`outer_entry`]) records its stack pointer, and the check before its `ret`
//! ([`outer_check`]) goes back to the caller directly only when the slot holds that same stack
//! pointer, clearing it; otherwise it goes on to the `ret`'s translation. Either way every
//! register and flag comes through as it was. Threads whose stack pointers hash alike each
//! keep a word of their own among the slot's probes. With the table below 2 GiB (its address
//! a displacement) and above (through a register), with both hashes.

use iced_x86::{Code, Instruction, Register};
use kerf_jit::table::{outer_slot, Hash, MAX_SET_BITS, MIN_SET_BITS, OUTER, OUTER_PROBES};
use kerf_jit::x86_64::{encode, outer_check, outer_entry};
use std::arch::asm;

mod common;
use common::{at, labelled, op, Mapping};

/// Labels: non-canonical addresses, as the translator's.
const L: u64 = 0x8000_0000_0000_0000;
const H: u64 = L + 1;
const STUB: u64 = L + 2;
const ROOT: u64 = L + 3;
const OUTER_PATH: u64 = L + 4;
const NORMAL: u64 = L + 5;
const TAKE: u64 = L + 6;

/// `H(target, out)`: calls `target`, then stores `rax`, `rcx`, `rdx` and the flags it came
/// back with in `out[0..4]`. `STUB`: the root's outer entry. `ROOT`: sets `rax` 1, `rcx`,
/// `rdx` and the flags (CF and SF) to a pattern, stores its stack pointer in `out[5]`, then
/// the check; its normal way on sets `rax` to 2 and returns.
fn harness(table: u64, hash: Hash) -> Vec<Instruction> {
    use Register::*;
    let mov = |r: Register, v: u32| op(Instruction::with2(Code::Mov_r32_imm32, r, v));
    let mut v = vec![
        labelled(op(Instruction::with1(Code::Push_r64, RBX)), H),
        op(Instruction::with2(Code::Mov_r64_rm64, RBX, RSI)),
        op(Instruction::with1(Code::Call_rm64, RDI)),
        op(Instruction::with2(Code::Mov_rm64_r64, at(RBX, 0), RAX)),
        op(Instruction::with2(Code::Mov_rm64_r64, at(RBX, 8), RCX)),
        op(Instruction::with2(Code::Mov_rm64_r64, at(RBX, 16), RDX)),
        Instruction::with(Code::Pushfq),
        op(Instruction::with1(Code::Pop_rm64, at(RBX, 24))),
        op(Instruction::with1(Code::Pop_r64, RBX)),
        Instruction::with(Code::Retnq),
    ];
    v.extend(outer_entry(STUB, TAKE, table, hash, ROOT));
    v.extend([
        labelled(mov(EAX, 1), ROOT),
        mov(ECX, 0x1111),
        mov(EDX, 0x2222),
        op(Instruction::with2(Code::Mov_rm64_r64, at(RSI, 40), RSP)),
        op(Instruction::with2(Code::Xor_r32_rm32, R11D, R11D)),
        op(Instruction::with2(Code::Sub_rm64_imm8, R11, 1)),
    ]);
    v.extend(outer_check(table, hash, 0, [OUTER_PATH, NORMAL]));
    v.extend([labelled(mov(EAX, 2), NORMAL), Instruction::with(Code::Retnq)]);
    v
}

/// What `H` saw: `rax`, `rcx`, `rdx`, the flags, and the root's stack pointer.
#[derive(Debug)]
struct Seen {
    rax: u64,
    rcx: u64,
    rdx: u64,
    flags: u64,
    sp: u64,
}

fn call(h: u64, target: u64) -> Seen {
    let mut out = [0u64; 6];
    // SAFETY: `h` is the harness laid out above: it calls `target` (the stub or the root,
    // which return with `ret`), writes `out` through `rsi` and keeps `rbx`; it clobbers what
    // a call may, and uses the stack below `rsp` (no `nostack`).
    unsafe {
        asm!(
            "call {h}",
            h = in(reg) h,
            in("rdi") target,
            in("rsi") out.as_mut_ptr(),
            clobber_abi("sysv64"),
        );
    }
    Seen { rax: out[0], rcx: out[1], rdx: out[2], flags: out[3], sp: out[5] }
}

/// CF and SF, as `sub` left them in the root.
const FLAGS: u64 = 0x1 | 0x80;

fn check(table: &Mapping, hash: Hash) {
    let insns = harness(table.addr(), hash);
    let code = Mapping::new(None, 1 << 16, true);
    let laid = encode::lay_out(&insns, code.addr()).unwrap();
    // SAFETY: inside the mapping, before any of it runs.
    unsafe { std::ptr::copy_nonoverlapping(laid.code.as_ptr(), code.at, laid.code.len()) };
    let addr_of = |label: u64| {
        let k = insns.iter().position(|i| i.ip() == label).unwrap();
        code.addr() + laid.offsets[k] as u64
    };
    let (h, stub, root) = (addr_of(H), addr_of(STUB), addr_of(ROOT));
    let same = |s: &Seen, rax: u64| {
        assert_eq!((s.rax, s.rcx, s.rdx), (rax, 0x1111, 0x2222), "{s:x?}");
        assert_eq!(s.flags & (FLAGS | 0x40), FLAGS, "CF and SF set, ZF clear: {s:x?}");
    };
    // Entered through the outer entry: back to the caller at once, the slot cleared.
    let s = call(h, stub);
    same(&s, 1);
    let slot = OUTER + outer_slot(hash, s.sp);
    assert_eq!(table.word(slot), 0, "cleared");
    // Entered directly, slot empty: on to the `ret`'s translation.
    let again = call(h, root);
    assert_eq!(again.sp, s.sp, "the same frame");
    same(&again, 2);
    // Another stack pointer in the slot: on too, and the slot kept.
    table.set_word(slot, s.sp + 16);
    same(&call(h, root), 2);
    assert_eq!(table.word(slot), s.sp + 16, "kept");
    // This stack pointer in the slot (a call from the original code): back at once.
    table.set_word(slot, s.sp);
    same(&call(h, root), 1);
    assert_eq!(table.word(slot), 0, "cleared");
    // The slot taken by another thread's stack pointer: the entry takes the next word, the
    // return finds it there and clears it, the other thread's word stays.
    let probe = |k: u64| slot + 8 * k;
    let other = s.sp + 0x80_1000;
    table.set_word(probe(0), other);
    same(&call(h, stub), 1);
    assert_eq!((table.word(probe(0)), table.word(probe(1))), (other, 0), "the next word");
    // Taken while the root runs: what the entry wrote, seen from inside.
    table.set_word(probe(2), other + 8);
    table.set_word(probe(1), s.sp);
    same(&call(h, root), 1);
    assert_eq!(table.word(probe(1)), 0, "cleared where it matched");
    assert_eq!(table.word(probe(2)), other + 8, "kept");
    // Every probe held by others: the slot's own word is taken over, and cleared at the end.
    for k in 0..OUTER_PROBES {
        table.set_word(probe(k), other + 16 * (k + 1));
    }
    same(&call(h, stub), 1);
    assert_eq!(table.word(probe(0)), 0, "taken over, then cleared");
    for k in 1..OUTER_PROBES {
        assert_eq!(table.word(probe(k)), other + 16 * (k + 1), "probe {k} kept");
    }
    // Its own stack pointer in a later word (left there by a root call that `longjmp` took
    // out) and an empty word before it: the empty word is taken and cleared at the end; the
    // stale word stays, as it would with one word a slot.
    for k in 0..OUTER_PROBES {
        table.set_word(probe(k), 0);
    }
    table.set_word(probe(1), s.sp);
    same(&call(h, stub), 1);
    assert_eq!((table.word(probe(0)), table.word(probe(1))), (0, s.sp), "the first word");
    table.set_word(probe(1), 0);
    // No other word of the outer frames was written.
    for off in (OUTER..OUTER + kerf_jit::table::OUTER_BYTES).step_by(8) {
        assert_eq!(table.word(off), 0, "{off:#x}");
    }
}

fn bmi2() -> bool {
    std::arch::is_x86_feature_detected!("bmi2")
}

#[test]
fn outer_frames_with_the_table_below_2_gib() {
    let bytes = Hash::Mixed(MAX_SET_BITS).table_bytes() as usize;
    let table = Mapping::new(Some(0x3000_0000), bytes, false);
    check(&table, Hash::Low16);
    if bmi2() {
        check(&table, Hash::Mixed(MIN_SET_BITS));
        check(&table, Hash::Mixed(MAX_SET_BITS));
    }
}

#[test]
fn outer_frames_with_the_table_above_2_gib() {
    let table = Mapping::new(None, Hash::Mixed(MAX_SET_BITS).table_bytes() as usize, false);
    assert!(table.addr() > 1 << 32);
    check(&table, Hash::Low16);
    if bmi2() {
        check(&table, Hash::Mixed(MIN_SET_BITS));
        check(&table, Hash::Mixed(MAX_SET_BITS));
    }
}

#[test]
fn threads_apart_fall_in_different_slots() {
    // glibc's thread stacks: 8 MiB and a guard page apart; the same depth in each.
    let top = 0x7f12_3456_7000u64;
    let slots: std::collections::HashSet<u64> = (0..1024)
        .map(|k| outer_slot(Hash::Mixed(MIN_SET_BITS), top - k * 0x80_1000 - 0x1e8))
        .collect();
    assert_eq!(slots.len(), 1024);
    assert!(slots.iter().all(|s| s % 8 == 0 && *s < kerf_jit::table::OUTER_BYTES));
}
