//! The process installer run whole on kerf-os's ptrace fake (no process, no root): a fixture
//! compiled here is "loaded" into the fake's memory, probes go in and come out, and the fake's
//! record of every write through /proc/PID/mem shows the order splices went live (timer stops
//! before timer starts, starts last), that removal goes the other way and restores every
//! byte, and what happens when bytes are not the file's.

mod common;

use kerf_analysis::cfg::FuncId;
use kerf_arch::ImageAddr;
use kerf_os::ptrace::fake::{regs_at, Fake, ANYWHERE, PID, SYSCALL_AT};
use kerf_session::instrument::{Instrumentation, Options, ProcessBackend};
use kerf_session::probe::{Action, InstrumentError, Probe, Reason, ToolData};
use kerf_session::spec::Point;
use kerf_session::AnalyzedImage;
use std::sync::Arc;

/// Where the fake "loads" the fixture (its maps list a mapping there).
const BASE: u64 = 0x5555_0000_0000;

/// The fixture, "loaded" at BASE.
fn fixture(name: &str) -> AnalyzedImage {
    let mut m = common::fixture(name);
    m.bias = Some(BASE);
    m
}

/// The module's text as its file holds it, `(target address, bytes)`.
fn text(m: &AnalyzedImage) -> (u64, Vec<u8>) {
    let entry = m.analysis.cfg.functions.iter().find(|f| f.name == "main").unwrap().entry;
    let (base, bytes) = m.code_region(entry).unwrap();
    (base.0 + BASE, bytes.to_vec())
}

/// A fake process with the module's text in its memory, one thread parked in the vDSO, and
/// an auxiliary vector that allows `rdfsbase`.
fn process(m: &AnalyzedImage) -> Arc<Fake> {
    let fake = Arc::new(Fake::new(&[PID]));
    {
        let mut st = fake.state();
        let (at, bytes) = text(m);
        st.mem.push((at, bytes));
        let t = st.threads.get_mut(&PID).unwrap();
        t.regs = regs_at(SYSCALL_AT + 0x100);
        t.regs.fs_base = 0x7f00_0000_0000;
        let mut auxv = Vec::new();
        for w in [26u64, 2, 0, 0] {
            auxv.extend_from_slice(&w.to_le_bytes());
        }
        st.auxv = Some(auxv);
    }
    fake
}

fn entry(m: &AnalyzedImage, name: &str, action: Action) -> Probe {
    let i = m.analysis.cfg.functions.iter().position(|f| f.name == name).unwrap();
    let f = FuncId(i as u32);
    let addr: ImageAddr = m.analysis.cfg.function(f).entry;
    let point =
        Point { spec: name.into(), label: name.into(), module: 0, func: f, addr, at_exit: false };
    Probe { point, action }
}

/// The module's current bytes in the fake.
fn module_bytes(fake: &Fake, m: &AnalyzedImage) -> Vec<u8> {
    let at = text(m).0;
    fake.state().mem.iter().find(|(b, _)| *b == at).unwrap().1.clone()
}

/// Writes into the module's text (splices), in order, from the `from`th write on.
fn text_writes(fake: &Fake, m: &AnalyzedImage, from: usize) -> Vec<(u64, Vec<u8>)> {
    let (at, bytes) = text(m);
    let end = at + bytes.len() as u64;
    fake.state().writes[from..].iter().filter(|(a, _)| *a >= at && *a < end).cloned().collect()
}

