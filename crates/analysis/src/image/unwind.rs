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
