/*
 * test_relaycursor.c -- the outbox relay's commit-ordered cursor
 * (relay_cursor = true; host/worker/relay_batch.c "The commit-ordered
 * cursor", doc/operating.md "Outbox relay cursor", issue 31 item 3).
 *
 * The test stack's worker host relays by the cursor (the default).  Each
 * case replaces it by a host of its own with relay_cursor on, which it can
 * kill, and starts the stack's worker again at its end;
 * cursor_follows_marking_host switches back to marking and runs a marking
 * host beside the cursor host, as a rolling upgrade from an earlier release
 * does, and leaves the outboxes relayed by the cursors again.
 */
#include <math.h>
#include <signal.h>
#include <string.h>

#include "harness.h"

/* a topic the dev broker has and nothing consumes */
#define CUR_TOPIC "pin.bench.relay.v1"

static struct h_host cur_host, mark_host;

static void cur_up(void)
{
	static const char *const env[] = { "PIN_RELAY_CURSOR=true", NULL };

	if (h_host_pid("worker") > 0)
		h_worker_kill9();
	h_host_start(&cur_host, "worker-cursor", "worker", NULL, 0, env);
	/* every shard of calendar.outbox led with a cursor */
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric_sum(&cur_host,
			"pin_outbox_relay_shard_leader") >= 4 && h_sql_int("SELECT count(*) FROM"
			" calendar.outbox_cursor WHERE outbox = 'calendar.outbox' AND shards = 4") == 4,
			30000), "the cursor host leads no shards (logs/worker-cursor.log)");
}

static void cur_down(void)
{
	h_host_stop(&cur_host);
	h_relay_marking_stop(&mark_host);   /* and the stack's worker started */
}

/* relay member locks of relay_shards 4: marking (objid 4) or by the cursor
 * (4 + 65536) */
static long long cur_members(int cursor)
{
	return h_sql_int("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
			" AND classid = 730153 AND objsubid = 2 AND granted AND objid = $1::int",
			cursor ? "65540" : "4");
}

static char *cur_insert(PGconn *c, const char *key, const char *kind)
{
	char *mid = h_uuid(), *env, *id = NULL;
	const char *p[3];
	PGresult *res;

	env = h_sprintf("{\"messageId\":\"%s\",\"eventType\":\"pin.test.event\","
			"\"contractVersion\":1,\"createdAt\":\"2026-12-05T00:00:00.000Z\","
			"\"aggregateType\":\"Test\",\"aggregateId\":\"%s\",\"correlationId\":null,"
			"\"payload\":{\"kind\":\"%s\"}}", mid, key, kind);
	p[0] = mid;
	p[1] = key;
	p[2] = env;
	res = PQexecParams(c, "INSERT INTO calendar.outbox (message_id, topic, key, envelope,"
			" created_at) VALUES ($1::uuid, '" CUR_TOPIC "', $2, $3::jsonb, now())"
			" RETURNING id::text", 3, NULL, p, NULL, NULL, 0);
	if (PQresultStatus(res) == PGRES_TUPLES_OK)
		id = h_strdup(PQgetvalue(res, 0, 0));
	PQclear(res);
	ck_assert_msg(id, "outbox insert failed: %s", PQerrorMessage(c));
	return id;
}

static PGconn *cur_conn(void)
{
	PGconn *c = PQconnectdb(h_env("PIN_PG_DSN"));

	ck_assert_int_eq(PQstatus(c), CONNECTION_OK);
	return c;
}

static void cur_exec(PGconn *c, const char *sql)
{
	PGresult *res = PQexec(c, sql);
	bool ok = PQresultStatus(res) == PGRES_COMMAND_OK ||
		PQresultStatus(res) == PGRES_TUPLES_OK;

	PQclear(res);
	ck_assert_msg(ok, "%s: %s", sql, PQerrorMessage(c));
}

/* positions of the messages of key on CUR_TOPIC whose value holds each
 * kind (-1: not there) */
static void cur_positions(const char *key, const char *k1, const char *k2, int *p1, int *p2)
{
	struct h_kmsgs *l = h_kafka_read_all(CUR_TOPIC, 10000);
	int n = 0;

	*p1 = *p2 = -1;
	for (size_t i = 0; l && i < l->n; i++) {
		if (!l->v[i].key || strcmp(l->v[i].key, key) || !l->v[i].value)
			continue;
		if (strstr(l->v[i].value, k1) && *p1 < 0)
			*p1 = n;
		else if (strstr(l->v[i].value, k2) && *p2 < 0)
			*p2 = n;
		n++;
	}
}

