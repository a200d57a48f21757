#!/usr/bin/env python3
"""Kernel splice time (issue 10): how long kerf's kernel probes take to go live, one driver
call per site (the driver's single-site path, KERF_KERNEL_SPLICE=single) against one batch per
protocol step (KERF_IOC_SPLICE_BATCH, the default), in alternation in one boot of the stock
Debian kernel under qemu TCG (bench/kernel_splice.sh). Two probe sets: the 2,145 probes of the
kernel test's exact-count check (kerf count), and kerf time on the openat path while two shells
open files (its int3 step is the window in which some timer sites are live and others not).
Timings under TCG only mean something as ratios within this one run.

Target: the 2,145 probes live in 2 s (about 30 s one site at a time).

Usage: bench/kernel_splice.py [--rounds N]   (builds kerf and kerf.ko; needs vm/run)
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
    rounds = ap.parse_args().rounds
    sh("cargo", "build", "--release", "--quiet", "--bin", "kerf", cwd=ROOT)
    out = sh(os.path.join(ROOT, "driver", "build")).strip().splitlines()[-1]
    files = [
        (os.path.join(ROOT, "target", "release", "kerf"), "/kerf/kerf"),
        (os.path.join(out, "kerf.ko"), "/kerf/kerf.ko"),
        (os.path.join(ROOT, "bench", "kernel_splice.sh"), "/kerf/bench.sh"),
    ]
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
    med = lambda xs: statistics.median(xs)
    print(f"{'probe set':<10}{'mode':<8}{'points':>8}{'splice s':>10}{'int3 s':>9}{'extra':>14}")
    res = {}
    for (mode, what), runs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0] != "single")):
        sp = [float(k["splice_int3"].split("/")[0]) for k in runs]
        i3 = [float(k["splice_int3"].split("/")[1]) for k in runs]
        extra = f"wall {med([float(k['wall']) for k in runs]):.1f}" if what == "count" else \
            f"unmatched {max(int(k['unmatched']) for k in runs)}"
        res[(mode, what)] = (med(sp), med(i3))
        print(f"{what:<10}{mode:<8}{runs[0]['points']:>8}{med(sp):>10.2f}{med(i3):>9.3f}{extra:>14}")
    for what in ("count", "time"):
        s, b = res.get(("single", what)), res.get(("batch", what))
        if s and b:
            print(f"{what}: batch/single splice time {b[0] / s[0]:.3f}, int3 step {b[1] / s[1]:.3f}")


if __name__ == "__main__":
    main()
