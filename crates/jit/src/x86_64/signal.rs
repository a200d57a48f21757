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
//!    An answer the ring overwrote before the thread read it (a thread woken late) is asked
//!    for again, from step 2 ([`crate::mailbox::SIG_AGAIN`]).
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
//!
//! # A handler that leaves by `siglongjmp` ([`longjmp_entry`], [`longjmp_land`])
//!
//! A handler runs in the original code, so its `siglongjmp` lands on the original address the
//! program's `sigsetjmp` kept (the cache pushes original return addresses), and its thread
//! would run the rest of its root call natively. glibc's `siglongjmp` (alias `longjmp`,
//! `_longjmp`) and `__longjmp_chk` are spliced at their entries, once a handler is hooked:
//!
//! 1. While no hooked frame is in flight (`SIG_MOVED` and `SIG_KEPT` less the frames that came
//!    back, went away and were left, see [`crate::mailbox::SIG_LEFT`]), or kerf is not
//!    listening: on to the displaced instructions, at the cost of a few loads.
//! 2. Otherwise the jump's stack pointer and PC are read from the `jmp_buf` (demangled with
//!    the thread's pointer guard, as glibc's `__longjmp` does) and kerf is asked
//!    ([`crate::mailbox::LONGJMP`]). kerf reads the stack between the two stack pointers for
//!    hooked frames (rewritten, or marked as keeping their cache address: kerf busy, or no
//!    clean point there), counts them left, and answers whether the jump stays in the root
//!    call that the outermost of them interrupted. A question the flush answered with
//!    nothing is asked again while kerf listens (the flush leaves such threads in place).
//! 3. If it does: the PC goes in the word just below the jump's stack pointer (in the red zone
//!    of the function that called `sigsetjmp`, which holds nothing once that call has returned
//!    and which a signal frame skips), and `siglongjmp` goes on with a copy of the program's
//!    `jmp_buf` whose PC is [`longjmp_land`], below a stack pointer lowered past the copy (the
//!    function never returns). The program's own buffer is not touched: it may be jumped to
//!    again later, from anywhere.
//! 4. glibc then does all it does (cleanup buffers, the signal mask, the check of
//!    `__longjmp_chk`) and its `__longjmp` jumps to the landing with the program's registers
//!    as `sigsetjmp` returns them. The landing asks kerf where in the cache the PC is
//!    ([`crate::mailbox::RESUME`], as a handler's return does; kerf translates it if it must)
//!    and jumps there, or to the PC itself if nowhere (an escape, counted). The cache address
//!    is asked for only here: a flush between the question of step 2 and the jump would free
//!    one asked for earlier, while the thread ran glibc's code with it. The landing needs no
//!    register but `rax` (the value `sigsetjmp` returns) and the callee-saved ones: nothing
//!    else lives across the return of a call, the flags included.

use super::{answer_bits_into_esi, at, at_rsp, labelled, move_rsp, op, post_and_wait, rip};
use crate::mailbox as mb;
use iced_x86::{Code, Instruction, MemoryOperand, Register};

