//! `kerf analyze`: structural analysis of a file or of a live process's modules, printed as a
//! KernInst-style summary, one function's CFG, or JSON.

use crate::progress::TermProgress;
use kerf_analysis::cfg::{Cfg, EdgeTarget, FuncId, TableFormat};
use kerf_analysis::{Analysis, Summary};
use kerf_patch::SpliceKind;
use kerf_session::instrument::{Action, Probe};
use kerf_session::plan::{plan_sites, Rules};
use kerf_session::spec::close_names;
use kerf_session::spec::{parse, Spec};
use kerf_session::{analyze_file, analyze_process, AnalyzedImage, LoadOptions};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

#[derive(clap::Args)]
pub struct Args {
    /// ELF executable or shared object to analyse.
    #[arg(required_unless_present_any = ["pid", "kernel"], conflicts_with_all = ["pid", "kernel"])]
    target: Option<PathBuf>,
    /// Analyse every module mapped into this live process (read only: nothing is attached).
    #[arg(short, long, conflicts_with = "kernel")]
    pid: Option<i32>,
    /// Analyse the running kernel's text and loaded modules (needs kerf's driver, kerf.ko).
    #[arg(long)]
    kernel: bool,
    /// Symbol file (nm, System.map or /proc/kallsyms format) for an image without symbols
    /// (with -p, for the main executable).
    #[arg(long, value_name = "FILE")]
    symbols: Option<PathBuf>,
    /// Print this function's blocks, edges and live-in registers.
    #[arg(long, value_name = "NAME")]
    function: Option<String>,
    /// Print the summary (and the function, with --function) as one JSON object.
    #[arg(long)]
    json: bool,
    /// Neither read nor write the analysis cache.
    #[arg(long)]
    no_cache: bool,
    /// Check all of an analysis read from the cache against the image's code (every block
    /// decoded again, edges, jump tables, padding, liveness), as count and time check each
    /// function before they splice in it; a mismatch rejects the entry and the image is
    /// analysed again. Without it a cached analysis is shown as read (its checksum, key and
    /// the image's SHA-256 are always checked).
    #[arg(long)]
    validate: bool,
    /// Use no separate debug files (build-id paths, .gnu_debuglink, debuginfod): only the
    /// image's own symbols. The environment variable KERF_NO_DEBUG_FILES=1 does the same for
    /// every command.
    #[arg(long)]
    no_debug_files: bool,
    /// Plan the splices of these points as `kerf count` would (jump5, jump2 or trap, and why a
    /// stronger kind was refused), offline: nothing is attached. Repeatable; specs as for
    /// `kerf count` (`'*'` is every function's entry).
    #[arg(long, value_name = "SPEC")]
    plan: Vec<String>,
    /// List every function: name, entry, size, blocks, and the splice a probe at its entry
    /// would take (with why a stronger one was refused). With --json, as `function_list`.
    #[arg(long)]
    functions: bool,
}

