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
# text (ftrace-based, so kerf's entry-block splice after the ftrace site coexists with it),
# enabled before kerf starts. Function names that kallsyms holds twice are skipped.
T=/sys/kernel/tracing
: > /tmp/kp.list
if [ "$KPROBES" -gt 0 ]; then
  awk '$2 ~ /^[tT]$/ {print $3}' /proc/kallsyms | sort | uniq -d > /tmp/kp.dups
  grep -v '\[' $T/available_filter_functions | grep -vxFf /tmp/kp.dups > /tmp/kp.all
  step=$(( $(wc -l < /tmp/kp.all) / KPROBES + 1 ))
  i=0
  awk -v s="$step" 'NR % s == 1' /tmp/kp.all | while read f; do
    echo "p:kc_$i $f" >> $T/kprobe_events 2>/dev/null && echo "kc_$i $f" >> /tmp/kp.list
    i=$((i+1))
  done
  echo 1 > $T/events/kprobes/enable
fi
echo "RESULT kprobes $(wc -l < /tmp/kp.list)"
t0=$(date +%s)
kerf cover --kernel ${NOTRAPS---no-traps} --json --interval "$STEP" $SCOPE > /tmp/cov.json 2>/tmp/cov.err &
K=$!
while ! grep -q "points spliced" /tmp/cov.err; do
  kill -0 $K 2>/dev/null || { echo "RESULT error cover $(tail -c 600 /tmp/cov.err)"; exit 1; }
  sleep 1
done
echo "RESULT live_s $(( $(date +%s) - t0 ))"
cp $T/kprobe_profile /tmp/kp0
echo "RESULT spliced $(grep -m1 'points spliced' /tmp/cov.err)"
echo "RESULT kerf_rss_kb $(awk '/VmHWM/ {print $2}' /proc/$K/status)"
echo "RESULT guest_used_mb $(free -m | awk '/Mem:/ {print $3}')"
for i in $(seq "$N"); do echo "SAMPLE cover $i $(ops)"; done
cp $T/kprobe_profile /tmp/kp1a
kill -INT $K; wait $K; echo "RESULT kerf_exit $?"
cp $T/kprobe_profile /tmp/kp1b
echo 0 > $T/events/kprobes/enable; echo > $T/kprobe_events
# Each sampled function's entry block as kerf saw it, against its kprobe: hit between going
# live and Ctrl-C => covered; covered => hit at some time (the kprobe was on before kerf).
tr '{' '\n' < /tmp/cov.json > /tmp/cov.lines
sed -n 's/.*"addr":"\(0x[0-9a-f]*\)".*"covered":\([tf][a-z]*\).*/\1 \2/p' /tmp/cov.lines > /tmp/cov.blocks
sed -n 's/.*"entry":"\(0x[0-9a-f]*\)".*"name":"\([^"]*\)".*/\2 \1/p' /tmp/cov.lines > /tmp/cov.funcs
awk 'FILENAME == "/tmp/cov.blocks" { b[$1] = $2; next }
  FILENAME == "/tmp/cov.funcs" { e[$1] = $2; next }
  FILENAME == "/tmp/kp.list" { k[$1] = $2; next }
  FILENAME == "/tmp/kp0" { h0[$1] = $2; next }
  FILENAME == "/tmp/kp1a" { h1[$1] = $2; next }
  FILENAME == "/tmp/kp1b" { h2[$1] = $2; next }
  END {
    for (p in k) {
      f = k[p]
      if (!(f in e)) { nofunc++; continue }
      if (!(e[f] in b)) { unmeasured++; continue }
      n++; c = b[e[f]]; w = h1[p] - h0[p]
      if (w > 0 && c != "true") { bad++; print "DISAGREE hit while live, not covered: " f " " e[f] " " w }
      if (c == "true" && h2[p] + 0 == 0) { bad++; print "DISAGREE covered, never hit: " f " " e[f] }
      cov += (c == "true"); hit += (w > 0)
    }
    printf "RESULT kprobe_sample functions %d covered %d hit_while_live %d disagree %d entry_not_measured %d not_in_scope %d\n", n, cov, hit, bad, unmeasured, nofunc
  }' /tmp/cov.blocks /tmp/cov.funcs /tmp/kp.list /tmp/kp0 /tmp/kp1a /tmp/kp1b
# The live table's samples: [seconds, blocks covered, probes still in], one a line.
tr -d '\n' < /tmp/cov.json | grep -o '"over_time":\[\[[^"]*\]\]' | sed 's/^"over_time":\[//; s/\]$//; s/\],\[/]\n[/g' | sed 's/^/LIVE /'
for i in $(seq "$N"); do echo "SAMPLE alone1 $i $(ops)"; done
dmesg > /tmp/dmesg1
echo "RESULT new_warnings $(diff /tmp/dmesg0 /tmp/dmesg1 | grep -cE 'WARNING|BUG|Oops')"
diff /tmp/dmesg0 /tmp/dmesg1 | grep -E -A4 'WARNING|BUG|Oops' | head -20 | sed 's/^/KERNEL /'
echo DONE
