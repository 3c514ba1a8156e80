/* test_router.c -- pin_route_compile() and pin_router_match().
 *
 * Expectations (where core.h leaves room):
 *  - m->names[i] names the parameter: either "id" or the pattern segment
 *    "{id}" (router.c and fcgi.c use the latter); m->values[i] is the
 *    URL-decoded segment;
 *  - one trailing slash on the request path is ignored ("/a/b/" == "/a/b"),
 *    an empty segment never binds a parameter ("/events/" does not match
 *    "/events/{id}"), "//" inside a path matches nothing;
 *  - a literal segment beats a parameter at the same position, whatever the
 *    registration order ("/events/batches" vs "/events/{id}");
 *  - a path that matches only with another method: -1 and method_mismatch
 *    (405); no path match: -1 without method_mismatch (404);
 *  - a %2F inside a segment does not split it;
 *  - pin_router_allow lists the methods of every route matching the path
 *    (HEAD with GET) in the order GET, HEAD, POST, PUT, PATCH, DELETE,
 *    OPTIONS, then others; 0 for an unknown path, -1 when out is too small.
 */
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "suites.h"

static int dummy(struct pin_req *req, void *ud)
{
	(void)req;
	(void)ud;
	return PIN_OK;
}

#define MAXR 16
static struct pin_route_entry routes[MAXR];
static size_t nroutes;
static struct pin_match m;

static void add(const char *method, const char *pattern)
{
	struct pin_route_entry *e;

	ck_assert_uint_lt(nroutes, MAXR);
	e = &routes[nroutes];
	memset(e, 0, sizeof(*e));
	e->r.method = method;
	e->r.pattern = pattern;
	e->r.actors = PIN_ACTOR_ANY;
	e->r.fn = dummy;
	e->plugin = "test";
	ck_assert_msg(pin_route_compile(e) == 0, "compile %s", pattern);
	nroutes++;
}

/* compile result of a pattern, entry cleared afterwards */
static int compile(const char *pattern)
{
	struct pin_route_entry e;
	int r;

	memset(&e, 0, sizeof(e));
	e.r.method = "GET";
	e.r.pattern = pattern;
	e.r.fn = dummy;
	r = pin_route_compile(&e);
	if (r == 0)
		pin_route_entry_clear(&e);
	return r;
}

static int match(const char *method, const char *path)
{
	pin_match_clear(&m);
	memset(&m, 0, sizeof(m));
	return pin_router_match(routes, nroutes, method, path, &m);
}

/* "id" matches a names[] entry "id" or "{id}" */
static int name_is(const char *have, const char *name)
{
	size_t n = strlen(name);

	if (!have)
		return 0;
	if (strcmp(have, name) == 0)
		return 1;
	return have[0] == '{' && strncmp(have + 1, name, n) == 0 &&
		have[n + 1] == '}' && have[n + 2] == 0;
}

static const char *param(const char *name)
{
	int i;

	for (i = 0; i < m.nparams; i++)
		if (name_is(m.names[i], name))
			return m.values[i];
	return NULL;
}

static void setup(void)
{
	nroutes = 0;
	memset(&m, 0, sizeof(m));
}

static void teardown(void)
{
	size_t i;

	pin_match_clear(&m);
	for (i = 0; i < nroutes; i++)
		pin_route_entry_clear(&routes[i]);
	nroutes = 0;
}

START_TEST(test_literal)
{
	add("GET", "/api/v1/health");
	add("GET", "/api/v1/agent/calendar/events");
	ck_assert_int_eq(match("GET", "/api/v1/agent/calendar/events"), 0);
	ck_assert_ptr_eq(m.e, &routes[1]);
	ck_assert_int_eq(m.nparams, 0);
	ck_assert(!m.method_mismatch);
	ck_assert_int_eq(match("GET", "/api/v1/health"), 0);
	ck_assert_ptr_eq(m.e, &routes[0]);
	/* prefixes and extensions do not match */
	ck_assert_int_eq(match("GET", "/api/v1"), -1);
	ck_assert_int_eq(match("GET", "/api/v1/health/x"), -1);
	ck_assert_int_eq(match("GET", "/api/v1/healthz"), -1);
	/* case-sensitive */
	ck_assert_int_eq(match("GET", "/API/v1/health"), -1);
}
END_TEST

