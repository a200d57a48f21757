//! Helpers shared by the integration tests that drive `kerf count`.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Start `kerf count ARGS` (stdout and stderr piped, analysis cache in the test's temporary
/// directory `cache`) and wait until it reports its points spliced. Returns the process, with
/// its stderr already taken, and that report line.
pub fn spawn_count<S: AsRef<std::ffi::OsStr>>(args: &[S], cache: &str) -> (Child, String) {
    let mut k = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .arg("count")
        .args(args)
        .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(cache))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kerf");
    let mut err = BufReader::new(k.stderr.take().expect("piped stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("kerf's first line");
    assert!(line.contains("points spliced"), "kerf count did not splice: {line}");
    // Keep draining stderr so kerf never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    (k, line)
}
