//! Remote collection (logdev's): a [`Sender`] in the tracing kerf streams its records over TCP
//! to a [`Collector`] (`kerf collect --listen ADDR -o FILE`), which writes every source it hears
//! from into one raw trace.
//!
//! Protocol, both ways as frames (a u32 little-endian length, then the body):
//! 1. The sender opens with `KERFCOL\0` and a u16 version, then a hello frame: its session id
//!    (random, the same across reconnects), its machine's name, and its sources (raw source
//!    records, with their probe and stream tables).
//! 2. The collector answers with a welcome frame: the last sequence number it holds from that
//!    session (0 for a new one). The sender resends everything after it.
//! 3. Data frames: a sequence number (1, 2, ... per session) and a raw record. The collector
//!    writes a record once, in sequence order (it skips what it has, refuses a gap), and acks
//!    the last sequence number it wrote whenever it has read all that arrived.
//! 4. The sender keeps every record until it is acked, in a bounded queue: if the collector is
//!    gone, it reconnects and resends; if the queue is full, an event is dropped and counted
//!    per stream, and once there is room again a loss record (origin `sender`) goes out before
//!    the next record, so the collector reports the very losses the sender counted.
//! 5. The end record closes a session; the sender waits for its ack.

use super::event::{Loss, LossOrigin, Record, Source, Tables};
use super::raw::{self, RawError};
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"KERFCOL\0";
const VERSION: u16 = 1;

/// Why collection failed.
#[derive(Debug)]
pub enum CollectError {
    /// `ADDR` did not resolve to an address.
    Address { addr: String, source: io::Error },
    /// Listening on `addr` failed.
    Listen { addr: String, source: io::Error },
    /// Writing the collected trace failed.
    Write(RawError),
    /// `finish` waited `waited` and the collector had not acked `unacked` records.
    NotDelivered { unacked: u64, waited: Duration, last_error: Option<String> },
}

impl fmt::Display for CollectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CollectError::Address { addr, source } => write!(f, "{addr}: {source}"),
            CollectError::Listen { addr, source } => write!(f, "listening on {addr}: {source}"),
            CollectError::Write(e) => write!(f, "writing the collected trace: {e}"),
            CollectError::NotDelivered { unacked, waited, last_error } => {
                write!(f, "{unacked} records not acknowledged by the collector after {waited:?}")?;
                if let Some(e) = last_error {
                    write!(f, " (last error: {e})")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for CollectError {}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicked peer thread leaves consistent data behind (every update is one step).
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn frame(body: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
}

/// What a sender does when its queue is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backpressure {
    /// Drop the event and count it (the tracer must never wait on the network).
    Drop,
    /// Wait for room (replaying a file, where nothing need be lost).
    Block,
}

/// A sender's counts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SenderStats {
    /// Events handed to [`Sender::send`].
    pub events: u64,
    /// Of those, dropped on a full queue.
    pub dropped: u64,
    /// Records (events, losses, tables...) the collector acknowledged.
    pub acked: u64,
    /// Connections made (1 without reconnects).
    pub connections: u64,
}

struct Queue {
    /// Records not yet acked, in sequence order: (sequence number, frame).
    frames: VecDeque<(u64, Vec<u8>)>,
    next_seq: u64,
    acked: u64,
    /// Dropped events not yet reported, one loss per (source, stream).
    pending: Vec<Loss>,
    stats: SenderStats,
    /// `finish` was called: the end record is queued.
    finished: bool,
    /// Give up (finish timed out).
    abort: bool,
    last_error: Option<String>,
}

struct SenderShared {
    q: Mutex<Queue>,
    cv: Condvar,
    cap: usize,
}

impl SenderShared {
    fn push(&self, q: &mut Queue, r: &Record) {
        let mut body = Vec::with_capacity(64);
        raw::put_var(&mut body, q.next_seq);
        raw::encode(r, &mut body);
        let mut f = Vec::with_capacity(body.len() + 4);
        frame(&body, &mut f);
        q.frames.push_back((q.next_seq, f));
        q.next_seq += 1;
        self.cv.notify_all();
    }

    /// Queues the loss records of dropped events while there is room.
    fn flush_losses(&self, q: &mut Queue) {
        while q.frames.len() < self.cap && !q.pending.is_empty() {
            let loss = q.pending.remove(0);
            self.push(q, &Record::Loss(loss));
        }
    }
}

