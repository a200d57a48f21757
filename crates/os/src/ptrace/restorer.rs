//! The restorer: a few bytes kerf places in a process it holds (after the vDSO's image, or in
//! a page of their own), through which injected system calls run, so that a thread kerf
//! leaves in the middle of one (kerf killed) finishes the call and puts its own registers
//! back by itself instead of running on with the call's; with them, a SIGTRAP handler that
//! keeps a thread kerf was single-stepping alive if kerf dies (the trap guard, below).
//!
//! Pure: the stub's and the guard's bytes, where they fit in the vDSO, and the frame the stub
//! pops, tested on bytes;
//! [`super::Tracee`] places it, writes the frame and drives the call.
//!
//! # How a call runs through it
//!
//! The thread's registers as kerf found them are written as a *frame* on its own stack,
//! below the red zone (where a signal handler's frame would go: the ABI leaves that memory to
//! asynchronous use; its old bytes are put back after the call), and where it must go on is
//! written into the restorer's *slot*. The thread is then pointed at the stub with `rsp` at
//! the frame and the call's number and arguments in its registers. The stub is:
//!
//! ```text
//!   syscall                      ; the injected call
//!   if gettid() == [MASKED_TID]: ; a thread whose mask kerf changed for the call
//!     rt_sigprocmask(SIG_SETMASK, &OWN_MASK, NULL, 8)
//!   pop r15 ... pop rax          ; every general register, from the frame
//!   popfq                        ; the flags
//!   pop rsp                      ; the stack pointer
//!   jmp [rip + slot]             ; where the thread was
//! ```
//!
//! kerf runs it with `PTRACE_SYSCALL` to the call's entry stop, then `PTRACE_INTERRUPT` and
//! `PTRACE_CONT`: the call runs and the thread stops again (an interrupt stop) before its
//! next user instruction, `rax` holding the result. kerf never lets the thread reach the
//! `pop`s itself (it puts the registers back with `PTRACE_SETREGS`, which keeps the kernel's
//! own restart of an interrupted call). The `pop`s run only when kerf is gone: from any stop
//! of the sequence, the thread resumes into the call or after it, and the stub brings it
//! back. The jump reads the slot, not the stack: once `rsp` is the thread's again, the memory
//! below it belongs to any signal that arrives. Only one thread at a time is in a call, so
//! one slot serves them all. Nor is more than one thread's mask changed by kerf at a time:
//! where a signal came first to a call, kerf holds the asynchronous ones back in the
//! thread's mask for the rest of it (as for a step, see `Tracee::step_unmasked`), only while
//! the thread's registers are the stub's, and writes the thread and its own mask for the
//! stub first ([`MASKED_TID`], [`OWN_MASK`]).
//!
//! A thread stopped inside an interrupted system call (`orig_rax` a call, `rax` an
//! `-ERESTART*` code) would have been restarted by the kernel when it resumed; the stub
//! cannot ask the kernel for that, so its frame holds the restart already made: `rax` the
//! call again (or `restart_syscall` for `-ERESTART_RESTARTBLOCK`) and the PC back on the
//! 2-byte `syscall`. The one difference from the kernel: a signal with a handler that arrives
//! then restarts the call instead of making it fail with `EINTR`.
//!
//! # The trap guard
//!
//! The same bytes hold a SIGTRAP handler that kerf installs while it single-steps a thread
//! (only where the program has no SIGTRAP handler of its own, and only while it holds
//! every thread: the program never runs with it unless kerf dies). A step ends in a
//! signal-delivery-stop whose signal is SIGTRAP, with the trap flag set: a tracer that dies
//! there leaves the kernel to deliver that SIGTRAP (or the next step's) to the program, and
//! the default action kills it (7 of 40 kills of `kerf jit` during flushes did). The guard
//! takes a step's trap (`si_code` `TRAP_TRACE`, or `TRAP_BRKPT` after a stepped `syscall`),
//! clears the trap flag in the interrupted context and, in the thread whose mask kerf changed
//! for the step ([`MASKED_TID`]), puts the program's mask in the context (the kernel restores
//! it at `sigreturn`), and returns. Any other SIGTRAP (the program's own `int3`, `raise`)
//! puts the program's action back ([`PUT_BACK`]: the default, or ignored) and sends itself
//! the signal again, which that action then takes once the handler returns. kerf puts the
//! program's action back itself before it lets the threads go.
//!
//! ```text
//!   +0    the stub            +88   the guard (GUARD)      +194  its sa_restorer
//!   +80   the slot            +208  the guard's action
//!   +240  the thread whose mask kerf changed, and the program's mask for it
//!   +256  the program's SIGTRAP action
//! ```

