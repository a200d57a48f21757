/* bench/trace_cost/loop.c: the traced function of bench/trace_cost.sh.
 *
 * loop N [THREADS]: each of THREADS threads (default 1) calls f(i, i ^ 0x55) N times; prints
 * the ns per call of the slowest thread (CLOCK_MONOTONIC around its loop) and a checksum.
 * Built with -DLTTNG, f also hits an LTTng-UST tracepoint with the same two fields (the peer
 * compiled into the program). "burst N RATE" calls f N times at about RATE calls a second
 * (bursts of 1000, then a sleep): the tracer's own CPU at a known event rate. "rate N RATE"
 * calls f N times at RATE calls a second held by the clock (busy-waiting, for offered rates
 * above what sleeps can pace) and prints the rate achieved; a stall of the loop (the machine
 * taking its CPU) is made up afterwards in a burst at full speed. "steady N RATE" is "rate"
 * without the bursts: more than 0.1 ms behind its schedule, the loop moves the schedule on
 * instead (never faster than RATE for longer than 0.1 ms), and prints the time it gave up
 * too. "paced N BATCH
 * US" calls f N times in batches of BATCH with a pause of US microseconds between them and
 * prints the ns per call of the batches alone: the cost of events a tracer delivers (a
 * flood would measure the cheaper path of a full ring, which drops).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef LTTNG
#define TRACEPOINT_DEFINE
#include "kerf_tp.h"
#endif

static long n_calls;
static volatile long sink;

__attribute__((noinline)) long f(long a, long b)
{
#ifdef LTTNG
	tracepoint(kerf_bench, f, a, b);
#endif
	__asm__ volatile("" : : "r"(a), "r"(b) : "memory");
	return a + b;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void *worker(void *arg)
{
	double *ns = arg;
	long s = 0;
	double t0 = now();
	for (long i = 0; i < n_calls; i++)
		s += f(i, i ^ 0x55);
	*ns = (now() - t0) / n_calls;
	sink += s;
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && strcmp(argv[1], "burst") == 0) {
		long n = atol(argv[2]), rate = atol(argv[3]), s = 0;
		struct timespec gap = { 0, (long)(1000 * 1e9 / rate) };
		for (long i = 0; i < n; i++) {
			s += f(i, i);
			if (i % 1000 == 999)
				nanosleep(&gap, NULL);
		}
		printf("%ld\n", s);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "rate") == 0) {
		// Calls at RATE a second held by the clock (batches of 1000, busy-waiting for the
		// next batch's time, never sleeping): an offered rate the reader must keep up with.
		// Prints the rate achieved.
		long n = atol(argv[2]), s = 0;
		double rate = atof(argv[3]), t0 = now();
		for (long i = 0; i < n; i += 1000) {
			while (now() - t0 < i * 1e9 / rate)
				;
			for (long j = i; j < i + 1000 && j < n; j++)
				s += f(j, j);
		}
		double took = now() - t0;
		printf("%.3f M calls/s %ld\n", n / took * 1e3, s);
		return 0;
	}
	if (argc >= 4 && strcmp(argv[1], "steady") == 0) {
		long n = atol(argv[2]), s = 0;
		double rate = atof(argv[3]), t0 = now(), given = 0;
		for (long i = 0; i < n; i += 1000) {
			double due = t0 + i * 1e9 / rate, t;
			while ((t = now()) < due)
				;
			if (t - due > 100e3) {
				t0 += t - due - 100e3;
				given += t - due - 100e3;
			}
			for (long j = i; j < i + 1000 && j < n; j++)
				s += f(j, j);
		}
		double took = now() - t0 + given;
		printf("%.3f M calls/s (%.1f ms given up) %ld\n", n / took * 1e3, given / 1e6, s);
		return 0;
	}
	if (argc == 5 && strcmp(argv[1], "paced") == 0) {
		long n = atol(argv[2]), batch = atol(argv[3]), s = 0;
		struct timespec gap = { 0, atol(argv[4]) * 1000 };
		double spent = 0;
		for (long i = 0; i < n; i += batch) {
			double t0 = now();
			for (long j = i; j < i + batch && j < n; j++)
				s += f(j, j ^ 0x55);
			spent += now() - t0;
			nanosleep(&gap, NULL);
		}
		printf("%.3f ns/call %ld\n", spent / n, s);
		return 0;
	}
	if (argc < 3 || strcmp(argv[1], "loop") != 0)
		return 2;
	n_calls = atol(argv[2]);
	int threads = argc > 3 ? atoi(argv[3]) : 1;
	pthread_t t[64];
	double ns[64];
	for (int k = 0; k < threads; k++)
		pthread_create(&t[k], NULL, worker, &ns[k]);
	double worst = 0;
	for (int k = 0; k < threads; k++) {
		pthread_join(t[k], NULL);
		if (ns[k] > worst)
			worst = ns[k];
	}
	printf("%.3f ns/call %ld\n", worst, sink);
	return 0;
}
