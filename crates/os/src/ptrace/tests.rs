//! Unit tests of [`super::Tracee`]'s logic against the fake kernel of [`super::fake`]:
//! attach races, permission errors, signal bookkeeping, the injected-call register ABI.
//! (EPERM is also tested for real, as user nobody, in tests/ptrace.rs.)

use super::fake::{regs_at, stop_status, Fake, ANYWHERE, PID, STACK_TOP, SYSCALL_AT};
use super::*;

fn r(a: u64) -> RemoteAddr {
    RemoteAddr(a)
}

fn stop(fake: &Arc<Fake>) -> Result<Tracee, TargetError> {
    Tracee::stop_all_with(PID, fake.clone(), Duration::from_millis(300))
}

#[test]
fn stops_every_thread_with_seize_interrupt_and_traceclone() {
    let fake = Arc::new(Fake::new(&[PID, 101, 102]));
    let t = stop(&fake).expect("stops");
    assert_eq!(t.pid(), PID);
    assert_eq!(t.threads(), &[PID, 101, 102]);
    let log = fake.state().log.clone();
    // PTRACE_O_TRACECLONE (8) and PTRACE_O_TRACESYSGOOD (1) only: never EXITKILL.
    assert_eq!(&log[..2], ["seize 100 0x9", "interrupt 100"]);
    assert!(log.iter().filter(|l| l.starts_with("seize")).all(|l| l.ends_with(" 0x9")));
    let pause = t.resume_detach().expect("resume");
    assert!(pause.stopping >= Duration::ZERO);
    assert_eq!(fake.state().detached, vec![(PID, 0), (101, 0), (102, 0)]);
}

#[test]
fn eperm_without_a_tracer_is_a_permission_error() {
    let fake = Arc::new(Fake::new(&[PID]));
    fake.state().deny = true;
    let err = stop(&fake).unwrap_err();
    assert!(matches!(err, TargetError::PtraceDenied { pid: PID, tid: PID }), "{err:?}");
    let msg = err.to_string();
    assert!(msg.starts_with("no permission to ptrace process 100"), "{msg}");
    assert!(msg.contains("root") && msg.contains("ptrace_scope") && !msg.contains('\n'), "{msg}");
}

#[test]
fn eperm_with_a_tracer_is_already_traced() {
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().tracer = 999;
    let err = stop(&fake).unwrap_err();
    assert!(matches!(err, TargetError::AlreadyTraced { pid: PID, tracer: 999, .. }), "{err:?}");
    assert!(err.to_string().starts_with("process 100 is already being traced (by a debugger?)"));
}

#[test]
fn already_traced_after_some_threads_leaves_none_attached() {
    // The second thread is refused: the first, already stopped, must be let go again.
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().traced_by_other.insert(101, 777);
    let err = stop(&fake).unwrap_err();
    assert!(matches!(err, TargetError::AlreadyTraced { tid: 101, tracer: 777, .. }), "{err:?}");
    assert_eq!(fake.state().detached, vec![(PID, 0)]);
}

#[test]
fn dead_pid_and_self() {
    let fake = Arc::new(Fake::new(&[]));
    let err = stop(&fake).unwrap_err();
    assert!(matches!(err, TargetError::NoSuchProcess { pid: PID }), "{err:?}");
    assert!(matches!(
        Tracee::stop_all_with(-3, fake.clone(), Duration::from_millis(10)),
        Err(TargetError::NoSuchProcess { pid: -3 })
    ));
    let fake = Arc::new(Fake::new(&[PID]));
    fake.state().self_pid = PID;
    let err = stop(&fake).unwrap_err();
    assert!(matches!(err, TargetError::TraceSelf { pid: PID }), "{err:?}");
    assert!(fake.state().log.is_empty(), "nothing attempted");
}

#[test]
fn threads_exiting_during_attach_are_dropped() {
    let fake = Arc::new(Fake::new(&[PID, 101, 102, 103]));
    {
        let mut st = fake.state();
        st.vanish_at_seize.push(101);
        st.exit_on_interrupt.push(103);
    }
    let t = stop(&fake).expect("stops");
    assert_eq!(t.threads(), &[PID, 102]);
    t.resume_detach().expect("resume");
    assert_eq!(fake.state().detached, vec![(PID, 0), (102, 0)]);
}

#[test]
fn a_thread_the_directory_scan_missed_is_not_ignored() {
    // The kernel counts one more thread than /proc/PID/task lists, and keeps doing so:
    // stop_all must not claim to have stopped everything.
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().hidden_threads = 1;
    let err = stop(&fake).unwrap_err();
    assert!(matches!(err, TargetError::StopTimeout { tid: PID, .. }), "{err:?}");
    assert!(err.to_string().contains("a thread stays unlisted"), "{err}");
    assert_eq!(fake.state().detached, vec![(PID, 0), (101, 0)], "let go again");
}

#[test]
fn threads_cloned_during_attach_are_adopted() {
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().clone_on_interrupt = Some((101, 150));
    let t = stop(&fake).expect("stops");
    assert_eq!(t.threads(), &[PID, 101, 150]);
    // The new thread was attached by the kernel: kerf neither seizes nor interrupts it.
    let log = fake.state().log.clone();
    assert!(!log.iter().any(|l| l == "seize 150 0x9" || l == "interrupt 150"), "{log:?}");
    t.resume_detach().expect("resume");
    assert_eq!(fake.state().detached.len(), 3);
}

