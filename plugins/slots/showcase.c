/* showcase.c -- GET /api/public/calendar/slots: the bookable slots
 * (Available, StartAt >= now + 60 min) with the agent's display name.
 *
 * The hottest read of the product: one prepared statement per driving filter
 * (agent / project / property object), each an index range scan over a
 * partial index on (driver, start_at, id) WHERE status = 'Available'
 * (migration 0200), keyset-paged on (start_at, id), the display name joined
 * from calendar.user_replicas in the same query (no N+1).  An agent whose
 * replica is not Active offers nothing (issue 12; the departure archives
 * the slots as well, this also hides a slot released meanwhile). */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "sdk/sdk.h"
#include "slots.h"

static const char *const slot_kinds[] = { "Showing", "Consultation", NULL };

#define SHOWCASE_COLS \
	"SELECT s.id, s.owner_user_id, s.kind, s.status, s.start_at, " \
	"       s.end_at, s.time_zone, s.auto_confirm, " \
	"       s.cancellation_cutoff_minutes, s.project_id, s.property_object_id, " \
	"       s.location, s.version, "
/* The optional filters, one statement per set of them: a filter that is
 * not asked for is "$n IS NULL", which the generic plan of a prepared
 * statement evaluates once per execution (a One-Time Filter), where
 * "($n IS NULL OR col = $n)" was evaluated for every slot row (~3 % of the
 * statement's time in PostgreSQL, doc/performance.md, read paths). */
#define F_AGENT_OFF "  AND $1::uuid IS NULL "
#define F_PROJ_ON   "  AND s.project_id = $2::uuid "
#define F_PROJ_OFF  "  AND $2::uuid IS NULL "
#define F_PROP_ON   "  AND s.property_object_id = $3::uuid "
#define F_PROP_OFF  "  AND $3::uuid IS NULL "
#define F_KIND_ON   "  AND s.kind = $4::text "
#define F_KIND_OFF  "  AND $4::text IS NULL "
#define SHOWCASE_RANGE \
	"  AND s.start_at >= $5::timestamptz AND s.start_at < $6::timestamptz " \
	"  AND (s.start_at, s.id) > ($7::timestamptz, $8::uuid) " \
	"ORDER BY s.start_at, s.id LIMIT $9::int"
/* project / property object (no agent): the slots' owners differ, the
 * replica is joined */
#define SHOWCASE_SQL(driver, filters) \
	SHOWCASE_COLS "u.display_name " \
	"FROM calendar.availability_slots s " \
	"LEFT JOIN calendar.user_replicas u ON u.user_id = s.owner_user_id " \
	"WHERE s.status = 'Available' AND " driver \
	"  AND (u.status IS NULL OR u.status = 'Active') " F_AGENT_OFF filters \
	SHOWCASE_RANGE
/* One agent: its replica is read once (two InitPlans), not once per slot row
 * -- the generic plan of the join above rescans user_replicas' primary key
 * for every row, 202 of the 209 buffer hits of a page of 100 (doc/performance.md,
 * read paths).  Same rows: no replica or an Active one shows the
 * slots, any other status hides them; no replica gives a null name. */
#define SHOWCASE_OWNER_SQL(filters) \
	SHOWCASE_COLS \
	"       (SELECT u.display_name FROM calendar.user_replicas u " \
	"        WHERE u.user_id = $1::uuid) " \
	"FROM calendar.availability_slots s " \
	"WHERE s.status = 'Available' AND s.owner_user_id = $1::uuid " \
	"  AND NOT EXISTS (SELECT 1 FROM calendar.user_replicas u " \
	"                  WHERE u.user_id = $1::uuid AND u.status <> 'Active') " \
	filters SHOWCASE_RANGE

struct showcase_stmt {
	const char *name, *sql;
};

/* agent given: [project * 4 + property * 2 + kind] */
static const struct showcase_stmt owner_stmts[8] = {
	{ "slots_showcase_owner", SHOWCASE_OWNER_SQL(F_PROJ_OFF F_PROP_OFF F_KIND_OFF) },
	{ "slots_showcase_owner_k", SHOWCASE_OWNER_SQL(F_PROJ_OFF F_PROP_OFF F_KIND_ON) },
	{ "slots_showcase_owner_o", SHOWCASE_OWNER_SQL(F_PROJ_OFF F_PROP_ON F_KIND_OFF) },
	{ "slots_showcase_owner_ok", SHOWCASE_OWNER_SQL(F_PROJ_OFF F_PROP_ON F_KIND_ON) },
	{ "slots_showcase_owner_p", SHOWCASE_OWNER_SQL(F_PROJ_ON F_PROP_OFF F_KIND_OFF) },
	{ "slots_showcase_owner_pk", SHOWCASE_OWNER_SQL(F_PROJ_ON F_PROP_OFF F_KIND_ON) },
	{ "slots_showcase_owner_po", SHOWCASE_OWNER_SQL(F_PROJ_ON F_PROP_ON F_KIND_OFF) },
	{ "slots_showcase_owner_pok", SHOWCASE_OWNER_SQL(F_PROJ_ON F_PROP_ON F_KIND_ON) },
};
/* project given, no agent: [property * 2 + kind] */
#define PROJ_DRIVER "s.project_id = $2::uuid"
static const struct showcase_stmt project_stmts[4] = {
	{ "slots_showcase_project", SHOWCASE_SQL(PROJ_DRIVER, F_PROP_OFF F_KIND_OFF) },
	{ "slots_showcase_project_k", SHOWCASE_SQL(PROJ_DRIVER, F_PROP_OFF F_KIND_ON) },
	{ "slots_showcase_project_o", SHOWCASE_SQL(PROJ_DRIVER, F_PROP_ON F_KIND_OFF) },
	{ "slots_showcase_project_ok", SHOWCASE_SQL(PROJ_DRIVER, F_PROP_ON F_KIND_ON) },
};
/* property object only: [kind] */
#define PROP_DRIVER "s.property_object_id = $3::uuid"
static const struct showcase_stmt property_stmts[2] = {
	{ "slots_showcase_property", SHOWCASE_SQL(PROP_DRIVER, F_PROJ_OFF F_KIND_OFF) },
	{ "slots_showcase_property_k", SHOWCASE_SQL(PROP_DRIVER, F_PROJ_OFF F_KIND_ON) },
};

