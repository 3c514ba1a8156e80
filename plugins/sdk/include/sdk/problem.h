/* sdk/problem.h -- validation error collectors and problem+json answers. */
#ifndef PIN_SDK_PROBLEM_H
#define PIN_SDK_PROBLEM_H

#include "sdk/core.h"

/*
 * Collector of validation errors: {field, message} objects.  Zero-init or
 * pc_errs_init(); pc_errs_free() when not handed to a response.
 */
struct pc_errs {
	json_object *arr;   /* owned; NULL while empty */
	int n;
};
void pc_errs_init(struct pc_errs *e);
void pc_errs_add(struct pc_errs *e, const char *field, const char *message);
void pc_errs_free(struct pc_errs *e);
/* Answers status/code with the collected errors (ownership moves to the
 * host) and returns PIN_OK. */
int pc_errs_respond(struct pin_req *r, int status, const char *code,
		const char *detail, struct pc_errs *e);

/*
 * A body's 422 (api/openapi.yaml): when its only error is an unknown zone
 * (tz_unknown: pc_errs_add(e, field, PC_TZ_UNKNOWN_MSG) was the one call),
 * UNKNOWN_TIME_ZONE; otherwise VALIDATION_FAILED with detail.  Both carry
 * the errors.  Returns PIN_OK.
 */
#define PC_TZ_UNKNOWN_MSG "unknown IANA time zone"
int pc_errs_respond_422(struct pin_req *r, const char *detail, struct pc_errs *e,
		int tz_unknown);

/* respond_problem without errors; returns PIN_OK. */
int pc_problem(struct pin_req *r, int status, const char *code, const char *detail);

#endif
