//! Which splice a point can take. `jump5` follows Djprobe's static checks (DESIGN.md §5):
//! every displaced instruction decoded and relocatable, no branch target, jump-table target,
//! landing pad or return address inside bytes 1..len, the range inside the function (or
//! followed only by padding), and no unanalysable indirect jump in the function.

use iced_x86::{Instruction, Mnemonic, OpKind, Register};
use kerf_arch::x86_64::{flow, relocation_hazard, Flow, Scanner};
use kerf_arch::ImageAddr;
use std::fmt;
use std::ops::Range;

/// What planning needs to know about the function holding a point (from the analysis).
#[derive(Clone, Debug)]
pub struct FunctionView<'a> {
    pub name: &'a str,
    /// Addresses where decoded code lives: `[entry, end)` of the function's instructions.
    pub extent: Range<u64>,
    /// Every block start of the function, sorted: branch and table targets, return
    /// addresses after calls, landing pads.
    pub block_starts: &'a [u64],
    /// Whether the function has an indirect jump with unknown targets.
    pub has_unanalysable_jump: bool,
}

/// Why a stronger splice kind was refused at a point. Each names the address involved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Undecodable {
        addr: u64,
    },
    /// An instruction whose meaning depends on where it runs in a way relocation cannot fix.
    NotRelocatable {
        addr: u64,
        what: String,
        why: &'static str,
    },
    /// A basic block starts inside the bytes the jump would overwrite.
    TargetInside {
        addr: u64,
    },
    /// A call that is not the last displaced instruction would leave a return address inside.
    CallInside {
        addr: u64,
    },
    /// The displaced bytes would run past the function's code into bytes that are not padding.
    PastFunctionEnd {
        end: u64,
    },
    /// A jump or return among the displaced instructions is followed by code (not padding),
    /// starting at `after`, that the jump would overwrite (Go's functions may start with a
    /// jump to their loop's test).
    CodeAfterJump {
        after: u64,
    },
    /// The function has an indirect jump whose targets are unknown: one might land inside.
    UnanalysableJump {
        function: String,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Undecodable { addr } => write!(f, "bytes at {addr:#x} do not decode"),
            Refusal::NotRelocatable { addr, what, why } => {
                write!(f, "{what} at {addr:#x} cannot be relocated: {why}")
            }
            Refusal::TargetInside { addr } => {
                write!(f, "a branch target at {addr:#x} lies inside the displaced bytes")
            }
            Refusal::CallInside { addr } => {
                write!(f, "the call at {addr:#x} would leave a return address inside")
            }
            Refusal::PastFunctionEnd { end } => {
                write!(f, "the displaced bytes run past the function's end at {end:#x}")
            }
            Refusal::CodeAfterJump { after } => write!(
                f,
                "its first instructions end in a jump or return, and the code after it at \
                 {after:#x} lies within the bytes a jump there would overwrite"
            ),
            Refusal::UnanalysableJump { function } => {
                write!(f, "{function} has an indirect jump with unknown targets")
            }
        }
    }
}

/// The instructions a splice displaces, decoded at their original addresses.
#[derive(Clone, Debug)]
pub struct Displaced {
    pub point: u64,
    pub insns: Vec<Instruction>,
    /// Bytes overwritten at the point (at least the instructions' total length; more when the
    /// jump is padded over filler after a final jump or return).
    pub len: usize,
}

impl Displaced {
    /// Where execution continues after the displaced instructions, if it falls through.
    pub fn resume(&self) -> u64 {
        self.insns.last().map_or(self.point, |i| i.next_ip())
    }
}

/// Whether one instruction may be moved into a code patch. How control leaves it is arch's
/// [`flow`], never iced's flow control, which calls `syscall` a call: a patch that emulated it
/// as one would push a return address and jump to address 0.
fn relocatable(i: &Instruction, last: bool) -> Result<(), Refusal> {
    let addr = i.ip();
    if let Some(why) = relocation_hazard(i) {
        let what = format!("{:?}", i.mnemonic()).to_lowercase();
        return Err(Refusal::NotRelocatable { addr, what, why });
    }
    if let Flow::Call(_) | Flow::IndirectCall = flow(i) {
        if !last {
            return Err(Refusal::CallInside { addr });
        }
        // An emulated call stores the return address below rsp first, so an operand that
        // addresses through rsp would see the moved stack.
        let uses_rsp = (0..i.op_count()).any(|k| match i.op_kind(k) {
            OpKind::Register => i.op_register(k).full_register() == Register::RSP,
            OpKind::Memory => {
                i.memory_base().full_register() == Register::RSP
                    || i.memory_index().full_register() == Register::RSP
            }
            _ => false,
        });
        if uses_rsp {
            let what = "call".to_string();
            return Err(Refusal::NotRelocatable { addr, what, why: "it addresses through rsp" });
        }
    }
    Ok(())
}

