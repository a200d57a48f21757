#!/bin/bash
# bench/trace_drain.sh [ROUNDS]: the sustained drain of `kerf trace` in a process (issue 11:
# >= 20 M events/s without loss on this 2-core machine). One thread calls f(a, b) at a rate
# held by the clock (bench/trace_cost/loop.c "rate"), kerf records 'f {a=arg0, b=arg1}' (thread
# id, two values and the time stamp an event) into rings of SLOTS slots, and its reader drains
# them into a raw trace. Per offered rate and round: the rate the loop achieved, and kerf's
# own counts (emitted, delivered, lost) from its final table.
# Outputs: raw to /dev/null (the reader alone), raw to a file in /dev/shm (with the kernel's
# copy into page cache), and with KERF_OLD=path/to/kerf an older kerf the same way, round
# by round interleaved, so that the ratios come from one run. SLOTS="16384 262144" (default
# 16384) runs each with every ring size listed, interleaved too. LOOP=steady uses the loop
# that gives up time after a stall instead of making it up in a burst; RATES (default
# "10000000 20000000 30000000") and SECONDS_EACH (default 3) set the offered rates and how
# long each run floods.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
SLOTS=${SLOTS:-16384}
LOOP=${LOOP:-rate}
RATES=${RATES:-10000000 20000000 30000000}
SECONDS_EACH=${SECONDS_EACH:-3}
say() { echo "bench: $*" >&2; }
cargo build --release -p kerf >/dev/null 2>&1 || { say "cargo build failed"; exit 1; }
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kerf
W=$(mktemp -d /tmp/kerf-trace-drain.XXXXXX)
trap 'rm -rf "$W" /dev/shm/kerf-drain.kerf-trace' EXIT
gcc -O2 -pthread -rdynamic -o "$W/loop" bench/trace_cost/loop.c

# run NAME KERF OUT RATE SLOTS: one traced run; prints a result line.
run() {
  local name="$1 $5" k=$2 out=$3 rate=$4 n=$(( $4 * SECONDS_EACH ))
  "$k" trace --format raw -o "$out" --ring-slots "$5" 'f {a=arg0, b=arg1}' -- "$W/loop" "$LOOP" $n $rate >"$W/out" 2>"$W/err" || {
    say "$name failed: $(tail -3 "$W/err")"; return 0; }
  local got line
  got=$(sed -n 's/^\([0-9.]*\) M calls.*/\1/p' "$W/out")
  line=$(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+' "$W/err" | tail -1)
  read -r em fi de lo _ <<<"$line"
  printf '%-22s %8s %10s %12s %12s %12s %8.2f%%\n' "$name" "$((rate / 1000000))" "$got" "$em" "$de" "$lo" \
    "$(echo "100 * $lo / $em" | bc -l)"
}

printf '%-22s %8s %10s %12s %12s %12s %9s\n' reader "offered" "achieved" emitted delivered lost "lost"
printf '%-22s %8s %10s %12s %12s %12s %9s\n' "" "M/s" "M/s" "" "" "" ""
for r in $(seq "$ROUNDS"); do
  for rate in $RATES; do
    for slots in $SLOTS; do
      run "kerf /dev/null" "$K" /dev/null $rate $slots
      run "kerf /dev/shm" "$K" /dev/shm/kerf-drain.kerf-trace $rate $slots
      [ -n "${KERF_OLD:-}" ] && run "old /dev/null" "$KERF_OLD" /dev/null $rate $slots
    done
  done
done
