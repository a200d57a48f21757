//! `kerf trace PROBE...` (trace events at points of a live process, a command, or the kernel),
//! `kerf trace convert` (a raw trace to text, JSON Lines or Perfetto, or replayed to a
//! collector) and `kerf collect` (receive traces from senders into one raw file). The work is
//! `kerf_tools::trace`.

use kerf_tools::trace::collect::{Backpressure, Collector, SourceCount};
use kerf_tools::trace::event::Record;
use kerf_tools::trace::raw::Reader;
use kerf_tools::trace::{self as tr, Format, TraceError};
use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The probe syntax, for `kerf trace --help`.
const PROBE_HELP: &str = "\
PROBE: POINT [{CAPTURE, ...}] [if FILTER] [stream=NAME]
  POINT     any point `kerf count` takes: [MODULE:]FUNC[+OFF], FUNC@exits, FUNC@blocks, globs
  CAPTURE   [NAME=]EXPR, EXPR one of
              rax..r15, arg0..arg5 (C calling convention: not Go's), ret (at @exits), tid, cpu
              u8|u16|u32|u64|i8|i16|i32|i64(REG[+-OFF])   memory (a bad address is recorded
                                                          as a fault, never a crash)
              str(REG[+-OFF][, LEN])                      a NUL-terminated string, LEN <= 64
              ustr(REG[+-OFF][, LEN])                     (kernel) a string at a user address
  FILTER    comparisons (== != < <= > >=) of register values and numbers, with && || ! ( ),
            checked before anything is recorded; memory cannot be filtered on
  stream    the stream the probe's events go to (default: its module, or `kernel`); each
            stream has its own rings and counters; --off NAME starts one switched off
A probe written `kernel:POINT ...` beside probes of a process (-p or -- CMD) goes into the
running kernel (kerf.ko) and sees that process's tasks only: both in one timeline, e.g. a
libc wrapper and its system call.
Every event has its time (TSC calibrated to CLOCK_MONOTONIC), thread, process and CPU.
Losses (a full ring) are counted per stream and shown; never silent.

Examples:
  kerf trace -p 1234 'libc:open {path=str(arg0), flags=arg1}' 'libc:open@exits {ret}'
  kerf trace -o run.perfetto-trace -- ./app 'app:parse {n=arg1} if n > 100'
  kerf trace --send collector:7000 -p 1234 'libc:write {fd=arg0, len=arg2}'
  kerf trace -- cat /etc/hostname 'libc:open64 {p=str(arg1)}' 'kernel:do_sys_openat2 {n=ustr(arg1)}'";

/// `kerf trace`: probes to trace, or a subcommand.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true,
          after_long_help = PROBE_HELP)]
pub struct TraceArgs {
    #[command(subcommand)]
    command: Option<TraceCommand>,
    /// Probes (see --help for the syntax): POINT [{CAPTURE, ...}] [if FILTER] [stream=NAME].
    #[arg(required = true, value_name = "PROBE")]
    probes: Vec<String>,
    /// With -o: text, jsonl, perfetto or raw (default: from the file's name).
    #[arg(long)]
    format: Option<String>,
    /// Send the events to `kerf collect` at ADDR (host:port) instead of showing them.
    #[arg(long, value_name = "ADDR", conflicts_with = "format")]
    send: Option<String>,
    /// Slots of each ring per stream (a power of two; 32 to 128 bytes each, the shortest that
    /// holds the stream's longest event): a process has a ring
    /// per thread (default 4096, at most 262144), the kernel one per CPU (default 8192, fewer
    /// when CPUs and streams would not fit the 12 MiB of the driver's heap kept for rings).
    #[arg(long)]
    ring_slots: Option<u32>,
    /// Start this stream switched off (repeatable).
    #[arg(long, value_name = "STREAM")]
    off: Vec<String>,
    /// A file kerf watches while tracing: each line appended to it, `on STREAM` or
    /// `off STREAM`, switches a stream without re-splicing (`echo off libc >> FILE`).
    #[arg(long, value_name = "FILE")]
    control: Option<PathBuf>,
    /// The target and how long (-o is the trace file here; the summary goes to stderr).
    #[command(flatten)]
    live: crate::live::LiveArgs,
}

#[derive(clap::Subcommand)]
pub enum TraceCommand {
    /// Convert a raw trace (.kerf-trace) to text, JSON Lines or a Perfetto trace, or replay it
    /// to a collector (--send).
    Convert(ConvertArgs),
}

#[derive(clap::Args)]
pub struct ConvertArgs {
    /// The raw trace.
    input: PathBuf,
    /// Where to write: the format follows the name (.txt, .jsonl, .perfetto-trace, .kerf-trace)
    /// unless --format says; without it, text on standard output.
    #[arg(short, long)]
    output: Option<PathBuf>,
    /// text, jsonl, perfetto or raw.
    #[arg(long)]
    format: Option<String>,
    /// Replay the trace to `kerf collect` at ADDR (host:port) instead of converting it.
    #[arg(long, value_name = "ADDR", conflicts_with_all = ["output", "format"])]
    send: Option<String>,
    /// The machine name the collector files a replayed trace under (default: this host's name).
    #[arg(long, requires = "send")]
    machine: Option<String>,
}

