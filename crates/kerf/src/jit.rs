//! `kerf jit`: run the code reached from root functions of a live process or a command from
//! kerf's code cache, with plugins woven into every block (the tool is `kerf_tools::jit`);
//! prints a summary (or JSON) of the region, the escapes and, with `--plugin blocks`, the
//! blocks that ran most; with `--plugin branches`, the branches laid out against their bias;
//! with `--plugin calls`, the functions called most (and every call and return in a raw trace
//! with `--trace FILE`).

use crate::live::{seconds, Stderr};
use kerf_session::jit::JitOptions;
use kerf_session::live::{catch_signals, Sampling};
use kerf_tools::jit::{JitTool, PluginKind};
use std::path::PathBuf;

#[derive(clap::Args)]
pub struct Args {
    /// Root functions ([MODULE:]SYMBOL): a thread that enters one runs from the code cache
    /// until it leaves the region (its callees, through any library, are translated too). A
    /// MODULE not loaded yet is waited for: its roots go in when the program loads it.
    #[arg(required = true)]
    roots: Vec<String>,
    /// Plugins to weave into every block, comma-separated: blocks (execution counts of every
    /// block), branches (taken and not-taken counts of every conditional branch, and those
    /// whose bias contradicts the compiler's layout), calls (every call and return, as trace
    /// events: counted per function, and with --trace written to a file), locks (time
    /// threads spend acquiring pthread mutexes and rwlocks, per lock and call site), none
    /// (the code cache alone).
    #[arg(long, default_value = "blocks", value_delimiter = ',')]
    plugin: Vec<String>,
    /// With --plugin calls: write every call and return to FILE, a raw kerf trace (`kerf
    /// trace convert FILE -o out.perfetto-trace` shows calls as slices per thread).
    #[arg(long, value_name = "FILE")]
    trace: Option<String>,
    /// A C file of callbacks, compiled now with the system's cc and called from the
    /// translated code: `void kerf_block(unsigned long *state, unsigned long addr)` before
    /// every block, `void kerf_exit(unsigned long *state, unsigned long addr)` before every
    /// `ret` and tail call. `state`: 4096 words shared with kerf, printed at the end where
    /// not zero. No libraries, no globals, no vector registers (see README).
    #[arg(long, value_name = "FILE.c")]
    callback: Option<PathBuf>,
    /// With --plugin calls or locks: slots of each thread's ring in each module (a power of
    /// two from 16 to 4194304, 1048576 with --trace, 524288 for locks; 8 bytes a slot, 32
    /// with --trace, 64 for locks; default 131072). A thread whose ring is full waits for kerf to drain it; a second after kerf was
    /// killed or stopped (or once one drain has taken 10 s) it drops records, counted and
    /// reported.
    #[arg(long, value_name = "N")]
    ring_slots: Option<u32>,
    /// Translate every function of every module before the roots are entered, not only what
    /// they reach by direct calls and through the memory slots read now (PLT entries), the
    /// rest on demand: slower to attach (a second or more for a big program), no thread ever
    /// waits for a translation.
    #[arg(long)]
    whole: bool,
    /// Do not translate on demand: a miss (an indirect transfer to code with no translation)
    /// leaves for the original code at once, instead of waiting while kerf translates its
    /// target.
    #[arg(long)]
    no_demand: bool,
    /// Do not use what ran in earlier runs from the same roots (kept beside the analysis
    /// cache: those functions are translated ahead and nothing else, the rest on demand), nor
    /// keep what ran in this one: translate what the roots reach, as a first run does, and
    /// mark nothing (a run with hints stores a byte at each call of a function not yet known
    /// to have run).
    #[arg(long)]
    no_hints: bool,
    /// Where --plugin blocks puts its counters: `tree`, only where a block's count does not
    /// follow from the others' by flow conservation (counters off a spanning tree of each
    /// function's flow graph, on blocks and branch sides, weighted by the last run's counts),
    /// the other counts worked out at the end; or `every` block, which is slower and exact
    /// even where kerf cannot see a thread's flow stop (a thread killed while it computes, by
    /// another's `exit` or a fatal signal: a worked-out count there can be off by one).
    /// Functions whose blocks another function shares, or with an indirect jump of unknown
    /// targets under --no-demand, keep a counter in every block
    #[arg(long, default_value = "tree", value_parser = ["every", "tree"], value_name = "WHERE")]
    counters: String,
    /// At most this many functions from the walk over the call graph (at least 1: the roots).
    #[arg(long, default_value_t = 1_000_000, value_parser = budget)]
    budget: usize,
    /// At most this much translated code at once (bytes, or with a K, M or G suffix): only
    /// the roots are translated ahead, the rest on demand into the room left; when a miss
    /// finds none, kerf flushes the cache and starts again from the roots and, as far as the
    /// limit allows, the functions the threads stand in (a thread whose function does not
    /// fit finishes its root call in the original code). Default: no limit.
    #[arg(long, value_parser = cache_size, value_name = "SIZE")]
    cache_limit: Option<u64>,
    /// Under --cache-limit: when flushes took more than this share of the last two seconds,
    /// a miss runs its target natively (an escape, counted and reported: the thread leaves
    /// for the rest of its root call) instead of flushing again, so a limit far below the
    /// working set cannot stall the program; 1 never does.
    #[arg(long, default_value_t = 0.9, value_parser = share, value_name = "SHARE", requires = "cache_limit")]
    max_flush_share: f64,
    /// Process to instrument.
    #[arg(short, long, conflicts_with = "command")]
    pid: Option<i32>,
    /// Stop after this many seconds (default: until the target ends, or Ctrl-C). The summary
    /// says how the target ended; kerf exits with a launched command's exit code, or 128 + the
    /// signal that killed it (as a shell reports it); 1 if a signal killed a process given by -p.
    #[arg(long, value_parser = seconds, value_name = "SECONDS")]
    duration: Option<f64>,
    /// Blocks to list in the summary, most executed first.
    #[arg(long, default_value_t = 20)]
    top: usize,
    /// End with one JSON object (all counted blocks) instead of the table.
    #[arg(long)]
    json: bool,
    /// Write the summary to FILE (default: stdout; stderr when kerf launches a command).
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// Command to launch (held at its entry point until the JIT is in): `-- CMD ARGS`. Its
    /// environment gets LD_BIND_NOW=1, so that calls through the PLT find their targets
    /// translated from the first call. Until the JIT is in, the command dies with kerf
    /// (a kerf killed then takes it along, before it ran any of its code).
    #[arg(last = true)]
    command: Vec<String>,
}

