/* reminders.c -- the reminder-dispatch job (seed 000 rule 4, workers.md).
 *
 * Each batch is one transaction: Pending reminders with DueAt < now are
 * taken with FOR UPDATE SKIP LOCKED, set to Sent (SentAt = now) and one
 * pin.calendar.reminder-due.v1 per row goes to the outbox, all of them in
 * one statement (api->outbox_put_many).  Two worker hosts
 * never take the same row (SKIP LOCKED), and a second pass finds the rows
 * Sent (idempotent by state).  A concurrent cancel of the event either locks
 * the rows first (the dispatcher skips them, they end Skipped) or waits for
 * this batch (the reminder is sent, then the event is cancelled) -- the
 * arbitration of the seed.
 *
 * Shards: a pass whose first batch comes back full goes on
 * over job.reminder-dispatch.connections (2) shards at once (api->
 * run_shards, each on its own connection and backend: both cores work).
 * Shard k of n takes only the reminders of events whose uuid_hash falls in
 * it, so the shards never wait on or skip each other's rows, and the
 * reminders of one event (the outbox key) stay in DueAt order in one
 * shard's batches.
 *
 * Histogram pin_reminder_lateness_seconds: now - DueAt of every reminder
 * sent (<= one dispatch cycle, job.reminder-dispatch.interval_ms, while the
 * dispatcher keeps up). */
#include "config.h"
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include "workers.h"
#include "sdk/sdk.h"
#include "sdk/jtext.h"
#include "caldomain/event.h"

#define MAX_BATCHES 100     /* per pass (200k rows); the next pass continues */
#define MAX_CONNECTIONS 16  /* api->run_shards' limit */

/* The UPDATE finds the batch's rows by primary key (= ANY of the array of
 * the locked ids): the join form (FROM due WHERE r.id = due.id) made
 * PostgreSQL hash-join a sequential scan of the WHOLE table per batch
 * (1.04 s instead of 0.17 s per 2000 rows with 100k rows in the table,
 * growing with it), and the event join then a scan of every event.
 * The shard test ($4 = event hash mod $3) is the function int4eq, not the
 * operator =: the planner gives a function call a fixed selectivity of 1/3
 * (about right for 2-3 shards), an = on an expression without statistics
 * 0.5 %, and with that estimate it sorted the whole due backlog (seq scan,
 * 90-110 ms per batch of 100k) instead of reading the due_at index in order
 * (2-11 ms).  Shard 0 of 1 is every row. */
static const char dispatch_sql[] =
	"WITH due AS ("
	"  SELECT r.id FROM calendar.event_reminders r "
	"  WHERE r.status = 'Pending' AND r.due_at < $1::timestamptz "
	"    AND int4eq((uuid_hash(r.calendar_event_id) & 2147483647) % $3::int, $4::int) "
	"  ORDER BY r.due_at LIMIT $2::int FOR UPDATE SKIP LOCKED"
	"), sent AS ("
	"  UPDATE calendar.event_reminders r SET status = 'Sent', sent_at = $1::timestamptz, "
	"    updated_at = $1::timestamptz "
	"  WHERE r.id = ANY (ARRAY(SELECT id FROM due)) "
	"  RETURNING r.id, r.calendar_event_id, r.offset_minutes, r.due_at"
	") "
	"SELECT s.id, e.id, e.tenant_id, e.owner_user_id, e.client_user_id, e.kind, "
	"  calendar.us(e.start_at), e.time_zone, s.offset_minutes, e.appointment_id, "
	"  calendar.us(s.due_at) "
	"FROM sent s JOIN calendar.calendar_events e ON e.id = s.calendar_event_id "
	"ORDER BY s.due_at, s.id";

enum { RD_ID, RD_EVENT, RD_TENANT, RD_OWNER, RD_CLIENT, RD_KIND, RD_START, RD_TZ,
	RD_OFFSET, RD_APPOINTMENT, RD_DUE };

/* The reminder-due payload of row i, written as JSON text (sdk/jtext: one
 * buffer instead of a json-c object per field; the same bytes) inside a
 * json-c value that prints it (pc_jt_body).  NULL when out of memory. */
static json_object *reminder_due_payload(const PGresult *res, int i)
{
	struct pc_jt w;

	pc_jt_init(&w, 512);
	pc_jt_obj(&w);
	PC_JT_KV(&w, "reminderId", pc_jt_col(&w, res, i, RD_ID));
	PC_JT_KV(&w, "eventId", pc_jt_col(&w, res, i, RD_EVENT));
	PC_JT_KV(&w, "tenantId", pc_jt_col(&w, res, i, RD_TENANT));
	PC_JT_KV(&w, "ownerUserId", pc_jt_col(&w, res, i, RD_OWNER));
	PC_JT_KV(&w, "clientUserId", pc_jt_col(&w, res, i, RD_CLIENT));
	PC_JT_KV(&w, "kind", pc_jt_col(&w, res, i, RD_KIND));
	PC_JT_KV(&w, "startAt", pc_jt_col_time(&w, res, i, RD_START));
	PC_JT_KV(&w, "timeZone", pc_jt_col(&w, res, i, RD_TZ));
	PC_JT_KV(&w, "offsetMinutes", pc_jt_col_int(&w, res, i, RD_OFFSET));
	PC_JT_KV(&w, "appointmentId", pc_jt_col(&w, res, i, RD_APPOINTMENT));
	pc_jt_end_obj(&w);
	return pc_jt_body(&w);
}

