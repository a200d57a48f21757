//! `analyze` reports: a KernInst-style summary of analysed images, one function's CFG, the
//! list of every function with the splice its entry would take, and offline splice plans, each
//! as text or as JSON.

use crate::error::ToolError;
use kerf_analysis::cfg::{Cfg, EdgeTarget, FuncId, TableFormat};
use kerf_analysis::{Analysis, Progress, Summary};
use kerf_patch::SpliceKind;
use kerf_session::instrument::{Action, Probe};
use kerf_session::kernel::Kernel;
use kerf_session::live::LiveError;
use kerf_session::plan::{plan_sites, Rules};
use kerf_session::spec::close_names;
use kerf_session::spec::{parse, Spec};
use kerf_session::{analyze_file, analyze_process, AnalyzedImage, LoadOptions};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

/// What to analyse.
#[derive(Clone, Copy, Debug)]
pub enum Source<'a> {
    /// An ELF file.
    File(&'a Path),
    /// Every module mapped into a live process (read only: nothing is attached).
    Process(i32),
    /// The running kernel's text and loaded modules (through kerf's driver).
    Kernel,
}

/// Analysed images, and what they are.
pub struct Loaded {
    pub images: Vec<AnalyzedImage>,
    /// Modules of a process that could not be analysed, each with why.
    pub skipped: Vec<String>,
    /// What was analysed, for the summary's title.
    pub what: String,
    /// The kernel whose images these are (its driver stays open while they are used).
    pub kernel: Option<Kernel>,
}

impl Loaded {
    /// The warnings of loading: each image's cache and debug-file warnings (the kernel's
    /// cache warnings said once, with a cache directory refused).
    pub fn warnings(&self) -> impl Iterator<Item = &str> {
        let kernel = self.kernel.iter().flat_map(|k| k.warnings.iter().map(String::as_str));
        let images = self.images.iter().flat_map(|img| {
            let cache = img.cache_warning.as_deref().filter(|_| self.kernel.is_none());
            cache.into_iter().chain(img.debug_warnings.iter().map(String::as_str))
        });
        kernel.chain(images)
    }
}

/// Load and analyse `source`.
pub fn load(
    source: Source<'_>,
    opts: &LoadOptions,
    progress: &dyn Progress,
) -> Result<Loaded, ToolError> {
    Ok(match source {
        Source::Kernel => {
            let cache = match (&opts.no_cache, &opts.cache_dir) {
                (true, _) => None,
                (false, Some(d)) => Some(d.clone()),
                (false, None) => kerf_session::cache::default_dir(),
            };
            let mut k =
                Kernel::open(true, cache.as_deref(), progress).map_err(LiveError::Kernel)?;
            let what = format!("the running kernel ({} kallsyms symbols)", k.kallsyms_symbols);
            let images = std::mem::take(&mut k.images);
            Loaded { images, skipped: Vec::new(), what, kernel: Some(k) }
        }
        Source::Process(pid) => {
            let (images, skipped) = analyze_process(pid, opts, progress)?;
            Loaded { images, skipped, what: format!("process {pid}"), kernel: None }
        }
        Source::File(path) => {
            let img = analyze_file(path, opts, progress)?;
            Loaded {
                images: vec![img],
                skipped: Vec::new(),
                what: path.display().to_string(),
                kernel: None,
            }
        }
    })
}

/// What to report about analysed images (the summary alone when nothing is asked).
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// One function's blocks, edges and live-in registers.
    pub function: Option<String>,
    /// Splice plans of these specs, as `count` would splice them.
    pub plan: Vec<String>,
    /// Every function, with the splice its entry would take.
    pub functions: bool,
}

/// The reports asked for, computed (a function that does not exist, a spec that does not
/// resolve fail here, before anything is printed).
pub struct Report<'a> {
    loaded: &'a Loaded,
    seconds: f64,
    function: Option<Vec<(usize, FuncId)>>,
    plan: Option<Vec<Planned>>,
    entries: Option<EntryPlans>,
}

