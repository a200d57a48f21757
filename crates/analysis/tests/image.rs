//! Tests of image loading: ELF parsing checked against binutils (readelf, nm, objdump) on real
//! Debian binaries and small fixtures, symbol files, /proc/PID/maps layout (from fixtures and
//! from this very process), and robustness against truncated and corrupted files.
//!
//! binutils is required: a missing tool fails the test with a message saying so.

mod common;
use common::Rng;

use kerf_analysis::image::maps::{modules, parse_maps, Mapping, ModuleLayout};
use kerf_analysis::image::{
    parse_symbol_file, Binding, Image, ImageError, ImageKind, Segment, Symbol, SymbolKind,
    SymbolSource,
};
use kerf_arch::{ImageAddr, RemoteAddr};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;

const LS: &str = "/usr/bin/ls";
const TRUE: &str = "/bin/true";
const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const LD: &str = "/lib64/ld-linux-x86-64.so.2";
const LIBSTDCXX: &str = "/usr/lib/x86_64-linux-gnu/libstdc++.so.6";
const LIBLLVM: &str = "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/image").join(name)
}

fn read(path: impl AsRef<Path>) -> Vec<u8> {
    let path = path.as_ref();
    std::fs::read(path).unwrap_or_else(|e| panic!("this test needs {}: {e}", path.display()))
}

/// Run a binutils tool; a missing tool or a failure is a test failure, never a silent pass.
fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| {
        panic!("this test needs `{program}` (Debian package binutils) on PATH: {e}")
    });
    assert!(
        out.status.success(),
        "`{program} {}` failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("tool output is UTF-8")
}

fn load<'a>(path: &str, data: &'a [u8]) -> Image<'a> {
    Image::from_elf(path, data).unwrap_or_else(|e| panic!("{e}"))
}

fn hex(s: &str) -> u64 {
    let s = s.trim_start_matches("0x");
    u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("bad hex {s:?}: {e}"))
}

/// Real binaries (always on Debian) and the fixtures.
fn elf_files() -> Vec<String> {
    let mut files: Vec<String> =
        [LS, TRUE, LIBC, LD, LIBSTDCXX].iter().map(|s| s.to_string()).collect();
    for f in ["plt_ibt", "plt_nopie"] {
        files.push(fixture(f).display().to_string());
    }
    files
}

// ---------------------------------------------------------------------------------------------
// Sections, segments, entry, build-id against readelf.

#[test]
fn sections_match_readelf() {
    for path in elf_files() {
        let data = read(&path);
        let image = load(&path, &data);
        let text = tool("readelf", &["-SW", &path]);
        let mut expected = Vec::new();
        for line in text.lines() {
            // "  [13] .plt   PROGBITS  0000000000004020 004020 000660 10  AX  0   0 16"
            let Some(rest) = line.trim_start().strip_prefix('[') else {
                continue;
            };
            let Some((index, rest)) = rest.split_once(']') else {
                continue;
            };
            let Ok(index) = index.trim().parse::<u32>() else {
                continue;
            };
            if index == 0 {
                continue;
            }
            let t: Vec<&str> = rest.split_whitespace().collect();
            // Flags may be empty, so count from both ends.
            let flags = if t.len() == 10 { t[6] } else { "" };
            expected.push((
                t[0].to_string(),
                t[1] == "NOBITS",
                hex(t[2]),
                hex(t[3]),
                hex(t[4]),
                flags.contains('A'),
                flags.contains('W'),
                flags.contains('X'),
            ));
        }
        let got: Vec<_> = image
            .sections
            .iter()
            .map(|s| {
                (
                    s.name.clone(),
                    s.nobits,
                    s.addr.0,
                    s.file_offset,
                    s.size,
                    s.alloc,
                    s.writable,
                    s.executable,
                )
            })
            .collect();
        assert!(!expected.is_empty(), "{path}: parsed no sections from readelf");
        assert_eq!(got, expected, "{path}: sections differ from readelf -SW");
    }
}

#[test]
fn segments_entry_and_build_id_match_readelf() {
    for path in elf_files() {
        let data = read(&path);
        let image = load(&path, &data);

        let text = tool("readelf", &["-lW", &path]);
        let mut expected = Vec::new();
        for line in text.lines() {
            // "  LOAD 0x000000 0x0000000000000000 0x0000000000000000 0x003528 0x003528 R   0x1000"
            let t: Vec<&str> = line.split_whitespace().collect();
            if t.first() != Some(&"LOAD") {
                continue;
            }
            let flags = t[6..t.len() - 1].concat();
            expected.push(Segment {
                vaddr: ImageAddr(hex(t[2])),
                memsz: hex(t[5]),
                file_offset: hex(t[1]),
                filesz: hex(t[4]),
                readable: flags.contains('R'),
                writable: flags.contains('W'),
                executable: flags.contains('E'),
            });
        }
        assert!(!expected.is_empty());
        assert_eq!(image.segments, expected, "{path}: PT_LOAD segments differ from readelf -lW");

        let header = tool("readelf", &["-hW", &path]);
        let entry = header
            .lines()
            .find_map(|l| l.trim().strip_prefix("Entry point address:"))
            .expect("readelf -h prints the entry");
        assert_eq!(image.entry, ImageAddr(hex(entry.trim())), "{path}: entry");
        let expected_kind = if header.contains("EXEC (Executable file)") {
            ImageKind::Executable
        } else {
            ImageKind::SharedObject
        };
        assert_eq!(image.kind, expected_kind, "{path}: kind");

        let notes = tool("readelf", &["-nW", &path]);
        let build_id = notes
            .lines()
            .find_map(|l| l.split_once("Build ID:"))
            .map(|(_, id)| id.trim().to_string());
        let got = image
            .build_id
            .as_ref()
            .map(|b| b.iter().map(|x| format!("{x:02x}")).collect::<String>());
        assert_eq!(got, build_id, "{path}: build-id");
        assert!(got.is_some(), "{path}: Debian binaries carry a build-id");
    }
}

// ---------------------------------------------------------------------------------------------
// Symbols against nm (names and addresses) and readelf (kind, binding, size).

/// (address, name) of defined symbols as nm prints them, without version suffixes.
fn nm_defined(path: &str, dynamic: bool) -> BTreeSet<(u64, String)> {
    let mut args = vec!["--defined-only", "--without-symbol-versions"];
    if dynamic {
        args.push("-D");
    }
    args.push(path);
    let text = tool("nm", &args);
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.ends_with("no symbols"))
        .map(|l| {
            let (addr, rest) = l.split_once(' ').expect("nm line");
            let (_ty, name) = rest.split_once(' ').expect("nm line");
            (hex(addr), name.to_string())
        })
        .collect()
}

