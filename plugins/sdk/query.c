/* query.c -- query string and path parameters. */
#include "config.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/query.h"


static enum pc_field qpresence(struct pin_req *r, const char *name, int required,
		const char **v, struct pc_errs *e)
{
	*v = pc_api->req_query(r, name);
	if (!*v || !**v) {
		if (required) {
			pc_errs_add(e, name, "is required");
			return PC_INVALID;
		}
		return PC_ABSENT;
	}
	return PC_SET;
}

enum pc_field pc_q_instant(struct pin_req *r, const char *name, int required,
		int64_t *out_us, struct pc_errs *e)
{
	const char *v;
	enum pc_field st = qpresence(r, name, required, &v, e);

	if (st != PC_SET)
		return st;
	if (pc_api->parse_time(v, out_us) != 0) {
		pc_errs_add(e, name, "must be an ISO-8601 instant with offset");
		return PC_INVALID;
	}
	return PC_SET;
}

enum pc_field pc_q_uuid(struct pin_req *r, const char *name, int required,
		const char **out, struct pc_errs *e)
{
	const char *v;
	enum pc_field st = qpresence(r, name, required, &v, e);

	if (st != PC_SET)
		return st;
	if (!pc_api->is_uuid(v)) {
		pc_errs_add(e, name, "must be a uuid");
		return PC_INVALID;
	}
	*out = v;
	return PC_SET;
}

enum pc_field pc_q_int(struct pin_req *r, const char *name, int required,
		long long min, long long max, long long *out, struct pc_errs *e)
{
	const char *v;
	char *end;
	long long n;
	enum pc_field st = qpresence(r, name, required, &v, e);

	if (st != PC_SET)
		return st;
	errno = 0;
	n = strtoll(v, &end, 10);
	if (errno || *end || n < min || n > max) {
		pc_errs_add(e, name, pc_api->sprintf("must be an integer between %lld and %lld",
				min, max));
		return PC_INVALID;
	}
	*out = n;
	return PC_SET;
}

enum pc_field pc_q_enum(struct pin_req *r, const char *name, int required,
		const char *const *values, const char **out, struct pc_errs *e)
{
	const char *v;
	const char *const *p;
	enum pc_field st = qpresence(r, name, required, &v, e);

	if (st != PC_SET)
		return st;
	for (p = values; *p; p++)
		if (strcmp(*p, v) == 0) {
			*out = *p;
			return PC_SET;
		}
	pc_errs_add(e, name, pc_api->sprintf("must be one of: %s", pc_enum_list(values)));
	return PC_INVALID;
}

enum pc_field pc_q_uuid_list(struct pin_req *r, const char *name, int required,
		size_t max_n, const char **out, struct pc_errs *e)
{
	const char *v;
	char *copy, *tok, *save = NULL, *lit;
	size_t n = 0;
	enum pc_field st = qpresence(r, name, required, &v, e);

	if (st != PC_SET)
		return st;
	copy = pc_api->strdup(v);
	lit = pc_api->alloc(strlen(v) + 3);
	strcpy(lit, "{");
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		while (*tok == ' ')
			tok++;
		if (!pc_api->is_uuid(tok) || ++n > max_n) {
			pc_errs_add(e, name, pc_api->sprintf(
					"must be a comma separated list of at most %zu uuids", max_n));
			return PC_INVALID;
		}
		if (n > 1)
			strcat(lit, ",");
		strcat(lit, tok);
	}
	strcat(lit, "}");
	if (n == 0) {
		pc_errs_add(e, name, "must not be empty");
		return PC_INVALID;
	}
	*out = lit;
	return PC_SET;
}

const char *pc_path_uuid(struct pin_req *r, const char *name)
{
	const char *v = pc_api->req_param(r, name);

	if (!v || !pc_api->is_uuid(v)) {
		pc_problem(r, 400, "MALFORMED_REQUEST",
			pc_api->sprintf("path parameter %s must be a uuid", name));
		return NULL;
	}
	return v;
}
