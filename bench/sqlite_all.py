#!/usr/bin/env python3
"""Debian's sqlite3 running a fixed SQL workload with every function of libsqlite3 counted
(`kerf count 'libsqlite3.so.0:*' -- sqlite3 :memory:`), against its plain run time, and kerf's
counts of a sample of functions against kernel uprobes (`perf probe` + `perf stat`) on a
smaller run of the same workload.

Target (DESIGN.md section 6, issue 9): sqlite3 with every libsqlite3 function counted within 3x
of its plain time (45x before issue 9), counts equal to perf's.

Time is the workload's own: the sum of sqlite3's `.timer` lines (statement execution), so
kerf's analysis and splicing before the first statement are not in it; the whole command's
wall time is printed beside it. Runs are interleaved; medians. Address randomisation is off
(`setarch -R`) so that every run makes the same calls. kerf's globs leave out the PLT stubs
(`name@plt`), which repeat their function's count; a second kerf row adds them
(`libsqlite3.so.0:*@plt`), which doubles the probes every call made through the PLT meets.

Usage: bench/sqlite_all.py [--runs N] [--rows N] [--check-rows N] [--no-perf]
  (root: ptrace and uprobes; Debian packages sqlite3, libsqlite3-0, linux-perf)
"""
import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KERF = os.path.join(ROOT, "target", "release", "kerf")
LIB = "/usr/lib/x86_64-linux-gnu/libsqlite3.so.0"
SQLITE = "/usr/bin/sqlite3"
# Exported functions compared with uprobes: among them those that took a trap before issue 9
# (indirect tail calls, jump tables bounded on a byte) and a few of the busiest.
SAMPLE = [
    "sqlite3_free", "sqlite3Malloc", "sqlite3MallocSize", "sqlite3DbMallocSize",
    "sqlite3Realloc", "sqlite3VdbeRecordCompareWithSkip", "sqlite3_str_vappendf",
    "sqlite3PcacheTruncate", "sqlite3GetToken", "sqlite3Parser", "sqlite3_step",
    "sqlite3BtreeInsert", "sqlite3VdbeExec", "sqlite3_mutex_enter",
]

WORKLOAD = """.timer on
CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < {rows})
INSERT INTO t SELECT i, printf('row%d', i*7 % 1000), i*0.5 FROM n;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(c) FROM t WHERE b LIKE 'row1%';
SELECT b, count(*) FROM t GROUP BY b ORDER BY 2 DESC, 1 LIMIT 3;
UPDATE t SET c = c + 1 WHERE a % 3 = 0;
SELECT sum(c), max(b) FROM t;
DELETE FROM t WHERE a % 5 = 0;
SELECT count(*) FROM t;
"""


def run(cmd, stdin_path, env=None):
    """Wall seconds, stdout and stderr of `cmd` with its stdin from a file."""
    with open(stdin_path) as inp:
        t = time.perf_counter()
        p = subprocess.run(cmd, stdin=inp, capture_output=True, text=True, env=env)
        dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(cmd[:6])} ... failed ({p.returncode}): {p.stderr[-600:]}")
    return dt, p.stdout, p.stderr


def split(out):
    """sqlite3's output without its timer lines, and the sum of their real times."""
    lines = out.splitlines()
    times = [float(m.group(1)) for ln in lines if (m := re.match(r"Run Time: real (\S+)", ln))]
    text = [ln for ln in lines if not ln.startswith("Run Time:") and not ln.startswith("{")]
    return "\n".join(text), sum(times)


