//! Whether this machine's CPU counts hardware events for Linux (a PMU: cycles, instructions,
//! cache misses), found by opening one such counter on kerf's own thread and closing it.
//!
//! Virtual machines often have none (QEMU under TCG never does; KVM only with a virtual PMU),
//! and then `perf_event_open` of a `PERF_TYPE_HARDWARE` event fails with `ENOENT` (or
//! `EOPNOTSUPP`): kerf says so in plain words instead of counting nothing.

use std::fmt;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// `PERF_TYPE_HARDWARE`.
const PERF_TYPE_HARDWARE: u32 = 0;
/// `PERF_ATTR_SIZE_VER0`: the first 64 bytes of `struct perf_event_attr` are all we set.
const ATTR_SIZE: usize = 64;
/// `perf_event_attr` flag bits (the u64 at byte 40): disabled, exclude_kernel, exclude_hv.
const FLAG_DISABLED: u64 = 1;
const FLAG_EXCLUDE_KERNEL: u64 = 1 << 5;
const FLAG_EXCLUDE_HV: u64 = 1 << 6;
const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 8;

/// The generalised hardware events of `perf_event_open(2)`, by the names `perf` gives them.
pub const EVENTS: [(&str, u64); 6] = [
    ("cycles", 0),
    ("instructions", 1),
    ("cache-references", 2),
    ("cache-misses", 3),
    ("branches", 4),
    ("branch-misses", 5),
];

/// Why a hardware event cannot be counted here.
#[derive(Debug)]
pub enum PmuError {
    /// Not one of [`EVENTS`].
    UnknownEvent { name: String },
    /// The kernel would not open the counter.
    Unavailable {
        event: &'static str,
        source: io::Error,
        /// Whether Linux registered a CPU PMU at all (`/sys/bus/event_source/devices/cpu`).
        cpu_pmu: bool,
    },
}

impl fmt::Display for PmuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PmuError::UnknownEvent { name } => {
                let known: Vec<&str> = EVENTS.iter().map(|e| e.0).collect();
                write!(f, "unknown hardware event '{name}' (known: {})", known.join(", "))
            }
            PmuError::Unavailable { event, source, cpu_pmu: false } => write!(
                f,
                "this machine's CPU exposes no hardware performance counters to Linux (no PMU: \
                 /sys/bus/event_source/devices has no 'cpu', and perf_event_open of '{event}' \
                 says: {source}); a virtual machine without a virtual PMU is like that"
            ),
            PmuError::Unavailable { event, source, cpu_pmu: true } => write!(
                f,
                "the CPU has a PMU, but the kernel would not count '{event}' for kerf \
                 (perf_event_open: {source}; see /proc/sys/kernel/perf_event_paranoid)"
            ),
        }
    }
}

impl std::error::Error for PmuError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PmuError::Unavailable { source, .. } => Some(source),
            PmuError::UnknownEvent { .. } => None,
        }
    }
}

/// The event called `name` (a name of [`EVENTS`]).
pub fn event(name: &str) -> Result<(&'static str, u64), PmuError> {
    EVENTS
        .iter()
        .find(|e| e.0 == name)
        .copied()
        .ok_or_else(|| PmuError::UnknownEvent { name: name.to_string() })
}

/// Open the hardware counter `name` on this thread (disabled, user mode only) and close it
/// again: `Ok` if this machine can count it.
pub fn check(name: &str) -> Result<(), PmuError> {
    let (event, config) = event(name)?;
    let mut attr = [0u8; ATTR_SIZE];
    attr[0..4].copy_from_slice(&PERF_TYPE_HARDWARE.to_ne_bytes());
    attr[4..8].copy_from_slice(&(ATTR_SIZE as u32).to_ne_bytes());
    attr[8..16].copy_from_slice(&config.to_ne_bytes());
    let flags = FLAG_DISABLED | FLAG_EXCLUDE_KERNEL | FLAG_EXCLUDE_HV;
    attr[40..48].copy_from_slice(&flags.to_ne_bytes());
    // SAFETY: `attr` is a zero-filled perf_event_attr of the size it declares; pid 0 and CPU
    // -1 ask for this thread on any CPU; no group.
    let r = unsafe {
        libc::syscall(libc::SYS_perf_event_open, attr.as_ptr(), 0, -1, -1, PERF_FLAG_FD_CLOEXEC)
    };
    if r < 0 {
        let source = io::Error::last_os_error();
        let cpu_pmu = std::path::Path::new("/sys/bus/event_source/devices/cpu").exists();
        return Err(PmuError::Unavailable { event, source, cpu_pmu });
    }
    // SAFETY: a descriptor the kernel just made for us; dropping it closes it.
    drop(unsafe { OwnedFd::from_raw_fd(r as i32) });
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_perfs() {
        assert_eq!(event("cache-misses").unwrap(), ("cache-misses", 3));
        let e = event("cycle").unwrap_err().to_string();
        assert!(e.contains("unknown hardware event 'cycle'") && e.contains("instructions"), "{e}");
    }
}
