/*
 * test_scale.c -- several worker hosts working together (issue 15 point 3),
 * failover measured.  Each case prints one "scale/<case>: ..." line with its
 * figures on stderr, so ./dev test's log shows them.
 *
 *   consumer  3 worker hosts (the stack's + worker-2 + worker-3) share the
 *             group "test-consumer" (testcons.so, pin.test.events.v1, 3
 *             partitions: one each); kill -9 of worker-3 while messages flow:
 *             its partition moves to the others (measured, printed; bounded
 *             by the session timeout + a rebalance), every message applied
 *             exactly once (effects in calendar.test_seen vs inbox rows).
 *   jobs      a job runner killed mid-batch: worker-2 (clock +3 days) takes
 *             all reminders of an event in one reminder-dispatch batch
 *             (FOR UPDATE SKIP LOCKED, rows updated) and blocks on the outbox
 *             insert (the test holds LOCK TABLE calendar.outbox IN SHARE
 *             MODE); worker-3 and worker-4 start and skip the locked rows;
 *             kill -9 of worker-2, the lock is released, PostgreSQL aborts
 *             the dead host's transaction and another host sends every row:
 *             each exactly once (status Sent, one reminder-due outbox row per
 *             reminder).
 *   rolling   3 of 4 worker hosts restarted one by one as operating.md's
 *             runbook says (each waited for until every consumer group of
 *             every host is assigned and test-consumer caught up) under a
 *             steady outbox flow: the longest publish and consume delays
 *             during the roll, every row consumed once.
 *
 * The hosts started here use h_host_start (own log, pid file and metrics
 * port, like `./dev up --worker-hosts M`); ./dev's stack stop stops any
 * left by a failed case.  Runs before the faults suite.
 */
#include "config.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/types.h>
#include <librdkafka/rdkafka.h>
#include <libpq-fe.h>

#include "harness.h"

#define TEST_TOPIC "pin.test.events.v1"
#define GROUP_SERIES(m) m "{group=\"test-consumer\"}"
#define T_REMINDER "pin.calendar.reminder-due.v1"

/* a quarter of the volume under ASan (the hosts are slower there) */
static int volume(int n)
{
	if (h_env_opt("PIN_HOST_ASAN_OPTIONS", NULL))
		return n / 4;
	return n;
}

/* partitions of test-consumer held by h (0 when the host does not answer) */
static int held(const struct h_host *h)
{
	double v = h_host_metric(h, GROUP_SERIES("pin_consumer_partitions_assigned"));

	return isnan(v) ? 0 : (int)v;
}

static double metric0(const struct h_host *h, const char *series)
{
	double v = h_host_metric(h, series);

	return isnan(v) ? 0 : v;
}

/* ---- 1. kill -9 of a consumer host while messages flow ------------------ */

struct flow {
	char **keys, **values;
	int n;
	int produced;          /* atomic */
	int failed;
};

static void *produce_main(void *arg)
{
	struct flow *f = arg;
	char err[256];
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char *bs = h_kafka_bootstrap();
	rd_kafka_t *rk;

	rd_kafka_conf_set(conf, "bootstrap.servers", bs, err, sizeof(err));
	rd_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof(err));
	rd_kafka_conf_set(conf, "linger.ms", "2", err, sizeof(err));
	rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err));
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!rk) {
		__atomic_store_n(&f->failed, 1, __ATOMIC_RELEASE);
		return NULL;
	}
	for (int i = 0; i < f->n; i++) {
		rd_kafka_resp_err_t e;

		do {
			e = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(TEST_TOPIC),
				RD_KAFKA_V_KEY(f->keys[i], strlen(f->keys[i])),
				RD_KAFKA_V_VALUE(f->values[i], strlen(f->values[i])),
				RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
			if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL)
				rd_kafka_poll(rk, 50);
		} while (e == RD_KAFKA_RESP_ERR__QUEUE_FULL);
		if (e)
			__atomic_store_n(&f->failed, 1, __ATOMIC_RELEASE);
		rd_kafka_poll(rk, 0);
		__atomic_store_n(&f->produced, i + 1, __ATOMIC_RELEASE);
		usleep(15000);     /* a steady flow: ~65 messages/s */
	}
	if (rd_kafka_flush(rk, 60000) != RD_KAFKA_RESP_ERR_NO_ERROR ||
			rd_kafka_outq_len(rk) > 0)
		__atomic_store_n(&f->failed, 1, __ATOMIC_RELEASE);
	rd_kafka_destroy(rk);
	return NULL;
}

