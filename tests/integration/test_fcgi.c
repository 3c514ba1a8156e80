/*
 * test_fcgi.c -- the API host's own FastCGI server (api_server = loop,
 * host/api/fcgi_loop.c) spoken to directly, the way nginx and other FastCGI
 * clients may speak: kept-alive connections serving requests in turn,
 * streams split into many records and written byte by byte, a response
 * longer than one record, the management and refusal records of the
 * protocol, broken peers, and a stop with a request in hand and an idle
 * kept connection.
 *
 * Each test starts its own API host (the stack's plugins, 2 workers) on its
 * own socket; every other suite reaches the stack's API host through nginx.
 * The first three also run against libfcgi's threaded server (api_server =
 * threads, the fallback); the protocol edges and the stop are the loop's.
 */
#include "config.h"

#include <errno.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

enum { BEGIN = 1, ABORT = 2, END = 3, PARAMS = 4, STDIN = 5, STDOUT = 6,
	GET_VALUES = 9, GET_VALUES_RESULT = 10, UNKNOWN_TYPE = 11 };

static pid_t host_pid = -1;

static const char *sock_path(void)
{
	return h_sprintf("%s/fcgi-test.sock", h_env("PIN_DEV_DIR"));
}

/* server: "loop" (the default) or "threads" (libfcgi, the fallback) */
static void host_start_as(const char *server)
{
	const char *args[] = { "--threads", "2", "--api-server", server, NULL };

	host_pid = h_fcgi_host_start(sock_path(), "api-fcgi", args);
}

static void host_start(void)
{
	host_start_as("loop");
}

/* the loop tests run against both servers: _i 0 loop, 1 threads */
static const char *const servers[] = { "loop", "threads" };

/* the exit status once the host exits (-1: not within timeout_ms, then
 * killed) */
static int host_wait(int timeout_ms)
{
	int status = 0;
	int64_t end = h_now_ms() + timeout_ms;
	pid_t w = 0;

	if (host_pid <= 0)
		return -1;
	while ((w = waitpid(host_pid, &status, WNOHANG)) == 0 && h_now_ms() < end)
		h_sleep_ms(50);
	if (w == 0) {
		kill(host_pid, SIGKILL);
		waitpid(host_pid, &status, 0);
		status = -1;
	}
	host_pid = -1;
	unlink(h_sprintf("%s/pids/api-fcgi.pid", h_env("PIN_DEV_DIR")));
	return status;
}

/* SIGTERM, then host_wait */
static int host_stop(int timeout_ms)
{
	if (host_pid > 0)
		kill(host_pid, SIGTERM);
	return host_wait(timeout_ms);
}

static int must_connect(void)
{
	int fd = h_fcgi_connect(sock_path());

	ck_assert_msg(fd >= 0, "cannot connect to %s: %s", sock_path(), strerror(errno));
	return fd;
}

/* the host closed fd within ms (EOF, nothing else read) */
static bool closed_by_host(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	/* EOF (or a reset: the host closed with our bytes unread) */
	return poll(&p, 1, ms) == 1 && read(fd, &c, 1) <= 0;
}

static bool still_open(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 0;
}

static void assert_healthy(void)
{
	struct h_resp *r = h_fcgi(sock_path(), "GET", "/healthz", NULL, NULL);

	ck_assert_msg(r->status == 200, "healthz: %ld %s", r->status, r->body);
	ck_assert_msg(kill(host_pid, 0) == 0, "the host is gone");
}

/* a sample of the host's /metrics (exact text before the value); -1 absent */
static double metric(const char *sample)
{
	double v = h_fcgi_metric(sock_path(), sample);

	return isnan(v) ? -1 : v;
}

/* ---- kept-alive connections ------------------------------------------------ */

