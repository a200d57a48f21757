// Per-hit cost benchmark target: after SIGUSR1 (or at once with "now"), calls probe_me()
// N times in a loop and prints the nanoseconds per iteration. Usage: hitloop N [now]
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static atomic_int go;
static volatile uint64_t sink;

__attribute__((noinline)) uint64_t probe_me(uint64_t x) {
    __asm__ volatile("" ::: "memory");
    return x * 3 + 1;
}

static void on_go(int s) { (void)s; atomic_store(&go, 1); }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 10000000;
    signal(SIGUSR1, on_go);
    printf("pid %d\nready\n", getpid());
    fflush(stdout);
    if (argc > 2)
        go = 1;
    while (!atomic_load(&go))
        usleep(1000);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t x = 1;
    for (long i = 0; i < n; i++)
        x = probe_me(x);
    clock_gettime(CLOCK_MONOTONIC, &b);
    sink = x;
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.3f ns/iter\n", ns / n);
    return 0;
}
