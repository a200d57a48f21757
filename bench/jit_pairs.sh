#!/usr/bin/env bash
# bench/jit_pairs.sh N PROGRAM: `kerf jit main --plugin none` two ways at once, one per CPU
# (taskset), swapping CPUs each pair, N pairs; prints each pair's times and the ratio A/B.
# A is kerf as built; B is kerf with the environment in $B_ENV (default: frameless calls and
# chained returns off, `KERF_JIT_FRAMED_CALLS=1 KERF_JIT_NO_CHAINS=1`). PROGRAM is sqlite3 or
# python3.11, on bench/jit.sh's workloads (bench/jit/workloads.py). On a shared, noisy
# host, runs one after the other varied by 30 %; side by side, both runs meet the same noise.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:?pairs}; P=${2:?program}
B_ENV=${B_ENV:-"KERF_JIT_FRAMED_CALLS=1 KERF_JIT_NO_CHAINS=1"}
cargo build --release -p kerf >/dev/null 2>&1 || { echo "cargo build failed" >&2; exit 1; }
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kerf
W=$(mktemp -d /tmp/kerf-jit-pairs.XXXXXX)
trap 'rm -rf "$W"' EXIT
export KERF_CACHE_DIR=$W/cache
python3 bench/jit/workloads.py "$W"
case $P in
  python3.11) cmd=(/usr/bin/python3.11 "$W/loop.py") ;;
  sqlite3) cmd=(/usr/bin/sqlite3 :memory: ".read $W/work.sql") ;;
  *) echo "PROGRAM: sqlite3 or python3.11" >&2; exit 2 ;;
esac
run() { # A|B CPU -> seconds
  local envs=(KERF_PAIRS=1)
  [ "$1" = B ] && read -ra envs <<< "$B_ENV"
  local s e
  s=$(date +%s.%N)
  env "${envs[@]}" taskset -c "$2" "$K" jit main --plugin none -o /dev/null -- "${cmd[@]}" >/dev/null 2>&1
  e=$(date +%s.%N)
  echo "$e - $s" | bc
}
run A 0 >/dev/null; run B 1 >/dev/null  # the analysis cache and the hint of what ran
echo "# bench/jit_pairs.sh $N $P, $(date -u +%FT%TZ), B: $B_ENV"
for i in $(seq "$N"); do
  if (( i % 2 )); then ca=0; cb=1; else ca=1; cb=0; fi
  run A $ca > "$W/a" & run B $cb > "$W/b"; wait
  a=$(cat "$W/a"); b=$(cat "$W/b")
  echo "$P A $a B $b A/B $(echo "$a / $b" | bc -l | cut -c1-6)"
done