START_TEST(keep_conn_serves_requests_in_turn)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	char *tok = h_token("agent", a.id, a.tenant, "calendar.events.view",
			"calendar.events.manage");
	static const unsigned char begin[8] = { 0, 1, 1, 0, 0, 0, 0, 0 };
	unsigned char params[8192];
	struct h_resp *r;
	size_t pn;
	int fd, fd2, nout, proto;

	host_start_as(servers[_i]);
	fd = must_connect();
	r = h_fcgi_on(fd, 1, true, "GET", "/healthz", NULL, NULL);
	ck_assert_int_eq(r->status, 200);
	ck_assert_str_eq(r->body, "{\"status\":\"ok\"}");
	r = h_fcgi_on(fd, 2, true, "GET", "/api/v1/no/such/route", NULL, NULL);
	h_assert_problem(r, 404, "ROUTE_NOT_FOUND");
	r = h_fcgi_on(fd, 3, true, "POST", "/api/v1/agent/calendar/events", tok,
			"{\"title\": ");
	h_assert_problem(r, 400, "MALFORMED_REQUEST");
	r = h_fcgi_on(fd, 1, true, "GET", "/api/v1/agent/calendar/events?from=2026-12-01T00:00:00Z"
			"&to=2026-12-08T00:00:00Z", tok, NULL);
	ck_assert_msg(r->status == 200 && h_jget(r->json, "items"),
			"list on the kept connection: %ld %s", r->status, r->body);
	/* a GET whose empty STDIN record comes a while after its PARAMS (a
	 * peer that writes its records one by one): it is answered (by the
	 * threads server before that record, END_REQUEST after it; by the
	 * loop after it) and the connection then serves the next request */
	pn = h_fcgi_params(params, sizeof params, "GET", "/healthz", NULL, NULL);
	ck_assert(h_fcgi_rec(fd, BEGIN, 4, begin, 8) && h_fcgi_rec(fd, PARAMS, 4, params, pn) &&
		  h_fcgi_rec(fd, PARAMS, 4, NULL, 0));
	h_sleep_ms(300);
	ck_assert(h_fcgi_rec(fd, STDIN, 4, NULL, 0));
	r = h_fcgi_response(fd, 4, &nout, &proto);
	ck_assert_int_eq(r->status, 200);
	r = h_fcgi_on(fd, 5, true, "GET", "/healthz", NULL, NULL);
	ck_assert_msg(r->status == 200, "the request after a late STDIN end: %ld", r->status);
	ck_assert_msg(still_open(fd, 300), "the host closed a kept-alive connection");
	if (_i == 0) {
		/* the loop's gauges: this kept connection + the one asking */
		ck_assert_msg(metric("pin_api_connections") == 2, "connections %g",
				metric("pin_api_connections"));
		ck_assert_msg(metric("pin_api_requests_queued") == 0, "queued %g",
				metric("pin_api_requests_queued"));
	}

	/* without FCGI_KEEP_CONN the host closes the connection after the answer */
	fd2 = must_connect();
	r = h_fcgi_on(fd2, 1, false, "GET", "/healthz", NULL, NULL);
	ck_assert_int_eq(r->status, 200);
	ck_assert_msg(closed_by_host(fd2, 5000), "no close without FCGI_KEEP_CONN");
	close(fd2);
	close(fd);
	ck_assert_int_eq(host_stop(20000), 0);
}
END_TEST

/* ---- streams in pieces ----------------------------------------------------- */

/* the request's records with PARAMS cut into 3 records and STDIN into
 * 700-byte records; *n its length */
static unsigned char *split_request(const char *token, const char *body, size_t *n)
{
	static const unsigned char begin[8] = { 0, 1, 1, 0, 0, 0, 0, 0 };
	unsigned char params[8192], *out;
	size_t pn = h_fcgi_params(params, sizeof params, "POST",
			"/api/v1/agent/calendar/events", token, body);
	size_t bl = strlen(body), at = 0;

	out = malloc(pn + bl + 64 * 8 + bl / 700 * 8 + 64);
	ck_assert_ptr_nonnull(out);
	at += h_fcgi_rec_bytes(out + at, BEGIN, 7, begin, 8);
	at += h_fcgi_rec_bytes(out + at, PARAMS, 7, params, 10);
	at += h_fcgi_rec_bytes(out + at, PARAMS, 7, params + 10, 50);
	at += h_fcgi_rec_bytes(out + at, PARAMS, 7, params + 60, pn - 60);
	at += h_fcgi_rec_bytes(out + at, PARAMS, 7, NULL, 0);
	for (size_t off = 0; off < bl; off += 700)
		at += h_fcgi_rec_bytes(out + at, STDIN, 7, body + off,
				bl - off < 700 ? bl - off : 700);
	at += h_fcgi_rec_bytes(out + at, STDIN, 7, NULL, 0);
	*n = at;
	return out;
}

