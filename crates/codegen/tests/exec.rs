//! Runs generated snippets in this test process: timers under recursion and threads, the
//! thread filter, and that registers and flags live at a point come out unchanged. The
//! snippets are placed in an executable mapping with their data beside them, each followed
//! by a `ret`, and called like functions.

use iced_x86::{BlockEncoder, BlockEncoderOptions, Instruction, InstructionBlock};
use kerf_arch::x86_64::{FlagSet, RegSet};
use kerf_codegen::{lower, timer, Clock, Context, Env, LiveAt, Primitive, ThreadPointer};
use std::arch::asm;
use std::sync::atomic::AtomicU64;

const MAP: usize = 32 << 20;
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
        Arena::mapped(libc::MAP_PRIVATE)
    }

    /// An arena a forked child shares with this process, as it shares kerf's data heap.
    fn shared() -> Arena {
        Arena::mapped(libc::MAP_SHARED)
    }

    fn mapped(sharing: libc::c_int) -> Arena {
        // SAFETY: an anonymous mapping; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAP,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                sharing | libc::MAP_ANONYMOUS,
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
        self.place_insns(&insns)
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

/// The thread id's offset in glibc's `struct pthread`, from the descriptor glibc exports for
/// libthread_db (bits, count, offset), as kerf reads it from a target's libc.
fn glibc_tid_offset() -> u32 {
    // SAFETY: dlsym with a NUL-terminated name; the result is checked before it is read,
    // and glibc's descriptor is three u32s.
    let d = unsafe {
        let p = libc::dlsym(libc::RTLD_DEFAULT, c"_thread_db_pthread_tid".as_ptr());
        assert!(!p.is_null(), "glibc exports _thread_db_pthread_tid");
        *(p as *const [u32; 3])
    };
    assert_eq!(&d[..2], [32, 1]);
    d[2]
}

/// This thread's id, as the kernel knows it.
fn gettid() -> u64 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u64 }
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
        thread_id: Some(glibc_tid_offset()),
        only_thread: None,
        only_id: None,
    };
    let clock = Clock::Cycles;
    let start = ar.place(&[Primitive::TimerStart { timer: t, clock }], &ctx);
    let stop = ar.place(&[Primitive::TimerStop { timer: t, clock }], &ctx);
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
        thread_id: None,
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
    tails_with([Clock::Cycles; 2])
}

/// [`tails`] with a clock for each timer.
fn tails_with(clocks: [Clock; 2]) -> Tails {
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
        thread_id: Some(glibc_tid_offset()),
        only_thread: None,
        only_id: None,
    };
    let deep = SpAt { base: SpBase::Rsp, disp: -64 };
    let timed = [0, 1].map(|k| (timers[k], clocks[k]));
    let start =
        timed.map(|(timer, clock)| ar.place(&[Primitive::TimerStart { timer, clock }], &ctx));
    let call = |ar: &mut Arena, stack| {
        timed.map(|(timer, clock)| {
            ar.place(&[Primitive::TimerTailCall { timer, clock, tails, stack }], &ctx)
        })
    };
    let call_here = call(&mut ar, SpAt::HERE);
    let call_deep = call(&mut ar, deep);
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

/// An off-CPU table as kerf's BPF program keeps one: a word per thread id, up to this
/// thread's, page-aligned.
struct OffCpuTable {
    base: *mut u64,
    len: usize,
}

impl OffCpuTable {
    fn new() -> OffCpuTable {
        let len = ((gettid() as usize + 1) * 8).next_multiple_of(4096);
        // SAFETY: an anonymous mapping; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        OffCpuTable { base: base as *mut u64, len }
    }

    fn clock(&self) -> Clock {
        Clock::OffCpu { table: self.base as u64, tid: glibc_tid_offset() }
    }

    /// This thread was off the CPU for `ns` more (what the BPF program adds at a switch-in).
    fn advance(&self, ns: u64) {
        // SAFETY: the thread's word is inside the mapping (sized for its id).
        unsafe {
            let w = self.base.add(gettid() as usize);
            std::ptr::write_volatile(w, std::ptr::read_volatile(w) + ns);
        }
    }
}

