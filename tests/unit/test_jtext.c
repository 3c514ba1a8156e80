/* test_jtext.c -- sdk/jtext.c: the JSON text writer of the hot lists must
 * print exactly what json-c prints for the same tree (the host's
 * respond_json flags), and its instant formatter exactly what pc_time_fmt
 * prints; cd_event_jt exactly what cd_event_json prints. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>
#include <json-c/json.h>
#include <libpq-fe.h>

#include "sdk/sdk.h"
#include "caldomain/event.h"
#include "suites.h"

#define FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

/* json-c's text of o (freed), compared with the writer's text (freed) */
static void same(json_object *o, struct pc_jt *w)
{
	size_t len;
	char *mine = pc_jt_take(w, &len);

	ck_assert_ptr_nonnull(mine);
	ck_assert_str_eq(mine, json_object_to_json_string_ext(o, FLAGS));
	ck_assert_uint_eq(len, strlen(mine));
	json_object_put(o);
	free(mine);
}

static void same_string(const char *s)
{
	struct pc_jt w;

	pc_jt_init(&w, 8);
	pc_jt_str(&w, s);
	same(json_object_new_string(s), &w);
}

START_TEST(jt_escapes_every_byte)
{
	char s[4] = "a", all[256];

	for (int c = 1; c < 256; c++) {
		s[1] = (char)c;
		s[2] = 'z';
		same_string(s);
		all[c - 1] = (char)c;
	}
	all[255] = 0;
	same_string(all);
	same_string("");
	same_string("q\"uo\\te / sl\b\f\n\r\t \x01\x1f \x7f \xc3\xa9 \xe6\x97\xa5 \xf0\x9f\x98\x80");
	same_string("\\\\\\\"\"\"////");
}
END_TEST

START_TEST(jt_structure)
{
	struct pc_jt w;
	json_object *o = json_object_new_object(), *a = json_object_new_array(),
		    *in = json_object_new_object();

	json_object_object_add(o, "s", json_object_new_string("x/y"));
	json_object_object_add(o, "n", NULL);
	json_object_object_add(o, "t", json_object_new_boolean(1));
	json_object_object_add(o, "f", json_object_new_boolean(0));
	json_object_array_add(a, json_object_new_int64(INT64_MIN));
	json_object_array_add(a, json_object_new_int64(INT64_MAX));
	json_object_array_add(a, json_object_new_int64(0));
	json_object_array_add(a, json_object_new_int64(-1));
	json_object_array_add(a, json_object_new_array());
	json_object_array_add(a, json_object_new_object());
	json_object_array_add(a, NULL);
	json_object_object_add(o, "a", a);
	json_object_object_add(in, "k\"ey\n", json_object_new_string("v"));
	json_object_object_add(o, "in", in);
	json_object_object_add(o, "e", json_object_new_array());

	pc_jt_init(&w, 1);       /* grows many times */
	pc_jt_obj(&w);
	pc_jt_key(&w, "s");
	pc_jt_str(&w, "x/y");
	pc_jt_key(&w, "n");
	pc_jt_str(&w, NULL);
	pc_jt_key(&w, "t");
	pc_jt_bool(&w, 7);
	pc_jt_key(&w, "f");
	pc_jt_bool(&w, 0);
	pc_jt_key(&w, "a");
	pc_jt_arr(&w);
	pc_jt_int(&w, INT64_MIN);
	pc_jt_int(&w, INT64_MAX);
	pc_jt_int(&w, 0);
	pc_jt_int(&w, -1);
	pc_jt_arr(&w);
	pc_jt_end_arr(&w);
	pc_jt_obj(&w);
	pc_jt_end_obj(&w);
	pc_jt_null(&w);
	pc_jt_end_arr(&w);
	pc_jt_key(&w, "in");
	pc_jt_obj(&w);
	pc_jt_key(&w, "k\"ey\n");
	pc_jt_raw(&w, "\"v\"", 3);
	pc_jt_end_obj(&w);
	pc_jt_key(&w, "e");
	pc_jt_arr(&w);
	pc_jt_end_arr(&w);
	pc_jt_end_obj(&w);
	same(o, &w);

	/* empty writer: "" */
	pc_jt_init(&w, 0);
	{
		size_t len = 9;
		char *s = pc_jt_take(&w, &len);
		ck_assert_str_eq(s, "");
		ck_assert_uint_eq(len, 0);
		free(s);
	}
}
END_TEST