START_TEST(records_split_and_written_byte_by_byte)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	char *tok = h_token("agent", a.id, a.tenant, "calendar.events.manage");
	char title[3001];
	const char *body;
	unsigned char *req;
	struct h_resp *whole, *split;
	size_t n;
	int fd, nout, proto;

	memset(title, 'x', 3000);
	title[3000] = '\0';
	/* parses as JSON, fails validation: 422 proves every byte arrived */
	body = h_sprintf("{\"title\":\"%s\",\"kind\":\"NoSuchKind\","
			"\"startAt\":\"2026-12-10T10:00:00Z\",\"endAt\":\"2026-12-10T11:00:00Z\"}",
			title);
	host_start_as(servers[_i]);
	fd = must_connect();
	whole = h_fcgi_on(fd, 1, true, "POST", "/api/v1/agent/calendar/events", tok, body);
	ck_assert_msg(whole->status == 422, "whole: %ld %s", whole->status, whole->body);

	req = split_request(tok, body, &n);
	for (size_t i = 0; i < n; i++) {
		ck_assert(h_fcgi_write(fd, req + i, 1));
		if (i % 64 == 63)
			h_sleep_ms(2);
	}
	free(req);
	split = h_fcgi_response(fd, 7, &nout, &proto);
	ck_assert_int_eq(proto, 0);
	ck_assert_msg(split->status == 422, "split: %ld %s", split->status, split->body);
	ck_assert_str_eq(h_jstr(split->json, "code"), h_jstr(whole->json, "code"));
	ck_assert_str_eq(json_object_to_json_string(h_jget(split->json, "errors")),
			json_object_to_json_string(h_jget(whole->json, "errors")));

	/* the same bytes one short: the JSON does not end (on a new
	 * connection: libfcgi closes one whose STDIN end record came after
	 * the handler finished reading the body -- the loop server reads the
	 * whole request first and keeps it) */
	if (_i == 0)
		ck_assert_msg(still_open(fd, 200), "the loop server closed the connection");
	close(fd);
	fd = must_connect();
	split = h_fcgi_on(fd, 8, true, "POST", "/api/v1/agent/calendar/events", tok,
			h_sprintf("%.*s", (int)strlen(body) - 1, body));
	h_assert_problem(split, 400, "MALFORMED_REQUEST");
	close(fd);
	ck_assert_int_eq(host_stop(20000), 0);
}
END_TEST

/* ---- a response longer than one record ------------------------------------- */

START_TEST(response_longer_than_one_record)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	static const unsigned char begin[8] = { 0, 1, 1, 0, 0, 0, 0, 0 };
	unsigned char params[8192];
	char *body = h_sprintf("{\"kind\":\"Showing\",\"timeZone\":\"UTC\",\"windows\":"
			"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"18:00\"}],"
			"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":60,"
			"\"autoConfirm\":true,\"cancellationCutoffMinutes\":60}",
			h_date_in(2), h_date_in(13));
	struct h_resp *r = h_post("/api/v1/agent/calendar/slots/batches", a.token, body);
	json_object *items;
	size_t pn;
	int fd, nout, proto;

	ck_assert_msg(r->status == 201, "publish: %ld %s", r->status, r->body);
	/* 500-character locations: a page of 100 is ~90 KB, over one record */
	h_sql("UPDATE calendar.availability_slots SET location = repeat('x', 500) "
	      "WHERE owner_user_id = $1", a.id);
	host_start_as(servers[_i]);
	fd = must_connect();
	pn = h_fcgi_params(params, sizeof params, "GET",
			h_sprintf("/api/public/calendar/slots?agentUserId=%s&limit=100", a.id),
			NULL, NULL);
	ck_assert(h_fcgi_rec(fd, BEGIN, 300, begin, 8) && h_fcgi_rec(fd, PARAMS, 300, params, pn) &&
		  h_fcgi_rec(fd, PARAMS, 300, NULL, 0) && h_fcgi_rec(fd, STDIN, 300, NULL, 0));
	r = h_fcgi_response(fd, 300, &nout, &proto);
	ck_assert_msg(r->status == 200, "showcase: %ld %.300s", r->status, r->body);
	ck_assert_int_eq(proto, 0);
	ck_assert_msg(r->body_len > 65535, "page of %zu bytes", r->body_len);
	ck_assert_msg(nout >= 2, "%zu bytes in %d STDOUT records", r->body_len, nout);
	items = h_jget(r->json, "items");
	ck_assert_msg(items && json_object_array_length(items) == 100,
			"the page does not parse into 100 items");
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(items, 99), "location"),
			h_sql_scalar("SELECT repeat('x', 500)"));
	/* and the connection serves the next request */
	r = h_fcgi_on(fd, 301, true, "GET", "/healthz", NULL, NULL);
	ck_assert_int_eq(r->status, 200);
	close(fd);
	ck_assert_int_eq(host_stop(20000), 0);
}
END_TEST

