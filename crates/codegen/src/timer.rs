//! Per-thread cycle timers and the thread table they index, as laid out in a data heap and
//! as the generated code updates them (KernInst §4.1's cycle timer, made correct under
//! recursion and threads).
//!
//! A timer starts at a function's entry and stops at each of its exits. Only the outermost
//! entry of a thread starts it and only the matching exit stops it, so recursion is timed
//! once; each thread keeps its own depth and start time, so threads overlapping in the
//! function each add their own interval. The sum of those intervals is the area under the
//! "threads inside" curve: divided by elapsed time it is KernInst's concurrency metric,
//! without the multi-word atomic update an average-over-time accumulator would need.
//!
//! Thread table (one per data heap, shared by its timers and per-thread rings):
//! ```text
//! +0     keys    [u64; THREAD_SLOTS]   thread pointer + 1 (0 = free), claimed with lock cmpxchg
//! +2048  owners  [u64; THREAD_SLOTS]   (process id << 32) | thread id of the slot's thread,
//!                                      where the target's thread id is known (0 until set)
//! ```
//! Timer block (`TIMER_LEN` bytes):
//! ```text
//! +0   calls      u64   entries, recursive ones included (lock inc)
//! +8   cycles     u64   sum of completed outermost intervals, in TSC cycles (lock add)
//! +16  lost       u64   entries and exits of threads that found no free slot
//! +24  unmatched  u64   exits with depth 0 (the thread entered before the splice)
//! +32  outer      u64   outermost entries (calls that started an interval)
//! +64  states     [(depth u64, start u64, cycles u64, outer u64); THREAD_SLOTS], indexed
//!                 like the thread table: the thread's depth and outermost start, and its own
//!                 share of `cycles` and `outer` (the per-thread breakdown); only the owning
//!                 thread writes its state, so no atomics are needed there
//! ```
//! The generated code never frees a slot: a thread that exits leaves its key, and glibc gives
//! a later thread the same thread pointer when it reuses the stack, which then reuses the
//! slot. (kerf's side frees the slots of forked children that ended; see below.) A thread that
//! leaves a timed function by `longjmp` or an exception keeps a depth above zero.
//!
//! # Forked children: the owners
//!
//! A child the program forks keeps its parent's memory layout, so its thread has the thread
//! pointer of the parent's thread that forked; kerf's data heap is shared memory, and a lookup
//! by thread pointer alone would give both the same slot (and the same single-writer ring,
//! written by two processes at once). Where the target's thread id is known (glibc's
//! `struct pthread.tid`, which the kernel sets in a forked child before it runs), a slot
//! also names its owner, and a lookup matches the key *and* the owner's thread id, which no
//! two live threads share:
//!
//! 1. The fast path walks the probe chain from the home slot: a slot with our key and our
//!    thread id is ours; one with our key and another thread id (the forking parent, or a dead
//!    thread whose stack glibc gave us) is passed over; a free slot ends the chain.
//! 2. Not found (a thread's first event): the first free slot of the chain is claimed (`lock
//!    cmpxchg` of its key), then its owner written (`getpid() << 32 | tid`). Between the two,
//!    another process's thread with the same key sees owner 0 and passes over it; step 3 never
//!    takes an owner of 0. A thread on a dead thread's stack so gets a slot of its own while
//!    the table has room, and the dead thread's slot keeps its per-thread shares apart.
//! 3. No free slot (the table full): each slot of the chain with our key whose owner is a
//!    thread of our own process (`getpid()`) that is gone (`tgkill(pid, owner tid, 0)` says
//!    `ESRCH`) is taken over by a `lock cmpxchg` of its owner word, so that a program that
//!    keeps making threads keeps finding slots (a thread reusing a dead thread's stack reuses
//!    its slot). Another process's thread is never signalled: seccomp policies commonly punish
//!    a kill aimed outside the process (Chromium's renderers, forked from a zygote, crash on
//!    one), and the process may have installed its filter after kerf looked. So the code
//!    leaves a forked child's slots taken after the child ends; kerf, which can see that the
//!    child is gone, frees them from its side (the session's `PatchSet::free_ended_children`:
//!    the owner cleared, then the slot's timer states and tail stack, then the key). Until it
//!    does, once the table is full of live or foreign owners further threads' events are
//!    counted lost (`no_slot`, the timers' `lost`).
//!
//! So a forked child's threads get slots of their own, and the parent's rings keep one writer.
//! A signal handler that interrupts a thread's first lookup between 2's claim and owner write
//! claims a second slot for the thread; both are its own (the first found wins afterwards).
//! Only steps 2 and 3 make system calls, once in a thread's life: `getpid`, and, the table
//! full, `tgkill` with signal 0 on its own process for each slot of the chain with our key and
//! an owner of this process (a program's own `raise` makes both, so seccomp filters allow
//! them). A thread that
//! finds the table full of other keys makes none: it walks the chain three times and counts
//! its event lost.
//!
//! # Tail calls
//!
//! A function that ends in a tail call (`jmp g`) has not finished at the jump: `g` returns
//! straight to its caller, and the function's time includes `g`'s. So the timer is not left
//! at a direct tail call; instead the thread notes a *pending tail call* (its stack pointer at
//! the jump, the timer, and how many levels it leaves), and the return that ends it is the
//! first return (or jump out of probed code) executed with that same stack pointer: the
//! return address `g` uses is the one the jump left on the stack. kerf probes the returns of
//! every function reachable by direct tail calls (`g`, and what `g` tail-calls in turn) for
//! that. Matching on the stack pointer, not on the callee, keeps recursion and the callee's
//! own calls from other places apart, and needs nothing of the program's stack changed: the
//! alternative of turning the jump into a call (or of planting a return address) would move
//! the callee's stack arguments and show the program a return address no unwinder knows.
//!
//! Pending tail calls are a small stack per thread, shared by the timers of a data heap:
//! ```text
//! tail stack of a thread (TAIL_LEN bytes, indexed like the thread table)
//! +0   n        u64   entries in use
//! +32  entries  [(sp u64, timer u64, levels u64, unused u64); TAIL_ENTRIES], oldest first
//! ```
//! A pending tail call whose return is never seen (a `longjmp`, an exit kerf could not probe)
//! keeps its thread inside, like a `longjmp` out of the function itself. When the stack is
//! full, a tail call leaves its timer at the jump, as a plain exit does.

