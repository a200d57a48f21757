//! The analysis cache: one file per analysed image, keyed by its build-id (or, without one,
//! by path, size and modification time) and by the symbol file added to it, so a second
//! analysis of the same image is a file read.
//!
//! A cache file is an untrusted input (DESIGN.md §5), and root's cache must not become a way
//! for another user to reach root's files. So:
//! - the directory is the user's own: never a shared temporary directory (with no `HOME`, the
//!   home directory of the user's passwd entry), created mode 0700, opened without following
//!   a symlink, and refused unless it is owned by the user and writable by no one else, and
//!   every directory above it is owned by the user or root and writable by no one else (or
//!   sticky, like /tmp). Every file operation after that goes through the opened directory's
//!   descriptor, so a directory renamed or swapped later changes nothing;
//! - a file is written to a temporary file created `O_CREAT|O_EXCL|O_NOFOLLOW`, mode 0600, and
//!   renamed over the entry, and read with `O_NOFOLLOW` (a symlink planted there is refused);
//! - an entry holds the format version, its own key, a BLAKE3 digest of the image file's
//!   bytes (and symbol file) it describes and a BLAKE3 checksum over all of it: a damaged
//!   entry (a flipped byte), one copied under another key, or a stale one (another image with
//!   the same build-id, an image rebuilt or patched in place) is rejected. The payload is
//!   decoded with a size limit (no allocation beyond the file's size), and the decoded
//!   analysis gets the checks that are cheap and whole-entry: every index and range fits
//!   (`kerf_analysis::validate::Checker::new`). A rejected entry is reported and analysed
//!   again, and the new analysis replaces it.
//!
//! What the analysis says about the code (blocks, edges, jump tables, liveness, padding) is
//! checked against the image's bytes where it is used, function by function, before a splice
//! is planned from it (`kerf_analysis::validate`, `crate::checked`): the checks above already
//! catch every way an entry can be damaged or misplaced, and checking all of libLLVM-14's
//! 95,000 functions at every load (about 2 s) would cost as much as analysing it again. That
//! semantic check is defence in depth, against kerf's own format or logic drifting and an
//! entry that passes the checksum but is wrong; a function that fails it rejects the whole
//! entry.
//!
//! Beside an entry the JIT keeps its return facts for the same image (`<entry>.returns`,
//! [`CacheDir::store_facts`]): written and read as an entry is (same header, digest and
//! checksum), and checked where they are used, never trusted
//! (`kerf_analysis::liveness::check_return_facts`). Likewise the functions that ran in a
//! JIT's runs, per set of roots (`<entry>.ran-<roots>`, [`CacheDir::store_hint`]): a hint of
//! what to translate ahead next time, each address checked to be a function's entry. And
//! what a build of kerf checked of the entry (`<entry>.checked`, a [`Stamp`]): the whole
//! analysis and the return facts, by checksum, so that the same build does not check the same
//! bytes twice (python3.11's start: about a third of kerf's CPU time before the cache is live).
//! For the JIT's sizing and counting, also: the room each function takes under a set of
//! translation options (`<entry>.rooms`), how often blocks and their branches' sides ran in
//! the last counting run from a set of roots (`<entry>.flows-<roots>`: where counters go,
//! never what a count is), and which blocks the counters' flow graphs must treat as entered
//! from outside (`<entry>.shape`, for kerf's build and the analysis's size).
//!
//! Cost of a load (libLLVM-14, a 110 MB image and a 195 MB entry): reading the entry, two
//! BLAKE3 passes (about 4.7 GB/s on one core here, with AVX-512; SHA-256 with the CPU's SHA
//! extensions managed about 1.1 GB/s in this load) and decoding. The
//! image's digest is computed while the entry is read, and the entry's checksum while its
//! payload decodes (a payload that fails its checksum is decoded for nothing and dropped), so
//! on two cores a load takes about as long as reading and decoding alone.

use bincode::Options;
use kerf_analysis::liveness::ReturnFacts;
use kerf_analysis::validate::Checker;
use kerf_analysis::Analysis;
use kerf_jit::counters::{ModuleShape, Ran};
use std::ffi::{CString, OsStr};
use std::fs;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};

/// Bumped whenever the analysis or its serialised form changes meaning.
const FORMAT: u32 = 24;
/// The first bytes of every cache file.
const MAGIC: &[u8; 8] = b"KERFANA\0";
/// Entries kept per image read from the running kernel ([`CacheDir::keep_only_live`]).
pub const LIVE_KEPT: usize = 3;
/// Larger files are not read (libLLVM-14's entry is about 200 MB).
const MAX_FILE: u64 = 4 << 30;

/// Why the cache was not used, or an entry not trusted. The analysis goes on without it;
/// these are warnings.
#[derive(Debug)]
pub enum CacheError {
    /// No cache directory can be named: no `KERF_CACHE_DIR`, `XDG_CACHE_HOME` or `HOME`, and
    /// no home directory in the user's passwd entry.
    NoDir,
    /// The directory (or one above it) is not private to this user.
    Unsafe { path: PathBuf, why: String },
    /// A system call on the cache failed.
    Io { path: PathBuf, op: &'static str, err: io::Error },
    /// An entry that is damaged, foreign, or does not describe the image.
    Rejected { path: PathBuf, why: String },
}

impl std::fmt::Display for CacheError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CacheError::NoDir => write!(
                f,
                "no analysis cache: no KERF_CACHE_DIR, XDG_CACHE_HOME or HOME, and no home \
                 directory for this user"
            ),
            CacheError::Unsafe { path, why } => {
                write!(f, "analysis cache {} not used: {why}", path.display())
            }
            CacheError::Io { path, op, err } => {
                write!(f, "analysis cache: {op} {}: {err}", path.display())
            }
            CacheError::Rejected { path, why } => {
                write!(
                    f,
                    "analysis cache entry {} rejected ({why}); analysed again",
                    path.display()
                )
            }
        }
    }
}

impl std::error::Error for CacheError {}

/// Where cache files live: `$KERF_CACHE_DIR`, else `$XDG_CACHE_HOME/kerf`, else
/// `~/.cache/kerf`, where `~` is `$HOME` or, without it, the home directory of the user's
/// passwd entry. `None` when none of these is known: there is then no cache, never one in a
/// directory other users share.
pub fn default_dir() -> Option<PathBuf> {
    let absolute = |v: Option<std::ffi::OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(d) = std::env::var_os("KERF_CACHE_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(d));
    }
    if let Some(d) = absolute(std::env::var_os("XDG_CACHE_HOME")) {
        return Some(d.join("kerf"));
    }
    let home = absolute(std::env::var_os("HOME")).or_else(passwd_home)?;
    Some(home.join(".cache").join("kerf"))
}

