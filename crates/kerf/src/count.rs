//! `kerf count`: splice counters at points of a live process (or of a command it launches, or
//! of the running kernel), print a live table, and restore the target exactly on exit, Ctrl-C
//! or SIGTERM.

use crate::live::{
    catch_signals, kernel_refused, kernel_spliced_line, process_refused, removal_outcome, resolve,
    sample_loop, site_json, spliced_line, Installed, LiveArgs, Target,
};
use kerf_session::instrument::{Action, Options, Probe};
use kerf_session::kernel::{Kernel, KernelInstrumentation};
use kerf_session::spec;
use serde_json::{json, Value};
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// Points: [MODULE:]SYMBOL[+OFF], MODULE:0xADDR, a glob like libc:*open*, FUNC@blocks or
    /// FUNC@exits.
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
    if args.live.kernel {
        return count_kernel(&args.live, &specs);
    }
    let mut target = Target::open(&args.live)?;
    catch_signals();
    let t = Instant::now();
    let opts = Options { force_kind: args.live.force_kind(), only_thread: args.live.tid };
    let (inst, probes, ()) =
        target.install(opts, |m| Ok((counters(resolve(m, &specs)?), 0, ())))?;
    let splice_time = t.elapsed();
    target.release()?;
    eprintln!("{}", spliced_line(&inst, target.pid, splice_time));
    let refused = process_refused(&inst);
    let json_out = args.live.json;
    let why = target.sample(&args.live, || {
        if !json_out {
            print_table(&inst, &probes);
        }
    });
    // Counts first: the shared data heap stays readable here even after the target is gone.
    let summary = summarize(&inst, &probes);
    let (pause, batch_pause) = (inst.longest_pause, inst.longest_splice_pause);
    let removal = inst.remove();
    target.finish();
    report(
        json_out,
        &why,
        json!({"pid": target.pid, "stopped": why, "points": summary, "refused": refused,
               "longest_pause_us": pause.as_micros() as u64,
               "longest_splice_pause_us": batch_pause.as_micros() as u64,
               "splice_seconds": splice_time.as_secs_f64(),
               "seconds": target.started.elapsed().as_secs_f64()}),
    );
    removal_outcome(removal, target.pid)
}

fn counters(points: Vec<spec::Point>) -> Vec<Probe> {
    points.into_iter().map(|point| Probe { point, action: Action::Count }).collect()
}

/// `kerf count --kernel`: the same through kerf's driver.
fn count_kernel(live: &LiveArgs, specs: &[spec::Spec]) -> Result<(), String> {
    let started = Instant::now();
    let kernel = Kernel::open(true, &kerf_analysis::Quiet)?;
    let probes = counters(resolve(&kernel.images, specs)?);
    catch_signals();
    let opts = live.kernel_options();
    let inst =
        KernelInstrumentation::install(&kernel, &probes, 0, opts).map_err(|e| e.to_string())?;
    eprintln!("{}", kernel_spliced_line(&inst));
    let refused = kernel_refused(&inst);
    let why = sample_loop(
        started,
        live,
        || None,
        || {
            if !live.json {
                print_table(&inst, &probes);
            }
        },
    );
    let summary = summarize(&inst, &probes);
    let splice_seconds = inst.splice_time.as_secs_f64();
    let removal = inst.remove();
    report(
        live.json,
        &why,
        json!({"kernel": true, "stopped": why, "points": summary, "refused": refused,
               "splice_seconds": splice_seconds,
               "seconds": started.elapsed().as_secs_f64()}),
    );
    removal.map_err(|e| format!("restoring the kernel: {e}"))
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

/// The final JSON object, or a table.
fn report(json_out: bool, why: &str, v: Value) {
    if json_out {
        println!("{v}");
        return;
    }
    eprintln!("kerf: {why}");
    for p in v["points"].as_array().into_iter().flatten() {
        println!(
            "{:>14}  {} {} ({})",
            p["count"].as_u64().unwrap_or(0),
            p["kind"].as_str().unwrap_or(""),
            p["point"].as_str().unwrap_or(""),
            p["address"].as_str().unwrap_or("")
        );
    }
}

fn print_table(inst: &dyn Installed, probes: &[Probe]) {
    println!("{:>14}  point", "count");
    for i in 0..probes.len() {
        if let Some(s) = inst.site(i) {
            println!("{:>14}  {} {}", inst.count(i), s.kind.name(), s.label);
        }
    }
}
