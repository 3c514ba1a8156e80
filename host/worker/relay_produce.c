/*
 * relay_produce.c -- the outbox relay's producer (relay.c): its life, the
 * rows handed to it, its delivery reports, and what a failure does.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

#include "relay.h"

void relay_set_kafka_up(struct relay *r, int up)
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
	if (!row || row->st != DR_PENDING)
		return;
	row->err = m->err;
	row->st = m->err ? DR_FAILED : DR_OK;
	if (--row->b->pending == 0)
		row->b->reported_us = pin_clock_mono_us();
}


static void relay_fail_pending(struct relay *r);

/* Destroys the producer; after rd_kafka_destroy no delivery report comes,
 * so the rows still pending in every batch become DR_FAILED. */
void relay_producer_destroy(struct relay *r)
{
	if (r->rk) {
		rd_kafka_purge(r->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_poll(r->rk, 0);
		rd_kafka_destroy(r->rk);
		r->rk = NULL;
	}
	relay_fail_pending(r);
	free(r->boot);
	r->boot = NULL;
}

int relay_producer_create(struct relay *r)
{
	char err[512], tmo[32], linger[32];
	rd_kafka_conf_t *conf;

	conf = pin_kafka_conf_new("relay", err, sizeof(err));
	if (!conf)
		goto fail;
	snprintf(tmo, sizeof(tmo), "%lld", pin_config_int("kafka_message_timeout_ms"));
	snprintf(linger, sizeof(linger), "%lld", pin_config_int("kafka_linger_ms"));
	if (pin_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "acks", "all", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "linger.ms", linger, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "message.timeout.ms", tmo, err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "queue.buffering.max.messages", "1000000", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "queue.buffering.max.kbytes", "1048576", err, sizeof(err)) ||
			pin_kafka_conf_set(conf, "batch.num.messages", "10000", err, sizeof(err))) {
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
	relay_set_kafka_up(r, 0);
	return -1;
}

/* True when there is a bootstrap address and it differs from the
 * producer's (a missing file is no news: the broker is down). */
bool relay_bootstrap_changed(struct relay *r)
{
	char *now = pin_kafka_bootstrap();
	bool changed = now && (!r->boot || strcmp(now, r->boot) != 0);

	free(now);
	return changed;
}

/* True when a bootstrap address can be read (the file exists again). */
bool relay_bootstrap_known(void)
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
	bool changed = relay_bootstrap_changed(r);

	if (!r->rk)
		return;             /* created on the next batch */
	if (!force && !changed && r->consecutive_failures % 5 != 0)
		return;
	pin_log(PIN_LOG_INFO, "outbox relay: recreating the kafka producer",
			"reason", changed ? "bootstrap changed" :
			force ? "fatal error" : "repeated failures", NULL);
	relay_producer_destroy(r);
}

/* Every batch of every unit: rows still pending become DR_FAILED (the
 * producer is gone, no report will come). */
static void relay_fail_pending(struct relay *r)
{
	for (int u = 0; u < r->nunits; u++)
		for (int k = 0; k < r->units[u].nwin; k++) {
			struct relay_batch *b = r->units[u].win[k];

			for (int i = 0; i < b->produced; i++)
				if (b->rows[i].st == DR_PENDING) {
					b->rows[i].st = DR_FAILED;
					b->rows[i].err = RD_KAFKA_RESP_ERR__TIMED_OUT;
				}
			b->pending = 0;
		}
}

/*
 * Errors that no retry can cure for this row: the row is parked (see the
 * head comment) and the rows behind it go on.  Returns the metric's reason
 * label, or NULL for an error worth retrying.  An unknown topic is parked
 * only after relay_park_unknown_topic_attempts tries: a restarted broker
 * may not know a topic for a moment.
 */
const char *relay_park_reason(rd_kafka_resp_err_t e, int attempts)
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
		if (attempts + 1 >= pin_config_int("relay_park_unknown_topic_attempts"))
			return "unknown_topic";
		return NULL;
	default:
		return NULL;
	}
}

/* One row to the producer (not copied: the batch's PGresult lives until
 * its last delivery report or the producer's end), with its traceparent as a Kafka header
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
	vu[n++].u.i = 0;
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

/* 2. Hands the rows to the producer.  A row refused for good is parked
 *    and skipped; a row refused for now stops the batch (later rows must
 *    not overtake it). */
void relay_batch_produce(struct relay *r, struct relay_batch *b)
{
	b->produced = 0;
	for (int i = 0; i < b->n; i++) {
		struct relay_row *row = &b->rows[i];
		const char *key = PQgetisnull(b->res, i, 2) ? NULL : PQgetvalue(b->res, i, 2);
		rd_kafka_resp_err_t e;

		e = produce_row(r, row->topic, key, PQgetvalue(b->res, i, 3), row);
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
			rd_kafka_poll(r->rk, 100);
			i--;
			continue;
		}
		b->produced = i + 1;
		if (!e) {
			b->pending++;
			continue;
		}
		row->err = e;
		if ((row->reason = relay_park_reason(e, row->attempts))) {
			row->st = DR_PARKED;
			continue;
		}
		row->st = DR_FAILED;
		break;
	}
	b->deadline_us = pin_clock_now_us() +
		(pin_config_int("kafka_message_timeout_ms") + 2000) * 1000;
	b->produced_us = b->reported_us = pin_clock_mono_us();
}

void relay_on_failure(struct relay *r)
{
	int max = (int)pin_config_int("relay_backoff_max_ms");

	r->consecutive_failures++;
	r->backoff_ms = r->backoff_ms ? r->backoff_ms * 2 : 1000;
	if (r->backoff_ms > max)
		r->backoff_ms = max;
	if (relay_bootstrap_changed(r))     /* new address: retry soon */
		r->backoff_ms = 1000;
	producer_maybe_recreate(r, false);
	if (r->rk && rd_kafka_fatal_error(r->rk, NULL, 0))
		producer_maybe_recreate(r, true);
	r->pause_until_us = pin_clock_now_us() + (int64_t)r->backoff_ms * 1000;
}

/* batches in flight over every unit */
int relay_inflight(struct relay *r)
{
	int n = 0;

	for (int i = 0; i < r->nunits; i++)
		n += r->units[i].nwin;
	return n;
}

/*
 * Serves delivery reports for up to wait_ms and gives up on the batches in
 * flight (the producer is recreated) when one is past its deadline or the
 * broker moved (dev broker restart).
 */
void relay_poll(struct relay *r, int wait_ms)
{
	int64_t now;
	bool give_up = false;

	if (!r->rk)
		return;
	rd_kafka_poll(r->rk, wait_ms);
	now = pin_clock_now_us();
	for (int i = 0; i < r->nunits && !give_up; i++)
		for (int k = 0; k < r->units[i].nwin && !give_up; k++)
			give_up = r->units[i].win[k]->pending &&
				now > r->units[i].win[k]->deadline_us;
	if (!give_up && now > r->next_boot_check && relay_inflight(r)) {
		r->next_boot_check = now + 1000000;
		give_up = relay_bootstrap_changed(r);
	}
	if (give_up) {
		/* undelivered rows stay unpublished */
		pin_log(PIN_LOG_WARN, "outbox relay: delivery reports overdue, recreating"
				" the kafka producer", NULL);
		relay_producer_destroy(r);
	}
}
