//! Each thread's off-CPU time, kept by a BPF program on the `sched_switch` tracepoint in a
//! table the generated code reads (virtual time in a process: `kerf time --virtual`).
//!
//! A process cannot see its own context switches, so the kernel has to count them. `table` is
//! an array map of a `u64` per thread id (as many as `pid_max`), made with `BPF_F_MMAPABLE` so
//! that the target maps it read-only and its generated code loads a thread's word with one
//! instruction (`kerf_codegen::Clock::OffCpu`). A timer's off-CPU total is the word at its
//! stop minus the word at its start, in nanoseconds of the monotonic clock.
//!
//! The program runs at every context switch of the machine, on the *raw* tracepoint
//! (`BPF_RAW_TRACEPOINT_OPEN`, whose arguments are the two tasks), and sets
//! `table[id] = now - sum_exec_runtime` for the task switched out (`prev`, the current task,
//! when it is one of the target's threads) and for the task switched in (`next`, whichever it
//! is): the scheduler's own count of the task's time on the CPU (`se.sum_exec_runtime`, what
//! the thread's `CLOCK_THREAD_CPUTIME_ID` reads), subtracted from the time, is its time off
//! the CPU so far. The offsets of `pid` and `se.sum_exec_runtime` in `task_struct` come from
//! the kernel's BTF. The word's lowest bit says which of the two its last switch was (a
//! nanosecond is nothing to a timer), so that a thread switched out twice with no switch in
//! between, a switch back the kernel did not report, is counted
//! ([`OffCpuClock::unreported_switches`]). A thread's word moves only at its switches, on the
//! CPU doing them, so the thread reads it in order with its own code; kerf stops every thread
//! of the target once the program runs, which sets each one's word before any timer reads it.
//!
//! A word computed from the scheduler's count needs no earlier event, so a switch the program
//! does not see costs nothing for good. The first version kept each thread's switch-out time
//! and added the time since at its switch-in, from a perf event on `sched:sched_switch`: on
//! this project's machines the kernel reports no switch away from some threads of PID 1 (an
//! ftrace of `sched_switch` shows the same gaps, with no BPF involved), so a target thread
//! switched in right after one was never seen coming back, the next switch-out overwrote its
//! time out, and a whole wait (up to 15 ms in the test fixture) read as time it ran. Now such
//! a wait is counted at the thread's next switch: its timer's total is right, though a call
//! that ends before that switch shows the wait in the next call instead. Time the host steals
//! from the guest at a switch is off the CPU too, as the thread's own clock has it.
//!
//! Without BTF, or where raw tracepoints cannot be opened, the old way is the fallback: a perf
//! event (field offsets from its `format` file in tracefs) whose program notes each target
//! thread's switch-out time in `out_at`, a hash map (65536 threads at most), and adds the time
//! since to the thread's word when it is switched in.
//!
//! This uses the raw `bpf` and `perf_event_open` system calls (no libbpf): the programs are a
//! few dozen instructions, assembled here from named helpers. Closing the [`OffCpuClock`]
//! detaches the program; the table lives on while the target has it mapped.
//!
//! Limits: a thread of a forked child (another thread group) is not counted.

use std::ffi::CString;
use std::fmt;
use std::fs;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};

/// What went wrong setting up the off-CPU clock, with the step.
#[derive(Debug)]
pub enum BpfError {
    /// A system call failed (`op` names it and what it was for).
    Call { op: &'static str, source: io::Error },
    /// The verifier refused the program; its log.
    Verifier { source: io::Error, log: String },
    /// A tracefs or procfs file is missing or not as expected.
    File { path: PathBuf, what: String },
}

impl fmt::Display for BpfError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BpfError::Call { op, source } => write!(f, "{op}: {source}"),
            BpfError::Verifier { source, log } => {
                write!(f, "the kernel refused the off-CPU program ({source}): {log}")
            }
            BpfError::File { path, what } => write!(f, "{}: {what}", path.display()),
        }
    }
}

impl std::error::Error for BpfError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BpfError::Call { source, .. } | BpfError::Verifier { source, .. } => Some(source),
            BpfError::File { .. } => None,
        }
    }
}

/// The tracing file system's root: where it is usually mounted, or under debugfs.
const TRACEFS: [&str; 2] = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"];
/// Switched-out threads `out_at` holds.
const OUT_AT_ENTRIES: u32 = 65536;

/// The running off-CPU clock of one process: the table, the program, its attachments.
pub struct OffCpuClock {
    table: OwnedFd,
    /// The table mapped read-only in kerf, for the clocks of threads inside timed code now.
    local: *const u64,
    /// The perf event's map of switch-out times (`None` on the raw tracepoint).
    out_at: Option<OwnedFd>,
    /// The raw tracepoint program's count of switches the kernel did not report.
    unreported: Option<OwnedFd>,
    program: OwnedFd,
    _event: OwnedFd,
    entries: u32,
    /// The process whose threads it counts.
    pid: i32,
}

