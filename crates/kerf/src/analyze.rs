//! `kerf analyze`: structural analysis of a file, of a live process's modules or of the kernel,
//! printed as a KernInst-style summary, one function's CFG, a function list, a splice plan, or
//! JSON. The reports themselves are `kerf_tools::analyze`.

use crate::progress::TermProgress;
use kerf_session::LoadOptions;
use kerf_tools::analyze::{load, Report, Request, Source};
use kerf_tools::ToolError;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// ELF executable or shared object to analyse.
    #[arg(required_unless_present_any = ["pid", "kernel"], conflicts_with_all = ["pid", "kernel"])]
    target: Option<PathBuf>,
    /// Analyse every module mapped into this live process (read only: nothing is attached).
    #[arg(short, long, conflicts_with = "kernel")]
    pid: Option<i32>,
    /// Analyse the running kernel's text and loaded modules (needs kerf's driver, kerf.ko).
    #[arg(long)]
    kernel: bool,
    /// Symbol file (nm, System.map or /proc/kallsyms format) for an image without symbols
    /// (with -p, for the main executable).
    #[arg(long, value_name = "FILE")]
    symbols: Option<PathBuf>,
    /// Print this function's blocks, edges and live-in registers.
    #[arg(long, value_name = "NAME")]
    function: Option<String>,
    /// Print the summary (and the function, with --function) as one JSON object.
    #[arg(long)]
    json: bool,
    /// Neither read nor write the analysis cache.
    #[arg(long)]
    no_cache: bool,
    /// Check all of an analysis read from the cache against the image's code (every block
    /// decoded again, edges, jump tables, padding, liveness), as count and time check each
    /// function before they splice in it; a mismatch rejects the entry and the image is
    /// analysed again. Without it a cached analysis is shown as read (its checksum, key and
    /// the image's BLAKE3 hash are always checked).
    #[arg(long)]
    validate: bool,
    /// Use no separate debug files (build-id paths, .gnu_debuglink, debuginfod): only the
    /// image's own symbols. The environment variable KERF_NO_DEBUG_FILES=1 does the same for
    /// every command.
    #[arg(long)]
    no_debug_files: bool,
    /// Plan the splices of these points as `kerf count` would (jump5, jump2 or trap, and why a
    /// stronger kind was refused), offline: nothing is attached. Repeatable; specs as for
    /// `kerf count` (`'*'` is every function's entry).
    #[arg(long, value_name = "SPEC")]
    plan: Vec<String>,
    /// List every function: name, entry, size, blocks, and the splice a probe at its entry
    /// would take (with why a stronger one was refused). With --json, as `function_list`.
    #[arg(long)]
    functions: bool,
}

pub fn run(args: Args) -> Result<(), crate::Error> {
    // `kerf analyze ... | head`: end quietly when the reader goes away, as other tools do,
    // instead of panicking on the failed write (analysis touches no target, so dying there
    // leaves nothing behind; the live tools keep SIGPIPE ignored and restore their target).
    // SAFETY: setting a signal's disposition to the default has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let t0 = Instant::now();
    let symbols = match &args.symbols {
        Some(p) => Some(kerf_session::read_text_file(p).map_err(ToolError::from)?),
        None => None,
    };
    let debug = if args.no_debug_files {
        kerf_session::DebugOptions::disabled()
    } else {
        kerf_session::DebugOptions::from_env()
    };
    let opts = LoadOptions {
        symbols,
        no_cache: args.no_cache,
        cache_dir: None,
        debug,
        validate: args.validate,
    };
    let source = match (args.pid, &args.target) {
        _ if args.kernel => Source::Kernel,
        (Some(pid), _) => Source::Process(pid),
        (None, Some(path)) => Source::File(path),
        (None, None) => return Err(ToolError::NothingToAnalyze.into()),
    };
    let progress = TermProgress::new();
    let loaded = load(source, &opts, &progress)?;
    progress.finish();
    let seconds = t0.elapsed().as_secs_f64();
    for w in loaded.warnings() {
        err_line!("kerf: warning: {w}");
    }
    for s in &loaded.skipped {
        err_line!("kerf: skipped module {s}");
    }
    let request = Request {
        function: args.function.clone(),
        plan: args.plan.clone(),
        functions: args.functions,
    };
    let report = Report::new(&loaded, &request, seconds)?;
    if args.json {
        println!("{}", report.json());
    } else {
        print!("{}", report.text());
    }
    Ok(())
}
