#!/usr/bin/env python3
"""Structural-analysis benchmark: `kerf analyze --no-cache` against `objdump -d`, run side by
side (interleaved, same machine, same moment) on libLLVM-14 and libc, printing each median
and the ratio. Only the ratios mean anything on a shared, noisy machine.

Targets (issue 2): kerf's full CFG + liveness of libLLVM-14 at least 5x faster than objdump's
bare disassembly; libc in under 0.1 s.

Usage: bench/analyze.py [--runs N] [--also LABEL=PATH ...]
  (builds kerf in release mode first; --also benchmarks another kerf binary, e.g. a build of
  an older commit, in the same run: each binary gets its own objdump run before its cold run,
  so that "cold" means the same for both)
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERF = os.path.join(ROOT, "target", "release", "kerf")
LIBS = [
    ("libLLVM-14", "/usr/lib/x86_64-linux-gnu/libLLVM-14.so.1"),
    ("libc", "/usr/lib/x86_64-linux-gnu/libc.so.6"),
]


def timed(cmd, keep_output=True):
    """Wall-clock seconds, standard output and peak RSS (MB) of one run of `cmd`."""
    # objdump's hundreds of megabytes of text go to /dev/null, as `objdump -d > /dev/null`
    # would: collecting them here would measure this script, not objdump. Output goes to
    # files, not pipes, so that the child can be reaped by wait4, which reports its own
    # peak RSS.
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out if keep_output else subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            sys.exit(f"bench: {' '.join(cmd)} failed: {err.read().decode()[:400]}")
        out.seek(0)
        return dt, out.read(), usage.ru_maxrss / 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=PATH",
                    help="another kerf binary to run side by side (repeatable)")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "kerf"], cwd=ROOT, check=True)
    kerfs = [("kerf", KERF)] + [tuple(a.split("=", 1)) for a in args.also]
    for name, path in LIBS:
        if not os.path.exists(path):
            sys.exit(f"bench: {path} missing (install the Debian package for {name})")
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                  if ln.startswith("model name")), "unknown CPU")
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs ({model}), {platform.platform()}")
    print(f"runs: {args.runs} of each, interleaved; times are medians of wall-clock seconds")
    print("kerf cold: the run right after objdump (fresh memory); kerf warm: a second run at once")
    print("RSS: kerf's peak resident set, largest of its runs, MB\n")
    print(f"{'image':<12}{'kerf':<8}{'text MB':>8}{'objdump -d':>12}{'kerf cold':>11}{'ratio':>7}"
          f"{'kerf warm':>11}{'ratio':>7}{'RSS':>7}")
    ok = True
    for name, path in LIBS:
        od = {k: [] for k, _ in kerfs}
        kf = {k: [] for k, _ in kerfs}
        kw = {k: [] for k, _ in kerfs}
        rss = {k: 0.0 for k, _ in kerfs}
        summary = None
        for _ in range(args.runs):
            for label, exe in kerfs:
                dt, _, _ = timed(["objdump", "-d", path], keep_output=False)
                od[label].append(dt)
                dt, out, r1 = timed([exe, "analyze", "--no-cache", "--json", path])
                kf[label].append(dt)
                dt, out, r2 = timed([exe, "analyze", "--no-cache", "--json", path])
                kw[label].append(dt)
                rss[label] = max(rss[label], r1, r2)
                if label == "kerf":
                    summary = json.loads(out)
        for label, _ in kerfs:
            o = statistics.median(od[label])
            k, w = statistics.median(kf[label]), statistics.median(kw[label])
            mb = summary["text_bytes"] / 1e6
            print(f"{name:<12}{label:<8}{mb:>8.1f}{o:>12.3f}{k:>11.3f}{o / k:>6.1f}x"
                  f"{w:>11.3f}{o / w:>6.1f}x{rss[label]:>7.0f}")
            if label != "kerf":
                continue
            if name == "libLLVM-14" and o / k < 5:
                ok = False
                print(f"{'':<12}MISSED (cold): target is >= 5x faster than objdump")
            if name == "libLLVM-14" and o / w < 5:
                print(f"{'':<12}MISSED (warm): target is >= 5x faster than objdump")
            if name == "libc" and k >= 0.1:
                ok = False
                print(f"{'':<12}MISSED: target is under 0.1 s")
        phases = " ".join(f"{p}={s:.3f}" for p, s in summary["phases"].items())
        print(f"{'':<12}kerf phases (last warm run): {phases}")
        print(f"{'':<12}functions {summary['functions']}, blocks {summary['blocks']}, "
              f"instruction bytes {summary['instruction_bytes']}, jump tables {summary['jump_tables']}, "
              f"unanalysable jumps {summary['unanalysable_jumps']}")
    print("\nall targets met" if ok else "\nsome targets missed")

if __name__ == "__main__":
    main()
