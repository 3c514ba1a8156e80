/*
 * check-integration -- runner of the integration suites (libnl's
 * tests/check-all.c style: one make_*_suite() per file).
 *
 * Needs the stack ./dev test starts (see harness.h for the environment).
 * Check's own variables apply: CK_RUN_SUITE / CK_RUN_CASE to run one suite or
 * case, CK_FORK=no to debug in one process, CK_VERBOSITY, CK_DEFAULT_TIMEOUT.
 * CK_RUN_SUITE may also be a comma-separated list of suites (run in the
 * order below).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <curl/curl.h>

#include "harness.h"

/* In run order; the names are the suites' suite_create() names. */
static const struct {
	const char *name;
	Suite *(*make)(void);
} suites[] = {
	{ "http", make_http_suite },
	{ "kafka", make_kafka_suite },
	{ "calendar", make_calendar_suite },
	{ "slots", make_slots_suite },
	{ "timeoff", make_timeoff_suite },
	{ "appointments", make_appointments_suite },
	{ "notify", make_notify_suite },
	{ "crm", make_crm_suite },
	{ "team", make_team_suite },
	{ "feed", make_feed_suite },        /* issue 32: the agent's iCalendar feed */
	{ "stream", make_stream_suite },
	{ "delivery", make_delivery_suite },
	{ "imip", make_imip_suite },
	{ "manage", make_manage_suite },
	{ "input", make_input_suite },
	{ "obs", make_obs_suite },
	{ "metrics", make_metrics_suite },  /* issue 30: the seeds' names */
	{ "fcgi", make_fcgi_suite },
	{ "reload", make_reload_suite },
	{ "migrate", make_migrate_suite },
	{ "replica", make_replica_suite },  /* stops the standby */
	{ "ops", make_ops_suite },          /* database outage */
	{ "scale", make_scale_suite },      /* several worker hosts */
	{ "relaycursor", make_relaycursor_suite },  /* replaces the stack's worker */
	{ "faults", make_faults_suite },    /* last: fault drills */
};

/* name is one of the comma-separated list */
static int listed(const char *list, const char *name)
{
	size_t n = strlen(name);

	for (const char *p = list; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, name, n) && (p[n] == ',' || p[n] == '\0'))
			return 1;
	return 0;
}

int main(void)
{
	SRunner *sr;
	int failed;
	/* Check runs one suite of CK_RUN_SUITE; a comma-separated list is
	 * handled here: only the listed suites are added (in run order) */
	char *only = getenv("CK_RUN_SUITE") && strchr(getenv("CK_RUN_SUITE"), ',')
		? strdup(getenv("CK_RUN_SUITE")) : NULL;

	if (!getenv("PIN_BASE_URL")) {
		fprintf(stderr, "check-integration: PIN_BASE_URL is not set; "
				"run it through ./dev test\n");
		return 77;      /* automake's "skipped" */
	}
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0) {
		fprintf(stderr, "check-integration: curl_global_init failed\n");
		return 1;
	}

	if (only)
		unsetenv("CK_RUN_SUITE");
	sr = NULL;
	for (size_t i = 0; i < sizeof suites / sizeof suites[0]; i++) {
		if (only && !listed(only, suites[i].name))
			continue;
		if (!sr)
			sr = srunner_create(suites[i].make());
		else
			srunner_add_suite(sr, suites[i].make());
	}
	if (!sr) {
		fprintf(stderr, "check-integration: CK_RUN_SUITE=%s names no suite\n", only);
		sr = srunner_create(NULL);
	}
	srunner_run_all(sr, CK_ENV);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	free(only);
	curl_global_cleanup();
	return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
