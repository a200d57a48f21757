//! The `kerf` command line: parses arguments, chooses the target once, runs a tool from
//! `kerf_tools`, prints its results as a table or JSON, and turns errors into a one-line
//! message and a non-zero exit status.

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(rust_2018_idioms, clippy::undocumented_unsafe_blocks)]

/// `eprintln!` that cannot panic. A closed stderr (`kerf ... 2>&1 | head`) must not end kerf
/// while it holds a target: a panic there leaves a process's probes or code cache without
/// their kerf. What could not be written is dropped.
macro_rules! err_line {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($t)*);
    }};
}

/// [`err_line!`] without the newline.
macro_rules! err_text {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), $($t)*);
    }};
}

/// `print!` that cannot panic (a report written after the target is restored, to a reader
/// that may have gone).
macro_rules! out_text {
    ($($t:tt)*) => {{
        use std::io::Write as _;
        let _ = write!(std::io::stdout().lock(), $($t)*);
    }};
}

mod analyze;
mod count;
mod cover;
mod demo;
mod hunt;
mod jit;
mod live;
mod locks;
mod plot;
mod progress;
mod serve;
mod sum;
mod time;
mod top;
mod trace;

use clap::{Parser, Subcommand};

/// Analysis allocates and frees millions of small vectors across threads; mimalloc does that
/// several times faster than glibc's allocator.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::process::ExitCode;

/// Why a command failed: a tool's typed error, or the command line's own output file.
/// Printed as `kerf: MESSAGE`, and kerf exits 1.
#[derive(Debug)]
pub enum Error {
    Tool(kerf_tools::ToolError),
    /// Converting or collecting a trace.
    Trace(kerf_tools::trace::TraceError),
    /// A raw trace was converted up to where it stops short (`why`).
    Incomplete {
        path: std::path::PathBuf,
        why: String,
    },
    /// Standard output's reader went away (`kerf trace convert f.raw | head`): kerf stops
    /// without a word, with the status a shell gives a program SIGPIPE ended (128 + 13), as
    /// `cat` would (it said "standard output: Broken pipe").
    ClosedPipe,
    /// `--output FILE` could not be created.
    Output {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// `--serve ADDR` could not listen there.
    Serve {
        addr: String,
        source: std::io::Error,
    },
    /// An input file (`kerf cover --add`) that cannot be read or is not what it should be.
    Input {
        path: std::path::PathBuf,
        what: String,
    },
    /// `kerf plot`: a record file that cannot be read or drawn, or a picture not written.
    Plot {
        path: std::path::PathBuf,
        what: String,
    },
    /// The command kerf launched exited with this code (not 0): kerf exits with it too, as
    /// `time` and `strace` do, so that a script sees the command's failure. Its summary says
    /// so already; nothing more is printed.
    Command {
        code: u8,
    },
}

impl Error {
    /// [`Error::Command`] when a summary's `target` (see `kerf_tools::live::stop_json`) says
    /// that the command kerf launched exited with a code other than 0.
    pub fn command_exit(launched: bool, summary: &serde_json::Value) -> Result<(), Error> {
        let code = summary["target"]["exit_code"].as_u64().filter(|&c| launched && c != 0);
        let signal = summary["target"]["signal"].as_u64().filter(|_| launched);
        match (code, signal) {
            (Some(c), _) => Err(Error::Command { code: u8::try_from(c).unwrap_or(1) }),
            (_, Some(s)) => Err(Error::Command { code: signal_status(s) }),
            _ => Ok(()),
        }
    }

    /// The error `e` a tool ended with: if a signal killed a command kerf launched
    /// ([`kerf_tools::ToolError::Killed`]), kerf says so, then exits as a shell reports such
    /// a death, 128 + the signal (a script could not tell `kill -TERM` from `exit 1`
    /// otherwise). Any other error, and the death of a process given by -p (whose end is not
    /// kerf's status), is an error: exit 1.
    pub fn ended(launched: bool, e: kerf_tools::ToolError) -> Error {
        match e {
            kerf_tools::ToolError::Killed { signal, .. } if launched && signal > 0 => {
                err_line!("kerf: {e}");
                Error::Command { code: signal_status(signal as u64) }
            }
            e => e.into(),
        }
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Tool(e) => write!(f, "{e}"),
            Error::Output { path, source } => write!(f, "{}: {source}", path.display()),
            Error::Plot { path, what } | Error::Input { path, what } => {
                write!(f, "{}: {what}", path.display())
            }
            Error::Serve { addr, source } => write!(f, "--serve {addr}: {source}"),
            Error::Trace(e) => write!(f, "{e}"),
            Error::Incomplete { path, why } => {
                write!(f, "{}: {why}; converted what came before", path.display())
            }
            Error::Command { code } => write!(f, "the command exited with code {code}"),
            Error::ClosedPipe => write!(f, "standard output: its reader is gone"),
        }
    }
}

/// A shell's status for a command killed by signal `s`: 128 + `s`.
fn signal_status(s: u64) -> u8 {
    u8::try_from(128 + s).unwrap_or(1)
}

