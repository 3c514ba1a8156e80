/* fuzz_router.c -- pin_router_match of a fuzzed "METHOD\npath" against a
 * fixed route table shaped like the plugins' routes.  Properties: a match
 * has the asked method and the path's segment count, one decoded value per
 * {param}, each no longer than its segment; a miss leaves no values. */
#include "core.h"
#include "api.h"
#include "worker.h"
#include "fuzz.h"

static int h(struct pin_req *r, void *ud)
{
	(void)r;
	(void)ud;
	return 0;
}

static const struct {
	const char *method, *pattern;
} table[] = {
	{ "GET", "/api/v1/agent/calendar/events" },
	{ "POST", "/api/v1/agent/calendar/events" },
	{ "GET", "/api/v1/agent/calendar/events/{id}" },
	{ "PATCH", "/api/v1/agent/calendar/events/{id}" },
	{ "POST", "/api/v1/agent/calendar/events/{id}/reschedule" },
	{ "POST", "/api/v1/agent/calendar/events/{id}/start" },
	{ "POST", "/api/v1/agent/calendar/slots/batches" },
	{ "POST", "/api/v1/agent/calendar/slots/batches/preview" },
	{ "POST", "/api/v1/agent/calendar/slots/{id}/archive" },
	{ "POST", "/api/v1/agent/calendar/slots/batches/{batchId}/archive" },
	{ "GET", "/api/public/calendar/slots" },
	{ "POST", "/api/public/calendar/appointments" },
	{ "GET", "/api/v1/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}" },
	{ "PUT", "/api/v1/me/notification-settings" },
	{ "GET", "/api/v1/test/whoami" },
	{ "POST", "/api/v1/test/echo" },
	{ "GET", "/" },
};
#define NROUTES (sizeof table / sizeof table[0])

static struct pin_route_entry routes[NROUTES];

static void setup(void)
{
	for (size_t i = 0; i < NROUTES; i++) {
		routes[i].r.method = table[i].method;
		routes[i].r.pattern = table[i].pattern;
		routes[i].r.fn = h;
		if (pin_route_compile(&routes[i]) < 0) {
			fprintf(stderr, "cannot compile %s\n", table[i].pattern);
			abort();
		}
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	struct pin_match m;
	char *in, *nl, *method, *path;
	int rc, nparams = 0, ns = 0;

	if (!ready) {
		setup();
		ready = 1;
	}
	if (size > 8192)
		return 0;
	in = fuzz_cstr(data, size);
	nl = strchr(in, '\n');
	if (nl) {
		*nl = '\0';
		method = in;
		path = nl + 1;
	} else {
		method = "GET";
		path = in;
	}
	rc = pin_router_match(routes, NROUTES, method, path, &m);
	if (rc == 0) {
		FUZZ_CHECK(m.e != NULL, "match without an entry");
		FUZZ_CHECK(!strcmp(m.e->r.method, method), "method %s for %s",
				m.e->r.method, method);
		for (const char *p = path; *p; p++)
			if (*p == '/' && p[1] != '\0')
				ns++;
		/* a trailing "//" counts as one slash ("//" is "/") */
		FUZZ_CHECK(ns == m.e->nsegs || strstr(path, "//"),
				"%d segments in %s, route has %d", ns, path, m.e->nsegs);
		for (int i = 0; i < m.e->nsegs; i++)
			nparams += m.e->segs[i][0] == '{';
		FUZZ_CHECK(m.nparams == nparams, "%d values for %d params",
				m.nparams, nparams);
		for (int i = 0; i < m.nparams; i++)
			FUZZ_CHECK(m.values[i] && strlen(m.values[i]) <= strlen(path),
					"param %d", i);
	} else {
		FUZZ_CHECK(m.nparams == 0 && m.e == NULL, "a miss with values");
	}
	/* the 405's Allow: some method whenever the path matched a route (a
	 * match, or a method mismatch; a parameter that does not decode is a
	 * miss of a matching pattern) */
	{
		char allow[128];
		int na = pin_router_allow(routes, NROUTES, path, allow, sizeof allow);

		FUZZ_CHECK(na != 0 || (rc != 0 && !m.method_mismatch),
				"allow %d (%s) for rc %d mismatch %d", na, allow, rc,
				m.method_mismatch);
		FUZZ_CHECK(rc != 0 || na < 0 || strstr(allow, method),
				"%s matched but Allow is %s", method, allow);
	}
	pin_match_clear(&m);
	free(in);
	return 0;
}
