/* stubs.c -- the per-thread trace id of outbox.c, without its database. */
#include "host.h"

static __thread const char *trace;

void pin_trace_set(const char *trace_id)
{
	trace = trace_id;
}

const char *pin_trace_get(void)
{
	return trace;
}
