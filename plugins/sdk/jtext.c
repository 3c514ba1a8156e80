/* jtext.c -- JSON text writer for hot list responses (sdk/jtext.h). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/printbuf.h>
#include "sdk/jtext.h"
#include "sdk/core.h"
#include "sdk/instant.h"
#include "sdk/pg.h"

/* 0: the byte goes out as it is; else the character after '\' ('u': \u00xx);
 * NUL (1) ends a run (quoted) */
static const char esc[256] = {
	[0x00] = 1,
	['\b'] = 'b', ['\n'] = 'n', ['\r'] = 'r', ['\t'] = 't', ['\f'] = 'f',
	['"'] = '"', ['\\'] = '\\',
	[0x01] = 'u', [0x02] = 'u', [0x03] = 'u', [0x04] = 'u', [0x05] = 'u',
	[0x06] = 'u', [0x07] = 'u', [0x0b] = 'u', [0x0e] = 'u', [0x0f] = 'u',
	[0x10] = 'u', [0x11] = 'u', [0x12] = 'u', [0x13] = 'u', [0x14] = 'u',
	[0x15] = 'u', [0x16] = 'u', [0x17] = 'u', [0x18] = 'u', [0x19] = 'u',
	[0x1a] = 'u', [0x1b] = 'u', [0x1c] = 'u', [0x1d] = 'u', [0x1e] = 'u',
	[0x1f] = 'u',
};

void pc_jt_init(struct pc_jt *w, size_t hint)
{
	memset(w, 0, sizeof(*w));
	w->cap = hint < 64 ? 64 : hint;
}

void pc_jt_reset(struct pc_jt *w)
{
	w->len = 0;
	w->comma = 0;
	w->plan_res = w->plan_f = NULL;
}

void pc_jt_free(struct pc_jt *w)
{
	free(w->buf);
	w->buf = NULL;
	w->len = 0;
}

/* Room for n more bytes plus a NUL; 0 or -1 (failed set).  The fast
 * path is inline: most calls write a few bytes into a buffer sized for the
 * page up front. */
static int grow(struct pc_jt *w, size_t n)
{
	size_t cap = w->cap;
	char *b;

	if (w->failed)
		return -1;
	while (cap < w->len + n + 1)
		cap *= 2;
	b = realloc(w->buf, cap);
	if (!b) {
		w->failed = 1;
		return -1;
	}
	w->buf = b;
	w->cap = cap;
	return 0;
}

static inline int room(struct pc_jt *w, size_t n)
{
	/* a writer that failed once takes nothing more: its text stays
	 * unusable (take -> NULL) instead of losing bytes in its middle */
	if (w->buf && !w->failed && w->len + n + 1 <= w->cap)
		return 0;
	return grow(w, n);
}

static inline void put(struct pc_jt *w, const char *s, size_t n)
{
	if (room(w, n) < 0)
		return;
	memcpy(w->buf + w->len, s, n);
	w->len += n;
}

static inline void put1(struct pc_jt *w, char c)
{
	if (room(w, 1) < 0)
		return;
	w->buf[w->len++] = c;
}

/* the ',' before a value or key of a container that already has one */
static inline void sep(struct pc_jt *w)
{
	if (w->comma)
		put1(w, ',');
}

void pc_jt_obj(struct pc_jt *w)
{
	sep(w);
	put1(w, '{');
	w->comma = 0;
}

void pc_jt_end_obj(struct pc_jt *w)
{
	put1(w, '}');
	w->comma = 1;
}

void pc_jt_arr(struct pc_jt *w)
{
	sep(w);
	put1(w, '[');
	w->comma = 0;
}

void pc_jt_end_arr(struct pc_jt *w)
{
	put1(w, ']');
	w->comma = 1;
}

/* "s" escaped as json-c's json_escape_str with NOSLASHESCAPE into o, which
 * has room for 6 * strlen(s) + 2 bytes; returns the end.  One pass: each run
 * of bytes that go out as they are is found with the esc table (NUL ends
 * it) and copied at once, then the byte that stopped it is escaped. */
