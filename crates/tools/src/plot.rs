//! `kerf plot`: the curves of a `--record` file, one panel per metric with the busiest
//! functions overlaid, as the KernInst papers' figures show them (calls per second, time per
//! call, threads inside over the run), drawn as SVG. The CLI rasterises the SVG for PNG.
//!
//! A record file is JSON Lines: a header `{"kerf_record": 1, "tool": "time", ...}`, then one
//! sample per interval, `{"t": SECONDS, "rows": [{"name": NAME, METRIC: TOTAL, ...}]}`, each
//! metric a total since the probes went in (see `LiveTool::sample`). A curve's point is the
//! change over an interval: `kerf time`'s `calls`, `outer`, `wall_ns` and (with `--virtual`)
//! `off_cpu_ns` give calls per second, time per call, threads inside, and CPU time per call
//! and threads running inside; `kerf count`'s `count` gives counts per second; `kerf sum`'s
//! `sum` and `events` the sum per second (the accumulator's average over time) and the
//! average value per event.

use serde_json::Value;
use std::collections::HashMap;
use std::fmt::{self, Write};

/// What is wrong with a record file, and on which line.
#[derive(Debug)]
pub struct PlotError {
    pub line: usize,
    pub what: String,
}

impl fmt::Display for PlotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

impl std::error::Error for PlotError {}

/// One sample: its time, and per row (a function or a point) its totals by metric.
#[derive(Clone, Debug)]
struct Sample {
    t: f64,
    rows: HashMap<String, HashMap<String, f64>>,
}

/// A record file read: the tool that wrote it, what it ran on, and its samples in order.
#[derive(Clone, Debug)]
pub struct Record {
    pub tool: String,
    pub target: String,
    samples: Vec<Sample>,
}

/// Read a record file's text.
pub fn parse(text: &str) -> Result<Record, PlotError> {
    let mut lines = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty());
    let bad = |line: usize, what: &str| PlotError { line: line + 1, what: what.to_string() };
    let (n, head) = lines.next().ok_or_else(|| bad(0, "empty: not a kerf --record file"))?;
    let head: Value = serde_json::from_str(head).map_err(|e| bad(n, &format!("{e}")))?;
    if head["kerf_record"].as_u64() != Some(1) {
        return Err(bad(n, "no {\"kerf_record\": 1} header: not a kerf --record file"));
    }
    let tool = head["tool"].as_str().unwrap_or("?").to_string();
    let target = head["target"].as_str().unwrap_or("").to_string();
    let mut samples = Vec::new();
    for (n, line) in lines {
        let v: Value = serde_json::from_str(line).map_err(|e| bad(n, &format!("{e}")))?;
        let t = v["t"].as_f64().ok_or_else(|| bad(n, "a sample without its time \"t\""))?;
        let rows = v["rows"].as_array().ok_or_else(|| bad(n, "a sample without \"rows\""))?;
        let rows = rows
            .iter()
            .filter_map(|r| {
                let name = r["name"].as_str()?.to_string();
                let metrics =
                    r.as_object()?.iter().filter_map(|(k, x)| Some((k.clone(), x.as_f64()?)));
                Some((name, metrics.collect()))
            })
            .collect();
        samples.push(Sample { t, rows });
    }
    Ok(Record { tool, target, samples })
}

/// How a panel's values read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Per second (k, M).
    Rate,
    /// Nanoseconds, shown as ns, us, ms or s.
    Nanos,
    /// A plain number (threads).
    Plain,
}

/// One curve: a row's values over time (`None`: nothing to show in that interval, such as a
/// time per call with no call).
#[derive(Clone, Debug)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, Option<f64>)>,
}

/// One panel: a metric, with a curve per row.
#[derive(Clone, Debug)]
pub struct Panel {
    pub title: String,
    pub unit: Unit,
    pub series: Vec<Series>,
}

/// A row's change of a total over an interval, by the total's name.
type Change<'a> = &'a dyn Fn(&str) -> f64;

