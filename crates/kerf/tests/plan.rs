//! `kerf analyze --plan`: kerf count's splice planner run offline. Code no splice may touch is
//! refused with its reason even where a symbol makes a function of it (a debug file names
//! glibc's `__restore_rt`); and the offline plan is the plan `kerf count` makes live. Needs gcc
//! and root (ptrace) for the live comparison.

mod common;

use serde_json::Value;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

fn plan(bin: &Path, specs: &[&str]) -> Value {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kerf"));
    cmd.args(["analyze", "--json", "--no-cache"]).arg(bin);
    for s in specs {
        cmd.args(["--plan", s]);
    }
    let o = cmd.output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    v["plan"].clone()
}

/// Per point label: (kind, reason).
fn kinds(points: &Value) -> BTreeMap<String, (String, String)> {
    points
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let label = p["point"].as_str().unwrap().to_string();
            let reason = p["reason"].as_str().unwrap_or("").to_string();
            (label, (p["kind"].as_str().unwrap().to_string(), reason))
        })
        .collect()
}

#[test]
fn code_never_spliced_is_refused_with_its_reason() {
    let bin = common::build_fixture("unwind_overlap", "-O2", "plan");
    let p = plan(&bin, &["tramp_code", "hidden_code", "plain_fn", "main"]);
    let k = kinds(&p["points"]);
    assert_eq!(k["tramp_code"].0, "refused", "{p}");
    assert!(k["tramp_code"].1.contains("signal trampoline"), "{p}");
    assert_eq!(k["hidden_code"].0, "refused", "{p}");
    assert!(k["hidden_code"].1.contains("inside the padding instruction"), "{p}");
    // The code around them is spliced as usual.
    assert_ne!(k["plain_fn"].0, "refused", "{p}");
    assert_ne!(k["main"].0, "refused", "{p}");
    assert_eq!(p["refused"], 2, "{p}");
}

#[test]
fn offline_plan_is_the_live_plan() {
    let bin = common::build_fixture("counted", "-O2", "plan");
    let specs = ["branchy", "switchy", "leaf", "spin_point", "recurse@blocks", "branchy@exits"];
    let offline = kinds(&plan(&bin, &specs)["points"]);
    let mut c = Command::new(&bin).args(["2", "1000"]).stdout(Stdio::piped()).spawn().unwrap();
    let pid = c.id() as i32;
    let _reaper = common::Reaper(pid);
    let mut out = BufReader::new(c.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "no ready line");
    }
    let mut args = vec!["-p".to_string(), pid.to_string(), "--json".into()];
    args.extend(["--duration".to_string(), "0.2".into()]);
    args.extend(specs.iter().map(|s| s.to_string()));
    let (k, _) = common::spawn_count(&args, "plan-cache");
    let ko = k.wait_with_output().unwrap();
    assert!(ko.status.success(), "{}", String::from_utf8_lossy(&ko.stderr));
    // The fixture waits for a "go" it never gets: it has done its part.
    let _ = c.kill();
    let _ = c.wait();
    let v: Value = serde_json::from_slice(&ko.stdout).unwrap();
    let live: BTreeMap<String, String> = v["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["point"].as_str().unwrap().to_string(), p["kind"].as_str().unwrap().into()))
        .collect();
    assert!(live.len() >= 6, "{v}");
    for (label, kind) in &live {
        let off = offline.get(label).unwrap_or_else(|| panic!("{label} not planned: {offline:?}"));
        assert_eq!(&off.0, kind, "{label}: offline {off:?}, live {kind}");
    }
}

#[test]
fn function_list_names_every_function_and_its_entry_splice() {
    let bin = common::build_fixture("counted", "-O2", "functions");
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["analyze", "--json", "--no-cache", "--functions"])
        .arg(&bin)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let list = v["function_list"].as_array().expect("function_list");
    assert_eq!(list.len() as u64, v["functions"].as_u64().unwrap(), "one entry per function");
    // The same splice as a plan of every entry gives, function by function.
    let planned = kinds(&plan(&bin, &["*"])["points"]);
    for f in list {
        let name = f["name"].as_str().unwrap();
        for key in ["entry", "size", "blocks", "entry_splice"] {
            assert!(!f[key].is_null(), "{name}: no {key} in {f}");
        }
        // `*` leaves PLT stubs out, as every glob does.
        if name.ends_with("@plt") {
            continue;
        }
        assert_eq!(f["entry_splice"], planned[name].0.as_str(), "{f}");
    }
    let find = |n: &str| list.iter().find(|f| f["name"] == n).unwrap_or_else(|| panic!("{n}"));
    for n in ["branchy", "switchy", "leaf", "spin_point", "main"] {
        assert_eq!(find(n)["entry_splice"], "jump5", "{}", find(n));
        assert!(find(n)["blocks"].as_u64().unwrap() >= 1);
    }
    // The text form has a line per function.
    let o = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["analyze", "--no-cache", "--functions"])
        .arg(&bin)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&o.stdout);
    assert_eq!(text.lines().count(), list.len() + 1, "{text}");
    assert!(text.lines().any(|l| l.ends_with(" branchy") && l.contains("jump5")), "{text}");
}
