//! Tests of separate debug files on bytes: the `.gnu_debuglink` CRC-32, libc's debug file from
//! Debian's `libc6-dbg` merged into libc (checked against binutils), build-id checks, and
//! lying or broken debug files (sizes past the image's sections, symbols outside it,
//! truncation and corruption), which must be refused or cut down, never trusted or panicked on.
//!
//! Needs `libc6-dbg` and binutils (scripts/deps.sh installs both): a missing one fails the test
//! with a message saying so.

mod common;
use common::Rng;

use kerf_analysis::image::{
    crc32, Binding, DebugFile, DebugFileError, Image, ImageError, SymbolKind,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const LD: &str = "/lib64/ld-linux-x86-64.so.2";
const LS: &str = "/usr/bin/ls";

fn read(path: impl AsRef<Path>) -> Vec<u8> {
    let path = path.as_ref();
    std::fs::read(path).unwrap_or_else(|e| panic!("this test needs {}: {e}", path.display()))
}

fn tool(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| {
        panic!("this test needs `{program}` (Debian package binutils) on PATH: {e}")
    });
    assert!(out.status.success(), "`{program} {}` failed", args.join(" "));
    String::from_utf8(out.stdout).expect("tool output is UTF-8")
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// libc's debug file from `libc6-dbg`, at its build-id path.
fn libc_debug_path() -> PathBuf {
    let data = read(LIBC);
    let image = Image::from_elf(LIBC, &data).unwrap();
    let id = hex(image.build_id.as_ref().expect("Debian's libc has a build-id"));
    let path = PathBuf::from(format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]));
    assert!(
        path.is_file(),
        "{} is missing: this test needs Debian's libc6-dbg matching the installed libc6",
        path.display()
    );
    path
}

/// The CRC bit by bit, straight from its definition, to check the table-driven one against.
fn crc32_bitwise(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for b in data {
        crc ^= u32::from(*b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { 0xedb8_8320 ^ (crc >> 1) } else { crc >> 1 };
        }
    }
    !crc
}

#[test]
fn crc32_matches_its_definition() {
    assert_eq!(crc32(b""), 0);
    assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
    // Every length around the 8-byte steps, and every alignment of the start.
    let bytes: Vec<u8> = (0u32..300).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    for start in 0..8 {
        for len in 0..bytes.len() - start {
            let s = &bytes[start..start + len];
            assert_eq!(crc32(s), crc32_bitwise(s), "start {start} len {len}");
        }
    }
}

#[test]
fn libc_debuglink_names_its_libc6_dbg_file_and_the_crc_matches() {
    let data = read(LIBC);
    let image = Image::from_elf(LIBC, &data).unwrap();
    let link = image.debuglink().unwrap().expect("Debian's libc has a .gnu_debuglink");
    let debug = libc_debug_path();
    // Debian names the link after the build-id path's file name.
    assert_eq!(Some(link.name.as_str()), debug.file_name().and_then(|n| n.to_str()));
    assert_eq!(crc32(&read(&debug)), link.crc, "CRC of {}", debug.display());
    // A stripped binary without the section has no link.
    let ls = read(LS);
    let has_link = tool("readelf", &["-SW", LS]).contains(".gnu_debuglink");
    assert_eq!(Image::from_elf(LS, &ls).unwrap().debuglink().unwrap().is_some(), has_link);
}

#[test]
fn broken_debuglink_sections_are_errors() {
    let original = read(LIBC);
    let image = Image::from_elf(LIBC, &original).unwrap();
    let s = image.sections.iter().find(|s| s.name == ".gnu_debuglink").unwrap().clone();
    let (at, len) = (s.file_offset as usize, s.size as usize);
    drop(image);
    type Patch = Box<dyn Fn(&mut [u8])>;
    let cases: Vec<(&str, Patch)> = vec![
        ("a path", Box::new(move |d: &mut [u8]| d[at..at + 3].copy_from_slice(b"../"))),
        ("no NUL", Box::new(move |d: &mut [u8]| d[at..at + len].fill(b'a'))),
        ("empty name", Box::new(move |d: &mut [u8]| d[at] = 0)),
    ];
    for (what, patch) in cases {
        let mut data = original.clone();
        patch(&mut data);
        let image = Image::from_elf(LIBC, &data).unwrap();
        let err = image.debuglink().unwrap_err();
        assert!(matches!(err, ImageError::Malformed { .. }), "{what}: {err:?}");
        assert!(err.to_string().contains(".gnu_debuglink"), "{what}: {err}");
    }
}

