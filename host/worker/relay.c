/*
 * relay.c -- the transactional outbox relay (worker mode).
 *
 * One thread.  Work units: every outbox (calendar.outbox and every table a
 * plugin registered, pin_registrar.outbox, ABI 1.1) is split into
 * relay_shards shards by a stable hash of the message key,
 * (hashtext(key) & 0x7fffffff) % relay_shards, computed by PostgreSQL when
 * the rows are read; every row of a key is in one shard, so per-key order
 * holds.  Each (outbox, shard) has its own leader: a session advisory lock
 * pg_try_advisory_lock(hashtext('pin.relay:' || outbox) & 0x7fffffff, shard)
 * on the relay thread's own connection.  If that connection is lost (new
 * backend pid) every lock is gone and is tried again.
 *
 * Several worker hosts share the shards: each host also holds a shared
 * "member" lock (RELAY_MEMBER_CLASS, relay_shards) per relay thread
 * (relay_threads, default 2: each thread has its own connection, producer
 * and shards, so two PostgreSQL backends work for one host); a member leads
 * at most ceil(relay_shards / members) shards of each outbox and releases
 * the extra ones (after their batches in flight are marked) when more
 * members join.  Hosts that run with a
 * different relay_shards (a change rolled out host by host) see each other's
 * member lock and relay nothing until they agree (ERROR log once).  Every
 * relay_failover_s / 5 (at most 1 s) a host tries the units nobody leads;
 * the relay's connection asks the server for TCP keepalives (idle 1 s,
 * interval 1 s, count relay_failover_s / 2 - 1, at least 1) and
 * tcp_user_timeout (relay_failover_s / 2), so the server ends a dead host's
 * session -- and its locks -- within about relay_failover_s / 2 + 1 s; a
 * killed process's socket is closed by its kernel at once.
 *
 * One unit is a pipeline: read up to relay_batch unpublished rows of the
 * shard in id order (after the rows in flight: a cursor) -> produce them
 * (key, value = envelope, no copy) with an idempotent producer, acks=all,
 * murmur2_random -> while their delivery reports come in, read and produce
 * the next batch (at most relay_inflight batches per unit) -> when every
 * report of the oldest batch is in, mark it: published_at = host clock for
 * the acknowledged rows in one UPDATE .. WHERE id = ANY($1); failed rows get
 * attempts + 1 and last_error, the unit stops reading, waits for its other
 * batches, and starts again from the oldest unpublished row of the shard
 * after a backoff (1 s doubling to 30 s), so per-key order holds.  A row is
 * marked published only after its delivery report.  The relay's session
 * commits with synchronous_commit off: a mark lost in a crash of the
 * database publishes its rows again (at-least-once), and no mark waits for
 * the WAL flush.  When delivery keeps
 * failing, the producer is recreated (the bootstrap file is re-read: the dev
 * broker comes back on a new port).  When a unit has nothing in flight its
 * cursor goes back to the start, so a row that committed late with a lower
 * id is read on the next pass: at once after a failed batch, else at most
 * every relay_rewind_ms (250: once caught up, a late row waits about that
 * long more; 0 = at every emptied window).  The time split of each relay thread is
 * logged at debug level once a second while rows flow ("outbox relay: time
 * split").
 *
 * Rows that can never be produced (larger than message.max.bytes, invalid,
 * a topic still unknown after relay_park_unknown_topic_attempts tries) do not
 * block the rows behind them: they are parked (parked_at, last_error,
 * pin_outbox_failed_total{outbox,reason} with reason too_large | invalid |
 * unknown_topic, one ERROR log line with id, topic, size, never the payload)
 * and the batch goes on.  A parked row is never retried by itself.
 *
 * Config: relay_batch (1000), relay_inflight (4), relay_shards (4),
 * relay_failover_s (5), relay_busy_interval_ms (50),
 * relay_idle_interval_ms (100), relay_rewind_ms (250), relay_backoff_max_ms (30000),
 * kafka_message_timeout_ms (10000), relay_once_timeout_ms (10000),
 * kafka_linger_ms (5), relay_park_unknown_topic_attempts (5),
 * metrics_textfile ("" = none: the worker host's metrics in Prometheus text
 * format, rewritten at most once a second, for node_exporter's textfile
 * collector; a worker host serves no HTTP).
 *
 * Metrics: pin_outbox_pending (gauge; also per {outbox}),
 * pin_outbox_oldest_unpublished_age_seconds{outbox} (host clock - created_at
 * of the oldest unpublished, unparked row; 0 when none; at most once a
 * second), pin_outbox_published_total, pin_outbox_failed_total{outbox,reason},
 * pin_outbox_publish_errors_total, pin_kafka_up (0/1),
 * pin_outbox_relay_leader (0/1: leads at least one shard),
 * pin_outbox_relay_shard_leader{outbox,shard} (0/1).
 *
 * The files: relay.c (this one) the threads, the leadership of the shards
 * and the relay loop; relay_batch.c the batch read and mark; relay_produce.c
 * the producer and its delivery reports; relay_metrics.c the gauges, the
 * metrics textfile and the time split.  relay.h is what they share.
 */
