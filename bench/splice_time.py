#!/usr/bin/env python3
"""Process splice time: a counter at every function entry of Debian's python3.11 (its 10,722
entries: `python3.11:*` and its PLT stubs `python3.11:*@plt`) spliced into a running python3.11,
per point and with the longest pause of the target, and where the time goes (kerf count's
`splice_phases_us`). Configurations run interleaved, round by round, against one target:
this build with planning on every CPU (`parallel`), the same build planning on one thread
(`--plan-threads 1`, `sequential`), and other kerf binaries given with --also (e.g. a
build of an older commit). Prints medians with the spread (min-max) and the per-phase
medians; on a shared machine only the ratios within one run mean much.

Target (issue 10, item 9): 5 us a point, the longest pause under 1 ms (DESIGN.md §4).

Usage: bench/splice_time.py [--runs N] [--also LABEL=PATH ...]
  (root: kerf attaches with ptrace; builds kerf in release mode first. Every kerf run analyses
  from kerf's cache: a first run of each binary, not timed, fills it.)
"""
import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERF = os.path.join(ROOT, "target", "release", "kerf")
PY = "/usr/bin/python3.11"  # not `python3.11` on PATH, which may be a pyenv shim
SCRIPT = os.path.join(ROOT, "tests", "fixtures", "pywork.py")
SPECS = ["python3.11:*", "python3.11:*@plt"]


def cpu_model():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return "unknown CPU"


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def start_python():
    """python3.11 blocked in sigwait (the workload runs on SIGUSR1, at the end)."""
    if not os.path.exists(PY):
        sys.exit(f"bench: {PY} missing (Debian package python3.11)")
    p = subprocess.Popen(["setarch", "x86_64", "-R", PY, SCRIPT], stdout=subprocess.PIPE,
                         env=dict(os.environ, PYTHONHASHSEED="0"), text=True)
    if p.stdout.readline().strip() != "ready":
        sys.exit("bench: python3.11 did not start")
    return p


def splice(kerf, env, pid, extra=()):
    """One `kerf count` of every entry: (us a point, longest pause us, longest splice-batch
    pause us, {phase: us}, points)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        cmd = [kerf, "count", "-p", str(pid), *SPECS, "--duration", "0.05", "--json",
               "-o", out.name, *extra]
        r = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                           text=True)
        if r.returncode != 0:
            sys.exit(f"bench: {' '.join(cmd)} failed: {r.stderr[-600:]}")
        d = json.load(open(out.name))
    points = sum(1 for p in d["points"] if p.get("kind"))
    return (d["splice_seconds"] * 1e6 / points, d["longest_pause_us"],
            d["longest_splice_pause_us"], d.get("splice_phases_us", []), points)


def spread(v, fmt="{:.1f}"):
    return f"{fmt.format(statistics.median(v))} ({fmt.format(min(v))}-{fmt.format(max(v))})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=PATH",
                    help="another kerf binary to run side by side (repeatable)")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "kerf"], cwd=ROOT,
                   check=True)
    base = dict(os.environ)
    configs = [("parallel", KERF, base, ()),
               ("sequential", KERF, base, ("--plan-threads", "1"))]
    configs += [(a.split("=", 1)[0], a.split("=", 1)[1], base, ()) for a in args.also]
    print(f"machine: {platform.node()}, {os.cpu_count()} CPUs, {cpu_model()}; "
          f"load average at the start {loadavg()}")
    print(f"target: {PY} {os.path.relpath(SCRIPT, ROOT)}; specs {' '.join(SPECS)}; "
          f"runs: {args.runs} rounds, interleaved, each starting with the next configuration")
    py = start_python()
    results = {c[0]: [] for c in configs}
    try:
        for _, kerf, env, extra in configs:  # fill each binary's cache
            splice(kerf, env, py.pid, extra)
        for r in range(args.runs):
            # Each round starts with another configuration: none always runs right after
            # the same one.
            for name, kerf, env, extra in configs[r % len(configs):] + configs[:r % len(configs)]:
                results[name].append(splice(kerf, env, py.pid, extra))
    finally:
        py.send_signal(signal.SIGUSR1)
        out, _ = py.communicate(timeout=120)
    if py.returncode != 0 or len(out.split()) != 3:
        sys.exit(f"bench: python3.11 did not finish its workload cleanly: {out!r}")
    print(f"load average at the end {loadavg()}; python3.11's workload ran to its end after "
          f"every removal: {out.strip()!r}\n")
    print(f"{'build':<12} {'points':>6}  {'us a point: median (min-max)':<30} "
          f"{'longest pause us':<24} {'of a splice batch us'}")
    for name, rs in results.items():
        print(f"{name:<12} {rs[0][4]:>6}  {spread([r[0] for r in rs]):<30} "
              f"{spread([r[1] for r in rs], '{:.0f}'):<24} {spread([r[2] for r in rs], '{:.0f}')}")
    print()
    par = results["parallel"]
    for name, rs in results.items():
        if name == "parallel":
            continue
        ratios = [r[0] / p[0] for r, p in zip(rs, par)]
        print(f"{name} / parallel, us a point, round by round: "
              + " ".join(f"{x:.2f}" for x in ratios)
              + f"; median {statistics.median(ratios):.2f}")
    print("\nphases, median ms (`X: Y` is a part of X; the parts of `plan` are summed over both"
          " plans, the second with kerf's signal-mask guards):")
    names = []
    for rs in results.values():
        for r in rs:
            names += [n for n, _ in r[3] if n not in names]
    parents = [n for n in names if ":" not in n]
    ordered = []
    for n in parents:
        ordered.append(n)
        ordered += [c for c in names if ":" in c and c.split(":")[0] == n]
    ordered += [c for c in names if c not in ordered]
    cols = [n for n, rs in results.items() if rs[0][3]]
    print(f"{'':<52}" + "".join(f"{c:>12}" for c in cols))
    for n in ordered:
        row = [statistics.median(dict(r[3]).get(n, 0) for r in results[c]) / 1e3 for c in cols]
        label = n if ":" not in n else "  " + n
        print(f"{label:<52}" + "".join(f"{x:>12.1f}" for x in row))

if __name__ == "__main__":
    main()
