/* retention.c -- the notifications-housekeeping job of notify.so (issue 12
 * item 6, issue 30 item 6): notify owns schema notifications, so it cleans
 * it.  In batches with FOR UPDATE SKIP LOCKED, one transaction each (like
 * workers.so's housekeeping), it deletes
 *   - inbox rows (processed_messages) older than 30 days;
 *   - Sent and Failed notifications (e-mail, SMS: the record of what was
 *     sent or given up) created more than 180 days ago;
 *   - in-app notifications the recipient has read (Read) created more than
 *     30 days ago: the feed keeps a month of what was read;
 *   - Pending notifications created more than 90 days ago: an in-app
 *     notification never read (before issue 30 nothing deleted these, the
 *     table grew without end), or an e-mail or SMS never delivered (the
 *     channel switched off; the dispatcher gives a failing row up within a
 *     day).  A reminder or a booking change three months old is news to
 *     nobody; the unread count drops with it;
 *   - recorded final states (subject_final_states) older than 180 days (a
 *     message about a subject that late is not expected);
 *   - published rows of its outbox (notifications.outbox) older than 7
 *     days, as housekeeping does for calendar.outbox (before migration
 *     0050 nothing deleted them).
 * Each purge reads the first entries of a partial index (0020, 0050, 0720).
 * Replicas (recipient_contacts) and settings stay, one row per user; the
 * templates are the service's own.  Ages are configurable in days
 * (notifications.housekeeping.*_days); the counter
 * notifications_housekeeping_deleted_total{table} counts what went. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include "sdk/sdk.h"
#include "notify.h"

#define JOB_NAME "notifications-housekeeping"

static const struct pc_purge purges[] = {
	{ "processed_messages", "notifications.housekeeping.inbox_days", 86400,
	  "DELETE FROM notifications.processed_messages WHERE (consumer_group, message_id) IN ("
	  " SELECT consumer_group, message_id FROM notifications.processed_messages"
	  " WHERE processed_at < $1::timestamptz"
	  " ORDER BY processed_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "notifications", "notifications.housekeeping.notification_days", 86400,
	  "DELETE FROM notifications.notifications WHERE id IN ("
	  " SELECT id FROM notifications.notifications"
	  " WHERE status IN ('Sent', 'Failed') AND created_at < $1::timestamptz"
	  " ORDER BY created_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "notifications_read", "notifications.housekeeping.read_days", 86400,
	  "DELETE FROM notifications.notifications WHERE id IN ("
	  " SELECT id FROM notifications.notifications"
	  " WHERE status = 'Read' AND created_at < $1::timestamptz"
	  " ORDER BY created_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "notifications_unread", "notifications.housekeeping.unread_days", 86400,
	  "DELETE FROM notifications.notifications WHERE id IN ("
	  " SELECT id FROM notifications.notifications"
	  " WHERE status = 'Pending' AND created_at < $1::timestamptz"
	  " ORDER BY created_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	/* the context's own outbox, as housekeeping does for calendar.outbox
	 * (workers.md: published rows older than 7 days; migration 0050) */
	{ "outbox", "notifications.housekeeping.outbox_days", 86400,
	  "DELETE FROM notifications.outbox WHERE id IN ("
	  " SELECT id FROM notifications.outbox"
	  " WHERE published_at IS NOT NULL AND published_at < $1::timestamptz"
	  " ORDER BY published_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	/* relay_cursor: rows behind every shard's cursor (as housekeeping) */
	{ "outbox_behind_cursor", "notifications.housekeeping.outbox_days", 86400,
	  "DELETE FROM notifications.outbox WHERE id IN ("
	  " SELECT id FROM notifications.outbox"
	  " WHERE published_at IS NULL AND parked_at IS NULL AND created_at < $1::timestamptz"
	  " AND xid < (SELECT calendar.outbox_cursor_horizon('notifications.outbox'))"
	  " ORDER BY id LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "subject_final_states", "notifications.housekeeping.final_state_days", 86400,
	  "DELETE FROM notifications.subject_final_states WHERE subject_id IN ("
	  " SELECT subject_id FROM notifications.subject_final_states"
	  " WHERE recorded_at < $1::timestamptz"
	  " ORDER BY recorded_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
};

static const struct pc_purge_job job = {
	JOB_NAME, "ntf_hk_", "notifications_housekeeping_deleted_total",
	"notifications housekeeping deleted rows",
	purges, sizeof(purges) / sizeof(purges[0])
};

int ntf_retention_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_job j = { JOB_NAME, NTF_HOUSEKEEPING_INTERVAL_MS, pc_purge_run, (void *)&job, NULL };

	return pc_register_job(reg, &j, "notify", err, errlen);
}