pub fn run(args: Args) -> Result<(), String> {
    // `kerf analyze ... | head`: end quietly when the reader goes away, as other tools do,
    // instead of panicking on the failed write (analysis touches no target, so dying there
    // leaves nothing behind; the live tools keep SIGPIPE ignored and restore their target).
    // SAFETY: setting a signal's disposition to the default has no preconditions.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let t0 = Instant::now();
    let symbols = match &args.symbols {
        Some(p) => Some(kerf_session::read_text_file(p).map_err(|e| e.to_string())?),
        None => None,
    };
    let debug = if args.no_debug_files {
        kerf_session::DebugOptions::disabled()
    } else {
        kerf_session::DebugOptions::from_env()
    };
    let opts = LoadOptions {
        symbols,
        no_cache: args.no_cache,
        cache_dir: None,
        debug,
        validate: args.validate,
    };
    let progress = TermProgress::new();
    let mut _kernel = None;
    let (images, skipped, what) = match (args.pid, &args.target) {
        _ if args.kernel => {
            let k =
                kerf_session::kernel::Kernel::open(true, &progress).map_err(|e| e.to_string())?;
            let what = format!("the running kernel ({} kallsyms symbols)", k.kallsyms_symbols);
            let k = _kernel.insert(k);
            (std::mem::take(&mut k.images), Vec::new(), what)
        }
        (Some(pid), _) => {
            let (imgs, skipped) =
                analyze_process(pid, &opts, &progress).map_err(|e| e.to_string())?;
            (imgs, skipped, format!("process {pid}"))
        }
        (None, Some(path)) => {
            let img = analyze_file(path, &opts, &progress).map_err(|e| e.to_string())?;
            (vec![img], Vec::new(), path.display().to_string())
        }
        (None, None) => return Err("give a file to analyse, or -p PID".into()),
    };
    progress.finish();
    let seconds = t0.elapsed().as_secs_f64();
    for img in &images {
        if let Some(w) = &img.cache_warning {
            eprintln!("kerf: warning: {w}");
        }
        for w in &img.debug_warnings {
            eprintln!("kerf: warning: {w}");
        }
    }
    for s in &skipped {
        eprintln!("kerf: skipped module {s}");
    }

    let function = match &args.function {
        Some(name) => Some(find_function(&images, name)?),
        None => None,
    };
    let rules = if args.kernel { Rules::KERNEL } else { Rules::PROCESS };
    let plan =
        if args.plan.is_empty() { None } else { Some(plan_offline(&images, &args.plan, rules)?) };
    // Every function's entry planned at once, as `kerf count '*'` would splice them.
    let entries = if args.functions {
        let all = plan_offline(&images, &["*".to_string()], rules)?;
        Some(all.into_iter().map(|p| ((p.module, p.addr), p)).collect::<HashMap<_, _>>())
    } else {
        None
    };
    if args.json {
        let mut v = summary_json(&what, &images, seconds);
        if let Some(e) = &entries {
            v["function_list"] = function_list_json(&images, e);
        }
        if let Some(found) = &function {
            v["function"] = Value::Array(
                found.iter().map(|(i, f)| function_json(&images[*i].analysis, *f)).collect(),
            );
        }
        if let Some(p) = &plan {
            v["plan"] = plan_json(p);
        }
        println!("{v}");
    } else if let Some(p) = &plan {
        print!("{}", render_plan(p));
    } else if let Some(e) = &entries {
        print!("{}", render_function_list(&images, e));
    } else if let Some(found) = &function {
        for (i, f) in found {
            print!("{}", render_function(&images[*i].analysis, *f));
        }
    } else {
        print!("{}", render_summary(&what, &images, seconds));
    }
    Ok(())
}

/// All functions called `name` (or with it as an alias) in any image; an error suggesting
/// close names when there is none.
fn find_function(images: &[AnalyzedImage], name: &str) -> Result<Vec<(usize, FuncId)>, String> {
    let mut found = Vec::new();
    for (i, img) in images.iter().enumerate() {
        found.extend(img.analysis.cfg.functions_named(name).map(|f| (i, f)));
    }
    if !found.is_empty() {
        return Ok(found);
    }
    let close = close_names(name, images.iter().map(|i| &i.analysis));
    if close.is_empty() {
        Err(format!("no function named '{name}'"))
    } else {
        Err(format!("no function named '{name}'; close: {}", close.join(", ")))
    }
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
) -> Result<Vec<Planned>, String> {
    let parsed: Vec<Spec> =
        specs.iter().map(|t| parse(t).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    // An image analysed alone answers only to its own name.
    let aliases = vec![Vec::new(); images.len()];
    let points = crate::live::resolve(images, &aliases, &parsed)?;
    let probes: Vec<Probe> =
        points.into_iter().map(|point| Probe { point, action: Action::Count }).collect();
    let sites = plan_sites(images, &probes, None, &[], rules, None).map_err(|e| e.to_string())?;
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
