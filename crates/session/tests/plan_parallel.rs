//! Parallel splice planning plans exactly what one thread plans (`plan::plan_sites_with`):
//! the same sites in the same order, with the same members, kinds, reasons, displaced bytes
//! and springboards, and the same refusals, on real binaries: every function entry of
//! python3.11, every block and exit of some of its functions, and libc with a signal-mask
//! guard on every `syscall` (what a process with trap splices gets), also with jump2 forced
//! (every site then wants a springboard) and with the kernel's placement rules. Needs python3.11 and libc6 (Debian); a missing one
//! fails the test with the package to install.

use kerf_arch::ImageAddr;
use kerf_patch::SpliceKind;
use kerf_session::instrument::{Action, Probe};
use kerf_session::plan::{
    plan_sites, plan_sites_adding, plan_sites_with, syscall_sites, Rules, Sites,
};
use kerf_session::spec::{self, Point};
use kerf_session::{analyze_file, AnalyzedImage, LoadOptions};
use std::path::Path;

fn load(path: &str, package: &str) -> AnalyzedImage {
    assert!(Path::new(path).exists(), "{path} is missing: install the Debian package {package}");
    let opts = LoadOptions { no_cache: true, ..LoadOptions::default() };
    let mut m = analyze_file(Path::new(path), &opts, &kerf_analysis::Quiet).unwrap();
    // Planned as if loaded at a page-aligned bias, as in a process.
    m.bias = Some(0x7f00_0000_0000);
    m
}

/// Counters at every point of `specs` in `images`.
fn probes(images: &[AnalyzedImage], specs: &[&str]) -> Vec<Probe> {
    let specs: Vec<spec::Spec> = specs.iter().map(|s| spec::parse(s).unwrap()).collect();
    let named: Vec<(&str, &kerf_analysis::Analysis)> =
        images.iter().map(|m| (m.analysis.image.as_str(), &m.analysis)).collect();
    let reader = |m: usize, a: ImageAddr| {
        let (base, bytes) = images[m].code_region(a)?;
        let off = (a.0 - base.0) as usize;
        Some((a, bytes.get(off..(off + 4096).min(bytes.len()))?.to_vec()))
    };
    let points = spec::resolve(&specs, &named, &reader).unwrap();
    points.into_iter().map(|point| Probe { point, action: Action::Count }).collect()
}

/// A signal-mask guard on every `syscall` of module `module` (what a process with trap
/// splices gets).
fn guards(images: &[AnalyzedImage], module: usize) -> Vec<Probe> {
    let sites = syscall_sites(images, module).unwrap();
    sites
        .iter()
        .map(|s| Probe {
            point: Point {
                spec: "(guard)".into(),
                label: format!("syscall at {:#x}", s.addr.0),
                module,
                func: s.func,
                addr: s.addr,
                at_exit: false,
            },
            action: Action::SignalGuard,
        })
        .collect()
}

/// Everything a plan says, as text: one line per site, springboard and refusal.
fn describe(s: &Sites) -> Vec<String> {
    let mut v: Vec<String> = s
        .sites
        .iter()
        .map(|p| {
            let d = &p.plan.displaced;
            let insns: Vec<String> = d.insns.iter().map(|i| format!("{i}")).collect();
            format!(
                "site {} {:?} {:?} {:?} {:#x}+{} {:?} {:?}",
                p.first,
                p.members,
                p.plan.kind,
                p.plan.reason,
                d.point,
                d.len,
                insns,
                p.plan.springboard
            )
        })
        .collect();
    v.extend(s.springboards.iter().map(|(a, b)| format!("springboard {a:#x}-{b:#x}")));
    v.extend(s.refused.iter().map(|r| format!("refused {} {:#x} {}", r.probe, r.addr, r.reason)));
    v
}

fn same_on_any_threads(
    images: &[AnalyzedImage],
    probes: &[Probe],
    force: Option<SpliceKind>,
    startup: &[(u64, u64)],
    rules: Rules,
) -> Vec<String> {
    let plan = |threads: usize| {
        let s = plan_sites_with(images, probes, force, startup, rules, None, threads);
        describe(&s.unwrap_or_else(|e| panic!("planning on {threads} threads: {e}")))
    };
    let one = plan(1);
    for threads in [2, 3, 8] {
        let many = plan(threads);
        let first_diff = one.iter().zip(&many).position(|(a, b)| a != b);
        assert!(
            one == many,
            "{threads} threads plan otherwise than one: {} against {} lines, first difference \
             at {first_diff:?}: {:?} against {:?}",
            one.len(),
            many.len(),
            first_diff.map(|k| &one[k]),
            first_diff.map(|k| &many[k]),
        );
    }
    one
}

