//! Sets of the 16 general-purpose registers and of the six arithmetic flags, as bitmasks, in
//! hardware encoding order so that a set indexes straight into ModRM numbering.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A 64-bit general-purpose register, numbered as in its ModRM/REX encoding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum Gpr {
    Rax = 0,
    Rcx,
    Rdx,
    Rbx,
    Rsp,
    Rbp,
    Rsi,
    Rdi,
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
}

impl Gpr {
    pub const ALL: [Gpr; 16] = [
        Gpr::Rax,
        Gpr::Rcx,
        Gpr::Rdx,
        Gpr::Rbx,
        Gpr::Rsp,
        Gpr::Rbp,
        Gpr::Rsi,
        Gpr::Rdi,
        Gpr::R8,
        Gpr::R9,
        Gpr::R10,
        Gpr::R11,
        Gpr::R12,
        Gpr::R13,
        Gpr::R14,
        Gpr::R15,
    ];
    const NAMES: [&'static str; 16] = [
        "rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi", "r8", "r9", "r10", "r11", "r12",
        "r13", "r14", "r15",
    ];

    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }

    pub fn from_name(s: &str) -> Option<Gpr> {
        Self::NAMES.iter().position(|n| *n == s).map(|i| Self::ALL[i])
    }

    /// The GPR that an iced register is part of (`eax`, `ax`, `al` and `ah` are all `rax`).
    pub fn from_iced(r: iced_x86::Register) -> Option<Gpr> {
        let full = r.full_register();
        if full.is_gpr64() {
            Some(Self::ALL[(full as usize) - (iced_x86::Register::RAX as usize)])
        } else {
            None
        }
    }
}

/// A set of general-purpose registers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct RegSet(pub u16);

impl RegSet {
    pub const EMPTY: RegSet = RegSet(0);
    pub const ALL: RegSet = RegSet(0xffff);

    pub const fn of(regs: &[Gpr]) -> RegSet {
        let mut bits = 0u16;
        let mut i = 0;
        while i < regs.len() {
            bits |= 1 << regs[i] as u8;
            i += 1;
        }
        RegSet(bits)
    }
    /// Registers a SysV callee may read: the six integer argument registers, plus `rax`
    /// (the vector-register count of a variadic call) and `rsp`.
    pub const SYSV_ARGS: RegSet =
        RegSet::of(&[Gpr::Rdi, Gpr::Rsi, Gpr::Rdx, Gpr::Rcx, Gpr::R8, Gpr::R9, Gpr::Rax, Gpr::Rsp]);
    /// Registers a SysV callee may clobber (caller-saved).
    pub const SYSV_CALLER_SAVED: RegSet = RegSet::of(&[
        Gpr::Rax,
        Gpr::Rcx,
        Gpr::Rdx,
        Gpr::Rsi,
        Gpr::Rdi,
        Gpr::R8,
        Gpr::R9,
        Gpr::R10,
        Gpr::R11,
    ]);
    /// Registers the caller still needs when a SysV function returns: return values,
    /// callee-saved registers and the stack pointer.
    pub const SYSV_LIVE_AT_RETURN: RegSet = RegSet::of(&[
        Gpr::Rax,
        Gpr::Rdx,
        Gpr::Rbx,
        Gpr::Rsp,
        Gpr::Rbp,
        Gpr::R12,
        Gpr::R13,
        Gpr::R14,
        Gpr::R15,
    ]);
    /// Registers the Linux `syscall` instruction reads: number and six arguments.
    pub const SYSCALL_ARGS: RegSet =
        RegSet::of(&[Gpr::Rax, Gpr::Rdi, Gpr::Rsi, Gpr::Rdx, Gpr::R10, Gpr::R8, Gpr::R9]);

    pub fn contains(self, r: Gpr) -> bool {
        self.0 & (1 << r as u8) != 0
    }
    pub fn insert(&mut self, r: Gpr) {
        self.0 |= 1 << r as u8;
    }
    pub fn union(self, o: RegSet) -> RegSet {
        RegSet(self.0 | o.0)
    }
    pub fn minus(self, o: RegSet) -> RegSet {
        RegSet(self.0 & !o.0)
    }
    pub fn intersect(self, o: RegSet) -> RegSet {
        RegSet(self.0 & o.0)
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
    pub fn len(self) -> u32 {
        self.0.count_ones()
    }
    pub fn iter(self) -> impl Iterator<Item = Gpr> {
        Gpr::ALL.into_iter().filter(move |r| self.contains(*r))
    }
}

impl fmt::Debug for RegSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for RegSet {
    /// Space-separated names in encoding order, `-` for the empty set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("-");
        }
        let mut first = true;
        for r in self.iter() {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            f.write_str(r.name())?;
        }
        Ok(())
    }
}

/// One arithmetic flag of RFLAGS.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Flag {
    Cf = 0,
    Pf,
    Af,
    Zf,
    Sf,
    Of,
}

impl Flag {
    pub const ALL: [Flag; 6] = [Flag::Cf, Flag::Pf, Flag::Af, Flag::Zf, Flag::Sf, Flag::Of];
    const NAMES: [&'static str; 6] = ["cf", "pf", "af", "zf", "sf", "of"];
    pub fn name(self) -> &'static str {
        Self::NAMES[self as usize]
    }
}

/// A set of arithmetic flags.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct FlagSet(pub u8);

impl FlagSet {
    pub const EMPTY: FlagSet = FlagSet(0);
    pub const ALL: FlagSet = FlagSet(0x3f);

    /// From iced's `RflagsBits` mask, keeping only the six arithmetic flags.
    pub fn from_iced(bits: u32) -> FlagSet {
        use iced_x86::RflagsBits as B;
        let mut s = 0u8;
        for (i, b) in [B::CF, B::PF, B::AF, B::ZF, B::SF, B::OF].into_iter().enumerate() {
            if bits & b != 0 {
                s |= 1 << i;
            }
        }
        FlagSet(s)
    }
    pub fn contains(self, fl: Flag) -> bool {
        self.0 & (1 << fl as u8) != 0
    }
    pub fn union(self, o: FlagSet) -> FlagSet {
        FlagSet(self.0 | o.0)
    }
    pub fn minus(self, o: FlagSet) -> FlagSet {
        FlagSet(self.0 & !o.0)
    }
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl fmt::Debug for FlagSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for FlagSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("-");
        }
        let names: Vec<&str> =
            Flag::ALL.iter().filter(|fl| self.contains(**fl)).map(|fl| fl.name()).collect();
        f.write_str(&names.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for r in Gpr::ALL {
            assert_eq!(Gpr::from_name(r.name()), Some(r));
        }
        assert_eq!(RegSet::of(&[Gpr::Rax, Gpr::R15]).to_string(), "rax,r15");
        assert_eq!(FlagSet::ALL.to_string(), "cf,pf,af,zf,sf,of");
    }

    #[test]
    fn iced_subregisters_map_to_their_gpr() {
        use iced_x86::Register as R;
        assert_eq!(Gpr::from_iced(R::AH), Some(Gpr::Rax));
        assert_eq!(Gpr::from_iced(R::R10D), Some(Gpr::R10));
        assert_eq!(Gpr::from_iced(R::SIL), Some(Gpr::Rsi));
        assert_eq!(Gpr::from_iced(R::XMM0), None);
        assert_eq!(Gpr::from_iced(R::RIP), None);
    }
}
