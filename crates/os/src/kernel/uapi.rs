//! The ioctl ABI of /dev/kerf, mirrored from `driver/kerf_uapi.h` (the header is the
//! authority; every struct there is fixed-size with explicit 64-bit fields, so `repr(C)` gives
//! the same layout). A test checks the sizes the ioctl numbers encode.

/// The ABI this build of kerf speaks; the driver reports its own with `KERF_IOC_VERSION`.
pub const ABI_VERSION: u64 = 3;
pub const DEVICE_PATH: &str = "/dev/kerf";
pub const RELEASE_LEN: usize = 64;
pub const READ_MAX: u64 = 16 << 20;
/// [`Splice::flags`]: the replaced bytes are exactly one instruction (or padding never run),
/// so no int3-and-quiesce step is needed first.
pub const SPLICE_ONE_INSN: u64 = 1;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Version {
    pub abi: u64,
    pub reserved: u64,
    pub built_for: [u8; RELEASE_LEN],
    pub running: [u8; RELEASE_LEN],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Info {
    pub patch_heap: u64,
    pub patch_heap_size: u64,
    pub data_heap: u64,
    pub data_heap_size: u64,
    pub stext: u64,
    pub etext: u64,
    pub max_splices: u64,
    pub max_traps: u64,
    pub live_splices: u64,
    pub live_traps: u64,
    pub quiesce_count: u64,
    pub trap_hits: u64,
    /// Offset in the patch heap just past the last code any session wrote since the driver
    /// was loaded: where the next session starts (see `kerf_session::kernel`).
    pub patch_next: u64,
    pub reserved: [u64; 3],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Rw {
    pub addr: u64,
    pub len: u64,
    pub user_buf: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Splice {
    pub addr: u64,
    pub len: u64,
    pub flags: u64,
    pub expect_old: [u8; 8],
    pub new_bytes: [u8; 8],
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Unsplice {
    pub addr: u64,
    pub len: u64,
    pub restored: [u8; 8],
}

/// The header of the batch requests (`KERF_IOC_SPLICE_BATCH`, `_UNSPLICE_BATCH`,
/// `_TRAP_ADD_BATCH`, `_TRAP_DEL_BATCH`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Batch {
    /// User pointer to `count` [`SpliceEntry`], [`UnspliceEntry`] or [`TrapEntry`].
    pub entries: u64,
    pub count: u64,
    /// Out: entries whose result is 0.
    pub done: u64,
    pub reserved: u64,
}

/// Most entries in one batch call.
pub const BATCH_MAX: usize = 4096;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct SpliceEntry {
    pub req: Splice,
    /// Out: 0 or the negated errno of this entry.
    pub result: i64,
    pub reserved: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct UnspliceEntry {
    pub req: Unsplice,
    /// Out: 0 or the negated errno of this entry.
    pub result: i64,
    pub reserved: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct Trap {
    pub addr: u64,
    pub patch: u64,
}

/// An entry of `KERF_IOC_TRAP_ADD_BATCH` / `KERF_IOC_TRAP_DEL_BATCH`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct TrapEntry {
    pub req: Trap,
    /// Out: 0 or the negated errno of this entry.
    pub result: i64,
    pub reserved: u64,
}

const MAGIC: u64 = 0xb7;
const NONE: u64 = 0;
const WRITE: u64 = 1;
const READ: u64 = 2;

/// `_IOC(dir, 0xB7, nr, size)` as `<asm-generic/ioctl.h>` builds it.
const fn ioc(dir: u64, nr: u64, size: usize) -> u64 {
    (dir << 30) | ((size as u64) << 16) | (MAGIC << 8) | nr
}

pub const IOC_VERSION: u64 = ioc(READ, 0x00, std::mem::size_of::<Version>());
pub const IOC_INFO: u64 = ioc(READ, 0x01, std::mem::size_of::<Info>());
pub const IOC_READ: u64 = ioc(WRITE, 0x02, std::mem::size_of::<Rw>());
pub const IOC_WRITE_PATCH: u64 = ioc(WRITE, 0x03, std::mem::size_of::<Rw>());
pub const IOC_SPLICE: u64 = ioc(WRITE, 0x04, std::mem::size_of::<Splice>());
pub const IOC_UNSPLICE: u64 = ioc(READ | WRITE, 0x05, std::mem::size_of::<Unsplice>());
pub const IOC_QUIESCE: u64 = ioc(NONE, 0x06, 0);
pub const IOC_TRAP_ADD: u64 = ioc(WRITE, 0x07, std::mem::size_of::<Trap>());
pub const IOC_TRAP_DEL: u64 = ioc(WRITE, 0x08, std::mem::size_of::<Trap>());
pub const IOC_SPLICE_BATCH: u64 = ioc(READ | WRITE, 0x09, std::mem::size_of::<Batch>());
pub const IOC_UNSPLICE_BATCH: u64 = ioc(READ | WRITE, 0x0a, std::mem::size_of::<Batch>());
pub const IOC_TRAP_ADD_BATCH: u64 = ioc(READ | WRITE, 0x0b, std::mem::size_of::<Batch>());
pub const IOC_TRAP_DEL_BATCH: u64 = ioc(READ | WRITE, 0x0c, std::mem::size_of::<Batch>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_header() {
        assert_eq!(std::mem::size_of::<Version>(), 144);
        assert_eq!(std::mem::size_of::<Info>(), 128);
        assert_eq!(std::mem::size_of::<Rw>(), 24);
        assert_eq!(std::mem::size_of::<Splice>(), 40);
        assert_eq!(std::mem::size_of::<Unsplice>(), 24);
        assert_eq!(std::mem::size_of::<Trap>(), 16);
        assert_eq!(std::mem::size_of::<Batch>(), 32);
        assert_eq!(std::mem::size_of::<SpliceEntry>(), 56);
        assert_eq!(std::mem::size_of::<UnspliceEntry>(), 40);
        assert_eq!(std::mem::size_of::<TrapEntry>(), 32);
        // _IOWR(0xB7, 0x09, 32 bytes)
        assert_eq!(IOC_SPLICE_BATCH, 0xc020_b709);
        assert_eq!(IOC_UNSPLICE_BATCH, 0xc020_b70a);
        assert_eq!(IOC_TRAP_ADD_BATCH, 0xc020_b70b);
        assert_eq!(IOC_TRAP_DEL_BATCH, 0xc020_b70c);
        // _IOR(0xB7, 0x01, 128 bytes)
        assert_eq!(IOC_INFO, 0x8080_b701);
        assert_eq!(IOC_QUIESCE, 0xb706);
    }
}
