//! The code cache's named x86-64 sequences: how an indirect transfer (indirect jump or call,
//! return) finds its target's translation through the lookup table without touching the
//! flags, the out-of-line entries that undo the lookup's frame, and the shared miss path that
//! leaves for the original code. Nothing here is poked as bytes; the translator places these
//! instructions and the encoder ([`encode`]) links them by label.
//!
//! # The lookup frame
//!
//! An indirect transfer runs with the stack pointer the target expects (`S`: after a call's
//! return address is pushed, after a `ret` popped it). Before the lookup it moves the stack
//! pointer to `F = S - FRAME`, past the 128-byte red zone the program may be using, and keeps
//! there:
//!
//! | `F+0` | `F+8` | `F+16` | `F+24` | `F+32 .. S` |
//! |---|---|---|---|---|
//! | saved `rax` | saved `rcx` | saved `rdx` | exit slot | untouched (red zone and a spare word) |
//!
//! Every step is flag-free (`lea`, `mov`, `movzx`, `not`, `jrcxz`), so flags need no saving
//! whatever is live at the target. A hit jumps to the target block's *indirect entry*, which
//! restores the three registers and `S`. A miss stores the original target in the exit slot,
//! restores the registers and leaves with `ret 128`: one instruction pops the target and
//! restores `S`, so no signal can arrive between the two (the kernel writes a signal frame
//! below the red zone of the current stack pointer, never over the exit slot).
//!
//! Calls and returns are paired as the CPU expects: a translated call is a real `call` (to a
//! stub that swaps the pushed cache address for the original one), and a translated `ret`
//! that finds its target ends in a real `ret` to that same cache address, so the return-stack
//! predictor foresees it ([`ret_probe`]).

pub mod encode;
pub mod signal;

use crate::table::{Hash, SETS_AT, WAYS};
use iced_x86::{Code, Instruction, MemoryOperand, Register};

/// Bytes the lookup frame sits below the stack pointer the target expects.
pub const FRAME: i32 = 160;
/// Offsets in the frame.
const SAVED_RAX: i32 = 0;
const SAVED_RCX: i32 = 8;
const SAVED_RDX: i32 = 16;
pub const EXIT_SLOT: i32 = 24;
/// `ret imm16` at the exit slot restores `S`: the slot's word, then this many bytes.
const EXIT_POP: i32 = FRAME - EXIT_SLOT - 8;

fn op(r: Result<Instruction, iced_x86::IcedError>) -> Instruction {
    // Every template below uses fixed, valid operand combinations.
    r.expect("template instruction is well formed")
}

fn at_rsp(disp: i32) -> MemoryOperand {
    MemoryOperand::with_base_displ(Register::RSP, disp as i64)
}

fn at(base: Register, disp: i32) -> MemoryOperand {
    MemoryOperand::with_base_displ(base, disp as i64)
}

/// `lea rsp, [rsp+delta]`: moves the stack pointer without touching the flags.
pub fn move_rsp(delta: i32) -> Instruction {
    op(Instruction::with2(Code::Lea_r64_m, Register::RSP, at_rsp(delta)))
}

fn store(disp: i32, r: Register) -> Instruction {
    op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(disp), r))
}

fn load(r: Register, disp: i32) -> Instruction {
    op(Instruction::with2(Code::Mov_r64_rm64, r, at_rsp(disp)))
}

/// Open the lookup frame: the stack pointer is `S + adjust` now (`adjust` is `0` at an
/// indirect jump or after a call's push, `-8 - n` at a `ret n`, which has not popped yet),
/// and becomes `F`; `rax`, `rcx` and `rdx` are saved, still holding the program's values.
pub fn enter(adjust: i32) -> Vec<Instruction> {
    vec![
        move_rsp(-FRAME - adjust),
        store(SAVED_RDX, Register::RDX),
        store(SAVED_RCX, Register::RCX),
        store(SAVED_RAX, Register::RAX),
    ]
}

/// `mov dst, reg`: the target of `jmp reg` / `call reg` (read after [`enter`]: the registers
/// still hold the program's values).
pub fn target_from_reg(dst: Register, r: Register) -> Instruction {
    op(Instruction::with2(Code::Mov_r64_rm64, dst, r))
}

/// `mov dst, mem`: the target of `jmp [mem]` / `call [mem]`, with a stack-based operand moved
/// by `rsp_moved` (how far below the program's stack pointer at the instruction the stack
/// pointer is now).
pub fn target_from_mem(dst: Register, orig: &Instruction, rsp_moved: i32) -> Instruction {
    let base = orig.memory_base();
    let mut disp = orig.memory_displacement64() as i64;
    if base == Register::RSP {
        disp += rsp_moved as i64;
    }
    let mut m = MemoryOperand::new(
        base,
        orig.memory_index(),
        orig.memory_index_scale(),
        disp,
        // 1: the encoder widens it when the displacement needs more; an operand with no
        // base is an absolute 32-bit address.
        if base == Register::None { 4 } else { 1 },
        false,
        orig.segment_prefix(),
    );
    if base == Register::RIP {
        // iced keeps a RIP-relative operand's absolute target in the displacement.
        m = MemoryOperand::with_base_displ(Register::RIP, orig.memory_displacement64() as i64);
        m.segment_prefix = orig.segment_prefix();
    }
    op(Instruction::with2(Code::Mov_r64_rm64, dst, m))
}

/// `mov rcx, [rsp+FRAME-8-pop]`: the return address a `ret pop` is about to pop (after
/// `enter(-8 - pop)`).
pub fn target_of_ret(pop: i32) -> Instruction {
    load(Register::RCX, FRAME - 8 - pop)
}

/// The site's prediction first (JIFL's predicted target, a chain of one): `pred` is a word of
/// the data area holding the address of the table way this site's last target was found in
/// (at first a way that matches nothing). A target equal to that way's jumps through it
/// without computing the set: one load the cache keeps hot, no hash, a short dependence
/// chain. Otherwise the probe of way 0 of the target's set (`rcx` the original target);
/// on a hit it stores its way in `pred` and jumps through it to the block's indirect entry.
/// Otherwise on to `second` (the shared [`second_probe`]) with `rcx` restored, `rdx` at the
/// set and `pred`'s address in the exit slot, where a hit in another way remembers it too (a
/// target that lives in way 1 to 3 would otherwise take the hash and the second probe at
/// every visit: 29 % of python3.11's table entries).
/// `labels`: the prediction's hit and the probe's hit.
pub fn predicted_probe(
    table: u64,
    hash: Hash,
    pred: u64,
    labels: [u64; 2],
    second: u64,
) -> Vec<Instruction> {
    let [predicted, hit] = labels;
    let mut v = vec![op(Instruction::with2(Code::Mov_r64_rm64, Register::RDX, rip(pred)))];
    v.extend(compare_way(0, predicted));
    v.extend(probe_remembering(table, hash, pred, hit, second));
    v.push(jump_through_way(0, predicted));
    v
}

/// The registers a frameless indirect call takes ([`fast_call`]): neither is an argument of
/// the SysV ABI, and an unknown callee may overwrite both, so no caller keeps a value in them
/// across an indirect call (the analysis assumes the same of every unknown callee). The TLS
/// descriptor call, whose callee keeps every register but `rax`, is the exception the
/// translator leaves out.
pub const CALL_SCRATCH: [Register; 2] = [Register::R11, Register::R10];

/// An indirect call's lookup with no frame (JIFL's predicted target, a chain of one), after
/// its stub stored the original return address: the target into `r11` (`load`; `None` when
/// the call is through `r11` already), the way the site's prediction word `pred` names into
/// `r10`, and if that way's return key ([`crate::table::RET_KEY`], beside its continuation:
/// one line) is the target, on to the way's continuation, the target's translation, with
/// every register the callee reads as the program left it. The flags are clobbered: dead at
/// a callee's entry. Otherwise on to `slow` with the target in `r11`, where the framed
/// [`predicted_probe`] follows (which compares the way's other key, and remembers the way a
/// hit was in). Five instructions, against fourteen for the framed probe and the indirect
/// entry. A way whose continuation is no place to enter with the program's registers (a
/// target kerf cannot translate, whose continuation is the original address; an entry that
/// counts the lookup's arrivals) has a return key of 0, which no target matches, and is
/// reached through the framed probe.
pub fn fast_call(load: Option<Instruction>, pred: u64, slow: u64) -> Vec<Instruction> {
    use crate::table::{CONT, RET_KEY};
    let [target, way] = CALL_SCRATCH;
    let mut v: Vec<Instruction> = load.into_iter().collect();
    v.extend([
        op(Instruction::with2(Code::Mov_r64_rm64, way, rip(pred))),
        op(Instruction::with2(Code::Cmp_r64_rm64, target, at(way, RET_KEY as i32))),
        op(Instruction::with_branch(Code::Jne_rel32_64, slow)),
        op(Instruction::with1(Code::Jmp_rm64, at(way, CONT as i32))),
    ]);
    v
}

fn rip(a: u64) -> MemoryOperand {
    MemoryOperand::with_base_displ(Register::RIP, a as i64)
}

/// The table's address as a 32-bit displacement, if all of it lies below 2 GiB (kerf maps it
/// there when it can): then a set's offset indexes it directly, with no register holding its
/// base.
fn low_table(table: u64, hash: Hash) -> Option<i32> {
    i32::try_from(table + hash.table_bytes()).ok().map(|_| table as i32)
}

/// `rdx = table + SET_STRIDE * set(rcx)`, flag-free (clobbers `rax`).
fn set_of(table: u64, hash: Hash) -> Vec<Instruction> {
    let mut v = Vec::new();
    match hash {
        Hash::Mixed(bits) => {
            // `rotr(rcx, 13) + 8 * rcx` (see `Hash::Mixed`), by `lea`: no flags.
            v.push(op(Instruction::with3(
                Code::VEX_Rorx_r64_rm64_imm8,
                Register::RDX,
                Register::RCX,
                13,
            )));
            v.push(op(Instruction::with2(
                Code::Lea_r64_m,
                Register::RDX,
                MemoryOperand::new(Register::RDX, Register::RCX, 8, 0, 0, false, Register::None),
            )));
            // Bits 6.. of it, `bits` of them: shift them to the top and down.
            let top = 64 - 6 - bits;
            for (c, n) in
                [(Code::VEX_Shlx_r64_rm64_r64, top), (Code::VEX_Shrx_r64_rm64_r64, top + 6)]
            {
                v.push(op(Instruction::with2(Code::Mov_r32_imm32, Register::EAX, n)));
                v.push(op(Instruction::with3(c, Register::RDX, Register::RDX, Register::RAX)));
            }
        }
        Hash::Low16 => {
            v.push(op(Instruction::with2(Code::Movzx_r32_rm16, Register::EDX, Register::CX)));
        }
    }
    // Times 64, then times 2 with the table added: the set's offset is 128 times its number.
    const _: () = assert!(crate::table::SET_STRIDE == 128);
    let scaled = |base: Register, scale: u32, disp: i64| {
        let disp_size = if disp == 0 && base != Register::None { 0 } else { 4 };
        op(Instruction::with2(
            Code::Lea_r64_m,
            Register::RDX,
            MemoryOperand::new(base, Register::RDX, scale, disp, disp_size, false, Register::None),
        ))
    };
    v.push(scaled(Register::None, 8, 0));
    v.push(scaled(Register::None, 8, 0));
    // (The sets start `SETS_AT` into the table.)
    match low_table(table, hash) {
        Some(t) => v.push(scaled(Register::None, 2, t as i64 + SETS_AT as i64)),
        None => v.extend([
            op(Instruction::with2(Code::Mov_r64_imm64, Register::RAX, table + SETS_AT)),
            scaled(Register::RAX, 2, 0),
        ]),
    }
    v
}