/// A thread stopped inside clone(2) (its PTRACE_EVENT_CLONE stop) never runs an injected
/// system call: the kernel writes clone's result into `rax` when it goes on, so the call would
/// run with that number and clone would return its -ENOSYS (the program's new thread lost).
/// Its new thread takes the call; asked for by id, it is refused.
#[test]
fn injection_never_uses_a_thread_stopped_inside_clone() {
    let fake = Arc::new(Fake::new(&[PID]));
    fake.state().clone_on_interrupt = Some((PID, 150));
    let mut t = stop(&fake).expect("stops");
    assert_eq!(t.threads(), &[PID, 150]);
    t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid");
    let calls = fake.state().calls.clone();
    assert!(calls.iter().all(|c| c.0 == 150), "{calls:?}");
    assert_eq!(calls.last().map(|c| c.1), Some(libc::SYS_getpid));
    let e = t.syscall_on(PID, libc::SYS_getpid, [0; 6]).expect_err("inside clone");
    assert!(matches!(e, TargetError::InsideClone { tid: PID, .. }), "{e:?}");
}

#[test]
fn a_signal_stop_during_attach_is_delivered_at_detach() {
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().signal_before_stop.insert(101, libc::SIGUSR1);
    let t = stop(&fake).expect("stops");
    assert_eq!(t.held_signals(101), 1);
    t.resume_detach().expect("resume");
    let st = fake.state();
    assert_eq!(st.detached, vec![(PID, 0), (101, libc::SIGUSR1)]);
    assert_eq!(st.siginfo_set.len(), 1);
    assert_eq!(st.siginfo_set[0].1.sender_pid(), 4242, "original siginfo kept");
    assert!(st.queued.is_empty());
}

#[test]
fn injected_syscall_uses_the_syscall_abi_and_restores_registers() {
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().no_restorer = true; // single-stepped calls
    let mut t = stop(&fake).expect("stops");
    let before = t.regs(PID).expect("regs");
    let r = t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid");
    assert_eq!(r, i64::from(PID));
    assert_eq!(t.syscall_on(101, libc::SYS_gettid, [0; 6]).expect("gettid"), 101);
    let args = [1, 2, 3, 4, 5, 6];
    assert_eq!(t.syscall(999, args).expect("unknown"), -i64::from(libc::ENOSYS));
    assert_eq!(t.regs(PID).expect("regs"), before, "registers restored exactly");
    {
        let st = fake.state();
        // [0], [1]: the restorer's mmap, refused.
        let (tid, injected) = st.regs_written[2];
        assert_eq!(tid, PID);
        assert_eq!(injected.rip, SYSCALL_AT);
        assert_eq!(injected.rax, libc::SYS_getpid as u64);
        assert_eq!(injected.orig_rax, u64::MAX);
        assert_eq!(st.regs_written[3], (PID, before), "restored after the step");
        let last = st.regs_written[st.regs_written.len() - 2].1;
        let got = [last.rdi, last.rsi, last.rdx, last.r10, last.r8, last.r9];
        assert_eq!(got, args, "4th argument in r10, not rcx");
        assert_eq!(st.calls.last().expect("call").2, args);
    }
    t.resume_detach().expect("resume");
    // After a step the thread is parked in an interrupt stop: detached with no signal.
    assert_eq!(fake.state().detached, vec![(PID, 0), (101, 0)]);
}

/// Through the restorer: the page is mapped once (single-stepped) and written with the stub;
/// each call writes the thread's registers as a frame below the red zone (an interrupted
/// call's restart made in it) and where to go on in the slot, runs the stub's `syscall` to
/// its entry stop, lets the call run into an interrupt stop, and puts registers and stack
/// bytes back. The
/// page is unmapped (single-stepped) before the threads are let go.
#[test]
fn injected_calls_run_through_the_restorer_page() {
    let fake = Arc::new(Fake::new(&[PID]));
    let mut t = stop(&fake).expect("stops");
    let before = t.regs(PID).expect("regs");
    let mut stack = vec![0u8; 1024];
    t.read(before.sp() - 1024, &mut stack).expect("stack");
    let args = [1, 2, 3, 4, 5, 6];
    assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(PID));
    fake.state().log.clear();
    assert_eq!(t.syscall(999, args).expect("unknown"), -i64::from(libc::ENOSYS));
    assert_eq!(t.regs(PID).expect("regs"), before, "registers restored exactly");
    let mut after = vec![0u8; 1024];
    t.read(before.sp() - 1024, &mut after).expect("stack");
    assert_eq!(after, stack, "the stack's bytes put back");
    let page = {
        let st = fake.state();
        let (nr, a) = (st.calls[0].1, st.calls[0].2);
        assert_eq!(
            (nr, a[0], a[2]),
            (libc::SYS_mmap, 0, (libc::PROT_READ | libc::PROT_EXEC) as u64)
        );
        let page = st.mem.iter().find(|(b, _)| ANYWHERE.contains(b)).expect("page").0;
        let (_, injected) = *st.regs_written.iter().rev().nth(1).expect("the call's registers");
        assert_eq!(injected.rip, page, "the stub's syscall");
        assert_eq!(injected.orig_rax, u64::MAX);
        assert_eq!(injected.rax, 999);
        let got =
            [injected.rdi, injected.rsi, injected.rdx, injected.r10, injected.r8, injected.r9];
        assert_eq!(got, args);
        // The frame: at rsp, every register as saved, with read(2)'s restart made in it
        // (the fake's threads sit in an interrupted read).
        let (frame_at, want, resume) = restorer::frame(&before);
        assert_eq!(injected.rsp, frame_at.0);
        assert!(st.writes.iter().any(|(a, b)| *a == frame_at.0 && *b == want), "frame written");
        assert_eq!(resume.0, before.rip - 2, "back on the interrupted read's syscall");
        let slot = st.writes.iter().rev().find(|(a, _)| *a == page + restorer::SLOT);
        assert_eq!(slot.map(|(_, b)| b.as_slice()), Some(&resume.0.to_le_bytes()[..]));
        assert_eq!(
            st.log
                .iter()
                .filter(|l| l.starts_with("syscall ") || l.starts_with("interrupt "))
                .count(),
            2,
            "entry stop, then the call and an interrupt stop: {:?}",
            st.log
        );
        assert!(!st.log.iter().any(|l| l.starts_with("step ")), "no single-step: {:?}", st.log);
        page
    };
    t.resume_detach().expect("resume");
    let st = fake.state();
    assert!(!st.mem.iter().any(|(b, _)| *b == page), "the page is unmapped at the end");
    assert_eq!(st.calls.last().map(|c| (c.1, c.2[0])), Some((libc::SYS_munmap, page)));
    assert_eq!(st.detached, vec![(PID, 0)]);
}