/// The home directory of the effective user's passwd entry.
fn passwd_home() -> Option<PathBuf> {
    let mut buf = vec![0u8; 16 * 1024];
    // SAFETY: passwd is plain data that getpwuid_r fills in; every pointer it sets points into
    // `buf`, which outlives their use below.
    let mut pw: libc::passwd = unsafe { std::mem::zeroed() };
    let mut out: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: valid pointers to `pw`, `buf` (with its true length) and `out`.
    let r = unsafe {
        libc::getpwuid_r(libc::geteuid(), &mut pw, buf.as_mut_ptr().cast(), buf.len(), &mut out)
    };
    if r != 0 || out.is_null() || pw.pw_dir.is_null() {
        return None;
    }
    // SAFETY: pw_dir is a NUL-terminated string inside `buf`.
    let dir = unsafe { std::ffi::CStr::from_ptr(pw.pw_dir) };
    let dir = PathBuf::from(OsStr::from_bytes(dir.to_bytes()));
    // "/" or a relative path is no private place (nobody's home is /nonexistent, which
    // simply cannot be created).
    (dir.is_absolute() && dir != Path::new("/")).then_some(dir)
}

/// A stable 64-bit FNV-1a hash (std's hasher is randomised per process).
pub fn fnv64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in *p {
            h = (h ^ *b as u64).wrapping_mul(0x100_0000_01b3);
        }
        h = (h ^ 0xff).wrapping_mul(0x100_0000_01b3);
    }
    h
}

/// The cache key of an image: its build-id when it has one, else what identifies the file;
/// and what was added to its symbols: a symbol file's text, a debug file's identity (its
/// path, size, time and build-id), so that finding, losing or replacing one is a new entry.
pub fn key(
    build_id: Option<&[u8]>,
    file: &Path,
    symbols: Option<&str>,
    debug_file: Option<&str>,
) -> String {
    let ident = match build_id {
        Some(id) => id.iter().map(|b| format!("{b:02x}")).collect::<String>(),
        None => {
            let meta = fs::metadata(file).ok();
            let size = meta.as_ref().map_or(0, |m| m.len());
            let mtime = meta
                .and_then(|m| m.modified().ok())
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!(
                "nobuildid-{:016x}",
                fnv64(&[
                    file.as_os_str().as_encoded_bytes(),
                    &size.to_le_bytes(),
                    &mtime.to_le_bytes()
                ])
            )
        }
    };
    let syms = symbols.map_or(0, |s| fnv64(&[s.as_bytes()]));
    match debug_file {
        None => format!("v{FORMAT}-{ident}-{syms:016x}.bin"),
        Some(d) => format!("v{FORMAT}-{ident}-{syms:016x}-{:016x}.bin", fnv64(&[d.as_bytes()])),
    }
}

/// What an entry describes: the BLAKE3 hash of the image file's bytes and of the symbol
/// file added to it. An entry is used only for the very bytes it was made from.
pub fn digest(file: &[u8], symbols: Option<&str>) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(b"kerf image\0");
    h.update(&(file.len() as u64).to_le_bytes());
    h.update(file);
    if let Some(s) = symbols {
        h.update(b"symbols\0");
        h.update(s.as_bytes());
    }
    *h.finalize().as_bytes()
}

/// The checksum that closes an entry: over the format, the key, the digest and the payload.
fn checksum(key: &str, digest: &[u8; 32], payload: &[u8]) -> [u8; 32] {
    let mut h = blake3::Hasher::new();
    h.update(MAGIC);
    h.update(&FORMAT.to_le_bytes());
    h.update(&(key.len() as u64).to_le_bytes());
    h.update(key.as_bytes());
    h.update(digest);
    h.update(&(payload.len() as u64).to_le_bytes());
    h.update(payload);
    *h.finalize().as_bytes()
}

/// bincode's options for the payload: fixed-width integers, and (reading) no more bytes than
/// the payload has, so a hostile length prefix cannot make it allocate more.
fn codec() -> impl Options {
    bincode::DefaultOptions::new().with_fixint_encoding().reject_trailing_bytes()
}

/// Parts the blocks' bodies of a payload are cut into at most (see [`encode`]).
const BODY_PARTS: usize = 16;

/// A payload: the number of parts and each part's length (u64 each), then the parts: the
/// analysis without its blocks' bodies, then the bodies in up to [`BODY_PARTS`] runs of
/// consecutive functions, each encoded on its own so that they decode side by side
/// (libLLVM-14's 195 MB payload took 0.5 s to decode on one core, most of a cached load).
fn encode(a: &Analysis) -> bincode::Result<Vec<u8>> {
    let shell = Analysis {
        image: a.image.clone(),
        build_id: a.build_id.clone(),
        cfg: a.cfg.without_bodies(),
        call_graph: a.call_graph.clone(),
        summary: a.summary.clone(),
        timings: a.timings.clone(),
    };
    let bodies = a.cfg.blocks.bodies();
    let per = bodies.len().div_ceil(BODY_PARTS).max(1);
    let mut parts = vec![codec().serialize(&shell)?];
    for run in bodies.chunks(per) {
        parts.push(codec().serialize(run)?);
    }
    let mut out =
        Vec::with_capacity(8 * (parts.len() + 1) + parts.iter().map(Vec::len).sum::<usize>());
    out.extend_from_slice(&(parts.len() as u64).to_le_bytes());
    for p in &parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
    }
    for p in &parts {
        out.extend_from_slice(p);
    }
    Ok(out)
}

/// A payload [`encode`] made, decoded: its parts in parallel, each with no more bytes than
/// it has.
fn decode(payload: &[u8]) -> Result<Analysis, String> {
    use rayon::prelude::*;
    let word = |at: usize| -> Result<u64, String> {
        let b = payload.get(at..at + 8).ok_or("truncated part table")?;
        Ok(u64::from_le_bytes(b.try_into().map_err(|_| "truncated part table")?))
    };
    let n = word(0)? as usize;
    if n == 0 || n > BODY_PARTS + 1 {
        return Err(format!("{n} parts"));
    }
    let mut parts = Vec::with_capacity(n);
    let mut at = 8 * (n + 1);
    for k in 0..n {
        let len = usize::try_from(word(8 * (k + 1))?).map_err(|_| "part too long")?;
        let end = at.checked_add(len).filter(|&e| e <= payload.len()).ok_or("part past the end")?;
        parts.push(&payload[at..end]);
        at = end;
    }
    if at != payload.len() {
        return Err("bytes after the last part".into());
    }
    let limit = |p: &[u8]| codec().with_limit(p.len() as u64);
    let (shell, bodies) = rayon::join(
        || limit(parts[0]).deserialize::<Analysis>(parts[0]),
        || {
            let runs: Result<Vec<Vec<kerf_analysis::cfg::Body>>, _> =
                parts[1..].par_iter().map(|p| limit(p).deserialize(p)).collect();
            runs
        },
    );
    let mut a = shell.map_err(|e| e.to_string())?;
    let bodies = bodies.map_err(|e| e.to_string())?;
    a.cfg.blocks.set_bodies(bodies.into_iter().flatten().collect());
    Ok(a)
}

/// An analysis read from the cache, with what has been checked of it (see [`Checker`]).
/// A loaded entry: its analysis, the checker of what has been checked of it, and the entry's
/// checksum (which names these very bytes in a [`Stamp`]).
pub type Loaded = (Analysis, Checker, [u8; 32]);

/// Return facts read back, with their file's checksum.
pub type KeptFacts = (Vec<ReturnFacts>, [u8; 32]);

/// A cache file unpacked: the digest its header records, its checksum, its decoded payload.
type Unpacked<T> = ([u8; 32], [u8; 32], T);

