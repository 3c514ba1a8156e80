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
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <json-c/json.h>

#include "harness.h"

#define TEST_TOPIC "pin.test.events.v1"
#define DLQ_TOPIC "test-consumer.dlq"

/* ------------------------------------------------------------ helpers */

static void k_setup(void)
{
	h_sql("CREATE TABLE IF NOT EXISTS calendar.test_seen"
			" (message_id uuid, payload_kind text, attempts int)");
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
	s = h_strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
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
static long long k_wait_count(const char *sql, const char *p1, long long want,
		int timeout_s)
{
	long long v;

	(void)H_WAIT_UNTIL((v = h_sql_int(sql, p1)) >= want, timeout_s * 1000);
	return v;
}

/* Waits until topic holds a message containing needle; returns every
 * message of the topic (harness-owned). */
static struct h_kmsgs *k_wait_topic(const char *topic, const char *needle,
		int timeout_s, int *idx, int *count)
{
	int64_t end = h_now_ms() + timeout_s * 1000;
	struct h_kmsgs *l;

	for (;;) {
		l = h_kafka_read_all(topic, 10000);
		*idx = k_find(l, needle, count);
		if (*idx >= 0 || h_now_ms() > end)
			return l;
		h_sleep_ms(500);
	}
}

/* count (0/1) of outbox row $1 gone out (marked published, or behind its
 * shard's cursor: calendar.outbox_sent) */
static const char *PUBLISHED_SQL = "SELECT count(*) FROM calendar.outbox o"
	" WHERE id = $1::bigint AND calendar.outbox_sent(o)";

static const char *SEEN_SQL =
	"SELECT count(*) FROM calendar.test_seen WHERE message_id = $1::uuid";

static char *k_insert_outbox(const char *mid, const char *key, const char *env)
{
	return h_sql_scalar("INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at)"
			" VALUES ($1::uuid, $2, $3, $4::jsonb, now()) RETURNING id::text",
			mid, TEST_TOPIC, key, env);
}

/* ------------------------------------------------------------ tests */

/* (a) a row inserted into the outbox is published once, key and envelope intact */
START_TEST(relay_publishes_once)
{
	char *mid = h_uuid(), *key = h_uuid(), *env = k_envelope(mid, key, "noop");
	char *id;
	struct h_kmsgs *l;
	int idx, count;
	long long pub;

	k_setup();
	id = k_insert_outbox(mid, key, env);
	pub = k_wait_count(PUBLISHED_SQL, id, 1, 20);
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
	h_sleep_ms(1500);
	l = h_kafka_read_all(TEST_TOPIC, 10000);
	k_find(l, mid, &count);
	ck_assert_int_eq(count, 1);
	ck_assert_int_eq(h_sql_int("SELECT attempts FROM calendar.outbox WHERE id = $1::bigint",
				id), 0);
}
END_TEST

/* (a') a message written through api->outbox_put by a route reaches Kafka */
START_TEST(relay_publishes_api_outbox)
{
	char *key = h_uuid(), *body, *tok;
	struct h_resp *r;
	struct h_kmsgs *l;
	int idx, count;
	json_object *env, *pl;

	k_setup();
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
	/* createdAt in milliseconds, as events.md shows ("...:00.123Z"), or
	 * whole seconds */
	{
		const char *ca = h_jstr(env, "createdAt");
		size_t n = ca ? strlen(ca) : 0;

		ck_assert_msg(ca && (n == 24 || n == 20) && ca[n - 1] == 'Z' &&
				(n == 20 || ca[19] == '.'),
				"createdAt not in milliseconds: %s", ca ? ca : "(null)");
	}
	pl = h_jget(env, "payload");
	ck_assert_str_eq(h_jstr(pl, "kind"), "noop");
	json_object_put(env);
}
END_TEST

/* (a'') only the holder of the advisory lock publishes: when the relay's
 * session dies and another session takes the lock before the relay notices,
 * the relay's next statement reconnects, but it does not publish what it
 * read on that unlocked session.  The lock is the one of the row's shard
 * (host/worker/relay.c: class hashtext('pin.relay:' || outbox) & 0x7fffffff,
 * shard (hashtext(key) & 0x7fffffff) % relay_shards, 4 by default) */
#define RELAY_CLASS "(hashtext('pin.relay:calendar.outbox') & 2147483647)"
#define RELAY_SHARD_OF(k) "((hashtext(" k ") & 2147483647) % 4)"
#define RELAY_SHARD RELAY_SHARD_OF("$1")
START_TEST(relay_publishes_only_as_leader)
{
	char *mid = h_uuid(), *key = h_uuid(), *env = k_envelope(mid, key, "noop");
	char *id, *got;

	k_setup();
	/* one statement: the relay's backend is gone (waited for), the lock is
	 * ours; retried while the relay holds no lock at that instant (between
	 * two leaderships, e.g. reconnecting under ASan) */
	for (int i = 0; i < 40; i++) {
		got = h_sql_scalar("SELECT coalesce(bool_and(pg_terminate_backend(pid, 5000)), false)"
			" AND pg_try_advisory_lock(" RELAY_CLASS ", " RELAY_SHARD ") FROM pg_locks"
			" WHERE locktype = 'advisory' AND granted AND objsubid = 2"
			" AND classid = " RELAY_CLASS "::oid AND objid = " RELAY_SHARD "::oid", key);
		if (got && !strcmp(got, "t"))
			break;
		h_sleep_ms(250);
	}
	ck_assert_msg(got && !strcmp(got, "t"), "relay lock not taken over: %s",
			got ? got : "(null)");
	id = k_insert_outbox(mid, key, env);
	h_sleep_ms(4000);
	ck_assert_msg(h_sql_int("SELECT count(*) FROM calendar.outbox o WHERE id = $1::bigint"
				" AND NOT calendar.outbox_sent(o)", id) == 1,
			"the relay published without holding the lock");
	h_sql("SELECT pg_advisory_unlock(" RELAY_CLASS ", " RELAY_SHARD ")", key);
	ck_assert_msg(k_wait_count(PUBLISHED_SQL, id, 1, 30) == 1,
			"row not published within 30 s of the lock's release");
}
END_TEST

/* A topic the dev broker has and nobody consumes (the test consumer of
 * TEST_TOPIC must not be flooded: later tests wait for it). */
#define STREAM_TOPIC "pin.bench.relay.v1"

/* n outbox rows of STREAM_TOPIC whose keys fall in the relay shard of key
 * (relay_shards 4), in one statement; the highest id. */
static char *k_insert_same_shard(const char *key, int n)
{
	char *id = h_sql_scalar("WITH k AS (SELECT gen_random_uuid() AS m, gen_random_uuid()::text AS k"
			" FROM generate_series(1, 40 * $2::int)), s AS (SELECT * FROM k"
			" WHERE " RELAY_SHARD_OF("k.k") " = " RELAY_SHARD_OF("$1") " LIMIT $2::int),"
			" ins AS (INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at)"
			" SELECT m, '" STREAM_TOPIC "', k, jsonb_build_object('messageId', m, 'eventType',"
			" 'pin.test.event', 'contractVersion', 1, 'createdAt', '2026-11-30T00:00:00.000Z',"
			" 'aggregateType', 'Test', 'aggregateId', k, 'correlationId', NULL, 'payload',"
			" jsonb_build_object('kind', 'noop')), now() FROM s RETURNING id)"
			" SELECT max(id)::text FROM ins", key, h_sprintf("%d", n));

	ck_assert_ptr_nonnull(id);
	return id;
}

/* (b') marking (relay_cursor = false): a row whose transaction took its id
 * first and committed after rows behind it were published is published too
 * -- while rows keep coming into its shard (20 every 20 ms: the relay's
 * reads keep finding rows, it goes back to the start at most every
 * relay_rewind_ms then, host/worker/relay.c).  By the cursor the rows behind
 * an open transaction wait for it instead (relaycursor suite). */
static struct h_host k_mark;

static void k_mark_teardown(void)
{
	h_relay_marking_stop(&k_mark);
}

START_TEST(relay_publishes_late_commit)
{
	char *mid = h_uuid(), *key = h_uuid(), *env = k_envelope(mid, key, "noop");
	PGconn *late = PQconnectdb(h_env("PIN_PG_DSN"));
	const char *p[3] = { mid, key, env };
	char *late_id = NULL, *after, *last;
	PGresult *res;
	int64_t end;
	long long after_published;
	bool ok;
	int n = 0;

	k_setup();
	h_relay_marking_start(&k_mark);
	ck_assert_int_eq(PQstatus(late), CONNECTION_OK);
	PQclear(PQexec(late, "BEGIN"));
	res = PQexecParams(late, "INSERT INTO calendar.outbox (message_id, topic, key,"
			" envelope, created_at) VALUES ($1::uuid, '" STREAM_TOPIC "', $2, $3::jsonb,"
			" now()) RETURNING id::text", 3, NULL, p, NULL, NULL, 0);
	ok = PQresultStatus(res) == PGRES_TUPLES_OK;
	if (ok)
		late_id = h_strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	if (!ok)
		PQfinish(late);
	ck_assert_msg(ok, "late insert failed");
	/* rows of the same shard with higher ids, published: the shard's
	 * read is past the late row's id */
	after = k_insert_same_shard(key, 1);
	after_published = k_wait_count(PUBLISHED_SQL, after, 1, 20);
	/* the stream runs before and after the late commit */
	for (int i = 0; i < 25; i++, n += 20) {
		last = k_insert_same_shard(key, 20);
		h_sleep_ms(20);
	}
	PQclear(PQexec(late, "COMMIT"));
	PQfinish(late);
	ck_assert_msg(after_published == 1, "row %s not published within 20 s", after);
	end = h_now_ms() + 20000;
	while (h_sql_int(PUBLISHED_SQL, late_id) == 0) {
		ck_assert_msg(h_now_ms() < end, "late row %s not published within 20 s"
				" while %d rows came after it", late_id, n);
		last = k_insert_same_shard(key, 20);
		n += 20;
		h_sleep_ms(20);
	}
	ck_assert_msg(k_wait_count(PUBLISHED_SQL, last, 1, 30) == 1,
			"row %s not published within 30 s", last);
}
END_TEST

/* (c) the same envelope delivered twice is handled once */
START_TEST(consumer_dedupes)
{
	char *mid = h_uuid(), *key = h_uuid(), *env = k_envelope(mid, key, "ok");
	char *mid2 = h_uuid(), *env2 = k_envelope(mid2, key, "ok");

	k_setup();
	k_produce(TEST_TOPIC, key, env);
	k_produce(TEST_TOPIC, key, env);
	/* same key -> same partition: when the sentinel is in, both copies were seen */
	k_produce(TEST_TOPIC, key, env2);
	ck_assert_msg(k_wait_count(SEEN_SQL, mid2, 1, 30) == 1,
			"sentinel message not consumed within 30 s");
	ck_assert_int_eq(k_wait_count(SEEN_SQL, mid, 1, 1), 1);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.inbox"
				" WHERE consumer_group = $1 AND message_id = $2::uuid",
				"test-consumer", mid), 1);
}
END_TEST