/// Offsets in the `ucontext` (glibc's `ucontext_t` and the kernel's `struct ucontext`
/// agree): `uc_flags`, `uc_link`, `uc_stack` (24 bytes), then `uc_mcontext`, whose 23
/// general registers end with `rip` at index 16, then the `fpstate` pointer, then
/// `__reserved1[8]`.
pub const UC_RIP: i32 = 40 + 16 * 8;
pub const UC_SPARE: i32 = 40 + 23 * 8 + 8;
/// The interrupted stack pointer in the `ucontext` (`uc_mcontext.rsp`, index 15).
pub const UC_RSP: i32 = 40 + 15 * 8;
/// The spare words: the cache address, the original written, the restorer, the check.
const SPARE_CACHE: i32 = UC_SPARE;
const SPARE_ORIG: i32 = UC_SPARE + 8;
const SPARE_RESTORER: i32 = UC_SPARE + 16;
const SPARE_CHECK: i32 = UC_SPARE + 24;
/// What the check word is xored with ("kerfsig", no address has these high bits).
pub const CHECK_KEY: u64 = 0x6b65_7266_7369_6721;
/// What the check word of a frame left with its cache address (kerf busy, or no clean point
/// there: see [`signal_entry`]) is xored with instead ("kerfbsy").
pub const BUSY_KEY: u64 = 0x6b65_7266_6273_7921;

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
    let (no_answer, mark, ask, unanswered) = (labels(), labels(), labels(), labels());
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
        labelled(mov_imm(RAX, mailbox), ask),
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
    // (Served once its slot holds kerf's answer marked `AT_ONCE`: kerf answers so where a
    // miss's ticket before it waits for a translation, or for a flush that cannot go on
    // while this frame holds glue code's address.)
    v.extend(post_and_wait(mailbox, served, true, labels));
    v.extend([
        labelled(mov_imm(RAX, mailbox), served),
        locked(op(Instruction::with1(Code::Dec_rm32, at(RAX, mb::SIG_PENDING as i32)))),
    ]);
    v.extend(answer(labels_answer, mailbox, [unanswered, no_answer]));
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
    // Counted answered, but the slot holds no answer to this ticket: the ring came round
    // while the thread waited to run (`SIG_AGAIN`). Asked again, as from step 2 (kerf not
    // listening now: kept, as busy).
    let [word, inc] = counted(RDX, mailbox + mb::SIG_AGAIN);
    v.extend([labelled(word, unanswered), inc]);
    v.push(op(Instruction::with2(Code::Mov_r64_rm64, RCX, RBX)));
    v.push(jump(Code::Jmp_rel32_64, ask));
    // In the cache, not asked: counted (its handler sees the cache address); then marked, as
    // a frame asked about with no answer (no clean point there) is: its return made to come
    // through the return sequence too, which counts it back
    // ([`crate::mailbox::SIG_KEPT_BACK`]), so that a frame of this kind is known in flight,
    // and a `siglongjmp` out of its handler asks kerf as one out of a rewritten frame does.
    // (Unmarked, such a jump went on natively, uncounted and unsaid.) The spare words: the
    // cache address, no original, the restorer, the check with `BUSY_KEY`.
    let [word, inc] = counted(RAX, mailbox + mb::SIG_BUSY);
    v.extend([labelled(word, busy), inc, jump(Code::Jmp_rel32_64, mark)]);
    v.push(labelled(op(Instruction::with2(Code::Mov_r64_rm64, RCX, RBX)), no_answer));
    v.extend([
        labelled(mov_imm(RAX, restorer), mark),
        op(Instruction::with2(Code::Mov_rm64_r64, uc(SPARE_CACHE), RCX)),
        op(Instruction::with2(Code::Mov_rm64_imm32, uc(SPARE_ORIG), 0)),
        op(Instruction::with2(Code::Mov_rm64_r64, uc(SPARE_RESTORER), RAX)),
        op(Instruction::with2(Code::Xor_r64_rm64, RAX, RCX)),
        mov_imm(RDX, BUSY_KEY),
        op(Instruction::with2(Code::Xor_r64_rm64, RAX, RDX)),
        op(Instruction::with2(Code::Mov_rm64_r64, uc(SPARE_CHECK), RAX)),
        mov_imm(RAX, back),
        op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(PUSHED), RAX)),
    ]);
    v.extend(counted(RAX, mailbox + mb::SIG_KEPT));
    let mut pops = SAVED.iter().rev().map(|&r| op(Instruction::with1(Code::Pop_r64, r)));
    v.push(labelled(pops.next().expect("registers saved"), done));
    v.extend(pops);
    v.push(Instruction::with(Code::Popfq));
    v.push(labelled(op(Instruction::with1(Code::Pop_r64, RAX)), plain));
    v.push(jump(Code::Jmp_rel32_64, go_on));
    v
}

