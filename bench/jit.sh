#!/bin/bash
# bench/jit.sh [ROUNDS]: `kerf jit` on real CPU-bound programs nobody here wrote (issue 14's
# "Performance"), side by side with Valgrind in one run. Each program runs whole from `main`:
#   xz -T1 -6 on 16 MB of generated text; sqlite3 with an in-memory SQL workload (200k rows
#   in two tables, indexes, joins, grouping); Debian's python3.11 on a pure-Python loop.
# Per program: native; `kerf jit main --plugin none` (the code cache alone: what main reaches
# translated ahead, the rest on demand); `kerf jit main --plugin none --whole` (every module
# translated ahead); `kerf jit main --plugin blocks` (every block's count: counters off a
# spanning tree of each function's flow, `--counters tree`, the default since session 73,
# weighted by the last counting run, which a warm-up run before the rounds makes, the other
# counts worked out); `kerf-every`: the same with a counter in every block (`--counters
# every`, the default before); `kerf jit main
# --plugin branches` (both sides of every conditional branch counted);
# `kerf-none-frame`: as kerf-none with every `ret` through the lookup frame
# (`KERF_JIT_FRAME_RETS`, the code before frameless returns, for comparison);
# `kerf-none-lookup`: as kerf-none with every jump table through the lookup table
# (`KERF_JIT_LOOKUP_TABLES`, the code before translated table copies, for comparison);
# `kerf-none-slots`: as kerf-none with every jump through a PLT stub's GOT slot through the
# lookup (`KERF_JIT_SLOT_LOOKUP`, the code before slot guards); `kerf-none-onepiece`: as
# kerf-none with each module's translation ahead in one piece on one core
# (`KERF_JIT_PIECE_BLOCKS`, the start before pieces translated side by side);
# `kerf-blocks-noslabs`: as kerf-blocks with no per-thread counter slabs (`KERF_JIT_NO_SLABS`:
# each counter checks for the owner thread, the code before slabs); `kerf-calls-noslabs`: as
# kerf-calls with no slabs (each record looks its thread's ring up in the thread table, the
# code before rings kept in slabs);
# `kerf-tree`: as kerf-blocks, with `--counters tree` said;
# `kerf-none-noinline`, `kerf-blocks-noinline`: as kerf-none and kerf-blocks with no callee
# copied in place of its call (`KERF_JIT_INLINE_INSNS=0`, the code before inlined calls);
# `kerf-none-framedcalls`, `kerf-blocks-framedcalls`: as kerf-none and kerf-blocks with every
# indirect call through the framed probe (`KERF_JIT_FRAMED_CALLS`, the code before frameless
# indirect calls);
# `kerf-none-nochains`: as kerf-none with every frameless `ret` straight to the table
# (`KERF_JIT_NO_CHAINS`, the code before chained returns);
# `kerf-none-framedparts`: as kerf-none with the `ret`s of `.cold` parts that return for
# their parents framed (`KERF_JIT_FRAMED_PARTS`, the code before such parts were known);
# `kerf-none-noprofile`: as kerf-none with no return chains from the last counting run's
# counts (`KERF_JIT_NO_PROFILE`, the code before them; the bench's counting warm-up run
# leaves those counts whenever a blocks mode is asked for);
# `kerf-none-iced`: as kerf-none with every translation laid out by iced's block encoder
# (`KERF_JIT_ICED_ENCODER`, the start before kerf's own encoder);
# `kerf-none-nohints`: as kerf-none with `--no-hints` (neither the hint of what ran nor
# marks: the walk from the roots, as a first run translates it);
# `kerf-none-first`: as kerf-none with the hint of what ran put aside for the run (a first
# run: the walk, every function marked until it runs; the hint is put back after);
# `kerf-old-none`, `kerf-old-blocks`, `kerf-old-calls`: the same with another kerf binary, `KERF_OLD=PATH`
# (an earlier commit's build, for a before/after in one run), with an analysis cache of its own
# (in one directory the two builds' check stamps replaced each other, and every run of both
# checked its analyses again: about 0.1-0.2 s on sqlite3);
# `valgrind --tool=none`; `valgrind --tool=exp-bbv` (Valgrind's block-vector counter);
# `stalker-none`, `stalker-blocks`, `stalker-calls`: Frida's Stalker following the thread that
# calls `main`, with nothing added, with an inline counter at every block, and with its call
# and return events (bench/jit/stalker.py; Frida 17.25.2 in a virtualenv of its own under
# ~/.cache/kerf-bench, since bench/cover.sh keeps 16.5.9, whose Stalker breaks glibc's AVX-512
# string functions on this machine: xz and python3.11 died at once under it). Wall
# time from launch to exit (kerf's analysis, from its cache filled by two warm-up runs, and
# translation included; what ran in them is translated ahead and nothing else, as in any
# later run of the same program from the same roots: the first run marks what runs, the
# second also learns the functions entered other than at their entry, such as cold parts
# jumped into half-way), median of ROUNDS (default 3), and the ratio to native. Every run's
# output is checked against the native run's.
# Installs valgrind (apt) and, when a stalker mode is asked for, python3-venv (apt) and
# frida (pip, into its virtualenv) if missing.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
say() { echo "bench: $*" >&2; }
command -v valgrind >/dev/null || { say "installing valgrind"; apt-get install -y -q valgrind >/dev/null; }
for p in xz sqlite3; do command -v $p >/dev/null || { say "installing $p"; apt-get install -y -q ${p/xz/xz-utils} >/dev/null; }; done
[ -x /usr/bin/python3.11 ] || { say "installing python3.11"; apt-get install -y -q python3.11 >/dev/null; }
cargo build --release -p kerf >/dev/null 2>&1 || { say "cargo build failed"; exit 1; }
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kerf
FRIDA_PY=$HOME/.cache/kerf-bench/frida-17.25.2/bin/python
if [[ " ${MODES:-} " == *" stalker-"* ]] && ! "$FRIDA_PY" -c 'import frida' 2>/dev/null; then
  say "installing frida 17.25.2 (pip, in ${FRIDA_PY%/bin/python})"
  python3 -m venv "${FRIDA_PY%/bin/python}" 2>/dev/null || { apt-get install -y -q python3-venv >/dev/null && python3 -m venv "${FRIDA_PY%/bin/python}"; }
  "${FRIDA_PY%/python}/pip" install -q frida==17.25.2 || { say "frida install failed"; exit 1; }
