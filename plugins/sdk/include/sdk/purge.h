/* sdk/purge.h -- retention jobs: age-based deletes of one schema's tables in
 * small FOR UPDATE SKIP LOCKED batches, one transaction each. */
#ifndef PIN_SDK_PURGE_H
#define PIN_SDK_PURGE_H

#include <stddef.h>
#include "sdk/core.h"

struct pc_purge {
	const char *name;        /* metric label and prepared statement suffix */
	const char *age_key;     /* declared config key of the age, in units
	                            (the plugin declares it, with its default) */
	long long unit_s;        /* 86400 (days) or 3600 (hours) */
	const char *sql;         /* $1 = cutoff (timestamptz), $2 = batch */
};

/* Which tables, and how the pass is named and counted. */
struct pc_purge_job {
	const char *job;         /* job name; batch size from "job.<job>.batch"
	                            (declared by the plugin) */
	const char *stmt_prefix; /* prepared statement names: <prefix><name> */
	const char *metric;      /* counter{table} of deleted rows */
	const char *log_msg;     /* INFO line per table with deletions */
	const struct pc_purge *tables;
	size_t ntables;
};

/* One pass over every table (at most 20 batches each; the next pass
 * continues): rows deleted (>= 0) or a negative PIN_ERR*.  A job function:
 * register it with ud = the const struct pc_purge_job. */
int pc_purge_run(void *ud);

#endif
