/*
 * test_http.c -- the HTTP plumbing through nginx -> FastCGI -> host router:
 * operations endpoints, problem+json errors, authentication and
 * authorisation, body limits, the public rate limit.
 *
 * Uses the routes of tests/fixtures/testcons.so (loaded by the test API host):
 *   GET  /api/v1/test/whoami  actor agent, permission test.read, tenant required
 *   POST /api/v1/test/echo    any actor, answers the parsed body
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "harness.h"

#define WHOAMI "/api/v1/test/whoami"
#define ECHO "/api/v1/test/echo"

/* ------------------------------------------------------------ operations */

START_TEST(healthz_through_nginx)
{
	struct h_resp *r = h_get("/healthz", NULL);

	ck_assert_msg(r->status == 200, "status %ld: %s", r->status, r->body);
}
END_TEST

START_TEST(readyz_with_database)
{
	struct h_resp *r = h_get("/readyz", NULL);

	ck_assert_msg(r->status == 200, "status %ld: %s", r->status, r->body);
}
END_TEST

START_TEST(metrics_prometheus_text)
{
	struct h_resp *r;

	h_get("/healthz", NULL);        /* at least one request counted */
	r = h_get("/metrics", NULL);
	ck_assert_msg(r->status == 200, "status %ld: %.200s", r->status, r->body);
	ck_assert_msg(r->content_type && !strncmp(r->content_type, "text/plain", 10),
			"content type %s", r->content_type ? r->content_type : "(none)");
	ck_assert_msg(strstr(r->body, "pin_") != NULL,
			"no pin_* metric in: %.300s", r->body);
}
END_TEST

/* ------------------------------------------------------------ routing */

START_TEST(unknown_api_route_404)
{
	struct h_resp *r = h_get("/api/v1/no/such/route", NULL);

	h_assert_problem(r, 404, "ROUTE_NOT_FOUND");
}
END_TEST

START_TEST(path_outside_api_404)
{
	struct h_resp *r = h_get("/index.html", NULL);

	h_assert_problem(r, 404, "ROUTE_NOT_FOUND");
}
END_TEST

START_TEST(problem_body_shape)
{
	struct h_resp *r = h_get("/api/v1/no/such/route", NULL);
	json_object *st = h_jget(r->json, "status");

	h_assert_problem(r, 404, "ROUTE_NOT_FOUND");
	ck_assert_msg(st && json_object_get_int(st) == 404, "status member: %s", r->body);
	ck_assert_msg(h_jstr(r->json, "type") && h_jstr(r->json, "title"),
			"type/title missing: %s", r->body);
	ck_assert_msg(h_jstr(r->json, "traceId"), "traceId missing: %s", r->body);
}
END_TEST

/* ------------------------------------------------------------ authentication */

START_TEST(no_token_401)
{
	h_assert_problem(h_get(WHOAMI, NULL), 401, "UNAUTHENTICATED");
}
END_TEST

START_TEST(garbage_token_401)
{
	h_assert_problem(h_get(WHOAMI, "not.a.jwt"), 401, "UNAUTHENTICATED");
}
END_TEST

START_TEST(valid_token_whoami)
{
	char *sub = h_uuid(), *tenant = h_uuid();
	struct h_resp *r = h_get(WHOAMI, h_token("agent", sub, tenant, "test.read"));

	ck_assert_msg(r->status == 200, "status %ld: %s", r->status, r->body);
	ck_assert_msg(r->content_type && !strncmp(r->content_type, "application/json", 16),
			"content type %s", r->content_type ? r->content_type : "(none)");
	ck_assert_str_eq(h_jstr(r->json, "sub") ? h_jstr(r->json, "sub") : "", sub);
	ck_assert_str_eq(h_jstr(r->json, "tenantId") ? h_jstr(r->json, "tenantId") : "", tenant);
	ck_assert_str_eq(h_jstr(r->json, "actor") ? h_jstr(r->json, "actor") : "", "agent");
}
END_TEST

