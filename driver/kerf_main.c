// SPDX-License-Identifier: GPL-2.0
/*
 * kerf_main.c - kerf.ko, the in-kernel part of kerf: /dev/kerf.
 *
 * kerf splices generated code into the live kernel (KernInst, Djprobe). Everything clever
 * (symbols, decoding, CFG, liveness, code generation, planning) happens in the user-space
 * daemon; this module only does what user space cannot do safely:
 *   - read kernel memory without oopsing on a bad address;
 *   - own a patch heap (executable) and a data heap (mmap-able) within +-2 GiB of kernel text;
 *   - write the patch heap, and write splices with the int3 bypass under text_mutex, after
 *     refusing bytes the kernel forbids (kprobe blacklist, BUG sites) or that another patching
 *     mechanism owns (ftrace, jump labels, static calls, SMP alternatives, kprobes);
 *   - remember every live splice and restore it on UNSPLICE and when the device is closed;
 *   - quiesce (RCU, RCU-tasks) before patch memory is reused;
 *   - redirect int3 traps at trap splices to their code patch.
 * The ABI, the protocol and the errno contract are in kerf_uapi.h.
 *
 * Locking: kerf_lock (a mutex) serialises every ioctl and release; it is taken before
 * text_mutex, and text_mutex is held only around the ownership checks and the writes
 * (kerf_poke_queue() .. kerf_poke_flush()), the way ftrace, jump labels, static calls and
 * kprobes hold it while they patch, so nobody else patches text between our check and our
 * write. The int3 notifier takes no lock: it reads an
 * RCU-published immutable sorted table.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/module.h>
#include <linux/miscdevice.h>
#include <linux/fs.h>
#include <linux/mm.h>
#include <linux/slab.h>
#include <linux/vmalloc.h>
#include <linux/uaccess.h>
#include <linux/capability.h>
#include <linux/mutex.h>
#include <linux/xarray.h>
#include <linux/kprobes.h>
#include <linux/kdebug.h>
#include <linux/rcupdate.h>
#include <linux/utsname.h>
#include <linux/bug.h>
#include <linux/extable.h>
#include <linux/kallsyms.h>
#include <linux/jump_label.h>
#include <linux/static_call_types.h>
#include <linux/sort.h>
#include <generated/utsrelease.h>
#include <asm/text-patching.h>
#include <asm/kprobes.h>
#include <asm/unaligned.h>

#include "kerf_uapi.h"
#include "kerf_heap.h"
#include "kerf_selftest.h"

/* Every block of core text is about 700,000 splices, a sixth of them traps. */
#define KERF_MAX_SPLICES	(1 << 20)
#define KERF_MAX_TRAPS		(1 << 20)
/*
 * Entries of one run of the int3 bypass (kerf_poke_flush()): its three syncs are shared by
 * them, and kerf_int3_notify() scans them linearly.
 */
#define KERF_POKE_RUN		128

/* The patch heap lives in kerf's own text (kerf_heap.S); the data heap is page-aligned .bss. */
extern u8 kerf_patch_heap[], kerf_patch_heap_end[];
static u8 kerf_data_heap[KERF_DATA_HEAP_SIZE] __aligned(KERF_HEAP_ALIGN);

/*
 * Kernel functions and data that 6.1 does not export to modules, resolved at load time through
 * kallsyms_lookup_name (itself found with a kprobe, the one exported way to learn a symbol's
 * address). Each is the very function the kernel's own patchers use for the same purpose.
 */
static struct {
	unsigned long (*kallsyms_lookup_name)(const char *name);
	void (*text_poke_finish)(void);
	void (*text_poke_sync)(void);
	void *(*text_poke)(void *addr, const void *opcode, size_t len);
	void *(*text_poke_copy)(void *addr, const void *opcode, size_t len);
	void *(*text_poke_set)(void *addr, int c, size_t len);
	void (*perf_event_text_poke)(const void *addr, const void *old_bytes, size_t old_len,
				     const void *new_bytes, size_t new_len);
	struct mutex *text_mutex;
	bool (*within_kprobe_blacklist)(unsigned long addr);
	unsigned long (*ftrace_location_range)(unsigned long start, unsigned long end);
	int (*jump_label_text_reserved)(void *start, void *end);
	int (*static_call_text_reserved)(void *start, void *end);
	int (*alternatives_text_reserved)(void *start, void *end);
	int (*kallsyms_lookup_size_offset)(unsigned long addr, unsigned long *size,
					   unsigned long *offset);
	struct kprobe *(*get_kprobe)(void *addr);
	struct bug_entry *(*find_bug)(unsigned long bugaddr);
	const struct exception_table_entry *(*search_exception_tables)(unsigned long addr);
	struct module *(*module_text_address)(unsigned long addr);
	unsigned long stext, etext;
	unsigned long static_call_text_start, static_call_text_end;
	struct jump_entry *jump_table_start, *jump_table_stop;
	struct static_call_site *static_call_sites_start, *static_call_sites_stop;
	struct bug_entry *bug_table_start, *bug_table_stop;
	struct atomic_notifier_head *die_chain;
} ks;

/*
 * Sorted addresses in core kernel text, built at load from the core kernel's own tables (core
 * text gets no new entries after boot): the code of every jump label and static call site
 * (each at most KERF_SITE_LEN bytes), and every BUG()/WARN() site. Only filters in front of the
 * kernel's own checks, which walk a whole table on every call (find_bug() for every byte of a
 * splice): a core-text range that meets no address here cannot be reserved by those checks
 * (module entries lie in module text), so they are skipped for it; for any other range, and
 * for module text, they are made. An index that could not be built (a == NULL) skips nothing.
 *
 * The sites' index also keeps each site's length (len: a jump label's read from its bytes at
 * load, a static call site's always CALL_INSN_SIZE), so that a range that meets a site's
 * address window is answered here too (see kerf_core_site_reserved()):
 * jump_label_text_reserved() decodes every jump entry of the kernel on each call, seconds
 * under TCG once core text is spliced.
 */
#define KERF_SITE_LEN	5	/* JUMP_LABEL_NOP_SIZE, CALL_INSN_SIZE */
struct kerf_addr_index {
	unsigned long *a;
	u8 *len;	/* kerf_core_sites only: each site's length, 0 if unknown */
	size_t n;
};
static struct kerf_addr_index kerf_core_sites, kerf_core_bugs;

/* One live splice. Only touched under kerf_lock. */
struct kerf_splice_rec {
	unsigned long addr;
	unsigned int len;
	u8 old[KERF_MAX_SPLICE_LEN];	/* the original bytes, restored on unsplice */
	u8 new[KERF_MAX_SPLICE_LEN];	/* the bytes kerf wrote */
	struct module *mod;		/* target module, referenced while the splice lives */
	struct kerf_splice_rec *board;	/* the springboard a jmp rel8 goes through */
	unsigned int users;		/* live jmp rel8 splices going through this one */
	bool had_users;			/* one of them was removed ... */
	u64 users_gone_seq;		/* ... when kerf_quiesce_done had this value */
	u64 seq;			/* kerf_quiesce_done when the bytes were written */
	unsigned int pending_len;	/* while a request of this call is writing it: its len */
	struct list_head order;		/* every live splice, newest first */
};

/* Process-context state of one trap (addr -> patch). */
struct kerf_trap_meta {
	unsigned long patch;
	bool int3_live;		/* a live len-1 int3 splice sits at addr */
	bool int3_gone;		/* one was removed (or replaced) ... */
	u64 gone_seq;		/* ... when kerf_quiesce_done had this value */
};

/* What the int3 notifier reads: immutable once published, freed after a grace period. */
struct kerf_trap_ent {
	unsigned long addr;
	unsigned long patch;
};

struct kerf_trap_tab {
	struct rcu_head rcu;
	unsigned int n;
	struct kerf_trap_ent e[];
};

static DEFINE_MUTEX(kerf_lock);
static unsigned long kerf_open_bit;
static DEFINE_XARRAY(kerf_splices);	/* addr -> struct kerf_splice_rec */
static LIST_HEAD(kerf_splice_list);
static unsigned long kerf_nr_splices;
static DEFINE_XARRAY(kerf_traps_meta);	/* addr -> struct kerf_trap_meta */
static unsigned long kerf_nr_traps;
static struct kerf_trap_tab __rcu *kerf_traps;
/* kerf_traps_meta changed since kerf_traps was built (see kerf_publish_traps_if_dirty()). */
static bool kerf_traps_dirty;
static DEFINE_XARRAY(kerf_oss);	/* patch entry -> number of live users (xa value) */
static DEFINE_XARRAY(kerf_retired);	/* patch entries unused since the last quiesce */
static u64 kerf_quiesce_done;
/*
 * Offset in the patch heap just past the last KERF_IOC_WRITE_PATCH, reported by KERF_IOC_INFO:
 * each session (one open of /dev/kerf) starts its code there and wraps to the start only when
 * the rest is too small, so the heap a session writes is the one written longest ago, never the
 * code the sessions just before it ran. Quiescence already makes reuse safe; this keeps a CPU
 * that somehow still held an old patch address (qemu TCG, see kerf_poke_flush()) running that
 * patch's own code rather than the middle of a newer one. Only touched under kerf_lock.
 */
static unsigned long kerf_patch_next;
static atomic64_t kerf_trap_hits = ATOMIC64_INIT(0);
/*
 * The run kerf is writing right now: queued, not yet flushed (written under text_mutex, the
 * address ranges read by the notifier; kerf_poke_n is published after the entry it counts).
 */
struct kerf_poke_ent {
	unsigned long addr;
	unsigned long len;
	unsigned long resume;	/* where a CPU that meets the temporary int3 goes on, or 0 */
	const u8 *bytes;	/* the final bytes */
	long *ret;		/* where a failed read-back is reported (-EIO) */
	u8 old[KERF_MAX_SPLICE_LEN];	/* the bytes before, for perf's text_poke record */
};
static struct kerf_poke_ent kerf_poking[KERF_POKE_RUN];
static unsigned int kerf_poke_n;
static bool kerf_pinned;

/**
 * kerf_in_patch_heap() - whether [addr, addr+len) lies inside the patch heap
 * @addr: start
 * @len: length in bytes
 *
 * Return: true if it does.
 */
static bool kerf_in_patch_heap(unsigned long addr, unsigned long len)
{
	unsigned long lo = (unsigned long)kerf_patch_heap;
	unsigned long hi = (unsigned long)kerf_patch_heap_end;

	return addr >= lo && addr < hi && len <= hi - addr;
}

/**
 * kerf_int3_notify() - die notifier: resume an int3 at a trap splice in its code patch
 * @nb: our notifier block
 * @val: die event; only DIE_INT3 is ours
 * @data: struct die_args with the trapping registers
 *
 * Runs in int3 context (the kernel treats it like an NMI: any CPU, interrupts off, possibly
 * nested inside anything), after the kernel's poke handler and kprobes' handler have
 * declined the trap. So it takes no lock and does not sleep: it binary-searches an immutable
 * table published with RCU (the notifier chain already runs under rcu_read_lock()). It must
 * not be probed itself, hence notrace and NOKPROBE_SYMBOL.
 *
 * Return: NOTIFY_STOP with regs->ip set to the patch if the int3 is one of ours, to the
 * emulated jump's target or back to the int3's address if it is kerf's own transient one (see
 * below).
 */
