//! The only OS-facing layer of kerf (DESIGN.md §2): live targets. A read-only view of a
//! process through /proc ([`process`]), live control of it ([`ptrace`]: stop, read and
//! write memory, inject system calls, map memory near its code, resume), what becomes of it
//! ([`watch`]: its exit status, an `exec`), and the live kernel through kerf's driver
//! ([`kernel`]). Every system call goes through a trait ([`sys::ProcSys`],
//! [`ptrace::TraceSys`]), so that tests can replace the operating system with a fake; the
//! few in [`watch`] are tested against real processes.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

pub mod error;
pub mod kernel;
pub mod process;
pub mod ptrace;
pub mod sys;
pub mod watch;

pub use error::TargetError;
pub use process::Process;
pub use ptrace::{spawn, Pause, SharedMem, Tracee};
