//! Function ranges from `.eh_frame` call-frame information. Compilers emit an FDE for nearly
//! every function, including static ones a stripped library has no symbol for and the
//! `.cold` parts split off hot functions, so FDEs are the best source of function starts and
//! sizes after the symbol table.

use super::Image;
use gimli::{BaseAddresses, CieOrFde, EhFrame, LittleEndian, UnwindSection};
use kerf_arch::ImageAddr;

/// The code one FDE describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnwindRange {
    pub start: ImageAddr,
    pub len: u64,
    /// Its CIE's augmentation has `S`: the code is a signal trampoline (glibc's
    /// `__restore_rt`), entered by the kernel's return from a signal handler, never called.
    pub signal_frame: bool,
}

impl Image<'_> {
    /// Every FDE in `.eh_frame`, sorted by start. Empty when the image has no `.eh_frame`;
    /// malformed records end the walk (what was read before them is kept).
    pub fn unwind_ranges(&self) -> Vec<UnwindRange> {
        let Some(sec) = self.sections.iter().find(|s| s.name == ".eh_frame") else {
            return Vec::new();
        };
        let Some(bytes) = self.section_bytes(sec) else {
            return Vec::new();
        };
        let mut bases = BaseAddresses::default().set_eh_frame(sec.addr.0);
        if let Some(t) = self.sections.iter().find(|s| s.name == ".text") {
            bases = bases.set_text(t.addr.0);
        }
        if let Some(g) = self.sections.iter().find(|s| s.name == ".got") {
            bases = bases.set_got(g.addr.0);
        }
        let eh = EhFrame::new(bytes, LittleEndian);
        let mut out = Vec::new();
        let mut entries = eh.entries(&bases);
        while let Ok(Some(entry)) = entries.next() {
            if let CieOrFde::Fde(partial) = entry {
                if let Ok(fde) = partial.parse(EhFrame::cie_from_offset) {
                    if fde.len() > 0 {
                        out.push(UnwindRange {
                            start: ImageAddr(fde.initial_address()),
                            len: fde.len(),
                            signal_frame: fde.is_signal_trampoline(),
                        });
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// A register a frame's CFA is computed from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameBase {
    Rsp,
    Rbp,
}

/// Where the caller's `rbp` is, in the caller's frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SavedRbp {
    /// Not changed by the frame: the same value (also where the row does not name it).
    Same,
    /// Saved at this offset from the CFA.
    At(i64),
    /// Anywhere else (another register, an expression, undefined): not known.
    Lost,
}

/// How to find the caller of the frame that is at one address, from the FDE row there: the
/// CFA (the caller's stack pointer after the return) is `base + offset`, the return address
/// is at `CFA + ra_at`, and the caller's `rbp` is as `rbp` says. Only rows of that plain
/// form are given (no CFA expression, as a signal trampoline's): a walk stops at the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameRule {
    pub base: FrameBase,
    pub offset: i64,
    pub ra_at: i64,
    pub rbp: SavedRbp,
}

/// DWARF's numbers for x86-64's `rbp`, `rsp` and return address column.
const DWARF_RBP: u16 = 6;
const DWARF_RSP: u16 = 7;
const DWARF_RA: u16 = 16;

impl Image<'_> {
    /// The frame rule at image address `addr` (for a caller's frame, look up its return
    /// address minus one: the call, which may be the last instruction of an FDE's range),
    /// found through `.eh_frame_hdr`'s sorted table where the image has one, else by a scan
    /// of `.eh_frame`. `None`: no FDE covers `addr`, or its row is not of the plain form.
    pub fn frame_rule(&self, addr: ImageAddr) -> Option<FrameRule> {
        use gimli::{CfaRule, EhFrameHdr, Register, RegisterRule, UnwindContext};
        let section = |name: &str| self.sections.iter().find(|s| s.name == name);
        let sec = section(".eh_frame")?;
        let eh = EhFrame::new(self.section_bytes(sec)?, LittleEndian);
        let mut bases = BaseAddresses::default().set_eh_frame(sec.addr.0);
        if let Some(t) = section(".text") {
            bases = bases.set_text(t.addr.0);
        }
        if let Some(g) = section(".got") {
            bases = bases.set_got(g.addr.0);
        }
        let hdr = section(".eh_frame_hdr").and_then(|h| {
            bases = bases.clone().set_eh_frame_hdr(h.addr.0);
            EhFrameHdr::new(self.section_bytes(h)?, LittleEndian).parse(&bases, 8).ok()
        });
        let mut ctx = UnwindContext::new();
        let row = match hdr.as_ref().and_then(|h| h.table()) {
            Some(table) => table
                .unwind_info_for_address(&eh, &bases, &mut ctx, addr.0, EhFrame::cie_from_offset)
                .ok()?,
            None => eh
                .unwind_info_for_address(&bases, &mut ctx, addr.0, EhFrame::cie_from_offset)
                .ok()?,
        };
        let (base, offset) = match *row.cfa() {
            CfaRule::RegisterAndOffset { register: Register(DWARF_RSP), offset } => {
                (FrameBase::Rsp, offset)
            }
            CfaRule::RegisterAndOffset { register: Register(DWARF_RBP), offset } => {
                (FrameBase::Rbp, offset)
            }
            _ => return None,
        };
        let RegisterRule::Offset(ra_at) = row.register(Register(DWARF_RA)) else {
            return None;
        };
        // (A register the row does not name reads as undefined; for a callee-saved register
        // such as `rbp` that means it was not changed: compilers name it once they save it.)
        let rbp = match row.register(Register(DWARF_RBP)) {
            RegisterRule::SameValue | RegisterRule::Undefined => SavedRbp::Same,
            RegisterRule::Offset(n) => SavedRbp::At(n),
            _ => SavedRbp::Lost,
        };
        Some(FrameRule { base, offset, ra_at, rbp })
    }
}
