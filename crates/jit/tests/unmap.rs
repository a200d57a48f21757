//! The routines a translated `munmap` and `rt_sigaction` call ([`unmap_notice`],
//! [`action_notice`], [`action_check`]) run in this process. The first asks kerf (posts
//! [`mailbox::UNMAPPED`] in the mailbox and waits for the answer) only where the call
//! succeeded and its range overlaps one of the mailbox's ranges (or there are more ranges than
//! the mailbox holds); the second ([`mailbox::ACTION`] and the action's address), before the
//! call, only where it gives an action, counted in `SIG_PENDING` while it waits; the third
//! goes on to the second only for `rt_sigaction`'s number; the fourth
//! ([`glibc_action_notice`]) reads glibc's action and asks only for a handler kerf has not
//! hooked; the fifth ([`load_site`], where the loader's debugger hook goes) posts
//! [`mailbox::LOADED`] at every call; any only while kerf listens. Every register and flag
//! comes back as it went in.

use iced_x86::{Code, Instruction, Register};
use kerf_jit::mailbox;
use kerf_jit::x86_64::{
    action_check, action_notice, encode, glibc_action_notice, load_site, unmap_notice,
};
use std::arch::asm;

mod common;
use common::{at, op};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Labels: non-canonical addresses, as the translator's.
const L: u64 = 0x8000_0000_0000_0000;
const H: u64 = L + 1;
const NOTICE: u64 = L + 2;

/// An anonymous mapping of `len` bytes (zeroed), never unmapped: the test's threads may
/// still look at the mailbox.
fn mapping(len: usize, exec: bool) -> *mut u8 {
    let prot = libc::PROT_READ | libc::PROT_WRITE | if exec { libc::PROT_EXEC } else { 0 };
    // SAFETY: a fresh anonymous mapping; the result is checked.
    let at = unsafe {
        libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(at, libc::MAP_FAILED);
    at as *mut u8
}

/// A notice routine's template: (label, mailbox, labels).
type Routine = fn(u64, u64, &mut dyn FnMut() -> u64) -> Vec<Instruction>;

/// `H(io)`: loads `rax`, `rdi`, `rsi` from `io[0..3]`, sets the other registers and CF and SF
/// to a pattern, calls the routine past the red zone as the translation does, then stores the
/// flags and `rax`, `rcx`, `rdx`, `rdi`, `rsi`, `r8`, `r9`, `r10`, `r11`, `r12` in `io[3..14]`
/// (`rbx` and `r12`, the caller's, kept).
fn harness(mbox: u64, routine: Routine) -> Vec<Instruction> {
    use Register::*;
    let mov = |r: Register, v: u64| op(Instruction::with2(Code::Mov_r64_imm64, r, v));
    let mut first = op(Instruction::with1(Code::Push_r64, RBX));
    first.set_ip(H);
    let mut v = vec![
        first,
        op(Instruction::with1(Code::Push_r64, R12)),
        op(Instruction::with2(Code::Mov_r64_rm64, RBX, RDI)),
        op(Instruction::with2(Code::Mov_r64_rm64, RAX, at(RBX, 0))),
        op(Instruction::with2(Code::Mov_r64_rm64, RDI, at(RBX, 8))),
        op(Instruction::with2(Code::Mov_r64_rm64, RSI, at(RBX, 16))),
        mov(RCX, 0x1111),
        mov(RDX, 0x2222),
        mov(R8, 0x8888),
        mov(R9, 0x9999),
        mov(R10, 0xaaaa),
        mov(R12, 0xcccc),
        mov(R11, 0),
        op(Instruction::with2(Code::Sub_rm64_imm8, R11, 1)),
        op(Instruction::with2(Code::Lea_r64_m, RSP, at(RSP, -128))),
        op(Instruction::with_branch(Code::Call_rel32_64, NOTICE)),
        op(Instruction::with2(Code::Lea_r64_m, RSP, at(RSP, 128))),
        Instruction::with(Code::Pushfq),
        op(Instruction::with1(Code::Pop_rm64, at(RBX, 24))),
    ];
    for (k, r) in [RAX, RCX, RDX, RDI, RSI, R8, R9, R10, R11, R12].into_iter().enumerate() {
        v.push(op(Instruction::with2(Code::Mov_rm64_r64, at(RBX, 32 + 8 * k as i64), r)));
    }
    v.extend([
        op(Instruction::with1(Code::Pop_r64, R12)),
        op(Instruction::with1(Code::Pop_r64, RBX)),
        Instruction::with(Code::Retnq),
    ]);
    let mut n = 16;
    v.extend(routine(NOTICE, mbox, &mut || {
        n += 1;
        L + n
    }));
    v
}

/// The result of one call: the flags, then the registers in the harness's order.
fn call(h: u64, rax: u64, start: u64, len: u64) -> [u64; 11] {
    let mut io = [0u64; 14];
    io[..3].copy_from_slice(&[rax, start, len]);
    // SAFETY: `h` is the harness laid out below: it reads and writes `io` through `rdi` and
    // keeps `rbx`; it clobbers what a call may, and uses the stack below `rsp`.
    unsafe {
        asm!("call {h}", h = in(reg) h, in("rdi") io.as_mut_ptr(), clobber_abi("sysv64"));
    }
    io[3..].try_into().unwrap()
}

/// The mailbox's word at `off` (`base`: its address).
fn word(base: usize, off: u64) -> &'static AtomicU64 {
    // SAFETY: an aligned word of the mailbox mapping, which is never unmapped.
    unsafe { &*((base + off as usize) as *const AtomicU64) }
}

