/* check-all.c -- the unit test runner (libnl tests/check-all.c style).
 * Tests run forked (CK_FORK=no to debug in one process); CK_RUN_SUITE /
 * CK_RUN_CASE select a subset. */
#include <stdlib.h>
#include <check.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "suites.h"

/*
 * pin_stopping and pin_wait_stop() live in host/main.c, which is not part of
 * libpinhost.  Weak stand-ins let the runner link; if the library ever
 * defines them, its definitions win.
 */

int main(void)
{
	SRunner *sr;
	int nfailed;

	/* keep the host's log lines out of the test output unless asked */
	if (!getenv("PIN_TEST_VERBOSE"))
		pin_log_set_level(PIN_LOG_ERROR + 1);

	sr = srunner_create(make_router_suite());
	srunner_add_suite(sr, make_json_suite());
	srunner_add_suite(sr, make_problem_suite());
	srunner_add_suite(sr, make_config_suite());
	srunner_add_suite(sr, make_jwt_suite());
	srunner_add_suite(sr, make_jwks_suite());
	srunner_add_suite(sr, make_loader_suite());
	srunner_add_suite(sr, make_calendar_rules_suite());
	srunner_add_suite(sr, make_slots_rules_suite());
	srunner_add_suite(sr, make_crm_rules_suite());
	srunner_add_suite(sr, make_text_suite());
	srunner_add_suite(sr, make_jtext_suite());
	srunner_add_suite(sr, make_consume_suite());
	srunner_add_suite(sr, make_replica_suite());
	srunner_add_suite(sr, make_colmap_suite());
	srunner_add_suite(sr, make_jobs_suite());
	srunner_add_suite(sr, make_log_suite());
	srunner_add_suite(sr, make_mime_suite());
	srunner_add_suite(sr, make_manage_suite());

	srunner_run_all(sr, CK_ENV);
	nfailed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return nfailed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
