/* SPDX-License-Identifier: GPL-2.0 */
/*
 * kerf_heap.S - kerf's patch heap: executable memory inside kerf.ko's own core text.
 *
 * Why here: generated code patches are reached from spliced jmp rel32 instructions and use
 * rip-relative counters in the data heap, so they must lie within +-2 GiB of kernel text, of
 * module text and of the data heap. The module area satisfies all three (that is what lets
 * modules call the kernel with rel32 calls), and reserving the heap inside the module avoids
 * module_alloc(), which 6.1 does not export.
 *
 * The module loader maps this section read-only + executable with the rest of kerf.ko's text
 * (CONFIG_STRICT_MODULE_RWX), so it is never writable and executable at once: kerf writes it
 * only through text_poke_copy(), which patches through a temporary alias mapping.
 * The section is NOBITS, so the .ko file does not carry its 64 MiB: the loader zeroes it, and
 * kerf_init() fills it with int3 (text_poke_set()) so that a stray jump into unwritten heap
 * traps instead of running zeroes as `add [rax], al`.
 */
#include <linux/linkage.h>
#include "kerf_heap.h"

	.section .text.kerf_patch_heap, "ax", @nobits
	.balign KERF_HEAP_ALIGN
	.globl kerf_patch_heap
kerf_patch_heap:
	.skip KERF_PATCH_HEAP_SIZE
	.globl kerf_patch_heap_end
kerf_patch_heap_end:
