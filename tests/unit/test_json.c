/* test_json.c -- pin_json_parse() and pin_url_decode().
 *
 * Expectations (where core.h leaves room):
 *  - pin_json_parse reads exactly buf[0..len): one JSON value, optional
 *    surrounding whitespace, nothing else; bytes past len are never read;
 *  - nesting deeper than a sane limit (json-c's default 32 or so) fails
 *    cleanly, a dozen levels parse;
 *  - pin_url_decode decodes %XX (either case) and '+' as space (it serves
 *    query strings), refuses bad or truncated escapes and %00.
 */
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "pgarr.h"
#include "suites.h"

static json_object *parse(const char *s, char *err, size_t errlen)
{
	err[0] = 0;
	return pin_json_parse(s, strlen(s), err, errlen);
}

START_TEST(test_parse_valid)
{
	char err[128];
	json_object *o = parse("{\"a\": 1, \"b\": [true, null, \"x\"], \"c\": {\"d\": 2.5}}",
			err, sizeof(err));
	json_object *v;

	ck_assert_msg(o != NULL, "err: %s", err);
	ck_assert(json_object_is_type(o, json_type_object));
	ck_assert(json_object_object_get_ex(o, "a", &v));
	ck_assert_int_eq(json_object_get_int(v), 1);
	ck_assert(json_object_object_get_ex(o, "b", &v));
	ck_assert_uint_eq(json_object_array_length(v), 3);
	json_object_put(o);

	/* surrounding whitespace, scalars and arrays are JSON too */
	o = parse("  \n{\"a\":\"\\u00e9\"}\r\n ", err, sizeof(err));
	ck_assert_msg(o != NULL, "err: %s", err);
	ck_assert(json_object_object_get_ex(o, "a", &v));
	ck_assert_str_eq(json_object_get_string(v), "\xc3\xa9");
	json_object_put(o);
	o = parse("[]", err, sizeof(err));
	ck_assert_ptr_nonnull(o);
	json_object_put(o);
}
END_TEST

START_TEST(test_parse_invalid)
{
	static const char *bad[] = {
		"{a: 1}", "{\"a\": 1,}", "[1, 2,]", "nope", "{\"a\" 1}",
		"{} {}", "{\"a\":1} x", "\"unterminated", "{\"a\":01}",
	};
	char err[128];
	size_t i;
	json_object *o;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o = parse(bad[i], err, sizeof(err));
		ck_assert_msg(o == NULL, "accepted: %s", bad[i]);
		ck_assert_msg(err[0] != 0, "no error text for: %s", bad[i]);
	}
}
END_TEST

/* json-c 0.16 accepts single-quoted object keys even with
 * JSON_TOKENER_STRICT; the host must still refuse them (400). */
START_TEST(test_parse_single_quoted_key)
{
	char err[128];

	ck_assert_ptr_null(parse("{'a': 1}", err, sizeof(err)));
	ck_assert_ptr_null(parse("[{\"ok\": \"it's\"}, {'b': 2}]", err, sizeof(err)));
	/* a quote inside a string is fine */
	json_object *o = parse("{\"a\": \"it's\"}", err, sizeof(err));
	ck_assert_msg(o != NULL, "err: %s", err);
	json_object_put(o);
}
END_TEST

/* What json-c 0.16 lets through even strictly, refused by the host (400):
 * raw control characters in strings and unpaired surrogate escapes (json-c
 * would store U+FFFD in their place).  Escaped ones and real pairs pass. */
START_TEST(test_parse_strings_strict)
{
	static const char *bad[] = {
		"{\"a\":\"x\001y\"}", "{\"a\":\"tab\there\"}", "{\"a\":\"nl\n\"}", "[\"\x1f\"]",
		"{\"a\":\"\\ud800\"}", "{\"a\":\"\\udc00\"}", "{\"a\":\"\\ud800\\u0041\"}",
		"{\"a\":\"\\ud800x\"}", "{\"a\":\"\\uDBFF\"}", "{\"a\":\"\\ud800\\ud800\"}",
		"{\"\\udfff\":1}", "{\"a\":\"\\u12\"}", "{\"a\":\"\\u12\"}\n",
	};
	static const char *good[] = {
		"{\"a\":\"\\u0001\\t\\n\"}", "{\"a\":\"\\ud83d\\ude00\"}", "{\"a\":\"\\uD83D\\uDE00 ok\"}",
		"{\"a\":\"\\u00e9\\\\u\"}", "{\"a\":\"\\\\ud800\"}", "{\n\t\"a\" : \"b\"\r\n}",
	};
	char err[128];
	json_object *o;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o = parse(bad[i], err, sizeof(err));
		ck_assert_msg(o == NULL, "accepted: %s", bad[i]);
		ck_assert_msg(err[0] != 0, "no error text for: %s", bad[i]);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		o = parse(good[i], err, sizeof(err));
		ck_assert_msg(o != NULL, "refused: %s (%s)", good[i], err);
		json_object_put(o);
	}
	o = parse("{\"a\":\"\\ud83d\\ude00\"}", err, sizeof(err));
	ck_assert_str_eq(json_object_get_string(json_object_object_get(o, "a")), "\xf0\x9f\x98\x80");
	json_object_put(o);
}
END_TEST

