//! The per-thread counter slabs' sequences run in this process: a thread's gate
//! ([`thread_gate`]) claims a slab ([`claim_slab`]) when its gs base is zero or a slab another
//! thread owns (a thread `clone` made starts with its parent's), and passes straight on when
//! the slab is its own; the claims hand out slabs in turn, the last one to every thread past
//! the others, and a slab kerf put on the free list before any fresh one; and every register and flag comes through as it was, whatever the stack
//! offset the gate keeps its registers at.

use iced_x86::{Code, Instruction, Register};
use kerf_jit::x86_64::{
    claim_slab, encode, thread_gate, Slabs, SLABS_FREE, SLABS_HEADER, SLABS_REUSED, SLAB_NEXT,
    SLAB_OWNER,
};
use std::arch::asm;

/// Labels: non-canonical addresses, as the translator's.
const L: u64 = 0x8000_0000_0000_0000;
const GATE_0: u64 = L + 1;
const GATE_128: u64 = L + 2;
const CLAIM: u64 = L + 3;
const FOREIGN: u64 = L + 4;

/// Two slabs of a page each, in a region of four pages (the header's, the slabs', and one
/// left over: the region is a power of two of bytes).
const COUNT: u32 = 2;
const SPAN_LOG2: u8 = 12;
const SIZE_LOG2: u8 = 14;
/// What the way out for a foreign `gs` base (label `FOREIGN`) leaves in `r11`.
const LEFT: u64 = 0xf0f0;
/// Where in the code page the gates count the threads that left.
const COUNT_AT: u64 = 2048;

fn fsgsbase() -> bool {
    // SAFETY: getauxval has no preconditions.
    unsafe { libc::getauxval(libc::AT_HWCAP2) & 2 != 0 }
}

/// The thread id's offset in glibc's `struct pthread` (its libthread_db descriptor: bits,
/// count, offset), as kerf reads it from a target's libc.
fn glibc_tid_offset() -> i32 {
    // SAFETY: dlsym with a NUL-terminated name; the result is checked before it is read,
    // and glibc's descriptor is three u32s.
    let d = unsafe {
        let p = libc::dlsym(libc::RTLD_DEFAULT, c"_thread_db_pthread_tid".as_ptr());
        assert!(!p.is_null(), "glibc exports _thread_db_pthread_tid");
        *(p as *const [u32; 3])
    };
    d[2] as i32
}

/// An anonymous read/write(/exec) mapping of `len` bytes, never unmapped (threads may still
/// hold a gs base into it when a test ends; each thread clears its own).
fn map(len: usize, exec: bool) -> u64 {
    let prot = libc::PROT_READ | libc::PROT_WRITE | if exec { libc::PROT_EXEC } else { 0 };
    // SAFETY: an anonymous mapping; the result is checked.
    let at = unsafe {
        libc::mmap(std::ptr::null_mut(), len, prot, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, -1, 0)
    };
    assert_ne!(at, libc::MAP_FAILED);
    at as u64
}

/// The two gates, each ending in `ret`, their way out for a foreign `gs` base (`r11 = LEFT`,
/// `ret`), and the claim, laid out in an executable mapping: the gates' addresses and that
/// of the word where they count foreign bases (in the same page).
fn code(slabs: &Slabs) -> (u64, u64, u64) {
    let at = map(4096, true);
    let mut next = L + 100;
    let mut labels = || {
        next += 1;
        next
    };
    let mut v = Vec::new();
    for (label, skip) in [(GATE_0, 0), (GATE_128, 128)] {
        let mut gate = thread_gate(skip, slabs, [CLAIM, FOREIGN, at + COUNT_AT], &mut labels);
        gate[0].set_ip(label);
        v.extend(gate);
        v.push(Instruction::with(Code::Retnq));
    }
    let mut left = Instruction::with2(Code::Mov_r64_imm64, Register::R11, LEFT).unwrap();
    left.set_ip(FOREIGN);
    v.extend([left, Instruction::with(Code::Retnq)]);
    v.extend(claim_slab(CLAIM, slabs, &mut labels));
    let laid = encode::lay_out(&v, at).unwrap();
    // SAFETY: the code fits the fresh page mapped for it.
    unsafe { std::ptr::copy_nonoverlapping(laid.code.as_ptr(), at as *mut u8, laid.code.len()) };
    let k = |l: u64| v.iter().position(|i| i.ip() == l).unwrap();
    assert!((laid.code.len() as u64) < COUNT_AT);
    (at + laid.offsets[k(GATE_0)] as u64, at + laid.offsets[k(GATE_128)] as u64, at + COUNT_AT)
}

