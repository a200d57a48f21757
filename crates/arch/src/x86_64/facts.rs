//! Per-instruction facts over iced-x86: how control leaves an instruction, which registers and
//! arithmetic flags it reads and writes. Liveness and splice planning are built on these.

use super::regs::{FlagSet, Gpr, RegSet};
use crate::addr::ImageAddr;
use iced_x86::{
    Code, Decoder, DecoderOptions, FlowControl, Instruction, InstructionInfoFactory,
    InstructionInfoOptions, Mnemonic, OpAccess, OpKind,
};

/// How control leaves an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    /// Falls through to the next instruction.
    Next,
    /// Unconditional direct jump.
    Jump(ImageAddr),
    /// Conditional direct branch (`jcc`, `jrcxz`, `loop`): taken or falls through.
    CondJump(ImageAddr),
    /// Jump through a register or memory.
    IndirectJump,
    /// Direct call; control returns to the next instruction unless the callee never returns.
    Call(ImageAddr),
    /// Call through a register or memory.
    IndirectCall,
    /// `ret` and its relatives (`iret`, `sysret`, ...).
    Return,
    /// Control does not continue: `ud2`, `int3`, `hlt`, or bytes that do not decode.
    Stop,
}

impl Flow {
    /// Whether this instruction ends a basic block (calls do not, as in KernInst).
    pub fn ends_block(self) -> bool {
        !matches!(self, Flow::Next | Flow::Call(_) | Flow::IndirectCall)
    }
    /// The direct branch or call target, if any.
    pub fn target(self) -> Option<ImageAddr> {
        match self {
            Flow::Jump(t) | Flow::CondJump(t) | Flow::Call(t) => Some(t),
            _ => None,
        }
    }
    /// Short lower-case name, as used in fixtures and printed CFGs.
    pub fn name(self) -> &'static str {
        match self {
            Flow::Next => "next",
            Flow::Jump(_) => "jump",
            Flow::CondJump(_) => "condjump",
            Flow::IndirectJump => "indjump",
            Flow::Call(_) => "call",
            Flow::IndirectCall => "indcall",
            Flow::Return => "return",
            Flow::Stop => "stop",
        }
    }
}

/// What one instruction does to control flow, registers and flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InsnFacts {
    pub len: u8,
    pub flow: Flow,
    /// Registers whose value the instruction may read.
    pub reads: RegSet,
    /// Registers the instruction certainly overwrites entirely (32- or 64-bit, unconditional):
    /// these end a live range.
    pub kills: RegSet,
    /// Registers the instruction may change in any way (a superset of `kills`).
    pub clobbers: RegSet,
    pub flags_read: FlagSet,
    /// Flags the instruction writes, sets, clears or leaves undefined: older values are dead.
    pub flags_killed: FlagSet,
    /// Target of a RIP-relative memory operand (the instruction depends on its own address).
    pub rip_relative: Option<ImageAddr>,
}

/// One decoded instruction and its facts.
#[derive(Clone, Copy, Debug)]
pub struct Decoded {
    pub insn: Instruction,
    pub facts: InsnFacts,
}

impl Decoded {
    pub fn addr(&self) -> ImageAddr {
        ImageAddr(self.insn.ip())
    }
    pub fn next_addr(&self) -> ImageAddr {
        ImageAddr(self.insn.next_ip())
    }
}

/// A reusable decoder over one region of code. Keeps iced's buffers between instructions,
/// which matters when analysing tens of megabytes.
pub struct Scanner<'a> {
    bytes: &'a [u8],
    base: ImageAddr,
    decoder: Decoder<'a>,
    info: InstructionInfoFactory,
}

impl<'a> Scanner<'a> {
    /// A scanner for `bytes`, the first of which lives at `base`.
    pub fn new(bytes: &'a [u8], base: ImageAddr) -> Self {
        Scanner {
            bytes,
            base,
            decoder: Decoder::with_ip(64, bytes, base.0, DecoderOptions::NONE),
            info: InstructionInfoFactory::new(),
        }
    }

    pub fn base(&self) -> ImageAddr {
        self.base
    }

    /// The address one past the last byte.
    pub fn end(&self) -> ImageAddr {
        ImageAddr(self.base.0 + self.bytes.len() as u64)
    }

    pub fn contains(&self, a: ImageAddr) -> bool {
        a >= self.base && a < self.end()
    }