fn addr_names(image: &Image, sources: &[SymbolSource]) -> BTreeSet<(u64, String)> {
    image
        .symbols
        .iter()
        .filter(|s| sources.contains(&s.source))
        .map(|s| (s.addr.0, s.name.clone()))
        .collect()
}

#[test]
fn dynamic_symbols_match_nm() {
    for path in [LS, TRUE, LIBC, LD, LIBSTDCXX] {
        let data = read(path);
        let image = load(path, &data);
        assert!(
            !image.symbols.iter().any(|s| s.source == SymbolSource::Symtab),
            "{path} is stripped on Debian"
        );
        let expected = nm_defined(path, true);
        assert!(expected.len() > 5, "{path}: nm -D printed too little");
        assert_eq!(
            addr_names(&image, &[SymbolSource::Dynsym]),
            expected,
            "{path}: dynsym vs nm -D --defined-only"
        );
        // Kinds are checked against readelf below; here, nm's function and object letters
        // must match our functions and objects one for one (nm prints the ABS version
        // symbols, STT_OBJECT, as `A`, and STB_GNU_UNIQUE objects as `u`).
        let nm_fn_obj = tool("nm", &["-D", "--defined-only", "--without-symbol-versions", path])
            .lines()
            .filter_map(|l| {
                let mut t = l.splitn(3, ' ');
                let (addr, ty, name) = (t.next()?, t.next()?, t.next()?);
                ("TtiWwVvDdBbRrAu".contains(ty) && ty.len() == 1)
                    .then(|| (hex(addr), name.to_string()))
            })
            .collect::<BTreeSet<_>>();
        let ours: BTreeSet<(u64, String)> = image
            .symbols
            .iter()
            .filter(|s| s.source == SymbolSource::Dynsym && s.kind != SymbolKind::Other)
            .map(|s| (s.addr.0, s.name.clone()))
            .collect();
        let other: BTreeSet<(u64, String)> = image
            .symbols
            .iter()
            .filter(|s| s.source == SymbolSource::Dynsym && s.kind == SymbolKind::Other)
            .map(|s| (s.addr.0, s.name.clone()))
            .collect();
        // NOTYPE symbols (e.g. `_end`-style markers) print with data letters too.
        assert!(ours.is_subset(&nm_fn_obj), "{path}");
        assert_eq!(
            ours.len() + other.intersection(&nm_fn_obj).count(),
            nm_fn_obj.len(),
            "{path}: function+object count vs nm -D"
        );
        eprintln!("{path}: {} dynsym functions+objects, {} other", ours.len(), other.len());
    }
}

#[test]
fn symtab_and_dynsym_match_nm_for_unstripped_files() {
    let exe = std::env::current_exe().expect("current_exe");
    let exe = exe.to_str().expect("utf-8 path").to_string();
    for path in
        [fixture("plt_ibt").display().to_string(), fixture("plt_nopie").display().to_string(), exe]
    {
        let data = read(&path);
        let image = load(&path, &data);
        let mut expected = nm_defined(&path, false);
        expected.extend(nm_defined(&path, true));
        let got = addr_names(&image, &[SymbolSource::Symtab, SymbolSource::Dynsym]);
        let missing: Vec<_> = expected.difference(&got).take(10).collect();
        let extra: Vec<_> = got.difference(&expected).take(10).collect();
        assert!(
            missing.is_empty() && extra.is_empty(),
            "{path}: missing {missing:?}, extra {extra:?}"
        );
        assert!(image.symbols.iter().any(|s| s.source == SymbolSource::Symtab));
    }
}

/// One symbol row of `readelf -sW`: (table, addr, name, kind, binding, size).
fn readelf_symbols(path: &str) -> Vec<(SymbolSource, u64, String, SymbolKind, Binding, u64)> {
    let text = tool("readelf", &["-sW", path]);
    let mut table = None;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with("Symbol table '.dynsym'") {
            table = Some(SymbolSource::Dynsym);
            continue;
        }
        if line.starts_with("Symbol table '.symtab'") {
            table = Some(SymbolSource::Symtab);
            continue;
        }
        let Some(source) = table else { continue };
        // "  2727: 000000000009be70   265 IFUNC   GLOBAL DEFAULT   16 memcpy@@GLIBC_2.14"
        let t: Vec<&str> = line.split_whitespace().collect();
        if t.len() < 7 || !t[0].ends_with(':') || t[0] == "Num:" {
            continue;
        }
        let (ty, bind, ndx) = (t[3], t[4], t[6]);
        if ndx == "UND" || ty == "SECTION" || ty == "FILE" || t.len() < 8 {
            continue;
        }
        let mut name = t[7].to_string();
        if source == SymbolSource::Dynsym {
            // readelf appends the version; the ELF string table has none.
            if let Some(at) = name.find('@') {
                name.truncate(at);
            }
        }
        let size = if let Some(h) = t[2].strip_prefix("0x") {
            hex(h)
        } else {
            t[2].parse().expect("size")
        };
        let kind = match ty {
            "FUNC" | "IFUNC" => SymbolKind::Function,
            "OBJECT" | "TLS" | "COMMON" => SymbolKind::Object,
            _ => SymbolKind::Other,
        };
        let binding = match bind {
            "LOCAL" => Binding::Local,
            "WEAK" => Binding::Weak,
            _ => Binding::Global,
        };
        out.push((source, hex(t[1]), name, kind, binding, size));
    }
    out
}

/// The GNU indirect functions (resolvers) of libc are the IFUNC rows of `readelf -sW`.
#[test]
fn ifunc_resolvers_match_readelf() {
    let text = tool("readelf", &["-sW", LIBC]);
    let mut want: Vec<u64> = (text.lines())
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .filter(|t| t.len() >= 8 && t[3] == "IFUNC" && t[6] != "UND")
        .map(|t| hex(t[1]))
        .collect();
    want.sort_unstable();
    want.dedup();
    let data = std::fs::read(LIBC).unwrap();
    let got: Vec<u64> = Image::ifunc_resolvers(&data).iter().map(|a| a.0).collect();
    assert!(want.len() > 20, "libc has dozens: {}", want.len());
    assert_eq!(got, want);
    assert!(Image::ifunc_resolvers(b"not an ELF file").is_empty());
}

