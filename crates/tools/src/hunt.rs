//! `hunt`: automatic bottleneck search, the drill-down a person did by hand in the KernInst
//! case study (from `copen` down to `ufs_itrunc`, curve by curve), done by kerf in rounds.
//!
//! Each round times the functions of the frontier and every call they make, per callee
//! (`time` with callees), for a fixed time, then takes those probes out. The first frontier
//! is the roots. A callee whose calls from a function hold at least `threshold` of that
//! function's time joins the next frontier (once: a function already timed, or one of the
//! node's own ancestors, is not timed again); the search ends when the frontier is empty, at
//! the depth limit, or at the round limit. Only the frontier's probes are in at any time.
//!
//! The tree: a node is a function on one path from a root. A root's time is what its timer
//! measured; a child's is the call-site timer of its parent's round; a grandchild's comes
//! from the child's own round, where the child's time splits among its callees: the child's
//! node time times the callee's share of the child's measured time (the child's calls from
//! other places count in the shares, as gprof attributes). CPU time splits by its own shares,
//! calls by calls per call of the parent. Times are per second of the round
//! that measured them (ns/s: threads inside on average, times 1e9), so rounds of different
//! lengths and loads compare. A node's self time is its time minus its callees' (every call it
//! makes was timed, followed or not).
//!
//! Where the search stops inside a function (`blocks`): a followed function whose self time
//! holds at least `threshold` of its time spends it in its own code, not in a call, so one more
//! round counts its basic blocks, and the node keeps the most run ones (runs per second and
//! per call of the function): the loop the time goes round.

use crate::error::ToolError;
use crate::live::{run, Events, LiveOptions};
use crate::time::Time;
use kerf_session::live::{Sampling, Target};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt::Write;
use std::time::Instant;

/// How the hunt goes.
#[derive(Clone, Debug)]
pub struct HuntOptions {
    /// The share of its parent's time a callee needs to be followed.
    pub threshold: f64,
    /// Seconds each round samples.
    pub round: f64,
    /// Levels below the roots at most.
    pub depth: usize,
    /// Rounds at most.
    pub rounds: usize,
    /// Keep virtual time beside wall time.
    pub virtual_time: bool,
    /// Count the blocks of the functions the time stays in (one more round).
    pub blocks: bool,
}

/// Blocks a node keeps, the most run first.
pub const NODE_BLOCKS: usize = 5;

/// One counted basic block of a node's function.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BlockRate {
    /// Its offset in the function (`+0x1c`) and its address.
    pub offset: String,
    pub address: String,
    /// Runs per second of its round, and per call of the function.
    pub per_s: f64,
    pub per_call: f64,
}

/// One node of the tree: a function on one call path.
#[derive(Clone, Debug, Default)]
pub struct Node {
    pub name: String,
    /// Wall time inside, per second of its round (ns/s), and virtual time where kept.
    pub ns: f64,
    pub virtual_ns: Option<f64>,
    /// Calls per second on this path.
    pub calls: f64,
    /// Followed: its own callees were timed.
    pub followed: bool,
    /// Its time came from a call-site timer whose stop is a trap (the trap's delivery, some
    /// microseconds, is in every interval: the time is too large) and was not replaced by the
    /// callee's own timer's time per call (it was not followed).
    pub trap_inflated: bool,
    /// Its function is its parent's direct tail call (`jmp f`, the parent's last act, whose
    /// time the parent's timer holds): before it is followed its time is all of the parent's
    /// self time, an upper bound; once followed, at most its own time per call for each of
    /// the parent's calls.
    pub tail_call: bool,
    pub children: Vec<Node>,
    /// Its function's most run blocks, where the hunt counted them.
    pub blocks: Vec<BlockRate>,
}

impl Node {
    /// Time not in any timed callee.
    pub fn self_ns(&self) -> f64 {
        (self.ns - self.children.iter().map(|c| c.ns).sum::<f64>()).max(0.0)
    }
}

/// What a hunt found: the tree under each root, and how it went.
#[derive(Clone, Debug, Default)]
pub struct Hunt {
    pub roots: Vec<Node>,
    pub rounds: usize,
    /// Probes in at once at most (in the largest round), and seconds to the answer.
    pub peak_probes: usize,
    pub seconds: f64,
    /// How the last round ended (the target's end stops the hunt early).
    pub stopped: Option<String>,
    /// Blocks the blocks round counted (its probes beside the functions' timers).
    pub blocks_counted: usize,
}