pub fn run(args: Args) -> Result<(), crate::Error> {
    let plugins =
        args.plugin.iter().map(|p| PluginKind::parse(p)).collect::<Result<Vec<_>, _>>()?;
    if args.pid.is_none() && args.command.is_empty() {
        let why = "kerf jit needs a target: -p PID or -- COMMAND";
        return Err(kerf_tools::ToolError::Usage(why.into()).into());
    }
    let mut out: Box<dyn std::io::Write> = match &args.output {
        Some(p) => {
            let f = std::fs::File::create(p)
                .map_err(|source| crate::Error::Output { path: p.clone(), source })?;
            kerf_session::live::remove_if_ended_early(p);
            Box::new(f)
        }
        None if args.command.is_empty() => Box::new(std::io::stdout()),
        None => Box::new(std::io::stderr()),
    };
    if !args.command.is_empty() {
        // Inherited by the command kerf launches (and only by it).
        std::env::set_var("LD_BIND_NOW", "1");
        crate::note_script(&args.command);
    }
    catch_signals();
    let tool = JitTool {
        roots: args.roots.clone(),
        plugins,
        options: JitOptions {
            budget: args.budget,
            whole_modules: args.whole,
            on_demand: !args.no_demand,
            rings: None,
            cache_limit: args.cache_limit,
            flush_share: args.max_flush_share,
            // Set by the run when it attaches to a running process.
            early: false,
            late_roots: false,
            hints: !args.no_hints,
            fewer_counters: args.counters == "tree",
        },
        trace: args.trace.clone(),
        ring_slots: args.ring_slots,
        callback: args.callback.clone(),
        // (The table shows the most executed; JSON has every block.)
        rows: (!args.json).then_some(args.top),
    };

    let sampling = Sampling { interval: 0.1, duration: args.duration, at_once: false };
    let run = kerf_tools::jit::run(&tool, args.pid, &args.command, sampling, &mut Stderr);
    let mut v = match run {
        // (kerf exits once the summary is out: the translations and analyses go with the
        // process rather than being freed one by one first.)
        Ok((v, leftovers)) => {
            std::mem::forget(leftovers);
            v
        }
        Err(e) => {
            // (A Ctrl-C before the JIT went in, say: as the other tools do.)
            drop(out);
            if let Some(p) = &args.output {
                crate::live::remove_if_empty(p);
            }
            return Err(e.into());
        }
    };
    let text = match args.json {
        true => kerf_tools::jit::json_text(&mut v) + "\n",
        false => table(&v, args.top),
    };
    let _ = out.write_all(text.as_bytes());
    let launched = !args.command.is_empty();
    let ended = match kerf_tools::jit::killed(&v) {
        Some(e) => Err(crate::Error::ended(launched, e)),
        None => crate::Error::command_exit(launched, &v),
    };
    // Not dropped: kerf exits next, and freeing a summary of every block (50 k maps on
    // python3.11) took 15 ms of its end.
    std::mem::forget(v);
    ended
}