/* (d) a retriable failure is retried, then succeeds once */
START_TEST(consumer_retries)
{
	char *mid = h_uuid(), *key = h_uuid(), *env = k_envelope(mid, key, "retry-once");

	k_setup();
	k_produce(TEST_TOPIC, key, env);
	ck_assert_msg(k_wait_count(SEEN_SQL, mid, 1, 30) == 1,
			"retry-once message not handled within 30 s");
	ck_assert_int_gt(h_sql_int("SELECT max(attempts) FROM calendar.test_seen"
				" WHERE message_id = $1::uuid", mid), 1);
	h_sleep_ms(1000);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, mid), 1);
}
END_TEST

static void expect_dlq(const char *kind, const char *code, int timeout_s)
{
	char *mid = h_uuid(), *key = h_uuid(), *env = k_envelope(mid, key, kind);
	struct h_kmsgs *l;
	const char *got;
	int idx, count;

	k_produce(TEST_TOPIC, key, env);
	l = k_wait_topic(DLQ_TOPIC, mid, timeout_s, &idx, &count);
	ck_assert_msg(idx >= 0, "%s message not in %s within %d s", kind, DLQ_TOPIC, timeout_s);
	ck_assert_int_eq(count, 1);
	ck_assert_str_eq(l->v[idx].key, key);
	ck_assert_str_eq(l->v[idx].value, env);
	got = h_kmsg_header(&l->v[idx], "x-error-code");
	ck_assert_msg(got && !strcmp(got, code),
			"x-error-code %s, want %s", got ? got : "(none)", code);
	got = h_kmsg_header(&l->v[idx], "x-original-topic");
	ck_assert_msg(got && !strcmp(got, TEST_TOPIC),
			"x-original-topic missing");
	ck_assert_int_eq(h_sql_int(SEEN_SQL, mid), 0);
}

