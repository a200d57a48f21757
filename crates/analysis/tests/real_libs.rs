//! Checks kerf's CFG of real libraries of this machine against linear decoding and against
//! `objdump -d`: every block starts on an instruction boundary of its function, and every
//! direct branch target objdump shows inside a function is a block start.
//!
//! Needs objdump (binutils) and the libraries (libc6, libstdc++6, libllvm14); a missing one
//! fails the test with the package to install, it never passes silently.

use kerf_analysis::cfg::{Cfg, FuncId};
use kerf_analysis::image::Image;
use kerf_analysis::{analyze, Quiet};
use kerf_arch::x86_64::Scanner;
use kerf_arch::ImageAddr;
use std::collections::HashSet;
use std::process::Command;

const LIBDIR: &str = "/usr/lib/x86_64-linux-gnu";

fn load(path: &str, package: &str) -> Vec<u8> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{path}: {e} (install the Debian package {package})"))
}

/// Block starts that are not instruction boundaries of a linear decode of their function's
/// symbol range.
fn misaligned_blocks(image: &Image<'_>, cfg: &Cfg) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, f) in cfg.functions.iter().enumerate() {
        let fid = FuncId(i as u32);
        if f.symbol_size == 0 {
            continue;
        }
        let Some((base, bytes)) = image.code_at(f.entry) else {
            continue;
        };
        let end = f.entry.0 + f.symbol_size;
        let mut sc = Scanner::new(bytes, base);
        let mut bounds = HashSet::new();
        let mut a = f.entry.0;
        while a < end {
            bounds.insert(a);
            a = match sc.decode(ImageAddr(a)) {
                Some(i) => i.next_ip(),
                None => a + 1,
            };
        }
        for b in cfg.blocks_of(fid) {
            if b.start.0 >= end || bounds.contains(&b.start.0) {
                continue;
            }
            // glibc's lock macros branch over the `lock` prefix of `lock cmpxchg` when the
            // process is single-threaded: a real target one byte into a linear-decode
            // instruction, and the only overlap accepted here.
            let prefix = (b.start.0 - base.0 - 1) as usize;
            if bounds.contains(&(b.start.0 - 1)) && bytes.get(prefix) == Some(&0xf0) {
                continue;
            }
            bad.push(format!("{} block {:#x}", f.name, b.start.0));
        }
    }
    bad
}

/// (branch address, target) of every direct jump objdump shows whose target lies in the same
/// function as the branch, by objdump's own `<function>` headers.
fn objdump_branches(path: &str) -> Vec<(u64, u64, String)> {
    let out = Command::new("objdump")
        .args(["-d", "--no-show-raw-insn", path])
        .output()
        .expect("objdump not found: install the Debian package binutils");
    assert!(out.status.success(), "objdump failed on {path}");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut v = Vec::new();
    let mut func = String::new();
    for line in text.lines() {
        // "0000000000012340 <name>:" starts a function.
        if let Some(rest) = line.strip_suffix(">:") {
            if let Some((_, name)) = rest.split_once(" <") {
                func = name.to_string();
            }
            continue;
        }
        // "   12345:\tjne    12360 <name+0x20>"
        let Some((addr, insn)) = line.trim_start().split_once(":\t") else {
            continue;
        };
        let Ok(addr) = u64::from_str_radix(addr, 16) else {
            continue;
        };
        let mut parts = insn.split_whitespace();
        let mut mnem = parts.next().unwrap_or("");
        if matches!(mnem, "bnd" | "notrack" | "rex" | "ds" | "cs") {
            mnem = parts.next().unwrap_or("");
        }
        let is_branch = mnem.starts_with('j') || mnem.starts_with("loop");
        if !is_branch {
            continue;
        }
        let Some(target) = parts.next() else { continue };
        let Ok(t) = u64::from_str_radix(target, 16) else {
            continue;
        };
        // Only targets objdump labels as inside the same function ("<func+0x..>" or "<func>").
        let label = insn.split_once('<').map(|(_, l)| l.trim_end_matches('>')).unwrap_or("");
        let lname = label.split('+').next().unwrap_or("");
        if lname == func && !func.is_empty() && !func.ends_with("@plt") {
            v.push((addr, t, func.clone()));
        }
    }
    v
}

fn check(path: &str, package: &str) {
    let data = load(path, package);
    let image = Image::from_elf(path, &data).expect("parse");
    let a = analyze(&image, &Quiet);
    let cfg = &a.cfg;
    let bad = misaligned_blocks(&image, cfg);
    assert!(
        bad.is_empty(),
        "{path}: {} block starts are not instruction boundaries, e.g. {:?}",
        bad.len(),
        &bad[..bad.len().min(10)]
    );
    let starts: HashSet<u64> = cfg.blocks.iter().map(|b| b.start.0).collect();
    let all = objdump_branches(path);
    assert!(all.len() > 1000, "{path}: objdump showed only {} branches", all.len());
    // objdump decodes linearly from each symbol, so after data or padding it can run through
    // the start of an unnamed function out of step and show "branches" that are not
    // instructions. Those lie inside a function known from unwind info or symbols without
    // being an instruction boundary of that function's own linear decode; they are counted
    // and left out. Every other branch is checked.
    let desync = |addr: u64| -> bool {
        let i = cfg.functions.partition_point(|f| f.entry.0 <= addr);
        let Some(f) = i.checked_sub(1).map(|i| &cfg.functions[i]) else { return false };
        if f.symbol_size == 0 || addr >= f.entry.0 + f.symbol_size {
            return false;
        }
        let Some((base, bytes)) = image.code_at(f.entry) else { return false };
        let mut sc = Scanner::new(bytes, base);
        let mut a = f.entry.0;
        while a < addr {
            a = sc.decode(ImageAddr(a)).map_or(a + 1, |i| i.next_ip());
        }
        a != addr
    };
    let branches: Vec<&(u64, u64, String)> = all.iter().filter(|(a, _, _)| !desync(*a)).collect();
    let missing: Vec<String> = branches
        .iter()
        .filter(|(_, t, _)| !starts.contains(t))
        .map(|(a, t, f)| format!("{f}: {a:#x} -> {t:#x}"))
        .collect();
    eprintln!(
        "{path}: {} functions, {} blocks, {} objdump branch targets checked ({} where objdump \
         was out of step skipped), {} missing",
        cfg.functions.len(),
        cfg.blocks.len(),
        branches.len(),
        all.len() - branches.len(),
        missing.len()
    );
    assert!(
        (all.len() - branches.len()) * 1000 < all.len(),
        "{path}: too many objdump branches out of step with kerf's decode"
    );
    assert!(
        missing.is_empty(),
        "{path}: {} of {} objdump branch targets are not block starts, e.g.\n{}",
        missing.len(),
        branches.len(),
        missing[..missing.len().min(20)].join("\n")
    );
}

#[test]
fn libc_matches_objdump() {
    check(&format!("{LIBDIR}/libc.so.6"), "libc6");
}

#[test]
fn libstdcxx_matches_objdump() {
    check(&format!("{LIBDIR}/libstdc++.so.6"), "libstdc++6");
}

#[test]
fn libllvm14_matches_objdump() {
    check(&format!("{LIBDIR}/libLLVM-14.so.1"), "libllvm14");
}
