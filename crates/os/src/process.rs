//! A live process, seen read-only through /proc: its memory map, the files of its modules,
//! its names (`exe`, `argv[0]`, `comm`), its start time and state. Every read goes through
//! [`ProcSys`], so tests answer them with a fake /proc; the free functions serve callers that
//! look at a process without opening it (its claim, its end). Stopping, writing and injecting
//! are [`crate::ptrace`]'s.

use crate::error::TargetError;
pub use crate::sys::{ProcSys, RealSys};
use kerf_analysis::image::maps::{parse_maps, Mapping};
use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

pub struct Process {
    pid: i32,
    sys: Box<dyn ProcSys>,
}

impl fmt::Debug for Process {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Process").field("pid", &self.pid).finish_non_exhaustive()
    }
}

impl Process {
    /// The process `pid` of this machine.
    pub fn open(pid: i32) -> Result<Process, TargetError> {
        Process::open_with(pid, Box::new(RealSys))
    }

    /// The process `pid` as seen through `sys` (tests pass a fake).
    pub fn open_with(pid: i32, sys: Box<dyn ProcSys>) -> Result<Process, TargetError> {
        // PIDs are positive; /proc/0 and /proc/-1 do not name processes.
        if pid <= 0 || !sys.exists(&proc_dir(pid)) {
            return Err(TargetError::NoSuchProcess { pid });
        }
        match state(&*sys, pid) {
            State::Gone => Err(TargetError::NoSuchProcess { pid }),
            State::KernelThread => Err(TargetError::KernelThread { pid }),
            State::Zombie => Err(TargetError::Zombie { pid }),
            State::Live | State::Unknown => Ok(Process { pid, sys }),
        }
    }

    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The mappings of /proc/PID/maps, through kerf's one maps parser.
    pub fn maps(&self) -> Result<Vec<Mapping>, TargetError> {
        let path = proc_dir(self.pid).join("maps");
        let text = self.sys.read_to_string(&path).map_err(|e| self.io_error("read", path, e))?;
        parse_maps(&text).map_err(|source| TargetError::Maps { pid: self.pid, source })
    }

    /// The program the process runs (see [`exe`]).
    pub fn exe(&self) -> Option<String> {
        exe(&*self.sys, self.pid)
    }

    /// Its `argv[0]` (see [`argv0`]).
    pub fn argv0(&self) -> Option<String> {
        argv0(&*self.sys, self.pid)
    }

    /// Its command name (see [`comm`]).
    pub fn comm(&self) -> Option<String> {
        comm(&*self.sys, self.pid)
    }

    /// The process's file system root as kerf can open it (/proc/PID/root): files below it
    /// are the ones the process sees, also in a container or chroot.
    pub fn root_dir(&self) -> PathBuf {
        proc_dir(self.pid).join("root")
    }

    /// Whether the process sees kerf's file system root (/proc/PID/root is the same directory
    /// as kerf's `/`); `false` for a process in a container or chroot. When kerf cannot tell,
    /// it assumes the same root.
    pub fn shares_root(&self) -> bool {
        match (self.sys.file_id(&self.root_dir()), self.sys.file_id(Path::new("/"))) {
            (Ok(a), Ok(b)) => a == b,
            _ => true,
        }
    }

    /// Where kerf can open a file the process has mapped: through /proc/PID/root when that
    /// is reachable (so a process in a container or chroot yields its own file, not the
    /// host's file of the same name), else `path` itself.
    pub fn module_path(&self, path: &str) -> PathBuf {
        let rooted = self.root_dir().join(path.trim_start_matches('/'));
        if self.sys.exists(&rooted) {
            rooted
        } else {
            PathBuf::from(path)
        }
    }

    /// The bytes of a mapped file, `path` as /proc/PID/maps prints it.
    pub fn read_module(&self, path: &str) -> Result<Vec<u8>, TargetError> {
        let file = self.module_path(path);
        self.sys.read(&file).map_err(|e| self.io_error("read", file, e))
    }

    /// Classify an I/O error; a file of /proc/PID that vanished means the process exited.
    fn io_error(&self, op: &'static str, path: PathBuf, err: io::Error) -> TargetError {
        if err.kind() == io::ErrorKind::NotFound
            && path.starts_with(proc_dir(self.pid))
            && !self.sys.exists(&proc_dir(self.pid))
        {
            return TargetError::NoSuchProcess { pid: self.pid };
        }
        TargetError::from_io(self.pid, op, path, err)
    }
}