static struct h_host hosts[4];

static void hosts_teardown(void)
{
	for (size_t i = 0; i < sizeof(hosts) / sizeof(hosts[0]); i++)
		h_host_stop(&hosts[i]);
}

START_TEST(consumer_host_kill9)
{
	struct h_host *w = hosts, *victim = &hosts[2];
	struct flow f = { 0 };
	pthread_t thr;
	int n = volume(600), lost, doubled, moved = 0;
	int64_t t0, t_kill, t_moved = -1, t_revoked = -1, t_done;
	double dup0 = 0, dup1 = 0;
	char *mids;
	size_t len = 3;

	h_sql("CREATE TABLE IF NOT EXISTS calendar.test_seen"
		" (message_id uuid, payload_kind text, attempts int)");
	h_host_stack_worker(&w[0]);
	ck_assert_msg(w[0].pid > 1, "the stack's worker host does not run");
	t0 = h_now_ms();
	h_host_start(&w[1], "worker-2", "worker", NULL, 0, NULL);
	h_host_start(&w[2], "worker-3", "worker", NULL, 0, NULL);
	/* range assignor, 3 members, 3 partitions: one each */
	ck_assert_msg(H_WAIT_UNTIL(held(&w[0]) == 1 && held(&w[1]) == 1 &&
			held(&w[2]) == 1, 90000),
			"test-consumer partitions not spread over 3 hosts: %d %d %d",
			held(&w[0]), held(&w[1]), held(&w[2]));
	fprintf(stderr, "scale/consumer: 3 hosts hold 1 partition each after %.1f s\n",
		(double)(h_now_ms() - t0) / 1000);

	f.n = n;
	f.keys = calloc((size_t)n, sizeof(char *));
	f.values = calloc((size_t)n, sizeof(char *));
	ck_assert(f.keys && f.values);
	for (int i = 0; i < n; i++) {
		char *mid = h_uuid();

		f.keys[i] = h_uuid();
		f.values[i] = h_envelope(mid, "pin.test.event", "Test", f.keys[i],
			h_iso_in(0), "{\"kind\":\"ok\"}");
		len += strlen(mid) + 1;
	}
	/* the message ids as a PostgreSQL array, for the counts below */
	mids = malloc(len);
	ck_assert_ptr_nonnull(mids);
	{
		char *p = mids;

		*p++ = '{';
		for (int i = 0; i < n; i++)
			p += sprintf(p, "%s%.36s", i ? "," : "",
				strstr(f.values[i], "\"messageId\":\"") + 13);
		*p++ = '}';
		*p = '\0';
	}
	dup0 = metric0(&w[0], GROUP_SERIES("pin_consumer_duplicates_total")) +
		metric0(&w[1], GROUP_SERIES("pin_consumer_duplicates_total"));

	ck_assert_int_eq(pthread_create(&thr, NULL, produce_main, &f), 0);
	ck_assert_msg(H_WAIT_UNTIL(__atomic_load_n(&f.produced, __ATOMIC_ACQUIRE) >= n / 3,
			60000), "the producer is stuck");
	t_kill = h_now_ms();
	h_host_kill9(victim);
	/* the coordinator notices the dead member after the session timeout
	 * and starts a rebalance (the survivors' partitions are revoked: eager
	 * range assignor), then its partition moves: the survivors hold all 3 */
	while (h_now_ms() - t_kill < 90000) {
		moved = held(&w[0]) + held(&w[1]);
		if (moved < 2 && t_revoked < 0)
			t_revoked = h_now_ms();
		if (moved == 3) {
			t_moved = h_now_ms();
			break;
		}
		h_sleep_ms(100);
	}
	pthread_join(thr, NULL);
	ck_assert_msg(!f.failed, "producing the messages failed");
	ck_assert_msg(t_moved > 0, "the killed host's partition did not move in 90 s"
		" (survivors hold %d of 3)", moved);
	/* processing goes on: every message applied */
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(DISTINCT message_id) FROM"
			" calendar.test_seen WHERE message_id = ANY($1::uuid[])", mids) == n,
			120000), "%lld of %d messages applied after 120 s",
			h_sql_int("SELECT count(DISTINCT message_id) FROM calendar.test_seen"
				" WHERE message_id = ANY($1::uuid[])", mids), n);
	t_done = h_now_ms();
	h_sleep_ms(1000);     /* a late redelivery would show now */
	lost = n - (int)h_sql_int("SELECT count(DISTINCT message_id) FROM calendar.test_seen"
		" WHERE message_id = ANY($1::uuid[])", mids);
	doubled = (int)h_sql_int("SELECT count(*) - count(DISTINCT message_id) FROM"
		" calendar.test_seen WHERE message_id = ANY($1::uuid[])", mids);
	dup1 = metric0(&w[0], GROUP_SERIES("pin_consumer_duplicates_total")) +
		metric0(&w[1], GROUP_SERIES("pin_consumer_duplicates_total"));
	fprintf(stderr, "scale/consumer: messages=%d killed=%s after %d; partition moved in"
		" %.1f s (rebalance began after %.1f s; kafka_session_timeout_ms %s);"
		" all applied %.1f s after the kill;"
		" lost=%d doubly applied=%d; redelivered and dropped by the inbox=%.0f\n",
		n, victim->name, n / 3, (double)(t_moved - t_kill) / 1000,
		t_revoked > 0 ? (double)(t_revoked - t_kill) / 1000 : -1.0,
		h_env_opt("PIN_KAFKA_SESSION_TIMEOUT_MS", "3500 (the dev stack's)"),
		(double)(t_done - t_kill) / 1000, lost, doubled, dup1 - dup0);
	ck_assert_int_eq(lost, 0);
	ck_assert_int_eq(doubled, 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.inbox WHERE consumer_group"
		" = 'test-consumer' AND message_id = ANY($1::uuid[])", mids), n);
	/* session timeout (3.5 s on the dev stack, 6 s by default) + the
	 * rejoin; generous for a loaded machine */
	ck_assert_msg(t_moved - t_kill < 45000, "failover took %.1f s",
		(double)(t_moved - t_kill) / 1000);
	free(mids);
	free(f.keys);
	free(f.values);
}
END_TEST

