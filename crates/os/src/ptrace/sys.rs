//! Every system call that live-process control makes, behind one trait ([`TraceSys`]) so that
//! the logic of [`super::Tracee`] can be tested against a fake kernel; [`RealTraceSys`] is
//! the real one (ptrace, waitpid, /proc/PID/mem, a local shared mapping).

use kerf_arch::RemoteAddr;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::Mutex;

/// The general-purpose registers of a stopped thread, as `PTRACE_GETREGS` returns them.
/// The registers are the kernel's raw words (any register may hold an address or not);
/// [`RegsExt`] reads and sets the two that always hold addresses, typed.
pub type Regs = libc::user_regs_struct;

/// The program counter and stack pointer of [`Regs`] as addresses of the process.
pub trait RegsExt {
    /// `rip`: where the thread executes next.
    fn pc(&self) -> RemoteAddr;
    /// `rsp`: the top of the thread's stack.
    fn sp(&self) -> RemoteAddr;
    fn set_pc(&mut self, pc: RemoteAddr);
    fn set_sp(&mut self, sp: RemoteAddr);
}

impl RegsExt for Regs {
    fn pc(&self) -> RemoteAddr {
        RemoteAddr(self.rip)
    }
    fn sp(&self) -> RemoteAddr {
        RemoteAddr(self.rsp)
    }
    fn set_pc(&mut self, pc: RemoteAddr) {
        self.rip = pc.0;
    }
    fn set_sp(&mut self, sp: RemoteAddr) {
        self.rsp = sp.0;
    }
}

/// The kernel's `siginfo_t` (128 bytes), as `PTRACE_GETSIGINFO` returns it. Kept as raw
/// words so that its layout does not depend on the libc crate's union definitions.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct SigInfo {
    pub words: [u64; 16],
}

impl SigInfo {
    /// A siginfo with these leading fields and zeros elsewhere.
    pub fn new(signo: i32, code: i32, pid: i32, uid: u32) -> SigInfo {
        let mut s = SigInfo { words: [0; 16] };
        s.set_signo(signo);
        s.set_code(code);
        s.words[2] = u64::from(pid as u32) | (u64::from(uid) << 32);
        s
    }
    pub fn signo(&self) -> i32 {
        self.words[0] as u32 as i32
    }
    fn set_signo(&mut self, signo: i32) {
        self.words[0] = (self.words[0] & !0xffff_ffff) | u64::from(signo as u32);
    }
    /// `si_code`: > 0 for signals the kernel generated (faults, traps, SIGCHLD), 0 for
    /// `kill`, negative for `sigqueue` (-1), `tkill` (-6) and other user sources.
    pub fn code(&self) -> i32 {
        self.words[1] as u32 as i32
    }
    pub fn set_code(&mut self, code: i32) {
        self.words[1] = (self.words[1] & !0xffff_ffff) | u64::from(code as u32);
    }
    /// `si_pid` (meaningful for user-sent signals and SIGCHLD).
    pub fn sender_pid(&self) -> i32 {
        self.words[2] as u32 as i32
    }
}

impl std::fmt::Debug for SigInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigInfo")
            .field("signo", &self.signo())
            .field("code", &self.code())
            .field("pid", &self.sender_pid())
            .finish_non_exhaustive()
    }
}

