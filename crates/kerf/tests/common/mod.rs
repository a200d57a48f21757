//! Helpers shared by the integration tests that drive live tools: building a fixture program
//! and starting `kerf count` / `kerf time` until its probes are in.

#![allow(dead_code)] // each test binary uses its own subset

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

/// The children of process `parent`.
pub fn children(parent: u32) -> Vec<i32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else { continue };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let ppid = stat.rsplit_once(')').and_then(|(_, r)| r.split_whitespace().nth(1));
        if ppid == Some(&parent.to_string()) {
            v.push(pid);
        }
    }
    v
}

/// Build `tests/fixtures/NAME.c` with gcc and `opt` under a name of the calling test's own
/// (`tag`): tests run in parallel, and rewriting a binary another test runs fails (ETXTBSY).
pub fn build_fixture(name: &str, opt: &str, tag: &str) -> PathBuf {
    build_with("gcc", &format!("{name}.c"), opt, tag)
}

/// [`build_fixture`] for `tests/fixtures/NAME.cc`, with g++.
pub fn build_cxx_fixture(name: &str, opt: &str, tag: &str) -> PathBuf {
    build_with("g++", &format!("{name}.cc"), opt, tag)
}

fn build_with(compiler: &str, file: &str, opt: &str, tag: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(file);
    let stem = file.rsplit_once('.').map_or(file, |(s, _)| s);
    let out = dir.join(format!("{stem}{}-{tag}", opt.replace(' ', "")));
    let st = Command::new(compiler)
        .args(opt.split_whitespace())
        .args(["-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .unwrap_or_else(|e| panic!("{compiler} is needed (Debian package build-essential): {e}"));
    assert!(st.success(), "{compiler} failed on {file}");
    out
}

/// Start `kerf TOOL ARGS` (stdout and stderr piped, analysis cache in the test's temporary
/// directory `cache`) and wait until it reports its points spliced. Returns the process, with
/// its stderr already taken, and that report line.
pub fn spawn_kerf<S: AsRef<std::ffi::OsStr>>(
    tool: &str,
    args: &[S],
    cache: &str,
) -> (Child, String) {
    let (k, line, _) = spawn_kerf_stderr(tool, args, cache);
    (k, line)
}

/// [`spawn_kerf`], also returning a thread that collects the rest of kerf's stderr (after the
/// report line) until kerf exits.
pub fn spawn_kerf_stderr<S: AsRef<std::ffi::OsStr>>(
    tool: &str,
    args: &[S],
    cache: &str,
) -> (Child, String, std::thread::JoinHandle<String>) {
    let mut k = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .arg(tool)
        .args(args)
        .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(cache))
        // No debuginfod server from the caller's environment: tests stay off the network.
        .env_remove("DEBUGINFOD_URLS")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kerf");
    let mut err = BufReader::new(k.stderr.take().expect("piped stderr"));
    // Warnings (a cache entry rejected and rebuilt, a debug file refused) may come first.
    let mut before = String::new();
    let mut line = String::new();
    loop {
        line.clear();
        let n = err.read_line(&mut line).expect("kerf's stderr");
        assert!(n > 0, "kerf {tool} did not splice: {before}");
        if line.contains("points spliced") {
            break;
        }
        assert!(line.starts_with("kerf: warning:"), "kerf {tool} did not splice: {before}{line}");
        before.push_str(&line);
    }
    // Keep draining stderr so kerf never blocks on a full pipe.
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = std::io::Read::read_to_string(&mut err, &mut s);
        s
    });
    (k, line, rest)
}

/// [`spawn_kerf`] for `kerf count`.
pub fn spawn_count<S: AsRef<std::ffi::OsStr>>(args: &[S], cache: &str) -> (Child, String) {
    spawn_kerf("count", args, cache)
}

/// Kills a fixture when a test fails half-way, so no spinning process outlives it.
pub struct Reaper(pub i32);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ =
            Command::new("kill").args(["-9", &self.0.to_string()]).stderr(Stdio::null()).status();
    }
}

/// Start a fixture program that prints its pid and `ready` first (`cmd`, with stdout left to
/// this function and whatever else the caller set up). Returns the child, its pid and the
/// rest of its stdout.
pub fn start_ready(mut cmd: Command) -> (Child, i32, BufReader<ChildStdout>) {
    let mut c = cmd.stdout(Stdio::piped()).spawn().unwrap();
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid: i32 = line.trim().strip_prefix("pid ").unwrap().parse().unwrap();
    line.clear();
    out.read_line(&mut line).unwrap();
    assert_eq!(line.trim(), "ready");
    (c, pid, out)
}

