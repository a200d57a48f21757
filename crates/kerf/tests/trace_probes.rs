//! `kerf trace` with probes, on `tests/fixtures/traced.c`: the traced events equal the calls
//! the program itself reports (per thread, in order, with their arguments, strings and return
//! values); bad pointers come back as faults with the program unharmed; filters, streams
//! switched off, losses on a small ring counted exactly against the program's own call count;
//! the Perfetto output read by Perfetto's own proto schema; kerf killed mid-trace; a live trace
//! sent to `kerf collect` over loopback and between two network namespaces.

mod common;

use common::{build_fixture, Reaper};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn dir(test: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace_probes").join(test);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// `kerf trace ARGS` to its end (a launched command keeps stdout; kerf speaks on stderr).
fn kerf_trace(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .arg("trace")
        .args(args)
        .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-cache"))
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .expect("run kerf");
    assert!(
        out.status.success(),
        "kerf trace {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The records of a JSON Lines trace.
fn records(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn of_type<'a>(recs: &'a [Value], t: &str) -> Vec<&'a Value> {
    recs.iter().filter(|r| r["type"] == t).collect()
}

/// `kerf trace -o OUT ARGS -- BIN flood N`: the program's own result checked (every call
/// ran: the sum of 9000 + i), then the trace's records.
fn flood(bin: &Path, n: u64, out: &Path, args: &[&str]) -> Vec<Value> {
    flood_run(bin, n, out, args);
    records(out)
}

/// [`flood`] without reading the output; kerf's stderr (its final table).
fn flood_run(bin: &Path, n: u64, out: &Path, args: &[&str]) -> String {
    let mut all = vec!["-o", out.to_str().unwrap()];
    all.extend_from_slice(args);
    let n_text = n.to_string();
    all.extend(["--", bin.to_str().unwrap(), "flood", &n_text]);
    let run = kerf_trace(&all);
    let sum: u64 = (0..n).map(|i| 9000 + i).sum();
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), sum.to_string());
    String::from_utf8_lossy(&run.stderr).into_owned()
}

/// One call as the program saw it: (k, i, ret, label or "-" for the bad pointer).
type Call = (u64, u64, u64, String);

/// The program's own account, per thread id.
fn truth(stdout: &[u8]) -> HashMap<u64, Vec<Call>> {
    let mut m: HashMap<u64, Vec<Call>> = HashMap::new();
    for line in String::from_utf8_lossy(stdout).lines() {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!(f.len(), 5, "{line}");
        let n = |k: usize| f[k].parse::<u64>().unwrap();
        m.entry(n(0)).or_default().push((n(1), n(2), n(3), f[4].to_string()));
    }
    m
}