fi
W=$(mktemp -d /tmp/kerf-jit-bench.XXXXXX)
trap 'rm -rf "$W"' EXIT
# A step that fails ends the run (`set -e`): say which, and what kerf said last, before the
# work directory goes.
trap 'say "failed (exit $?) at line $LINENO: $BASH_COMMAND"; tail -5 "$W/kerf.err" >&2 2>/dev/null' ERR
export KERF_CACHE_DIR=$W/cache
# python3.11's string hashes from one seed in every run, native and under every tool alike:
# with a random seed the loop's dict probes differ run to run (seeds 0-7 natively: 1.94-2.47 s
# for three times this loop), noise as big as what is measured.
export PYTHONHASHSEED=0
python3 bench/jit/workloads.py "$W"
declare -A CMD=(
  [xz]="/usr/bin/xz -T1 -6 -c $W/text"
  [sqlite3]="/usr/bin/sqlite3 :memory: .read\ $W/work.sql"
  [python3.11]="/usr/bin/python3.11 $W/loop.py"
)
# main's address in each executable, for Stalker (kerf's analysis finds it in stripped ones).
declare -A MAIN
if [[ " ${MODES:-} " == *" stalker-"* ]]; then
  for prog in ${PROGS:-xz sqlite3 python3.11}; do
    MAIN[$prog]=$("$K" analyze "/usr/bin/$prog" --functions --json | python3 -c "import json,sys; print(next(f['entry'] for f in json.load(sys.stdin)['function_list'] if f['name'] == 'main'))")
  done
