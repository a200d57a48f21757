//! A cache entry whose checksum holds but whose analysis does not describe the image (what
//! someone able to write the cache file could make) is still rejected, with a warning, and
//! the image analysed again: validation does not rest on the checksum alone.

use kerf_analysis::image::Image;
use kerf_session::cache::{self, CacheDir};
use kerf_session::{analyze_file, LoadOptions};
use std::path::{Path, PathBuf};

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";

#[test]
fn a_well_formed_entry_that_lies_about_the_code_is_rejected_and_rebuilt() {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("session-cache");
    let _ = std::fs::remove_dir_all(&dir);
    let opts = LoadOptions { cache_dir: Some(dir.clone()), ..LoadOptions::default() };
    let first = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    assert!(!first.cached && first.cache_warning.is_none(), "{:?}", first.cache_warning);
    // The same entry with one block start moved into its first instruction, stored through
    // kerf's own writer, so that key, digest and checksum are all right.
    let mut poisoned = first.analysis.clone();
    let f = (0..poisoned.cfg.functions.len() as u32)
        .map(kerf_analysis::cfg::FuncId)
        .find(|f| poisoned.cfg.blocks_of(*f).len() > 3)
        .unwrap();
    poisoned.cfg.blocks.of_mut(f)[2].start.0 += 1;
    let data = std::fs::read(LIBC).unwrap();
    let image = Image::from_elf(LIBC, &data).unwrap();
    let key = cache::key(image.build_id.as_deref(), Path::new(LIBC), None);
    let c = CacheDir::open(&dir).unwrap();
    c.store(&key, &cache::digest(&data, None), &poisoned).unwrap();
    let second = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    assert!(!second.cached, "a lying entry was used");
    let w = second.cache_warning.unwrap_or_default();
    assert!(w.contains("does not match the image"), "{w}");
    let third = analyze_file(Path::new(LIBC), &opts, &kerf_analysis::Quiet).unwrap();
    assert!(third.cached, "not rebuilt: {:?}", third.cache_warning);
}
