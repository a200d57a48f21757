//! `kerf count`: splice counters at points of a live process (or of a command it launches, or
//! of the running kernel), print a live table, and restore the target exactly on exit, Ctrl-C
//! or SIGTERM.

use crate::live::{
    catch_signals, check_interrupted, finish_session, kernel_refused, kernel_spliced_line,
    process_refused, removal_outcome, resolve, sample_loop, site_json, spliced_line, Installed,
    LiveArgs, Output, Target,
};
use kerf_session::instrument::{Action, Options, Probe};
use kerf_session::kernel::{Kernel, KernelInstrumentation};
use kerf_session::spec;
use serde_json::{json, Value};
use std::fmt::Write;
use std::time::Instant;

/// Rows of the live table: the busiest points of the interval; the others are summed up.
const TOP_ROWS: usize = 40;

#[derive(clap::Args)]
pub struct Args {
    /// Points: [MODULE:]SYMBOL[+OFF], MODULE:0xADDR, a glob like libc:*open*, FUNC@blocks or
    /// FUNC@exits. MODULE is a prefix of a module's file name, its path, or, for the main
    /// executable, the name it was run as or `exe`. Globs leave out NAME@plt stubs unless
    /// the pattern ends in @plt.
    #[arg(required = true)]
    specs: Vec<String>,
    #[command(flatten)]
    live: LiveArgs,
}

pub fn run(args: Args) -> Result<(), String> {
    let specs: Vec<spec::Spec> = args
        .specs
        .iter()
        .map(|s| spec::parse(s))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let mut out = Output::open(&args.live)?;
    catch_signals();
    if args.live.kernel {
        return count_kernel(&args.live, &specs, &mut out);
    }
    let mut target = Target::open(&args.live)?;
    check_interrupted()?;
    let t = Instant::now();
    let opts = Options { force_kind: args.live.force_kind(), only_thread: args.live.tid };
    let (inst, probes, ()) =
        target.install(opts, |m, a| Ok((counters(resolve(m, a, &specs)?), 0, ())))?;
    let splice_time = t.elapsed();
    target.release()?;
    eprintln!("{}", spliced_line(&inst, target.pid, splice_time));
    let refused = process_refused(&inst);
    let json_out = args.live.json;
    let mut table = Table::new(probes.len());
    let mut stop = target.sample(&args.live, &inst.code_heaps(), || {
        if !json_out {
            out.live(&table.render(&inst));
        }
    });
    // Counts first: the shared data heap stays readable here even after the target is gone.
    let summary = summarize(&inst, &probes);
    let (pause, batch_pause) = (inst.longest_pause, inst.longest_splice_pause);
    // In the order they first ran: `[name, microseconds]`.
    let phases: Vec<Value> =
        inst.phases.iter().map(|(n, d)| json!([n, d.as_micros() as u64])).collect();
    let removal = finish_session(&mut target, inst, &mut stop);
    let pid = target.pid;
    let failure = stop.failure(pid);
    // A failure is kerf's last line (main prints it); other ends are said here.
    let why = failure.is_none().then(|| stop.describe(pid));
    report(
        &mut out,
        json_out,
        why.as_deref(),
        json!({"pid": pid, "stopped": stop.describe(pid), "target": stop.json(),
               "points": summary, "refused": refused,
               "longest_pause_us": pause.as_micros() as u64,
               "longest_splice_pause_us": batch_pause.as_micros() as u64,
               "splice_seconds": splice_time.as_secs_f64(),
               "splice_phases_us": phases,
               "seconds": target.started.elapsed().as_secs_f64()}),
    );
    removal_outcome(removal, pid)?;
    failure.map_or(Ok(()), Err)
}

fn counters(points: Vec<spec::Point>) -> Vec<Probe> {
    points.into_iter().map(|point| Probe { point, action: Action::Count }).collect()
}