/// Call a gate with `rax`, `rcx`, `rdx`, `r11` set to a pattern and the carry flag set; what
/// they and the flags' carry came back as.
fn through(gate: u64) -> ([u64; 4], u64) {
    let (mut a, mut c, mut d, mut r11) = (0xa1u64, 0xc1u64, 0xd1u64, 0x111u64);
    let flags: u64;
    // SAFETY: the gate returns with `ret`, preserves every register but those named (which
    // it must preserve too: checked) and uses the stack below `rsp` (no `nostack`).
    unsafe {
        asm!(
            "stc",
            "call {g}",
            "pushfq",
            "pop {fl}",
            g = in(reg) gate,
            fl = out(reg) flags,
            inout("rax") a, inout("rcx") c, inout("rdx") d, inout("r11") r11,
        );
    }
    ([a, c, d, r11], flags & 1)
}

fn gs_base() -> u64 {
    let g: u64;
    // SAFETY: reads this thread's gs base (the test runs only where FSGSBASE is enabled).
    unsafe { asm!("rdgsbase {}", out(reg) g) };
    g
}

fn set_gs_base(g: u64) {
    // SAFETY: this thread's own gs base, which nothing in this process uses.
    unsafe { asm!("wrgsbase {}", in(reg) g) };
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() as u32 }
}

fn word(a: u64) -> u64 {
    // SAFETY: an aligned word of a live mapping.
    unsafe { std::ptr::read_volatile(a as *const u64) }
}

#[test]
fn each_thread_claims_a_slab_of_its_own_once_and_the_last_is_shared() {
    if !fsgsbase() {
        eprintln!("skipped: the kernel does not let a thread set its gs base (no FSGSBASE)");
        return;
    }
    let region = map(1 << SIZE_LOG2, false);
    let slabs = slabs_at(region);
    let (gate0, gate128, _) = code(&slabs);
    let slab = move |k: u64| region + SLABS_HEADER + (k << SPAN_LOG2);
    let owner = |k: u64| word(slab(k) + SLAB_OWNER as u64) as u32;
    let same = ([0xa1, 0xc1, 0xd1, 0x111], 1);

    // A thread with no gs base claims slab 0 at its first gate, and no other at the next.
    let first = std::thread::spawn(move || {
        assert_eq!(gs_base(), 0);
        assert_eq!(through(gate0), same);
        let (got, tid) = (gs_base(), gettid());
        assert_eq!(through(gate128), same);
        assert_eq!(through(gate0), same);
        assert_eq!(gs_base(), got, "a second claim");
        set_gs_base(0);
        (got, tid)
    });
    let (got, tid) = first.join().unwrap();
    assert_eq!((got, owner(0)), (slab(0), tid));
    assert_eq!(word(region), 1, "claims");

    // A thread that starts with another's slab (as `clone` leaves it) claims its own: the
    // next, here the last.
    let (got, tid2) = new_thread_through(gate128, slab(0));
    assert_eq!((got, owner(1)), (slab(1), tid2));
    assert_eq!(owner(0), tid, "slab 0 is still its first thread's");

    // Past the others, a thread gets the last slab too; the header counts every claim.
    assert_eq!(new_thread_through(gate0, 0).0, slab(1));
    assert_eq!(word(region), 3, "claims");

    // A slab kerf took back (its owner ended: owner word cleared, pushed on the free list
    // with the head's change count 1) goes to the next claim, which counts its change and
    // leaves the list empty; the claim after that finds the list empty and takes the last.
    set_word(slab(0) + SLAB_OWNER as u64, 0);
    set_word(slab(0) + SLAB_NEXT as u64, 0);
    set_word(region + SLABS_FREE as u64, 1 << 32 | 1);
    let (got, tid4) = new_thread_through(gate128, 0);
    assert_eq!((got, owner(0)), (slab(0), tid4));
    assert_eq!(word(region + SLABS_FREE as u64), 2 << 32, "the list's head after the pop");
    assert_eq!(word(region + SLABS_REUSED as u64), 1, "reused");
    assert_eq!(new_thread_through(gate0, 0).0, slab(1));
    assert_eq!(word(region), 4, "fresh claims");
}

