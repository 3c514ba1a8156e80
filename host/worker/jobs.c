/*
 * jobs.c -- the periodic job scheduler of worker mode.
 *
 * One thread per registered job (pin_reg.jobs), each with its own database
 * connection (thread-local in db.c) and its own arena, reset after every
 * pass.  Interval: job.<name>.interval_ms, which the job's plugin declares
 * with the job's own default (PIN_CFG_JOB_INTERVAL); a plugin that declares
 * none (ABI < 1.7) gets the job's default or an undeclared file value.
 * The sleep between passes waits on a condition variable, so a stop is
 * prompt.  Handlers take their own transactions; one left open is rolled
 * back here.
 *
 * A job may split a pass into shards that run at once (ABI 1.5
 * run_shards, pin_jobs_run_shards below): shard 0 on the job's thread, the
 * others on threads started for the call, each with its own connection,
 * arena and a child span of the pass's trace.
 *
 * Metrics: pin_job_processed_total{job="..."}, pin_job_duration_seconds{job=...} (histogram)
 * (gauge, last pass), pin_job_errors_total{job=...},
 * pin_job_last_run_timestamp_seconds{job=...}.
 * Log: one line per pass when it processed rows or failed.
 */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "worker.h"

struct job_thread {
	pthread_t thr;
	const struct pin_job_entry *e;
	int interval_ms;
	bool started;
};

static struct job_thread *jt;
static size_t njt;
static struct pin_waiter jobs_w;

static int job_interval(const struct pin_job_entry *e)
{
	char key[256];
	long long v;

	snprintf(key, sizeof(key), "job.%s.interval_ms", e->j.name);
	v = pin_config_int_def(key, e->j.interval_ms > 0 ? e->j.interval_ms : 60000);
	if (v < 10)
		v = 10;
	if (v > 86400000LL)
		v = 86400000LL;
	return (int)v;
}

/* One pass of one job on the calling thread (arena already current).
 * Returns the handler's result. */
/* After a pass (or a shard of one, job NULL): a transaction the handler
 * left open is rolled back, with a warning. */
static void rollback_left_open(const char *job)
{
	if (!pin_db_in_tx())
		return;
	if (job)
		pin_log(PIN_LOG_WARN, "job left a transaction open; rolled back",
				"job", job, NULL);
	else
		pin_log(PIN_LOG_WARN, "job shard left a transaction open; rolled back",
				NULL);
	pin_db_rollback();
}

static int job_pass(const struct pin_job_entry *e)
{
	char labels[300], sn[24], sms[24];
	int64_t t0 = pin_clock_now_us(), ms;
	int rc;

	snprintf(labels, sizeof(labels), "job=\"%s\"", e->j.name);
	pin_trace_start(NULL);     /* a new trace per pass */
	rc = e->j.fn(e->j.ud);
	rollback_left_open(e->j.name);
	ms = (pin_clock_now_us() - t0) / 1000;
	pin_metric_observe("pin_job_duration_seconds", labels,
			(double)(pin_clock_now_us() - t0) / 1e6);
	pin_metric_set("pin_job_last_run_timestamp_seconds", labels,
			(double)(pin_clock_now_us() / 1000000));
	snprintf(sms, sizeof(sms), "%lld", (long long)ms);
	if (rc < 0) {
		pin_metric_add("pin_job_errors_total", labels, 1);
		pin_log(PIN_LOG_ERROR, "job pass failed", "job", e->j.name,
				"rc", rc == PIN_ERR_DB ? "PIN_ERR_DB" : "PIN_ERR",
				"duration_ms", sms, NULL);
	} else {
		pin_metric_add("pin_job_processed_total", labels, rc);
		if (rc > 0) {
			snprintf(sn, sizeof(sn), "%d", rc);
			pin_log(PIN_LOG_INFO, "job pass", "job", e->j.name,
					"processed", sn, "duration_ms", sms, NULL);
		}
	}
	pin_trace_set(NULL);
	return rc;
}

/* ---- shards of a pass (ABI 1.5 run_shards) ----------------------------- */

#define MAX_SHARDS 16

struct shard {
	pthread_t thr;
	pin_shard_fn fn;
	void *ud;
	int k, n, rc;
	char parent[56];        /* the caller's traceparent, or "" */
	bool started;
};

/* Shard k >= 1 on its own thread: a fresh arena and connection, the
 * caller's trace; a transaction left open is rolled back as after a pass. */
