//! `kerf locks`: waiting threads per lock and per call site, in a process (pthread mutexes
//! and rwlocks) or the kernel (the slow paths of mutexes, rw semaphores and spinlocks); the
//! tool is `kerf_tools::locks`.

use kerf_session::live::{catch_signals, Choice, Sampling, Target};
use kerf_tools::live::{LiveOptions, TrapWarning};
use kerf_tools::locks::{report, table, watch, Namer};

#[derive(clap::Args)]
pub struct Args {
    /// Process to watch (with --kernel: only the waits of this task).
    #[arg(short, long, conflicts_with = "command")]
    pid: Option<i32>,
    /// Watch the kernel's lock slow paths (through kerf's driver) instead of a process.
    #[arg(long, conflicts_with = "command")]
    kernel: bool,
    /// Stop after this many seconds (default: until the process ends, or Ctrl-C).
    #[arg(long, value_parser = crate::live::seconds, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Rows per table.
    #[arg(long, default_value_t = 20)]
    most: usize,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
    /// Command to launch (held at its entry point until the probes are in): `-- CMD ARGS`.
    #[arg(last = true)]
    command: Vec<String>,
}

pub fn run(args: Args) -> Result<(), crate::Error> {
    catch_signals();
    let choice = Choice { pid: args.pid, command: args.command.clone(), kernel: args.kernel };
    let mut target = Target::open(&choice).map_err(kerf_tools::ToolError::from)?;
    let opts = LiveOptions {
        tid: None,
        sampling: Sampling { interval: 0.1, duration: args.duration, at_once: false },
        no_traps: false,
        trap_warning: TrapWarning::On,
        force_kind: None,
        plan_threads: None,
        live_table: false,
    };
    let launched = !args.command.is_empty();
    let stats = watch(&mut target, &opts, &mut crate::live::Stderr)
        .map_err(|e| crate::Error::ended(launched, e))?;
    let namer = Namer::new(&target);
    // Averaged over the time watched (else the span of the events seen).
    let span = stats.first_ns.map_or(0.0, |f| stats.last_ns.saturating_sub(f) as f64 / 1e9);
    let secs = stats.watched.unwrap_or(span);
    let v = report(&stats, secs, &|a| namer.name(a).or_else(|| stats.late_names.get(&a).cloned()));
    let text = if args.json { format!("{v}\n") } else { table(&v, args.most) };
    if args.command.is_empty() {
        out_text!("{text}");
    } else {
        err_text!("{text}");
    }
    crate::Error::command_exit(launched, &v)
}
