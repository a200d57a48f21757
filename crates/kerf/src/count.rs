//! `kerf count`: splice counters at points of a live process (or of a command it launches, or
//! of the running kernel), print a live table, and restore the target exactly on exit, Ctrl-C
//! or SIGTERM. The tool itself is `kerf_tools::count`.

use crate::live::{run_tool, LiveArgs};
use kerf_tools::count::Count;

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

pub fn run(args: Args) -> Result<(), crate::Error> {
    let tool = Count::new(&args.specs)?;
    run_tool(&tool, "count", &args.live)
}
