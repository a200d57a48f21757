/* SPDX-License-Identifier: GPL-2.0 */
/* kerf_heap.h - sizes of kerf.ko's heaps, shared by kerf_main.c and kerf_heap.S. */
#ifndef _KERF_HEAP_H
#define _KERF_HEAP_H

/*
 * Patch heap: every block of core kernel text as a coverage flag (~700,000 blocks x about
 * 48 bytes) with room to spare, or ~400,000 counting probes x 144. It is a NOBITS section, so
 * it costs the .ko file nothing; loading costs its pages (64 MiB of the module area).
 * Data heap: thousands of points x 64 bytes of data, coverage's flag bytes (one a block), and
 * the tracer's per-task rings (4.2 MiB a stream at 128 slots of 128 bytes, 256 tasks).
 */
#define KERF_PATCH_HEAP_SIZE	(64 << 20)
#define KERF_DATA_HEAP_SIZE	(16 << 20)
#define KERF_HEAP_ALIGN		4096

#endif /* _KERF_HEAP_H */