#[test]
fn symbol_kinds_bindings_and_sizes_match_readelf() {
    for path in [LIBC.to_string(), LS.to_string(), fixture("plt_ibt").display().to_string()] {
        let data = read(&path);
        let image = load(&path, &data);
        // readelf rows, deduplicated like Image does: one per (addr, name), symtab first.
        let mut expected: BTreeMap<(u64, String), (SymbolSource, SymbolKind, Binding, u64)> =
            BTreeMap::new();
        for (source, addr, name, kind, binding, size) in readelf_symbols(&path) {
            let e = expected.entry((addr, name)).or_insert((source, kind, binding, size));
            if source == SymbolSource::Symtab && e.0 == SymbolSource::Dynsym {
                *e = (source, kind, binding, size);
            }
        }
        let got: BTreeMap<(u64, String), (SymbolSource, SymbolKind, Binding, u64)> = image
            .symbols
            .iter()
            .filter(|s| s.source != SymbolSource::Plt)
            .map(|s| ((s.addr.0, s.name.clone()), (s.source, s.kind, s.binding, s.size)))
            .collect();
        assert_eq!(got.len(), expected.len(), "{path}: symbol count vs readelf -sW");
        for (key, value) in &expected {
            assert_eq!(got.get(key), Some(value), "{path}: symbol {key:?}");
        }
    }
}

#[test]
fn symbols_are_sorted_and_unique() {
    for path in elf_files() {
        let data = read(&path);
        let image = load(&path, &data);
        for w in image.symbols.windows(2) {
            assert!(
                (w[0].addr, &w[0].name) < (w[1].addr, &w[1].name),
                "{path}: {:?} then {:?}",
                w[0],
                w[1]
            );
        }
        assert!(image.symbols.iter().all(|s| !s.name.is_empty() && s.module.is_none()));
    }
}

// ---------------------------------------------------------------------------------------------
// PLT entries against objdump's synthetic `name@plt` labels.

fn objdump_plt(path: &str) -> BTreeSet<(u64, String)> {
    // -j for sections a file lacks only warns.
    let text = tool("objdump", &["-d", "-j", ".plt", "-j", ".plt.sec", "-j", ".plt.got", path]);
    text.lines()
        .filter_map(|l| {
            // "0000000000004680 <free@plt>:"
            let (addr, rest) = l.split_once(" <")?;
            let name = rest.strip_suffix(">:")?;
            (name.ends_with("@plt")
                && !addr.is_empty()
                && addr.bytes().all(|b| b.is_ascii_hexdigit()))
            .then(|| (hex(addr), name.to_string()))
        })
        .collect()
}

fn plt_symbols(image: &Image) -> BTreeSet<(u64, String)> {
    addr_names(image, &[SymbolSource::Plt])
}

#[test]
fn plt_names_match_objdump() {
    for path in [
        LS,
        TRUE,
        LIBC,
        LD,
        LIBSTDCXX,
        &fixture("plt_ibt").display().to_string(),
        &fixture("plt_nopie").display().to_string(),
    ] {
        let data = read(path);
        let image = load(path, &data);
        let expected = objdump_plt(path);
        let got = plt_symbols(&image);
        assert_eq!(got, expected, "{path}: PLT symbols vs objdump");
        for s in image.symbols.iter().filter(|s| s.source == SymbolSource::Plt) {
            assert_eq!(s.kind, SymbolKind::Function);
            assert!(s.size == 8 || s.size == 16, "{path}: {s:?}");
            let (start, bytes) = image.code_at(s.addr).expect("PLT entry is code");
            assert!(s.addr.0 + s.size <= start.0 + bytes.len() as u64);
        }
    }
    // Layouts seen: ls/libc/libstdc++ have a lazy .plt plus an 8-byte .plt.got; libc's .plt
    // also has IFUNC entries bound by IRELATIVE; the IBT fixture has .plt.sec.
    let data = read(LIBC);
    let image = load(LIBC, &data);
    let plt = plt_symbols(&image);
    assert!(plt.iter().any(|(_, n)| n.starts_with("*ABS*+0x")), "libc has IRELATIVE PLT entries");
    assert!(plt.iter().any(|(_, n)| n == "malloc@plt"), "libc's malloc@plt lives in .plt.got");
    let data = read(fixture("plt_ibt"));
    let image = load("plt_ibt", &data);
    let names: BTreeSet<String> = plt_symbols(&image).into_iter().map(|(_, n)| n).collect();
    for n in ["free@plt", "strcpy@plt", "puts@plt", "strlen@plt", "__cxa_finalize@plt"] {
        assert!(names.contains(n), "plt_ibt lacks {n}: {names:?}");
    }
}

#[test]
fn plt_names_survive_bnd_jumps() {
    // Rewrite the IBT fixture's .plt.sec entries from `endbr64; jmp [rip+d]; nopw` to the
    // MPX form `endbr64; bnd jmp [rip+d']; nopl` (same GOT slot): names must not change.
    let path = fixture("plt_ibt").display().to_string();
    let mut data = read(&path);
    let (sec_off, sec_size) = {
        let image = load(&path, &data);
        let s = image.sections.iter().find(|s| s.name == ".plt.sec").expect(".plt.sec");
        (s.file_offset as usize, s.size as usize)
    };
    let before = plt_symbols(&load(&path, &data));
    assert_eq!(before, objdump_plt(&path));
    for entry in (sec_off..sec_off + sec_size).step_by(16) {
        let e = &mut data[entry..entry + 16];
        assert_eq!(&e[..6], &[0xf3, 0x0f, 0x1e, 0xfa, 0xff, 0x25], "unexpected .plt.sec layout");
        let disp = i32::from_le_bytes([e[6], e[7], e[8], e[9]]);
        // The jmp moves from offset 4 (6 bytes) to offset 4 (7 bytes): its end moves by 1.
        let new = (disp - 1).to_le_bytes();
        e[4..16].copy_from_slice(&[
            0xf2, 0xff, 0x25, new[0], new[1], new[2], new[3], 0x0f, 0x1f, 0x44, 0x00, 0x00,
        ]);
    }
    let after = plt_symbols(&load(&path, &data));
    assert_eq!(after, before);
    let objdump_after = {
        let tmp = std::env::temp_dir().join(format!("kerf-bnd-{}", std::process::id()));
        std::fs::write(&tmp, &data).expect("write temp file");
        let set = objdump_plt(tmp.to_str().expect("utf-8"));
        let _ = std::fs::remove_file(&tmp);
        set
    };
    assert_eq!(after, objdump_after, "objdump agrees on the bnd form");
}

