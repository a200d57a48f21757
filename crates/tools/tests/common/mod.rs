//! Helpers of the tools' tests: fixture programs compiled here and analysed offline.

#![allow(dead_code)] // each test binary uses its own subset

use kerf_session::{analyze_file, AnalyzedImage, LoadOptions};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

/// `tests/fixtures/NAME.c` built with gcc and `opt`, once per test binary (its tests run in
/// parallel threads, and one reading the binary while another rewrites it fails), under a name
/// of this crate's and this process's own (other test binaries build the same fixtures).
pub fn build_fixture(name: &str, opt: &str) -> PathBuf {
    static BUILT: Mutex<Vec<((String, String), PathBuf)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    let key = (name.to_string(), opt.to_string());
    if let Some((_, path)) = built.iter().find(|(k, _)| *k == key) {
        return path.clone();
    }
    let path = build(name, opt);
    built.push((key, path.clone()));
    path
}

fn build(name: &str, opt: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/{name}.c"));
    let out = dir.join(format!("{name}{opt}-tools-{}", std::process::id()));
    let st = Command::new("gcc")
        .args([opt, "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc is needed (Debian package gcc)");
    assert!(st.success(), "gcc failed on {name}.c");
    out
}

/// A fixture built and analysed (without the cache).
pub fn analysed(name: &str, opt: &str) -> AnalyzedImage {
    let opts = LoadOptions { no_cache: true, ..LoadOptions::default() };
    analyze_file(&build_fixture(name, opt), &opts, &kerf_tools::Quiet)
        .expect("the fixture analyses")
}
