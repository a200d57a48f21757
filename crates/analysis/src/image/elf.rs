//! ELF64 x86-64 parsing for [`Image::from_elf`]: sections, PT_LOAD segments, the GNU build-id,
//! .symtab/.dynsym symbols and synthesised `name@plt` symbols for PLT entries.
//!
//! Uses the `object` crate's low-level ELF structures (with its `unaligned` feature, so any
//! byte slice works) and treats every value read from the file as untrusted: anything that
//! does not fit becomes [`ImageError::Malformed`], never a panic.

use super::{
    sort_and_dedup, Binding, Image, ImageError, ImageKind, Section, Segment, Symbol, SymbolKind,
    SymbolSource,
};
use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};
use kerf_arch::ImageAddr;
use object::elf;
use object::read::elf::SymbolTable;
use object::read::elf::{FileHeader, ProgramHeader, Rela, SectionHeader, SectionTable, Sym};
use object::LittleEndian as LE;

pub(super) type Header = elf::FileHeader64<LE>;
type Sections<'a> = SectionTable<'a, Header, &'a [u8]>;
type Symbols<'a> = SymbolTable<'a, Header, &'a [u8]>;

/// Offsets into `e_ident` and the header, identical for ELF32 and ELF64; read by hand so that
/// the class and machine can be reported before committing to the ELF64 layout.
const EI_CLASS: usize = 4;
const EI_DATA: usize = 5;
const E_MACHINE: usize = 18;

pub(super) fn parse<'a>(name: &str, data: &'a [u8]) -> Result<Image<'a>, ImageError> {
    check_identity(name, data)?;
    let bad = |detail: String| ImageError::Malformed { name: name.to_string(), detail };
    let endian = LE;
    let header = Header::parse(data).map_err(|e| bad(format!("ELF header: {e}")))?;
    let kind = match header.e_type(endian) {
        elf::ET_EXEC => ImageKind::Executable,
        elf::ET_DYN => ImageKind::SharedObject,
        other => {
            let detail = match other {
                elf::ET_REL => "relocatable object (ET_REL); link it first".to_string(),
                elf::ET_CORE => "core file (ET_CORE)".to_string(),
                _ => format!("e_type {other:#x} (need ET_EXEC or ET_DYN)"),
            };
            return Err(ImageError::UnsupportedType { name: name.to_string(), detail });
        }
    };

    let phdrs =
        header.program_headers(endian, data).map_err(|e| bad(format!("program headers: {e}")))?;
    let segments = load_segments(phdrs, data.len()).map_err(bad)?;

    let table = header.sections(endian, data).map_err(|e| bad(format!("section headers: {e}")))?;
    let mut sections = read_sections(&table, data.len()).map_err(bad)?;
    if sections.is_empty() {
        // No section headers (stripped with sstrip, or a memory image): executable PT_LOAD
        // segments stand in, so that code_at() and the CFG builder still see the code.
        sections = sections_from_segments(&segments);
    }

    let build_id = find_build_id(&table, phdrs, data).map_err(bad)?;

    let symtab =
        table.symbols(endian, data, elf::SHT_SYMTAB).map_err(|e| bad(format!(".symtab: {e}")))?;
    let dynsym =
        table.symbols(endian, data, elf::SHT_DYNSYM).map_err(|e| bad(format!(".dynsym: {e}")))?;
    let mut symbols = Vec::with_capacity(symtab.len() + dynsym.len());
    collect_symbols(&symtab, SymbolSource::Symtab, &mut symbols)
        .map_err(|e| bad(format!(".symtab: {e}")))?;
    collect_symbols(&dynsym, SymbolSource::Dynsym, &mut symbols)
        .map_err(|e| bad(format!(".dynsym: {e}")))?;
    plt_symbols(&table, &dynsym, data, &mut symbols).map_err(bad)?;
    sort_and_dedup(&mut symbols);
    let pointers = loader_pointers(&table, kind, &sections, data).map_err(bad)?;

    Ok(Image {
        name: name.to_string(),
        data,
        kind,
        build_id,
        entry: ImageAddr(header.e_entry(endian)),
        sections,
        segments,
        symbols,
        pointers,
    })
}

