/* housekeeping.c -- the housekeeping job (workers.md): deletes, in small
 * batches with FOR UPDATE SKIP LOCKED (one transaction each), in this order
 * (a row a later purge needs gone goes first):
 *   - closed booking-deadline links (Completed, Cancelled) not changed for
 *     housekeeping.terminal_days (180) whose event, if any, is terminal too
 *     (issue 30 item 6; a CRM message that late is not expected);
 *   - terminal calendar events (Completed, Cancelled) not changed for 180
 *     days -- their reminders go with them (FK cascade) -- unless a CRM
 *     booking link or a still-active appointment refers to them;
 *   - terminal appointments not changed for 180 days;
 *   - Archived slots that ended more than housekeeping.slot_days (180) ago
 *     and that no appointment refers to, then slot batches whose last day
 *     is that old and that no slot refers to any more (issue 30 item 6);
 *   - absences (calendar.time_off, issue 32) that ended more than
 *     housekeeping.slot_days (180) ago: the note is the agent's text;
 *   - Sent and Skipped reminders whose DueAt is more than
 *     housekeeping.reminder_days (180) old, also of events that stay (seed
 *     000: terminal reminder rows older than 180 days may be deleted);
 *   - replicas of closed deals not changed for 180 days that no link names;
 *   - published outbox rows older than 7 days (the index of migration
 *     0650: a batch reads its rows, not the whole outbox);
 *   - inbox rows older than 30 days (a redelivery that late is not expected:
 *     Kafka retention is shorter);
 *   - Idempotency-Key records older than 24 h (the replay window, api.md).
 * Each purge reads the first entries of an index (0500, 0650, 0720).
 * Nothing else deletes data; Planned and InProgress events and Pending and
 * Confirmed appointments (the agent's own record), parked outbox rows (an
 * operator's to handle) and the replicas of users and open deals stay
 * (doc/operating.md, "Retention").  Ages are configurable for operators;
 * pin_housekeeping_deleted_total{table} counts the rows deleted. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include "sdk/sdk.h"
#include "caldomain/event.h"
#include "workers.h"

#define JOB_NAME "housekeeping"

static const struct pc_purge purges[] = {
	{ "booking_deadline_links", "housekeeping.terminal_days", 86400,
	  "DELETE FROM calendar.booking_deadline_links WHERE (booking_id, phase) IN ("
	  " SELECT l.booking_id, l.phase FROM calendar.booking_deadline_links l"
	  " WHERE l.status IN ('Completed', 'Cancelled') AND l.updated_at < $1::timestamptz"
	  "  AND NOT EXISTS (SELECT 1 FROM calendar.calendar_events e"
	  "                  WHERE e.id = l.calendar_event_id"
	  "                    AND e.status NOT IN ('Completed', 'Cancelled'))"
	  " ORDER BY l.updated_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
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
	{ "availability_slots", "housekeeping.slot_days", 86400,
	  "DELETE FROM calendar.availability_slots WHERE id IN ("
	  " SELECT s.id FROM calendar.availability_slots s"
	  " WHERE s.status = 'Archived' AND s.end_at < $1::timestamptz"
	  "  AND NOT EXISTS (SELECT 1 FROM calendar.appointments a WHERE a.slot_id = s.id)"
	  " ORDER BY s.end_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	/* a batch's slots start by its to_date (local) + 1 day; no ORDER BY
	 * (any old batch will do): the scan stops at the batch's last row */
	{ "slot_batches", "housekeeping.slot_days", 86400,
	  "DELETE FROM calendar.slot_batches WHERE id IN ("
	  " SELECT b.id FROM calendar.slot_batches b"
	  " WHERE b.to_date < ($1::timestamptz AT TIME ZONE 'UTC')::date - 2"
	  "  AND NOT EXISTS (SELECT 1 FROM calendar.availability_slots s"
	  "                  WHERE s.batch_id = b.id)"
	  " LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "time_off", "housekeeping.slot_days", 86400,
	  "DELETE FROM calendar.time_off WHERE id IN ("
	  " SELECT t.id FROM calendar.time_off t WHERE t.end_at < $1::timestamptz"
	  " ORDER BY t.end_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	/* no ORDER BY: status = ANY (two values) AND due_at < $1 are both
	 * conditions of ix_event_reminders_status_due_at (status, due_at), so the
	 * scan stops at the batch's last row; ordering by due_at would sort
	 * every old row of both statuses first.  The rows are deleted by
	 * primary key (= ANY of the array, as the dispatcher updates them):
	 * the IN (subquery) form was planned as a hash semi-join over a
	 * sequential scan of the whole table (EXPLAIN, 100k reminders) */
	{ "event_reminders", "housekeeping.reminder_days", 86400,
	  "DELETE FROM calendar.event_reminders WHERE id = ANY (ARRAY("
	  " SELECT id FROM calendar.event_reminders"
	  " WHERE status IN ('Sent', 'Skipped') AND due_at < $1::timestamptz"
	  " LIMIT $2::int FOR UPDATE SKIP LOCKED))" },
	{ "crm_deal_replicas", "housekeeping.terminal_days", 86400,
	  "DELETE FROM calendar.crm_deal_replicas WHERE deal_id IN ("
	  " SELECT d.deal_id FROM calendar.crm_deal_replicas d"
	  " WHERE d.is_terminal AND d.updated_at < $1::timestamptz"
	  "  AND NOT EXISTS (SELECT 1 FROM calendar.booking_deadline_links l"
	  "                  WHERE l.deal_id = d.deal_id)"
	  " ORDER BY d.updated_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "outbox", "housekeeping.outbox_days", 86400,
	  "DELETE FROM calendar.outbox WHERE id IN ("
	  " SELECT id FROM calendar.outbox"
	  " WHERE published_at IS NOT NULL AND published_at < $1::timestamptz"
	  " ORDER BY published_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	/* relay_cursor: nothing is marked; a row is published once every
	 * shard's cursor is past its xid (calendar.outbox_cursor_horizon,
	 * NULL -- nothing deleted -- while a shard has no cursor) */
	{ "outbox_behind_cursor", "housekeeping.outbox_days", 86400,
	  "DELETE FROM calendar.outbox WHERE id IN ("
	  " SELECT id FROM calendar.outbox"
	  " WHERE published_at IS NULL AND parked_at IS NULL AND created_at < $1::timestamptz"
	  " AND xid < (SELECT calendar.outbox_cursor_horizon('calendar.outbox'))"
	  " ORDER BY id LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "inbox", "housekeeping.inbox_days", 86400,
	  "DELETE FROM calendar.inbox WHERE (consumer_group, message_id) IN ("
	  " SELECT consumer_group, message_id FROM calendar.inbox"
	  " WHERE processed_at < $1::timestamptz"
	  " ORDER BY processed_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	/* a used manage link (issue 32 item 3) is refused as expired once
	 * expires_at passed: its row only has to outlive that */
	{ "manage_link_uses", "housekeeping.terminal_days", 86400,
	  "DELETE FROM calendar.manage_link_uses WHERE (appointment_id, jti) IN ("
	  " SELECT appointment_id, jti FROM calendar.manage_link_uses"
	  " WHERE expires_at < $1::timestamptz"
	  " ORDER BY expires_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
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
