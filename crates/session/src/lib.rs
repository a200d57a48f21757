//! The session layer (kerf's daemon role). For now: load images from files or from a live
//! process's maps, analyse them, and keep analyses in a cache keyed by build-id.

pub mod cache;
pub mod instrument;
pub mod load;
pub mod spec;

pub use load::{analyze_file, analyze_process, AnalyzedImage, LoadError, LoadOptions};
