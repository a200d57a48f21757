#!/usr/bin/env python3
"""bench/kill_during_flush.py [TRIES]: how often SIGKILL of `kerf jit` while it flushes a bounded
code cache harms the program (DESIGN: kerf killed at any moment leaves the program running).

Each try launches `kerf jit work --cache-limit 40K --max-flush-share 1 -- jitted 8 500 3000
plain` (tests/fixtures/jitted.c, built here with gcc -O2: eight threads, a 2 ms SIGALRM; at
that limit the cache is flushed a few hundred times, most of the run) and kills kerf with
SIGKILL 0.3-3.5 s after the launch. This script makes itself the child subreaper, so the
program, left behind by kerf, is reparented to it and its exit status is seen: a try harms
the program if it dies of a signal, exits non-zero or prints other than its native run.
KERF=PATH picks the build (default: this tree's release build); SIGNAL=TERM sends SIGTERM
instead (kerf then takes the JIT out and waits for the program itself). PROG="COMMAND ARGS"
runs another program instead of the fixture (its native output must be the same each run),
with ROOT (default `main`), LIMIT (default 40K) and, for a program that runs longer, the
kill's latest moment in seconds KILL_BY (default 3.5). A program that kerf still held at
its entry point (kerf's "live ... after kerf started" line not yet printed) dies with kerf by
design (its parent-death signal, SIGKILL, is cleared only when it starts): such a try is
counted apart, not as harm.
"""
import ctypes, os, random, shlex, signal, subprocess, sys, tempfile
from pathlib import Path

root = Path(__file__).resolve().parent.parent
kerf = os.environ.get("KERF", str(root / "target/release/kerf"))
tries = int(sys.argv[1]) if len(sys.argv) > 1 else 20
sig = getattr(signal, "SIG" + os.environ.get("SIGNAL", "KILL"))
work = Path(tempfile.mkdtemp())
if os.environ.get("PROG"):
    args = shlex.split(os.environ["PROG"])
    fn = os.environ.get("ROOT", "main")
else:
    prog = work / "jitted"
    subprocess.run(["gcc", "-O2", "-pthread", "-o", prog, root / "tests/fixtures/jitted.c"],
                   check=True)
    args = [str(prog), "8", "500", "3000", "plain"]
    fn = "work"
limit = os.environ.get("LIMIT", "40K")
kill_by = float(os.environ.get("KILL_BY", "3.5"))
native = subprocess.run(args, capture_output=True, check=True).stdout
# PR_SET_CHILD_SUBREAPER: the program outlives kerf as this process's child.
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
harmed = {}
unstarted = 0
for i in range(tries):
    out = work / "out"
    with open(out, "w") as o, open(work / "err", "w") as e:
        k = subprocess.Popen([kerf, "jit", fn, "--cache-limit", limit, "--max-flush-share", "1",
                              "--", *args], stdout=o, stderr=e)
        after = random.uniform(0.3, kill_by)
        try:
            k.wait(after)
        except subprocess.TimeoutExpired:
            k.send_signal(sig)
            k.wait()
    try:
        _, status = os.waitpid(-1, 0)
    except ChildProcessError:  # kerf waited for the program itself
        rc = k.returncode
        status = (rc & 0xFF) << 8 if rc >= 0 else -rc
    if os.WIFSIGNALED(status):
        how = f"signal {signal.Signals(os.WTERMSIG(status)).name}"
    else:
        how = f"exit {os.WEXITSTATUS(status)}"
    right = out.read_bytes() == native
    ok = how == "exit 0" and right
    held = how == "signal SIGKILL" and " live " not in (work / "err").read_text()
    if held:
        unstarted += 1
    elif not ok:
        key = how if how != "exit 0" else "output differs"
        harmed[key] = harmed.get(key, 0) + 1
    print(f"try {i + 1}: {'SIG' + os.environ.get('SIGNAL', 'KILL')} at {after:.2f} s: {how}"
          f"{'' if right else ', output differs'}{' (not started yet)' if held else ''}",
          flush=True)
total = sum(harmed.values())
print(f"harmed {total} of {tries - unstarted}" + (f": {harmed}" if harmed else "")
      + (f" ({unstarted} more killed before they started, by design)" if unstarted else ""))
