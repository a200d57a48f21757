/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * kerf_uapi.h - the ioctl ABI of /dev/kerf, shared by kerf.ko and kerf's user-space daemon.
 *
 * Every struct is fixed-size, made of explicit 64-bit fields (and byte arrays whose sizes are
 * multiples of 8), so that the layout is the same for every compiler and for Rust's repr(C).
 * KERF_ABI_VERSION changes whenever a struct, an ioctl number or a documented errno changes;
 * user space checks it with KERF_IOC_VERSION before anything else.
 *
 * The device is root-only (mode 0600 and CAP_SYS_ADMIN checked in open) and exclusive: one
 * open file at a time (a second open gets -EBUSY). Closing it (the daemon exits, crashes or is
 * killed) restores every live splice, quiesces, and drops every trap; a mapping of the data
 * heap keeps the file open until it is unmapped. A splice in a module's text holds a reference
 * on that module, so it cannot be unloaded under the splice.
 *
 * mmap(fd, offset 0, length <= data_heap_size, PROT_READ|PROT_WRITE, MAP_SHARED) maps the data
 * heap (counters, timers) into the caller, so it samples them with no system call. PROT_EXEC
 * is refused.
 *
 * Protocol for a jump splice over more than one instruction (Djprobe's bypass method; the
 * driver enforces the order):
 *   1. KERF_IOC_WRITE_PATCH the code patch (snippet, displaced instructions relocated, jmp back).
 *   2. KERF_IOC_TRAP_ADD {addr, patch} and KERF_IOC_SPLICE an int3 (len 1) at addr: from now on
 *      every thread that reaches addr is diverted to the patch.
 *   3. KERF_IOC_QUIESCE: every thread that was inside the displaced bytes has left them.
 *   4. KERF_IOC_SPLICE the 5-byte jmp at addr (it replaces the int3 splice; the original bytes
 *      stay recorded). Without step 3 this splice is refused with -EAGAIN, unless the caller
 *      sets KERF_SPLICE_ONE_INSN (the replaced bytes are exactly one instruction, or padding).
 * Removal: KERF_IOC_UNSPLICE, KERF_IOC_QUIESCE, then KERF_IOC_TRAP_DEL and patch-heap reuse.
 * Steps 2 and 4 and the unsplices of a removal may each be one KERF_IOC_SPLICE_BATCH /
 * KERF_IOC_UNSPLICE_BATCH for every site at once (the same rules, checked per entry).
 * A jmp rel8 to a springboard (a jmp rel32 in padding): splice the springboard first (its bytes
 * are never executed, so KERF_SPLICE_ONE_INSN), then the jmp rel8; remove the jmp rel8, QUIESCE,
 * then the springboard (the driver refuses the other orders).
 */
#ifndef _KERF_UAPI_H
#define _KERF_UAPI_H

#include <linux/types.h>
#include <linux/ioctl.h>

#define KERF_ABI_VERSION	3
#define KERF_DEVICE_PATH	"/dev/kerf"
#define KERF_RELEASE_LEN	64
#define KERF_MAX_SPLICE_LEN	5	/* jmp rel32; also 2 (jmp rel8) and 1 (int3) */

/* KERF_IOC_VERSION: which ABI, and which kernel the module was built for / is running on. */
struct kerf_version {
	__u64 abi;				/* KERF_ABI_VERSION */
	__u64 reserved;
	char built_for[KERF_RELEASE_LEN];	/* UTS_RELEASE at build time, NUL-terminated */
	char running[KERF_RELEASE_LEN];		/* utsname()->release of the running kernel */
};

