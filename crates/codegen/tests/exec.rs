//! Runs generated snippets in this test process: timers under recursion and threads, the
//! thread filter, and that registers and flags live at a point come out unchanged. The
//! snippets are placed in an executable mapping with their data beside them, each followed
//! by a `ret`, and called like functions.

use iced_x86::{BlockEncoder, BlockEncoderOptions, Instruction, InstructionBlock};
use kerf_arch::x86_64::{FlagSet, RegSet};
use kerf_codegen::{lower, timer, Context, Env, LiveAt, Primitive, ThreadPointer};
use std::arch::asm;

const MAP: usize = 1 << 20;
const DATA: u64 = 512 * 1024;

struct Arena {
    base: *mut u8,
    code_used: usize,
}

// SAFETY: the arena is only written before threads start; afterwards its data part is
// updated by generated code with atomic instructions and read with volatile loads.
unsafe impl Send for Arena {}
unsafe impl Sync for Arena {}

impl Arena {
    fn new() -> Arena {
        // SAFETY: an anonymous private mapping; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAP,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        Arena { base: base as *mut u8, code_used: 0 }
    }

    fn addr(&self, off: u64) -> u64 {
        self.base as u64 + off
    }

    /// Place `prims` lowered with `ctx`, then `ret`; returns the code's address.
    fn place(&mut self, prims: &[Primitive], ctx: &Context) -> u64 {
        let mut insns = lower(prims, ctx).unwrap();
        insns.push(Instruction::with(iced_x86::Code::Retnq));
        let at = self.addr(self.code_used as u64);
        let block = InstructionBlock::new(&insns, at);
        let bytes = BlockEncoder::encode(64, block, BlockEncoderOptions::NONE).unwrap().code_buffer;
        // SAFETY: inside the mapping (code part, below DATA), not yet executed.
        unsafe {
            std::ptr::copy_nonoverlapping(
                bytes.as_ptr(),
                self.base.add(self.code_used),
                bytes.len(),
            )
        };
        self.code_used += bytes.len().next_multiple_of(16);
        assert!((self.code_used as u64) < DATA);
        at
    }

    fn word(&self, addr: u64) -> u64 {
        // SAFETY: an aligned address inside the mapping.
        unsafe { std::ptr::read_volatile(addr as *const u64) }
    }
}

fn fsgsbase() -> bool {
    // SAFETY: getauxval has no preconditions.
    unsafe { libc::getauxval(libc::AT_HWCAP2) & 2 != 0 }
}

fn thread_pointer() -> ThreadPointer {
    if fsgsbase() {
        ThreadPointer::FsBase
    } else {
        ThreadPointer::FsSelf
    }
}

/// Call generated code at `f` with every register the snippet might use set to a pattern,
/// and return them afterwards with the flags.
fn call(f: u64) -> ([u64; 5], u64) {
    let (mut a, mut c, mut d, mut r10, mut r11) = (0xa1u64, 0xc1u64, 0xd1u64, 0x101u64, 0x111u64);
    let flags: u64;
    // SAFETY: `f` is generated code that returns with `ret` and preserves (or may clobber
    // only) the registers named here; the stack is usable below rsp (no `nostack`).
    unsafe {
        asm!(
            "stc",
            "call {f}",
            "pushfq",
            "pop {fl}",
            f = in(reg) f,
            fl = out(reg) flags,
            inout("rax") a, inout("rcx") c, inout("rdx") d, inout("r10") r10, inout("r11") r11,
        );
    }
    ([a, c, d, r10, r11], flags & 1)
}

/// A thread table and one timer in the arena's data, and that timer's start and stop
/// snippets lowered for a point where `live` is live: (table, timer, start, stop).
fn timer_pair(ar: &mut Arena, live: LiveAt) -> (u64, u64, u64, u64) {
    let threads = ar.addr(DATA);
    let t = ar.addr(DATA + timer::THREAD_TABLE_LEN);
    let ctx = Context {
        live,
        env: Env::User,
        thread: thread_pointer(),
        threads,
        only_thread: None,
        only_id: None,
    };
    let start = ar.place(&[Primitive::TimerStart { timer: t }], &ctx);
    let stop = ar.place(&[Primitive::TimerStop { timer: t }], &ctx);
    (threads, t, start, stop)
}

