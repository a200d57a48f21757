/* bench/trace_cost/kerf_tp.c: the LTTng-UST probe provider of kerf_tp.h, linked into loop. */
#define TRACEPOINT_CREATE_PROBES
#include "kerf_tp.h"