fn word32(base: usize, off: u64) -> &'static AtomicU32 {
    // SAFETY: as `word`.
    unsafe { &*((base + off as usize) as *const AtomicU32) }
}

/// A mailbox, and the harness around `routine` laid out in executable memory: (mailbox, the
/// harness's address).
fn install(routine: Routine) -> (usize, u64) {
    let mbox = mapping(mailbox::BYTES as usize, false) as usize;
    let insns = harness(mbox as u64, routine);
    let code = mapping(1 << 16, true);
    let laid = encode::lay_out(&insns, code as u64).unwrap();
    // SAFETY: inside the mapping, before any of it runs.
    unsafe { std::ptr::copy_nonoverlapping(laid.code.as_ptr(), code, laid.code.len()) };
    (mbox, code as u64 + laid.offsets[insns.iter().position(|i| i.ip() == H).unwrap()] as u64)
}

/// kerf's side, on a thread of its own: waits for ticket `n - 1`'s question, clears its slot,
/// answers it after 50 ms and gives back the question and `SIG_PENDING` as it was meanwhile.
fn answer(mbox: usize, n: u32) -> std::thread::JoinHandle<(u64, u32)> {
    let posted = move || word32(mbox, mailbox::POSTED).load(Ordering::SeqCst);
    std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while posted() < n {
            assert!(std::time::Instant::now() < deadline, "nothing posted");
            std::hint::spin_loop();
        }
        // The target comes tagged with its ticket (see `mailbox::TAG`), just after the ticket.
        let slot = mailbox::RING + 8 * u64::from((n - 1) % mailbox::RING_SLOTS);
        let v = loop {
            let w = word(mbox, slot).load(Ordering::SeqCst);
            if let Some(q) = mailbox::question_of(w, n - 1) {
                break q;
            }
            assert!(std::time::Instant::now() < deadline, "no tagged target: {w:#x}");
            std::hint::spin_loop();
        };
        word(mbox, slot).store(0, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(50));
        let pending = word32(mbox, mailbox::SIG_PENDING).load(Ordering::SeqCst);
        word32(mbox, mailbox::ANSWERED).store(n, Ordering::SeqCst);
        let answered = mbox + mailbox::ANSWERED as usize;
        // SAFETY: FUTEX_WAKE on a word of the mailbox mapping.
        unsafe { libc::syscall(libc::SYS_futex, answered, libc::FUTEX_WAKE, i32::MAX) };
        (v, pending)
    })
}

