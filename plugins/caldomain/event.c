/* event.c -- the CalendarEvent lifecycle on the database: create, status
 * transitions, reschedule, reminder materialisation (seed 000 rules 1-3)
 * and the event-* outbox messages.  Every function runs in the caller's
 * transaction; the caller begins and commits. */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "caldomain/event.h"

#define EV_AGG "CalendarEvent"

/* Rule 1 for a set of offsets: one row each, Skipped when DueAt <= now. */
static int insert_reminders(const char *event_id, int64_t start_us, const int *offsets,
		size_t n, int64_t now_us)
{
	char *ids = pc_api->strdup("{"), *offs = pc_api->strdup("{"),
		*dues = pc_api->strdup("{"), *sts = pc_api->strdup("{");
	const char *params[6];
	PGresult *res;
	size_t i;

	if (n == 0)
		return 0;
	for (i = 0; i < n; i++) {
		char id[37];
		int64_t due;
		enum cd_rem_status st = cd_rule_reminder(start_us, offsets[i], now_us, &due);
		const char *sep = i ? "," : "";

		if (!pc_instant_ok(due))
			return PC_E_RANGE;

		pc_api->uuid_v7(id);
		ids = pc_api->sprintf("%s%s%s", ids, sep, id);
		offs = pc_api->sprintf("%s%s%d", offs, sep, offsets[i]);
		dues = pc_api->sprintf("%s%s\"%s\"", dues, sep, pc_time_param(due));
		sts = pc_api->sprintf("%s%s%s", sts, sep, cd_rem_status_name(st));
	}
	params[0] = event_id;
	params[1] = pc_api->sprintf("%s}", ids);
	params[2] = pc_api->sprintf("%s}", offs);
	params[3] = pc_api->sprintf("%s}", dues);
	params[4] = pc_api->sprintf("%s}", sts);
	params[5] = pc_time_param(now_us);
	res = pc_api->db_exec_prepared("pc_rem_insert",
		"INSERT INTO calendar.event_reminders "
		"  (id, calendar_event_id, offset_minutes, due_at, status, created_at, updated_at) "
		"SELECT u.id, $1::uuid, u.off, u.due, u.st, $6::timestamptz, $6::timestamptz "
		"FROM unnest($2::uuid[], $3::int[], $4::timestamptz[], $5::text[]) "
		"  AS u(id, off, due, st)", 6, params);
	return pc_res_ok(res, PGRES_COMMAND_OK) ? 0 : PIN_ERR_DB;
}

int cd_reminders_rematerialise(const char *event_id, int64_t start_us,
		const char *offsets_pg, int64_t now_us)
{
	int offsets[CD_MAX_OFFSETS];
	size_t n = pc_pg_int_parse(offsets_pg, offsets, CD_MAX_OFFSETS);
	const char *params[1] = { event_id };
	PGresult *res;

	/* rule 2: Pending rows go, Sent/Skipped stay (history) */
	res = pc_api->db_exec_prepared("pc_rem_delete_pending",
		"DELETE FROM calendar.event_reminders "
		"WHERE calendar_event_id = $1 AND status = 'Pending'", 1, params);
	if (!pc_res_ok(res, PGRES_COMMAND_OK))
		return PIN_ERR_DB;
	return insert_reminders(event_id, start_us, offsets, n, now_us);
}

int cd_reminders_skip(const char *event_id, int64_t now_us)
{
	const char *params[2] = { event_id, pc_time_param(now_us) };
	PGresult *res = pc_api->db_exec_prepared("pc_rem_skip",
		"UPDATE calendar.event_reminders SET status = 'Skipped', updated_at = $2 "
		"WHERE calendar_event_id = $1 AND status = 'Pending'", 2, params);

	return pc_res_ok(res, PGRES_COMMAND_OK) ? 0 : PIN_ERR_DB;
}

/* Runs an UPDATE ... RETURNING CD_EVENT_COLS of one event: 0 with *row_out
 * or PIN_ERR_DB. */
static int update_event(const char *stmt, const char *sql, int n, const char *const *params,
		PGresult **row_out)
{
	PGresult *res = pc_api->db_exec_prepared(stmt, sql, n, params);

	if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
		return PIN_ERR_DB;
	*row_out = res;
	return 0;
}