/* One slot of the page as JSON text (sdk/jtext.h pc_jt_row): the bytes
 * the json-c tree of the first version printed (tests/integration pin
 * them).  The result is binary (pc_exec_prepared_bin: the backend skips
 * uuid_out and int8out, the writer copies no escaped uuid text); the column
 * writers read either format. */
static const struct pc_jt_field slot_fields[] = {
	PC_JT_F("id", 0, 's'),
	PC_JT_F("ownerUserId", 1, 's'),
	PC_JT_F("kind", 2, 's'),
	PC_JT_F("status", 3, 's'),
	PC_JT_F("startAt", 4, 't'),
	PC_JT_F("endAt", 5, 't'),
	PC_JT_F("timeZone", 6, 's'),
	PC_JT_F("autoConfirm", 7, 'b'),
	PC_JT_F("cancellationCutoffMinutes", 8, 'i'),
	PC_JT_F("projectId", 9, 's'),
	PC_JT_F("propertyObjectId", 10, 's'),
	PC_JT_F("location", 11, 's'),
	PC_JT_F("version", 12, 'i'),
	PC_JT_F("agent", -1, '{'),
	PC_JT_F("userId", 1, 's'),
	PC_JT_F("displayName", 13, 's'),
	PC_JT_END,
};

static void public_slot_jt(struct pc_jt *w, const PGresult *res, int row)
{
	pc_jt_row(w, res, row, slot_fields, sizeof(slot_fields) / sizeof(slot_fields[0]));
	pc_jt_end_obj(w);
}

/* responds {items: [...] (at most limit), nextCursor} of a page read with
 * LIMIT limit + 1, as JSON text; PIN_ERR when out of memory */
static int public_page(struct pin_req *r, const PGresult *res, long long limit)
{
	struct pc_jt w;
	int n = PQntuples(res);

	pc_jt_init(&w, 256 + 512 * (size_t)(n < limit ? n : limit));
	pc_jt_obj(&w);
	PC_JT_K(&w, "items");
	pc_jt_arr(&w);
	for (int i = 0; i < n && i < limit; i++)
		public_slot_jt(&w, res, i);
	pc_jt_end_arr(&w);
	PC_JT_K(&w, "nextCursor");
	pc_jt_str(&w, pc_next_cursor(res, limit, 4, 0));
	pc_jt_end_obj(&w);
	return pc_jt_respond(r, 200, &w);
}

int slot_h_showcase(struct pin_req *r, void *ud)
{
	struct pc_errs e;
	const char *agent = NULL, *project = NULL, *property = NULL, *kind = NULL;
	const char *p[9];
	int64_t now = pc_api->now_us(), from, to, cur_us = 0, lower;
	long long limit;
	char cur_id[37], lim[24];
	const struct showcase_stmt *st;
	PGresult *res;
	int rc;

	(void)ud;
	pc_errs_init(&e);
	pc_q_uuid(r, "agentUserId", 0, &agent, &e);
	pc_q_uuid(r, "projectId", 0, &project, &e);
	pc_q_uuid(r, "propertyObjectId", 0, &property, &e);
	pc_q_enum(r, "kind", 0, slot_kinds, &kind, &e);
	rc = slot_list_params(r, now, &from, &to, &limit, &cur_us, cur_id, &e);
	if (rc == PC_E_RESPONDED) {
		rc = PIN_OK;
		goto out;
	}
	if (!agent && !project && !property) {
		pc_errs_add(&e, "agentUserId",
			"one of agentUserId, projectId, propertyObjectId is required");
		rc = pc_errs_respond(r, 422, "VALIDATION_FAILED",
			"the showcase needs an agent, a project or a property object", &e);
		goto out;
	}
	/* bookable: StartAt >= now + lead time */
	lower = now + (int64_t)SLOT_LEAD_MIN * 60 * 1000000;
	if (from > lower)
		lower = from;
	snprintf(lim, sizeof(lim), "%lld", limit + 1);
	p[0] = agent;
	p[1] = project;
	p[2] = property;
	p[3] = kind;
	p[4] = pc_time_param(lower);
	p[5] = pc_time_param(to);
	p[6] = cur_id[0] ? pc_time_param(cur_us) : p[4];
	p[7] = cur_id[0] ? cur_id : "00000000-0000-0000-0000-000000000000";
	p[8] = lim;
	if (agent)
		st = &owner_stmts[(project ? 4 : 0) + (property ? 2 : 0) + (kind ? 1 : 0)];
	else if (project)
		st = &project_stmts[(property ? 2 : 0) + (kind ? 1 : 0)];
	else
		st = &property_stmts[kind ? 1 : 0];
	res = pc_exec_prepared_bin(st->name, st->sql, 9, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK)) {
		rc = PIN_ERR_DB;
		goto out;
	}
	pc_api->metric_add("pin_calendar_showcase_requests_total", NULL, 1);
	rc = public_page(r, res, limit);
out:
	pc_errs_free(&e);
	return rc;
}