fn probe_remembering(table: u64, hash: Hash, pred: u64, hit: u64, second: u64) -> Vec<Instruction> {
    let mut v = set_of(table, hash);
    v.extend(compare_way(0, hit));
    // For the second probe: where to remember the way it finds.
    v.push(op(Instruction::with2(Code::Lea_r64_m, Register::RAX, rip(pred))));
    v.push(store(EXIT_SLOT, Register::RAX));
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, second)));
    let mut remember = op(Instruction::with2(Code::Mov_rm64_r64, rip(pred), Register::RDX));
    remember.set_ip(hit);
    v.push(remember);
    v.push(jump_through_way(0, 0));
    v
}

/// The probe of a `ret pop` (after [`enter`]`(-8 - pop)` and [`target_of_ret`], `rcx` the
/// original return address): way 0 of the target's set, and on a hit the way's continuation
/// goes into the return slot in place of the original address, the registers and the stack
/// are put back, and a real `ret pop` leaves for it. The translated call that pushed the
/// original address came from a `call` whose own return address is that continuation (see
/// [`call_stub`]), so the CPU's return-stack predictor foresees this `ret`, where a jump
/// through the table would be foreseen only for a site with one caller. Otherwise on to
/// `second` (the [`second_ret_probe`] of this `pop`), with `rcx` restored and `rdx` at the
/// set. `hit` labels the way-0 hit.
pub fn ret_probe(table: u64, hash: Hash, pop: i32, hit: u64, second: u64) -> Vec<Instruction> {
    let mut v = set_of(table, hash);
    v.extend(compare_way(0, hit));
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, second)));
    let mut cont = continuation(0);
    cont.set_ip(hit);
    v.push(cont);
    v.extend(ret_tail(pop));
    v
}

/// A `ret pop` with no frame, where two registers (`scratch`) and the flags are dead at every
/// place the function's returns land ([`kerf_analysis::liveness::at_continuations`]): the
/// set is computed with them (flags may change), way 0's return key compared with `cmp`
/// ([`crate::table::RET_KEY`], beside the continuation: one line read), and on a hit the
/// way's continuation replaces the original address in the return slot and a real `ret pop`
/// leaves for it, as in [`ret_probe`] but with one store instead of four and no stack
/// movement. Otherwise on to `slow` (the [`other_ways`] of this `pop` and scratch pair), with
/// the stack as the `ret` found it, the original address in the second scratch register,
/// and the set in the first: its offset in the table for a table below 2 GiB (nine
/// instructions in all, the table's address a displacement), else its address. With `saved`
/// the two registers are live where the `ret` lands: they are kept just below the return
/// slot (at `-8` and `-16`) and put back before the `ret`, and `slow` is their
/// [`restore_scratch`].
pub fn fast_ret(
    table: u64,
    hash: Hash,
    pop: i32,
    scratch: [Register; 2],
    saved: bool,
    slow: u64,
) -> Vec<Instruction> {
    use crate::table::{CONT, RET_KEY, SET_BYTES};
    let [set, orig] = scratch;
    let set32 = narrow(set, Register::EAX);
    let two = |c: Code, a: Register, b: Register| op(Instruction::with2(c, a, b));
    let mut v = Vec::new();
    if saved {
        v.extend([store(SAVED_SET, set), store(SAVED_ORIG, orig)]);
    }
    v.push(load(orig, 0));
    // The set's number times 64 (its offset is twice that: see `in_set`).
    match hash {
        Hash::Mixed(_) => {
            // Bits 6.. of `rotr(x, 13) + 8x` (see `Hash::Mixed`).
            v.push(op(Instruction::with3(Code::VEX_Rorx_r64_rm64_imm8, set, orig, 13)));
            let eight = MemoryOperand::new(set, orig, 8, 0, 0, false, Register::None);
            v.push(op(Instruction::with2(Code::Lea_r64_m, set, eight)));
            let mask = ((hash.sets() as u64 - 1) * SET_BYTES) as u32;
            v.push(op(Instruction::with2(Code::And_rm32_imm32, set32, mask)));
        }
        Hash::Low16 => {
            v.push(two(Code::Movzx_r32_rm16, set32, narrow(orig, Register::AX)));
            v.push(op(Instruction::with2(Code::Shl_rm64_imm8, set, SET_BYTES.trailing_zeros())));
        }
    }
    let low = low_table(table, hash);
    if low.is_none() {
        // The set's address, in `set`.
        let scaled = MemoryOperand::new(orig, set, 2, 0, 0, false, Register::None);
        v.extend([
            op(Instruction::with2(Code::Mov_r64_imm64, orig, table + SETS_AT)),
            op(Instruction::with2(Code::Lea_r64_m, set, scaled)),
            load(orig, 0),
        ]);
    }
    v.extend([
        op(Instruction::with2(Code::Cmp_r64_rm64, orig, in_set(set, low, RET_KEY as i32))),
        op(Instruction::with_branch(Code::Jne_rel32_64, slow)),
        op(Instruction::with2(Code::Mov_r64_rm64, orig, in_set(set, low, CONT as i32))),
        store(0, orig),
    ]);
    if saved {
        v.extend([load(set, SAVED_SET), load(orig, SAVED_ORIG)]);
    }
    v.push(ret(pop));
    v
}

/// Before a frameless `ret pop` ([`fast_ret`]), one of the function's callers compared
/// inline (JIFL's chain of predicted targets, for a return): while the return slot holds
/// that call's original return address `orig`, the label of its translation `cont` replaces
/// it and a real `ret pop` leaves for it, with no table read (the table line of a return
/// site is a load that misses the caches where the `ret` runs seldom, and one more page
/// for the TLB); otherwise on to `next`. The translated call pushed exactly `cont`, so the
/// return-stack predictor foresees it. `scratch` and the flags must be dead where the
/// function's returns land (as for [`fast_ret`]). With `low` (the whole cache lies below
/// 2 GiB) `cont` goes into the slot as an immediate ([`encode::store_label`]): one store
/// that waits for nothing, where a `lea` into `scratch` and a store of it took two
/// (`bench/ret_seq.c`: 0.1-0.17 ns over a native return against 0.44-0.5 ns).
pub fn chained_ret(
    orig: u64,
    scratch: Register,
    (cont, low): (u64, bool),
    pop: i32,
    next: u64,
) -> Vec<Instruction> {
    let mut v = match i32::try_from(orig) {
        Ok(imm) => vec![op(Instruction::with2(Code::Cmp_rm64_imm32, at_rsp(0), imm))],
        Err(_) => vec![
            op(Instruction::with2(Code::Mov_r64_imm64, scratch, orig)),
            op(Instruction::with2(Code::Cmp_rm64_r64, at_rsp(0), scratch)),
        ],
    };
    v.push(op(Instruction::with_branch(Code::Jne_rel32_64, next)));
    match low {
        true => v.push(encode::store_label(cont)),
        false => v.extend([
            op(Instruction::with2(Code::Lea_r64_m, scratch, rip(cont))),
            store(0, scratch),
        ]),
    }
    v.push(ret(pop));
    v
}

/// [`chained_ret`] for a `ret` whose two registers are live where it returns
/// ([`fast_ret`]'s `saved`): `scratch` is kept just below the return slot while it holds the
/// continuation, and put back before the `ret`. Where `orig` needs 64 bits, `scratch` holds it
/// for the compare, so it is kept first and put back at label `miss` (the last instruction)
/// when the compare fails; otherwise the compare takes an immediate and a failing one goes on
/// to `next`, which the caller marks after this. With `low`, as in [`chained_ret`]: `cont`
/// goes into the slot as an immediate, and where `orig` is an immediate too, `scratch` is
/// not touched at all.
pub fn chained_ret_saved(
    orig: u64,
    scratch: Register,
    (cont, low): (u64, bool),
    pop: i32,
    (next, miss): (u64, u64),
) -> Vec<Instruction> {
    let hit = match low {
        true => vec![encode::store_label(cont), load(scratch, SAVED_SET), ret(pop)],
        false => vec![
            op(Instruction::with2(Code::Lea_r64_m, scratch, rip(cont))),
            store(0, scratch),
            load(scratch, SAVED_SET),
            ret(pop),
        ],
    };
    match (i32::try_from(orig), low) {
        (Ok(imm), true) => vec![
            op(Instruction::with2(Code::Cmp_rm64_imm32, at_rsp(0), imm)),
            op(Instruction::with_branch(Code::Jne_rel32_64, next)),
            encode::store_label(cont),
            ret(pop),
        ],
        (Ok(imm), false) => {
            let mut v = vec![
                op(Instruction::with2(Code::Cmp_rm64_imm32, at_rsp(0), imm)),
                op(Instruction::with_branch(Code::Jne_rel32_64, next)),
                store(SAVED_SET, scratch),
            ];
            v.extend(hit);
            v
        }
        (Err(_), _) => {
            let mut v = vec![
                store(SAVED_SET, scratch),
                op(Instruction::with2(Code::Mov_r64_imm64, scratch, orig)),
                op(Instruction::with2(Code::Cmp_rm64_r64, at_rsp(0), scratch)),
                op(Instruction::with_branch(Code::Jne_rel32_64, miss)),
            ];
            v.extend(hit);
            v.push(labelled(load(scratch, SAVED_SET), miss));
            v
        }
    }
}

/// The word `disp` bytes into a set, as [`fast_ret`] leaves `set`: for a table below 2 GiB
/// (at `low`) the set's number times 64, scaled by two in the operand (a set is two lines,
/// [`crate::table::SET_STRIDE`]) after the table's first [`SETS_AT`] bytes, else the set's
/// address.
fn in_set(set: Register, low: Option<i32>, disp: i32) -> MemoryOperand {
    const _: () = assert!(crate::table::SET_STRIDE == 2 * crate::table::SET_BYTES);
    match low {
        Some(t) => MemoryOperand::new(
            Register::None,
            set,
            2,
            t as i64 + SETS_AT as i64 + disp as i64,
            4,
            false,
            Register::None,
        ),
        None => at(set, disp),
    }
}

/// Where [`outer_entry`] and [`outer_check`] keep `rdx` and `rcx` meanwhile: below the
/// return slot, in the red zone of a function just entered or returning, which holds nothing
/// of the program's (a caller's red zone is where its call's push and the callee's frame go)
/// and which a signal frame never overwrites.
const OUTER_RDX: i32 = -8;
const OUTER_RCX: i32 = -16;

