//! Errors of the target layer. Each says which process and what kerf was doing, in one line,
//! so that the CLI can print it as is.

use std::fmt;
use std::io;
use std::path::PathBuf;

#[derive(Debug)]
pub enum TargetError {
    /// No process with this PID (or it exited while kerf was looking at it).
    NoSuchProcess { pid: i32 },
    /// The kernel refused (EACCES/EPERM): reading another user's process needs root or
    /// ptrace access (see /proc/sys/kernel/yama/ptrace_scope).
    PermissionDenied { pid: i32, op: String },
    /// Any other I/O failure.
    Io { pid: i32, op: String, path: PathBuf, source: io::Error },
}

impl TargetError {
    /// Classify an I/O error from operation `op` on `path` of process `pid`.
    pub(crate) fn from_io(pid: i32, op: String, path: PathBuf, source: io::Error) -> TargetError {
        const ESRCH: i32 = 3;
        if source.kind() == io::ErrorKind::PermissionDenied {
            return TargetError::PermissionDenied { pid, op };
        }
        if source.raw_os_error() == Some(ESRCH) {
            return TargetError::NoSuchProcess { pid };
        }
        TargetError::Io { pid, op, path, source }
    }

    pub fn pid(&self) -> i32 {
        match self {
            TargetError::NoSuchProcess { pid }
            | TargetError::PermissionDenied { pid, .. }
            | TargetError::Io { pid, .. } => *pid,
        }
    }
}

impl fmt::Display for TargetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetError::NoSuchProcess { pid } => write!(f, "process {pid} does not exist"),
            TargetError::PermissionDenied { op, .. } => {
                write!(f, "no permission to {op} (need root or ptrace access)")
            }
            TargetError::Io { pid, op, source, .. } => {
                write!(f, "cannot {op} (process {pid}): {source}")
            }
        }
    }
}

impl std::error::Error for TargetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            TargetError::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
