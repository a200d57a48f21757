//! `--serve`: Debian's Prometheus server scrapes kerf's OpenMetrics endpoint while `kerf time
//! --virtual` runs on tests/fixtures/virtual.c, and a PromQL query answers with kerf's numbers:
//! the calls the program made, and the virtual time kerf's own summary reports; per thread
//! (`--threads`), each worker's calls, and their virtual times summed. The program
//! lingers after its calls so that the counts are final while Prometheus scrapes them.

mod common;

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A port nobody listens on now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// GET `path` from 127.0.0.1:`port`: the body, if the server answered.
fn get(port: u16, path: &str) -> Option<String> {
    let mut c = TcpStream::connect(("127.0.0.1", port)).ok()?;
    c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(c, "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n").ok()?;
    let mut s = String::new();
    c.read_to_string(&mut s).ok()?;
    Some(s.split_once("\r\n\r\n")?.1.to_string())
}

/// The value of PromQL `query` (an instant vector of one series), once Prometheus has it.
fn query(port: u16, query: &str) -> Option<f64> {
    let q: String = query
        .bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect();
    let body = get(port, &format!("/api/v1/query?query={q}"))?;
    let v: Value = serde_json::from_str(&body).ok()?;
    v["data"]["result"][0]["value"][1].as_str()?.parse().ok()
}

struct Kill(Child);
impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn prometheus_scrapes_kerfs_numbers() {
    let prometheus = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
        .into_iter()
        .find(|p| std::path::Path::new(p).exists())
        .expect("Prometheus is needed (Debian package prometheus; scripts/deps.sh installs it)");
    let bin = common::build_fixture("virtual", "-O2", "prometheus");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("prometheus");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (kerf_port, prom_port) = (free_port(), free_port());
    let steal = common::Steal::now();
    let summary = dir.join("summary.json");
    let kerf = Command::new(env!("CARGO_BIN_EXE_kerf"))
        .args(["time", "--virtual", "--threads", "--interval", "0.2", "--json", "-o"])
        .arg(&summary)
        .args(["--serve", &format!("127.0.0.1:{kerf_port}"), "work", "busy", "--"])
        .arg(&bin)
        // 40 calls of work in about half a second, then 12 s for Prometheus to start and
        // scrape the final counts.
        .args(["2", "20", "12"])
        .env("KERF_CACHE_DIR", dir.join("cache"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut kerf = Kill(kerf);
    // The program's output as it comes, and the share of time the host stole while its calls
    // ran: taken when it prints its totals, not at the end, since the 12 s it lingers after
    // them would dilute a burst of steal during the half second that counts.
    let stdout = kerf.0.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let (mut lines, mut stolen) = (Vec::new(), None);
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("calls ") {
                stolen = Some(steal.virtual_limit(1.05));
            }
            lines.push(line);
        }
        (lines, stolen)
    });
    let config = dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: kerf\n    \
             static_configs:\n      - targets: ['127.0.0.1:{kerf_port}']\n"
        ),
    )
    .unwrap();
    let prom = Command::new(prometheus)
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.tsdb.path={}", dir.join("data").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{prom_port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut prom = Kill(prom);
    // Prometheus has the final count once the program's 40 calls are done and scraped.
    let t = Instant::now();
    let calls = loop {
        let c = query(prom_port, "kerf_calls_total{function=\"work\"}");
        if c == Some(40.0) || t.elapsed() > Duration::from_secs(11) {
            break c;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let virtual_s = query(prom_port, "kerf_virtual_seconds_total{function=\"work\"}");
    let wall_s = query(prom_port, "kerf_wall_seconds_total{job=\"kerf\",function=\"work\"}");
    // Per thread: the two workers, 20 calls each, and their virtual time adds up.
    let per_thread = "kerf_thread_outermost_calls_total{function=\"work\"}";
    let threads = query(prom_port, &format!("count({per_thread})"));
    let fewest = query(prom_port, &format!("min({per_thread})"));
    let thread_virtual =
        query(prom_port, "sum(kerf_thread_virtual_seconds_total{function=\"work\"})");
    let endpoint = get(kerf_port, "/metrics").unwrap_or_default();
    // kerf ends its run (as Ctrl-C does) and writes its summary.
    // SAFETY: kill(2) with kerf's pid, our child, and a signal it handles.
    unsafe { libc::kill(kerf.0.id() as i32, libc::SIGINT) };
    let out = std::mem::replace(&mut kerf.0, Command::new("true").spawn().unwrap())
        .wait_with_output()
        .unwrap();
    let _ = prom.0.kill();
    let prom_err = {
        let mut s = String::new();
        if let Some(e) = prom.0.stderr.as_mut() {
            let _ = e.read_to_string(&mut s);
        }
        s
    };
    let tail = |s: &str| s.lines().rev().take(5).collect::<Vec<_>>().join("\n");
    assert_eq!(
        calls,
        Some(40.0),
        "Prometheus never had 40 calls of work.\nkerf's endpoint:\n{endpoint}\nkerf: {}\nprometheus: {}",
        String::from_utf8_lossy(&out.stderr),
        tail(&prom_err)
    );
    let v: Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let work = v["functions"].as_array().unwrap().iter().find(|f| f["function"] == "work").unwrap();
    let kerf_virtual = work["virtual_ns"].as_f64().unwrap() / 1e9;
    let kerf_wall = work["total_ns"].as_f64().unwrap() / 1e9;
    let (pv, pw) = (virtual_s.unwrap(), wall_s.unwrap());
    assert!(
        (pv - kerf_virtual).abs() <= 0.01 * kerf_virtual,
        "Prometheus {pv} s, kerf {kerf_virtual} s"
    );
    assert!((pw - kerf_wall).abs() <= 0.01 * kerf_wall, "Prometheus {pw} s, kerf {kerf_wall} s");
    assert_eq!((threads, fewest), (Some(2.0), Some(20.0)), "per thread:\n{endpoint}");
    let tv = thread_virtual.unwrap_or(0.0);
    assert!((tv - pv).abs() <= 0.01 * pv, "threads' virtual time {tv} s, the function's {pv} s");
    // And the program's own measure of its CPU time in work.
    let (lines, most) = reader.join().unwrap();
    let own: f64 = lines
        .iter()
        .find_map(|l| l.strip_prefix("work_cpu_ns "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    let most = most.expect("the program printed no `calls` line while kerf ran");
    let r = pv * 1e9 / own;
    assert!(
        (0.95..=most).contains(&r),
        "Prometheus's virtual time / the program's CPU time: {r} (at most {most} with the steal seen)"
    );
}
