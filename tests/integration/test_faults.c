/*
 * test_faults.c -- the fault drills of issue 9, kept as permanent tests.
 *
 * Each drill prints one "faults/<drill>: ..." line with its figures (lost,
 * duplicates, seconds) on stderr, so ./dev test's log shows them.
 *
 *   kill9     kill -9 of the worker host three times while 2,000 outbox rows
 *             (manual event creations through the API) flow: 0 lost on
 *             Kafka, duplicates counted; the harness restarts the host.
 *   broker    the dev broker down (mock cluster: same port, data kept)
 *             while the API writes, the relay and the consumers run; up
 *             again: 0 lost on Kafka, the consumers resume.
 *   pgrestart pg_ctl restart -m immediate during 1,000 writes: every 2xx row
 *             exists, every non-2xx row does not, no 5xx but 503, recovery
 *             without restarting the hosts.
 *   mutation  2,000 seeded bad requests over every write endpoint: no 5xx,
 *             no reset, hosts alive, a non-2xx answer never leaves a change
 *             behind (PIN_FAULTS_SEED=N replays a run).
 *   poison    a poison-message table for every consumer group of the worker
 *             host: each lands in its DLQ within 5 s and the next valid
 *             message with the same key is applied.
 *   relayfail 3 worker hosts share the relay shards; kill -9 of the host
 *             leading calendar.outbox's shard 0 while rows flow: another
 *             host takes it within relay_failover_s (5 s), 0 rows lost,
 *             duplicates only in the killed host's shards (counted).
 *
 * The heavy drills (kill9, pgrestart, mutation) run in the normal phase
 * only; under ASan (PIN_HOST_ASAN_OPTIONS set) they run with a tenth of the
 * volume unless PIN_FAULTS_FULL=1.  Runs last: it kills hosts and restarts
 * PostgreSQL.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <curl/curl.h>

#include "harness.h"

#define EV "/api/v1/agent/calendar/events"
#define T_CREATED "pin.calendar.event-created.v1"
#define NIL_UUID "00000000-0000-0000-0000-000000000000"

/* full volume in the normal phase, a tenth under ASan (PIN_FAULTS_FULL=1: full) */
static int volume(int n)
{
	if (h_env_opt("PIN_HOST_ASAN_OPTIONS", NULL) && !h_env_opt("PIN_FAULTS_FULL", NULL))
		return n / 10;
	return n;
}

static char *agent_token(const char *sub, const char *tenant)
{
	return h_token("agent", sub, tenant, "calendar.events.view",
			"calendar.events.manage", "calendar.slots.manage",
			"calendar.appointments.view", "calendar.appointments.decide");
}

static char *task_body(const char *title, int i)
{
	return h_sprintf("{\"kind\":\"Task\",\"title\":\"%s\",\"startAt\":\"%s\","
			"\"timeZone\":\"UTC\"}", title, h_iso_in(86400 * 3 + i * 60));
}

/* "{a,b,c}": a PostgreSQL array literal of uuids/words */
static char *pg_array(char *const *v, int n)
{
	size_t len = 3;
	char *s, *p, *out;

	for (int i = 0; i < n; i++)
		len += strlen(v[i]) + 1;
	s = malloc(len);
	ck_assert_ptr_nonnull(s);
	p = s;
	*p++ = '{';
	for (int i = 0; i < n; i++)
		p += sprintf(p, "%s%s", i ? "," : "", v[i]);
	*p++ = '}';
	*p = '\0';
	out = h_strdup(s);
	free(s);
	return out;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Reads T_CREATED and counts the messages of every key in ids (sorted in
 * place); *lost = keys with no message, *dups = messages beyond the first. */
static void count_on_kafka(char **ids, int n, int *lost, int *dups)
{
	struct h_kmsgs *l = h_kafka_read_all(T_CREATED, 60000);
	int *seen = calloc((size_t)n, sizeof(int));

	ck_assert_ptr_nonnull(seen);
	qsort(ids, (size_t)n, sizeof(*ids), cmp_str);
	for (size_t i = 0; i < l->n; i++) {
		char *k = l->v[i].key;
		char **hit;

		if (!k)
			continue;
		hit = bsearch(&k, ids, (size_t)n, sizeof(*ids), cmp_str);
		if (hit)
			seen[hit - ids]++;
	}
	*lost = *dups = 0;
	for (int i = 0; i < n; i++) {
		if (seen[i] == 0)
			(*lost)++;
		else
			*dups += seen[i] - 1;
	}
	free(seen);
}

static long long unpublished(const char *ids_array)
{
	return h_sql_int("SELECT count(*) FROM calendar.outbox o WHERE topic = '" T_CREATED "'"
			" AND key = ANY($1::text[]) AND NOT calendar.outbox_sent(o)", ids_array);
}

static long long consumed(const char *ids_array)
{
	return h_sql_int("SELECT count(*) FROM notifications.processed_messages p"
			" JOIN calendar.outbox o ON o.message_id = p.message_id"
			" WHERE p.consumer_group = 'notifications-calendar-events'"
			" AND o.topic = '" T_CREATED "' AND o.key = ANY($1::text[])", ids_array);
}

/* ---- 1. kill -9 of the worker host while outbox rows flow -------------- */

START_TEST(drill_kill9_worker)
{
	int n = volume(2000), kills = 0, lost, dups;
	char *sub = h_uuid(), *tok = agent_token(sub, h_uuid());
	char **ids = calloc((size_t)n, sizeof(char *));
	int64_t t0 = h_now_ms(), t_drain;
	char *arr;

	ck_assert_ptr_nonnull(ids);
	ck_assert_msg(h_host_pid("worker") > 0, "no worker host before the drill");
	for (int i = 0; i < n; i++) {
		struct h_resp *r = h_post(EV, tok, task_body("kill9", i));

		ck_assert_msg(r->status == 201, "create %d: %ld %s", i, r->status, r->body);
		ids[i] = h_strdup(h_jstr(r->json, "id"));
		h_resp_free(r);
		if (kills < 3 && i == (kills + 1) * n / 4) {
			h_worker_kill9();
			kills++;
			h_sleep_ms(200);
			h_worker_start();
		}
	}
	arr = pg_array(ids, n);
	t_drain = h_now_ms();
	ck_assert_msg(H_WAIT_UNTIL(unpublished(arr) == 0, 180000),
			"%lld of %d outbox rows still unpublished after 180 s",
			unpublished(arr), n);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE topic = '"
			T_CREATED "' AND key = ANY($1::text[])", arr), n);
	count_on_kafka(ids, n, &lost, &dups);
	/* the consumers of the killed host resume too: every message reaches
	 * the notifications group exactly once (its inbox) */
	ck_assert_msg(H_WAIT_UNTIL(consumed(arr) == n, 120000),
			"notifications-calendar-events consumed %lld of %d messages",
			consumed(arr), n);
	fprintf(stderr, "faults/kill9: rows=%d kills=%d lost=%d duplicates=%d "
			"seconds=%.1f (drain after the last write %.1f s)\n", n, kills, lost,
			dups, (double)(h_now_ms() - t0) / 1000,
			(double)(h_now_ms() - t_drain) / 1000);
	ck_assert_msg(lost == 0, "%d of %d messages lost on Kafka", lost, n);
	ck_assert_msg(h_host_pid("worker") > 0, "the restarted worker host died");
	free(ids);
}
END_TEST

/* ---- 2. broker down and up while the relay and the consumers run ------- */

static void identity_user(const char *user, const char *name)
{
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"%s\",\"aggregateType\":\"User\","
		"\"aggregateId\":\"%s\",\"correlationId\":null,\"payload\":{\"userId\":\"%s\","
		"\"displayName\":\"%s\",\"avatarUrl\":null,\"email\":null,\"phone\":null,"
		"\"locale\":null,\"timeZone\":null,\"status\":\"Active\"}}", h_uuid(),
		h_iso_in(0), user, user, name)), 0);
}