#[test]
fn events_equal_the_calls_each_thread_made_in_order() {
    let d = dir("sequence");
    // JSON Lines written while tracing, and a raw trace (packed ring records) converted after;
    // and the largest rings, entries and exits in two streams: 256 thread rings of 262144
    // slots take 8 GiB a stream, so the second stream's rings lie far beyond the ±2 GiB a
    // rip-relative operand reaches from the code.
    let far = ["--ring-slots", "262144", "stream=calls", "stream=returns"];
    for (opt, ext, extra) in [
        ("-O0", "jsonl", None),
        ("-O2", "jsonl", None),
        ("-O2", "kerf-trace", None),
        ("-O2", "jsonl", Some(far)),
    ] {
        let bin = build_fixture("traced", opt, "trace_seq");
        let tag = if extra.is_some() { "-far" } else { "" };
        let traced = d.join(format!("seq{opt}{tag}.{ext}"));
        let (slots, calls, returns) = match extra {
            Some([a, b, c, r]) => (vec![a, b], format!(" {c}"), format!(" {r}")),
            None => (vec![], String::new(), String::new()),
        };
        let entry = format!("step {{k=arg0, i=arg1, label=str(arg2, 16)}}{calls}");
        let exit = format!("step@exits {{ret}}{returns}");
        let mut args = vec!["-o", traced.to_str().unwrap()];
        args.extend(slots);
        args.extend([entry.as_str(), exit.as_str(), "--", bin.to_str().unwrap()]);
        let run = kerf_trace(&args);
        let out = d.join(format!("seq{opt}{tag}-{ext}.jsonl"));
        if ext == "kerf-trace" {
            kerf_trace(&["convert", traced.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        } else {
            std::fs::rename(&traced, &out).unwrap();
        }
        let opt = format!("{opt} {ext}{tag}");
        let want = truth(&run.stdout);
        assert_eq!(want.len(), 4, "four threads");
        let recs = records(&out);
        let mut got: HashMap<u64, Vec<&Value>> = HashMap::new();
        for e in of_type(&recs, "event") {
            got.entry(e["tid"].as_u64().unwrap()).or_default().push(e);
        }
        assert_eq!(got.len(), 4, "{opt}: events of four threads: {:?}", got.keys());
        for (tid, calls) in &want {
            let evs = &got[tid];
            assert_eq!(evs.len(), 2 * calls.len(), "{opt}: thread {tid}");
            for (n, (k, i, ret, label)) in calls.iter().enumerate() {
                let (entry, exit) = (evs[2 * n], evs[2 * n + 1]);
                assert_eq!(entry["kind"], "entry", "{opt} {tid} #{n}: {entry}");
                assert_eq!(exit["kind"], "exit", "{opt} {tid} #{n}: {exit}");
                assert_eq!(entry["args"]["k"].as_u64(), Some(*k), "{entry}");
                assert_eq!(entry["args"]["i"].as_u64(), Some(*i), "{entry}");
                assert_eq!(exit["args"]["ret"].as_u64(), Some(*ret), "{exit}");
                let l = &entry["args"]["label"];
                if label == "-" {
                    assert!(l.to_string().contains("fault"), "{opt} the bad pointer: {l}");
                } else {
                    assert!(
                        l.to_string().contains(&format!("\"{label}\"")),
                        "{opt}: {l} vs {label}"
                    );
                }
                assert!(entry["time_ns"].as_u64() <= exit["time_ns"].as_u64());
            }
        }
        let c = of_type(&recs, "counters");
        let streams = if extra.is_some() { 2 } else { 1 };
        assert_eq!(c.len(), streams, "{opt}: streams");
        for c in &c {
            assert_eq!(c["delivered"].as_u64(), Some(480 / streams as u64), "{opt}: {c}");
            assert_eq!((c["lost"].as_u64(), c["filtered"].as_u64()), (Some(0), Some(0)));
        }
        assert_eq!(of_type(&recs, "summary")[0]["complete"], true);
    }
}

#[test]
fn filters_and_streams_switched_off_record_nothing_they_reject() {
    let d = dir("filters");
    let bin = build_fixture("traced", "-O2", "trace_filter");
    let out = d.join("f.jsonl");
    kerf_trace(&[
        "-o",
        out.to_str().unwrap(),
        "--off",
        "quiet",
        "step {k=arg0, i=arg1} if i < 10 && !(k == 2) || i == 59",
        "step@exits {ret} stream=quiet",
        "--",
        bin.to_str().unwrap(),
    ]);
    let recs = records(&out);
    let events = of_type(&recs, "event");
    // Threads 0, 1, 3 for i < 10, and every thread's i == 59.
    assert_eq!(events.len(), 3 * 10 + 4, "{events:?}");
    for e in &events {
        let (k, i) = (e["args"]["k"].as_u64().unwrap(), e["args"]["i"].as_u64().unwrap());
        assert!(i < 10 && k != 2 || i == 59, "{e}");
        assert_eq!(e["kind"], "entry");
    }
    let c = of_type(&recs, "counters");
    let by: HashMap<&str, &Value> = c.iter().map(|c| (c["stream"].as_str().unwrap(), *c)).collect();
    // The default stream is the module's name: the fixture's file name.
    let main = by.iter().find(|(n, _)| **n != "quiet").map(|(_, c)| *c).expect("two streams");
    assert_eq!(main["filtered"].as_u64(), Some(240 - 34));
    assert_eq!(main["emitted"].as_u64(), Some(240));
    assert_eq!(by["quiet"]["emitted"].as_u64(), Some(0), "a stream switched off records nothing");
}

#[test]
fn a_small_ring_under_a_flood_counts_every_loss() {
    let d = dir("flood");
    let bin = build_fixture("traced", "-O2", "trace_flood");
    // JSON Lines while tracing, and a raw trace (packed ring records) converted after.
    for ext in ["jsonl", "kerf-trace"] {
        let traced = d.join(format!("flood.{ext}"));
        const N: u64 = 3_000_000;
        let out = d.join(format!("flood-{ext}.jsonl"));
        let said = if ext == "kerf-trace" {
            let said = flood_run(&bin, N, &traced, &["--ring-slots", "64", "step {i=arg1}"]);
            kerf_trace(&["convert", traced.to_str().unwrap(), "-o", out.to_str().unwrap()]);
            said
        } else {
            flood_run(&bin, N, &out, &["--ring-slots", "64", "step {i=arg1}"])
        };
        flood_checks(&records(&out), N, ext);
        // The losses are said to be the rings' and what gives them room.
        let hint = said.lines().find(|l| l.contains("events lost to full rings"));
        let hint = hint.unwrap_or_else(|| panic!("{ext}: no word on the losses: {said}"));
        assert!(hint.contains("rings of 64 slots") && hint.contains("--ring-slots"), "{hint}");
        // Decoded while draining (JSON Lines), a raw trace is the way; a raw one is told none.
        let raw_advice = said.contains("-o FILE.kerf-trace then kerf trace convert");
        assert_eq!(raw_advice, ext == "jsonl", "{ext}: {said}");
    }
}

/// The flood's trace: every call an event delivered or lost, the losses reported, in order.
fn flood_checks(recs: &[Value], n: u64, ext: &str) {
    let c = &of_type(recs, "counters")[0];
    let (delivered, lost) = (c["delivered"].as_u64().unwrap(), c["lost"].as_u64().unwrap());
    assert_eq!(delivered + lost, n, "{ext}: every call is an event delivered or lost: {c}");
    assert!(lost > 0, "{ext}: a 64-slot ring drained every 2 ms loses under a flood: {c}");
    assert_eq!(of_type(recs, "event").len() as u64, delivered, "{ext}");
    let reported: u64 = of_type(recs, "loss").iter().map(|l| l["count"].as_u64().unwrap()).sum();
    assert_eq!(reported, lost, "{ext}: the loss records add up to the count");
    // Delivered events keep their order: i goes up.
    let is: Vec<u64> =
        of_type(recs, "event").iter().map(|e| e["args"]["i"].as_u64().unwrap()).collect();
    assert!(is.windows(2).all(|w| w[0] < w[1]), "{ext}: one thread's events in order");
}

/// A child forked while traced runs the probes too, at the same time as its parent and with
/// its parent's thread pointer: its events come out under its own thread id, in its order,
/// and neither process's records are lost or mangled by the other's (each has a ring of its
/// own); every call is an event delivered or lost.
#[test]
fn a_forked_child_traced_beside_its_parent_keeps_both_whole() {
    let d = dir("fork");
    let bin = build_fixture("traced", "-O2", "trace_fork");
    const N: u64 = 300_000;
    let n = N.to_string();
    // JSON Lines written while tracing, and a raw trace converted after (its thread records
    // carry the child's process).
    for ext in ["jsonl", "kerf-trace"] {
        let traced = d.join(format!("fork.{ext}"));
        let run = kerf_trace(&[
            "-o",
            traced.to_str().unwrap(),
            "--ring-slots",
            "16384",
            "step {k=arg0, i=arg1}",
            "--",
            bin.to_str().unwrap(),
            "fork",
            &n,
        ]);
        let out = d.join(format!("fork-{ext}.jsonl"));
        if ext == "kerf-trace" {
            kerf_trace(&["convert", traced.to_str().unwrap(), "-o", out.to_str().unwrap()]);
        } else {
            std::fs::rename(&traced, &out).unwrap();
        }
        // The program's own account: each process's pid and the sum of its results.
        let said = String::from_utf8_lossy(&run.stdout).to_string();
        let pid_of = |who: &str| -> u64 {
            let l = said.lines().find(|l| l.starts_with(who)).unwrap_or_else(|| panic!("{said}"));
            let f: Vec<&str> = l.split(' ').collect();
            let want: u64 = (0..N).map(|i| if who == "child" { 2000 + i } else { 1000 + i }).sum();
            assert_eq!(f[2].parse::<u64>().unwrap(), want, "{who} computed right");
            f[1].parse().unwrap()
        };
        let (parent, child) = (pid_of("parent"), pid_of("child"));
        let recs = records(&out);
        let events = of_type(&recs, "event");
        let c = &of_type(&recs, "counters")[0];
        let (delivered, lost) = (c["delivered"].as_u64().unwrap(), c["lost"].as_u64().unwrap());
        assert_eq!(delivered + lost, 2 * N, "{ext}: every call an event delivered or lost: {c}");
        assert_eq!(events.len() as u64, delivered);
        // Each process's main thread: its thread id is its process id.
        for (k, pid) in [(1, parent), (2, child)] {
            let mine: Vec<&&Value> = events.iter().filter(|e| e["args"]["k"] == k).collect();
            // A flood: most are lost (counted), but each ring delivers at least its slots.
            assert!(mine.len() >= 16384, "{ext} k={k}: {} events of {N}", mine.len());
            assert!(mine.iter().all(|e| e["tid"] == pid), "{ext} k={k}: all under thread {pid}");
            let bad = mine.iter().find(|e| e["pid"] != pid);
            assert!(bad.is_none(), "{ext} k={k}: all under process {pid}: {bad:?}");
            let is: Vec<u64> = mine.iter().map(|e| e["args"]["i"].as_u64().unwrap()).collect();
            assert!(is.windows(2).all(|w| w[0] < w[1]), "{ext} k={k}: in order, each once");
            assert!(is.iter().all(|&i| i < N));
        }
        assert_eq!(
            events.iter().filter(|e| e["args"]["k"] != 1 && e["args"]["k"] != 2).count(),
            0,
            "{ext}: no mangled record"
        );
    }
}

/// 400 forked children one after another, each calling `step` 10 times: more than the 256
/// thread table slots. kerf frees an ended child's slots (the program's code may not: it never
/// signals another process to ask whether its thread lives), so every child's events are
/// delivered, none counted lost for want of a slot, each under the child's process id.
#[test]
fn ended_forked_children_give_their_thread_slots_back() {
    let d = dir("forks");
    let bin = build_fixture("traced", "-O2", "trace_forks");
    let out = d.join("forks.jsonl");
    const N: usize = 400;
    let run = kerf_trace(&[
        "-o",
        out.to_str().unwrap(),
        "step {k=arg0, i=arg1}",
        "--",
        bin.to_str().unwrap(),
        "forks",
        &N.to_string(),
    ]);
    let said = String::from_utf8_lossy(&run.stdout).to_string();
    let children: Vec<u64> =
        said.lines().filter_map(|l| l.strip_prefix("child ")?.parse().ok()).collect();
    assert_eq!(children.len(), N, "{said}");
    let recs = records(&out);
    let c = &of_type(&recs, "counters")[0];
    assert_eq!(c["lost"].as_u64(), Some(0), "no event lost for want of a slot: {c}");
    assert_eq!(c["delivered"].as_u64(), Some(10 * N as u64), "{c}");
    let mut per: HashMap<u64, Vec<u64>> = HashMap::new();
    for e in of_type(&recs, "event") {
        per.entry(e["pid"].as_u64().unwrap()).or_default().push(e["args"]["i"].as_u64().unwrap());
    }
    for (n, pid) in children.iter().enumerate() {
        let is = per.get(pid).unwrap_or_else(|| panic!("no event under child {n}'s pid {pid}"));
        assert_eq!(is, &vec![n as u64; 10], "child {n} (pid {pid})");
    }
}

/// Sixteen threads on this machine's CPUs, each calling between turns of a busy loop, are
/// preempted anywhere, also in the middle of writing a record: the trace still comes out in
/// one time order (written raw, converted after, as a high-rate trace would be). With the
/// time read before the reservation and no cut for records being written, three runs here
/// (the suite running beside them) put 16 to 21 of the 960 k events up to 47 ms out of
/// order.
#[test]
fn preempted_writers_leave_the_trace_in_time_order() {
    let d = dir("order");
    let bin = build_fixture("traced", "-O2", "trace_order");
    let (threads, calls) = (16u64, 60_000u64);
    let raw = d.join("order.kerf-trace");
    let run = kerf_trace(&[
        "-o",
        raw.to_str().unwrap(),
        "--ring-slots",
        "16384",
        "step {k=arg0, i=arg1}",
        "--",
        bin.to_str().unwrap(),
        "spin",
        &threads.to_string(),
        &calls.to_string(),
        "3000",
    ]);
    let want: u64 = (0..threads).map(|k| (0..calls).map(|i| k * 1000 + i).sum::<u64>()).sum();
    assert_eq!(String::from_utf8_lossy(&run.stdout).trim(), want.to_string());
    let out = d.join("order.jsonl");
    kerf_trace(&["convert", raw.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    // About a million records: the three numbers of each event by a plain scan, not a
    // JSON parse of every line.
    let text = std::fs::read_to_string(&out).unwrap();
    let num = |line: &str, key: &str| -> u64 {
        let at = line.find(key).unwrap_or_else(|| panic!("{key} in {line}")) + key.len();
        let digits = line[at..].split(|c: char| !c.is_ascii_digit()).next().unwrap();
        digits.parse().unwrap()
    };
    let mut events = Vec::new();
    let mut counters = None;
    for line in text.lines() {
        if line.contains(r#""type":"event""#) {
            events.push((num(line, r#""time_ns":"#), num(line, r#""k":"#), num(line, r#""i":"#)));
        } else if line.contains(r#""type":"counters""#) {
            counters = Some(serde_json::from_str::<Value>(line).unwrap());
        }
    }
    let c = counters.expect("a counters record");
    let (delivered, lost) = (c["delivered"].as_u64().unwrap(), c["lost"].as_u64().unwrap());
    assert_eq!(delivered + lost, threads * calls, "{c}");
    assert_eq!(events.len() as u64, delivered);
    assert!(delivered > threads * calls / 2, "most delivered: {c}");
    let late: Vec<(usize, u64)> = events
        .windows(2)
        .enumerate()
        .filter(|(_, w)| w[1].0 < w[0].0)
        .map(|(k, w)| (k + 1, w[0].0 - w[1].0))
        .collect();
    assert!(late.is_empty(), "events out of time order (index, ns early): {late:?}");
    // Each thread's own events in its order.
    let mut next: HashMap<u64, u64> = HashMap::new();
    for &(_, k, i) in &events {
        let n = next.entry(k).or_default();
        assert!(i >= *n, "thread {k}: {i} after {}", *n);
        *n = i + 1;
    }
}

/// A packed (raw) trace decodes nothing while tracing, so it cannot name threads by their
/// events: four threads that start after kerf's first look at the process, name themselves
/// and live some 50 ms (less than /proc's 100 ms poll; the last 30 idle, so that a loaded
/// machine still gives kerf a drain while they live) are named when their rings get them as
/// owners, and every event carries its thread's name. Before, all showed the process's.
#[test]
fn short_lived_threads_are_named_in_a_packed_trace() {
    let d = dir("names");
    let bin = build_fixture("traced", "-O2", "trace_names");
    let raw = d.join("names.kerf-trace");
    let args = [bin.to_str().unwrap(), "spin", "4", "2000", "3000", "30"];
    let mut all = vec!["-o", raw.to_str().unwrap(), "step {k=arg0}", "--"];
    all.extend(args);
    kerf_trace(&all);
    let out = d.join("names.jsonl");
    kerf_trace(&["convert", raw.to_str().unwrap(), "-o", out.to_str().unwrap()]);
    let recs = records(&out);
    let events = of_type(&recs, "event");
    assert_eq!(events.len(), 4 * 2000);
    for e in events {
        assert_eq!(e["comm"], format!("spin{}", e["args"]["k"]), "{e}");
    }
}

#[test]
fn perfetto_output_has_a_slice_per_call() {
    let d = dir("perfetto");
    let bin = build_fixture("traced", "-O2", "trace_perfetto");
    let out = d.join("t.perfetto-trace");
    kerf_trace(&[
        "-o",
        out.to_str().unwrap(),
        "step {k=arg0}",
        "step@exits {ret}",
        "--",
        bin.to_str().unwrap(),
    ]);
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../tools/tests/trace/perfetto_check.py");
    let python = std::env::var("KERF_PYTHON").unwrap_or_else(|_| "python3".into());
    let check = Command::new(&python).arg(&script).arg(&out).output().expect("python3");
    assert!(check.status.success(), "{}", String::from_utf8_lossy(&check.stderr));
    let v: Value = serde_json::from_slice(&check.stdout).expect("the checker's JSON");
    let slices = v["slices"].as_array().expect("slices");
    assert_eq!(slices.len(), 240, "a slice per call");
    assert_eq!(v["threads"].as_object().map(|t| t.len()), Some(4), "a track per thread: {v}");
}

#[test]
fn kerf_killed_mid_trace_leaves_the_program_running_correctly() {
    let bin = build_fixture("traced", "-O2", "trace_kill");
    const N: u64 = 400_000_000;
    let prog =
        Command::new(&bin).args(["flood", &N.to_string()]).stdout(Stdio::piped()).spawn().unwrap();
    let _reap = Reaper(prog.id() as i32);
    let pid = prog.id().to_string();
    let (mut k, _line) = common::spawn_kerf("trace", &["-p", &pid, "step {i=arg1}"], "trace-cache");
    std::thread::sleep(std::time::Duration::from_millis(300));
    k.kill().unwrap();
    k.wait().unwrap();
    let out = prog.wait_with_output().unwrap();
    assert!(out.status.success(), "the program survived kerf's death: {:?}", out.status);
    let sum: u64 = (0..N).map(|i| 9000 + i).sum();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), sum.to_string());
}

#[test]
fn a_stream_switched_off_through_the_control_file_stops_recording() {
    let d = dir("control");
    let bin = build_fixture("traced", "-O2", "trace_control");
    let out = d.join("c.jsonl");
    let control = d.join("control");
    // Applied at the reader's first look at the file, 100 ms after the probes went in.
    std::fs::write(&control, "off s\n").unwrap();
    const N: u64 = 200_000_000;
    let ctl = control.to_str().unwrap();
    let recs = flood(
        &bin,
        N,
        &out,
        &["--control", ctl, "--ring-slots", "16384", "step {i=arg1} stream=s"],
    );
    let c = &of_type(&recs, "counters")[0];
    let emitted = c["emitted"].as_u64().unwrap();
    assert!(emitted > 0, "on at first: {c}");
    assert!(emitted < N, "off after the control line: nothing more recorded or counted: {c}");
    let last = of_type(&recs, "event").last().map(|e| e["args"]["i"].as_u64().unwrap());
    assert!(last < Some(N - 1), "the last calls were not recorded: {last:?}");
}

#[test]
fn a_live_trace_sent_to_a_collector_arrives_whole() {
    send_and_collect("send", None);
}

/// The same between two network namespaces the test makes (a veth pair, 10.231.18.0/24): the
/// collector listens in one, kerf traces the program in the other, whose only way to the
/// collector is the pair.
#[test]
fn a_live_trace_crosses_network_namespaces() {
    let ns = Netns::new();
    send_and_collect("send_netns", Some(&ns));
}

/// Two network namespaces joined by a veth pair: `names[0]` at 10.231.18.1, `names[1]` at
/// .2; deleted on drop.
struct Netns {
    names: [String; 2],
}

impl Netns {
    fn new() -> Netns {
        let ip = |args: &[&str]| {
            let o = Command::new("ip").args(args).output().expect("ip (Debian package iproute2)");
            assert!(o.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&o.stderr));
        };
        let p = std::process::id();
        let n = Netns { names: [format!("kerf-ta-{p}"), format!("kerf-tb-{p}")] };
        let veth = [format!("kta{p}"), format!("ktb{p}")];
        for ns in &n.names {
            ip(&["netns", "add", ns]);
        }
        ip(&["link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1]]);
        for (i, ns) in n.names.iter().enumerate() {
            ip(&["link", "set", &veth[i], "netns", ns]);
            ip(&["-n", ns, "addr", "add", &format!("10.231.18.{}/24", i + 1), "dev", &veth[i]]);
            ip(&["-n", ns, "link", "set", &veth[i], "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        n
    }

    /// `cmd` run in namespace `i` (`ip netns exec`).
    fn exec(&self, i: usize, cmd: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.names[i]]).arg(cmd);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

/// `kerf collect` and `kerf trace --send` of the fixture's 480 events (4 threads, 60 calls,
/// entries and exits), on loopback or across `ns`; the collected trace holds them all.
fn send_and_collect(test: &str, ns: Option<&Netns>) {
    use std::io::BufRead;
    let d = dir(test);
    // A binary of its own per test: two tests linking one path race (the linker makes the
    // file executable only at its end, and an exec before that is refused with EACCES).
    let bin = build_fixture("traced", "-O2", &format!("trace_{test}"));
    let collected = d.join("all.kerf-trace");
    let kerf = Path::new(env!("CARGO_BIN_EXE_kerf"));
    let (mut collector, listen) = match ns {
        None => (Command::new(kerf), "127.0.0.1:0"),
        Some(ns) => (ns.exec(0, kerf), "10.231.18.1:0"),
    };
    let mut collector = collector
        .args(["collect", "--listen", listen, "-o", collected.to_str().unwrap()])
        .args(["--senders", "1"])
        .stderr(Stdio::piped())
        .spawn()
        .expect("kerf collect");
    let _reap = Reaper(collector.id() as i32);
    let mut err = std::io::BufReader::new(collector.stderr.take().expect("stderr"));
    let mut line = String::new();
    err.read_line(&mut line).expect("the collector says where it listens");
    let addr = line.split_whitespace().nth(2).expect("collecting on ADDR").to_string();
    let args = [
        "trace",
        "--send",
        &addr,
        "step {k=arg0, i=arg1, label=str(arg2, 16)}",
        "step@exits {ret}",
        "--",
        bin.to_str().unwrap(),
    ];
    let mut sender = match ns {
        None => Command::new(kerf),
        Some(ns) => ns.exec(1, kerf),
    };
    let run = sender
        .args(args)
        .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-cache"))
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .expect("run kerf");
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "kerf trace --send failed: {said}");
    assert!(said.contains("sent to") && said.contains("480 events, 0 dropped"), "{said}");
    assert!(collector.wait().unwrap().success());
    let out = d.join("all.jsonl");
    let conv = Command::new(kerf)
        .args(["trace", "convert", collected.to_str().unwrap(), "-o", out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(conv.status.success(), "{}", String::from_utf8_lossy(&conv.stderr));
    let recs = records(&out);
    assert_eq!(of_type(&recs, "event").len(), 480);
    let c = &of_type(&recs, "counters")[0];
    assert_eq!((c["delivered"].as_u64(), c["lost"].as_u64()), (Some(480), Some(0)), "{c}");
    // The strings and faults went over the wire too.
    let labels: Vec<String> = of_type(&recs, "event")
        .iter()
        .filter(|e| e["kind"] == "entry")
        .map(|e| e["args"]["label"].to_string())
        .collect();
    assert_eq!(labels.iter().filter(|l| l.contains("fault")).count(), 4 * 6);
    assert_eq!(labels.iter().filter(|l| l.as_str() == "\"edge\"").count(), 4 * 6);
}

#[test]
fn memory_captures_are_refused_under_a_seccomp_filter() {
    let bin = build_fixture("traced", "-O2", "trace_seccomp");
    let mut cmd = Command::new(&bin);
    cmd.arg("seccomp");
    let (mut prog, pid, _out) = common::start_ready(cmd);
    let _reap = Reaper(pid);
    let kerf = |probe: &str| {
        Command::new(env!("CARGO_BIN_EXE_kerf"))
            .args(["trace", "-p", &pid.to_string(), "--duration", "0.5", probe])
            .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-cache"))
            .output()
            .unwrap()
    };
    let refused = kerf("step {l=str(arg2)}");
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && said.contains("runs under seccomp"), "{said}");
    assert!(!said.contains("spliced"), "refused before anything is done: {said}");
    let regs = kerf("step {k=arg0}");
    assert!(regs.status.success(), "{}", String::from_utf8_lossy(&regs.stderr));
    assert!(String::from_utf8_lossy(&regs.stdout).contains("step k=8"));
    assert!(prog.try_wait().unwrap().is_none(), "the program runs on");
}

/// `FUNC@blocks` traces every block of a function as a point of its own (`worker+0x2d`), and
/// how often each ran equals `kerf count`'s counts of the same blocks (the program is the
/// same each run).
#[test]
fn block_events_name_their_blocks_and_match_kerf_count() {
    let d = dir("blocks");
    let bin = build_fixture("traced", "-O2", "trace_blocks");
    let out = d.join("b.jsonl");
    kerf_trace(&["-o", out.to_str().unwrap(), "worker@blocks", "--", bin.to_str().unwrap()]);
    let mut traced: HashMap<String, u64> = HashMap::new();
    for e in of_type(&records(&out), "event") {
        *traced.entry(e["point"].as_str().unwrap().to_string()).or_default() += 1;
    }
    assert!(traced.len() > 3, "several blocks ran: {traced:?}");
    assert!(traced.keys().all(|p| p.starts_with("worker+0x")), "{traced:?}");
    let counted = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["count", "--json", "worker@blocks", "--"])
        .arg(&bin)
        .env("KERF_CACHE_DIR", PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("trace-cache"))
        .output()
        .unwrap();
    assert!(counted.status.success(), "{}", String::from_utf8_lossy(&counted.stderr));
    // kerf count's JSON is the last line of stderr (a launched command keeps stdout).
    let err = String::from_utf8_lossy(&counted.stderr);
    let v: Value = serde_json::from_str(err.lines().last().unwrap()).unwrap();
    let mut want: HashMap<String, u64> = HashMap::new();
    for p in v["points"].as_array().unwrap() {
        let n = p["count"].as_u64().unwrap();
        if n > 0 {
            want.insert(p["point"].as_str().unwrap().to_string(), n);
        }
    }
    assert_eq!(traced, want);
}

/// `ret` read at exits that are a tail call's jump is no return value (the function jumped to
/// returns it later): kerf says so, naming one, and not for a function whose exits are
/// `ret`s. (A user read `ret=4` at every exit of liblzma's `lzma_crc64`, a `jmp` through its
/// GOT slot.)
#[test]
fn ret_at_a_tail_calls_jump_is_said_to_be_no_return_value() {
    let bin = build_fixture("tailcall", "-O2", "trace_tail_ret");
    let d = dir("tail_ret");
    let out = d.join("t.jsonl");
    let stderr_of = |line: &str| {
        let o = kerf_trace(&[line, "-o", out.to_str().unwrap(), "--", bin.to_str().unwrap()]);
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let err = stderr_of("tail_plain@exits {ret}");
    let warned: Vec<&str> = err.lines().filter(|l| l.contains("a tail call's jump")).collect();
    assert_eq!(warned.len(), 1, "{err}");
    assert!(warned[0].contains("tail_plain+0x"), "{err}");
    let err = stderr_of("leaf_mix@exits {ret}");
    assert!(!err.contains("a tail call's jump"), "{err}");
}

/// Records at the exits of glibc's `swapcontext`, which `ret`s into the next context with its
/// registers loaded (`coroutines.c`): the program runs unchanged and every exit is recorded.
/// The record's code took `rdi`, dead at a plain return, for scratch: a coroutine's first
/// entry got a wrong argument, and the program died of SIGSEGV.
#[test]
fn records_at_swapcontexts_exits_leave_the_coroutines_alone() {
    let bin = build_fixture("coroutines", "-O2", "trace_coroutines");
    let expected = Command::new(&bin).output().unwrap();
    let d = dir("coroutines");
    let out = d.join("t.jsonl");
    let o = kerf_trace(
        &["libc:swapcontext@exits", "-o", out.to_str().unwrap(), "--"]
            .into_iter()
            .chain([bin.to_str().unwrap()])
            .collect::<Vec<_>>(),
    );
    assert_eq!(o.stdout, expected.stdout, "{}", String::from_utf8_lossy(&o.stderr));
    // 603 switches by `run` and 600 by the coroutines; the three ends go through `setcontext`.
    let events = records(&out).iter().filter(|r| r["type"] == "event").count();
    assert_eq!(events, 1203);
}
