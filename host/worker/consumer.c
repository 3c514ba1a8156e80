/*
 * consumer.c -- the Kafka consumer loop of worker mode (events.md
 * "Consumer mechanics").
 *
 * One thread per registered consumer (pin_reg.consumers): a KafkaConsumer
 * in the consumer's group subscribed to its topics, its own database
 * connection, its own arena (reset after every message) and a DLQ producer.
 *
 * Fresh messages are applied in batches, one transaction with a savepoint
 * per message (consumer_batch_max, see "batches" below); held messages, and
 * the messages of a batch that falls back, take the per-message path:
 *
 * Per message:
 *   - envelope parsed (envelope.c); bytes that are not strict UTF-8
 *     (utf8.c), invalid JSON, no messageId (uuid) or no payload object ->
 *     DLQ at once (INVALID_ENVELOPE); U+0000 in any string -> DLQ at once
 *     (INVALID_PAYLOAD);
 *   - contractVersion != 1 -> warning + pin_consumer_contract_version_mismatch_total,
 *     processing goes on;
 *   - BEGIN; inbox insert (group, messageId) ON CONFLICT DO NOTHING; no row
 *     -> duplicate: COMMIT, offset committed, pin_consumer_duplicates_total;
 *   - handler: OK -> COMMIT, then the offset is committed (asynchronously
 *     unless consumer_commit_async = 0; a failed commit is committed again
 *     while the partition stays assigned);
 *     RETRY -> ROLLBACK, the partition is paused and the message held;
 *     it is retried with exponential backoff (consumer_backoff_initial_ms
 *     1000 doubling to consumer_backoff_max_ms 60000) until the deadline
 *     (res.retry_deadline_s, else consumer_retry_deadline_s, default 86400),
 *     then DLQ; other partitions keep flowing meanwhile;
 *     FATAL -> ROLLBACK, DLQ at once;
 *     RETRY after a statement failed with a data exception (SQLSTATE class
 *     22) or an integrity violation (class 23 except 23505/23P01, which
 *     handlers expect) -> ROLLBACK, DLQ at once with code
 *     DATA_EXCEPTION_<state> / INTEGRITY_VIOLATION_<state> (db.c classes);
 *     a lost connection (class 08) -> retried like an outage;
 *   - database unreachable / inbox or COMMIT failing -> retried like RETRY
 *     but without a deadline (infrastructure, never DLQ); so is a handler
 *     failure (RETRY or FATAL) while the database link is down.
 *   After a held message is done, the partition is sought to the next
 *   offset and resumed.
 *
 * DLQ: "<group>.dlq", the original key and value, headers x-original-topic,
 * x-original-partition, x-original-offset, x-error-code, x-error-detail;
 * produced with acks=all and the delivery report awaited before the offset
 * is committed (a failed DLQ write is retried like an infrastructure error).
 *
 * Config: kafka_session_timeout_ms (6000), kafka_heartbeat_interval_ms
 * (500), kafka_assignment_strategy ("range"; "cooperative-sticky" works too),
 * consumer_retry_deadline_s, consumer_backoff_initial_ms,
 * consumer_backoff_max_ms, kafka_fetch_wait_max_ms (100: librdkafka's
 * fetch.wait.max.ms; the dev broker answers an empty fetch only after it),
 * consumer_commit_async (1).
 *
 * Metrics (label group="..."): pin_consumer_processed_total,
 * pin_consumer_duplicates_total, pin_consumer_retries_total,
 * pin_consumer_contract_version_mismatch_total, pin_dlq_total (the seeds'
 * <prefix>_dlq_total), pin_consumer_lag_seconds (gauge: now - createdAt of
 * the last message handled), pin_consumer_paused_partitions (gauge),
 * pin_consumer_consume_duration_seconds (histogram: one message, handler and
 * inbox transaction; a set-based batch observes each message's share of
 * the call; declared with zero buckets at start),
 * pin_consumer_partitions_assigned (gauge: partitions held after the last
 * rebalance), pin_consumer_batch_fallbacks_total (consumers with a batch
 * handler: batches it gave back to the per-message path),
 * pin_consumer_offset_commit_failures_total (offset commits that failed;
 * their offsets are committed again while the partition stays assigned).
 *
 * Real lag, every consumer_lag_interval_ms (5000) per assigned partition:
 * pin_consumer_lag_messages{group,topic,partition} = high watermark (asked
 * from the broker by the consumer's lag sampler thread with its own handle
 * and a 1 s timeout, wm_main; at least the consumer's cached value) -
 * committed offset of the group (no commit yet: - low watermark), and pin_consumer_oldest_unprocessed_age_seconds{group} =
 * the largest over the partitions of: a held message's age (its Kafka
 * timestamp), else, while lag > 0, the time since the committed offset last
 * moved (or since lag appeared).  A consumer that is stuck, paused or
 * starved shows growing values; a host that is gone shows no series (its
 * scrape fails: the host-down alert).
 */
#include "config.h"

#include <ctype.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <librdkafka/rdkafka.h>

#include "worker.h"

/* a partition paused on a held message */
struct held {
	rd_kafka_message_t *m;
	int attempts;
	int backoff_ms;
	int64_t next_us;            /* next attempt (host clock) */
	int64_t deadline_us;        /* 0: none yet (infrastructure retries only) */
	char code[64];
	char detail[256];
};

struct cons {
	pthread_t thr;
	const struct pin_consumer_entry *e;
	size_t sp_max;              /* [consume] most messages of a savepoint batch */
	rd_kafka_t *rk;
	rd_kafka_t *dlq;
	char *boot;                 /* bootstrap the consumer was built with */
	char dlq_topic[256];
	char inbox_sql[512];
	char claim_sql[512];        /* the inbox rows of a batch, one statement */
	char unclaim_sql[512];      /* the rows of its failed / skipped messages */
	unsigned rebal;             /* rebalance callbacks so far */
	char labels[300];
	struct held *held;
	size_t nheld, capheld;
	bool started;
	bool create_failing;        /* log creation failures once */
	bool commit_async;          /* [ident] consumer_commit_async */
	int64_t next_lag_us;        /* next lag sample */
	struct lagp {               /* per partition: when lag > 0 began to stall */
		char topic[200];
		int32_t part;
		int64_t committed;
		int64_t since_us;
	} *lagp;
	size_t nlagp;
	/* high watermarks asked by the lag sampler thread (own handle, see
	 * wm_main): the consumer thread never waits on a broker for them */
	pthread_t wm_thr;
	bool wm_started;
	pthread_mutex_t wm_mu;
	struct wmp {
		char topic[200];
		int32_t part;
		int64_t hi;             /* -1: not asked yet */
	} *wm;
	size_t nwm;
	int wm_new;                 /* a partition was registered: ask now */
	unsigned wm_gen;            /* bumped when the broker moved (wm_forget) */
	/* per partition the highest offset asked to commit, .err set while its
	 * last commit failed (commit_retry); dropped on revoke */
	rd_kafka_topic_partition_list_t *commits;
	int64_t next_commit_retry_us;
};

/* outcome of one attempt at a message */
enum attempt { A_DONE, A_RETRY, A_RETRY_INFRA, A_DLQ };

static struct cons *cs;
static size_t ncs;
static volatile int cons_stop_flag;

static bool stopping(void)
{
	return __atomic_load_n(&cons_stop_flag, __ATOMIC_ACQUIRE) || pin_stopping;
}

static void part_list_op(struct cons *c, const char *topic, int32_t part,
		int64_t offset, int op)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_error_t *err;

	rd_kafka_topic_partition_list_add(l, topic, part)->offset = offset;
	if (op == 0) {
		rd_kafka_pause_partitions(c->rk, l);
	} else if (op == 1) {
		rd_kafka_resume_partitions(c->rk, l);
	} else {
		err = rd_kafka_seek_partitions(c->rk, l, 5000);
		if (err) {
			pin_log(PIN_LOG_WARN, "consumer: seek failed", "group", c->e->c.group,
					"topic", topic, "error", rd_kafka_error_string(err), NULL);
			rd_kafka_error_destroy(err);
		}
	}
	rd_kafka_topic_partition_list_destroy(l);
}

static struct held *held_find(struct cons *c, const char *topic, int32_t part)
{
	for (size_t i = 0; i < c->nheld; i++)
		if (c->held[i].m->partition == part &&
				!strcmp(rd_kafka_topic_name(c->held[i].m->rkt), topic))
			return &c->held[i];
	return NULL;
}

static void held_remove(struct cons *c, struct held *h)
{
	rd_kafka_message_destroy(h->m);
	*h = c->held[--c->nheld];
	pin_metric_set("pin_consumer_paused_partitions", c->labels, (double)c->nheld);
}

/* Drops every held message (rebalance, shutdown); resumes if asked. */
static void held_drop_all(struct cons *c, bool resume)
{
	while (c->nheld) {
		struct held *h = &c->held[c->nheld - 1];

		if (resume)
			part_list_op(c, rd_kafka_topic_name(h->m->rkt), h->m->partition,
					RD_KAFKA_OFFSET_INVALID, 1);
		held_remove(c, h);
	}
}

/* pin_consumer_partitions_assigned{group}: the partitions this host holds
 * after a rebalance (./dev status, the scale suite) */
static void assigned_gauge(struct cons *c, rd_kafka_t *rk)
{
	rd_kafka_topic_partition_list_t *l = NULL;

	if (rd_kafka_assignment(rk, &l) != RD_KAFKA_RESP_ERR_NO_ERROR || !l)
		return;
	pin_metric_set("pin_consumer_partitions_assigned", c->labels, (double)l->cnt);
	rd_kafka_topic_partition_list_destroy(l);
}

