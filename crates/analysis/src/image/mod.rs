//! Images: the code and symbols of one ELF file or of one symbol file, in the image's own
//! link-time address space.

use kerf_arch::ImageAddr;
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;

pub mod btf;
mod debugfile;
mod elf;
pub mod lines;
pub mod maps;
mod symfile;
mod unwind;

pub use debugfile::{crc32, DebugFile, DebugFileError, DebugLink, DebugMerge};
pub use symfile::parse_symbol_file;
pub use unwind::{FrameBase, FrameRule, SavedRbp, UnwindRange};

/// Whether the ELF image `data` was built by Go's toolchain: code in which a thread may
/// resume at nearly any instruction boundary (see `elf::is_go`), so that a splice may cover
/// only one instruction there.
pub fn is_go_image(data: &[u8]) -> bool {
    elf::is_go(data)
}

/// The GNU build-id of ELF file `data` (its headers and notes only are read), if it has one
/// and parses.
pub fn build_id_of(data: &[u8]) -> Option<Vec<u8>> {
    elf::build_id_only(data)
}

/// What kind of ELF file an image came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ImageKind {
    /// ET_EXEC: fixed addresses.
    Executable,
    /// ET_DYN: a shared object or a position-independent executable.
    SharedObject,
    /// No ELF file: code read from elsewhere (a live kernel) and symbols from a symbol file.
    Raw,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    pub name: String,
    pub addr: ImageAddr,
    pub size: u64,
    pub file_offset: u64,
    pub alloc: bool,
    pub writable: bool,
    pub executable: bool,
    /// SHT_NOBITS (.bss): occupies memory but no file bytes.
    pub nobits: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Segment {
    pub vaddr: ImageAddr,
    pub memsz: u64,
    pub file_offset: u64,
    pub filesz: u64,
    pub readable: bool,
    pub writable: bool,
    pub executable: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SymbolKind {
    Function,
    Object,
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Binding {
    Local,
    Global,
    Weak,
}

/// Where a symbol was learnt from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SymbolSource {
    Symtab,
    Dynsym,
    /// Synthesised for a PLT entry: `name@plt`.
    Plt,
    /// An nm / System.map / /proc/kallsyms file.
    SymbolFile,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Symbol {
    pub name: String,
    pub addr: ImageAddr,
    /// Size in bytes; 0 when unknown (symbol files carry no sizes).
    pub size: u64,
    pub kind: SymbolKind,
    pub binding: Binding,
    pub source: SymbolSource,
    /// Kernel module the symbol belongs to (the `[mod]` column of /proc/kallsyms).
    pub module: Option<String>,
}

/// Errors from reading an image. Each names the image and what was wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ImageError {
    NotElf {
        name: String,
    },
    NotX86_64 {
        name: String,
        machine: u16,
    },
    Not64Bit {
        name: String,
    },
    /// ET_REL, ET_CORE and the like: nothing loadable to analyse.
    UnsupportedType {
        name: String,
        detail: String,
    },
    Malformed {
        name: String,
        detail: String,
    },
    BadSymbolLine {
        line_no: usize,
        line: String,
    },
}

impl std::fmt::Display for ImageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ImageError::NotElf { name } => write!(f, "{name}: not an ELF file"),
            ImageError::NotX86_64 { name, machine } => {
                write!(f, "{name}: ELF for machine {machine} (not x86-64)")
            }
            ImageError::Not64Bit { name } => {
                write!(f, "{name}: 32-bit ELF (only 64-bit x86-64 ELF is supported)")
            }
            ImageError::UnsupportedType { name, detail } => {
                write!(f, "{name}: unsupported ELF type: {detail}")
            }
            ImageError::Malformed { name, detail } => write!(f, "{name}: malformed ELF: {detail}"),
            ImageError::BadSymbolLine { line_no, line } => write!(
                f,
                "symbol file line {line_no}: expected `ADDRESS TYPE NAME` \
                 (optionally followed by a tab and `[module]`), found {line:?}"
            ),
        }
    }
}

impl std::error::Error for ImageError {}

