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
 * the messages of a batch that falls back, take the per-message path.
 *
 * The files, each calling only those below it: consumer_group.c the group
 * -- threads, the KafkaConsumer, rebalances, the poll loop, start and stop;
 * consumer_batch.c the batches; consumer_msg.c the per-message path
 * (envelope, inbox dedup, handler, retry / DLQ decision, the DLQ producer);
 * consumer_lag.c the real lag and its sampler thread; consumer.c (this one)
 * a consumer's partitions -- the stop flag, pause / resume / seek, held
 * messages, offset commits; consumer.h the types and functions they share.
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
 * pin_consumer_contract_version_mismatch_total, pin_dlq_total (and the
 * seed's counter the registration names, pin_consumer.dlq_metric, ABI 1.8:
 * cons_dlq_send), pin_consumer_lag_seconds (gauge: now - createdAt of
 * the last message handled: a delivery delay, not the lag -- it stays put
 * while the consumer stalls), pin_consumer_paused_partitions (gauge),
 * pin_consumer_consume_duration_seconds (histogram: one message, handler and
 * inbox transaction; a set-based batch observes each message's share of
 * the call; declared with zero buckets at start),
 * pin_consumer_partitions_assigned (gauge: partitions held after the last
 * rebalance), pin_consumer_rebalancing (gauge: 1 from the start and from a
 * revoke until the next assignment), pin_consumer_batch_fallbacks_total (consumers with a batch
 * handler: batches it gave back to the per-message path),
 * pin_consumer_batches_total (messages taken from the consumer together and
 * handled as one; processed / batches is the messages a batch),
 * pin_consumer_offset_commit_failures_total (offset commits that failed;
 * their offsets are committed again while the partition stays assigned).
 *
 * The real lag (pin_consumer_lag_messages,
 * pin_consumer_oldest_unprocessed_age_seconds, and the seed's gauge the
 * registration names, pin_consumer.lag_metric, ABI 1.8): consumer_lag.c.
 */
#include "config.h"
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

#include "consumer.h"

volatile int cons_stop_flag;

bool cons_stopping(void)
{
	return __atomic_load_n(&cons_stop_flag, __ATOMIC_ACQUIRE) || pin_stopping;
}

void cons_part_list_op(struct cons *c, const char *topic, int32_t part,
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

struct held *cons_held_find(struct cons *c, const char *topic, int32_t part)
{
	for (size_t i = 0; i < c->nheld; i++)
		if (c->held[i].m->partition == part &&
				!strcmp(rd_kafka_topic_name(c->held[i].m->rkt), topic))
			return &c->held[i];
	return NULL;
}

void cons_held_remove(struct cons *c, struct held *h)
{
	rd_kafka_message_destroy(h->m);
	*h = c->held[--c->nheld];
	pin_metric_set("pin_consumer_paused_partitions", c->labels, (double)c->nheld);
}

/* Drops every held message (rebalance, shutdown); resumes if asked. */
void cons_held_drop_all(struct cons *c, bool resume)
{
	while (c->nheld) {
		struct held *h = &c->held[c->nheld - 1];

		if (resume)
			cons_part_list_op(c, rd_kafka_topic_name(h->m->rkt), h->m->partition,
					RD_KAFKA_OFFSET_INVALID, 1);
		cons_held_remove(c, h);
	}
}

/* pin_consumer_partitions_assigned{group}: the partitions this host holds
 * after a rebalance (./dev status, the scale suite) */
void cons_assigned_gauge(struct cons *c, rd_kafka_t *rk)
{
	rd_kafka_topic_partition_list_t *l = NULL;

	if (rd_kafka_assignment(rk, &l) != RD_KAFKA_RESP_ERR_NO_ERROR || !l)
		return;
	pin_metric_set("pin_consumer_partitions_assigned", c->labels, (double)l->cnt);
	rd_kafka_topic_partition_list_destroy(l);
}

/* Offset commits.  The highest offset asked for is kept per partition
 * (c->commits; its .err marks a partition whose last commit failed).  A
 * failure -- at once, or for an asynchronous commit later in
 * offset_commit_cb -- marks the partitions, and cons_commit_retry() commits their
 * highest offset again, at most once a second, while they stay assigned.
 * The offsets asked for only grow within an assignment, so a retry never
 * moves the group's offset back, also when an older commit's failure is
 * reported after a newer one succeeded; a revoked partition is forgotten
 * (commits_revoke: its new owner redelivers from the committed offset, the
 * inbox dedupes).  Without the retry a consumer that had caught up showed
 * lag (high watermark - committed) until the partition's next message, and a
 * restart redelivered what it had done. */
void cons_commit_failed(struct cons *c, const rd_kafka_topic_partition_list_t *offs,
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
rd_kafka_resp_err_t cons_commit_error(rd_kafka_resp_err_t err,
		const rd_kafka_topic_partition_list_t *offs)
{
	for (int i = 0; !err && offs && i < offs->cnt; i++)
		err = offs->elems[i].err;
	return err;
}

void cons_commit_offsets(struct cons *c, const rd_kafka_topic_partition_list_t *offs)
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
		e = cons_commit_error(e, l);
	if (e)
		cons_commit_failed(c, l, e);
	rd_kafka_topic_partition_list_destroy(l);
}

/* the marked partitions still assigned: their highest offset again */
void cons_commit_retry(struct cons *c)
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
		cons_commit_offsets(c, todo);
	rd_kafka_topic_partition_list_destroy(todo);
}

/* revoked partitions: no longer ours to commit */
void cons_commits_revoke(struct cons *c, const rd_kafka_topic_partition_list_t *parts)
{
	for (int i = 0; c->commits && i < parts->cnt; i++)
		rd_kafka_topic_partition_list_del(c->commits, parts->elems[i].topic,
				parts->elems[i].partition);
}
