/* test_crm_rules.c -- the pure decisions of the CRM booking sync
 * (plugins/caldomain/crm_rules.c, seed 004). */
#include "config.h"

#include <string.h>

#include "suites.h"
#include "caldomain/crm_rules.h"

START_TEST(expired_reason)
{
	ck_assert_str_eq(cd_crm_expired_reason("Reserve"), "Резерв истёк");
	ck_assert_str_eq(cd_crm_expired_reason("Booking"), "Бронь истекла");
	/* unknown phase: fail-safe */
	ck_assert_str_eq(cd_crm_expired_reason("Hold"), "Бронирование истекло");
	ck_assert_str_eq(cd_crm_expired_reason("reserve"), "Бронирование истекло");
	ck_assert_str_eq(cd_crm_expired_reason(NULL), "Бронирование истекло");
}
END_TEST

START_TEST(titles_and_offsets)
{
	int o[2] = { 0, 0 };

	ck_assert_str_eq(cd_crm_title_prefix("Reserve"), "Оплата резерва до ");
	ck_assert_str_eq(cd_crm_title_prefix("Booking"),
			"Дедлайн брони: подтвердить/продлить до ");
	ck_assert_uint_eq(cd_crm_phase_offsets("Reserve", o), 1);
	ck_assert_int_eq(o[0], 30);
	ck_assert_uint_eq(cd_crm_phase_offsets("Booking", o), 2);
	ck_assert_int_eq(o[0], 1440);
	ck_assert_int_eq(o[1], 60);
}
END_TEST

START_TEST(upsert_action)
{
	/* no link: create (booking-created and booking-confirmed) */
	ck_assert_int_eq(cd_crm_upsert_action(NULL, 0, 100, 0), CD_CRM_CREATE);
	ck_assert_int_eq(cd_crm_upsert_action(NULL, 0, 100, 1), CD_CRM_CREATE);
	/* booking-created never moves an existing link */
	ck_assert_int_eq(cd_crm_upsert_action("Open", 50, 100, 0), CD_CRM_NOOP);
	/* booking-confirmed: another moment moves, the same one does not */
	ck_assert_int_eq(cd_crm_upsert_action("Open", 50, 100, 1), CD_CRM_MOVE);
	ck_assert_int_eq(cd_crm_upsert_action("Open", 100, 100, 1), CD_CRM_NOOP);
	/* terminal links (incl. tombstones) are never reopened */
	ck_assert_int_eq(cd_crm_upsert_action("Completed", 50, 100, 1), CD_CRM_NOOP);
	ck_assert_int_eq(cd_crm_upsert_action("Cancelled", 0, 100, 1), CD_CRM_NOOP);
}
END_TEST

Suite *make_crm_rules_suite(void)
{
	Suite *s = suite_create("crm_rules");
	TCase *tc = tcase_create("rules");

	tcase_add_test(tc, expired_reason);
	tcase_add_test(tc, titles_and_offsets);
	tcase_add_test(tc, upsert_action);
	suite_add_tcase(s, tc);
	return s;
}