fi
run() { # MODE PROGRAM -> output on stdout
  local mode=$1 prog=$2
  local -a cmd
  eval "cmd=(${CMD[$prog]})"
  case $mode in
    native) "${cmd[@]}" ;;
    kerf-none) "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-frame) KERF_JIT_FRAME_RETS=1 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-lookup) KERF_JIT_LOOKUP_TABLES=1 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-slots) KERF_JIT_SLOT_LOOKUP=1 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-onepiece) KERF_JIT_PIECE_BLOCKS=1000000000 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-nochains) KERF_JIT_NO_CHAINS=1 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-noprofile) KERF_JIT_NO_PROFILE=1 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-framedparts) KERF_JIT_FRAMED_PARTS=1 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-framedcalls) KERF_JIT_FRAMED_CALLS=1 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-blocks-framedcalls) KERF_JIT_FRAMED_CALLS=1 "$K" jit main --plugin blocks -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-iced) KERF_JIT_ICED_ENCODER=1 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-nohints) "$K" jit main --plugin none --no-hints -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-none-first)
      mkdir -p "$W/ran" && find "$KERF_CACHE_DIR" -maxdepth 1 -name '*.ran-*' -exec mv -t "$W/ran" {} +
      "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err"
      find "$KERF_CACHE_DIR" -maxdepth 1 -name '*.ran-*' -delete && find "$W/ran" -type f -exec mv -t "$KERF_CACHE_DIR" {} + ;;
    kerf-none-noinline) KERF_JIT_INLINE_INSNS=0 "$K" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-blocks-noslabs) KERF_JIT_NO_SLABS=1 "$K" jit main --plugin blocks -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-blocks-noinline) KERF_JIT_INLINE_INSNS=0 "$K" jit main --plugin blocks -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-whole) "$K" jit main --plugin none --whole -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-blocks) "$K" jit main --plugin blocks -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-tree) "$K" jit main --plugin blocks --counters tree -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-every) "$K" jit main --plugin blocks --counters every -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-old-none) KERF_CACHE_DIR=$W/cache-old "$KERF_OLD" jit main --plugin none -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-old-blocks) KERF_CACHE_DIR=$W/cache-old "$KERF_OLD" jit main --plugin blocks -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-old-calls) KERF_CACHE_DIR=$W/cache-old "$KERF_OLD" jit main --plugin calls -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-branches) "$K" jit main --plugin branches -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-calls) "$K" jit main --plugin calls -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-calls-file) "$K" jit main --plugin calls --trace "$W/calls.raw" -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    kerf-calls-noslabs) KERF_JIT_NO_SLABS=1 "$K" jit main --plugin calls -o "$W/summary" --json -- "${cmd[@]}" 2>>"$W/kerf.err" ;;
    stalker-*) "$FRIDA_PY" bench/jit/stalker.py "${mode#stalker-}" "${MAIN[$prog]}" "${cmd[@]}" 2>>"$W/stalker.err"
      tail -1 "$W/stalker.err" | sed "s/^/$prog $mode /" >> "$W/stalker.stats" ;;
    vg-none) valgrind -q --tool=none "${cmd[@]}" ;;
    vg-bbv) valgrind -q --tool=exp-bbv --bb-out-file="$W/bb.out" "${cmd[@]}" ;;
  esac
}
MODES=${MODES:-"native kerf-none kerf-whole kerf-blocks kerf-branches kerf-calls kerf-calls-file vg-none vg-bbv"}
echo "# bench/jit.sh $ROUNDS, $(date -u +%F), $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), kernel $(uname -r)"
for prog in ${PROGS:-xz sqlite3 python3.11}; do
  run native $prog | md5sum > "$W/$prog.expected"
  run kerf-none $prog > /dev/null  # the analysis cache, and the hint of what ran, filled
  run kerf-none $prog > /dev/null
  if [ -n "${KERF_OLD:-}" ]; then run kerf-old-none $prog > /dev/null; run kerf-old-none $prog > /dev/null; fi
  # (The tree's placement takes its weights from the last run that counted.)
  if [[ " $MODES " == *" kerf-tree "* || " $MODES " == *" kerf-blocks "* || " $MODES " == *" kerf-none-noprofile "* ]]; then run kerf-tree $prog > /dev/null; fi
  for r in $(seq "$ROUNDS"); do
    for m in $MODES; do
      say "$prog round $r/$ROUNDS: $m"
      s=$(date +%s.%N)
      run $m $prog | md5sum > "$W/$prog.$m.sum"
      e=$(date +%s.%N)
      echo "$prog $m $(echo "$e - $s" | bc)" >> "$W/times"
      cmp -s "$W/$prog.expected" "$W/$prog.$m.sum" || echo "$prog $m" >> "$W/wrong"
      if [[ $m == kerf-calls* || $m == kerf-old-calls ]]; then
        python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['calls']; print(sys.argv[2], sys.argv[3], 'calls', c['calls'], 'returns', c['returns'], 'lost', c['lost'], 'unmatched', c['unmatched'])" "$W/summary" $prog $m >> "$W/kerf.calls"
      fi
      if [[ $m == kerf-* ]]; then
        python3 -c "import json,sys; j=json.load(open(sys.argv[1]))['jit']; d=j['on_demand']; print(sys.argv[2], sys.argv[3], j['escapes'], j['returns_out'], j['functions'], j['blocks'], round(j['seconds']['translate'], 2), d['asked'], d['functions'], round(d['seconds'], 3))" "$W/summary" $prog $m >> "$W/kerf.stats"
      fi
    done
  done