/// A question of kind `kind` ([`crate::mailbox::RESUME`], [`crate::mailbox::LONGJMP`]) about
/// the address in `rcx`, `rax` the mailbox: posted, counted in `SIG_PENDING` while it waits (a
/// question the entries need not wait behind), and kerf's answer in `rcx`, or on to `none` if
/// there is none. With `again` (the instruction that puts the address in `rcx` once more), a
/// ticket kerf counted answered with no answer in its slot is asked again while kerf
/// listens (counted in [`crate::mailbox::SIG_AGAIN`]): a flush answers every open ticket with
/// nothing, and the threads of a `siglongjmp` it leaves where they wait (see
/// `Jit::bring_back`); and a thread woken late may find its slot taken by a ticket 4,096
/// later. Clobbers what [`post_and_wait`] and [`answer`] do.
fn question(
    mailbox: u64,
    kind: u64,
    again: Option<Instruction>,
    none: u64,
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    use Register::*;
    let (ask, served, answered, unanswered) = (labels(), labels(), labels(), labels());
    let mut v = vec![
        labelled(mov_imm(RDX, kind), ask),
        op(Instruction::with2(Code::Or_r64_rm64, RCX, RDX)),
        locked(op(Instruction::with1(Code::Inc_rm32, at(RAX, mb::SIG_PENDING as i32)))),
    ];
    v.extend(post_and_wait(mailbox, served, false, labels));
    v.extend([
        labelled(mov_imm(RAX, mailbox), served),
        locked(op(Instruction::with1(Code::Dec_rm32, at(RAX, mb::SIG_PENDING as i32)))),
    ]);
    let Some(again) = again else {
        v.extend(answer(answered, mailbox, [none, none]));
        return v;
    };
    v.extend([
        jump(Code::Jmp_rel32_64, answered),
        labelled(mov_imm(RAX, mailbox), unanswered),
        op(Instruction::with2(Code::Cmp_rm32_imm8, at(RAX, mb::LISTEN as i32), 0)),
        jump(Code::Je_rel32_64, none),
    ]);
    v.extend(counted(RDX, mailbox + mb::SIG_AGAIN));
    v.extend([again, jump(Code::Jmp_rel32_64, ask)]);
    v.extend(answer(answered, mailbox, [unanswered, none]));
    v
}

/// At label `label`, after [`post_and_wait`] (`r9` the ticket): kerf's answer's address in
/// `rcx`, or on to `unanswered` if the slot holds no answer to this ticket, to `none` if the
/// answer is none. The answer's tag must be this ticket's (a slot still holding the question,
/// or taken by a later ticket, is no answer). Clobbers `rax`, `rdx`, `rsi` and the flags.
fn answer(label: u64, mailbox: u64, [unanswered, none]: [u64; 2]) -> Vec<Instruction> {
    use Register::*;
    let slot = MemoryOperand::new(RAX, RDX, 8, mb::RING as i64, 1, false, Register::None);
    let mut v = vec![
        labelled(mov_imm(RAX, mailbox), label),
        op(Instruction::with2(Code::Mov_r32_rm32, EDX, R9D)),
        op(Instruction::with2(Code::And_rm32_imm32, EDX, mb::RING_SLOTS - 1)),
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, slot)),
        op(Instruction::with2(Code::Mov_r64_rm64, RDX, RCX)),
        op(Instruction::with2(Code::Shr_rm64_imm8, RDX, mb::ADDRESS_BITS)),
        // (With or without `AT_ONCE`.)
        op(Instruction::with2(
            Code::And_rm32_imm32,
            EDX,
            !(mb::AT_ONCE >> mb::ADDRESS_BITS) as u32,
        )),
    ];
    v.extend(answer_bits_into_esi(mb::ANSWER));
    v.extend([
        op(Instruction::with2(Code::Cmp_r64_rm64, RDX, RSI)),
        jump(Code::Jne_rel32_64, unanswered),
        mov_imm(RDX, mb::ADDRESS),
        op(Instruction::with2(Code::And_r64_rm64, RCX, RDX)),
        jump(Code::Je_rel32_64, none),
    ]);
    v
}