use super::sys::Regs;
use kerf_arch::RemoteAddr;

/// The stub. See the module documentation; [`FRAME`] is the order of its `pop`s.
#[rustfmt::skip]
pub const STUB: [u8; 76] = [
    0x0f, 0x05,                               // syscall                ; the injected call
    // The thread whose mask kerf changed for the call: the program's mask back.
    0xb8, 0xba, 0x00, 0x00, 0x00,             // mov eax, 186           ; gettid
    0x0f, 0x05,                               // syscall
    0x48, 0x3b, 0x05, rel(MASKED_TID, 0x10), 0x00, 0x00, 0x00, // cmp rax, [rip + MASKED_TID]
    0x75, 0x1b,                               // jne pops
    // rt_sigprocmask(SIG_SETMASK, &OWN_MASK, NULL, 8)
    0xb8, 0x0e, 0x00, 0x00, 0x00,             // mov eax, 14
    0xbf, 0x02, 0x00, 0x00, 0x00,             // mov edi, 2
    0x48, 0x8d, 0x35, rel(OWN_MASK, 0x23), 0x00, 0x00, 0x00,   // lea rsi, [rip + OWN_MASK]
    0x31, 0xd2,                               // xor edx, edx
    0x41, 0xba, 0x08, 0x00, 0x00, 0x00,       // mov r10d, 8
    0x0f, 0x05,                               // syscall
    0x41, 0x5f,                               // pops: pop r15
    0x41, 0x5e,                               // pop r14
    0x41, 0x5d,                               // pop r13
    0x41, 0x5c,                               // pop r12
    0x41, 0x5b,                               // pop r11
    0x41, 0x5a,                               // pop r10
    0x41, 0x59,                               // pop r9
    0x41, 0x58,                               // pop r8
    0x5f,                                     // pop rdi
    0x5e,                                     // pop rsi
    0x5d,                                     // pop rbp
    0x5b,                                     // pop rbx
    0x5a,                                     // pop rdx
    0x59,                                     // pop rcx
    0x58,                                     // pop rax
    0x9d,                                     // popfq
    0x5c,                                     // pop rsp
    0xff, 0x25, rel(SLOT, 0x4c), 0x00, 0x00, 0x00, // jmp [rip + SLOT]
];

/// Where, in the page, the address the stub jumps back to is kept (8-aligned, just after the
/// stub).
pub const SLOT: u64 = 80;

