/* sdk/query.h -- query string and path parameters. */
#ifndef PIN_SDK_QUERY_H
#define PIN_SDK_QUERY_H

#include "sdk/body.h"

/* Query parameter getters: the states of enum pc_field; errors collected
 * (the caller answers 400 MALFORMED_REQUEST for malformed query values). */
enum pc_field pc_q_instant(struct pin_req *r, const char *name, int required,
		int64_t *out_us, struct pc_errs *e);
enum pc_field pc_q_uuid(struct pin_req *r, const char *name, int required,
		const char **out, struct pc_errs *e);
enum pc_field pc_q_int(struct pin_req *r, const char *name, int required,
		long long min, long long max, long long *out, struct pc_errs *e);
enum pc_field pc_q_enum(struct pin_req *r, const char *name, int required,
		const char *const *values, const char **out, struct pc_errs *e);
/* Comma separated uuids (at most max_n) -> a PostgreSQL array literal
 * "{a,b}" (arena), usable as a uuid[] parameter. */
enum pc_field pc_q_uuid_list(struct pin_req *r, const char *name, int required,
		size_t max_n, const char **out_array_literal, struct pc_errs *e);

/* Path parameter that must be a uuid: returns it, or NULL after answering
 * 400 MALFORMED_REQUEST (api.md: "bad uuid ... in path"). */
const char *pc_path_uuid(struct pin_req *r, const char *name);

#endif