/// Threads a data heap tells apart; further threads are counted in `lost`.
pub const THREAD_SLOTS: u64 = 256;
/// Bytes a thread-slot lookup with thread ids takes beyond one without (its first-event
/// path, inline in every lookup): what a patch's room adds for each.
pub const FIRST_LOOKUP_BYTES: u64 = 448;
/// Where the owners follow the keys in the thread table.
pub const OWNERS: u64 = 8 * THREAD_SLOTS;
/// Bytes of the thread table.
pub const THREAD_TABLE_LEN: u64 = OWNERS + 8 * THREAD_SLOTS;

pub const CALLS: u64 = 0;
pub const CYCLES: u64 = 8;
pub const LOST: u64 = 16;
pub const UNMATCHED: u64 = 24;
pub const OUTER: u64 = 32;
pub const STATES: u64 = 64;
/// Bytes of one thread's state in a timer block (a power of two: the code indexes with a
/// shift), and its words: depth, outermost start, the thread's cycles and outermost calls.
pub const STATE_LEN: u64 = 32;
pub const STATE_DEPTH: u64 = 0;
pub const STATE_START: u64 = 8;
pub const STATE_CYCLES: u64 = 16;
pub const STATE_OUTER: u64 = 24;
/// Bytes of one timer block (a multiple of the 64-byte cache line).
pub const TIMER_LEN: u64 = STATES + STATE_LEN * THREAD_SLOTS;
const _: () = assert!(STATE_LEN.is_power_of_two());

/// Pending tail calls a thread keeps at most.
pub const TAIL_ENTRIES: u64 = 7;
/// Bytes of one pending tail call.
pub const TAIL_ENTRY: u64 = 32;
/// Bytes of one thread's tail stack (a power of two: the code indexes it with a shift).
pub const TAIL_LEN: u64 = 256;
/// Bytes of the tail stacks of a data heap, one per thread slot.
pub const TAIL_AREA_LEN: u64 = TAIL_LEN * THREAD_SLOTS;
const _: () = assert!(TAIL_ENTRY * (TAIL_ENTRIES + 1) <= TAIL_LEN);
const _: () = assert!(TAIL_LEN.is_power_of_two() && TAIL_ENTRY.is_power_of_two());

/// Where a thread table slot for thread pointer `tp` starts probing: the same hash the
/// generated code computes, for tests and for readers that want to find a thread's slot.
pub fn home_slot(tp: u64) -> u64 {
    let key = tp.wrapping_add(1);
    ((key >> 12) ^ (key >> 23)) & (THREAD_SLOTS - 1)
}

/// The key the generated code stores for thread pointer `tp` (never 0, which marks a free
/// slot: threads without TLS have a thread pointer of 0).
pub fn thread_key(tp: u64) -> u64 {
    tp.wrapping_add(1)
}

/// One timer as read from a data heap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TimerSample {
    pub calls: u64,
    /// Outermost calls: the intervals `cycles` is the sum of.
    pub outer: u64,
    /// Completed outermost intervals plus, for every thread inside now, the time since its
    /// outermost entry (cycles).
    pub cycles: u64,
    /// Threads inside the function at the moment of sampling.
    pub inside: u64,
    pub lost: u64,
    pub unmatched: u64,
}