/// `rdx` = the address of the outer-frame slot of the stack pointer (see
/// [`crate::table::outer_slot`]), flag-free; clobbers `rcx` for a table above 2 GiB.
fn outer_slot_address(table: u64, hash: Hash) -> Vec<Instruction> {
    let outer = table + crate::table::OUTER;
    let mut v = Vec::new();
    if matches!(hash, Hash::Mixed(_)) {
        // `8 * (rotr(rsp, 12) + rsp)`, by `rorx` and `lea`.
        v.push(op(Instruction::with3(
            Code::VEX_Rorx_r64_rm64_imm8,
            Register::RDX,
            Register::RSP,
            12,
        )));
        let sum = MemoryOperand::new(Register::RSP, Register::RDX, 1, 0, 0, false, Register::None);
        v.push(op(Instruction::with2(Code::Lea_r64_m, Register::RDX, sum)));
        let eight =
            MemoryOperand::new(Register::None, Register::RDX, 8, 0, 4, false, Register::None);
        v.push(op(Instruction::with2(Code::Lea_r64_m, Register::RDX, eight)));
    } else {
        v.push(op(Instruction::with2(Code::Mov_r64_rm64, Register::RDX, Register::RSP)));
    }
    // Its low 16 bits: the slot's offset.
    v.push(op(Instruction::with2(Code::Movzx_r32_rm16, Register::EDX, Register::DX)));
    match i32::try_from(outer + crate::table::OUTER_BYTES) {
        Ok(_) => {
            let slot = MemoryOperand::new(
                Register::None,
                Register::RDX,
                1,
                outer as i64,
                4,
                false,
                Register::None,
            );
            v.push(op(Instruction::with2(Code::Lea_r64_m, Register::RDX, slot)));
        }
        Err(_) => v.extend([
            op(Instruction::with2(Code::Mov_r64_imm64, Register::RCX, outer)),
            op(Instruction::with2(
                Code::Lea_r64_m,
                Register::RDX,
                MemoryOperand::new(Register::RCX, Register::RDX, 1, 0, 0, false, Register::None),
            )),
        ]),
    }
    v
}

/// `rcx = rsp - [rdx]`, flag-free (as `rsp + !word + 1`): zero when the word holds the
/// stack pointer.
fn rsp_minus_word() -> [Instruction; 3] {
    let diff = MemoryOperand::new(Register::RSP, Register::RCX, 1, 1, 1, false, Register::None);
    [
        load_from(Register::RCX, Register::RDX, 0),
        op(Instruction::with1(Code::Not_rm64, Register::RCX)),
        op(Instruction::with2(Code::Lea_r64_m, Register::RCX, diff)),
    ]
}

/// `lea rdx, [rdx + delta]`: the next (or first) probe's word, flag-free.
fn step_rdx(delta: i32) -> Instruction {
    op(Instruction::with2(Code::Lea_r64_m, Register::RDX, at(Register::RDX, delta)))
}

/// The entry a root's jump in the original code goes to, at label `label`: the stack pointer
/// (pointing at the caller's return address) goes into an outer-frame word (see
/// [`crate::table::OUTER`]): of its slot's [`crate::table::OUTER_PROBES`], the first that is
/// empty or holds this stack pointer already, else the slot's own; then on to `to`, the
/// root's translation, with every register and flag as they came. Calls to the root made in
/// the cache go to `to` directly. `take` labels the store.
pub fn outer_entry(label: u64, take: u64, table: u64, hash: Hash, to: u64) -> Vec<Instruction> {
    let mut v =
        vec![labelled(store(OUTER_RDX, Register::RDX), label), store(OUTER_RCX, Register::RCX)];
    v.extend(outer_slot_address(table, hash));
    let probes = crate::table::OUTER_PROBES as i32;
    for k in 0..probes {
        if k > 0 {
            v.push(step_rdx(8));
        }
        v.push(load_from(Register::RCX, Register::RDX, 0));
        v.push(op(Instruction::with_branch(Code::Jrcxz_rel8_64, take)));
        v.extend(rsp_minus_word().into_iter().skip(1));
        v.push(op(Instruction::with_branch(Code::Jrcxz_rel8_64, take)));
    }
    // Every probe taken by another stack pointer: the slot's own word.
    v.push(step_rdx(-8 * (probes - 1)));
    v.extend([
        labelled(
            op(Instruction::with2(Code::Mov_rm64_r64, at(Register::RDX, 0), Register::RSP)),
            take,
        ),
        load(Register::RCX, OUTER_RCX),
        load(Register::RDX, OUTER_RDX),
        jmp(to),
    ]);
    v
}

/// Before a `ret pop` of a function that may end a root's frame (the root, or a function it
/// tail-calls): when one of the stack pointer's outer-frame words ([`outer_entry`]) holds it,
/// this is the end of a root call made from the original code: that word is cleared and a
/// real `ret pop` goes back to the original return address on the stack. Otherwise on to
/// `normal` (the `ret`'s translation), every register and flag as they came; each compare
/// is `rcx = rsp - word` as `rsp + !word + 1`, and `jrcxz` (to label `outer`, just past the
/// jump on).
pub fn outer_check(
    table: u64,
    hash: Hash,
    pop: i32,
    [outer, normal]: [u64; 2],
) -> Vec<Instruction> {
    let mut v = vec![store(OUTER_RDX, Register::RDX), store(OUTER_RCX, Register::RCX)];
    v.extend(outer_slot_address(table, hash));
    for k in 0..crate::table::OUTER_PROBES {
        if k > 0 {
            v.push(step_rdx(8));
        }
        v.extend(rsp_minus_word());
        v.push(op(Instruction::with_branch(Code::Jrcxz_rel8_64, outer)));
    }
    v.extend([
        load(Register::RCX, OUTER_RCX),
        load(Register::RDX, OUTER_RDX),
        jmp(normal),
        labelled(op(Instruction::with2(Code::Mov_rm64_imm32, at(Register::RDX, 0), 0)), outer),
        load(Register::RCX, OUTER_RCX),
        load(Register::RDX, OUTER_RDX),
        ret(pop),
    ]);
    v
}

/// Where a [`fast_ret`] with `saved` registers keeps them, below its return slot.
const SAVED_SET: i32 = -8;
const SAVED_ORIG: i32 = -16;

/// The way back of the frameless returns of one `pop` that saved `scratch` ([`fast_ret`]),
/// at label `label`: the two registers put back, then on to `slow` (the [`slow_ret`] of this
/// `pop`) with the program's registers and stack as the `ret` found them.
pub fn restore_scratch(label: u64, scratch: [Register; 2], slow: u64) -> Vec<Instruction> {
    let [set, orig] = scratch;
    vec![
        labelled(load(set, SAVED_SET), label),
        load(orig, SAVED_ORIG),
        op(Instruction::with_branch(Code::Jmp_rel32_64, slow)),
    ]
}

/// The other ways of a [`fast_ret`]'s set, at label `labels[0]` (shared by the frameless
/// returns of one `pop` and scratch pair; the other labels are its own): the set (as
/// [`fast_ret`] left it for `table` and its `hash`) and the original address still in `scratch`, each way
/// compared with `cmp`, a match leaving as [`fast_ret`] does; otherwise on to `slow` (the
/// [`slow_ret`] of this `pop`, which looks in the overflow list, and asks kerf or leaves on a
/// miss).
pub fn other_ways(
    labels: [u64; WAYS + 1],
    (table, hash): (u64, Hash),
    pop: i32,
    scratch: [Register; 2],
    slow: u64,
) -> Vec<Instruction> {
    use crate::table::{CONT, RET_KEY, WAY_BYTES};
    let [set, orig] = scratch;
    let low = low_table(table, hash);
    let (label, tail, hits) = (labels[0], labels[1], &labels[2..]);
    let mut v = Vec::new();
    for (k, &hit) in hits.iter().enumerate() {
        let key = in_set(set, low, RET_KEY as i32 + (k as i32 + 1) * WAY_BYTES as i32);
        v.push(labelled(
            op(Instruction::with2(Code::Cmp_r64_rm64, orig, key)),
            if k == 0 { label } else { 0 },
        ));
        v.push(op(Instruction::with_branch(Code::Je_rel32_64, hit)));
    }
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, slow)));
    for (k, &hit) in hits.iter().enumerate() {
        let way = (k as i32 + 1) * WAY_BYTES as i32;
        let cont = in_set(set, low, CONT as i32 + way);
        v.push(labelled(op(Instruction::with2(Code::Mov_r64_rm64, orig, cont)), hit));
        v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, tail)));
    }
    v.push(labelled(store(0, orig), tail));
    v.push(ret(pop));
    v
}

/// The 64-bit register `r` as the register of the same number in the file starting at
/// `first` (`EAX`: its low 32 bits, `AX`: its low 16).
fn narrow(r: Register, first: Register) -> Register {
    // iced numbers each register file in encoding order.
    Register::try_from(first as usize + (r as usize - Register::RAX as usize))
        .expect("a register of the same number")
}

/// The shared way back of a [`fast_ret`] of `pop` whose return keys did not match, at label
/// `label`: the frame opened and [`ret_probe`] (`hit` its way-0 hit), then on to `second`
/// (the [`second_ret_probe`] of this `pop`) for the other ways. Way 0 is compared again, by
/// its other key: a way whose return key is 0 (an entry no frameless transfer may take,
/// see [`crate::table::Table::insert_ranked`]) is found here.
pub fn slow_ret(
    label: u64,
    hit: u64,
    table: u64,
    hash: Hash,
    pop: i32,
    second: u64,
) -> Vec<Instruction> {
    let mut v = enter(-8 - pop);
    v[0].set_ip(label);
    v.push(target_of_ret(pop));
    v.extend(ret_probe(table, hash, pop, hit, second));
    v
}

/// `ret` or `ret pop`.
fn ret(pop: i32) -> Instruction {
    if pop == 0 {
        Instruction::with(Code::Retnq)
    } else {
        op(Instruction::with1(Code::Retnq_imm16, pop as u32))
    }
}

/// `mov rax, [rdx + CONT + 16*way]`: the continuation of way `way` of the set at `rdx`.
fn continuation(way: i32) -> Instruction {
    load_from(Register::RAX, Register::RDX, crate::table::CONT as i32 + 16 * way)
}

fn load_from(r: Register, base: Register, disp: i32) -> Instruction {
    op(Instruction::with2(Code::Mov_r64_rm64, r, at(base, disp)))
}

/// Leave the frame of a `ret pop` for the continuation in `rax`: it replaces the original
/// address in the return slot (the program sees the original again only if it could look
/// between this store and the `ret`, as a signal handler reading its stack could), the
/// registers come back, and `ret pop` pops it.
fn ret_tail(pop: i32) -> Vec<Instruction> {
    let slot = FRAME - 8 - pop;
    vec![
        store(slot, Register::RAX),
        load(Register::RAX, SAVED_RAX),
        load(Register::RCX, SAVED_RCX),
        load(Register::RDX, SAVED_RDX),
        move_rsp(slot),
        ret(pop),
    ]
}

/// The shared probe of the other ways for returns that pop `pop` bytes, at label `second`
/// (`hits`: a label per way), as [`ret_probe`] leaves; a miss goes on to `miss`.
pub fn second_ret_probe(
    second: u64,
    hits: [u64; WAYS - 1],
    tail: u64,
    miss: u64,
    pop: i32,
) -> Vec<Instruction> {
    let mut v = compare_other_ways(second, hits, miss);
    for (k, &hit) in hits.iter().enumerate() {
        let mut c = continuation(k as i32 + 1);
        c.set_ip(hit);
        v.push(c);
        v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, tail)));
    }
    let mut t = ret_tail(pop);
    t[0].set_ip(tail);
    v.extend(t);
    v
}

