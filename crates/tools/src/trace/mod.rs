//! The tracer's output side (issue 11): what an event is ([`event`]), the raw format that
//! stores events at high rates ([`raw`]), the outputs made from them (live text and JSON Lines
//! in [`text`], Perfetto in [`perfetto`]), `kerf trace convert` ([`convert`]) and remote
//! collection ([`collect`]). The tracer hands its records to any [`Sink`].

pub mod collect;
pub mod event;
pub mod perfetto;
pub mod probe;
pub mod program;
pub mod raw;
pub mod text;
pub mod tracer;
pub mod unpack;

use event::{Record, Tables};
use raw::{RawError, Reader};
use std::fmt;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

/// What has gone through an output: the totals its summary shows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Summary {
    pub events: u64,
    /// Events lost, added up over every loss record.
    pub lost: u64,
    pub loss_records: u64,
    /// Why the input stopped before its end record (cut short, unfinished), if it did.
    pub incomplete: Option<String>,
}

impl Summary {
    pub fn count(&mut self, r: &Record) {
        match r {
            Record::Event(_) => self.events += 1,
            Record::Loss(l) => {
                self.lost += l.count;
                self.loss_records += 1;
            }
            _ => {}
        }
    }
}

/// Where records go: an output file or the live view. Records come in the order of the trace;
/// the tables hold every source and thread name seen up to and including the record.
pub trait Sink {
    fn record(&mut self, t: &Tables, r: &Record) -> io::Result<()>;
    /// After the last record: write the summary and flush.
    fn finish(&mut self, t: &Tables, s: &Summary) -> io::Result<()>;
    /// After `finish`: a line on what the output did, where it has more to say than the
    /// summary (a sender's counts).
    fn report(&self) -> Option<String> {
        None
    }
}

/// The outputs `kerf trace convert` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Text,
    JsonLines,
    Perfetto,
    /// The raw format again (to check or rewrite a file; with `--send`, what is replayed).
    Raw,
}

impl Format {
    /// The format a file name asks for: `.txt`, `.jsonl`, `.perfetto-trace` (or `.pftrace`),
    /// `.kerf-trace` (raw).
    pub fn from_path(p: &Path) -> Option<Format> {
        let name = p.file_name()?.to_str()?;
        [
            (".txt", Format::Text),
            (".jsonl", Format::JsonLines),
            (".perfetto-trace", Format::Perfetto),
            (".pftrace", Format::Perfetto),
            (".kerf-trace", Format::Raw),
        ]
        .into_iter()
        .find(|(ext, _)| name.ends_with(ext))
        .map(|(_, f)| f)
    }

    /// A format by name, as `--format` takes it.
    pub fn from_name(n: &str) -> Option<Format> {
        match n {
            "text" => Some(Format::Text),
            "jsonl" => Some(Format::JsonLines),
            "perfetto" => Some(Format::Perfetto),
            "raw" => Some(Format::Raw),
            _ => None,
        }
    }
}

