/* events_api.c -- agent area: /api/v1/agent/calendar/events (api.md).
 * Owner scoping: every query is restricted to (tenant_id, owner_user_id) of
 * the caller, so foreign ids answer 404 EVENT_NOT_FOUND (INV-CAL-5). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "calendar.h"

#define NOT_FOUND "EVENT_NOT_FOUND"
#define EV_PATH "/api/v1/agent/calendar/events/"

static const struct pin_principal *me(struct pin_req *r)
{
	return pc_api->req_principal(r);
}

/* Maps a negative result to a response after rolling back. */
static int fail(struct pin_req *r, int rc, struct pc_errs *e)
{
	pc_api->db_rollback();
	switch (rc) {
	case PC_E_REPLAYED:
	case PC_E_RESPONDED:
		return PIN_OK;
	case PC_E_NOT_FOUND:
		return pc_problem(r, 404, NOT_FOUND, "no such event");
	case PC_E_TRANSITION:
		return pc_problem(r, 409, "INVALID_STATUS_TRANSITION",
				"the event's status does not allow this operation");
	case PC_E_VERSION:
		return pc_problem(r, 409, "VERSION_CONFLICT",
				"the event was changed meanwhile (If-Match)");
	case PC_E_MANAGED:
		return pc_problem(r, 409, "EVENT_MANAGED_BY_SOURCE",
				"this event is managed by its source (appointment or CRM booking)");
	case PC_E_RANGE:       /* end, a reminder's DueAt out of range (issue 9) */
		if (e->n == 0)
			pc_errs_add(e, "startAt", PC_INSTANT_RANGE_MSG);
		/* fall through */
	case PC_E_VALIDATION:
		return pc_errs_respond(r, 422, "VALIDATION_FAILED",
				"the request has invalid fields", e);
	default:
		return rc < 0 ? rc : PIN_ERR;
	}
}

/* Card: the event with its reminders; NULL when the reminders cannot be
 * read (a database error: never answer a card without them). */
static json_object *card(const PGresult *row)
{
	json_object *o;
	json_object *rem = cd_event_reminders_json(PQgetvalue(row, 0, CD_EC_ID));

	if (!rem)
		return NULL;
	o = cd_event_json(row, 0);
	json_object_object_add(o, "reminders", rem);
	return o;
}

static void set_etag(struct pin_req *r, const PGresult *row)
{
	pc_api->set_header(r, "ETag", pc_api->sprintf("\"%s\"",
			PQgetvalue(row, 0, CD_EC_VERSION)));
}

/*
 * The common prologue of writes to one event, after the body was read into
 * e: the field errors, If-Match, begin, Idempotency-Key, lock the caller's
 * own event, INV-CAL-4, the If-Match version.  0 with *row, or negative
 * (answer it with fail(); PC_E_RESPONDED after a bad If-Match).
 */
static int write_prologue(struct pin_req *r, const char *id, const struct pc_errs *e,
		struct pc_idem *idem, PGresult **row)
{
	const struct pin_principal *p = me(r);
	int have_ver, ver = 0, rc;

	if (e->n)
		return PC_E_VALIDATION;
	if (pc_if_match(r, &have_ver, &ver) < 0)
		return PC_E_RESPONDED;
	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	rc = pc_idem_begin(r, idem);
	if (rc < 0)
		return rc;
	rc = cd_event_lock(id, p->tenant_id, p->sub, row);
	if (rc < 0)
		return rc;
	if (strcmp(PQgetvalue(*row, 0, CD_EC_ORIGIN), "Manual") != 0)
		return PC_E_MANAGED;
	if (have_ver && ver != atoi(PQgetvalue(*row, 0, CD_EC_VERSION)))
		return PC_E_VERSION;
	return 0;
}

/* Epilogue: store the idempotent response, commit, answer 200 with the card. */
static int write_epilogue(struct pin_req *r, struct pc_idem *idem, PGresult *row)
{
	json_object *body = card(row);
	int rc;

	if (!body) {
		pc_api->db_rollback();
		return PIN_ERR_DB;
	}
	rc = pc_idem_store(idem, 200, body, NULL);
	if (rc < 0 || pc_api->db_commit() != 0) {
		json_object_put(body);
		pc_api->db_rollback();
		return PIN_ERR_DB;
	}
	set_etag(r, row);
	return pc_api->respond_json(r, 200, body);
}

/* ------------------------------------------------------------------- list */