    /// Decode the instruction at `addr`; `None` if `addr` is outside the region or the bytes
    /// there are not a valid instruction (or run off the end of the region).
    pub fn decode(&mut self, addr: ImageAddr) -> Option<Instruction> {
        if !self.contains(addr) {
            return None;
        }
        let pos = (addr.0 - self.base.0) as usize;
        self.decoder.set_position(pos).ok()?;
        self.decoder.set_ip(addr.0);
        let insn = self.decoder.decode();
        if insn.is_invalid() {
            None
        } else {
            Some(insn)
        }
    }

    /// Decode at `addr` and compute the instruction's facts.
    pub fn decode_facts(&mut self, addr: ImageAddr) -> Option<Decoded> {
        let insn = self.decode(addr)?;
        let facts = self.facts(&insn);
        Some(Decoded { insn, facts })
    }

    /// The facts of an already decoded instruction.
    pub fn facts(&mut self, insn: &Instruction) -> InsnFacts {
        facts_of(&mut self.info, insn)
    }
}

/// Decode and describe the first instruction of `bytes`, placed at `addr`. Convenient for
/// tests and one-offs; analysis of many instructions should use a [`Scanner`].
pub fn decode_one(bytes: &[u8], addr: ImageAddr) -> Option<Decoded> {
    Scanner::new(bytes, addr).decode_facts(addr)
}

fn flow_of(insn: &Instruction) -> Flow {
    match insn.flow_control() {
        FlowControl::Next => Flow::Next,
        FlowControl::UnconditionalBranch => match insn.op0_kind() {
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => {
                Flow::Jump(ImageAddr(insn.near_branch_target()))
            }
            // Far jumps (jmp ptr16:32) leave the address space we model.
            _ => Flow::IndirectJump,
        },
        FlowControl::ConditionalBranch => Flow::CondJump(ImageAddr(insn.near_branch_target())),
        FlowControl::IndirectBranch => Flow::IndirectJump,
        FlowControl::Call => match insn.op0_kind() {
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64 => {
                Flow::Call(ImageAddr(insn.near_branch_target()))
            }
            _ => Flow::IndirectCall,
        },
        FlowControl::IndirectCall => Flow::IndirectCall,
        FlowControl::Return => Flow::Return,
        // `syscall` returns to the next instruction; `int N`/`into` do too.
        FlowControl::Interrupt => match insn.mnemonic() {
            Mnemonic::Int3 | Mnemonic::Int1 => Flow::Stop,
            _ => Flow::Next,
        },
        FlowControl::XbeginXabortXend => Flow::Next,
        FlowControl::Exception => Flow::Stop,
    }
}

/// Calls into a hypervisor, the TDX module or a guest, which iced counts as calls: control
/// comes back to the next instruction (or, for a VM entry, somewhere the host chose), with
/// registers in and out by conventions iced does not model.
fn is_privileged_call(m: Mnemonic) -> bool {
    matches!(
        m,
        Mnemonic::Vmcall
            | Mnemonic::Vmmcall
            | Mnemonic::Vmgexit
            | Mnemonic::Tdcall
            | Mnemonic::Seamcall
            | Mnemonic::Seamret
            | Mnemonic::Vmlaunch
            | Mnemonic::Vmresume
            | Mnemonic::Vmrun
    )
}

/// How control leaves `insn`. This, not iced's `flow_control`, is what every layer uses: iced
/// counts `syscall`, `sysenter` and hypervisor calls as calls (with no target), and `hlt` as
/// falling through.
pub fn flow(insn: &Instruction) -> Flow {
    match insn.mnemonic() {
        // `hlt` resumes after an interrupt in the kernel, but in a process it faults; in both
        // cases treating it as the end of the path keeps traversal out of padding.
        Mnemonic::Hlt => Flow::Stop,
        // The kernel returns from `syscall` to the next instruction (its address is in rcx).
        Mnemonic::Syscall => Flow::Next,
        // `sysenter` saves no return address: in 64-bit code Linux does not come back to the
        // next instruction.
        Mnemonic::Sysenter => Flow::Stop,
        m if is_privileged_call(m) => Flow::Next,
        _ => flow_of(insn),
    }
}