impl Drop for OffCpuTable {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

#[test]
fn an_off_cpu_timer_adds_what_the_threads_word_advanced_inside_its_outermost_calls() {
    let table = OffCpuTable::new();
    table.advance(1_000_000);
    let t = tails_with([Clock::Cycles, table.clock()]);
    // A plain exit (the tail call with no entry before it leaves as one), with recursion.
    run(t.start[0]);
    run(t.start[1]);
    table.advance(700);
    run(t.start[1]);
    table.advance(50);
    run(t.call_here[1]);
    assert_eq!(t.sample(1).cycles, 0, "the inner exit adds nothing");
    table.advance(4);
    // Through a tail call: the tail return reads the clock its entry keeps.
    run(t.call_here[1]);
    assert_eq!(t.sample(1).inside, 1);
    table.advance(30_000);
    run(t.ret_here);
    let s = t.sample(1);
    assert_eq!((s.calls, s.outer, s.inside, s.unmatched, s.lost), (2, 1, 0, 0, 0));
    assert_eq!(s.cycles, 30_754);
    // Off the CPU outside the function: nothing added.
    table.advance(5);
    run(t.start[1]);
    run(t.call_deep[1]);
    run(t.ret_deep);
    assert_eq!(t.sample(1).cycles, 30_754);
    // The wall timer beside it kept cycles, not the table's words.
    run(t.call_here[0]);
    run(t.ret_here);
    let w = t.sample(0);
    assert_eq!((w.outer, w.inside), (1, 0));
    assert!(w.cycles > 0 && w.cycles != 30_754);
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

// ---- IR programs, run natively ----

use kerf_codegen::{ir::Program, lower_program, ring, text, At, FlagSave};

/// Registers the harness sets before a snippet and reads after it, in this order.
const NAMES: [&str; 11] =
    ["rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12", "r13"];
/// Values the harness puts in them by default.
const PATTERN: [u64; 11] = [0xa1, 0xc1, 0xd1, 0x51, 0xd7, 0x108, 0x109, 0x110, 0x111, 0x112, 0x113];

/// What a run of a snippet left: the registers of [`NAMES`], the carry flag (set before the
/// call), and the stack pointer the snippet's point had.
#[derive(Debug)]
struct Ran {
    regs: [u64; 11],
    cf: u64,
    point_sp: u64,
}

/// Call generated code at `f` with the registers of [`NAMES`] set to `r`, once with the
/// stack as Rust has it and once 8 bytes lower (`misalign`), as a point may have it.
fn run_with(f: u64, r: [u64; 11], misalign: bool) -> Ran {
    let [mut a, mut c, mut d, mut si, mut di, mut r8, mut r9, mut r10, mut r11, mut r12, mut r13] =
        r;
    let (flags, sp): (u64, u64);
    // SAFETY: `f` is generated code that returns with `ret`, preserves rbx, rbp, r14 and r15
    // (they are live in every context these tests lower for, or callee-saved), and may write
    // the registers named here; the stack below rsp is usable (no `nostack`).
    unsafe {
        if misalign {
            asm!(
                "sub rsp, 8",
                "stc",
                "call r14",
                "pushfq",
                "pop r14",
                "add rsp, 8",
                "lea r15, [rsp-16]",
                inout("r14") f => flags, lateout("r15") sp,
                inout("rax") a, inout("rcx") c, inout("rdx") d, inout("rsi") si,
                inout("rdi") di, inout("r8") r8, inout("r9") r9, inout("r10") r10,
                inout("r11") r11, inout("r12") r12, inout("r13") r13,
            );
        } else {
            asm!(
                "stc",
                "call r14",
                "pushfq",
                "pop r14",
                "lea r15, [rsp-8]",
                inout("r14") f => flags, lateout("r15") sp,
                inout("rax") a, inout("rcx") c, inout("rdx") d, inout("rsi") si,
                inout("rdi") di, inout("r8") r8, inout("r9") r9, inout("r10") r10,
                inout("r11") r11, inout("r12") r12, inout("r13") r13,
            );
        }
    }
    Ran { regs: [a, c, d, si, di, r8, r9, r10, r11, r12, r13], cf: flags & 1, point_sp: sp }
}

fn with(regs: &[(&str, u64)]) -> [u64; 11] {
    let mut r = PATTERN;
    for (n, v) in regs {
        r[NAMES.iter().position(|x| x == n).expect("a harness register")] = *v;
    }
    r
}

/// Everything live (registers and flags must come out unchanged).
fn all_live() -> At {
    At::new(LiveAt::ALL, Env::User, thread_pointer(), 0)
}

/// The caller-saved registers and the flags dead; what Rust keeps in rbx, rbp, r12-r15
/// (and rsp) live.
fn caller_saved_dead() -> At {
    let live = LiveAt { regs: RegSet(!RegSet::SYSV_CALLER_SAVED.0), flags: FlagSet::EMPTY };
    At::new(live, Env::User, thread_pointer(), 0)
}

impl Arena {
    /// Parse `src` (`{D}` stands for the data area's address), lower it at `at`, place it.
    fn place_ir(&mut self, src: &str, at: &At) -> u64 {
        let src = src.replace("{D}", &format!("{:#x}", self.addr(DATA)));
        let p: Program = text::parse(&src).unwrap_or_else(|e| panic!("{e}\n{src}"));
        let mut insns = lower_program(&p, at).unwrap();
        insns.push(Instruction::with(iced_x86::Code::Retnq));
        self.place_insns(&insns)
    }

    fn place_insns(&mut self, insns: &[Instruction]) -> u64 {
        let at = self.addr(self.code_used as u64);
        let block = InstructionBlock::new(insns, at);
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

    fn data(&self, off: u64) -> u64 {
        self.word(self.addr(DATA + off))
    }

    fn set_data(&self, off: u64, v: u64) {
        // SAFETY: an aligned address inside the mapping's data part.
        unsafe { std::ptr::write_volatile(self.addr(DATA + off) as *mut u64, v) }
    }
}

#[test]
fn reg_reads_the_points_registers_even_where_the_snippet_writes_them() {
    // rax and rdx are read after rdtsc wrote them; the predicate is on rdi.
    let src = "
        reg %di, rdi
        br.ne %di, 0x5eed, skip
        rdtsc %now
        reg %a, rax
        reg %d, rdx
        reg %sp, rsp
        store64 [{D}], %a
        store64 [{D}+8], %d
        store64 [{D}+16], %sp
        store64 [{D}+24], %now
        atomic add [{D}+32], 1
    skip:
    ";
    for at in [all_live(), caller_saved_dead()] {
        let mut ar = Arena::new();
        let f = ar.place_ir(src, &at);
        for misalign in [false, true] {
            let regs = with(&[("rdi", 0x5eed), ("rax", 0xaaaa), ("rdx", 0xdddd)]);
            let r = run_with(f, regs, misalign);
            assert_eq!((ar.data(0), ar.data(8), ar.data(16)), (0xaaaa, 0xdddd, r.point_sp));
            assert_ne!(ar.data(24), 0);
            if at.live == LiveAt::ALL {
                assert_eq!((r.regs, r.cf), (regs, 1), "registers or flags changed");
            } else {
                // What Rust keeps live came through.
                assert_eq!(r.regs[9..], regs[9..]);
            }
        }
        // Another rdi: the predicate skips it.
        run_with(f, with(&[("rdi", 1)]), false);
        assert_eq!(ar.data(32), 2);
    }
}

#[test]
fn coverage_flag_is_set_once_and_left_alone() {
    for at in [all_live(), caller_saved_dead()] {
        let mut ar = Arena::new();
        let f = ar.place_ir(
            "load8 %f, [{D}+9]\n br.ne %f, 0, done\n store8 [{D}+9], 1\n add [{D}+16], 1\ndone:",
            &at,
        );
        ar.set_data(8, 0xffff_ffff_ffff_00ff);
        for _ in 0..3 {
            let r = run_with(f, PATTERN, false);
            if at.live == LiveAt::ALL {
                assert_eq!((r.regs, r.cf), (PATTERN, 1));
            }
        }
        // Byte 9 set, its neighbours untouched; the first run alone went past the test.
        assert_eq!(ar.data(8), 0xffff_ffff_ffff_01ff);
        assert_eq!(ar.data(16), 1);
    }
}

#[test]
fn jit_block_counter_adds_plainly_in_its_thread_and_atomically_in_others() {
    let mut ar = Arena::new();
    let f = ar.place_ir(
        "thread %t
         load64 %owner, [{D}]
         br.ne %t, %owner, shared
         add [{D}+8], 3
         jmp done
        shared:
         atomic add [{D}+16], 3
        done:",
        &all_live(),
    );
    let tp: u64;
    // SAFETY: reads this thread's thread pointer (x86-64 TLS ABI: the TCB's first word).
    unsafe { asm!("mov {}, fs:[0]", out(reg) tp) };
    ar.set_data(0, tp);
    let ar = std::sync::Arc::new(ar);
    const N: u64 = 10_000;
    let hs: Vec<_> = (0..3)
        .map(|_| {
            std::thread::spawn(move || {
                for _ in 0..N {
                    assert_eq!(run_with(f, PATTERN, false).regs, PATTERN);
                }
            })
        })
        .collect();
    for _ in 0..N {
        run_with(f, PATTERN, true);
    }
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!((ar.data(8), ar.data(16)), (3 * N, 3 * 3 * N));
}

/// A per-thread counter (`add [gs:D], n`, as kerf's JIT counts with slabs): each thread
/// adds to the slab its gs base points to, no other's, with every register and the carry
/// flag (set before the call) as they were.
#[test]
fn per_thread_counter_adds_to_the_running_threads_own_slab() {
    if !fsgsbase() {
        eprintln!("skipped: the kernel does not let a thread set its gs base (no FSGSBASE)");
        return;
    }
    let mut ar = Arena::new();
    let f = ar.place_ir("add [gs:24], 5", &all_live());
    const N: u64 = 20_000;
    let slabs: Vec<std::sync::Arc<[AtomicU64; 8]>> =
        (0..4).map(|_| std::sync::Arc::new(Default::default())).collect();
    let hs: Vec<_> = slabs
        .iter()
        .cloned()
        .map(|slab| {
            std::thread::spawn(move || {
                let base = slab.as_ptr() as u64;
                // SAFETY: this thread's own gs base, which nothing else here uses; set back
                // to zero before the thread ends.
                unsafe { asm!("wrgsbase {}", in(reg) base) };
                for _ in 0..N {
                    let r = run_with(f, PATTERN, false);
                    assert_eq!((r.regs, r.cf), (PATTERN, 1));
                }
                // SAFETY: as above.
                unsafe { asm!("wrgsbase {}", in(reg) 0u64) };
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    for slab in &slabs {
        let words: Vec<u64> =
            slab.iter().map(|w| w.load(std::sync::atomic::Ordering::SeqCst)).collect();
        assert_eq!(words, [0, 0, 0, 5 * N, 0, 0, 0, 0]);
    }
}

/// Call generated code at `f` with the registers of [`NAMES`] set to [`PATTERN`] and the
/// arithmetic flags to `flags` (RFLAGS bits: CF 0, PF 2, AF 4, ZF 6, SF 7, OF 11); the
/// registers and flags it leaves.
fn run_flags(f: u64, flags: u64) -> ([u64; 11], u64) {
    let [mut a, mut c, mut d, mut si, mut di, mut r8, mut r9, mut r10, mut r11, mut r12, mut r13] =
        PATTERN;
    let out: u64;
    // SAFETY: as `run_with`: `f` returns with `ret`, preserves rbx, rbp and r15 and may write
    // only the registers named here; `popfq` loads only the arithmetic flags given (and the
    // reserved bit 1), the stack below rsp is usable (no `nostack`).
    unsafe {
        asm!(
            "push r15",
            "popfq",
            "call r14",
            "pushfq",
            "pop r14",
            inout("r14") f => out, in("r15") flags | 2,
            inout("rax") a, inout("rcx") c, inout("rdx") d, inout("rsi") si,
            inout("rdi") di, inout("r8") r8, inout("r9") r9, inout("r10") r10,
            inout("r11") r11, inout("r12") r12, inout("r13") r13,
        );
    }
    ([a, c, d, si, di, r8, r9, r10, r11, r12, r13], out & ARITH)
}

/// The six arithmetic flags' bits in RFLAGS, in [`kerf_arch::x86_64::Flag`]'s order.
const FLAG_BITS: [u64; 6] = [1, 1 << 2, 1 << 4, 1 << 6, 1 << 7, 1 << 11];
const ARITH: u64 = 1 | 1 << 2 | 1 << 4 | 1 << 6 | 1 << 7 | 1 << 11;

#[test]
fn live_flags_come_out_unchanged_kept_in_ah_or_on_the_stack() {
    // A block counter (the owner's path in line, the others' out of line), and a snippet
    // that adds in a register (a scratch register besides the one the flags are kept in).
    let counter = "thread %t
         load64 %owner, [{D}]
         br.ne %t, %owner, shared
         add [{D}+8], 1
        done:
         cold
        shared:
         atomic add [{D}+16], 1
         jmp done";
    let sum = "load64 %v, [{D}+24]\n add %v, 5\n store64 [{D}+24], %v";
    // `inc`: every flag but CF written, so a live CF is kept though not written.
    let inc = "add [{D}+8], 1";
    let tp: u64;
    // SAFETY: reads this thread's thread pointer (x86-64 TLS ABI: the TCB's first word).
    unsafe { asm!("mov {}, fs:[0]", out(reg) tp) };
    for save in [FlagSave::Stack, FlagSave::Ah] {
        for src in [counter, sum, inc] {
            // Every set of live flags, with the registers all live or all dead.
            for live_flags in 0..64u8 {
                for regs in [RegSet::ALL, RegSet::of(&[kerf_arch::x86_64::Gpr::Rsp])] {
                    let live = LiveAt { regs, flags: FlagSet(live_flags) };
                    let at =
                        At { flags_save: save, ..At::new(live, Env::User, thread_pointer(), 0) };
                    let mut ar = Arena::new();
                    let f = ar.place_ir(src, &at);
                    ar.set_data(0, tp);
                    let mask: u64 =
                        (0..6).filter(|k| live_flags >> k & 1 != 0).map(|k| FLAG_BITS[k]).sum();
                    for input in (0..64u64).map(|b| {
                        (0..6).filter(|k| b >> k & 1 != 0).map(|k| FLAG_BITS[k]).sum::<u64>()
                    }) {
                        let (r, out) = run_flags(f, input);
                        assert_eq!(
                            out & mask,
                            input & mask,
                            "{save:?} {src:?}: live {live_flags:#x}, in {input:#x}"
                        );
                        if regs == RegSet::ALL {
                            assert_eq!(r, PATTERN, "{save:?} {src:?}: live {live_flags:#x}");
                        }
                    }
                    let runs = 64;
                    if src != sum {
                        assert_eq!((ar.data(8), ar.data(16)), (runs, 0));
                    } else {
                        assert_eq!(ar.data(24), 5 * runs);
                    }
                }
            }
        }
    }
}

#[test]
fn flags_kept_in_ah_need_no_stack_where_rax_is_dead() {
    // The counter at a point where only the flags and rax... are live: lahf/sahf, and no
    // step over the red zone when rax is dead; a push of rax (over the red zone) when live.
    let p: Program = text::parse("add [0x7000], 1").unwrap();
    let flags = LiveAt { regs: RegSet::of(&[kerf_arch::x86_64::Gpr::Rsp]), flags: FlagSet::ALL };
    let at = At { flags_save: FlagSave::Ah, ..At::new(flags, Env::User, thread_pointer(), 0) };
    let code: Vec<iced_x86::Code> =
        lower_program(&p, &at).unwrap().iter().map(|i| i.code()).collect();
    use iced_x86::Code as C;
    assert_eq!(code, [C::Lahf, C::Seto_rm8, C::Inc_rm64, C::Add_AL_imm8, C::Sahf]);
    let rax = LiveAt {
        regs: RegSet::of(&[kerf_arch::x86_64::Gpr::Rsp, kerf_arch::x86_64::Gpr::Rax]),
        ..flags
    };
    let code: Vec<iced_x86::Code> =
        lower_program(&p, &At { live: rax, ..at }).unwrap().iter().map(|i| i.code()).collect();
    assert_eq!(code.first(), Some(&C::Lea_r64_m), "{code:?}");
    assert!(code.contains(&C::Push_r64) && !code.contains(&C::Pushfq), "{code:?}");
    // In the kernel the flags stay on the stack.
    let k = At { env: Env::Kernel, ..at };
    let code: Vec<iced_x86::Code> =
        lower_program(&p, &k).unwrap().iter().map(|i| i.code()).collect();
    assert!(code.contains(&C::Pushfq) && !code.contains(&C::Lahf), "{code:?}");
}

/// Read the ring at `ring` (data offset) of `ar`.
fn read_ring(ar: &Arena, ring: u64, shape: ring::Shape) -> ring::Batch {
    ring::read(&|o| ar.data(ring + o), shape)
}

#[test]
fn emit_from_threads_fills_the_ring_in_order() {
    const SLOTS: u32 = 1024;
    const PER: u64 = 250;
    let mut ar = Arena::new();
    assert!(DATA + ring::ring_len(ring::Shape::long(SLOTS)) <= MAP as u64);
    let src =
        format!("reg %who, rdi\n reg %k, rsi\n emit ring={{D}}, slots={SLOTS}, stream=5, %who, %k");
    let live = ar.place_ir(&src, &all_live());
    let dead = ar.place_ir(&src, &caller_saved_dead());
    let ar = std::sync::Arc::new(ar);
    let hs: Vec<_> = (0..4u64)
        .map(|who| {
            std::thread::spawn(move || {
                for k in 0..PER {
                    let regs = with(&[("rdi", who), ("rsi", k)]);
                    let f = if k % 2 == 0 { live } else { dead };
                    let r = run_with(f, regs, k % 3 == 0);
                    if f == live {
                        assert_eq!((r.regs, r.cf), (regs, 1));
                    }
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let b = read_ring(&ar, 0, ring::Shape::long(SLOTS));
    assert_eq!((b.records.len() as u64, b.pending, b.lost, b.tail), (4 * PER, 0, 0, 4 * PER));
    let mut next = [0u64; 4];
    let mut last_time = [0u64; 4];
    for (n, rec) in b.records.iter().enumerate() {
        assert_eq!((rec.seq, rec.stream, rec.values.len()), (n as u64, 5, 2));
        let who = rec.values[0] as usize;
        // Each thread's records appear in its own order, with its clock going forward.
        assert_eq!(rec.values[1], next[who], "{rec:?}");
        assert!(rec.time >= last_time[who]);
        next[who] += 1;
        last_time[who] = rec.time;
    }
}

/// Every slot length: records in slot `n % slots` at `slot_len` bytes each, nothing written
/// past the ring's end (a sentinel word there stays), the newest dropped when it is full.
#[test]
fn a_full_ring_counts_losses_until_the_reader_moves_its_tail() {
    const SLOTS: u32 = 8;
    const SENTINEL: u64 = 0x5e47_1e1a_5e47_1e1a;
    for slot_len in [32, 64, 128] {
        let shape = ring::Shape { slots: SLOTS, slot_len };
        let mut ar = Arena::new();
        ar.set_data(ring::ring_len(shape), SENTINEL);
        let f = ar.place_ir(
            &format!("reg %k, rdi\n emit ring={{D}}, slots={SLOTS}, slot={slot_len}, stream=1, %k"),
            &caller_saved_dead(),
        );
        for k in 0..20 {
            run_with(f, with(&[("rdi", k)]), false);
        }
        let b = ring::read(&|o| ar.data(o), shape);
        assert_eq!((b.records.len(), b.lost, b.pending), (8, 12, 0), "{slot_len}-byte slots");
        let kept: Vec<u64> = b.records.iter().map(|r| r.values[0]).collect();
        assert_eq!(kept, (0..8).collect::<Vec<_>>(), "the newest are dropped, not the oldest");
        // The reader consumed them: room again.
        ar.set_data(ring::TAIL, b.tail);
        for k in 100..103 {
            run_with(f, with(&[("rdi", k)]), false);
        }
        let b = ring::read(&|o| ar.data(o), shape);
        let got: Vec<(u64, u64)> = b.records.iter().map(|r| (r.seq, r.values[0])).collect();
        assert_eq!(got, [(8, 100), (9, 101), (10, 102)]);
        assert_eq!(b.lost, 12);
        // Record 9 is in slot 1, at slot_len bytes from slot 0.
        assert_eq!(ar.data(ring::SLOTS + u64::from(slot_len) + ring::SEQ), 10);
        assert_eq!(ar.data(ring::ring_len(shape)), SENTINEL, "{slot_len}-byte slots");
    }
}

/// A thread table at the data area's start and a per-thread ring area after it; an `At`
/// for the point where `live` is live, whose timers and `emit.thread` use that table.
fn thread_rings(ar: &Arena, live: LiveAt, slots: u32) -> (At, u64) {
    let rings = timer::THREAD_TABLE_LEN;
    assert!(DATA + rings + ring::thread_rings_len(ring::Shape::long(slots)) <= MAP as u64);
    let at = At {
        thread_id: Some(glibc_tid_offset()),
        ..At::new(live, Env::User, thread_pointer(), ar.addr(DATA))
    };
    (at, rings)
}

/// The shape of [`place_emit_thread`]'s rings: its records of two words fit 64-byte slots.
fn two_words(slots: u32) -> ring::Shape {
    ring::Shape { slots, slot_len: 64 }
}

/// Place `emit.thread` of `%who` (rdi) and `%k` (rsi) into the area at data offset `rings`,
/// of rings shaped [`two_words`].
fn place_emit_thread(ar: &mut Arena, at: &At, rings: u64, slots: u32) -> u64 {
    place_emit_thread_op(ar, at, rings, slots, "emit.thread")
}

/// [`place_emit_thread`] with the op `op` (`emit.thread` or `emit.thread.untimed`).
fn place_emit_thread_op(ar: &mut Arena, at: &At, rings: u64, slots: u32, op: &str) -> u64 {
    let src = format!(
        "reg %who, rdi\n reg %k, rsi\n {op} rings={:#x}, slots={slots}, slot=64, stream=6, \
         %who, %k",
        ar.addr(DATA + rings)
    );
    ar.place_ir(&src, at)
}

fn read_thread_rings(ar: &Arena, rings: u64, slots: u32) -> ring::ThreadBatches {
    ring::read_threads(&|o| ar.data(rings + o), two_words(slots))
}

/// Run `body(who)` on four threads, `who` = 0..4, all alive at once: glibc gives a thread
/// that starts after another ended the same thread pointer, hence the same slot and ring.
fn on_four_threads(body: impl Fn(u64) + Sync) {
    let all = std::sync::Barrier::new(4);
    std::thread::scope(|s| {
        for who in 0..4 {
            let (all, body) = (&all, &body);
            s.spawn(move || {
                all.wait();
                body(who)
            });
        }
    });
}

/// Run the emits `live` (where every register is live: it must keep them and the flags) and
/// `dead` in turn `per` times on each of four threads (`%who` the thread, `%k` the count),
/// then read the rings at data offset `rings`, none of which lost a record.
fn emit_on_four_threads(
    ar: &Arena,
    (live, dead): (u64, u64),
    rings: u64,
    slots: u32,
    per: u64,
) -> ring::ThreadBatches {
    on_four_threads(|who| {
        for k in 0..per {
            let regs = with(&[("rdi", who), ("rsi", k)]);
            let f = if k % 2 == 0 { live } else { dead };
            let r = run_with(f, regs, k % 3 == 0);
            if f == live {
                assert_eq!((r.regs, r.cf), (regs, 1), "registers or flags changed");
            }
        }
    });
    let t = read_thread_rings(ar, rings, slots);
    assert_eq!(t.lost(), 0);
    t
}

#[test]
fn emit_thread_gives_every_thread_its_records_in_order_and_merges_them_in_time() {
    const SLOTS: u32 = 256;
    const PER: u64 = 250;
    let mut ar = Arena::new();
    let (live_at, rings) = thread_rings(&ar, LiveAt::ALL, SLOTS);
    let dead_at = At { live: caller_saved_dead().live, ..live_at };
    let live = place_emit_thread(&mut ar, &live_at, rings, SLOTS);
    let dead = place_emit_thread(&mut ar, &dead_at, rings, SLOTS);
    let t = emit_on_four_threads(&ar, (live, dead), rings, SLOTS, PER);
    let used: Vec<&ring::Batch> = t.rings.iter().filter(|b| b.tail > 0).collect();
    assert_eq!(used.len(), 4, "one ring per thread");
    let mut seen = [false; 4];
    for b in &used {
        // One thread's records, all of them, in its order, its clock going forward.
        assert_eq!((b.records.len() as u64, b.pending, b.tail), (PER, 0, PER));
        let who = b.records[0].values[0] as usize;
        assert!(!seen[who], "thread {who} wrote into two rings");
        seen[who] = true;
        for (n, rec) in b.records.iter().enumerate() {
            assert_eq!((rec.seq, rec.stream), (n as u64, 6));
            assert_eq!(rec.values, [who as u64, n as u64]);
        }
        assert!(b.records.windows(2).all(|w| w[0].time <= w[1].time));
    }
    // The merged stream: every record once, in time order, each ring's own order kept.
    let m = ring::merge(&t.rings);
    assert_eq!(m.len() as u64, 4 * PER);
    assert!(m.windows(2).all(|w| w[0].record.time <= w[1].record.time));
    let mut next = vec![0u64; t.rings.len()];
    for x in &m {
        assert_eq!(x.record.seq, next[x.ring]);
        next[x.ring] += 1;
    }
}

#[test]
fn untimed_emit_thread_reads_no_clock_and_writes_time_and_cpu_zero() {
    const SLOTS: u32 = 256;
    const PER: u64 = 250;
    let mut ar = Arena::new();
    let (live_at, rings) = thread_rings(&ar, LiveAt::ALL, SLOTS);
    let dead_at = At { live: caller_saved_dead().live, ..live_at };
    let op = "emit.thread.untimed";
    let live = place_emit_thread_op(&mut ar, &live_at, rings, SLOTS, op);
    let dead = place_emit_thread_op(&mut ar, &dead_at, rings, SLOTS, op);
    // Clock reads (rdtsc, rdtscp, rdpid) in the code of each: only the one of a writer that
    // finds its ring full and waits until the reader's deadline (a time stamp), where the
    // timed op also stamps every record.
    let timed = place_emit_thread(&mut ar, &live_at, rings, SLOTS);
    let end = ar.addr(ar.code_used as u64);
    let clocks = |from: u64, to: u64| {
        // SAFETY: the arena's code part, written by place_ir, readable.
        let bytes = unsafe { std::slice::from_raw_parts(from as *const u8, (to - from) as usize) };
        let mut d = iced_x86::Decoder::with_ip(64, bytes, from, iced_x86::DecoderOptions::NONE);
        let clock =
            [iced_x86::Mnemonic::Rdtsc, iced_x86::Mnemonic::Rdtscp, iced_x86::Mnemonic::Rdpid];
        d.iter().filter(|i| clock.contains(&i.mnemonic())).count()
    };
    assert_eq!((clocks(live, dead), clocks(dead, timed)), (1, 1), "clock reads, untimed");
    assert!(clocks(timed, end) > 1, "the timed emit stamps its record");
    let t = emit_on_four_threads(&ar, (live, dead), rings, SLOTS, PER);
    let used: Vec<&ring::Batch> = t.rings.iter().filter(|b| b.tail > 0).collect();
    assert_eq!(used.len(), 4, "one ring per thread");
    for b in &used {
        assert_eq!((b.records.len() as u64, b.pending, b.tail), (PER, 0, PER));
        let who = b.records[0].values[0];
        for (n, rec) in b.records.iter().enumerate() {
            assert_eq!((rec.seq, rec.stream, rec.time, rec.cpu), (n as u64, 6, 0, 0));
            assert_eq!(rec.values, [who, n as u64]);
        }
    }
}

/// The ring kept in the thread's slab ([`At::ring_cache`]): four threads, each with a slab
/// of its own, write their records into rings of their own, each keeping its ring's address
/// in its slab after the first; four threads sharing one slab marked shared do the same and
/// keep nothing there. Registers and flags as they were.
#[test]
fn emit_thread_keeps_the_ring_in_a_slab_of_its_own_and_none_in_a_shared_one() {
    use std::sync::atomic::Ordering::SeqCst;
    if !fsgsbase() {
        eprintln!("skipped: the kernel does not let a thread set its gs base (no FSGSBASE)");
        return;
    }
    const SLOTS: u32 = 256;
    const PER: u64 = 250;
    let slab = || std::sync::Arc::new(std::array::from_fn::<_, SLAB_LEN, _>(|_| AtomicU64::new(0)));
    for shared in [false, true] {
        let mut ar = Arena::new();
        let (live_at, rings) = thread_rings(&ar, LiveAt::ALL, SLOTS);
        let live_at = At { ring_cache: Some(SLAB_RING), ..live_at };
        let dead_at = At { live: caller_saved_dead().live, ..live_at };
        let op = "emit.thread.untimed";
        let live = place_emit_thread_op(&mut ar, &live_at, rings, SLOTS, op);
        let dead = place_emit_thread_op(&mut ar, &dead_at, rings, SLOTS, op);
        let one = slab();
        one[SLAB_RING.shared as usize / 8].store(1, SeqCst);
        let slabs: Vec<_> = (0..4).map(|_| if shared { one.clone() } else { slab() }).collect();
        on_four_threads(|who| {
            let base = slabs[who as usize].as_ptr() as u64;
            // SAFETY: this thread's own gs base, which nothing else here uses; set back to
            // zero before the thread ends.
            unsafe { asm!("wrgsbase {}", in(reg) base) };
            for k in 0..PER {
                let regs = with(&[("rdi", who), ("rsi", k)]);
                let f = if k % 2 == 0 { live } else { dead };
                let r = run_with(f, regs, k % 3 == 0);
                if f == live {
                    assert_eq!((r.regs, r.cf), (regs, 1), "registers or flags changed");
                }
            }
            // SAFETY: as above.
            unsafe { asm!("wrgsbase {}", in(reg) 0u64) };
        });
        let t = read_thread_rings(&ar, rings, SLOTS);
        assert_eq!((t.lost(), t.no_slot), (0, 0));
        let used: Vec<(usize, &ring::Batch)> =
            t.rings.iter().enumerate().filter(|(_, b)| b.tail > 0).collect();
        assert_eq!(used.len(), 4, "one ring per thread");
        for (slot, b) in used {
            assert_eq!((b.records.len() as u64, b.pending, b.tail), (PER, 0, PER));
            let who = b.records[0].values[0];
            for (n, rec) in b.records.iter().enumerate() {
                assert_eq!((rec.seq, rec.stream), (n as u64, 6));
                assert_eq!(rec.values, [who, n as u64]);
            }
            let kept = slabs[who as usize][SLAB_RING.word as usize / 8].load(SeqCst);
            let ring_at = ar.addr(DATA + rings + ring::thread_ring(slot as u64, two_words(SLOTS)));
            assert_eq!(kept, if shared { 0 } else { ring_at }, "thread {who}'s slab");
        }
    }
}

#[test]
fn emit_thread_flood_loses_exactly_what_it_does_not_deliver() {
    const SLOTS: u32 = 8;
    const PER: u64 = 1000;
    let mut ar = Arena::new();
    let (at, rings) = thread_rings(&ar, caller_saved_dead().live, SLOTS);
    let f = place_emit_thread(&mut ar, &at, rings, SLOTS);
    // Nobody drains: each thread's ring fills and the rest of its events are lost.
    on_four_threads(|who| {
        for k in 0..PER {
            run_with(f, with(&[("rdi", who), ("rsi", k)]), false);
        }
    });
    let t = read_thread_rings(&ar, rings, SLOTS);
    let delivered: u64 = t.rings.iter().map(|b| b.records.len() as u64).sum();
    assert_eq!(t.lost(), 4 * PER - delivered, "lost = emitted - delivered");
    assert_eq!((delivered, t.no_slot), (4 * SLOTS as u64, 0));
    for b in t.rings.iter().filter(|b| b.tail > 0) {
        // The oldest are kept: the newest are dropped.
        let ks: Vec<u64> = b.records.iter().map(|r| r.values[1]).collect();
        assert_eq!(ks, (0..SLOTS as u64).collect::<Vec<_>>());
        assert_eq!(b.lost, PER - SLOTS as u64);
    }
    // This thread's ring: drained, then three more fit, numbered on.
    run_with(f, with(&[("rdi", 9), ("rsi", 0)]), false);
    let t = read_thread_rings(&ar, rings, SLOTS);
    let mine = t.rings.iter().position(|b| b.tail > 0 && b.records[0].values[0] == 9).unwrap();
    let base = ring::thread_ring(mine as u64, two_words(SLOTS));
    ar.set_data(rings + base + ring::TAIL, t.rings[mine].tail);
    for k in 1..4 {
        run_with(f, with(&[("rdi", 9), ("rsi", k)]), false);
    }
    let b = read_thread_rings(&ar, rings, SLOTS).rings.swap_remove(mine);
    let got: Vec<(u64, u64)> = b.records.iter().map(|r| (r.seq, r.values[1])).collect();
    assert_eq!(got, [(1, 1), (2, 2), (3, 3)]);
}

/// The time stamp counter.
fn tsc() -> u64 {
    // SAFETY: rdtsc reads a counter; no memory is touched.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// A ring whose `wait` deadline is ahead loses nothing however far ahead its writer is: the
/// writer waits at the full ring until the reader moves its tail. Past the deadline (a reader
/// gone) the writer waits no longer than the deadline and drops, and with `wait` 0 (the
/// tracer's readers) it drops at once.
#[test]
fn a_full_ring_waits_for_its_reader_until_the_deadline() {
    full_ring_waits(false);
}

/// [`a_full_ring_waits_for_its_reader_until_the_deadline`] with the ring kept in the thread's
/// slab, every register live: the wait's system calls keep `rcx` and `r10` (which the code
/// with a kept ring writes nowhere else).
#[test]
fn a_full_ring_kept_in_the_slab_waits_and_keeps_every_register() {
    if !fsgsbase() {
        eprintln!("skipped: the kernel does not let a thread set its gs base (no FSGSBASE)");
        return;
    }
    let slab: Box<[AtomicU64; SLAB_LEN]> = Box::new(std::array::from_fn(|_| AtomicU64::new(0)));
    // SAFETY: this thread's own gs base, which nothing else here uses; set back to zero
    // below.
    unsafe { asm!("wrgsbase {}", in(reg) slab.as_ptr() as u64) };
    full_ring_waits(true);
    // SAFETY: as above.
    unsafe { asm!("wrgsbase {}", in(reg) 0u64) };
}

fn full_ring_waits(cached: bool) {
    const SLOTS: u32 = 8;
    const EVENTS: u64 = 2000;
    let mut ar = Arena::new();
    let live = if cached { LiveAt::ALL } else { caller_saved_dead().live };
    let (at, rings) = thread_rings(&ar, live, SLOTS);
    let at = At { ring_cache: cached.then_some(SLAB_RING), ..at };
    let f = place_emit_thread(&mut ar, &at, rings, SLOTS);
    let run_with = |f: u64, regs: [u64; 11], misalign: bool| {
        let r = run_with(f, regs, misalign);
        if cached {
            assert_eq!((r.regs, r.cf), (regs, 1), "registers or flags changed");
        }
        r
    };
    let tp: u64;
    // SAFETY: reads this thread's thread pointer (x86-64 TLS ABI: the TCB's first word).
    unsafe { asm!("mov {}, fs:[0]", out(reg) tp) };
    // This thread claims its home slot: the table is fresh.
    let ring = rings + ring::thread_ring(timer::home_slot(tp), two_words(SLOTS));
    // 1. A reader on another thread drains a record at a time, the writer far ahead; the
    //    deadline an hour away (of a 10 GHz counter, at most).
    ar.set_data(ring + ring::WAIT, tsc() + 36_000_000_000_000);
    let written = std::sync::atomic::AtomicBool::new(false);
    let got = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut got = Vec::new();
            loop {
                // (Seen before the read: a record written before it is in that read.)
                let last = written.load(std::sync::atomic::Ordering::Acquire);
                let b = ring::read(&|o| ar.data(ring + o), two_words(SLOTS));
                match b.records.first() {
                    Some(r) => {
                        got.push(r.values[1]);
                        ar.set_data(ring + ring::TAIL, r.seq + 1);
                    }
                    None if last => return got,
                    None => {}
                }
            }
        });
        for k in 0..EVENTS {
            run_with(f, with(&[("rdi", 1), ("rsi", k)]), false);
        }
        written.store(true, std::sync::atomic::Ordering::Release);
        reader.join().unwrap()
    });
    assert_eq!(got.len() as u64, EVENTS, "every record");
    assert!(got.iter().copied().eq(0..EVENTS), "in order");
    assert_eq!(ar.data(ring + ring::LOST), 0);
    // 2. No reader, a deadline 20 ms on: the ring fills, the next event waits until the
    //    deadline and is dropped, and so is the next, at once. The wait sleeps after its
    //    first looks: it holds the CPU for less than half of it (yielding throughout, it
    //    held it all the 20 ms).
    for k in 0..u64::from(SLOTS) {
        run_with(f, with(&[("rdi", 2), ("rsi", k)]), false);
    }
    let start = tsc();
    let ticks = 20 * tsc_per_ms();
    ar.set_data(ring + ring::WAIT, start + ticks);
    let cpu = thread_cpu_ns();
    run_with(f, with(&[("rdi", 2), ("rsi", 99)]), false);
    let (waited, cpu) = (tsc() - start, thread_cpu_ns() - cpu);
    assert!(waited >= ticks, "waited {waited} ticks of {ticks}");
    assert!(cpu < 10_000_000, "the 20 ms wait ran on the CPU for {cpu} ns");
    assert_eq!(ar.data(ring + ring::LOST), 1);
    let start = tsc();
    run_with(f, with(&[("rdi", 2), ("rsi", 100)]), false);
    assert!(tsc() - start < ticks, "a second wait past the deadline");
    // 3. `wait` 0: dropped with no wait.
    ar.set_data(ring + ring::WAIT, 0);
    for k in 0..100 {
        run_with(f, with(&[("rdi", 3), ("rsi", k)]), false);
    }
    let b = ring::read(&|o| ar.data(ring + o), two_words(SLOTS));
    assert_eq!((b.lost, b.records.len()), (102, SLOTS as usize));
}

/// This thread's CPU time (ns).
fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid timespec for the call to fill.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    assert_eq!(rc, 0, "clock_gettime");
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// Time stamp counter ticks in a millisecond, measured.
fn tsc_per_ms() -> u64 {
    let (t0, c0) = (std::time::Instant::now(), tsc());
    std::thread::sleep(std::time::Duration::from_millis(20));
    (tsc() - c0) * 1000 / t0.elapsed().as_micros().max(1) as u64
}

/// Place `emit.cpu` of `%who` (rdi) and `%k` (rsi) into an area of `cpus` rings at data
/// offset `rings`.
fn place_emit_cpu(ar: &mut Arena, at: &At, rings: u64, cpus: u32, slots: u32) -> u64 {
    let src = format!(
        "reg %who, rdi\n reg %k, rsi\n emit.cpu rings={:#x}, cpus={cpus}, slots={slots}, \
         stream=7, %who, %k",
        ar.addr(DATA + rings)
    );
    ar.place_ir(&src, at)
}

/// Per-CPU rings (the kernel's): four threads on this machine's CPUs write into two rings at
/// once, and two of them share one CPU's ring whenever they run on the same CPU. Every
/// record lands once, in the ring of the CPU its header names, each thread's records in its
/// order when merged by time, and with the registers and flags of live code unchanged.
#[test]
fn emit_cpu_puts_each_record_in_its_cpus_ring_and_loses_none() {
    const CPUS: u32 = 2;
    const SLOTS: u32 = 4096;
    const PER: u64 = 1000;
    let mut ar = Arena::new();
    let rings = timer::THREAD_TABLE_LEN;
    assert!(
        DATA + rings + ring::rings_len(u64::from(CPUS), ring::Shape::long(SLOTS)) <= MAP as u64
    );
    let at = At::new(LiveAt::ALL, Env::User, thread_pointer(), ar.addr(DATA));
    let f = place_emit_cpu(&mut ar, &at, rings, CPUS, SLOTS);
    on_four_threads(|who| {
        for k in 0..PER {
            let regs = with(&[("rdi", who), ("rsi", k)]);
            let r = run_with(f, regs, k % 3 == 0);
            assert_eq!((r.regs, r.cf), (regs, 1), "registers or flags changed");
        }
    });
    let t = ring::read_rings(&|o| ar.data(rings + o), ring::Shape::long(SLOTS), u64::from(CPUS));
    assert_eq!((t.lost(), t.rings.len()), (0, CPUS as usize));
    for (k, b) in t.rings.iter().enumerate() {
        assert_eq!(b.pending, 0);
        assert!(b.records.iter().all(|r| u32::from(r.cpu) % CPUS == k as u32 && r.stream == 7));
    }
    let m = ring::merge(&t.rings);
    assert_eq!(m.len() as u64, 4 * PER, "every record once");
    let mut next = [0u64; 4];
    for x in &m {
        let (who, k) = (x.record.values[0] as usize, x.record.values[1]);
        assert_eq!(k, next[who], "thread {who}'s records out of order");
        next[who] += 1;
    }
}

/// Per-CPU rings full with writers racing on them: the locked loss count is exact.
#[test]
fn emit_cpu_flood_loses_exactly_what_it_does_not_deliver() {
    const SLOTS: u32 = 16;
    const PER: u64 = 2000;
    let mut ar = Arena::new();
    let rings = timer::THREAD_TABLE_LEN;
    let at = At::new(caller_saved_dead().live, Env::User, thread_pointer(), ar.addr(DATA));
    // One ring for every CPU: all four threads write into it.
    let f = place_emit_cpu(&mut ar, &at, rings, 1, SLOTS);
    on_four_threads(|who| {
        for k in 0..PER {
            run_with(f, with(&[("rdi", who), ("rsi", k)]), false);
        }
    });
    let t = ring::read_rings(&|o| ar.data(rings + o), ring::Shape::long(SLOTS), 1);
    let delivered = t.rings[0].records.len() as u64;
    assert_eq!(delivered, u64::from(SLOTS));
    assert_eq!(t.lost(), 4 * PER - delivered, "lost = emitted - delivered");
}

/// The used rings of a per-thread area: (slot, its key, its owner, its records' values).
fn used_rings(ar: &Arena, rings: u64, slots: u32) -> Vec<(u64, u64, u64, Vec<Vec<u64>>)> {
    let t = read_thread_rings(ar, rings, slots);
    assert_eq!(t.lost(), 0);
    (0..timer::THREAD_SLOTS)
        .filter(|&k| t.rings[k as usize].tail > 0)
        .map(|k| {
            let values = t.rings[k as usize].records.iter().map(|r| r.values.clone()).collect();
            (k, ar.data(8 * k), ar.data(timer::OWNERS + 8 * k), values)
        })
        .collect()
}

/// A child forked after the parent's thread has its slot has the same thread pointer (its
/// memory is a copy) and shares the data (kerf's heap is shared memory): it gets a slot and a
/// ring of its own, owned by its own process and thread, and the parent's ring has only the
/// parent's records. Without the owners, both would write the one ring.
#[test]
fn a_forked_child_gets_a_ring_of_its_own() {
    const SLOTS: u32 = 64;
    let mut ar = Arena::shared();
    let (at, rings) = thread_rings(&ar, LiveAt::ALL, SLOTS);
    let f = place_emit_thread(&mut ar, &at, rings, SLOTS);
    // In a thread of its own, which the forked child's only thread then copies.
    std::thread::scope(|s| {
        s.spawn(|| {
            for k in 0..3 {
                let regs = with(&[("rdi", 1), ("rsi", k)]);
                assert_eq!(run_with(f, regs, false).regs, regs);
            }
            // SAFETY: the child runs only the generated code (no allocation, no locks) and
            // `_exit`; the parent waits for it.
            let child = unsafe { libc::fork() };
            assert!(child >= 0);
            if child == 0 {
                let mut same = true;
                for k in 0..5 {
                    let regs = with(&[("rdi", 2), ("rsi", k)]);
                    same &= run_with(f, regs, k % 2 == 0).regs == regs;
                }
                // SAFETY: ends the child without running the parent's exit handlers.
                unsafe { libc::_exit(if same { 0 } else { 1 }) };
            }
            let mut status = 0;
            // SAFETY: waits for the child forked above.
            assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
            assert_eq!(status, 0, "the child saw its registers changed");
            for k in 3..5 {
                run_with(f, with(&[("rdi", 1), ("rsi", k)]), false);
            }
            let me = (u64::from(std::process::id()) << 32) | gettid();
            let used = used_rings(&ar, rings, SLOTS);
            assert_eq!(used.len(), 2, "{used:x?}");
            let (parent, child_ring) = match used[0].2 == me {
                true => (&used[0], &used[1]),
                false => (&used[1], &used[0]),
            };
            assert_eq!(parent.2, me);
            assert_eq!(child_ring.2 >> 32, child as u64, "the child's slot is the child's");
            assert_eq!(parent.1, child_ring.1, "one thread pointer, two slots");
            let want = |who: u64| (0..5).map(|k| vec![who, k]).collect::<Vec<_>>();
            assert_eq!((&parent.3, &child_ring.3), (&want(1), &want(2)));
        });
    });
}

/// A thread that starts after another ended may get its thread pointer from glibc's stack
/// cache: while the table has a free slot it claims one of its own, and the dead thread's slot
/// (its per-thread shares) stays as it was; once the table is full it takes over the dead
/// thread's slot (its owner gone), as it would with keys alone. A slot whose owner lives on,
/// or belongs to another process, is never taken. Other tests' threads may take the cached
/// stack first, so each thread here puts the slot it is to meet at its own home slot.
#[test]
fn a_thread_on_a_dead_threads_stack_takes_over_its_slot_when_the_table_is_full() {
    const SLOTS: u32 = 64;
    let mut ar = Arena::new();
    let (at, rings) = thread_rings(&ar, LiveAt::ALL, SLOTS);
    let f = place_emit_thread(&mut ar, &at, rings, SLOTS);
    let tp = || -> u64 {
        let tp: u64;
        // SAFETY: reads this thread's thread pointer (x86-64 TLS ABI: the TCB's first word).
        unsafe { asm!("mov {}, fs:[0]", out(reg) tp) };
        tp
    };
    let pid = u64::from(std::process::id()) << 32;
    let dead = std::thread::spawn(gettid).join().unwrap();
    // Gone from the kernel too (tgkill says ESRCH), not only joined.
    let task = std::path::PathBuf::from(format!("/proc/self/task/{dead}"));
    let t0 = std::time::Instant::now();
    while task.exists() && t0.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    // owner: the owner word put on this thread's home slot, with its key, before it emits
    // `who` (with `full`, every other slot of the table given a key of no thread's, owned by
    // this live thread); returns that slot.
    let meet = |owner: u64, who: u64, full: bool| {
        let ar = &ar;
        let me = pid | gettid();
        std::thread::scope(|s| {
            s.spawn(|| {
                let home = timer::home_slot(tp());
                ar.set_data(8 * home, timer::thread_key(tp()));
                ar.set_data(timer::OWNERS + 8 * home, owner);
                if full {
                    // Earlier threads' slots too: a thread on their stack would take them over.
                    for k in (0..timer::THREAD_SLOTS).filter(|&k| k != home) {
                        ar.set_data(8 * k, 0xdead_0000 + k);
                        ar.set_data(timer::OWNERS + 8 * k, me);
                    }
                }
                let regs = with(&[("rdi", who), ("rsi", 0)]);
                assert_eq!(run_with(f, regs, who == 2).regs, regs);
                (home, gettid())
            })
            .join()
            .unwrap()
        })
    };
    // Room in the table: a slot of its own; the dead thread's keeps its owner.
    let (home, second) = meet(pid | dead, 2, false);
    let used = used_rings(&ar, rings, SLOTS);
    assert_eq!(used.len(), 1, "{used:x?}");
    assert_ne!(used[0].0, home, "{used:x?}");
    assert_eq!(used[0].2, pid | second, "the second thread owns a new slot");
    assert_eq!(ar.data(timer::OWNERS + 8 * home), pid | dead, "the dead thread's slot kept");
    assert_eq!(used[0].3, [vec![2, 0]]);
    // The table full: the next thread on that stack takes the dead thread's slot over. Its
    // thread pointer may differ from the second's (another test's thread took the cached
    // stack), and its home slot may then be the one the second thread claimed: the ring keeps
    // the second thread's record, and the third's follows it.
    let before = used_rings(&ar, rings, SLOTS);
    let (home, third) = meet(pid | dead, 3, true);
    let used = used_rings(&ar, rings, SLOTS);
    let at_home: Vec<_> = used.iter().filter(|u| u.0 == home).collect();
    assert_eq!(at_home.len(), 1, "{used:x?}");
    assert_eq!(at_home[0].2, pid | third, "the third thread owns the dead one's slot");
    let mut want: Vec<Vec<u64>> =
        before.iter().filter(|u| u.0 == home).flat_map(|u| u.3.clone()).collect();
    want.push(vec![3, 0]);
    assert_eq!(at_home[0].3, want, "{before:x?}");
    // The slot of this (live) thread, the table full: a fourth thread with its key passes
    // over it and finds no slot (its event lost, counted), the live owner's slot kept.
    let lost_before = read_thread_rings(&ar, rings, SLOTS).no_slot;
    let (home, _) = meet(pid | gettid(), 4, true);
    assert_eq!(ar.data(timer::OWNERS + 8 * home), pid | gettid(), "a live owner's slot kept");
    // A dead thread of another process (pid 1 has no thread `dead`): never signalled, its
    // slot never taken; with the table full, the fifth thread's event is lost.
    let (home, _) = meet((1 << 32) | dead, 5, true);
    assert_eq!(ar.data(timer::OWNERS + 8 * home), (1 << 32) | dead, "another process's slot");
    let t = read_thread_rings(&ar, rings, SLOTS);
    assert_eq!(t.no_slot, lost_before + 2, "the fourth's and the fifth's events, lost");
    assert!(!t.rings.iter().any(|r| r.records.iter().any(|x| x.values[0] >= 4)));
}

/// A thread with no thread pointer (fs base 0, as a bare `clone` leaves it) reads no thread id
/// (the load at `fs:[offset]` would fault): it gets a slot under key 1 with thread id 0, and
/// its registers come out unchanged. Needs `wrfsbase` (FSGSBASE), as kerf's `rdfsbase` does.
#[test]
fn a_thread_with_no_thread_pointer_is_not_harmed() {
    if !fsgsbase() {
        eprintln!(
            "skipped: this CPU or kernel has no FSGSBASE, and without it kerf refuses such threads"
        );
        return;
    }
    const SLOTS: u32 = 64;
    let mut ar = Arena::new();
    let (at, rings) = thread_rings(&ar, LiveAt::ALL, SLOTS);
    let f = place_emit_thread(&mut ar, &at, rings, SLOTS);
    let regs = with(&[("rdi", 7), ("rsi", 1)]);
    let ran = std::thread::spawn(move || {
        let saved: u64;
        // SAFETY: this thread's fs base is 0 only while the generated code runs, which uses
        // no TLS of Rust's (nor does `run_with`'s inline assembly); then put back.
        unsafe { asm!("rdfsbase {s}", "wrfsbase {z}", s = out(reg) saved, z = in(reg) 0u64) };
        let r = run_with(f, regs, false);
        // SAFETY: as above: this thread's own fs base back.
        unsafe { asm!("wrfsbase {}", in(reg) saved) };
        r
    })
    .join()
    .unwrap();
    assert_eq!(ran.regs, regs);
    let used = used_rings(&ar, rings, SLOTS);
    assert_eq!(used.len(), 1, "{used:x?}");
    assert_eq!((used[0].1, used[0].2), (1, u64::from(std::process::id()) << 32));
    assert_eq!(used[0].3, [vec![7, 1]]);
}

#[test]
fn emit_thread_with_no_thread_slot_counts_in_the_shared_loss() {
    const SLOTS: u32 = 4;
    let mut ar = Arena::new();
    let (at, rings) = thread_rings(&ar, LiveAt::ALL, SLOTS);
    let f = place_emit_thread(&mut ar, &at, rings, SLOTS);
    // Every slot of the thread table taken by another thread's key.
    for k in 0..timer::THREAD_SLOTS {
        ar.set_data(8 * k, 0x1000 * (k + 1) + 1);
    }
    for k in 0..5 {
        let regs = with(&[("rdi", 1), ("rsi", k)]);
        assert_eq!(run_with(f, regs, false).regs, regs);
    }
    let t = read_thread_rings(&ar, rings, SLOTS);
    assert_eq!((t.no_slot, t.lost()), (5, 5));
    assert!(t.rings.iter().all(|b| b.tail == 0 && b.records.is_empty()));
}

/// Three pages for the memory-read tests: two readable, then one with no access; returns
/// the first page's address and the no-access page's.
fn guarded_pages() -> (u64, u64) {
    // SAFETY: a fresh anonymous mapping (checked), its last page then made inaccessible;
    // never unmapped (the tests' process ends soon).
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            3 * 4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        );
        assert_ne!(p, libc::MAP_FAILED);
        assert_eq!(libc::mprotect(p.add(2 * 4096), 4096, libc::PROT_NONE), 0);
        (p as u64, p as u64 + 2 * 4096)
    }
}

/// The bytes of record words, in memory order.
fn bytes(words: &[u64]) -> Vec<u8> {
    words.iter().flat_map(|w| w.to_le_bytes()).collect()
}

#[test]
fn emit_thread_reads_copy_memory_into_the_record_and_never_fault() {
    const SLOTS: u32 = 16;
    let (pages, none) = guarded_pages();
    let eight: Vec<u8> = (1..=8).collect();
    let across: Vec<u8> = (0..64).map(|k| 0x40 + k).collect();
    let string = b"kerf trace";
    // 8 bytes inside the first page, 64 across the end of the first page (read as two
    // parts), a 10-byte string that ends where the no-access page begins.
    for (at, b) in [(pages + 0x100, &eight[..]), (pages + 4096 - 20, &across), (none - 10, string)]
    {
        // SAFETY: inside the readable pages of the mapping.
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), at as *mut u8, b.len()) };
    }
    // rdi, rsi, then per read: its status and the bytes it must have copied.
    type Case<'a> = (u64, u64, i64, &'a [u8], i64, &'a [u8]);
    let cases: [Case<'_>; 3] = [
        (pages + 0x100 - 16, pages + 4096 - 20, 8, &eight, 64, &across),
        // 16 is never mapped (below mmap_min_addr).
        (0, none - 10, -EFAULT, &[], 10, string),
        (none - 16, none, -EFAULT, &[], -EFAULT, &[]),
    ];
    for live in [LiveAt::ALL, caller_saved_dead().live] {
        let mut ar = Arena::new();
        let (at, rings) = thread_rings(&ar, live, SLOTS);
        let src = format!(
            "reg %p, rdi\n reg %q, rsi\n emit.thread rings={:#x}, slots={SLOTS}, stream=9, \
             %p, %q, read(%p+16, 8), read(%q, 64)",
            ar.addr(DATA + rings)
        );
        let f = ar.place_ir(&src, &at);
        let shape = ring::Shape::long(SLOTS);
        for (p, q, ..) in cases {
            for misalign in [false, true] {
                let regs = with(&[("rdi", p), ("rsi", q)]);
                let r = run_with(f, regs, misalign);
                if live == LiveAt::ALL {
                    assert_eq!((r.regs, r.cf), (regs, 1), "registers or flags changed");
                } else {
                    assert_eq!(r.regs[9..], regs[9..], "what Rust keeps live changed");
                }
            }
        }
        let t = ring::read_threads(&|o| ar.data(rings + o), shape);
        assert_eq!(t.lost(), 0);
        let b = t.rings.iter().find(|b| b.tail > 0).expect("this thread's ring");
        assert_eq!((b.records.len(), b.pending), (2 * cases.len(), 0));
        for (rec, (p, q, st1, b1, st2, b2)) in
            b.records.iter().zip(cases.iter().flat_map(|c| [c, c]))
        {
            let w = &rec.values;
            // Two values, a read of 8 bytes (status + 1 word), one of 64 (status + 8 words).
            assert_eq!((rec.stream, w.len()), (9, 13), "{rec:x?}");
            assert_eq!((w[0], w[1]), (*p, *q));
            assert_eq!((w[2] as i64, w[4] as i64), (*st1, *st2), "statuses, {rec:x?}");
            assert_eq!(&bytes(&w[3..4])[..b1.len()], *b1);
            assert_eq!(&bytes(&w[5..13])[..b2.len()], *b2);
        }
    }
}

/// A kernel point without the kernel's reader a read needs refuses it (none known, or the
/// one for its kind missing from kallsyms).
#[test]
fn a_kernel_point_refuses_memory_reads_it_has_no_reader_for() {
    let p = text::parse("reg %a, rdi\n emit.thread rings=0x9000, slots=4, stream=1, ustr(%a, 8)")
        .unwrap();
    let at = At { env: Env::Kernel, thread: ThreadPointer::GsSlot(0x2c740), ..all_live() };
    let e = lower_program(&p, &at).unwrap_err();
    assert_eq!(e, kerf_codegen::LowerError::KernelMemoryRead { op: 1 });
    assert!(e.to_string().contains("fault-free reader"), "{e}");
    let only_kernel_copies = kerf_codegen::KernelReads {
        copy_from_kernel_nofault: 0x5000,
        ..kerf_codegen::KernelReads::default()
    };
    let at = At { kernel_reads: Some(only_kernel_copies), ..at };
    assert_eq!(lower_program(&p, &at), Err(kerf_codegen::LowerError::KernelMemoryRead { op: 1 }));
}

/// The CPUs this thread may run on.
fn allowed_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is empty; sched_getaffinity fills it (checked).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        assert_eq!(libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set), 0);
        (0..libc::CPU_SETSIZE as usize).filter(|c| libc::CPU_ISSET(*c, &set)).collect()
    }
}

/// Pin this thread to `cpu`.
fn pin(cpu: usize) {
    // SAFETY: as above; sched_setaffinity on this thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        assert_eq!(libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set), 0);
    }
}