int cal_events_list(struct pin_req *r, void *ud)
{
	const struct pin_principal *p = me(r);
	struct cal_list_scope scope = { p->tenant_id, p->sub, NULL, 0 };
	struct pc_errs e;

	(void)ud;
	pc_errs_init(&e);
	return cal_list_events(r, &scope, &e);
}

/* ------------------------------------------------------------------- card */

int cal_events_get(struct pin_req *r, void *ud)
{
	const struct pin_principal *p = me(r);
	const char *id = pc_path_uuid(r, "id");
	const char *params[3];
	PGresult *res;
	json_object *body;

	(void)ud;
	if (!id)
		return PIN_OK;
	params[0] = id;
	params[1] = p->tenant_id;
	params[2] = p->sub;
	res = pc_api->db_exec_prepared("cal_event_get",
		"SELECT " CD_EVENT_COLS " FROM calendar.calendar_events e "
		"WHERE e.id = $1 AND e.tenant_id = $2 AND e.owner_user_id = $3", 3, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) != 1)
		return pc_problem(r, 404, NOT_FOUND, "no such event");
	body = card(res);
	if (!body)
		return PIN_ERR_DB;
	set_etag(r, res);
	return pc_api->respond_json(r, 200, body);
}

/* ----------------------------------------------------------------- create */

static const char *const create_fields[] = { "kind", "title", "description", "location",
	"startAt", "endAt", "timeZone", "priority", "reminderOffsetsMinutes", "clientUserId",
	"leadId", "dealId", "projectId", "propertyObjectId", NULL };

/* The create body into *ev (Origin Manual) and *tz; errors collected. */
static void parse_create(json_object *b, struct cd_event_new *ev, const char **tz,
		struct pc_errs *e)
{
	pc_check_fields(b, create_fields, e);
	pc_get_enum(b, "kind", 1, cd_event_kinds, &ev->kind, e);
	pc_get_string(b, "title", 1, 1, 200, &ev->title, e);
	pc_get_string(b, "description", 0, 0, 4000, &ev->description, e);
	pc_get_string(b, "location", 0, 0, 500, &ev->location, e);
	pc_get_instant(b, "startAt", 1, &ev->start_us, e);
	ev->has_end = pc_get_instant(b, "endAt", 0, &ev->end_us, e) == PC_SET;
	pc_get_string(b, "timeZone", 1, 1, 64, tz, e);
	pc_get_enum(b, "priority", 0, cd_event_priorities, &ev->priority, e);
	ev->has_offsets = pc_get_int_array(b, "reminderOffsetsMinutes", 0, CD_MAX_OFFSETS,
			CD_OFFSET_MIN, CD_OFFSET_MAX, 1, ev->offsets, &ev->n_offsets, e) == PC_SET;
	pc_get_uuid(b, "clientUserId", 0, &ev->client_user_id, e);
	pc_get_uuid(b, "leadId", 0, &ev->lead_id, e);
	pc_get_uuid(b, "dealId", 0, &ev->deal_id, e);
	pc_get_uuid(b, "projectId", 0, &ev->project_id, e);
	pc_get_uuid(b, "propertyObjectId", 0, &ev->property_object_id, e);
}

/* INV-CAL-1 and the EndAt rule of a well-formed new event. */
static void create_rules(struct cd_event_new *ev, struct pc_errs *e)
{
	struct cd_kind_facts f;
	const char *msg, *field;

	ev->origin = "Manual";
	memset(&f, 0, sizeof(f));
	f.kind = ev->kind;
	f.origin = ev->origin;
	f.has_end = ev->has_end;
	f.has_deal = ev->deal_id != NULL;
	f.has_client = ev->client_user_id != NULL;
	msg = cd_rule_kind_matrix(&f, &field);
	if (msg)
		pc_errs_add(e, field, msg);
	msg = cd_rule_span(ev->start_us, ev->has_end, ev->end_us);
	if (msg)
		pc_errs_add(e, "endAt", msg);
}

