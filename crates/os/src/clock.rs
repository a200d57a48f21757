//! The clocks a tracer puts its events on: CLOCK_MONOTONIC and CLOCK_REALTIME in ns, and the
//! time stamp counter read beside them, to calibrate the counter that generated code reads.

/// Nanoseconds of clock `id` (never fails for the clocks named here).
fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; the clocks used always exist on Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC, in ns.
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CLOCK_REALTIME, in ns.
pub fn realtime_ns() -> u64 {
    clock_ns(libc::CLOCK_REALTIME)
}

/// Whether this machine's CPUs have `flag` (a word of /proc/cpuinfo's `flags` line, like
/// `rdpid`): generated code runs on the CPUs kerf runs on.
pub fn cpu_has(flag: &str) -> bool {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let flags = info.lines().find(|l| l.starts_with("flags"));
    flags.is_some_and(|l| l.split_whitespace().any(|w| w == flag))
}

/// The time stamp counter, as generated code reads it.
pub fn tsc() -> u64 {
    // SAFETY: rdtsc has no preconditions; x86-64 always has it.
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// The time stamp counter, read before any load that follows it (`rdtsc; lfence`): a reader
/// that samples it and then reads shared memory knows that what it read was there no
/// earlier than the time it has.
pub fn tsc_before_loads() -> u64 {
    // SAFETY: rdtsc and lfence have no preconditions; x86-64 always has both (lfence is
    // dispatch-serializing on AMD as Linux sets it up, and on Intel).
    unsafe {
        let t = core::arch::x86_64::_rdtsc();
        core::arch::x86_64::_mm_lfence();
        t
    }
}

/// One reading of the time stamp counter and CLOCK_MONOTONIC, taken as close together as
/// kerf can: the pair with the shortest counter span of a few tries (a preemption between
/// the reads shows as a long span).
pub fn tsc_and_monotonic() -> (u64, u64) {
    let mut best = (u64::MAX, 0, 0);
    for _ in 0..5 {
        let a = tsc();
        let ns = monotonic_ns();
        let b = tsc();
        if b - a < best.0 {
            best = (b - a, a + (b - a) / 2, ns);
        }
    }
    (best.1, best.2)
}

/// The time stamp counter and `Instant::now()` read together as [`tsc_and_monotonic`] reads
/// its pair: of a few tries, the one with the shortest counter span around the clock read. A
/// rate computed from two such pairs is not skewed by a preemption between the reads (on a
/// busy machine one took milliseconds, and a timer's TSC-to-ns rate over a second was off by
/// a percent).
pub fn tsc_and_instant() -> (u64, std::time::Instant) {
    let mut best = (u64::MAX, 0, std::time::Instant::now());
    for _ in 0..5 {
        let a = tsc();
        let now = std::time::Instant::now();
        let b = tsc();
        if b.wrapping_sub(a) < best.0 {
            best = (b.wrapping_sub(a), a + b.wrapping_sub(a) / 2, now);
        }
    }
    (best.1, best.2)
}
