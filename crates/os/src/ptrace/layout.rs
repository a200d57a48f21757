//! Where to put new mappings in a target: free gaps between the mappings of /proc/PID/maps
//! (parsed by kerf's one maps parser, [`kerf_analysis::image::maps`]) within reach of an
//! address. Pure functions on parsed mappings, so they are tested without a process.

use kerf_analysis::image::maps::Mapping;
use kerf_arch::RemoteAddr;

/// Page size of x86-64 Linux user mappings.
pub const PAGE: u64 = 4096;
/// Lowest address kerf maps at (above any `vm.mmap_min_addr`).
pub const USER_MIN: u64 = 0x1_0000;
/// End of the 47-bit user address space (the kernel's `TASK_SIZE` with 4-level paging; with
/// 5-level paging the kernel only maps higher when asked to, and so does kerf: never).
pub const USER_MAX: u64 = 0x7fff_ffff_f000;
/// How far a rel32 reaches, less a margin so that code a little beyond `near` (the rest of
/// the function or module being patched) also reaches the region.
pub const REACH: u64 = (1 << 31) - MARGIN;
/// The margin taken off ±2 GiB by [`REACH`].
pub const MARGIN: u64 = 64 << 20;
/// Room left free above `[heap]` for brk growth, so that a kerf mapping never changes how
/// the target's heap can grow.
pub const GROWTH_RESERVE: u64 = 256 << 20;
/// Room left free below `[stack]` for the main stack's growth: the kernel's own minimum gap
/// between the stack and the mmap area (128 MiB).
pub const STACK_RESERVE: u64 = 128 << 20;

/// An empty `[heap]` at `start_brk`: the brk area of a program that has not grown it yet,
/// which [`candidates`] keeps [`GROWTH_RESERVE`] free above as it does a real one.
pub fn brk_start(start_brk: RemoteAddr) -> Mapping {
    Mapping {
        start: start_brk,
        end: start_brk,
        read: false,
        write: false,
        exec: false,
        private: true,
        offset: 0,
        dev: String::new(),
        inode: 0,
        path: Some("[heap]".into()),
    }
}

pub fn page_up(x: u64) -> u64 {
    x.saturating_add(PAGE - 1) & !(PAGE - 1)
}

pub fn page_down(x: u64) -> u64 {
    x & !(PAGE - 1)
}

/// The address window `[lo, hi)` whose every byte lies within [`REACH`] of `near`.
pub fn window_near(near: RemoteAddr) -> (RemoteAddr, RemoteAddr) {
    let lo = near.0.saturating_sub(REACH).max(USER_MIN);
    let hi = near.0.saturating_add(REACH).min(USER_MAX);
    (RemoteAddr(page_up(lo)), RemoteAddr(page_down(hi)))
}

/// Start addresses for a `len`-byte (page-multiple) region that overlaps no mapping and no
/// growth reserve and whose first `in_window` bytes (all of it when `in_window >= len`) lie
/// inside `[lo, hi)`, best first: the region nearest to `near` in each free gap (the top of
/// a gap below `near`, the bottom of a gap above it), ordered by distance.
pub fn candidates(
    maps: &[Mapping],
    lo: RemoteAddr,
    hi: RemoteAddr,
    len: u64,
    in_window: u64,
    near: RemoteAddr,
) -> Vec<RemoteAddr> {
    let in_window = page_up(in_window.min(len).max(1));
    if len == 0 || lo >= hi {
        return Vec::new();
    }
    // Plain numbers from here: gap arithmetic clamps and saturates at the ends of user space.
    let (lo, hi, near) = (lo.0, hi.0, near.0);
    // Occupied ranges: every mapping, plus growth room above the heap and below the stack.
    let mut busy: Vec<(u64, u64)> = Vec::new();
    for m in maps {
        let (mut s, mut e) = (m.start.0, m.end.0);
        if m.path.as_deref() == Some("[heap]") {
            e = e.saturating_add(GROWTH_RESERVE);
        }
        if m.path.as_deref() == Some("[stack]") {
            s = s.saturating_sub(STACK_RESERVE);
        }
        busy.push((s, e));
    }
    busy.sort_unstable();
    let mut free = Vec::new();
    let mut cursor = USER_MIN;
    for (s, e) in busy {
        if s > cursor {
            free.push((cursor, s));
        }
        cursor = cursor.max(e);
    }
    if cursor < USER_MAX {
        free.push((cursor, USER_MAX));
    }
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in free {
        let s = page_up(s.max(lo));
        // Nothing maps past the end of user space: the gap between `[stack]` and
        // `[vsyscall]` ends there (with ASLR off, as `setarch -R` and gdb run programs, the
        // stack ends at it, and a region placed after the stack failed with ENOMEM).
        let e = page_down(e.min(USER_MAX));
        // The whole region in the gap, its first `in_window` bytes below `hi`.
        if e <= s || e - s < len || page_down(hi) < s + in_window {
            continue;
        }
        // Nearest placement to `near` inside [s, last].
        let last = (e - len).min(page_down(hi) - in_window);
        let at = if near <= s {
            s
        } else if near >= last {
            last
        } else {
            page_down(near).max(s)
        };
        let dist = if at + len <= near { near - at } else { at.saturating_sub(near) };
        out.push((dist, at));
    }
    out.sort_unstable();
    out.into_iter().map(|(_, a)| RemoteAddr(a)).collect()
}

