//! What a thread's seccomp filters answer to a system call kerf would make in it: the
//! classic-BPF programs a thread runs at each system call (read from the kernel with
//! `PTRACE_SECCOMP_GET_FILTER`), evaluated here on the call's `seccomp_data` exactly as the
//! kernel would, and the verdict of the whole stack. Pure: no system calls, tested on bytes.
//!
//! kerf makes system calls in its targets in two ways: injected while the threads are stopped
//! (mmap, munmap, ... in [`crate::ptrace::Tracee::syscall_on`]) and from the code it puts in
//! (the JIT's miss path waits on a futex; a full call-trace ring's writer yields and sleeps). A filter may kill
//! the process, or send it SIGSYS, for a call it does not expect: kerf asks first and refuses,
//! or does without, rather than harm the program.

/// `AUDIT_ARCH_X86_64`: what `seccomp_data.arch` holds for a 64-bit system call.
pub const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// One classic-BPF instruction (`struct sock_filter`, 8 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub code: u16,
    pub jt: u8,
    pub jf: u8,
    pub k: u32,
}

impl Insn {
    /// Parse `struct sock_filter`s from the bytes `PTRACE_SECCOMP_GET_FILTER` wrote.
    pub fn parse(bytes: &[u8]) -> Vec<Insn> {
        (bytes.chunks_exact(8))
            .map(|b| Insn {
                code: u16::from_le_bytes([b[0], b[1]]),
                jt: b[2],
                jf: b[3],
                k: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            })
            .collect()
    }
}

/// The `struct seccomp_data` a filter reads: the call as the kernel presents it.
#[derive(Clone, Copy, Debug)]
pub struct Call {
    pub nr: u32,
    pub ip: u64,
    pub args: [u64; 6],
}

impl Call {
    /// The 64-byte `seccomp_data` of this call (nr, arch, instruction_pointer, args).
    fn data(&self) -> [u8; 64] {
        let mut d = [0u8; 64];
        d[0..4].copy_from_slice(&self.nr.to_le_bytes());
        d[4..8].copy_from_slice(&AUDIT_ARCH_X86_64.to_le_bytes());
        d[8..16].copy_from_slice(&self.ip.to_le_bytes());
        for (i, a) in self.args.iter().enumerate() {
            d[16 + 8 * i..24 + 8 * i].copy_from_slice(&a.to_le_bytes());
        }
        d
    }
}

/// What the filters decide, in the kernel's order of precedence (the most severe action of
/// all the thread's filters wins).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Action {
    Allow,
    Log,
    /// A tracer is told (without one, or one that did not ask, the call fails with ENOSYS).
    Trace,
    /// A supervisor process is asked, and answers for the call.
    UserNotif,
    /// The call fails with this errno.
    Errno(u16),
    /// SIGSYS to the thread.
    Trap,
    KillThread,
    KillProcess,
    /// The filters could not be read (`PTRACE_SECCOMP_GET_FILTER` needs CAP_SYS_ADMIN):
    /// taken as the worst.
    Unknown,
}

impl Action {
    /// Whether the call runs as if there were no filter.
    pub fn allows(self) -> bool {
        matches!(self, Action::Allow | Action::Log)
    }

    fn rank(self) -> u8 {
        match self {
            Action::Allow => 0,
            Action::Log => 1,
            Action::Trace => 2,
            Action::UserNotif => 3,
            Action::Errno(_) => 4,
            Action::Trap => 5,
            Action::KillThread => 6,
            Action::KillProcess => 7,
            Action::Unknown => 8,
        }
    }

    /// The action of a filter's return value (`SECCOMP_RET_*`; an unknown one kills, as the
    /// kernel treats it).
    fn of(ret: u32) -> Action {
        match ret & 0xffff_0000 {
            0x8000_0000 => Action::KillProcess,
            0x0000_0000 => Action::KillThread,
            0x0003_0000 => Action::Trap,
            0x0005_0000 => Action::Errno((ret & 0xfff) as u16),
            0x7fc0_0000 => Action::UserNotif,
            0x7ff0_0000 => Action::Trace,
            0x7ffc_0000 => Action::Log,
            0x7fff_0000 => Action::Allow,
            _ => Action::KillProcess,
        }
    }
}

impl std::fmt::Display for Action {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Action::Allow => write!(f, "allow"),
            Action::Log => write!(f, "log"),
            Action::Trace => write!(f, "tell a tracer"),
            Action::UserNotif => write!(f, "ask a supervisor"),
            Action::Errno(e) => write!(f, "fail with errno {e}"),
            Action::Trap => write!(f, "SIGSYS"),
            Action::KillThread => write!(f, "kill the thread"),
            Action::KillProcess => write!(f, "kill the process"),
            Action::Unknown => write!(
                f,
                "not known (its filters cannot be read without CAP_SYS_ADMIN), so kerf takes \
                 it as the worst"
            ),
        }
    }
}

