//! The only OS-facing layer of kerf (DESIGN.md §2): live targets. A read-only view of a
//! process through /proc ([`process`]), live control of it ([`ptrace`]: stop, read and
//! write memory, inject system calls, map memory near its code, resume), what becomes of it
//! ([`watch`]: its exit status, an `exec`), and the live kernel through kerf's driver
//! ([`kernel`]). Every read of /proc and /sys and every system call goes through a trait
//! ([`sys::ProcSys`], [`ptrace::TraceSys`], [`kernel::DriverSys`]), so that tests can replace
//! the operating system with a fake; the exceptions, tested against real processes, are the
//! pidfd calls of [`watch`], the socket of [`ptrace::claim`] and the counter [`pmu`] opens on
//! kerf's own thread, which touch no target.
//!
//! Addresses in a process are [`kerf_arch::RemoteAddr`], in the kernel
//! [`kerf_arch::KernelAddr`]; a `u64` in this API is a length, an offset, a file descriptor or
//! a system call's raw argument or result. Errors ([`TargetError`], [`kernel::KernelError`])
//! carry their context as fields: process, thread, operation, address, path, OS error.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

pub mod bpf;
pub mod clock;
pub mod error;
pub mod inherit;
pub mod kernel;
pub mod pmu;
pub mod process;
pub mod ptrace;
pub mod seccomp;
pub mod sys;
pub mod watch;

pub use error::TargetError;
pub use process::Process;
pub use ptrace::{spawn, Pause, SharedMem, Tracee};