/// The trap guard (see the module documentation): `rsi` the siginfo, `rdx` the ucontext.
#[rustfmt::skip]
pub const GUARD: [u8; GUARD_LEN as usize] = [
    0x8b, 0x46, 0x08,                         // mov eax, [rsi + 8]     ; si_code
    0xff, 0xc8,                               // dec eax
    0x83, 0xf8, 0x01,                         // cmp eax, 1             ; TRAP_BRKPT or TRAP_TRACE?
    0x77, 0x26,                               // ja theirs
    0x80, 0xa2, 0xb1, 0x00, 0x00, 0x00, 0xfe, // and byte [rdx + 0xb1], 0xfe ; eflags.TF
    // The thread whose mask kerf changed for the step: the program's mask back at sigreturn.
    0xb8, 0xba, 0x00, 0x00, 0x00,             // mov eax, 186           ; gettid
    0x0f, 0x05,                               // syscall
    0x48, 0x3b, 0x05, rel(MASKED_TID, GUARD_AT + 0x1f), 0x00, 0x00, 0x00, // cmp rax, [rip + MASKED_TID]
    0x75, 0x0e,                               // jne done
    0x48, 0x8b, 0x05, rel(OWN_MASK, GUARD_AT + 0x28), 0x00, 0x00, 0x00, // mov rax, [rip + OWN_MASK]
    0x48, 0x89, 0x82, 0x28, 0x01, 0x00, 0x00, // mov [rdx + 0x128], rax ; uc_sigmask
    0xc3,                                     // done: ret
    // theirs: rt_sigaction(SIGTRAP, &the program's action, NULL, 8)
    0xb8, 0x0d, 0x00, 0x00, 0x00,             // mov eax, 13
    0xbf, 0x05, 0x00, 0x00, 0x00,             // mov edi, 5
    0x48, 0x8d, 0x35, rel(PUT_BACK, GUARD_AT + 0x41), 0x00, 0x00, 0x00,  // lea rsi, [rip + PUT_BACK]
    0x31, 0xd2,                               // xor edx, edx
    0x41, 0xba, 0x08, 0x00, 0x00, 0x00,       // mov r10d, 8
    0x0f, 0x05,                               // syscall
    // tgkill(getpid(), gettid(), SIGTRAP): pending while the handler runs
    0xb8, 0x27, 0x00, 0x00, 0x00,             // mov eax, 39
    0x0f, 0x05,                               // syscall
    0x89, 0xc7,                               // mov edi, eax
    0xb8, 0xba, 0x00, 0x00, 0x00,             // mov eax, 186
    0x0f, 0x05,                               // syscall
    0x89, 0xc6,                               // mov esi, eax
    0xba, 0x05, 0x00, 0x00, 0x00,             // mov edx, 5
    0xb8, 0xea, 0x00, 0x00, 0x00,             // mov eax, 234
    0x0f, 0x05,                               // syscall
    0xc3,                                     // ret
];

/// The low byte of a `rip`-relative displacement to `target` from an instruction that ends
/// at `end` (the others are zero: every target lies less than 256 bytes on).
const fn rel(target: u64, end: u64) -> u8 {
    let d = target - end;
    assert!(d < 256);
    d as u8
}

/// The guard's `sa_restorer`: `rt_sigreturn`.
pub const SIGRETURN: [u8; 7] = [0xb8, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05];

/// Where the guard is, in the restorer's bytes.
pub const GUARD_AT: u64 = SLOT + 8;
const GUARD_LEN: u64 = 106;
/// Where its `sa_restorer` is.
pub const SIGRETURN_AT: u64 = GUARD_AT + GUARD_LEN;
/// The guard's own `struct sigaction`, which kerf installs.
pub const GUARD_ACTION: u64 = (SIGRETURN_AT + SIGRETURN.len() as u64).next_multiple_of(8);
/// The thread whose mask kerf changed for a single-step or an injected call (zero if none),
/// which the guard and the stub put back to [`OWN_MASK`] when they run in it.
pub const MASKED_TID: u64 = GUARD_ACTION + ACTION_LEN;
/// The program's mask for the thread at [`MASKED_TID`].
pub const OWN_MASK: u64 = MASKED_TID + 8;
/// The program's action, read when the guard goes in and put back from here (by kerf, or by
/// the guard for a SIGTRAP not of kerf's steps: its `lea` reaches here). Last: a restorer a
/// killed kerf left is written again up to here.
pub const PUT_BACK: u64 = OWN_MASK + 8;
/// The restorer's length in bytes.
pub const LEN: u64 = PUT_BACK + ACTION_LEN;

/// A kernel `struct sigaction` on x86-64: handler, flags, restorer, mask.
pub const ACTION_LEN: u64 = 32;

