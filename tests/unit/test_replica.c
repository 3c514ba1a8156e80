/* test_replica.c -- sdk/replica.c: the identity replica skeleton.  The two
 * statements it makes from a column list (the identity replica's, as
 * workers registers it), and both paths against a fake database: the
 * per-message upsert (parameters, stale, applied with the stored status,
 * alone without a statement) and the batch (runs of distinct users, the
 * stale count, applied per returned row, an alone message in its place). */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <json-c/json.h>
#include <libpq-fe.h>

#include "sdk/sdk.h"
#include "suites.h"
#define FAKE_ARENA_SIZE (1 << 18)
#include "fake_host.h"

/* ---- a fake host */
static struct pin_host_api api;
static struct pin_consumer got;         /* what the skeleton registered */
static char calls[4096];                /* "stmt(p1,p2,..) " per statement */
static PGresult *next_res;              /* the fake database's next answer */
static PGresult *handed[64];            /* every answer given, cleared at teardown */
static size_t nhanded;
static double stale;
static char applied_log[512], alone_log[256];




static char *t_sprintf(const char *fmt, ...)
{
	char *s = t_alloc(256);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s, 256, fmt, ap);
	va_end(ap);
	return s;
}

static void t_metric_add(const char *name, const char *labels, double v)
{
	(void)labels;
	if (!strcmp(name, "test_stale_total"))
		stale += v;
}

static PGresult *t_exec(const char *name, const char *sql, int n, const char *const *p)
{
	size_t len = strlen(calls);

	(void)sql;
	len += (size_t)snprintf(calls + len, sizeof(calls) - len, "%s(", name);
	for (int i = 0; i < n; i++)
		len += (size_t)snprintf(calls + len, sizeof(calls) - len, "%s%s",
				i ? "," : "", p[i] ? p[i] : "NULL");
	snprintf(calls + len, sizeof(calls) - len, ") ");
	/* the host's arena owns a result until the invocation ends: here the
	 * teardown clears what the fake database handed out */
	if (next_res && nhanded < sizeof handed / sizeof *handed)
		handed[nhanded++] = next_res;
	return next_res;
}

static void teardown(void)
{
	for (size_t i = 0; i < nhanded; i++) {
		size_t k;

		for (k = 0; k < i && handed[k] != handed[i]; k++)
			;
		if (k == i)
			PQclear(handed[i]);  /* once, however often it was handed */
	}
	nhanded = 0;
	next_res = NULL;
}

static int t_consumer(struct pin_registrar *reg, const struct pin_consumer *c)
{
	(void)reg;
	got = *c;
	return 0;
}

/* a result of (user_id, status) rows, "id:status" each */
static PGresult *rows(int n, const char *const *v)
{
	PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	PGresAttDesc a[2] = {
		{ .name = (char *)"user_id", .format = 0, .typlen = -1, .atttypmod = -1 },
		{ .name = (char *)"status", .format = 0, .typlen = -1, .atttypmod = -1 },
	};

	ck_assert(PQsetResultAttrs(r, 2, a));
	for (int k = 0; k < n; k++) {
		const char *c = strchr(v[k], ':');

		ck_assert(PQsetvalue(r, k, 0, (char *)v[k], (int)(c - v[k])));
		ck_assert(PQsetvalue(r, k, 1, (char *)c + 1, (int)strlen(c + 1)));
	}
	return r;
}

/* ---- the plugin side: payload {"u": id, "n": name, "gone": true?} */
static enum pin_consume_status t_parse(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_replica_row *row)
{
	row->user_id = pc_jstr(msg->payload, "u");
	if (!row->user_id)
		return pc_consume_fail(NULL, res, PIN_CONSUME_FATAL, "BAD", "no u", NULL);
	row->v[0] = pc_jstr(msg->payload, "n");
	row->v[1] = NULL;
	row->v[2] = "Active";
	row->alone = json_object_object_get_ex(msg->payload, "gone", NULL);
	return PIN_CONSUME_OK;
}

static enum pin_consume_status t_alone(const struct pin_msg *msg,
		struct pin_consume_result *res, const struct pc_replica_row *row)
{
	(void)msg;
	(void)res;
	snprintf(alone_log + strlen(alone_log), sizeof(alone_log) - strlen(alone_log),
			"%s/%s ", row->user_id, row->v[0] ? row->v[0] : "-");
	return PIN_CONSUME_OK;
}

static enum pin_consume_status t_applied(const struct pin_msg *msg,
		struct pin_consume_result *res, const char *user_id, const char *status)
{
	(void)res;
	snprintf(applied_log + strlen(applied_log), sizeof(applied_log) - strlen(applied_log),
			"%s=%s@%s ", user_id, status, msg->message_id);
	return PIN_CONSUME_OK;
}

