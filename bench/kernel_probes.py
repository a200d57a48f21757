#!/usr/bin/env python3
"""The Djprobe table (issue 4): per-hit cost of probes on one kernel function in the stock
Debian kernel guest, all in one guest run (bench/kernel_probe_cost.sh): kerf jump5, kerf trap,
a kprobe with optimisation off (int3), an optprobe, and an empty BPF fentry program. The
function (__task_pid_nr_ns) is hit once per getppid() of a tight system-call loop; a probe's
cost per hit is its loop time minus the bare loop's (the mean of the bare runs before and
after). Timings under TCG only mean something as ratios within this one run.

Target: kerf jump5 <= 1/10 of the optprobe.

Usage: bench/kernel_probes.py   (builds kerf, kerf.ko and the guest programs; needs vm/run)
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def main():
    sh("cargo", "build", "--release", "--quiet", "--bin", "kerf", cwd=ROOT)
    out = sh(os.path.join(ROOT, "driver", "build")).strip().splitlines()[-1]
    tmp = os.path.join(ROOT, "target", "bench-kernel")
    os.makedirs(tmp, exist_ok=True)
    for prog in ("syscall_loop", "fentry_loop"):
        sh("gcc", "-O2", "-static", "-o", os.path.join(tmp, prog), os.path.join(ROOT, "bench", prog + ".c"))
    files = [
        (os.path.join(ROOT, "target", "release", "kerf"), "/kerf/kerf"),
        (os.path.join(out, "kerf.ko"), "/kerf/kerf.ko"),
        (os.path.join(tmp, "syscall_loop"), "/kerf/syscall_loop"),
        (os.path.join(tmp, "fentry_loop"), "/kerf/fentry_loop"),
        (os.path.join(ROOT, "bench", "kernel_probe_cost.sh"), "/kerf/bench.sh"),
    ]
    args = [os.path.join(ROOT, "vm", "run"), "--timeout", "900"]
    for host, guest in files:
        args += ["--file", f"{host}:{guest}"]
    args += ["--", "sh /kerf/bench.sh"]
    r = subprocess.run(args, text=True, capture_output=True)
    if r.returncode != 0 or "DONE" not in r.stdout:
        sys.exit(f"guest run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    rows = dict((m.group(1), float(m.group(2))) for m in re.finditer(r"^ROW (\S+) ([0-9.]+)", r.stdout, re.M))
    site = re.search(r"^SITE (\S+)", r.stdout, re.M)
    bare = (rows["bare"] + rows["bare_again"]) / 2
    print(f"function and site: {site.group(1) if site else '?'}; bare loop {rows['bare']:.1f} / "
          f"{rows['bare_again']:.1f} ns per call (before / after)\n")
    print(f"{'probe':<22}{'ns/call':>10}{'ns/hit':>10}{'vs kerf jump5':>16}")
    hit = {k: max(v - bare, 0.0) for k, v in rows.items() if not k.startswith("bare")}
    j = hit.get("kerf_jump5") or 1e-9
    for k, v in rows.items():
        if k.startswith("bare"):
            continue
        print(f"{k:<22}{v:>10.1f}{hit[k]:>10.1f}{hit[k] / j:>15.1f}x")
    opt = hit.get("optprobe_optimized")
    if opt:
        print(f"\nkerf jump5 / optprobe: {j / opt:.3f} (target <= 0.1)")
    else:
        print("\nthe optprobe was not optimised at this site: no jump5/optprobe ratio")


if __name__ == "__main__":
    main()
