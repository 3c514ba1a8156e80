/* test_loader.c -- pin_plugin_load_file() / pin_plugins_load() on the
 * fixture plugins of tests/fixtures (built as check_LTLIBRARIES).
 *
 * Expectations: a refused plugin leaves an error naming the mismatched
 * field ("abi_major", "abi_minor") or the plugin's own init reason; a good
 * plugin's init runs and its route and job land in pin_reg with the plugin's
 * name; pin_plugins_load() returning -1 has already unloaded everything
 * (core.h). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "suites.h"

#ifndef FIXTURE_DIR
#define FIXTURE_DIR "tests/fixtures/.libs"
#endif

static char err[512];

static int load(const char *name)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/%s.so", FIXTURE_DIR, name);
	err[0] = 0;
	return pin_plugin_load_file(path, err, sizeof(err));
}

static const struct pin_route_entry *find_route(const char *pattern)
{
	size_t i;

	for (i = 0; i < pin_reg.nroutes; i++)
		if (pin_reg.routes[i].r.pattern && strcmp(pin_reg.routes[i].r.pattern, pattern) == 0)
			return &pin_reg.routes[i];
	return NULL;
}

static void setup(void)
{
	pin_config_free();
}

static void teardown(void)
{
	pin_plugins_unload();
	pin_registry_free();
	pin_config_free();
}

START_TEST(test_good)
{
	size_t nroutes = pin_reg.nroutes, njobs = pin_reg.njobs;
	const struct pin_route_entry *e;
	size_t i;
	int found_job = 0;

	ck_assert_msg(load("good") == 0, "refused: %s", err);
	ck_assert_uint_eq(pin_reg.nroutes, nroutes + 1);
	e = find_route("/api/v1/test/good/{id}");
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(e->r.method, "GET");
	ck_assert_ptr_nonnull(e->r.fn);
	ck_assert_ptr_nonnull(e->plugin);
	ck_assert_str_eq(e->plugin, "good");
	/* compiled: the router finds it */
	ck_assert_int_eq(e->nsegs, 5);

	ck_assert_uint_eq(pin_reg.njobs, njobs + 1);
	for (i = 0; i < pin_reg.njobs; i++)
		if (strcmp(pin_reg.jobs[i].j.name, "good-job") == 0)
			found_job = 1;
	ck_assert(found_job);
}
END_TEST

START_TEST(test_good_routes_match)
{
	struct pin_match m;

	ck_assert_msg(load("good") == 0, "refused: %s", err);
	memset(&m, 0, sizeof(m));
	ck_assert_int_eq(pin_router_match(pin_reg.routes, pin_reg.nroutes, "GET",
			"/api/v1/test/good/17", &m), 0);
	ck_assert_str_eq(m.e->r.pattern, "/api/v1/test/good/{id}");
	ck_assert_int_eq(m.nparams, 1);
	ck_assert_str_eq(m.values[0], "17");
	pin_match_clear(&m);
}
END_TEST

START_TEST(test_good_twice)
{
	ck_assert_msg(load("good") == 0, "refused: %s", err);
	ck_assert_int_eq(load("good"), -1);
	ck_assert(err[0] != 0);
	ck_assert_uint_eq(pin_reg.nroutes, 1);
}
END_TEST

START_TEST(test_badmajor)
{
	size_t nroutes = pin_reg.nroutes;

	ck_assert_int_eq(load("badmajor"), -1);
	ck_assert_msg(strstr(err, "abi_major") != NULL, "err: %s", err);
	ck_assert_uint_eq(pin_reg.nroutes, nroutes);
}
END_TEST

START_TEST(test_badminor)
{
	size_t nroutes = pin_reg.nroutes;

	ck_assert_int_eq(load("badminor"), -1);
	ck_assert_msg(strstr(err, "abi_minor") != NULL, "err: %s", err);
	ck_assert_uint_eq(pin_reg.nroutes, nroutes);
}
END_TEST

START_TEST(test_failinit)
{
	ck_assert_int_eq(load("failinit"), -1);
	ck_assert_msg(strstr(err, "failinit: refused on purpose") != NULL, "err: %s", err);
}
END_TEST

START_TEST(test_missing)
{
	ck_assert_int_eq(load("does-not-exist"), -1);
	ck_assert(err[0] != 0);
}
END_TEST

START_TEST(test_not_a_plugin)
{
	/* a shared object without pin_plugin_desc */
	err[0] = 0;
	ck_assert_int_eq(pin_plugin_load_file("libc.so.6", err, sizeof(err)), -1);
	ck_assert(err[0] != 0);
}
END_TEST

static int noop_route(struct pin_req *r, void *ud)
{
	(void)r;
	(void)ud;
	return 0;
}

