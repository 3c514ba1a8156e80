/* appointments.c -- appointments.so: registration, error mapping and the
 * write skeleton shared by every transition endpoint. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "http.h"
#include "caldomain/schema.h"

/* Domain refusals answered with a plain problem (apt_fail). */
static const struct apt_problem {
	int rc, status;
	const char *code, *detail;
} problems[] = {
	{ PC_E_NOT_FOUND, 404, APT_NOT_FOUND, "no such appointment" },
	{ PC_E_TRANSITION, 409, "INVALID_STATUS_TRANSITION",
		"the appointment's status does not allow this operation" },
	{ CD_APT_E_DEADLINE, 409, "INVALID_STATUS_TRANSITION",
		"the confirmation deadline has passed" },
	{ CD_APT_E_STARTED, 409, "INVALID_STATUS_TRANSITION",
		"the appointment has started; complete it instead" },
	{ PC_E_VERSION, 409, "VERSION_CONFLICT",
		"the appointment was changed meanwhile (If-Match)" },
	{ CD_APT_E_SLOT_NOT_FOUND, 404, "SLOT_NOT_FOUND", "no such slot" },
	{ CD_APT_E_SLOT_BOOKED, 409, "SLOT_ALREADY_BOOKED",
		"the slot has just been booked; choose another one" },
	{ CD_APT_E_SLOT_UNAVAILABLE, 409, "SLOT_NOT_AVAILABLE", "the slot is no longer offered" },
	{ CD_APT_E_LEAD_TIME, 422, "LEAD_TIME_NOT_MET",
		"the slot starts in less than 60 minutes" },
	{ CD_APT_E_DUPLICATE, 409, "APPOINTMENT_DUPLICATE_ACTIVE",
		"you already have an active appointment of this kind with this agent" },
	{ CD_APT_E_LIMIT, 409, "APPOINTMENT_LIMIT_REACHED",
		"at most 3 active appointments at a time" },
	{ CD_APT_E_RATE, 429, "RATE_LIMITED", "too many appointments booked in the last hour" },
	{ CD_APT_E_CUTOFF, 409, "CANCELLATION_CUTOFF_PASSED",
		"too close to the start to cancel or reschedule" },
	{ CD_APT_E_NOT_STARTED, 409, "APPOINTMENT_NOT_STARTED",
		"the appointment has not started yet" },
	{ CD_APT_E_AGENT_UNAVAILABLE, 409, "AGENT_UNAVAILABLE",
		"the agent no longer takes appointments" },
	{ CD_APT_E_TIME_OFF, 409, "AGENT_TIME_OFF",
		"the agent is away at this time (time off); choose another slot" },
};

int apt_fail(struct pin_req *r, int rc, struct pc_errs *e)
{
	struct pc_errs oe;
	size_t i;

	pc_api->db_rollback();
	if (rc == PC_E_REPLAYED || rc == PC_E_RESPONDED)
		return PIN_OK;
	if (rc == PC_E_VALIDATION)
		return pc_errs_respond(r, 422, "VALIDATION_FAILED",
				"the request has invalid fields", e);
	if (rc == PC_E_RANGE) {        /* a derived instant (issue 9 item 3) */
		pc_errs_init(&oe);
		pc_errs_add(&oe, "slotId", PC_INSTANT_RANGE_MSG);
		return pc_errs_respond(r, 422, "VALIDATION_FAILED",
				"the request has invalid fields", &oe);
	}
	if (rc == CD_APT_E_OTHER_SLOT) {
		pc_errs_init(&oe);
		pc_errs_add(&oe, "newSlotId", "must be a slot of the same agent and kind");
		return pc_errs_respond(r, 422, "VALIDATION_FAILED",
				"the new slot does not fit the appointment", &oe);
	}
	if (rc == CD_APT_E_RATE)
		pc_api->set_header(r, "Retry-After", "3600");
	for (i = 0; i < sizeof(problems) / sizeof(problems[0]); i++)
		if (problems[i].rc == rc)
			return pc_problem(r, problems[i].status, problems[i].code,
					problems[i].detail);
	return rc < 0 ? rc : PIN_ERR;
}

