/* idem.c -- Idempotency-Key: the first answer of a write, replayed for 24 h. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/idem.h"
#include "sdk/pg.h"
#include "sdk/instant.h"
#include "sdk/problem.h"

/* The plugin's key store and its statements (pc_idem_table, set in init,
 * read-only afterwards).  Statement names carry the table: prepared
 * statements live per connection, which the plugins of a host share. */
static struct {
	char claim[640], get[256], store[256];
	char claim_name[96], get_name[96], store_name[96];
	int named;
} idem;

int pc_idem_table(const char *table, char *err, size_t errlen)
{
	size_t n = table ? strlen(table) : 0;
	int w = 0;

	if (n == 0 || strspn(table, "abcdefghijklmnopqrstuvwxyz0123456789_.") != n) {
		snprintf(err, errlen, "idempotency: bad key store name");
		return PIN_ERR;
	}
	/* Claim the key.  A row older than 24 h is expired and taken over; a
	 * concurrent claim waits on the unique index until we commit. */
	w |= snprintf(idem.claim, sizeof(idem.claim),
		"INSERT INTO %s AS k "
		"  (caller, tenant_id, key, request_hash, status, created_at) "
		"VALUES ($1, $5, $2, md5($3), 0, $4::timestamptz) "
		"ON CONFLICT (caller, tenant_id, key) DO UPDATE "
		"  SET request_hash = EXCLUDED.request_hash, status = 0, "
		"      response_body = NULL, location = NULL, created_at = EXCLUDED.created_at "
		"  WHERE k.created_at <= $4::timestamptz - interval '24 hours' "
		"RETURNING 1", table) >= (int)sizeof(idem.claim);
	w |= snprintf(idem.get, sizeof(idem.get),
		"SELECT status, response_body, location, request_hash = md5($3) "
		"FROM %s "
		"WHERE caller = $1 AND key = $2 AND tenant_id = $4", table)
		>= (int)sizeof(idem.get);
	w |= snprintf(idem.store, sizeof(idem.store),
		"UPDATE %s SET status = $3::int, "
		"  response_body = $4::jsonb, location = $5 "
		"WHERE caller = $1 AND key = $2 AND tenant_id = $6", table)
		>= (int)sizeof(idem.store);
	w |= snprintf(idem.claim_name, sizeof(idem.claim_name), "pc_idem_claim:%s", table)
		>= (int)sizeof(idem.claim_name);
	w |= snprintf(idem.get_name, sizeof(idem.get_name), "pc_idem_get:%s", table)
		>= (int)sizeof(idem.get_name);
	w |= snprintf(idem.store_name, sizeof(idem.store_name), "pc_idem_store:%s", table)
		>= (int)sizeof(idem.store_name);
	idem.named = !w;
	if (w)
		snprintf(err, errlen, "idempotency: key store name too long");
	return w ? PIN_ERR : 0;
}

/* Answers the stored first response (row of pc_idem_get) again. */
static void idem_replay(struct pin_req *r, const PGresult *res)
{
	json_object *replay, *ver;

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
}

int pc_idem_begin(struct pin_req *r, struct pc_idem *st)
{
	const struct pin_principal *p = pc_api->req_principal(r);
	const char *key = pc_api->req_header(r, "Idempotency-Key");
	json_object *body = pc_api->req_body(r);
	const char *params[5];
	char *now;
	PGresult *res;

	if (!idem.named) {
		pc_api->log(PIN_LOG_ERROR, "idempotency: no key store (pc_idem_table in init)",
				NULL);
		return PIN_ERR;
	}
	st->key = NULL;
	st->caller = p && p->sub ? p->sub : "";
	st->tenant = p && p->tenant_id ? p->tenant_id : "";
	st->fingerprint = NULL;
	if (!key || !*key)
		return 0;
	{
		/* a header value (RFC 9110 field-vchar, the IETF draft's sf-string):
		 * printable ASCII only, so nothing a database refuses or a log line
		 * hides gets stored as a key */
		const char *why = strlen(key) > 64 ? "at most 64 characters" : NULL;

		for (const unsigned char *c = (const unsigned char *)key; !why && *c; c++)
			if (*c < 0x20 || *c > 0x7e)
				why = "printable ASCII characters only";
		if (why) {
			struct pc_errs e;
			pc_errs_init(&e);
			pc_errs_add(&e, "Idempotency-Key", why);
			pc_errs_respond(r, 400, "MALFORMED_REQUEST", "bad Idempotency-Key header", &e);
			return PC_E_RESPONDED;
		}
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
	params[4] = st->tenant;
	res = pc_api->db_exec_prepared(idem.claim_name, idem.claim, 5, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) == 1)
		return 0;
	params[3] = st->tenant;
	res = pc_api->db_exec_prepared(idem.get_name, idem.get, 4, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
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
	idem_replay(r, res);
	return PC_E_REPLAYED;
}

int pc_idem_store(const struct pc_idem *st, int status, json_object *body,
		const char *location)
{
	const char *params[6];
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
	params[5] = st->tenant;
	res = pc_api->db_exec_prepared(idem.store_name, idem.store, 6, params);
	if (!pc_res_ok(res, PGRES_COMMAND_OK))
		return PIN_ERR_DB;
	return 0;
}