/* ABI 1.3: route_replica_ok marks a registered GET route, nothing else */
START_TEST(test_route_replica_ok)
{
	struct pin_registrar *reg = pin_registrar_new("unit");
	const struct pin_route get = { "GET", "/unit/replica/{id}", PIN_ACTOR_PUBLIC,
		NULL, 0, noop_route, NULL, NULL };
	const struct pin_route post = { "POST", "/unit/replica/{id}", PIN_ACTOR_PUBLIC,
		NULL, 0, noop_route, NULL, NULL };

	ck_assert_ptr_nonnull(reg);
	ck_assert(PIN_API_HAS(reg, route_replica_ok));
	ck_assert_int_eq(reg->route(reg, &get), 0);
	ck_assert_int_eq(reg->route(reg, &post), 0);
	ck_assert(!find_route("/unit/replica/{id}")->replica_ok);
	ck_assert_int_eq(reg->route_replica_ok(reg, "POST", "/unit/replica/{id}"), -1);
	ck_assert_int_eq(reg->route_replica_ok(reg, "GET", "/unit/nothing"), -1);
	ck_assert_int_eq(reg->route_replica_ok(reg, "GET", "/unit/replica/{id}"), 0);
	for (size_t i = 0; i < pin_reg.nroutes; i++)
		if (!strcmp(pin_reg.routes[i].r.pattern, "/unit/replica/{id}"))
			ck_assert(pin_reg.routes[i].replica_ok ==
				!strcmp(pin_reg.routes[i].r.method, "GET"));
	pin_registrar_free(reg);
}
END_TEST

static enum pin_consume_status noop_consume(const struct pin_msg *m,
		struct pin_consume_result *res, void *ud)
{
	(void)m;
	(void)res;
	(void)ud;
	return PIN_CONSUME_OK;
}

static enum pin_consume_status noop_batch(const struct pin_msg *const *m, size_t n,
		enum pin_consume_status *st, struct pin_consume_result *res, void *ud)
{
	(void)m;
	(void)n;
	(void)st;
	(void)res;
	(void)ud;
	return PIN_CONSUME_OK;
}

static const struct pin_consumer_entry *find_consumer(const char *group)
{
	for (size_t i = 0; i < pin_reg.nconsumers; i++)
		if (!strcmp(pin_reg.consumers[i].c.group, group))
			return &pin_reg.consumers[i];
	return NULL;
}

/* [consume] ABI 1.4: batch_fn and batch_max are read from 1.4 plugins
 * only; a 1.3 plugin's record ends before them (a record of exactly that
 * size on the heap: ASan would see a read past it) and registers a
 * per-message consumer with the host's batch size */
START_TEST(test_consumer_batch_members)
{
	static const char *const topics[] = { "pin.unit.v1", NULL };
	size_t old = offsetof(struct pin_consumer, batch_fn);
	struct pin_consumer full13 = { .group = "unit-13", .topics = topics,
		.fn = noop_consume };
	void *c13 = malloc(old);
	struct pin_consumer c14 = { .group = "unit-14", .topics = topics,
		.fn = noop_consume, .batch_fn = noop_batch, .batch_max = 32 };
	struct pin_registrar *reg = pin_registrar_new("unit");
	const struct pin_consumer_entry *e;

	ck_assert_ptr_nonnull(reg);
	ck_assert_ptr_nonnull(c13);
	memcpy(c13, &full13, old);
	pin_registrar_set_minor(reg, 3);
	ck_assert_int_eq(reg->consumer(reg, c13), 0);
	pin_registrar_set_minor(reg, 4);
	ck_assert_int_eq(reg->consumer(reg, &c14), 0);
	e = find_consumer("unit-13");
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_null(e->c.batch_fn);
	ck_assert_int_eq(e->c.batch_max, 0);
	ck_assert_ptr_eq(e->c.fn, noop_consume);
	e = find_consumer("unit-14");
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_eq(e->c.batch_fn, noop_batch);
	ck_assert_int_eq(e->c.batch_max, 32);
	free(c13);
	pin_registrar_free(reg);
}
END_TEST

/* ABI 1.8: dlq_metric / lag_metric / version_metric are read from 1.8
 * plugins only (a 1.7 record ends before them), copied for a 1.8 one, and
 * a name Prometheus would not take is refused */