impl<'a> Report<'a> {
    /// Find, plan and list what `req` asks of `loaded` (analysed in `seconds`).
    pub fn new(loaded: &'a Loaded, req: &Request, seconds: f64) -> Result<Report<'a>, ToolError> {
        let images = &loaded.images;
        let function = match &req.function {
            Some(name) => Some(find_function(images, name)?),
            None => None,
        };
        let rules = if loaded.kernel.is_some() { Rules::KERNEL } else { Rules::PROCESS };
        let plan =
            if req.plan.is_empty() { None } else { Some(plan_offline(images, &req.plan, rules)?) };
        // Every function's entry planned at once, as `kerf count '*'` would splice them.
        let entries = if req.functions {
            let all = plan_offline(images, &["*".to_string()], rules)?;
            Some(all.into_iter().map(|p| ((p.module, p.addr), p)).collect::<HashMap<_, _>>())
        } else {
            None
        };
        Ok(Report { loaded, seconds, function, plan, entries })
    }

    /// Everything asked for, as one JSON object: the summary, with `function_list`,
    /// `function` and `plan` as asked.
    pub fn json(&self) -> Value {
        let images = &self.loaded.images;
        let mut v = summary_json(&self.loaded.what, images, self.seconds);
        if let Some(e) = &self.entries {
            v["function_list"] = function_list_json(images, e);
        }
        if let Some(found) = &self.function {
            v["function"] = Value::Array(
                found.iter().map(|(i, f)| function_json(&images[*i].analysis, *f)).collect(),
            );
        }
        if let Some(p) = &self.plan {
            v["plan"] = plan_json(p);
        }
        v
    }

    /// The one text report asked for: the plan, else the function list, else the
    /// function(s), else the summary.
    pub fn text(&self) -> String {
        let images = &self.loaded.images;
        if let Some(p) = &self.plan {
            render_plan(p)
        } else if let Some(e) = &self.entries {
            render_function_list(images, e)
        } else if let Some(found) = &self.function {
            found.iter().map(|(i, f)| render_function(&images[*i].analysis, *f)).collect()
        } else {
            render_summary(&self.loaded.what, images, self.seconds)
        }
    }
}

/// All functions called `name` (or with it as an alias) in any image; an error suggesting
/// close names when there is none.
fn find_function(images: &[AnalyzedImage], name: &str) -> Result<Vec<(usize, FuncId)>, ToolError> {
    let mut found = Vec::new();
    for (i, img) in images.iter().enumerate() {
        found.extend(img.analysis.cfg.functions_named(name).map(|f| (i, f)));
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let close = close_names(name, images.iter().map(|i| &i.analysis));
    Err(ToolError::NoFunction { name: name.to_string(), close })
}

fn total(images: &[AnalyzedImage]) -> Summary {
    let mut t = Summary::default();
    for img in images {
        let s = &img.analysis.summary;
        t.functions += s.functions;
        t.functions_from_symbols += s.functions_from_symbols;
        t.functions_from_calls += s.functions_from_calls;
        t.functions_from_unwind += s.functions_from_unwind;
        t.functions_from_pointers += s.functions_from_pointers;
        t.noreturn_functions += s.noreturn_functions;
        t.blocks += s.blocks;
        t.edges += s.edges;
        t.call_graph_edges += s.call_graph_edges;
        t.instruction_bytes += s.instruction_bytes;
        t.text_bytes += s.text_bytes;
        t.jump_tables += s.jump_tables;
        t.jump_table_entries += s.jump_table_entries;
        t.unanalysable_jumps += s.unanalysable_jumps;
        t.padding_runs += s.padding_runs;
        t.padding_bytes += s.padding_bytes;
        t.no_splice_ranges += s.no_splice_ranges;
    }
    t
}

/// Phase times summed over images, in first-seen order.
fn phases(images: &[AnalyzedImage]) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = vec![("load".into(), 0.0)];
    for img in images {
        out[0].1 += img.load_seconds;
        if img.cached {
            continue;
        }
        for (name, s) in &img.analysis.timings.0 {
            match out.iter_mut().find(|(n, _)| n == name) {
                Some(e) => e.1 += s,
                None => out.push((name.clone(), *s)),
            }
        }
    }
    out
}

fn summary_json(what: &str, images: &[AnalyzedImage], seconds: f64) -> Value {
    let t = total(images);
    let per_image: Vec<Value> = images
        .iter()
        .map(|img| {
            let mut v = serde_json::to_value(&img.analysis.summary).unwrap_or(Value::Null);
            v["path"] = json!(img.path.display().to_string());
            v["cached"] = json!(img.cached);
            if let Some(b) = img.bias {
                v["bias"] = json!(format!("{b:#x}"));
            }
            if let kerf_session::load::Bytes::Owned(bytes) = &*img.bytes {
                // Memory read from a live kernel: a digest tells whether its text changed.
                v["text_digest"] = json!(format!("{:016x}", fnv1a(bytes)));
            }
            if let Some(id) = &img.analysis.build_id {
                v["build_id"] = json!(hex(id));
            }
            v["symbols"] = json!(img.symbols.to_string());
            v["debug_file"] =
                json!(img.symbols.debug_file.as_ref().map(|d| d.path.display().to_string()));
            v["no_splice"] = img
                .analysis
                .cfg
                .no_splice
                .iter()
                .map(|n| {
                    json!({
                        "start": format!("{}", n.start),
                        "end": format!("{:#x}", n.end()),
                        "why": n.to_string(),
                    })
                })
                .collect();
            v
        })
        .collect();
    let mut v = serde_json::to_value(&t).unwrap_or(Value::Null);
    v["target"] = json!(what);
    v["images"] = json!(images.len());
    v["seconds"] = json!(seconds);
    v["cached"] = json!(images.iter().all(|i| i.cached));
    v["phases"] = Value::Object(phases(images).into_iter().map(|(n, s)| (n, json!(s))).collect());
    v["per_image"] = Value::Array(per_image);
    v
}

/// 64-bit FNV-1a: a cheap digest to compare a kernel's text before and after kerf.
fn fnv1a(b: &[u8]) -> u64 {
    b.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, x| (h ^ *x as u64).wrapping_mul(0x100_0000_01b3))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn pct(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        100.0 * a as f64 / b as f64
    }
}