START_TEST(expired_token_401)
{
	const char *perms[] = { "test.read", NULL };
	struct h_token_opts o = { .actor = "agent", .sub = h_uuid(), .tenant = h_uuid(),
		.perms = perms, .exp_in_s = -3600 };

	h_assert_problem(h_get(WHOAMI, h_token_opts(&o)), 401, "UNAUTHENTICATED");
}
END_TEST

START_TEST(not_yet_valid_token_401)
{
	const char *perms[] = { "test.read", NULL };
	struct h_token_opts o = { .actor = "agent", .sub = h_uuid(), .tenant = h_uuid(),
		.perms = perms, .nbf_in_s = 3600 };

	h_assert_problem(h_get(WHOAMI, h_token_opts(&o)), 401, "UNAUTHENTICATED");
}
END_TEST

START_TEST(bad_signature_401)
{
	const char *perms[] = { "test.read", NULL };
	struct h_token_opts o = { .actor = "agent", .sub = h_uuid(), .tenant = h_uuid(),
		.perms = perms, .secret = "not-the-secret-of-this-stack-0123456789" };

	h_assert_problem(h_get(WHOAMI, h_token_opts(&o)), 401, "UNAUTHENTICATED");
}
END_TEST

START_TEST(wrong_issuer_401)
{
	const char *perms[] = { "test.read", NULL };
	struct h_token_opts o = { .actor = "agent", .sub = h_uuid(), .tenant = h_uuid(),
		.perms = perms, .iss = "someone-else" };

	h_assert_problem(h_get(WHOAMI, h_token_opts(&o)), 401, "UNAUTHENTICATED");
}
END_TEST

START_TEST(wrong_audience_401)
{
	const char *perms[] = { "test.read", NULL };
	struct h_token_opts o = { .actor = "agent", .sub = h_uuid(), .tenant = h_uuid(),
		.perms = perms, .aud = "another-service" };

	h_assert_problem(h_get(WHOAMI, h_token_opts(&o)), 401, "UNAUTHENTICATED");
}
END_TEST

/* ------------------------------------------------------------ authorisation */

START_TEST(missing_permission_403)
{
	char *tok = h_token("agent", h_uuid(), h_uuid(), "calendar.events.view");

	h_assert_problem(h_get(WHOAMI, tok), 403, "FORBIDDEN");
}
END_TEST

START_TEST(wrong_actor_403)
{
	char *tok = h_token("investor", h_uuid(), NULL, "test.read");

	h_assert_problem(h_get(WHOAMI, tok), 403, "FORBIDDEN");
}
END_TEST

/* ------------------------------------------------------------ bodies */

static char *any_token(void)
{
	return h_token("agent", h_uuid(), h_uuid(), "test.read");
}

START_TEST(echo_roundtrip)
{
	struct h_resp *r = h_post(ECHO, any_token(), "{\"a\":1,\"b\":\"zwölf\",\"c\":[true,null]}");
	json_object *a;

	ck_assert_msg(r->status == 200, "status %ld: %s", r->status, r->body);
	a = h_jget(r->json, "a");
	ck_assert_msg(a && json_object_get_int(a) == 1, "body %s", r->body);
	ck_assert_str_eq(h_jstr(r->json, "b") ? h_jstr(r->json, "b") : "", "zwölf");
}
END_TEST

START_TEST(malformed_json_400)
{
	struct h_resp *r = h_post(ECHO, any_token(), "{\"a\": 1,");

	h_assert_problem(r, 400, "MALFORMED_REQUEST");
}
END_TEST

START_TEST(wrong_content_type_400)
{
	struct h_req_opts o = { .body = "a=1", .content_type = "application/x-www-form-urlencoded" };

	h_assert_problem(h_request_opts("POST", ECHO, any_token(), &o), 400,
			"MALFORMED_REQUEST");
}
END_TEST