/// Whether `uc`, the words of a `ucontext` (from its first), hold a frame the entry rewrote
/// and whose handler has not returned: its check word matches (kerf's side, reading stacks).
pub fn rewritten(uc: &[u64]) -> bool {
    checked(uc, CHECK_KEY)
}

/// Whether `uc` holds a frame the entry left with its cache address (kerf busy) and whose
/// handler has not returned.
pub fn busy_marked(uc: &[u64]) -> bool {
    checked(uc, BUSY_KEY) && uc.get(SPARE_ORIG as usize / 8) == Some(&0)
}

fn checked(uc: &[u64], key: u64) -> bool {
    let word = |off: i32| uc.get(off as usize / 8).copied();
    match (word(SPARE_CACHE), word(SPARE_ORIG), word(SPARE_RESTORER), word(SPARE_CHECK)) {
        (Some(c), Some(o), Some(r), Some(check)) => check == c ^ o ^ r ^ key,
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
    let (away, native, lost, out) = (labels(), labels(), labels(), labels());
    let busy = labels();
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
        jump(Code::Jne_rel32_64, busy),
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
    ]);
    let pc = op(Instruction::with2(Code::Mov_r64_rm64, RCX, at_rsp(UC_RIP)));
    v.extend(question(mailbox, mb::RESUME, Some(pc), native, labels));
    v.push(op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(UC_RIP), RCX)));
    v.extend(counted(RSI, mailbox + mb::SIG_RESUMED));
    v.push(jump(Code::Jmp_rel32_64, out));
    let [word, inc] = counted(RSI, mailbox + mb::SIG_AWAY);
    v.extend([labelled(word, native), inc]);
    // A frame the entry left with its cache address (its original 0, its check made with
    // `BUSY_KEY`): done with as above, counted, and on to the restorer as it is.
    v.extend([
        labelled(mov_imm(RSI, CHECK_KEY ^ BUSY_KEY), busy),
        op(Instruction::with2(Code::Xor_r64_rm64, RDI, RSI)),
        op(Instruction::with2(Code::Cmp_r64_rm64, RDI, at_rsp(SPARE_CHECK))),
        jump(Code::Jne_rel32_64, lost),
        op(Instruction::with2(Code::Test_rm64_r64, RAX, RAX)),
        jump(Code::Jne_rel32_64, lost),
        op(Instruction::with2(Code::Mov_rm64_imm32, at_rsp(SPARE_CHECK), 0)),
        op(Instruction::with2(Code::Mov_rm64_imm32, at_rsp(-8), 0)),
    ]);
    v.extend(counted(RSI, mailbox + mb::SIG_KEPT_BACK));
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

/// What kerf writes into the `ucontext` of a rewritten frame that a `siglongjmp` left (as
/// `(offset, word)` pairs): the check word cleared, so that no later scan of the stack takes it
/// for a live frame (see [`rewritten`]).
pub fn left_words() -> [(u64, u64); 1] {
    [(SPARE_CHECK as u64, 0)]
}

/// glibc's x86-64 `jmp_buf` (`struct __jmp_buf_tag`): the saved stack pointer and PC (each
/// mangled with the thread's pointer guard), and the bytes of the whole structure (eight
/// registers, `__mask_was_saved`, the signal mask): what `siglongjmp` reads.
const JB_RSP: i32 = 6 * 8;
const JB_PC: i32 = 7 * 8;
const JMP_BUF_WORDS: u32 = 25;
/// glibc's pointer guard, `%fs:0x30` (`tcbhead_t.pointer_guard`): `PTR_MANGLE(x)` is
/// `rol(x ^ guard, 17)`.
const POINTER_GUARD: i32 = 0x30;
const MANGLE_ROTATE: u32 = 17;
/// How far below its stack pointer at the entry `siglongjmp` goes on when it is sent to the
/// landing: the `jmp_buf`'s copy lies above that, clear of what the entry pushed.
const LOWERED: i32 = 512;
/// Bytes the entry pushes before it asks: `rax`, the flags, `rcx`, [`LONGJMP_SAVED`], then
/// the four words of the question (its stack pointer, the jump's, the jump's PC, its process
/// id: a process forked from the target shares the mailbox, and kerf reads the target's
/// memory, not its).
const LONGJMP_SAVED: [Register; 8] = [
    Register::RDX,
    Register::RDI,
    Register::RSI,
    Register::R8,
    Register::R9,
    Register::R10,
    Register::R11,
    Register::R12,
];
const LJ_PUSHED: i32 = 8 * (3 + LONGJMP_SAVED.len() as i32);
const LJ_ASKED: i32 = LJ_PUSHED + 32;
/// `getpid`.
const SYS_GETPID: u32 = 39;
/// Where the step 3 puts its stack pointer while it copies, below the copy.
const LJ_LOW: i32 = LJ_ASKED + LOWERED;

