/* test_slots_rules.c -- the pure SlotBatch rules of plugins/slots/batch_rules.c and
 * the absence rules of plugins/slots/timeoff_rules.c (issue 32). */
#include "config.h"

#include <string.h>

#include "suites.h"
#include "../../plugins/slots/slots.h"

START_TEST(hhmm)
{
	int m;

	ck_assert_int_eq(slot_parse_hhmm("09:30", 0, &m), 0);
	ck_assert_int_eq(m, 570);
	ck_assert_int_eq(slot_parse_hhmm("00:00", 0, &m), 0);
	ck_assert_int_eq(m, 0);
	ck_assert_int_eq(slot_parse_hhmm("23:59", 0, &m), 0);
	ck_assert_int_eq(m, 1439);
	ck_assert_int_eq(slot_parse_hhmm("24:00", 0, &m), -1);
	ck_assert_int_eq(slot_parse_hhmm("24:00", 1, &m), 0);
	ck_assert_int_eq(m, 1440);
	ck_assert_int_eq(slot_parse_hhmm("24:01", 1, &m), -1);
	ck_assert_int_eq(slot_parse_hhmm("9:30", 0, &m), -1);
	ck_assert_int_eq(slot_parse_hhmm("09:60", 0, &m), -1);
	ck_assert_int_eq(slot_parse_hhmm("09-30", 0, &m), -1);
	ck_assert_int_eq(slot_parse_hhmm("09:3a", 0, &m), -1);
	ck_assert_int_eq(slot_parse_hhmm("", 0, &m), -1);
	ck_assert_int_eq(slot_parse_hhmm(NULL, 0, &m), -1);
}
END_TEST

START_TEST(dates)
{
	long d, d2;
	char buf[16];

	ck_assert_int_eq(slot_parse_date("1970-01-01", &d), 0);
	ck_assert_int_eq(d, 0);
	ck_assert_int_eq(slot_parse_date("2026-11-30", &d), 0);
	ck_assert_int_eq(d, 20787);
	ck_assert_str_eq(slot_format_date(d, buf, sizeof(buf)), "2026-11-30");
	ck_assert_int_eq(slot_parse_date("2028-02-29", &d2), 0);     /* leap */
	ck_assert_str_eq(slot_format_date(d2, buf, sizeof(buf)), "2028-02-29");
	ck_assert_int_eq(slot_parse_date("2027-02-29", &d), -1);
	ck_assert_int_eq(slot_parse_date("2100-02-29", &d), -1);     /* not leap */
	ck_assert_int_eq(slot_parse_date("2000-02-29", &d), 0);      /* leap */
	ck_assert_int_eq(slot_parse_date("2027-13-01", &d), -1);
	ck_assert_int_eq(slot_parse_date("2027-04-31", &d), -1);
	ck_assert_int_eq(slot_parse_date("2027-4-01", &d), -1);
	ck_assert_int_eq(slot_parse_date("2027-04-01T", &d), -1);
	ck_assert_int_eq(slot_parse_date("27-04-0101", &d), -1);
}
END_TEST

START_TEST(date_rules)
{
	const char *field;
	long today = 20787;         /* 2026-11-30 */

	ck_assert_ptr_null(slot_rule_dates(today, today, today, &field));
	ck_assert_ptr_null(slot_rule_dates(today, today + 91, today, &field));
	ck_assert_ptr_nonnull(slot_rule_dates(today, today + 92, today, &field));
	ck_assert_str_eq(field, "toDate");
	ck_assert_ptr_null(slot_rule_dates(today + 150, today + 183, today, &field));
	ck_assert_ptr_nonnull(slot_rule_dates(today + 150, today + 184, today, &field));
	ck_assert_str_eq(field, "toDate");
	ck_assert_ptr_nonnull(slot_rule_dates(today + 5, today + 4, today, &field));
	ck_assert_str_eq(field, "toDate");
	ck_assert_ptr_nonnull(slot_rule_dates(today - 1, today + 4, today, &field));
	ck_assert_str_eq(field, "fromDate");
}
END_TEST