/// One image: its bytes (for an ELF file, the whole file), sections, segments and symbols.
#[derive(Debug)]
pub struct Image<'a> {
    pub name: String,
    pub data: &'a [u8],
    pub kind: ImageKind,
    /// The GNU build-id note, when present (the analysis cache key).
    pub build_id: Option<Vec<u8>>,
    pub entry: ImageAddr,
    pub sections: Vec<Section>,
    pub segments: Vec<Segment>,
    /// Sorted by address, then name; exact duplicates (same name and address) removed, with
    /// the symtab copy preferred over dynsym.
    pub symbols: Vec<Symbol>,
    /// Pointers the dynamic loader writes: `(slot, value)` of every R_X86_64_RELATIVE
    /// relocation (value = load bias + addend; stored here as the addend, an image address),
    /// plus DT_INIT/DT_FINI and, for fixed-address files, `.init_array`/`.fini_array`
    /// contents. Sorted by slot. They find functions only called through pointers, and
    /// let jump tables of absolute addresses be read in position-independent code.
    pub pointers: Vec<(ImageAddr, ImageAddr)>,
}

impl<'a> Image<'a> {
    /// Parse an x86-64 ELF executable or shared object (file bytes in `data`), with symbols
    /// from .symtab, .dynsym and synthesised `name@plt` entries for .plt / .plt.sec.
    ///
    /// The ELF structures are parsed once here; afterwards the image only refers back to
    /// `data` for section bytes (see [`Image::code_at`]).
    pub fn from_elf(name: &str, data: &'a [u8]) -> Result<Image<'a>, ImageError> {
        elf::parse(name, data)
    }

    /// The addresses of the GNU indirect functions (`STT_GNU_IFUNC`) an x86-64 ELF file
    /// defines, from .symtab and .dynsym, sorted: each is a resolver, which the dynamic
    /// loader calls once per binding to choose an implementation (glibc's `memcpy`, `strlen`),
    /// not the function callers run. Empty for anything that does not parse.
    pub fn ifunc_resolvers(data: &[u8]) -> Vec<ImageAddr> {
        elf::ifunc_resolvers(data)
    }

    /// An image without an ELF file: `data` is code that was linked (or is running) at
    /// `base`, e.g. kernel text read from a live kernel. It has one executable section,
    /// `.text`, covering all of `data`, and no symbols until a symbol file is added.
    pub fn raw(name: &str, data: &'a [u8], base: ImageAddr) -> Image<'a> {
        let size = data.len() as u64;
        Image {
            name: name.to_string(),
            data,
            kind: ImageKind::Raw,
            build_id: None,
            entry: base,
            sections: vec![Section {
                name: ".text".to_string(),
                addr: base,
                size,
                file_offset: 0,
                alloc: true,
                writable: false,
                executable: true,
                nobits: false,
            }],
            segments: vec![Segment {
                vaddr: base,
                memsz: size,
                file_offset: 0,
                filesz: size,
                readable: true,
                writable: false,
                executable: true,
            }],
            symbols: Vec::new(),
            pointers: Vec::new(),
        }
    }

    /// Add the symbols of a symbol file (nm, System.map or /proc/kallsyms format) to this
    /// image. Returns how many were added.
    ///
    /// Weak symbols (`W`, `w`, `V`, `v`) become functions when they lie in an executable
    /// section and objects otherwise. Functions from the file get a size reaching to the
    /// next function start (from any source) in the same executable section, or to that
    /// section's end, because symbol files carry no sizes and the CFG builder needs bounds.
    /// Symbols already present with the same name and address are not added twice.
    pub fn add_symbol_file(&mut self, text: &str) -> Result<usize, ImageError> {
        let entries = symfile::parse_entries(text)?;
        let before = self.symbols.len();
        self.symbols.reserve(entries.len());
        for entry in entries {
            let mut sym = entry.symbol;
            if entry.weak {
                sym.kind = if self.exec_section_containing(sym.addr).is_some() {
                    SymbolKind::Function
                } else {
                    SymbolKind::Object
                };
            }
            self.symbols.push(sym);
        }
        sort_and_dedup(&mut self.symbols);
        self.size_symbol_file_functions();
        Ok(self.symbols.len().saturating_sub(before))
    }

    /// The executable section containing `addr`: its start address and its bytes.
    ///
    /// `None` when no executable section with file bytes contains `addr`, or when that
    /// section's recorded file range lies outside `data` (a lying header must not panic).
    pub fn code_at(&self, addr: ImageAddr) -> Option<(ImageAddr, &'a [u8])> {
        self.memory().code_at(addr)
    }

    /// The image's memory as analysis reads it (what its [`CodeMemory`] answers from).
    ///
    /// [`CodeMemory`]: crate::memory::CodeMemory
    pub fn memory(&self) -> crate::memory::ImageMemory<'a, '_> {
        crate::memory::ImageMemory {
            data: self.data,
            sections: &self.sections,
            pointers: &self.pointers,
        }
    }

    /// The file bytes of `section`, when it has file bytes and they lie inside `data`.
    pub fn section_bytes(&self, section: &Section) -> Option<&'a [u8]> {
        crate::memory::section_bytes(self.data, section)
    }

    /// The pointer the loader stores at `slot`, if a relocation writes one there.
    pub fn pointer_at(&self, slot: ImageAddr) -> Option<ImageAddr> {
        let i = self.pointers.binary_search_by_key(&slot, |p| p.0).ok()?;
        Some(self.pointers[i].1)
    }

    /// The executable section with file bytes whose address range contains `addr`.
    pub fn exec_section_containing(&self, addr: ImageAddr) -> Option<&Section> {
        crate::memory::exec_section_containing(&self.sections, addr)
    }

    /// Symbols named exactly `name` (several when local symbols share a name).
    pub fn symbols_named<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'s Symbol> + 's {
        self.symbols.iter().filter(move |s| s.name == name)
    }

    /// Give every size-less function from a symbol file the distance to the next function
    /// start in its executable section (or to the section end). Symbols are sorted by
    /// address, so one backward pass finds each "next start".
    fn size_symbol_file_functions(&mut self) {
        // Executable ranges, looked up per symbol; images have few sections.
        let ranges: Vec<(u64, u64)> =
            self.exec_sections().map(|s| (s.addr.0, s.addr.0.saturating_add(s.size))).collect();
        let mut next_start: Option<u64> = None;
        let mut i = self.symbols.len();
        while i > 0 {
            // One group of symbols sharing an address, walked from the top down.
            let addr = self.symbols[i - 1].addr.0;
            let mut j = i;
            while j > 0 && self.symbols[j - 1].addr.0 == addr {
                j -= 1;
            }
            let mut group_has_function = false;
            for sym in &mut self.symbols[j..i] {
                if sym.kind != SymbolKind::Function {
                    continue;
                }
                group_has_function = true;
                if sym.source != SymbolSource::SymbolFile || sym.size != 0 {
                    continue;
                }
                if let Some(&(_, end)) = ranges.iter().find(|(s, e)| addr >= *s && addr < *e) {
                    let end = next_start.map_or(end, |n| n.min(end));
                    sym.size = end - addr;
                }
            }
            if group_has_function {
                next_start = Some(addr);
            }
            i = j;
        }
    }

    /// Executable sections with file bytes.
    pub fn exec_sections(&self) -> impl Iterator<Item = &Section> {
        self.sections.iter().filter(|s| s.executable && !s.nobits && s.size > 0)
    }

    /// Total bytes of executable sections.
    pub fn text_bytes(&self) -> u64 {
        self.exec_sections().map(|s| s.size).sum()
    }
}

/// Which copy of a (name, address) duplicate to keep: the richest source first.
fn source_rank(source: SymbolSource) -> u8 {
    match source {
        SymbolSource::Symtab => 0,
        SymbolSource::Dynsym => 1,
        SymbolSource::Plt => 2,
        SymbolSource::SymbolFile => 3,
    }
}

/// Sort by (address, name), keep one symbol per exact (name, address) pair, preferring the
/// source with the lowest [`source_rank`]. The sort is stable, so among equal ranks the
/// first one found wins.
pub(crate) fn sort_and_dedup(symbols: &mut Vec<Symbol>) {
    symbols.sort_by(|a, b| {
        a.addr
            .cmp(&b.addr)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| source_rank(a.source).cmp(&source_rank(b.source)))
    });
    symbols.dedup_by(|later, kept| later.addr == kept.addr && later.name == kept.name);
    debug_assert!(symbols
        .windows(2)
        .all(|w| (w[0].addr, &w[0].name).cmp(&(w[1].addr, &w[1].name)) == Ordering::Less));
}