/// With room after the vDSO's ELF image, the restorer goes there: no call maps it, so no
/// call of the stop is single-stepped; its bytes are zeros again once the threads are let go.
#[test]
fn the_restorer_goes_after_the_vdsos_image_when_it_fits() {
    let fake = Arc::new(Fake::new(&[PID]));
    {
        // A vDSO image of 0x800 bytes (one segment, no section headers) in its page.
        let mut st = fake.state();
        let vdso = &mut st.mem[0].1;
        vdso[..0x100].fill(0);
        vdso[..5].copy_from_slice(b"\x7fELF\x02");
        vdso[0x20..0x28].copy_from_slice(&0x40u64.to_le_bytes());
        vdso[0x36] = 56;
        vdso[0x38] = 1;
        vdso[0x40 + 32..0x40 + 40].copy_from_slice(&0x800u64.to_le_bytes());
        vdso[0x100] = 0x0f; // the vDSO's own syscall instruction
        vdso[0x101] = 0x05;
        vdso[0x800..].fill(0);
    }
    let mut t = stop(&fake).expect("stops");
    let before = t.regs(PID).expect("regs");
    assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(PID));
    assert_eq!(t.syscall(libc::SYS_gettid, [0; 6]).expect("gettid"), i64::from(PID));
    assert_eq!(t.regs(PID).expect("regs"), before);
    {
        let st = fake.state();
        assert_eq!(st.calls.len(), 2, "no call maps it: {:?}", st.calls);
        assert!(!st.log.iter().any(|l| l.starts_with("step ")), "{:?}", st.log);
        let at = SYSCALL_AT + 0x800;
        assert!(st.regs_written.iter().any(|(_, r)| r.rip == at), "the stub ran there");
        assert_eq!(st.mem[0].1[0x800..0x800 + restorer::STUB.len()], restorer::STUB);
    }
    t.resume_detach().expect("resume");
    let st = fake.state();
    assert!(st.mem[0].1[0x800..].iter().all(|&b| b == 0), "zeros put back");
    assert_eq!(st.calls.len(), 2, "and no call unmaps anything");
}

/// A signal that arrives before the stub's call enters the kernel is held, the thread goes
/// back as it was, and the call is made through the restorer again, not single-stepped
/// (stepped, a held thread's calls each left a window in which a dying kerf left it the
/// step's trap flag or the call's registers: python3.11 with a 2 ms timer died of SIGTRAP).
/// At the end the thread gets the signal back with its siginfo, from the delivery stop of a
/// stand-in kerf queues for it.
#[test]
fn a_signal_before_the_restorers_call_is_kept_exact_and_the_call_made_again() {
    let fake = Arc::new(Fake::new(&[PID]));
    let mut t = stop(&fake).expect("stops");
    t.syscall(libc::SYS_getpid, [0; 6]).expect("maps the restorer");
    let before = t.regs(PID).expect("regs");
    let calls = fake.state().calls.len();
    let logged = fake.state().log.len();
    fake.state().signals_on_step.push_back(libc::SIGUSR1);
    assert_eq!(t.syscall(libc::SYS_gettid, [0; 6]).expect("gettid"), i64::from(PID));
    assert_eq!(t.syscall(libc::SYS_gettid, [0; 6]).expect("gettid"), i64::from(PID));
    assert_eq!(fake.state().calls.len(), calls + 2, "each call ran once");
    let log = fake.state().log[logged..].to_vec();
    assert!(!log.iter().any(|l| l.starts_with("step ")), "no call stepped: {log:?}");
    assert_eq!(t.regs(PID).expect("regs"), before);
    assert_eq!(t.held_signals(PID), 1);
    t.resume_detach().expect("resume");
    let st = fake.state();
    assert_eq!(st.detached, vec![(PID, libc::SIGUSR1)]);
    assert_eq!(st.siginfo_set.last().map(|s| s.1.sender_pid()), Some(4242));
    assert!(st.queued.is_empty(), "the stand-in was taken: {:?}", st.queued);
}