/* ---- management records and refusals --------------------------------------- */

START_TEST(management_records_and_refusals)
{
	static const unsigned char begin_keep[8] = { 0, 1, 1, 0, 0, 0, 0, 0 };
	static const unsigned char authorizer[8] = { 0, 2, 1, 0, 0, 0, 0, 0 };
	static const unsigned char ask[] = "\x0f\x00" "FCGI_MPXS_CONNS";
	struct h_fcgi_record rec = { 0 };
	unsigned char params[8192];
	size_t pn = h_fcgi_params(params, sizeof params, "GET", "/healthz", NULL, NULL);
	struct h_resp *r;
	int fd, nout, proto;

	host_start();
	fd = must_connect();
	/* FCGI_GET_VALUES: one request at a time per connection */
	ck_assert(h_fcgi_rec(fd, GET_VALUES, 0, ask, sizeof ask - 1));
	ck_assert(h_fcgi_read_rec(fd, 5000, &rec));
	ck_assert_int_eq(rec.type, GET_VALUES_RESULT);
	ck_assert_int_eq(rec.id, 0);
	ck_assert_uint_eq(rec.len, 2 + 15 + 1);
	ck_assert_mem_eq(rec.body, "\x0f\x01" "FCGI_MPXS_CONNS" "0", rec.len);

	/* a management record of an unknown type */
	ck_assert(h_fcgi_rec(fd, 42, 0, "x", 1));
	ck_assert(h_fcgi_read_rec(fd, 5000, &rec));
	ck_assert_int_eq(rec.type, UNKNOWN_TYPE);
	ck_assert_uint_eq(rec.len, 8);
	ck_assert_int_eq((unsigned char)rec.body[0], 42);

	/* a role other than responder */
	ck_assert(h_fcgi_rec(fd, BEGIN, 5, authorizer, 8));
	ck_assert(h_fcgi_read_rec(fd, 5000, &rec));
	ck_assert_int_eq(rec.type, END);
	ck_assert_int_eq(rec.id, 5);
	ck_assert_int_eq((unsigned char)rec.body[4], 3);   /* FCGI_UNKNOWN_ROLE */

	/* a second request while the first is being read: FCGI_CANT_MPX_CONN,
	 * and the first is still answered */
	ck_assert(h_fcgi_rec(fd, BEGIN, 1, begin_keep, 8));
	ck_assert(h_fcgi_rec(fd, PARAMS, 1, params, pn));
	ck_assert(h_fcgi_rec(fd, BEGIN, 2, begin_keep, 8));
	ck_assert(h_fcgi_read_rec(fd, 5000, &rec));
	ck_assert_int_eq(rec.type, END);
	ck_assert_int_eq(rec.id, 2);
	ck_assert_int_eq((unsigned char)rec.body[4], 1);   /* FCGI_CANT_MPX_CONN */
	ck_assert(h_fcgi_rec(fd, PARAMS, 1, NULL, 0) && h_fcgi_rec(fd, STDIN, 1, NULL, 0));
	r = h_fcgi_response(fd, 1, &nout, &proto);
	ck_assert_int_eq(r->status, 200);

	/* FCGI_ABORT_REQUEST of a request still being read: it ends, no output */
	ck_assert(h_fcgi_rec(fd, BEGIN, 3, begin_keep, 8));
	ck_assert(h_fcgi_rec(fd, PARAMS, 3, params, pn) && h_fcgi_rec(fd, PARAMS, 3, NULL, 0));
	ck_assert(h_fcgi_rec(fd, ABORT, 3, NULL, 0));
	r = h_fcgi_response(fd, 3, &nout, &proto);
	ck_assert_int_eq(proto, 0);
	ck_assert_int_eq(nout, 0);
	ck_assert_int_eq(r->status, 0);
	/* the connection goes on */
	r = h_fcgi_on(fd, 4, true, "GET", "/healthz", NULL, NULL);
	ck_assert_int_eq(r->status, 200);
	free(rec.body);
	close(fd);
	ck_assert_int_eq(host_stop(20000), 0);
}
END_TEST

/* ---- broken peers ---------------------------------------------------------- */

