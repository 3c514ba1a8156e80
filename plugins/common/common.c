/* common.c -- generic HTTP helpers shared by the calendar plugins. */
#include "config.h"
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include "common.h"

const struct pin_host_api *pc_api;

void pc_init(const struct pin_host_api *api)
{
	pc_api = api;
}

/* ---------------------------------------------------------------- errors */

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

int pc_problem(struct pin_req *r, int status, const char *code, const char *detail)
{
	pc_api->respond_problem(r, status, code, detail, NULL);
	return PIN_OK;
}

/* ------------------------------------------------------------ JSON bodies */

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

static const char *enum_list(const char *const *values)
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
	pc_errs_add(e, field, pc_api->sprintf("must be one of: %s", enum_list(values)));
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

/* ------------------------------------------------------------ query string */

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
	pc_errs_add(e, name, pc_api->sprintf("must be one of: %s", enum_list(values)));
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

/* ------------------------------------------------------------------- time */

char *pc_time_str(int64_t us)
{
	char *buf = pc_api->alloc(40);

	return pc_time_fmt(us, buf, 40);
}

char *pc_time_param(int64_t us)
{
	int64_t frac = ((us % 1000000) + 1000000) % 1000000;
	char base[40];

	pc_time_fmt(us - frac, base, sizeof(base));
	base[strlen(base) - 1] = 0;     /* drop the Z */
	return pc_api->sprintf("%s.%06lldZ", base, (long long)frac);
}

int64_t pc_col_us(const PGresult *res, int row, int col)
{
	if (PQgetisnull(res, row, col))
		return -1;
	return strtoll(PQgetvalue(res, row, col), NULL, 10);
}

/* -------------------------------------------------------------- time zones */

static pthread_mutex_t tz_lock = PTHREAD_MUTEX_INITIALIZER;
static char **tz_names;
static size_t tz_n;

static int tz_cmp(const void *a, const void *b)
{
	return strcasecmp(*(char *const *)a, *(char *const *)b);
}

static int tz_load(void)
{
	PGresult *res;
	int i, n;
	char **names;
	size_t k = 0;

	res = pc_api->db_exec("SELECT name FROM pg_timezone_names", 0, NULL);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
		return PIN_ERR_DB;
	n = PQntuples(res);
	names = calloc((size_t)n + 1, sizeof(*names));
	if (!names)
		return PIN_ERR;
	for (i = 0; i < n; i++) {
		const char *s = PQgetvalue(res, i, 0);
		if (strncmp(s, "posix/", 6) == 0 || strncmp(s, "right/", 6) == 0)
			continue;
		names[k++] = strdup(s);
	}
	qsort(names, k, sizeof(*names), tz_cmp);
	tz_names = names;
	tz_n = k;
	return 0;
}

int pc_tz_canonical(const char *name, const char **canonical)
{
	char **hit;
	int rc = 0;

	if (!name || !*name || strlen(name) > 64)
		return 1;
	pthread_mutex_lock(&tz_lock);
	if (!tz_names)
		rc = tz_load();
	pthread_mutex_unlock(&tz_lock);
	if (rc < 0)
		return rc;
	hit = bsearch(&name, tz_names, tz_n, sizeof(*tz_names), tz_cmp);
	if (!hit)
		return 1;
	*canonical = *hit;
	return 0;
}

/* ------------------------------------------------------------------ paging */

char *pc_cursor_make(int64_t us, const char *id)
{
	char *plain = pc_api->sprintf("%lld|%s", (long long)us, id);
	char *out = pc_api->alloc(strlen(plain) * 2 + 1);

	pc_hex_encode(plain, out);
	return out;
}

enum pc_field pc_q_cursor(struct pin_req *r, int64_t *us, char id[37],
		struct pc_errs *e)
{
	const char *cursor = pc_api->req_query(r, "cursor");

	id[0] = '\0';
	if (!cursor || !*cursor)
		return PC_ABSENT;
	if (pc_cursor_parse(cursor, us, id) != 0) {
		id[0] = '\0';
		pc_errs_add(e, "cursor", "malformed cursor");
		return PC_INVALID;
	}
	return PC_SET;
}