static struct lagp *lagp_find(struct cons *c, const char *topic, int32_t part);
static void wm_forget(struct cons *c);

/* Offset commits.  The highest offset asked for is kept per partition
 * (c->commits; its .err marks a partition whose last commit failed).  A
 * failure -- at once, or for an asynchronous commit later in
 * offset_commit_cb -- marks the partitions, and commit_retry() commits their
 * highest offset again, at most once a second, while they stay assigned.
 * The offsets asked for only grow within an assignment, so a retry never
 * moves the group's offset back, also when an older commit's failure is
 * reported after a newer one succeeded; a revoked partition is forgotten
 * (commits_revoke: its new owner redelivers from the committed offset, the
 * inbox dedupes).  Without the retry a consumer that had caught up showed
 * lag (high watermark - committed) until the partition's next message, and a
 * restart redelivered what it had done. */
static void commit_failed(struct cons *c, const rd_kafka_topic_partition_list_t *offs,
		rd_kafka_resp_err_t err)
{
	pin_log(PIN_LOG_WARN, "consumer: offset commit failed (retried while the"
			" partition stays assigned)", "group", c->e->c.group, "error",
			rd_kafka_err2str(err), NULL);
	pin_metric_add("pin_consumer_offset_commit_failures_total", c->labels, 1);
	for (int i = 0; c->commits && i < offs->cnt; i++) {
		const rd_kafka_topic_partition_t *p = &offs->elems[i];
		rd_kafka_topic_partition_t *u = rd_kafka_topic_partition_list_find(
				c->commits, p->topic, p->partition);

		if (u && (p->err || err))
			u->err = p->err ? p->err : err;
	}
	c->next_commit_retry_us = pin_clock_now_us() + 1000000;
}

/* the first error of a commit's result, NO_ERROR if none */
static rd_kafka_resp_err_t commit_error(rd_kafka_resp_err_t err,
		const rd_kafka_topic_partition_list_t *offs)
{
	for (int i = 0; !err && offs && i < offs->cnt; i++)
		err = offs->elems[i].err;
	return err;
}

static void commit_offsets(struct cons *c, const rd_kafka_topic_partition_list_t *offs)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_copy(offs);
	rd_kafka_resp_err_t e;

	if (!c->commits)
		c->commits = rd_kafka_topic_partition_list_new(l->cnt);
	for (int i = 0; i < l->cnt; i++) {
		rd_kafka_topic_partition_t *p = &l->elems[i], *u =
			rd_kafka_topic_partition_list_find(c->commits, p->topic, p->partition);

		if (!u)
			u = rd_kafka_topic_partition_list_add(c->commits, p->topic, p->partition);
		if (u->offset < p->offset)
			u->offset = p->offset;
		u->err = RD_KAFKA_RESP_ERR_NO_ERROR;   /* this commit covers it */
	}
	e = rd_kafka_commit(c->rk, l, c->commit_async);
	if (!c->commit_async)
		e = commit_error(e, l);
	if (e)
		commit_failed(c, l, e);
	rd_kafka_topic_partition_list_destroy(l);
}

/* the marked partitions still assigned: their highest offset again */
static void commit_retry(struct cons *c)
{
	rd_kafka_topic_partition_list_t *a = NULL, *todo;

	if (!c->commits || pin_clock_now_us() < c->next_commit_retry_us)
		return;
	c->next_commit_retry_us = INT64_MAX;    /* until the next failure */
	if (rd_kafka_assignment(c->rk, &a) != RD_KAFKA_RESP_ERR_NO_ERROR || !a)
		return;
	todo = rd_kafka_topic_partition_list_new(c->commits->cnt);
	for (int i = 0; i < c->commits->cnt; i++) {
		rd_kafka_topic_partition_t *u = &c->commits->elems[i];

		if (u->err && rd_kafka_topic_partition_list_find(a, u->topic, u->partition))
			rd_kafka_topic_partition_list_add(todo, u->topic,
					u->partition)->offset = u->offset;
	}
	rd_kafka_topic_partition_list_destroy(a);
	if (todo->cnt)
		commit_offsets(c, todo);
	rd_kafka_topic_partition_list_destroy(todo);
}

/* revoked partitions: no longer ours to commit */
static void commits_revoke(struct cons *c, const rd_kafka_topic_partition_list_t *parts)
{
	for (int i = 0; c->commits && i < parts->cnt; i++)
		rd_kafka_topic_partition_list_del(c->commits, parts->elems[i].topic,
				parts->elems[i].partition);
}

/* Partitions this consumer no longer owns: their new owner reports their
 * lag, so a stale series here would add the last value to the group's sum. */
static void lag_forget(struct cons *c, const rd_kafka_topic_partition_list_t *parts)
{
	for (int i = 0; i < parts->cnt; i++) {
		char lab[400];
		struct lagp *s = lagp_find(c, parts->elems[i].topic, parts->elems[i].partition);

		snprintf(lab, sizeof(lab), "%s,topic=\"%s\",partition=\"%d\"", c->labels,
				parts->elems[i].topic, (int)parts->elems[i].partition);
		pin_metric_set("pin_consumer_lag_messages", lab, 0);
		if (s)
			s->since_us = 0;
	}
}

static void rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
		rd_kafka_topic_partition_list_t *parts, void *opaque)
{
	struct cons *c = opaque;
	bool coop = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");
	rd_kafka_error_t *e = NULL;

	c->rebal++;     /* a batch being collected re-checks its partitions */
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		if (coop)
			e = rd_kafka_incremental_assign(rk, parts);
		else
			rd_kafka_assign(rk, parts);
		pin_log(PIN_LOG_INFO, "consumer: partitions assigned",
				"group", c->e->c.group, NULL);
	} else {
		/* revoked: whoever gets them redelivers from the committed offset */
		for (int i = 0; i < parts->cnt; i++) {
			struct held *h = held_find(c, parts->elems[i].topic,
					parts->elems[i].partition);

			if (h) {
				part_list_op(c, parts->elems[i].topic,
						parts->elems[i].partition,
						RD_KAFKA_OFFSET_INVALID, 1);
				held_remove(c, h);
			}
		}
		lag_forget(c, parts);
		if (!coop)
			held_drop_all(c, true);
		commits_revoke(c, parts);
		if (coop)
			e = rd_kafka_incremental_unassign(rk, parts);
		else
			rd_kafka_assign(rk, NULL);
	}
	if (e) {
		pin_log(PIN_LOG_WARN, "consumer: rebalance", "group", c->e->c.group,
				"error", rd_kafka_error_string(e), NULL);
		rd_kafka_error_destroy(e);
	}
	assigned_gauge(c, rk);
}

/* [ident] the result of an asynchronous offset commit (served by
 * rd_kafka_consumer_poll on the consumer thread): a failure is committed
 * again (commit_failed, commit_retry); until then a crash or a rebalance
 * only redelivers, and the inbox turns the messages into duplicates.  A
 * synchronous commit's result is handled where it is made. */
static void offset_commit_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
		rd_kafka_topic_partition_list_t *offs, void *opaque)
{
	struct cons *c = opaque;

	(void)rk;
	if (!c->commit_async || err == RD_KAFKA_RESP_ERR__NO_OFFSET)
		return;
	if ((err = commit_error(err, offs)) && offs)
		commit_failed(c, offs, err);
}

static int consumer_create(struct cons *c)
{
	char err[512];
	char sto[24], hb[24], fw[24];
	rd_kafka_conf_t *conf;
	rd_kafka_topic_partition_list_t *topics = NULL;
	rd_kafka_resp_err_t e;
	size_t n = 0;

	conf = pin_kafka_conf_new(c->e->c.group, err, sizeof(err));
	if (!conf)
		goto fail;
	snprintf(sto, sizeof(sto), "%lld", pin_config_int("kafka_session_timeout_ms"));
	snprintf(hb, sizeof(hb), "%lld", pin_config_int("kafka_heartbeat_interval_ms"));
	snprintf(fw, sizeof(fw), "%lld", pin_config_int("kafka_fetch_wait_max_ms"));
	if (pin_kafka_conf_set(conf, "group.id", c->e->c.group, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "enable.auto.offset.store", "false", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "auto.offset.reset", "earliest", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "session.timeout.ms", sto, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "heartbeat.interval.ms", hb, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "fetch.wait.max.ms", fw, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "partition.assignment.strategy",
				pin_config_str("kafka_assignment_strategy"),
				err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "allow.auto.create.topics", "true", err, sizeof(err))) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb);
	rd_kafka_conf_set_offset_commit_cb(conf, offset_commit_cb);
	rd_kafka_conf_set_opaque(conf, c);
	c->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err));
	if (!c->rk) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_poll_set_consumer(c->rk);
	for (char **t = c->e->topics; t && *t; t++)
		n++;
	topics = rd_kafka_topic_partition_list_new((int)n);
	for (char **t = c->e->topics; t && *t; t++)
		rd_kafka_topic_partition_list_add(topics, *t, RD_KAFKA_PARTITION_UA);
	e = rd_kafka_subscribe(c->rk, topics);
	rd_kafka_topic_partition_list_destroy(topics);
	if (e) {
		snprintf(err, sizeof(err), "subscribe: %s", rd_kafka_err2str(e));
		rd_kafka_destroy(c->rk);
		c->rk = NULL;
		goto fail;
	}
	c->boot = pin_kafka_bootstrap();
	c->create_failing = false;
	pin_log(PIN_LOG_INFO, "consumer subscribed", "group", c->e->c.group, NULL);
	return 0;
