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

/* count (0/1) of outbox row $1 marked published */
static const char *PUBLISHED_SQL = "SELECT count(*) FROM calendar.outbox"
	" WHERE id = $1::bigint AND published_at IS NOT NULL";

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
	ck_assert_msg(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE id = $1::bigint"
				" AND published_at IS NULL", id) == 1,
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

/* (b') a row whose transaction took its id first and committed after rows
 * behind it were published is published too -- while rows keep coming into
 * its shard (20 every 20 ms: the relay's reads keep finding rows, it goes
 * back to the start at most every relay_rewind_ms then, host/worker/relay.c) */
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
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE id = $1::bigint"
				" AND published_at IS NULL", id), 1);
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

Suite *make_kafka_suite(void)
{
	Suite *s = suite_create("kafka");
	TCase *tc = h_tcase("worker", 150);

	tcase_add_test(tc, relay_publishes_once);
	tcase_add_test(tc, relay_publishes_api_outbox);
	tcase_add_test(tc, relay_publishes_only_as_leader);
	tcase_add_test(tc, relay_publishes_late_commit);
	tcase_add_test(tc, consumer_dedupes);
	tcase_add_test(tc, consumer_retries);
	tcase_add_test(tc, consumer_dlq);
	tcase_add_test(tc, consumer_batch_savepoints);
	tcase_add_test(tc, consumer_batch_set_based);
	/* last: restarts the broker (a new, empty mock cluster) */
	tcase_add_test(tc, relay_survives_broker_outage);
	suite_add_tcase(s, tc);
	return s;
}
