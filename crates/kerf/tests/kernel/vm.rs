//! The kernel target in a VM: builds kerf.ko and the in-guest smoke test (driver/build), boots
//! Debian's stock kernel once under qemu TCG (vm/run) and runs every kernel check in that one
//! boot: load the module, kerf_smoke (splices, traps, counts, refusals, batches with refused
//! entries, restore on close and on SIGKILL, splicing under fire), unload. Boots are
//! expensive, so all of the smoke test runs in this one boot, and the test asserts on every
//! line it prints.
//!
//! This machine's own kernel has no kprobes and no module loading, which is why the kernel is a
//! guest. If the VM cannot run (no qemu, no Debian packages, a crash), the test fails with the
//! reason; it never passes without checking.

use crate::common::repo;
use std::path::PathBuf;
use std::process::Command;

/// Runs a script of the repository, returning (success, stdout, stderr).
fn run(cmd: &mut Command) -> (bool, String, String) {
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn kerf_ko_in_stock_debian_kernel() {
    let repo = repo();
    let out_dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("driver");

    let (ok, stdout, stderr) =
        run(Command::new(repo.join("driver/build")).env("KERF_DRIVER_OUT", &out_dir));
    assert!(ok, "driver/build failed (cannot build kerf.ko or kerf_smoke):\n{stdout}\n{stderr}");
    let built = PathBuf::from(stdout.trim());
    let ko = built.join("kerf.ko");
    let smoke = built.join("kerf_smoke");
    assert!(ko.is_file() && smoke.is_file(), "driver/build did not produce {ko:?} and {smoke:?}");

    // One boot for everything. The guest script reports each step; a kernel oops, panic or
    // WARNING makes vm/run exit 125 even if the script succeeded.
    let guest = "\
        insmod /kerf/kerf.ko site_check=64 && echo 'OK insmod' || { echo 'FAIL insmod'; exit 90; }; \
        grep -q ' kerf_patch_heap' /proc/kallsyms && echo 'OK heap-in-kallsyms'; \
        dmesg | grep -q 'site check: [1-9][0-9]* ranges near 64 sites, 0 disagreements' \
            && echo 'OK site-check' || { echo 'FAIL site-check'; dmesg | grep 'site check'; }; \
        kerf_smoke; rc=$?; \
        rmmod kerf && echo 'OK rmmod' || { echo 'FAIL rmmod'; rc=91; }; \
        exit $rc";
    let started = std::time::Instant::now();
    let (ok, stdout, stderr) = run(Command::new(repo.join("vm/run"))
        .args(["--timeout", "1200"])
        .arg("--file")
        .arg(&ko)
        .arg("--file")
        .arg(&smoke)
        .arg("--")
        .arg(guest));
    let secs = started.elapsed().as_secs_f64();
    eprintln!("{stdout}{stderr}vm/run took {secs:.1}s");
    let report = format!("guest output:\n{stdout}\nvm/run stderr:\n{stderr}");

    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(failed.is_empty(), "failed checks in the guest: {failed:#?}\n{report}");
    assert!(ok, "vm/run failed (guest exit code, timeout or kernel crash)\n{report}");
    assert!(stdout.lines().any(|l| l == "SMOKE PASS"), "no SMOKE PASS\n{report}");

    // Every check must have run and reported OK, with the exact counts.
    let expected = [
        "OK insmod",
        "OK heap-in-kallsyms",
        "OK site-check",
        "OK version abi=3",
        "OK info ",
        "OK info-stext",
        "OK exclusive-open",
        "OK no-cap-open",
        "OK mmap-noexec",
        "OK read-text",
        "OK read-bad-address",
        "OK read-user-address",
        "OK write-patch",
        "OK refuse-write-outside-heap ERANGE",
        "OK patch-next ",
        "OK refuse-jump-without-int3-quiesce EAGAIN",
        "OK refuse-int3-without-trap ENOENT",
        "OK splice-int3",
        "OK int3-phase count=1000 trap_hits=1000",
        "OK refuse-jump-before-quiesce EAGAIN",
        "OK refuse-expect-old-mismatch ESTALE",
        "OK splice-jump5 ",
        "OK jump5-bytes e9",
        "OK jump5 count=100000 ",
        "OK refuse-ftrace-site getuid+0: EBUSY",
        "OK refuse-blacklist-notify_die notify_die+8: EPERM",
        "OK refuse-blacklist-exc_int3 exc_int3+8: EPERM",
        "OK refuse-blacklist-entry_SYSCALL_64 entry_SYSCALL_64+8: EPERM",
        "OK refuse-int3-path-__rcu_read_unlock ",
        "OK refuse-int3-path-arch_uprobe_exception_notify ",
        "OK refuse-extable",
        "OK refuse-jump-label 3 sites, at and 4 bytes before each: EBUSY",
        "OK refuse-static-call-site 3 sites, at and 4 bytes before each: EBUSY",
        "OK refuse-bug-site 3 sites, at and 4 bytes before each: EPERM",
        "OK refuse-bpf-dispatcher bpf_dispatcher_xdp_func: EBUSY",
        "OK refuse-overlap",
        "OK refuse-not-text",
        "OK refuse-target-outside-heap EINVAL",
        "OK refuse-own-heap EPERM",
        "OK refuse-own-text kerf_selftest_ioctl+5: EPERM",
        "OK selftest-target-allowed",
        "OK refuse-write-live-patch EBUSY",
        "OK no-unload-while-open",
        "OK ftrace-coexist kprobe_event=1000 kerf=1000",
        "OK ftrace-restored",
        "OK unsplice-jump5",
        "OK refuse-trap-del-before-quiesce EBUSY",
        "OK trap-del-batch done=1 results 0, -2",
        "OK removed-no-count count after removal=0",
        "OK trap-add-batch done=1 results 0, -17",
        "OK trap count=20000 trap_hits=20000",
        "OK unsplice-trap",
        "OK jump2-site",
        "OK jump2 count=50000 ",
        "OK refuse-springboard-in-use EBUSY",
        "OK unsplice-jmp8",
        "OK refuse-springboard-before-quiesce EBUSY",
        "OK unsplice-springboard",
        "OK jump2-text-restored",
        "OK refuse-kprobe",
        "OK stress 200 splice/restore cycles",
        "OK refuse-empty-batch EINVAL",
        "OK batch-int3 done=2 results 0 0 EPERM ESTALE EEXIST; getuid count=1000 trap_hits=2000",
        "OK batch-refused-untouched",
        "OK batch-jump5 done=2 results 0 0; count=100000",
        "OK batch-unsplice done=2 results 0 0 ENOENT; text identical, splices=0 traps=0",
        "OK kill-restores",
        "OK text-clean-before-close",
        "OK splice-jump5-one-insn",
        "OK live-before-close count=500 splices=2 traps=1",
        "OK close-restores text identical, splices=0 traps=0",
        "OK rmmod",
    ];
    for want in expected {
        assert!(stdout.lines().any(|l| l.starts_with(want)), "missing `{want}`\n{report}");
    }
}
