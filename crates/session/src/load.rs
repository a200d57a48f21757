//! Loading targets for analysis: an image file (with an optional symbol file and the symbols
//! of its separate debug file), or every module of a live process as its /proc/PID/maps shows
//! them (read only: nothing is attached).

use crate::cache;
use crate::debuginfo::{self, DebugOptions, SymbolOrigin};
use kerf_analysis::cfg::FuncId;
use kerf_analysis::image::maps::modules;
use kerf_analysis::image::{Image, ImageError, Section, Segment, SymbolSource};
use kerf_analysis::memory::ImageMemory;
use kerf_analysis::validate::{Checker, Invalid};
use kerf_analysis::{analyze, Analysis, Progress};
use kerf_arch::{ImageAddr, RemoteAddr};
use kerf_os::process::Process;
use kerf_os::TargetError;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Contents of a symbol file to add to the image (`--symbols`).
    pub symbols: Option<String>,
    /// Skip the cache both ways.
    pub no_cache: bool,
    /// Cache directory; `None` means [`cache::default_dir`] (checked the same way).
    pub cache_dir: Option<PathBuf>,
    /// Where to look for separate debug files (default: from the environment).
    pub debug: DebugOptions,
    /// Check all of an analysis read from the cache against the image at once, as it is
    /// loaded (`kerf analyze --validate`), instead of each function where it is used.
    pub validate: bool,
}

/// Why a target could not be loaded. Each variant names what failed.
#[derive(Debug)]
pub enum LoadError {
    Read {
        path: PathBuf,
        err: std::io::Error,
    },
    /// A FIFO, socket or device: kerf analyses files, and opening some of these blocks.
    NotRegular {
        path: PathBuf,
        what: &'static str,
    },
    Image(ImageError),
    Target(TargetError),
    Maps {
        pid: i32,
        detail: String,
    },
}

impl std::fmt::Display for LoadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LoadError::Read { path, err } => match err.kind() {
                std::io::ErrorKind::NotFound => write!(f, "{}: no such file", path.display()),
                std::io::ErrorKind::PermissionDenied => {
                    write!(f, "{}: permission denied", path.display())
                }
                _ if err.raw_os_error() == Some(21) => {
                    write!(f, "{}: is a directory", path.display())
                }
                _ => write!(f, "{}: {err}", path.display()),
            },
            LoadError::NotRegular { path, what } => {
                write!(f, "{}: not a regular file (a {what})", path.display())
            }
            LoadError::Image(e) => write!(f, "{e}"),
            LoadError::Target(e) => write!(f, "{e}"),
            LoadError::Maps { pid, detail } => write!(f, "process {pid}: bad maps: {detail}"),
        }
    }
}

impl std::error::Error for LoadError {}

impl From<ImageError> for LoadError {
    fn from(e: ImageError) -> Self {
        LoadError::Image(e)
    }
}

impl From<TargetError> for LoadError {
    fn from(e: TargetError) -> Self {
        LoadError::Target(e)
    }
}

/// One analysed image and where it came from.
pub struct AnalyzedImage {
    /// The image's path as the user or the process's maps name it.
    pub path: PathBuf,
    /// The file that was read (for a process, possibly through /proc/PID/root).
    pub file: PathBuf,
    /// For a module of a live process, its load bias.
    pub bias: Option<u64>,
    pub analysis: Analysis,
    /// Whether the analysis came from the cache, and how long loading it took.
    pub cached: bool,
    pub load_seconds: f64,
    /// Size of the file, and of its executable sections.
    pub text_bytes: u64,
    /// Why the cache was not used, an entry rejected, or a cache write that failed
    /// (reported as a warning, not fatal).
    pub cache_warning: Option<String>,
    /// Where the image's symbols came from (its own tables, a debug file).
    pub symbols: SymbolOrigin,
    /// Debug files that were found but refused, each with why (reported, not fatal).
    pub debug_warnings: Vec<String>,
    /// The image's loadable segments (to compute a load bias).
    pub segments: Vec<Segment>,
    /// The image's bytes: a file mapped, or memory read from a live kernel.
    pub bytes: std::sync::Arc<Bytes>,
    /// For an analysis read from the cache: what of it has been checked against the image's
    /// bytes so far, and how to analyse the image again (see [`crate::checked`]).
    pub(crate) from_cache: Option<FromCache>,
    /// Per function, what is live where its returns land, worked out when the JIT first
    /// translates the module ([`AnalyzedImage::ensure_returns`]).
    pub returns: std::sync::OnceLock<Vec<kerf_analysis::liveness::Live>>,
    /// What the JIT's fewer block counters need of the whole module
    /// ([`kerf_jit::counters::module_facts`]), worked out when a translation first needs it.
    pub counting: std::sync::OnceLock<kerf_jit::counters::ModuleFacts>,
    /// How often each block ran in the last JIT run from the same roots that counted blocks
    /// (image address of its start, count), read at install: a translated `ret` compares the
    /// return addresses its hottest callers push first ([`kerf_jit::translate::Module::profile`]).
    pub profile: std::sync::OnceLock<kerf_arch::hash::AddrMap<u64, u64>>,
    /// How [`AnalyzedImage::returns`] was worked out, once it was.
    pub returns_how: std::sync::OnceLock<ReturnsHow>,
    /// Where the image's cache entry is (when there is a cache): the JIT keeps its return
    /// facts beside it.
    pub(crate) cache_entry: Option<CacheEntry>,
}

