//! `kerf count`: splice counters at points of a live process (or of a command it launches),
//! print a live table, and restore the process exactly on exit, Ctrl-C or SIGTERM.

use kerf_analysis::image::Image;
use kerf_arch::ImageAddr;
use kerf_patch::SpliceKind;
use kerf_session::instrument::{Instrumentation, Options};
use kerf_session::spec;
use kerf_session::{analyze_process, AnalyzedImage, LoadOptions};
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Process to instrument.
    #[arg(short, long, conflicts_with = "command")]
    pid: Option<i32>,
    /// Points: [MODULE:]SYMBOL[+OFF], MODULE:0xADDR, a glob like libc:*open*, or FUNC@blocks.
    #[arg(required = true)]
    specs: Vec<String>,
    /// Seconds between table updates.
    #[arg(long, default_value_t = 1.0)]
    interval: f64,
    /// Stop after this many seconds (default: until the target exits or Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// End with one JSON object summarising every point.
    #[arg(long)]
    json: bool,
    /// Use this splice kind for every point (testing): jump5, jump2 or trap.
    #[arg(long, value_parser = ["jump5", "jump2", "trap"])]
    force_kind: Option<String>,
    /// Command to launch and instrument: `kerf count SPEC... -- CMD ARGS`.
    #[arg(last = true)]
    command: Vec<String>,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

fn catch_signals() {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the
        // function pointer has the C ABI `signal` expects.
        unsafe {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
}

/// Bytes of a module's code at an image address, from its file (for spec boundary checks).
fn code_reader(
    modules: &[AnalyzedImage],
) -> impl Fn(usize, ImageAddr) -> Option<(ImageAddr, Vec<u8>)> + '_ {
    let maps: std::cell::RefCell<HashMap<usize, memmap2::Mmap>> = Default::default();
    move |m, a| {
        let mut maps = maps.borrow_mut();
        if let std::collections::hash_map::Entry::Vacant(e) = maps.entry(m) {
            let f = std::fs::File::open(&modules[m].file).ok()?;
            // SAFETY: read-only private mapping of an installed module (see session::load).
            e.insert(unsafe { memmap2::Mmap::map(&f) }.ok()?);
        }
        let data = maps.get(&m)?;
        let img = Image::from_elf("module", data).ok()?;
        let (base, bytes) = img.code_at(a)?;
        let off = (a.0 - base.0) as usize;
        Some((a, bytes.get(off..(off + 4096).min(bytes.len()))?.to_vec()))
    }
}

