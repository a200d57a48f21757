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
/// start of a function (the first with more than three blocks) moved into its first
/// instruction. Returns the options, the first (fresh) analysis and the function that lies.
fn poisoned_entry(name: &str) -> (LoadOptions, AnalyzedImage, FuncId) {
    poisoned_entry_at(name, |a, f| a.cfg.blocks_of(f).len() > 3)
}

fn poisoned_entry_at(
    name: &str,
    pick: impl Fn(&kerf_analysis::Analysis, FuncId) -> bool,
) -> (LoadOptions, AnalyzedImage, FuncId) {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let opts = LoadOptions { cache_dir: Some(dir.clone()), ..LoadOptions::default() };
    let first = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    assert!(!first.cached && first.cache_warning.is_none(), "{:?}", first.cache_warning);
    let mut poisoned = first.analysis.clone();
    let f = (0..poisoned.cfg.functions.len() as u32)
        .map(FuncId)
        .find(|f| pick(&poisoned, *f) && poisoned.cfg.blocks_of(*f).len() > 2)
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

#[test]
fn syscall_sites_come_only_from_checked_functions() {
    // Trap splices need a guard on every `syscall` that may set a signal mask, found from the
    // blocks of the analysis (and the number in eax from the instructions before it in its
    // block): a function holding one is checked before its sites are believed.
    let (opts, first, f) = poisoned_entry_at("session-cache-syscalls", |a, f| {
        a.cfg.functions[f.0 as usize].aliases.iter().any(|n| n == "write")
            || a.cfg.functions[f.0 as usize].name == "write"
    });
    let fresh = kerf_session::plan::syscall_sites(std::slice::from_ref(&first), 0).unwrap();
    assert!(fresh.iter().any(|s| s.func == f), "write has a syscall");
    let second = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    assert!(second.cached && second.unchecked(), "{:?}", second.cache_warning);
    match kerf_session::plan::syscall_sites(std::slice::from_ref(&second), 0) {
        Err(kerf_session::instrument::InstrumentError::Analysis { module: 0, detail, .. }) => {
            assert!(matches!(detail, Invalid::Block { .. }), "{detail}")
        }
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("sites were read from a function that lies"),
    }
}

#[test]
fn every_function_and_padding_run_of_a_good_cached_entry_passes_its_check() {
    // The checks read the image's bytes as analysis reads them (jump tables in data
    // sections, relocated pointers): a good entry must pass everywhere, or every cached
    // analysis would be rejected where it is used.
    for lib in [LIBC, "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"] {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session-cache-good");
        let _ = std::fs::remove_dir_all(&dir);
        let opts = LoadOptions { cache_dir: Some(dir), ..LoadOptions::default() };
        let first = analyze_file(Path::new(lib), &opts, &kerf_analysis::Quiet).unwrap();
        assert!(!first.cached, "{lib}: {:?}", first.cache_warning);
        let second = analyze_file(Path::new(lib), &opts, &kerf_analysis::Quiet).unwrap();
        assert!(second.cached && second.unchecked(), "{lib}: {:?}", second.cache_warning);
        let cfg = &second.analysis.cfg;
        for f in (0..cfg.functions.len() as u32).map(FuncId) {
            if let Err(e) = second.check_function(f) {
                panic!("{lib}: {}: {e}", cfg.function(f).name);
            }
        }
        for i in 0..cfg.padding.len() {
            second.check_padding(i).unwrap_or_else(|e| panic!("{lib}: padding {i}: {e}"));
        }
        let tables = cfg.jump_tables.len();
        assert!(tables > 0, "{lib} has jump tables, checked above");
    }
}

/// libc's debug file (Debian's `libc6-dbg`, which `scripts/deps.sh` installs) is found and
/// checked at every load, for the cache key; its symbols are merged into the image only where
/// the analysis is made (or validated): a load from the cache leaves them out, the entry
/// names libc's local functions already (`_int_malloc` is static in glibc's malloc.c).
#[test]
fn a_cached_analysis_names_the_debug_files_functions_without_merging_them() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session-cache-debug");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = LoadOptions { cache_dir: Some(dir), ..LoadOptions::default() };
    let first = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    let used = first.symbols.debug_file.as_ref();
    let used = used.expect("libc's debug file (libc6-dbg, installed by scripts/deps.sh)");
    assert!(!first.cached && used.merge.is_some() && used.pending.is_none(), "{used:?}");
    let second = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    assert!(second.cached, "{:?}", second.cache_warning);
    let again = second.symbols.debug_file.as_ref().expect("found again");
    assert_eq!(again.identity, used.identity, "the same file, the same key");
    assert!(again.merge.is_none() && again.pending.is_none(), "{again:?}");
    let named = |a: &AnalyzedImage| {
        let cfg = &a.analysis.cfg;
        (0..cfg.functions.len() as u32).any(|f| cfg.function(FuncId(f)).name == "_int_malloc")
    };
    assert!(named(&first) && named(&second));
    // Validated against the image, the symbols are merged first.
    let opts = LoadOptions { validate: true, ..opts };
    let third = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    let merged = third.symbols.debug_file.as_ref().expect("found a third time");
    assert!(third.cached && merged.merge.is_some(), "{:?}", third.cache_warning);
}