/* An event-* message for the event row; key = aggregate id = EventId. */
static int publish(const char *topic, const char *event_type, const PGresult *row,
		json_object *payload)
{
	const char *id = PQgetvalue(row, 0, CD_EC_ID);

	return pc_outbox(topic, id, event_type, EV_AGG, id, payload);
}

/* ---------------------------------------------------------------- create */

int cd_event_create(const struct cd_event_new *ev, int64_t now_us, PGresult **row_out)
{
	static const int def_offsets[] = { 1440, 60 };
	const int *offsets = ev->has_offsets ? ev->offsets : def_offsets;
	size_t n = ev->has_offsets ? ev->n_offsets : 2;
	const char *params[23];
	char id[37];
	PGresult *res;
	int rc;

	if (cd_rule_event_instants(ev->start_us, ev->has_end, ev->end_us, offsets, n) != 0)
		return PC_E_RANGE;
	if (ev->id)
		snprintf(id, sizeof(id), "%s", ev->id);
	else
		pc_api->uuid_v7(id);
	params[0] = id;
	params[1] = ev->tenant_id;
	params[2] = ev->owner_user_id;
	params[3] = ev->kind;
	params[4] = ev->origin;
	params[5] = ev->priority ? ev->priority : "Normal";
	params[6] = ev->title;
	params[7] = ev->description;
	params[8] = ev->location;
	params[9] = pc_time_param(ev->start_us);
	params[10] = ev->has_end ? pc_time_param(ev->end_us) : NULL;
	params[11] = ev->time_zone;
	params[12] = ev->client_user_id;
	params[13] = ev->lead_id;
	params[14] = ev->deal_id;
	params[15] = ev->booking_id;
	params[16] = ev->project_id;
	params[17] = ev->property_object_id;
	params[18] = ev->appointment_id;
	params[19] = pc_pg_int_array(offsets, n);
	params[20] = ev->created_by_user_id;
	params[21] = pc_time_param(now_us);
	res = pc_api->db_exec_prepared("pc_event_insert",
		"INSERT INTO calendar.calendar_events AS e (id, tenant_id, owner_user_id, kind, "
		"  origin, status, priority, title, description, location, start_at, end_at, "
		"  time_zone, client_user_id, lead_id, deal_id, booking_id, project_id, "
		"  property_object_id, appointment_id, reminder_offsets_minutes, "
		"  created_by_user_id, created_at, updated_at, version) "
		"VALUES ($1, $2, $3, $4, $5, 'Planned', $6, $7, $8, $9, $10, $11, $12, $13, $14, "
		"  $15, $16, $17, $18, $19, $20::int[], $21, $22, $22, 1) "
		"RETURNING " CD_EVENT_COLS, 22, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
		return PIN_ERR_DB;
	rc = insert_reminders(id, ev->start_us, offsets, n, now_us);
	if (rc < 0)
		return rc;
	rc = publish(PC_TOPIC_EVENT_CREATED, "pin.calendar.event-created", res,
			cd_payload_event_created(res, 0));
	if (rc < 0)
		return rc;
	pc_api->metric_add("pin_calendar_events_created_total",
			pc_api->sprintf("origin=\"%s\"", ev->origin), 1);
	*row_out = res;
	return 0;
}

/* ------------------------------------------------------------------ lock */

int cd_event_lock(const char *id, const char *tenant_id, const char *owner_user_id,
		PGresult **row_out)
{
	const char *params[3] = { id, tenant_id, owner_user_id };
	PGresult *res = pc_api->db_exec_prepared("pc_event_lock",
		"SELECT " CD_EVENT_COLS " FROM calendar.calendar_events e "
		"WHERE e.id = $1 AND ($2::uuid IS NULL OR e.tenant_id = $2::uuid) "
		"  AND ($3::uuid IS NULL OR e.owner_user_id = $3::uuid) FOR UPDATE", 3, params);

	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) != 1)
		return PC_E_NOT_FOUND;
	*row_out = res;
	return 0;
}

/* ----------------------------------------------------------- transitions */