/// A metric of a panel: its title, unit, and its value over an interval from the changes of
/// the row's totals (`d`) and the interval's length in seconds.
struct Metric {
    title: &'static str,
    unit: Unit,
    needs: &'static str,
    value: fn(Change<'_>, f64) -> Option<f64>,
}

fn per(a: f64, b: f64) -> Option<f64> {
    (b > 0.0).then(|| a / b)
}

const METRICS: [Metric; 8] = [
    Metric {
        title: "sum per second",
        unit: Unit::Rate,
        needs: "sum",
        value: |d, s| per(d("sum"), s),
    },
    Metric {
        title: "average value per event",
        unit: Unit::Plain,
        needs: "sum",
        value: |d, _| per(d("sum"), d("events")),
    },
    Metric {
        title: "calls per second",
        unit: Unit::Rate,
        needs: "calls",
        value: |d, s| per(d("calls"), s),
    },
    Metric {
        title: "counts per second",
        unit: Unit::Rate,
        needs: "count",
        value: |d, s| per(d("count"), s),
    },
    Metric {
        title: "wall time per call",
        unit: Unit::Nanos,
        needs: "wall_ns",
        value: |d, _| per(d("wall_ns"), d("outer")),
    },
    Metric {
        title: "CPU (virtual) time per call",
        unit: Unit::Nanos,
        needs: "off_cpu_ns",
        value: |d, _| per((d("wall_ns") - d("off_cpu_ns")).max(0.0), d("outer")),
    },
    Metric {
        title: "threads inside (concurrency)",
        unit: Unit::Plain,
        needs: "wall_ns",
        value: |d, s| per(d("wall_ns") / 1e9, s),
    },
    Metric {
        title: "threads running inside",
        unit: Unit::Plain,
        needs: "off_cpu_ns",
        value: |d, s| per((d("wall_ns") - d("off_cpu_ns")).max(0.0) / 1e9, s),
    },
];

/// The panels of a record: every metric its rows have, each with the `most` rows of the
/// largest final totals (wall time, else calls or counts).
pub fn panels(rec: &Record, most: usize) -> Vec<Panel> {
    let Some(last) = rec.samples.last() else { return Vec::new() };
    let weight = |m: &HashMap<String, f64>| {
        ["wall_ns", "calls", "count", "sum"].iter().find_map(|k| m.get(*k).copied()).unwrap_or(0.0)
    };
    let mut names: Vec<(&String, f64)> = last.rows.iter().map(|(n, m)| (n, weight(m))).collect();
    names.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    names.truncate(most);
    let has = |k: &str| last.rows.values().any(|m| m.contains_key(k));
    // Every total was 0 when the probes went in, at time 0.
    let start = Sample { t: 0.0, rows: HashMap::new() };
    let samples: Vec<&Sample> = std::iter::once(&start).chain(&rec.samples).collect();
    let mut out = Vec::new();
    for m in METRICS.iter().filter(|m| has(m.needs)) {
        let series = names
            .iter()
            .map(|&(name, _)| {
                let points = samples
                    .windows(2)
                    .map(|w| {
                        let (a, b) = (w[0], w[1]);
                        let get = |s: &Sample, k: &str| {
                            s.rows.get(name).and_then(|r| r.get(k)).copied().unwrap_or(0.0)
                        };
                        let d = |k: &str| get(b, k) - get(a, k);
                        (b.t, (m.value)(&d, b.t - a.t))
                    })
                    .collect();
                Series { name: name.clone(), points }
            })
            .collect();
        out.push(Panel { title: m.title.to_string(), unit: m.unit, series });
    }
    out
}

/// Where things go in the picture (pixels): the whole size, and each panel's plotting area
/// `(x, y, width, height)`, top to bottom.
#[derive(Clone, Debug, PartialEq)]
pub struct Layout {
    pub width: u32,
    pub height: u32,
    pub plots: Vec<(u32, u32, u32, u32)>,
}

const WIDTH: u32 = 960;
const TOP: u32 = 44;
const PANEL: u32 = 210;
const LEFT: u32 = 84;
const LEGEND: u32 = 220;
const PANEL_TITLE: u32 = 26;
const AXIS: u32 = 34;

/// The layout of `n` panels.
pub fn layout(n: usize) -> Layout {
    let plots = (0..n as u32)
        .map(|k| {
            let y = TOP + k * PANEL + PANEL_TITLE;
            (LEFT, y, WIDTH - LEFT - LEGEND, PANEL - PANEL_TITLE - AXIS)
        })
        .collect();
    Layout { width: WIDTH, height: TOP + n as u32 * PANEL + 10, plots }
}

/// The colours of the curves, in order (a colour-blind-safe palette).
pub const COLOURS: [&str; 8] =
    ["#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#7f6000", "#000000"];

/// About five round steps covering `[lo, hi]`: the axis's ticks.
fn ticks(lo: f64, hi: f64) -> Vec<f64> {
    let span = (hi - lo).max(f64::MIN_POSITIVE);
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| span / s <= 6.0)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    (0..=12).map(|k| first + k as f64 * step).take_while(|v| *v <= hi + step * 1e-9).collect()
}

