#!/bin/bash
# bench/jit_start.sh [ROUNDS]: kerf jit's start and end on python3.11 and sqlite3, with the
# build KERF_OLD=PATH beside this tree's build, alternated: `kerf jit main --plugin none --
# python3.11 -c pass` and `-- sqlite3 :memory: "select 1;"` under `perf stat -e task-clock`,
# each preceded by two warm-up runs of each build (the analysis cache and the hint of what
# ran filled, checks kept). Prints per run: kerf's CPU time (ms), the "live ... after kerf
# started" seconds, and the whole run's wall time. Needs perf (apt: linux-perf).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
NEW=${KERF:-target/release/kerf}
OLD=${KERF_OLD:?KERF_OLD=PATH of the build to compare with}
command -v perf >/dev/null || { echo "bench: installing linux-perf" >&2; apt-get install -y -q linux-perf >/dev/null; }
P=/usr/bin/python3.11
run() { # NAME KERF CMD...
  local name=$1 k=$2; shift 2
  local s e err
  err=$(mktemp)
  s=$(date +%s.%N)
  perf stat -x, -e task-clock "$k" jit main --plugin none -- "$@" 2>"$err" >/dev/null
  e=$(date +%s.%N)
  echo "$name live $(grep -o 'live [0-9.]* s' "$err" | cut -d' ' -f2) cpu_ms $(grep task-clock "$err" | cut -d, -f1) wall $(echo "$e - $s" | bc)"
  rm -f "$err"
}
for k in "$OLD" "$NEW" "$OLD" "$NEW"; do
  "$k" jit main --plugin none -- $P -c pass >/dev/null 2>&1
  "$k" jit main --plugin none -- /usr/bin/sqlite3 :memory: "select 1;" >/dev/null 2>&1
done
echo "# bench/jit_start.sh $ROUNDS, $(date -u +%FT%TZ), $(nproc) CPUs, old $OLD, new $NEW"
for r in $(seq "$ROUNDS"); do
  for k in "$OLD" "$NEW"; do
    n=$([ "$k" = "$OLD" ] && echo old || echo new)
    run "python3.11 $n" "$k" $P -c pass
    run "sqlite3 $n" "$k" /usr/bin/sqlite3 :memory: "select 1;"
  done
done
