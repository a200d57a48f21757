//! `sum`: KernInst's accumulators. At each point, a value the point has in a register (an
//! argument, the return value at an exit, any register) is added to a 64-bit sum, and the
//! events counted: per interval the sum per second (the accumulator's average over time),
//! the events per second and the average value per event; totals at the end. `vfs_read@exits
//! ret` is the bytes `vfs_read` returned (errors, negative, subtract: the sum is signed).
//!
//! Each line is one IR program (`reg`, then two `atomic add`s into the tool's area), so a
//! line costs one locked add more than `kerf count` at its point. Memory values are `kerf
//! trace`'s (its reads never fault); here only registers are taken.

use crate::error::ToolError;
use crate::live::{resolve, site_json, LiveTool, TargetKind};
use crate::trace::probe::{self, Expr, RegValue};
use kerf_arch::x86_64::RegSet;
use kerf_codegen::ir::{Addr, Cond, Op, Program, Src, Width};
use kerf_session::instrument::{Action, Probe, ToolData};
use kerf_session::live::Installed;
use kerf_session::spec;
use kerf_session::AnalyzedImage;
use serde_json::{json, Value};
use std::fmt::Write;
use std::time::Instant;

/// Bytes of one line's accumulator: the sum, then the count.
const SLOT: u64 = 16;

/// One accumulator line: `POINT VALUE`.
#[derive(Clone, Debug)]
pub struct Line {
    pub text: String,
    pub point: String,
    pub value: String,
    reg: kerf_arch::x86_64::Gpr,
}

/// Parse `POINT VALUE`, VALUE being `arg0`..`arg5`, `ret` (at `@exits`) or a register.
pub fn parse_line(text: &str) -> Result<Line, ToolError> {
    let bad = |why: &str| ToolError::Usage(format!("'{text}': {why}"));
    let (point, value) = text
        .trim()
        .rsplit_once(char::is_whitespace)
        .ok_or_else(|| bad("want POINT VALUE, as in 'vfs_read@exits ret'"))?;
    let line = probe::parse(&format!("{} {{v={}}}", point.trim(), value.trim()))
        .map_err(|e| bad(&e.what))?;
    let reg = match line.captures.first().map(|c| c.expr) {
        Some(Expr::Reg(RegValue::Reg(g))) => g,
        Some(Expr::Mem { .. }) => {
            return Err(bad("memory values are kerf trace's; here a register"))
        }
        _ => return Err(bad("the value is an argument (arg0..arg5), ret or a register")),
    };
    Ok(Line { text: text.trim().to_string(), point: line.point, value: value.trim().into(), reg })
}

/// The accumulator tool.
pub struct Sum {
    lines: Vec<Line>,
    /// In the kernel: the offset of `task_struct.pid`, and the one task to count (`--pid`).
    pid_offset: std::cell::Cell<Option<u32>>,
    only_task: std::cell::Cell<Option<u32>>,
}

impl Sum {
    pub fn new(texts: &[String]) -> Result<Sum, ToolError> {
        Ok(Sum {
            lines: texts.iter().map(|t| parse_line(t)).collect::<Result<_, _>>()?,
            pid_offset: Default::default(),
            only_task: Default::default(),
        })
    }

    /// Line `k`'s sum (signed) and count: every heap's copy of the area added up.
    fn totals(&self, inst: &dyn Installed, k: usize) -> (i64, u64) {
        let mut sum = 0i64;
        let mut count = 0u64;
        for h in inst.areas() {
            sum = sum.wrapping_add(inst.area_load(h, k as u64 * SLOT) as i64);
            count += inst.area_load(h, k as u64 * SLOT + 8);
        }
        (sum, count)
    }
}

/// Per line, the probes of its points (a glob may find several).
pub struct Built {
    probes_of: Vec<Vec<usize>>,
}

/// The live table: totals at the last update.
pub struct Table {
    last: Vec<(i64, u64)>,
    at: Instant,
}

impl LiveTool for Sum {
    type Built = Built;
    type Table = Table;

    fn kernel_task_ids(&self, pid: Option<u32>, _tgid: Option<u32>) {
        self.pid_offset.set(pid);
    }

    fn kernel_only_task(&self, pid: Option<u32>) {
        self.only_task.set(pid);
    }

