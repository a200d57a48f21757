// bench/ret_seq.c: what the return sequences of `kerf jit`'s translations cost against a
// native `ret`, with no kerf involved: a loop calls a function that saves six registers,
// reads memory and stores an out-parameter into the caller's frame (python3.11's dict
// lookup has that shape), and returns by one of the sequences below. Each translated call
// pushes the continuation (a real `call`) and its stub overwrites the return slot with the
// "original" return address, as kerf's call stubs do. Prints the best of five runs of N
// iterations (default 30 M) per sequence, in ns per iteration.
// Build: gcc -O2 -no-pie -o ret_seq bench/ret_seq.c (non-PIE: the continuations are
// 32-bit immediates in two sequences; the table lies at 0x7ee00000, as kerf maps it).
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define ORIG 0x52ebe6ULL  // the "original" return address the stubs store
#define ORIG2 0x52f0f0ULL // another, for the second table sequence
#define TABLE 0x7ee00000ULL

typedef void loop_fn(long n, long *data);
extern loop_fn loop_native, loop_table_kept, loop_table_free, loop_chain_kept, loop_chain_free,
    loop_chain_imm, loop_pred_free;
extern char site_table_kept[], site_table_free[], site_pred_free[];
uint64_t pred[8] __attribute__((aligned(64)));

// The callee's body (the same in every sequence), and a loop calling through one sequence.
__asm__(".intel_syntax noprefix\n"
        ".macro BODY\n"
        " push r15\n push r14\n push r13\n push r12\n push rbp\n push rbx\n sub rsp, 24\n"
        " mov rbx, rdi\n mov rax, [rsi]\n xor ecx, ecx\n"
        "7: mov rdx, [rsi+rcx*8]\n add rax, rdx\n imul rax, rax, 17\n xor rax, rbx\n"
        " inc rcx\n cmp rcx, 8\n jne 7b\n"
        " mov [rdx], rax\n mov [r8], rax\n"
        " add rsp, 24\n pop rbx\n pop rbp\n pop r12\n pop r13\n pop r14\n pop r15\n"
        ".endm\n"
        ".macro LOOP name, callee, site\n"
        "\\name:\n push rbx\n push r12\n sub rsp, 40\n mov rbx, rdi\n mov r12, rsi\n"
        "1: mov rdi, rbx\n mov rsi, r12\n lea r8, [rsp+16]\n call \\callee\n"
        "\\site: mov rax, [rsp+16]\n add [rsp+24], rax\n dec rbx\n jnz 1b\n"
        " add rsp, 40\n pop r12\n pop rbx\n ret\n"
        ".endm\n"
        "LOOP loop_native, native, site_native\n"
        "LOOP loop_table_kept, stub_table_kept, site_table_kept\n"
        "LOOP loop_table_free, stub_table_free, site_table_free\n"
        "LOOP loop_chain_kept, stub_chain_kept, site_chain_kept\n"
        "LOOP loop_chain_free, stub_chain_free, site_chain_free\n"
        "LOOP loop_chain_imm, stub_chain_imm, site_chain_imm\n"
        "LOOP loop_pred_free, stub_pred_free, site_pred_free\n"
        "wrong: ud2\n"
        // A native call and return.
        "native: BODY\n ret\n"
        // kerf's frameless `ret` through the table, its two registers kept (`fast_ret`, saved).
        "stub_table_kept: mov qword ptr [rsp], 0x52ebe6\n jmp table_kept\n"
        "table_kept: BODY\n mov [rsp-8], r11\n mov [rsp-16], r10\n mov r10, [rsp]\n"
        " rorx r11, r10, 13\n lea r11, [r11+r10*8]\n and r11d, 0x7fffc0\n"
        " cmp r10, [r11*2+0x7ee00048]\n jne wrong\n mov r10, [r11*2+0x7ee00040]\n"
        " mov [rsp], r10\n mov r11, [rsp-8]\n mov r10, [rsp-16]\n ret\n"
        // The same with its two registers free.
        "stub_table_free: mov qword ptr [rsp], 0x52f0f0\n jmp table_free\n"
        "table_free: BODY\n mov r10, [rsp]\n rorx r11, r10, 13\n lea r11, [r11+r10*8]\n"
        " and r11d, 0x7fffc0\n cmp r10, [r11*2+0x7ee00048]\n jne wrong\n"
        " mov r10, [r11*2+0x7ee00040]\n mov [rsp], r10\n ret\n"
        // A chained `ret`, its register kept (`chained_ret_saved`, 32-bit compare).
        "stub_chain_kept: mov qword ptr [rsp], 0x52ebe6\n jmp chain_kept\n"
        "chain_kept: BODY\n cmp qword ptr [rsp], 0x52ebe6\n jne wrong\n mov [rsp-8], r11\n"
        " lea r11, [rip+site_chain_kept]\n mov [rsp], r11\n mov r11, [rsp-8]\n ret\n"
        // A chained `ret`, its register free (`chained_ret`).
        "stub_chain_free: mov qword ptr [rsp], 0x52ebe6\n jmp chain_free\n"
        "chain_free: BODY\n cmp qword ptr [rsp], 0x52ebe6\n jne wrong\n"
        " lea r11, [rip+site_chain_free]\n mov [rsp], r11\n ret\n"
        // A chained `ret` storing the continuation as an immediate (not built: kerf's encoder
        // has no label in an immediate).
        "stub_chain_imm: mov qword ptr [rsp], 0x52ebe6\n jmp chain_imm\n"
        "chain_imm: BODY\n cmp qword ptr [rsp], 0x52ebe6\n jne wrong\n"
        " mov qword ptr [rsp], OFFSET site_chain_imm\n ret\n"
        // A prediction word per `ret` (the last caller and its continuation; not built).
        "stub_pred_free: mov qword ptr [rsp], 0x52ebe6\n jmp pred_free\n"
        "pred_free: BODY\n mov r11, [rsp]\n cmp r11, [rip+pred]\n jne wrong\n"
        " mov r11, [rip+pred+8]\n mov [rsp], r11\n ret\n"
        ".att_syntax\n");

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

