//! Splices and code patches (KernInst §3.3–3.4, Djprobe §2–3; DESIGN.md §5). Pure: decides
//! which kind of splice a point can take, lays out the code patch (snippet, displaced
//! instructions relocated, jump back) and the bytes to write at the point; never writes.

#![forbid(unsafe_code)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

mod plan;
mod relocate;

pub use plan::{plan_jump2, plan_jump5, plan_trap, Displaced, FunctionView, Refusal};
pub use relocate::{build_patch, build_patch_with, patch_instructions, Layout, PatchError};

/// The kinds of splice, strongest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SpliceKind {
    /// `jmp rel32` straight to the code patch, displacing at least 5 bytes.
    Jump5,
    /// `jmp rel8` to a springboard within 128 bytes that jumps on to the patch.
    Jump2,
    /// `int3`: the target's trap handler sends the thread to the patch.
    Trap,
}

impl SpliceKind {
    pub fn name(self) -> &'static str {
        match self {
            SpliceKind::Jump5 => "jump5",
            SpliceKind::Jump2 => "jump2",
            SpliceKind::Trap => "trap",
        }
    }
}

/// The one-byte breakpoint a trap splice writes.
pub const INT3: u8 = 0xcc;

/// The bytes a `jump5` splice writes at `point`: `jmp rel32` to `patch`, then `int3` over the
/// rest of the displaced bytes (never executed: no branch lands there).
pub fn jump5_bytes(point: u64, patch: u64, displaced_len: usize) -> Option<Vec<u8>> {
    let rel = patch.wrapping_sub(point + 5) as i64;
    let rel = i32::try_from(rel).ok()?;
    let mut v = Vec::with_capacity(displaced_len.max(5));
    v.push(0xe9);
    v.extend_from_slice(&rel.to_le_bytes());
    v.resize(displaced_len.max(5), INT3);
    Some(v)
}

/// The bytes a `jump2` splice writes at `point`: `jmp rel8` to the springboard, then `int3`
/// over the rest of the displaced bytes.
pub fn jump2_bytes(point: u64, springboard: u64, displaced_len: usize) -> Option<Vec<u8>> {
    let rel = i8::try_from(springboard.wrapping_sub(point + 2) as i64).ok()?;
    let mut v = vec![0xeb, rel as u8];
    v.resize(displaced_len.max(2), INT3);
    Some(v)
}

/// Bytes of a springboard: a `jmp rel32` from the padding to the code patch.
pub const SPRINGBOARD_LEN: u64 = 5;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jump5_encodes_rel32_and_fills_with_int3() {
        let b = jump5_bytes(0x1000, 0x2000, 7).unwrap();
        assert_eq!(b, [0xe9, 0xfb, 0x0f, 0x00, 0x00, 0xcc, 0xcc]);
        let back = jump5_bytes(0x2000, 0x1000, 5).unwrap();
        assert_eq!(back, [0xe9, 0xfb, 0xef, 0xff, 0xff]);
        assert!(jump5_bytes(0x1000, 0x1_0000_1000, 5).is_none());
    }

    #[test]
    fn jump2_encodes_rel8_both_ways() {
        assert_eq!(jump2_bytes(0x1000, 0x1010, 3).unwrap(), [0xeb, 0x0e, 0xcc]);
        assert_eq!(jump2_bytes(0x1000, 0x0f90, 2).unwrap(), [0xeb, 0x8e]);
        assert!(jump2_bytes(0x1000, 0x1100, 2).is_none());
    }
}
