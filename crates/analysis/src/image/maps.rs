//! `/proc/PID/maps` text: the mappings of a process, grouped into modules (one per mapped
//! file, plus the vDSO), and each module's load bias, which turns image addresses into
//! addresses in that process. Pure: the text is read by `kerf-os`.

use super::Segment;
use kerf_arch::{ImageAddr, RemoteAddr};
use std::fmt;

/// One line of a maps file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub start: RemoteAddr,
    /// One past the last byte.
    pub end: RemoteAddr,
    pub read: bool,
    pub write: bool,
    pub exec: bool,
    /// `p` (copy-on-write) rather than `s` (shared).
    pub private: bool,
    /// Offset in the mapped file of `start`.
    pub offset: u64,
    /// `major:minor` of the device holding the file, as printed (hex).
    pub dev: String,
    pub inode: u64,
    /// The path or pseudo-path (`[heap]`, `[vdso]`, `[anon:name]`); `None` for anonymous
    /// memory. Kept as the kernel prints it, including a ` (deleted)` suffix.
    pub path: Option<String>,
}

impl Mapping {
    pub fn len(&self) -> u64 {
        self.end.0.saturating_sub(self.start.0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, addr: RemoteAddr) -> bool {
        addr >= self.start && addr < self.end
    }

    /// The kernel appends ` (deleted)` when the mapped file has been unlinked or replaced
    /// (e.g. by a package upgrade): the file at `path` is then not the mapped one.
    pub fn is_deleted(&self) -> bool {
        self.path.as_deref().is_some_and(|p| p.ends_with(" (deleted)"))
    }
}

/// A maps line that does not parse.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsError {
    /// 1-based.
    pub line_no: usize,
    pub line: String,
    pub detail: &'static str,
}

impl fmt::Display for MapsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "maps line {}: {}: {:?}", self.line_no, self.detail, self.line)
    }
}

impl std::error::Error for MapsError {}

/// Parse the text of a `/proc/PID/maps` file. Blank lines are skipped.
pub fn parse_maps(text: &str) -> Result<Vec<Mapping>, MapsError> {
    let mut out = Vec::new();
    for (index, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        out.push(parse_line(line).map_err(|detail| MapsError {
            line_no: index + 1,
            line: line.chars().take(300).collect(),
            detail,
        })?);
    }
    Ok(out)
}

/// `start-end perms offset dev inode [path]`, e.g.
/// `7f2c1a200000-7f2c1a228000 r--p 00000000 fd:01 1835 /usr/lib/x86_64-linux-gnu/libc.so.6`.
fn parse_line(line: &str) -> Result<Mapping, &'static str> {
    let (range, rest) = field(line).ok_or("missing address range")?;
    let (start, end) = range.split_once('-').ok_or("address range without '-'")?;
    let start = hex(start).ok_or("bad start address")?;
    let end = hex(end).ok_or("bad end address")?;
    if end < start {
        return Err("end address below start address");
    }

    let (perms, rest) = field(rest).ok_or("missing permissions")?;
    let p = perms.as_bytes();
    if p.len() != 4
        || !matches!(p[0], b'r' | b'-')
        || !matches!(p[1], b'w' | b'-')
        || !matches!(p[2], b'x' | b'-')
        || !matches!(p[3], b'p' | b's')
    {
        return Err("bad permissions (want e.g. r-xp)");
    }

    let (offset, rest) = field(rest).ok_or("missing offset")?;
    let offset = hex(offset).ok_or("bad offset")?;
    let (dev, rest) = field(rest).ok_or("missing device")?;
    match dev.split_once(':') {
        Some((major, minor)) if hex(major).is_some() && hex(minor).is_some() => {}
        _ => return Err("bad device (want major:minor)"),
    }
    let (inode, rest) = field(rest).ok_or("missing inode")?;
    if inode.is_empty() || !inode.bytes().all(|b| b.is_ascii_digit()) {
        return Err("bad inode");
    }
    let inode: u64 = inode.parse().map_err(|_| "bad inode")?;

    // The kernel pads to a column before the path; the path itself may contain spaces.
    let path = rest.trim_start_matches(' ');
    Ok(Mapping {
        start: RemoteAddr(start),
        end: RemoteAddr(end),
        read: p[0] == b'r',
        write: p[1] == b'w',
        exec: p[2] == b'x',
        private: p[3] == b'p',
        offset,
        dev: dev.to_string(),
        inode,
        path: (!path.is_empty()).then(|| path.to_string()),
    })
}

