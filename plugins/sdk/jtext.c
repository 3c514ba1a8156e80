/* jtext.c -- JSON text writer for hot list responses (sdk/jtext.h). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/printbuf.h>
#include "sdk/jtext.h"
#include "sdk/instant.h"
#include "sdk/pg.h"

/* 0: the byte goes out as it is; else the character after '\' ('u': \u00xx) */
static const char esc[256] = {
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

/* "s" escaped as json-c's json_escape_str with NOSLASHESCAPE, then the
 * byte tail (':' after a key, 0 for none).  Room for the worst case (6
 * bytes per input byte) first, then one pass over s. */
static void quoted(struct pc_jt *w, const char *s, char tail)
{
	static const char hx[] = "0123456789abcdef";
	const unsigned char *p = (const unsigned char *)s;
	size_t n = strlen(s);
	char *o;

	if (room(w, 6 * n + 3) < 0)
		return;
	o = w->buf + w->len;
	*o++ = '"';
	for (; *p; p++) {
		char e = esc[*p];

		if (!e) {
			*o++ = (char)*p;
			continue;
		}
		*o++ = '\\';
		*o++ = e;
		if (e == 'u') {
			*o++ = '0';
			*o++ = '0';
			*o++ = hx[*p >> 4];
			*o++ = hx[*p & 15];
		}
	}
	*o++ = '"';
	if (tail)
		*o++ = tail;
	w->len = (size_t)(o - w->buf);
}

void pc_jt_key(struct pc_jt *w, const char *key)
{
	sep(w);
	quoted(w, key, ':');
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

void pc_jt_int(struct pc_jt *w, int64_t v)
{
	char b[24], *e = b + sizeof(b), *p = e;
	uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;

	do {
		*--p = (char)('0' + u % 10);
		u /= 10;
	} while (u);
	if (v < 0)
		*--p = '-';
	pc_jt_raw(w, p, (size_t)(e - p));
}

void pc_jt_raw(struct pc_jt *w, const char *json, size_t len)
{
	sep(w);
	put(w, json, len);
	w->comma = 1;
}

/* ---------------------------------------------------------------- instants */

static char *two(char *o, unsigned v)
{
	o[0] = (char)('0' + v / 10);
	o[1] = (char)('0' + v % 10);
	return o + 2;
}

size_t pc_jt_fmt_time(int64_t us, char *out)
{
	int64_t secs = us / 1000000, frac = us % 1000000, days, z, era, y;
	unsigned doe, yoe, doy, mp, m, d, sod;
	char *o = out;

	if (frac < 0) {
		frac += 1000000;
		secs -= 1;
	}
	days = secs / 86400;
	sod = (unsigned)(secs % 86400);
	if (secs % 86400 < 0) {
		sod = (unsigned)(secs % 86400 + 86400);
		days -= 1;
	}
	/* civil_from_days (H. Hinnant, "chrono-Compatible Low-Level Date
	 * Algorithms"): proleptic Gregorian, as gmtime */
	z = days + 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned)(z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	y = (int64_t)yoe + era * 400;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	d = doy - (153 * mp + 2) / 5 + 1;
	m = mp < 10 ? mp + 3 : mp - 9;
	y += m <= 2;
	if (y < 1000 || y > 9999)       /* strftime's %Y is not 4 digits there */
		return strlen(pc_time_fmt(us, out, 40));
	o = two(o, (unsigned)(y / 100));
	o = two(o, (unsigned)(y % 100));
	*o++ = '-';
	o = two(o, m);
	*o++ = '-';
	o = two(o, d);
	*o++ = 'T';
	o = two(o, sod / 3600);
	*o++ = ':';
	o = two(o, sod / 60 % 60);
	*o++ = ':';
	o = two(o, sod % 60);
	if (frac) {
		*o++ = '.';
		for (int i = 5; i >= 0; i--) {
			o[i] = (char)('0' + frac % 10);
			frac /= 10;
		}
		o += 6;
	}
	*o++ = 'Z';
	*o = '\0';
	return (size_t)(o - out);
}

void pc_jt_time(struct pc_jt *w, int64_t us)
{
	char b[48];
	size_t n = pc_jt_fmt_time(us, b + 1);

	b[0] = '"';
	b[n + 1] = '"';
	pc_jt_raw(w, b, n + 2);
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
 * tests/unit/test_jtext.c compares the two. */
void pc_jt_col(struct pc_jt *w, const PGresult *res, int row, int col)
{
	const char *v;
	char t[40];

	if (PQgetisnull(res, row, col)) {
		pc_jt_null(w);
		return;
	}
	v = PQgetvalue(res, row, col);
	if (pc_col_is_bin(res, col)) {
		switch (PQftype(res, col)) {
		case PC_UUIDOID:
			/* hex and dashes: nothing to escape */
			pc_bin_uuid(v, t + 1);
			t[0] = '"';
			t[37] = '"';
			sep(w);
			put(w, t, 38);
			w->comma = 1;
			return;
		case PC_INT2OID:
		case PC_INT4OID:
		case PC_INT8OID:
			snprintf(t, sizeof t, "%lld",
				(long long)pc_bin_int(v, PQgetlength(res, row, col)));
			v = t;
			break;
		case PC_BOOLOID:
			v = *v ? "t" : "f";
			break;
		case PC_TEXTOID:
		case PC_VARCHAROID:
			break;          /* the same bytes in either format */
		default:
			/* a binary value of a type this writer cannot print
			 * (timestamptz, numeric, jsonb, ...): null, never its
			 * raw bytes as a string */
			pc_jt_null(w);
			return;
		}
	}
	pc_jt_str(w, v);
}

/* an int2 / int4 / int8 column's value, text or binary */
static int64_t col_int(const PGresult *res, int row, int col)
{
	const char *v = PQgetvalue(res, row, col);

	if (pc_col_is_bin(res, col))
		return pc_bin_int(v, PQgetlength(res, row, col));
	return dec(v);
}

void pc_jt_col_int(struct pc_jt *w, const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		pc_jt_null(w);
	else
		pc_jt_int(w, col_int(res, row, col));
}

void pc_jt_col_time(struct pc_jt *w, const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		pc_jt_null(w);
	else
		pc_jt_time(w, col_int(res, row, col));
}

void pc_jt_col_bool(struct pc_jt *w, const PGresult *res, int row, int col)
{
	const char *v = PQgetvalue(res, row, col);

	if (pc_col_is_bin(res, col))
		pc_jt_bool(w, !PQgetisnull(res, row, col) && *v != 0);
	else
		pc_jt_bool(w, strcmp(v, "t") == 0);
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