/* (e) non-retriable -> DLQ at once; invalid envelope -> DLQ; retry-always
 * -> DLQ after its 3 s deadline */
START_TEST(consumer_dlq)
{
	k_setup();
	expect_dlq("fatal", "TEST_FATAL", 30);
	expect_dlq("retry-always", "TEST_RETRY_ALWAYS", 30);
	/* a handler RETRY after a data exception (SQLSTATE 22P02) is not
	 * retriable: DLQ at once (the default deadline is 24 h) */
	expect_dlq("db-data", "DATA_EXCEPTION_22P02", 15);
	{
		char *key = h_uuid(), *bad = h_uuid(), val[128];
		struct h_kmsgs *l;
		int idx, count;

		snprintf(val, sizeof(val), "not json %s", bad);
		k_produce(TEST_TOPIC, key, val);
		l = k_wait_topic(DLQ_TOPIC, bad, 30, &idx, &count);
		ck_assert_msg(idx >= 0, "invalid envelope not in the DLQ");
		ck_assert_str_eq(h_kmsg_header(&l->v[idx], "x-error-code"), "INVALID_ENVELOPE");
	}
	{
		/* not UTF-8: an invalid envelope too (events.md: UTF-8 JSON) */
		char *mid = h_uuid(), *key = h_uuid(), *env = k_envelope(mid, key, "ok");
		char *p = strstr(env, "\"Test\"");
		struct h_kmsgs *l;
		int idx, count;

		ck_assert_ptr_nonnull(p);
		p[1] = (char)0xff;      /* aggregateType "\xffest" */
		k_produce(TEST_TOPIC, key, env);
		l = k_wait_topic(DLQ_TOPIC, mid, 30, &idx, &count);
		ck_assert_msg(idx >= 0, "non-UTF-8 envelope not in the DLQ");
		ck_assert_str_eq(h_kmsg_header(&l->v[idx], "x-error-code"), "INVALID_ENVELOPE");
		ck_assert_int_eq(h_sql_int(SEEN_SQL, mid), 0);
	}
}
END_TEST

/* (f) a batch (host/worker/consumer_batch.c, consumer_batch_max): a "stall" message holds
 * the partition for its 20 s deadline while five more land behind it on the
 * same key (one record batch); then they come as one batch: the OK ones apply once (their inbox
 * rows claimed by one statement: same processed_at), the FATAL one goes to the
 * DLQ without an inbox row, the RETRY one is held and the message after it is
 * dropped and redelivered after the retry: each applied exactly once. */
START_TEST(consumer_batch_savepoints)
{
	char *key = h_uuid(), *blk = h_uuid(), *ok1 = h_uuid(), *bad = h_uuid();
	char *ok2 = h_uuid(), *r1 = h_uuid(), *ok3 = h_uuid();
	const char *inbox_sql = "SELECT count(*) FROM calendar.inbox WHERE"
		" consumer_group = 'test-consumer' AND message_id = $1::uuid";
	struct h_kmsgs *l;
	int idx, count;
	const char *batch[5];

	k_setup();
	k_produce(TEST_TOPIC, key, k_envelope(blk, key, "stall"));
	batch[0] = k_envelope(ok1, key, "ok");
	batch[1] = k_envelope(bad, key, "fatal");
	batch[2] = k_envelope(ok2, key, "ok");
	batch[3] = k_envelope(r1, key, "retry-once");
	batch[4] = k_envelope(ok3, key, "ok");
	/* one record batch: the dev broker (librdkafka's mock) answers a fetch
	 * with one record batch, so separately produced messages would come one
	 * by one */
	ck_assert_int_eq(h_kafka_produce_batch(TEST_TOPIC, key, batch, 5), 0);
	ck_assert_msg(k_wait_count(SEEN_SQL, ok3, 1, 90) == 1,
			"the last message of the batch not applied within 90 s");
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok1), 1);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok2), 1);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, r1), 1);
	ck_assert_int_gt(h_sql_int("SELECT max(attempts) FROM calendar.test_seen"
				" WHERE message_id = $1::uuid", r1), 1);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, bad), 0);
	ck_assert_int_eq(h_sql_int(inbox_sql, ok1), 1);
	ck_assert_int_eq(h_sql_int(inbox_sql, ok3), 1);
	ck_assert_int_eq(h_sql_int(inbox_sql, r1), 1);
	ck_assert_int_eq(h_sql_int(inbox_sql, bad), 0);
	/* ok1 and ok2 went through the batch path (one claim statement) */
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT processed_at) FROM calendar.inbox"
				" WHERE consumer_group = 'test-consumer' AND message_id IN"
				" ($1::uuid, $2::uuid)", ok1, ok2), 1);
	l = k_wait_topic(DLQ_TOPIC, bad, 30, &idx, &count);
	ck_assert_msg(idx >= 0, "the FATAL message of the batch not in the DLQ");
	ck_assert_int_eq(count, 1);
	ck_assert_str_eq(h_kmsg_header(&l->v[idx], "x-error-code"), "TEST_FATAL");
	/* nothing comes twice afterwards */
	h_sleep_ms(2000);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok1), 1);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok3), 1);
}
END_TEST

