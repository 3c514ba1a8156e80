/*
 * relay.c -- the transactional outbox relay (worker mode).
 *
 * One thread.  Leader election: a session advisory lock
 * (pg_try_advisory_lock(RELAY_LOCK_KEY)) on the relay thread's own
 * connection; if that connection is lost (new backend pid) the lock is gone
 * and is tried again.  Only the leader publishes.
 *
 * Outboxes: calendar.outbox and every table a plugin registered
 * (pin_registrar.outbox, ABI 1.1, e.g. notifications.outbox).  Each pass
 * runs one batch of each, so per-key order holds within an outbox.
 *
 * One batch (relay_batch): read up to 500 unpublished rows in id order under
 * the advisory lock (batch_read) -> produce them (key, value = envelope) with
 * an idempotent producer, acks=all, murmur2_random (batch_produce) -> wait for
 * the delivery reports (batch_wait) -> record the outcome (batch_mark):
 * published_at = host clock for the acknowledged rows; failed rows get
 * attempts + 1 and last_error, and the loop backs off (1 s doubling to 30 s)
 * and starts again from the oldest unpublished row, so per-key order holds.
 * When delivery keeps failing, the producer is recreated (the bootstrap
 * file is re-read: the dev broker comes back on a new port).
 *
 * Rows that can never be produced (larger than message.max.bytes, invalid,
 * a topic still unknown after relay_park_unknown_topic_attempts tries) do not
 * block the rows behind them: they are parked (parked_at, last_error,
 * pin_outbox_failed_total{outbox,reason} with reason too_large | invalid |
 * unknown_topic, one ERROR log line with id, topic, size, never the payload)
 * and the batch goes on.  A parked row is never retried by itself.
 *
 * Config: relay_batch (500), relay_busy_interval_ms (200),
 * relay_idle_interval_ms (1000), relay_backoff_max_ms (30000),
 * kafka_message_timeout_ms (10000), relay_once_timeout_ms (10000),
 * kafka_linger_ms (5), relay_park_unknown_topic_attempts (5),
 * metrics_textfile ("" = none: the worker host's metrics in Prometheus text
 * format, rewritten at most once a second, for node_exporter's textfile
 * collector; a worker host serves no HTTP).
 *
 * Metrics: pin_outbox_pending (gauge; also per {outbox}),
 * pin_outbox_oldest_unpublished_age_seconds{outbox} (host clock - created_at
 * of the oldest unpublished, unparked row; 0 when none), pin_outbox_published_total,
 * pin_outbox_failed_total{outbox,reason},
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
enum dr_state { DR_PENDING = 0, DR_OK, DR_FAILED, DR_PARKED };

struct relay_row {
	const char *id;
	const char *topic;
	size_t size;
	int attempts;               /* before this batch */
	enum dr_state st;
	rd_kafka_resp_err_t err;
	const char *reason;         /* DR_PARKED: metric label */
	const char *traceparent;    /* NULL when the writer had none */
	const char *message_id;
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

/* the outboxes served: calendar.outbox, then those plugins registered */
static size_t relay_noutboxes(void)
{
	return pin_reg.noutboxes ? pin_reg.noutboxes : 1;
}

static const char *relay_outbox(size_t i)
{
	return pin_reg.noutboxes ? pin_reg.outboxes[i] : PIN_OUTBOX_DEFAULT;
}

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
		/* give up for this pass: another host may take the lock now,
		 * the next pass tries again */
		pin_log(PIN_LOG_WARN, "outbox relay: connection changed, leadership lost", NULL);
		pin_metric_set("pin_outbox_relay_leader", NULL, 0);
		r->leader_pid = 0;
		return false;
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
	for (size_t i = 0; i < relay_noutboxes(); i++) {
		const char *t = relay_outbox(i);
		char *sql = pin_arena_alloc(200), *lab = pin_arena_alloc(160);
		PGresult *res;

		double oldest = 0;

		snprintf(sql, 200, "SELECT count(*), extract(epoch FROM min(created_at))"
				" FROM %s WHERE published_at IS NULL AND parked_at IS NULL", t);
		res = pin_db_exec(sql, 0, NULL);
		if (!res || PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1)
			continue;
		if (!strcmp(t, PIN_OUTBOX_DEFAULT))   /* the 1.0 series, unlabelled */
			pin_metric_set("pin_outbox_pending", NULL, atof(PQgetvalue(res, 0, 0)));
		snprintf(lab, 160, "outbox=\"%s\"", t);
		pin_metric_set("pin_outbox_pending", lab, atof(PQgetvalue(res, 0, 0)));
		if (!PQgetisnull(res, 0, 1))
			oldest = (double)pin_clock_now_us() / 1e6 - atof(PQgetvalue(res, 0, 1));
		pin_metric_set("pin_outbox_oldest_unpublished_age_seconds", lab,
				oldest > 0 ? oldest : 0);
	}
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
 * Errors that no retry can cure for this row: the row is parked (see the
 * head comment) and the rows behind it go on.  Returns the metric's reason
 * label, or NULL for an error worth retrying.  An unknown topic is parked
 * only after relay_park_unknown_topic_attempts tries: a restarted broker
 * may not know a topic for a moment.
 */
