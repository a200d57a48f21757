//! The analysis cache as an attacker or an accident meets it (issue 9, item 6): a changed
//! block start in an entry is detected and the image analysed again; an entry that lies with
//! a right checksum is caught before `kerf count` splices from it (or, with trap splices,
//! takes the system calls to guard from it), rejected, and the program counted right from a
//! new analysis; symlinks planted at the cache directory, at an entry or
//! at the temporary file kerf writes are never followed; a cache directory of another user is
//! refused; with no HOME the cache is the user's own, never one under /tmp. Runs as root (as
//! CI does), like root's kerf that was attacked.

mod common;

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{ChildStdout, Command, Output, Stdio};

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cache-safety").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

fn analyze(cache: &Path, extra: &[&str]) -> Output {
    analyze_file(cache, Path::new(LIBC), extra)
}

fn analyze_file(cache: &Path, file: &Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .arg("analyze")
        .arg(file)
        .arg("--json")
        .args(extra)
        .env("KERF_CACHE_DIR", cache)
        .output()
        .expect("run kerf")
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "kerf failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The one entry in `dir`.
fn entry(dir: &Path) -> PathBuf {
    let files: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    assert_eq!(files.len(), 1, "{files:?}");
    files[0].clone()
}

fn hex(v: &Value) -> u64 {
    u64::from_str_radix(v.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn a_changed_block_start_is_detected_and_the_image_analysed_again() {
    let cache = tmp("poison");
    let first = json(&analyze(&cache, &["--function", "qsort_r"]));
    assert_eq!(first["cached"], false);
    // qsort_r's second block, as the entry stores it: start (u64), len and insns (u32 each).
    let b = &first["function"][0]["blocks"][1];
    let (start, len, insns) =
        (hex(&b["start"]), b["len"].as_u64().unwrap(), b["insns"].as_u64().unwrap());
    let mut pattern = start.to_le_bytes().to_vec();
    pattern.extend_from_slice(&(len as u32).to_le_bytes());
    pattern.extend_from_slice(&(insns as u32).to_le_bytes());
    let file = entry(&cache);
    let mut bytes = std::fs::read(&file).unwrap();
    let at = bytes.windows(16).position(|w| w == pattern).expect("the block in the entry");
    // One byte into its first instruction: what made kerf splice inside an instruction.
    bytes[at..at + 8].copy_from_slice(&(start + 1).to_le_bytes());
    std::fs::write(&file, &bytes).unwrap();
    let second = analyze(&cache, &["--function", "qsort_r"]);
    let v = json(&second);
    assert_eq!(v["cached"], false, "a poisoned entry was used: {}", stderr(&second));
    assert!(stderr(&second).contains("rejected"), "no warning: {}", stderr(&second));
    assert_eq!(v["function"][0]["blocks"][1]["start"], b["start"]);
    // Rebuilt: the next run reads a good entry.
    let third = analyze(&cache, &[]);
    assert_eq!(json(&third)["cached"], true, "{}", stderr(&third));
    assert!(!stderr(&third).contains("rejected"), "{}", stderr(&third));
}

use common::poison_block;

const THREADS: u64 = 4;
const ITERS: u64 = 20_000;

/// tests/fixtures/counted.c started, waiting for "go" (or going by itself: `auto`).
fn start_counted(bin: &Path, auto: bool) -> (std::process::Child, i32, BufReader<ChildStdout>) {
    let mut args = vec![THREADS.to_string(), ITERS.to_string()];
    args.extend(auto.then(|| "auto".to_string()));
    common::start_counted(bin, &args)
}

use common::rest;

/// `kerf count --json ARGS` on a run of `bin` (counted.c) with analyses from `cache`: the
/// program's output must be what it prints without kerf. Returns what kerf said on stderr up
/// to its line saying the points are in, and its JSON summary.
fn count_counted(cache: &Path, bin: &Path, args: &[&str]) -> (String, Value) {
    let (mut c, _, out) = start_counted(bin, true);
    let expected = rest(out);
    assert!(c.wait().unwrap().success());
    let (mut c, pid, out) = start_counted(bin, false);
    let _reaper = common::Reaper(pid);
    let mut k = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["count", "-p", &pid.to_string(), "--json"])
        .args(args)
        .env("KERF_CACHE_DIR", cache)
        .env_remove("DEBUGINFOD_URLS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(k.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("points spliced") {
        let before = said.len();
        err.read_line(&mut said).unwrap();
        assert!(said.len() > before, "kerf ended before splicing: {said}");
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    assert!(Command::new("kill").args(["-USR1", &pid.to_string()]).status().unwrap().success());
    let got = rest(out);
    assert!(c.wait().unwrap().success(), "the program failed under kerf: {said}");
    let ko = k.wait_with_output().unwrap();
    assert!(ko.status.success(), "kerf failed: {said}");
    assert_eq!(got, expected, "instrumented output differs: {said}");
    (said, serde_json::from_slice(&ko.stdout).unwrap())
}

/// After a rejected entry: the one that replaced it passes every check.
fn entry_is_good_again(cache: &Path, file: &Path) {
    let out = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["analyze", "--json", "--validate"])
        .arg(file)
        .env("KERF_CACHE_DIR", cache)
        .output()
        .unwrap();
    assert_eq!(json(&out)["cached"], true, "{}", stderr(&out));
    assert!(!stderr(&out).contains("rejected"), "{}", stderr(&out));
}

#[test]
fn kerf_count_rejects_an_entry_that_lies_before_splicing_and_counts_right() {
    let cache = tmp("count-lie");
    let bin = common::build_fixture("counted", "-O2", "cachelie");
    json(&analyze_file(&cache, &bin, &[]));
    let starts = poison_block(&cache, &bin, "branchy", 1);
    let (said, v) = count_counted(&cache, &bin, &["branchy@blocks"]);
    assert!(said.contains("rejected, analysed again"), "no warning: {said}");
    // The points are the true block starts, each counted: the entry one exactly once a call.
    let points = v["points"].as_array().unwrap();
    let mut at: Vec<u64> = points.iter().map(|p| hex(&p["address"])).collect();
    at.sort_unstable();
    let bias = at[0] - starts[0];
    assert_eq!(at.iter().map(|a| a - bias).collect::<Vec<_>>(), starts, "{v}");
    let entry = points.iter().find(|p| hex(&p["address"]) - bias == starts[0]).unwrap();
    assert_eq!(entry["count"].as_u64(), Some(THREADS * ITERS), "{v}");
    entry_is_good_again(&cache, &bin);
}

#[test]
fn guards_for_trap_splices_are_planned_from_a_checked_libc() {
    // A trap splice makes kerf guard every `syscall` of the process that may set a signal
    // mask, found from the blocks of libc's analysis: a block of `write` that lies could hide
    // one (or its number). The lie is caught there, libc analysed again, and the count right.
    let cache = tmp("count-lie-libc");
    let bin = common::build_fixture("counted", "-O2", "cachelielibc");
    json(&analyze(&cache, &[]));
    poison_block(&cache, Path::new(LIBC), "write", 1);
    let (said, v) = count_counted(&cache, &bin, &["branchy", "--force-kind", "trap"]);
    assert!(said.contains("libc.so.6 does not match it"), "no warning: {said}");
    assert!(said.contains("rejected, analysed again"), "no warning: {said}");
    assert!(said.contains("system calls guarded"), "{said}");
    let n = &v["points"][0];
    assert_eq!((n["count"].as_u64(), n["kind"].as_str()), (Some(THREADS * ITERS), Some("trap")));
    entry_is_good_again(&cache, Path::new(LIBC));
}

#[test]
fn an_entry_copied_under_another_key_is_rejected() {
    let cache = tmp("foreign");
    json(&analyze(&cache, &[]));
    let file = entry(&cache);
    let name = file.file_name().unwrap().to_string_lossy().into_owned();
    // The same bytes, for a symbol file that was never given: another key.
    let syms = cache.join("syms");
    std::fs::write(&syms, "0000000000001000 T nothing\n").unwrap();
    let out = analyze(&cache, &["--symbols", syms.to_str().unwrap()]);
    let v = json(&out);
    assert_eq!(v["cached"], false);
    let other: Vec<PathBuf> = std::fs::read_dir(&cache)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "bin") && !p.ends_with(&name))
        .collect();
    assert_eq!(other.len(), 1, "{other:?}");
    std::fs::copy(&file, &other[0]).unwrap();
    let out = analyze(&cache, &["--symbols", syms.to_str().unwrap()]);
    assert_eq!(json(&out)["cached"], false, "{}", stderr(&out));
    assert!(stderr(&out).contains("another key"), "{}", stderr(&out));
}

