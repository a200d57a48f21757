//! Target memory through /proc/PID/mem, for a stopped [`Tracee`] and for [`RemoteMem`], which
//! outlives the stop: the one place where a short transfer becomes an error.

use super::{TraceSys, Tracee};
use crate::TargetError;
use kerf_arch::RemoteAddr;
use std::sync::Arc;

/// Reading and writing a target's memory.
pub trait TargetMemory {
    /// Read `buf.len()` bytes at `addr`; a short read (part of the range unmapped) is an
    /// error.
    fn read(&self, addr: RemoteAddr, buf: &mut [u8]) -> Result<(), TargetError>;
    /// Write `data` at `addr` (read-only code pages are written through, copy-on-write); a
    /// short write is an error.
    fn write(&self, addr: RemoteAddr, data: &[u8]) -> Result<(), TargetError>;
}

/// The memory of a process kerf is not holding stopped, through the /proc/PID/mem file a
/// [`Tracee`] opened (the kernel checked kerf's right to it then, while attached).
///
/// Its threads run meanwhile, so this is only for memory none of them can be executing or
/// reading: a code heap kerf mapped whose patches no splice leads to yet. Code the target
/// may run is written through a [`Tracee`], with the threads stopped and checked.
#[derive(Clone)]
pub struct RemoteMem {
    pid: i32,
    sys: Arc<dyn TraceSys>,
}

impl std::fmt::Debug for RemoteMem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteMem").field("pid", &self.pid).finish_non_exhaustive()
    }
}

impl RemoteMem {
    pub(super) fn new(pid: i32, sys: Arc<dyn TraceSys>) -> RemoteMem {
        RemoteMem { pid, sys }
    }
}

impl TargetMemory for RemoteMem {
    fn read(&self, addr: RemoteAddr, buf: &mut [u8]) -> Result<(), TargetError> {
        read(&*self.sys, self.pid, addr, buf)
    }

    fn write(&self, addr: RemoteAddr, data: &[u8]) -> Result<(), TargetError> {
        write(&*self.sys, self.pid, addr, data)
    }
}

impl TargetMemory for Tracee {
    fn read(&self, addr: RemoteAddr, buf: &mut [u8]) -> Result<(), TargetError> {
        Tracee::read(self, addr, buf)
    }

    fn write(&self, addr: RemoteAddr, data: &[u8]) -> Result<(), TargetError> {
        Tracee::write(self, addr, data)
    }
}

/// One `pread` of /proc/PID/mem.
pub(super) fn read(
    sys: &dyn TraceSys,
    pid: i32,
    addr: RemoteAddr,
    buf: &mut [u8],
) -> Result<(), TargetError> {
    let len = buf.len();
    if len == 0 {
        return Ok(());
    }
    let mem_err = |done, source| TargetError::Memory { pid, write: false, addr, len, done, source };
    match sys.read_mem(pid, addr, buf) {
        Ok(n) if n == len => Ok(()),
        Ok(n) => Err(mem_err(n, None)),
        Err(e) => Err(mem_err(0, Some(e))),
    }
}

/// One `pwrite` of /proc/PID/mem.
pub(super) fn write(
    sys: &dyn TraceSys,
    pid: i32,
    addr: RemoteAddr,
    data: &[u8],
) -> Result<(), TargetError> {
    let len = data.len();
    if len == 0 {
        return Ok(());
    }
    let mem_err = |done, source| TargetError::Memory { pid, write: true, addr, len, done, source };
    match sys.write_mem(pid, addr, data) {
        Ok(n) if n == len => Ok(()),
        Ok(n) => Err(mem_err(n, None)),
        Err(e) => Err(mem_err(0, Some(e))),
    }
}
