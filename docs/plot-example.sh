#!/bin/bash
# docs/plot-example.sh: makes docs/plot-example.png, the README's picture of `kerf plot`:
# Debian's sqlite3 inserts 2400 rows into a file database, each in a transaction of its own
# (an fdatasync each) except rows 1201-1800 (one transaction), with a query every 20 rows;
# kerf times three functions with virtual time, recording every 0.1 s, and plots the record.
# Root; installs sqlite3 (apt).
set -euo pipefail
cd "$(dirname "$0")/.."
dpkg -s sqlite3 >/dev/null 2>&1 || apt-get install -y -q sqlite3 >/dev/null
cargo build --release -p kerf >/dev/null
W=$(mktemp -d /tmp/kerf-plot-example.XXXXXX)
trap 'rm -rf "$W"' EXIT
python3 - "$W/work.sql" <<'PY'
import sys
with open(sys.argv[1], "w") as f:
    f.write("CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);\n")
    for i in range(2400):
        f.write(f"INSERT INTO t(b,c) VALUES('{'x' * (i % 50)}', {i}.5);\n")
        if i % 20 == 0:
            f.write("SELECT count(*), sum(c) FROM t WHERE b LIKE '%xx%';\n")
        if i == 1200:
            f.write("BEGIN;\n")
        if i == 1800:
            f.write("COMMIT;\n")
PY
target/release/kerf time --virtual --interval 0.1 --record "$W/run.jsonl" \
  sqlite3_step sqlite3_prepare_v2 libc:fdatasync -- sqlite3 "$W/ex.db" < "$W/work.sql" >/dev/null
target/release/kerf plot "$W/run.jsonl" -o docs/plot-example.png
echo "docs/plot-example.png written"