/// Read a timer block (`block`, `TIMER_LEN` bytes, little-endian u64 words as loaded from
/// shared memory by `word(offset)`) at TSC time `now`. Reads race with the target's updates;
/// each word is read once and whole, so the result is at worst one interval stale.
pub fn sample(word: &dyn Fn(u64) -> u64, now: u64) -> TimerSample {
    sample_each(word, &|_| Some(now))
}

/// [`sample`] with each thread slot's clock read on its own: `now_of(slot)` is the clock of
/// the slot's thread now (a thread's off-CPU clock is its own), `None` where it is not known
/// (the interval in progress then adds nothing).
pub fn sample_each(word: &dyn Fn(u64) -> u64, now_of: &dyn Fn(u64) -> Option<u64>) -> TimerSample {
    let mut s = TimerSample {
        calls: word(CALLS),
        outer: word(OUTER),
        cycles: word(CYCLES),
        inside: 0,
        lost: word(LOST),
        unmatched: word(UNMATCHED),
    };
    for t in 0..THREAD_SLOTS {
        s.cycles += in_progress(word, t, now_of).unwrap_or(0);
        s.inside += u64::from(word(STATES + STATE_LEN * t + STATE_DEPTH) != 0);
    }
    s
}

/// The interval thread slot `slot` has in progress (`None`: none, or its clock unknown).
fn in_progress(
    word: &dyn Fn(u64) -> u64,
    slot: u64,
    now_of: &dyn Fn(u64) -> Option<u64>,
) -> Option<u64> {
    let at = STATES + STATE_LEN * slot;
    if word(at + STATE_DEPTH) == 0 {
        return None;
    }
    let start = word(at + STATE_START);
    now_of(slot).map(|now| now.saturating_sub(start))
}

/// One thread's share of a timer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadShare {
    /// Its slot in the thread table (whose owner word names the thread).
    pub slot: u64,
    /// Its outermost calls, and its completed intervals plus the one in progress (cycles).
    pub outer: u64,
    pub cycles: u64,
    /// Whether it is inside the function now.
    pub inside: bool,
}

/// Each thread's share of a timer block (`word` and `now_of` as for [`sample_each`]): the
/// slots that ever started an interval. Their sum is [`sample_each`]'s but for the threads
/// the table had no slot for (`lost`).
pub fn sample_threads(
    word: &dyn Fn(u64) -> u64,
    now_of: &dyn Fn(u64) -> Option<u64>,
) -> Vec<ThreadShare> {
    (0..THREAD_SLOTS)
        .filter_map(|slot| {
            let at = STATES + STATE_LEN * slot;
            let outer = word(at + STATE_OUTER);
            if outer == 0 {
                return None;
            }
            let now = in_progress(word, slot, now_of);
            let cycles = word(at + STATE_CYCLES) + now.unwrap_or(0);
            Some(ThreadShare { slot, outer, cycles, inside: word(at + STATE_DEPTH) != 0 })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_cache_line_multiple() {
        assert_eq!(TIMER_LEN % 64, 0);
        assert_eq!(THREAD_TABLE_LEN % 64, 0);
        assert!(THREAD_SLOTS.is_power_of_two());
    }

    #[test]
    fn sample_adds_threads_inside() {
        let mut mem = vec![0u64; (TIMER_LEN / 8) as usize];
        let state = |slot: u64, w: u64| ((STATES + STATE_LEN * slot + w) / 8) as usize;
        mem[0] = 10;
        mem[1] = 1000;
        // Slot 3: inside (depth 2, started at 500), 700 cycles before: 5 outermost calls, the
        // last one in progress.
        mem[state(3, STATE_DEPTH)] = 2;
        mem[state(3, STATE_START)] = 500;
        mem[state(3, STATE_CYCLES)] = 700;
        mem[state(3, STATE_OUTER)] = 5;
        // Slot 9: 300 cycles in 1 call, not inside.
        mem[state(9, STATE_CYCLES)] = 300;
        mem[state(9, STATE_OUTER)] = 1;
        let word = |o| mem[(o / 8) as usize];
        let s = sample(&word, 800);
        assert_eq!(
            s,
            TimerSample { calls: 10, outer: 0, cycles: 1300, inside: 1, lost: 0, unmatched: 0 }
        );
        let each = sample_threads(&word, &|_| Some(800));
        assert_eq!(
            each,
            vec![
                ThreadShare { slot: 3, outer: 5, cycles: 1000, inside: true },
                ThreadShare { slot: 9, outer: 1, cycles: 300, inside: false },
            ]
        );
        // A thread whose clock is not known adds only what it completed.
        assert_eq!(sample_threads(&word, &|s| (s != 3).then_some(800))[0].cycles, 700);
    }
}
