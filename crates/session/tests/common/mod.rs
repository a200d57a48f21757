//! Helpers shared by session's integration tests: fixture programs compiled and analysed.

use kerf_session::{analyze_file, AnalyzedImage, LoadOptions};
use std::path::{Path, PathBuf};
use std::process::Command;

/// `tests/fixtures/NAME.c` built with gcc -O2 and analysed (no cache). One binary per test:
/// tests run in parallel, and one reading the file while another rewrites it sees a torn one.
pub fn fixture(name: &str) -> AnalyzedImage {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session-fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("../../tests/fixtures/{name}.c"));
    let test = std::thread::current().name().unwrap_or("main").replace("::", "-");
    let out = dir.join(format!("{name}-{test}"));
    let st = Command::new("gcc")
        .args(["-O2", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc is needed (Debian package gcc)");
    assert!(st.success(), "gcc failed on {name}.c");
    let opts = LoadOptions { cache_dir: None, ..LoadOptions::default() };
    analyze_file(&out, &opts, &kerf_analysis::Quiet).unwrap()
}
