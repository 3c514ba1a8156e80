/* retention.c -- the notifications-housekeeping job of notify.so (issue 12
 * item 6): notify owns schema notifications, so it cleans it.  In batches
 * with FOR UPDATE SKIP LOCKED, one transaction each (like workers.so's
 * housekeeping), it deletes
 *   - inbox rows (processed_messages) older than 30 days;
 *   - Sent, Failed and Read notifications created more than 180 days ago
 *     (Pending rows stay: an unread in-app row or an undelivered message is
 *     still owed to its recipient);
 *   - recorded final states (subject_final_states) older than 180 days (a
 *     message about a subject that late is not expected).
 * Ages are configurable in days (notifications.housekeeping.*_days). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include "sdk/sdk.h"
#include "notify.h"

#define JOB_NAME "notifications-housekeeping"
#define DEFAULT_BATCH 500
#define MAX_BATCHES 20      /* per table and pass; the next pass continues */

struct purge {
	const char *name;        /* metric label and prepared statement suffix */
	const char *age_key;     /* config key of the age in days */
	long long def_days;
	const char *sql;         /* $1 = cutoff (timestamptz), $2 = batch */
};

static const struct purge purges[] = {
	{ "processed_messages", "notifications.housekeeping.inbox_days", 30,
	  "DELETE FROM notifications.processed_messages WHERE (consumer_group, message_id) IN ("
	  " SELECT consumer_group, message_id FROM notifications.processed_messages"
	  " WHERE processed_at < $1::timestamptz"
	  " ORDER BY processed_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "notifications", "notifications.housekeeping.notification_days", 180,
	  "DELETE FROM notifications.notifications WHERE id IN ("
	  " SELECT id FROM notifications.notifications"
	  " WHERE status IN ('Sent', 'Failed', 'Read') AND created_at < $1::timestamptz"
	  " ORDER BY created_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
	{ "subject_final_states", "notifications.housekeeping.final_state_days", 180,
	  "DELETE FROM notifications.subject_final_states WHERE subject_id IN ("
	  " SELECT subject_id FROM notifications.subject_final_states"
	  " WHERE recorded_at < $1::timestamptz"
	  " ORDER BY recorded_at LIMIT $2::int FOR UPDATE SKIP LOCKED)" },
};

/* the purge of the current pc_batch_loop call (one pass at a time per job
 * thread; the batch callback has no user data) */
static __thread const struct purge *cur;

static long long age_s(const struct purge *p)
{
	long long v = pc_api->config_int(p->age_key, p->def_days);

	return (v > 0 ? v : p->def_days) * 86400;
}

static int purge_batch(int64_t now_us, int batch)
{
	const char *params[2];
	PGresult *res;
	int n;

	params[0] = pc_time_param(now_us - age_s(cur) * 1000000);
	params[1] = pc_api->sprintf("%d", batch);
	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	res = pc_api->db_exec_prepared(pc_api->sprintf("ntf_hk_%s", cur->name),
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
		cur = &purges[i];
		n = pc_batch_loop(purge_batch, now_us, batch, MAX_BATCHES);
		if (n < 0)
			return n;
		if (n > 0) {
			pc_api->metric_add("notifications_housekeeping_deleted_total",
				pc_api->sprintf("table=\"%s\"", cur->name), n);
			pc_api->log(PIN_LOG_INFO, "notifications housekeeping deleted rows",
				"table", cur->name, "count", pc_api->sprintf("%d", n), NULL);
		}
		total += n;
	}
	return total;
}

int ntf_retention_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_job j = { JOB_NAME, 600000, housekeeping, NULL, NULL };

	return pc_register_job(reg, &j, "notify", err, errlen);
}