/* (g) [consume] the set-based batch path (ABI 1.4 batch_fn, group
 * test-consumer-batch): OK, FATAL, OK, OK produced as one record batch
 * reach the batch handler in one call: the OK ones apply once (one set
 * INSERT: payload_kind "ok-set"), the FATAL one goes to the DLQ without an
 * inbox row or effect.  The same four envelopes produced again (a
 * redelivery / replay) change nothing: their inbox rows make them
 * duplicates.  A batch whose set statement fails ("setfail") is rolled back
 * as a whole and applied through the per-message handler: each message
 * once, none of the rolled-back "ok-set" rows left. */
START_TEST(consumer_batch_set_based)
{
	char *key = h_uuid(), *ok1 = h_uuid(), *bad = h_uuid(), *ok2 = h_uuid();
	char *ok3 = h_uuid(), *ok4 = h_uuid(), *sf = h_uuid(), *ok5 = h_uuid();
	const char *inbox_sql = "SELECT count(*) FROM calendar.inbox WHERE"
		" consumer_group = 'test-consumer-batch' AND message_id = $1::uuid";
	const char *kind_sql = "SELECT string_agg(payload_kind, ',') FROM calendar.test_seen"
		" WHERE message_id = $1::uuid";
	const char *dlq = "test-consumer-batch.dlq", *topic = "pin.test.batch.v1";
	const char *batch[4], *batch2[3];
	struct h_kmsgs *l;
	int idx, count;

	k_setup();
	batch[0] = k_envelope(ok1, key, "ok");
	batch[1] = k_envelope(bad, key, "fatal");
	batch[2] = k_envelope(ok2, key, "ok");
	batch[3] = k_envelope(ok3, key, "ok");
	ck_assert_int_eq(h_kafka_produce_batch(topic, key, batch, 4), 0);
	ck_assert_msg(k_wait_count(SEEN_SQL, ok3, 1, 90) == 1,
			"the last message of the batch not applied within 90 s");
	ck_assert_str_eq(h_sql_scalar(kind_sql, ok1), "ok-set");
	ck_assert_str_eq(h_sql_scalar(kind_sql, ok2), "ok-set");
	ck_assert_str_eq(h_sql_scalar(kind_sql, ok3), "ok-set");
	ck_assert_int_eq(h_sql_int(SEEN_SQL, bad), 0);
	ck_assert_int_eq(h_sql_int(inbox_sql, ok1), 1);
	ck_assert_int_eq(h_sql_int(inbox_sql, ok3), 1);
	ck_assert_int_eq(h_sql_int(inbox_sql, bad), 0);
	l = k_wait_topic(dlq, bad, 30, &idx, &count);
	ck_assert_msg(idx >= 0, "the FATAL message of the set batch not in the DLQ");
	ck_assert_int_eq(count, 1);
	ck_assert_str_eq(h_kmsg_header(&l->v[idx], "x-error-code"), "TEST_FATAL");

	/* the same envelopes again: the FATAL one (no inbox row) is rejected
	 * again, the others are duplicates */
	ck_assert_int_eq(h_kafka_produce_batch(topic, key, batch, 4), 0);
	for (int64_t end = h_now_ms() + 60000; h_now_ms() < end; h_sleep_ms(500)) {
		k_find(h_kafka_read_all(dlq, 10000), bad, &count);
		if (count >= 2)
			break;
	}
	ck_assert_msg(count == 2, "the redelivered batch was not consumed (DLQ count %d)",
			count);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok1), 1);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok2), 1);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok3), 1);
	ck_assert_int_eq(h_sql_int(inbox_sql, ok1), 1);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, bad), 0);

	/* a set statement that fails: the whole batch per message instead */
	batch2[0] = k_envelope(ok4, key, "ok");
	batch2[1] = k_envelope(sf, key, "setfail");
	batch2[2] = k_envelope(ok5, key, "ok");
	ck_assert_int_eq(h_kafka_produce_batch(topic, key, batch2, 3), 0);
	ck_assert_msg(k_wait_count(SEEN_SQL, ok5, 1, 90) == 1,
			"the fallen-back batch not applied within 90 s");
	ck_assert_str_eq(h_sql_scalar(kind_sql, ok4), "ok");
	ck_assert_str_eq(h_sql_scalar(kind_sql, sf), "setfail");
	ck_assert_str_eq(h_sql_scalar(kind_sql, ok5), "ok");
	ck_assert_int_eq(h_sql_int(inbox_sql, sf), 1);
	/* nothing comes twice afterwards */
	h_sleep_ms(2000);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok4), 1);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok5), 1);
	ck_assert_int_eq(h_sql_int(SEEN_SQL, ok1), 1);
}
END_TEST

/* (b) broker down: rows stay unpublished; broker back: published once */
START_TEST(relay_survives_broker_outage)
{
	char *mid = h_uuid(), *key = h_uuid(), *env = k_envelope(mid, key, "noop");
	char *id;
	struct h_kmsgs *l;
	int idx, count;

	k_setup();
	h_broker_stop();
	id = k_insert_outbox(mid, key, env);
	h_sleep_ms(4000);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox o WHERE id = $1::bigint"
				" AND NOT calendar.outbox_sent(o)", id), 1);
	h_broker_start();
	ck_assert_msg(k_wait_count(PUBLISHED_SQL, id, 1, 45) == 1,
			"row not published within 45 s of the broker's return");
	l = k_wait_topic(TEST_TOPIC, mid, 10, &idx, &count);
	ck_assert_msg(idx >= 0, "message not on the topic after the outage");
	ck_assert_int_eq(count, 1);
	ck_assert_str_eq(l->v[idx].key, key);
	/* consumers follow the broker to its new address */
	{
		char *m2 = h_uuid(), *e2 = k_envelope(m2, key, "ok");

		k_produce(TEST_TOPIC, key, e2);
		ck_assert_msg(k_wait_count(SEEN_SQL, m2, 1, 45) == 1,
				"consumer did not resume after the broker restart");
	}
}
END_TEST

/* ------------------------------------------------ issue 30: SQLSTATE classes */

/* A trigger on calendar.test_seen raises the SQLSTATE of
 * calendar.test_fault for the message being inserted ("seen-3s" messages
 * of testcons.so answer RETRY with a 3 s deadline when it fails) */