/// A function's callee as the call-site timers name it: `f@plt` is `f` (its body is in
/// another module); an indirect call has no name to follow, nor has one through a retpoline
/// thunk (`call __x86_indirect_thunk_rax`, which kallsyms may name `__indirect_thunk_start`).
fn follow_name(callee: &str) -> Option<&str> {
    if callee.starts_with('(')
        || callee.contains("indirect_thunk")
        || callee.contains("return_thunk")
    {
        return None;
    }
    Some(callee.strip_suffix("@plt").unwrap_or(callee))
}

/// One round's measurements: per timed function, its totals; per caller, its callees'.
#[derive(Default)]
struct Round {
    functions: HashMap<String, Measured>,
    callees: HashMap<String, Vec<(String, Measured)>>,
    /// Per timed function, the functions it tail-calls directly (their time is its own).
    tails: HashMap<String, Vec<String>>,
}

/// Per function timed: its totals, its callees' from the same round, and its tail callees.
type Known = HashMap<String, (Measured, Vec<(String, Measured)>, Vec<String>)>;

#[derive(Clone, Copy, Default)]
struct Measured {
    ns: f64,
    virtual_ns: Option<f64>,
    calls: f64,
    /// Its timer's exit (a call site's return address) is a trap splice.
    trap_exit: bool,
}

/// A round's summary read into per-second measurements.
fn read_round(v: &Value) -> Round {
    let secs = v["timed_seconds"].as_f64().unwrap_or(1.0).max(1e-9);
    let mut r = Round::default();
    for f in v["functions"].as_array().into_iter().flatten() {
        let m = Measured {
            ns: f["total_ns"].as_f64().unwrap_or(0.0) / secs,
            virtual_ns: f["virtual_ns"].as_f64().map(|x| x / secs),
            calls: f["calls"].as_f64().unwrap_or(0.0) / secs,
            trap_exit: f["trap_exit"].as_bool().unwrap_or(false),
        };
        match (f["caller"].as_str(), f["callee"].as_str()) {
            (Some(caller), Some(callee)) => {
                r.callees.entry(caller.to_string()).or_default().push((callee.to_string(), m))
            }
            _ => {
                let name = f["function"].as_str().unwrap_or("").to_string();
                let tails = f["tail_callees"].as_array().into_iter().flatten();
                let mut tails: Vec<String> =
                    tails.filter_map(|t| Some(t.as_str()?.to_string())).collect();
                tails.sort();
                tails.dedup();
                r.tails.insert(name.clone(), tails);
                r.functions.insert(name, m);
            }
        }
    }
    r
}

/// The children of a node whose time on its path is `node`, from the round that timed its
/// function (`measured` its own totals there, `callees` its calls'), biggest first.
fn children(callees: &[(String, Measured)], node: &Measured, measured: &Measured) -> Vec<Node> {
    // Each quantity splits by its own shares: a callee's time by its share of the function's
    // time, its CPU time by its share of the function's CPU time, its calls per call of the
    // function.
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
    let mut kids: Vec<Node> = callees
        .iter()
        .map(|(callee, m)| Node {
            name: callee.clone(),
            ns: node.ns * ratio(m.ns, measured.ns),
            virtual_ns: match (node.virtual_ns, m.virtual_ns, measured.virtual_ns) {
                (Some(n), Some(v), Some(all)) => Some(n * ratio(v, all)),
                _ => None,
            },
            calls: node.calls * ratio(m.calls, measured.calls),
            followed: false,
            trap_inflated: m.trap_exit,
            ..Node::default()
        })
        .collect();
    kids.sort_by(|a, b| b.ns.total_cmp(&a.ns));
    kids
}