/* A pass (now, batch size, batches per shard; the rows its batches have
 * committed, over every shard) and the shard (k of n) a batch takes its
 * rows from; k 0 of 1 = every due reminder. */
struct rd_pass { int64_t now_us; int batch, max_batches; atomic_int sent; };
struct rd_shard { int k, n; struct rd_pass *pass; };

/* One batch of shard sh: returns rows sent (>= 0) or PIN_ERR_DB.  Four round
 * trips whatever its size: BEGIN, the UPDATE .. RETURNING, ONE outbox insert
 * of all its reminder-due messages (api->outbox_put_many, which logs the one
 * line of the batch: count and first/last messageId), COMMIT. */
static int dispatch_batch(void *sh, int64_t now_us, int batch)
{
	const struct rd_shard *s = sh;
	const char *params[4];
	struct pin_outbox_msg *msgs;
	PGresult *res;
	int64_t sent_us;
	int i, n;

	params[0] = pc_time_param(now_us);
	params[1] = pc_api->sprintf("%d", batch);
	params[2] = pc_api->sprintf("%d", s->n);
	params[3] = pc_api->sprintf("%d", s->k);
	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	res = pc_api->db_exec_prepared("wrk_reminder_dispatch", dispatch_sql, 4, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		goto fail;
	n = PQntuples(res);
	sent_us = pc_api->now_us();
	msgs = pc_api->alloc((size_t)(n ? n : 1) * sizeof *msgs);
	if (!msgs)
		goto fail;
	for (i = 0; i < n; i++) {
		const char *event_id = PQgetvalue(res, i, RD_EVENT);

		/* lateness: how long after its DueAt the reminder went out */
		pc_api->metric_observe("pin_reminder_lateness_seconds", NULL,
				(double)(sent_us - pc_col_us(res, i, RD_DUE)) / 1e6);
		/* the outbox envelope is built by the host; key = EventId */
		msgs[i] = (struct pin_outbox_msg){ PC_TOPIC_REMINDER_DUE, event_id,
			"pin.calendar.reminder-due", "CalendarEvent", event_id,
			reminder_due_payload(res, i) };
	}
	/* all n rows or none: a failure rolls the Sent marks back with them */
	if (pc_outbox_many(NULL, msgs, (size_t)n) < 0)
		goto fail;
	if (pc_api->db_commit() != 0)
		return PIN_ERR_DB;
	atomic_fetch_add(&s->pass->sent, n);
	return n;
fail:
	pc_api->db_rollback();
	return PIN_ERR_DB;
}

/* Gauge: age of the oldest due Pending row (0 when none). */
static void set_lag(int64_t now_us)
{
	pc_set_lag("wrk_reminder_lag",
		"SELECT calendar.us(min(due_at)) FROM calendar.event_reminders "
		"WHERE status = 'Pending' AND due_at < $1::timestamptz",
		now_us, "pin_reminder_dispatch_lag_seconds", NULL);
}

/* Shard k of n of a pass (api->run_shards), on its own connection. */
static int dispatch_shard(void *ud, int k, int n)
{
	struct rd_pass *p = ud;
	struct rd_shard s = { k, n, p };

	return pc_batch_loop_ud(dispatch_batch, &s, p->now_us, p->batch, p->max_batches);
}

/* job.reminder-dispatch.connections: shards of a busy pass (1..16). */
static int dispatch_connections(void)
{
	long long n = pc_api->config_num("job.reminder-dispatch.connections");

	if (!PIN_API_HAS(pc_api, run_shards) || n < 1)
		return 1;
	return n > MAX_CONNECTIONS ? MAX_CONNECTIONS : (int)n;
}

/* A pass: one batch over all shards on the job's connection (a quiet pass
 * stays one statement); when it comes back full, the rest over the shards
 * at once, each at most its share of MAX_BATCHES (rounded up). */
static int reminder_dispatch(void *ud)
{
	int64_t now_us = pc_api->now_us();
	struct rd_pass p = { now_us,
		pc_batch_size("job.reminder-dispatch.batch"), MAX_BATCHES - 1, 0 };
	struct rd_shard all = { 0, 1, &p };
	int n = dispatch_connections(), rc, total;

	(void)ud;
	set_lag(now_us);
	rc = dispatch_batch(&all, now_us, p.batch);
	if (rc == p.batch) {
		if (n > 1) {
			p.max_batches = (MAX_BATCHES - 1 + n - 1) / n;
			rc = pc_api->run_shards(n, dispatch_shard, &p);
		} else {
			rc = dispatch_shard(&p, 0, 1);
		}
	}
	/* what was committed counts, also when a shard failed after it */
	total = atomic_load(&p.sent);
	if (total > 0)
		pc_api->metric_add("pin_reminders_sent_total", NULL, total);
	set_lag(pc_api->now_us());
	return rc < 0 ? rc : total;
}

int wrk_reminders_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	static const struct pin_job job = { "reminder-dispatch", WRK_REMINDERS_INTERVAL_MS,
		reminder_dispatch, NULL, NULL };

	return pc_register_job(reg, &job, "workers", err, errlen);
}
