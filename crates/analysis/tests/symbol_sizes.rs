//! Symbol sizes are untrusted input: a `.dynsym` entry whose `st_size` runs far past its
//! function (to the end of the text, or 2^64 - 1) must not make that function swallow the code
//! after it. Checked on `tests/fixtures/switch.c` (built here with `-rdynamic -s`, so its
//! functions are named by `.dynsym` alone, as in Debian's redis) with the sizes of its
//! functions overwritten in a copy: the analysis must decode no more bytes than the text holds
//! and give every function the same blocks as the analysis of the untouched file. Needs gcc.

mod common;

use kerf_analysis::image::Image;
use kerf_analysis::{analyze, Analysis, Quiet};

const FUNCTIONS: [&str; 7] = [
    "dense_switch",
    "holes_switch",
    "char_switch",
    "large_switch",
    "sparse_switch",
    "loop_switch",
    "main",
];

fn u16_at(b: &[u8], o: usize) -> usize {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap()) as usize
}
fn u32_at(b: &[u8], o: usize) -> usize {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap()) as usize
}
fn u64_at(b: &[u8], o: usize) -> usize {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap()) as usize
}

/// Overwrite `st_size` of the `.dynsym` entries named in `sizes` in an ELF64 file's bytes.
/// Returns how many entries were changed.
fn set_dynsym_sizes(b: &mut [u8], sizes: &[(&str, u64)]) -> usize {
    let (shoff, shentsize, shnum) = (u64_at(b, 0x28), u16_at(b, 0x3a), u16_at(b, 0x3c));
    let section = |i: usize| shoff + i * shentsize;
    let mut changed = 0;
    for i in 0..shnum {
        let sh = section(i);
        const SHT_DYNSYM: usize = 11;
        if u32_at(b, sh + 4) != SHT_DYNSYM {
            continue;
        }
        let (off, size, link) = (u64_at(b, sh + 0x18), u64_at(b, sh + 0x20), u32_at(b, sh + 0x28));
        let strtab = u64_at(b, section(link) + 0x18);
        for e in (off..off + size).step_by(24) {
            let name_at = strtab + u32_at(b, e);
            let len = b[name_at..].iter().position(|c| *c == 0).unwrap();
            let name = std::str::from_utf8(&b[name_at..name_at + len]).unwrap().to_string();
            if let Some((_, s)) = sizes.iter().find(|(n, _)| *n == name) {
                b[e + 16..e + 24].copy_from_slice(&s.to_le_bytes());
                changed += 1;
            }
        }
    }
    changed
}

/// Per function: name, entry, extent, and each block's start, length and terminator.
fn shape(a: &Analysis) -> Vec<String> {
    let cfg = &a.cfg;
    (0..cfg.functions.len())
        .map(|i| {
            let f = &cfg.functions[i];
            let blocks: Vec<String> = cfg
                .blocks_of(kerf_analysis::cfg::FuncId(i as u32))
                .iter()
                .map(|b| format!("{}+{}:{}", b.start, b.len, b.term.name()))
                .collect();
            format!(
                "{} {} {:#x}..{:#x} {}",
                f.name,
                f.entry,
                f.extent.start,
                f.extent.end,
                blocks.join(" ")
            )
        })
        .collect()
}

#[test]
fn huge_symbol_sizes_are_clamped() {
    let bin = common::build_fixture("switch", &["-O2", "-rdynamic", "-s"], "symbol_sizes");
    let data = std::fs::read(&bin).unwrap();
    let path = bin.to_str().unwrap();
    let plain = analyze(&Image::from_elf(path, &data).unwrap(), &Quiet);

    let mut sizes: Vec<(&str, u64)> = FUNCTIONS.iter().map(|n| (*n, 0x7fff_ffff)).collect();
    sizes[0].1 = u64::MAX;
    sizes[1].1 = 1 << 40;
    let mut bytes = data.clone();
    assert_eq!(set_dynsym_sizes(&mut bytes, &sizes), FUNCTIONS.len(), "every function patched");
    let image = Image::from_elf(path, &bytes).unwrap();
    let huge = analyze(&image, &Quiet);

    let s = &huge.summary;
    assert!(
        s.instruction_bytes <= s.text_bytes,
        "{} instruction bytes decoded from {} bytes of text",
        s.instruction_bytes,
        s.text_bytes
    );
    assert_eq!(s.instruction_bytes, plain.summary.instruction_bytes);
    assert_eq!(shape(&huge), shape(&plain), "the CFG changed with the sizes");
    // The sizes kept are those of the code: at most up to the next function's entry.
    let entries: Vec<u64> = huge.cfg.functions.iter().map(|f| f.entry.0).collect();
    for (i, f) in huge.cfg.functions.iter().enumerate() {
        let next = entries.get(i + 1).copied().unwrap_or(u64::MAX);
        assert!(f.entry.0 + f.symbol_size <= next, "{}: size {:#x}", f.name, f.symbol_size);
    }
}
