/* body.c -- the JSON request body: strict field checks and typed getters
 * that collect validation errors. */
#include "config.h"
#include <pthread.h>
#include <string.h>
#include "sdk/body.h"



/* one empty object per process, never modified (a global, not __thread:
 * a per-thread copy is lost at thread exit and LeakSanitizer reports it) */
static json_object *pc_empty_body;
static pthread_once_t pc_empty_once = PTHREAD_ONCE_INIT;

static void pc_empty_init(void)
{
	pc_empty_body = json_object_new_object();
}

json_object *pc_body(struct pin_req *r, struct pc_errs *e)
{
	json_object *b = pc_api->req_body(r);

	if (!b) {
		pthread_once(&pc_empty_once, pc_empty_init);
		return pc_empty_body;
	}
	if (!json_object_is_type(b, json_type_object)) {
		pc_errs_add(e, "body", "must be a JSON object");
		return NULL;
	}
	return b;
}

int pc_body_none(struct pin_req *r)
{
	static const char *const none[] = { NULL };
	struct pc_errs e;
	json_object *b;

	pc_errs_init(&e);
	if ((b = pc_body(r, &e)))
		pc_check_fields(b, none, &e);
	if (e.n == 0)
		return 0;
	pc_errs_respond(r, 422, "VALIDATION_FAILED", "the request has invalid fields", &e);
	return PC_E_RESPONDED;
}

int pc_check_fields(json_object *obj, const char *const *allowed, struct pc_errs *e)
{
	int unknown = 0;

	json_object_object_foreach(obj, key, val) {
		const char *const *a;
		int ok = 0;

		(void)val;
		for (a = allowed; *a; a++)
			if (strcmp(*a, key) == 0) {
				ok = 1;
				break;
			}
		if (!ok) {
			pc_errs_add(e, key, "unknown field");
			unknown++;
		}
	}
	return unknown;
}

static enum pc_field presence(json_object *obj, const char *field, int required,
		json_object **val, struct pc_errs *e)
{
	if (!json_object_object_get_ex(obj, field, val)) {
		if (required) {
			pc_errs_add(e, field, "is required");
			return PC_INVALID;
		}
		return PC_ABSENT;
	}
	if (*val == NULL) {
		if (required) {
			pc_errs_add(e, field, "is required");
			return PC_INVALID;
		}
		return PC_NULL;
	}
	return PC_SET;
}

enum pc_field pc_get_string(json_object *obj, const char *field, int required,
		size_t minlen, size_t maxlen, const char **out, struct pc_errs *e)
{
	json_object *v;
	enum pc_field st = presence(obj, field, required, &v, e);
	size_t n;

	if (st != PC_SET)
		return st;
	if (!json_object_is_type(v, json_type_string)) {
		pc_errs_add(e, field, "must be a string");
		return PC_INVALID;
	}
	n = pc_utf8_len(json_object_get_string(v));
	if (n < minlen || n > maxlen) {
		pc_errs_add(e, field, pc_api->sprintf("length must be between %zu and %zu",
				minlen, maxlen));
		return PC_INVALID;
	}
	*out = json_object_get_string(v);
	return PC_SET;
}

enum pc_field pc_get_uuid(json_object *obj, const char *field, int required,
		const char **out, struct pc_errs *e)
{
	json_object *v;
	enum pc_field st = presence(obj, field, required, &v, e);

	if (st != PC_SET)
		return st;
	if (!json_object_is_type(v, json_type_string) ||
			!pc_api->is_uuid(json_object_get_string(v))) {
		pc_errs_add(e, field, "must be a uuid");
		return PC_INVALID;
	}
	*out = json_object_get_string(v);
	return PC_SET;
}

enum pc_field pc_get_instant(json_object *obj, const char *field, int required,
		int64_t *out_us, struct pc_errs *e)
{
	json_object *v;
	enum pc_field st = presence(obj, field, required, &v, e);

	if (st != PC_SET)
		return st;
	if (!json_object_is_type(v, json_type_string) ||
			pc_api->parse_time(json_object_get_string(v), out_us) != 0) {
		pc_errs_add(e, field, "must be an ISO-8601 instant with offset");
		return PC_INVALID;
	}
	return PC_SET;
}