fail:
	if (!c->create_failing)
		pin_log(PIN_LOG_ERROR, "consumer: cannot create the kafka consumer",
				"group", c->e->c.group, "error", err, NULL);
	c->create_failing = true;
	return -1;
}

/* gone: the broker moved (a restarted dev broker is a new, empty cluster):
 * leaving the old group through a coordinator that no longer exists can
 * only wait, so the client is destroyed without the consumer close. */
static void consumer_destroy(struct cons *c, bool gone)
{
	if (c->rk) {
		held_drop_all(c, false);
		if (c->commits)
			rd_kafka_topic_partition_list_destroy(c->commits);
		c->commits = NULL;
		if (gone) {
			/* no revoke callback runs: what it forgets, forgotten here */
			rd_kafka_topic_partition_list_t *l = NULL;

			if (rd_kafka_assignment(c->rk, &l) == RD_KAFKA_RESP_ERR_NO_ERROR && l) {
				lag_forget(c, l);
				rd_kafka_topic_partition_list_destroy(l);
			}
			rd_kafka_destroy_flags(c->rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
		} else {
			rd_kafka_consumer_close(c->rk);
			rd_kafka_destroy(c->rk);
		}
		c->rk = NULL;
	}
	free(c->boot);
	c->boot = NULL;
}

static void dlq_dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	int *st = m->_private;

	(void)rk;
	(void)opaque;
	if (st)
		*st = m->err ? 2 : 1;
}

static int dlq_create(struct cons *c)
{
	char err[512];
	rd_kafka_conf_t *conf = pin_kafka_conf_new("dlq", err, sizeof(err));

	if (!conf)
		goto fail;
	if (pin_kafka_conf_set(conf, "acks", "all", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "message.timeout.ms", "10000", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "linger.ms", "0", err, sizeof(err))) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, dlq_dr_cb);
	c->dlq = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
	if (!c->dlq) {
		rd_kafka_conf_destroy(conf);
		goto fail;
	}
	return 0;
fail:
	pin_log(PIN_LOG_ERROR, "consumer: cannot create the DLQ producer",
			"group", c->e->c.group, "error", err, NULL);
	return -1;
}

static void dlq_destroy(struct cons *c)
{
	if (c->dlq) {
		rd_kafka_purge(c->dlq, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_poll(c->dlq, 0);
		rd_kafka_destroy(c->dlq);
		c->dlq = NULL;
	}
}

/* Writes m to <group>.dlq and waits for the ack.  0 ok, -1 failed. */
static int dlq_send(struct cons *c, const rd_kafka_message_t *m,
		const char *code, const char *detail)
{
	char part[16], off[24];
	volatile int st = 0;
	rd_kafka_resp_err_t e;
	const char *topic = rd_kafka_topic_name(m->rkt);

	if (!c->dlq && dlq_create(c) != 0)
		return -1;
	snprintf(part, sizeof(part), "%" PRId32, m->partition);
	snprintf(off, sizeof(off), "%" PRId64, m->offset);
	e = rd_kafka_producev(c->dlq,
			RD_KAFKA_V_TOPIC(c->dlq_topic),
			RD_KAFKA_V_KEY(m->key, m->key_len),
			RD_KAFKA_V_VALUE(m->payload, m->len),
			RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			RD_KAFKA_V_HEADER("x-original-topic", topic, -1),
			RD_KAFKA_V_HEADER("x-original-partition", part, -1),
			RD_KAFKA_V_HEADER("x-original-offset", off, -1),
			RD_KAFKA_V_HEADER("x-error-code", code, -1),
			RD_KAFKA_V_HEADER("x-error-detail", detail ? detail : "", -1),
			RD_KAFKA_V_OPAQUE((void *)&st),
			RD_KAFKA_V_END);
	if (e) {
		pin_log(PIN_LOG_ERROR, "consumer: DLQ produce failed", "group", c->e->c.group,
				"error", rd_kafka_err2str(e), NULL);
		dlq_destroy(c);
		return -1;
	}
	rd_kafka_flush(c->dlq, 12000);
	if (st != 1) {
		pin_log(PIN_LOG_ERROR, "consumer: DLQ delivery failed", "group", c->e->c.group,
				"dlq", c->dlq_topic, NULL);
		dlq_destroy(c);     /* recreated (bootstrap re-read) next time */
		return -1;
	}
	pin_metric_add("pin_dlq_total", c->labels, 1);
	return 0;
}

static void log_failure(struct cons *c, const rd_kafka_message_t *m,
		const char *message_id, const char *what, const char *code,
		const char *detail)
{
	char part[16], off[24];

	snprintf(part, sizeof(part), "%" PRId32, m->partition);
	snprintf(off, sizeof(off), "%" PRId64, m->offset);
	pin_log(PIN_LOG_WARN, what, "group", c->e->c.group,
			"topic", rd_kafka_topic_name(m->rkt), "partition", part,
			"offset", off, "messageId", message_id ? message_id : "",
			"code", code, "detail", detail ? detail : "", NULL);
}

/* what one attempt at a message decided, for handle() and the DLQ headers */
struct verdict {
	char code[64];
	char detail[256];
	char mid[37];
	int deadline_s;             /* handler RETRY: its own deadline, or 0 */
};

/* decode: key and value copied into the arena, NUL-terminated */
static void msg_init(struct pin_msg *msg, const rd_kafka_message_t *m)
{
	char *val;

	memset(msg, 0, sizeof(*msg));
	msg->topic = rd_kafka_topic_name(m->rkt);
	msg->partition = m->partition;
	msg->offset = m->offset;
	if (m->key) {
		char *k = pin_arena_alloc(m->key_len + 1);

		memcpy(k, m->key, m->key_len);
		msg->key = k;
	}
	val = pin_arena_alloc(m->len + 1);
	if (m->len)
		memcpy(val, m->payload, m->len);
	msg->value = val;
	msg->value_len = m->len;
}

/* the message's valid traceparent header (in the arena), or NULL */
static const char *header_traceparent(const rd_kafka_message_t *m)
{
	rd_kafka_headers_t *hdrs = NULL;
	const void *v = NULL;
	size_t n = 0;
	char *s;

	if (rd_kafka_message_headers(m, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
	    rd_kafka_header_get_last(hdrs, "traceparent", &v, &n) !=
			RD_KAFKA_RESP_ERR_NO_ERROR || !v || n != 55)
		return NULL;
	s = pin_arena_alloc(56);
	memcpy(s, v, 55);
	s[55] = '\0';
	return pin_traceparent_valid(s) ? s : NULL;
}

/* the trace of a valid envelope: the W3C traceparent header when the
 * message has one, else correlationId, else messageId */
static void msg_trace(const struct pin_msg *msg, const char *tp)
{
	const char *corr = NULL;
	json_object *v;

	if (json_object_object_get_ex(msg->envelope, "correlationId", &v) &&
			json_object_is_type(v, json_type_string))
		corr = json_object_get_string(v);
	if (tp) {      /* continue the producer's trace (W3C traceparent header) */
		pin_trace_start(tp);
		return;
	}
	pin_trace_start(NULL);     /* outbox rows written here get a trace */
	pin_trace_set(corr && *corr ? corr : msg->message_id);
}

/* a valid envelope: the contract-version warning */
static void note_version(struct cons *c, const struct pin_msg *msg)
{
	if (msg->contract_version != 1) {
		char cv[16];

		snprintf(cv, sizeof(cv), "%d", msg->contract_version);
		pin_log(PIN_LOG_WARN, "consumer: unexpected contractVersion, processing anyway",
				"group", c->e->c.group, "topic", msg->topic,
				"messageId", msg->message_id, "contractVersion", cv, NULL);
		pin_metric_add("pin_consumer_contract_version_mismatch_total", c->labels, 1);
	}
}

/* a valid envelope: the version warning and the trace id (the W3C
 * traceparent header when the message has one, else correlationId, else
 * messageId) */
static void note_envelope(struct cons *c, const struct pin_msg *msg,
		const char *tp)
{
	note_version(c, msg);
	msg_trace(msg, tp);
}

/*
 * classify a handler failure (the transaction is rolled back):
 *   the database link is gone           -> A_RETRY_INFRA (whatever it said);
 *   the statement that failed has a
 *   data (22) or integrity (23, not
 *   unique/exclusion) SQLSTATE          -> A_DLQ, code <CLASS>_<SQLSTATE>:
 *                                          the same bytes fail every time;
 *   handler RETRY                       -> A_RETRY (with its deadline);
 *   handler FATAL                       -> A_DLQ with its code.
 */
static enum attempt classify(enum pin_consume_status st,
		const struct pin_consume_result *res, struct verdict *v)
{
	const char *state = pin_db_last_error();
	enum pin_db_class k = pin_db_classify(state);

	snprintf(v->code, sizeof(v->code), "%s", res->code[0] ? res->code :
			st == PIN_CONSUME_RETRY ? "RETRIABLE" : "NON_RETRIABLE");
	snprintf(v->detail, sizeof(v->detail), "%s", res->detail);
	if (!pin_db_conn() || !strncmp(state, "08", 2))
		return A_RETRY_INFRA;
	if (st == PIN_CONSUME_RETRY && (k == PIN_DBC_DATA || k == PIN_DBC_INTEGRITY)) {
		snprintf(v->code, sizeof(v->code), "%s_%s", k == PIN_DBC_DATA ?
				"DATA_EXCEPTION" : "INTEGRITY_VIOLATION", state);
		snprintf(v->detail, sizeof(v->detail), "SQLSTATE %.5s is not retriable%s%.200s",
				state, res->detail[0] ? ": " : "", res->detail);
		return A_DLQ;
	}
	if (st == PIN_CONSUME_RETRY) {
		v->deadline_s = res->retry_deadline_s;
		return A_RETRY;
	}
	return A_DLQ;       /* FATAL (or an unknown status) */
}

/* handle: one transaction with the inbox row and the handler's effects */
static enum attempt run_handler(struct cons *c, const struct pin_msg *msg,
		struct verdict *v)
{
	struct pin_consume_result res;
	enum pin_consume_status st;
	PGresult *r;
	char now[40];
	const char *p[3] = { c->e->c.group, msg->message_id, now };

	snprintf(v->code, sizeof(v->code), "DB_UNAVAILABLE");
	if (pin_db_begin() != 0)
		return A_RETRY_INFRA;
	pin_clock_fmt(pin_clock_now_us(), now, sizeof(now));
	r = pin_db_exec_prepared("pin_consumer_inbox", c->inbox_sql, 3, p);
	if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
		pin_db_rollback();
		snprintf(v->detail, sizeof(v->detail), "inbox insert failed");
		return A_RETRY_INFRA;
	}
	if (!strcmp(PQcmdTuples(r), "0")) {
		pin_db_commit();
		pin_metric_add("pin_consumer_duplicates_total", c->labels, 1);
		return A_DONE;
	}
	memset(&res, 0, sizeof(res));
	pin_db_error_reset();
	st = c->e->c.fn(msg, &res, c->e->c.ud);
	res.code[sizeof(res.code) - 1] = '\0';
	res.detail[sizeof(res.detail) - 1] = '\0';
	if (st != PIN_CONSUME_OK) {
		pin_db_rollback();
		return classify(st, &res, v);
	}
	if (pin_db_commit() != 0) {
		snprintf(v->detail, sizeof(v->detail), "commit failed");
		return A_RETRY_INFRA;
	}
	pin_metric_add("pin_consumer_processed_total", c->labels, 1);
	if (msg->created_at_us)
		pin_metric_set("pin_consumer_lag_seconds", c->labels,
				(double)(pin_clock_now_us() - msg->created_at_us) / 1e6);
	return A_DONE;
}

/*
 * One attempt at m: decode -> validate (envelope.c) -> handle -> classify;
 * a rejected message is written to the DLQ here.  A_DONE: the offset may be
 * committed (handled, duplicate or DLQ'd).
 */
static enum attempt attempt(struct cons *c, const rd_kafka_message_t *m,
		struct verdict *v)
{
	struct pin_msg msg;
	json_object *env = NULL;
	enum attempt out;
	const char *what = "consumer: message rejected";

	memset(v, 0, sizeof(*v));
	msg_init(&msg, m);
	if (pin_envelope_parse(msg.value, msg.value_len, &msg, &env, v->code,
			sizeof(v->code), v->detail, sizeof(v->detail)) != 0) {
		what = "consumer: invalid envelope";
		out = A_DLQ;
	} else {
		double t0 = pin_metrics_mono_s();

		snprintf(v->mid, sizeof(v->mid), "%s", msg.message_id);
		note_envelope(c, &msg, header_traceparent(m));
		out = run_handler(c, &msg, v);
		pin_metric_observe("pin_consumer_consume_duration_seconds", c->labels,
				pin_metrics_mono_s() - t0);
	}
	if (out == A_DLQ) {
		log_failure(c, m, msg.message_id, what, v->code, v->detail);
		out = dlq_send(c, m, v->code, v->detail) == 0 ? A_DONE : A_RETRY_INFRA;
	}
	if (pin_db_in_tx())
		pin_db_rollback();
	json_object_put(env);
	return out;         /* the trace stays for handle()'s log lines */
}

static void commit_offset(struct cons *c, const rd_kafka_message_t *m)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);

	rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(m->rkt),
			m->partition)->offset = m->offset + 1;
	commit_offsets(c, l);
	rd_kafka_topic_partition_list_destroy(l);
}

