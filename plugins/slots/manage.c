/* manage.c -- the agent's own slots: listing, archive one slot, archive the
 * Available slots of a batch. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "slots.h"

static const char *const slot_statuses[] = { "Available", "Booked", "Expired", "Archived",
	NULL };

#define DAY_US (86400LL * 1000000)

int slot_list_params(struct pin_req *r, int64_t def_from, int64_t *from, int64_t *to,
		long long *limit, int64_t *cur_us, char cur_id[37], struct pc_errs *e)
{
	enum pc_field sf, st;

	*limit = SLOT_LIST_LIMIT_DEFAULT;
	sf = pc_q_instant(r, "from", 0, from, e);
	st = pc_q_instant(r, "to", 0, to, e);
	pc_q_int(r, "limit", 0, 1, SLOT_LIST_LIMIT_MAX, limit, e);
	pc_q_cursor(r, cur_us, cur_id, e);
	if (e->n > 0) {
		pc_errs_respond(r, 400, "MALFORMED_REQUEST", "bad query parameters", e);
		return PC_E_RESPONDED;
	}
	if (sf != PC_SET)
		*from = def_from;
	if (st != PC_SET)
		*to = *from + SLOT_LIST_RANGE_DAYS * DAY_US;
	if (*to <= *from)
		pc_errs_add(e, "to", "must be after from");
	else if (*to - *from > SLOT_LIST_RANGE_DAYS * DAY_US)
		pc_errs_add(e, "to", "the range from..to is at most 92 days");
	if (e->n > 0) {
		pc_errs_respond(r, 422, "VALIDATION_FAILED", "bad range", e);
		return PC_E_RESPONDED;
	}
	return 0;
}

/* The keyset page of one of the two slot lists: sql takes $1, $2 (the
 * caller's scope), $3..$4 the range, $5 status, $6..$7 the cursor, $8 the
 * limit + 1.  Answers the range errors (422) or the page. */