fn render_summary(what: &str, images: &[AnalyzedImage], seconds: f64) -> String {
    let t = total(images);
    let mut o = String::new();
    let _ = writeln!(o, "kerf analyze: {what}");
    let row = |o: &mut String, k: &str, v: String| {
        let _ = writeln!(o, "  {k:<22}{v}");
    };
    row(&mut o, "images", images.len().to_string());
    row(
        &mut o,
        "functions",
        format!(
            "{}  ({} from symbols, {} from unwind info, {} from pointers, {} from calls; {} never return)",
            t.functions,
            t.functions_from_symbols,
            t.functions_from_unwind,
            t.functions_from_pointers,
            t.functions_from_calls,
            t.noreturn_functions
        ),
    );
    row(&mut o, "basic blocks", format!("{}  ({} edges)", t.blocks, t.edges));
    row(
        &mut o,
        "instruction bytes",
        format!(
            "{}  ({:.1}% of {} text bytes)",
            t.instruction_bytes,
            pct(t.instruction_bytes, t.text_bytes),
            t.text_bytes
        ),
    );
    row(&mut o, "jump tables", format!("{}  ({} entries)", t.jump_tables, t.jump_table_entries));
    row(&mut o, "unanalysable jumps", t.unanalysable_jumps.to_string());
    row(&mut o, "call graph edges", t.call_graph_edges.to_string());
    row(&mut o, "padding", format!("{} bytes in {} runs", t.padding_bytes, t.padding_runs));
    if let [img] = images {
        row(&mut o, "symbols from", img.symbols.to_string());
    }
    row(
        &mut o,
        "never spliced",
        format!(
            "{} ranges  (signal trampolines, unwind entries inside other code)",
            t.no_splice_ranges
        ),
    );
    if images.len() > 1 {
        let _ = writeln!(o, "images:");
        for img in images {
            let s = &img.analysis.summary;
            let bias = img.bias.map(|b| format!("  bias {b:#x}")).unwrap_or_default();
            let _ = writeln!(
                o,
                "  {}  {} functions, {} blocks{}{}",
                img.path.display(),
                s.functions,
                s.blocks,
                bias,
                if img.cached { "  (cached)" } else { "" }
            );
            if img.symbols.debug_file.is_some() {
                let _ = writeln!(o, "    symbols: {}", img.symbols);
            }
        }
    }
    let cached = images.iter().filter(|i| i.cached).count();
    let _ = writeln!(o, "time:");
    for (name, s) in phases(images) {
        let _ = writeln!(o, "  {name:<22}{s:.3} s");
    }
    let _ = writeln!(
        o,
        "  {:<22}{seconds:.3} s{}",
        "total",
        if cached > 0 {
            format!("  ({cached} of {} from cache)", images.len())
        } else {
            String::new()
        }
    );
    o
}

