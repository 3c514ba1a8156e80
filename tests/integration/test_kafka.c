/*
 * test_kafka.c -- the worker host's Kafka machinery against the running
 * stack: outbox relay, consumer inbox/dedupe, retry, DLQ.
 *
 * Needs the worker host to run with tests/fixtures testcons.so (consumer
 * group "test-consumer" on pin.test.events.v1, see the fixture's header).
 *
 * Env (harness.h): PIN_PG_DSN, PIN_KAFKA_BOOTSTRAP_FILE, PIN_BASE_URL,
 * PIN_DEV_DIR / PIN_BROKER_BIN (broker stop/start through the harness).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>
#include <libpq-fe.h>
#include <librdkafka/rdkafka.h>

#include "harness.h"

#define TEST_TOPIC "pin.test.events.v1"
#define DLQ_TOPIC "test-consumer.dlq"

/* ------------------------------------------------------------ helpers */

static double k_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void k_sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static void k_quiet(void *arg, const char *msg)
{
	(void)arg;
	(void)msg;
}

static PGconn *k_pg(void)
{
	const char *dsn = getenv("PIN_PG_DSN");
	PGconn *c;

	ck_assert_msg(dsn, "PIN_PG_DSN not set");
	c = PQconnectdb(dsn);
	ck_assert_msg(PQstatus(c) == CONNECTION_OK, "pg: %s", PQerrorMessage(c));
	PQsetNoticeProcessor(c, k_quiet, NULL);
	return c;
}

/* Runs sql; returns the first column of the first row as a malloc'd string
 * (NULL for no row / SQL NULL).  Fails the test on an SQL error. */
static char *k_sql1(PGconn *c, const char *sql, int n, const char *const *p)
{
	PGresult *r = PQexecParams(c, sql, n, NULL, p, NULL, NULL, 0);
	char *out = NULL;

	ck_assert_msg(PQresultStatus(r) == PGRES_TUPLES_OK ||
			PQresultStatus(r) == PGRES_COMMAND_OK,
			"sql failed: %s: %s", sql, PQresultErrorMessage(r));
	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) > 0 &&
			!PQgetisnull(r, 0, 0))
		out = strdup(PQgetvalue(r, 0, 0));
	PQclear(r);
	return out;
}

static long k_sql_long(PGconn *c, const char *sql, int n, const char *const *p)
{
	char *s = k_sql1(c, sql, n, p);
	long v = s ? strtol(s, NULL, 10) : -1;

	free(s);
	return v;
}

static PGconn *k_setup(void)
{
	PGconn *c = k_pg();

	free(k_sql1(c, "CREATE TABLE IF NOT EXISTS calendar.test_seen"
			" (message_id uuid, payload_kind text, attempts int)", 0, NULL));
	return c;
}

static char *k_uuid(PGconn *c)
{
	return k_sql1(c, "SELECT gen_random_uuid()::text", 0, NULL);
}

