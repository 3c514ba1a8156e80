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
/* The owners' names are joined only for the views that show them ($10,
 * with_owner), and the optional kind / status filters are in the statement
 * only when asked for; otherwise each is a "$n IS NULL" / "NOT $10" that the
 * generic plan evaluates once per execution.  The first version had
 * "LEFT JOIN .. ON $10::bool AND .." and "($6 IS NULL OR e.kind = $6)" in one
 * statement: the join's inner scan ran for every row of the agent list, which
 * never shows owners (a page of 100: 282 -> 219 us in PostgreSQL, doc/performance.md,
 * read paths).  One statement per (scope, owners, kind,
 * status): 16, prepared on first use. */
#define LIST_SELECT_OWNERS \
	"SELECT " CD_EVENT_COLS_TS ", u.display_name, u.avatar_url " \
	"FROM calendar.calendar_events e " \
	"LEFT JOIN calendar.user_replicas u ON u.user_id = e.owner_user_id " \
	"WHERE $10::bool AND "
#define LIST_SELECT_PLAIN \
	"SELECT " CD_EVENT_COLS_TS ", NULL::text, NULL::text " \
	"FROM calendar.calendar_events e " \
	"WHERE NOT $10::bool AND "
#define LIST_KIND_ON    "  AND e.kind = $6::text "
#define LIST_KIND_OFF   "  AND $6::text IS NULL "
#define LIST_STATUS_ON  "  AND e.status = $7::text "
#define LIST_STATUS_OFF "  AND $7::text IS NULL "
#define LIST_RANGE(filters) \
	"  AND e.start_at < $5::timestamptz " \
	"  AND e.start_at > $4::timestamptz - interval '24 hours' " \
	"  AND (e.start_at >= $4::timestamptz OR e.end_at > $4::timestamptz) " \
	filters \
	"  AND (e.start_at, e.id) > ($8::timestamptz, $9::uuid) " \
	"ORDER BY e.start_at, e.id LIMIT $11::int"

/* one owner's calendar (agent list, PIN manager with ownerUserId):
 * ix_calendar_events_owner_start; $3 is unused but typed */
#define LIST_OWNER(select, filters) select \
	"e.owner_user_id = $2::uuid AND e.tenant_id = $1 " \
	"  AND $3::uuid[] IS NULL " LIST_RANGE(filters)
/* a tenant, optionally some owners (agency, PIN manager):
 * ix_calendar_events_tenant_start; $2 is unused but typed */
#define LIST_TENANT(select, filters) select \
	"e.tenant_id = $1 AND $2::uuid IS NULL " \
	"  AND ($3::uuid[] IS NULL OR e.owner_user_id = ANY ($3::uuid[])) " \
	LIST_RANGE(filters)

#define LIST_VARIANTS(N, N_S, N_K, N_KS, SCOPE, SEL) \
	{ N, SCOPE(SEL, LIST_KIND_OFF LIST_STATUS_OFF) }, \
	{ N_S, SCOPE(SEL, LIST_KIND_OFF LIST_STATUS_ON) }, \
	{ N_K, SCOPE(SEL, LIST_KIND_ON LIST_STATUS_OFF) }, \
	{ N_KS, SCOPE(SEL, LIST_KIND_ON LIST_STATUS_ON) }

/* [tenant scope * 8 + owners * 4 + kind * 2 + status] */
static const struct { const char *name, *sql; } list_stmts[16] = {
	LIST_VARIANTS("cal_events_list_owner", "cal_events_list_owner_s",
		"cal_events_list_owner_k", "cal_events_list_owner_ks",
		LIST_OWNER, LIST_SELECT_PLAIN),
	LIST_VARIANTS("cal_events_list_owner_u", "cal_events_list_owner_us",
		"cal_events_list_owner_uk", "cal_events_list_owner_uks",
		LIST_OWNER, LIST_SELECT_OWNERS),
	LIST_VARIANTS("cal_events_list_tenant", "cal_events_list_tenant_s",
		"cal_events_list_tenant_k", "cal_events_list_tenant_ks",
		LIST_TENANT, LIST_SELECT_PLAIN),
	LIST_VARIANTS("cal_events_list_tenant_u", "cal_events_list_tenant_us",
		"cal_events_list_tenant_uk", "cal_events_list_tenant_uks",
		LIST_TENANT, LIST_SELECT_OWNERS),
};

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
	pc_q_enum(r, "kind", 0, cd_event_kinds, &kind, e);
	pc_q_enum(r, "status", 0, cd_event_statuses, &status, e);
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
	params[7] = pc_time_param(cur_id[0] ? cur_us : from - CD_MAX_EVENT_US);
	params[8] = cur_id[0] ? pc_api->strdup(cur_id) : NIL_UUID;
	params[9] = scope->with_owner ? "true" : "false";
	params[10] = pc_api->sprintf("%lld", limit + 1);
	i = (scope->owner_user_id ? 0 : 8) + (scope->with_owner ? 4 : 0) +
		(kind ? 2 : 0) + (status ? 1 : 0);
	res = pc_exec_prepared_bin(list_stmts[i].name, list_stmts[i].sql, 11, params);
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
		cd_event_jt(&w, res, i);
		if (scope->with_owner) {
			PC_JT_K(&w, "owner");
			pc_jt_obj(&w);
			PC_JT_K(&w, "userId");
			pc_jt_col(&w, res, i, CD_EC_OWNER);
			PC_JT_K(&w, "displayName");
			pc_jt_col(&w, res, i, CD_EC__N);
			PC_JT_K(&w, "avatarUrl");
			pc_jt_col(&w, res, i, CD_EC__N + 1);
			pc_jt_end_obj(&w);
		}
		pc_jt_end_obj(&w);
	}
	pc_jt_end_arr(&w);
	PC_JT_K(&w, "nextCursor");
	pc_jt_str(&w, pc_next_cursor(res, limit, CD_EC_START, CD_EC_ID));
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