/// Hunt from `roots` in `target` (see the module documentation). `live` gives the thread
/// filter and splice options; each round samples `opts.round` seconds.
pub fn hunt(
    target: &mut Target,
    roots: &[String],
    opts: &HuntOptions,
    live: &LiveOptions,
    events: &mut dyn Events,
) -> Result<Hunt, ToolError> {
    let t0 = Instant::now();
    let mut out = Hunt::default();
    // Per function timed: its totals and its callees', from the round that timed it.
    let mut known: Known = HashMap::new();
    // Nodes waiting for their callees: the function, and the path to the node (the root's
    // index, then each child's).
    let mut frontier: Vec<(String, Vec<usize>)> = Vec::new();
    let mut specs: Vec<String> = roots.to_vec();
    let mut depth = 0;
    // The target ended during a round: no further round can run.
    let mut ended = false;
    loop {
        if !specs.is_empty() {
            if out.rounds >= opts.rounds {
                break;
            }
            let first = out.rounds == 0;
            let (round, v) = match time_round(target, &specs, opts, live, events, out.rounds + 1) {
                Ok(r) => r,
                Err(e) if first => return Err(e),
                // A function kerf cannot probe (every point refused) ends its path; the others
                // of the round are timed without it.
                Err(e) if specs.len() > 1 => {
                    events.warn(&format!(
                        "round {}: {e}; timing its functions one by one",
                        out.rounds + 1
                    ));
                    let mut ok = Vec::new();
                    for s in &specs {
                        if time_round(
                            target,
                            std::slice::from_ref(s),
                            opts,
                            live,
                            &mut Quiet(events),
                            out.rounds + 1,
                        )
                        .is_ok()
                        {
                            ok.push(s.clone());
                        } else {
                            events.warn(&format!("{s}: cannot be timed here; it stays a leaf"));
                        }
                    }
                    specs = ok;
                    continue;
                }
                Err(e) => {
                    events.warn(&format!("{}: {e}; it stays a leaf", specs[0]));
                    specs.clear();
                    continue;
                }
            };
            out.rounds += 1;
            out.peak_probes = out.peak_probes.max(v["peak_probes"].as_u64().unwrap_or(0) as usize);
            out.stopped = v["stopped"].as_str().map(String::from);
            for (name, m) in &round.functions {
                let callees = round.callees.get(name).cloned().unwrap_or_default();
                let tails = round.tails.get(name).cloned().unwrap_or_default();
                known.insert(name.clone(), (*m, callees, tails));
            }
            if out.rounds == 1 {
                let mut names: Vec<&String> = round.functions.keys().collect();
                names.sort();
                for name in names {
                    let m = round.functions[name];
                    frontier.push((name.clone(), vec![out.roots.len()]));
                    out.roots.push(Node {
                        name: name.clone(),
                        ns: m.ns,
                        virtual_ns: m.virtual_ns,
                        calls: m.calls,
                        ..Node::default()
                    });
                }
            }
            // The target ended: what was measured is the answer.
            if v["target"].is_object() {
                place(&mut out.roots, &frontier, &known);
                ended = true;
                break;
            }
        }
        place(&mut out.roots, &frontier, &known);
        depth += 1;
        if depth > opts.depth {
            break;
        }
        // The next frontier: callees above the threshold of their parent, not its ancestors.
        let mut next: Vec<(String, Vec<usize>)> = Vec::new();
        for (_, path) in &frontier {
            let ancestors = names_on(&out.roots, path);
            let node = node_at(&mut out.roots, path);
            for (k, c) in node.children.iter().enumerate() {
                let Some(name) = follow_name(&c.name) else { continue };
                // A trap-inflated time is at most too large: a callee below the threshold with
                // it is below without it; one above is timed, and its own time replaces it.
                let big = node.ns > 0.0 && c.ns >= opts.threshold * node.ns;
                if big && !ancestors.iter().any(|a| a == name) {
                    let mut p = path.clone();
                    p.push(k);
                    next.push((name.to_string(), p));
                }
            }
        }
        if next.is_empty() {
            break;
        }
        // A function met on several paths, or timed in an earlier round, is timed once: every
        // node of it takes that round's shares. One kerf cannot resolve is left a leaf.
        specs = next.iter().map(|(n, _)| n.clone()).filter(|n| !known.contains_key(n)).collect();
        specs.sort();
        specs.dedup();
        specs.retain(|s| resolvable(target, s));
        frontier = next;
    }
    // The tree is the answer; blocks that cannot be counted leave it as it is.
    if opts.blocks && out.rounds < opts.rounds && !ended {
        if let Err(e) = count_blocks(target, &mut out, opts, live, events) {
            events.warn(&format!("the blocks round failed: {e}; the tree has no blocks"));
        }
    }
    out.seconds = t0.elapsed().as_secs_f64();
    Ok(out)
}

/// A round's sampling: one sample at the end of `opts.round` seconds, no live table.
fn round_options(opts: &HuntOptions, live: &LiveOptions) -> LiveOptions {
    LiveOptions {
        sampling: Sampling { interval: opts.round, duration: Some(opts.round), at_once: false },
        live_table: false,
        ..*live
    }
}

