/* test_text.c -- utf8.c (strict UTF-8 and U+0000 checks), envelope.c (the
 * consumer's decode + validate step) and pin_db_classify (db.c: which
 * SQLSTATE is retriable).  doc/api.md "Errors", doc/events.md "How the calendar consumes". */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "consumer.h"
#include "suites.h"
#include "textref.h"

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

/* The consumer thread's tokener is reused (envelope.c): what one value
 * leaves behind -- a parse stopped after a high surrogate, cut short or
 * malformed -- must not change the next value's text. */
START_TEST(envelope_after_a_bad_value)
{
	static const char *const bad[] = { "{\"a\":\"\\ud83d", "{\"a\":\"\\ud83d\\u12\"}",
		"{\"a\":\"\\ud83d\"", "{\"a\":[" };
	const char *good = "{" MID ",\"contractVersion\":1,\"payload\":{\"n\":\"Jos\\u00e9\","
		"\"m\":\"\\ud83d\\ude00\"}}";
	char code[64], detail[256];

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		struct pin_msg m;
		json_object *env = NULL, *v;

		memset(&m, 0, sizeof m);
		ck_assert_int_eq(pin_envelope_parse(bad[i], strlen(bad[i]), &m, &env, code, 64,
				detail, sizeof detail), -1);
		json_object_put(env);
		memset(&m, 0, sizeof m);
		ck_assert_int_eq(pin_envelope_parse(good, strlen(good), &m, &env, code, 64,
				detail, sizeof detail), 0);
		ck_assert(json_object_object_get_ex(m.payload, "n", &v));
		ck_assert_str_eq(json_object_get_string(v), "Jos\xc3\xa9");
		ck_assert(json_object_object_get_ex(m.payload, "m", &v));
		ck_assert_str_eq(json_object_get_string(v), "\xf0\x9f\x98\x80");
		json_object_put(env);
	}
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
	/* issue 30 */
	ck_assert_int_eq(pin_db_classify("25006"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("57P03"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("XX001"), PIN_DBC_TRANSIENT);
	ck_assert_int_eq(pin_db_classify("54000"), PIN_DBC_DATA);
	ck_assert_int_eq(pin_db_classify("40002"), PIN_DBC_INTEGRITY);
	ck_assert_int_eq(pin_db_classify("44000"), PIN_DBC_INTEGRITY);
	ck_assert_int_eq(pin_db_classify("25P02"), PIN_DBC_PERMANENT);
}
END_TEST

/* issue 30: the table of doc/operating.md "What a consumer does with a
 * database error", row by row: a handler's RETRY after the statement that
 * failed with this SQLSTATE */
static const struct {
	const char *state;
	enum attempt want;
} cons_table[] = {
	/* the database's state or capacity: retried without a deadline */
	{ "08000", A_RETRY_INFRA }, { "08006", A_RETRY_INFRA }, { "08P01", A_RETRY_INFRA },
	{ "53000", A_RETRY_INFRA }, { "53100", A_RETRY_INFRA }, { "53200", A_RETRY_INFRA },
	{ "53300", A_RETRY_INFRA }, { "53400", A_RETRY_INFRA },
	{ "57000", A_RETRY_INFRA }, { "57014", A_RETRY_INFRA }, { "57P01", A_RETRY_INFRA },
	{ "57P02", A_RETRY_INFRA }, { "57P03", A_RETRY_INFRA }, { "57P04", A_RETRY_INFRA },
	{ "58000", A_RETRY_INFRA }, { "58030", A_RETRY_INFRA },
	{ "25006", A_RETRY_INFRA }, { "25P03", A_RETRY_INFRA },
	{ "40000", A_RETRY_INFRA }, { "40001", A_RETRY_INFRA }, { "40003", A_RETRY_INFRA },
	{ "40P01", A_RETRY_INFRA }, { "55006", A_RETRY_INFRA }, { "55P03", A_RETRY_INFRA },
	{ "72000", A_RETRY_INFRA }, { "F0000", A_RETRY_INFRA },
	{ "XX000", A_RETRY_INFRA }, { "XX001", A_RETRY_INFRA }, { "XX002", A_RETRY_INFRA },
	/* not about the message (our SQL, the schema, a grant): retried too */
	{ "42601", A_RETRY_INFRA }, { "42P01", A_RETRY_INFRA }, { "42501", A_RETRY_INFRA },
	{ "42703", A_RETRY_INFRA }, { "0A000", A_RETRY_INFRA }, { "P0001", A_RETRY_INFRA },
	{ "25P02", A_RETRY_INFRA },
	/* the message's data: the DLQ at once */
	{ "22000", A_DLQ }, { "22001", A_DLQ }, { "22003", A_DLQ }, { "22007", A_DLQ },
	{ "22021", A_DLQ }, { "22023", A_DLQ }, { "22P02", A_DLQ },
	{ "23000", A_DLQ }, { "23502", A_DLQ }, { "23503", A_DLQ }, { "23514", A_DLQ },
	{ "40002", A_DLQ }, { "44000", A_DLQ },
	{ "54000", A_DLQ }, { "54001", A_DLQ }, { "54011", A_DLQ }, { "54023", A_DLQ },
	/* a race the handler answers: retried until its deadline */
	{ "23505", A_RETRY }, { "23P01", A_RETRY },
	/* no statement failed: the handler's own RETRY, its deadline */
	{ "", A_RETRY },
};

START_TEST(consumer_sqlstate_table)
{
	for (size_t i = 0; i < sizeof(cons_table) / sizeof(cons_table[0]); i++) {
		enum attempt got = cons_classify_state(PIN_CONSUME_RETRY, true,
				cons_table[i].state);

		ck_assert_msg(got == cons_table[i].want, "RETRY after SQLSTATE '%s': %d, want %d",
				cons_table[i].state, got, cons_table[i].want);
		/* the link down: whatever the handler said, an outage */
		ck_assert_int_eq(cons_classify_state(PIN_CONSUME_RETRY, false,
				cons_table[i].state), A_RETRY_INFRA);
		ck_assert_int_eq(cons_classify_state(PIN_CONSUME_FATAL, false,
				cons_table[i].state), A_RETRY_INFRA);
		/* a handler's FATAL (contract violation) is a dead letter */
		ck_assert_int_eq(cons_classify_state(PIN_CONSUME_FATAL, true,
				cons_table[i].state), A_DLQ);
	}
}
END_TEST

/* a payload printed by its own serializer (sdk/jtext's pc_jt_body) */
static int raw_text(json_object *o, struct printbuf *pb, int level, int flags)
{
	(void)level;
	(void)flags;
	return printbuf_memappend(pb, json_object_get_string(o),
			(int)strlen(json_object_get_string(o)));
}

START_TEST(envelope_text_as_json_c)
{
	const char *mid = "01936f3e-8d2a-7b4c-9e8f-1a2b3c4d5e6f", *ts = "2026-12-03T07:00:00.123Z";
	json_object *p = json_tokener_parse("{\"eventId\":\"e/1\",\"n\":3,\"x\":1.5,"
		"\"t\":\"a\\\"b\\\\c\\n\\u0001\\u00e9/\",\"arr\":[1,null,true,{\"k\":[]}],"
		"\"o\":{},\"neg\":-9007199254740993}");
	json_object *raw = json_object_new_string("{\"reminderId\":\"r\",\"offsetMinutes\":60}");
	json_object *payloads[2] = { p, raw };
	char et[64];

	ck_assert_ptr_nonnull(p);
	json_object_set_serializer(raw, raw_text, NULL, NULL);
	snprintf(et, sizeof et, "pin.calendar.x\t\"q\"/%c", 0x1f);
	for (int k = 0; k < 2; k++)
		for (int trace = 0; trace < 2; trace++)
			for (int nulls = 0; nulls < 2; nulls++) {
				char *got, *want;
				const char *at = nulls ? NULL : "CalendarEvent";
				const char *aid = nulls ? NULL : "b0000000-0000-4000-8010-000000000001";

				pin_trace_set(trace ? "4bf92f3577b34da6a3ce929d0e0e4736" : NULL);
				got = pin_envelope_text(mid, ts, k ? "pin.calendar.reminder-due" : et,
						at, aid, payloads[k]);
				want = ref_envelope(mid, ts, k ? "pin.calendar.reminder-due" : et,
						at, aid, pin_trace_get(), payloads[k]);
				ck_assert_ptr_nonnull(got);
				ck_assert_str_eq(got, want);
				free(got);
				free(want);
			}
	pin_trace_set(NULL);
	json_object_put(p);
	json_object_put(raw);
}
END_TEST

/* the envelope's createdAt has its milliseconds on every instant: also on a
 * whole second (pin_clock_fmt prints "...:00Z" there, and one outbox batch in
 * a thousand got a createdAt without them); the microseconds are truncated */
START_TEST(created_at_always_milliseconds)
{
	static const struct {
		int64_t us;
		const char *want;
	} c[] = {
		{ INT64_C(1796547600000000), "2026-12-06T09:00:00.000Z" },
		{ INT64_C(1796547600000999), "2026-12-06T09:00:00.000Z" },
		{ INT64_C(1796547600001000), "2026-12-06T09:00:00.001Z" },
		{ INT64_C(1796547600123456), "2026-12-06T09:00:00.123Z" },
		{ INT64_C(1796547659999999), "2026-12-06T09:00:59.999Z" },
		{ INT64_C(0), "1970-01-01T00:00:00.000Z" },
		{ INT64_C(-1), "1969-12-31T23:59:59.999Z" },
	};
	char out[40];
	int64_t back;

	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		ck_assert_str_eq(pin_clock_fmt_ms(c[i].us, out, sizeof out), c[i].want);
		ck_assert_int_eq(pin_clock_parse(out, &back), 0);
		ck_assert_int_eq(back, c[i].us - ((c[i].us % 1000) + 1000) % 1000);
	}
}
END_TEST

