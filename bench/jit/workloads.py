#!/usr/bin/env python3
"""bench/jit/workloads.py DIR: the JIT benchmarks' inputs, written into DIR (bench/jit.sh and
bench/jit_pairs.sh): `text`, 16 MB of random words for xz; `work.sql`, sqlite3's in-memory
workload (two tables of 200,000 rows, indexes, joins); `loop.py`, python3.11's pure-Python
loop. Seeded: the same files every time.
"""
import random, sys
w = sys.argv[1]
random.seed(1)
words = [''.join(random.choice('abcdefghijklmnopqrstuvwxyz') for _ in range(random.randint(2, 9))) for _ in range(5000)]
out, n = [], 0
while n < 16 << 20:
    line = ' '.join(random.choice(words) for _ in range(12)) + '\n'
    out.append(line)
    n += len(line)
open(f'{w}/text', 'w').write(''.join(out))
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