/// Say so when the command to launch is a script (`#!`): the kernel runs its interpreter, and
/// that is the program kerf instruments (its symbols, its `main`), not the script.
pub fn note_script(command: &[String]) {
    use std::io::Read;
    let Some(program) = command.first() else { return };
    let path = if program.contains('/') {
        Some(std::path::PathBuf::from(program))
    } else {
        std::env::var_os("PATH")
            .and_then(|p| std::env::split_paths(&p).map(|d| d.join(program)).find(|f| f.is_file()))
    };
    let mut head = [0u8; 128];
    let n = path
        .and_then(|p| std::fs::File::open(p).ok())
        .and_then(|mut f| f.read(&mut head).ok())
        .unwrap_or(0);
    if let Some(line) = head[..n].strip_prefix(b"#!") {
        let line = line.split(|&b| b == b'\n').next().unwrap_or_default();
        let interp = String::from_utf8_lossy(line).trim().to_string();
        err_line!(
            "kerf: {program} is a script: the kernel runs its interpreter ({interp}), and kerf \
             instruments that program"
        );
    }
}

impl From<kerf_tools::ToolError> for Error {
    fn from(e: kerf_tools::ToolError) -> Self {
        Error::Tool(e)
    }
}

#[derive(Parser)]
#[command(name = "kerf", version, about = "Dynamic instrumentation of live x86-64 Linux code")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Structural analysis: functions, basic blocks, jump tables, liveness, call graph.
    Analyze(analyze::Args),
    /// Count how often points of a live process or the kernel run (spliced counters).
    Count(count::Args),
    /// Basic-block coverage of a live process, a command or the kernel, with probes that
    /// take themselves out once hit (the target converges to its own code); lcov, drcov and
    /// JSON output, runs merged.
    Cover(cover::Args),
    /// Time functions of a live process or the kernel: calls, time per call, concurrency.
    Time(time::Args),
    /// Sum a value (an argument, a return value, a register) at points of a live process or
    /// the kernel: KernInst's accumulators, per second and per event.
    Sum(sum::Args),
    /// Launch a bundled multi-threaded workload and show live calls and times spliced into it.
    Demo(demo::Args),
    /// Trace events at any instruction of a live process, a command, or the kernel, with
    /// captured registers, arguments, return values, memory and strings, filters and streams;
    /// `kerf trace convert` turns a raw trace into text, JSON Lines or Perfetto.
    Trace(Box<trace::TraceArgs>),
    /// Receive traces from remote senders over TCP into one raw trace file.
    Collect(trace::CollectArgs),
    /// Waiting threads in a process: time spent acquiring pthread mutexes and rwlocks, per
    /// lock and per call site, and the average number of threads waiting.
    Locks(locks::Args),
    /// A live terminal view of timed functions with sparklines: expand a function into its
    /// callees and collapse it with keys, switch between wall time, CPU time, threads inside
    /// and calls.
    Top(top::Args),
    /// Find where the time goes below root functions: rounds of timers on each function's
    /// calls, following the callees that hold more than a threshold of their caller's time,
    /// down to the leaves; prints the tree (wall and virtual time, self time, calls).
    Hunt(hunt::Args),
    /// JIT instrumentation: threads that enter root functions run from kerf's code cache,
    /// with plugins (block counts) woven into every block, until they leave the region.
    Jit(jit::Args),
    /// Draw the curves of a --record file (kerf count, kerf time, kerf sum): a panel per
    /// metric, the busiest functions overlaid, as SVG or PNG.
    Plot(plot::Args),
    /// The demo's workload (internal).
    #[command(name = "__workload", hide = true)]
    Workload { threads: usize },
}

/// Read the signal dispositions kerf's parent gave it before the Rust runtime changes
/// SIGPIPE's: the C library runs `.init_array` entries before `main`, and a command kerf
/// launches gets them back.
#[used]
#[link_section = ".init_array"]
static RECORD_INHERITED: extern "C" fn() = kerf_session::live::record_inherited_signals;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Analyze(a) => analyze::run(a),
        Command::Count(a) => count::run(a),
        Command::Cover(a) => cover::run_cover(a),
        Command::Time(a) => time::run(a),
        Command::Sum(a) => sum::run(a),
        Command::Demo(a) => demo::run(a),
        Command::Trace(c) => trace::run(*c),
        Command::Collect(a) => trace::collect(a),
        Command::Plot(a) => plot::run(a),
        Command::Hunt(a) => hunt::run(a),
        Command::Top(a) => top::run_top(a),
        Command::Locks(a) => locks::run(a),
        Command::Jit(a) => jit::run(a),
        Command::Workload { threads } => kerf_tools::demo::workload(threads),
    };
    let code = match result {
        Ok(()) => 0,
        Err(Error::Command { code }) => code,
        Err(Error::ClosedPipe) => 128 + 13,
        Err(e) => {
            err_line!("kerf: {e}");
            1
        }
    };
    exit_now(code)
}

/// End kerf with `code` once its output is out, without the C library's exit handlers: the
/// one statically linked mimalloc registers gives every free page back to the kernel, one
/// `madvise` each (329 of them after a `kerf jit` of python3.11, 10-30 ms at the end of every
/// run), for memory the kernel frees anyway an instant later. Every tool has returned by
/// now: its probes are out, its files written and closed, its threads joined.
fn exit_now(code: u8) -> ExitCode {
    use std::io::Write;
    // (As the normal way out does, a flush that fails changes nothing: a closed pipe.)
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit ends the process at once; nothing of kerf's needs to run after this
    // (see above), and the buffered output was flushed just now.
    unsafe { libc::_exit(i32::from(code)) }
}