START_TEST(drill_broker_outage)
{
	int n_before = 100, n_down = 200, n_after = 100, n = n_before + n_down + n_after;
	int lost, dups, k = 0;
	char *sub = h_uuid(), *tok = agent_token(sub, h_uuid()), *arr_down;
	char **ids = calloc((size_t)n, sizeof(char *));
	char *user = h_uuid();
	int64_t t0 = h_now_ms(), t_down = t0, t_up = t0, t_pub, t_cons;
	long long held;

	ck_assert_ptr_nonnull(ids);
	for (int phase = 0; phase < 3; phase++) {
		int m = phase == 0 ? n_before : phase == 1 ? n_down : n_after;

		if (phase == 1) {
			h_broker_down();
			t_down = h_now_ms();
		}
		if (phase == 2) {
			/* the outage lasts at least 8 s: the relay and the consumers
			 * see failed requests and reconnect attempts */
			int64_t left = 8000 - (h_now_ms() - t_down);

			if (left > 0)
				h_sleep_ms((int)left);
			arr_down = pg_array(&ids[n_before], n_down);
			held = unpublished(arr_down);
			h_broker_up();
			t_up = h_now_ms();
			fprintf(stderr, "faults/broker: down %.1f s, %lld of %d rows written "
					"meanwhile held in the outbox\n",
					(double)(t_up - t_down) / 1000, held, n_down);
			ck_assert_msg(held > 0, "rows written while the broker was down "
					"were marked published");
		}
		for (int i = 0; i < m; i++, k++) {
			struct h_resp *r = h_post(EV, tok, task_body("broker", k));

			ck_assert_msg(r->status == 201, "create %d: %ld %s", k, r->status, r->body);
			ids[k] = h_strdup(h_jstr(r->json, "id"));
			h_resp_free(r);
		}
	}
	{
		char *arr = pg_array(ids, n);

		ck_assert_msg(H_WAIT_UNTIL(unpublished(arr) == 0, 120000),
				"%lld rows unpublished 120 s after the broker came back",
				unpublished(arr));
		t_pub = h_now_ms();
		/* consumers resume: every message reaches the notifications group */
		ck_assert_msg(H_WAIT_UNTIL(consumed(arr) == n, 120000),
				"notifications-calendar-events consumed %lld of %d messages",
				consumed(arr), n);
		t_cons = h_now_ms();
		count_on_kafka(ids, n, &lost, &dups);
	}
	/* and a message produced after the outage reaches both identity groups */
	identity_user(user, "After Outage");
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.user_replicas"
			" WHERE user_id = $1::uuid", user) == 1, 30000),
			"calendar-identity-users did not resume");
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
			"notifications.recipient_contacts WHERE user_id = $1::uuid", user) == 1,
			30000), "notifications-identity-users did not resume");
	fprintf(stderr, "faults/broker: rows=%d lost=%d duplicates=%d published %.1f s and "
			"consumed %.1f s after the broker came back; seconds=%.1f\n", n, lost,
			dups, (double)(t_pub - t_up) / 1000, (double)(t_cons - t_up) / 1000,
			(double)(h_now_ms() - t0) / 1000);
	ck_assert_msg(lost == 0, "%d of %d messages lost on Kafka", lost, n);
	free(ids);
}
END_TEST

static void broker_teardown(void)
{
	/* never leave the stack with a broker that is down */
	char *pidfile = h_sprintf("%s/pids/broker.pid", getenv("PIN_DEV_DIR"));
	FILE *f = fopen(pidfile, "r");
	long pid = 0;

	if (f) {
		if (fscanf(f, "%ld", &pid) == 1 && pid > 1)
			kill((pid_t)pid, SIGUSR2);
		fclose(f);
	}
	h_cleanup();
}

/* ---- 3. PostgreSQL restart -m immediate during writes ------------------ */

static pid_t pg_restart_async(void)
{
	char *cmd = h_sprintf("runuser -u postgres -- '%s/pg_ctl' -D '%s' -l '%s' -m immediate"
			" -w -t 60 -o '%s' restart >/dev/null 2>&1", h_env("PIN_PG_BIN"),
			h_env("PIN_PG_DATA"), h_env("PIN_PG_LOG"), h_env("PIN_PG_OPTS"));
	pid_t pid = fork();

	ck_assert(pid >= 0);
	if (pid == 0) {
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

START_TEST(drill_pg_restart)
{
	int n = volume(1000), n2xx = 0, n503 = 0, other = 0, k2 = 0, kn = 0;
	char *sub = h_uuid(), *tok = agent_token(sub, h_uuid()), *run = h_uuid();
	int cap = n * 5, post = 0, i;
	char **ok_ids = calloc((size_t)cap, sizeof(char *));
	char **bad_titles = calloc((size_t)cap, sizeof(char *));
	char **bad_keys = calloc((size_t)cap, sizeof(char *));
	char **bad_bodies = calloc((size_t)cap, sizeof(char *));
	long api = h_host_pid("api"), worker = h_host_pid("worker");
	int64_t t0 = h_now_ms(), first503 = 0, last503 = 0;
	char *other_first = NULL;
	pid_t child = 0;
	bool done = false;
	int status = -1;

	ck_assert(ok_ids && bad_titles && bad_keys && bad_bodies);
	ck_assert_msg(api > 0 && worker > 0, "hosts not running before the drill");
	/* The test cluster runs with synchronous_commit=off (speed): an
	 * immediate shutdown then loses commits that were acknowledged, as it
	 * would in production with that setting.  The drill is about the
	 * service, so the sessions get the production default: a database
	 * setting overrides the command line for new sessions, and the hosts'
	 * sessions are ended (they reconnect: that is tested here anyway). */
	h_sql("ALTER DATABASE pin SET synchronous_commit = on");
	h_sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
		" WHERE datname = 'pin' AND pid <> pg_backend_pid()");
	ck_assert_msg(H_WAIT_UNTIL(({
		struct h_resp *r = h_post(EV, tok, task_body("pg-before", 0));
		bool ok = r->status == 201;
		h_resp_free(r);
		ok; }), 15000), "the API did not reconnect before the drill");
	h_sleep_ms(2000);      /* the worker's sessions too */
	/* n writes, and on until 50 writes after pg_ctl returned (the recovery
	 * is part of the stream), at most 5 n */
	for (i = 0; i < cap && (i < n || !done || post < 50); i++) {
		char *title = h_sprintf("pg-%s-%d", run, i);
		char *key = h_sprintf("Idempotency-Key: %s", h_uuid());
		char *body = task_body(title, i);
		struct h_resp *r;

		if (i == n / 5 && !child)
			child = pg_restart_async();
		r = h_request("POST", EV, tok, body, key);
		if (r->status >= 200 && r->status < 300) {
			n2xx++;
			ok_ids[k2++] = h_strdup(h_jstr(r->json, "id"));
		} else {
			bad_keys[kn] = key;
			bad_bodies[kn] = body;
			bad_titles[kn++] = title;
			if (r->status == 503) {
				n503++;
				h_sleep_ms(10);     /* a client backing off a little */
				last503 = h_now_ms();
				if (!first503)
					first503 = last503;
			} else {
				other++;
				if (!other_first)
					other_first = h_sprintf("request %d: %ld %s", i, r->status,
							r->body);
			}
		}
		h_resp_free(r);
		if (done)
			post++;
		else if (child && waitpid(child, &status, WNOHANG) == child)
			done = true;
	}
	n = i;
	if (!done)
		waitpid(child, &status, 0);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			"pg_ctl restart failed (status %d)", status);
	PQreset(h_pg());
	/* recovery without a restart: a write succeeds within 15 s */
	ck_assert_msg(H_WAIT_UNTIL(({
		struct h_resp *r = h_post(EV, tok, task_body("pg-after", 0));
		bool ok = r->status == 201;
		h_resp_free(r);
		ok; }), 15000), "the API did not recover after the restart");
	fprintf(stderr, "faults/pgrestart: writes=%d 2xx=%d 503=%d other=%d "
			"503-window=%.1f s seconds=%.1f\n", n, n2xx, n503, other,
			first503 ? (double)(last503 - first503) / 1000 : 0.0,
			(double)(h_now_ms() - t0) / 1000);
	ck_assert_msg(other == 0, "%d answers neither 2xx nor 503; first: %s", other,
			other_first);
	ck_assert_msg(h_host_pid("api") == api, "the API host was restarted or died");
	ck_assert_msg(h_host_pid("worker") == worker, "the worker host was restarted or died");
	{
		long long found = h_sql_int("SELECT count(*) FROM calendar.calendar_events"
				" WHERE id = ANY($1::uuid[])", pg_array(ok_ids, k2));

		ck_assert_msg(found == k2, "%lld of %d rows answered 2xx are missing",
				k2 - found, k2);
	}
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE topic = '"
			T_CREATED "' AND key = ANY($1::text[])", pg_array(ok_ids, k2)), k2);
	if (kn > 0) {
		/* A 503 is not "nothing happened" when the connection broke after
		 * the COMMIT reached the WAL: the client cannot know, and retries
		 * with its Idempotency-Key.  What must hold: a write that did land
		 * landed whole (its outbox row with it), every retry answers 2xx,
		 * and no title exists twice. */
		char *titles = pg_array(bad_titles, kn);
		long long landed = h_sql_int("SELECT count(*) FROM calendar.calendar_events"
				" WHERE owner_user_id = $1::uuid AND title = ANY($2::text[])", sub,
				titles);
		long long whole = h_sql_int("SELECT count(*) FROM calendar.calendar_events e"
				" JOIN calendar.outbox o ON o.key = e.id::text AND o.topic = '"
				T_CREATED "' WHERE e.owner_user_id = $1::uuid"
				" AND e.title = ANY($2::text[])", sub, titles);

		ck_assert_msg(whole == landed, "%lld of %lld writes answered non-2xx "
				"landed without their outbox row", landed - whole, landed);
		for (int j = 0; j < kn; j++) {
			struct h_resp *r = h_request("POST", EV, tok, bad_bodies[j],
					bad_keys[j]);

			ck_assert_msg(r->status == 201, "retry of %s with its "
					"Idempotency-Key: %ld %s", bad_titles[j], r->status, r->body);
			ok_ids[k2++] = h_strdup(h_jstr(r->json, "id"));
			h_resp_free(r);
		}
		fprintf(stderr, "faults/pgrestart: %d non-2xx retried with their keys, "
				"%lld had committed before the answer was lost\n", kn, landed);
		ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events"
				" WHERE owner_user_id = $1::uuid AND title = ANY($2::text[])", sub,
				titles), kn);
		ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT title) FROM"
				" calendar.calendar_events WHERE owner_user_id = $1::uuid"
				" AND title = ANY($2::text[])", sub, titles), kn);
	}
	/* the worker host recovered too: the relay publishes the new rows */
	ck_assert_msg(H_WAIT_UNTIL(unpublished(pg_array(ok_ids, k2)) == 0, 60000),
			"the relay did not recover after the restart");
	free(ok_ids);
	free(bad_titles);
	free(bad_keys);
	free(bad_bodies);
}
END_TEST

