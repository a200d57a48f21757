//! Typed addresses, so that an image's link-time address is never confused with where a live
//! target has it mapped.
//!
//! The rule for bare integers next to them: a `u64` is a *length* or an *offset* (a size, a
//! distance, a displacement into a region, a load bias), never an address. An address plus or
//! minus a length is an address of the same space (`addr + len`); the difference of two
//! addresses of one space is an offset (`end - start`). Moving between spaces is explicit:
//! [`ImageAddr::at_bias`] and [`RemoteAddr::in_image`] with a module's load bias (runtime
//! address minus image address, itself an offset). `.get()`/`.0` is for the edges only:
//! printing, system call arguments, and encoding an address as data (an immediate, a table).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! addr_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize)]
        pub struct $name(pub u64);

        impl $name {
            /// The raw value, for arithmetic at the edges (printing, system calls).
            pub fn get(self) -> u64 {
                self.0
            }
            /// This address moved by `delta` bytes (wrapping, as the CPU does).
            pub fn offset(self, delta: i64) -> Self {
                $name(self.0.wrapping_add(delta as u64))
            }
            /// How far apart two addresses are, whichever is lower.
            pub fn distance(self, other: Self) -> u64 {
                self.0.abs_diff(other.0)
            }
            /// Rounded down to a multiple of `align` (a power of two).
            pub fn align_down(self, align: u64) -> Self {
                debug_assert!(align.is_power_of_two());
                $name(self.0 & !(align - 1))
            }
            /// Rounded up to a multiple of `align` (a power of two), saturating at the top.
            pub fn align_up(self, align: u64) -> Self {
                debug_assert!(align.is_power_of_two());
                $name(self.0.saturating_add(align - 1) & !(align - 1))
            }
        }

        /// An address plus a length or offset is an address (wrapping, as the CPU does).
        impl std::ops::Add<u64> for $name {
            type Output = $name;
            fn add(self, len: u64) -> $name {
                $name(self.0.wrapping_add(len))
            }
        }

        impl std::ops::AddAssign<u64> for $name {
            fn add_assign(&mut self, len: u64) {
                self.0 = self.0.wrapping_add(len);
            }
        }

        /// An address less a length or offset is an address (wrapping).
        impl std::ops::Sub<u64> for $name {
            type Output = $name;
            fn sub(self, len: u64) -> $name {
                $name(self.0.wrapping_sub(len))
            }
        }

        /// The difference of two addresses of one space is an offset, not an address
        /// (wrapping: take the higher minus the lower, or use [`Self::distance`]).
        impl std::ops::Sub<$name> for $name {
            type Output = u64;
            fn sub(self, base: $name) -> u64 {
                self.0.wrapping_sub(base.0)
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:#x})", stringify!($name), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }

        impl fmt::LowerHex for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::LowerHex::fmt(&self.0, f)
            }
        }
    };
}

addr_type!(
    /// An address in an image's own (link-time) address space: ELF `st_value`, `sh_addr`.
    ImageAddr
);
addr_type!(
    /// An address in a live process: an [`ImageAddr`] plus the module's load bias.
    RemoteAddr
);
addr_type!(
    /// An address in the running kernel.
    KernelAddr
);

impl ImageAddr {
    /// Where this image address lives in a process that loaded the image with `bias`.
    pub fn at_bias(self, bias: u64) -> RemoteAddr {
        RemoteAddr(self.0.wrapping_add(bias))
    }
    /// The load bias that puts this image address at `remote` (wrapping: a bias is an
    /// offset, and an image linked high may be loaded lower).
    pub fn bias_to(self, remote: RemoteAddr) -> u64 {
        remote.0.wrapping_sub(self.0)
    }
}

impl RemoteAddr {
    /// The image address of this remote address, for a module loaded with `bias`.
    pub fn in_image(self, bias: u64) -> ImageAddr {
        ImageAddr(self.0.wrapping_sub(bias))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bias_round_trip() {
        let a = ImageAddr(0x1234);
        let r = a.at_bias(0x7f00_0000_0000);
        assert_eq!(r, RemoteAddr(0x7f00_0000_1234));
        assert_eq!(r.in_image(0x7f00_0000_0000), a);
        assert_eq!(a.bias_to(r), 0x7f00_0000_0000);
        assert_eq!(ImageAddr(0x40_1000).bias_to(RemoteAddr(0x1000)), 0u64.wrapping_sub(0x40_0000));
        assert_eq!(format!("{a}"), "0x1234");
    }

    #[test]
    fn lengths_and_offsets() {
        let a = RemoteAddr(0x7f00_0000_1234);
        assert_eq!(a + 0x10, RemoteAddr(0x7f00_0000_1244));
        assert_eq!(a - 0x234, RemoteAddr(0x7f00_0000_1000));
        assert_eq!((a + 0x10) - a, 0x10);
        assert_eq!(a.distance(a + 5), 5);
        assert_eq!((a + 5).distance(a), 5);
        assert_eq!(a.align_down(0x1000), RemoteAddr(0x7f00_0000_1000));
        assert_eq!(a.align_up(0x1000), RemoteAddr(0x7f00_0000_2000));
        assert_eq!(RemoteAddr(0x2000).align_up(0x1000), RemoteAddr(0x2000));
        assert_eq!(RemoteAddr(u64::MAX).align_up(0x1000), RemoteAddr(0xffff_ffff_ffff_f000));
        let mut b = a;
        b += 0x1000;
        assert_eq!(b - a, 0x1000);
    }
}
