//! Unwind entries kerf must not take for function starts (DESIGN.md §5): signal trampolines
//! (entries whose CIE has the `S` augmentation, such as glibc's `__restore_rt`) and entries
//! that start inside an instruction of the code around them. Ground truth comes from binutils,
//! not from kerf: readelf's dump of `.eh_frame` and objdump's instruction boundaries. Checked
//! on libc's bytes and on `tests/fixtures/unwind_overlap.c`, built here.
//!
//! Needs readelf, objdump (binutils), gcc and libc6; a missing one fails the test with the
//! package to install.

mod common;

use kerf_analysis::cfg::{Cfg, NoSpliceWhy};
use kerf_analysis::image::Image;
use kerf_analysis::{analyze, Quiet};
use kerf_arch::ImageAddr;
use std::collections::HashSet;
use std::process::Command;

const LIBC: &str = "/lib/x86_64-linux-gnu/libc.so.6";

/// One FDE as readelf shows it: `[start, end)` and whether its CIE's augmentation has `S`.
struct Fde {
    start: u64,
    end: u64,
    signal: bool,
}

fn tool(name: &str, args: &[&str], path: &str) -> String {
    let out = Command::new(name)
        .args(args)
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("{name}: {e} (install the Debian package binutils)"));
    // readelf exits 1 on a file without DWARF debug sections even though it dumped
    // `.eh_frame`; the callers check that the output holds what they need.
    assert!(out.status.success() || name == "readelf", "{name} failed on {path}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every FDE of `path`, from `readelf --debug-dump=frames`.
fn fdes(path: &str) -> Vec<Fde> {
    let text = tool("readelf", &["--debug-dump=frames"], path);
    // "00000088 0000000000000014 00000000 CIE" then "  Augmentation:  \"zRS\""
    let mut signal_cies = HashSet::new();
    let mut cie: Option<u64> = None;
    let mut out = Vec::new();
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() == 4 && cols[3] == "CIE" {
            cie = u64::from_str_radix(cols[0], 16).ok();
        } else if let Some(aug) = line.trim().strip_prefix("Augmentation:") {
            if aug.contains('S') {
                signal_cies.extend(cie);
            }
        } else if cols.len() >= 6 && cols[3] == "FDE" {
            // "... FDE cie=00000088 pc=000000000000116f..0000000000001179"
            let c = cols[4].strip_prefix("cie=").and_then(|c| u64::from_str_radix(c, 16).ok());
            let (s, e) = cols[5].strip_prefix("pc=").and_then(|r| r.split_once("..")).unwrap();
            out.push(Fde {
                start: u64::from_str_radix(s, 16).unwrap(),
                end: u64::from_str_radix(e, 16).unwrap(),
                signal: c.is_some_and(|c| signal_cies.contains(&c)),
            });
        }
    }
    assert!(!out.is_empty(), "readelf found no FDE in {path}");
    out
}

/// Addresses where objdump's linear decode starts an instruction.
fn objdump_boundaries(path: &str) -> HashSet<u64> {
    let text = tool("objdump", &["-d", "--no-show-raw-insn"], path);
    text.lines()
        .filter_map(|l| l.trim_start().split_once(":\t"))
        .filter_map(|(a, _)| u64::from_str_radix(a, 16).ok())
        .collect()
}

/// What must hold of kerf's CFG of `path`: no function starts and no block lies in a signal
/// trampoline's FDE, no function starts at an FDE start that is no instruction boundary of
/// the code around it, and both kinds (only they) are listed as code no splice may touch.
/// Returns how many entries of each kind were checked.
fn check(path: &str, cfg: &Cfg) -> (usize, usize) {
    let fdes = fdes(path);
    let bounds = objdump_boundaries(path);
    let entries: HashSet<u64> = cfg.functions.iter().map(|f| f.entry.0).collect();
    let mut bad = Vec::new();
    let (mut signal, mut inside) = (0, 0);
    for fde in &fdes {
        if fde.signal {
            signal += 1;
            for f in &cfg.functions {
                if (fde.start..fde.end).contains(&f.entry.0) {
                    bad.push(format!("function {} in trampoline {:#x}", f.name, fde.start));
                }
            }
            for b in cfg.blocks.iter() {
                if b.start.0 < fde.end && fde.start < b.end().0 {
                    bad.push(format!("block {:#x} in trampoline {:#x}", b.start.0, fde.start));
                }
            }
        }
        if !bounds.contains(&fde.start) {
            inside += 1;
            if entries.contains(&fde.start) {
                bad.push(format!("function at {:#x}, inside an instruction", fde.start));
            }
        }
        // Either kind is listed whole as code no splice may touch, with its reason.
        let want = if fde.signal {
            Some(NoSpliceWhy::SignalTrampoline)
        } else if !bounds.contains(&fde.start) {
            let insn = bounds.iter().filter(|b| **b < fde.start).max().copied().unwrap_or(0);
            Some(NoSpliceWhy::UnwindInsideInstruction { insn: ImageAddr(insn) })
        } else {
            None
        };
        let listed = cfg
            .no_splice
            .iter()
            .find(|n| n.start.0 == fde.start && n.end() == fde.end)
            .map(|n| n.why);
        if listed != want {
            bad.push(format!(
                "FDE {:#x}..{:#x}: no-splice {listed:?}, want {want:?}",
                fde.start, fde.end
            ));
        }
    }
    assert!(bad.is_empty(), "{path}:\n{}", bad.join("\n"));
    (signal, inside)
}

