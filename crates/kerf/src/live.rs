//! What the live commands (`count`, `time`, `demo`) share on the command line: their options,
//! the target chosen once from them, where their output goes, and printing a tool's report as
//! a table or JSON.

use kerf_session::live::{catch_signals, Choice, Sampling, Target};
use kerf_tools::live::{run, Events, LiveOptions, LiveTool, TrapWarning};
use kerf_tools::SpliceKind;

/// Options of every live tool.
#[derive(clap::Args, Clone, Debug)]
pub struct LiveArgs {
    /// Process to instrument; with --kernel, the task (thread id) probes are restricted to.
    #[arg(short, long, conflicts_with = "command")]
    pub pid: Option<i32>,
    /// Run probes only in this thread of the process.
    #[arg(long)]
    pub tid: Option<i32>,
    /// Seconds between table updates (at least 0.05).
    #[arg(long, default_value_t = 1.0, value_parser = seconds, value_name = "SECONDS")]
    pub interval: f64,
    /// Stop this many seconds after the probes are in (installing them, which takes seconds
    /// for hundreds of thousands of points, is not counted; default: until the target ends
    /// or runs exec, or Ctrl-C). The summary says how the target ended; kerf exits with
    /// 128 + the signal if one killed a command it launched, 1 if one killed a process given
    /// by -p.
    #[arg(long, value_parser = seconds, value_name = "SECONDS")]
    pub duration: Option<f64>,
    /// End with one JSON object summarising every point (instead of the final table).
    #[arg(long)]
    pub json: bool,
    /// Write the summary (the JSON object, or the final table) to FILE. Without it the
    /// summary and the live table go to stdout, except when kerf launches a command: that
    /// command keeps stdout to itself, and kerf's output goes to stderr (the JSON object on a
    /// line of its own).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    pub output: Option<std::path::PathBuf>,
    /// Serve every metric over HTTP at ADDR (host:port), in the OpenMetrics text format, for
    /// Prometheus to scrape (GET /metrics; updated each interval).
    #[arg(long, value_name = "ADDR")]
    pub serve: Option<String>,
    /// Record every metric at each interval into FILE (JSON Lines, a sample a line) for
    /// `kerf plot` to draw as curves.
    #[arg(long, value_name = "FILE")]
    pub record: Option<std::path::PathBuf>,
    /// Use this splice kind for every point (testing): jump5, jump2 or trap.
    #[arg(long, value_parser = ["jump5", "jump2", "trap"])]
    pub force_kind: Option<String>,
    /// Threads splice planning runs on in a process (default: every CPU; 1 for benchmarks
    /// that compare against planning on one thread). The plan is the same on any number.
    #[arg(long, hide = true, value_parser = clap::value_parser!(u16).range(1..))]
    pub plan_threads: Option<u16>,
    /// Instrument the running kernel (needs kerf's driver, kerf.ko).
    #[arg(long, conflicts_with_all = ["tid", "command"])]
    pub kernel: bool,
    /// No trap splices: a point only an int3 could take is left out, with why. In a process
    /// each hit of a trap is a signal (microseconds, where a jump costs nanoseconds): for
    /// points in hot code that kerf warns about. In the kernel, for very many points (every
    /// block of core text), where traps on paths every CPU runs all the time would cost an
    /// exception per hit while they go in.
    #[arg(long)]
    pub no_traps: bool,
    /// Command to launch (held at its entry point until the probes are in): `-- CMD ARGS`.
    #[arg(last = true)]
    pub command: Vec<String>,
}

/// The longest `--duration` or `--interval` taken: about 31 years, far below what a
/// `Duration` or an `Instant` can hold.
const MAX_SECONDS: f64 = 1e9;

/// A number of seconds for `--duration` and `--interval`, checked when the arguments are
/// read, before anything is done to a target: finite, above zero, at most [`MAX_SECONDS`].
pub(crate) fn seconds(text: &str) -> Result<f64, String> {
    let v: f64 = text.trim().parse().map_err(|_| "not a number of seconds".to_string())?;
    if !v.is_finite() {
        return Err("not a finite number of seconds".into());
    }
    if v <= 0.0 {
        return Err("must be more than 0 seconds".into());
    }
    if v > MAX_SECONDS {
        return Err(format!("more than {MAX_SECONDS:e} seconds"));
    }
    Ok(v)
}

