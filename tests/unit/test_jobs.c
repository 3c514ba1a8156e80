/* test_jobs.c -- pin_jobs_run_shards (ABI 1.5 api->run_shards).
 *
 * Expectations (host/include/pin/plugin.h):
 *  - fn(ud, k, n) runs once for every k of 0 .. n-1, k = 0 on the calling
 *    thread, every other k on a thread of its own, all at the same time;
 *  - each shard thread has its own arena and the caller's trace id, with a
 *    traceparent of its own (a child span of the caller's);
 *  - the result is the sum of the shards' results, or the first negative
 *    one in k order (after every shard ran); n outside 1..16 is PIN_ERR
 *    without a call.
 * No database: fn does not touch api->db().
 */
#include <pthread.h>
#include <stdio.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include <check.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "suites.h"

#define N 4

struct seen {
	pthread_t thr[N];
	struct pin_arena *arena[N];
	char trace[N][80], tparent[N][56];
	int calls[N];
	atomic_int running, max_running;
	int fail_k;         /* this k returns PIN_ERR_DB (-1: none) */
};

static int shard(void *ud, int k, int n)
{
	struct seen *s = ud;
	int now;

	ck_assert_int_eq(n, N);
	now = atomic_fetch_add(&s->running, 1) + 1;
	for (int m = atomic_load(&s->max_running); now > m &&
			!atomic_compare_exchange_weak(&s->max_running, &m, now);)
		;
	/* wait (bounded) until every shard is in: they must run at once */
	for (int i = 0; i < 2000 && atomic_load(&s->max_running) < N; i++)
		usleep(1000);
	s->thr[k] = pthread_self();
	s->arena[k] = pin_arena_current();
	snprintf(s->trace[k], sizeof s->trace[k], "%s", pin_trace_get() ? pin_trace_get() : "");
	snprintf(s->tparent[k], sizeof s->tparent[k], "%s",
			pin_traceparent_get() ? pin_traceparent_get() : "");
	s->calls[k]++;
	atomic_fetch_sub(&s->running, 1);
	return k == s->fail_k ? PIN_ERR_DB : 10 + k;
}

START_TEST(every_shard_once_at_once_own_thread_arena_span)
{
	static struct seen s;
	struct pin_arena *a = pin_arena_new();
	char trace[80], tparent[56];

	memset(&s, 0, sizeof s);
	s.fail_k = -1;
	pin_arena_set_current(a);
	snprintf(trace, sizeof trace, "%s", pin_trace_start(NULL));
	snprintf(tparent, sizeof tparent, "%s", pin_traceparent_get());
	ck_assert_int_eq(pin_jobs_run_shards(N, shard, &s), 10 + 11 + 12 + 13);
	ck_assert_int_eq(atomic_load(&s.max_running), N);
	ck_assert(pthread_equal(s.thr[0], pthread_self()));
	ck_assert_ptr_eq(s.arena[0], a);
	for (int k = 0; k < N; k++) {
		ck_assert_int_eq(s.calls[k], 1);
		ck_assert_str_eq(s.trace[k], trace);
		if (k == 0) {
			ck_assert_str_eq(s.tparent[k], tparent);
			continue;
		}
		ck_assert_ptr_nonnull(s.arena[k]);
		ck_assert_ptr_ne(s.arena[k], a);
		ck_assert_str_ne(s.tparent[k], tparent);
		ck_assert(strncmp(s.tparent[k], tparent, 35) == 0);   /* same trace-id */
		for (int j = 0; j < k; j++)
			ck_assert(!pthread_equal(s.thr[k], s.thr[j]));
	}
	/* the caller's trace is its own again */
	ck_assert_str_eq(pin_traceparent_get(), tparent);
	pin_trace_set(NULL);
	pin_arena_set_current(NULL);
	pin_arena_free(a);
}
END_TEST

START_TEST(first_negative_after_all_ran_and_bad_n)
{
	static struct seen s;

	memset(&s, 0, sizeof s);
	s.fail_k = 2;
	ck_assert_int_eq(pin_jobs_run_shards(N, shard, &s), PIN_ERR_DB);
	for (int k = 0; k < N; k++)
		ck_assert_int_eq(s.calls[k], 1);
	memset(&s, 0, sizeof s);
	s.fail_k = -1;
	ck_assert_int_eq(pin_jobs_run_shards(0, shard, &s), PIN_ERR);
	ck_assert_int_eq(pin_jobs_run_shards(17, shard, &s), PIN_ERR);
	ck_assert_int_eq(s.calls[0], 0);
}
END_TEST

Suite *make_jobs_suite(void)
{
	Suite *s = suite_create("jobs");
	TCase *t = tcase_create("run_shards");

	/* shards run one after the other wait 2 s each for the others: the
	 * assertion, not the timeout, must say so */
	tcase_set_timeout(t, 30);

	tcase_add_test(t, every_shard_once_at_once_own_thread_arena_span);
	tcase_add_test(t, first_negative_after_all_ran_and_bad_n);
	suite_add_tcase(s, t);
	return s;
}