fn kinds(lines: &[String], kind: &str) -> usize {
    lines.iter().filter(|l| l.starts_with("site ") && l.contains(kind)).count()
}

#[test]
fn python_entries_blocks_and_exits() {
    let images = [load("/usr/bin/python3.11", "python3.11-minimal")];
    let probes = probes(
        &images,
        &["python3.11:*", "python3.11:*@plt", "python3.11:PyDict_*@blocks", "python3.11:Py*@exits"],
    );
    assert!(probes.len() > 12_000, "only {} probes", probes.len());
    let lines = same_on_any_threads(&images, &probes, None, &[], Rules::PROCESS);
    // Every kind is there, so every path of the planner ran.
    for k in ["Jump5", "Jump2", "Trap"] {
        assert!(kinds(&lines, k) > 0, "no {k} site among {} lines", lines.len());
    }
    // Start-up code as springboard space, and jump2 forced everywhere.
    let main = images[0].analysis.cfg.functions.iter().find(|f| f.name == "_start").unwrap();
    let bias = images[0].bias.unwrap();
    let startup = [(main.entry.0 + bias, main.extent.end + bias)];
    let forced =
        same_on_any_threads(&images, &probes, Some(SpliceKind::Jump2), &startup, Rules::PROCESS);
    assert!(kinds(&forced, "Jump2") > 1000, "{} jump2 sites", kinds(&forced, "Jump2"));
    // The kernel's rules: entries move past `endbr64` (python3.11 is built with CET).
    let moved = same_on_any_threads(&images, &probes, None, &[], Rules::KERNEL);
    assert_ne!(moved, lines, "no entry moved past an endbr64");
}

#[test]
fn libc_with_signal_mask_guards() {
    let images = [load("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc6")];
    let mut probes = probes(&images, &["libc.so.6:*"]);
    let guards = guards(&images, 0);
    assert!(guards.len() > 100, "{} syscalls in libc", guards.len());
    probes.extend(guards);
    let lines = same_on_any_threads(&images, &probes, None, &[], Rules::PROCESS);
    assert!(kinds(&lines, "Jump2") > 0, "no jump2 site");
}

/// Signal-mask guards added to a plan (`plan_sites_adding`, what a process with a trap
/// does) plan only the module they are in again, and give what one plan of every probe gives:
/// python3.11's and libc's entries, then a guard on every `syscall` of libc.
#[test]
fn guards_added_to_a_plan_replan_only_their_module() {
    let mut images = [
        load("/usr/bin/python3.11", "python3.11-minimal"),
        load("/usr/lib/x86_64-linux-gnu/libc.so.6", "libc6"),
    ];
    images[1].bias = Some(0x7f10_0000_0000);
    let user = probes(&images, &["python3.11:*", "python3.11:Py*@exits", "libc.so.6:*"]);
    let mut all = user.clone();
    all.extend(guards(&images, 1));
    let plan = |probes: &[Probe]| plan_sites(&images, probes, None, &[], Rules::PROCESS, None);
    let first = plan(&user).unwrap();
    let added =
        plan_sites_adding(&images, &all, user.len(), first, None, &[], Rules::PROCESS, None, 2);
    let sorted = |s: &Sites| {
        // Springboard space is a set: in one plan it comes in planning order, here module by
        // module.
        let mut v = describe(s);
        v.sort_by_key(|l| !l.starts_with("springboard"));
        let n = v.iter().take_while(|l| l.starts_with("springboard")).count();
        v[..n].sort();
        v
    };
    let (added, whole) = (sorted(&added.unwrap()), sorted(&plan(&all).unwrap()));
    let first_diff = whole.iter().zip(&added).position(|(a, b)| a != b);
    assert!(
        added == whole,
        "guards added plan otherwise than one plan: {} against {} lines, first difference at \
         {first_diff:?}: {:?} against {:?}",
        added.len(),
        whole.len(),
        first_diff.map(|k| &added[k]),
        first_diff.map(|k| &whole[k]),
    );
    // The guards are there, and a program's probe joined a guard's site or was planned
    // around it.
    assert!(added.iter().filter(|l| l.starts_with("site ")).count() > 10_000);
    assert!(kinds(&added, "Jump2") > 0, "no jump2 site");
}
