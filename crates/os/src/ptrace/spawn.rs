//! Launching a command to instrument: start it held at its entry point, with its libraries
//! loaded and none of its own code run yet ([`spawn_at_entry`]), or start it normally and wait
//! until its dynamic loader has mapped its libraries ([`spawn`], [`wait_until_loaded`]); then
//! kerf analyses and patches it with [`super::Tracee`].

use super::mem;
use super::sys::{RealTraceSys, RegsExt, TraceSys};
use crate::error::TargetError;
use kerf_analysis::image::maps::parse_maps;
use kerf_arch::{ImageAddr, RemoteAddr};
use std::io;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const AT_PHDR: u64 = 3;
const AT_PHENT: u64 = 4;
const AT_PHNUM: u64 = 5;
/// `AT_BASE` of the auxiliary vector: where the program interpreter was loaded (0: none).
const AT_BASE: u64 = 7;
const AT_ENTRY: u64 = 9;
/// Where a held command's main thread waits until kerf lets it go, on a page of its own:
/// `1: mov eax, SYS_pause; syscall; jmp 1b`. `pause` sleeps (no CPU burnt while kerf
/// analyses) until a signal's handler has run, then the loop sleeps again.
const HOLD_LOOP: [u8; 9] = [0xb8, 0x22, 0x00, 0x00, 0x00, 0x0f, 0x05, 0xeb, 0xf7];
const INT3: u8 = 0xcc;
const SYSCALL: [u8; 2] = [0x0f, 0x05];
const PAGE: u64 = 4096;
const PT_DYNAMIC: u32 = 2;
const PT_PHDR: u32 = 6;
const DT_DEBUG: i64 = 21;
/// Fallback only (no `DT_DEBUG`): maps unchanged for this long with libc mapped counts as
/// "the loader is done".
const SETTLE: Duration = Duration::from_millis(20);
/// Fallback only, and no libc mapping either (musl's loader is its libc): unchanged this long.
const SETTLE_NO_LIBC: Duration = Duration::from_millis(200);

/// Start `argv` (program and arguments) as a child of kerf with inherited stdio, exactly as
/// a shell would. `Command::spawn` returns once `execve` has succeeded, so the child's maps
/// already show the new program; then use [`wait_until_loaded`] and
/// [`super::Tracee::stop_all`] on `child.id()`.
pub fn spawn(argv: &[String]) -> Result<Child, TargetError> {
    let Some((program, args)) = argv.split_first() else {
        return Err(TargetError::Spawn {
            program: String::new(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "empty command"),
        });
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    // SAFETY: the closure runs in the forked child before exec and makes only
    // async-signal-safe calls.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, crate::inherit::restore_in_child);
    }
    cmd.spawn().map_err(|source| TargetError::Spawn { program: program.clone(), source })
}

/// Wait (at most `timeout`) until process `pid`, freshly started, has its libraries loaded.
///
/// 1. Wait for `execve` to finish: `Command::spawn` returns as soon as the child has left the
///    parent's memory (vfork semantics), which is *inside* `execve`; until the kernel has
///    written the new auxiliary vector (/proc/PID/auxv with `AT_ENTRY`), nothing is known.
/// 2. A statically linked program (`AT_BASE` = 0) is then ready.
/// 3. A dynamically linked one is ready when its loader says so: the executable's
///    `DT_DEBUG` entry points at the loader's `r_debug`, whose `r_state` is `RT_CONSISTENT`
///    with a non-empty `r_map` (glibc sets that after mapping and relocating every library,
///    just before running constructors and jumping to the entry point; debuggers rely on it).
///    This reads /proc/PID/mem, which kerf may do for a process it can ptrace.
/// 4. Without `DT_DEBUG` (or if it cannot be read), a heuristic: a libc (`libc.so*`,
///    `libc-*`, `ld-musl*`) is mapped and /proc/PID/maps has not changed for 20 ms, or no
///    libc but no change for 200 ms.
///
/// Libraries `dlopen`ed later are of course not waited for.
pub fn wait_until_loaded(pid: i32, timeout: Duration) -> Result<(), TargetError> {
    wait_until_loaded_with(&RealTraceSys::new(), pid, timeout)
}