static void fault_setup(void)
{
	k_setup();
	h_sql("CREATE TABLE IF NOT EXISTS calendar.test_fault"
			" (message_id uuid PRIMARY KEY, errcode text NOT NULL)");
	h_sql("CREATE OR REPLACE FUNCTION calendar.test_fault_raise() RETURNS trigger"
			" LANGUAGE plpgsql AS $$ DECLARE e text; BEGIN"
			" SELECT errcode INTO e FROM calendar.test_fault"
			" WHERE message_id = NEW.message_id;"
			" IF FOUND THEN RAISE EXCEPTION 'injected fault %', e USING ERRCODE = e;"
			" END IF; RETURN NEW; END $$");
	h_sql("CREATE OR REPLACE TRIGGER test_fault BEFORE INSERT ON calendar.test_seen"
			" FOR EACH ROW EXECUTE FUNCTION calendar.test_fault_raise()");
}

/* count of the dead-letter rows of test-consumer holding mid */
static const char *DEAD_SQL = "SELECT count(*) FROM calendar.dead_letters"
	" WHERE consumer_group = 'test-consumer'"
	" AND position(convert_to($1, 'UTF8') IN payload) > 0";

/* a poison message: its INSERT fails with state (NULL: no fault) */
static char *fault_produce(const char *state)
{
	char *mid = h_uuid(), *key = h_uuid();

	if (state)
		h_sql("INSERT INTO calendar.test_fault VALUES ($1::uuid, $2)", mid, state);
	k_produce(TEST_TOPIC, key, k_envelope(mid, key, "seen-3s"));
	return mid;
}

/* (g) SQLSTATEs about the message's data: the DLQ at once, with the
 * class in the code (54 and 44 went through the 3 s deadline before) */
START_TEST(sqlstate_data_dead_lettered)
{
	static const char *const states[][2] = {
		{ "22023", "DATA_EXCEPTION_22023" },      /* invalid parameter value */
		{ "22P02", "DATA_EXCEPTION_22P02" },      /* invalid text representation */
		{ "54000", "DATA_EXCEPTION_54000" },      /* program limit exceeded */
		{ "54001", "DATA_EXCEPTION_54001" },      /* statement too complex */
		{ "23514", "INTEGRITY_VIOLATION_23514" }, /* check violation */
		{ "23503", "INTEGRITY_VIOLATION_23503" }, /* foreign key violation */
		{ "44000", "INTEGRITY_VIOLATION_44000" }, /* WITH CHECK OPTION */
	};
	enum { N = sizeof(states) / sizeof(states[0]) };
	char *mids[N];
	int64_t t0;

	fault_setup();
	t0 = h_now_ms();
	for (int i = 0; i < N; i++)
		mids[i] = fault_produce(states[i][0]);
	for (int i = 0; i < N; i++) {
		char *code;

		ck_assert_msg(k_wait_count(DEAD_SQL, mids[i], 1, 20) == 1,
				"SQLSTATE %s: no dead letter within 20 s", states[i][0]);
		code = h_sql_scalar("SELECT error_code FROM calendar.dead_letters"
				" WHERE consumer_group = 'test-consumer'"
				" AND position(convert_to($1, 'UTF8') IN payload) > 0", mids[i]);
		ck_assert_msg(code && !strcmp(code, states[i][1]),
				"SQLSTATE %s: dead letter code %s, want %s", states[i][0],
				code ? code : "(none)", states[i][1]);
		ck_assert_int_eq(h_sql_int(SEEN_SQL, mids[i]), 0);
	}
	printf("sqlstate_data_dead_lettered: %d dead letters in %lld ms\n", N,
			(long long)(h_now_ms() - t0));
	{
		/* and on the DLQ topic with the same code */
		int idx, count;
		struct h_kmsgs *l = k_wait_topic(DLQ_TOPIC, mids[N - 1], 20, &idx, &count);

		ck_assert_msg(idx >= 0, "not on %s", DLQ_TOPIC);
		ck_assert_str_eq(h_kmsg_header(&l->v[idx], "x-error-code"), states[N - 1][1]);
	}
	h_sql("DELETE FROM calendar.test_fault");
}
END_TEST

/* The worker log's lines since the last call (the stack's logs/worker.log,
 * read from where the previous call stopped); harness-owned. */
static char *log_new(long *pos)
{
	FILE *f = fopen(h_sprintf("%s/logs/worker.log", h_env("PIN_DEV_DIR")), "r");
	char *buf;
	long end;
	size_t n;

	if (!f)
		return h_strdup("");
	fseek(f, 0, SEEK_END);
	end = ftell(f);
	if (*pos < 0 || *pos > end)
		*pos = end;
	buf = h_sprintf("%*s", (int)(end - *pos), "");
	fseek(f, *pos, SEEK_SET);
	n = fread(buf, 1, (size_t)(end - *pos), f);
	buf[n] = '\0';
	*pos += (long)n;
	fclose(f);
	return buf;
}

/* true when text has a line holding both needles */
static bool line_with(const char *text, const char *n1, const char *n2)
{
	for (const char *p = text; (p = strstr(p, n2)); p++) {
		const char *bol = p, *eol = strchr(p, '\n'), *q;

		while (bol > text && bol[-1] != '\n')
			bol--;
		q = strstr(bol, n1);
		if (q && (!eol || q < eol))
			return true;
	}
	return false;
}

/* (h) SQLSTATEs about the database's state or capacity, or not about the
 * message at all (42: our SQL, a grant): never the DLQ.  Each message is
 * held as an infrastructure failure, still not dead-lettered 5 s after its
 * first attempt (the handler's 3 s deadline was the old path to the DLQ),
 * then its fault is removed and it is applied, exactly once.  Messages
 * behind one in the same partition (3 partitions) are tried after it. */
