/*
 * relay.c -- the transactional outbox relay (worker mode).
 *
 * One thread.  Leader election: a session advisory lock
 * (pg_try_advisory_lock(RELAY_LOCK_KEY)) on the relay thread's own
 * connection; if that connection is lost (new backend pid) the lock is gone
 * and is tried again.  Only the leader publishes.
 *
 * Loop: take up to 500 unpublished rows of calendar.outbox in id order,
 * produce them (key, value = envelope) with an idempotent producer
 * (acks=all, murmur2_random), wait for the delivery reports, then mark
 * published_at = host clock for the acknowledged rows only.  Failed rows get
 * attempts + 1 and last_error; the loop then backs off (1 s doubling to 30 s)
 * and starts again from the oldest unpublished row, so per-key order holds.
 * When delivery keeps failing, the producer is recreated (the bootstrap
 * file is re-read: the dev broker comes back on a new port).
 *
 * Config: relay_batch (500), relay_busy_interval_ms (200),
 * relay_idle_interval_ms (1000), relay_backoff_max_ms (30000),
 * kafka_message_timeout_ms (10000), relay_once_timeout_ms (10000),
 * kafka_linger_ms (5).
 *
 * Metrics: pin_outbox_pending (gauge), pin_outbox_published_total,
 * pin_outbox_publish_errors_total, pin_kafka_up (0/1),
 * pin_outbox_relay_leader (0/1).
 */
#include "config.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <librdkafka/rdkafka.h>

#include "host.h"

#define RELAY_LOCK_KEY "7301520415"   /* any constant shared by every host */

/* delivery state of one row in the current batch */
enum dr_state { DR_PENDING = 0, DR_OK, DR_FAILED };

struct relay_row {
	const char *id;
	enum dr_state st;
	rd_kafka_resp_err_t err;
};

struct relay {
	rd_kafka_t *rk;
	char *boot;                 /* bootstrap the producer was built with */
	int consecutive_failures;
	int backoff_ms;
	int leader_pid;             /* backend pid holding the lock, 0 = not leader */
	bool failing;               /* for "log once per state change" */
	bool create_failing;        /* same, for producer creation */
	int kafka_up;               /* -1 unknown */
};

static pthread_t relay_thr;
static bool relay_running;
static struct pin_waiter relay_w;    /* set up by start */

static bool should_stop(void)
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


static void set_kafka_up(struct relay *r, int up)
{
	if (r->kafka_up != up)
		pin_metric_set("pin_kafka_up", NULL, up);
	r->kafka_up = up;
}

static void dr_msg_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct relay_row *row = m->_private;

	(void)rk;
	(void)opaque;
	if (!row)
		return;
	row->err = m->err;
	row->st = m->err ? DR_FAILED : DR_OK;
}

static void producer_destroy(struct relay *r)
{
	if (r->rk) {
		rd_kafka_purge(r->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_poll(r->rk, 0);
		rd_kafka_destroy(r->rk);
		r->rk = NULL;
	}
	free(r->boot);
	r->boot = NULL;
}

static int producer_create(struct relay *r)
{
	char err[512], tmo[32], linger[32];
	rd_kafka_conf_t *conf;

	conf = pin_kafka_conf_new("relay", err, sizeof(err));
	if (!conf)
		goto fail;
	snprintf(tmo, sizeof(tmo), "%lld", pin_config_int("kafka_message_timeout_ms", 10000));
	snprintf(linger, sizeof(linger), "%lld", pin_config_int("kafka_linger_ms", 5));
	if (pin_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "acks", "all", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "linger.ms", linger, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "message.timeout.ms", tmo, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "queue.buffering.max.messages", "100000", err, sizeof(err))) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dr_msg_cb);
	r->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!r->rk) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	r->boot = pin_kafka_bootstrap();
	r->create_failing = false;
	return 0;
fail:
	if (!r->create_failing)
		pin_log(PIN_LOG_ERROR, "outbox relay: cannot create the kafka producer",
				"error", err, NULL);
	r->create_failing = true;
	set_kafka_up(r, 0);
	return -1;
}

/* True when there is a bootstrap address and it differs from the
 * producer's (a missing file is no news: the broker is down). */
static bool bootstrap_changed(struct relay *r)
{
	char *now = pin_kafka_bootstrap();
	bool changed = now && (!r->boot || strcmp(now, r->boot) != 0);

	free(now);
	return changed;
}

/* True when a bootstrap address can be read (the file exists again). */
static bool bootstrap_known(void)
{
	char *now = pin_kafka_bootstrap();
	bool known = now != NULL;

	free(now);
	return known;
}

