//! The mailbox through which a thread's miss asks kerf to translate its target (see
//! [`crate::x86_64::miss`]): shared pages, which the target maps at an address the miss
//! path names and kerf maps too. Its words, by offset:
//!
//! | offset | word | written by |
//! |---|---|---|
//! | `LISTEN` | nonzero while kerf answers | kerf (set), a thread whose wait timed out (cleared) |
//! | `POSTED` | tickets taken (`lock xadd`); kerf's futex | threads |
//! | `ANSWERED` | tickets answered: every ticket below it; the threads' futex | kerf |
//! | `TIMEOUT` | the `timespec` of one wait | kerf, once |
//! | `RANGES` | a count, then `(start, end)` of each module kerf translates from | kerf |
//! | `ROOMS` (second page) | a count, then `(start, end)` of each code room | kerf |
//! | `SIG_MOVED`, `SIG_BACK`, `SIG_AWAY`, `SIG_RESUMED` | signal frames rewritten, and how they returned | threads |
//! | `SIG_PENDING` | [`REVERSE`] questions posted and not yet served | threads |
//! | `SIG_BUSY` | signals that interrupted the cache while kerf was busy or deaf (not asked) | threads |
//! | `SCRATCH` | what kerf's injected `rt_sigaction` reads | the kernel |
//! | `ALIVE` | kerf's beat: one more every 50 ms while kerf holds the mailbox | kerf |
//! | `HANDLERS` | a count, then the handlers kerf has hooked | kerf |
//! | `RING` (pages 2-9) | `RING_SLOTS` targets, ticket `t` in slot `t % RING_SLOTS` | threads (kerf clears or answers) |
//!
//! A target with [`UNMAPPED`] set is no miss: the thread has just unmapped memory that
//! overlaps a module of `RANGES` (a `munmap`: a `dlclose`), and waits until kerf has
//! dropped what it translated from a module that is gone (a library mapped there next must
//! not run it), then goes on (see [`crate::x86_64::unmap_notice`]). A count above
//! [`RANGES_MAX`] means every unmap asks.
//!
//! A target with [`ACTION`] (both bits) set comes before an `rt_sigaction` about to give the
//! kernel the action (`struct sigaction`) at the address in its low bits; kerf reads it and
//! hooks its handler if it has not looked at it before. Such a question is counted in
//! `SIG_PENDING` while it waits, as a handler's are.
//!
//! A target equal to [`LOADED`] comes from the dynamic loader's debugger hook
//! (`_dl_debug_state`, which it calls before and after it maps or unmaps libraries), where kerf
//! spliced a jump to [`crate::x86_64::load_site`] because a root names a library not loaded
//! yet: the thread waits while kerf looks for such a library among the maps and splices its
//! roots, before the loader relocates it and runs any of its code.
//!
//! A target with [`REVERSE`] set is no miss either: a signal handler's entry asks which
//! original address the cache address it interrupted stands for (see
//! [`crate::x86_64::signal`]). kerf answers in the ticket's own slot of the ring, before it
//! counts the ticket answered: [`answer_word`], tagged with the ticket so that a slot taken
//! again by a later ticket is never read as the answer.
//!
//! Each word sits in a cache line of its own. A thread posts at most one ticket at a time, so
//! the ring holds every ticket not yet answered while the process has at most `RING_SLOTS`
//! threads missing at once; an answer stays in its slot until `RING_SLOTS` more tickets are
//! taken. With 256 slots, four threads taking a fault each 50 us, each fault asking twice,
//! came round in about 3 ms, and a thread woken for its answer but not yet run lost it 1 to 3
//! times in 20,000 (its handler saw the cache address): 4096.