/// What one build of kerf found of an entry's analysis and return facts: it checked the whole
/// analysis against the image's bytes ([`Checker::all_code`]), and, with `facts`, the return
/// facts file of that checksum too (`liveness::check_return_facts`; facts kerf solved and
/// wrote itself are not stamped: the next start checks what it reads back). Kept beside the entry (`<entry>.checked`,
/// [`CacheDir::store_stamp`]) so that later runs of the same build skip both checks: each is
/// a function of the build, the entry's bytes and the image's bytes alone (the entry's
/// checksum names the first, the digest in the stamp's header the second), so it would pass
/// again. A stamp of another build, another entry or other facts vouches for nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// The GNU build-id of the kerf that checked ([`kerf_build`]).
    pub kerf: Vec<u8>,
    /// The checksum of the entry checked.
    pub entry: [u8; 32],
    /// The checksum of the return facts file checked, if any.
    pub facts: Option<[u8; 32]>,
}

impl Stamp {
    fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(1 + self.kerf.len() + 32 + 1 + 32);
        out.push(self.kerf.len() as u8);
        out.extend_from_slice(&self.kerf);
        out.extend_from_slice(&self.entry);
        match &self.facts {
            Some(f) => {
                out.push(1);
                out.extend_from_slice(f);
            }
            None => out.push(0),
        }
        out
    }

    fn decode(b: &[u8]) -> Result<Stamp, String> {
        let bad = || format!("{} bytes: not a stamp", b.len());
        let n = usize::from(*b.first().ok_or_else(bad)?);
        let kerf = b.get(1..1 + n).ok_or_else(bad)?.to_vec();
        let word = |at: usize| -> Result<[u8; 32], String> {
            b.get(at..at + 32).and_then(|w| w.try_into().ok()).ok_or_else(bad)
        };
        let entry = word(1 + n)?;
        let facts = match (b.get(33 + n), b.len() - (34 + n).min(b.len())) {
            (Some(0), 0) => None,
            (Some(1), 32) => Some(word(34 + n)?),
            _ => return Err(bad()),
        };
        Ok(Stamp { kerf, entry, facts })
    }

    /// Whether this stamp, kept for an entry whose checksum is `entry`, was made by the
    /// running build of kerf (one with no build-id trusts no stamp).
    pub fn vouches(&self, entry: &[u8; 32]) -> bool {
        kerf_build().is_some_and(|b| b == self.kerf.as_slice()) && self.entry == *entry
    }
}

/// The GNU build-id of the running kerf (read once from `/proc/self/exe`): what names a build
/// in a [`Stamp`]. A build with none (another linker's) makes no stamps.
pub fn kerf_build() -> Option<&'static [u8]> {
    static BUILD: std::sync::OnceLock<Option<Vec<u8>>> = std::sync::OnceLock::new();
    let id = BUILD.get_or_init(|| {
        let f = fs::File::open("/proc/self/exe").ok()?;
        // SAFETY: a private read-only mapping of kerf's own executable, which the kernel does
        // not let anyone write while it runs (ETXTBSY); only its headers and notes are read.
        let map = unsafe { memmap2::Mmap::map(&f) }.ok()?;
        kerf_analysis::image::build_id_of(&map).filter(|id| !id.is_empty() && id.len() < 256)
    });
    id.as_deref()
}

/// A cache directory checked to be private to this user, held open.
pub struct CacheDir {
    fd: OwnedFd,
    path: PathBuf,
}