/// `jmp [rdx + 16*way + 8]` at label `label` (0: none): to the way's indirect entry.
fn jump_through_way(way: i32, label: u64) -> Instruction {
    let mut j = op(Instruction::with1(Code::Jmp_rm64, at(Register::RDX, 16 * way + 8)));
    j.set_ip(label);
    j
}

/// Compare way `way` of the set at `rdx` with the target in `rcx` without flags: `rcx -=
/// entry` (as `rcx + !entry + 1`), `jrcxz hit`, and `rcx` put back on the way on.
fn compare_way(way: i32, hit: u64) -> Vec<Instruction> {
    let sum = |one: i32| {
        op(Instruction::with2(
            Code::Lea_r64_m,
            Register::RCX,
            MemoryOperand::new(
                Register::RCX,
                Register::RAX,
                1,
                one as i64,
                1,
                false,
                Register::None,
            ),
        ))
    };
    vec![
        op(Instruction::with2(Code::Mov_r64_rm64, Register::RAX, at(Register::RDX, 16 * way))),
        op(Instruction::with1(Code::Not_rm64, Register::RAX)),
        sum(1),
        op(Instruction::with_branch(Code::Jrcxz_rel8_64, hit)),
        op(Instruction::with1(Code::Not_rm64, Register::RAX)),
        sum(0),
    ]
}

/// At label `second`: ways 1 to 3 of the set at `rdx` compared with `rcx`, each match to its
/// label in `hits`, then on to `miss`.
fn compare_other_ways(second: u64, hits: [u64; WAYS - 1], miss: u64) -> Vec<Instruction> {
    let mut v = Vec::new();
    for (k, &hit) in hits.iter().enumerate() {
        v.extend(compare_way(k as i32 + 1, hit));
    }
    v[0].set_ip(second);
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, miss)));
    v
}

/// The shared probe of the other ways of the set at `rdx`, placed once per cache at label
/// `second` (`hits`: a label per way), after [`predicted_probe`]'s way 0: a hit stores its
/// way in the prediction word whose address the exit slot holds, and jumps through it; a
/// miss goes on to `miss`.
pub fn second_probe(second: u64, hits: [u64; WAYS - 1], miss: u64) -> Vec<Instruction> {
    let mut v = compare_other_ways(second, hits, miss);
    for (k, &hit) in hits.iter().enumerate() {
        let way = at(Register::RDX, 16 * (k as i32 + 1));
        v.push(labelled(op(Instruction::with2(Code::Lea_r64_m, Register::RDX, way)), hit));
        v.push(load(Register::RAX, EXIT_SLOT));
        v.push(op(Instruction::with2(Code::Mov_rm64_r64, at(Register::RAX, 0), Register::RDX)));
        v.push(jump_through_way(0, 0));
    }
    v
}

/// The shared miss path of a cache (see [`miss`]).
#[derive(Clone, Copy, Debug)]
pub struct MissPath {
    /// Its label, and the label of its quiet entry (a target kerf cannot translate, such as
    /// an instruction that must run in place: leave without asking).
    pub miss: u64,
    pub quiet: u64,
    /// The table's overflow list: a count, then `(original, entry)` pairs.
    pub overflow: u64,
    /// The data words that count the misses and keep the last target.
    pub count: u64,
    pub last: u64,
    /// With a mailbox, a miss asks kerf to translate its target (see [`crate::mailbox`]).
    pub ask: Option<Ask>,
}

/// Where a miss asks kerf, and how it looks the target up again afterwards.
#[derive(Clone, Copy, Debug)]
pub struct Ask {
    pub mailbox: u64,
    pub table: u64,
    pub hash: Hash,
    /// The data word that counts misses that left without asking (kerf not listening): of
    /// the escapes, those kerf never heard of.
    pub unasked: u64,
}

/// The shared miss path at label `p.miss`, `rcx` the original target. First the table's
/// overflow list (entries whose set was full), searched with the flags saved; a hit goes to
/// the entry as any hit does. Then, with a mailbox that kerf listens on, the target is posted
/// to kerf and the thread waits (a bounded time: [`crate::mailbox::TRIES`] futex waits) until
/// kerf has answered it, and looks it up in the table again; a hit goes on in the cache.
/// Otherwise counts the miss and keeps the target, then leaves the frame for the target in
/// the original code in one `ret`.
pub fn miss(p: &MissPath, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    let none = labels();
    let mut v = Vec::new();
    let mut first = store(EXIT_SLOT, Register::RCX);
    first.set_ip(p.miss);
    v.push(first);
    // The frame is 160 bytes below the program's stack pointer: pushing is safe here.
    v.push(Instruction::with(Code::Pushfq));
    let after_search = if p.ask.is_some() { labels() } else { none };
    v.extend(search_overflow(p.overflow, after_search, labels));
    if let Some(ask) = p.ask {
        v.extend(ask_kerf(&ask, after_search, none, labels));
    }
    let mut leave = count_and_leave(p.count, p.last);
    leave[0].set_ip(none);
    v.extend(leave);
    // The quiet entry: as a miss that found nothing.
    v.push(labelled(store(EXIT_SLOT, Register::RCX), p.quiet));
    v.push(Instruction::with(Code::Pushfq));
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, none)));
    v
}

/// The search of the overflow list at `overflow` (the table's start: a count, then
/// `(original, entry)` pairs) for the target in `rcx`, the flags saved on the stack: a hit
/// restores them, points `rdx` [`crate::table::CONT`] bytes before the pair's continuation
/// (as a way's hit leaves `rdx` at its way, for [`lazy_entry`]) and jumps to the entry;
/// otherwise on to `fail`.
fn search_overflow(overflow: u64, fail: u64, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    use crate::table::{CONT, OVERFLOW_CONTS, OVERFLOW_COUNT, OVERFLOW_PAIRS};
    // `rax` is 8 bytes into the pair (at its entry word) when it hits.
    const TO_CONT: i64 = (OVERFLOW_CONTS - OVERFLOW_COUNT - OVERFLOW_PAIRS - 8 - CONT) as i64;
    let next = labels();
    vec![
        op(Instruction::with2(Code::Mov_r64_imm64, Register::RAX, overflow)),
        op(Instruction::with2(Code::Mov_r64_rm64, Register::RDX, at(Register::RAX, 0))),
        // rax walks the pairs (the first at overflow + 16), rdx counts down.
        labelled(op(Instruction::with2(Code::Add_rm64_imm8, Register::RAX, 16)), next),
        op(Instruction::with1(Code::Dec_rm64, Register::RDX)),
        op(Instruction::with_branch(Code::Js_rel32_64, fail)),
        op(Instruction::with2(Code::Cmp_r64_rm64, Register::RCX, at(Register::RAX, -8))),
        op(Instruction::with_branch(Code::Jne_rel32_64, next)),
        Instruction::with(Code::Popfq),
        op(Instruction::with2(
            Code::Lea_r64_m,
            Register::RDX,
            MemoryOperand::with_base_displ(Register::RAX, TO_CONT),
        )),
        op(Instruction::with1(Code::Jmp_rm64, at(Register::RAX, 0))),
    ]
}

fn labelled(mut i: Instruction, label: u64) -> Instruction {
    i.set_ip(label);
    i
}

/// Post `rcx` in the mailbox at `mailbox`'s ring with a ticket, wake kerf, and wait until
/// kerf has answered that ticket, kerf stops listening, or the wait gives up (then `LISTEN` is
/// cleared: see [`ask_kerf`]); then on at label `served`, which follows. With `in_slot`, also
/// once the ticket's slot holds kerf's answer to it marked to go on at once
/// ([`crate::mailbox::AT_ONCE`]), though tickets before it are still open. `rax`, `rcx`,
/// `rdx`, `rdi`, `rsi`, `r8`, `r9`, `r10`, `r11` and `r12` are clobbered (the caller saved
/// them).
fn post_and_wait(
    mailbox: u64,
    served: u64,
    in_slot: bool,
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    use crate::mailbox as mb;
    use Register::*;
    let (wait, timed_out, interrupted, expired) = (labels(), labels(), labels(), labels());
    let mbox = || op(Instruction::with2(Code::Mov_r64_imm64, RAX, mailbox));
    let listening = || op(Instruction::with2(Code::Cmp_rm32_imm8, at(RAX, mb::LISTEN as i32), 0));
    let mov32 = |r: Register, n: u32| op(Instruction::with2(Code::Mov_r32_imm32, r, n));
    let lea =
        |r: Register, off: u64| op(Instruction::with2(Code::Lea_r64_m, r, at(RAX, off as i32)));
    let mut v = vec![mbox()];
    // The ticket, and the target in its slot of the ring.
    v.push(mov32(R9D, 1));
    let mut xadd = op(Instruction::with2(Code::Xadd_rm32_r32, at(RAX, mb::POSTED as i32), R9D));
    xadd.set_has_lock_prefix(true);
    v.push(xadd);
    v.push(op(Instruction::with2(Code::Mov_r32_rm32, EDX, R9D)));
    v.push(op(Instruction::with2(Code::And_rm32_imm32, EDX, mb::RING_SLOTS - 1)));
    // The target tagged with the ticket (see `mailbox::TAG`).
    v.push(op(Instruction::with2(Code::Mov_r32_rm32, R10D, R9D)));
    v.push(op(Instruction::with2(Code::And_rm32_imm32, R10D, (1u32 << mb::TAG_BITS) - 1)));
    v.push(op(Instruction::with2(Code::Shl_rm64_imm8, R10, mb::ADDRESS_BITS)));
    v.push(op(Instruction::with2(Code::Or_r64_rm64, RCX, R10)));
    // r9's high half: kerf's signs of life so far (`mailbox::ALIVE`; the ticket is r9d).
    v.extend(alive_into_r9());
    let slot = MemoryOperand::new(RAX, RDX, 8, mb::RING as i64, 1, false, Register::None);
    v.push(op(Instruction::with2(Code::Mov_rm64_r64, slot, RCX)));
    // futex(&POSTED, FUTEX_WAKE, 1)
    v.extend([lea(RDI, mb::POSTED), mov32(ESI, mb::FUTEX_WAKE), mov32(EDX, 1)]);
    v.extend([mov32(EAX, mb::SYS_FUTEX), Instruction::with(Code::Syscall)]);
    v.push(mov32(R8D, mb::TRIES));
    v.push(mov32(R12D, mb::INTERRUPTS));
    // Answered once ANSWERED - ticket > 0 (wrapping).
    v.push(labelled(mbox(), wait));
    v.push(op(Instruction::with2(Code::Mov_r32_rm32, EDX, at(RAX, mb::ANSWERED as i32))));
    v.push(op(Instruction::with2(Code::Mov_r32_rm32, ESI, EDX)));
    v.push(op(Instruction::with2(Code::Sub_r32_rm32, ESI, R9D)));
    v.push(op(Instruction::with2(Code::Test_rm32_r32, ESI, ESI)));
    v.push(op(Instruction::with_branch(Code::Jg_rel32_64, served)));
    if in_slot {
        // The slot's word, its tag and answer bit compared with the ticket's (`edx`, the
        // value the futex wait below expects, is kept).
        let slot = MemoryOperand::new(RAX, RDI, 8, mb::RING as i64, 1, false, Register::None);
        v.extend([
            op(Instruction::with2(Code::Mov_r32_rm32, EDI, R9D)),
            op(Instruction::with2(Code::And_rm32_imm32, EDI, mb::RING_SLOTS - 1)),
            op(Instruction::with2(Code::Mov_r64_rm64, RCX, slot)),
            op(Instruction::with2(Code::Shr_rm64_imm8, RCX, mb::ADDRESS_BITS)),
        ]);
        v.extend(answer_bits_into_esi(mb::ANSWER | mb::AT_ONCE));
        v.extend([
            op(Instruction::with2(Code::Cmp_r64_rm64, RCX, RSI)),
            op(Instruction::with_branch(Code::Je_rel32_64, served)),
        ]);
    }
    v.push(listening());
    v.push(op(Instruction::with_branch(Code::Je_rel32_64, served)));
    v.push(op(Instruction::with1(Code::Dec_rm32, R8D)));
    v.push(op(Instruction::with_branch(Code::Js_rel32_64, timed_out)));
    // futex(&ANSWERED, FUTEX_WAIT, seen, &TIMEOUT)
    v.extend([lea(RDI, mb::ANSWERED), mov32(ESI, mb::FUTEX_WAIT), lea(R10, mb::TIMEOUT)]);
    v.extend([mov32(EAX, mb::SYS_FUTEX), Instruction::with(Code::Syscall)]);
    v.push(op(Instruction::with2(Code::Cmp_rm64_imm8, RAX, -(mb::ETIMEDOUT as i64) as u64 as i32)));
    v.push(op(Instruction::with_branch(Code::Je_rel32_64, expired)));
    v.push(op(Instruction::with2(Code::Cmp_rm64_imm8, RAX, -(mb::EINTR as i64) as u64 as i32)));
    v.push(op(Instruction::with_branch(Code::Je_rel32_64, interrupted)));
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, wait)));
    // A signal ended the wait: counted apart, and not as a try (`wait` takes one).
    v.push(labelled(op(Instruction::with1(Code::Dec_rm32, R12D)), interrupted));
    v.push(op(Instruction::with_branch(Code::Js_rel32_64, timed_out)));
    v.push(op(Instruction::with1(Code::Inc_rm32, R8D)));
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, wait)));
    // The wait timed out: kerf is gone unless its beat moved `ALIVE` since the wait began:
    // then the new count, and a try more.
    v.push(labelled(mbox(), expired));
    v.push(op(Instruction::with2(Code::Mov_r64_rm64, R10, R9)));
    v.push(op(Instruction::with2(Code::Shr_rm64_imm8, R10, 32)));
    v.push(op(Instruction::with2(Code::Cmp_r32_rm32, R10D, at(RAX, mb::ALIVE as i32))));
    v.push(op(Instruction::with_branch(Code::Je_rel32_64, timed_out)));
    v.push(op(Instruction::with2(Code::Mov_r32_rm32, R9D, R9D)));
    v.extend(alive_into_r9());
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, wait)));
    v.push(labelled(mbox(), timed_out));
    v.push(op(Instruction::with2(Code::Mov_rm32_imm32, at(RAX, mb::LISTEN as i32), 0)));
    v
}