/// `(slot, value)` pairs the loader will write (see [`Image::pointers`]).
fn loader_pointers(
    table: &Sections<'_>,
    kind: ImageKind,
    sections: &[Section],
    data: &[u8],
) -> Result<Vec<(ImageAddr, ImageAddr)>, String> {
    let endian = LE;
    let mut out = Vec::new();
    for sh in table.iter() {
        match sh.sh_type(endian) {
            elf::SHT_RELA if sh.sh_flags(endian) & u64::from(elf::SHF_ALLOC) != 0 => {
                let Some((relas, _)) =
                    sh.rela(endian, data).map_err(|e| format!("dynamic relocations: {e}"))?
                else {
                    continue;
                };
                for r in relas {
                    if r.r_type(endian, false) == elf::R_X86_64_RELATIVE {
                        out.push((
                            ImageAddr(r.r_offset(endian)),
                            ImageAddr(r.r_addend(endian) as u64),
                        ));
                    }
                }
            }
            elf::SHT_DYNAMIC => {
                let Ok(bytes) = sh.data(endian, data) else { continue };
                for (i, d) in bytes.chunks_exact(16).enumerate() {
                    let tag = u64::from_le_bytes(d[..8].try_into().unwrap_or_default());
                    let val = u64::from_le_bytes(d[8..].try_into().unwrap_or_default());
                    // The slot of a DT_INIT/DT_FINI value is the dynamic entry itself.
                    if tag == u64::from(elf::DT_INIT) || tag == u64::from(elf::DT_FINI) {
                        let slot = sh.sh_addr(endian) + 16 * i as u64 + 8;
                        out.push((ImageAddr(slot), ImageAddr(val)));
                    }
                }
            }
            _ => {}
        }
    }
    if kind == ImageKind::Executable {
        // A fixed-address executable has its constructor arrays filled in by the linker.
        for s in sections
            .iter()
            .filter(|s| matches!(s.name.as_str(), ".init_array" | ".fini_array" | ".preinit_array"))
        {
            let start = s.file_offset as usize;
            let Some(bytes) = data.get(start..start.saturating_add(s.size as usize)) else {
                continue;
            };
            for (i, c) in bytes.chunks_exact(8).enumerate() {
                let v = u64::from_le_bytes(c.try_into().unwrap_or_default());
                out.push((ImageAddr(s.addr.0 + 8 * i as u64), ImageAddr(v)));
            }
        }
    }
    out.sort_unstable();
    out.dedup_by_key(|p| p.0);
    Ok(out)
}

/// Classify the file from `e_ident` and `e_machine` so that the common mistakes (a script, a
/// 32-bit or foreign binary) get their own error rather than "malformed".
pub(super) fn check_identity(name: &str, data: &[u8]) -> Result<(), ImageError> {
    if data.len() < 4 || data[..4] != elf::ELFMAG {
        return Err(ImageError::NotElf { name: name.to_string() });
    }
    let bad =
        |detail: &str| ImageError::Malformed { name: name.to_string(), detail: detail.to_string() };
    let (Some(&class), Some(&encoding), Some(machine)) =
        (data.get(EI_CLASS), data.get(EI_DATA), data.get(E_MACHINE..E_MACHINE + 2))
    else {
        return Err(bad("truncated ELF identification"));
    };
    match class {
        elf::ELFCLASS64 => {}
        elf::ELFCLASS32 => return Err(ImageError::Not64Bit { name: name.to_string() }),
        _ => return Err(bad(&format!("invalid ELF class {class}"))),
    }
    let machine = match encoding {
        elf::ELFDATA2LSB => u16::from_le_bytes([machine[0], machine[1]]),
        elf::ELFDATA2MSB => u16::from_be_bytes([machine[0], machine[1]]),
        _ => return Err(bad(&format!("invalid ELF data encoding {encoding}"))),
    };
    if machine != elf::EM_X86_64 {
        return Err(ImageError::NotX86_64 { name: name.to_string(), machine });
    }
    if encoding != elf::ELFDATA2LSB {
        return Err(bad("big-endian x86-64"));
    }
    Ok(())
}

/// PT_LOAD segments, checked to lie inside the file.
fn load_segments(
    phdrs: &[elf::ProgramHeader64<LE>],
    file_len: usize,
) -> Result<Vec<Segment>, String> {
    let endian = LE;
    let mut out = Vec::new();
    for (i, ph) in phdrs.iter().enumerate() {
        if ph.p_type(endian) != elf::PT_LOAD {
            continue;
        }
        let (offset, filesz) = (ph.p_offset(endian), ph.p_filesz(endian));
        if !fits(offset, filesz, file_len) {
            return Err(format!(
                "program header {i}: file range {offset:#x}+{filesz:#x} is outside the file ({file_len:#x} bytes)"
            ));
        }
        let flags = ph.p_flags(endian);
        out.push(Segment {
            vaddr: ImageAddr(ph.p_vaddr(endian)),
            memsz: ph.p_memsz(endian),
            file_offset: offset,
            filesz,
            readable: flags & elf::PF_R != 0,
            writable: flags & elf::PF_W != 0,
            executable: flags & elf::PF_X != 0,
        });
    }
    Ok(out)
}