/// Start a fixture of `tests/fixtures/counted.c` (`bin`) with `args` (THREADS ITERATIONS,
/// and `auto` to go by itself): it prints its pid and `ready`, then waits for SIGUSR1 ("go").
/// Returns the child, its pid and the rest of its stdout.
pub fn start_counted<S: AsRef<std::ffi::OsStr>>(
    bin: &Path,
    args: &[S],
) -> (Child, i32, BufReader<ChildStdout>) {
    let mut cmd = Command::new(bin);
    cmd.args(args);
    start_ready(cmd)
}

/// Everything left on a child's stdout, to its end.
pub fn rest(mut out: BufReader<ChildStdout>) -> String {
    let mut s = String::new();
    out.read_to_string(&mut s).unwrap();
    s
}

/// Each CPU's time counters from `/proc/stat`, to tell how much of a run the hypervisor stole.
/// A thread's CPU clock leaves out stolen time (this kernel has PARAVIRT_TIME_ACCOUNTING), but
/// the thread was on the CPU all along, so kerf's virtual time (wall time minus time switched
/// out) counts it: on a busy host the two differ by the share stolen.
pub struct Steal(Vec<(u64, u64)>);

impl Steal {
    /// Every CPU's (steal, total) ticks now.
    pub fn now() -> Steal {
        let stat = std::fs::read_to_string("/proc/stat").unwrap();
        Steal(
            stat.lines()
                .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
                .map(|l| {
                    let n: Vec<u64> =
                        l.split_whitespace().skip(1).filter_map(|x| x.parse().ok()).collect();
                    // user nice system idle iowait irq softirq steal [guest guest_nice]: the
                    // guest fields are already inside user and nice.
                    (n.get(7).copied().unwrap_or(0), n.iter().take(8).sum())
                })
                .collect(),
        )
    }

    /// The largest share of any CPU's time stolen since `self` (0 with no time passed).
    pub fn worst_since(&self) -> f64 {
        let now = Steal::now();
        self.0
            .iter()
            .zip(&now.0)
            .map(|(a, b)| match b.1.saturating_sub(a.1) {
                0 => 0.0,
                total => b.0.saturating_sub(a.0) as f64 / total as f64,
            })
            .fold(0.0, f64::max)
    }

    /// The highest fair ratio of kerf's virtual time to a thread's own CPU clock: `limit`, plus
    /// what the stolen share since `self` adds to it.
    pub fn virtual_limit(&self, limit: f64) -> f64 {
        limit / (1.0 - self.worst_since().min(0.5))
    }
}

/// What the entry for `file` says `func`'s block starts are, and the entry rewritten, through
/// kerf's own writer (key, digest and checksum all right), with its block `k` moved one byte
/// into its first instruction: what made kerf splice inside an instruction (SIGILL) when the
/// cache was trusted.
pub fn poison_block(cache: &Path, file: &Path, func: &str, k: usize) -> Vec<u64> {
    let mut starts = Vec::new();
    rewrite_entry(cache, file, |lie| {
        let f = lie.cfg.functions_named(func).next().expect("the function");
        starts = lie.cfg.blocks_of(f).iter().map(|b| b.start.0).collect();
        assert!(starts.len() > k, "{func} has only {} blocks", starts.len());
        lie.cfg.blocks.of_mut(f)[k].start.0 += 1;
    });
    starts
}

