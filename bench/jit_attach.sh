#!/bin/bash
# bench/jit_attach.sh [CYCLES]: issue 14's "attach mid-run and detach mid-run 100 times on a
# busy multi-threaded process without a crash and with the text byte-identical afterwards",
# on a real program: `xz -T2` compressing 256 MB of generated text (two compression threads
# and a main thread), with `kerf jit lzma_crc64 --duration 0.1` attached and detached CYCLES
# times (default 100). The root is liblzma's check of each block, which the compression
# threads call all the time (`lzma_code` has an indirect jump with unknown targets, so no
# jump may go at its entry). After each detach the text of every module is compared with its
# bytes before the first attach, and kerf's mappings must be gone; at the end the compressed
# output must equal an uninstrumented run's.
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${1:-100}
say() { echo "bench: $*" >&2; }
cargo build --release -p kerf >/dev/null 2>&1 || { say "cargo build failed"; exit 1; }
K=$PWD/target/release/kerf
W=$(mktemp -d /tmp/kerf-jit-attach.XXXXXX)
trap 'rm -rf "$W"' EXIT
export KERF_CACHE_DIR=$W/cache
python3 - "$W" <<'PY'
import random, sys
random.seed(2)
words = [''.join(random.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(random.randint(2, 9))) for _ in range(20000)]
with open(f'{sys.argv[1]}/text', 'w') as f:
    n = 0
    while n < 256 << 20:
        line = ' '.join(random.choice(words) for _ in range(12)) + '\n'
        f.write(line)
        n += len(line)
PY
say "the uninstrumented run"
xz -T2 -6 -c "$W/text" | md5sum > "$W/expected"
text() { # PID -> md5 of every file-backed executable mapping's bytes
  python3 - "$1" <<'PY'
import hashlib, sys
pid = sys.argv[1]
h = hashlib.md5()
mem = open(f'/proc/{pid}/mem', 'rb')
for l in open(f'/proc/{pid}/maps'):
    f = l.split()
    if len(f) >= 6 and 'x' in f[1] and f[5].startswith('/'):
        a, b = (int(x, 16) for x in f[0].split('-'))
        mem.seek(a)
        h.update(mem.read(b - a))
print(h.hexdigest())
PY
}
xz -T2 -6 -c "$W/text" > "$W/out.xz" &
PID=$!
sleep 1
BEFORE=$(text $PID)
ok=0; moved=0; live=0; escapes=0; asked=0
for c in $(seq "$CYCLES"); do
  kill -0 $PID 2>/dev/null || { say "xz ended after $ok cycles"; break; }
  if ! "$K" jit lzma_crc64 --duration 0.1 --json -o "$W/s.json" -p $PID 2>"$W/err"; then
    kill -0 $PID 2>/dev/null && { cat "$W/err"; exit 1; }
    break
  fi
  read -r m e t a < <(python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['jit']; print(j['removed']['threads_moved'], j['escapes'], j['seconds']['translate'], j['on_demand']['asked'])" "$W/s.json")
  moved=$((moved + m)); live=$(echo "$live + $t" | bc); escapes=$((escapes + e)); asked=$((asked + a))
  [ "$(text $PID)" = "$BEFORE" ] || { say "cycle $c: text changed"; exit 1; }
  grep -q kerf- /proc/$PID/maps && { say "cycle $c: kerf's mappings left"; exit 1; }
  ok=$((ok + 1))
done
wait $PID
md5sum < "$W/out.xz" > "$W/got"
same=$(cmp -s "$W/expected" "$W/got" && echo yes || echo NO)
echo "# bench/jit_attach.sh $CYCLES, $(date -u +%F), $(nproc) CPUs"
echo "cycles $ok, threads brought back from the cache $moved, mean translation $(echo "scale=3; $live / ($ok + 0.000001)" | bc) s, escapes while live $escapes, misses translated on demand $asked, output identical: $same"
[ "$same" = yes ] && [ "$ok" -gt 0 ]