/// `esi`: what an answer to the ticket in `r9d` holds above its address ([`mb::ADDRESS_BITS`]
/// up): the ticket's tag and `bits` (answer bits, such as [`mb::ANSWER`]), to compare with a
/// slot's word shifted down as far.
///
/// [`mb::ADDRESS_BITS`]: crate::mailbox::ADDRESS_BITS
/// [`mb::ANSWER`]: crate::mailbox::ANSWER
fn answer_bits_into_esi(bits: u64) -> [Instruction; 3] {
    use crate::mailbox as mb;
    use Register::*;
    [
        op(Instruction::with2(Code::Mov_r32_rm32, ESI, R9D)),
        op(Instruction::with2(Code::And_rm32_imm32, ESI, (1u32 << mb::TAG_BITS) - 1)),
        op(Instruction::with2(Code::Or_rm32_imm32, ESI, (bits >> mb::ADDRESS_BITS) as u32)),
    ]
}

/// `rax` the mailbox, r9's high half clear: kerf's signs of life (`mailbox::ALIVE`) into it
/// (`r10` clobbered).
fn alive_into_r9() -> [Instruction; 3] {
    use crate::mailbox as mb;
    use Register::*;
    [
        op(Instruction::with2(Code::Mov_r32_rm32, R10D, at(RAX, mb::ALIVE as i32))),
        op(Instruction::with2(Code::Shl_rm64_imm8, R10, 32)),
        op(Instruction::with2(Code::Or_r64_rm64, R9, R10)),
    ]
}

/// The miss path's question to kerf, at label `start` (the flags saved, the stack pointer 8
/// below the frame, `rcx` the target): post the target in the mailbox's ring with a ticket,
/// wake kerf, and wait until kerf has answered that ticket; then look the target up again.
/// System calls clobber `rax`, `rcx` and `r11` and take their arguments in `rdi`, `rsi`,
/// `rdx`, `r10`: those are pushed first (below the frame, where nothing of the program's
/// is), with `r8` (the tries left), `r9` (the ticket) and `r12` (the interruptions left). A
/// wait that gives up means kerf is gone or stuck ([`crate::mailbox::TRIES`]): the thread
/// clears `LISTEN`, so that no other thread waits on it, and kerf sets it again when it
/// answers or is idle.
fn ask_kerf(ask: &Ask, start: u64, none: u64, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    use crate::mailbox as mb;
    use Register::*;
    let (served, unasked) = (labels(), labels());
    let hits = [labels(), labels(), labels(), labels()];
    let mbox = || op(Instruction::with2(Code::Mov_r64_imm64, RAX, ask.mailbox));
    let listening = || op(Instruction::with2(Code::Cmp_rm32_imm8, at(RAX, mb::LISTEN as i32), 0));
    // r11 last: `served` pops it first.
    let saved = [RDI, RSI, R8, R9, R10, R12, R11];
    let mut v = vec![labelled(mbox(), start), listening()];
    v.push(op(Instruction::with_branch(Code::Je_rel32_64, unasked)));
    v.extend(saved.iter().map(|&r| op(Instruction::with1(Code::Push_r64, r))));
    v.extend(post_and_wait(ask.mailbox, served, false, labels));
    v.push(labelled(op(Instruction::with1(Code::Pop_r64, R11)), served));
    v.extend(saved.iter().rev().skip(1).map(|&r| op(Instruction::with1(Code::Pop_r64, r))));
    // The table again (its four ways, then the overflow list; the flags are saved, so `cmp`
    // may be used).
    v.push(load(RCX, 8 + EXIT_SLOT));
    v.extend(set_of(ask.table, ask.hash));
    for (w, &hit) in hits.iter().enumerate() {
        v.push(op(Instruction::with2(Code::Cmp_r64_rm64, RCX, at(RDX, 16 * w as i32))));
        v.push(op(Instruction::with_branch(Code::Je_rel32_64, hit)));
    }
    v.extend(search_overflow(ask.table + crate::table::OVERFLOW_COUNT, none, labels));
    // (`rdx` at the way, as every jump through an entry word leaves it: see `lazy_entry`.)
    for (w, &hit) in hits.iter().enumerate() {
        v.push(labelled(Instruction::with(Code::Popfq), hit));
        if w > 0 {
            let way = at(Register::RDX, 16 * w as i32);
            v.push(op(Instruction::with2(Code::Lea_r64_m, Register::RDX, way)));
        }
        v.push(jump_through_way(0, 0));
    }
    // (The flags are saved.)
    let mut inc = op(Instruction::with1(Code::Inc_rm64, rip(ask.unasked)));
    inc.set_has_lock_prefix(true);
    v.push(labelled(inc, unasked));
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, none)));
    v
}

/// The routine a translated `munmap` `syscall` calls right after it, at label
/// `label` (called past the red zone; every register and flag as they came): where the call
/// succeeded (`rax` 0) and its range (`rdi`, `rsi`: a system call leaves them) overlaps a
/// module of the mailbox's `RANGES`, it posts [`crate::mailbox::UNMAPPED`] to kerf and waits
/// (as a miss does, [`post_and_wait`]) for kerf to drop what it translated from a module that
/// went: a library mapped there next must not run it. An unmap of anything else (a large
/// `malloc` block) costs this compare loop only. A call, not a way through the table: the
/// translation it returns to may be a callee's copy in its caller (`__munmap` is small).
pub fn unmap_notice(label: u64, mailbox: u64, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    use crate::mailbox as mb;
    use Register::*;
    let (next, post, done) = (labels(), labels(), labels());
    let jump = |c: Code, to: u64| op(Instruction::with_branch(c, to));
    let body = vec![
        op(Instruction::with2(Code::Mov_r64_imm64, RCX, mb::UNMAPPED | 1)),
        op(Instruction::with2(Code::Test_rm64_r64, RAX, RAX)),
        jump(Code::Jne_rel32_64, done),
        op(Instruction::with2(Code::Mov_r64_imm64, RAX, mailbox)),
        op(Instruction::with2(Code::Mov_r64_rm64, RDX, at(RAX, mb::RANGES as i32))),
        op(Instruction::with2(Code::Cmp_rm64_imm32, RDX, mb::RANGES_MAX as i32)),
        jump(Code::Ja_rel32_64, post),
        // rax walks the pairs: [rax] the start, [rax+8] the end.
        op(Instruction::with2(Code::Lea_r64_m, RAX, at(RAX, mb::RANGES as i32 - 8))),
        labelled(op(Instruction::with1(Code::Dec_rm64, RDX)), next),
        jump(Code::Js_rel32_64, done),
        op(Instruction::with2(Code::Add_rm64_imm8, RAX, 16)),
        op(Instruction::with2(Code::Cmp_r64_rm64, RDI, at(RAX, 8))),
        jump(Code::Jae_rel32_64, next),
        op(Instruction::with2(
            Code::Lea_r64_m,
            R8,
            MemoryOperand::new(RDI, RSI, 1, 0, 0, false, None),
        )),
        op(Instruction::with2(Code::Cmp_r64_rm64, R8, at(RAX, 0))),
        jump(Code::Jbe_rel32_64, next),
    ];
    notice(label, mailbox, body, post, done, false, labels)
}

/// The routine a translated `rt_sigaction` `syscall` calls right *before* it, at label
/// `label` (as [`unmap_notice`]'s, every register and flag as they came): where the call
/// gives an action (`rsi`, the new action, not null), it posts [`crate::mailbox::ACTION`] with
/// the action's address and waits while kerf reads the action and hooks its handler (see
/// [`signal`]). Before, not after: once the kernel has the handler, any other thread may take
/// the signal, and an unhooked handler that interrupted the cache sees a cache address (a
/// user's trial had a thread install a handler while another faulted into it, 4 in 8,000
/// faults). The routine does not read the action itself: a bad pointer, which the kernel
/// answers with `EFAULT`, must not become a fault of kerf's. kerf answers at once for a
/// handler it has hooked or looked at before; its own look, every few milliseconds, misses
/// a handler that replaces another on a signal already caught, and comes too late for a
/// signal raised right after its handler went in.
pub fn action_notice(
    label: u64,
    mailbox: u64,
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    use crate::mailbox as mb;
    use Register::*;
    let (post, done) = (labels(), labels());
    let jump = |c: Code, to: u64| op(Instruction::with_branch(c, to));
    let body = vec![
        op(Instruction::with2(Code::Test_rm64_r64, RSI, RSI)),
        jump(Code::Je_rel32_64, done),
        // (An address above the mailbox's 47 bits, possible with 5-level paging, is not
        // asked about.)
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, RSI)),
        op(Instruction::with2(Code::Shr_rm64_imm8, RCX, mb::ADDRESS_BITS)),
        jump(Code::Jne_rel32_64, done),
        op(Instruction::with2(Code::Mov_r64_imm64, RCX, mb::ACTION)),
        op(Instruction::with2(Code::Or_r64_rm64, RCX, RSI)),
        // (On at `post`.)
    ];
    notice(label, mailbox, body, post, done, true, labels)
}

