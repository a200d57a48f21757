#!/bin/sh
# Kernel splice time (issue 10), run inside the stock kernel guest by bench/kernel_splice.py:
# the same probe sets spliced with one driver call per site (KERF_KERNEL_SPLICE=single, three
# serialisations of every CPU per text write) and with one batch per step (the default), and,
# if /kerf/before/kerf and /kerf/before/kerf.ko are there, by that older build with its own
# driver (the module is swapped), in alternation, in this one boot. Prints "RUN mode what
# key=value..." lines.
#   count: the 2,145 probes of tests/fixtures/kernel_guest.sh's exact-count check, spliced and
#          removed again (--duration 1);
#   time:  kerf time on the openat path while two shells open files, so that calls are in
#          flight while the timer sites go live: the int3 step is the window in which some
#          timer sites are live and others not; unmatched exits are what it costs.
set -u
ROUNDS=${ROUNDS:-2}
MODES="single batch"
[ -x /kerf/before/kerf ] && MODES="before $MODES"
up() { cut -d' ' -f1 /proc/uptime; }
# "... in 1234.5 ms (int3s 67.8 ms); ..." -> "1.2345/0.0678"; an older kerf prints no int3s: "-".
phases() { sed -n 's/.* in \([0-9.]*\) ms\( (int3s \([0-9.]*\) ms)\)\{0,1\};.*/\1 \3/p' "$1" | awk '{printf "%s/%s\n", $1/1000, ($2 == "" ? "-" : $2/1000)}'; }
# use MODE: the module and kerf binary of MODE loaded; sets KERF.
use() {
  want=/kerf/kerf.ko; KERF=kerf
  [ "$1" = before ] && { want=/kerf/before/kerf.ko; KERF=/kerf/before/kerf; }
  [ "$want" = "${loaded:-}" ] && return 0
  [ -n "${loaded:-}" ] && { rmmod kerf || { echo "rmmod failed"; exit 1; }; }
  insmod "$want" || { echo "insmod $want failed"; exit 1; }
  loaded=$want
}
rm -f /tmp/stop
opener() { while [ ! -e /tmp/stop ]; do : > $1; done; }
r=0
while [ $r -lt $ROUNDS ]; do
  r=$((r+1))
  for mode in $MODES; do
    use $mode
    a=$(up)
    KERF_KERNEL_SPLICE=$mode $KERF count --kernel --json --duration 1 'vfs_*' 'path_*' 'shmem_*' \
      '*dentry*' '*inode*' 'do_sys_*' '*file*' 'd_*' 'mnt*' 'generic_*' 'filemap_*' 'lookup_*' \
      'may_*' 'security_*' do_truncate 'vfs_read@blocks' 'vfs_write@blocks' 'path_openat@blocks' \
      'do_truncate@exits' > /tmp/c.json 2>/tmp/c.err || { echo "FAIL count $mode"; tail -3 /tmp/c.err; exit 1; }
    b=$(up)
    pts=$(grep -o '[0-9]* points spliced' /tmp/c.err | cut -d' ' -f1)
    echo "RUN $mode count points=$pts splice_int3=$(phases /tmp/c.err) wall=$(echo "$a $b" | awk '{print $2-$1}')"
    opener /tmp/o1 & O1=$!
    opener /tmp/o2 & O2=$!
    KERF_KERNEL_SPLICE=$mode $KERF time --kernel --json --duration 1 do_sys_openat2 path_openat \
      do_filp_open do_truncate notify_change > /tmp/t.json 2>/tmp/t.err || { echo "FAIL time $mode"; tail -3 /tmp/t.err; exit 1; }
    touch /tmp/stop; wait $O1 $O2; rm -f /tmp/stop
    um=$(grep -o '"unmatched_exits":[0-9]*' /tmp/t.json | cut -d: -f2 | awk '{s+=$1} END {print s+0}')
    pts=$(grep -o '[0-9]* points spliced' /tmp/t.err | cut -d' ' -f1)
    echo "RUN $mode time points=$pts splice_int3=$(phases /tmp/t.err) unmatched=$um"
  done
done
echo DONE