/* KERF_IOC_INFO: kernel virtual addresses (root only) of the heaps and of core kernel text. */
struct kerf_info {
	__u64 patch_heap;	/* executable, within +-2 GiB of kernel and module text */
	__u64 patch_heap_size;
	__u64 data_heap;	/* read/write, non-executable, mmap-able at offset 0 */
	__u64 data_heap_size;
	__u64 stext;		/* core kernel text is [stext, etext) */
	__u64 etext;
	__u64 max_splices;
	__u64 max_traps;
	__u64 live_splices;
	__u64 live_traps;
	__u64 quiesce_count;	/* completed KERF_IOC_QUIESCE calls */
	__u64 trap_hits;	/* int3 traps redirected to a patch since load */
	__u64 patch_next;	/* heap offset just past the last code written since load */
	__u64 reserved[3];
};

/*
 * KERF_IOC_READ: copy len bytes of kernel memory at addr to user_buf (copy_from_kernel_nofault:
 * an unmapped address is -EFAULT, never an oops). Any kernel address: the daemon also reads
 * jump tables in .rodata. len <= KERF_READ_MAX.
 * KERF_IOC_WRITE_PATCH: write len bytes from user_buf to [addr, addr+len), which must lie inside
 * the patch heap (-ERANGE otherwise); -EBUSY if the range holds the entry of a code patch that a
 * live splice or trap jumps to, or that one did before the last KERF_IOC_QUIESCE.
 */
struct kerf_rw {
	__u64 addr;
	__u64 len;
	__u64 user_buf;
};
#define KERF_READ_MAX	(16ULL << 20)

/*
 * KERF_IOC_SPLICE: replace len bytes at addr, which must currently be expect_old[0..len), by
 * new_bytes[0..len). Accepted forms of new_bytes:
 *   len 5: e9 rel32  jmp to a code patch inside the patch heap
 *   len 2: eb rel8   jmp to a live len-5 splice (a springboard, e.g. in padding)
 *   len 1: cc        int3; a trap entry for addr must exist (KERF_IOC_TRAP_ADD)
 * A splice at the address of a live splice replaces it if it is not shorter (int3 -> jmp); the
 * bytes recorded for restoring stay the original ones.
 * Written with the int3 bypass (Djprobe's, as the kernel's text_poke_bp does it): int3 first,
 * all CPUs serialised, then the tail, then the first byte, under text_mutex.
 */
struct kerf_splice {
	__u64 addr;
	__u64 len;
	__u64 flags;		/* KERF_SPLICE_* */
	__u8 expect_old[8];
	__u8 new_bytes[8];
};
/* The caller asserts that [addr, addr+len) is exactly one instruction (or never-executed
 * padding), so no thread can be stopped inside it and no int3 + quiesce step is needed. */
#define KERF_SPLICE_ONE_INSN	(1ULL << 0)

/*
 * KERF_IOC_UNSPLICE: restore the original bytes of the live splice at addr (same int3 protocol;
 * a CPU that meets the temporary int3 is sent where the splice sent it, the code patch, which
 * still runs the displaced instructions and jumps back) and verify them. Out: len and the bytes
 * restored.
 */
struct kerf_unsplice {
	__u64 addr;
	__u64 len;		/* out */
	__u8 restored[8];	/* out */
};

/*
 * KERF_IOC_SPLICE_BATCH / KERF_IOC_UNSPLICE_BATCH: count KERF_IOC_SPLICE / KERF_IOC_UNSPLICE
 * requests in one call. Each entry is checked exactly as its own request would be and gets its
 * own result (0 or the negated errno that request would have returned): a refused entry does
 * not stop the others. The call itself fails, with nothing applied, only for a malformed batch
 * (EINVAL: count 0 or above KERF_BATCH_MAX, reserved fields not 0), entries it cannot read
 * (EFAULT) or ENOMEM; EFAULT while writing the results back means the entries were applied
 * and their results are lost.
 *
 * Written with a batched int3 bypass: int3 at every address of a run, one serialisation of all
 * CPUs, every tail, one, every first byte, one; three in all for a run instead of three per
 * entry, and the entries of one page written together at each step. Entries are applied in
 * array order. A run is up to 128 consecutive entries in ascending address order; an entry at
 * a lower address than the one before it, or a jump to an entry of the run, starts a new run,
 * and every entry of a run is written before any entry after it. User space orders with that: timer stops before timer starts,
 * springboards before the jmp rel8 that use them. An address may appear once in a batch
 * (EEXIST); a jmp rel8 may use a springboard spliced earlier in the same batch, and fails with
 * EINVAL if that springboard failed.
 */
