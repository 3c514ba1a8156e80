/* sdk/colmap.h -- a row of a libpq result as a JSON object, by column
 * names: a table of fields (JSON key, result column name, JSON type) is
 * resolved against a result once (PQfnumber per field), then each row is
 * written from the column numbers found.  The SELECT names its columns
 * (an alias for an expression: "... AS created_us"); a query and its
 * representation then stay in step by name, not by position.
 *
 * For JSON text (the list paths) see pc_jt_row of sdk/jtext.h.
 */
#ifndef PIN_SDK_COLMAP_H
#define PIN_SDK_COLMAP_H

#include "sdk/core.h"

/* How a column becomes a JSON value (SQL NULL -> null unless said). */
enum pc_jtype {
	PC_J_STR,       /* the text */
	PC_J_INT,       /* an integer (pc_json_col_int) */
	PC_J_BOOL,      /* "t" -> true, else false (never null) */
	PC_J_TIME,      /* an instant (pc_json_col_time: epoch us or timestamptz) */
	PC_J_JSON,      /* JSON text, parsed (json / jsonb columns) */
	PC_J_SET,       /* true when the column is not NULL, else false */
};

struct pc_jfield {
	const char *key;            /* the JSON key */
	const char *col;            /* the result's column name (lower case) */
	enum pc_jtype type;
};

#define PC_COLMAP_MAX 32

/* A field table resolved against one result. */
struct pc_colmap {
	const struct pc_jfield *f;  /* borrowed: static tables */
	size_t n;
	int col[PC_COLMAP_MAX];
};

/* Resolves the n fields of f (n <= PC_COLMAP_MAX) against res.  0, or
 * PIN_ERR when a column is not in res (an ERROR line names it: the query
 * and the table disagree). */
int pc_colmap_init(struct pc_colmap *m, const struct pc_jfield *f, size_t n,
		const PGresult *res);
/* The column number of name in res as m resolved it, or -1 when name is not
 * one of m's columns. */
int pc_colmap_col(const struct pc_colmap *m, const char *name);
/* Adds the fields of row to o, in table order. */
void pc_colmap_add(const struct pc_colmap *m, json_object *o, const PGresult *res, int row);
/* The fields of row as a new object (owned by the caller). */
json_object *pc_colmap_json(const struct pc_colmap *m, const PGresult *res, int row);
/* One row of res as a new object: pc_colmap_init + pc_colmap_json, for a
 * single-row result.  NULL when a column is missing. */
json_object *pc_row_json(const struct pc_jfield *f, size_t n, const PGresult *res, int row);
/* Every row of res as a new array of objects (owned by the caller); NULL
 * when a column is missing (see pc_colmap_init). */
json_object *pc_colmap_array(const struct pc_jfield *f, size_t n, const PGresult *res);

#define PC_NFIELDS(f) (sizeof(f) / sizeof((f)[0]))

#endif