/// Where an `rt_sigaction` of glibc's own code (`mov eax, 13` at `site`, a `syscall` right
/// after it: `__libc_sigaction`, in libc or the loader) goes, at label `label`, once kerf has
/// spliced a jump over its `mov`: the [`glibc_action_notice`] (at a label of its own, after
/// this), then the `mov` and back to the `syscall`. Every argument is in its register by
/// then (the next instruction is the call). Code outside the cache (a thread in no root call,
/// a signal handler, the program before its root is called) installs its handlers here, and
/// kerf hooks them before the kernel has them.
pub fn action_site(
    label: u64,
    site: u64,
    mailbox: u64,
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    let routine = labels();
    let mut v = vec![
        labelled(move_rsp(-128), label),
        call(routine),
        move_rsp(128),
        op(Instruction::with2(Code::Mov_r32_imm32, Register::EAX, 13)),
        op(Instruction::with_branch(Code::Jmp_rel32_64, site + 5)),
    ];
    v.extend(glibc_action_notice(routine, mailbox, labels));
    v
}

/// Where the dynamic loader's `_dl_debug_state` goes, at label `label`, once kerf has spliced a
/// jump over its first bytes (`ret`, or `endbr64; ret`, and the padding after them): a call of
/// the routine that posts [`crate::mailbox::LOADED`] and waits (every register and flag as
/// they came), then the function's own `ret`. The loader calls it just before and just after
/// it maps or unmaps libraries (the debugger's breakpoint, `r_brk`), so kerf sees a library
/// that a root names before any of its code runs: it is mapped, not yet relocated.
pub fn load_site(label: u64, mailbox: u64, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    let routine = labels();
    let mut v = vec![
        labelled(move_rsp(-128), label),
        call(routine),
        move_rsp(128),
        Instruction::with(Code::Retnq),
    ];
    v.extend(load_notice(routine, mailbox, labels));
    v
}

/// The routine [`load_site`] calls, at label `label` (called past the red zone): it posts
/// [`crate::mailbox::LOADED`] and waits, every register and flag kept. A translation of the
/// loader's hook calls it too (the loader may run in the cache, and its call of the hook then
/// goes to the translation, not to the jump over the original).
pub fn load_notice(label: u64, mailbox: u64, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    use crate::mailbox as mb;
    let (post, done) = (labels(), labels());
    let body = vec![op(Instruction::with2(Code::Mov_r64_imm64, Register::RCX, mb::LOADED))];
    notice(label, mailbox, body, post, done, false, labels)
}

/// [`action_notice`] for an `rt_sigaction` of glibc's own (`__libc_sigaction`, in libc or the
/// loader; in the cache or at an [`action_site`]), at label `label`: this one reads the
/// action, since glibc passes its own copy on its stack, never a bad pointer. An action that
/// installs no handler, a handler kerf has hooked (the mailbox's `HANDLERS`), or one for
/// glibc's internal signals asks nothing: a program that sets its handlers again and again pays a compare loop, not a
/// round trip to kerf each time (20,000 `sigaction`s took 1 s under kerf with the round
/// trip).
pub fn glibc_action_notice(
    label: u64,
    mailbox: u64,
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    use crate::mailbox as mb;
    use Register::*;
    let (next, unknown, post, done) = (labels(), labels(), labels(), labels());
    let jump = |c: Code, to: u64| op(Instruction::with_branch(c, to));
    let body = vec![
        op(Instruction::with2(Code::Test_rm64_r64, RSI, RSI)),
        jump(Code::Je_rel32_64, done),
        // Not glibc's own SIGCANCEL and SIGSETXID (32 and 33, `rdi`), whose handlers never
        // read the interrupted PC (kerf's looks pass them over too).
        op(Instruction::with2(Code::Lea_r32_m, ECX, at(RDI, -32))),
        op(Instruction::with2(Code::Cmp_rm32_imm8, ECX, 1)),
        jump(Code::Jbe_rel32_64, done),
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, at(RSI, 0))),
        op(Instruction::with2(Code::Cmp_rm64_imm8, RCX, 1)),
        jump(Code::Jbe_rel32_64, done),
        op(Instruction::with2(Code::Mov_r64_imm64, RAX, mailbox)),
        op(Instruction::with2(Code::Mov_r64_rm64, RDX, at(RAX, mb::HANDLERS as i32))),
        op(Instruction::with2(Code::Cmp_rm64_imm32, RDX, mb::HANDLERS_MAX as i32)),
        jump(Code::Ja_rel32_64, unknown),
        // rax walks the handlers.
        op(Instruction::with2(Code::Lea_r64_m, RAX, at(RAX, mb::HANDLERS as i32))),
        labelled(op(Instruction::with1(Code::Dec_rm64, RDX)), next),
        jump(Code::Js_rel32_64, unknown),
        op(Instruction::with2(Code::Add_rm64_imm8, RAX, 8)),
        op(Instruction::with2(Code::Cmp_r64_rm64, RCX, at(RAX, 0))),
        jump(Code::Jne_rel32_64, next),
        jump(Code::Jmp_rel32_64, done),
        // A handler kerf has not hooked: asked about as `action_notice` asks.
        labelled(op(Instruction::with2(Code::Mov_r64_rm64, RCX, RSI)), unknown),
        op(Instruction::with2(Code::Shr_rm64_imm8, RCX, mb::ADDRESS_BITS)),
        jump(Code::Jne_rel32_64, done),
        op(Instruction::with2(Code::Mov_r64_imm64, RCX, mb::ACTION)),
        op(Instruction::with2(Code::Or_r64_rm64, RCX, RSI)),
        // (On at `post`.)
    ];
    notice(label, mailbox, body, post, done, true, labels)
}

/// The routine a translated `syscall` whose number is not set right before it calls before
/// it, at label `label` (glibc's `syscall()` takes the number in a register): for
/// `rt_sigaction` (`eax` 13, as the kernel reads the number) it goes on to the
/// [`action_notice`] at label `action`, which returns to the caller; for any other call it
/// returns at once. The flags are kept: `syscall` hands them to the code after it.
pub fn action_check(label: u64, action: u64, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    let other = labels();
    vec![
        labelled(Instruction::with(Code::Pushfq), label),
        op(Instruction::with2(Code::Cmp_rm32_imm8, Register::EAX, 13)),
        op(Instruction::with_branch(Code::Jne_rel32_64, other)),
        Instruction::with(Code::Popfq),
        op(Instruction::with_branch(Code::Jmp_rel32_64, action)),
        labelled(Instruction::with(Code::Popfq), other),
        Instruction::with(Code::Retnq),
    ]
}

/// A notice routine around `body` (which leaves its question in `rcx` and goes to label
/// `post`, or to label `done` for none): every register and the flags kept, the question
/// posted while kerf listens, its answer waited for ([`post_and_wait`]). A question that
/// kerf answers without translating or dropping code (`quick`) is counted in `SIG_PENDING`
/// while it waits, as a handler's are: a signal that interrupts another thread in the cache
/// meanwhile is still asked about (see [`signal`]) instead of taken for one that came while
/// kerf was busy with a miss.
#[allow(clippy::too_many_arguments)]
fn notice(
    label: u64,
    mailbox: u64,
    body: Vec<Instruction>,
    post: u64,
    done: u64,
    quick: bool,
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    use crate::mailbox as mb;
    use Register::*;
    let saved = [RAX, RCX, RDX, RDI, RSI, R8, R9, R10, R11, R12];
    let mut v = vec![labelled(Instruction::with(Code::Pushfq), label)];
    v.extend(saved.iter().map(|&r| op(Instruction::with1(Code::Push_r64, r))));
    v.extend(body);
    v.extend([
        // Not while kerf is not listening (it would answer nothing).
        labelled(op(Instruction::with2(Code::Mov_r64_imm64, RAX, mailbox)), post),
        op(Instruction::with2(Code::Cmp_rm32_imm8, at(RAX, mb::LISTEN as i32), 0)),
        op(Instruction::with_branch(Code::Je_rel32_64, done)),
    ]);
    let pending = |i: Result<Instruction, iced_x86::IcedError>| {
        let mut i = op(i);
        i.set_has_lock_prefix(true);
        i
    };
    let pending_at = || at(RAX, mb::SIG_PENDING as i32);
    if quick {
        v.push(pending(Instruction::with1(Code::Inc_rm32, pending_at())));
    }
    let served = if quick { labels() } else { done };
    v.extend(post_and_wait(mailbox, served, false, labels));
    if quick {
        v.push(labelled(op(Instruction::with2(Code::Mov_r64_imm64, RAX, mailbox)), served));
        v.push(pending(Instruction::with1(Code::Dec_rm32, pending_at())));
    }
    let mut pops = saved.iter().rev().map(|&r| op(Instruction::with1(Code::Pop_r64, r)));
    v.push(labelled(pops.next().expect("registers saved"), done));
    v.extend(pops);
    v.extend([Instruction::with(Code::Popfq), Instruction::with(Code::Retnq)]);
    v
}

/// The indirect entry kerf gives a target it cannot translate (code outside every module,
/// generated at run time or loaded after attach), at label `label`: it leaves for `target` as
/// the miss path does, counted, without asking kerf again.
pub fn escape_entry(label: u64, target: u64, count: u64, last: u64) -> Vec<Instruction> {
    let mut v = vec![
        labelled(op(Instruction::with2(Code::Mov_r64_imm64, Register::RCX, target)), label),
        store(EXIT_SLOT, Register::RCX),
        Instruction::with(Code::Pushfq),
    ];
    v.extend(count_and_leave(count, last));
    v
}

/// The end of a miss (the flags pushed, `rcx` the target, also in the exit slot): count it,
/// keep the target, put the registers back and leave for the target with one `ret`.
fn count_and_leave(count: u64, last: u64) -> Vec<Instruction> {
    let mut inc = op(Instruction::with1(Code::Inc_rm64, rip(count)));
    inc.set_has_lock_prefix(true);
    vec![
        inc,
        Instruction::with(Code::Popfq),
        op(Instruction::with2(Code::Mov_rm64_r64, rip(last), Register::RCX)),
        load(Register::RAX, SAVED_RAX),
        load(Register::RCX, SAVED_RCX),
        load(Register::RDX, SAVED_RDX),
        move_rsp(EXIT_SLOT),
        op(Instruction::with1(Code::Retnq_imm16, EXIT_POP as u32)),
    ]
}

