/*
 * consumer_batch.c -- the batches of a consumer (consumer.c): fresh
 * messages applied together, in one transaction.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <librdkafka/rdkafka.h>

#include "consumer.h"

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
 * back and hands its messages one by one to cons_handle(), the classic path
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
	cons_note_envelope(c, &it->msg, cons_header_traceparent(it->m));
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
	it->a = cons_classify(st, &res, &it->v);
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
		if (it->dup)
			cons_log_duplicate(c, &it->msg);
		if (it->valid && it->a != A_DONE)    /* its log lines carry its trace */
			cons_msg_trace(&it->msg, cons_header_traceparent(it->m));
		if (it->a == A_DLQ) {
			cons_log_failure(c, it->m, it->valid ? it->msg.message_id : NULL,
					it->what, it->v.code, it->v.detail);
			it->a = cons_dlq_send(c, it->m, it->v.code, it->v.detail) == 0 ?
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
			cons_hold(c, it->m, NULL, it->a, &it->v, now);   /* takes it->m */
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
		cons_commit_offsets(c, offs);
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
		cons_note_version(c, &it->msg);  /* duplicates count too */
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
 * the set path gave up (see batch_set), -1 fall back to cons_handle(). */
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
			cons_note_envelope(c, &it->msg, NULL);
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
void cons_handle_batch(struct cons *c, struct bitem *b, size_t n)
{
	size_t i;
	int rc;

	for (i = 0; i < n; i++) {
		struct bitem *it = &b[i];

		cons_msg_init(&it->msg, it->m);
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
		if (cons_held_find(c, rd_kafka_topic_name(b[i].m->rkt), b[i].m->partition))
			rd_kafka_message_destroy(b[i].m);
		else
			cons_handle(c, b[i].m, NULL);
	}
out:
	for (i = 0; i < n; i++)
		json_object_put(b[i].env);
}

/* Drops the messages of partitions no longer assigned (a rebalance while
 * the batch was collected).  Returns the new count. */
size_t cons_batch_keep_assigned(struct cons *c, struct bitem *b, size_t n)
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