pub const LISTEN: u64 = 0;
pub const POSTED: u64 = 64;
pub const ANSWERED: u64 = 128;
pub const TIMEOUT: u64 = 192;
pub const RANGES: u64 = 256;
/// Ranges the mailbox holds at most.
pub const RANGES_MAX: u64 = (ROOMS - RANGES - 8) / 16;
/// The bit of a posted target that says it follows an unmap (original addresses are below
/// 2^47).
pub const UNMAPPED: u64 = 1 << 63;
/// The bit of a posted target that asks for the original address of the cache address in its
/// low bits (a signal handler's entry; see above).
pub const REVERSE: u64 = 1 << 62;
/// The bit of a posted target that asks where in the cache a thread may go on at the original
/// address in its low bits, with the program's state (a signal handler sent it there; see
/// [`crate::x86_64::signal`]): kerf translates it if it must, and answers as for
/// [`REVERSE`] (0: nowhere, the thread goes on natively).
pub const RESUME: u64 = 1 << 60;
/// A posted target with both [`UNMAPPED`] and [`REVERSE`] set is an `rt_sigaction`'s notice:
/// the action in its low bits is about to be installed, and the thread waits until kerf has
/// hooked its handler (see [`crate::x86_64::action_notice`]).
pub const ACTION: u64 = UNMAPPED | REVERSE;
/// A posted target that says the dynamic loader changed the maps (see above): both bits of
/// [`UNMAPPED`] and [`RESUME`], and no address.
pub const LOADED: u64 = UNMAPPED | RESUME;
/// A posted target with both [`REVERSE`] and [`RESUME`] set comes from the entry of glibc's
/// `siglongjmp` (and `__longjmp_chk`) in the original code while some handler's frame is
/// hooked: its low bits are the address of four words on the thread's stack (its stack
/// pointer, the stack pointer and PC the jump goes to, its process id), and kerf answers 1 if
/// the jump leaves a handler that interrupted the cache for a place still inside that root
/// call (the thread is to go on in the cache there), else 0 (see
/// [`crate::x86_64::signal::longjmp_entry`]).
pub const LONGJMP: u64 = REVERSE | RESUME;
/// The bit of kerf's answer to a [`REVERSE`] or [`RESUME`] question, with the ticket's tag
/// above the address (0: none).
pub const ANSWER: u64 = 1 << 61;
/// Every word in a slot, question or answer, carries the low [`TAG_BITS`] of its ticket
/// above the address: a word left in a slot by an earlier ticket is never taken for this
/// one's. (Without it, a thread that stalled between taking its ticket and storing its
/// target, past kerf's wait for the store, left its target in the slot unread, and kerf took
/// it for the target of the ticket 256 later, whose own then went untranslated: an escape.)
pub const TAG_BITS: u32 = 13;
/// Original and cache addresses are below 2^47.
pub const ADDRESS_BITS: u32 = 47;
pub const ADDRESS: u64 = (1 << ADDRESS_BITS) - 1;
pub const TAG: u64 = ((1 << TAG_BITS) - 1) << ADDRESS_BITS;
const _: () = assert!(ADDRESS_BITS + TAG_BITS <= 60);
// No question has the answer bit or a tag bit of its own.
const _: () = assert!((REVERSE | RESUME | UNMAPPED) & (ANSWER | ADDRESS | TAG) == 0);
// A `siglongjmp`'s question is neither an action's notice nor the loader's.
const _: () = assert!(LONGJMP & UNMAPPED == 0);

/// The offset of `ticket`'s slot in the ring.
pub fn slot(ticket: u32) -> u64 {
    RING + 8 * u64::from(ticket % RING_SLOTS)
}

fn tag(ticket: u32) -> u64 {
    (u64::from(ticket) << ADDRESS_BITS) & TAG
}

/// kerf's answer to the [`REVERSE`] or [`RESUME`] question of `ticket`: the address `a` (0
/// for none).
pub fn answer_word(ticket: u32, a: u64) -> u64 {
    ANSWER | tag(ticket) | (a & ADDRESS)
}

/// The bit of an answer to a [`REVERSE`] question that lets its handler's entry go on at
/// once, before kerf counts its ticket answered: where a ticket before it stays open while
/// kerf translates (a miss's), or flushes. Only there: an entry that went on at once no
/// longer counts in [`SIG_PENDING`] while its ticket is open, and the entries of other
/// threads would take that ticket for a miss's and keep the cache address in their frames.
pub const AT_ONCE: u64 = 1 << 62;

/// [`answer_word`] with [`AT_ONCE`].
pub fn answer_at_once(ticket: u32, a: u64) -> u64 {
    answer_word(ticket, a) | AT_ONCE
}