/// The functions whose time stays in their own code: followed, with self time at least
/// `threshold` of their time.
fn self_bound(roots: &[Node], threshold: f64) -> Vec<String> {
    fn walk(n: &Node, threshold: f64, out: &mut Vec<String>) {
        if n.followed && n.ns > 0.0 && n.self_ns() >= threshold * n.ns {
            out.push(n.name.clone());
        }
        n.children.iter().for_each(|c| walk(c, threshold, out));
    }
    let mut out = Vec::new();
    roots.iter().for_each(|r| walk(r, threshold, &mut out));
    out.sort();
    out.dedup();
    out
}

/// The blocks round: count the blocks of [`self_bound`]'s functions (timing them too, for
/// their calls), and give every node of theirs its most run blocks.
fn count_blocks(
    target: &mut Target,
    out: &mut Hunt,
    opts: &HuntOptions,
    live: &LiveOptions,
    events: &mut dyn Events,
) -> Result<(), ToolError> {
    let names = self_bound(&out.roots, opts.threshold);
    if names.is_empty() {
        return Ok(());
    }
    events.say(&format!(
        "round {}: counting the blocks of {} for {} s",
        out.rounds + 1,
        names.join(", "),
        opts.round
    ));
    let round_opts = round_options(opts, live);
    let tool = Time::new(&names, false)?.with_blocks_of(names.clone());
    target.restart_clock();
    let report = run(&tool, target, &round_opts, &mut Quiet(events))?;
    if let Some(e) = report.error {
        return Err(e);
    }
    let v = report.json;
    out.rounds += 1;
    let blocks = v["blocks"].as_array().cloned().unwrap_or_default();
    out.peak_probes = out.peak_probes.max(probes_in(&v) + blocks.len());
    out.blocks_counted = blocks.len();
    let secs = v["timed_seconds"].as_f64().unwrap_or(opts.round).max(1e-9);
    let calls: HashMap<&str, f64> = v["functions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| Some((f["function"].as_str()?, f["calls"].as_f64()?)))
        .collect();
    let mut by_function: HashMap<String, Vec<BlockRate>> = HashMap::new();
    for b in &blocks {
        let Some((f, offset)) = b["name"].as_str().and_then(|n| n.split_once(" @ ")) else {
            continue;
        };
        let count = b["count"].as_f64().unwrap_or(0.0);
        let per_call = calls.get(f).filter(|&&c| c > 0.0).map_or(0.0, |c| count / c);
        by_function.entry(f.to_string()).or_default().push(BlockRate {
            offset: offset.to_string(),
            address: b["address"].as_str().unwrap_or("").to_string(),
            per_s: count / secs,
            per_call,
        });
    }
    for rates in by_function.values_mut() {
        rates.sort_by(|a, b| b.per_s.total_cmp(&a.per_s));
        rates.truncate(NODE_BLOCKS);
    }
    fn give(n: &mut Node, by_function: &HashMap<String, Vec<BlockRate>>) {
        if let Some(b) = by_function.get(&n.name) {
            n.blocks = b.clone();
        }
        n.children.iter_mut().for_each(|c| give(c, by_function));
    }
    out.roots.iter_mut().for_each(|r| give(r, &by_function));
    Ok(())
}

/// One round: time `specs` and their calls for the round's seconds; the round's measurements
/// and its summary.
fn time_round(
    target: &mut Target,
    specs: &[String],
    opts: &HuntOptions,
    live: &LiveOptions,
    events: &mut dyn Events,
    k: usize,
) -> Result<(Round, Value), ToolError> {
    events.say(&format!(
        "round {k}: timing {} function{} and their calls for {} s: {}",
        specs.len(),
        if specs.len() == 1 { "" } else { "s" },
        opts.round,
        specs.join(", ")
    ));
    let round_opts = round_options(opts, live);
    let mut time = |skip: Vec<String>, events: &mut dyn Events| -> Result<Value, ToolError> {
        let tool = Time::new(specs, true)?.with_virtual_time(opts.virtual_time).without_calls(skip);
        target.restart_clock();
        let report = run(&tool, target, &round_opts, &mut Quiet(events))?;
        if let Some(e) = report.error {
            return Err(e);
        }
        let mut v = report.json;
        v["stopped"] = json!(report.stopped);
        Ok(v)
    };
    let mut v = time(Vec::new(), events)?;
    v["peak_probes"] = json!(probes_in(&v));
    // Calls that return through a trap splice put the trap's delivery into their caller's
    // time too: the round is timed again without them, and they keep the first run's calls
    // (their time marked inflated, to be replaced by their own timer's in the next round).
    let trapped: Vec<&Value> = v["functions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|f| f["caller"].is_string() && f["trap_exit"] == true)
        .collect();
    if trapped.is_empty() || v["target"].is_object() {
        return Ok((read_round(&v), v));
    }
    let names: Vec<String> =
        trapped.iter().filter_map(|f| f["function"].as_str().map(String::from)).collect();
    events.say(&format!(
        "round {k}: {} call{} return through trap splices ({}): timing the round again without them",
        names.len(),
        if names.len() == 1 { "" } else { "s" },
        names.join(", ")
    ));
    let again = time(names, events)?;
    let mut functions: Vec<Value> = again["functions"].as_array().cloned().unwrap_or_default();
    functions.extend(trapped.into_iter().cloned());
    let mut merged = again.clone();
    merged["functions"] = Value::Array(functions);
    // Both runs' probes count for the peak.
    merged["peak_probes"] = json!(probes_in(&v).max(probes_in(&again)));
    Ok((read_round(&merged), merged))
}

/// The probes a round's summary had in: each timer's entry and exits.
fn probes_in(v: &Value) -> usize {
    let timers = v["functions"].as_array().into_iter().flatten();
    timers.map(|f| 1 + f["exits"].as_array().map_or(0, Vec::len)).sum()
}

/// Whether `spec` names a function of the target kerf can time.
fn resolvable(target: &Target, spec: &str) -> bool {
    let Ok(s) = kerf_session::spec::parse(spec) else { return false };
    match target {
        Target::Process(p) => crate::live::resolve(&p.modules, &p.aliases, &[s]).is_ok(),
        Target::Kernel(k) => crate::live::resolve(&k.kernel.images, &[], &[s]).is_ok(),
    }
}

/// Give every frontier node whose function has been timed its callees, by that round's shares.
fn place(roots: &mut [Node], frontier: &[(String, Vec<usize>)], known: &Known) {
    for (name, path) in frontier {
        let Some((m, callees, tails)) = known.get(name) else { continue };
        let node = node_at(roots, path);
        if node.followed {
            continue;
        }
        // A tail call's bound: its own time per call, for each of its parent's calls.
        if node.tail_call && m.calls > 0.0 {
            let own = node.calls * m.ns / m.calls;
            if own < node.ns {
                let scale = own / node.ns;
                node.ns = own;
                node.virtual_ns = node.virtual_ns.map(|v| v * scale);
            }
        }
        // A call-site time inflated by a trapped return: the callee's own time per call
        // instead (unless its own exits are traps too).
        if node.trap_inflated && !m.trap_exit && m.calls > 0.0 {
            node.ns = node.calls * m.ns / m.calls;
            node.virtual_ns = m.virtual_ns.map(|v| node.calls * v / m.calls);
            node.trap_inflated = false;
        }
        let here = Measured {
            ns: node.ns,
            virtual_ns: node.virtual_ns,
            calls: node.calls,
            trap_exit: false,
        };
        node.children = children(callees, &here, m);
        // One function it tail-calls: the time not in its calls may be there (a wrapper that
        // ends `jmp g` spends next to none itself), so it is a child to follow. With several,
        // nothing tells how that time splits.
        if let [tail] = tails.as_slice() {
            let kids_virtual: Option<f64> = node.children.iter().map(|c| c.virtual_ns).sum();
            let child = Node {
                name: tail.clone(),
                ns: node.self_ns(),
                virtual_ns: node.virtual_ns.zip(kids_virtual).map(|(v, k)| (v - k).max(0.0)),
                calls: node.calls,
                tail_call: true,
                ..Node::default()
            };
            if child.ns > 0.0 {
                node.children.push(child);
                node.children.sort_by(|a, b| b.ns.total_cmp(&a.ns));
            }
        }
        node.followed = true;
    }
}

/// The node a path leads to.
fn node_at<'a>(roots: &'a mut [Node], path: &[usize]) -> &'a mut Node {
    let mut n = &mut roots[path[0]];
    for &k in &path[1..] {
        n = &mut n.children[k];
    }
    n
}