/// Whether every byte of `[addr, addr + len)` is within [`REACH`] of `near`.
pub fn within_reach(near: RemoteAddr, addr: RemoteAddr, len: u64) -> bool {
    let last = addr + (len.max(1) - 1);
    near.distance(addr) <= REACH && near.distance(last) <= REACH
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_analysis::image::maps::parse_maps;

    fn maps(text: &str) -> Vec<Mapping> {
        parse_maps(text).expect("parses")
    }

    fn r(a: u64) -> RemoteAddr {
        RemoteAddr(a)
    }

    const MAPS: &str = "\
555555554000-555555556000 r--p 00000000 08:02 100 /usr/bin/my prog
555555556000-55555555a000 r-xp 00002000 08:02 100 /usr/bin/my prog
55555555a000-55555555c000 rw-p 00006000 08:02 100 /usr/bin/my prog
55555555c000-55555557d000 rw-p 00000000 00:00 0 [heap]
7ffff7d80000-7ffff7f00000 r-xp 00028000 08:02 200 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0 [vdso]
7ffffffdd000-7ffffffff000 rw-p 00000000 00:00 0 [stack]
ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]
";

    #[test]
    fn window_is_clamped_to_user_space() {
        assert_eq!(window_near(r(0x40_0000)), (r(USER_MIN), r(0x40_0000 + REACH)));
        let (lo, hi) = window_near(r(0x7fff_f000_0000));
        assert_eq!((lo, hi), (r(0x7fff_f000_0000 - REACH), r(USER_MAX)));
    }

    #[test]
    fn nearest_gap_below_the_executable_comes_first() {
        let maps = maps(MAPS);
        let near = r(0x5555_5555_7000);
        let (lo, hi) = window_near(near);
        let c = candidates(&maps, lo, hi, 0x2000, 0x2000, near);
        // Directly below the executable.
        assert_eq!(c[0], r(0x5555_5555_2000));
        for &a in &c {
            assert!(within_reach(near, a, 0x2000), "{a:#x}");
            assert!(maps.iter().all(|m| a + 0x2000 <= m.start || a >= m.end), "{a:#x}");
        }
        // Never in the heap's growth room.
        let heap_end = r(0x5555_5557_d000);
        assert!(c.iter().all(|&a| a + 0x2000 <= heap_end || a >= heap_end + GROWTH_RESERVE));
    }

    /// Before the program's first `brk` there is no `[heap]` line, but its brk area starts
    /// at `start_brk` (python3.11, not PIE: kerf's heap right after its data took it).
    #[test]
    fn the_brk_area_is_kept_free_before_the_first_brk() {
        let exe = "\
400000-41f000 r--p 00000000 08:02 9 /usr/bin/python3.11
41f000-6d2000 r-xp 0001f000 08:02 9 /usr/bin/python3.11
946000-aca000 rw-p 00546000 08:02 9 /usr/bin/python3.11
";
        let mut maps = maps(exe);
        let near = r(0x6d_2000);
        let (lo, hi) = window_near(near);
        let len = 36 << 20;
        assert_eq!(candidates(&maps, lo, hi, len, len, near)[0], r(0xaca000), "no brk known");
        let start_brk = r(0x1f4_3000);
        maps.push(brk_start(start_brk));
        let c = candidates(&maps, lo, hi, len, len, near);
        assert!(!c.is_empty());
        for a in c {
            let clear = a.0 + len <= start_brk.0 || a.0 >= start_brk.0 + GROWTH_RESERVE;
            assert!(clear && within_reach(near, a, len), "{a:#x}");
        }
    }

    #[test]
    fn library_gets_gap_below_or_between_and_not_stack_reserve() {
        let maps = maps(MAPS);
        let near = r(0x7fff_f7d9_0000);
        let (lo, hi) = window_near(near);
        let c = candidates(&maps, lo, hi, 0x10000, 0x10000, near);
        assert!(!c.is_empty());
        // Between libc and the vdso is the nearest gap after the one below libc: the end of
        // libc is 0x170000 after near's page, the start of libc 0x10000 before it.
        assert_eq!(c[0], r(0x7fff_f7d7_0000));
        assert_eq!(c[1], r(0x7fff_f7f0_0000));
        let stack = r(0x7fff_fffd_d000);
        assert!(c.iter().all(|&a| a + 0x10000 <= stack - STACK_RESERVE));
    }

    /// The stack ends at the top of user space (ASLR off): the gap from there to
    /// `[vsyscall]` is not user space, and no region may start or end in it.
    #[test]
    fn nothing_past_the_end_of_user_space() {
        let maps = maps(MAPS);
        let near = r(0x7fff_f7fc_1000);
        // A module's window (`[end - 2 GiB, start + 2 GiB)`) as callers give it, not clamped.
        let (lo, hi) = (r(near.0 - REACH), r(near.0 + REACH));
        let len = 0x56_7000;
        for in_window in [len, PAGE] {
            let c = candidates(&maps, lo, hi, len, in_window, near);
            assert!(!c.is_empty());
            assert!(c.iter().all(|&a| a.0 + len <= USER_MAX), "{c:#x?}");
        }
    }

    #[test]
    fn no_candidates_when_full_or_empty() {
        let maps = maps("10000-7ffffffff000 rw-p 00000000 00:00 0\n");
        let (min, max) = (r(USER_MIN), r(USER_MAX));
        assert!(candidates(&maps, min, max, PAGE, PAGE, r(0x1000_0000)).is_empty());
        assert!(candidates(&[], min, max, 0, 0, r(0x1000_0000)).is_empty());
        assert_eq!(
            candidates(&[], r(0x20_0000), r(0x30_0000), PAGE, PAGE, r(0x28_0000))[0],
            r(0x28_0000)
        );
    }

    /// A region of which only a prefix must be in the window: the rest may run past its
    /// end (not past a mapping), and a gap too small for the whole is still skipped.
    #[test]
    fn only_the_prefix_must_lie_in_the_window() {
        let maps = maps(
            "400000-500000 r-xp 00000000 08:02 1 /bin/p\n900000-a00000 rw-p 00000000 00:00 0\n",
        );
        let (lo, hi) = (r(0x40_0000), r(0x60_0000));
        let near = r(0x50_0000);
        // 3 MiB, 64 KiB of it in the window: right after /bin/p, running to 0x800000.
        assert_eq!(candidates(&maps, lo, hi, 0x30_0000, 0x1_0000, near)[0], r(0x50_0000));
        // All of it in the window: no room.
        assert!(candidates(&maps, lo, hi, 0x30_0000, 0x30_0000, near).is_empty());
        // 5 MiB does not fit below the mapping at 0x900000; above it, the start is past hi.
        assert!(candidates(&maps, lo, hi, 0x50_0000, 0x1_0000, near).is_empty());
        // With a window reaching past that mapping: the gap above it.
        let far = candidates(&maps, lo, r(0xb0_0000), 0x50_0000, 0x1_0000, near);
        assert_eq!(far, vec![r(0xa0_0000)]);
    }

    #[test]
    fn reach_checks_both_ends() {
        let near = r(1 << 40);
        assert!(within_reach(near, near + REACH - 0x1000, 0x1000));
        assert!(!within_reach(near, near + REACH - 0x1000, 0x2000));
        assert!(within_reach(near, near - REACH, 0x1000));
        assert!(!within_reach(near, near - REACH - 1, 0x1000));
    }
}
