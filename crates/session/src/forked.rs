//! The forked copies of a probed process: kerf takes the splices it removes from the process
//! out of every child the process forked (and their children) as well.
//!
//! A child gets a copy of the process's text as it was at the `fork`, live splices included,
//! and of kerf's heaps, so its probes keep running there (their data heap is shared memory,
//! so what they count or flag reaches kerf). Without this, a forked worker would keep every
//! probe kerf took out of its parent: under `kerf cover` it would never converge to its own
//! code, and after detach it would still run kerf's.
//!
//! A copy is a process that maps the target's first data heap at the same address from the
//! same memory file: only a `fork` gives that, as `exec` drops every mapping. kerf looks for
//! them among every process of /proc that started since it first looked, not only below the
//! target: the child of a copy whose parent ended was given to init (a daemon's double
//! `fork`), and is still one. Each process is looked at once (its maps), then known by pid and
//! start time. The splices taken out of the target are kept, in order, in groups of one
//! removal call each, until every copy known has had them; each copy has the number already
//! applied there. A copy found later was forked after they went out: a copy forked by another
//! copy just before kerf stopped that one to write it is found by looking again once the
//! writes are done (until a look finds nothing new), so none forked before the writes is
//! missed. Applying a splice, with every thread of the copy stopped:
//! 1. its bytes are read;
//! 2. where they are the splice's, the original bytes are written and read back;
//! 3. where they are the original already (the splice went out before the fork, or had not
//!    gone in), nothing is written; anything else is someone else's and is left alone.
//!
//! A splice needs no freeze check (a thread cannot be inside bytes 1.. of a jump or an int3;
//! the target's own removal writes the same way); a springboard goes back only where no PC or
//! stack word of the copy's threads lies in it. A group goes in one stop, as in the target:
//! the signal-mask guards of trap splices must all go out together. The copies' heaps stay
//! mapped: a thread of a copy may still be in a patch, or return into kerf's code through a
//! timer's return address, and nothing leads into them once the splices are out. A problem
//! with a copy never fails the target's operation: a copy that ended is forgotten, one kerf
//! cannot stop (another tracer holds it) is given up and counted.

use crate::instrument::{busy_values, Window};
use kerf_analysis::image::maps::parse_maps;
use kerf_arch::RemoteAddr;
use kerf_os::process::{self, ProcSys};
use kerf_os::ptrace::{TraceSys, Tracee, DEFAULT_STOP_TIMEOUT};
use kerf_os::TargetError;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::Arc;

/// Splices applied per stop of a copy at most (a group is never split): a copy forked late
/// finds most of them out already, one read of a window each.
const PER_STOP: usize = 64;
/// Looks for copies in one [`ForkedCopies::sync`] at most: the first, and one more after
/// each that wrote to a copy (which may have forked just before kerf stopped it).
const LOOKS: usize = 8;

/// One splice (or springboard) taken out of the target.
#[derive(Clone, Debug)]
struct Undo {
    addr: u64,
    /// The bytes while it was in, and the original ones.
    live: Vec<u8>,
    original: Vec<u8>,
    /// A springboard: only where no thread is in it.
    springboard: bool,
    /// Which removal call took it out (a group goes into a copy in one stop).
    group: usize,
}

/// What kerf did in the target's forked copies.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ForkStats {
    /// Copies found.
    pub copies: usize,
    /// Splices and springboards taken out of them.
    pub restored: usize,
    /// Sites whose bytes were neither kerf's nor the original (left alone).
    pub foreign: usize,
    /// Copies kerf could not stop or write, given up with their probes in.
    pub given_up: usize,
}

/// The target's forked copies and what to take out of them (see the module comment).
#[derive(Debug, Default)]
pub(crate) struct ForkedCopies {
    undo: Vec<Undo>,
    groups: usize,
    /// Copies: pid -> (start time, entries of `undo` applied there).
    copies: HashMap<i32, (u64, usize)>,
    /// Processes looked at that are not copies (they ran `exec`, or were never forked from
    /// the target) or were given up, by (pid, start time).
    others: HashSet<(i32, u64)>,
    /// Processes that started before this (clock ticks since boot) were looked at already;
    /// `None` before the first look, which looks at those that started since the target.
    since: Option<u64>,
    /// The target's first data heap: its address and the inode of its memory file.
    marker: Option<(u64, u64)>,
    pub stats: ForkStats,
}