/// An indirect entry at label `label`: undo the lookup frame, then go on at label `to` (a
/// block's translation, or a return site inside one).
pub fn indirect_entry(label: u64, to: u64) -> Vec<Instruction> {
    let mut first = load(Register::RAX, SAVED_RAX);
    first.set_ip(label);
    vec![
        first,
        load(Register::RCX, SAVED_RCX),
        load(Register::RDX, SAVED_RDX),
        move_rsp(FRAME),
        op(Instruction::with_branch(Code::Jmp_rel32_64, to)),
    ]
}

/// The indirect entry a translation shares among its return sites (at label `label`), in
/// place of one [`indirect_entry`] each: most return sites are reached only by `ret`s,
/// which go to the table's continuation and never to the entry (python3.11's translation
/// ahead has 17 k return sites of its 25 k entries), so the few jumps that come to one
/// (`longjmp` to a `setjmp`'s return site, a `ret` whose site is in the overflow list) go
/// the long way. Every jump through an entry word leaves `rdx` at the way it read (for the
/// overflow list, [`crate::table::CONT`] bytes before the pair's continuation), so the
/// continuation is at `[rdx + CONT]`: it goes into the exit slot, the registers are put back
/// and `ret` leaves the frame for it, as a miss leaves for original code (no flags touched;
/// the continuation of a way never changes while its key can still be matched, see
/// [`crate::table::Table::retire`]).
pub fn lazy_entry(label: u64) -> Vec<Instruction> {
    let mut v = vec![
        labelled(load_from(Register::RAX, Register::RDX, crate::table::CONT as i32), label),
        store(EXIT_SLOT, Register::RAX),
        load(Register::RAX, SAVED_RAX),
        load(Register::RCX, SAVED_RCX),
        load(Register::RDX, SAVED_RDX),
        move_rsp(EXIT_SLOT),
    ];
    v.push(op(Instruction::with1(Code::Retnq_imm16, EXIT_POP as u32)));
    v
}

/// An exit stub at label `label` for a direct transfer to `target`, which has no
/// translation: the stack pointer is the one `target` expects; leave through the miss path.
pub fn exit_stub(label: u64, target: u64, miss: u64) -> Vec<Instruction> {
    let mut v = enter(0);
    v[0].set_ip(label);
    v.push(op(Instruction::with2(Code::Mov_r64_imm64, Register::RCX, target)));
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, miss)));
    v
}

/// A linkable exit stub at label `label`: `jmp [link]` through a word of the data area,
/// which first holds the address of the exit stub at label `slow` after it, and which kerf
/// sets to `target`'s translation once it has one (one aligned 8-byte store: a thread sees
/// the old or the new address, either of which is right).
pub fn linked_exit_stub(
    label: u64,
    link: u64,
    slow: u64,
    target: u64,
    miss: u64,
) -> Vec<Instruction> {
    let mut v = vec![labelled(op(Instruction::with1(Code::Jmp_rm64, rip(link))), label)];
    v.extend(exit_stub(slow, target, miss));
    v
}

/// `call stub`: a translated call. It pushes the address of the next instruction, the call's
/// continuation in the cache, which the CPU's return-stack predictor remembers; the stub
/// ([`call_stub`]) replaces it on the stack with the original return address at once.
pub fn call(stub: u64) -> Instruction {
    op(Instruction::with_branch(Code::Call_rel32_64, stub))
}

/// The start of a call's stub at label `label`: the original return address `ret` replaces
/// the continuation the `call` pushed, as one 8-byte store (the `ret` that pops it reads it
/// with one 8-byte load, which two 4-byte stores could not forward to: a stall of a dozen
/// cycles on every short call). A register dead where the callee begins (`scratch`) carries
/// it; without one, `r11` does and is put back, kept just below the stack pointer meanwhile,
/// where nothing is live at a call and a signal frame never goes (the red zone). The
/// callee's jump or lookup follows.
///
/// A return address below 2 GiB (a non-PIE executable's: python3.11's) is stored as a
/// sign-extended 32-bit immediate instead, one instruction that touches no register.
pub fn call_stub(label: u64, ret: u64, scratch: Option<Register>) -> Vec<Instruction> {
    let mut v = match (i32::try_from(ret), scratch) {
        (Ok(imm), _) => vec![op(Instruction::with2(Code::Mov_rm64_imm32, at_rsp(0), imm))],
        (Err(_), Some(r)) => {
            vec![op(Instruction::with2(Code::Mov_r64_imm64, r, ret)), store(0, r)]
        }
        (Err(_), None) => vec![
            store(-8, Register::R11),
            op(Instruction::with2(Code::Mov_r64_imm64, Register::R11, ret)),
            store(0, Register::R11),
            load(Register::R11, -8),
        ],
    };
    v[0].set_ip(label);
    v
}

/// How a translated table's dispatch reads its copy (see [`table_dispatch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyAt {
    /// Through an absolute 32-bit address, as the original operand read the table (the copy
    /// lies below 2 GiB); `base`: a register the original operand added, with the value that
    /// makes it name the table, checked first.
    Absolute { base: Option<(Register, u64)> },
    /// Through a register set to the copy's address with a RIP-relative `lea`: the jump
    /// register, or `base` (the original operand's base, when the index is the jump
    /// register).
    Near { base: Option<Register> },
}

/// A jump table's dispatch through a translated copy of its table, in place of the
/// instruction that reads the original table (`mov reg, [T + index*8]` or `movsxd reg,
/// [b + index*4]` before `jmp reg`, or `jmp [T + index*8]` itself, `reg` `None`): an index
/// within the table's `entries` reads the copy at `words` (each word the cache address of
/// the entry's target, see [`table_stub`]) and jumps there; any other index goes to label
/// `generic`, where the original instruction and the lookup follow, and so does a base
/// register that does not hold the table's address. The compares clobber the flags, which
/// must be dead at every target; `reg` is written before the original would write it.
pub fn table_dispatch(
    copy: CopyAt,
    index: Register,
    entries: u64,
    words: u64,
    reg: Option<Register>,
    generic: u64,
) -> Vec<Instruction> {
    let mut v = Vec::new();
    if let CopyAt::Absolute { base: Some((b, value)) } = copy {
        v.push(op(Instruction::with2(Code::Cmp_rm64_imm32, b, value as i32)));
        v.push(op(Instruction::with_branch(Code::Jne_rel32_64, generic)));
    }
    v.push(op(Instruction::with2(Code::Cmp_rm64_imm32, index, (entries - 1) as i32)));
    v.push(op(Instruction::with_branch(Code::Ja_rel32_64, generic)));
    let absolute =
        MemoryOperand::new(Register::None, index, 8, words as i64, 4, false, Register::None);
    match (copy, reg) {
        (CopyAt::Absolute { .. }, Some(r)) => {
            v.push(op(Instruction::with2(Code::Mov_r64_rm64, r, absolute)));
            v.push(op(Instruction::with1(Code::Jmp_rm64, r)));
        }
        (CopyAt::Absolute { .. }, None) => v.push(op(Instruction::with1(Code::Jmp_rm64, absolute))),
        (CopyAt::Near { base }, Some(r)) => {
            let at = base.unwrap_or(r);
            v.push(op(Instruction::with2(Code::Lea_r64_m, at, rip(words))));
            let word = MemoryOperand::with_base_index_scale(at, index, 8);
            v.push(op(Instruction::with2(Code::Mov_r64_rm64, r, word)));
            v.push(op(Instruction::with1(Code::Jmp_rm64, r)));
        }
        // (Never made: the near copy needs a register to hold its address.)
        (CopyAt::Near { .. }, None) => {
            v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, generic)))
        }
    }
    v
}

/// A translated table's entry at label `label` for a target whose code reads registers the
/// dispatch changed: each gets back the value the original dispatch left there
/// (`put_back`), before the stub goes on at label `to` (the target's translation).
pub fn table_stub(label: u64, put_back: &[(Register, u64)], to: u64) -> Vec<Instruction> {
    let mut v: Vec<Instruction> = put_back
        .iter()
        .map(|&(r, value)| op(Instruction::with2(Code::Mov_r64_imm64, r, value)))
        .collect();
    if let Some(first) = v.first_mut() {
        first.set_ip(label);
    }
    v.push(jmp(to));
    v
}

/// The start of a call copied in place (see `translate`'s inlined calls): the original return
/// address `ret` pushed as the `call` would push it, with no `call`: the callee's copy follows
/// and its `ret`s ([`inlined_ret`]) jump back, so nothing asks the return-stack predictor.
/// An address below 2 GiB is pushed as a sign-extended immediate; any other is read from
/// `word`, a data word holding it (one instruction either way, no register, flags kept).
pub fn push_return_address(ret: u64, word: u64) -> Instruction {
    match i32::try_from(ret) {
        Ok(imm) => op(Instruction::with1(Code::Pushq_imm32, imm)),
        Err(_) => op(Instruction::with1(Code::Push_rm64, rip(word))),
    }
}

/// A `ret` of a function copied in place of a call pushed by [`push_return_address`]: while
/// the return slot still holds that call's original return address (`ret`, or `word` holding
/// it), the slot is popped and the copy jumps to `cont`, the call's continuation, without the
/// table; otherwise (a function that replaced its return address) on to `slow`, the `ret`'s
/// own translation. The compare clobbers the flags and, for an address above 2 GiB,
/// `scratch`: both must be dead at the return site.
pub fn inlined_ret(
    ret: u64,
    word: u64,
    scratch: Option<Register>,
    cont: u64,
    slow: u64,
) -> Vec<Instruction> {
    let mut v = match (i32::try_from(ret), scratch) {
        (Ok(imm), _) => vec![op(Instruction::with2(Code::Cmp_rm64_imm32, at_rsp(0), imm))],
        (Err(_), Some(r)) => vec![
            op(Instruction::with2(Code::Mov_r64_rm64, r, rip(word))),
            op(Instruction::with2(Code::Cmp_rm64_r64, at_rsp(0), r)),
        ],
        // (Never made: the caller gives a scratch register for such an address.)
        (Err(_), None) => return vec![jmp(slow)],
    };
    v.push(op(Instruction::with_branch(Code::Jne_rel32_64, slow)));
    v.push(move_rsp(8));
    v.push(jmp(cont));
    v
}

/// A jump through fixed slot `slot` (`jmp [rip+X]`, a PLT stub's) that held `value` when it
/// was translated, with `scratch` and the flags dead: straight to `hit` (the translation of
/// `value`) while the slot still holds it, else to `other` (the lookup, as any indirect
/// jump). Two instructions and a load where the lookup takes a frame and a hash.
pub fn slot_guard(
    slot: u64,
    value: u64,
    scratch: Register,
    hit: u64,
    other: u64,
) -> Vec<Instruction> {
    vec![
        op(Instruction::with2(Code::Mov_r64_imm64, scratch, value)),
        op(Instruction::with2(Code::Cmp_rm64_r64, rip(slot), scratch)),
        op(Instruction::with_branch(Code::Jne_rel32_64, other)),
        jmp(hit),
    ]
}

/// `jmp rel32` to `target` (an original address the encoder links to its translation, or a
/// label).
pub fn jmp(target: u64) -> Instruction {
    op(Instruction::with_branch(Code::Jmp_rel32_64, target))
}

