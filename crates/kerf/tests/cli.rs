//! The `kerf analyze` command line as a user meets it: the summary, JSON keys, the cache, a
//! live process, and one-line errors with a non-zero exit for every kind of bad input.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn kerf(args: &[&str], cache: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(args)
        .env("KERF_CACHE_DIR", cache)
        .output()
        .expect("run kerf")
}

fn tmp(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli").join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

/// A failed run: non-zero exit, exactly one line on stderr containing `needle`, no panic.
fn assert_error(out: &Output, needle: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "expected failure, got success; stderr: {err}");
    assert!(!err.contains("panicked"), "kerf panicked: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "want one line, got: {err}");
    assert!(err.contains(needle), "stderr {err:?} does not mention {needle:?}");
    assert!(err.starts_with("kerf: "), "stderr {err:?}");
}

fn json(out: &Output) -> Value {
    assert!(out.status.success(), "kerf failed: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON object")
}

#[test]
fn summary_json_has_the_documented_keys() {
    let cache = tmp("json");
    let v = json(&kerf(&["analyze", LIBC, "--json", "--no-cache"], &cache));
    for k in [
        "images",
        "functions",
        "blocks",
        "instruction_bytes",
        "jump_tables",
        "unanalysable_jumps",
        "seconds",
    ] {
        assert!(v.get(k).is_some(), "missing key {k} in {v}");
    }
    assert_eq!(v["images"], 1);
    assert!(v["functions"].as_u64().unwrap() > 2000, "{v}");
    assert!(v["blocks"].as_u64().unwrap() > v["functions"].as_u64().unwrap());
    assert!(v["jump_tables"].as_u64().unwrap() > 50, "{v}");
    assert!(v["instruction_bytes"].as_u64().unwrap() > 1_000_000, "{v}");
    assert_eq!(v["cached"], false);
}

#[test]
fn text_summary_names_every_phase() {
    let cache = tmp("text");
    let out = kerf(&["analyze", LIBC, "--no-cache"], &cache);
    assert!(out.status.success());
    let s = String::from_utf8_lossy(&out.stdout);
    for k in [
        "functions",
        "basic blocks",
        "instruction bytes",
        "jump tables",
        "unanalysable jumps",
        "control flow",
        "liveness",
        "total",
    ] {
        assert!(s.contains(k), "summary lacks {k}:\n{s}");
    }
}

#[test]
fn second_run_comes_from_the_cache_and_no_cache_skips_it() {
    let cache = tmp("cache");
    let first = json(&kerf(&["analyze", LIBC, "--json"], &cache));
    assert_eq!(first["cached"], false);
    let entries = std::fs::read_dir(&cache).expect("cache dir").count();
    assert_eq!(entries, 1, "one cache file per image");
    let second = json(&kerf(&["analyze", LIBC, "--json"], &cache));
    assert_eq!(second["cached"], true);
    // The same analysis, only faster.
    for k in ["functions", "blocks", "instruction_bytes", "jump_tables", "unanalysable_jumps"] {
        assert_eq!(first[k], second[k], "{k} differs between fresh and cached analysis");
    }
    let third = json(&kerf(&["analyze", LIBC, "--json", "--no-cache"], &cache));
    assert_eq!(third["cached"], false);
    // A damaged cache file is ignored, not trusted.
    for e in std::fs::read_dir(&cache).unwrap() {
        std::fs::write(e.unwrap().path(), b"garbage").unwrap();
    }
    let fourth = json(&kerf(&["analyze", LIBC, "--json"], &cache));
    assert_eq!(fourth["cached"], false);
    assert_eq!(fourth["blocks"], first["blocks"]);
}

#[test]
fn function_view_lists_blocks_edges_and_live_registers() {
    let cache = tmp("function");
    let out = kerf(&["analyze", LIBC, "--function", "qsort_r"], &cache);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let s = String::from_utf8_lossy(&out.stdout);
    assert!(s.starts_with("function qsort_r in libc.so.6"), "{s}");
    assert!(s.contains("\n  block +0x0 "), "{s}");
    assert!(s.contains("    call "), "{s}");
    // qsort_r's arguments are live at its entry.
    let first = s.lines().find(|l| l.starts_with("  live-in")).unwrap();
    for r in ["rdi", "rsi", "rdx", "rcx", "r8", "rsp"] {
        assert!(first.split([' ', ',']).any(|w| w == r), "{r} not live at entry: {first}");
    }
}

#[test]
fn live_process_modules_with_load_bias() {
    let cache = tmp("pid");
    let mut child = Command::new("sleep").arg("30").spawn().expect("spawn sleep");
    // Let the loader map libc.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let pid = child.id().to_string();
    let out = kerf(&["analyze", "-p", &pid, "--json"], &cache);
    let _ = child.kill();
    let _ = child.wait();
    let v = json(&out);
    assert!(v["images"].as_u64().unwrap() >= 3, "sleep, libc and ld.so: {v}");
    let per_image = v["per_image"].as_array().unwrap();
    let paths: Vec<&str> = per_image.iter().map(|i| i["path"].as_str().unwrap()).collect();
    assert!(paths.iter().any(|p| p.ends_with("/sleep")), "{paths:?}");
    assert!(paths.iter().any(|p| p.contains("libc.so")), "{paths:?}");
    // Shared objects load at a non-zero bias.
    for i in per_image {
        if i["path"].as_str().unwrap().contains("libc.so") {
            assert!(i["bias"].as_str().is_some_and(|b| b != "0x0"), "{i}");
        }
    }
}

#[test]
fn missing_file() {
    assert_error(&kerf(&["analyze", "/nonexistent/kerf-test"], &tmp("e1")), "no such file");
}

#[test]
fn directory() {
    assert_error(&kerf(&["analyze", "/usr"], &tmp("e2")), "is a directory");
}

#[test]
fn not_elf() {
    let d = tmp("e3");
    let p = d.join("text.txt");
    std::fs::write(&p, "hello, not an ELF file\n").unwrap();
    assert_error(&kerf(&["analyze", p.to_str().unwrap()], &d), "not an ELF file");
}

/// A copy of /bin/true with bytes of the ELF header changed.
fn patched_true(dir: &Path, name: &str, offset: usize, value: &[u8]) -> PathBuf {
    let mut b = std::fs::read("/bin/true").expect("/bin/true");
    b[offset..offset + value.len()].copy_from_slice(value);
    let p = dir.join(name);
    std::fs::write(&p, b).unwrap();
    p
}

#[test]
fn not_x86_64() {
    let d = tmp("e4");
    // e_machine = EM_AARCH64 (183).
    let p = patched_true(&d, "aarch64", 18, &183u16.to_le_bytes());
    assert_error(&kerf(&["analyze", p.to_str().unwrap()], &d), "not x86-64");
}

#[test]
fn elf32() {
    let d = tmp("e5");
    let p = patched_true(&d, "elf32", 4, &[1]);
    assert_error(&kerf(&["analyze", p.to_str().unwrap()], &d), "32-bit");
}

#[test]
fn truncated_elf() {
    let d = tmp("e6");
    let b = std::fs::read("/bin/true").unwrap();
    let p = d.join("trunc");
    std::fs::write(&p, &b[..b.len() / 3]).unwrap();
    assert_error(&kerf(&["analyze", p.to_str().unwrap()], &d), "malformed");
}

#[test]
fn dead_pid() {
    let mut c = Command::new("true").spawn().unwrap();
    let pid = c.id();
    c.wait().unwrap();
    assert_error(&kerf(&["analyze", "-p", &pid.to_string()], &tmp("e7")), "does not exist");
    // A tool that fails leaves no empty summary file behind to be read as one.
    let out = tmp("e7").join("summary.json");
    let args = ["count", "-p", &pid.to_string(), "libc:malloc", "--json", "-o"];
    let mut args: Vec<&str> = args.to_vec();
    args.push(out.to_str().unwrap());
    assert_error(&kerf(&args, &tmp("e7")), "does not exist");
    assert!(!out.exists(), "an empty -o file was left");
}

#[test]
fn pid_that_may_not_be_read() {
    // As an unprivileged user, init's maps are off limits. setpriv comes with util-linux,
    // which every Debian system has.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_kerf"))
        .args(["analyze", "-p", "1"])
        .env("KERF_CACHE_DIR", tmp("e8"))
        .output()
        .expect("setpriv (util-linux) is needed for this test");
    assert_error(&out, "permission");
}

#[test]
fn unknown_function_suggests_close_names() {
    let out = kerf(&["analyze", LIBC, "--function", "qsortr"], &tmp("e9"));
    assert_error(&out, "no function named 'qsortr'");
    assert!(String::from_utf8_lossy(&out.stderr).contains("qsort_r"));
}

#[test]
fn missing_symbol_file() {
    let out = kerf(&["analyze", LIBC, "--symbols", "/nonexistent/syms"], &tmp("e10"));
    assert_error(&out, "no such file");
}

#[test]
fn bad_symbol_file_line() {
    let d = tmp("e11");
    let p = d.join("syms");
    std::fs::write(&p, "0000000000001000 T ok\nthis is not a symbol line\n").unwrap();
    let out = kerf(&["analyze", "/bin/true", "--symbols", p.to_str().unwrap(), "--no-cache"], &d);
    assert_error(&out, "line 2");
}

#[test]
fn symbol_file_names_functions_of_a_stripped_image() {
    // /bin/true has no .symtab; a symbol file naming its entry point names that function.
    let d = tmp("syms");
    let out = Command::new("readelf").args(["-hW", "/bin/true"]).output().expect("readelf");
    let h = String::from_utf8_lossy(&out.stdout);
    let entry = h.lines().find(|l| l.contains("Entry point address")).unwrap();
    let entry = u64::from_str_radix(entry.rsplit("0x").next().unwrap().trim(), 16).unwrap();
    let p = d.join("syms");
    std::fs::write(&p, format!("{entry:016x} T my_entry_point\n")).unwrap();
    let sym = p.to_str().unwrap();
    let out = kerf(&["analyze", "/bin/true", "--symbols", sym, "--function", "my_entry_point"], &d);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("function my_entry_point "));
}

