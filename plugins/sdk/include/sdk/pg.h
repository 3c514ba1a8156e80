/* sdk/pg.h -- libpq result helpers and JSON output of columns. */
#ifndef PIN_SDK_PG_H
#define PIN_SDK_PG_H

#include "sdk/core.h"

/* 1 when res is non-NULL with status want, else 0.  A failed result's
 * SQLSTATE is remembered (per thread) when it is the first since
 * pc_sqlstate_clear. */
int pc_res_ok(const PGresult *res, ExecStatusType want);
/* Forgets the remembered SQLSTATE (before a unit of work). */
void pc_sqlstate_clear(void);
/* SQLSTATE of the first failure pc_res_ok saw since pc_sqlstate_clear, ""
 * when none (later statements of an aborted transaction fail with 25P02;
 * the first one says why).  Borrowed, thread-local. */
const char *pc_sqlstate_first(void);
/* 1 for a concurrent-modification failure (40001 serialization failure,
 * 40P01 deadlock, 55P03 lock not available): the work may succeed when run
 * again on fresh state. */
int pc_sqlstate_is_concurrency(const char *sqlstate);
/* The text of a column, NULL for SQL NULL.  Borrowed from res. */
const char *pc_col(const PGresult *res, int row, int col);
/* An instant column -> us since the Unix epoch; -1 on NULL.  Text or binary
 * results of a bigint of epoch microseconds -- calendar.us(col) (migration
 * 0100) -- or of a timestamptz itself: a binary result reads it without
 * any conversion in PostgreSQL (the read paths, doc/performance.md,
 * read paths), a text one from the ISO text of the host's UTC sessions. */
int64_t pc_col_us(const PGresult *res, int row, int col);
/* PostgreSQL's ISO text of a timestamptz ("2026-12-03 04:00:00.5+00", any
 * offset, " BC") as us since the Unix epoch into *us; -1 for anything else
 * (another DateStyle, infinity) */
int pc_pg_ts_text_us(const char *s, int64_t *us);
/* A binary timestamptz (8 bytes, us from 2000-01-01) as us since the Unix
 * epoch into *us; -1 for infinity, -infinity and the instants past year
 * ~292,000 that int64 Unix microseconds cannot hold */
int pc_pg_ts_bin_us(const char *v, int64_t *us);

/* type oids of binary columns (pg_type.dat) */
#define PC_BOOLOID 16
#define PC_INT8OID 20
#define PC_INT2OID 21
#define PC_INT4OID 23
#define PC_UUIDOID 2950
#define PC_TEXTOID 25
#define PC_VARCHAROID 1043
#define PC_INT4ARRAYOID 1007
#define PC_TIMESTAMPTZOID 1184
/* a binary timestamptz counts microseconds from 2000-01-01 00:00:00 UTC */
#define PC_PG_EPOCH_US INT64_C(946684800000000)

/* Binary results (api->db_exec_prepared_bin, ABI 1.5; doc/performance.md,
 * read paths): PostgreSQL's binary values instead of their text.  Column
 * col of res is in binary format. */
int pc_col_is_bin(const PGresult *res, int col);
/* api->db_exec_prepared_bin, or db_exec_prepared (text) on a host table
 * without it: the readers above and sdk/jtext's column writers take both. */
PGresult *pc_exec_prepared_bin(const char *name, const char *sql, int n,
		const char *const *params);
/* A binary int2 / int4 / int8 value (network order, len 2, 4 or 8 bytes). */
int64_t pc_bin_int(const char *v, int len);
/* A binary uuid value (16 bytes) as its canonical text into out[37]. */
void pc_bin_uuid(const char *v, char out[37]);
/* The text of a uuid or text column, NULL for SQL NULL; a binary uuid is
 * formatted into the arena, other values are borrowed from res. */
const char *pc_col_text(const PGresult *res, int row, int col);

/* Adds key -> string or JSON null. */
void pc_json_str(json_object *o, const char *key, const char *v);
/* Adds the text of column col (NULL -> null). */
void pc_json_col(json_object *o, const char *key, const PGresult *res, int row, int col);
/* (instants: pc_json_col_time of sdk/instant.h) */
void pc_json_col_int(json_object *o, const char *key, const PGresult *res, int row, int col);
/* Adds a boolean column ("t" -> true, anything else -> false). */
void pc_json_col_bool(json_object *o, const char *key, const PGresult *res, int row, int col);

/* PostgreSQL int[] text "{1440,60}" -> JSON array of ints (new object). */
json_object *pc_json_int_array(const char *pg_array);
/* PostgreSQL int[] text -> at most max ints into out; returns the count. */
size_t pc_pg_int_parse(const char *pg_array, int *out, size_t max);
/* ints -> PostgreSQL array text "{1440,60}" (arena). */
char *pc_pg_int_array(const int *v, size_t n);

#endif
