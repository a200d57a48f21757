//! `plan_sites` without a process and without root: planning on fixture binaries compiled
//! here (gcc), checked for its ordering rules (timer stops before timer starts, starts last;
//! typed refusal reasons; liveness and stack facts per site) and against golden files, one
//! line per site (address, kind, reason), regenerated with `KERF_BLESS=1`, never by hand.

mod common;

#[path = "common/go.rs"]
mod go;

use kerf_analysis::cfg::FuncId;
use kerf_patch::Refusal;
use kerf_patch::SpliceKind;
use kerf_session::plan::{plan_sites, Rules, Sites};
use kerf_session::probe::{Action, Chosen, InstrumentError, KindRefusal, Probe, Reason};
use kerf_session::spec::Point;
use kerf_session::AnalyzedImage;
use std::path::Path;

fn func(m: &AnalyzedImage, name: &str) -> FuncId {
    let i = m.analysis.cfg.functions.iter().position(|f| f.name == name);
    FuncId(i.unwrap_or_else(|| panic!("no function {name}")) as u32)
}

fn entry(m: &AnalyzedImage, name: &str, action: Action) -> Probe {
    let f = func(m, name);
    let addr = m.analysis.cfg.function(f).entry;
    let point =
        Point { spec: name.into(), label: name.into(), module: 0, func: f, addr, at_exit: false };
    Probe { point, action }
}

/// A count probe at every block start of the functions `names`.
fn blocks(m: &AnalyzedImage, names: &[&str]) -> Vec<Probe> {
    let cfg = &m.analysis.cfg;
    let mut v = Vec::new();
    for name in names {
        let f = func(m, name);
        let e = cfg.function(f).entry.0;
        for b in cfg.blocks_of(f) {
            let point = Point {
                spec: format!("{name}@blocks"),
                label: format!("{name}+{:#x}", b.start.0 - e),
                module: 0,
                func: f,
                addr: b.start,
                at_exit: false,
            };
            v.push(Probe { point, action: Action::Count });
        }
    }
    v
}

fn plan(m: &AnalyzedImage, probes: &[Probe], force: Option<SpliceKind>) -> Sites {
    plan_sites(std::slice::from_ref(m), probes, force, &[], Rules::PROCESS, None).unwrap()
}

/// One line per site in plan order, then one per refused probe.
fn text(probes: &[Probe], s: &Sites) -> String {
    let mut t = String::new();
    for sp in &s.sites {
        let labels: Vec<&str> =
            sp.members.iter().map(|&i| probes[i].point.label.as_str()).collect();
        let reason = sp.plan.reason.as_ref().map_or("-".to_string(), ToString::to_string);
        t += &format!(
            "{:#x} {:?} [{}] {}\n",
            sp.plan.displaced.point,
            sp.plan.kind,
            labels.join(" "),
            reason
        );
    }
    for r in &s.refused {
        t += &format!("{:#x} refused [{}] {}\n", r.addr, r.label, r.reason);
    }
    t
}