#[test]
fn an_unmap_asks_kerf_only_over_a_module_and_keeps_every_register() {
    let (mbox, h) = install(unmap_notice);
    // One range, a timeout of a second for the waits.
    word(mbox, mailbox::RANGES).store(1, Ordering::SeqCst);
    word(mbox, mailbox::RANGES + 8).store(0x1000_0000, Ordering::SeqCst);
    word(mbox, mailbox::RANGES + 16).store(0x1000_8000, Ordering::SeqCst);
    word(mbox, mailbox::TIMEOUT).store(1, Ordering::SeqCst);
    let posted = move || word32(mbox, mailbox::POSTED).load(Ordering::SeqCst);
    let kept = |r: [u64; 11], rax: u64, start: u64, len: u64| {
        assert_eq!(r[0] & 0x81, 0x81, "CF and SF: {r:x?}");
        let want = [rax, 0x1111, 0x2222, start, len, 0x8888, 0x9999, 0xaaaa, u64::MAX, 0xcccc];
        assert_eq!(r[1..], want, "{r:x?}");
    };
    let inside = (0x1000_4000, 0x1000);
    // Not listening: nothing posted.
    kept(call(h, 0, inside.0, inside.1), 0, inside.0, inside.1);
    assert_eq!(posted(), 0);
    word32(mbox, mailbox::LISTEN).store(1, Ordering::SeqCst);
    // Elsewhere (just before, just after the range), or a call that failed: nothing posted.
    for (rax, start, len) in [
        (0, 0x2000_0000, 0x1000),
        (0, 0x0fff_f000, 0x1000),
        (0, 0x1000_8000, 0x1000),
        (-22i64 as u64, inside.0, inside.1),
    ] {
        kept(call(h, rax, start, len), rax, start, len);
        assert_eq!(posted(), 0, "{start:x}+{len:x}");
    }
    // Over the range: posted, and the call waits for the answer.
    for (n, (start, len)) in [(0x0fff_f000, 0x2000), (0x1000_7000, 0x4000)].into_iter().enumerate()
    {
        let responder = answer(mbox, n as u32 + 1);
        let began = std::time::Instant::now();
        kept(call(h, 0, start, len), 0, start, len);
        assert!(began.elapsed() >= std::time::Duration::from_millis(40), "it did not wait");
        // (Not a quick question: a handler that interrupts the cache meanwhile is not asked.)
        assert_eq!(responder.join().unwrap(), (mailbox::UNMAPPED | 1, 0));
    }
    // More ranges than the mailbox holds: every unmap asks.
    word(mbox, mailbox::RANGES).store(u64::MAX, Ordering::SeqCst);
    let responder = answer(mbox, 3);
    kept(call(h, 0, 0x2000_0000, 0x1000), 0, 0x2000_0000, 0x1000);
    assert_eq!(responder.join().unwrap(), (mailbox::UNMAPPED | 1, 0));
}

/// [`action_check`] at `label`, with the [`action_notice`] it goes on to.
fn checked(label: u64, mailbox: u64, labels: &mut dyn FnMut() -> u64) -> Vec<Instruction> {
    let notice = labels();
    let mut v = action_check(label, notice, labels);
    v.extend(action_notice(notice, mailbox, labels));
    v
}

#[test]
fn an_action_asks_kerf_before_the_call_and_keeps_every_register() {
    let (mbox, h) = install(action_notice);
    word(mbox, mailbox::TIMEOUT).store(1, Ordering::SeqCst);
    let posted = move || word32(mbox, mailbox::POSTED).load(Ordering::SeqCst);
    let kept = |r: [u64; 11], rax: u64, sig: u64, act: u64| {
        assert_eq!(r[0] & 0x81, 0x81, "CF and SF: {r:x?}");
        let want = [rax, 0x1111, 0x2222, sig, act, 0x8888, 0x9999, 0xaaaa, u64::MAX, 0xcccc];
        assert_eq!(r[1..], want, "{r:x?}");
    };
    // Any address of an action: the routine does not read it (kerf does).
    let act = 0x7fff_1234_5678u64;
    // Not listening: nothing posted.
    kept(call(h, 13, 11, act), 13, 11, act);
    assert_eq!(posted(), 0);
    word32(mbox, mailbox::LISTEN).store(1, Ordering::SeqCst);
    // Only a read of the action (no new one), or an address above 47 bits: nothing posted.
    for a in [0, 1 << 47] {
        kept(call(h, 13, 11, a), 13, 11, a);
        assert_eq!(posted(), 0, "{a:x}");
    }
    // An action given: posted with its address, counted as a quick question while the call
    // waits for the answer, and no longer once answered.
    let responder = answer(mbox, 1);
    let began = std::time::Instant::now();
    kept(call(h, 13, 11, act), 13, 11, act);
    assert!(began.elapsed() >= std::time::Duration::from_millis(40), "it did not wait");
    assert_eq!(responder.join().unwrap(), (mailbox::ACTION | act, 1));
    assert_eq!(word32(mbox, mailbox::SIG_PENDING).load(Ordering::SeqCst), 0);
}

