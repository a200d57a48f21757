//! `top`: the state and the screen of kerf's live terminal view (the terminal itself is the
//! CLI's). A table of timed functions, each with a sparkline of the chosen metric over the
//! last intervals; one row selected. Keys expand the selected function into its callees
//! (timers spliced on its calls, per callee) or its basic blocks (a counter on each: how often
//! it ran), or collapse it (those probes removed), switch the
//! metric (wall time, CPU time, threads inside, threads waiting inside, calls), watch one
//! thread of a process after another or all of them, and quit. The probes change between
//! rounds: a key that changes them ends the round, and the CLI installs the new set.
//!
//! Everything here is pure: samples in (`LiveTool::sample` of `kerf time`), lines out.

use serde_json::Value;
use std::collections::{BTreeSet, HashMap, VecDeque};

/// Points of history a sparkline shows.
pub const HISTORY: usize = 40;

/// The metric the sparklines and the sort follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Wall,
    Cpu,
    Threads,
    /// Threads inside but off the CPU (asleep, blocked, preempted): wall minus CPU time per
    /// second, so only with virtual time.
    Waiting,
    Calls,
}

impl Metric {
    fn next(self) -> Metric {
        match self {
            Metric::Wall => Metric::Cpu,
            Metric::Cpu => Metric::Threads,
            Metric::Threads => Metric::Waiting,
            Metric::Waiting => Metric::Calls,
            Metric::Calls => Metric::Wall,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Metric::Wall => "wall time/s",
            Metric::Cpu => "cpu time/s",
            Metric::Threads => "threads inside",
            Metric::Waiting => "threads waiting inside",
            Metric::Calls => "calls/s",
        }
    }
}

/// A key the view acts on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    Up,
    Down,
    Expand,
    Collapse,
    /// Count the selected function's basic blocks (rows `f @ +0x1c` under it).
    Blocks,
    Metric,
    /// Watch the next thread of the process (after the last, all of them again).
    Thread,
    Quit,
}

/// What a key asks of the CLI.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    None,
    /// The probes change: end the round, install [`Top::functions`] and [`Top::expanded`].
    Reinstall,
    Quit,
}

/// One row's rates over the last interval.
#[derive(Clone, Debug, Default, PartialEq)]
struct Rates {
    calls: f64,
    wall: f64,
    cpu: Option<f64>,
    per_call: Option<f64>,
}

/// The view's state.
pub struct Top {
    /// The functions asked for (specs), and the ones expanded into their callees (names).
    pub functions: Vec<String>,
    pub expanded: BTreeSet<String>,
    /// The functions whose blocks are counted.
    pub blocks: BTreeSet<String>,
    pub metric: Metric,
    selected: usize,
    /// Rows in the order shown: a function, then its callees' rows (`f > g`) if expanded.
    rows: Vec<String>,
    rates: HashMap<String, Rates>,
    history: HashMap<String, VecDeque<f64>>,
    /// Per row: the last sample's totals (time, calls, outer, wall, off-CPU).
    last: HashMap<String, (f64, f64, f64, f64, f64)>,
    pub rounds: usize,
    /// The thread watched (`None`: all), and the process's threads to choose from (the CLI
    /// lists them before [`Key::Thread`]).
    pub thread: Option<i32>,
    pub threads: Vec<i32>,
}

impl Top {
    pub fn new(functions: Vec<String>) -> Top {
        Top {
            functions,
            expanded: BTreeSet::new(),
            blocks: BTreeSet::new(),
            metric: Metric::Wall,
            selected: 0,
            rows: Vec::new(),
            rates: HashMap::new(),
            history: HashMap::new(),
            last: HashMap::new(),
            rounds: 0,
            thread: None,
            threads: Vec::new(),
        }
    }

    /// A new round's probes are in: totals restart from zero.
    pub fn new_round(&mut self) {
        self.last.clear();
        self.rounds += 1;
    }