/// What a thread's seccomp state is, from the `Seccomp:` line of its status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Mode {
    Off,
    /// Strict mode: read, write, exit and rt_sigreturn only; anything else kills the thread.
    Strict,
    /// Filters, most recently installed first (as `PTRACE_SECCOMP_GET_FILTER` numbers them).
    Filters(Vec<Vec<Insn>>),
}

/// System calls strict mode lets through.
const STRICT_OK: [u32; 4] =
    [0 /* read */, 1 /* write */, 15 /* rt_sigreturn */, 60 /* exit */];

/// The verdict of `mode` on `call`. A filter that cannot be run (a jump out of the program,
/// an instruction seccomp does not accept) counts as killing: kerf never guesses in favour of
/// making the call.
pub fn verdict(mode: &Mode, call: &Call) -> Action {
    match mode {
        Mode::Off => Action::Allow,
        Mode::Strict if STRICT_OK.contains(&call.nr) => Action::Allow,
        Mode::Strict => Action::KillThread,
        Mode::Filters(fs) => {
            let data = call.data();
            let run = |f: &Vec<Insn>| run(f, &data).map_or(Action::KillProcess, Action::of);
            fs.iter().map(run).max_by_key(|a| a.rank()).unwrap_or(Action::Allow)
        }
    }
}

// Classic BPF, as seccomp accepts it (the kernel's seccomp_check_filter): class, size, mode
// and operation fields of `code`.
const LD: u16 = 0x00;
const LDX: u16 = 0x01;
const ST: u16 = 0x02;
const STX: u16 = 0x03;
const ALU: u16 = 0x04;
const JMP: u16 = 0x05;
const RET: u16 = 0x06;
const MISC: u16 = 0x07;
const W: u16 = 0x00;
const IMM: u16 = 0x00;
const ABS: u16 = 0x20;
const MEM: u16 = 0x60;
const LEN: u16 = 0x80;
const SRC_X: u16 = 0x08;
const RVAL_A: u16 = 0x10;
const MEMWORDS: usize = 16;

/// Run one filter on `data`; its return value, or `None` if the program is not one seccomp
/// would have accepted (then the caller assumes the worst).
fn run(prog: &[Insn], data: &[u8; 64]) -> Option<u32> {
    let (mut a, mut x) = (0u32, 0u32);
    let mut mem = [0u32; MEMWORDS];
    let mut pc = 0usize;
    // Jumps only go forward, so a filter ends within its length.
    while let Some(i) = prog.get(pc) {
        pc += 1;
        let k = i.k;
        match i.code & 0x07 {
            LD => {
                a = match i.code & 0xe0 {
                    ABS if i.code & 0x18 == W && k % 4 == 0 && k < 64 => {
                        let k = k as usize;
                        u32::from_le_bytes(data[k..k + 4].try_into().ok()?)
                    }
                    IMM => k,
                    MEM => *mem.get(k as usize)?,
                    LEN => 64,
                    _ => return None,
                }
            }
            LDX => {
                x = match i.code & 0xe0 {
                    IMM => k,
                    MEM => *mem.get(k as usize)?,
                    LEN => 64,
                    _ => return None,
                }
            }
            ST => *mem.get_mut(k as usize)? = a,
            STX => *mem.get_mut(k as usize)? = x,
            ALU => {
                let v = if i.code & SRC_X != 0 { x } else { k };
                a = match i.code & 0xf0 {
                    0x00 => a.wrapping_add(v),
                    0x10 => a.wrapping_sub(v),
                    0x20 => a.wrapping_mul(v),
                    0x30 => a.checked_div(v)?,
                    0x40 => a | v,
                    0x50 => a & v,
                    0x60 => a.checked_shl(v).unwrap_or(0),
                    0x70 => a.checked_shr(v).unwrap_or(0),
                    0x80 => a.wrapping_neg(),
                    0x90 => a.checked_rem(v)?,
                    0xa0 => a ^ v,
                    _ => return None,
                }
            }
            JMP => {
                let v = if i.code & SRC_X != 0 { x } else { k };
                let taken = match i.code & 0xf0 {
                    0x00 => {
                        pc = pc.checked_add(k as usize)?;
                        continue;
                    }
                    0x10 => a == v,
                    0x20 => a > v,
                    0x30 => a >= v,
                    0x40 => a & v != 0,
                    _ => return None,
                };
                pc += usize::from(if taken { i.jt } else { i.jf });
            }
            RET => return Some(if i.code & 0x18 == RVAL_A { a } else { k }),
            MISC => match i.code & 0xf8 {
                0x00 => x = a,
                0x80 => a = x,
                _ => return None,
            },
            _ => return None,
        }
    }
    None
}