/// Where the raw call trace went, and how big it is: a second of an interpreter makes
/// gigabytes (a user trial: a 1 s lua run wrote 2.2 GB, 24 GB once converted to JSON Lines,
/// 5.4 GB to Perfetto's format, and nothing said so).
fn trace_file(path: &str) -> String {
    let Ok(bytes) = std::fs::metadata(path).map(|m| m.len()) else {
        return format!("; trace in {path}");
    };
    let (size, more) = match bytes as f64 / (1024.0 * 1024.0) {
        m if m >= 1024.0 => (
            format!("{:.1} GiB", m / 1024.0),
            ": converted, about ten times that as JSON Lines, twice or three times for Perfetto",
        ),
        m => (format!("{m:.1} MiB"), ""),
    };
    format!("; trace in {path} ({size}{more})")
}

/// `--budget`: a number of functions, at least 1 (the roots are the walk's first functions:
/// with none of them translated no thread could enter the cache).
fn budget(s: &str) -> Result<usize, String> {
    match s.trim().parse::<usize>() {
        Ok(0) => Err("at least 1: the roots are translated first".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s}: not a number of functions")),
    }
}

/// `--max-flush-share`: a share of time, above 0 and at most 1 (1: flush whenever needed).
fn share(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!("{s}: a share above 0 and at most 1 (such as 0.9)")),
    }
}

/// The least `--cache-limit`: one page (no translation of a root fits in less).
const LEAST_CACHE: u64 = 4096;

/// `--cache-limit`: a [`size`] of at least [`LEAST_CACHE`].
fn cache_size(s: &str) -> Result<u64, String> {
    size(s).and_then(|n| match n >= LEAST_CACHE {
        true => Ok(n),
        false => Err(format!("{s}: at least 4K (one page)")),
    })
}

/// A size in bytes: a number, optionally followed by K, M or G (powers of 1024).
fn size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, unit) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => t.split_at(i),
        None => (t, ""),
    };
    let shift = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        _ => return Err(format!("{s}: a size is a number with an optional K, M or G")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s}: a size is a number with an optional K, M or G"))?;
    n.checked_shl(shift)
        .filter(|v| v >> shift == n && *v > 0)
        .ok_or_else(|| format!("{s}: out of range"))
}