/* A key's rows leave in the order they were written, also when the later
 * writer's transaction took its id first: A takes its xid, B writes row 1 of
 * the key and commits, A (serialised behind B, as a writer of the same
 * aggregate is) writes row 2 and commits.  Read in plain (xid, id) order, row
 * 2 would go first; the trigger of R__functions.sql orders it after row 1.
 * Nothing is marked published; the cursor passes both rows. */
START_TEST(cursor_keeps_key_order)
{
	char *key = h_uuid(), *id1, *id2;
	PGconn *a = cur_conn(), *b = cur_conn();
	int p1, p2;

	cur_up();
	cur_exec(a, "BEGIN");
	cur_exec(a, "SELECT pg_current_xact_id()");     /* A's xid: the lower */
	cur_exec(b, "BEGIN");
	id1 = cur_insert(b, key, "first");
	cur_exec(b, "COMMIT");
	id2 = cur_insert(a, key, "second");
	cur_exec(a, "COMMIT");
	PQfinish(a);
	PQfinish(b);
	ck_assert_msg(H_WAIT_UNTIL((cur_positions(key, "\"first\"", "\"second\"", &p1, &p2),
			p1 >= 0 && p2 >= 0), 20000), "rows %s, %s not both on " CUR_TOPIC
			" within 20 s (%d, %d)", id1, id2, p1, p2);
	ck_assert_msg(p1 < p2, "the key's second row (id %s) left before its first (id %s)",
			id2, id1);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE id IN"
			" ($1::bigint, $2::bigint) AND published_at IS NULL", id1, id2), 2);
	/* not marked (above): sent means the shard's cursor passed it */
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.outbox o"
			" WHERE o.id = $1::bigint AND calendar.outbox_sent(o)", id2) == 1, 10000),
			"the shard's cursor did not pass row %s", id2);
	cur_down();
}
END_TEST

/* A transaction that holds an id holds the cursor back: a row committed after
 * it began is not published while it runs; the pending gauge counts the row,
 * the oldest-transaction gauge shows the wait; the row goes out once it
 * ends. */
START_TEST(cursor_held_by_open_transaction)
{
	char *key = h_uuid(), *id;
	PGconn *lng = cur_conn(), *w = cur_conn();
	int p1, p2;
	double age = NAN, pending = NAN;

	cur_up();
	cur_exec(lng, "BEGIN");
	cur_exec(lng, "SELECT pg_current_xact_id()");
	id = cur_insert(w, key, "held");
	PQfinish(w);
	h_sleep_ms(3000);
	cur_positions(key, "\"held\"", "-", &p1, &p2);
	ck_assert_msg(p1 < 0, "row %s published while an older transaction ran", id);
	ck_assert_msg(H_WAIT_UNTIL((age = h_host_metric(&cur_host,
			"pin_outbox_relay_oldest_xact_age_seconds")) >= 2 &&
			(pending = h_host_metric(&cur_host,
			"pin_outbox_pending{outbox=\"calendar.outbox\"}")) >= 1, 10000),
			"gauges: oldest transaction %.1f s, pending %.0f", age, pending);
	cur_exec(lng, "COMMIT");
	PQfinish(lng);
	ck_assert_msg(H_WAIT_UNTIL((cur_positions(key, "\"held\"", "-", &p1, &p2), p1 >= 0),
			20000), "row %s not published within 20 s of the commit", id);
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric(&cur_host,
			"pin_outbox_relay_oldest_xact_age_seconds") < 2, 10000),
			"the oldest-transaction gauge stays up");
	cur_down();
}
END_TEST

/* A row the broker refuses for good is parked (parked_at, last_error, the
 * metric); the rows of its key behind it go out, and the cursor passes
 * them. */
