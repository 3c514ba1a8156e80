/* trace.c -- the thread's trace id: set per HTTP request, job run or
 * consumed message; log.c writes it as traceId and outbox.c as the
 * envelope's correlationId.  Its own unit, so that neither the logger nor
 * the outbox writer imports the other (no db.c -> log.c -> outbox.c -> db.c
 * circle). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "core.h"

static __thread char trace[80];
static __thread char tparent[56];   /* "00-<32>-<16>-<2>" of this unit of work */

void pin_trace_set(const char *id)
{
	if (!id) {
		trace[0] = '\0';
		tparent[0] = '\0';
		return;
	}
	strncpy(trace, id, sizeof trace - 1);
	trace[sizeof trace - 1] = '\0';
}

const char *pin_trace_get(void)
{
	return trace[0] ? trace : NULL;
}

/* ---- W3C trace context (traceparent) ------------------------------------ */

static bool hexn(const char *s, size_t n)
{
	bool nonzero = false;

	for (size_t i = 0; i < n; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return false;
		if (s[i] != '0')
			nonzero = true;
	}
	return nonzero;
}

/* version 00: "00-" 32 hex (not all 0) "-" 16 hex (not all 0) "-" 2 hex */
bool pin_traceparent_valid(const char *tp)
{
	return tp && strlen(tp) == 55 && !strncmp(tp, "00-", 3) && tp[35] == '-' &&
		tp[52] == '-' && hexn(tp + 3, 32) && hexn(tp + 36, 16) &&
		strspn(tp + 53, "0123456789abcdef") == 2;
}

static void rand_hex(char *out, size_t nbytes)
{
	unsigned char b[16];
	static const char hx[] = "0123456789abcdef";

	pin_rand_bytes(b, nbytes);
	for (size_t i = 0; i < nbytes; i++) {
		out[2 * i] = hx[b[i] >> 4];
		out[2 * i + 1] = hx[b[i] & 15];
	}
	out[2 * nbytes] = '\0';
}

const char *pin_trace_start(const char *incoming)
{
	char tid[33], span[17], flags[3] = "01";

	if (pin_traceparent_valid(incoming)) {
		memcpy(tid, incoming + 3, 32);
		tid[32] = '\0';
		memcpy(flags, incoming + 53, 2);
	} else {
		do
			rand_hex(tid, 16);
		while (!hexn(tid, 32));
	}
	do
		rand_hex(span, 8);
	while (!hexn(span, 16));
	snprintf(tparent, sizeof tparent, "00-%s-%s-%s", tid, span, flags);
	pin_trace_set(tid);
	return trace;
}

const char *pin_traceparent_get(void)
{
	return tparent[0] ? tparent : NULL;
}