static int list_page(struct pin_req *r, const char *stmt, const char *sql,
		const char *a, const char *b, const char *status, struct pc_errs *e)
{
	const char *p[8];
	int64_t from, to, cur_us = 0;
	long long limit;
	char cur_id[37], lim[24];
	json_object *body;
	PGresult *res;

	if (slot_list_params(r, pc_api->now_us(), &from, &to, &limit, &cur_us, cur_id,
			e) == PC_E_RESPONDED)
		return PIN_OK;
	snprintf(lim, sizeof(lim), "%lld", limit + 1);
	p[0] = a;
	p[1] = b;
	p[2] = pc_time_param(from);
	p[3] = pc_time_param(to);
	p[4] = status;
	p[5] = cur_id[0] ? pc_time_param(cur_us) : NULL;
	p[6] = cur_id[0] ? cur_id : NULL;
	p[7] = lim;
	res = pc_api->db_exec_prepared(stmt, sql, 8, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	body = slot_page_json(res, limit);
	return body ? pc_api->respond_json(r, 200, body) : PIN_ERR;
}

#define LIST_TAIL \
	"  AND s.start_at >= $3::timestamptz AND s.start_at < $4::timestamptz " \
	"  AND ($5::text IS NULL OR s.status = $5) " \
	"  AND ($6::timestamptz IS NULL OR (s.start_at, s.id) > ($6::timestamptz, $7::uuid)) " \
	"ORDER BY s.start_at, s.id LIMIT $8::int"

int slot_h_list(struct pin_req *r, void *ud)
{
	const struct pin_principal *pr = pc_api->req_principal(r);
	struct pc_errs e;
	const char *status = NULL;
	int rc;

	(void)ud;
	pc_errs_init(&e);
	pc_q_enum(r, "status", 0, slot_statuses, &status, &e);
	rc = list_page(r, "slots_agent_list",
		"SELECT " SLOT_COLS " FROM calendar.availability_slots s "
		"WHERE s.owner_user_id = $1::uuid AND s.tenant_id = $2::uuid " LIST_TAIL,
		pr->sub, pr->tenant_id, status, &e);
	pc_errs_free(&e);
	return rc;
}

/* GET /api/v1/pin-manager/calendar/slots?tenantId=&agentUserId=&status=&from=&to=
 * (issue 12): the PIN manager's read view of any tenant's slots; tenantId
 * required (400 MALFORMED_REQUEST, like the PIN manager's events view); the
 * agent list's range defaults (from = now, to = from + 92 days) and paging. */
int slot_h_pinmgr_list(struct pin_req *r, void *ud)
{
	struct pc_errs e;
	const char *status = NULL, *tenant = NULL, *agent = NULL;
	int rc;

	(void)ud;
	pc_errs_init(&e);
	pc_q_uuid(r, "tenantId", 1, &tenant, &e);
	pc_q_uuid(r, "agentUserId", 0, &agent, &e);
	pc_q_enum(r, "status", 0, slot_statuses, &status, &e);
	rc = list_page(r, "slots_pinmgr_list",
		"SELECT " SLOT_COLS " FROM calendar.availability_slots s "
		"WHERE s.tenant_id = $1::uuid "
		"  AND ($2::uuid IS NULL OR s.owner_user_id = $2::uuid) " LIST_TAIL,
		tenant, agent, status, &e);
	pc_errs_free(&e);
	return rc;
}

/* Locks the caller's row: sql takes $1 id, $2 owner, $3 tenant, which it
 * sets in p[0..2] (the caller's own statements use them too).  0 with *res
 * (one row); PC_E_RESPONDED after answering 404 not_found; PIN_ERR_DB. */
static int lock_own(struct pin_req *r, const char *stmt, const char *sql,
		const char *id, const char **p, const char *not_found, const char *detail,
		PGresult **res)
{
	const struct pin_principal *pr = pc_api->req_principal(r);

	p[0] = id;
	p[1] = pr->sub;
	p[2] = pr->tenant_id;
	*res = pc_api->db_exec_prepared(stmt, sql, 3, p);
	if (!pc_res_ok(*res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(*res) != 1) {
		pc_problem(r, 404, not_found, detail);
		return PC_E_RESPONDED;
	}
	return 0;
}

/* The single exit of a write: rolls back an open transaction, drops an
 * unsent body; PC_E_RESPONDED (answered) is PIN_OK. */
static int finish(int rc, int in_tx, json_object *body)
{
	if (in_tx)
		pc_api->db_rollback();
	if (body)
		json_object_put(body);
	return rc == PC_E_RESPONDED ? PIN_OK : rc;
}

int slot_h_archive(struct pin_req *r, void *ud)
{
	const char *id, *p[4], *status;
	struct pc_idem idem;
	json_object *body = NULL;
	PGresult *res;
	int rc, in_tx = 0, has_ver, want_ver = 0;

	(void)ud;
	if (!(id = pc_path_uuid(r, "id")))
		return PIN_OK;
	if (pc_body_none(r) < 0)    /* NoFields: none or {} */
		return PIN_OK;
	if (pc_if_match(r, &has_ver, &want_ver) < 0)
		return PIN_OK;
	if ((rc = slot_tx_begin(r, &idem, &in_tx)) < 0)
		return rc == PC_E_RESPONDED ? PIN_OK : rc;
	if ((rc = lock_own(r, "slots_lock_own",
		"SELECT " SLOT_COLS " FROM calendar.availability_slots s "
		"WHERE s.id = $1::uuid AND s.owner_user_id = $2::uuid AND s.tenant_id = $3::uuid "
		"FOR UPDATE", id, p, "SLOT_NOT_FOUND", "no such slot", &res)) < 0)
		goto out;
	if (has_ver && atoi(PQgetvalue(res, 0, 14)) != want_ver) {
		rc = pc_problem(r, 409, "VERSION_CONFLICT",
				"the slot was changed; reload it and retry");
		goto out;
	}
	status = PQgetvalue(res, 0, 5);
	if (strcmp(status, "Booked") == 0) {
		rc = pc_problem(r, 409, "SLOT_BOOKED",
				"the slot is booked; decline or cancel the appointment instead");
		goto out;
	}
	if (strcmp(status, "Expired") == 0) {
		rc = pc_problem(r, 409, "INVALID_STATUS_TRANSITION",
				"an expired slot is archived by the system");
		goto out;
	}
	if (strcmp(status, "Available") == 0) {
		p[3] = pc_time_param(pc_api->now_us());
		res = pc_api->db_exec_prepared("slots_archive_one",
			"UPDATE calendar.availability_slots s SET status = 'Archived', "
			"  version = s.version + 1, updated_at = $4::timestamptz "
			"WHERE s.id = $1::uuid AND s.owner_user_id = $2::uuid "
			"  AND s.tenant_id = $3::uuid AND s.status = 'Available' "
			"RETURNING " SLOT_COLS, 4, p);
		if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1) {
			rc = PIN_ERR_DB;
			goto out;
		}
	}
	/* Archived already: answered as is (idempotent by state). */
	if (!(body = slot_json(res, 0))) {
		rc = PIN_ERR;
		goto out;
	}
	rc = slot_tx_commit_respond(r, &idem, &in_tx, 200, &body, PQgetvalue(res, 0, 14));
out:
	return finish(rc, in_tx, body);
}

int slot_h_archive_batch(struct pin_req *r, void *ud)
{
	const char *id, *p[4];
	struct pc_idem idem;
	json_object *body = NULL;
	PGresult *res;
	int rc, in_tx = 0;

	(void)ud;
	if (!(id = pc_path_uuid(r, "batchId")))
		return PIN_OK;
	if (pc_body_none(r) < 0)
		return PIN_OK;
	if ((rc = slot_tx_begin(r, &idem, &in_tx)) < 0)
		return rc == PC_E_RESPONDED ? PIN_OK : rc;
	p[3] = pc_time_param(pc_api->now_us());
	/* Locks the batch row so two archives of one batch serialise; a slot
	 * being booked meanwhile is re-checked by the UPDATE (status filter). */
	if ((rc = lock_own(r, "slots_batch_lock",
		"SELECT 1 FROM calendar.slot_batches b "
		"WHERE b.id = $1::uuid AND b.owner_user_id = $2::uuid AND b.tenant_id = $3::uuid "
		"FOR UPDATE", id, p, "BATCH_NOT_FOUND", "no such batch", &res)) < 0)
		goto out;
	res = pc_api->db_exec_prepared("slots_archive_batch",
		"UPDATE calendar.availability_slots s SET status = 'Archived', "
		"  version = s.version + 1, updated_at = $4::timestamptz "
		"WHERE s.batch_id = $1::uuid AND s.owner_user_id = $2::uuid "
		"  AND s.tenant_id = $3::uuid AND s.status = 'Available'", 4, p);
	if (!pc_res_ok(res, PGRES_COMMAND_OK)) {
		rc = PIN_ERR_DB;
		goto out;
	}
	body = json_object_new_object();
	json_object_object_add(body, "batchId", json_object_new_string(id));
	json_object_object_add(body, "archived", json_object_new_int(atoi(PQcmdTuples(res))));
	rc = slot_tx_commit_respond(r, &idem, &in_tx, 200, &body, NULL);
out:
	return finish(rc, in_tx, body);
}