const SA_SIGINFO: u64 = 4;
const SA_RESTORER: u64 = 0x0400_0000;

/// The restorer's bytes as placed at `at`: the stub, the slot (zero until a call), the guard
/// and its action, and room for the program's (zero, SIG_DFL's, until the guard goes in).
pub fn page_bytes(at: RemoteAddr) -> Vec<u8> {
    let mut page = STUB.to_vec();
    page.resize(GUARD_AT as usize, 0);
    page.extend_from_slice(&GUARD);
    page.extend_from_slice(&SIGRETURN);
    page.resize(GUARD_ACTION as usize, 0);
    let action = [(at + GUARD_AT).0, SA_SIGINFO | SA_RESTORER, (at + SIGRETURN_AT).0, 0];
    page.extend(action.iter().flat_map(|w| w.to_le_bytes()));
    page.resize(LEN as usize, 0);
    page
}

/// The handler of a kernel `struct sigaction` (its first word).
pub fn handler(action: &[u8; ACTION_LEN as usize]) -> u64 {
    u64::from_le_bytes(action[..8].try_into().expect("8 bytes"))
}

/// Where in the vDSO's mapping (`image`: all of its bytes) the restorer can go without a
/// page of its own: the offset of [`LEN`] bytes past the end of the vDSO's
/// ELF image (its loaded segments, program and section headers), which nothing reads or
/// runs: the mapping is whole pages, the image is not. `None` if `image` is no 64-bit ELF,
/// or the bytes there are neither zero nor a restorer a killed kerf left behind (kerf puts
/// zeros back there when it lets the threads go).
///
/// Writing there (through /proc/PID/mem, as a debugger's breakpoint in the vDSO) needs no
/// system call in the target: kerf's first call then needs no single-step either, which
/// a dying kerf could leave half made.
pub fn vdso_room(image: &[u8]) -> Option<u64> {
    let u16_at = |at: usize| image.get(at..at + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
    let u64_at = |at: usize| {
        image.get(at..at + 8).map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
    };
    if image.get(..5) != Some(b"\x7fELF\x02") {
        return None;
    }
    let (phoff, shoff) = (u64_at(0x20)?, u64_at(0x28)?);
    let (phentsize, phnum) = (u64::from(u16_at(0x36)?), u64::from(u16_at(0x38)?));
    let (shentsize, shnum) = (u64::from(u16_at(0x3a)?), u64::from(u16_at(0x3c)?));
    // Checked: the header is the target's memory, whatever it holds.
    let table_end = |off: u64, size: u64, n: u64| off.checked_add(size.checked_mul(n)?);
    let mut end = table_end(phoff, phentsize, phnum)?.max(table_end(shoff, shentsize, shnum)?);
    for i in 0..phnum {
        let ph = usize::try_from(table_end(phoff, phentsize, i)?).ok()?;
        end = end.max(u64_at(ph + 8)?.checked_add(u64_at(ph + 32)?)?);
    }
    let at = end.max(0x40).checked_next_multiple_of(16)?;
    let room = image.get(usize::try_from(at).ok()?..)?.get(..LEN as usize)?;
    (room.iter().all(|&b| b == 0) || left_by_kerf(room)).then_some(at)
}

/// Whether `room` (the restorer's length of bytes after the vDSO's image) holds a restorer a
/// killed kerf left behind (its slot, note and actions as they were then), which may still
/// be in use: a thread in its stub, the guard installed as the program's SIGTRAP action.
/// kerf takes it for its own, writes only what may have changed, and leaves it there at the
/// end. (An older kerf's, with another stub, is not taken: a thread may be inside it.)
pub fn left_by_kerf(room: &[u8]) -> bool {
    let code = page_bytes(RemoteAddr(0));
    let (stub, guard) = (STUB.len(), GUARD_AT as usize..GUARD_ACTION as usize);
    room.len() >= LEN as usize
        && room[..stub] == STUB
        && room[stub..SLOT as usize].iter().all(|&b| b == 0)
        && room[guard.clone()] == code[guard]
}

/// The registers of a frame, in the order the stub pops them.
pub const FRAME: [&str; 17] = [
    "r15", "r14", "r13", "r12", "r11", "r10", "r9", "r8", "rdi", "rsi", "rbp", "rbx", "rdx", "rcx",
    "rax", "rflags", "rsp",
];

/// A frame's size in bytes.
pub const FRAME_LEN: u64 = FRAME.len() as u64 * 8;

/// The x86-64 System V red zone: 128 bytes below `rsp` that the thread's code may use
/// without moving `rsp`, which nothing asynchronous may touch.
pub const RED_ZONE: u64 = 128;

/// Bytes just below the red zone left to a call's own arguments (kerf writes the name of a
/// memfd there for `memfd_create`): the frame goes below them.
pub const SCRATCH: u64 = 256;

/// Where kerf puts a call's own arguments (a memfd's name, an action to read back) on a
/// thread's stack at `rsp`: in the [`SCRATCH`] bytes below the red zone, 16-aligned, with
/// room for 64 bytes above where a call's frame goes.
pub fn scratch_at(rsp: RemoteAddr) -> RemoteAddr {
    (rsp - (RED_ZONE + 64)).align_down(16)
}

/// A frame for a thread whose registers are `saved`: where it goes (8-aligned, below the red
/// zone and [`SCRATCH`]), its bytes, and the address the thread goes on at once the stub has popped
/// it (the PC the kernel would resume it at, see the module documentation).
pub fn frame(saved: &Regs) -> (RemoteAddr, Vec<u8>, RemoteAddr) {
    let made = super::restart_made(saved);
    let (rax, rip) = (made.rax, made.rip);
    let s = saved;
    let words = [
        s.r15, s.r14, s.r13, s.r12, s.r11, s.r10, s.r9, s.r8, s.rdi, s.rsi, s.rbp, s.rbx, s.rdx,
        s.rcx, rax, s.eflags, s.rsp,
    ];
    let at = s.rsp.wrapping_sub(RED_ZONE + SCRATCH + FRAME_LEN) & !7;
    let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    (RemoteAddr(at), bytes, RemoteAddr(rip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kerf_arch::x86_64::listing;

    #[test]
    fn the_stub_pops_the_frame_in_order_and_jumps_through_the_slot() {
        let text: Vec<String> = listing(&STUB, 0x1000).into_iter().map(|l| l.text).collect();
        let pops = 0x1000 + 0x2d;
        let mut want = vec![
            "syscall".to_string(),
            // The mask back in the thread kerf changed it in.
            "mov eax,0BAh".to_string(),
            "syscall".to_string(),
            format!("cmp rax,[{:X}h]", 0x1000 + MASKED_TID),
            format!("jne short {pops:016X}h"),
            "mov eax,0Eh".to_string(),
            "mov edi,2".to_string(),
            format!("lea rsi,[{:X}h]", 0x1000 + OWN_MASK),
            "xor edx,edx".to_string(),
            "mov r10d,8".to_string(),
            "syscall".to_string(),
        ];
        for r in FRAME {
            want.push(match r {
                "rflags" => "popfq".to_string(),
                r => format!("pop {r}"),
            });
        }
        want.push(format!("jmp qword ptr [{:x}h]", 0x1000 + SLOT));
        assert_eq!(text, want);
    }

    #[test]
    fn the_guard_passes_a_steps_trap_and_gives_any_other_back_to_the_programs_action() {
        let at = 0x7fff_1000u64;
        let page = page_bytes(RemoteAddr(at));
        assert_eq!(page.len() as u64, LEN);
        let code = &page[GUARD_AT as usize..SIGRETURN_AT as usize];
        let text: Vec<String> = listing(code, at + GUARD_AT).into_iter().map(|l| l.text).collect();
        let theirs = at + GUARD_AT + 0x30;
        let done = at + GUARD_AT + 0x2f;
        assert_eq!(
            text[..12],
            [
                "mov eax,[rsi+8]".to_string(),
                "dec eax".to_string(),
                "cmp eax,1".to_string(),
                format!("ja short {theirs:016X}h"),
                "and byte ptr [rdx+0B1h],0FEh".to_string(),
                "mov eax,0BAh".to_string(),
                "syscall".to_string(),
                format!("cmp rax,[{:X}h]", at + MASKED_TID),
                format!("jne short {done:016X}h"),
                format!("mov rax,[{:X}h]", at + OWN_MASK),
                "mov [rdx+128h],rax".to_string(),
                "ret".to_string(),
            ]
        );
        assert_eq!(text[14], format!("lea rsi,[{:X}h]", at + PUT_BACK), "the program's action");
        let calls: Vec<&str> =
            text.iter().filter(|t| t.starts_with("mov eax,")).map(|t| &t[8..]).collect();
        assert_eq!(
            calls,
            ["[rsi+8]", "0BAh", "0Dh", "27h", "0BAh", "0EAh"],
            "gettid, then rt_sigaction getpid gettid tgkill"
        );
        assert_eq!(text.last().map(String::as_str), Some("ret"));
        let ret = listing(&page[SIGRETURN_AT as usize..][..SIGRETURN.len()], 0);
        let ret: Vec<&str> = ret.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(ret, ["mov eax,0Fh", "syscall"]);
        let word = |off: u64| u64::from_le_bytes(page[off as usize..][..8].try_into().unwrap());
        assert!((0..4).all(|i| word(PUT_BACK + 8 * i) == 0), "SIG_DFL, no flags, until read");
        assert_eq!(word(MASKED_TID), 0, "no thread's mask changed");
        assert_eq!(word(GUARD_ACTION), at + GUARD_AT);
        assert_eq!(word(GUARD_ACTION + 8), SA_SIGINFO | SA_RESTORER);
        assert_eq!(word(GUARD_ACTION + 16), at + SIGRETURN_AT);
        assert_eq!(word(GUARD_ACTION + 24), 0, "nothing blocked but SIGTRAP itself");
        assert_eq!(GUARD_ACTION % 8, 0);
    }

    /// A 64-bit ELF header with one program header and `shnum` section headers at `shoff`,
    /// in a mapping of `len` bytes.
    fn elf(len: usize, shoff: u64, shnum: u16) -> Vec<u8> {
        let mut b = vec![0u8; len];
        b[..5].copy_from_slice(b"\x7fELF\x02");
        b[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes()); // e_phoff
        b[0x28..0x30].copy_from_slice(&shoff.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes());
        b[0x3a..0x3c].copy_from_slice(&64u16.to_le_bytes());
        b[0x3c..0x3e].copy_from_slice(&shnum.to_le_bytes());
        b[0x40 + 32..0x40 + 40].copy_from_slice(&0x1562u64.to_le_bytes()); // p_filesz
        b
    }

    #[test]
    fn the_vdso_has_room_after_its_image_unless_its_bytes_are_used() {
        // As this machine's: the section headers end at 0x1a60 of two pages.
        let mut image = elf(0x2000, 0x1720, 13);
        assert_eq!(vdso_room(&image), Some(0x1a60));
        // A restorer a killed kerf left there (its slot, note and action set) is taken for
        // kerf's own; a stub with no guard after it (an older kerf's) is not.
        image[0x1a60..0x1a60 + STUB.len()].copy_from_slice(&STUB);
        image[0x1a60 + SLOT as usize] = 0x42;
        assert_eq!(vdso_room(&image), None, "a stub and its slot, no guard");
        let page = page_bytes(RemoteAddr(0x7fff_2a60));
        image[0x1a60..0x1a60 + page.len()].copy_from_slice(&page);
        image[0x1a60 + SLOT as usize] = 0x42;
        image[0x1a60 + MASKED_TID as usize] = 0x33;
        image[0x1a60 + PUT_BACK as usize] = 0x11;
        assert_eq!(vdso_room(&image), Some(0x1a60), "with its guard, a note and an action");
        assert!(left_by_kerf(&image[0x1a60..]));
        assert!(!left_by_kerf(&[0; LEN as usize]), "zeros are free room, not kerf's");
        // Anything else there, or too little room, or no ELF: none.
        image[0x1a60 + 3] = 0x90;
        assert_eq!(vdso_room(&image), None);
        assert_eq!(vdso_room(&elf(0x2000, 0x2000 - 13 * 64 - 16, 13)), None);
        assert_eq!(vdso_room(&elf(0x2000, 0x1000, 0)), Some(0x1570), "the segment's end");
        assert_eq!(vdso_room(&[0x90; 0x2000]), None);
        let mut garbage = elf(0x2000, u64::MAX - 8, 0xffff);
        assert_eq!(vdso_room(&garbage), None, "no overflow");
        garbage[0x40 + 8..0x40 + 16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(vdso_room(&garbage), None);
    }

    fn regs() -> Regs {
        // SAFETY: plain integers; all-zero is valid.
        let mut r: Regs = unsafe { std::mem::zeroed() };
        r.rip = 0x5555_0000_1234;
        r.rsp = 0x7fff_0000_1003; // not aligned: the frame is, and keeps rsp exactly
        r.eflags = 0x246;
        r.orig_rax = u64::MAX;
        r.rax = 7;
        r.rcx = 0xc;
        r.r15 = 0xf;
        r
    }

    fn word(bytes: &[u8], name: &str) -> u64 {
        let i = FRAME.iter().position(|r| *r == name).expect("a frame register");
        u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
    }

    #[test]
    fn a_frame_lies_below_the_red_zone_and_holds_every_register() {
        let r = regs();
        let (at, bytes, resume) = frame(&r);
        assert_eq!(at.0 % 8, 0);
        let free = r.rsp - RED_ZONE - SCRATCH;
        assert!(at.0 + FRAME_LEN <= free, "the red zone and the scratch bytes are left alone");
        assert!(at.0 + FRAME_LEN > free - 8, "and no more stack is taken");
        let scratch = scratch_at(RemoteAddr(r.rsp)).0;
        assert!(scratch + 64 <= r.rsp - RED_ZONE, "a call's arguments below the red zone");
        assert!(scratch >= at.0 + FRAME_LEN, "and above the frame");
        assert_eq!(bytes.len() as u64, FRAME_LEN);
        assert_eq!(resume.0, r.rip);
        for (name, v) in [("rsp", r.rsp), ("rflags", 0x246), ("rax", 7), ("rcx", 0xc), ("r15", 0xf)]
        {
            assert_eq!(word(&bytes, name), v, "{name}");
        }
    }

    #[test]
    fn a_thread_inside_an_interrupted_call_gets_the_kernels_restart() {
        let mut r = regs();
        r.orig_rax = 0; // read
        r.rax = (-512i64) as u64; // -ERESTARTSYS
        let (_, bytes, resume) = frame(&r);
        assert_eq!(resume.0, r.rip - 2, "back on the syscall instruction");
        assert_eq!(word(&bytes, "rax"), 0, "the call again");
        r.orig_rax = 35; // nanosleep
        r.rax = (-516i64) as u64; // -ERESTART_RESTARTBLOCK
        let (_, bytes, resume) = frame(&r);
        assert_eq!(resume.0, r.rip - 2);
        assert_eq!(word(&bytes, "rax"), 219, "restart_syscall");
        r.rax = (-4i64) as u64; // -EINTR: finished, not restarted
        let (_, bytes, resume) = frame(&r);
        assert_eq!((resume.0, word(&bytes, "rax")), (r.rip, (-4i64) as u64));
    }
}
