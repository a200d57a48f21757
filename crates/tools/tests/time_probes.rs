//! Which probes `time` builds, on a fixture compiled here and analysed offline (no process, no
//! root): a start at each timed function's entry, a stop at each exit; in a process a direct
//! tail call (`jmp g`) is no exit but a tail-call probe, with a tail-return probe at every
//! return of `g`; in the kernel a tail call's jump stops the timer; `--callees` times each call
//! from its instruction to its return address.

use kerf_session::instrument::{Action, Probe};
use kerf_session::AnalyzedImage;
use kerf_tools::live::{LiveTool, TargetKind};
use kerf_tools::time::{Time, Timed};

mod common;

/// `tests/fixtures/tailcall.c` at -O2, analysed.
fn tailcall() -> AnalyzedImage {
    common::analysed("tailcall", "-O2")
}

fn build(
    img: &AnalyzedImage,
    functions: &[&str],
    callees: bool,
    kind: TargetKind,
) -> (Vec<Probe>, usize, Vec<Timed>) {
    let functions: Vec<String> = functions.iter().map(|s| s.to_string()).collect();
    let tool = Time::new(&functions, callees).expect("function specs");
    let images = std::slice::from_ref(img);
    let (probes, data, timed) =
        tool.build(images, &[Vec::new()], kind).expect("the functions resolve");
    (probes, data.timers, timed.timed)
}

/// The actions of the probes at `timed`'s exits.
fn exit_actions(probes: &[Probe], t: &Timed) -> Vec<Action> {
    t.exits.iter().map(|&i| probes[i].action).collect()
}

#[test]
fn a_direct_tail_call_is_followed_in_a_process_and_stops_the_timer_in_the_kernel() {
    let img = tailcall();
    let (probes, timers, timed) = build(&img, &["tail_plain"], false, TargetKind::Process);
    assert_eq!(timers, 1);
    assert_eq!(timed[0].name, "tail_plain");
    assert_eq!(probes[timed[0].entry].action, Action::TimerStart(0));
    assert_eq!(probes[timed[0].entry].point.label, "tail_plain");
    assert_eq!(exit_actions(&probes, &timed[0]), vec![Action::TimerTailCall(0)]);
    assert_eq!(timed[0].tail_callees, vec!["leaf_mix".to_string()]);
    // Every return of the functions the call may end in: leaf_mix's (and tail_plain's own,
    // none: it only jumps).
    let returns: Vec<&str> = probes
        .iter()
        .filter(|p| p.action == Action::TimerTailReturn)
        .map(|p| p.point.spec.as_str())
        .collect();
    assert!(!returns.is_empty(), "no tail-return probe");
    assert!(returns.iter().all(|s| *s == "leaf_mix (returns of tail calls)"), "{returns:?}");
    // Tail returns are planned before the timers' own exits (see timer_probes).
    let first_exit = timed[0].exits[0];
    assert!(probes[..first_exit].iter().any(|p| p.action == Action::TimerTailReturn));

    let (probes, _, timed) = build(&img, &["tail_plain"], false, TargetKind::Kernel);
    assert_eq!(exit_actions(&probes, &timed[0]), vec![Action::TimerStop(0)]);
    assert!(timed[0].tail_callees.is_empty());
    assert!(probes.iter().all(|p| !p.action.is_tail()), "the kernel has no tail stacks");
}

#[test]
fn a_function_that_returns_on_one_path_and_tail_calls_on_the_other_has_both_exits() {
    let img = tailcall();
    let (probes, _, timed) = build(&img, &["tail_or_return"], false, TargetKind::Process);
    let mut exits = exit_actions(&probes, &timed[0]);
    exits.sort_by_key(|a| format!("{a:?}"));
    assert_eq!(exits, vec![Action::TimerStop(0), Action::TimerTailCall(0)]);
    assert_eq!(timed[0].tail_callees, vec!["leaf_mix".to_string()]);
}

#[test]
fn an_indirect_tail_call_is_an_exit_not_followed() {
    let img = tailcall();
    let (probes, _, timed) = build(&img, &["tail_indirect"], false, TargetKind::Process);
    assert!(!timed[0].exits.is_empty());
    assert!(exit_actions(&probes, &timed[0]).iter().all(|a| *a == Action::TimerStop(0)));
    assert!(timed[0].tail_callees.is_empty());
    assert!(probes.iter().all(|p| p.action != Action::TimerTailReturn));
}

#[test]
fn callee_timers_run_from_each_call_to_its_return_address() {
    let img = tailcall();
    let (probes, timers, timed) = build(&img, &["tail_after_frame"], true, TargetKind::Kernel);
    let names: Vec<&str> = timed.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["tail_after_frame", "tail_after_frame > leaf_mix", "tail_after_frame > leaf_other"]
    );
    assert_eq!(timers, 3);
    for (k, t) in timed.iter().enumerate().skip(1) {
        let (caller, callee) = t.call.clone().expect("a callee timer names its call");
        assert_eq!(caller, "tail_after_frame");
        assert_eq!(t.name, format!("{caller} > {callee}"));
        let start = &probes[t.entry];
        assert_eq!(start.action, Action::TimerStart(k));
        assert_eq!(t.exits.len(), 1, "{}: one call site", t.name);
        let stop = &probes[t.exits[0]];
        assert_eq!(stop.action, Action::TimerStop(k));
        // The stop is at the return address: right after the call instruction.
        let (base, bytes) = img.code_region(start.point.addr).expect("code");
        let call = kerf_arch::x86_64::Scanner::new(bytes, base)
            .decode(start.point.addr)
            .expect("the start is an instruction");
        assert!(call.is_call_near() || call.is_call_near_indirect(), "{}: not a call", t.name);
        assert_eq!(stop.point.addr.0, call.next_ip(), "{}", t.name);
    }
}

#[test]
fn points_are_refused_where_functions_are_asked_for() {
    for spec in ["tail_plain+0x4", "tail_plain@blocks", "tail_plain@exits"] {
        let e = Time::new(&[spec.to_string()], false).err().expect("a point is no function");
        assert_eq!(
            e.to_string(),
            format!("{spec}: kerf time takes functions ([MODULE:]SYMBOL or a glob), not points")
        );
    }
}