START_TEST(test_parse_truncated)
{
	static const char *bad[] = { "{\"a\":", "{\"a\":1", "[1, 2", "{", "\"ab", "" , "   " };
	char err[128];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(parse(bad[i], err, sizeof(err)) == NULL, "accepted: '%s'", bad[i]);
}
END_TEST

START_TEST(test_parse_len_bounded)
{
	const char *buf = "{\"a\":1}GARBAGE";
	char err[128];
	char *heap;
	json_object *o, *v;

	/* only the first 7 bytes count */
	o = pin_json_parse(buf, 7, err, sizeof(err));
	ck_assert_msg(o != NULL, "err: %s", err);
	ck_assert(json_object_object_get_ex(o, "a", &v));
	json_object_put(o);
	/* a prefix of a valid document is not valid */
	ck_assert_ptr_null(pin_json_parse(buf, 5, err, sizeof(err)));
	ck_assert_ptr_null(pin_json_parse(buf, 0, err, sizeof(err)));

	/* no NUL terminator after len: must not read past it (ASan catches) */
	heap = malloc(7);
	memcpy(heap, "{\"b\":2}", 7);
	o = pin_json_parse(heap, 7, err, sizeof(err));
	ck_assert_msg(o != NULL, "err: %s", err);
	json_object_put(o);
	free(heap);

	/* an embedded NUL inside len is invalid, not an early end */
	ck_assert_ptr_null(pin_json_parse("{\"a\":1}\0{}", 10, err, sizeof(err)));
}
END_TEST

/* found by tests/fuzz (fuzz_json): a bare number at the end of the input
 * was "truncated", NaN and Infinity were taken as numbers */
START_TEST(test_parse_numbers_at_end)
{
	static const char *bad[] = { "NaN", "[Infinity]", "{\"a\": -Infinity}", "1e999",
		"[1, NaN]" };
	char err[128];
	json_object *o;
	size_t i;

	o = parse("1", err, sizeof(err));
	ck_assert_msg(o != NULL && json_object_get_int(o) == 1, "err: %s", err);
	json_object_put(o);
	o = parse("-2.5e3", err, sizeof(err));
	ck_assert_msg(o != NULL, "err: %s", err);
	json_object_put(o);
	ck_assert_ptr_null(parse("1 2", err, sizeof(err)));
	ck_assert_ptr_null(parse("[1", err, sizeof(err)));
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		o = parse(bad[i], err, sizeof(err));
		ck_assert_msg(o == NULL, "accepted: %s", bad[i]);
		ck_assert_msg(err[0] != 0, "no error text for: %s", bad[i]);
	}
}
END_TEST

static char *nested(int depth)
{
	char *s = malloc((size_t)depth * 2 + 1);
	int i;

	for (i = 0; i < depth; i++) {
		s[i] = '[';
		s[depth + i] = ']';
	}
	s[2 * depth] = 0;
	return s;
}

START_TEST(test_parse_depth)
{
	char err[128];
	char *s = nested(12);
	json_object *o = parse(s, err, sizeof(err));

	ck_assert_msg(o != NULL, "depth 12 refused: %s", err);
	json_object_put(o);
	free(s);
	s = nested(100000);
	ck_assert_ptr_null(parse(s, err, sizeof(err)));
	free(s);
	s = nested(1000);
	ck_assert_ptr_null(parse(s, err, sizeof(err)));
	free(s);
}
END_TEST

static void expect_decode(const char *in, const char *want)
{
	char *out = pin_url_decode(in, strlen(in));

	if (!want) {
		ck_assert_msg(out == NULL, "'%s' decoded to '%s', expected refusal", in,
				out ? out : "");
		return;
	}
	ck_assert_msg(out != NULL, "'%s' refused", in);
	ck_assert_str_eq(out, want);
	free(out);
}

START_TEST(test_url_decode)
{
	expect_decode("", "");
	expect_decode("plain", "plain");
	expect_decode("a%20b", "a b");
	expect_decode("%41%62%2f%2F", "Ab//");
	expect_decode("2026-12-01T09%3A00%3A00%2B03%3A00", "2026-12-01T09:00:00+03:00");
	expect_decode("%C3%A9", "\xc3\xa9");
	/* '+' is a space in query strings (application/x-www-form-urlencoded) */
	expect_decode("a+b", "a b");
	expect_decode("a%2Bb", "a+b");
}
END_TEST