/// The return facts kept beside the cache entry for `file` (as a JIT start keeps them)
/// rewritten, through kerf's own writer, with one register taken out of the set they say is
/// live where some function's returns land (one a caller keeps beyond the SysV set): a JIT
/// that trusted them could overwrite that register in the function's `ret`. Returns the
/// function's name.
pub fn poison_return_facts(cache: &Path, file: &Path) -> String {
    use kerf_session::cache::{self, CacheDir};
    let opts = kerf_session::LoadOptions {
        cache_dir: Some(cache.to_path_buf()),
        ..kerf_session::LoadOptions::default()
    };
    let a = kerf_session::analyze_file(file, &opts, &kerf_analysis::Quiet).unwrap();
    let mut facts = kerf_analysis::liveness::return_facts(&a.analysis.cfg);
    let sysv = kerf_arch::x86_64::RegSet::SYSV_LIVE_AT_RETURN;
    let (f, r) = (facts.iter().enumerate())
        .find_map(|(i, f)| Some((i, f.lands.regs.minus(sysv).iter().next()?)))
        .expect("a function whose returns land where more than the SysV set is live");
    facts[f].lands.regs = facts[f].lands.regs.minus(kerf_arch::x86_64::RegSet::of(&[r]));
    let data = std::fs::read(file).unwrap();
    let debug = a.symbols.debug_file.as_ref().map(|d| d.identity.as_str());
    let key = cache::key(a.analysis.build_id.as_deref(), file, None, debug);
    let dir = CacheDir::open(cache).unwrap();
    assert!(cache.join(cache::facts_key(&key)).is_file(), "no facts kept beside {key}");
    dir.store_facts(&key, &cache::digest(&data, None), &facts).unwrap();
    a.analysis.cfg.functions[f].name.clone()
}

/// The cache entry for `file` (analysed into `cache` first if it has none) changed by `edit`
/// and written back through kerf's own writer (key, digest and checksum all right).
fn rewrite_entry(cache: &Path, file: &Path, edit: impl FnOnce(&mut kerf_analysis::Analysis)) {
    use kerf_session::cache::{self, CacheDir};
    let opts = kerf_session::LoadOptions {
        cache_dir: Some(cache.to_path_buf()),
        ..kerf_session::LoadOptions::default()
    };
    let a = kerf_session::analyze_file(file, &opts, &kerf_analysis::Quiet).unwrap();
    let mut lie = a.analysis.clone();
    edit(&mut lie);
    let data = std::fs::read(file).unwrap();
    let debug = a.symbols.debug_file.as_ref().map(|d| d.identity.as_str());
    let key = cache::key(lie.build_id.as_deref(), file, None, debug);
    assert!(cache.join(&key).is_file(), "no entry {key}");
    CacheDir::open(cache).unwrap().store(&key, &cache::digest(&data, None), &lie).unwrap();
}

/// The repository's root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").canonicalize().unwrap()
}

/// kerf.ko and its tools, built by `driver/build` into a directory of the calling test's own
/// (`tag`): the directory they are in.
pub fn build_driver(tag: &str) -> PathBuf {
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(tag);
    let built = Command::new(repo().join("driver/build"))
        .env("KERF_DRIVER_OUT", &out_dir)
        .output()
        .expect("run driver/build");
    assert!(
        built.status.success(),
        "driver/build failed:\n{}{}",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&built.stdout).trim())
}

/// Boot the guest with `vm/run`: its options `opts`, each `(host, guest)` of `files` copied in
/// (kerf's own binary always, as `/kerf/kerf`), then `guest_cmd` run; prints how long it took.
pub fn vm_run(opts: &[&str], files: &[(&Path, &str)], guest_cmd: &str) -> std::process::Output {
    let mut cmd = Command::new(repo().join("vm/run"));
    cmd.args(opts);
    let kerf = Path::new(env!("CARGO_BIN_EXE_kerf"));
    for (host, guest) in std::iter::once(&(kerf, "/kerf/kerf")).chain(files) {
        cmd.arg("--file").arg(format!("{}:{guest}", host.display()));
    }
    let started = std::time::Instant::now();
    let out = cmd.args(["--", guest_cmd]).output().expect("run vm/run");
    eprintln!("vm/run took {:.1}s", started.elapsed().as_secs_f64());
    out
}

/// A guest run of `vm/run` whose script prints `CHECK NAME ok` (or `CHECK NAME FAIL why`,
/// then stops): fails the test at a failed check or a failed run, and at a check of `want`
/// missing; returns the guest's output.
pub fn guest_passed(out: &std::process::Output, want: &[&str]) -> String {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let report = format!("guest output:\n{stdout}\nvm/run stderr:\n{stderr}");
    let checks: Vec<&str> = stdout.lines().filter(|l| l.starts_with("CHECK ")).collect();
    let failed: Vec<&&str> = checks.iter().filter(|l| !l.ends_with(" ok")).collect();
    assert!(failed.is_empty(), "failed in the guest: {failed:?}\n{report}");
    assert!(out.status.success(), "vm/run failed (exit code, timeout or kernel crash)\n{report}");
    for w in want {
        let line = format!("CHECK {w} ok");
        assert!(checks.contains(&line.as_str()), "no `{w}` check\n{report}");
    }
    stdout
}