#[derive(clap::Args)]
pub struct CollectArgs {
    /// host:port to listen on (0.0.0.0:PORT for every interface).
    #[arg(long, value_name = "ADDR")]
    listen: String,
    /// The raw trace to write (convert it with `kerf trace convert`).
    #[arg(short, long)]
    output: PathBuf,
    /// Stop once this many senders have finished (else at Ctrl-C or SIGTERM).
    #[arg(long, value_name = "N")]
    senders: Option<usize>,
}

fn open(path: &Path) -> Result<BufReader<File>, TraceError> {
    File::open(path)
        .map(|f| BufReader::with_capacity(1 << 20, f))
        .map_err(|source| TraceError::Input { path: path.into(), source })
}

fn create(path: &Path) -> Result<BufWriter<File>, TraceError> {
    File::create(path)
        .map(|f| BufWriter::with_capacity(1 << 20, f))
        .map_err(|source| TraceError::Output { path: path.into(), source })
}

pub fn run(args: TraceArgs) -> Result<(), crate::Error> {
    match args.command {
        Some(TraceCommand::Convert(a)) => convert(a),
        None => trace(args),
    }
}

/// `kerf trace PROBE...`: the output opened before anything is done to a target.
fn trace(args: TraceArgs) -> Result<(), crate::Error> {
    use kerf_tools::trace::tracer::{Output, Trace};
    if args.live.record.is_some() || args.live.serve.is_some() {
        let why = "--record and --serve are for count, time and sum (a trace is its own record)";
        return Err(kerf_tools::ToolError::Usage(why.into()).into());
    }
    let output = match (&args.send, &args.live.output) {
        (Some(_), Some(_)) => {
            return Err(kerf_tools::ToolError::Usage("--send and -o: choose one".into()).into())
        }
        (Some(addr), None) => {
            let machine = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "unknown".into());
            Output::Sink(Box::new(tr::SendSink::new(addr, &machine)))
        }
        (None, Some(p)) => {
            let format = match &args.format {
                Some(f) => Format::from_name(f).ok_or_else(|| TraceError::UnknownFormat {
                    path: PathBuf::from(format!("--format {f}")),
                }),
                None => Format::from_path(p).ok_or(TraceError::UnknownFormat { path: p.clone() }),
            }
            .map_err(crate::Error::Trace)?;
            let out = create(p).map_err(crate::Error::Trace)?;
            let raw =
                |source| crate::Error::Trace(TraceError::Raw { path: Some(p.clone()), source });
            // A raw trace gets the ring records packed, as the rings hold them: the reader
            // keeps up with the highest rates, and `kerf trace convert` decodes them.
            if format == Format::Raw {
                // A drain's records are written whole, bypassing the 1 MiB buffer when they
                // are bigger than it; a smaller buffer lets most of them bypass it.
                let file = out.into_inner().map_err(|e| {
                    crate::Error::Trace(TraceError::Output {
                        path: p.clone(),
                        source: e.into_error(),
                    })
                })?;
                Output::packed(Box::new(std::io::BufWriter::with_capacity(64 << 10, file)))
                    .map_err(raw)?
            } else {
                Output::Sink(tr::sink(format, out).map_err(raw)?)
            }
        }
        (None, None) => Output::Live,
    };
    let kernel = args.live.kernel;
    let mut tool = Trace::new(
        &args.probes,
        kernel,
        args.ring_slots,
        args.off.clone(),
        args.control.clone(),
        output,
    )?;
    if tool.wants_kernel() {
        if args.live.pid.is_none() && args.live.command.is_empty() || !tool.has_own_lines() {
            return Err(kerf_tools::ToolError::Usage(
                "kernel: probes go beside probes of a process (-p PID or -- CMD); for the kernel alone, use --kernel".into(),
            )
            .into());
        }
        // Opened (and analysed) before the process is touched: it is held only while both
        // sets of probes go in.
        let k =
            kerf_session::live::KernelTarget::open(None).map_err(kerf_tools::ToolError::from)?;
        tool = tool.with_kernel(k);
    }
    let mut live = args.live.clone();
    // -o is the trace here: the summary goes to stderr (or stdout as JSON with --json).
    live.output = None;
    crate::live::run_tool(&tool, "trace", &live)?;
    match tool.output_error() {
        Some(e) => Err(kerf_tools::ToolError::TraceOutput(e).into()),
        None => Ok(()),
    }
}