/// A JIT's hint (the functions that ran) comes back for the same roots only, an empty one as
/// kept, and an address in it that is no function's entry (a hint is read, never trusted) is
/// dropped, even when the file is well formed.
#[test]
fn a_jit_hint_keeps_function_entries_only() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session-cache-hint");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = LoadOptions { cache_dir: Some(dir.clone()), ..LoadOptions::default() };
    let m = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    let cfg = &m.analysis.cfg;
    let some: Vec<FuncId> = (0..cfg.functions.len() as u32).map(FuncId).step_by(97).collect();
    assert!(some.len() > 10);
    assert_eq!(m.jit_hint(5), None, "none kept yet");
    m.keep_jit_hint(5, &some);
    assert_eq!(m.jit_hint(5), Some(some.clone()));
    assert_eq!(m.jit_hint(6), None, "kept for other roots");
    // "None of them ran" is kept as such, not as "nothing known".
    m.keep_jit_hint(6, &[]);
    assert_eq!(m.jit_hint(6), Some(Vec::new()));
    // Written by kerf's own writer (key, digest and checksum right), with addresses that name
    // no function's entry beside one that does.
    let data = std::fs::read(LIBC).unwrap();
    let image = Image::from_elf(LIBC, &data).unwrap();
    let debug = m.symbols.debug_file.as_ref().map(|d| d.identity.as_str());
    let key = cache::key(image.build_id.as_deref(), Path::new(LIBC), None, debug);
    let entry = cfg.function(some[1]).entry.0;
    let lies = [entry + 1, 0xdead_beef, entry, u64::MAX];
    CacheDir::open(&dir).unwrap().store_hint(&key, &cache::digest(&data, None), 5, &lies).unwrap();
    assert_eq!(m.jit_hint(5), Some(vec![some[1]]));
}

/// A whole check that passed is kept beside the entry (`<entry>.checked`, a `cache::Stamp`),
/// so that the next load by the same build of kerf reads no code to check it again; the
/// stamp vouches only for the entry it was made for and the build that made it. A stamp of
/// another build, one made for the good entry when a lying one has replaced it, and a damaged
/// stamp each vouch for nothing: the lie is caught where it is used, as without stamps.
#[test]
fn a_whole_check_is_kept_for_this_build_and_this_entry_only() {
    let load = |opts: &LoadOptions| analyze_file(Path::new(LIBC), opts, &kerf_analysis::Quiet);
    let (opts, first, f) = poisoned_entry("session-cache-stamp");
    let dir = opts.cache_dir.clone().unwrap();
    let data = std::fs::read(LIBC).unwrap();
    let digest = cache::digest(&data, None);
    let debug = first.symbols.debug_file.as_ref().map(|d| d.identity.as_str());
    let key = cache::key(first.analysis.build_id.as_deref(), Path::new(LIBC), None, debug);
    let c = CacheDir::open(&dir).unwrap();
    // The good entry back (written by kerf's writer, as `poisoned_entry` wrote the lie).
    c.store(&key, &digest, &first.analysis).unwrap();
    assert!(cache::kerf_build().is_some(), "this build has no GNU build-id: no stamps");

    let second = load(&opts).unwrap();
    assert!(second.cached && !second.vouched(), "{:?}", second.cache_warning);
    assert_eq!(c.load_stamp(&key, &digest).unwrap(), None, "a stamp before any check");
    second.check_all_code().unwrap();
    let stamp = c.load_stamp(&key, &digest).unwrap().expect("the passed check is kept");
    assert_eq!(stamp.kerf, cache::kerf_build().unwrap());

    let third = load(&opts).unwrap();
    assert!(third.cached && third.vouched(), "the same build, the same entry");
    third.check_all_code().unwrap();
    assert_eq!(third.check_function(f), Ok(()));

    // Another build's stamp.
    let other = cache::Stamp { kerf: vec![0x5a; 20], ..stamp.clone() };
    c.store_stamp(&key, &digest, &other).unwrap();
    assert!(!load(&opts).unwrap().vouched(), "a stamp of another build vouched");
    // A damaged stamp (its last byte flipped): refused, and the load goes on unvouched.
    c.store_stamp(&key, &digest, &stamp).unwrap();
    let file = dir.join(cache::checked_key(&key));
    let mut bad = std::fs::read(&file).unwrap();
    *bad.last_mut().unwrap() ^= 1;
    std::fs::write(&file, &bad).unwrap();
    assert!(c.load_stamp(&key, &digest).is_err());
    let damaged = load(&opts).unwrap();
    assert!(damaged.cached && !damaged.vouched(), "{:?}", damaged.cache_warning);

    // The lying entry back, beside the good entry's stamp: the stamp names other bytes.
    c.store_stamp(&key, &digest, &stamp).unwrap();
    let (_, _, g) = poisoned_entry("session-cache-stamp-lie");
    assert_eq!(g, f, "the same function lies in both");
    let lie_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session-cache-stamp-lie");
    let lie = std::fs::read(lie_dir.join(&key)).unwrap();
    std::fs::write(dir.join(&key), lie).unwrap();
    let lied = load(&opts).unwrap();
    assert!(lied.cached && !lied.vouched(), "a stamp vouched for an entry it was not made for");
    assert!(matches!(lied.check_function(f), Err(Invalid::Block { .. })));
    assert!(lied.check_all_code().is_err());
}
