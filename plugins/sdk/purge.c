/* purge.c -- age-based retention passes (sdk/purge.h). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include "sdk/purge.h"
#include "sdk/batchjob.h"
#include "sdk/instant.h"
#include "sdk/pg.h"

#define MAX_BATCHES 20

struct pass {
	const struct pc_purge_job *job;
	const struct pc_purge *p;
};

static long long age_s(const struct pc_purge *p)
{
	/* declared with a lower bound of 1 (the host refuses less) */
	return pc_api->config_num(p->age_key) * p->unit_s;
}

static int purge_batch(void *ud, int64_t now_us, int batch)
{
	const struct pass *ps = ud;
	const char *params[2];
	PGresult *res;
	int n;

	params[0] = pc_time_param(now_us - age_s(ps->p) * 1000000);
	params[1] = pc_api->sprintf("%d", batch);
	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	res = pc_api->db_exec_prepared(pc_api->sprintf("%s%s", ps->job->stmt_prefix,
			ps->p->name), ps->p->sql, 2, params);
	if (!pc_res_ok(res, PGRES_COMMAND_OK)) {
		pc_api->db_rollback();
		return PIN_ERR_DB;
	}
	n = atoi(PQcmdTuples(res));
	if (pc_api->db_commit() != 0)
		return PIN_ERR_DB;
	return n;
}

int pc_purge_run(void *ud)
{
	const struct pc_purge_job *job = ud;
	int64_t now_us = pc_api->now_us();
	int batch = pc_batch_size(pc_api->sprintf("job.%s.batch", job->job));
	int total = 0, n;

	for (size_t i = 0; i < job->ntables; i++) {
		struct pass ps = { job, &job->tables[i] };

		n = pc_batch_loop_ud(purge_batch, &ps, now_us, batch, MAX_BATCHES);
		if (n < 0)
			return n;
		if (n > 0) {
			pc_api->metric_add(job->metric,
				pc_api->sprintf("table=\"%s\"", ps.p->name), n);
			pc_api->log(PIN_LOG_INFO, job->log_msg, "table", ps.p->name,
				"count", pc_api->sprintf("%d", n), NULL);
		}
		total += n;
	}
	return total;
}
