/* pg.c -- libpq result helpers and JSON output of columns. */
#include "config.h"
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/pg.h"


/* SQLSTATE of the first failed result pc_res_ok saw on this thread since
 * pc_sqlstate_clear ("" when none) */
static __thread char first_sqlstate[6];

int pc_res_ok(const PGresult *res, ExecStatusType want)
{
	int ok = res && PQresultStatus(res) == want;

	if (!ok && res && !first_sqlstate[0]) {
		const char *st = pc_api->db_sqlstate(res);

		snprintf(first_sqlstate, sizeof(first_sqlstate), "%s", st ? st : "");
	}
	return ok;
}

void pc_sqlstate_clear(void)
{
	first_sqlstate[0] = '\0';
}

const char *pc_sqlstate_first(void)
{
	return first_sqlstate;
}

int pc_sqlstate_is_concurrency(const char *sqlstate)
{
	/* serialization_failure, deadlock_detected, lock_not_available */
	return sqlstate && (!strcmp(sqlstate, "40001") || !strcmp(sqlstate, "40P01") ||
			!strcmp(sqlstate, "55P03"));
}

const char *pc_col(const PGresult *res, int row, int col)
{
	return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

int64_t pc_col_us(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return -1;
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

void pc_json_str(json_object *o, const char *key, const char *v)
{
	json_object_object_add(o, key, v ? json_object_new_string(v) : NULL);
}

void pc_json_col(json_object *o, const char *key, const PGresult *res, int row, int col)
{
	json_object_object_add(o, key, PQgetisnull(res, row, col) ? NULL :
			json_object_new_string(PQgetvalue(res, row, col)));
}

void pc_json_col_int(json_object *o, const char *key, const PGresult *res, int row, int col)
{
	json_object_object_add(o, key, PQgetisnull(res, row, col) ? NULL :
			json_object_new_int64(strtoll(PQgetvalue(res, row, col), NULL, 10)));
}

void pc_json_col_bool(json_object *o, const char *key, const PGresult *res, int row, int col)
{
	json_object_object_add(o, key, json_object_new_boolean(
			strcmp(PQgetvalue(res, row, col), "t") == 0));
}

size_t pc_pg_int_parse(const char *pg, int *out, size_t max)
{
	size_t n = 0;
	char *end;

	if (!pg)
		return 0;
	while (*pg && n < max) {
		if (*pg == '-' || isdigit((unsigned char)*pg)) {
			out[n++] = (int)strtol(pg, &end, 10);
			pg = end;
		} else {
			pg++;
		}
	}
	return n;
}

json_object *pc_json_int_array(const char *pg)
{
	json_object *a = json_object_new_array();
	int v[64];
	size_t i, n = pc_pg_int_parse(pg, v, sizeof(v) / sizeof(v[0]));

	for (i = 0; i < n; i++)
		json_object_array_add(a, json_object_new_int64(v[i]));
	return a;
}

char *pc_pg_int_array(const int *v, size_t n)
{
	char *s = pc_api->strdup("{");
	size_t i;

	for (i = 0; i < n; i++)
		s = pc_api->sprintf("%s%s%d", s, i ? "," : "", v[i]);
	return pc_api->sprintf("%s}", s);
}
