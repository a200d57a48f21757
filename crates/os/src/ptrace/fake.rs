//! A fake kernel for the unit tests of [`super::Tracee`] (and, with feature `fake`, of the crates
//! above): threads with registers and scripted
//! stops, a little memory, a handful of system calls, and a log of every request, so that the
//! ptrace logic (races, signals, register handling) is checked without a live process.

use super::sys::{Regs, SigInfo, TraceSys};
use kerf_arch::RemoteAddr;
use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::Path;
use std::sync::Mutex;

pub const PID: i32 = 100;
pub const SYSCALL_AT: u64 = 0x7000_0000_1000;
pub const STACK_TOP: u64 = 0x7fff_0000_0000;
/// Where the fake puts an mmap with no address (kerf's restorer pages): tests that count
/// kerf's own mappings leave these out.
pub const ANYWHERE: std::ops::Range<u64> = 0x7100_0000_0000..0x7200_0000_0000;
pub const TRAP_BRKPT: i32 = 1;
/// SIGTRAP's bit in a signal mask.
pub const SIGTRAP_BIT: u64 = 1 << 4;

pub fn stop_status(sig: i32, event: i32) -> i32 {
    0x7f | (sig << 8) | (event << 16)
}

pub fn exit_status(code: i32) -> i32 {
    code << 8
}

fn err(errno: i32) -> io::Error {
    io::Error::from_raw_os_error(errno)
}

#[derive(Debug)]
pub struct FThread {
    pub regs: Regs,
    pub events: VecDeque<i32>,
    pub siginfo: SigInfo,
    pub traced: bool,
    /// Blocked signals.
    pub sigmask: u64,
    /// Between the entry and exit stops of a call run with `PTRACE_SYSCALL`.
    pub in_call: bool,
}

pub fn regs_at(rip: u64) -> Regs {
    // SAFETY: plain integers; all-zero is valid.
    let mut r: Regs = unsafe { std::mem::zeroed() };
    r.rip = rip;
    r.rsp = STACK_TOP - 0x1000;
    r.rax = (-512i64) as u64; // as if interrupted in read(2)
    r.orig_rax = 0;
    r.eflags = 0x246;
    r.rbx = 0x1111;
    r
}

