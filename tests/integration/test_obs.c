/*
 * test_obs.c -- issue 11: operators can see the worker side.
 *
 * The worker host's plain-HTTP metrics_listen (/metrics, /healthz), the
 * build/process basics on both hosts, real histograms, and the exposition
 * of both hosts checked by `promtool check metrics` (0 problems).
 */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>
#include <curl/curl.h>
#include "harness.h"

struct got {
	long status;
	char *body;
	char *ctype;
};

/* GET of an absolute URL (the worker host is not behind nginx) */
static struct got fetch(const char *url)
{
	struct got g = { 0, NULL, NULL };
	struct h_buf b = { NULL, 0 };
	CURL *c = curl_easy_init();
	char *ct = NULL;
	CURLcode rc;

	ck_assert(c != NULL);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, h_curl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	rc = curl_easy_perform(c);
	ck_assert_msg(rc == CURLE_OK, "GET %s: %s", url, curl_easy_strerror(rc));
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &g.status);
	curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
	g.ctype = h_strdup(ct ? ct : "");
	g.body = h_strdup(b.p ? b.p : "");
	free(b.p);
	curl_easy_cleanup(c);
	return g;
}

/* the worker's URL with another path: ".../metrics" -> ".../<path>" */
static const char *worker_url(const char *path)
{
	const char *m = h_env("PIN_WORKER_METRICS_URL");
	const char *p = strstr(m, "/metrics");

	ck_assert_ptr_nonnull(p);
	return h_sprintf("%.*s%s", (int)(p - m), m, path);
}