START_TEST(sqlstate_infra_retried)
{
	static const char *const states[] = {
		"08006",    /* connection failure */
		"53100",    /* disk full */
		"53200",    /* out of memory */
		"53300",    /* too many connections */
		"57014",    /* statement timeout / canceled */
		"57P01",    /* admin shutdown */
		"57P03",    /* cannot connect now */
		"58030",    /* I/O error */
		"25006",    /* read-only transaction: a standby after a failover */
		"40001",    /* serialization failure */
		"40P01",    /* deadlock */
		"55P03",    /* lock not available */
		"XX000",    /* internal error */
		"42P01",    /* undefined table: schema behind the code */
		"42501",    /* insufficient privilege: a missing grant */
	};
	enum { N = sizeof(states) / sizeof(states[0]) };
	char *mids[N];
	int64_t held_at[N] = { 0 }, t0, end;
	bool fixed[N] = { false };
	int nfixed = 0;
	long pos = -1;
	char *seen = h_strdup("");

	fault_setup();
	(void)log_new(&pos);
	t0 = h_now_ms();
	for (int i = 0; i < N; i++)
		mids[i] = fault_produce(states[i]);
	end = t0 + 120000;
	while (nfixed < N && h_now_ms() < end) {
		char *more = log_new(&pos);

		if (*more)
			seen = h_sprintf("%s%s", seen, more);
		for (int i = 0; i < N; i++) {
			if (fixed[i])
				continue;
			ck_assert_msg(!line_with(seen, "consumer: retriable failure", mids[i]),
					"SQLSTATE %s: retried with a deadline", states[i]);
			if (!held_at[i] && line_with(seen, "consumer: infrastructure failure",
					mids[i]))
				held_at[i] = h_now_ms();
			if (held_at[i] && h_now_ms() - held_at[i] > 5000) {
				ck_assert_msg(h_sql_int(DEAD_SQL, mids[i]) == 0,
						"SQLSTATE %s: dead-lettered", states[i]);
				ck_assert_int_eq(h_sql_int(SEEN_SQL, mids[i]), 0);
				h_sql("DELETE FROM calendar.test_fault WHERE message_id = $1::uuid",
						mids[i]);
				fixed[i] = true;
				nfixed++;
			}
		}
		h_sleep_ms(300);
	}
	for (int i = 0; i < N; i++)
		ck_assert_msg(fixed[i], "SQLSTATE %s: never held as an infrastructure"
				" failure within 120 s", states[i]);
	for (int i = 0; i < N; i++)
		ck_assert_msg(k_wait_count(SEEN_SQL, mids[i], 1, 60) == 1,
				"SQLSTATE %s: not applied within 60 s of the fix", states[i]);
	printf("sqlstate_infra_retried: %d SQLSTATEs held > 5 s each, all applied"
			" %lld ms after the first produce\n", N, (long long)(h_now_ms() - t0));
	ck_assert_int_gt(h_sql_int("SELECT max(attempts) FROM calendar.test_seen"
				" WHERE message_id = $1::uuid", mids[0]), 2);
	{
		struct h_kmsgs *l = h_kafka_read_all(DLQ_TOPIC, 10000);

		for (int i = 0; i < N; i++) {
			int count;

			ck_assert_msg(k_find(l, mids[i], &count) < 0,
					"SQLSTATE %s: on %s", states[i], DLQ_TOPIC);
			ck_assert_int_eq(h_sql_int(SEEN_SQL, mids[i]), 1);
			ck_assert_int_eq(h_sql_int(DEAD_SQL, mids[i]), 0);
		}
	}
}
END_TEST

/* ------------------------------------------ issue 30: working the DLQ */

/* pin-host --dlq ARGS with the stack's config and worker plugins: the
 * output (stdout and stderr), *rc the exit status */
static char *dlq_tool(const char *args, int *rc)
{
	char *cmd = h_sprintf("%s --config %s --plugins %s --dlq %s 2>&1",
			h_env("PIN_HOST_BIN"), h_env("PIN_CONFIG"), h_env("PIN_WORKER_PLUGINS"),
			args);
	FILE *p = popen(cmd, "r");
	char buf[4096], *out = h_strdup("");
	size_t n;

	ck_assert_ptr_nonnull(p);
	while ((n = fread(buf, 1, sizeof(buf) - 1, p)) > 0) {
		buf[n] = '\0';
		out = h_sprintf("%s%s", out, buf);
	}
	*rc = pclose(p);
	*rc = WIFEXITED(*rc) ? WEXITSTATUS(*rc) : -1;
	return out;
}

static const char *PENDING = "pin_dlq_pending{group=\"test-consumer\"}";

/* The state of the stack's Prometheus alert PinDeadLetters{group=
 * "test-consumer"} (packaging/prometheus rules, scrape and evaluation every
 * second): "firing", "pending", or "" when there is none; *value (when
 * not NULL) its value, the group's pending dead letters (-1: none) */
static const char *prom_dlq_alert(double *value)
{
	FILE *p = popen(h_sprintf("curl -sf %s/api/v1/alerts",
			h_env("PIN_PROMETHEUS_URL")), "r");
	char buf[65536];
	size_t n;
	json_object *root, *alerts;
	const char *state = "";

	if (value)
		*value = -1;
	ck_assert_ptr_nonnull(p);
	n = fread(buf, 1, sizeof(buf) - 1, p);
	buf[n] = '\0';
	pclose(p);
	root = json_tokener_parse(buf);
	ck_assert_msg(root != NULL, "Prometheus alerts API: %.300s", buf);
	alerts = h_jget(h_jget(root, "data"), "alerts");
	for (size_t i = 0; alerts && i < json_object_array_length(alerts); i++) {
		json_object *a = json_object_array_get_idx(alerts, i);
		const char *nm = h_jstr(h_jget(a, "labels"), "alertname");
		const char *gr = h_jstr(h_jget(a, "labels"), "group");

		if (nm && gr && !strcmp(nm, "PinDeadLetters") && !strcmp(gr, "test-consumer")) {
			state = h_strdup(h_jstr(a, "state") ? h_jstr(a, "state") : "?");
			if (value)
				*value = h_jstr(a, "value") ? atof(h_jstr(a, "value")) : -1;
		}
	}
	json_object_put(root);
	return state;
}

/* (i) the walk-through of doc/operating.md "Dead letters": a poison message,
 * its dead letter and the gauge in a real scrape, --dlq list / show, the
 * cause fixed, --dlq replay, the message applied, the gauge back at 0; an
 * ack; the purge of old handled rows */