#[test]
fn libc_signal_trampoline_is_no_function() {
    let data = std::fs::read(LIBC).unwrap_or_else(|e| panic!("{LIBC}: {e} (Debian package libc6)"));
    let image = Image::from_elf(LIBC, &data).unwrap();
    let a = analyze(&image, &Quiet);
    let (signal, inside) = check(LIBC, &a.cfg);
    // glibc has one: __restore_rt, whose entry starts a byte early.
    assert!(signal >= 1 && inside >= 1, "libc: {signal} trampolines, {inside} entries inside");
}

#[test]
fn hand_written_entries_inside_a_nop_are_no_functions() {
    let bin = common::build_fixture("unwind_overlap", &["-O2", "-s"], "unwind_entries");
    let path = bin.to_str().unwrap();
    let data = std::fs::read(&bin).unwrap();
    let image = Image::from_elf(path, &data).unwrap();
    let a = analyze(&image, &Quiet);
    let (signal, inside) = check(path, &a.cfg);
    assert_eq!((signal, inside), (1, 2), "the fixture's two entries");
    // Every other entry is a real function and stays one (main, _start, the stripped
    // binary's static functions).
    let bounds = objdump_boundaries(path);
    let entries: HashSet<u64> = a.cfg.functions.iter().map(|f| f.entry.0).collect();
    for fde in fdes(path).iter().filter(|f| bounds.contains(&f.start)) {
        assert!(entries.contains(&fde.start), "{path}: no function at FDE {:#x}", fde.start);
    }
}

/// `Image::frame_rule` (how a stack walk finds a frame's caller) at every row of libc's
/// `.eh_frame` gives what binutils' interpretation of the same rows says: the CFA from `rsp`
/// or `rbp` plus an offset, the return address's and the saved `rbp`'s places, and no rule
/// where the CFA is an expression or another register.
#[test]
fn frame_rules_match_readelfs_rows_in_libc() {
    use kerf_analysis::image::{FrameBase, FrameRule, SavedRbp};
    let data = std::fs::read(LIBC).unwrap_or_else(|e| panic!("{LIBC}: {e} (Debian package libc6)"));
    let image = Image::from_elf(LIBC, &data).unwrap();
    let text = tool("readelf", &["--debug-dump=frames-interp"], LIBC);
    // "   LOC           CFA      rbx   rbp   ra" then rows "0000000000027282 rsp+16   u  c-16  c-8".
    let mut columns: Vec<String> = Vec::new();
    let (mut checked, mut plain, mut bad) = (0, 0, Vec::new());
    // (A CIE's rows are its initial rules, at no address.)
    let mut in_cie = false;
    let offset = |s: &str| s.strip_prefix("c").and_then(|n| n.parse::<i64>().ok());
    for line in text.lines() {
        let cols: Vec<&str> = line.split_whitespace().collect();
        if cols.len() >= 4 && (cols[3] == "CIE" || cols[3] == "FDE") {
            in_cie = cols[3] == "CIE";
        }
        if in_cie {
            continue;
        }
        if cols.first() == Some(&"LOC") {
            columns = cols.iter().map(|c| c.to_string()).collect();
            continue;
        }
        let Some(loc) =
            cols.first().filter(|c| c.len() == 16).and_then(|c| u64::from_str_radix(c, 16).ok())
        else {
            continue;
        };
        if columns.len() != cols.len() {
            continue;
        }
        let col = |name: &str| columns.iter().position(|c| c == name).map(|k| cols[k]);
        let cfa = cols[1];
        let base = if let Some(n) = cfa.strip_prefix("rsp+") {
            Some((FrameBase::Rsp, n.parse::<i64>().unwrap()))
        } else {
            cfa.strip_prefix("rbp+").map(|n| (FrameBase::Rbp, n.parse::<i64>().unwrap()))
        };
        let want = base.and_then(|(base, offset_)| {
            let ra_at = offset(col("ra")?)?;
            let rbp = match col("rbp") {
                None | Some("u") => SavedRbp::Same,
                Some(v) => offset(v).map_or(SavedRbp::Lost, SavedRbp::At),
            };
            Some(FrameRule { base, offset: offset_, ra_at, rbp })
        });
        let got = image.frame_rule(ImageAddr(loc));
        plain += usize::from(want.is_some());
        checked += 1;
        if got != want {
            bad.push(format!("{loc:#x}: {got:?}, readelf {want:?} ({line})"));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {checked} rows differ:\n{}",
        bad.len(),
        bad[..bad.len().min(20)].join("\n")
    );
    // (libc 2.36: about 23,750 rows, all but a handful from rsp or rbp.)
    assert!(checked > 5000 && plain > checked * 9 / 10, "{plain} of {checked}");
}