static char *o_esc(char *o, const char *s)
{
	static const char hx[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s, *run;

	*o++ = '"';
	for (;;) {
		for (run = p; !esc[*p]; p++)
			;
		memcpy(o, run, (size_t)(p - run));
		o += p - run;
		if (!*p)
			break;
		*o++ = '\\';
		*o++ = esc[*p];
		if (esc[*p] == 'u') {
			*o++ = '0';
			*o++ = '0';
			*o++ = hx[*p >> 4];
			*o++ = hx[*p & 15];
		}
		p++;
	}
	*o++ = '"';
	return o;
}

/* s quoted (o_esc), then the byte tail (':' after a key, 0 for none) */
static void quoted(struct pc_jt *w, const char *s, char tail)
{
	if (room(w, 6 * strlen(s) + 3) < 0)
		return;
	w->len = (size_t)(o_esc(w->buf + w->len, s) - w->buf);
	if (tail)
		w->buf[w->len++] = tail;
}

void pc_jt_key(struct pc_jt *w, const char *key)
{
	sep(w);
	quoted(w, key, ':');
	w->comma = 0;
}

void pc_jt_key_raw(struct pc_jt *w, const char *qkey, size_t len)
{
	sep(w);
	put(w, qkey, len);
	w->comma = 0;
}

void pc_jt_str(struct pc_jt *w, const char *s)
{
	if (!s) {
		pc_jt_null(w);
		return;
	}
	sep(w);
	quoted(w, s, 0);
	w->comma = 1;
}

void pc_jt_null(struct pc_jt *w)
{
	pc_jt_raw(w, "null", 4);
}

void pc_jt_bool(struct pc_jt *w, int v)
{
	if (v)
		pc_jt_raw(w, "true", 4);
	else
		pc_jt_raw(w, "false", 5);
}

/* v in decimal into o (room for 20 bytes); returns the end */
static char *o_int(char *o, int64_t v)
{
	char b[24], *e = b + sizeof(b), *p = e;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	memcpy(o, p, (size_t)(e - p));
	return o + (e - p);
}

void pc_jt_int(struct pc_jt *w, int64_t v)
{
	char b[24];

	pc_jt_raw(w, b, (size_t)(o_int(b, v) - b));
}

void pc_jt_raw(struct pc_jt *w, const char *json, size_t len)
{
	sep(w);
	put(w, json, len);
	w->comma = 1;
}

/* ---------------------------------------------------------------- instants */

size_t pc_jt_fmt_time(int64_t us, char *out)
{
	return pc_instant_fmt(us, out);
}

/* the instant quoted into o (room for 42 bytes); returns the end */
static char *o_time(char *o, int64_t us)
{
	*o++ = '"';
	o += pc_jt_fmt_time(us, o);
	*o++ = '"';
	return o;
}

/* o_time with the writer's last date: the rows of a page share few days,
 * and a date is a pure function of its day number */
static char *o_time_w(struct pc_jt *w, char *o, int64_t us)
{
	unsigned sod;
	int64_t frac, days = pc_us_split(us, &sod, &frac);

	if (!w->day_ok || days != w->day_n) {
		if (pc_date_fmt(days, w->day_s) < 0) {
			w->day_ok = 0;
			return o_time(o, us);
		}
		w->day_n = days;
		w->day_ok = 1;
	}
	*o++ = '"';
	memcpy(o, w->day_s, 10);
	o = pc_tod_fmt(o + 10, sod, frac);
	*o++ = '"';
	return o;
}

void pc_jt_time(struct pc_jt *w, int64_t us)
{
	char b[48];

	pc_jt_raw(w, b, (size_t)(o_time(b, us) - b));
}

/* ----------------------------------------------------------------- columns */

/* PostgreSQL's int text (-?[0-9]+) as strtoll(s, NULL, 10) reads it */
static int64_t dec(const char *s)
{
	uint64_t v = 0;
	int neg = *s == '-';

	if (*s == '-' || *s == '+')
		s++;
	while (*s >= '0' && *s <= '9')
		v = v * 10 + (uint64_t)(*s++ - '0');
	return neg ? (int64_t)(0 - v) : (int64_t)v;
}

/* Column writers take text results and binary ones (pc_col_is_bin; ABI 1.5
 * db_exec_prepared_bin) alike and write the same bytes for both: a binary
 * uuid as its canonical text, binary integers and booleans as their text
 * would read; text and varchar are the same bytes in either format.
 * tests/unit/test_jtext.c compares the two.
 *
 * One writer, o_value, writes every value into room the caller reserved
 * (O_COL_MAX bytes: a text value escapes to at most 6 bytes per byte,
 * anything else is shorter than 48), for the pc_jt_col* calls and, a row at
 * a time, for pc_jt_row. */
#define O_COL_MAX(res, row, col) (6 * (size_t)PQgetlength((res), (row), (col)) + 48)

static char *o_lit(char *o, const char *s, size_t n)
{
	memcpy(o, s, n);
	return o + n;
}

/* how a column's value is written, from its format and type (plan_kind):
 * per call in pc_jt_col*, once per result in pc_jt_row */
enum {
	P_TEXT,             /* text / varchar, or any text-format column: escaped */
	P_UUID,             /* binary uuid */
	P_BIN_INTSTR,       /* binary int as a string (pc_jt_col) */
	P_BIN_BOOLSTR,      /* binary bool as "t" / "f" */
	P_BIN_OTHER,        /* binary value of another type: null */
	P_INT_BIN, P_INT_TXT, P_TIME_BIN, P_TIME_TXT, P_BOOL_BIN, P_BOOL_TXT,
	P_TS_BIN,           /* binary timestamptz: us from 2000-01-01 */
	P_TS_TXT,           /* text timestamptz (pc_pg_ts_text_us) */
	P_ARRAY, P_OPEN, P_CLOSE,
};

static unsigned char plan_kind(const PGresult *res, const struct pc_jt_field *f)
{
	int bin;

	switch (f->how) {
	case '{':
		return P_OPEN;
	case '}':
		return P_CLOSE;
	case 'a':
		return P_ARRAY;
	}
	bin = pc_col_is_bin(res, f->col);
	switch (f->how) {
	case 't':
		if (PQftype(res, f->col) == PC_TIMESTAMPTZOID)
			return bin ? P_TS_BIN : P_TS_TXT;
		return bin ? P_TIME_BIN : P_TIME_TXT;
	case 'i':
		return bin ? P_INT_BIN : P_INT_TXT;
	case 'b':
		return bin ? P_BOOL_BIN : P_BOOL_TXT;
	}
	if (!bin)
		return P_TEXT;
	switch (PQftype(res, f->col)) {
	case PC_UUIDOID:
		return P_UUID;
	case PC_INT2OID:
	case PC_INT4OID:
	case PC_INT8OID:
		return P_BIN_INTSTR;
	case PC_BOOLOID:
		return P_BIN_BOOLSTR;
	case PC_TEXTOID:
	case PC_VARCHAROID:
		return P_TEXT;
	default:
		return P_BIN_OTHER;
	}
}

/* the value of a non-NULL-checked field of kind k (plan_kind) into o, which
 * has O_COL_MAX room; size: a binary int's bytes, 0 to ask the value.  The
 * one writer of column values: pc_jt_col* (a kind per call) and pc_jt_row
 * (a kind per result) */
static char *o_value(struct pc_jt *w, char *o, int k, int size, const PGresult *res,
		int row, int col)
{
	const char *v = PQgetvalue(res, row, col);
	char t[24];
	int64_t us;

	if (k == P_BOOL_BIN || k == P_BOOL_TXT) {
		/* NULL is false, as pc_jt_col_bool always wrote it */
		int b = k == P_BOOL_BIN ? !PQgetisnull(res, row, col) && *v != 0
			: strcmp(v, "t") == 0;

		return b ? o_lit(o, "true", 4) : o_lit(o, "false", 5);
	}
	if (PQgetisnull(res, row, col))
		return o_lit(o, "null", 4);
	if (!size)
		size = PQgetlength(res, row, col);
	switch (k) {
	case P_UUID:
		/* hex and dashes: nothing to escape */
		*o++ = '"';
		pc_bin_uuid(v, o);
		o[36] = '"';
		return o + 37;
	case P_BIN_INTSTR:
		/* a string, as the text result's digits are */
		*o_int(t, pc_bin_int(v, size)) = '\0';
		return o_esc(o, t);
	case P_BIN_BOOLSTR:
		return o_esc(o, *v ? "t" : "f");
	case P_BIN_OTHER:
		/* a binary value of a type this writer cannot print (numeric,
		 * jsonb, ...): null, never its raw bytes as a string */
		return o_lit(o, "null", 4);
	case P_INT_BIN:
		return o_int(o, pc_bin_int(v, size));
	case P_INT_TXT:
		return o_int(o, dec(v));
	case P_TIME_BIN:
		return o_time_w(w, o, pc_bin_int(v, size));
	case P_TIME_TXT:
		return o_time_w(w, o, dec(v));
	case P_TS_BIN:
	case P_TS_TXT:
		/* a timestamptz: null when it has no Unix microseconds
		 * (infinity) or its text is not ISO */
		if ((k == P_TS_BIN ? pc_pg_ts_bin_us(v, &us) : pc_pg_ts_text_us(v, &us)) < 0)
			return o_lit(o, "null", 4);
		return o_time_w(w, o, us);
	default:
		return o_esc(o, v);
	}
}

/* column col written as a field of kind how ('s', 'i', 't', 'b') would be:
 * the ',' first when the container has a value */
static void jt_col(struct pc_jt *w, const PGresult *res, int row, int col, char how)
{
	struct pc_jt_field f = { .col = (short)col, .how = how };
	char *o;

	if (room(w, O_COL_MAX(res, row, col) + 1) < 0)
		return;
	o = w->buf + w->len;
	if (w->comma)
		*o++ = ',';
	w->len = (size_t)(o_value(w, o, plan_kind(res, &f), 0, res, row, col) - w->buf);
	w->comma = 1;
}

void pc_jt_col(struct pc_jt *w, const PGresult *res, int row, int col)
{
	jt_col(w, res, row, col, 's');
}

void pc_jt_col_int(struct pc_jt *w, const PGresult *res, int row, int col)
{
	jt_col(w, res, row, col, 'i');
}

void pc_jt_col_time(struct pc_jt *w, const PGresult *res, int row, int col)
{
	jt_col(w, res, row, col, 't');
}

void pc_jt_col_bool(struct pc_jt *w, const PGresult *res, int row, int col)
{
	jt_col(w, res, row, col, 'b');
}

/* A binary int4[] (array_send: ndim, has-nulls flag, element type, then
 * per dimension its length and lower bound, then each element as a length
 * and its bytes; -1 for NULL) as a JSON array: the values the text path
 * keeps (every element in storage order, at most 64, NULLs skipped). */
static void bin_int_array(struct pc_jt *w, const char *v, int len)
{
	const char *end = v + len;
	int64_t ndim = len >= 12 ? pc_bin_int(v, 4) : 0, n = 1, elen;

	pc_jt_arr(w);
	if (ndim > 0 && ndim <= 6 && len >= 12 + 8 * ndim) {
		for (int64_t d = 0; d < ndim; d++) {
			int64_t dim = pc_bin_int(v + 12 + 8 * d, 4);

			n = dim <= 0 ? 0 : n * dim;
			if (n > 65536)
				n = 65536;      /* only 64 are written */
		}
		v += 12 + 8 * ndim;
		for (int64_t i = 0, k = 0; i < n && k < 64 && v + 4 <= end; i++) {
			elen = pc_bin_int(v, 4);
			v += 4;
			if (elen < 0)
				continue;
			if (elen != 4 || v + 4 > end)
				break;
			pc_jt_int(w, (int)pc_bin_int(v, 4));
			v += 4;
			k++;
		}
	}
	pc_jt_end_arr(w);
}

void pc_jt_col_int_array(struct pc_jt *w, const PGresult *res, int row, int col)
{
	const char *pg = PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
	char *end;
	int n = 0;

	if (pg && pc_col_is_bin(res, col)) {
		bin_int_array(w, pg, PQgetlength(res, row, col));
		return;
	}
	pc_jt_arr(w);
	/* as pc_pg_int_parse: at most 64 values, anything else skipped */
	while (pg && *pg && n < 64) {
		if (*pg == '-' || (*pg >= '0' && *pg <= '9')) {
			pc_jt_int(w, (int)strtol(pg, &end, 10));
			pg = end;
			n++;
		} else {
			pg++;
		}
	}
	pc_jt_end_arr(w);
}

/* ------------------------------------------------------------------- rows */

/* the plan of (res, f) in w: kinds and the row's room but the text values' */
static int plan(struct pc_jt *w, const PGresult *res, const struct pc_jt_field *f,
		size_t n)
{
	if (w->plan_res == res && w->plan_f == f && w->plan_n == n &&
	    w->plan_nfields == PQnfields(res))
		return 0;
	if (n > PC_JT_ROW_MAX)
		return -1;
	w->plan_fixed = 2 + sizeof(f->qkey);    /* the last key's 32-byte copy */
	for (size_t i = 0; i < n; i++) {
		int sz = f[i].col >= 0 ? PQfsize(res, f[i].col) : 0;

		/* int2 / int4 / int8: every value has the type's size */
		w->plan_size[i] = sz == 2 || sz == 4 || sz == 8 ? (unsigned char)sz : 0;
		w->plan[i] = plan_kind(res, &f[i]);
		w->plan_fixed += f[i].len + 2 + (w->plan[i] == P_TEXT ? 2 : 48);
	}
	w->plan_res = res;
	w->plan_f = f;
	w->plan_n = n;
	w->plan_nfields = PQnfields(res);
	return 0;
}

void pc_jt_row(struct pc_jt *w, const PGresult *res, int row,
		const struct pc_jt_field *f, size_t n)
{
	size_t need;
	int first = 1;
	char *o;

	if (plan(w, res, f, n) < 0) {
		w->failed = 1;          /* a table longer than PC_JT_ROW_MAX: a bug */
		return;
	}
	/* one reservation for the row's worst case, then no check per piece */
	need = w->plan_fixed;
	for (size_t i = 0; i < n; i++)
		if (w->plan[i] == P_TEXT)
			need += 6 * (size_t)PQgetlength(res, row, f[i].col);
	if (room(w, need) < 0)
		return;
	o = w->buf + w->len;
	if (w->comma)
		*o++ = ',';
	*o++ = '{';
	for (size_t i = 0; i < n; i++) {
		int k = w->plan[i], col = f[i].col;

		if (k == P_CLOSE) {
			*o++ = '}';
			first = 0;
			continue;
		}
		if (!first)
			*o++ = ',';
		first = 0;
		/* a fixed-size copy (two moves, no call); the bytes past the
		 * key are overwritten next */
		memcpy(o, f[i].qkey, sizeof(f[i].qkey));
		o += f[i].len;
		if (k == P_OPEN) {
			*o++ = '{';
			first = 1;
			continue;
		}
		if (k == P_ARRAY) {
			/* the array writer checks its own room: commit, write,
			 * reserve again what the rest can take */
			w->len = (size_t)(o - w->buf);
			w->comma = 0;
			pc_jt_col_int_array(w, res, row, col);
			if (room(w, need) < 0)
				return;
			o = w->buf + w->len;
			continue;
		}
		o = o_value(w, o, k, w->plan_size[i], res, row, col);
	}
	w->len = (size_t)(o - w->buf);
	w->comma = 1;
}

/* ------------------------------------------------------------------ output */

char *pc_jt_take(struct pc_jt *w, size_t *len)
{
	char *s;

	if (room(w, 0) < 0) {
		pc_jt_free(w);
		return NULL;
	}
	s = w->buf;
	s[w->len] = '\0';
	if (len)
		*len = w->len;
	w->buf = NULL;
	w->len = 0;
	w->comma = 0;
	w->plan_res = w->plan_f = NULL;
	return s;
}

struct jt_text {
	char *s;
	size_t len;
};

static int text_print(json_object *jso, struct printbuf *pb, int level, int flags)
{
	const struct jt_text *t = json_object_get_userdata(jso);

	(void)level;
	(void)flags;
	return printbuf_memappend(pb, t->s, (int)t->len);
}

static void text_free(json_object *jso, void *ud)
{
	struct jt_text *t = ud;

	(void)jso;
	free(t->s);
	free(t);
}

json_object *pc_jt_body(struct pc_jt *w)
{
	struct jt_text *t = malloc(sizeof(*t));
	json_object *o = json_object_new_boolean(0);

	if (t)
		t->s = pc_jt_take(w, &t->len);
	if (!t || !t->s || !o) {
		if (t)
			free(t->s);
		free(t);
		json_object_put(o);
		pc_jt_free(w);
		return NULL;
	}
	json_object_set_serializer(o, text_print, t, text_free);
	return o;
}

int pc_jt_respond(struct pin_req *r, int status, struct pc_jt *w)
{
	json_object *o;
	size_t len;
	char *s;

	if (PIN_API_HAS(pc_api, respond_json_text)) {
		s = pc_jt_take(w, &len);
		return s ? pc_api->respond_json_text(r, status, s, len) : PIN_ERR;
	}
	o = pc_jt_body(w);
	return o ? pc_api->respond_json(r, status, o) : PIN_ERR;
}