// The table line of `orig` (kerf's `Hash::Mixed`, below 2 GiB): its return key and
// continuation.
static void enter(char *table, uint64_t orig, void *cont) {
    uint64_t set = ((orig >> 13 | orig << 51) + 8 * orig) & 0x7fffc0;
    *(uint64_t *)(table + 2 * set + 0x48) = orig;
    *(uint64_t *)(table + 2 * set + 0x40) = (uint64_t)cont;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 30000000;
    char *t = mmap((void *)TABLE, 0x1100000, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (t != (char *)TABLE) {
        perror("mmap of the table");
        return 1;
    }
    enter(t, ORIG, site_table_kept);
    enter(t, ORIG2, site_table_free);
    pred[0] = ORIG;
    pred[1] = (uint64_t)site_pred_free;
    long *data = calloc(8, sizeof *data);
    long *word = calloc(8, sizeof *word);
    for (int i = 0; i < 8; i++)
        data[i] = (long)word;
    struct {
        const char *name;
        loop_fn *loop;
    } seq[] = {
        {"native", loop_native},
        {"table, registers kept", loop_table_kept},
        {"table, registers free", loop_table_free},
        {"chain, register kept", loop_chain_kept},
        {"chain, register free", loop_chain_free},
        {"chain, immediate store", loop_chain_imm},
        {"prediction word", loop_pred_free},
    };
    int k = sizeof seq / sizeof seq[0];
    double best[16];
    for (int v = 0; v < k; v++)
        best[v] = 1e9;
    for (int r = 0; r < 5; r++)
        for (int v = 0; v < k; v++) {
            double s = now();
            seq[v].loop(n, data);
            double e = (now() - s) / n * 1e9;
            if (e < best[v])
                best[v] = e;
        }
    for (int v = 0; v < k; v++)
        printf("%-24s %6.3f ns  %+6.3f\n", seq[v].name, best[v], best[v] - best[0]);
    return 0;
}
