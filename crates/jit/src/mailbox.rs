//! The mailbox through which a thread's miss asks kerf to translate its target (see
//! [`crate::x86_64::miss`]): one shared page, which the target maps at an address the miss
//! path names and kerf maps too. Its words, by offset:
//!
//! | offset | word | written by |
//! |---|---|---|
//! | `LISTEN` | nonzero while kerf answers | kerf (set), a thread whose wait timed out (cleared) |
//! | `POSTED` | tickets taken (`lock xadd`); kerf's futex | threads |
//! | `ANSWERED` | tickets answered: every ticket below it; the threads' futex | kerf |
//! | `TIMEOUT` | the `timespec` of one wait | kerf, once |
//! | `RING` | `RING_SLOTS` targets, ticket `t` in slot `t % RING_SLOTS` | threads (kerf clears) |
//! | `RANGES` | a count, then `(start, end)` of each module kerf translates from | kerf |
//!
//! A target with [`UNMAPPED`] set is no miss: the thread has just unmapped memory that
//! overlaps a module of `RANGES` (a `munmap`: a `dlclose`), and waits until kerf has
//! dropped what it translated from a module that is gone (a library mapped there next must
//! not run it), then goes on (see [`crate::x86_64::unmap_notice`]). A count above
//! [`RANGES_MAX`] means every unmap asks.
//!
//! Each word sits in a cache line of its own. A thread posts at most one ticket at a time, so
//! the ring holds every ticket not yet answered while the process has at most `RING_SLOTS`
//! threads missing at once.

pub const LISTEN: u64 = 0;
pub const POSTED: u64 = 64;
pub const ANSWERED: u64 = 128;
pub const TIMEOUT: u64 = 192;
pub const RING: u64 = 256;
pub const RING_SLOTS: u32 = 256;
pub const RANGES: u64 = RING + 8 * RING_SLOTS as u64;
/// Ranges the mailbox holds at most.
pub const RANGES_MAX: u64 = (BYTES - RANGES - 8) / 16;
/// The bit of a posted target that says it follows an unmap (original addresses are below
/// 2^47).
pub const UNMAPPED: u64 = 1 << 63;
/// Bytes of the mailbox.
pub const BYTES: u64 = 4096;
const _: () = assert!(RANGES + 8 + 16 * RANGES_MAX <= BYTES);

/// Futex waits of at most [`WAIT_NS`] each that end without the thread's ticket answered
/// (kerf answered others, or the word changed) before a miss gives up and leaves the cache;
/// one that times out ends the wait at once (kerf is gone or stuck). Only a live kerf wakes
/// a waiter early, so this many are cheap.
pub const TRIES: u32 = 64;
/// Waits a signal interrupts (`EINTR`) before a miss gives up, counted apart: a program
/// whose threads take a signal every 2 ms (a profiling timer) interrupted every wait, and
/// five of them sent a thread out while kerf translated a big batch. 512 at 2 ms is a
/// second.
pub const INTERRUPTS: u32 = 512;
/// A quarter of a second: under load (two cores, a dozen programs) kerf's answer to a miss
/// whose walk brings in a few thousand functions took over 200 ms, and a wait that gives up
/// sends the thread to the original code for the rest of its root call.
pub const WAIT_NS: u64 = 250_000_000;

pub const SYS_FUTEX: u32 = 202;
pub const FUTEX_WAIT: u32 = 0;
pub const FUTEX_WAKE: u32 = 1;
pub const ETIMEDOUT: u32 = 110;
pub const EINTR: u32 = 4;