#[test]
fn libllvm_loads() {
    let data = read(LIBLLVM);
    let start = std::time::Instant::now();
    let image = load(LIBLLVM, &data);
    // Printed, not asserted (no timed assertions in tests); run with --release to compare
    // with the budget.
    eprintln!("libLLVM-14: {} symbols in {:?}", image.symbols.len(), start.elapsed());
    assert_eq!(addr_names(&image, &[SymbolSource::Dynsym]), nm_defined(LIBLLVM, true));
    assert_eq!(plt_symbols(&image), objdump_plt(LIBLLVM));
    assert!(image.text_bytes() > 30 << 20);
}

// ---------------------------------------------------------------------------------------------
// Errors and robustness.

fn patched(path: &str, f: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut data = read(path);
    f(&mut data);
    data
}

#[test]
fn error_kinds_and_messages() {
    let not_elf = Image::from_elf("/tmp/x", b"#!/bin/sh\necho hi\n").unwrap_err();
    assert_eq!(not_elf, ImageError::NotElf { name: "/tmp/x".into() });
    assert_eq!(not_elf.to_string(), "/tmp/x: not an ELF file");
    assert!(matches!(Image::from_elf("e", b""), Err(ImageError::NotElf { .. })));
    assert!(matches!(Image::from_elf("e", b"\x7fEL"), Err(ImageError::NotElf { .. })));
    assert!(matches!(Image::from_elf("e", b"\x7fELF\x02\x01"), Err(ImageError::Malformed { .. })));

    let arm = patched(TRUE, |d| d[18..20].copy_from_slice(&183u16.to_le_bytes()));
    let err = Image::from_elf("foo", &arm).unwrap_err();
    assert_eq!(err, ImageError::NotX86_64 { name: "foo".into(), machine: 183 });
    assert_eq!(err.to_string(), "foo: ELF for machine 183 (not x86-64)");

    let elf32 = patched(TRUE, |d| d[4] = 1);
    let err = Image::from_elf("t32", &elf32).unwrap_err();
    assert_eq!(err, ImageError::Not64Bit { name: "t32".into() });
    assert!(err.to_string().starts_with("t32: 32-bit ELF"), "{err}");

    for (e_type, word) in [(1u16, "ET_REL"), (4, "ET_CORE"), (0, "e_type 0x0")] {
        let data = patched(TRUE, |d| d[16..18].copy_from_slice(&e_type.to_le_bytes()));
        let err = Image::from_elf("obj", &data).unwrap_err();
        assert!(matches!(err, ImageError::UnsupportedType { .. }), "{err:?}");
        assert!(
            err.to_string().starts_with("obj: unsupported ELF type")
                && err.to_string().contains(word),
            "{err}"
        );
    }

    let data = read(TRUE);
    let err = Image::from_elf("cut", &data[..100]).unwrap_err();
    assert!(matches!(err, ImageError::Malformed { .. }), "{err:?}");
    assert!(err.to_string().starts_with("cut: malformed ELF: "), "{err}");
    assert!(!err.to_string().contains('\n'));

    let err = ImageError::BadSymbolLine { line_no: 3, line: "junk".into() };
    assert!(err.to_string().starts_with("symbol file line 3: "), "{err}");
}

/// Use everything a successfully parsed image offers, so that lies in it are exercised.
fn exercise(image: &Image) {
    for s in &image.sections {
        let _ = image.code_at(s.addr);
        let _ = image.code_at(ImageAddr(s.addr.0.wrapping_add(s.size).wrapping_sub(1)));
        let _ = image.section_bytes(s);
    }
    for s in image.symbols.iter().take(2000) {
        let _ = image.code_at(s.addr);
    }
    let _ = image.text_bytes();
}

#[test]
fn truncated_files_never_panic() {
    for path in [TRUE.to_string(), fixture("plt_ibt").display().to_string()] {
        let data = read(&path);
        for len in (0..data.len()).filter(|&n| n < 8192 || n % 7 == 0) {
            match Image::from_elf(&path, &data[..len]) {
                Ok(image) => exercise(&image),
                Err(ImageError::Malformed { .. } | ImageError::NotElf { .. }) => {}
                Err(e) => panic!("{path}[..{len}]: unexpected {e:?}"),
            }
        }
        // The section headers sit at the end: every real truncation loses them.
        assert!(Image::from_elf(&path, &data[..data.len() - 1]).is_err());
    }
}

