/* batchjob.c -- polling jobs that work in batches. */
#include "config.h"
#include "sdk/batchjob.h"
#include "sdk/instant.h"
#include "sdk/pg.h"

int pc_batch_size(const char *key)
{
	long long batch = pc_api->config_num(key);

	/* the declaration bounds it (1..10000); an undeclared key reads 0 */
	return batch < 1 ? 1 : batch > 10000 ? 10000 : (int)batch;
}

int pc_batch_loop_ud(pc_batch_ud_fn fn, void *ud, int64_t now_us, int batch,
		int max_batches)
{
	int total = 0, n, k;

	for (k = 0; k < max_batches; k++) {
		n = fn(ud, now_us, batch);
		if (n < 0)
			return n;
		total += n;
		if (n < batch)
			break;
	}
	return total;
}

struct plain { pc_batch_fn fn; };

static int call_plain(void *ud, int64_t now_us, int batch)
{
	return ((const struct plain *)ud)->fn(now_us, batch);
}

int pc_batch_loop(pc_batch_fn fn, int64_t now_us, int batch, int max_batches)
{
	struct plain p = { fn };

	return pc_batch_loop_ud(call_plain, &p, now_us, batch, max_batches);
}

void pc_set_lag(const char *stmt, const char *sql, int64_t now_us,
		const char *metric, const char *labels)
{
	const char *p[1] = { pc_time_param(now_us) };
	PGresult *res = pc_api->db_exec_prepared(stmt, sql, 1, p);
	double lag = 0;

	if (pc_res_ok(res, PGRES_TUPLES_OK) && PQntuples(res) == 1 &&
			!PQgetisnull(res, 0, 0))
		lag = (double)(now_us - pc_col_us(res, 0, 0)) / 1e6;
	pc_api->metric_set(metric, labels, lag);
}
