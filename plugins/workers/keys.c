/* keys.c -- the configuration keys workers.so reads (declared
 * configuration, pin/plugin.h 1.7): read from the descriptor without init,
 * so every host, --check-config and pin-host.conf(5) know them. */
#include "config.h"
#include "pin/plugin.h"
#include "workers.h"

#define W PIN_CFG_WORKER
#define R PIN_CFG_RELOAD

const struct pin_config_key wrk_config_keys[] = {
	/* ---- jobs */
	PIN_CFG_JOB_INTERVAL("reminder-dispatch", WRK_REMINDERS_INTERVAL_MS, "jobs",
	  "pause between passes of the reminder dispatcher"),
	{ "job.reminder-dispatch.batch", PIN_CFG_INT, "2000", W, R, 1, 10000, NULL, "rows",
	  "jobs", "reminders sent per transaction" },
	{ "job.reminder-dispatch.connections", PIN_CFG_INT, "2", W, R, 1, 16, NULL,
	  "connections", "jobs", "a busy pass (first batch full) goes on as this many "
	  "shards at once, each on its own thread and database connection" },
	PIN_CFG_JOB_INTERVAL("appointment-timeout", WRK_APT_EXPIRY_INTERVAL_MS, "jobs",
	  "pause between passes that expire Pending appointments past their deadline"),
	{ "job.appointment-timeout.batch", PIN_CFG_INT, "500", W, R, 1, 10000, NULL, "rows",
	  "jobs", "Pending appointments expired per transaction" },
	PIN_CFG_JOB_INTERVAL("slot-expiration", WRK_SLOTS_INTERVAL_MS, "jobs",
	  "pause between passes that expire past slots"),
	{ "job.slot-expiration.batch", PIN_CFG_INT, "500", W, R, 1, 10000, NULL, "rows",
	  "jobs", "slots expired per statement" },

	/* ---- housekeeping (workers.md) */
	PIN_CFG_JOB_INTERVAL("housekeeping", WRK_HOUSEKEEPING_INTERVAL_MS, "housekeeping",
	  "pause between passes of the housekeeping"),
	{ "job.housekeeping.batch", PIN_CFG_INT, "500", W, R, 1, 10000, NULL, "rows",
	  "housekeeping", "rows deleted per transaction" },
	{ "housekeeping.terminal_days", PIN_CFG_DURATION, "180", W, R, 1, 36500, NULL, "days",
	  "housekeeping", "terminal events (with their reminders), terminal appointments, "
	  "closed booking-deadline links and replicas of closed deals not changed for this "
	  "long are deleted" },
	{ "housekeeping.reminder_days", PIN_CFG_DURATION, "180", W, R, 1, 36500, NULL, "days",
	  "housekeeping", "Sent and Skipped reminders due longer ago are deleted (their "
	  "event stays)" },
	{ "housekeeping.slot_days", PIN_CFG_DURATION, "180", W, R, 1, 36500, NULL, "days",
	  "housekeeping", "Archived slots that ended longer ago and that no appointment "
	  "refers to are deleted, then the slot batches none of whose slots is left" },
	{ "housekeeping.outbox_days", PIN_CFG_DURATION, "7", W, R, 1, 36500, NULL, "days",
	  "housekeeping", "published rows of calendar.outbox older than this are deleted" },
	{ "housekeeping.inbox_days", PIN_CFG_DURATION, "30", W, R, 1, 36500, NULL, "days",
	  "housekeeping", "consumed-message records older than this are deleted" },
	{ "housekeeping.idempotency_hours", PIN_CFG_DURATION, "24", W, R, 1, 87600, NULL, "h",
	  "housekeeping", "Idempotency-Key records older than this are deleted (the replay "
	  "window)" },

	/* ---- CRM booking sync (seed 004) */
	{ "crm_booking.replica_retry_deadline_s", PIN_CFG_DURATION, "86400", W, R, 1,
	  31536000, NULL, "s", "CRM",
	  "a booking message waits this long for its deal replica before the DLQ" },
	{ "crm_booking.batch_set", PIN_CFG_BOOL, "true", W, 0, 0, 0, NULL, NULL, "CRM",
	  "the CRM booking consumer's set-based batch handler; false: the per-message "
	  "savepoint path only" },
	{ NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
};
