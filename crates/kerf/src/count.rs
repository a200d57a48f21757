//! `kerf count`: splice counters at points of a live process (or of a command it launches),
//! print a live table, and restore the process exactly on exit, Ctrl-C or SIGTERM.

use crate::live::{catch_signals, site_json, spliced_line, LiveArgs, Target};
use kerf_session::instrument::{Action, Instrumentation, Options, Probe};
use kerf_session::spec;
use serde_json::json;
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
    let mut target = Target::open(&args.live)?;
    let points = target.resolve(&specs)?;
    let probes: Vec<Probe> =
        points.into_iter().map(|point| Probe { point, action: Action::Count }).collect();
    catch_signals();
    let t = Instant::now();
    let opts = Options { force_kind: args.live.force_kind(), only_thread: args.live.tid };
    let inst = Instrumentation::install(target.pid, &target.modules, &probes, 0, opts)
        .map_err(|e| e.to_string())?;
    let splice_time = t.elapsed();
    target.release()?;
    eprintln!("{}", spliced_line(&inst, target.pid, splice_time));
    let json_out = args.live.json;
    let why = target.sample(&args.live, || {
        if !json_out {
            print_table(&inst, &probes);
        }
    });
    // Counts first: the shared data heap stays readable here even after the target is gone.
    let summary: Vec<_> = probes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let mut v = site_json(inst.site_of(i));
            v["spec"] = json!(p.point.spec);
            v["count"] = json!(inst.count(i));
            v
        })
        .collect();
    let (pause, batch_pause) = (inst.longest_pause, inst.longest_splice_pause);
    let removal = inst.remove();
    target.finish();
    if json_out {
        println!(
            "{}",
            json!({"pid": target.pid, "stopped": why, "points": summary,
                   "longest_pause_us": pause.as_micros() as u64,
                   "longest_splice_pause_us": batch_pause.as_micros() as u64,
                   "splice_seconds": splice_time.as_secs_f64(),
                   "seconds": target.started.elapsed().as_secs_f64()})
        );
    } else {
        eprintln!("kerf: {why}");
        for v in &summary {
            println!(
                "{:>14}  {} {} ({})",
                v["count"].as_u64().unwrap_or(0),
                v["kind"].as_str().unwrap_or(""),
                v["point"].as_str().unwrap_or(""),
                v["address"].as_str().unwrap_or("")
            );
        }
    }
    removal.map_err(|e| format!("restoring process {}: {e}", target.pid))
}

fn print_table(inst: &Instrumentation, probes: &[Probe]) {
    println!("{:>14}  point", "count");
    for i in 0..probes.len() {
        let s = inst.site_of(i);
        println!("{:>14}  {} {}", inst.count(i), s.kind.name(), s.label);
    }
}
