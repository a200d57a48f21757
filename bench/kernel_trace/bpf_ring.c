// Kernel tracer peer (runs in the guest, for bench/kernel_trace_cost.sh): a BPF program that
// writes one event per call of a kernel function into a BPF ring buffer, with the fields kerf's
// event has in that benchmark: the time (bpf_ktime_get_ns), the first argument, and the u64 it
// points to (read with bpf_probe_read_kernel, which survives a bad pointer as kerf's read does).
// Attached as a kprobe (perf_event_open on the kprobe PMU) or as fentry (BTF of the function's
// module, found in /sys/kernel/btf). A consumer drains the ring through its mmap, as a user
// space tracer would, and counts the events; SIGINT or SIGTERM detaches and prints
// "events N". Raw bpf(2) calls only, so that the guest needs nothing but this static binary.
// Usage: bpf_ring kprobe|fentry FUNCTION [MODULE]
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define RING_BYTES (4u << 20)

static long bpf(int cmd, union bpf_attr *a) { return syscall(SYS_bpf, cmd, a, sizeof *a); }

static void die(const char *what) {
    perror(what);
    exit(1);
}

#include "btf.h"

// The BTF type id of FUNC `func` in module `module` (or vmlinux) and, for a module, an fd of
// its BTF object (the program's attach_btf_obj_fd).
static uint32_t btf_func(const char *func, const char *module, int *obj_fd) {
    size_t vlen, mlen;
    char *v = slurp("/sys/kernel/btf/vmlinux", &vlen);
    if (!v)
        die("/sys/kernel/btf/vmlinux");
    struct btf_header *vh = (struct btf_header *)v;
    long at;
    uint32_t vtypes = btf_walk(v, module ? NULL : func, NULL, 0, &at);
    *obj_fd = 0;
    if (!module)
        return at < 0 ? 0 : (uint32_t)at + 1;
    char path[256];
    snprintf(path, sizeof path, "/sys/kernel/btf/%s", module);
    char *m = slurp(path, &mlen);
    if (!m)
        die(path);
    // Split BTF: the module's ids follow vmlinux's (id 0 is void), its string offsets follow
    // vmlinux's strings.
    btf_walk(m, func, v + vh->hdr_len + vh->str_off, vh->str_len, &at);
    if (at < 0)
        return 0;
    // The module's BTF object: the loaded BTF whose name is the module's.
    union bpf_attr a;
    for (uint32_t id = 0;;) {
        memset(&a, 0, sizeof a);
        a.start_id = id;
        if (bpf(BPF_BTF_GET_NEXT_ID, &a))
            break;
        id = a.next_id;
        memset(&a, 0, sizeof a);
        a.btf_id = id;
        int fd = bpf(BPF_BTF_GET_FD_BY_ID, &a);
        if (fd < 0)
            continue;
        char name[64] = {0};
        struct bpf_btf_info info;
        memset(&info, 0, sizeof info);
        info.name = (uint64_t)(uintptr_t)name;
        info.name_len = sizeof name;
        memset(&a, 0, sizeof a);
        a.info.bpf_fd = fd;
        a.info.info_len = sizeof info;
        a.info.info = (uint64_t)(uintptr_t)&info;
        if (!bpf(BPF_OBJ_GET_INFO_BY_FD, &a) && !strcmp(name, module)) {
            *obj_fd = fd;
            return vtypes + (uint32_t)at + 1;
        }
        close(fd);
    }
    fprintf(stderr, "no loaded BTF object named %s\n", module);
    exit(1);
}

#define INSN(c, d, s, o, i) ((struct bpf_insn){.code = (c), .dst_reg = (d), .src_reg = (s), .off = (o), .imm = (i)})

static volatile sig_atomic_t stop;
static void on_signal(int s) { (void)s; stop = 1; }

