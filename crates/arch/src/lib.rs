//! Architecture layer of kerf: typed addresses and x86-64 instruction facts. Pure: no I/O.

#![forbid(unsafe_code)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

pub mod addr;
pub mod hash;
pub mod x86_64;

pub use addr::{ImageAddr, KernelAddr, RemoteAddr};
