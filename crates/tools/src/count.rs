//! `count`: a counter spliced at each point of the specs; a live table of the points that ran
//! each interval, and every point's final count.

use crate::error::ToolError;
use crate::live::{resolve, site_json, LiveTool, TargetKind};
use kerf_session::instrument::{Action, Probe, ToolData};
use kerf_session::live::Installed;
use kerf_session::spec::{self, Spec};
use kerf_session::AnalyzedImage;
use serde_json::{json, Value};
use std::fmt::Write;
use std::time::Instant;

/// Rows of the live table: the busiest points of the interval; the others are summed up.
const TOP_ROWS: usize = 40;

/// The count tool: its parsed specs.
pub struct Count {
    specs: Vec<Spec>,
}

impl Count {
    /// Parse the spec texts (before anything is done to a target).
    pub fn new(specs: &[String]) -> Result<Count, ToolError> {
        let specs = specs.iter().map(|s| spec::parse(s)).collect::<Result<_, _>>()?;
        Ok(Count { specs })
    }
}

/// A counter at each point.
fn counters(points: Vec<spec::Point>) -> Vec<Probe> {
    points.into_iter().map(|point| Probe { point, action: Action::Count }).collect()
}

impl LiveTool for Count {
    type Built = ();
    type Table = Table;

    fn build(
        &self,
        images: &[AnalyzedImage],
        aliases: &[Vec<String>],
        _kind: TargetKind,
    ) -> Result<(Vec<Probe>, ToolData, ()), ToolError> {
        Ok((counters(resolve(images, aliases, &self.specs)?), ToolData::default(), ()))
    }

    fn table(&self, _built: &(), probes: usize, _inst: &dyn Installed) -> Table {
        Table::new(probes)
    }

    fn render(&self, table: &mut Table, _built: &(), inst: &dyn Installed) -> String {
        table.render(inst)
    }

    fn summarize(
        &self,
        _table: &mut Table,
        _built: &(),
        probes: &[Probe],
        inst: &dyn Installed,
    ) -> Value {
        json!({"points": summarize(inst, probes)})
    }

    fn final_table(&self, summary: &Value) -> String {
        final_table(summary)
    }

    /// Per spliced site: `count`, its probes' counts summed.
    fn sample(&self, _table: &Table, _built: &(), inst: &dyn Installed) -> Option<Value> {
        let rows: Vec<Value> = inst
            .sites()
            .iter()
            .map(|s| {
                let n: u64 = s.probes.iter().map(|&i| inst.count(i)).sum();
                json!({"name": s.label, "count": n})
            })
            .collect();
        Some(json!({ "rows": rows }))
    }
}

/// Per probe: where and how it is spliced, and its count (probes the driver refused are left
/// out; they are listed apart).
fn summarize(inst: &dyn Installed, probes: &[Probe]) -> Vec<Value> {
    probes
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let mut v = site_json(inst.site(i)?);
            v["spec"] = json!(p.point.spec);
            v["count"] = json!(inst.count(i));
            Some(v)
        })
        .collect()
}

/// A table of every point of a summary, with its final count.
pub fn final_table(summary: &Value) -> String {
    let mut t = format!("{:>14}  point (every point, final counts)\n", "count");
    for p in summary["points"].as_array().into_iter().flatten() {
        let _ = writeln!(
            t,
            "{:>14}  {} {} ({})",
            p["count"].as_u64().unwrap_or(0),
            p["kind"].as_str().unwrap_or(""),
            p["point"].as_str().unwrap_or(""),
            p["address"].as_str().unwrap_or("")
        );
    }
    t
}

/// The live table: per interval, only the points that ran in it, busiest first (at most
/// `TOP_ROWS`), and one line for the rest. With thousands of points (`libc:*`), a table of
/// every point at every interval, zeros included, is unreadable; the final table and
/// `--json` list them all.
pub struct Table {
    /// Each probe's count at the last update.
    last: Vec<u64>,
    at: Instant,
}

impl Table {
    fn new(probes: usize) -> Table {
        Table { last: vec![0; probes], at: Instant::now() }
    }

    fn render(&mut self, inst: &dyn Installed) -> String {
        let now = Instant::now();
        let secs = now.duration_since(self.at).as_secs_f64().max(1e-9);
        self.at = now;
        let (mut ran, mut idle) = (Vec::new(), 0usize);
        for (i, last) in self.last.iter_mut().enumerate() {
            if inst.site(i).is_none() {
                continue;
            }
            let c = inst.count(i);
            let d = c.saturating_sub(*last);
            *last = c;
            if d == 0 {
                idle += 1;
            } else {
                ran.push((d, c, i));
            }
        }
        ran.sort_by(|a, b| b.0.cmp(&a.0).then(a.2.cmp(&b.2)));
        let mut t = format!("{:>14} {:>12}  point\n", "count", "per second");
        for &(d, c, i) in ran.iter().take(TOP_ROWS) {
            let s = inst.site(i).expect("only spliced probes are listed");
            let _ = writeln!(t, "{c:>14} {:>12.0}  {} {}", d as f64 / secs, s.kind.name(), s.label);
        }
        let more = ran.len().saturating_sub(TOP_ROWS);
        let more = if more > 0 { format!("{more} more points ran, ") } else { String::new() };
        let _ = writeln!(t, "{:>14}  ({more}{idle} points idle)", "");
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn final_table_lists_every_point_with_its_count_kind_and_address() {
        let v = json!({"points": [
            {"count": 12, "kind": "jump5", "point": "branchy", "address": "0x401000"},
            {"count": 0, "kind": "trap", "point": "leaf+0x3", "address": "0x401203"},
        ]});
        assert_eq!(
            final_table(&v),
            "         count  point (every point, final counts)\n\
             \x20           12  jump5 branchy (0x401000)\n\
             \x20            0  trap leaf+0x3 (0x401203)\n"
        );
    }

    #[test]
    fn bad_specs_are_refused_before_any_target_is_touched() {
        let e = Count::new(&["libc:".to_string()]).err().expect("an empty symbol is no spec");
        assert!(matches!(e, ToolError::Spec(_)), "{e:?}");
    }
}