#include "config.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <librdkafka/rdkafka.h>

#include "relay.h"

/* the outboxes served: calendar.outbox, then those plugins registered */
size_t relay_noutboxes(void)
{
	return pin_reg.noutboxes ? pin_reg.noutboxes : 1;
}

const char *relay_outbox(size_t i)
{
	return pin_reg.noutboxes ? pin_reg.outboxes[i] : PIN_OUTBOX_DEFAULT;
}

#define RELAY_MAX_THREADS 8
static pthread_t relay_thr[RELAY_MAX_THREADS];
static int relay_nthr;
static bool relay_running;
_Atomic int relay_led_units;  /* over this host's relay threads */
static struct pin_waiter relay_w;    /* set up by start */

bool relay_should_stop(void)
{
	return relay_running ? pin_waiter_stopped(&relay_w) : pin_stopping;
}

/* Interruptible sleep: returns early when the relay is stopped. */
static void relay_sleep_ms(int ms)
{
	struct timespec ts;

	if (!relay_running) {         /* run_once: the caller's thread */
		ts.tv_sec = ms / 1000;
		ts.tv_nsec = (long)(ms % 1000) * 1000000L;
		nanosleep(&ts, NULL);
		return;
	}
	pin_waiter_sleep(&relay_w, ms);
}

static int relay_threads(void)
{
	long long t = pin_config_int("relay_threads", 2);

	return t < 1 ? 1 : t > RELAY_MAX_THREADS ? RELAY_MAX_THREADS : (int)t;
}

static int64_t relay_failover_ms(void)
{
	long long s = pin_config_int("relay_failover_s", 5);

	return (s < 1 ? 1 : s) * 1000;
}

static void units_build(struct relay *r)
{
	long long s = pin_config_int("relay_shards", 4);
	long long w = pin_config_int("relay_inflight", 4);

	r->nshards = s < 1 ? 1 : s > 1024 ? 1024 : (int)s;
	r->inflight = w < 1 ? 1 : w > RELAY_MAX_INFLIGHT ? RELAY_MAX_INFLIGHT : (int)w;
	r->batch = (int)pin_config_int("relay_batch", 1000);
	if (r->batch < 1)
		r->batch = 1;
	/* --once drains to a read from the start that finds nothing */
	r->rewind_us = r->once ? 0 : pin_config_int("relay_rewind_ms", 250) * 1000;
	if (r->rewind_us < 0)
		r->rewind_us = 0;
	r->nunits = (int)relay_noutboxes() * r->nshards;
	r->units = calloc((size_t)r->nunits, sizeof(*r->units));
	if (!r->units) {
		r->nunits = 0;
		return;
	}
	for (int i = 0; i < r->nunits; i++) {
		struct relay_unit *u = &r->units[i];

		u->table = relay_outbox((size_t)i / (size_t)r->nshards);
		u->shard = i % r->nshards;
		snprintf(u->lab, sizeof(u->lab), "outbox=\"%s\",shard=\"%d\"", u->table, u->shard);
		strcpy(u->cursor, "0");
	}
}

static void unit_log(struct relay_unit *u, int level, const char *msg, const char *reason,
		const struct relay *r)
{
	char sh[16], n[16];

	snprintf(sh, sizeof(sh), "%d", u->shard);
	snprintf(n, sizeof(n), "%d", r->nshards);
	pin_log(level, msg, "outbox", u->table, "shard", sh, "shards", n,
			"reason", reason, NULL);
}

