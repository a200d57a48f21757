//! The two sequences that let a program's signal handlers see original addresses: a
//! handler's entry (spliced at its first instruction) rewrites the interrupted PC of its
//! signal frame from a cache address to the original address it stands for, and the return
//! from the handler puts the cache address back, so that the thread goes on in the cache.
//!
//! Why: a handler that reads the interrupted PC decides by it. Go's preemption signal
//! (SIGURG) looks the PC up in Go's tables and preempts only at an address it knows; a
//! goroutine spinning in the cache was never preempted and the program hung (stop-the-world
//! waits for it). Sampling profilers, JVM safepoints and crash handlers read it too.
//!
//! # The signal frame (x86-64 Linux, `rt_sigframe`)
//!
//! At a handler's first instruction `[rsp]` is the action's `sa_restorer` (the kernel always
//! pushes it: x86-64 requires `SA_RESTORER`) and the `ucontext` starts at `rsp+8`. In it:
//! `uc_mcontext.rip` at [`UC_RIP`], and `uc_mcontext.__reserved1` (eight words the kernel
//! neither writes nor reads back) at [`UC_SPARE`], where the entry leaves what the return
//! needs: the cache address, the original address written, the program's restorer, and a
//! check word over the three (the words are stack garbage otherwise).
//!
//! # The entry ([`signal_entry`])
//!
//! 1. Not a signal delivery (`[rsp]` is not the restorer: the handler called as a function):
//!    straight on to the handler's displaced instructions.
//! 2. The interrupted PC in no code room (the mailbox's `ROOMS`): on. Kerf not listening, or a
//!    miss's ticket open (any open ticket that is not a signal question, `SIG_PENDING`: a
//!    thread waiting for a miss's answer is most often the one the signal interrupted): on,
//!    counted (`SIG_BUSY`).
//! 3. Otherwise it asks kerf through the mailbox ([`crate::mailbox::REVERSE`]) and waits as
//!    a miss does; kerf answers with the original address of that clean point, or 0 (the PC
//!    is in glue code, where the state is not the program's: the frame is left as it is).
//! 4. With an answer: the PC becomes the original address, the spare words are filled, and
//!    the frame's return address becomes the return sequence.
//!
//! # The return ([`signal_return`])
//!
//! Reached by the handler's `ret`, with the stack pointer at the `ucontext` (where the
//! program's restorer expects it) and every register free (`rt_sigreturn` loads them all from
//! the frame). If the PC is still the original address written, and the JIT is still in (a
//! word kerf clears when it takes the JIT out), the cache address goes back; then on to the
//! program's restorer. A handler that changed the PC (Go's `asyncPreempt`, a handler that
//! steps over a faulting instruction) sends the thread where it asked: kerf is asked where
//! that is in the cache ([`crate::mailbox::RESUME`]), and the thread goes on there, or in the
//! original code if kerf has no translation for it.

use super::{at, at_rsp, labelled, op, post_and_wait, rip};
use crate::mailbox as mb;
use iced_x86::{Code, Instruction, MemoryOperand, Register};

/// Offsets in the `ucontext` (glibc's `ucontext_t` and the kernel's `struct ucontext`
/// agree): `uc_flags`, `uc_link`, `uc_stack` (24 bytes), then `uc_mcontext`, whose 23
/// general registers end with `rip` at index 16, then the `fpstate` pointer, then
/// `__reserved1[8]`.
pub const UC_RIP: i32 = 40 + 16 * 8;
pub const UC_SPARE: i32 = 40 + 23 * 8 + 8;
/// The spare words: the cache address, the original written, the restorer, the check.
const SPARE_CACHE: i32 = UC_SPARE;
const SPARE_ORIG: i32 = UC_SPARE + 8;
const SPARE_RESTORER: i32 = UC_SPARE + 16;
const SPARE_CHECK: i32 = UC_SPARE + 24;
/// What the check word is xored with ("kerfsig", no address has these high bits).
pub const CHECK_KEY: u64 = 0x6b65_7266_7369_6721;

/// The registers the entry saves after `rax` and the flags (`post_and_wait` clobbers them
/// all but `rbx`, which keeps the PC asked about; the handler gets them back as the kernel
/// set them).
const SAVED: [Register; 10] = [
    Register::RBX,
    Register::RCX,
    Register::RDX,
    Register::RSI,
    Register::RDI,
    Register::R8,
    Register::R9,
    Register::R10,
    Register::R11,
    Register::R12,
];
/// Bytes pushed by the entry before it looks at the frame: `rax`, the flags, [`SAVED`].
const PUSHED: i32 = 8 * (2 + SAVED.len() as i32);

