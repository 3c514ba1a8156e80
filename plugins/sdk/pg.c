/* pg.c -- libpq result helpers and JSON output of columns. */
#include "config.h"
#include <ctype.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/pg.h"
#include "sdk/civil.h"
#ifdef __SSE2__
#include <emmintrin.h>
#endif


/*
 * SQLSTATE of the first failed result pc_res_ok saw on this thread since
 * pc_sqlstate_clear.  Kept as a pthread key whose value is the five
 * characters packed into the pointer (6 bits each, [0-9A-Z] as 1..36, 0 ends
 * the text; bit 30 marks "set"): no __thread
 * variable and no allocation in a plugin that is unloaded (LeakSanitizer's
 * exit scan crashed on a dlclosed plugin's thread-local block).
 */
static pthread_key_t sq_key;
static pthread_once_t sq_once = PTHREAD_ONCE_INIT;

static void sq_init(void)
{
	if (pthread_key_create(&sq_key, NULL) != 0)
		abort();
}

static int sq_code(char ch)
{
	return ch >= '0' && ch <= '9' ? ch - '0' + 1 : ch >= 'A' && ch <= 'Z' ? ch - 'A' + 11 : 37;
}

static char sq_char(int v)
{
	return v <= 10 ? (char)('0' + v - 1) : v <= 36 ? (char)('A' + v - 11) : '?';
}

int pc_res_ok(const PGresult *res, ExecStatusType want)
{
	int ok = res && PQresultStatus(res) == want;

	pthread_once(&sq_once, sq_init);
	if (!ok && res && !pthread_getspecific(sq_key)) {
		const char *st = pc_api->db_sqlstate(res);
		uintptr_t v = (uintptr_t)1 << 30;   /* set, even for "" */

		for (int i = 0; st && i < 5 && st[i]; i++)
			v |= (uintptr_t)sq_code(st[i]) << (6 * i);
		pthread_setspecific(sq_key, (void *)v);
	}
	return ok;
}

void pc_sqlstate_clear(void)
{
	pthread_once(&sq_once, sq_init);
	pthread_setspecific(sq_key, NULL);
}