#[derive(Debug, Default)]
pub struct State {
    pub threads: BTreeMap<i32, FThread>,
    /// Memory segments (address, bytes).
    pub mem: Vec<(u64, Vec<u8>)>,
    pub maps: String,
    pub log: Vec<String>,
    /// `PTRACE_SEIZE` fails with EPERM (as without the right to trace).
    pub deny: bool,
    /// TracerPid reported for every thread (0: none).
    pub tracer: i32,
    /// Threads another tracer holds (tid → its TracerPid).
    pub traced_by_other: BTreeMap<i32, i32>,
    /// Threads the kernel counts but /proc/PID/task does not list (a readdir that skipped).
    pub hidden_threads: usize,
    /// What `self_pid` answers (kerf's own pid).
    pub self_pid: i32,
    /// Threads that exit just before kerf seizes them (ESRCH).
    pub vanish_at_seize: Vec<i32>,
    /// Threads that exit instead of stopping when interrupted.
    pub exit_on_interrupt: Vec<i32>,
    /// Threads whose first stop is a signal-delivery-stop for this signal.
    pub signal_before_stop: BTreeMap<i32, i32>,
    /// (parent, child): the parent reports PTRACE_EVENT_CLONE of a new thread first.
    pub clone_on_interrupt: Option<(i32, i32)>,
    /// Signals dequeued at the next single-steps, before the instruction runs.
    pub signals_on_step: VecDeque<i32>,
    /// Results forced on the next executed system calls (e.g. -512: interrupted).
    pub forced_results: VecDeque<i64>,
    /// Addresses where an injected mmap reports EEXIST.
    pub eexist_at: Vec<u64>,
    pub detached: Vec<(i32, i32)>,
    pub siginfo_set: Vec<(i32, SigInfo)>,
    pub queued: Vec<(i32, SigInfo)>,
    /// Every register set written, in order.
    pub regs_written: Vec<(i32, Regs)>,
    /// Every system call executed: (tid, nr, args).
    pub calls: Vec<(i32, i64, [u64; 6])>,
    pub memfd_names: Vec<String>,
    /// Signals the process has handlers for (SigCgt).
    pub caught: u64,
    /// Threads whose single-step trap hit a blocked SIGTRAP: the real kernel would have reset
    /// the process's SIGTRAP action to the default (and unblocked it in that thread).
    pub forced_sigtrap: Vec<i32>,
    pub local_maps: usize,
    pub next_fd: i64,
    /// What /proc/PID/auxv holds (`None`: it cannot be read).
    pub auxv: Option<Vec<u8>>,
    /// Every write through /proc/PID/mem, in order: `(address, bytes)`.
    pub writes: Vec<(u64, Vec<u8>)>,
    /// The first thread detached calls `exit_group`: every other thread is killed at once
    /// (gone for ptrace: ESRCH), as when kerf lets go of a process about to exit.
    pub exit_group_on_detach: bool,
    /// `(tid, raw wait status)`: that thread was killed while stopped; its detach fails
    /// (ESRCH) and its wait gives that status.
    pub killed_before_detach: Option<(i32, i32)>,
    /// Threads under seccomp filters: their `struct sock_filter` bytes, most recent first.
    pub seccomp: BTreeMap<i32, Vec<Vec<u8>>>,
    /// An mmap with no address fails (ENOMEM): kerf's restorer page cannot be mapped, and
    /// every injected call is single-stepped.
    pub no_restorer: bool,
    /// Where the next mmap with no address goes.
    pub next_anywhere: u64,
}

pub struct Fake {
    pub st: Mutex<State>,
}