#[test]
fn records_and_the_cpu_op_name_the_cpu_the_thread_is_pinned_to() {
    const SLOTS: u32 = 16;
    let mut ar = Arena::new();
    let (at, rings) = thread_rings(&ar, LiveAt::ALL, SLOTS);
    let per_thread = place_emit_thread(&mut ar, &at, rings, SLOTS);
    // The shared ring and the cpu op's word after the per-thread area.
    let shared = rings + ring::thread_rings_len(two_words(SLOTS));
    let word = shared + ring::ring_len(ring::Shape::long(SLOTS));
    let src = format!(
        "reg %k, rdi\n emit ring={:#x}, slots={SLOTS}, stream=2, %k",
        ar.addr(DATA + shared)
    );
    let emit = ar.place_ir(&src, &all_live());
    let cpu =
        ar.place_ir(&format!("cpu %c\n store64 [{:#x}], %c", ar.addr(DATA + word)), &all_live());
    // The highest CPU first: a writer that always said 0 would fail at once on a machine
    // with more than one.
    let cpus: Vec<usize> = allowed_cpus().into_iter().rev().collect();
    // In a thread of its own: the pinning ends with it.
    std::thread::scope(|s| {
        s.spawn(|| {
            for &c in &cpus {
                pin(c);
                let regs = with(&[("rdi", c as u64), ("rsi", 0)]);
                assert_eq!(run_with(per_thread, regs, false).regs, regs);
                assert_eq!(run_with(emit, regs, true).regs, regs);
                let r = run_with(cpu, PATTERN, false);
                assert_eq!((r.regs, r.cf), (PATTERN, 1), "registers or flags changed");
                assert_eq!(ar.data(word), c as u64, "cpu %c on CPU {c}");
            }
        });
    });
    let mine = read_thread_rings(&ar, rings, SLOTS).rings.into_iter().find(|b| b.tail > 0);
    let shared = read_ring(&ar, shared, ring::Shape::long(SLOTS));
    for b in [mine.expect("the pinned thread's ring"), shared] {
        assert_eq!(b.records.len(), cpus.len());
        for r in &b.records {
            assert_eq!(r.cpu as u64, r.values[0], "{r:?}");
        }
    }
}