static void pg_teardown(void)
{
	/* never leave the stack without its database */
	char *cmd = h_sprintf("runuser -u postgres -- '%s/pg_ctl' -D '%s' status >/dev/null 2>&1"
			" || runuser -u postgres -- '%s/pg_ctl' -D '%s' -l '%s' -w -t 60 -o '%s'"
			" start >/dev/null 2>&1", getenv("PIN_PG_BIN"), getenv("PIN_PG_DATA"),
			getenv("PIN_PG_BIN"), getenv("PIN_PG_DATA"), getenv("PIN_PG_LOG"),
			getenv("PIN_PG_OPTS"));

	if (system(cmd) != 0)
		fprintf(stderr, "faults: PostgreSQL could not be started again\n");
	h_cleanup();
}

/* ---- 4. seeded mutation run over every write endpoint ------------------ */

struct endpoint {
	const char *method;
	const char *path;       /* %s: the resource id (E event, B batch, S slot, A appointment) */
	char res;               /* 'E', 'B', 'S', 'A', 'N' (notification: random), 0 none */
	char who;               /* 'a' agent, 'i' investor */
	const char *body;       /* base JSON (NULL: none); @S@ = a free slot id */
};

static const struct endpoint endpoints[] = {
	{ "POST", EV, 0, 'a', "{\"kind\":\"Meeting\",\"title\":\"m\",\"description\":\"d\","
	  "\"location\":\"l\",\"startAt\":\"@T1@\",\"endAt\":\"@T2@\",\"timeZone\":"
	  "\"Europe/Moscow\",\"reminderOffsetsMinutes\":[60],\"clientUserId\":\"@U@\"}" },
	{ "PATCH", EV "/%s", 'E', 'a', "{\"title\":\"t2\",\"description\":\"d2\","
	  "\"location\":\"l2\",\"priority\":\"High\"}" },
	{ "POST", EV "/%s/reschedule", 'E', 'a', "{\"startAt\":\"@T1@\",\"endAt\":\"@T2@\"}" },
	{ "POST", EV "/%s/start", 'E', 'a', "{}" },
	{ "POST", EV "/%s/complete", 'E', 'a', "{}" },
	{ "POST", EV "/%s/cancel", 'E', 'a', "{\"reason\":\"r\"}" },
	{ "POST", "/api/v1/agent/calendar/slots/batches", 0, 'a', "{\"kind\":\"Showing\","
	  "\"timeZone\":\"UTC\",\"windows\":[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":"
	  "\"08:00\",\"to\":\"09:00\"}],\"fromDate\":\"@D1@\",\"toDate\":\"@D1@\","
	  "\"slotDurationMinutes\":60,\"autoConfirm\":false,\"cancellationCutoffMinutes\":60,"
	  "\"projectId\":\"@U@\"}" },
	{ "POST", "/api/v1/agent/calendar/slots/batches/preview", 0, 'a', "{\"kind\":"
	  "\"Showing\",\"timeZone\":\"UTC\",\"windows\":[{\"daysOfWeek\":[1,2,3],\"from\":"
	  "\"08:00\",\"to\":\"09:00\"}],\"fromDate\":\"@D1@\",\"toDate\":\"@D1@\","
	  "\"slotDurationMinutes\":30}" },
	{ "POST", "/api/v1/agent/calendar/slots/batches/%s/archive", 'B', 'a', "{}" },
	{ "POST", "/api/v1/agent/calendar/slots/%s/archive", 'S', 'a', "{}" },
	{ "POST", "/api/public/calendar/appointments", 0, 'i', "{\"slotId\":\"@S@\","
	  "\"comment\":\"c\"}" },
	{ "POST", "/api/v1/agent/calendar/appointments/%s/confirm", 'A', 'a', "{}" },
	{ "POST", "/api/v1/agent/calendar/appointments/%s/decline", 'A', 'a',
	  "{\"reason\":\"busy\",\"releaseSlot\":true}" },
	{ "POST", "/api/v1/agent/calendar/appointments/%s/cancel", 'A', 'a',
	  "{\"reason\":\"sick\",\"releaseSlot\":false}" },
	{ "POST", "/api/v1/agent/calendar/appointments/%s/complete", 'A', 'a',
	  "{\"outcome\":\"Completed\",\"outcomeNote\":\"n\"}" },
	{ "POST", "/api/v1/investor/calendar/appointments/%s/cancel", 'A', 'i',
	  "{\"reason\":\"r\"}" },
	{ "POST", "/api/v1/investor/calendar/appointments/%s/reschedule", 'A', 'i',
	  "{\"newSlotId\":\"@S@\"}" },
	{ "PUT", "/api/v1/me/notification-settings", 0, 'i', "{\"locale\":\"ru\","
	  "\"timeZone\":\"Europe/Moscow\",\"quietHours\":{\"from\":\"22:00\",\"to\":"
	  "\"08:00\"},\"globalMute\":false,\"overrides\":{\"AppointmentReminder\":"
	  "{\"Sms\":false}}}" },
	{ "POST", "/api/v1/me/notifications/%s/read", 'N', 'i', NULL },
};
#define N_ENDPOINTS (sizeof(endpoints) / sizeof(endpoints[0]))

