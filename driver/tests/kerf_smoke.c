// SPDX-License-Identifier: GPL-2.0
/*
 * kerf_smoke.c - end-to-end test of kerf.ko in a guest, doing what kerf's daemon will do:
 * read kernel text, write a code patch, splice a jmp (Djprobe protocol: int3, quiesce, jmp) and
 * an int3 trap into syscalls on the getuid/getgid path, count hits in the mmapped data heap with
 * no system call, compare with an independent count (a kprobe event), check refusals, remove
 * everything and verify the text is byte-identical, and check that closing the device with
 * live splices restores them.
 *
 * Usage: kerf_smoke [STRESS_CYCLES]   (default 200 splice/restore cycles under fire)
 * Output: one line per check, "OK <name> ..." or "FAIL <name> ...", then "SMOKE PASS" or
 * "SMOKE FAIL <n>"; exit status 0 only if everything passed. Run as root in the guest after
 * insmod kerf.ko. Built static (the guest has no libc).
 *
 * Only for this test, a tiny decoder recognises the one instruction form it splices over:
 * "mov r64, gs:[disp32]" (65 48 8b modrm(mod=00,rm=100) sib=25 disp32), 9 bytes and position
 * independent (gs-relative absolute, not rip-relative), which is what the stock 6.1 kernel has
 * right after the ftrace site of __x64_sys_getuid and __x64_sys_getgid (current_task load).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kerf_uapi.h"

#define N_JUMP		100000
#define N_TRAP		20000
#define N_JUMP2		50000
#define N_FTRACE	1000
#define N_TIME		200000
#define TRACEFS		"/sys/kernel/tracing"

static int failures;

static void check(int ok, const char *name, const char *fmt, ...)
{
	va_list ap;

	printf("%s %s", ok ? "OK" : "FAIL", name);
	if (fmt && *fmt) {
		putchar(' ');
		va_start(ap, fmt);
		vprintf(fmt, ap);
		va_end(ap);
	}
	putchar('\n');
	fflush(stdout);
	if (!ok)
		failures++;
}

static void die(const char *what)
{
	printf("FAIL fatal %s: %s\nSMOKE FAIL %d\n", what, strerror(errno), failures + 1);
	exit(1);
}

static uint64_t ksym(const char *name)
{
	char line[512], sym[256], type;
	unsigned long long a;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		die("open /proc/kallsyms");
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%llx %c %255s", &a, &type, sym) == 3 && !strcmp(sym, name)) {
			fclose(f);
			return a;
		}
	}
	fclose(f);
	return 0;
}

/* The lowest text symbol above addr: where the next function starts. */
static uint64_t ksym_next(uint64_t addr)
{
	char line[512], sym[256], type;
	unsigned long long a, best = ~0ULL;
	FILE *f = fopen("/proc/kallsyms", "r");

	if (!f)
		die("open /proc/kallsyms");
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "%llx %c %255s", &a, &type, sym) == 3 && (type == 't' || type == 'T') &&
		    a > addr && a < best)
			best = a;
	fclose(f);
	return best;
}

/* Are all n bytes at p padding between functions (int3 or the multi-byte nops gcc pads
 * with)? Such bytes are never executed, so a springboard may go there. */
static int is_padding(const uint8_t *p, int n)
{
	static const uint8_t nop11[] = { 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0 };
	static const uint8_t nop10[] = { 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0 };
	static const uint8_t nop8[] = { 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0 };
	static const uint8_t nop7[] = { 0x0f, 0x1f, 0x80, 0, 0, 0, 0 };
	static const uint8_t nop6[] = { 0x66, 0x0f, 0x1f, 0x44, 0, 0 };
	static const uint8_t nop5[] = { 0x0f, 0x1f, 0x44, 0, 0 };
	static const uint8_t nop4[] = { 0x0f, 0x1f, 0x40, 0 };
	static const uint8_t nop3[] = { 0x0f, 0x1f, 0 };
	static const uint8_t nop2[] = { 0x66, 0x90 };
	static const struct { const uint8_t *b; int n; } nops[] = {
		{ nop11, 11 }, { nop10, 10 }, { nop8, 8 }, { nop7, 7 }, { nop6, 6 }, { nop5, 5 },
		{ nop4, 4 }, { nop3, 3 }, { nop2, 2 },
	};
	int i = 0, k, m;

	while (i < n) {
		if (p[i] == 0xcc || p[i] == 0x90) {
			i++;
			continue;
		}
		for (k = 0, m = 0; k < (int)(sizeof(nops) / sizeof(nops[0])); k++) {
			if (i + nops[k].n <= n && !memcmp(p + i, nops[k].b, nops[k].n)) {
				m = nops[k].n;
				break;
			}
		}
		if (!m)
			return 0;
		i += m;
	}
	return 1;
}

static int kread(int fd, uint64_t addr, void *buf, uint64_t len)
{
	struct kerf_rw rw = { .addr = addr, .len = len, .user_buf = (uintptr_t)buf };

	return ioctl(fd, KERF_IOC_READ, &rw) ? -errno : 0;
}

static int kwrite_patch(int fd, uint64_t addr, const void *buf, uint64_t len)
{
	struct kerf_rw rw = { .addr = addr, .len = len, .user_buf = (uintptr_t)buf };

	return ioctl(fd, KERF_IOC_WRITE_PATCH, &rw) ? -errno : 0;
}

static int ksplice(int fd, uint64_t addr, unsigned int len, const uint8_t *old,
		   const uint8_t *new, uint64_t flags)
{
	struct kerf_splice s = { .addr = addr, .len = len, .flags = flags };

	memcpy(s.expect_old, old, len);
	memcpy(s.new_bytes, new, len);
	return ioctl(fd, KERF_IOC_SPLICE, &s) ? -errno : 0;
}

static int kunsplice(int fd, uint64_t addr, uint8_t *restored)
{
	struct kerf_unsplice u = { .addr = addr };

	if (ioctl(fd, KERF_IOC_UNSPLICE, &u))
		return -errno;
	if (restored)
		memcpy(restored, u.restored, u.len);
	return 0;
}

static int ktrap(int fd, unsigned long cmd, uint64_t addr, uint64_t patch)
{
	struct kerf_trap t = { .addr = addr, .patch = patch };

	return ioctl(fd, cmd, &t) ? -errno : 0;
}

static int kquiesce(int fd)
{
	return ioctl(fd, KERF_IOC_QUIESCE) ? -errno : 0;
}

/* One KERF_IOC_SPLICE_BATCH entry. */
static struct kerf_splice_entry bentry(uint64_t addr, unsigned int len, const uint8_t *old,
				       const uint8_t *new, uint64_t flags)
{
	struct kerf_splice_entry e = { .req = { .addr = addr, .len = len, .flags = flags } };

	memcpy(e.req.expect_old, old, len);
	memcpy(e.req.new_bytes, new, len);
	e.result = 1;	/* the driver must overwrite it */
	return e;
}