/// A tick's label in the panel's unit.
fn label(v: f64, unit: Unit) -> String {
    let scaled = |v: f64, units: &[(f64, &str)]| {
        let (d, u) = units.iter().find(|(d, _)| v.abs() >= *d).copied().unwrap_or((1.0, ""));
        let x = v / d;
        let s = if x.fract().abs() < 1e-9 { format!("{x:.0}") } else { format!("{x:.3}") };
        let s = if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        };
        format!("{s}{u}")
    };
    match unit {
        Unit::Rate => scaled(v, &[(1e9, "G"), (1e6, "M"), (1e3, "k")]),
        Unit::Nanos => scaled(v, &[(1e9, " s"), (1e6, " ms"), (1e3, " us"), (1.0, " ns")]),
        Unit::Plain => scaled(v, &[]),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The SVG of `panels` under `title`, laid out by [`layout`].
pub fn svg(panels: &[Panel], title: &str) -> String {
    let lay = layout(panels.len());
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="DejaVu Sans, Arial, sans-serif" font-size="12">"#,
        w = lay.width,
        h = lay.height
    );
    let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="{}" y="26" font-size="16" fill="#202020">{}</text>"##,
        LEFT,
        escape(title)
    );
    let t_hi = panels
        .iter()
        .flat_map(|p| &p.series)
        .flat_map(|c| &c.points)
        .map(|p| p.0)
        .fold(0.0, f64::max);
    for (p, &(x, y, w, h)) in panels.iter().zip(&lay.plots) {
        let values = p.series.iter().flat_map(|c| c.points.iter().filter_map(|q| q.1));
        let v_hi = values.fold(0.0f64, f64::max);
        let v_hi = if v_hi > 0.0 { v_hi * 1.08 } else { 1.0 };
        let t_hi = if t_hi > 0.0 { t_hi } else { 1.0 };
        let (fx, fy) = (w as f64 / t_hi, h as f64 / v_hi);
        let px = |t: f64| x as f64 + t * fx;
        let py = |v: f64| (y + h) as f64 - v * fy;
        let _ = writeln!(
            s,
            r##"<text x="{x}" y="{}" font-size="13" fill="#202020">{}</text>"##,
            y - 8,
            escape(&p.title)
        );
        let _ = writeln!(
            s,
            r##"<rect x="{x}" y="{y}" width="{w}" height="{h}" fill="#fafafa" stroke="#b0b0b0"/>"##
        );
        for v in ticks(0.0, v_hi) {
            let yy = py(v);
            let _ = writeln!(
                s,
                r##"<line x1="{x}" y1="{yy:.1}" x2="{}" y2="{yy:.1}" stroke="#e4e4e4"/>"##,
                x + w
            );
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{:.1}" text-anchor="end" fill="#404040">{}</text>"##,
                x - 6,
                yy + 4.0,
                label(v, p.unit)
            );
        }
        for t in ticks(0.0, t_hi) {
            let xx = px(t);
            let _ = writeln!(
                s,
                r##"<line x1="{xx:.1}" y1="{}" x2="{xx:.1}" y2="{}" stroke="#b0b0b0"/>"##,
                y + h,
                y + h + 4
            );
            let _ = writeln!(
                s,
                r##"<text x="{xx:.1}" y="{}" text-anchor="middle" fill="#404040">{}</text>"##,
                y + h + 17,
                label(t, Unit::Plain)
            );
        }
        let _ = writeln!(
            s,
            r##"<text x="{}" y="{}" text-anchor="end" fill="#404040">seconds</text>"##,
            x + w,
            y + h + 30
        );
        for (k, c) in p.series.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            // A curve breaks where an interval has no value.
            for run in c.points.split(|q| q.1.is_none()).filter(|r| !r.is_empty()) {
                let pts: Vec<String> = run
                    .iter()
                    .map(|&(t, v)| format!("{:.1},{:.1}", px(t), py(v.unwrap_or(0.0))))
                    .collect();
                if pts.len() == 1 {
                    let (cx, cy) = pts[0].split_once(',').unwrap_or(("0", "0"));
                    let _ = writeln!(s, r#"<circle cx="{cx}" cy="{cy}" r="2.5" fill="{colour}"/>"#);
                } else {
                    let _ = writeln!(
                        s,
                        r#"<polyline fill="none" stroke="{colour}" stroke-width="2" points="{}"/>"#,
                        pts.join(" ")
                    );
                }
            }
            let ly = y + 8 + 18 * k as u32;
            let lx = x + w + 16;
            let _ =
                writeln!(s, r#"<rect x="{lx}" y="{ly}" width="14" height="4" fill="{colour}"/>"#);
            let mut name = c.name.clone();
            if name.chars().count() > 26 {
                name = name.chars().take(25).collect::<String>() + "…";
            }
            let _ = writeln!(
                s,
                r##"<text x="{}" y="{}" fill="#202020">{}</text>"##,
                lx + 20,
                ly + 6,
                escape(&name)
            );
        }
    }
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = r#"{"kerf_record": 1, "tool": "time", "target": "process 7"}
{"t": 1.0, "rows": [{"name": "f", "calls": 10, "outer": 10, "wall_ns": 1000000, "off_cpu_ns": 500000}, {"name": "g", "calls": 0, "outer": 0, "wall_ns": 0, "off_cpu_ns": 0}]}
{"t": 2.0, "rows": [{"name": "f", "calls": 30, "outer": 30, "wall_ns": 5000000, "off_cpu_ns": 1000000}, {"name": "g", "calls": 0, "outer": 0, "wall_ns": 0, "off_cpu_ns": 0}]}
{"t": 2.5, "rows": [{"name": "f", "calls": 30, "outer": 30, "wall_ns": 5000000, "off_cpu_ns": 1000000}, {"name": "g", "calls": 5, "outer": 5, "wall_ns": 1000, "off_cpu_ns": 0}]}
"#;

    #[test]
    fn curves_are_the_changes_over_each_interval() {
        let rec = parse(RECORD).unwrap();
        let p = panels(&rec, 8);
        let titles: Vec<&str> = p.iter().map(|p| p.title.as_str()).collect();
        assert_eq!(
            titles,
            [
                "calls per second",
                "wall time per call",
                "CPU (virtual) time per call",
                "threads inside (concurrency)",
                "threads running inside"
            ]
        );
        // f first (more wall time); between t=1 and 2: 20 calls, 4 ms wall, 0.5 ms off.
        let f = &p[0].series[0];
        assert_eq!(f.name, "f");
        // The first interval runs from 0, where every total was 0.
        assert_eq!(f.points, [(1.0, Some(10.0)), (2.0, Some(20.0)), (2.5, Some(0.0))]);
        assert_eq!(p[1].series[0].points[1..], [(2.0, Some(200_000.0)), (2.5, None)]);
        assert_eq!(p[2].series[0].points[1], (2.0, Some(175_000.0)));
        assert_eq!(p[3].series[0].points[1], (2.0, Some(0.004)));
        assert_eq!(p[1].series[1].points, [(1.0, None), (2.0, None), (2.5, Some(200.0))]);
        assert_eq!(panels(&rec, 1)[0].series.len(), 1);
    }

    #[test]
    fn bad_records_say_which_line() {
        assert_eq!(parse("").unwrap_err().line, 1);
        assert!(parse("{\"x\": 1}\n").unwrap_err().what.contains("not a kerf --record file"));
        let e = parse("{\"kerf_record\": 1}\n{\"rows\": []}\n").unwrap_err();
        assert_eq!((e.line, e.what.contains("\"t\"")), (2, true));
    }

    #[test]
    fn ticks_are_round_and_labels_have_units() {
        assert_eq!(ticks(0.0, 10.0), [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(ticks(0.0, 0.3).len(), 7, "steps of 0.05");
        assert_eq!(label(2_500_000.0, Unit::Nanos), "2.5 ms");
        assert_eq!(label(20_000.0, Unit::Rate), "20k");
        assert_eq!(label(0.25, Unit::Plain), "0.25");
    }

    #[test]
    fn the_svg_has_a_panel_and_a_curve_per_metric_and_row() {
        let rec = parse(RECORD).unwrap();
        let p = panels(&rec, 8);
        let s = svg(&p, "kerf time");
        assert_eq!(s.matches("fill=\"#fafafa\"").count(), p.len());
        assert!(s.contains("threads running inside"));
        let lay = layout(p.len());
        assert!(s.starts_with(&format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\"",
            lay.width, lay.height
        )));
    }
}
