/* test_calendar.c -- PLACEHOLDER so the integration runner links; the owner of
 * this suite replaces the whole file. */
#include "config.h"

#include "harness.h"

Suite *make_calendar_suite(void)
{
	return suite_create("calendar");
}
