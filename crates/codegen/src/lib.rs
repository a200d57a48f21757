//! Code generation (DESIGN.md §2): instrumentation primitives as a small IR, lowered to
//! x86-64 instructions for one point given what is live there. Pure: it chooses no address
//! and writes no memory; the patch layer places and encodes what comes out.

pub mod templates;
pub mod trap;

use iced_x86::Instruction;
use kerf_arch::x86_64::{FlagSet, RegSet};

/// One instrumentation primitive, with the addresses of the data it updates (in the target's
/// data heap, within ±2 GiB of where the code will run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Primitive {
    /// Atomically add one to the 64-bit counter at `slot`.
    Count { slot: u64 },
}

/// Where the generated code runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Env {
    /// A user process: the 128 bytes below `rsp` (the SysV red zone) may hold live data, so
    /// nothing may be pushed before stepping over them.
    User,
    /// The kernel: no red zone, but interrupts may run the same code reentrantly.
    Kernel,
}

/// What is live at the point, so generated code knows what it may clobber.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LiveAt {
    pub regs: RegSet,
    pub flags: FlagSet,
}

impl LiveAt {
    /// Nothing known: everything live (the safe assumption).
    pub const ALL: LiveAt = LiveAt { regs: RegSet::ALL, flags: FlagSet::ALL };
}

/// Lower `prims` (run in order) for a point with `live` registers and flags. Flags are saved
/// and restored around the snippet only when a flag it writes is live at the point.
pub fn lower(prims: &[Primitive], live: LiveAt, env: Env) -> Vec<Instruction> {
    let mut body = Vec::new();
    let mut flags_written = FlagSet::EMPTY;
    for p in prims {
        match *p {
            Primitive::Count { slot } => {
                body.extend(templates::atomic_inc(slot));
                flags_written = flags_written.union(templates::INC_FLAGS);
            }
        }
    }
    if live.flags.0 & flags_written.0 == 0 {
        return body;
    }
    let mut out = templates::save_flags(env);
    out.extend(body);
    out.extend(templates::restore_flags(env));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use iced_x86::{Formatter, IntelFormatter};

    fn text(v: &[Instruction]) -> Vec<String> {
        let mut f = IntelFormatter::new();
        v.iter()
            .map(|i| {
                let mut s = String::new();
                f.format(i, &mut s);
                s
            })
            .collect()
    }

    #[test]
    fn counter_without_live_flags_is_one_locked_increment() {
        let live = LiveAt { regs: RegSet::ALL, flags: FlagSet::EMPTY };
        let v = lower(&[Primitive::Count { slot: 0x7000 }], live, Env::User);
        // iced shows a RIP-relative operand by its absolute target.
        assert_eq!(text(&v), ["lock inc qword ptr [7000h]"]);
        assert_eq!(v[0].memory_base(), iced_x86::Register::RIP);
        assert!(v[0].has_lock_prefix());
    }

    #[test]
    fn live_flags_are_saved_below_the_red_zone_in_user_space() {
        let v = lower(&[Primitive::Count { slot: 0x7000 }], LiveAt::ALL, Env::User);
        assert_eq!(
            text(&v),
            [
                "lea rsp,[rsp-80h]",
                "pushfq",
                "lock inc qword ptr [7000h]",
                "popfq",
                "lea rsp,[rsp+80h]"
            ]
        );
        let k = lower(&[Primitive::Count { slot: 0x7000 }], LiveAt::ALL, Env::Kernel);
        assert_eq!(text(&k), ["pushfq", "lock inc qword ptr [7000h]", "popfq"]);
    }

    #[test]
    fn only_carry_live_needs_no_save() {
        // inc leaves CF alone.
        let live = LiveAt { regs: RegSet::ALL, flags: FlagSet(1) };
        let v = lower(&[Primitive::Count { slot: 0x7000 }], live, Env::User);
        assert_eq!(v.len(), 1);
    }
}
