//! Every test that boots Debian's stock kernel under qemu (vm/run), in one test binary so that
//! libtest runs its boots side by side: vm/run keeps both of a guest's vCPUs on one host
//! thread (`tcg,thread=single`), so a boot uses one host core, and two boots at once on the
//! CI machine's two cores take about the time of the longer one instead of the sum (the
//! core-text coverage boot alone is 7-20 minutes under TCG). libtest starts tests in name
//! order: `cover_core` (the longest) and `kerf` first, `vm` when one of them ends.
//!
//! Run one alone with `cargo test --release -p kerf --test kernel cover_core` (or `kerf`, `vm`).

#[path = "../common/mod.rs"]
mod common;

mod cover_core;
mod kerf;
mod vm;
