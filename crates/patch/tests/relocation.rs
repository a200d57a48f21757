//! Data-driven tests of splice planning and code patch layout on bytes: each line of
//! data/relocation.txt is code at a point, a splice kind, and the code patch (or the refusal)
//! that must come out.

use iced_x86::{Decoder, DecoderOptions, Formatter, IntelFormatter};
use kerf_patch::build_patch;

mod common;
use common::PATCH;

fn disasm(bytes: &[u8], ip: u64) -> String {
    let mut d = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
    let mut f = IntelFormatter::new();
    let mut out = Vec::new();
    while d.can_decode() {
        let mut s = String::new();
        f.format(&d.decode(), &mut s);
        out.push(s);
    }
    out.join("; ")
}

/// What a case produces: the patch's code, or `refused VARIANT`.
fn outcome(code: &[u8], kind: &str) -> String {
    let planned = common::plan(code, kind);
    match planned {
        Ok(d) => match build_patch(PATCH, &[], &d) {
            Ok(bytes) => disasm(&bytes, PATCH),
            Err(e) => format!("encode error {e}"),
        },
        Err(r) => {
            let dbg = format!("{r:?}");
            let variant = dbg.split([' ', '{', '(']).next().unwrap_or("").to_string();
            format!("refused {variant}")
        }
    }
}

#[test]
fn relocation_fixture() {
    let mut failures = Vec::new();
    let mut cases = 0;
    for (no, line) in include_str!("data/relocation.txt").lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        cases += 1;
        let cols: Vec<&str> = line.split('|').map(str::trim).collect();
        assert_eq!(cols.len(), 4, "line {}: want 4 columns", no + 1);
        let code: Vec<u8> = cols[0]
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).expect("hex byte"))
            .collect();
        let got = outcome(&code, cols[2]);
        if got != cols[3] {
            failures.push(format!(
                "line {} ({}, {}):\n   got  {got}\n   want {}",
                no + 1,
                cols[1],
                cols[2],
                cols[3]
            ));
        }
    }
    assert!(cases >= 20, "fixture has only {cases} cases");
    assert!(
        failures.is_empty(),
        "{} of {cases} cases failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