/// `kerf count --kernel`: the same through kerf's driver.
fn count_kernel(live: &LiveArgs, specs: &[spec::Spec], out: &mut Output) -> Result<(), String> {
    let started = Instant::now();
    let kernel = Kernel::open(true, &kerf_analysis::Quiet).map_err(|e| e.to_string())?;
    let probes = counters(resolve(&kernel.images, &[], specs)?);
    check_interrupted()?;
    let opts = live.kernel_options();
    let inst =
        KernelInstrumentation::install(&kernel, &probes, 0, opts).map_err(|e| e.to_string())?;
    eprintln!("{}", kernel_spliced_line(&inst));
    let refused = kernel_refused(&inst);
    let mut table = Table::new(probes.len());
    let why = sample_loop(
        started,
        live,
        || None,
        || {
            if !live.json {
                out.live(&table.render(&inst));
            }
        },
    )
    .describe(0);
    let summary = summarize(&inst, &probes);
    let splice_seconds = inst.splice_time.as_secs_f64();
    let removal = inst.remove();
    report(
        out,
        live.json,
        Some(&why),
        json!({"kernel": true, "stopped": why, "points": summary, "refused": refused,
               "splice_seconds": splice_seconds,
               "seconds": started.elapsed().as_secs_f64()}),
    );
    removal.map(|_| ()).map_err(|e| format!("restoring the kernel: {e}"))
}

/// Per probe: where and how it is spliced, and its count (probes the driver refused are left
/// out; they are listed apart).
fn summarize(inst: &dyn Installed, probes: &[Probe]) -> Vec<Value> {
    probes
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let mut v = site_json(inst.site(i)?);
            v["spec"] = json!(p.point.spec);
            v["count"] = json!(inst.count(i));
            Some(v)
        })
        .collect()
}

/// The final JSON object, or a table of every point.
fn report(out: &mut Output, json_out: bool, why: Option<&str>, v: Value) {
    if json_out {
        out.summary(&format!("{v}\n"));
        return;
    }
    if let Some(why) = why {
        eprintln!("kerf: {why}");
    }
    let mut t = format!("{:>14}  point (every point, final counts)\n", "count");
    for p in v["points"].as_array().into_iter().flatten() {
        let _ = writeln!(
            t,
            "{:>14}  {} {} ({})",
            p["count"].as_u64().unwrap_or(0),
            p["kind"].as_str().unwrap_or(""),
            p["point"].as_str().unwrap_or(""),
            p["address"].as_str().unwrap_or("")
        );
    }
    out.summary(&t);
}

/// The live table: per interval, only the points that ran in it, busiest first (at most
/// `TOP_ROWS`), and one line for the rest. With thousands of points (`libc:*`), a table of
/// every point at every interval, zeros included, is unreadable; the final table and
/// `--json` list them all.
struct Table {
    /// Each probe's count at the last update.
    last: Vec<u64>,
    at: Instant,
}

impl Table {
    fn new(probes: usize) -> Table {
        Table { last: vec![0; probes], at: Instant::now() }
    }

    fn render(&mut self, inst: &dyn Installed) -> String {
        let now = Instant::now();
        let secs = now.duration_since(self.at).as_secs_f64().max(1e-9);
        self.at = now;
        let (mut ran, mut idle) = (Vec::new(), 0usize);
        for (i, last) in self.last.iter_mut().enumerate() {
            if inst.site(i).is_none() {
                continue;
            }
            let c = inst.count(i);
            let d = c.saturating_sub(*last);
            *last = c;
            if d == 0 {
                idle += 1;
            } else {
                ran.push((d, c, i));
            }
        }
        ran.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
        let mut t = format!("{:>14} {:>12}  point\n", "count", "per second");
        for &(d, c, i) in ran.iter().take(TOP_ROWS) {
            let s = inst.site(i).expect("only spliced probes are listed");
            let _ = writeln!(t, "{c:>14} {:>12.0}  {} {}", d as f64 / secs, s.kind.name(), s.label);
        }
        let more = ran.len().saturating_sub(TOP_ROWS);
        let more = if more > 0 { format!("{more} more points ran, ") } else { String::new() };
        let _ = writeln!(t, "{:>14}  ({more}{idle} points idle)", "");
        t
    }
}
