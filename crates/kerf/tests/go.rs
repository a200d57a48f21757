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