/// What a PID names, as /proc shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    /// A user process with at least one thread that has not exited.
    Live,
    /// A kernel thread (`PF_KTHREAD` in its flags).
    KernelThread,
    /// Every thread has exited; the parent has not reaped it yet.
    Zombie,
    /// No such process (any more).
    Gone,
    /// /proc/PID/stat could not be read or understood (another user's process under a
    /// restrictive `hidepid`, say): nothing is known.
    Unknown,
}

/// `PF_KTHREAD` of the kernel's task flags (field 9 of /proc/PID/stat).
const PF_KTHREAD: u64 = 0x0020_0000;

/// What `pid` is: read from /proc/PID/stat (state and flags) and, for a zombie leader,
/// /proc/PID/status: a leader that called `pthread_exit` shows `Z` while its other threads
/// still run, and its `Threads:` count then includes them.
pub fn state(sys: &dyn ProcSys, pid: i32) -> State {
    let stat = match sys.read_to_string(&proc_dir(pid).join("stat")) {
        Ok(s) => s,
        Err(e) if e.raw_os_error() == Some(libc::ESRCH) => return State::Gone,
        Err(e) if e.kind() == io::ErrorKind::NotFound && !sys.exists(&proc_dir(pid)) => {
            return State::Gone
        }
        Err(_) => return State::Unknown,
    };
    // The command name, in parentheses, may itself hold spaces and parentheses.
    let Some((_, rest)) = stat.rsplit_once(')') else { return State::Unknown };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let (Some(&st), Some(flags)) = (fields.first(), fields.get(6).and_then(|f| f.parse().ok()))
    else {
        return State::Unknown;
    };
    let flags: u64 = flags;
    if flags & PF_KTHREAD != 0 {
        return State::KernelThread;
    }
    match st {
        "X" => State::Gone,
        "Z" => {
            let status = sys.read_to_string(&proc_dir(pid).join("status")).unwrap_or_default();
            let threads = status
                .lines()
                .find_map(|l| l.strip_prefix("Threads:"))
                .and_then(|n| n.trim().parse::<u64>().ok());
            if threads.is_some_and(|n| n > 1) {
                State::Live
            } else {
                State::Zombie
            }
        }
        _ => State::Live,
    }
}

/// Whether `pid` has ended: gone, or a zombie (every thread exited, not yet reaped).
pub fn ended(sys: &dyn ProcSys, pid: i32) -> bool {
    matches!(state(sys, pid), State::Gone | State::Zombie)
}

fn proc_dir(pid: i32) -> PathBuf {
    Path::new("/proc").join(pid.to_string())
}

/// The program process `pid` runs now (the target of /proc/PID/exe, without the ` (deleted)`
/// the kernel appends when the file was replaced), if it can be read.
pub fn exe(sys: &dyn ProcSys, pid: i32) -> Option<String> {
    let p = sys.read_link(&proc_dir(pid).join("exe")).ok()?;
    Some(p.to_string_lossy().trim_end_matches(" (deleted)").to_string())
}

/// The first argument process `pid` was started with (/proc/PID/cmdline up to its first NUL).
pub fn argv0(sys: &dyn ProcSys, pid: i32) -> Option<String> {
    let cmdline = sys.read(&proc_dir(pid).join("cmdline")).ok()?;
    let first = cmdline.split(|&b| b == 0).next()?;
    Some(String::from_utf8_lossy(first).into_owned())
}

/// The command name of process `pid` (/proc/PID/comm, without its newline).
pub fn comm(sys: &dyn ProcSys, pid: i32) -> Option<String> {
    let text = sys.read_to_string(&proc_dir(pid).join("comm")).ok()?;
    Some(text.trim_end().to_string())
}

/// Whether a thread of process `pid` runs under seccomp, a filter ("Seccomp: 2" in
/// /proc/PID/task/TID/status; seccomp is per thread) or strict mode (1). Code kerf puts in
/// such a process must make no system call seccomp may forbid or punish. A thread whose
/// status cannot be read (it ended meanwhile) is taken as free; a process whose task list
/// cannot be read, as restricted.
pub fn seccomp_restricted(sys: &dyn ProcSys, pid: i32) -> bool {
    seccomp_level(sys, pid).is_none_or(|l| l.mode != 0)
}