struct kerf_batch {
	__u64 entries;		/* user pointer to count entries of the request's type */
	__u64 count;		/* 1..KERF_BATCH_MAX */
	__u64 done;		/* out: entries whose result is 0 */
	__u64 reserved;		/* 0 */
};
#define KERF_BATCH_MAX	4096

struct kerf_splice_entry {
	struct kerf_splice req;
	__s64 result;		/* out: 0 or -errno */
	__u64 reserved;		/* 0 */
};

struct kerf_unsplice_entry {
	struct kerf_unsplice req;	/* len and restored are out, as for KERF_IOC_UNSPLICE */
	__s64 result;		/* out: 0 or -errno */
	__u64 reserved;		/* 0 */
};

/* KERF_IOC_TRAP_ADD / KERF_IOC_TRAP_DEL: an int3 at addr resumes at patch (in the patch heap). */
struct kerf_trap {
	__u64 addr;
	__u64 patch;		/* ignored by TRAP_DEL */
};

/*
 * KERF_IOC_TRAP_ADD_BATCH / KERF_IOC_TRAP_DEL_BATCH: count TRAP_ADD / TRAP_DEL requests in one
 * call (struct kerf_batch of struct kerf_trap_entry), in array order, each with its own result
 * as in the splice batches, and failing as a whole only as they do.
 */
struct kerf_trap_entry {
	struct kerf_trap req;
	__s64 result;		/* out: 0 or -errno */
	__u64 reserved;		/* 0 */
};

/*
 * KERF_IOC_SELFTEST, on KERF_SELFTEST_DEVICE_PATH only (root only, not exclusive: /dev/kerf
 * is held by kerf while its probes are live, which is when the loop must run): call one of
 * kerf.ko's three probe targets `calls` times in a tight loop, so that a probe placed on it is
 * hit exactly that many times, and time the loop. The targets are the only bytes of kerf.ko
 * that SPLICE and TRAP_ADD accept; they are named kerf_selftest_jump5 (straight-line code
 * after the ftrace site: a jmp rel32 fits), kerf_selftest_short (a branch target 3 bytes
 * after the ftrace site: only a jmp rel8 to a springboard or an int3 fits) and
 * kerf_selftest_twin (the same code as kerf_selftest_jump5: run unprobed right before or
 * after it, it gives the cost of the calls without the probe) in /proc/kallsyms.
 */
struct kerf_selftest {
	__u64 target;		/* KERF_SELFTEST_JUMP5, _SHORT or _TWIN */
	__u64 calls;		/* 0 .. KERF_SELFTEST_MAX_CALLS */
	__u64 ns;		/* out: nanoseconds spent in the calls (rescheduling excluded) */
	__u64 best_ns;		/* out: the fastest block of KERF_SELFTEST_BLOCK calls (a block
				 * no interrupt, and under qemu no host preemption, slowed) */
	__u64 hits;		/* out: the calls the target itself counted (equals calls) */
	__u64 addr;		/* out: the target's address */
	__u8 code[16];		/* out: its first 16 bytes, read after the loop */
};
#define KERF_SELFTEST_DEVICE_PATH	"/dev/kerf_selftest"
#define KERF_SELFTEST_JUMP5	0
#define KERF_SELFTEST_SHORT	1
#define KERF_SELFTEST_TWIN	2	/* a copy of the jump5 target, left unprobed: the baseline */
#define KERF_SELFTEST_NR	3
#define KERF_SELFTEST_MAX_CALLS	(1ULL << 34)
#define KERF_SELFTEST_BLOCK	256

