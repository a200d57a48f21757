#!/bin/sh
# The Djprobe table, run inside the stock kernel guest by bench/kernel_probes.py. kerf.ko's
# self-test loop (/dev/kerf_selftest, driven by /kerf/kerf_selftest) calls
# kerf_selftest_jump5 N times in a tight loop while one kind of probe sits on it, always at
# the same address (right after the function's ftrace site, where kerf splices; the ftrace
# kinds use the ftrace site itself). Kinds: bare (no probe), kerf jump5, kerf jump2 (forced:
# a jmp rel8 to a springboard in the padding after the function), kerf trap (forced: int3),
# a kprobe event with optimisation off (int3), the same kprobe optimised (optprobe), a kprobe
# event on the ftrace site (ftrace-based), and ftrace's function tracer filtered to it.
# Each run of the target sits between two runs of kerf_selftest_twin, a copy of it that no
# probe touches: a kind's cost per hit is the target's time per call less the twin's, both
# measured within a second of each other (under qemu TCG on a shared host the speed of the
# whole guest drifts by tens of percent between seconds, so a baseline taken earlier, as
# the old table's bare runs were, is off by more than a jump5 costs). The kinds are
# interleaved in rounds, and "bare" (no probe: target less twin with nothing on either)
# shows how finely this resolves.
# Prints "ROW round kind target_best target_mean twin_best twin_mean hits count kerf_kind"
# lines (ns per call: the fastest block of 256 calls of the run, and the whole run; count is
# what kerf or the kprobe event counted), "NOTE ..." and "STEP ..." lines, and DONE.
# kerf_jump5 must come first (it finds the site the kprobes use).
# Env: N calls per run (default 1000000), ROUNDS (default 5), KINDS (default all, in order).
set -u
T=/sys/kernel/tracing
F=kerf_selftest_jump5
N=${N:-1000000}
ROUNDS=${ROUNDS:-5}
KINDS=${KINDS:-"kerf_jump5 kerf_jump2 kerf_trap kprobe_int3 optprobe kprobe_ftrace ftrace_function"}
insmod /kerf/kerf.ko || { echo "insmod failed"; exit 1; }
field() { echo "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# loop: the unprobed twin (kerf_selftest_twin, the same code at another address), the probed
# target, the twin again, one right after the other; prints "target_best target_mean
# twin_best twin_mean hits" (ns per call; twin: the mean of its two runs).
one() { kerf_selftest "$1" "$N" || echo "NOTE kerf_selftest $1 failed"; }
mean2() { awk -v x="$1" -v y="$2" 'BEGIN { printf "%.3f", (x + y) / 2 }'; }
loop() {
  a=$(one twin); t=$(one jump5); b=$(one twin)
  echo "$(field "$t" best_per_call) $(field "$t" per_call)" \
    "$(mean2 "$(field "$a" best_per_call)" "$(field "$b" best_per_call)")" \
    "$(mean2 "$(field "$a" per_call)" "$(field "$b" per_call)") $(field "$t" hits)"
}
spliced() { i=0; while ! grep -qs "points spliced" "$1"; do sleep 0.5; i=$((i+1)); [ $i -gt 240 ] && return 1; done; return 0; }
point() { tr '{' '\n' < /tmp/k.json | grep "\"spec\":\"kerf:$F\"" | grep -o "\"$1\":[\"a-z0-9]*" | cut -d: -f2 | tr -d '"'; }
BASE=$(awk -v f="$F" '$3 == f {print $1; exit}' /proc/kallsyms)
[ -n "$BASE" ] || { echo "NOTE no $F in /proc/kallsyms"; exit 1; }
# The kprobes go where kerf's first splice went (OFF, set by kerf_run).
OFF=""
if [ -e /sys/kernel/btf/kerf ]; then
  echo "NOTE kerf.ko has BTF, but this script has no fentry row yet"
else
  echo "NOTE no BPF fentry row: kerf.ko has no BTF (built out of tree without vmlinux), and fentry needs the target's BTF"
fi

kerf_run() {
  kerf count --kernel --json --force-kind "$2" "kerf:$F" > /tmp/k.json 2>/tmp/k.err &
  K=$!
  spliced /tmp/k.err || { cat /tmp/k.err; exit 1; }
  v=$(loop)
  kill -INT $K; wait $K
  echo "ROW $1 kerf_$2 $v $(point count) $(point kind)"
  if [ -z "$OFF" ]; then
    SITE=$(point address | sed 's/^0x//')
    # busybox arithmetic is signed 64-bit: subtract the low 32 bits (both are ffffffff........).
    OFF=$(( 0x${SITE#ffffffff} - 0x${BASE#ffffffff} ))
    echo "SITE $F+$OFF"
  fi
}
kprobe_run() {
  echo "$3" > /proc/sys/debug/kprobes-optimization
  echo "p:kerf_bench kerf:$F+$2" > $T/kprobe_events || { echo "NOTE kprobe refused at $F+$2"; exit 1; }
  echo 1 > $T/events/kprobes/kerf_bench/enable
  sleep 1
  state=$(grep "$F" /sys/kernel/debug/kprobes/list | head -1)
  name=$4
  [ "$name" = optprobe ] && ! echo "$state" | grep -q OPTIMIZED && { echo "NOTE not optimised: $state"; name=optprobe_not_optimised; }
  [ "$1" = 1 ] && echo "NOTE $name: $state"
  v=$(loop)
  echo 0 > $T/events/kprobes/kerf_bench/enable
  hits=$(awk '$1 == "kerf_bench" {print $2}' $T/kprobe_profile)
  echo > $T/kprobe_events
  echo "ROW $1 $name $v $hits -"
}
ftrace_run() {
  echo "$F" > $T/set_ftrace_filter
  echo function > $T/current_tracer
  v=$(loop)
  echo nop > $T/current_tracer
  echo > $T/set_ftrace_filter
  echo "ROW $1 ftrace_function $v - -"
}

r=1
while [ "$r" -le "$ROUNDS" ]; do
  echo "ROW $r bare $(loop) - -"
  for kind in $KINDS; do
    echo "STEP $r $kind $(date +%T)"
    case $kind in
      kerf_jump5) kerf_run $r jump5 ;;
      kerf_jump2) kerf_run $r jump2 ;;
      kerf_trap) kerf_run $r trap ;;
      kprobe_int3) kprobe_run $r "$OFF" 0 kprobe_int3 ;;
      optprobe) kprobe_run $r "$OFF" 1 optprobe ;;
      kprobe_ftrace) kprobe_run $r 0 1 kprobe_ftrace ;;
      ftrace_function) ftrace_run $r ;;
    esac
  done
  r=$((r+1))
done
echo "DONE"
