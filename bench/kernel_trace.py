#!/usr/bin/env python3
"""The kernel tracers' table: what one traced event costs the kernel, for kerf trace, a kprobe
event (ftrace) and a BPF program writing into a BPF ring buffer from a kprobe and from fentry,
each recording the same fields (time, first argument, the u64 it points to) at the entry of
the same function of kerf.ko, in one boot of the stock Debian kernel under qemu TCG
(bench/kernel_trace_cost.sh runs in the guest and says how). Per tracer: ns per event (the
traced function's time per call less its untraced twin's, from the fastest block of 256
calls of each run; median, min and max over the rounds), the events it delivered per call
made, and its ratio to kerf. "bare" is the same difference with nothing attached: how finely
the method resolves. Timings under TCG only mean something as ratios within this one run.

Usage: bench/kernel_trace.py [--calls N] [--rounds R]
       (builds kerf, kerf.ko with BTF, kerf_selftest and bench/kernel_trace/bpf_ring; needs vm/run)
"""
import argparse
import os
import re
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_probes import BLOCK, ROOT, guest_run  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=30_000, help="calls per run (default 30000)")
    ap.add_argument("--rounds", type=int, default=3, help="rounds (default 3)")
    a = ap.parse_args()
    ring = os.path.join(ROOT, "target", "bpf_ring")
    subprocess.run(["gcc", "-static", "-O2", "-Wall", "-Wextra", "-Werror", "-o", ring,
                    os.path.join(ROOT, "bench", "kernel_trace", "bpf_ring.c")], check=True)
    out = guest_run(a.calls, a.rounds, "kernel_trace_cost.sh", [(ring, "/kerf/bpf_ring")])
    cost, delivered = {}, {}
    pat = r"^ROW (\d+) (\S+) ([0-9.]+) ([0-9.]+) ([0-9.]+) ([0-9.]+) (\S+) (\S+)$"
    for m in re.finditer(pat, out, re.M):
        rnd, kind, tbest, _tmean, wbest, _wmean, hits, events = m.groups()
        if int(hits) != a.calls:
            sys.exit(f"round {rnd} {kind}: the loop counted {hits} calls, not {a.calls}")
        cost.setdefault(kind, []).append(float(tbest) - float(wbest))
        if events != "-":
            delivered.setdefault(kind, []).append(int(events) / a.calls)
    print(f"kerf_selftest_jump5, {a.calls:,} calls per run, {a.rounds} rounds; "
          f"ns per event from the fastest block of {BLOCK} calls")
    for note in re.findall(r"^NOTE (.*)$", out, re.M):
        print(f"note: {note}")
    kerf = statistics.median(cost["kerf_trace"]) if "kerf_trace" in cost else None
    print(f"\n{'tracer':<14}{'ns/event':>10}{'min':>9}{'max':>9}{'delivered':>11}{'/ kerf':>9}")
    for k, v in cost.items():
        med = statistics.median(v)
        d = delivered.get(k)
        d = f"{min(d) * 100:.1f}%" if d else ""
        r = f"{med / kerf:.1f}x" if kerf and k != "bare" and kerf > 0 else ""
        print(f"{k:<14}{med:>10.1f}{min(v):>9.1f}{max(v):>9.1f}{d:>11}{r:>9}")
    missing = [k for k in ("kerf_trace", "kprobe_event", "bpf_kprobe", "bpf_fentry") if k not in cost]
    if missing:
        print(f"\nno rows for: {', '.join(missing)}")


if __name__ == "__main__":
    main()
