/* SPDX-License-Identifier: GPL-2.0 */
/* kerf_heap.h - sizes of kerf.ko's heaps, shared by kerf_main.c and kerf_heap.S. */
#ifndef _KERF_HEAP_H
#define _KERF_HEAP_H

/* Thousands of points x <= 128 bytes of patch; thousands of points x 64 bytes of data. */
#define KERF_PATCH_HEAP_SIZE	(4 << 20)
#define KERF_DATA_HEAP_SIZE	(2 << 20)
#define KERF_HEAP_ALIGN		4096

#endif /* _KERF_HEAP_H */