/* Recreates the producer if the bootstrap address changed, or after a run
 * of failures (a producer stuck on a dead address or in a fatal state). */
static void producer_maybe_recreate(struct relay *r, bool force)
{
	bool changed = bootstrap_changed(r);

	if (!r->rk)
		return;             /* created on the next batch */
	if (!force && !changed && r->consecutive_failures % 5 != 0)
		return;
	pin_log(PIN_LOG_INFO, "outbox relay: recreating the kafka producer",
			"reason", changed ? "bootstrap changed" :
			force ? "fatal error" : "repeated failures", NULL);
	producer_destroy(r);
}

/* Leadership: true when this thread holds the advisory lock on its
 * current connection. */
static bool relay_lead(struct relay *r)
{
	PGconn *c = pin_db_conn();
	PGresult *res;
	int pid;
	bool got;

	if (!c) {
		if (r->leader_pid) {
			pin_log(PIN_LOG_WARN, "outbox relay: database link lost, leadership dropped", NULL);
			pin_metric_set("pin_outbox_relay_leader", NULL, 0);
		}
		r->leader_pid = 0;
		return false;
	}
	pid = PQbackendPID(c);
	if (r->leader_pid && r->leader_pid == pid)
		return true;
	if (r->leader_pid) {
		pin_log(PIN_LOG_WARN, "outbox relay: connection changed, leadership lost", NULL);
		pin_metric_set("pin_outbox_relay_leader", NULL, 0);
		r->leader_pid = 0;
	}
	res = pin_db_exec("SELECT pg_try_advisory_lock(" RELAY_LOCK_KEY ")", 0, NULL);
	got = res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1 &&
		!strcmp(PQgetvalue(res, 0, 0), "t");
	if (got) {
		r->leader_pid = pid;
		pin_log(PIN_LOG_INFO, "outbox relay: leader", NULL);
		pin_metric_set("pin_outbox_relay_leader", NULL, 1);
	}
	return got;
}

static void relay_unlock(struct relay *r)
{
	if (r->leader_pid && pin_db_conn() && PQbackendPID(pin_db_conn()) == r->leader_pid)
		pin_db_exec("SELECT pg_advisory_unlock(" RELAY_LOCK_KEY ")", 0, NULL);
	if (r->leader_pid)
		pin_metric_set("pin_outbox_relay_leader", NULL, 0);
	r->leader_pid = 0;
}

static void update_pending(void)
{
	PGresult *res = pin_db_exec("SELECT count(*) FROM calendar.outbox"
			" WHERE published_at IS NULL", 0, NULL);

	if (res && PQresultStatus(res) == PGRES_TUPLES_OK && PQntuples(res) == 1)
		pin_metric_set("pin_outbox_pending", NULL, atof(PQgetvalue(res, 0, 0)));
}

/* "{1,2,3}": the ids of the rows in state want, as a bigint[] literal. */
static char *id_list(struct relay_row *rows, int n, enum dr_state want)
{
	size_t cap = 2 + (size_t)n * 21, len = 0;
	char *s = pin_arena_alloc(cap + 1);

	s[len++] = '{';
	for (int i = 0; i < n; i++) {
		if (rows[i].st != want)
			continue;
		len += (size_t)snprintf(s + len, cap - len, "%s%s",
				len > 1 ? "," : "", rows[i].id);
	}
	s[len++] = '}';
	s[len] = '\0';
	return s;
}

/*
 * One batch.  Returns the number of rows published (>= 0), or -1 when
 * something failed (the caller backs off).  *nrows gets the batch size.
 */