static void leader_gauge(struct relay *r)
{
	int any = 0, n = 0, total;

	for (int i = 0; i < r->nunits; i++)
		n += r->units[i].led;
	any = n > 0;
	if (any != r->any_led) {
		total = atomic_fetch_add(&relay_led_units, any ? 1 : (r->any_led == 1 ? -1 : 0)) +
			(any ? 1 : (r->any_led == 1 ? -1 : 0));
		pin_metric_set("pin_outbox_relay_leader", NULL, total > 0);
	}
	r->any_led = any;
}

static void unit_lost(struct relay *r, struct relay_unit *u, const char *reason)
{
	if (!u->led)
		return;
	u->led = false;
	u->releasing = false;
	pin_metric_set("pin_outbox_relay_shard_leader", u->lab, 0);
	unit_log(u, PIN_LOG_WARN, "outbox relay: shard lost", reason, r);
}

void relay_lose_all(struct relay *r, const char *reason)
{
	for (int i = 0; i < r->nunits; i++)
		unit_lost(r, &r->units[i], reason);
	leader_gauge(r);
}

/* Gives a unit's lock back (its batches are marked). */
void relay_unit_release(struct relay *r, struct relay_unit *u, const char *reason)
{
	PGconn *c = pin_db_conn();
	char sh[16];
	const char *p[2] = { u->table, sh };

	if (!u->led)
		return;
	snprintf(sh, sizeof(sh), "%d", u->shard);
	/* the gauge first: once unlocked, another thread of this host may take
	 * the shard and set it to 1 */
	pin_metric_set("pin_outbox_relay_shard_leader", u->lab, 0);
	if (c && PQbackendPID(c) == r->conn_pid)
		pin_db_exec("SELECT pg_advisory_unlock(hashtext('pin.relay:' || $1) & 2147483647,"
				" $2::int)", 2, p);
	u->led = false;
	u->releasing = false;
	unit_log(u, PIN_LOG_INFO, "outbox relay: shard released", reason, r);
}

/* A new session: its name (pg_stat_activity shows which host leads what),
 * TCP keepalives / user timeout so the server ends it soon after this host
 * dies, and the member lock. */
static void session_setup(struct relay *r)
{
	char sql[600];
	long long f = relay_failover_ms() / 1000, cnt = f / 2 - 1;

	if (cnt < 1)
		cnt = 1;
	/* db.c may have re-run a statement of ours (count_members, try_lock) on
	 * this new session before we saw its pid: locks it took there are not in
	 * our books, and a re-entrant advisory lock taken twice would survive one
	 * unlock and starve its shard.  An adopted session starts with none. */
	pin_db_exec("SELECT pg_advisory_unlock_all()", 0, NULL);
	snprintf(sql, sizeof(sql), "SELECT set_config('application_name', 'pin-relay %ld', false),"
			" set_config('tcp_keepalives_idle', '1', false),"
			" set_config('tcp_keepalives_interval', '1', false),"
			" set_config('tcp_keepalives_count', '%lld', false),"
			" set_config('tcp_user_timeout', '%lld', false),"
			/* the batch read must walk the partial index in id order:
			 * the statistics of a queue table are always stale, and a
			 * seq scan + sort of the whole outbox per batch took 1.5 s
			 * at 100k rows (doc/performance.md "Outbox relay figures") */
			" set_config('enable_seqscan', 'off', false),"
			" set_config('enable_bitmapscan', 'off', false),"
			/* the marks need no flush to disk before the next batch:
			 * a mark lost in a crash of PostgreSQL only publishes its
			 * rows again (at-least-once; consumers dedupe on
			 * messageId), and waiting for the WAL flush of every
			 * 1000-row UPDATE held the relay thread */
			" set_config('synchronous_commit', 'off', false)",
			(long)getpid(), cnt, f * 1000 / 2);
	pin_db_exec(sql, 0, NULL);
	if (!r->once) {
		snprintf(sql, sizeof(sql), "SELECT pg_advisory_lock_shared(" RELAY_MEMBER_CLASS
				", %d)", r->nshards);
		pin_db_exec(sql, 0, NULL);
	}
}