/* pc_jt_body: a json_object that json-c prints as the text, and frees it */
START_TEST(jt_body_prints_the_text)
{
	struct pc_jt w;
	json_object *b;
	const char *want = "{\"items\":[{\"a\":1},{\"b\":\"x\\ny\"}],\"nextCursor\":null}";

	pc_jt_init(&w, 4);
	pc_jt_obj(&w);
	pc_jt_key(&w, "items");
	pc_jt_arr(&w);
	pc_jt_obj(&w);
	pc_jt_key(&w, "a");
	pc_jt_int(&w, 1);
	pc_jt_end_obj(&w);
	pc_jt_obj(&w);
	pc_jt_key(&w, "b");
	pc_jt_str(&w, "x\ny");
	pc_jt_end_obj(&w);
	pc_jt_end_arr(&w);
	pc_jt_key(&w, "nextCursor");
	pc_jt_str(&w, NULL);
	pc_jt_end_obj(&w);
	b = pc_jt_body(&w);
	ck_assert_ptr_nonnull(b);
	ck_assert_ptr_null(w.buf);
	ck_assert_str_eq(json_object_to_json_string_ext(b, FLAGS), want);
	ck_assert_str_eq(json_object_to_json_string_ext(b, JSON_C_TO_STRING_PRETTY), want);
	json_object_put(b);
	pc_jt_free(&w);         /* a no-op now */
}
END_TEST

static struct pin_host_api t_api;      /* defined below */
static size_t t_used;

/* the formatters against gmtime + strftime (what pc_time_fmt was before it
 * took the civil-from-days path): pc_jt_fmt_time, pc_time_fmt and
 * pc_time_param (always 6 fraction digits) */
static void same_time(int64_t us)
{
	char a[48], b[48], c[48], ref[64], base[40];
	int64_t secs = us / 1000000, frac = us % 1000000;
	struct tm tm;
	time_t t;
	size_t n = pc_jt_fmt_time(us, a);

	if (frac < 0) {
		frac += 1000000;
		secs -= 1;
	}
	t = (time_t)secs;
	gmtime_r(&t, &tm);
	strftime(base, sizeof(base), "%Y-%m-%dT%H:%M:%S", &tm);
	if (frac)
		snprintf(ref, sizeof(ref), "%s.%06lldZ", base, (long long)frac);
	else
		snprintf(ref, sizeof(ref), "%sZ", base);
	ck_assert_msg(strcmp(a, ref) == 0, "%lld: %s != %s", (long long)us, a, ref);
	ck_assert_uint_eq(n, strlen(ref));
	pc_time_fmt(us, b, 40);
	ck_assert_str_eq(b, ref);
	snprintf(c, sizeof(c), "%s.%06lldZ", base, (long long)frac);
	t_used = 0;             /* the test arena: one parameter at a time */
	ck_assert_str_eq(pc_time_param(us), c);
}

START_TEST(jt_time_as_pc_time_fmt)
{
	pc_api = &t_api;
	static const int64_t fixed[] = { 0, 1, -1, 999999, 1000000, -1000000, -1000001,
		86400000000LL, -86400000000LL, 951782400000000LL /* 2000-02-29 */,
		1764579600123456LL, PC_INSTANT_MIN_US, PC_INSTANT_MIN_US + 1,
		PC_INSTANT_END_US - 1, PC_INSTANT_END_US, -62135596800000000LL /* 0001 */,
		-30610224000000000LL /* 1000-01-01 */, -30610224000000001LL,
		4102444800000000LL /* 2100-01-01 */, 4107542400000000LL /* 2100-03-01 */ };
	uint64_t x = 88172645463325252ULL;

	for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
		same_time(fixed[i]);
	/* xorshift over the supported range, whole seconds and fractions */
	for (int i = 0; i < 20000; i++) {
		int64_t us;

		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		us = PC_INSTANT_MIN_US + (int64_t)(x % (uint64_t)(PC_INSTANT_END_US -
				PC_INSTANT_MIN_US));
		same_time(i % 2 ? us : us - us % 1000000);
	}
}
END_TEST

static int to_bin(unsigned typid, const char *in, char *out);

/* a libpq result built in memory (no server): PQmakeEmptyPGresult; text
 * columns, or with types the values' binary form (PQfformat 1, to_bin) */