static int notrace kerf_int3_notify(struct notifier_block *nb, unsigned long val, void *data)
{
	struct die_args *args = data;
	struct pt_regs *regs = args->regs;
	const struct kerf_trap_tab *tab;
	const struct kerf_poke_ent *e;
	unsigned long addr, start, to;
	unsigned int lo, hi, mid, n;
	int ret = NOTIFY_DONE;

	if (val != DIE_INT3 || !regs || user_mode(regs))
		return NOTIFY_DONE;
	/* The int3 has executed: ip is one byte past it. */
	addr = regs->ip - INT3_INSN_SIZE;

	rcu_read_lock();
	tab = rcu_dereference(kerf_traps);
	if (tab) {
		lo = 0;
		hi = tab->n;
		while (lo < hi) {
			mid = lo + (hi - lo) / 2;
			if (tab->e[mid].addr == addr) {
				regs->ip = tab->e[mid].patch;
				atomic64_inc(&kerf_trap_hits);
				ret = NOTIFY_STOP;
				break;
			}
			if (tab->e[mid].addr < addr)
				lo = mid + 1;
			else
				hi = mid;
		}
	}
	rcu_read_unlock();
	if (ret == NOTIFY_STOP)
		return ret;

	/*
	 * Not a trap splice. If this int3 is gone, resume at addr: the CPU then runs whatever is
	 * there now. kprobes' handler already backs up over a vanished int3, but between its check
	 * and ours a new kerf run may have written the int3 again.
	 *
	 * The temporary int3 of an entry of the run kerf is writing (kerf_poke_flush()): the CPU
	 * behaves as the entry's emulated jump, as the kernel's poke handler does for its own runs.
	 * It must not wait for the final bytes: it may have interrupts off, and the run's next
	 * sync waits for every CPU. An entry whose emulated instruction is an int3 has a trap entry
	 * (found above), for as long as its int3 can be met.
	 *
	 * Inside an entry but not at its start, or at an entry without a jump: resume at addr. On
	 * hardware, a CPU that met a run's int3 finishes its handler before the run can end (the
	 * run's IPIs wait for it), so this never happens; under qemu TCG a vCPU was seen to run a
	 * stale translation of a previous run's int3 after that run had ended, with the next run
	 * starting: without this, die("int3"). A linear scan: at most KERF_POKE_RUN entries, and
	 * only for an int3 nobody else claimed.
	 */
	if (*(u8 *)addr != INT3_INSN_OPCODE)
		goto resume;
	n = READ_ONCE(kerf_poke_n);
	smp_rmb();	/* pairs with kerf_poke_queue(): the entries counted are written */
	for (lo = 0; lo < n && lo < KERF_POKE_RUN; lo++) {
		e = &kerf_poking[lo];
		start = READ_ONCE(e->addr);
		if (addr - start >= READ_ONCE(e->len))
			continue;
		to = READ_ONCE(e->resume);
		if (addr == start && to) {
			regs->ip = to;
			return NOTIFY_STOP;
		}
		goto resume;
	}
	return NOTIFY_DONE;

resume:
	regs->ip = addr;
	return NOTIFY_STOP;
}
NOKPROBE_SYMBOL(kerf_int3_notify);

/*
 * First in the chain but for notifiers of the same priority registered earlier (hw_breakpoint's
 * for #DB): a trap hit then runs no other notifier before kerf claims it.
 */
static struct notifier_block kerf_int3_nb = {
	.notifier_call = kerf_int3_notify,
	.priority = INT_MAX,
};

/**
 * kerf_publish_traps() - rebuild the notifier's table from kerf_traps_meta and publish it
 *
 * Context: kerf_lock held. The xarray iterates in address order, so the table comes out
 * sorted. The old table is freed after a grace period, so a notifier still reading it
 * finishes first.
 *
 * Return: 0, or -ENOMEM, in which case the old table stays published.
 */
static int kerf_publish_traps(void)
{
	struct kerf_trap_tab *tab, *old;
	struct kerf_trap_meta *meta;
	unsigned long addr;
	unsigned int n = 0;

	tab = kvmalloc(struct_size(tab, e, kerf_nr_traps), GFP_KERNEL);
	if (!tab)
		return -ENOMEM;
	xa_for_each(&kerf_traps_meta, addr, meta) {
		tab->e[n].addr = addr;
		tab->e[n].patch = meta->patch;
		/* Tens of thousands of traps is a long walk (more under qemu TCG). */
		if (!(++n % 4096))
			cond_resched();
	}
	tab->n = n;
	old = rcu_dereference_protected(kerf_traps, lockdep_is_held(&kerf_lock));
	rcu_assign_pointer(kerf_traps, tab);
	if (old)
		kvfree_rcu(old, rcu);
	return 0;
}

/**
 * kerf_publish_traps_if_dirty() - publish the trap table if TRAP_ADD/TRAP_DEL changed it
 *
 * TRAP_ADD and TRAP_DEL only change kerf_traps_meta (publishing at each would copy the whole
 * table each time: quadratic in the number of sites). The table is published before anything
 * that depends on it: before a splice is written (an int3 must find its entry, so it is
 * published before the int3 exists), and before a quiesce or a patch write (a removed entry
 * must be gone from the table before the quiesce that allows its patch to be rewritten).
 * Context: kerf_lock held.
 *
 * Return: 0 or -ENOMEM (the table stays dirty).
 */
static int kerf_publish_traps_if_dirty(void)
{
	int ret;

	if (!kerf_traps_dirty)
		return 0;
	ret = kerf_publish_traps();
	if (!ret)
		kerf_traps_dirty = false;
	return ret;
}

/**
 * kerf_os_get() - count one more splice or trap that jumps to a patch entry
 * @target: patch entry address
 *
 * Return: 0 or -ENOMEM.
 */
static int kerf_os_get(unsigned long target)
{
	void *v = xa_load(&kerf_oss, target);
	unsigned long n = v ? xa_to_value(v) : 0;

	return xa_err(xa_store(&kerf_oss, target, xa_mk_value(n + 1), GFP_KERNEL));
}

/**
 * kerf_os_put() - drop one user of a patch entry
 * @target: patch entry address
 *
 * The last user moves the entry to kerf_retired: a CPU may still be running the patch until
 * the next KERF_IOC_QUIESCE, so it must not be rewritten before then.
 */
static void kerf_os_put(unsigned long target)
{
	void *v = xa_load(&kerf_oss, target);
	unsigned long n = v ? xa_to_value(v) : 0;

	if (n > 1) {
		xa_store(&kerf_oss, target, xa_mk_value(n - 1), GFP_KERNEL);
		return;
	}
	xa_erase(&kerf_oss, target);
	/* If this allocation fails the entry is merely not guarded; WRITE_PATCH is best effort. */
	xa_store(&kerf_retired, target, xa_mk_value(1), GFP_KERNEL);
}

/**
 * kerf_range_has() - whether an xarray has an index inside [first, last]
 * @xa: the xarray
 * @first: first index
 * @last: last index
 *
 * Return: true if it has one.
 */
static bool kerf_range_has(struct xarray *xa, unsigned long first, unsigned long last)
{
	unsigned long idx = first;

	return xa_find(xa, &idx, last, XA_PRESENT) != NULL;
}

/**
 * kerf_index_first() - where the first address at or after @x is in @ix
 * @ix: the index (built)
 * @x: the address
 *
 * Return: its position, or ix->n if every address is below @x.
 */
