//! Helpers shared by the analysis tests: building a C fixture of `tests/fixtures/`, analysing
//! hand-assembled bytes, and a deterministic PRNG for the tests that damage images on purpose.

#![allow(dead_code)] // each test binary uses its own subset

use std::path::{Path, PathBuf};
use std::process::Command;

/// Build `tests/fixtures/NAME.c` with gcc and `flags` into the calling test's own directory
/// `dir` under the test temporary directory (tests run in parallel; each writes its own file).
pub fn build_fixture(name: &str, flags: &[&str], dir: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(dir);
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/{name}.c"));
    let out = dir.join(name);
    let st = Command::new("gcc")
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc is needed (Debian package gcc)");
    assert!(st.success(), "gcc failed on {name}.c");
    out
}

/// A small deterministic PRNG (xorshift64*), so failures reproduce.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// `code` analysed as a raw image at `base` with one function `run` of `len` bytes at its
/// start, then checked whole (`validate`): the hand-assembled dispatch and switch cases.
pub fn analysed_run(code: &[u8], base: u64, len: u64) -> kerf_analysis::Analysis {
    use kerf_analysis::image::Image;
    let mut image = Image::raw("run", code, kerf_arch::ImageAddr(base));
    let symbol = format!("{base:016x} {len:016x} T run\n");
    assert_eq!(image.add_symbol_file(&symbol), Ok(1));
    let mut a = kerf_analysis::analyze(&image, &kerf_analysis::Quiet);
    kerf_analysis::validate::validate(&mut a, &image).expect("the analysis checks out");
    a
}
