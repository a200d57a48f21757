//! Loading targets for analysis: an image file (with an optional symbol file), or every
//! module of a live process as its /proc/PID/maps shows them (read only: nothing is attached).

use crate::cache;
use kerf_analysis::image::maps::{modules, parse_maps};
use kerf_analysis::image::{Image, ImageError, Segment};
use kerf_analysis::{analyze, Analysis, Progress};
use kerf_arch::ImageAddr;
use kerf_target::process::Process;
use kerf_target::TargetError;
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Clone, Debug, Default)]
pub struct LoadOptions {
    /// Contents of a symbol file to add to the image (`--symbols`).
    pub symbols: Option<String>,
    /// Skip the cache both ways.
    pub no_cache: bool,
    /// Cache directory; `None` means [`cache::default_dir`].
    pub cache_dir: Option<PathBuf>,
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
    /// A cache write that failed (reported, not fatal).
    pub cache_warning: Option<String>,
    /// The image's loadable segments (to compute a load bias).
    pub segments: Vec<Segment>,
    /// The image's bytes: a file mapped, or memory read from a live kernel.
    pub bytes: std::sync::Arc<Bytes>,
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

impl AnalyzedImage {
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

/// Read and analyse one image file. `display` is the name shown for it.
pub fn analyze_file(
    path: &Path,
    opts: &LoadOptions,
    progress: &dyn Progress,
) -> Result<AnalyzedImage, LoadError> {
    let t0 = Instant::now();
    let data = map_file(path)?;
    let bytes = std::sync::Arc::new(Bytes::Mapped(data));
    let data: &[u8] = &bytes;
    let name = path.display().to_string();
    let mut image = Image::from_elf(&name, data)?;
    if let Some(s) = &opts.symbols {
        image.add_symbol_file(s)?;
    }
    let text_bytes = image.text_bytes();
    let dir = opts.cache_dir.clone().unwrap_or_else(cache::default_dir);
    let key = cache::key(image.build_id.as_deref(), path, opts.symbols.as_deref());
    if !opts.no_cache {
        if let Some(mut a) = cache::load(&dir, &key) {
            a.image = name;
            return Ok(AnalyzedImage {
                path: path.into(),
                file: path.into(),
                bias: None,
                analysis: a,
                cached: true,
                load_seconds: t0.elapsed().as_secs_f64(),
                text_bytes,
                cache_warning: None,
                segments: image.segments.clone(),
                bytes: bytes.clone(),
            });
        }
    }
    let load_seconds = t0.elapsed().as_secs_f64();
    let analysis = analyze(&image, progress);
    let cache_warning = if opts.no_cache {
        None
    } else {
        cache::store(&dir, &key, &analysis)
            .err()
            .map(|e| format!("could not write analysis cache in {}: {e}", dir.display()))
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
        segments: image.segments.clone(),
        bytes: bytes.clone(),
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
    let text = proc.maps()?;
    let maps = parse_maps(&text).map_err(|e| LoadError::Maps { pid, detail: e.to_string() })?;
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for (i, m) in modules(&maps).into_iter().enumerate() {
        if m.path.starts_with('[') || !m.mappings.iter().any(|x| x.exec) {
            continue;
        }
        let file = proc.module_path(&m.path);
        // A symbol file belongs to the main executable, which the kernel maps first.
        let symbols = if i == 0 { opts.symbols.clone() } else { None };
        let o = LoadOptions { symbols, ..opts.clone() };
        match analyze_file(&file, &o, progress) {
            Ok(mut a) => {
                a.bias = Some(m.bias(&a.segments));
                a.path = PathBuf::from(&m.path);
                a.analysis.image = m.path.clone();
                out.push(a);
            }
            Err(e) => skipped.push(format!("{}: {e}", m.path)),
        }
    }
    Ok((out, skipped))
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
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let exe = std::fs::read_link(proc.join("exe")).ok();
    let exe = exe.as_ref().and_then(|p| p.to_str()).map(|p| p.trim_end_matches(" (deleted)"));
    // The kernel maps the main executable first; /proc/PID/exe says which it is.
    let main = images.iter().position(|m| Some(m.analysis.image.as_str()) == exe).unwrap_or(0);
    let cmdline = std::fs::read(proc.join("cmdline")).unwrap_or_default();
    let argv0 = cmdline.split(|&b| b == 0).next().map(|a| String::from_utf8_lossy(a).into_owned());
    let comm = std::fs::read_to_string(proc.join("comm")).ok().map(|c| c.trim_end().to_string());
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