static int backoff_next(int cur)
{
	int first = (int)pin_config_int("consumer_backoff_initial_ms");
	int max = (int)pin_config_int("consumer_backoff_max_ms");
	int n = cur ? cur * 2 : first;

	return n > max ? max : n;
}

/* m is done (handled, duplicate or DLQ'd): commit, and resume a held
 * partition at the next offset.  Takes ownership of m. */
static void finish(struct cons *c, rd_kafka_message_t *m, struct held *h)
{
	char topic[256];
	int32_t part = m->partition;
	int64_t next = m->offset + 1;

	commit_offset(c, m);
	if (!h) {
		rd_kafka_message_destroy(m);
		return;
	}
	snprintf(topic, sizeof(topic), "%s", rd_kafka_topic_name(m->rkt));
	held_remove(c, h);      /* destroys m */
	part_list_op(c, topic, part, next, 2);
	part_list_op(c, topic, part, RD_KAFKA_OFFSET_INVALID, 1);
}

/* m failed retriably: pause its partition (first time) and schedule the next
 * attempt with backoff.  Takes ownership of m. */
static void hold(struct cons *c, rd_kafka_message_t *m, struct held *h,
		enum attempt a, const struct verdict *v, int64_t now)
{
	pin_metric_add("pin_consumer_retries_total", c->labels, 1);
	if (!h) {
		if (c->nheld == c->capheld) {
			size_t cap = c->capheld ? c->capheld * 2 : 8;
			struct held *nh = realloc(c->held, cap * sizeof(*nh));

			if (!nh) {
				/* cannot hold it: leave it uncommitted, it comes back
				 * after the next rebalance or restart */
				rd_kafka_message_destroy(m);
				return;
			}
			c->held = nh;
			c->capheld = cap;
		}
		h = &c->held[c->nheld++];
		memset(h, 0, sizeof(*h));
		h->m = m;
		part_list_op(c, rd_kafka_topic_name(m->rkt), m->partition,
				RD_KAFKA_OFFSET_INVALID, 0);
		pin_metric_set("pin_consumer_paused_partitions", c->labels, (double)c->nheld);
	}
	h->attempts++;
	if (a == A_RETRY && !h->deadline_us) {
		long long s = v->deadline_s > 0 ? v->deadline_s :
			pin_config_int("consumer_retry_deadline_s");

		h->deadline_us = now + s * 1000000LL;
	}
	h->backoff_ms = backoff_next(h->backoff_ms);
	h->next_us = now + (int64_t)h->backoff_ms * 1000;
	if (h->deadline_us && a == A_RETRY && h->next_us > h->deadline_us)
		h->next_us = h->deadline_us;
	snprintf(h->code, sizeof(h->code), "%s", v->code);
	snprintf(h->detail, sizeof(h->detail), "%s", v->detail);
	if (h->attempts == 1 || a == A_RETRY)
		log_failure(c, m, v->mid, a == A_RETRY ?
				"consumer: retriable failure, partition paused" :
				"consumer: infrastructure failure, partition paused",
				v->code, v->detail);
}

/*
 * Handles m (fresh from poll, or held).  h is the held slot when m is held.
 * Takes ownership of m.
 */
static void handle(struct cons *c, rd_kafka_message_t *m, struct held *h)
{
	struct verdict v;
	enum attempt a;
	int64_t now;

	a = attempt(c, m, &v);
	now = pin_clock_now_us();
	if (a == A_RETRY && h && h->deadline_us && now >= h->deadline_us) {
		/* out of time: DLQ with the last code */
		log_failure(c, m, v.mid, "consumer: retry deadline passed, to DLQ",
				v.code, v.detail);
		a = dlq_send(c, m, v.code, v.detail) == 0 ? A_DONE : A_RETRY_INFRA;
	}
	if (a == A_DONE)
		finish(c, m, h);
	else
		hold(c, m, h, a, &v, now);
	pin_trace_set(NULL);
}