START_TEST(broken_peers_leave_the_host_serving)
{
	static const unsigned char begin[8] = { 0, 1, 1, 0, 0, 0, 0, 0 };
	static const unsigned char bad_version[16] = { 9, 1, 0, 1, 0, 8, 0, 0 };
	unsigned char params[8192], *big;
	size_t pn = h_fcgi_params(params, sizeof params, "GET",
			"/api/public/calendar/slots?agentUserId=b0000000-0000-4000-8000-00000000f0f0&limit=100",
			NULL, NULL);
	int fd, idle[40];

	host_start();
	/* gone half-way through PARAMS */
	fd = must_connect();
	ck_assert(h_fcgi_rec(fd, BEGIN, 1, begin, 8));
	ck_assert(h_fcgi_write(fd, "\x01\x04\x00\x01\x00\x40\x00\x00" "abc", 11));
	close(fd);
	/* not FastCGI at all: the host hangs up */
	fd = must_connect();
	ck_assert(h_fcgi_write(fd, bad_version, sizeof bad_version));
	ck_assert_msg(closed_by_host(fd, 5000), "a record of version 9 was taken");
	close(fd);
	/* PARAMS without end: the host hangs up past its 64 KiB cap */
	fd = must_connect();
	big = calloc(1, 60000);
	ck_assert_ptr_nonnull(big);
	ck_assert(h_fcgi_rec(fd, BEGIN, 1, begin, 8));
	for (int i = 0; i < 6; i++)
		if (!h_fcgi_rec(fd, PARAMS, 1, big, 60000))
			break;                         /* already closed: fine */
	free(big);
	ck_assert_msg(closed_by_host(fd, 5000), "PARAMS past the cap were taken");
	close(fd);
	/* a whole request, then gone before the answer */
	for (int i = 0; i < 5; i++) {
		fd = must_connect();
		ck_assert(h_fcgi_rec(fd, BEGIN, 1, begin, 8) && h_fcgi_rec(fd, PARAMS, 1, params, pn) &&
			  h_fcgi_rec(fd, PARAMS, 1, NULL, 0) && h_fcgi_rec(fd, STDIN, 1, NULL, 0));
		close(fd);
	}
	/* many idle connections */
	for (int i = 0; i < 40; i++)
		idle[i] = must_connect();
	assert_healthy();
	for (int i = 0; i < 40; i++)
		close(idle[i]);
	assert_healthy();
	/* every connection above is gone from the host: only the asking one */
	ck_assert_msg(H_WAIT_UNTIL(metric("pin_api_connections") == 1, 5000),
			"%g connections left", metric("pin_api_connections"));
	ck_assert_int_eq(host_stop(20000), 0);
}
END_TEST

/* ---- stop ------------------------------------------------------------------ */

START_TEST(stop_answers_the_request_in_hand)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	char *tok = h_token("agent", a.id, a.tenant, "calendar.events.view");
	struct h_resp *r;
	int busy_fd, idle_fd, nout, proto, status, w;

	host_start();
	idle_fd = must_connect();
	r = h_fcgi_on(idle_fd, 1, true, "GET", "/healthz", NULL, NULL);
	ck_assert_int_eq(r->status, 200);
	/* the list waits for the events table while this session holds it */
	h_sql("BEGIN");
	h_sql("LOCK TABLE calendar.calendar_events IN ACCESS EXCLUSIVE MODE");
	busy_fd = must_connect();
	ck_assert(h_fcgi_send(busy_fd, 1, true, "GET",
			"/api/v1/agent/calendar/events?from=2026-12-01T00:00:00Z"
			"&to=2026-12-08T00:00:00Z", tok, NULL));
	h_sleep_ms(500);
	kill(host_pid, SIGTERM);
	h_sleep_ms(1000);
	ck_assert_msg(waitpid(host_pid, &w, WNOHANG) == 0,
			"the host left with a request in hand");
	h_sql("ROLLBACK");
	/* answered after the stop began, then the connection is closed */
	r = h_fcgi_response(busy_fd, 1, &nout, &proto);
	ck_assert_msg(r->status == 200 && h_jget(r->json, "items"),
			"the request in hand: %ld %s", r->status, r->body);
	ck_assert_int_eq(proto, 0);
	ck_assert_msg(closed_by_host(busy_fd, 5000), "kept open after the stop");
	/* and the idle kept connection does not hold the stop */
	status = host_wait(10000);
	ck_assert_msg(status >= 0, "the host did not stop within 10 s");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			"exit status %d", status);
	close(busy_fd);
	close(idle_fd);
	ck_assert_msg(h_fcgi_connect(sock_path()) < 0, "the socket still accepts");
}
END_TEST

