//! `cover`: basic-block coverage with probes that remove themselves (KernInst §2). Every block
//! in scope gets a one-shot probe that sets its flag (a byte of the tool's area, one store, no
//! lock); every few milliseconds kerf reads the flags a word at a time and takes the probes of
//! the flags it finds set out of the target (traps first: each of their hits costs the most),
//! so the target converges to running its own code. Blocks no probe could take are reported
//! as not measurable, with why, never as uncovered.
//!
//! The result is a [`Coverage`]: per module its blocks (covered or not), its functions' counts
//! and what could not be measured. [`lcov`] and [`drcov`] write it in those formats, and
//! [`merge`] joins the coverage of several runs.

use crate::error::ToolError;
use crate::live::{resolve, LiveTool, TargetKind};
use kerf_analysis::cfg::FuncId;
use kerf_analysis::image::lines::Lines;
use kerf_patch::SpliceKind;
use kerf_session::instrument::{Action, Probe, ToolData};
use kerf_session::live::Installed;
use kerf_session::spec::{self, Point};
use kerf_session::AnalyzedImage;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::ops::Range;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

/// Seconds between two reads of the flags (and takings-out of the probes hit): a trap splice
/// costs microseconds a hit, so the sooner it goes the better; reading every flag is a word
/// per 8 blocks (libLLVM's 2.8 M blocks: 350 k words).
const PACE: f64 = 0.02;

/// The cover tool: its scopes, and how often its live table is shown.
pub struct Cover {
    /// Spec texts, one per scope (empty: every block of every image).
    scopes: Vec<String>,
    /// Seconds between live table updates (the user's `--interval`); flags are read at
    /// [`PACE`].
    interval: f64,
}

impl Cover {
    /// Check the scopes (before anything is done to a target): `MODULE` (every function of
    /// the module) or `MODULE:FUNCTION` (a name or a glob, every block of each).
    pub fn new(scopes: &[String], interval: f64) -> Result<Cover, ToolError> {
        let scopes: Vec<String> = scopes.iter().map(|s| scope_spec(s)).collect();
        for s in &scopes {
            spec::parse(s)?;
        }
        Ok(Cover { scopes, interval })
    }
}

/// The spec of a scope: `MODULE` → `MODULE:*@blocks`, `MODULE:F` → `MODULE:F@blocks`.
fn scope_spec(scope: &str) -> String {
    let scope = scope.strip_suffix("@blocks").unwrap_or(scope);
    match scope.split_once(':') {
        Some(_) => format!("{scope}@blocks"),
        None => format!("{scope}:*@blocks"),
    }
}

/// What the tool keeps with its probes.
pub struct Built {
    modules: Vec<ModuleInfo>,
    /// Per probe: its block's length and its function (an index into `functions`).
    blocks: Vec<(u32, u32)>,
    functions: Vec<(usize, String, u64)>,
    /// Per module: its probes (probes are sorted by module, then address).
    ranges: Vec<Range<usize>>,
}

/// A module's facts for the reports.
struct ModuleInfo {
    path: String,
    file: String,
    debug_file: Option<String>,
    build_id: Option<String>,
    /// Link-time addresses of its first and last loadable byte (page-aligned start).
    start: u64,
    end: u64,
    bias: Option<u64>,
}