static struct pc_replica rp = {
	.plugin = "test",
	.group = "test-replica",
	.inbox_table = "calendar.inbox",
	.table = "calendar.user_replicas",
	.cols = { "display_name", "avatar_url", "status", NULL },
	.has_created_at = 1,
	.stmt = "identity_upsert",
	.code_db = "DB",
	.what = "upsert",
	.stale_metric = "test_stale_total",
	.parse = t_parse,
	.alone = t_alone,
	.applied = t_applied,
};

static void setup(void)
{
	struct pin_registrar reg = { .size = sizeof(reg), .consumer = t_consumer };
	char err[128];

	memset(&api, 0, sizeof(api));
	api.alloc = t_alloc;
	api.now_us = t_now;
	api.fmt_time = t_fmt_time;
	api.sprintf = t_sprintf;
	api.metric_add = t_metric_add;
	api.db_exec_prepared = t_exec;
	fake_arena_reset();
	pc_api = &api;
	calls[0] = applied_log[0] = alone_log[0] = '\0';
	stale = 0;
	next_res = NULL;
	ck_assert_int_eq(pc_replica_register(&reg, &rp, err, sizeof(err)), 0);
}

static struct pin_msg msg_of(const char *id, const char *payload, int64_t created_us)
{
	struct pin_msg m = { .topic = PC_TOPIC_IDENTITY_USERS, .message_id = id,
		.contract_version = 1, .created_at_us = created_us };

	m.payload = json_tokener_parse(payload);
	ck_assert_ptr_nonnull(m.payload);
	return m;
}

START_TEST(statements_from_the_column_list)
{
	ck_assert_str_eq(got.group, "test-replica");
	ck_assert_str_eq(got.topics[0], PC_TOPIC_IDENTITY_USERS);
	ck_assert_ptr_null(got.topics[1]);
	ck_assert_ptr_eq(got.ud, &rp);
	ck_assert_ptr_nonnull(got.batch_fn);
	ck_assert_str_eq(rp.sql_one_,
		"INSERT INTO calendar.user_replicas AS r (user_id, display_name, avatar_url, "
		"status, last_event_at, created_at, updated_at) "
		"VALUES ($1::uuid, $2, $3, $4, $5::timestamptz, $6::timestamptz, $6::timestamptz) "
		"ON CONFLICT (user_id) DO UPDATE SET display_name = EXCLUDED.display_name, "
		"avatar_url = EXCLUDED.avatar_url, status = EXCLUDED.status, "
		"last_event_at = EXCLUDED.last_event_at, updated_at = EXCLUDED.updated_at "
		"WHERE (r.last_event_at IS NULL OR r.last_event_at < EXCLUDED.last_event_at) "
		"RETURNING r.user_id, r.status");
	ck_assert_str_eq(rp.sql_set_,
		"INSERT INTO calendar.user_replicas AS r (user_id, display_name, avatar_url, "
		"status, last_event_at, created_at, updated_at) "
		"SELECT x.user_id, x.display_name, x.avatar_url, x.status, x.last_event_at, "
		"$2::timestamptz, $2::timestamptz "
		"FROM json_to_recordset($1::json) AS x(user_id uuid, display_name text, "
		"avatar_url text, status text, last_event_at timestamptz) "
		"ON CONFLICT (user_id) DO UPDATE SET display_name = EXCLUDED.display_name, "
		"avatar_url = EXCLUDED.avatar_url, status = EXCLUDED.status, "
		"last_event_at = EXCLUDED.last_event_at, updated_at = EXCLUDED.updated_at "
		"WHERE (r.last_event_at IS NULL OR r.last_event_at < EXCLUDED.last_event_at) "
		"RETURNING r.user_id, r.status");
	ck_assert_str_eq(rp.stmt_set_, "identity_upsert_set");
}
END_TEST

/* final_status: a row in that status takes no message any more (both
 * statements); a status that is not a word is refused at registration. */
START_TEST(final_status_in_both_statements)
{
	struct pin_registrar reg = { .size = sizeof(reg), .consumer = t_consumer };
	const char *tail = "WHERE (r.last_event_at IS NULL OR r.last_event_at < "
		"EXCLUDED.last_event_at) AND r.status IS DISTINCT FROM 'Deleted' "
		"RETURNING r.user_id, r.status";
	char err[128];

	rp.final_status = "Deleted";
	ck_assert_int_eq(pc_replica_register(&reg, &rp, err, sizeof(err)), 0);
	ck_assert_str_eq(rp.sql_one_ + strlen(rp.sql_one_) - strlen(tail), tail);
	ck_assert_str_eq(rp.sql_set_ + strlen(rp.sql_set_) - strlen(tail), tail);
	rp.final_status = "Dele'ted";
	ck_assert_int_ne(pc_replica_register(&reg, &rp, err, sizeof(err)), 0);
	ck_assert_str_eq(err, "test: replica calendar.user_replicas: final_status is not a word");
	rp.final_status = NULL;
}
END_TEST

