//! `kerf time`: cycle timers spliced at the entry and every exit of functions of a live
//! process or the kernel; each function's calls, time per call and concurrency. The tool
//! itself is `kerf_tools::time`.

use crate::live::{run_tool, LiveArgs};
use kerf_tools::time::Time;

#[derive(clap::Args)]
pub struct Args {
    /// Functions: [MODULE:]SYMBOL or a glob like 'libc:*alloc*' (MODULE as for `kerf
    /// count`). A function that ends in a tail call is timed until the tail-called function
    /// returns.
    #[arg(required = true)]
    functions: Vec<String>,
    /// Also time each function's calls, per callee: a timer from the call instruction to
    /// the return address, so its time is that callee's as called from there.
    #[arg(long)]
    callees: bool,
    /// Keep virtual time too: the time the function's threads ran inside it, beside the wall
    /// time (their time off the CPU is left out). In a process, a BPF program on the
    /// sched_switch tracepoint counts each thread's time off the CPU (needs root, or BPF and
    /// the target allowed to ptrace kerf); in the kernel, a probe kerf splices into the
    /// context switch (__switch_to) does
    #[arg(long = "virtual")]
    virtual_time: bool,
    /// Count a hardware event in each function too: cycles, instructions, cache-references,
    /// cache-misses, branches or branch-misses. Needs a CPU that exposes performance counters
    /// (a PMU) to Linux; kerf says so where there is none (most VMs).
    #[arg(long, value_name = "EVENT")]
    counter: Option<String>,
    /// Break each function down by thread too: every thread's outermost calls and time (and
    /// CPU time with --virtual), by thread id in a process (in the JSON, the live samples of
    /// --record and --serve's `thread` label too).
    #[arg(long)]
    threads: bool,
    #[command(flatten)]
    live: LiveArgs,
}

pub fn run(args: Args) -> Result<(), crate::Error> {
    let tool = Time::new(&args.functions, args.callees)?
        .with_virtual_time(args.virtual_time)
        .with_threads(args.threads)
        .with_counter(args.counter.as_deref())?;
    run_tool(&tool, "time", &args.live)
}
