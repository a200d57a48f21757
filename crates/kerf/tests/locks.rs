//! `kerf locks` on tests/fixtures/locks.c: three threads block on `big_lock` for about a
//! second while the main thread holds it, after 1000 calls each on `small_lock`. kerf must
//! name the lock (a global of the program, by its symbol) and the call site, count the calls
//! exactly, and show about three threads waiting over that second; then one thread waits half
//! a second on `pi_lock`, a priority-inheriting mutex, whose lock call ends in a tail jump
//! (its wait must still be counted, to the return). The program's output must be what it
//! prints alone.

mod common;

use serde_json::Value;
use std::path::Path;
use std::process::Command;

fn row<'a>(v: &'a Value, key: &str, name: &str) -> &'a Value {
    v[key]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"].as_str().is_some_and(|n| n.contains(name)))
        .unwrap_or_else(|| panic!("no {name} in {key}: {v}"))
}

#[test]
fn three_threads_wait_on_the_big_lock() {
    let bin = common::build_fixture("locks", "-O2", "locks");
    let plain = Command::new(&bin).arg("now").output().unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["locks", "--json", "--"])
        .arg(&bin)
        .arg("now")
        .env("KERF_CACHE_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("locks-cache"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "kerf locks failed: {stderr}");
    assert_eq!(o.stdout, plain.stdout, "instrumented output differs");
    let v: Value = stderr
        .lines()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| panic!("no JSON: {stderr}"));
    let big = row(&v, "locks", ":big_lock");
    assert_eq!(big["calls"].as_u64(), Some(4), "main's and the three workers': {v}");
    // Three threads for 1 s of the ~1.5 s watched.
    let seconds = v["seconds"].as_f64().unwrap();
    let waiting = big["waiting_threads"].as_f64().unwrap() * seconds;
    assert!((2.7..=3.05).contains(&waiting), "{waiting} thread-seconds on big_lock: {v}");
    assert!(big["longest_ns"].as_u64().unwrap() > 900_000_000, "{v}");
    assert_eq!(row(&v, "locks", ":small_lock")["calls"].as_u64(), Some(3000), "{v}");
    let site = row(&v, "sites", ":worker+");
    assert!(site["waiting_threads"].as_f64().unwrap() * seconds > 2.7, "{v}");
    let pi = row(&v, "locks", ":pi_lock");
    assert_eq!(pi["calls"].as_u64(), Some(2), "main's and the waiter's: {v}");
    let pi_wait = pi["longest_ns"].as_u64().unwrap();
    assert!((400_000_000..700_000_000).contains(&pi_wait), "pi_lock's wait {pi_wait} ns: {v}");
    assert_eq!(v["lost_events"].as_u64(), Some(0), "{v}");
    assert_eq!(v["unfinished"].as_u64(), Some(0), "{v}");
}