/* A batch ioctl over n entries; returns the call's own result, *done the entries done. */
static int kbatch(int fd, unsigned long cmd, void *entries, uint64_t n, uint64_t *done)
{
	struct kerf_batch b = { .entries = (uintptr_t)entries, .count = n };

	if (ioctl(fd, cmd, &b))
		return -errno;
	*done = b.done;
	return 0;
}

/* KERF_IOC_TRAP_ADD_BATCH or _DEL_BATCH of two traps; their results in r[0], r[1]. */
static int ktrap2(int fd, unsigned long cmd, uint64_t a0, uint64_t a1, uint64_t patch,
		  int64_t r[2])
{
	struct kerf_trap_entry e[2] = {
		{ .req = { .addr = a0, .patch = patch }, .result = 1 },
		{ .req = { .addr = a1, .patch = patch }, .result = 1 },
	};
	uint64_t done;
	int err = kbatch(fd, cmd, e, 2, &done);

	r[0] = e[0].result;
	r[1] = e[1].result;
	return err ? err : (int)done;
}

static struct kerf_info kinfo(int fd)
{
	struct kerf_info info;

	if (ioctl(fd, KERF_IOC_INFO, &info))
		die("KERF_IOC_INFO");
	return info;
}

static const char *ename(int err)
{
	switch (err < 0 ? -err : err) {
	case 0: return "0";
	case EPERM: return "EPERM";
	case EBUSY: return "EBUSY";
	case ENXIO: return "ENXIO";
	case ESTALE: return "ESTALE";
	case EEXIST: return "EEXIST";
	case EAGAIN: return "EAGAIN";
	case ENOENT: return "ENOENT";
	case EINVAL: return "EINVAL";
	case ERANGE: return "ERANGE";
	case EFAULT: return "EFAULT";
	case EACCES: return "EACCES";
	}
	return strerror(err < 0 ? -err : err);
}

/* The syscalls whose kernel functions we splice; called directly, not through libc caches. */
static void call_getuid(long n)
{
	for (long i = 0; i < n; i++)
		syscall(SYS_getuid);
}

static void call_getgid(long n)
{
	for (long i = 0; i < n; i++)
		syscall(SYS_getgid);
}

static double ns_per_call(void (*fn)(long), long n)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	fn(n);
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / n;
}

static int put32(uint8_t *p, int64_t v)
{
	if (v < INT32_MIN || v > INT32_MAX)
		return -1;
	int32_t x = (int32_t)v;

	memcpy(p, &x, 4);
	return 0;
}

/* Is p "mov r64, gs:[disp32]"? The only form this test relocates (verbatim: no rip use). */
static int is_gs_abs_mov(const uint8_t *p)
{
	return p[0] == 0x65 && p[1] == 0x48 && p[2] == 0x8b && (p[3] & 0xc7) == 0x04 && p[4] == 0x25;
}
#define GS_MOV_LEN 9

static const uint8_t NOP5[5] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };

/*
 * build_patch() - a code patch for a point at site (func+5) whose displaced instruction is the
 * 9-byte gs mov: "lock inc qword [rip+counter]; <mov>; jmp site+9".
 * Flags: lock inc writes them. They are dead here: the point is the first instruction after the
 * ftrace site at function entry, where the SysV ABI leaves flags undefined (nothing reads them
 * before writing), and the displaced mov does not read them. No stack use, so no red-zone
 * question (the kernel has none anyway) and interrupts/NMIs may run this code reentrantly: the
 * only shared state is the counter, updated atomically.
 */
static int build_patch(uint8_t *out, uint64_t patch, uint64_t counter, uint64_t site,
		       const uint8_t *insn)
{
	int n = 0;

	out[n++] = 0xf0;	/* lock */
	out[n++] = 0x48;	/* REX.W */
	out[n++] = 0xff;	/* inc r/m64 */
	out[n++] = 0x05;	/* modrm: /0, rip+disp32 */
	if (put32(out + n, (int64_t)(counter - (patch + n + 4))))
		return -1;
	n += 4;
	memcpy(out + n, insn, GS_MOV_LEN);
	n += GS_MOV_LEN;
	out[n++] = 0xe9;	/* jmp rel32 back behind the displaced instruction */
	if (put32(out + n, (int64_t)(site + GS_MOV_LEN - (patch + n + 4))))
		return -1;
	n += 4;
	return n;
}

/* Bytes that certainly differ from src, for expect_old in refusal tests. */
static void wrong(uint8_t *out, const uint8_t *src, int n)
{
	for (int i = 0; i < n; i++)
		out[i] = src[i] ^ 0xff;
}

static int jmp5(uint8_t *out, uint64_t from, uint64_t to)
{
	out[0] = 0xe9;
	return put32(out + 1, (int64_t)(to - (from + 5)));
}

static int write_file(const char *path, const char *s)
{
	int fd = open(path, O_WRONLY | O_APPEND);
	ssize_t n;

	if (fd < 0)
		return -errno;
	n = write(fd, s, strlen(s));
	close(fd);
	return n == (ssize_t)strlen(s) ? 0 : -EIO;
}

/* Hit count of a kprobe event from kprobe_profile ("event hits misses", without the group). */
static long kprobe_hits(const char *event)
{
	char line[256], name[128];
	long hits, misses;
	FILE *f = fopen(TRACEFS "/kprobe_profile", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%127s %ld %ld", name, &hits, &misses) == 3 && !strcmp(name, event)) {
			fclose(f);
			return hits;
		}
	}
	fclose(f);
	return -1;
}

/* Does debugfs' kprobes list show the probe at addr as optimized? (It names the address by
 * whichever alias kallsyms prefers, e.g. __do_sys_getuid, so match the address.) */
static int kprobe_optimized(uint64_t addr)
{
	char line[512], want[32];
	int opt = 0;
	FILE *f = fopen("/sys/kernel/debug/kprobes/list", "r");

	if (!f)
		return 0;
	snprintf(want, sizeof(want), "%llx ", (unsigned long long)addr);
	while (fgets(line, sizeof(line), f))
		if (!strncmp(line, want, strlen(want)) && strstr(line, "[OPTIMIZED]"))
			opt = 1;
	fclose(f);
	return opt;
}

/* Is addr inside a range of debugfs' kprobes/blacklist ("0xstart-0xend\tsymbol")? */
static int kprobe_blacklisted(uint64_t addr)
{
	unsigned long long lo, hi;
	char line[256];
	int in = 0;
	FILE *f = fopen("/sys/kernel/debug/kprobes/blacklist", "r");

	if (!f)
		return 1;	/* unknown: treat as blacklisted */
	while (!in && fgets(line, sizeof(line), f))
		if (sscanf(line, "0x%llx-0x%llx", &lo, &hi) == 2 && addr >= lo && addr < hi)
			in = 1;
	fclose(f);
	return in;
}

static int try_open_as_nobody(void)
{
	int st;
	pid_t pid = fork();

	if (pid == 0) {
		if (setgid(65534) || setuid(65534))
			_exit(100);
		int fd = open(KERF_DEVICE_PATH, O_RDWR);

		_exit(fd >= 0 ? 0 : errno);
	}
	if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
		return -1;
	return WEXITSTATUS(st);
}

static void pin_to_cpu(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	sched_setaffinity(0, sizeof(set), &set);
}

