//! Where analysis reads bytes from: code regions to decode and data (jump tables) to read.
//! An ELF image answers from its file bytes; a live kernel will answer from a text snapshot.

use crate::image::Image;
use kerf_arch::ImageAddr;

/// Read-only view of an image's memory, in its own address space.
pub trait CodeMemory: Sync {
    /// The executable region containing `addr`: its start and its bytes.
    fn code_region(&self, addr: ImageAddr) -> Option<(ImageAddr, &[u8])>;
    /// `len` bytes of initialised memory (code or data) at `addr`.
    fn read(&self, addr: ImageAddr, len: usize) -> Option<&[u8]>;
    /// The 8-byte pointer at `slot` as the loaded program sees it: what a load-time
    /// relocation writes there, else the bytes in the file.
    fn pointer(&self, slot: ImageAddr) -> Option<u64> {
        Some(u64::from_le_bytes(self.read(slot, 8)?.try_into().ok()?))
    }
}

impl CodeMemory for Image<'_> {
    fn code_region(&self, addr: ImageAddr) -> Option<(ImageAddr, &[u8])> {
        self.code_at(addr)
    }

    fn read(&self, addr: ImageAddr, len: usize) -> Option<&[u8]> {
        let sec = self.sections.iter().find(|s| {
            s.alloc && !s.nobits && addr >= s.addr && addr.0 < s.addr.0.saturating_add(s.size)
        })?;
        let within = addr.0 - sec.addr.0;
        if within.checked_add(len as u64)? > sec.size {
            return None;
        }
        let start = usize::try_from(sec.file_offset.checked_add(within)?).ok()?;
        self.data.get(start..start.checked_add(len)?)
    }

    fn pointer(&self, slot: ImageAddr) -> Option<u64> {
        match self.pointer_at(slot) {
            Some(v) => Some(v.0),
            None => Some(u64::from_le_bytes(self.read(slot, 8)?.try_into().ok()?)),
        }
    }
}