/// A root-owned file standing for /etc/shadow: a planted symlink must never reach it.
fn victim(dir: &Path) -> PathBuf {
    let v = dir.join("victim");
    std::fs::write(&v, b"precious\n").unwrap();
    v
}

fn untouched(v: &Path) {
    assert_eq!(std::fs::read(v).unwrap(), b"precious\n", "{} was overwritten", v.display());
}

#[test]
fn a_symlink_planted_at_the_temporary_file_is_not_followed() {
    let base = tmp("tmpfile");
    let cache = base.join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::fs::set_permissions(&cache, std::fs::Permissions::from_mode(0o700)).unwrap();
    let v = victim(&base);
    // Learn the entry's name, then empty the cache.
    json(&analyze(&cache, &[]));
    let name = entry(&cache).file_name().unwrap().to_string_lossy().into_owned();
    std::fs::remove_file(cache.join(&name)).unwrap();
    // A shell that plants links at the temporary names the kerf it execs (same pid) would
    // use, older ones and the current ones.
    let script = format!(
        "ln -s {v} {c}/.{name}.$$ && ln -s {v} {c}/.{name}.$$.0.tmp && exec {kerf} analyze {LIBC} --json",
        v = v.display(),
        c = cache.display(),
        kerf = env!("CARGO_BIN_EXE_kerf"),
    );
    let out =
        Command::new("sh").args(["-c", &script]).env("KERF_CACHE_DIR", &cache).output().unwrap();
    json(&out);
    untouched(&v);
    assert!(cache.join(&name).is_file(), "the entry was still written: {}", stderr(&out));
}

