//! The live kernel as a target, through kerf's driver (`driver/kerf.ko`, DESIGN.md §4):
//! reading kernel text, the patch and data heaps it keeps within ±2 GiB of kernel text, text
//! writes with the int3 bypass, quiescence and int3 traps. The driver does the writing and
//! the waiting; everything else (analysis, code generation, planning) stays in kerf.
//!
//! Every system call goes through [`DriverSys`], so that tests can replace the device.

pub mod uapi;

use kerf_arch::KernelAddr;
use std::fmt;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Why a driver request failed, with what kerf asked for.
#[derive(Debug)]
pub enum KernelError {
    /// /dev/kerf is missing: the module is not loaded.
    NotLoaded,
    /// /dev/kerf exists but kerf may not open it (not root), or another kerf holds it.
    Open { source: io::Error },
    /// The driver speaks another ABI than this kerf.
    Abi { driver: u64, kerf: u64 },
    /// The module was built for another kernel than the one running.
    WrongKernel { built_for: String, running: String },
    /// A request the driver refused, with the errno and what it means for that request;
    /// `addr` is the kernel address it was about, for the requests that have one.
    Request { op: &'static str, addr: Option<KernelAddr>, errno: i32 },
    /// Reading a /proc or /sys file kerf needs.
    Proc { path: PathBuf, source: io::Error },
}

impl KernelError {
    /// The errno of a refused request.
    pub fn errno(&self) -> Option<i32> {
        match self {
            KernelError::Request { errno, .. } => Some(*errno),
            _ => None,
        }
    }
}

/// What an errno means for request `op` (from `driver/kerf_uapi.h`).
fn splice_meaning(op: &str, errno: i32) -> &'static str {
    match errno {
        libc::EBUSY if op == "write patch" => {
            "a live splice or trap leads there, or did before the last quiescence"
        }
        libc::EPERM => "the kernel forbids probing here (kprobe blacklist, noinstr or entry text, a BUG/WARN site, or kerf's own module)",
        libc::EBUSY => "the bytes belong to another patching mechanism (ftrace site, jump label, static call, kprobe, SMP alternative)",
        libc::ENXIO => "not in kernel or module text",
        libc::ESTALE => "the bytes there changed (someone else patched them)",
        libc::EEXIST => "overlaps a live splice",
        libc::EAGAIN => "a multi-instruction splice needs a quiesced int3 first",
        libc::ENOENT => "no live splice or trap there",
        libc::EINVAL => "malformed request",
        libc::ERANGE => "outside the patch heap",
        libc::ENOSPC => "too many live splices or traps",
        libc::EIO => "the bytes read back differ from the bytes written",
        libc::EFAULT => "unmapped kernel address",
        _ => "refused",
    }
}

impl fmt::Display for KernelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KernelError::NotLoaded => write!(
                f,
                "kerf's driver is not loaded ({} is missing): insmod kerf.ko (see driver/)",
                uapi::DEVICE_PATH
            ),
            KernelError::Open { source } if source.raw_os_error() == Some(libc::EBUSY) => {
                write!(f, "{} is in use by another kerf", uapi::DEVICE_PATH)
            }
            KernelError::Open { source } => {
                write!(f, "cannot open {} (root only): {source}", uapi::DEVICE_PATH)
            }
            KernelError::Abi { driver, kerf } => write!(
                f,
                "kerf.ko speaks driver ABI {driver}, this kerf speaks {kerf}: rebuild the driver"
            ),
            KernelError::WrongKernel { built_for, running } => write!(
                f,
                "kerf.ko was built for kernel {built_for} but {running} is running: rebuild it \
                 against this kernel's headers"
            ),
            KernelError::Request { op, addr, errno } => {
                match addr {
                    Some(addr) => write!(f, "{op} at {addr}: ")?,
                    None => write!(f, "{op}: ")?,
                }
                let e = io::Error::from_raw_os_error(*errno);
                write!(f, "{} ({e})", splice_meaning(op, *errno))
            }
            KernelError::Proc { path, source } => {
                write!(f, "cannot read {}: {source}", path.display())
            }
        }
    }
}