struct mut_ctx {
	char *agent, *tenant, *atok, *investor, *itok;
	char *event, *batch, *appointment;
	char *slots[64];
	int nslots, next_slot;
	unsigned seed;
};

static unsigned rnd(struct mut_ctx *c, unsigned n)
{
	return (unsigned)rand_r(&c->seed) % n;
}

static char *replace_all(const char *s, const char *what, const char *with)
{
	char *out = h_strdup(s), *p;

	while ((p = strstr(out, what)) != NULL)
		out = h_sprintf("%.*s%s%s", (int)(p - out), out, with, p + strlen(what));
	return out;
}

static char *free_slot(struct mut_ctx *c)
{
	return c->slots[c->next_slot++ % c->nslots];
}

/* Fresh resources: one event, one batch of slots, one pending appointment. */
static void mut_refresh(struct mut_ctx *c, int day)
{
	struct h_resp *r;
	json_object *sl;

	r = h_post(EV, c->atok, task_body("mut", day));
	ck_assert_msg(r->status == 201, "event: %ld %s", r->status, r->body);
	c->event = h_strdup(h_jstr(r->json, "id"));
	r = h_post("/api/v1/agent/calendar/slots/batches", c->atok, h_sprintf(
		"{\"kind\":\"Showing\",\"timeZone\":\"UTC\",\"windows\":[{\"daysOfWeek\":"
		"[1,2,3,4,5,6,7],\"from\":\"06:00\",\"to\":\"14:00\"}],\"fromDate\":\"%s\","
		"\"toDate\":\"%s\",\"slotDurationMinutes\":60,\"autoConfirm\":false,"
		"\"cancellationCutoffMinutes\":0}", h_date_in(5 + day), h_date_in(5 + day)));
	ck_assert_msg(r->status == 201, "batch: %ld %s", r->status, r->body);
	c->batch = h_strdup(h_jstr(h_jget(r->json, "batch"), "id"));
	sl = h_jget(r->json, "slots");
	c->nslots = 0;
	for (size_t i = 0; i < json_object_array_length(sl) && c->nslots < 64; i++)
		c->slots[c->nslots++] = h_strdup(h_jstr(json_object_array_get_idx(sl, i), "id"));
	ck_assert_int_ge(c->nslots, 3);
	c->next_slot = 1;
	/* one active appointment per investor, kind and agent: a new investor */
	c->investor = h_uuid();
	c->itok = h_token("investor", c->investor, NULL);
	r = h_post("/api/public/calendar/appointments", c->itok,
			h_sprintf("{\"slotId\":\"%s\"}", c->slots[0]));
	ck_assert_msg(r->status == 201, "book: %ld %s", r->status, r->body);
	c->appointment = h_strdup(h_jstr(r->json, "id"));
}

/* Everything a write of this drill's agent/investor can change. */
static char *mut_snapshot(const struct mut_ctx *c)
{
	return h_sql_scalar("SELECT concat_ws('|',"
		" (SELECT count(*) || '/' || coalesce(max(updated_at)::text, '')"
		"  FROM calendar.calendar_events WHERE owner_user_id = $1::uuid),"
		" (SELECT count(*) || '/' || coalesce(max(r.updated_at)::text, '')"
		"  FROM calendar.event_reminders r JOIN calendar.calendar_events e"
		"  ON e.id = r.calendar_event_id WHERE e.owner_user_id = $1::uuid),"
		" (SELECT count(*) || '/' || coalesce(max(updated_at)::text, '')"
		"  FROM calendar.slot_batches WHERE owner_user_id = $1::uuid),"
		" (SELECT count(*) || '/' || coalesce(max(updated_at)::text, '')"
		"  FROM calendar.availability_slots WHERE owner_user_id = $1::uuid),"
		" (SELECT count(*) || '/' || coalesce(max(updated_at)::text, '')"
		"  FROM calendar.appointments WHERE agent_user_id = $1::uuid),"
		" (SELECT count(*) FROM calendar.outbox o WHERE o.key IN"
		"  (SELECT id::text FROM calendar.calendar_events WHERE owner_user_id = $1::uuid"
		"   UNION ALL SELECT id::text FROM calendar.appointments"
		"   WHERE agent_user_id = $1::uuid)),"
		" (SELECT count(*) FROM calendar.idempotency_keys),"
		" (SELECT count(*) || '/' || coalesce(max(updated_at)::text, '')"
		"  FROM notifications.user_notification_settings WHERE user_id = $2::uuid))",
		c->agent, c->investor);
}

static const char *const bad_strings[] = {
	"\xf4\x90\x80\x80", "\xed\xa0\x80", "\xc0\xaf", "\xff\xfe", "a\\u0000b", "\\u0000",
	"9999-12-31T23:30:00Z", "10000-01-01T00:00:00Z", "0000-01-01T00:00:00Z",
	"2026-02-30T10:00:00Z", "1969-12-31T23:59:59Z", "2026-12-01T25:00:00Z",
	"-infinity", "infinity", "2026-13-01", "00:00", "24:00", "99:99",
	NIL_UUID, "not-a-uuid", "0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6", "\\ud800",
	"' OR 1=1 --", "%s%n", "Europe/Nowhere", "", " ",
};
#define N_BAD (sizeof(bad_strings) / sizeof(bad_strings[0]))

static const char *const bad_values[] = {
	"42", "-1", "1e309", "2147483648", "true", "null", "[]", "{}", "[[[[[[[[1]]]]]]]]",
	"\"\"", "0.5", "-0", "9223372036854775808",
};
#define N_BADV (sizeof(bad_values) / sizeof(bad_values[0]))

/* A random top-level key of the JSON object text (NULL when none). */
static char *pick_key(struct mut_ctx *c, const char *body)
{
	json_object *o = json_tokener_parse(body);
	char *key = NULL;
	int n, k = 0;

	if (!o || !json_object_is_type(o, json_type_object) || !(n = json_object_object_length(o))) {
		if (o)
			json_object_put(o);
		return NULL;
	}
	int want = (int)rnd(c, (unsigned)n);
	json_object_object_foreach(o, kk, vv) {
		(void)vv;
		if (k++ == want)
			key = h_strdup(kk);
	}
	json_object_put(o);
	return key;
}

/* Replaces the value of "key" in body (text-level, JSON value text). */
static char *set_key(const char *body, const char *key, const char *value_text)
{
	json_object *o = json_tokener_parse(body);
	char *out;

	if (!o)
		return h_strdup(body);
	json_object_object_add(o, key, json_object_new_string("@@V@@"));
	out = replace_all(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
				JSON_C_TO_STRING_NOSLASHESCAPE), "\"@@V@@\"", value_text);
	json_object_put(o);
	return out;
}

static char *del_key(const char *body, const char *key)
{
	json_object *o = json_tokener_parse(body);
	char *out;

	if (!o)
		return h_strdup(body);
	json_object_object_del(o, key);
	out = h_strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return out;
}