#[test]
fn corrupted_files_never_panic() {
    let mut rng = Rng(0x6b65_7266_2d69_6d67);
    for path in [TRUE.to_string(), fixture("plt_ibt").display().to_string()] {
        let original = read(&path);
        let image = load(&path, &original);
        // Structural bytes: ELF header, program headers, section headers, and the sections
        // the parser reads (symbol and string tables, relocations, notes, PLTs).
        let shoff = u64::from_le_bytes(original[0x28..0x30].try_into().expect("8 bytes")) as usize;
        let mut regions = vec![(0, 64), (64, 64 + 56 * 13), (shoff, original.len())];
        for s in &image.sections {
            if !s.nobits && s.size > 0 && s.size < 1 << 16 && !s.name.starts_with(".text") {
                regions.push((s.file_offset as usize, (s.file_offset + s.size) as usize));
            }
        }
        drop(image);
        let mut ok = 0;
        for round in 0..4000 {
            let mut data = original.clone();
            let edits = 1 + rng.below(8);
            for _ in 0..edits {
                let (lo, hi) = if round % 4 == 0 {
                    (0, data.len())
                } else {
                    regions[rng.below(regions.len())]
                };
                let at = lo + rng.below((hi - lo).max(1));
                if at >= data.len() {
                    continue;
                }
                match rng.below(4) {
                    // Flip a bit, set a random byte, or plant an extreme 8-byte value.
                    0 => data[at] ^= 1 << rng.below(8),
                    1 => data[at] = rng.next() as u8,
                    _ => {
                        let v: u64 = [u64::MAX, 1 << 63, 0, 0xffff_ffff, 0x7fff_ffff, rng.next()]
                            [rng.below(6)];
                        let end = (at + 8).min(data.len());
                        data[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
                    }
                }
            }
            if let Ok(image) = Image::from_elf(&path, &data) {
                ok += 1;
                exercise(&image);
                let mut image = image;
                let _ = image.add_symbol_file("0000000000001000 T a\n0000000000001100 w b\n");
            }
        }
        // Corruption in unused bytes still parses; make sure both outcomes were exercised.
        assert!(ok > 100 && ok < 4000, "{path}: {ok} of 4000 corrupted copies parsed");
    }
}

#[test]
fn section_headers_missing_falls_back_to_load_segments() {
    // e_shoff = e_shnum = e_shstrndx = 0, as sstrip leaves a file.
    let data = patched(TRUE, |d| {
        d[0x28..0x30].fill(0);
        d[0x3c..0x40].fill(0);
    });
    let image = load("sstripped", &data);
    assert!(image.symbols.is_empty());
    let original = read(TRUE);
    let full = load(TRUE, &original);
    let text = full.sections.iter().find(|s| s.name == ".text").expect(".text");
    let (start, bytes) = image.code_at(full.entry).expect("entry is in an executable PT_LOAD");
    let at = (full.entry.0 - start.0) as usize;
    let (tstart, tbytes) = full.code_at(full.entry).expect("entry in .text");
    assert_eq!(tstart, text.addr);
    let tat = (full.entry.0 - tstart.0) as usize;
    assert_eq!(&bytes[at..at + 16], &tbytes[tat..tat + 16]);
    assert!(image.sections.iter().all(|s| s.name.starts_with("load")));
    assert!(image.build_id.is_some(), "build-id from PT_NOTE");
    assert_eq!(image.build_id, full.build_id);
}

// ---------------------------------------------------------------------------------------------
// code_at.

#[test]
fn code_at_returns_section_bytes() {
    let data = read(LS);
    let mut image = load(LS, &data);
    let text = image.sections.iter().find(|s| s.name == ".text").expect(".text").clone();
    let (start, bytes) = image.code_at(ImageAddr(text.addr.0 + 10)).expect("in .text");
    assert_eq!(start, text.addr);
    assert_eq!(bytes, &data[text.file_offset as usize..(text.file_offset + text.size) as usize]);
    assert_eq!(image.code_at(ImageAddr(text.addr.0 + text.size - 1)).map(|c| c.0), Some(text.addr));
    let data_sec = image.sections.iter().find(|s| s.name == ".data").expect(".data").clone();
    assert_eq!(image.code_at(data_sec.addr), None, ".data is not code");
    let bss = image.sections.iter().find(|s| s.name == ".bss").expect(".bss").clone();
    assert_eq!(image.code_at(bss.addr), None);
    assert_eq!(image.code_at(ImageAddr(u64::MAX)), None);
    assert_eq!(image.text_bytes(), image.exec_sections().map(|s| s.size).sum::<u64>());
    assert!(image.exec_sections().any(|s| s.name == ".plt"));

    // A section header that lies about its file range yields nothing rather than a panic.
    let i = image.sections.iter().position(|s| s.name == ".text").expect(".text");
    image.sections[i].file_offset = u64::MAX - 4;
    assert_eq!(image.code_at(ImageAddr(text.addr.0 + 10)), None);
    image.sections[i].file_offset = data.len() as u64 - 10;
    assert_eq!(image.code_at(ImageAddr(text.addr.0 + 10)), None);
}

// ---------------------------------------------------------------------------------------------
// Symbol files.

const KALLSYMS: &str = "\
ffffffff81000000 T _stext
ffffffff81000000 T startup_64
ffffffff81000060 t verify_cpu
ffffffff81000200 W weak_text
ffffffff81001000 T _etext
ffffffff82000000 D init_task
ffffffff82000100 d local_data
ffffffff82000200 b local_bss
ffffffff82000300 R rodata_thing
ffffffff82000400 V weak_obj
0000000000000000 A fixed_percpu_data
0000000000001000 A __per_cpu_start
ffffffffc0a01000 t my_init\t[mymod]
ffffffffc0a01100 T my_exit\t[mymod]
ffffffffc0a02000 d my_data\t[mymod]
";

fn find<'a>(symbols: &'a [Symbol], name: &str) -> &'a Symbol {
    symbols.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("no symbol {name}"))
}

#[test]
fn kallsyms_parses() {
    let syms = parse_symbol_file(KALLSYMS).expect("parses");
    assert_eq!(syms.len(), 13, "A lines skipped: {syms:?}");
    let s = find(&syms, "verify_cpu");
    assert_eq!(
        (s.addr, s.kind, s.binding, s.size),
        (ImageAddr(0xffffffff81000060), SymbolKind::Function, Binding::Local, 0)
    );
    assert_eq!(s.source, SymbolSource::SymbolFile);
    assert_eq!(s.module, None);
    assert_eq!(find(&syms, "startup_64").binding, Binding::Global);
    assert_eq!(
        (find(&syms, "weak_text").kind, find(&syms, "weak_text").binding),
        (SymbolKind::Function, Binding::Weak)
    );
    assert_eq!(
        (find(&syms, "weak_obj").kind, find(&syms, "weak_obj").binding),
        (SymbolKind::Object, Binding::Weak)
    );
    assert_eq!(
        (find(&syms, "init_task").kind, find(&syms, "init_task").binding),
        (SymbolKind::Object, Binding::Global)
    );
    assert_eq!(find(&syms, "local_bss").binding, Binding::Local);
    let m = find(&syms, "my_init");
    assert_eq!(
        (m.module.as_deref(), m.kind, m.binding),
        (Some("mymod"), SymbolKind::Function, Binding::Local)
    );
    assert_eq!(find(&syms, "my_data").module.as_deref(), Some("mymod"));
    // Order is file order: parse_symbol_file does not sort.
    assert_eq!(syms[0].name, "_stext");
}

#[test]
fn nm_output_parses() {
    let text = [
        "",
        "                 U puts@GLIBC_2.2.5",
        "                 w __gmon_start__",
        "0000000000001139 T main",
        "0000000000004010 B __bss_start",
        "0000000000001000 i ifunc_thing",
        "0000000000002000 u unique_obj",
        "0000000000001200 W weak_fn",
        "0000000000001150 t operator new(unsigned long, std::nothrow_t const&)",
        "0000000000000000 N debug_thing",
        "",
    ]
    .join("\n");
    let text = text.as_str();
    let syms = parse_symbol_file(text).expect("parses");
    let names: Vec<&str> = syms.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "main",
            "__bss_start",
            "ifunc_thing",
            "unique_obj",
            "weak_fn",
            "operator new(unsigned long, std::nothrow_t const&)"
        ]
    );
    assert_eq!(find(&syms, "ifunc_thing").kind, SymbolKind::Function);
    assert_eq!(find(&syms, "weak_fn").kind, SymbolKind::Function);
    // nm -S: a size column after the address.
    let sized =
        parse_symbol_file("0000000000001139 000000000000002a T main\n0000000000001170 t no_size\n")
            .expect("parses");
    assert_eq!((sized[0].name.as_str(), sized[0].size), ("main", 0x2a));
    assert_eq!((sized[1].name.as_str(), sized[1].size), ("no_size", 0));
    // CRLF line ends.
    assert_eq!(
        parse_symbol_file("ffffffff81000000 T _stext\r\n").expect("parses")[0].name,
        "_stext"
    );
}

