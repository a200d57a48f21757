//! Installing probes from analyses that may have come from the cache (DESIGN.md §5: the cache
//! is untrusted input).
//!
//! An analysis read from the cache passed the cache's whole-entry checks (its checksum, key
//! and the digest of the image's bytes: see `cache`), but what it says about the code is
//! checked only where it is used: splice planning checks every function it plans a probe in,
//! with the functions its liveness rests on, and the padding a springboard takes
//! (`plan::plan_sites`). A check that fails stops the installation before anything is
//! spliced ([`InstrumentError::Analysis`]); then the whole entry is rejected: the module is
//! analysed afresh (the new analysis replaces the entry), the probes are resolved again from
//! the new analysis (they were resolved from the bad one) and installing starts over. A fresh
//! analysis needs no check, so this ends after at most one new analysis per module.

use crate::instrument::{Cancel, Instrumentation, Options, ProcessBackend};
use crate::load::{AnalyzedImage, LoadError};
use crate::probe::{InstrumentError, Probe, ToolData};
use kerf_analysis::Progress;

/// Probes installed, what they were built with, and what was said on the way.
pub struct Installed<T> {
    pub inst: Instrumentation,
    pub probes: Vec<Probe>,
    /// The timers, programs and area the probes went in with.
    pub tool: ToolData,
    /// What `build` returned with the probes that went in.
    pub built: T,
    /// Cached analyses that failed their check and were analysed again, each with why.
    pub warnings: Vec<String>,
}

#[derive(Debug)]
pub enum CheckedError<E> {
    /// Building the probes failed (a spec that resolves to nothing, ...).
    Build(E),
    Instrument(InstrumentError),
    /// Analysing a module again failed.
    Load(LoadError),
}

impl<E: std::fmt::Display> std::fmt::Display for CheckedError<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CheckedError::Build(e) => write!(f, "{e}"),
            CheckedError::Instrument(e) => write!(f, "{e}"),
            CheckedError::Load(e) => write!(f, "{e}"),
        }
    }
}

impl<E: std::fmt::Debug + std::fmt::Display> std::error::Error for CheckedError<E> {}

/// Install in process `pid` the probes `build` makes from `modules` (the probes, the number of
/// timer blocks, and anything else the caller keeps with them), analysing again, in place,
/// every module whose cached analysis fails its check (see the module documentation).
pub fn install<T, E>(
    pid: i32,
    modules: &mut [AnalyzedImage],
    opts: Options,
    cancel: Cancel<'_>,
    progress: &dyn Progress,
    mut build: impl FnMut(&[AnalyzedImage]) -> Result<(Vec<Probe>, ToolData, T), E>,
) -> Result<Installed<T>, CheckedError<E>> {
    let mut warnings = Vec::new();
    loop {
        let (probes, tool, built) = build(modules).map_err(CheckedError::Build)?;
        // Claimed before anything changes in the target: another kerf there is refused.
        let installed = ProcessBackend::claim(pid).and_then(|be| {
            Instrumentation::install_with(be, modules, &probes, &tool, opts, cancel)
        });
        let err = match installed {
            Ok(inst) => return Ok(Installed { inst, probes, tool, built, warnings }),
            Err(e) => e,
        };
        let InstrumentError::Analysis { module, detail, .. } = &err else {
            return Err(CheckedError::Instrument(err));
        };
        // `None`: not a cached analysis, which no check rejects; the error stands.
        match analyze_rejected(modules, *module, detail, progress) {
            None => return Err(CheckedError::Instrument(err)),
            Some(said) => warnings.extend(said.map_err(CheckedError::Load)?),
        }
    }
}

/// Analyse module `module` of `modules` again, in place, its cached analysis having failed a
/// check (`detail`): what to warn about, or `None` when it did not come from the cache (no
/// check rejects a fresh analysis, so a caller that retries after this ends).
pub fn analyze_rejected(
    modules: &mut [AnalyzedImage],
    module: usize,
    detail: &dyn std::fmt::Display,
    progress: &dyn Progress,
) -> Option<Result<Vec<String>, LoadError>> {
    let fresh = match modules[module].analyze_again(progress)? {
        Ok(fresh) => fresh,
        Err(e) => return Some(Err(e)),
    };
    let mut warnings = vec![format!(
        "the cached analysis of {} does not match it ({detail}): rejected, analysed again",
        modules[module].path.display()
    )];
    warnings.extend(fresh.cache_warning.clone());
    modules[module] = fresh;
    Some(Ok(warnings))
}