    /// In the kernel with `--pid`, each program first checks the running task's id (a tool
    /// program is not under the target's predicates: it checks them itself).
    fn build(
        &self,
        images: &[AnalyzedImage],
        aliases: &[Vec<String>],
        kind: TargetKind,
    ) -> Result<(Vec<Probe>, ToolData, Built), ToolError> {
        let only = match (kind, self.only_task.get(), self.pid_offset.get()) {
            (TargetKind::Kernel, Some(pid), Some(off)) => Some((off, pid)),
            (TargetKind::Kernel, Some(pid), None) => {
                return Err(ToolError::Usage(format!(
                    "--pid {pid}: no task_struct.pid in the kernel's BTF"
                )))
            }
            _ => None,
        };
        let mut probes = Vec::new();
        let mut programs = Vec::new();
        let mut probes_of = Vec::new();
        for (k, l) in self.lines.iter().enumerate() {
            let slot = k as u64 * SLOT;
            let mut p = Program::new();
            let v = p.vreg("v");
            p.push(Op::Reg { dst: v, reg: l.reg });
            let end = only.map(|(off, pid)| {
                let (t, end) = (p.vreg("task"), p.label("end"));
                p.push(Op::Thread { dst: t });
                let addr = Addr::Based { base: t, disp: off as i32 };
                p.push(Op::Load { dst: t, width: Width::W32, addr });
                p.push(Op::Branch {
                    cond: Cond::Ne,
                    a: t,
                    b: Src::Imm(u64::from(pid)),
                    target: end,
                });
                end
            });
            p.push(Op::AddMem { addr: Addr::Abs(slot), src: Src::Reg(v), atomic: true });
            p.push(Op::AddMem { addr: Addr::Abs(slot + 8), src: Src::Imm(1), atomic: true });
            if let Some(end) = end {
                p.push(Op::Label(end));
            }
            programs.push(p);
            let reads = RegSet::of(&[l.reg]);
            let mut mine = Vec::new();
            for point in resolve(images, aliases, &[spec::parse(&l.point)?])? {
                mine.push(probes.len());
                probes.push(Probe { point, action: Action::Program { program: k, reads } });
            }
            probes_of.push(mine);
        }
        let area = (self.lines.len() as u64 * SLOT).max(8);
        let tool = ToolData { programs, area, ..ToolData::default() };
        Ok((probes, tool, Built { probes_of }))
    }

    fn table(&self, _built: &Built, _probes: usize, _inst: &dyn Installed) -> Table {
        Table { last: vec![(0, 0); self.lines.len()], at: Instant::now() }
    }

    fn render(&self, table: &mut Table, _built: &Built, inst: &dyn Installed) -> String {
        let secs = table.at.elapsed().as_secs_f64().max(1e-9);
        table.at = Instant::now();
        let mut t =
            format!("{:>14} {:>12} {:>14} {:>16}  line\n", "sum/s", "events/s", "avg", "sum");
        for (k, l) in self.lines.iter().enumerate() {
            let (sum, count) = self.totals(inst, k);
            let (ds, dc) = (sum.wrapping_sub(table.last[k].0), count - table.last[k].1);
            table.last[k] = (sum, count);
            let avg = if dc > 0 { format!("{:.1}", ds as f64 / dc as f64) } else { "-".into() };
            let _ = writeln!(
                t,
                "{:>14.0} {:>12.0} {avg:>14} {sum:>16}  {}",
                ds as f64 / secs,
                dc as f64 / secs,
                l.text
            );
        }
        t
    }

    fn summarize(
        &self,
        _table: &mut Table,
        built: &Built,
        _probes: &[Probe],
        inst: &dyn Installed,
    ) -> Value {
        let secs = inst.installed_at().1.elapsed().as_secs_f64().max(1e-9);
        let lines: Vec<Value> = self
            .lines
            .iter()
            .enumerate()
            .map(|(k, l)| {
                let (sum, count) = self.totals(inst, k);
                let sites: Vec<Value> = built.probes_of[k]
                    .iter()
                    .filter_map(|&i| inst.site(i).map(site_json))
                    .collect();
                json!({"line": l.text, "point": l.point, "value": l.value, "sum": sum,
                       "count": count,
                       "avg": if count > 0 { sum as f64 / count as f64 } else { 0.0 },
                       "sum_per_s": sum as f64 / secs, "sites": sites})
            })
            .collect();
        json!({"lines": lines, "timed_seconds": secs})
    }

    fn final_table(&self, summary: &Value) -> String {
        let mut t = format!("{:>16} {:>12} {:>14} {:>14}  line\n", "sum", "events", "avg", "sum/s");
        for l in summary["lines"].as_array().into_iter().flatten() {
            let _ = writeln!(
                t,
                "{:>16} {:>12} {:>14.1} {:>14.0}  {}",
                l["sum"].as_i64().unwrap_or(0),
                l["count"].as_u64().unwrap_or(0),
                l["avg"].as_f64().unwrap_or(0.0),
                l["sum_per_s"].as_f64().unwrap_or(0.0),
                l["line"].as_str().unwrap_or("")
            );
        }
        t
    }

    /// Per line: `sum` and `events`.
    fn sample(&self, _table: &Table, _built: &Built, inst: &dyn Installed) -> Option<Value> {
        let rows: Vec<Value> = (0..self.lines.len())
            .map(|k| {
                let (sum, count) = self.totals(inst, k);
                json!({"name": self.lines[k].text, "sum": sum, "events": count})
            })
            .collect();
        Some(json!({ "rows": rows }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_arch::x86_64::Gpr;

    #[test]
    fn lines_take_a_register_value() {
        let l = parse_line("vfs_read@exits ret").unwrap();
        assert_eq!((l.point.as_str(), l.reg), ("vfs_read@exits", Gpr::Rax));
        assert_eq!(parse_line("libc:write arg2").unwrap().reg, Gpr::Rdx);
        assert_eq!(parse_line("f r12").unwrap().reg, Gpr::R12);
        let e = |t: &str| parse_line(t).unwrap_err().to_string();
        assert!(e("vfs_read").contains("POINT VALUE"), "{}", e("vfs_read"));
        assert!(e("f ret").contains("exits"), "{}", e("f ret"));
        assert!(e("f u64(arg0)").contains("register"), "{}", e("f u64(arg0)"));
    }
}