/// The `emit.thread` snippet the signal handler below runs, and how often it ran it.
static HANDLER_EMIT: AtomicU64 = AtomicU64::new(0);
static HANDLED: AtomicU64 = AtomicU64::new(0);

extern "C" fn emit_in_handler(_: libc::c_int) {
    use std::sync::atomic::Ordering::Relaxed;
    let h = HANDLED.load(Relaxed);
    run_with(HANDLER_EMIT.load(Relaxed), with(&[("rdi", 1), ("rsi", h)]), false);
    HANDLED.store(h + 1, Relaxed);
}

/// Held by the tests that install a signal handler (tests run in parallel threads).
static SIGNAL_TESTS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Install `handler` for SIGUSR2, or the default action with `None`.
fn on_sigusr2(handler: Option<extern "C" fn(libc::c_int)>) {
    // SAFETY: nothing else in this process uses SIGUSR2 (the tests that do hold
    // SIGNAL_TESTS); the handlers only run snippets, read rings and count.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler.map_or(libc::SIG_DFL, |h| h as *const () as usize);
        assert_eq!(libc::sigaction(libc::SIGUSR2, &sa, std::ptr::null_mut()), 0);
    }
}

/// Run `body` while another thread sends SIGUSR2 to this one, one signal each time this
/// thread's `progress` (which `body` bumps) has moved on by two, so the handler lands at
/// any instruction of a snippet without starving the thread.
fn under_sigusr2(body: impl FnOnce(&std::sync::atomic::AtomicU64)) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
    // SAFETY: gettid has no preconditions.
    let tid = unsafe { libc::gettid() };
    let stop = AtomicBool::new(false);
    let progress = AtomicU64::new(0);
    std::thread::scope(|s| {
        s.spawn(|| {
            while !stop.load(Relaxed) {
                let at = progress.load(Relaxed);
                // SAFETY: a handled signal to a thread of this process, alive until `stop`.
                unsafe { libc::syscall(libc::SYS_tgkill, libc::getpid(), tid, libc::SIGUSR2) };
                while progress.load(Relaxed) < at + 2 && !stop.load(Relaxed) {
                    std::hint::spin_loop();
                }
            }
        });
        body(&progress);
        stop.store(true, Relaxed);
    });
}

