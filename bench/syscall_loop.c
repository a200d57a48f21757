// Djprobe-table benchmark target (runs in the guest): calls getppid() N times in a tight loop
// and prints nanoseconds per call, so a probe's cost per hit on the kernel's getppid path is
// its time minus the bare loop's. Usage: syscall_loop N
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 1000000;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < n; i++)
        syscall(SYS_getppid);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec);
    printf("%.1f\n", ns / n);
    return 0;
}
