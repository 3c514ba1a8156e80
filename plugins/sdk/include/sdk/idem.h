/* sdk/idem.h -- Idempotency-Key of writes. */
#ifndef PIN_SDK_IDEM_H
#define PIN_SDK_IDEM_H

#include "sdk/core.h"

/*
 * Idempotency of writes (api.md): a key store (caller, tenant_id, key) of
 * the plugin's schema holds the first successful response for 24 h.  The
 * SDK owns no table: the plugin names its store once, in init:
 *
 *     pc_idem_table("calendar.idempotency_keys", err, errlen);
 *
 * (columns caller, tenant_id, key, request_hash, status, response_body,
 * location, created_at; unique (caller, tenant_id, key): the calendar
 * migrations 0100 and 0501 make one).  A record belongs to the principal's sub
 * AND tenant_id claim (no claim = ''): the same sub in another tenant never
 * replays it.  Use inside the write's transaction:
 *
 *     api->db_begin();
 *     rc = pc_idem_begin(r, &idem);      // after db_begin
 *     if (rc == PC_E_REPLAYED || rc == PC_E_RESPONDED) { rollback; return PIN_OK; }
 *     if (rc < 0) { rollback; return rc; }
 *     ... the write, building the response body ...
 *     pc_idem_store(&idem, 201, body, location);   // before commit
 *     api->db_commit(); respond.
 *
 * Without the header pc_idem_begin returns 0 and pc_idem_store does nothing.
 * A concurrent request with the same key waits for the first one (unique
 * index), then replays its response.  The same key with another method,
 * path or body answers 422 VALIDATION_FAILED (field "Idempotency-Key").
 * Failed requests (rolled back) store nothing, so a retry runs again.
 * Replays carry the header "Idempotent-Replayed: true".
 */
/* Names the key store (schema-qualified, [a-z0-9_.]) of this plugin's
 * writes and makes its statements.  Init only (not thread-safe).  0, or
 * PIN_ERR with the reason in err for a name that is not one. */
int pc_idem_table(const char *table, char *err, size_t errlen);

struct pc_idem {
	const char *caller;     /* principal sub */
	const char *tenant;     /* principal tenant_id, "" without one */
	const char *key;        /* NULL when no header */
	const char *fingerprint;/* method + path + body text */
};
/* PIN_ERR (and an ERROR line) before pc_idem_table named the store. */
int pc_idem_begin(struct pin_req *r, struct pc_idem *st);
/* body borrowed (serialised); location may be NULL. 0 / PIN_ERR_DB */
int pc_idem_store(const struct pc_idem *st, int status, json_object *body,
		const char *location);

#endif