#[test]
fn timer_counts_recursion_once_and_threads_separately() {
    let mut ar = Arena::new();
    let (threads, t, start, stop) = timer_pair(&mut ar, LiveAt::ALL);
    let ar = std::sync::Arc::new(ar);
    const N: u64 = 20_000;
    let hs: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..N {
                    // Recursion two deep, then out.
                    assert_eq!(call(start), ([0xa1, 0xc1, 0xd1, 0x101, 0x111], 1));
                    call(start);
                    call(stop);
                    call(stop);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let s = timer::sample(&|o| ar.word(t + o), 0);
    assert_eq!((s.calls, s.outer), (4 * 2 * N, 4 * N));
    assert_eq!((s.inside, s.lost, s.unmatched), (0, 0, 0));
    assert!(s.cycles > 0);
    // Four threads have slots in the table (each thread found its own key once).
    let keys = (0..timer::THREAD_SLOTS).filter(|k| ar.word(threads + 8 * k) != 0).count();
    assert_eq!(keys, 4);
    // An exit with no entry is counted as unmatched, and leaves the depth alone.
    call(stop);
    let s = timer::sample(&|o| ar.word(t + o), 0);
    assert_eq!((s.unmatched, s.inside), (1, 0));
    // A thread inside now is counted by the sampler.
    call(start);
    let s = timer::sample(&|o| ar.word(t + o), u64::MAX / 2);
    assert_eq!(s.inside, 1);
    call(stop);
}

#[test]
fn outermost_interval_covers_the_inner_work() {
    let mut ar = Arena::new();
    let nothing_live = LiveAt { regs: RegSet::EMPTY, flags: FlagSet::EMPTY };
    let (_, t, start, stop) = timer_pair(&mut ar, nothing_live);
    // SAFETY: reading the time stamp counter has no preconditions.
    let t0 = unsafe { core::arch::x86_64::_rdtsc() };
    call(start);
    call(start);
    std::thread::sleep(std::time::Duration::from_millis(20));
    call(stop);
    call(stop);
    // SAFETY: as above.
    let t1 = unsafe { core::arch::x86_64::_rdtsc() };
    let s = timer::sample(&|o| ar.word(t + o), t1);
    assert!(s.cycles > 0 && s.cycles <= t1 - t0, "{} of {}", s.cycles, t1 - t0);
    // The sleep dominates: the timed interval is nearly all of the elapsed time.
    assert!(s.cycles * 10 >= (t1 - t0) * 9, "{} of {}", s.cycles, t1 - t0);
}

#[test]
fn thread_filter_counts_only_that_thread() {
    let mut ar = Arena::new();
    let slot = ar.addr(DATA);
    let mut tp: u64 = 0;
    // SAFETY: reads this thread's thread pointer from the first word of its TCB (x86-64
    // TLS ABI); Rust test threads have TLS.
    unsafe { asm!("mov {}, fs:[0]", out(reg) tp) };
    let ctx = Context {
        live: LiveAt::ALL,
        env: Env::User,
        thread: thread_pointer(),
        threads: 0,
        only_thread: Some(tp),
        only_id: None,
    };
    let f = ar.place(&[Primitive::Count { slot }], &ctx);
    for _ in 0..10 {
        assert_eq!(call(f), ([0xa1, 0xc1, 0xd1, 0x101, 0x111], 1));
    }
    std::thread::spawn(move || {
        for _ in 0..5 {
            call(f);
        }
    })
    .join()
    .unwrap();
    assert_eq!(ar.word(slot), 10);
}

/// Two timers with their start, stop and tail-call snippets, and tail-return snippets, for a
/// point where everything is live (so the snippets must preserve every register).
struct Tails {
    ar: Arena,
    timers: [u64; 2],
    start: [u64; 2],
    /// Tail calls noted at this call's stack pointer, and 64 bytes below it.
    call_here: [u64; 2],
    call_deep: [u64; 2],
    /// Returns at this call's stack pointer, and 64 bytes below it.
    ret_here: u64,
    ret_deep: u64,
    tails: u64,
}

fn tails() -> Tails {
    use kerf_codegen::{SpAt, SpBase};
    let mut ar = Arena::new();
    let threads = ar.addr(DATA);
    let timers = [0, 1].map(|k| ar.addr(DATA + timer::THREAD_TABLE_LEN + k * timer::TIMER_LEN));
    let tails = ar.addr(DATA + timer::THREAD_TABLE_LEN + 2 * timer::TIMER_LEN);
    assert!(
        DATA + timer::THREAD_TABLE_LEN + 2 * timer::TIMER_LEN + timer::TAIL_AREA_LEN <= MAP as u64
    );
    let ctx = Context {
        live: LiveAt::ALL,
        env: Env::User,
        thread: thread_pointer(),
        threads,
        only_thread: None,
        only_id: None,
    };
    let deep = SpAt { base: SpBase::Rsp, disp: -64 };
    let start = timers.map(|t| ar.place(&[Primitive::TimerStart { timer: t }], &ctx));
    let call_here = timers.map(|t| {
        ar.place(&[Primitive::TimerTailCall { timer: t, tails, stack: SpAt::HERE }], &ctx)
    });
    let call_deep = timers
        .map(|t| ar.place(&[Primitive::TimerTailCall { timer: t, tails, stack: deep }], &ctx));
    let ret_here = ar.place(&[Primitive::TimerTailReturn { tails, stack: SpAt::HERE }], &ctx);
    let ret_deep = ar.place(&[Primitive::TimerTailReturn { tails, stack: deep }], &ctx);
    Tails { ar, timers, start, call_here, call_deep, ret_here, ret_deep, tails }
}

impl Tails {
    fn sample(&self, k: usize) -> timer::TimerSample {
        timer::sample(&|o| self.ar.word(self.timers[k] + o), 0)
    }

    /// Pending tail calls of every thread.
    fn pending(&self) -> u64 {
        (0..timer::THREAD_SLOTS).map(|s| self.ar.word(self.tails + s * timer::TAIL_LEN)).sum()
    }
}

/// Every snippet is called from the same place, so "here" is the same stack pointer each
/// time, as a tail call's jump and the callee's return share one.
fn run(f: u64) {
    assert_eq!(call(f), ([0xa1, 0xc1, 0xd1, 0x101, 0x111], 1), "registers changed");
}

#[test]
fn a_tail_call_leaves_the_timer_at_the_return_with_its_stack_pointer() {
    let t = tails();
    run(t.start[0]);
    run(t.call_here[0]);
    // Still inside after the jump; a return deeper down (the callee's own calls) is not it.
    assert_eq!(t.sample(0).inside, 1);
    run(t.ret_deep);
    assert_eq!((t.sample(0).inside, t.pending()), (1, 1));
    run(t.ret_here);
    let s = t.sample(0);
    assert_eq!((s.calls, s.outer, s.inside, s.unmatched, s.lost), (1, 1, 0, 0, 0));
    assert!(s.cycles > 0);
    assert_eq!(t.pending(), 0);
}

#[test]
fn tail_recursion_and_nesting_leave_every_level() {
    let t = tails();
    // A tail-recursive loop through the entry: three levels, one pending entry.
    run(t.start[0]);
    run(t.call_here[0]);
    run(t.start[0]);
    run(t.call_here[0]);
    run(t.start[0]);
    run(t.call_here[0]);
    assert_eq!(t.pending(), 1);
    run(t.ret_here);
    assert_eq!((t.sample(0).inside, t.sample(0).calls, t.sample(0).outer), (0, 3, 1));
    // Nested: the timed function's tail callee calls it again, which tail-calls deeper down.
    run(t.start[0]);
    run(t.call_here[0]);
    run(t.start[0]);
    run(t.call_deep[0]);
    assert_eq!(t.pending(), 2);
    run(t.ret_deep);
    assert_eq!((t.sample(0).inside, t.pending()), (1, 1));
    run(t.ret_here);
    assert_eq!((t.sample(0).inside, t.pending()), (0, 0));
    // Two timers pending at one return: both leave there.
    run(t.start[0]);
    run(t.start[1]);
    run(t.call_here[1]);
    run(t.call_here[0]);
    run(t.ret_here);
    assert_eq!((t.sample(0).inside, t.sample(1).inside, t.pending()), (0, 0, 0));
    assert_eq!((t.sample(0).unmatched, t.sample(1).unmatched), (0, 0));
}

#[test]
fn a_tail_call_with_no_entry_or_no_room_is_a_plain_exit() {
    let t = tails();
    // Entered before the splice: an unmatched exit, nothing pending.
    run(t.call_here[0]);
    assert_eq!((t.sample(0).unmatched, t.pending()), (1, 0));
    // More nesting than the stack holds: the extra tail call leaves at the jump.
    let n = timer::TAIL_ENTRIES;
    for k in 0..=n {
        run(t.start[0]);
        // Alternate timers and stack pointers so that no two neighbours merge.
        run(if k % 2 == 0 { t.call_here[0] } else { t.call_deep[0] });
    }
    assert_eq!(t.pending(), n);
    assert_eq!(t.sample(0).inside, 1);
    // Returns pop the newest first: alternating stack pointers pop one entry each.
    for k in (0..n).rev() {
        run(if k % 2 == 0 { t.ret_here } else { t.ret_deep });
    }
    let s = t.sample(0);
    assert_eq!((s.inside, s.outer, s.unmatched), (0, 1, 1));
    assert_eq!(t.pending(), 0);
}

#[test]
fn tail_stacks_are_per_thread() {
    let t = std::sync::Arc::new(tails());
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let t = t.clone();
            std::thread::spawn(move || {
                for _ in 0..5000 {
                    run(t.start[0]);
                    run(t.call_here[0]);
                    run(t.ret_deep);
                    run(t.ret_here);
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let s = t.sample(0);
    assert_eq!((s.calls, s.outer, s.inside, s.unmatched, s.lost), (20_000, 20_000, 0, 0, 0));
    assert_eq!(t.pending(), 0);
}