/// In a new thread whose gs base is `start`: through `gate` (every register and the carry
/// flag kept), then its gs base (set back to zero before it ends) and its id.
fn new_thread_through(gate: u64, start: u64) -> (u64, u32) {
    let t = std::thread::spawn(move || {
        set_gs_base(start);
        assert_eq!(through(gate), ([0xa1, 0xc1, 0xd1, 0x111], 1));
        let got = gs_base();
        set_gs_base(0);
        (got, gettid())
    });
    t.join().unwrap()
}

fn set_word(a: u64, v: u64) {
    // SAFETY: an aligned word of a live mapping no thread of this test writes meanwhile.
    unsafe { std::ptr::write_volatile(a as *mut u64, v) }
}

fn slabs_at(region: u64) -> Slabs {
    let tid = glibc_tid_offset();
    Slabs { region, span_log2: SPAN_LOG2, size_log2: SIZE_LOG2, count: COUNT, tid }
}

/// A thread whose `gs` base is not in the slab region (the program's own: `arch_prctl`,
/// `wrgsbase`) leaves each gate by its way out, counted, with its base and every register
/// and flag as they came (`r11` aside, which the way out sets), and nothing read or written
/// through the base: not below the region, not just past its end, not far away.
#[test]
fn a_gs_base_of_the_programs_own_leaves_the_gate_untouched() {
    if !fsgsbase() || !std::arch::is_x86_feature_detected!("bmi2") {
        eprintln!("skipped: no FSGSBASE (the kernel's) or no BMI2 (the CPU's)");
        return;
    }
    // The region between two pages of the program's, each filled with a pattern.
    let all = map(3 << SIZE_LOG2, false);
    let region = all + (1 << SIZE_LOG2);
    let (gate0, gate128, count) = code(&slabs_at(region));
    let below = region - 4096;
    let past = region + (1 << SIZE_LOG2);
    for p in [below, past] {
        for k in 0..512 {
            set_word(p + 8 * k, 0x5a5a_5a5a_5a5a_5a5a);
        }
    }
    let far = map(4096, false);
    let left = ([0xa1, 0xc1, 0xd1, LEFT], 1);
    let mut n = 0;
    for base in [below, past, far, region - 1] {
        for gate in [gate0, gate128] {
            let t = std::thread::spawn(move || {
                set_gs_base(base);
                let r = through(gate);
                let after = gs_base();
                set_gs_base(0);
                (r, after)
            });
            assert_eq!(t.join().unwrap(), (left, base), "base {base:#x}");
            n += 1;
            assert_eq!(word(count), n, "counted");
        }
    }
    for p in [below, past] {
        assert!((0..512).all(|k| word(p + 8 * k) == 0x5a5a_5a5a_5a5a_5a5a), "{p:#x} written");
    }
    assert!((0..512).all(|k| word(far + 8 * k) == 0), "written far away");
    assert_eq!(word(region), 0, "no slab claimed");
    // A base in the region (the header's first slab) is the gate's: claimed, not left.
    let (got, _) = new_thread_through(gate0, region + SLABS_HEADER);
    assert_eq!(got, region + SLABS_HEADER);
    assert_eq!(word(count), n);
}