#[test]
fn libc6_dbg_symbols_merge_into_libc() {
    let data = read(LIBC);
    let mut image = Image::from_elf(LIBC, &data).unwrap();
    assert_eq!(image.symbols_named("_int_malloc").count(), 0, "libc itself names no locals");
    let debug_path = libc_debug_path();
    let debug = DebugFile::parse(&debug_path.display().to_string(), &read(&debug_path)).unwrap();
    assert_eq!(debug.build_id, image.build_id);
    let merge = image.add_debug_symbols(&debug).unwrap();

    // Every function nm lists in the debug file is now a symbol of libc, at its address.
    let have: BTreeSet<(u64, &str)> = image
        .symbols
        .iter()
        .filter(|s| s.kind == SymbolKind::Function)
        .map(|s| (s.addr.0, s.name.as_str()))
        .collect();
    let nm = tool("nm", &["--defined-only", &debug_path.display().to_string()]);
    let mut locals = 0;
    for line in nm.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let [addr, ty, name] = f[..] else { continue };
        if !matches!(ty, "t" | "T" | "i") {
            continue;
        }
        let addr = u64::from_str_radix(addr, 16).unwrap();
        assert!(have.contains(&(addr, name)), "{name} at {addr:#x} is missing after the merge");
        locals += usize::from(ty == "t");
    }
    assert!(locals > 1000, "only {locals} local functions in libc's debug file");
    assert!(merge.added >= locals, "{merge:?}");

    // A static function: local, a function, inside .text, sized as readelf says.
    let m: Vec<_> = image.symbols_named("_int_malloc").collect();
    assert_eq!(m.len(), 1);
    assert_eq!((m[0].kind, m[0].binding), (SymbolKind::Function, Binding::Local));
    assert_eq!(image.exec_section_containing(m[0].addr).map(|s| s.name.as_str()), Some(".text"));
    let readelf = tool("readelf", &["-sW", &debug_path.display().to_string()]);
    let size: u64 = readelf
        .lines()
        .find(|l| l.ends_with(" _int_malloc"))
        .and_then(|l| l.split_whitespace().nth(2))
        .and_then(|s| s.parse().ok())
        .expect("readelf lists _int_malloc");
    assert_eq!(m[0].size, size);
}

#[test]
fn a_debug_file_of_another_build_is_refused() {
    let ld = read(LD);
    let mut image = Image::from_elf(LD, &ld).unwrap();
    let before = image.symbols.clone();
    let debug_path = libc_debug_path();
    let debug = DebugFile::parse("libc.debug", &read(&debug_path)).unwrap();
    let err = image.add_debug_symbols(&debug).unwrap_err();
    assert!(matches!(err, DebugFileError::BuildIdMismatch { .. }), "{err:?}");
    assert!(err.to_string().starts_with("libc.debug: build-id "), "{err}");
    assert!(err.to_string().contains(&hex(image.build_id.as_ref().unwrap())), "{err}");
    assert_eq!(image.symbols, before, "a refused debug file changed the image");
}

#[test]
fn a_file_without_symtab_is_no_debug_file() {
    let ls = read(LS);
    assert!(!tool("readelf", &["-SW", LS]).contains(".symtab"), "{LS} is expected stripped");
    let err = DebugFile::parse(LS, &ls).unwrap_err();
    assert_eq!(err, DebugFileError::NoSymtab { name: LS.into() });
    let err = DebugFile::parse("x", b"#!/bin/sh\n").unwrap_err();
    assert!(matches!(err, DebugFileError::Image(ImageError::NotElf { .. })), "{err:?}");
}

/// The file offset of `.symtab` and the index of `name` in it, from readelf.
fn symtab_entry(path: &Path, name: &str) -> usize {
    let p = path.display().to_string();
    let sections = tool("readelf", &["-SW", &p]);
    let line = sections.lines().find(|l| l.contains(" .symtab ")).expect(".symtab");
    let rest = &line[line.find(']').unwrap() + 1..];
    let off = usize::from_str_radix(rest.split_whitespace().nth(3).unwrap(), 16).unwrap();
    let syms = tool("readelf", &["-sW", &p]);
    let index: usize = syms
        .lines()
        .find(|l| l.ends_with(&format!(" {name}")))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|n| n.trim_end_matches(':').parse().ok())
        .unwrap_or_else(|| panic!("{name} in {p}"));
    off + 24 * index
}

