/* test_colmap.c -- sdk/colmap.c: a row as a JSON object by column names.
 * Columns are found by name wherever the SELECT puts them; every type
 * writes what the pc_json_col* helpers write (null for SQL NULL but bool
 * and set); a missing column fails once, with its name logged; the page
 * variant (pc_page_json_map) resolves its cursor columns by name too. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <check.h>
#include <json-c/json.h>
#include <libpq-fe.h>

#include "sdk/sdk.h"
#include "suites.h"
#define FAKE_ARENA_SIZE (1 << 16)
#include "fake_host.h"

static struct pin_host_api api;
static char logged[256];


static void t_log(int level, const char *msg, ...)
{
	va_list ap;
	const char *k;

	(void)level;
	snprintf(logged, sizeof(logged), "%s", msg);
	va_start(ap, msg);
	while ((k = va_arg(ap, const char *)) != NULL) {
		const char *v = va_arg(ap, const char *);

		snprintf(logged + strlen(logged), sizeof(logged) - strlen(logged),
				" %s=%s", k, v);
	}
	va_end(ap);
}

static int t_is_uuid(const char *s)
{
	return strlen(s) == 36;
}

static void setup(void)
{
	memset(&api, 0, sizeof(api));
	api.log = t_log;
	api.is_uuid = t_is_uuid;
	api.alloc = t_alloc;
	fake_arena_reset();
	logged[0] = '\0';
	pc_api = &api;
}

/* a text result: names[0..nc), then nr rows of nc values (NULL: SQL NULL) */
static PGresult *result(int nc, const char *const *names, int nr, const char *const *v)
{
	PGresult *r = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	PGresAttDesc a[8];

	for (int c = 0; c < nc; c++)
		a[c] = (PGresAttDesc){ .name = (char *)names[c], .format = 0, .typlen = -1,
			.atttypmod = -1 };
	ck_assert(PQsetResultAttrs(r, nc, a));
	for (int k = 0; k < nr; k++)
		for (int c = 0; c < nc; c++) {
			const char *x = v[k * nc + c];

			ck_assert(PQsetvalue(r, k, c, (char *)x, x ? (int)strlen(x) : -1));
		}
	return r;
}

static const struct pc_jfield f[] = {
	{ "id", "id", PC_J_STR },
	{ "n", "n", PC_J_INT },
	{ "ok", "ok", PC_J_BOOL },
	{ "at", "at_us", PC_J_TIME },
	{ "doc", "doc", PC_J_JSON },
	{ "has", "at_us", PC_J_SET },
};

START_TEST(row_by_names_any_order)
{
	/* the SELECT's order differs from the table's */
	static const char *const names[] = { "doc", "at_us", "ok", "n", "id" };
	static const char *const v[] = {
		"{\"a\":[1,2]}", "1764633600000000", "t", "42", "x1",
		NULL, NULL, "f", NULL, NULL,
	};
	PGresult *r = result(5, names, 2, v);
	struct pc_colmap m;
	json_object *o;

	ck_assert_int_eq(pc_colmap_init(&m, f, PC_NFIELDS(f), r), 0);
	ck_assert_int_eq(pc_colmap_col(&m, "at_us"), 1);
	ck_assert_int_eq(pc_colmap_col(&m, "nope"), -1);
	o = pc_colmap_json(&m, r, 0);
	ck_assert_str_eq(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
		"{\"id\":\"x1\",\"n\":42,\"ok\":true,\"at\":\"2025-12-02T00:00:00Z\","
		"\"doc\":{\"a\":[1,2]},\"has\":true}");
	json_object_put(o);
	o = pc_colmap_json(&m, r, 1);
	ck_assert_str_eq(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
		"{\"id\":null,\"n\":null,\"ok\":false,\"at\":null,\"doc\":null,\"has\":false}");
	json_object_put(o);
	o = pc_colmap_array(f, 2, r);
	ck_assert_str_eq(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
		"[{\"id\":\"x1\",\"n\":42},{\"id\":null,\"n\":null}]");
	json_object_put(o);
	PQclear(r);
}
END_TEST

START_TEST(missing_column_fails_named)
{
	static const char *const names[] = { "id", "n" };
	static const char *const v[] = { "x1", "1" };
	PGresult *r = result(2, names, 1, v);
	struct pc_colmap m;
	json_object *o;

	ck_assert_int_eq(pc_colmap_init(&m, f, PC_NFIELDS(f), r), PIN_ERR);
	ck_assert_str_eq(logged, "column map: no such column in the result column=ok key=ok");
	ck_assert_ptr_null(pc_row_json(f, PC_NFIELDS(f), r, 0));
	ck_assert_ptr_null(pc_colmap_array(f, PC_NFIELDS(f), r));
	o = pc_row_json(f, 2, r, 0);
	ck_assert_ptr_nonnull(o);
	json_object_put(o);
	PQclear(r);
}
END_TEST

START_TEST(page_by_names)
{
	static const char *const names[] = { "id", "at_us" };
	static const char *const v[] = {
		"b0000000-0000-4000-8000-000000000003", "30",
		"b0000000-0000-4000-8000-000000000002", "20",
		"b0000000-0000-4000-8000-000000000001", "10",
	};
	static const struct pc_jfield pf[] = { { "id", "id", PC_J_STR } };
	PGresult *r = result(2, names, 3, v);
	json_object *page, *items, *next;
	int64_t us;
	char id[37];

	page = pc_page_json_map(r, 2, "at_us", "id", pf, PC_NFIELDS(pf));
	ck_assert_ptr_nonnull(page);
	ck_assert(json_object_object_get_ex(page, "items", &items));
	ck_assert_str_eq(json_object_to_json_string_ext(items, JSON_C_TO_STRING_PLAIN),
		"[{\"id\":\"b0000000-0000-4000-8000-000000000003\"},"
		"{\"id\":\"b0000000-0000-4000-8000-000000000002\"}]");
	ck_assert(json_object_object_get_ex(page, "nextCursor", &next));
	ck_assert_int_eq(pc_cursor_parse(json_object_get_string(next), &us, id), 0);
	ck_assert_int_eq(us, 20);
	ck_assert_str_eq(id, "b0000000-0000-4000-8000-000000000002");
	json_object_put(page);
	ck_assert_ptr_null(pc_page_json_map(r, 2, "created_us", "id", pf, PC_NFIELDS(pf)));
	ck_assert_str_eq(logged, "page: no such cursor column in the result column=created_us");
	PQclear(r);
}
END_TEST

Suite *make_colmap_suite(void)
{
	Suite *s = suite_create("colmap");
	TCase *tc = tcase_create("core");

	tcase_add_checked_fixture(tc, setup, NULL);
	tcase_add_test(tc, row_by_names_any_order);
	tcase_add_test(tc, missing_column_fails_named);
	tcase_add_test(tc, page_by_names);
	suite_add_tcase(s, tc);
	return s;
}
