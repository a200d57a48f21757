//! `kerf demo`: kerf's main job on a built-in default. Launches the bundled multi-threaded
//! workload (this very binary, in a hidden mode: `kerf_tools::demo`), times its functions
//! while its threads run, shows live calls, time per call and concurrency, and detaches
//! leaving it as it was.

use crate::live::{run_tool, LiveArgs};
use kerf_tools::demo::{own_binary, Workload, FUNCTIONS};
use kerf_tools::time::Time;

#[derive(clap::Args)]
pub struct Args {
    /// Seconds to count for.
    #[arg(long, default_value_t = 3.0, value_parser = crate::live::seconds)]
    duration: f64,
    /// Worker threads in the workload.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Seconds between table updates.
    #[arg(long, default_value_t = 1.0, value_parser = crate::live::seconds)]
    interval: f64,
}

pub fn run(args: Args) -> Result<(), crate::Error> {
    let workload = Workload::start(&own_binary()?, args.threads)?;
    let pid = workload.pid();
    println!(
        "kerf demo: workload pid {pid} with {} threads; timing {FUNCTIONS} for {} s",
        args.threads, args.duration
    );
    let live = LiveArgs {
        pid: Some(pid),
        tid: None,
        interval: args.interval,
        duration: Some(args.duration),
        json: false,
        output: None,
        record: None,
        serve: None,
        force_kind: None,
        plan_threads: None,
        no_traps: false,
        kernel: false,
        command: Vec::new(),
    };
    let tool = Time::new(&[FUNCTIONS.to_string()], false)?;
    run_tool(&tool, "demo", &live)
}