/* relay hosts with our relay_shards (*same) and with another (*other) */
static int count_members(struct relay *r, int *same, int *other)
{
	char sql[400], n[16];
	const char *p[1] = { n };
	PGresult *res;

	snprintf(n, sizeof(n), "%d", r->nshards);
	snprintf(sql, sizeof(sql), "SELECT count(*) FILTER (WHERE objid = $1::int),"
			" count(*) FILTER (WHERE objid <> $1::int) FROM pg_locks"
			" WHERE locktype = 'advisory' AND classid = " RELAY_MEMBER_CLASS
			" AND objsubid = 2 AND granted AND database ="
			" (SELECT oid FROM pg_database WHERE datname = current_database())");
	res = pin_db_exec(sql, 1, p);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
		return -1;
	*same = atoi(PQgetvalue(res, 0, 0));
	*other = atoi(PQgetvalue(res, 0, 1));
	return 0;
}

static bool try_lock(struct relay_unit *u)
{
	char sh[16];
	const char *p[2] = { u->table, sh };
	PGresult *res;

	snprintf(sh, sizeof(sh), "%d", u->shard);
	res = pin_db_exec("SELECT pg_try_advisory_lock(hashtext('pin.relay:' || $1) & 2147483647,"
			" $2::int)", 2, p);
	return res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		!strcmp(PQgetvalue(res, 0, 0), "t");
}

/*
 * One leadership round: checks the session (a new backend has no locks),
 * counts the relay hosts, releases units above this host's share and tries
 * the units nobody leads, up to the share.
 */
static void lead_round(struct relay *r)
{
	PGconn *c = pin_db_conn();
	int pid, target, same = 1, other = 0;

	if (!c) {
		relay_lose_all(r, "database link lost");
		r->conn_pid = 0;
		return;
	}
	pid = PQbackendPID(c);
	if (pid != r->conn_pid) {
		relay_lose_all(r, "connection changed");
		session_setup(r);
		r->conn_pid = pid;
	}
	if (!r->once && count_members(r, &same, &other) < 0)
		return;
	if (other && !r->mismatch)
		pin_log(PIN_LOG_ERROR, "outbox relay: worker hosts run with different"
				" relay_shards; no host relays until they agree", NULL);
	else if (!other && r->mismatch)
		pin_log(PIN_LOG_INFO, "outbox relay: every worker host has the same relay_shards", NULL);
	r->mismatch = other > 0;
	r->members = same;
	if (same < 1)
		same = 1;
	/* each outbox's shards are shared out on their own: a member leads at
	 * most ceil(relay_shards / members) shards of every outbox */
	target = r->once ? r->nshards : (r->nshards + same - 1) / same;
	for (int o = 0; o < (int)relay_noutboxes(); o++) {
		int held = 0;

		for (int k = 0; k < r->nshards; k++) {
			struct relay_unit *u = &r->units[o * r->nshards + k];

			if (u->led && !u->releasing)
				held++;
		}
		for (int k = r->nshards - 1; k >= 0; k--) {
			struct relay_unit *u = &r->units[o * r->nshards + k];

			if (u->led && !u->releasing && (r->mismatch || held > target)) {
				u->releasing = true;
				held--;
			}
		}
		/* start at a different shard on every host and thread, so
		 * members that start at once do not all race for the same
		 * shards first */
		for (int k = 0; k < r->nshards && held < target && !r->mismatch; k++) {
			int sh = ((int)getpid() * 7 + r->thread * r->nshards / relay_threads() + k) %
				r->nshards;
			struct relay_unit *u = &r->units[o * r->nshards + sh];

			if (u->led || u->nwin)   /* nwin: still marking as a former leader */
				continue;
			if (!try_lock(u))
				continue;
			u->led = true;
			u->releasing = false;
			u->stalled = false;
			u->caught_up = false;
			strcpy(u->cursor, "0");
			held++;
			pin_metric_set("pin_outbox_relay_shard_leader", u->lab, 1);
			unit_log(u, PIN_LOG_INFO, "outbox relay: shard acquired",
					r->once ? "once" : "free", r);
		}
	}
	leader_gauge(r);
}

/*
 * One step of every unit: mark finished batches, read and produce the next
 * ones.  Returns -1 when something failed (the caller backs off).
 * *busy: a unit read a full batch (go again at once); *read_any: rows read.
 */