done
python3 - "$W" "$MODES" <<'PY'
import statistics, sys, os
w, modes = sys.argv[1], sys.argv[2].split()
t = {}
for l in open(f"{w}/times"):
    p, m, s = l.split()
    t.setdefault((p, m), []).append(float(s))
wrong = set(tuple(l.split()) for l in open(f"{w}/wrong")) if os.path.exists(f"{w}/wrong") else set()
print(f"{'program':<12}" + "".join(f"{m:>14}" for m in modes))
for p in [p for p in ["xz", "sqlite3", "python3.11"] if (p, "native") in t]:
    base = statistics.median(t[(p, "native")])
    cells = []
    for m in modes:
        med = statistics.median(t[(p, m)])
        mark = " WRONG" if (p, m) in wrong else ""
        cells.append(f"{med:7.2f}s {med / base:4.2f}x{mark}" if m != "native" else f"{med:7.2f}s")
    print(f"{p:<12}" + "".join(f"{c:>14}" for c in cells))
print("# kerf runs (last round): program mode escapes returns_out functions blocks translate_s, then on demand: misses_asked functions_added serving_s")
last = {}
for l in open(f"{w}/kerf.stats"):
    f = l.split()
    last[(f[0], f[1])] = l.strip()
for k in sorted(last):
    print("#", last[k])
if os.path.exists(f"{w}/kerf.calls"):
    print("# call trace (every run): program mode calls returns lost unmatched")
    for l in open(f"{w}/kerf.calls"):
        print("#", l.strip())
if os.path.exists(f"{w}/stalker.stats"):
    print("# Stalker (last round): program mode what it counted")
    last = {}
    for l in open(f"{w}/stalker.stats"):
        f = l.split(maxsplit=2)
        last[(f[0], f[1])] = l.strip()
    for k in sorted(last):
        print("#", last[k])
if wrong:
    print("# OUTPUT DIFFERED:", sorted(wrong))
PY