fn golden(name: &str, got: &str) {
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden").join(format!("{name}.txt"));
    if std::env::var("KERF_BLESS").is_ok_and(|v| v == "1") {
        std::fs::write(&path, got).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (run with KERF_BLESS=1 to create it)", path.display()));
    assert_eq!(got, want, "{} differs (KERF_BLESS=1 regenerates it)", path.display());
}

#[test]
fn golden_plans_of_the_fixtures() {
    for (fixture_name, funcs) in [
        ("counted", &["branchy", "switchy", "leaf", "spin_point", "recurse", "main"][..]),
        ("tailcall", &["is_even", "is_odd", "tail_cond", "jump_through_register", "main"][..]),
        ("unwind_overlap", &["plain_fn", "main"][..]),
    ] {
        let m = common::fixture(fixture_name);
        let probes = blocks(&m, funcs);
        golden(&format!("plan-{fixture_name}"), &text(&probes, &plan(&m, &probes, None)));
    }
}

/// Timer stops go live before timer starts, and sites without a start before any with one,
/// whatever order the probes came in; a count at a start's address joins its site.
#[test]
fn timer_starts_go_live_last() {
    let m = common::fixture("counted");
    let probes = vec![
        entry(&m, "branchy", Action::TimerStart(0)),
        entry(&m, "leaf", Action::Count),
        entry(&m, "switchy", Action::TimerStart(1)),
        entry(&m, "spin_point", Action::TimerStop(0)),
        entry(&m, "branchy", Action::Count),
        entry(&m, "recurse", Action::TimerStop(1)),
    ];
    let s = plan(&m, &probes, None);
    let starts = |sp: &kerf_session::plan::SitePlan| {
        sp.members.iter().any(|&i| matches!(probes[i].action, Action::TimerStart(_)))
    };
    let first_start = s.sites.iter().position(starts).unwrap();
    assert!(s.sites[first_start..].iter().all(starts), "{}", text(&probes, &s));
    assert_eq!(first_start, 3, "{}", text(&probes, &s));
    let branchy = s.sites.iter().find(|sp| sp.members.contains(&0)).unwrap();
    assert_eq!(branchy.members, vec![0, 4], "the count joins the start's site");
}

/// A forced kind is taken or the probe is refused with a typed reason; a trap's reason says
/// it was forced.
#[test]
fn forced_kinds_and_typed_reasons() {
    let m = common::fixture("counted");
    let probes = blocks(&m, &["branchy", "switchy"]);
    let traps = plan(&m, &probes, Some(SpliceKind::Trap));
    assert!(traps.sites.iter().all(|sp| sp.plan.kind == SpliceKind::Trap));
    assert!(traps.sites.iter().all(|sp| sp.plan.reason.as_ref().unwrap().to_string() == "forced"));
    // Forced jump5 where the function has an indirect jump with unknown targets: refused,
    // with the patch layer's typed refusal, not a string.
    let t = common::fixture("tailcall");
    let probes = blocks(&t, &["is_even", "jump_through_register"]);
    let jumps = plan(&t, &probes, Some(SpliceKind::Jump5));
    assert!(jumps.sites.iter().all(|sp| sp.plan.kind == SpliceKind::Jump5));
    let unanalysable = jumps.refused.iter().filter(|r| {
        matches!(&r.reason, Reason::Kinds { refused, .. }
            if matches!(refused[..], [(SpliceKind::Jump5, KindRefusal::Patch(Refusal::UnanalysableJump { .. }))]))
    });
    assert_eq!(
        unanalysable.count(),
        blocks(&t, &["jump_through_register"]).len(),
        "{}",
        text(&probes, &jumps)
    );
}

/// With traps off (`--no-traps`), the points only a trap could take are refused with that
/// reason, and every other point is planned as without the rule.
#[test]
fn traps_off_refuses_exactly_the_trap_sites() {
    let m = common::fixture("tailcall");
    let probes = blocks(&m, &["is_even", "jump_through_register"]);
    let with = plan(&m, &probes, None);
    let rules = Rules { no_trap: true, ..Rules::PROCESS };
    let without = plan_sites(std::slice::from_ref(&m), &probes, None, &[], rules, None).unwrap();
    let traps: Vec<u64> = with
        .sites
        .iter()
        .filter(|sp| sp.plan.kind == SpliceKind::Trap)
        .map(|sp| sp.plan.displaced.point)
        .collect();
    assert!(!traps.is_empty(), "the fixture has trap sites: {}", text(&probes, &with));
    let refused: Vec<u64> = without.refused.iter().map(|r| r.addr).collect();
    assert_eq!(refused, traps);
    assert!(without.refused.iter().all(|r| r.reason.to_string().contains("traps are off")));
    let kept = |s: &Sites| -> Vec<(u64, SpliceKind)> {
        let mut v: Vec<_> =
            s.sites.iter().map(|sp| (sp.plan.displaced.point, sp.plan.kind)).collect();
        v.sort_by_key(|x| x.0);
        v
    };
    let mut jumps = kept(&with);
    jumps.retain(|(_, k)| *k != SpliceKind::Trap);
    assert_eq!(kept(&without), jumps);
}

/// Code no splice may touch is refused with its own reason; nothing placed at all is the
/// error, carrying the refusal.
#[test]
fn never_spliced_code_is_refused_and_nothing_placed_is_an_error() {
    let m = common::fixture("unwind_overlap");
    let probes = vec![entry(&m, "tramp_code", Action::Count)];
    match plan_sites(std::slice::from_ref(&m), &probes, None, &[], Rules::PROCESS, None) {
        Err(InstrumentError::NothingPlaced(r)) => {
            assert!(matches!(r.reason, Reason::NeverSpliced(_)), "{r:?}");
            assert!(r.reason.to_string().contains("signal trampoline"), "{r:?}");
        }
        Err(e) => panic!("{e}"),
        Ok(s) => panic!("planned: {}", text(&probes, &s)),
    }
}

/// Every site carries its liveness (never everything-live at a plain function entry of
/// -O2 code, where caller-saved registers are dead) and no tail facts without tail probes.
#[test]
fn sites_carry_their_point_facts() {
    let m = common::fixture("counted");
    let probes = vec![entry(&m, "leaf", Action::Count), entry(&m, "branchy", Action::Count)];
    let s = plan(&m, &probes, None);
    for sp in &s.sites {
        assert_ne!(sp.live, kerf_codegen::LiveAt::ALL, "{}", text(&probes, &s));
        assert!(sp.stacks.is_empty());
    }
}

/// A signal-mask guard takes jump2 or trap, never jump5 (a thread asleep in its system call
/// has its PC right after the `syscall`), says so, and is planned first: a count probe of the
/// program at the same `syscall` joins the guard's site.
#[test]
fn a_guard_takes_jump2_or_trap_and_a_count_there_joins_it() {
    let m = common::fixture("restart");
    let modules = std::slice::from_ref(&m);
    let sys = kerf_session::plan::syscall_sites(modules, 0).unwrap();
    let sleep = func(&m, "sleep_site");
    let s = sys.iter().find(|s| s.func == sleep).expect("sleep_site's syscall");
    let point = |spec: &str| Point {
        spec: spec.into(),
        label: spec.into(),
        module: 0,
        func: sleep,
        addr: s.addr,
        at_exit: false,
    };
    let probes = vec![
        Probe { point: point("count"), action: Action::Count },
        Probe { point: point("guard"), action: Action::SignalGuard },
    ];
    let plan = plan(&m, &probes, None);
    match &plan.sites[..] {
        [site] => {
            assert_eq!(site.first, 1, "the guard names the site");
            assert_eq!(site.members, vec![1, 0]);
            assert_ne!(site.plan.kind, SpliceKind::Jump5);
            assert!(
                matches!(
                    &site.plan.reason,
                    Some(Reason::Kinds { chosen: Some(Chosen::Guard), .. })
                ),
                "{:?}",
                site.plan.reason
            );
        }
        other => panic!("{} sites:\n{}", other.len(), text(&probes, &plan)),
    }
}

/// Go code, where goroutines resume at addresses no call leads to (runtime.goexit+1, and
/// wherever a preempted goroutine stopped): no jump covers more than one instruction, so no
/// instruction boundary is inside a splice. `runtime.goexit` (a one-byte `nop` before the
/// call every goroutine returns into) becomes a trap, with the reason. A jump5 over its `nop`
/// and call crashed a Go program under `kerf count 'prog:*'` ("unexpected fault address").
#[test]
fn go_code_gets_no_jump_over_an_instruction_boundary() {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session-go");
    let bin = go::build_go("goroutines", &dir);
    let opts = kerf_session::LoadOptions { cache_dir: None, ..Default::default() };
    let m = kerf_session::analyze_file(&bin, &opts, &kerf_analysis::Quiet).unwrap();
    let names: Vec<String> = m.analysis.cfg.functions.iter().map(|f| f.name.clone()).collect();
    let probes: Vec<Probe> = names.iter().map(|n| entry(&m, n, Action::Count)).collect();
    let s = plan_sites(std::slice::from_ref(&m), &probes, None, &[], Rules::PROCESS, None).unwrap();
    let mut jumps = 0;
    for sp in &s.sites {
        if sp.plan.kind != SpliceKind::Trap {
            jumps += 1;
            let d = &sp.plan.displaced;
            assert_eq!(
                d.insns.len(),
                1,
                "a jump over {} instructions at {:#x}",
                d.insns.len(),
                d.point
            );
        }
    }
    eprintln!("{jumps} of {} sites jumps", s.sites.len());
    // 420 of 2161 sites on Go 1.26: jump5 where the first instruction has five bytes or more,
    // jump2 only with start-up code in reach (none in Go), the rest traps.
    assert!(jumps > 300, "only {jumps} jump sites: the rule refused more than it should");
    // No springboard in padding: a thread on one has a PC between functions, where Go's
    // preemption signal makes the runtime throw (seen as "invalid runtime symbol table").
    let in_padding: Vec<String> = s
        .sites
        .iter()
        .filter(|sp| sp.plan.springboard.is_some_and(|(_, what)| what == "padding"))
        .map(|sp| format!("{:#x}", sp.plan.displaced.point))
        .collect();
    assert!(in_padding.is_empty(), "springboards in Go padding for sites {in_padding:?}");
    let refused =
        s.sites.iter().filter(|sp| format!("{:?}", sp.plan.reason).contains("GoPadding")).count();
    assert!(refused > 0, "no site was refused a springboard in padding: the test sees nothing");
    let goexit = s
        .sites
        .iter()
        .find(|sp| probes[sp.first].point.label.starts_with("runtime.goexit.abi0"))
        .expect("runtime.goexit.abi0 is planned");
    assert_eq!(goexit.plan.kind, SpliceKind::Trap);
    let why = format!("{:?}", goexit.plan.reason);
    assert!(why.contains("ResumeInside"), "{why}");
}