char *pc_next_cursor(const PGresult *res, long long limit, int start_col, int id_col)
{
	int last = (int)limit - 1;

	if (PQntuples(res) <= limit)
		return NULL;
	return pc_cursor_make(pc_col_us(res, last, start_col), PQgetvalue(res, last, id_col));
}

json_object *pc_page_json(const PGresult *res, long long limit, int start_col,
		int id_col, json_object *(*item)(const PGresult *res, int row))
{
	json_object *items = json_object_new_array(), *body = json_object_new_object();
	int n = PQntuples(res);

	for (int i = 0; i < n && i < limit; i++)
		json_object_array_add(items, item(res, i));
	json_object_object_add(body, "items", items);
	pc_json_str(body, "nextCursor", pc_next_cursor(res, limit, start_col, id_col));
	return body;
}

/* ---------------------------------------------------------------- If-Match */

int pc_if_match(struct pin_req *r, int *version)
{
	const char *v = pc_api->req_header(r, "If-Match");

	if (!v || !*v)
		return 0;
	if (pc_parse_if_match(v, version) != 0) {
		pc_problem(r, 400, "MALFORMED_REQUEST",
				"If-Match must be a quoted version number, e.g. \"3\"");
		return PC_E_RESPONDED;
	}
	return 1;
}

/* --------------------------------------------------------- Idempotency-Key */

int pc_idem_begin(struct pin_req *r, struct pc_idem *st)
{
	const struct pin_principal *p = pc_api->req_principal(r);
	const char *key = pc_api->req_header(r, "Idempotency-Key");
	json_object *body = pc_api->req_body(r);
	const char *params[5];
	char *now;
	PGresult *res;
	json_object *replay, *ver;

	st->key = NULL;
	st->caller = p && p->sub ? p->sub : "";
	st->fingerprint = NULL;
	if (!key || !*key)
		return 0;
	if (strlen(key) > 64) {
		struct pc_errs e;
		pc_errs_init(&e);
		pc_errs_add(&e, "Idempotency-Key", "at most 64 characters");
		pc_errs_respond(r, 400, "MALFORMED_REQUEST", "bad Idempotency-Key header", &e);
		return PC_E_RESPONDED;
	}
	st->key = key;
	st->fingerprint = pc_api->sprintf("%s %s %s", pc_api->req_method(r),
			pc_api->req_path(r),
			body ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN) : "");
	now = pc_time_param(pc_api->now_us());
	params[0] = st->caller;
	params[1] = key;
	params[2] = st->fingerprint;
	params[3] = now;
	/* Claim the key.  A row older than 24 h is expired and taken over; a
	 * concurrent claim waits on the unique index until we commit. */
	res = pc_api->db_exec_prepared("pc_idem_claim",
		"INSERT INTO calendar.idempotency_keys AS k "
		"  (caller, key, request_hash, status, created_at) "
		"VALUES ($1, $2, md5($3), 0, $4::timestamptz) "
		"ON CONFLICT (caller, key) DO UPDATE "
		"  SET request_hash = EXCLUDED.request_hash, status = 0, "
		"      response_body = NULL, location = NULL, created_at = EXCLUDED.created_at "
		"  WHERE k.created_at <= $4::timestamptz - interval '24 hours' "
		"RETURNING 1", 4, params);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
		return PIN_ERR_DB;
	if (PQntuples(res) == 1)
		return 0;
	res = pc_api->db_exec_prepared("pc_idem_get",
		"SELECT status, response_body, location, request_hash = md5($3) "
		"FROM calendar.idempotency_keys WHERE caller = $1 AND key = $2",
		3, params);
	if (!res || PQresultStatus(res) != PGRES_TUPLES_OK)
		return PIN_ERR_DB;
	if (PQntuples(res) != 1)
		return PIN_ERR_DB;
	if (strcmp(PQgetvalue(res, 0, 3), "t") != 0) {
		struct pc_errs e;
		pc_errs_init(&e);
		pc_errs_add(&e, "Idempotency-Key",
				"already used for a different request within 24 h");
		pc_errs_respond(r, 422, "VALIDATION_FAILED",
				"Idempotency-Key reused with another request", &e);
		return PC_E_RESPONDED;
	}
	replay = PQgetisnull(res, 0, 1) ? NULL : json_tokener_parse(PQgetvalue(res, 0, 1));
	if (!PQgetisnull(res, 0, 2))
		pc_api->set_header(r, "Location", PQgetvalue(res, 0, 2));
	/* the first response carried ETag: "<version>" of the representation;
	 * the replay answers the same (the body holds that version) */
	if (replay && json_object_object_get_ex(replay, "version", &ver) &&
			json_object_is_type(ver, json_type_int))
		pc_api->set_header(r, "ETag", pc_api->sprintf("\"%lld\"",
				(long long)json_object_get_int64(ver)));
	pc_api->set_header(r, "Idempotent-Replayed", "true");
	pc_api->respond_json(r, atoi(PQgetvalue(res, 0, 0)), replay);
	return PC_E_REPLAYED;
}