/* One mutation of body (and maybe of the path id); *what says which. */
static char *mutate(struct mut_ctx *c, const char *body, char **id, char **what)
{
	unsigned m = rnd(c, 9);
	char *key = body ? pick_key(c, body) : NULL;

	if (!body || (!key && m < 6))
		m = 6 + rnd(c, 3);
	switch (m) {
	case 0:
		*what = h_sprintf("delete %s", key);
		return del_key(body, key);
	case 1: {
		const char *v = bad_values[rnd(c, N_BADV)];

		*what = h_sprintf("%s = %s", key, v);
		return set_key(body, key, v);
	}
	case 2: {
		size_t len = rnd(c, 2) ? 100000 : 1200000;   /* the second: over nginx's 1 MiB */
		char *s = malloc(len + 3);

		ck_assert_ptr_nonnull(s);
		s[0] = '"';
		memset(s + 1, rnd(c, 2) ? 'a' : '7', len);
		s[len + 1] = '"';
		s[len + 2] = '\0';
		*what = h_sprintf("%s = huge string (%zu)", key, len);
		char *out = set_key(body, key, s);
		free(s);
		return out;
	}
	case 3: case 4: case 5: {
		const char *b = bad_strings[rnd(c, N_BAD)];
		bool suffix = rnd(c, 2);
		json_object *o = json_tokener_parse(body);
		json_object *cur = o ? h_jget(o, key) : NULL;
		const char *old = cur && json_object_is_type(cur, json_type_string) ?
			json_object_get_string(cur) : "";
		char *v = suffix ? h_sprintf("\"%s%s\"", old, b) : h_sprintf("\"%s\"", b);

		if (o)
			json_object_put(o);
		*what = h_sprintf("%s = %s (bad string)", key, v);
		return set_key(body, key, v);
	}
	case 6: {
		static const char *const ids[] = { "not-a-uuid", NIL_UUID, "%00",
			"0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6bx", "%C0%AF", "%F4%90%80%80",
			"..%2F..%2Fetc", "1" };
		const char *b = ids[rnd(c, sizeof(ids) / sizeof(ids[0]))];

		if (*id) {
			*id = h_strdup(b);
			*what = h_sprintf("path id = %s", b);
			return body ? h_strdup(body) : NULL;
		}
		if (!body)
			return NULL;
		/* no id in the path: a bad uuid in a body field */
		key = pick_key(c, body);
		*what = h_sprintf("%s = \"%s\"", key, b);
		return key ? set_key(body, key, h_sprintf("\"%s\"", b)) : h_strdup(body);
	}
	case 7: {
		static const char *const junk[] = { "{", "[", "{\"a\":", "nul", "{}}",
			"{\"a\":1,}", "\"x\"", "[1,2]", "{'a':1}", "{\"a\":01}", "\xef\xbb\xbf{}" };

		if (body && rnd(c, 2)) {
			size_t cut = rnd(c, (unsigned)strlen(body));

			*what = h_sprintf("truncated at %zu", cut);
			return h_sprintf("%.*s", (int)cut, body);
		}
		const char *j = junk[rnd(c, sizeof(junk) / sizeof(junk[0]))];
		*what = h_sprintf("body = %s", j);
		return h_strdup(j);
	}
	default: {
		/* deep nesting */
		size_t depth = 5000 + rnd(c, 20000);
		char *s = malloc(depth * 2 + 1);
		char *out;

		ck_assert_ptr_nonnull(s);
		memset(s, '[', depth);
		memset(s + depth, ']', depth);
		s[depth * 2] = '\0';
		*what = h_sprintf("nested %zu deep", depth);
		out = h_strdup(s);
		free(s);
		return out;
	}
	}
}

struct mut_resp {
	long status;
	CURLcode rc;
	char err[CURL_ERROR_SIZE];
};

static void mut_send(const char *method, const char *path, const char *token,
		const char *body, struct mut_resp *out)
{
	CURL *c = curl_easy_init();
	struct curl_slist *hl = NULL;
	struct h_buf b = { NULL, 0 };
	char *url = h_sprintf("%s%s", h_env("PIN_BASE_URL"), path);

	ck_assert_ptr_nonnull(c);
	out->err[0] = '\0';
	hl = curl_slist_append(hl, h_sprintf("Authorization: Bearer %s", token));
	hl = curl_slist_append(hl, "Content-Type: application/json");
	hl = curl_slist_append(hl, "Expect:");
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 30L);
	curl_easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, out->err);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, h_curl_write);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	/* public bookings from their own loopback address (nginx's per-IP limit) */
	if (!strncmp(path, "/api/public/", 12))
		curl_easy_setopt(c, CURLOPT_INTERFACE, "127.0.0.43");
	if (body) {
		curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
	}
	out->rc = curl_easy_perform(c);
	out->status = 0;
	if (out->rc == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
	if (out->rc == CURLE_INTERFACE_FAILED) {
		/* no second loopback address here: the default one */
		curl_easy_setopt(c, CURLOPT_INTERFACE, NULL);
		out->rc = curl_easy_perform(c);
		if (out->rc == CURLE_OK)
			curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
	}
	curl_slist_free_all(hl);
	curl_easy_cleanup(c);
	free(b.p);
}

/* The request, printable (bytes >= 0x80 and controls as \xNN, long bodies cut). */
static char *printable(const char *s)
{
	size_t n = s ? strlen(s) : 0, max = 600, o = 0;
	char *out = malloc(max * 4 + 64);

	ck_assert_ptr_nonnull(out);
	for (size_t i = 0; i < n && i < max; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch < 0x20 || ch >= 0x7f)
			o += (size_t)sprintf(out + o, "\\x%02X", ch);
		else
			out[o++] = (char)ch;
	}
	if (n > max)
		o += (size_t)sprintf(out + o, "... (%zu bytes)", n);
	out[o] = '\0';
	char *r = h_strdup(s ? out : "(no body)");
	free(out);
	return r;
}

START_TEST(drill_mutation_run)
{
	int n = volume(2000), n2xx = 0, n4xx = 0, n5xx = 0, resets = 0, left = 0;
	struct mut_ctx c = { 0 };
	const char *seed_env = h_env_opt("PIN_FAULTS_SEED", NULL);
	char *first_fail = NULL, *fail;
	unsigned seed;
	int nfail = 0;
	int64_t t0 = h_now_ms();

	c.seed = seed_env ? (unsigned)strtoul(seed_env, NULL, 10) : (unsigned)time(NULL);
	seed = c.seed;
	fprintf(stderr, "faults/mutation: seed=%u (replay: PIN_FAULTS_SEED=%u)\n", seed, seed);
	c.agent = h_uuid();
	c.tenant = h_uuid();
	c.atok = agent_token(c.agent, c.tenant);
	mut_refresh(&c, 0);

	for (int i = 0; i < n; i++) {
		const struct endpoint *e = &endpoints[rnd(&c, N_ENDPOINTS)];
		char *id = NULL, *what = NULL, *body, *path, *before, *after, *base = NULL;
		struct mut_resp r;

		if (i > 0 && i % 250 == 0)
			mut_refresh(&c, i / 250);
		switch (e->res) {
		case 'E': id = c.event; break;
		case 'B': id = c.batch; break;
		case 'S': id = c.slots[c.nslots - 1]; break;
		case 'A': id = c.appointment; break;
		case 'N': id = h_uuid(); break;
		default: break;
		}
		if (e->body) {
			base = replace_all(e->body, "@T1@", h_iso_in(86400 * 20 + i * 3600));
			base = replace_all(base, "@T2@", h_iso_in(86400 * 20 + i * 3600 + 1800));
			base = replace_all(base, "@D1@", h_date_in(40 + i % 100));
			base = replace_all(base, "@U@", h_uuid());
			base = replace_all(base, "@S@", free_slot(&c));
		}
		body = mutate(&c, base, &id, &what);
		if (rnd(&c, 4) == 0 && body && strchr(body, '{')) {
			/* a second mutation on top */
			char *w2 = NULL, *id2 = id;

			body = mutate(&c, body, &id2, &w2);
			id = id2;
			what = h_sprintf("%s; %s", what, w2);
		}
		path = strstr(e->path, "%s") ? replace_all(e->path, "%s", id) : h_strdup(e->path);
		before = mut_snapshot(&c);
		mut_send(e->method, path, e->who == 'a' ? c.atok : c.itok, body, &r);
		fail = NULL;
		if (r.rc != CURLE_OK) {
			resets++;
			fail = h_sprintf("request %d: %s %s [%s]: transport error %s (%s)"
						" -- body: %s", i, e->method, path, printable(what),
						curl_easy_strerror(r.rc), r.err, printable(body));
		} else if (r.status >= 500) {
			n5xx++;
			fail = h_sprintf("request %d: %s %s [%s] -> %ld -- body: %s", i,
						e->method, path, printable(what), r.status, printable(body));
		} else if (r.status >= 200 && r.status < 300) {
			n2xx++;
		} else {
			n4xx++;
			after = mut_snapshot(&c);
			if (strcmp(before, after)) {
				left++;
				fail = h_sprintf("request %d: %s %s [%s] -> %ld changed "
							"rows (%s -> %s) -- body: %s", i, e->method, path,
							printable(what), r.status, before, after,
							printable(body));
			}
		}
		if (fail) {
			if (!first_fail)
				first_fail = fail;
			if (nfail++ < 30)
				fprintf(stderr, "faults/mutation: FAIL %s\n", fail);
		}
	}
	fprintf(stderr, "faults/mutation: seed=%u requests=%d 2xx=%d non-2xx=%d 5xx=%d "
			"resets=%d rows-left-by-non-2xx=%d seconds=%.1f\n", seed, n, n2xx, n4xx,
			n5xx, resets, left, (double)(h_now_ms() - t0) / 1000);
	ck_assert_msg(h_host_pid("api") > 0 && h_host_pid("worker") > 0,
			"a host died during the mutation run");
	{
		struct h_resp *hr = h_get("/healthz", NULL);

		ck_assert_msg(hr->status == 200, "/healthz after the run: %ld", hr->status);
	}
	ck_assert_msg(n5xx == 0 && resets == 0 && left == 0,
			"seed %u: %d 5xx, %d resets, %d non-2xx with changes; first: %s",
			seed, n5xx, resets, left, first_fail);
}
END_TEST