fn install(
    fake: &Arc<Fake>,
    m: &AnalyzedImage,
    probes: &[Probe],
    timers: usize,
) -> Instrumentation {
    let be = ProcessBackend::with_sys(PID, fake.clone());
    Instrumentation::install_with(
        be,
        std::slice::from_ref(m),
        probes,
        &ToolData::timers(timers),
        Options::default(),
        None,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn stops_first_starts_last_and_removal_in_reverse_restoring_every_byte() {
    let m = fixture("counted");
    let fake = process(&m);
    let before = module_bytes(&fake, &m);
    let probes = vec![
        entry(&m, "branchy", Action::TimerStart(0)),
        entry(&m, "leaf", Action::Count),
        entry(&m, "spin_point", Action::TimerStop(0)),
        entry(&m, "switchy", Action::TimerStart(1)),
        entry(&m, "recurse", Action::TimerStop(1)),
    ];
    let inst = install(&fake, &m, &probes, 2);
    let sites: Vec<u64> = (0..probes.len()).map(|i| inst.site_of(i).unwrap().addr).collect();
    let site = |i: usize| sites[i];
    // Sites close together go in with one write of their stretch, under one stop: what
    // counts is the write that holds each site's bytes.
    let writes = text_writes(&fake, &m, 0);
    let went_in: Vec<(u64, usize)> = writes.iter().map(|w| (w.0, w.1.len())).collect();
    let order: Vec<usize> = (0..probes.len())
        .map(|i| {
            let a = site(i);
            went_in.iter().position(|&(w, n)| w <= a && a < w + n as u64).unwrap()
        })
        .collect();
    let start = |i: usize| matches!(probes[i].action, Action::TimerStart(_));
    // Every site without a timer start goes live no later than every site with one.
    for i in (0..probes.len()).filter(|&i| !start(i)) {
        for j in (0..probes.len()).filter(|&j| start(j)) {
            assert!(
                order[i] <= order[j],
                "{} went in after {}: {went_in:x?}",
                probes[i].point.label,
                probes[j].point.label
            );
        }
    }
    // The splices are in the fake's memory; nothing else of the text changed.
    let live = module_bytes(&fake, &m);
    assert_ne!(live, before);
    let n = fake.state().writes.len();
    let removed = inst.remove().unwrap();
    assert_eq!(removed.kept, vec![], "{removed:?}");
    assert_eq!(module_bytes(&fake, &m), before, "every byte restored");
    // Removal goes the other way, a site at a time: every timer start out first.
    let came_out: Vec<u64> = text_writes(&fake, &m, n).iter().map(|w| w.0).collect();
    assert_eq!(came_out.len(), probes.len(), "{came_out:x?}");
    let out = |i: usize| came_out.iter().position(|&a| a == site(i)).unwrap();
    for i in (0..probes.len()).filter(|&i| !start(i)) {
        for j in (0..probes.len()).filter(|&j| start(j)) {
            assert!(out(j) < out(i), "removal goes the other way: {came_out:x?}");
        }
    }
    // Both heaps unmapped, kerf's view of the data heap too (the restorer pages of the
    // stops aside).
    let st = fake.state();
    let unmaps = st.calls.iter().filter(|c| c.1 == libc::SYS_munmap);
    let unmaps = unmaps.filter(|c| !ANYWHERE.contains(&c.2[0])).count();
    assert_eq!(unmaps, 2);
    assert_eq!(st.local_maps, 0);
}

/// Bytes in the target that are not the file's are never spliced over: that site is refused
/// with the bytes found; the others go in. When no site is left, that is the error.
#[test]
fn bytes_not_the_files_are_refused() {
    let m = fixture("counted");
    let fake = process(&m);
    let leaf = entry(&m, "leaf", Action::Count);
    let at = leaf.point.addr.0 + BASE;
    {
        let mut st = fake.state();
        let (base, bytes) =
            st.mem.iter_mut().find(|(b, _)| at >= *b && at < *b + 0x100000).unwrap();
        bytes[(at - *base) as usize] = 0xcc; // another tool's breakpoint
    }
    let probes = vec![leaf.clone(), entry(&m, "branchy", Action::Count)];
    let inst = install(&fake, &m, &probes, 0);
    assert!(inst.site_of(0).is_none());
    assert!(inst.site_of(1).is_some());
    match &inst.refused[..] {
        [r] => match &r.reason {
            Reason::Foreign(f) => {
                assert_eq!((r.probe, f.addr), (0, at));
                assert_eq!(f.live[0], 0xcc);
            }
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
    inst.remove().unwrap();
    let fake = process(&m);
    {
        let mut st = fake.state();
        let (base, bytes) =
            st.mem.iter_mut().find(|(b, _)| at >= *b && at < *b + 0x100000).unwrap();
        bytes[(at - *base) as usize] = 0xcc;
    }
    let be = ProcessBackend::with_sys(PID, fake.clone());
    let e = Instrumentation::install_with(
        be,
        std::slice::from_ref(&m),
        &[leaf],
        &ToolData::default(),
        Options::default(),
        None,
    )
    .err()
    .expect("nothing to splice");
    assert!(
        matches!(&e, InstrumentError::NothingPlaced(r) if matches!(r.reason, Reason::Foreign(_))),
        "{e}"
    );
    // Nothing of the module changed, and what was mapped is gone again.
    assert_eq!(fake.state().local_maps, 0);
}

/// A splice someone else changed after kerf wrote it is not "restored" over their bytes.
#[test]
fn removal_refuses_bytes_changed_since() {
    let m = fixture("counted");
    let fake = process(&m);
    let inst = install(&fake, &m, &[entry(&m, "leaf", Action::Count)], 0);
    let at = inst.site_of(0).unwrap().addr;
    {
        let mut st = fake.state();
        let (base, bytes) =
            st.mem.iter_mut().find(|(b, _)| at >= *b && at < *b + 0x100000).unwrap();
        bytes[(at - *base) as usize] = 0xcc;
    }
    match inst.remove() {
        Err(InstrumentError::Mismatch { addr, .. }) => assert_eq!(addr, at),
        other => panic!("{other:?}"),
    }
}
