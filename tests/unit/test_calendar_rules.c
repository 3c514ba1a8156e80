/* test_calendar_rules.c -- the pure calendar rules of plugins/caldomain/event_rules.c
 * and the pure SDK helpers: INV-CAL-1/2/3, reminder arithmetic (seed 000 rules 1-2), offsets,
 * If-Match, cursors, time formatting.  No database. */
#include "config.h"
#include <string.h>
#include <check.h>
#include "suites.h"
#include "core.h"
#include "api.h"
#include "worker.h"
#include "sdk/sdk.h"
#include "caldomain/event_rules.h"

#define MIN_US (60LL * 1000000)
#define HOUR_US (60 * MIN_US)
#define DAY_US (24 * HOUR_US)
/* 2026-12-01T09:00:00Z */
#define T0 (1796115600LL * 1000000)

START_TEST(reminder_default_offsets_pending)
{
	/* AC "materialisation by default": created 3 days before StartAt */
	int64_t now = T0 - 3 * DAY_US, due;

	ck_assert_int_eq(cd_rule_reminder(T0, 1440, now, &due), CD_REM_PENDING);
	ck_assert(due == T0 - DAY_US);
	ck_assert_int_eq(cd_rule_reminder(T0, 60, now, &due), CD_REM_PENDING);
	ck_assert(due == T0 - HOUR_US);
}
END_TEST

START_TEST(reminder_past_offsets_skipped)
{
	/* AC "past offset": created 30 minutes before StartAt */
	int64_t now = T0 - 30 * MIN_US, due;

	ck_assert_int_eq(cd_rule_reminder(T0, 1440, now, &due), CD_REM_SKIPPED);
	ck_assert_int_eq(cd_rule_reminder(T0, 60, now, &due), CD_REM_SKIPPED);
	ck_assert_int_eq(cd_rule_reminder(T0, 15, now, &due), CD_REM_PENDING);
}
END_TEST

START_TEST(reminder_due_equal_now_is_skipped)
{
	int64_t due;

	/* DueAt <= now -> Skipped (the boundary belongs to Skipped) */
	ck_assert_int_eq(cd_rule_reminder(T0, 60, T0 - HOUR_US, &due), CD_REM_SKIPPED);
	ck_assert_int_eq(cd_rule_reminder(T0, 60, T0 - HOUR_US - 1, &due), CD_REM_PENDING);
}
END_TEST

START_TEST(reminder_status_names)
{
	ck_assert_str_eq(cd_rem_status_name(CD_REM_PENDING), "Pending");
	ck_assert_str_eq(cd_rem_status_name(CD_REM_SENT), "Sent");
	ck_assert_str_eq(cd_rem_status_name(CD_REM_SKIPPED), "Skipped");
}
END_TEST

START_TEST(offsets_rules)
{
	int ok[] = { 1440, 60 }, dup[] = { 60, 60 }, zero[] = { 0 }, big[] = { 40321 },
		max[] = { 1, 40320 }, six[] = { 1, 2, 3, 4, 5, 6 };

	ck_assert_ptr_null(cd_rule_offsets(ok, 2));
	ck_assert_ptr_null(cd_rule_offsets(NULL, 0));
	ck_assert_ptr_null(cd_rule_offsets(max, 2));
	ck_assert_ptr_nonnull(cd_rule_offsets(dup, 2));
	ck_assert_ptr_nonnull(cd_rule_offsets(zero, 1));
	ck_assert_ptr_nonnull(cd_rule_offsets(big, 1));
	ck_assert_ptr_nonnull(cd_rule_offsets(six, 6));
}
END_TEST

START_TEST(kind_matrix_manual)
{
	struct cd_kind_facts f = { "Task", "Manual", 0, 0, 0, 0, 0 };
	const char *field;

	ck_assert_ptr_null(cd_rule_kind_matrix(&f, &field));      /* point task */
	f.kind = "Meeting";
	ck_assert_ptr_nonnull(cd_rule_kind_matrix(&f, &field));   /* needs endAt */
	ck_assert_str_eq(field, "endAt");
	f.has_end = 1;
	ck_assert_ptr_null(cd_rule_kind_matrix(&f, &field));
	f.kind = "Showing";
	ck_assert_ptr_null(cd_rule_kind_matrix(&f, &field));
	f.kind = "BookingDeadline";                               /* CrmBooking only */
	ck_assert_ptr_nonnull(cd_rule_kind_matrix(&f, &field));
	ck_assert_str_eq(field, "kind");
}
END_TEST

