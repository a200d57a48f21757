//! Finding an image's separate debug file and adding its symbols: the build-id path under each
//! debug directory, then `.gnu_debuglink` (checked by its CRC-32) beside the image, in its
//! `.debug/` subdirectory and under each debug directory, then the debuginfod servers of
//! `DEBUGINFOD_URLS` (fetched once into kerf's cache directory). Reading the files is done
//! here; checking their bytes and merging their symbols is `kerf_analysis::image::DebugFile`.
//!
//! Every candidate is untrusted: one that is missing is passed over quietly, one that is
//! there but wrong (not a regular file, a bad CRC, another build-id, broken ELF) gives a
//! warning naming it, and the search goes on.

use crate::http;
use kerf_analysis::image::{crc32, DebugFile, DebugFileError, DebugMerge, Image};
use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The largest debug file fetched from a debuginfod server (libLLVM's is ~0.6 GB).
const MAX_FETCH: u64 = 4 << 30;

/// Where and whether to look for debug files.
#[derive(Clone, Debug)]
pub struct DebugOptions {
    pub enabled: bool,
    /// Debug directories: `.build-id/` trees and mirrors of the file system by path.
    pub dirs: Vec<PathBuf>,
    /// debuginfod servers, tried in order.
    pub urls: Vec<String>,
    /// Connecting to a server and each read from it wait at most this long.
    pub timeout: Duration,
}

impl DebugOptions {
    /// From the environment: `KERF_NO_DEBUG_FILES` (set and not `0`: no debug files),
    /// `KERF_DEBUG_DIRS` (colon-separated; default `/usr/lib/debug`), `DEBUGINFOD_URLS`
    /// (space-separated) and `DEBUGINFOD_TIMEOUT` (seconds, default 90, as elfutils).
    pub fn from_env() -> DebugOptions {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
        let enabled = var("KERF_NO_DEBUG_FILES").is_none_or(|v| v == "0");
        let dirs = match var("KERF_DEBUG_DIRS") {
            Some(v) => v.split(':').filter(|d| !d.is_empty()).map(PathBuf::from).collect(),
            None => vec![PathBuf::from("/usr/lib/debug")],
        };
        let urls = var("DEBUGINFOD_URLS")
            .map(|v| v.split_whitespace().map(str::to_string).collect())
            .unwrap_or_default();
        let secs = var("DEBUGINFOD_TIMEOUT").and_then(|v| v.parse().ok()).unwrap_or(90);
        DebugOptions { enabled, dirs, urls, timeout: Duration::from_secs(secs) }
    }

    /// No debug files at all.
    pub fn disabled() -> DebugOptions {
        DebugOptions { enabled: false, ..DebugOptions::from_env() }
    }
}

impl Default for DebugOptions {
    /// [`DebugOptions::from_env`].
    fn default() -> Self {
        DebugOptions::from_env()
    }
}

/// How a debug file was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    BuildId,
    DebugLink,
    Debuginfod {
        url: String,
    },
    /// Fetched from a debuginfod server in an earlier run, kept in kerf's cache directory.
    DebuginfodCache,
}

/// The debug file whose symbols an image takes. They are added ([`merge_symbols`]) only
/// where the analysis is made or checked against the image: a cached analysis has them
/// already (merging libc's 10 k took 2-4 ms of every start).
#[derive(Clone, Debug)]
pub struct DebugFileUsed {
    pub path: PathBuf,
    pub found: Found,
    /// What the merge did, once done.
    pub merge: Option<DebugMerge>,
    /// The file's symbols, read and checked, until merged.
    pub pending: Option<std::sync::Arc<DebugFile>>,
    /// What identifies this file's contents for the analysis cache key: path, size,
    /// modification time and build-id.
    pub identity: String,
}

/// Where an image's symbols came from, for the user.
#[derive(Clone, Debug, Default)]
pub struct SymbolOrigin {
    /// The image's own tables: `.symtab`, `.dynsym`.
    pub own: Vec<&'static str>,
    /// A symbol file (`--symbols`, kallsyms) was added.
    pub symbol_file: bool,
    pub debug_file: Option<DebugFileUsed>,
}

impl std::fmt::Display for SymbolOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if !self.own.is_empty() {
            parts.push(format!("{} of the image", self.own.join(" and ")));
        }
        if self.symbol_file {
            parts.push("the symbol file".to_string());
        }
        if let Some(d) = &self.debug_file {
            let how = match &d.found {
                Found::BuildId => "by build-id".to_string(),
                Found::DebugLink => "by .gnu_debuglink".to_string(),
                Found::Debuginfod { url } => format!("from debuginfod {url}"),
                Found::DebuginfodCache => "fetched from debuginfod earlier".to_string(),
            };
            parts.push(format!(".symtab of {} ({how})", d.path.display()));
        }
        if parts.is_empty() {
            return write!(f, "none");
        }
        write!(f, "{}", parts.join(", "))
    }
}

