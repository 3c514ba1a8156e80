/* test_problem.c -- pin_problem_body() (RFC 9457, api.md "Errors") and
 * pin_status_title().
 *
 * Expectations: type is "https://pin.example/problems/" + code verbatim,
 * title = pin_status_title(status), status a JSON integer, detail, code,
 * traceId (absent or null when trace_id is NULL), errors only when given
 * (and then a copy: the caller keeps its object). */
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "core.h"
#include "api.h"
#include "worker.h"
#include "suites.h"

static json_object *body_of(int status, const char *code, const char *detail,
		const char *trace, json_object *errors)
{
	char *s = pin_problem_body(status, code, detail, trace, errors);
	json_object *o;

	ck_assert_ptr_nonnull(s);
	o = json_tokener_parse(s);
	ck_assert_msg(o != NULL, "not JSON: %s", s);
	ck_assert(json_object_is_type(o, json_type_object));
	free(s);
	return o;
}

static const char *str(json_object *o, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

START_TEST(test_problem_fields)
{
	json_object *o = body_of(409, "SLOT_ALREADY_BOOKED", "The slot was booked by someone else.",
			"0190a0b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b", NULL);
	json_object *v;

	ck_assert_ptr_nonnull(str(o, "type"));
	ck_assert_str_eq(str(o, "type"), "https://pin.example/problems/SLOT_ALREADY_BOOKED");
	ck_assert_ptr_nonnull(str(o, "title"));
	ck_assert_str_eq(str(o, "title"), pin_status_title(409));
	ck_assert(json_object_object_get_ex(o, "status", &v));
	ck_assert(json_object_is_type(v, json_type_int));
	ck_assert_int_eq(json_object_get_int(v), 409);
	ck_assert_ptr_nonnull(str(o, "detail"));
	ck_assert_str_eq(str(o, "detail"), "The slot was booked by someone else.");
	ck_assert_ptr_nonnull(str(o, "code"));
	ck_assert_str_eq(str(o, "code"), "SLOT_ALREADY_BOOKED");
	ck_assert_ptr_nonnull(str(o, "traceId"));
	ck_assert_str_eq(str(o, "traceId"), "0190a0b0-1c2d-7e3f-8a4b-5c6d7e8f9a0b");
	ck_assert(!json_object_object_get_ex(o, "errors", NULL));
	json_object_put(o);
}
END_TEST

START_TEST(test_problem_errors)
{
	json_object *errs = json_object_new_array(), *e = json_object_new_object();
	json_object *o, *v, *first;

	json_object_object_add(e, "field", json_object_new_string("startAt"));
	json_object_object_add(e, "message", json_object_new_string("must be before endAt"));
	json_object_array_add(errs, e);
	o = body_of(422, "VALIDATION_FAILED", "Some fields are invalid.", "t-1", errs);
	ck_assert(json_object_object_get_ex(o, "errors", &v));
	ck_assert(json_object_is_type(v, json_type_array));
	ck_assert_uint_eq(json_object_array_length(v), 1);
	first = json_object_array_get_idx(v, 0);
	ck_assert_str_eq(str(first, "field"), "startAt");
	ck_assert_str_eq(str(first, "message"), "must be before endAt");
	ck_assert_int_eq(json_object_get_int(json_object_object_get(o, "status")), 422);
	json_object_put(o);
	/* errors is borrowed: still ours, still intact */
	ck_assert_uint_eq(json_object_array_length(errs), 1);
	json_object_put(errs);
}
END_TEST

START_TEST(test_problem_escaping)
{
	const char *detail = "quote \" backslash \\ newline \n tab \t </script> \xc3\xa9";
	json_object *o = body_of(400, "MALFORMED_REQUEST", detail, "t", NULL);

	ck_assert_str_eq(str(o, "detail"), detail);
	ck_assert_str_eq(str(o, "title"), pin_status_title(400));
	json_object_put(o);
}
END_TEST

START_TEST(test_problem_no_trace)
{
	json_object *o = body_of(503, "UNAVAILABLE", "Database unreachable.", NULL, NULL);
	json_object *v;

	if (json_object_object_get_ex(o, "traceId", &v))
		ck_assert(json_object_is_type(v, json_type_null));
	ck_assert_str_eq(str(o, "code"), "UNAVAILABLE");
	ck_assert_str_eq(str(o, "type"), "https://pin.example/problems/UNAVAILABLE");
	json_object_put(o);
}
END_TEST

START_TEST(test_status_title)
{
	const char *t;

	ck_assert_str_eq(pin_status_title(400), "Bad Request");
	ck_assert_str_eq(pin_status_title(401), "Unauthorized");
	ck_assert_str_eq(pin_status_title(403), "Forbidden");
	ck_assert_str_eq(pin_status_title(404), "Not Found");
	ck_assert_str_eq(pin_status_title(405), "Method Not Allowed");
	ck_assert_str_eq(pin_status_title(409), "Conflict");
	ck_assert_str_eq(pin_status_title(429), "Too Many Requests");
	ck_assert_str_eq(pin_status_title(500), "Internal Server Error");
	ck_assert_str_eq(pin_status_title(503), "Service Unavailable");
	/* RFC 9110 renamed these; either name is fine */
	t = pin_status_title(413);
	ck_assert_msg(strcmp(t, "Content Too Large") == 0 || strcmp(t, "Payload Too Large") == 0,
			"413: %s", t);
	t = pin_status_title(422);
	ck_assert_msg(strcmp(t, "Unprocessable Content") == 0 ||
			strcmp(t, "Unprocessable Entity") == 0, "422: %s", t);
	/* unknown codes still get a string */
	ck_assert_ptr_nonnull(pin_status_title(599));
	ck_assert_ptr_nonnull(pin_status_title(0));
}
END_TEST

Suite *make_problem_suite(void)
{
	Suite *s = suite_create("problem");
	TCase *tc = tcase_create("body");

	tcase_add_test(tc, test_problem_fields);
	tcase_add_test(tc, test_problem_errors);
	tcase_add_test(tc, test_problem_escaping);
	tcase_add_test(tc, test_problem_no_trace);
	tcase_add_test(tc, test_status_title);
	suite_add_tcase(s, tc);
	return s;
}
