/* slots.c -- slots.so: availability batches (publish / preview), the agent's
 * slot management and the public showcase.  Registration and the shared slot
 * representation live here; one file per concern next to it. */
#include "config.h"
#include <stdio.h>
#include <string.h>
#include "sdk/sdk.h"
#include "slots.h"
#include "caldomain/schema.h"


static const struct pc_jfield slot_fields[] = {
	{ "id", "id", PC_J_STR },
	{ "batchId", "batch_id", PC_J_STR },
	{ "ownerUserId", "owner_user_id", PC_J_STR },
	{ "tenantId", "tenant_id", PC_J_STR },
	{ "kind", "kind", PC_J_STR },
	{ "status", "status", PC_J_STR },
	{ "startAt", "start_us", PC_J_TIME },
	{ "endAt", "end_us", PC_J_TIME },
	{ "timeZone", "time_zone", PC_J_STR },
	{ "autoConfirm", "auto_confirm", PC_J_BOOL },
	{ "cancellationCutoffMinutes", "cancellation_cutoff_minutes", PC_J_INT },
	{ "projectId", "project_id", PC_J_STR },
	{ "propertyObjectId", "property_object_id", PC_J_STR },
	{ "location", "location", PC_J_STR },
	{ "version", "version", PC_J_INT },
	/* issue 32: why an Archived slot was archived ("time_off"), else null */
	{ "archiveReason", "archive_reason", PC_J_STR },
};

json_object *slot_json(const PGresult *res, int row)
{
	return pc_row_json(slot_fields, PC_NFIELDS(slot_fields), res, row);
}

json_object *slot_page_json(const PGresult *res, long long limit)
{
	return pc_page_json_map(res, limit, "start_us", "id", slot_fields,
			PC_NFIELDS(slot_fields));
}

int slot_tx_begin(struct pin_req *r, struct pc_idem *idem, int *in_tx)
{
	int rc;

	*in_tx = 0;
	if ((rc = pc_api->db_begin()) < 0)
		return rc;
	rc = pc_idem_begin(r, idem);
	if (rc == 0) {
		*in_tx = 1;
		return 0;
	}
	pc_api->db_rollback();
	return rc == PC_E_REPLAYED || rc == PC_E_RESPONDED ? PC_E_RESPONDED : rc;
}

int slot_tx_commit_respond(struct pin_req *r, const struct pc_idem *idem, int *in_tx,
		int status, json_object **body, const char *etag_version)
{
	int rc;

	if ((rc = pc_idem_store(idem, status, *body, NULL)) < 0)
		return rc;
	rc = pc_api->db_commit();
	*in_tx = 0;
	if (rc < 0)
		return rc;
	if (etag_version)
		pc_api->set_header(r, "ETag", pc_api->sprintf("\"%s\"", etag_version));
	rc = pc_api->respond_json(r, status, *body);
	*body = NULL;
	return rc;
}

#define AGENT_ACTORS (PIN_ACTOR_AGENT | PIN_ACTOR_CONSULTANT)
#define PERM "calendar.slots.manage"

static const struct pin_route routes[] = {
	{ "POST", "/api/v1/agent/calendar/slots/batches", AGENT_ACTORS, PERM, 1,
		slot_h_publish, NULL, NULL },
	{ "POST", "/api/v1/agent/calendar/slots/batches/preview", AGENT_ACTORS, PERM, 1,
		slot_h_preview, NULL, NULL },
	{ "POST", "/api/v1/agent/calendar/slots/batches/{batchId}/archive", AGENT_ACTORS,
		PERM, 1, slot_h_archive_batch, NULL, NULL },
	{ "GET", "/api/v1/agent/calendar/slots", AGENT_ACTORS, PERM, 1,
		slot_h_list, NULL, NULL },
	{ "POST", "/api/v1/agent/calendar/slots/{id}/archive", AGENT_ACTORS, PERM, 1,
		slot_h_archive, NULL, NULL },
	/* issue 32 item 4: the agent's absences (timeoff.c) */
	{ "POST", "/api/v1/agent/calendar/time-off", AGENT_ACTORS, PERM, 1,
		slot_h_time_off_create, NULL, NULL },
	{ "GET", "/api/v1/agent/calendar/time-off", AGENT_ACTORS, PERM, 1,
		slot_h_time_off_list, NULL, NULL },
	{ "GET", "/api/v1/agent/calendar/time-off/{id}", AGENT_ACTORS, PERM, 1,
		slot_h_time_off_get, NULL, NULL },
	{ "PATCH", "/api/v1/agent/calendar/time-off/{id}", AGENT_ACTORS, PERM, 1,
		slot_h_time_off_patch, NULL, NULL },
	{ "DELETE", "/api/v1/agent/calendar/time-off/{id}", AGENT_ACTORS, PERM, 1,
		slot_h_time_off_delete, NULL, NULL },
	{ "GET", "/api/public/calendar/slots", PIN_ACTOR_PUBLIC, NULL, 0,
		slot_h_showcase, NULL, NULL },
	{ "GET", "/api/v1/pin-manager/calendar/slots", PIN_ACTOR_PIN_MANAGER,
		"calendar.team.view", 0, slot_h_pinmgr_list, NULL, NULL },
};

static int slot_init(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	pc_init(api);
	if (pc_idem_table(CD_IDEM_TABLE, err, errlen) < 0)
		return PIN_ERR;
	if (pc_register_routes(reg, routes, sizeof(routes) / sizeof(routes[0]),
			"slots", err, errlen) < 0)
		return PIN_ERR;
	/* the public showcase reads from a standby when the host has one
	 * (pg_dsn_read): a slot booked a moment ago may show for up to
	 * read_max_lag_s; the booking itself checks on the primary */
	if (PIN_API_HAS(reg, route_replica_ok) &&
	    reg->route_replica_ok(reg, "GET", "/api/public/calendar/slots") < 0) {
		snprintf(err, errlen, "slots: cannot mark the showcase for the replica");
		return PIN_ERR;
	}
	return 0;
}

PIN_PLUGIN_DEFINE("slots", PACKAGE_VERSION, slot_init, NULL)