/* ------------------------------------------------------------------ batches
 *
 * Fresh messages are applied in batches (consumer_batch_max, default 64):
 * every message already fetched when the first one arrives, at most that
 * many, in ONE transaction:
 *   BEGIN; the inbox rows of every valid message in one INSERT ... SELECT
 *   unnest ... ON CONFLICT DO NOTHING RETURNING (the ones it returns are
 *   new, the others duplicates); per new message SAVEPOINT pin_msg (the
 *   previous one RELEASEd in the same round trip), the handler, and on a
 *   failure ROLLBACK TO SAVEPOINT pin_msg + classify (the message's inbox
 *   row is deleted again before the COMMIT); COMMIT; then, in order, the
 *   DLQ writes (acks awaited), the holds of RETRY messages (partition
 *   paused, the batch's later messages of that partition dropped: they come
 *   again after the seek) and ONE offset commit per batch (asynchronous, per
 *   partition: after the last message that is done).
 * Equivalence with one transaction per message: a message's effects and its
 * inbox row still commit together (same transaction) or not at all (its
 * savepoint rolled back, its row deleted); offsets are committed only after
 * the COMMIT, so a crash anywhere redelivers the batch and the committed
 * inbox rows turn the applied messages into duplicates.  Anything that is no
 * per-message failure (database down, inbox statement, savepoint or COMMIT
 * failing, a handler failure while the link is down) rolls the whole batch
 * back and hands its messages one by one to handle(), the classic path
 * (DLQ writes are made after the COMMIT only, so nothing was sent twice).
 * Batches stay <= 64 by default: every savepoint that writes takes a
 * subtransaction id, and above 64 per transaction PostgreSQL's snapshots of
 * the other sessions overflow their subxid cache.
 * pin_consumer.batch_max (ABI 1.4) caps a consumer's savepoint batches
 * below that (the CRM booking consumer: 32, two subxids per message).  A
 * consumer with a batch handler takes up to consumer_batch_set_max (500)
 * messages a batch, whatever its batch_max; when such a batch is larger
 * than a savepoint batch may be and its handler gives up, its messages take
 * one transaction each.
 *
 * [consume] Set-based batches (pin_consumer.batch_fn, ABI 1.4): after the
 * claim, the batch's new messages go to the batch handler in ONE call (no
 * savepoints; e.g. one multi-row upsert).  Its per-message verdicts: OK
 * (applied) or FATAL (no effect: DLQ, inbox row deleted before the COMMIT,
 * as above).  If it gives up (non-OK return, a RETRY verdict, a failed
 * statement), the transaction is rolled back and the batch is done again
 * the savepoint way above (pin_consumer_batch_fallbacks_total), so
 * retries, holds, SQLSTATE classes and order stay those of fn.
 */

/* one message of a batch */
struct bitem {
	rd_kafka_message_t *m;
	struct pin_msg msg;
	json_object *env;
	struct verdict v;
	enum attempt a;
	const char *what;           /* log line of a DLQ */
	bool valid;                 /* envelope ok */
	bool fresh;                 /* its inbox row is new (this batch) */
	bool skip;                  /* dropped: its partition holds an earlier one */
	bool dup, processed, unclaim;
	bool held;                  /* hold() took m */
};

static bool same_part(const struct bitem *x, const struct bitem *y)
{
	return x->m->partition == y->m->partition &&
		!strcmp(rd_kafka_topic_name(x->m->rkt), rd_kafka_topic_name(y->m->rkt));
}

/* FNV-1a of a uuid's text, case-folded */
static size_t id_hash(const char *id)
{
	uint32_t h = 2166136261u;

	for (; *id; id++) {
		h ^= (unsigned char)tolower((unsigned char)*id);
		h *= 16777619u;
	}
	return h;
}

/* the inbox rows of the batch's valid messages: b[i].fresh for the new ones.
 * 0, or -1 (statement failed). */
static int batch_claim(struct cons *c, struct bitem *b, size_t n)
{
	size_t len = 3, k = 0, nv = 0, nslot, *vidx, *slot;
	char now[40], *arr, *w;
	const char *p[3];
	PGresult *r;

	for (size_t i = 0; i < n; i++)
		if (b[i].valid)
			len += 37;
	arr = w = pin_arena_alloc(len);
	*w++ = '{';
	for (size_t i = 0; i < n; i++)
		if (b[i].valid) {
			if (k++)
				*w++ = ',';
			memcpy(w, b[i].msg.message_id, 36);     /* a checked uuid */
			w += 36;
		}
	*w++ = '}';
	*w = '\0';
	if (!k)
		return 0;
	vidx = pin_arena_alloc(k * sizeof(*vidx));
	pin_clock_fmt(pin_clock_now_us(), now, sizeof(now));
	p[0] = c->e->c.group;
	p[1] = arr;
	p[2] = now;
	r = pin_db_exec_prepared("pin_consumer_claim", c->claim_sql, 3, p);
	if (!r || PQresultStatus(r) != PGRES_TUPLES_OK)
		return -1;
	/* [ident] the rows are the new ids; each marks the first valid
	 * message of that id (a hash of the batch's ids: linear also for a
	 * large batch; no join in SQL) */
	nslot = 1;
	while (nslot < 2 * k)
		nslot <<= 1;
	slot = pin_arena_alloc(nslot * sizeof(*slot));
	memset(slot, 0, nslot * sizeof(*slot));
	for (size_t i = 0; i < n; i++) {
		size_t h;

		if (!b[i].valid)
			continue;
		vidx[nv] = i;
		for (h = id_hash(b[i].msg.message_id) & (nslot - 1); slot[h];
				h = (h + 1) & (nslot - 1))
			if (!strcasecmp(b[vidx[slot[h] - 1]].msg.message_id,
					b[i].msg.message_id))
				break;
		if (!slot[h])
			slot[h] = ++nv;
		else
			nv++;       /* a later copy: never found (the first is) */
	}
	for (int j = 0; j < PQntuples(r); j++) {
		const char *id = PQgetvalue(r, j, 0);

		for (size_t h = id_hash(id) & (nslot - 1); slot[h]; h = (h + 1) & (nslot - 1))
			if (!strcasecmp(b[vidx[slot[h] - 1]].msg.message_id, id)) {
				b[vidx[slot[h] - 1]].fresh = true;
				break;
			}
	}
	return 0;
}

/* deletes the inbox rows of the messages that failed or were dropped */
static int batch_unclaim(struct cons *c, struct bitem *b, size_t n)
{
	size_t len = 3, k = 0;
	char *arr, *w;
	const char *p[2];
	PGresult *r;

	for (size_t i = 0; i < n; i++)
		if (b[i].unclaim)
			len += 37;
	if (len == 3)
		return 0;
	arr = w = pin_arena_alloc(len);
	*w++ = '{';
	for (size_t i = 0; i < n; i++)
		if (b[i].unclaim) {
			if (k++)
				*w++ = ',';
			memcpy(w, b[i].msg.message_id, 36);
			w += 36;
		}
	*w++ = '}';
	*w = '\0';
	p[0] = c->e->c.group;
	p[1] = arr;
	r = pin_db_exec_prepared("pin_consumer_unclaim", c->unclaim_sql, 2, p);
	return r && PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;
}

/* a savepoint command; the simple protocol (PQexec), so that "RELEASE ...;
 * SAVEPOINT ..." is one round trip.  0, -1 (the batch falls back). */
static int sp_exec(struct cons *c, const char *sql)
{
	PGconn *conn = pin_db_conn();
	PGresult *r = conn ? PQexec(conn, sql) : NULL;
	int rc = r && PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;

	if (rc)
		pin_log(PIN_LOG_WARN, "consumer: savepoint failed, batch falls back to one"
				" transaction per message", "group", c->e->c.group, "error",
				conn ? PQerrorMessage(conn) : "no connection", NULL);
	PQclear(r);
	return rc;
}

/* The handler of one new message inside the batch transaction.  false:
 * the batch cannot go on (infrastructure). */
static bool batch_one(struct cons *c, struct bitem *it, bool first)
{
	struct pin_consume_result res;
	enum pin_consume_status st;
	double t0 = pin_metrics_mono_s();

	if (sp_exec(c, first ? "SAVEPOINT pin_msg" :
			"RELEASE SAVEPOINT pin_msg; SAVEPOINT pin_msg") != 0)
		return false;
	snprintf(it->v.mid, sizeof(it->v.mid), "%s", it->msg.message_id);
	note_envelope(c, &it->msg, header_traceparent(it->m));
	memset(&res, 0, sizeof(res));
	pin_db_error_reset();
	st = c->e->c.fn(&it->msg, &res, c->e->c.ud);
	res.code[sizeof(res.code) - 1] = '\0';
	res.detail[sizeof(res.detail) - 1] = '\0';
	pin_metric_observe("pin_consumer_consume_duration_seconds", c->labels,
			pin_metrics_mono_s() - t0);
	pin_trace_set(NULL);
	if (st == PIN_CONSUME_OK) {
		it->a = A_DONE;
		it->processed = true;
		return true;
	}
	it->a = classify(st, &res, &it->v);
	it->what = "consumer: message rejected";
	it->unclaim = true;
	if (it->a == A_RETRY_INFRA)
		return false;
	return sp_exec(c, "ROLLBACK TO SAVEPOINT pin_msg") == 0;
}

