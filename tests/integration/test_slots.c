/* test_slots.c -- PLACEHOLDER so the integration runner links; the owner of
 * this suite replaces the whole file. */
#include "config.h"

#include "harness.h"

Suite *make_slots_suite(void)
{
	return suite_create("slots");
}
