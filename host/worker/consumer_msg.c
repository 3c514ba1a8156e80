/*
 * consumer_msg.c -- the per-message path of a consumer (consumer.c): one
 * message in one transaction, for held messages and for the messages of a
 * batch that falls back (consumer_batch.c).
 *
 * Per message:
 *   - envelope parsed (envelope.c); bytes that are not strict UTF-8
 *     (utf8.c), invalid JSON, no messageId (uuid) or no payload object ->
 *     DLQ at once (INVALID_ENVELOPE); U+0000 in any string -> DLQ at once
 *     (INVALID_PAYLOAD);
 *   - contractVersion != 1 -> pin_consumer_contract_version_mismatch_total
 *     (and a warning once per version), processing goes on;
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
 *     RETRY after a statement failed with a data exception (SQLSTATE
 *     classes 22, 54) or an integrity violation (class 23 except
 *     23505/23P01, which handlers expect) -> ROLLBACK, DLQ at once with code
 *     DATA_EXCEPTION_<state> / INTEGRITY_VIOLATION_<state> (db.c classes);
 *     RETRY after any other SQLSTATE (the database's state or capacity: 08,
 *     53, 57, 58, 25006, 40001, ...; or our SQL / schema: 42) -> retried
 *     like an outage (cons_classify_state);
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
 * Before it, the dead letter is recorded in <schema>.dead_letters
 * (dead_letters.c; idempotent per group, topic, partition and offset) for
 * pin_dlq_pending{group} and pin-host --dlq.
 */
#include "config.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

#include "consumer.h"

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

void cons_dlq_destroy(struct cons *c)
{
	if (c->dlq) {
		rd_kafka_purge(c->dlq, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		rd_kafka_poll(c->dlq, 0);
		rd_kafka_destroy(c->dlq);
		c->dlq = NULL;
	}
}

/* Writes m to <group>.dlq and waits for the ack.  0 ok, -1 failed. */
int cons_dlq_send(struct cons *c, const rd_kafka_message_t *m,
		const char *code, const char *detail)
{
	char part[16], off[24];
	volatile int st = 0;
	rd_kafka_resp_err_t e;
	const char *topic = rd_kafka_topic_name(m->rkt);

	if (cons_dead_letter_record(c, m, code, detail) != 0)
		return -1;
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
		cons_dlq_destroy(c);
		return -1;
	}
	rd_kafka_flush(c->dlq, 12000);
	if (st != 1) {
		pin_log(PIN_LOG_ERROR, "consumer: DLQ delivery failed", "group", c->e->c.group,
				"dlq", c->dlq_topic, NULL);
		cons_dlq_destroy(c);     /* recreated (bootstrap re-read) next time */
		return -1;
	}
	pin_metric_add("pin_dlq_total", c->labels, 1);
	cons_dead_letters_sample(c, true);
	if (c->e->c.dlq_metric)     /* the seed's name (1.8): every DLQ route */
		pin_metric_add(c->e->c.dlq_metric, NULL, 1);
	return 0;
}

