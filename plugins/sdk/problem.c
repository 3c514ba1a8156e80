/* problem.c -- validation error collectors and problem+json answers. */
#include "config.h"
#include "sdk/problem.h"


void pc_errs_init(struct pc_errs *e)
{
	e->arr = NULL;
	e->n = 0;
}

void pc_errs_add(struct pc_errs *e, const char *field, const char *message)
{
	json_object *o = json_object_new_object();

	if (!e->arr)
		e->arr = json_object_new_array();
	json_object_object_add(o, "field", json_object_new_string(field));
	json_object_object_add(o, "message", json_object_new_string(message));
	json_object_array_add(e->arr, o);
	e->n++;
}

void pc_errs_free(struct pc_errs *e)
{
	if (e->arr)
		json_object_put(e->arr);
	e->arr = NULL;
	e->n = 0;
}

int pc_errs_respond(struct pin_req *r, int status, const char *code,
		const char *detail, struct pc_errs *e)
{
	json_object *arr = e->arr;

	e->arr = NULL;
	e->n = 0;
	pc_api->respond_problem(r, status, code, detail, arr);
	return PIN_OK;
}

int pc_errs_respond_422(struct pin_req *r, const char *detail, struct pc_errs *e,
		int tz_unknown)
{
	if (tz_unknown && e->n == 1)
		return pc_errs_respond(r, 422, "UNKNOWN_TIME_ZONE",
				"timeZone is not a known IANA time zone", e);
	return pc_errs_respond(r, 422, "VALIDATION_FAILED", detail, e);
}

int pc_problem(struct pin_req *r, int status, const char *code, const char *detail)
{
	pc_api->respond_problem(r, status, code, detail, NULL);
	return PIN_OK;
}