static PGresult *fake_typed(int ncols, const unsigned *types,
		const char *const *vals, int nrows)
{
	PGresult *res = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
	PGresAttDesc *att = calloc((size_t)ncols, sizeof(*att));
	char name[16], v[512];

	for (int c = 0; c < ncols; c++) {
		snprintf(name, sizeof(name), "c%d", c);
		att[c].name = strdup(name);
		att[c].typid = types ? types[c] : 25;
		/* the types' sizes, as a server sends them (pc_jt_row reads
		 * a binary int's length from it) */
		att[c].typlen = !types ? -1 : types[c] == PC_INT2OID ? 2 :
			types[c] == PC_INT4OID ? 4 : types[c] == PC_INT8OID ? 8 :
			types[c] == PC_UUIDOID ? 16 : types[c] == PC_BOOLOID ? 1 : -1;
		att[c].atttypmod = -1;
		att[c].format = types ? 1 : 0;
	}
	ck_assert_int_eq(PQsetResultAttrs(res, ncols, att), 1);
	for (int c = 0; c < ncols; c++)
		free(att[c].name);
	free(att);
	for (int r = 0; r < nrows; r++)
		for (int c = 0; c < ncols; c++) {
			const char *t = vals[r * ncols + c];
			int len = !t ? -1 : types ? to_bin(types[c], t, v) : (int)strlen(t);

			ck_assert_int_eq(PQsetvalue(res, r, c, t && types ? v : (char *)t, len), 1);
		}
	return res;
}

static PGresult *fake(int ncols, const char *const *vals, int nrows)
{
	return fake_typed(ncols, NULL, vals, nrows);
}

START_TEST(jt_event_as_pc_event_json)
{
	const char *rows[2][CD_EC__N] = {
		{ "b0000000-0000-4000-8009-000000000001", "b0000000-0000-4000-8000-00000000000a",
		  "b0000000-0000-4000-8000-000000000002", "Task", "Manual", "Planned", "High",
		  "q\"uo\\te / sl\b\f\n\r\t \x01\x1f \x7f \xc3\xa9", "d\xe2\x80\xa8x", NULL,
		  "1764478800123456", NULL, "UTC", NULL, NULL,
		  "b0000000-0000-4000-8009-0000000000ff", NULL, NULL, NULL, NULL, "{}", NULL,
		  NULL, NULL, NULL, "1764565847409390", "1764565847909390", "1", "x" },
		{ "b0000000-0000-4000-8009-000000000002", "t", "o", "Meeting", "Manual",
		  "Cancelled", "Normal", "second", NULL, "loc", "1764478800000001",
		  "1764486000000000", "Europe/Moscow", "c", "l", "d", "b", "p", "po", "a",
		  "{5,10,-3,1440}", "why", "-2208988800000000", "0", "-1", "1", "-1",
		  "2147483648", NULL },
	};
	PGresult *res = fake(CD_EC__N, &rows[0][0], 2);

	for (int r = 0; r < 2; r++) {
		struct pc_jt w;

		pc_jt_init(&w, 16);
		cd_event_jt(&w, res, r);
		pc_jt_end_obj(&w);
		same(cd_event_json(res, r), &w);
	}
	PQclear(res);
}
END_TEST

/* ---- binary results (ABI 1.5 db_exec_prepared_bin) ---- */

/* v as PostgreSQL's binary value of type typid (the text form in): uuid 16
 * bytes, int2/4/8 and bool in network order, int4[] as array_send writes
 * it, anything else its bytes.  Returns the length; out >= 512 bytes. */
static int to_bin(unsigned typid, const char *in, char *out)
{
	unsigned char *o = (unsigned char *)out;
	long long v;
	int n = 0, k = 0;

	switch (typid) {
	case PC_UUIDOID:
		for (const char *p = in; *p && n < 16; p++) {
			if (*p == '-')
				continue;
			unsigned h = (unsigned)(*p <= '9' ? *p - '0' : *p - 'a' + 10);
			o[n] = (unsigned char)(k ? o[n] | h : h << 4);
			n += k;
			k = !k;
		}
		return 16;
	case PC_INT2OID:
	case PC_INT4OID:
	case PC_INT8OID:
		n = typid == PC_INT2OID ? 2 : typid == PC_INT4OID ? 4 : 8;
		v = strtoll(in, NULL, 10);
		for (int i = n - 1; i >= 0; i--, v >>= 8)
			o[i] = (unsigned char)(v & 0xff);
		return n;
	case PC_BOOLOID:
		o[0] = *in == 't';
		return 1;
	case PC_TIMESTAMPTZOID: {
		/* microseconds from 2000-01-01 of the ISO text (the reader's own
		 * parser; jt_timestamptz pins its results) */
		int64_t us = 0;

		ck_assert_int_eq(pc_pg_ts_text_us(in, &us), 0);
		v = us - PC_PG_EPOCH_US;
		for (int i = 7; i >= 0; i--, v >>= 8)
			o[i] = (unsigned char)(v & 0xff);
		return 8;
	}
	case PC_INT4ARRAYOID: {
		int vals[64], cnt = (int)pc_pg_int_parse(in, vals, 64);
		unsigned char *p = o;
		/* ndim, has-nulls, element oid; then length and lower bound */
		int head[5] = { cnt ? 1 : 0, 0, PC_INT4OID, cnt, 1 };

		for (int i = 0; i < (cnt ? 5 : 3); i++, p += 4)
			for (int b = 0; b < 4; b++)
				p[b] = (unsigned char)((unsigned)head[i] >> (24 - 8 * b));
		for (int i = 0; i < cnt; i++) {
			unsigned u[2] = { 4, (unsigned)vals[i] };

			for (int j = 0; j < 2; j++, p += 4)
				for (int b = 0; b < 4; b++)
					p[b] = (unsigned char)(u[j] >> (24 - 8 * b));
		}
		return (int)(p - o);
	}
	default:
		n = (int)strlen(in);
		memcpy(out, in, (size_t)n);
		return n;
	}
}

