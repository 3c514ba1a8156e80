/* sdk/jtext.h -- a JSON text writer for hot list responses (issue 13).
 *
 * Writes JSON straight into one growing buffer instead of building a json-c
 * tree (one hash table per object, one allocation per value) and printing
 * it: the agent list and the showcase spent about half of the host's CPU in
 * malloc/free and json-c (doc/performance.md "Where the time goes").  The text is byte for byte
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

struct pin_req;

#define PC_JT_ROW_MAX 48         /* fields of a pc_jt_row table */

struct pc_jt {
	char *buf;                  /* malloc'd; room for a NUL after len */
	size_t len, cap;
	int comma;                  /* the next key / value needs a ',' first */
	int failed;                 /* an allocation failed: nothing more is written */
	/* pc_jt_row's plan of its last (result, table): how each field is
	 * written, read once from the columns' formats and types */
	const void *plan_res, *plan_f;
	size_t plan_n, plan_fixed;
	int plan_nfields;
	unsigned char plan[PC_JT_ROW_MAX];
	unsigned char plan_size[PC_JT_ROW_MAX];    /* a binary int's bytes, 0: ask */
	/* pc_jt_row's last date written: day day_n is "YYYY-MM-DD" day_s */
	int64_t day_n;
	int day_ok;
	char day_s[10];
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
/* "key": already quoted, with its ':' (len bytes), copied as it is */
void pc_jt_key_raw(struct pc_jt *w, const char *qkey, size_t len);
/* "key": of a string literal that needs no escaping (names of the API's
 * fields): quoted at compile time -- the concatenation refuses anything but
 * a literal -- so a page of 100 rows does not scan 1,600 keys for escapes */
#define PC_JT_QKEY(lit) "\"" lit "\":"
#define PC_JT_K(w, lit) pc_jt_key_raw((w), PC_JT_QKEY(lit), sizeof(PC_JT_QKEY(lit)) - 1)

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

/* "key": value shorthand (key: a literal, as PC_JT_K) */
#define PC_JT_KV(w, key, call) (PC_JT_K((w), key), (call))

/* A row as an object, written from a table of fields with one reservation
 * for the row's worst case (no room check, comma logic or key escaping per
 * value; doc/performance.md, read paths).  how: 's' pc_jt_col, 't'
 * pc_jt_col_time, 'i' pc_jt_col_int, 'b' pc_jt_col_bool, 'a'
 * pc_jt_col_int_array, '{' opens an object under the key (col -1), '}'
 * (PC_JT_END) closes it.  The row's own object stays open: the caller adds
 * keys or pc_jt_end_obj.  The bytes of the same pc_jt_key / pc_jt_col* calls.
 * The writer keeps the plan of its last (result, table) -- how each field is
 * written, from the columns' formats and types -- so the rows of one page
 * read those once; pc_jt_reset and pc_jt_take forget it (a result must stay
 * alive while a writer has written rows of it: the plan is keyed by its
 * address, its column count and the table).  At most
 * PC_JT_ROW_MAX fields (more: the writer fails). */
struct pc_jt_field {
	char qkey[32];              /* PC_JT_QKEY("name"), copied 32 bytes at a time */
	unsigned char len;          /* its length (at most 31: a longer key fails to compile) */
	char how;
	short col;                  /* result column, -1 for '{' and '}' */
};
#define PC_JT_F(lit, col, how) { PC_JT_QKEY(lit), sizeof(PC_JT_QKEY(lit)) - 1, (how), (col) }
#define PC_JT_END { "", 0, '}', -1 }
void pc_jt_row(struct pc_jt *w, const PGresult *res, int row,
		const struct pc_jt_field *f, size_t n);

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
/* The text as the response body: api->respond_json_text (ABI 1.6: the
 * host sends these bytes, no json-c object, no copy), else respond_json of
 * pc_jt_body.  The writer is empty afterwards; PIN_ERR after a failed
 * allocation (nothing sent). */
int pc_jt_respond(struct pin_req *r, int status, struct pc_jt *w);

/* Pure: the instant us as API text into out (>= 40 bytes) without gmtime,
 * strftime or snprintf; the same bytes as pc_time_fmt.  Returns the length. */
size_t pc_jt_fmt_time(int64_t us, char *out);

#endif
