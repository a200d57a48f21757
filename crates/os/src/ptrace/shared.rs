//! Memory mapped both in kerf and in a target (the data heap of DESIGN.md §3 step 6): kerf
//! reads what the target's code patches write with plain atomic loads, no system call.

use super::sys::TraceSys;
use kerf_arch::RemoteAddr;
use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// A region shared with a target, made by [`super::Tracee::share_near`]. kerf's mapping is
/// unmapped when this is dropped; the target's stays until [`super::Tracee::free`]
/// (`remote()`, `len()`). The target writes it concurrently: read it with
/// [`SharedMem::load_u64`] or volatile reads, never through references.
pub struct SharedMem {
    local: *mut u8,
    len: usize,
    remote: RemoteAddr,
    /// The memory file, where kerf holds it: what tells its data from its holes.
    file: Option<File>,
    sys: Arc<dyn TraceSys>,
    /// The thread [`SharedMem::beat`] started, stopped and joined before the unmap.
    beat: Option<Beat>,
}

/// A thread that adds one to a word of a [`SharedMem`] at a steady period while the mapping
/// lives: a sign, to the target's threads, that kerf is alive even while it is too busy to
/// answer them. `stop` is set (under its lock, with a notify) to end it.
struct Beat {
    stop: Arc<(Mutex<bool>, Condvar)>,
    thread: std::thread::JoinHandle<()>,
}

// SAFETY: the mapping is process-wide memory owned by this value until drop; every access
// goes through raw pointers (atomics or volatile), so moving or sharing the handle between
// threads creates no aliasing references.
unsafe impl Send for SharedMem {}
// SAFETY: see `Send`: `&SharedMem` only permits atomic and volatile accesses.
unsafe impl Sync for SharedMem {}

impl std::fmt::Debug for SharedMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedMem")
            .field("local", &self.local)
            .field("remote", &self.remote)
            .field("len", &self.len)
            .finish()
    }
}

/// Wakes the waiters on one word of a [`SharedMem`] ([`SharedMem::waker`]). It keeps only
/// the word's address, which the kernel uses as the futex's key: a wake after the mapping is
/// gone fails with `EFAULT` and touches nothing.
#[derive(Clone, Copy, Debug)]
pub struct FutexWaker(usize);

impl FutexWaker {
    /// Wake every thread waiting on the word.
    pub fn wake(&self) {
        // SAFETY: FUTEX_WAKE reads no memory: the address is only a key (an unmapped one
        // fails with EFAULT).
        unsafe {
            libc::syscall(libc::SYS_futex, self.0, libc::FUTEX_WAKE, i32::MAX);
        }
    }
}

impl SharedMem {
    pub(super) fn new(
        local: *mut u8,
        len: usize,
        remote: RemoteAddr,
        file: Option<File>,
        sys: Arc<dyn TraceSys>,
    ) -> Self {
        SharedMem { local, len, remote, file, sys, beat: None }
    }

    /// Add one to the u64 at `offset` every `period` from a thread of kerf's own, from now
    /// until this value is dropped (a second call changes nothing). The word says kerf is
    /// alive: a thread of the target that waited a while for an answer waits again if it
    /// moved. It stops with kerf's process (a `SIGKILL`, a `SIGSTOP`), which is the point.
    pub fn beat(&mut self, offset: usize, period: Duration) {
        if self.beat.is_some() {
            return;
        }
        let addr = self.word(offset) as *const AtomicU64 as usize;
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = stop.clone();
        let thread = std::thread::spawn(move || {
            // SAFETY: `addr` is an aligned word of the mapping (checked by `word`), and the
            // mapping outlives this thread: `Drop` joins it before the unmap.
            let word = unsafe { &*(addr as *const AtomicU64) };
            let (lock, cv) = &*flag;
            let mut stopped = lock.lock().unwrap_or_else(|e| e.into_inner());
            while !*stopped {
                stopped = cv.wait_timeout(stopped, period).unwrap_or_else(|e| e.into_inner()).0;
                word.fetch_add(1, Ordering::Release);
            }
        });
        self.beat = Some(Beat { stop, thread });
    }

    /// The region's address in the target.
    pub fn remote(&self) -> RemoteAddr {
        self.remote
    }

    /// Its length in bytes (a page multiple).
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// kerf's mapping of the region (valid until drop).
    pub fn as_ptr(&self) -> *mut u8 {
        self.local
    }

