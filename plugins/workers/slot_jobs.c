/* slot_jobs.c -- the slot-expiration job (workers.md):
 *   Available slots with StartAt < now + 60 min          -> Expired
 *   Expired | Booked slots with EndAt < now - 30 days    -> Archived
 * Rows taken with FOR UPDATE SKIP LOCKED in batches of job.slot-expiration.batch
 * (default 500), one transaction per batch; idempotent by state, safe with
 * several worker hosts. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "workers.h"

#define JOB_NAME "slot-expiration"
#define LABELS "job=\"slot-expiration\""

static const char *const step_sql[2] = {
	/* 0: Available -> Expired inside the lead time */
	"WITH c AS ("
	"  SELECT id FROM calendar.availability_slots "
	"  WHERE status = 'Available' AND start_at < $1::timestamptz + interval '60 minutes' "
	"  ORDER BY start_at LIMIT $2::int FOR UPDATE SKIP LOCKED) "
	"UPDATE calendar.availability_slots s SET status = 'Expired', "
	"  version = s.version + 1, updated_at = $1::timestamptz "
	"FROM c WHERE s.id = c.id AND s.status = 'Available'",
	/* 1: Expired | Booked -> Archived 30 days after their end */
	"WITH c AS ("
	"  SELECT id FROM calendar.availability_slots "
	"  WHERE status IN ('Expired', 'Booked') AND end_at < $1::timestamptz - interval '30 days' "
	"  ORDER BY end_at LIMIT $2::int FOR UPDATE SKIP LOCKED) "
	"UPDATE calendar.availability_slots s SET status = 'Archived', "
	"  version = s.version + 1, updated_at = $1::timestamptz "
	"FROM c WHERE s.id = c.id AND s.status IN ('Expired', 'Booked')",
};
static const char *const step_name[2] = { "slots_expire", "slots_archive_old" };
static const char *const step_msg[2] = { "slots expired", "old slots archived" };

/* Age in seconds of the oldest due row (0 when none): the _lag_seconds gauge. */
static void set_lag(const char *now)
{
	const char *p[1] = { now };
	PGresult *res;

	res = pc_api->db_exec_prepared("slots_expire_lag",
		"SELECT coalesce(extract(epoch FROM $1::timestamptz + interval '60 minutes' "
		"  - min(start_at)), 0) "
		"FROM calendar.availability_slots "
		"WHERE status = 'Available' AND start_at < $1::timestamptz + interval '60 minutes'",
		1, p);
	if (pc_res_ok(res, PGRES_TUPLES_OK) && PQntuples(res) == 1)
		pc_api->metric_set("pin_job_lag_seconds", LABELS,
				strtod(PQgetvalue(res, 0, 0), NULL));
}

/* One batch of a step in its own transaction: rows changed, or PIN_ERR_DB. */
static int run_batch(int step, const char *now, const char *batch)
{
	const char *p[2] = { now, batch };
	PGresult *res;
	int n, rc;

	if ((rc = pc_api->db_begin()) < 0)
		return rc;
	res = pc_api->db_exec_prepared(step_name[step], step_sql[step], 2, p);
	if (!pc_res_ok(res, PGRES_COMMAND_OK)) {
		pc_api->db_rollback();
		return PIN_ERR_DB;
	}
	n = atoi(PQcmdTuples(res));
	if ((rc = pc_api->db_commit()) < 0)
		return rc;
	if (n > 0)
		pc_api->log(PIN_LOG_INFO, step_msg[step], "job", JOB_NAME,
				"count", pc_api->sprintf("%d", n), NULL);
	return n;
}

static int slot_expiration(void *ud)
{
	char now[40], batch[24];
	long long bsz = pc_api->config_num("job.slot-expiration.batch");
	int step, n, total = 0;

	(void)ud;
	snprintf(batch, sizeof(batch), "%lld", bsz);
	/* one "now" for the whole pass */
	pc_api->fmt_time(pc_api->now_us(), now, sizeof(now));
	set_lag(now);
	for (step = 0; step < 2; step++) {
		do {
			n = run_batch(step, now, batch);
			if (n < 0)
				return n;
			total += n;
		} while (n >= bsz);
	}
	return total;
}

int wrk_slots_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_job j = { JOB_NAME, WRK_SLOTS_INTERVAL_MS, slot_expiration, NULL, NULL };

	return pc_register_job(reg, &j, "workers", err, errlen);
}