/// Streams records to a collector from a thread of its own (see the module's protocol).
pub struct Sender {
    shared: Arc<SenderShared>,
    policy: Backpressure,
    thread: Option<JoinHandle<()>>,
}

impl Sender {
    /// Starts sending to `addr` as `machine`, with these sources (their ids are the ones later
    /// records use). `queue` is how many records may wait for the collector's ack.
    pub fn new(
        addr: &str,
        machine: &str,
        sources: Vec<Source>,
        queue: usize,
        policy: Backpressure,
    ) -> Result<Sender, CollectError> {
        let addrs: Vec<SocketAddr> = addr
            .to_socket_addrs()
            .map_err(|source| CollectError::Address { addr: addr.into(), source })?
            .collect();
        if addrs.is_empty() {
            return Err(CollectError::Address {
                addr: addr.into(),
                source: io::Error::new(io::ErrorKind::NotFound, "no address"),
            });
        }
        let session = session_id();
        let mut hello = Vec::new();
        hello.extend_from_slice(&session.to_le_bytes());
        raw::put_var(&mut hello, machine.len() as u64);
        hello.extend_from_slice(machine.as_bytes());
        raw::put_var(&mut hello, sources.len() as u64);
        for s in &sources {
            let mut b = Vec::new();
            raw::encode(&Record::Source(s.clone()), &mut b);
            raw::put_var(&mut hello, b.len() as u64);
            hello.extend_from_slice(&b);
        }
        let shared = Arc::new(SenderShared {
            q: Mutex::new(Queue {
                frames: VecDeque::new(),
                next_seq: 1,
                acked: 0,
                pending: Vec::new(),
                stats: SenderStats::default(),
                finished: false,
                abort: false,
                last_error: None,
            }),
            cv: Condvar::new(),
            cap: queue.max(1),
        });
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("kerf-sender".into())
            .spawn(move || net_loop(sh, &addrs, &hello))
            .map_err(|source| CollectError::Address { addr: addr.into(), source })?;
        Ok(Sender { shared, policy, thread: Some(thread) })
    }

    /// Queues a record. An event meets a full queue by the policy; other records always wait
    /// for room (they are rare and must not be lost).
    pub fn send(&self, r: &Record) {
        let sh = &*self.shared;
        let mut q = lock(&sh.q);
        let event = match r {
            Record::Event(e) => {
                q.stats.events += 1;
                Some(e)
            }
            _ => None,
        };
        // Losses go out before the record that follows them.
        loop {
            sh.flush_losses(&mut q);
            if q.pending.is_empty() && q.frames.len() < sh.cap {
                break;
            }
            if let (Some(e), Backpressure::Drop) = (event, self.policy) {
                q.stats.dropped += 1;
                match q.pending.iter_mut().find(|l| (l.source, l.stream) == (e.source, e.stream)) {
                    Some(l) => {
                        l.count += 1;
                        l.to_ns = e.time_ns;
                    }
                    None => q.pending.push(Loss {
                        source: e.source,
                        stream: e.stream,
                        count: 1,
                        from_ns: e.time_ns,
                        to_ns: e.time_ns,
                        origin: LossOrigin::Sender,
                    }),
                }
                return;
            }
            q = sh.cv.wait(q).unwrap_or_else(|p| p.into_inner());
        }
        sh.push(&mut q, r);
    }

    /// The counts so far.
    pub fn stats(&self) -> SenderStats {
        lock(&self.shared.q).stats.clone()
    }