/* after the COMMIT: DLQ writes, holds, one offset commit */
static void batch_finish(struct cons *c, struct bitem *b, size_t n)
{
	rd_kafka_topic_partition_list_t *offs = rd_kafka_topic_partition_list_new((int)n);
	int64_t now = pin_clock_now_us(), last_created = 0;
	double processed = 0, dups = 0;
	/* [ident] the earlier items that are not done (usually none): an
	 * item of their partition waits; linear for a large batch */
	const struct bitem **undone = pin_arena_alloc(n * sizeof(*undone));
	size_t nundone = 0;

	for (size_t i = 0; i < n; i++) {
		struct bitem *it = &b[i];
		bool blocked = it->skip;

		for (size_t j = 0; j < nundone && !blocked; j++)
			blocked = same_part(undone[j], it);
		if (it->processed) {
			processed++;
			if (it->msg.created_at_us)
				last_created = it->msg.created_at_us;
		}
		if (blocked) {      /* comes again after its partition's seek */
			it->a = A_RETRY_INFRA;
			it->skip = true;
			undone[nundone++] = it;
			continue;       /* counted (as a duplicate) when it comes again */
		}
		dups += it->dup;
		if (it->valid && it->a != A_DONE)    /* its log lines carry its trace */
			msg_trace(&it->msg, header_traceparent(it->m));
		if (it->a == A_DLQ) {
			log_failure(c, it->m, it->valid ? it->msg.message_id : NULL,
					it->what, it->v.code, it->v.detail);
			it->a = dlq_send(c, it->m, it->v.code, it->v.detail) == 0 ?
				A_DONE : A_RETRY_INFRA;
		}
		if (it->a == A_DONE) {
			rd_kafka_topic_partition_list_t *l = offs;
			rd_kafka_topic_partition_t *p = rd_kafka_topic_partition_list_find(l,
					rd_kafka_topic_name(it->m->rkt), it->m->partition);

			if (!p)
				p = rd_kafka_topic_partition_list_add(l,
						rd_kafka_topic_name(it->m->rkt), it->m->partition);
			p->offset = it->m->offset + 1;
		} else {
			hold(c, it->m, NULL, it->a, &it->v, now);   /* takes it->m */
			it->held = true;
			undone[nundone++] = it;
		}
		pin_trace_set(NULL);
	}
	/* only now: same_part() above reads the earlier messages */
	for (size_t i = 0; i < n; i++)
		if (!b[i].held)
			rd_kafka_message_destroy(b[i].m);
	if (offs->cnt)
		commit_offsets(c, offs);
	rd_kafka_topic_partition_list_destroy(offs);
	if (processed)
		pin_metric_add("pin_consumer_processed_total", c->labels, processed);
	if (dups)
		pin_metric_add("pin_consumer_duplicates_total", c->labels, dups);
	if (last_created)
		pin_metric_set("pin_consumer_lag_seconds", c->labels,
				(double)(pin_clock_now_us() - last_created) / 1e6);
}

/* a valid item back to "not tried" (the set path gave up) */
static void bitem_reset(struct bitem *it)
{
	if (!it->valid)
		return;
	it->a = A_DONE;
	it->what = NULL;
	memset(&it->v, 0, sizeof(it->v));
	it->fresh = it->skip = it->dup = it->processed = it->unclaim = false;
}

/*
 * [consume] The set-based path (pin_consumer.batch_fn, ABI 1.4): the new
 * messages of the claimed batch go to the batch handler in one call.  1:
 * done as its verdicts say (OK applied, FATAL -> DLQ without effect); 0:
 * it gave up (non-OK return, a RETRY verdict, a failed statement): the
 * caller rolls back and takes the per-message savepoints; -1: the batch
 * cannot go on (infrastructure).
 */
static int batch_set(struct cons *c, struct bitem *b, size_t n)
{
	const struct pin_msg **msgs = pin_arena_alloc(n * sizeof(*msgs));
	size_t *idx = pin_arena_alloc(n * sizeof(*idx));
	enum pin_consume_status *st = pin_arena_alloc(n * sizeof(*st));
	struct pin_consume_result *res = pin_arena_alloc(n * sizeof(*res));
	enum pin_consume_status rc;
	size_t k = 0;
	double dt;

	for (size_t i = 0; i < n; i++) {
		struct bitem *it = &b[i];

		if (!it->valid)
			continue;
		note_version(c, &it->msg);  /* duplicates count too */
		if (!it->fresh) {
			it->a = A_DONE;
			it->dup = true;
			continue;
		}
		snprintf(it->v.mid, sizeof(it->v.mid), "%s", it->msg.message_id);
		idx[k] = i;
		msgs[k] = &it->msg;
		st[k] = PIN_CONSUME_OK;
		k++;
	}
	if (!k)
		return 1;
	pin_trace_start(NULL);      /* one trace for the batch's own writes */
	pin_db_error_reset();
	dt = pin_metrics_mono_s();
	rc = c->e->c.batch_fn(msgs, k, st, res, c->e->c.ud);
	dt = pin_metrics_mono_s() - dt;
	pin_trace_set(NULL);
	if (!pin_db_conn() || !pin_db_in_tx() || !strncmp(pin_db_last_error(), "08", 2))
		return -1;
	if (rc != PIN_CONSUME_OK ||
			PQtransactionStatus(pin_db_conn()) != PQTRANS_INTRANS)
		return 0;
	for (size_t j = 0; j < k; j++)
		if (st[j] != PIN_CONSUME_OK && st[j] != PIN_CONSUME_FATAL)
			return 0;
	for (size_t j = 0; j < k; j++) {
		struct bitem *it = &b[idx[j]];

		/* the histogram's "one message": its share of the call */
		pin_metric_observe("pin_consumer_consume_duration_seconds", c->labels,
				dt / (double)k);
		if (st[j] == PIN_CONSUME_OK) {
			it->a = A_DONE;
			it->processed = true;
			continue;
		}
		res[j].code[sizeof(res[j].code) - 1] = '\0';
		res[j].detail[sizeof(res[j].detail) - 1] = '\0';
		snprintf(it->v.code, sizeof(it->v.code), "%s",
				res[j].code[0] ? res[j].code : "NON_RETRIABLE");
		snprintf(it->v.detail, sizeof(it->v.detail), "%s", res[j].detail);
		it->a = A_DLQ;
		it->what = "consumer: message rejected";
		it->unclaim = true;
	}
	return 1;
}

/* One transaction for the batch: BEGIN, the claim, the set path (use_set)
 * or one savepoint per new message, the unclaim, COMMIT.  1 committed, 0
 * the set path gave up (see batch_set), -1 fall back to handle(). */
static int batch_tx(struct cons *c, struct bitem *b, size_t n, bool use_set)
{
	bool first = true;

	if (pin_db_begin() != 0 || batch_claim(c, b, n) != 0)
		return -1;
	if (use_set) {
		int r = batch_set(c, b, n);

		if (r <= 0)
			return r;
		goto commit;
	}
	for (size_t i = 0; i < n; i++) {
		struct bitem *it = &b[i];

		if (!it->valid)
			continue;
		for (size_t j = 0; j < i && !it->skip; j++)
			it->skip = b[j].a == A_RETRY && same_part(&b[j], it);
		if (it->skip) {
			it->unclaim = it->fresh;
			continue;
		}
		if (!it->fresh) {   /* the version warning counts duplicates too */
			note_envelope(c, &it->msg, NULL);
			pin_trace_set(NULL);
			it->a = A_DONE;
			it->dup = true;
			continue;
		}
		if (!batch_one(c, it, first))
			return -1;
		first = false;
	}
commit:
	if (batch_unclaim(c, b, n) != 0 || pin_db_commit() != 0)
		return -1;
	return 1;
}

/*
 * Applies n fresh messages (see the comment above).  Takes ownership of
 * every b[i].m.
 */
static void handle_batch(struct cons *c, struct bitem *b, size_t n)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		struct bitem *it = &b[i];

		msg_init(&it->msg, it->m);
		if (pin_envelope_parse(it->msg.value, it->msg.value_len, &it->msg, &it->env,
				it->v.code, sizeof(it->v.code), it->v.detail,
				sizeof(it->v.detail)) != 0) {
			it->a = A_DLQ;
			it->what = "consumer: invalid envelope";
		} else {
			it->valid = true;
		}
	}
	rc = batch_tx(c, b, n, c->e->c.batch_fn != NULL);
	if (rc == 0 && n <= c->sp_max) {
		/* [consume] the set path gave up: the same transaction's work
		 * again, one savepoint per message */
		pin_db_rollback();
		pin_metric_add("pin_consumer_batch_fallbacks_total", c->labels, 1);
		for (i = 0; i < n; i++)
			bitem_reset(&b[i]);
		rc = batch_tx(c, b, n, false);
	} else if (rc == 0) {
		/* a set batch larger than a savepoint batch may be: one
		 * transaction per message (no subxid cache overflow) */
		pin_metric_add("pin_consumer_batch_fallbacks_total", c->labels, 1);
		rc = -1;
	}
	if (rc > 0) {
		batch_finish(c, b, n);
		goto out;
	}
	/* the classic path, one message per transaction */
	pin_trace_set(NULL);
	pin_db_rollback();
	for (i = 0; i < n; i++) {
		if (held_find(c, rd_kafka_topic_name(b[i].m->rkt), b[i].m->partition))
			rd_kafka_message_destroy(b[i].m);
		else
			handle(c, b[i].m, NULL);
	}
out:
	for (i = 0; i < n; i++)
		json_object_put(b[i].env);
}

/* Drops the messages of partitions no longer assigned (a rebalance while
 * the batch was collected).  Returns the new count. */
static size_t batch_keep_assigned(struct cons *c, struct bitem *b, size_t n)
{
	rd_kafka_topic_partition_list_t *l = NULL;
	size_t k = 0;

	if (rd_kafka_assignment(c->rk, &l) != RD_KAFKA_RESP_ERR_NO_ERROR)
		l = NULL;
	for (size_t i = 0; i < n; i++) {
		if (l && rd_kafka_topic_partition_list_find(l,
				rd_kafka_topic_name(b[i].m->rkt), b[i].m->partition))
			b[k++] = b[i];
		else
			rd_kafka_message_destroy(b[i].m);
	}
	if (l)
		rd_kafka_topic_partition_list_destroy(l);
	return k;
}

/* Retries the held messages that are due; returns ms until the next one. */
static int retry_due(struct cons *c, struct pin_arena *a)
{
	int64_t now = pin_clock_now_us(), next = INT64_MAX;

	for (size_t i = 0; i < c->nheld && !stopping(); ) {
		struct held *h = &c->held[i];
		size_t before = c->nheld;

		if (h->next_us <= now) {
			handle(c, h->m, h);
			pin_arena_reset(a);
			if (c->nheld < before)
				continue;       /* slot i now holds another one */
		}
		if (c->held[i].next_us < next)
			next = c->held[i].next_us;
		i++;
	}
	if (next == INT64_MAX)
		return 200;
	next = (next - pin_clock_now_us()) / 1000;
	return next < 0 ? 0 : next > 200 ? 200 : (int)next;
}

