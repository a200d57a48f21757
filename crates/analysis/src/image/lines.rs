//! Source lines of machine code from an ELF file's DWARF line tables (`.debug_line`, with the
//! units of `.debug_info` naming their files): for coverage reports (`kerf cover`'s lcov
//! output) that say which source lines the covered blocks hold. Works on bytes: the caller
//! reads the image, or its separate debug file (the one Debian puts under
//! `/usr/lib/debug/.build-id`), and hands them in. Compressed sections (`SHF_COMPRESSED`,
//! zlib: what `objcopy --compress-debug-sections` and Debian's `dh_strip` write) are inflated
//! here.
//!
//! Every input is untrusted: a malformed table is an error naming what was wrong, never a
//! panic, and a unit that cannot be read is skipped with its error counted, so one broken
//! unit does not lose the rest.

use gimli::{EndianSlice, LittleEndian};
use object::{Object, ObjectSection};
use std::borrow::Cow;
use std::fmt;
use std::io::Read as _;

/// The largest section inflated (libLLVM's whole debug file is ~0.6 GB; a section claiming
/// more than this is refused rather than allocated).
const MAX_SECTION: u64 = 4 << 30;

/// A run of machine code `[start, end)` (image addresses) generated for one source line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LineRange {
    pub start: u64,
    pub end: u64,
    /// Index into [`Lines::files`].
    pub file: u32,
    pub line: u32,
}

/// An image's line table: every range, sorted by start, and the source files they name.
#[derive(Clone, Debug, Default)]
pub struct Lines {
    /// Source file paths, as the compilation recorded them (absolute where it gave a
    /// compilation directory).
    pub files: Vec<String>,
    pub ranges: Vec<LineRange>,
    /// Units whose line program could not be read (the others are kept).
    pub bad_units: usize,
}

/// Why an image's lines could not be read at all.
#[derive(Debug)]
pub enum LinesError {
    /// Not an ELF file kerf can read.
    Elf(String),
    /// A section could not be read or inflated.
    Section { name: String, why: String },
    /// The DWARF sections are broken before any unit.
    Dwarf(String),
    /// The file has no `.debug_line`.
    NoLineTable,
}

impl fmt::Display for LinesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinesError::Elf(why) => write!(f, "not a readable ELF file: {why}"),
            LinesError::Section { name, why } => write!(f, "section {name}: {why}"),
            LinesError::Dwarf(why) => write!(f, "DWARF: {why}"),
            LinesError::NoLineTable => write!(f, "no .debug_line (built without -g?)"),
        }
    }
}

impl std::error::Error for LinesError {}

impl Lines {
    /// The line table of the ELF file `data`.
    pub fn of_elf(data: &[u8]) -> Result<Lines, LinesError> {
        let file = object::File::parse(data).map_err(|e| LinesError::Elf(e.to_string()))?;
        if file.section_by_name(".debug_line").is_none() {
            return Err(LinesError::NoLineTable);
        }
        let load = |id: gimli::SectionId| -> Result<Cow<'_, [u8]>, LinesError> {
            match file.section_by_name(id.name()) {
                Some(s) => section_bytes(&s),
                None => Ok(Cow::Borrowed(&[][..])),
            }
        };
        let sections = gimli::DwarfSections::load(load)?;
        let dwarf = sections.borrow(|s| EndianSlice::new(s, LittleEndian));
        let mut lines = Lines::default();
        let mut files = std::collections::HashMap::<String, u32>::new();
        let mut units = dwarf.units();
        loop {
            let header = match units.next() {
                Ok(Some(h)) => h,
                Ok(None) => break,
                // The unit headers are a chain: past a broken one nothing can be found.
                Err(e) => {
                    if lines.ranges.is_empty() && lines.bad_units == 0 {
                        return Err(LinesError::Dwarf(e.to_string()));
                    }
                    lines.bad_units += 1;
                    break;
                }
            };
            let unit = match dwarf.unit(header) {
                Ok(u) => u,
                Err(_) => {
                    lines.bad_units += 1;
                    continue;
                }
            };
            if unit_lines(&dwarf, &unit, &mut lines, &mut files).is_err() {
                lines.bad_units += 1;
            }
        }
        lines.ranges.sort_by_key(|r| (r.start, r.end));
        Ok(lines)
    }

    /// The ranges overlapping `[start, end)`.
    pub fn overlapping(&self, start: u64, end: u64) -> impl Iterator<Item = &LineRange> + '_ {
        // Ranges are short (a line's code), so those overlapping start at most a little
        // before `start`: begin at the first range ending after it among those sorted by start.
        let from = self.ranges.partition_point(|r| r.start < start);
        let back = self.ranges[..from].iter().rev().take_while(|r| r.end > start).count();
        self.ranges[from - back..]
            .iter()
            .take_while(move |r| r.start < end)
            .filter(move |r| r.end > start)
    }

    /// The line of the code at `addr`, if the table has it.
    pub fn line_at(&self, addr: u64) -> Option<(&str, u32)> {
        let r = self.overlapping(addr, addr + 1).next()?;
        Some((self.files.get(r.file as usize)?.as_str(), r.line))
    }
}

