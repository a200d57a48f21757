//! The tools' errors: each variant carries what the tool was doing and on what; the CLI turns
//! them into its one-line message (their `Display`) and an exit status.

use kerf_session::instrument::InstrumentError;
use kerf_session::live::{InstallError, LiveError};
use kerf_session::spec::SpecError;
use kerf_session::LoadError;
use std::fmt;

#[derive(Debug)]
pub enum ToolError {
    /// A spec that does not parse, or resolves to nothing.
    Spec(SpecError),
    /// `kerf time` was given a point (an offset, `@blocks`, `@exits`), not a function.
    NotAFunction { spec: String },
    /// Finding, launching, analysing or releasing the target.
    Live(LiveError),
    /// Installing probes in a process failed (with how the process ended, if it did).
    Install(Box<InstallError<ToolError>>),
    /// Installing probes in the kernel failed.
    KernelInstall(InstrumentError),
    /// Taking the probes out of process `pid` failed.
    Restore { pid: i32, source: InstrumentError },
    /// Taking the probes out of the kernel failed.
    RestoreKernel(InstrumentError),
    /// A signal killed the target while it was instrumented (`ended` says how), or once its
    /// probes were gone (`after_exec`: they went with its old program at an `exec`, or kerf
    /// took them out at `--duration` and waited for the command); `signal` is the signal's
    /// number.
    Killed { ended: String, after_exec: bool, signal: i32 },
    /// Loading or analysing an image (`kerf analyze`).
    Load(LoadError),
    /// Planning splices offline (`kerf analyze --plan`).
    Plan(InstrumentError),
    /// `kerf analyze --function NAME` found no such function.
    NoFunction { name: String, close: Vec<String> },
    /// `kerf analyze` without a file, `-p` or `--kernel`.
    NothingToAnalyze,
    /// An operation on kerf's own files or processes (the demo's workload).
    Io { what: &'static str, source: std::io::Error },
    /// A probe line of `kerf trace` that does not parse.
    Probe(crate::trace::probe::ProbeError),
    /// Options that cannot work together, or a probe this target cannot run (with why).
    Usage(String),
    /// Writing or sending a trace failed part-way (the events after it are not in it).
    TraceOutput(String),
    /// A hardware event to count (`--counter`) that this machine cannot count, or that kerf
    /// cannot count per function (`source` None: the PMU is there).
    Counter { event: String, source: Option<kerf_os::pmu::PmuError> },
    /// Installing or removing a JIT in process `pid`.
    Jit { pid: i32, source: kerf_session::jit::JitFail },
}

impl fmt::Display for ToolError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolError::Spec(e) => write!(f, "{e}"),
            ToolError::NotAFunction { spec } => {
                write!(
                    f,
                    "{spec}: kerf time takes functions ([MODULE:]SYMBOL or a glob), not points"
                )
            }
            ToolError::Live(e) => write!(f, "{e}"),
            ToolError::Install(e) => write!(f, "{e}"),
            ToolError::KernelInstall(e) => write!(f, "{e}"),
            ToolError::Restore { pid, source } => write!(f, "restoring process {pid}: {source}"),
            ToolError::RestoreKernel(e) => write!(f, "restoring the kernel: {e}"),
            ToolError::Counter { event, source: Some(e) } => {
                write!(f, "--counter {event}: {e}")?;
                if matches!(e, kerf_os::pmu::PmuError::Unavailable { .. }) {
                    write!(f, ". Wall time and virtual time (--virtual) need no PMU")?;
                }
                Ok(())
            }
            ToolError::Counter { event, source: None } => write!(
                f,
                "--counter {event}: this CPU can count it, but kerf does not count hardware \
                 events per function yet (no machine it is built and tested on has a PMU); \
                 wall time and virtual time (--virtual) work"
            ),
            ToolError::Killed { ended, after_exec: true, .. } => write!(f, "{ended}"),
            ToolError::Killed { ended, .. } => write!(f, "{ended} while instrumented"),
            ToolError::Load(e) => write!(f, "{e}"),
            ToolError::Plan(e) => write!(f, "{e}"),
            ToolError::NoFunction { name, close } if close.is_empty() => {
                write!(f, "no function named '{name}'")
            }
            ToolError::NoFunction { name, close } => {
                write!(f, "no function named '{name}'; close: {}", close.join(", "))
            }
            ToolError::NothingToAnalyze => write!(f, "give a file to analyse, or -p PID"),
            ToolError::Io { what, source } => write!(f, "{what}{source}"),
            ToolError::Probe(e) => write!(f, "{e}"),
            ToolError::Usage(e) => write!(f, "{e}"),
            ToolError::TraceOutput(e) => write!(f, "the trace's output failed: {e}"),
            ToolError::Jit { pid, source } => write!(f, "JIT in process {pid}: {source}"),
        }
    }
}

impl std::error::Error for ToolError {}

impl From<crate::trace::probe::ProbeError> for ToolError {
    fn from(e: crate::trace::probe::ProbeError) -> Self {
        ToolError::Probe(e)
    }
}

impl From<SpecError> for ToolError {
    fn from(e: SpecError) -> Self {
        ToolError::Spec(e)
    }
}

impl From<LiveError> for ToolError {
    fn from(e: LiveError) -> Self {
        ToolError::Live(e)
    }
}

impl From<InstallError<ToolError>> for ToolError {
    fn from(e: InstallError<ToolError>) -> Self {
        ToolError::Install(Box::new(e))
    }
}

impl From<LoadError> for ToolError {
    fn from(e: LoadError) -> Self {
        ToolError::Load(e)
    }
}