impl OffCpuClock {
    /// Count the off-CPU time of every thread of process `pid` from now on.
    pub fn start(pid: i32) -> Result<OffCpuClock, BpfError> {
        let entries = pid_max()?;
        let table = map_create(MapType::Array, 4, 8, entries, BPF_F_MMAPABLE, "kerf_offcpu")?;
        // The raw tracepoint where the kernel has BTF and allows it, else the perf event.
        let raw = task_offsets().and_then(|offsets| {
            let hidden = map_create(MapType::Array, 4, 8, 1, 0, "kerf_unreported").ok()?;
            let maps = RawMaps { table: table.as_raw_fd(), unreported: hidden.as_raw_fd() };
            let insns = program_raw(pid, offsets, maps);
            let program = prog_load(&insns, BPF_PROG_TYPE_RAW_TRACEPOINT).ok()?;
            let event = attach_raw(program.as_raw_fd()).ok()?;
            Some((program, event, hidden))
        });
        let (program, event, out_at, unreported) = match raw {
            Some((program, event, hidden)) => (program, event, None, Some(hidden)),
            None => {
                let (id, prev_pid, next_pid) = tracepoint()?;
                let out_at = map_create(MapType::Hash, 4, 8, OUT_AT_ENTRIES, 0, "kerf_out_at")?;
                let fields = Fields { prev_pid, next_pid };
                let insns = program(pid, fields, table.as_raw_fd(), out_at.as_raw_fd());
                let program = prog_load(&insns, BPF_PROG_TYPE_TRACEPOINT)?;
                let event = attach(id, program.as_raw_fd())?;
                (program, event, Some(out_at), None)
            }
        };
        let len = (entries as u64 * 8).next_multiple_of(4096) as usize;
        // SAFETY: mapping the table read-only; the result is checked, and unmapped on drop.
        let local = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                table.as_raw_fd(),
                0,
            )
        };
        if local == libc::MAP_FAILED {
            let source = io::Error::last_os_error();
            return Err(BpfError::Call { op: "mmap of the off-CPU table", source });
        }
        let local = local as *const u64;
        Ok(OffCpuClock { table, local, out_at, unreported, program, _event: event, entries, pid })
    }

    /// Thread `tid`'s off-CPU clock now, in nanoseconds. On the raw tracepoint: the monotonic
    /// clock minus the thread's time on the CPU (`/proc/PID/task/TID/schedstat`), what the
    /// program would write at a switch now. On the perf event: its word, and when it is off
    /// the CPU at this moment, the time since it went off (which the program adds only when
    /// the thread comes back). `None` for an id beyond the table or a thread gone.
    pub fn now(&self, tid: i32) -> Option<u64> {
        let k = u32::try_from(tid).ok().filter(|&k| k < self.entries)?;
        let Some(out_at) = &self.out_at else {
            let path = format!("/proc/{}/task/{tid}/schedstat", self.pid);
            let text = fs::read_to_string(path).ok()?;
            let ran: u64 = text.split_whitespace().next()?.parse().ok()?;
            return Some(monotonic_ns().saturating_sub(ran));
        };
        // SAFETY: a word inside the mapping (k < entries); the program writes it, so it is
        // read volatile, whole.
        let word = unsafe { std::ptr::read_volatile(self.local.add(k as usize)) };
        let pending = lookup_u64(out_at, k).map_or(0, |out| monotonic_ns().saturating_sub(out));
        Some(word + pending)
    }

    /// What the program is attached to: `raw tracepoint sched_switch`, or `perf event
    /// sched:sched_switch` (the fallback, which can miss switches: see the module comment).
    pub fn attached_to(&self) -> &'static str {
        if self.out_at.is_none() {
            "raw tracepoint sched_switch"
        } else {
            "perf event sched:sched_switch"
        }
    }

    /// Times a thread of the target was switched out with no switch back in reported since
    /// its last switch-out (the kernel reports none for switches away from some tasks): each
    /// time, the thread's last time off the CPU was counted at this switch-out, after any
    /// timer that ended in between. `None` on the perf event, which cannot tell.
    pub fn unreported_switches(&self) -> Option<u64> {
        lookup_u64(self.unreported.as_ref()?, 0)
    }

    /// Context switches the program did not see because another BPF program (or a `bpf`
    /// system call, which holds the same per-CPU guard) was running on that CPU: the kernel's
    /// `recursion_misses` of the program. On the raw tracepoint a missed switch of a target
    /// thread delays the count of its time off the CPU to its next switch, as an unreported
    /// one does; on the perf event it loses it. `None` where the kernel does not say (before
    /// 5.12).
    pub fn missed_switches(&self) -> Option<u64> {
        // struct bpf_prog_info up to and with recursion_misses (its bytes 208..216).
        let mut info = [0u8; 216];
        let mut a = Attr::new();
        // union bpf_attr for BPF_OBJ_GET_INFO_BY_FD: bpf_fd, info_len (u32), info (pointer);
        // the kernel writes back how much of the structure it filled.
        a.u32(0, self.program.as_raw_fd() as u32)
            .u32(4, info.len() as u32)
            .u64(8, info.as_mut_ptr() as u64);
        bpf_call(BPF_OBJ_GET_INFO_BY_FD, &mut a).ok()?;
        let filled = u32::from_ne_bytes(a.0[4..8].try_into().ok()?) as usize;
        (filled >= 216).then(|| u64::from_ne_bytes(info[208..216].try_into().unwrap()))
    }

    /// The table's descriptor (to be mapped read-only and shared: [`OffCpuClock::table_len`]
    /// bytes).
    pub fn table_fd(&self) -> RawFd {
        self.table.as_raw_fd()
    }

    /// Bytes of the table: a `u64` per thread id, whole pages.
    pub fn table_len(&self) -> u64 {
        (self.entries as u64 * 8).next_multiple_of(4096)
    }
}

