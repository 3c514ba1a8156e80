/* sdk/jtext.h -- a JSON text writer for hot list responses (issue 13).
 *
 * Writes JSON straight into one growing buffer instead of building a json-c
 * tree (one hash table per object, one allocation per value) and printing
 * it: the agent list and the showcase spent about half of the host's CPU in
 * malloc/free and json-c (README "Performance").  The text is byte for byte
 * what json-c prints with JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE
 * (the host's respond_json): the same string escaping (\b \n \r \t \f \" \\,
 * other bytes below 0x20 as \u00xx with lower-case hex, '/' and bytes >= 0x7f
 * as they are), no spaces, int64 in decimal.  tests/unit/test_jtext.c pins it
 * against json-c.
 *
 * Commas are the writer's business: a key or value written after a value of
 * the same container gets one.  The caller opens and closes containers in
 * the right order (no nesting check).  On allocation failure the writer
 * stops writing and pc_jt_body / pc_jt_take return NULL.
 *
 *   struct pc_jt w;
 *   pc_jt_init(&w, 4096);
 *   pc_jt_obj(&w); pc_jt_key(&w, "items"); pc_jt_arr(&w); ... pc_jt_end_arr(&w);
 *   pc_jt_end_obj(&w);
 *   return pc_api->respond_json(r, 200, pc_jt_body(&w));
 */
#ifndef PIN_SDK_JTEXT_H
#define PIN_SDK_JTEXT_H

#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include <libpq-fe.h>

struct pc_jt {
	char *buf;                  /* malloc'd; room for a NUL after len */
	size_t len, cap;
	int comma;                  /* the next key / value needs a ',' first */
	int failed;                 /* an allocation failed: nothing more is written */
};

/* Empty writer with room for hint bytes (allocated on first write). */
void pc_jt_init(struct pc_jt *w, size_t hint);
/* Empties the writer, keeping its buffer (a writer reused per row). */
void pc_jt_reset(struct pc_jt *w);
/* Frees the buffer (also after pc_jt_take / pc_jt_body: then a no-op). */
void pc_jt_free(struct pc_jt *w);

void pc_jt_obj(struct pc_jt *w);            /* { */
void pc_jt_end_obj(struct pc_jt *w);        /* } */
void pc_jt_arr(struct pc_jt *w);            /* [ */
void pc_jt_end_arr(struct pc_jt *w);        /* ] */
/* "key": (escaped like a string) */
void pc_jt_key(struct pc_jt *w, const char *key);

/* Values.  pc_jt_str: NULL writes null. */
void pc_jt_str(struct pc_jt *w, const char *s);
void pc_jt_null(struct pc_jt *w);
void pc_jt_bool(struct pc_jt *w, int v);
void pc_jt_int(struct pc_jt *w, int64_t v);
/* An instant (us since epoch) as pc_time_fmt writes it (sdk/instant.h):
 * "2026-12-01T09:00:00Z", fraction only when non-zero. */
void pc_jt_time(struct pc_jt *w, int64_t us);
/* Already valid JSON text (a value), copied as it is. */
void pc_jt_raw(struct pc_jt *w, const char *json, size_t len);

/* Column values of a libpq result, NULL -> null (as pc_json_col,
 * pc_json_col_int, pc_json_col_time, pc_json_col_bool of sdk/pg.h).  Text
 * or binary results (ABI 1.5 db_exec_prepared_bin) give the same bytes:
 * uuid, text, varchar, int2/4/8, bool (and int4[] below) columns. */
void pc_jt_col(struct pc_jt *w, const PGresult *res, int row, int col);
void pc_jt_col_int(struct pc_jt *w, const PGresult *res, int row, int col);
void pc_jt_col_time(struct pc_jt *w, const PGresult *res, int row, int col);
void pc_jt_col_bool(struct pc_jt *w, const PGresult *res, int row, int col);
/* A PostgreSQL int[] ("{1440,60}", or a binary one-dimensional int4[];
 * NULL = []) as a JSON array, as pc_json_int_array. */
void pc_jt_col_int_array(struct pc_jt *w, const PGresult *res, int row, int col);

/* "key": value shorthands */
#define PC_JT_KV(w, key, call) (pc_jt_key((w), (key)), (call))

/* The text (malloc'd, NUL-terminated; *len its length), ownership to the
 * caller; the writer is empty afterwards.  NULL after a failed allocation. */
char *pc_jt_take(struct pc_jt *w, size_t *len);
/*
 * The text as a json_object for api->respond_json: a json-c object whose
 * serializer prints the text as it is (json_object_set_serializer), so the
 * host sends these bytes without an ABI change.  Owns the text; the writer
 * is empty afterwards.  NULL after a failed allocation (respond_json(NULL)
 * would send an empty body: answer PIN_ERR instead).
 */
json_object *pc_jt_body(struct pc_jt *w);

/* Pure: the instant us as API text into out (>= 40 bytes) without gmtime,
 * strftime or snprintf; the same bytes as pc_time_fmt.  Returns the length. */
size_t pc_jt_fmt_time(int64_t us, char *out);

#endif