/// What the single-step handler below uses: its snippet, the ring it drains, and per kind
/// of record (0: the interrupted code's, 1: the handler's) the next value expected, the
/// records seen, and records out of order.
static DRAIN_EMIT: AtomicU64 = AtomicU64::new(0);
static DRAIN_RING: AtomicU64 = AtomicU64::new(0);
static DRAIN_NEXT: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static DRAIN_SEEN: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
static DRAIN_BAD: AtomicU64 = AtomicU64::new(0);
/// The drained ring's slot length (its slot count is DRAIN_SLOTS).
static DRAIN_SLOT_LEN: AtomicU64 = AtomicU64::new(0);
/// In a compact record's one value, the handler's records' mark (their kind, 1).
const COMPACT_KIND: u64 = 1 << 24;
const DRAIN_SLOTS: u32 = 512;
const EFAULT: i64 = libc::EFAULT as i64;

/// Read the complete records of the ring at DRAIN_RING (an address), check and count them,
/// and move its tail past them: the reader's part (never two at once: the test drains only
/// between stepped runs, the handler only inside one).
fn drain_and_count() {
    use std::sync::atomic::Ordering::Relaxed;
    let ring = DRAIN_RING.load(Relaxed);
    // SAFETY: aligned words of the ring, in the test's mapping, which outlives the test.
    let word = |o: u64| unsafe { std::ptr::read_volatile((ring + o) as *const u64) };
    // ring::read allocates: safe in a handler here, as the code it interrupts never does.
    let shape = ring::Shape { slots: DRAIN_SLOTS, slot_len: DRAIN_SLOT_LEN.load(Relaxed) as u32 };
    let b = ring::read(&word, shape);
    for r in &b.records {
        // A record with reads (Writer::ThreadReads): the stack word read whole, the bad
        // pointer's read refused. A compact one: the kind and count in one value. Each
        // writer's records have its own length only.
        let ok = match (shape.slot_len, r.values.len()) {
            (ring::COMPACT_SLOT_LEN, 1) | (64, 2) => true,
            (128, 7) => r.values[2] == 8 && r.values[4] as i64 == -EFAULT,
            _ => false,
        };
        if !ok || r.stream != 6 {
            DRAIN_BAD.fetch_add(1, Relaxed);
        }
        let (kind, n) = match r.values[..] {
            [v] => ((v / COMPACT_KIND) as usize, v % COMPACT_KIND),
            [who, k, ..] => (who as usize, k),
            [] => {
                DRAIN_BAD.fetch_add(1, Relaxed);
                continue;
            }
        };
        if DRAIN_NEXT[kind].load(Relaxed) != n {
            DRAIN_BAD.fetch_add(1, Relaxed);
        }
        DRAIN_NEXT[kind].store(n + 1, Relaxed);
        DRAIN_SEEN[kind].fetch_add(1, Relaxed);
    }
    // SAFETY: as above.
    unsafe { std::ptr::write_volatile((ring + ring::TAIL) as *mut u64, b.tail) };
}

