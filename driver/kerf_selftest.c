// SPDX-License-Identifier: GPL-2.0
/*
 * kerf_selftest.c - /dev/kerf_selftest: a loop that calls a function of kerf.ko N times,
 * so that a probe on it (kerf's splices, kprobes, optprobes, ftrace) is hit N times in a
 * row with nothing else in between, and its cost per hit can be measured to a few percent
 * (bench/kernel_probe_cost.sh) and its count checked exactly (tests/fixtures/kernel_guest.sh).
 * The kernel's kprobe self-tests call a probed function of their own the same way.
 *
 * Why a device of its own: /dev/kerf is exclusive, and kerf holds it while its probes are
 * live, which is exactly when the loop must run. This node only runs the loop; it changes
 * nothing, holds no kerf lock and may be opened by several root processes at once.
 *
 * The three targets are the only part of kerf.ko's text that KERF_IOC_SPLICE and
 * KERF_IOC_TRAP_ADD accept (kerf_selftest_text()); the rest of kerf.ko stays refused.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/uaccess.h>
#include <linux/capability.h>
#include <linux/sched/signal.h>
#include <linux/timekeeping.h>
#include <linux/minmax.h>

#include "kerf_uapi.h"
#include "kerf_selftest.h"

/* Longer gaps between a target and the next symbol are not alignment padding. */
#define KERF_SELFTEST_MAX_PAD	64

/**
 * kerf_selftest_jump5() - probe target whose first instructions admit a 5-byte jmp
 * @counter: incremented once per call
 *
 * After the ftrace site come a load, an add and a store: straight-line code with no branch
 * into it, so kerf splices a jmp rel32 there (and an optprobe can be optimised there).
 * __noipa: never inlined, cloned or analysed by its callers, so the loop really makes every
 * call; the store through @counter is a side effect no compiler may drop.
 */
static __noipa void kerf_selftest_jump5(u64 *counter)
{
	WRITE_ONCE(*counter, READ_ONCE(*counter) + 1);
}

/**
 * kerf_selftest_twin() - kerf_selftest_jump5() again, at another address
 * @counter: incremented once per call
 *
 * Left unprobed, it is the baseline: a probe's cost per hit is the time per call of the
 * probed target less this one's, measured right after it (under qemu the speed of the host
 * drifts by tens of percent from one second to the next). __noipa also rules out identical
 * code folding, which would make the two one function.
 */
static __noipa void kerf_selftest_twin(u64 *counter)
{
	WRITE_ONCE(*counter, READ_ONCE(*counter) + 1);
}

/**
 * kerf_selftest_short() - probe target where a 5-byte jmp does not fit
 * @counter: incremented once per call
 * @spin: extra turns of the inner loop; the self-test passes 0
 *
 * The 3-byte incq is followed by the head of a loop (label 1), a branch target inside the 5
 * bytes a jmp rel32 would displace: a jump there would land in the middle of the splice. So
 * only a jmp rel8 to a springboard (the first instruction is long enough) or an int3 fits.
 * With @spin 0 the loop body never runs: one hit per call, as for kerf_selftest_jump5().
 */
static __noipa void kerf_selftest_short(u64 *counter, unsigned long spin)
{
	asm volatile("incq %0\n"
		     "1:\n\t"
		     "testq %1, %1\n\t"
		     "jz 2f\n\t"
		     "decq %1\n\t"
		     "jmp 1b\n"
		     "2:\n"
		     : "+m" (*counter), "+r" (spin));
}

/* [start, end) of each target and its padding (kerf_selftest_init()). */
static struct {
	unsigned long start, end;
} kerf_selftest_range[KERF_SELFTEST_NR];

/**
 * kerf_selftest_text() - whether [addr, end) lies inside one self-test target
 * @addr: first byte
 * @end: one past the last byte
 *
 * Return: true if it does.
 */
bool kerf_selftest_text(unsigned long addr, unsigned long end)
{
	unsigned int i;

	for (i = 0; i < KERF_SELFTEST_NR; i++) {
		if (addr >= kerf_selftest_range[i].start && end <= kerf_selftest_range[i].end &&
		    addr < end)
			return true;
	}
	return false;
}

/**
 * kerf_selftest_extent() - where a function of kerf.ko ends, with the padding after it
 * @addr: the function's address
 *
 * The padding up to the next symbol is included (when it is short, as alignment padding is)
 * because kerf puts a jmp rel8's springboard in padding next to the function. The sizes
 * come from kerf.ko's own ELF symbol table, which the module loader keeps for kallsyms.
 * Context: module init (the core symbol table is complete and stays as it is).
 *
 * Return: the end address, or 0 if @addr has no sized symbol.
 */
static unsigned long __init kerf_selftest_extent(unsigned long addr)
{
	const struct mod_kallsyms *ks = &THIS_MODULE->core_kallsyms;
	unsigned long end = 0, next = ULONG_MAX, v;
	unsigned int i;

	for (i = 0; i < ks->num_symtab; i++) {
		v = ks->symtab[i].st_value;
		if (v == addr && ks->symtab[i].st_size)
			end = addr + ks->symtab[i].st_size;
		else if (v > addr && v < next)
			next = v;
	}
	if (end && next >= end && next - end < KERF_SELFTEST_MAX_PAD)
		end = next;
	return end;
}

