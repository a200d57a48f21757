#!/bin/sh
# The Djprobe table (issue 4), run inside the stock kernel guest by bench/kernel_probes.py: the
# per-hit cost of probes on one kernel function hit from a tight system-call loop
# (bench/syscall_loop.c calling getppid), all in one guest run: kerf jump5, kerf trap, a kprobe
# with optimisation off (int3), an optprobe (jump-optimised kprobe) at the same address, and an
# empty BPF fentry program (bench/fentry_loop.c).
# Prints "ROW name ns_per_call" lines.
set -u
T=/sys/kernel/tracing
F=${F:-__task_pid_nr_ns}
N=${N:-300000}
RUNS=${RUNS:-5}
insmod /kerf/kerf.ko || { echo "insmod failed"; exit 1; }
best() { b=""; for r in $(seq 1 $RUNS); do v=$(/kerf/syscall_loop $N); b=$(echo "$b $v" | tr ' ' '\n' | grep . | sort -n | head -1); done; echo "$b"; }
spliced() { i=0; while ! grep -q "points spliced" "$1"; do sleep 0.5; i=$((i+1)); [ $i -gt 240 ] && return 1; done; return 0; }
echo "ROW bare $(best)"
for kind in jump5 trap; do
  kerf count --kernel --json --force-kind $kind "$F" > /tmp/k.json 2>/tmp/k.err &
  K=$!
  spliced /tmp/k.err || { cat /tmp/k.err; exit 1; }
  echo "ROW kerf_$kind $(best)"
  kill -INT $K; wait $K
  echo "JSON $kind $(cat /tmp/k.json)"
done
# The kprobes go where kerf's splice went: after the function's ftrace site (a kprobe on the
# site itself would use ftrace, not an int3 or a jump).
SITE=$(grep -o '"address":"0x[0-9a-f]*"' /tmp/k.json | head -1 | sed 's/.*0x\([0-9a-f]*\)"/\1/')
BASE=$(grep " $F\$" /proc/kallsyms | cut -d' ' -f1 | head -1)
# busybox arithmetic is signed 64-bit: subtract the low 32 bits (both are ffffffff........).
OFF=$(( 0x${SITE#ffffffff} - 0x${BASE#ffffffff} ))
echo "SITE $F+$OFF"
for opt in 0 1; do
  echo $opt > /proc/sys/debug/kprobes-optimization
  echo "p:kerf_bench $F+$OFF" > $T/kprobe_events || { echo "kprobe refused at $F+$OFF"; exit 1; }
  echo 1 > $T/events/kprobes/kerf_bench/enable
  sleep 1
  grep "$F" /sys/kernel/debug/kprobes/list
  name=kprobe_int3; [ $opt = 1 ] && name=optprobe
  grep -q OPTIMIZED /sys/kernel/debug/kprobes/list && name=optprobe_optimized
  echo "ROW $name $(best)"
  echo 0 > $T/events/kprobes/kerf_bench/enable
  echo > $T/kprobe_events
done
# BPF fentry: an empty program on the function's entry (bench/fentry_loop.c runs the loop
# itself while its program is attached).
if [ -x /kerf/fentry_loop ]; then
  b=""; for r in $(seq 1 $RUNS); do v=$(/kerf/fentry_loop $F $N) || break; b=$(echo "$b $v" | tr ' ' '\n' | grep . | sort -n | head -1); done
  [ -n "$b" ] && echo "ROW bpf_fentry_empty $b"
fi
echo "ROW bare_again $(best)"
echo "DONE"
