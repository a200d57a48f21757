#!/usr/bin/env python3
"""Structural-analysis benchmark: `kerf analyze --no-cache` against `objdump -d`, run side by
side (interleaved, same machine, same moment) on libLLVM-14 and libc, printing each median
and the ratio. Only the ratios mean anything on a shared, noisy machine.

Targets (issue 2): kerf's full CFG + liveness of libLLVM-14 at least 5x faster than objdump's
bare disassembly; libc in under 0.1 s.

Usage: bench/analyze.py [--runs N]   (builds kerf in release mode first)
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERF = os.path.join(ROOT, "target", "release", "kerf")
LIBS = [
    ("libLLVM-14", "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"),
    ("libc", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
]


def timed(cmd, keep_output=True):
    # objdump's hundreds of megabytes of text go to /dev/null, as `objdump -d > /dev/null`
    # would: collecting them here would measure this script, not objdump.
    t = time.perf_counter()
    out = subprocess.run(cmd, stdout=subprocess.PIPE if keep_output else subprocess.DEVNULL,
                         stderr=subprocess.PIPE)
    dt = time.perf_counter() - t
    if out.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd)} failed: {out.stderr.decode()[:400]}")
    return dt, out.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "kerf"], cwd=ROOT, check=True)
    for name, path in LIBS:
        if not os.path.exists(path):
            sys.exit(f"bench: {path} missing (install the Debian package for {name})")
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs, {platform.platform()}")
    print(f"runs: {args.runs} of each, interleaved; times are medians of wall-clock seconds\n")
    print("kerf cold: the run right after objdump (fresh memory); kerf warm: a second run at once")
    print(f"{'image':<12}{'text MB':>9}{'objdump -d':>12}{'kerf cold':>11}{'ratio':>7}{'kerf warm':>11}{'ratio':>7}")
    ok = True
    for name, path in LIBS:
        od, kf, kw = [], [], []
        summary = None
        for _ in range(args.runs):
            dt, _ = timed(["objdump", "-d", path], keep_output=False)
            od.append(dt)
            dt, out = timed([KERF, "analyze", "--no-cache", "--json", path])
            kf.append(dt)
            dt, out = timed([KERF, "analyze", "--no-cache", "--json", path])
            kw.append(dt)
            summary = json.loads(out)
        o, k, w = statistics.median(od), statistics.median(kf), statistics.median(kw)
        phases = " ".join(f"{p}={s:.3f}" for p, s in summary["phases"].items())
        mb = summary["text_bytes"] / 1e6
        print(f"{name:<12}{mb:>9.1f}{o:>12.3f}{k:>11.3f}{o / k:>6.1f}x{w:>11.3f}{o / w:>6.1f}x")
        print(f"{'':<12}kerf phases (last warm run): {phases}")
        print(f"{'':<12}functions {summary['functions']}, blocks {summary['blocks']}, "
              f"instruction bytes {summary['instruction_bytes']}, jump tables {summary['jump_tables']}, "
              f"unanalysable jumps {summary['unanalysable_jumps']}")
        if name == "libLLVM-14" and o / k < 5:
            ok = False
            print(f"{'':<12}MISSED (cold): target is >= 5x faster than objdump")
        if name == "libLLVM-14" and o / w < 5:
            print(f"{'':<12}MISSED (warm): target is >= 5x faster than objdump")
        if name == "libc" and k >= 0.1:
            ok = False
            print(f"{'':<12}MISSED: target is under 0.1 s")
    print("\nall targets met" if ok else "\nsome targets missed")


if __name__ == "__main__":
    main()