START_TEST(body_over_64k_413)
{
	size_t n = 70 * 1024;
	char *big = malloc(n + 16);
	struct h_resp *r;

	ck_assert(big != NULL);
	strcpy(big, "{\"x\":\"");
	memset(big + 6, 'a', n);
	strcpy(big + 6 + n, "\"}");
	r = h_post(ECHO, any_token(), big);
	free(big);
	h_assert_problem(r, 413, "PAYLOAD_TOO_LARGE");
}
END_TEST

START_TEST(body_just_under_64k_ok)
{
	size_t n = 60 * 1024;
	char *big = malloc(n + 16);
	struct h_resp *r;

	ck_assert(big != NULL);
	strcpy(big, "{\"x\":\"");
	memset(big + 6, 'a', n);
	strcpy(big + 6 + n, "\"}");
	r = h_post(ECHO, any_token(), big);
	free(big);
	ck_assert_msg(r->status == 200, "status %ld: %.200s", r->status, r->body);
	ck_assert_uint_eq(strlen(h_jstr(r->json, "x") ? h_jstr(r->json, "x") : ""), n);
}
END_TEST

/* ------------------------------------------------------------ rate limit */

/* From a second loopback address (127.0.0.2) so that the other suites'
 * public requests from 127.0.0.1 keep their own budget. */
static bool can_bind(const char *ip)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok;

	if (fd < 0)
		return false;
	inet_pton(AF_INET, ip, &a.sin_addr);
	ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

START_TEST(public_rate_limit_429)
{
	struct h_req_opts o = { .source_ip = "127.0.0.2" };
	struct h_resp *r = NULL;
	int i, limited = 0;

	if (!can_bind(o.source_ip)) {
		fprintf(stderr, "public_rate_limit_429: cannot bind 127.0.0.2, skipped\n");
		return;
	}

	for (i = 0; i < 400 && !limited; i++) {
		r = h_request_opts("GET", "/api/public/calendar/slots", NULL, &o);
		if (r->status == 429)
			limited = 1;
		else
			h_resp_free(r);
	}
	ck_assert_msg(limited, "no 429 after %d requests", i);
	ck_assert_msg(i > 50, "429 after only %d requests (burst is 100)", i);
	h_assert_problem(r, 429, "RATE_LIMITED");
}
END_TEST

Suite *make_http_suite(void)
{
	Suite *s = suite_create("http");
	TCase *tc;

	tc = h_tcase("operations", 30);
	tcase_add_test(tc, healthz_through_nginx);
	tcase_add_test(tc, readyz_with_database);
	tcase_add_test(tc, metrics_prometheus_text);
	suite_add_tcase(s, tc);

	tc = h_tcase("routing", 30);
	tcase_add_test(tc, unknown_api_route_404);
	tcase_add_test(tc, path_outside_api_404);
	tcase_add_test(tc, problem_body_shape);
	suite_add_tcase(s, tc);

	tc = h_tcase("authentication", 30);
	tcase_add_test(tc, no_token_401);
	tcase_add_test(tc, garbage_token_401);
	tcase_add_test(tc, valid_token_whoami);
	tcase_add_test(tc, expired_token_401);
	tcase_add_test(tc, not_yet_valid_token_401);
	tcase_add_test(tc, bad_signature_401);
	tcase_add_test(tc, wrong_issuer_401);
	tcase_add_test(tc, wrong_audience_401);
	suite_add_tcase(s, tc);

	tc = h_tcase("authorisation", 30);
	tcase_add_test(tc, missing_permission_403);
	tcase_add_test(tc, wrong_actor_403);
	suite_add_tcase(s, tc);

	tc = h_tcase("bodies", 30);
	tcase_add_test(tc, echo_roundtrip);
	tcase_add_test(tc, malformed_json_400);
	tcase_add_test(tc, wrong_content_type_400);
	tcase_add_test(tc, body_over_64k_413);
	tcase_add_test(tc, body_just_under_64k_ok);
	suite_add_tcase(s, tc);

	tc = h_tcase("rate-limit", 60);
	tcase_add_test(tc, public_rate_limit_429);
	suite_add_tcase(s, tc);
	return s;
}