// SAFETY: `local` is a read-only mapping the clock owns until it is dropped; reading it from
// any thread is what it is for.
unsafe impl Send for OffCpuClock {}
// SAFETY: as for Send: `&self` methods only read the mapping and make system calls.
unsafe impl Sync for OffCpuClock {}

impl Drop for OffCpuClock {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `start`, which nothing uses after this.
        unsafe { libc::munmap(self.local as *mut libc::c_void, self.table_len() as usize) };
    }
}

/// The monotonic clock, which `bpf_ktime_get_ns` reads, in nanoseconds.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The `u64` at `key` of map `map` (`None`: no such entry, or the call failed).
fn lookup_u64(map: &OwnedFd, key: u32) -> Option<u64> {
    let mut value = 0u64;
    // union bpf_attr for BPF_MAP_LOOKUP_ELEM: map_fd (u32, padded), key, value (u64
    // pointers), flags.
    let mut a = Attr::new();
    a.u32(0, map.as_raw_fd() as u32)
        .u64(8, &key as *const u32 as u64)
        .u64(16, &mut value as *mut u64 as u64);
    bpf_call(BPF_MAP_LOOKUP_ELEM, &mut a).ok()?;
    Some(value)
}

/// The offsets of a thread's id and CPU time in the kernel's `task_struct`, from its BTF.
fn task_offsets() -> Option<TaskOffsets> {
    let btf = fs::read("/sys/kernel/btf/vmlinux").ok()?;
    let at = |s: &str, m: &str| kerf_analysis::image::btf::member_offset(&btf, s, m);
    let ran = at("task_struct", "se")? + at("sched_entity", "sum_exec_runtime")?;
    Some(TaskOffsets { pid: at("task_struct", "pid")?, ran })
}

/// The `sched_switch` tracepoint: its id, and the offsets of `prev_pid` and `next_pid` in its
/// record.
fn tracepoint() -> Result<(u64, i16, i16), BpfError> {
    let find = || TRACEFS.iter().map(Path::new).find(|p| p.join("events").is_dir());
    // Not mounted (some machines boot without it): mount it where the kernel expects it, as
    // perf and trace-cmd do; this needs root, which loading BPF programs needs anyway.
    let root =
        find().or_else(|| mount_tracefs(TRACEFS[0]).then(find).flatten()).ok_or_else(|| {
            BpfError::File {
                path: PathBuf::from(TRACEFS[0]),
                what: "tracefs is not mounted, and mounting it failed (mount -t tracefs nodev \
                   /sys/kernel/tracing)"
                    .into(),
            }
        })?;
    let dir = root.join("events/sched/sched_switch");
    let read = |name: &str| {
        let path = dir.join(name);
        fs::read_to_string(&path).map_err(|e| BpfError::File { path, what: e.to_string() })
    };
    let id_path = dir.join("id");
    let id = read("id")?
        .trim()
        .parse::<u64>()
        .map_err(|e| BpfError::File { path: id_path, what: format!("not a tracepoint id: {e}") })?;
    let format = read("format")?;
    let field = |name: &str| {
        field_offset(&format, name).ok_or_else(|| BpfError::File {
            path: dir.join("format"),
            what: format!("no 4-byte field {name}"),
        })
    };
    Ok((id, field("prev_pid")?, field("next_pid")?))
}

/// Mount tracefs at `dir` (an existing directory); whether it worked.
fn mount_tracefs(dir: &str) -> bool {
    let (Ok(src), Ok(target), Ok(fs)) =
        (CString::new("nodev"), CString::new(dir), CString::new("tracefs"))
    else {
        return false;
    };
    // SAFETY: every pointer is a NUL-terminated string that outlives the call; no data.
    unsafe { libc::mount(src.as_ptr(), target.as_ptr(), fs.as_ptr(), 0, std::ptr::null()) == 0 }
}

/// The offset of 4-byte field `name` in a tracepoint's `format` text, whose lines read
/// `field:pid_t prev_pid;` then `offset:24;`, `size:4;` and `signed:1;`, tab-separated.
fn field_offset(format: &str, name: &str) -> Option<i16> {
    format.lines().find_map(|line| {
        let mut parts = line.trim().split(';').map(str::trim);
        let decl = parts.next()?.strip_prefix("field:")?;
        if decl.split_whitespace().last()? != name {
            return None;
        }
        let offset = parts.next()?.strip_prefix("offset:")?.parse().ok()?;
        let size: u32 = parts.next()?.strip_prefix("size:")?.parse().ok()?;
        (size == 4).then_some(offset)
    })
}

