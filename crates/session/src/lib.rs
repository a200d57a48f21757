//! The session layer (kerf's daemon role): load images from files, a live process's maps or
//! the live kernel, analyse them (with a cache keyed by build-id), resolve specs to points,
//! plan splices, and install and remove probes in a process or the kernel.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

pub mod backend;
mod builder;
pub mod cache;
pub mod checked;
pub mod debuginfo;
mod forked;
mod http;
pub mod installer;
pub mod instrument;
pub mod jit;
pub mod kernel;
pub mod live;
pub mod load;
mod patchset;
pub mod phases;
pub mod plan;
pub mod probe;
pub mod slabs;
pub mod spec;

pub use debuginfo::{DebugOptions, SymbolOrigin};
pub use load::{
    analyze_file, analyze_process, process_aliases, read_text_file, AnalyzedImage, LoadError,
    LoadOptions,
};