/// The next space-separated field and the rest of the line.
fn field(s: &str) -> Option<(&str, &str)> {
    let s = s.trim_start_matches(' ');
    if s.is_empty() {
        return None;
    }
    let end = s.find(' ').unwrap_or(s.len());
    Some((&s[..end], &s[end..]))
}

fn hex(s: &str) -> Option<u64> {
    if s.is_empty() || s.len() > 16 || !s.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(s, 16).ok()
}

/// The mappings of one file (or of the vDSO) in a process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleLayout {
    pub path: String,
    /// In address order.
    pub mappings: Vec<Mapping>,
    /// The lowest start address.
    pub base: RemoteAddr,
}

/// x86-64 Linux maps ELF segments at 4 KiB page granularity.
const PAGE: u64 = 0x1000;

impl ModuleLayout {
    /// The load bias: what to add to an image address of this module to get its address in
    /// the process (0 for an ET_EXEC, the load address for a shared object or PIE).
    ///
    /// The mapping at file offset 0 holds the first PT_LOAD segment, which the loader mapped
    /// at its vaddr rounded down to a page, plus the bias. Without an offset-0 mapping (it
    /// can be unmapped), the first mapping is matched to the segment with the same
    /// page-aligned file offset. `segments` are the image's PT_LOAD segments.
    pub fn bias(&self, segments: &[Segment]) -> u64 {
        let first_segment = segments.iter().min_by_key(|s| s.vaddr);
        if let (Some(m), Some(seg)) = (self.mappings.iter().find(|m| m.offset == 0), first_segment)
        {
            return seg.vaddr.align_down(PAGE).bias_to(m.start);
        }
        for m in &self.mappings {
            if let Some(seg) = segments.iter().find(|s| s.file_offset & !(PAGE - 1) == m.offset) {
                return seg.vaddr.align_down(PAGE).bias_to(m.start);
            }
        }
        let lowest = first_segment.map_or(ImageAddr(0), |s| s.vaddr.align_down(PAGE));
        lowest.bias_to(self.base)
    }

    /// Whether any mapping of the module is executable (data files mapped by the program
    /// are modules too, but have no code to analyse).
    pub fn executable(&self) -> bool {
        self.mappings.iter().any(|m| m.exec)
    }

    /// One past the highest mapped byte.
    pub fn end(&self) -> RemoteAddr {
        self.mappings.iter().map(|m| m.end).max().unwrap_or(self.base)
    }

    pub fn contains(&self, addr: RemoteAddr) -> bool {
        self.mappings.iter().any(|m| m.contains(addr))
    }
}

/// Group the file-backed mappings (paths starting with `/`) and the vDSO by path, in address
/// order. Heap, stack, `[vvar]`, `[vsyscall]` and anonymous memory are left out (the
/// anonymous tail of a module's .bss too: it holds no file bytes).
///
/// A file mapped twice (dlmopen, or a program mapping its own copy) shows a second
/// mapping at file offset 0: that starts a second module with the same path.
pub fn modules(maps: &[Mapping]) -> Vec<ModuleLayout> {
    let mut sorted: Vec<&Mapping> = maps
        .iter()
        .filter(|m| m.path.as_deref().is_some_and(|p| p.starts_with('/') || p == "[vdso]"))
        .collect();
    sorted.sort_by_key(|m| m.start);

    let mut out: Vec<ModuleLayout> = Vec::new();
    for m in sorted {
        let Some(path) = m.path.as_deref() else {
            continue;
        };
        // The latest module with this path, unless this mapping starts the file anew.
        let open = out
            .iter()
            .rposition(|module| module.path == path)
            .filter(|&i| !(m.offset == 0 && out[i].mappings.iter().any(|x| x.offset == 0)));
        match open {
            Some(i) => out[i].mappings.push(m.clone()),
            None => out.push(ModuleLayout {
                path: path.to_string(),
                mappings: vec![m.clone()],
                base: m.start,
            }),
        }
    }
    out
}
