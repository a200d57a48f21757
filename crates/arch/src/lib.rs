//! Architecture layer of kerf: typed addresses and x86-64 instruction facts. Pure: no I/O.

pub mod addr;
pub mod x86_64;

pub use addr::{ImageAddr, KernelAddr, RemoteAddr};