static int relay_batch(struct relay *r, int *nrows, int wait_ms)
{
	PGresult *res;
	struct relay_row *rows;
	int n, produced = 0, ok = 0, failed = 0, rc = -1;
	rd_kafka_resp_err_t first_err = RD_KAFKA_RESP_ERR_NO_ERROR;
	char lim[16], now[40];
	int64_t deadline, next_check;
	int lead_pid = r->leader_pid;

	*nrows = 0;
	snprintf(lim, sizeof(lim), "%lld", pin_config_int("relay_batch", 500));
	{
		const char *p[1] = { lim };

		res = pin_db_exec_prepared("pin_relay_batch",
				"SELECT id, topic, key, envelope::text FROM calendar.outbox"
				" WHERE published_at IS NULL ORDER BY id LIMIT $1::int", 1, p);
	}
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
		return -1;
	/* a dead link is only noticed by a statement, and db.c runs it again
	 * on a new connection: that session does not hold the lock, and
	 * another host may lead by now.  Publish only what was read under
	 * the lock; else start over (as leader again, or not). */
	if (!relay_lead(r) || r->leader_pid != lead_pid)
		return -1;
	n = PQntuples(res);
	*nrows = n;
	if (n == 0)
		return 0;
	if (r->rk && bootstrap_changed(r)) {
		/* the broker moved while we were idle */
		pin_log(PIN_LOG_INFO, "outbox relay: recreating the kafka producer",
				"reason", "bootstrap changed", NULL);
		producer_destroy(r);
	}
	if (!r->rk && producer_create(r) != 0)
		return -1;

	rows = pin_arena_alloc(sizeof(*rows) * (size_t)n);
	for (int i = 0; i < n; i++) {
		const char *topic = PQgetvalue(res, i, 1);
		const char *key = PQgetisnull(res, i, 2) ? NULL : PQgetvalue(res, i, 2);
		const char *val = PQgetvalue(res, i, 3);
		rd_kafka_resp_err_t e;

		rows[i].id = PQgetvalue(res, i, 0);
		e = rd_kafka_producev(r->rk,
				RD_KAFKA_V_TOPIC(topic),
				RD_KAFKA_V_KEY(key, key ? strlen(key) : 0),
				RD_KAFKA_V_VALUE((void *)val, strlen(val)),
				RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
				RD_KAFKA_V_OPAQUE(&rows[i]),
				RD_KAFKA_V_END);
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(r->rk, 100);
			i--;
			continue;
		}
		if (e) {
			/* stop here: later rows must not overtake this one */
			rows[i].st = DR_FAILED;
			rows[i].err = e;
			produced = i + 1;
			break;
		}
		produced = i + 1;
	}

	/* wait for every delivery report (bounded by message.timeout.ms) */
	deadline = pin_clock_now_us() + (int64_t)wait_ms * 1000;
	next_check = pin_clock_now_us() + 1000000;
	for (;;) {
		bool pending = false, give_up = false;
		int64_t t;

		rd_kafka_poll(r->rk, 50);
		for (int i = 0; i < produced && !pending; i++)
			pending = rows[i].st == DR_PENDING;
		if (!pending)
			break;
		t = pin_clock_now_us();
		if (t > deadline || should_stop())
			give_up = true;
		else if (t > next_check) {
			/* the broker moved (dev broker restart): stop waiting */
			next_check = t + 1000000;
			give_up = bootstrap_changed(r);
		}
		if (give_up) {
			/* give up on this batch; undelivered rows stay unpublished */
			rd_kafka_purge(r->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
			rd_kafka_poll(r->rk, 100);
			for (int i = 0; i < produced; i++)
				if (rows[i].st == DR_PENDING) {
					rows[i].st = DR_FAILED;
					rows[i].err = RD_KAFKA_RESP_ERR__TIMED_OUT;
				}
			break;
		}
	}
	for (int i = 0; i < produced; i++) {
		if (rows[i].st == DR_OK) {
			ok++;
		} else if (rows[i].st == DR_FAILED) {
			if (!failed)
				first_err = rows[i].err;
			failed++;
		}
	}

	pin_clock_fmt(pin_clock_now_us(), now, sizeof(now));
	if (ok) {
		const char *p[2] = { now, id_list(rows, produced, DR_OK) };

		res = pin_db_exec_prepared("pin_relay_mark",
				"UPDATE calendar.outbox SET published_at = $1::timestamptz"
				" WHERE id = ANY($2::bigint[])", 2, p);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
			/* delivered but not marked: they will go out again
			 * (at-least-once; consumers dedupe on messageId) */
			pin_log(PIN_LOG_ERROR, "outbox relay: cannot mark rows published", NULL);
			return -1;
		}
		pin_metric_add("pin_outbox_published_total", NULL, ok);
	}
	if (failed) {
		const char *p[2] = { id_list(rows, produced, DR_FAILED),
			rd_kafka_err2str(first_err) };

		pin_db_exec_prepared("pin_relay_fail",
				"UPDATE calendar.outbox SET attempts = attempts + 1,"
				" last_error = $2 WHERE id = ANY($1::bigint[])", 2, p);
		pin_metric_add("pin_outbox_publish_errors_total", NULL, failed);
		if (!r->failing)
			pin_log(PIN_LOG_WARN, "outbox relay: publishing fails, rows kept for retry",
					"code", rd_kafka_err2name(first_err),
					"error", rd_kafka_err2str(first_err), NULL);
		r->failing = true;
		set_kafka_up(r, 0);
		if (rd_kafka_fatal_error(r->rk, NULL, 0))
			producer_maybe_recreate(r, true);
		goto out;
	}
	if (r->failing)
		pin_log(PIN_LOG_INFO, "outbox relay: publishing again", NULL);
	r->failing = false;
	set_kafka_up(r, 1);
	rc = ok;