int cal_events_create(struct pin_req *r, void *ud)
{
	const struct pin_principal *p = me(r);
	struct cd_event_new ev;
	struct pc_errs e;
	struct pc_idem idem;
	json_object *b, *body;
	const char *tz = NULL;
	PGresult *row;
	char *location;
	int rc, tz_unknown = 0;

	(void)ud;
	pc_errs_init(&e);
	memset(&ev, 0, sizeof(ev));
	b = pc_body(r, &e);
	if (!b)
		return fail(r, PC_E_VALIDATION, &e);
	parse_create(b, &ev, &tz, &e);
	if (e.n == 0)
		create_rules(&ev, &e);
	/* the zone is checked whatever else is wrong, so a 422 names every
	 * invalid field; alone it is UNKNOWN_TIME_ZONE (sdk/problem.h) */
	if (tz && (rc = pc_tz_lookup(tz, &ev.time_zone)) < 0) {
		if (rc != PC_E_TZ)
			return rc;
		tz_unknown = 1;
		pc_errs_add(&e, "timeZone", PC_TZ_UNKNOWN_MSG);
	}
	if (e.n)
		return pc_errs_respond_422(r, "the request has invalid fields", &e, tz_unknown);

	ev.tenant_id = p->tenant_id;
	ev.owner_user_id = p->sub;
	ev.created_by_user_id = p->sub;
	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	rc = pc_idem_begin(r, &idem);
	if (rc < 0)
		return fail(r, rc, &e);
	rc = cd_event_create(&ev, pc_api->now_us(), &row);
	if (rc < 0)
		return fail(r, rc, &e);
	body = card(row);
	if (!body)
		return fail(r, PIN_ERR_DB, &e);
	location = pc_api->sprintf(EV_PATH "%s", PQgetvalue(row, 0, CD_EC_ID));
	if (pc_idem_store(&idem, 201, body, location) < 0 || pc_api->db_commit() != 0) {
		json_object_put(body);
		pc_api->db_rollback();
		return PIN_ERR_DB;
	}
	pc_api->set_header(r, "Location", location);
	set_etag(r, row);
	return pc_api->respond_json(r, 201, body);
}

/* ------------------------------------------------------------------ PATCH */

static const char *const patch_fields[] = { "title", "description", "location",
	"priority", "reminderOffsetsMinutes", "clientUserId", "dealId", "leadId",
	"projectId", "propertyObjectId", NULL };

struct set_clause {
	char sql[1024];
	const char *params[16];
	int n;
};

static void add_set(struct set_clause *s, const char *column, const char *cast,
		const char *value)
{
	size_t len = strlen(s->sql);

	s->params[s->n] = value;
	s->n++;
	/* column names come from the fixed list above, values are parameters */
	snprintf(s->sql + len, sizeof(s->sql) - len, ", %s = $%d%s", column, s->n, cast);
}

/* The PATCH body into SET clauses (s) and *new_offsets ("{...}" or NULL);
 * errors collected. */
static void parse_patch(json_object *b, struct set_clause *s, const char **new_offsets,
		struct pc_errs *e)
{
	static const struct { const char *field, *column; size_t max; } texts[] = {
		{ "description", "description", 4000 }, { "location", "location", 500 } };
	static const struct { const char *field, *column; } uuids[] = {
		{ "clientUserId", "client_user_id" }, { "dealId", "deal_id" },
		{ "leadId", "lead_id" }, { "projectId", "project_id" },
		{ "propertyObjectId", "property_object_id" } };
	int offsets[CD_MAX_OFFSETS];
	const char *v = NULL;
	json_object *t;
	enum pc_field st;
	size_t i, n_off = 0;

	pc_check_fields(b, patch_fields, e);
	if (pc_get_string(b, "title", 0, 1, 200, &v, e) == PC_SET)
		add_set(s, "title", "", v);
	for (i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		st = pc_get_string(b, texts[i].field, 0, 0, texts[i].max, &v, e);
		if (st == PC_SET || st == PC_NULL)
			add_set(s, texts[i].column, "", st == PC_SET ? v : NULL);
	}
	if (json_object_object_get_ex(b, "title", &t) && t == NULL)
		pc_errs_add(e, "title", "must not be null");
	if (pc_get_enum(b, "priority", 0, cd_event_priorities, &v, e) == PC_SET)
		add_set(s, "priority", "", v);
	for (i = 0; i < sizeof(uuids) / sizeof(uuids[0]); i++) {
		st = pc_get_uuid(b, uuids[i].field, 0, &v, e);
		if (st == PC_SET || st == PC_NULL)
			add_set(s, uuids[i].column, "::uuid", st == PC_SET ? v : NULL);
	}
	st = pc_get_int_array(b, "reminderOffsetsMinutes", 0, CD_MAX_OFFSETS,
			CD_OFFSET_MIN, CD_OFFSET_MAX, 1, offsets, &n_off, e);
	if (st == PC_NULL)
		pc_errs_add(e, "reminderOffsetsMinutes", "must be an array (use [])");
	if (st == PC_SET)
		*new_offsets = pc_pg_int_array(offsets, n_off);
}

/* The UPDATE of a locked, changeable event with the SET clauses s (and the
 * reminders of new offsets, rule 2).  0 with *res, negative. */
