//! Helpers shared by the JIT crate's tests that run generated sequences in this process:
//! building iced instructions with labels, and executable mappings.

#![allow(dead_code)] // each test binary uses its own subset

use iced_x86::{Instruction, MemoryOperand, Register};

pub fn op(r: Result<Instruction, iced_x86::IcedError>) -> Instruction {
    r.unwrap()
}

pub fn labelled(mut i: Instruction, l: u64) -> Instruction {
    i.set_ip(l);
    i
}

pub fn at(base: Register, disp: i64) -> MemoryOperand {
    MemoryOperand::with_base_displ(base, disp)
}

/// An anonymous mapping, unmapped when dropped.
pub struct Mapping {
    pub at: *mut u8,
    len: usize,
}

impl Mapping {
    /// `len` bytes, at `hint` exactly if given (else where the kernel chooses).
    pub fn new(hint: Option<u64>, len: usize, exec: bool) -> Mapping {
        let prot = libc::PROT_READ | libc::PROT_WRITE | if exec { libc::PROT_EXEC } else { 0 };
        let fixed = if hint.is_some() { libc::MAP_FIXED_NOREPLACE } else { 0 };
        // SAFETY: an anonymous mapping that replaces nothing (MAP_FIXED_NOREPLACE); the
        // result is checked.
        let at = unsafe {
            libc::mmap(
                hint.unwrap_or(0) as *mut libc::c_void,
                len,
                prot,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | fixed,
                -1,
                0,
            )
        };
        assert_ne!(at, libc::MAP_FAILED, "mmap {hint:x?}");
        Mapping { at: at as *mut u8, len }
    }

    pub fn addr(&self) -> u64 {
        self.at as u64
    }

    pub fn word(&self, off: u64) -> u64 {
        assert!(off as usize + 8 <= self.len);
        // SAFETY: an aligned word inside the mapping.
        unsafe { std::ptr::read_volatile(self.at.add(off as usize) as *const u64) }
    }

    pub fn set_word(&self, off: u64, v: u64) {
        assert!(off as usize + 8 <= self.len);
        // SAFETY: an aligned word inside the mapping.
        unsafe { std::ptr::write_volatile(self.at.add(off as usize) as *mut u64, v) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, no longer used.
        unsafe { libc::munmap(self.at as *mut libc::c_void, self.len) };
    }
}
