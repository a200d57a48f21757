#!/bin/sh
# The guest half of bench/cover_kernel.sh: a system-call workload (Debian's stress-ng, a fixed
# set of stressors, one instance each, in runs of STEP seconds) before, under and after
# `kerf cover --kernel` of every block of SCOPE (default: core text, `vmlinux`), with traps off
# (`--no-traps`; NOTRAPS= lets them in), with kprobes at the entry of KPROBES (300) functions
# as ground truth for their entry blocks. Prints "SAMPLE phase n bogo_ops" per run (phase
# alone0, cover, alone1), "LIVE ..." lines of kerf's live table, "RESULT key value" lines,
# "DISAGREE ..." lines, the new kernel warnings ("KERNEL ...") and DONE.
set -u
N=${N:-20}
STEP=${STEP:-2}
SCOPE=${SCOPE:-vmlinux}
KPROBES=${KPROBES:-300}
STRESS="--open 1 --dup 1 --fstat 1 --pipe 1"
insmod /kerf/kerf.ko || { echo "RESULT error insmod"; exit 1; }
ops() { /kerf/stress-ng $STRESS -t "$STEP" --metrics-brief 2>&1 | awk '$4 ~ /^(open|dup|fstat|pipe)$/ && $5 ~ /^[0-9]+$/ {s += $5} END {print s + 0}'; }
t0=$(date +%s)
kerf analyze --kernel --json > /tmp/an.json 2>/tmp/an.err || { echo "RESULT error analyze $(tail -2 /tmp/an.err)"; exit 1; }
echo "RESULT analyze_s $(( $(date +%s) - t0 ))"
for i in $(seq "$N"); do echo "SAMPLE alone0 $i $(ops)"; done
dmesg > /tmp/dmesg0
# Ground truth from outside kerf: a kprobe at the entry of KPROBES functions spread over core
# text, enabled before kerf starts (tests/fixtures/kprobe_sample.sh).
. /kerf/kprobe_sample.sh
kprobe_sample_start "$KPROBES"
echo "RESULT kprobes $(wc -l < /tmp/kp.list)"
t0=$(date +%s)
kerf cover --kernel ${NOTRAPS---no-traps} --json --interval "$STEP" $SCOPE > /tmp/cov.json 2>/tmp/cov.err &
K=$!
while ! grep -q "points spliced" /tmp/cov.err; do
  kill -0 $K 2>/dev/null || { echo "RESULT error cover $(tail -c 600 /tmp/cov.err)"; exit 1; }
  sleep 1
done
echo "RESULT live_s $(( $(date +%s) - t0 ))"
kprobe_sample_snap kp0
echo "RESULT spliced $(grep -m1 'points spliced' /tmp/cov.err)"
echo "RESULT kerf_rss_kb $(awk '/VmHWM/ {print $2}' /proc/$K/status)"
echo "RESULT guest_used_mb $(free -m | awk '/Mem:/ {print $3}')"
for i in $(seq "$N"); do echo "SAMPLE cover $i $(ops)"; done
kprobe_sample_snap kp1a
kill -INT $K; wait $K; echo "RESULT kerf_exit $?"
kprobe_sample_snap kp1b
kprobe_sample_stop
kprobe_sample_check /tmp/cov.json
# The live table's samples: [seconds, blocks covered, probes still in], one a line.
tr -d '\n' < /tmp/cov.json | grep -o '"over_time":\[\[[^"]*\]\]' | sed 's/^"over_time":\[//; s/\]$//; s/\],\[/]\n[/g' | sed 's/^/LIVE /'
for i in $(seq "$N"); do echo "SAMPLE alone1 $i $(ops)"; done
dmesg > /tmp/dmesg1
echo "RESULT new_warnings $(diff /tmp/dmesg0 /tmp/dmesg1 | grep -cE 'WARNING|BUG|Oops')"
diff /tmp/dmesg0 /tmp/dmesg1 | grep -E -A4 'WARNING|BUG|Oops' | head -20 | sed 's/^/KERNEL /'
echo DONE