    /// Reports the losses still pending, sends the end record and waits up to `wait` for the
    /// collector to acknowledge everything.
    pub fn finish(mut self, wait: Duration) -> Result<SenderStats, CollectError> {
        let sh = self.shared.clone();
        let deadline = Instant::now() + wait;
        let mut q = lock(&sh.q);
        loop {
            sh.flush_losses(&mut q);
            if q.pending.is_empty() && q.frames.len() < sh.cap {
                break;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            q = sh.cv.wait_timeout(q, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        if q.pending.is_empty() && q.frames.len() < sh.cap {
            sh.push(&mut q, &Record::End);
        }
        q.finished = true;
        sh.cv.notify_all();
        loop {
            let delivered = q.frames.is_empty() && q.pending.is_empty();
            let left = deadline.saturating_duration_since(Instant::now());
            if delivered || left.is_zero() {
                break;
            }
            q = sh.cv.wait_timeout(q, left).unwrap_or_else(|p| p.into_inner()).0;
        }
        let result = if q.frames.is_empty() && q.pending.is_empty() {
            Ok(q.stats.clone())
        } else {
            Err(CollectError::NotDelivered {
                unacked: q.frames.len() as u64,
                waited: wait,
                last_error: q.last_error.clone(),
            })
        };
        q.abort = true;
        sh.cv.notify_all();
        drop(q);
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
        result
    }
}

impl Drop for Sender {
    fn drop(&mut self) {
        lock(&self.shared.q).abort = true;
        self.shared.cv.notify_all();
    }
}

/// A session id: different for every sender (time, pid and a count of this process's senders
/// mixed).
fn session_id() -> u64 {
    static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let made = MADE.fetch_add(1, Ordering::Relaxed);
    let mut h = t ^ (u64::from(std::process::id()) << 32) ^ made.rotate_right(16);
    // splitmix64's finaliser spreads the bits.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (h ^ (h >> 31)).max(1)
}

/// The sender's network thread: connect, hello, resend what is unacked, stream, and on any
/// error start over, until the session is acked to its end or abandoned.
fn net_loop(sh: Arc<SenderShared>, addrs: &[SocketAddr], hello: &[u8]) {
    let mut backoff = Duration::from_millis(20);
    loop {
        {
            let q = lock(&sh.q);
            if q.abort || (q.finished && q.frames.is_empty()) {
                return;
            }
        }
        match connection(&sh, addrs, hello) {
            Ok(()) => backoff = Duration::from_millis(20),
            Err(e) => {
                let mut q = lock(&sh.q);
                q.last_error = Some(e.to_string());
                if q.abort {
                    return;
                }
                // Wait before reconnecting (woken early only by an abort).
                let _ = sh.cv.wait_timeout(q, backoff);
                backoff = (backoff * 2).min(Duration::from_millis(500));
            }
        }
    }
}

/// One connection's life; returns when the session is done, or with the error that broke it.
fn connection(sh: &Arc<SenderShared>, addrs: &[SocketAddr], hello: &[u8]) -> io::Result<()> {
    let mut last = None;
    let mut connected = None;
    for a in addrs {
        // Bounded: an unreachable collector is retried, not waited on for the kernel's minutes.
        match TcpStream::connect_timeout(a, Duration::from_secs(3)) {
            Ok(s) => {
                connected = Some(s);
                break;
            }
            Err(e) => last = Some(e),
        }
    }
    let stream = match connected {
        Some(s) => s,
        None => return Err(last.unwrap_or_else(|| io::Error::other("no address"))),
    };
    stream.set_nodelay(true)?;
    let mut out = BufWriter::with_capacity(64 << 10, stream.try_clone()?);
    out.write_all(MAGIC)?;
    out.write_all(&VERSION.to_le_bytes())?;
    let mut f = Vec::new();
    frame(hello, &mut f);
    out.write_all(&f)?;
    out.flush()?;
    let mut input = BufReader::new(stream.try_clone()?);
    let mut buf = Vec::new();
    if !raw::read_frame(&mut input, &mut buf)? {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "collector closed before its welcome",
        ));
    }
    let (held, _) =
        raw::split_var(&buf).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let mut next = {
        let mut q = lock(&sh.q);
        q.stats.connections += 1;
        ack(sh, &mut q, held);
        held + 1
    };
    // Acks come on a thread of their own, so that sending never waits for them.
    let broken = Arc::new(AtomicBool::new(false));
    let acks = {
        let broken = broken.clone();
        let sh_ptr = sh.clone();
        let stream = stream.try_clone()?;
        std::thread::spawn(move || {
            let mut input = input;
            let mut buf = Vec::new();
            while let Ok(true) = raw::read_frame(&mut input, &mut buf) {
                let Ok((seq, _)) = raw::split_var(&buf) else { break };
                let mut q = lock(&sh_ptr.q);
                ack(&sh_ptr, &mut q, seq);
            }
            broken.store(true, Ordering::SeqCst);
            stream.shutdown(Shutdown::Both).ok();
            sh_ptr.cv.notify_all();
        })
    };
    let result = (|| -> io::Result<()> {
        let mut batch = Vec::with_capacity(64 << 10);
        loop {
            {
                let mut q = lock(&sh.q);
                loop {
                    if q.abort || broken.load(Ordering::SeqCst) {
                        return Err(io::Error::new(
                            io::ErrorKind::ConnectionAborted,
                            "connection lost",
                        ));
                    }
                    if q.finished && q.frames.is_empty() {
                        return Ok(());
                    }
                    let front = q.frames.front().map_or(q.next_seq, |f| f.0);
                    if next < q.next_seq {
                        let from = (next.max(front) - front) as usize;
                        let to = q.frames.len().min(from + 4096);
                        for (seq, f) in q.frames.range(from..to) {
                            batch.extend_from_slice(f);
                            next = seq + 1;
                        }
                        break;
                    }
                    q = sh
                        .cv
                        .wait_timeout(q, Duration::from_millis(100))
                        .unwrap_or_else(|p| p.into_inner())
                        .0;
                }
            }
            out.write_all(&batch)?;
            out.flush()?;
            batch.clear();
        }
    })();
    stream.shutdown(Shutdown::Both).ok();
    acks.join().ok();
    result
}

/// Forgets acked records (sequence numbers up to `seq`).
fn ack(sh: &SenderShared, q: &mut Queue, seq: u64) {
    while q.frames.front().is_some_and(|f| f.0 <= seq) {
        q.frames.pop_front();
        q.stats.acked += 1;
    }
    q.acked = q.acked.max(seq);
    sh.cv.notify_all();
}

/// What the collector holds of one sender's session.
#[derive(Debug)]
struct Session {
    /// The last sequence number written.
    last_seq: u64,
    /// The sender's source ids to the collected trace's.
    ids: HashMap<u16, u16>,
    /// The sender's tables, to check its records against.
    tables: Tables,
    ended: bool,
    connections: u64,
}

/// Per-source counts, as the collector prints them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceCount {
    /// The id in the collected trace.
    pub id: u16,
    pub machine: String,
    pub name: String,
    pub events: u64,
    /// Events the sender dropped on its full queue (its loss records).
    pub lost_sender: u64,
    /// Events the target's rings dropped (the tracer's loss records).
    pub lost_ring: u64,
    /// Connections the source's sender made (more than 1: it reconnected).
    pub connections: u64,
    /// The sender sent its end record.
    pub ended: bool,
}