/* A consumer to poll: created (retried every 2 s while the broker is
 * away), and re-created when the bootstrap address moved (dev broker
 * restart).  false: none this round. */
static bool ensure_consumer(struct cons *c, int64_t *next_boot_check)
{
	if (!c->rk && consumer_create(c) != 0) {
		for (int i = 0; i < 20 && !stopping(); i++) {
			struct timespec ts = { 0, 100000000L };

			nanosleep(&ts, NULL);
		}
		return false;
	}
	if (pin_clock_now_us() > *next_boot_check) {
		char *b = pin_kafka_bootstrap();
		bool moved = b && c->boot && strcmp(b, c->boot) != 0;

		*next_boot_check = pin_clock_now_us() + 5000000;
		free(b);
		if (moved) {
			pin_log(PIN_LOG_INFO, "consumer: bootstrap changed, reconnecting",
					"group", c->e->c.group, NULL);
			consumer_destroy(c, true);
			wm_forget(c);
			dlq_destroy(c);
			return false;
		}
	}
	return true;
}

/* A polled message to handle (NULL: none, an error or a held partition's). */
static rd_kafka_message_t *next_message(struct cons *c, int wait)
{
	rd_kafka_message_t *m = rd_kafka_consumer_poll(c->rk, wait);

	if (!m)
		return NULL;
	if (m->err) {
		if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
			pin_log(PIN_LOG_DEBUG, "consumer: poll error", "group", c->e->c.group,
					"error", rd_kafka_message_errstr(m), NULL);
		rd_kafka_message_destroy(m);
		return NULL;
	}
	if (held_find(c, rd_kafka_topic_name(m->rkt), m->partition)) {
		/* fetched before the pause: comes again after the seek */
		rd_kafka_message_destroy(m);
		return NULL;
	}
	return m;
}

static struct lagp *lagp_find(struct cons *c, const char *topic, int32_t part)
{
	for (size_t i = 0; i < c->nlagp; i++)
		if (c->lagp[i].part == part && !strcmp(c->lagp[i].topic, topic))
			return &c->lagp[i];
	return NULL;
}

static struct lagp *lagp_get(struct cons *c, const char *topic, int32_t part)
{
	struct lagp *n;

	for (size_t i = 0; i < c->nlagp; i++)
		if (c->lagp[i].part == part && !strcmp(c->lagp[i].topic, topic))
			return &c->lagp[i];
	n = realloc(c->lagp, (c->nlagp + 1) * sizeof(*n));
	if (!n)
		return NULL;
	c->lagp = n;
	n = &c->lagp[c->nlagp++];
	memset(n, 0, sizeof(*n));
	snprintf(n->topic, sizeof(n->topic), "%s", topic);
	n->part = part;
	n->committed = -2;
	return n;
}

/* The lag sampler of one consumer: its own producer-type handle asks the
 * broker for the high watermarks of the partitions the consumer registered
 * (wm_hi), every consumer_lag_interval_ms, with a 1 s timeout.  The
 * consumer's cached watermarks (rd_kafka_get_watermark_offsets) never move
 * for a paused (held) partition because it is not fetched; asking from the
 * consumer thread hung it in librdkafka 2.0.2 once the broker moved.  Here
 * a misbehaving query only makes the sampler late.  The handle is rebuilt
 * when the bootstrap moves.
 *
 * How late (session 13): librdkafka 2.0.2 waits for the ListOffsets answer
 * without looking at the query's timeout, so a request queued for a broker
 * that went away ends only by socket.timeout.ms (60 s, then retried), and
 * the loop asked every registered partition in turn before it looked at
 * the bootstrap again: after the dev broker moved, a sampler stayed on the
 * dead address for minutes (obs/lag's "lag did not grow: 2 then 2": a held
 * partition is not fetched, so its lag moves only with the sampler).  Its
 * handle now gives a request up after WM_SOCKET_TIMEOUT_MS, and a move
 * (wm_forget) ends the round after the query in flight. */
#define WM_SOCKET_TIMEOUT_MS "3000"

static void *wm_main(void *arg)
{
	struct cons *c = arg;
	rd_kafka_t *rk = NULL;
	char *boot = NULL;
	int64_t next = 0;
	unsigned gen0;

	while (!stopping()) {
		int64_t now = pin_clock_now_us();
		size_t n;

		if (now < next && !__atomic_exchange_n(&c->wm_new, 0, __ATOMIC_ACQ_REL)) {
			struct timespec ts = { 0, 100 * 1000 * 1000 };

			nanosleep(&ts, NULL);
			continue;
		}
		next = now + pin_config_int("consumer_lag_interval_ms") * 1000;
		{
			char *b = pin_kafka_bootstrap();

			if (rk && (!b || !boot || strcmp(b, boot) != 0)) {
				rd_kafka_destroy(rk);
				rk = NULL;
			}
			free(boot);
			boot = b;
		}
		if (!rk) {
			char err[512];
			rd_kafka_conf_t *conf = pin_kafka_conf_new("lag", err, sizeof(err));

			if (!conf)
				continue;
			if (rd_kafka_conf_set(conf, "socket.timeout.ms", WM_SOCKET_TIMEOUT_MS, err,
					sizeof(err)) != RD_KAFKA_CONF_OK)
				pin_log(PIN_LOG_WARN, "consumer lag: socket.timeout.ms not set",
						"error", err, NULL);
			rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err));
			if (!rk) {
				rd_kafka_conf_destroy(conf);
				continue;
			}
		}
		pthread_mutex_lock(&c->wm_mu);
		n = c->nwm;
		gen0 = c->wm_gen;
		pthread_mutex_unlock(&c->wm_mu);
		for (size_t i = 0; i < n && !stopping(); i++) {
			char topic[200];
			int32_t part;
			int64_t lo = 0, hi = -1;
			unsigned gen;

			pthread_mutex_lock(&c->wm_mu);
			memcpy(topic, c->wm[i].topic, sizeof(topic));
			part = c->wm[i].part;
			gen = c->wm_gen;
			pthread_mutex_unlock(&c->wm_mu);
			if (gen != gen0)
				break;      /* the broker moved: the handle first */
			if (rd_kafka_query_watermark_offsets(rk, topic, part, &lo, &hi,
					1000) != RD_KAFKA_RESP_ERR_NO_ERROR)
				continue;   /* broker away: keep the last value */
			pthread_mutex_lock(&c->wm_mu);
			if (gen == c->wm_gen)   /* else asked of the cluster that left */
				c->wm[i].hi = hi;
			pthread_mutex_unlock(&c->wm_mu);
		}
	}
	if (rk)
		rd_kafka_destroy(rk);
	free(boot);
	return NULL;
}

/* The broker moved (a new cluster): the sampled watermarks were the old
 * cluster's, and an answer still in flight from it is dropped (wm_gen).
 * Until the sampler asks the new one, lag_sample uses the consumer's own. */
static void wm_forget(struct cons *c)
{
	if (!c->wm_started)
		return;
	pthread_mutex_lock(&c->wm_mu);
	for (size_t i = 0; i < c->nwm; i++)
		c->wm[i].hi = -1;
	c->wm_gen++;
	pthread_mutex_unlock(&c->wm_mu);
	__atomic_store_n(&c->wm_new, 1, __ATOMIC_RELEASE);
}

/* the sampled high watermark of a partition (-1 if none yet); registers
 * the partition for the sampler */
static int64_t wm_hi(struct cons *c, const char *topic, int32_t part)
{
	int64_t hi = -1;
	struct wmp *n;

	pthread_mutex_lock(&c->wm_mu);
	for (size_t i = 0; i < c->nwm; i++)
		if (c->wm[i].part == part && !strcmp(c->wm[i].topic, topic)) {
			hi = c->wm[i].hi;
			goto out;
		}
	n = realloc(c->wm, (c->nwm + 1) * sizeof(*n));
	if (!n)
		goto out;
	c->wm = n;
	n = &c->wm[c->nwm++];
	memset(n, 0, sizeof(*n));
	snprintf(n->topic, sizeof(n->topic), "%s", topic);
	n->part = part;
	n->hi = -1;
	__atomic_store_n(&c->wm_new, 1, __ATOMIC_RELEASE);
out:
	pthread_mutex_unlock(&c->wm_mu);
	return hi;
}