static void *shard_main(void *arg)
{
	struct shard *s = arg;
	struct pin_arena *a = pin_arena_new();

	if (!a) {
		s->rc = PIN_ERR;
		return NULL;
	}
	pin_arena_set_current(a);
	pin_trace_start(s->parent[0] ? s->parent : NULL);
	s->rc = s->fn(s->ud, s->k, s->n);
	rollback_left_open(NULL);
	pin_trace_set(NULL);
	pin_arena_set_current(NULL);
	pin_arena_free(a);
	pin_db_close_thread();
	return NULL;
}

int pin_jobs_run_shards(int n, pin_shard_fn fn, void *ud)
{
	struct shard s[MAX_SHARDS];
	const char *tp = pin_traceparent_get();
	int rc = 0, sum = 0;

	if (n < 1 || n > MAX_SHARDS || !fn || pin_db_in_tx())
		return PIN_ERR;         /* the caller must not be in a transaction */
	for (int k = 0; k < n; k++) {
		s[k] = (struct shard){ .fn = fn, .ud = ud, .k = k, .n = n };
		snprintf(s[k].parent, sizeof s[k].parent, "%s", tp ? tp : "");
		if (k > 0)
			s[k].started = pthread_create(&s[k].thr, NULL, shard_main,
					&s[k]) == 0;
	}
	s[0].rc = fn(ud, 0, n);
	for (int k = 1; k < n; k++) {
		if (s[k].started)
			pthread_join(s[k].thr, NULL);
		else
			s[k].rc = fn(ud, k, n);   /* no thread: here, after shard 0 */
	}
	for (int k = 0; k < n; k++) {
		if (s[k].rc < 0 && rc == 0)
			rc = s[k].rc;
		sum += s[k].rc > 0 ? s[k].rc : 0;
	}
	return rc < 0 ? rc : sum;
}

/* Waits ms or until stop; returns true when stopping. */
static bool jobs_wait(int ms)
{
	return pin_waiter_sleep(&jobs_w, ms);
}

static void *job_main(void *arg)
{
	struct job_thread *t = arg;
	struct pin_arena *a = pin_arena_new();

	pin_arena_set_current(a);
	/* spread the first passes a little so the jobs do not all start at once */
	if (!jobs_wait((int)((t - jt) * 100)))
		for (;;) {
			job_pass(t->e);
			pin_arena_reset(a);
			if (jobs_wait(t->interval_ms))
				break;
		}
	pin_arena_set_current(NULL);
	pin_arena_free(a);
	pin_db_close_thread();
	return NULL;
}

int pin_jobs_start(void)
{
	if (jt || pin_reg.njobs == 0)
		return 0;
	pin_waiter_init(&jobs_w);
	jt = calloc(pin_reg.njobs, sizeof(*jt));
	if (!jt)
		return -1;
	njt = pin_reg.njobs;
	for (size_t i = 0; i < njt; i++) {
		char ms[24];

		jt[i].e = &pin_reg.jobs[i];
		jt[i].interval_ms = job_interval(jt[i].e);
		if (pthread_create(&jt[i].thr, NULL, job_main, &jt[i]) != 0) {
			pin_log(PIN_LOG_ERROR, "cannot start a job thread",
					"job", jt[i].e->j.name, NULL);
			pin_jobs_stop();
			return -1;
		}
		jt[i].started = true;
		snprintf(ms, sizeof(ms), "%d", jt[i].interval_ms);
		pin_log(PIN_LOG_INFO, "job scheduled", "job", jt[i].e->j.name,
				"plugin", jt[i].e->plugin ? jt[i].e->plugin : "",
				"interval_ms", ms, NULL);
	}
	return 0;
}

void pin_jobs_stop(void)
{
	if (!jt)
		return;
	pin_waiter_stop(&jobs_w);
	for (size_t i = 0; i < njt; i++)
		if (jt[i].started)
			pthread_join(jt[i].thr, NULL);
	free(jt);
	jt = NULL;
	njt = 0;
	pin_waiter_destroy(&jobs_w);
}

int pin_jobs_run_once(void)
{
	struct pin_arena *prev = pin_arena_current(), *a = pin_arena_new();
	int rc = 0;

	pin_arena_set_current(a);
	for (size_t i = 0; i < pin_reg.njobs; i++) {
		if (job_pass(&pin_reg.jobs[i]) < 0)
			rc = -1;
		pin_arena_reset(a);
	}
	pin_arena_set_current(prev);
	pin_arena_free(a);
	return rc;
}