void cons_log_failure(struct cons *c, const rd_kafka_message_t *m,
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

/* Seeds 001 and 004 "Logs": skipped-duplicate -- a message whose inbox row
 * exists already (handled before: acknowledged, nothing done).  Ids only. */
void cons_log_duplicate(struct cons *c, const struct pin_msg *msg)
{
	pin_log(PIN_LOG_INFO, "consumer: skipped-duplicate", "group", c->e->c.group,
			"topic", msg->topic, "messageId", msg->message_id,
			"eventType", msg->event_type, NULL);
}

/* decode: key and value copied into the arena, NUL-terminated */
void cons_msg_init(struct pin_msg *msg, const rd_kafka_message_t *m)
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
const char *cons_header_traceparent(const rd_kafka_message_t *m)
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
void cons_msg_trace(const struct pin_msg *msg, const char *tp)
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

/* true when the consumer has not warned about version v yet (and now
 * remembers it); a full table answers true: a warning too many rather than
 * a version unseen */
static bool version_first(struct cons *c, int v)
{
	for (size_t i = 0; i < c->ncv_seen; i++)
		if (c->cv_seen[i] == v)
			return false;
	if (c->ncv_seen < CONS_CV_SEEN_MAX)
		c->cv_seen[c->ncv_seen++] = v;
	return true;
}

/* A valid envelope: the contract-version check, the only one (seeds 001,
 * 002, 004: warn-and-proceed).  A message of another version than 1 is
 * handled anyway; each counts in
 * pin_consumer_contract_version_mismatch_total{group}, and the WARN line
 * (group, topic, messageId, contractVersion) is written once per version
 * and consumer group for the life of the process. */
void cons_note_version(struct cons *c, const struct pin_msg *msg)
{
	if (msg->contract_version != 1) {
		char cv[16];

		snprintf(cv, sizeof(cv), "%d", msg->contract_version);
		if (version_first(c, msg->contract_version))
			pin_log(PIN_LOG_WARN, "consumer: unexpected contractVersion, processing anyway",
					"group", c->e->c.group, "topic", msg->topic,
					"messageId", msg->message_id, "contractVersion", cv, NULL);
		pin_metric_add("pin_consumer_contract_version_mismatch_total", c->labels, 1);
		if (c->e->c.version_metric)     /* the seed's name (1.8) */
			pin_metric_add(c->e->c.version_metric, NULL, 1);
	}
}

/* a valid envelope: the version warning and the trace id (the W3C
 * traceparent header when the message has one, else correlationId, else
 * messageId) */
void cons_note_envelope(struct cons *c, const struct pin_msg *msg,
		const char *tp)
{
	cons_note_version(c, msg);
	cons_msg_trace(msg, tp);
}

/*
 * What a handler failure means (issue 30; the table of doc/operating.md
 * "What a consumer does with a database error"), from the status, whether
 * the database link is up and the SQLSTATE of the statement that failed:
 *   the link is gone, or a transient
 *   SQLSTATE (the database's state or
 *   capacity: 08 53 57 58 XX 25006 40001
 *   40P01 55P03 ...)                     -> A_RETRY_INFRA: backoff without a
 *                                          deadline, never the DLQ (a FATAL
 *                                          only when the link is gone);
 *   handler RETRY after a data (22, 54)
 *   or integrity (23 except 23505 and
 *   23P01, 40002, 44000) SQLSTATE        -> A_DLQ at once: the same bytes
 *                                          fail every time;
 *   handler RETRY after any other
 *   SQLSTATE (42 our SQL or schema, a
 *   missing grant, P0 ...)               -> A_RETRY_INFRA: not the message's
 *                                          fault; the partition waits for
 *                                          the fix (lag alerts fire);
 *   handler RETRY, no SQLSTATE or
 *   23505 / 23P01 (a race)               -> A_RETRY with its deadline;
 *   handler FATAL (contract violation)   -> A_DLQ with its code.
 */
enum attempt cons_classify_state(enum pin_consume_status st, bool db_up,
		const char *state)
{
	enum pin_db_class k = pin_db_classify(state);

	if (!db_up)
		return A_RETRY_INFRA;
	if (st != PIN_CONSUME_RETRY)
		return A_DLQ;
	switch (k) {
	case PIN_DBC_TRANSIENT:
	case PIN_DBC_PERMANENT:
		return A_RETRY_INFRA;
	case PIN_DBC_DATA:
	case PIN_DBC_INTEGRITY:
		return A_DLQ;
	default:
		return A_RETRY;
	}
}

enum attempt cons_classify(enum pin_consume_status st,
		const struct pin_consume_result *res, struct verdict *v)
{
	const char *state = pin_db_last_error();
	enum pin_db_class k = pin_db_classify(state);
	bool up = pin_db_conn() && strncmp(state, "08", 2) != 0;
	enum attempt a = cons_classify_state(st, up, state);

	snprintf(v->code, sizeof(v->code), "%s", res->code[0] ? res->code :
			st == PIN_CONSUME_RETRY ? "RETRIABLE" : "NON_RETRIABLE");
	snprintf(v->detail, sizeof(v->detail), "%s", res->detail);
	if (a == A_RETRY_INFRA && up && *state)
		snprintf(v->detail, sizeof(v->detail), "SQLSTATE %.5s (retried until"
				" it clears)%s%.200s", state, res->detail[0] ? ": " : "",
				res->detail);
	if (a == A_DLQ && st == PIN_CONSUME_RETRY) {
		snprintf(v->code, sizeof(v->code), "%s_%s", k == PIN_DBC_DATA ?
				"DATA_EXCEPTION" : "INTEGRITY_VIOLATION", state);
		snprintf(v->detail, sizeof(v->detail), "SQLSTATE %.5s is not retriable%s%.200s",
				state, res->detail[0] ? ": " : "", res->detail);
	}
	if (a == A_RETRY)
		v->deadline_s = res->retry_deadline_s;
	return a;
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
		cons_log_duplicate(c, msg);
		return A_DONE;
	}
	memset(&res, 0, sizeof(res));
	pin_db_error_reset();
	st = c->e->c.fn(msg, &res, c->e->c.ud);
	res.code[sizeof(res.code) - 1] = '\0';
	res.detail[sizeof(res.detail) - 1] = '\0';
	if (st != PIN_CONSUME_OK) {
		pin_db_rollback();
		return cons_classify(st, &res, v);
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
	cons_msg_init(&msg, m);
	if (pin_envelope_parse(msg.value, msg.value_len, &msg, &env, v->code,
			sizeof(v->code), v->detail, sizeof(v->detail)) != 0) {
		what = "consumer: invalid envelope";
		out = A_DLQ;
	} else {
		double t0 = pin_metrics_mono_s();

		snprintf(v->mid, sizeof(v->mid), "%s", msg.message_id);
		cons_note_envelope(c, &msg, cons_header_traceparent(m));
		out = run_handler(c, &msg, v);
		pin_metric_observe("pin_consumer_consume_duration_seconds", c->labels,
				pin_metrics_mono_s() - t0);
	}
	if (out == A_DLQ) {
		cons_log_failure(c, m, msg.message_id, what, v->code, v->detail);
		out = cons_dlq_send(c, m, v->code, v->detail) == 0 ? A_DONE : A_RETRY_INFRA;
	}
	if (pin_db_in_tx())
		pin_db_rollback();
	json_object_put(env);
	return out;         /* the trace stays for cons_handle()'s log lines */
}

static void commit_offset(struct cons *c, const rd_kafka_message_t *m)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);

	rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(m->rkt),
			m->partition)->offset = m->offset + 1;
	cons_commit_offsets(c, l);
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
	cons_held_remove(c, h);      /* destroys m */
	cons_part_list_op(c, topic, part, next, 2);
	cons_part_list_op(c, topic, part, RD_KAFKA_OFFSET_INVALID, 1);
}

