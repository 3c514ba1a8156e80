/* test_consume.c -- sdk/consume.c: the run driver of set-based batch
 * handlers (pc_batch_runs: runs cut where a key repeats in any case, alone
 * items, per-item data and batch indexes, a verdict set by a flush, the
 * rows' JSON text) and pc_col_index (the rows of a result by a column's
 * text, case-insensitive, the first of equal values). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <json-c/json.h>
#include <libpq-fe.h>

#include "sdk/sdk.h"
#include "suites.h"
#define FAKE_ARENA_SIZE (1 << 20)
#include "fake_host.h"

/* ---- a fake host: what the driver and the index use */




static struct pin_host_api api;

static void setup(void)
{
	api.alloc = t_alloc;
	api.now_us = t_now;
	api.fmt_time = t_fmt_time;
	fake_arena_reset();
	pc_api = &api;
}

/* ---- pc_col_index */

static PGresult *one_col(int n, const char *const *v)
{
	PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	PGresAttDesc a = { .name = (char *)"id", .format = 0, .typlen = -1, .atttypmod = -1 };

	ck_assert(PQsetResultAttrs(r, 1, &a));
	for (int k = 0; k < n; k++)
		ck_assert(PQsetvalue(r, k, 0, (char *)v[k], (int)strlen(v[k])));
	return r;
}

START_TEST(col_index_finds_every_row_any_case)
{
	enum { N = 600 };
	static char ids[N][37], up[37];
	const char *v[N];
	struct pc_col_index ix;
	PGresult *r;

	for (int k = 0; k < N; k++) {
		snprintf(ids[k], sizeof(ids[k]), "b0000000-0000-4000-8007-%012x", k * 7919);
		v[k] = ids[k];
	}
	r = one_col(N, v);
	pc_col_index_init(&ix, r, 0);
	for (int k = 0; k < N; k++) {
		ck_assert_int_eq(pc_col_index_find(&ix, ids[k]), k);
		for (int i = 0; i < 37; i++)
			up[i] = (char)(ids[k][i] >= 'a' && ids[k][i] <= 'f' ? ids[k][i] - 32 : ids[k][i]);
		ck_assert_int_eq(pc_col_index_find(&ix, up), k);
	}
	ck_assert_int_eq(pc_col_index_find(&ix, "b0000000-0000-4000-8007-ffffffffffff"), -1);
	PQclear(r);
}
END_TEST

START_TEST(col_index_first_of_equal_values_and_empty)
{
	const char *v[] = { "x", "Y", "y", "x" };
	struct pc_col_index ix;
	PGresult *r = one_col(4, v), *e = one_col(0, v);

	pc_col_index_init(&ix, r, 0);
	ck_assert_int_eq(pc_col_index_find(&ix, "X"), 0);
	ck_assert_int_eq(pc_col_index_find(&ix, "y"), 1);
	pc_col_index_init(&ix, e, 0);
	ck_assert_int_eq(pc_col_index_find(&ix, "x"), -1);
	PQclear(r);
	PQclear(e);
}
END_TEST

/* ---- pc_batch_runs */

/* what the flushes saw, one line per run: "key@idx:data ... [alone] rows" */
static char seen[2048];
static int fail_at = -1;        /* flush number that answers RETRY */
static int nflush;

/* key = payload.k; "alone" when payload.alone; FATAL when no k */
static enum pin_consume_status t_parse(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_batch_item *it, void *ud)
{
	json_object *v;

	(void)ud;
	if (!json_object_object_get_ex(msg->payload, "k", &v))
		return pc_consume_fail(NULL, res, PIN_CONSUME_FATAL, "BAD", "no k", NULL);
	it->key = json_object_get_string(v);
	it->data = (void *)msg;
	it->alone = json_object_object_get_ex(msg->payload, "alone", NULL);
	if (!it->alone)
		pc_batch_row_str(pc_batch_item_row(it), "k", it->key);
	return PIN_CONSUME_OK;
}

static enum pin_consume_status t_flush(struct pc_batch_run *run,
		struct pin_consume_result *res, void *ud)
{
	size_t len = strlen(seen);

