//! Remote collection (`kerf_tools::trace::collect`): senders stream to a collector over
//! loopback (two at once, every event in order per source), under forced backpressure (a tiny
//! queue and a stalled collector: both sides count the same losses, and delivered + lost =
//! sent), across a dropped connection (resent, nothing twice), and between two network
//! namespaces this test makes (root and iproute2 needed: the test fails if it cannot set up).

mod trace;

use kerf_tools::trace::collect::{Backpressure, CollectReport, Collector, CollectorHandle, Sender};
use kerf_tools::trace::event::{Event, LossOrigin, Record, Source};
use kerf_tools::trace::raw::Reader;
use std::io::Write;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A `Write` into memory the test reads afterwards.
#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().expect("lock").extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct Running {
    addr: String,
    handle: CollectorHandle,
    out: Shared,
    thread: JoinHandle<CollectReport>,
}

/// A collector on `listen` (port 0: any) that stops once `senders` sessions ended.
fn collector(listen: &str, senders: usize) -> Running {
    let out = Shared::default();
    let c = Collector::bind(listen, Box::new(out.clone())).expect("bind");
    let addr = c.local_addr().expect("address").to_string();
    let handle = c.handle();
    let thread = std::thread::spawn(move || {
        static NEVER: AtomicBool = AtomicBool::new(false);
        c.run(&NEVER, Some(senders)).expect("collection")
    });
    Running { addr, handle, out, thread }
}

/// The collected trace: every record, read back and checked.
fn collected(out: &Shared) -> Vec<Record> {
    let bytes = out.0.lock().expect("lock").clone();
    let mut r = Reader::new(&bytes[..]).expect("header");
    let mut all = Vec::new();
    while let Some(rec) = r.next_record().expect("a whole, finished trace") {
        all.push(rec);
    }
    all
}