fn alive(pid: i32, child: &mut Option<std::process::Child>) -> Option<String> {
    if let Some(c) = child {
        return match c.try_wait() {
            Ok(Some(st)) => Some(format!("command exited ({st})")),
            _ => None,
        };
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("X");
    (stat.is_empty() || state == "Z" || state == "X").then(|| format!("process {pid} exited"))
}

pub fn run(args: Args) -> Result<(), String> {
    let mut child = None;
    let pid = match (args.pid, args.command.is_empty()) {
        (Some(p), _) => p,
        (None, false) => {
            let c = kerf_target::ptrace::spawn(&args.command).map_err(|e| e.to_string())?;
            let pid = c.id() as i32;
            child = Some(c);
            kerf_target::ptrace::wait_until_loaded(pid, Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
            pid
        }
        (None, true) => return Err("give -p PID or a command after --".into()),
    };
    count_with(
        pid,
        child,
        &args.specs,
        args.interval,
        args.duration,
        args.json,
        args.force_kind.as_deref(),
    )
}

/// Count `specs` in process `pid` (not launched by kerf).
pub fn count_pid(
    pid: i32,
    specs: &[String],
    interval: f64,
    duration: Option<f64>,
    json_out: bool,
    force_kind: Option<&str>,
) -> Result<(), String> {
    count_with(pid, None, specs, interval, duration, json_out, force_kind)
}

fn count_with(
    pid: i32,
    mut child: Option<std::process::Child>,
    spec_texts: &[String],
    interval: f64,
    duration: Option<f64>,
    json_out: bool,
    force_kind: Option<&str>,
) -> Result<(), String> {
    let t0 = Instant::now();
    let specs: Vec<spec::Spec> = spec_texts
        .iter()
        .map(|s| spec::parse(s))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let (modules, _skipped) = analyze_process(pid, &LoadOptions::default(), &kerf_analysis::Quiet)
        .map_err(|e| e.to_string())?;
    let named: Vec<(&str, &kerf_analysis::Analysis)> =
        modules.iter().map(|m| (m.analysis.image.as_str(), &m.analysis)).collect();
    let reader = code_reader(&modules);
    let points = spec::resolve(&specs, &named, &reader).map_err(|e| e.to_string())?;
    let force_kind = match force_kind {
        Some("trap") => Some(SpliceKind::Trap),
        Some("jump5") => Some(SpliceKind::Jump5),
        Some("jump2") => Some(SpliceKind::Jump2),
        _ => None,
    };
    catch_signals();
    let t_splice = Instant::now();
    let inst = Instrumentation::install(pid, &modules, &points, Options { force_kind })
        .map_err(|e| e.to_string())?;
    let splice_time = t_splice.elapsed();
    let kinds = |k: SpliceKind| inst.points().iter().filter(|p| p.kind == k).count();
    eprintln!(
        "kerf: {} points spliced in process {pid} ({} jump5, {} jump2, {} trap) in {:.1} ms ({:.1} us a point; longest pause {} us); Ctrl-C to stop",
        inst.points().len(),
        kinds(SpliceKind::Jump5),
        kinds(SpliceKind::Jump2),
        kinds(SpliceKind::Trap),
        splice_time.as_secs_f64() * 1e3,
        splice_time.as_secs_f64() * 1e6 / inst.points().len().max(1) as f64,
        inst.longest_pause.as_micros()
    );
    let deadline = duration.map(|d| t0 + Duration::from_secs_f64(d));
    let interval = Duration::from_secs_f64(interval.max(0.05));
    let mut next_print = Instant::now() + interval;
    let why = loop {
        if STOP.load(Ordering::SeqCst) {
            break "interrupted".to_string();
        }
        if let Some(w) = alive(pid, &mut child) {
            break w;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            break "duration reached".to_string();
        }
        if Instant::now() >= next_print && !json_out {
            print_table(&inst);
            next_print += interval;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // Counts first: the shared data heap stays readable here even after the target is gone.
    let counts: Vec<u64> = (0..inst.points().len()).map(|i| inst.count(i)).collect();
    let summary: Vec<_> = inst
        .points()
        .iter()
        .zip(&counts)
        .map(|(p, c)| {
            let mut v = json!({
                "spec": p.spec, "point": p.label, "address": format!("{:#x}", p.addr),
                "kind": p.kind.name(), "count": c,
            });
            if let Some(r) = &p.reason {
                v["reason"] = json!(r);
            }
            v
        })
        .collect();
    let pause = inst.longest_pause;
    let removal = inst.remove();
    if let Some(c) = &mut child {
        let _ = c.wait();
    }
    if json_out {
        println!(
            "{}",
            json!({"pid": pid, "stopped": why, "points": summary, "longest_pause_us": pause.as_micros() as u64,
                   "splice_seconds": splice_time.as_secs_f64(), "seconds": t0.elapsed().as_secs_f64()})
        );
    } else {
        eprintln!("kerf: {why}");
        for (p, c) in inst_table(&summary) {
            println!("{c:>14}  {p}");
        }
    }
    removal.map_err(|e| format!("restoring process {pid}: {e}"))
}

fn inst_table(summary: &[serde_json::Value]) -> Vec<(String, u64)> {
    summary
        .iter()
        .map(|v| {
            (
                format!(
                    "{} {} ({})",
                    v["kind"].as_str().unwrap_or(""),
                    v["point"].as_str().unwrap_or(""),
                    v["address"].as_str().unwrap_or("")
                ),
                v["count"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn print_table(inst: &Instrumentation) {
    println!("{:>14}  point", "count");
    for (i, p) in inst.points().iter().enumerate() {
        println!("{:>14}  {} {}", inst.count(i), p.kind.name(), p.label);
    }
}
