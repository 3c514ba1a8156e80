/* trace.c -- the thread's trace id: set per HTTP request, job run or
 * consumed message; log.c writes it as traceId and outbox.c as the
 * envelope's correlationId.  Its own unit, so that neither the logger nor
 * the outbox writer imports the other (no db.c -> log.c -> outbox.c -> db.c
 * circle). */
#include "config.h"
#include <string.h>
#include "host.h"

static __thread char trace[80];

void pin_trace_set(const char *id)
{
	if (!id) {
		trace[0] = '\0';
		return;
	}
	strncpy(trace, id, sizeof trace - 1);
	trace[sizeof trace - 1] = '\0';
}

const char *pin_trace_get(void)
{
	return trace[0] ? trace : NULL;
}
