//! Where analysis reads bytes from: code regions to decode and data (jump tables) to read.
//! An ELF image answers from its file bytes; a live kernel will answer from a text snapshot.

use crate::image::{Image, Section};
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

/// An ELF image's memory as analysis reads it: code from its executable sections, data from
/// its allocated sections, pointers as the loader writes them. [`Image`] answers from one
/// (see [`Image::memory`]); one can also be made from an image's sections and pointers kept
/// after the image itself is gone, to check a cached analysis against the very bytes and the
/// same reading of them that a fresh analysis would use (`validate`).
#[derive(Clone, Copy)]
pub struct ImageMemory<'d, 's> {
    pub data: &'d [u8],
    pub sections: &'s [Section],
    /// Sorted by slot (see [`Image::pointers`]).
    pub pointers: &'s [(ImageAddr, ImageAddr)],
}

impl<'d> ImageMemory<'d, '_> {
    /// See [`Image::code_at`].
    pub fn code_at(&self, addr: ImageAddr) -> Option<(ImageAddr, &'d [u8])> {
        let section = exec_section_containing(self.sections, addr)?;
        Some((section.addr, section_bytes(self.data, section)?))
    }

    /// `len` bytes of an allocated section with file bytes at `addr` (see
    /// [`CodeMemory::read`]).
    pub fn bytes(&self, addr: ImageAddr, len: usize) -> Option<&'d [u8]> {
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
}

/// The executable section with file bytes whose address range contains `addr`.
pub(crate) fn exec_section_containing(sections: &[Section], addr: ImageAddr) -> Option<&Section> {
    sections.iter().find(|s| {
        s.executable && !s.nobits && s.size > 0 && addr.0 >= s.addr.0 && addr.0 - s.addr.0 < s.size
    })
}

/// The file bytes of `section`, when it has file bytes and they lie inside `data`.
pub(crate) fn section_bytes<'d>(data: &'d [u8], section: &Section) -> Option<&'d [u8]> {
    if section.nobits {
        return None;
    }
    let start = usize::try_from(section.file_offset).ok()?;
    let len = usize::try_from(section.size).ok()?;
    data.get(start..start.checked_add(len)?)
}

impl CodeMemory for ImageMemory<'_, '_> {
    fn code_region(&self, addr: ImageAddr) -> Option<(ImageAddr, &[u8])> {
        self.code_at(addr)
    }

    fn read(&self, addr: ImageAddr, len: usize) -> Option<&[u8]> {
        self.bytes(addr, len)
    }

    fn pointer(&self, slot: ImageAddr) -> Option<u64> {
        match self.pointers.binary_search_by_key(&slot, |p| p.0) {
            Ok(i) => Some(self.pointers[i].1 .0),
            Err(_) => Some(u64::from_le_bytes(self.bytes(slot, 8)?.try_into().ok()?)),
        }
    }
}

impl CodeMemory for Image<'_> {
    fn code_region(&self, addr: ImageAddr) -> Option<(ImageAddr, &[u8])> {
        self.code_at(addr)
    }

    fn read(&self, addr: ImageAddr, len: usize) -> Option<&[u8]> {
        self.memory().bytes(addr, len)
    }

    fn pointer(&self, slot: ImageAddr) -> Option<u64> {
        self.memory().pointer(slot)
    }
}
