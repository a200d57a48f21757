//! `kerf sum` on Debian's coreutils dd, which knows what it moves: reading /dev/zero into
//! /dev/null COUNT blocks of BS bytes, libc's `read` and `write` return BS each time and
//! `write` is asked for BS; writing to /dev/full fails, and the failed write's -1 is summed
//! (sums are signed).

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn sum(tag: &str, lines: &[&str], dd: &[&str]) -> (Value, std::process::Output) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let summary = dir.join(format!("sum-{tag}.json"));
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["sum", "--json", "-o"])
        .arg(&summary)
        .args(lines)
        .args(["--", "dd"])
        .args(dd)
        .env("KERF_CACHE_DIR", dir.join("sum-cache"))
        .output()
        .unwrap();
    let v = serde_json::from_slice(&std::fs::read(&summary).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no summary ({e}): {}", String::from_utf8_lossy(&o.stderr)));
    (v, o)
}

fn line<'a>(v: &'a Value, text: &str) -> &'a Value {
    v["lines"].as_array().unwrap().iter().find(|l| l["line"] == text).unwrap()
}

#[test]
fn sums_equal_what_dd_moved() {
    let lines = ["libc:write@exits ret", "libc:read@exits ret", "libc:write arg2"];
    let (v, o) = sum(
        "null",
        &lines,
        &["if=/dev/zero", "of=/dev/null", "bs=4096", "count=1000", "status=none"],
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    for l in lines {
        assert_eq!(line(&v, l)["sum"].as_i64(), Some(4_096_000), "{l}: {v}");
        assert_eq!(line(&v, l)["count"].as_u64(), Some(1000), "{l}: {v}");
        assert_eq!(line(&v, l)["avg"].as_f64(), Some(4096.0), "{l}: {v}");
    }
}

#[test]
fn a_failed_write_sums_its_minus_one() {
    let dd = ["if=/dev/zero", "of=/dev/full", "bs=512", "count=3"];
    let (v, o) = sum("full", &["libc:write@exits ret"], &dd);
    // kerf exits with the code of the command it launched.
    assert_eq!(o.status.code(), Some(1), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(v["target"]["exit_code"], 1, "dd writing to /dev/full fails: {v}");
    let w = line(&v, "libc:write@exits ret");
    // One write of the block, refused (-1); then dd's messages on stderr, each byte written
    // by a write that returns its length. Only dd's own lines count (its error and its
    // three statistics lines): kerf writes to the same stderr, and not every line of it
    // starts with `kerf:` (a CI run once counted 284 bytes of "messages" against dd's 126).
    let dds = |l: &&str| {
        l.starts_with("dd: ")
            || l.ends_with(" records in")
            || l.ends_with(" records out")
            || l.contains(" copied, ")
    };
    let msgs: i64 =
        String::from_utf8_lossy(&o.stderr).lines().filter(dds).map(|l| l.len() as i64 + 1).sum();
    assert!(w["count"].as_u64().unwrap() >= 2, "{v}");
    assert_eq!(w["sum"].as_i64(), Some(msgs - 1), "{v}");
}