impl ModuleInfo {
    fn of(m: &AnalyzedImage) -> ModuleInfo {
        let lo = m.segments.iter().map(|s| s.vaddr.0).min().unwrap_or(0) & !0xfff;
        let hi = m.segments.iter().map(|s| s.vaddr.0 + s.memsz).max().unwrap_or(0);
        ModuleInfo {
            path: m.path.display().to_string(),
            file: m.file.display().to_string(),
            debug_file: m.symbols.debug_file.as_ref().map(|d| d.path.display().to_string()),
            build_id: m.analysis.build_id.as_ref().map(|b| hex(b)),
            start: lo,
            end: hi.max(lo),
            bias: m.bias,
        }
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// Every block of every function of `images` (PLT stubs left out, as globs leave them), as
/// points.
fn every_block(images: &[AnalyzedImage]) -> Vec<Point> {
    let mut out = Vec::new();
    for (m, img) in images.iter().enumerate() {
        let cfg = &img.analysis.cfg;
        for (i, fun) in cfg.functions.iter().enumerate() {
            if fun.name.ends_with("@plt") {
                continue;
            }
            let f = FuncId(i as u32);
            for b in cfg.blocks_of(f) {
                out.push(Point {
                    spec: img.path.display().to_string(),
                    label: format!("{}+{:#x}", fun.name, b.start.0 - fun.entry.0),
                    module: m,
                    func: f,
                    addr: b.start,
                    at_exit: false,
                });
            }
        }
    }
    out
}

impl LiveTool for Cover {
    type Built = Built;
    type Table = Table;

    fn build(
        &self,
        images: &[AnalyzedImage],
        aliases: &[Vec<String>],
        _kind: TargetKind,
    ) -> Result<(Vec<Probe>, ToolData, Built), ToolError> {
        let mut points = if self.scopes.is_empty() {
            every_block(images)
        } else {
            let specs =
                self.scopes.iter().map(|s| spec::parse(s)).collect::<Result<Vec<_>, _>>()?;
            resolve(images, aliases, &specs)?
        };
        // Sorted by module, so that each module's flags are one run of the area.
        points.sort_by_key(|p| (p.module, p.addr.0));
        points.dedup_by_key(|p| (p.module, p.addr.0));
        let mut functions = Vec::new();
        let mut function_ids: HashMap<(usize, FuncId), u32> = HashMap::new();
        let mut blocks = Vec::with_capacity(points.len());
        let mut ranges = vec![0..0; images.len()];
        for (i, p) in points.iter().enumerate() {
            let cfg = &images[p.module].analysis.cfg;
            let len = cfg.block_containing(p.func, p.addr).map_or(1, |b| cfg.block(b).len);
            let fun = *function_ids.entry((p.module, p.func)).or_insert_with(|| {
                let f = cfg.function(p.func);
                functions.push((p.module, f.name.clone(), f.entry.0));
                (functions.len() - 1) as u32
            });
            blocks.push((len, fun));
            let r = &mut ranges[p.module];
            // (An unset range is 0..0; a set one ends past its first probe.)
            if r.end == 0 {
                *r = i..i + 1;
            } else {
                r.end = i + 1;
            }
        }
        let area = (points.len() as u64).next_multiple_of(64).max(64);
        let probes: Vec<Probe> = (points.into_iter().enumerate())
            .map(|(i, point)| Probe { point, action: Action::Flag(i as u64) })
            .collect();
        let mut modules: Vec<ModuleInfo> = images.iter().map(ModuleInfo::of).collect();
        // An image without segments (the kernel's, read from memory) spans its blocks.
        for (m, r) in modules.iter_mut().zip(&ranges) {
            if m.end == 0 && !r.is_empty() {
                m.start = probes[r.start].point.addr.0 & !0xfff;
                let last = r.end - 1;
                m.end = probes[last].point.addr.0 + u64::from(blocks[last].0);
            }
        }
        let tool = ToolData { area, ..ToolData::default() };
        Ok((probes, tool, Built { modules, blocks, functions, ranges }))
    }

    fn sampling(&self, s: kerf_session::live::Sampling) -> kerf_session::live::Sampling {
        kerf_session::live::Sampling { interval: PACE, at_once: true, ..s }
    }

    fn many_refusals(&self) -> bool {
        true
    }

    /// A new program after `exec` gets probes of its own; its coverage joins the old one's.
    fn follows_exec(&self) -> bool {
        true
    }

    fn merge_runs(&self, earlier: Value, mut later: Value) -> Value {
        let cov = |v: &Value| serde_json::from_value::<Coverage>(v["coverage"].clone()).ok();
        if let (Some(a), Some(b)) = (cov(&earlier), cov(&later)) {
            later["coverage"] = json!(merge(&[a, b]));
        }
        let n = |v: &Value, k: &str| v[k].as_u64().unwrap_or(0);
        later["retired"] = json!(n(&earlier, "retired") + n(&later, "retired"));
        let mut programs = match earlier.get("programs") {
            Some(Value::Array(a)) => a.clone(),
            _ => vec![
                json!({"stopped": earlier["stopped"], "splice_seconds": earlier["splice_seconds"]}),
            ],
        };
        programs
            .push(json!({"stopped": later["stopped"], "splice_seconds": later["splice_seconds"]}));
        later["programs"] = json!(programs);
        later
    }

    fn table(&self, built: &Built, probes: usize, inst: &dyn Installed) -> Table {
        Table::new(built, probes, inst, self.interval)
    }

    fn render(&self, table: &mut Table, _built: &Built, inst: &dyn Installed) -> String {
        table.read_flags(inst);
        table.show(inst)
    }

    fn retire(&self, table: &mut Table, _built: &Built, _inst: &dyn Installed) -> Vec<usize> {
        std::mem::take(&mut table.to_retire)
    }

    fn summarize(
        &self,
        table: &mut Table,
        built: &Built,
        probes: &[Probe],
        inst: &dyn Installed,
    ) -> Value {
        table.read_flags(inst);
        let cov = table.coverage(built, probes, inst);
        let over_time: Vec<Value> =
            table.history.iter().map(|&(t, c, l)| json!([t, c, l])).collect();
        json!({
            "coverage": cov,
            "retired": table.measurable() - table.live(inst),
            "probes_left": table.live(inst),
            "over_time": over_time,
            "forked": fork_json(inst.forks()),
        })
    }

    fn final_table(&self, summary: &Value) -> String {
        match serde_json::from_value::<Coverage>(summary["coverage"].clone()) {
            Ok(c) => summary_table(&c),
            Err(e) => format!("(no coverage in the summary: {e})\n"),
        }
    }

    fn sample(&self, table: &Table, _built: &Built, inst: &dyn Installed) -> Option<Value> {
        table.shown_now.then(|| {
            json!({"rows": [
                {"name": "blocks covered", "count": table.covered},
                {"name": "probes in", "count": table.live(inst)},
            ]})
        })
    }
}

/// The live state: which flags were seen, which probes to take out next, and the curve of
/// covered blocks.
pub struct Table {
    /// Per word of flags: the bytes already seen set (0xff each).
    seen: Vec<u64>,
    /// Per probe: its site (`None`: left out).
    site_of: Vec<Option<usize>>,
    /// Per module: its probes and the heap holding their flags.
    heaps: Vec<(Range<usize>, Option<usize>)>,
    pub covered: usize,
    /// Sites hit since the last tick, to take out (traps first).
    to_retire: Vec<usize>,
    started: Instant,
    shown: Instant,
    shown_now: bool,
    interval: f64,
    last_shown_covered: usize,
    /// `(seconds since the probes went in, blocks covered, probes still in)` at each update.
    history: Vec<(f64, usize, usize)>,
}

impl Table {
    fn new(built: &Built, probes: usize, inst: &dyn Installed, interval: f64) -> Table {
        let mut site_of = vec![None; probes];
        for (s, site) in inst.sites().iter().enumerate() {
            for &p in &site.probes {
                site_of[p] = Some(s);
            }
        }
        let heaps = (built.ranges.iter().cloned())
            .map(|r| {
                let h = r.clone().find_map(|i| inst.flag_heap(i));
                (r, h)
            })
            .collect();
        let now = Instant::now();
        Table {
            seen: vec![0; probes.div_ceil(8)],
            site_of,
            heaps,
            covered: 0,
            to_retire: Vec::new(),
            started: inst.installed_at().1,
            shown: now,
            shown_now: false,
            interval,
            last_shown_covered: 0,
            history: Vec::new(),
        }
    }

    /// Read every flag; those newly set count as covered, and their sites (still in) go on
    /// the list to take out, traps first, then jump2 (a springboard hop), then jump5.
    fn read_flags(&mut self, inst: &dyn Installed) {
        let mut new = Vec::new();
        for (r, h) in &self.heaps {
            let (Some(h), false) = (*h, r.is_empty()) else { continue };
            let Some(words) = inst.area_words(h) else { continue };
            for w in r.start / 8..r.end.div_ceil(8) {
                let Some(v) = words.get(w).map(|x| x.load(Relaxed)) else { break };
                // Most words hold no flag set, or only flags already seen.
                let old = self.seen[w];
                if v & !old == 0 {
                    continue;
                }
                for b in 0..8 {
                    let i = w * 8 + b;
                    let byte = (v >> (8 * b)) & 0xff;
                    if byte != 0 && (old >> (8 * b)) & 0xff == 0 && r.contains(&i) {
                        self.seen[w] |= 0xff << (8 * b);
                        self.covered += 1;
                        new.push(i);
                    }
                }
            }
        }
        let sites = inst.sites();
        let mut retire: Vec<usize> = (new.iter())
            .filter_map(|&i| self.site_of[i])
            .filter(|&s| sites[s].is_live())
            .filter(|&s| sites[s].probes.iter().all(|&p| self.is_seen(p)))
            .collect();
        let rank = |k: SpliceKind| match k {
            SpliceKind::Trap => 0,
            SpliceKind::Jump2 => 1,
            SpliceKind::Jump5 => 2,
        };
        retire.sort_by_key(|&s| rank(sites[s].kind));
        retire.dedup();
        self.to_retire.extend(retire);
    }

    fn is_seen(&self, i: usize) -> bool {
        (self.seen[i / 8] >> (8 * (i % 8))) & 0xff != 0
    }

    /// Blocks with a probe (taken out since, or not).
    fn measurable(&self) -> usize {
        self.site_of.iter().filter(|s| s.is_some()).count()
    }

    /// Probes still in the target.
    fn live(&self, inst: &dyn Installed) -> usize {
        inst.sites().iter().filter(|s| s.is_live()).count()
    }

    /// The live table, once an interval (empty between).
    fn show(&mut self, inst: &dyn Installed) -> String {
        let now = Instant::now();
        let secs = now.duration_since(self.shown).as_secs_f64();
        self.shown_now = secs >= self.interval;
        if !self.shown_now {
            return String::new();
        }
        self.shown = now;
        let t = now.duration_since(self.started).as_secs_f64();
        let (measurable, live) = (self.measurable(), self.live(inst));
        let traps = (inst.sites().iter()).filter(|s| s.is_live() && s.kind == SpliceKind::Trap);
        let new = self.covered - self.last_shown_covered;
        self.last_shown_covered = self.covered;
        self.history.push((t, self.covered, live));
        format!(
            "{t:>8.1} s  {} of {measurable} blocks covered ({:.1} %), {new} new; probes in: {live} ({} traps), taken out: {}\n",
            self.covered,
            100.0 * self.covered as f64 / measurable.max(1) as f64,
            traps.count(),
            measurable - live,
        )
    }

    /// The coverage found, per module.
    fn coverage(&self, built: &Built, probes: &[Probe], inst: &dyn Installed) -> Coverage {
        let reasons: HashMap<usize, String> =
            inst.refused().into_iter().map(|r| (r.probe, r.reason)).collect();
        let mut modules = Vec::new();
        for (m, r) in built.ranges.iter().enumerate() {
            if r.is_empty() {
                continue;
            }
            let info = &built.modules[m];
            let mut mc = ModuleCoverage {
                path: info.path.clone(),
                file: info.file.clone(),
                debug_file: info.debug_file.clone(),
                build_id: info.build_id.clone(),
                start: info.start,
                end: info.end,
                bias: info.bias,
                blocks: Vec::new(),
                not_measurable: Vec::new(),
                functions: Vec::new(),
            };
            for i in r.clone() {
                let (len, fun) = built.blocks[i];
                let addr = probes[i].point.addr.0;
                if self.site_of[i].is_some() {
                    mc.blocks.push(BlockCoverage { addr, len, covered: self.is_seen(i) });
                } else {
                    let reason = reasons.get(&i).cloned().unwrap_or_else(|| "left out".into());
                    let function = built.functions[fun as usize].1.clone();
                    mc.not_measurable.push(Unmeasured { addr, len, function, reason });
                }
            }
            let funs = (built.functions.iter()).filter(|f| f.0 == m).map(|f| (f.1.clone(), f.2));
            mc.functions = function_counts(&mc, funs);
            modules.push(mc);
        }
        Coverage::of(modules)
    }
}

/// Per function of a module (named with their entry addresses, `functions`): blocks, measurable
/// and covered, by which function's range each block falls in (a block belongs to the function
/// with the greatest entry at or below it).
/// Forked children found with kerf's probes in (`copies`), probes taken out of them as out
/// of the process (`probes_out`), sites whose bytes were neither (`foreign`), and children
/// kerf could not stop (`given_up`).
fn fork_json(f: kerf_session::instrument::ForkStats) -> Value {
    json!({
        "copies": f.copies,
        "probes_out": f.restored,
        "foreign": f.foreign,
        "given_up": f.given_up,
    })
}

fn function_counts(
    m: &ModuleCoverage,
    functions: impl Iterator<Item = (String, u64)>,
) -> Vec<FunctionCoverage> {
    let mut funs: Vec<FunctionCoverage> = functions
        .map(|(name, entry)| FunctionCoverage { name, entry, blocks: 0, measurable: 0, covered: 0 })
        .collect();
    funs.sort_by_key(|f| f.entry);
    funs.dedup_by_key(|f| f.entry);
    let find = |a: u64| funs.partition_point(|f| f.entry <= a).checked_sub(1);
    let mut counts = vec![(0u32, 0u32, 0u32); funs.len()];
    for b in &m.blocks {
        if let Some(k) = find(b.addr) {
            counts[k].0 += 1;
            counts[k].1 += 1;
            counts[k].2 += u32::from(b.covered);
        }
    }
    for u in &m.not_measurable {
        if let Some(k) = find(u.addr) {
            counts[k].0 += 1;
        }
    }
    for (f, (b, me, c)) in funs.iter_mut().zip(counts) {
        (f.blocks, f.measurable, f.covered) = (b, me, c);
    }
    funs.retain(|f| f.blocks > 0);
    funs
}

/// Serde for addresses as `0x` strings (JSON numbers lose precision above 2^53, and kernel
/// addresses are above it).
mod hex_addr {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{v:#x}"))
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        parse(&String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
    /// `0x` and hex digits.
    pub fn parse(t: &str) -> Result<u64, String> {
        let digits = t.strip_prefix("0x").ok_or_else(|| format!("{t}: no 0x"))?;
        u64::from_str_radix(digits, 16).map_err(|e| format!("{t}: {e}"))
    }
}

mod hex_addr_opt {
    use serde::{Deserialize, Deserializer, Serializer};
    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(v) => s.serialize_str(&format!("{v:#x}")),
            None => s.serialize_none(),
        }
    }
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        let t: Option<String> = Option::deserialize(d)?;
        t.map(|t| super::hex_addr::parse(&t).map_err(serde::de::Error::custom)).transpose()
    }
}

/// Coverage of one or more runs.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Coverage {
    /// Totals over the modules.
    pub blocks: usize,
    pub measurable: usize,
    pub covered: usize,
    pub modules: Vec<ModuleCoverage>,
}

