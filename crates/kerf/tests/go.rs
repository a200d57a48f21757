//! A Go program under `kerf count` of every function it has (`tests/fixtures/goroutines.go`):
//! goroutines start, get preempted by signals and end after the splices went in, returning
//! into `runtime.goexit`+1 where no call leads; the program must finish with the output of
//! an uninstrumented run. (A jump5 over goexit's `nop` and call killed such a program:
//! "unexpected fault address".)

mod common;

#[path = "../../session/tests/common/go.rs"]
mod go;

use common::Reaper;
use std::io::Read;
use std::process::{Command, Stdio};

#[test]
fn goroutines_end_and_resume_normally_under_every_probe() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kerf-go");
    let bin = go::build_go("goroutines", &dir);
    // Work per goroutine: most sites in Go code are traps (see README), each hit a signal, so
    // the fixture's default would take minutes a round under the probes.
    let iterations = "2000";
    let plain = Command::new(&bin).args(["auto", iterations]).output().unwrap();
    assert!(plain.status.success());
    let want =
        String::from_utf8_lossy(&plain.stdout).lines().skip(2).collect::<Vec<_>>().join("\n");
    for round in 0..3 {
        let started = std::time::Instant::now();
        let mut cmd = Command::new(&bin);
        cmd.arg(iterations).stderr(Stdio::piped());
        let (mut c, pid, out) = common::start_ready(cmd);
        let _reap = Reaper(pid);
        let spec = "goroutines:*".to_string();
        let (mut k, line) =
            common::spawn_count(&["-p".to_string(), pid.to_string(), spec], "go-cache");
        // The report always names the trap count; in Go code it is never 0 (runtime.goexit's
        // one-byte `nop` takes no jump).
        let traps: usize = line
            .split(" trap")
            .next()
            .and_then(|l| l.rsplit([' ', '(']).next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no trap count in {line}"));
        assert!(traps > 0, "no trap site in Go code: {line}");
        // Start the goroutines now that every probe is in.
        assert!(Command::new("kill").args(["-USR1", &pid.to_string()]).status().unwrap().success());
        let got = common::rest(out);
        let mut err = String::new();
        c.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        let st = c.wait().unwrap();
        assert!(st.success(), "round {round}: the Go program died: {st}; {err}");
        assert_eq!(got.trim_end(), want.trim_end(), "round {round}: output differs; {err}");
        // kerf sees the target exit and ends by itself, printing its table.
        let mut table = String::new();
        k.stdout.take().unwrap().read_to_string(&mut table).unwrap();
        assert!(table.contains("runtime.goexit1"), "{table}");
        let kst = k.wait().unwrap();
        assert!(kst.success(), "round {round}: kerf count: {kst}");
        eprintln!("round {round}: {:.1} s", started.elapsed().as_secs_f64());
    }
}

/// A goroutine spinning without a call while another must run (`tests/fixtures/gospin.go`,
/// one processor) under `kerf jit main.main`: Go's preemption signal looks the interrupted PC
/// up in Go's tables, and a cache address is none of Go's, so the program hung under every
/// plugin until kerf hooked the program's signal handlers to see original addresses. It ends
/// as it does natively, the preempted thread going on in the cache where its handler sent it.
#[test]
fn a_goroutine_spinning_in_the_jit_cache_is_preempted() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("kerf-go");
    let bin = go::build_go("gospin", &dir);
    let plain = Command::new(&bin).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "done true\n");
    let json = dir.join("gospin.json");
    for plugin in ["blocks", "none"] {
        let mut k = Command::new(env!("CARGO_BIN_EXE_kerf"))
            .args(["jit", "main.main", "--plugin", plugin, "--json", "-o"])
            .arg(&json)
            .arg("--")
            .arg(&bin)
            .env("KERF_CACHE_DIR", dir.join("cache"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while k.try_wait().unwrap().is_none() {
            if std::time::Instant::now() > deadline {
                let _ = k.kill();
                panic!("--plugin {plugin}: the Go program still ran after 60 s (natively 0.03 s)");
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        let (mut out, mut err) = (String::new(), String::new());
        k.stdout.take().unwrap().read_to_string(&mut out).unwrap();
        k.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        assert!(k.wait().unwrap().success(), "--plugin {plugin}: {err}");
        assert_eq!(out, "done true\n", "--plugin {plugin}: {err}");
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let g = &v["jit"]["signals"];
        assert!(
            g["hooked"]
                .as_array()
                .unwrap()
                .iter()
                .any(|h| h.as_str().unwrap().starts_with("runtime.sigtramp")),
            "{g}"
        );
        assert!(g["moved"].as_u64().unwrap() >= 1, "--plugin {plugin}: {g}");
        assert_eq!(v["jit"]["escapes"], 0, "--plugin {plugin}: {}", v["jit"]);
    }
}
