#!/bin/bash
# bench/virtual_timer.sh [ROUNDS]: what virtual time costs (issue 12's "Performance"), in one
# run, rounds interleaved:
#   per call, a timer pair at probe_me's entry and exit (bench/hitloop.c, probe_me called N
#   times in a loop that times itself): kerf time (wall clock), kerf time --virtual (wall and
#   off-CPU clock), and bpftrace's uprobe/uretprobe pair keeping the same per-thread start
#   time and summing intervals (wall; bpftrace has no virtual clock of a thread);
#   per context switch, anywhere on the machine: the off-CPU clock's BPF program on
#   sched_switch runs at every switch while kerf time --virtual is attached to any process;
#   `perf bench sched pipe` (two processes passing a token through pipes) with and without.
# Per call = the loop's ns per iteration with the tool minus without. Medians of ROUNDS
# (default 5). Root. Installs bpftrace and linux-perf (apt). With KERF_BEFORE=BINARY, another
# kerf (an earlier commit's build) times the same pair in the same rounds, to compare.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
say() { echo "bench: $*" >&2; }
need_deb() { dpkg -s "$1" >/dev/null 2>&1 || { say "installing $1"; apt-get install -y -q "$1" >/dev/null; }; }
for p in bpftrace linux-perf; do need_deb "$p"; done
cargo build --release -p kerf >/dev/null 2>&1 || { say "cargo build failed"; exit 1; }
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kerf
W=$(mktemp -d /tmp/kerf-virtual-timer.XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$W"' EXIT
gcc -O2 -o "$W/hitloop" bench/hitloop.c

N=20000000      # calls for kerf
NB=200000       # for bpftrace (microseconds a call)
ns() { sed -n 's/^\([0-9.]*\) ns\/iter.*/\1/p' | head -1; }
base()    { "$W/hitloop" $N now | ns; }
wall()    { "$K" time probe_me -- "$W/hitloop" $N now 2>"$W/k.err" | ns; }
virt()    { "$K" time --virtual probe_me -- "$W/hitloop" $N now 2>"$W/k.err" | ns; }
bt_pair() {
  bpftrace -q -e "uprobe:$W/hitloop:probe_me { @s[tid] = nsecs; }
    uretprobe:$W/hitloop:probe_me /@s[tid]/ { @t = sum(nsecs - @s[tid]); @n = count(); delete(@s[tid]); }" \
    -c "$W/hitloop $NB now" 2>/dev/null | ns; }
base_b()  { "$W/hitloop" $NB now | ns; }
BEFORE=${KERF_BEFORE:-}
before()  { if [ -n "$BEFORE" ]; then "$BEFORE" time probe_me -- "$W/hitloop" $N now 2>"$W/b.err" | ns; else echo 0; fi; }

# Context switches: perf bench sched pipe, with a kerf time --virtual attached to an idle
# process (hitloop waiting for its signal; the BPF program sees every switch of the machine)
# and without.
LOOPS=200000
pipe_us() { perf bench sched pipe -l $LOOPS 2>/dev/null | sed -n 's/^ *\([0-9.]*\) usecs\/op.*/\1/p'; }
with_clock() {
  "$W/hitloop" 1 >/dev/null & local s=$!
  sleep 0.3  # past its loader: probe_me is in the main program anyway
  "$K" time --virtual --duration 600 -p $s probe_me 2>"$W/kv.err" >/dev/null & local k=$!
  for _ in $(seq 100); do grep -q "points spliced" "$W/kv.err" && break; sleep 0.1; done
  grep -q "points spliced" "$W/kv.err" || { say "kerf did not attach: $(cat "$W/kv.err")"; exit 1; }
  local v; v=$(pipe_us)
  kill -INT $k; wait $k 2>/dev/null || true; kill $s; wait $s 2>/dev/null || true
  echo "$v"; }

declare -A R
for r in $(seq "$ROUNDS"); do
  say "round $r of $ROUNDS"
  for m in base wall before virt base_b bt_pair pipe_us with_clock; do R[$m]+="$($m) "; done
done
med() { printf '%s\n' $1 | sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
b=$(med "${R[base]}"); bb=$(med "${R[base_b]}")
w=$(echo "$(med "${R[wall]}") - $b" | bc -l); v=$(echo "$(med "${R[virt]}") - $b" | bc -l)
t=$(echo "$(med "${R[bt_pair]}") - $bb" | bc -l)
echo "machine: $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), kernel $(uname -r)"
echo "medians of $ROUNDS rounds; per call = ns/iteration with the tool minus without"
printf '%-46s %12s %10s\n' "timer pair at probe_me's entry and exit" "ns/call" "vs wall"
printf '%-46s %12.2f %10.2fx\n' "kerf time (wall clock)" "$w" 1
printf '%-46s %12.2f %10.2fx\n' "kerf time --virtual (wall + off-CPU clock)" "$v" "$(echo "$v / $w" | bc -l)"
printf '%-46s %12.2f %10.2fx\n' "bpftrace uprobe + uretprobe pair (wall)" "$t" "$(echo "$t / $w" | bc -l)"
echo "bpftrace / kerf --virtual: $(printf '%.0f' "$(echo "$t / $v" | bc -l)")x"
if [ -n "$BEFORE" ]; then
  o=$(echo "$(med "${R[before]}") - $b" | bc -l)
  printf '%-46s %12.2f %10.2fx\n' "KERF_BEFORE's kerf time (wall clock)" "$o" "$(echo "$o / $w" | bc -l)"
fi
p0=$(med "${R[pipe_us]}"); p1=$(med "${R[with_clock]}")
echo "perf bench sched pipe -l $LOOPS: $p0 us/op without the off-CPU clock, $p1 with ($(printf '%+.1f' "$(echo "($p1 / $p0 - 1) * 100" | bc -l)") %)"
echo "raw: $(for m in base wall before virt base_b bt_pair pipe_us with_clock; do printf '%s=[%s] ' $m "${R[$m]% }"; done)"