/// `%fs:0x30`.
fn pointer_guard() -> MemoryOperand {
    kerf_arch::x86_64::segment_operand(Register::FS, POINTER_GUARD)
}

/// `r` = the word at `[base + disp]` of a `jmp_buf`, demangled.
fn demangled(r: Register, base: Register, disp: i32) -> [Instruction; 3] {
    [
        op(Instruction::with2(Code::Mov_r64_rm64, r, at(base, disp))),
        op(Instruction::with2(Code::Ror_rm64_imm8, r, MANGLE_ROTATE)),
        op(Instruction::with2(Code::Xor_r64_rm64, r, pointer_guard())),
    ]
}

/// The entry of glibc's `siglongjmp` at label `label` (see the module comment): `land` the
/// address of its [`longjmp_land`], `go_on` the label of the function's displaced
/// instructions.
pub fn longjmp_entry(
    label: u64,
    mailbox: u64,
    land: u64,
    go_on: u64,
    labels: &mut dyn FnMut() -> u64,
) -> Vec<Instruction> {
    use Register::*;
    let (plain, no) = (labels(), labels());
    // Offsets from the stack pointer once the question is asked, and once lowered.
    let saved = |r: Register| {
        let k = LONGJMP_SAVED.iter().position(|&s| s == r).expect("a saved register") as i32;
        LJ_ASKED - 8 * (4 + k)
    };
    let low = |off: i32| at_rsp(off + LOWERED);
    let mut v = vec![
        labelled(op(Instruction::with1(Code::Push_r64, RAX)), label),
        Instruction::with(Code::Pushfq),
        op(Instruction::with1(Code::Push_r64, RCX)),
        // 1. Frames in flight.
        mov_imm(RAX, mailbox),
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, at(RAX, mb::SIG_MOVED as i32))),
        op(Instruction::with2(Code::Add_r64_rm64, RCX, at(RAX, mb::SIG_KEPT as i32))),
    ];
    for w in [mb::SIG_BACK, mb::SIG_AWAY, mb::SIG_RESUMED, mb::SIG_KEPT_BACK, mb::SIG_LEFT] {
        v.push(op(Instruction::with2(Code::Sub_r64_rm64, RCX, at(RAX, w as i32))));
    }
    v.extend([
        jump(Code::Jle_rel32_64, plain),
        op(Instruction::with2(Code::Cmp_rm32_imm8, at(RAX, mb::LISTEN as i32), 0)),
        jump(Code::Je_rel32_64, plain),
    ]);
    v.extend(LONGJMP_SAVED.iter().map(|&r| op(Instruction::with1(Code::Push_r64, r))));
    // 2. The question's words: the process id, the PC, the jump's stack pointer, this one's
    // (at the entry). (`syscall` clobbers `rcx` and `r11`: first.)
    v.extend([
        op(Instruction::with2(Code::Mov_r32_imm32, EAX, SYS_GETPID)),
        Instruction::with(Code::Syscall),
        op(Instruction::with1(Code::Push_r64, RAX)),
        mov_imm(RAX, mailbox),
    ]);
    v.extend(demangled(RDX, RDI, JB_PC));
    v.extend(demangled(RCX, RDI, JB_RSP));
    v.extend([
        op(Instruction::with2(Code::Lea_r64_m, RSI, at_rsp(LJ_PUSHED + 8))),
        op(Instruction::with1(Code::Push_r64, RDX)),
        op(Instruction::with1(Code::Push_r64, RCX)),
        op(Instruction::with1(Code::Push_r64, RSI)),
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, RSP)),
    ]);
    let record = op(Instruction::with2(Code::Mov_r64_rm64, RCX, RSP));
    v.extend(question(mailbox, mb::LONGJMP, Some(record), no, labels));
    v.extend([
        // 3. Below the copy first (a signal's frame goes below the stack pointer).
        move_rsp(-LOWERED),
        // The PC below the jump's stack pointer.
        op(Instruction::with2(Code::Mov_r64_rm64, RDX, low(8))),
        op(Instruction::with2(Code::Mov_r64_rm64, RAX, low(16))),
        op(Instruction::with2(Code::Mov_rm64_r64, at(RDX, -8), RAX)),
        // The copy, at the entry's stack pointer less `LOWERED` and 8 (the return address).
        op(Instruction::with2(Code::Mov_r64_rm64, RSI, low(saved(RDI)))),
        op(Instruction::with2(Code::Lea_r64_m, RDI, at_rsp(LJ_LOW - LOWERED + 8))),
        op(Instruction::with2(Code::Mov_r32_imm32, ECX, JMP_BUF_WORDS)),
        op(Instruction::with_rep_movsq(64)),
        mov_imm(RAX, land),
        op(Instruction::with2(Code::Xor_r64_rm64, RAX, pointer_guard())),
        op(Instruction::with2(Code::Rol_rm64_imm8, RAX, MANGLE_ROTATE)),
        op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(LJ_LOW - LOWERED + 8 + JB_PC), RAX)),
        // Its return address (never used: the function does not return).
        op(Instruction::with2(Code::Mov_r64_rm64, RAX, at_rsp(LJ_LOW))),
        op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(LJ_LOW - LOWERED), RAX)),
        // `rax` and the flags just below the new stack pointer, to be popped last.
        op(Instruction::with2(Code::Mov_r64_rm64, RAX, at_rsp(LJ_LOW - 16))),
        op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(LJ_LOW - LOWERED - 16), RAX)),
        op(Instruction::with2(Code::Mov_r64_rm64, RAX, at_rsp(LJ_LOW - 8))),
        op(Instruction::with2(Code::Mov_rm64_r64, at_rsp(LJ_LOW - LOWERED - 8), RAX)),
        op(Instruction::with2(Code::Mov_r64_rm64, RCX, at_rsp(LJ_LOW - 24))),
    ]);
    for &r in LONGJMP_SAVED.iter().filter(|&&r| r != RDI) {
        v.push(op(Instruction::with2(Code::Mov_r64_rm64, r, low(saved(r)))));
    }
    v.extend([
        op(Instruction::with2(Code::Lea_r64_m, RDI, at_rsp(LJ_LOW - LOWERED + 8))),
        move_rsp(LJ_LOW - LOWERED - 16),
        Instruction::with(Code::Popfq),
        op(Instruction::with1(Code::Pop_r64, RAX)),
        jump(Code::Jmp_rel32_64, go_on),
    ]);
    // Not asked, or no: everything back as it came.
    v.push(labelled(move_rsp(LJ_ASKED - LJ_PUSHED), no));
    v.extend(LONGJMP_SAVED.iter().rev().map(|&r| op(Instruction::with1(Code::Pop_r64, r))));
    v.extend([
        labelled(op(Instruction::with1(Code::Pop_r64, RCX)), plain),
        Instruction::with(Code::Popfq),
        op(Instruction::with1(Code::Pop_r64, RAX)),
        jump(Code::Jmp_rel32_64, go_on),
    ]);
    v
}