/// A section's bytes, inflated if it is compressed.
fn section_bytes<'d>(s: &object::Section<'d, '_>) -> Result<Cow<'d, [u8]>, LinesError> {
    let name = s.name().unwrap_or("?").to_string();
    let bad = |why: String| LinesError::Section { name: name.clone(), why };
    let c = s.compressed_data().map_err(|e| bad(e.to_string()))?;
    match c.format {
        object::CompressionFormat::None => Ok(Cow::Borrowed(c.data)),
        object::CompressionFormat::Zlib => {
            if c.uncompressed_size > MAX_SECTION {
                return Err(bad(format!("{} bytes inflated is too large", c.uncompressed_size)));
            }
            let mut out = Vec::with_capacity(c.uncompressed_size as usize);
            let mut z = flate2::read::ZlibDecoder::new(c.data).take(c.uncompressed_size);
            std::io::Read::read_to_end(&mut z, &mut out).map_err(|e| bad(e.to_string()))?;
            if out.len() as u64 != c.uncompressed_size {
                return Err(bad(format!(
                    "inflated to {} bytes, the header says {}",
                    out.len(),
                    c.uncompressed_size
                )));
            }
            Ok(Cow::Owned(out))
        }
        other => Err(bad(format!("compressed as {other:?}, which kerf does not inflate"))),
    }
}

type Slice<'a> = EndianSlice<'a, LittleEndian>;

/// The rows of one unit's line program, as ranges, into `lines`.
fn unit_lines(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &gimli::Unit<Slice<'_>>,
    lines: &mut Lines,
    files: &mut std::collections::HashMap<String, u32>,
) -> Result<(), gimli::Error> {
    let Some(program) = unit.line_program.clone() else { return Ok(()) };
    let comp_dir = match &unit.comp_dir {
        Some(d) => d.to_string_lossy().into_owned(),
        None => String::new(),
    };
    let mut rows = program.rows();
    // The row before: its address, file index, line; a range ends at the next row's address.
    let mut open: Option<(u64, u64, u32)> = None;
    let mut names = std::collections::HashMap::<u64, u32>::new();
    while let Some((header, row)) = rows.next_row()? {
        let addr = row.address();
        if let Some((start, file, line)) = open.take() {
            // A sequence at address 0 is a function the linker discarded (its rows stay).
            if addr > start && start != 0 && line > 0 {
                let id = match names.get(&file) {
                    Some(&id) => id,
                    None => {
                        let path = file_path(dwarf, unit, header, file, &comp_dir)?;
                        let next = lines.files.len() as u32;
                        let id = *files.entry(path.clone()).or_insert(next);
                        if id == next {
                            lines.files.push(path);
                        }
                        names.insert(file, id);
                        id
                    }
                };
                lines.ranges.push(LineRange { start, end: addr, file: id, line });
            }
        }
        if !row.end_sequence() {
            let line = row.line().map_or(0, |l| l.get().min(u32::MAX as u64) as u32);
            open = Some((addr, row.file_index(), line));
        }
    }
    Ok(())
}

/// The path of file `index` of a line program: its directory joined in front when relative,
/// and the unit's compilation directory in front of that when still relative.
fn file_path(
    dwarf: &gimli::Dwarf<Slice<'_>>,
    unit: &gimli::Unit<Slice<'_>>,
    header: &gimli::LineProgramHeader<Slice<'_>>,
    index: u64,
    comp_dir: &str,
) -> Result<String, gimli::Error> {
    let Some(file) = header.file(index) else { return Ok(format!("<file {index}>")) };
    let name = dwarf.attr_string(unit, file.path_name())?.to_string_lossy().into_owned();
    if name.starts_with('/') {
        return Ok(name);
    }
    let mut path = String::new();
    if let Some(dir) = file.directory(header) {
        path = dwarf.attr_string(unit, dir)?.to_string_lossy().into_owned();
    }
    if !path.starts_with('/') && !comp_dir.is_empty() {
        path = if path.is_empty() { comp_dir.to_string() } else { format!("{comp_dir}/{path}") };
    }
    Ok(clean(&if path.is_empty() { name } else { format!("{path}/{name}") }))
}

/// `path` with `.` and `a/..` taken out by their text (as compilers record the paths they were
/// given: `/src/kerf/crates/x/../../tests/a.c` names `/src/kerf/tests/a.c`). A `..` with
/// nothing before it to take out stays.
fn clean(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." if parts.last().is_some_and(|l| *l != "..") => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    let joined = parts.join("/");
    if path.starts_with('/') {
        format!("/{joined}")
    } else {
        joined
    }
}

impl From<gimli::Error> for LinesError {
    fn from(e: gimli::Error) -> Self {
        LinesError::Dwarf(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(ranges: &[(u64, u64, u32)]) -> Lines {
        Lines {
            files: vec!["a.c".into()],
            ranges: ranges
                .iter()
                .map(|&(start, end, line)| LineRange { start, end, file: 0, line })
                .collect(),
            bad_units: 0,
        }
    }

    #[test]
    fn overlapping_finds_every_range_that_shares_a_byte() {
        let l = lines(&[(0x10, 0x14, 1), (0x14, 0x20, 2), (0x20, 0x28, 3), (0x30, 0x31, 4)]);
        let at = |s, e| l.overlapping(s, e).map(|r| r.line).collect::<Vec<_>>();
        assert_eq!(at(0x12, 0x13), vec![1]);
        assert_eq!(at(0x13, 0x21), vec![1, 2, 3]);
        assert_eq!(at(0x28, 0x30), Vec::<u32>::new());
        assert_eq!(at(0x0, 0x10), Vec::<u32>::new());
        assert_eq!(at(0x30, 0x40), vec![4]);
        assert_eq!(l.line_at(0x15), Some(("a.c", 2)));
        assert_eq!(l.line_at(0x29), None);
    }

    #[test]
    fn paths_are_cleaned_by_their_text() {
        assert_eq!(clean("/a/b/../../c/./d.c"), "/c/d.c");
        assert_eq!(clean("./argp/../argp/x.h"), "argp/x.h");
        assert_eq!(clean("../x/y.c"), "../x/y.c");
        assert_eq!(clean("/a//b.c"), "/a/b.c");
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        assert!(matches!(Lines::of_elf(b"not an elf"), Err(LinesError::Elf(_))));
        assert!(Lines::of_elf(&[]).is_err());
    }
}
