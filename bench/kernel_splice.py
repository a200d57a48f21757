#!/usr/bin/env python3
"""Kernel splice time (issue 10): how long kerf's kernel probes take to go live, one driver
call per site (the driver's single-site path, KERF_KERNEL_SPLICE=single) against one batch per
protocol step (KERF_IOC_SPLICE_BATCH, the default), in alternation in one boot of the stock
Debian kernel under qemu TCG (bench/kernel_splice.sh). Two probe sets: the 2,145 probes of the
kernel test's exact-count check (kerf count), and kerf time on the openat path while two shells
open files (its int3 step is the window in which some timer sites are live and others not).
Timings under TCG only mean something as ratios within this one run.

With --before KERF KO, an older kerf binary and its kerf.ko are measured in the same boot too
(the guest swaps the modules), e.g. a build of the commit before the batches.

Target: the 2,145 probes live in 2 s (about 30 s one site at a time).

Usage: bench/kernel_splice.py [--rounds N] [--before KERF KERF_KO]
       (builds kerf and kerf.ko; needs vm/run)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--before", nargs=2, metavar=("KERF", "KERF_KO"))
    opts = ap.parse_args()
    rounds = opts.rounds
    sh("cargo", "build", "--release", "--quiet", "--bin", "kerf", cwd=ROOT)
    out = sh(os.path.join(ROOT, "driver", "build")).strip().splitlines()[-1]
    files = [
        (os.path.join(ROOT, "target", "release", "kerf"), "/kerf/kerf"),
        (os.path.join(out, "kerf.ko"), "/kerf/kerf.ko"),
        (os.path.join(ROOT, "bench", "kernel_splice.sh"), "/kerf/bench.sh"),
    ]
    if opts.before:
        files += [(opts.before[0], "/kerf/before/kerf"), (opts.before[1], "/kerf/before/kerf.ko")]
    args = [os.path.join(ROOT, "vm", "run"), "--timeout", "1500"]
    for host, guest in files:
        args += ["--file", f"{host}:{guest}"]
    args += ["--", f"ROUNDS={rounds} sh /kerf/bench.sh"]
    r = subprocess.run(args, text=True, capture_output=True)
    if r.returncode != 0 or "DONE" not in r.stdout:
        sys.exit(f"guest run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    rows = {}
    for m in re.finditer(r"^RUN (\S+) (\S+) (.*)$", r.stdout, re.M):
        kv = dict(f.split("=", 1) for f in m.group(3).split())
        rows.setdefault((m.group(1), m.group(2)), []).append(kv)
    print(r.stdout.strip())
    print()
    med = statistics.median
    order = {"before": 0, "single": 1, "batch": 2}
    print("medians of the runs; int3 s: the int3 step (the window in which some sites are live")
    print("and others not); wall: the whole kerf count, analysis and removal included")
    print(f"{'probe set':<10}{'mode':<8}{'points':>8}{'splice s':>10}{'int3 s':>9}{'extra':>20}")
    res = {}
    for (mode, what), runs in sorted(rows.items(), key=lambda kv: (kv[0][1], order[kv[0][0]])):
        sp = [float(k["splice_int3"].split("/")[0]) for k in runs]
        i3 = [k["splice_int3"].split("/")[1] for k in runs]
        i3 = med([float(x) for x in i3]) if "-" not in i3 else None
        if what == "count":
            extra = f"wall {med([float(k['wall']) for k in runs]):.1f}"
        else:
            extra = f"unmatched {'/'.join(k['unmatched'] for k in runs)}"
        res[(mode, what)] = med(sp)
        i3s = f"{i3:.3f}" if i3 is not None else "-"
        print(f"{what:<10}{mode:<8}{runs[0]['points']:>8}{med(sp):>10.2f}{i3s:>9}{extra:>20}")
    for what in ("count", "time"):
        b = res.get(("batch", what))
        for other in ("before", "single"):
            o = res.get((other, what))
            if b and o:
                print(f"{what}: batch / {other} splice time {b / o:.3f} ({o / b:.1f}x faster)")


if __name__ == "__main__":
    main()
