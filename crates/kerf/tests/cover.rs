//! `kerf cover` on `tests/fixtures/covered.c`, whose arguments decide which code runs: the
//! covered set equals the blocks `kerf count @blocks` counts on the same input (spliced the
//! usual way and as traps), the program's output is the same as without kerf, the lcov file
//! marks the source lines the fixture's markers name and `genhtml` renders it, the drcov file
//! holds the covered blocks, runs merge, and attaching mid-run, the probes go out as their
//! blocks run, and killing kerf mid-run leaves the program running correctly.

mod common;

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn tmp() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
}

/// The fixture built with gcc -O2 -g (line tables for lcov) under a name of the test's own.
fn fixture(tag: &str) -> PathBuf {
    let dir = tmp().join("fixtures");
    std::fs::create_dir_all(&dir).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/covered.c");
    let out = dir.join(format!("covered-{tag}"));
    let st = Command::new("gcc")
        .args(["-O2", "-g", "-pthread", "-o"])
        .arg(&out)
        .arg(&src)
        .status()
        .expect("gcc is needed (Debian package gcc)");
    assert!(st.success(), "gcc failed on covered.c");
    out
}

fn source() -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/covered.c");
    std::fs::read_to_string(src).unwrap()
}

/// The line numbers of the fixture's `// COVER:name` markers.
fn markers() -> BTreeMap<String, u32> {
    (source().lines().enumerate())
        .filter_map(|(i, l)| Some((l.split("// COVER:").nth(1)?.trim().to_string(), i as u32 + 1)))
        .collect()
}

/// `kerf TOOL ARGS -- PROGRAM WORDS` with its JSON summary in a file: the summary, and the
/// program's stdout.
fn kerf_on(tag: &str, tool: &str, args: &[&str], program: &Path, words: &str) -> (Value, String) {
    let summary = tmp().join(format!("cover-{tag}.json"));
    let _ = std::fs::remove_file(&summary);
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .arg(tool)
        .args(["--json", "-o"])
        .arg(&summary)
        .args(args)
        .arg("--")
        .arg(program)
        .arg(words)
        .env("KERF_CACHE_DIR", tmp().join("cover-cache"))
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "kerf {tool} {args:?} failed: {err}");
    let v = serde_json::from_slice(&std::fs::read(&summary).unwrap_or_default())
        .unwrap_or_else(|e| panic!("no summary ({e}): {err}"));
    (v, String::from_utf8_lossy(&o.stdout).into_owned())
}

fn plain(program: &Path, args: &[&str]) -> String {
    let o = Command::new(program).args(args).output().unwrap();
    assert!(o.status.success());
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn hex(s: &Value) -> u64 {
    u64::from_str_radix(s.as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
}

/// The main program's module in a cover summary.
fn program_module<'a>(v: &'a Value, program: &Path) -> &'a Value {
    let name = program.display().to_string();
    (v["coverage"]["modules"].as_array().unwrap().iter())
        .find(|m| m["path"] == name.as_str())
        .unwrap_or_else(|| panic!("no module {name} in {v}"))
}

/// Per block of the program, `function+0xOFF` (as `kerf count` labels blocks) → covered.
fn cover_blocks(v: &Value, program: &Path) -> BTreeMap<String, bool> {
    let m = program_module(v, program);
    let mut funs: Vec<(u64, String)> = (m["functions"].as_array().unwrap().iter())
        .map(|f| (hex(&f["entry"]), f["name"].as_str().unwrap().to_string()))
        .collect();
    funs.sort();
    (m["blocks"].as_array().unwrap().iter())
        .map(|b| {
            let a = hex(&b["addr"]);
            let k = funs.partition_point(|f| f.0 <= a) - 1;
            (format!("{}+{:#x}", funs[k].1, a - funs[k].0), b["covered"].as_bool().unwrap())
        })
        .collect()
}

/// The fixture's words for the equality tests: alpha's even branch, beta in threads, the
/// signal handler, a forked child, the switch (not alpha's odd branch, nor never_called).
const WORDS: &str = "absfc";