int pc_idem_store(const struct pc_idem *st, int status, json_object *body,
		const char *location)
{
	const char *params[5];
	char code[16];
	PGresult *res;

	if (!st->key)
		return 0;
	snprintf(code, sizeof(code), "%d", status);
	params[0] = st->caller;
	params[1] = st->key;
	params[2] = code;
	params[3] = body ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN) : NULL;
	params[4] = location;
	res = pc_api->db_exec_prepared("pc_idem_store",
		"UPDATE calendar.idempotency_keys SET status = $3::int, "
		"  response_body = $4::jsonb, location = $5 "
		"WHERE caller = $1 AND key = $2", 5, params);
	if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
		return PIN_ERR_DB;
	return 0;
}

/* ------------------------------------------------------------------ output */

void pc_json_str(json_object *o, const char *key, const char *v)
{
	json_object_object_add(o, key, v ? json_object_new_string(v) : NULL);
}

void pc_json_col(json_object *o, const char *key, const PGresult *res, int row, int col)
{
	json_object_object_add(o, key, PQgetisnull(res, row, col) ? NULL :
			json_object_new_string(PQgetvalue(res, row, col)));
}

void pc_json_col_time(json_object *o, const char *key, const PGresult *res, int row, int col)
{
	char buf[40];

	json_object_object_add(o, key, PQgetisnull(res, row, col) ? NULL :
			json_object_new_string(pc_time_fmt(pc_col_us(res, row, col),
					buf, sizeof(buf))));
}

void pc_json_col_int(json_object *o, const char *key, const PGresult *res, int row, int col)
{
	json_object_object_add(o, key, PQgetisnull(res, row, col) ? NULL :
			json_object_new_int64(strtoll(PQgetvalue(res, row, col), NULL, 10)));
}

json_object *pc_json_int_array(const char *pg)
{
	json_object *a = json_object_new_array();
	const char *p = pg;
	char *end;

	if (!p)
		return a;
	while (*p) {
		if (*p == '-' || isdigit((unsigned char)*p)) {
			long long v = strtoll(p, &end, 10);
			json_object_array_add(a, json_object_new_int64(v));
			p = end;
		} else {
			p++;
		}
	}
	return a;
}

/* ------------------------------------------------------------------ outbox */

int pc_outbox(const char *topic, const char *key, const char *event_type,
		const char *aggregate_type, const char *aggregate_id, json_object *payload)
{
	int rc = pc_api->outbox_put(topic, key, event_type, aggregate_type,
			aggregate_id, payload);

	json_object_put(payload);
	return rc == 0 ? 0 : PIN_ERR_DB;
}

int pc_has_perm(const struct pin_principal *p, const char *perm)
{
	size_t i;

	if (!p)
		return 0;
	for (i = 0; i < p->n_permissions; i++)
		if (strcmp(p->permissions[i], perm) == 0)
			return 1;
	return 0;
}

/* ------------------------------------------------------------ registration */

int pc_register_routes(struct pin_registrar *reg, const struct pin_route *routes,
		size_t n, const char *plugin, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (reg->route(reg, &routes[i]) < 0) {
			snprintf(err, errlen, "%s: cannot register %s %s", plugin,
					routes[i].method, routes[i].pattern);
			return -1;
		}
	return 0;
}

int pc_register_consumer(struct pin_registrar *reg, const struct pin_consumer *c,
		const char *plugin, char *err, size_t errlen)
{
	if (reg->consumer(reg, c) < 0) {
		snprintf(err, errlen, "%s: cannot register consumer %s", plugin, c->group);
		return -1;
	}
	return 0;
}