static size_t kerf_index_first(const struct kerf_addr_index *ix, unsigned long x)
{
	size_t lo = 0, hi = ix->n, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (ix->a[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/**
 * kerf_index_meets() - may [first, last] of core text hold an address of @ix?
 * @ix: the index
 * @first: first byte
 * @last: last byte
 *
 * Return: false only if the range is core kernel text and meets no address of @ix.
 */
static bool kerf_index_meets(const struct kerf_addr_index *ix, unsigned long first,
			     unsigned long last)
{
	size_t i;

	if (!ix->a || first < ks.stext || last >= ks.etext)
		return true;
	/* The first address at or after first meets the range if it is at or before last. */
	i = kerf_index_first(ix, first);
	return i < ix->n && ix->a[i] <= last;
}

/**
 * kerf_core_site_reserved() - does [addr, last] overlap a core jump label or static call site?
 * @addr: first byte
 * @last: last byte
 *
 * The kernel's jump_label_text_reserved() and static_call_text_reserved() answer with the
 * same overlap test over the same sites, each site's length being that of its instruction
 * (a jmp or nop of 2 or 5 bytes, a call, jmp or nop of 5); core text gets no new sites after
 * boot and a site keeps its length when it is patched.
 *
 * Return: 1 if it does, 0 if not, -1 if only the kernel's checks can tell (not core text, no
 * index, or a site in the window whose bytes kerf did not recognise at load).
 */
static int kerf_core_site_reserved(unsigned long addr, unsigned long last)
{
	const struct kerf_addr_index *ix = &kerf_core_sites;
	unsigned long first = addr - (KERF_SITE_LEN - 1);
	size_t i;

	if (!ix->a || !ix->len || first < ks.stext || last >= ks.etext)
		return -1;
	for (i = kerf_index_first(ix, first); i < ix->n && ix->a[i] <= last; i++) {
		if (!ix->len[i])
			return -1;
		if (ix->a[i] + ix->len[i] > addr)
			return 1;
	}
	return 0;
}

static int kerf_cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a, y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/**
 * kerf_jump_site_len() - the length of the jump label site at @code
 * @code: its address
 *
 * Caller holds text_mutex, so no site is halfway through a text_poke_bp() (an int3 there).
 * A static call site needs no such reading: the kernel counts CALL_INSN_SIZE bytes for each,
 * whatever it holds now (a call, a jmp, a ret and int3s, a 5-byte xor).
 *
 * Return: 2 or 5 for the forms arch_jump_entry_size() finds (a jmp or a nop), or 0.
 */
static unsigned int kerf_jump_site_len(unsigned long code)
{
	static const u8 nop2[] = { BYTES_NOP2 }, nop5[] = { BYTES_NOP5 };
	u8 b[5];

	if (code < ks.stext || code + sizeof(b) > ks.etext ||
	    copy_from_kernel_nofault(b, (void *)code, sizeof(b)))
		return 0;
	if (b[0] == JMP8_INSN_OPCODE || !memcmp(b, nop2, sizeof(nop2)))
		return JMP8_INSN_SIZE;
	if (b[0] == JMP32_INSN_OPCODE || !memcmp(b, nop5, sizeof(nop5)))
		return JMP32_INSN_SIZE;
	return 0;
}

/* A site while kerf_core_sites is built: sorted by its first member, as an unsigned long. */
struct kerf_site {
	unsigned long a;
	unsigned long len;
};

static unsigned int site_check;
module_param(site_check, uint, 0444);
MODULE_PARM_DESC(site_check,
		 "at load, compare kerf's answer near this many core sites with the kernel's (test)");

/**
 * kerf_check_site_index() - compare kerf_core_site_reserved() with the kernel's checks
 *
 * For site_check sites spread over the index: every 1-byte and 5-byte range starting from
 * KERF_SITE_LEN bytes before the site to its last byte. The kernel's answer takes a walk over
 * all its sites per range (slow under TCG), hence a sample. The result goes to the log, where
 * the guest tests look for it.
 */
static void kerf_check_site_index(void)
{
	const struct kerf_addr_index *ix = &kerf_core_sites;
	unsigned int ranges = 0, differ = 0, len;
	unsigned long a, addr, last;
	size_t i, k;
	int mine, theirs;

	if (!site_check || !ix->a || !ix->len)
		return;
	mutex_lock(ks.text_mutex);
	for (k = 0; k < site_check; k++) {
		i = (ix->n - 1) * k / max(site_check - 1, 1U);
		a = ix->a[i];
		if (a < ks.stext || a >= ks.etext)
			continue;
		for (addr = a - KERF_SITE_LEN; addr < a + max_t(unsigned int, ix->len[i], 1); addr++) {
			for (len = 1; len <= 5; len += 4) {
				last = addr + len - 1;
				mine = kerf_core_site_reserved(addr, last);
				theirs = ks.jump_label_text_reserved((void *)addr, (void *)last) ||
					 ks.static_call_text_reserved((void *)addr, (void *)last);
				ranges++;
				if (mine != theirs) {
					differ++;
					pr_warn("site check: %pS+%lu: kerf %d, kernel %d\n",
						(void *)addr, (unsigned long)len, mine, theirs);
				}
			}
			cond_resched();
		}
	}
	mutex_unlock(ks.text_mutex);
	pr_info("site check: %u ranges near %u sites, %u disagreements\n", ranges, site_check,
		differ);
}

/**
 * kerf_index_core() - build kerf_core_sites and kerf_core_bugs from the core kernel's tables
 *
 * Context: module init. A failed allocation only leaves that filter off.
 */
static void kerf_index_core(void)
{
	size_t nj = ks.jump_table_stop - ks.jump_table_start;
	size_t nsc = ks.static_call_sites_stop - ks.static_call_sites_start;
	size_t nb = ks.bug_table_stop - ks.bug_table_start;
	struct static_call_site *sc;
	struct kerf_site *site;
	struct bug_entry *bug;
	size_t i, n = 0, unknown = 0;
	unsigned long *a;
	u8 *len;

	site = kvmalloc_array(nj + nsc, sizeof(*site), GFP_KERNEL);
	a = kvmalloc_array(nj + nsc, sizeof(*a), GFP_KERNEL);
	len = kvmalloc_array(nj + nsc, sizeof(*len), GFP_KERNEL);
	if (site && a) {
		mutex_lock(ks.text_mutex);
		for (i = 0; i < nj; i++, n++) {
			site[n].a = jump_entry_code(&ks.jump_table_start[i]);
			site[n].len = kerf_jump_site_len(site[n].a);
			unknown += site[n].a >= ks.stext && site[n].a < ks.etext && !site[n].len;
		}
		mutex_unlock(ks.text_mutex);
		for (i = 0; i < nsc; i++, n++) {
			sc = &ks.static_call_sites_start[i];
			site[n].a = (unsigned long)&sc->addr + sc->addr;
			site[n].len = CALL_INSN_SIZE;
		}
		sort(site, n, sizeof(*site), kerf_cmp_ulong, NULL);
		for (i = 0; i < n; i++) {
			a[i] = site[i].a;
			if (len)
				len[i] = site[i].len;
		}
		kerf_core_sites = (struct kerf_addr_index){ .a = a, .len = len, .n = n };
		a = NULL;
		len = NULL;
		if (unknown)
			pr_info("core text: %zu jump labels of unknown length (the kernel checks near them)\n",
				unknown);
	}
	kvfree(site);
	kvfree(a);
	kvfree(len);
	a = kvmalloc_array(nb, sizeof(*a), GFP_KERNEL);
	if (a) {
		for (i = 0; i < nb; i++) {
			bug = &ks.bug_table_start[i];
			a[i] = (unsigned long)&bug->bug_addr_disp + bug->bug_addr_disp;
		}
		sort(a, nb, sizeof(*a), kerf_cmp_ulong, NULL);
		kerf_core_bugs = (struct kerf_addr_index){ .a = a, .n = nb };
	}
	pr_info("core text: %zu jump labels, %zu static call sites, %zu BUG/WARN sites\n", nj, nsc,
		nb);
}

/**
 * kerf_index_free() - free what kerf_index_core() built
 */
static void kerf_index_free(void)
{
	kvfree(kerf_core_sites.a);
	kvfree(kerf_core_sites.len);
	kvfree(kerf_core_bugs.a);
}

/*
 * Functions the kprobe blacklist allows that kerf must still never splice, because the int3 path
 * runs them where an int3 of kerf's would be met again while it is being handled, without end.
 * Every kerf splice goes in as a kerf int3 first (the daemon's splice order: the int3, a
 * quiescence, then the jmp over it), and kerf claims its int3s in a die notifier, which the
 * kernel calls only after instrumentation is allowed; kprobes claim theirs before that and so
 * need no such list. Covering every block of core text met each of these:
 *   - is_valid_bugaddr(): 6.1's handle_bug() calls it on every #UD before it allows
 *     instrumentation (later kernels mark it noinstr); it ended in an endless #UD, #BP loop.
 *   - __rcu_read_lock(), __rcu_read_unlock(), rcu_read_unlock_special(): notify_die() takes
 *     rcu_read_lock() around the die chain, and with PREEMPT_RCU (Debian's kernels) those are
 *     calls. An int3 in __rcu_read_unlock() is met again on the way out of its own handler, so
 *     the int3s nest until __nmi_enter()'s BUG_ON (kernel/entry/common.c; seen in the guest
 *     with every block of core text, and with __rcu_read_unlock alone).
 *   - every die notifier registered when kerf loads (kerf_resolve_denied() walks die_chain):
 *     those ahead of kerf's run on each of kerf's int3s before kerf claims it.
 * A die notifier registered after kerf loaded is not on the list.
 */
static const char *const kerf_denied_names[] = {
	"is_valid_bugaddr", "__rcu_read_lock", "__rcu_read_unlock", "rcu_read_unlock_special",
};
#define KERF_MAX_DENIED	32
static struct {
	unsigned long start, end;
} kerf_denied[KERF_MAX_DENIED];
static unsigned int kerf_nr_denied;

/**
 * kerf_deny() - add the function holding @addr to kerf_denied
 * @addr: an address in the function (0, or one kallsyms does not know: skipped)
 * @what: what it is, for the log
 */
static void kerf_deny(unsigned long addr, const char *what)
{
	unsigned long size, off;

	if (!addr || !ks.kallsyms_lookup_size_offset(addr, &size, &off))
		return;
	if (kerf_nr_denied == KERF_MAX_DENIED) {
		pr_warn("too many functions to refuse; %ps (%s) is not refused\n", (void *)addr, what);
		return;
	}
	kerf_denied[kerf_nr_denied].start = addr - off;
	kerf_denied[kerf_nr_denied].end = addr - off + size;
	kerf_nr_denied++;
}

/**
 * kerf_resolve_denied() - fill kerf_denied: kerf_denied_names (one not found is skipped) and
 * the function of every die notifier registered now
 *
 * Called before kerf registers its own notifier. The chain is walked as the kernel walks it,
 * under rcu_read_lock().
 */
static void kerf_resolve_denied(void)
{
	struct notifier_block *nb;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(kerf_denied_names); i++)
		kerf_deny(ks.kallsyms_lookup_name(kerf_denied_names[i]), kerf_denied_names[i]);
	rcu_read_lock();
	for (nb = rcu_dereference(ks.die_chain->head); nb; nb = rcu_dereference(nb->next))
		kerf_deny((unsigned long)nb->notifier_call, "die notifier");
	rcu_read_unlock();
	pr_info("%u functions on the int3 path refused\n", kerf_nr_denied);
}

/**
 * kerf_denied_meets() - does [addr, end) meet a function of kerf_denied_names?
 * @addr: first byte
 * @end: one past the last byte
 *
 * Return: true if it does.
 */
static bool kerf_denied_meets(unsigned long addr, unsigned long end)
{
	size_t i;

	for (i = 0; i < kerf_nr_denied; i++)
		if (addr < kerf_denied[i].end && kerf_denied[i].start < end)
			return true;
	return false;
}

/**
 * kerf_check_text() - is [addr, addr+len) text that kerf may splice?
 * @addr: first byte
 * @len: number of bytes
 * @modp: out: the module whose text it is (referenced; NULL for core kernel text and kerf's
 *        own self-test targets)
 *
 * Core kernel text is [_stext, _etext) (init text is gone by now). Module text must belong to
 * a LIVE module's core text: a COMING module is still being patched by its own loader
 * (alternatives, jump labels) and a GOING one is about to be freed; the reference taken here
 * keeps the module from being unloaded while the splice lives. kerf's own text (the patch
 * heap, the int3 notifier, the splice path) is never a splice target, but for the three
 * self-test targets of kerf_selftest.c (no reference taken: see below). Then the kernel's
 * no-probe list, and instructions whose address the kernel looks up when they trap, which
 * therefore must not be relocated into a code patch: BUG()/WARN() sites (report_bug() finds
 * their ud2 by address; relocated, a WARN would become an oops) and instructions with an
 * exception-table entry (a faulting user access, rdmsr_safe...: relocated, the fault would
 * find no fixup and oops).
 *
 * The kprobe blacklist is asked once for a range inside one kallsyms symbol: its entries are
 * whole symbols (NOKPROBE_SYMBOL, and the blacklisted sections added symbol by symbol) or
 * section ranges no symbol straddles, and its suffix rule ("foo.cold" when foo is listed) is
 * per symbol too, so every byte of a symbol gets the same answer. Per byte it walked the
 * whole list (about 2,000 entries) len times for each splice, in the ioctl that runs while
 * the batch's int3s are in: every block of that walk spliced in the batch trapped on each
 * turn.
 *
 * Return: 0, -ENXIO (not such text), -EPERM (forbidden), -EINVAL (range wraps).
 */
static int kerf_check_text(unsigned long addr, unsigned int len, struct module **modp)
{
	unsigned long end = addr + len, a, base, size, off;
	struct module *mod = NULL;
	bool one_symbol;
	int ret = 0;

	*modp = NULL;
	if (end < addr)
		return -EINVAL;
	if (!(addr >= ks.stext && end <= ks.etext)) {
		preempt_disable();
		mod = ks.module_text_address(addr);
		if (!mod) {
			ret = -ENXIO;
		} else if (mod == THIS_MODULE) {
			/*
			 * kerf's own text is refused: a splice in the int3 notifier would trap
			 * forever, one in the splice path would patch the code patching it, and
			 * the patch heap holds code patches. The self-test targets are called
			 * only by the self-test loop, so splicing them is as safe as splicing
			 * any module's function. No reference is taken: kerf cannot be unloaded
			 * while /dev/kerf is open, and its release restores every splice.
			 */
			mod = NULL;
			if (!kerf_selftest_text(addr, end))
				ret = -EPERM;
		} else {
			base = (unsigned long)mod->core_layout.base;
			if (mod->state != MODULE_STATE_LIVE || addr < base ||
			    end > base + mod->core_layout.text_size || !try_module_get(mod))
				ret = -ENXIO;
		}
		preempt_enable();
		if (ret)
			return ret;
	}
	if (kerf_denied_meets(addr, end)) {
		ret = -EPERM;
		goto err_put;
	}
	one_symbol = ks.kallsyms_lookup_size_offset(addr, &size, &off) && end - addr <= size - off;
	if (one_symbol && ks.within_kprobe_blacklist(addr)) {
		ret = -EPERM;
		goto err_put;
	}
	for (a = addr; a < end; a++) {
		if ((!one_symbol && ks.within_kprobe_blacklist(a)) ||
		    (kerf_index_meets(&kerf_core_bugs, a, a) && ks.find_bug(a)) ||
		    ks.search_exception_tables(a)) {
			ret = -EPERM;
			goto err_put;
		}
	}
	*modp = mod;
	return 0;

err_put:
	if (mod)
		module_put(mod);
	return ret;
}

/**
 * kerf_check_owned() - do other patching mechanisms own any byte of [addr, addr+len)?
 * @addr: first byte
 * @len: number of bytes
 *
 * Caller holds text_mutex, which every one of those mechanisms holds while it patches, so the
 * answer stays true until we release it. Checked: ftrace call sites (the nop5/call __fentry__
 * at function entry), jump label sites, static call sites and trampolines, BPF dispatchers
 * (whose entry BPF rewrites with text_poke_bp, outside ftrace), SMP-alternatives lock
 * prefixes, and kprobes: any kprobe inside the range, and any int3-based kprobe up to
 * MAX_OPTIMIZED_LENGTH-1 bytes before it, since an optimized kprobe rewrites 5 bytes and
 * relocates up to MAX_OPTIMIZED_LENGTH.
 *
 * Return: 0 or -EBUSY.
 */
static int kerf_check_owned(unsigned long addr, unsigned int len)
{
	unsigned long last = addr + len - 1, a;
	char sym[KSYM_SYMBOL_LEN];
	struct kprobe *p;
	int busy = 0, site;

	if (ks.ftrace_location_range(addr, last))
		return -EBUSY;
	site = kerf_core_site_reserved(addr, last);
	if (site > 0 ||
	    (site < 0 && (ks.jump_label_text_reserved((void *)addr, (void *)last) ||
			  ks.static_call_text_reserved((void *)addr, (void *)last))))
		return -EBUSY;
	if (addr < ks.static_call_text_end && last >= ks.static_call_text_start)
		return -EBUSY;
	sprint_symbol_no_offset(sym, addr);
	if (!strncmp(sym, "bpf_dispatcher_", strlen("bpf_dispatcher_")))
		return -EBUSY;
	/* Exclusive end: covers both readings of its bounds. */
	if (ks.alternatives_text_reserved((void *)addr, (void *)(last + 1)))
		return -EBUSY;
	preempt_disable();	/* get_kprobe() walks an RCU hash list */
	for (a = addr - (MAX_OPTIMIZED_LENGTH - 1); a <= last && !busy; a++) {
		p = ks.get_kprobe((void *)a);
		/* An ftrace-based kprobe owns only the ftrace site, checked above. */
		busy = p && (a >= addr || !(p->flags & KPROBE_FLAG_FTRACE));
	}
	preempt_enable();
	return busy ? -EBUSY : 0;
}

/* The steps of a run, in order; see kerf_poke_flush(). */
enum kerf_poke_step {
	KERF_STEP_INT3,		/* int3 over every entry's first byte */
	KERF_STEP_TAIL,		/* bytes 1..len-1 of every entry, under its int3 */
	KERF_STEP_FINAL,	/* every entry's final bytes */
	KERF_STEP_REWRITE,	/* the final bytes again, written even where they are there */
};

/**
 * kerf_poke_apply() - put one step's bytes of an entry into a copy of the text around it
 * @e: the entry
 * @at: where the entry's first byte is in the copy
 * @step: the step
 *
 * Return: true if the text must be written: the copy changed, or @step is KERF_STEP_REWRITE.
 */
static bool kerf_poke_apply(const struct kerf_poke_ent *e, u8 *at, enum kerf_poke_step step)
{
	u8 want[KERF_MAX_SPLICE_LEN];
	unsigned int from = step == KERF_STEP_TAIL ? 1 : 0;
	unsigned int to = step == KERF_STEP_INT3 ? 1 : e->len;

	memcpy(want, e->bytes, e->len);
	if (step < KERF_STEP_FINAL)
		want[0] = INT3_INSN_OPCODE;
	if (from >= to)
		return false;
	if (step != KERF_STEP_REWRITE && !memcmp(at + from, want + from, to - from))
		return false;
	memcpy(at + from, want + from, to - from);
	return true;
}

/**
 * kerf_poke_step() - write one step of the queued run, one text_poke() for each page it meets
 * @step: the step
 *
 * Each text_poke() maps the page through the poking mm and switches CR3 there and back. qemu's
 * TCG drops the vCPU's whole TLB and its cache of translation lookups at each switch, and then
 * every block the kernel runs is looked up again: when each entry took its own text_poke() (five
 * an entry for a jump, three for an int3), the splices of every block of core text took 1,585 s
 * in a 2,059 s splice phase (session 76, `splices: int3s` and `splices: springboards and jumps`).
 * So the entries of one page are written together: the text from the first entry's start to the
 * last one's end is read, each entry's bytes for this step are put in the copy, and the copy is
 * written back whole. The bytes between the entries are written with the values they hold:
 * every writer of kernel text holds text_mutex, as the caller does, and what another patcher
 * had queued was flushed before this run's first entry (kerf_poke_queue()), so none can change
 * in between; a CPU running them meanwhile fetches the same instructions either way. A page of
 * text belongs to one image (module text is page-aligned), so the copy never meets text being
 * loaded. An entry that crosses into the next page, or a span that cannot be read, is written
 * alone.
 *
 * Caller holds text_mutex. Return: true if anything was written.
 */
static bool kerf_poke_step(enum kerf_poke_step step)
{
	static u8 span[PAGE_SIZE];	/* under text_mutex */
	u8 one[KERF_MAX_SPLICE_LEN];
	struct kerf_poke_ent *e;
	unsigned long lo, hi, end;
	unsigned int i = 0, j;
	bool dirty, wrote = false;

	while (i < kerf_poke_n) {
		lo = kerf_poking[i].addr;
		end = (lo & PAGE_MASK) + PAGE_SIZE;
		hi = lo + kerf_poking[i].len;
		for (j = i + 1; j < kerf_poke_n; j++) {
			e = &kerf_poking[j];
			if (e->addr + e->len > end)
				break;
			hi = e->addr + e->len;	/* ascending, never overlapping */
		}
		if (hi > end || copy_from_kernel_nofault(span, (void *)lo, hi - lo)) {
			for (; i < j; i++) {
				e = &kerf_poking[i];
				if (copy_from_kernel_nofault(one, (void *)e->addr, e->len))
					continue;	/* the read-back reports it */
				if (kerf_poke_apply(e, one, step)) {
					ks.text_poke((void *)e->addr, one, e->len);
					wrote = true;
				}
			}
			continue;
		}
		for (dirty = false; i < j; i++) {
			e = &kerf_poking[i];
			dirty |= kerf_poke_apply(e, span + (e->addr - lo), step);
		}
		if (dirty) {
			ks.text_poke((void *)lo, span, hi - lo);
			wrote = true;
		}
	}
	return wrote;
}

/**
 * kerf_poke_flush() - write the queued run with the int3 bypass, write it again, verify it
 *
 * Djprobe's bypass method, as the kernel's text_poke_bp_batch() implements it, for every entry
 * of the run at once, but with one text_poke() per page and step (kerf_poke_step()): (1) int3
 * at every entry, then every CPU serialised (text_poke_sync(): sync_core via IPI); (2) bytes
 * 1..len-1 of every entry, and serialise; (3) every first byte, and serialise. Between (1) and
 * (3) a CPU reaching an entry traps, and kerf_int3_notify() makes it behave as the entry's
 * emulated instruction (a jump followed, an int3 sent to its trap's patch). No CPU ever
 * executes a half-written instruction, and the serialisation is what the cross-modifying-code
 * erratum Djprobe cites requires. Three serialisations for the run, not three per entry.
 * kerf does these steps itself, instead of text_poke_queue() and text_poke_finish(), only to
 * write a page at a time: the kernel pokes each entry on its own at each step.
 *
 * Then the run is written once more, plainly. Seen under qemu TCG with two vCPUs: after a
 * splice or a restore, a vCPU trapped at addr over and over while memory held the new jmp,
 * not an int3. It was running a translation of the temporary int3 that outlived the write of
 * the final byte (most likely it was being translated while that byte was stored, and was
 * linked after the store had invalidated the page's translations). kprobes' int3 handler,
 * which runs before any notifier, sees no int3 at addr and backs the CPU up to it, where the
 * same translation traps again: a soft lockup, until the page is written again. By now the
 * run's last sync has run on every CPU (a vCPU takes the IPI only between translated blocks),
 * so such a translation is linked and this store invalidates it; a translation racing with
 * this store reads the final bytes either way. Without this write, splicing and restoring
 * path_openat's blocks while two shells open files locked up the guest in the first round,
 * three boots out of three; with it, 30 rounds of 349 points ran clean
 * (tests/fixtures/kernel_guest.sh, splice_churn). On hardware nothing changes: the bytes are
 * the ones already there. The rewrite follows at once, with no IPI in between (text_poke()
 * flushes only the local TLB): a vCPU caught in such a loop with interrupts off could not take
 * the next run's sync, which is why kerf flushes runs itself (KERF_POKE_RUN).
 *
 * That one rewrite was not enough: in a core-text run of 2026-11-30 both vCPUs ended up
 * trapping without end at a restored site (a `decl %gs:__preempt_count` whose bytes were
 * back, interrupts off, so no watchdog spoke and the guest hung); writing the same first byte
 * once more from qemu's gdb stub freed both at once. So it was a stale translation of a
 * temporary int3 that outlived the rewrite, by a race in qemu not understood. Hence a sync
 * and a second rewrite: every vCPU has passed a block boundary after the first rewrite, so a
 * translation made before it is linked by then and this store drops it. On hardware both
 * are no-ops.
 *
 * Then the CPU may go to another task: a batch ioctl writes up to KERF_BATCH_MAX entries, 32
 * runs, and under qemu TCG on a busy host one such ioctl held its vCPU for over 20 s, which
 * the soft-lockup watchdog reports ("stuck for 22s! [kerf]"). Between runs nothing is half
 * written; text_mutex and kerf_lock are mutexes, so other patchers and kerf's own ioctls just
 * wait.
 *
 * Caller holds text_mutex, in process context.
 */
static void kerf_poke_flush(void)
{
	struct kerf_poke_ent *e;
	u8 check[KERF_MAX_SPLICE_LEN];
	unsigned int i;

	lockdep_assert_held(ks.text_mutex);
	if (!kerf_poke_n)
		return;
	for (i = 0; i < kerf_poke_n; i++) {
		e = &kerf_poking[i];
		if (copy_from_kernel_nofault(e->old, (void *)e->addr, e->len))
			memset(e->old, 0, sizeof(e->old));
	}
	if (kerf_poke_step(KERF_STEP_INT3))
		ks.text_poke_sync();
	if (kerf_poke_step(KERF_STEP_TAIL))
		ks.text_poke_sync();
	kerf_poke_step(KERF_STEP_FINAL);
	ks.text_poke_sync();
	for (i = 0; i < kerf_poke_n; i++) {
		e = &kerf_poking[i];
		ks.perf_event_text_poke((void *)e->addr, e->old, e->len, e->bytes, e->len);
	}
	kerf_poke_step(KERF_STEP_REWRITE);
	ks.text_poke_sync();
	kerf_poke_step(KERF_STEP_REWRITE);
	for (i = 0; i < kerf_poke_n; i++) {
		e = &kerf_poking[i];
		if (copy_from_kernel_nofault(check, (void *)e->addr, e->len) ||
		    memcmp(check, e->bytes, e->len)) {
			WARN(1, "kerf: bytes at %pS are not the bytes written\n", (void *)e->addr);
			*e->ret = -EIO;
		}
	}
	WRITE_ONCE(kerf_poke_n, 0);
	cond_resched();
}

/**
 * kerf_jump_target() - where a jmp rel32 or jmp rel8 at @addr goes
 * @addr: the instruction's address
 * @insn: its bytes
 *
 * Return: the target, or 0 for any other instruction (kerf writes only jumps and int3s).
 */
static unsigned long kerf_jump_target(unsigned long addr, const u8 *insn)
{
	switch (insn[0]) {
	case JMP32_INSN_OPCODE:
		return addr + JMP32_INSN_SIZE + (s32)get_unaligned((const u32 *)(insn + 1));
	case JMP8_INSN_OPCODE:
		return addr + JMP8_INSN_SIZE + (s8)insn[1];
	default:
		return 0;
	}
}

/**
 * kerf_poke_queue() - queue a splice or a restore for the int3 bypass
 * @addr: first byte
 * @bytes: the new bytes, kept by the caller until the run is flushed
 * @len: 1, 2 or 5
 * @emulate: the instruction a CPU that meets the temporary int3 must behave as if it had
 *           executed, or NULL for @bytes: a jump (followed) or an int3 (whose trap entry
 *           sends it to its patch)
 * @ret: set to -EIO if the bytes read back after the flush differ (never expected)
 *
 * A run ends when it is full or when @addr is below the previous entry's (kerf_poke_step()
 * groups ascending entries by page). It also ends before a jump whose target is an entry of
 * the run (a jmp rel8's springboard written in the same batch): a CPU that meets the jump's
 * int3 goes to that target, which must hold its int3 or its final bytes by then, and within
 * one page's write the order of the stores is memcpy's. Before a run's first entry, whatever
 * another patcher left queued is flushed (jump labels queue under text_mutex and drop it
 * before their text_poke_finish()), so the run is kerf's alone. The entry is published for
 * kerf_int3_notify() before its int3 can be written. Caller holds text_mutex and flushes with
 * kerf_poke_flush() before dropping it.
 */
static void kerf_poke_queue(unsigned long addr, const u8 *bytes, unsigned int len,
			    const u8 *emulate, long *ret)
{
	unsigned long resume = kerf_jump_target(addr, emulate ?: bytes);
	struct kerf_poke_ent *e;
	bool into_run = false;
	unsigned int i;

	lockdep_assert_held(ks.text_mutex);
	for (i = 0; resume && i < kerf_poke_n; i++)
		into_run |= resume - kerf_poking[i].addr < kerf_poking[i].len;
	if (kerf_poke_n == KERF_POKE_RUN || into_run ||
	    (kerf_poke_n && addr < kerf_poking[kerf_poke_n - 1].addr))
		kerf_poke_flush();
	if (!kerf_poke_n)
		ks.text_poke_finish();
	e = &kerf_poking[kerf_poke_n];
	WRITE_ONCE(e->addr, addr);
	WRITE_ONCE(e->len, len);
	WRITE_ONCE(e->resume, resume);
	e->bytes = bytes;
	e->ret = ret;
	smp_wmb();	/* pairs with kerf_int3_notify() */
	WRITE_ONCE(kerf_poke_n, kerf_poke_n + 1);
}

/**
 * kerf_restore_check() - may the live splice be restored, and queue its restore
 * @rec: the splice, claimed (pending_len) until the flush
 * @ret: where the flush reports a failed read-back
 *
 * Refuses (-EBUSY) if the bytes are no longer the ones kerf wrote: someone else patched them
 * and blindly restoring would corrupt their change. What a CPU that meets the temporary int3
 * does during the restore (the emulated instruction):
 *   - jmp rel32 / jmp rel8 splices: follow the jump, i.e. behave exactly as the splice did.
 *     The code patch (or springboard) is still intact (it is freed only after a QUIESCE that
 *     follows this restore) and runs the displaced instructions, then jumps back behind them,
 *     to an instruction boundary of the original code. Emulating the original instructions
 *     instead is impossible in general: kerf_int3_notify() emulates only jumps.
 *   - int3 (trap) splices: stay an int3, which kerf_int3_notify() still sends to the trap's
 *     patch: TRAP_DEL of that address is refused until a QUIESCE has followed this restore, so
 *     a CPU already inside the int3 handler still finds its entry.
 * In a batch, a springboard and the jmp rel8 through it are never restored in one call
 * (kerf_can_restore() refuses the springboard while the jmp lives), so every restore in a run
 * emulates a jump to code that stays intact. Caller holds kerf_lock and text_mutex.
 *
 * Return: 0 (queued), -EBUSY or -EFAULT.
 */
static int kerf_restore_check(struct kerf_splice_rec *rec, long *ret)
{
	u8 cur[KERF_MAX_SPLICE_LEN];

	if (copy_from_kernel_nofault(cur, (void *)rec->addr, rec->len))
		return -EFAULT;
	if (memcmp(cur, rec->new, rec->len))
		return -EBUSY;
	kerf_poke_queue(rec->addr, rec->old, rec->len, rec->new, ret);
	return 0;
}

/**
 * kerf_trap_int3_gone() - note that the int3 splice at a trap's address has gone
 * @addr: the trap's address
 *
 * From now on the trap entry must stay until the next quiesce (see kerf_restore_check()).
 */
static void kerf_trap_int3_gone(unsigned long addr)
{
	struct kerf_trap_meta *meta = xa_load(&kerf_traps_meta, addr);

	if (!meta)
		return;
	meta->int3_live = false;
	meta->int3_gone = true;
	meta->gone_seq = kerf_quiesce_done;
}

/**
 * kerf_drop_form() - undo the bookkeeping of a splice's current new bytes
 * @rec: the splice, whose rec->new is about to be replaced or removed
 */
static void kerf_drop_form(struct kerf_splice_rec *rec)
{
	switch (rec->len) {
	case 5:
		kerf_os_put(rec->addr + 5 + (s32)get_unaligned_le32(&rec->new[1]));
		break;
	case 2:
		/* A CPU may have taken this jmp rel8 and been interrupted before executing the
		 * springboard: the springboard stays until the next quiesce (kerf_can_restore()). */
		rec->board->users--;
		rec->board->had_users = true;
		rec->board->users_gone_seq = kerf_quiesce_done;
		rec->board = NULL;
		break;
	case 1:
		kerf_trap_int3_gone(rec->addr);
		break;
	}
}

/**
 * kerf_can_restore() - may this splice be restored now?
 * @rec: the splice
 *
 * Not while a live jmp rel8 goes through it (it is a springboard), nor until a quiesce has
 * followed the removal of the last such jmp: a CPU can execute the jmp rel8, take an interrupt
 * on the springboard's address, and only then execute the springboard.
 *
 * Return: true if it may.
 */
static bool kerf_can_restore(const struct kerf_splice_rec *rec)
{
	return !rec->users && !(rec->had_users && rec->users_gone_seq >= kerf_quiesce_done);
}

/**
 * kerf_forget() - remove a restored splice from the books
 * @rec: the splice, already restored
 */
static void kerf_forget(struct kerf_splice_rec *rec)
{
	kerf_drop_form(rec);
	xa_erase(&kerf_splices, rec->addr);
	list_del(&rec->order);
	kerf_nr_splices--;
	if (rec->mod)
		module_put(rec->mod);
	kfree(rec);
}

/**
 * kerf_quiesce_locked() - wait until no CPU or task can still be inside old code or tables
 *
 * Caller holds kerf_lock. Why this is sufficient for reusing patch memory after UNSPLICE,
 * for TRAP_DEL after an int3 is removed, and for replacing an int3 by a multi-instruction jmp
 * (no thread inside the displaced bytes):
 *   - synchronize_rcu(): every region with preemption or interrupts disabled that began before
 *     it has ended. That covers interrupt and NMI handlers (which may run patch code, and which
 *     cannot be preempted) and int3 handlers (kerf_int3_notify() runs with interrupts off).
 *   - synchronize_rcu_tasks(): every task has since done a voluntary context switch, run in
 *     user mode or been idle. A task preempted inside a code patch or inside displaced bytes
 *     is in none of those states, so this waits until it has left them. Code patches never
 *     call or sleep, and displaced ranges contain no call (Djprobe's rules, checked in user
 *     space), so no task can be voluntarily asleep inside one.
 *   - synchronize_rcu_tasks_rude(): rcu_tasks ignores idle tasks; this forces a context switch
 *     on every CPU, so an idle loop that ran through a patch has left it too.
 * Not covered, by design: code that jumps into the middle of displaced bytes (branch targets,
 * exception fixups), which user space must rule out before choosing a jmp splice (DESIGN.md 5).
 */
static void kerf_quiesce_locked(void)
{
	/* Removed trap entries leave the table before their patches may be reused; if the table
	 * cannot be published now, WRITE_PATCH refuses until it can. */
	kerf_publish_traps_if_dirty();
	synchronize_rcu_tasks();
	synchronize_rcu_tasks_rude();
	synchronize_rcu();
	kerf_quiesce_done++;
	xa_destroy(&kerf_retired);
}

/**
 * kerf_ioc_read() - KERF_IOC_READ: copy kernel memory to user space without faulting
 * @uarg: struct kerf_rw
 *
 * Return: 0, -EINVAL, -ENOMEM or -EFAULT.
 */
static long kerf_ioc_read(void __user *uarg)
{
	struct kerf_rw rw;
	unsigned long src, done, n;
	u8 __user *dst;
	void *buf;
	long ret = 0;

	if (copy_from_user(&rw, uarg, sizeof(rw)))
		return -EFAULT;
	if (!rw.len || rw.len > KERF_READ_MAX || rw.addr + rw.len < rw.addr)
		return -EINVAL;
	buf = kmalloc(PAGE_SIZE, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	src = rw.addr;
	dst = u64_to_user_ptr(rw.user_buf);
	for (done = 0; done < rw.len; done += n) {
		n = min_t(unsigned long, rw.len - done, PAGE_SIZE - offset_in_page(src + done));
		if (copy_from_kernel_nofault(buf, (void *)(src + done), n) ||
		    copy_to_user(dst + done, buf, n)) {
			ret = -EFAULT;
			goto out_free;
		}
		cond_resched();
	}
out_free:
	kfree(buf);
	return ret;
}

/**
 * kerf_ioc_write_patch() - KERF_IOC_WRITE_PATCH: write code into the patch heap
 * @uarg: struct kerf_rw
 *
 * The heap is mapped read-only + executable; text_poke_copy() writes through a temporary
 * writable alias and takes text_mutex itself, so kerf_lock alone is held here. The patch is
 * unreachable until a SPLICE or TRAP_ADD points at it, and SPLICE serialises every CPU after
 * writing, so no CPU can run a stale copy of freshly written patch bytes.
 *
 * Return: 0, -ERANGE, -EBUSY, -EINVAL, -ENOMEM, -EFAULT or -EIO.
 */
static long kerf_ioc_write_patch(void __user *uarg)
{
	struct kerf_rw rw;
	void *buf;
	long ret;

	if (copy_from_user(&rw, uarg, sizeof(rw)))
		return -EFAULT;
	if (!rw.len)
		return -EINVAL;
	if (!kerf_in_patch_heap(rw.addr, rw.len))
		return -ERANGE;
	buf = kvmalloc(rw.len, GFP_KERNEL);
	if (!buf)
		return -ENOMEM;
	if (copy_from_user(buf, u64_to_user_ptr(rw.user_buf), rw.len)) {
		ret = -EFAULT;
		goto out_free;
	}
	mutex_lock(&kerf_lock);
	ret = kerf_publish_traps_if_dirty();
	if (ret)
		goto out_unlock;
	if (kerf_range_has(&kerf_oss, rw.addr, rw.addr + rw.len - 1) ||
	    kerf_range_has(&kerf_retired, rw.addr, rw.addr + rw.len - 1)) {
		ret = -EBUSY;
		goto out_unlock;
	}
	ret = 0;
	if (!ks.text_poke_copy((void *)rw.addr, buf, rw.len) ||
	    memcmp((void *)rw.addr, buf, rw.len))
		ret = -EIO;
	kerf_patch_next = rw.addr + rw.len - (unsigned long)kerf_patch_heap;
out_unlock:
	mutex_unlock(&kerf_lock);
out_free:
	kvfree(buf);
	return ret;
}

/**
 * kerf_splice_form() - validate the new bytes of a splice request
 * @req: the request
 * @target: out: where a jmp goes
 *
 * Return: 0 or -EINVAL.
 */
static int kerf_splice_form(const struct kerf_splice *req, unsigned long *target)
{
	u8 want;

	switch (req->len) {
	case 1:
		want = INT3_INSN_OPCODE;
		break;
	case 2:
		want = JMP8_INSN_OPCODE;
		break;
	case 5:
		want = JMP32_INSN_OPCODE;
		break;
	default:
		return -EINVAL;
	}
	if (req->new_bytes[0] != want)
		return -EINVAL;
	*target = kerf_jump_target(req->addr, req->new_bytes);
	return req->len != 5 || kerf_in_patch_heap(*target, 1) ? 0 : -EINVAL;
}

/**
 * kerf_overlaps() - does [addr, addr+len) overlap a live splice other than @self?
 * @addr: first byte
 * @len: number of bytes
 * @self: the splice being replaced, or NULL
 *
 * A splice that an earlier entry of the same batch is writing counts with its new length.
 *
 * Return: true if it does.
 */
static bool kerf_overlaps(unsigned long addr, unsigned int len, struct kerf_splice_rec *self)
{
	struct kerf_splice_rec *rec;
	unsigned long idx = addr - (KERF_MAX_SPLICE_LEN - 1);

	xa_for_each_range(&kerf_splices, idx, rec, addr - (KERF_MAX_SPLICE_LEN - 1),
			  addr + len - 1) {
		if (rec != self && rec->addr + max(rec->len, rec->pending_len) > addr)
			return true;
	}
	return false;
}

/* One splice request on its way through the checks (kerf_lock), the write (text_mutex) and
 * the books. */
struct kerf_splice_op {
	struct kerf_splice req;
	unsigned long target;		/* where a jmp goes */
	struct kerf_splice_rec *prev;	/* the live splice it replaces (int3 -> jmp), or NULL */
	struct kerf_splice_rec *rec;	/* prev, or the new record */
	struct kerf_splice_rec *board;	/* the springboard of a jmp rel8 */
	struct kerf_trap_meta *meta;	/* the trap of an int3 */
	struct module *mod;		/* referenced for a new record */
	u8 orig[KERF_MAX_SPLICE_LEN];	/* the bytes to restore one day */
	long ret;
};

/**
 * kerf_splice_prepare() - the checks of a splice request that need no text_mutex
 * @op: the request; on success holds a record (new, or prev claimed) until commit or abort
 *
 * Order of the checks: the request's form, live splices (overlap, replacement rules, the
 * quiesced-int3 rule for multi-byte splices), the kind of text (kerf_check_text). A new record
 * is stored at once with pending_len set, so that later entries of the same batch see it
 * (overlap, a repeated address, a springboard); it joins kerf_splice_list only at commit.
 * Caller holds kerf_lock.
 *
 * Return: 0 or an errno of kerf_uapi.h.
 */
static int kerf_splice_prepare(struct kerf_splice_op *op)
{
	unsigned long addr = op->req.addr;
	unsigned int len;
	struct kerf_splice_rec *prev;
	int ret;

	if (op->req.flags & ~KERF_SPLICE_ONE_INSN)
		return -EINVAL;
	ret = kerf_splice_form(&op->req, &op->target);
	if (ret)
		return ret;
	len = op->req.len;
	prev = xa_load(&kerf_splices, addr);
	if ((prev && prev->pending_len) || kerf_overlaps(addr, len, prev) ||
	    (prev && len <= prev->len))
		return -EEXIST;
	/*
	 * More than one byte may span several instructions; a task preempted between two of them
	 * would resume in the middle of the new jmp. Require the int3 to have been in place across
	 * a quiesce (so nobody is inside any more and newcomers are diverted), unless the caller
	 * vouches that the bytes are a single instruction. An int3 of the same batch is not.
	 */
	if (len > 1 && !(op->req.flags & KERF_SPLICE_ONE_INSN) &&
	    !(prev && prev->len == 1 && prev->seq < kerf_quiesce_done))
		return -EAGAIN;
	switch (len) {
	case 1:
		op->meta = xa_load(&kerf_traps_meta, addr);
		if (!op->meta)
			return -ENOENT;
		break;
	case 2:
		op->board = xa_load(&kerf_splices, op->target);
		if (!op->board || op->board == prev ||
		    (op->board->pending_len ?: op->board->len) != 5)
			return -EINVAL;
		break;
	}
	if (prev) {
		/* Growing a live splice: check the text again for the whole new range. */
		ret = kerf_check_text(addr, len, &op->mod);
		if (ret)
			return ret;
		if (op->mod)
			module_put(op->mod);	/* prev already holds the module */
		op->mod = NULL;
		op->rec = prev;
	} else {
		if (kerf_nr_splices >= KERF_MAX_SPLICES)
			return -ENOSPC;
		ret = kerf_check_text(addr, len, &op->mod);
		if (ret)
			return ret;
		op->rec = kzalloc(sizeof(*op->rec), GFP_KERNEL);
		if (!op->rec) {
			ret = -ENOMEM;
			goto err_put_mod;
		}
		op->rec->addr = addr;
		ret = xa_err(xa_store(&kerf_splices, addr, op->rec, GFP_KERNEL));
		if (ret)
			goto err_free_rec;
		kerf_nr_splices++;
	}
	if (len == 5) {
		ret = kerf_os_get(op->target);
		if (ret)
			goto err_erase;
	}
	op->prev = prev;
	op->rec->pending_len = len;
	return 0;

err_erase:
	if (!prev) {
		xa_erase(&kerf_splices, addr);
		kerf_nr_splices--;
	}
err_free_rec:
	if (!prev)
		kfree(op->rec);
err_put_mod:
	if (op->mod)
		module_put(op->mod);
	op->rec = NULL;
	op->mod = NULL;
	return ret;
}

/**
 * kerf_splice_check_locked() - the checks that need text_mutex, then queue the write
 * @op: a prepared request
 *
 * The owners (kerf_check_owned) and expect_old are checked under text_mutex, which every
 * other patcher holds while it writes, so they stay true until the write. A jmp rel8 whose
 * springboard is an earlier entry of the same batch that failed is refused (that entry's
 * pending_len is back to 0). Caller holds kerf_lock and text_mutex, and flushes.
 *
 * Return: 0 (queued) or an errno of kerf_uapi.h; on error the record is no longer pending.
 */
static int kerf_splice_check_locked(struct kerf_splice_op *op)
{
	unsigned long addr = op->req.addr;
	unsigned int len = op->req.len;
	u8 cur[KERF_MAX_SPLICE_LEN];
	int ret;

	if (op->board && (op->board->pending_len ?: op->board->len) != 5) {
		ret = -EINVAL;
		goto err;
	}
	ret = kerf_check_owned(addr, len);
	if (ret)
		goto err;
	if (copy_from_kernel_nofault(cur, (void *)addr, len)) {
		ret = -EFAULT;
		goto err;
	}
	if (memcmp(cur, op->req.expect_old, len)) {
		ret = -ESTALE;
		goto err;
	}
	/* The bytes to restore: the original ones, also when replacing kerf's own int3. */
	memcpy(op->orig, cur, len);
	if (op->prev)
		memcpy(op->orig, op->prev->old, op->prev->len);
	/* emulate = NULL: a CPU meeting the temporary int3 behaves as the new instruction. */
	kerf_poke_queue(addr, op->req.new_bytes, len, NULL, &op->ret);
	return 0;

err:
	op->rec->pending_len = 0;
	return ret;
}

/**
 * kerf_splice_abort() - undo kerf_splice_prepare() of a request that was not written
 * @op: the request
 */
static void kerf_splice_abort(struct kerf_splice_op *op)
{
	void *v;

	if (!op->rec)
		return;
	op->rec->pending_len = 0;
	if (op->req.len == 5) {
		/* Never used: drop it without retiring it. */
		v = xa_load(&kerf_oss, op->target);
		if (v && xa_to_value(v) > 1)
			xa_store(&kerf_oss, op->target, xa_mk_value(xa_to_value(v) - 1),
				 GFP_KERNEL);
		else
			xa_erase(&kerf_oss, op->target);
	}
	if (!op->prev) {
		xa_erase(&kerf_splices, op->req.addr);
		kerf_nr_splices--;
		kfree(op->rec);
	}
	if (op->mod)
		module_put(op->mod);
	op->rec = NULL;
}

/**
 * kerf_splice_commit() - enter a written splice in the books
 * @op: the request; op->ret is 0, or -EIO (the bytes are unknown: still record the splice,
 *      so that nothing else is spliced here and UNSPLICE refuses to "restore" bytes it cannot
 *      verify)
 */
static void kerf_splice_commit(struct kerf_splice_op *op)
{
	struct kerf_splice_rec *rec = op->rec;
	unsigned int len = op->req.len;

	if (op->prev) {
		kerf_drop_form(op->prev);
	} else {
		rec->mod = op->mod;
		list_add(&rec->order, &kerf_splice_list);
	}
	rec->pending_len = 0;
	rec->len = len;
	memcpy(rec->old, op->orig, len);
	memcpy(rec->new, op->req.new_bytes, len);
	rec->seq = kerf_quiesce_done;
	if (len == 2) {
		rec->board = op->board;
		op->board->users++;
	} else if (len == 1) {
		op->meta->int3_live = true;
	}
}

/**
 * kerf_splice_ops() - check, write and record a batch of splice requests
 * @ops: the requests, in the order they are applied; each gets its own op->ret
 * @n: how many
 *
 * Three passes: every check that needs no text_mutex (kerf_lock held all along, so the books
 * cannot change under the batch), then under text_mutex the rest of the checks and the writes,
 * in runs (kerf_poke_queue()), then the books. The trap table is published first: an int3
 * must find its entry. Caller holds kerf_lock.
 *
 * Return: the number of requests spliced.
 */
static unsigned long kerf_splice_ops(struct kerf_splice_op *ops, unsigned long n)
{
	unsigned long i, done = 0;

	if (kerf_publish_traps_if_dirty()) {
		for (i = 0; i < n; i++)
			ops[i].ret = -ENOMEM;
		return 0;
	}
	for (i = 0; i < n; i++) {
		ops[i].ret = kerf_splice_prepare(&ops[i]);
		cond_resched();	/* its checks are slow under TCG (see kerf_poke_flush()) */
	}
	mutex_lock(ks.text_mutex);
	for (i = 0; i < n; i++) {
		if (!ops[i].ret)
			ops[i].ret = kerf_splice_check_locked(&ops[i]);
		/*
		 * Nothing queued is written yet, and a run kerf_poke_queue() flushed is whole,
		 * so no temporary int3 is in the text here: sleeping (text_mutex held) only
		 * delays other patchers. Without it a batch of 4,096 checks ran 23 s without a
		 * reschedule under TCG once core text was spliced (jump_label_text_reserved()
		 * decodes every jump entry through the patches) and the soft-lockup watchdog
		 * panicked the guest.
		 */
		cond_resched();
	}
	kerf_poke_flush();
	mutex_unlock(ks.text_mutex);
	for (i = 0; i < n; i++) {
		if (!ops[i].ret || ops[i].ret == -EIO)
			kerf_splice_commit(&ops[i]);
		else
			kerf_splice_abort(&ops[i]);
		done += !ops[i].ret;
	}
	return done;
}

/**
 * kerf_ioc_splice() - KERF_IOC_SPLICE: write a jmp or int3 over kernel text
 * @uarg: struct kerf_splice
 *
 * Return: 0 or an errno of kerf_uapi.h.
 */
static long kerf_ioc_splice(void __user *uarg)
{
	struct kerf_splice_op op = {};

	if (copy_from_user(&op.req, uarg, sizeof(op.req)))
		return -EFAULT;
	mutex_lock(&kerf_lock);
	kerf_splice_ops(&op, 1);
	mutex_unlock(&kerf_lock);
	return op.ret;
}

/* One unsplice request and the record it restores. */
struct kerf_unsplice_op {
	struct kerf_unsplice req;
	struct kerf_splice_rec *rec;
	bool claimed;		/* rec->pending_len is this request's */
	long ret;
};

/**
 * kerf_unsplice_ops() - restore and forget a batch of live splices
 * @ops: the requests (req.addr), in the order they are applied; each gets op->ret and, on
 *       success, req.len and req.restored
 * @n: how many
 *
 * Per request, as KERF_IOC_UNSPLICE: no live splice (-ENOENT), a springboard in use or used
 * since the last quiesce (-EBUSY), then under text_mutex bytes someone else changed (-EBUSY);
 * an address already in this batch is -EEXIST. Caller holds kerf_lock.
 *
 * Return: the number of splices restored.
 */
static unsigned long kerf_unsplice_ops(struct kerf_unsplice_op *ops, unsigned long n)
{
	struct kerf_unsplice_op *op;
	unsigned long i, done = 0;

	for (i = 0; i < n; i++) {
		op = &ops[i];
		op->rec = xa_load(&kerf_splices, op->req.addr);
		if (!op->rec) {
			op->ret = -ENOENT;
		} else if (op->rec->pending_len) {
			op->ret = -EEXIST;
		} else if (!kerf_can_restore(op->rec)) {
			op->ret = -EBUSY;
		} else {
			op->rec->pending_len = op->rec->len;
			op->claimed = true;
		}
	}
	mutex_lock(ks.text_mutex);
	for (i = 0; i < n; i++) {
		op = &ops[i];
		if (!op->ret)
			op->ret = kerf_restore_check(op->rec, &op->ret);
		cond_resched();	/* as in kerf_splice_ops() */
	}
	kerf_poke_flush();
	mutex_unlock(ks.text_mutex);
	for (i = 0; i < n; i++) {
		op = &ops[i];
		if (!op->claimed)
			continue;
		op->rec->pending_len = 0;
		if (op->ret)
			continue;
		op->req.len = op->rec->len;
		memset(op->req.restored, 0, sizeof(op->req.restored));
		memcpy(op->req.restored, op->rec->old, op->rec->len);
		kerf_forget(op->rec);
		done++;
	}
	return done;
}

/**
 * kerf_ioc_unsplice() - KERF_IOC_UNSPLICE: restore and forget a live splice
 * @uarg: struct kerf_unsplice
 *
 * Return: 0, -ENOENT, -EBUSY (bytes changed by someone else, or a springboard in use or
 * used since the last quiesce), -EFAULT or -EIO.
 */
static long kerf_ioc_unsplice(void __user *uarg)
{
	struct kerf_unsplice_op op = {};

	if (copy_from_user(&op.req, uarg, sizeof(op.req)))
		return -EFAULT;
	mutex_lock(&kerf_lock);
	kerf_unsplice_ops(&op, 1);
	mutex_unlock(&kerf_lock);
	if (op.ret)
		return op.ret;
	return copy_to_user(uarg, &op.req, sizeof(op.req)) ? -EFAULT : 0;
}

/**
 * kerf_batch_get() - read and check the header of a batch ioctl
 * @uarg: struct kerf_batch
 * @b: out: the header
 *
 * Return: 0, -EFAULT or -EINVAL.
 */
static int kerf_batch_get(void __user *uarg, struct kerf_batch *b)
{
	if (copy_from_user(b, uarg, sizeof(*b)))
		return -EFAULT;
	if (!b->count || b->count > KERF_BATCH_MAX || b->reserved)
		return -EINVAL;
	return 0;
}

/**
 * kerf_ioc_splice_batch() - KERF_IOC_SPLICE_BATCH: many KERF_IOC_SPLICE requests, one write
 * @uarg: struct kerf_batch of struct kerf_splice_entry
 *
 * Return: 0 (each entry's result says what became of it), -EINVAL, -EFAULT or -ENOMEM.
 */
static long kerf_ioc_splice_batch(void __user *uarg)
{
	struct kerf_splice_entry __user *ue;
	struct kerf_splice_entry e;
	struct kerf_splice_op *ops;
	struct kerf_batch b;
	unsigned long i;
	long ret;

	ret = kerf_batch_get(uarg, &b);
	if (ret)
		return ret;
	ue = u64_to_user_ptr(b.entries);
	ops = kvcalloc(b.count, sizeof(*ops), GFP_KERNEL);
	if (!ops)
		return -ENOMEM;
	for (i = 0; i < b.count; i++) {
		if (copy_from_user(&e, &ue[i], sizeof(e))) {
			ret = -EFAULT;
			goto out_free;
		}
		if (e.reserved) {
			ret = -EINVAL;
			goto out_free;
		}
		ops[i].req = e.req;
	}
	mutex_lock(&kerf_lock);
	b.done = kerf_splice_ops(ops, b.count);
	mutex_unlock(&kerf_lock);
	/* Applied: a fault now loses only the report, which the caller asked to put there. */
	for (i = 0; i < b.count; i++) {
		if (put_user((__s64)ops[i].ret, &ue[i].result))
			ret = -EFAULT;
	}
	if (copy_to_user(uarg, &b, sizeof(b)))
		ret = -EFAULT;
out_free:
	kvfree(ops);
	return ret;
}

/**
 * kerf_ioc_unsplice_batch() - KERF_IOC_UNSPLICE_BATCH: many KERF_IOC_UNSPLICE requests, one
 * write
 * @uarg: struct kerf_batch of struct kerf_unsplice_entry
 *
 * Return: 0 (each entry's result says what became of it), -EINVAL, -EFAULT or -ENOMEM.
 */
static long kerf_ioc_unsplice_batch(void __user *uarg)
{
	struct kerf_unsplice_entry __user *ue;
	struct kerf_unsplice_entry e;
	struct kerf_unsplice_op *ops;
	struct kerf_batch b;
	unsigned long i;
	long ret;

	ret = kerf_batch_get(uarg, &b);
	if (ret)
		return ret;
	ue = u64_to_user_ptr(b.entries);
	ops = kvcalloc(b.count, sizeof(*ops), GFP_KERNEL);
	if (!ops)
		return -ENOMEM;
	for (i = 0; i < b.count; i++) {
		if (copy_from_user(&e, &ue[i], sizeof(e))) {
			ret = -EFAULT;
			goto out_free;
		}
		if (e.reserved) {
			ret = -EINVAL;
			goto out_free;
		}
		ops[i].req.addr = e.req.addr;
	}
	mutex_lock(&kerf_lock);
	b.done = kerf_unsplice_ops(ops, b.count);
	mutex_unlock(&kerf_lock);
	for (i = 0; i < b.count; i++) {
		e.req = ops[i].req;
		e.result = ops[i].ret;
		e.reserved = 0;
		if (copy_to_user(&ue[i], &e, sizeof(e)))
			ret = -EFAULT;
	}
	if (copy_to_user(uarg, &b, sizeof(b)))
		ret = -EFAULT;
out_free:
	kvfree(ops);
	return ret;
}

/**
 * kerf_trap_add_locked() - map an int3 address to a code patch
 * @req: the address and the patch
 *
 * Caller holds kerf_lock.
 *
 * Return: 0, -EINVAL, -ENXIO, -EPERM, -EEXIST, -ENOSPC or -ENOMEM.
 */
static long kerf_trap_add_locked(const struct kerf_trap *req)
{
	struct kerf_trap_meta *meta;
	struct module *mod;
	long ret;

	if (!kerf_in_patch_heap(req->patch, 1))
		return -EINVAL;
	ret = kerf_check_text(req->addr, 1, &mod);
	if (ret)
		return ret;
	if (mod)
		module_put(mod);	/* the int3 splice will hold it */
	if (xa_load(&kerf_traps_meta, req->addr))
		return -EEXIST;
	if (kerf_nr_traps >= KERF_MAX_TRAPS)
		return -ENOSPC;
	meta = kzalloc(sizeof(*meta), GFP_KERNEL);
	if (!meta)
		return -ENOMEM;
	meta->patch = req->patch;
	ret = xa_err(xa_store(&kerf_traps_meta, req->addr, meta, GFP_KERNEL));
	if (ret)
		goto err_free;
	ret = kerf_os_get(req->patch);
	if (ret)
		goto err_erase;
	kerf_nr_traps++;
	kerf_traps_dirty = true;	/* published before an int3 can be written here */
	return 0;

err_erase:
	xa_erase(&kerf_traps_meta, req->addr);
err_free:
	kfree(meta);
	return ret;
}

/**
 * kerf_trap_remove() - drop a trap entry
 * @addr: the trap's address
 * @meta: its state
 *
 * The published table keeps the entry until the next kerf_publish_traps_if_dirty(), which
 * comes before the quiesce that allows its patch to be rewritten.
 */
static void kerf_trap_remove(unsigned long addr, struct kerf_trap_meta *meta)
{
	xa_erase(&kerf_traps_meta, addr);
	kerf_nr_traps--;
	kerf_traps_dirty = true;
	kerf_os_put(meta->patch);
	kfree(meta);
}

/**
 * kerf_trap_del_locked() - remove a trap entry
 * @req: the address (req->patch is ignored)
 *
 * Refused while the int3 is live, and after its removal until a quiesce: a CPU that trapped
 * on it just before the restore may still be on its way to kerf_int3_notify(). Caller holds
 * kerf_lock.
 *
 * Return: 0, -ENOENT or -EBUSY.
 */
static long kerf_trap_del_locked(const struct kerf_trap *req)
{
	struct kerf_trap_meta *meta = xa_load(&kerf_traps_meta, req->addr);

	if (!meta)
		return -ENOENT;
	if (meta->int3_live || (meta->int3_gone && meta->gone_seq >= kerf_quiesce_done))
		return -EBUSY;
	kerf_trap_remove(req->addr, meta);
	return 0;
}

/**
 * kerf_ioc_trap() - KERF_IOC_TRAP_ADD / KERF_IOC_TRAP_DEL: one trap entry
 * @uarg: struct kerf_trap
 * @fn: kerf_trap_add_locked() or kerf_trap_del_locked()
 *
 * Return: what @fn returns, or -EFAULT.
 */
static long kerf_ioc_trap(void __user *uarg, long (*fn)(const struct kerf_trap *))
{
	struct kerf_trap req;
	long ret;

	if (copy_from_user(&req, uarg, sizeof(req)))
		return -EFAULT;
	mutex_lock(&kerf_lock);
	ret = fn(&req);
	mutex_unlock(&kerf_lock);
	return ret;
}

/**
 * kerf_ioc_trap_batch() - KERF_IOC_TRAP_ADD_BATCH / _DEL_BATCH: many trap entries, one call
 * @uarg: struct kerf_batch of struct kerf_trap_entry
 * @fn: kerf_trap_add_locked() or kerf_trap_del_locked()
 *
 * A splice batch of thousands of int3s needs as many trap entries first; one ioctl each was
 * a system call through spliced entry code for every one of them (under qemu TCG about a
 * third of a registration's time, the rest kerf_check_text()). Each entry is done as its own
 * ioctl would do it, kerf_lock held across the batch, rescheduling between entries.
 *
 * Return: 0 (each entry's result says what became of it), -EINVAL, -EFAULT or -ENOMEM.
 */
static long kerf_ioc_trap_batch(void __user *uarg, long (*fn)(const struct kerf_trap *))
{
	struct kerf_trap_entry __user *ue;
	struct kerf_trap_entry *e;
	struct kerf_batch b;
	unsigned long i;
	long ret;

	ret = kerf_batch_get(uarg, &b);
	if (ret)
		return ret;
	ue = u64_to_user_ptr(b.entries);
	e = kvmalloc_array(b.count, sizeof(*e), GFP_KERNEL);
	if (!e)
		return -ENOMEM;
	if (copy_from_user(e, ue, b.count * sizeof(*e))) {
		ret = -EFAULT;
		goto out_free;
	}
	for (i = 0; i < b.count; i++) {
		if (e[i].reserved) {
			ret = -EINVAL;
			goto out_free;
		}
	}
	b.done = 0;
	mutex_lock(&kerf_lock);
	for (i = 0; i < b.count; i++) {
		e[i].result = fn(&e[i].req);
		b.done += !e[i].result;
		cond_resched();
	}
	mutex_unlock(&kerf_lock);
	/* Applied: a fault now loses only the report. */
	for (i = 0; i < b.count; i++) {
		if (put_user(e[i].result, &ue[i].result))
			ret = -EFAULT;
	}
	if (copy_to_user(uarg, &b, sizeof(b)))
		ret = -EFAULT;
out_free:
	kvfree(e);
	return ret;
}

/**
 * kerf_restore_round() - restore every live splice that may be restored now
 *
 * One batch in address order (few runs); one splice at a time if it cannot be allocated.
 * Caller holds kerf_lock.
 *
 * Return: how many were restored.
 */
static unsigned long kerf_restore_round(void)
{
	struct kerf_unsplice_op *ops, one;
	struct kerf_splice_rec *rec;
	unsigned long addr, n = 0, done = 0;

	xa_for_each(&kerf_splices, addr, rec)
		n += kerf_can_restore(rec);
	ops = n ? kvcalloc(n, sizeof(*ops), GFP_KERNEL) : NULL;
	if (!ops) {
		xa_for_each(&kerf_splices, addr, rec) {
			if (!kerf_can_restore(rec))
				continue;
			one = (struct kerf_unsplice_op){ .req.addr = addr };
			done += kerf_unsplice_ops(&one, 1);
		}
		return done;
	}
	n = 0;
	xa_for_each(&kerf_splices, addr, rec) {
		if (kerf_can_restore(rec))
			ops[n++].req.addr = addr;
	}
	done = kerf_unsplice_ops(ops, n);
	kvfree(ops);
	return done;
}

/**
 * kerf_remove_all_locked() - restore every live splice, quiesce, drop every trap, quiesce again
 *
 * Called when the device is closed, whatever the daemon's fate. A
 * springboard whose jmp rel8 was just restored needs a quiesce before it may go, so this runs
 * in rounds (restore what may be restored, quiesce) until nothing more can be done: two rounds
 * at most with today's splice forms. A splice that cannot be restored (someone else changed its
 * bytes) still jumps into kerf's patch heap: kerf then pins its own module forever, so that
 * what cannot be undone stays harmless, and keeps the trap entries such splices need. Caller
 * holds kerf_lock.
 */
static void kerf_remove_all_locked(void)
{
	struct kerf_splice_rec *rec;
	struct kerf_trap_meta *meta;
	unsigned long addr, restored;

	do {
		restored = kerf_restore_round();
		kerf_quiesce_locked();
	} while (restored && !list_empty(&kerf_splice_list));

	list_for_each_entry(rec, &kerf_splice_list, order)
		pr_err("cannot restore %pS (%u bytes); leaving it live\n", (void *)rec->addr,
		       rec->len);
	xa_for_each(&kerf_traps_meta, addr, meta) {
		if (!meta->int3_live)
			kerf_trap_remove(addr, meta);
	}
	/*
	 * Removing those entries retired their patches; without a quiesce now they would stay
	 * unwritable, and the next daemon, which lays out its patches from the heap's start
	 * again, would be refused them (seen: the third of three kerf runs in a row).
	 */
	if (!xa_empty(&kerf_retired))
		kerf_quiesce_locked();
	kerf_publish_traps_if_dirty();
	if (!list_empty(&kerf_splice_list) && !kerf_pinned) {
		__module_get(THIS_MODULE);
		kerf_pinned = true;
	}
}

/**
 * kerf_open() - open /dev/kerf: root (CAP_SYS_ADMIN) only, one open file at a time
 * @inode: the device inode
 * @file: the new file
 *
 * Return: 0, -EPERM or -EBUSY.
 */
static int kerf_open(struct inode *inode, struct file *file)
{
	if (!capable(CAP_SYS_ADMIN))
		return -EPERM;
	if (test_and_set_bit(0, &kerf_open_bit))
		return -EBUSY;
	/* A new daemon starts from zeroed counters. */
	memset(kerf_data_heap, 0, sizeof(kerf_data_heap));
	return nonseekable_open(inode, file);
}

/**
 * kerf_release() - last close of /dev/kerf (also when the daemon dies): undo everything
 * @inode: the device inode
 * @file: the file
 *
 * Return: 0.
 */
static int kerf_release(struct inode *inode, struct file *file)
{
	mutex_lock(&kerf_lock);
	kerf_remove_all_locked();
	mutex_unlock(&kerf_lock);
	clear_bit(0, &kerf_open_bit);
	return 0;
}

/**
 * kerf_mmap() - map the data heap (shared, read/write, never executable) into the caller
 * @file: /dev/kerf
 * @vma: the mapping; offset 0, at most KERF_DATA_HEAP_SIZE
 *
 * The heap is module .bss, i.e. vmalloc'd pages, inserted one by one. The mapping holds a
 * reference to the file, so the module cannot be unloaded under it.
 *
 * Return: 0 or a negative errno.
 */
static int kerf_mmap(struct file *file, struct vm_area_struct *vma)
{
	unsigned long size = vma->vm_end - vma->vm_start, off;
	int ret;

	if (vma->vm_pgoff || size > KERF_DATA_HEAP_SIZE || !(vma->vm_flags & VM_SHARED))
		return -EINVAL;
	if (vma->vm_flags & VM_EXEC)
		return -EPERM;
	vma->vm_flags &= ~VM_MAYEXEC;
	vma->vm_flags |= VM_DONTEXPAND | VM_DONTDUMP | VM_MIXEDMAP;
	for (off = 0; off < size; off += PAGE_SIZE) {
		ret = vm_insert_page(vma, vma->vm_start + off,
				     vmalloc_to_page(kerf_data_heap + off));
		if (ret)
			return ret;
	}
	return 0;
}

/**
 * kerf_ioctl() - dispatch the KERF_IOC_* requests of kerf_uapi.h
 * @file: /dev/kerf
 * @cmd: the request
 * @arg: user pointer to its struct
 *
 * Return: 0 or a negative errno as documented in kerf_uapi.h.
 */
static long kerf_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case KERF_IOC_VERSION: {
		struct kerf_version v = { .abi = KERF_ABI_VERSION };

		strscpy(v.built_for, UTS_RELEASE, sizeof(v.built_for));
		strscpy(v.running, init_utsname()->release, sizeof(v.running));
		return copy_to_user(uarg, &v, sizeof(v)) ? -EFAULT : 0;
	}
	case KERF_IOC_INFO: {
		struct kerf_info info = {
			.patch_heap = (unsigned long)kerf_patch_heap,
			.patch_heap_size = kerf_patch_heap_end - kerf_patch_heap,
			.data_heap = (unsigned long)kerf_data_heap,
			.data_heap_size = sizeof(kerf_data_heap),
			.stext = ks.stext,
			.etext = ks.etext,
			.max_splices = KERF_MAX_SPLICES,
			.max_traps = KERF_MAX_TRAPS,
			.trap_hits = atomic64_read(&kerf_trap_hits),
		};

		mutex_lock(&kerf_lock);
		info.live_splices = kerf_nr_splices;
		info.live_traps = kerf_nr_traps;
		info.quiesce_count = kerf_quiesce_done;
		info.patch_next = kerf_patch_next;
		mutex_unlock(&kerf_lock);
		return copy_to_user(uarg, &info, sizeof(info)) ? -EFAULT : 0;
	}
	case KERF_IOC_READ:
		return kerf_ioc_read(uarg);
	case KERF_IOC_WRITE_PATCH:
		return kerf_ioc_write_patch(uarg);
	case KERF_IOC_SPLICE:
		return kerf_ioc_splice(uarg);
	case KERF_IOC_UNSPLICE:
		return kerf_ioc_unsplice(uarg);
	case KERF_IOC_QUIESCE:
		mutex_lock(&kerf_lock);
		kerf_quiesce_locked();
		mutex_unlock(&kerf_lock);
		return 0;
	case KERF_IOC_TRAP_ADD:
		return kerf_ioc_trap(uarg, kerf_trap_add_locked);
	case KERF_IOC_TRAP_DEL:
		return kerf_ioc_trap(uarg, kerf_trap_del_locked);
	case KERF_IOC_TRAP_ADD_BATCH:
		return kerf_ioc_trap_batch(uarg, kerf_trap_add_locked);
	case KERF_IOC_TRAP_DEL_BATCH:
		return kerf_ioc_trap_batch(uarg, kerf_trap_del_locked);
	case KERF_IOC_SPLICE_BATCH:
		return kerf_ioc_splice_batch(uarg);
	case KERF_IOC_UNSPLICE_BATCH:
		return kerf_ioc_unsplice_batch(uarg);
	}
	return -ENOTTY;
}

static const struct file_operations kerf_fops = {
	.owner = THIS_MODULE,	/* no unload while /dev/kerf is open or mapped */
	.open = kerf_open,
	.release = kerf_release,
	.unlocked_ioctl = kerf_ioctl,
	.mmap = kerf_mmap,
	.llseek = no_llseek,
};

static struct miscdevice kerf_misc = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kerf",
	.fops = &kerf_fops,
	.mode = 0600,
};