/// Run kerf and give up after `secs`: a kerf that blocks (opening a FIFO for reading waits
/// for a writer forever) is killed and the test fails.
fn kerf_within(args: &[&str], cache: &Path, secs: u64) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(args)
        .env("KERF_CACHE_DIR", cache)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run kerf");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while c.try_wait().expect("wait").is_none() {
        if std::time::Instant::now() > deadline {
            let _ = c.kill();
            let _ = c.wait();
            panic!("kerf {args:?} still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    c.wait_with_output().expect("output")
}

#[test]
fn fifo_is_refused_without_blocking() {
    let d = tmp("fifo");
    let p = d.join("pipe");
    let st = Command::new("mkfifo").arg(&p).status().expect("mkfifo (coreutils)");
    assert!(st.success());
    let out = kerf_within(&["analyze", p.to_str().unwrap()], &d, 10);
    assert_error(&out, "not a regular file");
    // The same for a symbol file.
    let out = kerf_within(&["analyze", "/bin/true", "--symbols", p.to_str().unwrap()], &d, 10);
    assert_error(&out, "not a regular file");
}

#[test]
fn device_files_are_refused() {
    let d = tmp("dev");
    for dev in ["/dev/null", "/dev/zero", "/dev/urandom"] {
        let out = kerf_within(&["analyze", dev], &d, 10);
        assert_error(&out, "not a regular file");
    }
}

/// `kerf analyze ... | head`: the reader goes away early, and kerf ends quietly (SIGPIPE), not
/// with a panic about a failed write.
#[test]
fn analyze_into_a_closed_pipe_ends_quietly() {
    let mut k = std::process::Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["analyze", "--functions", "--no-cache", "/lib/x86_64-linux-gnu/libc.so.6"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(k.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut out, &mut first).unwrap();
    assert!(first.contains("name"), "{first}");
    drop(out);
    let o = k.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{err}");
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{:?}: {err}", o.status);
}

#[test]
fn hardware_counters_say_whether_the_cpu_has_a_pmu() {
    // Checked before any target is touched: a launched command would not even start.
    let d = tmp("pmu");
    let out = kerf(&["time", "--counter", "cycles", "main", "--", "true"], &d);
    if Path::new("/sys/bus/event_source/devices/cpu").exists() {
        // A machine with a PMU: kerf does not count per function yet, or the kernel's
        // perf_event_paranoid forbids it; either message names the PMU.
        assert_error(&out, "PMU");
    } else {
        assert_error(&out, "exposes no hardware performance counters to Linux (no PMU");
    }
    assert_error(&kerf(&["time", "--counter", "cycle", "main", "--", "true"], &d), "known: cycles");
}

/// A command kerf launches that exits with a code other than 0 makes kerf exit with that code
/// (after its summary), as `time` and `strace` do; 0 stays 0; a command a signal killed
/// makes it exit 128 + the signal, as a shell would. (`hunt` and `locks` since session 42.)
#[test]
fn a_launched_commands_exit_code_is_kerfs() {
    let cache = tmp("exit-code");
    // (`hunt` attaches to a launched command as it runs, round by round: its command lives
    // long enough for the first round to go in.)
    let tools: [(&str, &[&str], &str); 6] = [
        ("count", &["main"], ""),
        ("time", &["main"], ""),
        ("trace", &["main"], ""),
        ("jit", &["main"], ""),
        ("hunt", &["main"], "sleep 2; "),
        ("locks", &[], ""),
    ];
    for (tool, spec, before) in tools {
        // (`kill -TERM $$`: a signal's death, which a shell reports as 128 + 15.)
        for (code, end) in [(0, "exit 0"), (3, "exit 3"), (42, "exit 42"), (143, "kill -TERM $$")] {
            let script = format!("{before}{end}");
            let mut args = vec![tool];
            args.extend(spec);
            args.extend(["--", "sh", "-c", &script]);
            let out = kerf(&args, &cache);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("panicked"), "kerf {tool} panicked: {err}");
            assert_eq!(out.status.code(), Some(code), "kerf {tool} on `{script}`: {err}");
        }
    }
}

/// A launched command still running at `--duration`, which kerf waits for once its probes
/// are out, gives kerf its exit code, or 128 + the signal that killed it, as one that ends
/// under the probes does; the summary says how it ended after the duration, and a death then
/// is not called one "while instrumented". (kerf exited 0 with "duration reached", the
/// command's end unsaid, while `--help` promised the code.)
#[test]
fn a_command_ending_after_the_duration_gives_kerf_its_exit_code() {
    let cache = tmp("exit-after-duration");
    for tool in ["count", "time", "trace", "jit"] {
        for (code, end) in [(0, "exit 0"), (5, "exit 5"), (143, "kill -TERM $$")] {
            // (`trace` writes its events with `-o`, the others their summary.)
            let (out_file, json) = match tool {
                "trace" => (cache.join("events.jsonl"), None),
                _ => (cache.join(format!("{tool}.json")), Some("--json")),
            };
            let script = format!("sleep 1; {end}");
            let mut args =
                vec![tool, "main", "--duration", "0.3", "-o", out_file.to_str().unwrap()];
            args.extend(json);
            args.extend(["--", "sh", "-c", &script]);
            let out = kerf(&args, &cache);
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(code), "kerf {tool} on `{script}`: {err}");
            assert!(!err.contains("while instrumented"), "kerf {tool} on `{script}`: {err}");
            if json.is_none() {
                continue;
            }
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap();
            // (`jit` says it as `ended`, the others as `stopped`.)
            let ended = v["ended"].as_str().or(v["stopped"].as_str()).unwrap_or_default();
            assert!(ended.starts_with("duration reached; then process "), "{tool}: {v}");
            match code {
                143 => assert_eq!(v["target"]["signal"], 15, "{tool}: {}", v["target"]),
                c => assert_eq!(v["target"]["exit_code"], c, "{tool}: {}", v["target"]),
            }
        }
    }
}