/* ---- 2. a job runner killed mid-batch ------------------------------------ */

/* the dead host's backend: waiting on a lock, holding the reminders */
static long blocked_backend(const char *ev)
{
	return h_sql_int("SELECT a.pid FROM pg_stat_activity a WHERE a.wait_event_type = 'Lock'"
		" AND a.backend_xid::text = (SELECT r.xmax::text FROM calendar.event_reminders r"
		"   WHERE r.calendar_event_id = $1::uuid LIMIT 1) LIMIT 1", ev);
}

START_TEST(job_runner_kill_mid_batch)
{
	static const char *const env[] = { "PIN_JOB_REMINDER_DISPATCH_BATCH=5000",
		"PIN_JOB_REMINDER_DISPATCH_INTERVAL_MS=500", NULL };
	const int64_t shift = 3 * 86400;      /* the reminders are due for these hosts only */
	int n = volume(400);
	char *sub = h_uuid(), *tenant = h_uuid();
	char *tok = h_token("agent", sub, tenant, "calendar.events.view", "calendar.events.manage");
	struct h_resp *r;
	const char *ev;
	PGconn *lk;
	PGresult *res;
	long backend = -1;
	int64_t t_kill, t_release, t_abort = -1, t_done;
	int sent_by_b, sent_by_c;

	r = h_post("/api/v1/agent/calendar/events", tok, h_sprintf("{\"kind\":\"Task\","
		"\"title\":\"scale jobs\",\"startAt\":\"%s\",\"timeZone\":\"UTC\","
		"\"reminderOffsetsMinutes\":[]}", h_iso_in(2 * 86400)));
	ck_assert_msg(r->status == 201, "create: %ld %s", r->status, r->body);
	ev = h_jstr(r->json, "id");
	/* n reminders due in [start - n min, start - 1 min]: 2 days ahead */
	h_sql("INSERT INTO calendar.event_reminders (id, calendar_event_id, offset_minutes,"
		" due_at, status, created_at, updated_at)"
		" SELECT gen_random_uuid(), e.id, i, e.start_at - make_interval(mins => i),"
		"  'Pending', now(), now()"
		" FROM calendar.calendar_events e, generate_series(1, $2::int) i"
		" WHERE e.id = $1::uuid", ev, h_sprintf("%d", n));

	/* the outbox insert of the batch will wait on this lock */
	lk = PQconnectdb(h_env("PIN_PG_DSN"));
	ck_assert_msg(PQstatus(lk) == CONNECTION_OK, "%s", PQerrorMessage(lk));
	res = PQexec(lk, "BEGIN; LOCK TABLE calendar.outbox IN SHARE MODE");
	ck_assert_msg(PQresultStatus(res) == PGRES_COMMAND_OK, "%s", PQerrorMessage(lk));
	PQclear(res);

	/* host A takes every row in one batch and blocks mid-batch */
	h_host_start(&hosts[0], "worker-2", "worker", "workers", shift, env);
	ck_assert_msg(H_WAIT_UNTIL((backend = blocked_backend(ev)) > 0, 60000),
			"worker-2 did not block in the middle of a reminder batch");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders WHERE"
		" calendar_event_id = $1::uuid AND xmax::text <> '0'", ev), n);
	/* B and C run their passes meanwhile: SKIP LOCKED, nothing for them */
	h_host_start(&hosts[1], "worker-3", "worker", "workers", shift, env);
	h_host_start(&hosts[2], "worker-4", "worker", "workers", shift, env);
	h_sleep_ms(1500);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders WHERE"
		" calendar_event_id = $1::uuid AND status = 'Pending'", ev), n);

	t_kill = h_now_ms();
	h_host_kill9(&hosts[0]);
	/* PostgreSQL notices the dead client when the backend next talks to it:
	 * here when the lock is granted */
	h_sleep_ms(500);
	ck_assert_msg(h_sql_int("SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int",
		h_sprintf("%ld", backend)) == 1, "the dead host's backend went early");
	t_release = h_now_ms();
	res = PQexec(lk, "COMMIT");
	PQclear(res);
	PQfinish(lk);
	if (H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM pg_stat_activity WHERE pid = $1::int",
			h_sprintf("%ld", backend)) == 0, 30000))
		t_abort = h_now_ms();
	ck_assert_msg(t_abort > 0, "the dead host's transaction is still open 30 s after"
		" the lock was released");
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.event_reminders"
			" WHERE calendar_event_id = $1::uuid AND status = 'Sent'", ev) == n, 60000),
			"%lld of %d reminders sent 60 s after the abort",
			h_sql_int("SELECT count(*) FROM calendar.event_reminders WHERE"
				" calendar_event_id = $1::uuid AND status = 'Sent'", ev), n);
	t_done = h_now_ms();
	/* exactly once: one reminder-due outbox row per reminder */
	h_sleep_ms(1500);     /* another pass of both hosts */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE topic = '"
		T_REMINDER "' AND key = $1", ev), n);
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT envelope->'payload'->>'reminderId')"
		" FROM calendar.outbox WHERE topic = '" T_REMINDER "' AND key = $1", ev), n);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox o"
		" JOIN calendar.event_reminders r ON r.id::text = o.envelope->'payload'->>'reminderId'"
		" WHERE o.topic = '" T_REMINDER "' AND o.key = $1 AND r.status = 'Sent'", ev), n);
	sent_by_b = (int)metric0(&hosts[1], "pin_reminders_sent_total");
	sent_by_c = (int)metric0(&hosts[2], "pin_reminders_sent_total");
	fprintf(stderr, "scale/jobs: reminders=%d held by worker-2 mid-batch, killed;"
		" its transaction aborted %.2f s after the lock was released (%.1f s after the"
		" kill); all sent %.2f s after the abort (worker-3 sent %d, worker-4 %d rows in"
		" total); outbox rows=%lld, duplicates=0\n", n,
		(double)(t_abort - t_release) / 1000, (double)(t_abort - t_kill) / 1000,
		(double)(t_done - t_abort) / 1000, sent_by_b, sent_by_c,
		h_sql_int("SELECT count(*) FROM calendar.outbox WHERE topic = '" T_REMINDER
			"' AND key = $1", ev));
	ck_assert_int_ge(sent_by_b + sent_by_c, n);
}
END_TEST