fn convert(a: ConvertArgs) -> Result<(), crate::Error> {
    if let Some(addr) = &a.send {
        return send(&a.input, addr, a.machine.as_deref()).map_err(crate::Error::Trace);
    }
    let format = match (&a.format, &a.output) {
        (Some(f), _) => Format::from_name(f).ok_or_else(|| TraceError::UnknownFormat {
            path: PathBuf::from(format!("--format {f}")),
        }),
        (None, Some(p)) => {
            Format::from_path(p).ok_or(TraceError::UnknownFormat { path: p.clone() })
        }
        (None, None) => Ok(Format::Text),
    }
    .map_err(crate::Error::Trace)?;
    let input = open(&a.input).map_err(crate::Error::Trace)?;
    let summary = match &a.output {
        Some(p) => {
            let out = create(p).map_err(crate::Error::Trace)?;
            let mut sink = tr::sink(format, out)
                .map_err(|source| TraceError::Raw { path: Some(p.clone()), source })
                .map_err(crate::Error::Trace)?;
            tr::convert(input, &mut *sink)
        }
        None => {
            let mut sink = tr::sink(format, std::io::stdout().lock())
                .map_err(|source| TraceError::Raw { path: None, source })
                .map_err(crate::Error::Trace)?;
            tr::convert(input, &mut *sink)
        }
    }
    .map_err(|e| match e {
        TraceError::Output { source, .. }
            if a.output.is_none() && source.kind() == std::io::ErrorKind::BrokenPipe =>
        {
            crate::Error::ClosedPipe
        }
        // convert() knows neither file's name.
        TraceError::Raw { path: None, source } => {
            crate::Error::Trace(TraceError::Raw { path: Some(a.input.clone()), source })
        }
        TraceError::Output { source, .. } => crate::Error::Trace(TraceError::Output {
            path: a.output.clone().unwrap_or_else(|| "standard output".into()),
            source,
        }),
        e => crate::Error::Trace(e),
    })?;
    if let Some(p) = &a.output {
        err_line!("{}: {} events, {} lost", p.display(), summary.events, summary.lost);
    }
    match summary.incomplete {
        // What could be read was converted; the exit status says the input was not whole.
        Some(why) => Err(crate::Error::Incomplete { path: a.input.clone(), why }),
        None => Ok(()),
    }
}

/// Replays a raw trace to a collector: its sources go in the hello, every other record
/// follows in order (waiting for room rather than dropping).
fn send(input: &Path, addr: &str, machine: Option<&str>) -> Result<(), TraceError> {
    let raw = |source| TraceError::Raw { path: Some(input.into()), source };
    let mut sources = Vec::new();
    let mut r = Reader::new(open(input)?).map_err(raw)?;
    while let Some(rec) = r.next_record().map_err(raw)? {
        if let Record::Source(s) = rec {
            sources.push(s);
        }
    }
    let machine = match machine {
        Some(m) => m.to_string(),
        None => std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "unknown".into()),
    };
    let sender = tr::collect::Sender::new(addr, &machine, sources, 1 << 16, Backpressure::Block)?;
    let mut r = Reader::new(open(input)?).map_err(raw)?;
    while let Some(rec) = r.next_record().map_err(raw)? {
        if !matches!(rec, Record::Source(_) | Record::End) {
            sender.send(&rec);
        }
    }
    let stats = sender.finish(Duration::from_secs(30))?;
    err_line!(
        "sent {} events to {addr} ({} records acknowledged, {} connections)",
        stats.events,
        stats.acked,
        stats.connections
    );
    Ok(())
}

fn print_counts(counts: &[SourceCount]) {
    err_line!(
        "{:<5} {:<20} {:<16} {:>12} {:>12} {:>12} {:>5}",
        "id",
        "machine",
        "source",
        "events",
        "lost(send)",
        "lost(ring)",
        "conns"
    );
    for c in counts {
        err_line!(
            "{:<5} {:<20} {:<16} {:>12} {:>12} {:>12} {:>5}{}",
            c.id,
            c.machine,
            c.name,
            c.events,
            c.lost_sender,
            c.lost_ring,
            c.connections,
            if c.ended { "" } else { "  (not finished)" }
        );
    }
}

pub fn collect(a: CollectArgs) -> Result<(), crate::Error> {
    kerf_session::live::catch_signals();
    let out = create(&a.output).map_err(crate::Error::Trace)?;
    let collector =
        Collector::bind(&a.listen, Box::new(out)).map_err(|e| crate::Error::Trace(e.into()))?;
    if let Ok(addr) = collector.local_addr() {
        err_line!("collecting on {addr} into {}", a.output.display());
    }
    let report = collector
        .run(kerf_session::live::stop_flag(), a.senders)
        .map_err(|e| crate::Error::Trace(e.into()))?;
    print_counts(&report.sources);
    for e in &report.errors {
        err_line!("kerf: connection {e}");
    }
    Ok(())
}
