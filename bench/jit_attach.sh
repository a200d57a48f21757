#!/bin/bash
# bench/jit_attach.sh [CYCLES] [xz|python3.11]: issue 14's "attach mid-run and detach mid-run
# 100 times on a busy multi-threaded process without a crash and with the text
# byte-identical afterwards", on a real program, `kerf jit ROOT --duration 0.1 -p PID`
# attached and detached CYCLES times (default 100):
# - xz (default): `xz -T2` compressing 256 MB of generated text (two compression threads and
#   a main thread); the root is liblzma's check of each block, `lzma_crc64`, which the
#   compression threads call all the time (`lzma_code` has an indirect jump with unknown
#   targets, so no jump may go at its entry). At the end the compressed output must equal an
#   uninstrumented run's.
# - python3.11: Debian's python3.11 running a pure-Python function through `f(*args)`
#   (`PyObject_Call`, which enters it through `_PyFunction_Vectorcall`, the root: the two
#   before it have indirect jumps with unknown targets) in a loop, in four threads and the
#   main thread, each result
#   checked against the value computed before any thread started; the threads take turns
#   with the interpreter's lock, so at any moment most of them wait on it in a system call
#   inside the root's region. SIGUSR1 ends the run: every thread stops, and the program
#   prints how many calls it checked, or exits 1 at the first wrong result.
# After each detach the text of every module is compared with its bytes before the first
# attach, and kerf's mappings must be gone.
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${1:-100}
say() { echo "bench: $*" >&2; }
PROG=${2:-xz}
case $PROG in
  xz) command -v xz >/dev/null || { say "installing xz-utils"; apt-get install -y -q xz-utils >/dev/null; } ;;
  python3.11) [ -x /usr/bin/python3.11 ] || { say "installing python3.11"; apt-get install -y -q python3.11 >/dev/null; } ;;
esac
cargo build --release -p kerf >/dev/null 2>&1 || { say "cargo build failed"; exit 1; }
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kerf
W=$(mktemp -d /tmp/kerf-jit-attach.XXXXXX)
trap 'kill $PID 2>/dev/null || true; rm -rf "$W"' EXIT
PID=
export KERF_CACHE_DIR=$W/cache
case $PROG in
xz)
  ROOT=lzma_crc64
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
  ;;
python3.11)
  ROOT=_PyFunction_Vectorcall
  cat > "$W/work.py" <<'PY'
import signal, sys, threading
def g(k):
    d = {}
    s = 0
    for j in range(300):
        d[str(j * k % 97)] = j
        s += len(d) * j % 13
    return s + sum(sorted(d.values())[:5]) + len(' '.join(sorted(d)))
expected = [g(k) for k in range(64)]
stop = False
checked = [0] * 5
wrong = []
def on_usr1(sig, frame):
    global stop
    stop = True
signal.signal(signal.SIGUSR1, on_usr1)
def work(t):
    i = t
    while not stop:
        k = i % 64
        if g(*(k,)) != expected[k]:
            wrong.append((t, k))
            return
        checked[t] += 1
        i += 1
threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
for th in threads:
    th.start()
work(4)
for th in threads:
    th.join()
if wrong:
    print("WRONG", wrong)
    sys.exit(1)
print("checked", sum(checked), "calls in 5 threads")
PY
  ;;
*) say "no such program: $PROG (xz or python3.11)"; exit 2 ;;
esac
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
if [ "$PROG" = xz ]; then
  xz -T2 -6 -c "$W/text" > "$W/out.xz" &
else
  /usr/bin/python3.11 "$W/work.py" > "$W/out" &
fi
PID=$!
sleep 1
BEFORE=$(text $PID)
ok=0; moved=0; live=0; escapes=0; asked=0
for c in $(seq "$CYCLES"); do
  kill -0 $PID 2>/dev/null || { say "$PROG ended after $ok cycles"; break; }
  if ! "$K" jit $ROOT --duration 0.1 --json -o "$W/s.json" -p $PID 2>"$W/err"; then
    say "cycle $c: kerf failed: $(tail -3 "$W/err")"; cp "$W/err" /tmp/kerf-jit-attach-failed.err
    kill -0 $PID 2>/dev/null && exit 1
    # xz may have ended meanwhile; the checks below tell an end from a death.
    break
  fi
  read -r m e t a < <(python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['jit']; print(j['removed']['threads_moved'], j['escapes'], j['seconds']['translate'], j['on_demand']['asked'])" "$W/s.json")
  moved=$((moved + m)); live=$(echo "$live + $t" | bc); escapes=$((escapes + e)); asked=$((asked + a))
  [ "$(text $PID)" = "$BEFORE" ] || { say "cycle $c: text changed"; exit 1; }
  grep -q kerf- /proc/$PID/maps && { say "cycle $c: kerf's mappings left"; exit 1; }
  ok=$((ok + 1))
done
if [ "$PROG" = xz ]; then
  wait $PID
  md5sum < "$W/out.xz" > "$W/got"
  same=$(cmp -s "$W/expected" "$W/got" && echo yes || echo NO)
else
  kill -USR1 $PID
  rc=0; wait $PID || rc=$?
  same=$([ $rc = 0 ] && grep -q '^checked' "$W/out" && echo yes || echo NO)
  say "python3.11 exited $rc: $(cat "$W/out")"
fi
echo "# bench/jit_attach.sh $CYCLES $PROG, $(date -u +%F), $(nproc) CPUs"
echo "cycles $ok, threads brought back from the cache $moved, mean translation $(echo "scale=3; $live / ($ok + 0.000001)" | bc) s, escapes while live $escapes, misses translated on demand $asked, output identical (xz) or every result checked right (python3.11): $same"
[ "$same" = yes ] && [ "$ok" -gt 0 ]