    fn word(&self, offset: usize) -> &AtomicU64 {
        assert!(
            offset.is_multiple_of(8) && offset + 8 <= self.len,
            "offset {offset} is not an aligned u64 inside {} bytes",
            self.len
        );
        // SAFETY: in bounds and 8-aligned (the mapping is page-aligned); AtomicU64 has the
        // layout of u64, and the target only ever accesses this memory concurrently, which
        // is what atomics are for. The reference lives no longer than `self`.
        unsafe { &*(self.local.add(offset) as *const AtomicU64) }
    }

    /// The whole region as words the target writes concurrently (a reader that walks many
    /// words, like the tracer's ring reader, loads them straight, in its own order).
    pub fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapping is page-aligned and `len` bytes long, so `len / 8` AtomicU64s
        // (the layout of u64) fit; it lives as long as `self`; concurrent access by the target
        // is what atomics are for.
        unsafe { std::slice::from_raw_parts(self.local as *const AtomicU64, self.len / 8) }
    }

    /// The u64 at `offset` (8-aligned), with an Acquire load.
    pub fn load_u64(&self, offset: usize) -> u64 {
        self.word(offset).load(Ordering::Acquire)
    }

    /// Store `value` at `offset` (8-aligned), with a Release store.
    pub fn store_u64(&self, offset: usize, value: u64) {
        self.word(offset).store(value, Ordering::Release)
    }

    fn word32(&self, offset: usize) -> &AtomicU32 {
        assert!(
            offset.is_multiple_of(4) && offset + 4 <= self.len,
            "offset {offset} is not an aligned u32 inside {} bytes",
            self.len
        );
        // SAFETY: as in `word`, for a 4-aligned u32.
        unsafe { &*(self.local.add(offset) as *const AtomicU32) }
    }

    /// The u32 at `offset` (4-aligned), with an Acquire load.
    pub fn load_u32(&self, offset: usize) -> u32 {
        self.word32(offset).load(Ordering::Acquire)
    }

    /// Store `value` at `offset` (4-aligned), with a Release store.
    pub fn store_u32(&self, offset: usize, value: u32) {
        self.word32(offset).store(value, Ordering::Release)
    }

    /// Sleep while the u32 at `offset` holds `expected`, at most `timeout` (a shared futex:
    /// the target's threads wake it through their own mapping of the same memory). Returns
    /// early on a wake, a signal, or a value that already differs.
    pub fn futex_wait(&self, offset: usize, expected: u32, timeout: std::time::Duration) {
        let w = self.word32(offset);
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: FUTEX_WAIT on a live, aligned u32 of this mapping, with a valid timespec;
        // the kernel only reads both. Its outcome (woken, timed out, interrupted, value
        // changed) needs no handling: the caller looks at the word again.
        unsafe {
            libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAIT, expected, &ts);
        }
    }

    /// Wake every thread (of any process) waiting on the u32 at `offset`.
    pub fn futex_wake_all(&self, offset: usize) {
        let w = self.word32(offset);
        // SAFETY: FUTEX_WAKE on a live, aligned u32 of this mapping; the kernel only uses
        // the address as a key.
        unsafe {
            libc::syscall(libc::SYS_futex, w.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
        }
    }

    /// A handle that wakes the waiters on the u32 at `offset` from another thread, while
    /// this value is borrowed elsewhere (a thread that sleeps in [`SharedMem::futex_wait`]
    /// until told to stop).
    pub fn waker(&self, offset: usize) -> FutexWaker {
        FutexWaker(self.word32(offset).as_ptr() as usize)
    }

    /// Copy `buf.len()` bytes from `offset` with volatile reads.
    pub fn read_bytes(&self, offset: usize, buf: &mut [u8]) {
        assert!(offset + buf.len() <= self.len, "read past the end of the shared region");
        for (i, b) in buf.iter_mut().enumerate() {
            // SAFETY: in bounds (checked above) of a live mapping.
            *b = unsafe { self.local.add(offset + i).read_volatile() };
        }
    }

    /// The parts of `[offset, offset + len)` that hold data (pages someone wrote; the rest are
    /// holes, which read as zeros), as `(start, end)` offsets in page steps, found without
    /// touching the holes: a read of a hole through a mapping gives it a page of memory.
    /// `None` where that cannot be told (no memory file): read it all.
    pub fn data_in(&self, offset: usize, len: usize) -> Option<Vec<(usize, usize)>> {
        let fd = self.file.as_ref()?.as_raw_fd();
        let end = (offset + len).min(self.len);
        let mut out = Vec::new();
        let mut at = offset;
        while at < end {
            // SAFETY: lseek on a descriptor this value owns; it only moves the file offset,
            // which nothing else here uses.
            let data = unsafe { libc::lseek(fd, at as libc::off_t, libc::SEEK_DATA) };
            if data < 0 {
                // ENXIO: no data at or past `at`.
                let e = std::io::Error::last_os_error().raw_os_error();
                return (e == Some(libc::ENXIO)).then_some(out);
            }
            let data = data as usize;
            if data >= end {
                break;
            }
            // SAFETY: as above.
            let hole = unsafe { libc::lseek(fd, data as libc::off_t, libc::SEEK_HOLE) };
            if hole < 0 {
                return None;
            }
            let hole = (hole as usize).min(end);
            out.push((data, hole));
            at = hole;
        }
        Some(out)
    }

    /// Zero `[offset, offset + len)`: its whole pages become holes again (their memory is
    /// freed, in the target's mapping too), the rest is written with zeros where it holds
    /// data.
    pub fn zero(&self, offset: usize, len: usize) {
        const PAGE: usize = 4096;
        let end = (offset + len).min(self.len);
        let (first, last) = (offset.next_multiple_of(PAGE), end / PAGE * PAGE);
        let punched = self.file.as_ref().is_some_and(|f| {
            first < last && {
                let mode = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
                let (at, n) = (first as libc::off_t, (last - first) as libc::off_t);
                // SAFETY: fallocate on a descriptor this value owns, inside the file.
                unsafe { libc::fallocate(f.as_raw_fd(), mode, at, n) == 0 }
            }
        });
        let parts = if punched { vec![(offset, first), (last, end)] } else { vec![(offset, end)] };
        for (a, b) in parts.into_iter().filter(|(a, b)| a < b) {
            for (d0, d1) in self.data_in(a, b - a).unwrap_or_else(|| vec![(a, b)]) {
                self.write_bytes(d0, &vec![0u8; d1 - d0]);
            }
        }
    }

    /// Copy `data` to `offset` with volatile writes, in address order: bytes up to an 8-byte
    /// boundary, then whole aligned words (each seen whole by a reader, and eight times fewer
    /// writes: byte by byte, the 13 MB of python3.11's table and code were a tenth of what
    /// kerf did between the translation and the program's start), then the bytes left.
    pub fn write_bytes(&self, offset: usize, data: &[u8]) {
        assert!(offset + data.len() <= self.len, "write past the end of the shared region");
        // (The mapping is page-aligned: an offset's alignment is its address's.)
        let head = offset.next_multiple_of(8).saturating_sub(offset).min(data.len());
        let (first, rest) = data.split_at(head);
        let words = rest.chunks_exact(8);
        let tail = words.remainder();
        for (i, b) in first.iter().enumerate() {
            // SAFETY: in bounds (checked above) of a live, writable mapping.
            unsafe { self.local.add(offset + i).write_volatile(*b) };
        }
        for (i, w) in words.enumerate() {
            let v = u64::from_le_bytes(w.try_into().expect("8 bytes"));
            // SAFETY: in bounds (checked above) of a live, writable mapping, and 8-aligned:
            // `offset + head` is a multiple of 8 and the mapping starts on a page.
            unsafe { (self.local.add(offset + head + 8 * i) as *mut u64).write_volatile(v) };
        }
        let at = offset + data.len() - tail.len();
        for (i, b) in tail.iter().enumerate() {
            // SAFETY: in bounds (checked above) of a live, writable mapping.
            unsafe { self.local.add(at + i).write_volatile(*b) };
        }
    }
}

impl Drop for SharedMem {
    fn drop(&mut self) {
        if let Some(b) = self.beat.take() {
            *b.stop.0.lock().unwrap_or_else(|e| e.into_inner()) = true;
            b.stop.1.notify_all();
            // (A panic in it has nothing to report; the join is what matters.)
            let _ = b.thread.join();
        }
        // SAFETY: `local`/`len` are the mapping `map_shared` gave this handle; it is dropped
        // once, accessors borrow `self`, and the beat's thread was joined above, so nothing
        // refers to the mapping any more.
        unsafe { self.sys.unmap_local(self.local, self.len) };
    }
}