/// Whether `word` (read from `ticket`'s slot) is kerf's answer to that ticket's question,
/// with or without [`AT_ONCE`].
pub fn answered_in_slot(word: u64, ticket: u32) -> bool {
    word & (ANSWER | TAG) == ANSWER | tag(ticket)
}

/// The question `word` (read from `ticket`'s slot) holds, its tag taken off, if it is
/// `ticket`'s own: not an answer, tagged with `ticket`, and not empty (no target is 0; a
/// ticket whose tag is 0 would otherwise take an emptied slot for its question).
pub fn question_of(word: u64, ticket: u32) -> Option<u64> {
    let q = word & !TAG;
    (word & ANSWER == 0 && word & TAG == tag(ticket) && q != 0).then_some(q)
}

/// The second page: the code rooms, whose addresses a signal handler's entry compares the
/// interrupted PC with before it asks anything.
pub const ROOMS: u64 = 4096;
pub const ROOMS_MAX: u64 = 128;
/// Signal frames whose interrupted PC a handler's entry rewrote to an original address; of
/// those whose handler returned, how many went back to the cache address and how many the
/// handler sent elsewhere (their thread goes on in the original code).
pub const SIG_MOVED: u64 = ROOMS + 8 + 16 * ROOMS_MAX + 64;
pub const SIG_BACK: u64 = SIG_MOVED + 64;
pub const SIG_AWAY: u64 = SIG_BACK + 64;
/// Of those sent elsewhere, how many went on in the cache there ([`RESUME`]).
pub const SIG_RESUMED: u64 = SIG_AWAY + 64;
/// [`REVERSE`], [`RESUME`] and [`ACTION`] questions in flight: a handler's entry asks only while every
/// ticket not yet answered is one of these (kerf has no miss to translate first, so the answer comes at
/// once; a thread waiting for a miss's answer is most often the one interrupted, and its
/// frame would wait as long).
pub const SIG_PENDING: u64 = SIG_RESUMED + 64;
/// Signals that interrupted the cache and were not asked about (kerf busy or not listening):
/// their handlers saw cache addresses.
pub const SIG_BUSY: u64 = SIG_PENDING + 64;
/// 32 bytes for the kernel's `struct sigaction` that kerf reads with an injected call.
pub const SCRATCH: u64 = SIG_BUSY + 64;
/// kerf's beat: one more every 50 ms from a thread of kerf's own while the mailbox is mapped
/// in kerf (`SharedMem::beat`). A wait that timed out while this word changed waits again,
/// as a try, instead of taking kerf for gone: kerf is alive, only busy (an analysis of a big
/// library, a long translation under load), or it stopped the thread, whose wait lost the
/// time of the stop (the kernel restarts the wait with its old deadline; the beat goes on
/// during kerf's stops, which it counted itself before, through the target's memory). A thread that gives up while kerf
/// lives sends its thread out of the cache for the rest of its root call, and an unmap notice
/// that gives up lets a library mapped next run what kerf translated from the one before, so
/// only a kerf that is gone (killed, or stopped itself) ends a wait early. (Under load a hook
/// look at attach stopped the process for half a second, and a thread's miss gave up,
/// clearing `LISTEN`: 60 misses left unasked.)
pub const ALIVE: u64 = SCRATCH + 64;
/// A count, then the handlers kerf has hooked (at most [`HANDLERS_MAX`]): an `rt_sigaction`
/// of glibc's own that installs one of them again asks nothing (see
/// [`crate::x86_64::action_site`]). Written by kerf with the threads stopped.
pub const HANDLERS: u64 = ALIVE + 64;
pub const HANDLERS_MAX: u64 = 64;
/// Hooked frames (rewritten, or left with their cache address) that a `siglongjmp` out of
/// their handler left, as kerf found them when it answered a [`LONGJMP`] (written by kerf
/// only): a frame in flight is one counted in `SIG_MOVED` or `SIG_KEPT` and in none of
/// `SIG_BACK`, `SIG_AWAY`, `SIG_RESUMED`, `SIG_KEPT_BACK` and this, and `siglongjmp`'s entry
/// asks kerf only while there is one.
pub const SIG_LEFT: u64 = (HANDLERS + 8 + 8 * HANDLERS_MAX).next_multiple_of(64);
/// Of the jumps out of a handler that kerf sent back into the cache, those that found a
/// translation of their target there, and those that went on natively (an escape).
pub const SIG_REENTERED: u64 = SIG_LEFT + 64;
pub const SIG_STRANDED: u64 = SIG_REENTERED + 64;
/// Frames that interrupted the cache and kept its address for their handler (kerf busy,
/// `SIG_BUSY`, or no clean point there), marked by the entry (see
/// [`crate::x86_64::signal::signal_entry`]); and those whose handler returned (through the
/// hook's return sequence, as a rewritten frame's does).
pub const SIG_KEPT: u64 = SIG_STRANDED + 64;
pub const SIG_KEPT_BACK: u64 = SIG_KEPT + 64;
/// Questions of handlers' entries and returns ([`REVERSE`], [`RESUME`]) and of `siglongjmp`
/// ([`LONGJMP`], and its landing's [`RESUME`]) asked again: kerf had counted the ticket
/// answered, but its slot held no answer to it when the thread read it. Either the ring had
/// come round (a thread woken late, kept off the CPU while the other threads posted 4,096
/// tickets, finds a later ticket's question or answer there; before session 83 such a frame
/// kept its cache address, or its thread went on natively), or a flush counted every open
/// ticket answered with nothing.
pub const SIG_AGAIN: u64 = SIG_KEPT_BACK + 64;
pub const RING: u64 = 8192;
pub const RING_SLOTS: u32 = 4096;
/// Bytes of the mailbox.
pub const BYTES: u64 = RING + 8 * RING_SLOTS as u64;
const _: () = assert!(RANGES + 8 + 16 * RANGES_MAX <= ROOMS);
const _: () = assert!(SCRATCH + 32 <= ALIVE && ALIVE + 8 <= HANDLERS);
const _: () = assert!(SIG_AGAIN + 8 <= RING);