static const char *const bin_rows[2][CD_EC__N] = {
	{ "b0000000-0000-4000-8009-000000000001", "b0000000-0000-4000-8000-00000000000a",
	  "ffffffff-0000-4000-8000-0123456789ab", "Task", "Manual", "Planned", "High",
	  "q\"uo\\te / sl\b\f\n\r\t \x01\x1f \x7f \xc3\xa9", "d\xe2\x80\xa8x", NULL,
	  "1764478800123456", NULL, "UTC", NULL, NULL,
	  "b0000000-0000-4000-8009-0000000000ff", NULL, NULL, NULL, NULL, "{}", NULL,
	  NULL, NULL, NULL, "1764565847409390", "1764565847909390", "1", "x" },
	{ "00000000-0000-0000-0000-000000000000", "b0000000-0000-4000-8000-00000000000b",
	  "c0000000-0000-4000-8000-000000000003", "Meeting", "Manual",
	  "Cancelled", "Normal", "second", NULL, "loc", "1764478800000001",
	  "1764486000000000", "Europe/Moscow", "a0000000-0000-4000-8000-000000000001",
	  "t", "d", "a4000000-0000-4000-8000-0000000000ff", "a1000000-0000-4000-8000-000000000001",
	  "a2000000-0000-4000-8000-000000000001", "a3000000-0000-4000-8000-000000000001",
	  "{5,10,-3,1440,-2147483648,2147483647}", "why", "-2208988800000000", "0", "-1",
	  "1", "-1", "2147483647", NULL },
};

/* the event columns' types as the list statement returns them */
static void event_types(unsigned *t)
{
	for (int c = 0; c < CD_EC__N; c++)
		t[c] = 25;
	t[CD_EC_ID] = t[CD_EC_TENANT] = t[CD_EC_OWNER] = t[CD_EC_CLIENT] =
		t[CD_EC_BOOKING] = t[CD_EC_PROJECT] = t[CD_EC_PROPERTY] =
		t[CD_EC_APPOINTMENT] = PC_UUIDOID;
	t[CD_EC_START] = t[CD_EC_END] = t[CD_EC_STARTED] = t[CD_EC_COMPLETED] =
		t[CD_EC_CANCELLED] = t[CD_EC_CREATED] = t[CD_EC_UPDATED] = PC_INT8OID;
	t[CD_EC_OFFSETS] = PC_INT4ARRAYOID;
	t[CD_EC_VERSION] = PC_INT4OID;
}

/* a host table with an arena (pc_col_text, pc_next_cursor) */
static char t_arena[8192];

static void *t_alloc(size_t n)
{
	void *p = t_arena + t_used;

	n = (n + 15) & ~(size_t)15;
	ck_assert_uint_le(t_used + n, sizeof(t_arena));
	t_used += n;
	memset(p, 0, n);
	return p;
}

/* the short texts of these tests (cursors) only: 256 bytes */
static char *t_sprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static char *t_sprintf(const char *fmt, ...)
{
	va_list ap;
	char *p = t_alloc(256);
	int n;

	va_start(ap, fmt);
	n = vsnprintf(p, 256, fmt, ap);
	va_end(ap);
	ck_assert(n >= 0 && n < 256);
	return p;
}

static struct pin_host_api t_api = { .alloc = t_alloc, .sprintf = t_sprintf };

/* pc_jt_row (the showcase's table: a nested object, a bool, ints, times,
 * NULLs, text to escape) writes the bytes of the same pc_jt_key / pc_jt_col*
 * calls, from a text result and from a binary one; a second result in the
 * same writer gets its own plan */