/// How far seccomp restricts a process: the highest mode of its threads (0 off, 1 strict,
/// 2 filters) and the most filters any of them runs under (`Seccomp_filters:`, which kernels
/// before 5.9 do not show). It only grows: a thread installs filters on top of its own, and
/// the threads it makes inherit them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SeccompLevel {
    pub mode: u32,
    pub filters: u32,
}

/// The [`SeccompLevel`] of process `pid` now (`Seccomp:` and `Seccomp_filters:` of each
/// thread's status); `None` when its task list cannot be read (it ended).
pub fn seccomp_level(sys: &dyn ProcSys, pid: i32) -> Option<SeccompLevel> {
    let tasks = proc_dir(pid).join("task");
    let tids = sys.list_dir(&tasks).ok()?;
    let mut level = SeccompLevel::default();
    for t in tids {
        let status = sys.read_to_string(&tasks.join(t).join("status")).unwrap_or_default();
        level.mode = level.mode.max(crate::seccomp::mode_number(&status).unwrap_or(0));
        let filters = status.lines().find_map(|l| l.strip_prefix("Seccomp_filters:"));
        level.filters = level.filters.max(filters.and_then(|v| v.trim().parse().ok()).unwrap_or(0));
    }
    Some(level)
}

/// The signals process `pid` has a handler for (`SigCgt:` in /proc/PID/status, bit `n - 1`
/// for signal `n`); `None` when it cannot be read (it ended). Handlers are per process, so the
/// main thread's status says it for every thread.
pub fn caught_signals(sys: &dyn ProcSys, pid: i32) -> Option<u64> {
    let status = sys.read_to_string(&proc_dir(pid).join("status")).ok()?;
    let hex = status.lines().find_map(|l| l.strip_prefix("SigCgt:"))?;
    u64::from_str_radix(hex.trim(), 16).ok()
}

/// Every process in /proc (its numeric entries), in no particular order; empty when /proc
/// cannot be listed.
pub fn pids(sys: &dyn ProcSys) -> Vec<i32> {
    let names = sys.list_dir(Path::new("/proc")).unwrap_or_default();
    names.iter().filter_map(|n| n.parse().ok()).collect()
}

/// Clock ticks since boot now (the first field of /proc/uptime, in hundredths of a second:
/// `USER_HZ` is 100 on x86-64), on the clock of [`start_time`].
pub fn uptime_ticks(sys: &dyn ProcSys) -> Option<u64> {
    let text = sys.read_to_string(Path::new("/proc/uptime")).ok()?;
    let (secs, hundredths) = text.split_whitespace().next()?.split_once('.')?;
    Some(secs.parse::<u64>().ok()? * 100 + hundredths.get(..2)?.parse::<u64>().ok()?)
}