def kerf_json(out, err):
    """kerf's --json summary: the last JSON line of its stdout, or of its stderr."""
    for stream in (out, err):
        for ln in reversed(stream.splitlines()):
            if ln.startswith("{"):
                return json.loads(ln)
    sys.exit("bench: no JSON summary from kerf")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--check-rows", type=int, default=20_000,
                    help="rows of the run compared with uprobes (each uprobe hit costs ~10 us)")
    ap.add_argument("--no-perf", action="store_true", help="skip the uprobe comparison")
    args = ap.parse_args()
    subprocess.run(["cargo", "build", "--release", "--quiet", "--bin", "kerf"], cwd=ROOT,
                   check=True)
    for path, package in ((LIB, "libsqlite3-0"), (SQLITE, "sqlite3")):
        if not os.path.exists(path):
            sys.exit(f"bench: {path} missing (install the Debian package {package})")
    tmp = tempfile.mkdtemp(prefix="kerf-bench-sqlite-")
    env = dict(os.environ, KERF_CACHE_DIR=os.path.join(tmp, "cache"))
    sql = os.path.join(tmp, "work.sql")
    with open(sql, "w") as f:
        f.write(WORKLOAD.format(rows=args.rows))
    model = next((ln.split(":", 1)[1].strip() for ln in open("/proc/cpuinfo")
                  if ln.startswith("model name")), "unknown CPU")
    print(f"machine: {platform.node()} {os.cpu_count()} CPUs ({model}), {platform.platform()}")
    sqlite_version = subprocess.run([SQLITE, "--version"], capture_output=True,
                                    text=True).stdout.split()[0]
    print(f"sqlite3 {sqlite_version}, {args.rows} rows, {args.runs} runs interleaved, medians")

    # Every function entry of the library as a user asks for it, and with the PLT stubs too.
    setarch = ["setarch", platform.machine(), "-R"]
    plain_cmd = setarch + [SQLITE, ":memory:"]
    kerf_all = setarch + [KERF, "count", "--json", "libsqlite3.so.0:*", "--"] + plain_cmd[3:]
    kerf_plt = (setarch + [KERF, "count", "--json", "libsqlite3.so.0:*", "libsqlite3.so.0:*@plt",
                           "--"] + plain_cmd[3:])

    rows = {"plain": [], "kerf '*'": [], "kerf + '*@plt'": []}
    walls = {k: [] for k in rows}
    expected = None
    summary = None
    for _ in range(args.runs):
        for label, cmd in (("plain", plain_cmd), ("kerf '*'", kerf_all),
                           ("kerf + '*@plt'", kerf_plt)):
            dt, out, err = run(cmd, sql, env)
            text, work = split(out)
            if expected is None:
                expected = text
            elif text != expected:
                sys.exit(f"bench: {label}: sqlite3's output differs from the plain run's")
            rows[label].append(work)
            walls[label].append(dt)
            if label == "kerf '*'":
                summary = kerf_json(out, err)
    base = statistics.median(rows["plain"])
    print(f"\n{'run':<16}{'workload s':>11}{'ratio':>8}{'wall s':>9}")
    for label in rows:
        w = statistics.median(rows[label])
        print(f"{label:<16}{w:>11.3f}{w / base:>7.2f}x{statistics.median(walls[label]):>9.2f}")
    kinds, hits = {}, {}
    for p in summary["points"]:
        kinds[p["kind"]] = kinds.get(p["kind"], 0) + 1
        hits[p["kind"]] = hits.get(p["kind"], 0) + p["count"]
    print(f"\nkerf '*': {len(summary['points'])} points {kinds}; hits {hits}")
    weak = sorted((p for p in summary["points"] if p["kind"] != "jump5"), key=lambda p: -p["count"])
    for p in weak[:5]:
        print(f"  {p['count']:>10}  {p['kind']:<6}{p['point']}: {(p.get('reason') or '')[:90]}")
    ratio = statistics.median(rows["kerf '*'"]) / base
    print(f"target: within 3x of the plain run: {'met' if ratio <= 3 else 'MISSED'} ({ratio:.2f}x)")

    if args.no_perf:
        return
    if shutil.which("perf") is None:
        sys.exit("bench: perf missing (install the Debian package linux-perf)")
    small = os.path.join(tmp, "small.sql")
    with open(small, "w") as f:
        f.write(WORKLOAD.format(rows=args.check_rows))
    # With the stubs: perf puts some of its events on a function's PLT stub as well.
    _, out, err = run(kerf_plt, small, env)
    counts = {p["point"]: p["count"] for p in kerf_json(out, err)["points"]}
    kinds_of = {p["point"]: p["kind"] for p in kerf_json(out, err)["points"]}
    subprocess.run(["perf", "probe", "-q", "-d", "probe_libsqlite3:*"], capture_output=True)
    for name in SAMPLE:
        p = subprocess.run(["perf", "probe", "-q", "-x", LIB, "-a", name], capture_output=True,
                           text=True)
        if p.returncode != 0:
            sys.exit(f"bench: perf probe {name}: {p.stderr.strip()}")
    # Where perf put each event: on the function, and for some also on its PLT stub
    # (`name@plt`, which libsqlite3 calls its own exported functions through).
    listed = subprocess.run(["perf", "probe", "-l"], capture_output=True, text=True).stdout
    on_plt = set(re.findall(r"probe_libsqlite3:(\S+) \(on \S+@plt ", listed))
    try:
        _, _, err = run(["perf", "stat", "-x,", "-e", "probe_libsqlite3:*", "--"] + plain_cmd,
                        small, env)
    finally:
        subprocess.run(["perf", "probe", "-q", "-d", "probe_libsqlite3:*"], capture_output=True)
    # An event perf also put on the PLT stub counts both: compared with kerf's two counts.
    print(f"\nkerf against uprobes, {args.check_rows} rows (@plt: kerf's count of the stub, "
          "added where perf also probed it)")
    print(f"{'function':<36}{'kind':<7}{'kerf':>10}{'@plt':>10}{'uprobe':>10}")
    same = 0
    for ln in err.splitlines():
        f = ln.split(",")
        if len(f) < 3 or not f[2].startswith("probe_libsqlite3:"):
            continue
        name = f[2].split(":", 1)[1]
        n = int(f[0])
        k = counts.get(name, -1)
        plt = counts.get(name + "@plt", 0) if name in on_plt else 0
        mark = "" if k + plt == n else "  DIFFERS"
        same += k + plt == n
        print(f"{name:<36}{kinds_of.get(name, '-'):<7}{k:>10}{plt:>10}{n:>10}{mark}")
    print(f"{same} of {len(SAMPLE)} equal")
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