#[test]
fn the_covered_set_is_the_blocks_that_ran() {
    let program = fixture("set");
    let expected = plain(&program, &[WORDS]);
    for kind in [None, Some("trap")] {
        let force: Vec<&str> = kind.map(|k| vec!["--force-kind", k]).unwrap_or_default();
        let tag = kind.unwrap_or("any");
        let name = program.file_name().unwrap().to_str().unwrap();
        let spec = format!("{name}:*@blocks");
        let mut args = force.clone();
        args.push(&spec);
        let (counted, out1) = kerf_on(&format!("count-{tag}"), "count", &args, &program, WORDS);
        let mut args = force.clone();
        args.push(name);
        let (covered, out2) = kerf_on(&format!("cover-{tag}"), "cover", &args, &program, WORDS);
        assert_eq!(out1, expected, "kerf count changed the output");
        assert_eq!(out2, expected, "kerf cover changed the output");
        // Every block kerf count counted is one kerf cover measured, and the ones that ran
        // are exactly the covered ones.
        let ran: BTreeMap<String, bool> = (counted["points"].as_array().unwrap().iter())
            .map(|p| (p["point"].as_str().unwrap().to_string(), p["count"].as_u64().unwrap() > 0))
            .collect();
        let cov = cover_blocks(&covered, &program);
        assert_eq!(cov, ran, "{tag}: covered blocks differ from the blocks counted");
        assert!(cov.values().filter(|c| **c).count() > 20, "{tag}: {cov:?}");
        for (f, should) in
            [("alpha", true), ("beta", true), ("on_usr1", true), ("never_called", false)]
        {
            let any = cov.iter().any(|(k, c)| *c && k.starts_with(&format!("{f}+")));
            assert_eq!(any, should, "{tag}: {f} covered: {any}; {cov:?}");
        }
        // The counts add up: every measurable block is covered or not, and what was taken out
        // plus what is still in is what went in.
        let c = &covered["coverage"];
        let measurable = c["measurable"].as_u64().unwrap();
        let retired = covered["retired"].as_u64().unwrap();
        let left = covered["probes_left"].as_u64().unwrap();
        assert_eq!(retired + left, measurable, "{tag}: {covered}");
        assert!(retired <= c["covered"].as_u64().unwrap(), "{tag}: {covered}");
    }
}

/// A forked child's blocks are covered too: its flags are in the memory kerf shares with the
/// parent, which the child inherits.
#[test]
fn a_forked_childs_blocks_are_covered() {
    let program = fixture("fork");
    let expected = plain(&program, &["fa"]);
    let name = program.file_name().unwrap().to_str().unwrap();
    let (v, out) = kerf_on("fork", "cover", &[name], &program, "fa");
    assert_eq!(out, expected);
    let cov = cover_blocks(&v, &program);
    assert!(cov.iter().any(|(k, c)| *c && k.starts_with("forked_only+")), "{cov:?}");
    let (v, _) = kerf_on("nofork", "cover", &[name], &program, "a");
    let cov = cover_blocks(&v, &program);
    assert!(!cov.iter().any(|(k, c)| *c && k.starts_with("forked_only+")), "{cov:?}");
}

/// A forked child's probes go out as its parent's do: the child of 'F' runs `forked_only`,
/// then waits (up to 10 s) until that function's bytes in its memory are its file's again,
/// and its answer is part of the checksum. Without kerf they are at once. With int3s too.
/// 'D' does it in a grandchild whose parent exits at once: init adopts it, and it is no
/// longer below the target (kerf before looked only there, and left it probed).
#[test]
fn a_forked_childs_probes_go_out_as_its_parents() {
    let program = fixture("fork-out");
    let name = program.file_name().unwrap().to_str().unwrap();
    for words in ["F", "D"] {
        let expected = plain(&program, &[words]);
        for kind in [None, Some("trap")] {
            let tag = format!("{words}-{}", kind.unwrap_or("any"));
            let mut args: Vec<&str> = kind.map(|k| vec!["--force-kind", k]).unwrap_or_default();
            args.push(name);
            let (v, out) = kerf_on(&format!("fork-out-{tag}"), "cover", &args, &program, words);
            let f = &v["forked"];
            assert_eq!(out, expected, "{tag}: the copy kept forked_only's probe: {f}");
            assert!(f["copies"].as_u64().unwrap() >= 1, "{tag}: {f}");
            assert!(f["probes_out"].as_u64().unwrap() >= 1, "{tag}: {f}");
            assert_eq!(f["foreign"], 0, "{tag}: {f}");
            assert_eq!(f["given_up"], 0, "{tag}: {f}");
            let cov = cover_blocks(&v, &program);
            let hit = cov.iter().any(|(k, c)| *c && k.starts_with("forked_only+"));
            assert!(hit, "{tag}: {cov:?}");
        }
    }
}