fn jump(c: Code, to: u64) -> Instruction {
    op(Instruction::with_branch(c, to))
}

fn mov_imm(r: Register, v: u64) -> Instruction {
    op(Instruction::with2(Code::Mov_r64_imm64, r, v))
}

/// A handler's entry at label `label`: see the module comment. `restorer` is the action's
/// `sa_restorer`, `back` the address of the [`signal_return`] for this handler, `go_on` the
/// label of the handler's displaced instructions (then on in the original handler).
pub fn signal_entry(
    label: u64,
    mailbox: u64,
    restorer: u64,
    back: u64,
    go_on: u64,
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    use Register::*;
    let (plain, next, served, done) = (labels(), labels(), labels(), labels());
    let (busy, labels_answer) = (labels(), labels());
    let uc = |off: i32| at_rsp(PUSHED + 8 + off);
    let mut v = vec![
        labelled(op(Instruction::with1(Code::Push_r64, RAX)), label),
        mov_imm(RAX, restorer),
        op(Instruction::with2(Code::Cmp_rm64_r64, at_rsp(8), RAX)),
        jump(Code::Jne_rel32_64, plain),
        Instruction::with(Code::Pushfq),
    ];
    v.extend(SAVED.iter().map(|&r| op(Instruction::with1(Code::Push_r64, r))));
    v.extend([
        // 2. rcx: the interrupted PC; rax walks the rooms, rdx counts them down.
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, uc(UC_RIP))),
        mov_imm(RAX, mailbox),
        op(Instruction::with2(Code::Mov_r64_rm64, RDX, at(RAX, mb::ROOMS as i32))),
        op(Instruction::with2(Code::Lea_r64_m, RAX, at(RAX, mb::ROOMS as i32 - 8))),
        labelled(op(Instruction::with1(Code::Dec_rm64, RDX)), next),
        jump(Code::Js_rel32_64, done),
        op(Instruction::with2(Code::Add_rm64_imm8, RAX, 16)),
        op(Instruction::with2(Code::Cmp_r64_rm64, RCX, at(RAX, 8))),
        jump(Code::Jae_rel32_64, next),
        op(Instruction::with2(Code::Cmp_r64_rm64, RCX, at(RAX, 0))),
        jump(Code::Jb_rel32_64, next),
        mov_imm(RAX, mailbox),
        op(Instruction::with2(Code::Cmp_rm32_imm8, at(RAX, mb::LISTEN as i32), 0)),
        jump(Code::Je_rel32_64, busy),
        // Only while every ticket open is such a question (`SIG_PENDING`): a kerf busy with a
        // miss answers late, and the frame would stay on the stack meanwhile, where a flush
        // finds it and must refuse (the thread most often waits in the miss path itself
        // then, its own ticket open, at glue code no answer could rewrite).
        op(Instruction::with2(Code::Mov_r32_rm32, EDX, at(RAX, mb::POSTED as i32))),
        op(Instruction::with2(Code::Sub_r32_rm32, EDX, at(RAX, mb::ANSWERED as i32))),
        op(Instruction::with2(Code::Cmp_r32_rm32, EDX, at(RAX, mb::SIG_PENDING as i32))),
        jump(Code::Jg_rel32_64, busy),
        locked(op(Instruction::with1(Code::Inc_rm32, at(RAX, mb::SIG_PENDING as i32)))),
        // 3. Ask (`r9` keeps the ticket, `rbx` the PC).
        op(Instruction::with2(Code::Mov_r64_rm64, RBX, RCX)),
        mov_imm(RDX, mb::REVERSE),
        op(Instruction::with2(Code::Or_r64_rm64, RCX, RDX)),
    ]);
    v.extend(post_and_wait(mailbox, served, labels));
    v.extend([
        labelled(mov_imm(RAX, mailbox), served),
        locked(op(Instruction::with1(Code::Dec_rm32, at(RAX, mb::SIG_PENDING as i32)))),
    ]);
    v.extend(answer(labels_answer, mailbox, done));
    v.extend([
        // 4. rdx: the cache address, rcx: its original, rax: the restorer. Only if the frame
        // still holds the PC asked about (kerf rewrites frames itself when it empties the
        // cache meanwhile: see `rewritten`).
        op(Instruction::with2(Code::Mov_r64_rm64, RDX, uc(UC_RIP))),
        op(Instruction::with2(Code::Cmp_r64_rm64, RDX, RBX)),
        jump(Code::Jne_rel32_64, done),
        op(Instruction::with2(Code::Mov_rm64_r64, uc(SPARE_CACHE), RDX)),
        op(Instruction::with2(Code::Mov_rm64_r64, uc(SPARE_ORIG), RCX)),
        op(Instruction::with2(Code::Mov_rm64_r64, uc(UC_RIP), RCX)),
        op(Instruction::with2(Code::Mov_r64_rm64, RAX, at_rsp(PUSHED))),
        op(Instruction::with2(Code::Mov_rm64_r64, uc(SPARE_RESTORER), RAX)),
        op(Instruction::with2(Code::Xor_r64_rm64, RAX, RDX)),
        op(Instruction::with2(Code::Xor_r64_rm64, RAX, RCX)),
        mov_imm(RDX, CHECK_KEY),
        op(Instruction::with2(Code::Xor_r64_rm64, RAX, RDX)),
        op(Instruction::with2(Code::Mov_rm64_r64, uc(SPARE_CHECK), RAX)),
        mov_imm(RAX, back),
        op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(PUSHED), RAX)),
    ]);
    v.extend(counted(RAX, mailbox + mb::SIG_MOVED));
    v.push(jump(Code::Jmp_rel32_64, done));
    // In the cache, not asked: counted (its handler sees the cache address).
    v.push(labelled(mov_imm(RAX, mailbox + mb::SIG_BUSY), busy));
    v.push(locked(op(Instruction::with1(Code::Inc_rm64, at(RAX, 0)))));
    let mut pops = SAVED.iter().rev().map(|&r| op(Instruction::with1(Code::Pop_r64, r)));
    v.push(labelled(pops.next().expect("registers saved"), done));
    v.extend(pops);
    v.push(Instruction::with(Code::Popfq));
    v.push(labelled(op(Instruction::with1(Code::Pop_r64, RAX)), plain));
    v.push(jump(Code::Jmp_rel32_64, go_on));
    v
}