/// Whether control never falls out of `i` to the next instruction: a jump or a return.
fn ends_flow(i: &Instruction) -> bool {
    matches!(flow(i), Flow::Jump(_) | Flow::IndirectJump | Flow::Return)
}

fn is_filler(i: &Instruction) -> bool {
    matches!(i.mnemonic(), Mnemonic::Nop | Mnemonic::Int3)
}

/// Plan a `jump5` at `point` in code `bytes` that start at `base`.
pub fn plan_jump5(
    bytes: &[u8],
    base: u64,
    point: u64,
    f: &FunctionView<'_>,
) -> Result<Displaced, Refusal> {
    plan_jump(bytes, base, point, f, 5)
}

/// Plan a `jump2` (`jmp rel8` to a springboard): the same checks as [`plan_jump5`] over the
/// two bytes it overwrites.
pub fn plan_jump2(
    bytes: &[u8],
    base: u64,
    point: u64,
    f: &FunctionView<'_>,
) -> Result<Displaced, Refusal> {
    plan_jump(bytes, base, point, f, 2)
}

fn plan_jump(
    bytes: &[u8],
    base: u64,
    point: u64,
    f: &FunctionView<'_>,
    need: u64,
) -> Result<Displaced, Refusal> {
    if f.has_unanalysable_jump {
        return Err(Refusal::UnanalysableJump { function: f.name.to_string() });
    }
    let mut sc = Scanner::new(bytes, ImageAddr(base));
    let mut insns = Vec::new();
    let mut a = point;
    // Decode whole instructions until `need` bytes are covered.
    while a < point + need {
        let i = sc.decode(ImageAddr(a)).ok_or(Refusal::Undecodable { addr: a })?;
        let ends = ends_flow(&i);
        a = i.next_ip();
        insns.push(i);
        if ends && a < point + need {
            // Control never falls out of a jump or return: the bytes after it may be
            // overwritten only if they are padding no one executes.
            let mut b = a;
            while b < point + need {
                let p = sc.decode(ImageAddr(b)).ok_or(Refusal::Undecodable { addr: b })?;
                if !is_filler(&p) {
                    return Err(Refusal::CodeAfterJump { after: a });
                }
                b = p.next_ip();
            }
            let len = (b - point) as usize;
            check_range(point, point + len as u64, &insns, f, true)?;
            return Ok(Displaced { point, insns, len });
        }
    }
    let len = (a - point) as usize;
    check_range(point, a, &insns, f, false)?;
    Ok(Displaced { point, insns, len })
}

fn check_range(
    point: u64,
    end: u64,
    insns: &[Instruction],
    f: &FunctionView<'_>,
    padded: bool,
) -> Result<(), Refusal> {
    let last = insns.len() - 1;
    for (k, i) in insns.iter().enumerate() {
        relocatable(i, k == last)?;
    }
    let code_end = insns.last().map_or(point, |i| i.next_ip());
    if code_end > f.extent.end || point < f.extent.start {
        return Err(Refusal::PastFunctionEnd { end: f.extent.end });
    }
    // Padding after the last instruction may extend past the function's own code, but must
    // not hold a block of this function.
    let check_end = if padded { end } else { code_end };
    let lo = f.block_starts.partition_point(|b| *b <= point);
    if let Some(b) = f.block_starts.get(lo) {
        if *b < check_end {
            return Err(Refusal::TargetInside { addr: *b });
        }
    }
    Ok(())
}