/**
 * kerf_find_kallsyms_lookup_name() - learn kallsyms_lookup_name's address with a kprobe
 *
 * Context: module init. register_kprobe() resolves a symbol name for us and reports the
 * address in kp.addr; the probe is removed at once and never fires.
 *
 * Return: the address, or 0.
 */
static unsigned long kerf_find_kallsyms_lookup_name(void)
{
	struct kprobe kp = { .symbol_name = "kallsyms_lookup_name" };
	unsigned long addr;

	if (register_kprobe(&kp) < 0)
		return 0;
	addr = (unsigned long)kp.addr;
	unregister_kprobe(&kp);
	return addr;
}

/**
 * kerf_resolve() - fill ks from kallsyms
 *
 * Return: 0 or -ENOENT naming the missing symbol in the log.
 */
static int kerf_resolve(void)
{
	static const struct {
		const char *name;
		size_t off;
	} syms[] = {
#define KERF_SYM(field, name) { name, offsetof(typeof(ks), field) }
		KERF_SYM(text_poke_finish, "text_poke_finish"),
		KERF_SYM(text_poke_sync, "text_poke_sync"),
		KERF_SYM(text_poke, "text_poke"),
		KERF_SYM(text_poke_copy, "text_poke_copy"),
		KERF_SYM(text_poke_set, "text_poke_set"),
		KERF_SYM(perf_event_text_poke, "perf_event_text_poke"),
		KERF_SYM(kallsyms_lookup_size_offset, "kallsyms_lookup_size_offset"),
		KERF_SYM(text_mutex, "text_mutex"),
		KERF_SYM(within_kprobe_blacklist, "within_kprobe_blacklist"),
		KERF_SYM(ftrace_location_range, "ftrace_location_range"),
		KERF_SYM(jump_label_text_reserved, "jump_label_text_reserved"),
		KERF_SYM(static_call_text_reserved, "static_call_text_reserved"),
		KERF_SYM(alternatives_text_reserved, "alternatives_text_reserved"),
		KERF_SYM(get_kprobe, "get_kprobe"),
		KERF_SYM(find_bug, "find_bug"),
		KERF_SYM(search_exception_tables, "search_exception_tables"),
		KERF_SYM(module_text_address, "__module_text_address"),
		KERF_SYM(stext, "_stext"),
		KERF_SYM(etext, "_etext"),
		KERF_SYM(static_call_text_start, "__static_call_text_start"),
		KERF_SYM(static_call_text_end, "__static_call_text_end"),
		KERF_SYM(jump_table_start, "__start___jump_table"),
		KERF_SYM(jump_table_stop, "__stop___jump_table"),
		KERF_SYM(static_call_sites_start, "__start_static_call_sites"),
		KERF_SYM(static_call_sites_stop, "__stop_static_call_sites"),
		KERF_SYM(bug_table_start, "__start___bug_table"),
		KERF_SYM(bug_table_stop, "__stop___bug_table"),
		KERF_SYM(die_chain, "die_chain"),
#undef KERF_SYM
	};
	unsigned long addr;
	size_t i;

	ks.kallsyms_lookup_name = (void *)kerf_find_kallsyms_lookup_name();
	if (!ks.kallsyms_lookup_name) {
		pr_err("cannot find kallsyms_lookup_name (no kprobes?)\n");
		return -ENOENT;
	}
	for (i = 0; i < ARRAY_SIZE(syms); i++) {
		addr = ks.kallsyms_lookup_name(syms[i].name);
		if (!addr) {
			pr_err("cannot resolve %s\n", syms[i].name);
			return -ENOENT;
		}
		/* Every field is pointer-sized: a function, a data address or an address value. */
		*(unsigned long *)((char *)&ks + syms[i].off) = addr;
	}
	return 0;
}