    /// A sample of `kerf time` (totals since the round's probes went in, at `t` seconds).
    pub fn update(&mut self, sample: &Value) {
        let t = sample["t"].as_f64().unwrap_or(0.0);
        let mut names = Vec::new();
        for r in sample["rows"].as_array().into_iter().flatten() {
            let Some(name) = r["name"].as_str() else { continue };
            let f = |k: &str| r[k].as_f64().unwrap_or(0.0);
            let now = (t, f("calls"), f("outer"), f("wall_ns"), f("off_cpu_ns"));
            let (t0, c0, o0, w0, x0) = self.last.insert(name.to_string(), now).unwrap_or_default();
            let dt = (t - t0).max(1e-9);
            let (dc, dout, dw) = (now.1 - c0, now.2 - o0, now.3 - w0);
            let virt = r.get("off_cpu_ns").is_some();
            let rates = Rates {
                calls: dc / dt,
                wall: dw / dt,
                cpu: virt.then(|| ((dw - (now.4 - x0)) / dt).max(0.0)),
                per_call: (dout > 0.0).then(|| dw / dout),
            };
            let v = self.value(&rates);
            let h = self.history.entry(name.to_string()).or_default();
            h.push_back(v);
            while h.len() > HISTORY {
                h.pop_front();
            }
            self.rates.insert(name.to_string(), rates);
            names.push(name.to_string());
        }
        // Callee rows (`f > g`) under their caller, the busiest first; then its block rows
        // (`f @ +0x1c`), the most run first.
        let mut order: Vec<String> = names.iter().filter(|n| !is_child(n)).cloned().collect();
        order.sort_by(|a, b| self.wall_of(b).total_cmp(&self.wall_of(a)).then(a.cmp(b)));
        let mut rows = Vec::new();
        for f in order {
            let (callee, block) = (format!("{f} > "), format!("{f} @ "));
            let mut kids: Vec<&String> = names.iter().filter(|n| n.starts_with(&callee)).collect();
            kids.sort_by(|a, b| self.wall_of(b).total_cmp(&self.wall_of(a)).then(a.cmp(b)));
            let mut blocks: Vec<&String> = names.iter().filter(|n| n.starts_with(&block)).collect();
            let calls = |n: &str| self.rates.get(n).map_or(0.0, |r| r.calls);
            blocks.sort_by(|a, b| calls(b).total_cmp(&calls(a)).then(a.cmp(b)));
            rows.push(f.clone());
            rows.extend(kids.into_iter().cloned());
            rows.extend(blocks.into_iter().cloned());
        }
        self.rows = rows;
        self.selected = self.selected.min(self.rows.len().saturating_sub(1));
    }

    fn wall_of(&self, name: &str) -> f64 {
        self.rates.get(name).map_or(0.0, |r| r.wall)
    }

    fn value(&self, r: &Rates) -> f64 {
        match self.metric {
            Metric::Wall => r.wall,
            Metric::Cpu => r.cpu.unwrap_or(0.0),
            Metric::Threads => r.wall / 1e9,
            Metric::Waiting => r.cpu.map_or(0.0, |c| (r.wall - c).max(0.0) / 1e9),
            Metric::Calls => r.calls,
        }
    }

    /// The selected row's function (a callee row's callee, without `@plt`; a block row's
    /// function).
    fn selected_function(&self) -> Option<String> {
        let row = self.rows.get(self.selected)?;
        let row = row.split(" @ ").next().unwrap_or(row);
        let f = row.rsplit(" > ").next().unwrap_or(row);
        Some(f.strip_suffix("@plt").unwrap_or(f).to_string())
    }

    /// Expand the selected row's function into its callees, or (`blocks`) count its blocks:
    /// a callee row's function is timed on its own then; an indirect call has nothing to open.
    fn open_selected(&mut self, blocks: bool) -> Action {
        let Some(f) = self.selected_function() else { return Action::None };
        if f.starts_with('(') {
            return Action::None;
        }
        if !self.functions.contains(&f) {
            self.functions.push(f.clone());
        }
        let opened = if blocks { &mut self.blocks } else { &mut self.expanded };
        if opened.insert(f) {
            Action::Reinstall
        } else {
            Action::None
        }
    }

