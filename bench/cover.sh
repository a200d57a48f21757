#!/bin/bash
# bench/cover.sh [SECONDS] [ROUNDS]: coverage's cost over time (issue 13's "Performance"): a CPU-bound
# program (bench/cover/load.c: rounds of an in-memory SQLite workload through Debian's
# libsqlite3, printing its rounds every 100 ms) runs SECONDS seconds (default 20)
#   - alone;
#   - under `kerf cover` of every block of the program, libsqlite3 and libc (probes taken out
#     as their blocks run);
#   - under `kerf count` of the same blocks (`@blocks`: probes never taken out), the bound
#     self-removal beats;
#   - under Frida's Stalker with block coverage (compile events), followed from main.
# kerf launches the command held at its entry until the probes are in, so every run's clock
# starts at the program's first instruction; kerf's time to go live is given apart.
# The four runs go in turn, ROUNDS times (default 3); per second, the median over rounds.
# Prints per run its throughput per second relative to the run alone (its mean from second 3
# on), the mean of the last 5 seconds, and the first second from which it stays within 2 %.
# Installs frida (pip) if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-20}
ROUNDS=${2:-3}
say() { echo "bench: $*" >&2; }
python3 -c "import frida" 2>/dev/null || { say "installing frida 16.5.9 (pip)"; pip install -q frida==16.5.9; }
cargo build --release -p kerf >/dev/null 2>&1 || { say "cargo build failed"; exit 1; }
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kerf
W=$(mktemp -d /tmp/kerf-cover-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
gcc -O2 -rdynamic -o "$W/load" bench/cover/load.c -l:libsqlite3.so.0
SCOPE="load libsqlite3 libc"
run_native() { "$W/load" "$SECS" 2>/dev/null; }
run_cover()  { "$K" cover --json -o "$W/cover.json" $SCOPE -- "$W/load" "$SECS" 2>"$W/cover.err"; }
run_count()  { "$K" count --json -o "$W/count.json" load:'*@blocks' libsqlite3:'*@blocks' libc:'*@blocks' -- "$W/load" "$SECS" 2>"$W/count.err"; }
run_frida()  { python3 bench/cover/frida_cover.py "$W/load" "$SECS" 2>"$W/frida.err"; }
for r in $(seq "$ROUNDS"); do
  for t in native cover count frida; do
    say "round $r/$ROUNDS: $t"
    run_$t > "$W/$t.$r.txt"
  done
done
live() { grep -o 'spliced in process [0-9]* ([^)]*) in [0-9.]* ms' "$1" | sed 's/.* in \([0-9.]*\) ms/\1/'; }
echo "# bench/cover.sh $SECS $ROUNDS, $(date -u +%F), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
echo "# kerf cover: $(grep -o '[0-9]* points spliced' "$W/cover.err" | head -1) in $(live "$W/cover.err") ms before the program's first instruction; kerf count: $(grep -o '[0-9]* points spliced' "$W/count.err" | head -1) in $(live "$W/count.err") ms; Frida: $(tail -1 "$W/frida.err")"
python3 - "$W" "$SECS" "$ROUNDS" <<'PY'
import json, statistics, sys
w, secs, rounds = sys.argv[1], int(float(sys.argv[2])), int(sys.argv[3])
sys.path.insert(0, "bench/cover")
from rates import per_second as _ps
def one(path):
    return _ps(path, secs)
def rates(name):
    runs = [one(f"{w}/{name}.{r}.txt") for r in range(1, rounds + 1)]
    n = min(len(x) for x in runs)
    return [statistics.median(x[i] for x in runs) for i in range(n)]
base = rates("native")
ref = sum(base[2:]) / max(len(base[2:]), 1)
print(f"# the program alone: {ref:.0f} rounds/s (mean from second 3 on); below, each run's rounds in")
print(f"# each second over the program alone's in the same second (medians of {rounds} rounds), the")
print(f"# same over the last 5 seconds, and the first second from which it stays at 0.98 or above")
marks = sorted({1, 2, 3, 5, min(10, secs), secs})
print(f"{'run':<28} " + " ".join(f"{s:>5}s" for s in marks) + "  last5   within 2 % from")
labels = {"native": "alone", "cover": "kerf cover (self-removing)", "count": "kerf count @blocks (kept)",
          "frida": "Frida Stalker, block cov."}
for name in ("native", "cover", "count", "frida"):
    r = rates(name)
    rel = [x / max(b, 1e-9) for x, b in zip(r, base)]
    at = lambda s: f"{rel[s-1]:6.3f}" if s <= len(rel) else "     -"
    last5 = sum(r[-5:]) / max(sum(base[len(r) - 5:len(r)][-5:]), 1e-9)
    within = next((i + 1 for i in range(len(rel)) if all(x >= 0.98 for x in rel[i:])), None)
    print(f"{labels[name]:<28} " + " ".join(at(s) for s in marks) +
          f"  {last5:.3f}   " + (f"{within} s" if within else "never"))
c = json.load(open(f"{w}/cover.json"))
print(f"# kerf cover: {c['coverage']['covered']} of {c['coverage']['measurable']} measurable blocks covered "
      f"({c['coverage']['blocks'] - c['coverage']['measurable']} not measurable), {c['retired']} probes taken out, "
      f"{c['probes_left']} left in at the end")
PY