impl Coverage {
    fn of(modules: Vec<ModuleCoverage>) -> Coverage {
        let measurable = modules.iter().map(|m| m.blocks.len()).sum();
        let blocks = measurable + modules.iter().map(|m| m.not_measurable.len()).sum::<usize>();
        let covered = modules.iter().map(|m| m.covered()).sum();
        Coverage { blocks, measurable, covered, modules }
    }
}

/// One module's blocks. Addresses are the image's own (link-time), so that runs of one file
/// loaded at different places merge.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ModuleCoverage {
    pub path: String,
    /// The file that was read (a process's may be under /proc/PID/root).
    pub file: String,
    /// The separate debug file its symbols came from, if any.
    pub debug_file: Option<String>,
    pub build_id: Option<String>,
    /// Its first (page-aligned) and last loadable addresses.
    #[serde(with = "hex_addr")]
    pub start: u64,
    #[serde(with = "hex_addr")]
    pub end: u64,
    /// Where it was loaded: runtime address = image address + bias (a process's module).
    #[serde(with = "hex_addr_opt")]
    pub bias: Option<u64>,
    /// Every measurable block, by address.
    pub blocks: Vec<BlockCoverage>,
    pub not_measurable: Vec<Unmeasured>,
    pub functions: Vec<FunctionCoverage>,
}