START_TEST(dlq_walkthrough)
{
	struct h_host w;
	char *out, *id, *mid, *mid2, *id2;
	int rc;
	int64_t t0, t_dead, t_gauge1, t_replay, t_applied, t_gauge0;
	int64_t t_fire = -1, t_clear = -1;
	bool prom = *h_env_opt("PIN_PROMETHEUS_URL", "") != '\0';

	fault_setup();
	h_host_stack_worker(&w);
	/* the earlier tests' dead letters of the group: acked first */
	out = dlq_tool("ack test-consumer all --reason 'test: earlier tests'", &rc);
	ck_assert_msg(rc == 0, "ack all: %d\n%s", rc, out);
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric(&w, PENDING) == 0, 15000),
			"%s not 0 after acking all: %g", PENDING, h_host_metric(&w, PENDING));
	if (prom)
		ck_assert_msg(H_WAIT_UNTIL(!*prom_dlq_alert(NULL), 20000),
				"PinDeadLetters still %s with nothing pending", prom_dlq_alert(NULL));
	out = dlq_tool("list test-consumer", &rc);
	ck_assert_msg(rc == 0 && strstr(out, "0 pending"), "list: %d\n%s", rc, out);

	/* the poison message: its INSERT breaks a check constraint */
	t0 = h_now_ms();
	mid = fault_produce("23514");
	ck_assert_msg(k_wait_count(DEAD_SQL, mid, 1, 20) == 1, "no dead letter");
	t_dead = h_now_ms();
	id = h_sql_scalar("SELECT id::text FROM calendar.dead_letters WHERE"
			" consumer_group = 'test-consumer' AND handled_at IS NULL"
			" AND position(convert_to($1, 'UTF8') IN payload) > 0", mid);
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric(&w, PENDING) == 1, 15000),
			"%s not 1: %g", PENDING, h_host_metric(&w, PENDING));
	t_gauge1 = h_now_ms();
	if (prom) {     /* the seeds' "DLQ > 0": the alert fires, its value
			 * the one dead letter pending */
		double v = -1;

		ck_assert_msg(H_WAIT_UNTIL(!strcmp(prom_dlq_alert(&v), "firing") && v == 1,
				20000), "PinDeadLetters not firing with value 1: '%s' %g",
				prom_dlq_alert(&v), v);
		t_fire = h_now_ms();
	}
	out = dlq_tool("list test-consumer", &rc);
	ck_assert_msg(rc == 0 && strstr(out, id) && strstr(out, "INTEGRITY_VIOLATION_23514") &&
			strstr(out, TEST_TOPIC) && strstr(out, "1 pending") && !strstr(out, mid),
			"list (the payload only with show): %d\n%s", rc, out);
	out = dlq_tool(h_sprintf("show test-consumer %s", id), &rc);
	ck_assert_msg(rc == 0 && strstr(out, mid) && strstr(out, "seen-3s"),
			"show: %d\n%s", rc, out);

	/* the cause fixed, the message replayed to its topic */
	h_sql("DELETE FROM calendar.test_fault WHERE message_id = $1::uuid", mid);
	t_replay = h_now_ms();
	out = dlq_tool(h_sprintf("replay test-consumer %s", id), &rc);
	ck_assert_msg(rc == 0 && strstr(out, "replayed"), "replay: %d\n%s", rc, out);
	ck_assert_msg(k_wait_count(SEEN_SQL, mid, 1, 30) == 1,
			"replayed message not applied within 30 s");
	t_applied = h_now_ms();
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.dead_letters WHERE"
			" id = $1::bigint AND handled_how = 'replayed'", id), 1);
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric(&w, PENDING) == 0, 15000),
			"%s not back to 0: %g", PENDING, h_host_metric(&w, PENDING));
	t_gauge0 = h_now_ms();
	if (prom) {     /* and clears once the last one is handled */
		ck_assert_msg(H_WAIT_UNTIL(!*prom_dlq_alert(NULL), 20000),
				"PinDeadLetters still '%s' after the replay", prom_dlq_alert(NULL));
		t_clear = h_now_ms();
	}
	/* a replay again: nothing pending any more */
	out = dlq_tool(h_sprintf("replay test-consumer %s", id), &rc);
	ck_assert_msg(rc == 1 && strstr(out, "no pending"), "replay twice: %d\n%s", rc, out);
	printf("dlq_walkthrough (ms from the poison produce): dead letter %lld,"
			" gauge 1 in a scrape %lld, alert firing %lld, list+show+fix done,"
			" replay %lld, applied %lld, gauge 0 %lld, alert cleared %lld\n",
			(long long)(t_dead - t0), (long long)(t_gauge1 - t0),
			(long long)(t_fire < 0 ? -1 : t_fire - t0), (long long)(t_replay - t0),
			(long long)(t_applied - t0), (long long)(t_gauge0 - t0),
			(long long)(t_clear < 0 ? -1 : t_clear - t0));

	/* ack: a second poison message, marked handled without replay */
	mid2 = fault_produce("22P02");
	ck_assert_msg(k_wait_count(DEAD_SQL, mid2, 1, 20) == 1, "no second dead letter");
	id2 = h_sql_scalar("SELECT id::text FROM calendar.dead_letters WHERE"
			" consumer_group = 'test-consumer' AND handled_at IS NULL"
			" AND position(convert_to($1, 'UTF8') IN payload) > 0", mid2);
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric(&w, PENDING) == 1, 15000), "gauge not 1");
	out = dlq_tool(h_sprintf("ack test-consumer %s --reason 'bad test data'", id2), &rc);
	ck_assert_msg(rc == 0 && strstr(out, "acked"), "ack: %d\n%s", rc, out);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.dead_letters WHERE"
			" id = $1::bigint AND handled_how = 'acked'"
			" AND handled_note = 'bad test data'", id2), 1);
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric(&w, PENDING) == 0, 15000), "gauge not 0");
	ck_assert_int_eq(h_sql_int(SEEN_SQL, mid2), 0);
	/* the bound: handled rows older than dlq_handled_retention_days (90)
	 * are deleted by the group's host, newer ones and pending ones kept */
	{
		const char *ins = "INSERT INTO calendar.dead_letters (consumer_group, topic,"
			" kafka_partition, kafka_offset, error_code, dead_at, handled_at,"
			" handled_how) VALUES ('test-consumer', 'pin.test.purge', 0,"
			" $1::bigint, 'TEST', now() - interval '200 days',"
			" now() - make_interval(days => $2::int), 'acked') RETURNING id::text";
		char *off = h_sprintf("%lld", (long long)h_now_ms());
		char *off2 = h_sprintf("%lld", (long long)h_now_ms() + 1);
		char *old_id = h_sql_scalar(ins, off, "91");
		char *new_id = h_sql_scalar(ins, off2, "89");

		ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM"
				" calendar.dead_letters WHERE id = $1::bigint", old_id) == 0, 15000),
				"a dead letter handled 91 days ago was not purged");
		ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.dead_letters"
				" WHERE id = ANY (ARRAY[$1, $2, $3]::bigint[])", new_id, id, id2), 3);
	}
	/* an unknown group: usage error, the groups listed */
	out = dlq_tool("list no-such-group", &rc);
	ck_assert_msg(rc == 2 && strstr(out, "test-consumer"), "unknown group: %d\n%s", rc, out);
	h_sql("DELETE FROM calendar.test_fault");
}
END_TEST