/// Per-thread counters: where each thread's counter slab comes from. A plugin's counter is
/// then one `inc qword gs:[disp]` ([`kerf_codegen::ir::Addr::PerThread`]), with no check of
/// which thread runs and no lock, exact whatever the threads: every thread that runs
/// translated code has a slab of its own, whose address is its `gs` base (which user-space
/// x86-64 Linux programs leave unused; kerf uses this only where the kernel lets a thread
/// write its own base, `FSGSBASE`). A thread gets its slab at the gates, the only ways into
/// the cache for a thread that has none: a root's outer entry (a call from the original
/// code) and the instruction after a `syscall` (a thread that `clone` made, which starts with
/// its parent's `gs` base).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slabs {
    /// The slab region: a header page (at [`SLABS_CLAIMED`] the number of slabs handed out
    /// fresh so far, at [`SLABS_FREE`] the list of slabs kerf took back from threads that
    /// ended), then the slabs, `1 << span_log2` bytes each.
    pub region: u64,
    pub span_log2: u8,
    /// The region's address space: `1 << size_log2` bytes from `region`, all kerf's (the
    /// header and slabs, then unused room). A gate takes a `gs` base outside it for the
    /// program's own ([`thread_gate`]).
    pub size_log2: u8,
    /// How many slabs there are. The last is shared by every thread that claims one after
    /// the others are gone: their counts may lose updates, and kerf says so (the header's
    /// count tells how many claimed).
    pub count: u32,
    /// Where the thread's id is in its thread control block (`fs:[tid]`, glibc's).
    pub tid: i32,
}

/// Bytes of the slab region's header, before the first slab.
pub const SLABS_HEADER: u64 = 4096;
/// Header words: slabs handed out fresh (`lock xadd`), and the free list's head: a slab's
/// number plus one in the low half (0: empty), a count of the head's changes in the high half
/// (so that a claim that read the head, then lost the race to pops and pushes that put the
/// same slab back, fails its `cmpxchg`).
pub const SLABS_CLAIMED: i32 = 0;
pub const SLABS_FREE: i32 = 8;
/// Header word: claims that took a slab off the free list.
pub const SLABS_REUSED: i32 = 16;
/// The slab's owner: the id of the thread whose `gs` base it is (a 32-bit word; 0 while the
/// slab is free).
pub const SLAB_OWNER: i32 = 0;
/// A free slab's link: the next free slab's number plus one (0: none).
pub const SLAB_NEXT: i32 = 8;
/// A 32-bit word, nonzero in the last slab only (kerf sets it when it maps the region), which
/// threads share once the others are gone ([`Slabs::count`]): a thread keeps no ring
/// address there ([`SLAB_RINGS`]).
pub const SLAB_SHARED: i32 = 16;
/// Where the words start that keep a thread's ring addresses, one per module with rings
/// (`kerf_codegen::SlabRing`: 0 until the thread's first record there), after the owner's
/// cache line and up to [`SLAB_WORDS`].
pub const SLAB_RINGS: u64 = 64;
/// Where the counters start in a slab: the owner's line and the ring words have its first
/// page (which the owner's word makes memory anyway).
pub const SLAB_WORDS: u64 = 4096;

fn fs_tid(tid: i32) -> MemoryOperand {
    kerf_arch::x86_64::segment_operand(Register::FS, tid)
}

/// A thread's gate (see [`Slabs`]): unless its `gs` base is a slab it owns (nonzero, the
/// slab's owner its id), it calls `claim` ([`claim_slab`]) for one. Every register and flag
/// as they came; `rcx` and `rdx` are kept on the stack `skip` bytes below the stack pointer
/// (`0` at a function's entry, whose red zone holds nothing of the program's; `128` after a
/// `syscall`, past the red zone of the code that made it). The compares are flag-free, as
/// [`outer_check`]'s: `rcx = tid - owner` as `tid + !owner + 1`, then `jrcxz`.
///
/// A nonzero base outside the slab region is the program's own (`arch_prctl(ARCH_SET_GS)`,
/// `wrgsbase`: Wine's, an emulator's): its counters would write into the program's memory
/// there, and a claim would take the base from it. So the base is range-checked before
/// anything is read through it (`(base - region) >> size_log2` with `shrx`, which leaves the
/// flags alone: BMI2), and such a thread counts itself at `foreign_count` (`lock inc`, the
/// flags kept on the stack) and leaves for label `foreign` with every register, flag and the
/// stack pointer as they came: out of the cache.
pub fn thread_gate(
    skip: i32,
    slabs: &Slabs,
    [claim, foreign, foreign_count]: [u64; 3],
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    use Register::*;
    let (call_claim, ok, ours, out) = (labels(), labels(), labels(), labels());
    let owner = kerf_arch::x86_64::segment_operand(GS, SLAB_OWNER);
    let diff = MemoryOperand::new(RCX, RDX, 1, 1, 1, false, None);
    let offset = MemoryOperand::new(RCX, RDX, 1, 0, 0, false, None);
    let push = |r| op(Instruction::with1(Code::Push_r64, r));
    let pop = |r| op(Instruction::with1(Code::Pop_r64, r));
    let mut inc = op(Instruction::with1(Code::Inc_rm64, rip(foreign_count)));
    inc.set_has_lock_prefix(true);
    let mut v = Vec::new();
    if skip != 0 {
        v.push(move_rsp(-skip));
    }
    v.extend([
        push(RCX),
        push(RDX),
        op(Instruction::with1(Code::Rdgsbase_r64, RCX)),
        op(Instruction::with_branch(Code::Jrcxz_rel8_64, call_claim)),
        // rcx = (base - region) >> size_log2: zero inside the region.
        op(Instruction::with2(Code::Mov_r64_imm64, RDX, slabs.region.wrapping_neg())),
        op(Instruction::with2(Code::Lea_r64_m, RCX, offset)),
        op(Instruction::with2(Code::Mov_r32_imm32, EDX, u32::from(slabs.size_log2))),
        op(Instruction::with3(Code::VEX_Shrx_r64_rm64_r64, RCX, RCX, RDX)),
        op(Instruction::with_branch(Code::Jrcxz_rel8_64, ours)),
        op(Instruction::with_branch(Code::Jmp_rel32_64, out)),
        labelled(op(Instruction::with2(Code::Mov_r32_rm32, ECX, owner)), ours),
        op(Instruction::with2(Code::Mov_r32_rm32, EDX, fs_tid(slabs.tid))),
        op(Instruction::with1(Code::Not_rm64, RCX)),
        op(Instruction::with2(Code::Lea_r64_m, RCX, diff)),
        op(Instruction::with_branch(Code::Jrcxz_rel8_64, ok)),
        labelled(call(claim), call_claim),
        labelled(pop(RDX), ok),
        pop(RCX),
    ]);
    if skip != 0 {
        v.push(move_rsp(skip));
    }
    let done = labels();
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, done)));
    // The program's own base: counted, then out with everything as it came.
    v.extend([labelled(Instruction::with(Code::Pushfq), out), inc, Instruction::with(Code::Popfq)]);
    v.extend([pop(RDX), pop(RCX)]);
    if skip != 0 {
        v.push(move_rsp(skip));
    }
    v.push(op(Instruction::with_branch(Code::Jmp_rel32_64, foreign)));
    v.push(labelled(Instruction::with(Code::Nopd), done));
    v
}

/// The claim a [`thread_gate`] calls, at label `label` (`rcx` and `rdx` saved by the gate):
/// a slab from the free list if it has one (`lock cmpxchg` of the head, tried again when
/// another claim or kerf changed it meanwhile), else the next fresh one (`lock xadd`), or the
/// last when none is left; then the thread's id in its owner word, and the slab's address as
/// the thread's `gs` base. No two threads get one slab but the last. The flags, `rax` and
/// `rbx` are kept on the stack meanwhile.
pub fn claim_slab(label: u64, slabs: &Slabs, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    use Register::*;
    let (pop, fresh, have) = (labels(), labels(), labels());
    let last = slabs.count.saturating_sub(1);
    let lock = |mut i: Instruction| {
        i.set_has_lock_prefix(true);
        i
    };
    let slab = MemoryOperand::new(RAX, RDX, 1, SLABS_HEADER as i64, 1, false, None);
    let next =
        MemoryOperand::new(RDX, RCX, 1, SLABS_HEADER as i64 + SLAB_NEXT as i64, 1, false, None);
    let less_one = |r: Register| op(Instruction::with2(Code::Lea_r32_m, r, at(RAX, -1)));
    let shift = |r: Register, n: u32| op(Instruction::with2(Code::Shl_rm64_imm8, r, n));
    vec![
        labelled(Instruction::with(Code::Pushfq), label),
        op(Instruction::with1(Code::Push_r64, RAX)),
        op(Instruction::with1(Code::Push_r64, RBX)),
        op(Instruction::with2(Code::Mov_r64_imm64, RDX, slabs.region)),
        // The free list: rax = head; rcx = the head slab's link; rbx = (changes + 1, link).
        labelled(op(Instruction::with2(Code::Mov_r64_rm64, RAX, at(RDX, SLABS_FREE))), pop),
        op(Instruction::with2(Code::Test_rm32_r32, EAX, EAX)),
        op(Instruction::with_branch(Code::Je_rel32_64, fresh)),
        less_one(ECX),
        shift(RCX, slabs.span_log2 as u32),
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, next)),
        op(Instruction::with2(Code::Mov_r64_rm64, RBX, RAX)),
        op(Instruction::with2(Code::Shr_rm64_imm8, RBX, 32)),
        op(Instruction::with1(Code::Inc_rm64, RBX)),
        shift(RBX, 32),
        op(Instruction::with2(Code::Or_r64_rm64, RBX, RCX)),
        lock(op(Instruction::with2(Code::Cmpxchg_rm64_r64, at(RDX, SLABS_FREE), RBX))),
        op(Instruction::with_branch(Code::Jne_rel32_64, pop)),
        lock(op(Instruction::with1(Code::Inc_rm64, at(RDX, SLABS_REUSED)))),
        less_one(EAX),
        op(Instruction::with_branch(Code::Jmp_rel32_64, have)),
        // A fresh slab, or the last.
        labelled(op(Instruction::with2(Code::Mov_r32_imm32, EAX, 1)), fresh),
        lock(op(Instruction::with2(Code::Xadd_rm64_r64, at(RDX, SLABS_CLAIMED), RAX))),
        op(Instruction::with2(Code::Cmp_rm64_imm32, RAX, last as i32)),
        op(Instruction::with_branch(Code::Jb_rel32_64, have)),
        op(Instruction::with2(Code::Mov_r32_imm32, EAX, last)),
        labelled(shift(RAX, slabs.span_log2 as u32), have),
        op(Instruction::with2(Code::Lea_r64_m, RAX, slab)),
        op(Instruction::with2(Code::Mov_r32_rm32, ECX, fs_tid(slabs.tid))),
        op(Instruction::with2(Code::Mov_rm32_r32, at(RAX, SLAB_OWNER), ECX)),
        op(Instruction::with1(Code::Wrgsbase_r64, RAX)),
        op(Instruction::with1(Code::Pop_r64, RBX)),
        op(Instruction::with1(Code::Pop_r64, RAX)),
        Instruction::with(Code::Popfq),
        Instruction::with(Code::Retnq),
    ]
}