impl ModuleCoverage {
    pub fn covered(&self) -> usize {
        self.blocks.iter().filter(|b| b.covered).count()
    }
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BlockCoverage {
    #[serde(with = "hex_addr")]
    pub addr: u64,
    pub len: u32,
    pub covered: bool,
}

/// A block no probe could take, and why.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Unmeasured {
    #[serde(with = "hex_addr")]
    pub addr: u64,
    pub len: u32,
    pub function: String,
    pub reason: String,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FunctionCoverage {
    pub name: String,
    #[serde(with = "hex_addr")]
    pub entry: u64,
    pub blocks: u32,
    pub measurable: u32,
    pub covered: u32,
}

/// The text summary: a line per module, then per function that ran (blocks covered of
/// measurable), and how many functions did not run.
pub fn summary_table(c: &Coverage) -> String {
    let pct = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    let mut t = format!(
        "{:>9} {:>9} {:>9} {:>7}  module / function\n",
        "covered", "measured", "blocks", "%"
    );
    for m in &c.modules {
        let cov = m.covered();
        let all = m.blocks.len() + m.not_measurable.len();
        let _ = writeln!(
            t,
            "{cov:>9} {:>9} {all:>9} {:>6.1}%  {}",
            m.blocks.len(),
            pct(cov, m.blocks.len()),
            m.path
        );
        let mut idle = 0;
        for f in &m.functions {
            if f.covered == 0 {
                idle += 1;
                continue;
            }
            let _ = writeln!(
                t,
                "{:>9} {:>9} {:>9} {:>6.1}%    {}",
                f.covered,
                f.measurable,
                f.blocks,
                pct(f.covered as usize, f.measurable as usize),
                f.name
            );
        }
        if idle > 0 {
            let _ = writeln!(t, "{:>39}    ({idle} functions with no block covered)", "");
        }
    }
    let _ = writeln!(
        t,
        "{:>9} {:>9} {:>9} {:>6.1}%  in all ({} blocks not measurable)",
        c.covered,
        c.measurable,
        c.blocks,
        pct(c.covered, c.measurable),
        c.blocks - c.measurable
    );
    t
}

/// Why coverages could not be merged.
#[derive(Debug)]
pub struct MergeError(pub String);

impl std::fmt::Display for MergeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The coverage of several runs as one: a module is the same in two runs if its path and
/// build-id are (a module rebuilt in between is another module); a block is covered if any
/// run covered it, measurable if any run measured it.
pub fn merge(runs: &[Coverage]) -> Coverage {
    let mut by_key: BTreeMap<(String, Option<String>), ModuleCoverage> = BTreeMap::new();
    let mut order = Vec::new();
    for run in runs {
        for m in &run.modules {
            let key = (m.path.clone(), m.build_id.clone());
            let Some(into) = by_key.get_mut(&key) else {
                order.push(key.clone());
                by_key.insert(key, m.clone());
                continue;
            };
            let mut blocks: BTreeMap<u64, BlockCoverage> =
                into.blocks.drain(..).map(|b| (b.addr, b)).collect();
            for b in &m.blocks {
                blocks.entry(b.addr).and_modify(|x| x.covered |= b.covered).or_insert(b.clone());
            }
            into.not_measurable.retain(|u| !blocks.contains_key(&u.addr));
            for u in &m.not_measurable {
                if !blocks.contains_key(&u.addr)
                    && !into.not_measurable.iter().any(|x| x.addr == u.addr)
                {
                    into.not_measurable.push(u.clone());
                }
            }
            into.not_measurable.sort_by_key(|u| u.addr);
            into.blocks = blocks.into_values().collect();
            let funs: Vec<(String, u64)> = (into.functions.iter().chain(&m.functions))
                .map(|f| (f.name.clone(), f.entry))
                .collect();
            into.functions = function_counts(into, funs.into_iter());
        }
    }
    Coverage::of(order.into_iter().filter_map(|k| by_key.remove(&k)).collect())
}

/// The coverage as a drcov file (version 2, the format DynamoRIO's drcov writes and Lighthouse
/// and other coverage viewers read): the module table, then each covered block as a binary
/// record (offset from its module's start: u32, size: u16, module id: u16).
pub fn drcov(c: &Coverage) -> Vec<u8> {
    let mut out = String::from("DRCOV VERSION: 2\nDRCOV FLAVOR: kerf\n");
    let _ = writeln!(out, "Module Table: version 2, count {}", c.modules.len());
    out.push_str("Columns: id, base, end, entry, checksum, timestamp, path\n");
    for (id, m) in c.modules.iter().enumerate() {
        let base = m.start.wrapping_add(m.bias.unwrap_or(0));
        let end = m.end.wrapping_add(m.bias.unwrap_or(0));
        let _ = writeln!(
            out,
            "{id:3}, {base:#018x}, {end:#018x}, {:#018x}, 0x00000000, 0x00000000, {}",
            0, m.path
        );
    }
    let covered: Vec<(usize, &BlockCoverage)> = (c.modules.iter().enumerate())
        .flat_map(|(id, m)| m.blocks.iter().filter(|b| b.covered).map(move |b| (id, b)))
        .collect();
    let _ = writeln!(out, "BB Table: {} bbs", covered.len());
    let mut bytes = out.into_bytes();
    for (id, b) in covered {
        let m = &c.modules[id];
        let off = b.addr.saturating_sub(m.start).min(u32::MAX as u64) as u32;
        bytes.extend_from_slice(&off.to_le_bytes());
        bytes.extend_from_slice(&(b.len.min(u16::MAX as u32) as u16).to_le_bytes());
        bytes.extend_from_slice(&(id.min(u16::MAX as usize) as u16).to_le_bytes());
    }
    bytes
}

/// One source file of an lcov tracefile: per line whether it was hit, per function its line
/// and whether it was hit.
type SourceFile = (BTreeMap<u32, bool>, BTreeMap<String, (u32, bool)>);

/// The coverage as an lcov tracefile (what `genhtml` renders): per source file, its functions
/// (`FN`/`FNDA`: hit when the function's entry block was covered) and its lines (`DA`: a line
/// is instrumented when a measurable block holds code of it, hit when a covered block does).
/// Lines only unmeasurable blocks hold are left out, never reported as not hit. `lines(m)` is
/// the line table of module `m` (`None`: it has none; the module is left out).
pub fn lcov(c: &Coverage, lines: &dyn Fn(&ModuleCoverage) -> Option<Lines>) -> String {
    let mut files: BTreeMap<String, SourceFile> = BTreeMap::new();
    for m in &c.modules {
        let Some(table) = lines(m) else { continue };
        for b in &m.blocks {
            for r in table.overlapping(b.addr, b.addr + u64::from(b.len.max(1))) {
                let Some(file) = table.files.get(r.file as usize) else { continue };
                let hit = files.entry(file.clone()).or_default().0.entry(r.line).or_insert(false);
                *hit |= b.covered;
            }
        }
        let entry_hit: HashMap<u64, bool> = m.blocks.iter().map(|b| (b.addr, b.covered)).collect();
        for f in &m.functions {
            let (Some(&hit), Some((file, line))) =
                (entry_hit.get(&f.entry), table.line_at(f.entry))
            else {
                continue;
            };
            let fe = files.entry(file.to_string()).or_default();
            let e = fe.1.entry(f.name.clone()).or_insert((line, false));
            e.1 |= hit;
        }
    }
    let mut out = String::from("TN:\n");
    for (file, (lines, funs)) in &files {
        let _ = writeln!(out, "SF:{file}");
        for (name, (line, _)) in funs {
            let _ = writeln!(out, "FN:{line},{name}");
        }
        for (name, (_, hit)) in funs {
            let _ = writeln!(out, "FNDA:{},{name}", u8::from(*hit));
        }
        let _ = writeln!(out, "FNF:{}", funs.len());
        let _ = writeln!(out, "FNH:{}", funs.values().filter(|f| f.1).count());
        for (line, hit) in lines {
            let _ = writeln!(out, "DA:{line},{}", u8::from(*hit));
        }
        let _ = writeln!(out, "LF:{}", lines.len());
        let _ = writeln!(out, "LH:{}", lines.values().filter(|h| **h).count());
        out.push_str("end_of_record\n");
    }
    out
}

/// The line table of a module for [`lcov`]: from its separate debug file (the one its
/// symbols came from, else Debian's `/usr/lib/debug/.build-id/xx/rest.debug`), else from the
/// module file itself. `Err`: why none was found (each place tried).
pub fn module_lines(m: &ModuleCoverage) -> Result<Lines, String> {
    let mut tried = Vec::new();
    let mut candidates: Vec<String> = m.debug_file.iter().cloned().collect();
    if let Some(id) = m.build_id.as_deref().filter(|id| id.len() > 2) {
        candidates.push(format!("/usr/lib/debug/.build-id/{}/{}.debug", &id[..2], &id[2..]));
    }
    candidates.push(m.path.clone());
    candidates.push(m.file.clone());
    for c in candidates {
        let bytes = match std::fs::read(&c) {
            Ok(b) => b,
            Err(e) => {
                tried.push(format!("{c}: {e}"));
                continue;
            }
        };
        match Lines::of_elf(&bytes) {
            Ok(l) if !l.ranges.is_empty() => return Ok(l),
            Ok(_) => tried.push(format!("{c}: an empty line table")),
            Err(e) => tried.push(format!("{c}: {e}")),
        }
    }
    Err(tried.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(path: &str, blocks: &[(u64, bool)], unmeasured: &[u64]) -> ModuleCoverage {
        ModuleCoverage {
            path: path.into(),
            file: path.into(),
            debug_file: None,
            build_id: Some("ab12".into()),
            start: 0x1000,
            end: 0x3000,
            bias: Some(0x5555_0000_0000),
            blocks: blocks
                .iter()
                .map(|&(addr, covered)| BlockCoverage { addr, len: 4, covered })
                .collect(),
            not_measurable: unmeasured
                .iter()
                .map(|&addr| Unmeasured {
                    addr,
                    len: 2,
                    function: "f".into(),
                    reason: "no splice kind".into(),
                })
                .collect(),
            functions: vec![FunctionCoverage {
                name: "f".into(),
                entry: 0x1100,
                blocks: 0,
                measurable: 0,
                covered: 0,
            }],
        }
    }

    #[test]
    fn scopes_become_block_specs() {
        assert_eq!(scope_spec("libc"), "libc:*@blocks");
        assert_eq!(scope_spec("app:parse*"), "app:parse*@blocks");
        assert_eq!(scope_spec("app:main@blocks"), "app:main@blocks");
    }

    #[test]
    fn runs_merge_block_by_block() {
        let mut a = module("/bin/app", &[(0x1100, true), (0x1110, false)], &[0x1120]);
        a.functions = function_counts(&a, [("f".to_string(), 0x1100)].into_iter());
        let mut b = module("/bin/app", &[(0x1100, false), (0x1110, true), (0x1120, true)], &[]);
        b.functions = function_counts(&b, [("f".to_string(), 0x1100)].into_iter());
        let m = merge(&[Coverage::of(vec![a]), Coverage::of(vec![b])]);
        assert_eq!((m.blocks, m.measurable, m.covered), (3, 3, 3));
        assert!(m.modules[0].not_measurable.is_empty());
        assert_eq!(m.modules[0].functions[0].covered, 3);
        // Another build of the same path is another module.
        let mut c = module("/bin/app", &[(0x1100, true)], &[]);
        c.build_id = Some("cd34".into());
        assert_eq!(merge(&[m.clone(), Coverage::of(vec![c])]).modules.len(), 2);
    }

    #[test]
    fn json_round_trips_with_hex_addresses() {
        let c = Coverage::of(vec![module("/bin/app", &[(0x1100, true)], &[0x1120])]);
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(v["modules"][0]["blocks"][0]["addr"], "0x1100");
        assert_eq!(v["modules"][0]["bias"], "0x555500000000");
        assert_eq!(serde_json::from_value::<Coverage>(v).unwrap(), c);
    }

    #[test]
    fn drcov_has_the_module_table_and_a_record_per_covered_block() {
        let c = Coverage::of(vec![module("/bin/app", &[(0x1100, true), (0x1110, false)], &[])]);
        let d = drcov(&c);
        let text = String::from_utf8_lossy(&d);
        assert!(text.starts_with("DRCOV VERSION: 2\n"));
        assert!(text.contains("Module Table: version 2, count 1\n"));
        assert!(text.contains("  0, 0x0000555500001000, 0x0000555500003000,"));
        let head = text.find("BB Table: 1 bbs\n").unwrap() + "BB Table: 1 bbs\n".len();
        assert_eq!(&d[head..], &[0x00, 0x01, 0, 0, 4, 0, 0, 0]);
    }

    #[test]
    fn lcov_marks_lines_of_covered_blocks_and_leaves_out_unmeasured_ones() {
        use kerf_analysis::image::lines::LineRange;
        let c =
            Coverage::of(vec![module("/bin/app", &[(0x1100, true), (0x1110, false)], &[0x1120])]);
        let lines = Lines {
            files: vec!["/src/a.c".into()],
            ranges: vec![
                LineRange { start: 0x1100, end: 0x1104, file: 0, line: 3 },
                LineRange { start: 0x1110, end: 0x1114, file: 0, line: 5 },
                LineRange { start: 0x1120, end: 0x1122, file: 0, line: 7 },
            ],
            bad_units: 0,
        };
        let out = lcov(&c, &|_| Some(lines.clone()));
        assert_eq!(
            out,
            "TN:\nSF:/src/a.c\nFN:3,f\nFNDA:1,f\nFNF:1\nFNH:1\nDA:3,1\nDA:5,0\nLF:2\nLH:1\nend_of_record\n"
        );
    }
}