/// The summary as text: the region, the escapes, the busiest blocks.
fn table(v: &serde_json::Value, top: usize) -> String {
    use std::fmt::Write;
    let j = &v["jit"];
    let mut s = String::new();
    // After flushes the same code was translated again and again: what was made in all,
    // not what the cache held (its line below says that).
    let what = match j["cache"]["flushes"].as_u64() {
        Some(n) if n > 0 => format!("translated in all, over {n} flushes"),
        _ => "of code cache".to_string(),
    };
    // (A `ret` to a caller with no translation leaves too: how a root call made from a
    // function outside the region ends, or a thread's early way out when a set of the
    // table was full.)
    let rets = match j["returns_out"].as_u64() {
        Some(n) if n > 0 => format!("; returns out of the region: {n}"),
        _ => String::new(),
    };
    // (Misses that left without asking kerf: it was not listening.)
    let unasked = match j["escapes_unasked"].as_u64() {
        Some(n) if n > 0 => format!(" ({n} without asking kerf)"),
        _ => String::new(),
    };
    let _ = writeln!(
        s,
        "region: {} functions, {} blocks, {} bytes {what}; escapes: {}{unasked}{rets}; {}",
        j["functions"],
        j["blocks"],
        j["code_bytes"],
        j["escapes"],
        v["ended"].as_str().unwrap_or("")
    );
    let r = &j["removed"];
    if let Some(h) = r.get("held_by") {
        let _ = writeln!(
            s,
            "code cache left mapped in the process ({} mappings, {} KiB reserved): thread {}'s \
             stack holds a signal frame whose saved PC, at {}, is cache address {}{}: a handler \
             may still return there (one that returned long ago leaves the same frame \
             behind); nothing else leads into it",
            r["kept"],
            r["kept_bytes"].as_u64().unwrap_or(0) / 1024,
            h["tid"],
            h["stack_address"].as_str().unwrap_or("?"),
            h["cache_address"].as_str().unwrap_or("?"),
            h["stands_for"]
                .as_str()
                .map(|o| format!(" ({o} or the glue after it)"))
                .unwrap_or_default()
        );
    }
    if let Some(copies) = r["copies"].as_array().filter(|c| !c.is_empty()) {
        let pids: Vec<String> = copies.iter().map(|c| c.to_string()).collect();
        let kept = r["copies_kept"].as_u64().unwrap_or(0);
        let _ = writeln!(
            s,
            "processes forked from the target ran from the code cache too: taken out of it as \
             well ({}){}",
            pids.join(", "),
            if kept > 0 {
                format!("; {kept} keep its mappings (a stack may return there)")
            } else {
                String::new()
            }
        );
    }
    let c = &j["cache"];
    if let Some(limit) = c["limit"].as_u64() {
        let _ = writeln!(
            s,
            "code cache: {} KiB at the end, {} KiB at most, limit {} KiB; {} flushes in {:.2} s \
             ({} threads put back into the new translations, {} finished their root call \
             natively){}",
            c["bytes"].as_u64().unwrap_or(0) / 1024,
            c["peak"].as_u64().unwrap_or(0) / 1024,
            limit / 1024,
            c["flushes"],
            c["flush_seconds"].as_f64().unwrap_or(0.0),
            c["threads_replaced"],
            c["threads_moved"],
            match c["refused"].as_array() {
                Some(r) if !r.is_empty() => format!(
                    "; {} flushes refused ({})",
                    c["refusals"],
                    r.iter().filter_map(|w| w.as_str()).collect::<Vec<_>>().join("; ")
                ),
                _ => String::new(),
            }
        );
    }
    for m in j["modules"].as_array().into_iter().flatten() {
        let _ = writeln!(
            s,
            "  {:<40} {:>7} functions {:>8} blocks {:>6} escapes",
            m["module"].as_str().unwrap_or(""),
            m["functions"],
            m["blocks"],
            m["escapes"]
        );
    }
    // Escapes of no module's cache: a thread a signal handler sent out (elsewhere, away by a
    // jump kerf does not follow, or a frame a flush left with its original address), or one a
    // flush brought out and found no new translation for. The rows above did not add up to
    // the region's line without this one (a user trial).
    let in_modules: u64 =
        (j["modules"].as_array().into_iter().flatten()).filter_map(|m| m["escapes"].as_u64()).sum();
    if let Some(n) = j["escapes"].as_u64().map(|e| e.saturating_sub(in_modules)).filter(|&n| n > 0)
    {
        let _ = writeln!(s, "  {:<40} {:>40} escapes", "(no module: handlers, flushes)", n);
    }
    let late = &j["on_demand"];
    let untraced = late["late_untraced"].as_array().cloned().unwrap_or_default();
    for m in late["late_modules"].as_array().into_iter().flatten() {
        let quiet = if untraced.contains(m) {
            " (its own functions' calls are not in the trace; those it makes are)"
        } else {
            ""
        };
        let m = m.as_str().unwrap_or("");
        let _ =
            writeln!(s, "  {m}: mapped after attach (dlopen), analysed and translated then{quiet}");
    }
    for r in j["late_roots"]["spliced"].as_array().into_iter().flatten() {
        let r = r.as_str().unwrap_or("");
        let _ = writeln!(s, "  root {r}: spliced when the program loaded its library");
    }
    if let Some(t) = late["deaf_since"].as_f64() {
        let _ = writeln!(
            s,
            "  {t:.2} s after going live a thread ran under a seccomp filter kerf had not asked: \
             misses left for the original code from then on (kerf makes no futex call a filter \
             might punish)"
        );
    }
    for m in late["late_refused"].as_array().into_iter().flatten() {
        let m = m.as_str().unwrap_or("");
        let _ = writeln!(
            s,
            "  mapped after attach and not translated (a thread that calls into it escapes and \
             runs natively, uncounted, until its root call returns): {m}"
        );
    }
    for m in late["analysis_rejected"].as_array().into_iter().flatten() {
        let m = m.as_str().unwrap_or("");
        let _ = writeln!(
            s,
            "  cached analysis rejected, not translated (a thread that calls into it escapes \
             and runs natively, uncounted, until its root call returns): {m}"
        );
    }
    if let Some(blocks) = v["blocks"].as_array() {
        let mut b: Vec<&serde_json::Value> = blocks.iter().collect();
        // (The key read once a row: 50 k rows, a map lookup each comparison took 25 ms.)
        b.sort_by_cached_key(|x| std::cmp::Reverse(x["count"].as_u64().unwrap_or(0)));
        let _ = writeln!(s, "{:>14}  block", "count");
        for x in b.iter().take(top) {
            let name = module_name(x);
            let _ = writeln!(
                s,
                "{:>14}  {}:{} {}",
                x["count"].as_u64().unwrap_or(0),
                name,
                x["function"].as_str().unwrap_or(""),
                x["addr"].as_str().unwrap_or("")
            );
        }
    }
    if let Some(branches) = v["branches"].as_array() {
        let mut b: Vec<&serde_json::Value> =
            branches.iter().filter(|x| x["against_layout"] == true).collect();
        b.sort_by_cached_key(|x| std::cmp::Reverse(x["against"].as_u64().unwrap_or(0)));
        let _ = writeln!(
            s,
            "{} conditional branches ran; {} against the compiler's layout (a forward branch \
             taken more often than not, a backward one left more often than taken):",
            branches.len(),
            b.len()
        );
        let _ = writeln!(s, "{:>14} {:>14}  branch", "taken", "not taken");
        for x in b.iter().take(top) {
            let name = module_name(x);
            let _ = writeln!(
                s,
                "{:>14} {:>14}  {}:{} {} -> {}",
                x["taken"].as_u64().unwrap_or(0),
                x["not_taken"].as_u64().unwrap_or(0),
                name,
                x["point"].as_str().unwrap_or(""),
                x["addr"].as_str().unwrap_or(""),
                x["target"].as_str().unwrap_or("")
            );
        }
    }
    if let Some(w) = v["callback"]["words"].as_object() {
        let _ =
            writeln!(s, "callback state (words not zero): {}", serde_json::Value::from(w.clone()));
    }
    let c = &v["calls"];
    if c["locks"].is_object() {
        let _ = writeln!(s, "lock calls: {} lost records", c["lost"]);
        s.push_str(&lost_why(c));
        let l = &c["locks"];
        if let Some(n) = l["under_way_at_attach"].as_u64().filter(|&n| n > 0) {
            let _ = writeln!(
                s,
                "  {n} lock call{} under way when kerf attached, not in the table (their lock and \
                 start are unknown); the longest ended {:.3} ms after kerf took its thread in",
                if n == 1 { " was" } else { "s were" },
                l["under_way_longest_after_attach_ns"].as_u64().unwrap_or(0) as f64 / 1e6
            );
        }
        s.push_str(&kerf_tools::locks::table(&c["locks"], top));
    } else if c.is_object() {
        let _ = writeln!(
            s,
            "calls: {} calls, {} returns ({} paired, {} frames left without their return: longjmp, \
             exceptions, or a jump out of the frame not taken for a tail call, as the lazy \
             binder's; {} \
             replaced by tail calls, {} returns with no call{}) in {} threads; lost: {}{}",
            c["calls"],
            c["returns"],
            c["matched"].as_u64().unwrap_or(0) + c["returns_from_fragments"].as_u64().unwrap_or(0),
            c["unwound"],
            c["replaced"],
            c["unmatched"],
            match c["before_attach"].as_u64().unwrap_or(0) {
                0 => String::new(),
                n => format!(", {n} returns of calls made before kerf attached"),
            },
            c["threads"],
            c["lost"],
            c["file"].as_str().map_or(String::new(), trace_file)
        );
        s.push_str(&lost_why(c));
        if let Some(e) = c["error"].as_str() {
            let _ = writeln!(s, "  the trace file is incomplete: {e}");
        }
        let _ = writeln!(s, "{:>14} {:>14}  function", "calls", "returns");
        for x in c["functions"].as_array().into_iter().flatten().take(top) {
            let name = module_name(x);
            let _ = writeln!(
                s,
                "{:>14} {:>14}  {}:{}",
                x["calls"].as_u64().unwrap_or(0),
                x["returns"].as_u64().unwrap_or(0),
                name,
                x["function"].as_str().unwrap_or("")
            );
        }
    }
    s
}