int cd_event_transition(const PGresult *locked, const char *action,
		const char *cancel_reason, int64_t now_us, PGresult **row_out)
{
	const char *from = PQgetvalue(locked, 0, CD_EC_STATUS);
	const char *id = PQgetvalue(locked, 0, CD_EC_ID);
	const char *to, *params[4];
	PGresult *res;
	int rc;

	if (cd_rule_transition(from, action, &to) != 0)
		return PC_E_TRANSITION;
	params[0] = id;
	params[1] = to;
	params[2] = strcmp(to, "Cancelled") == 0 ? cancel_reason : NULL;
	params[3] = pc_time_param(now_us);
	rc = update_event("pc_event_transition",
		"UPDATE calendar.calendar_events e SET status = $2::text, "
		"  cancel_reason = CASE WHEN $2::text = 'Cancelled' THEN $3::text ELSE e.cancel_reason END, "
		"  started_at = CASE WHEN $2::text = 'InProgress' THEN $4::timestamptz ELSE e.started_at END, "
		"  completed_at = CASE WHEN $2::text = 'Completed' THEN $4::timestamptz ELSE e.completed_at END, "
		"  cancelled_at = CASE WHEN $2::text = 'Cancelled' THEN $4::timestamptz ELSE e.cancelled_at END, "
		"  updated_at = $4::timestamptz, version = e.version + 1 "
		"WHERE e.id = $1 RETURNING " CD_EVENT_COLS, 4, params, &res);
	if (rc < 0)
		return rc;
	if (strcmp(to, "Completed") == 0 || strcmp(to, "Cancelled") == 0) {
		rc = cd_reminders_skip(id, now_us);     /* rule 3 */
		if (rc < 0)
			return rc;
	}
	rc = publish(PC_TOPIC_EVENT_STATUS_CHANGED, "pin.calendar.event-status-changed", res,
			cd_payload_event_status_changed(res, 0, from));
	if (rc < 0)
		return rc;
	*row_out = res;
	return 0;
}

int cd_event_reschedule(const PGresult *locked, int64_t new_start_us, int64_t now_us,
		PGresult **row_out, int *changed)
{
	const char *id = PQgetvalue(locked, 0, CD_EC_ID);
	int has_end = !PQgetisnull(locked, 0, CD_EC_END);
	int64_t old_start = pc_col_us(locked, 0, CD_EC_START);
	int64_t old_end = pc_col_us(locked, 0, CD_EC_END);
	int64_t new_end;
	const char *params[4];
	PGresult *res;
	int rc;

	if (changed)
		*changed = 0;
	if (!cd_rule_can_reschedule(PQgetvalue(locked, 0, CD_EC_STATUS)))
		return PC_E_TRANSITION;
	if (new_start_us == old_start) {
		/* not an actual move (seed 002 publishes "every actual reschedule"):
		 * no message, reminders and version stay */
		*row_out = (PGresult *)locked;
		return 0;
	}
	new_end = cd_rule_reschedule_end(old_start, has_end, old_end, new_start_us);
	{
		int offsets[CD_MAX_OFFSETS];
		size_t n = pc_pg_int_parse(PQgetvalue(locked, 0, CD_EC_OFFSETS), offsets,
				CD_MAX_OFFSETS);

		if (cd_rule_event_instants(new_start_us, has_end, new_end, offsets, n) != 0)
			return PC_E_RANGE;
	}
	params[0] = id;
	params[1] = pc_time_param(new_start_us);
	params[2] = has_end ? pc_time_param(new_end) : NULL;
	params[3] = pc_time_param(now_us);
	rc = update_event("pc_event_reschedule",
		"UPDATE calendar.calendar_events e SET start_at = $2::timestamptz, "
		"  end_at = $3::timestamptz, updated_at = $4::timestamptz, version = e.version + 1 "
		"WHERE e.id = $1 RETURNING " CD_EVENT_COLS, 4, params, &res);
	if (rc < 0)
		return rc;
	rc = cd_reminders_rematerialise(id, new_start_us,
			PQgetvalue(res, 0, CD_EC_OFFSETS), now_us);   /* rule 2 */
	if (rc < 0)
		return rc;
	rc = publish(PC_TOPIC_EVENT_RESCHEDULED, "pin.calendar.event-rescheduled", res,
			cd_payload_event_rescheduled(res, 0));
	if (rc < 0)
		return rc;
	*row_out = res;
	if (changed)
		*changed = 1;
	return 0;
}

