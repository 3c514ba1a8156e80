/*
 * check-integration -- runner of the integration suites (libnl's
 * tests/check-all.c style: one make_*_suite() per file).
 *
 * Needs the stack ./dev test starts (see harness.h for the environment).
 * Check's own variables apply: CK_RUN_SUITE / CK_RUN_CASE to run one suite or
 * case, CK_FORK=no to debug in one process, CK_VERBOSITY, CK_DEFAULT_TIMEOUT.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <curl/curl.h>

#include "harness.h"

int main(void)
{
	SRunner *sr;
	int failed;

	if (!getenv("PIN_BASE_URL")) {
		fprintf(stderr, "check-integration: PIN_BASE_URL is not set; "
				"run it through ./dev test\n");
		return 77;      /* automake's "skipped" */
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		fprintf(stderr, "check-integration: curl_global_init failed\n");
		return 1;
	}

	sr = srunner_create(make_http_suite());
	srunner_add_suite(sr, make_kafka_suite());
	srunner_add_suite(sr, make_calendar_suite());
	srunner_add_suite(sr, make_slots_suite());
	srunner_add_suite(sr, make_appointments_suite());
	srunner_add_suite(sr, make_notify_suite());
	srunner_add_suite(sr, make_crm_suite());
	srunner_add_suite(sr, make_team_suite());
	srunner_add_suite(sr, make_stream_suite());
	srunner_add_suite(sr, make_delivery_suite());
	srunner_add_suite(sr, make_input_suite());
	srunner_add_suite(sr, make_obs_suite());
	srunner_add_suite(sr, make_fcgi_suite());
	srunner_add_suite(sr, make_migrate_suite());
	srunner_add_suite(sr, make_replica_suite());  /* stops the standby */
	srunner_add_suite(sr, make_ops_suite());    /* database outage */
	srunner_add_suite(sr, make_scale_suite());  /* several worker hosts */
	srunner_add_suite(sr, make_faults_suite()); /* last: fault drills */

	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	curl_global_cleanup();
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
