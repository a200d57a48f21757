//! Helpers shared by the analysis tests that build a C fixture of `tests/fixtures/`.

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