START_TEST(kind_matrix_sources)
{
	struct cd_kind_facts bd = { "BookingDeadline", "CrmBooking", 0, 1, 1, 0, 0 };
	struct cd_kind_facts ap = { "Consultation", "Appointment", 1, 0, 0, 1, 1 };
	const char *field;

	ck_assert_ptr_null(cd_rule_kind_matrix(&bd, &field));
	bd.has_end = 1;
	ck_assert_ptr_nonnull(cd_rule_kind_matrix(&bd, &field));
	bd.has_end = 0;
	bd.has_deal = 0;
	ck_assert_ptr_nonnull(cd_rule_kind_matrix(&bd, &field));
	ck_assert_str_eq(field, "dealId");
	bd.kind = "Task";
	bd.has_deal = 1;
	ck_assert_ptr_nonnull(cd_rule_kind_matrix(&bd, &field));

	ck_assert_ptr_null(cd_rule_kind_matrix(&ap, &field));
	ap.kind = "Meeting";
	ck_assert_ptr_nonnull(cd_rule_kind_matrix(&ap, &field));
	ap.kind = "Showing";
	ap.has_client = 0;
	ck_assert_ptr_nonnull(cd_rule_kind_matrix(&ap, &field));
	ck_assert_str_eq(field, "clientUserId");
}
END_TEST

START_TEST(span_rules)
{
	ck_assert_ptr_null(cd_rule_span(T0, 0, 0));
	ck_assert_ptr_null(cd_rule_span(T0, 1, T0 + HOUR_US));
	ck_assert_ptr_null(cd_rule_span(T0, 1, T0 + DAY_US));
	ck_assert_ptr_nonnull(cd_rule_span(T0, 1, T0 + DAY_US + 1));
	ck_assert_ptr_nonnull(cd_rule_span(T0, 1, T0));
	ck_assert_ptr_nonnull(cd_rule_span(T0, 1, T0 - 1));
}
END_TEST

START_TEST(status_machine)
{
	const char *to;

	ck_assert_int_eq(cd_rule_transition("Planned", "start", &to), 0);
	ck_assert_str_eq(to, "InProgress");     /* never Cancelled (Talent's bug) */
	ck_assert_int_eq(cd_rule_transition("InProgress", "start", &to), -1);
	ck_assert_int_eq(cd_rule_transition("Planned", "complete", &to), 0);
	ck_assert_str_eq(to, "Completed");
	ck_assert_int_eq(cd_rule_transition("InProgress", "complete", &to), 0);
	ck_assert_int_eq(cd_rule_transition("InProgress", "cancel", &to), 0);
	ck_assert_str_eq(to, "Cancelled");
	ck_assert_int_eq(cd_rule_transition("Completed", "cancel", &to), -1);
	ck_assert_int_eq(cd_rule_transition("Cancelled", "complete", &to), -1);
	ck_assert_int_eq(cd_rule_transition("Cancelled", "start", &to), -1);
	ck_assert_int_eq(cd_rule_transition("Planned", "bogus", &to), -1);
}
END_TEST

START_TEST(reschedule_keeps_duration)
{
	ck_assert_int_eq(cd_rule_can_reschedule("Planned"), 1);
	ck_assert_int_eq(cd_rule_can_reschedule("InProgress"), 1);
	ck_assert_int_eq(cd_rule_can_reschedule("Completed"), 0);
	ck_assert_int_eq(cd_rule_can_reschedule("Cancelled"), 0);
	ck_assert(cd_rule_reschedule_end(T0, 1, T0 + 90 * MIN_US, T0 + 7 * DAY_US) ==
			T0 + 7 * DAY_US + 90 * MIN_US);
	ck_assert(cd_rule_reschedule_end(T0, 0, 0, T0 + DAY_US) == 0);
}
END_TEST