/// A `syscall` whose number is set elsewhere (glibc's `syscall()`): only `rt_sigaction`'s
/// number (13, in `eax`: the kernel reads the low half) goes on to the notice.
#[test]
fn a_syscall_of_a_number_unknown_asks_only_for_rt_sigaction() {
    let (mbox, h) = install(checked);
    word(mbox, mailbox::TIMEOUT).store(1, Ordering::SeqCst);
    word32(mbox, mailbox::LISTEN).store(1, Ordering::SeqCst);
    let posted = move || word32(mbox, mailbox::POSTED).load(Ordering::SeqCst);
    let act = 0x7fff_1234_5678u64;
    let regs = |nr: u64| [nr, 0x1111, 0x2222, 11, act, 0x8888, 0x9999, 0xaaaa, u64::MAX, 0xcccc];
    for nr in [11, 12, 14, 0x1_0000_0000] {
        let r = call(h, nr, 11, act);
        assert_eq!(r[0] & 0x81, 0x81, "CF and SF: {r:x?}");
        assert_eq!(r[1..], regs(nr), "{r:x?}");
        assert_eq!(posted(), 0, "{nr:#x}");
    }
    for (n, nr) in [(1, 13), (2, 0x1_0000_000d)] {
        let responder = answer(mbox, n);
        let r = call(h, nr, 11, act);
        assert_eq!(r[0] & 0x81, 0x81, "CF and SF: {r:x?}");
        assert_eq!(r[1..], regs(nr), "{r:x?}");
        assert_eq!(responder.join().unwrap(), (mailbox::ACTION | act, 1));
    }
}

/// glibc's own `rt_sigaction` (its action a copy on glibc's stack): no question for an
/// action without a handler, nor for a handler in the mailbox's `HANDLERS`; one for any other.
#[test]
fn glibc_action_asks_only_for_a_handler_kerf_has_not_hooked() {
    let (mbox, h) = install(glibc_action_notice);
    word(mbox, mailbox::TIMEOUT).store(1, Ordering::SeqCst);
    word32(mbox, mailbox::LISTEN).store(1, Ordering::SeqCst);
    let posted = move || word32(mbox, mailbox::POSTED).load(Ordering::SeqCst);
    let regs = |act: u64| [13, 0x1111, 0x2222, 11, act, 0x8888, 0x9999, 0xaaaa, u64::MAX, 0xcccc];
    // The kernel's `struct sigaction`: handler, flags, restorer, mask.
    let action =
        |h: u64| Box::leak(Box::new([h, 0x0400_0004, 0x7fff_0000_0000, 0])).as_ptr() as u64;
    let (hooked, new) = (0x5555_0000_1000u64, 0x5555_0000_2000u64);
    word(mbox, mailbox::HANDLERS).store(2, Ordering::SeqCst);
    word(mbox, mailbox::HANDLERS + 8).store(0x5555_0000_0800, Ordering::SeqCst);
    word(mbox, mailbox::HANDLERS + 16).store(hooked, Ordering::SeqCst);
    for act in [0, action(0), action(1), action(hooked)] {
        let r = call(h, 13, 11, act);
        assert_eq!(r[0] & 0x81, 0x81, "CF and SF: {r:x?}");
        assert_eq!(r[1..], regs(act), "{r:x?}");
        assert_eq!(posted(), 0, "{act:x}");
    }
    let act = action(new);
    // (Nor for glibc's own signals, 32 and 33.)
    for sig in [32, 33] {
        let want = [13, 0x1111, 0x2222, sig, act, 0x8888, 0x9999, 0xaaaa, u64::MAX, 0xcccc];
        assert_eq!(call(h, 13, sig, act)[1..], want);
        assert_eq!(posted(), 0, "{sig}");
    }
    let responder = answer(mbox, 1);
    let r = call(h, 13, 11, act);
    assert_eq!(r[1..], regs(act), "{r:x?}");
    assert_eq!(responder.join().unwrap(), (mailbox::ACTION | act, 1));
    // More handlers than the mailbox lists: every handler asks.
    word(mbox, mailbox::HANDLERS).store(u64::MAX, Ordering::SeqCst);
    let act = action(hooked);
    let responder = answer(mbox, 2);
    let r = call(h, 13, 11, act);
    assert_eq!(r[1..], regs(act), "{r:x?}");
    assert_eq!(responder.join().unwrap(), (mailbox::ACTION | act, 1));
}

