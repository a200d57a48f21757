// bench/cover/load.c: a long-running CPU-bound program for bench/cover.sh. Rounds of an
// in-memory SQLite workload (create, insert with an index, query, drop) through Debian's
// libsqlite3, for SECONDS seconds; every 100 ms it prints "MILLISECONDS ROUNDS" (time since
// its start and rounds finished), so throughput over time is measured by the program itself
// whatever runs around it. The prototypes are declared here: no -dev package is needed.
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef struct sqlite3 sqlite3;
int sqlite3_open(const char *, sqlite3 **);
int sqlite3_exec(sqlite3 *, const char *, int (*)(void *, int, char **, char **), void *, char **);
int sqlite3_close(sqlite3 *);

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static int row(void *acc, int n, char **v, char **names) {
    (void)names;
    for (int i = 0; i < n; i++)
        *(long *)acc += v[i] ? atol(v[i]) : 0;
    return 0;
}

static const char *ROUND =
    "create table t(a integer primary key, b text, c real);"
    "with recursive s(x) as (select 1 union all select x+1 from s where x<400)"
    " insert into t select x, printf('%08x', (x*2654435761) % 4294967296), x*0.5 from s;"
    "create index tb on t(b);"
    "select count(*), sum(a) from t where b > '8' and c < 150;"
    "select max(length(b)) from t group by a % 7;"
    "drop table t;";

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10;
    sqlite3 *db;
    if (sqlite3_open(":memory:", &db) != 0)
        return 1;
    long acc = 0, rounds = 0;
    double start = now(), next = start + 0.1, end = start + seconds;
    for (;;) {
        char *err = NULL;
        if (sqlite3_exec(db, ROUND, row, &acc, &err) != 0) {
            fprintf(stderr, "sqlite: %s\n", err ? err : "?");
            return 1;
        }
        rounds++;
        double t = now();
        if (t >= next) {
            printf("%.0f %ld\n", (t - start) * 1e3, rounds);
            fflush(stdout);
            next += 0.1;
        }
        if (t >= end)
            break;
    }
    sqlite3_close(db);
    fprintf(stderr, "checksum %ld\n", acc / rounds);
    return 0;
}