static int relay_step(struct relay *r, bool *full, bool *read_any)
{
	int rc = 0;

	*full = *read_any = false;
	for (int i = 0; i < r->nunits; i++) {
		struct relay_unit *u = &r->units[i];
		int done = 0, nrows;

		if (relay_unit_reap(r, u, &done) < 0)
			rc = -1;
		r->done += done;
		if (relay_unit_feed(r, u, &nrows) < 0)
			rc = -1;
		if (nrows > 0)
			*read_any = true;
		if (nrows >= r->batch)
			*full = true;
	}
	if (rc == 0) {
		r->consecutive_failures = 0;
		r->backoff_ms = 0;
	}
	return rc;
}

/* Stopping: waits up to wait_ms for the batches in flight and marks them,
 * then gives the locks back. */
static void relay_finish(struct relay *r, int wait_ms)
{
	int64_t end = pin_clock_now_us() + (int64_t)wait_ms * 1000;
	int done = 0;

	while (relay_inflight(r) && pin_clock_now_us() < end) {
		relay_poll(r, 20);
		for (int i = 0; i < r->nunits; i++)
			relay_unit_reap(r, &r->units[i], &done);
	}
	relay_producer_destroy(r);           /* what is left: failed, kept */
	for (int i = 0; i < r->nunits; i++) {
		relay_unit_reap(r, &r->units[i], &done);
		relay_unit_release(r, &r->units[i], "stopping");
	}
	r->done += done;
	leader_gauge(r);
	if (pin_db_conn() && PQbackendPID(pin_db_conn()) == r->conn_pid && !r->once) {
		char sql[100];

		snprintf(sql, sizeof(sql), "SELECT pg_advisory_unlock_shared(" RELAY_MEMBER_CLASS
				", %d)", r->nshards);
		pin_db_exec(sql, 0, NULL);
	}
	free(r->units);
	r->units = NULL;
	r->nunits = 0;
}

static void *relay_main(void *arg)
{
	struct relay r = { .kafka_up = -1, .any_led = -1, .thread = (int)(intptr_t)arg };
	struct pin_arena *a = pin_arena_new();
	int busy = (int)pin_config_int("relay_busy_interval_ms", 50);
	int idle = (int)pin_config_int("relay_idle_interval_ms", 100);
	int64_t retry_us = relay_failover_ms() * 1000 / 5;
	struct relay_clock clk = { .since = pin_clock_mono_us() };

	if (retry_us > 1000000)
		retry_us = 1000000;
	relay_rclk = &clk;
	pin_arena_set_current(a);
	pin_metric_add("pin_outbox_published_total", NULL, 0);
	units_build(&r);
	leader_gauge(&r);
	while (!relay_should_stop()) {
		bool full = false, read_any = false;
		int64_t now = pin_clock_now_us(), sleep_us;
		int rc;

		int64_t t0 = pin_clock_mono_us();

		pin_trace_set(NULL);
		relay_clock_log(&r, &clk, t0);
		if (now >= r.next_lead_us) {
			lead_round(&r);
			r.next_lead_us = now + retry_us;
		}
		relay_rc_add(RC_LEAD, &t0);
		rc = relay_step(&r, &full, &read_any);
		if (rc < 0)
			relay_on_failure(&r);
		t0 = pin_clock_mono_us();
		relay_update_pending(&r);
		relay_rc_add(RC_PENDING, &t0);
		if (r.thread == 0)
			relay_write_metrics_file();
		pin_arena_reset(a);
		if (relay_inflight(&r)) {
			t0 = pin_clock_mono_us();
			relay_poll(&r, full || read_any ? 0 : 5);
			relay_rc_add(RC_POLL, &t0);
			continue;
		}
		if (full && rc == 0)
			continue;
		now = pin_clock_now_us();
		sleep_us = (int64_t)(read_any ? busy : idle) * 1000;
		if (r.pause_until_us > now && r.pause_until_us - now < sleep_us)
			sleep_us = r.pause_until_us - now;
		if (r.next_lead_us - now < sleep_us)
			sleep_us = r.next_lead_us - now;
		if (r.rk && r.failing && relay_bootstrap_changed(&r))
			r.pause_until_us = 0;     /* the broker has a new address */
		else if (!r.rk && r.failing && r.pause_until_us > now && relay_bootstrap_known() &&
				r.consecutive_failures > 1)
			r.pause_until_us = 0;
		if (sleep_us > 0) {
			t0 = pin_clock_mono_us();
			relay_sleep_ms((int)((sleep_us + 999) / 1000));
			relay_rc_add(RC_SLEEP, &t0);
		}
	}
	relay_rclk = NULL;
	relay_finish(&r, 5000);
	pin_arena_reset(a);
	pin_arena_set_current(NULL);
	pin_arena_free(a);
	pin_db_close_thread();
	return NULL;
}