/* A topic deleted and created again starts its offsets at 0, so a message
 * can die at the coordinates (group, topic, partition, offset) of a dead
 * letter recorded before: the row takes the new message whole and is
 * pending, so --dlq replay sends what the topic holds now, and the worker
 * warns that a pending dead letter was replaced (naming its row).  The next
 * offset of a key's partition is known from a first dead letter of that
 * key; a pending row "from before" is put there, then the second message
 * dies on it.  (The row kept the older payload under the new error before,
 * and nothing was said.) */
START_TEST(dead_letter_on_recorded_coordinates)
{
	char *key = h_uuid(), *m1 = h_uuid(), *m2 = h_uuid(), *part, *next, *old_id;
	const char *at = "consumer_group = 'test-consumer' AND topic = $1"
		" AND kafka_partition = $2::int AND kafka_offset = $3::bigint";

	k_setup();
	k_produce(TEST_TOPIC, key, k_envelope(m1, key, "fatal"));
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.dead_letters"
			" WHERE position(convert_to($1, 'UTF8') IN payload) > 0", m1) == 1,
			20000), "the first message was not dead-lettered");
	/* its partition, and the offset after its own: where m2 will land */
	part = h_sql_scalar("SELECT kafka_partition || ' ' || (kafka_offset + 1)"
			" FROM calendar.dead_letters"
			" WHERE position(convert_to($1, 'UTF8') IN payload) > 0", m1);
	next = strchr(part, ' ');
	*next++ = '\0';
	old_id = h_sql_scalar("INSERT INTO calendar.dead_letters (consumer_group, topic,"
			" kafka_partition, kafka_offset, msg_key, payload, error_code, dead_at)"
			" VALUES ('test-consumer', $1, $2::int, $3::bigint, 'older',"
			" 'a message of the topic before it was created again', 'TEST_OLD',"
			" now() - interval '3 days') ON CONFLICT (consumer_group, topic,"
			" kafka_partition, kafka_offset) DO UPDATE SET msg_key = excluded.msg_key,"
			" payload = excluded.payload, error_code = excluded.error_code,"
			" dead_at = excluded.dead_at, handled_at = NULL, handled_how = NULL,"
			" handled_note = NULL RETURNING id::text", TEST_TOPIC, part, next);
	k_produce(TEST_TOPIC, key, k_envelope(m2, key, "fatal"));
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int(h_sprintf("SELECT count(*) FROM"
			" calendar.dead_letters WHERE %s AND error_code = 'TEST_FATAL'", at),
			TEST_TOPIC, part, next) == 1, 20000),
			"the second message did not die at %s/%s", part, next);
	ck_assert_int_eq(h_sql_int(h_sprintf("SELECT count(*) FROM calendar.dead_letters"
			" WHERE %s AND position(convert_to($4, 'UTF8') IN payload) > 0"
			" AND msg_key = convert_to($5, 'UTF8') AND handled_at IS NULL"
			" AND dead_at > now() - interval '1 minute'", at),
			TEST_TOPIC, part, next, m2, key), 1);
	ck_assert_msg(H_WAIT_UNTIL(h_log_has("worker.log", "a pending dead letter was replaced",
			h_sprintf("\"id\":\"%s\"", old_id)), 10000),
			"no warning naming the replaced dead letter %s", old_id);
	h_sql(h_sprintf("DELETE FROM calendar.dead_letters WHERE (%s) OR (consumer_group ="
			" 'test-consumer' AND payload IS NOT NULL AND position(convert_to($4, 'UTF8')"
			" IN payload) > 0)", at), TEST_TOPIC, part, next, m1);
}
END_TEST

Suite *make_kafka_suite(void)
{
	Suite *s = suite_create("kafka");
	TCase *tc = h_tcase("worker", 150);
	/* issue 30: SQLSTATE classes, the dead letters worked (before the
	 * broker restart at the end of "worker") */
	TCase *dlq = h_tcase("dlq", 200);

	tcase_add_test(dlq, sqlstate_data_dead_lettered);
	tcase_add_test(dlq, sqlstate_infra_retried);
	tcase_add_test(dlq, dlq_walkthrough);
	tcase_add_test(dlq, dead_letter_on_recorded_coordinates);
	suite_add_tcase(s, dlq);

	tcase_add_test(tc, relay_publishes_once);
	tcase_add_test(tc, relay_publishes_api_outbox);
	tcase_add_test(tc, relay_publishes_only_as_leader);
	tcase_add_test(tc, consumer_dedupes);
	tcase_add_test(tc, consumer_retries);
	tcase_add_test(tc, consumer_dlq);
	tcase_add_test(tc, consumer_batch_savepoints);
	tcase_add_test(tc, consumer_batch_set_based);
	/* last: restarts the broker (a new, empty mock cluster) */
	tcase_add_test(tc, relay_survives_broker_outage);
	suite_add_tcase(s, tc);
	{
		TCase *mk = h_tcase("marking", 150);

		tcase_add_checked_fixture(mk, NULL, k_mark_teardown);
		tcase_add_test(mk, relay_publishes_late_commit);
		suite_add_tcase(s, mk);
	}
	return s;
}