out:
	if (ok) {
		char sok[16], sfail[16];

		snprintf(sok, sizeof(sok), "%d", ok);
		snprintf(sfail, sizeof(sfail), "%d", failed);
		pin_log(PIN_LOG_DEBUG, "outbox relay: batch", "published", sok,
				"failed", sfail, NULL);
	}
	return rc;
}

static void on_failure(struct relay *r)
{
	int max = (int)pin_config_int("relay_backoff_max_ms", 30000);

	r->consecutive_failures++;
	r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : 1000;
	if (r->backoff_ms > max)
		r->backoff_ms = max;
	if (bootstrap_changed(r))     /* new address: retry soon */
		r->backoff_ms = 1000;
	producer_maybe_recreate(r, false);
}

static void *relay_main(void *arg)
{
	struct relay r = { .kafka_up = -1 };
	struct pin_arena *a = pin_arena_new();
	int busy = (int)pin_config_int("relay_busy_interval_ms", 200);
	int idle = (int)pin_config_int("relay_idle_interval_ms", 1000);
	int wait_ms = (int)pin_config_int("kafka_message_timeout_ms", 10000) + 2000;

	(void)arg;
	pin_arena_set_current(a);
	pin_metric_set("pin_outbox_relay_leader", NULL, 0);
	while (!should_stop()) {
		int nrows = 0, rc, sleep_ms;

		pin_trace_set(NULL);
		if (!relay_lead(&r)) {
			pin_arena_reset(a);
			relay_sleep_ms(idle);
			continue;
		}
		rc = relay_batch(&r, &nrows, wait_ms);
		if (rc < 0) {
			on_failure(&r);
			sleep_ms = r.backoff_ms;
		} else {
			r.consecutive_failures = 0;
			r.backoff_ms = 0;
			sleep_ms = nrows >= pin_config_int("relay_batch", 500) ? 0 :
				nrows > 0 ? busy : idle;
		}
		update_pending();
		pin_arena_reset(a);
		if (rc < 0) {
			/* back off, but go at once when the broker has a new address */
			for (int t = 0; t < sleep_ms && !should_stop(); t += 1000) {
				relay_sleep_ms(sleep_ms - t < 1000 ? sleep_ms - t : 1000);
				if (r.rk ? bootstrap_changed(&r) : bootstrap_known())
					break;
			}
		} else if (sleep_ms) {
			relay_sleep_ms(sleep_ms);
		}
	}
	relay_unlock(&r);
	producer_destroy(&r);
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
	relay_running = true;        /* before the thread reads it */
	if (pthread_create(&relay_thr, NULL, relay_main, NULL) != 0) {
		pin_log(PIN_LOG_ERROR, "outbox relay: cannot start its thread", NULL);
		relay_running = false;
		pin_waiter_destroy(&relay_w);
		return -1;
	}
	pin_log(PIN_LOG_INFO, "outbox relay started", NULL);
	return 0;
}

void pin_relay_stop(void)
{
	if (!relay_running)
		return;
	pin_waiter_stop(&relay_w);
	pthread_join(relay_thr, NULL);
	pin_waiter_destroy(&relay_w);
	relay_running = false;
	pin_log(PIN_LOG_INFO, "outbox relay stopped", NULL);
}

int pin_relay_run_once(void)
{
	struct relay r = { .kafka_up = -1 };
	struct pin_arena *prev = pin_arena_current(), *a = pin_arena_new();
	int64_t deadline = pin_clock_now_us() +
		pin_config_int("relay_once_timeout_ms", 10000) * 1000;
	int rc = 0, total = 0;

	pin_arena_set_current(a);
	if (!relay_lead(&r)) {
		pin_log(PIN_LOG_INFO, "outbox relay: another host is the leader, skipping", NULL);
		goto out;
	}
	for (;;) {
		int nrows = 0, left = (int)((deadline - pin_clock_now_us()) / 1000);
		int n;

		if (left <= 0) {
			rc = -1;
			break;
		}
		n = relay_batch(&r, &nrows, left);
		pin_arena_reset(a);
		if (n < 0) {
			on_failure(&r);
			relay_sleep_ms(500);
			continue;
		}
		total += n;
		if (nrows == 0)
			break;
	}
	update_pending();
	{
		char s[16];

		snprintf(s, sizeof(s), "%d", total);
		pin_log(rc ? PIN_LOG_WARN : PIN_LOG_INFO, "outbox relay: one pass done",
				"published", s, "complete", rc ? "false" : "true", NULL);
	}
out:
	relay_unlock(&r);
	producer_destroy(&r);
	pin_arena_reset(a);
	pin_arena_set_current(prev);
	pin_arena_free(a);
	return rc;
}