impl Fake {
    /// A process with these threads (the first is the leader, [`PID`]), a `syscall`
    /// instruction at [`SYSCALL_AT`], a stack, and maps listing both.
    pub fn new(tids: &[i32]) -> Fake {
        let mut st = State::default();
        for &tid in tids {
            st.threads.insert(
                tid,
                FThread {
                    regs: regs_at(0x5555_0000_1234),
                    events: VecDeque::new(),
                    siginfo: SigInfo::new(0, 0, 0, 0),
                    traced: false,
                    sigmask: 0,
                    in_call: false,
                },
            );
        }
        let mut code = vec![0x90u8; 0x1000];
        code[0] = 0x0f;
        code[1] = 0x05;
        st.mem.push((SYSCALL_AT, code));
        st.mem.push((STACK_TOP - 0x10000, vec![0xaa; 0x10000]));
        st.maps = format!(
            "555500000000-555500010000 r-xp 00000000 08:01 5 /bin/fake\n\
             {:x}-{:x} r-xp 00000000 00:00 0 [vdso]\n\
             {:x}-{:x} rw-p 00000000 00:00 0 [stack]\n",
            SYSCALL_AT,
            SYSCALL_AT + 0x1000,
            STACK_TOP - 0x10000,
            STACK_TOP
        );
        st.next_fd = 7;
        st.self_pid = 1;
        Fake { st: Mutex::new(st) }
    }

    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl State {
    fn thread(&mut self, tid: i32) -> io::Result<&mut FThread> {
        self.threads.get_mut(&tid).ok_or_else(|| err(libc::ESRCH))
    }

    fn traced(&mut self, tid: i32) -> io::Result<&mut FThread> {
        let t = self.thread(tid)?;
        if t.traced {
            Ok(t)
        } else {
            Err(err(libc::ESRCH))
        }
    }

    fn seg(&mut self, addr: u64) -> Option<(&mut Vec<u8>, usize)> {
        self.mem
            .iter_mut()
            .find(|(base, bytes)| addr >= *base && addr < *base + bytes.len() as u64)
            .map(|(base, bytes)| {
                let off = (addr - *base) as usize;
                (bytes, off)
            })
    }

    fn execute(&mut self, tid: i32, r: &Regs) -> i64 {
        let nr = r.rax as i64;
        let args = [r.rdi, r.rsi, r.rdx, r.r10, r.r8, r.r9];
        self.calls.push((tid, nr, args));
        if let Some(forced) = self.forced_results.pop_front() {
            return forced;
        }
        match nr {
            libc::SYS_getpid => i64::from(PID),
            libc::SYS_gettid => i64::from(tid),
            libc::SYS_mmap => {
                let (mut addr, len) = (args[0], args[1]);
                if addr == 0 {
                    if self.no_restorer {
                        return -i64::from(libc::ENOMEM);
                    }
                    addr = ANYWHERE.start + self.next_anywhere;
                    self.next_anywhere += 0x10000;
                }
                // MAP_FIXED_NOREPLACE over a mapping of the fake's own (its maps file does
                // not list them) fails as the kernel's does.
                let overlaps =
                    self.mem.iter().any(|(b, m)| addr < b + m.len() as u64 && *b < addr + len);
                if self.eexist_at.contains(&addr) || overlaps {
                    return -i64::from(libc::EEXIST);
                }
                self.mem.push((addr, vec![0; len as usize]));
                addr as i64
            }
            libc::SYS_munmap => {
                let before = self.mem.len();
                self.mem.retain(|(b, _)| *b != args[0]);
                if self.mem.len() < before {
                    0
                } else {
                    -i64::from(libc::EINVAL)
                }
            }
            libc::SYS_memfd_create => {
                let mut name = Vec::new();
                let mut at = args[0];
                while let Some((bytes, off)) = self.seg(at) {
                    if bytes[off] == 0 {
                        break;
                    }
                    name.push(bytes[off]);
                    at += 1;
                }
                self.memfd_names.push(String::from_utf8_lossy(&name).into_owned());
                self.next_fd += 1;
                self.next_fd - 1
            }
            libc::SYS_ftruncate | libc::SYS_close => 0,
            _ => -i64::from(libc::ENOSYS),
        }
    }
}

impl State {
    /// A signal of `signals_on_step`, if one is left, stops thread `tid` before its next
    /// instruction: `true` then.
    fn signal_first(&mut self, tid: i32) -> io::Result<bool> {
        let Some(s) = self.signals_on_step.pop_front() else { return Ok(false) };
        let t = self.traced(tid)?;
        t.siginfo = SigInfo::new(s, 0, 4242, 0);
        t.events.push_back(stop_status(s, 0));
        Ok(true)
    }

    /// The number of the call thread `tid` is about to make (`doing` it), checking that it
    /// stands on a `syscall` instruction with `orig_rax = -1`, as kerf injects.
    fn at_syscall(&mut self, tid: i32, doing: &str) -> io::Result<u64> {
        let r = self.traced(tid)?.regs;
        let insn = self.seg(r.rip).map(|(b, o)| (b[o], b.get(o + 1).copied()));
        assert_eq!(insn, Some((0x0f, Some(0x05))), "{doing} a syscall instruction");
        assert_eq!(r.orig_rax, u64::MAX, "orig_rax = -1 while injecting");
        Ok(r.rax)
    }