/// Where an edge goes, relative to the function for blocks and by name for functions.
fn target_name(a: &Analysis, f: FuncId, t: EdgeTarget) -> String {
    let cfg = &a.cfg;
    let entry = cfg.function(f).entry.0;
    match t {
        EdgeTarget::Block(b) if cfg.block(b).func != f => {
            let g = cfg.function(cfg.block(b).func);
            format!("{}{}", g.name, off(cfg.block(b).start.0, g.entry.0))
        }
        EdgeTarget::Block(b) => off(cfg.block(b).start.0, entry),
        EdgeTarget::Function(g) => cfg.function(g).name.clone(),
        EdgeTarget::Address(x) => format!("{x}"),
        EdgeTarget::None => "-".into(),
    }
}

fn off(a: u64, base: u64) -> String {
    if a >= base {
        format!("+{:#x}", a - base)
    } else {
        format!("-{:#x}", base - a)
    }
}

/// One function's CFG as text. Block addresses are offsets from the entry, so the output of
/// the same code does not depend on where it was linked (golden files rely on this).
pub fn render_function(a: &Analysis, f: FuncId) -> String {
    let cfg: &Cfg = &a.cfg;
    let fun = cfg.function(f);
    let mut o = String::new();
    let _ = writeln!(
        o,
        "function {} in {}  entry {}  symbol-size {}  blocks {}  insn-bytes {}{}",
        fun.name,
        a.image.rsplit('/').next().unwrap_or(&a.image),
        fun.entry,
        fun.symbol_size,
        fun.blocks.len(),
        fun.insn_bytes,
        if fun.noreturn { "  noreturn" } else { "" }
    );
    if !fun.aliases.is_empty() {
        let _ = writeln!(o, "  aliases {}", fun.aliases.join(" "));
    }
    let _ = writeln!(o, "  live-in {}  flags {}", fun.live_in, fun.flags_live_in);
    let _ = writeln!(o, "  must-def {}  flags {}", fun.must_def, fun.flags_must_def);
    let names = |ids: &[FuncId]| -> String {
        if ids.is_empty() {
            "-".into()
        } else {
            ids.iter().map(|g| cfg.function(*g).name.as_str()).collect::<Vec<_>>().join(" ")
        }
    };
    let _ = writeln!(o, "  callers {}", names(a.call_graph.callers(f)));
    let _ = writeln!(o, "  callees {}", names(a.call_graph.callees(f)));
    for b in cfg.blocks_of(f) {
        let _ = writeln!(
            o,
            "  block {} len {} insns {} {}  live-in {}  flags {}",
            off(b.start.0, fun.entry.0),
            b.len,
            b.insns,
            b.term.name(),
            b.live_in,
            b.flags_live_in
        );
        for e in cfg.edges_of(b) {
            let _ = writeln!(o, "    {} {}", e.kind.name(), target_name(a, f, e.target));
        }
        if let kerf_analysis::cfg::Terminator::JumpTable(t) = b.term {
            let jt = &cfg.jump_tables[t.0 as usize];
            let fmt = match jt.format {
                TableFormat::Absolute64 => "absolute64",
                TableFormat::Relative32 { .. } => "relative32",
            };
            let targets: Vec<String> = jt.targets.iter().map(|x| off(x.0, fun.entry.0)).collect();
            let _ = writeln!(
                o,
                "    table {} entries {}: {}",
                fmt,
                jt.targets.len(),
                targets.join(" ")
            );
        }
    }
    o
}