/// The instruction boundary of the snippet at which the SIGTRAP handler below acts, how
/// many boundaries it has seen in this run, whether it acted, and the snippet's bounds.
static STEP_AT: AtomicU64 = AtomicU64::new(0);
static STEP_SEEN: AtomicU64 = AtomicU64::new(0);
static STEP_ACTED: AtomicU64 = AtomicU64::new(0);
static STEP_CODE: [AtomicU64; 2] = [AtomicU64::new(0), AtomicU64::new(0)];
/// Whether the handler drains the ring after it emitted (else the records wait for the
/// test's drain after the run, as they would for a reader on another CPU).
static STEP_DRAINS: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Single-step handler: the trap flag stops the snippet after every instruction. At
/// boundary STEP_AT it does what a signal handler (or an interrupt) landing there could do:
/// emit through the same snippet (the trap flag is clear inside a handler), then (with
/// STEP_DRAINS) drain the ring. Back in the caller it clears the trap flag.
extern "C" fn step(_: libc::c_int, _: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    use std::sync::atomic::Ordering::Relaxed;
    // SAFETY: the kernel passes the interrupted context as a ucontext_t.
    let gregs = unsafe { &mut (*(ctx as *mut libc::ucontext_t)).uc_mcontext.gregs };
    let rip = gregs[libc::REG_RIP as usize] as u64;
    let (lo, hi) = (STEP_CODE[0].load(Relaxed), STEP_CODE[1].load(Relaxed));
    if !(lo..hi).contains(&rip) {
        gregs[libc::REG_EFL as usize] &= !0x100;
        return;
    }
    if STEP_SEEN.fetch_add(1, Relaxed) == STEP_AT.load(Relaxed) {
        let h = HANDLED.load(Relaxed);
        // A compact record has one value: the handler's kind in its bit 24.
        let v = if DRAIN_SLOT_LEN.load(Relaxed) == u64::from(ring::COMPACT_SLOT_LEN) {
            h | COMPACT_KIND
        } else {
            h
        };
        run_with(DRAIN_EMIT.load(Relaxed), with(&[("rdi", 1), ("rsi", v)]), false);
        HANDLED.store(h + 1, Relaxed);
        if STEP_DRAINS.load(Relaxed) {
            drain_and_count();
        }
        STEP_ACTED.store(1, Relaxed);
    }
}