const char *pc_sqlstate_first(void)
{
	uintptr_t v;
	char st[6] = "";

	pthread_once(&sq_once, sq_init);
	v = (uintptr_t)pthread_getspecific(sq_key);
	for (int i = 0; v && i < 5 && (v >> (6 * i) & 63) != 0; i++)
		st[i] = sq_char((int)(v >> (6 * i) & 63));
	return pc_api->strdup(st);
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

static int digits(const char **s, int n, int *v)
{
	*v = 0;
	for (int i = 0; i < n; i++, (*s)++) {
		if (**s < '0' || **s > '9')
			return -1;
		*v = *v * 10 + (**s - '0');
	}
	return 0;
}

int pc_pg_ts_text_us(const char *s, int64_t *us)
{
	int64_t y = 0, days, secs, frac = 0, scale = 100000;
	int mo, d, h, mi, sec, oh = 0, om = 0, os = 0, sign = 1, n = 0;

	/* PostgreSQL's ISO output of a timestamptz (DateStyle ISO):
	 * YYYY-MM-DD HH:MM:SS[.ffffff]+HH[:MM[:SS]][ BC] */
	while (*s >= '0' && *s <= '9' && n < 7) {
		y = y * 10 + (*s++ - '0');
		n++;
	}
	if (n < 4 || *s++ != '-' || digits(&s, 2, &mo) || *s++ != '-' ||
	    digits(&s, 2, &d) || (*s != ' ' && *s != 'T'))
		return -1;
	s++;
	if (digits(&s, 2, &h) || *s++ != ':' || digits(&s, 2, &mi) || *s++ != ':' ||
	    digits(&s, 2, &sec))
		return -1;
	if (*s == '.')
		for (s++; *s >= '0' && *s <= '9'; s++, scale /= 10)
			frac += scale ? (*s - '0') * scale : 0;
	if (*s != '+' && *s != '-')
		return -1;
	sign = *s++ == '-' ? -1 : 1;
	if (digits(&s, 2, &oh))
		return -1;
	if (*s == ':' && (s++, digits(&s, 2, &om)))
		return -1;
	if (*s == ':' && (s++, digits(&s, 2, &os)))
		return -1;
	if (*s == ' ' && s[1] == 'B' && s[2] == 'C' && !s[3]) {
		y = 1 - y;              /* 1 BC is year 0 */
		s += 3;
	}
	if (*s || mo < 1 || mo > 12 || d < 1 || d > 31)
		return -1;
	days = pc_days_from_civil(y, (unsigned)mo, (unsigned)d);
	secs = days * 86400 + h * 3600 + mi * 60 + sec - sign * (oh * 3600 + om * 60 + os);
	*us = secs * 1000000 + frac;
	return 0;
}

int pc_pg_ts_bin_us(const char *v, int64_t *us)
{
	int64_t t = pc_bin_int(v, 8);

	if (t == INT64_MAX || t == INT64_MIN || __builtin_add_overflow(t, PC_PG_EPOCH_US, us))
		return -1;
	return 0;
}

int64_t pc_col_us(const PGresult *res, int row, int col)
{
	int64_t us;

	if (PQgetisnull(res, row, col))
		return -1;
	if (PQftype(res, col) == PC_TIMESTAMPTZOID) {
		if (pc_col_is_bin(res, col))
			return pc_pg_ts_bin_us(PQgetvalue(res, row, col), &us) == 0 ? us : -1;
		return pc_pg_ts_text_us(PQgetvalue(res, row, col), &us) == 0 ? us : -1;
	}
	if (pc_col_is_bin(res, col))
		return pc_bin_int(PQgetvalue(res, row, col), PQgetlength(res, row, col));
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

int pc_col_is_bin(const PGresult *res, int col)
{
	return PQfformat(res, col) == 1;
}

PGresult *pc_exec_prepared_bin(const char *name, const char *sql, int n,
		const char *const *params)
{
	if (PIN_API_HAS(pc_api, db_exec_prepared_bin))
		return pc_api->db_exec_prepared_bin(name, sql, n, params);
	return pc_api->db_exec_prepared(name, sql, n, params);
}

int64_t pc_bin_int(const char *v, int len)
{
	const unsigned char *p = (const unsigned char *)v;
	uint64_t u = 0;

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	/* network order: one load and a byte swap */
	if (len == 8) {
		memcpy(&u, p, 8);
		return (int64_t)__builtin_bswap64(u);
	}
	if (len == 4) {
		uint32_t h;

		memcpy(&h, p, 4);
		return (int32_t)__builtin_bswap32(h);
	}
#endif
	for (int i = 0; i < len; i++)
		u = u << 8 | p[i];
	if (len == 2)
		return (int16_t)u;
	if (len == 4)
		return (int32_t)u;
	return (int64_t)u;
}

#ifndef __SSE2__
/* a byte's two lower-case hex digits, byte b at [2b] */
static const char hex_pairs[513] =
	"000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	"202122232425262728292a2b2c2d2e2f303132333435363738393a3b3c3d3e3f"
	"404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
	"606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f"
	"808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f"
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeafb0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";
#endif

void pc_bin_uuid(const char *v, char out[37])
{
#ifdef __SSE2__
	/* the 32 digits of the 16 bytes at once: each nibble n becomes
	 * '0' + n, plus 39 ('a' - '0' - 10) where n > 9; then the groups */
	const __m128i lo4 = _mm_set1_epi8(0x0f), nine = _mm_set1_epi8(9);
	__m128i b = _mm_loadu_si128((const __m128i *)(const void *)v);
	__m128i hi = _mm_and_si128(_mm_srli_epi16(b, 4), lo4);
	__m128i lo = _mm_and_si128(b, lo4);
	__m128i d[2] = { _mm_unpacklo_epi8(hi, lo), _mm_unpackhi_epi8(hi, lo) };
	char h[32];

	for (int k = 0; k < 2; k++) {
		__m128i gt = _mm_cmpgt_epi8(d[k], nine);

		d[k] = _mm_add_epi8(_mm_add_epi8(d[k], _mm_set1_epi8('0')),
			_mm_and_si128(gt, _mm_set1_epi8(39)));
		_mm_storeu_si128((__m128i *)(void *)(h + 16 * k), d[k]);
	}
	memcpy(out, h, 8);
	out[8] = '-';
	memcpy(out + 9, h + 8, 4);
	out[13] = '-';
	memcpy(out + 14, h + 12, 4);
	out[18] = '-';
	memcpy(out + 19, h + 16, 4);
	out[23] = '-';
	memcpy(out + 24, h + 20, 12);
	out[36] = '\0';
#else
	/* the 16 bytes in 8-4-4-4-12 groups: a 2-byte copy per byte from
	 * hex_pairs */
	static const unsigned char at[16] = {
		0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34 };
	const unsigned char *p = (const unsigned char *)v;

	for (int i = 0; i < 16; i++)
		memcpy(out + at[i], hex_pairs + 2 * p[i], 2);
	out[8] = out[13] = out[18] = out[23] = '-';
	out[36] = '\0';
#endif
}

const char *pc_col_text(const PGresult *res, int row, int col)
{
	char *t;

	if (PQgetisnull(res, row, col))
		return NULL;
	if (!pc_col_is_bin(res, col) || PQftype(res, col) != PC_UUIDOID)
		return PQgetvalue(res, row, col);
	t = pc_api->alloc(37);
	if (t)
		pc_bin_uuid(PQgetvalue(res, row, col), t);
	return t;
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
