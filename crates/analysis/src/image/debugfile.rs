//! Separate debug files (`objcopy --only-keep-debug`, Debian's `-dbg`/`-dbgsym` packages,
//! debuginfod): an image's `.gnu_debuglink`, the CRC-32 that checks a file against it, and
//! merging a debug file's `.symtab` (local and static functions included) into the image it
//! was split from.
//!
//! A debug file is untrusted like any input (DESIGN §5). Its code sections are NOBITS, so
//! only its symbols are taken, and only after its build-id matched the image's; a symbol
//! must fall inside one of the *image's* sections and its size is cut at that section's end,
//! whatever the debug file claims.

use super::elf;
use super::{sort_and_dedup, Image, ImageError, Symbol, SymbolKind, SymbolSource};
use object::elf as e;
use object::read::elf::FileHeader;
use object::LittleEndian as LE;

/// The `.gnu_debuglink` of an image: the debug file's base name and the CRC-32 of its bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DebugLink {
    pub name: String,
    pub crc: u32,
}

/// Why a debug file was not used. Each names the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DebugFileError {
    /// Not an x86-64 ELF64 file, or its headers or symbol table are broken.
    Image(ImageError),
    /// The debug file has no `.symtab` (or an empty one): nothing to add.
    NoSymtab { name: String },
    /// Its build-id is not the image's: a debug file of another build.
    BuildIdMismatch { name: String, image: Option<Vec<u8>>, debug: Option<Vec<u8>> },
}

impl std::fmt::Display for DebugFileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let id = |b: &Option<Vec<u8>>| match b {
            Some(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
            None => "none".to_string(),
        };
        match self {
            DebugFileError::Image(e) => write!(f, "{e}"),
            DebugFileError::NoSymtab { name } => {
                write!(f, "{name}: no .symtab to take symbols from")
            }
            DebugFileError::BuildIdMismatch { name, image, debug } => write!(
                f,
                "{name}: build-id {} is not the image's ({}): a debug file of another build",
                id(debug),
                id(image)
            ),
        }
    }
}

impl std::error::Error for DebugFileError {}

impl From<ImageError> for DebugFileError {
    fn from(e: ImageError) -> Self {
        DebugFileError::Image(e)
    }
}

/// What merging a debug file did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DebugMerge {
    /// Symbols the image did not have before (same name and address counts as had).
    pub added: usize,
    /// Symbols dropped because their address lies in none of the image's sections.
    pub outside: usize,
    /// Symbols whose size reached past their section's end and was cut there.
    pub clamped: usize,
}

/// The symbols of a debug file, read from its bytes; the bytes are not kept.
#[derive(Clone, Debug)]
pub struct DebugFile {
    pub name: String,
    pub build_id: Option<Vec<u8>>,
    /// Defined, named `.symtab` symbols, as the file states them (not yet checked).
    pub symbols: Vec<Symbol>,
}

impl DebugFile {
    /// Read a debug file's build-id and `.symtab`. Only the ELF header, the section headers,
    /// the build-id note and the symbol and string tables are read: the program headers of a
    /// debug file describe the image's segments, not its own bytes.
    pub fn parse(name: &str, data: &[u8]) -> Result<DebugFile, DebugFileError> {
        elf::check_identity(name, data)?;
        let bad = |detail: String| ImageError::Malformed { name: name.to_string(), detail };
        let header = elf::Header::parse(data).map_err(|err| bad(format!("ELF header: {err}")))?;
        match header.e_type(LE) {
            e::ET_EXEC | e::ET_DYN => {}
            other => {
                return Err(ImageError::UnsupportedType {
                    name: name.to_string(),
                    detail: format!("e_type {other:#x} (a debug file is ET_EXEC or ET_DYN)"),
                }
                .into())
            }
        }
        let table =
            header.sections(LE, data).map_err(|err| bad(format!("section headers: {err}")))?;
        let build_id = elf::find_build_id(&table, &[], data).map_err(bad)?;
        let symtab =
            table.symbols(LE, data, e::SHT_SYMTAB).map_err(|err| bad(format!(".symtab: {err}")))?;
        let mut symbols = Vec::with_capacity(symtab.len());
        elf::collect_symbols(&symtab, SymbolSource::Symtab, &mut symbols)
            .map_err(|err| bad(format!(".symtab: {err}")))?;
        if symbols.is_empty() {
            return Err(DebugFileError::NoSymtab { name: name.to_string() });
        }
        Ok(DebugFile { name: name.to_string(), build_id, symbols })
    }
}