/* Samples the real lag of the assigned partitions (see the head comment). */
static void lag_sample(struct cons *c)
{
	rd_kafka_topic_partition_list_t *l = NULL;
	int64_t now = pin_clock_now_us();
	double oldest = 0;
	char lab[400];
	int unknown = 0;

	if (now < c->next_lag_us)
		return;
	c->next_lag_us = now + pin_config_int("consumer_lag_interval_ms") * 1000;
	if (rd_kafka_assignment(c->rk, &l) != RD_KAFKA_RESP_ERR_NO_ERROR || !l)
		return;
	if (l->cnt == 0)
		goto out;
	if (rd_kafka_committed(c->rk, l, 1000) != RD_KAFKA_RESP_ERR_NO_ERROR) {
		c->next_lag_us = now + 10000000;   /* broker away: do not block the loop */
		goto out;
	}
	for (int i = 0; i < l->cnt; i++) {
		rd_kafka_topic_partition_t *p = &l->elems[i];
		int64_t lo = 0, hi = 0, lag, com = p->offset;
		struct lagp *s;
		struct held *h;

		/* the cached watermarks (fetch responses): never blocks.
		 * rd_kafka_query_watermark_offsets ignored its timeout in
		 * 2.0.2 when the broker went away for good (dev broker moved)
		 * and hung the consumer thread */
		int64_t q = c->wm_started ? wm_hi(c, p->topic, p->partition) : -1;

		if (rd_kafka_get_watermark_offsets(c->rk, p->topic, p->partition,
				&lo, &hi) != RD_KAFKA_RESP_ERR_NO_ERROR)
			lo = hi = -1;
		if (q > hi)
			hi = q;     /* the sampler's: a held partition is not fetched */
		if (hi < 0) {
			/* no watermark for this partition yet (not fetched, not yet
			 * answered to the sampler): keep its last value.  Until
			 * session 12 this ended the whole sample and waited 10 s,
			 * so one such partition froze the lag of every other one
			 * for 10 s -- as long as obs/lag's wait, a candidate cause
			 * of its rare "lag did not grow: 2 then 2" under ASan */
			unknown++;
			continue;
		}
		if (com < 0)
			com = lo < 0 ? 0 : lo;
		lag = hi > com ? hi - com : 0;
		snprintf(lab, sizeof(lab), "%s,topic=\"%s\",partition=\"%d\"", c->labels,
				p->topic, (int)p->partition);
		pin_metric_set("pin_consumer_lag_messages", lab, (double)lag);
		if (!(s = lagp_get(c, p->topic, p->partition)))
			continue;
		if (lag == 0 || s->committed != com || !s->since_us)
			s->since_us = now;
		s->committed = com;
		h = held_find(c, p->topic, p->partition);
		if (h) {
			rd_kafka_timestamp_type_t tt;
			int64_t ts = rd_kafka_message_timestamp(h->m, &tt);

			if (ts > 0 && (double)(now / 1000 - ts) / 1e3 > oldest)
				oldest = (double)(now / 1000 - ts) / 1e3;
		}
		if (lag > 0 && (double)(now - s->since_us) / 1e6 > oldest)
			oldest = (double)(now - s->since_us) / 1e6;
	}
	if (unknown == l->cnt) {
		/* no partition has a watermark: the broker is away; keep the
		 * last values, try in 10 s */
		c->next_lag_us = now + 10000000;
		goto out;
	}
	pin_metric_set("pin_consumer_oldest_unprocessed_age_seconds", c->labels, oldest);
out:
	rd_kafka_topic_partition_list_destroy(l);
}

static void *cons_main(void *arg)
{
	struct cons *c = arg;
	struct pin_arena *a = pin_arena_new();
	int64_t next_boot_check = 0;
	long long bmax = pin_config_int("consumer_batch_max");
	struct bitem *b;

	if (bmax < 1)
		bmax = 1;
	if (bmax > 10000)
		bmax = 10000;
	if (c->e->c.batch_max > 0 && bmax > c->e->c.batch_max)
		bmax = c->e->c.batch_max;   /* [consume] the consumer's own cap (1.4) */
	c->sp_max = (size_t)bmax;
	if (c->e->c.batch_fn && bmax > 1) {
		/* [consume] no savepoint per message on the set path: larger */
		long long smax = pin_config_int("consumer_batch_set_max");

		if (smax > 10000)
			smax = 10000;
		/* [crm] batch_max caps the savepoint batches only (its reason,
		 * the subxid cache, does not apply to a set batch) */
		if (smax > bmax)
			bmax = smax;
	}
	b = calloc((size_t)bmax, sizeof(*b));
	pin_arena_set_current(a);
	while (!stopping()) {
		rd_kafka_message_t *m;
		size_t n = 1;
		unsigned gen;

		if (!ensure_consumer(c, &next_boot_check))
			continue;
		commit_retry(c);
		lag_sample(c);
		m = next_message(c, retry_due(c, a));
		if (!m)
			continue;
		if (!b) {
			handle(c, m, NULL);
			pin_arena_reset(a);
			continue;
		}
		/* the batch: what is already fetched, without waiting (only
		 * the items used are cleared: a set batch's array is large) */
		memset(b, 0, sizeof(*b));
		b[0].m = m;
		gen = c->rebal;
		while (n < (size_t)bmax && (m = next_message(c, 0))) {
			memset(&b[n], 0, sizeof(*b));
			b[n++].m = m;
		}
		if (c->rebal != gen)
			n = batch_keep_assigned(c, b, n);
		if (n == 1)         /* nothing else fetched: no savepoint round trips */
			handle(c, b[0].m, NULL);
		else if (n)
			handle_batch(c, b, n);
		pin_arena_reset(a);
	}
	free(b);
	consumer_destroy(c, false);
	dlq_destroy(c);
	free(c->held);
	c->held = NULL;
	free(c->lagp);
	c->lagp = NULL;
	c->nlagp = 0;
	c->nheld = c->capheld = 0;
	pin_arena_reset(a);
	pin_arena_set_current(NULL);
	pin_arena_free(a);
	pin_db_close_thread();
	return NULL;
}

/* inbox table names come from plugins: allow [a-z0-9_.] only */
static bool table_name_ok(const char *s)
{
	if (!s || !*s || strlen(s) > 128)
		return false;
	for (; *s; s++)
		if (!(islower((unsigned char)*s) || isdigit((unsigned char)*s) ||
				*s == '_' || *s == '.'))
			return false;
	return true;
}

int pin_consumers_start(void)
{
	if (cs || pin_reg.nconsumers == 0)
		return 0;
	__atomic_store_n(&cons_stop_flag, 0, __ATOMIC_RELEASE);
	cs = calloc(pin_reg.nconsumers, sizeof(*cs));
	if (!cs)
		return -1;
	ncs = pin_reg.nconsumers;
	for (size_t i = 0; i < ncs; i++) {
		struct cons *c = &cs[i];
		const char *inbox;

		c->e = &pin_reg.consumers[i];
		c->commit_async = pin_config_bool("consumer_commit_async");
		inbox = c->e->c.inbox_table ? c->e->c.inbox_table : "calendar.inbox";
		if (!table_name_ok(inbox)) {
			pin_log(PIN_LOG_ERROR, "consumer: invalid inbox table name",
					"group", c->e->c.group, NULL);
			pin_consumers_stop();
			return -1;
		}
		snprintf(c->dlq_topic, sizeof(c->dlq_topic), "%s.dlq", c->e->c.group);
		snprintf(c->labels, sizeof(c->labels), "group=\"%s\"", c->e->c.group);
		/* 0 from the start: increase() sees the first dead letter */
		pin_metric_add("pin_dlq_total", c->labels, 0);
		pin_metric_add("pin_consumer_processed_total", c->labels, 0);
		pin_metric_add("pin_consumer_retries_total", c->labels, 0);
		pin_metric_add("pin_consumer_offset_commit_failures_total", c->labels, 0);
		pin_metric_set("pin_consumer_partitions_assigned", c->labels, 0);
		/* [consume] the histogram before the first message */
		pin_metric_hist_declare("pin_consumer_consume_duration_seconds", c->labels);
		if (c->e->c.batch_fn)
			pin_metric_add("pin_consumer_batch_fallbacks_total", c->labels, 0);
		snprintf(c->inbox_sql, sizeof(c->inbox_sql),
				"INSERT INTO %s (consumer_group, message_id, processed_at)"
				" VALUES ($1, $2::uuid, $3::timestamptz) ON CONFLICT DO NOTHING",
				inbox);
		snprintf(c->claim_sql, sizeof(c->claim_sql),
				"INSERT INTO %s (consumer_group, message_id, processed_at)"
				" SELECT $1, m, $3::timestamptz FROM unnest($2::uuid[]) AS m"
				" ON CONFLICT DO NOTHING RETURNING message_id", inbox);
		snprintf(c->unclaim_sql, sizeof(c->unclaim_sql),
				"DELETE FROM %s WHERE consumer_group = $1"
				" AND message_id = ANY ($2::uuid[])", inbox);
		if (pthread_mutex_init(&c->wm_mu, NULL) == 0) {
			if (pthread_create(&c->wm_thr, NULL, wm_main, c) == 0)
				c->wm_started = true;
			else
				pthread_mutex_destroy(&c->wm_mu);
		}
		if (pthread_create(&c->thr, NULL, cons_main, c) != 0) {
			pin_log(PIN_LOG_ERROR, "cannot start a consumer thread",
					"group", c->e->c.group, NULL);
			pin_consumers_stop();
			return -1;
		}
		c->started = true;
	}
	return 0;
}

void pin_consumers_stop(void)
{
	if (!cs)
		return;
	__atomic_store_n(&cons_stop_flag, 1, __ATOMIC_RELEASE);
	for (size_t i = 0; i < ncs; i++) {
		struct cons *c = &cs[i];

		if (c->started)
			pthread_join(c->thr, NULL);
		if (c->wm_started) {
			/* the stop flag is set; each query is bounded by its 1 s
			 * timeout, and the sampler's handle is destroyed last */
			pthread_join(c->wm_thr, NULL);
			pthread_mutex_destroy(&c->wm_mu);
		}
		free(c->wm);
	}
	free(cs);
	cs = NULL;
	ncs = 0;
	pin_log(PIN_LOG_INFO, "consumers stopped", NULL);
}