/// A cache entry's place: the directory, the entry's key, and the digest of the image's bytes
/// (see [`cache::digest`]).
#[derive(Clone, Debug)]
pub(crate) struct CacheEntry {
    pub dir: PathBuf,
    pub key: String,
    pub digest: [u8; 32],
}

/// How a module's return facts were had ([`AnalyzedImage::ensure_returns`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReturnsHow {
    /// Kept beside the cache entry by an earlier start, and checked.
    Checked,
    /// Kept beside the cache entry, and checked by an earlier start of this build of kerf
    /// (see `cache::Stamp`).
    Stamped,
    /// Solved (none kept, or no cache), and kept for the next start when there is a cache.
    Solved,
    /// Kept ones that failed their check or could not be read, and why: solved again.
    Rejected(String),
}

/// What an analysis read from the cache carries until it has been checked.
pub(crate) struct FromCache {
    check: Checker,
    /// The entry's checksum, and the stamp kept beside it when it vouches for this entry and
    /// this build of kerf ([`cache::Stamp`]): then `check` starts with everything checked.
    sum: [u8; 32],
    stamp: Option<cache::Stamp>,
    /// The image's sections and loader-written pointers: the checks read the image's bytes
    /// as analysis reads them (jump tables in data sections, relocated absolute tables).
    sections: Vec<Section>,
    pointers: Vec<(ImageAddr, ImageAddr)>,
    /// Where a fresh analysis can be made from; `None` for memory read from the running
    /// kernel, which a later run reads again.
    origin: Option<FileOrigin>,
}

/// The file an image was read from, the path its debug files were looked for under, and the
/// options it was loaded with.
struct FileOrigin {
    file: PathBuf,
    logical: PathBuf,
    options: LoadOptions,
}

/// Where an image's bytes are held.
pub enum Bytes {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl std::ops::Deref for Bytes {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Mapped(m) => m,
            Bytes::Owned(v) => v,
        }
    }
}

impl FromCache {
    fn memory<'a>(&'a self, data: &'a [u8]) -> ImageMemory<'a, 'a> {
        ImageMemory { data, sections: &self.sections, pointers: &self.pointers }
    }
}

impl AnalyzedImage {
    /// Where image address `a` of this module is in the process: `a` plus the module's load
    /// bias (0 for an image not loaded in a process). The one way from image to runtime
    /// addresses; see `kerf_arch::addr` for the rule.
    pub fn remote(&self, a: ImageAddr) -> RemoteAddr {
        a.at_bias(self.bias.unwrap_or(0))
    }

    /// The image address of `a`, an address of this module in the process (the inverse of
    /// [`AnalyzedImage::remote`]).
    pub fn image_addr(&self, a: RemoteAddr) -> ImageAddr {
        a.in_image(self.bias.unwrap_or(0))
    }

    /// Check function `f` of an analysis read from the cache against the image's bytes, with
    /// every function its liveness rests on, before a splice is planned from it (see
    /// [`kerf_analysis::validate::Checker::function`]); memoised. A fresh analysis is made
    /// from these bytes and needs no check.
    pub fn check_function(&self, f: FuncId) -> Result<(), Invalid> {
        match &self.from_cache {
            Some(c) => c.check.function(&self.analysis, &c.memory(&self.bytes), f),
            None => Ok(()),
        }
    }

    /// [`AnalyzedImage::check_function`] for each of `fs`, in parallel.
    pub fn check_functions(&self, fs: &[FuncId]) -> Result<(), Invalid> {
        match &self.from_cache {
            Some(c) => c.check.functions(&self.analysis, &c.memory(&self.bytes), fs),
            None => Ok(()),
        }
    }

    /// Check function `f`'s own blocks, edges and tables (what reading its instructions needs;
    /// see [`kerf_analysis::validate::Checker::code`]).
    pub fn check_code(&self, f: FuncId) -> Result<(), Invalid> {
        match &self.from_cache {
            Some(c) => c.check.code(&self.analysis, &c.memory(&self.bytes), f),
            None => Ok(()),
        }
    }