/// A wait that times out gives up (kerf gone: `LISTEN` cleared) unless kerf's signs of life
/// (`mailbox::ALIVE`: its beat) changed meanwhile: then the thread
/// waits again for its answer.
#[test]
fn a_wait_timed_out_by_a_stop_of_kerf_waits_again() {
    let (mbox, h) = install(action_notice);
    // Waits of 50 ms.
    word(mbox, mailbox::TIMEOUT + 8).store(50_000_000, Ordering::SeqCst);
    word32(mbox, mailbox::LISTEN).store(1, Ordering::SeqCst);
    let act = Box::leak(Box::new([0x5555_0000_1234u64, 0, 0, 0])).as_ptr() as u64;
    let posted = move || word32(mbox, mailbox::POSTED).load(Ordering::SeqCst);
    // kerf answers after 80 ms (past the first wait's 50); for one run it counts a stop at
    // 20 ms, which buys the thread one wait more.
    for stop in [true, false] {
        word32(mbox, mailbox::LISTEN).store(1, Ordering::SeqCst);
        let n = posted() + 1;
        let kerf = std::thread::spawn(move || {
            while posted() < n {
                std::hint::spin_loop();
            }
            if stop {
                std::thread::sleep(std::time::Duration::from_millis(20));
                word(mbox, mailbox::ALIVE).fetch_add(1, Ordering::SeqCst);
            }
            std::thread::sleep(std::time::Duration::from_millis(if stop { 60 } else { 80 }));
            word32(mbox, mailbox::ANSWERED).store(n, Ordering::SeqCst);
            let answered = mbox + mailbox::ANSWERED as usize;
            // SAFETY: FUTEX_WAKE on a word of the mailbox mapping.
            unsafe { libc::syscall(libc::SYS_futex, answered, libc::FUTEX_WAKE, i32::MAX) };
        });
        let began = std::time::Instant::now();
        call(h, 0, 11, act);
        let took = began.elapsed();
        kerf.join().unwrap();
        let listening = word32(mbox, mailbox::LISTEN).load(Ordering::SeqCst);
        if stop {
            // The first wait ended at 50 ms with the count changed: it waited on, and the
            // answer came at 80 ms.
            assert!(took >= std::time::Duration::from_millis(70), "{took:?}");
            assert_eq!(listening, 1, "gave up after {took:?}");
        } else {
            assert!(took < std::time::Duration::from_millis(75), "{took:?}");
            assert_eq!(listening, 0, "waited {took:?} for a stuck kerf");
        }
    }
}

/// The loader's debugger hook sent to [`load_site`]: every call posts [`mailbox::LOADED`] and
/// waits for kerf's answer while kerf listens (nothing otherwise), and returns to the
/// loader's caller with every register and flag as they came.
#[test]
fn the_loaders_hook_asks_kerf_at_every_call_and_keeps_every_register() {
    let (mbox, h) = install(load_site);
    word(mbox, mailbox::TIMEOUT).store(1, Ordering::SeqCst);
    let posted = move || word32(mbox, mailbox::POSTED).load(Ordering::SeqCst);
    let regs = [7, 0x1111, 0x2222, 8, 9, 0x8888, 0x9999, 0xaaaa, u64::MAX, 0xcccc];
    let r = call(h, 7, 8, 9);
    assert_eq!((r[0] & 0x81, &r[1..]), (0x81, &regs[..]), "{r:x?}");
    assert_eq!(posted(), 0, "not listening");
    word32(mbox, mailbox::LISTEN).store(1, Ordering::SeqCst);
    for n in 1..=2 {
        let responder = answer(mbox, n);
        let began = std::time::Instant::now();
        let r = call(h, 7, 8, 9);
        assert!(began.elapsed() >= std::time::Duration::from_millis(40), "it did not wait");
        assert_eq!((r[0] & 0x81, &r[1..]), (0x81, &regs[..]), "{r:x?}");
        assert_eq!(responder.join().unwrap(), (mailbox::LOADED, 0));
    }
}
