//! A cache entry whose checksum holds but whose analysis does not describe the image (what
//! someone able to write the cache file could make, or kerf's own format drifting) is never
//! trusted: the function that lies fails its check where it would be used, before any splice
//! is planned from it, and a load with `validate` checks everything and rejects the entry with
//! a warning, analyses the image again and replaces the entry. Validation does not rest on the
//! checksum alone. (`kerf count` on such an entry: crates/kerf/tests/cache.rs.)

use kerf_analysis::cfg::FuncId;
use kerf_analysis::image::Image;
use kerf_analysis::validate::Invalid;
use kerf_session::cache::{self, CacheDir};
use kerf_session::{analyze_file, AnalyzedImage, LoadOptions};
use std::path::{Path, PathBuf};

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

/// Analyse libc into a fresh cache `name`, then store over its entry, through kerf's own
/// writer (so that key, digest and checksum are all right), the same analysis with one block
/// start of a function moved into its first instruction. Returns the options, the first
/// (fresh) analysis and the function that lies.
fn poisoned_entry(name: &str) -> (LoadOptions, AnalyzedImage, FuncId) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let opts = LoadOptions { cache_dir: Some(dir.clone()), ..LoadOptions::default() };
    let first = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    assert!(!first.cached && first.cache_warning.is_none(), "{:?}", first.cache_warning);
    let mut poisoned = first.analysis.clone();
    let f = (0..poisoned.cfg.functions.len() as u32)
        .map(FuncId)
        .find(|f| poisoned.cfg.blocks_of(*f).len() > 3)
        .unwrap();
    poisoned.cfg.blocks.of_mut(f)[2].start.0 += 1;
    let data = std::fs::read(LIBC).unwrap();
    let image = Image::from_elf(LIBC, &data).unwrap();
    let debug = first.symbols.debug_file.as_ref().map(|d| d.identity.as_str());
    let key = cache::key(image.build_id.as_deref(), Path::new(LIBC), None, debug);
    let c = CacheDir::open(&dir).unwrap();
    c.store(&key, &cache::digest(&data, None), &poisoned).unwrap();
    (opts, first, f)
}

#[test]
fn a_well_formed_entry_that_lies_is_caught_where_the_lying_function_is_used() {
    let (opts, _, f) = poisoned_entry("session-cache-lazy");
    let second = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    // Its checksum, key and digest hold: it is read, and checked only as it is used.
    assert!(second.cached && second.unchecked(), "{:?}", second.cache_warning);
    let name = &second.analysis.cfg.function(f).name;
    match second.check_function(f) {
        Err(Invalid::Block { function, .. }) => assert_eq!(&function, name),
        other => panic!("{name}, which lies, passed its check: {other:?}"),
    }
    // A function that does not rest on it is fine (the check is per function).
    let n = second.analysis.cfg.functions.len() as u32;
    let good = (0..n).map(FuncId).filter(|g| *g != f).find(|g| second.check_function(*g).is_ok());
    assert!(good.is_some(), "every function of libc was rejected");
}

#[test]
fn with_validate_a_well_formed_entry_that_lies_is_rejected_and_rebuilt() {
    let (opts, first, f) = poisoned_entry("session-cache-validate");
    let opts = LoadOptions { validate: true, ..opts };
    let second = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    assert!(!second.cached, "a lying entry was used");
    let w = second.cache_warning.unwrap_or_default();
    assert!(w.contains("does not match the image"), "{w}");
    // Rebuilt: the next load reads a good entry, which passes every check.
    let third = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    assert!(third.cached, "not rebuilt: {:?}", third.cache_warning);
    assert_eq!(third.analysis.cfg.blocks_of(f)[2].start, first.analysis.cfg.blocks_of(f)[2].start);
}
