//! The analysis cache: one file per analysed image, keyed by its build-id (or, without one,
//! by path, size and modification time) and by the symbol file added to it, so a second
//! analysis of the same image is a file read.

use kerf_analysis::Analysis;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Bumped whenever the analysis or its serialised form changes meaning.
const FORMAT: u32 = 6;

/// Where cache files live: `$KERF_CACHE_DIR`, else `$XDG_CACHE_HOME/kerf`, else
/// `~/.cache/kerf`.
pub fn default_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("KERF_CACHE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_CACHE_HOME") {
        return PathBuf::from(d).join("kerf");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".cache").join("kerf")
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

/// The cache key of an image: its build-id when it has one, else what identifies the file.
pub fn key(build_id: Option<&[u8]>, file: &Path, symbols: Option<&str>) -> String {
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
    format!("v{FORMAT}-{ident}-{syms:016x}.bin")
}

/// The cached analysis under `key`, if present and readable. A damaged file is ignored (and
/// will be overwritten), never trusted.
pub fn load(dir: &Path, key: &str) -> Option<Analysis> {
    let bytes = fs::read(dir.join(key)).ok()?;
    bincode::deserialize(&bytes).ok()
}

/// Store an analysis. Written to a temporary file and renamed, so that a concurrent reader or
/// a kill half-way never sees a partial file. Failures are returned for the caller to report
/// as a warning: the cache is an optimisation.
pub fn store(dir: &Path, key: &str, a: &Analysis) -> std::io::Result<()> {
    fs::create_dir_all(dir)?;
    let bytes = bincode::serialize(a).map_err(std::io::Error::other)?;
    let tmp = dir.join(format!(".{key}.{}", std::process::id()));
    let mut f = fs::File::create(&tmp)?;
    f.write_all(&bytes)?;
    fs::rename(&tmp, dir.join(key))
}
