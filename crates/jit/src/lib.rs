//! kerf's JIT translator (JIFL; DESIGN.md §4, "JIT with the translator outside the target").
//! Pure: from the static CFG kerf already holds, it chooses the region reached from a set of
//! root functions ([`region`]) and translates it, module by module, into a code cache image
//! for a given address ([`translate`]): blocks copied with a plugin's IR woven in at their
//! entries, direct branches and calls linked block to block, indirect transfers through the
//! lookup table ([`table`]) by flag-free sequences ([`x86_64`]), and every way out of the
//! region counted. The program only ever sees original addresses on its stack: a call pushes
//! the original return address, and a `ret` looks it up.
//!
//! The target holds only what this produces (the cache, the table, a data area); the session
//! layer writes it, splices the roots' entries to their translations, and on detach sends
//! each thread in the cache back to the original address of the clean point it is at.

#![forbid(unsafe_code)]
#![warn(rust_2018_idioms)]

pub mod counters;
pub mod mailbox;
pub mod region;
pub mod table;
pub mod translate;
pub mod x86_64;

pub use region::{closure, Region};
pub use table::Table;
pub use translate::{
    action_site, action_sites, counting_entry_stub, data_for, entry_stub, escape_stub,
    glibc_module, load_hook, load_site, longjmp_hook, room_for, room_parts, room_total,
    signal_hook, translate, BlockInfo, Branch, EdgeInfo, Entry, ExitInfo, JitError, Layout, Leaves,
    Link, Marks, Module, NoPlugin, Plugin, Scope, SignalHook, Translated, Translation,
};
