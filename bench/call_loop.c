// bench/call_loop.c: a loop of three calls to small leaves, N iterations (default 30 M):
// what a call and its return cost under `kerf jit main` against native, with callees
// copied in place of their calls and without (`KERF_JIT_INLINE_INSNS=0`). Build with
// `gcc -O2 -o call_loop bench/call_loop.c`; prints one number, the same under any runner.
#include <stdio.h>
#include <stdlib.h>

__attribute__((noinline)) long leaf1(long x) { return x * 3 + 1; }
__attribute__((noinline)) long leaf2(long x) { return x ^ (x >> 3); }
__attribute__((noinline)) long leaf3(long x, long y) { return x + y * 7; }

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 30000000, s = 0;
    for (long i = 0; i < n; i++) {
        s = leaf1(s);
        s = leaf2(s);
        s = leaf3(s, i);
    }
    printf("%ld\n", s);
    return 0;
}
