// bench/ring_writer.c: what a call-trace record's reservation costs the writing thread on
// its own, with no reader and no kerf: one thread writes 2 x 10^8 compact records (a value's
// low half and a stream into an 8-byte slot of a 131,072-slot ring) in five ways, with WORK
// dependent multiply-adds of other work between records (0, 1, 2, 4 or 8). The tail follows
// the head every 1,024 records, so the ring is never full. Modes:
//   0 write, then publish by moving head with a plain cmpxchg (session 86's
//     first compact writer, unsafe against a handler that emits in between; see
//     kerf_codegen::ring)
//   1 write, then publish with a plain store (unsafe the same way; a floor)
//   2 kerf's 32-byte record: reserve with cmpxchg, then time 0, length, stream, value, seq
//   3 reserve with xadd, room checked after, value and stream stored (no completion mark)
//   4 nothing (the loop and the work alone)
//   5 room checked before and after an xadd, the lap's mark in the stream's bit 31
// Build and run: gcc -O2 -o ring_writer bench/ring_writer.c && ./ring_writer MODE [WORK]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define SLOTS (1u << 17)
static struct {
    uint64_t head __attribute__((aligned(64)));
    uint64_t tail __attribute__((aligned(64)));
    uint64_t slots[SLOTS] __attribute__((aligned(64)));
} r;
static volatile uint64_t sink;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODE [WORK]\n", argv[0]);
        return 2;
    }
    long n = 200000000;
    int mode = atoi(argv[1]), work = argc > 2 ? atoi(argv[2]) : 0;
    uint64_t acc = 1;
    double t0 = now();
    for (long i = 0; i < n; i++) {
        for (int w = 0; w < work; w++)
            acc = acc * 6364136223846793005ull + 1442695040888963407ull;
        switch (mode) {
        case 0:
            __asm__ volatile("1: mov (%0), %%rax\n mov %%rax, %%rdx\n sub 64(%0), %%rdx\n js 1b\n"
                             " cmp $0x20000, %%rdx\n jae 2f\n mov $0x1ffff, %%edx\n and %%rax, %%rdx\n"
                             " mov %k1, 128(%0,%%rdx,8)\n movl $7, 132(%0,%%rdx,8)\n"
                             " lea 1(%%rax), %%rdx\n cmpxchg %%rdx, (%0)\n jne 1b\n2:\n"
                             :: "r"(&r), "r"(i) : "rax", "rdx", "memory", "cc");
            break;
        case 1:
            __asm__ volatile("1: mov (%0), %%rax\n mov %%rax, %%rdx\n sub 64(%0), %%rdx\n js 1b\n"
                             " cmp $0x20000, %%rdx\n jae 2f\n mov $0x1ffff, %%edx\n and %%rax, %%rdx\n"
                             " mov %k1, 128(%0,%%rdx,8)\n movl $7, 132(%0,%%rdx,8)\n"
                             " lea 1(%%rax), %%rdx\n mov %%rdx, (%0)\n2:\n"
                             :: "r"(&r), "r"(i) : "rax", "rdx", "memory", "cc");
            break;
        case 2: // (32-byte slots: a quarter as many in the same array)
            __asm__ volatile("1: mov (%0), %%rax\n mov %%rax, %%rdx\n sub 64(%0), %%rdx\n js 1b\n"
                             " cmp $0x8000, %%rdx\n jae 2f\n lea 1(%%rax), %%rdx\n"
                             " cmpxchg %%rdx, (%0)\n jne 1b\n and $0x7fff, %%rax\n shl $5, %%rax\n"
                             " movq $0, 136(%0,%%rax)\n movl $8, 148(%0,%%rax)\n"
                             " movl $7, 144(%0,%%rax)\n mov %1, 152(%0,%%rax)\n"
                             " mov %%rdx, 128(%0,%%rax)\n2:\n"
                             :: "r"(&r), "r"(i) : "rax", "rdx", "memory", "cc");
            break;
        case 3:
            __asm__ volatile(" mov $1, %%eax\n xadd %%rax, (%0)\n mov %%rax, %%rdx\n sub 64(%0), %%rdx\n"
                             " cmp $0x20000, %%rdx\n jae 2f\n mov $0x1ffff, %%edx\n and %%rax, %%rdx\n"
                             " mov %k1, 128(%0,%%rdx,8)\n movl $7, 132(%0,%%rdx,8)\n2:\n"
                             :: "r"(&r), "r"(i) : "rax", "rdx", "memory", "cc");
            break;
        case 5:
            __asm__ volatile(" mov (%0), %%rax\n sub 64(%0), %%rax\n cmp $0x20000, %%rax\n jae 2f\n"
                             " mov $1, %%eax\n xadd %%rax, (%0)\n mov %%rax, %%rdx\n sub 64(%0), %%rdx\n"
                             " cmp $0x20000, %%rdx\n jae 2f\n mov $0x1ffff, %%edx\n and %%rax, %%rdx\n"
                             " mov %k1, 128(%0,%%rdx,8)\n shl $14, %%eax\n and $0x80000000, %%eax\n"
                             " xor $0x80000007, %%eax\n mov %%eax, 132(%0,%%rdx,8)\n2:\n"
                             :: "r"(&r), "r"(i) : "rax", "rdx", "memory", "cc");
            break;
        default:
            break;
        }
        if ((i & 1023) == 0)
            r.tail = r.head;
    }
    sink = acc;
    printf("mode %d work %d: %.2f ns a record\n", mode, work, (now() - t0) / n * 1e9);
    return 0;
}