json_object *apt_body(struct pin_req *r, const char *const *allowed, struct pc_errs *e)
{
	json_object *b;

	pc_errs_init(e);
	b = pc_body(r, e);

	if (!b) {
		/* JSON, but not an object: a field-rule failure, as in every plugin */
		pc_errs_respond(r, 422, "VALIDATION_FAILED", "the body must be a JSON object", e);
		return NULL;
	}
	if (pc_check_fields(b, allowed, e) > 0) {
		pc_errs_respond(r, 422, "VALIDATION_FAILED", "unknown fields", e);
		return NULL;
	}
	return b;
}

int apt_body_run(struct pin_req *r, const char *const *allowed,
		void (*read)(json_object *body, void *ctx, struct pc_errs *e),
		struct apt_write *w)
{
	struct pc_errs e;
	json_object *body;

	if (!(body = apt_body(r, allowed, &e)))
		return PIN_OK;
	read(body, w->ctx, &e);
	if (e.n > 0)
		return apt_fail(r, PC_E_VALIDATION, &e);
	return apt_write_run(r, w);
}

int apt_write_run(struct pin_req *r, struct apt_write *w)
{
	const char *id = pc_path_uuid(r, "appointmentId");
	struct pc_idem idem;
	PGresult *locked, *view;
	json_object *body = NULL;
	const char *loc = NULL;
	int rc, have_ver, ver = 0;

	if (!id)
		return PIN_OK;
	if (pc_if_match(r, &have_ver, &ver) < 0)
		return PIN_OK;
	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	if ((rc = pc_idem_begin(r, &idem)) < 0)
		goto fail;
	if ((rc = cd_apt_lock(id, &w->scope, &locked)) < 0)
		goto fail;
	if (have_ver && ver != atoi(PQgetvalue(locked, 0, CD_APT_C_VERSION))) {
		rc = PC_E_VERSION;
		goto fail;
	}
	w->result_id = NULL;
	if ((rc = w->op(w, locked, pc_api->now_us())) < 0)
		goto fail;
	if ((rc = cd_apt_fetch(w->result_id ? w->result_id : id, &w->scope, &view)) < 0)
		goto fail;
	body = cd_apt_json(view, 0);
	if (w->status == 201 && w->location_base)
		loc = pc_api->sprintf("%s%s", w->location_base, PQgetvalue(view, 0, CD_APT_C_ID));
	if ((rc = pc_idem_store(&idem, w->status, body, loc)) < 0)
		goto fail;
	if ((rc = pc_api->db_commit()) != 0)
		goto fail;
	pc_api->set_header(r, "ETag", pc_api->sprintf("\"%s\"",
			PQgetvalue(view, 0, CD_APT_C_VERSION)));
	if (loc)
		pc_api->set_header(r, "Location", loc);
	return pc_api->respond_json(r, w->status, body);
fail:
	if (body)
		json_object_put(body);
	body = NULL;
	/* PIN_ERR_DB after a deadlock: the host runs the request again */
	return apt_fail(r, rc, NULL);
}

/* ---------------------------------------------------------------- routes */

#define AGENT (PIN_ACTOR_AGENT | PIN_ACTOR_CONSULTANT)
#define INV PIN_ACTOR_INVESTOR
/* the team view: every actor but investors (who have no tenant) */
#define TEAM (PIN_ACTOR_ANY & ~PIN_ACTOR_INVESTOR)
#define AG "/api/v1/agent/calendar/appointments"
#define IN "/api/v1/investor/calendar/appointments"
#define VIEW "calendar.appointments.view"
#define DECIDE "calendar.appointments.decide"