/// The fields of /proc/PID/stat after the command name: `fields[0]` is field 3 (state).
fn stat_fields(sys: &dyn ProcSys, pid: i32) -> Option<Vec<String>> {
    let stat = sys.read_to_string(&proc_dir(pid).join("stat")).ok()?;
    // The command name, in parentheses, may itself hold spaces and parentheses.
    let (_, rest) = stat.rsplit_once(')')?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

/// When process `pid` started, in clock ticks since boot (field 22 of /proc/PID/stat): with
/// the pid, it names one process even after the pid is reused.
pub fn start_time(sys: &dyn ProcSys, pid: i32) -> Option<u64> {
    stat_fields(sys, pid)?.get(19)?.parse().ok()
}

/// `PF_EXITING` of the kernel's task flags: set when a task starts to exit.
const PF_EXITING: u64 = 0x0000_0004;

/// Whether process `pid`'s leader has started to exit (`PF_EXITING` in field 9 of
/// /proc/PID/stat) and is not a zombie yet: its address space may already be half torn down,
/// which looks like an `exec` to one who reads its maps. A thread that runs `exec` does not
/// exit (the other threads do, and the exec'ing one becomes the leader).
pub fn exiting(sys: &dyn ProcSys, pid: i32) -> bool {
    let Some(fields) = stat_fields(sys, pid) else { return false };
    let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    flags & PF_EXITING != 0
}

/// The ids of process `pid`'s threads (/proc/PID/task), lowest first; empty if it cannot be
/// read (the process ended).
pub fn threads(sys: &dyn ProcSys, pid: i32) -> Vec<i32> {
    let tasks = proc_dir(pid).join("task");
    let mut tids: Vec<i32> =
        sys.list_dir(&tasks).unwrap_or_default().iter().filter_map(|t| t.parse().ok()).collect();
    tids.sort_unstable();
    tids
}

/// The wait status of process `pid` if it is a zombie (field 52, `exit_code`, of
/// /proc/PID/stat); `None` for a live process or when it cannot be read.
pub fn zombie_status(sys: &dyn ProcSys, pid: i32) -> Option<i32> {
    let fields = stat_fields(sys, pid)?;
    if fields.first().map(String::as_str) != Some("Z") {
        return None;
    }
    fields.get(49)?.parse().ok()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A /proc with the files and errors a test sets up; directories exist when a file
    /// below them does, or when listed in `dirs`.
    #[derive(Default)]
    pub(crate) struct FakeSys {
        files: HashMap<PathBuf, Result<Vec<u8>, i32>>,
        dirs: Vec<PathBuf>,
        links: HashMap<PathBuf, PathBuf>,
        ids: HashMap<PathBuf, (u64, u64)>,
    }

    impl FakeSys {
        pub(crate) fn file(mut self, path: &str, text: &str) -> Self {
            self.files.insert(path.into(), Ok(text.as_bytes().to_vec()));
            self
        }
        pub(crate) fn failing(mut self, path: &str, errno: i32) -> Self {
            self.files.insert(path.into(), Err(errno));
            self
        }
        pub(crate) fn dir(mut self, path: &str) -> Self {
            self.dirs.push(path.into());
            self
        }
        pub(crate) fn link(mut self, path: &str, target: &str) -> Self {
            self.links.insert(path.into(), target.into());
            self
        }
        pub(crate) fn id(mut self, path: &str, dev: u64, ino: u64) -> Self {
            self.ids.insert(path.into(), (dev, ino));
            self
        }
    }

    impl ProcSys for FakeSys {
        fn read_to_string(&self, path: &Path) -> io::Result<String> {
            String::from_utf8(self.read(path)?)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
        }
        fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
            match self.files.get(path) {
                Some(Ok(data)) => Ok(data.clone()),
                Some(Err(errno)) => Err(io::Error::from_raw_os_error(*errno)),
                None => Err(io::Error::from(io::ErrorKind::NotFound)),
            }
        }
        fn exists(&self, path: &Path) -> bool {
            self.files.get(path).is_some_and(|f| f.is_ok())
                || self.dirs.iter().any(|d| d == path)
                || self.files.keys().any(|f| f.starts_with(path) && f != path)
        }
        fn read_link(&self, path: &Path) -> io::Result<PathBuf> {
            self.links.get(path).cloned().ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
        fn file_id(&self, path: &Path) -> io::Result<(u64, u64)> {
            self.ids.get(path).copied().ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
        }
        fn list_dir(&self, path: &Path) -> io::Result<Vec<String>> {
            // Files right below `path`, and the directories that files further down are in.
            let mut names: Vec<String> = self
                .files
                .keys()
                .filter_map(|f| f.strip_prefix(path).ok()?.components().next())
                .filter_map(|c| Some(c.as_os_str().to_str()?.to_string()))
                .collect();
            names.sort();
            names.dedup();
            if names.is_empty() && !self.exists(path) {
                return Err(io::Error::from(io::ErrorKind::NotFound));
            }
            Ok(names)
        }
    }

    const EACCES: i32 = 13;
    const EPERM: i32 = 1;
    const EIO: i32 = 5;
    const ESRCH: i32 = 3;

    pub(crate) fn open(pid: i32, sys: FakeSys) -> Result<Process, TargetError> {
        Process::open_with(pid, Box::new(sys))
    }

    #[test]
    fn threads_are_the_task_directory_by_number() {
        let sys = FakeSys::default()
            .file("/proc/7/task/12/status", "")
            .file("/proc/7/task/7/status", "")
            .file("/proc/7/task/9/status", "");
        assert_eq!(threads(&sys, 7), vec![7, 9, 12]);
        assert_eq!(threads(&sys, 8), Vec::<i32>::new(), "no such process");
    }

    #[test]
    fn pids_are_the_numbers_in_proc_and_uptime_is_in_ticks() {
        let sys = FakeSys::default()
            .file("/proc/7/stat", "")
            .file("/proc/12/task/12/status", "")
            .file("/proc/self/stat", "")
            .file("/proc/uptime", "61234.56 120000.00\n");
        let mut pids = pids(&sys);
        pids.sort_unstable();
        assert_eq!(pids, vec![7, 12]);
        assert_eq!(uptime_ticks(&sys), Some(6_123_456));
        assert_eq!(uptime_ticks(&FakeSys::default()), None);
    }

    #[test]
    fn caught_signals_are_read_from_the_status() {
        let sys = FakeSys::default().file(
            "/proc/7/status",
            "Name:\tx\nSigIgn:\t0000000000001000\nSigCgt:\t0000000180004a02\n",
        );
        // SIGINT (2), SIGUSR1 (10), SIGUSR2 (12), SIGTERM (15), 32 and 33.
        let caught = caught_signals(&sys, 7).expect("read");
        let sigs: Vec<u32> = (1..=64).filter(|n| caught & (1 << (n - 1)) != 0).collect();
        assert_eq!(sigs, vec![2, 10, 12, 15, 32, 33]);
        assert_eq!(caught_signals(&FakeSys::default(), 9), None, "ended");
    }

    #[test]
    fn seccomp_of_any_thread_is_seen() {
        let status = |mode: u32| format!("Name:\tx\nSeccomp:\t{mode}\nSeccomp_filters:\t1\n");
        let sys = FakeSys::default()
            .file("/proc/7/task/7/status", &status(0))
            .file("/proc/7/task/8/status", &status(2));
        assert!(seccomp_restricted(&sys, 7));
        let sys = FakeSys::default()
            .file("/proc/7/task/7/status", &status(1))
            .file("/proc/7/task/8/status", &status(0));
        assert!(seccomp_restricted(&sys, 7), "strict mode");
        let sys = FakeSys::default()
            .file("/proc/7/task/7/status", &status(0))
            .file("/proc/7/task/8/status", &status(0));
        assert!(!seccomp_restricted(&sys, 7));
        assert!(seccomp_restricted(&FakeSys::default(), 9), "no task list: assume seccomp");
        let level = seccomp_level(&sys, 7).expect("listed");
        assert_eq!(level, SeccompLevel { mode: 0, filters: 1 });
        assert_eq!(seccomp_level(&FakeSys::default(), 9), None, "ended");
    }

    #[test]
    fn open_checks_the_proc_directory() {
        let err = open(1234, FakeSys::default()).unwrap_err();
        assert!(matches!(err, TargetError::NoSuchProcess { pid: 1234 }));
        assert_eq!(err.to_string(), "process 1234 does not exist");
        assert!(matches!(
            open(0, FakeSys::default().dir("/proc/0")),
            Err(TargetError::NoSuchProcess { pid: 0 })
        ));
        assert!(matches!(
            open(-5, FakeSys::default()),
            Err(TargetError::NoSuchProcess { pid: -5 })
        ));
        let p = open(1234, FakeSys::default().dir("/proc/1234")).expect("exists");
        assert_eq!(p.pid(), 1234);
        assert_eq!(format!("{p:?}"), "Process { pid: 1234, .. }");
    }

    /// /proc/PID/stat of a process in `state` with task `flags` (the name has a ") " in it,
    /// as a command name may).
    fn stat(pid: i32, state: &str, flags: u64) -> String {
        format!("{pid} (a) b) {state} 1 {pid} {pid} 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 5\n")
    }

    #[test]
    fn open_says_what_the_pid_is() {
        let sys = |st: &str, flags: u64, threads: u64| {
            FakeSys::default()
                .file("/proc/7/stat", &stat(7, st, flags))
                .file("/proc/7/status", &format!("Name:\ta\nThreads:\t{threads}\n"))
        };
        let err = open(7, sys("S", 0x0020_8040, 1)).unwrap_err();
        assert!(matches!(err, TargetError::KernelThread { pid: 7 }), "{err:?}");
        assert!(err.to_string().starts_with("process 7 is a kernel thread"), "{err}");
        let err = open(7, sys("Z", 0x0040_0004, 1)).unwrap_err();
        assert!(matches!(err, TargetError::Zombie { pid: 7 }), "{err:?}");
        assert!(err.to_string().starts_with("process 7 is a zombie"), "{err}");
        // A leader that exited alone while its threads run is still a live process.
        assert!(open(7, sys("Z", 0x0040_0004, 3)).is_ok());
        assert!(open(7, sys("R", 0x0040_0000, 1)).is_ok());
        // Exited between the directory check and the read of its stat.
        let gone = FakeSys::default().dir("/proc/7").failing("/proc/7/stat", ESRCH);
        assert!(matches!(open(7, gone), Err(TargetError::NoSuchProcess { pid: 7 })));
        // An unreadable stat tells nothing: the process is opened and later reads decide.
        let hidden = FakeSys::default().dir("/proc/7").failing("/proc/7/stat", EACCES);
        assert!(open(7, hidden).is_ok());
    }

    #[test]
    fn maps_reads_and_parses_the_maps_file() {
        let text = "00400000-00401000 r-xp 00000000 08:02 17 /bin/x\n";
        let p = open(42, FakeSys::default().file("/proc/42/maps", text)).expect("exists");
        let maps = p.maps().expect("readable");
        assert_eq!(maps.len(), 1);
        assert_eq!((maps[0].start.0, maps[0].path.as_deref()), (0x40_0000, Some("/bin/x")));
        let bad = "00400000-00401000 r-xp 00000000 08:02 17 /bin/x\nnonsense\n";
        let p = open(42, FakeSys::default().file("/proc/42/maps", bad)).expect("exists");
        let err = p.maps().unwrap_err();
        assert!(matches!(&err, TargetError::Maps { pid: 42, source } if source.line_no == 2));
        assert!(err.to_string().starts_with("cannot parse /proc/42/maps: maps line 2: "), "{err}");
    }

    #[test]
    fn names_of_a_process() {
        let sys = FakeSys::default()
            .dir("/proc/8")
            .link("/proc/8/exe", "/usr/bin/redis-check-rdb (deleted)")
            .file("/proc/8/cmdline", "redis-server\0*:6379\0")
            .file("/proc/8/comm", "redis-server\n");
        let p = open(8, sys).expect("exists");
        assert_eq!(p.exe().as_deref(), Some("/usr/bin/redis-check-rdb"));
        assert_eq!(p.argv0().as_deref(), Some("redis-server"));
        assert_eq!(p.comm().as_deref(), Some("redis-server"));
        let p = open(9, FakeSys::default().dir("/proc/9")).expect("exists");
        assert_eq!((p.exe(), p.argv0(), p.comm()), (None, None, None));
    }

    #[test]
    fn root_of_a_process() {
        let host = FakeSys::default().dir("/proc/3").id("/proc/3/root", 1, 2).id("/", 1, 2);
        assert!(open(3, host).expect("exists").shares_root());
        let container = FakeSys::default().dir("/proc/3").id("/proc/3/root", 9, 2).id("/", 1, 2);
        assert!(!open(3, container).expect("exists").shares_root());
        // Unknown (another user's process): taken as the same root.
        assert!(open(3, FakeSys::default().dir("/proc/3")).expect("exists").shares_root());
    }

    #[test]
    fn start_time_and_zombie_status() {
        let sys = FakeSys::default().file("/proc/7/stat", &stat(7, "S", 0));
        assert_eq!(start_time(&sys, 7), Some(5));
        assert_eq!(zombie_status(&sys, 7), None);
        // A zombie that exited with code 3: exit_code (field 52) is its wait status.
        let mut fields: Vec<String> = (3..=52).map(|f| f.to_string()).collect();
        fields[0] = "Z".into();
        fields[49] = (3 << 8).to_string();
        let zombie = format!("7 (a) b) {}\n", fields.join(" "));
        let sys = FakeSys::default().file("/proc/7/stat", &zombie);
        assert_eq!(zombie_status(&sys, 7), Some(3 << 8));
        assert_eq!(start_time(&FakeSys::default(), 7), None);
    }

    #[test]
    fn a_process_that_started_to_exit_is_seen() {
        assert!(exiting(&FakeSys::default().file("/proc/7/stat", &stat(7, "R", 0x404044)), 7));
        assert!(!exiting(&FakeSys::default().file("/proc/7/stat", &stat(7, "R", 0x400040)), 7));
        assert!(!exiting(&FakeSys::default(), 7));
    }

    #[test]
    fn maps_permission_errors_name_the_file() {
        for errno in [EACCES, EPERM] {
            let p =
                open(1234, FakeSys::default().dir("/proc/1234").failing("/proc/1234/maps", errno))
                    .expect("exists");
            let err = p.maps().unwrap_err();
            match &err {
                TargetError::PermissionDenied { pid: 1234, op, path } => {
                    assert_eq!((*op, path.as_path()), ("read", Path::new("/proc/1234/maps")))
                }
                other => panic!("{other:?}"),
            }
            assert_eq!(
                err.to_string(),
                "no permission to read /proc/1234/maps (need root or ptrace access)"
            );
        }
    }

    #[test]
    fn maps_of_an_exited_process() {
        // The directory vanished between open and read.
        let sys = FakeSys::default().dir("/proc/77");
        let p = open(77, sys).expect("exists");
        let p = Process { pid: p.pid, sys: Box::new(FakeSys::default()) };
        assert!(matches!(p.maps(), Err(TargetError::NoSuchProcess { pid: 77 })));
        let p = open(78, FakeSys::default().failing("/proc/78/maps", ESRCH).dir("/proc/78"))
            .expect("exists");
        assert!(matches!(p.maps(), Err(TargetError::NoSuchProcess { pid: 78 })));
    }

    #[test]
    fn other_io_errors_keep_their_cause() {
        let p = open(9, FakeSys::default().failing("/proc/9/maps", EIO).dir("/proc/9"))
            .expect("exists");
        let err = p.maps().unwrap_err();
        assert!(
            matches!(&err, TargetError::Io { pid: 9, path, .. } if path == Path::new("/proc/9/maps"))
        );
        let msg = err.to_string();
        assert!(msg.starts_with("cannot read /proc/9/maps (process 9): "), "{msg}");
        assert!(!msg.contains('\n'));
        assert!(std::error::Error::source(&err).is_some());
        assert_eq!(err.pid(), 9);
    }

    #[test]
    fn module_path_prefers_the_process_root() {
        let sys = FakeSys::default()
            .file("/proc/5/root/usr/lib/libc.so.6", "container libc")
            .dir("/proc/5");
        let p = open(5, sys).expect("exists");
        assert_eq!(
            p.module_path("/usr/lib/libc.so.6"),
            PathBuf::from("/proc/5/root/usr/lib/libc.so.6")
        );
        assert_eq!(p.module_path("/usr/bin/other"), PathBuf::from("/usr/bin/other"));
        assert_eq!(p.read_module("/usr/lib/libc.so.6").expect("readable"), b"container libc");
        let err = p.read_module("/usr/bin/other").unwrap_err();
        assert!(matches!(err, TargetError::Io { .. }), "{err:?}");
        assert!(err.to_string().starts_with("cannot read /usr/bin/other (process 5): "), "{err}");
    }

    #[test]
    fn real_self_process() {
        let pid = i32::try_from(std::process::id()).expect("pid fits");
        let p = Process::open(pid).expect("we exist");
        let maps = p.maps().expect("own maps are readable and parse");
        assert!(maps.len() > 5);
        let exe = std::fs::canonicalize(std::env::current_exe().expect("exe")).expect("canonical");
        let exe = exe.to_str().expect("utf-8");
        assert!(maps.iter().any(|m| m.path.as_deref() == Some(exe)), "own executable mapped");
        assert_eq!(p.exe().as_deref(), Some(exe));
        assert!(p.shares_root());
        assert!(start_time(&RealSys, pid).is_some());
        let via_root = p.module_path(exe);
        assert_eq!(via_root, PathBuf::from(format!("/proc/{pid}/root{exe}")));
        assert_eq!(p.read_module(exe).expect("readable"), std::fs::read(exe).expect("readable"));
        // Far above the kernel's PID limit (2^22): cannot exist.
        assert!(matches!(Process::open(i32::MAX), Err(TargetError::NoSuchProcess { .. })));
    }
}