int main(int argc, char **argv) {
    if (argc < 3 || (strcmp(argv[1], "kprobe") && strcmp(argv[1], "fentry"))) {
        fprintf(stderr, "usage: bpf_ring kprobe|fentry FUNCTION [MODULE]\n");
        return 2;
    }
    int fentry = !strcmp(argv[1], "fentry");
    const char *func = argv[2], *module = argc > 3 ? argv[3] : NULL;

    union bpf_attr a;
    memset(&a, 0, sizeof a);
    a.map_type = BPF_MAP_TYPE_RINGBUF;
    a.max_entries = RING_BYTES;
    int map = bpf(BPF_MAP_CREATE, &a);
    if (map < 0)
        die("BPF_MAP_CREATE ringbuf");

    // The first argument: pt_regs->di for a kprobe (offset 112), the first u64 of fentry's
    // argument array.
    int16_t arg0 = fentry ? 0 : 112;
    struct bpf_insn prog[] = {
        INSN(BPF_ALU64 | BPF_MOV | BPF_X, 6, 1, 0, 0),           // r6 = ctx
        INSN(BPF_LDX | BPF_MEM | BPF_DW, 3, 6, arg0, 0),        // r3 = arg0
        INSN(BPF_STX | BPF_MEM | BPF_DW, 10, 3, -8, 0),         // [fp-8] = arg0
        INSN(BPF_ALU64 | BPF_MOV | BPF_X, 1, 10, 0, 0),         // r1 = fp - 16
        INSN(BPF_ALU64 | BPF_ADD | BPF_K, 1, 0, 0, -16),
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, 8),          // r2 = 8
        INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_probe_read_kernel),
        INSN(BPF_LD | BPF_DW | BPF_IMM, 1, BPF_PSEUDO_MAP_FD, 0, map),  // r1 = ring
        INSN(0, 0, 0, 0, 0),
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, 24),         // r2 = 24 bytes
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, 3, 0, 0, 0),          // r3 = 0
        INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ringbuf_reserve),
        INSN(BPF_JMP | BPF_JEQ | BPF_K, 0, 0, 10, 0),           // full: out
        INSN(BPF_ALU64 | BPF_MOV | BPF_X, 7, 0, 0, 0),          // r7 = record
        INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ktime_get_ns),
        INSN(BPF_STX | BPF_MEM | BPF_DW, 7, 0, 0, 0),           // [r7] = time
        INSN(BPF_LDX | BPF_MEM | BPF_DW, 1, 10, -8, 0),
        INSN(BPF_STX | BPF_MEM | BPF_DW, 7, 1, 8, 0),           // [r7+8] = arg0
        INSN(BPF_LDX | BPF_MEM | BPF_DW, 1, 10, -16, 0),
        INSN(BPF_STX | BPF_MEM | BPF_DW, 7, 1, 16, 0),          // [r7+16] = *arg0
        INSN(BPF_ALU64 | BPF_MOV | BPF_X, 1, 7, 0, 0),
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, 2, 0, 0, 0),
        INSN(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_ringbuf_submit),
        INSN(BPF_ALU64 | BPF_MOV | BPF_K, 0, 0, 0, 0),          // out: return 0
        INSN(BPF_JMP | BPF_EXIT, 0, 0, 0, 0),
    };
    static char log[1 << 16];
    memset(&a, 0, sizeof a);
    a.insns = (uint64_t)(uintptr_t)prog;
    a.insn_cnt = sizeof prog / sizeof prog[0];
    a.license = (uint64_t)(uintptr_t)"GPL";
    a.log_buf = (uint64_t)(uintptr_t)log;
    a.log_size = sizeof log;
    a.log_level = 1;
    int obj_fd = 0;
    if (fentry) {
        a.prog_type = BPF_PROG_TYPE_TRACING;
        a.expected_attach_type = BPF_TRACE_FENTRY;
        a.attach_btf_id = btf_func(func, module, &obj_fd);
        a.attach_btf_obj_fd = obj_fd;
        if (!a.attach_btf_id) {
            fprintf(stderr, "no BTF FUNC %s in %s\n", func, module ? module : "vmlinux");
            return 1;
        }
    } else {
        a.prog_type = BPF_PROG_TYPE_KPROBE;
    }
    int pfd = bpf(BPF_PROG_LOAD, &a);
    if (pfd < 0) {
        perror("BPF_PROG_LOAD");
        fprintf(stderr, "%s\n", log);
        return 1;
    }
    int link;
    if (fentry) {
        memset(&a, 0, sizeof a);
        a.raw_tracepoint.prog_fd = pfd;
        link = bpf(BPF_RAW_TRACEPOINT_OPEN, &a);
        if (link < 0)
            die("BPF_RAW_TRACEPOINT_OPEN (fentry attach)");
    } else {
        FILE *t = fopen("/sys/bus/event_source/devices/kprobe/type", "r");
        int type = -1;
        if (!t || fscanf(t, "%d", &type) != 1)
            die("/sys/bus/event_source/devices/kprobe/type");
        fclose(t);
        struct perf_event_attr pa;
        memset(&pa, 0, sizeof pa);
        pa.size = sizeof pa;
        pa.type = type;
        pa.config1 = (uint64_t)(uintptr_t)func;  // kprobe_func
        pa.config2 = 0;                          // probe_offset
        // pid -1, cpu 0: a kprobe with a BPF program runs it on every CPU.
        link = syscall(SYS_perf_event_open, &pa, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
        if (link < 0)
            die("perf_event_open kprobe");
        if (ioctl(link, PERF_EVENT_IOC_SET_BPF, pfd) || ioctl(link, PERF_EVENT_IOC_ENABLE, 0))
            die("PERF_EVENT_IOC_SET_BPF/ENABLE");
    }

    // The ring as user space reads it: the consumer position (ours to write), then the
    // producer position and twice the data pages (the kernel maps the data twice in a row,
    // so a record is contiguous even where it wraps).
    long page = sysconf(_SC_PAGESIZE);
    volatile uint64_t *cons = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, map, 0);
    char *prod = mmap(NULL, page + 2 * RING_BYTES, PROT_READ, MAP_SHARED, map, page);
    if (cons == MAP_FAILED || prod == MAP_FAILED)
        die("mmap ringbuf");
    volatile uint64_t *prod_pos = (volatile uint64_t *)prod;
    char *data = prod + page;
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    printf("attached %s %s\n", argv[1], func);
    fflush(stdout);
    uint64_t events = 0, c = *cons;
    // After the signal: detach, then one last pass over what the ring still holds (the
    // consumer may not have run since the last events, in a loaded guest).
    for (int last = 0;; ) {
        if (stop && !last) {
            close(link);
            last = 1;
        }
        uint64_t p = __atomic_load_n(prod_pos, __ATOMIC_ACQUIRE);
        if (c == p) {
            if (last)
                break;
            struct timespec ms = {0, 1000000};
            nanosleep(&ms, NULL);
            continue;
        }
        while (c < p) {
            uint32_t hdr = __atomic_load_n((uint32_t *)(data + (c & (RING_BYTES - 1))), __ATOMIC_ACQUIRE);
            if (hdr & BPF_RINGBUF_BUSY_BIT)
                break;
            if (!(hdr & BPF_RINGBUF_DISCARD_BIT))
                events++;
            uint32_t len = hdr & ~(BPF_RINGBUF_BUSY_BIT | BPF_RINGBUF_DISCARD_BIT);
            c += (len + BPF_RINGBUF_HDR_SZ + 7) & ~7ull;
        }
        __atomic_store_n(cons, c, __ATOMIC_RELEASE);
        if (last && c != p)
            break; // a record still busy after detaching: its writer is gone
    }
    printf("events %llu\n", (unsigned long long)events);
    return 0;
}
