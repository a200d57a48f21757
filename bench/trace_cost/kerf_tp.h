/* bench/trace_cost/kerf_tp.h: the LTTng-UST tracepoint of loop.c (two integer fields, as
 * kerf's probe captures). */
#undef TRACEPOINT_PROVIDER
#define TRACEPOINT_PROVIDER kerf_bench

#undef TRACEPOINT_INCLUDE
#define TRACEPOINT_INCLUDE "./kerf_tp.h"

#if !defined(KERF_TP_H) || defined(TRACEPOINT_HEADER_MULTI_READ)
#define KERF_TP_H

#include <lttng/tracepoint.h>

TRACEPOINT_EVENT(kerf_bench, f,
	TP_ARGS(long, a, long, b),
	TP_FIELDS(ctf_integer(long, a, a) ctf_integer(long, b, b)))

#endif

#include <lttng/tracepoint-event.h>
