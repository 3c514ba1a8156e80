/* housekeeping.c -- the housekeeping job (workers.md): deletes, in small
 * batches with FOR UPDATE SKIP LOCKED (one transaction each),
 *   - terminal calendar events (Completed, Cancelled) not changed for 180
 *     days -- their reminders go with them (FK cascade) -- unless a CRM
 *     booking link or a still-active appointment refers to them;
 *   - terminal appointments not changed for 180 days;
 *   - published outbox rows older than 7 days;
 *   - inbox rows older than 30 days (a redelivery that late is not expected:
 *     Kafka retention is shorter);
 *   - Idempotency-Key records older than 24 h (the replay window, api.md).
 * Nothing else deletes data.  Ages are configurable (days) for operators. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include "sdk/sdk.h"
#include "caldomain/event.h"
#include "workers.h"

#define JOB_NAME "housekeeping"
#define DEFAULT_BATCH 500
#define MAX_BATCHES 20      /* per table and pass; the next pass continues */

struct purge {
	const char *name;        /* metric label and prepared statement suffix */
	const char *age_key;     /* config key of the age, in units */
	long long unit_s;        /* 86400 (days) or 3600 (hours) */
	long long def_units;     /* default age */
	const char *sql;         /* $1 = cutoff (timestamptz), $2 = batch */
};

static const struct purge purges[] = {
	{ "calendar_events", "housekeeping.terminal_days", 86400, 180,
	  "DELETE FROM calendar.calendar_events WHERE id IN ("
	  " SELECT e.id FROM calendar.calendar_events e"
	  " WHERE e.status IN ('Completed', 'Cancelled') AND e.updated_at < $1::timestamptz"
	  "  AND NOT EXISTS (SELECT 1 FROM calendar.booking_deadline_links l"
	  "                  WHERE l.calendar_event_id = e.id)"
	  "  AND NOT EXISTS (SELECT 1 FROM calendar.appointments a"
	  "                  WHERE a.calendar_event_id = e.id"
	  "                    AND a.status IN ('Pending', 'Confirmed'))"
	  " ORDER BY e.updated_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "appointments", "housekeeping.terminal_days", 86400, 180,
	  "DELETE FROM calendar.appointments WHERE id IN ("
	  " SELECT id FROM calendar.appointments"
	  " WHERE status IN ('Declined', 'Cancelled', 'Expired', 'Completed', 'NoShow')"
	  "  AND updated_at < $1::timestamptz"
	  " ORDER BY updated_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "outbox", "housekeeping.outbox_days", 86400, 7,
	  "DELETE FROM calendar.outbox WHERE id IN ("
	  " SELECT id FROM calendar.outbox"
	  " WHERE published_at IS NOT NULL AND published_at < $1::timestamptz"
	  " ORDER BY id LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "inbox", "housekeeping.inbox_days", 86400, 30,
	  "DELETE FROM calendar.inbox WHERE (consumer_group, message_id) IN ("
	  " SELECT consumer_group, message_id FROM calendar.inbox"
	  " WHERE processed_at < $1::timestamptz"
	  " ORDER BY processed_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "idempotency_keys", "housekeeping.idempotency_hours", 3600, 24,
	  "DELETE FROM calendar.idempotency_keys WHERE (caller, tenant_id, key) IN ("
	  " SELECT caller, tenant_id, key FROM calendar.idempotency_keys"
	  " WHERE created_at < $1::timestamptz"
	  " ORDER BY created_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
};

/* the age in seconds: config value in units, the default when not > 0 */
static long long age_of(const struct purge *p)
{
	long long v = pc_api->config_int(p->age_key, p->def_units);

	return (v > 0 ? v : p->def_units) * p->unit_s;
}

static int purge_batch(void *ud, int64_t now_us, int batch)
{
	const struct purge *cur = ud;
	const char *params[2];
	PGresult *res;
	int n;

	params[0] = pc_time_param(now_us - age_of(cur) * 1000000);
	params[1] = pc_api->sprintf("%d", batch);
	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	res = pc_api->db_exec_prepared(pc_api->sprintf("wrk_hk_%s", cur->name),
			cur->sql, 2, params);
	if (!pc_res_ok(res, PGRES_COMMAND_OK)) {
		pc_api->db_rollback();
		return PIN_ERR_DB;
	}
	n = atoi(PQcmdTuples(res));
	if (pc_api->db_commit() != 0)
		return PIN_ERR_DB;
	return n;
}

static int housekeeping(void *ud)
{
	int64_t now_us = pc_api->now_us();
	int batch = pc_batch_size("job." JOB_NAME ".batch", DEFAULT_BATCH);
	int total = 0, n;

	(void)ud;
	for (size_t i = 0; i < sizeof(purges) / sizeof(purges[0]); i++) {
		const struct purge *cur = &purges[i];

		n = pc_batch_loop_ud(purge_batch, (void *)cur, now_us, batch, MAX_BATCHES);
		if (n < 0)
			return n;
		if (n > 0) {
			pc_api->metric_add("pin_housekeeping_deleted_total",
				pc_api->sprintf("table=\"%s\"", cur->name), n);
			pc_api->log(PIN_LOG_INFO, "housekeeping deleted rows",
				"table", cur->name, "count", pc_api->sprintf("%d", n), NULL);
		}
		total += n;
	}
	return total;
}

int wrk_housekeeping_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_job j = { JOB_NAME, 600000, housekeeping, NULL, NULL };

	return pc_register_job(reg, &j, "workers", err, errlen);
}