/// The largest thread id plus one (`/proc/sys/kernel/pid_max`): how many words a table by thread
/// id holds.
pub fn pid_max() -> Result<u32, BpfError> {
    let path = PathBuf::from("/proc/sys/kernel/pid_max");
    let text = fs::read_to_string(&path)
        .map_err(|e| BpfError::File { path: path.clone(), what: e.to_string() })?;
    text.trim().parse().map_err(|e| BpfError::File { path, what: format!("{e}") })
}

// ---- the program ----

/// Where `task_struct` keeps a thread's id and its time on the CPU (the scheduler's
/// `se.sum_exec_runtime`, nanoseconds), from the kernel's BTF.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct TaskOffsets {
    pid: u32,
    ran: u32,
}

/// The perf trace event's record: where it has the two threads' ids.
#[derive(Clone, Copy, Debug)]
struct Fields {
    prev_pid: i16,
    next_pid: i16,
}

/// One BPF instruction (`struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

// Instruction classes, sizes, sources and operations (linux/bpf.h, linux/bpf_common.h).
const LDX: u8 = 0x01;
const STX: u8 = 0x03;
const LD: u8 = 0x00;
const ALU64: u8 = 0x07;
const JMP: u8 = 0x05;
const MEM: u8 = 0x60;
const IMM: u8 = 0x00;
const W: u8 = 0x00;
const DW: u8 = 0x18;
const K: u8 = 0x00;
const X: u8 = 0x08;
const ADD: u8 = 0x00;
const SUB: u8 = 0x10;
const OR: u8 = 0x40;
const AND: u8 = 0x50;
const RSH: u8 = 0x70;
const MOV: u8 = 0xb0;
const JEQ: u8 = 0x10;
const JNE: u8 = 0x50;
const CALL: u8 = 0x80;
const EXIT: u8 = 0x90;
const PSEUDO_MAP_FD: u8 = 1;
/// `BPF_ATOMIC` and its `BPF_ADD` (no fetch).
const ATOMIC: u8 = 0xc0;
const ATOMIC_ADD: i32 = 0x00;

// Helpers (enum bpf_func_id).
const MAP_LOOKUP_ELEM: i32 = 1;
const MAP_UPDATE_ELEM: i32 = 2;
const MAP_DELETE_ELEM: i32 = 3;
const KTIME_GET_NS: i32 = 5;
const GET_CURRENT_PID_TGID: i32 = 14;
const PROBE_READ_KERNEL: i32 = 113;

// Registers: r0 result, r1-r5 arguments (clobbered by calls), r6-r9 kept, r10 frame pointer.
const R0: u8 = 0;
const R1: u8 = 1;
const R2: u8 = 2;
const R3: u8 = 3;
const R4: u8 = 4;
const R6: u8 = 6;
const R7: u8 = 7;
const R8: u8 = 8;
const FP: u8 = 10;

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn { code, regs: (src << 4) | dst, off, imm }
}
fn mov_reg(dst: u8, src: u8) -> Insn {
    insn(ALU64 | MOV | X, dst, src, 0, 0)
}
fn mov_imm(dst: u8, imm: i32) -> Insn {
    insn(ALU64 | MOV | K, dst, 0, 0, imm)
}
fn alu_imm(op: u8, dst: u8, imm: i32) -> Insn {
    insn(ALU64 | op | K, dst, 0, 0, imm)
}
fn alu_reg(op: u8, dst: u8, src: u8) -> Insn {
    insn(ALU64 | op | X, dst, src, 0, 0)
}
fn load(size: u8, dst: u8, src: u8, off: i16) -> Insn {
    insn(LDX | MEM | size, dst, src, off, 0)
}
fn store(size: u8, dst: u8, off: i16, src: u8) -> Insn {
    insn(STX | MEM | size, dst, src, off, 0)
}
fn call(helper: i32) -> Insn {
    insn(JMP | CALL, 0, 0, 0, helper)
}
/// Jump `off` instructions ahead when `dst op imm`.
fn jump_imm(op: u8, dst: u8, imm: i32, off: i16) -> Insn {
    insn(JMP | op | K, dst, 0, off, imm)
}
/// `dst` = the map whose descriptor is `fd` (two instruction slots).
fn map_fd(dst: u8, fd: RawFd) -> [Insn; 2] {
    [insn(LD | IMM | DW, dst, PSEUDO_MAP_FD, 0, fd), insn(0, 0, 0, 0, 0)]
}

/// Where the program keeps the key (a thread id) and the value of a map update on its stack.
const KEY: i16 = -4;
const VALUE: i16 = -16;