impl std::error::Error for KernelError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            KernelError::Open { source } | KernelError::Proc { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The device as kerf uses it. `ioctl` passes a pointer to the request's struct.
pub trait DriverSys: Send + Sync {
    /// # Safety
    /// `arg` must point to a live, writable struct of the type `request` encodes (uapi).
    unsafe fn ioctl(&self, request: u64, arg: *mut u8) -> io::Result<()>;
    /// Map `len` bytes of the data heap shared and read/write into kerf.
    fn map_data(&self, len: usize) -> io::Result<*mut u8>;
    /// Undo [`DriverSys::map_data`].
    ///
    /// # Safety
    /// `ptr` and `len` come from one `map_data` call, unmapped once, unused afterwards.
    unsafe fn unmap(&self, ptr: *mut u8, len: usize);
    /// A text file of /proc (kallsyms, modules).
    fn read_text(&self, path: &Path) -> io::Result<String>;
    /// A binary file of /sys (the kernel's BTF).
    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// The names in a directory of /sys (a module's sections).
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
}

/// The real /dev/kerf.
pub struct RealDriverSys {
    dev: File,
}

impl RealDriverSys {
    pub fn open() -> Result<RealDriverSys, KernelError> {
        match std::fs::OpenOptions::new().read(true).write(true).open(uapi::DEVICE_PATH) {
            Ok(dev) => Ok(RealDriverSys { dev }),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(KernelError::NotLoaded),
            Err(source) => Err(KernelError::Open { source }),
        }
    }
}

impl DriverSys for RealDriverSys {
    unsafe fn ioctl(&self, request: u64, arg: *mut u8) -> io::Result<()> {
        // SAFETY: `arg` points to the struct the request number encodes (see uapi), which the
        // caller keeps alive across the call; the kernel reads or writes only that many bytes.
        let r = unsafe { libc::ioctl(self.dev.as_raw_fd(), request as libc::c_ulong, arg) };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn map_data(&self, len: usize) -> io::Result<*mut u8> {
        // SAFETY: a fresh shared mapping of the device at offset 0; the result is checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                self.dev.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            Err(io::Error::last_os_error())
        } else {
            Ok(p as *mut u8)
        }
    }

    unsafe fn unmap(&self, ptr: *mut u8, len: usize) {
        // SAFETY: the caller guarantees ptr/len come from one map_data call.
        unsafe { libc::munmap(ptr as *mut libc::c_void, len) };
    }

    fn read_text(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
}

/// One splice of a batch: replace `old` by `new` (1, 2 or 5 bytes) at `addr`, as
/// [`Driver::splice`] does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpliceRequest {
    pub addr: KernelAddr,
    pub old: Vec<u8>,
    pub new: Vec<u8>,
    /// The bytes are one instruction or unexecuted padding (no int3 + quiesce needed first).
    pub one_insn: bool,
}

/// How [`Driver::splice_batch`] and [`Driver::unsplice_batch`] reach the driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpliceMode {
    /// One batch ioctl for the lot: three serialisations of every CPU for a run of sites.
    Batch,
    /// One ioctl per site, three serialisations each (the driver's single-site path), kept to
    /// measure against: the environment variable `KERF_KERNEL_SPLICE=single` selects it.
    OneAtATime,
}

impl SpliceMode {
    /// `KERF_KERNEL_SPLICE=single` or (the default) batches.
    pub fn from_env() -> SpliceMode {
        match std::env::var("KERF_KERNEL_SPLICE").as_deref() {
            Ok("single") => SpliceMode::OneAtATime,
            _ => SpliceMode::Batch,
        }
    }
}

/// An open driver: its heaps and text range, and the data heap mapped into kerf.
pub struct Driver {
    sys: Arc<dyn DriverSys>,
    pub info: uapi::Info,
    data: *mut u8,
    data_len: usize,
    /// How batches of splices reach the driver.
    pub mode: SpliceMode,
}

// SAFETY: `data` is a process-wide shared mapping owned by this value until drop, accessed
// only through atomics; the device handle is a file descriptor.
unsafe impl Send for Driver {}
// SAFETY: see `Send`.
unsafe impl Sync for Driver {}

impl Drop for Driver {
    fn drop(&mut self) {
        // SAFETY: mapped once in `with_sys`, not used after this.
        unsafe { self.sys.unmap(self.data, self.data_len) };
    }
}