/**
 * kerf_selftest_loop() - call one target @calls times and time the calls
 * @req: target and calls in; ns, best_ns, hits, addr and code out
 *
 * The calls go in blocks of KERF_SELFTEST_BLOCK (about a millisecond even with an int3
 * probe under qemu TCG), with the clock read around each block and a cond_resched() between
 * blocks, which is not counted. Interrupts that hit a block are counted, as for any loop, and
 * under qemu so is the time the host does not run the vCPU (the guest's clock runs on); on a
 * shared host that can be most of the total, so the fastest block is reported too.
 *
 * Return: 0, -EINVAL (unknown target, too many calls) or -EINTR (fatal signal).
 */
static long kerf_selftest_loop(struct kerf_selftest *req)
{
	u64 counter = 0, done, n, i, t0, t;
	unsigned long addr;

	if (req->target >= KERF_SELFTEST_NR || req->calls > KERF_SELFTEST_MAX_CALLS)
		return -EINVAL;
	req->ns = 0;
	req->best_ns = 0;
	for (done = 0; done < req->calls; done += n) {
		n = min_t(u64, req->calls - done, KERF_SELFTEST_BLOCK);
		t0 = ktime_get_ns();
		switch (req->target) {
		case KERF_SELFTEST_JUMP5:
			for (i = 0; i < n; i++)
				kerf_selftest_jump5(&counter);
			break;
		case KERF_SELFTEST_SHORT:
			for (i = 0; i < n; i++)
				kerf_selftest_short(&counter, 0);
			break;
		default:
			for (i = 0; i < n; i++)
				kerf_selftest_twin(&counter);
		}
		t = ktime_get_ns() - t0;
		req->ns += t;
		/* Only whole blocks: a shorter last one would look faster. */
		if (n == KERF_SELFTEST_BLOCK && (!req->best_ns || t < req->best_ns))
			req->best_ns = t;
		cond_resched();
		if (fatal_signal_pending(current))
			return -EINTR;
	}
	req->hits = counter;
	addr = kerf_selftest_range[req->target].start;
	req->addr = addr;
	/* Our own text, readable; a splice written meanwhile may be seen half-done. */
	memcpy(req->code, (void *)addr, sizeof(req->code));
	return 0;
}

/**
 * kerf_selftest_ioctl() - KERF_IOC_SELFTEST
 * @file: /dev/kerf_selftest
 * @cmd: the request
 * @arg: user pointer to struct kerf_selftest
 *
 * Return: 0 or a negative errno as documented in kerf_uapi.h.
 */
static long kerf_selftest_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct kerf_selftest req;
	long ret;

	if (cmd != KERF_IOC_SELFTEST)
		return -ENOTTY;
	if (copy_from_user(&req, (void __user *)arg, sizeof(req)))
		return -EFAULT;
	ret = kerf_selftest_loop(&req);
	if (ret)
		return ret;
	return copy_to_user((void __user *)arg, &req, sizeof(req)) ? -EFAULT : 0;
}

/**
 * kerf_selftest_open() - open /dev/kerf_selftest: root (CAP_SYS_ADMIN) only
 * @inode: the device inode
 * @file: the new file
 *
 * Return: 0 or -EPERM.
 */
static int kerf_selftest_open(struct inode *inode, struct file *file)
{
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	return nonseekable_open(inode, file);
}

static const struct file_operations kerf_selftest_fops = {
	.owner = THIS_MODULE,	/* no unload while a loop runs */
	.open = kerf_selftest_open,
	.unlocked_ioctl = kerf_selftest_ioctl,
	.llseek = no_llseek,
};

static struct miscdevice kerf_selftest_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kerf_selftest",
	.fops = &kerf_selftest_fops,
	.mode = 0600,
};

/**
 * kerf_selftest_init() - learn the targets' extents and create /dev/kerf_selftest
 *
 * Return: 0, -ENOENT (a target has no size in the symbol table: splices into it would all
 * be refused, so fail loudly instead) or misc_register()'s error.
 */
int __init kerf_selftest_init(void)
{
	static const unsigned long fns[KERF_SELFTEST_NR] = {
		[KERF_SELFTEST_JUMP5] = (unsigned long)kerf_selftest_jump5,
		[KERF_SELFTEST_SHORT] = (unsigned long)kerf_selftest_short,
		[KERF_SELFTEST_TWIN] = (unsigned long)kerf_selftest_twin,
	};
	unsigned long end;
	unsigned int i;

	for (i = 0; i < KERF_SELFTEST_NR; i++) {
		end = kerf_selftest_extent(fns[i]);
		if (!end) {
			pr_err("self-test target %ps has no size in kerf.ko's symbols\n",
			       (void *)fns[i]);
			return -ENOENT;
		}
		kerf_selftest_range[i].start = fns[i];
		kerf_selftest_range[i].end = end;
	}
	return misc_register(&kerf_selftest_misc);
}

/**
 * kerf_selftest_exit() - remove /dev/kerf_selftest
 */
void kerf_selftest_exit(void)
{
	misc_deregister(&kerf_selftest_misc);
}