/* `promtool check metrics` on text: its output ("" = no problem) */
static char *promtool_check(const char *text, int *status)
{
	char tmpl[] = "/tmp/pin-obs-XXXXXX";
	int fd = mkstemp(tmpl);
	FILE *p;
	char buf[4096], *out;
	size_t n;

	ck_assert(fd >= 0);
	ck_assert(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
	close(fd);
	p = popen(h_sprintf("promtool check metrics < %s 2>&1", tmpl), "r");
	ck_assert_ptr_nonnull(p);
	n = fread(buf, 1, sizeof buf - 1, p);
	buf[n] = '\0';
	*status = pclose(p);
	unlink(tmpl);
	out = h_strdup(buf);
	return out;
}

/* promtool's output without the one lint the seeds impose: seeds 001 and
 * 004 name two histograms in milliseconds (issue 30 item 4: exactly the
 * seeds' names), which promtool calls an abbreviated unit */
static char *seed_lint_only(const char *out)
{
	static const char *const seed_ms[] = { "notifications_enqueue_duration_ms",
		"calendar_crm_booking_sync_consume_duration_ms", NULL };
	char *rest = h_strdup("");

	for (const char *l = out; l && *l; ) {
		const char *nl = strchr(l, '\n');
		char *line = h_sprintf("%.*s", (int)(nl ? (size_t)(nl - l) : strlen(l)), l);
		bool seed = false;

		for (int i = 0; seed_ms[i]; i++)
			if (!strcmp(line, h_sprintf("%s metric names should not contain "
					"abbreviated units", seed_ms[i])))
				seed = true;
		if (!seed && *line)
			rest = h_sprintf("%s%s\n", rest, line);
		l = nl ? nl + 1 : NULL;
	}
	return rest;
}

START_TEST(worker_metrics_endpoint)
{
	struct got g = fetch(h_env("PIN_WORKER_METRICS_URL"));

	ck_assert_msg(g.status == 200, "status %ld", g.status);
	ck_assert_msg(!strncmp(g.ctype, "text/plain", 10), "content type %s", g.ctype);
	ck_assert_msg(strstr(g.body, "pin_build_info{version=\"") &&
		strstr(g.body, ",abi=\""), "no pin_build_info: %.300s", g.body);
	ck_assert(strstr(g.body, "\nprocess_start_time_seconds ") != NULL);
	ck_assert(strstr(g.body, "\nprocess_resident_memory_bytes ") != NULL);
	ck_assert(strstr(g.body, "\nprocess_open_fds ") != NULL);
	/* the worker side's own metrics are there: relay, jobs */
	ck_assert_msg(H_WAIT_UNTIL((g = fetch(h_env("PIN_WORKER_METRICS_URL")),
			strstr(g.body, "pin_job_duration_seconds_bucket{job=\"") &&
			strstr(g.body, "pin_outbox_relay_leader")), 20000),
		"no job histogram / relay gauge: %.2000s", g.body);
	ck_assert(strstr(g.body, "# TYPE pin_job_duration_seconds histogram") != NULL);
	/* [consume] every consumer's histogram from the start: test-consumer-batch
	 * gets no message in this suite (it does in the kafka suite before it in a
	 * full run: then its count is not 0, the series is there either way) */
	ck_assert_msg(strstr(g.body, "pin_consumer_consume_duration_seconds_bucket{"
			"group=\"test-consumer-batch\",le=\"+Inf\"} ") != NULL,
		"no histogram of an idle consumer");
	ck_assert(strstr(g.body, "pin_consumer_consume_duration_seconds_count{"
			"group=\"calendar-identity-users\"}") != NULL);

	g = fetch(worker_url("/healthz"));
	ck_assert_int_eq(g.status, 200);
	ck_assert(strstr(g.body, "\"ok\"") != NULL);
	g = fetch(worker_url("/nope"));
	ck_assert_int_eq(g.status, 404);
}
END_TEST

START_TEST(api_metrics_basics_and_latency_histogram)
{
	struct h_resp *r;

	h_get("/healthz", NULL);
	r = h_get("/metrics", NULL);
	ck_assert_int_eq(r->status, 200);
	ck_assert(strstr(r->body, "pin_build_info{version=\"") != NULL);
	ck_assert(strstr(r->body, "\nprocess_start_time_seconds ") != NULL);
	ck_assert(strstr(r->body, "\nprocess_open_fds ") != NULL);
	ck_assert(strstr(r->body, "# TYPE pin_http_request_duration_seconds histogram") != NULL);
	ck_assert_msg(strstr(r->body, "pin_http_request_duration_seconds_bucket{"
		"route=\"/healthz\",method=\"GET\",le=\"+Inf\"}") != NULL,
		"no latency histogram for /healthz: %.3000s", r->body);
	ck_assert(strstr(r->body, "pin_http_request_duration_seconds_count{"
		"route=\"/healthz\",method=\"GET\"}") != NULL);
}
END_TEST

/* both hosts' exposition passes promtool's parser and linter */
START_TEST(promtool_check_metrics_both_hosts)
{
	struct h_resp *r;
	struct got g;
	char *out;
	int st;

	h_get("/healthz", NULL);
	r = h_get("/metrics", NULL);
	ck_assert_int_eq(r->status, 200);
	out = promtool_check(r->body, &st);
	ck_assert_msg(st == 0 && !*out, "API host: promtool exit %d:\n%s", st, out);

	g = fetch(h_env("PIN_WORKER_METRICS_URL"));
	ck_assert_int_eq(g.status, 200);
	out = seed_lint_only(promtool_check(g.body, &st));
	ck_assert_msg(!*out, "worker host: promtool exit %d:\n%s", st, out);

	/* the check can fail: a counter without _total and a bad line */
	out = promtool_check("# TYPE x counter\nx 1\n", &st);
	ck_assert_msg(st != 0 && *out, "promtool accepted a lint problem");
}
END_TEST

/* ------------------------------------------------------------ real lag */

#define LAG_PREFIX "pin_consumer_lag_messages{group=\"test-consumer\"," \
	"topic=\"pin.test.events.v1\",partition=\""
#define AGE_PREFIX "pin_consumer_oldest_unprocessed_age_seconds{group=\"test-consumer\"} "

static char *envelope(const char *key, const char *kind)
{
	return h_sprintf("{\"messageId\":\"%s\",\"eventType\":\"pin.test.event\","
		"\"contractVersion\":1,\"createdAt\":\"2026-11-30T00:00:00.000Z\","
		"\"aggregateType\":\"Test\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"kind\":\"%s\"}}", h_uuid(), key, kind);
}

/* sum over the partitions of the test group's lag; -1 when no series yet */
static double lag_sum(const char *metrics)
{
	double sum = -1;

	for (const char *p = metrics; (p = strstr(p, LAG_PREFIX)); p++) {
		const char *v = strstr(p, "} ");
		if (!v)
			break;
		sum = (sum < 0 ? 0 : sum) + atof(v + 2);
	}
	return sum;
}

static double age_of(const char *metrics)
{
	const char *p = strstr(metrics, AGE_PREFIX);

	return p ? atof(p + strlen(AGE_PREFIX)) : -1;
}

static double worker_lag(void)
{
	return lag_sum(fetch(h_env("PIN_WORKER_METRICS_URL")).body);
}

/* the test group's lag series and commit failures, for failure messages */
static char *lag_lines(void)
{
	const char *m = fetch(h_env("PIN_WORKER_METRICS_URL")).body;
	char *out = h_strdup("");

	for (const char *p = m; p && *p; ) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);

		if (!strncmp(p, LAG_PREFIX, strlen(LAG_PREFIX)) || !strncmp(p,
				"pin_consumer_offset_commit_failures_total{group=\"test-consumer\"}",
				strlen("pin_consumer_offset_commit_failures_total{group=\"test-consumer\"}")))
			out = h_sprintf("%s%.*s\n", out, (int)len, p);
		p = nl ? nl + 1 : NULL;
	}
	return out;
}