/**
 * kerf_fill_heap() - fill the patch heap with int3
 *
 * The heap is a NOBITS section (kerf_heap.S), zeroed by the loader and already read-only +
 * executable; text_poke_set() writes it through a temporary alias, taking text_mutex itself.
 *
 * Return: 0 or -EIO.
 */
static int kerf_fill_heap(void)
{
	size_t len = kerf_patch_heap_end - kerf_patch_heap;

	if (!ks.text_poke_set(kerf_patch_heap, 0xcc, len) ||
	    memchr_inv(kerf_patch_heap, 0xcc, len))
		return -EIO;
	return 0;
}

/**
 * kerf_init() - resolve the unexported helpers, hook int3, create /dev/kerf
 *
 * Return: 0 or a negative errno (a missing symbol is -ENOENT, named in the log).
 */
static int __init kerf_init(void)
{
	int ret;

	ret = kerf_resolve();
	if (ret)
		return ret;
	ret = kerf_fill_heap();
	if (ret) {
		pr_err("cannot fill the patch heap with int3\n");
		return ret;
	}
	kerf_index_core();
	kerf_check_site_index();
	kerf_resolve_denied();
	ret = register_die_notifier(&kerf_int3_nb);
	if (ret)
		return ret;
	ret = misc_register(&kerf_misc);
	if (ret)
		goto err_notifier;
	ret = kerf_selftest_init();
	if (ret)
		goto err_misc;
	pr_info("patch heap %px+%#lx, data heap %px+%#lx\n", kerf_patch_heap,
		(unsigned long)(kerf_patch_heap_end - kerf_patch_heap), kerf_data_heap,
		(unsigned long)sizeof(kerf_data_heap));
	return 0;

err_misc:
	misc_deregister(&kerf_misc);
err_notifier:
	unregister_die_notifier(&kerf_int3_nb);
	kerf_index_free();
	return ret;
}

/**
 * kerf_exit() - remove /dev/kerf and the int3 hook
 *
 * Unloading is only possible with /dev/kerf closed and unmapped, and release has restored every
 * splice (or pinned the module), so nothing points into kerf's heaps any more.
 */
static void __exit kerf_exit(void)
{
	struct kerf_trap_tab *tab;

	kerf_selftest_exit();
	misc_deregister(&kerf_misc);
	unregister_die_notifier(&kerf_int3_nb);	/* waits for running notifiers */
	tab = rcu_dereference_protected(kerf_traps, true);
	RCU_INIT_POINTER(kerf_traps, NULL);
	kvfree(tab);
	kerf_index_free();
	xa_destroy(&kerf_oss);
	xa_destroy(&kerf_retired);
}

module_init(kerf_init);
module_exit(kerf_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kerf: splice generated code into the live kernel (driver for the kerf daemon)");