/// At label `label`, after [`post_and_wait`] (`r9` the ticket): kerf's answer's address in
/// `rcx`, or on to `none` if there is none. The answer's tag must be this ticket's (a slot
/// still holding the question, or taken by a later ticket, is no answer). Clobbers `rax`,
/// `rdx`, `rsi` and the flags.
fn answer(label: u64, mailbox: u64, none: u64) -> Vec<Instruction> {
    use Register::*;
    let slot = MemoryOperand::new(RAX, RDX, 8, mb::RING as i64, 1, false, Register::None);
    vec![
        labelled(mov_imm(RAX, mailbox), label),
        op(Instruction::with2(Code::Mov_r32_rm32, EDX, R9D)),
        op(Instruction::with2(Code::And_rm32_imm32, EDX, mb::RING_SLOTS - 1)),
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, slot)),
        op(Instruction::with2(Code::Mov_r64_rm64, RDX, RCX)),
        op(Instruction::with2(Code::Shr_rm64_imm8, RDX, mb::ADDRESS_BITS)),
        op(Instruction::with2(Code::Mov_r32_rm32, ESI, R9D)),
        op(Instruction::with2(Code::And_rm32_imm32, ESI, (1u32 << mb::TAG_BITS) - 1)),
        op(Instruction::with2(Code::Or_rm32_imm32, ESI, (mb::ANSWER >> mb::ADDRESS_BITS) as u32)),
        op(Instruction::with2(Code::Cmp_r64_rm64, RDX, RSI)),
        jump(Code::Jne_rel32_64, none),
        mov_imm(RDX, mb::ADDRESS),
        op(Instruction::with2(Code::And_r64_rm64, RCX, RDX)),
        jump(Code::Je_rel32_64, none),
    ]
}

/// Whether `uc`, the words of a `ucontext` (from its first), hold a frame the entry rewrote
/// and whose handler has not returned: its check word matches (kerf's side, reading stacks).
pub fn rewritten(uc: &[u64]) -> bool {
    let word = |off: i32| uc.get(off as usize / 8).copied();
    match (word(SPARE_CACHE), word(SPARE_ORIG), word(SPARE_RESTORER), word(SPARE_CHECK)) {
        (Some(c), Some(o), Some(r), Some(check)) => check == c ^ o ^ r ^ CHECK_KEY,
        _ => false,
    }
}

/// A frame [`rewritten`] (`uc` its words): its cache address, original and restorer.
pub fn rewritten_as(uc: &[u64]) -> Option<(u64, u64, u64)> {
    let word = |off: i32| uc[off as usize / 8];
    rewritten(uc).then(|| (word(SPARE_CACHE), word(SPARE_ORIG), word(SPARE_RESTORER)))
}

