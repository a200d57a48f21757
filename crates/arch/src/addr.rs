//! Typed addresses, so that an image's link-time address is never confused with where a live
//! target has it mapped.

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
        assert_eq!(format!("{a}"), "0x1234");
    }
}