/// The value of a `Seccomp:` status line: 0 off, 1 strict, 2 filters.
pub fn mode_number(status: &str) -> Option<u32> {
    status.lines().find_map(|l| l.strip_prefix("Seccomp:")).and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stmt(code: u16, k: u32) -> Insn {
        Insn { code, jt: 0, jf: 0, k }
    }
    fn jeq(k: u32, jt: u8, jf: u8) -> Insn {
        Insn { code: JMP | 0x10, jt, jf, k }
    }
    const RET_K: u16 = RET;
    const LD_ABS: u16 = LD | W | ABS;
    const ALLOW: u32 = 0x7fff_0000;
    const KILL: u32 = 0x8000_0000;
    const TRAP: u32 = 0x0003_0000;

    fn call(nr: u32, args: [u64; 6]) -> Call {
        Call { nr, ip: 0x7000_1000, args }
    }

    /// What libseccomp and systemd emit: the architecture checked, then a list of calls.
    fn deny_list(denied: &[u32], action: u32) -> Vec<Insn> {
        let mut p = vec![stmt(LD_ABS, 4), jeq(AUDIT_ARCH_X86_64, 1, 0), stmt(RET_K, KILL)];
        p.push(stmt(LD_ABS, 0));
        for (n, &nr) in denied.iter().enumerate() {
            let left = (denied.len() - n - 1) as u8;
            // Taken: skip the rest of the comparisons and the allow, to the denying return.
            p.push(jeq(nr, left + 1, 0));
        }
        p.push(stmt(RET_K, ALLOW));
        p.push(stmt(RET_K, action));
        p
    }

    #[test]
    fn a_deny_list_denies_what_it_names_and_allows_the_rest() {
        let mode = Mode::Filters(vec![deny_list(&[24, 319], KILL)]);
        assert_eq!(verdict(&mode, &call(24, [0; 6])), Action::KillProcess);
        assert_eq!(verdict(&mode, &call(319, [0; 6])), Action::KillProcess);
        assert_eq!(verdict(&mode, &call(9, [0; 6])), Action::Allow);
        assert_eq!(verdict(&Mode::Off, &call(24, [0; 6])), Action::Allow);
    }

    #[test]
    fn the_most_severe_filter_wins() {
        let trap = deny_list(&[202], TRAP);
        let errno = deny_list(&[202, 24], 0x0005_0000 | 1);
        let mode = Mode::Filters(vec![errno, trap]);
        assert_eq!(verdict(&mode, &call(202, [0; 6])), Action::Trap);
        assert_eq!(verdict(&mode, &call(24, [0; 6])), Action::Errno(1));
        assert_eq!(verdict(&mode, &call(0, [0; 6])), Action::Allow);
    }

    /// A futex policy like a browser sandbox's: private operations only (the op's low bits
    /// read from the low word of the second argument), anything else SIGSYS.
    #[test]
    fn arguments_are_read_where_the_kernel_puts_them() {
        let private = 128;
        let p = vec![
            stmt(LD_ABS, 0),
            jeq(202, 0, 4),
            stmt(LD_ABS, 24), // args[1], low half
            stmt(ALU | 0x50, private),
            Insn { code: JMP | 0x10, jt: 1, jf: 0, k: private },
            stmt(RET_K, TRAP),
            stmt(RET_K, ALLOW),
        ];
        let mode = Mode::Filters(vec![p]);
        assert_eq!(verdict(&mode, &call(202, [0x1000, 0, 0, 0, 0, 0])), Action::Trap);
        assert_eq!(verdict(&mode, &call(202, [0x1000, 128, 0, 0, 0, 0])), Action::Allow);
        assert_eq!(verdict(&mode, &call(24, [0; 6])), Action::Allow);
    }

    #[test]
    fn a_filter_that_could_not_run_counts_as_killing() {
        let past_end = vec![stmt(LD_ABS, 0), Insn { code: JMP, jt: 0, jf: 0, k: 5 }];
        let unaligned = vec![stmt(LD_ABS, 2), stmt(RET_K, ALLOW)];
        let mode = |p| Mode::Filters(vec![p]);
        assert_eq!(verdict(&mode(past_end), &call(0, [0; 6])), Action::KillProcess);
        assert_eq!(verdict(&mode(unaligned), &call(0, [0; 6])), Action::KillProcess);
        let ret_a = vec![stmt(LD | IMM, ALLOW), stmt(RET | RVAL_A, 0)];
        assert_eq!(verdict(&mode(ret_a), &call(0, [0; 6])), Action::Allow);
    }

    #[test]
    fn strict_mode_allows_four_calls() {
        assert_eq!(verdict(&Mode::Strict, &call(1, [0; 6])), Action::Allow);
        assert_eq!(verdict(&Mode::Strict, &call(9, [0; 6])), Action::KillThread);
        assert_eq!(mode_number("Name:\tx\nSeccomp:\t2\nSeccomp_filters:\t1\n"), Some(2));
    }

    #[test]
    fn sock_filters_parse_from_their_bytes() {
        let bytes = [0x20, 0, 0, 0, 4, 0, 0, 0, 0x15, 0, 1, 0, 0x3e, 0, 0, 0xc0];
        let p = Insn::parse(&bytes);
        assert_eq!(p, vec![stmt(LD_ABS, 4), jeq(AUDIT_ARCH_X86_64, 1, 0)]);
    }
}