START_TEST(test_params)
{
	add("POST", "/api/v1/agent/calendar/events/{id}/start");
	add("GET", "/api/v1/agency/{tenant}/agents/{agentId}/events");
	ck_assert_int_eq(match("POST", "/api/v1/agent/calendar/events/0190a0b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b/start"), 0);
	ck_assert_ptr_eq(m.e, &routes[0]);
	ck_assert_int_eq(m.nparams, 1);
	ck_assert_msg(name_is(m.names[0], "id"), "name %s", m.names[0]);
	ck_assert_str_eq(m.values[0], "0190a0b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b");

	ck_assert_int_eq(match("GET", "/api/v1/agency/t1/agents/a2/events"), 0);
	ck_assert_ptr_eq(m.e, &routes[1]);
	ck_assert_int_eq(m.nparams, 2);
	ck_assert_ptr_nonnull(param("tenant"));
	ck_assert_str_eq(param("tenant"), "t1");
	ck_assert_ptr_nonnull(param("agentId"));
	ck_assert_str_eq(param("agentId"), "a2");
}
END_TEST

START_TEST(test_trailing_slash)
{
	add("GET", "/api/v1/events");
	add("GET", "/api/v1/events/{id}");
	ck_assert_int_eq(match("GET", "/api/v1/events/"), 0);
	ck_assert_ptr_eq(m.e, &routes[0]);
	ck_assert_int_eq(match("GET", "/api/v1/events/42/"), 0);
	ck_assert_ptr_eq(m.e, &routes[1]);
	ck_assert_str_eq(m.values[0], "42");
	/* an empty segment is no parameter value, "//" matches nothing */
	ck_assert_int_eq(match("GET", "/api//v1/events"), -1);
	ck_assert_int_eq(match("GET", ""), -1);
	ck_assert_int_eq(match("GET", "api/v1/events"), -1);
}
END_TEST

START_TEST(test_method_mismatch)
{
	add("GET", "/api/v1/events/{id}");
	add("PATCH", "/api/v1/events/{id}");
	ck_assert_int_eq(match("PATCH", "/api/v1/events/1"), 0);
	ck_assert_ptr_eq(m.e, &routes[1]);
	ck_assert(!m.method_mismatch);
	ck_assert_int_eq(match("GET", "/api/v1/events/1"), 0);
	ck_assert_ptr_eq(m.e, &routes[0]);
	/* path known, method not: 405 */
	ck_assert_int_eq(match("DELETE", "/api/v1/events/1"), -1);
	ck_assert(m.method_mismatch);
	/* path unknown: 404 */
	ck_assert_int_eq(match("DELETE", "/api/v1/nothing/1"), -1);
	ck_assert(!m.method_mismatch);
	ck_assert_int_eq(match("GET", "/api/v1/nothing"), -1);
	ck_assert(!m.method_mismatch);
}
END_TEST

START_TEST(test_allow)
{
	char out[64];

	add("PATCH", "/api/v1/events/{id}");
	add("GET", "/api/v1/events/{id}");
	add("POST", "/api/v1/events");
	add("GET", "/api/v1/events");
	add("POST", "/api/v1/events/batches");
	add("PURGE", "/api/v1/events");
	add("PURGE", "/api/v1/events");
	ck_assert_int_eq(pin_router_allow(routes, nroutes, "/api/v1/events/1", out,
			sizeof out), 3);
	ck_assert_str_eq(out, "GET, HEAD, PATCH");
	ck_assert_int_eq(pin_router_allow(routes, nroutes, "/api/v1/events/", out,
			sizeof out), 4);
	ck_assert_str_eq(out, "GET, HEAD, POST, PURGE");
	/* the literal path also has what the {id} pattern has */
	ck_assert_int_eq(pin_router_allow(routes, nroutes, "/api/v1/events/batches",
			out, sizeof out), 4);
	ck_assert_str_eq(out, "GET, HEAD, POST, PATCH");
	ck_assert_int_eq(pin_router_allow(routes, nroutes, "/api/v1/nothing", out,
			sizeof out), 0);
	ck_assert_str_eq(out, "");
	ck_assert_int_eq(pin_router_allow(routes, nroutes, "//", out, sizeof out), 0);
	ck_assert_int_eq(pin_router_allow(routes, nroutes, "/api/v1/events/1", out,
			8), -1);
	ck_assert_int_eq(pin_router_allow(routes, nroutes, "/api/v1/events/1", out,
			0), -1);
}
END_TEST

START_TEST(test_no_routes)
{
	ck_assert_int_eq(match("GET", "/"), -1);
	ck_assert(!m.method_mismatch);
	ck_assert_ptr_null(m.e);
	ck_assert_int_eq(match("GET", "/api/v1/events"), -1);
}
END_TEST

