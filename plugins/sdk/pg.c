/* pg.c -- libpq result helpers and JSON output of columns. */
#include "config.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/pg.h"


int pc_res_ok(const PGresult *res, ExecStatusType want)
{
	return res && PQresultStatus(res) == want;
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