static int cmp_str(const void *a, const void *b)
{
	return strcmp(a, b);
}

/* RFC 9562 UUIDv7: 48-bit Unix ms of the host clock, version 7, variant 10,
 * lower-case hex; random bits never repeat across the pool's refills */
START_TEST(uuid_v7_shape)
{
	enum { N = 5000 };
	char (*u)[37] = malloc(N * sizeof *u);
	int64_t before = pin_clock_now_us() / 1000, after;

	for (int i = 0; i < N; i++)
		pin_uuid_v7(u[i]);
	after = pin_clock_now_us() / 1000;
	for (int i = 0; i < N; i++) {
		unsigned long long ms = 0;

		ck_assert_msg(pin_uuid_valid(u[i]), "%s", u[i]);
		ck_assert_uint_eq(strspn(u[i], "0123456789abcdef-"), 36);
		ck_assert_int_eq(u[i][14], '7');
		ck_assert_ptr_nonnull(strchr("89ab", u[i][19]));
		for (int k = 0; k < 13; k++)
			if (k != 8)
				ms = ms * 16 + (unsigned long long)(strchr("0123456789abcdef", u[i][k]) -
						"0123456789abcdef");
		ck_assert_int_ge((long long)ms, before);
		ck_assert_int_le((long long)ms, after);
	}
	qsort(u, N, sizeof *u, cmp_str);
	for (int i = 1; i < N; i++)
		ck_assert_str_ne(u[i - 1], u[i]);
	free(u);
}
END_TEST

Suite *make_text_suite(void)
{
	Suite *s = suite_create("text");
	TCase *tc = tcase_create("core");

	tcase_add_test(tc, utf8_edges);
	tcase_add_test(tc, json_nul_and_path);
	tcase_add_test(tc, envelope_codes);
	tcase_add_test(tc, envelope_after_a_bad_value);
	tcase_add_test(tc, sqlstate_classes);
	tcase_add_test(tc, consumer_sqlstate_table);
	tcase_add_test(tc, envelope_text_as_json_c);
	tcase_add_test(tc, created_at_always_milliseconds);
	tcase_add_test(tc, uuid_v7_shape);
	suite_add_tcase(s, tc);
	return s;
}