/// A daemon's launcher exits at once (`covered X`: its grandchild runs on, and runs
/// forked_only a second after the launcher ended): kerf takes the launcher's probes out of
/// the daemon, follows it (attaches, probes it, joins the coverage), and takes its own probes
/// out of it as they are hit, so that the daemon finds forked_only its own code again (the
/// build before left every probe in such a daemon, and ended: redis-server --daemonize yes
/// served SET at a seventh of its rate for good).
#[test]
fn a_daemon_whose_launcher_exits_is_followed_and_left_as_found() {
    let program = fixture("daemon");
    let name = program.file_name().unwrap().to_str().unwrap();
    let expected = plain(&program, &["X"]);
    assert!(expected.contains("daemon: forked_only is its own code"), "{expected}");
    for kind in [None, Some("trap")] {
        let tag = format!("daemon-{}", kind.unwrap_or("any"));
        let mut args: Vec<&str> = kind.map(|k| vec!["--force-kind", k]).unwrap_or_default();
        args.push(name);
        // (The output is read to its end: the daemon's line included.)
        let (v, out) = kerf_on(&tag, "cover", &args, &program, "X");
        assert_eq!(out, expected, "{tag}");
        assert_eq!(v["copies_after_end"], 1, "{tag}: {}", v["target"]);
        assert_eq!(v["target"]["exit_code"], 0, "{tag}: {}", v["target"]);
        assert_eq!(v["programs"].as_array().map(Vec::len), Some(2), "{tag}: {}", v["programs"]);
        // Only the daemon ran forked_only, after its launcher was gone.
        let cov = cover_blocks(&v, &program);
        assert_eq!(cov.get("forked_only+0x0"), Some(&true), "{tag}: {cov:?}");
    }
    // The launcher runs `exec` after the fork (`Xe`: the new program waits 1.5 s): the old
    // program's probes leave the daemon then, kerf follows the exec (not the daemon), and the
    // daemon, which waits for the new program to end, finds forked_only its own code. (Before,
    // kerf forgot the old program's probes at the exec, and the daemon kept them.)
    let expected = plain(&program, &["Xe"]);
    let (v, out) = kerf_on("daemon-exec", "cover", &[name], &program, "Xe");
    let no_pid = |s: &str| -> String {
        s.lines().filter(|l| l.parse::<u32>().is_err()).map(|l| format!("{l}\n")).collect()
    };
    assert_eq!(no_pid(&out), no_pid(&expected));
    assert_eq!(v["copies_after_end"], 1, "{}", v["target"]);
    assert_eq!(v["programs"].as_array().map(Vec::len), Some(2), "{}", v["programs"]);
}

/// A block that starts inside another instruction (a branch over the `lock` prefix of `lock
/// cmpxchg`, as in glibc's malloc) gets no probe: with one there, the locked path ran `lock
/// int3` (or `lock jmp`) and died of SIGILL once the outer block's probe was out. It is listed
/// as not measurable, with the reason.
#[test]
fn a_block_inside_a_locked_instruction_gets_no_probe() {
    let program = fixture("lock");
    let expected = plain(&program, &["lu"]);
    let name = program.file_name().unwrap().to_str().unwrap();
    for kind in [None, Some("trap")] {
        let tag = kind.unwrap_or("any");
        let mut args: Vec<&str> = kind.map(|k| vec!["--force-kind", k]).unwrap_or_default();
        args.push(name);
        let (v, out) = kerf_on(&format!("lock-{tag}"), "cover", &args, &program, "lu");
        assert_eq!(out, expected, "{tag}");
        let modules = v["coverage"]["modules"].as_array().unwrap();
        let left_out: Vec<&Value> = (modules.iter())
            .flat_map(|m| m["not_measurable"].as_array().unwrap())
            .filter(|u| u["function"] == "swap_maybe_locked")
            .collect();
        assert_eq!(left_out.len(), 1, "{tag}: {left_out:?}");
        let why = left_out[0]["reason"].as_str().unwrap();
        assert!(why.contains("inside the instruction"), "{tag}: {why}");
        let cov = cover_blocks(&v, &program);
        // The entry, the locked instruction's block and the `ret` both paths reach.
        let ran: Vec<&str> = (cov.iter())
            .filter(|(k, c)| **c && k.starts_with("swap_maybe_locked+"))
            .map(|(k, _)| k.as_str())
            .collect();
        let want = ["swap_maybe_locked+0x0", "swap_maybe_locked+0x8", "swap_maybe_locked+0xd"];
        assert_eq!(ran, want, "{tag}: {cov:?}");
    }
}