/// Why tracing output failed.
#[derive(Debug)]
pub enum TraceError {
    /// Reading or checking a raw trace (`path`, if it came from a file).
    Raw { path: Option<PathBuf>, source: RawError },
    /// Opening or writing an output.
    Output { path: PathBuf, source: io::Error },
    /// Opening an input.
    Input { path: PathBuf, source: io::Error },
    /// No `--format` and an output name whose extension says none.
    UnknownFormat { path: PathBuf },
    /// Remote collection failed.
    Collect(collect::CollectError),
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceError::Raw { path: Some(p), source } => write!(f, "{}: {source}", p.display()),
            TraceError::Raw { path: None, source } => write!(f, "{source}"),
            TraceError::Output { path, source } => write!(f, "{}: {source}", path.display()),
            TraceError::Input { path, source } => write!(f, "{}: {source}", path.display()),
            TraceError::UnknownFormat { path } => write!(
                f,
                "{}: cannot tell the format from the name (.txt, .jsonl, .perfetto-trace, .kerf-trace); give --format",
                path.display()
            ),
            TraceError::Collect(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for TraceError {}

impl From<collect::CollectError> for TraceError {
    fn from(e: collect::CollectError) -> Self {
        TraceError::Collect(e)
    }
}

/// Writes records into a raw trace (the [`Format::Raw`] output of convert).
pub struct RawSink<W: Write>(pub Option<raw::Writer<W>>);

impl<W: Write> Sink for RawSink<W> {
    fn record(&mut self, _t: &Tables, r: &Record) -> io::Result<()> {
        if *r == Record::End {
            return Ok(());
        }
        let w = self.0.as_mut().ok_or_else(|| io::Error::other("raw output already finished"))?;
        w.write(r).map_err(raw_io)
    }

    fn finish(&mut self, _t: &Tables, s: &Summary) -> io::Result<()> {
        match self.0.take() {
            // An incomplete input gives an incomplete output: no end record is made up.
            Some(w) if s.incomplete.is_some() => w.abandon().map(|_| ()).map_err(raw_io),
            Some(w) => w.finish().map(|_| ()).map_err(raw_io),
            None => Ok(()),
        }
    }
}

fn raw_io(e: RawError) -> io::Error {
    match e {
        RawError::Io { source, .. } => source,
        e => io::Error::other(e.to_string()),
    }
}

/// The output for a format, writing to `out`.
pub fn sink<'a, W: Write + 'a>(format: Format, out: W) -> Result<Box<dyn Sink + 'a>, RawError> {
    Ok(match format {
        Format::Text => Box::new(text::Text::new(out)),
        Format::JsonLines => Box::new(text::JsonLines::new(out)),
        Format::Perfetto => Box::new(perfetto::Perfetto::new(out)),
        Format::Raw => Box::new(RawSink(Some(raw::Writer::new(out)?))),
    })
}

/// Reads a raw trace and hands every record to `sink`, then its summary. A trace cut short or
/// unfinished is converted up to its last whole record and the summary says why it stopped
/// (`incomplete`); a corrupt one is an error after the records before it went out.
pub fn convert(input: impl Read, sink: &mut dyn Sink) -> Result<Summary, TraceError> {
    let raw = |source| TraceError::Raw { path: None, source };
    let out = |source| TraceError::Output { path: PathBuf::from("output"), source };
    let mut reader = Reader::new(input).map_err(raw)?;
    let mut summary = Summary::default();
    loop {
        match reader.next_record() {
            Ok(Some(r)) => {
                summary.count(&r);
                sink.record(reader.tables(), &r).map_err(out)?;
            }
            Ok(None) => break,
            Err(e @ (RawError::Truncated { .. } | RawError::Unfinished { .. })) => {
                summary.incomplete = Some(e.to_string());
                break;
            }
            Err(e) => {
                summary.incomplete = Some(e.to_string());
                sink.finish(reader.tables(), &summary).map_err(out)?;
                return Err(raw(e));
            }
        }
    }
    sink.finish(reader.tables(), &summary).map_err(out)?;
    Ok(summary)
}

/// Sends records to a collector (`kerf trace --send`): the sender starts at the first record,
/// the source, which its hello carries. Events meet a full queue by dropping and counting
/// (the target's rings keep draining); the losses go out as records.
pub struct SendSink {
    addr: String,
    machine: String,
    sender: Option<collect::Sender>,
    error: Option<collect::CollectError>,
    /// The sender's counts when it finished.
    pub stats: Option<collect::SenderStats>,
}

impl SendSink {
    pub fn new(addr: &str, machine: &str) -> SendSink {
        SendSink {
            addr: addr.into(),
            machine: machine.into(),
            sender: None,
            error: None,
            stats: None,
        }
    }
}

impl Sink for SendSink {
    fn record(&mut self, _t: &Tables, r: &Record) -> io::Result<()> {
        match (r, &self.sender) {
            (Record::Source(s), None) => {
                let policy = collect::Backpressure::Drop;
                match collect::Sender::new(
                    &self.addr,
                    &self.machine,
                    vec![s.clone()],
                    1 << 16,
                    policy,
                ) {
                    Ok(sender) => self.sender = Some(sender),
                    Err(e) => self.error = Some(e),
                }
            }
            (Record::End, _) => {}
            (_, Some(sender)) => sender.send(r),
            (_, None) => {}
        }
        Ok(())
    }

    fn finish(&mut self, _t: &Tables, _s: &Summary) -> io::Result<()> {
        if let Some(e) = self.error.take() {
            return Err(io::Error::other(e.to_string()));
        }
        let Some(sender) = self.sender.take() else { return Ok(()) };
        match sender.finish(std::time::Duration::from_secs(30)) {
            Ok(stats) => {
                self.stats = Some(stats);
                Ok(())
            }
            Err(e) => Err(io::Error::other(e.to_string())),
        }
    }

    fn report(&self) -> Option<String> {
        let s = self.stats.as_ref()?;
        Some(format!(
            "sent to {}: {} events, {} dropped at the sender (queue full), {} records acknowledged, {} connections",
            self.addr, s.events, s.dropped, s.acked, s.connections
        ))
    }
}