impl Image<'_> {
    /// The image's `.gnu_debuglink`, if it has one: `Ok(None)` without the section, an error
    /// naming what is wrong when the section is there but broken.
    ///
    /// Layout: the file name, a NUL, zero padding to a multiple of 4, the CRC-32 (little
    /// endian). The name must be a plain file name (no `/`, not `.` or `..`): it is joined to
    /// directories, and an untrusted image must not point outside them.
    pub fn debuglink(&self) -> Result<Option<DebugLink>, ImageError> {
        let Some(section) = self.sections.iter().find(|s| s.name == ".gnu_debuglink") else {
            return Ok(None);
        };
        let bad = |detail: &str| ImageError::Malformed {
            name: self.name.clone(),
            detail: format!(".gnu_debuglink: {detail}"),
        };
        let bytes = self.section_bytes(section).ok_or_else(|| bad("no bytes in the file"))?;
        let nul = bytes.iter().position(|b| *b == 0).ok_or_else(|| bad("name without a NUL"))?;
        let name = std::str::from_utf8(&bytes[..nul]).map_err(|_| bad("name is not UTF-8"))?;
        if name.is_empty() || name == "." || name == ".." || name.contains('/') {
            return Err(bad(&format!("{name:?} is not a plain file name")));
        }
        let at = (nul + 1).next_multiple_of(4);
        let crc = bytes
            .get(at..at + 4)
            .ok_or_else(|| bad("no CRC after the name"))?
            .try_into()
            .map(u32::from_le_bytes)
            .map_err(|_| bad("no CRC after the name"))?;
        Ok(Some(DebugLink { name: name.to_string(), crc }))
    }

    /// Merge the `.symtab` of `debug`, the debug file split from this image. Refused (and the
    /// image left as it was) unless the build-ids are equal; two images without a build-id
    /// are equal here, so a caller that found the file by `.gnu_debuglink` must have checked
    /// its CRC first.
    ///
    /// Only symbols inside one of this image's sections are taken, functions only inside an
    /// executable one, with sizes cut at that section's end; everything else in the debug
    /// file is ignored.
    pub fn add_debug_symbols(&mut self, debug: &DebugFile) -> Result<DebugMerge, DebugFileError> {
        self.check_debug_file(debug)?;
        Ok(self.merge_debug_symbols(debug))
    }

    /// What [`Image::add_debug_symbols`] checks before it merges: the build-ids are equal.
    pub fn check_debug_file(&self, debug: &DebugFile) -> Result<(), DebugFileError> {
        if self.build_id != debug.build_id {
            return Err(DebugFileError::BuildIdMismatch {
                name: debug.name.clone(),
                image: self.build_id.clone(),
                debug: debug.build_id.clone(),
            });
        }
        Ok(())
    }

    /// The merge of [`Image::add_debug_symbols`], for a `debug` that
    /// [`Image::check_debug_file`] accepted.
    pub fn merge_debug_symbols(&mut self, debug: &DebugFile) -> DebugMerge {
        let mut merge = DebugMerge::default();
        let before = self.symbols.len();
        for sym in &debug.symbols {
            let section = match sym.kind {
                SymbolKind::Function => self.exec_section_containing(sym.addr),
                _ => self
                    .sections
                    .iter()
                    .find(|s| s.alloc && sym.addr.0 >= s.addr.0 && sym.addr.0 - s.addr.0 < s.size),
            };
            let Some(section) = section else {
                merge.outside += 1;
                continue;
            };
            // Cannot underflow: the section contains the address.
            let room = section.size - (sym.addr.0 - section.addr.0);
            let mut sym = sym.clone();
            if sym.size > room {
                sym.size = room;
                merge.clamped += 1;
            }
            self.symbols.push(sym);
        }
        sort_and_dedup(&mut self.symbols);
        merge.added = self.symbols.len().saturating_sub(before);
        merge
    }
}

/// The CRC-32 of `.gnu_debuglink` (IEEE 802.3, reflected polynomial 0xedb88320, initial and
/// final value 0xffffffff: the one zlib computes). `crc32(b"123456789") == 0xcbf43926`.
pub fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    // Eight bytes per step through eight tables (slicing-by-8): a debug file is read whole to
    // check it, and some are hundreds of megabytes.
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        let lo = crc ^ u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        crc = CRC_TABLES[7][(lo & 0xff) as usize]
            ^ CRC_TABLES[6][((lo >> 8) & 0xff) as usize]
            ^ CRC_TABLES[5][((lo >> 16) & 0xff) as usize]
            ^ CRC_TABLES[4][(lo >> 24) as usize]
            ^ CRC_TABLES[3][c[4] as usize]
            ^ CRC_TABLES[2][c[5] as usize]
            ^ CRC_TABLES[1][c[6] as usize]
            ^ CRC_TABLES[0][c[7] as usize];
    }
    for b in chunks.remainder() {
        crc = CRC_TABLES[0][((crc ^ u32::from(*b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// `CRC_TABLES[0]` is the byte-at-a-time table; `CRC_TABLES[k][b]` is the CRC of byte `b`
/// followed by `k` zero bytes.
static CRC_TABLES: [[u32; 256]; 8] = crc_tables();

const fn crc_tables() -> [[u32; 256]; 8] {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 { 0xedb8_8320 ^ (c >> 1) } else { c >> 1 };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut i = 0;
    while i < 256 {
        let mut k = 1;
        while k < 8 {
            let prev = t[k - 1][i];
            t[k][i] = t[0][(prev & 0xff) as usize] ^ (prev >> 8);
            k += 1;
        }
        i += 1;
    }
    t
}