/* ---- 5. poison messages for every consumer group ----------------------- */

struct group {
	const char *name;          /* consumer group (the DLQ is <name>.dlq) */
	const char *code_invalid;  /* the group's invalid-payload code */
	const char *inbox;         /* inbox table */
};

static const struct group g_cal_id = { "calendar-identity-users",
	"CAL_IDENTITY_INVALID_PAYLOAD", "calendar.inbox" };
static const struct group g_ntf_id = { "notifications-identity-users",
	"NTF_INVALID_PAYLOAD", "notifications.processed_messages" };
static const struct group g_ntf_cal = { "notifications-calendar-events",
	"NTF_INVALID_PAYLOAD", "notifications.processed_messages" };
static const struct group g_booking = { "calendar-crm-booking-events",
	"CAL_BOOKING_SYNC_INVALID_PAYLOAD", "calendar.inbox" };
static const struct group g_deal = { "calendar-crm-deal-events",
	"CAL_DEAL_SYNC_INVALID_PAYLOAD", "calendar.inbox" };

/* A topic and the groups that consume it, with a payload builder:
 * id_json = the JSON value of the key field, text = the raw contents of a
 * free-text string (NULL: "text") */
struct ptopic {
	const char *topic, *event_type, *agg_type;
	const struct group *groups[2];
	bool text_in_payload;      /* else the free text goes to correlationId */
	char *(*payload)(const char *id_json, const char *text);
};

static char *p_identity(const char *id, const char *text)
{
	return h_sprintf("{\"userId\":%s,\"displayName\":\"%s\",\"avatarUrl\":null,"
			"\"email\":\"u@example.com\",\"phone\":null,\"locale\":\"ru\","
			"\"timeZone\":\"Europe/Moscow\",\"status\":\"Active\"}", id, text);
}

static char *p_status(const char *id, const char *text)
{
	return h_sprintf("{\"eventId\":%s,\"tenantId\":\"%s\",\"ownerUserId\":\"%s\","
			"\"kind\":\"Meeting\",\"origin\":\"Manual\",\"clientUserId\":\"%s\","
			"\"previousStatus\":\"Planned\",\"status\":\"Cancelled\","
			"\"cancelReason\":\"%s\",\"startAt\":\"2030-06-01T09:00:00Z\","
			"\"endAt\":null,\"timeZone\":\"Europe/Moscow\",\"dealId\":null,"
			"\"bookingId\":null,\"appointmentId\":null}", id, h_uuid(), h_uuid(),
			h_uuid(), text);
}

static char *p_booking(const char *id, const char *text)
{
	(void)text;
	return h_sprintf("{\"bookingId\":%s}", id);
}

static char *p_deal(const char *id, const char *text)
{
	(void)text;
	return h_sprintf("{\"dealId\":%s,\"agencyCompanyId\":\"%s\","
			"\"executorAgentUserId\":\"%s\"}", id, h_uuid(), h_uuid());
}

static const struct ptopic ptopics[] = {
	{ "pin.identity.users.v1", "pin.identity.user-updated", "User",
	  { &g_cal_id, &g_ntf_id }, true, p_identity },
	{ "pin.calendar.event-status-changed.v1", "pin.calendar.event-status-changed",
	  "CalendarEvent", { &g_ntf_cal, NULL }, true, p_status },
	{ "pin.crm.booking-cancelled.v1", "pin.crm.booking-cancelled", "Booking",
	  { &g_booking, NULL }, false, p_booking },
	{ "pin.crm.deal-created.v1", "pin.crm.deal-created", "Deal",
	  { &g_deal, NULL }, false, p_deal },
};

enum pexpect { X_ENVELOPE, X_INVALID, X_ANY_INVALID_PAYLOAD, X_APPLIED };

enum pkind { K_BYTES, K_NULL_VALUE, K_TRUNCATED, K_PAYLOAD_NOT_OBJECT, K_WRONG_TYPE,
	K_NULL_FIELD, K_HUGE, K_NUL, K_NIL_UUID, K_VERSION };

static const struct prow {
	const char *name;
	enum pkind kind;
	const char *bytes;      /* K_BYTES */
	enum pexpect want;
} prows[] = {
	{ "wrong type (id 42)", K_WRONG_TYPE, NULL, X_INVALID },
	{ "null id field", K_NULL_FIELD, NULL, X_INVALID },
	{ "nil uuid", K_NIL_UUID, NULL, X_INVALID },
	{ "null Kafka value", K_NULL_VALUE, NULL, X_ENVELOPE },
	{ "truncated JSON", K_TRUNCATED, NULL, X_ENVELOPE },
	{ "payload not an object", K_PAYLOAD_NOT_OBJECT, NULL, X_ENVELOPE },
	{ "huge payload (900 KB id)", K_HUGE, NULL, X_INVALID },
	/* seeds 001/004: ContractVersion != 1 -> warn-and-proceed (applied) */
	{ "unknown contractVersion 2", K_VERSION, NULL, X_APPLIED },
	{ "NUL \\u0000 in a string", K_NUL, NULL, X_ANY_INVALID_PAYLOAD },
	/* last: on a branch without strict UTF-8 these hold their partition */
	{ "utf8 F4 90 80 80 (> U+10FFFF)", K_BYTES, "\xf4\x90\x80\x80", X_ENVELOPE },
	{ "utf8 ED A0 80 (surrogate)", K_BYTES, "\xed\xa0\x80", X_ENVELOPE },
	{ "utf8 C0 AF (overlong)", K_BYTES, "\xc0\xaf", X_ENVELOPE },
};
#define N_PROWS (sizeof(prows) / sizeof(prows[0]))
#define N_PTOPICS (sizeof(ptopics) / sizeof(ptopics[0]))