/// The events of the source `name` from `machine`, with its source id put back to `id`.
fn events_named(all: &[Record], machine: &str, name: &str, id: u16) -> Vec<Record> {
    let got = all
        .iter()
        .find_map(|r| match r {
            Record::Source(s) if s.machine == machine && s.name == name => Some(s.id),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no source {name} from {machine}"));
    all.iter()
        .filter(|r| matches!(r, Record::Event(e) if e.source == got))
        .map(|r| r.clone().with_source(id))
        .collect()
}

/// The events of the process source (`app`) from `machine`, as source 0.
fn events_of(all: &[Record], machine: &str) -> Vec<Record> {
    events_named(all, machine, "app", 0)
}

fn source() -> Vec<Source> {
    vec![trace::app(0)]
}

#[test]
fn loopback_two_senders_every_event_in_order() {
    let c = collector("127.0.0.1:0", 2);
    let sent: Vec<Record> = trace::synthetic(0, 50_000, 1_000).collect();
    // Alpha also traces the kernel: its two sources' events interleave on one connection.
    let kernel: Vec<Record> = trace::synthetic(1, 10_000, 1_005).collect();
    let senders: Vec<_> = ["alpha", "beta"]
        .into_iter()
        .map(|m| {
            let (addr, sent, kernel) = (c.addr.clone(), sent.clone(), kernel.clone());
            std::thread::spawn(move || {
                let sources =
                    if m == "alpha" { vec![trace::app(0), trace::kernel(1)] } else { source() };
                let s =
                    Sender::new(&addr, m, sources, 1 << 20, Backpressure::Drop).expect("sender");
                for (i, r) in sent.iter().enumerate() {
                    s.send(r);
                    if m == "alpha" && i % 5 == 0 {
                        s.send(&kernel[i / 5]);
                    }
                }
                s.finish(Duration::from_secs(60)).expect("every record acknowledged")
            })
        })
        .collect();
    for s in senders {
        let stats = s.join().expect("sender thread");
        assert_eq!(stats.dropped, 0);
        assert!(stats.events == 50_000 || stats.events == 60_000, "{stats:?}");
    }
    let report = c.thread.join().expect("collector");
    assert!(report.errors.is_empty(), "{:?}", report.errors);
    let all = collected(&c.out);
    for m in ["alpha", "beta"] {
        assert_eq!(events_of(&all, m), sent, "events from {m}");
    }
    assert_eq!(events_named(&all, "alpha", "kernel", 1), kernel);
    let mut counts: Vec<_> = report
        .sources
        .iter()
        .map(|c| (c.machine.as_str(), c.events, c.lost_sender, c.ended))
        .collect();
    counts.sort();
    assert_eq!(
        counts,
        [("alpha", 10_000, 0, true), ("alpha", 50_000, 0, true), ("beta", 50_000, 0, true)]
    );
}

#[test]
fn backpressure_losses_counted_on_both_sides() {
    let c = collector("127.0.0.1:0", 1);
    c.handle.pause(true);
    let s = Sender::new(&c.addr, "slow", source(), 16, Backpressure::Drop).expect("sender");
    let sent: Vec<Record> = trace::synthetic(0, 20_000, 1_000).collect();
    for r in &sent {
        s.send(r);
    }
    let during = s.stats();
    c.handle.pause(false);
    let stats = s.finish(Duration::from_secs(60)).expect("acknowledged");
    assert_eq!(during.dropped, stats.dropped);
    assert!(
        stats.dropped >= 20_000 - 16,
        "a stalled collector behind a 16-record queue: {stats:?}"
    );
    let report = c.thread.join().expect("collector");
    let all = collected(&c.out);
    let got = events_of(&all, "slow");
    // The collector's loss records add up to the sender's count, and delivered + lost = sent.
    let lost: u64 = all
        .iter()
        .filter_map(|r| match r {
            Record::Loss(l) if l.origin == LossOrigin::Sender => Some(l.count),
            _ => None,
        })
        .sum();
    assert_eq!(lost, stats.dropped);
    assert_eq!(report.sources[0].lost_sender, stats.dropped);
    assert_eq!(got.len() as u64 + lost, 20_000);
    assert_eq!(report.sources[0].events, got.len() as u64);
    // What arrived is in the order sent.
    let times: Vec<u64> = got
        .iter()
        .map(|r| match r {
            Record::Event(Event { time_ns, .. }) => *time_ns,
            _ => 0,
        })
        .collect();
    assert!(times.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn reconnect_resends_without_duplicates() {
    let c = collector("127.0.0.1:0", 1);
    let s = Sender::new(&c.addr, "flaky", source(), 1 << 20, Backpressure::Drop).expect("sender");
    let sent: Vec<Record> = trace::synthetic(0, 40_000, 1_000).collect();
    for (i, chunk) in sent.chunks(10_000).enumerate() {
        for r in chunk {
            s.send(r);
        }
        if i < 3 {
            std::thread::sleep(Duration::from_millis(30));
            c.handle.drop_connections();
        }
    }
    let stats = s.finish(Duration::from_secs(60)).expect("acknowledged");
    assert_eq!(stats.dropped, 0);
    assert!(stats.connections >= 2, "the connection was broken: {stats:?}");
    let report = c.thread.join().expect("collector");
    assert_eq!(events_of(&collected(&c.out), "flaky"), sent);
    // Both ends saw the reconnects (a connection broken between the collector's hello and the
    // sender's welcome counts on one side only, so the numbers may differ by that).
    assert!(report.sources[0].connections >= 2, "{:?}", report.sources[0]);
}

#[test]
fn sender_waits_for_a_collector_not_yet_there() {
    // A port nothing listens on yet (the listener that found it is closed at once).
    let addr =
        std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr");
    let s = Sender::new(&addr.to_string(), "early", source(), 1 << 20, Backpressure::Drop)
        .expect("sender");
    let sent: Vec<Record> = trace::synthetic(0, 5_000, 1_000).collect();
    for r in &sent {
        s.send(r);
    }
    std::thread::sleep(Duration::from_millis(150));
    assert_eq!(s.stats().acked, 0);
    let c = collector(&addr.to_string(), 1);
    let stats = s.finish(Duration::from_secs(60)).expect("acknowledged once the collector came");
    assert_eq!(stats.dropped, 0);
    c.thread.join().expect("collector");
    assert_eq!(events_of(&collected(&c.out), "early"), sent);
}

/// Two network namespaces joined by a veth pair, deleted on drop.
struct Netns {
    names: [String; 2],
}

fn ip(args: &[&str]) {
    let out = std::process::Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("ip {args:?}: {e}: install iproute2 (scripts/deps.sh)"));
    assert!(
        out.status.success(),
        "ip {args:?}: {} (root is needed)",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    fn new() -> Netns {
        let p = std::process::id();
        let names = [format!("kerf-a-{p}"), format!("kerf-b-{p}")];
        let veth = [format!("kva{p}"), format!("kvb{p}")];
        let n = Netns { names };
        for ns in &n.names {
            ip(&["netns", "add", ns]);
        }
        ip(&["link", "add", &veth[0], "type", "veth", "peer", "name", &veth[1]]);
        for (i, ns) in n.names.iter().enumerate() {
            ip(&["link", "set", &veth[i], "netns", ns]);
            ip(&["-n", ns, "addr", "add", &format!("10.231.17.{}/24", i + 1), "dev", &veth[i]]);
            ip(&["-n", ns, "link", "set", &veth[i], "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        n
    }

    /// Moves the calling thread (and threads it starts later) into namespace `i`.
    fn enter(&self, i: usize) {
        let f =
            std::fs::File::open(format!("/run/netns/{}", self.names[i])).expect("namespace file");
        use std::os::fd::AsRawFd;
        // SAFETY: setns on an open namespace file descriptor changes only this thread's
        // network namespace.
        let r = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns: {}", std::io::Error::last_os_error());
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        for ns in &self.names {
            let _ = std::process::Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

#[test]
fn across_two_network_namespaces() {
    let ns = Arc::new(Netns::new());
    let (tx, rx) = std::sync::mpsc::channel();
    let collector_ns = ns.clone();
    let c = std::thread::spawn(move || {
        collector_ns.enter(0);
        let r = collector("10.231.17.1:0", 1);
        tx.send(r.addr.clone()).expect("address");
        let report = r.thread.join().expect("collector");
        (report, collected(&r.out))
    });
    let addr = rx.recv().expect("the collector listens");
    let sent: Vec<Record> = trace::synthetic(0, 20_000, 1_000).collect();
    let sender_ns = ns.clone();
    let to_send = sent.clone();
    let stats = std::thread::spawn(move || {
        sender_ns.enter(1);
        // Namespace B has no route to A's address but through the veth pair.
        let s = Sender::new(&addr, "ns-b", source(), 1 << 20, Backpressure::Drop).expect("sender");
        for r in &to_send {
            s.send(r);
        }
        s.finish(Duration::from_secs(60)).expect("acknowledged across the namespaces")
    })
    .join()
    .expect("sender");
    let (report, all) = c.join().expect("collector thread");
    assert_eq!((stats.events, stats.dropped), (20_000, 0));
    assert_eq!(events_of(&all, "ns-b"), sent);
    assert_eq!(report.sources[0].events, 20_000);
}