/// The raw tracepoint's program (see the module comment): for `prev` (the current task, its
/// arguments' second) when it is one of process `pid`'s threads, and for `next` (the third),
/// whatever process it belongs to, `table[id] = now - sum_exec_runtime`.
fn program_raw(pid: i32, off: TaskOffsets, maps: RawMaps) -> Vec<Insn> {
    let mut p = Vec::new();
    // r0 = the address of `map[key]` (the key on the stack), 0 for none.
    let lookup = |p: &mut Vec<Insn>, map: RawFd| {
        p.extend(map_fd(R1, map));
        p.push(mov_reg(R2, FP));
        p.push(alu_imm(ADD, R2, KEY as i32));
        p.push(call(MAP_LOOKUP_ELEM));
    };
    // `size` bytes at `field` of the task that argument `arg` points to, onto the stack at
    // `to`; a failed read jumps (recorded in `fails`).
    let read_task =
        |p: &mut Vec<Insn>, arg: i16, field: u32, to: i16, size: i32, fails: &mut Vec<usize>| {
            p.push(load(DW, R3, R6, arg));
            p.push(alu_imm(ADD, R3, field as i32));
            p.push(mov_reg(R1, FP));
            p.push(alu_imm(ADD, R1, to as i32));
            p.push(mov_imm(R2, size));
            p.push(call(PROBE_READ_KERNEL));
            fails.push(p.len());
            p.push(jump_imm(JNE, R0, 0, 0));
        };
    // A jump taken when r0 is 0 (a lookup found nothing), recorded in `skips`.
    let if_none = |p: &mut Vec<Insn>, skips: &mut Vec<usize>| {
        skips.push(p.len());
        p.push(jump_imm(JEQ, R0, 0, 0));
    };
    // `table[key] = now - task's sum_exec_runtime` for the task argument `arg` points to (the
    // key on the stack already), its lowest bit replaced by `state` (a nanosecond is nothing
    // to a timer); a failed read or lookup jumps (recorded in `fails`). r1 = the old word.
    let set_word = |p: &mut Vec<Insn>, arg: i16, state: i32, fails: &mut Vec<usize>| {
        read_task(p, arg, off.ran, VALUE, 8, fails);
        p.push(call(KTIME_GET_NS));
        p.push(load(DW, R1, FP, VALUE));
        p.push(alu_reg(SUB, R0, R1));
        p.push(alu_imm(AND, R0, !1));
        p.push(alu_imm(OR, R0, state));
        p.push(mov_reg(R8, R0));
        lookup(p, maps.table);
        if_none(p, fails);
        p.push(load(DW, R1, R0, 0));
        p.push(store(DW, R0, 0, R8));
    };
    p.push(mov_reg(R6, R1));
    // 1. prev, when it is one of the target's threads (its id is the low half).
    p.push(call(GET_CURRENT_PID_TGID));
    p.push(mov_reg(R7, R0));
    p.push(alu_imm(RSH, R0, 32));
    let mut to_next = vec![p.len()];
    p.push(jump_imm(JNE, R0, pid, 0));
    p.push(store(W, FP, KEY, R7));
    set_word(&mut p, 8, SWITCHED_OUT, &mut to_next);
    // Its word said switched out already: the kernel did not report the switch that brought
    // it back (its time off then is counted now, late). unreported[0] += 1, atomically (the
    // target's threads switch on every CPU).
    p.push(alu_imm(AND, R1, 1));
    to_next.push(p.len());
    p.push(jump_imm(JNE, R1, SWITCHED_OUT, 0));
    p.push(mov_imm(R1, 0));
    p.push(store(W, FP, KEY, R1));
    lookup(&mut p, maps.unreported);
    if_none(&mut p, &mut to_next);
    p.push(mov_imm(R1, 1));
    p.push(insn(STX | ATOMIC | DW, R0, R1, 0, ATOMIC_ADD));
    land_here(&mut p, to_next);
    // 2. next: its id read from its task_struct.
    let mut to_exit = Vec::new();
    read_task(&mut p, 16, off.pid, KEY, 4, &mut to_exit);
    set_word(&mut p, 16, 0, &mut to_exit);
    land_here(&mut p, to_exit);
    p.push(mov_imm(R0, 0));
    p.push(insn(JMP | EXIT, 0, 0, 0, 0));
    p
}

/// Point the jumps at indices `jumps` of `p` at the instruction pushed next.
fn land_here(p: &mut [Insn], jumps: Vec<usize>) {
    let here = p.len();
    for j in jumps {
        p[j].off = (here - j - 1) as i16;
    }
}

/// The raw tracepoint program's maps.
#[derive(Clone, Copy, Debug)]
struct RawMaps {
    /// The words of the module comment.
    table: RawFd,
    /// One word: switch-outs of the target's threads whose switch back in was not reported.
    unreported: RawFd,
}

/// The lowest bit of a thread's word on the raw tracepoint: its last switch the program saw
/// was a switch-out (0: a switch-in, or none yet).
const SWITCHED_OUT: i32 = 1;