/* ---- hostile and broken peers: deadlines, the connection cap, the drain ---- */

/* the host's settings for one test (PIN_<KEY> overrides the config file) */
static void host_start_with(const char *const *kv)
{
	for (const char *const *p = kv; *p; p += 2)
		setenv(p[0], p[1], 1);
	host_start();
	for (const char *const *p = kv; *p; p += 2)
		unsetenv(p[0]);
}

START_TEST(silent_and_slow_connections_closed_at_their_deadline)
{
	static const char *const kv[] = { "PIN_API_READ_TIMEOUT_MS", "1500",
		"PIN_API_IDLE_TIMEOUT_MS", "4000", NULL };
	static const unsigned char begin[8] = { 1, 1, 0, 1, 0, 8, 0, 0 };
	double rd0 = 0, id0 = 0;
	int64_t t0, t_partial = -1, t_slow = -1;
	int partial, slow, idle, kept, sent = 0;
	struct h_resp *r;

	host_start_with(kv);
	/* counters before: another test's host is gone, this one starts at 0 */
	rd0 = fmax(metric("pin_api_connections_closed_total{reason=\"read_timeout\"}"), 0);
	id0 = fmax(metric("pin_api_connections_closed_total{reason=\"idle_timeout\"}"), 0);
	t0 = h_now_ms();
	partial = must_connect();                 /* 3 bytes of a header, then silence */
	ck_assert(h_fcgi_write(partial, begin, 3));
	slow = must_connect();                    /* a byte every 250 ms, never whole */
	idle = must_connect();                    /* nothing at all */
	kept = must_connect();                    /* a request, then kept idle */
	r = h_fcgi_on(kept, 1, true, "GET", "/healthz", NULL, NULL);
	ck_assert_int_eq(r->status, 200);
	while (h_now_ms() - t0 < 8000 && (t_partial < 0 || t_slow < 0)) {
		if (t_slow < 0) {
			if (closed_by_host(slow, 0) ||
			    !h_fcgi_write(slow, begin + sent % 8, 1))
				t_slow = h_now_ms() - t0;
			sent++;
		}
		if (t_partial < 0 && closed_by_host(partial, 0))
			t_partial = h_now_ms() - t0;
		h_sleep_ms(250);
	}
	/* the read deadline counts from a request's first byte, whatever
	 * trickles in after it; checked once a second */
	ck_assert_msg(t_partial >= 1400 && t_partial < 6000,
			"a partial request was closed after %lld ms (deadline 1500)",
			(long long)t_partial);
	ck_assert_msg(t_slow >= 1400 && t_slow < 6000,
			"a trickling request was closed after %lld ms (deadline 1500)",
			(long long)t_slow);
	/* idle ones live longer (4 s) than a request may take (1.5 s) */
	ck_assert_msg(h_now_ms() - t0 >= 3500 || still_open(idle, 0),
			"an idle connection was closed before its deadline");
	ck_assert_msg(closed_by_host(idle, 8000), "an idle connection was never closed");
	ck_assert_msg(closed_by_host(kept, 8000), "a kept-alive idle connection was never closed");
	ck_assert_msg(h_now_ms() - t0 >= 3900, "idle connections closed after %lld ms (deadline 4000)",
			(long long)(h_now_ms() - t0));
	assert_healthy();
	ck_assert_msg(metric("pin_api_connections_closed_total{reason=\"read_timeout\"}") - rd0 == 2,
			"read_timeout closes %g",
			metric("pin_api_connections_closed_total{reason=\"read_timeout\"}") - rd0);
	ck_assert_msg(metric("pin_api_connections_closed_total{reason=\"idle_timeout\"}") - id0 == 2,
			"idle_timeout closes %g",
			metric("pin_api_connections_closed_total{reason=\"idle_timeout\"}") - id0);
	close(partial);
	close(slow);
	close(idle);
	close(kept);
	ck_assert_int_eq(host_stop(20000), 0);
}
END_TEST