    /// What is live where each function's returns land (the JIT's frameless returns rest on
    /// it), worked out once: from the facts an earlier start kept beside the cache entry
    /// when they pass their check (one parallel pass, `liveness::check_return_facts`), else
    /// solved and kept (python3.11: about 100 ms solved, 30 ms checked). Facts that fail are
    /// solved again, never used. Both rest on the blocks' stored sets, so a cached analysis
    /// has its whole check first ([`AnalyzedImage::check_all_code`], memoised: free when the
    /// caller made it already); an analysis that fails it gets none.
    pub fn ensure_returns(&self) -> Result<&Vec<kerf_analysis::liveness::Live>, Invalid> {
        use kerf_analysis::liveness::{check_return_facts, return_facts};
        self.check_all_code()?;
        Ok(self.returns.get_or_init(|| {
            let cfg = &self.analysis.cfg;
            let dir = self
                .cache_entry
                .as_ref()
                .and_then(|e| Some((cache::CacheDir::open(&e.dir).ok()?, e)));
            let kept = dir.as_ref().map(|(d, e)| d.load_facts(&e.key, &e.digest));
            let stamp = self.from_cache.as_ref().and_then(|c| Some((c.sum, c.stamp.as_ref()?)));
            let why = match kept {
                // This build checked these very facts before (see `cache::Stamp`).
                Some(Ok(Some((facts, sum)))) if stamp.is_some_and(|s| s.1.facts == Some(sum)) => {
                    let _ = self.returns_how.set(ReturnsHow::Stamped);
                    return facts.into_iter().map(|f| f.lands).collect();
                }
                Some(Ok(Some((facts, sum)))) => match check_return_facts(cfg, &facts) {
                    Ok(lands) => {
                        let _ = self.returns_how.set(ReturnsHow::Checked);
                        if let (Some((d, e)), Some(c)) = (&dir, &self.from_cache) {
                            stamp_checked(d, e, c.sum, Some(sum));
                        }
                        return lands;
                    }
                    Err(f) => Some(format!("the facts of {f} are no solution")),
                },
                Some(Err(e)) => Some(e.to_string()),
                Some(Ok(None)) | None => None,
            };
            let facts = return_facts(cfg);
            if let Some((d, e)) = &dir {
                // (A cache that cannot be written costs the next start the solve, no more.
                // Not stamped: the next start checks what it reads back.)
                let _ = d.store_facts(&e.key, &e.digest, &facts);
            }
            let how = why.map_or(ReturnsHow::Solved, ReturnsHow::Rejected);
            let _ = self.returns_how.set(how);
            facts.into_iter().map(|f| f.lands).collect()
        }))
    }

    /// The digest of the image's bytes, when it has a cache entry (a JIT's hints are kept
    /// per set of roots, each named by its image's digest and its entry).
    pub fn cache_digest(&self) -> Option<[u8; 32]> {
        self.cache_entry.as_ref().map(|e| e.digest)
    }

    /// The functions that ran in earlier JIT runs from the roots that hash to `roots`
    /// ([`cache::CacheDir::store_hint`]), those that are still a function's entry in this
    /// analysis, in order. `None` without a cache entry, with none kept, or when the hint
    /// cannot be read: a hint only saves time.
    pub fn jit_hint(&self, roots: u64) -> Option<Vec<FuncId>> {
        let e = self.cache_entry.as_ref()?;
        let dir = cache::CacheDir::open(&e.dir).ok()?;
        let entries = dir.load_hint(&e.key, &e.digest, roots).ok()??;
        let cfg = &self.analysis.cfg;
        let mut funcs: Vec<FuncId> = (entries.iter())
            .filter_map(|&a| {
                cfg.function_at(ImageAddr(a)).filter(|&f| cfg.function(f).entry.0 == a)
            })
            .collect();
        funcs.sort();
        funcs.dedup();
        Some(funcs)
    }

    /// Keep `funcs` as the hint of JIT runs from roots `roots` ([`AnalyzedImage::jit_hint`]).
    /// A cache that cannot be written costs the next run its misses, no more.
    pub fn keep_jit_hint(&self, roots: u64, funcs: &[FuncId]) {
        let Some(e) = &self.cache_entry else { return };
        let Ok(dir) = cache::CacheDir::open(&e.dir) else { return };
        let cfg = &self.analysis.cfg;
        let mut entries: Vec<u64> = funcs.iter().map(|&f| cfg.function(f).entry.0).collect();
        entries.sort_unstable();
        entries.dedup();
        let _ = dir.store_hint(&e.key, &e.digest, roots, &entries);
    }

    /// How often blocks ran in the last JIT run from roots `roots` that counted them, and
    /// their branches' sides (by image address of the block's start): the weights of its
    /// counter placement.
    pub fn jit_weights(&self, roots: u64) -> Option<Vec<kerf_jit::counters::Ran>> {
        let e = self.cache_entry.as_ref()?;
        let dir = cache::CacheDir::open(&e.dir).ok()?;
        dir.load_weights(&e.key, &e.digest, roots).ok()?
    }

    /// Keep `weights` for the next run from roots `roots` ([`AnalyzedImage::jit_weights`]).
    pub fn keep_jit_weights(&self, roots: u64, weights: &[kerf_jit::counters::Ran]) {
        let Some(e) = &self.cache_entry else { return };
        let Ok(dir) = cache::CacheDir::open(&e.dir) else { return };
        let _ = dir.store_weights(&e.key, &e.digest, roots, weights);
    }

    /// What of the JIT's counting facts this analysis alone decides
    /// ([`kerf_jit::counters::module_shape`]), kept beside its cache entry for kerf's build
    /// and the analysis's size (its blocks and functions: a file kept for another analysis
    /// of the same bytes is not read): worked out at every counting start, python3.11's took
    /// 10-15 ms before anything could be placed.
    pub fn counting_shape(&self) -> kerf_jit::counters::ModuleShape {
        let cfg = &self.analysis.cfg;
        let size = [cfg.blocks.len() as u64, cfg.functions.len() as u64].map(u64::to_le_bytes);
        let kept = || {
            let e = self.cache_entry.as_ref()?;
            let build = cache::fnv64(&[cache::kerf_build()?, &size[0], &size[1]]);
            Some((cache::CacheDir::open(&e.dir).ok()?, e, build))
        };
        if let Some((dir, e, build)) = kept() {
            if let Ok(Some(shape)) = dir.load_shape(&e.key, &e.digest, build) {
                return shape;
            }
        }
        let shape = kerf_jit::counters::module_shape(cfg);
        if let Some((dir, e, build)) = kept() {
            let _ = dir.store_shape(&e.key, &e.digest, build, &shape);
        }
        shape
    }

