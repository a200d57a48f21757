//! Data-driven tests of per-instruction facts: each line of data/facts.txt is one
//! instruction's bytes and what it must be found to do.

use kerf_arch::x86_64::{decode_one, FlagSet, RegSet};
use kerf_arch::ImageAddr;

fn regs(s: &str) -> RegSet {
    let s = s.trim();
    if s == "-" {
        return RegSet::EMPTY;
    }
    let mut r = RegSet::EMPTY;
    for n in s.split(',') {
        r.insert(
            kerf_arch::x86_64::Gpr::from_name(n.trim())
                .unwrap_or_else(|| panic!("bad register {n}")),
        );
    }
    r
}

fn flags(s: &str) -> FlagSet {
    let s = s.trim();
    if s == "-" {
        return FlagSet::EMPTY;
    }
    let mut out = FlagSet::EMPTY;
    for n in s.split(',') {
        let f = kerf_arch::x86_64::Flag::ALL
            .iter()
            .find(|f| f.name() == n.trim())
            .unwrap_or_else(|| panic!("bad flag {n}"));
        out = out.union(FlagSet(1 << *f as u8));
    }
    out
}

#[test]
fn facts_fixture() {
    let text = include_str!("data/facts.txt");
    let mut failures = Vec::new();
    let mut cases = 0;
    for (no, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        cases += 1;
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        assert!(cols.len() >= 7, "line {}: want 7 or 8 columns", no + 1);
        let bytes: Vec<u8> = cols[0]
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).expect("hex byte"))
            .collect();
        let Some(d) = decode_one(&bytes, ImageAddr(0x1000)) else {
            failures.push(format!("line {}: {} does not decode", no + 1, cols[1]));
            continue;
        };
        let f = d.facts;
        let got = (f.len as usize, f.flow.name(), f.reads, f.kills, f.flags_read, f.flags_killed);
        let want =
            (bytes.len(), cols[2], regs(cols[3]), regs(cols[4]), flags(cols[5]), flags(cols[6]));
        if got != want {
            failures.push(format!("line {} ({}): got {:?}, want {:?}", no + 1, cols[1], got, want));
        }
        let want_rip = cols.get(7).and_then(|c| c.strip_prefix("rip=")).map(|h| {
            ImageAddr(u64::from_str_radix(h.trim_start_matches("0x"), 16).expect("rip hex"))
        });
        if f.rip_relative != want_rip {
            failures.push(format!(
                "line {} ({}): rip {:?}, want {:?}",
                no + 1,
                cols[1],
                f.rip_relative,
                want_rip
            ));
        }
    }
    assert!(cases > 30, "fixture has only {cases} cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
