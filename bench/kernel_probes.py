#!/usr/bin/env python3
"""The Djprobe table: per-hit cost of each kind of kernel probe, all on one function of kerf.ko
(kerf_selftest_jump5, right after its ftrace site) that the driver's self-test loop calls N
times in a row, in one boot of the stock Debian kernel under qemu TCG
(bench/kernel_probe_cost.sh runs in the guest). Each run of the probed function sits between
two runs of kerf_selftest_twin, the same code at another address that nothing probes; a
kind's cost per hit is the difference, taken from the fastest block of 256 calls of each run
(under qemu the guest's clock runs on while the host does not run the vCPU; the whole runs'
figure is printed beside it). The kinds are interleaved in rounds; per kind: the median over
the rounds, min and max, the spread (half the range, as a share of the median) and the ratio
to the optprobe (medians, and the range of the per-round ratios). "bare" is the same
difference with no probe at all: how finely the method resolves. Every run is checked: the
loop's own count is N, and kerf (or the kprobe event) counted N, with the kind asked for.

Timings under TCG only mean something as ratios within this one run.
Target: kerf jump5 <= 1/10 of the optprobe, each kind resolved to within 10 %.

Usage: bench/kernel_probes.py [--calls N] [--rounds R]
       (builds kerf, kerf.ko and kerf_selftest; needs vm/run)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# KERF_SELFTEST_BLOCK of driver/kerf_uapi.h: the loop times its calls in blocks this long.
BLOCK = 256


def sh(*cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, capture_output=True, **kw).stdout


def guest_run(calls, rounds, script="kernel_probe_cost.sh", extra=()):
    """One boot running bench/`script` with kerf, kerf.ko, kerf_selftest and `extra` files
    ((host, guest) pairs); its output, which must end in DONE."""
    sh("cargo", "build", "--release", "--quiet", "--bin", "kerf", cwd=ROOT)
    out = sh(os.path.join(ROOT, "driver", "build")).strip().splitlines()[-1]
    files = [
        (os.path.join(ROOT, "target", "release", "kerf"), "/kerf/kerf"),
        (os.path.join(out, "kerf.ko"), "/kerf/kerf.ko"),
        (os.path.join(out, "kerf_selftest"), "/kerf/kerf_selftest"),
        (os.path.join(ROOT, "bench", script), "/kerf/bench.sh"),
        *extra,
    ]
    args = [os.path.join(ROOT, "vm", "run"), "--timeout", "3600"]
    for host, guest in files:
        args += ["--file", f"{host}:{guest}"]
    args += ["--", f"N={calls} ROUNDS={rounds} sh /kerf/bench.sh"]
    r = subprocess.run(args, text=True, capture_output=True)
    if r.returncode != 0 or "DONE" not in r.stdout:
        sys.exit(f"guest run failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r.stdout


def parse(stdout, calls):
    """ROW lines -> ({kind: {round: ns per hit}} from the fastest blocks, the same from the
    whole runs), checking every run's counts."""
    best, whole = {}, {}
    pat = r"^ROW (\d+) (\S+) ([0-9.]+) ([0-9.]+) ([0-9.]+) ([0-9.]+) (\S+) (\S+) (\S+)$"
    for m in re.finditer(pat, stdout, re.M):
        rnd, kind, tbest, tmean, wbest, wmean, hits, kcount, kkind = m.groups()
        if int(hits) != calls:
            sys.exit(f"round {rnd} {kind}: the loop counted {hits} calls, not {calls}")
        if kind.startswith("kerf_"):
            if kcount != str(calls) or kkind != kind[len("kerf_"):]:
                sys.exit(f"round {rnd} {kind}: kerf counted {kcount} as {kkind}")
        elif kcount != "-" and int(kcount) != calls:
            sys.exit(f"round {rnd} {kind}: the kprobe event counted {kcount}")
        best.setdefault(kind, {})[int(rnd)] = float(tbest) - float(wbest)
        whole.setdefault(kind, {})[int(rnd)] = float(tmean) - float(wmean)
    return best, whole


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=1_000_000, help="calls per run (default 1e6)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    a = ap.parse_args()
    stdout = guest_run(a.calls, a.rounds)
    hit, whole = parse(stdout, a.calls)
    site = re.search(r"^SITE (\S+)", stdout, re.M)
    print(f"probed: {site.group(1) if site else '?'}; {a.calls:,} calls per run, "
          f"{a.rounds} rounds")
    for note in re.findall(r"^NOTE (.*)$", stdout, re.M):
        print(f"note: {note}")
    twin = [float(x) for x in re.findall(r"^ROW \d+ \S+ \S+ \S+ ([0-9.]+) ", stdout, re.M)]
    print(f"unprobed twin, ns per call (fastest block): {min(twin):.1f} to {max(twin):.1f}")
    opt = hit.get("optprobe")
    print(f"\nns per hit: probed less unprobed twin, fastest block of {BLOCK} calls of each run "
          f"(median, min and max over the rounds; spread = half the range / median); last "
          f"column: the same median from the whole runs")
    print(f"{'probe':<18}{'ns/hit':>9}{'min':>9}{'max':>9}{'spread':>9}"
          f"{'/ optprobe':>12}  {'(per round)':<15}{'whole runs':>11}")
    for k, per in hit.items():
        v = list(per.values())
        med = statistics.median(v)
        line = f"{k:<18}{med:>9.1f}{min(v):>9.1f}{max(v):>9.1f}"
        if k == "bare":
            print(f"{line}{'':>9}{'':>12}  {'':<15}{statistics.median(whole[k].values()):>11.1f}")
            continue
        spread = (max(v) - min(v)) / 2 / med * 100 if med > 0 else float("inf")
        line += f"{spread:>8.1f}%"
        if opt:
            ratios = [per[r] / opt[r] for r in per if r in opt]
            line += (f"{med / statistics.median(opt.values()):>12.3f}"
                     f"  {f'({min(ratios):.3f}-{max(ratios):.3f})':<15}")
        line += f"{statistics.median(whole[k].values()):>11.1f}"
        print(line + ("" if spread <= 10 else "   NOT resolved to 10 %"))
    if opt and "kerf_jump5" in hit:
        ratio = statistics.median(hit["kerf_jump5"].values()) / statistics.median(opt.values())
        print(f"\nkerf jump5 / optprobe: {ratio:.3f} (target <= 0.1)")


if __name__ == "__main__":
    main()