START_TEST(cursor_parks_refused_row)
{
	char *key = h_uuid(), *bad, *ok;
	PGconn *c = cur_conn();
	int p1, p2;

	cur_up();
	bad = h_sql_scalar("INSERT INTO calendar.outbox (message_id, topic, key, envelope,"
			" created_at) VALUES (gen_random_uuid(), '" CUR_TOPIC "', $1,"
			" jsonb_build_object('blob', repeat('x', 1500000)), now()) RETURNING id::text",
			key);
	ok = cur_insert(c, key, "behind");
	PQfinish(c);
	ck_assert_msg(H_WAIT_UNTIL((cur_positions(key, "\"behind\"", "-", &p1, &p2), p1 >= 0),
			20000), "row %s behind the refused row %s not published", ok, bad);
	ck_assert_ptr_nonnull(h_sql_scalar("SELECT parked_at FROM calendar.outbox"
			" WHERE id = $1::bigint", bad));
	ck_assert_msg(strstr(h_sql_scalar("SELECT last_error FROM calendar.outbox"
			" WHERE id = $1::bigint", bad), "too large"), "no last_error");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE"
			" published_at IS NOT NULL AND id IN ($1::bigint, $2::bigint)", bad, ok), 0);
	/* what operators ask (operating.md "Did a row go out?"): the row
	 * behind went out, the parked one did not, though the cursor passed
	 * it */
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.outbox o WHERE"
			" id = $1::bigint AND calendar.outbox_sent(o)", ok) == 1, 10000),
			"calendar.outbox_sent false for row %s, which is on the topic", ok);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox o JOIN"
			" calendar.outbox_cursor c ON c.outbox = 'calendar.outbox' AND c.shards = 4"
			" AND c.shard = (hashtext(o.key) & 2147483647) % 4 WHERE o.id = $1::bigint"
			" AND (o.xid, o.id) <= (c.xid, c.id) AND NOT calendar.outbox_sent(o)", bad), 1);
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric(&cur_host, "pin_outbox_failed_total{outbox="
			"\"calendar.outbox\",reason=\"too_large\"}") >= 1, 10000), "metric missing");
	cur_down();
}
END_TEST

/* The shards move to another host with the cursor when the first is killed:
 * rows written before, during and after are each on the topic (at least
 * once), and rows the dead host had delivered are not all sent again. */
START_TEST(cursor_fails_over)
{
	static const char *const env[] = { "PIN_RELAY_CURSOR=true", NULL };
	struct h_host other;
	char *key = h_uuid();
	PGconn *c = cur_conn();
	int n = 0, missing = -1;
	char *ids;

	cur_up();
	h_host_start(&other, "worker-cursor-2", "worker", NULL, 0, env);
	for (; n < 50; n++)
		(void)cur_insert(c, h_sprintf("%s-%d", key, n), "fo");
	h_sleep_ms(1000);
	kill(cur_host.pid, SIGKILL);
	for (; n < 100; n++)
		(void)cur_insert(c, h_sprintf("%s-%d", key, n), "fo");
	PQfinish(c);
	ids = h_sprintf("%s-%%", key);
	ck_assert_msg(H_WAIT_UNTIL((missing = (int)h_sql_int("SELECT count(*) FROM calendar.outbox o"
			" WHERE o.key LIKE $1 AND NOT calendar.outbox_sent(o)", ids)) == 0, 40000),
			"%d of 100 rows not behind the cursors 40 s after the kill", missing);
	{
		struct h_kmsgs *l = h_kafka_read_all(CUR_TOPIC, 10000);
		int seen = 0;

		for (int i = 0; i < 100; i++) {
			char *k = h_sprintf("%s-%d", key, i);

			for (size_t j = 0; l && j < l->n; j++)
				if (l->v[j].key && !strcmp(l->v[j].key, k)) {
					seen++;
					break;
				}
		}
		ck_assert_int_eq(seen, 100);
	}
	h_host_stop(&other);
	cur_down();
}
END_TEST

/* The rolling upgrade from an earlier release (which marks, and relays
 * nothing when it sees a member lock unlike its own): a host with
 * relay_cursor on (the default) beside a host that marks by choice marks
 * too, and both relay; once that host is gone it relays by the cursor,
 * rows written across the change included, each key in order; a marking
 * host started then relays nothing while it goes on.  A host with
 * relay_cursor = false plays the earlier release, after the switch back
 * to marking that a rollback needs. */