static double worker_age(void)
{
	return age_of(fetch(h_env("PIN_WORKER_METRICS_URL")).body);
}

/* A stalled consumer (its handler keeps failing: the partition is held)
 * shows lag in messages that grows with every message behind it, and a
 * growing oldest-unprocessed age; both fall back to 0 once it moves.  A
 * held partition is not fetched, so its lag grows only through the lag
 * sampler's own broker queries (wm_main). */
static void stall_and_watch_lag(void)
{
	const char *topic = "pin.test.events.v1";
	char *key = h_uuid();
	double l1, l2, a1, a2;

	h_sql("CREATE TABLE IF NOT EXISTS calendar.test_seen"
		" (message_id uuid, payload_kind text, attempts int)");
	ck_assert_msg(H_WAIT_UNTIL(worker_lag() == 0, 30000),
		"test group lag not 0 at the start: %g\n%s", worker_lag(), lag_lines());
	ck_assert(h_kafka_produce(topic, key, envelope(key, "stall")) == 0);
	ck_assert(h_kafka_produce(topic, key, envelope(key, "noop")) == 0);
	ck_assert_msg(H_WAIT_UNTIL((l1 = worker_lag()) >= 2, 10000),
		"lag did not show the held message: %g", l1);
	ck_assert_msg(H_WAIT_UNTIL((a1 = worker_age()) >= 1, 10000), "age %g", a1);
	for (int i = 0; i < 3; i++)
		ck_assert(h_kafka_produce(topic, key, envelope(key, "noop")) == 0);
	ck_assert_msg(H_WAIT_UNTIL((l2 = worker_lag()) >= l1 + 3, 10000),
		"lag did not grow: %g then %g", l1, l2);
	h_sleep_ms(1500);
	ck_assert_msg(H_WAIT_UNTIL((a2 = worker_age()) > a1 + 1, 10000),
		"age did not grow: %g then %g", a1, a2);
	/* the stall ends (20 s deadline -> DLQ): lag and age back to 0 */
	ck_assert_msg(H_WAIT_UNTIL(worker_lag() == 0 && worker_age() == 0, 45000),
		"lag stayed %g, age %g\n%s", worker_lag(), worker_age(), lag_lines());
}

START_TEST(stalled_consumer_lag_grows)
{
	stall_and_watch_lag();
}
END_TEST

/* The same right after the broker moved (a new dev broker on a new port).
 * librdkafka 2.0.2's watermark query waits for its answer without looking
 * at its timeout, so the sampler's handle stayed on the dead address for
 * minutes (socket.timeout.ms, retried, for every registered partition in
 * turn) and a held partition's lag stayed where it was: the rare
 * "lag did not grow: 2 then 2" of the suite, which ran this test soon
 * after test_kafka's broker restart (a clean-clone run, 2026-12-03).  This passes with that
 * code too (the hang needs a request in flight at the restart): it guards
 * that the lag follows the move, it does not reproduce the hang. */
START_TEST(lag_follows_a_moved_broker)
{
	const char *topic = "pin.test.events.v1";
	char *key = h_uuid(), *mid = h_uuid();

	h_sql("CREATE TABLE IF NOT EXISTS calendar.test_seen"
		" (message_id uuid, payload_kind text, attempts int)");
	h_broker_stop();
	h_broker_start();
	/* the test group is back on the new broker */
	ck_assert(h_kafka_produce(topic, key, h_sprintf("{\"messageId\":\"%s\","
		"\"eventType\":\"pin.test.event\",\"contractVersion\":1,"
		"\"createdAt\":\"2026-11-30T00:00:00.000Z\",\"aggregateType\":\"Test\","
		"\"aggregateId\":\"%s\",\"correlationId\":null,\"payload\":{\"kind\":\"ok\"}}",
		mid, key)) == 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.test_seen"
		" WHERE message_id = $1::uuid", mid) == 1, 45000),
		"the test consumer did not follow the broker");
	stall_and_watch_lag();
}
END_TEST

