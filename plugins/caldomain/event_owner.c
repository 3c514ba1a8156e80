/* event_owner.c -- owner reassignment of a CalendarEvent (INV-CAL-8): the
 * deal consumer moves open events of a deal to the new executor and
 * publishes pin.calendar.event-owner-changed.v1 (events.md).  Runs in the
 * caller's transaction; the caller begins and commits. */
#include "config.h"
#include <string.h>
#include "sdk/sdk.h"
#include "caldomain/event.h"

json_object *cd_payload_event_owner_changed(const PGresult *res, int row,
		const char *previous_tenant_id, const char *previous_owner_user_id,
		const char *reason)
{
	json_object *o = json_object_new_object();

	pc_json_col(o, "eventId", res, row, CD_EC_ID);
	pc_json_col(o, "tenantId", res, row, CD_EC_TENANT);
	pc_json_str(o, "previousTenantId", previous_tenant_id);
	pc_json_col(o, "ownerUserId", res, row, CD_EC_OWNER);
	pc_json_str(o, "previousOwnerUserId", previous_owner_user_id);
	pc_json_col(o, "kind", res, row, CD_EC_KIND);
	pc_json_col(o, "origin", res, row, CD_EC_ORIGIN);
	pc_json_col_time(o, "startAt", res, row, CD_EC_START);
	pc_json_col_time(o, "endAt", res, row, CD_EC_END);
	pc_json_col(o, "timeZone", res, row, CD_EC_TZ);
	pc_json_col(o, "dealId", res, row, CD_EC_DEAL);
	pc_json_col(o, "bookingId", res, row, CD_EC_BOOKING);
	pc_json_str(o, "reason", reason);
	return o;
}

int cd_event_change_owner(const PGresult *locked, const char *tenant_id,
		const char *owner_user_id, const char *reason, int64_t now_us,
		PGresult **row_out, int *changed)
{
	const char *id = PQgetvalue(locked, 0, CD_EC_ID);
	const char *prev_tenant = PQgetvalue(locked, 0, CD_EC_TENANT);
	const char *prev_owner = PQgetvalue(locked, 0, CD_EC_OWNER);
	const char *params[4];
	PGresult *res;

	if (changed)
		*changed = 0;
	if (!tenant_id)
		tenant_id = prev_tenant;
	if (!strcmp(tenant_id, prev_tenant) && !strcmp(owner_user_id, prev_owner)) {
		*row_out = (PGresult *)locked;
		return 0;
	}
	params[0] = id;
	params[1] = tenant_id;
	params[2] = owner_user_id;
	params[3] = pc_time_param(now_us);
	res = pc_api->db_exec_prepared("pc_event_change_owner",
		"UPDATE calendar.calendar_events e SET tenant_id = $2::uuid, "
		"  owner_user_id = $3::uuid, updated_at = $4::timestamptz, version = e.version + 1 "
		"WHERE e.id = $1 RETURNING " CD_EVENT_COLS, 4, params);
	if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1)
		return PIN_ERR_DB;
	if (pc_outbox(PC_TOPIC_EVENT_OWNER_CHANGED, id, "pin.calendar.event-owner-changed",
			"CalendarEvent", id, cd_payload_event_owner_changed(res, 0,
				prev_tenant, prev_owner, reason)) < 0)
		return PIN_ERR_DB;
	*row_out = res;
	if (changed)
		*changed = 1;
	return 0;
}
