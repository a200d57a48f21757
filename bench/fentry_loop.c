// Djprobe-table peer (runs in the guest): attaches an empty BPF fentry program to a kernel
// function (found by name in /sys/kernel/btf/vmlinux), then calls getppid() N times and prints
// nanoseconds per call. The program does nothing, so this is a lower bound on any BPF fentry
// probe's cost: the trampoline and the program call. Usage: fentry_loop FUNCTION N
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "kernel_trace/btf.h"

// The BTF id of the vmlinux FUNC called `name`, or 0.
static uint32_t btf_func_id(const char *name) {
    size_t len;
    char *b = slurp("/sys/kernel/btf/vmlinux", &len);
    long at;
    if (!b || len < sizeof(struct btf_header) || ((struct btf_header *)b)->magic != 0xeB9F)
        return 0;
    btf_walk(b, name, NULL, 0, &at);
    return at < 0 ? 0 : (uint32_t)at + 1;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: fentry_loop FUNCTION N\n");
        return 2;
    }
    uint32_t id = btf_func_id(argv[1]);
    if (!id) {
        fprintf(stderr, "no BTF FUNC %s\n", argv[1]);
        return 1;
    }
    struct bpf_insn prog[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = 0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    static char log[1 << 16];
    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.prog_type = BPF_PROG_TYPE_TRACING;
    a.expected_attach_type = BPF_TRACE_FENTRY;
    a.attach_btf_id = id;
    a.insns = (uint64_t)(uintptr_t)prog;
    a.insn_cnt = 2;
    a.license = (uint64_t)(uintptr_t)"GPL";
    a.log_buf = (uint64_t)(uintptr_t)log;
    a.log_size = sizeof log;
    a.log_level = 1;
    int pfd = syscall(SYS_bpf, BPF_PROG_LOAD, &a, sizeof a);
    if (pfd < 0) {
        perror("BPF_PROG_LOAD");
        fprintf(stderr, "%s\n", log);
        return 1;
    }
    memset(&a, 0, sizeof a);
    a.raw_tracepoint.prog_fd = pfd;
    int lfd = syscall(SYS_bpf, BPF_RAW_TRACEPOINT_OPEN, &a, sizeof a);
    if (lfd < 0) {
        perror("BPF_RAW_TRACEPOINT_OPEN (fentry attach)");
        return 1;
    }
    long n = atol(argv[2]);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++)
        syscall(SYS_getppid);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%.1f\n", ((t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec)) / n);
    return 0;
}