/// The names of the nodes along a path, the root's first.
fn names_on(roots: &[Node], path: &[usize]) -> Vec<String> {
    let mut n = &roots[path[0]];
    let mut names = vec![n.name.clone()];
    for &k in &path[1..] {
        n = &n.children[k];
        names.push(follow_name(&n.name).unwrap_or(&n.name).to_string());
    }
    names
}

/// The events of a round, passed on except its per-round chatter (the "points spliced" and
/// "stopped" lines are the round's, said once per round by the hunt instead).
struct Quiet<'a>(&'a mut dyn Events);

impl Events for Quiet<'_> {
    fn say(&mut self, _line: &str) {}
    fn warn(&mut self, line: &str) {
        self.0.warn(line);
    }
    fn live(&mut self, _table: &str) {}
}

/// The tree as text: per node, its share of its root, time per second, self time, calls per
/// second and (with virtual time) CPU time per second; nodes below `min` of their root left
/// out.
pub fn tree_text(h: &Hunt, min: f64) -> String {
    let virtual_time = h.roots.iter().any(|r| r.virtual_ns.is_some());
    let mut t = format!("{:>7} {:>10} {:>10} {:>10}", "share", "time/s", "self/s", "calls/s");
    if virtual_time {
        let _ = write!(t, " {:>10}", "cpu/s");
    }
    t.push_str("  function\n");
    fn walk(t: &mut String, n: &Node, root: f64, depth: usize, min: f64, virtual_time: bool) {
        let share = if root > 0.0 { n.ns / root } else { 0.0 };
        let _ = write!(
            t,
            "{:>6.1}% {:>10} {:>10} {:>10.0}",
            100.0 * share,
            crate::time::fmt_ns(n.ns),
            crate::time::fmt_ns(n.self_ns()),
            n.calls
        );
        if virtual_time {
            let _ = write!(t, " {:>10}", n.virtual_ns.map_or("-".into(), crate::time::fmt_ns));
        }
        let mark = match (n.trap_inflated, n.followed || n.children.is_empty()) {
            (true, _) => " (includes trap delivery)",
            (false, true) => "",
            (false, false) => " (not followed)",
        };
        let mark = match (n.tail_call, n.followed) {
            (true, true) => format!(" (tail call){mark}"),
            (true, false) => format!(" (tail call: at most this; not followed){mark}"),
            (false, _) => mark.to_string(),
        };
        let _ = writeln!(t, "  {}{}{mark}", "  ".repeat(depth), n.name);
        if !n.blocks.is_empty() {
            // Under the function's name, one level in.
            let indent = " ".repeat(if virtual_time { 53 } else { 42 } + 2 * (depth + 1));
            let runs: Vec<String> = n
                .blocks
                .iter()
                .map(|b| {
                    format!("{} {}/s ({}/call)", b.offset, amount(b.per_s), amount(b.per_call))
                })
                .collect();
            let _ = writeln!(t, "{indent}blocks run most: {}", runs.join(", "));
        }
        for c in n.children.iter().filter(|c| root > 0.0 && c.ns >= min * root) {
            walk(t, c, root, depth + 1, min, virtual_time);
        }
    }
    for r in &h.roots {
        walk(&mut t, r, r.ns, 0, min, virtual_time);
    }
    t
}