/// The single-step that runs an injected call ends in a forced SIGTRAP: in a thread that
/// blocks SIGTRAP the kernel would reset the program's SIGTRAP action to the default. The
/// step runs with SIGTRAP unblocked, and the thread's mask is put back after it.
#[test]
fn injection_never_steps_a_thread_that_blocks_sigtrap() {
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().no_restorer = true; // single-stepped calls
    let all = !((1 << 8) | (1 << 18)); // every signal but SIGKILL and SIGSTOP
    for t in [PID, 101] {
        fake.state().threads.get_mut(&t).unwrap().sigmask = all;
    }
    let mut t = stop(&fake).expect("stops");
    assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(PID));
    assert_eq!(t.syscall_on(101, libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(PID));
    let st = fake.state();
    assert!(st.forced_sigtrap.is_empty(), "stepped with SIGTRAP blocked: {:?}", st.forced_sigtrap);
    assert_eq!(st.threads[&PID].sigmask, all);
    assert_eq!(st.threads[&101].sigmask, all);
}

#[test]
fn caught_signals_are_read_from_sigcgt() {
    let fake = Arc::new(Fake::new(&[PID]));
    // SIGINT (2), SIGALRM (14), SIGRTMIN+2 (36).
    fake.state().caught = (1 << 1) | (1 << 13) | (1 << 35);
    let t = stop(&fake).expect("stops");
    assert_eq!(t.caught_signals().expect("status"), vec![2, 14, 36]);
}

/// A thread stopped in `ppoll` (its mask is the call's temporary one) is not chosen for
/// injection when another thread can take it.
#[test]
fn injection_avoids_threads_inside_calls_with_a_temporary_mask() {
    let fake = Arc::new(Fake::new(&[PID, 101]));
    {
        let mut st = fake.state();
        let leader = st.threads.get_mut(&PID).unwrap();
        leader.regs.orig_rax = 271; // ppoll, interrupted
        leader.regs.rax = (-514i64) as u64; // -ERESTARTNOHAND
    }
    let mut t = stop(&fake).expect("stops");
    t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid");
    let calls = fake.state().calls.clone();
    assert!(calls.iter().all(|c| c.0 == 101), "{calls:?}");
    assert_eq!(calls.last().map(|c| c.1), Some(libc::SYS_getpid));
}

/// A leader stopped for a signal kerf must hand back from that stop would have its calls
/// single-stepped (not through the restorer): another thread takes them.
#[test]
fn injection_prefers_a_thread_holding_no_signal() {
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().signal_before_stop.insert(PID, libc::SIGUSR1);
    let mut t = stop(&fake).expect("stops");
    assert_eq!(t.held_signals(PID), 1);
    t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid");
    let st = fake.state();
    assert!(st.calls.iter().all(|c| c.0 == 101), "{:?}", st.calls);
    // One step (mapping the restorer page), then the call through it.
    let steps = st.log.iter().filter(|l| l.starts_with("step ")).count();
    let stops = st.log.iter().filter(|l| *l == "syscall 101 0").count();
    assert_eq!((steps, stops), (1, 1), "{:?}", st.log);
}

#[test]
fn signals_dequeued_during_a_step_are_held_and_reinjected_once() {
    let fake = Arc::new(Fake::new(&[PID]));
    fake.state().no_restorer = true; // single-stepped calls
    let mut t = stop(&fake).expect("stops");
    fake.state().signals_on_step.extend([libc::SIGUSR1, libc::SIGUSR2]);
    assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(PID));
    assert_eq!(t.held_signals(PID), 2);
    // The restorer's mmap (refused) and getpid, each once.
    assert_eq!(fake.state().calls.len(), 2, "the call ran once");
    t.resume_detach().expect("resume");
    let st = fake.state();
    // The first through PTRACE_SETSIGINFO + PTRACE_DETACH, the second queued again.
    assert_eq!(st.detached, vec![(PID, libc::SIGUSR1)]);
    assert_eq!(st.siginfo_set[0].1.signo(), libc::SIGUSR1);
    assert_eq!(st.queued.len(), 1);
    let (tid, q) = st.queued[0];
    assert_eq!((tid, q.signo(), q.code(), q.sender_pid()), (PID, libc::SIGUSR2, -1, 4242));
}

/// Letting go of a process that exits as soon as its first thread runs: the other threads,
/// still holding signals kerf took from them, are gone by the time kerf hands those back.
/// That is no error (it used to fail with "thread ... exited during PTRACE_SETSIGINFO",
/// seen on python3.11 with threads and SIGALRM at the end of `kerf count`).
#[test]
fn threads_killed_by_an_exit_while_being_let_go_are_no_error() {
    const OTHER: i32 = PID + 1;
    let fake = Arc::new(Fake::new(&[PID, OTHER]));
    fake.state().no_restorer = true; // single-stepped calls
    let mut t = stop(&fake).expect("stops");
    fake.state().signals_on_step.extend([libc::SIGALRM]);
    t.syscall_on(OTHER, libc::SYS_getpid, [0; 6]).expect("getpid");
    fake.state().signals_on_step.extend([libc::SIGALRM, libc::SIGUSR1]);
    t.syscall_on(PID, libc::SYS_getpid, [0; 6]).expect("getpid");
    assert_eq!((t.held_signals(PID), t.held_signals(OTHER)), (2, 1));
    fake.state().exit_group_on_detach = true;
    t.resume_detach().expect("a thread killed by the process's exit is no error");
    let st = fake.state();
    assert_eq!(st.detached.len(), 1, "{:?}", st.detached);
    assert!(!st.threads.contains_key(&st.detached[0].0) || st.threads.len() == 1);
}