fn cstring(p: &OsStr) -> io::Result<CString> {
    CString::new(p.as_bytes()).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `fstat` of an open descriptor.
fn fstat(fd: &OwnedFd) -> io::Result<libc::stat> {
    // SAFETY: stat is plain data; fstat fills it for a descriptor we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: `fd` is open and `st` is a valid out-pointer.
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// `openat(dir, name, flags, mode)` as an owned descriptor.
fn openat(dir: Option<&OwnedFd>, name: &OsStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let c = cstring(name)?;
    let at = dir.map_or(libc::AT_FDCWD, |d| d.as_raw_fd());
    // SAFETY: `c` is NUL-terminated and lives across the call; the result is checked.
    let fd = unsafe { libc::openat(at, c.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl CacheDir {
    /// Open (creating it mode 0700 if missing) the cache directory `path` and check that it
    /// is private to the effective user; see the module documentation.
    pub fn open(path: &Path) -> Result<CacheDir, CacheError> {
        let path = std::path::absolute(path).map_err(|err| CacheError::Io {
            path: path.into(),
            op: "resolve",
            err,
        })?;
        let unsafe_ = |p: &Path, why: String| CacheError::Unsafe { path: p.into(), why };
        let (Some(parent), Some(name)) = (path.parent(), path.file_name()) else {
            return Err(unsafe_(&path, "not a directory of its own".into()));
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&path)
            .map_err(|err| CacheError::Io { path: path.clone(), op: "create", err })?;
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        // Every directory above: only this user or root may change what its names lead to.
        let parent = fs::canonicalize(parent).map_err(|err| CacheError::Io {
            path: parent.into(),
            op: "resolve",
            err,
        })?;
        for d in parent.ancestors() {
            let m = fs::metadata(d).map_err(|err| CacheError::Io {
                path: d.into(),
                op: "stat",
                err,
            })?;
            let sticky = m.mode() & libc::S_ISVTX != 0;
            if m.uid() != me && m.uid() != 0 {
                return Err(unsafe_(d, format!("owned by uid {}, not by you or root", m.uid())));
            }
            if m.mode() & 0o022 != 0 && !sticky {
                return Err(unsafe_(d, "writable by other users".into()));
            }
        }
        let pfd = openat(None, parent.as_os_str(), libc::O_DIRECTORY | libc::O_RDONLY, 0)
            .map_err(|err| CacheError::Io { path: parent.clone(), op: "open", err })?;
        let flags = libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_RDONLY;
        let fd = openat(Some(&pfd), name, flags, 0).map_err(|err| match err.raw_os_error() {
            Some(libc::ELOOP) | Some(libc::ENOTDIR) => {
                unsafe_(&path, "a symlink or not a directory".into())
            }
            _ => CacheError::Io { path: path.clone(), op: "open", err },
        })?;
        let st =
            fstat(&fd).map_err(|err| CacheError::Io { path: path.clone(), op: "stat", err })?;
        if st.st_uid != me {
            return Err(unsafe_(&path, format!("owned by uid {}, not by you", st.st_uid)));
        }
        if st.st_mode & 0o022 != 0 {
            return Err(unsafe_(&path, "writable by other users".into()));
        }
        Ok(CacheDir { fd, path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remove entry `key` and every file beside it (its return facts, stamps, hints); what
    /// cannot be removed is left. For an entry that failed a check where no new analysis can
    /// replace it at once (an image read from the kernel).
    pub fn remove(&self, key: &str) {
        self.remove_where(|name| name.starts_with(key));
    }

    /// Remove the entries of live image `image` (with the files beside it) but the newest
    /// [`LIVE_KEPT`], `keep` always among them, so that the texts of earlier boots do not pile
    /// up. More than one: a text that changes and changes back (kprobes on ftrace sites,
    /// another session's splices in and out) finds its entry again.
    pub fn keep_only_live(&self, image: &str, keep: &str) {
        let prefix = live_prefix(image);
        let mut entries: Vec<((i64, i64), String)> = self
            .names()
            .into_iter()
            .filter(|n| n.starts_with(&prefix) && n.ends_with(".bin") && n != keep)
            .filter_map(|n| Some((self.modified(&n)?, n)))
            .collect();
        entries.sort_by(|a, b| b.cmp(a));
        for (_, old) in entries.iter().skip(LIVE_KEPT - 1) {
            self.remove(old);
        }
    }

    /// When file `name` of the directory was last written (seconds, nanoseconds), not
    /// following a symlink.
    fn modified(&self, name: &str) -> Option<(i64, i64)> {
        let c = CString::new(name).ok()?;
        // SAFETY: plain data that fstatat fills in.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        let flags = libc::AT_SYMLINK_NOFOLLOW;
        // SAFETY: a NUL-terminated name relative to the open directory, and a valid `stat`.
        let r = unsafe { libc::fstatat(self.fd.as_raw_fd(), c.as_ptr(), &mut st, flags) };
        (r == 0).then_some((st.st_mtime, st.st_mtime_nsec))
    }

    /// The names in the directory, read through its descriptor.
    fn names(&self) -> Vec<String> {
        let listed = format!("/proc/self/fd/{}", self.fd.as_raw_fd());
        let Ok(entries) = fs::read_dir(listed) else { return Vec::new() };
        entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect()
    }

    /// Unlink each file of the directory whose name `doomed` picks (relative to the
    /// directory's descriptor, as every other access).
    fn remove_where(&self, doomed: impl Fn(&str) -> bool) {
        for name in self.names().into_iter().filter(|n| doomed(n)) {
            if let Ok(c) = CString::new(name) {
                // SAFETY: a NUL-terminated name, relative to the directory's open descriptor;
                // a failure leaves the file, which is all this can do about it.
                unsafe { libc::unlinkat(self.fd.as_raw_fd(), c.as_ptr(), 0) };
            }
        }
    }

    /// The analysis stored under `key` for the image whose bytes have `digest` (computed by
    /// `digest`, on a thread of its own while the entry is read), with its cheap checks done
    /// (see the module documentation). Returns the digest, for [`CacheDir::store`], and
    /// `Ok(None)`: no entry; `Err(Rejected)`: an entry that must not be used (analyse again
    /// and store over it).
    pub fn load(
        &self,
        key: &str,
        digest: impl FnOnce() -> [u8; 32] + Send,
    ) -> ([u8; 32], Result<Option<Loaded>, CacheError>) {
        std::thread::scope(|s| {
            let image = s.spawn(digest);
            let entry = self.read(key).map(|b| b.map(|bytes| self.unpack(key, &bytes)));
            let digest = image.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
            let loaded = match entry {
                Ok(Some(Ok((stored, sum, a)))) if stored == digest => Checker::new(&a)
                    .map(|c| Some((a, c, sum)))
                    .map_err(|e| self.rejected(key, format!("does not match the image: {e}"))),
                Ok(Some(Ok(_))) => {
                    Err(self.rejected(key, "made from other bytes than this image's".into()))
                }
                Ok(Some(Err(e))) => Err(e),
                Ok(None) => Ok(None),
                Err(e) => Err(e),
            };
            (digest, loaded)
        })
    }

    /// The error for entry `key`, rejected for `why` (analysed again and stored over).
    pub(crate) fn rejected(&self, key: &str, why: String) -> CacheError {
        CacheError::Rejected { path: self.path.join(key), why }
    }

    /// The bytes of the entry under `key`, mapped only if it is a regular file of this user's
    /// (`Ok(None)`: there is none).
    ///
    /// Mapped, not read: a read copied libLLVM-14's 195 MB entry into fresh memory, and the
    /// page faults, zeroing and copy took about as much time as decoding it. Mapping it is
    /// sound here because nobody but this user (or root) can write the file (the directory's
    /// checks above), and kerf itself never writes an entry in place (it renames a new file
    /// over it, which leaves the mapped file as it was): the bytes the checksum covers are the
    /// bytes decoded. Someone who can write the file could race the two, but could as well
    /// write a new entry with a right checksum; what is decoded is then still checked against
    /// the image before anything is spliced from it (`crate::checked`).
    fn read(&self, key: &str) -> Result<Option<memmap2::Mmap>, CacheError> {
        let path = self.path.join(key);
        let flags = libc::O_RDONLY | libc::O_NOFOLLOW;
        let f = match openat(Some(&self.fd), OsStr::new(key), flags, 0) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(self.rejected(key, "a symlink".into()))
            }
            Err(err) => return Err(CacheError::Io { path, op: "open", err }),
        };
        let st = fstat(&f).map_err(|err| CacheError::Io { path: path.clone(), op: "stat", err })?;
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        if st.st_mode & libc::S_IFMT != libc::S_IFREG || st.st_uid != me {
            return Err(self.rejected(key, "not a regular file of yours".into()));
        }
        if st.st_size as u64 > MAX_FILE {
            return Err(self.rejected(key, format!("{} bytes", st.st_size)));
        }
        // SAFETY: a private read-only mapping of a regular file of this user's; see above for
        // why its bytes do not change under the reader. (Pages are mapped in one go: both the
        // checksum and the decoder read all of them.)
        let map = unsafe { memmap2::MmapOptions::new().populate().map(&fs::File::from(f)) };
        map.map(Some).map_err(|err| CacheError::Io { path, op: "map", err })
    }

    /// The digest an entry's header records, its checksum and its decoded analysis, once its
    /// format, key and checksum hold.
    fn unpack(&self, key: &str, bytes: &[u8]) -> Result<Unpacked<Analysis>, CacheError> {
        self.unpack_with(key, bytes, decode)
    }

    /// The digest the header of file `key` records, its checksum and its payload decoded by
    /// `decode`, once the format, key and checksum hold (every file of the cache has the same
    /// header). The checksum is computed on a thread of its own while the payload decodes on
    /// this one.
    fn unpack_with<T>(
        &self,
        key: &str,
        bytes: &[u8],
        decode: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<Unpacked<T>, CacheError> {
        let entry = parse(bytes, key).map_err(|w| self.rejected(key, w.into()))?;
        let summed = std::thread::scope(|s| {
            let sum = s.spawn(|| checksum(key, &entry.digest, entry.payload) == entry.sum);
            let decoded = decode(entry.payload);
            (sum.join().unwrap_or_else(|p| std::panic::resume_unwind(p)), decoded)
        });
        match summed {
            (false, _) => Err(self.rejected(key, "checksum mismatch".into())),
            (true, Err(e)) => Err(self.rejected(key, format!("does not decode: {e}"))),
            (true, Ok(a)) => {
                let sum = entry.sum.try_into().expect("parse takes 32 bytes of checksum");
                Ok((entry.digest, sum, a))
            }
        }
    }

    /// Store an analysis under `key` (see the module documentation for how). Failures are
    /// for the caller to report as a warning: the cache is an optimisation.
    pub fn store(&self, key: &str, digest: &[u8; 32], a: &Analysis) -> Result<(), CacheError> {
        let path = self.path.join(key);
        let io = |op, err| CacheError::Io { path: path.clone(), op, err };
        let payload = encode(a).map_err(|e| io("encode", io::Error::other(e)))?;
        self.write_entry(key, digest, &payload).map(|_| ())
    }

    /// Store the JIT's return facts of the image whose analysis is entry `key` in a file of
    /// their own beside it ([`facts_key`]), with the same header, digest and checksum as an
    /// entry. They are written the first time a JIT solves them and checked, not trusted,
    /// when read ([`kerf_analysis::liveness::check_return_facts`]). Returns the file's
    /// checksum (for a [`Stamp`]).
    pub fn store_facts(
        &self,
        key: &str,
        digest: &[u8; 32],
        facts: &[ReturnFacts],
    ) -> Result<[u8; 32], CacheError> {
        let name = facts_key(key);
        let payload = codec().serialize(facts).map_err(|e| CacheError::Io {
            path: self.path.join(&name),
            op: "encode",
            err: io::Error::other(e),
        })?;
        self.write_entry(&name, digest, &payload)
    }

    /// The return facts stored beside entry `key` for the image whose bytes have `digest`,
    /// with the file's checksum (`Ok(None)`: none; `Err(Rejected)`: damaged, foreign, or
    /// made from other bytes).
    pub fn load_facts(
        &self,
        key: &str,
        digest: &[u8; 32],
    ) -> Result<Option<KeptFacts>, CacheError> {
        let kept = self.load_beside(&facts_key(key), digest, |payload| {
            let limit = codec().with_limit(payload.len() as u64);
            limit.deserialize::<Vec<ReturnFacts>>(payload).map_err(|e| e.to_string())
        })?;
        Ok(kept.map(|(sum, facts)| (facts, sum)))
    }

    /// Store the entries (image addresses) of the functions that ran in the runs of a JIT of
    /// the image whose analysis is entry `key` from the roots that hash to `roots`, in a file
    /// of their own beside the entry ([`hint_key`]): the next run from the same roots
    /// translates them ahead, on every core, and nothing else of the image (what else it
    /// needs comes on demand). Same header, digest and checksum as an entry; read as a
    /// hint, never trusted (an address that is no function's entry is dropped).
    pub fn store_hint(
        &self,
        key: &str,
        digest: &[u8; 32],
        roots: u64,
        entries: &[u64],
    ) -> Result<(), CacheError> {
        let payload: Vec<u8> = entries.iter().flat_map(|e| e.to_le_bytes()).collect();
        self.write_entry(&hint_key(key, roots), digest, &payload).map(|_| ())
    }

    /// The entries stored by [`CacheDir::store_hint`] (`Ok(None)`: none; `Err(Rejected)`:
    /// damaged, foreign, or made from other bytes).
    pub fn load_hint(
        &self,
        key: &str,
        digest: &[u8; 32],
        roots: u64,
    ) -> Result<Option<Vec<u64>>, CacheError> {
        let kept = self.load_beside(&hint_key(key, roots), digest, |payload| {
            if payload.len() % 8 != 0 {
                return Err(format!("{} bytes: not a whole number of addresses", payload.len()));
            }
            let words = payload.chunks_exact(8);
            Ok(words.map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes"))).collect())
        })?;
        Ok(kept.map(|(_, entries)| entries))
    }

    /// Keep how often blocks ran in a JIT run from roots `roots` and how often their
    /// branches' sides were taken (image addresses), for the next run's counter placement
    /// ([`weights_key`]). Four words a block: start, count, taken, not taken (both
    /// [`NO_SIDES`] where they were not worked out).
    pub fn store_weights(
        &self,
        key: &str,
        digest: &[u8; 32],
        roots: u64,
        weights: &[Ran],
    ) -> Result<(), CacheError> {
        let payload: Vec<u8> = weights
            .iter()
            .flat_map(|r| {
                let [t, n] = r.sides.unwrap_or([NO_SIDES; 2]);
                [r.start, r.count, t, n].into_iter().flat_map(u64::to_le_bytes)
            })
            .collect();
        self.write_entry(&weights_key(key, roots), digest, &payload).map(|_| ())
    }

    /// The weights stored by [`CacheDir::store_weights`] (`Ok(None)`: none).
    pub fn load_weights(
        &self,
        key: &str,
        digest: &[u8; 32],
        roots: u64,
    ) -> Result<Option<Vec<Ran>>, CacheError> {
        let kept = self.load_beside(&weights_key(key, roots), digest, |payload| {
            if payload.len() % 32 != 0 {
                return Err(format!("{} bytes: not a whole number of blocks", payload.len()));
            }
            let word = |p: &[u8], k: usize| {
                u64::from_le_bytes(p[8 * k..8 * k + 8].try_into().expect("8 bytes"))
            };
            Ok(payload
                .chunks_exact(32)
                .map(|p| {
                    let sides = [word(p, 2), word(p, 3)];
                    let sides = (sides != [NO_SIDES; 2]).then_some(sides);
                    Ran { start: word(p, 0), count: word(p, 1), sides }
                })
                .collect())
        })?;
        Ok(kept.map(|(_, w)| w))
    }

    /// Keep the counting shape of the analysis that is entry `key` ([`shape_key`]): `build`
    /// (kerf's build and the analysis's size, hashed: the shape is kerf's code's reading of
    /// that analysis), how many shared starts, the shared starts, then the landings, a word
    /// each.
    pub fn store_shape(
        &self,
        key: &str,
        digest: &[u8; 32],
        build: u64,
        shape: &ModuleShape,
    ) -> Result<(), CacheError> {
        let (shared, landings) = (shape.shared.iter(), shape.landings.iter());
        let words = [build, shape.shared.len() as u64].into_iter();
        let words = words.chain(shared.chain(landings).map(|a| a.0));
        let payload: Vec<u8> = words.flat_map(u64::to_le_bytes).collect();
        self.write_entry(&shape_key(key), digest, &payload).map(|_| ())
    }

    /// The shape stored by [`CacheDir::store_shape`] for kerf's build `build` (`Ok(None)`:
    /// none, or another build's).
    pub fn load_shape(
        &self,
        key: &str,
        digest: &[u8; 32],
        build: u64,
    ) -> Result<Option<ModuleShape>, CacheError> {
        let kept = self.load_beside(&shape_key(key), digest, |payload| {
            if payload.len() % 8 != 0 || payload.len() < 16 {
                return Err(format!("{} bytes: not a shape", payload.len()));
            }
            let words: Vec<u64> = (payload.chunks_exact(8))
                .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
                .collect();
            let shared = usize::try_from(words[1]).unwrap_or(usize::MAX);
            if shared > words.len() - 2 {
                return Err(format!("{shared} shared starts in {} words", words.len()));
            }
            let addrs = |w: &[u64]| w.iter().map(|&a| kerf_arch::ImageAddr(a)).collect();
            let (s, l) = words[2..].split_at(shared);
            Ok((words[0], ModuleShape { shared: addrs(s), landings: addrs(l) }))
        })?;
        Ok(kept.and_then(|(_, (b, shape))| (b == build).then_some(shape)))
    }

    /// Keep the JIT's reservation sizes for every function of the image whose analysis is
    /// entry `key` ([`rooms_key`]), one [`KeptRoom`] per set of translation options, newest
    /// first. Same header, digest and checksum as an entry.
    pub fn store_rooms(
        &self,
        key: &str,
        digest: &[u8; 32],
        rooms: &[KeptRoom],
    ) -> Result<(), CacheError> {
        let payload: Vec<u8> =
            rooms.iter().flat_map(|&(o, c, d)| [o, c, d]).flat_map(u64::to_le_bytes).collect();
        self.write_entry(&rooms_key(key), digest, &payload).map(|_| ())
    }

    /// The sizes stored by [`CacheDir::store_rooms`] (`Ok(None)`: none).
    pub fn load_rooms(
        &self,
        key: &str,
        digest: &[u8; 32],
    ) -> Result<Option<Vec<KeptRoom>>, CacheError> {
        let kept = self.load_beside(&rooms_key(key), digest, |payload| {
            if payload.len() % 24 != 0 {
                return Err(format!("{} bytes: not a whole number of sizes", payload.len()));
            }
            let word = |w: &[u8]| u64::from_le_bytes(w.try_into().expect("8 bytes"));
            Ok((payload.chunks_exact(24))
                .map(|r| (word(&r[..8]), word(&r[8..16]), word(&r[16..])))
                .collect())
        })?;
        Ok(kept.map(|(_, r)| r))
    }

    /// Keep `stamp` beside entry `key` of the image whose bytes have `digest` ([`Stamp`];
    /// [`checked_key`]), written as an entry is.
    pub fn store_stamp(
        &self,
        key: &str,
        digest: &[u8; 32],
        stamp: &Stamp,
    ) -> Result<(), CacheError> {
        self.write_entry(&checked_key(key), digest, &stamp.encode()).map(|_| ())
    }

    /// The stamp kept beside entry `key` for the image whose bytes have `digest` (`Ok(None)`:
    /// none; `Err(Rejected)`: damaged, foreign, or made for other bytes). Whether it vouches
    /// for anything is [`Stamp::vouches`]'s to say.
    pub fn load_stamp(&self, key: &str, digest: &[u8; 32]) -> Result<Option<Stamp>, CacheError> {
        let kept = self.load_beside(&checked_key(key), digest, Stamp::decode)?;
        Ok(kept.map(|(_, stamp)| stamp))
    }

    /// File `name` kept beside an entry for the image whose bytes have `digest`, its payload
    /// decoded by `decode`, with its checksum (`Ok(None)`: no such file; `Err(Rejected)`:
    /// damaged, foreign, or made from other bytes).
    fn load_beside<T>(
        &self,
        name: &str,
        digest: &[u8; 32],
        decode: impl FnOnce(&[u8]) -> Result<T, String>,
    ) -> Result<Option<([u8; 32], T)>, CacheError> {
        let Some(bytes) = self.read(name)? else { return Ok(None) };
        let (made_from, sum, payload) = self.unpack_with(name, &bytes, decode)?;
        if made_from != *digest {
            return Err(self.rejected(name, "made from other bytes than this image's".into()));
        }
        Ok(Some((sum, payload)))
    }

    /// Write `payload` under `key` with its header (format, key, `digest`, checksum): to a
    /// fresh temporary file renamed over the entry. Returns the checksum.
    fn write_entry(
        &self,
        key: &str,
        digest: &[u8; 32],
        payload: &[u8],
    ) -> Result<[u8; 32], CacheError> {
        let path = self.path.join(key);
        let io = |op, err| CacheError::Io { path: path.clone(), op, err };
        let mut head = Vec::with_capacity(8 + 4 + 8 + key.len() + 32 + 8 + 32);
        head.extend_from_slice(MAGIC);
        head.extend_from_slice(&FORMAT.to_le_bytes());
        head.extend_from_slice(&(key.len() as u64).to_le_bytes());
        head.extend_from_slice(key.as_bytes());
        head.extend_from_slice(digest);
        head.extend_from_slice(&(payload.len() as u64).to_le_bytes());
        let sum = checksum(key, digest, payload);
        head.extend_from_slice(&sum);
        // A fresh name each try: a temporary file left by a killed kerf (or planted) is
        // never opened, let alone followed.
        let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW;
        let (tmp, f) = (0..16)
            .find_map(|n| {
                let tmp = format!(".{key}.{}.{n}.tmp", std::process::id());
                match openat(Some(&self.fd), OsStr::new(&tmp), flags, 0o600) {
                    Ok(f) => Some(Ok((tmp, f))),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => None,
                    Err(e) => Some(Err(e)),
                }
            })
            .unwrap_or_else(|| Err(io::Error::from_raw_os_error(libc::EEXIST)))
            .map_err(|e| io("create a temporary file for", e))?;
        let mut f = fs::File::from(f);
        let written = f.write_all(&head).and_then(|()| f.write_all(payload));
        let tmp_c = cstring(OsStr::new(&tmp)).map_err(|e| io("name", e))?;
        let key_c = cstring(OsStr::new(key)).map_err(|e| io("name", e))?;
        let d = self.fd.as_raw_fd();
        let renamed = written.and_then(|()| {
            // SAFETY: both names are NUL-terminated and live across the call; `d` is open.
            // rename replaces whatever is at `key` (a symlink included) without following it.
            if unsafe { libc::renameat(d, tmp_c.as_ptr(), d, key_c.as_ptr()) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
        if let Err(e) = renamed {
            // SAFETY: as above; removes only the temporary file this call created.
            unsafe { libc::unlinkat(d, tmp_c.as_ptr(), 0) };
            return Err(io("write", e));
        }
        Ok(sum)
    }
}

/// The key of the entry for an image read from the running kernel (its core text, or a
/// module's): named by the image and by the digest of its bytes and symbols, since memory has
/// no build-id that covers what is in it now (the text changes at each boot's relocation, at
/// a static key flipped, under ftrace or another session's splices). A changed text is then a
/// new key, never an entry rejected; [`CacheDir::keep_only_live`] drops all but the newest.
pub fn live_key(image: &str, digest: &[u8; 32]) -> String {
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("{}{hex}.bin", live_prefix(image))
}

/// What every key of live image `image` starts with ([`live_key`]); names of modules are
/// kept to the characters a file name takes anywhere.
fn live_prefix(image: &str) -> String {
    let name: String = image
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '-' })
        .collect();
    format!("v{FORMAT}-live-{name}-")
}

/// The name of the file beside cache entry `key` that holds the JIT's return facts of the
/// same image ([`CacheDir::store_facts`]).
pub fn facts_key(key: &str) -> String {
    format!("{key}.returns")
}

/// The name of the file beside cache entry `key` that holds what a build of kerf checked of
/// it ([`CacheDir::store_stamp`]).
pub fn checked_key(key: &str) -> String {
    format!("{key}.checked")
}

/// The name of the file beside cache entry `key` that holds the functions that ran in
/// JIT runs from roots `roots` (a hash of them) ([`CacheDir::store_hint`]). (Until
/// 2026-12, `<key>.jit-<roots>` held those translated on demand: no longer read.)
pub fn hint_key(key: &str, roots: u64) -> String {
    format!("{key}.ran-{roots:016x}")
}

/// The name of the file beside cache entry `key` that holds how often blocks ran in the last
/// JIT run from roots `roots` that counted them ([`CacheDir::store_weights`]). (Until
/// 2026-12, `<key>.weights-<roots>` held blocks' counts alone, two words a block: no longer
/// read.)
pub fn weights_key(key: &str, roots: u64) -> String {
    format!("{key}.flows-{roots:016x}")
}

/// The name of the file beside cache entry `key` that holds the counting shape of its
/// analysis ([`CacheDir::store_shape`]).
pub fn shape_key(key: &str) -> String {
    format!("{key}.shape")
}

/// A block's sides in a weights file where they were not worked out.
pub const NO_SIDES: u64 = u64::MAX;

/// The JIT's reservation for every function of an image under one set of translation
/// options ([`CacheDir::store_rooms`]): the options' hash (which names kerf's build), the
/// code room's bytes and the data area's.
pub type KeptRoom = (u64, u64, u64);

/// The name of the file beside cache entry `key` that holds the JIT's reservation sizes for
/// the whole image ([`CacheDir::store_rooms`]).
pub fn rooms_key(key: &str) -> String {
    format!("{key}.rooms")
}

/// A cache file taken apart: the digest its header records, its checksum and its payload.
struct Parsed<'b> {
    digest: [u8; 32],
    sum: &'b [u8],
    payload: &'b [u8],
}

/// Cache file `bytes` taken apart, if its header names this format and `key` and its sizes
/// add up; else what is wrong. (The checksum is for the caller to check.)
fn parse<'b>(bytes: &'b [u8], key: &str) -> Result<Parsed<'b>, &'static str> {
    let mut at = 0usize;
    let mut take = |n: usize| -> Result<&'b [u8], &'static str> {
        let s = bytes.get(at..at.checked_add(n).ok_or("truncated")?).ok_or("truncated")?;
        at += n;
        Ok(s)
    };
    let u64_of = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap_or_default());
    if take(8)? != MAGIC {
        return Err("not a kerf cache file");
    }
    if take(4)? != FORMAT.to_le_bytes() {
        return Err("another format version");
    }
    let key_len = u64_of(take(8)?);
    if key_len != key.len() as u64 || take(key.len())? != key.as_bytes() {
        return Err("made under another key");
    }
    let digest = take(32)?.try_into().map_err(|_| "truncated")?;
    let len = usize::try_from(u64_of(take(8)?)).map_err(|_| "truncated")?;
    let sum = take(32)?;
    let payload = take(len)?;
    if at != bytes.len() {
        return Err("trailing bytes");
    }
    Ok(Parsed { digest, sum, payload })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn analysis() -> Analysis {
        let path = "/usr/lib/x86_64-linux-gnu/libc.so.6";
        let data = std::fs::read(path).expect("libc");
        let image = kerf_analysis::image::Image::from_elf(path, &data).expect("parse");
        kerf_analysis::analyze(&image, &kerf_analysis::Quiet)
    }

    /// A payload decodes to what was encoded (encoded again, byte for byte), and one whose
    /// part table lies (no parts, too many, a part past the end, bytes after the last, a
    /// short table) is refused rather than read out of bounds.
    #[test]
    fn payloads_round_trip_and_a_lying_part_table_is_refused() {
        let a = analysis();
        let p = encode(&a).unwrap();
        let back = decode(&p).unwrap();
        assert_eq!(encode(&back).unwrap(), p);
        assert_eq!(back.cfg.blocks.len(), a.cfg.blocks.len());
        assert!(a.cfg.blocks.len() > 1000);
        let n = u64::from_le_bytes(p[..8].try_into().unwrap()) as usize;
        assert_eq!(n, BODY_PARTS + 1);
        let with = |at: usize, v: u64| {
            let mut q = p.clone();
            q[at..at + 8].copy_from_slice(&v.to_le_bytes());
            q
        };
        assert!(decode(&with(0, 0)).is_err());
        assert!(decode(&with(0, BODY_PARTS as u64 + 2)).is_err());
        assert!(decode(&with(8, p.len() as u64)).is_err());
        assert!(decode(&with(8, u64::MAX)).is_err());
        let mut longer = p.clone();
        longer.push(0);
        assert!(decode(&longer).is_err());
        assert!(decode(&p[..20]).is_err());
    }

    /// A stamp decodes to what was encoded, with and without facts; a payload cut short, with
    /// a flag other than 0 or 1, or with bytes after it is refused.
    #[test]
    fn stamps_round_trip_and_a_malformed_one_is_refused() {
        for facts in [None, Some([3u8; 32])] {
            let s = Stamp { kerf: vec![1, 2, 3], entry: [9; 32], facts };
            let b = s.encode();
            assert_eq!(Stamp::decode(&b), Ok(s));
            for n in 0..b.len() {
                assert!(Stamp::decode(&b[..n]).is_err(), "{n} bytes");
            }
            let mut longer = b.clone();
            longer.push(0);
            assert!(Stamp::decode(&longer).is_err());
        }
        let mut flag = Stamp { kerf: vec![7], entry: [0; 32], facts: None }.encode();
        *flag.last_mut().unwrap() = 2;
        assert!(Stamp::decode(&flag).is_err());
    }

    /// A live image's key follows its bytes; keeping the newest entries of an image removes its
    /// older ones and the files beside them, and nothing of another image or a file's entry;
    /// removing an entry takes its side files too.
    #[test]
    fn live_entries_the_newest_per_image_and_removal_takes_the_side_files() {
        let dir = std::env::temp_dir().join(format!("kerf-live-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cache = CacheDir::open(&dir).unwrap();
        let core: Vec<String> =
            (1..=LIVE_KEPT as u8 + 1).map(|i| live_key("vmlinux", &[i; 32])).collect();
        let (old, new) = (&core[0], &core[LIVE_KEPT]);
        assert_ne!(old, new);
        assert_eq!(&live_key("vmlinux", &[1; 32]), old);
        let brd = live_key("brd", &[1; 32]);
        let odd = live_key("../x y", &[1; 32]);
        assert!(!odd.contains('/') && !odd.contains(' '), "{odd}");
        let file = key(None, Path::new("/nonexistent/vmlinux"), None, None);
        // Written oldest first, a moment apart (the newest are kept by modification time).
        for k in core.iter().chain([&brd, &file]) {
            cache.write_entry(k, &[0; 32], &[1]).unwrap();
            cache.write_entry(&checked_key(k), &[0; 32], &[1]).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let names = || {
            let mut v: Vec<String> = fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().into_string().unwrap())
                .collect();
            v.sort();
            v
        };
        // The oldest goes, with its stamp; `keep` stays even when it is not among the newest.
        cache.keep_only_live("vmlinux", new);
        let kept = core[1..].iter().chain([&brd, &file]);
        let mut want: Vec<String> = kept.flat_map(|k| [k.clone(), checked_key(k)]).collect();
        want.sort();
        assert_eq!(names(), want);
        cache.keep_only_live("vmlinux", &core[1]);
        assert_eq!(names(), want, "the newest {LIVE_KEPT} are kept");
        cache.remove(&brd);
        want.retain(|n| !n.starts_with(&brd));
        assert_eq!(names(), want);
        fs::remove_dir_all(&dir).unwrap();
    }

    /// Return facts come back as stored for the digest they were stored with; a flipped
    /// payload byte, a file cut short, and another image's digest are each refused.
    #[test]
    fn return_facts_round_trip_and_damage_is_refused() {
        let dir = std::env::temp_dir().join(format!("kerf-facts-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cache = CacheDir::open(&dir).unwrap();
        let facts = vec![ReturnFacts::default(); 3];
        let (key, digest) = ("some-image", [7u8; 32]);
        let sum = cache.store_facts(key, &digest, &facts).unwrap();
        assert_eq!(cache.load_facts(key, &digest).unwrap(), Some((facts, sum)));
        assert_eq!(cache.load_facts("other-image", &digest).unwrap(), None);
        let refused = |why: &str| match cache.load_facts(key, &digest) {
            Err(CacheError::Rejected { why: w, .. }) => assert!(w.contains(why), "{w}"),
            other => panic!("expected {why}, got {other:?}"),
        };
        assert!(matches!(cache.load_facts(key, &[8u8; 32]), Err(CacheError::Rejected { .. })));
        let file = dir.join(facts_key(key));
        let good = fs::read(&file).unwrap();
        let mut bad = good.clone();
        *bad.last_mut().unwrap() ^= 1;
        fs::write(&file, &bad).unwrap();
        refused("checksum mismatch");
        fs::write(&file, &good[..good.len() - 1]).unwrap();
        refused("truncated");
        fs::remove_dir_all(&dir).unwrap();
    }

    /// The JIT's kept room sizes come back as stored, for their digest only; a flipped byte
    /// or a payload that is no whole number of sizes is refused.
    #[test]
    fn jit_rooms_round_trip_and_damage_is_refused() {
        let dir = std::env::temp_dir().join(format!("kerf-rooms-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cache = CacheDir::open(&dir).unwrap();
        let (key, digest) = ("some-image", [7u8; 32]);
        assert_eq!(cache.load_rooms(key, &digest).unwrap(), None, "nothing kept yet");
        let rooms = vec![(0xabc_u64, 1 << 20, 4096_u64), (0xdef, 3 << 20, 8192)];
        cache.store_rooms(key, &digest, &rooms).unwrap();
        assert_eq!(cache.load_rooms(key, &digest).unwrap(), Some(rooms));
        assert!(matches!(cache.load_rooms(key, &[8u8; 32]), Err(CacheError::Rejected { .. })));
        let file = dir.join(rooms_key(key));
        let mut bad = fs::read(&file).unwrap();
        *bad.last_mut().unwrap() ^= 1;
        fs::write(&file, &bad).unwrap();
        assert!(matches!(cache.load_rooms(key, &digest), Err(CacheError::Rejected { .. })));
        cache.write_entry(&rooms_key(key), &digest, &[0; 16]).unwrap();
        match cache.load_rooms(key, &digest) {
            Err(CacheError::Rejected { why, .. }) => assert!(why.contains("whole number"), "{why}"),
            other => panic!("a 16-byte payload read as {other:?}"),
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A JIT's weights come back as stored, per set of roots, blocks with their branches'
    /// sides and without; the file of an earlier kerf (two words a block, under another name)
    /// is not read, and a payload that is no whole number of blocks is refused.
    #[test]
    fn jit_weights_round_trip_with_sides_and_damage_is_refused() {
        let dir = std::env::temp_dir().join(format!("kerf-weights-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cache = CacheDir::open(&dir).unwrap();
        let (key, digest) = ("some-image", [7u8; 32]);
        let ran = vec![
            Ran { start: 0x1040, count: 9, sides: Some([0, 9]) },
            Ran { start: 0x1050, count: 4, sides: None },
            Ran { start: 0x1060, count: 1 << 40, sides: Some([3, (1 << 40) - 3]) },
        ];
        cache.store_weights(key, &digest, 0xabc, &ran).unwrap();
        assert_eq!(cache.load_weights(key, &digest, 0xabc).unwrap(), Some(ran));
        assert_eq!(cache.load_weights(key, &digest, 0xabd).unwrap(), None, "other roots");
        cache.write_entry(&format!("{key}.weights-{:016x}", 1), &digest, &[0; 32]).unwrap();
        assert_eq!(cache.load_weights(key, &digest, 1).unwrap(), None, "the old file");
        cache.write_entry(&weights_key(key, 1), &digest, &[0; 16]).unwrap();
        match cache.load_weights(key, &digest, 1) {
            Err(CacheError::Rejected { why, .. }) => assert!(why.contains("whole number"), "{why}"),
            other => panic!("a 16-byte payload read as {other:?}"),
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A counting shape comes back as stored for the build that stored it, and not for
    /// another build; a payload whose count of shared starts runs past its end is refused.
    #[test]
    fn counting_shapes_round_trip_per_build_and_damage_is_refused() {
        let dir = std::env::temp_dir().join(format!("kerf-shape-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cache = CacheDir::open(&dir).unwrap();
        let (key, digest) = ("some-image", [7u8; 32]);
        let a = kerf_arch::ImageAddr;
        let shape = ModuleShape { shared: vec![a(0x1040)], landings: vec![a(0x2000), a(0x2010)] };
        assert_eq!(cache.load_shape(key, &digest, 5).unwrap(), None, "nothing kept yet");
        cache.store_shape(key, &digest, 5, &shape).unwrap();
        assert_eq!(cache.load_shape(key, &digest, 5).unwrap(), Some(shape.clone()));
        assert_eq!(cache.load_shape(key, &digest, 6).unwrap(), None, "another build's");
        let empty = ModuleShape::default();
        cache.store_shape(key, &digest, 5, &empty).unwrap();
        assert_eq!(cache.load_shape(key, &digest, 5).unwrap(), Some(empty));
        let words: Vec<u8> = [5u64, 3, 0x1040].iter().flat_map(|w| w.to_le_bytes()).collect();
        cache.write_entry(&shape_key(key), &digest, &words).unwrap();
        match cache.load_shape(key, &digest, 5) {
            Err(CacheError::Rejected { why, .. }) => assert!(why.contains("shared"), "{why}"),
            other => panic!("3 shared starts in one word read as {other:?}"),
        }
        fs::remove_dir_all(&dir).unwrap();
    }

    /// A JIT's hint comes back as stored, per set of roots and for its digest only; a
    /// flipped byte or a payload that is no whole number of addresses is refused.
    #[test]
    fn jit_hints_round_trip_per_roots_and_damage_is_refused() {
        let dir = std::env::temp_dir().join(format!("kerf-hint-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let cache = CacheDir::open(&dir).unwrap();
        let (key, digest, entries) = ("some-image", [7u8; 32], vec![0x1040u64, 0x2230]);
        cache.store_hint(key, &digest, 0xabc, &entries).unwrap();
        assert_eq!(cache.load_hint(key, &digest, 0xabc).unwrap(), Some(entries.clone()));
        assert_eq!(cache.load_hint(key, &digest, 0xabd).unwrap(), None, "other roots");
        assert!(matches!(
            cache.load_hint(key, &[8u8; 32], 0xabc),
            Err(CacheError::Rejected { .. })
        ));
        let file = dir.join(hint_key(key, 0xabc));
        let mut bad = fs::read(&file).unwrap();
        *bad.last_mut().unwrap() ^= 1;
        fs::write(&file, &bad).unwrap();
        assert!(matches!(cache.load_hint(key, &digest, 0xabc), Err(CacheError::Rejected { .. })));
        cache.write_entry(&hint_key(key, 1), &digest, &[1, 2, 3]).unwrap();
        match cache.load_hint(key, &digest, 1) {
            Err(CacheError::Rejected { why, .. }) => assert!(why.contains("whole number"), "{why}"),
            other => panic!("a 3-byte payload read as {other:?}"),
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
