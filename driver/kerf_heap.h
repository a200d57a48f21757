/* SPDX-License-Identifier: GPL-2.0 */
/* kerf_heap.h - sizes of kerf.ko's heaps, shared by kerf_main.c and kerf_heap.S. */
#ifndef _KERF_HEAP_H
#define _KERF_HEAP_H

/* Thousands of points x <= 128 bytes of patch; thousands of points x 64 bytes of data, and
 * the tracer's per-task rings (4.2 MiB a stream at 128 slots of 128 bytes, 256 tasks). */
#define KERF_PATCH_HEAP_SIZE	(4 << 20)
#define KERF_DATA_HEAP_SIZE	(16 << 20)
#define KERF_HEAP_ALIGN		4096

#endif /* _KERF_HEAP_H */