/* --------------------------------------------------------- representations */

/* Who and what an event is: the head of the representation ("id") and of
 * every event-* payload ("eventId"). */
static json_object *event_identity(const char *id_key, const PGresult *res, int row)
{
	json_object *o = json_object_new_object();

	pc_json_col(o, id_key, res, row, CD_EC_ID);
	pc_json_col(o, "tenantId", res, row, CD_EC_TENANT);
	pc_json_col(o, "ownerUserId", res, row, CD_EC_OWNER);
	pc_json_col(o, "kind", res, row, CD_EC_KIND);
	pc_json_col(o, "origin", res, row, CD_EC_ORIGIN);
	return o;
}

/* When: startAt, endAt (null for a point event), timeZone. */
static void event_when(json_object *o, const PGresult *res, int row)
{
	pc_json_col_time(o, "startAt", res, row, CD_EC_START);
	pc_json_col_time(o, "endAt", res, row, CD_EC_END);
	pc_json_col(o, "timeZone", res, row, CD_EC_TZ);
}

/* The references to other contexts (ids only), same order everywhere. */
static void event_refs(json_object *o, const PGresult *res, int row)
{
	pc_json_col(o, "clientUserId", res, row, CD_EC_CLIENT);
	pc_json_col(o, "leadId", res, row, CD_EC_LEAD);
	pc_json_col(o, "dealId", res, row, CD_EC_DEAL);
	pc_json_col(o, "bookingId", res, row, CD_EC_BOOKING);
	pc_json_col(o, "projectId", res, row, CD_EC_PROJECT);
	pc_json_col(o, "propertyObjectId", res, row, CD_EC_PROPERTY);
	pc_json_col(o, "appointmentId", res, row, CD_EC_APPOINTMENT);
}

json_object *cd_event_json(const PGresult *res, int row)
{
	json_object *o = event_identity("id", res, row);

	pc_json_col(o, "status", res, row, CD_EC_STATUS);
	pc_json_col(o, "priority", res, row, CD_EC_PRIORITY);
	pc_json_col(o, "title", res, row, CD_EC_TITLE);
	pc_json_col(o, "description", res, row, CD_EC_DESCRIPTION);
	pc_json_col(o, "location", res, row, CD_EC_LOCATION);
	event_when(o, res, row);
	event_refs(o, res, row);
	json_object_object_add(o, "reminderOffsetsMinutes",
			pc_json_int_array(pc_col(res, row, CD_EC_OFFSETS)));
	pc_json_col(o, "cancelReason", res, row, CD_EC_CANCEL_REASON);
	pc_json_col_time(o, "startedAt", res, row, CD_EC_STARTED);
	pc_json_col_time(o, "completedAt", res, row, CD_EC_COMPLETED);
	pc_json_col_time(o, "cancelledAt", res, row, CD_EC_CANCELLED);
	pc_json_col_time(o, "createdAt", res, row, CD_EC_CREATED);
	pc_json_col_time(o, "updatedAt", res, row, CD_EC_UPDATED);
	pc_json_col_int(o, "version", res, row, CD_EC_VERSION);
	return o;
}

/* The same representation as text (sdk/jtext.h), without the closing '}'
 * (the list adds "owner"); the same keys in the same order as
 * cd_event_json -- tests/unit/test_jtext.c compares the two. */