/// Where a `siglongjmp` that [`longjmp_entry`] sent back lands, at label `label`, with the
/// stack pointer and the callee-saved registers the program's `sigsetjmp` kept, `rax` the
/// value it returns, and the PC at `[rsp - 8]`: on in the cache at the PC if kerf has a
/// translation for it ([`crate::mailbox::RESUME`]), else at the PC itself.
pub fn longjmp_land(label: u64, mailbox: u64, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    use Register::*;
    let (stranded, out) = (labels(), labels());
    let mut v = vec![
        labelled(op(Instruction::with2(Code::Mov_r64_rm64, RCX, at_rsp(-8))), label),
        op(Instruction::with1(Code::Push_r64, RAX)),
        op(Instruction::with1(Code::Push_r64, RBX)),
        op(Instruction::with1(Code::Push_r64, R12)),
        op(Instruction::with2(Code::Mov_r64_rm64, RBX, RCX)),
        mov_imm(RAX, mailbox),
        op(Instruction::with2(Code::Cmp_rm32_imm8, at(RAX, mb::LISTEN as i32), 0)),
        jump(Code::Je_rel32_64, stranded),
    ];
    let pc = op(Instruction::with2(Code::Mov_r64_rm64, RCX, RBX));
    v.extend(question(mailbox, mb::RESUME, Some(pc), stranded, labels));
    v.extend(counted(RSI, mailbox + mb::SIG_REENTERED));
    v.push(jump(Code::Jmp_rel32_64, out));
    let [word, inc] = counted(RSI, mailbox + mb::SIG_STRANDED);
    v.extend([labelled(word, stranded), inc]);
    v.push(op(Instruction::with2(Code::Mov_r64_rm64, RCX, RBX)));
    v.extend([
        labelled(op(Instruction::with1(Code::Pop_r64, R12)), out),
        op(Instruction::with1(Code::Pop_r64, RBX)),
        op(Instruction::with1(Code::Pop_r64, RAX)),
        op(Instruction::with1(Code::Jmp_rm64, RCX)),
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

    /// A slot that holds no answer to the ticket once kerf counted it answered (the ring came
    /// round while the thread waited to run) is counted in `SIG_AGAIN` and asked again: the
    /// entry from its look at `LISTEN` with the PC it asked about, the return (while kerf
    /// listens) with the PC in the frame.
    #[test]
    fn an_answer_the_ring_overwrote_is_asked_for_again() {
        let h = hook();
        // The counter's index in `v`; `lead` instructions before it, what the answer's check of
        // the tag branches to (and only that check).
        let again = |v: &[Instruction], lead: usize| -> usize {
            let at = |i: &Instruction| {
                i.code() == Code::Mov_r64_imm64 && i.immediate64() == MAILBOX + mb::SIG_AGAIN
            };
            let k = v.iter().position(at).expect("SIG_AGAIN counted");
            assert_eq!(v.iter().filter(|i| at(i)).count(), 1);
            assert!(v[k + 1].has_lock_prefix() && v[k + 1].code() == Code::Inc_rm64);
            let from: Vec<iced_x86::Mnemonic> = (v.iter())
                .filter(|i| i.near_branch_target() == v[k - lead].ip())
                .map(|i| i.mnemonic())
                .collect();
            assert_eq!(from, [iced_x86::Mnemonic::Jne]);
            k
        };
        let entry = decode(&h.bytes[(h.entry - HOOK) as usize..], h.entry);
        let k = again(&entry, 0);
        let pc = &entry[k + 2];
        assert_eq!((pc.code(), pc.op1_register()), (Code::Mov_r64_rm64, Register::RBX));
        let to = entry[k + 3].near_branch_target();
        let t = entry.iter().position(|i| i.ip() == to).expect("a jump back into the entry");
        assert!(t < k, "back");
        assert_eq!((entry[t].code(), entry[t].immediate64()), (Code::Mov_r64_imm64, MAILBOX));
        assert_eq!(entry[t + 1].memory_displacement64(), mb::LISTEN, "from the look at LISTEN");
        let back = decode(&h.bytes[(h.back - HOOK) as usize..(h.entry - HOOK) as usize], h.back);
        let k = again(&back, 3);
        assert_eq!(back[k - 2].memory_displacement64(), mb::LISTEN, "only while kerf listens");
        let pc = &back[k + 2];
        assert_eq!((pc.memory_base(), pc.memory_displacement64()), (Register::RSP, UC_RIP as u64));
    }

    /// glibc 2.36's `siglongjmp` starts `push rbp; mov rbp, rdi; push rbx; mov ebx, esi`.
    #[test]
    fn the_longjmp_hook_asks_only_with_a_frame_in_flight_and_lands_by_the_pc_below() {
        const SIGLONGJMP: u64 = 0x40_2000;
        let code = [0x55, 0x48, 0x89, 0xfd, 0x53, 0x89, 0xf3, 0xc3];
        let starts = [SIGLONGJMP];
        let v = kerf_patch::FunctionView {
            name: "siglongjmp",
            extent: SIGLONGJMP..SIGLONGJMP + code.len() as u64,
            block_starts: &starts,
            has_unanalysable_jump: false,
        };
        let d = kerf_patch::plan_jump5(&code, SIGLONGJMP, SIGLONGJMP, &v).unwrap();
        let (bytes, entry) = crate::translate::longjmp_hook("libc", HOOK, &d, MAILBOX).unwrap();
        assert!(bytes.len() < 2048, "{}", bytes.len());
        // The landing first: the PC from below the stack pointer, then `rax` kept.
        let land = decode(&bytes, HOOK);
        assert_eq!((land[0].code(), land[0].memory_base()), (Code::Mov_r64_rm64, Register::RSP));
        assert_eq!(land[0].memory_displacement64() as i64, -8);
        assert_eq!((land[1].code(), land[1].op0_register()), (Code::Push_r64, Register::RAX));
        let e = decode(&bytes[(entry - HOOK) as usize..], entry);
        // The frames in flight: moved less those that came back, went away, resumed, were left.
        let words: Vec<u64> = e[4..11].iter().map(|i| i.memory_displacement64()).collect();
        let back = [mb::SIG_BACK, mb::SIG_AWAY, mb::SIG_RESUMED, mb::SIG_KEPT_BACK, mb::SIG_LEFT];
        assert_eq!(words[..2], [mb::SIG_MOVED, mb::SIG_KEPT]);
        assert_eq!(words[2..], back);
        assert_eq!(e[5].code(), Code::Add_r64_rm64);
        assert_eq!(e[11].code(), Code::Jle_rel32_64);
        // Demangled with %fs:0x30, an absolute operand (not rip-relative).
        let guard: Vec<&Instruction> =
            e.iter().filter(|i| i.segment_prefix() == Register::FS).collect();
        assert_eq!(guard.len(), 3, "the PC and stack pointer read, the landing mangled");
        for g in guard {
            assert_eq!((g.memory_base(), g.memory_displacement64()), (Register::None, 0x30));
        }
        assert!(e.iter().any(|i| i.code() == Code::Movsq_m64_m64 && i.has_rep_prefix()));
        // The landing's address goes into the copy.
        assert!(e.iter().any(|i| i.code() == Code::Mov_r64_imm64 && i.immediate64() == HOOK));
        // Both ways end in the displaced instructions, then on in the function.
        let n = e.len();
        let copied: Vec<Code> = e[n - 4..n - 1].iter().map(|i| i.code()).collect();
        assert_eq!(copied, [Code::Push_r64, Code::Mov_rm64_r64, Code::Push_r64]);
        assert_eq!(e[n - 1].near_branch_target(), SIGLONGJMP + 5);
        let go_on = e[n - 4].ip();
        let into = e.iter().filter(|i| i.near_branch_target() == go_on).count();
        assert_eq!(into, 2, "asked or not");
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
        assert!(!busy_marked(&uc));
        // A frame left with its cache address: no original, the other key.
        uc[(SPARE_ORIG / 8) as usize] = 0;
        uc[(SPARE_CHECK / 8) as usize] = cache ^ RESTORER ^ BUSY_KEY;
        assert!(busy_marked(&uc) && !rewritten(&uc));
    }
}