impl LiveArgs {
    /// The target the options name: the kernel, a process to attach to, or a command.
    fn choice(&self) -> Choice {
        Choice { pid: self.pid, command: self.command.clone(), kernel: self.kernel }
    }

    fn options(&self) -> LiveOptions {
        let force_kind = match self.force_kind.as_deref() {
            Some("trap") => Some(SpliceKind::Trap),
            Some("jump5") => Some(SpliceKind::Jump5),
            Some("jump2") => Some(SpliceKind::Jump2),
            _ => None,
        };
        LiveOptions {
            tid: self.tid,
            sampling: Sampling {
                interval: self.interval.max(0.05),
                duration: self.duration,
                at_once: false,
            },
            force_kind,
            plan_threads: self.plan_threads.map(usize::from),
            no_traps: self.no_traps,
            trap_warning: TrapWarning::WithFlag,
            live_table: !self.json,
        }
    }
}

/// Where one kind of kerf's output goes.
enum Sink {
    Stdout,
    Stderr,
    File(std::fs::File),
}

/// Where kerf writes the live table and the final summary (see `--output`): never into the
/// stdout of a command it launched, which belongs to that command.
pub struct Output {
    live: Sink,
    summary: Sink,
    /// `--record`: the samples go here, a line each.
    record: Option<std::io::BufWriter<std::fs::File>>,
    /// `--serve`: the latest sample goes here.
    serve: Option<crate::serve::Server>,
    /// `--output`, until a summary went into it: a run that ends in an error removes the
    /// empty file it created, rather than leave one that reads as a summary of nothing.
    unwritten: Option<std::path::PathBuf>,
}

impl Drop for Output {
    fn drop(&mut self) {
        if let Some(p) = self.unwritten.take() {
            remove_if_empty(&p);
        }
    }
}

/// Remove the `--output` file `p` if nothing was written to it: a run that ended in an error
/// leaves no file that reads as a summary of nothing (or as JSON that does not parse).
pub fn remove_if_empty(p: &std::path::Path) {
    if std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.len() == 0) {
        let _ = std::fs::remove_file(p);
    }
}

impl Output {
    /// Open `--output` (before anything is done to a target, so that a bad path costs
    /// nothing).
    pub fn open(args: &LiveArgs, tool: &str) -> Result<Output, crate::Error> {
        let ours = || if args.command.is_empty() { Sink::Stdout } else { Sink::Stderr };
        let record = match &args.record {
            Some(p) => Some(record_file(p, tool, args)?),
            None => None,
        };
        let serve = match &args.serve {
            Some(addr) => Some(crate::serve::Server::start(addr, tool, &target_name(args))?),
            None => None,
        };
        let summary = match &args.output {
            Some(p) => Sink::File(
                std::fs::File::create(p)
                    .map_err(|source| crate::Error::Output { path: p.clone(), source })?,
            ),
            None => ours(),
        };
        let unwritten = args.output.clone();
        if let Some(p) = &unwritten {
            kerf_session::live::remove_if_ended_early(p);
        }
        Ok(Output { live: ours(), summary, record, serve, unwritten })
    }

    fn write(sink: &mut Sink, text: &str) {
        use std::io::Write;
        // A closed pipe or a full disk ends nothing: the target must still be restored.
        let _ = match sink {
            Sink::Stdout => std::io::stdout().lock().write_all(text.as_bytes()),
            Sink::Stderr => std::io::stderr().lock().write_all(text.as_bytes()),
            Sink::File(f) => f.write_all(text.as_bytes()),
        };
    }

    /// The final summary.
    pub fn summary(&mut self, text: &str) {
        Output::write(&mut self.summary, text);
        self.unwritten = None;
    }
}

impl Events for Output {
    fn say(&mut self, line: &str) {
        err_line!("kerf: {line}");
    }
    fn warn(&mut self, line: &str) {
        err_line!("kerf: warning: {line}");
    }
    fn live(&mut self, table: &str) {
        Output::write(&mut self.live, table);
    }
    fn record(&mut self, sample: serde_json::Value) {
        use std::io::Write;
        if let Some(s) = &self.serve {
            s.update(&sample);
        }
        if let Some(f) = &mut self.record {
            // A full disk ends the recording, not the run: the target must still be restored.
            let _ = writeln!(f, "{sample}").and_then(|()| f.flush());
        }
    }
}

