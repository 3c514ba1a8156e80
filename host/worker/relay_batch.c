/*
 * relay_batch.c -- the outbox relay's batches (relay.c): read a shard's
 * unpublished rows, and mark them once every delivery report is in.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <librdkafka/rdkafka.h>

#include "relay.h"

void relay_batch_free(struct relay_batch *b)
{
	if (!b)
		return;
	pin_arena_free(b->a);
	free(b);
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

/* 1. Reads up to relay_batch unpublished rows of the unit's shard after its
 *    cursor, in id order, into a new batch (its own arena), and checks that
 *    the session -- and so the lock -- is the one the read ran on.  NULL:
 *    failed or no longer leader. */
static struct relay_batch *batch_read(struct relay *r, struct relay_unit *u)
{
	struct pin_arena *prev = pin_arena_current();
	struct relay_batch *b = calloc(1, sizeof(*b));
	char lim[16], sh[16], *sql = pin_arena_alloc(400), *stmt = pin_arena_alloc(160);
	const char *p[3] = { lim, u->cursor, sh };
	PGconn *c;
	PGresult *res;

	if (!b || !(b->a = pin_arena_new())) {
		free(b);
		return NULL;
	}
	snprintf(lim, sizeof(lim), "%d", r->batch);
	snprintf(sh, sizeof(sh), "%d", u->shard);
	pin_arena_set_current(b->a);
	if (u->cur) {
		const char *cp[4] = { lim, u->rx, u->rid, sh };

		/* the commit-ordered cursor: the delivered position written
		 * (never backwards) when it moved, then the next rows read.  Two
		 * statements: a SELECT under a data-modifying WITH is run to the
		 * end into a tuplestore before its first row is sent -- a
		 * megabyte of envelopes a batch, in memory faulted in afresh each
		 * time (doc/performance.md "The relay's commit-ordered cursor").
		 * A row already marked published (by a host that marked beside
		 * this one before it went over) is passed, not sent again. */
		sql = pin_arena_alloc(700);
		snprintf(sql, 700, "SELECT o.id, o.topic, o.key, o.envelope::text, o.attempts,"
				" o.traceparent, o.message_id, o.xid::text AS x FROM %s o"
				" WHERE (hashtext(o.key) & 2147483647) %% %d = $4::int"
				" AND (o.xid, o.id) > ($2::xid8, $3::bigint)"
				" AND o.xid < pg_snapshot_xmin(pg_current_snapshot()) AND o.parked_at IS NULL"
				" AND o.published_at IS NULL ORDER BY o.xid, o.id LIMIT $1::int",
				u->table, r->nshards);
		snprintf(stmt, 160, "pin_relay_cursor:%s", u->table);
		/* a failed write reads nothing: the checks below as for a read */
		res = relay_cursor_save(r, u) < 0 ? NULL : pin_db_exec_prepared(stmt, sql, 4, cp);
	} else {
		/* the shard count as a literal: it matches an index on the same
		 * expression (migration 0005 makes the one for 4 shards) */
		snprintf(sql, 400, "SELECT id, topic, key, envelope::text, attempts,"
				" traceparent, message_id FROM %s"
				" WHERE published_at IS NULL AND parked_at IS NULL AND id > $2::bigint"
				" AND (hashtext(key) & 2147483647) %% %d = $3::int"
				" ORDER BY id LIMIT $1::int", u->table, r->nshards);
		snprintf(stmt, 160, "pin_relay_batch:%s", u->table);
		res = pin_db_exec_prepared(stmt, sql, 3, p);
	}
	if (res && PQresultStatus(res) == PGRES_TUPLES_OK)
		b->rows = pin_arena_alloc(sizeof(*b->rows) * (size_t)(PQntuples(res) + 1));
	pin_arena_set_current(prev);
	/* a dead link is only noticed by a statement, and db.c runs it again
	 * on a new connection: that session does not hold the lock, and
	 * another host may lead by now.  Publish only what was read under
	 * the lock; else start over (as leader again, or not). */
	c = pin_db_conn();
	if (!c || PQbackendPID(c) != r->conn_pid) {
		relay_lose_all(r, "connection changed");
		r->next_lead_us = 0;
		relay_batch_free(b);
		return NULL;
	}
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK) {
		relay_batch_free(b);
		return NULL;
	}
	b->n = PQntuples(res);
	for (int i = 0; i < b->n; i++) {
		struct relay_row *row = &b->rows[i];

		memset(row, 0, sizeof(*row));
		row->b = b;
		row->id = PQgetvalue(res, i, 0);
		row->topic = PQgetvalue(res, i, 1);
		row->size = (size_t)PQgetlength(res, i, 3);
		row->attempts = atoi(PQgetvalue(res, i, 4));
		row->traceparent = PQgetisnull(res, i, 5) ? NULL : PQgetvalue(res, i, 5);
		row->message_id = PQgetvalue(res, i, 6);
		row->xid = u->cur ? PQgetvalue(res, i, 7) : NULL;
	}
	if (b->n && u->cur) {
		snprintf(u->rx, sizeof(u->rx), "%s", b->rows[b->n - 1].xid);
		snprintf(u->rid, sizeof(u->rid), "%s", b->rows[b->n - 1].id);
	} else if (b->n) {
		snprintf(u->cursor, sizeof(u->cursor), "%s", b->rows[b->n - 1].id);
	}
	/* keep the result for the producer: produce_row reads key and value */
	b->res = res;
	return b;
}

