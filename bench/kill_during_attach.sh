#!/bin/bash
# bench/kill_during_attach.sh [TRIES]: how often SIGKILL of `kerf jit -p` during its attach
# harms the program (DESIGN: kerf killed at any moment leaves the program running). Each
# try runs python3.11 on a json + sha256 loop (about 4 s), attaches `kerf jit -p PID
# libc:malloc --plugin blocks` a second in, kills kerf with SIGKILL 0.15-0.6 s later, and
# records the program's exit status (0: unharmed; 133: SIGTRAP; 139: SIGSEGV). KERF=PATH
# picks the build (default: this tree's). WHEN=held kills kerf instead while it holds the
# program's threads: a watcher polls the program's TracerPid and kills kerf 0-3 ms after it
# first becomes non-zero (the attach's stop, where its injected system calls are made).
# WHEN=removal runs kerf with --duration 0.4 and kills it 0-3 ms into the first stop that
# begins 0.3 s or more after the attach's (the removal's, where threads in the code cache
# are single-stepped out). A try harms the program if it dies or its output differs.
set -u
cd "$(dirname "$0")/.."
K=${KERF:-$PWD/target/release/kerf}
TRIES=${1:-30}
W=$(mktemp -d)
cat > "$W/loop.py" <<'PY'
import hashlib, json, sys
h = hashlib.sha256()
for k in range(int(sys.argv[1])):
    h.update(json.dumps({"k": k, "v": [str(j) for j in range(40)]}).encode())
print(h.hexdigest())
PY
cat > "$W/held.py" <<'PY'
import os, random, signal, sys, time
pid, kerf, after = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
end = time.monotonic() + 10
def tracer():
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(l for l in f if l.startswith("TracerPid:")).split()[1]
    except (OSError, StopIteration):
        return None
skip_until = None
while time.monotonic() < end:
    t = tracer()
    if t is None:
        break
    if t != "0":
        if skip_until is None and after > 0:
            skip_until = time.monotonic() + after
            while tracer() not in ("0", None) or time.monotonic() < skip_until:
                pass
            continue
        time.sleep(random.uniform(0, 0.003))
        print("held", flush=True)
        break
try:
    os.kill(kerf, signal.SIGKILL)
except OSError:
    pass
PY
want=$(/usr/bin/python3.11 "$W/loop.py" 600000)
bad=0
held=0
for i in $(seq "$TRIES"); do
  /usr/bin/python3.11 "$W/loop.py" 600000 > "$W/out" & pid=$!
  sleep 1
  case "${WHEN:-}" in
    removal) dur=(--duration 0.4); after=0.3 ;;
    *) dur=(); after=0 ;;
  esac
  "$K" jit -p $pid libc:malloc --plugin blocks "${dur[@]}" > /dev/null 2>&1 & kp=$!
  if [ -n "${WHEN:-}" ]; then
    /usr/bin/python3.11 "$W/held.py" $pid $kp $after > "$W/held"
    grep -q held "$W/held" && held=$((held + 1))
  else
    sleep 0.$((RANDOM % 45 + 15)); kill -9 $kp 2>/dev/null
  fi
  wait $pid; rc=$?
  [ $rc -ne 0 ] || [ "$(cat "$W/out")" != "$want" ] && bad=$((bad + 1))
  echo "try $i: program exit $rc"
done 2>/dev/null
echo "harmed $bad of $TRIES${WHEN:+ (kerf killed while it held the threads: $held)}"
rm -rf "$W"
