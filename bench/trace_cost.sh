#!/bin/bash
# bench/trace_cost.sh [ROUNDS]: the cost of one traced event in a process, kerf against its
# peers, interleaved in one run (issue 11's "Performance"): a C loop calls f(a, b) and each
# tool records an event at f's entry with both arguments and a timestamp:
#   kerf trace 'f {a=arg0, b=arg1}' (raw output; losses reported), kerf count f (for scale),
#   an LTTng-UST tracepoint compiled into the loop (session on, and no session), bpftrace
#   uprobes (count only, and printf of the fields), Frida's Interceptor (events in a JS array
#   sent in batches).
# Per event = the loop's ns per call with the tool minus without (the loop times itself, so
# start-up and attach are not counted). Medians of ROUNDS rounds (default 5). Then: the
# highest rate kerf drains from two threads without loss, and kerf's own CPU at ~100 k and
# ~1 M events/s. Installs lttng-tools, liblttng-ust-dev, bpftrace (apt) and frida (pip).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-5}
say() { echo "bench: $*" >&2; }

need_deb() { dpkg -s "$1" >/dev/null 2>&1 || { say "installing $1"; apt-get install -y -q "$1" >/dev/null; }; }
for p in lttng-tools liblttng-ust-dev bpftrace; do need_deb "$p"; done
python3 -c "import frida" 2>/dev/null || { say "installing frida 16.5.9 (pip)"; pip install -q frida==16.5.9; }
cargo build --release -p kerf >/dev/null 2>&1 || { say "cargo build failed"; exit 1; }
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kerf
W=$(mktemp -d /tmp/kerf-trace-cost.XXXXXX)
trap 'lttng destroy -a >/dev/null 2>&1 || true; rm -rf "$W"' EXIT
S=bench/trace_cost
gcc -O2 -pthread -rdynamic -o "$W/loop" $S/loop.c
gcc -O2 -pthread -rdynamic -DLTTNG -I$S -o "$W/loop_lttng" $S/loop.c $S/kerf_tp.c -llttng-ust -ldl
pgrep -x lttng-sessiond >/dev/null || lttng-sessiond --daemonize

# Calls in batches of 4000 with 5 ms between them, so that kerf's rings (16384 slots, drained
# every 2 ms) never fill: a flood would time the full ring's cheaper drop path instead.
N=4000000       # calls for the cheap tools
NS=400000       # for bpftrace and Frida (microseconds an event)
P="paced"; B=4000; G=5000
ns() { sed -n 's/^\([0-9.]*\) ns\/call.*/\1/p' | head -1; }

base()     { "$W/loop" $P $N $B $G | ns; }
kerf_tr()  { "$K" trace -o "$W/k.kerf-trace" --ring-slots 16384 'f {a=arg0, b=arg1}' -- "$W/loop" $P $N $B $G 2>"$W/k.err" | ns; }
kerf_cnt() { "$K" count f -- "$W/loop" $P $N $B $G 2>/dev/null | ns; }
lt_off()   { "$W/loop_lttng" $P $N $B $G | ns; }
lt_on()    {
  lttng create kb --output="$W/lt" >/dev/null; lttng enable-event -u 'kerf_bench:f' >/dev/null
  lttng start >/dev/null; local v; v=$("$W/loop_lttng" $P $N $B $G | ns)
  lttng stop >/dev/null; lttng destroy kb >/dev/null; rm -rf "$W/lt"; echo "$v"; }
bt_cnt()   { bpftrace -q -e "uprobe:$W/loop:f { @n = count(); }" -c "$W/loop $P $NS $B $G" 2>/dev/null | ns; }
bt_pr()    { bpftrace -q -o "$W/bt.txt" -e "uprobe:$W/loop:f { printf(\"%lu %ld %ld\\n\", nsecs, arg0, arg1); }" -c "$W/loop $P $NS $B $G" 2>/dev/null | ns; }
frida_tr() { python3 $S/frida_trace.py "$W/loop" $P $NS $B $G 2>/dev/null | ns; }

TOOLS="base kerf_tr kerf_cnt lt_off lt_on bt_cnt bt_pr frida_tr"
declare -A R
for r in $(seq "$ROUNDS"); do
  say "round $r/$ROUNDS"
  for t in $TOOLS; do R[$t]="${R[$t]:-} $($t)"; done
  grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+' "$W/k.err" | tail -1 >> "$W/kerf_counts"
done
med() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
declare -A M
for t in $TOOLS; do M[$t]=$(echo "${R[$t]}" | med); done
echo "# bench/trace_cost.sh, $(date -u +%F), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r), $ROUNDS rounds (medians)"
echo "# CPU read in kerf's records: $(grep -qw rdpid /proc/cpuinfo && echo 'rdtsc + rdpid' || echo rdtscp)"
printf '%-34s %12s %14s %16s\n' "tool" "ns/call" "ns per event" "kerf is cheaper"
b=${M[base]}; k=$(echo "${M[kerf_tr]} - $b" | bc -l)
for t in $TOOLS; do
  e=$(echo "${M[$t]} - $b" | bc -l)
  x=$( [ "$t" = base ] && echo "" || echo "$(echo "$e / $k" | bc -l | xargs printf '%.1f')x")
  name=$(case $t in base) echo "uninstrumented";; kerf_tr) echo "kerf trace (raw file)";;
    kerf_cnt) echo "kerf count (counter only)";; lt_off) echo "LTTng-UST, no session";;
    lt_on) echo "LTTng-UST, session on";; bt_cnt) echo "bpftrace uprobe, count()";;
    bt_pr) echo "bpftrace uprobe, printf fields";; frida_tr) echo "Frida Interceptor";; esac)
  printf '%-34s %12.2f %14.2f %16s\n' "$name" "${M[$t]}" "$e" "$x"
done
echo "# kerf's own counters per round (emitted filtered delivered lost stream):"
sed 's/^/#   /' "$W/kerf_counts"

# Sustained drain: two threads, the biggest rings; events/s delivered and lost.
say "sustained drain"
"$K" trace -o "$W/d.kerf-trace" --ring-slots 16384 'f {a=arg0, b=arg1}' -- "$W/loop" loop 50000000 2 >"$W/d.out" 2>"$W/d.err"
dn=$(ns < "$W/d.out")
line=$(grep -E '^ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+' "$W/d.err" | tail -1)
read -r em fi de lo _ <<<"$line"
echo "# sustained, 2 threads x 50 M calls: $(echo "2 * 1000 / $dn" | bc -l | xargs printf '%.1f') M events/s offered; emitted $em, delivered $de, lost $lo"

# kerf's own CPU (logdev measured its tracer at 29.75 us an event, ~3 % CPU).
for rate in 100000 1000000; do
  say "kerf's CPU at $rate events/s"
  n=$((rate * 4))
  /usr/bin/time -f "%U %S %e" -o "$W/t.txt" "$K" trace -o "$W/c.kerf-trace" 'f {a=arg0, b=arg1}' -- "$W/loop" burst $n $rate >/dev/null 2>&1
  read -r u s e < "$W/t.txt"
  echo "# kerf at ~$rate events/s for ${e}s: user ${u}s + system ${s}s = $(echo "100 * ($u + $s) / $e" | bc -l | xargs printf '%.1f') % of one CPU (includes analysis and splicing)"
done