START_TEST(connection_cap_refuses_the_next_and_counts_it)
{
	static const char *const kv[] = { "PIN_API_MAX_CONNECTIONS", "6", NULL };
	int idle[6], open_n = 0;
	struct h_resp *r;

	host_start_with(kv);
	/* the start's own probe connection is gone: only the asking one */
	ck_assert_msg(H_WAIT_UNTIL(metric("pin_api_connections") == 1, 5000),
			"%g connections open at start", metric("pin_api_connections"));
	h_sleep_ms(200);                          /* the asking one is gone too */
	for (int i = 0; i < 6; i++)
		idle[i] = must_connect();
	h_sleep_ms(500);                          /* accepted (or refused) by now */
	for (int i = 0; i < 6; i++)
		open_n += still_open(idle[i], 0);
	ck_assert_msg(open_n == 6, "%d of 6 connections under the cap kept", open_n);
	/* the 7th: accepted and closed at once, no answer */
	r = h_fcgi(sock_path(), "GET", "/healthz", NULL, NULL);
	ck_assert_msg(r->status == 0, "a connection past the cap was served: %ld", r->status);
	ck_assert_msg(kill(host_pid, 0) == 0, "the host is gone");
	/* one leaves: the next is served again, and the refusal was counted */
	close(idle[0]);
	ck_assert_msg(H_WAIT_UNTIL(h_fcgi(sock_path(), "GET", "/healthz", NULL, NULL)->status == 200,
			5000), "no connection served after one left");
	/* (the served connection is freed just after its answer: a connection
	 * opened at that instant can still be the 7th and be refused) */
	ck_assert_msg(H_WAIT_UNTIL((r = h_fcgi(sock_path(), "GET", "/metrics", NULL,
			NULL))->status == 200 && h_metric_in(r->body,
			"pin_api_connections_refused_total") >= 1, 5000),
			"refusals not counted (last answer %ld)", r->status);
	for (int i = 1; i < 6; i++)
		close(idle[i]);
	ck_assert_int_eq(host_stop(20000), 0);
}
END_TEST

/* STDIN records of 32 KiB written until total bytes are out or the host
 * answers or hangs up; the bytes the host took */