/// What kerf writes into a rewritten frame's `ucontext` (as `(offset, word)` pairs) to make
/// its return put back `cache` where the PC is still `orig`, when it empties the cache while
/// the handler runs: `cache` the new translation's address, or 0 for none, which makes the
/// return find the PC changed (the original written no longer matches) and ask kerf where to
/// go on ([`crate::mailbox::RESUME`]) instead of putting an old cache address back.
pub fn rewrite_words(cache: u64, orig: u64, restorer: u64) -> [(u64, u64); 3] {
    let orig = if cache == 0 { 0 } else { orig };
    let check = cache ^ orig ^ restorer ^ CHECK_KEY;
    [(SPARE_CACHE as u64, cache), (SPARE_ORIG as u64, orig), (SPARE_CHECK as u64, check)]
}

fn locked(mut i: Instruction) -> Instruction {
    i.set_has_lock_prefix(true);
    i
}

/// `lock inc qword [word]` through `r` (the mailbox may lie out of a rel32's reach of the
/// hook, which is near the handler's module).
fn counted(r: Register, word: u64) -> [Instruction; 2] {
    let mut inc = op(Instruction::with1(Code::Inc_rm64, at(r, 0)));
    inc.set_has_lock_prefix(true);
    [mov_imm(r, word), inc]
}

