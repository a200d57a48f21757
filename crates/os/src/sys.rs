//! The system calls the process target makes, behind a trait so that tests can substitute a
//! fake /proc (no root, no live process, deterministic errors).

use std::io;
use std::path::Path;

/// Read-only file access to /proc and the target's files.
pub trait ProcSys: Send + Sync {
    fn read_to_string(&self, path: &Path) -> io::Result<String>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Whether `path` exists and can be looked up (a path kerf may not search is "absent").
    fn exists(&self, path: &Path) -> bool;
}

/// The real operating system.
#[derive(Clone, Copy, Debug, Default)]
pub struct RealSys;

impl ProcSys for RealSys {
    fn read_to_string(&self, path: &Path) -> io::Result<String> {
        std::fs::read_to_string(path)
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn exists(&self, path: &Path) -> bool {
        // metadata() follows symlinks: /proc/PID/root must lead somewhere we can look.
        std::fs::metadata(path).is_ok()
    }
}
