//! `kerf hunt`: automatic bottleneck search from root functions down their call tree, in
//! rounds of timers (the tool is `kerf_tools::hunt`); prints the tree of where the time goes,
//! and writes it as collapsed stacks or speedscope JSON on request.

use kerf_session::live::{catch_signals, Choice, Sampling};
use kerf_tools::hunt::{folded, hunt, json, speedscope, tree_text, HuntOptions};
use kerf_tools::live::{LiveOptions, TrapWarning};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Root functions: [MODULE:]SYMBOL or a glob, as for `kerf time`.
    #[arg(required = true)]
    roots: Vec<String>,
    /// Process to hunt in; with --kernel, the task (thread id) probes are restricted to.
    #[arg(short, long, conflicts_with = "command")]
    pid: Option<i32>,
    /// Hunt in the running kernel (needs kerf's driver, kerf.ko).
    #[arg(long, conflicts_with = "command")]
    kernel: bool,
    /// Follow a callee whose calls hold at least this share of its caller's time.
    #[arg(long, default_value_t = 0.1, value_parser = share)]
    threshold: f64,
    /// Seconds each round times its functions.
    #[arg(long, default_value_t = 1.0, value_parser = crate::live::seconds, value_name = "SECONDS")]
    round: f64,
    /// Levels below the roots at most.
    #[arg(long, default_value_t = 8)]
    depth: usize,
    /// Rounds at most.
    #[arg(long, default_value_t = 16)]
    rounds: usize,
    /// Keep virtual time (CPU time) beside wall time, as `kerf time --virtual`.
    #[arg(long = "virtual")]
    virtual_time: bool,
    /// Where the time stays in a function's own code (its self time at least the threshold of
    /// its time), count its basic blocks in one more round and show the most run ones.
    #[arg(long)]
    blocks: bool,
    /// Leave out of the printed tree nodes below this share of their root.
    #[arg(long, default_value_t = 0.01, value_parser = share)]
    show: f64,
    /// Write the tree as collapsed stacks (flame graph input) to FILE.
    #[arg(long, value_name = "FILE")]
    folded: Option<PathBuf>,
    /// Write the tree as a speedscope profile (JSON) to FILE.
    #[arg(long, value_name = "FILE")]
    speedscope: Option<PathBuf>,
    /// Print the tree as one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Command to launch, hunted in while it runs: `-- CMD ARGS`.
    #[arg(last = true)]
    command: Vec<String>,
}

fn share(text: &str) -> Result<f64, String> {
    let v: f64 = text.trim().parse().map_err(|_| "not a number".to_string())?;
    if !(0.0..=1.0).contains(&v) {
        return Err("a share from 0 to 1".into());
    }
    Ok(v)
}

pub fn run(args: Args) -> Result<(), crate::Error> {
    // The output files exist before anything is done to a target.
    let create = |p: &Option<PathBuf>| -> Result<Option<std::fs::File>, crate::Error> {
        p.as_ref()
            .map(|p| {
                std::fs::File::create(p)
                    .map_err(|source| crate::Error::Output { path: p.clone(), source })
            })
            .transpose()
    };
    let (mut folded_file, mut speedscope_file) = (create(&args.folded)?, create(&args.speedscope)?);
    catch_signals();
    let choice = Choice { pid: args.pid, command: args.command.clone(), kernel: args.kernel };
    // A launched command runs from its entry on; the rounds attach to it as it runs.
    let (mut target, child) = crate::live::open_for_rounds(&choice)?;
    let opts = HuntOptions {
        threshold: args.threshold,
        round: args.round,
        depth: args.depth,
        rounds: args.rounds,
        virtual_time: args.virtual_time,
        blocks: args.blocks,
    };
    let live = LiveOptions {
        tid: None,
        sampling: Sampling { interval: args.round, duration: Some(args.round), at_once: false },
        no_traps: false,
        // (Hunt times a round again without the call sites whose returns trap.)
        trap_warning: TrapWarning::Off,
        force_kind: None,
        plan_threads: None,
        live_table: false,
    };
    let found = hunt(&mut target, &args.roots, &opts, &live, &mut crate::live::Stderr);
    drop(target);
    // The launched command's exit code, when it ended with one.
    // (128 + the signal for one a signal killed, as a shell reports it.)
    let wait = |c: Option<std::process::Child>| {
        use std::os::unix::process::ExitStatusExt;
        c.and_then(|mut c| {
            let st = c.wait().ok()?;
            st.code().or_else(|| st.signal().map(|s| 128 + s))
        })
    };
    let found = match found {
        Ok(f) => f,
        Err(e) => {
            wait(child);
            return Err(crate::Error::ended(!args.command.is_empty(), e));
        }
    };
    use std::io::Write;
    let write =
        |f: &mut Option<std::fs::File>, p: &Option<PathBuf>, text: &str| match (f.as_mut(), p) {
            (Some(f), Some(p)) => f
                .write_all(text.as_bytes())
                .map_err(|source| crate::Error::Output { path: p.clone(), source }),
            _ => Ok(()),
        };
    write(&mut folded_file, &args.folded, &folded(&found))?;
    let name = args.roots.join(" ");
    write(&mut speedscope_file, &args.speedscope, &format!("{}\n", speedscope(&found, &name)))?;
    let text = if args.json {
        format!("{}\n", json(&found))
    } else {
        let how = format!(
            "{} round{}, at most {} probes in at once, {:.1} s\n",
            found.rounds,
            if found.rounds == 1 { "" } else { "s" },
            found.peak_probes,
            found.seconds
        );
        format!("{}{how}", tree_text(&found, args.show))
    };
    if args.command.is_empty() {
        out_text!("{text}");
    } else {
        err_text!("{text}");
    }
    match wait(child) {
        Some(code) if code != 0 => {
            Err(crate::Error::Command { code: u8::try_from(code).unwrap_or(1) })
        }
        _ => Ok(()),
    }
}
