//! `kerf sum`: accumulators (KernInst's): a register value summed at points of a live process
//! or the kernel, with events counted; the tool itself is `kerf_tools::sum`.

use crate::live::{run_tool, LiveArgs};
use kerf_tools::sum::Sum;

#[derive(clap::Args)]
pub struct Args {
    /// Lines 'POINT VALUE': POINT as for `kerf count` (`@exits` for a return value), VALUE
    /// arg0..arg5, ret or a register; e.g. 'vfs_read@exits ret' (bytes read), 'libc:write
    /// arg2' (bytes asked to write).
    #[arg(required = true)]
    lines: Vec<String>,
    #[command(flatten)]
    live: LiveArgs,
}

pub fn run(args: Args) -> Result<(), crate::Error> {
    if args.live.tid.is_some() {
        let why = "--tid: kerf sum adds up every thread of the process";
        return Err(kerf_tools::ToolError::Usage(why.into()).into());
    }
    let tool = Sum::new(&args.lines)?;
    run_tool(&tool, "sum", &args.live)
}