    /// Act on a key.
    pub fn key(&mut self, k: Key) -> Action {
        match k {
            Key::Up => {
                self.selected = self.selected.saturating_sub(1);
                Action::None
            }
            Key::Down => {
                self.selected = (self.selected + 1).min(self.rows.len().saturating_sub(1));
                Action::None
            }
            Key::Metric => {
                self.metric = self.metric.next();
                // The sparklines restart in the new metric.
                self.history.clear();
                Action::None
            }
            Key::Quit => Action::Quit,
            Key::Thread => {
                let next = match self.thread {
                    None => self.threads.first().copied(),
                    Some(t) => match self.threads.iter().position(|&x| x == t) {
                        Some(i) => self.threads.get(i + 1).copied(),
                        // The thread ended: start again from the first.
                        None => self.threads.first().copied(),
                    },
                };
                if next == self.thread {
                    return Action::None;
                }
                self.thread = next;
                Action::Reinstall
            }
            Key::Expand => self.open_selected(false),
            Key::Blocks => self.open_selected(true),
            Key::Collapse => {
                let Some(row) = self.rows.get(self.selected) else { return Action::None };
                let f = row.split([' ']).next().unwrap_or(row).to_string();
                let (callees, blocks) = (self.expanded.remove(&f), self.blocks.remove(&f));
                if callees || blocks {
                    self.selected = self.rows.iter().position(|r| *r == f).unwrap_or(0);
                    Action::Reinstall
                } else {
                    Action::None
                }
            }
        }
    }

    /// The screen, `width` columns by `height` lines: a header, the table, the keys.
    pub fn screen(&self, title: &str, width: usize, height: usize) -> Vec<String> {
        let fmt = crate::time::fmt_ns;
        let who = self.thread.map_or("all threads".to_string(), |t| format!("thread {t}"));
        let mut out = vec![
            format!("kerf top: {title}   {who}   [{}]   round {}", self.metric.name(), self.rounds),
            format!(
                "{:>10} {:>10} {:>10} {:>10} {:>7} {:>7}  {:<w$}  function",
                "calls/s",
                "avg/call",
                "time/s",
                "cpu/s",
                "threads",
                "waiting",
                "history",
                w = HISTORY
            ),
        ];
        let room = height.saturating_sub(4);
        let first = self.selected.saturating_sub(room.saturating_sub(1));
        for (k, name) in self.rows.iter().enumerate().skip(first).take(room) {
            let r = self.rates.get(name).cloned().unwrap_or_default();
            let hist = self.history.get(name).map(spark).unwrap_or_default();
            let mark = if k == self.selected { ">" } else { " " };
            let mut expanded = String::new();
            if self.expanded.contains(name) {
                expanded.push_str(" [-]");
            }
            if self.blocks.contains(name) {
                expanded.push_str(" [b]");
            }
            // A block row has a count, no time.
            let timed = !name.contains(" @ ");
            let time = |v: Option<String>| v.filter(|_| timed).unwrap_or_else(|| "-".into());
            let waiting = r.cpu.map(|c| format!("{:.2}", (r.wall - c).max(0.0) / 1e9));
            let line = format!(
                "{mark}{:>9.0} {:>10} {:>10} {:>10} {:>7} {:>7}  {:<w$}  {name}{expanded}",
                r.calls,
                r.per_call.map_or("-".into(), fmt),
                time(Some(fmt(r.wall))),
                time(r.cpu.map(fmt)),
                time(Some(format!("{:.2}", r.wall / 1e9))),
                time(waiting),
                hist,
                w = HISTORY
            );
            out.push(line.chars().take(width).collect());
        }
        while out.len() < height.saturating_sub(1) {
            out.push(String::new());
        }
        out.push(
            "up/down select   enter callees   b blocks   c collapse   m metric   t thread   q quit"
                .chars()
                .take(width)
                .collect(),
        );
        out
    }
}

/// A callee row (`f > g`) or a block row (`f @ +0x1c`), shown under its function.
fn is_child(name: &str) -> bool {
    name.contains(" > ") || name.contains(" @ ")
}

