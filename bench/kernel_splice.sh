#!/bin/sh
# Kernel splice time (issue 10), run inside the stock kernel guest by bench/kernel_splice.py:
# the same probe sets spliced with one driver call per site (KERF_KERNEL_SPLICE=single, three
# serialisations of every CPU per text write) and with one batch per step (the default), in
# alternation, in this one boot. Prints "RUN mode what seconds..." lines.
#   count: the 2,145 probes of tests/fixtures/kernel_guest.sh's exact-count check, spliced and
#          removed again (--duration 1);
#   time:  kerf time on the openat path while two shells open files, so that calls are in
#          flight while the timer sites go live: the int3 step is the window in which some
#          timer sites are live and others not; unmatched exits are what it costs.
set -u
ROUNDS=${ROUNDS:-2}
insmod /kerf/kerf.ko || { echo "insmod failed"; exit 1; }
up() { cut -d' ' -f1 /proc/uptime; }
# "... in 1234.5 ms (int3s 67.8 ms) ..." -> "1.2345 0.0678"
phases() { sed -n 's/.* in \([0-9.]*\) ms (int3s \([0-9.]*\) ms).*/\1 \2/p' "$1" | awk '{print $1/1000, $2/1000}'; }
rm -f /tmp/stop
opener() { while [ ! -e /tmp/stop ]; do : > $1; done; }
r=0
while [ $r -lt $ROUNDS ]; do
  r=$((r+1))
  for mode in single batch; do
    a=$(up)
    KERF_KERNEL_SPLICE=$mode kerf count --kernel --json --duration 1 'vfs_*' 'path_*' 'shmem_*' \
      '*dentry*' '*inode*' 'do_sys_*' '*file*' 'd_*' 'mnt*' 'generic_*' 'filemap_*' 'lookup_*' \
      'may_*' 'security_*' do_truncate 'vfs_read@blocks' 'vfs_write@blocks' 'path_openat@blocks' \
      'do_truncate@exits' > /tmp/c.json 2>/tmp/c.err || { echo "FAIL count $mode"; tail -3 /tmp/c.err; exit 1; }
    b=$(up)
    pts=$(grep -o '[0-9]* points spliced' /tmp/c.err | cut -d' ' -f1)
    echo "RUN $mode count points=$pts splice_int3=$(phases /tmp/c.err | tr ' ' '/') wall=$(echo "$a $b" | awk '{print $2-$1}')"
    opener /tmp/o1 & O1=$!
    opener /tmp/o2 & O2=$!
    KERF_KERNEL_SPLICE=$mode kerf time --kernel --json --duration 1 do_sys_openat2 path_openat \
      do_filp_open do_truncate notify_change > /tmp/t.json 2>/tmp/t.err || { echo "FAIL time $mode"; tail -3 /tmp/t.err; exit 1; }
    touch /tmp/stop; wait $O1 $O2; rm -f /tmp/stop
    um=$(grep -o '"unmatched_exits":[0-9]*' /tmp/t.json | cut -d: -f2 | awk '{s+=$1} END {print s+0}')
    pts=$(grep -o '[0-9]* points spliced' /tmp/t.err | cut -d' ' -f1)
    echo "RUN $mode time points=$pts splice_int3=$(phases /tmp/t.err | tr ' ' '/') unmatched=$um"
  done
done
echo DONE