impl ForkedCopies {
    /// Splices taken out of the target by one removal call: `(addr, bytes while in, original)`.
    pub fn taken_out<'a>(&mut self, splices: impl IntoIterator<Item = (u64, &'a [u8], &'a [u8])>) {
        self.push(splices, false);
    }

    /// Springboards put back in the target (after every splice).
    pub fn springboards_out<'a>(
        &mut self,
        boards: impl IntoIterator<Item = (u64, &'a [u8], &'a [u8])>,
    ) {
        self.push(boards, true);
    }

    fn push<'a>(&mut self, it: impl IntoIterator<Item = (u64, &'a [u8], &'a [u8])>, sb: bool) {
        let group = self.groups;
        self.groups += 1;
        self.undo.extend(it.into_iter().map(|(addr, live, original)| Undo {
            addr,
            live: live.to_vec(),
            original: original.to_vec(),
            springboard: sb,
            group,
        }));
    }

    /// Note the target's first data heap (`heap`, in process `pid`) as the copies' mark,
    /// once, while the target surely maps it: copies can then be found after it ended.
    pub fn mark(&mut self, pid: i32, heap: u64, proc: &dyn ProcSys) {
        if self.marker.is_none() {
            self.marker = mapped_inode(proc, pid, heap).map(|inode| (heap, inode));
        }
    }

    /// Copies known alive at the last look, by pid.
    pub fn known(&self) -> Vec<i32> {
        let mut pids: Vec<i32> = self.copies.keys().copied().collect();
        pids.sort_unstable();
        pids
    }

    /// Find the copies of process `pid` (whose first data heap is at `heap`, while it is
    /// mapped: the first call must come before the target's heaps go, unless [`Self::mark`]
    /// came first) and take out of each what it has not had taken out yet.
    pub fn sync(
        &mut self,
        pid: i32,
        heap: Option<u64>,
        sys: &Arc<dyn TraceSys>,
        proc: &dyn ProcSys,
    ) {
        if self.marker.is_none() {
            self.marker = heap.and_then(|at| Some((at, mapped_inode(proc, pid, at)?)));
        }
        let Some((at, inode)) = self.marker else {
            // No copy can be told without it.
            self.undo.clear();
            return;
        };
        if self.undo.is_empty() {
            return;
        }
        // Known copies that ended are forgotten (their pids may come back as others).
        self.copies.retain(|&c, &mut (start, _)| {
            process::start_time(proc, c) == Some(start)
                && matches!(process::state(proc, c), process::State::Live)
        });
        let mut done_here = HashSet::new();
        for _ in 0..LOOKS {
            let mut fresh = false;
            for (c, start) in self.candidates(pid, proc) {
                if !done_here.insert((c, start)) {
                    continue;
                }
                let applied = match self.copies.get(&c) {
                    Some(&(s, n)) if s == start => n,
                    _ if self.others.contains(&(c, start)) => continue,
                    _ if mapped_inode(proc, c, at) == Some(inode) => {
                        self.stats.copies += 1;
                        0
                    }
                    _ => {
                        self.others.insert((c, start));
                        continue;
                    }
                };
                fresh = true;
                match self.apply(c, applied, sys) {
                    Ok(()) => {
                        self.copies.insert(c, (start, self.undo.len()));
                    }
                    Err(e) => {
                        self.copies.remove(&c);
                        // One that ended meanwhile (a worker's normal exit) is no loss.
                        let ended = matches!(e, TargetError::NoSuchProcess { .. })
                            || !matches!(process::state(proc, c), process::State::Live);
                        if !ended {
                            self.others.insert((c, start));
                            self.stats.given_up += 1;
                        }
                    }
                }
            }
            // Nothing written, so nothing forked while kerf wrote: the look is complete.
            if !fresh {
                break;
            }
        }
        // What every copy has had applied is needed no more: a copy found later was forked
        // after this search, so after those splices went out of the target and of every
        // copy. So the list stays short, even when every block of libLLVM goes out.
        let done = self.copies.values().map(|&(_, n)| n).min().unwrap_or(self.undo.len());
        self.undo.drain(..done);
        self.copies.values_mut().for_each(|c| c.1 -= done);
    }

    /// The processes that may be copies of `pid`: every process of /proc that started since
    /// the last look (a tick before it: start times are in ticks), or since the target
    /// started at the first, and the copies known; not the target, not kerf. Each with its
    /// start time (read once: a pid reused since is another process).
    fn candidates(&mut self, pid: i32, proc: &dyn ProcSys) -> Vec<(i32, u64)> {
        let me = std::process::id() as i32;
        // At first: since the target or kerf started, whichever is later (a process forked
        // before kerf mapped its heaps maps none of them).
        let since = self.since.unwrap_or_else(|| {
            let (target, kerf) = (process::start_time(proc, pid), process::start_time(proc, me));
            target.max(kerf).unwrap_or(0)
        });
        self.since = process::uptime_ticks(proc).map(|t| t.saturating_sub(1)).or(Some(since));
        // Those that started before are never looked at again.
        self.others.retain(|&(_, start)| start >= since);
        let mut found: Vec<(i32, u64)> = process::pids(proc)
            .into_iter()
            .filter(|&c| c != pid && c != me)
            .filter_map(|c| {
                let start = process::start_time(proc, c)?;
                (self.copies.contains_key(&c) || start >= since).then_some((c, start))
            })
            .collect();
        found.sort_unstable();
        found
    }

    /// Entries `from..` of `undo` into copy `c`, whole groups per stop.
    fn apply(&mut self, c: i32, from: usize, sys: &Arc<dyn TraceSys>) -> Result<(), TargetError> {
        let mut i = from;
        while i < self.undo.len() {
            // Whole groups, up to PER_STOP entries (a larger group alone).
            let mut end = i;
            while end < self.undo.len() {
                let g = self.undo[end].group;
                let next = end + self.undo[end..].iter().take_while(|u| u.group == g).count();
                if end > i && next - i > PER_STOP {
                    break;
                }
                end = next;
            }
            let tr = Tracee::stop_all_with(c, sys.clone(), DEFAULT_STOP_TIMEOUT)?;
            let r = self.apply_stopped(&tr, i, end);
            tr.resume_detach()?;
            r?;
            i = end;
        }
        Ok(())
    }

    fn apply_stopped(&mut self, tr: &Tracee, from: usize, to: usize) -> Result<(), TargetError> {
        let todo = &self.undo[from..to];
        let window = Window::read(tr, todo.iter().map(|u| (u.addr, u.live.len())));
        let mut pcs: Option<Vec<u64>> = None;
        for u in todo {
            let cur = window.bytes(tr, u.addr, u.live.len())?;
            if cur == u.original {
                continue;
            }
            if cur != u.live {
                self.stats.foreign += 1;
                continue;
            }
            if u.springboard {
                let pcs = match &pcs {
                    Some(p) => p,
                    None => pcs.insert(busy_values(tr)?),
                };
                let end = u.addr + u.live.len() as u64;
                if pcs.iter().any(|&v| (u.addr..end).contains(&v)) {
                    continue;
                }
            }
            tr.write(RemoteAddr(u.addr), &u.original)?;
            let mut back = vec![0u8; u.original.len()];
            tr.read(RemoteAddr(u.addr), &mut back)?;
            if back != u.original {
                return Err(TargetError::Io {
                    pid: tr.pid(),
                    op: "write back",
                    path: Path::new("/proc").join(tr.pid().to_string()).join("mem"),
                    source: std::io::Error::other(format!(
                        "wrote {:02x?} at {:#x}, read back {back:02x?}",
                        u.original, u.addr
                    )),
                });
            }
            self.stats.restored += 1;
        }
        Ok(())
    }
}