#[test]
fn a_symlink_planted_at_an_entry_is_neither_read_nor_followed() {
    let base = tmp("entrylink");
    let cache = base.join("cache");
    std::fs::create_dir(&cache).unwrap();
    json(&analyze(&cache, &[]));
    let file = entry(&cache);
    let v = victim(&base);
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&v, &file).unwrap();
    let out = analyze(&cache, &[]);
    assert_eq!(json(&out)["cached"], false);
    untouched(&v);
    // The link itself was replaced by a real entry.
    assert!(!std::fs::symlink_metadata(&file).unwrap().file_type().is_symlink());
}

#[test]
fn a_cache_directory_that_is_a_symlink_is_refused() {
    let base = tmp("dirlink");
    let real = base.join("elsewhere");
    std::fs::create_dir(&real).unwrap();
    let link = base.join("cache");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = analyze(&link, &[]);
    assert_eq!(json(&out)["cached"], false);
    assert!(stderr(&out).contains("not used"), "no warning: {}", stderr(&out));
    assert_eq!(std::fs::read_dir(&real).unwrap().count(), 0, "wrote through the link");
}

#[test]
fn a_cache_directory_of_another_user_is_refused() {
    let base = tmp("nobody");
    let cache = base.join("cache");
    std::fs::create_dir(&cache).unwrap();
    std::os::unix::fs::chown(&cache, Some(65534), Some(65534)).expect("chown (run as root)");
    let out = analyze(&cache, &[]);
    assert_eq!(json(&out)["cached"], false);
    assert!(stderr(&out).contains("owned by uid 65534"), "no warning: {}", stderr(&out));
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 0, "wrote into nobody's directory");
    // Nor one that others may write to.
    let shared = base.join("shared");
    std::fs::create_dir(&shared).unwrap();
    std::fs::set_permissions(&shared, std::fs::Permissions::from_mode(0o777)).unwrap();
    let out = analyze(&shared, &[]);
    assert!(stderr(&out).contains("writable by other users"), "{}", stderr(&out));
    assert_eq!(std::fs::read_dir(&shared).unwrap().count(), 0);
}

#[test]
fn with_no_home_the_cache_is_the_users_own_not_one_under_tmp() {
    let id = Command::new("id").arg("-u").output().unwrap();
    assert_eq!(String::from_utf8_lossy(&id.stdout).trim(), "0", "run as root, as CI does");
    // The entry's name, learnt from a cache of the test's own.
    let mine = tmp("nohome");
    json(&analyze(&mine, &[]));
    let name = entry(&mine).file_name().unwrap().to_owned();
    let shared = Path::new("/tmp/.cache/kerf").join(&name);
    let own = Path::new("/root/.cache/kerf").join(&name);
    for p in [&shared, &own] {
        let _ = std::fs::remove_file(p);
    }
    let out = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["analyze", LIBC, "--json"])
        .env_remove("HOME")
        .env_remove("XDG_CACHE_HOME")
        .env_remove("KERF_CACHE_DIR")
        .output()
        .unwrap();
    json(&out);
    assert!(!shared.exists(), "the cache went to {}", shared.display());
    // It went to root's own home, from the passwd entry.
    assert!(own.is_file(), "no entry in {}: {}", own.display(), stderr(&out));
    let m = std::fs::metadata(own.parent().unwrap()).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o022), (0, 0));
    let _ = std::fs::remove_file(&own);
}