#[test]
fn bad_symbol_lines_are_reported_with_their_number() {
    for (text, line_no, line) in [
        ("ffffffff81000000 T _stext\nnot a symbol line\n", 2, "not a symbol line"),
        ("ffffffff81000000 T _stext\n\nffffffff81000000 T\n", 3, "ffffffff81000000 T"),
        ("xyz T foo\n", 1, "xyz T foo"),
        ("ffffffff81000000 TT foo\n", 1, "ffffffff81000000 TT foo"),
        ("ffffffff81000000 T foo\tmymod\n", 1, "ffffffff81000000 T foo\tmymod"),
        ("11112222333344445 T too_long_address\n", 1, "11112222333344445 T too_long_address"),
        ("/usr/bin/ls:\n", 1, "/usr/bin/ls:"),
    ] {
        assert_eq!(
            parse_symbol_file(text),
            Err(ImageError::BadSymbolLine { line_no, line: line.to_string() }),
            "{text:?}"
        );
    }
    let huge = format!("{} T x", "q".repeat(100_000));
    match parse_symbol_file(&huge) {
        Err(ImageError::BadSymbolLine { line, .. }) => assert!(line.len() < 300),
        other => panic!("{other:?}"),
    }
}

#[test]
fn symbol_file_on_raw_image_sizes_functions() {
    let code = vec![0xccu8; 0x1000];
    let mut image = Image::raw("kernel", &code, ImageAddr(0xffffffff81000000));
    assert_eq!(image.kind, ImageKind::Raw);
    assert_eq!(image.text_bytes(), 0x1000);
    let added = image.add_symbol_file(KALLSYMS).expect("parses");
    assert_eq!(added, 13);
    let s = |name: &str| {
        image.symbols.iter().find(|s| s.name == name).unwrap_or_else(|| panic!("{name}")).clone()
    };
    assert_eq!(s("_stext").size, 0x60);
    assert_eq!(s("startup_64").size, 0x60);
    assert_eq!(s("verify_cpu").size, 0x1a0);
    assert_eq!(s("weak_text").kind, SymbolKind::Function, "weak, inside .text");
    assert_eq!(s("weak_text").size, 0xe00, "up to the end of the section");
    assert_eq!(s("weak_obj").kind, SymbolKind::Object, "weak, outside any executable section");
    assert_eq!(s("_etext").size, 0, "outside the code: no size");
    assert_eq!(s("my_init").size, 0, "module code is outside this image");
    assert_eq!(s("init_task").size, 0);
    // Sorted, and adding the same file again adds nothing.
    assert!(image.symbols.windows(2).all(|w| (w[0].addr, &w[0].name) < (w[1].addr, &w[1].name)));
    assert_eq!(image.add_symbol_file(KALLSYMS), Ok(0));
    let (start, bytes) = image.code_at(ImageAddr(0xffffffff81000060)).expect("code");
    assert_eq!((start.0, bytes.len()), (0xffffffff81000000, 0x1000));
    assert_eq!(image.code_at(ImageAddr(0xffffffff81001000)), None);
    assert!(matches!(
        image.add_symbol_file("oops\n"),
        Err(ImageError::BadSymbolLine { line_no: 1, .. })
    ));
}

#[test]
fn symbol_file_on_elf_image() {
    let path = fixture("plt_ibt").display().to_string();
    let data = read(&path);
    let mut image = load(&path, &data);
    // nm's view of the same file adds nothing new: same names, same addresses.
    let nm = tool("nm", &[&path]);
    assert_eq!(image.add_symbol_file(&nm), Ok(0));
    assert!(image.symbols.iter().all(|s| s.source != SymbolSource::SymbolFile));

    // Without .symtab, nm's symbols come back with sizes reaching the next function.
    let mut image = load(&path, &data);
    let real: Vec<Symbol> =
        image.symbols.iter().filter(|s| s.source == SymbolSource::Symtab).cloned().collect();
    image.symbols.retain(|s| s.source != SymbolSource::Symtab);
    let added = image.add_symbol_file(&nm).expect("nm output parses");
    assert!(added > 10, "{added}");
    for r in real.iter().filter(|r| r.kind == SymbolKind::Function) {
        let got = image
            .symbols
            .iter()
            .find(|s| s.name == r.name && s.addr == r.addr)
            .unwrap_or_else(|| panic!("{} not re-added", r.name));
        assert_eq!(got.kind, SymbolKind::Function, "{}", r.name);
        if got.source == SymbolSource::SymbolFile {
            assert!(got.size >= r.size, "{}: {} < real {}", r.name, got.size, r.size);
            let (start, bytes) = image.code_at(got.addr).expect("function in code");
            assert!(got.addr.0 + got.size <= start.0 + bytes.len() as u64);
        }
    }
    let main = image.symbols.iter().find(|s| s.name == "main").expect("main");
    assert_eq!(main.source, SymbolSource::SymbolFile);
    let fini = image.symbols.iter().find(|s| s.name == "_fini").expect("_fini");
    let fini_sec = image.sections.iter().find(|s| s.name == ".fini").expect(".fini");
    assert_eq!(
        fini.addr.0 + fini.size,
        fini_sec.addr.0 + fini_sec.size,
        "last function ends with its section"
    );
}

// ---------------------------------------------------------------------------------------------
// /proc/PID/maps.

fn text_fixture(name: &str) -> String {
    String::from_utf8(read(fixture(name))).expect("utf-8")
}

/// What the parser made of one maps line, in the fixture's notation (see its header).
fn render_mapping(m: &Mapping) -> String {
    let flag = |on: bool, c: char| if on { c } else { '-' };
    let path = m.path.as_ref().map_or("-".to_string(), |p| format!("{p:?}"));
    format!(
        "{:#x}..{:#x} {}{}{}{} off={:#x} dev={} inode={} path={path}{}",
        m.start.0,
        m.end.0,
        flag(m.read, 'r'),
        flag(m.write, 'w'),
        flag(m.exec, 'x'),
        if m.private { 'p' } else { 's' },
        m.offset,
        m.dev,
        m.inode,
        if m.is_deleted() { " deleted" } else { "" },
    )
}