/// The perf event's program (the fallback of the module comment) for process `pid`: at a
/// switch-out of one of its threads, `out_at[prev_pid] = now`; at a switch-in with an entry
/// there, the entry taken out and `table[next_pid] += now - out_at[next_pid]`.
fn program(pid: i32, f: Fields, table: RawFd, out_at: RawFd) -> Vec<Insn> {
    let mut p = Vec::new();
    let key_arg = |p: &mut Vec<Insn>| {
        p.push(mov_reg(R2, FP));
        p.push(alu_imm(ADD, R2, KEY as i32));
    };
    p.push(mov_reg(R6, R1));
    // 1. prev is one of the target's threads: out_at[prev_pid] = now.
    p.push(call(GET_CURRENT_PID_TGID));
    p.push(alu_imm(RSH, R0, 32));
    let skip_out = p.len();
    p.push(jump_imm(JNE, R0, pid, 0));
    p.push(load(W, R1, R6, f.prev_pid));
    p.push(store(W, FP, KEY, R1));
    p.push(call(KTIME_GET_NS));
    p.push(store(DW, FP, VALUE, R0));
    p.extend(map_fd(R1, out_at));
    key_arg(&mut p);
    p.push(mov_reg(R3, FP));
    p.push(alu_imm(ADD, R3, VALUE as i32));
    p.push(mov_imm(R4, 0));
    p.push(call(MAP_UPDATE_ELEM));
    let switch_in = p.len();
    p[skip_out].off = (switch_in - skip_out - 1) as i16;
    // 2. next was switched out while counted: table[next_pid] += now - out_at[next_pid].
    p.push(load(W, R1, R6, f.next_pid));
    p.push(store(W, FP, KEY, R1));
    p.extend(map_fd(R1, out_at));
    key_arg(&mut p);
    p.push(call(MAP_LOOKUP_ELEM));
    let mut to_exit = vec![p.len()];
    p.push(jump_imm(JEQ, R0, 0, 0));
    p.push(load(DW, R7, R0, 0));
    p.extend(map_fd(R1, out_at));
    key_arg(&mut p);
    p.push(call(MAP_DELETE_ELEM));
    p.push(call(KTIME_GET_NS));
    p.push(mov_reg(R8, R0));
    p.push(alu_reg(SUB, R8, R7));
    p.extend(map_fd(R1, table));
    key_arg(&mut p);
    p.push(call(MAP_LOOKUP_ELEM));
    to_exit.push(p.len());
    p.push(jump_imm(JEQ, R0, 0, 0));
    // Only this CPU writes the word now (next is not running anywhere): a plain add.
    p.push(load(DW, R1, R0, 0));
    p.push(alu_reg(ADD, R1, R8));
    p.push(store(DW, R0, 0, R1));
    let exit = p.len();
    for j in to_exit {
        p[j].off = (exit - j - 1) as i16;
    }
    p.push(mov_imm(R0, 0));
    p.push(insn(JMP | EXIT, 0, 0, 0, 0));
    p
}

// ---- system calls ----

const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_LOOKUP_ELEM: i32 = 1;
const BPF_PROG_LOAD: i32 = 5;
const BPF_OBJ_GET_INFO_BY_FD: i32 = 15;
const BPF_F_MMAPABLE: u32 = 1 << 10;
const BPF_PROG_TYPE_TRACEPOINT: u32 = 5;
const BPF_PROG_TYPE_RAW_TRACEPOINT: u32 = 17;
const BPF_RAW_TRACEPOINT_OPEN: i32 = 17;
const PERF_TYPE_TRACEPOINT: u32 = 2;
const PERF_EVENT_IOC_ENABLE: u64 = 0x2400;
const PERF_EVENT_IOC_SET_BPF: u64 = 0x4004_2408;
const PERF_FLAG_FD_CLOEXEC: u64 = 1 << 3;

#[derive(Clone, Copy)]
enum MapType {
    Hash = 1,
    Array = 2,
}

/// A `bpf` system call's attribute block: zeroed, fields put at their offsets.
struct Attr([u8; 128]);