static const char *park_reason(rd_kafka_resp_err_t e, int attempts)
{
	switch (e) {
	case RD_KAFKA_RESP_ERR_MSG_SIZE_TOO_LARGE:
	case RD_KAFKA_RESP_ERR_RECORD_LIST_TOO_LARGE:
		return "too_large";
	case RD_KAFKA_RESP_ERR__INVALID_ARG:
	case RD_KAFKA_RESP_ERR_INVALID_MSG:
	case RD_KAFKA_RESP_ERR_INVALID_RECORD:
	case RD_KAFKA_RESP_ERR_TOPIC_EXCEPTION:
	case RD_KAFKA_RESP_ERR__BAD_MSG:
		return "invalid";
	case RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC:
	case RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART:
		if (attempts + 1 >= pin_config_int("relay_park_unknown_topic_attempts", 5))
			return "unknown_topic";
		return NULL;
	default:
		return NULL;
	}
}

/* 1. Reads up to relay_batch unpublished rows of table in id order, and
 *    checks that the lock was held while reading.  NULL: failed or no
 *    longer leader (the caller backs off). */
static PGresult *batch_read(struct relay *r, const char *table)
{
	char lim[16], *sql = pin_arena_alloc(300), *stmt = pin_arena_alloc(160);
	const char *p[1] = { lim };
	int lead_pid = r->leader_pid;
	PGresult *res;

	snprintf(lim, sizeof(lim), "%lld", pin_config_int("relay_batch", 500));
	snprintf(sql, 300, "SELECT id, topic, key, envelope::text, attempts,"
			" traceparent, message_id FROM %s"
			" WHERE published_at IS NULL AND parked_at IS NULL"
			" ORDER BY id LIMIT $1::int", table);
	snprintf(stmt, 160, "pin_relay_batch:%s", table);
	res = pin_db_exec_prepared(stmt, sql, 1, p);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
		return NULL;
	/* a dead link is only noticed by a statement, and db.c runs it again
	 * on a new connection: that session does not hold the lock, and
	 * another host may lead by now.  Publish only what was read under
	 * the lock; else start over (as leader again, or not). */
	if (!relay_lead(r) || r->leader_pid != lead_pid)
		return NULL;
	return res;
}

/* One row to the producer (copied), with its traceparent as a Kafka header
 * when the row has a valid one; the producer's error code. */
static rd_kafka_resp_err_t produce_row(struct relay *r, const char *topic,
		const char *key, const char *val, struct relay_row *row)
{
	rd_kafka_vu_t vu[6];
	rd_kafka_error_t *err;
	rd_kafka_resp_err_t e;
	size_t n = 0;

	vu[n].vtype = RD_KAFKA_VTYPE_TOPIC;
	vu[n++].u.cstr = topic;
	vu[n].vtype = RD_KAFKA_VTYPE_KEY;
	vu[n].u.mem.ptr = (void *)key;
	vu[n++].u.mem.size = key ? strlen(key) : 0;
	vu[n].vtype = RD_KAFKA_VTYPE_VALUE;
	vu[n].u.mem.ptr = (void *)val;
	vu[n++].u.mem.size = row->size;
	vu[n].vtype = RD_KAFKA_VTYPE_MSGFLAGS;
	vu[n++].u.i = RD_KAFKA_MSG_F_COPY;
	vu[n].vtype = RD_KAFKA_VTYPE_OPAQUE;
	vu[n++].u.ptr = row;
	if (row->traceparent && pin_traceparent_valid(row->traceparent)) {
		vu[n].vtype = RD_KAFKA_VTYPE_HEADER;
		vu[n].u.header.name = "traceparent";
		vu[n].u.header.val = row->traceparent;
		vu[n++].u.header.size = (ssize_t)strlen(row->traceparent);
	}
	err = rd_kafka_produceva(r->rk, vu, n);
	if (!err)
		return RD_KAFKA_RESP_ERR_NO_ERROR;
	e = rd_kafka_error_code(err);
	rd_kafka_error_destroy(err);
	return e;
}

/* 2a. Hands the rows to the producer.  A row refused for good is parked
 *     and skipped; a row refused for now stops the batch (later rows must
 *     not overtake it).  Returns how many rows were looked at. */