static const struct pin_route routes[] = {
	{ "POST", "/api/public/calendar/appointments", INV, NULL, 0, apt_h_book, NULL, NULL },

	{ "GET", AG, AGENT, VIEW, 1, apt_h_agent_list, NULL, NULL },
	{ "GET", AG "/{appointmentId}", AGENT, VIEW, 1, apt_h_agent_get, NULL, NULL },
	{ "POST", AG "/{appointmentId}/confirm", AGENT, DECIDE, 1, apt_h_agent_confirm, NULL, NULL },
	{ "POST", AG "/{appointmentId}/decline", AGENT, DECIDE, 1, apt_h_agent_decline, NULL, NULL },
	{ "POST", AG "/{appointmentId}/cancel", AGENT, DECIDE, 1, apt_h_agent_cancel, NULL, NULL },
	{ "POST", AG "/{appointmentId}/complete", AGENT, DECIDE, 1, apt_h_agent_complete,
		NULL, NULL },

	{ "GET", IN, INV, NULL, 0, apt_h_investor_list, NULL, NULL },
	{ "GET", IN "/{appointmentId}", INV, NULL, 0, apt_h_investor_get, NULL, NULL },
	{ "POST", IN "/{appointmentId}/cancel", INV, NULL, 0, apt_h_investor_cancel, NULL, NULL },
	{ "POST", IN "/{appointmentId}/reschedule", INV, NULL, 0, apt_h_investor_reschedule,
		NULL, NULL },

	{ "GET", "/api/v1/agency/calendar/appointments", TEAM, "calendar.team.view", 1,
		apt_h_agency_list, NULL, NULL },
	{ "GET", "/api/v1/pin-manager/calendar/appointments", PIN_ACTOR_PIN_MANAGER,
		"calendar.team.view", 0, apt_h_pinmgr_list, NULL, NULL },

	/* the investors' manage links (manage.c, issue 32 item 3): public,
	 * the signed token in the path is the credential */
	{ "GET", "/manage/{token}", PIN_ACTOR_PUBLIC, NULL, 0, apt_h_manage_get, NULL, NULL },
	{ "POST", "/manage/{token}", PIN_ACTOR_PUBLIC, NULL, 0, apt_h_manage_post, NULL, NULL },
};

static int apt_init(const struct pin_host_api *api, struct pin_registrar *reg,
		char *err, size_t errlen)
{
	pc_init(api);
	if (pc_idem_table(CD_IDEM_TABLE, err, errlen) < 0)
		return PIN_ERR;
	if (!PIN_API_HAS(api, respond_body)) {
		snprintf(err, errlen, "the host is older than ABI 1.9 (respond_body)");
		return PIN_ERR;
	}
	if (apt_manage_init(err, errlen) < 0)
		return PIN_ERR;
	return pc_register_routes(reg, routes, sizeof(routes) / sizeof(routes[0]),
			"appointments", err, errlen);
}

/* The keys appointments.so reads (declared configuration, pin/plugin.h
 * 1.7); the booking rules in caldomain read them through this plugin. */
static const struct pin_config_key apt_config_keys[] = {
	{ "appointments.rate_limit_per_hour", PIN_CFG_INT, "10", PIN_CFG_API, PIN_CFG_RELOAD,
	  0, 1000000, NULL, "bookings", "booking",
	  "appointments an investor may create per rolling hour (a reschedule does not "
	  "count again); 0: no limit; over it: 429 RATE_LIMITED" },
	/* the same declaration as notify.so's (keys.c): the signer and the
	 * verifier of the investors' manage links read one file */
	{ "manage_link_key_file", PIN_CFG_PATH, "", PIN_CFG_API | PIN_CFG_WORKER, 0, 0, 0,
	  NULL, NULL, "manage links",
	  "file of the key of the investors' manage links (one secret of >= 32 bytes a "
	  "line: the first signs, every line verifies; mode 0640 root:pin-calendar); the "
	  "same file on every API and worker host; empty: no links in the messages and "
	  "/manage/ answers 503 (doc/operating.md, \"Manage links\")" },
	{ NULL, 0, NULL, 0, 0, 0, 0, NULL, NULL, NULL, NULL }
};

PIN_PLUGIN_DEFINE_CONFIG("appointments", PACKAGE_VERSION, apt_init, NULL, apt_config_keys)