START_TEST(if_match_parsing)
{
	int v = -1;

	ck_assert_int_eq(pc_parse_if_match("\"3\"", &v), 0);
	ck_assert_int_eq(v, 3);
	ck_assert_int_eq(pc_parse_if_match(" \"12\" ", &v), 0);
	ck_assert_int_eq(v, 12);
	/* RFC 9110 8.8.3: an entity-tag is quoted */
	ck_assert_int_eq(pc_parse_if_match("12", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("\"12", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("12\"", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("W/12", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("\"", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("*", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("\"1\", \"2\"", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("W/\"7\"", &v), 0);
	ck_assert_int_eq(v, 7);
	ck_assert_int_eq(pc_parse_if_match("\"x\"", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("\"\"", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("-1", &v), -1);
	ck_assert_int_eq(pc_parse_if_match("\"99999999999\"", &v), -1);
	ck_assert_int_eq(pc_parse_if_match(NULL, &v), -1);
}
END_TEST

START_TEST(cursor_roundtrip)
{
	char enc[256], id[37];
	int64_t us = 0;
	const char *uuid = "0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6b";

	pc_init(&pin_api);      /* the uuid check is the host's */
	pc_hex_encode("1796115600000000|0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6b", enc);
	ck_assert_int_eq(pc_cursor_parse(enc, &us, id), 0);
	ck_assert(us == T0);
	ck_assert_str_eq(id, uuid);
	ck_assert_int_eq(pc_cursor_parse("zz", &us, id), -1);
	ck_assert_int_eq(pc_cursor_parse("", &us, id), -1);
	pc_hex_encode("12|not-a-uuid", enc);
	ck_assert_int_eq(pc_cursor_parse(enc, &us, id), -1);
	pc_hex_encode("x1|0193a8e2-7c1e-7b3a-9f00-1c2d3e4f5a6b", enc);
	ck_assert_int_eq(pc_cursor_parse(enc, &us, id), -1);
	/* pc_cursor_make writes the digits as %lld would: the encoded text
	 * above, and negative / zero / extreme instants round-trip */
	struct pin_arena *a = pin_arena_new();

	pin_arena_set_current(a);
	ck_assert_str_eq(pc_cursor_make(T0, uuid), "31373936313135363030303030303030"
		"7c30313933613865322d376331652d376233612d396630302d316332643365346635613662");
	{
		static const int64_t v[] = { 0, -1, -2208988800000000, INT64_MAX, INT64_MIN + 1 };

		for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
			ck_assert_int_eq(pc_cursor_parse(pc_cursor_make(v[i], uuid), &us, id), 0);
			ck_assert(us == v[i]);
			ck_assert_str_eq(id, uuid);
		}
	}
	ck_assert_ptr_null(pc_cursor_make(T0, NULL));
	{
		/* an id longer than the stack buffer: allocated, not refused */
		char longid[301];

		memset(longid, 'x', 300);
		longid[300] = '\0';
		ck_assert_uint_eq(strlen(pc_cursor_make(-5, longid)), 2 * (3 + 300));
		ck_assert(strncmp(pc_cursor_make(-5, longid), "2d357c7878", 10) == 0);
	}
	pin_arena_free(a);
}
END_TEST

START_TEST(time_format)
{
	char buf[40];

	ck_assert_str_eq(pc_time_fmt(T0, buf, sizeof(buf)), "2026-12-01T09:00:00Z");
	ck_assert_str_eq(pc_time_fmt(T0 + 123456, buf, sizeof(buf)),
			"2026-12-01T09:00:00.123456Z");
	ck_assert_str_eq(pc_time_fmt(-1, buf, sizeof(buf)), "1969-12-31T23:59:59.999999Z");
}
END_TEST

/* issue 9 item 3: the supported range is exactly the parser's, and every
 * derived instant of an event (end, reminder DueAt) must stay in it */
START_TEST(instant_range)
{
	int64_t us;
	const int offs[] = { 60, 40320 };

	ck_assert_int_eq(pin_clock_parse("1900-01-01T00:00:00Z", &us), 0);
	ck_assert(us == PC_INSTANT_MIN_US);
	ck_assert_int_eq(pin_clock_parse("9999-12-31T23:59:59.999999Z", &us), 0);
	ck_assert(us == PC_INSTANT_END_US - 1);
	ck_assert_int_eq(pin_clock_parse("1899-12-31T23:59:59Z", &us), -1);
	ck_assert_int_eq(pin_clock_parse("9999-12-31T23:59:59-00:01", &us), -1);
	ck_assert(pc_instant_ok(PC_INSTANT_MIN_US));
	ck_assert(!pc_instant_ok(PC_INSTANT_MIN_US - 1));
	ck_assert(pc_instant_ok(PC_INSTANT_END_US - 1));
	ck_assert(!pc_instant_ok(PC_INSTANT_END_US));
	/* the reported bug: 9999-12-31T23:30Z + 1 h */
	ck_assert_int_eq(pin_clock_parse("9999-12-31T23:30:00Z", &us), 0);
	ck_assert_int_eq(cd_rule_event_instants(us, 1, us + 3600LL * 1000000, NULL, 0), -1);
	ck_assert_int_eq(cd_rule_event_instants(us, 1, us + 1800LL * 1000000 - 1, NULL, 0), 0);
	ck_assert_int_eq(cd_rule_event_instants(us, 0, 0, offs, 2), 0);
	/* a reminder before 1900 */
	ck_assert_int_eq(cd_rule_event_instants(PC_INSTANT_MIN_US + 3600LL * 1000000, 0, 0,
			offs, 1), 0);
	ck_assert_int_eq(cd_rule_event_instants(PC_INSTANT_MIN_US + 3600LL * 1000000, 0, 0,
			offs, 2), -1);
}
END_TEST

START_TEST(utf8_length)
{
	ck_assert_uint_eq(pc_utf8_len(""), 0);
	ck_assert_uint_eq(pc_utf8_len("abc"), 3);
	ck_assert_uint_eq(pc_utf8_len("Показ"), 5);
}
END_TEST

Suite *make_calendar_rules_suite(void)
{
	Suite *s = suite_create("calendar_rules");
	TCase *t = tcase_create("rules");

	tcase_add_test(t, reminder_default_offsets_pending);
	tcase_add_test(t, reminder_past_offsets_skipped);
	tcase_add_test(t, reminder_due_equal_now_is_skipped);
	tcase_add_test(t, reminder_status_names);
	tcase_add_test(t, offsets_rules);
	tcase_add_test(t, kind_matrix_manual);
	tcase_add_test(t, kind_matrix_sources);
	tcase_add_test(t, span_rules);
	tcase_add_test(t, status_machine);
	tcase_add_test(t, reschedule_keeps_duration);
	tcase_add_test(t, if_match_parsing);
	tcase_add_test(t, cursor_roundtrip);
	tcase_add_test(t, time_format);
	tcase_add_test(t, utf8_length);
	tcase_add_test(t, instant_range);
	suite_add_tcase(s, t);
	return s;
}
