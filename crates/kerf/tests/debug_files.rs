//! Separate debug files through `kerf analyze` and `kerf count`: a stripped fixture
//! (tests/fixtures/hidden.c) whose static function only its debug file names, found by
//! `.gnu_debuglink`, by build-id and from a local debuginfod server; wrong CRCs, other builds
//! and broken files refused with a warning; the analysis cache following the debug file; and
//! libc's static functions named by Debian's libc6-dbg, in a file and in a live process.
//!
//! Needs gcc, binutils, libc6-dbg, debuginfod and iproute2 (scripts/deps.sh installs them):
//! a missing one fails the test, naming it.

mod common;

use common::Reaper;
use serde_json::Value;
use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

/// A fresh directory for one test.
fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("debug_files").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn run(program: &str, args: &[&OsStr]) {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("this test needs `{program}` (gcc, binutils): {e}"));
    assert!(out.status.success(), "{program} failed: {}", String::from_utf8_lossy(&out.stderr));
}

/// The fixture built in `dir` (with `-g`, so the unstripped file is itself debug info), and
/// from it: `NAME.debug` (objcopy --only-keep-debug), `NAME.stripped` (no .symtab, no link)
/// and `NAME.linked` (stripped, with a .gnu_debuglink to NAME.debug). Returns the unstripped
/// file's path.
fn build(dir: &Path, name: &str, variant: u32) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/hidden.c");
    let full = dir.join(name);
    let p = |suffix: &str| dir.join(format!("{name}{suffix}"));
    let def = format!("-DVARIANT={variant}");
    run(
        "gcc",
        &["-O2".as_ref(), "-g".as_ref(), def.as_ref(), "-o".as_ref(), full.as_ref(), src.as_ref()],
    );
    run("objcopy", &["--only-keep-debug".as_ref(), full.as_ref(), p(".debug").as_ref()]);
    run("objcopy", &["--strip-all".as_ref(), full.as_ref(), p(".stripped").as_ref()]);
    let link = format!("--add-gnu-debuglink={}", p(".debug").display());
    run("objcopy", &[link.as_ref(), p(".stripped").as_ref(), p(".linked").as_ref()]);
    full
}

/// The build-id of an ELF file, from readelf.
fn build_id(file: &Path) -> String {
    let out = Command::new("readelf").arg("-n").arg(file).output().expect("readelf (binutils)");
    let text = String::from_utf8_lossy(&out.stdout);
    let id = text.lines().find_map(|l| l.trim().strip_prefix("Build ID: "));
    id.unwrap_or_else(|| panic!("{} has no build-id", file.display())).to_string()
}

/// Where a debug directory `dir` keeps the debug file of build-id `id`.
fn build_id_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]))
}

