// SPDX-License-Identifier: GPL-2.0
/*
 * kerf_selftest.c - runs kerf.ko's self-test loop (KERF_IOC_SELFTEST on /dev/kerf_selftest)
 * from the guest's shell: the suite's exact-count check (tests/fixtures/kernel_guest.sh) and
 * the Djprobe table (bench/kernel_probe_cost.sh) call it while a probe sits on the target.
 *
 * Usage: kerf_selftest jump5|short|twin CALLS
 * Output: one line,
 *   SELFTEST target=jump5 addr=0xffffffffc0123450 calls=N hits=N ns=T per_call=X
 *            best_per_call=B code=<hex>
 * where hits is what the target counted itself, ns the loop's time, B the time per call of
 * its fastest block of KERF_SELFTEST_BLOCK calls (0 with fewer calls) and code the target's
 * first 16 bytes after the loop. Exit status 0, or 1 with the reason on stderr. Built static
 * (the guest has no libc).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "kerf_uapi.h"

int main(int argc, char **argv)
{
	struct kerf_selftest req = { 0 };
	char *end;
	unsigned int i;
	int fd;

	static const char *const names[KERF_SELFTEST_NR] = {
		[KERF_SELFTEST_JUMP5] = "jump5",
		[KERF_SELFTEST_SHORT] = "short",
		[KERF_SELFTEST_TWIN] = "twin",
	};

	for (req.target = 0; argc == 3 && req.target < KERF_SELFTEST_NR; req.target++)
		if (!strcmp(argv[1], names[req.target]))
			break;
	if (argc != 3 || req.target == KERF_SELFTEST_NR) {
		fprintf(stderr, "usage: kerf_selftest jump5|short|twin CALLS\n");
		return 1;
	}
	errno = 0;
	req.calls = strtoull(argv[2], &end, 10);
	if (errno || *end || end == argv[2]) {
		fprintf(stderr, "kerf_selftest: bad CALLS %s\n", argv[2]);
		return 1;
	}
	fd = open(KERF_SELFTEST_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "kerf_selftest: open %s: %s\n", KERF_SELFTEST_DEVICE_PATH,
			strerror(errno));
		return 1;
	}
	if (ioctl(fd, KERF_IOC_SELFTEST, &req)) {
		fprintf(stderr, "kerf_selftest: KERF_IOC_SELFTEST: %s\n", strerror(errno));
		return 1;
	}
	printf("SELFTEST target=%s addr=%#llx calls=%llu hits=%llu ns=%llu per_call=%.3f "
	       "best_per_call=%.3f code=",
	       argv[1], (unsigned long long)req.addr, (unsigned long long)req.calls,
	       (unsigned long long)req.hits, (unsigned long long)req.ns,
	       req.calls ? (double)req.ns / (double)req.calls : 0.0,
	       (double)req.best_ns / KERF_SELFTEST_BLOCK);
	for (i = 0; i < sizeof(req.code); i++)
		printf("%02x", req.code[i]);
	putchar('\n');
	return 0;
}