/// Every case of tests/data/maps/lines.txt: one maps line and what it parses to.
#[test]
fn maps_lines_fixture() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/maps/lines.txt");
    let text = String::from_utf8(read(&path)).expect("utf-8");
    let mut cases = 0;
    for (n, case) in text.lines().enumerate().filter(|(_, l)| !l.starts_with('#')) {
        let (line, want) = case.rsplit_once(" | ").unwrap_or_else(|| panic!("line {}", n + 1));
        let got = match parse_maps(line) {
            Ok(maps) => {
                assert_eq!(maps.len(), 1, "fixture line {}: {line:?}", n + 1);
                render_mapping(&maps[0])
            }
            Err(e) => {
                assert_eq!((e.line_no, e.line.as_str()), (1, line), "fixture line {}", n + 1);
                format!("error: {}", e.detail)
            }
        };
        assert_eq!(got, want, "fixture line {}: {line:?}", n + 1);
        cases += 1;
    }
    assert!(cases >= 30, "only {cases} cases in {}", path.display());
}

#[test]
fn maps_fixture_of_cat() {
    let maps = parse_maps(&text_fixture("maps_cat.txt")).expect("parses");
    assert_eq!(maps.len(), 38);
    assert_eq!(
        maps[0],
        Mapping {
            start: RemoteAddr(0x560c1cf4c000),
            end: RemoteAddr(0x560c1cf4e000),
            read: true,
            write: false,
            exec: false,
            private: true,
            offset: 0,
            dev: "fe:00".into(),
            inode: 247026,
            path: Some("/usr/bin/cat".into()),
        }
    );
    let anon = &maps[6];
    assert_eq!((anon.path.as_deref(), anon.inode, anon.write), (None, 0, true));
    let vsyscall = maps.last().expect("lines");
    assert_eq!((vsyscall.start.0, vsyscall.exec, vsyscall.read), (0xffffffffff600000, true, false));
    let gconv = maps
        .iter()
        .find(|m| m.path.as_deref().is_some_and(|p| p.ends_with("gconv-modules.cache")))
        .expect("gconv");
    assert!(!gconv.private);

    let mods = modules(&maps);
    let names: Vec<&str> = mods.iter().map(|m| m.path.as_str()).collect();
    assert_eq!(names.len(), 17, "{names:?}");
    assert_eq!(names[0], "/usr/bin/cat");
    assert!(!names
        .iter()
        .any(|n| *n == "[heap]" || *n == "[stack]" || *n == "[vvar]" || *n == "[vsyscall]"));
    let code: Vec<&str> = mods.iter().filter(|m| m.executable()).map(|m| m.path.as_str()).collect();
    assert_eq!(
        code,
        [
            "/usr/bin/cat",
            "/usr/lib/x86_64-linux-gnu/libc.so.6",
            "[vdso]",
            "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
        ]
    );
    let libc = mods.iter().find(|m| m.path.ends_with("libc.so.6")).expect("libc");
    assert_eq!(libc.mappings.len(), 5);
    assert_eq!(libc.base, RemoteAddr(0x7f492d5e3000));
    assert_eq!(libc.end(), RemoteAddr(0x7f492d7b8000));
    // libc's first PT_LOAD is at vaddr 0: the bias is its base.
    let seg = |vaddr: u64, off: u64| Segment {
        vaddr: ImageAddr(vaddr),
        memsz: 0x1000,
        file_offset: off,
        filesz: 0x1000,
        readable: true,
        writable: false,
        executable: false,
    };
    assert_eq!(libc.bias(&[seg(0, 0), seg(0x26000, 0x26000)]), 0x7f492d5e3000);
    let vdso = mods.iter().find(|m| m.path == "[vdso]").expect("vdso");
    assert_eq!(vdso.bias(&[seg(0, 0)]), 0x7f492d7d6000);
}

#[test]
fn maps_fixture_of_python() {
    let text = text_fixture("maps_python.txt");
    let maps = parse_maps(&text).expect("parses");
    assert_eq!(maps.len(), text.lines().count());
    let mods = modules(&maps);
    assert!(mods.windows(2).all(|w| w[0].base < w[1].base));
    for m in &mods {
        assert!(m.mappings.windows(2).all(|w| w[0].start < w[1].start));
        assert_eq!(m.base, m.mappings[0].start);
        assert!(m.mappings.iter().all(|x| x.path.as_deref() == Some(m.path.as_str())));
        assert_eq!(m.mappings.iter().filter(|x| x.offset == 0).count(), 1, "{}", m.path);
    }
    let file_backed = maps
        .iter()
        .filter(|m| m.path.as_deref().is_some_and(|p| p.starts_with('/') || p == "[vdso]"))
        .count();
    assert_eq!(mods.iter().map(|m| m.mappings.len()).sum::<usize>(), file_backed);
    let libcrypto = mods.iter().find(|m| m.path.ends_with("libcrypto.so.3")).expect("libcrypto");
    assert_eq!((libcrypto.mappings.len(), libcrypto.base.0), (5, 0x7fbe4a600000));
}