/* the test group's failed offset commits so far */
static double commit_failures(void)
{
	const char *k = "pin_consumer_offset_commit_failures_total{group=\"test-consumer\"} ";
	const char *p = strstr(fetch(h_env("PIN_WORKER_METRICS_URL")).body, k);

	return p ? atof(p + strlen(k)) : -1;
}

/* An offset commit that fails is committed again: the broker refuses the
 * next three OffsetCommit requests, the consumer applies one message, and
 * the group's committed offset still catches up (lag back to 0) without a
 * further message on that partition.  Before, the lag stayed at 1 until the
 * partition's next message (and a restart redelivered it). */
START_TEST(failed_offset_commit_is_retried)
{
	const char *topic = "pin.test.events.v1";
	char *key = h_uuid();
	char *env = envelope(key, "ok");
	double f0, f1 = -1;

	h_sql("CREATE TABLE IF NOT EXISTS calendar.test_seen"
		" (message_id uuid, payload_kind text, attempts int)");
	ck_assert_msg(H_WAIT_UNTIL(worker_lag() == 0, 30000),
		"test group lag not 0 at the start: %g\n%s", worker_lag(), lag_lines());
	ck_assert_msg((f0 = commit_failures()) >= 0, "no commit failure counter:\n%s",
		lag_lines());
	h_broker_inject(8, 3, 28);      /* OffsetCommit -> INVALID_COMMIT_OFFSET_SIZE */
	ck_assert(h_kafka_produce(topic, key, env) == 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.test_seen"
		" WHERE payload_kind = 'ok' AND message_id = ($1::json->>'messageId')::uuid",
		env) == 1, 20000), "the message was not applied");
	ck_assert_msg(H_WAIT_UNTIL((f1 = commit_failures()) > f0, 10000),
		"no failed commit counted (%g -> %g): the injection missed", f0, f1);
	ck_assert_msg(H_WAIT_UNTIL(worker_lag() == 0, 20000),
		"lag stayed %g after the failed commits (%g):\n%s", worker_lag(),
		commit_failures() - f0, lag_lines());
}
END_TEST

/* the relay's backlog per outbox: pending rows and the oldest one's age */
START_TEST(outbox_backlog_gauges)
{
	const char *m;

	ck_assert_msg(H_WAIT_UNTIL((m = fetch(h_env("PIN_WORKER_METRICS_URL")).body,
		strstr(m, "pin_outbox_oldest_unpublished_age_seconds{outbox=\"calendar.outbox\"} ") &&
		strstr(m, "pin_outbox_pending{outbox=\"calendar.outbox\"} ")), 15000),
		"no outbox backlog gauges: %.3000s", m);
}
END_TEST

/* ------------------------------------------------ W3C trace context */

struct posted {
	long status;
	char *traceparent;         /* response header, "" when absent */
};

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
	struct posted *p = ud;
	size_t n = size * nmemb;

	if (n > 13 && !strncasecmp(data, "traceparent:", 12)) {
		char *v = h_sprintf("%.*s", (int)(n - 12), data + 12);
		v += strspn(v, " ");
		v[strcspn(v, "\r\n")] = '\0';
		p->traceparent = v;
	}
	return n;
}

static struct posted request_tp(const char *method, const char *path, const char *tok,
		const char *body, const char *traceparent)
{
	struct posted p = { 0, "" };
	struct h_buf b = { NULL, 0 };
	struct curl_slist *hl = NULL;
	CURL *c = curl_easy_init();

	ck_assert(c != NULL);
	if (tok)
		hl = curl_slist_append(hl, h_sprintf("Authorization: Bearer %s", tok));
	if (body)
		hl = curl_slist_append(hl, "Content-Type: application/json");
	if (traceparent)
		hl = curl_slist_append(hl, h_sprintf("traceparent: %s", traceparent));
	curl_easy_setopt(c, CURLOPT_URL, h_sprintf("%s%s", h_env("PIN_BASE_URL"), path));
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	if (body)
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, h_curl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &p);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	ck_assert(curl_easy_perform(c) == CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &p.status);
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	free(b.p);
	return p;
}

