//! The only OS-facing layer of kerf (DESIGN.md §2): live targets. For now a read-only view of
//! a process through /proc. Every system call goes through [`sys`], so that tests can
//! replace the operating system with a fake.

pub mod error;
pub mod process;
pub mod sys;

pub use error::TargetError;
pub use process::Process;
