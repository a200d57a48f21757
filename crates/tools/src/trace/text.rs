//! The two line outputs: live text (one line per event, like `perf script`) and JSON Lines (one
//! object per record, then a summary). Both stream: a record is written as it is read.

use super::event::{Event, Record, Tables, Value};
use super::{Sink, Summary};
use serde_json::{json, Map, Value as Json};
use std::io::{self, Write};

/// Shows a captured value as text: hex or decimal integers, strings quoted with escapes (and
/// `...` after the quote when truncated), faults as `<fault ADDR>`.
pub fn show_value(v: &Value, hex: bool) -> String {
    match v {
        Value::Unsigned(u) if hex => format!("{u:#x}"),
        Value::Unsigned(u) => u.to_string(),
        Value::Signed(i) => i.to_string(),
        Value::Bytes { data, truncated } => {
            format!("\"{}\"{}", data.escape_ascii(), if *truncated { "..." } else { "" })
        }
        Value::Fault { addr } => format!("<fault {addr:#x}>"),
    }
}

/// `SECONDS.NANOSECONDS` of a CLOCK_MONOTONIC time.
pub fn show_time(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// Who an event or loss is from: `MACHINE:` (for a remote source) and the comm.
fn who(t: &Tables, source: u16, tid: u32) -> String {
    let comm = t.comm(source, tid);
    match t.source(source) {
        Some(s) if !s.machine.is_empty() => format!("{}:{comm}", s.machine),
        _ => comm.to_string(),
    }
}

/// One event as a text line (without the newline).
pub fn event_line(t: &Tables, e: &Event) -> String {
    let mut line = format!(
        "{:>16} {}/{} [{:03}] {}: ",
        who(t, e.source, e.tid),
        e.pid,
        e.tid,
        e.cpu,
        show_time(e.time_ns)
    );
    match t.probe(e) {
        Some(p) => {
            line.push_str(&p.point);
            for (c, v) in p.captures.iter().zip(&e.values) {
                line.push(' ');
                line.push_str(&c.name);
                line.push('=');
                line.push_str(&show_value(v, c.hex));
            }
        }
        None => line.push_str(&format!("probe#{}", e.probe)),
    }
    line
}

/// Live text: one line per event, a `LOST` line per loss, a line per stream's counters, and a
/// summary at the end.
pub struct Text<W: Write> {
    out: W,
}

impl<W: Write> Text<W> {
    pub fn new(out: W) -> Self {
        Text { out }
    }
}

impl<W: Write> Sink for Text<W> {
    fn record(&mut self, t: &Tables, r: &Record) -> io::Result<()> {
        match r {
            Record::Event(e) => writeln!(self.out, "{}", event_line(t, e)),
            Record::Loss(l) => {
                let src = t.source(l.source).map_or("?", |s| s.name.as_str());
                writeln!(
                    self.out,
                    "LOST {} events of stream {} ({src}, {}) between {} and {}",
                    l.count,
                    t.stream_name(l.source, l.stream),
                    l.origin.as_str(),
                    show_time(l.from_ns),
                    show_time(l.to_ns)
                )
            }
            Record::Counters(c) => writeln!(
                self.out,
                "stream {} ({}): emitted {}, filtered {}, delivered {}, lost {}",
                t.stream_name(c.source, c.stream),
                t.source(c.source).map_or("?", |s| s.name.as_str()),
                c.emitted,
                c.filtered,
                c.delivered,
                c.lost
            ),
            Record::Source(_) | Record::Thread(_) | Record::End => Ok(()),
        }
    }

    fn finish(&mut self, _t: &Tables, s: &Summary) -> io::Result<()> {
        writeln!(
            self.out,
            "# {} events, {} lost in {} loss records{}",
            s.events,
            s.lost,
            s.loss_records,
            match &s.incomplete {
                Some(why) => format!("; {why}"),
                None => String::new(),
            }
        )?;
        self.out.flush()
    }
}

/// A value as JSON: numbers, strings (`{"bytes_hex": ..}` when not UTF-8), and objects for
/// truncated strings and faults.
fn json_value(v: &Value) -> Json {
    match v {
        Value::Unsigned(u) => json!(u),
        Value::Signed(i) => json!(i),
        Value::Bytes { data, truncated } => {
            let s = match std::str::from_utf8(data) {
                Ok(s) => json!(s),
                Err(_) => {
                    json!({ "bytes_hex": data.iter().map(|b| format!("{b:02x}")).collect::<String>() })
                }
            };
            if *truncated {
                json!({ "string": s, "truncated": true })
            } else {
                s
            }
        }
        Value::Fault { addr } => json!({ "fault": format!("{addr:#x}") }),
    }
}

/// JSON Lines: an object per source, event, loss and counters record (`"type"` says which),
/// then a summary object.
pub struct JsonLines<W: Write> {
    out: W,
}

impl<W: Write> JsonLines<W> {
    pub fn new(out: W) -> Self {
        JsonLines { out }
    }
}

impl<W: Write> Sink for JsonLines<W> {
    fn record(&mut self, t: &Tables, r: &Record) -> io::Result<()> {
        let src = |id: u16| t.source(id).map(|s| (s.machine.clone(), s.name.clone()));
        let obj = match r {
            Record::Source(s) => json!({
                "type": "source", "source": s.id, "machine": s.machine,
                "kind": match s.kind { super::event::SourceKind::Process => "process", super::event::SourceKind::Kernel => "kernel" },
                "pid": s.pid, "name": s.name, "realtime_offset_ns": s.realtime_offset_ns,
                "streams": s.streams.iter().map(|x| x.name.clone()).collect::<Vec<_>>(),
                "probes": s.probes.iter().map(|p| json!({
                    "name": p.name, "point": p.point, "kind": p.kind.as_str(),
                    "stream": t.stream_name(s.id, p.stream),
                    "captures": p.captures.iter().map(|c| c.name.clone()).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            }),
            Record::Thread(_) | Record::End => return Ok(()),
            Record::Event(e) => {
                let mut args = Map::new();
                let p = t.probe(e);
                if let Some(p) = p {
                    for (c, v) in p.captures.iter().zip(&e.values) {
                        args.insert(c.name.clone(), json_value(v));
                    }
                }
                let (machine, _) = src(e.source).unwrap_or_default();
                json!({
                    "type": "event", "time_ns": e.time_ns, "tsc": e.tsc, "source": e.source,
                    "machine": machine, "comm": t.comm(e.source, e.tid), "pid": e.pid,
                    "tid": e.tid, "cpu": e.cpu, "probe": p.map(|p| p.name.clone()),
                    "point": p.map(|p| p.point.clone()), "kind": e.kind.as_str(),
                    "stream": t.stream_name(e.source, e.stream), "args": args,
                })
            }
            Record::Loss(l) => json!({
                "type": "loss", "source": l.source, "stream": t.stream_name(l.source, l.stream),
                "count": l.count, "from_ns": l.from_ns, "to_ns": l.to_ns,
                "origin": l.origin.as_str(),
            }),
            Record::Counters(c) => json!({
                "type": "counters", "source": c.source,
                "stream": t.stream_name(c.source, c.stream), "time_ns": c.time_ns,
                "emitted": c.emitted, "filtered": c.filtered, "delivered": c.delivered,
                "lost": c.lost,
            }),
        };
        serde_json::to_writer(&mut self.out, &obj)?;
        self.out.write_all(b"\n")
    }

    fn finish(&mut self, _t: &Tables, s: &Summary) -> io::Result<()> {
        let obj = json!({
            "type": "summary", "events": s.events, "lost": s.lost,
            "loss_records": s.loss_records, "complete": s.incomplete.is_none(),
            "incomplete": s.incomplete,
        });
        serde_json::to_writer(&mut self.out, &obj)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}