struct CollectorState {
    /// The collected trace (taken when it is finished).
    writer: Option<raw::Writer<Box<dyn Write + Send>>>,
    sessions: HashMap<u64, Session>,
    counts: Vec<SourceCount>,
    /// Open connections, to shut down at the end (or in tests, to break them).
    conns: Vec<TcpStream>,
    errors: Vec<String>,
    write_error: Option<RawError>,
}

struct CollectorShared {
    state: Mutex<CollectorState>,
    paused: AtomicBool,
}

/// A handle on a running collector from another thread: counts, and the test knobs.
#[derive(Clone)]
pub struct CollectorHandle(Arc<CollectorShared>);

impl CollectorHandle {
    /// Per-source counts so far.
    pub fn counts(&self) -> Vec<SourceCount> {
        lock(&self.0.state).counts.clone()
    }

    /// Stops (or resumes) reading from senders: their queues fill, as behind a slow network.
    pub fn pause(&self, paused: bool) {
        self.0.paused.store(paused, Ordering::SeqCst);
    }

    /// Breaks every open connection (the senders reconnect).
    pub fn drop_connections(&self) {
        for c in lock(&self.0.state).conns.drain(..) {
            c.shutdown(Shutdown::Both).ok();
        }
    }
}

/// The end of a collection: per-source counts and what went wrong on connections.
#[derive(Debug)]
pub struct CollectReport {
    pub sources: Vec<SourceCount>,
    /// Connections refused or broken by malformed data (a reconnect is not one).
    pub errors: Vec<String>,
}

/// Receives senders' records and writes them into one raw trace.
pub struct Collector {
    listener: TcpListener,
    shared: Arc<CollectorShared>,
}