void cd_event_jt(struct pc_jt *w, const PGresult *res, int row)
{
	static const struct pc_jt_field f[] = {
		PC_JT_F("id", CD_EC_ID, 's'),
		PC_JT_F("tenantId", CD_EC_TENANT, 's'),
		PC_JT_F("ownerUserId", CD_EC_OWNER, 's'),
		PC_JT_F("kind", CD_EC_KIND, 's'),
		PC_JT_F("origin", CD_EC_ORIGIN, 's'),
		PC_JT_F("status", CD_EC_STATUS, 's'),
		PC_JT_F("priority", CD_EC_PRIORITY, 's'),
		PC_JT_F("title", CD_EC_TITLE, 's'),
		PC_JT_F("description", CD_EC_DESCRIPTION, 's'),
		PC_JT_F("location", CD_EC_LOCATION, 's'),
		PC_JT_F("startAt", CD_EC_START, 't'),
		PC_JT_F("endAt", CD_EC_END, 't'),
		PC_JT_F("timeZone", CD_EC_TZ, 's'),
		PC_JT_F("clientUserId", CD_EC_CLIENT, 's'),
		PC_JT_F("leadId", CD_EC_LEAD, 's'),
		PC_JT_F("dealId", CD_EC_DEAL, 's'),
		PC_JT_F("bookingId", CD_EC_BOOKING, 's'),
		PC_JT_F("projectId", CD_EC_PROJECT, 's'),
		PC_JT_F("propertyObjectId", CD_EC_PROPERTY, 's'),
		PC_JT_F("appointmentId", CD_EC_APPOINTMENT, 's'),
		PC_JT_F("reminderOffsetsMinutes", CD_EC_OFFSETS, 'a'),
		PC_JT_F("cancelReason", CD_EC_CANCEL_REASON, 's'),
		PC_JT_F("startedAt", CD_EC_STARTED, 't'),
		PC_JT_F("completedAt", CD_EC_COMPLETED, 't'),
		PC_JT_F("cancelledAt", CD_EC_CANCELLED, 't'),
		PC_JT_F("createdAt", CD_EC_CREATED, 't'),
		PC_JT_F("updatedAt", CD_EC_UPDATED, 't'),
		PC_JT_F("version", CD_EC_VERSION, 'i'),
	};

	pc_jt_row(w, res, row, f, sizeof(f) / sizeof(f[0]));
}

json_object *cd_event_reminders_json(const char *event_id)
{
	static const struct pc_jfield f[] = {
		{ "id", "id", PC_J_STR },
		{ "offsetMinutes", "offset_minutes", PC_J_INT },
		{ "dueAt", "due_us", PC_J_TIME },
		{ "status", "status", PC_J_STR },
		{ "sentAt", "sent_us", PC_J_TIME },
	};
	const char *params[1] = { event_id };
	PGresult *res = pc_api->db_exec_prepared("pc_rem_list",
		"SELECT id, offset_minutes, calendar.us(due_at) AS due_us, status, "
		"  calendar.us(sent_at) AS sent_us "
		"FROM calendar.event_reminders WHERE calendar_event_id = $1 "
		"ORDER BY due_at, id", 1, params);

	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return NULL;
	return pc_colmap_array(f, PC_NFIELDS(f), res);
}

/* Payloads: camelCase of events.md, nulls present, no PII (no title,
 * description, location).  Every event-* contract opens with the same
 * identity fields and carries the same instants. */
static json_object *payload_identity(const PGresult *res, int row)
{
	return event_identity("eventId", res, row);
}

json_object *cd_payload_event_created(const PGresult *res, int row)
{
	json_object *o = payload_identity(res, row);

	pc_json_col(o, "status", res, row, CD_EC_STATUS);
	pc_json_col(o, "priority", res, row, CD_EC_PRIORITY);
	event_when(o, res, row);
	event_refs(o, res, row);
	pc_json_col(o, "createdByUserId", res, row, CD_EC_CREATED_BY);
	return o;
}

/* exactly seed 002: no status, no title/description/location */
json_object *cd_payload_event_rescheduled(const PGresult *res, int row)
{
	json_object *o = payload_identity(res, row);

	pc_json_col(o, "clientUserId", res, row, CD_EC_CLIENT);
	event_when(o, res, row);
	return o;
}

json_object *cd_payload_event_status_changed(const PGresult *res, int row,
		const char *previous_status)
{
	json_object *o = payload_identity(res, row);

	pc_json_col(o, "clientUserId", res, row, CD_EC_CLIENT);
	pc_json_str(o, "previousStatus", previous_status);
	pc_json_col(o, "status", res, row, CD_EC_STATUS);
	/* CancelReason is class Internal: carried in the payload, never logged */
	pc_json_col(o, "cancelReason", res, row, CD_EC_CANCEL_REASON);
	event_when(o, res, row);
	pc_json_col(o, "dealId", res, row, CD_EC_DEAL);
	pc_json_col(o, "bookingId", res, row, CD_EC_BOOKING);
	pc_json_col(o, "appointmentId", res, row, CD_EC_APPOINTMENT);
	return o;
}