/// A launched command that runs on after `--duration` (a server): kerf says so and waits for
/// its exit code (a command that ends soon gives it, as above); a Ctrl-C to kerf then ends the
/// wait at once, the summary written and the command left running. (Before, kerf waited in
/// silence, its summary unwritten, for as long as the command ran.)
#[test]
fn a_command_running_on_after_the_duration_is_said_to_and_ctrl_c_leaves_it() {
    use std::io::{BufRead, BufReader};
    use std::process::Stdio;
    let cache = tmp("runs-on");
    for tool in ["count", "jit"] {
        let summary = cache.join(format!("{tool}.json"));
        let mut k = Command::new(env!("CARGO_BIN_EXE_kerf"))
            .args([tool, "main", "--duration", "0.3", "--json", "-o"])
            .arg(&summary)
            .args(["--", "sleep", "60"])
            .env("KERF_CACHE_DIR", &cache)
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(k.stderr.take().unwrap());
        let (mut line, mut said) = (String::new(), String::new());
        while !line.contains("runs on") {
            line.clear();
            assert!(err.read_line(&mut line).unwrap() > 0, "{tool}: {said}");
            said.push_str(&line);
        }
        let pid: i32 =
            line.split("process ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        let asked = std::time::Instant::now();
        Command::new("kill").args(["-INT", &k.id().to_string()]).status().unwrap();
        let st = k.wait().unwrap();
        let waited = asked.elapsed().as_secs_f64();
        assert!(st.success(), "{tool}: {st:?}");
        assert!(waited < 5.0, "{tool}: {waited} s after Ctrl-C");
        let left = std::path::Path::new(&format!("/proc/{pid}")).exists();
        let _ = Command::new("kill").args(["-KILL", &pid.to_string()]).status();
        assert!(left, "{tool}: the command did not run on");
        let v: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        assert!(v.is_object(), "{tool}: no summary");
    }
}

/// kerf's stderr a closed pipe (`kerf ... 2>&1 | head` after the reader went): kerf's lines
/// are dropped, and it goes on to restore the target and write its summary. (Each line was an
/// `eprintln!`, which panics on EPIPE: kerf died while it held the target.)
#[test]
fn a_closed_stderr_ends_nothing() {
    use std::process::Stdio;
    let cache = tmp("closed-stderr");
    for tool in ["count", "jit"] {
        let summary = cache.join(format!("{tool}.json"));
        let mut k = Command::new(env!("CARGO_BIN_EXE_kerf"))
            .args([tool, "main", "--json", "-o"])
            .arg(&summary)
            .args(["--", "sh", "-c", "sleep 0.3; echo done"])
            .env("KERF_CACHE_DIR", &cache)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(k.stderr.take());
        let o = k.wait_with_output().unwrap();
        assert!(o.status.success(), "{tool}: {:?}", o.status);
        assert_eq!(String::from_utf8_lossy(&o.stdout), "done\n", "{tool}");
        let v: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        // (`count` says how it stopped, `jit` how the target ended.)
        let end = v["stopped"].as_str().or(v["ended"].as_str()).unwrap_or_default().to_string();
        assert!(end.contains("exited with code 0"), "{tool}: {end}");
    }
}

/// `kerf jit --budget 0` (no root translated), a cache limit under a page and a flush share
/// outside (0, 1] or with no limit are refused as usage errors before anything runs (the
/// first two were accepted: the first killed the program, the second showed "limit 0 KiB"); a script given as the command is said to be one, since the
/// kernel runs its interpreter and that is what kerf instruments.
#[test]
fn jit_refuses_a_budget_of_0_and_a_tiny_cache_and_names_a_script() {
    let cache = tmp("jit-args");
    for (args, needle) in [
        (&["jit", "main", "--budget", "0", "--", "true"][..], "at least 1"),
        (&["jit", "main", "--cache-limit", "10", "--", "true"][..], "at least 4K"),
        (&["jit", "main", "--max-flush-share", "1.5", "--", "true"][..], "at most 1"),
        (&["jit", "main", "--max-flush-share", "0", "--", "true"][..], "above 0"),
        // (A share with no limit to guard was taken and did nothing.)
        (&["jit", "main", "--max-flush-share", "0.5", "--", "true"][..], "--cache-limit"),
    ] {
        let out = kerf(args, &cache);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} was accepted: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
    let script = cache.join("hello.sh");
    std::fs::write(&script, "#!/bin/sh\necho hello\n").unwrap();
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let s = script.to_str().unwrap();
    for tool in ["count", "jit"] {
        let out = kerf(&[tool, "main", "--", s], &cache);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "kerf {tool} on a script: {err}");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
        assert!(err.contains("is a script") && err.contains("/bin/sh"), "kerf {tool}: {err}");
    }
}