    /// The code room and data area the JIT reserves for every function of the image under
    /// translation options that hash to `options` (kerf's build among them), as an earlier
    /// run worked them out: sizing every function of python3.11 took 10 ms of each start.
    /// `None` without a cache entry or with none kept for those options.
    pub fn jit_room(&self, options: u64) -> Option<(u64, u64)> {
        let e = self.cache_entry.as_ref()?;
        let dir = cache::CacheDir::open(&e.dir).ok()?;
        let rooms = dir.load_rooms(&e.key, &e.digest).ok()??;
        rooms.iter().find(|r| r.0 == options).map(|&(_, code, data)| (code, data))
    }

    /// Keep `room` as [`AnalyzedImage::jit_room`] of `options`, first, with the newest few
    /// others (a plugin and another, run in turn, keep both).
    pub fn keep_jit_room(&self, options: u64, room: (u64, u64)) {
        const KEPT: usize = 8;
        let Some(e) = &self.cache_entry else { return };
        let Ok(dir) = cache::CacheDir::open(&e.dir) else { return };
        let mut rooms = dir.load_rooms(&e.key, &e.digest).ok().flatten().unwrap_or_default();
        rooms.retain(|r| r.0 != options);
        rooms.insert(0, (options, room.0, room.1));
        rooms.truncate(KEPT);
        let _ = dir.store_rooms(&e.key, &e.digest, &rooms);
    }

    /// Check every function of an analysis read from the cache ([`Checker::all_code`]):
    /// before the JIT translates from it, since where a translated `ret` may skip its frame
    /// rests on every function's blocks (`liveness::at_continuations`); memoised.
    pub fn check_all_code(&self) -> Result<(), Invalid> {
        self.check_all_code_until(&std::sync::atomic::AtomicBool::new(false)).map(|_| ())
    }

    /// [`AnalyzedImage::check_all_code`], given up when `stop` is set (`Ok(false)`).
    pub fn check_all_code_until(
        &self,
        stop: &std::sync::atomic::AtomicBool,
    ) -> Result<bool, Invalid> {
        let Some(c) = &self.from_cache else { return Ok(true) };
        if c.check.all_checked() {
            return Ok(true);
        }
        let done = c.check.all_code_until(&self.analysis, &c.memory(&self.bytes), stop)?;
        // Kept, so that the next start of this build skips the check (see `cache::Stamp`).
        if let (true, Some(e)) = (done, &self.cache_entry) {
            if let Ok(d) = cache::CacheDir::open(&e.dir) {
                stamp_checked(&d, e, c.sum, None);
            }
        }
        Ok(done)
    }

    /// Check padding run `i` (springboard space) before a springboard goes there.
    pub fn check_padding(&self, i: usize) -> Result<(), Invalid> {
        match &self.from_cache {
            Some(c) => c.check.padding(&self.analysis, &c.memory(&self.bytes), i),
            None => Ok(()),
        }
    }

    /// Whether the analysis came from the cache with a stamp that this build of kerf checked
    /// it whole before ([`cache::Stamp`]): then no check reads its code again.
    pub fn vouched(&self) -> bool {
        self.from_cache.as_ref().is_some_and(|c| c.stamp.is_some())
    }

    /// Whether the analysis came from the cache and is checked only as it is used.
    pub fn unchecked(&self) -> bool {
        self.from_cache.is_some()
    }

    /// The same image analysed afresh, without reading the cache entry, which the new
    /// analysis replaces (a cached analysis that failed a check); `None` for an analysis
    /// that did not come from the cache.
    pub(crate) fn analyze_again(
        &self,
        progress: &dyn Progress,
    ) -> Option<Result<AnalyzedImage, LoadError>> {
        let o = self.from_cache.as_ref()?.origin.as_ref()?;
        let fresh = analyze_image_file(&o.file, &o.logical, &o.options, false, progress);
        Some(fresh.map(|mut a| {
            a.path = self.path.clone();
            a.bias = self.bias;
            a.analysis.image = self.analysis.image.clone();
            a
        }))
    }

    /// Remove this image's cache entry (with the files beside it): for an analysis of the
    /// running kernel that failed a check, which only the next run can make afresh.
    pub fn forget_cache_entry(&self) {
        if let Some(e) = &self.cache_entry {
            if let Ok(d) = cache::CacheDir::open(&e.dir) {
                d.remove(&e.key);
            }
        }
    }

    /// The bytes of the executable segment that holds image address `addr`: its start and
    /// its initialised bytes (what the loader mapped from the file).
    pub fn code_region(&self, addr: ImageAddr) -> Option<(ImageAddr, &[u8])> {
        let s = self.segments.iter().find(|s| {
            s.executable && addr >= s.vaddr && addr.0 < s.vaddr.0.saturating_add(s.filesz)
        })?;
        let start = usize::try_from(s.file_offset).ok()?;
        let len = usize::try_from(s.filesz).ok()?;
        Some((s.vaddr, self.bytes.get(start..start.checked_add(len)?)?))
    }
}

impl kerf_analysis::memory::CodeMemory for AnalyzedImage {
    fn code_region(&self, addr: ImageAddr) -> Option<(ImageAddr, &[u8])> {
        AnalyzedImage::code_region(self, addr)
    }