int pin_relay_start(void)
{
	if (relay_running)
		return 0;
	pin_waiter_init(&relay_w);
	relay_gauges_init();
	relay_running = true;        /* before the threads read it */
	for (relay_nthr = 0; relay_nthr < relay_threads(); relay_nthr++)
		if (pthread_create(&relay_thr[relay_nthr], NULL, relay_main,
				(void *)(intptr_t)relay_nthr) != 0)
			break;
	if (relay_nthr == 0) {
		pin_log(PIN_LOG_ERROR, "outbox relay: cannot start its thread", NULL);
		relay_running = false;
		pin_waiter_destroy(&relay_w);
		return -1;
	}
	{
		char n[16];

		snprintf(n, sizeof(n), "%d", relay_nthr);
		pin_log(PIN_LOG_INFO, "outbox relay started", "threads", n, NULL);
	}
	return 0;
}

void pin_relay_stop(void)
{
	if (!relay_running)
		return;
	pin_waiter_stop(&relay_w);
	for (int i = 0; i < relay_nthr; i++)
		pthread_join(relay_thr[i], NULL);
	relay_nthr = 0;
	pin_waiter_destroy(&relay_w);
	relay_running = false;
	pin_log(PIN_LOG_INFO, "outbox relay stopped", NULL);
}

/* --once: every shard nobody else leads, until each is empty (or
 * relay_once_timeout_ms). */
int pin_relay_run_once(void)
{
	struct relay r = { .kafka_up = -1, .any_led = -1, .once = true };
	struct pin_arena *prev = pin_arena_current(), *a = pin_arena_new();
	int64_t deadline = pin_clock_now_us() +
		pin_config_int("relay_once_timeout_ms", 10000) * 1000;
	int rc = 0;

	pin_arena_set_current(a);
	relay_gauges_init();
	units_build(&r);
	{
		int same = 0, other = 0;

		/* running relays that split keys by another relay_shards: leading
		 * "our" shard 0 could publish keys one of them leads too */
		if (count_members(&r, &same, &other) < 0 || other > 0) {
			pin_log(PIN_LOG_WARN, "outbox relay: relays with another relay_shards"
					" are running (or the check failed), --once skips the relay", NULL);
			goto out;
		}
	}
	lead_round(&r);
	if (r.any_led != 1) {
		pin_log(PIN_LOG_INFO, "outbox relay: another host is the leader, skipping", NULL);
		goto out;
	}
	for (;;) {
		bool full = false, read_any = false, busy = false;

		if (pin_clock_now_us() > deadline) {
			rc = -1;
			break;
		}
		if (relay_step(&r, &full, &read_any) < 0) {
			relay_on_failure(&r);
			r.pause_until_us = 0;
			relay_sleep_ms(500);
		}
		for (int i = 0; i < r.nunits; i++) {
			struct relay_unit *u = &r.units[i];

			/* a unit is done when nothing is in flight and its last
			 * read found no row */
			if (u->led && (u->nwin || !u->caught_up || u->stalled || read_any))
				busy = true;
		}
		pin_arena_reset(a);
		if (!busy)
			break;
		if (relay_inflight(&r))
			relay_poll(&r, full || read_any ? 0 : 5);
	}
	relay_update_pending(&r);
	relay_write_metrics_file();
out:
	relay_finish(&r, rc ? 0 : 2000);
	if (r.any_led >= 0) {
		char s[24];

		snprintf(s, sizeof(s), "%lld", r.done);
		pin_log(rc ? PIN_LOG_WARN : PIN_LOG_INFO, "outbox relay: one pass done",
				"published", s, "complete", rc ? "false" : "true", NULL);
	}
	pin_arena_reset(a);
	pin_arena_set_current(prev);
	pin_arena_free(a);
	return rc;
}