/// The operating system as live-process control sees it. Thread ids are kernel tids; `pid`
/// is the thread group. Errors are raw `io::Error`s: [`super::Tracee`] adds the context.
///
/// ptrace requests only work from the OS thread that attached (the kernel makes that
/// *thread* the tracer), which is why [`super::Tracee`] is not `Send`.
pub trait TraceSys: Send + Sync {
    /// `PTRACE_SEIZE` with these `PTRACE_O_*` options.
    fn seize(&self, tid: i32, options: i32) -> io::Result<()>;
    /// `PTRACE_INTERRUPT`.
    fn interrupt(&self, tid: i32) -> io::Result<()>;
    /// `PTRACE_SINGLESTEP`, delivering `sig` (0: none).
    fn single_step(&self, tid: i32, sig: i32) -> io::Result<()>;
    /// `PTRACE_SYSCALL`, delivering `sig` (0: none): run to the next syscall-stop.
    fn syscall(&self, tid: i32, sig: i32) -> io::Result<()>;
    /// `PTRACE_DETACH`, delivering `sig` (0: none).
    fn detach(&self, tid: i32, sig: i32) -> io::Result<()>;
    /// `PTRACE_CONT`, delivering `sig` (0: none).
    fn cont(&self, tid: i32, sig: i32) -> io::Result<()>;
    fn get_regs(&self, tid: i32) -> io::Result<Regs>;
    fn set_regs(&self, tid: i32, regs: &Regs) -> io::Result<()>;
    fn get_siginfo(&self, tid: i32) -> io::Result<SigInfo>;
    fn set_siginfo(&self, tid: i32, info: &SigInfo) -> io::Result<()>;
    /// `PTRACE_GETSIGMASK`: the thread's blocked signals (bit n-1 for signal n).
    fn get_sigmask(&self, tid: i32) -> io::Result<u64>;
    /// `PTRACE_SETSIGMASK`.
    fn set_sigmask(&self, tid: i32, mask: u64) -> io::Result<()>;
    /// `PTRACE_GETEVENTMSG` (the new tid after `PTRACE_EVENT_CLONE`).
    fn event_msg(&self, tid: i32) -> io::Result<u64>;
    /// `waitpid(tid, __WALL | __WNOTHREAD | WNOHANG)`: the raw status of a state change,
    /// or `None` while there is none. `__WNOTHREAD` keeps kerf's other tracers' events (and
    /// its own children's exits) out of this wait.
    fn wait_nohang(&self, tid: i32) -> io::Result<Option<i32>>;
    /// `rt_tgsigqueueinfo(pid, tid, info.signo, info)`: queue a signal again.
    fn queue_signal(&self, pid: i32, tid: i32, info: &SigInfo) -> io::Result<()>;
    /// The thread ids in /proc/PID/task.
    fn list_threads(&self, pid: i32) -> io::Result<Vec<i32>>;
    /// A text file (of /proc).
    fn read_text(&self, path: &Path) -> io::Result<String>;
    /// A binary file (of /proc), e.g. auxv.
    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// `pread` of /proc/PID/mem at `addr`: the number of bytes read.
    fn read_mem(&self, pid: i32, addr: RemoteAddr, buf: &mut [u8]) -> io::Result<usize>;
    /// `pwrite` of /proc/PID/mem at `addr`: the number of bytes written.
    fn write_mem(&self, pid: i32, addr: RemoteAddr, data: &[u8]) -> io::Result<usize>;
    /// Open /proc/PID/fd/FD and map `len` bytes of it shared and read/write in kerf.
    fn map_shared(&self, pid: i32, fd: i32, len: usize) -> io::Result<(*mut u8, Option<File>)>;
    /// Undo [`TraceSys::map_shared`].
    ///
    /// # Safety
    /// `ptr` and `len` must come from one [`TraceSys::map_shared`] call of this `TraceSys`,
    /// unmapped once, with nothing referring to the mapping afterwards.
    unsafe fn unmap_local(&self, ptr: *mut u8, len: usize);
    /// kerf's own process id.
    fn self_pid(&self) -> i32;
    /// `PTRACE_SECCOMP_GET_FILTER`: the `struct sock_filter` bytes of stopped thread `tid`'s
    /// filter number `index` (0 the most recently installed), `None` past the last. The fake
    /// has none.
    fn seccomp_filter(&self, tid: i32, index: usize) -> io::Result<Option<Vec<u8>>> {
        let _ = (tid, index);
        Ok(None)
    }
}

/// The real kernel. Keeps the last /proc/PID/mem it opened, so that memory access costs one
/// `pread`/`pwrite`.
#[derive(Default)]
pub struct RealTraceSys {
    mem: Mutex<Option<(i32, File)>>,
}

impl RealTraceSys {
    pub fn new() -> RealTraceSys {
        RealTraceSys::default()
    }

    fn with_mem<T>(&self, pid: i32, f: impl FnOnce(&File) -> io::Result<T>) -> io::Result<T> {
        let mut slot = self.mem.lock().unwrap_or_else(|e| e.into_inner());
        if slot.as_ref().map(|(p, _)| *p) != Some(pid) {
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(format!("/proc/{pid}/mem"))?;
            *slot = Some((pid, file));
        }
        let (_, file) = slot.as_ref().expect("just opened");
        f(file)
    }
}

