/* housekeeping.c -- the housekeeping job (workers.md): deletes, in small
 * batches with FOR UPDATE SKIP LOCKED (one transaction each),
 *   - terminal calendar events (Completed, Cancelled) not changed for 180
 *     days -- their reminders go with them (FK cascade) -- unless a CRM
 *     booking link or a still-active appointment refers to them;
 *   - terminal appointments not changed for 180 days;
 *   - published outbox rows older than 7 days (the index of migration
 *     0650: a batch reads its rows, not the whole outbox);
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

static const struct pc_purge purges[] = {
	{ "calendar_events", "housekeeping.terminal_days", 86400,
	  "DELETE FROM calendar.calendar_events WHERE id IN ("
	  " SELECT e.id FROM calendar.calendar_events e"
	  " WHERE e.status IN ('Completed', 'Cancelled') AND e.updated_at < $1::timestamptz"
	  "  AND NOT EXISTS (SELECT 1 FROM calendar.booking_deadline_links l"
	  "                  WHERE l.calendar_event_id = e.id)"
	  "  AND NOT EXISTS (SELECT 1 FROM calendar.appointments a"
	  "                  WHERE a.calendar_event_id = e.id"
	  "                    AND a.status IN ('Pending', 'Confirmed'))"
	  " ORDER BY e.updated_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "appointments", "housekeeping.terminal_days", 86400,
	  "DELETE FROM calendar.appointments WHERE id IN ("
	  " SELECT id FROM calendar.appointments"
	  " WHERE status IN ('Declined', 'Cancelled', 'Expired', 'Completed', 'NoShow')"
	  "  AND updated_at < $1::timestamptz"
	  " ORDER BY updated_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "outbox", "housekeeping.outbox_days", 86400,
	  "DELETE FROM calendar.outbox WHERE id IN ("
	  " SELECT id FROM calendar.outbox"
	  " WHERE published_at IS NOT NULL AND published_at < $1::timestamptz"
	  " ORDER BY published_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "inbox", "housekeeping.inbox_days", 86400,
	  "DELETE FROM calendar.inbox WHERE (consumer_group, message_id) IN ("
	  " SELECT consumer_group, message_id FROM calendar.inbox"
	  " WHERE processed_at < $1::timestamptz"
	  " ORDER BY processed_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "idempotency_keys", "housekeeping.idempotency_hours", 3600,
	  "DELETE FROM calendar.idempotency_keys WHERE (caller, tenant_id, key) IN ("
	  " SELECT caller, tenant_id, key FROM calendar.idempotency_keys"
	  " WHERE created_at < $1::timestamptz"
	  " ORDER BY created_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
};

static const struct pc_purge_job job = {
	JOB_NAME, "wrk_hk_", "pin_housekeeping_deleted_total", "housekeeping deleted rows",
	purges, sizeof(purges) / sizeof(purges[0])
};

int wrk_housekeeping_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_job j = { JOB_NAME, WRK_HOUSEKEEPING_INTERVAL_MS, pc_purge_run, (void *)&job, NULL };

	return pc_register_job(reg, &j, "workers", err, errlen);
}