static char *penvelope(const struct ptopic *t, const char *mid, const char *key,
		int version, const char *corr, const char *payload)
{
	return h_sprintf("{\"messageId\":\"%s\",\"eventType\":\"%s\",\"contractVersion\":%d,"
			"\"createdAt\":\"%s\",\"aggregateType\":\"%s\",\"aggregateId\":\"%s\","
			"\"correlationId\":%s,\"payload\":%s}", mid, t->event_type, version,
			h_iso_in(0), t->agg_type, key, corr, payload);
}

/* wall clock (Kafka timestamps are epoch ms; h_now_ms() is monotonic) */
static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct pcase {
	const struct ptopic *t;
	const struct prow *row;
	char *key, *mid, *valid_mid;
	int64_t t_ms;
};

static bool inbox_has(const struct group *g, const char *mid)
{
	return h_sql_int(h_sprintf("SELECT count(*) FROM %s WHERE consumer_group = $1"
			" AND message_id = $2::uuid", g->inbox), g->name, mid) == 1;
}

static void poison_produce(struct pcase *pc)
{
	const struct ptopic *t = pc->t;
	const struct prow *row = pc->row;
	char *key_json = h_sprintf("\"%s\"", pc->key), *text = "Anna", *corr = "null";
	char *id = key_json, *payload, *env = NULL;
	int version = 1;
	size_t len;

	switch (row->kind) {
	case K_BYTES:
		text = h_sprintf("Anna %s Lee", row->bytes);
		if (!t->text_in_payload)
			corr = h_sprintf("\"trace-%s\"", row->bytes);
		break;
	case K_WRONG_TYPE: id = "42"; break;
	case K_NULL_FIELD: id = "null"; break;
	case K_NIL_UUID: id = "\"" NIL_UUID "\""; break;
	case K_NUL:
		if (t->text_in_payload)
			text = "An\\u0000na";
		else
			id = h_sprintf("\"%s\\u0000x\"", pc->key);
		break;
	case K_HUGE: {
		char *s = malloc(900 * 1024 + 1);

		ck_assert_ptr_nonnull(s);
		memset(s, 'a', 900 * 1024);
		s[900 * 1024] = '\0';
		id = h_sprintf("\"%s\"", s);
		free(s);
		break;
	}
	case K_VERSION: version = 2; break;
	default: break;
	}
	payload = row->kind == K_PAYLOAD_NOT_OBJECT ? "\"payload\"" : t->payload(id, text);
	if (row->kind != K_NULL_VALUE)
		env = penvelope(t, pc->mid, pc->key, version, corr, payload);
	len = env ? strlen(env) : 0;
	if (row->kind == K_TRUNCATED)
		len /= 2;
	pc->t_ms = wall_ms();
	ck_assert_int_eq(h_kafka_produce_raw(t->topic, pc->key, env, len), 0);
	/* the next valid message on the same key (same partition) */
	ck_assert_int_eq(h_kafka_produce(t->topic, pc->key, penvelope(t, pc->valid_mid,
			pc->key, 1, "null", t->payload(key_json, "Anna Lee"))), 0);
}

/* The DLQ message of key on list l, NULL when none. */
static const struct h_kmsg *dlq_of(struct h_kmsgs *l, const char *key)
{
	for (size_t i = 0; i < l->n; i++)
		if (l->v[i].key && !strcmp(l->v[i].key, key))
			return &l->v[i];
	return NULL;
}

/* Judges one case for group g once the row's deadline has passed; prints
 * it; returns NULL when it passed, else the problem. */
static const char *poison_judge(const struct pcase *pc, const struct group *g,
		int64_t deadline)
{
	char *dlq = h_sprintf("%s.dlq", g->name);
	const struct h_kmsg *m = NULL;
	const char *code = NULL, *problem = NULL;
	int64_t lat = -1;
	bool applied;

	if (pc->row->want != X_APPLIED) {
		while (!(m = dlq_of(h_kafka_read_all(dlq, 5000), pc->key)) &&
				h_now_ms() < deadline)
			h_sleep_ms(200);
		if (m) {
			code = h_kmsg_header(m, "x-error-code");
			lat = m->ts_ms - pc->t_ms;
		}
	}
	applied = H_WAIT_UNTIL(inbox_has(g, pc->valid_mid),
			deadline > h_now_ms() ? deadline - h_now_ms() : 0);
	switch (pc->row->want) {
	case X_APPLIED:
		m = dlq_of(h_kafka_read_all(dlq, 5000), pc->key);
		if (m)
			problem = "sent to the DLQ";
		else if (!H_WAIT_UNTIL(inbox_has(g, pc->mid), 1000))
			problem = "not applied";
		break;
	default: {
		const char *want = pc->row->want == X_ENVELOPE ? "INVALID_ENVELOPE" :
			g->code_invalid;
		size_t cl = code ? strlen(code) : 0;

		if (!m)
			problem = inbox_has(g, pc->mid) ? "applied, not in the DLQ" :
				"neither in the DLQ nor applied (held: retried)";
		else if (pc->row->want == X_ANY_INVALID_PAYLOAD ?
				cl < 15 || strcmp(code + cl - 15, "INVALID_PAYLOAD") :
				!code || strcmp(code, want))
			problem = "wrong code";
		else if (lat > 5000)
			problem = "in the DLQ later than 5 s";
		else if (inbox_has(g, pc->mid))
			problem = "in the DLQ and applied";
		break;
	}
	}
	if (!problem && !applied)
		problem = "the next valid message (same key) not applied within 10 s";
	fprintf(stderr, "faults/poison: %-29s %-31s dlq=%-32s %5lld ms next=%-7s %s%s\n",
			g->name, pc->row->name, code ? code : m ? "(no code)" : "-",
			(long long)lat, applied ? "applied" : "STALLED",
			problem ? "FAIL: " : "ok", problem ? problem : "");
	return problem;
}

START_TEST(drill_poison_table)
{
	size_t ncases = 0, fails = 0;
	char *report = h_strdup("");
	int64_t t0 = h_now_ms();

	/* row by row (the rows of all topics at once), so that a row that
	 * stalls a partition does not hide the verdict of the rows before it */
	for (size_t ri = 0; ri < N_PROWS; ri++) {
		struct pcase cases[N_PTOPICS];
		int64_t deadline;

		for (size_t ti = 0; ti < N_PTOPICS; ti++) {
			struct pcase *pc = &cases[ti];

			pc->t = &ptopics[ti];
			pc->row = &prows[ri];
			pc->key = h_uuid();
			pc->mid = h_uuid();
			pc->valid_mid = h_uuid();
			poison_produce(pc);
		}
		deadline = h_now_ms() + 10000;
		for (size_t ti = 0; ti < N_PTOPICS; ti++)
			for (int gi = 0; gi < 2 && ptopics[ti].groups[gi]; gi++) {
				const struct group *g = ptopics[ti].groups[gi];
				const char *problem = poison_judge(&cases[ti], g, deadline);

				ncases++;
				if (problem) {
					fails++;
					report = h_sprintf("%s; %s / %s: %s", report, g->name,
							prows[ri].name, problem);
				}
			}
	}
	fprintf(stderr, "faults/poison: groups=5 rows=%zu cases=%zu failed=%zu seconds=%.1f\n",
			N_PROWS, ncases, fails, (double)(h_now_ms() - t0) / 1000);
	ck_assert_msg(fails == 0, "%zu of %zu poison cases failed:%s", fails, ncases, report);
}
END_TEST


/* ---- 6. relay shard failover: kill -9 of the host leading a shard ------ */

#define RF_TOPIC "pin.bench.relay.v1"     /* created by the dev broker, not consumed */
#define RF_SHARDS 4                       /* relay_shards: the default, the stack sets none */
#define RF_CLASS "(hashtext('pin.relay:calendar.outbox') & 2147483647)::oid"

/* "pin-relay <pid>" of the session holding calendar.outbox's shard k, or NULL */
static char *rf_leader(int k)
{
	return h_sql_scalar("SELECT min(a.application_name) FROM pg_locks l JOIN pg_stat_activity a"
			" ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2"
			" AND l.classid = " RF_CLASS " AND l.objid = $1::int::oid", h_sprintf("%d", k));
}