START_TEST(cursor_follows_marking_host)
{
	static const char *const env[] = { "PIN_RELAY_CURSOR=true", NULL };
	static const char *const mark_env[] = { "PIN_RELAY_CURSOR=false", NULL };
	char *key = h_uuid(), *like = h_sprintf("%s-%%", key), *id;
	PGconn *c = cur_conn();
	int p1, p2, n = 0, log0;
	long long left = -1;

	/* only a marking host relays, its relay threads are members, and no
	 * cursor is left */
	h_relay_marking_start(&mark_host);
	ck_assert_msg(H_WAIT_UNTIL(cur_members(0) >= 2, 20000), "the marking host is no member");
	h_host_start(&cur_host, "worker-cursor", "worker", NULL, 0, env);
	ck_assert_msg(H_WAIT_UNTIL(h_host_metric_sum(&cur_host,
			"pin_outbox_relay_shard_leader") >= 2 && cur_members(0) >= 4, 30000),
			"the new host leads no shards beside the marking one");
	for (; n < 40; n++)
		(void)cur_insert(c, h_sprintf("%s-%d", key, n), "beside");
	ck_assert_msg(H_WAIT_UNTIL((left = h_sql_int("SELECT count(*) FROM calendar.outbox"
			" WHERE key LIKE $1 AND published_at IS NULL", like)) == 0, 20000),
			"%lld of 40 rows not marked published while both hosts mark", left);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox_cursor"), 0);
	ck_assert_int_eq(cur_members(1), 0);
	ck_assert_msg(h_host_metric(&cur_host, "pin_outbox_published_total") >= 1,
			"the new host published none of the rows (it leads %.0f shards)",
			h_host_metric_sum(&cur_host, "pin_outbox_relay_shard_leader"));

	/* the marking host is gone, rows keep coming, one key twice: every
	 * shard by the cursor, every row on the topic, the key in order */
	h_host_kill9(&mark_host);
	for (; n < 80; n++) {
		(void)cur_insert(c, h_sprintf("%s-%d", key, n), "across");
		h_sleep_ms(100);
	}
	(void)cur_insert(c, key, "first");
	(void)cur_insert(c, key, "second");
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.outbox_cursor"
			" WHERE outbox = 'calendar.outbox' AND shards = 4") == 4 && cur_members(1) >= 2 &&
			h_host_metric_sum(&cur_host, "pin_outbox_relay_shard_leader") >= 8, 30000),
			"the host did not take every shard by the cursor after the marking host left"
			" (logs/worker-cursor.log)");
	ck_assert_msg(H_WAIT_UNTIL((cur_positions(key, "\"first\"", "\"second\"", &p1, &p2),
			p1 >= 0 && p2 >= 0), 20000), "the key's rows not both published (%d, %d)", p1, p2);
	ck_assert_msg(p1 < p2, "the key's second row left before its first");
	{
		struct h_kmsgs *l = h_kafka_read_all(CUR_TOPIC, 10000);
		int seen = 0;

		for (int i = 0; i < n; i++) {
			char *k = h_sprintf("%s-%d", key, i);

			for (size_t j = 0; l && j < l->n; j++)
				if (l->v[j].key && !strcmp(l->v[j].key, k)) {
					seen++;
					break;
				}
		}
		ck_assert_int_eq(seen, n);
	}

	/* a marking host started now relays nothing; the cursor host goes on */
	log0 = h_log_lines("worker-marking.log", "relays nothing", "relay_cursor = false");
	h_host_start(&mark_host, "worker-marking", "worker", NULL, 0, mark_env);
	ck_assert_msg(H_WAIT_UNTIL(h_log_lines("worker-marking.log", "relays nothing",
			"relay_cursor = false") > log0, 20000),
			"the marking host did not say it relays nothing");
	id = cur_insert(c, key, "after");
	PQfinish(c);
	ck_assert_msg(H_WAIT_UNTIL((cur_positions(key, "\"after\"", "-", &p1, &p2), p1 >= 0),
			20000), "row %s not published beside a marking host", id);
	ck_assert_ptr_null(h_sql_scalar("SELECT published_at FROM calendar.outbox"
			" WHERE id = $1::bigint", id));
	cur_down();
}
END_TEST

static void cur_teardown(void)
{
	cur_down();
}

/* After the cases, in the runner's process: a failed case ends before its
 * teardown, and none of its hosts may outlive the suite (a marking host
 * would relay beside the stack's worker for the suites after this one). */
static void cur_final(void)
{
	static const char *const left[] = { "worker-cursor", "worker-cursor-2",
		"worker-marking" };

	for (size_t i = 0; i < sizeof(left) / sizeof(left[0]); i++) {
		long pid = h_host_pid(left[i]);

		if (pid > 1)
			kill((pid_t)pid, SIGKILL);
	}
	if (h_host_pid("worker") <= 0)
		h_worker_start();
	/* the runner's process forks the next cases: its connection must not
	 * be theirs too */
	h_cleanup();
}

Suite *make_relaycursor_suite(void)
{
	Suite *s = suite_create("relaycursor");
	TCase *tc = h_tcase("cursor", 240);

	tcase_add_checked_fixture(tc, NULL, cur_teardown);
	tcase_add_unchecked_fixture(tc, NULL, cur_final);
	tcase_add_test(tc, cursor_keeps_key_order);
	tcase_add_test(tc, cursor_held_by_open_transaction);
	tcase_add_test(tc, cursor_parks_refused_row);
	tcase_add_test(tc, cursor_fails_over);
	tcase_add_test(tc, cursor_follows_marking_host);
	suite_add_tcase(s, tc);
	return s;
}
