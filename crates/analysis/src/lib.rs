//! Structural analysis of machine code (KernInst §3.2): images and symbols, functions, basic
//! blocks, edges, jump tables, padding, call graph and register liveness. Pure: works on bytes
//! handed to it and never touches a live target.

#![forbid(unsafe_code)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

pub mod callgraph;
pub mod cfg;
pub mod image;
pub mod liveness;
pub mod memory;
pub mod noreturn;
pub mod program;
pub mod syscalls;
pub mod validate;

pub use program::{analyze, Analysis, Progress, Quiet, Summary};