static int batch_produce(struct relay *r, PGresult *res, struct relay_row *rows, int n)
{
	int produced = 0;

	for (int i = 0; i < n; i++) {
		const char *topic = PQgetvalue(res, i, 1);
		const char *key = PQgetisnull(res, i, 2) ? NULL : PQgetvalue(res, i, 2);
		const char *val = PQgetvalue(res, i, 3);
		rd_kafka_resp_err_t e;

		rows[i].id = PQgetvalue(res, i, 0);
		rows[i].topic = topic;
		rows[i].size = strlen(val);
		rows[i].attempts = atoi(PQgetvalue(res, i, 4));
		rows[i].traceparent = PQgetisnull(res, i, 5) ? NULL : PQgetvalue(res, i, 5);
		rows[i].message_id = PQgetvalue(res, i, 6);
		e = produce_row(r, topic, key, val, &rows[i]);
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(r->rk, 100);
			i--;
			continue;
		}
		produced = i + 1;
		if (!e)
			continue;
		rows[i].err = e;
		if ((rows[i].reason = park_reason(e, rows[i].attempts))) {
			rows[i].st = DR_PARKED;
			continue;
		}
		rows[i].st = DR_FAILED;
		break;
	}
	return produced;
}

/* 2b. Waits for every delivery report (bounded by wait_ms); undelivered
 *     rows become DR_FAILED, permanent delivery errors DR_PARKED. */
static void batch_wait(struct relay *r, struct relay_row *rows, int produced, int wait_ms)
{
	int64_t deadline = pin_clock_now_us() + (int64_t)wait_ms * 1000;
	int64_t next_check = pin_clock_now_us() + 1000000;

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
	for (int i = 0; i < produced; i++)
		if (rows[i].st == DR_FAILED && rows[i].err != RD_KAFKA_RESP_ERR__TIMED_OUT &&
				(rows[i].reason = park_reason(rows[i].err, rows[i].attempts)))
			rows[i].st = DR_PARKED;
}

/* 3. Records the outcome: published_at for delivered rows, parked_at +
 *    last_error for parked ones (one log line each, without the payload),
 *    attempts + 1 for the ones kept for retry.  -1 when the marking
 *    itself failed. */
static int batch_mark(const char *table, struct relay_row *rows, int produced,
		int *ok, int *failed, int *parked, rd_kafka_resp_err_t *first_err)
{
	char now[40], *sql = pin_arena_alloc(300), *stmt = pin_arena_alloc(160);
	char *lab = pin_arena_alloc(200);
	PGresult *res;

	*ok = *failed = *parked = 0;
	for (int i = 0; i < produced; i++) {
		if (rows[i].st == DR_OK) {
			(*ok)++;
		} else if (rows[i].st == DR_FAILED) {
			if (!*failed)
				*first_err = rows[i].err;
			(*failed)++;
		} else if (rows[i].st == DR_PARKED) {
			(*parked)++;
		}
	}
	pin_clock_fmt(pin_clock_now_us(), now, sizeof(now));
	if (*ok) {
		const char *p[2] = { now, id_list(rows, produced, DR_OK) };

		snprintf(sql, 300, "UPDATE %s SET published_at = $1::timestamptz"
				" WHERE id = ANY($2::bigint[])", table);
		snprintf(stmt, 160, "pin_relay_mark:%s", table);
		res = pin_db_exec_prepared(stmt, sql, 2, p);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK) {
			/* delivered but not marked: they will go out again
			 * (at-least-once; consumers dedupe on messageId) */
			pin_log(PIN_LOG_ERROR, "outbox relay: cannot mark rows published",
					"outbox", table, NULL);
			return -1;
		}
		pin_metric_add("pin_outbox_published_total", NULL, *ok);
		if (pin_config_bool("relay_log_published", true))
			for (int i = 0; i < produced; i++) {
				if (rows[i].st != DR_OK)
					continue;
				/* the row's trace: one trace id from request to consumer */
				if (rows[i].traceparent &&
				    pin_traceparent_valid(rows[i].traceparent)) {
					char tid[33];

					memcpy(tid, rows[i].traceparent + 3, 32);
					tid[32] = '\0';
					pin_trace_set(tid);
				}
				pin_log(PIN_LOG_INFO, "outbox relay: published", "outbox", table,
						"messageId", rows[i].message_id,
						"topic", rows[i].topic, NULL);
				pin_trace_set(NULL);
			}
	}
	for (int i = 0; i < produced; i++) {
		char id_s[24], size_s[24], att_s[16];
		const char *p[3];

		if (rows[i].st != DR_PARKED)
			continue;
		p[0] = rows[i].id;
		p[1] = now;
		p[2] = rd_kafka_err2str(rows[i].err);
		snprintf(sql, 300, "UPDATE %s SET parked_at = $2::timestamptz,"
				" attempts = attempts + 1, last_error = $3"
				" WHERE id = $1::bigint", table);
		snprintf(stmt, 160, "pin_relay_park:%s", table);
		res = pin_db_exec_prepared(stmt, sql, 3, p);
		if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
			return -1;      /* tried again with the next batch */
		snprintf(lab, 200, "outbox=\"%s\",reason=\"%s\"", table, rows[i].reason);
		pin_metric_add("pin_outbox_failed_total", lab, 1);
		snprintf(id_s, sizeof id_s, "%s", rows[i].id);
		snprintf(size_s, sizeof size_s, "%zu", rows[i].size);
		snprintf(att_s, sizeof att_s, "%d", rows[i].attempts + 1);
		pin_log(PIN_LOG_ERROR, "outbox relay: row cannot be published, parked",
				"outbox", table, "id", id_s, "topic", rows[i].topic,
				"reason", rows[i].reason, "bytes", size_s, "attempts", att_s,
				"error", rd_kafka_err2str(rows[i].err), NULL);
	}
	if (*failed) {
		const char *p[2] = { id_list(rows, produced, DR_FAILED),
			rd_kafka_err2str(*first_err) };

		snprintf(sql, 300, "UPDATE %s SET attempts = attempts + 1,"
				" last_error = $2 WHERE id = ANY($1::bigint[])", table);
		snprintf(stmt, 160, "pin_relay_fail:%s", table);
		pin_db_exec_prepared(stmt, sql, 2, p);
		pin_metric_add("pin_outbox_publish_errors_total", NULL, *failed);
	}
	return 0;
}