START_TEST(jt_row_as_the_calls)
{
	static const struct pc_jt_field f[] = {
		PC_JT_F("id", 0, 's'), PC_JT_F("n", 1, 'i'), PC_JT_F("at", 2, 't'),
		PC_JT_F("ok", 3, 'b'), PC_JT_F("in", -1, '{'), PC_JT_F("s", 4, 's'),
		PC_JT_F("u", 0, 's'), PC_JT_END, PC_JT_F("v", 1, 's'),
		PC_JT_F("last", 4, 's'),
	};
	static const char *const vals[] = {
		"0b5d3a64-0000-4000-8000-00000000000a", "-42", "1796112000000000", "t",
		"a \"q\" \\ \x01\n\xd0\xaf/",
		"1b5d3a64-0000-4000-8000-00000000000b", NULL, NULL, "f", NULL,
		/* the next day (a new date after the writer's last), then a
		 * year of 3 digits (pc_time_fmt's text), then the first day again */
		"2b5d3a64-0000-4000-8000-00000000000c", "7", "1796198400500000", "t", "",
		"3b5d3a64-0000-4000-8000-00000000000d", "8", "-46388678400000000", "f", "z",
		"4b5d3a64-0000-4000-8000-00000000000e", "9", "1796112059000001", "t", "y",
	};
	unsigned types[5] = { PC_UUIDOID, PC_INT8OID, PC_INT8OID, PC_BOOLOID, PC_TEXTOID };
	PGresult *res[2] = { fake(5, vals, 5), fake_typed(5, types, vals, 5) };
	struct pc_jt a, b;
	char *ta, *tb;

	pc_jt_init(&b, 8);
	pc_jt_arr(&b);
	for (int k = 0; k < 2; k++)
		for (int r = 0; r < 5; r++)
			pc_jt_row(&b, res[k], r, f, sizeof(f) / sizeof(f[0]));
	pc_jt_end_arr(&b);
	pc_jt_init(&a, 8);
	pc_jt_arr(&a);
	for (int k = 0; k < 2; k++)
		for (int r = 0; r < 5; r++) {
			pc_jt_obj(&a);
			PC_JT_K(&a, "id");
			pc_jt_col(&a, res[k], r, 0);
			PC_JT_K(&a, "n");
			pc_jt_col_int(&a, res[k], r, 1);
			PC_JT_K(&a, "at");
			pc_jt_col_time(&a, res[k], r, 2);
			PC_JT_K(&a, "ok");
			pc_jt_col_bool(&a, res[k], r, 3);
			PC_JT_K(&a, "in");
			pc_jt_obj(&a);
			pc_jt_key(&a, "s");
			pc_jt_col(&a, res[k], r, 4);
			pc_jt_key(&a, "u");
			pc_jt_col(&a, res[k], r, 0);
			pc_jt_end_obj(&a);
			pc_jt_key(&a, "v");
			pc_jt_col(&a, res[k], r, 1);
			pc_jt_key(&a, "last");
			pc_jt_col(&a, res[k], r, 4);
		}
	pc_jt_end_arr(&a);
	ta = pc_jt_take(&a, NULL);
	tb = pc_jt_take(&b, NULL);
	ck_assert_ptr_nonnull(ta);
	ck_assert_ptr_nonnull(tb);
	ck_assert_str_eq(tb, ta);
	ck_assert_ptr_nonnull(strstr(tb, "\"at\":\"2026-12-01T08:00:00Z\",\"ok\":true,"
		"\"in\":{\"s\":\"a \\\"q\\\" \\\\ \\u0001\\n\xd0\xaf/\""));
	ck_assert_ptr_nonnull(strstr(tb, "\"n\":null,\"at\":null,\"ok\":false,\"in\":{\"s\":null,"));
	ck_assert_ptr_nonnull(strstr(tb, "\"at\":\"2026-12-02T08:00:00.500000Z\""));
	ck_assert_ptr_nonnull(strstr(tb, "\"at\":\"2026-12-01T08:00:59.000001Z\""));
	free(ta);
	free(tb);
	PQclear(res[0]);
	PQclear(res[1]);
}
END_TEST

/* pc_jt_respond: a 1.6 host gets the text itself (respond_json_text, no
 * json-c object); an older host (its table ends before the member) gets
 * respond_json of a json_object that prints the same bytes */
static char *resp_text;
static size_t resp_len;
static int resp_status, resp_json_calls;

static int t_respond_json_text(struct pin_req *r, int status, char *text, size_t len)
{
	(void)r;
	resp_status = status;
	resp_text = text;
	resp_len = len;
	return 0;
}