/// Why `insn` cannot run at another address (in a code patch) with the same effect, even
/// with RIP-relative operands and relative branches re-encoded; `None` when it can. A near
/// call can, when emulated (push the original return address, then jump).
pub fn relocation_hazard(insn: &Instruction) -> Option<&'static str> {
    let m = insn.mnemonic();
    if m == Mnemonic::Syscall {
        return None;
    }
    if m == Mnemonic::Sysenter {
        return Some("the kernel does not return to the instruction after it");
    }
    if is_privileged_call(m) {
        return Some("a call into a hypervisor or guest, with conventions not modelled");
    }
    match insn.flow_control() {
        // Traps and undefined instructions report their own address to a handler (a
        // debugger, the kernel's fixups, a signal handler that reads the faulting address).
        FlowControl::Exception | FlowControl::Interrupt => {
            return Some("a trap that reports its own address")
        }
        FlowControl::XbeginXabortXend if m == Mnemonic::Xbegin => {
            return Some("a transaction whose abort path is its own address")
        }
        _ => {}
    }
    if m == Mnemonic::Hlt {
        return Some("a privileged instruction that faults at its own address");
    }
    let far = matches!(
        insn.code(),
        Code::Call_ptr1616
            | Code::Call_ptr1632
            | Code::Call_m1616
            | Code::Call_m1632
            | Code::Call_m1664
            | Code::Jmp_ptr1616
            | Code::Jmp_ptr1632
            | Code::Jmp_m1616
            | Code::Jmp_m1632
            | Code::Jmp_m1664
    );
    if far {
        return Some("a far transfer through a segment selector");
    }
    None
}

fn facts_of(info: &mut InstructionInfoFactory, insn: &Instruction) -> InsnFacts {
    let flow = flow(insn);
    let mut reads = RegSet::EMPTY;
    let mut kills = RegSet::EMPTY;
    let mut clobbers = RegSet::EMPTY;
    let ii = info.info_options(insn, InstructionInfoOptions::NO_MEMORY_USAGE);
    // `rdssp` writes only while shadow stacks are on; elsewhere it is a no-op and the
    // register keeps its value (code zeroes it first and tests it after): a conditional write.
    let maybe_writes = matches!(insn.mnemonic(), Mnemonic::Rdsspd | Mnemonic::Rdsspq);
    for used in ii.used_registers() {
        let reg = used.register();
        let Some(gpr) = Gpr::from_iced(reg) else {
            continue;
        };
        // A write to a 32-bit register zero-extends into the 64-bit one, so it ends the old
        // value's live range; 8- and 16-bit writes merge with the old value, so they do not.
        let full_width = reg.is_gpr64() || reg.is_gpr32();
        let access = match used.access() {
            OpAccess::Write if maybe_writes => OpAccess::CondWrite,
            a => a,
        };
        match access {
            OpAccess::Read | OpAccess::CondRead => reads.insert(gpr),
            OpAccess::Write => {
                clobbers.insert(gpr);
                if full_width {
                    kills.insert(gpr);
                } else {
                    reads.insert(gpr);
                }
            }
            OpAccess::CondWrite => {
                clobbers.insert(gpr);
                // The old value survives when the condition is false.
                reads.insert(gpr);
            }
            OpAccess::ReadWrite => {
                // Read, then overwritten (`add eax, 1`, `mul`'s rax): both used and defined.
                reads.insert(gpr);
                clobbers.insert(gpr);
                if full_width {
                    kills.insert(gpr);
                }
            }
            OpAccess::ReadCondWrite => {
                reads.insert(gpr);
                clobbers.insert(gpr);
            }
            OpAccess::None | OpAccess::NoMemAccess => {}
        }
    }
    let mut flags_read = FlagSet::from_iced(insn.rflags_read());
    let mut flags_killed = FlagSet::from_iced(insn.rflags_modified());
    if insn.code() == Code::Syscall {
        // The kernel ABI, which iced does not model: number and arguments in, rax/rcx/r11 out.
        reads = reads.union(RegSet::SYSCALL_ARGS);
        let out = RegSet::of(&[Gpr::Rax, Gpr::Rcx, Gpr::R11]);
        kills = kills.union(out);
        clobbers = clobbers.union(out);
        // RFLAGS is saved in r11 and restored by `sysret`: the flags survive the call, so they
        // are read (saved) and not killed.
        flags_read = FlagSet::ALL;
        flags_killed = FlagSet::EMPTY;
    }
    if is_privileged_call(insn.mnemonic()) {
        // Whoever answers may read and change any register (a hypercall's number and
        // arguments are in rax, rbx, rcx, ...): everything is read, nothing is known dead.
        reads = RegSet::ALL;
        kills = RegSet::EMPTY;
        clobbers = RegSet::ALL;
        flags_read = FlagSet::ALL;
        flags_killed = FlagSet::EMPTY;
    }
    let rip_relative = if insn.is_ip_rel_memory_operand() {
        Some(ImageAddr(insn.ip_rel_memory_address()))
    } else {
        None
    };
    // A register both read and killed (e.g. `add eax, 1`) is read first: it is live before.
    InsnFacts {
        len: insn.len() as u8,
        flow,
        reads,
        kills,
        clobbers,
        flags_read,
        flags_killed,
        rip_relative,
    }
}