#[test]
fn maps_edge_cases() {
    let text = "\
00400000-00452000 r-xp 00000000 08:02 173521      /usr/bin/my prog
00651000-00652000 r--p 00051000 08:02 173521      /usr/bin/my prog
00652000-00655000 rw-p 00052000 08:02 173521      /usr/bin/my prog
7f0000000000-7f0000001000 r--p 00000000 08:02 999 /usr/lib/libx.so (deleted)
7f0000001000-7f0000002000 r-xp 00001000 08:02 999 /usr/lib/libx.so (deleted)
7f1000000000-7f1000001000 r--p 00000000 08:02 55 /usr/lib/liby.so
7f1000001000-7f1000002000 r-xp 00001000 08:02 55 /usr/lib/liby.so
7f2000000000-7f2000001000 r--p 00000000 08:02 55 /usr/lib/liby.so
7f2000001000-7f2000002000 r-xp 00001000 08:02 55 /usr/lib/liby.so
7f3000000000-7f3000010000 rw-p 00000000 00:00 0    [anon:scratch]
7f3000010000-7f3000020000 rw-s 00000000 00:01 1234 /memfd:jit (deleted)

";
    let maps = parse_maps(text).expect("parses");
    assert_eq!(maps.len(), 11);
    assert_eq!(maps[0].path.as_deref(), Some("/usr/bin/my prog"));
    assert!(maps[3].is_deleted() && !maps[0].is_deleted());
    let mods = modules(&maps);
    let paths: Vec<&str> = mods.iter().map(|m| m.path.as_str()).collect();
    // liby.so is mapped twice (dlmopen): two modules.
    assert_eq!(
        paths,
        [
            "/usr/bin/my prog",
            "/usr/lib/libx.so (deleted)",
            "/usr/lib/liby.so",
            "/usr/lib/liby.so",
            "/memfd:jit (deleted)"
        ]
    );
    // ET_EXEC: first PT_LOAD at 0x400000, mapped there: bias 0.
    let exec_seg = Segment {
        vaddr: ImageAddr(0x400000),
        memsz: 0x52000,
        file_offset: 0,
        filesz: 0x52000,
        readable: true,
        writable: false,
        executable: true,
    };
    assert_eq!(mods[0].bias(std::slice::from_ref(&exec_seg)), 0);
    // A first segment at an unaligned vaddr still maps at its page.
    let pie_seg = Segment { vaddr: ImageAddr(0x0), ..exec_seg.clone() };
    assert_eq!(mods[3].bias(std::slice::from_ref(&pie_seg)), 0x7f2000000000);
    // Without the offset-0 mapping, the mapping matching a segment's file page is used.
    let partial =
        ModuleLayout { path: "x".into(), mappings: vec![maps[6].clone()], base: maps[6].start };
    let text_seg = Segment { vaddr: ImageAddr(0x1000), file_offset: 0x1000, ..pie_seg };
    assert_eq!(partial.bias(&[exec_seg.clone(), text_seg]), 0x7f1000000000);

    for (bad, line_no) in [
        ("00400000 r-xp 00000000 08:02 1 /x\n", 1),
        ("00400000-00300000 r-xp 00000000 08:02 1 /x\n", 1),
        ("00400000-00500000 rwx 00000000 08:02 1 /x\n", 1),
        ("00400000-00500000 r-xp 00000000 08:02 1 /x\n00400000-00500000 r-xq 0 08:02 1\n", 2),
        ("00400000-00500000 r-xp zz 08:02 1 /x\n", 1),
        ("00400000-00500000 r-xp 00000000 0802 1 /x\n", 1),
        ("00400000-00500000 r-xp 00000000 08:02\n", 1),
        ("00400000-00500000 r-xp 00000000 08:02 -1 /x\n", 1),
    ] {
        let err = parse_maps(bad).expect_err(bad);
        assert_eq!(err.line_no, line_no, "{bad:?}: {err}");
        assert!(err.to_string().starts_with(&format!("maps line {line_no}: ")), "{err}");
    }
}

#[no_mangle]
pub extern "C" fn kerf_image_test_marker() -> u64 {
    std::hint::black_box(0x6b65_7266)
}

/// Bytes of this process's memory, through /proc/self/mem (no unsafe needed).
fn read_own_memory(addr: u64, len: usize) -> Vec<u8> {
    let mut f = std::fs::File::open("/proc/self/mem").expect("open /proc/self/mem");
    f.seek(SeekFrom::Start(addr)).expect("seek");
    let mut buf = vec![0; len];
    f.read_exact(&mut buf).unwrap_or_else(|e| panic!("read {len} bytes at {addr:#x}: {e}"));
    buf
}

#[test]
fn live_process_layout_matches_images() {
    let maps =
        parse_maps(&std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps"))
            .expect("parses");
    let mods = modules(&maps);

    // Our own executable: the marker function's address is its symbol plus the bias.
    let exe = std::fs::canonicalize(std::env::current_exe().expect("current_exe"))
        .expect("canonical exe path");
    let exe_mod = mods.iter().find(|m| Path::new(&m.path) == exe).expect("test executable in maps");
    let exe_data = read(&exe);
    let exe_image = load(&exe_mod.path, &exe_data);
    let marker = exe_image
        .symbols
        .iter()
        .find(|s| s.name == "kerf_image_test_marker")
        .expect("marker symbol in .symtab");
    let bias = exe_mod.bias(&exe_image.segments);
    assert_eq!(marker.addr.at_bias(bias).0, kerf_image_test_marker as *const () as usize as u64);

    // Every executable module: function bytes in memory equal the file's (text is not
    // relocated), which checks both the bias and code_at.
    let mut checked = 0;
    for m in mods.iter().filter(|m| m.executable()) {
        let data = if m.path == "[vdso]" {
            let len = (m.end().0 - m.base.0) as usize;
            read_own_memory(m.base.0, len)
        } else {
            read(&m.path)
        };
        let image = load(&m.path, &data);
        let bias = m.bias(&image.segments);
        if m.path == "[vdso]" {
            assert_eq!(bias, m.base.0);
            assert!(image.symbols.iter().any(|s| s.name == "__vdso_clock_gettime"));
        }
        let functions = image
            .symbols
            .iter()
            .filter(|s| s.kind == SymbolKind::Function && s.size >= 16)
            .filter(|s| image.code_at(s.addr).is_some());
        for s in functions.take(20) {
            let (start, bytes) = image.code_at(s.addr).expect("code");
            let at = (s.addr.0 - start.0) as usize;
            let live = read_own_memory(s.addr.at_bias(bias).0, 16);
            assert_eq!(&live[..], &bytes[at..at + 16], "{}: {} at bias {bias:#x}", m.path, s.name);
            checked += 1;
        }
    }
    assert!(checked >= 40, "checked only {checked} functions");
    assert!(mods.iter().any(|m| m.path.ends_with("/libc.so.6")), "libc is mapped");
}

#[test]
fn live_kallsyms_parses() {
    // Every line of the running kernel's symbol list must parse (addresses may read as 0
    // without root; that does not matter to the parser).
    let text = std::fs::read_to_string("/proc/kallsyms").expect("read /proc/kallsyms");
    let syms = parse_symbol_file(&text).unwrap_or_else(|e| panic!("{e}"));
    let expected = text
        .lines()
        .filter(|l| {
            matches!(
                l.split(' ').nth(1),
                Some("T" | "t" | "W" | "w" | "D" | "d" | "B" | "b" | "R" | "r" | "V" | "v")
            )
        })
        .count();
    assert_eq!(syms.len(), expected);
    assert!(syms.len() > 10_000, "{} kernel symbols", syms.len());
    assert!(syms.iter().any(|s| s.name == "_stext" && s.kind == SymbolKind::Function));
}