/// A count shortened with k, M or G.
fn amount(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.1}G", x / 1e9),
        x if x >= 1e6 => format!("{:.1}M", x / 1e6),
        x if x >= 1e3 => format!("{:.1}k", x / 1e3),
        x if x >= 10.0 => format!("{x:.0}"),
        x => format!("{x:.1}"),
    }
}

/// The tree as collapsed stacks (`root;child;leaf SELF`, one line per node with self time, in
/// nanoseconds per second), the input of flame graph tools.
pub fn folded(h: &Hunt) -> String {
    let mut out = String::new();
    fn walk(out: &mut String, n: &Node, stack: &mut Vec<String>) {
        stack.push(n.name.replace(';', ":"));
        let s = n.self_ns().round() as u64;
        if s > 0 {
            let _ = writeln!(out, "{} {s}", stack.join(";"));
        }
        for c in &n.children {
            walk(out, c, stack);
        }
        stack.pop();
    }
    for r in &h.roots {
        walk(&mut out, r, &mut Vec::new());
    }
    out
}

/// The tree as a speedscope file (a sampled profile: each node's stack weighted by its self
/// time, in nanoseconds per second).
pub fn speedscope(h: &Hunt, name: &str) -> Value {
    let mut frames: Vec<String> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut samples: Vec<Vec<usize>> = Vec::new();
    let mut weights: Vec<u64> = Vec::new();
    fn walk(
        n: &Node,
        stack: &mut Vec<usize>,
        frames: &mut Vec<String>,
        index: &mut HashMap<String, usize>,
        samples: &mut Vec<Vec<usize>>,
        weights: &mut Vec<u64>,
    ) {
        let k = *index.entry(n.name.clone()).or_insert_with(|| {
            frames.push(n.name.clone());
            frames.len() - 1
        });
        stack.push(k);
        let s = n.self_ns().round() as u64;
        if s > 0 {
            samples.push(stack.clone());
            weights.push(s);
        }
        for c in &n.children {
            walk(c, stack, frames, index, samples, weights);
        }
        stack.pop();
    }
    for r in &h.roots {
        walk(r, &mut Vec::new(), &mut frames, &mut index, &mut samples, &mut weights);
    }
    let total: u64 = weights.iter().sum();
    json!({
        "$schema": "https://www.speedscope.app/file-format-schema.json",
        "exporter": "kerf hunt",
        "name": name,
        "shared": {"frames": frames.iter().map(|f| json!({"name": f})).collect::<Vec<_>>()},
        "profiles": [{
            "type": "sampled", "name": name, "unit": "nanoseconds",
            "startValue": 0, "endValue": total, "samples": samples, "weights": weights,
        }],
    })
}