/// The outcome of a search: the file used, if any, and a warning per candidate refused.
#[derive(Debug, Default)]
pub struct DebugSearch {
    pub used: Option<DebugFileUsed>,
    pub warnings: Vec<String>,
}

/// Servers that failed (not a 404) earlier in this run: not asked again for the next module.
static DEAD_SERVERS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Find the debug file of `image` and read its symbols, which [`merge_symbols`] adds where
/// they are needed. `file` is the image file as read (for
/// a process, possibly under /proc/PID/root); `logical` its path as the user or the process
/// names it, which the debug directories mirror. `cache_dir` holds fetched files.
pub fn find_debug_file(
    image: &Image<'_>,
    file: &Path,
    logical: &Path,
    opts: &DebugOptions,
    cache_dir: Option<&Path>,
) -> DebugSearch {
    let mut search = DebugSearch::default();
    if !opts.enabled {
        return search;
    }
    let own = fs::metadata(file).ok().map(|m| (m.dev(), m.ino()));
    let build_id = image.build_id.as_deref().map(hex).filter(|h| h.len() >= 4);

    // Local candidates, in order, each with the CRC it must have.
    let mut candidates: Vec<(PathBuf, Option<u32>, Found)> = Vec::new();
    // 1. The build-id path in each debug directory.
    if let Some(id) = &build_id {
        for dir in &opts.dirs {
            let path = dir.join(".build-id").join(&id[..2]).join(format!("{}.debug", &id[2..]));
            candidates.push((path, None, Found::BuildId));
        }
    }
    // 2. `.gnu_debuglink`: beside the image, in `.debug/` there, under each debug directory.
    match image.debuglink() {
        Ok(Some(link)) => {
            let mut paths = Vec::new();
            if let Some(parent) = file.parent() {
                paths.push(parent.join(&link.name));
                paths.push(parent.join(".debug").join(&link.name));
            }
            let rel = logical.parent().map(|p| p.strip_prefix("/").unwrap_or(p).to_path_buf());
            for dir in &opts.dirs {
                paths.push(dir.join(rel.as_deref().unwrap_or(Path::new(""))).join(&link.name));
            }
            candidates.extend(paths.into_iter().map(|p| (p, Some(link.crc), Found::DebugLink)));
        }
        Ok(None) => {}
        Err(e) => search.warnings.push(format!("{e}; not followed")),
    }
    for (path, crc, found) in candidates {
        search.used = try_file(image, &path, crc, own, found, &mut search.warnings);
        if search.used.is_some() {
            return search;
        }
    }

    // 3. debuginfod, by build-id, through kerf's cache.
    if let Some(id) = &build_id {
        if !opts.urls.is_empty() {
            search.used = debuginfod(image, id, own, opts, cache_dir, &mut search.warnings);
        }
    }
    search
}

/// Add the symbols of the debug file `used` found ([`find_debug_file`]) to `image`, if
/// not done yet.
pub fn merge_symbols(image: &mut Image<'_>, used: &mut Option<DebugFileUsed>) {
    if let Some(u) = used.as_mut() {
        if let Some(debug) = u.pending.take() {
            u.merge = Some(image.merge_debug_symbols(&debug));
        }
    }
}

/// Check one candidate (its symbols are merged later: [`merge_symbols`]). `None` when it is
/// missing (quietly) or refused (with a warning).
fn try_file(
    image: &Image<'_>,
    path: &Path,
    crc: Option<u32>,
    own: Option<(u64, u64)>,
    found: Found,
    warnings: &mut Vec<String>,
) -> Option<DebugFileUsed> {
    match check_file(image, path, crc, own) {
        Ok(Some((debug, identity))) => Some(DebugFileUsed {
            path: path.to_path_buf(),
            found,
            merge: None,
            pending: Some(std::sync::Arc::new(debug)),
            identity,
        }),
        Ok(None) => None,
        Err(why) => {
            warnings.push(format!("debug file {}: {why}; ignored", path.display()));
            None
        }
    }
}

/// Why a candidate debug file was not used (a warning: the image's own symbols stay).
#[derive(Debug)]
enum Unusable {
    /// Opening or mapping it failed.
    Io {
        op: &'static str,
        err: std::io::Error,
    },
    NotAFile,
    Empty,
    /// Its CRC-32 is not the one the image's `.gnu_debuglink` names.
    Crc {
        have: u32,
        want: u32,
        image: String,
    },
    /// Not an ELF file kerf can read, or its build-id is another build's.
    Debug(DebugFileError),
}

impl fmt::Display for Unusable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unusable::Io { op, err } => write!(f, "{op}: {err}"),
            Unusable::NotAFile => write!(f, "not a regular file"),
            Unusable::Empty => write!(f, "empty file"),
            Unusable::Crc { have, want, image } => write!(
                f,
                "CRC-32 {have:08x} is not the {want:08x} that {image}'s .gnu_debuglink expects \
                 (a debug file of another build)"
            ),
            Unusable::Debug(e) => write!(f, "{e}"),
        }
    }
}