/* ---- 3. a rolling restart of the worker hosts ----------------------------- */

/* Writes outbox rows (topic pin.test.events.v1, consumed by the group
 * test-consumer) at a steady ~65/s on its own connection until stop. */
struct rows {
	const char *dsn;
	int stop;              /* atomic */
	int written;
	int failed;
};

static void *rows_main(void *arg)
{
	struct rows *w = arg;
	PGconn *pg = PQconnectdb(w->dsn);

	if (PQstatus(pg) != CONNECTION_OK) {
		w->failed = 1;
		PQfinish(pg);
		return NULL;
	}
	while (!__atomic_load_n(&w->stop, __ATOMIC_ACQUIRE)) {
		PGresult *r = PQexec(pg, "WITH m AS (SELECT gen_random_uuid() AS id,"
			" gen_random_uuid()::text AS k) INSERT INTO calendar.outbox"
			" (message_id, topic, key, envelope, created_at) SELECT m.id,"
			" 'pin.test.events.v1', m.k, jsonb_build_object('messageId', m.id,"
			" 'eventType', 'pin.test.event', 'contractVersion', 1, 'createdAt',"
			" to_char(clock_timestamp() AT TIME ZONE 'UTC',"
			"   'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'aggregateType', 'Test',"
			" 'aggregateId', m.k, 'correlationId', NULL, 'payload',"
			" jsonb_build_object('kind', 'ok')), clock_timestamp() FROM m");

		if (PQresultStatus(r) != PGRES_COMMAND_OK)
			w->failed = 1;
		else
			w->written++;
		PQclear(r);
		usleep(15000);
	}
	PQfinish(pg);
	return NULL;
}

