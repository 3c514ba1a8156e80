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
#include <signal.h>
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

/* RFC 6750 3: every 401 names the scheme and realm; a refused token adds
 * error="invalid_token" and the reason (api/openapi.yaml, bearerJwt) */
#define CHALLENGE "Bearer realm=\"pin-calendar\""
static const char *challenge(const struct h_resp *r)
{
	const char *v = h_header(r, "WWW-Authenticate");

	return v ? v : "(none)";
}

START_TEST(www_authenticate_on_401)
{
	static const char refused[] = CHALLENGE ", error=\"invalid_token\", error_description=\"";
	static const char *const basic[] = { "Authorization: Basic dXNlcjpwYXNz", NULL };
	struct h_req_opts o = { .headers = basic };
	struct h_token_opts t = { .actor = "agent", .exp_in_s = -3600 };
	struct h_resp *r;
	const char *ch;

	r = h_get(WHOAMI, NULL);
	h_assert_problem(r, 401, "UNAUTHENTICATED");
	ck_assert_str_eq(challenge(r), CHALLENGE);
	/* another scheme is no bearer token: no error attribute */
	r = h_request_opts("GET", WHOAMI, NULL, &o);
	h_assert_problem(r, 401, "UNAUTHENTICATED");
	ck_assert_str_eq(challenge(r), CHALLENGE);
	r = h_get(WHOAMI, "not.a.jwt");
	h_assert_problem(r, 401, "UNAUTHENTICATED");
	ch = challenge(r);
	ck_assert_msg(!strncmp(ch, refused, strlen(refused)), "challenge %s", ch);
	t.sub = h_uuid();
	t.tenant = h_uuid();
	r = h_get(WHOAMI, h_token_opts(&t));
	h_assert_problem(r, 401, "UNAUTHENTICATED");
	ck_assert_str_eq(challenge(r), CHALLENGE
			", error=\"invalid_token\", error_description=\"token expired\"");
	/* a valid token: no challenge */
	r = h_get(WHOAMI, h_token("agent", h_uuid(), h_uuid(), "test.read"));
	ck_assert_int_eq(r->status, 200);
	ck_assert_ptr_null(h_header(r, "WWW-Authenticate"));
	/* a 403 is no authentication failure: no challenge either */
	r = h_get(WHOAMI, h_token("agent", h_uuid(), h_uuid(), "calendar.events.view"));
	h_assert_problem(r, 403, "FORBIDDEN");
	ck_assert_ptr_null(h_header(r, "WWW-Authenticate"));
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

/* An agent token (test.read) built with o's other fields is refused:
 * 401 UNAUTHENTICATED on whoami. */
static void token_refused(struct h_token_opts o)
{
	static const char *const perms[] = { "test.read", NULL };

	o.actor = "agent";
	o.sub = h_uuid();
	o.tenant = h_uuid();
	o.perms = perms;
	h_assert_problem(h_get(WHOAMI, h_token_opts(&o)), 401, "UNAUTHENTICATED");
}

START_TEST(expired_token_401)
{
	token_refused((struct h_token_opts){ .exp_in_s = -3600 });
}
END_TEST

START_TEST(not_yet_valid_token_401)
{
	token_refused((struct h_token_opts){ .nbf_in_s = 3600 });
}
END_TEST

START_TEST(bad_signature_401)
{
	token_refused((struct h_token_opts){ .secret = "not-the-secret-of-this-stack-0123456789" });
}
END_TEST

START_TEST(wrong_issuer_401)
{
	token_refused((struct h_token_opts){ .iss = "someone-else" });
}
END_TEST

START_TEST(wrong_audience_401)
{
	token_refused((struct h_token_opts){ .aud = "another-service" });
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

/* A value in a failed SQL statement does not reach the log: PostgreSQL
 * quotes it in the primary message of data exceptions (class 22) */
START_TEST(sql_error_values_not_logged)
{
	static const char *marker = "Ivanov-Ivan-79991234567";
	char *path = h_sprintf("%s/logs/api.log", h_env("PIN_DEV_DIR"));
	char *body = h_sprintf("{\"value\":\"%s\"}", marker);
	struct h_resp *r = h_post("/api/v1/test/cast", any_token(), body);
	FILE *f;
	char line[8192];
	bool seen_error = false, leaked = false;

	ck_assert_msg(r->status == 422, "status %ld: %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "detail") ? h_jstr(r->json, "detail") : "", "22P02");
	h_sleep_ms(200);
	f = fopen(path, "r");
	ck_assert_msg(f != NULL, "cannot read %s", path);
	while (fgets(line, sizeof line, f)) {
		if (strstr(line, "22P02"))
			seen_error = true;
		if (strstr(line, marker))
			leaked = true;
	}
	fclose(f);
	ck_assert_msg(seen_error, "the sql error was not logged at all");
	ck_assert_msg(!leaked, "a value of a failed statement reached %s", path);
}
END_TEST

/* Response headers over the host's 4 KiB header buffer: a well-formed 500,
 * not a status line followed by the body as if it were headers (nginx 502) */
START_TEST(huge_response_header_500)
{
	char *big = h_strdup(""), *body;
	struct h_resp *r;

	while (strlen(big) < 5000)
		big = h_sprintf("%s0123456789", big);
	body = h_sprintf("{\"xEchoHeader\":\"%s\"}", big);
	r = h_post(ECHO, any_token(), body);
	ck_assert_msg(r->status == 500, "status %ld: %s", r->status, r->body);
	/* a small one still goes through */
	r = h_post(ECHO, any_token(), "{\"xEchoHeader\":\"abc\"}");
	ck_assert_msg(r->status == 200, "status %ld: %s", r->status, r->body);
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

/* POSTs {"x":"aa...a"} with n a's to the echo route. */
static struct h_resp *post_x_of(size_t n)
{
	char *big = malloc(n + 16);
	struct h_resp *r;

	ck_assert(big != NULL);
	strcpy(big, "{\"x\":\"");
	memset(big + 6, 'a', n);
	strcpy(big + 6 + n, "\"}");
	r = h_post(ECHO, any_token(), big);
	free(big);
	return r;
}

START_TEST(body_over_64k_413)
{
	h_assert_problem(post_x_of(70 * 1024), 413, "PAYLOAD_TOO_LARGE");
}
END_TEST

START_TEST(body_just_under_64k_ok)
{
	size_t n = 60 * 1024;
	struct h_resp *r = post_x_of(n);

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

/* ------------------------------------------------------------ robustness */

/* issue 2: a malformed request never crashes a host.  nginx refuses some of
 * these itself (bad URI, "%00" or ".." above the root, huge headers): its
 * error_page turns them into 400 MALFORMED_REQUEST problem+json; whatever
 * reaches the host answers problem+json too, never 5xx. */

static void assert_healthy(void)
{
	struct h_resp *r = h_get("/healthz", NULL);

	ck_assert_msg(r->status == 200, "/healthz after the request: %ld %s",
			r->status, r->body);
}

static void assert_4xx(const struct h_resp *r, const char *what)
{
	ck_assert_msg(r->status >= 400 && r->status < 500, "%s: status %ld: %.200s",
			what, r->status, r->body);
	ck_assert_msg(r->content_type &&
			strstr(r->content_type, "application/problem+json") &&
			r->json && h_jstr(r->json, "code"),
			"%s: %s %.200s", what, r->content_type ? r->content_type : "(none)",
			r->body);
}

/* A raw HTTP/1.1 request line as given (libcurl would normalise "/../"):
 * status of the answer; *ctype gets its Content-Type (h_strdup) or NULL. */
static long raw_get(const char *target, char **ctype)
{
	char *buf = h_http_raw(h_sprintf("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
			"Connection: close\r\n\r\n", target)), *ct, *e;
	long status = -1;

	if (!strncmp(buf, "HTTP/1.", 7) && strlen(buf) > 12)
		status = strtol(buf + 9, NULL, 10);
	*ctype = NULL;
	ct = strcasestr(buf, "\r\nContent-Type: ");
	if (ct) {
		ct += 16;
		e = strstr(ct, "\r\n");
		*ctype = h_strdup(e ? h_sprintf("%.*s", (int)(e - ct), ct) : ct);
	}
	return status;
}

static char *repeat(char c, size_t n)
{
	char *s = h_sprintf("%*s", (int)n, "");

	memset(s, c, n);
	return s;
}

START_TEST(huge_query_string_4xx)
{
	/* past nginx's large_client_header_buffers (8 KiB a line) */
	struct h_resp *r = h_get(h_sprintf("%s?q=%s", WHOAMI, repeat('a', 64 * 1024)),
			any_token());

	assert_4xx(r, "64 KiB query");
	h_assert_problem(r, 400, "MALFORMED_REQUEST");
	/* a long query the host does get: many (empty) pairs */
	r = h_get(h_sprintf("%s?%s&=&&y&z=1", WHOAMI, repeat('&', 6 * 1024)), any_token());
	ck_assert_msg(r->status == 200, "6 KiB query: %ld %s", r->status, r->body);
	/* ... and with a bad escape among them: refused, not dropped */
	r = h_get(h_sprintf("%s?%s&x=%%zz&=&&%%=1&y", WHOAMI,
			repeat('&', 6 * 1024)), any_token());
	h_assert_problem(r, 400, "MALFORMED_REQUEST");
	assert_healthy();
}
END_TEST

START_TEST(invalid_utf8_body_400)
{
	static const char body[] = "{\"a\":\"\xff\xfe\xc3\"}";
	struct h_req_opts o = { .body = body, .body_len = sizeof(body) - 1 };

	h_assert_problem(h_request_opts("POST", ECHO, any_token(), &o), 400,
			"MALFORMED_REQUEST");
	assert_healthy();
}
END_TEST

START_TEST(deeply_nested_json_400)
{
	char *s = h_sprintf("%s%s", repeat('[', 1000), repeat(']', 1000));
	char *o = h_sprintf("%s1%s", repeat('[', 100000 / 2), repeat(']', 100000 / 2));

	h_assert_problem(h_post(ECHO, any_token(), s), 400, "MALFORMED_REQUEST");
	h_assert_problem(h_post(ECHO, any_token(), o), 413, "PAYLOAD_TOO_LARGE");
	s = h_strdup("{\"a\":");
	for (int i = 0; i < 999; i++)
		s = h_sprintf("%s{\"a\":", s);
	h_assert_problem(h_post(ECHO, any_token(), s), 400, "MALFORMED_REQUEST");
	assert_healthy();
}
END_TEST

START_TEST(json_with_nul_400)
{
	static const char b1[] = "{\"a\":1}\0";
	static const char b2[] = "{\"a\":\"x\0y\"}";
	static const char b3[] = "\0{\"a\":1}";
	struct h_req_opts o1 = { .body = b1, .body_len = sizeof(b1) - 1 };
	struct h_req_opts o2 = { .body = b2, .body_len = sizeof(b2) - 1 };
	struct h_req_opts o3 = { .body = b3, .body_len = sizeof(b3) - 1 };

	h_assert_problem(h_request_opts("POST", ECHO, any_token(), &o1), 400,
			"MALFORMED_REQUEST");
	h_assert_problem(h_request_opts("POST", ECHO, any_token(), &o2), 400,
			"MALFORMED_REQUEST");
	h_assert_problem(h_request_opts("POST", ECHO, any_token(), &o3), 400,
			"MALFORMED_REQUEST");
	assert_healthy();
}
END_TEST

START_TEST(odd_json_values_400)
{
	static const char *bad[] = { "NaN", "{\"a\":Infinity}", "{\"a\":1e999}",
		"{'a':1}", "{\"a\":1}{}", "\"\\ud800\"x", NULL };

	for (int i = 0; bad[i]; i++)
		h_assert_problem(h_post(ECHO, any_token(), bad[i]), 400, "MALFORMED_REQUEST");
	assert_healthy();
}
END_TEST

START_TEST(text_plain_json_body_400)
{
	struct h_req_opts o = { .body = "{\"a\":1}", .content_type = "text/plain" };

	h_assert_problem(h_request_opts("POST", ECHO, any_token(), &o), 400,
			"MALFORMED_REQUEST");
	o.content_type = "application/jsonx";
	h_assert_problem(h_request_opts("POST", ECHO, any_token(), &o), 400,
			"MALFORMED_REQUEST");
	assert_healthy();
}
END_TEST

START_TEST(many_headers)
{
	const char *hs[301];
	struct h_req_opts o = { .body = "{\"a\":1}", .headers = hs };
	struct h_resp *r;
	int i;

	for (i = 0; i < 300; i++)
		hs[i] = h_sprintf("X-Robust-%d: %s", i, i % 2 ? "v" : "\x01\x7f");
	hs[i] = NULL;
	r = h_request_opts("POST", ECHO, any_token(), &o);
	ck_assert_msg(r->status == 200, "300 headers: %ld %s", r->status, r->body);
	/* one header longer than nginx's header buffer */
	hs[0] = h_sprintf("X-Robust: %s", repeat('h', 16 * 1024));
	hs[1] = NULL;
	assert_4xx(h_request_opts("POST", ECHO, any_token(), &o), "16 KiB header");
	assert_healthy();
}
END_TEST

START_TEST(odd_paths_4xx)
{
	static const struct {
		const char *target;
		bool host;            /* answered by the host (else refused by nginx) */
	} paths[] = {
		{ "/api/v1/test/../test/whoami", true },
		{ "/api/v1/test/whoami/..", true },
		{ "/api/v1//test//whoami", true },
		{ "/api/v1/test/%2e%2e/whoami", true },
		{ "/api/v1/agent/calendar/events/%2e%2e", true },
		{ "/api/v1/agent/calendar/events/a%2fb", true },
		{ "/api/v1/agent/calendar/events/%zz", false },
		{ "/api/v1/agent/calendar/events/%C0%AF", true },
		{ "/api//", true },
		{ "/api/v1/test/whoami%00", false },
		{ "/api/v1/x%00y", false },
		{ "/api/../../etc/passwd", false },
		{ "/api/v1/../../../x", false },
	};
	char *ct;
	long st;

	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		st = raw_get(paths[i].target, &ct);
		ck_assert_msg(st >= 400 && st < 500, "%s: status %ld", paths[i].target, st);
		/* the host's answers and nginx's refusals alike */
		ck_assert_msg(ct && !strcmp(ct, "application/problem+json"),
				"%s: content type %s", paths[i].target, ct ? ct : "(none)");
		(void)paths[i].host;
	}
	assert_healthy();
}
END_TEST

START_TEST(other_methods_405_head_is_get)
{
	static const char *methods[] = { "HEAD", "OPTIONS", "DELETE", "PUT", "PATCH" };
	struct h_resp *r;

	for (size_t i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
		r = h_request(methods[i], ECHO, any_token(), NULL);
		if (!strcmp(methods[i], "HEAD")) {
			ck_assert_msg(r->status == 405, "HEAD: %ld", r->status);
			ck_assert_msg(r->content_type && !strcmp(r->content_type,
					"application/problem+json"), "HEAD: %s",
					r->content_type ? r->content_type : "(none)");
		} else {
			h_assert_problem(r, 405, "METHOD_NOT_ALLOWED");
		}
		/* RFC 9110 15.5.6: a 405 says which methods the path has */
		ck_assert_msg(h_header(r, "Allow") && !strcmp(h_header(r, "Allow"), "POST"),
				"%s echo: Allow %s", methods[i],
				h_header(r, "Allow") ? h_header(r, "Allow") : "(none)");
		/* GET-only route: a method mismatch before authentication */
		if (strcmp(methods[i], "HEAD")) {
			r = h_request(methods[i], WHOAMI, NULL, NULL);
			ck_assert_msg(r->status == 405, "%s whoami: %ld", methods[i], r->status);
			ck_assert_msg(h_header(r, "Allow") &&
					!strcmp(h_header(r, "Allow"), "GET, HEAD"),
					"%s whoami: Allow %s", methods[i],
					h_header(r, "Allow") ? h_header(r, "Allow") : "(none)");
		}
	}
	/* a path of several routes (GET, PATCH on /{id}; GET, POST on the list):
	 * all of them, HEAD with GET; a path param does not change the set */
	r = h_request("DELETE", "/api/v1/agent/calendar/events/not-a-uuid", NULL, NULL);
	h_assert_problem(r, 405, "METHOD_NOT_ALLOWED");
	ck_assert_msg(h_header(r, "Allow") && !strcmp(h_header(r, "Allow"),
			"GET, HEAD, PATCH"), "DELETE event: Allow %s",
			h_header(r, "Allow") ? h_header(r, "Allow") : "(none)");
	r = h_request("PUT", "/api/v1/agent/calendar/events", NULL, "{}");
	h_assert_problem(r, 405, "METHOD_NOT_ALLOWED");
	ck_assert_msg(h_header(r, "Allow") && !strcmp(h_header(r, "Allow"),
			"GET, HEAD, POST"), "PUT events: Allow %s",
			h_header(r, "Allow") ? h_header(r, "Allow") : "(none)");
	/* a 404 has none */
	r = h_request("DELETE", "/api/v1/agent/calendar/nothing", NULL, NULL);
	h_assert_problem(r, 404, "ROUTE_NOT_FOUND");
	ck_assert_ptr_null(h_header(r, "Allow"));
	/* HEAD of a GET route is that GET without the body (RFC 9110 9.3.2) */
	r = h_request("HEAD", WHOAMI, NULL, NULL);
	ck_assert_msg(r->status == 401, "HEAD whoami, no token: %ld", r->status);
	r = h_request("HEAD", WHOAMI, any_token(), NULL);
	ck_assert_msg(r->status == 200, "HEAD whoami: %ld", r->status);
	ck_assert_msg(r->content_type && strstr(r->content_type, "application/json"), "HEAD: %s",
			r->content_type ? r->content_type : "(none)");
	assert_healthy();
}
END_TEST

START_TEST(garbage_authorization_401)
{
	const char *hdrs[] = { "Authorization: Bearer ", "Authorization: Basic xyz",
		"Authorization: Bearer", "Authorization: bearer a.b.c",
		"Authorization: Bearer ....", "Authorization: Bearer \x01\x02.\x03.\x04",
		"Authorization: Bearer eyJhbGciOiJub25lIn0.e30.",
		"Authorization: Bearer e30.e30.e30", NULL };
	struct h_req_opts o = { 0 };
	const char *one[2] = { NULL, NULL };
	struct h_resp *r;

	o.headers = one;
	for (int i = 0; hdrs[i]; i++) {
		one[0] = hdrs[i];
		h_assert_problem(h_request_opts("GET", WHOAMI, NULL, &o), 401,
				"UNAUTHENTICATED");
	}
	/* 7.9 KiB token reaches the host; 10 KiB passes nginx's 8 KiB line
	 * buffer only where it was raised: 401 from the host or 4xx from nginx */
	h_assert_problem(h_get(WHOAMI, repeat('a', 7900)), 401, "UNAUTHENTICATED");
	h_assert_problem(h_get(WHOAMI, h_sprintf("%s.%s.%s", repeat('e', 3000),
			repeat('f', 3000), repeat('g', 1800))), 401, "UNAUTHENTICATED");
	r = h_get(WHOAMI, repeat('a', 10 * 1024));
	if (r->status == 401)
		h_assert_problem(r, 401, "UNAUTHENTICATED");
	else
		assert_4xx(r, "10 KiB token");
	assert_healthy();
}
END_TEST

START_TEST(host_alive_after_robustness)
{
	const char *pf = h_sprintf("%s/pids/api.pid", h_env("PIN_DEV_DIR"));
	FILE *f = fopen(pf, "r");
	long pid = 0;

	assert_healthy();
	ck_assert_msg(f != NULL, "no pid file %s", pf);
	ck_assert_int_eq(fscanf(f, "%ld", &pid), 1);
	fclose(f);
	ck_assert_msg(pid > 0 && kill((pid_t)pid, 0) == 0, "API host %ld is gone", pid);
	ck_assert_msg(h_get(WHOAMI, any_token())->status == 200, "whoami after");
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
	tcase_add_test(tc, www_authenticate_on_401);
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
	tcase_add_test(tc, sql_error_values_not_logged);
	tcase_add_test(tc, huge_response_header_500);
	tcase_add_test(tc, malformed_json_400);
	tcase_add_test(tc, wrong_content_type_400);
	tcase_add_test(tc, body_over_64k_413);
	tcase_add_test(tc, body_just_under_64k_ok);
	suite_add_tcase(s, tc);

	tc = h_tcase("robustness", 60);
	tcase_add_test(tc, huge_query_string_4xx);
	tcase_add_test(tc, invalid_utf8_body_400);
	tcase_add_test(tc, deeply_nested_json_400);
	tcase_add_test(tc, json_with_nul_400);
	tcase_add_test(tc, odd_json_values_400);
	tcase_add_test(tc, text_plain_json_body_400);
	tcase_add_test(tc, many_headers);
	tcase_add_test(tc, odd_paths_4xx);
	tcase_add_test(tc, other_methods_405_head_is_get);
	tcase_add_test(tc, garbage_authorization_401);
	tcase_add_test(tc, host_alive_after_robustness);
	suite_add_tcase(s, tc);

	tc = h_tcase("rate-limit", 60);
	tcase_add_test(tc, public_rate_limit_429);
	suite_add_tcase(s, tc);
	return s;
}