static int t_respond_json(struct pin_req *r, int status, json_object *body)
{
	(void)r;
	resp_status = status;
	resp_json_calls++;
	resp_text = strdup(json_object_to_json_string_ext(body,
		JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	resp_len = strlen(resp_text);
	json_object_put(body);
	return 0;
}

START_TEST(jt_respond_old_and_new_host)
{
	struct pin_host_api api = { .size = sizeof(api), .respond_json = t_respond_json,
		.respond_json_text = t_respond_json_text };
	const struct pin_host_api *saved = pc_api;

	for (int old = 0; old < 2; old++) {
		struct pc_jt w;

		api.size = old ? offsetof(struct pin_host_api, respond_json_text) : sizeof(api);
		pc_api = &api;
		resp_text = NULL;
		resp_json_calls = 0;
		pc_jt_init(&w, 4);
		pc_jt_obj(&w);
		PC_JT_K(&w, "a");
		pc_jt_str(&w, "x\ny");
		pc_jt_end_obj(&w);
		ck_assert_int_eq(pc_jt_respond(NULL, 201, &w), PIN_OK);
		ck_assert_int_eq(resp_status, 201);
		ck_assert_int_eq(resp_json_calls, old);
		ck_assert_ptr_nonnull(resp_text);
		ck_assert_str_eq(resp_text, "{\"a\":\"x\\ny\"}");
		ck_assert_uint_eq(resp_len, strlen(resp_text));
		ck_assert_uint_eq(w.len, 0);    /* the writer gave its text away */
		free(resp_text);
		pc_jt_free(&w);
	}
	pc_api = saved;
}
END_TEST

/* pc_bin_uuid: every byte value in every position, against printf */
START_TEST(jt_bin_uuid_every_byte)
{
	unsigned char b[16];
	char got[37], want[37];

	for (int v = 0; v < 256; v++) {
		for (int i = 0; i < 16; i++)
			b[i] = (unsigned char)(v + 17 * i);
		pc_bin_uuid((const char *)b, got);
		snprintf(want, sizeof(want),
			"%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
			b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9],
			b[10], b[11], b[12], b[13], b[14], b[15]);
		ck_assert_str_eq(got, want);
	}
}
END_TEST

/* a timestamptz column itself (the read paths select it raw since session
 * 11): binary and text results give the same instant to pc_col_us, the
 * column writers and pc_jt_row; offsets, fractions, NULL; text that is
 * not ISO (infinity) is null for the writers */
START_TEST(jt_timestamptz)
{
	static const char *const vals[] = {
		"2026-12-01 08:00:00+00", "2026-12-01 13:30:00.25+05:30",
		"1970-01-01 03:00:00.000001+03", "1900-01-01 00:00:00+00", NULL,
	};
	static const int64_t want_us[] = { 1796112000000000, 1796112000250000, 1,
		-2208988800000000, -1 };
	static const char *const want[] = { "\"2026-12-01T08:00:00Z\"",
		"\"2026-12-01T08:00:00.250000Z\"", "\"1970-01-01T00:00:00.000001Z\"",
		"\"1900-01-01T00:00:00Z\"", "null" };
	static const struct pc_jt_field f[] = { PC_JT_F("t", 0, 't') };
	unsigned ty[1] = { PC_TIMESTAMPTZOID };
	PGresult *res[2] = { fake_typed(1, ty, vals, 5),
		PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK) };
	int64_t us;

	/* the text result: same type, text format */
	{
		PGresAttDesc att = { .name = (char *)"t", .typid = PC_TIMESTAMPTZOID,
			.typlen = 8, .atttypmod = -1, .format = 0 };

		ck_assert_int_eq(PQsetResultAttrs(res[1], 1, &att), 1);
		for (int r = 0; r < 5; r++)
			ck_assert_int_eq(PQsetvalue(res[1], r, 0, (char *)vals[r],
				vals[r] ? (int)strlen(vals[r]) : -1), 1);
	}
	for (int k = 0; k < 2; k++)
		for (int r = 0; r < 5; r++) {
			struct pc_jt a, b;
			char *ta, *tb, exp[64];

			ck_assert(pc_col_us(res[k], r, 0) == want_us[r]);
			pc_jt_init(&a, 8);
			pc_jt_init(&b, 8);
			pc_jt_col_time(&a, res[k], r, 0);
			pc_jt_row(&b, res[k], r, f, 1);
			pc_jt_end_obj(&b);
			ta = pc_jt_take(&a, NULL);
			tb = pc_jt_take(&b, NULL);
			ck_assert_str_eq(ta, want[r]);
			snprintf(exp, sizeof(exp), "{\"t\":%s}", want[r]);
			ck_assert_str_eq(tb, exp);
			free(ta);
			free(tb);
		}
	ck_assert_int_eq(pc_pg_ts_text_us("0001-01-01 00:00:00+00 BC", &us), 0);
	ck_assert(us == -62167219200000000);
	ck_assert_int_eq(pc_pg_ts_text_us("infinity", &us), -1);
	{
		/* binary infinity, -infinity and year ~294,000: null, -1 */
		static const char bins[3][8] = { "\x7f\xff\xff\xff\xff\xff\xff\xff",
			"\x80\0\0\0\0\0\0\0", "\x7f\xff\xff\xff\xff\xff\0\0" };
		PGresAttDesc att = { .name = (char *)"t", .typid = PC_TIMESTAMPTZOID,
			.typlen = 8, .atttypmod = -1, .format = 1 };
		PGresult *t = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
		struct pc_jt a;
		char *ta;

		ck_assert_int_eq(PQsetResultAttrs(t, 1, &att), 1);
		for (int r = 0; r < 3; r++)
			ck_assert_int_eq(PQsetvalue(t, r, 0, (char *)bins[r], 8), 1);
		pc_jt_init(&a, 8);
		pc_jt_arr(&a);
		for (int r = 0; r < 3; r++) {
			ck_assert(pc_col_us(t, r, 0) == -1);
			pc_jt_row(&a, t, r, f, 1);
			pc_jt_end_obj(&a);
			pc_jt_col_time(&a, t, r, 0);
		}
		pc_jt_end_arr(&a);
		ta = pc_jt_take(&a, NULL);
		ck_assert_str_eq(ta, "[{\"t\":null},null,{\"t\":null},null,{\"t\":null},null]");
		free(ta);
		PQclear(t);
	}
	ck_assert_int_eq(pc_pg_ts_text_us("12/01/2026 08:00:00 UTC", &us), -1);
	ck_assert_int_eq(pc_pg_ts_text_us("2026-12-01 08:00:00", &us), -1);
	{
		const char *inf[] = { "infinity" };
		PGresAttDesc att = { .name = (char *)"t", .typid = PC_TIMESTAMPTZOID,
			.typlen = 8, .atttypmod = -1, .format = 0 };
		PGresult *t = PQmakeEmptyPGresult(NULL, PGRES_TUPLES_OK);
		struct pc_jt a;
		char *ta;

		ck_assert_int_eq(PQsetResultAttrs(t, 1, &att), 1);
		ck_assert_int_eq(PQsetvalue(t, 0, 0, (char *)inf[0], 8), 1);
		pc_jt_init(&a, 8);
		pc_jt_row(&a, t, 0, f, 1);
		pc_jt_col_time(&a, t, 0, 0);
		ta = pc_jt_take(&a, NULL);
		ck_assert_str_eq(ta, "{\"t\":null,null");
		free(ta);
		PQclear(t);
	}
	PQclear(res[0]);
	PQclear(res[1]);
}
END_TEST

