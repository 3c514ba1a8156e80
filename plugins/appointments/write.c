/* write.c -- the error mapping and the write skeleton shared by every
 * transition endpoint of appointments.so (the API's and the manage page's):
 * below the handlers, which appointments.c registers. */
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