START_TEST(windows)
{
	ck_assert_ptr_null(slot_rule_window(540, 720));
	ck_assert_ptr_nonnull(slot_rule_window(720, 720));
	ck_assert_ptr_nonnull(slot_rule_window(720, 540));
	/* 09:00-12:00, 60 min: 3; with a 15 min gap: 09:00, 10:15 -> 2 */
	ck_assert_int_eq(slot_rule_per_window(540, 720, 60, 0), 3);
	ck_assert_int_eq(slot_rule_per_window(540, 720, 60, 15), 2);
	ck_assert_int_eq(slot_rule_per_window(540, 570, 60, 0), 0);
	ck_assert_int_eq(slot_rule_per_window(0, 1440, 15, 0), 96);
}
END_TEST

#define H_US (3600LL * 1000000)
#define D_US (24 * H_US)

START_TEST(time_off_span_rule)
{
	int64_t now = 1800000000LL * 1000000;
	const char *field;

	ck_assert_ptr_null(slot_rule_time_off(now + H_US, now + 2 * H_US, now, 1, &field));
	/* begun already (sick since this morning): fine while it lasts */
	ck_assert_ptr_null(slot_rule_time_off(now - 5 * H_US, now + H_US, now, 1, &field));
	/* from >= to */
	ck_assert_ptr_nonnull(slot_rule_time_off(now + H_US, now + H_US, now, 1, &field));
	ck_assert_str_eq(field, "to");
	ck_assert_ptr_nonnull(slot_rule_time_off(now + 2 * H_US, now + H_US, now, 0, &field));
	ck_assert_str_eq(field, "to");
	/* 366 days at most */
	ck_assert_ptr_null(slot_rule_time_off(now, now + 366 * D_US, now - 1, 1, &field));
	ck_assert_ptr_nonnull(slot_rule_time_off(now, now + 366 * D_US + 1, now - 1, 1,
				&field));
	ck_assert_str_eq(field, "to");
	/* over already: refused when declared, allowed as a change (ended early) */
	ck_assert_ptr_nonnull(slot_rule_time_off(now - 2 * H_US, now, now, 1, &field));
	ck_assert_str_eq(field, "to");
	ck_assert_ptr_null(slot_rule_time_off(now - 2 * H_US, now - H_US, now, 0, &field));
	/* too far ahead */
	ck_assert_ptr_null(slot_rule_time_off(now + 731 * D_US, now + 732 * D_US, now, 1,
				&field));
	ck_assert_ptr_nonnull(slot_rule_time_off(now + 731 * D_US + 1, now + 732 * D_US, now,
				1, &field));
	ck_assert_str_eq(field, "from");
}
END_TEST

/* Only a span that grew has effects again. */
START_TEST(time_off_widens)
{
	ck_assert_int_eq(slot_time_off_widens(10, 20, 10, 20), 0);
	ck_assert_int_eq(slot_time_off_widens(10, 20, 10, 15), 0);  /* ended early */
	ck_assert_int_eq(slot_time_off_widens(10, 20, 12, 20), 0);  /* starts later */
	ck_assert_int_eq(slot_time_off_widens(10, 20, 10, 21), 1);
	ck_assert_int_eq(slot_time_off_widens(10, 20, 9, 20), 1);
	ck_assert_int_eq(slot_time_off_widens(10, 20, 30, 40), 1);  /* moved */
}
END_TEST

Suite *make_slots_rules_suite(void)
{
	Suite *s = suite_create("slots_rules");
	TCase *tc = tcase_create("rules");

	tcase_add_test(tc, hhmm);
	tcase_add_test(tc, dates);
	tcase_add_test(tc, date_rules);
	tcase_add_test(tc, windows);
	tcase_add_test(tc, time_off_span_rule);
	tcase_add_test(tc, time_off_widens);
	suite_add_tcase(s, tc);
	return s;
}