/// Run the snippet at `f` with `rdi` = 0, `rsi` = `k` and the trap flag set.
fn run_stepped(f: u64, k: u64) {
    // SAFETY: as run_with: `f` ends in `ret` and preserves every register it is lowered
    // with live (here all); the trap flag is cleared by the SIGTRAP handler once the
    // snippet has returned.
    unsafe {
        asm!(
            "pushfq",
            "or qword ptr [rsp], 0x100",
            "popfq",
            "call {f}",
            f = in(reg) f, in("rdi") 0u64, in("rsi") k, clobber_abi("C"),
        );
    }
}

/// Interrupt the emit snippet (the shared ring's, or with `per_thread` this thread's own)
/// at every instruction boundary in turn with a handler that emits and drains the ring, as a
/// signal handler and kerf's reader could: the handler can take the record the interrupted
/// writer was about to, and move the tail past the head that writer read. Every event of
/// both must be read once, in order, none counted lost (the ring never holds more than two).
fn emit_interrupted_at_every_instruction(writer: Writer) {
    use std::sync::atomic::Ordering::Relaxed;
    let _one = SIGNAL_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let mut ar = Arena::new();
    // Records with reads take 7 words, a 128-byte slot; the others 2, a 64-byte one.
    let compact = matches!(writer, Writer::ThreadCompact | Writer::ThreadCompactCached);
    let shape = match writer {
        Writer::ThreadReads => ring::Shape::long(DRAIN_SLOTS),
        _ if compact => ring::Shape::compact(DRAIN_SLOTS),
        _ => two_words(DRAIN_SLOTS),
    };
    DRAIN_SLOT_LEN.store(u64::from(shape.slot_len), Relaxed);
    let cached = matches!(
        writer,
        Writer::ThreadCached | Writer::ThreadCachedCold | Writer::ThreadCompactCached
    );
    if cached && !fsgsbase() {
        eprintln!("skipped: the kernel does not let a thread set its gs base (no FSGSBASE)");
        return;
    }
    // A slab of this thread's own for a cached ring: its gs base while the test runs.
    let slab: Box<[AtomicU64; SLAB_LEN]> = Box::new(std::array::from_fn(|_| AtomicU64::new(0)));
    let (f, ring) = if writer != Writer::Shared {
        let (at, rings) = thread_rings(&ar, LiveAt::ALL, DRAIN_SLOTS);
        let at = At { ring_cache: cached.then_some(SLAB_RING), ..at };
        let tp: u64;
        // SAFETY: reads this thread's thread pointer (x86-64 TLS ABI: the TCB's first word).
        unsafe { asm!("mov {}, fs:[0]", out(reg) tp) };
        // This thread claims its home slot: the table is fresh.
        let ring = rings + ring::thread_ring(timer::home_slot(tp), shape);
        let f = if writer == Writer::ThreadReads {
            // The word at the point's rsp (the return address: readable), and 16 bytes at
            // %who + 8 (8 or 9: unmapped); drain_and_count checks both statuses.
            let src = format!(
                "reg %who, rdi\n reg %k, rsi\n reg %sp, rsp\n emit.thread rings={:#x}, \
                 slots={DRAIN_SLOTS}, stream=6, %who, %k, read(%sp, 8), read(%who+8, 16)",
                ar.addr(DATA + rings)
            );
            ar.place_ir(&src, &at)
        } else if compact {
            let src = format!(
                "reg %k, rsi\n emit.thread.untimed rings={:#x}, slots={DRAIN_SLOTS}, slot=8, \
                 stream=6, %k",
                ar.addr(DATA + rings)
            );
            ar.place_ir(&src, &at)
        } else if matches!(writer, Writer::ThreadUntimed | Writer::ThreadCached) {
            place_emit_thread_op(&mut ar, &at, rings, DRAIN_SLOTS, "emit.thread.untimed")
        } else {
            place_emit_thread(&mut ar, &at, rings, DRAIN_SLOTS)
        };
        (f, ring)
    } else {
        let src = format!(
            "reg %who, rdi\n reg %k, rsi\n emit ring={{D}}, slots={DRAIN_SLOTS}, slot=64, \
             stream=6, %who, %k"
        );
        (ar.place_ir(&src, &all_live()), 0)
    };
    STEP_CODE[0].store(f, Relaxed);
    STEP_CODE[1].store(ar.addr(ar.code_used as u64), Relaxed);
    DRAIN_EMIT.store(f, Relaxed);
    DRAIN_RING.store(ar.addr(DATA + ring), Relaxed);
    let counters = [&HANDLED, &DRAIN_BAD, &DRAIN_NEXT[0], &DRAIN_NEXT[1]];
    for a in counters.into_iter().chain(&DRAIN_SEEN) {
        a.store(0, Relaxed);
    }
    // SAFETY: a SIGTRAP handler for this test's single steps; no other test traps (the
    // signal tests hold SIGNAL_TESTS).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = step as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO;
        assert_eq!(libc::sigaction(libc::SIGTRAP, &sa, std::ptr::null_mut()), 0);
    }
    if cached {
        // SAFETY: this thread's own gs base, which nothing else here uses; set back to zero
        // below.
        unsafe { asm!("wrgsbase {}", in(reg) slab.as_ptr() as u64) };
    }
    let word = &slab[SLAB_RING.word as usize / 8];
    // Runs (the value each emits), and boundaries of the last pass.
    let mut k = 0;
    let mut steps = 0;
    // Each boundary twice: the handler drains (and moves the tail past the head the writer
    // read), then it leaves its record for the drain after the run (a record it wrote over
    // would show then).
    for drains in [true, false] {
        STEP_DRAINS.store(drains, Relaxed);
        let mut b = 0;
        loop {
            STEP_AT.store(b, Relaxed);
            STEP_SEEN.store(0, Relaxed);
            STEP_ACTED.store(0, Relaxed);
            // Cold: every run looks the ring up (and the handler's too, when it comes first).
            if writer == Writer::ThreadCachedCold {
                word.store(0, Relaxed);
            }
            run_stepped(f, k);
            drain_and_count();
            k += 1;
            b += 1;
            if STEP_ACTED.load(Relaxed) == 0 {
                break;
            }
        }
        steps = STEP_SEEN.load(Relaxed);
        assert!(steps > 20 && b == steps + 1, "{b} runs, {steps} boundaries");
    }
    STEP_DRAINS.store(true, Relaxed);
    // SAFETY: back to the default action, and to no gs base.
    unsafe {
        libc::signal(libc::SIGTRAP, libc::SIG_DFL);
        if cached {
            asm!("wrgsbase {}", in(reg) 0u64);
        }
    }
    if cached {
        assert_eq!(word.load(Relaxed), ar.addr(DATA + ring), "the slab keeps the ring");
    }
    let lost = ar.data(ring + ring::LOST);
    let seen = [DRAIN_SEEN[0].load(Relaxed), DRAIN_SEEN[1].load(Relaxed)];
    assert_eq!(
        (seen, DRAIN_BAD.load(Relaxed), lost),
        ([k, 2 * steps], 0, 0),
        "every event once and in order, nothing counted lost"
    );
}

/// The writers [`emit_interrupted_at_every_instruction`] interrupts.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Writer {
    Shared,
    Thread,
    /// `emit.thread` with two memory reads (system calls between reservation and `seq`).
    ThreadReads,
    /// `emit.thread.untimed`.
    ThreadUntimed,
    /// `emit.thread.untimed` with the ring kept in the thread's slab ([`At::ring_cache`]):
    /// found there, and (cold) looked up at every run, the slab's word zeroed before it.
    ThreadCached,
    ThreadCachedCold,
    /// `emit.thread.untimed` into compact slots (one word a record, published by `head`),
    /// its ring looked up at every record, or kept in the slab.
    ThreadCompact,
    ThreadCompactCached,
}

