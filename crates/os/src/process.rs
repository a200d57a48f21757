//! A live process, seen read-only through /proc: its memory map and the files of its
//! modules. Writing, stopping and injecting come later and go through the same [`ProcSys`].

use crate::error::TargetError;
pub use crate::sys::{ProcSys, RealSys};
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

    /// The text of /proc/PID/maps (parse it with `kerf_analysis::image::maps::parse_maps`).
    pub fn maps(&self) -> Result<String, TargetError> {
        let path = proc_dir(self.pid).join("maps");
        self.sys
            .read_to_string(&path)
            .map_err(|e| self.io_error(format!("read {}", path.display()), path, e))
    }

    /// Where kerf can open a file the process has mapped: through /proc/PID/root when that
    /// is reachable (so a process in a container or chroot yields its own file, not the
    /// host's file of the same name), else `path` itself.
    pub fn module_path(&self, path: &str) -> PathBuf {
        let rooted = proc_dir(self.pid).join("root").join(path.trim_start_matches('/'));
        if self.sys.exists(&rooted) {
            rooted
        } else {
            PathBuf::from(path)
        }
    }

    /// The bytes of a mapped file, `path` as /proc/PID/maps prints it.
    pub fn read_module(&self, path: &str) -> Result<Vec<u8>, TargetError> {
        let file = self.module_path(path);
        self.sys.read(&file).map_err(|e| self.io_error(format!("read {}", file.display()), file, e))
    }

    /// Classify an I/O error; a file of /proc/PID that vanished means the process exited.
    fn io_error(&self, op: String, path: PathBuf, err: io::Error) -> TargetError {
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

fn proc_dir(pid: i32) -> PathBuf {
    Path::new("/proc").join(pid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A /proc with the files and errors a test sets up; directories exist when a file
    /// below them does, or when listed in `dirs`.
    #[derive(Default)]
    struct FakeSys {
        files: HashMap<PathBuf, Result<Vec<u8>, i32>>,
        dirs: Vec<PathBuf>,
    }

    impl FakeSys {
        fn file(mut self, path: &str, text: &str) -> Self {
            self.files.insert(path.into(), Ok(text.as_bytes().to_vec()));
            self
        }
        fn failing(mut self, path: &str, errno: i32) -> Self {
            self.files.insert(path.into(), Err(errno));
            self
        }
        fn dir(mut self, path: &str) -> Self {
            self.dirs.push(path.into());
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
    }

    const EACCES: i32 = 13;
    const EPERM: i32 = 1;
    const EIO: i32 = 5;
    const ESRCH: i32 = 3;

    fn open(pid: i32, sys: FakeSys) -> Result<Process, TargetError> {
        Process::open_with(pid, Box::new(sys))
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
    fn maps_reads_the_maps_file() {
        let text = "00400000-00401000 r-xp 00000000 08:02 17 /bin/x\n";
        let p = open(42, FakeSys::default().file("/proc/42/maps", text)).expect("exists");
        assert_eq!(p.maps().expect("readable"), text);
    }

    #[test]
    fn maps_permission_errors_name_the_file() {
        for errno in [EACCES, EPERM] {
            let p =
                open(1234, FakeSys::default().dir("/proc/1234").failing("/proc/1234/maps", errno))
                    .expect("exists");
            let err = p.maps().unwrap_err();
            match &err {
                TargetError::PermissionDenied { pid: 1234, op } => {
                    assert_eq!(op, "read /proc/1234/maps")
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
        let maps = p.maps().expect("own maps are readable");
        assert!(maps.lines().count() > 5);
        let exe = std::fs::canonicalize(std::env::current_exe().expect("exe")).expect("canonical");
        let exe = exe.to_str().expect("utf-8");
        assert!(maps.contains(exe), "own executable mapped");
        let via_root = p.module_path(exe);
        assert_eq!(via_root, PathBuf::from(format!("/proc/{pid}/root{exe}")));
        assert_eq!(p.read_module(exe).expect("readable"), std::fs::read(exe).expect("readable"));
        // Far above the kernel's PID limit (2^22): cannot exist.
        assert!(matches!(Process::open(i32::MAX), Err(TargetError::NoSuchProcess { .. })));
    }
}