#define KERF_IOC_MAGIC		0xB7
#define KERF_IOC_VERSION	_IOR(KERF_IOC_MAGIC, 0x00, struct kerf_version)
#define KERF_IOC_INFO		_IOR(KERF_IOC_MAGIC, 0x01, struct kerf_info)
#define KERF_IOC_READ		_IOW(KERF_IOC_MAGIC, 0x02, struct kerf_rw)
#define KERF_IOC_WRITE_PATCH	_IOW(KERF_IOC_MAGIC, 0x03, struct kerf_rw)
#define KERF_IOC_SPLICE		_IOW(KERF_IOC_MAGIC, 0x04, struct kerf_splice)
#define KERF_IOC_UNSPLICE	_IOWR(KERF_IOC_MAGIC, 0x05, struct kerf_unsplice)
#define KERF_IOC_QUIESCE	_IO(KERF_IOC_MAGIC, 0x06)
#define KERF_IOC_TRAP_ADD	_IOW(KERF_IOC_MAGIC, 0x07, struct kerf_trap)
#define KERF_IOC_TRAP_DEL	_IOW(KERF_IOC_MAGIC, 0x08, struct kerf_trap)
#define KERF_IOC_SPLICE_BATCH	_IOWR(KERF_IOC_MAGIC, 0x09, struct kerf_batch)
#define KERF_IOC_UNSPLICE_BATCH	_IOWR(KERF_IOC_MAGIC, 0x0a, struct kerf_batch)
#define KERF_IOC_TRAP_ADD_BATCH	_IOWR(KERF_IOC_MAGIC, 0x0b, struct kerf_batch)
#define KERF_IOC_TRAP_DEL_BATCH	_IOWR(KERF_IOC_MAGIC, 0x0c, struct kerf_batch)
#define KERF_IOC_SELFTEST	_IOWR(KERF_IOC_MAGIC, 0x10, struct kerf_selftest)

/*
 * Errors (negated in the kernel, errno in user space):
 *   EPERM    open without CAP_SYS_ADMIN; or SPLICE/TRAP_ADD where the kernel forbids probing
 *            or relocating: the kprobe blacklist (NOKPROBE_SYMBOL, __kprobes, noinstr, entry
 *            text), a BUG()/WARN() site, an instruction with an exception-table entry, or
 *            kerf's own module (but for its three self-test targets)
 *   EBUSY    second open; or SPLICE on bytes another mechanism owns: an ftrace site, a jump
 *            label, a static call site or trampoline, a BPF dispatcher, a kprobe (or
 *            optprobe) nearby, an SMP-alternatives lock prefix; or UNSPLICE when the bytes
 *            are no longer the ones kerf wrote, or of a springboard still used by a jmp rel8
 *            (or used by one removed after the last QUIESCE); or TRAP_DEL while its int3 is
 *            live or was removed after the last QUIESCE; or WRITE_PATCH over a live or
 *            unquiesced patch entry
 *   ENXIO    SPLICE/TRAP_ADD address not in core kernel text nor in a live module's core text
 *   ESTALE   SPLICE: the current bytes differ from expect_old
 *   EEXIST   SPLICE overlapping a live splice (other than a same-address upgrade); TRAP_ADD
 *            for an address that already has a trap; an address twice in one batch
 *   EAGAIN   SPLICE of more than one byte over bytes that may hold more than one instruction,
 *            without a quiesced int3 splice at addr first (see the protocol above)
 *   ENOENT   UNSPLICE/TRAP_DEL of an address with no live splice/trap; SPLICE of an int3
 *            without a trap entry
 *   EINVAL   malformed request: bad len, new_bytes not one of the forms above, a jump target
 *            outside the patch heap, not a springboard, etc.
 *            SELFTEST: an unknown target, or more than KERF_SELFTEST_MAX_CALLS calls
 *   EINTR    SELFTEST interrupted by a fatal signal
 *   ERANGE   WRITE_PATCH outside the patch heap
 *   EFAULT   bad user pointer, or READ of an unmapped kernel address
 *   ENOSPC   too many live splices or traps
 *   EIO      the bytes read back after a write are not the bytes written (never expected)
 */

#endif /* _KERF_UAPI_H */