    /// The call thread `tid` entered (`orig_rax` its number): run it and leave the thread
    /// after its `syscall` instruction with the result.
    fn finish_call(&mut self, tid: i32) -> io::Result<()> {
        let mut r = self.traced(tid)?.regs;
        r.rax = r.orig_rax;
        let result = self.execute(tid, &r);
        let t = self.traced(tid)?;
        t.in_call = false;
        t.regs.rax = result as u64;
        t.regs.rcx = r.rip + 2; // the syscall instruction clobbers rcx and r11
        t.regs.r11 = r.eflags;
        t.regs.rip = r.rip + 2;
        Ok(())
    }
}

impl TraceSys for Fake {
    fn seize(&self, tid: i32, options: i32) -> io::Result<()> {
        let mut st = self.state();
        st.log.push(format!("seize {tid} {options:#x}"));
        if st.vanish_at_seize.contains(&tid) {
            st.threads.remove(&tid);
            return Err(err(libc::ESRCH));
        }
        if st.deny || st.tracer != 0 || st.traced_by_other.contains_key(&tid) {
            return Err(err(libc::EPERM));
        }
        st.thread(tid)?.traced = true;
        Ok(())
    }

    fn interrupt(&self, tid: i32) -> io::Result<()> {
        let mut st = self.state();
        st.log.push(format!("interrupt {tid}"));
        if st.exit_on_interrupt.contains(&tid) {
            st.traced(tid)?.events.push_back(exit_status(0));
            return Ok(());
        }
        if let Some(sig) = st.signal_before_stop.remove(&tid) {
            let t = st.traced(tid)?;
            t.siginfo = SigInfo::new(sig, 0, 4242, 0);
            t.events.push_back(stop_status(sig, 0));
            return Ok(());
        }
        if let Some((parent, child)) = st.clone_on_interrupt {
            if parent == tid {
                st.clone_on_interrupt = None;
                st.traced(tid)?.events.push_back(stop_status(libc::SIGTRAP, 3));
                st.threads.insert(
                    child,
                    FThread {
                        regs: regs_at(0x5555_0000_2000),
                        events: VecDeque::from([stop_status(libc::SIGTRAP, 128)]),
                        siginfo: SigInfo::new(0, 0, 0, 0),
                        traced: true,
                        sigmask: 0,
                        in_call: false,
                    },
                );
                st.log.push(format!("clone {tid} -> {child}"));
                return Ok(());
            }
        }
        st.traced(tid)?.events.push_back(stop_status(libc::SIGTRAP, 128));
        Ok(())
    }

    fn single_step(&self, tid: i32, sig: i32) -> io::Result<()> {
        let mut st = self.state();
        st.log.push(format!("step {tid} {sig}"));
        if st.signal_first(tid)? {
            return Ok(());
        }
        let nr = st.at_syscall(tid, "stepping")?;
        st.traced(tid)?.regs.orig_rax = nr;
        st.finish_call(tid)?;
        let t = st.traced(tid)?;
        t.siginfo = SigInfo::new(libc::SIGTRAP, TRAP_BRKPT, 0, 0);
        t.events.push_back(stop_status(libc::SIGTRAP, 0));
        if t.sigmask & SIGTRAP_BIT != 0 {
            t.sigmask &= !SIGTRAP_BIT;
            st.forced_sigtrap.push(tid);
        }
        Ok(())
    }

    /// A `syscall` instruction under `PTRACE_SYSCALL`: its entry stop, as the kernel reports
    /// it under `PTRACE_O_TRACESYSGOOD` (then the call runs when the thread is resumed, and
    /// its exit stop follows under `PTRACE_SYSCALL` again). A signal of `signals_on_step`
    /// comes before the entry.
    fn syscall(&self, tid: i32, sig: i32) -> io::Result<()> {
        let mut st = self.state();
        st.log.push(format!("syscall {tid} {sig}"));
        let stop = stop_status(libc::SIGTRAP | 0x80, 0);
        if st.traced(tid)?.in_call {
            st.finish_call(tid)?;
            st.traced(tid)?.events.push_back(stop);
            return Ok(());
        }
        if st.signal_first(tid)? {
            return Ok(());
        }
        let nr = st.at_syscall(tid, "entering")?;
        let t = st.traced(tid)?;
        t.in_call = true;
        t.regs.orig_rax = nr;
        t.regs.rax = (-i64::from(libc::ENOSYS)) as u64;
        t.events.push_back(stop);
        Ok(())
    }