/* every consumer group of every one of the n hosts has its assignment
 * (pin_consumer_rebalancing 0).  All groups, not test-consumer's alone: a
 * host that stops while one of its groups is still joining waits for that
 * join (up to the broker's join phase) before it leaves */
static bool settled(const struct h_host *w, int n)
{
	for (int i = 0; i < n; i++)
		if (h_host_metric_sum(&w[i], "pin_consumer_rebalancing") != 0)
			return false;
	return true;
}

/*
 * When each outbox row went out, whichever way the relay runs: its
 * published_at when marked, else the first move of its shard's cursor past
 * it (the relay moves a cursor to the last delivered row just before the
 * next read; a trigger keeps every move while the case runs).
 */
static void sent_at_on(void)
{
	h_sql("CREATE TABLE IF NOT EXISTS calendar.test_cursor_moves (outbox text, shards int,"
		" shard int, xid xid8, id bigint, moved_at timestamptz)");
	h_sql("CREATE INDEX IF NOT EXISTS test_cursor_moves_pos ON calendar.test_cursor_moves"
		" (outbox, shards, shard, xid, id)");
	h_sql("TRUNCATE calendar.test_cursor_moves");
	h_sql("CREATE OR REPLACE FUNCTION calendar.test_cursor_moved() RETURNS trigger"
		" LANGUAGE plpgsql AS $$BEGIN INSERT INTO calendar.test_cursor_moves VALUES"
		" (NEW.outbox, NEW.shards, NEW.shard, NEW.xid, NEW.id, NEW.moved_at);"
		" RETURN NULL; END$$");
	h_sql("CREATE OR REPLACE TRIGGER test_cursor_moved AFTER INSERT OR UPDATE ON"
		" calendar.outbox_cursor FOR EACH ROW EXECUTE FUNCTION calendar.test_cursor_moved()");
	h_sql("CREATE OR REPLACE VIEW calendar.test_outbox_sent AS SELECT o.*,"
		" coalesce(o.published_at, (SELECT m.moved_at FROM calendar.test_cursor_moves m"
		" WHERE m.outbox = 'calendar.outbox' AND m.shards = 4"       /* relay_shards */
		" AND m.shard = (hashtext(o.key) & 2147483647) % 4"
		" AND (m.xid, m.id) >= (o.xid, o.id) ORDER BY m.xid, m.id LIMIT 1)) AS sent_at"
		" FROM calendar.outbox o");
}