/// Futex waits of at most [`WAIT_NS`] each that end without the thread's ticket answered
/// (kerf answered others, the word changed, or the wait timed out while kerf lived,
/// [`ALIVE`]) before a miss gives up and leaves the cache: a kerf alive but stuck holds a
/// thread at most 16 s. One that times out with [`ALIVE`] unchanged ends the wait at once
/// (kerf is gone). Only a live kerf wakes a waiter early, so this many are cheap.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_word_is_taken_only_for_its_own_ticket() {
        let q = |ticket: u32, target: u64| target | tag(ticket);
        assert_eq!(question_of(q(7, 0x40_1000), 7), Some(0x40_1000));
        assert_eq!(question_of(q(7, REVERSE | 0x50_0000), 7), Some(REVERSE | 0x50_0000));
        assert_eq!(question_of(q(7, UNMAPPED | 1), 7), Some(UNMAPPED | 1));
        // The target of the ticket a ring before (4096 earlier), and any answer: not this one's.
        assert_eq!(question_of(q(7, 0x40_1000), 7 + RING_SLOTS), None);
        assert_eq!(question_of(answer_word(7, 0x40_1000), 7), None);
        assert_eq!(question_of(0, 0), None, "an empty slot");
        // The tag wraps with the ticket.
        let t = 1 << TAG_BITS;
        assert_eq!(question_of(q(t + 3, 0x40_1000), t + 3), Some(0x40_1000));
        assert_eq!(answer_word(3, 0x40_1000) & ADDRESS, 0x40_1000);
        // An answer in the slot: its own ticket's only, with an address or none; never a
        // question, nor an emptied slot.
        assert!(answered_in_slot(answer_word(7, 0x40_1000), 7));
        assert!(answered_in_slot(answer_word(7, 0), 7));
        assert!(!answered_in_slot(answer_word(7, 0x40_1000), 8));
        assert!(!answered_in_slot(answer_word(7, 0x40_1000), 7 + RING_SLOTS));
        assert!(!answered_in_slot(q(7, REVERSE | 0x50_0000), 7));
        assert!(!answered_in_slot(0, 0));
        assert!(answered_in_slot(answer_at_once(7, 0x40_1000), 7));
        assert_eq!(question_of(answer_at_once(7, 0x40_1000), 7), None);
        assert_eq!(answer_at_once(7, 0x40_1000) & ADDRESS, 0x40_1000);
    }
}