/*
 * One batch of one outbox: read (under the lock) -> produce -> wait for
 * the delivery reports -> mark.  Returns the number of rows published or
 * parked (>= 0), or -1 when something failed (the caller backs off).
 * *nrows gets the batch size.
 */
static int relay_batch(struct relay *r, const char *table, int *nrows, int wait_ms)
{
	PGresult *res;
	struct relay_row *rows;
	int n, produced, ok = 0, failed = 0, parked = 0, rc = -1;
	rd_kafka_resp_err_t first_err = RD_KAFKA_RESP_ERR_NO_ERROR;

	*nrows = 0;
	if (!(res = batch_read(r, table)))
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
	produced = batch_produce(r, res, rows, n);
	batch_wait(r, rows, produced, wait_ms);
	if (batch_mark(table, rows, produced, &ok, &failed, &parked, &first_err) < 0)
		return -1;
	if (failed) {
		if (!r->failing)
			pin_log(PIN_LOG_WARN, "outbox relay: publishing fails, rows kept for retry",
					"outbox", table, "code", rd_kafka_err2name(first_err),
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
	rc = ok + parked;
out:
	if (ok) {
		char sok[16], sfail[16];

		snprintf(sok, sizeof(sok), "%d", ok);
		snprintf(sfail, sizeof(sfail), "%d", failed);
		pin_log(PIN_LOG_DEBUG, "outbox relay: batch", "outbox", table,
				"published", sok, "failed", sfail, NULL);
	}
	return rc;
}

/* One batch of every outbox.  -1 when one failed (the others still ran);
 * *nrows gets the largest batch (a full one means: go again at once). */
static int relay_batches(struct relay *r, int *nrows, int wait_ms)
{
	int total = 0, rc = 0;

	*nrows = 0;
	for (size_t i = 0; i < relay_noutboxes() && !should_stop(); i++) {
		int nr = 0, n = relay_batch(r, relay_outbox(i), &nr, wait_ms);

		if (nr > *nrows)
			*nrows = nr;
		if (n < 0)
			rc = -1;
		else
			total += n;
	}
	return rc < 0 ? -1 : total;
}

/* Writes the metrics (node_exporter textfile format) to metrics_textfile,
 * at most once a second: a worker host serves no HTTP. */
static void write_metrics_file(void)
{
	static int64_t last;
	const char *path = pin_config_get("metrics_textfile", "");
	char *tmp, *m;
	FILE *f;
	int64_t t = pin_clock_now_us();

	if (!*path || t - last < 1000000)
		return;
	last = t;
	if (!(m = pin_metrics_render()))
		return;
	tmp = pin_arena_alloc(strlen(path) + 8);
	sprintf(tmp, "%s.tmp", path);
	if ((f = fopen(tmp, "w"))) {
		fputs(m, f);
		if (fclose(f) == 0)
			rename(tmp, path);
	}
	free(m);
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
	pin_metric_add("pin_outbox_published_total", NULL, 0);
	while (!should_stop()) {
		int nrows = 0, rc, sleep_ms;

		pin_trace_set(NULL);
		if (!relay_lead(&r)) {
			write_metrics_file();
			pin_arena_reset(a);
			relay_sleep_ms(idle);
			continue;
		}
		rc = relay_batches(&r, &nrows, wait_ms);
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
		write_metrics_file();
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
		n = relay_batches(&r, &nrows, left);
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
	write_metrics_file();
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
