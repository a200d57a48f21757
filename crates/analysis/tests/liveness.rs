//! Data-driven liveness tests: each line of data/liveness.txt is a tiny program, the
//! functions in it, and the registers and flags that must be live at the first one's entry.

use kerf_analysis::image::Image;
use kerf_analysis::{analyze, Quiet};
use kerf_arch::x86_64::{Flag, FlagSet, Gpr, RegSet};
use kerf_arch::ImageAddr;

const BASE: u64 = 0x1000;

fn regs(s: &str) -> RegSet {
    let mut r = RegSet::EMPTY;
    for n in s.split(',').map(str::trim).filter(|n| *n != "-") {
        r.insert(Gpr::from_name(n).unwrap_or_else(|| panic!("bad register {n}")));
    }
    r
}

fn flags(s: &str) -> FlagSet {
    let mut out = FlagSet::EMPTY;
    for n in s.split(',').map(str::trim).filter(|n| *n != "-") {
        let f = Flag::ALL.iter().find(|f| f.name() == n).unwrap_or_else(|| panic!("bad flag {n}"));
        out = out.union(FlagSet(1 << *f as u8));
    }
    out
}

#[test]
fn liveness_fixture() {
    let mut failures = Vec::new();
    let mut cases = 0;
    for (no, line) in include_str!("data/liveness.txt").lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        cases += 1;
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cols.len(), 4, "line {}: want 4 columns", no + 1);
        let bytes: Vec<u8> =
            cols[0].split_whitespace().map(|b| u8::from_str_radix(b, 16).expect("hex")).collect();
        let mut symfile = String::new();
        let mut first = None;
        for f in cols[1].split(',') {
            let (name, off) = f.trim().split_once('@').expect("name@offset");
            let off: u64 = off.parse().expect("offset");
            symfile.push_str(&format!("{:016x} T {name}\n", BASE + off));
            first.get_or_insert(name.to_string());
        }
        let mut image = Image::raw("case", &bytes, ImageAddr(BASE));
        image.add_symbol_file(&symfile).expect("symbols");
        let a = analyze(&image, &Quiet);
        let name = first.expect("a function");
        let f = a.cfg.functions_named(&name).next().expect("function analysed");
        let fun = a.cfg.function(f);
        let got = (fun.live_in, fun.flags_live_in);
        let want = (regs(cols[2]), flags(cols[3]));
        if got != want {
            failures.push(format!("line {}: {}: got {} | {}, want {} | {}", no + 1, cols[0], got.0, got.1, want.0, want.1));
        }
    }
    assert!(cases >= 15, "only {cases} cases");
    assert!(failures.is_empty(), "{} of {cases} failed:\n{}", failures.len(), failures.join("\n"));
}
