/* colmap.c -- a row of a libpq result as a JSON object, by column names
 * (sdk/colmap.h). */
#include "config.h"
#include <string.h>
#include "sdk/colmap.h"
#include "sdk/instant.h"
#include "sdk/pg.h"

int pc_colmap_init(struct pc_colmap *m, const struct pc_jfield *f, size_t n,
		const PGresult *res)
{
	m->f = f;
	m->n = 0;
	if (n > PC_COLMAP_MAX) {
		pc_api->log(PIN_LOG_ERROR, "column map: too many fields", NULL);
		return PIN_ERR;
	}
	for (size_t i = 0; i < n; i++)
		if ((m->col[i] = PQfnumber(res, f[i].col)) < 0) {
			pc_api->log(PIN_LOG_ERROR, "column map: no such column in the result",
					"column", f[i].col, "key", f[i].key, NULL);
			return PIN_ERR;
		}
	m->n = n;
	return 0;
}

int pc_colmap_col(const struct pc_colmap *m, const char *name)
{
	for (size_t i = 0; i < m->n; i++)
		if (!strcmp(m->f[i].col, name))
			return m->col[i];
	return -1;
}

void pc_colmap_add(const struct pc_colmap *m, json_object *o, const PGresult *res, int row)
{
	for (size_t i = 0; i < m->n; i++) {
		const char *key = m->f[i].key;
		int c = m->col[i];

		switch (m->f[i].type) {
		case PC_J_STR:
			pc_json_col(o, key, res, row, c);
			break;
		case PC_J_INT:
			pc_json_col_int(o, key, res, row, c);
			break;
		case PC_J_BOOL:
			pc_json_col_bool(o, key, res, row, c);
			break;
		case PC_J_TIME:
			pc_json_col_time(o, key, res, row, c);
			break;
		case PC_J_JSON:
			json_object_object_add(o, key, PQgetisnull(res, row, c) ? NULL :
					json_tokener_parse(PQgetvalue(res, row, c)));
			break;
		case PC_J_SET:
			json_object_object_add(o, key,
					json_object_new_boolean(!PQgetisnull(res, row, c)));
			break;
		}
	}
}

json_object *pc_colmap_json(const struct pc_colmap *m, const PGresult *res, int row)
{
	json_object *o = json_object_new_object();

	pc_colmap_add(m, o, res, row);
	return o;
}

json_object *pc_row_json(const struct pc_jfield *f, size_t n, const PGresult *res, int row)
{
	struct pc_colmap m;

	return pc_colmap_init(&m, f, n, res) < 0 ? NULL : pc_colmap_json(&m, res, row);
}

json_object *pc_colmap_array(const struct pc_jfield *f, size_t n, const PGresult *res)
{
	struct pc_colmap m;
	json_object *arr;

	if (pc_colmap_init(&m, f, n, res) < 0)
		return NULL;
	arr = json_object_new_array();
	for (int i = 0; i < PQntuples(res); i++)
		json_object_array_add(arr, pc_colmap_json(&m, res, i));
	return arr;
}
