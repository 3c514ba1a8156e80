/* suites.h -- one make_*_suite() per unit test file, run by check-all.c. */
#ifndef PIN_TEST_SUITES_H
#define PIN_TEST_SUITES_H

#include <check.h>

Suite *make_router_suite(void);
Suite *make_json_suite(void);
Suite *make_jwt_suite(void);
Suite *make_jwks_suite(void);
Suite *make_config_suite(void);
Suite *make_loader_suite(void);
Suite *make_problem_suite(void);
Suite *make_calendar_rules_suite(void);
Suite *make_slots_rules_suite(void);
Suite *make_crm_rules_suite(void);
Suite *make_text_suite(void);
Suite *make_jtext_suite(void);
Suite *make_consume_suite(void);
Suite *make_replica_suite(void);
Suite *make_colmap_suite(void);
Suite *make_jobs_suite(void);
Suite *make_log_suite(void);
Suite *make_mime_suite(void);
Suite *make_manage_suite(void);

#endif
