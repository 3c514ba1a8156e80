/* team_api.c -- range listing shared by the agent list and the read-only
 * agency / PIN manager views (api.md). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "calendar.h"

/*
 * Events overlapping [from, to): point events with from <= start < to,
 * others with start < to and end > from.  An event lasts <= 24 h, so
 * start > from - 24 h bounds the index range scan on (owner|tenant, start_at, id).
 *
 * Two statements, one per scope, with no "$n IS NULL OR" on the scope
 * column: a prepared statement goes to a generic plan after five runs, and a
 * generic plan of a shared text could not know whether $2 (the owner) is
 * set, so the hot agent list would run on the tenant index and filter the
 * colleagues' rows.  The keyset bound (start_at, id) > ($8, $9) is never
 * NULL (without a cursor it is from - 24 h), so it is an index condition too.
 */
#define LIST_SELECT \
	"SELECT " PC_EVENT_COLS_TS ", u.display_name, u.avatar_url " \
	"FROM calendar.calendar_events e " \
	"LEFT JOIN calendar.user_replicas u ON $10::bool AND u.user_id = e.owner_user_id "
#define LIST_RANGE \
	"  AND e.start_at < $5::timestamptz " \
	"  AND e.start_at > $4::timestamptz - interval '24 hours' " \
	"  AND (e.start_at >= $4::timestamptz OR e.end_at > $4::timestamptz) " \
	"  AND ($6::text IS NULL OR e.kind = $6) " \
	"  AND ($7::text IS NULL OR e.status = $7) " \
	"  AND (e.start_at, e.id) > ($8::timestamptz, $9::uuid) " \
	"ORDER BY e.start_at, e.id LIMIT $11::int"

/* one owner's calendar (agent list, PIN manager with ownerUserId):
 * ix_calendar_events_owner_start; $3 is unused but typed */
static const char list_owner_sql[] = LIST_SELECT
	"WHERE e.owner_user_id = $2::uuid AND e.tenant_id = $1 "
	"  AND $3::uuid[] IS NULL " LIST_RANGE;

/* a tenant, optionally some owners (agency, PIN manager):
 * ix_calendar_events_tenant_start; $2 is unused but typed */
static const char list_tenant_sql[] = LIST_SELECT
	"WHERE e.tenant_id = $1 AND $2::uuid IS NULL "
	"  AND ($3::uuid[] IS NULL OR e.owner_user_id = ANY ($3::uuid[])) " LIST_RANGE;

#define NIL_UUID "00000000-0000-0000-0000-000000000000"

int cal_list_events(struct pin_req *r, const struct cal_list_scope *scope,
		struct pc_errs *e)
{
	int64_t from = 0, to = 0, cur_us = 0;
	long long limit = 100;
	const char *kind = NULL, *status = NULL, *params[11];
	char cur_id[37];
	struct pc_jt w;
	PGresult *res;
	int i, n;

	pc_q_instant(r, "from", 1, &from, e);
	pc_q_instant(r, "to", 1, &to, e);
	pc_q_enum(r, "kind", 0, pc_event_kinds, &kind, e);
	pc_q_enum(r, "status", 0, pc_event_statuses, &status, e);
	pc_q_int(r, "limit", 0, 1, 500, &limit, e);
	pc_q_cursor(r, &cur_us, cur_id, e);
	if (e->n)
		return pc_errs_respond(r, 400, "MALFORMED_REQUEST",
				"bad query parameters", e);
	if (to <= from)
		pc_errs_add(e, "to", "must be after from");
	else if (to - from > CAL_MAX_RANGE_US)
		pc_errs_add(e, "to", "the range is at most 92 days");
	if (e->n)
		return pc_errs_respond(r, 422, "VALIDATION_FAILED", "bad range", e);

	params[0] = scope->tenant_id;
	params[1] = scope->owner_user_id;
	params[2] = scope->owner_ids_array;
	params[3] = pc_time_param(from);
	params[4] = pc_time_param(to);
	params[5] = kind;
	params[6] = status;
	params[7] = pc_time_param(cur_id[0] ? cur_us : from - PC_MAX_EVENT_US);
	params[8] = cur_id[0] ? pc_api->strdup(cur_id) : NIL_UUID;
	params[9] = scope->with_owner ? "true" : "false";
	params[10] = pc_api->sprintf("%lld", limit + 1);
	if (scope->owner_user_id)
		res = pc_exec_prepared_bin("cal_events_list_owner", list_owner_sql, 11, params);
	else
		res = pc_exec_prepared_bin("cal_events_list_tenant", list_tenant_sql, 11, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	n = PQntuples(res);
	/* the page as JSON text (sdk/jtext.h; the same bytes as the json-c
	 * tree this built before, ~1/3 of the host CPU per page) */
	pc_jt_init(&w, 1024 + 900 * (size_t)(n < limit ? n : limit));
	pc_jt_obj(&w);
	PC_JT_K(&w, "items");
	pc_jt_arr(&w);
	for (i = 0; i < n && i < limit; i++) {
		pc_event_jt(&w, res, i);
		if (scope->with_owner) {
			PC_JT_K(&w, "owner");
			pc_jt_obj(&w);
			PC_JT_K(&w, "userId");
			pc_jt_col(&w, res, i, PC_EC_OWNER);
			PC_JT_K(&w, "displayName");
			pc_jt_col(&w, res, i, PC_EC__N);
			PC_JT_K(&w, "avatarUrl");
			pc_jt_col(&w, res, i, PC_EC__N + 1);
			pc_jt_end_obj(&w);
		}
		pc_jt_end_obj(&w);
	}
	pc_jt_end_arr(&w);
	PC_JT_K(&w, "nextCursor");
	pc_jt_str(&w, pc_next_cursor(res, limit, PC_EC_START, PC_EC_ID));
	pc_jt_end_obj(&w);
	return pc_jt_respond(r, 200, &w);
}

/* GET /api/v1/agency/calendar/events?from=&to=&ownerUserIds= : the caller's tenant */
int cal_team_events(struct pin_req *r, void *ud)
{
	const struct pin_principal *p = pc_api->req_principal(r);
	struct cal_list_scope scope = { p->tenant_id, NULL, NULL, 1 };
	struct pc_errs e;

	(void)ud;
	pc_errs_init(&e);
	pc_q_uuid_list(r, "ownerUserIds", 0, 200, &scope.owner_ids_array, &e);
	return cal_list_events(r, &scope, &e);
}

/* GET /api/v1/pin-manager/calendar/events?tenantId=&ownerUserId=&from=&to= */
int cal_pinmgr_events(struct pin_req *r, void *ud)
{
	struct cal_list_scope scope = { NULL, NULL, NULL, 1 };
	struct pc_errs e;

	(void)ud;
	pc_errs_init(&e);
	pc_q_uuid(r, "tenantId", 1, &scope.tenant_id, &e);
	pc_q_uuid(r, "ownerUserId", 0, &scope.owner_user_id, &e);
	return cal_list_events(r, &scope, &e);
}