/// `kerf ARGS` with the cache and the debug directories in `dir` (so nothing outside the test
/// is read or written) and no debuginfod server unless `env` names one.
fn kerf(dir: &Path, args: &[&OsStr], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kerf"));
    c.args(args)
        .env("KERF_CACHE_DIR", dir.join("cache"))
        .env("KERF_DEBUG_DIRS", dir.join("debug-dir"))
        .env_remove("DEBUGINFOD_URLS")
        .env_remove("KERF_NO_DEBUG_FILES");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().expect("run kerf")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// `kerf analyze FILE --json`: (the image's `symbols` text, its function count, stderr).
fn analyze(dir: &Path, file: &Path, env: &[(&str, &str)]) -> (String, u64, String) {
    let o = kerf(dir, &["analyze".as_ref(), file.as_ref(), "--json".as_ref()], env);
    assert!(o.status.success(), "kerf analyze failed: {}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).expect("JSON");
    let img = &v["per_image"][0];
    (img["symbols"].as_str().unwrap().to_string(), img["functions"].as_u64().unwrap(), stderr(&o))
}

/// Whether `kerf analyze FILE --function NAME` finds the function.
fn finds(dir: &Path, file: &Path, name: &str, env: &[(&str, &str)]) -> bool {
    let args: [&OsStr; 4] =
        ["analyze".as_ref(), file.as_ref(), "--function".as_ref(), name.as_ref()];
    let o = kerf(dir, &args, env);
    let out = String::from_utf8_lossy(&o.stdout);
    if o.status.success() {
        assert!(out.starts_with(&format!("function {name} ")), "{out}");
        true
    } else {
        assert!(stderr(&o).contains(&format!("no function named '{name}'")), "{}", stderr(&o));
        false
    }
}

#[test]
fn debuglink_beside_the_binary_or_in_its_debug_subdirectory() {
    let dir = tmp("debuglink");
    build(&dir, "h", 1);
    let linked = dir.join("h.linked");
    let debug = dir.join("h.debug");
    assert!(finds(&dir, &linked, "hidden_sum", &[]));
    let (symbols, _, err) = analyze(&dir, &linked, &[]);
    assert_eq!(symbols, format!(".symtab of {} (by .gnu_debuglink)", debug.display()));
    assert!(err.is_empty(), "{err}");

    std::fs::create_dir(dir.join(".debug")).unwrap();
    let moved = dir.join(".debug/h.debug");
    std::fs::rename(&debug, &moved).unwrap();
    let (symbols, _, _) = analyze(&dir, &linked, &[]);
    assert_eq!(symbols, format!(".symtab of {} (by .gnu_debuglink)", moved.display()));

    // Under a debug directory, at the binary's own path.
    let mirrored = dir.join("debug-dir").join(dir.strip_prefix("/").unwrap()).join("h.debug");
    std::fs::create_dir_all(mirrored.parent().unwrap()).unwrap();
    std::fs::rename(&moved, &mirrored).unwrap();
    let (symbols, _, _) = analyze(&dir, &linked, &[]);
    assert_eq!(symbols, format!(".symtab of {} (by .gnu_debuglink)", mirrored.display()));

    // Gone: the stripped file's symbols only (it has none of its own).
    std::fs::remove_file(&mirrored).unwrap();
    assert!(!finds(&dir, &linked, "hidden_sum", &[]));
    let (symbols, _, _) = analyze(&dir, &linked, &[]);
    assert_eq!(symbols, "none");
}

#[test]
fn a_build_id_path_in_a_debug_directory() {
    let dir = tmp("build_id");
    let full = build(&dir, "h", 1);
    let stripped = dir.join("h.stripped");
    assert!(!finds(&dir, &stripped, "hidden_sum", &[]), "a stripped file named hidden_sum");
    let path = build_id_path(&dir.join("debug-dir"), &build_id(&full));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(dir.join("h.debug"), &path).unwrap();
    assert!(finds(&dir, &stripped, "hidden_sum", &[]));
    let (symbols, _, _) = analyze(&dir, &stripped, &[]);
    assert_eq!(symbols, format!(".symtab of {} (by build-id)", path.display()));
}

#[test]
fn switched_off_by_flag_or_environment() {
    let dir = tmp("off");
    build(&dir, "h", 1);
    let linked = dir.join("h.linked");
    assert!(finds(&dir, &linked, "hidden_sum", &[]));
    let args: [&OsStr; 5] = [
        "analyze".as_ref(),
        linked.as_ref(),
        "--function".as_ref(),
        "hidden_sum".as_ref(),
        "--no-debug-files".as_ref(),
    ];
    let o = kerf(&dir, &args, &[]);
    assert!(!o.status.success() && stderr(&o).contains("no function named"), "{}", stderr(&o));
    assert!(!finds(&dir, &linked, "hidden_sum", &[("KERF_NO_DEBUG_FILES", "1")]));
    assert!(finds(&dir, &linked, "hidden_sum", &[("KERF_NO_DEBUG_FILES", "0")]));
}

#[test]
fn a_debuglink_with_the_wrong_crc_is_refused() {
    let dir = tmp("crc");
    build(&dir, "h", 1);
    let linked = dir.join("h.linked");
    // Still a valid debug file of the same build, but not the bytes the link was made for.
    let debug = dir.join("h.debug");
    let mut bytes = std::fs::read(&debug).unwrap();
    bytes.push(0);
    std::fs::write(&debug, bytes).unwrap();
    assert!(!finds(&dir, &linked, "hidden_sum", &[]));
    let (symbols, _, err) = analyze(&dir, &linked, &[]);
    assert_eq!(symbols, "none");
    assert!(
        err.contains(&format!("warning: debug file {}: CRC-32 ", debug.display()))
            && err.contains(".gnu_debuglink expects")
            && err.contains("ignored"),
        "{err}"
    );
}

#[test]
fn a_debug_file_of_another_build_is_refused() {
    let dir = tmp("other_build");
    let one = build(&dir, "one", 1);
    build(&dir, "two", 2);
    let (id1, id2) = (build_id(&one), build_id(&dir.join("two")));
    assert_ne!(id1, id2);

    // At the first build's build-id path, the second build's debug file.
    let path = build_id_path(&dir.join("debug-dir"), &id1);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(dir.join("two.debug"), &path).unwrap();
    let stripped = dir.join("one.stripped");
    assert!(!finds(&dir, &stripped, "hidden_sum", &[]));
    let (symbols, _, err) = analyze(&dir, &stripped, &[]);
    assert_eq!(symbols, "none");
    let want = format!("build-id {id2} is not the image's ({id1})");
    assert!(err.contains(&want) && err.contains(&path.display().to_string()), "{err}");

    // A link whose CRC matches, made to the other build's debug file.
    std::fs::remove_file(&path).unwrap();
    let relinked = dir.join("one.relinked");
    let link = format!("--add-gnu-debuglink={}", dir.join("two.debug").display());
    run("objcopy", &[link.as_ref(), stripped.as_ref(), relinked.as_ref()]);
    assert!(!finds(&dir, &relinked, "hidden_sum", &[]));
    let (_, _, err) = analyze(&dir, &relinked, &[]);
    assert!(err.contains(&want), "{err}");
}

#[test]
fn a_malformed_debug_file_is_a_warning_not_a_crash() {
    let dir = tmp("malformed");
    let full = build(&dir, "h", 1);
    let stripped = dir.join("h.stripped");
    let path = build_id_path(&dir.join("debug-dir"), &build_id(&full));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let good = std::fs::read(dir.join("h.debug")).unwrap();
    let (_, plain, _) = analyze(&dir, &stripped, &[]);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("truncated", good[..good.len() / 2].to_vec(), "malformed ELF"),
        ("text", b"not a debug file\n".to_vec(), "not an ELF file"),
        ("empty", Vec::new(), "empty file"),
    ];
    for (what, bytes, needle) in cases {
        std::fs::write(&path, bytes).unwrap();
        let (symbols, functions, err) = analyze(&dir, &stripped, &[]);
        assert_eq!(symbols, "none", "{what}");
        assert_eq!(functions, plain, "{what}: the analysis changed");
        assert!(
            err.contains(&format!("warning: debug file {}", path.display()))
                && err.contains(needle)
                && err.contains("ignored"),
            "{what}: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    // A FIFO must not block kerf, a directory is no file.
    std::fs::remove_file(&path).unwrap();
    run("mkfifo", &[path.as_ref()]);
    let (_, _, err) = analyze(&dir, &stripped, &[]);
    assert!(err.contains("not a regular file"), "{err}");
    std::fs::remove_file(&path).unwrap();
    std::fs::create_dir(&path).unwrap();
    let (_, _, err) = analyze(&dir, &stripped, &[]);
    assert!(err.contains("not a regular file"), "{err}");
}

#[test]
fn the_cache_key_follows_the_debug_file() {
    let dir = tmp("cache");
    let full = build(&dir, "h", 1);
    let stripped = dir.join("h.stripped");
    // First without a debug file: the analysis is cached under the image's build-id.
    assert!(!finds(&dir, &stripped, "hidden_sum", &[]));
    // Then the debug file appears: the cached analysis without its names must not be used.
    let path = build_id_path(&dir.join("debug-dir"), &build_id(&full));
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::copy(dir.join("h.debug"), &path).unwrap();
    assert!(finds(&dir, &stripped, "hidden_sum", &[]));
    // And goes away again.
    std::fs::remove_file(&path).unwrap();
    assert!(!finds(&dir, &stripped, "hidden_sum", &[]));
    // Replaced by another file of the same build whose symbols differ: a new entry again.
    run(
        "objcopy",
        &[
            "--redefine-sym".as_ref(),
            "hidden_sum=renamed_sum".as_ref(),
            dir.join("h.debug").as_ref(),
            path.as_ref(),
        ],
    );
    assert!(finds(&dir, &stripped, "renamed_sum", &[]));
}

/// Run `f` on a thread of its own in a new network namespace with only loopback up: the local
/// debuginfod listens on every address of its namespace, and this one has no other.
fn in_private_network<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        // SAFETY: unshare(2) with CLONE_NEWNET changes only this thread's network namespace;
        // the processes it starts inherit it.
        let r = unsafe { libc::unshare(libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "unshare(CLONE_NEWNET): {}", std::io::Error::last_os_error());
        run("ip", &["link".as_ref(), "set".as_ref(), "lo".as_ref(), "up".as_ref()]);
        f()
    })
    .join()
    .unwrap_or_else(|e| std::panic::resume_unwind(e))
}

/// Kills the debuginfod server when the test ends, however it ends.
struct Server(std::process::Child);
impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn debuginfod_serves_a_missing_debug_file() {
    let dir = tmp("debuginfod");
    let served = dir.join("served");
    std::fs::create_dir(&served).unwrap();
    // The server holds the unstripped build (debug info in it); kerf gets the stripped one.
    let full = build(&served, "h", 1);
    build(&dir, "other", 2);
    let id = build_id(&full);
    let stripped = served.join("h.stripped");
    for f in ["h.debug", "h.stripped", "h.linked"] {
        std::fs::rename(served.join(f), dir.join(f)).unwrap();
    }
    let stripped_moved = dir.join("h.stripped");
    assert!(!stripped.exists());
    in_private_network(move || {
        let port = "8002";
        let url = format!("http://127.0.0.1:{port}");
        let server = Command::new("debuginfod")
            .args(["-F", "-p", port, "-g", "0", "-d"])
            .arg(dir.join("db.sqlite"))
            .arg(&served)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("this test needs debuginfod (Debian package debuginfod)");
        let mut server = Server(server);
        // Ready when elfutils' own client gets the file (the server scans its directory at
        // start; bounded wait).
        let deadline = Instant::now() + Duration::from_secs(60);
        for attempt in 0.. {
            let got = Command::new("debuginfod-find")
                .args(["debuginfo", &id])
                .env("DEBUGINFOD_URLS", &url)
                // A cache of its own per attempt: elfutils remembers a miss for 10 minutes.
                .env("DEBUGINFOD_CACHE_PATH", dir.join(format!("elfutils-cache-{attempt}")))
                .output()
                .expect("debuginfod-find (Debian package debuginfod)");
            if got.status.success() {
                break;
            }
            assert!(server.0.try_wait().unwrap().is_none(), "debuginfod exited");
            assert!(Instant::now() < deadline, "debuginfod did not serve {id} within 60 s");
            std::thread::sleep(Duration::from_millis(200));
        }

        let env = [("DEBUGINFOD_URLS", url.as_str())];
        assert!(!finds(&dir, &stripped_moved, "hidden_sum", &[]), "found without a server");
        let kept = dir.join("cache/debuginfod").join(format!("{id}.debug"));
        let (symbols, _, err) = analyze(&dir, &stripped_moved, &env);
        assert_eq!(symbols, format!(".symtab of {} (from debuginfod {url})", kept.display()));
        assert!(err.is_empty(), "{err}");
        // The kept copy is the served file, byte for byte; the next run reads it.
        assert_eq!(std::fs::read(&kept).unwrap(), std::fs::read(&full).unwrap());
        assert!(finds(&dir, &stripped_moved, "hidden_sum", &env));
        let (symbols, _, _) = analyze(&dir, &stripped_moved, &env);
        assert_eq!(
            symbols,
            format!(".symtab of {} (fetched from debuginfod earlier)", kept.display())
        );

        // A build the server does not have: a 404 is no warning, just no names.
        let other_stripped = dir.join("other.stripped");
        let (symbols, _, err) = analyze(&dir, &other_stripped, &env);
        assert_eq!(symbols, "none");
        assert!(err.is_empty(), "{err}");

        // With the server gone, the kept copy still serves; a fresh cache then finds nothing
        // and says why.
        drop(server);
        assert!(finds(&dir, &stripped_moved, "hidden_sum", &env));
        std::fs::remove_file(&kept).unwrap();
        let (symbols, _, err) = analyze(&dir, &stripped_moved, &env);
        assert_eq!(symbols, "none");
        assert!(err.contains("warning: debuginfod: ") && err.contains("cannot connect"), "{err}");
        // https is refused in words, not attempted.
        let https = [("DEBUGINFOD_URLS", "https://127.0.0.1:1")];
        let (_, _, err) = analyze(&dir, &stripped_moved, &https);
        assert!(err.contains("https is not supported"), "{err}");
    });
}

#[test]
fn libc6_dbg_names_libc_local_functions() {
    let dir = tmp("libc");
    // The system's debug directory this time: libc6-dbg's files are the real case.
    let env = [("KERF_DEBUG_DIRS", "/usr/lib/debug")];
    let id = build_id(Path::new(LIBC));
    let path = build_id_path(Path::new("/usr/lib/debug"), &id);
    assert!(path.is_file(), "{} missing: this test needs libc6-dbg", path.display());
    let (symbols, _, _) = analyze(&dir, Path::new(LIBC), &env);
    assert_eq!(
        symbols,
        format!(".dynsym of the image, .symtab of {} (by build-id)", path.display())
    );
    // _int_malloc is static in glibc's malloc.c: not in libc's .dynsym.
    for f in ["_int_malloc", "_int_free"] {
        assert!(finds(&dir, Path::new(LIBC), f, &env), "{f}");
        let off = [("KERF_DEBUG_DIRS", "/usr/lib/debug"), ("KERF_NO_DEBUG_FILES", "1")];
        assert!(!finds(&dir, Path::new(LIBC), f, &off), "{f} named without the debug file");
    }
}

#[test]
fn count_resolves_a_local_libc_function_in_a_live_process() {
    const CALLS: u64 = 5000;
    let bin = common::build_fixture("mallocs", "-O2", "debug_files");
    let mut c = Command::new(&bin).arg(CALLS.to_string()).stdout(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid: i32 = line.trim().strip_prefix("pid ").unwrap().parse().unwrap();
    let _reaper = Reaper(pid);
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");

    let args =
        ["-p", &pid.to_string(), "--json", "libc:_int_malloc", "libc:_int_free"].map(String::from);
    let (k, _) = common::spawn_count(&args, "debug-files-cache");
    assert!(Command::new("kill").args(["-USR1", &pid.to_string()]).status().unwrap().success());
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert_eq!(rest, "done\n");
    assert!(c.wait().unwrap().success());
    let ko = k.wait_with_output().unwrap();
    assert!(ko.status.success(), "kerf failed: {}", String::from_utf8_lossy(&ko.stderr));
    let v: Value = serde_json::from_slice(&ko.stdout).expect("kerf --json output");
    for f in ["_int_malloc", "_int_free"] {
        let p = v["points"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["point"].as_str() == Some(f))
            .unwrap_or_else(|| panic!("no point {f}: {v}"));
        // Each malloc(4000)/free after "go" is one call of each; nothing else allocates.
        assert_eq!(p["count"].as_u64(), Some(CALLS), "{f}: {v}");
    }
}