/// A leader killed while kerf held it stopped: its detach fails, and the wait that reaps it
/// takes its exit status, which the launcher's own wait then cannot get (`ECHILD`). It is
/// kept for the launcher ([`super::ended_status`]); before, kerf said "its exit status is
/// unknown" and exited 0.
#[test]
fn a_leader_reaped_after_its_detach_failed_keeps_its_exit_status() {
    let fake = Arc::new(Fake::new(&[PID]));
    let t = stop(&fake).expect("stops");
    // Killed by SIGKILL (the raw status of a wait).
    fake.state().killed_before_detach = Some((PID, libc::SIGKILL));
    t.resume_detach().expect("a thread killed while stopped is no error");
    assert_eq!(super::ended_status(PID), Some(libc::SIGKILL));
}

/// A step that signals keep interrupting gives up with an error that says so (it used to
/// say "unexpected wait status 0x0", a status no thread had).
#[test]
fn a_step_signals_never_let_complete_says_so() {
    let fake = Arc::new(Fake::new(&[PID]));
    fake.state().no_restorer = true; // single-stepped calls
    let mut t = stop(&fake).expect("stops");
    fake.state().signals_on_step.extend(std::iter::repeat_n(libc::SIGUSR1, MAX_STEP_STOPS));
    let err = t.syscall(libc::SYS_getpid, [0; 6]).unwrap_err();
    assert!(
        matches!(
            err,
            TargetError::StepInterrupted { pid: PID, tid: PID, stops: MAX_STEP_STOPS, .. }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("signals interrupted its single-step"), "{err}");
    assert!(fake.state().calls.is_empty(), "the call never ran");
    // Every signal is still delivered.
    assert_eq!(t.held_signals(PID), MAX_STEP_STOPS);
}

#[test]
fn interrupted_injected_calls_run_again() {
    for restorer in [false, true] {
        let fake = Arc::new(Fake::new(&[PID]));
        fake.state().no_restorer = !restorer;
        let mut t = stop(&fake).expect("stops");
        assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(PID));
        let before = fake.state().calls.len();
        fake.state().forced_results.push_back(-512);
        assert_eq!(t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid"), i64::from(PID));
        assert_eq!(fake.state().calls.len(), before + 2, "restorer: {restorer}");
        assert_eq!(t.regs(PID).expect("regs"), regs_at(0x5555_0000_1234));
    }
}

#[test]
fn alloc_near_picks_the_nearest_gap_and_retries_on_eexist() {
    let fake = Arc::new(Fake::new(&[PID]));
    let mut t = stop(&fake).expect("stops");
    let near = r(0x5555_0000_1000);
    // Nearest: right below the executable mapping at 0x555500000000.
    let first = 0x5554_ffff_e000;
    fake.state().eexist_at.push(first);
    let a = t.alloc_near(near, 0x1800, libc::PROT_READ | libc::PROT_WRITE).expect("alloc");
    assert_ne!(a, r(first));
    assert!(within_reach(near, a, 0x2000), "{a:#x}");
    let calls = fake.state().calls.clone();
    let calls: Vec<_> = calls.iter().filter(|c| c.2[0] != 0).collect(); // not the restorer's
    assert_eq!(calls[0].2[0], first);
    assert_eq!(calls[0].2[1], 0x2000, "length rounded to pages");
    let flags = calls[0].2[3];
    assert_ne!(flags & libc::MAP_FIXED_NOREPLACE as u64, 0);
    assert_eq!(flags & libc::MAP_FIXED as u64, 0);
    t.write(a, b"hello").expect("write");
    let mut back = [0u8; 5];
    t.read(a, &mut back).expect("read");
    assert_eq!(&back, b"hello");
    t.free(a, 0x1800).expect("free");
    let err = t.free(a, 0x1800).unwrap_err();
    assert!(matches!(err, TargetError::Injected { call: "munmap", errno: libc::EINVAL, .. }));
    assert!(err.to_string().starts_with("injected munmap in thread 100 of process 100 failed"));
}

#[test]
fn share_near_names_the_memfd_on_the_stack_and_restores_it() {
    let fake = Arc::new(Fake::new(&[PID]));
    let mut t = stop(&fake).expect("stops");
    let rsp = t.regs(PID).expect("regs").sp();
    let mut stack = [0u8; 1024];
    t.read(rsp - 1024, &mut stack).expect("stack");
    let near = r(0x5555_0000_1000);
    let shm = t.share_near(near, 100, 100).expect("share");
    assert_eq!(shm.len(), 4096);
    assert!(within_reach(near, shm.remote(), 4096));
    let mut after = [0u8; 1024];
    t.read(rsp - 1024, &mut after).expect("stack");
    assert_eq!(after, stack, "stack bytes below the red zone put back");
    {
        let st = fake.state();
        assert_eq!(st.memfd_names, [format!("kerf-{}", std::process::id())]);
        // The first call maps the restorer page.
        let calls = &st.calls[1..];
        let nrs: Vec<i64> = calls.iter().map(|c| c.1).collect();
        assert_eq!(
            nrs,
            [libc::SYS_memfd_create, libc::SYS_ftruncate, libc::SYS_mmap, libc::SYS_close]
        );
        let name_at = calls[0].2[0];
        assert!(r(name_at) <= rsp - 128 - 12, "name below the red zone: {name_at:#x}");
        assert_eq!(calls[2].2[3] & libc::MAP_SHARED as u64, libc::MAP_SHARED as u64);
        assert_eq!(calls[2].2[4], 7, "the memfd is mapped");
        assert_eq!(calls[3].2[0], 7, "and closed");
        assert_eq!(st.local_maps, 1);
    }
    shm.store_u64(8, 42);
    assert_eq!(shm.load_u64(8), 42);
    drop(shm);
    assert_eq!(fake.state().local_maps, 0);
    assert!(r(STACK_TOP) > rsp);
}

/// `write_bytes` writes whole words where it can: every start and length around a word's
/// edges lands each byte where it belongs and touches none beside it.
#[test]
fn write_bytes_lands_every_byte_at_every_alignment() {
    let fake = Arc::new(Fake::new(&[PID]));
    let mut t = stop(&fake).expect("stops");
    let shm = t.share_near(r(0x5555_0000_1000), 100, 100).expect("share");
    for at in 0..17 {
        for len in 0..34 {
            let mut want = [0xeeu8; 64];
            shm.write_bytes(0, &want);
            let data: Vec<u8> =
                (0..len).map(|k| (k as u8).wrapping_mul(7).wrapping_add(at as u8)).collect();
            shm.write_bytes(at, &data);
            want[at..at + len].copy_from_slice(&data);
            let mut got = [0u8; 64];
            shm.read_bytes(0, &mut got);
            assert_eq!(got, want, "{len} bytes at {at}");
        }
    }
    let end = shm.len() - 11;
    shm.write_bytes(end, &[9; 11]);
    let mut last = [0u8; 11];
    shm.read_bytes(end, &mut last);
    assert_eq!(last, [9; 11], "up to the mapping's last byte");
}

/// The beat moves its word while the mapping lives, and its thread is joined before the
/// mapping goes (the fake counts local mappings: the drop unmaps after the join).
#[test]
fn a_beat_moves_its_word_until_the_mapping_is_dropped() {
    let fake = Arc::new(Fake::new(&[PID]));
    let mut t = stop(&fake).expect("stops");
    let mut shm = t.share_near(r(0x5555_0000_1000), 100, 100).expect("share");
    shm.beat(64, std::time::Duration::from_millis(5));
    shm.beat(64, std::time::Duration::from_millis(5));
    let began = std::time::Instant::now();
    while shm.load_u64(64) < 3 {
        assert!(began.elapsed() < std::time::Duration::from_secs(10), "no beat");
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    assert_eq!(shm.load_u64(0), 0, "only its word moves");
    drop(shm);
    assert_eq!(fake.state().local_maps, 0);
}

/// A filter of thread 101 that kills the process at mmap (9) and allows the rest, as
/// `struct sock_filter` bytes: `ld [0]; jeq #9, kill, allow`.
fn kills_mmap() -> Vec<u8> {
    let insn = |code: u16, jt: u8, jf: u8, k: u32| {
        let mut b = code.to_le_bytes().to_vec();
        b.extend([jt, jf]);
        b.extend(k.to_le_bytes());
        b
    };
    [insn(0x20, 0, 0, 0), insn(0x15, 0, 1, 9), insn(0x06, 0, 0, 0x8000_0000)]
        .into_iter()
        .chain([insn(0x06, 0, 0, 0x7fff_0000)])
        .flatten()
        .collect()
}

#[test]
fn a_call_the_threads_seccomp_filter_forbids_is_not_made() {
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().seccomp.insert(101, vec![kills_mmap()]);
    let mut t = stop(&fake).expect("stops");
    let before = fake.state().calls.len();
    match t.syscall_on(101, libc::SYS_mmap, [0, 4096, 3, 0x22, u64::MAX, 0]) {
        Err(TargetError::Seccomp { tid: 101, nr: 9, action, .. }) => {
            assert_eq!(action, crate::seccomp::Action::KillProcess);
        }
        other => panic!("mmap under a filter that kills it: {other:?}"),
    }
    assert_eq!(fake.state().calls.len(), before, "nothing was run");
    // The filter allows other calls, and a thread without a filter makes any.
    assert_eq!(t.syscall_on(101, libc::SYS_gettid, [0; 6]).expect("gettid"), 101);
    t.syscall_on(PID, libc::SYS_mmap, [0, 4096, 3, 0x22, u64::MAX, 0]).expect("mmap");
    t.resume_detach().expect("resume");
}

#[test]
fn filters_that_cannot_be_read_are_taken_as_the_worst() {
    let fake = Arc::new(Fake::new(&[PID]));
    // "Seccomp: 2", but no filter comes back (as when kerf lacks CAP_SYS_ADMIN).
    fake.state().seccomp.insert(PID, Vec::new());
    let mut t = stop(&fake).expect("stops");
    match t.syscall_on(PID, libc::SYS_getpid, [0; 6]) {
        Err(TargetError::Seccomp { action: crate::seccomp::Action::Unknown, .. }) => {}
        other => panic!("getpid under unreadable filters: {other:?}"),
    }
    t.resume_detach().expect("resume");
}

#[test]
fn no_syscall_instruction_is_an_error() {
    let fake = Arc::new(Fake::new(&[PID]));
    fake.state().mem[0].1[1] = 0x90;
    let mut t = stop(&fake).expect("stops");
    let err = t.syscall(libc::SYS_getpid, [0; 6]).unwrap_err();
    assert!(matches!(err, TargetError::NoSyscallInstruction { pid: PID }), "{err:?}");
}

#[test]
fn writing_over_the_syscall_instruction_forgets_it() {
    let fake = Arc::new(Fake::new(&[PID]));
    fake.state().no_restorer = true; // single-stepped calls
    let mut t = stop(&fake).expect("stops");
    t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid");
    // Patch it away, put one further on.
    t.write(r(SYSCALL_AT), &[0x90, 0x90, 0x90, 0x0f, 0x05]).expect("write");
    t.syscall(libc::SYS_getpid, [0; 6]).expect("getpid");
    let st = fake.state();
    let rips: Vec<u64> = st.regs_written.iter().step_by(2).map(|(_, r)| r.rip).collect();
    // The restorer's mmap (refused), then the two calls.
    assert_eq!(rips, [SYSCALL_AT, SYSCALL_AT, SYSCALL_AT + 3]);
}

#[test]
fn unknown_or_released_threads_are_not_stopped() {
    let fake = Arc::new(Fake::new(&[PID]));
    let mut t = stop(&fake).expect("stops");
    let err = t.regs(555).unwrap_err();
    assert!(matches!(err, TargetError::NotStopped { pid: PID, tid: 555 }));
    assert_eq!(err.to_string(), "thread 555 is not a thread of process 100 stopped by kerf");
    assert!(t.set_regs(555, &regs_at(0)).is_err());
    assert!(t.syscall_on(555, libc::SYS_getpid, [0; 6]).is_err());
}

#[test]
fn memory_outlives_the_stop_and_reports_short_transfers() {
    let fake = Arc::new(Fake::new(&[PID]));
    let mut t = stop(&fake).expect("stops");
    let a = t
        .alloc_near(r(0x5555_0000_1000), 0x1000, libc::PROT_READ | libc::PROT_WRITE)
        .expect("alloc");
    let mem = t.memory();
    t.resume_detach().expect("resumes");
    assert_eq!(fake.state().detached.len(), 1, "the thread is let go");
    mem.write(a, b"patch").expect("write after the stop");
    let mut back = [0u8; 5];
    mem.read(a, &mut back).expect("read after the stop");
    assert_eq!(&back, b"patch");
    // Past the end of the mapping: a short write is an error that says how far it got.
    let err = mem.write(a + 0x1000 - 2, b"long").unwrap_err();
    assert!(matches!(err, TargetError::Memory { write: true, done: 2, len: 4, .. }), "{err:?}");
    let err = mem.read(r(0x10), &mut back).unwrap_err();
    assert!(matches!(err, TargetError::Memory { write: false, done: 0, .. }), "{err:?}");
}

#[test]
fn dropping_detaches_every_thread() {
    let fake = Arc::new(Fake::new(&[PID, 101]));
    fake.state().signal_before_stop.insert(PID, libc::SIGCHLD);
    drop(stop(&fake).expect("stops"));
    let st = fake.state();
    assert_eq!(st.detached, vec![(PID, libc::SIGCHLD), (101, 0)]);
}

#[test]
fn a_thread_that_never_stops_times_out() {
    let fake = Arc::new(Fake::new(&[PID]));
    // Seized but its stop never comes (the fake drops the interrupt's event).
    struct Stuck(Arc<Fake>);
    impl TraceSys for Stuck {
        fn seize(&self, tid: i32, o: i32) -> io::Result<()> {
            self.0.seize(tid, o)
        }
        fn interrupt(&self, _: i32) -> io::Result<()> {
            Ok(())
        }
        fn single_step(&self, tid: i32, s: i32) -> io::Result<()> {
            self.0.single_step(tid, s)
        }
        fn syscall(&self, tid: i32, s: i32) -> io::Result<()> {
            self.0.syscall(tid, s)
        }
        fn detach(&self, tid: i32, s: i32) -> io::Result<()> {
            self.0.detach(tid, s)
        }
        fn cont(&self, tid: i32, s: i32) -> io::Result<()> {
            self.0.cont(tid, s)
        }
        fn get_regs(&self, tid: i32) -> io::Result<Regs> {
            self.0.get_regs(tid)
        }
        fn set_regs(&self, tid: i32, r: &Regs) -> io::Result<()> {
            self.0.set_regs(tid, r)
        }
        fn get_siginfo(&self, tid: i32) -> io::Result<SigInfo> {
            self.0.get_siginfo(tid)
        }
        fn set_siginfo(&self, tid: i32, i: &SigInfo) -> io::Result<()> {
            self.0.set_siginfo(tid, i)
        }
        fn get_sigmask(&self, tid: i32) -> io::Result<u64> {
            self.0.get_sigmask(tid)
        }
        fn set_sigmask(&self, tid: i32, m: u64) -> io::Result<()> {
            self.0.set_sigmask(tid, m)
        }
        fn event_msg(&self, tid: i32) -> io::Result<u64> {
            self.0.event_msg(tid)
        }
        fn wait_nohang(&self, tid: i32) -> io::Result<Option<i32>> {
            self.0.wait_nohang(tid)
        }
        fn queue_signal(&self, p: i32, tid: i32, i: &SigInfo) -> io::Result<()> {
            self.0.queue_signal(p, tid, i)
        }
        fn list_threads(&self, p: i32) -> io::Result<Vec<i32>> {
            self.0.list_threads(p)
        }
        fn read_text(&self, p: &std::path::Path) -> io::Result<String> {
            self.0.read_text(p)
        }
        fn read_bytes(&self, p: &std::path::Path) -> io::Result<Vec<u8>> {
            self.0.read_bytes(p)
        }
        fn read_mem(&self, p: i32, a: RemoteAddr, b: &mut [u8]) -> io::Result<usize> {
            self.0.read_mem(p, a, b)
        }
        fn write_mem(&self, p: i32, a: RemoteAddr, d: &[u8]) -> io::Result<usize> {
            self.0.write_mem(p, a, d)
        }
        fn map_shared(
            &self,
            p: i32,
            fd: i32,
            l: usize,
        ) -> io::Result<(*mut u8, Option<std::fs::File>)> {
            self.0.map_shared(p, fd, l)
        }
        unsafe fn unmap_local(&self, p: *mut u8, l: usize) {
            // SAFETY: forwarded with the caller's guarantee.
            unsafe { self.0.unmap_local(p, l) }
        }
        fn self_pid(&self) -> i32 {
            1
        }
    }
    let sys = Arc::new(Stuck(fake.clone()));
    let err = Tracee::stop_all_with(PID, sys, Duration::from_millis(30)).unwrap_err();
    assert!(matches!(err, TargetError::StopTimeout { pid: PID, tid: PID, .. }), "{err:?}");
    assert!(err.to_string().contains("did not stop within 30 ms"), "{err}");
}

#[test]
fn status_decoding() {
    assert_eq!(decode(stop_status(libc::SIGTRAP, 128)), Status::Stopped { sig: 5, event: 128 });
    assert_eq!(decode(stop_status(libc::SIGUSR1, 0)), Status::Stopped { sig: 10, event: 0 });
    assert_eq!(decode(0), Status::Gone);
    assert_eq!(decode(libc::SIGKILL), Status::Gone);
}

#[test]
fn every_error_is_one_line() {
    let errs = [
        TargetError::PtraceDenied { pid: 1, tid: 2 },
        TargetError::AlreadyTraced { pid: 1, tid: 2, tracer: 3 },
        TargetError::TraceSelf { pid: 1 },
        TargetError::Ptrace {
            pid: 1,
            tid: 2,
            op: "PTRACE_GETREGS",
            source: io::Error::from_raw_os_error(5),
        },
        TargetError::StopTimeout { pid: 1, tid: 2, op: "stop_all", waited_ms: 5 },
        TargetError::ThreadExited { pid: 1, tid: 2, op: "syscall injection" },
        TargetError::NotStopped { pid: 1, tid: 2 },
        TargetError::UnexpectedStop { pid: 1, tid: 2, op: "x", status: 0x137f },
        TargetError::Memory { pid: 1, write: true, addr: r(0x10), len: 4, done: 1, source: None },
        TargetError::Memory {
            pid: 1,
            write: false,
            addr: r(0x10),
            len: 4,
            done: 0,
            source: Some(io::Error::from_raw_os_error(5)),
        },
        TargetError::Injected { pid: 1, tid: 2, call: "mmap", errno: 12 },
        TargetError::NoSyscallInstruction { pid: 1 },
        TargetError::NoRoom { pid: 1, lo: r(0x1000), hi: r(0x2000), len: 0x3000 },
        TargetError::Spawn { program: "x".into(), source: io::Error::from_raw_os_error(2) },
        TargetError::LoadTimeout { pid: 1, waited_ms: 9 },
        TargetError::StepInterrupted { pid: 1, tid: 2, op: "x", stops: 16 },
        TargetError::StepMissed { pid: 1, tid: 2, op: "x", pc: r(0x1234) },
        TargetError::ExitedBeforeEntry { pid: 1, status: 0x100 },
        TargetError::NotStoppedAtExec { pid: 1, signal: 11 },
        TargetError::HoldLost { pid: 1, pc: r(0x4000) },
        TargetError::PermissionDenied { pid: 1, op: "read", path: "/proc/1/maps".into() },
        TargetError::Claim {
            pid: 1,
            op: "bind",
            name: "kerf-os-1-5".into(),
            source: io::Error::from_raw_os_error(98),
        },
    ];
    for e in &errs {
        let msg = e.to_string();
        assert!(!msg.contains('\n') && !msg.contains("  "), "{msg:?}");
        assert!(msg.contains('1') || matches!(e, TargetError::Spawn { .. }), "{msg}");
    }
    assert_eq!(
        errs[8].to_string(),
        "cannot write 4 bytes at 0x10 in process 1: only 1 transferred (unmapped memory?)"
    );
    assert_eq!(
        errs[10].to_string(),
        "injected mmap in thread 2 of process 1 failed: Cannot allocate memory (os error 12)"
    );
    assert_eq!(
        errs[16].to_string(),
        "x in thread 2 of process 1: the single-step ended at 0x1234, not after the syscall \
         instruction"
    );
    assert_eq!(
        errs[20].to_string(),
        "no permission to read /proc/1/maps (need root or ptrace access)"
    );
}