/// [`wait_until_loaded`] through `sys`.
pub fn wait_until_loaded_with(
    sys: &dyn TraceSys,
    pid: i32,
    timeout: Duration,
) -> Result<(), TargetError> {
    let start = Instant::now();
    let read = |what: &str| -> Result<Vec<u8>, TargetError> {
        let path = PathBuf::from(format!("/proc/{pid}/{what}"));
        sys.read_bytes(&path).map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) {
                TargetError::NoSuchProcess { pid }
            } else {
                TargetError::from_io(pid, "read", path, e)
            }
        })
    };
    let mut last = Vec::new();
    let mut since = Instant::now();
    loop {
        let auxv = auxv_entries(&read("auxv")?);
        let aux = |key| auxv.iter().find(|&&(k, _)| k == key).map_or(0, |&(_, v)| v);
        if aux(AT_ENTRY) != 0 {
            if aux(AT_BASE) == 0 {
                return Ok(()); // static: nothing is loaded before the entry point
            }
            match loader_consistent(sys, pid, aux(AT_PHDR), aux(AT_PHENT), aux(AT_PHNUM)) {
                Some(true) => return Ok(()),
                Some(false) => {}
                None => {
                    // Heuristic fallback on the maps.
                    let maps = read("maps")?;
                    if maps.is_empty() {
                        return Err(TargetError::NoSuchProcess { pid }); // a zombie
                    }
                    if maps != last {
                        last = maps;
                        since = Instant::now();
                    } else {
                        let text = String::from_utf8_lossy(&last);
                        let maps = parse_maps(&text)
                            .map_err(|source| TargetError::Maps { pid, source })?;
                        let has_libc = maps.iter().any(|m| {
                            let path = m.path.as_deref().unwrap_or("");
                            let file = path.rsplit('/').next().unwrap_or("");
                            file.starts_with("libc.so")
                                || file.starts_with("libc-")
                                || file.starts_with("ld-musl")
                        });
                        let settle = if has_libc { SETTLE } else { SETTLE_NO_LIBC };
                        if since.elapsed() >= settle {
                            return Ok(());
                        }
                    }
                }
            }
        }
        if start.elapsed() >= timeout {
            return Err(TargetError::LoadTimeout { pid, waited_ms: timeout.as_millis() as u64 });
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

/// The (key, value) pairs of an auxiliary vector, up to `AT_NULL`.
pub(super) fn auxv_entries(bytes: &[u8]) -> Vec<(u64, u64)> {
    let word = |b: &[u8]| u64::from_le_bytes(b.try_into().expect("8 bytes"));
    bytes
        .chunks_exact(16)
        .map(|c| (word(&c[..8]), word(&c[8..])))
        .take_while(|&(k, _)| k != 0)
        .collect()
}

/// Whether the dynamic loader of `pid` reports a consistent, non-empty link map through the
/// executable's `DT_DEBUG`; `None` when that cannot be known (no `PT_PHDR`, no `DT_DEBUG`,
/// unreadable memory).
fn loader_consistent(
    sys: &dyn TraceSys,
    pid: i32,
    phdr: u64,
    phent: u64,
    phnum: u64,
) -> Option<bool> {
    let read = |addr: RemoteAddr, len: usize| -> Option<Vec<u8>> {
        let mut buf = vec![0u8; len];
        (sys.read_mem(pid, addr, &mut buf).ok()? == len).then_some(buf)
    };
    let u32_at = |b: &[u8], o: usize| u32::from_le_bytes(b[o..o + 4].try_into().expect("4"));
    let u64_at = |b: &[u8], o: usize| u64::from_le_bytes(b[o..o + 8].try_into().expect("8"));
    if phdr == 0 || phent < 56 || phnum == 0 || phnum > 256 {
        return None;
    }
    let table = read(RemoteAddr(phdr), (phent * phnum) as usize)?;
    let headers: Vec<&[u8]> = table.chunks_exact(phent as usize).collect();
    // p_type @0, p_vaddr @16, p_memsz @40.
    let phdr_vaddr = headers.iter().find(|h| u32_at(h, 0) == PT_PHDR).map(|h| u64_at(h, 16))?;
    // The executable's load bias: where its program headers are, less where it says they are.
    let bias = ImageAddr(phdr_vaddr).bias_to(RemoteAddr(phdr));
    let dynamic = headers.iter().find(|h| u32_at(h, 0) == PT_DYNAMIC)?;
    let size = u64_at(dynamic, 40).min(1 << 16) as usize;
    let entries = read(ImageAddr(u64_at(dynamic, 16)).at_bias(bias), size & !15)?;
    let debug = entries
        .chunks_exact(16)
        .map(|e| (u64_at(e, 0) as i64, u64_at(e, 8)))
        .take_while(|&(tag, _)| tag != 0)
        .find(|&(tag, _)| tag == DT_DEBUG)?
        .1;
    if debug == 0 {
        return Some(false); // the loader has not started loading yet
    }
    // struct r_debug { int r_version; link_map *r_map; ElfW(Addr) r_brk; r_state; ... }
    let r = read(RemoteAddr(debug), 32)?;
    let (version, map, state) = (u32_at(&r, 0), u64_at(&r, 8), u32_at(&r, 24));
    Some(version >= 1 && map != 0 && state == 0)
}

/// A command kerf launched and holds at its entry point: every library is loaded (and their
/// constructors have run) but no instruction of the program itself has executed. Its main
/// thread waits in a loop on a page kerf mapped for it, with the registers it had at the
/// entry saved here; the program's own bytes are as in its file, so the entry (`_start`) can
/// be instrumented like any other function. Call [`EntryHold::release`] once the probes are
/// in: the thread then starts at the entry with exactly those registers, through any probe
/// there.
///
/// Until then the command also has `PR_SET_PDEATHSIG` = SIGKILL: if kerf dies while holding
/// it (even by SIGKILL), the command dies too instead of waiting forever.
#[derive(Debug)]
pub struct EntryHold {
    pub pid: i32,
    pub entry: RemoteAddr,
    /// The page of the hold loop.
    page: RemoteAddr,
    /// The main thread's registers at the entry.
    regs: super::Regs,
}

impl EntryHold {
    /// Start the program at its entry, with every thread stopped (`tr`): the main thread gets
    /// its entry registers back (it must still be in the hold loop), the parent-death signal
    /// is cleared, and the hold page is unmapped. The program runs when `tr` resumes it.
    pub fn release(&self, tr: &mut super::Tracee) -> Result<(), TargetError> {
        let pc = tr.regs(self.pid)?.pc();
        if !(self.page..=self.page + HOLD_LOOP.len() as u64).contains(&pc) {
            return Err(TargetError::HoldLost { pid: self.pid, pc });
        }
        tr.set_regs(self.pid, &self.regs)?;
        let r = tr.syscall_on(
            self.pid,
            libc::SYS_prctl,
            [libc::PR_SET_PDEATHSIG as u64, 0, 0, 0, 0, 0],
        )?;
        if r != 0 {
            return Err(TargetError::Injected {
                pid: self.pid,
                tid: self.pid,
                call: "prctl(PR_SET_PDEATHSIG)",
                errno: -r as i32,
            });
        }
        // Nothing runs there any more: the thread's PC is the entry.
        tr.free(self.page, PAGE)
    }
}

/// Start `argv` traced from its `execve`, run it to the program's entry point (the dynamic
/// loader has then mapped every library), and leave it waiting in a loop of kerf's, untraced:
///
/// 1. The child sets `PR_SET_PDEATHSIG` (SIGKILL) and asks to be traced (`PTRACE_TRACEME`)
///    before `execve`, so it stops with SIGTRAP right after the exec, before the loader's
///    first instruction.
/// 2. An `int3` goes on the entry point (`AT_ENTRY`); the child runs to it, passing on any
///    other signal it receives on the way. The entry's byte is put back and its registers
///    (PC = the entry) are saved.
/// 3. The thread maps a page for the hold loop: its first two bytes become `syscall` for one
///    single-stepped `mmap`, then get their bytes back. Signals that arrive during that step
///    are held back and delivered once the thread waits in the loop.
/// 4. The loop is written to the page, the PC set to it, and kerf detaches: the thread waits
///    there until [`EntryHold::release`].
pub fn spawn_at_entry(
    argv: &[String],
    timeout: Duration,
) -> Result<(Child, EntryHold), TargetError> {
    spawn_at_entry_with(argv, timeout, &mut |_| {})
}

/// [`spawn_at_entry`], calling `started` with the child's pid as soon as it exists (before
/// it reaches its entry point), so that the caller can end it if it must stop meanwhile.
pub fn spawn_at_entry_with(
    argv: &[String],
    timeout: Duration,
    started: &mut dyn FnMut(i32),
) -> Result<(Child, EntryHold), TargetError> {
    let sys = RealTraceSys::new();
    let Some((program, args)) = argv.split_first() else {
        return Err(TargetError::Spawn {
            program: String::new(),
            source: io::Error::new(io::ErrorKind::InvalidInput, "empty command"),
        });
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    // SAFETY: the closure runs in the forked child before exec and makes only
    // async-signal-safe calls.
    unsafe {
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            crate::inherit::restore_in_child()?;
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1
                || libc::ptrace(libc::PTRACE_TRACEME, 0, 0, 0) == -1
            {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child =
        cmd.spawn().map_err(|source| TargetError::Spawn { program: program.clone(), source })?;
    let pid = child.id() as i32;
    started(pid);
    match hold_at_entry(&sys, pid, timeout) {
        Ok(hold) => Ok((child, hold)),
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            Err(e)
        }
    }
}

fn hold_at_entry(
    sys: &dyn TraceSys,
    pid: i32,
    timeout: Duration,
) -> Result<EntryHold, TargetError> {
    let start = Instant::now();
    let ptrace_err =
        |op: &'static str, source: io::Error| TargetError::Ptrace { pid, tid: pid, op, source };
    // Wait for the next stop; a child that exits instead is an error.
    let wait_stop = || -> Result<i32, TargetError> {
        loop {
            if let Some(st) = sys.wait_nohang(pid).map_err(|e| ptrace_err("waitpid", e))? {
                if libc::WIFSTOPPED(st) {
                    return Ok(libc::WSTOPSIG(st));
                }
                return Err(TargetError::ExitedBeforeEntry { pid, status: st });
            }
            if start.elapsed() > timeout {
                return Err(TargetError::LoadTimeout {
                    pid,
                    waited_ms: timeout.as_millis() as u64,
                });
            }
            std::thread::sleep(Duration::from_micros(200));
        }
    };
    // 1. The stop right after execve.
    let sig = wait_stop()?;
    if sig != libc::SIGTRAP {
        return Err(TargetError::NotStoppedAtExec { pid, signal: sig });
    }
    let path = PathBuf::from(format!("/proc/{pid}/auxv"));
    let auxv = auxv_entries(
        &sys.read_bytes(&path).map_err(|e| TargetError::from_io(pid, "read", path, e))?,
    );
    let entry =
        RemoteAddr(auxv.iter().find(|&&(k, _)| k == AT_ENTRY).map(|&(_, v)| v).unwrap_or(0));
    // 2. Run to the entry point.
    let mut original = [0u8; 2];
    mem::read(sys, pid, entry, &mut original)?;
    mem::write(sys, pid, entry, &[INT3])?;
    sys.cont(pid, 0).map_err(|e| ptrace_err("PTRACE_CONT", e))?;
    loop {
        let sig = wait_stop()?;
        if sig == libc::SIGTRAP {
            let r = sys.get_regs(pid).map_err(|e| ptrace_err("PTRACE_GETREGS", e))?;
            if r.pc() == entry + 1 {
                break;
            }
        }
        // Any other signal is the program's own: deliver it.
        let pass = if sig == libc::SIGTRAP { 0 } else { sig };
        sys.cont(pid, pass).map_err(|e| ptrace_err("PTRACE_CONT", e))?;
    }
    mem::write(sys, pid, entry, &original[..1])?;
    let mut regs = sys.get_regs(pid).map_err(|e| ptrace_err("PTRACE_GETREGS", e))?;
    regs.set_pc(entry);
    // 3. The hold loop's page, mapped by the thread itself.
    mem::write(sys, pid, entry, &SYSCALL)?;
    let mut call = regs;
    call.rax = libc::SYS_mmap as u64;
    call.orig_rax = u64::MAX;
    call.rdi = 0;
    call.rsi = PAGE;
    call.rdx = (libc::PROT_READ | libc::PROT_EXEC) as u64;
    call.r10 = (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS) as u64;
    call.r8 = u64::MAX;
    call.r9 = 0;
    let mut held_back = Vec::new();
    const OP: &str = "mmap for the hold loop";
    const STEPS: usize = 16;
    let stepped = (|| {
        for _ in 0..STEPS {
            sys.set_regs(pid, &call).map_err(|e| ptrace_err("PTRACE_SETREGS", e))?;
            sys.single_step(pid, 0).map_err(|e| ptrace_err("PTRACE_SINGLESTEP", e))?;
            match wait_stop()? {
                libc::SIGTRAP => {
                    return sys.get_regs(pid).map_err(|e| ptrace_err("PTRACE_GETREGS", e))
                }
                // Delivered before the step: hold it back, step again.
                sig => held_back.push(sig),
            }
        }
        Err(TargetError::StepInterrupted { pid, tid: pid, op: OP, stops: STEPS })
    })();
    mem::write(sys, pid, entry, &original)?;
    let after = stepped?;
    if after.pc() != entry + 2 {
        return Err(TargetError::StepMissed { pid, tid: pid, op: OP, pc: after.pc() });
    }
    if (after.rax as i64) < 0 {
        let errno = -(after.rax as i64) as i32;
        return Err(TargetError::Injected { pid, tid: pid, call: OP, errno });
    }
    let page = RemoteAddr(after.rax);
    // 4. Wait in the loop, untraced.
    mem::write(sys, pid, page, &HOLD_LOOP)?;
    let mut wait = regs;
    wait.set_pc(page);
    sys.set_regs(pid, &wait).map_err(|e| ptrace_err("PTRACE_SETREGS", e))?;
    let first = held_back.first().copied().unwrap_or(0);
    sys.detach(pid, first).map_err(|e| ptrace_err("PTRACE_DETACH", e))?;
    for &sig in held_back.iter().skip(1) {
        // SAFETY: kill(2) on kerf's own child; no memory is involved.
        unsafe { libc::kill(pid, sig) };
    }
    Ok(EntryHold { pid, entry, page, regs })
}
