#!/usr/bin/env bash
# bench/jit_pairs.sh N PROGRAM: `kerf jit main --plugin none` two ways at once, one per CPU
# (taskset), swapping CPUs each pair, N pairs; prints each pair's times and the ratio A/B.
# A is kerf as built; B is kerf with the environment in $B_ENV (default: frameless calls and
# chained returns off, `KERF_JIT_FRAMED_CALLS=1 KERF_JIT_NO_CHAINS=1`). PROGRAM is sqlite3 or
# python3.11 with bench/jit.sh's workloads. On a shared, noisy host, runs one after the other
# varied by 30 %; side by side, both runs meet the same noise.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:?pairs}; P=${2:?program}
B_ENV=${B_ENV:-"KERF_JIT_FRAMED_CALLS=1 KERF_JIT_NO_CHAINS=1"}
cargo build --release -p kerf >/dev/null 2>&1 || { echo "cargo build failed" >&2; exit 1; }
K=${CARGO_TARGET_DIR:-$PWD/target}/release/kerf
W=$(mktemp -d /tmp/kerf-jit-pairs.XXXXXX)
trap 'rm -rf "$W"' EXIT
export KERF_CACHE_DIR=$W/cache
python3 - "$W" <<'PY'
import sys
w = sys.argv[1]
sql = ["CREATE TABLE a(id INTEGER PRIMARY KEY, x INT, y TEXT);",
       "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<200000) INSERT INTO a SELECT i, (i*7919)%100003, printf('r%d', i%1000) FROM c;",
       "CREATE INDEX ax ON a(x);",
       "CREATE TABLE b(id INTEGER PRIMARY KEY, ax INT, z REAL);",
       "WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM c WHERE i<200000) INSERT INTO b SELECT i, (i*31)%100003, i*0.5 FROM c;",
       "CREATE INDEX bax ON b(ax);"]
for q in range(1, 7):
    sql += [f"SELECT count(*), sum(b.z) FROM a JOIN b ON a.x = b.ax WHERE a.y LIKE 'r{q}%';",
            "SELECT y, count(*), avg(x) FROM a GROUP BY y ORDER BY 2 DESC, 1 LIMIT 3;",
            f"SELECT count(*) FROM a WHERE x IN (SELECT ax FROM b WHERE z > {q}*10000);",
            "SELECT count(*) FROM a AS p JOIN a AS q ON p.x = q.id WHERE q.y > 'r5';"]
open(f'{w}/work.sql', 'w').write('\n'.join(sql) + '\n')
open(f'{w}/loop.py', 'w').write('''s = 0
for i in range(8000000):
    s += i * i % 7
d = {}
for i in range(300000):
    d[str(i)] = i
print(s, len(d))
''')
PY
case $P in
  python3.11) cmd=(/usr/bin/python3.11 "$W/loop.py") ;;
  sqlite3) cmd=(/usr/bin/sqlite3 :memory: ".read $W/work.sql") ;;
  *) echo "PROGRAM: sqlite3 or python3.11" >&2; exit 2 ;;
esac
run() { # A|B CPU -> seconds
  local envs=(KERF_PAIRS=1)
  [ "$1" = B ] && read -ra envs <<< "$B_ENV"
  local s e
  s=$(date +%s.%N)
  env "${envs[@]}" taskset -c "$2" "$K" jit main --plugin none -o /dev/null -- "${cmd[@]}" >/dev/null 2>&1
  e=$(date +%s.%N)
  echo "$e - $s" | bc
}
run A 0 >/dev/null; run B 1 >/dev/null  # the analysis cache and the hint of what ran
echo "# bench/jit_pairs.sh $N $P, $(date -u +%FT%TZ), B: $B_ENV"
for i in $(seq "$N"); do
  if (( i % 2 )); then ca=0; cb=1; else ca=1; cb=0; fi
  run A $ca > "$W/a" & run B $cb > "$W/b"; wait
  a=$(cat "$W/a"); b=$(cat "$W/b")
  echo "$P A $a B $b A/B $(echo "$a / $b" | bc -l | cut -c1-6)"
done
