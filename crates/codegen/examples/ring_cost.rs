//! Cost of one trace event (the timestamp and CPU, and two integer captures) written by
//! generated code into the shared ring (`emit`, `lock cmpxchg` on its head) and into the
//! thread's own ring (`emit.thread`, no locked instruction), and of the same per-thread
//! event with one 32-byte memory read (`read(%sp, 32)`: `getpid` and `process_vm_readv`),
//! run natively in this process from one thread and from two at once. Not a test: numbers
//! go to `bench/RESULTS.md`.
//!
//! `cargo run --release -p kerf-codegen --example ring_cost [EVENTS_PER_THREAD]`
//!
//! Each thread calls the snippet `BATCH` times between two clock reads, then plays the
//! reader (moves the ring's tail to its head, outside the timed part), so no ring is ever
//! full and every event takes the writing path; the loss counts printed at the end must be 0.
//! A snippet that is only `ret` is timed the same way: the call and loop around each event,
//! which a spliced probe does not pay, is printed so it can be subtracted.

use iced_x86::{BlockEncoder, BlockEncoderOptions, Instruction, InstructionBlock};
use kerf_arch::x86_64::{FlagSet, Gpr, RegSet};
use kerf_codegen::{lower_program, ring, text, timer, At, CpuRead, Env, LiveAt, ThreadPointer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

/// Slots of each per-thread ring and of the shared ring.
const THREAD_SLOTS: u32 = 4096;
const SHARED_SLOTS: u32 = 8192;
/// Events between two clock reads (and two drains): below every ring's size, even with two
/// threads sharing one.
const BATCH: u64 = 1024;
const CODE_LEN: u64 = 64 * 1024;

struct Map {
    base: u64,
    len: usize,
}

impl Map {
    fn new(len: usize) -> Map {
        // SAFETY: an anonymous private mapping; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        Map { base: p as u64, len }
    }

    /// The u64 at `addr` in the mapping, as an atomic (generated code updates it too).
    fn word(&self, addr: u64) -> &AtomicU64 {
        assert!(
            addr >= self.base && addr + 8 <= self.base + self.len as u64 && addr.is_multiple_of(8)
        );
        // SAFETY: aligned, inside the mapping, which lives as long as `self`.
        unsafe { AtomicU64::from_ptr(addr as *mut u64) }
    }
}

/// Lower `src` at `at`, append `ret`, and copy it to `addr`; returns `addr`.
fn place(map: &Map, addr: u64, src: &str, at: &At) -> u64 {
    let mut insns = match src {
        "" => Vec::new(),
        _ => lower_program(&text::parse(src).unwrap(), at).unwrap(),
    };
    insns.push(Instruction::with(iced_x86::Code::Retnq));
    let block = InstructionBlock::new(&insns, addr);
    let bytes = BlockEncoder::encode(64, block, BlockEncoderOptions::NONE).unwrap().code_buffer;
    assert!(addr + bytes.len() as u64 <= map.base + CODE_LEN);
    // SAFETY: the code part of the mapping, not running yet.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len()) };
    addr
}

/// Call the snippet at `f` with `rdi` = `a`, `rsi` = `b`, as the probed function's entry.
#[inline(always)]
fn call(f: u64, a: u64, b: u64) {
    // SAFETY: `f` is generated code ending in `ret` that writes only caller-saved registers
    // and the flags (dead after a call) and its ring; the stack below rsp is usable.
    unsafe {
        std::arch::asm!("call {f}", f = in(reg) f, in("rdi") a, in("rsi") b, clobber_abi("C"));
    }
}

/// Nanoseconds an event of `f` takes, from `threads` threads at once (the mean of their
/// own means); `drain()` plays the reader after each batch of the calling thread.
fn time(f: u64, threads: usize, events: u64, drain: &(dyn Fn() + Sync)) -> f64 {
    let start = std::sync::Barrier::new(threads);
    let per: Vec<f64> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..threads)
            .map(|_| {
                s.spawn(|| {
                    start.wait();
                    let mut ns = 0u128;
                    let mut n = 0;
                    while n < events {
                        let t = Instant::now();
                        for k in 0..BATCH {
                            call(f, n + k, k);
                        }
                        ns += t.elapsed().as_nanos();
                        drain();
                        n += BATCH;
                    }
                    ns as f64 / n as f64
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    per.iter().sum::<f64>() / per.len() as f64
}

fn main() {
    let events: u64 = std::env::args().nth(1).map_or(4_000_000, |s| s.parse().unwrap());
    // SAFETY: getauxval has no preconditions.
    let fsgsbase = unsafe { libc::getauxval(libc::AT_HWCAP2) } & 2 != 0;
    let tp = if fsgsbase { ThreadPointer::FsBase } else { ThreadPointer::FsSelf };
    let area_len = ring::thread_rings_len(ring::Shape::long(THREAD_SLOTS));
    let len = CODE_LEN
        + timer::THREAD_TABLE_LEN
        + area_len
        + ring::ring_len(ring::Shape::long(SHARED_SLOTS));
    let map = Map::new(len as usize);
    let threads_at = map.base + CODE_LEN;
    let area = threads_at + timer::THREAD_TABLE_LEN;
    let shared = area + area_len;
    // A function's entry: its two arguments, rsp and the callee-saved registers live;
    // the other caller-saved registers and the flags dead. And the worst case, all live.
    let mut entry = RegSet::of(&[Gpr::Rdi, Gpr::Rsi, Gpr::Rsp]);
    entry = entry.union(RegSet(!RegSet::SYSV_CALLER_SAVED.0));
    let points = [
        ("entry (args live)", LiveAt { regs: entry, flags: FlagSet::EMPTY }),
        ("everything live", LiveAt::ALL),
    ];
    let caps = "reg %a, rdi\n reg %b, rsi\n";
    let mut code = map.base;
    let mut next = |src: &str, at: &At| {
        let f = place(&map, code, src, at);
        code += 1024;
        f
    };
    let nothing = At::new(LiveAt::ALL, Env::User, tp, threads_at);
    // rdtsc + rdpid for the CPU where the CPU has RDPID (#UD elsewhere).
    let rdpid = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("flags"))
        .is_some_and(|l| l.split_whitespace().any(|w| w == "rdpid"));
    let empty = next("", &nothing);
    // Drains: the shared ring's tail to its head (any thread), and this thread's ring's.
    let drain_shared = || {
        let head = map.word(shared + ring::HEAD).load(Ordering::Acquire);
        map.word(shared + ring::TAIL).fetch_max(head, Ordering::Release);
    };
    let drain_mine = || {
        let key = timer::thread_key(thread_pointer());
        let table = |k: u64| map.word(threads_at + 8 * k).load(Ordering::Relaxed);
        let slot = (0..timer::THREAD_SLOTS).find(|k| table(*k) == key).expect("a slot");
        let r = area + ring::thread_ring(slot, ring::Shape::long(THREAD_SLOTS));
        let head = map.word(r + ring::HEAD).load(Ordering::Acquire);
        map.word(r + ring::TAIL).store(head, Ordering::Release);
    };
    println!(
        "ns per event (mean over {events} events a thread, batches of {BATCH}; \
         call+loop overhead included)"
    );
    println!(
        "{:<20} {:>8} {:>12} {:>12} {:>8} {:>14} {:>14}",
        "point", "threads", "emit", "emit.thread", "ratio", "+ 32-byte read", "thread+rdpid"
    );
    for threads in [1usize, 2] {
        let base = time(empty, threads, events, &|| {});
        println!("{:<20} {threads:>8} {base:>12.2} {:>12} {:>8}", "(empty snippet)", "", "");
    }
    let mut f_read = None;
    for (name, live) in points {
        let at = At { live, ..nothing };
        let shared_src =
            format!("{caps} emit ring={shared:#x}, slots={SHARED_SLOTS}, stream=1, %a, %b");
        let mine_src =
            format!("{caps} emit.thread rings={area:#x}, slots={THREAD_SLOTS}, stream=1, %a, %b");
        // The read copies 32 bytes of the stack at the point (always readable).
        let read_src = format!(
            "{caps} reg %sp, rsp\n emit.thread rings={area:#x}, slots={THREAD_SLOTS}, \
             stream=2, %a, %b, read(%sp, 32)"
        );
        let f_shared = next(&shared_src, &at);
        let f_mine = next(&mine_src, &at);
        let f = next(&read_src, &at);
        let f_rdpid = rdpid.then(|| next(&mine_src, &At { cpu: CpuRead::Rdpid, ..at }));
        f_read = Some(f);
        for threads in [1usize, 2] {
            let s = time(f_shared, threads, events, &drain_shared);
            let m = time(f_mine, threads, events, &drain_mine);
            // Fewer events: each is two system calls.
            let r = time(f, threads, events / 16, &drain_mine);
            let p = f_rdpid.map(|g| format!("{:.2}", time(g, threads, events, &drain_mine)));
            let p = p.unwrap_or_else(|| "no rdpid".into());
            println!(
                "{name:<20} {threads:>8} {s:>12.2} {m:>12.2} {:>8.2} {r:>14.2} {p:>14}",
                s / m
            );
        }
    }
    // The read events read their 32 bytes (not a fast failure): one more, from this thread
    // (whose ring nobody drains), and its status.
    call(f_read.expect("a point"), 1, 2);
    let word = |o: u64| map.word(area + o).load(Ordering::Relaxed);
    let t = ring::read_threads(&word, ring::Shape::long(THREAD_SLOTS));
    let read = t.rings.iter().flat_map(|b| &b.records).find(|r| r.stream == 2);
    let status = read.map(|r| r.values[2] as i64);
    println!("status of a read event: {status:?} (32: read whole)");
    let lost = map.word(shared + ring::LOST).load(Ordering::Relaxed);
    let t = ring::read_threads(
        &|o| map.word(area + o).load(Ordering::Relaxed),
        ring::Shape::long(THREAD_SLOTS),
    );
    println!("lost: shared ring {lost}, per-thread rings {}", t.lost());
}

/// This thread's thread pointer, as the generated code's lookup sees it (the TCB's first
/// word is the thread pointer itself, x86-64 TLS ABI).
fn thread_pointer() -> u64 {
    let tp: u64;
    // SAFETY: reads fs:[0], which Rust threads (with TLS) always have.
    unsafe { std::arch::asm!("mov {}, fs:[0]", out(reg) tp) };
    tp
}