/* A child on the other CPU calling getuid and getgid until killed: it runs through the points
 * while they are spliced and restored, which is what the int3 bypass must make safe. */
static pid_t start_hammer(void)
{
	pid_t pid = fork();

	if (pid == 0) {
		pin_to_cpu(1);
		for (;;) {
			syscall(SYS_getuid);
			syscall(SYS_getgid);
		}
	}
	return pid;
}

static void stop_hammer(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static int run_status(const char *cmd)
{
	int st = system(cmd);

	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/*
 * Up to 3 core-text addresses from one of the kernel's own tables of patch sites (entries of
 * esize bytes starting with an s32 relative to themselves: jump labels, static call sites,
 * BUG/WARN sites), taken around a quarter, half and three quarters of the table and outside
 * the kprobe blacklist (which would refuse them first). Returns how many.
 */
static int table_sites(int fd, const char *start, const char *stop, unsigned int esize,
		       const struct kerf_info *info, uint64_t *out)
{
	uint64_t a = ksym(start), b = ksym(stop), n = b > a ? (b - a) / esize : 0;
	uint8_t *t = n ? malloc(n * esize) : NULL;
	int got = 0;

	if (!t || kread(fd, a, t, n * esize)) {
		free(t);
		return 0;
	}
	for (int q = 1; q <= 3; q++) {
		for (uint64_t k = n * q / 4; k < n; k++) {
			int32_t d;
			uint64_t site;

			memcpy(&d, t + k * esize, 4);
			site = a + k * esize + (int64_t)d;
			if (site >= info->stext && site + 5 <= info->etext && !kprobe_blacklisted(site)) {
				out[got++] = site;
				break;
			}
		}
	}
	free(t);
	return got;
}

int main(int argc, char **argv)
{
	int stress_cycles = argc > 1 ? atoi(argv[1]) : 200;

	struct kerf_version ver;
	struct kerf_info info, info2;
	struct utsname uts;
	uint8_t orig_uid[32], orig_gid[32], cur[32], patch[128], jmp[5], restored[8];
	uint8_t int3 = 0xcc;
	uint64_t f_uid, f_gid, site_uid, site_gid, patch_uid, patch_gid;
	volatile uint64_t *heap, *ctr_uid, *ctr_gid;
	uint64_t before, hits0;
	int64_t r2[2];
	double t_plain, t_jump, t_trap, t_kprobe = 0, t_optprobe = 0;
	long kp0;
	int fd, fd2, err, n_uid, n_gid;

	setvbuf(stdout, NULL, _IOLBF, 0);
	fd = open(KERF_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("open " KERF_DEVICE_PATH);

	/* 1. Version: the module must be built for the running kernel. */
	if (ioctl(fd, KERF_IOC_VERSION, &ver))
		die("KERF_IOC_VERSION");
	uname(&uts);
	check(ver.abi == KERF_ABI_VERSION && !strcmp(ver.built_for, ver.running) &&
	      !strcmp(ver.running, uts.release), "version", "abi=%llu built_for=%s running=%s",
	      (unsigned long long)ver.abi, ver.built_for, ver.running);

	/* 2. Info: heaps within +-2 GiB of kernel text and of each other. */
	info = kinfo(fd);
	{
		int64_t d_text = (int64_t)(info.patch_heap - info.stext);
		int64_t d_etext = (int64_t)(info.patch_heap + info.patch_heap_size - info.etext);
		int64_t d_data = (int64_t)(info.data_heap - info.patch_heap);
		int64_t lim = INT32_MAX;

		check(info.patch_heap_size >= (1 << 20) && info.data_heap_size >= (1 << 20) &&
		      d_text > -lim && d_text < lim && d_etext > -lim && d_etext < lim &&
		      d_data > -lim && d_data < lim && info.live_splices == 0,
		      "info", "patch_heap=%#llx+%#llx data_heap=%#llx+%#llx stext=%#llx etext=%#llx",
		      (unsigned long long)info.patch_heap, (unsigned long long)info.patch_heap_size,
		      (unsigned long long)info.data_heap, (unsigned long long)info.data_heap_size,
		      (unsigned long long)info.stext, (unsigned long long)info.etext);
		check(info.stext == ksym("_stext") && info.etext == ksym("_etext"), "info-stext",
		      "matches /proc/kallsyms");
	}

	/* 3. Exclusive, root-only device. */
	fd2 = open(KERF_DEVICE_PATH, O_RDWR);
	check(fd2 < 0 && errno == EBUSY, "exclusive-open", "second open: %s",
	      fd2 < 0 ? ename(errno) : "succeeded");
	if (fd2 >= 0)
		close(fd2);
	chmod(KERF_DEVICE_PATH, 0666);	/* get past the mode so the CAP_SYS_ADMIN check answers */
	err = try_open_as_nobody();
	chmod(KERF_DEVICE_PATH, 0600);
	check(err == EPERM || err == EBUSY, "no-cap-open", "uid 65534: %s", ename(err));

	/* 4. The data heap, mapped shared; never executable. */
	heap = mmap(NULL, info.data_heap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (heap == MAP_FAILED)
		die("mmap data heap");
	{
		void *x = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_SHARED, fd, 0);

		check(x == MAP_FAILED && errno == EPERM, "mmap-noexec", "PROT_EXEC: %s",
		      x == MAP_FAILED ? ename(errno) : "mapped");
		if (x != MAP_FAILED)
			munmap(x, 4096);
	}
	ctr_uid = heap;		/* 64-byte slots */
	ctr_gid = heap + 8;

	/* 5. Read the functions; pick the point right after the ftrace site. */
	f_uid = ksym("__x64_sys_getuid");
	f_gid = ksym("__x64_sys_getgid");
	if (!f_uid || !f_gid)
		die("resolve __x64_sys_getuid/getgid");
	if (kread(fd, f_uid, orig_uid, sizeof(orig_uid)) || kread(fd, f_gid, orig_gid, sizeof(orig_gid)))
		die("KERF_IOC_READ");
	site_uid = f_uid + 5;
	site_gid = f_gid + 5;
	check(!memcmp(orig_uid, NOP5, 5) && is_gs_abs_mov(orig_uid + 5) &&
	      !memcmp(orig_gid, NOP5, 5) && is_gs_abs_mov(orig_gid + 5), "read-text",
	      "getuid+0: nop5 (ftrace site) then %02x %02x %02x %02x %02x ... (mov r64, gs:[disp32])",
	      orig_uid[5], orig_uid[6], orig_uid[7], orig_uid[8], orig_uid[9]);
	if (failures)
		die("unexpected text at the chosen points");
	err = kread(fd, 0xdead000000000000ULL, cur, 8);
	check(err == -EFAULT, "read-bad-address", "non-canonical: %s", ename(err));
	err = kread(fd, 0x1000, cur, 8);
	check(err == -EFAULT, "read-user-address", "0x1000: %s", ename(err));

	/* 6. Code patches in the patch heap. */
	patch_uid = info.patch_heap;
	patch_gid = info.patch_heap + 256;
	n_uid = build_patch(patch, patch_uid, info.data_heap + 0, site_uid, orig_uid + 5);
	if (n_uid < 0 || kwrite_patch(fd, patch_uid, patch, n_uid))
		die("write patch (getuid)");
	if (kread(fd, patch_uid, cur, n_uid) || memcmp(cur, patch, n_uid))
		die("read back patch (getuid)");
	n_gid = build_patch(patch, patch_gid, info.data_heap + 64, site_gid, orig_gid + 5);
	if (n_gid < 0 || kwrite_patch(fd, patch_gid, patch, n_gid))
		die("write patch (getgid)");
	check(1, "write-patch", "%d+%d bytes at %#llx", n_uid, n_gid, (unsigned long long)patch_uid);
	err = kwrite_patch(fd, info.patch_heap + info.patch_heap_size - 4, patch, 8);
	check(err == -ERANGE, "refuse-write-outside-heap", "%s", ename(err));
	{
		/* Where the next session starts: just past the last write that went in. */
		struct kerf_info now = kinfo(fd);

		check(now.patch_next == 256 + (uint64_t)n_gid, "patch-next", "%#llx, want %#llx",
		      (unsigned long long)now.patch_next, 256 + (unsigned long long)n_gid);
	}

	t_plain = ns_per_call(call_getuid, N_TIME);

	/* 7. Jump splice at getuid+5 with Djprobe's protocol: int3 (trap to the same patch),
	 * quiesce, then the jmp. First: a jmp without the protocol is refused. */
	if (jmp5(jmp, site_uid, patch_uid))
		die("patch heap out of jmp range");
	err = ksplice(fd, site_uid, 5, orig_uid + 5, jmp, 0);
	check(err == -EAGAIN, "refuse-jump-without-int3-quiesce", "%s", ename(err));
	err = ksplice(fd, site_uid, 1, orig_uid + 5, &int3, 0);
	check(err == -ENOENT, "refuse-int3-without-trap", "%s", ename(err));
	if (ktrap(fd, KERF_IOC_TRAP_ADD, site_uid, patch_uid))
		die("TRAP_ADD getuid");
	err = ksplice(fd, site_uid, 1, orig_uid + 5, &int3, 0);
	check(!err, "splice-int3", "getuid+5: %s", ename(err));
	hits0 = kinfo(fd).trap_hits;
	before = *ctr_uid;
	call_getuid(1000);
	check(*ctr_uid - before == 1000 && kinfo(fd).trap_hits - hits0 == 1000, "int3-phase",
	      "count=%llu trap_hits=%llu", (unsigned long long)(*ctr_uid - before),
	      (unsigned long long)(kinfo(fd).trap_hits - hits0));
	memcpy(cur, orig_uid + 5, 5);
	cur[0] = 0xcc;
	err = ksplice(fd, site_uid, 5, cur, jmp, 0);
	check(err == -EAGAIN, "refuse-jump-before-quiesce", "%s", ename(err));
	if (kquiesce(fd))
		die("QUIESCE");
	err = ksplice(fd, site_uid, 5, orig_uid + 5, jmp, 0);
	check(err == -ESTALE, "refuse-expect-old-mismatch", "%s", ename(err));
	err = ksplice(fd, site_uid, 5, cur, jmp, 0);
	check(!err, "splice-jump5", "getuid+5: %s", ename(err));
	kread(fd, site_uid, cur, 5);
	check(!memcmp(cur, jmp, 5), "jump5-bytes", "%02x %02x %02x %02x %02x", cur[0], cur[1],
	      cur[2], cur[3], cur[4]);
	hits0 = kinfo(fd).trap_hits;
	before = *ctr_uid;
	call_getuid(N_JUMP);
	check(*ctr_uid - before == N_JUMP && kinfo(fd).trap_hits == hits0, "jump5",
	      "count=%llu (expected %d, counter read from the mapped heap, no trap)",
	      (unsigned long long)(*ctr_uid - before), N_JUMP);
	t_jump = ns_per_call(call_getuid, N_TIME);

	/* 8. Refusals while the jump is live. Each request carries a deliberately wrong
	 * expect_old: the driver checks ownership and the kind of text before comparing bytes, so
	 * the refusal under test answers first, and a broken check would get ESTALE, never a
	 * write into the live kernel. */
	{
		const char *bl[] = { "notify_die", "exc_int3", "entry_SYSCALL_64" };
		uint8_t j[5], o[5];

		jmp5(j, f_uid, patch_uid);
		wrong(o, orig_uid, 5);
		err = ksplice(fd, f_uid, 5, o, j, KERF_SPLICE_ONE_INSN);
		check(err == -EBUSY, "refuse-ftrace-site", "getuid+0: %s", ename(err));

		for (unsigned int i = 0; i < sizeof(bl) / sizeof(bl[0]); i++) {
			uint64_t a = ksym(bl[i]);
			char name[64];

			snprintf(name, sizeof(name), "refuse-blacklist-%s", bl[i]);
			if (!a || kread(fd, a + 8, o, 5) || jmp5(j, a + 8, patch_uid)) {
				check(0, name, "cannot resolve/read");
				continue;
			}
			wrong(o, o, 5);
			err = ksplice(fd, a + 8, 5, o, j, KERF_SPLICE_ONE_INSN);
			check(err == -EPERM, name, "%s+8: %s", bl[i], ename(err));
		}

		/* Outside the kprobe blacklist but on the int3 path, so refused by kerf.ko itself:
		 * an int3 there would be met again while it is handled (notify_die()'s RCU read
		 * lock; a die notifier). A trap entry alone writes nothing. */
		{
			const char *ip[] = { "__rcu_read_unlock", "arch_uprobe_exception_notify" };

			for (unsigned int i = 0; i < sizeof(ip) / sizeof(ip[0]); i++) {
				uint64_t a = ksym(ip[i]);
				char name[64];

				snprintf(name, sizeof(name), "refuse-int3-path-%s", ip[i]);
				if (!a || kprobe_blacklisted(a)) {
					check(0, name, "not found, or already on the kprobe blacklist");
					continue;
				}
				err = ktrap(fd, KERF_IOC_TRAP_ADD, a, patch_gid);
				check(err == -EPERM, name, "%#llx: %s", (unsigned long long)a,
				      ename(err));
				if (!err)
					ktrap(fd, KERF_IOC_TRAP_DEL, a, 0);
			}
		}

		/* An exception-table entry outside the kprobe blacklist (so that only the extable
		 * check can refuse it): an instruction whose fault has a fixup found by its address.
		 * Entries are 12 bytes, relative: insn = &entry.insn + entry.insn. A trap entry
		 * alone writes nothing, so TRAP_ADD is the probe here. */
		{
			static int32_t ents[3 * 4096];
			uint64_t ex = ksym("__start___ex_table"), ex_end = ksym("__stop___ex_table");
			uint64_t insn = 0, n = ex_end > ex ? (ex_end - ex) / 12 : 0;

			if (n > 4096)
				n = 4096;
			if (n && !kread(fd, ex, ents, n * 12)) {
				for (uint64_t k = 0; k < n && !insn; k++) {
					uint64_t a = ex + 12 * k + (int64_t)ents[3 * k];

					if (a >= info.stext && a < info.etext && !kprobe_blacklisted(a))
						insn = a;
				}
			}
			if (!insn) {
				check(0, "refuse-extable", "no exception-table entry outside the blacklist");
			} else {
				err = ktrap(fd, KERF_IOC_TRAP_ADD, insn, patch_gid);
				check(err == -EPERM, "refuse-extable", "%#llx (exception table, not "
				      "blacklisted): %s", (unsigned long long)insn, ename(err));
				if (!err)
					ktrap(fd, KERF_IOC_TRAP_DEL, insn, 0);
			}
		}
		/* The kernel's own patch sites in core text, straight from its tables: a 5-byte splice
		 * over one, starting at it or ending on its first byte, is refused (kerf.ko filters
		 * these checks through indexes of the same tables; the expected bytes are wrong, so a
		 * check that let one through would show as ESTALE, never as a write). */
		{
			static const struct {
				const char *name, *start, *stop;
				unsigned int esize;
				int err;
			} tabs[] = {
				{ "refuse-jump-label", "__start___jump_table", "__stop___jump_table", 16, -EBUSY },
				{ "refuse-static-call-site", "__start_static_call_sites",
				  "__stop_static_call_sites", 8, -EBUSY },
				{ "refuse-bug-site", "__start___bug_table", "__stop___bug_table", 12, -EPERM },
			};

			for (unsigned int t = 0; t < sizeof(tabs) / sizeof(tabs[0]); t++) {
				uint64_t sites[3], at;
				int n = table_sites(fd, tabs[t].start, tabs[t].stop, tabs[t].esize, &info,
						    sites), bad = 0, tried = 0;
				char why[96] = "";

				for (int k = 0; k < n; k++) {
					for (int off = 0; off >= -4; off -= 4) {
						at = sites[k] + off;
						if (kread(fd, at, o, 5) || jmp5(j, at, patch_uid))
							continue;
						wrong(o, o, 5);
						err = ksplice(fd, at, 5, o, j, KERF_SPLICE_ONE_INSN);
						tried++;
						if (err != tabs[t].err && !bad++)
							snprintf(why, sizeof(why), "; %#llx: %s",
								 (unsigned long long)at, ename(err));
					}
				}
				check(n == 3 && tried == 6 && !bad, tabs[t].name,
				      "3 sites, at and 4 bytes before each: %s%s", ename(tabs[t].err), why);
			}
		}
		{
			uint64_t d = ksym("bpf_dispatcher_xdp_func");

			if (!d || kread(fd, d, o, 5) || jmp5(j, d, patch_uid)) {
				check(0, "refuse-bpf-dispatcher", "cannot resolve/read");
			} else {
				wrong(o, o, 5);
				err = ksplice(fd, d, 5, o, j, KERF_SPLICE_ONE_INSN);
				check(err == -EBUSY, "refuse-bpf-dispatcher", "bpf_dispatcher_xdp_func: %s",
				      ename(err));
			}
		}

		kread(fd, site_uid + 2, o, 5);
		wrong(o, o, 5);
		jmp5(j, site_uid + 2, patch_uid);
		err = ksplice(fd, site_uid + 2, 5, o, j, KERF_SPLICE_ONE_INSN);
		check(err == -EEXIST, "refuse-overlap", "getuid+7: %s", ename(err));
		/* kernel data (kerf's own data heap), not text */
		jmp5(j, info.data_heap, patch_uid);
		err = ksplice(fd, info.data_heap, 5, o, j, KERF_SPLICE_ONE_INSN);
		check(err == -ENXIO, "refuse-not-text", "data heap: %s", ename(err));

		jmp5(j, site_gid, f_uid);	/* a jump outside the patch heap */
		err = ksplice(fd, site_gid, 5, orig_gid + 5, j, KERF_SPLICE_ONE_INSN);
		check(err == -EINVAL, "refuse-target-outside-heap", "%s", ename(err));
		jmp5(j, patch_gid, patch_uid);
		wrong(o, patch, 5);
		err = ksplice(fd, patch_gid, 5, o, j, KERF_SPLICE_ONE_INSN);
		check(err == -EPERM, "refuse-own-heap", "%s", ename(err));

		/* kerf.ko's own code stays refused (the self-test loop that calls the targets is
		 * as much kerf's as its int3 notifier), but for the two self-test targets. */
		{
			uint64_t own = ksym("kerf_selftest_ioctl");
			uint64_t target = ksym("kerf_selftest_jump5");

			err = own ? ktrap(fd, KERF_IOC_TRAP_ADD, own + 5, patch_uid) : -ENOENT;
			check(err == -EPERM, "refuse-own-text", "kerf_selftest_ioctl+5: %s",
			      ename(err));
			err = target ? ktrap(fd, KERF_IOC_TRAP_ADD, target + 5, patch_uid) : -ENOENT;
			if (!err)
				err = ktrap(fd, KERF_IOC_TRAP_DEL, target + 5, 0);
			check(!err, "selftest-target-allowed", "kerf_selftest_jump5+5: %s",
			      ename(err));
		}
	}
	err = kwrite_patch(fd, patch_uid, patch, 8);
	check(err == -EBUSY, "refuse-write-live-patch", "%s", ename(err));
	err = run_status("rmmod kerf 2>/dev/null");
	check(err != 0, "no-unload-while-open", "rmmod exit %d", err);

	/* 9. ftrace keeps working on the same function: a kprobe event at getuid+0 (ftrace-based,
	 * it rewrites the nop5 at +0) counts the same calls as kerf's jump at +5. */
	err = write_file(TRACEFS "/kprobe_events", "p:kerf_smoke/uid0 __x64_sys_getuid\n");
	if (!err)
		err = write_file(TRACEFS "/events/kerf_smoke/uid0/enable", "1\n");
	if (err) {
		check(0, "ftrace-coexist", "cannot add kprobe event: %s", ename(err));
	} else {
		kp0 = kprobe_hits("uid0");
		kread(fd, f_uid, cur, 10);
		before = *ctr_uid;
		call_getuid(N_FTRACE);
		check(kprobe_hits("uid0") - kp0 == N_FTRACE && *ctr_uid - before == N_FTRACE &&
		      memcmp(cur, NOP5, 5) && !memcmp(cur + 5, jmp, 5), "ftrace-coexist",
		      "kprobe_event=%ld kerf=%llu; getuid+0 now %02x .. (ftrace), +5 still kerf's jmp",
		      kprobe_hits("uid0") - kp0, (unsigned long long)(*ctr_uid - before),
		      cur[0]);
		t_kprobe = ns_per_call(call_getuid, N_TIME / 4);
		write_file(TRACEFS "/events/kerf_smoke/uid0/enable", "0\n");
		write_file(TRACEFS "/kprobe_events", "-:kerf_smoke/uid0\n");
		kread(fd, f_uid, cur, 5);
		check(!memcmp(cur, NOP5, 5), "ftrace-restored", "getuid+0 back to nop5");
	}

	/* 10. Unsplice: the original bytes come back exactly; the trap stays until a quiesce. */
	err = kunsplice(fd, site_uid, restored);
	kread(fd, f_uid, cur, sizeof(cur));
	check(!err && !memcmp(restored, orig_uid + 5, 5) && !memcmp(cur, orig_uid, sizeof(cur)),
	      "unsplice-jump5", "%s; %zu bytes of getuid identical to before", ename(err), sizeof(cur));
	err = ktrap(fd, KERF_IOC_TRAP_DEL, site_uid, 0);
	check(err == -EBUSY, "refuse-trap-del-before-quiesce", "%s", ename(err));
	if (kquiesce(fd))
		die("QUIESCE");
	/* In a batch, beside an address that has no trap: each gets its own result. */
	err = ktrap2(fd, KERF_IOC_TRAP_DEL_BATCH, site_uid, site_uid + 1, 0, r2);
	check(err == 1 && r2[0] == 0 && r2[1] == -ENOENT, "trap-del-batch",
	      "done=%d results %lld, %lld", err, (long long)r2[0], (long long)r2[1]);
	before = *ctr_uid;
	call_getuid(1000);
	check(*ctr_uid == before, "removed-no-count", "count after removal=%llu",
	      (unsigned long long)(*ctr_uid - before));

	/* 11. Trap splice at getgid+5: an int3 whose trap resumes in the patch. */
	err = ktrap2(fd, KERF_IOC_TRAP_ADD_BATCH, site_gid, site_gid, patch_gid, r2);
	check(err == 1 && r2[0] == 0 && r2[1] == -EEXIST, "trap-add-batch",
	      "done=%d results %lld, %lld", err, (long long)r2[0], (long long)r2[1]);
	if (r2[0])
		die("TRAP_ADD_BATCH getgid");
	err = ksplice(fd, site_gid, 1, orig_gid + 5, &int3, 0);
	hits0 = kinfo(fd).trap_hits;
	before = *ctr_gid;
	call_getgid(N_TRAP);
	check(!err && *ctr_gid - before == N_TRAP && kinfo(fd).trap_hits - hits0 == N_TRAP, "trap",
	      "count=%llu trap_hits=%llu (expected %d)", (unsigned long long)(*ctr_gid - before),
	      (unsigned long long)(kinfo(fd).trap_hits - hits0), N_TRAP);
	t_trap = ns_per_call(call_getgid, N_TIME / 4);
	err = kunsplice(fd, site_gid, NULL);
	kread(fd, f_gid, cur, sizeof(cur));
	check(!err && !memcmp(cur, orig_gid, sizeof(cur)), "unsplice-trap", "%s; text identical",
	      ename(err));
	if (kquiesce(fd) || ktrap(fd, KERF_IOC_TRAP_DEL, site_gid, 0))
		die("QUIESCE/TRAP_DEL getgid");

	/* 12a. jump2 at getpid+5: a 2-byte jmp rel8 over "xor edx, edx" (one 2-byte instruction)
	 * to a springboard, a jmp rel32 written into the padding after getpid's ret, which goes
	 * to the code patch. Removal: jmp rel8 first, quiesce, then the springboard. */
	{
		uint8_t p[128], orig_pid[128], sbj[5], j2[2], sbold[5];
		uint64_t f_pid = ksym("__x64_sys_getpid"), next, sb = 0, site_pid, patch_pid;
		volatile uint64_t *ctr_pid = heap + 16;
		int n, i, ok = 0;

		next = ksym_next(f_pid);
		if (f_pid && next - f_pid <= sizeof(p) && !kread(fd, f_pid, p, next - f_pid) &&
		    !memcmp(p, NOP5, 5) && p[5] == 0x31 && p[6] == 0xd2) {
			for (i = 7; i + 1 < (int)(next - f_pid); i++) {
				if (p[i] == 0xc3 && i + 6 <= (int)(next - f_pid) &&
				    is_padding(p + i + 1, (int)(next - f_pid) - i - 1)) {
					sb = f_pid + i + 1;
					ok = 1;
					break;
				}
			}
		}
		check(ok, "jump2-site", "getpid+5: 31 d2 (xor edx, edx); springboard in padding at "
		      "getpid+%#llx, next function at +%#llx", (unsigned long long)(sb - f_pid),
		      (unsigned long long)(next - f_pid));
		if (ok) {
			site_pid = f_pid + 5;
			patch_pid = info.patch_heap + 512;
			memcpy(orig_pid, p, next - f_pid);
			memcpy(sbold, p + (sb - f_pid), 5);
			/* lock inc qword [rip+counter]; xor edx, edx; jmp getpid+7 */
			n = 0;
			p[n++] = 0xf0; p[n++] = 0x48; p[n++] = 0xff; p[n++] = 0x05;
			put32(p + n, (int64_t)(info.data_heap + 128 - (patch_pid + n + 4)));
			n += 4;
			p[n++] = 0x31; p[n++] = 0xd2;
			p[n++] = 0xe9;
			put32(p + n, (int64_t)(site_pid + 2 - (patch_pid + n + 4)));
			n += 4;
			if (kwrite_patch(fd, patch_pid, p, n) || jmp5(sbj, sb, patch_pid))
				die("write patch (getpid)");
			j2[0] = 0xeb;
			j2[1] = (uint8_t)(int8_t)(sb - (site_pid + 2));
			err = ksplice(fd, sb, 5, sbold, sbj, KERF_SPLICE_ONE_INSN);
			if (!err)
				err = ksplice(fd, site_pid, 2, (const uint8_t *)"\x31\xd2", j2,
					      KERF_SPLICE_ONE_INSN);
			before = *ctr_pid;
			for (i = 0; i < N_JUMP2; i++)
				syscall(SYS_getpid);
			check(!err && *ctr_pid - before == N_JUMP2, "jump2",
			      "count=%llu (expected %d): eb %02x at getpid+5 -> springboard -> patch",
			      (unsigned long long)(*ctr_pid - before), N_JUMP2, j2[1]);
			err = kunsplice(fd, sb, NULL);
			check(err == -EBUSY, "refuse-springboard-in-use", "%s", ename(err));
			err = kunsplice(fd, site_pid, NULL);
			check(!err, "unsplice-jmp8", "%s", ename(err));
			err = kunsplice(fd, sb, NULL);
			check(err == -EBUSY, "refuse-springboard-before-quiesce", "%s", ename(err));
			if (kquiesce(fd))
				die("QUIESCE");
			err = kunsplice(fd, sb, NULL);
			check(!err, "unsplice-springboard", "%s", ename(err));
			ok = !kread(fd, f_pid, p, next - f_pid) && !memcmp(p, orig_pid, next - f_pid);
			check(ok, "jump2-text-restored", "all %llu bytes of getpid and its padding identical",
			      (unsigned long long)(next - f_pid));
			if (kquiesce(fd))
				die("QUIESCE");
		}
	}

	/* 12. An optimized kprobe at getuid+5 (kprobes' own jump, the Djprobe descendant) owns
	 * those bytes: kerf refuses them. Also its per-call time, for the ratio. */
	err = write_file(TRACEFS "/kprobe_events", "p:kerf_smoke/uid5 __x64_sys_getuid+5\n");
	if (!err)
		err = write_file(TRACEFS "/events/kerf_smoke/uid5/enable", "1\n");
	if (err) {
		check(0, "refuse-kprobe", "cannot add kprobe event at +5: %s", ename(err));
	} else {
		for (int i = 0; i < 50 && !kprobe_optimized(site_uid); i++)
			usleep(20000);
		kread(fd, site_uid, cur, 5);
		wrong(cur, cur, 5);
		err = ksplice(fd, site_uid, 5, cur, jmp, KERF_SPLICE_ONE_INSN);
		check(err == -EBUSY, "refuse-kprobe", "getuid+5 (%s kprobe): %s",
		      kprobe_optimized(site_uid) ? "optimized" : "int3", ename(err));
		if (kprobe_optimized(site_uid))
			t_optprobe = ns_per_call(call_getuid, N_TIME / 4);
		write_file(TRACEFS "/events/kerf_smoke/uid5/enable", "0\n");
		write_file(TRACEFS "/kprobe_events", "-:kerf_smoke/uid5\n");
	}

	printf("TIME getuid ns/call (TCG, compare only as ratios): plain=%.0f kerf_jump5=%.0f "
	       "kerf_trap=%.0f kprobe_ftrace=%.0f optprobe=%.0f\n", t_plain, t_jump, t_trap,
	       t_kprobe, t_optprobe);

	/* 13. Splicing under fire: another CPU runs through both points while this one splices
	 * and restores them again and again (jump5 of one instruction, and the full Djprobe
	 * protocol with a trap); every step is verified, and at the end the text is original. */
	{
		pid_t hammer = start_hammer();
		int cycles = 0, bad = 0, step = 0, step_err = 0;
		uint8_t cc5[5];
		char why[96];
/* Stop at the first failing step: a half-done cycle must not go on. */
#define STEP(n, call) do { if (!bad && (step_err = (call)) != 0) { bad = 1; step = (n); } } while (0)

		pin_to_cpu(0);
		memcpy(cc5, orig_uid + 5, 5);
		cc5[0] = 0xcc;
		for (int i = 0; i < stress_cycles && !bad; i++, cycles++) {
			STEP(1, ksplice(fd, site_uid, 5, orig_uid + 5, jmp, KERF_SPLICE_ONE_INSN));
			STEP(2, kunsplice(fd, site_uid, NULL));
			if (i % 10 == 0) {
				STEP(3, ktrap(fd, KERF_IOC_TRAP_ADD, site_gid, patch_gid));
				STEP(4, ksplice(fd, site_gid, 1, orig_gid + 5, &int3, 0));
				STEP(5, kquiesce(fd));
				STEP(6, kunsplice(fd, site_gid, NULL));
				STEP(7, kquiesce(fd));
				STEP(8, ktrap(fd, KERF_IOC_TRAP_DEL, site_gid, 0));
				STEP(9, ktrap(fd, KERF_IOC_TRAP_ADD, site_uid, patch_uid));
				STEP(10, ksplice(fd, site_uid, 1, orig_uid + 5, &int3, 0));
				STEP(11, kquiesce(fd));
				STEP(12, ksplice(fd, site_uid, 5, cc5, jmp, 0));
				STEP(13, kunsplice(fd, site_uid, NULL));
				STEP(14, kquiesce(fd));
				STEP(15, ktrap(fd, KERF_IOC_TRAP_DEL, site_uid, 0));
			}
		}
		stop_hammer(hammer);
		kread(fd, f_uid, cur, sizeof(cur));
		bad |= memcmp(cur, orig_uid, sizeof(cur)) != 0;
		kread(fd, f_gid, cur, sizeof(cur));
		bad |= memcmp(cur, orig_gid, sizeof(cur)) != 0;
		snprintf(why, sizeof(why), "; first failure at step %d: %s", step, ename(step_err));
		check(!bad && cycles == stress_cycles, "stress", "%d splice/restore cycles (%d with "
		      "the int3-quiesce-jmp protocol) while CPU 1 runs through the points; text "
		      "identical after%s", cycles, (cycles + 9) / 10, bad ? why : "");
#undef STEP
	}

	/* 14. Batches (KERF_IOC_SPLICE_BATCH / KERF_IOC_UNSPLICE_BATCH): the Djprobe protocol for
	 * two sites at once, int3s in one call and jumps in another, with refused entries in the
	 * same calls that must not sink the others; then both removed in one call, and every byte
	 * of the text compared with what it was before. */
	{
		uint64_t bl = ksym("notify_die") + 8, stale = ksym("__x64_sys_getppid") + 5, done = 0;
		uint8_t o_bl[8], o_stale[8], w_stale[8], j_bl[5], j_stale[5], jmp_gid[5], cc5u[5];
		uint8_t cc5g[5], c_bl[8], c_stale[8];
		struct kerf_splice_entry e[5];
		struct kerf_unsplice_entry u[3];
		int ok;

		if (!ksym("notify_die") || !ksym("__x64_sys_getppid") || kread(fd, bl, o_bl, 8) ||
		    kread(fd, stale, o_stale, 8) || jmp5(j_bl, bl, patch_uid) ||
		    jmp5(j_stale, stale, patch_uid) || jmp5(jmp_gid, site_gid, patch_gid))
			die("batch set-up");
		wrong(w_stale, o_stale, 5);
		err = kbatch(fd, KERF_IOC_SPLICE_BATCH, e, 0, &done);
		check(err == -EINVAL, "refuse-empty-batch", "%s", ename(err));
		err = ktrap(fd, KERF_IOC_TRAP_ADD, site_uid, patch_uid);
		if (!err)
			err = ktrap(fd, KERF_IOC_TRAP_ADD, site_gid, patch_gid);
		if (err)
			die("batch TRAP_ADD");
		/* In address order except the last two, which start runs of their own. */
		e[0] = bentry(site_uid < site_gid ? site_uid : site_gid, 1,
			      site_uid < site_gid ? orig_uid + 5 : orig_gid + 5, &int3, 0);
		e[1] = bentry(site_uid < site_gid ? site_gid : site_uid, 1,
			      site_uid < site_gid ? orig_gid + 5 : orig_uid + 5, &int3, 0);
		e[2] = bentry(bl, 5, o_bl, j_bl, KERF_SPLICE_ONE_INSN);	/* blacklisted */
		e[3] = bentry(stale, 5, w_stale, j_stale, KERF_SPLICE_ONE_INSN); /* wrong bytes */
		e[4] = bentry(site_uid, 1, orig_uid + 5, &int3, 0);	/* a second time */
		err = kbatch(fd, KERF_IOC_SPLICE_BATCH, e, 5, &done);
		before = *ctr_uid;
		hits0 = kinfo(fd).trap_hits;
		call_getuid(1000);
		call_getgid(1000);
		check(!err && done == 2 && !e[0].result && !e[1].result && e[2].result == -EPERM &&
		      e[3].result == -ESTALE && e[4].result == -EEXIST && *ctr_uid - before == 1000 &&
		      kinfo(fd).trap_hits - hits0 == 2000, "batch-int3",
		      "done=%llu results %lld %lld %s %s %s; getuid count=%llu trap_hits=%llu",
		      (unsigned long long)done, (long long)e[0].result, (long long)e[1].result,
		      ename((int)e[2].result), ename((int)e[3].result), ename((int)e[4].result),
		      (unsigned long long)(*ctr_uid - before),
		      (unsigned long long)(kinfo(fd).trap_hits - hits0));
		kread(fd, bl, c_bl, 8);
		kread(fd, stale, c_stale, 8);
		check(!memcmp(c_bl, o_bl, 8) && !memcmp(c_stale, o_stale, 8), "batch-refused-untouched",
		      "notify_die+8 and __x64_sys_getppid+5 unchanged");
		/* The jumps over the quiesced int3s, in one call. */
		if (kquiesce(fd))
			die("QUIESCE");
		memcpy(cc5u, orig_uid + 5, 5);
		cc5u[0] = 0xcc;
		memcpy(cc5g, orig_gid + 5, 5);
		cc5g[0] = 0xcc;
		e[0] = bentry(site_uid, 5, cc5u, jmp, 0);
		e[1] = bentry(site_gid, 5, cc5g, jmp_gid, 0);
		err = kbatch(fd, KERF_IOC_SPLICE_BATCH, e, 2, &done);
		before = *ctr_uid;
		hits0 = kinfo(fd).trap_hits;
		call_getuid(N_JUMP);
		check(!err && done == 2 && !e[0].result && !e[1].result &&
		      *ctr_uid - before == N_JUMP && kinfo(fd).trap_hits == hits0, "batch-jump5",
		      "done=%llu results %s %s; count=%llu", (unsigned long long)done,
		      ename((int)e[0].result), ename((int)e[1].result),
		      (unsigned long long)(*ctr_uid - before));
		/* Removal in one call, with an address that has no splice. */
		memset(u, 0, sizeof(u));
		u[0].req.addr = site_uid;
		u[1].req.addr = site_gid;
		u[2].req.addr = stale;
		err = kbatch(fd, KERF_IOC_UNSPLICE_BATCH, u, 3, &done);
		ok = !err && done == 2 && !u[0].result && !u[1].result && u[2].result == -ENOENT &&
		     u[0].req.len == 5 && !memcmp(u[0].req.restored, orig_uid + 5, 5) &&
		     u[1].req.len == 5 && !memcmp(u[1].req.restored, orig_gid + 5, 5);
		if (kquiesce(fd) || ktrap(fd, KERF_IOC_TRAP_DEL, site_uid, 0) ||
		    ktrap(fd, KERF_IOC_TRAP_DEL, site_gid, 0))
			ok = 0;
		kread(fd, f_uid, cur, sizeof(cur));
		ok &= !memcmp(cur, orig_uid, sizeof(cur));
		kread(fd, f_gid, cur, sizeof(cur));
		ok &= !memcmp(cur, orig_gid, sizeof(cur));
		info2 = kinfo(fd);
		check(ok && info2.live_splices == 0 && info2.live_traps == 0, "batch-unsplice",
		      "done=%llu results %s %s %s; text identical, splices=%llu traps=%llu",
		      (unsigned long long)done, ename((int)u[0].result), ename((int)u[1].result),
		      ename((int)u[2].result), (unsigned long long)info2.live_splices,
		      (unsigned long long)info2.live_traps);
	}

	/* 15. The daemon is killed (SIGKILL) with live splices: the kernel closes the device and
	 * kerf restores them. */
	{
		pid_t pid;
		int st;

		/* The mapping holds the file open too: drop both so the device is free. */
		munmap((void *)heap, info.data_heap_size);
		close(fd);
		pid = fork();
		if (pid == 0) {
			int cfd = open(KERF_DEVICE_PATH, O_RDWR);

			if (cfd < 0 || mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, cfd, 0) == MAP_FAILED ||
			    ksplice(cfd, site_uid, 5, orig_uid + 5, jmp, KERF_SPLICE_ONE_INSN) ||
			    ktrap(cfd, KERF_IOC_TRAP_ADD, site_gid, patch_gid) ||
			    ksplice(cfd, site_gid, 1, orig_gid + 5, &int3, 0))
				_exit(1);
			kill(getpid(), SIGKILL);
		}
		waitpid(pid, &st, 0);
		fd = open(KERF_DEVICE_PATH, O_RDWR | O_CLOEXEC);
		if (fd < 0)
			die("reopen after kill");
		info2 = kinfo(fd);
		kread(fd, f_uid, cur, sizeof(cur));
		err = memcmp(cur, orig_uid, sizeof(cur));
		kread(fd, f_gid, cur, sizeof(cur));
		err |= memcmp(cur, orig_gid, sizeof(cur));
		check(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL && !err && info2.live_splices == 0 &&
		      info2.live_traps == 0, "kill-restores", "daemon SIGKILLed with 2 live splices: "
		      "text identical, splices=%llu traps=%llu", (unsigned long long)info2.live_splices,
		      (unsigned long long)info2.live_traps);
		heap = mmap(NULL, info.data_heap_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (heap == MAP_FAILED)
			die("mmap data heap again");
		ctr_uid = heap;
	}

	/* 16. Closing the device with live splices restores them (the daemon exits). The
	 * getuid jump goes in with KERF_SPLICE_ONE_INSN: its 5 bytes lie inside one 9-byte
	 * instruction, so no thread can be stopped inside them. */
	kread(fd, f_uid, cur, sizeof(cur));
	check(!memcmp(cur, orig_uid, sizeof(cur)), "text-clean-before-close", "");
	err = ksplice(fd, site_uid, 5, orig_uid + 5, jmp, KERF_SPLICE_ONE_INSN);
	check(!err, "splice-jump5-one-insn", "%s", ename(err));
	if (!ktrap(fd, KERF_IOC_TRAP_ADD, site_gid, patch_gid))
		err = ksplice(fd, site_gid, 1, orig_gid + 5, &int3, 0);
	before = *ctr_uid;
	call_getuid(500);
	info2 = kinfo(fd);
	check(!err && *ctr_uid - before == 500 && info2.live_splices == 2 && info2.live_traps == 1,
	      "live-before-close", "count=%llu splices=%llu traps=%llu",
	      (unsigned long long)(*ctr_uid - before), (unsigned long long)info2.live_splices,
	      (unsigned long long)info2.live_traps);
	munmap((void *)heap, info.data_heap_size);
	close(fd);
	fd = open(KERF_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		die("reopen");
	info2 = kinfo(fd);
	kread(fd, f_uid, cur, sizeof(cur));
	err = memcmp(cur, orig_uid, sizeof(cur));
	kread(fd, f_gid, cur, sizeof(cur));
	err |= memcmp(cur, orig_gid, sizeof(cur));
	check(!err && info2.live_splices == 0 && info2.live_traps == 0, "close-restores",
	      "text identical, splices=%llu traps=%llu", (unsigned long long)info2.live_splices,
	      (unsigned long long)info2.live_traps);
	close(fd);

	if (failures) {
		printf("SMOKE FAIL %d\n", failures);
		return 1;
	}
	printf("SMOKE PASS\n");
	return 0;
}
