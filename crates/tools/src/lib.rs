//! kerf's tools. Each live tool is a module with a type implementing [`live::LiveTool`]: how
//! it builds its probes from a target's images, its live table and its summary. [`live::run`]
//! runs any of them the same way against the one target the user chose (a process or the
//! kernel, [`Target`]), and returns its results as data that the CLI prints as a table or as
//! JSON. `analyze` renders analyses and offline splice plans; `demo` is the bundled workload
//! and its driver. Errors are [`ToolError`]s.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

pub mod analyze;
pub mod count;
pub mod cover;
pub mod demo;
pub mod error;
pub mod hunt;
pub mod jit;
pub mod jit_callback;
pub mod jit_calls;
pub mod live;
pub mod locks;
pub mod openmetrics;
pub mod plot;
pub mod sum;
pub mod time;
pub mod top;
pub mod trace;

pub use error::ToolError;
pub use kerf_analysis::{Progress, Quiet};
pub use kerf_patch::SpliceKind;
pub use kerf_session::live::{Choice, Sampling, Target};