	(void)res;
	(void)ud;
	for (size_t j = 0; j < run->n; j++) {
		ck_assert_ptr_eq(run->data[j], run->msg[j]);
		ck_assert_int_eq(pc_batch_run_find(run, run->key[j]), (long)j);
		len += (size_t)snprintf(seen + len, sizeof(seen) - len, "%s@%zu ",
				run->key[j], run->idx[j]);
		if (!strcmp(run->key[j], "f"))      /* the flush's own verdict */
			run->st[run->idx[j]] = pc_consume_fail(NULL, &run->res[run->idx[j]],
					PIN_CONSUME_FATAL, "RANGE", "f", NULL);
	}
	if (run->alone)
		len += (size_t)snprintf(seen + len, sizeof(seen) - len, "alone ");
	else
		len += (size_t)snprintf(seen + len, sizeof(seen) - len, "%s ",
				pc_batch_run_json(run));
	snprintf(seen + len, sizeof(seen) - len, "|");
	return nflush++ == fail_at ? PIN_CONSUME_RETRY : PIN_CONSUME_OK;
}

/* runs msgs of payloads pl[0..n) through the driver */
static enum pin_consume_status drive(size_t n, const char *const *pl,
		enum pin_consume_status *st, struct pin_consume_result *res)
{
	struct pin_msg m[16];
	const struct pin_msg *mp[16] = { NULL };
	enum pin_consume_status rc;

	seen[0] = '\0';
	nflush = 0;
	for (size_t i = 0; i < n; i++) {
		memset(&m[i], 0, sizeof(m[i]));
		m[i].payload = json_tokener_parse(pl[i]);
		m[i].created_at_us = t_now() + (int64_t)i * 1000;
		mp[i] = &m[i];
	}
	rc = pc_batch_runs(mp, n, st, res, t_parse, t_flush, NULL);
	for (size_t i = 0; i < n; i++)
		json_object_put(m[i].payload);
	return rc;
}

START_TEST(runs_cut_on_repeat_alone_and_fatal)
{
	static const char *const pl[] = { "{\"k\":\"a\"}", "{\"k\":\"b\"}", "{}",
		"{\"k\":\"A\"}", "{\"k\":\"f\"}", "{\"k\":\"c\",\"alone\":1}", "{\"k\":\"d\"}" };
	enum pin_consume_status st[7];
	struct pin_consume_result res[7];

	memset(res, 0, sizeof(res));
	fail_at = -1;
	ck_assert_int_eq(drive(7, pl, st, res), PIN_CONSUME_OK);
	ck_assert_str_eq(seen,
		"a@0 b@1 [{\"last_event_at\":\"2025-12-02T00:00:00Z\",\"k\":\"a\"},"
		"{\"last_event_at\":\"2025-12-02T00:00:00.001000Z\",\"k\":\"b\"}] |"
		"A@3 f@4 [{\"last_event_at\":\"2025-12-02T00:00:00.003000Z\",\"k\":\"A\"},"
		"{\"last_event_at\":\"2025-12-02T00:00:00.004000Z\",\"k\":\"f\"}] |"
		"c@5 alone |"
		"d@6 [{\"last_event_at\":\"2025-12-02T00:00:00.006000Z\",\"k\":\"d\"}] |");
	ck_assert_int_eq(st[0], PIN_CONSUME_OK);
	ck_assert_int_eq(st[2], PIN_CONSUME_FATAL);
	ck_assert_str_eq(res[2].code, "BAD");
	ck_assert_int_eq(st[4], PIN_CONSUME_FATAL);
	ck_assert_str_eq(res[4].code, "RANGE");
	ck_assert_int_eq(st[6], PIN_CONSUME_OK);
}
END_TEST

START_TEST(runs_give_up_stops_parsing)
{
	static const char *const pl[] = { "{\"k\":\"a\"}", "{\"k\":\"a\"}", "{\"k\":\"b\"}",
		"{\"k\":\"b\"}" };
	enum pin_consume_status st[4] = { 9, 9, 9, 9 };
	struct pin_consume_result res[4];

	memset(res, 0, sizeof(res));
	fail_at = 0;                    /* the first run's flush */
	ck_assert_int_eq(drive(4, pl, st, res), PIN_CONSUME_RETRY);
	ck_assert_int_eq(nflush, 1);
	ck_assert_int_eq(st[2], 9);     /* never parsed */
}
END_TEST

Suite *make_consume_suite(void)
{
	Suite *s = suite_create("consume");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, col_index_finds_every_row_any_case);
	tcase_add_test(tc, col_index_first_of_equal_values_and_empty);
	tcase_add_test(tc, runs_cut_on_repeat_alone_and_fatal);
	tcase_add_test(tc, runs_give_up_stops_parsing);
	suite_add_tcase(s, tc);
	return s;
}