    fn read(&self, addr: ImageAddr, len: usize) -> Option<&[u8]> {
        let (base, bytes) = AnalyzedImage::code_region(self, addr)?;
        let off = usize::try_from(addr.0 - base.0).ok()?;
        bytes.get(off..off.checked_add(len)?)
    }
}

/// Keep beside entry `e` that this build of kerf checked the whole entry of checksum `sum`
/// and, with `facts`, the return facts file of that checksum ([`cache::Stamp`]). A build with
/// no build-id keeps none; a stamp that cannot be written costs the next start the checks.
fn stamp_checked(d: &cache::CacheDir, e: &CacheEntry, sum: [u8; 32], facts: Option<[u8; 32]>) {
    if let Some(kerf) = cache::kerf_build() {
        let stamp = cache::Stamp { kerf: kerf.to_vec(), entry: sum, facts };
        let _ = d.store_stamp(&e.key, &e.digest, &stamp);
    }
}

/// Open `path` for reading if it is a regular file. The type is checked first with `stat`
/// (opening a FIFO for reading waits for a writer), then again on what was opened,
/// non-blocking, in case the path changed in between.
fn open_regular(path: &Path) -> Result<std::fs::File, LoadError> {
    use std::os::unix::fs::OpenOptionsExt;
    let read_err = |err| LoadError::Read { path: path.into(), err };
    let check = |m: std::fs::Metadata| -> Result<(), LoadError> {
        if m.is_dir() {
            return Err(read_err(std::io::Error::from_raw_os_error(libc::EISDIR)));
        }
        match file_kind(&m) {
            None => Ok(()),
            Some(what) => Err(LoadError::NotRegular { path: path.into(), what }),
        }
    };
    check(std::fs::metadata(path).map_err(read_err)?)?;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
        .map_err(read_err)?;
    check(f.metadata().map_err(read_err)?)?;
    Ok(f)
}

/// The text of a regular file (a symbol file): see [`open_regular`].
pub fn read_text_file(path: &Path) -> Result<String, LoadError> {
    use std::io::Read;
    let mut s = String::new();
    open_regular(path)?
        .read_to_string(&mut s)
        .map_err(|err| LoadError::Read { path: path.into(), err })?;
    Ok(s)
}

/// The bytes of a regular file, mapped rather than read: a 100 MB library then costs
/// page-cache pages the kernel already has instead of a fresh copy.
fn map_file(path: &Path) -> Result<memmap2::Mmap, LoadError> {
    let f = open_regular(path)?;
    // SAFETY: the mapping is private and read-only. If another process truncates or rewrites
    // the file while kerf reads it, reads may see the new bytes or fault; kerf analyses
    // installed libraries and executables, which package managers replace by rename, not in
    // place, so the mapped inode does not change under it.
    unsafe { memmap2::Mmap::map(&f) }.map_err(|err| LoadError::Read { path: path.into(), err })
}

/// What a file that is neither a regular file nor a directory is (`None` for a regular file).
fn file_kind(m: &std::fs::Metadata) -> Option<&'static str> {
    use std::os::unix::fs::FileTypeExt;
    let t = m.file_type();
    match () {
        _ if t.is_file() => None,
        _ if t.is_fifo() => Some("FIFO"),
        _ if t.is_socket() => Some("socket"),
        _ if t.is_char_device() => Some("character device"),
        _ if t.is_block_device() => Some("block device"),
        _ => Some("special file"),
    }
}

/// Read and analyse one image file.
pub fn analyze_file(
    path: &Path,
    opts: &LoadOptions,
    progress: &dyn Progress,
) -> Result<AnalyzedImage, LoadError> {
    analyze_image_file(path, path, opts, true, progress)
}