impl Collector {
    /// Listens on `addr`; the trace goes to `out` (buffer it).
    pub fn bind(addr: &str, out: Box<dyn Write + Send>) -> Result<Collector, CollectError> {
        let listener = TcpListener::bind(addr)
            .map_err(|source| CollectError::Listen { addr: addr.into(), source })?;
        listener
            .set_nonblocking(true)
            .map_err(|source| CollectError::Listen { addr: addr.into(), source })?;
        let writer = raw::Writer::new(out).map_err(CollectError::Write)?;
        Ok(Collector {
            listener,
            shared: Arc::new(CollectorShared {
                state: Mutex::new(CollectorState {
                    writer: Some(writer),
                    sessions: HashMap::new(),
                    counts: Vec::new(),
                    conns: Vec::new(),
                    errors: Vec::new(),
                    write_error: None,
                }),
                paused: AtomicBool::new(false),
            }),
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    pub fn handle(&self) -> CollectorHandle {
        CollectorHandle(self.shared.clone())
    }

    /// Collects until `stop` is raised or, with `senders`, until that many sessions have ended;
    /// then closes the connections, finishes the trace and reports.
    pub fn run(
        self,
        stop: &AtomicBool,
        senders: Option<usize>,
    ) -> Result<CollectReport, CollectError> {
        let mut threads = Vec::new();
        loop {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            if let Some(n) = senders {
                let st = lock(&self.shared.state);
                if st.sessions.values().filter(|s| s.ended).count() >= n {
                    break;
                }
            }
            match self.listener.accept() {
                Ok((conn, peer)) => {
                    let sh = self.shared.clone();
                    if conn.set_nonblocking(false).is_err() {
                        continue;
                    }
                    if let Ok(c) = conn.try_clone() {
                        lock(&sh.state).conns.push(c);
                    }
                    threads.push(std::thread::spawn(move || {
                        if let Err(e) = serve(&sh, conn) {
                            lock(&sh.state).errors.push(format!("{peer}: {e}"));
                        }
                    }));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(source) => {
                    return Err(CollectError::Listen {
                        addr: format!("{:?}", self.local_addr().ok()),
                        source,
                    })
                }
            }
        }
        self.shared.paused.store(false, Ordering::SeqCst);
        self.handle().drop_connections();
        for t in threads {
            t.join().ok();
        }
        // Handles may outlive the run: the trace is finished through the lock.
        let mut st = lock(&self.shared.state);
        if let Some(e) = st.write_error.take() {
            return Err(CollectError::Write(e));
        }
        let writer = st.writer.take().expect("finished once");
        writer.finish().map_err(CollectError::Write)?;
        Ok(CollectReport { sources: st.counts.clone(), errors: st.errors.clone() })
    }
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

/// One connection: the hello, the welcome, then records until the end or a broken connection.
fn serve(sh: &CollectorShared, conn: TcpStream) -> io::Result<()> {
    conn.set_nodelay(true)?;
    let mut input = BufReader::with_capacity(256 << 10, conn.try_clone()?);
    let mut out = conn;
    let mut pre = [0u8; 10];
    input.read_exact(&mut pre)?;
    if &pre[..8] != MAGIC {
        return Err(bad("not a kerf sender"));
    }
    let version = u16::from_le_bytes([pre[8], pre[9]]);
    if version != VERSION {
        return Err(bad(format!("sender speaks version {version}, this collector {VERSION}")));
    }
    let mut buf = Vec::new();
    if !raw::read_frame(&mut input, &mut buf)? {
        return Err(bad("closed before its hello"));
    }
    let session = hello(sh, &buf).map_err(bad)?;
    let held = lock(&sh.state).sessions[&session].last_seq;
    let mut welcome = Vec::new();
    raw::put_var(&mut welcome, held);
    let mut f = Vec::new();
    frame(&welcome, &mut f);
    out.write_all(&f)?;
    let mut unacked = 0u32;
    loop {
        while sh.paused.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(5));
        }
        if !raw::read_frame(&mut input, &mut buf)? {
            return Ok(());
        }
        let (seq, body) = raw::split_var(&buf).map_err(bad)?;
        let ended = take(sh, session, seq, body).map_err(bad)?;
        unacked += 1;
        // Ack once all that arrived is written (and now and then in a long burst), so that
        // the sender's queue drains without an ack per record.
        if ended || input.buffer().is_empty() || unacked >= 4096 {
            let mut a = Vec::new();
            raw::put_var(&mut a, lock(&sh.state).sessions[&session].last_seq);
            f.clear();
            frame(&a, &mut f);
            out.write_all(&f)?;
            unacked = 0;
        }
        if ended {
            return Ok(());
        }
    }
}

/// Reads a hello: a new session's sources get ids in the collected trace and are written; a
/// known session (a reconnect) keeps its own.
fn hello(sh: &CollectorShared, b: &[u8]) -> Result<u64, String> {
    if b.len() < 8 {
        return Err("hello too short".into());
    }
    let session = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
    let (machine, mut rest) = raw::split_bytes(&b[8..])?;
    let machine = String::from_utf8(machine.to_vec()).map_err(|_| "machine name not UTF-8")?;
    let (n, r) = raw::split_var(rest)?;
    rest = r;
    let mut sources = Vec::new();
    for _ in 0..n {
        let (body, r) = raw::split_bytes(rest)?;
        rest = r;
        match raw::decode(body)? {
            Record::Source(s) => sources.push(s),
            _ => return Err("hello holds a record that is not a source".into()),
        }
    }
    let mut st = lock(&sh.state);
    if let Some(s) = st.sessions.get_mut(&session) {
        s.connections += 1;
        let ids: Vec<u16> = s.ids.values().copied().collect();
        for c in st.counts.iter_mut().filter(|c| ids.contains(&c.id)) {
            c.connections += 1;
        }
        return Ok(session);
    }
    let mut tables = Tables::default();
    let mut ids = HashMap::new();
    for s in sources {
        let r = Record::Source(s.clone());
        raw::check(&tables, &r)?;
        tables.note(&r);
        let id = u16::try_from(st.counts.len()).map_err(|_| "more than 65536 sources")?;
        ids.insert(s.id, id);
        let mut global = s.clone();
        global.id = id;
        if global.machine.is_empty() {
            global.machine = machine.clone();
        }
        st.counts.push(SourceCount {
            id,
            machine: global.machine.clone(),
            name: global.name.clone(),
            connections: 1,
            ..SourceCount::default()
        });
        if let Some(Err(e)) = st.writer.as_mut().map(|w| w.write(&Record::Source(global))) {
            st.write_error.get_or_insert(e);
        }
    }
    st.sessions.insert(session, Session { last_seq: 0, ids, tables, ended: false, connections: 1 });
    Ok(session)
}

/// Takes one data frame: writes its record under the collected trace's source id unless it is
/// a resent one; says whether it ended the session.
fn take(sh: &CollectorShared, session: u64, seq: u64, body: &[u8]) -> Result<bool, String> {
    let r = raw::decode(body)?;
    let mut guard = lock(&sh.state);
    let st = &mut *guard;
    let s = st.sessions.get_mut(&session).expect("hello made it");
    if seq <= s.last_seq {
        return Ok(false);
    }
    if seq != s.last_seq + 1 {
        return Err(format!("record {seq} after {}: records missing", s.last_seq));
    }
    if let Record::Source(_) = r {
        return Err("a source after the hello".into());
    }
    raw::check(&s.tables, &r)?;
    s.tables.note(&r);
    s.last_seq = seq;
    if r == Record::End {
        s.ended = true;
        for c in st.counts.iter_mut().filter(|c| s.ids.values().any(|&i| i == c.id)) {
            c.ended = true;
        }
        return Ok(true);
    }
    let id = s.ids[&r.source().expect("not the end")];
    let c = &mut st.counts[usize::from(id)];
    match &r {
        Record::Event(_) => c.events += 1,
        Record::Loss(l) if l.origin == LossOrigin::Sender => c.lost_sender += l.count,
        Record::Loss(l) => c.lost_ring += l.count,
        _ => {}
    }
    if let Some(Err(e)) = st.writer.as_mut().map(|w| w.write(&r.with_source(id))) {
        st.write_error.get_or_insert(e);
        return Err("the collected trace cannot be written".into());
    }
    Ok(false)
}