/// After `exec`, kerf follows the process into its new program (here the same file, run with
/// other words), and the coverage of both joins: alpha's even branch ran before, its odd one
/// only after.
#[test]
fn exec_is_followed_into_the_new_program() {
    let program = fixture("exec");
    let expected = plain(&program, &["ae"]);
    let name = program.file_name().unwrap().to_str().unwrap();
    let (v, out) = kerf_on("exec", "cover", &[name], &program, "ae");
    // (The new program prints its pid first.)
    let no_pid = |s: &str| -> String {
        s.lines().filter(|l| l.parse::<u32>().is_err()).map(|l| format!("{l}\n")).collect()
    };
    assert_eq!(no_pid(&out), no_pid(&expected));
    assert_eq!(v["programs"].as_array().map(Vec::len), Some(2), "{}", v["programs"]);
    assert_eq!(v["target"]["exit_code"], 0, "{}", v["target"]);
    let lines = |v: &Value| {
        let info = tmp().join("cover-exec.info");
        let j = tmp().join("cover-exec-in.json");
        std::fs::write(&j, v.to_string()).unwrap();
        let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
            .args(["cover", "--add"])
            .arg(&j)
            .arg("--lcov")
            .arg(&info)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read_to_string(info).unwrap()
    };
    let info = lines(&v);
    let m = markers();
    for (name, hit) in [("alpha_even", 1), ("alpha_odd", 1), ("beta_loop", 0)] {
        assert!(info.contains(&format!("DA:{},{hit}\n", m[name])), "{name}: {info}");
    }
}

#[test]
fn lcov_marks_the_lines_that_ran_and_genhtml_renders_it() {
    let program = fixture("lcov");
    let info = tmp().join("cover-lcov.info");
    let drcov = tmp().join("cover-lcov.drcov");
    let name = program.file_name().unwrap().to_str().unwrap();
    let (v, _) = kerf_on(
        "lcov",
        "cover",
        &["--lcov", info.to_str().unwrap(), "--drcov", drcov.to_str().unwrap(), name],
        &program,
        WORDS,
    );
    let text = std::fs::read_to_string(&info).unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/covered.c");
    let src = std::fs::canonicalize(src).unwrap();
    // The fixture's own record.
    let record = (text.split("end_of_record\n"))
        .find(|r| r.contains(&format!("SF:{}\n", src.display())))
        .unwrap_or_else(|| panic!("no record for {}: {text}", src.display()));
    let da: BTreeMap<u32, u32> = (record.lines())
        .filter_map(|l| l.strip_prefix("DA:"))
        .map(|l| {
            let (a, b) = l.split_once(',').unwrap();
            (a.parse().unwrap(), b.parse().unwrap())
        })
        .collect();
    let m = markers();
    for (name, hit) in [
        ("alpha_even", 1),
        ("alpha_odd", 0),
        ("beta_loop", 1),
        ("handler", 1),
        ("switch_c", 1),
        ("switch_q", 0),
        ("never", 0),
        ("forked", 1),
    ] {
        let line = m[name];
        assert_eq!(da.get(&line), Some(&hit), "line {line} ({name}): {record}");
    }
    assert!(
        record.contains("FNDA:1,alpha\n") && record.contains("FNDA:0,never_called\n"),
        "{record}"
    );
    // genhtml (Debian's lcov) renders it without an error.
    let html = tmp().join("cover-html");
    let _ = std::fs::remove_dir_all(&html);
    let o = Command::new("genhtml")
        .args(["-q", "-o"])
        .arg(&html)
        .arg(&info)
        .output()
        .expect("genhtml is needed (Debian package lcov)");
    assert!(o.status.success(), "genhtml: {}", String::from_utf8_lossy(&o.stderr));
    assert!(html.join("index.html").exists());

    // The drcov file: its module table, and a record per covered block of every module.
    let d = std::fs::read(&drcov).unwrap();
    let head_end = d.windows(5).position(|w| w == b" bbs\n").unwrap() + 5;
    let head = String::from_utf8_lossy(&d[..head_end]);
    let modules = v["coverage"]["modules"].as_array().unwrap();
    assert!(head.starts_with("DRCOV VERSION: 2\n"), "{head}");
    assert!(
        head.contains(&format!("Module Table: version 2, count {}\n", modules.len())),
        "{head}"
    );
    let covered = v["coverage"]["covered"].as_u64().unwrap() as usize;
    assert!(head.contains(&format!("BB Table: {covered} bbs\n")), "{head}");
    assert_eq!(d.len() - head_end, 8 * covered);
    let mut seen = BTreeSet::new();
    for r in d[head_end..].chunks(8) {
        let off = u32::from_le_bytes(r[..4].try_into().unwrap()) as u64;
        let id = u16::from_le_bytes(r[6..8].try_into().unwrap()) as usize;
        let m = &modules[id];
        seen.insert((id, hex(&m["start"]) + off));
    }
    let want: BTreeSet<(usize, u64)> = (modules.iter().enumerate())
        .flat_map(|(id, m)| {
            (m["blocks"].as_array().unwrap().iter())
                .filter(|b| b["covered"] == true)
                .map(move |b| (id, hex(&b["addr"])))
        })
        .collect();
    assert_eq!(seen, want);
}

