// bench/ring_model.c: a model of the call trace's per-thread ring with no kerf involved, to
// weigh record sizes and what the reader does with the lines it has read. A writer thread
// emits N records (a probe id and a stack pointer) as fast as it can; a reader thread on the
// other CPU takes them, counts them per probe and keeps a call stack, as kerf's reader does.
// Reservation: `xadd` on the head (one instruction, as a signal handler between two of the
// writer's would need). Completion: the record's first word carries the lap's parity, so the
// reader writes nothing into the slots, only its tail, every 4,096 records. A writer that
// finds the ring full yields.
//
// Build and run (N default 300 M), each variant on its own:
//   gcc -O2 -pthread -DWORDS=4 -o ring_model bench/ring_model.c && ./ring_model
//   gcc -O2 -pthread -DWORDS=4 -DFLUSH -o ring_model bench/ring_model.c && ./ring_model
//   gcc -O2 -pthread -DWORDS=1 [-DFLUSH] ...
// WORDS=4 is kerf's 32-byte slot (seq, time, stream and length, stack pointer); WORDS=1 an
// 8-byte record (probe id, parity and the stack pointer's low half). FLUSH: the reader
// gives back every line it has read with `clflushopt`, as kerf's reader does since session
// 85 (bench/RESULTS.md). LOGN: log2 of the slots (default 17, kerf's 131,072).
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#ifndef WORDS
#define WORDS 4
#endif
#ifndef LOGN
#define LOGN 17
#endif
#define SLOTS (1ul << LOGN)
#define PER_LINE (8 / WORDS) // records in a 64-byte line
#ifndef FLUSH_BEHIND
#define FLUSH_BEHIND 0 // lines between the one just read and the one flushed
#endif

static uint64_t ring[SLOTS * WORDS] __attribute__((aligned(4096)));
static struct {
    volatile uint64_t head __attribute__((aligned(64)));
    volatile uint64_t tail __attribute__((aligned(64)));
} r;
static volatile int done;
static uint64_t counts[1024];
static uint32_t stack[4096]; // the reader's open calls (global: its stores are kept)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// The parity that marks a record of lap `n >> LOGN`: 1 on lap 0, so that the zeroed ring
// holds no record.
static inline uint64_t parity(uint64_t n) { return ((n >> LOGN) & 1) ^ 1; }

static inline void emit(uint32_t probe, uint32_t sp) {
    uint64_t n = 1;
    __asm__ volatile("xadd %0, %1" : "+r"(n), "+m"(r.head)::"memory");
    while (__builtin_expect(n - r.tail >= SLOTS, 0))
        sched_yield();
    volatile uint64_t *slot = ring + (n & (SLOTS - 1)) * WORDS;
    uint64_t first = (uint64_t)probe << 1 | parity(n);
    if (WORDS == 1) {
        slot[0] = (uint64_t)sp << 32 | first;
    } else {
        // kerf's order: time, header, value, then the word that completes the record.
        slot[1] = 0;
        slot[2] = 8ul << 32 | probe;
        slot[3] = sp;
        slot[0] = first;
    }
}

static void *reader(void *arg) {
    (void)arg;
    uint64_t pos = 0;
    int depth = 0;
    for (;;) {
        uint64_t start = pos;
        for (;;) {
            volatile uint64_t *slot = ring + (pos & (SLOTS - 1)) * WORDS;
            uint64_t first = slot[0];
            if ((first & 1) != parity(pos))
                break;
            uint32_t probe = (uint32_t)first >> 1;
            uint32_t sp = WORDS == 1 ? (uint32_t)(first >> 32) : (uint32_t)slot[3];
            if (probe & 1) {
                if (depth)
                    depth--;
            } else if (depth < 4096) {
                stack[depth++] = sp;
            }
            counts[(probe >> 1) & 1023]++;
            pos++;
#ifdef FLUSH
            if (pos % PER_LINE == 0)
                __asm__ volatile("clflushopt %0" ::"m"(
                    ring[((pos - 1 - FLUSH_BEHIND * PER_LINE) & (SLOTS - 1)) * WORDS]));
#endif
            if (pos - start >= 4096) {
                r.tail = pos;
                start = pos;
            }
        }
        r.tail = pos;
        if (pos == start) {
            if (done && pos == r.head)
                break;
            struct timespec nap = {0, 500000};
            nanosleep(&nap, 0);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 300000000;
    pthread_t t;
    pthread_create(&t, 0, reader, 0);
    double t0 = now();
    for (long i = 0; i < n; i++) {
        // Calls and returns alternate over 64 functions, at a few stack depths.
        uint32_t probe = 2 * ((i >> 1) & 63) + (i & 1);
        emit(probe, 0x7ffe0000u - (i & 7) * 16);
    }
    done = 1;
    pthread_join(t, 0);
    double t1 = now();
    printf("%d-byte records%s, %lu slots: %.2f ns a record, writer and reader together\n",
           8 * WORDS,
#ifdef FLUSH
           " (lines flushed)",
#else
           "",
#endif
           SLOTS, (t1 - t0) / n * 1e9);
    return 0;
}