fn function_json(a: &Analysis, f: FuncId) -> Value {
    let cfg = &a.cfg;
    let fun = cfg.function(f);
    let blocks: Vec<Value> = cfg
        .blocks_of(f)
        .iter()
        .map(|b| {
            json!({
                "start": format!("{}", b.start),
                "len": b.len,
                "insns": b.insns,
                "terminator": b.term.name(),
                "live_in": b.live_in.to_string(),
                "flags_live_in": b.flags_live_in.to_string(),
                "edges": cfg.edges_of(b).map(|e| json!({
                    "kind": e.kind.name(),
                    "target": target_name(a, f, e.target),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let tables: Vec<Value> = cfg
        .blocks_of(f)
        .iter()
        .filter_map(|b| match b.term {
            kerf_analysis::cfg::Terminator::JumpTable(t) => Some(&cfg.jump_tables[t.0 as usize]),
            _ => None,
        })
        .map(|jt| {
            json!({
                "jump": format!("{}", jt.jump),
                "table": format!("{}", jt.table),
                "format": match jt.format {
                    TableFormat::Absolute64 => "absolute64",
                    TableFormat::Relative32 { .. } => "relative32",
                },
                "entries": jt.targets.len(),
                "targets": jt.targets.iter().map(|t| format!("{t}")).collect::<Vec<_>>(),
            })
        })
        .collect();
    let unanalysable = cfg
        .blocks_of(f)
        .iter()
        .filter(|b| b.term == kerf_analysis::cfg::Terminator::Unanalysable)
        .count();
    json!({
        "name": fun.name,
        "image": a.image,
        "jump_tables": tables,
        "unanalysable_jumps": unanalysable,
        "noreturn": fun.noreturn,
        "entry": format!("{}", fun.entry),
        "live_in": fun.live_in.to_string(),
        "flags_live_in": fun.flags_live_in.to_string(),
        "callers": a.call_graph.callers(f).iter().map(|g| cfg.function(*g).name.clone()).collect::<Vec<_>>(),
        "callees": a.call_graph.callees(f).iter().map(|g| cfg.function(*g).name.clone()).collect::<Vec<_>>(),
        "blocks": blocks,
    })
}

/// One planned point of `--plan`: its label, image address (target address with `-p`), splice
/// kind (`None`: refused) and why a stronger kind (or any) was refused.
pub struct Planned {
    pub label: String,
    /// Index of the image in the analysed images.
    pub module: usize,
    pub addr: u64,
    pub kind: Option<SpliceKind>,
    pub reason: Option<String>,
}

/// Plan a counter at each point of `specs` with the planner `kerf count` uses, without a
/// target: which splice each site would take and why a stronger one was refused. Probes that
/// share an address share a site and are listed once. (Springboards in a program's start-up
/// code need a live process that is past it, so they are not planned here.)
fn plan_offline(
    images: &[AnalyzedImage],
    specs: &[String],
    rules: Rules,
) -> Result<Vec<Planned>, ToolError> {
    let parsed: Vec<Spec> = specs.iter().map(|t| parse(t)).collect::<Result<_, _>>()?;
    // An image analysed alone answers only to its own name.
    let aliases = vec![Vec::new(); images.len()];
    let points = crate::live::resolve(images, &aliases, &parsed)?;
    let probes: Vec<Probe> =
        points.into_iter().map(|point| Probe { point, action: Action::Count }).collect();
    let sites = plan_sites(images, &probes, None, &[], rules, None).map_err(ToolError::Plan)?;
    let mut out: Vec<Planned> = sites
        .sites
        .iter()
        .map(|s| Planned {
            label: probes[s.first].point.label.clone(),
            module: probes[s.first].point.module,
            addr: s.plan.displaced.point,
            kind: Some(s.plan.kind),
            reason: s.plan.reason.as_ref().map(ToString::to_string),
        })
        .chain(sites.refused.iter().map(|r| Planned {
            label: r.label.clone(),
            module: probes[r.probe].point.module,
            addr: r.addr,
            kind: None,
            reason: Some(r.reason.to_string()),
        }))
        .collect();
    out.sort_by_key(|p| p.addr);
    Ok(out)
}

/// How many planned points took `kind` (`None`: refused).
fn count_kind(plan: &[Planned], kind: Option<SpliceKind>) -> usize {
    plan.iter().filter(|p| p.kind == kind).count()
}

fn plan_json(plan: &[Planned]) -> Value {
    json!({
        "sites": plan.len(),
        "jump5": count_kind(plan, Some(SpliceKind::Jump5)),
        "jump2": count_kind(plan, Some(SpliceKind::Jump2)),
        "trap": count_kind(plan, Some(SpliceKind::Trap)),
        "refused": count_kind(plan, None),
        "points": plan.iter().map(|p| json!({
            "point": p.label,
            "address": format!("{:#x}", p.addr),
            "kind": p.kind.map_or("refused", |k| k.name()),
            "reason": p.reason,
        })).collect::<Vec<_>>(),
    })
}

/// The plan's totals, and every point that did not get a jump5 with its reason.
fn render_plan(plan: &[Planned]) -> String {
    let mut o = String::new();
    let n = plan.len();
    let _ =
        writeln!(o, "kerf analyze: splice plan of {n} sites (offline, as kerf count would splice)");
    for kind in [Some(SpliceKind::Jump5), Some(SpliceKind::Jump2), Some(SpliceKind::Trap), None] {
        let k = count_kind(plan, kind);
        let name = kind.map_or("refused", |k| k.name());
        let _ = writeln!(o, "  {name:<10}{k:>8}  ({:.1}%)", pct(k as u64, n as u64));
    }
    for p in plan.iter().filter(|p| p.kind != Some(SpliceKind::Jump5)) {
        let _ = writeln!(
            o,
            "  {:#x} {}  {}: {}",
            p.addr,
            p.label,
            p.kind.map_or("refused", |k| k.name()),
            p.reason.as_deref().unwrap_or("-")
        );
    }
    o
}

/// The planned splice at each function entry, by (image, target address).
type EntryPlans = HashMap<(usize, u64), Planned>;

/// Per function of every image, with the splice its entry would take.
fn each_function<'a>(
    images: &'a [AnalyzedImage],
    plans: &'a EntryPlans,
) -> impl Iterator<Item = (&'a AnalyzedImage, &'a kerf_analysis::cfg::Function, Option<&'a Planned>)>
{
    images.iter().enumerate().flat_map(move |(i, img)| {
        let bias = img.bias.unwrap_or(0);
        img.analysis.cfg.functions.iter().map(move |f| (img, f, plans.get(&(i, f.entry.0 + bias))))
    })
}

fn splice_name(p: Option<&Planned>) -> &'static str {
    p.map_or("-", |p| p.kind.map_or("refused", |k| k.name()))
}

fn function_list_json(images: &[AnalyzedImage], plans: &EntryPlans) -> Value {
    Value::Array(
        each_function(images, plans)
            .map(|(img, f, p)| {
                json!({
                    "name": f.name,
                    "aliases": f.aliases,
                    "image": img.path.display().to_string(),
                    "entry": format!("{:#x}", f.entry.0 + img.bias.unwrap_or(0)),
                    "size": f.extent.end - f.extent.start,
                    "symbol_size": f.symbol_size,
                    "blocks": f.blocks.len(),
                    "insn_bytes": f.insn_bytes,
                    "noreturn": f.noreturn,
                    "entry_splice": splice_name(p),
                    "entry_reason": p.and_then(|p| p.reason.clone()),
                })
            })
            .collect(),
    )
}

/// One line per function: entry, size of its code, blocks, the splice its entry would take,
/// name (and why a stronger splice was refused).
fn render_function_list(images: &[AnalyzedImage], plans: &EntryPlans) -> String {
    let mut o = String::new();
    let _ = writeln!(o, "{:<18} {:>7} {:>6}  {:<7} name", "entry", "size", "blocks", "splice");
    for (img, f, p) in each_function(images, plans) {
        let why = p.and_then(|p| p.reason.as_deref()).map(|r| format!("  ({r})"));
        let _ = writeln!(
            o,
            "{:<18} {:>7} {:>6}  {:<7} {}{}",
            format!("{:#x}", f.entry.0 + img.bias.unwrap_or(0)),
            f.extent.end - f.extent.start,
            f.blocks.len(),
            splice_name(p),
            f.name,
            why.unwrap_or_default()
        );
    }
    o
}