/// Where a test's slab keeps the thread's ring, and its shared mark (kerf's JIT:
/// `kerf_jit::x86_64::SLAB_RINGS`, `SLAB_SHARED`), and the words of such a slab.
const SLAB_RING: kerf_codegen::SlabRing = kerf_codegen::SlabRing { word: 64, shared: 16 };
const SLAB_LEN: usize = 16;

#[test]
fn shared_emit_interrupted_at_every_instruction_loses_nothing() {
    emit_interrupted_at_every_instruction(Writer::Shared);
}

#[test]
fn emit_thread_interrupted_at_every_instruction_loses_nothing() {
    emit_interrupted_at_every_instruction(Writer::Thread);
}

#[test]
fn untimed_emit_thread_interrupted_at_every_instruction_loses_nothing() {
    emit_interrupted_at_every_instruction(Writer::ThreadUntimed);
}

#[test]
fn emit_thread_with_its_ring_in_the_slab_interrupted_at_every_instruction_loses_nothing() {
    emit_interrupted_at_every_instruction(Writer::ThreadCached);
}

#[test]
fn emit_thread_looking_its_ring_up_interrupted_at_every_instruction_loses_nothing() {
    emit_interrupted_at_every_instruction(Writer::ThreadCachedCold);
}

#[test]
fn compact_emit_thread_interrupted_at_every_instruction_loses_nothing() {
    emit_interrupted_at_every_instruction(Writer::ThreadCompact);
}

#[test]
fn compact_emit_thread_with_its_ring_in_the_slab_interrupted_at_every_instruction_loses_nothing() {
    emit_interrupted_at_every_instruction(Writer::ThreadCompactCached);
}

#[test]
fn emit_thread_with_reads_interrupted_at_every_instruction_loses_nothing() {
    emit_interrupted_at_every_instruction(Writer::ThreadReads);
}

#[test]
fn emit_thread_interrupted_by_a_signal_handler_that_emits_loses_nothing() {
    use std::sync::atomic::Ordering::Relaxed;
    const SLOTS: u32 = 512;
    const SIGNALS: u64 = 3000;
    let _one = SIGNAL_TESTS.lock().unwrap_or_else(|e| e.into_inner());
    let mut ar = Arena::new();
    let (at, rings) = thread_rings(&ar, LiveAt::ALL, SLOTS);
    let f = place_emit_thread(&mut ar, &at, rings, SLOTS);
    HANDLER_EMIT.store(f, Relaxed);
    HANDLED.store(0, Relaxed);
    on_sigusr2(Some(emit_in_handler));
    // The handler lands at any instruction of the snippet, between the writer's
    // reservation and its seq store too, and of the reader's code below.
    let (mut mine, mut handler, mut k, mut lost) = (Vec::new(), Vec::new(), 0u64, 0u64);
    let mut take = |b: &ring::Batch| {
        for r in &b.records {
            let to = if r.values[0] == 0 { &mut mine } else { &mut handler };
            to.push(r.values[1]);
        }
        assert_eq!(b.pending, 0);
        lost = b.lost;
    };
    under_sigusr2(|progress| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let mut ring_at = None;
        while HANDLED.load(Relaxed) < SIGNALS && std::time::Instant::now() < deadline {
            run_with(f, with(&[("rdi", 0), ("rsi", k)]), false);
            k += 1;
            progress.store(k, Relaxed);
            // Play the reader every 16 events.
            if k % 16 == 0 {
                let base = *ring_at.get_or_insert_with(|| {
                    let t = read_thread_rings(&ar, rings, SLOTS);
                    let slot = t.rings.iter().position(|b| b.tail > 0).expect("my ring");
                    rings + ring::thread_ring(slot as u64, two_words(SLOTS))
                });
                let b = read_ring(&ar, base, two_words(SLOTS));
                take(&b);
                ar.set_data(base + ring::TAIL, b.tail);
            }
        }
    });
    on_sigusr2(None);
    let handled = HANDLED.load(Relaxed);
    assert!(handled >= SIGNALS, "only {handled} signals handled in 20 s");
    // The last events after the last drain are still in the ring: read them too.
    let t = read_thread_rings(&ar, rings, SLOTS);
    t.rings.iter().filter(|b| b.tail > 0).for_each(&mut take);
    // Every event of each kind once, in its order; none written over by the other.
    assert_eq!(lost, 0, "a 512-slot ring drained every 16 events never fills");
    assert_eq!(mine.len() as u64, k, "the interrupted writer's events");
    assert!(mine.iter().enumerate().all(|(n, v)| *v == n as u64));
    assert_eq!(handler.len() as u64, handled, "the handler's events");
    assert!(handler.iter().enumerate().all(|(n, v)| *v == n as u64));
}

/// The clean call's callee: records its arguments and how its stack was aligned.
extern "sysv64" fn hook(a: u64, b: u64) -> u64 {
    let sp: u64;
    // SAFETY: reads rsp.
    unsafe { asm!("mov {}, rsp", out(reg) sp) };
    HOOK_SP.store(sp % 16, std::sync::atomic::Ordering::Relaxed);
    a * 1000 + b
}

static HOOK_SP: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(99);

#[test]
fn clean_call_passes_arguments_saves_registers_and_aligns_the_stack() {
    let mut ar = Arena::new();
    let src = format!(
        "reg %a, rdi\n call %r, {:#x}, %a, 42\n store64 [{{D}}], %r",
        hook as extern "sysv64" fn(u64, u64) -> u64 as usize
    );
    let f = ar.place_ir(&src, &all_live());
    let mut seen = Vec::new();
    for misalign in [false, true] {
        let regs = with(&[("rdi", 7)]);
        let r = run_with(f, regs, misalign);
        assert_eq!((r.regs, r.cf), (regs, 1), "registers or flags changed");
        assert_eq!(ar.data(0), 7042);
        seen.push(HOOK_SP.load(std::sync::atomic::Ordering::Relaxed));
    }
    // The callee's stack is aligned the same way whatever the point's alignment was.
    assert_eq!(seen[0], seen[1], "callee rsp % 16 at the two alignments: {seen:?}");
}

#[test]
fn task_predicate_reads_through_the_thread_pointer() {
    // only_id at offset 0 of the TCB (its self pointer): the low half of this thread's
    // thread pointer is the id, so the counter counts in this thread alone.
    let mut ar = Arena::new();
    let slot = ar.addr(DATA);
    let tp: u64;
    // SAFETY: reads this thread's thread pointer (x86-64 TLS ABI: the TCB's first word).
    unsafe { asm!("mov {}, fs:[0]", out(reg) tp) };
    let ctx = Context {
        live: LiveAt::ALL,
        env: Env::User,
        thread: thread_pointer(),
        threads: 0,
        thread_id: None,
        only_thread: None,
        only_id: Some((0, tp as u32)),
    };
    let f = ar.place(&[Primitive::Count { slot }], &ctx);
    for _ in 0..4 {
        assert_eq!(call(f), ([0xa1, 0xc1, 0xd1, 0x101, 0x111], 1));
    }
    std::thread::spawn(move || call(f)).join().unwrap();
    assert_eq!(ar.word(slot), 4);
}

/// Stand-ins for the kernel's fault-free readers (the kernel's signatures): address 8 faults.
extern "C" fn fake_copy(dst: *mut u8, src: *const u8, len: usize) -> i64 {
    if src as u64 == 8 {
        return -14;
    }
    // SAFETY: the test hands readable `src` and a record slot of room at `dst`.
    unsafe { std::ptr::copy_nonoverlapping(src, dst, len) };
    0
}

extern "C" fn fake_strncpy(dst: *mut u8, src: *const u8, count: i64) -> i64 {
    if src as u64 == 8 {
        return -14;
    }
    for k in 0..count as usize {
        // SAFETY: as for fake_copy; the string ends within `count` bytes or is cut there.
        let b = unsafe { *src.add(k) };
        unsafe { *dst.add(k) = b };
        if b == 0 {
            return k as i64 + 1;
        }
    }
    count
}

/// The kernel's record reads (`templates::record_reads_kernel`) run in this process against
/// stand-in readers: each kind calls its routine with (slot + status + 8, base + disp, len)
/// on a 16-byte aligned stack, a copy's 0 becomes `len`, a string copy's length is kept, a
/// fault is -EFAULT; the slot pointer (`r11`) and `seq` (`rdx`) survive, and so does `rbx`.
#[test]
fn kernel_record_reads_call_the_readers_and_keep_their_statuses() {
    use iced_x86::code_asm::*;
    use kerf_codegen::ir::ReadKind;
    use kerf_codegen::templates::{record_reads_kernel, SlotRead};
    let mut ar = Arena::new();
    // Stubs in the arena (within a call's reach of the code) jump to the Rust functions.
    let stub = |ar: &mut Arena, f: u64| {
        let mut a = CodeAssembler::new(64).unwrap();
        a.mov(rax, f).unwrap();
        a.jmp(rax).unwrap();
        ar.place_insns(&a.take_instructions())
    };
    let copy = stub(&mut ar, fake_copy as *const () as u64);
    let strn = stub(&mut ar, fake_strncpy as *const () as u64);
    let kr = kerf_codegen::KernelReads {
        copy_from_kernel_nofault: copy,
        copy_from_user_nofault: copy,
        strncpy_from_kernel_nofault: strn,
        strncpy_from_user_nofault: strn,
    };
    let read =
        |status, kind, len| SlotRead { base: iced_x86::Register::RBX, disp: 2, status, len, kind };
    let reads = [
        read(24, ReadKind::Bytes, 8),
        read(40, ReadKind::Str, 16),
        read(64, ReadKind::UserBytes, 4),
        read(80, ReadKind::UserStr, 3),
    ];
    // f(slot, base, seq) -> seq as the template left it.
    let mut a = CodeAssembler::new(64).unwrap();
    a.push(rbx).unwrap();
    a.mov(r11, rdi).unwrap();
    a.mov(rbx, rsi).unwrap();
    let mut insns = a.take_instructions();
    insns.extend(record_reads_kernel(&reads, &kr));
    let mut a = CodeAssembler::new(64).unwrap();
    a.mov(rax, rdx).unwrap();
    a.pop(rbx).unwrap();
    a.ret().unwrap();
    insns.extend(a.take_instructions());
    let f = ar.place_insns(&insns);
    // SAFETY: the placed code follows the C calling convention (rbx kept, stack balanced).
    let run: extern "C" fn(*mut u64, u64, u64) -> u64 = unsafe { std::mem::transmute(f) };
    let text = b"..hello\0world, long enough";
    let mut slot = [0u64; 16];
    assert_eq!(run(slot.as_mut_ptr(), text.as_ptr() as u64, 77), 77, "seq survives");
    let bytes = |w: usize, n: usize| -> Vec<u8> {
        slot[w..].iter().flat_map(|x| x.to_le_bytes()).take(n).collect()
    };
    assert_eq!(slot[3] as i64, 8, "a copy's 0 is its length");
    assert_eq!(bytes(4, 8), b"hello\0wo");
    assert_eq!(slot[5] as i64, 6, "a string copy's length, with its NUL");
    assert_eq!(bytes(6, 6), b"hello\0");
    assert_eq!((slot[8] as i64, bytes(9, 4)), (4, b"hell".to_vec()));
    assert_eq!((slot[10] as i64, bytes(11, 3)), (3, b"hel".to_vec()), "cut at its count");
    let mut slot = [0u64; 16];
    assert_eq!(run(slot.as_mut_ptr(), 6, 5), 5);
    for w in [3, 5, 8, 10] {
        assert_eq!(slot[w] as i64, -14, "word {w}: a fault is -EFAULT");
    }
}