static char *hex32(void)
{
	char *u = h_sprintf("%s%s", h_uuid(), h_uuid()), *o = h_strdup(u);
	size_t n = 0;

	for (char *p = u; *p && n < 32; p++)
		if (*p != '-')
			o[n++] = *p;
	o[n] = '\0';
	return o;
}

static bool tp_ok(const char *tp)
{
	return strlen(tp) == 55 && !strncmp(tp, "00-", 3) && tp[35] == '-' && tp[52] == '-';
}

/* A request without traceparent gets a new trace; one with it continues
 * it.  The trace id of one request is in the API host's log (outbox row
 * recorded), in the outbox row, in the Kafka header, in the relay's
 * "published" line and in the consuming worker's log. */
START_TEST(trace_context_request_to_consumer)
{
	char *tid = hex32(), *key = h_uuid();
	char *tp_in = h_sprintf("00-%s-00f067aa0ba902b7-01", tid);
	char *tok = h_token("agent", h_uuid(), h_uuid());
	char *qtid = h_sprintf("\"traceId\":\"%s\"", tid);
	struct posted a, b;
	const struct h_kmsg *m;
	const char *hdr;
	char *row;

	/* new trace ids when none comes in */
	a = request_tp("GET", "/healthz", NULL, NULL, NULL);
	b = request_tp("GET", "/healthz", NULL, NULL, NULL);
	ck_assert_msg(tp_ok(a.traceparent) && tp_ok(b.traceparent), "traceparent '%s' '%s'",
		a.traceparent, b.traceparent);
	ck_assert_msg(strncmp(a.traceparent, b.traceparent, 35) != 0, "the same trace twice");
	/* an invalid one is not continued */
	a = request_tp("GET", "/healthz", NULL, NULL,
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01");
	ck_assert(tp_ok(a.traceparent) && strncmp(a.traceparent, "00-000000", 9) != 0);

	h_sql("CREATE TABLE IF NOT EXISTS calendar.test_seen"
		" (message_id uuid, payload_kind text, attempts int)");
	a = request_tp("POST", "/api/v1/test/outbox", tok,
		h_sprintf("{\"key\":\"%s\",\"kind\":\"retry-once\"}", key), tp_in);
	ck_assert_msg(a.status == 201, "status %ld", a.status);
	ck_assert_msg(tp_ok(a.traceparent) && !strncmp(a.traceparent + 3, tid, 32) &&
		strcmp(a.traceparent, tp_in) != 0,
		"response traceparent %s does not continue %s with a new span", a.traceparent, tp_in);
	row = h_sql_scalar("SELECT traceparent FROM calendar.outbox WHERE key = $1", key);
	ck_assert_msg(row && !strncmp(row + 3, tid, 32), "outbox row traceparent %s",
		row ? row : "(null)");
	m = h_kafka_wait_key("pin.test.events.v1", key, 20000);
	ck_assert_ptr_nonnull(m);
	hdr = h_kmsg_header(m, "traceparent");
	ck_assert_msg(hdr && !strncmp(hdr + 3, tid, 32), "Kafka header traceparent %s",
		hdr ? hdr : "(none)");
	ck_assert_msg(h_log_has("api.log", qtid, "outbox: event recorded"),
		"API host log has no line with %s", qtid);
	ck_assert_msg(H_WAIT_UNTIL(h_log_has("worker.log", qtid, "outbox relay: published"), 15000),
		"relay log has no line with %s", qtid);
	/* retry-once: the consumer logs its first failure with the trace */
	ck_assert_msg(H_WAIT_UNTIL(h_log_has("worker.log", qtid, "consumer: retriable failure"),
		20000), "consumer log has no line with %s", qtid);
}
END_TEST

Suite *make_obs_suite(void)
{
	Suite *s = suite_create("obs");
	TCase *tc = h_tcase("metrics", 60);

	tcase_add_test(tc, worker_metrics_endpoint);
	tcase_add_test(tc, api_metrics_basics_and_latency_histogram);
	tcase_add_test(tc, promtool_check_metrics_both_hosts);
	tcase_add_test(tc, outbox_backlog_gauges);
	suite_add_tcase(s, tc);
	tc = h_tcase("lag", 180);
	tcase_add_test(tc, stalled_consumer_lag_grows);
	tcase_add_test(tc, lag_follows_a_moved_broker);
	tcase_add_test(tc, failed_offset_commit_is_retried);
	suite_add_tcase(s, tc);
	tc = h_tcase("trace", 60);
	tcase_add_test(tc, trace_context_request_to_consumer);
	suite_add_tcase(s, tc);
	return s;
}
