/* list.c -- appointment lists and cards of the agent, investor and agency
 * areas.  Every query is restricted to the caller's scope, so foreign ids
 * answer 404 APPOINTMENT_NOT_FOUND and lists never show others' rows. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "http.h"

#define LIMIT_DEFAULT 100
#define LIMIT_MAX 500
#define AGENTS_MAX 100

static const char *const statuses[] = { "Pending", "Confirmed", "Declined", "Cancelled",
	"Expired", "Completed", "NoShow", NULL };

/* ?status=&from=&to=&limit=&cursor= (+ agentUserIds for the agency).
 * e: initialised by the caller, may already hold errors of the caller's own
 * parameters (answered together as 400). */
static int list_e(struct pin_req *r, const struct cd_apt_scope *sc, int with_agents,
		struct pc_errs *e)
{
	const char *status = NULL, *agents = NULL, *p[10];
	int64_t from = 0, to = 0, cur_us = 0;
	enum pc_field sf, st;
	long long limit = LIMIT_DEFAULT;
	char cur_id[37] = "";
	PGresult *res;

	pc_q_enum(r, "status", 0, statuses, &status, e);
	sf = pc_q_instant(r, "from", 0, &from, e);
	st = pc_q_instant(r, "to", 0, &to, e);
	pc_q_int(r, "limit", 0, 1, LIMIT_MAX, &limit, e);
	if (with_agents)
		pc_q_uuid_list(r, "agentUserIds", 0, AGENTS_MAX, &agents, e);
	pc_q_cursor(r, &cur_us, cur_id, e);
	if (e->n > 0)
		return pc_errs_respond(r, 400, "MALFORMED_REQUEST", "bad query parameters", e);
	if (sf == PC_SET && st == PC_SET && to <= from) {
		pc_errs_add(e, "to", "must be after from");
		return pc_errs_respond(r, 422, "VALIDATION_FAILED", "bad range", e);
	}
	p[0] = sc->tenant_id;
	p[1] = sc->agent_user_id;
	p[2] = sc->investor_user_id;
	p[3] = agents;
	p[4] = status;
	p[5] = sf == PC_SET ? pc_time_param(from) : NULL;
	p[6] = st == PC_SET ? pc_time_param(to) : NULL;
	p[7] = cur_id[0] ? pc_time_param(cur_us) : NULL;
	p[8] = cur_id[0] ? cur_id : NULL;
	p[9] = pc_api->sprintf("%lld", limit + 1);
	res = pc_api->db_exec_prepared("apt_list",
		CD_APT_VIEW_SQL
		"WHERE ($1::uuid IS NULL OR a.tenant_id = $1::uuid) "
		"  AND ($2::uuid IS NULL OR a.agent_user_id = $2::uuid) "
		"  AND ($3::uuid IS NULL OR a.investor_user_id = $3::uuid) "
		"  AND ($4::uuid[] IS NULL OR a.agent_user_id = ANY ($4::uuid[])) "
		"  AND ($5::text IS NULL OR a.status = $5) "
		"  AND ($6::timestamptz IS NULL OR a.start_at >= $6::timestamptz) "
		"  AND ($7::timestamptz IS NULL OR a.start_at < $7::timestamptz) "
		"  AND ($8::timestamptz IS NULL OR (a.start_at, a.id) > ($8::timestamptz, $9::uuid)) "
		"ORDER BY a.start_at, a.id LIMIT $10::int", 10, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	return pc_api->respond_json(r, 200,
			pc_page_json(res, limit, CD_APT_C_START, CD_APT_C_ID, cd_apt_json));
}

static int list(struct pin_req *r, const struct cd_apt_scope *sc, int with_agents)
{
	struct pc_errs e;

	pc_errs_init(&e);
	return list_e(r, sc, with_agents, &e);
}

static int card(struct pin_req *r, const struct cd_apt_scope *sc)
{
	const char *id = pc_path_uuid(r, "appointmentId");
	PGresult *row;
	int rc;

	if (!id)
		return PIN_OK;
	rc = cd_apt_fetch(id, sc, &row);
	if (rc == PC_E_NOT_FOUND)
		return pc_problem(r, 404, APT_NOT_FOUND, "no such appointment");
	if (rc < 0)
		return rc;
	pc_api->set_header(r, "ETag", pc_api->sprintf("\"%s\"",
			PQgetvalue(row, 0, CD_APT_C_VERSION)));
	return pc_api->respond_json(r, 200, cd_apt_json(row, 0));
}

int apt_h_agent_list(struct pin_req *r, void *ud)
{
	const struct pin_principal *me = pc_api->req_principal(r);
	struct cd_apt_scope sc = { me->tenant_id, me->sub, NULL };

	(void)ud;
	return list(r, &sc, 0);
}

int apt_h_agent_get(struct pin_req *r, void *ud)
{
	const struct pin_principal *me = pc_api->req_principal(r);
	struct cd_apt_scope sc = { me->tenant_id, me->sub, NULL };

	(void)ud;
	return card(r, &sc);
}

int apt_h_investor_list(struct pin_req *r, void *ud)
{
	const struct pin_principal *me = pc_api->req_principal(r);
	struct cd_apt_scope sc = { NULL, NULL, me->sub };

	(void)ud;
	return list(r, &sc, 0);
}

int apt_h_investor_get(struct pin_req *r, void *ud)
{
	const struct pin_principal *me = pc_api->req_principal(r);
	struct cd_apt_scope sc = { NULL, NULL, me->sub };

	(void)ud;
	return card(r, &sc);
}

int apt_h_agency_list(struct pin_req *r, void *ud)
{
	const struct pin_principal *me = pc_api->req_principal(r);
	struct cd_apt_scope sc = { me->tenant_id, NULL, NULL };

	(void)ud;
	return list(r, &sc, 1);
}

/* GET /api/v1/pin-manager/calendar/appointments?tenantId=&agentUserId=&status=&from=&to=
 * (issue 12): any tenant, read only; tenantId required (400 MALFORMED_REQUEST
 * like the PIN manager's events view). */
int apt_h_pinmgr_list(struct pin_req *r, void *ud)
{
	struct cd_apt_scope sc = { NULL, NULL, NULL };
	struct pc_errs e;

	(void)ud;
	pc_errs_init(&e);
	pc_q_uuid(r, "tenantId", 1, &sc.tenant_id, &e);
	pc_q_uuid(r, "agentUserId", 0, &sc.agent_user_id, &e);
	return list_e(r, &sc, 0, &e);
}