enum pc_field pc_get_int(json_object *obj, const char *field, int required,
		long long min, long long max, long long *out, struct pc_errs *e)
{
	json_object *v;
	enum pc_field st = presence(obj, field, required, &v, e);
	long long n;

	if (st != PC_SET)
		return st;
	if (!json_object_is_type(v, json_type_int)) {
		pc_errs_add(e, field, "must be an integer");
		return PC_INVALID;
	}
	n = (long long)json_object_get_int64(v);
	if (n < min || n > max) {
		pc_errs_add(e, field, pc_api->sprintf("must be between %lld and %lld", min, max));
		return PC_INVALID;
	}
	*out = n;
	return PC_SET;
}

enum pc_field pc_get_bool(json_object *obj, const char *field, int required,
		int *out, struct pc_errs *e)
{
	json_object *v;
	enum pc_field st = presence(obj, field, required, &v, e);

	if (st != PC_SET)
		return st;
	if (!json_object_is_type(v, json_type_boolean)) {
		pc_errs_add(e, field, "must be true or false");
		return PC_INVALID;
	}
	*out = json_object_get_boolean(v) ? 1 : 0;
	return PC_SET;
}
const char *pc_enum_list(const char *const *values)
{
	size_t len = 1;
	const char *const *p;
	char *s;

	for (p = values; *p; p++)
		len += strlen(*p) + 2;
	s = pc_api->alloc(len);
	for (p = values; *p; p++) {
		if (p != values)
			strcat(s, ", ");
		strcat(s, *p);
	}
	return s;
}

enum pc_field pc_get_enum(json_object *obj, const char *field, int required,
		const char *const *values, const char **out, struct pc_errs *e)
{
	json_object *v;
	enum pc_field st = presence(obj, field, required, &v, e);
	const char *const *p;

	if (st != PC_SET)
		return st;
	if (json_object_is_type(v, json_type_string))
		for (p = values; *p; p++)
			if (strcmp(*p, json_object_get_string(v)) == 0) {
				*out = *p;
				return PC_SET;
			}
	pc_errs_add(e, field, pc_api->sprintf("must be one of: %s", pc_enum_list(values)));
	return PC_INVALID;
}

enum pc_field pc_get_int_array(json_object *obj, const char *field, int required,
		size_t max_n, long long min, long long max, int distinct,
		int *out, size_t *n_out, struct pc_errs *e)
{
	json_object *v;
	enum pc_field st = presence(obj, field, required, &v, e);
	size_t i, j, n;

	if (st != PC_SET)
		return st;
	if (!json_object_is_type(v, json_type_array)) {
		pc_errs_add(e, field, "must be an array of integers");
		return PC_INVALID;
	}
	n = json_object_array_length(v);
	if (n > max_n) {
		pc_errs_add(e, field, pc_api->sprintf("at most %zu values", max_n));
		return PC_INVALID;
	}
	for (i = 0; i < n; i++) {
		json_object *it = json_object_array_get_idx(v, i);
		long long x;

		if (!it || !json_object_is_type(it, json_type_int)) {
			pc_errs_add(e, field, "must be an array of integers");
			return PC_INVALID;
		}
		x = (long long)json_object_get_int64(it);
		if (x < min || x > max) {
			pc_errs_add(e, field, pc_api->sprintf(
					"each value must be between %lld and %lld", min, max));
			return PC_INVALID;
		}
		out[i] = (int)x;
		if (distinct)
			for (j = 0; j < i; j++)
				if (out[j] == out[i]) {
					pc_errs_add(e, field, "values must be distinct");
					return PC_INVALID;
				}
	}
	*n_out = n;
	return PC_SET;
}

size_t pc_utf8_len(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		if (((unsigned char)*s & 0xc0) != 0x80)
			n++;
	return n;
}

/* ------------------------------------------------------ plain member getters */

const char *pc_jstr(json_object *o, const char *key)
{
	json_object *v;

	if (!json_object_object_get_ex(o, key, &v) || !v ||
	    !json_object_is_type(v, json_type_string))
		return NULL;
	return json_object_get_string(v);
}

const char *pc_jstr_opt(json_object *o, const char *key, int *bad)
{
	json_object *v;
	const char *s = pc_jstr(o, key);

	if (!s && json_object_object_get_ex(o, key, &v) && v)
		*bad = 1;
	return s;
}

int pc_opt_uuid(json_object *o, const char *key, const char **out)
{
	json_object *v;

	*out = NULL;
	if (!json_object_object_get_ex(o, key, &v) || !v)
		return 0;
	*out = pc_jstr(o, key);
	return pc_id_ok(*out) ? 0 : PIN_ERR;
}

int pc_id_ok(const char *s)
{
	return s && pc_api->is_uuid(s) &&
		strcmp(s, "00000000-0000-0000-0000-000000000000") != 0;
}
