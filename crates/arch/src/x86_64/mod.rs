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