/*
 * "outbox relay: published", one INFO line per delivered row with the row's
 * trace id -- the lines pin_log writes (same keys, same order), built here
 * and written with one write per batch: pin_log's json-c object and fflush
 * per line were most of the relay's own CPU at 1000 rows per batch.  Every
 * value is plain: the outbox name is checked at registration, messageId is
 * a uuid, traceId hex, and Kafka accepted the topic name ([A-Za-z0-9._-]).
 */
static void log_published(const char *table, struct relay_row *rows, int produced)
{
	const char *lvl = pin_config_str("log_level");
	size_t cap = 4096, len = 0;
	char *buf, ts[40];

	if (strcmp(lvl, "info") && strcmp(lvl, "debug"))
		return;
	buf = malloc(cap);
	if (!buf)
		return;
	pin_clock_fmt(pin_clock_now_us(), ts, sizeof(ts));
	for (int i = 0; i < produced; i++) {
		char tid[64] = "";
		int w;

		if (rows[i].st != DR_OK)
			continue;
		if (rows[i].traceparent && pin_traceparent_valid(rows[i].traceparent))
			snprintf(tid, sizeof(tid), "\"traceId\":\"%.32s\",", rows[i].traceparent + 3);
		for (;;) {
			w = snprintf(buf + len, cap - len, "{\"ts\":\"%s\",\"level\":\"info\","
					"\"msg\":\"outbox relay: published\",%s\"outbox\":\"%s\","
					"\"messageId\":\"%s\",\"topic\":\"%s\"}\n", ts, tid, table,
					rows[i].message_id, rows[i].topic);
			if (w >= 0 && (size_t)w < cap - len)
				break;
			{
				char *n = realloc(buf, cap * 2);

				if (!n) {
					free(buf);
					return;
				}
				buf = n;
				cap *= 2;
			}
		}
		len += (size_t)w;
	}
	flockfile(stderr);
	fwrite(buf, 1, len, stderr);
	fflush(stderr);
	funlockfile(stderr);
	free(buf);
}

/* 3. Records the outcome: published_at for delivered rows, parked_at +
 *    last_error for parked ones (one log line each, without the payload),
 *    attempts + 1 for the ones kept for retry.  -1 when the marking
 *    itself failed. */