/// Processes but `except` (and kerf) that map kerf's memory file `inode` at `at`: the copies of
/// the process that mapped it there, forked since (the JIT's cache, whose table address and
/// memory file a copy shares). With `since` (the start time of the process that mapped it,
/// [`process::start_time`]) only the maps of processes started since are read: a copy is
/// forked after its original started, and a scan of every process's maps took 7 ms of the end
/// of a `kerf jit` here (100 processes). For a caller that looks seldom; [`ForkedCopies`]
/// reads only those started since its last look.
pub(crate) fn sharing(
    proc: &dyn ProcSys,
    at: u64,
    inode: u64,
    except: &[i32],
    since: Option<u64>,
) -> Vec<i32> {
    let me = std::process::id() as i32;
    let young = |p: i32| since.is_none_or(|s| process::start_time(proc, p).is_some_and(|t| t >= s));
    let mut out: Vec<i32> = process::pids(proc)
        .into_iter()
        .filter(|p| *p != me && !except.contains(p))
        .filter(|&p| young(p) && mapped_inode(proc, p, at) == Some(inode))
        .collect();
    out.sort_unstable();
    out
}

/// The inode of the memory file process `pid` maps at `at` (kerf's data heaps are memfds),
/// if it maps one there.
pub(crate) fn mapped_inode(proc: &dyn ProcSys, pid: i32, at: u64) -> Option<u64> {
    let text = proc.read_to_string(&Path::new("/proc").join(pid.to_string()).join("maps")).ok()?;
    let maps = parse_maps(&text).ok()?;
    let m = maps.into_iter().find(|m| m.start.0 == at && !m.private)?;
    m.path.as_deref().is_some_and(|p| p.contains("memfd:kerf-")).then_some(m.inode)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_os::ptrace::fake::{regs_at, Fake, PID};
    use std::collections::HashMap;
    use std::io;
    use std::path::PathBuf;

    const TARGET: i32 = 7;
    const HEAP: u64 = 0x7f00_0000_0000;
    const TEXT: u64 = 0x40_0000;
    const JUMP: [u8; 5] = [0xe9, 0x11, 0x22, 0x33, 0x44];
    const ORIGINAL: [u8; 5] = [0x55, 0x48, 0x89, 0xe5, 0x90];
    const PAD: [u8; 5] = [0xcc; 5];

    /// /proc as a test sets it up: files by path, directories listed from them.
    #[derive(Default)]
    struct Proc(HashMap<PathBuf, String>);

    impl Proc {
        fn file(mut self, path: &str, text: &str) -> Proc {
            self.0.insert(path.into(), text.into());
            self
        }
    }

    impl ProcSys for Proc {
        fn read_to_string(&self, path: &Path) -> io::Result<String> {
            self.0.get(path).cloned().ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
        fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
            self.read_to_string(path).map(String::into_bytes)
        }
        fn exists(&self, path: &Path) -> bool {
            self.0.keys().any(|k| k.starts_with(path))
        }
        fn read_link(&self, _: &Path) -> io::Result<PathBuf> {
            Err(io::Error::from(io::ErrorKind::NotFound))
        }
        fn file_id(&self, _: &Path) -> io::Result<(u64, u64)> {
            Err(io::Error::from(io::ErrorKind::NotFound))
        }
        fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
            let mut names: Vec<String> = (self.0.keys())
                .filter_map(|k| k.strip_prefix(path).ok()?.components().next())
                .filter_map(|c| Some(c.as_os_str().to_str()?.to_string()))
                .collect();
            names.sort();
            names.dedup();
            Ok(names)
        }
    }

    fn heap_line(inode: u64) -> String {
        format!("{HEAP:x}-{:x} rw-s 00000000 00:01 {inode} /memfd:kerf-9 (deleted)\n", HEAP + 4096)
    }

    /// Target 7 (started at tick 5000) and the fake's process (PID, started at 5555), which
    /// maps the heap from memory file `inode` (the target's is 42); no process lists a child:
    /// a copy need not be below the target (its parent may have ended).
    fn proc_with_copy(inode: u64) -> Proc {
        // Field 22 of stat, the start time.
        let stat = |pid: i32, ppid: i32, start: u64| {
            format!("{pid} (fake) S {ppid} 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 {start}\n")
        };
        Proc::default()
            .file("/proc/uptime", "60.00 100.00\n")
            .file(&format!("/proc/{TARGET}/stat"), &stat(TARGET, 1, 5000))
            .file(&format!("/proc/{TARGET}/maps"), &heap_line(42))
            .file(&format!("/proc/{PID}/stat"), &stat(PID, 1, 5555))
            .file(&format!("/proc/{PID}/maps"), &heap_line(inode))
    }

    /// The fake's process holds, at TEXT: a splice (+0), bytes already original (+0x10),
    /// bytes of someone else's (+0x20), and a springboard its thread stands in (+0x30).
    fn copy() -> Arc<Fake> {
        let fake = Arc::new(Fake::new(&[PID]));
        {
            let mut st = fake.state();
            let mut text = vec![0x90u8; 0x100];
            text[..5].copy_from_slice(&JUMP);
            text[0x10..0x15].copy_from_slice(&ORIGINAL);
            text[0x20..0x25].copy_from_slice(&[0xe8, 1, 2, 3, 4]);
            text[0x30..0x35].copy_from_slice(&JUMP);
            st.mem.push((TEXT, text));
            st.threads.get_mut(&PID).unwrap().regs = regs_at(TEXT + 0x30);
        }
        fake
    }

    fn text(fake: &Fake, off: u64) -> Vec<u8> {
        let st = fake.state();
        let (base, bytes) = st.mem.iter().find(|(b, _)| *b == TEXT).unwrap();
        let at = (TEXT + off - base) as usize;
        bytes[at..at + 5].to_vec()
    }

    #[test]
    fn a_copy_gets_kerfs_bytes_taken_out_and_nothing_else() {
        let fake = copy();
        let sys: Arc<dyn TraceSys> = fake.clone();
        let mut forks = ForkedCopies::default();
        forks.taken_out([
            (TEXT, &JUMP[..], &ORIGINAL[..]),
            (TEXT + 0x10, &JUMP[..], &ORIGINAL[..]),
            (TEXT + 0x20, &JUMP[..], &ORIGINAL[..]),
        ]);
        forks.springboards_out([(TEXT + 0x30, &JUMP[..], &PAD[..])]);
        forks.sync(TARGET, Some(HEAP), &sys, &proc_with_copy(42));
        assert_eq!(text(&fake, 0), ORIGINAL, "kerf's jump goes");
        assert_eq!(text(&fake, 0x10), ORIGINAL, "already original");
        assert_eq!(text(&fake, 0x20), [0xe8, 1, 2, 3, 4], "someone else's bytes stay");
        assert_eq!(text(&fake, 0x30), JUMP, "a springboard a thread stands in stays");
        let stats = ForkStats { copies: 1, restored: 1, foreign: 1, given_up: 0 };
        assert_eq!(forks.stats, stats);
        assert!(forks.undo.is_empty(), "every copy has had them: {:?}", forks.undo);
        // Nothing new: nothing written again.
        let writes = fake.state().writes.len();
        forks.sync(TARGET, Some(HEAP), &sys, &proc_with_copy(42));
        assert_eq!(fake.state().writes.len(), writes);
        assert_eq!(forks.stats, stats);
        // A later removal: the known copy gets it, and only it.
        {
            let mut st = fake.state();
            let (_, bytes) = st.mem.iter_mut().find(|(b, _)| *b == TEXT).unwrap();
            bytes[0x40..0x45].copy_from_slice(&JUMP);
        }
        forks.taken_out([(TEXT + 0x40, &JUMP[..], &ORIGINAL[..])]);
        forks.sync(TARGET, Some(HEAP), &sys, &proc_with_copy(42));
        assert_eq!(text(&fake, 0x40), ORIGINAL);
        assert_eq!(fake.state().writes.len(), writes + 1);
        assert_eq!(forks.stats, ForkStats { restored: 2, ..stats });
    }

    #[test]
    fn a_process_that_started_before_the_target_is_not_looked_at() {
        let fake = copy();
        let sys: Arc<dyn TraceSys> = fake.clone();
        let mut forks = ForkedCopies::default();
        forks.taken_out([(TEXT, &JUMP[..], &ORIGINAL[..])]);
        let stat = format!("{PID} (fake) S 1 0 0 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4000\n");
        let proc = proc_with_copy(42).file(&format!("/proc/{PID}/stat"), &stat);
        forks.sync(TARGET, Some(HEAP), &sys, &proc);
        assert_eq!(text(&fake, 0), JUMP, "older than the target: no copy of it");
        assert_eq!(forks.stats, ForkStats::default());
    }

    #[test]
    fn a_process_that_maps_another_memory_file_there_is_no_copy() {
        let fake = copy();
        let sys: Arc<dyn TraceSys> = fake.clone();
        let mut forks = ForkedCopies::default();
        forks.taken_out([(TEXT, &JUMP[..], &ORIGINAL[..])]);
        forks.sync(TARGET, Some(HEAP), &sys, &proc_with_copy(43));
        assert_eq!(text(&fake, 0), JUMP, "not a copy: untouched");
        assert_eq!(forks.stats, ForkStats::default());
        assert!(fake.state().writes.is_empty());
    }

    /// The JIT's look for processes sharing its cache: the memory file at that address, not
    /// another one there, nor that file elsewhere; the process told to leave out is left out.
    #[test]
    fn sharing_is_the_same_memory_file_at_the_same_address() {
        let elsewhere = format!(
            "{:x}-{:x} rw-s 00000000 00:01 42 /memfd:kerf-9 (deleted)\n",
            HEAP + 8192,
            HEAP + 12288
        );
        let proc = proc_with_copy(42)
            .file("/proc/20/maps", &heap_line(43))
            .file("/proc/21/maps", &elsewhere)
            .file("/proc/22/maps", &heap_line(42));
        assert_eq!(sharing(&proc, HEAP, 42, &[TARGET], None), [22, PID]);
        assert_eq!(sharing(&proc, HEAP, 42, &[], None), [TARGET, 22, PID]);
        assert_eq!(sharing(&proc, HEAP, 43, &[], None), [20]);
        assert!(sharing(&proc, HEAP + 4096, 42, &[], None).is_empty());
        // Since the target started (5000): PID (5555) is looked at, 22 (no stat: its start
        // unknown) is not; nor is anything from before.
        assert_eq!(sharing(&proc, HEAP, 42, &[TARGET], Some(5000)), [PID]);
        assert!(sharing(&proc, HEAP, 42, &[TARGET], Some(6000)).is_empty());
    }
}
