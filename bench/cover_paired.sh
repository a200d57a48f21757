#!/bin/bash
# bench/cover_paired.sh [SECONDS] [ROUNDS]: coverage's cost once it saturates, measured in
# pairs that run at the same time (issue 13's "back within 2 % of uninstrumented"). On this
# shared 2-CPU machine two runs of the program alone one after the other differ by up to 15 %
# (bench/cover.sh), which hides a 2 % cost; two copies running at the same moment, each on
# its own CPU, meet the same neighbours. Each round runs, for SECONDS seconds (default 20):
#   - A/A: the program alone on CPU 0 and on CPU 1 together (the method's own noise);
#   - A/B: `kerf cover` of every block of the program, libsqlite3 and libc on one CPU (kerf
#     and the program it launches both pinned there: kerf's flag reading counts against the
#     program), the program alone on the other, started when kerf says its probes are in.
# The CPUs swap every round. The program is bench/cover/load.c (rounds of an in-memory
# SQLite workload, printing its rounds every 100 ms from its own start). Prints, per second,
# the median over rounds of covered/alone (and of CPU 0/CPU 1 for A/A), the mean ratio from
# second 5 on, and the first second from which covered/alone stays at 0.98 or above.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-20}
ROUNDS=${2:-4}
say() { echo "bench: $*" >&2; }
[ "$(nproc)" -ge 2 ] || { say "needs 2 CPUs"; exit 1; }
cargo build --release -p kerf >/dev/null 2>&1 || { say "cargo build failed"; exit 1; }
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kerf
W=$(mktemp -d /tmp/kerf-cover-paired.XXXXXX)
trap 'rm -rf "$W"' EXIT
gcc -O2 -rdynamic -o "$W/load" bench/cover/load.c -l:libsqlite3.so.0
SCOPE="load libsqlite3 libc"
for r in $(seq "$ROUNDS"); do
  a=$(( r % 2 )); b=$(( 1 - a ))
  say "round $r/$ROUNDS: A/A"
  taskset -c 0 "$W/load" "$SECS" > "$W/aa0.$r.txt" 2>/dev/null &
  p0=$!
  taskset -c 1 "$W/load" "$SECS" > "$W/aa1.$r.txt" 2>/dev/null
  wait $p0
  say "round $r/$ROUNDS: kerf cover on CPU $a, alone on CPU $b"
  : > "$W/cover.$r.err"
  taskset -c "$a" "$K" cover --json -o "$W/cover.$r.json" $SCOPE -- "$W/load" "$SECS" \
    > "$W/cover.$r.txt" 2> "$W/cover.$r.err" &
  pk=$!
  # The program under kerf starts when its probes are in: start the one alone then.
  for _ in $(seq 600); do
    grep -q 'spliced in process' "$W/cover.$r.err" && break
    kill -0 $pk 2>/dev/null || break
    sleep 0.05
  done
  grep -q 'spliced in process' "$W/cover.$r.err" || { say "kerf never went live:"; cat "$W/cover.$r.err" >&2; exit 1; }
  taskset -c "$b" "$W/load" "$SECS" > "$W/alone.$r.txt" 2>/dev/null
  wait $pk || { say "kerf cover failed:"; cat "$W/cover.$r.err" >&2; exit 1; }
done
echo "# bench/cover_paired.sh $SECS $ROUNDS, $(date -u '+%F %H:%M') UTC, $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
echo "# kerf cover: $(grep -o '[0-9]* points spliced in process [0-9]* ([^)]*) in [0-9.]* ms' "$W/cover.1.err" | head -1)"
python3 - "$W" "$SECS" "$ROUNDS" <<'PY'
import json, statistics, sys
w, secs, rounds = sys.argv[1], int(float(sys.argv[2])), int(sys.argv[3])
sys.path.insert(0, "bench/cover")
from rates import per_second as _ps
def per_second(path):
    return _ps(path, secs)
def ratios(num, den):
    rs = []
    for r in range(1, rounds + 1):
        a, b = per_second(f"{w}/{num}.{r}.txt"), per_second(f"{w}/{den}.{r}.txt")
        rs.append([x / y for x, y in zip(a, b) if y > 0])
    n = min(len(x) for x in rs)
    return [statistics.median(x[i] for x in rs) for i in range(n)], rs
aa, _ = ratios("aa0", "aa1")
ab, each = ratios("cover", "alone")
alone = [sum(per_second(f"{w}/alone.{r}.txt")[4:]) / max(secs - 4, 1) for r in range(1, rounds + 1)]
print(f"# the program alone, paired with kerf cover: {statistics.mean(alone):.0f} rounds/s from second 5 on")
marks = sorted({1, 2, 3, 5, min(10, secs), secs})
print(f"{'pair':<34}" + " ".join(f"{s:>5}s" for s in marks) + "  from 5s  rounds from 5s")
def line(name, med, rs):
    at = lambda s: f"{med[s-1]:6.3f}" if s <= len(med) else "     -"
    tail = statistics.mean(med[4:]) if len(med) > 4 else float("nan")
    per = " ".join(f"{statistics.mean(x[4:]):.3f}" for x in rs)
    print(f"{name:<34}" + " ".join(at(s) for s in marks) + f"  {tail:.3f}   {per}")
    return tail
_, aas = ratios("aa0", "aa1")
line("A/A: alone CPU0 / alone CPU1", aa, aas)
line("kerf cover / alone, same seconds", ab, each)
within = next((i + 1 for i in range(len(ab)) if all(x >= 0.98 for x in ab[i:])), None)
print(f"# covered/alone stays at 0.98 or above from second: {within if within else 'never'}")
c = json.load(open(f"{w}/cover.1.json"))
print(f"# kerf cover (round 1): {c['coverage']['covered']} of {c['coverage']['measurable']} measurable blocks "
      f"covered, {c['retired']} probes taken out, {c['probes_left']} left in at the end")
PY