/// The return from a handler whose frame [`signal_entry`] rewrote, at label `label`: see the
/// module comment. `live` is the address of the word kerf clears when it takes the JIT out
/// (readable where this code is: it must outlive the mailbox). A handler that changed the
/// PC: kerf is asked where in the cache the thread can go on at the new one
/// ([`crate::mailbox::RESUME`]; it translates that code if it must), and the thread goes on
/// natively if nowhere.
pub fn signal_return(
    label: u64,
    mailbox: u64,
    live: u64,
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    use Register::*;
    let (away, served, native, lost, out) = (labels(), labels(), labels(), labels(), labels());
    let mut v = vec![
        labelled(op(Instruction::with2(Code::Mov_r64_rm64, RAX, at_rsp(SPARE_ORIG))), label),
        op(Instruction::with2(Code::Mov_r64_rm64, RDX, at_rsp(SPARE_CACHE))),
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, at_rsp(SPARE_RESTORER))),
        op(Instruction::with2(Code::Mov_r64_rm64, RDI, RAX)),
        op(Instruction::with2(Code::Xor_r64_rm64, RDI, RDX)),
        op(Instruction::with2(Code::Xor_r64_rm64, RDI, RCX)),
        mov_imm(RSI, CHECK_KEY),
        op(Instruction::with2(Code::Xor_r64_rm64, RDI, RSI)),
        op(Instruction::with2(Code::Cmp_r64_rm64, RDI, at_rsp(SPARE_CHECK))),
        jump(Code::Jne_rel32_64, lost),
        // The frame is done with: its check word and the return address that named this
        // sequence cleared, so that kerf takes no frame left on the stack for a live one.
        op(Instruction::with2(Code::Mov_rm64_imm32, at_rsp(SPARE_CHECK), 0)),
        op(Instruction::with2(Code::Mov_rm64_imm32, at_rsp(-8), 0)),
        op(Instruction::with2(Code::Cmp_rm64_imm8, rip(live), 0)),
        jump(Code::Je_rel32_64, out),
        op(Instruction::with2(Code::Cmp_r64_rm64, RAX, at_rsp(UC_RIP))),
        jump(Code::Jne_rel32_64, away),
        op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(UC_RIP), RDX)),
    ];
    v.extend(counted(RSI, mailbox + mb::SIG_BACK));
    v.push(jump(Code::Jmp_rel32_64, out));
    // Sent elsewhere: ask, while kerf listens (the stack pointer stays at the `ucontext`;
    // every register is free).
    v.extend([
        labelled(mov_imm(RAX, mailbox), away),
        op(Instruction::with2(Code::Cmp_rm32_imm8, at(RAX, mb::LISTEN as i32), 0)),
        jump(Code::Je_rel32_64, native),
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, at_rsp(UC_RIP))),
        mov_imm(RDX, mb::ADDRESS),
        op(Instruction::with2(Code::Cmp_r64_rm64, RCX, RDX)),
        jump(Code::Ja_rel32_64, native),
        mov_imm(RDX, mb::RESUME),
        op(Instruction::with2(Code::Or_r64_rm64, RCX, RDX)),
        // (A question the entries need not wait behind: see `SIG_PENDING`.)
        locked(op(Instruction::with1(Code::Inc_rm32, at(RAX, mb::SIG_PENDING as i32)))),
    ]);
    v.extend(post_and_wait(mailbox, served, labels));
    let answered = labels();
    v.extend([
        labelled(mov_imm(RAX, mailbox), served),
        locked(op(Instruction::with1(Code::Dec_rm32, at(RAX, mb::SIG_PENDING as i32)))),
    ]);
    v.extend(answer(answered, mailbox, native));
    v.push(op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(UC_RIP), RCX)));
    v.extend(counted(RSI, mailbox + mb::SIG_RESUMED));
    v.push(jump(Code::Jmp_rel32_64, out));
    let [word, inc] = counted(RSI, mailbox + mb::SIG_AWAY);
    v.extend([labelled(word, native), inc]);
    v.extend([
        labelled(op(Instruction::with2(Code::Mov_r64_rm64, RCX, at_rsp(SPARE_RESTORER))), out),
        op(Instruction::with1(Code::Jmp_rm64, RCX)),
        // The check word is not the entry's (nothing of kerf's writes there but the entry; a
        // handler would have to): the restorer is unknown, so this one returns as any
        // restorer does.
        labelled(op(Instruction::with2(Code::Mov_r32_imm32, EAX, 15)), lost),
        Instruction::with(Code::Syscall),
    ]);
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Decoder, DecoderOptions};

    const HANDLER: u64 = 0x40_1000;
    const HOOK: u64 = 0x50_0000;
    const RESTORER: u64 = 0x7f00_0000_1230;
    const MAILBOX: u64 = 0x7f00_1000_0000;

    /// The hook for a handler that starts `push rbp; mov rbp, rsp; sub rsp, 16; ...`.
    fn hook() -> crate::translate::SignalHook {
        let code = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xc3];
        let starts = [HANDLER];
        let v = kerf_patch::FunctionView {
            name: "handler",
            extent: HANDLER..HANDLER + code.len() as u64,
            block_starts: &starts,
            has_unanalysable_jump: false,
        };
        let d = kerf_patch::plan_jump5(&code, HANDLER, HANDLER, &v).unwrap();
        crate::translate::signal_hook("handler", HOOK, &d, RESTORER, MAILBOX).unwrap()
    }

    fn decode(bytes: &[u8], ip: u64) -> Vec<Instruction> {
        Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE).into_iter().collect()
    }

    #[test]
    fn the_hook_checks_the_restorer_first_and_ends_in_the_handler() {
        let h = hook();
        assert_eq!((h.live, h.back), (HOOK, HOOK + 16));
        assert_eq!(h.bytes[..8], 1u64.to_le_bytes(), "live from the start");
        // (kerf gives each hook 2 KiB of its room.)
        assert!(h.bytes.len() < 2048, "{}", h.bytes.len());
        let entry = decode(&h.bytes[(h.entry - HOOK) as usize..], h.entry);
        assert_eq!(entry[0].code(), Code::Push_r64);
        assert_eq!((entry[1].code(), entry[1].immediate64()), (Code::Mov_r64_imm64, RESTORER));
        assert_eq!(entry[2].code(), Code::Cmp_rm64_r64);
        assert_eq!(entry[2].memory_base(), Register::RSP);
        assert_eq!(entry[2].memory_displacement64(), 8, "[rsp] before the push");
        // The displaced instructions, then on in the handler.
        let n = entry.len();
        let copied: Vec<Code> = entry[n - 4..n - 1].iter().map(|i| i.code()).collect();
        assert_eq!(copied, [Code::Push_r64, Code::Mov_rm64_r64, Code::Sub_rm64_imm8]);
        assert_eq!(entry[n - 1].near_branch_target(), HANDLER + 8);
        // The return sequence reads the spare words first.
        let back = decode(&h.bytes[16..], h.back);
        assert_eq!(back[0].memory_displacement64(), SPARE_ORIG as u64);
    }

    #[test]
    fn a_frame_counts_as_rewritten_only_with_its_check_word() {
        let mut uc = vec![0u64; (UC_SPARE / 8 + 8) as usize];
        let (cache, orig) = (0x50_0040, 0x40_1234);
        uc[(SPARE_CACHE / 8) as usize] = cache;
        uc[(SPARE_ORIG / 8) as usize] = orig;
        uc[(SPARE_RESTORER / 8) as usize] = RESTORER;
        assert!(!rewritten(&uc), "stack garbage");
        uc[(SPARE_CHECK / 8) as usize] = cache ^ orig ^ RESTORER ^ CHECK_KEY;
        assert!(rewritten(&uc));
        assert!(!rewritten(&uc[..(SPARE_CHECK / 8) as usize]), "the words end first");
    }
}
