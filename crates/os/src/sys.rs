//! The file reads kerf makes about processes and the system (/proc, /sys, a process's
//! files), behind a trait so that tests can substitute a fake /proc (no root, no live
//! process, deterministic errors).

use std::io;
use std::path::{Path, PathBuf};

/// Read-only file access to /proc and the target's files.
pub trait ProcSys: Send + Sync {
    fn read_to_string(&self, path: &Path) -> io::Result<String>;
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Whether `path` exists and can be looked up (a path kerf may not search is "absent").
    fn exists(&self, path: &Path) -> bool;
    /// The target of symbolic link `path` (/proc/PID/exe).
    fn read_link(&self, path: &Path) -> io::Result<PathBuf>;
    /// The device and inode of the file `path` leads to (symlinks followed): two paths name
    /// one file when these are equal.
    fn file_id(&self, path: &Path) -> io::Result<(u64, u64)>;
    /// The names in directory `path` (/sys/module/NAME/sections), in no particular order.
    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>>;
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

    fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
        std::fs::read_link(path)
    }

    fn file_id(&self, path: &Path) -> io::Result<(u64, u64)> {
        use std::os::unix::fs::MetadataExt;
        let m = std::fs::metadata(path)?;
        Ok((m.dev(), m.ino()))
    }

    fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        for entry in std::fs::read_dir(path)? {
            names.push(entry?.file_name().to_string_lossy().into_owned());
        }
        Ok(names)
    }
}

/// Whether the running kernel's release (`/proc/sys/kernel/osrelease`, "6.1.0-27-amd64") is
/// `major.minor` or later; `None` when it cannot be read or parsed.
pub fn kernel_at_least(sys: &dyn ProcSys, major: u32, minor: u32) -> Option<bool> {
    let text = sys.read_to_string(Path::new("/proc/sys/kernel/osrelease")).ok()?;
    release_at_least(&text, major, minor)
}

fn release_at_least(release: &str, major: u32, minor: u32) -> Option<bool> {
    let mut parts = release.trim().split(['.', '-']);
    let a: u32 = parts.next()?.parse().ok()?;
    let b: u32 = parts.next()?.parse().ok()?;
    Some((a, b) >= (major, minor))
}

#[cfg(test)]
mod release_tests {
    #[test]
    fn releases_compare_by_major_then_minor() {
        use super::release_at_least as at;
        assert_eq!(at("6.1.0-27-amd64\n", 4, 8), Some(true));
        assert_eq!(at("4.8.0", 4, 8), Some(true));
        assert_eq!(at("4.4.302-rt", 4, 8), Some(false));
        assert_eq!(at("3.19.8", 4, 8), Some(false));
        assert_eq!(at("garbage", 4, 8), None);
    }
}