impl Attr {
    fn new() -> Attr {
        Attr([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Attr {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Attr {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn name(&mut self, off: usize, name: &str) -> &mut Attr {
        let n = name.len().min(15);
        self.0[off..off + n].copy_from_slice(&name.as_bytes()[..n]);
        self
    }
}

/// `bpf(cmd, attr)`, returning the new descriptor.
fn bpf(cmd: i32, attr: &mut Attr) -> io::Result<OwnedFd> {
    let r = bpf_call(cmd, attr)?;
    // SAFETY: a descriptor the kernel just made for us.
    Ok(unsafe { OwnedFd::from_raw_fd(r as RawFd) })
}

/// `bpf(cmd, attr)`, returning its result.
fn bpf_call(cmd: i32, attr: &mut Attr) -> io::Result<i64> {
    // SAFETY: `attr` is a zero-filled block of the size passed, laid out as the kernel's
    // `union bpf_attr` for `cmd`; pointers in it point at live buffers of the caller.
    let r = unsafe {
        libc::syscall(libc::SYS_bpf, cmd, attr.0.as_mut_ptr(), attr.0.len() as libc::c_uint)
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(r)
}

fn map_create(
    kind: MapType,
    key: u32,
    value: u32,
    entries: u32,
    flags: u32,
    name: &str,
) -> Result<OwnedFd, BpfError> {
    // union bpf_attr for BPF_MAP_CREATE: map_type, key_size, value_size, max_entries,
    // map_flags, inner_map_fd, numa_node (u32 each), then map_name[16].
    let mut a = Attr::new();
    a.u32(0, kind as u32).u32(4, key).u32(8, value).u32(12, entries).u32(16, flags).name(28, name);
    bpf(BPF_MAP_CREATE, &mut a)
        .map_err(|source| BpfError::Call { op: "bpf(BPF_MAP_CREATE) for the off-CPU maps", source })
}

fn prog_load(insns: &[Insn], kind: u32) -> Result<OwnedFd, BpfError> {
    let license = c"GPL";
    let mut log = vec![0u8; 64 * 1024];
    // union bpf_attr for BPF_PROG_LOAD: prog_type, insn_cnt, insns, license, log_level,
    // log_size, log_buf, kern_version, prog_flags, prog_name[16].
    let mut a = Attr::new();
    a.u32(0, kind)
        .u32(4, insns.len() as u32)
        .u64(8, insns.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .u32(24, 1)
        .u32(28, log.len() as u32)
        .u64(32, log.as_mut_ptr() as u64)
        .name(48, "kerf_offcpu");
    bpf(BPF_PROG_LOAD, &mut a).map_err(|source| {
        let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
        let text = String::from_utf8_lossy(&log[..end]);
        let tail: Vec<&str> = text.lines().rev().take(6).collect();
        let log = tail.into_iter().rev().collect::<Vec<_>>().join(" / ");
        if log.is_empty() {
            BpfError::Call { op: "bpf(BPF_PROG_LOAD) of the off-CPU program", source }
        } else {
            BpfError::Verifier { source, log }
        }
    })
}

/// `program` attached to the raw tracepoint `sched_switch`: the link's descriptor.
fn attach_raw(program: RawFd) -> Result<OwnedFd, BpfError> {
    let name = c"sched_switch";
    // union bpf_attr for BPF_RAW_TRACEPOINT_OPEN: name (pointer), prog_fd (u32).
    let mut a = Attr::new();
    a.u64(0, name.as_ptr() as u64).u32(8, program as u32);
    bpf(BPF_RAW_TRACEPOINT_OPEN, &mut a).map_err(|source| BpfError::Call {
        op: "bpf(BPF_RAW_TRACEPOINT_OPEN) of sched_switch",
        source,
    })
}

/// A tracepoint event for tracepoint `id`, running `program`, enabled. The program is the
/// tracepoint's, not the event's: it runs at every CPU's hits (the event is opened on CPU 0
/// because a tracepoint event names a CPU or a task).
fn attach(id: u64, program: RawFd) -> Result<OwnedFd, BpfError> {
    // struct perf_event_attr: type, size (u32), config, sample_period (u64); the rest 0.
    let mut a = Attr::new();
    a.u32(0, PERF_TYPE_TRACEPOINT).u32(4, 128).u64(8, id).u64(16, 1);
    // SAFETY: `a` is a zero-filled perf_event_attr of the size it declares.
    let r = unsafe {
        libc::syscall(libc::SYS_perf_event_open, a.0.as_ptr(), -1, 0, -1, PERF_FLAG_FD_CLOEXEC)
    };
    if r < 0 {
        let source = io::Error::last_os_error();
        return Err(BpfError::Call { op: "perf_event_open of sched:sched_switch", source });
    }
    // SAFETY: a descriptor the kernel just made for us.
    let event = unsafe { OwnedFd::from_raw_fd(r as RawFd) };
    for (req, arg, op) in [
        (PERF_EVENT_IOC_SET_BPF, program as u64, "ioctl(PERF_EVENT_IOC_SET_BPF)"),
        (PERF_EVENT_IOC_ENABLE, 0, "ioctl(PERF_EVENT_IOC_ENABLE)"),
    ] {
        // SAFETY: an ioctl on our perf event with an integer argument.
        if unsafe { libc::ioctl(event.as_raw_fd(), req as _, arg) } != 0 {
            return Err(BpfError::Call { op, source: io::Error::last_os_error() });
        }
    }
    Ok(event)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_offsets_come_from_the_format_text() {
        let format = "name: sched_switch\nID: 316\nformat:\n\
            \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
            \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
            \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
            \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n";
        assert_eq!(field_offset(format, "prev_pid"), Some(24));
        assert_eq!(field_offset(format, "next_pid"), Some(56));
        assert_eq!(field_offset(format, "prev_comm"), None, "not 4 bytes");
        assert_eq!(field_offset(format, "pid"), None);
    }

    #[test]
    fn the_programs_jumps_land_on_the_switch_in_half_and_the_exit() {
        // Where each jump lands, as (what is there, how many land there).
        let landings = |p: &[Insn]| {
            let exit = p.len() - 2;
            assert_eq!(p[exit + 1].code, JMP | EXIT);
            let mut at: Vec<(Option<Insn>, usize)> = Vec::new();
            for (k, i) in p.iter().enumerate() {
                if i.code == JMP | JNE | K || i.code == JMP | JEQ | K {
                    let to = k + 1 + i.off as usize;
                    let what = (to != exit).then(|| p[to]);
                    match at.iter_mut().find(|(w, _)| *w == what) {
                        Some(e) => e.1 += 1,
                        None => at.push((what, 1)),
                    }
                }
            }
            at
        };
        // The perf event's: another process's thread skips to where next's id is read; no
        // entry for next, or no word, ends.
        let p = program(42, Fields { prev_pid: 24, next_pid: 56 }, 7, 8);
        assert_eq!(landings(&p), [(Some(load(W, R1, R6, 56)), 1), (None, 2)]);
        assert_eq!(p.iter().find(|i| i.code == JMP | JNE | K).unwrap().imm, 42);
        // The raw tracepoint's: another process's thread, prev's word failing (its read, its
        // lookup), prev not switched out last, or no counter: on to next's part (the load of
        // the third argument); next's id, read, or its word failing, ends.
        let maps = RawMaps { table: 7, unreported: 10 };
        let p = program_raw(42, TaskOffsets { pid: 1234, ran: 200 }, maps);
        let at = landings(&p);
        assert_eq!(at, [(Some(load(DW, R3, R6, 16)), 5), (None, 3)], "{at:?}");
        assert_eq!(p.iter().find(|i| i.code == JMP | JNE | K).unwrap().imm, 42);
        // The counter's add is atomic.
        assert!(p.iter().any(|i| i.code == STX | ATOMIC | DW && i.imm == ATOMIC_ADD));
    }

    /// The kernel itself: a thread of this process that sleeps 30 ms has its word advanced by
    /// about that (the machine must allow BPF on tracepoints, as kerf's test machines do).
    #[test]
    fn a_sleeping_threads_word_advances_by_its_sleep() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("skipped: BPF needs root");
            return;
        }
        let clock = OffCpuClock::start(std::process::id() as i32).expect("off-CPU clock");
        let len = clock.table_len() as usize;
        // SAFETY: mapping the table read-only, checked, unmapped below.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                clock.table_fd(),
                0,
            )
        };
        assert_ne!(base, libc::MAP_FAILED);
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() } as usize;
        // SAFETY: the word of a thread id below pid_max, inside the mapping.
        let word = || unsafe { std::ptr::read_volatile((base as *const u64).add(tid)) };
        // A thread's word is set at its first switch once the program runs (kerf stops every
        // thread of its target after starting the clock, which does it).
        std::thread::sleep(std::time::Duration::from_millis(1));
        let before = word();
        std::thread::sleep(std::time::Duration::from_millis(30));
        let slept = word() - before;
        // Running: the clock is the word (on the raw tracepoint, give or take the time since
        // the thread came on the CPU that the scheduler has not counted as its own).
        let (now, w) = (clock.now(tid as i32).unwrap(), word());
        assert!(now.abs_diff(w) < 2_000_000, "running: clock {now}, word {w}");
        // No other BPF program runs here: the kernel says the program saw every switch.
        assert_eq!(clock.missed_switches(), Some(0));
        // With the kernel's BTF, on the raw tracepoint (the perf event loses switches).
        if std::path::Path::new("/sys/kernel/btf/vmlinux").exists() {
            assert_eq!(clock.attached_to(), "raw tracepoint sched_switch");
        }
        // A thread asleep now: its clock counts the sleep so far, before its word has it.
        let (tx, rx) = std::sync::mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() }).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        });
        let other = rx.recv().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let asleep_from = clock.now(other).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(100));
        let asleep = clock.now(other).unwrap() - asleep_from;
        sleeper.join().unwrap();
        assert!((90_000_000..200_000_000).contains(&asleep), "asleep 100 ms: {asleep} ns");
        // Spinning: the word advances only by the time the thread was switched out meanwhile
        // (on a busy machine a spinning thread is preempted too): wall time minus its own CPU
        // time.
        let cpu = || {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: writes the calling thread's CPU clock into `ts`.
            unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
            ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
        };
        // A switch between the last read of the word and the reads of the clocks counts in
        // one and not the other (in the suite's run beside two busy loops: 1,322 ns counted,
        // 5 ms on the CPU of more than 7 ms): up to three tries, each of which must agree
        // within 2 ms for the test to pass on it. A word that counted run time would be off by
        // the whole 5 ms in every try.
        let spin = || {
            let (busy, ran_from) = (word(), cpu());
            let t = std::time::Instant::now();
            while t.elapsed() < std::time::Duration::from_millis(5) {}
            // (Signed: the word may step back by the microseconds the scheduler had not yet
            // counted as run time when it was read.)
            let spun = word() as i64 - busy as i64;
            let (ran, wall) = (cpu() - ran_from, t.elapsed().as_nanos() as i64);
            (spun, ran, wall - ran as i64)
        };
        let tries: Vec<(i64, u64, i64)> = (0..3).map(|_| spin()).collect();
        // SAFETY: the mapping made above.
        unsafe { libc::munmap(base, len) };
        assert!((29_000_000..60_000_000).contains(&slept), "slept 30 ms, counted {slept} ns");
        assert!(
            tries.iter().any(|&(spun, _, off)| spun.abs_diff(off) < 2_000_000),
            "spun 5 ms three times: (counted, on the CPU, off it) ns {tries:?}"
        );
    }
}