/* cd_event_jt and every column writer print the same bytes from a binary
 * result as from the text one; pc_col_us, pc_col_text and pc_next_cursor
 * read the same values */
START_TEST(jt_binary_as_text)
{
	unsigned types[CD_EC__N];
	PGresult *txt = fake(CD_EC__N, &bin_rows[0][0], 2), *bin;

	pc_api = &t_api;
	t_used = 0;
	event_types(types);
	types[CD_EC_LEAD] = PC_BOOLOID;     /* NULL / "t": a bool column */
	bin = fake_typed(CD_EC__N, types, &bin_rows[0][0], 2);
	for (int r = 0; r < 2; r++) {
		struct pc_jt a, b;
		size_t la, lb;
		char *ta, *tb;

		pc_jt_init(&a, 16);
		pc_jt_init(&b, 16);
		cd_event_jt(&a, txt, r);
		cd_event_jt(&b, bin, r);
		for (int c = 0; c < CD_EC__N; c++) {
			if (types[c] == PC_BOOLOID)
				continue;    /* its text "l" is not a boolean */
			if (types[c] == PC_INT4ARRAYOID) {
				pc_jt_col_int_array(&a, txt, r, c);
				pc_jt_col_int_array(&b, bin, r, c);
				continue;    /* pc_jt_col is not for arrays */
			}
			pc_jt_col(&a, txt, r, c);
			pc_jt_col(&b, bin, r, c);
			if (types[c] == PC_INT8OID || types[c] == PC_INT4OID) {
				pc_jt_col_int(&a, txt, r, c);
				pc_jt_col_int(&b, bin, r, c);
				pc_jt_col_time(&a, txt, r, c);
				pc_jt_col_time(&b, bin, r, c);
				ck_assert(pc_col_us(txt, r, c) == pc_col_us(bin, r, c));
			}
			if (types[c] == PC_UUIDOID && !PQgetisnull(txt, r, c))
				ck_assert_str_eq(pc_col_text(txt, r, c), pc_col_text(bin, r, c));
		}
		pc_jt_end_obj(&a);
		pc_jt_end_obj(&b);
		ta = pc_jt_take(&a, &la);
		tb = pc_jt_take(&b, &lb);
		ck_assert_ptr_nonnull(ta);
		ck_assert_ptr_nonnull(tb);
		ck_assert_str_eq(tb, ta);
		ck_assert_uint_eq(la, lb);
		free(ta);
		free(tb);
	}
	ck_assert_str_eq(pc_next_cursor(bin, 1, CD_EC_START, CD_EC_ID),
		pc_next_cursor(txt, 1, CD_EC_START, CD_EC_ID));
	PQclear(txt);
	PQclear(bin);
}
END_TEST

