/* sdk/body.h -- the JSON request body: strict field checks and typed getters
 * that collect validation errors; plain JSON member getters. */
#ifndef PIN_SDK_BODY_H
#define PIN_SDK_BODY_H

#include "sdk/problem.h"

enum pc_field {
	PC_ABSENT = 0,   /* key not present */
	PC_NULL = 1,     /* present with JSON null */
	PC_SET = 2,      /* present, valid, *out written */
	PC_INVALID = 3   /* present but invalid (error collected) */
};

/*
 * The request body as an object.  No body -> an empty object (so optional
 * bodies of transition endpoints behave like {}).  A non-object body adds a
 * "body" error and returns NULL.  Borrowed (or arena-lifetime).
 */
json_object *pc_body(struct pin_req *r, struct pc_errs *e);

/* A route without a body (NoFields): none, or {} -> 0; anything else (a
 * non-object, a key) -> answered 422 VALIDATION_FAILED, PC_E_RESPONDED. */
int pc_body_none(struct pin_req *r);

/* Strict validation: every key of obj must be in allowed (NULL-terminated);
 * each unknown key adds "unknown field".  Returns the number of unknowns. */
int pc_check_fields(json_object *obj, const char *const *allowed, struct pc_errs *e);

/* Getters.  required: ABSENT or NULL add "is required".  Strings are
 * borrowed from obj.  Lengths are in Unicode code points. */
enum pc_field pc_get_string(json_object *obj, const char *field, int required,
		size_t minlen, size_t maxlen, const char **out, struct pc_errs *e);
enum pc_field pc_get_uuid(json_object *obj, const char *field, int required,
		const char **out, struct pc_errs *e);
enum pc_field pc_get_instant(json_object *obj, const char *field, int required,
		int64_t *out_us, struct pc_errs *e);
enum pc_field pc_get_int(json_object *obj, const char *field, int required,
		long long min, long long max, long long *out, struct pc_errs *e);
enum pc_field pc_get_bool(json_object *obj, const char *field, int required,
		int *out, struct pc_errs *e);
/* values: NULL-terminated list of accepted names (exact match). */
enum pc_field pc_get_enum(json_object *obj, const char *field, int required,
		const char *const *values, const char **out, struct pc_errs *e);
/* int array: max_n elements at most (out has room for max_n), each in
 * [min, max]; distinct != 0 refuses duplicates. */
enum pc_field pc_get_int_array(json_object *obj, const char *field, int required,
		size_t max_n, long long min, long long max, int distinct,
		int *out, size_t *n_out, struct pc_errs *e);

/* "A, B, C" of a NULL-terminated list (arena), for error messages. */
const char *pc_enum_list(const char *const *values);

/* Number of Unicode code points of a UTF-8 string.  Pure. */
size_t pc_utf8_len(const char *s);

/* ---- plain member getters (messages, stored JSON; no error collection) */

/* String member of o, or NULL (absent, null or not a string).  Borrowed
 * from o. */
const char *pc_jstr(json_object *o, const char *key);
/* Optional string member: absent or null -> NULL; a string -> it (borrowed);
 * anything else -> NULL with *bad = 1 (*bad is only ever set). */
const char *pc_jstr_opt(json_object *o, const char *key, int *bad);
/* Optional uuid member: absent or null -> 0 with *out = NULL; a uuid string
 * other than the nil uuid -> 0 with *out (borrowed from o); anything else
 * (the nil uuid too) -> PIN_ERR. */
int pc_opt_uuid(json_object *o, const char *key, const char **out);
/* 1 when s is a canonical uuid text and not the nil uuid
 * (00000000-0000-0000-0000-000000000000), else 0: the id check of consumed
 * messages (no entity has the nil id).  Pure predicate. */
int pc_id_ok(const char *s);

#endif
