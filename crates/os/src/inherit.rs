//! What kerf's own parent handed it that a command kerf launches must be handed too: the
//! signals it was started with ignored (`nohup`, a shell's background job, `env
//! --ignore-signal`) and its blocked-signal mask.
//!
//! A command run by kerf must start as it would from the shell that started kerf. Two things
//! get in the way: the Rust runtime ignores SIGPIPE before `main`, and `std::process::Command`
//! then resets SIGPIPE to the default and empties the mask in every child; and kerf catches
//! SIGINT, SIGTERM and SIGHUP to restore its target, which `execve` turns into the default
//! action, not into the `SIG_IGN` the shell set. So [`record`] reads the dispositions before
//! the Rust runtime touches them (the binary calls it from `.init_array`), and
//! [`restore_in_child`] puts them back between `fork` and `execve`.
//!
//! Nothing is restored if [`record`] never ran (a test binary): such a child gets what
//! `Command` gives it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Whether [`record`] ran.
static RECORDED: AtomicBool = AtomicBool::new(false);
/// Bit `n - 1`: signal `n` was ignored when kerf started.
static IGNORED: AtomicU64 = AtomicU64::new(0);
/// Bit `n - 1`: signal `n` was blocked when kerf started.
static BLOCKED: AtomicU64 = AtomicU64::new(0);

/// Signals 1 to 64, the kernel's `_NSIG` on x86-64.
const SIGNALS: i32 = 64;

/// Read which signals are ignored and which are blocked. Call it before anything changes a
/// disposition: from an `.init_array` function of the binary, which the C library runs before
/// the Rust runtime's start-up code. Async-signal-safe calls only, no allocation.
pub extern "C" fn record() {
    let mut ignored = 0u64;
    for sig in 1..=SIGNALS {
        if sig == libc::SIGKILL || sig == libc::SIGSTOP {
            continue;
        }
        // SAFETY: a query (null new action) fills `old`, a zeroed plain C struct of ours.
        let ignoring = unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(sig, std::ptr::null(), &mut old) == 0
                && old.sa_sigaction == libc::SIG_IGN
        };
        if ignoring {
            ignored |= 1 << (sig - 1);
        }
    }
    let mut blocked = 0u64;
    // SAFETY: a query of the calling thread's mask into a zeroed set of ours; `sigismember`
    // only reads it.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        if libc::pthread_sigmask(libc::SIG_BLOCK, std::ptr::null(), &mut set) == 0 {
            for sig in 1..=SIGNALS {
                if libc::sigismember(&set, sig) == 1 {
                    blocked |= 1 << (sig - 1);
                }
            }
        }
    }
    IGNORED.store(ignored, Ordering::SeqCst);
    BLOCKED.store(blocked, Ordering::SeqCst);
    RECORDED.store(true, Ordering::SeqCst);
}

/// Whether `sig` was ignored when kerf started (false if [`record`] never ran).
pub fn ignored_at_start(sig: i32) -> bool {
    (1..=SIGNALS).contains(&sig)
        && RECORDED.load(Ordering::SeqCst)
        && IGNORED.load(Ordering::SeqCst) & (1 << (sig - 1)) != 0
}

/// In a forked child, before `execve`: ignore again what kerf's parent ignored and block
/// again what it blocked. Runs after `Command`'s own reset, in a `pre_exec` closure, so only
/// async-signal-safe calls and no allocation.
pub(crate) fn restore_in_child() -> std::io::Result<()> {
    if !RECORDED.load(Ordering::SeqCst) {
        return Ok(());
    }
    let ignored = IGNORED.load(Ordering::SeqCst);
    let blocked = BLOCKED.load(Ordering::SeqCst);
    // SAFETY: sigaction with SIG_IGN and an empty mask, and sigprocmask on a set built here;
    // all async-signal-safe, touching only this (single-threaded) child.
    unsafe {
        for sig in 1..=SIGNALS {
            if ignored & (1 << (sig - 1)) == 0 {
                continue;
            }
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = libc::SIG_IGN;
            if libc::sigaction(sig, &act, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        // Not SIGTRAP: the stop after `execve` that a launched command is held by is a
        // SIGTRAP, which a blocked mask would hold back (kerf would wait for it in vain).
        for sig in (1..=SIGNALS).filter(|&s| s != libc::SIGTRAP) {
            if blocked & (1 << (sig - 1)) != 0 {
                libc::sigaddset(&mut set, sig);
            }
        }
        if libc::pthread_sigmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}