START_TEST(test_literal_beats_param)
{
	add("POST", "/api/v1/agent/calendar/events/{id}");
	add("POST", "/api/v1/agent/calendar/events/batches");
	add("GET", "/api/v1/agent/calendar/events/{id}");
	ck_assert_int_eq(match("POST", "/api/v1/agent/calendar/events/batches"), 0);
	ck_assert_ptr_eq(m.e, &routes[1]);
	ck_assert_int_eq(m.nparams, 0);
	ck_assert_int_eq(match("POST", "/api/v1/agent/calendar/events/123"), 0);
	ck_assert_ptr_eq(m.e, &routes[0]);
	ck_assert_str_eq(m.values[0], "123");
	/* GET on the literal path falls to the {id} route */
	ck_assert_int_eq(match("GET", "/api/v1/agent/calendar/events/batches"), 0);
	ck_assert_ptr_eq(m.e, &routes[2]);
	ck_assert_str_eq(m.values[0], "batches");
}
END_TEST

START_TEST(test_literal_beats_param_reversed)
{
	add("GET", "/slots/batches/{id}");
	add("GET", "/slots/{id}/{sub}");
	add("GET", "/slots/{id}/history");
	ck_assert_int_eq(match("GET", "/slots/batches/7"), 0);
	ck_assert_ptr_eq(m.e, &routes[0]);
	ck_assert_int_eq(match("GET", "/slots/7/history"), 0);
	ck_assert_ptr_eq(m.e, &routes[2]);
	ck_assert_int_eq(match("GET", "/slots/7/other"), 0);
	ck_assert_ptr_eq(m.e, &routes[1]);
}
END_TEST

START_TEST(test_too_many_params)
{
	ck_assert_int_eq(compile("/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}"), 0);
	ck_assert_int_eq(compile("/{a}/{b}/{c}/{d}/{e}/{f}/{g}/{h}/{i}"), -1);
}
END_TEST

START_TEST(test_bad_patterns)
{
	ck_assert_int_eq(compile("/ok/{id}"), 0);
	ck_assert_int_eq(compile("no/leading/slash"), -1);
	ck_assert_int_eq(compile("/empty/{}"), -1);
	ck_assert_int_eq(compile("/open/{id"), -1);
	ck_assert_int_eq(compile("/mixed/x{id}"), -1);
	ck_assert_int_eq(compile("/double//slash"), -1);
}
END_TEST

START_TEST(test_url_encoded)
{
	add("GET", "/api/v1/things/{name}");
	ck_assert_int_eq(match("GET", "/api/v1/things/a%20b"), 0);
	ck_assert_str_eq(m.values[0], "a b");
	/* an encoded slash stays inside its segment */
	ck_assert_int_eq(match("GET", "/api/v1/things/a%2Fb"), 0);
	ck_assert_str_eq(m.values[0], "a/b");
	/* '+' is itself in a path (a space only in a query string) */
	ck_assert_int_eq(match("GET", "/api/v1/things/a+b"), 0);
	ck_assert_str_eq(m.values[0], "a+b");
	/* decoded exactly once */
	ck_assert_int_eq(match("GET", "/api/v1/things/a%2525b"), 0);
	ck_assert_str_eq(m.values[0], "a%25b");
	ck_assert_int_eq(match("GET", "/api/v1/things/%C3%A9t%C3%A9"), 0);
	ck_assert_str_eq(m.values[0], "\xc3\xa9t\xc3\xa9");
	/* an invalid escape never yields a garbage value */
	if (match("GET", "/api/v1/things/%zz") == 0)
		ck_assert_str_eq(m.values[0], "%zz");
}
END_TEST

Suite *make_router_suite(void)
{
	Suite *s = suite_create("router");
	TCase *tc = tcase_create("match");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_literal);
	tcase_add_test(tc, test_params);
	tcase_add_test(tc, test_trailing_slash);
	tcase_add_test(tc, test_method_mismatch);
	tcase_add_test(tc, test_allow);
	tcase_add_test(tc, test_no_routes);
	tcase_add_test(tc, test_literal_beats_param);
	tcase_add_test(tc, test_literal_beats_param_reversed);
	tcase_add_test(tc, test_too_many_params);
	tcase_add_test(tc, test_bad_patterns);
	tcase_add_test(tc, test_url_encoded);
	suite_add_tcase(s, tc);
	return s;
}