/// All sections but the null one at index 0, with names, checked to lie inside the file.
fn read_sections(table: &Sections<'_>, file_len: usize) -> Result<Vec<Section>, String> {
    let endian = LE;
    let mut out = Vec::with_capacity(table.len());
    for (index, sh) in table.enumerate() {
        let sh_type = sh.sh_type(endian);
        if index.0 == 0 && sh_type == elf::SHT_NULL {
            continue;
        }
        let name = table
            .section_name(endian, sh)
            .map_err(|e| format!("section {}: name: {e}", index.0))?;
        let name = String::from_utf8_lossy(name).into_owned();
        let nobits = sh_type == elf::SHT_NOBITS;
        let (offset, size) = (sh.sh_offset(endian), sh.sh_size(endian));
        if !nobits && sh_type != elf::SHT_NULL && !fits(offset, size, file_len) {
            return Err(format!(
                "section {} ({name}): file range {offset:#x}+{size:#x} is outside the file ({file_len:#x} bytes)",
                index.0
            ));
        }
        let flags = sh.sh_flags(endian);
        out.push(Section {
            name,
            addr: ImageAddr(sh.sh_addr(endian)),
            size,
            file_offset: offset,
            alloc: flags & u64::from(elf::SHF_ALLOC) != 0,
            writable: flags & u64::from(elf::SHF_WRITE) != 0,
            executable: flags & u64::from(elf::SHF_EXECINSTR) != 0,
            nobits,
        });
    }
    Ok(out)
}

fn sections_from_segments(segments: &[Segment]) -> Vec<Section> {
    segments
        .iter()
        .enumerate()
        .map(|(i, seg)| Section {
            name: format!("load{i}"),
            addr: seg.vaddr,
            size: seg.filesz,
            file_offset: seg.file_offset,
            alloc: true,
            writable: seg.writable,
            executable: seg.executable,
            nobits: false,
        })
        .collect()
}

/// Does `offset..offset+size` lie inside a file of `len` bytes (without overflowing)?
fn fits(offset: u64, size: u64, len: usize) -> bool {
    offset.checked_add(size).is_some_and(|end| end <= len as u64)
}

/// [`find_build_id`] of an ELF64 file's bytes, reading nothing but its headers and notes.
pub(super) fn build_id_only(data: &[u8]) -> Option<Vec<u8>> {
    let header = Header::parse(data).ok()?;
    let phdrs = header.program_headers(LE, data).ok()?;
    let table = header.sections(LE, data).ok()?;
    find_build_id(&table, phdrs, data).ok()?
}

/// The NT_GNU_BUILD_ID note, from note sections or, without section headers, PT_NOTE.
pub(super) fn find_build_id(
    table: &Sections<'_>,
    phdrs: &[elf::ProgramHeader64<LE>],
    data: &[u8],
) -> Result<Option<Vec<u8>>, String> {
    let endian = LE;
    for sh in table.iter() {
        let notes = sh.notes(endian, data).map_err(|e| format!("note section: {e}"))?;
        if let Some(mut notes) = notes {
            while let Some(note) = notes.next().map_err(|e| format!("note section: {e}"))? {
                if note.name() == elf::ELF_NOTE_GNU && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
                    return Ok(Some(note.desc().to_vec()));
                }
            }
        }
    }
    if !table.is_empty() {
        return Ok(None);
    }
    for ph in phdrs {
        let notes = ph.notes(endian, data).map_err(|e| format!("PT_NOTE: {e}"))?;
        if let Some(mut notes) = notes {
            while let Some(note) = notes.next().map_err(|e| format!("PT_NOTE: {e}"))? {
                if note.name() == elf::ELF_NOTE_GNU && note.n_type(endian) == elf::NT_GNU_BUILD_ID {
                    return Ok(Some(note.desc().to_vec()));
                }
            }
        }
    }
    Ok(None)
}