static size_t stdin_flood(int fd, size_t total)
{
	size_t rlen = 8 + 32768, off = 0, sent = 0;
	unsigned char *rec = calloc(1, rlen);

	ck_assert_ptr_nonnull(rec);
	memset(rec + 8, '{', 32768);
	h_fcgi_rec_bytes(rec, STDIN, 1, rec + 8, 32768);
	while (sent < total) {
		struct pollfd p = { .fd = fd, .events = POLLIN | POLLOUT };
		ssize_t k;

		if (poll(&p, 1, 5000) <= 0 || (p.revents & (POLLIN | POLLHUP | POLLERR)))
			break;
		k = send(fd, rec + off, rlen - off, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (k < 0 && (errno == EAGAIN || errno == EINTR))
			continue;
		if (k <= 0)
			break;
		sent += (size_t)k;
		off = (off + (size_t)k) % rlen;
	}
	free(rec);
	return sent;
}

START_TEST(oversized_body_never_reaches_a_handler)
{
	static const unsigned char begin[8] = { 0, 1, 1, 0, 0, 0, 0, 0 };
	struct h_agent a = h_agent_new(NULL, NULL);
	char *tok = h_token("agent", a.id, a.tenant, "calendar.events.view",
			"calendar.events.manage");
	unsigned char params[8192];
	/* no Content-Length: nothing but the STDIN stream says how long (the
	 * route would answer 400 or 422 to what it got; 413 is the pipeline's) */
	size_t pn = h_fcgi_params(params, sizeof params, "POST",
			"/api/v1/agent/calendar/events", tok, NULL);
	struct h_resp *r;
	size_t took;
	int fd, nout, proto;
	double cut0;

	host_start();
	cut0 = fmax(metric("pin_api_connections_closed_total{reason=\"body_too_large\"}"), 0);
	/* 96 KiB of STDIN, within what the host drains: 413, the connection
	 * stays for the next request */
	fd = must_connect();
	ck_assert(h_fcgi_rec(fd, BEGIN, 1, begin, 8) && h_fcgi_rec(fd, PARAMS, 1, params, pn) &&
		  h_fcgi_rec(fd, PARAMS, 1, NULL, 0));
	took = stdin_flood(fd, 3 * (8 + 32768));
	ck_assert_uint_eq(took, 3 * (8 + 32768));
	ck_assert(h_fcgi_rec(fd, STDIN, 1, NULL, 0));
	r = h_fcgi_response(fd, 1, &nout, &proto);
	h_assert_problem(r, 413, "PAYLOAD_TOO_LARGE");
	r = h_fcgi_on(fd, 2, true, "GET", "/healthz", NULL, NULL);
	ck_assert_msg(r->status == 200, "the connection after a 413: %ld", r->status);
	close(fd);
	/* an endless STDIN: the host stops reading past its drain bound,
	 * answers 413 and hangs up */
	fd = must_connect();
	ck_assert(h_fcgi_rec(fd, BEGIN, 1, begin, 8) && h_fcgi_rec(fd, PARAMS, 1, params, pn) &&
		  h_fcgi_rec(fd, PARAMS, 1, NULL, 0));
	took = stdin_flood(fd, (size_t)64 << 20);
	ck_assert_msg(took < (size_t)8 << 20, "the host read %zu bytes of STDIN", took);
	r = h_fcgi_response(fd, 1, &nout, &proto);
	h_assert_problem(r, 413, "PAYLOAD_TOO_LARGE");
	ck_assert_msg(closed_by_host(fd, 5000), "kept open after the drain bound");
	close(fd);
	ck_assert_msg(metric("pin_api_connections_closed_total{reason=\"body_too_large\"}") - cut0 == 1,
			"body_too_large closes %g",
			metric("pin_api_connections_closed_total{reason=\"body_too_large\"}") - cut0);
	assert_healthy();
	ck_assert_int_eq(host_stop(20000), 0);
}
END_TEST

/* a TCP port nothing listens on now (the kernel's pick) */
static int free_tcp_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof a;
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	ck_assert(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
		  getsockname(fd, (struct sockaddr *)&a, &al) == 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

static bool tcp_accepts(int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0;

	if (fd >= 0)
		close(fd);
	return ok;
}

/* an API host on a TCP listen; its exit status when it stops by itself
 * within 20 s, else -1 once it accepted on port (then it is stopped) */
static int tcp_host(const char *listen, int port)
{
	const char *const extra[] = { "--listen", listen, NULL };
	pid_t pid = h_spawn_host("api", h_env("PIN_API_PLUGINS"), 0, extra);
	int status = 0, rc = -2;
	int64_t end = h_now_ms() + 20000;

	while (h_now_ms() < end) {
		if (waitpid(pid, &status, WNOHANG) == pid) {
			rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128;
			break;
		}
		if (tcp_accepts(port)) {
			rc = -1;
			break;
		}
		h_sleep_ms(100);
	}
	if (rc < 0) {
		kill(pid, SIGTERM);
		waitpid(pid, &status, 0);
	}
	return rc;
}

START_TEST(tcp_listen_beyond_loopback_needs_trust)
{
	int port = free_tcp_port();
	char *log;

	/* every interface, no trust said: refused at start */
	ck_assert_int_eq(tcp_host(h_sprintf("0.0.0.0:%d", port), port), 1);
	ck_assert_int_eq(tcp_host(h_sprintf(":%d", port), port), 1);
	log = h_slurp(h_sprintf("%s/logs/worker-once.log", h_env("PIN_DEV_DIR")));
	ck_assert_msg(log && strstr(log, "refusing a FastCGI listen beyond loopback"),
			"no reason logged for the refusal");
	/* loopback needs nothing */
	ck_assert_int_eq(tcp_host(h_sprintf("127.0.0.1:%d", port), port), -1);
	/* beyond loopback with listen_trusted_network = true */
	setenv("PIN_LISTEN_TRUSTED_NETWORK", "true", 1);
	ck_assert_int_eq(tcp_host(h_sprintf("0.0.0.0:%d", port), port), -1);
	unsetenv("PIN_LISTEN_TRUSTED_NETWORK");
}
END_TEST

Suite *make_fcgi_suite(void)
{
	Suite *s = suite_create("fcgi");
	TCase *tc = h_tcase("fcgi", 120);

	tcase_add_loop_test(tc, keep_conn_serves_requests_in_turn, 0, 2);
	tcase_add_loop_test(tc, records_split_and_written_byte_by_byte, 0, 2);
	tcase_add_loop_test(tc, response_longer_than_one_record, 0, 2);
	tcase_add_test(tc, management_records_and_refusals);
	tcase_add_test(tc, broken_peers_leave_the_host_serving);
	tcase_add_test(tc, stop_answers_the_request_in_hand);
	tcase_add_test(tc, silent_and_slow_connections_closed_at_their_deadline);
	tcase_add_test(tc, connection_cap_refuses_the_next_and_counts_it);
	tcase_add_test(tc, oversized_body_never_reaches_a_handler);
	tcase_add_test(tc, tcp_listen_beyond_loopback_needs_trust);
	suite_add_tcase(s, tc);
	return s;
}