/// Open, read and check one candidate: `Ok(None)` if there is no such file (or it is the
/// image itself), `Err` saying why it was refused.
fn check_file(
    image: &Image<'_>,
    path: &Path,
    crc: Option<u32>,
    own: Option<(u64, u64)>,
) -> Result<Option<(DebugFile, String)>, Unusable> {
    // O_NONBLOCK: a FIFO planted at a debug path must not block kerf in open().
    let f = match fs::OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(Unusable::Io { op: "open", err }),
    };
    let meta = f.metadata().map_err(|err| Unusable::Io { op: "stat", err })?;
    if !meta.is_file() {
        return Err(Unusable::NotAFile);
    }
    if own == Some((meta.dev(), meta.ino())) {
        return Ok(None);
    }
    if meta.len() == 0 {
        return Err(Unusable::Empty);
    }
    // SAFETY: a private read-only mapping. Bytes that change under it (a package upgrade
    // rewriting the file in place) can only make the parse fail or the CRC/build-id check
    // refuse it: every value read is checked as untrusted, and nothing borrowed from the
    // mapping outlives this function.
    let map = unsafe { memmap2::Mmap::map(&f) }.map_err(|err| Unusable::Io { op: "map", err })?;
    if let Some(want) = crc {
        let have = crc32(&map);
        if have != want {
            return Err(Unusable::Crc { have, want, image: image.name.to_string() });
        }
    }
    let debug = DebugFile::parse(&path.display().to_string(), &map).map_err(Unusable::Debug)?;
    image.check_debug_file(&debug).map_err(Unusable::Debug)?;
    let mtime = meta.mtime() as i128 * 1_000_000_000 + i128::from(meta.mtime_nsec());
    let id = debug.build_id.as_deref().map(hex).unwrap_or_default();
    let identity = format!("{}:{}:{mtime}:{id}", path.display(), meta.len());
    Ok(Some((debug, identity)))
}

/// The debug file of build-id `id` from kerf's cache, or fetched from the first server that
/// has it and kept there.
fn debuginfod(
    image: &Image<'_>,
    id: &str,
    own: Option<(u64, u64)>,
    opts: &DebugOptions,
    cache_dir: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Option<DebugFileUsed> {
    let Some(cache_dir) = cache_dir else {
        if !opts.urls.is_empty() {
            warnings.push(
                "debuginfod: no private cache directory to keep fetched debug files in; not asked"
                    .into(),
            );
        }
        return None;
    };
    let dir = cache_dir.join("debuginfod");
    let cached = dir.join(format!("{id}.debug"));
    // A file fetched in an earlier run is checked again like any other candidate.
    let before = warnings.len();
    let used = try_file(image, &cached, None, own, Found::DebuginfodCache, warnings);
    if used.is_some() {
        return used;
    }
    if warnings.len() > before {
        // A damaged or foreign cached copy: fetch it anew.
        let _ = fs::remove_file(&cached);
    }
    for url in &opts.urls {
        if DEAD_SERVERS.lock().map(|d| d.contains(url)).unwrap_or(false) {
            continue;
        }
        let source = format!("{}/buildid/{id}/debuginfo", url.trim_end_matches('/'));
        match fetch(&source, &dir, &cached, opts.timeout) {
            Ok(()) => {
                let found = Found::Debuginfod { url: url.clone() };
                let used = try_file(image, &cached, None, own, found, warnings);
                if used.is_some() {
                    return used;
                }
                // The server sent something that is not this image's debug file.
                let _ = fs::remove_file(&cached);
            }
            Err(http::HttpError::Status { code: 404, .. }) => {}
            Err(e) => {
                warnings.push(format!("debuginfod: {e}; not asked again in this run"));
                if let Ok(mut d) = DEAD_SERVERS.lock() {
                    d.push(url.clone());
                }
            }
        }
    }
    None
}

/// GET `source` into `dest`: written to a new temporary file beside it and renamed, so a
/// reader never sees half a file and no planted file or symlink is written through.
fn fetch(source: &str, dir: &Path, dest: &Path, timeout: Duration) -> Result<(), http::HttpError> {
    let io = |err: std::io::Error| http::HttpError::Io { url: source.into(), err };
    // Private like the rest of kerf's cache: what is kept here decides which names kerf puts
    // on code.
    fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).map_err(io)?;
    let tmp = dir.join(format!(
        ".fetch-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    ));
    let mut f = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)
        .map_err(io)?;
    let r = http::get(source, timeout, MAX_FETCH, &mut f).and_then(|_| f.flush().map_err(io));
    drop(f);
    match r.and_then(|()| fs::rename(&tmp, dest).map_err(io)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = fs::remove_file(&tmp);
            Err(e)
        }
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