START_TEST(test_consumer_seed_metrics_members)
{
	static const char *const topics[] = { "pin.unit.v1", NULL };
	size_t old = offsetof(struct pin_consumer, dlq_metric);
	struct pin_consumer full17 = { .group = "unit-17", .topics = topics,
		.fn = noop_consume };
	void *c17 = malloc(old);
	struct pin_consumer c18 = { .group = "unit-18", .topics = topics,
		.fn = noop_consume, .dlq_metric = "unit_dlq_total",
		.lag_metric = "unit_lag_seconds", .version_metric = "unit_mismatch_total" };
	struct pin_consumer bad = { .group = "unit-18-bad", .topics = topics,
		.fn = noop_consume, .dlq_metric = "unit dlq{x=\"1\"}" };
	struct pin_registrar *reg = pin_registrar_new("unit");
	const struct pin_consumer_entry *e;

	ck_assert_ptr_nonnull(reg);
	ck_assert_ptr_nonnull(c17);
	memcpy(c17, &full17, old);
	pin_registrar_set_minor(reg, 7);
	ck_assert_int_eq(reg->consumer(reg, c17), 0);
	pin_registrar_set_minor(reg, 8);
	ck_assert_int_eq(reg->consumer(reg, &c18), 0);
	ck_assert_int_eq(reg->consumer(reg, &bad), -1);
	e = find_consumer("unit-17");
	ck_assert_ptr_nonnull(e);
	ck_assert_ptr_null(e->c.dlq_metric);
	ck_assert_ptr_null(e->c.lag_metric);
	ck_assert_ptr_null(e->c.version_metric);
	e = find_consumer("unit-18");
	ck_assert_ptr_nonnull(e);
	ck_assert_str_eq(e->c.dlq_metric, "unit_dlq_total");
	ck_assert_str_eq(e->c.lag_metric, "unit_lag_seconds");
	ck_assert_str_eq(e->c.version_metric, "unit_mismatch_total");
	ck_assert_ptr_null(find_consumer("unit-18-bad"));
	free(c17);
	pin_registrar_free(reg);
}
END_TEST

/* ABI 1.8: a histogram named *_ms is observed in milliseconds (the seeds'
 * notifications_enqueue_duration_ms), any other in seconds */
START_TEST(test_histogram_ms_buckets)
{
	char *t;

	pin_metric_observe("unit_duration_ms", NULL, 4);          /* 4 ms */
	pin_metric_observe("unit_duration_seconds", NULL, 0.004); /* 4 ms */
	t = pin_metrics_render();
	ck_assert_ptr_nonnull(t);
	ck_assert_msg(strstr(t, "unit_duration_ms_bucket{le=\"2.5\"} 0\n") &&
		strstr(t, "unit_duration_ms_bucket{le=\"5\"} 1\n") &&
		strstr(t, "unit_duration_ms_bucket{le=\"60000\"} 1\n") &&
		strstr(t, "unit_duration_ms_sum 4\n"), "%s", t);
	ck_assert_msg(strstr(t, "unit_duration_seconds_bucket{le=\"0.0025\"} 0\n") &&
		strstr(t, "unit_duration_seconds_bucket{le=\"0.005\"} 1\n") &&
		strstr(t, "unit_duration_seconds_bucket{le=\"60\"} 1\n"), "%s", t);
	free(t);
}
END_TEST

START_TEST(test_load_list)
{
	ck_assert_int_eq(pin_plugins_load("good", FIXTURE_DIR), 0);
	ck_assert_ptr_nonnull(find_route("/api/v1/test/good/{id}"));
	pin_plugins_unload();
	ck_assert_uint_eq(pin_reg.nroutes, 0);
	ck_assert_uint_eq(pin_reg.njobs, 0);
}
END_TEST

START_TEST(test_load_list_fails_unloads)
{
	ck_assert_int_eq(pin_plugins_load("good,badminor", FIXTURE_DIR), -1);
	/* "-1: logged, already unloaded" */
	ck_assert_uint_eq(pin_reg.nroutes, 0);
	ck_assert_uint_eq(pin_reg.njobs, 0);
}
END_TEST

Suite *make_loader_suite(void)
{
	Suite *s = suite_create("loader");
	TCase *tc = tcase_create("load");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, test_good);
	tcase_add_test(tc, test_good_routes_match);
	tcase_add_test(tc, test_good_twice);
	tcase_add_test(tc, test_badmajor);
	tcase_add_test(tc, test_badminor);
	tcase_add_test(tc, test_failinit);
	tcase_add_test(tc, test_missing);
	tcase_add_test(tc, test_not_a_plugin);
	tcase_add_test(tc, test_route_replica_ok);
	tcase_add_test(tc, test_consumer_batch_members);
	tcase_add_test(tc, test_consumer_seed_metrics_members);
	tcase_add_test(tc, test_histogram_ms_buckets);
	tcase_add_test(tc, test_load_list);
	tcase_add_test(tc, test_load_list_fails_unloads);
	suite_add_tcase(s, tc);
	return s;
}