/// The hunt as JSON: the tree (each node with `function`, `ns_per_s`, `self_ns_per_s`,
/// `calls_per_s`, `virtual_ns_per_s`, `followed`, `children`), rounds, peak probes, seconds.
pub fn json(h: &Hunt) -> Value {
    fn node(n: &Node) -> Value {
        json!({"function": n.name, "ns_per_s": n.ns, "self_ns_per_s": n.self_ns(),
               "calls_per_s": n.calls, "virtual_ns_per_s": n.virtual_ns, "followed": n.followed,
               "trap_inflated": n.trap_inflated, "tail_call": n.tail_call,
               "blocks": n.blocks.iter().map(|b| json!({"offset": b.offset, "address": b.address,
                   "runs_per_s": b.per_s, "runs_per_call": b.per_call})).collect::<Vec<_>>(),
               "children": n.children.iter().map(node).collect::<Vec<_>>()})
    }
    json!({"roots": h.roots.iter().map(node).collect::<Vec<_>>(), "rounds": h.rounds,
           "peak_probes": h.peak_probes, "blocks_counted": h.blocks_counted,
           "seconds": h.seconds, "stopped": h.stopped})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(name: &str, ns: f64, children: Vec<Node>) -> Node {
        Node { name: name.into(), ns, children, followed: true, ..Node::default() }
    }

    fn sample() -> Hunt {
        let slow = n("slow", 800.0, vec![]);
        let lookup = n("lookup", 850.0, vec![slow]);
        let hot = n("hot", 100.0, vec![]);
        Hunt { roots: vec![n("serve", 1000.0, vec![lookup, hot])], ..Hunt::default() }
    }

    #[test]
    fn round_summaries_split_a_nodes_time_by_its_callees_shares() {
        let v = json!({"timed_seconds": 2.0, "functions": [
            {"function": "g", "total_ns": 4000, "calls": 20},
            {"function": "g > h", "caller": "g", "callee": "h", "total_ns": 3000, "calls": 10},
            {"function": "g > k@plt", "caller": "g", "callee": "k@plt", "total_ns": 500, "calls": 2}]});
        let r = read_round(&v);
        assert_eq!(r.functions["g"].ns, 2000.0);
        // On this path g takes 1000 ns/s of the 2000 it takes in all, and 5 of its 10 calls/s.
        let here = Measured { ns: 1000.0, virtual_ns: None, calls: 5.0, trap_exit: false };
        let kids = children(&r.callees["g"], &here, &r.functions["g"]);
        let got: Vec<(&str, f64, f64)> =
            kids.iter().map(|k| (k.name.as_str(), k.ns, k.calls)).collect();
        assert_eq!(got, [("h", 750.0, 2.5), ("k@plt", 125.0, 0.5)]);
        assert_eq!(follow_name("k@plt"), Some("k"));
        assert_eq!(follow_name("(indirect)"), None);
    }

    #[test]
    fn a_call_site_time_inflated_by_a_trapped_return_takes_the_callees_own_time() {
        // redis's processCommand > authRequired: the return address is a trap splice, and the
        // call-site timer said 3.7 us a call; authRequired's own timer (jump5) 18 ns.
        let mut roots = vec![n("processCommand", 300.0e6, vec![])];
        let m = Measured { ns: 300.0e6, virtual_ns: None, calls: 50_000.0, trap_exit: false };
        let edge = Measured { ns: 185.0e6, virtual_ns: None, calls: 50_000.0, trap_exit: true };
        roots[0].children = children(&[("authRequired".into(), edge)], &m, &m);
        assert!(roots[0].children[0].trap_inflated);
        let mut known = Known::new();
        let own = Measured { ns: 1.8e6, virtual_ns: None, calls: 100_000.0, trap_exit: false };
        known.insert("authRequired".into(), (own, Vec::new(), Vec::new()));
        place(&mut roots, &[("authRequired".into(), vec![0, 0])], &known);
        let a = &roots[0].children[0];
        assert!(!a.trap_inflated && a.followed);
        assert!((a.ns - 50_000.0 * 18.0).abs() < 1e-6, "{}", a.ns);
    }

    #[test]
    fn a_tail_callee_takes_its_callers_self_time_then_at_most_its_own_per_call() {
        // postgres's ExecutorRun: five instructions ending `jmp standard_ExecutorRun`, whose
        // time its timer holds and no call-site timer does.
        let v = json!({"timed_seconds": 1.0, "functions": [
            {"function": "ExecutorRun", "total_ns": 1000, "calls": 10,
             "tail_callees": ["standard_ExecutorRun"]},
            {"function": "ExecutorRun > log", "caller": "ExecutorRun", "callee": "log",
             "total_ns": 100, "calls": 10}]});
        let r = read_round(&v);
        let mut known = Known::new();
        let (m, tails) = (r.functions["ExecutorRun"], r.tails["ExecutorRun"].clone());
        known.insert("ExecutorRun".into(), (m, r.callees["ExecutorRun"].clone(), tails));
        let mut roots =
            vec![Node { name: "ExecutorRun".into(), ns: 1000.0, calls: 10.0, ..Node::default() }];
        place(&mut roots, &[("ExecutorRun".into(), vec![0])], &known);
        let kids: Vec<(&str, f64, bool)> =
            roots[0].children.iter().map(|c| (c.name.as_str(), c.ns, c.tail_call)).collect();
        assert_eq!(kids, [("standard_ExecutorRun", 900.0, true), ("log", 100.0, false)]);
        assert_eq!(roots[0].self_ns(), 0.0);
        // Followed: a tail callee that takes 3 ns a call (called from elsewhere too) keeps
        // only that for this path's 10 calls; one that takes more keeps the bound.
        for (own_ns, want) in [(300.0, 30.0), (50_000.0, 900.0)] {
            let mut roots = roots.clone();
            let own = Measured { ns: own_ns, virtual_ns: None, calls: 100.0, trap_exit: false };
            let mut known = Known::new();
            known.insert("standard_ExecutorRun".into(), (own, Vec::new(), Vec::new()));
            place(&mut roots, &[("standard_ExecutorRun".into(), vec![0, 0])], &known);
            let t = &roots[0].children[0];
            assert!(t.followed && t.tail_call);
            assert!((t.ns - want).abs() < 1e-9, "{own_ns}: {}", t.ns);
        }
        assert!(tree_text(&Hunt { roots, ..Hunt::default() }, 0.0).contains("(tail call"));
    }

    #[test]
    fn self_time_folded_stacks_and_speedscope_agree() {
        let h = sample();
        assert_eq!(h.roots[0].self_ns(), 50.0);
        assert_eq!(folded(&h), "serve 50\nserve;lookup 50\nserve;lookup;slow 800\nserve;hot 100\n");
        let s = speedscope(&h, "t");
        assert_eq!(s["profiles"][0]["weights"], json!([50, 50, 800, 100]));
        assert_eq!(s["profiles"][0]["samples"][2], json!([0, 1, 2]));
        assert_eq!(s["profiles"][0]["endValue"], 1000);
        let text = tree_text(&h, 0.0);
        assert!(text.contains("     slow"), "{text}");
        // Below 20 % of the root: left out.
        assert!(!tree_text(&h, 0.2).contains("hot"));
    }
}