/// See [`Image::ifunc_resolvers`].
pub(super) fn ifunc_resolvers(data: &[u8]) -> Vec<ImageAddr> {
    let endian = LE;
    let Ok(header) = Header::parse(data) else { return Vec::new() };
    let Ok(table) = header.sections(endian, data) else { return Vec::new() };
    let mut out = Vec::new();
    for kind in [elf::SHT_SYMTAB, elf::SHT_DYNSYM] {
        let Ok(syms) = table.symbols(endian, data, kind) else { continue };
        out.extend(
            (syms.iter())
                .filter(|s| {
                    s.st_type() == elf::STT_GNU_IFUNC && s.st_shndx(endian) != elf::SHN_UNDEF
                })
                .map(|s| ImageAddr(s.st_value(endian))),
        );
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Append the defined, named, non-section/file symbols of one table.
pub(super) fn collect_symbols(
    table: &Symbols<'_>,
    source: SymbolSource,
    out: &mut Vec<Symbol>,
) -> Result<(), String> {
    let endian = LE;
    for sym in table.iter() {
        let st_type = sym.st_type();
        if st_type == elf::STT_SECTION || st_type == elf::STT_FILE {
            continue;
        }
        if sym.st_shndx(endian) == elf::SHN_UNDEF {
            continue;
        }
        let name = table.symbol_name(endian, sym).map_err(|e| e.to_string())?;
        if name.is_empty() {
            continue;
        }
        let kind = match st_type {
            elf::STT_FUNC | elf::STT_GNU_IFUNC => SymbolKind::Function,
            elf::STT_OBJECT | elf::STT_TLS | elf::STT_COMMON => SymbolKind::Object,
            _ => SymbolKind::Other,
        };
        let binding = match sym.st_bind() {
            elf::STB_LOCAL => Binding::Local,
            elf::STB_WEAK => Binding::Weak,
            // STB_GLOBAL, STB_GNU_UNIQUE (a global the dynamic linker keeps unique), and
            // OS/processor-specific bindings: all visible outside the object.
            _ => Binding::Global,
        };
        out.push(Symbol {
            name: String::from_utf8_lossy(name).into_owned(),
            addr: ImageAddr(sym.st_value(endian)),
            size: sym.st_size(endian),
            kind,
            binding,
            source,
            module: None,
        });
    }
    Ok(())
}

/// PLT-like sections, each with the entry size used when the header gives none.
const PLT_SECTIONS: [(&str, u64); 4] =
    [(".plt", 16), (".plt.sec", 16), (".plt.bnd", 16), (".plt.got", 8)];

/// One PLT entry whose code jumps through a GOT slot.
struct PltEntry {
    addr: u64,
    size: u64,
    got: u64,
}

/// Synthesise `name@plt` for every PLT entry, named like objdump does.
///
/// Rather than assume a layout (lazy .plt with PLT0, IBT's .plt + .plt.sec, BND's .plt.bnd,
/// .plt.got for non-lazy slots), decode each entry and take the GOT slot from its
/// `jmp [rip+disp]` (possibly `bnd`/`notrack`, possibly after `endbr64`). The dynamic
/// relocation at that slot names the target: JUMP_SLOT for .plt, GLOB_DAT for .plt.got, a
/// symbol-less IRELATIVE for IFUNCs bound at start-up (objdump calls those
/// `*ABS*+0xADDEND@plt`). Entries without such a jump (PLT0, the lazy half of an IBT PLT)
/// or whose slot has no relocation get no symbol.
fn plt_symbols(
    table: &Sections<'_>,
    dynsym: &Symbols<'_>,
    data: &[u8],
    out: &mut Vec<Symbol>,
) -> Result<(), String> {
    let endian = LE;
    let mut entries = Vec::new();
    for sh in table.iter() {
        if sh.sh_type(endian) == elf::SHT_NOBITS
            || sh.sh_flags(endian) & u64::from(elf::SHF_EXECINSTR) == 0
        {
            continue;
        }
        let Ok(name) = table.section_name(endian, sh) else {
            continue;
        };
        let Some(&(_, default_size)) = PLT_SECTIONS.iter().find(|(n, _)| n.as_bytes() == name)
        else {
            continue;
        };
        let entsize = match sh.sh_entsize(endian) {
            n @ 4..=64 => n,
            _ => default_size,
        };
        let bytes = sh.data(endian, data).map_err(|e| format!("PLT section: {e}"))?;
        decode_plt(bytes, sh.sh_addr(endian), entsize, &mut entries);
    }
    if entries.is_empty() {
        return Ok(());
    }
    entries.sort_by_key(|e| e.got);

    // For each entry, the best relocation at its slot: (entry index, rank, sym, addend).
    let mut found: Vec<Option<(u8, u32, i64)>> = (0..entries.len()).map(|_| None).collect();
    for sh in table.iter() {
        if sh.sh_type(endian) != elf::SHT_RELA
            || sh.sh_flags(endian) & u64::from(elf::SHF_ALLOC) == 0
        {
            continue;
        }
        let Some((relas, _link)) =
            sh.rela(endian, data).map_err(|e| format!("dynamic relocations: {e}"))?
        else {
            continue;
        };
        for rela in relas {
            let slot = rela.r_offset(endian);
            let Ok(first) = entries.binary_search_by_key(&slot, |e| e.got) else {
                continue;
            };
            let r_type = rela.r_type(endian, false);
            let rank = match r_type {
                elf::R_X86_64_JUMP_SLOT => 0,
                elf::R_X86_64_GLOB_DAT => 1,
                elf::R_X86_64_IRELATIVE => 2,
                _ => 3,
            };
            // Several entries may share one slot (a .plt.got entry and a canonical PLT).
            let mut i = first;
            while i > 0 && entries[i - 1].got == slot {
                i -= 1;
            }
            while i < entries.len() && entries[i].got == slot {
                if found[i].is_none_or(|(r, _, _)| rank < r) {
                    found[i] = Some((rank, rela.r_sym(endian, false), rela.r_addend(endian)));
                }
                i += 1;
            }
        }
    }

    for (entry, hit) in entries.iter().zip(found) {
        let Some((_, sym_index, addend)) = hit else {
            continue;
        };
        let name = if sym_index == 0 {
            format!("*ABS*+{addend:#x}@plt")
        } else {
            // A dangling symbol index is a broken relocation: name nothing rather than guess.
            let Ok(sym) = dynsym.symbol(object::SymbolIndex(sym_index as usize)) else {
                continue;
            };
            let Ok(sym_name) = dynsym.symbol_name(endian, sym) else {
                continue;
            };
            let sym_name = String::from_utf8_lossy(sym_name);
            if addend == 0 {
                format!("{sym_name}@plt")
            } else {
                format!("{sym_name}+{addend:#x}@plt")
            }
        };
        out.push(Symbol {
            name,
            addr: ImageAddr(entry.addr),
            size: entry.size,
            kind: SymbolKind::Function,
            binding: Binding::Local,
            source: SymbolSource::Plt,
            module: None,
        });
    }
    Ok(())
}

/// Decode each `entsize`-byte entry of a PLT section at `base` and note the GOT slot of its
/// first RIP-relative indirect jump.
fn decode_plt(bytes: &[u8], base: u64, entsize: u64, out: &mut Vec<PltEntry>) {
    let mut insn = Instruction::default();
    for (i, entry) in bytes.chunks(entsize as usize).enumerate() {
        let addr = base.wrapping_add(i as u64 * entsize);
        let mut decoder = Decoder::with_ip(64, entry, addr, DecoderOptions::NONE);
        while decoder.can_decode() {
            decoder.decode_out(&mut insn);
            if insn.is_invalid() {
                break;
            }
            if insn.mnemonic() == Mnemonic::Jmp
                && insn.op0_kind() == OpKind::Memory
                && insn.memory_base() == Register::RIP
            {
                out.push(PltEntry {
                    addr,
                    size: entry.len() as u64,
                    got: insn.ip_rel_memory_address(),
                });
                break;
            }
        }
    }
}

/// Whether `data` is an ELF image built by Go's toolchain (it has `.go.buildinfo` or
/// `.gopclntab`). Go's runtime resumes code at addresses no call leads to: every goroutine
/// returns to `runtime.goexit`+1, past a one-byte `nop`, and a goroutine preempted
/// asynchronously (by a signal, at nearly any instruction) resumes there from its own stack,
/// which no thread may be running on while kerf splices. `false` for anything that does not
/// parse.
pub(super) fn is_go(data: &[u8]) -> bool {
    let Ok(header) = Header::parse(data) else { return false };
    let Ok(table) = header.sections(LE, data) else { return false };
    table.iter().any(|sh| {
        table.section_name(LE, sh).is_ok_and(|n| n == b".go.buildinfo" || n == b".gopclntab")
    })
}