static int patch_apply(const char *id, struct set_clause *s, const char *new_offsets,
		PGresult **res)
{
	char *sql;

	s->params[s->n] = pc_time_param(pc_api->now_us());
	s->n++;
	sql = pc_api->sprintf("UPDATE calendar.calendar_events e SET updated_at = $%d, "
			"version = e.version + 1%s WHERE e.id = $1 RETURNING " CD_EVENT_COLS,
			s->n, s->sql);
	*res = pc_api->db_exec(sql, s->n, s->params);
	if (!pc_res_ok(*res, PGRES_TUPLES_OK) || PQntuples(*res) != 1)
		return PIN_ERR_DB;
	if (!new_offsets)
		return 0;
	return cd_reminders_rematerialise(id, pc_col_us(*res, 0, CD_EC_START),
			new_offsets, pc_api->now_us());
}

int cal_events_patch(struct pin_req *r, void *ud)
{
	struct pc_errs e;
	struct pc_idem idem;
	struct set_clause s;
	json_object *b;
	const char *id, *new_offsets = NULL;
	int rc;
	PGresult *row, *res;

	(void)ud;
	pc_errs_init(&e);
	memset(&s, 0, sizeof(s));
	if (!(id = pc_path_uuid(r, "id")))
		return PIN_OK;
	b = pc_body(r, &e);
	if (!b)
		return fail(r, PC_E_VALIDATION, &e);
	s.params[0] = id;
	s.n = 1;
	parse_patch(b, &s, &new_offsets, &e);
	rc = write_prologue(r, id, &e, &idem, &row);
	if (rc < 0)
		return fail(r, rc, &e);
	if (!cd_rule_can_reschedule(PQgetvalue(row, 0, CD_EC_STATUS)))
		return fail(r, PC_E_TRANSITION, &e);   /* terminal events are read only */
	if (new_offsets && strcmp(new_offsets, PQgetvalue(row, 0, CD_EC_OFFSETS)) == 0)
		new_offsets = NULL;                     /* unchanged: keep the rows */
	if (new_offsets)
		add_set(&s, "reminder_offsets_minutes", "::int[]", new_offsets);
	if (s.sql[0] == '\0')          /* {}: nothing to change, version stays */
		return write_epilogue(r, &idem, row);
	if ((rc = patch_apply(id, &s, new_offsets, &res)) < 0) {
		if (rc == PC_E_RANGE)
			pc_errs_add(&e, "reminderOffsetsMinutes", PC_INSTANT_RANGE_MSG);
		return fail(r, rc, &e);
	}
	return write_epilogue(r, &idem, res);
}

/* ------------------------------------------------- reschedule, transitions */

/*
 * POST .../events/{id}/<action>: the body (strict fields; optional for
 * transitions, so no body = {}), If-Match, the write prologue, then the
 * domain function, the epilogue.  action "reschedule" or a transition.
 */
static int event_action(struct pin_req *r, const char *action)
{
	static const char *const reschedule_fields[] = { "startAt", NULL };
	static const char *const cancel_fields[] = { "reason", NULL };
	static const char *const no_fields[] = { NULL };
	int reschedule = strcmp(action, "reschedule") == 0;
	int cancel = strcmp(action, "cancel") == 0;
	struct pc_errs e;
	struct pc_idem idem;
	json_object *b;
	const char *id, *reason = NULL;
	int64_t start = 0;
	int rc;
	PGresult *row, *res;

	pc_errs_init(&e);
	if (!(id = pc_path_uuid(r, "id")))
		return PIN_OK;
	b = pc_body(r, &e);
	if (b) {
		pc_check_fields(b, reschedule ? reschedule_fields :
				cancel ? cancel_fields : no_fields, &e);
		if (reschedule)
			pc_get_instant(b, "startAt", 1, &start, &e);
		if (cancel)
			pc_get_string(b, "reason", 0, 0, 500, &reason, &e);
	}
	rc = write_prologue(r, id, &e, &idem, &row);
	if (rc < 0)
		return fail(r, rc, &e);
	if (reschedule)
		rc = cd_event_reschedule(row, start, pc_api->now_us(), &res, NULL);
	else
		rc = cd_event_transition(row, action, reason, pc_api->now_us(), &res);
	if (rc < 0)
		return fail(r, rc, &e);
	return write_epilogue(r, &idem, res);
}

/* POST /events/{id}/<action>: ud is the action's name (calendar.c). */
int cal_events_action(struct pin_req *r, void *ud)
{
	return event_action(r, ud);
}