static long long rf_hosts_leading(void)
{
	return h_sql_int("SELECT count(DISTINCT a.application_name) FROM pg_locks l"
			" JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
			" AND l.granted AND l.objsubid = 2 AND l.classid = " RF_CLASS);
}

static void rf_insert(const char *run, int from, int to)
{
	h_sql("INSERT INTO calendar.outbox (message_id, topic, key, envelope, created_at)"
		" SELECT m, '" RF_TOPIC "', $1 || '-' || i, jsonb_build_object('messageId', m,"
		" 'eventType', 'pin.test.relay-failover', 'contractVersion', 1,"
		" 'createdAt', '2026-12-01T00:00:00.000Z', 'aggregateType', 'Test',"
		" 'aggregateId', $1 || '-' || i, 'correlationId', NULL, 'payload',"
		" jsonb_build_object('i', i)), clock_timestamp()"
		" FROM (SELECT i, gen_random_uuid() AS m FROM generate_series($2::int, $3::int) i) s",
		run, h_sprintf("%d", from), h_sprintf("%d", to));
}

START_TEST(drill_relay_shard_failover)
{
	int n = volume(3000), chunk = 100, lost = 0, dups = 0, dup_outside = 0;
	char *run = h_sprintf("rf-%s", h_uuid()), *victim = NULL, *held = NULL;
	static const char *const none[] = { NULL };
	pid_t extra[2];
	long victim_pid = -1;
	bool stack_victim = false;
	int64_t t_kill = 0, failover_ms = -1;
	struct h_kmsgs *l;

	ck_assert_msg(h_host_pid("worker") > 0, "no worker host before the drill");
	/* two more worker hosts: 3 in all (no metrics listener or file of their own) */
	setenv("PIN_METRICS_LISTEN", "", 1);
	setenv("PIN_METRICS_TEXTFILE", "", 1);
	for (int i = 0; i < 2; i++)
		extra[i] = h_spawn_host("worker", NULL, 0, none);
	unsetenv("PIN_METRICS_LISTEN");
	unsetenv("PIN_METRICS_TEXTFILE");
	/* 3 hosts in the relay (2 member sessions each, relay_threads), the
	 * shards shared out: calendar.outbox's 4 shards over at least 2 hosts */
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(DISTINCT a.application_name)"
			" FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
			" WHERE l.locktype = 'advisory' AND l.granted AND l.classid = 730153"
			" AND l.objsubid = 2") == 3 && rf_hosts_leading() >= 2, 30000),
			"the relay did not spread over the 3 worker hosts (%lld lead shards)",
			rf_hosts_leading());
	for (int i = 0; i < n; i += chunk) {
		rf_insert(run, i, i + chunk - 1);
		if (!t_kill && i >= n / 3) {
			/* the host leading shard 0 while rows flow */
			victim = rf_leader(0);
			ck_assert_msg(victim && !strncmp(victim, "pin-relay ", 10), "no leader of shard 0");
			victim_pid = atol(victim + 10);
			held = h_sql_scalar("SELECT string_agg(DISTINCT l.objid::text, ',') FROM pg_locks l"
					" JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory'"
					" AND l.granted AND l.objsubid = 2 AND l.classid = " RF_CLASS
					" AND a.application_name = $1", victim);
			stack_victim = victim_pid == h_host_pid("worker");
			if (stack_victim) {
				h_worker_kill9();
			} else {
				ck_assert(kill((pid_t)victim_pid, SIGKILL) == 0);
				waitpid((pid_t)victim_pid, NULL, 0);
			}
			t_kill = h_now_ms();
			ck_assert_msg(H_WAIT_UNTIL(({ char *o = rf_leader(0);
					o && strcmp(o, victim) != 0; }), 30000),
					"nobody took shard 0 within 30 s of the kill");
			failover_ms = h_now_ms() - t_kill;
			fprintf(stderr, "faults/relayfail: killed %s (held calendar.outbox shards %s),"
					" shard 0 taken by %s after %lld ms\n", victim, held ? held : "?",
					rf_leader(0), (long long)failover_ms);
		}
		h_sleep_ms(20);
	}
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM calendar.outbox o WHERE topic = '"
			RF_TOPIC "' AND key LIKE $1 || '-%' AND NOT calendar.outbox_sent(o)", run) == 0,
			120000), "%lld of %d rows unpublished after 120 s", h_sql_int("SELECT count(*)"
			" FROM calendar.outbox o WHERE topic = '" RF_TOPIC "' AND key LIKE $1 || '-%'"
			" AND NOT calendar.outbox_sent(o)", run), n);
	/* every row on Kafka: count the messages of every key */
	l = h_kafka_read_all(RF_TOPIC, 60000);
	{
		int *seen = calloc((size_t)n, sizeof(int));
		size_t plen = strlen(run);

		ck_assert_ptr_nonnull(seen);
		for (size_t i = 0; i < l->n; i++) {
			const char *k = l->v[i].key;
			int idx;

			if (!k || strncmp(k, run, plen) != 0 || k[plen] != '-')
				continue;
			idx = atoi(k + plen + 1);
			if (idx >= 0 && idx < n)
				seen[idx]++;
		}
		for (int i = 0; i < n; i++) {
			if (seen[i] == 0) {
				lost++;
				continue;
			}
			dups += seen[i] - 1;
			/* a duplicate is a row the killed host produced but had
			 * not yet marked or moved its shard's cursor past: it
			 * must be in one of its shards */
			if (seen[i] > 1 && h_sql_int("SELECT CASE WHEN ((hashtext($1) & 2147483647) % "
					"$2::int)::text = ANY(string_to_array($3, ',')) THEN 0 ELSE 1 END",
					h_sprintf("%s-%d", run, i), h_sprintf("%d", RF_SHARDS),
					held ? held : "") != 0)
				dup_outside++;
		}
		free(seen);
	}
	fprintf(stderr, "faults/relayfail: rows=%d hosts=3 failover_ms=%lld lost=%d duplicates=%d"
			" (outside the killed host's shards: %d)\n", n, (long long)failover_ms, lost,
			dups, dup_outside);
	for (int i = 0; i < 2; i++)
		if (extra[i] != (pid_t)victim_pid) {
			kill(extra[i], SIGTERM);
			waitpid(extra[i], NULL, 0);
		}
	if (stack_victim)
		h_worker_start();
	ck_assert_msg(lost == 0, "%d of %d rows lost on Kafka", lost, n);
	ck_assert_msg(dup_outside == 0, "%d duplicates of rows outside the killed host's shards",
			dup_outside);
	ck_assert_msg(failover_ms <= 5000, "shard 0 was taken after %lld ms (relay_failover_s = 5)",
			(long long)failover_ms);
}
END_TEST

Suite *make_faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *k = h_tcase("kill9", 240);
	TCase *b = h_tcase("broker", 240);
	TCase *p = h_tcase("pgrestart", 240);
	TCase *m = h_tcase("mutation", 300);
	TCase *q = h_tcase("poison", 300);
	TCase *rf = h_tcase("relayfail", 240);

	tcase_add_test(k, drill_kill9_worker);
	suite_add_tcase(s, k);
	tcase_add_checked_fixture(b, NULL, broker_teardown);
	tcase_add_test(b, drill_broker_outage);
	suite_add_tcase(s, b);
	tcase_add_checked_fixture(p, NULL, pg_teardown);
	tcase_add_test(p, drill_pg_restart);
	suite_add_tcase(s, p);
	tcase_add_test(m, drill_mutation_run);
	suite_add_tcase(s, m);
	tcase_add_test(q, drill_poison_table);
	suite_add_tcase(s, q);
	tcase_add_test(rf, drill_relay_shard_failover);
	suite_add_tcase(s, rf);
	return s;
}