/// [`analyze_file`] for `path`, whose debug files are looked for as if it were `logical` (a
/// module of a process is read through /proc/PID/root, and named by its path inside). With
/// `read_cache` false the cache entry is not read, only replaced.
fn analyze_image_file(
    path: &Path,
    logical: &Path,
    opts: &LoadOptions,
    read_cache: bool,
    progress: &dyn Progress,
) -> Result<AnalyzedImage, LoadError> {
    let t0 = Instant::now();
    let data = map_file(path)?;
    let bytes = std::sync::Arc::new(Bytes::Mapped(data));
    let data: &[u8] = &bytes;
    let name = path.display().to_string();
    let mut image = Image::from_elf(&name, data)?;
    let mut origin = SymbolOrigin::default();
    for (source, what) in [(SymbolSource::Symtab, ".symtab"), (SymbolSource::Dynsym, ".dynsym")] {
        if image.symbols.iter().any(|s| s.source == source) {
            origin.own.push(what);
        }
    }
    if let Some(s) = &opts.symbols {
        image.add_symbol_file(s)?;
        origin.symbol_file = true;
    }
    let text_bytes = image.text_bytes();
    let mut warnings: Vec<String> = Vec::new();
    let cache = if opts.no_cache {
        None
    } else {
        let dir = match &opts.cache_dir {
            Some(d) => Some(d.clone()),
            None => cache::default_dir(),
        };
        let opened = dir.ok_or(cache::CacheError::NoDir).and_then(|d| cache::CacheDir::open(&d));
        opened.map_err(|e| warnings.push(e.to_string())).ok()
    };
    // Debug files fetched from a server are kept only in a cache directory that passed the
    // checks above (private to this user).
    let search = debuginfo::find_debug_file(
        &image,
        path,
        logical,
        &opts.debug,
        cache.as_ref().map(|c| c.path()),
    );
    origin.debug_file = search.used;
    let debug_warnings = search.warnings;
    let debug_identity = origin.debug_file.as_ref().map(|d| d.identity.as_str());
    let key = cache::key(image.build_id.as_deref(), path, opts.symbols.as_deref(), debug_identity);
    let symbols = opts.symbols.as_deref();
    let mut digest = None;
    if let Some(c) = &cache {
        if !read_cache {
            digest = Some(cache::digest(data, symbols));
        } else {
            let (d, loaded) = c.load(&key, || cache::digest(data, symbols));
            digest = Some(d);
            // Everything at once when asked (the call graph is rebuilt then too); otherwise
            // each function where it is used.
            let loaded = loaded.and_then(|l| match l {
                Some((mut a, check, sum)) if opts.validate => {
                    debuginfo::merge_symbols(&mut image, &mut origin.debug_file);
                    kerf_analysis::validate::validate(&mut a, &image)
                        .map_err(|e| c.rejected(&key, format!("does not match the image: {e}")))?;
                    Ok(Some((a, check, sum)))
                }
                // Which code is never spliced (signal trampolines) is a whole-image fact that
                // no per-function check sees: checked here, against the image's unwind entries.
                Some((a, check, sum)) => {
                    kerf_analysis::validate::check_no_splice(&a.cfg, &image)
                        .map_err(|e| c.rejected(&key, format!("does not match the image: {e}")))?;
                    Ok(Some((a, check, sum)))
                }
                None => Ok(None),
            });
            match loaded {
                Ok(Some((mut a, check, sum))) => {
                    a.image = name;
                    // (The analysis has the debug file's symbols: they are not merged.)
                    if let Some(d) = origin.debug_file.as_mut() {
                        d.pending = None;
                    }
                    // What this build checked of this entry before needs no second check.
                    let stamp = c.load_stamp(&key, &d).ok().flatten().filter(|s| s.vouches(&sum));
                    if stamp.is_some() {
                        check.vouch_all();
                    }
                    return Ok(AnalyzedImage {
                        path: path.into(),
                        file: path.into(),
                        bias: None,
                        analysis: a,
                        cached: true,
                        load_seconds: t0.elapsed().as_secs_f64(),
                        text_bytes,
                        cache_warning: None,
                        symbols: origin,
                        debug_warnings,
                        segments: image.segments.clone(),
                        bytes: bytes.clone(),
                        from_cache: (!opts.validate).then(|| FromCache {
                            check,
                            sum,
                            stamp,
                            sections: std::mem::take(&mut image.sections),
                            pointers: std::mem::take(&mut image.pointers),
                            origin: Some(FileOrigin {
                                file: path.into(),
                                logical: logical.into(),
                                options: opts.clone(),
                            }),
                        }),
                        returns: Default::default(),
                        counting: Default::default(),
                        profile: Default::default(),
                        returns_how: Default::default(),
                        cache_entry: Some(CacheEntry { dir: c.path().into(), key, digest: d }),
                    });
                }
                Ok(None) => {}
                // Rejected (or unreadable): analysed again below, and stored over it.
                Err(e) => warnings.push(e.to_string()),
            }
        }
    }
    let load_seconds = t0.elapsed().as_secs_f64();
    debuginfo::merge_symbols(&mut image, &mut origin.debug_file);
    let analysis = analyze(&image, progress);
    if let (Some(c), Some(digest)) = (&cache, &digest) {
        if let Err(e) = c.store(&key, digest, &analysis) {
            warnings.push(e.to_string());
        }
    }
    let cache_warning = (!warnings.is_empty()).then(|| warnings.join("; "));
    let cache_entry = match (&cache, digest) {
        (Some(c), Some(digest)) => Some(CacheEntry { dir: c.path().into(), key, digest }),
        _ => None,
    };
    Ok(AnalyzedImage {
        path: path.into(),
        file: path.into(),
        bias: None,
        analysis,
        cached: false,
        load_seconds,
        text_bytes,
        cache_warning,
        symbols: origin,
        debug_warnings,
        segments: image.segments.clone(),
        bytes: bytes.clone(),
        from_cache: None,
        returns: Default::default(),
        counting: Default::default(),
        profile: Default::default(),
        returns_how: Default::default(),
        cache_entry,
    })
}