static int batch_mark(const char *table, bool cur, struct relay_row *rows, int produced,
		int *ok, int *failed, int *parked, rd_kafka_resp_err_t *first_err)
{
	char now[40], *sql = pin_arena_alloc(300), *stmt = pin_arena_alloc(160);
	char *lab = pin_arena_alloc(200);
	PGresult *res;

	*ok = *failed = *parked = 0;
	for (int i = 0; i < produced; i++) {
		if (rows[i].st == DR_FAILED && rows[i].err != RD_KAFKA_RESP_ERR__TIMED_OUT &&
				(rows[i].reason = relay_park_reason(rows[i].err, rows[i].attempts)))
			rows[i].st = DR_PARKED;
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
		const char *p[2] = { now, cur ? NULL : id_list(rows, produced, DR_OK) };

		/* a cursor unit marks nothing: its cursor moves (relay_unit_reap) */
		snprintf(sql, 300, "UPDATE %s SET published_at = $1::timestamptz"
				" WHERE id = ANY($2::bigint[])", table);
		snprintf(stmt, 160, "pin_relay_mark:%s", table);
		res = cur ? NULL : pin_db_exec_prepared(stmt, sql, 2, p);
		if (!cur && (!res || PQresultStatus(res) != PGRES_COMMAND_OK)) {
			/* delivered but not marked: they will go out again
			 * (at-least-once; consumers dedupe on messageId) */
			pin_log(PIN_LOG_ERROR, "outbox relay: cannot mark rows published",
					"outbox", table, NULL);
			return -1;
		}
		pin_metric_add("pin_outbox_published_total", NULL, *ok);
		if (pin_config_bool("relay_log_published")) {
			int64_t l0 = pin_clock_mono_us(), d;

			log_published(table, rows, produced);
			d = pin_clock_mono_us() - l0;
			if (relay_rclk) {
				relay_rclk->us[RC_LOG] += d;
				relay_rclk->us[RC_MARK] -= d;
			}
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
 * The commit-ordered cursor (relay_cursor; doc/operating.md "Outbox relay
 * cursor").  A shard's rows are read in (xid, id) order, only those whose
 * xid is below the oldest transaction still running
 * (pg_snapshot_xmin(pg_current_snapshot())): every transaction below it has
 * ended, so no row can appear behind the cursor later, and nothing is
 * marked.  calendar.outbox_cursor holds each shard's delivered position,
 * written (only forwards) just before the next batch is read; a new
 * leader starts there, so rows delivered after the last write go out again
 * (at-least-once, as a lost mark did).  The xid of a row is raised to the
 * highest xid of its key's earlier rows by a trigger (migration 0780,
 * R__functions.sql): a key's rows are read in the order they were written.
 */

/* After a batch's reports: the delivered position moves to the row before
 * the first one that failed (or to the batch's last row). */
static void cursor_advance(struct relay_unit *u, struct relay_batch *b)
{
	int last = -1;

	if (u->cur_hold)        /* an earlier batch of the window failed */
		return;
	for (int i = 0; i < b->produced; i++) {
		if (b->rows[i].st != DR_OK && b->rows[i].st != DR_PARKED)
			break;
		last = i;
	}
	if (last < b->n - 1)
		u->cur_hold = true;
	if (last < 0)
		return;
	snprintf(u->dx, sizeof(u->dx), "%s", b->rows[last].xid);
	snprintf(u->did, sizeof(u->did), "%s", b->rows[last].id);
}

/*
 * Marks the unit's finished batches, oldest first.  Returns -1 when a batch
 * had failed rows or could not be marked (the unit stops reading until its
 * window is empty, then starts again from the oldest row; the caller backs
 * off), else 0.  *done gets the rows published or parked.
 */
int relay_unit_reap(struct relay *r, struct relay_unit *u, int *done)
{
	int rc = 0;

	while (u->nwin > 0 && u->win[0]->pending == 0) {
		struct relay_batch *b = u->win[0];
		int ok = 0, failed = 0, parked = 0;
		rd_kafka_resp_err_t first_err = RD_KAFKA_RESP_ERR_NO_ERROR;
		int64_t t0 = pin_clock_mono_us();

		if (relay_rclk) {
			relay_rclk->report_us += b->reported_us - b->produced_us;
			relay_rclk->wait_us += t0 - b->reported_us;
			relay_rclk->batches++;
			relay_rclk->rows += b->produced;
		}
		if (batch_mark(u->table, u->cur, b->rows, b->produced, &ok, &failed, &parked,
				&first_err) < 0) {
			failed = 1;
			first_err = RD_KAFKA_RESP_ERR__FAIL;
			u->cur_hold = true;
		} else if (u->cur) {
			cursor_advance(u, b);
		}
		relay_rc_add(RC_MARK, &t0);
		*done += ok + parked;
		if (failed) {
			if (!r->failing)
				pin_log(PIN_LOG_WARN, "outbox relay: publishing fails, rows kept for retry",
						"outbox", u->table, "code", rd_kafka_err2name(first_err),
						"error", rd_kafka_err2str(first_err), NULL);
			r->failing = true;
			if (first_err != RD_KAFKA_RESP_ERR__FAIL)
				relay_set_kafka_up(r, 0);
			u->stalled = true;
			rc = -1;
		} else if (ok) {
			if (r->failing)
				pin_log(PIN_LOG_INFO, "outbox relay: publishing again", NULL);
			r->failing = false;
			relay_set_kafka_up(r, 1);
		}
		relay_batch_free(b);
		memmove(&u->win[0], &u->win[1], sizeof(u->win[0]) * (size_t)(u->nwin - 1));
		u->nwin--;
	}
	if (u->nwin == 0) {
		int64_t now = pin_clock_mono_us();

		/* Back to the start of the shard for rows that committed late
		 * with a lower id: at once after a failure, else at most every
		 * relay_rewind_ms.  A read from the start walks the index entries
		 * of every row published since the last vacuum; at each emptied
		 * window (10-20 per second and relay thread under a trickle of
		 * commits) that made the reads cost 16-25 us per row instead of
		 * ~10 (doc/performance.md "The relay:
		 * sharded, pipelined, its own commit rule"). */
		if (u->cur) {
			/* no late commits behind a cursor: back only after a
			 * failure, to the last delivered row */
			if (u->stalled || u->cur_hold) {
				strcpy(u->rx, u->dx);
				strcpy(u->rid, u->did);
				if (relay_rclk)
					relay_rclk->rewinds++;
			}
			u->cur_hold = false;
		} else if (u->stalled || now - u->rewound_us >= r->rewind_us) {
			if (relay_rclk && strcmp(u->cursor, "0"))
				relay_rclk->rewinds++;
			strcpy(u->cursor, "0");
			u->rewound_us = now;
		}
		u->stalled = false;
		if (u->releasing)
			relay_unit_release(r, u, r->switching ? "going over to the cursor" :
					r->mismatch ? "relays nothing" : "balance");
	}
	return rc;
}

/* Reads and produces the unit's next batch when it may.  *nrows gets the
 * rows read (-1: nothing tried). -1 on failure. */
int relay_unit_feed(struct relay *r, struct relay_unit *u, int *nrows)
{
	struct relay_batch *b;
	int64_t t0;

	*nrows = -1;
	if (!u->led || u->releasing || u->stalled || r->mismatch || relay_should_stop() ||
	    u->nwin >= r->inflight || (u->caught_up && u->nwin > 0) ||
	    pin_clock_now_us() < r->pause_until_us)
		return 0;
	t0 = pin_clock_mono_us();
	b = batch_read(r, u);
	relay_rc_add(RC_READ, &t0);
	if (!b)
		return u->led ? -1 : 0;
	*nrows = b->n;
	u->caught_up = b->n < r->batch;
	if (b->n == 0) {
		relay_batch_free(b);
		return 0;
	}
	if (r->rk && relay_bootstrap_changed(r)) {
		/* the broker moved while we were idle */
		pin_log(PIN_LOG_INFO, "outbox relay: recreating the kafka producer",
				"reason", "bootstrap changed", NULL);
		relay_producer_destroy(r);
		if (u->nwin) {
			/* its batches in flight just failed: they go out again
			 * first (per-key order), not after this one */
			relay_batch_free(b);
			*nrows = 0;
			u->stalled = true;
			return -1;
		}
	}
	if (!r->rk && relay_producer_create(r) != 0) {
		relay_batch_free(b);
		if (!u->nwin && u->cur) {
			strcpy(u->rx, u->dx);
			strcpy(u->rid, u->did);
		} else if (!u->nwin)
			strcpy(u->cursor, "0");
		else
			u->stalled = true;
		return -1;
	}
	t0 = pin_clock_mono_us();
	relay_batch_produce(r, b);
	relay_rc_add(RC_PRODUCE, &t0);
	u->win[u->nwin++] = b;
	if (b->produced < b->n)         /* a row refused for now: start over */
		u->stalled = true;
	return 0;
}