    /// Only as [`crate::ptrace::Tracee`] uses it: after a `PTRACE_INTERRUPT` of a stopped
    /// thread (its event stop already queued), a resume that reaches that stop at once (from
    /// a syscall-entry stop, once the call is made); or, with a signal queued for the thread
    /// (`rt_tgsigqueueinfo`) and no stop to come, that signal's delivery stop, as the kernel
    /// dequeues it before the thread runs (taken out of `queued`).
    fn cont(&self, tid: i32, sig: i32) -> io::Result<()> {
        let mut st = self.state();
        st.log.push(format!("cont {tid} {sig}"));
        if st.traced(tid)?.in_call {
            st.finish_call(tid)?;
        }
        if st.traced(tid)?.events.is_empty() {
            if let Some(k) = st.queued.iter().position(|(t, _)| *t == tid) {
                let (_, info) = st.queued.remove(k);
                let t = st.traced(tid)?;
                t.siginfo = info;
                t.events.push_back(stop_status(info.signo(), 0));
            }
        }
        let t = st.traced(tid)?;
        if t.events.is_empty() {
            return Err(err(libc::ENOSYS));
        }
        Ok(())
    }

    fn detach(&self, tid: i32, sig: i32) -> io::Result<()> {
        let mut st = self.state();
        st.log.push(format!("detach {tid} {sig}"));
        if let Some((killed, status)) = st.killed_before_detach.filter(|k| k.0 == tid) {
            st.killed_before_detach = None;
            st.traced(killed)?.events.push_back(status);
            return Err(err(libc::ESRCH));
        }
        st.traced(tid)?.traced = false;
        st.detached.push((tid, sig));
        if std::mem::take(&mut st.exit_group_on_detach) {
            st.threads.retain(|&t, _| t == tid);
        }
        Ok(())
    }

    fn get_regs(&self, tid: i32) -> io::Result<Regs> {
        Ok(self.state().traced(tid)?.regs)
    }

    fn set_regs(&self, tid: i32, regs: &Regs) -> io::Result<()> {
        let mut st = self.state();
        st.traced(tid)?.regs = *regs;
        st.regs_written.push((tid, *regs));
        Ok(())
    }

    fn get_siginfo(&self, tid: i32) -> io::Result<SigInfo> {
        Ok(self.state().traced(tid)?.siginfo)
    }

    fn set_siginfo(&self, tid: i32, info: &SigInfo) -> io::Result<()> {
        let mut st = self.state();
        st.traced(tid)?.siginfo = *info;
        st.siginfo_set.push((tid, *info));
        Ok(())
    }

    fn get_sigmask(&self, tid: i32) -> io::Result<u64> {
        Ok(self.state().traced(tid)?.sigmask)
    }

    fn set_sigmask(&self, tid: i32, mask: u64) -> io::Result<()> {
        let mut st = self.state();
        st.log.push(format!("setsigmask {tid} {mask:#x}"));
        st.traced(tid)?.sigmask = mask;
        Ok(())
    }

    fn event_msg(&self, tid: i32) -> io::Result<u64> {
        let mut st = self.state();
        st.traced(tid)?;
        let child = st.log.iter().rev().find_map(|l| {
            l.strip_prefix(&format!("clone {tid} -> ")).and_then(|c| c.parse::<u64>().ok())
        });
        child.ok_or_else(|| err(libc::EINVAL))
    }

    fn wait_nohang(&self, tid: i32) -> io::Result<Option<i32>> {
        let mut st = self.state();
        let Some(t) = st.threads.get_mut(&tid) else { return Err(err(libc::ECHILD)) };
        if !t.traced {
            return Err(err(libc::ECHILD));
        }
        let ev = t.events.pop_front();
        if ev.is_some_and(|s| s & 0x7f != 0x7f) {
            st.threads.remove(&tid); // reaped
        }
        Ok(ev)
    }