#[test]
fn lying_sizes_are_cut_and_symbols_outside_the_image_dropped() {
    let data = read(LIBC);
    let debug_path = libc_debug_path();
    let mut bytes = read(&debug_path);
    let big = symtab_entry(&debug_path, "_int_malloc");
    bytes[big + 16..big + 24].copy_from_slice(&(1u64 << 40).to_le_bytes());
    let far = symtab_entry(&debug_path, "_int_free");
    bytes[far + 8..far + 16].copy_from_slice(&0xdead_0000_0000u64.to_le_bytes());
    let debug = DebugFile::parse("lying.debug", &bytes).unwrap();

    let mut image = Image::from_elf(LIBC, &data).unwrap();
    let merge = image.add_debug_symbols(&debug).unwrap();
    assert!(merge.clamped >= 1 && merge.outside >= 1, "{merge:?}");
    assert_eq!(image.symbols_named("_int_free").count(), 0, "a symbol outside libc was taken");
    let m = image.symbols_named("_int_malloc").next().expect("_int_malloc kept");
    let text = image.exec_section_containing(m.addr).expect("in .text").clone();
    assert_eq!(m.addr.0 + m.size, text.addr.0 + text.size, "size not cut at the section end");
    check_inside(&image);
}

/// Every function symbol of `image` lies inside an executable section and ends in it.
fn check_inside(image: &Image) {
    for s in image.symbols.iter().filter(|s| s.kind == SymbolKind::Function) {
        let sec = image
            .exec_section_containing(s.addr)
            .unwrap_or_else(|| panic!("{} at {} is in no executable section", s.name, s.addr));
        assert!(s.size <= sec.size - (s.addr.0 - sec.addr.0), "{} runs past {}", s.name, sec.name);
    }
}

#[test]
fn truncated_and_corrupted_debug_files_never_panic_nor_escape_the_image() {
    let data = read(LIBC);
    let clean = Image::from_elf(LIBC, &data).unwrap();
    check_inside(&clean);
    let debug_path = libc_debug_path();
    let original = read(&debug_path);
    let try_one = |bytes: &[u8]| -> bool {
        match DebugFile::parse("d", bytes) {
            Ok(debug) => {
                let mut image = Image::from_elf(LIBC, &data).unwrap();
                if image.add_debug_symbols(&debug).is_ok() {
                    check_inside(&image);
                }
                true
            }
            Err(DebugFileError::Image(_) | DebugFileError::NoSymtab { .. }) => false,
            Err(e) => panic!("unexpected {e:?}"),
        }
    };
    // Truncated anywhere: the section headers sit at the end, so every cut loses them.
    for len in (0..original.len()).step_by(original.len() / 97).chain([original.len() - 1]) {
        assert!(!try_one(&original[..len]), "a file cut at {len} parsed");
    }

    // Corrupted in the bytes the parser reads: the headers, the note, .symtab and .strtab.
    let shoff = u64::from_le_bytes(original[0x28..0x30].try_into().unwrap()) as usize;
    let symtab = symtab_entry(&debug_path, "_int_malloc");
    let regions =
        [(0, 64), (0x370, 0x394), (shoff, original.len()), (symtab - 4096, symtab + 4096)];
    let mut rng = Rng(0x6b65_7266_6462_6766);
    let mut parsed = 0;
    for round in 0..600 {
        let mut bytes = original.clone();
        for _ in 0..1 + rng.below(6) {
            let (lo, hi) = regions[round % regions.len()];
            let at = lo + rng.below(hi - lo);
            match rng.below(3) {
                0 => bytes[at] ^= 1 << rng.below(8),
                1 => bytes[at] = rng.next() as u8,
                _ => {
                    let v = [u64::MAX, 1 << 63, 0, 0xffff_ffff, rng.next()][rng.below(5)];
                    let end = (at + 8).min(bytes.len());
                    bytes[at..end].copy_from_slice(&v.to_le_bytes()[..end - at]);
                }
            }
        }
        parsed += usize::from(try_one(&bytes));
    }
    assert!(parsed > 50 && parsed < 600, "{parsed} of 600 corrupted copies parsed");
}