/// One ptrace request whose result is 0 or -1/errno.
fn ptrace(req: libc::c_uint, tid: i32, addr: usize, data: usize) -> io::Result<()> {
    // SAFETY: the requests passed here either ignore `addr`/`data` or take plain integers
    // (options, signal numbers); pointer-taking requests go through `ptrace_ptr`.
    let r = unsafe { libc::ptrace(req, tid, addr as *mut libc::c_void, data as *mut libc::c_void) };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One ptrace request whose `data` points to a `T` the kernel reads or fills.
fn ptrace_ptr<T>(req: libc::c_uint, tid: i32, data: *mut T) -> io::Result<()> {
    // SAFETY: callers pass a pointer to a live, properly sized `T` for exactly the request
    // that reads or writes a `T` (user_regs_struct for GETREGS/SETREGS, the 128-byte
    // siginfo for GETSIGINFO/SETSIGINFO, an unsigned long for GETEVENTMSG).
    let r = unsafe { libc::ptrace(req, tid, std::ptr::null_mut::<libc::c_void>(), data) };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

const PTRACE_SECCOMP_GET_FILTER: libc::c_uint = 0x420c;

/// `PTRACE_SECCOMP_GET_FILTER` of filter `index` into `buf` (null: only its length): the
/// number of instructions.
fn seccomp_filter_request(tid: i32, index: usize, buf: Option<&mut [u8]>) -> io::Result<usize> {
    let ptr = buf.map_or(std::ptr::null_mut(), |b| b.as_mut_ptr());
    // SAFETY: `ptr` is null (the kernel then only counts) or points to a buffer the caller
    // sized for the count the kernel gave just before (8 bytes an instruction); a filter
    // never changes while its thread is stopped.
    let r =
        unsafe { libc::ptrace(PTRACE_SECCOMP_GET_FILTER, tid, index as *mut libc::c_void, ptr) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

const PTRACE_GETSIGMASK: libc::c_uint = 0x420a;
const PTRACE_SETSIGMASK: libc::c_uint = 0x420b;

/// `PTRACE_GETSIGMASK`/`PTRACE_SETSIGMASK`: `addr` is the size of the kernel's sigset (8
/// bytes), `data` points to it.
fn sigmask_request(req: libc::c_uint, tid: i32, mask: &mut u64) -> io::Result<()> {
    // SAFETY: `mask` is a live u64, the 8 bytes the kernel reads or writes for these requests.
    let r = unsafe {
        libc::ptrace(req, tid, std::mem::size_of::<u64>() as *mut libc::c_void, mask as *mut u64)
    };
    if r == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

impl TraceSys for RealTraceSys {
    fn seize(&self, tid: i32, options: i32) -> io::Result<()> {
        ptrace(libc::PTRACE_SEIZE, tid, 0, options as usize)
    }

    fn interrupt(&self, tid: i32) -> io::Result<()> {
        ptrace(libc::PTRACE_INTERRUPT, tid, 0, 0)
    }

    fn single_step(&self, tid: i32, sig: i32) -> io::Result<()> {
        ptrace(libc::PTRACE_SINGLESTEP, tid, 0, sig as usize)
    }

    fn syscall(&self, tid: i32, sig: i32) -> io::Result<()> {
        ptrace(libc::PTRACE_SYSCALL, tid, 0, sig as usize)
    }

    fn detach(&self, tid: i32, sig: i32) -> io::Result<()> {
        ptrace(libc::PTRACE_DETACH, tid, 0, sig as usize)
    }

    fn cont(&self, tid: i32, sig: i32) -> io::Result<()> {
        ptrace(libc::PTRACE_CONT, tid, 0, sig as usize)
    }

    fn get_regs(&self, tid: i32) -> io::Result<Regs> {
        // SAFETY: user_regs_struct is plain integers; all-zero is a valid value.
        let mut regs: Regs = unsafe { std::mem::zeroed() };
        ptrace_ptr(libc::PTRACE_GETREGS, tid, &mut regs)?;
        Ok(regs)
    }

    fn set_regs(&self, tid: i32, regs: &Regs) -> io::Result<()> {
        // The kernel only reads through this pointer.
        ptrace_ptr(libc::PTRACE_SETREGS, tid, regs as *const Regs as *mut Regs)
    }

    fn get_siginfo(&self, tid: i32) -> io::Result<SigInfo> {
        let mut info = SigInfo { words: [0; 16] };
        ptrace_ptr(libc::PTRACE_GETSIGINFO, tid, &mut info)?;
        Ok(info)
    }

    fn set_siginfo(&self, tid: i32, info: &SigInfo) -> io::Result<()> {
        ptrace_ptr(libc::PTRACE_SETSIGINFO, tid, info as *const SigInfo as *mut SigInfo)
    }

    fn get_sigmask(&self, tid: i32) -> io::Result<u64> {
        let mut mask: u64 = 0;
        sigmask_request(PTRACE_GETSIGMASK, tid, &mut mask)?;
        Ok(mask)
    }

    fn set_sigmask(&self, tid: i32, mask: u64) -> io::Result<()> {
        let mut mask = mask;
        sigmask_request(PTRACE_SETSIGMASK, tid, &mut mask)
    }

    fn event_msg(&self, tid: i32) -> io::Result<u64> {
        let mut msg: libc::c_ulong = 0;
        ptrace_ptr(libc::PTRACE_GETEVENTMSG, tid, &mut msg)?;
        Ok(msg)
    }

    fn wait_nohang(&self, tid: i32) -> io::Result<Option<i32>> {
        let mut status = 0;
        loop {
            // SAFETY: `status` is a live c_int the kernel fills.
            let r = unsafe {
                libc::waitpid(tid, &mut status, libc::__WALL | libc::__WNOTHREAD | libc::WNOHANG)
            };
            if r == -1 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            return Ok(if r == 0 { None } else { Some(status) });
        }
    }

    fn queue_signal(&self, pid: i32, tid: i32, info: &SigInfo) -> io::Result<()> {
        // SAFETY: rt_tgsigqueueinfo reads 128 bytes of siginfo from a live SigInfo.
        let r = unsafe {
            libc::syscall(
                libc::SYS_rt_tgsigqueueinfo,
                pid,
                tid,
                info.signo(),
                info as *const SigInfo,
            )
        };
        if r == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn list_threads(&self, pid: i32) -> io::Result<Vec<i32>> {
        let mut tids = Vec::new();
        for entry in std::fs::read_dir(format!("/proc/{pid}/task"))? {
            if let Some(tid) = entry?.file_name().to_str().and_then(|n| n.parse().ok()) {
                tids.push(tid);
            }
        }
        tids.sort_unstable();
        Ok(tids)
    }

    fn seccomp_filter(&self, tid: i32, index: usize) -> io::Result<Option<Vec<u8>>> {
        let n = match seccomp_filter_request(tid, index, None) {
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) => return Ok(None),
            r => r?,
        };
        let mut buf = vec![0u8; n * 8];
        let got = seccomp_filter_request(tid, index, Some(&mut buf))?;
        buf.truncate(got * 8);
        Ok(Some(buf))
    }

    fn read_text(&self, path: &Path) -> io::Result<String> {
        String::from_utf8(read_proc(path)?)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }

    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
        read_proc(path)
    }

    fn read_mem(&self, pid: i32, addr: RemoteAddr, buf: &mut [u8]) -> io::Result<usize> {
        // The file offset of /proc/PID/mem is the address.
        self.with_mem(pid, |f| retry_eintr(|| f.read_at(buf, addr.0)))
    }

    fn write_mem(&self, pid: i32, addr: RemoteAddr, data: &[u8]) -> io::Result<usize> {
        self.with_mem(pid, |f| retry_eintr(|| f.write_at(data, addr.0)))
    }

    fn map_shared(&self, pid: i32, fd: i32, len: usize) -> io::Result<(*mut u8, Option<File>)> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("/proc/{pid}/fd/{fd}"))?;
        // SAFETY: a fresh shared mapping chosen by the kernel (no address hint), of a file
        // kerf holds open; it aliases no Rust object.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok((p.cast(), Some(file)))
    }

    unsafe fn unmap_local(&self, ptr: *mut u8, len: usize) {
        // SAFETY: the caller guarantees `ptr`/`len` are one live mapping from `map_shared`.
        unsafe {
            libc::munmap(ptr.cast(), len);
        }
    }

    fn self_pid(&self) -> i32 {
        std::process::id() as i32
    }
}

fn retry_eintr(mut f: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
    loop {
        match f() {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

/// A file of /proc, whole. /proc files report size 0, so `fs::read` probes with a 32-byte read
/// and doubles from there: eight reads for a 1.4 kB status file, which kerf reads at every
/// stop of every thread. One buffer of a page (grown if the file is larger) takes two.
fn read_proc(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read;
    let mut f = std::fs::File::open(path)?;
    let mut buf = Vec::with_capacity(4096);
    f.read_to_end(&mut buf)?;
    Ok(buf)
}
