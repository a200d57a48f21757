#!/usr/bin/env python3
"""Cached-load benchmark: `kerf analyze` reading an analysis from the cache, for this build and
other kerf binaries (e.g. a build of an older commit) side by side, interleaved, on libLLVM-14
and libc; a fresh analysis (`--no-cache`) of each for scale. Prints medians of wall-clock time
and of CPU time (user + system, all threads): on a shared machine the wall-clock time follows
the other tenants' load, the CPU time much less.

Target (issue 9, the cache's cost): a cached load of libLLVM-14 within about 2x of the 0.3 s it
took before the cache was validated.

Usage: bench/cache_load.py [--runs N] [--also LABEL=PATH ...]
  (builds kerf in release mode first; each binary gets a cache directory of its own, filled by
  one run before the timed ones)
"""
import argparse
import os
import platform
import shutil
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


def timed(cmd, env):
    """Wall-clock and CPU seconds (user + system of the child and its threads) of one run."""
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env)
        _, status, usage = os.wait4(p.pid, 0)
        wall = time.perf_counter() - t
        if os.waitstatus_to_exitcode(status) != 0:
            err.seek(0)
            sys.exit(f"bench: {' '.join(cmd)} failed: {err.read().decode()[:400]}")
        err.seek(0)
        if b"rejected" in err.read():
            sys.exit(f"bench: {' '.join(cmd)}: the cache entry was rejected")
        return wall, usage.ru_utime + usage.ru_stime


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=PATH",
                    help="another kerf binary to run side by side (repeatable)")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "kerf"], cwd=ROOT, check=True)
    kerfs = [("kerf", KERF)] + [tuple(a.split("=", 1)) for a in args.also]
    caches = tempfile.mkdtemp(prefix="kerf-bench-")
    os.chmod(caches, 0o700)
    try:
        print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, "
              f"load average {os.getloadavg()[0]:.1f} at the start")
        print(f"{'image':<11} {'kerf':<12} {'cached wall':>11} {'cached cpu':>11} "
              f"{'fresh wall':>11} {'fresh cpu':>10}")
        for name, path in LIBS:
            if not os.path.exists(path):
                sys.exit(f"bench: {path} is missing")
            env = {}
            for label, binary in kerfs:
                env[label] = dict(os.environ, KERF_CACHE_DIR=os.path.join(caches, label))
                timed([binary, "analyze", path], env[label])  # fills the cache
            cached = {label: [] for label, _ in kerfs}
            fresh = {label: [] for label, _ in kerfs}
            for _ in range(args.runs):
                for label, binary in kerfs:
                    cached[label].append(timed([binary, "analyze", path], env[label]))
                    fresh[label].append(timed([binary, "analyze", "--no-cache", path], env[label]))
            for label, _ in kerfs:
                med = lambda runs, i: statistics.median(r[i] for r in runs)
                print(f"{name:<11} {label:<12} {med(cached[label], 0):>10.3f}s "
                      f"{med(cached[label], 1):>10.3f}s {med(fresh[label], 0):>10.3f}s "
                      f"{med(fresh[label], 1):>9.3f}s")
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
    finally:
        shutil.rmtree(caches, ignore_errors=True)


if __name__ == "__main__":
    main()