static void rolling_teardown(void)
{
	hosts_teardown();
	h_sql("DROP TRIGGER IF EXISTS test_cursor_moved ON calendar.outbox_cursor");
}

/*
 * Three worker hosts restarted one after another as the runbook says
 * (SIGTERM, wait for the exit, start again, wait until every consumer group
 * of every host has its assignment and test-consumer has caught up) while
 * outbox rows are written and consumed: how late
 * any row is published (created_at -> sent_at: sent_at_on) and consumed
 * (sent_at -> the consumer's inbox), against the same figures before
 * the restarts.  A host that stops gives its relay shards (session advisory
 * locks) and its partitions (it leaves the group) back at once, so no row
 * waits for a failover timeout.
 */
START_TEST(rolling_restart)
{
	struct h_host *w = hosts;
	struct rows rw = { 0 };
	pthread_t thr;
	int64_t t_begin, t_restart;
	const char *since, *restart_from, *before_end, *settled_at;
	double relay_max, consume_max, relay_before, consume_before, roll_s, step_s[3], catchup_s[3];
	long long n, consumed;

	h_sql("CREATE TABLE IF NOT EXISTS calendar.test_seen"
		" (message_id uuid, payload_kind text, attempts int)");
	sent_at_on();
	h_host_stack_worker(&w[0]);
	ck_assert_msg(w[0].pid > 1, "the stack's worker host does not run");
	h_host_start(&w[1], "worker-2", "worker", NULL, 0, NULL);
	h_host_start(&w[2], "worker-3", "worker", NULL, 0, NULL);
	h_host_start(&w[3], "worker-4", "worker", NULL, 0, NULL);
	ck_assert_msg(H_WAIT_UNTIL(held(&w[0]) + held(&w[1]) + held(&w[2]) +
			held(&w[3]) == 3, 90000), "test-consumer partitions not assigned");
	/* the joins of the hosts started above end in one more rebalance (and a
	 * case before this one may have left the group rebalancing): let the
	 * group settle, so the figures before the roll are the steady state */
	ck_assert_msg(H_WAIT_UNTIL(settled(w, 4), 60000), "test-consumer still rebalancing"
		" 60 s after the hosts started");
	h_sleep_ms(1000);

	since = h_sql_scalar("SELECT clock_timestamp()::text");
	rw.dsn = h_env("PIN_PG_DSN");
	ck_assert_int_eq(pthread_create(&thr, NULL, rows_main, &rw), 0);
	t_begin = h_now_ms();
	h_sleep_ms(4000);                       /* the figures before */
	restart_from = h_sql_scalar("SELECT clock_timestamp()::text");
	/* "before": the rows written up to 1 s before the first stop (a row
	 * written just before it is still consumed during the roll) */
	before_end = h_sql_scalar("SELECT ($1::timestamptz - interval '1 second')::text",
		restart_from);
	t_restart = h_now_ms();
	for (int i = 1; i <= 3; i++) {
		const char *name = h_sprintf("worker-%d", i + 1);
		int64_t t = h_now_ms();

		h_host_stop(&w[i]);
		h_host_start(&w[i], name, "worker", NULL, 0, NULL);
		/* the runbook's step: the next host only once the group has
		 * its assignment again (every host's pin_consumer_rebalancing
		 * 0); without it the rebalances run into one another and a
		 * message waits for the whole roll */
		ck_assert_msg(H_WAIT_UNTIL(settled(w, 4), 60000), "test-consumer still"
			" rebalancing 60 s after %s restarted", name);
		step_s[i - 1] = (double)(h_now_ms() - t) / 1000;
		/* ... and has caught up (its lag back to the steady state):
		 * every row written before now consumed.  Else the messages
		 * left over from this rebalance wait through the next one too */
		settled_at = h_sql_scalar("SELECT clock_timestamp()::text");
		ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.outbox o"
				" WHERE o.created_at >= $1::timestamptz AND o.created_at <"
				" $2::timestamptz AND NOT EXISTS (SELECT 1 FROM calendar.inbox i"
				" WHERE i.message_id = o.message_id AND i.consumer_group ="
				" 'test-consumer')", since, settled_at) == 0, 60000),
				"test-consumer did not catch up in 60 s after %s restarted", name);
		catchup_s[i - 1] = (double)(h_now_ms() - t) / 1000 - step_s[i - 1];
	}
	roll_s = (double)(h_now_ms() - t_restart) / 1000;
	h_sleep_ms(3000);
	__atomic_store_n(&rw.stop, 1, __ATOMIC_RELEASE);
	pthread_join(thr, NULL);
	ck_assert_msg(!rw.failed, "writing outbox rows failed");
	n = rw.written;

	/* every row published and consumed, once */
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.outbox o JOIN"
			" calendar.inbox i ON i.message_id = o.message_id AND i.consumer_group ="
			" 'test-consumer' WHERE o.created_at >= $1::timestamptz", since) == n,
			120000), "%lld of %lld rows consumed after 120 s",
			h_sql_int("SELECT count(*) FROM calendar.outbox o JOIN calendar.inbox i ON"
				" i.message_id = o.message_id AND i.consumer_group = 'test-consumer'"
				" WHERE o.created_at >= $1::timestamptz", since), n);
	consumed = h_sql_int("SELECT count(*) FROM calendar.test_seen t JOIN calendar.outbox o"
		" ON o.message_id = t.message_id WHERE o.created_at >= $1::timestamptz", since);
	relay_before = strtod(h_sql_scalar("SELECT coalesce(max(extract(epoch FROM"
		" sent_at - created_at)), 0) FROM calendar.test_outbox_sent WHERE created_at >="
		" $1::timestamptz AND created_at < $2::timestamptz", since, before_end), NULL);
	consume_before = strtod(h_sql_scalar("SELECT coalesce(max(extract(epoch FROM"
		" i.processed_at - o.sent_at)), 0) FROM calendar.test_outbox_sent o JOIN calendar.inbox"
		" i ON i.message_id = o.message_id AND i.consumer_group = 'test-consumer' WHERE"
		" o.created_at >= $1::timestamptz AND o.created_at < $2::timestamptz", since,
		before_end), NULL);
	relay_max = strtod(h_sql_scalar("SELECT coalesce(max(extract(epoch FROM"
		" sent_at - created_at)), 0) FROM calendar.test_outbox_sent WHERE created_at >="
		" $1::timestamptz", restart_from), NULL);
	consume_max = strtod(h_sql_scalar("SELECT coalesce(max(extract(epoch FROM"
		" i.processed_at - o.sent_at)), 0) FROM calendar.test_outbox_sent o JOIN calendar.inbox"
		" i ON i.message_id = o.message_id AND i.consumer_group = 'test-consumer' WHERE"
		" o.created_at >= $1::timestamptz", restart_from), NULL);
	fprintf(stderr, "scale/rolling: %lld outbox rows over %.1f s, 3 of 4 worker hosts"
		" restarted one by one in %.1f s (steps: to the group settled %.1f, %.1f, %.1f s,"
		" caught up %.1f, %.1f, %.1f s later; %s); longest delay before the restarts:"
		" publish %.2f s, consume %.2f s; during them: publish %.2f s, consume %.2f s;"
		" applied %lld times\n", n, (double)(h_now_ms() - t_begin) / 1000, roll_s,
		step_s[0], step_s[1], step_s[2], catchup_s[0], catchup_s[1], catchup_s[2],
		h_env_opt("PIN_KAFKA_ASSIGNMENT_STRATEGY", "range"), relay_before,
		consume_before, relay_max, consume_max, consumed);
	ck_assert_int_eq(consumed, n);
	/* The relay: a stopping host's shards are taken over at once, no
	 * failover timeout in the path.  The consumers: with the runbook's
	 * wait between hosts a message waits for at most the rebalances of
	 * one host's stop and start -- on the dev broker one or two join
	 * rounds of session timeout - 1 s (2.5 s with the dev stack's 3500)
	 * and the catch-up.  Before that wait and the shorter session timeout
	 * (2026-12-05, 2557282) a message waited for the whole roll (14.7-15.7
	 * s).  Margins: a loaded machine, and the sanitizer build's hosts are
	 * several times slower (operating.md, "Rolling restart of the worker
	 * hosts").  Measured 2.6-5.0 s alone and 4.9 s in a whole suite run;
	 * one whole clean-clone run (2026-12-05, 85dfccc) had a step whose
	 * group took four join rounds to settle (10.2 s: a follower's late
	 * SyncGroup starts another round) and a row waited 9.6 s.  The bound
	 * is below the roll itself (20-42 s with the runbook's waits), so a
	 * consumer that pauses for the whole roll still fails it. */
	ck_assert_msg(relay_max < (h_env_opt("PIN_HOST_ASAN_OPTIONS", NULL) ? 15 : 5),
		"a row waited %.1f s to be published", relay_max);
	ck_assert_msg(consume_max < (h_env_opt("PIN_HOST_ASAN_OPTIONS", NULL) ? 20 : 12),
		"a row waited %.1f s to be consumed during the roll", consume_max);
}
END_TEST

Suite *make_scale_suite(void)
{
	Suite *s = suite_create("scale");
	TCase *c = h_tcase("consumer", 300);
	TCase *j = h_tcase("jobs", 240);

	tcase_add_checked_fixture(c, NULL, hosts_teardown);
	tcase_add_test(c, consumer_host_kill9);
	suite_add_tcase(s, c);
	tcase_add_checked_fixture(j, NULL, hosts_teardown);
	tcase_add_test(j, job_runner_kill_mid_batch);
	suite_add_tcase(s, j);
	{
		TCase *r = h_tcase("rolling", 300);

		tcase_add_checked_fixture(r, NULL, rolling_teardown);
		tcase_add_test(r, rolling_restart);
		suite_add_tcase(s, r);
	}
	return s;
}