fn c_string(b: &[u8]) -> String {
    let end = b.iter().position(|c| *c == 0).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

impl Driver {
    /// Open /dev/kerf and check it speaks this kerf's ABI for the running kernel.
    pub fn open() -> Result<Driver, KernelError> {
        Driver::with_sys(Arc::new(RealDriverSys::open()?))
    }

    pub fn with_sys(sys: Arc<dyn DriverSys>) -> Result<Driver, KernelError> {
        let mut v = uapi::Version {
            abi: 0,
            reserved: 0,
            built_for: [0; uapi::RELEASE_LEN],
            running: [0; uapi::RELEASE_LEN],
        };
        // SAFETY: IOC_VERSION takes a `Version`, which `v` is.
        unsafe { sys.ioctl(uapi::IOC_VERSION, &mut v as *mut _ as *mut u8) }
            .map_err(|e| KernelError::Request { op: "version", addr: None, errno: errno(&e) })?;
        if v.abi != uapi::ABI_VERSION {
            return Err(KernelError::Abi { driver: v.abi, kerf: uapi::ABI_VERSION });
        }
        let (built_for, running) = (c_string(&v.built_for), c_string(&v.running));
        if built_for != running {
            return Err(KernelError::WrongKernel { built_for, running });
        }
        let mut info = uapi::Info::default();
        // SAFETY: IOC_INFO takes an `Info`, which `info` is.
        unsafe { sys.ioctl(uapi::IOC_INFO, &mut info as *mut _ as *mut u8) }
            .map_err(|e| KernelError::Request { op: "info", addr: None, errno: errno(&e) })?;
        let data_len = info.data_heap_size as usize;
        let data = sys.map_data(data_len).map_err(|e| KernelError::Request {
            op: "mmap data heap",
            addr: Some(KernelAddr(info.data_heap)),
            errno: errno(&e),
        })?;
        Ok(Driver { sys, info, data, data_len, mode: SpliceMode::from_env() })
    }

    fn call<T>(
        &self,
        op: &'static str,
        addr: Option<KernelAddr>,
        req: u64,
        arg: &mut T,
    ) -> Result<(), KernelError> {
        // SAFETY: every caller in this module passes, as `arg`, the uapi struct its request
        // number encodes, borrowed mutably for the whole call.
        unsafe { self.sys.ioctl(req, arg as *mut T as *mut u8) }.map_err(|e| KernelError::Request {
            op,
            addr,
            errno: errno(&e),
        })
    }

    /// Kernel memory at `addr` (text, or the data a jump table is in).
    pub fn read(&self, addr: KernelAddr, buf: &mut [u8]) -> Result<(), KernelError> {
        let mut done = 0;
        while done < buf.len() {
            let n = (buf.len() - done).min(uapi::READ_MAX as usize);
            let mut rw = uapi::Rw {
                addr: addr.0 + done as u64,
                len: n as u64,
                user_buf: buf[done..].as_mut_ptr() as u64,
            };
            self.call("read", Some(KernelAddr(rw.addr)), uapi::IOC_READ, &mut rw)?;
            done += n;
        }
        Ok(())
    }

    /// Write a code patch into the patch heap (not yet reachable).
    pub fn write_patch(&self, addr: KernelAddr, code: &[u8]) -> Result<(), KernelError> {
        let mut rw =
            uapi::Rw { addr: addr.0, len: code.len() as u64, user_buf: code.as_ptr() as u64 };
        self.call("write patch", Some(addr), uapi::IOC_WRITE_PATCH, &mut rw)
    }

    /// Replace `old` by `new` (1, 2 or 5 bytes) at `addr`; `one_insn` when the bytes are one
    /// instruction or unexecuted padding (no int3 + quiesce needed first).
    pub fn splice(
        &self,
        addr: KernelAddr,
        old: &[u8],
        new: &[u8],
        one_insn: bool,
    ) -> Result<(), KernelError> {
        let req = SpliceRequest { addr, old: old.to_vec(), new: new.to_vec(), one_insn };
        let mut s = splice_req(&req);
        self.call("splice", Some(addr), uapi::IOC_SPLICE, &mut s)
    }

    /// Restore the original bytes of the splice at `addr`; returns them.
    pub fn unsplice(&self, addr: KernelAddr) -> Result<Vec<u8>, KernelError> {
        let mut u = uapi::Unsplice { addr: addr.0, ..Default::default() };
        self.call("unsplice", Some(addr), uapi::IOC_UNSPLICE, &mut u)?;
        Ok(u.restored[..(u.len as usize).min(8)].to_vec())
    }

    /// Splice every request, each checked as [`Driver::splice`] checks it, in order; requests
    /// in ascending address order are written together (see `KERF_IOC_SPLICE_BATCH`), and each
    /// one written before any later one at a lower address. One result per request: a
    /// refused request does not stop the others. A call the driver refuses as a whole (no
    /// memory; up to [`uapi::BATCH_MAX`] requests a call) gives its errno to each of its
    /// requests, none of which was applied (kerf's own buffers never fault).
    pub fn splice_batch(&self, reqs: &[SpliceRequest]) -> Vec<Result<(), KernelError>> {
        if self.mode == SpliceMode::OneAtATime {
            return reqs.iter().map(|r| self.splice(r.addr, &r.old, &r.new, r.one_insn)).collect();
        }
        let mut out = Vec::with_capacity(reqs.len());
        for chunk in reqs.chunks(uapi::BATCH_MAX) {
            let mut entries: Vec<uapi::SpliceEntry> = chunk
                .iter()
                .map(|r| uapi::SpliceEntry { req: splice_req(r), ..Default::default() })
                .collect();
            let call = self.batch(uapi::IOC_SPLICE_BATCH, &mut entries);
            out.extend(
                chunk
                    .iter()
                    .zip(&entries)
                    .map(|(r, e)| entry_result("splice", r.addr, call.map(|()| e.result))),
            );
        }
        out
    }

    /// Restore the splices at `addrs`, each as [`Driver::unsplice`] does, in one batch (or one
    /// ioctl each, see [`SpliceMode`]); one result per address, the restored bytes. A call
    /// refused as a whole gives its errno to each of its addresses, as in
    /// [`Driver::splice_batch`].
    pub fn unsplice_batch(&self, addrs: &[KernelAddr]) -> Vec<Result<Vec<u8>, KernelError>> {
        if self.mode == SpliceMode::OneAtATime {
            return addrs.iter().map(|&a| self.unsplice(a)).collect();
        }
        let mut out = Vec::with_capacity(addrs.len());
        for chunk in addrs.chunks(uapi::BATCH_MAX) {
            let mut entries: Vec<uapi::UnspliceEntry> = chunk
                .iter()
                .map(|a| uapi::UnspliceEntry {
                    req: uapi::Unsplice { addr: a.0, ..Default::default() },
                    ..Default::default()
                })
                .collect();
            let call = self.batch(uapi::IOC_UNSPLICE_BATCH, &mut entries);
            out.extend(chunk.iter().zip(&entries).map(|(&a, e)| {
                entry_result("unsplice", a, call.map(|()| e.result))
                    .map(|()| e.req.restored[..(e.req.len as usize).min(8)].to_vec())
            }));
        }
        out
    }

    /// One batch ioctl over `entries` (the uapi entry type of `req`): the errno of a call
    /// refused as a whole.
    fn batch<T>(&self, req: u64, entries: &mut [T]) -> Result<(), i32> {
        let mut b = uapi::Batch {
            entries: entries.as_mut_ptr() as u64,
            count: entries.len() as u64,
            ..Default::default()
        };
        // SAFETY: `b` is the `Batch` both batch requests take; its `entries` point to
        // `count` live entries of the type `req` takes, borrowed mutably for the call.
        unsafe { self.sys.ioctl(req, &mut b as *mut uapi::Batch as *mut u8) }.map_err(|e| errno(&e))
    }

    /// Wait until no CPU can still be in bytes or patches taken out of use before this call.
    pub fn quiesce(&self) -> Result<(), KernelError> {
        let mut none = 0u8;
        self.call("quiesce", None, uapi::IOC_QUIESCE, &mut none)
    }

    pub fn trap_add(&self, addr: KernelAddr, patch: KernelAddr) -> Result<(), KernelError> {
        let mut t = uapi::Trap { addr: addr.0, patch: patch.0 };
        self.call("trap add", Some(addr), uapi::IOC_TRAP_ADD, &mut t)
    }

    pub fn trap_del(&self, addr: KernelAddr) -> Result<(), KernelError> {
        let mut t = uapi::Trap { addr: addr.0, patch: 0 };
        self.call("trap del", Some(addr), uapi::IOC_TRAP_DEL, &mut t)
    }

    /// [`Driver::trap_add`] for each `(address, patch)`, in one batch (or one ioctl each, see
    /// [`SpliceMode`]); one result each, as in [`Driver::splice_batch`].
    pub fn trap_add_batch(
        &self,
        traps: &[(KernelAddr, KernelAddr)],
    ) -> Vec<Result<(), KernelError>> {
        if self.mode == SpliceMode::OneAtATime {
            return traps.iter().map(|&(a, p)| self.trap_add(a, p)).collect();
        }
        self.trap_batch("trap add", uapi::IOC_TRAP_ADD_BATCH, traps)
    }

    /// [`Driver::trap_del`] for each address, as [`Driver::trap_add_batch`].
    pub fn trap_del_batch(&self, addrs: &[KernelAddr]) -> Vec<Result<(), KernelError>> {
        if self.mode == SpliceMode::OneAtATime {
            return addrs.iter().map(|&a| self.trap_del(a)).collect();
        }
        let traps: Vec<(KernelAddr, KernelAddr)> =
            addrs.iter().map(|&a| (a, KernelAddr(0))).collect();
        self.trap_batch("trap del", uapi::IOC_TRAP_DEL_BATCH, &traps)
    }

    /// One batch call per [`uapi::BATCH_MAX`] traps; none for none (callers need not check).
    fn trap_batch(
        &self,
        op: &'static str,
        req: u64,
        traps: &[(KernelAddr, KernelAddr)],
    ) -> Vec<Result<(), KernelError>> {
        let mut out = Vec::with_capacity(traps.len());
        for chunk in traps.chunks(uapi::BATCH_MAX) {
            let mut entries: Vec<uapi::TrapEntry> = chunk
                .iter()
                .map(|&(a, p)| uapi::TrapEntry {
                    req: uapi::Trap { addr: a.0, patch: p.0 },
                    ..Default::default()
                })
                .collect();
            let call = self.batch(req, &mut entries);
            out.extend(
                chunk
                    .iter()
                    .zip(&entries)
                    .map(|(t, e)| entry_result(op, t.0, call.map(|()| e.result))),
            );
        }
        out
    }

    /// The current driver counters (live splices, traps, trap hits).
    pub fn refresh_info(&mut self) -> Result<uapi::Info, KernelError> {
        let mut info = uapi::Info::default();
        self.call("info", None, uapi::IOC_INFO, &mut info)?;
        self.info = info;
        Ok(info)
    }

    /// The data heap as words the kernel writes concurrently (see `SharedMem::words`).
    pub fn data_words(&self) -> &[AtomicU64] {
        // SAFETY: the live mapping of `data_len` bytes, page-aligned, for as long as `self`;
        // the kernel updates it concurrently, which atomics allow.
        unsafe { std::slice::from_raw_parts(self.data as *const AtomicU64, self.data_len / 8) }
    }

    /// The u64 at `offset` of the data heap (Acquire load, no system call).
    pub fn load_u64(&self, offset: usize) -> u64 {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.data_len, "offset {offset}");
        // SAFETY: in bounds and aligned inside the live mapping; the kernel updates it
        // concurrently, which atomics allow.
        unsafe { (*(self.data.add(offset) as *const AtomicU64)).load(Ordering::Acquire) }
    }

    /// Store into the data heap (to clear counters before use).
    pub fn store_u64(&self, offset: usize, v: u64) {
        assert!(offset.is_multiple_of(8) && offset + 8 <= self.data_len, "offset {offset}");
        // SAFETY: as in `load_u64`.
        unsafe { (*(self.data.add(offset) as *const AtomicU64)).store(v, Ordering::Release) }
    }

    /// /proc/kallsyms (needs root to show addresses).
    pub fn kallsyms(&self) -> Result<String, KernelError> {
        let path = Path::new("/proc/kallsyms");
        self.sys.read_text(path).map_err(|source| KernelError::Proc { path: path.into(), source })
    }

    /// The kernel's BTF type information.
    pub fn btf(&self) -> Result<Vec<u8>, KernelError> {
        let path = Path::new("/sys/kernel/btf/vmlinux");
        self.sys.read_bytes(path).map_err(|source| KernelError::Proc { path: path.into(), source })
    }

    /// /proc/modules: `name size refcount deps state address`.
    pub fn modules(&self) -> Result<String, KernelError> {
        let path = Path::new("/proc/modules");
        self.sys.read_text(path).map_err(|source| KernelError::Proc { path: path.into(), source })
    }

    /// Where the text of loaded module `name` lies: from its `.text` section to the lowest
    /// address of its other sections above `.text` (its core allocation, `[base, base +
    /// size)` of /proc/modules, also holds read-only and writable data), read from
    /// /sys/module/NAME/sections. Without that directory (kerf may not read it) or a
    /// `.text` entry, the whole allocation from `base`.
    pub fn module_text(&self, name: &str, base: KernelAddr, size: u64) -> (KernelAddr, KernelAddr) {
        let dir = PathBuf::from(format!("/sys/module/{name}/sections"));
        let read = |section: &str| {
            let text = self.sys.read_text(&dir.join(section)).ok()?;
            u64::from_str_radix(text.trim().trim_start_matches("0x"), 16).ok().map(KernelAddr)
        };
        let text = read(".text").unwrap_or(base);
        let mut end = base + size;
        for section in self.sys.list_dir(&dir).unwrap_or_default() {
            if let Some(a) = read(&section) {
                if a > text && a < end && !section.starts_with(".text") {
                    end = a;
                }
            }
        }
        (text, end)
    }
}