/* m failed retriably: pause its partition (first time) and schedule the next
 * attempt with backoff.  Takes ownership of m. */
void cons_hold(struct cons *c, rd_kafka_message_t *m, struct held *h,
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
		cons_part_list_op(c, rd_kafka_topic_name(m->rkt), m->partition,
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
		cons_log_failure(c, m, v->mid, a == A_RETRY ?
				"consumer: retriable failure, partition paused" :
				"consumer: infrastructure failure, partition paused",
				v->code, v->detail);
}

/*
 * Handles m (fresh from poll, or held).  h is the held slot when m is held.
 * Takes ownership of m.
 */
void cons_handle(struct cons *c, rd_kafka_message_t *m, struct held *h)
{
	struct verdict v;
	enum attempt a;
	int64_t now;

	a = attempt(c, m, &v);
	now = pin_clock_now_us();
	if (a == A_RETRY && h && h->deadline_us && now >= h->deadline_us) {
		/* out of time: DLQ with the last code */
		cons_log_failure(c, m, v.mid, "consumer: retry deadline passed, to DLQ",
				v.code, v.detail);
		a = cons_dlq_send(c, m, v.code, v.detail) == 0 ? A_DONE : A_RETRY_INFRA;
	}
	if (a == A_DONE)
		finish(c, m, h);
	else
		cons_hold(c, m, h, a, &v, now);
	pin_trace_set(NULL);
}
