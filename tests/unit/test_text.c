/* test_text.c -- utf8.c (strict UTF-8 and U+0000 checks), envelope.c (the
 * consumer's decode + validate step) and pin_db_classify (db.c: which
 * SQLSTATE is retriable).  README "Error classes". */
#include <string.h>

#include <check.h>

#include "host.h"
#include "suites.h"

#define V(s) pin_utf8_valid((s), sizeof(s) - 1)

START_TEST(utf8_edges)
{
	ck_assert(V(""));
	ck_assert(V("plain ascii"));
	ck_assert(V("\xc2\x80\xdf\xbf"));               /* U+0080, U+07FF */
	ck_assert(V("\xe0\xa0\x80\xed\x9f\xbf"));       /* U+0800, U+D7FF */
	ck_assert(V("\xee\x80\x80\xef\xbf\xbf"));       /* U+E000, U+FFFF */
	ck_assert(V("\xf0\x90\x80\x80\xf4\x8f\xbf\xbf"));       /* U+10000, U+10FFFF */
	ck_assert(!V("\xf4\x90\x80\x80"));      /* U+110000 */
	ck_assert(!V("\xed\xa0\x80"));          /* U+D800 */
	ck_assert(!V("\xed\xbf\xbf"));          /* U+DFFF */
	ck_assert(!V("\xc0\xaf"));              /* overlong '/' */
	ck_assert(!V("\xc1\xbf"));
	ck_assert(!V("\xe0\x9f\xbf"));          /* overlong U+07FF */
	ck_assert(!V("\xf0\x8f\xbf\xbf"));      /* overlong U+FFFF */
	ck_assert(!V("\xf5\x80\x80\x80"));
	ck_assert(!V("\xf8\x88\x80\x80\x80"));  /* 5-byte form */
	ck_assert(!V("\xff"));
	ck_assert(!V("\x80"));                  /* lone continuation */
	ck_assert(!V("\xe2\x82"));              /* truncated */
	ck_assert(!V("a\xc3"));
	ck_assert(!V("\xc3\x28"));              /* bad continuation */
	ck_assert(!V("a\0b"));                  /* NUL: PostgreSQL refuses it */
}
END_TEST

START_TEST(json_nul_and_path)
{
	char where[64];
	json_object *o = json_tokener_parse("{\"a\":{\"b\":[\"x\",\"a\\u0000b\"]}}");

	ck_assert_ptr_nonnull(o);
	ck_assert_int_eq(pin_utf8_check_json(o, where, sizeof where), PIN_UTF8_NUL);
	ck_assert_str_eq(where, "a.b[1]");
	json_object_put(o);
	o = json_tokener_parse("{\"a\":\"\xf4\x90\x80\x80\"}");
	ck_assert_ptr_nonnull(o);   /* json-c takes it */
	ck_assert_int_eq(pin_utf8_check_json(o, where, sizeof where), PIN_UTF8_INVALID);
	ck_assert_str_eq(where, "a");
	json_object_put(o);
	o = json_tokener_parse("{\"a\":[1,\"ok \\u00e9\",{\"c\":null}]}");
	ck_assert_int_eq(pin_utf8_check_json(o, where, sizeof where), 0);
	json_object_put(o);
}
END_TEST

static int parse(const char *v, char *code)
{
	struct pin_msg m;
	json_object *env = NULL;
	char detail[256];
	int rc;

	memset(&m, 0, sizeof m);
	code[0] = '\0';
	rc = pin_envelope_parse(v, strlen(v), &m, &env, code, 64, detail, sizeof detail);
	if (rc == 0) {
		ck_assert_ptr_nonnull(m.payload);
		ck_assert_int_eq(m.contract_version, 1);
	}
	json_object_put(env);
	return rc;
}

#define MID "\"messageId\":\"0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b\""

START_TEST(envelope_codes)
{
	char code[64];

	ck_assert_int_eq(parse("{" MID ",\"contractVersion\":1,\"payload\":{\"n\":\"x\"}}",
		code), 0);
	ck_assert_int_eq(parse("{" MID ",\"payload\":{\"n\":\"\xf4\x90\x80\x80\"}}", code), -1);
	ck_assert_str_eq(code, "INVALID_ENVELOPE");
	ck_assert_int_eq(parse("{" MID ",\"payload\":{\"n\":\"a\\u0000\"}}", code), -1);
	ck_assert_str_eq(code, "INVALID_PAYLOAD");
	ck_assert_int_eq(parse("{\"payload\":{}}", code), -1);
	ck_assert_str_eq(code, "INVALID_ENVELOPE");
	ck_assert_int_eq(parse("{" MID ",\"payload\":[]}", code), -1);
	ck_assert_str_eq(code, "INVALID_ENVELOPE");
	ck_assert_int_eq(parse("[1]", code), -1);
	ck_assert_str_eq(code, "INVALID_ENVELOPE");
}
END_TEST

START_TEST(sqlstate_classes)
{
	ck_assert_int_eq(pin_db_classify(""), PIN_DBC_NONE);
	ck_assert_int_eq(pin_db_classify("08006"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("08001"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("40001"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("40P01"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("55P03"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("57014"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("57P01"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("53300"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("22021"), PIN_DBC_DATA);
	ck_assert_int_eq(pin_db_classify("22P02"), PIN_DBC_DATA);
	ck_assert_int_eq(pin_db_classify("23503"), PIN_DBC_INTEGRITY);
	ck_assert_int_eq(pin_db_classify("23502"), PIN_DBC_INTEGRITY);
	ck_assert_int_eq(pin_db_classify("23505"), PIN_DBC_EXPECTED);
	ck_assert_int_eq(pin_db_classify("23P01"), PIN_DBC_EXPECTED);
	ck_assert_int_eq(pin_db_classify("42P01"), PIN_DBC_PERMANENT);
}
END_TEST

Suite *make_text_suite(void)
{
	Suite *s = suite_create("text");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, utf8_edges);
	tcase_add_test(tc, json_nul_and_path);
	tcase_add_test(tc, envelope_codes);
	tcase_add_test(tc, sqlstate_classes);
	suite_add_tcase(s, tc);
	return s;
}