START_TEST(test_url_decode_bad)
{
	expect_decode("%zz", NULL);
	expect_decode("a%g1", NULL);
	expect_decode("%4", NULL);
	expect_decode("abc%", NULL);
	expect_decode("%00", NULL);   /* would truncate the C string */
}
END_TEST

START_TEST(test_url_decode_len)
{
	char *out = pin_url_decode("abc%20def", 3);

	ck_assert_ptr_nonnull(out);
	ck_assert_str_eq(out, "abc");
	free(out);
	/* an escape cut by len is truncated, not read past len */
	ck_assert_ptr_null(pin_url_decode("ab%20", 4));
}
END_TEST

/* pg_barr (host/core/pgarr.c): array_send's layout; uuids as uuid_in reads them
 * (dashes optional, one per place, no braces); NULL sets has-nulls; jsonb
 * elements carry version 1 */
START_TEST(test_pgarr_binary_array)
{
	static const unsigned char head[20] = { 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0x0b, 0x86,
		0, 0, 0, 3, 0, 0, 0, 1 };
	static const unsigned char u1[16] = { 0x01, 0x93, 0xa8, 0xe2, 0x7c, 0x1e, 0x7b, 0x3a,
		0x9f, 0x00, 0x1c, 0x2d, 0x3e, 0x4f, 0x5a, 0x6b };
	struct pg_barr b, j;

	memset(&b, 0, sizeof(b));
	pg_barr_begin(&b, 3, PG_OID_UUID);
	ck_assert_int_eq(pg_barr_elem(&b, "0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6b", PG_OID_UUID), 0);
	ck_assert_int_eq(pg_barr_elem(&b, "0193A8E27C1E7B3A9F001C2D3E4F5A6B", PG_OID_UUID), 0);
	ck_assert_int_eq(pg_barr_elem(&b, NULL, PG_OID_UUID), 0);
	ck_assert(!b.failed);
	ck_assert_uint_eq(b.len, 20 + 2 * 20 + 4);
	ck_assert_int_eq(memcmp(b.p, head, 20), 0);          /* has-nulls = 1 */
	ck_assert_int_eq(memcmp(b.p + 20, "\0\0\0\x10", 4), 0);
	ck_assert_int_eq(memcmp(b.p + 24, u1, 16), 0);
	ck_assert_int_eq(memcmp(b.p + 44, u1, 16), 0);
	ck_assert_int_eq(memcmp(b.p + 60, "\xff\xff\xff\xff", 4), 0);
	ck_assert_int_eq(pg_barr_elem(&b, "0193a8e2--7c1e-7b3a-9f00-1c2d3e4f5a6b", PG_OID_UUID), -1);
	ck_assert_int_eq(pg_barr_elem(&b, "{0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6b}", PG_OID_UUID), -1);
	ck_assert_int_eq(pg_barr_elem(&b, "0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6", PG_OID_UUID), -1);
	ck_assert_int_eq(pg_barr_elem(&b, "0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6bb", PG_OID_UUID), -1);
	free(b.p);
	memset(&j, 0, sizeof(j));
	pg_barr_begin(&j, 1, PG_OID_JSONB);
	ck_assert_int_eq(pg_barr_elem(&j, "{\"a\":1}", PG_OID_JSONB), 0);
	ck_assert_uint_eq(j.len, 20 + 4 + 8);
	ck_assert_int_eq(memcmp(j.p + 20, "\0\0\0\x08\x01{\"a\":1}", 12), 0);
	ck_assert_int_eq(j.p[7], 0);                           /* no NULLs */
	free(j.p);
}
END_TEST

Suite *make_json_suite(void)
{
	Suite *s = suite_create("json");
	TCase *tc = tcase_create("parse");
	TCase *tu = tcase_create("url_decode");

	tcase_add_test(tc, test_parse_valid);
	tcase_add_test(tc, test_pgarr_binary_array);
	tcase_add_test(tc, test_parse_invalid);
	tcase_add_test(tc, test_parse_single_quoted_key);
	tcase_add_test(tc, test_parse_strings_strict);
	tcase_add_test(tc, test_parse_truncated);
	tcase_add_test(tc, test_parse_len_bounded);
	tcase_add_test(tc, test_parse_depth);
	tcase_add_test(tc, test_parse_numbers_at_end);
	suite_add_tcase(s, tc);
	tcase_add_test(tu, test_url_decode);
	tcase_add_test(tu, test_url_decode_bad);
	tcase_add_test(tu, test_url_decode_len);
	suite_add_tcase(s, tu);
	return s;
}