    fn queue_signal(&self, pid: i32, tid: i32, info: &SigInfo) -> io::Result<()> {
        let mut st = self.state();
        assert_eq!(pid, PID);
        st.thread(tid)?;
        st.queued.push((tid, *info));
        Ok(())
    }

    fn list_threads(&self, pid: i32) -> io::Result<Vec<i32>> {
        let st = self.state();
        if pid != PID || st.threads.is_empty() {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        Ok(st.threads.keys().copied().collect())
    }

    fn read_text(&self, path: &Path) -> io::Result<String> {
        let st = self.state();
        let p = path.to_str().expect("utf-8");
        if p == format!("/proc/{PID}/maps") {
            return Ok(st.maps.clone());
        }
        let tid = p
            .strip_suffix("/status")
            .and_then(|d| d.rsplit('/').next())
            .and_then(|t| t.parse::<i32>().ok())
            .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?;
        if !st.threads.contains_key(&tid) {
            return Err(io::Error::from(io::ErrorKind::NotFound));
        }
        let tracer = st.traced_by_other.get(&tid).copied().unwrap_or(st.tracer);
        let threads = st.threads.len() + st.hidden_threads;
        Ok(format!(
            "Name:\tfake\nState:\tS (sleeping)\nTgid:\t{PID}\nThreads:\t{threads}\n\
             TracerPid:\t{tracer}\nSigCgt:\t{:016x}\nSeccomp:\t{}\n",
            st.caught,
            if st.seccomp.contains_key(&tid) { 2 } else { 0 }
        ))
    }

    fn seccomp_filter(&self, tid: i32, index: usize) -> io::Result<Option<Vec<u8>>> {
        let st = self.state();
        let filters = st.seccomp.get(&tid).ok_or_else(|| err(libc::EINVAL))?;
        Ok(filters.get(index).cloned())
    }

    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
        let st = self.state();
        match &st.auxv {
            Some(a) if path == Path::new(&format!("/proc/{PID}/auxv")) => Ok(a.clone()),
            _ => Err(io::Error::from(io::ErrorKind::NotFound)),
        }
    }

    fn read_mem(&self, _pid: i32, addr: RemoteAddr, buf: &mut [u8]) -> io::Result<usize> {
        let mut st = self.state();
        let Some((bytes, off)) = st.seg(addr.0) else { return Err(err(libc::EIO)) };
        let n = buf.len().min(bytes.len() - off);
        buf[..n].copy_from_slice(&bytes[off..off + n]);
        Ok(n)
    }

    fn write_mem(&self, _pid: i32, addr: RemoteAddr, data: &[u8]) -> io::Result<usize> {
        let mut st = self.state();
        st.writes.push((addr.0, data.to_vec()));
        let Some((bytes, off)) = st.seg(addr.0) else { return Err(err(libc::EIO)) };
        let n = data.len().min(bytes.len() - off);
        bytes[off..off + n].copy_from_slice(&data[..n]);
        Ok(n)
    }

    fn map_shared(
        &self,
        _pid: i32,
        _fd: i32,
        len: usize,
    ) -> io::Result<(*mut u8, Option<std::fs::File>)> {
        self.state().local_maps += 1;
        // u64 words keep the buffer 8-aligned for SharedMem's atomics.
        let words = vec![0u64; len.div_ceil(8)].into_boxed_slice();
        Ok((Box::into_raw(words).cast(), None))
    }

    unsafe fn unmap_local(&self, ptr: *mut u8, len: usize) {
        self.state().local_maps -= 1;
        let n = len.div_ceil(8);
        // SAFETY: the caller guarantees `ptr` came from `map_shared` above with the same
        // length and is freed once.
        drop(unsafe { Box::from_raw(std::ptr::slice_from_raw_parts_mut(ptr.cast::<u64>(), n)) });
    }

    fn self_pid(&self) -> i32 {
        self.state().self_pid
    }
}