fn errno(e: &io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EIO)
}

/// The uapi form of a splice request (the driver checks the lengths; longer slices are cut).
fn splice_req(r: &SpliceRequest) -> uapi::Splice {
    let mut s = uapi::Splice {
        addr: r.addr.0,
        len: r.new.len() as u64,
        flags: if r.one_insn { uapi::SPLICE_ONE_INSN } else { 0 },
        ..Default::default()
    };
    let (o, n) = (r.old.len().min(8), r.new.len().min(8));
    s.expect_old[..o].copy_from_slice(&r.old[..o]);
    s.new_bytes[..n].copy_from_slice(&r.new[..n]);
    s
}

/// One entry's result of a batch: 0 or a negated errno, or the errno of the whole call.
fn entry_result(
    op: &'static str,
    addr: KernelAddr,
    result: Result<i64, i32>,
) -> Result<(), KernelError> {
    match result {
        Ok(0) => Ok(()),
        Ok(r) => Err(KernelError::Request { op, addr: Some(addr), errno: (-r) as i32 }),
        Err(errno) => Err(KernelError::Request { op, addr: Some(addr), errno }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A device that answers VERSION with given releases and ABI, and INFO with a small heap.
    struct FakeDevice {
        abi: u64,
        built_for: &'static str,
        running: &'static str,
        data: Mutex<Vec<u64>>,
        /// Files of /proc and /sys: path and text.
        files: Vec<(&'static str, &'static str)>,
        /// The count of every batch ioctl, in order.
        batches: Mutex<Vec<u64>>,
    }

    impl DriverSys for FakeDevice {
        unsafe fn ioctl(&self, request: u64, arg: *mut u8) -> io::Result<()> {
            match request {
                uapi::IOC_VERSION => {
                    let mut v = uapi::Version {
                        abi: self.abi,
                        reserved: 0,
                        built_for: [0; uapi::RELEASE_LEN],
                        running: [0; uapi::RELEASE_LEN],
                    };
                    v.built_for[..self.built_for.len()].copy_from_slice(self.built_for.as_bytes());
                    v.running[..self.running.len()].copy_from_slice(self.running.as_bytes());
                    // SAFETY: the caller passes a live `Version` for IOC_VERSION.
                    unsafe { *(arg as *mut uapi::Version) = v };
                    Ok(())
                }
                uapi::IOC_INFO => {
                    let info = uapi::Info { data_heap_size: 4096, ..Default::default() };
                    // SAFETY: the caller passes a live `Info` for IOC_INFO.
                    unsafe { *(arg as *mut uapi::Info) = info };
                    Ok(())
                }
                // Refused at an odd address, spliced at an even one.
                uapi::IOC_SPLICE => {
                    // SAFETY: the caller passes a live `Splice` for IOC_SPLICE.
                    let s = unsafe { &*(arg as *const uapi::Splice) };
                    match s.addr % 2 {
                        0 => Ok(()),
                        _ => Err(io::Error::from_raw_os_error(libc::EPERM)),
                    }
                }
                uapi::IOC_UNSPLICE => {
                    // SAFETY: the caller passes a live `Unsplice` for IOC_UNSPLICE.
                    let u = unsafe { &mut *(arg as *mut uapi::Unsplice) };
                    match u.addr % 2 {
                        0 => {
                            u.len = 1;
                            u.restored[0] = 0x90;
                            Ok(())
                        }
                        _ => Err(io::Error::from_raw_os_error(libc::ENOENT)),
                    }
                }
                uapi::IOC_TRAP_ADD | uapi::IOC_TRAP_DEL => {
                    // SAFETY: the caller passes a live `Trap` for both.
                    let t = unsafe { &*(arg as *const uapi::Trap) };
                    match t.addr % 2 {
                        0 => Ok(()),
                        _ => Err(io::Error::from_raw_os_error(libc::EEXIST)),
                    }
                }
                uapi::IOC_TRAP_ADD_BATCH | uapi::IOC_TRAP_DEL_BATCH => {
                    // SAFETY: the caller passes a live `Batch` whose `entries` point to
                    // `count` `TrapEntry`s. Refused at an odd address, as single requests.
                    let b = unsafe { &mut *(arg as *mut uapi::Batch) };
                    self.batches.lock().unwrap().push(b.count);
                    // SAFETY: see above.
                    let e = unsafe {
                        std::slice::from_raw_parts_mut(
                            b.entries as *mut uapi::TrapEntry,
                            b.count as usize,
                        )
                    };
                    for e in e.iter_mut() {
                        e.result = if e.req.addr % 2 == 0 { 0 } else { -libc::EEXIST as i64 };
                    }
                    Ok(())
                }
                uapi::IOC_SPLICE_BATCH | uapi::IOC_UNSPLICE_BATCH => {
                    // SAFETY: the caller passes a live `Batch` whose `entries` point to
                    // `count` entries of the type the request takes.
                    let b = unsafe { &mut *(arg as *mut uapi::Batch) };
                    self.batches.lock().unwrap().push(b.count);
                    let n = b.count as usize;
                    if request == uapi::IOC_SPLICE_BATCH {
                        // SAFETY: see above.
                        let e = unsafe {
                            std::slice::from_raw_parts_mut(b.entries as *mut uapi::SpliceEntry, n)
                        };
                        for e in e.iter_mut() {
                            e.result = if e.req.addr % 2 == 0 { 0 } else { -libc::EPERM as i64 };
                        }
                    } else {
                        // SAFETY: see above.
                        let e = unsafe {
                            std::slice::from_raw_parts_mut(b.entries as *mut uapi::UnspliceEntry, n)
                        };
                        for e in e.iter_mut() {
                            e.result = if e.req.addr % 2 == 0 { 0 } else { -libc::ENOENT as i64 };
                            if e.result == 0 {
                                e.req.len = 1;
                                e.req.restored[0] = 0x90;
                            }
                        }
                    }
                    Ok(())
                }
                _ => Err(io::Error::from_raw_os_error(libc::ENOTTY)),
            }
        }

        fn map_data(&self, len: usize) -> io::Result<*mut u8> {
            let mut d = self.data.lock().unwrap();
            d.resize(len / 8, 0);
            Ok(d.as_mut_ptr() as *mut u8)
        }

        unsafe fn unmap(&self, _: *mut u8, _: usize) {}

        fn read_text(&self, path: &Path) -> io::Result<String> {
            let file = self.files.iter().find(|(p, _)| Path::new(p) == path);
            file.map(|(_, text)| text.to_string()).ok_or(io::ErrorKind::NotFound.into())
        }

        fn read_bytes(&self, path: &Path) -> io::Result<Vec<u8>> {
            self.read_text(path).map(String::into_bytes)
        }

        fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
            let names: Vec<String> = self
                .files
                .iter()
                .filter_map(|(p, _)| Path::new(p).strip_prefix(path).ok())
                .map(|n| n.to_string_lossy().into_owned())
                .collect();
            if names.is_empty() {
                return Err(io::ErrorKind::NotFound.into());
            }
            Ok(names)
        }
    }

    fn open(
        abi: u64,
        built_for: &'static str,
        running: &'static str,
    ) -> Result<Driver, KernelError> {
        with_files(abi, built_for, running, Vec::new())
    }

    fn with_files(
        abi: u64,
        built_for: &'static str,
        running: &'static str,
        files: Vec<(&'static str, &'static str)>,
    ) -> Result<Driver, KernelError> {
        Driver::with_sys(Arc::new(FakeDevice {
            abi,
            built_for,
            running,
            data: Mutex::new(Vec::new()),
            files,
            batches: Mutex::new(Vec::new()),
        }))
    }

    #[test]
    fn a_module_built_for_another_kernel_is_named() {
        let e = open(uapi::ABI_VERSION, "6.1.0-55-amd64", "6.1.0-56-amd64").err().unwrap();
        assert_eq!(
            e.to_string(),
            "kerf.ko was built for kernel 6.1.0-55-amd64 but 6.1.0-56-amd64 is running: rebuild \
             it against this kernel's headers"
        );
        let e = open(uapi::ABI_VERSION + 1, "x", "x").err().unwrap();
        let want =
            format!("driver ABI {}, this kerf speaks {}", uapi::ABI_VERSION + 1, uapi::ABI_VERSION);
        assert!(e.to_string().contains(&want), "{e}");
    }

    #[test]
    fn a_refused_splice_says_why() {
        let d = open(uapi::ABI_VERSION, "6.1", "6.1").unwrap();
        assert_eq!(d.info.data_heap_size, 4096);
        let e = d.splice(KernelAddr(0xffff_ffff_8100_0001), &[0x90], &[0xcc], true).unwrap_err();
        assert_eq!(e.errno(), Some(libc::EPERM));
        assert!(e.to_string().contains("the kernel forbids probing here"), "{e}");
    }

    /// Per-entry results of both modes, typed with the address of the entry that failed; a
    /// batch larger than the driver's limit goes in several calls.
    #[test]
    fn a_batch_reports_each_entry() {
        let sys = Arc::new(FakeDevice {
            abi: uapi::ABI_VERSION,
            built_for: "6.1",
            running: "6.1",
            data: Mutex::new(Vec::new()),
            files: Vec::new(),
            batches: Mutex::new(Vec::new()),
        });
        let mut d = Driver::with_sys(sys.clone()).unwrap();
        let base = 0xffff_ffff_8100_0000u64;
        let reqs: Vec<SpliceRequest> = (0..uapi::BATCH_MAX as u64 + 3)
            .map(|i| SpliceRequest {
                addr: KernelAddr(base + i),
                old: vec![0x90],
                new: vec![0xcc],
                one_insn: true,
            })
            .collect();
        let addrs: Vec<KernelAddr> = reqs.iter().map(|r| r.addr).collect();
        for mode in [SpliceMode::Batch, SpliceMode::OneAtATime] {
            d.mode = mode;
            let r = d.splice_batch(&reqs);
            assert_eq!(r.len(), reqs.len());
            assert!(r[0].is_ok() && r[2].is_ok(), "{mode:?}");
            match &r[1] {
                Err(KernelError::Request { op: "splice", addr, errno: libc::EPERM }) => {
                    assert_eq!(*addr, Some(KernelAddr(base + 1)), "{mode:?}")
                }
                other => panic!("{mode:?}: {other:?}"),
            }
            let u = d.unsplice_batch(&addrs);
            assert_eq!(u[0].as_deref().unwrap(), &[0x90]);
            assert_eq!(u[3].as_ref().unwrap_err().errno(), Some(libc::ENOENT), "{mode:?}");
            let traps: Vec<(KernelAddr, KernelAddr)> =
                addrs.iter().map(|&a| (a, KernelAddr(base))).collect();
            for (op, t) in
                [("trap add", d.trap_add_batch(&traps)), ("trap del", d.trap_del_batch(&addrs))]
            {
                assert_eq!(t.len(), addrs.len());
                assert!(t[0].is_ok() && t[uapi::BATCH_MAX + 2].is_ok(), "{mode:?}");
                match &t[uapi::BATCH_MAX + 1] {
                    Err(KernelError::Request { op: o, addr, errno: libc::EEXIST }) => {
                        assert_eq!((*o, *addr), (op, Some(addrs[uapi::BATCH_MAX + 1])), "{mode:?}")
                    }
                    other => panic!("{mode:?}: {other:?}"),
                }
            }
        }
        // Nothing to do is no call (the count below would show one).
        d.mode = SpliceMode::Batch;
        assert!(d.trap_add_batch(&[]).is_empty() && d.trap_del_batch(&[]).is_empty());
        // Batch mode: two calls each way (the limit, then the rest); one at a time: none.
        let b = sys.batches.lock().unwrap().clone();
        assert_eq!(b, [uapi::BATCH_MAX as u64, 3].repeat(4));
    }

    #[test]
    fn a_module_text_ends_where_its_other_sections_start() {
        let k = |a: u64| KernelAddr(0xffff_ffff_c000_0000 + a);
        let d = with_files(
            uapi::ABI_VERSION,
            "6.1",
            "6.1",
            vec![
                ("/sys/module/ext4/sections/.text", "0xffffffffc0001000\n"),
                ("/sys/module/ext4/sections/.text.unlikely", "0xffffffffc0050000\n"),
                ("/sys/module/ext4/sections/.rodata", "0xffffffffc0060000\n"),
                ("/sys/module/ext4/sections/.data", "0xffffffffc0070000\n"),
                // Outside the core allocation (init, or another allocation): not an end.
                ("/sys/module/ext4/sections/.init.text", "0xffffffffc1000000\n"),
            ],
        )
        .unwrap();
        assert_eq!(d.module_text("ext4", k(0), 0x80000), (k(0x1000), k(0x60000)));
        // No sections to read: the whole allocation.
        assert_eq!(d.module_text("xfs", k(0x10_0000), 0x2000), (k(0x10_0000), k(0x10_2000)));
    }

    #[test]
    fn a_refused_request_names_its_address_when_it_has_one() {
        let at = KernelError::Request {
            op: "trap add",
            addr: Some(KernelAddr(0xffff_ffff_8100_0010)),
            errno: libc::EEXIST,
        };
        assert_eq!(
            at.to_string(),
            "trap add at 0xffffffff81000010: overlaps a live splice (File exists (os error 17))"
        );
        let none = KernelError::Request { op: "quiesce", addr: None, errno: libc::EINVAL };
        assert_eq!(none.to_string(), "quiesce: malformed request (Invalid argument (os error 22))");
    }

    #[test]
    fn a_missing_device_is_a_clear_error() {
        assert_eq!(
            KernelError::NotLoaded.to_string(),
            "kerf's driver is not loaded (/dev/kerf is missing): insmod kerf.ko (see driver/)"
        );
    }
}