/// What the tool runs on, in words: the kernel, a process, or the command.
fn target_name(args: &LiveArgs) -> String {
    if args.kernel {
        "the kernel".to_string()
    } else if let Some(pid) = args.pid {
        format!("process {pid}")
    } else {
        args.command.join(" ")
    }
}

/// A `--record` file, created with its header line: which tool, on what, how often.
fn record_file(
    path: &std::path::Path,
    tool: &str,
    args: &LiveArgs,
) -> Result<std::io::BufWriter<std::fs::File>, crate::Error> {
    use std::io::Write;
    let err = |source| crate::Error::Output { path: path.to_path_buf(), source };
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).map_err(err)?);
    let target = target_name(args);
    let head = serde_json::json!({"kerf_record": 1, "tool": tool, "target": target,
                                  "interval": args.interval});
    writeln!(f, "{head}").map_err(err)?;
    Ok(f)
}

/// Events of a tool that prints its own report: kerf's lines go to stderr.
pub struct Stderr;

impl Events for Stderr {
    fn say(&mut self, line: &str) {
        err_line!("kerf: {line}");
    }
    fn warn(&mut self, line: &str) {
        err_line!("kerf: warning: {line}");
    }
    fn live(&mut self, _table: &str) {}
}

/// The target `choice` names, for a tool that installs probes in rounds (`hunt`, `top`): a
/// launched command is let go at once and runs while the rounds attach to it; its process is
/// returned, to be waited for at the end (no round waits for it).
pub fn open_for_rounds(
    choice: &Choice,
) -> Result<(Target, Option<std::process::Child>), crate::Error> {
    let mut target = Target::open(choice).map_err(kerf_tools::ToolError::from)?;
    let child = match &mut target {
        Target::Process(p) if !choice.command.is_empty() => {
            p.release().map_err(kerf_tools::ToolError::from)?;
            p.child.take()
        }
        _ => None,
    };
    Ok((target, child))
}

/// Run `tool` against the target `args` name, and print its report: a table (after how it
/// stopped) or the JSON object. A failure after the summary is returned after printing it.
pub fn run_tool<T: LiveTool>(tool: &T, name: &str, args: &LiveArgs) -> Result<(), crate::Error> {
    run_tool_then(tool, name, args, |_| Ok(()))
}

/// [`run_tool`], with `then` given the report before it is printed (`kerf cover` merges
/// earlier runs into it and writes its other files).
pub fn run_tool_then<T: LiveTool>(
    tool: &T,
    name: &str,
    args: &LiveArgs,
    then: impl FnOnce(&mut kerf_tools::live::Report) -> Result<(), crate::Error>,
) -> Result<(), crate::Error> {
    let mut out = Output::open(args, name)?;
    crate::note_script(&args.command);
    catch_signals();
    show_splice_progress();
    let mut target = Target::open(&args.choice()).map_err(kerf_tools::ToolError::from)?;
    let mut report = run(tool, &mut target, &args.options(), &mut out)?;
    then(&mut report)?;
    if args.json {
        out.summary(&format!("{}\n", report.json));
    } else {
        if let Some(why) = &report.stopped {
            err_line!("kerf: {why}");
        }
        out.summary(&tool.final_table(&report.json));
    }
    if let Some(w) = &report.warning_after {
        err_line!("kerf: {w}");
    }
    let launched = !args.command.is_empty();
    match report.error {
        Some(e) => Err(crate::Error::ended(launched, e)),
        None => crate::Error::command_exit(launched, &report.json),
    }
}

/// While an installation has been splicing for 5 s, a line on stderr every 5 s with how many
/// of its points are in (every block of a large library or of the kernel takes minutes).
fn show_splice_progress() {
    use std::time::{Duration, Instant};
    const EVERY: Duration = Duration::from_secs(5);
    std::thread::spawn(|| {
        let mut since: Option<Instant> = None;
        let mut said = Instant::now();
        loop {
            std::thread::sleep(Duration::from_millis(250));
            let (done, total) = kerf_session::installer::splice_progress();
            if total == 0 {
                since = None;
                continue;
            }
            let t = *since.get_or_insert_with(Instant::now);
            if t.elapsed() >= EVERY && said.elapsed() >= EVERY {
                err_line!("kerf: splicing: {done} of {total} points in");
                said = Instant::now();
            }
        }
    });
}
