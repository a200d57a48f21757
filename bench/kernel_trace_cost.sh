#!/bin/sh
# The kernel tracers' table, run inside the stock kernel guest by bench/kernel_trace.py: what
# one traced event costs the kernel when each tracer records the same fields at the entry of
# the same function: the time, the first argument, and the u64 it points to (read so that a
# bad pointer cannot crash the kernel). kerf.ko's self-test loop (/dev/kerf_selftest, driven
# by /kerf/kerf_selftest) calls kerf_selftest_jump5(&counter) N times in a tight loop; each
# run of it sits between two runs of kerf_selftest_twin, the same code at another address
# that nothing traces, and a tracer's cost per event is the difference (the method of
# bench/kernel_probe_cost.sh, whose header says why: qemu TCG's speed drifts between seconds).
# Every tracer has a reader draining its buffer while the loop runs, and every run's events
# are counted: a tracer that dropped events did less work, and its row says how many it kept.
# Kinds:
#   kerf_trace   kerf trace --kernel 'kerf:kerf_selftest_jump5 {arg0, u64(arg0)}', raw file
#   kprobe_event a kprobe event (ftrace) with a=%di b=+0(%di):u64, trace_pipe read by cat
#   bpf_kprobe   a BPF kprobe program writing the fields into a BPF ring buffer (bpf_ring)
#   bpf_fentry   the same program attached as fentry (needs kerf.ko's BTF)
# Prints "ROW round kind target_best target_mean twin_best twin_mean hits events" lines (ns
# per call: the fastest block of 256 calls of the run, and the whole run; hits: the loop's
# own count; events: what the tracer delivered), "NOTE ..." and "STEP ..." lines, and DONE.
# Buffers: each tracer gets room for a whole run (kerf: --ring-slots SLOTS per CPU; ftrace:
# 8 MiB a CPU; the BPF ring: 4 MiB), so that every run delivers every event and each row is
# the cost of writing one: a full buffer's drop is cheaper than a write, and under TCG no
# reader keeps up with a tight loop (see bench/RESULTS.md).
# Env: N calls per run (default 30000), ROUNDS (default 3), KINDS (default all, in order),
# SLOTS (default 32768).
set -u
T=/sys/kernel/tracing
F=kerf_selftest_jump5
N=${N:-30000}
SLOTS=${SLOTS:-32768}
ROUNDS=${ROUNDS:-3}
KINDS=${KINDS:-"kerf_trace kprobe_event bpf_kprobe bpf_fentry"}
insmod /kerf/kerf.ko || { echo "insmod failed"; exit 1; }
[ -e /sys/kernel/btf/kerf ] || echo "NOTE kerf.ko has no BTF: no bpf_fentry row"
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
one() { kerf_selftest "$1" "$N" || echo "NOTE kerf_selftest $1 failed"; }
mean2() { awk -v x="$1" -v y="$2" 'BEGIN { printf "%.3f", (x + y) / 2 }'; }
# The twin, the target, the twin again: "target_best target_mean twin_best twin_mean hits".
loop() {
  a=$(one twin); t=$(one jump5); b=$(one twin)
  echo "$(field "$t" best_per_call) $(field "$t" per_call)" \
    "$(mean2 "$(field "$a" best_per_call)" "$(field "$b" best_per_call)")" \
    "$(mean2 "$(field "$a" per_call)" "$(field "$b" per_call)") $(field "$t" hits)"
}
# Wait (up to 2 min) until file $1 holds $2, or process $3 (if given) is gone.
wait_for() { i=0; while ! grep -qs "$2" "$1"; do [ -n "${3:-}" ] && ! kill -0 "$3" 2>/dev/null && return 1; sleep 0.2; i=$((i+1)); [ $i -gt 600 ] && return 1; done; return 0; }

kerf_run() {
  rm -f /tmp/t.kerf-trace
  kerf trace --kernel --json --ring-slots "$SLOTS" -o /tmp/t.kerf-trace "kerf:$F {arg0, u64(arg0)}" > /tmp/k.json 2>/tmp/k.err &
  K=$!
  wait_for /tmp/k.err "points spliced" $K || { echo "NOTE kerf trace did not start:"; cat /tmp/k.err; exit 1; }
  v=$(loop)
  kill -INT $K; wait $K
  ev=$(grep -o '"events":[0-9]*' /tmp/k.json | head -1 | cut -d: -f2)
  lost=$(grep -o '"lost":[0-9]*' /tmp/k.json | head -1 | cut -d: -f2)
  [ "$1" = 1 ] && echo "NOTE kerf_trace: $(ls -l /tmp/t.kerf-trace | awk '{print $5}') bytes of raw trace, lost ${lost:-?}"
  echo "ROW $1 kerf_trace $v ${ev:--}"
}
kprobe_run() {
  echo "p:kerf_trace kerf:$F a=%di b=+0(%di):u64" > $T/kprobe_events || { echo "NOTE kprobe event refused"; exit 1; }
  echo > $T/trace
  echo 8192 > $T/buffer_size_kb
  echo 1 > $T/events/kprobes/kerf_trace/enable
  cat $T/trace_pipe > /tmp/kp.txt &
  C=$!
  sleep 1
  v=$(loop)
  sleep 1
  echo 0 > $T/events/kprobes/kerf_trace/enable
  kill $C; wait $C 2>/dev/null
  ev=$(grep -c "kerf_trace:" /tmp/kp.txt)
  [ "$1" = 1 ] && echo "NOTE kprobe_event: $(grep -h overrun $T/per_cpu/cpu*/stats | tr '\n' ' ')"
  echo > $T/kprobe_events
  echo "ROW $1 kprobe_event $v $ev"
}
bpf_run() {
  /kerf/bpf_ring "$2" "$F" kerf > /tmp/b.out 2>/tmp/b.err &
  B=$!
  wait_for /tmp/b.out attached $B || { echo "NOTE bpf_ring $2 did not attach:"; cat /tmp/b.err; return; }
  v=$(loop)
  sleep 0.5
  kill -INT $B; wait $B
  echo "ROW $1 bpf_$2 $v $(sed -n 's/^events //p' /tmp/b.out)"
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
  echo "ROW $r bare $(loop) -"
  for kind in $KINDS; do
    echo "STEP $r $kind $(date +%T)"
    case $kind in
      kerf_trace) kerf_run $r ;;
      kprobe_event) kprobe_run $r ;;
      bpf_kprobe) bpf_run $r kprobe ;;
      bpf_fentry) [ -e /sys/kernel/btf/kerf ] && bpf_run $r fentry ;;
    esac
  done
  r=$((r+1))
done
echo "DONE"
