/* sdk/batchjob.h -- polling jobs that work in batches. */
#ifndef PIN_SDK_BATCHJOB_H
#define PIN_SDK_BATCHJOB_H

#include "sdk/core.h"

/* One batch of a job in its own transaction (FOR UPDATE SKIP LOCKED):
 * rows processed (>= 0) or a negative PIN_ERR*. */
typedef int (*pc_batch_fn)(int64_t now_us, int batch);
/* The value of the declared config key (e.g. "job.reminder-dispatch.batch",
 * declared with bounds 1..10000 and its default by the plugin). */
int pc_batch_size(const char *key);
/* One job pass: fn(now_us, batch) until a batch comes back short or after
 * max_batches (the next pass continues).  The total (>= 0), or the first
 * negative result of fn. */
int pc_batch_loop(pc_batch_fn fn, int64_t now_us, int batch, int max_batches);
/* The same with user data for fn (no thread-local state needed in the
 * plugin: a plugin is unloaded, its TLS must not outlive it). */
typedef int (*pc_batch_ud_fn)(void *ud, int64_t now_us, int batch);
int pc_batch_loop_ud(pc_batch_ud_fn fn, void *ud, int64_t now_us, int batch,
		int max_batches);
/* Gauge metric{labels} = age in seconds of the oldest due row at now_us, 0
 * when none.  sql (prepared as stmt) takes $1 = now (timestamptz) and
 * selects the epoch microseconds of min(<due column>) of the due rows. */
void pc_set_lag(const char *stmt, const char *sql, int64_t now_us,
		const char *metric, const char *labels);

#endif