/// The file name of a summary row's module.
fn module_name(x: &serde_json::Value) -> &str {
    let module = x["module"].as_str().unwrap_or("");
    module.rsplit('/').next().unwrap_or(module)
}

/// Why the call trace lost records, a line per cause (nothing when none was lost): rings that
/// stayed full while kerf did not drain, and threads that found no slot in a module's thread table
/// (more threads alive at once than it has slots).
fn lost_why(c: &serde_json::Value) -> String {
    let (full, no_slot) = (c["lost_ring_full"].as_u64(), c["lost_no_slot"].as_u64());
    let mut s = String::new();
    if let Some(n) = full.filter(|&n| n > 0) {
        s += &match c["wait_seconds"].as_f64().unwrap_or(0.0) {
            0.0 => format!(
                "  {n} records lost in full rings: threads may not wait for kerf here (a \
                 seccomp filter forbids the wait's calls), and a full ring drops at once\n"
            ),
            wait => format!(
                "  {n} records lost in full rings: a thread waits for kerf to make room, and \
                 drops {} after kerf was killed or stopped, or once one drain has taken 10 s \
                 (the longest took {:.2} s)\n",
                kerf_tools::time::fmt_ns(wait * 1e9),
                c["longest_drain"].as_f64().unwrap_or(0.0)
            ),
        };
    }
    if let Some(t) = c["waits_stopped"].as_f64() {
        s += &format!(
            "  from {t:.2} s on, full rings dropped at once: a thread ran under a seccomp \
             filter kerf had not asked, which might punish the wait's sched_yield or nanosleep\n"
        );
    }
    if let Some(n) = no_slot.filter(|&n| n > 0) {
        s += &format!(
            "  {n} records lost by threads that found no slot in the thread table (more than \
             {} threads alive at once)\n",
            c["thread_slots"]
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::table;
    use serde_json::json;

    #[test]
    fn a_trace_files_size_is_said_and_a_big_ones_conversion_warned_of() {
        let dir = std::env::temp_dir().join(format!("kerf-trace-size-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("t.raw");
        let file = std::fs::File::create(&f).unwrap();
        let path = f.to_str().unwrap();
        // (Sparse: the length is what is said.)
        file.set_len(3 << 19).unwrap();
        assert_eq!(super::trace_file(path), format!("; trace in {path} (1.5 MiB)"));
        file.set_len(5 << 29).unwrap();
        let said = super::trace_file(path);
        assert!(said.starts_with(&format!("; trace in {path} (2.5 GiB: converted")), "{said}");
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(super::trace_file(path), format!("; trace in {path}"));
    }

    /// After flushes the region line says its sizes add up every translation, not what the
    /// cache holds (a user read 509,669,672 bytes under a 256 KiB limit as the cache's size).
    #[test]
    fn the_region_line_says_what_its_sizes_count() {
        let v = |flushes: u64| {
            json!({"ended": "process 1 exited with code 0", "jit": {
                "functions": 59, "blocks": 5445578, "code_bytes": 509669672, "escapes": 0,
                "cache": {"flushes": flushes}, "removed": {}, "on_demand": {}}})
        };
        let first = |t: String| t.lines().next().unwrap_or_default().to_string();
        assert_eq!(
            first(table(&v(2294), 0)),
            "region: 59 functions, 5445578 blocks, 509669672 bytes translated in all, over \
             2294 flushes; escapes: 0; process 1 exited with code 0"
        );
        assert!(first(table(&v(0), 0)).contains("509669672 bytes of code cache;"));
    }
}