/* a binary bool column: t, f and NULL as the text result's "t", "f" and
 * NULL (pc_jt_col_bool: false) */
START_TEST(jt_binary_bool)
{
	const char *vals[] = { "t", "f", NULL };
	unsigned ty[1] = { PC_BOOLOID };
	PGresult *txt = fake(1, vals, 3), *bin = fake_typed(1, ty, vals, 3);

	for (int r = 0; r < 3; r++) {
		struct pc_jt a, b;
		size_t la, lb;
		char *ta, *tb;

		pc_jt_init(&a, 16);
		pc_jt_init(&b, 16);
		pc_jt_arr(&a);
		pc_jt_arr(&b);
		pc_jt_col_bool(&a, txt, r, 0);
		pc_jt_col_bool(&b, bin, r, 0);
		pc_jt_col(&a, txt, r, 0);
		pc_jt_col(&b, bin, r, 0);
		pc_jt_end_arr(&a);
		pc_jt_end_arr(&b);
		ta = pc_jt_take(&a, &la);
		tb = pc_jt_take(&b, &lb);
		ck_assert_str_eq(tb, ta);
		free(ta);
		free(tb);
	}
	PQclear(txt);
	PQclear(bin);
}
END_TEST

/* a binary two-dimensional int4[] and one with a NULL element: every value
 * in storage order, NULLs skipped, as the text path reads "{{1,2},{3,4}}" */
START_TEST(jt_binary_int_array_dims)
{
	static const int a2[] = { 2, 0, PC_INT4OID, 2, 1, 2, 1,
		4, 1, 4, 2, 4, 3, 4, -4 };
	static const int an[] = { 1, 1, PC_INT4OID, 3, 1, 4, 7, -1, 4, 9 };
	const char *txt[] = { "{{1,2},{3,-4}}", "{7,NULL,9}" };
	const int *bins[] = { a2, an };
	const int lens[] = { (int)(sizeof(a2) / sizeof(a2[0])), (int)(sizeof(an) / sizeof(an[0])) };

	for (int k = 0; k < 2; k++) {
		unsigned char raw[128];
		unsigned ty[1] = { PC_INT4ARRAYOID };
		PGresult *bin = fake_typed(1, ty, (const char *const[]){ "{}" }, 1);
		struct pc_jt w;

		for (int i = 0; i < lens[k]; i++)
			for (int b = 0; b < 4; b++)
				raw[4 * i + b] = (unsigned char)((unsigned)bins[k][i] >> (24 - 8 * b));
		ck_assert_int_eq(PQsetvalue(bin, 0, 0, (char *)raw, 4 * lens[k]), 1);
		pc_jt_init(&w, 16);
		pc_jt_col_int_array(&w, bin, 0, 0);
		same(pc_json_int_array(txt[k]), &w);
		PQclear(bin);
	}
}
END_TEST

START_TEST(jt_int_array_as_pc_json_int_array)
{
	const char *vals[] = { "{1440,60}", "{}", NULL, "{-5,3}", "{0}" };
	PGresult *res = fake(1, vals, 5);

	for (int r = 0; r < 5; r++) {
		struct pc_jt w;

		pc_jt_init(&w, 16);
		pc_jt_col_int_array(&w, res, r, 0);
		same(pc_json_int_array(vals[r]), &w);
	}
	PQclear(res);
}
END_TEST

Suite *make_jtext_suite(void)
{
	Suite *s = suite_create("jtext");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, jt_escapes_every_byte);
	tcase_add_test(tc, jt_structure);
	tcase_add_test(tc, jt_body_prints_the_text);
	tcase_add_test(tc, jt_time_as_pc_time_fmt);
	tcase_add_test(tc, jt_event_as_pc_event_json);
	tcase_add_test(tc, jt_int_array_as_pc_json_int_array);
	tcase_add_test(tc, jt_binary_as_text);
	tcase_add_test(tc, jt_row_as_the_calls);
	tcase_add_test(tc, jt_timestamptz);
	tcase_add_test(tc, jt_bin_uuid_every_byte);
	tcase_add_test(tc, jt_respond_old_and_new_host);
	tcase_add_test(tc, jt_binary_bool);
	tcase_add_test(tc, jt_binary_int_array_dims);
	suite_add_tcase(s, tc);
	return s;
}
