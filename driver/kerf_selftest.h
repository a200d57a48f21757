/* SPDX-License-Identifier: GPL-2.0 */
/* kerf_selftest.h - the self-test loop (kerf_selftest.c) as kerf_main.c sees it. */
#ifndef _KERF_SELFTEST_H
#define _KERF_SELFTEST_H

#include <linux/init.h>
#include <linux/types.h>

int __init kerf_selftest_init(void);
void kerf_selftest_exit(void);
bool kerf_selftest_text(unsigned long addr, unsigned long end);

#endif /* _KERF_SELFTEST_H */