/// Analyse `image`, memory read from the running kernel (`bytes`, with the symbol file
/// `symbols` added), through the cache `cache` when there is one. An entry made from these
/// very bytes and symbols ([`cache::live_key`]) is used, its code checked where it is used as
/// every cached analysis's is; else the analysis is made and stored, and the image's older
/// entries removed. Under qemu's TCG the kernel's core text took 30 s to analyse at each kerf
/// command, and a real machine spends seconds on it.
pub(crate) fn analyze_live_image(
    mut image: Image<'_>,
    bytes: &std::sync::Arc<Bytes>,
    symbols: &str,
    cache: Option<&cache::CacheDir>,
    t0: Instant,
    progress: &dyn Progress,
) -> AnalyzedImage {
    let name = image.name.clone();
    let (text_bytes, segments) = (image.text_bytes(), image.segments.clone());
    let mut warning = None;
    let mut entry = None;
    let mut cached = None;
    if let Some(c) = cache {
        let digest = cache::digest(bytes, Some(symbols));
        let key = cache::live_key(&name, &digest);
        let loaded = c.load(&key, || digest).1.and_then(|l| match l {
            Some((a, check, sum)) => kerf_analysis::validate::check_no_splice(&a.cfg, &image)
                .map(|_| Some((a, check, sum)))
                .map_err(|e| c.rejected(&key, format!("does not match the image: {e}"))),
            None => Ok(None),
        });
        match loaded {
            Ok(Some((mut a, check, sum))) => {
                a.image = name.clone();
                let stamp = c.load_stamp(&key, &digest).ok().flatten().filter(|s| s.vouches(&sum));
                if stamp.is_some() {
                    check.vouch_all();
                }
                let sections = std::mem::take(&mut image.sections);
                let pointers = std::mem::take(&mut image.pointers);
                let origin = None;
                cached = Some((a, FromCache { check, sum, stamp, sections, pointers, origin }));
            }
            Ok(None) => {}
            Err(e) => warning = Some(e.to_string()),
        }
        entry = Some((c, key, digest));
    }
    let load_seconds = t0.elapsed().as_secs_f64();
    let (analysis, from_cache) = match cached {
        Some((a, from)) => (a, Some(from)),
        None => {
            let a = analyze(&image, progress);
            if let Some((c, key, digest)) = &entry {
                match c.store(key, digest, &a) {
                    Ok(()) => c.keep_only_live(&name, key),
                    Err(e) => warning = Some(e.to_string()),
                }
            }
            (a, None)
        }
    };
    AnalyzedImage {
        path: PathBuf::from(&name),
        file: PathBuf::from(&name),
        bias: Some(0),
        analysis,
        cached: from_cache.is_some(),
        load_seconds,
        text_bytes,
        cache_warning: warning,
        symbols: SymbolOrigin { symbol_file: true, ..Default::default() },
        debug_warnings: Vec::new(),
        segments,
        bytes: bytes.clone(),
        from_cache,
        returns: Default::default(),
        counting: Default::default(),
        profile: Default::default(),
        returns_how: Default::default(),
        cache_entry: entry.map(|(c, key, digest)| CacheEntry { dir: c.path().into(), key, digest }),
    }
}

/// Analyse an ELF image held in memory (a process's vDSO, read from it), named `name`: no
/// debug files, no cache.
pub fn analyze_bytes(name: &str, data: Vec<u8>) -> Result<AnalyzedImage, LoadError> {
    let t0 = Instant::now();
    let bytes = std::sync::Arc::new(Bytes::Owned(data));
    let image = Image::from_elf(name, &bytes)?;
    let analysis = analyze(&image, &kerf_analysis::Quiet);
    Ok(AnalyzedImage {
        path: name.into(),
        file: name.into(),
        bias: None,
        analysis,
        cached: false,
        load_seconds: t0.elapsed().as_secs_f64(),
        text_bytes: image.text_bytes(),
        cache_warning: None,
        symbols: SymbolOrigin::default(),
        debug_warnings: Vec::new(),
        segments: image.segments.clone(),
        bytes: bytes.clone(),
        from_cache: None,
        returns: Default::default(),
        counting: Default::default(),
        profile: Default::default(),
        returns_how: Default::default(),
        cache_entry: None,
    })
}

/// Analyse every ELF module mapped into process `pid`, each with its load bias. Modules that
/// are not ELF files on disk (deleted files, `[vdso]`) are skipped and listed in the result.
pub fn analyze_process(
    pid: i32,
    opts: &LoadOptions,
    progress: &dyn Progress,
) -> Result<(Vec<AnalyzedImage>, Vec<String>), LoadError> {
    let proc = Process::open(pid)?;
    let maps = proc.maps()?;
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut opts = opts.clone();
    opts.debug.dirs = process_debug_dirs(&proc, &opts.debug.dirs);
    let wanted: Vec<(usize, kerf_analysis::image::maps::ModuleLayout)> =
        (modules(&maps).into_iter().enumerate())
            .filter(|(_, m)| !m.path.starts_with('[') && m.mappings.iter().any(|x| x.exec))
            .collect();
    let one = |i: usize,
               m: &kerf_analysis::image::maps::ModuleLayout|
     -> Result<AnalyzedImage, LoadError> {
        let file = proc.module_path(&m.path);
        // A symbol file belongs to the main executable, which the kernel maps first.
        let symbols = if i == 0 { opts.symbols.clone() } else { None };
        let o = LoadOptions { symbols, ..opts.clone() };
        let mut a = analyze_image_file(&file, Path::new(&m.path), &o, true, progress)?;
        a.bias = Some(m.bias(&a.segments));
        a.path = PathBuf::from(&m.path);
        a.analysis.image = m.path.clone();
        Ok(a)
    };
    // The biggest module's on a thread of its own, the others meanwhile one after another on
    // this one: one after another, python3.11's cached analyses took 28 ms for its executable
    // and 22 ms for its libraries before anything else could begin. (Two at a time at most:
    // a first analysis holds a big module's whole graph in memory.)
    let size = |m: &kerf_analysis::image::maps::ModuleLayout| {
        std::fs::metadata(proc.module_path(&m.path)).map_or(0, |d| d.len())
    };
    let biggest = (0..wanted.len()).max_by_key(|&k| size(&wanted[k].1));
    let results: Vec<Result<AnalyzedImage, LoadError>> = std::thread::scope(|s| {
        let big = biggest.map(|k| {
            let (i, m) = &wanted[k];
            s.spawn(move || one(*i, m))
        });
        let mut done: Vec<Option<Result<AnalyzedImage, LoadError>>> = (wanted.iter().enumerate())
            .map(|(k, (i, m))| (Some(k) != biggest).then(|| one(*i, m)))
            .collect();
        if let (Some(k), Some(h)) = (biggest, big) {
            done[k] = Some(h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)));
        }
        done.into_iter().map(|r| r.expect("every module was analysed")).collect()
    });
    for ((_, m), r) in wanted.iter().zip(results) {
        match r {
            Ok(a) => out.push(a),
            Err(e) => skipped.push(format!("{}: {e}", m.path)),
        }
    }
    Ok((out, skipped))
}