#[test]
fn runs_merge() {
    let program = fixture("merge");
    let (even, _) = kerf_on("merge-a", "cover", &["covered-merge"], &program, "a");
    let (odd, _) = kerf_on("merge-A", "cover", &["covered-merge"], &program, "A");
    let a = tmp().join("cover-merge-a.json");
    let b = tmp().join("cover-merge-A.json");
    let out = tmp().join("cover-merged.json");
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["cover", "--json", "--add"])
        .arg(&a)
        .arg("--add")
        .arg(&b)
        .arg("-o")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let merged: Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let (e, d, m) = (
        cover_blocks(&even, &program),
        cover_blocks(&odd, &program),
        cover_blocks(&merged, &program),
    );
    assert_eq!(e.len(), m.len());
    for (k, c) in &m {
        assert_eq!(*c, e[k] || d[k], "{k}");
    }
    // Each run covered a branch of alpha the other did not.
    let only = |x: &BTreeMap<String, bool>, y: &BTreeMap<String, bool>| {
        x.iter().filter(|(k, c)| **c && !y[*k] && k.starts_with("alpha+")).count()
    };
    assert!(only(&e, &d) > 0 && only(&d, &e) > 0, "{e:?} {d:?}");
    // A file that is no coverage is refused, naming it.
    let bad = tmp().join("cover-not-json.txt");
    std::fs::write(&bad, "hello\n").unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["cover", "--add"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success() && err.contains("cover-not-json.txt"), "{err}");
}

/// Start the fixture looping for `seconds`; returns it and its pid (its first line).
fn looping(
    program: &Path,
    seconds: &str,
) -> (std::process::Child, i32, std::io::BufReader<std::process::ChildStdout>) {
    use std::io::BufRead;
    let mut c =
        Command::new(program).args([WORDS, seconds]).stdout(Stdio::piped()).spawn().unwrap();
    let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    let pid = line.trim().parse().unwrap();
    (c, pid, out)
}

#[test]
fn attached_mid_run_the_probes_go_as_their_blocks_run() {
    use std::io::Read;
    let program = fixture("attach");
    let expected = plain(&program, &[WORDS]);
    let (mut c, pid, mut out) = looping(&program, "3");
    let summary = tmp().join("cover-attach.json");
    let pid_s = pid.to_string();
    let name = program.file_name().unwrap().to_str().unwrap().to_string();
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["cover", "--json", "--duration", "1.5", "-p", &pid_s, "-o"])
        .arg(&summary)
        .arg(&name)
        .env("KERF_CACHE_DIR", tmp().join("cover-cache"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(c.wait().unwrap().success());
    assert_eq!(rest, expected, "the program's output changed");
    let v: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let cov = cover_blocks(&v, &program);
    // The loop's functions ran after kerf attached; main's start-up blocks did not.
    for f in ["alpha", "beta", "letters", "on_usr1"] {
        assert!(cov.iter().any(|(k, c)| *c && k.starts_with(&format!("{f}+"))), "{f}: {cov:?}");
    }
    // Every covered block ran over and over, long before the end: each one's probe went out,
    // and the others are still in.
    let c = &v["coverage"];
    let (covered, measurable) = (c["covered"].as_u64().unwrap(), c["measurable"].as_u64().unwrap());
    assert_eq!(v["retired"].as_u64(), Some(covered), "{v}");
    assert_eq!(v["probes_left"].as_u64(), Some(measurable - covered), "{v}");
}

#[test]
fn killing_kerf_mid_run_leaves_the_program_running_correctly() {
    use std::io::Read;
    let program = fixture("kill");
    let expected = plain(&program, &[WORDS]);
    // The program and libc: libc's ~80 k blocks take a few seconds to go in.
    let (mut c, pid, mut out) = looping(&program, "20");
    let name = program.file_name().unwrap().to_str().unwrap();
    let (mut k, _) =
        common::spawn_kerf("cover", &["-p", &pid.to_string(), name, "libc"], "cover-cache");
    std::thread::sleep(Duration::from_millis(500));
    k.kill().unwrap();
    k.wait().unwrap();
    let t = Instant::now();
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let st = c.wait().unwrap();
    assert!(st.success(), "{st:?}");
    assert_eq!(rest, expected, "the program's output changed");
    assert!(t.elapsed() < Duration::from_secs(25));
}