static char *k_envelope(const char *mid, const char *key, const char *kind)
{
	json_object *o = json_object_new_object(), *p = json_object_new_object();
	char *s;

	json_object_object_add(o, "messageId", json_object_new_string(mid));
	json_object_object_add(o, "eventType", json_object_new_string("pin.test.event"));
	json_object_object_add(o, "contractVersion", json_object_new_int(1));
	json_object_object_add(o, "createdAt", json_object_new_string("2026-11-30T00:00:00.000Z"));
	json_object_object_add(o, "aggregateType", json_object_new_string("Test"));
	json_object_object_add(o, "aggregateId", json_object_new_string(key));
	json_object_object_add(o, "correlationId", NULL);
	json_object_object_add(p, "kind", json_object_new_string(kind));
	json_object_object_add(o, "payload", p);
	s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

/* Produces one message and waits for its ack. */
static void k_produce(const char *topic, const char *key, const char *val)
{
	ck_assert_msg(h_kafka_produce(topic, key, val) == 0,
			"produce to %s not acknowledged", topic);
}

/* Index of the message whose value contains needle (messageId), or -1;
 * *count gets how many do. */
static int k_find(const struct h_kmsgs *l, const char *needle, int *count)
{
	int idx = -1;

	*count = 0;
	for (size_t i = 0; i < l->n; i++)
		if (strstr(l->v[i].value, needle)) {
			if (idx < 0)
				idx = (int)i;
			(*count)++;
		}
	return idx;
}

/* Waits until sql (one param) returns a count >= want; returns the count. */
static long k_wait_count(PGconn *c, const char *sql, const char *p1, long want,
		double timeout_s)
{
	double end = k_now() + timeout_s;
	const char *p[1] = { p1 };
	long v;

	for (;;) {
		v = k_sql_long(c, sql, 1, p);
		if (v >= want || k_now() > end)
			return v;
		k_sleep_ms(200);
	}
}

/* Waits until topic holds a message containing needle; returns every
 * message of the topic (harness-owned). */
static struct h_kmsgs *k_wait_topic(const char *topic, const char *needle,
		double timeout_s, int *idx, int *count)
{
	double end = k_now() + timeout_s;
	struct h_kmsgs *l;

	for (;;) {
		l = h_kafka_read_all(topic, 10000);
		*idx = k_find(l, needle, count);
		if (*idx >= 0 || k_now() > end)
			return l;
		k_sleep_ms(500);
	}
}

static const char *SEEN_SQL =
	"SELECT count(*) FROM calendar.test_seen WHERE message_id = $1::uuid";

static char *k_insert_outbox(PGconn *c, const char *mid, const char *key, const char *env)
{
	const char *p[4] = { mid, TEST_TOPIC, key, env };

	return k_sql1(c, "INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at)"
			" VALUES ($1::uuid, $2, $3, $4::jsonb, now()) RETURNING id::text", 4, p);
}

/* ------------------------------------------------------------ tests */

/* (a) a row inserted into the outbox is published once, key and envelope intact */
START_TEST(relay_publishes_once)
{
	PGconn *c = k_setup();
	char *mid = k_uuid(c), *key = k_uuid(c), *env = k_envelope(mid, key, "noop");
	char *id = k_insert_outbox(c, mid, key, env);
	const char *p[1] = { id };
	struct h_kmsgs *l;
	int idx, count;
	long pub;

	pub = k_wait_count(c, "SELECT count(*) FROM calendar.outbox WHERE id = $1::bigint"
			" AND published_at IS NOT NULL", id, 1, 20);
	ck_assert_msg(pub == 1, "outbox row %s not published within 20 s", id);
	l = k_wait_topic(TEST_TOPIC, mid, 10, &idx, &count);
	ck_assert_msg(idx >= 0, "message %s not on %s", mid, TEST_TOPIC);
	ck_assert_int_eq(count, 1);
	ck_assert_str_eq(l->v[idx].key, key);
	{
		json_object *got = json_tokener_parse(l->v[idx].value);
		json_object *want = json_tokener_parse(env);

		ck_assert_msg(got && json_object_equal(got, want),
				"envelope changed: %s", l->v[idx].value);
		json_object_put(got);
		json_object_put(want);
	}
	/* still once a few relay cycles later */
	k_sleep_ms(1500);
	l = h_kafka_read_all(TEST_TOPIC, 10000);
	k_find(l, mid, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_int_eq(k_sql_long(c, "SELECT attempts FROM calendar.outbox WHERE id = $1::bigint",
				1, p), 0);
	free(id);
	free(env);
	free(key);
	free(mid);
	PQfinish(c);
}
END_TEST

/* (a') a message written through api->outbox_put by a route reaches Kafka */
START_TEST(relay_publishes_api_outbox)
{
	PGconn *c = k_setup();
	char *key = k_uuid(c), *body, *tok;
	struct h_resp *r;
	struct h_kmsgs *l;
	int idx, count;
	json_object *env, *pl;

	body = h_sprintf("{\"key\":\"%s\",\"kind\":\"noop\"}", key);
	tok = h_token("agent", h_uuid(), h_uuid());
	r = h_post("/api/v1/test/outbox", tok, body);
	ck_assert_msg(r->status == 201, "POST /api/v1/test/outbox: %ld %s", r->status, r->body);
	l = k_wait_topic(TEST_TOPIC, key, 20, &idx, &count);
	ck_assert_msg(idx >= 0, "outbox message with key %s not published", key);
	ck_assert_int_eq(count, 1);
	ck_assert_str_eq(l->v[idx].key, key);
	env = json_tokener_parse(l->v[idx].value);
	ck_assert_ptr_nonnull(env);
	ck_assert_str_eq(h_jstr(env, "eventType"), "pin.test.event");
	ck_assert_str_eq(h_jstr(env, "aggregateId"), key);
	ck_assert_ptr_nonnull(h_jstr(env, "messageId"));
	pl = h_jget(env, "payload");
	ck_assert_str_eq(h_jstr(pl, "kind"), "noop");
	json_object_put(env);
	free(key);
	PQfinish(c);
}
END_TEST

/* (c) the same envelope delivered twice is handled once */
START_TEST(consumer_dedupes)
{
	PGconn *c = k_setup();
	char *mid = k_uuid(c), *key = k_uuid(c), *env = k_envelope(mid, key, "ok");
	char *mid2 = k_uuid(c), *env2 = k_envelope(mid2, key, "ok");

	k_produce(TEST_TOPIC, key, env);
	k_produce(TEST_TOPIC, key, env);
	/* same key -> same partition: when the sentinel is in, both copies were seen */
	k_produce(TEST_TOPIC, key, env2);
	ck_assert_msg(k_wait_count(c, SEEN_SQL, mid2, 1, 30) == 1,
			"sentinel message not consumed within 30 s");
	ck_assert_int_eq(k_wait_count(c, SEEN_SQL, mid, 1, 1), 1);
	{
		const char *p[2] = { "test-consumer", mid };

		ck_assert_int_eq(k_sql_long(c, "SELECT count(*) FROM calendar.inbox"
					" WHERE consumer_group = $1 AND message_id = $2::uuid",
					2, p), 1);
	}
	free(env2);
	free(mid2);
	free(env);
	free(key);
	free(mid);
	PQfinish(c);
}
END_TEST

/* (d) a retriable failure is retried, then succeeds once */
START_TEST(consumer_retries)
{
	PGconn *c = k_setup();
	char *mid = k_uuid(c), *key = k_uuid(c), *env = k_envelope(mid, key, "retry-once");
	const char *p[1] = { mid };

	k_produce(TEST_TOPIC, key, env);
	ck_assert_msg(k_wait_count(c, SEEN_SQL, mid, 1, 30) == 1,
			"retry-once message not handled within 30 s");
	ck_assert_int_gt(k_sql_long(c, "SELECT max(attempts) FROM calendar.test_seen"
				" WHERE message_id = $1::uuid", 1, p), 1);
	k_sleep_ms(1000);
	ck_assert_int_eq(k_sql_long(c, SEEN_SQL, 1, p), 1);
	free(env);
	free(key);
	free(mid);
	PQfinish(c);
}
END_TEST

static void expect_dlq(PGconn *c, const char *kind, const char *code, double timeout_s)
{
	char *mid = k_uuid(c), *key = k_uuid(c), *env = k_envelope(mid, key, kind);
	const char *p[1] = { mid };
	struct h_kmsgs *l;
	const char *got;
	int idx, count;

	k_produce(TEST_TOPIC, key, env);
	l = k_wait_topic(DLQ_TOPIC, mid, timeout_s, &idx, &count);
	ck_assert_msg(idx >= 0, "%s message not in %s within %.0f s", kind, DLQ_TOPIC, timeout_s);
	ck_assert_int_eq(count, 1);
	ck_assert_str_eq(l->v[idx].key, key);
	ck_assert_str_eq(l->v[idx].value, env);
	got = h_kmsg_header(&l->v[idx], "x-error-code");
	ck_assert_msg(got && !strcmp(got, code),
			"x-error-code %s, want %s", got ? got : "(none)", code);
	got = h_kmsg_header(&l->v[idx], "x-original-topic");
	ck_assert_msg(got && !strcmp(got, TEST_TOPIC),
			"x-original-topic missing");
	ck_assert_int_eq(k_sql_long(c, SEEN_SQL, 1, p), 0);
	free(env);
	free(key);
	free(mid);
}

/* (e) non-retriable -> DLQ at once; invalid envelope -> DLQ; retry-always
 * -> DLQ after its 3 s deadline */
START_TEST(consumer_dlq)
{
	PGconn *c = k_setup();

	expect_dlq(c, "fatal", "TEST_FATAL", 30);
	expect_dlq(c, "retry-always", "TEST_RETRY_ALWAYS", 30);
	{
		char *key = k_uuid(c), *bad = k_uuid(c), val[128];
		struct h_kmsgs *l;
		int idx, count;

		snprintf(val, sizeof(val), "not json %s", bad);
		k_produce(TEST_TOPIC, key, val);
		l = k_wait_topic(DLQ_TOPIC, bad, 30, &idx, &count);
		ck_assert_msg(idx >= 0, "invalid envelope not in the DLQ");
		ck_assert_str_eq(h_kmsg_header(&l->v[idx], "x-error-code"), "INVALID_ENVELOPE");
		free(key);
		free(bad);
	}
	PQfinish(c);
}
END_TEST

/* (b) broker down: rows stay unpublished; broker back: published once */
START_TEST(relay_survives_broker_outage)
{
	PGconn *c = k_setup();
	char *mid = k_uuid(c), *key = k_uuid(c), *env = k_envelope(mid, key, "noop");
	char *id;
	struct h_kmsgs *l;
	int idx, count;
	const char *p[1];

	h_broker_stop();
	id = k_insert_outbox(c, mid, key, env);
	p[0] = id;
	k_sleep_ms(4000);
	ck_assert_int_eq(k_sql_long(c, "SELECT count(*) FROM calendar.outbox WHERE id = $1::bigint"
				" AND published_at IS NULL", 1, p), 1);
	h_broker_start();
	ck_assert_msg(k_wait_count(c, "SELECT count(*) FROM calendar.outbox WHERE id = $1::bigint"
				" AND published_at IS NOT NULL", id, 1, 45) == 1,
			"row not published within 45 s of the broker's return");
	l = k_wait_topic(TEST_TOPIC, mid, 10, &idx, &count);
	ck_assert_msg(idx >= 0, "message not on the topic after the outage");
	ck_assert_int_eq(count, 1);
	ck_assert_str_eq(l->v[idx].key, key);
	/* consumers follow the broker to its new address */
	{
		char *m2 = k_uuid(c), *e2 = k_envelope(m2, key, "ok");

		k_produce(TEST_TOPIC, key, e2);
		ck_assert_msg(k_wait_count(c, SEEN_SQL, m2, 1, 45) == 1,
				"consumer did not resume after the broker restart");
		free(e2);
		free(m2);
	}
	free(id);
	free(env);
	free(key);
	free(mid);
	PQfinish(c);
}
END_TEST

Suite *make_kafka_suite(void)
{
	Suite *s = suite_create("kafka");
	TCase *tc = h_tcase("worker", 150);

	tcase_add_test(tc, relay_publishes_once);
	tcase_add_test(tc, relay_publishes_api_outbox);
	tcase_add_test(tc, consumer_dedupes);
	tcase_add_test(tc, consumer_retries);
	tcase_add_test(tc, consumer_dlq);
	/* last: restarts the broker (a new, empty mock cluster) */
	tcase_add_test(tc, relay_survives_broker_outage);
	suite_add_tcase(s, tc);
	return s;
}