/// Plan a trap splice: one `int3` at `point`; the instruction there is displaced alone.
pub fn plan_trap(bytes: &[u8], base: u64, point: u64) -> Result<Displaced, Refusal> {
    let mut sc = Scanner::new(bytes, ImageAddr(base));
    let i = sc.decode(ImageAddr(point)).ok_or(Refusal::Undecodable { addr: point })?;
    relocatable(&i, true)?;
    Ok(Displaced { point, insns: vec![i], len: 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: u64 = 0x1000;

    fn view<'a>(starts: &'a [u64], end: u64) -> FunctionView<'a> {
        FunctionView {
            name: "f",
            extent: BASE..end,
            block_starts: starts,
            has_unanalysable_jump: false,
        }
    }

    #[test]
    fn prologue_displaces_whole_instructions() {
        // push rbp; mov rbp,rsp; sub rsp,0x10; ...
        let code = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xc3];
        let d = plan_jump5(&code, BASE, BASE, &view(&[BASE], BASE + 9)).unwrap();
        assert_eq!(d.insns.len(), 3);
        assert_eq!(d.len, 8);
        assert_eq!(d.resume(), BASE + 8);
    }

    #[test]
    fn block_start_inside_is_refused() {
        let code = [0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x10, 0xc3];
        let starts = [BASE, BASE + 1];
        let r = plan_jump5(&code, BASE, BASE, &view(&starts, BASE + 9));
        assert_eq!(r.unwrap_err(), Refusal::TargetInside { addr: BASE + 1 });
        // A block starting right after the displaced range is fine.
        let starts = [BASE, BASE + 8];
        assert!(plan_jump5(&code, BASE, BASE, &view(&starts, BASE + 9)).is_ok());
    }

    #[test]
    fn call_must_be_last() {
        // call +0; ret  -> call is 5 bytes, last: fine.
        let code = [0xe8, 0x00, 0x00, 0x00, 0x00, 0xc3];
        assert!(plan_jump5(&code, BASE, BASE, &view(&[BASE, BASE + 5], BASE + 6)).is_ok());
        // nop; call; ...: the call is displaced but its return address (BASE+6) is outside,
        // yet it is last, so allowed.
        let code = [0x90, 0xe8, 0x00, 0x00, 0x00, 0x00, 0xc3];
        assert!(plan_jump5(&code, BASE, BASE, &view(&[BASE, BASE + 6], BASE + 7)).is_ok());
        // xor eax,eax; call rax (2 bytes); mov.. : call in the middle.
        let code = [0x31, 0xc0, 0xff, 0xd0, 0x48, 0x89, 0xc7, 0xc3];
        let r = plan_jump5(&code, BASE, BASE, &view(&[BASE], BASE + 8));
        assert_eq!(r.unwrap_err(), Refusal::CallInside { addr: BASE + 2 });
    }

    #[test]
    fn short_function_ending_in_ret_uses_padding() {
        // xor eax,eax; ret; int3 x 3 ; next function
        let code = [0x31, 0xc0, 0xc3, 0xcc, 0xcc, 0xcc, 0x55];
        let d = plan_jump5(&code, BASE, BASE, &view(&[BASE], BASE + 3)).unwrap();
        assert_eq!(d.len, 5);
        assert_eq!(d.insns.len(), 2);
        // Without padding after the ret: refused, naming the code after it.
        let code = [0x31, 0xc0, 0xc3, 0x55, 0x48, 0x89, 0xe5];
        let r = plan_jump5(&code, BASE, BASE, &view(&[BASE], BASE + 3));
        assert_eq!(r.unwrap_err(), Refusal::CodeAfterJump { after: BASE + 3 });
    }

    #[test]
    fn unanalysable_function_is_refused_but_trap_works() {
        let code = [0x55, 0x48, 0x89, 0xe5, 0xff, 0xe0];
        let mut v = view(&[BASE], BASE + 6);
        v.has_unanalysable_jump = true;
        assert!(matches!(plan_jump5(&code, BASE, BASE, &v), Err(Refusal::UnanalysableJump { .. })));
        let t = plan_trap(&code, BASE, BASE).unwrap();
        assert_eq!(t.len, 1);
        assert_eq!(t.insns.len(), 1);
    }

    #[test]
    fn jump2_needs_only_two_clean_bytes() {
        // xor eax,eax (2 bytes); a block starts at +2: too short for jump5, fine for jump2.
        let code = [0x31, 0xc0, 0x48, 0x89, 0xe5, 0xc3];
        let starts = [BASE, BASE + 2];
        let v = view(&starts, BASE + 6);
        assert!(matches!(plan_jump5(&code, BASE, BASE, &v), Err(Refusal::TargetInside { .. })));
        let d = plan_jump2(&code, BASE, BASE, &v).unwrap();
        assert_eq!((d.len, d.insns.len()), (2, 1));
        // A one-byte instruction followed by a block start: not even jump2.
        let code = [0x90, 0x31, 0xc0, 0xc3];
        let starts = [BASE, BASE + 1];
        let v = view(&starts, BASE + 4);
        assert!(plan_jump2(&code, BASE, BASE, &v).is_err());
    }

    #[test]
    fn int3_and_ud2_are_not_relocatable() {
        let code = [0x0f, 0x0b];
        assert!(matches!(plan_trap(&code, BASE, BASE), Err(Refusal::NotRelocatable { .. })));
    }
}
