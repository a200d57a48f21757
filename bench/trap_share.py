#!/usr/bin/env python3
"""Share of trap, jump2 and jump5 splices over every function entry of real programs, from
kerf count's own planner run offline (`kerf analyze --plan '*'`: nothing is attached), and
why each weaker site was refused a jump5, by reason. Runs each kerf binary given side by side
(a build from before a change against the current one).

Issue 9: traps dominate the cost on real programs (sqlite3 45x slower with every libsqlite3
function counted); most came from functions ending in an indirect tail call, refused jump5 as
"an indirect jump with unknown targets".

Usage: bench/trap_share.py [--also LABEL=PATH ...] [--reasons N] [--json]
  (builds kerf in release mode first; --also plans with another kerf binary in the same run)
"""
import argparse
import collections
import json
import os
import platform
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERF = os.path.join(ROOT, "target", "release", "kerf")
LIBS = [
    ("python3.11", "/usr/bin/python3.11", "python3.11"),
    ("libsqlite3", "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0", "libsqlite3-0"),
    ("libc", "/usr/lib/x86_64-linux-gnu/libc.so.6", "libc6"),
]

# A refusal's first clause (why jump5 was refused), as a category without addresses or names.
REASONS = [
    (r"has an indirect jump with unknown targets", "indirect jump with unknown targets"),
    (r"a branch target at \S+ lies inside the displaced bytes", "block start inside the jump"),
    (r"would leave a return address inside", "call inside the jump"),
    (r"run past the function's end", "jump runs past the function's end"),
    (r"end in a jump or return, and the code after it", "code after a jump inside the jump"),
    (r"(\w+) at \S+ cannot be relocated", r"\1 cannot be relocated"),
    (r"overlap another probe's splice", "overlaps another splice"),
    (r"do not decode", "undecodable bytes"),
    (r"never spliced", "code never spliced"),
]


def category(reason):
    if not reason:
        return "-"
    first = reason.split("; ")[0]
    for pat, name in REASONS:
        m = re.search(pat, first)
        if m:
            return m.expand(name)
    return re.sub(r"0x[0-9a-f]+", "X", first)


def plan(kerf, path):
    out = subprocess.run([kerf, "analyze", "--no-cache", "--json", path, "--plan", "*"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"bench: {kerf} analyze {path} --plan failed: {out.stderr.strip()[:400]}")
    v = json.loads(out.stdout)
    if "plan" not in v:
        sys.exit(f"bench: {kerf} has no --plan (build a commit that has it)")
    return v["plan"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--also", action="append", default=[], metavar="LABEL=PATH",
                    help="another kerf binary to plan with side by side (repeatable)")
    ap.add_argument("--reasons", type=int, default=4, help="reasons shown per image and binary")
    ap.add_argument("--json", action="store_true", help="also print every number as JSON")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "kerf"], cwd=ROOT,
                   check=True)
    kerfs = [tuple(a.split("=", 1)) for a in args.also] + [("kerf", KERF)]
    for _, path, package in LIBS:
        if not os.path.exists(path):
            sys.exit(f"bench: {path} missing (install the Debian package {package})")
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                  if ln.startswith("model name")), "unknown CPU")
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs ({model}), {platform.platform()}")
    print("sites: every function entry ('*'), one splice each; shares of all sites\n")
    print(f"{'image':<12}{'kerf':<16}{'sites':>7}{'jump5':>9}{'jump2':>9}{'trap':>9}"
          f"{'refused':>9}")
    report = {}
    for name, path, _ in LIBS:
        for label, exe in kerfs:
            p = plan(exe, path)
            n = p["sites"]
            share = {k: 100.0 * p[k] / n for k in ("jump5", "jump2", "trap", "refused")}
            print(f"{name:<12}{label:<16}{n:>7}{share['jump5']:>8.1f}%{share['jump2']:>8.1f}%"
                  f"{share['trap']:>8.1f}%{share['refused']:>8.1f}%")
            why = collections.Counter(category(pt["reason"]) for pt in p["points"]
                                      if pt["kind"] in ("trap", "refused"))
            for reason, count in why.most_common(args.reasons):
                print(f"{'':<28}trap: {count:>5}  {reason}")
            report.setdefault(name, {})[label] = {
                "sites": n, **{k: p[k] for k in ("jump5", "jump2", "trap", "refused")},
                "trap_reasons": dict(why)}
    if args.json:
        print(json.dumps(report, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
