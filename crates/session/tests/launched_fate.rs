//! A launched command's end is polled by kerf's main thread (its parent) while another of
//! kerf's threads holds ptrace sessions on it (the JIT's miss server maps room for a library
//! the program loaded): the poll must not take that thread's ptrace stops, or its session
//! waits for a stop that never comes and leaves a thread at an injected `syscall`.

use kerf_os::ptrace::Tracee;
use kerf_session::live::ProcessTarget;
use std::sync::atomic::{AtomicBool, Ordering};

#[test]
fn polling_a_launched_command_leaves_another_threads_ptrace_stops_alone() {
    let cmd = ["sleep".to_string(), "60".to_string()];
    let mut t = ProcessTarget::open(None, &cmd).expect("sleep starts");
    t.release().expect("released from its entry point");
    let pid = t.pid;
    let done = AtomicBool::new(false);
    let sessions = std::thread::scope(|s| {
        let h = s.spawn(|| {
            // Sessions of several injected calls each, as mapping a module's room takes.
            let r = (0..40).try_for_each(|_| {
                let mut tr = Tracee::stop_all(pid)?;
                for _ in 0..4 {
                    let me = tr.syscall(libc::SYS_getpid, [0; 6])?;
                    assert_eq!(me, i64::from(pid), "getpid injected in the target");
                }
                tr.resume_detach().map(|_| ())
            });
            done.store(true, Ordering::SeqCst);
            r
        });
        let mut polls = 0u64;
        while !done.load(Ordering::SeqCst) {
            assert!(t.fate().is_none(), "sleep 60 ended while being traced");
            polls += 1;
        }
        assert!(polls > 40, "the parent polled only {polls} times");
        h.join().expect("the tracing thread")
    });
    // SAFETY: kill takes two integers; pid is the child this test started.
    unsafe { libc::kill(pid, libc::SIGKILL) };
    t.wait(&mut |_| {});
    sessions.expect("every ptrace session of the other thread ended normally");
}