START_TEST(message_path)
{
	struct pin_msg m = msg_of("m1", "{\"u\":\"a\",\"n\":\"Ann\"}", t_now() + 5);
	struct pin_msg g = msg_of("m2", "{\"u\":\"b\",\"n\":\"Bo\",\"gone\":true}", t_now());
	struct pin_consume_result res;
	const char *applied[] = { "a:Deactivated" };

	next_res = rows(1, applied);
	ck_assert_int_eq(got.fn(&m, &res, got.ud), PIN_CONSUME_OK);
	ck_assert_str_eq(calls, "identity_upsert(a,Ann,NULL,Active,"
			"2025-12-02T00:00:00.000005Z,2025-12-02T00:00:00Z) ");
	ck_assert_str_eq(applied_log, "a=Deactivated@m1 ");
	ck_assert(stale == 0);
	/* older than the row: nothing applied, one stale */
	next_res = rows(0, NULL);
	ck_assert_int_eq(got.fn(&m, &res, got.ud), PIN_CONSUME_OK);
	ck_assert_str_eq(applied_log, "a=Deactivated@m1 ");
	ck_assert(stale == 1);
	/* alone: the plugin's, no statement */
	calls[0] = '\0';
	ck_assert_int_eq(got.fn(&g, &res, got.ud), PIN_CONSUME_OK);
	ck_assert_str_eq(calls, "");
	ck_assert_str_eq(alone_log, "b/Bo ");
	/* a failed statement: RETRY with the plugin's code */
	next_res = NULL;
	api.db_sqlstate = NULL;
	ck_assert_int_eq(got.fn(&m, &res, got.ud), PIN_CONSUME_RETRY);
	ck_assert_str_eq(res.code, "DB");
	ck_assert_str_eq(res.detail, "upsert failed (no connection)");
	json_object_put(m.payload);
	json_object_put(g.payload);
}
END_TEST

START_TEST(batch_path)
{
	struct pin_msg m[5];
	const struct pin_msg *mp[5];
	enum pin_consume_status st[5];
	struct pin_consume_result res[5];
	const char *applied[] = { "A:Deactivated", "b:Active" };

	m[0] = msg_of("m0", "{\"u\":\"a\",\"n\":\"Ann\"}", t_now());
	m[1] = msg_of("m1", "{\"u\":\"b\",\"n\":\"Bo\"}", t_now());
	m[2] = msg_of("m2", "{\"u\":\"c\",\"n\":\"Cy\"}", t_now());
	m[3] = msg_of("m3", "{\"u\":\"A\",\"n\":\"Ann2\"}", t_now());   /* a again: new run */
	m[4] = msg_of("m4", "{\"u\":\"d\",\"gone\":1}", t_now());
	for (int i = 0; i < 5; i++)
		mp[i] = &m[i];
	next_res = rows(2, applied);    /* every run: a (any case) and b applied */
	memset(res, 0, sizeof(res));
	ck_assert_int_eq(got.batch_fn(mp, 5, st, res, got.ud), PIN_CONSUME_OK);
	for (int i = 0; i < 5; i++)
		ck_assert_int_eq(st[i], PIN_CONSUME_OK);
	ck_assert_str_eq(calls,
		"identity_upsert_set([{\"last_event_at\":\"2025-12-02T00:00:00Z\","
		"\"user_id\":\"a\",\"display_name\":\"Ann\",\"avatar_url\":null,"
		"\"status\":\"Active\"},"
		"{\"last_event_at\":\"2025-12-02T00:00:00Z\",\"user_id\":\"b\","
		"\"display_name\":\"Bo\",\"avatar_url\":null,\"status\":\"Active\"},"
		"{\"last_event_at\":\"2025-12-02T00:00:00Z\",\"user_id\":\"c\","
		"\"display_name\":\"Cy\",\"avatar_url\":null,\"status\":\"Active\"}],"
		"2025-12-02T00:00:00Z) "
		"identity_upsert_set([{\"last_event_at\":\"2025-12-02T00:00:00Z\","
		"\"user_id\":\"A\",\"display_name\":\"Ann2\",\"avatar_url\":null,"
		"\"status\":\"Active\"}],2025-12-02T00:00:00Z) ");
	/* run 1: a and b applied (c stale); run 2: the fake answers a and b
	 * again, b is not in that run (ignored), nothing stale */
	ck_assert_str_eq(applied_log, "a=Deactivated@m0 b=Active@m1 A=Deactivated@m3 ");
	ck_assert(stale == 1);
	ck_assert_str_eq(alone_log, "d/- ");
	for (int i = 0; i < 5; i++)
		json_object_put(m[i].payload);
}
END_TEST

Suite *make_replica_suite(void)
{
	Suite *s = suite_create("sdk_replica");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_add_test(tc, statements_from_the_column_list);
	tcase_add_test(tc, final_status_in_both_statements);
	tcase_add_test(tc, message_path);
	tcase_add_test(tc, batch_path);
	suite_add_tcase(s, tc);
	return s;
}