/// A sparkline of values, scaled to their maximum.
fn spark(h: &VecDeque<f64>) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let max = h.iter().copied().fold(0.0, f64::max);
    h.iter()
        .map(|v| if max > 0.0 { BARS[((v / max) * 7.0).round() as usize % 8] } else { BARS[0] })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sample(t: f64, work_calls: u64, work_wall: u64, callee: Option<u64>) -> Value {
        let mut rows = vec![
            json!({"name": "work", "calls": work_calls, "outer": work_calls, "wall_ns": work_wall, "off_cpu_ns": work_wall / 2}),
            json!({"name": "busy", "calls": 1, "outer": 1, "wall_ns": 10, "off_cpu_ns": 0}),
        ];
        if let Some(w) = callee {
            rows.push(json!({"name": "work > nanosleep@plt", "calls": work_calls, "outer": work_calls, "wall_ns": w, "off_cpu_ns": w}));
        }
        json!({"t": t, "rows": rows})
    }

    #[test]
    fn rows_rates_keys_and_the_screen() {
        let mut top = Top::new(vec!["work".into(), "busy".into()]);
        top.update(&sample(1.0, 10, 1_000_000_000, None));
        top.update(&sample(2.0, 30, 3_000_000_000, None));
        // work: 20 calls, 2 s of wall time in the second interval (2 threads inside), 1 s CPU.
        let s = top.screen("t", 140, 10);
        assert!(s[2].starts_with(">       20"), "{s:?}");
        assert!(s[2].contains("     2.00 ") && s[2].ends_with("work"), "{s:?}");
        assert!(s[3].ends_with("busy"));
        assert_eq!(s.len(), 10);
        // Expand the selected row (work): the probes change.
        assert_eq!(top.key(Key::Expand), Action::Reinstall);
        assert_eq!(top.key(Key::Expand), Action::None, "already expanded");
        top.new_round();
        top.update(&sample(0.5, 5, 500_000_000, Some(400_000_000)));
        let s = top.screen("t", 140, 10);
        assert!(s[2].ends_with("work [-]") && s[3].ends_with("work > nanosleep@plt"), "{s:?}");
        // Expanding a callee row times the callee on its own.
        top.key(Key::Down);
        assert_eq!(top.key(Key::Expand), Action::Reinstall);
        assert!(top.functions.contains(&"nanosleep".to_string()));
        // Collapse from the callee row collapses its caller.
        top.key(Key::Up);
        top.key(Key::Down);
        assert_eq!(top.key(Key::Collapse), Action::Reinstall);
        assert!(!top.expanded.contains("work"));
        assert_eq!(top.key(Key::Metric), Action::None);
        assert_eq!(top.metric, Metric::Cpu);
        assert!(top.screen("t", 140, 10)[0].contains("[cpu time/s]"));
        // work had 1 s of wall time a second, half of it off the CPU: 0.5 threads waiting.
        top.key(Key::Metric);
        top.key(Key::Metric);
        assert_eq!(top.metric, Metric::Waiting);
        top.new_round();
        top.update(&sample(1.0, 10, 1_000_000_000, None));
        assert_eq!(top.history["work"].back(), Some(&0.5));
        let s = top.screen("t", 140, 10);
        assert!(s[2].contains("    0.50  ") && s[0].contains("all threads"), "{s:?}");
        // Threads one after another, then all again.
        top.threads = vec![7, 9];
        assert_eq!(top.key(Key::Thread), Action::Reinstall);
        assert_eq!(top.thread, Some(7));
        assert!(top.screen("t", 140, 10)[0].contains("thread 7"));
        assert_eq!(top.key(Key::Thread), Action::Reinstall);
        assert_eq!(top.key(Key::Thread), Action::Reinstall);
        assert_eq!(top.thread, None);
        top.threads.clear();
        assert_eq!(top.key(Key::Thread), Action::None, "no threads to choose from");
        // Blocks: counted rows under their function, the most run first, no time of their own.
        top.key(Key::Up);
        assert_eq!(top.key(Key::Blocks), Action::Reinstall);
        assert_eq!(top.key(Key::Blocks), Action::None, "already counted");
        assert!(top.blocks.contains("work"));
        top.new_round();
        let mut s = sample(1.0, 10, 1_000_000_000, None);
        for (off, n) in [("0x0", 10), ("0x1c", 30)] {
            let b = json!({"name": format!("work @ +{off}"), "calls": n, "outer": 0, "wall_ns": 0});
            s["rows"].as_array_mut().unwrap().push(b);
        }
        top.update(&s);
        let s = top.screen("t", 140, 10);
        assert!(s[2].ends_with("work [b]"), "{s:?}");
        assert!(s[3].starts_with("        30") && s[3].ends_with("work @ +0x1c"), "{s:?}");
        assert!(s[3].contains("         -          -       -       -  "), "{s:?}");
        assert!(s[4].ends_with("work @ +0x0"), "{s:?}");
        // Collapsing from a block row stops counting them.
        top.key(Key::Down);
        assert_eq!(top.key(Key::Collapse), Action::Reinstall);
        assert!(top.blocks.is_empty());
        assert_eq!(top.key(Key::Quit), Action::Quit);
    }
}
