//! x86-64 specifics: the register and flag sets liveness works on, and per-instruction facts
//! (flow kind, registers and flags read and written, RIP-relative operands) over iced-x86.

mod facts;
mod listing;
mod regs;

pub use facts::{decode_one, flow, relocation_hazard, Decoded, Flow, InsnFacts, Scanner};
pub use listing::{listing, Line};
pub use regs::{Flag, FlagSet, Gpr, RegSet};

/// The longest legal x86 instruction, in bytes.
pub const MAX_INSN_LEN: usize = 15;

/// A memory operand at offset `disp` from segment `seg`'s base (`fs:[disp]`, `gs:[disp]`: a
/// thread's own words). With no base register iced takes the displacement's size for the
/// address size: 4 encodes `addr32` (a 0x67 prefix, a byte more at every block counter); 8
/// encodes the same sign-extended 32-bit displacement with 64-bit addressing.
pub fn segment_operand(seg: iced_x86::Register, disp: i32) -> iced_x86::MemoryOperand {
    iced_x86::MemoryOperand::new(
        iced_x86::Register::None,
        iced_x86::Register::None,
        1,
        i64::from(disp),
        8,
        false,
        seg,
    )
}