/// Analyse the module of process `pid` mapped at `addr` (one the program loaded after kerf
/// looked, with `dlopen`), with its load bias: `None` when no executable file-backed module
/// holds `addr` (anonymous memory: JIT-generated code), or when it is one of `known` (paths as
/// /proc/PID/maps prints them).
pub fn analyze_module_at(
    pid: i32,
    addr: RemoteAddr,
    known: &[&Path],
    opts: &LoadOptions,
) -> Result<Option<AnalyzedImage>, LoadError> {
    let proc = Process::open(pid)?;
    let Some(m) = module_at(&proc, addr)? else { return Ok(None) };
    if known.contains(&Path::new(&m.path)) {
        return Ok(None);
    }
    let mut opts = LoadOptions { symbols: None, ..opts.clone() };
    opts.debug.dirs = process_debug_dirs(&proc, &opts.debug.dirs);
    let file = proc.module_path(&m.path);
    let mut a = analyze_image_file(&file, Path::new(&m.path), &opts, true, &kerf_analysis::Quiet)?;
    a.bias = Some(m.bias(&a.segments));
    a.path = PathBuf::from(&m.path);
    a.analysis.image = m.path.clone();
    Ok(Some(a))
}

/// The path (as /proc/PID/maps prints it) of the executable file-backed module of process
/// `pid` that holds `addr`, if one does.
pub fn module_path_at(pid: i32, addr: RemoteAddr) -> Result<Option<String>, LoadError> {
    Ok(module_at(&Process::open(pid)?, addr)?.map(|m| m.path))
}

/// The mapping of process `pid` that holds `addr` (any kind), if one does.
pub fn mapping_at(
    pid: i32,
    addr: RemoteAddr,
) -> Result<Option<kerf_analysis::image::maps::Mapping>, LoadError> {
    let maps = Process::open(pid)?.maps()?;
    Ok(maps.into_iter().find(|m| m.start <= addr && addr < m.end))
}

fn module_at(
    proc: &Process,
    addr: RemoteAddr,
) -> Result<Option<kerf_analysis::image::maps::ModuleLayout>, LoadError> {
    let maps = proc.maps()?;
    let found = modules(&maps).into_iter().find(|m| m.contains(addr));
    Ok(found.filter(|m| !m.path.starts_with('[') && m.executable()))
}

/// The debug directories for the modules of process `pid`: each one inside the process's root
/// first when the process sees another file system (a container), then kerf's own.
fn process_debug_dirs(proc: &Process, dirs: &[PathBuf]) -> Vec<PathBuf> {
    if proc.shares_root() {
        return dirs.to_vec();
    }
    let root = proc.root_dir();
    let inside = dirs.iter().map(|d| root.join(d.strip_prefix("/").unwrap_or(d)));
    inside.chain(dirs.iter().cloned()).collect()
}

/// Further names of the modules of process `pid` (`images` as [`analyze_process`] returned
/// them), for [`crate::spec::resolve_with_aliases`]: the main executable answers to
/// [`crate::spec::EXE_ALIAS`], to the name it was run as (`argv[0]` and its file name, and
/// /proc/PID/comm) and to `launched_as` (the command kerf started). A program started
/// through a symlink (Debian's `redis-server`, a link to `redis-check-rdb`) is mapped under
/// its target's name, which is not what its users type.
pub fn process_aliases(
    pid: i32,
    launched_as: Option<&str>,
    images: &[AnalyzedImage],
) -> Vec<Vec<String>> {
    let sys = &kerf_os::process::RealSys;
    let exe = kerf_os::process::exe(sys, pid);
    // The kernel maps the main executable first; /proc/PID/exe says which it is.
    let main =
        images.iter().position(|m| Some(m.analysis.image.as_str()) == exe.as_deref()).unwrap_or(0);
    let argv0 = kerf_os::process::argv0(sys, pid);
    let comm = kerf_os::process::comm(sys, pid);
    let mut names = vec![crate::spec::EXE_ALIAS.to_string()];
    for n in [argv0.as_deref(), launched_as].into_iter().flatten() {
        names.push(n.to_string());
        names.push(crate::spec::module_name(n).to_string());
    }
    names.extend(comm);
    names.retain(|n| !n.is_empty());
    let mut seen = std::collections::HashSet::new();
    names.retain(|n| seen.insert(n.clone()));
    let mut out = vec![Vec::new(); images.len()];
    if let Some(v) = out.get_mut(main) {
        *v = names;
    }
    out
}
