/* timeoff.c -- an agent's absences (issue 32 item 4): declare, list, read,
 * change and delete.  Declaring (or widening) an absence, in the same
 * transaction as the row:
 *  - every Available slot of the agent overlapping it -> Archived with
 *    archive_reason 'time_off' (the slot list shows archiveReason);
 *  - every Pending appointment overlapping it -> Declined by the agent's own
 *    decline (cd_apt_decline_time_off: appointment-cancelled with reason
 *    DeclinedByAgent, event-status-changed; the investor is notified);
 *  - Confirmed appointments overlapping it are left as they are and listed
 *    in the answer (confirmedAppointments) for the agent to handle: the
 *    investor was promised the appointment and deserves the agent's own
 *    word, a cancel with a reason, not a silent system cancel.
 * Afterwards calendar.slot_plan skips starts inside it (reason 'time_off')
 * and a booking of a slot inside it answers 409 AGENT_TIME_OFF.  Shortening
 * or deleting an absence changes no slot and no appointment.
 * The note is the agent's text: answered to the agent only, never logged,
 * never in a message. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "caldomain/agent.h"
#include "caldomain/appointment.h"
#include "slots.h"

#define PATH "/api/v1/agent/calendar/time-off/"

#define TOFF_COLS \
	"t.id, t.tenant_id, t.owner_user_id, calendar.us(t.start_at) AS start_us, " \
	"calendar.us(t.end_at) AS end_us, t.note, calendar.us(t.created_at) AS created_us, " \
	"calendar.us(t.updated_at) AS updated_us, t.version"
enum { C_ID, C_TENANT, C_OWNER, C_FROM, C_TO, C_NOTE, C_CREATED, C_UPDATED, C_VERSION };

static const struct pc_jfield toff_fields[] = {
	{ "id", "id", PC_J_STR },
	{ "tenantId", "tenant_id", PC_J_STR },
	{ "ownerUserId", "owner_user_id", PC_J_STR },
	{ "from", "start_us", PC_J_TIME },
	{ "to", "end_us", PC_J_TIME },
	{ "note", "note", PC_J_STR },
	{ "createdAt", "created_us", PC_J_TIME },
	{ "updatedAt", "updated_us", PC_J_TIME },
	{ "version", "version", PC_J_INT },
};

static const char *const body_fields[] = { "from", "to", "note", NULL };

/* What a declaration did (the answer's effect members). */
struct effects {
	int archived;
	json_object *declined, *confirmed;     /* arrays of appointments */
};

/* The effects of the span [from, to) of owner at now (see the top). */
static int apply_effects(const char *owner, int64_t from, int64_t to, int64_t now,
		struct effects *fx)
{
	const char *p[5], **ids;
	PGresult *res;
	char *idarr, *ip;
	int i, n, rc;
	size_t k;

	p[0] = owner;
	p[1] = pc_time_param(from);
	p[2] = pc_time_param(to);
	p[3] = pc_time_param(now);
	/* Available first: a booking racing with us either took its slot
	 * before (we wait for its row lock, then see it Booked and decline its
	 * Pending appointment below) or finds the slot Archived */
	res = pc_api->db_exec_prepared("slots_time_off_archive",
		"UPDATE calendar.availability_slots s SET status = 'Archived', "
		"  archive_reason = 'time_off', version = s.version + 1, "
		"  updated_at = $4::timestamptz "
		"WHERE s.owner_user_id = $1::uuid AND s.status = 'Available' "
		"  AND s.start_at < $3::timestamptz AND s.end_at > $2::timestamptz", 4, p);
	if (!pc_res_ok(res, PGRES_COMMAND_OK))
		return PIN_ERR_DB;
	fx->archived = atoi(PQcmdTuples(res));
	if ((rc = cd_apt_decline_time_off(owner, p[1], p[2], now, &ids, &n)) < 0)
		return rc;
	idarr = pc_api->alloc((size_t)n * 38 + 3);
	ip = idarr;
	*ip++ = '{';
	for (i = 0; i < n; i++)
		ip += sprintf(ip, "%s%s", i ? "," : "", ids[i]);
	*ip++ = '}';
	*ip = 0;
	p[4] = idarr;
	/* the declined ones as they are now, and the Confirmed ones not over */
	res = pc_api->db_exec_prepared("slots_time_off_apts",
		CD_APT_VIEW_SQL
		"WHERE a.agent_user_id = $1::uuid "
		"  AND a.start_at < $3::timestamptz AND a.end_at > $2::timestamptz "
		"  AND (a.id = ANY ($5::uuid[]) "
		"       OR (a.status = 'Confirmed' AND a.end_at > $4::timestamptz)) "
		"ORDER BY a.start_at, a.id", 5, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	fx->declined = json_object_new_array();
	fx->confirmed = json_object_new_array();
	for (k = 0; k < (size_t)PQntuples(res); k++)
		json_object_array_add(strcmp(PQgetvalue(res, (int)k, CD_APT_C_STATUS),
				"Confirmed") == 0 ? fx->confirmed : fx->declined,
				cd_apt_json(res, (int)k));
	return 0;
}

/* {timeOff, archivedSlots, declinedAppointments, confirmedAppointments}
 * of a TOFF_COLS row and fx (taken).  New object. */
static json_object *answer(const PGresult *row, struct effects *fx)
{
	json_object *o = json_object_new_object();

	json_object_object_add(o, "timeOff",
		pc_row_json(toff_fields, PC_NFIELDS(toff_fields), row, 0));
	json_object_object_add(o, "archivedSlots", json_object_new_int(fx->archived));
	json_object_object_add(o, "declinedAppointments",
		fx->declined ? fx->declined : json_object_new_array());
	json_object_object_add(o, "confirmedAppointments",
		fx->confirmed ? fx->confirmed : json_object_new_array());
	fx->declined = fx->confirmed = NULL;
	return o;
}

static void effects_free(struct effects *fx)
{
	if (fx->declined)
		json_object_put(fx->declined);
	if (fx->confirmed)
		json_object_put(fx->confirmed);
	fx->declined = fx->confirmed = NULL;
}

/* The body of a create (creating = 1: from and to required) or a PATCH
 * (each optional, over the old values).  0; PC_E_RESPONDED after a 422. */
struct toff_in {
	int64_t from, to;
	const char *note;
	int has_from, has_to, has_note;
};

static int parse_body(struct pin_req *r, struct toff_in *in, int creating)
{
	struct pc_errs e;
	json_object *body;
	enum pc_field f;

	pc_errs_init(&e);
	if (!(body = pc_body(r, &e)))
		goto respond;
	pc_check_fields(body, body_fields, &e);
	in->has_from = pc_get_instant(body, "from", creating, &in->from, &e) == PC_SET;
	in->has_to = pc_get_instant(body, "to", creating, &in->to, &e) == PC_SET;
	if (!creating) {
		json_object *v;

		if (json_object_object_get_ex(body, "from", &v) && !v)
			pc_errs_add(&e, "from", "must be an instant (null is not allowed)");
		if (json_object_object_get_ex(body, "to", &v) && !v)
			pc_errs_add(&e, "to", "must be an instant (null is not allowed)");
	}
	f = pc_get_string(body, "note", 0, 0, SLOT_TIME_OFF_NOTE_MAX, &in->note, &e);
	in->has_note = f == PC_SET || f == PC_NULL;
	if (f == PC_NULL)
		in->note = NULL;
respond:
	if (e.n > 0) {
		pc_errs_respond(r, 422, "VALIDATION_FAILED", "the absence is not valid", &e);
		pc_errs_free(&e);
		return PC_E_RESPONDED;
	}
	pc_errs_free(&e);
	return 0;
}

/* 422 VALIDATION_FAILED on the span rule (slot_rule_time_off).  0 or
 * PC_E_RESPONDED. */
static int check_span(struct pin_req *r, int64_t from, int64_t to, int creating)
{
	struct pc_errs e;
	const char *field, *msg = slot_rule_time_off(from, to, pc_api->now_us(), creating,
			&field);

	if (!msg)
		return 0;
	pc_errs_init(&e);
	pc_errs_add(&e, field, msg);
	pc_errs_respond(r, 422, "VALIDATION_FAILED", "the absence is not valid", &e);
	pc_errs_free(&e);
	return PC_E_RESPONDED;
}

/* The exclusion constraint refused a write: another absence of the agent
 * overlaps.  PC_E_RESPONDED after 409, PIN_ERR_DB for any other failure. */
static int write_failed(struct pin_req *r, const PGresult *res)
{
	if (res && strcmp(pc_api->db_sqlstate(res), "23P01") == 0) {
		pc_problem(r, 409, "TIME_OFF_OVERLAP",
			"another absence of yours overlaps this one; change that one instead");
		return PC_E_RESPONDED;
	}
	return PIN_ERR_DB;
}

/* The single exit of a write: rolls back an open transaction, drops an
 * unsent body; PC_E_RESPONDED (answered) is PIN_OK. */
static int finish(int rc, int in_tx, json_object *body, struct effects *fx)
{
	if (in_tx)
		pc_api->db_rollback();
	if (body)
		json_object_put(body);
	effects_free(fx);
	return rc == PC_E_RESPONDED ? PIN_OK : rc;
}

/* Stores the answer under the Idempotency-Key, commits, answers status with
 * body (taken) and Location loc (may be NULL), ETag of the row's version. */
static int commit_answer(struct pin_req *r, const struct pc_idem *idem, int *in_tx,
		int status, json_object **body, const char *loc, const char *version)
{
	int rc;

	if ((rc = pc_idem_store(idem, status, *body, loc)) < 0)
		return rc;
	rc = pc_api->db_commit();
	*in_tx = 0;
	if (rc < 0)
		return rc;
	if (loc)
		pc_api->set_header(r, "Location", loc);
	pc_api->set_header(r, "ETag", pc_api->sprintf("\"%s\"", version));
	rc = pc_api->respond_json(r, status, *body);
	*body = NULL;
	return rc;
}

static void log_effects(const char *msg, const char *id, const struct effects *fx)
{
	/* ids and counts only: never the note */
	pc_api->log(PIN_LOG_INFO, msg, "timeOffId", id,
		"archivedSlots", pc_api->sprintf("%d", fx->archived),
		"declinedAppointments", pc_api->sprintf("%d", fx->declined ?
			(int)json_object_array_length(fx->declined) : 0),
		"confirmedAppointments", pc_api->sprintf("%d", fx->confirmed ?
			(int)json_object_array_length(fx->confirmed) : 0), NULL);
}

int slot_h_time_off_create(struct pin_req *r, void *ud)
{
	const struct pin_principal *pr = pc_api->req_principal(r);
	struct toff_in in;
	struct effects fx = { 0, NULL, NULL };
	struct pc_idem idem;
	json_object *body = NULL;
	const char *p[7];
	char id[37];
	PGresult *res;
	int64_t now = pc_api->now_us();
	int rc, in_tx = 0;

	(void)ud;
	memset(&in, 0, sizeof(in));
	if (parse_body(r, &in, 1) < 0 || check_span(r, in.from, in.to, 1) < 0)
		return PIN_OK;
	if ((rc = slot_tx_begin(r, &idem, &in_tx)) < 0)
		return rc == PC_E_RESPONDED ? PIN_OK : rc;
	/* the owner's slot writers (publishing, a departure) take turns with us:
	 * a batch never commits Available slots inside a new absence */
	if ((rc = cd_agent_slots_lock(pr->sub)) < 0)
		goto out;
	pc_api->uuid_v7(id);
	p[0] = id;
	p[1] = pr->tenant_id;
	p[2] = pr->sub;
	p[3] = pc_time_param(in.from);
	p[4] = pc_time_param(in.to);
	p[5] = in.note;
	p[6] = pc_time_param(now);
	res = pc_api->db_exec_prepared("slots_time_off_insert",
		"INSERT INTO calendar.time_off AS t (id, tenant_id, owner_user_id, start_at, "
		"  end_at, note, created_at, updated_at) "
		"VALUES ($1, $2, $3, $4::timestamptz, $5::timestamptz, $6, "
		"  $7::timestamptz, $7::timestamptz) RETURNING " TOFF_COLS, 7, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1) {
		rc = write_failed(r, res);
		goto out;
	}
	if ((rc = apply_effects(pr->sub, in.from, in.to, now, &fx)) < 0)
		goto out;
	log_effects("time off declared", id, &fx);
	body = answer(res, &fx);
	rc = commit_answer(r, &idem, &in_tx, 201, &body, pc_api->sprintf(PATH "%s", id),
			PQgetvalue(res, 0, C_VERSION));
out:
	return finish(rc, in_tx, body, &fx);
}

/* Locks (FOR UPDATE) the caller's absence id.  0 with *row; PC_E_RESPONDED
 * after 404 TIME_OFF_NOT_FOUND or a 409 VERSION_CONFLICT (If-Match);
 * PIN_ERR_DB. */
static int lock_own(struct pin_req *r, const char *id, int has_ver, int want_ver,
		PGresult **row)
{
	const struct pin_principal *pr = pc_api->req_principal(r);
	const char *p[3] = { id, pr->sub, pr->tenant_id };

	*row = pc_api->db_exec_prepared("slots_time_off_lock",
		"SELECT " TOFF_COLS " FROM calendar.time_off t "
		"WHERE t.id = $1::uuid AND t.owner_user_id = $2::uuid "
		"  AND t.tenant_id = $3::uuid FOR UPDATE", 3, p);
	if (!pc_res_ok(*row, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(*row) != 1) {
		pc_problem(r, 404, "TIME_OFF_NOT_FOUND", "no such absence");
		return PC_E_RESPONDED;
	}
	if (has_ver && atoi(PQgetvalue(*row, 0, C_VERSION)) != want_ver) {
		pc_problem(r, 409, "VERSION_CONFLICT",
			"the absence was changed; reload it and retry");
		return PC_E_RESPONDED;
	}
	return 0;
}

int slot_h_time_off_patch(struct pin_req *r, void *ud)
{
	const struct pin_principal *pr = pc_api->req_principal(r);
	struct toff_in in;
	struct effects fx = { 0, NULL, NULL };
	struct pc_idem idem;
	json_object *body = NULL;
	const char *id, *p[5];
	PGresult *old, *res;
	int64_t now = pc_api->now_us(), of, ot;
	int rc, in_tx = 0, has_ver, want_ver = 0;

	(void)ud;
	memset(&in, 0, sizeof(in));
	if (!(id = pc_path_uuid(r, "id")))
		return PIN_OK;
	if (pc_if_match(r, &has_ver, &want_ver) < 0)
		return PIN_OK;
	if (parse_body(r, &in, 0) < 0)
		return PIN_OK;
	if ((rc = slot_tx_begin(r, &idem, &in_tx)) < 0)
		return rc == PC_E_RESPONDED ? PIN_OK : rc;
	if ((rc = cd_agent_slots_lock(pr->sub)) < 0)
		goto out;
	if ((rc = lock_own(r, id, has_ver, want_ver, &old)) < 0)
		goto out;
	of = pc_col_us(old, 0, C_FROM);
	ot = pc_col_us(old, 0, C_TO);
	if (!in.has_from && !in.has_to && !in.has_note) {
		/* {} changes nothing and keeps the version (as an event's PATCH) */
		body = answer(old, &fx);
		rc = commit_answer(r, &idem, &in_tx, 200, &body, NULL,
				PQgetvalue(old, 0, C_VERSION));
		goto out;
	}
	if (!in.has_from)
		in.from = of;
	if (!in.has_to)
		in.to = ot;
	if (!in.has_note)
		in.note = pc_col(old, 0, C_NOTE);
	if ((rc = check_span(r, in.from, in.to, 0)) < 0)
		goto out;
	p[0] = id;
	p[1] = pc_time_param(in.from);
	p[2] = pc_time_param(in.to);
	p[3] = in.note;
	p[4] = pc_time_param(now);
	res = pc_api->db_exec_prepared("slots_time_off_update",
		"UPDATE calendar.time_off t SET start_at = $2::timestamptz, "
		"  end_at = $3::timestamptz, note = $4, updated_at = $5::timestamptz, "
		"  version = t.version + 1 "
		"WHERE t.id = $1::uuid RETURNING " TOFF_COLS, 5, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK) || PQntuples(res) != 1) {
		rc = write_failed(r, res);
		goto out;
	}
	/* only a span that grew has effects; one that shrank (ended early,
	 * shortened) gives nothing back: archived slots stay archived */
	if (slot_time_off_widens(of, ot, in.from, in.to)) {
		if ((rc = apply_effects(pr->sub, in.from, in.to, now, &fx)) < 0)
			goto out;
		log_effects("time off widened", id, &fx);
	}
	body = answer(res, &fx);
	rc = commit_answer(r, &idem, &in_tx, 200, &body, NULL, PQgetvalue(res, 0, C_VERSION));
out:
	return finish(rc, in_tx, body, &fx);
}

int slot_h_time_off_delete(struct pin_req *r, void *ud)
{
	struct pc_idem idem;
	struct effects fx = { 0, NULL, NULL };
	const char *id, *p[1];
	PGresult *row, *res;
	int rc, in_tx = 0, has_ver, want_ver = 0;

	(void)ud;
	if (!(id = pc_path_uuid(r, "id")))
		return PIN_OK;
	if (pc_body_none(r) < 0)
		return PIN_OK;
	if (pc_if_match(r, &has_ver, &want_ver) < 0)
		return PIN_OK;
	if ((rc = slot_tx_begin(r, &idem, &in_tx)) < 0)
		return rc == PC_E_RESPONDED ? PIN_OK : rc;
	if ((rc = lock_own(r, id, has_ver, want_ver, &row)) < 0)
		goto out;
	p[0] = id;
	res = pc_api->db_exec_prepared("slots_time_off_delete",
		"DELETE FROM calendar.time_off t WHERE t.id = $1::uuid", 1, p);
	if (!pc_res_ok(res, PGRES_COMMAND_OK)) {
		rc = PIN_ERR_DB;
		goto out;
	}
	if ((rc = pc_idem_store(&idem, 204, NULL, NULL)) < 0)
		goto out;
	rc = pc_api->db_commit();
	in_tx = 0;
	if (rc < 0)
		goto out;
	pc_api->log(PIN_LOG_INFO, "time off deleted", "timeOffId", id, NULL);
	rc = pc_api->respond_json(r, 204, NULL);
out:
	return finish(rc, in_tx, NULL, &fx);
}

int slot_h_time_off_get(struct pin_req *r, void *ud)
{
	const struct pin_principal *pr = pc_api->req_principal(r);
	const char *id, *p[3];
	PGresult *res;

	(void)ud;
	if (!(id = pc_path_uuid(r, "id")))
		return PIN_OK;
	p[0] = id;
	p[1] = pr->sub;
	p[2] = pr->tenant_id;
	res = pc_api->db_exec_prepared("slots_time_off_get",
		"SELECT " TOFF_COLS " FROM calendar.time_off t "
		"WHERE t.id = $1::uuid AND t.owner_user_id = $2::uuid "
		"  AND t.tenant_id = $3::uuid", 3, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(res) != 1)
		return pc_problem(r, 404, "TIME_OFF_NOT_FOUND", "no such absence");
	pc_api->set_header(r, "ETag", pc_api->sprintf("\"%s\"", PQgetvalue(res, 0, C_VERSION)));
	return pc_api->respond_json(r, 200,
			pc_row_json(toff_fields, PC_NFIELDS(toff_fields), res, 0));
}

/* GET /api/v1/agent/calendar/time-off?from=&to=&limit=&cursor=: the caller's
 * absences overlapping [from, to) (default now .. now + 92 days), by start. */
int slot_h_time_off_list(struct pin_req *r, void *ud)
{
	const struct pin_principal *pr = pc_api->req_principal(r);
	struct pc_errs e;
	const char *p[7];
	int64_t from, to, cur_us = 0;
	long long limit;
	char cur_id[37], lim[24];
	json_object *body;
	PGresult *res;

	(void)ud;
	pc_errs_init(&e);
	if (slot_list_params(r, pc_api->now_us(), &from, &to, &limit, &cur_us, cur_id,
			&e) == PC_E_RESPONDED) {
		pc_errs_free(&e);
		return PIN_OK;
	}
	pc_errs_free(&e);
	snprintf(lim, sizeof(lim), "%lld", limit + 1);
	p[0] = pr->sub;
	p[1] = pr->tenant_id;
	p[2] = pc_time_param(from);
	p[3] = pc_time_param(to);
	p[4] = cur_id[0] ? pc_time_param(cur_us) : NULL;
	p[5] = cur_id[0] ? cur_id : NULL;
	p[6] = lim;
	res = pc_api->db_exec_prepared("slots_time_off_list",
		"SELECT " TOFF_COLS " FROM calendar.time_off t "
		"WHERE t.owner_user_id = $1::uuid AND t.tenant_id = $2::uuid "
		"  AND t.end_at > $3::timestamptz AND t.start_at < $4::timestamptz "
		"  AND ($5::timestamptz IS NULL OR (t.start_at, t.id) > ($5::timestamptz, $6::uuid)) "
		"ORDER BY t.start_at, t.id LIMIT $7::int", 7, p);
	if (!pc_res_ok(res, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	body = pc_page_json_map(res, limit, "start_us", "id", toff_fields,
			PC_NFIELDS(toff_fields));
	return body ? pc_api->respond_json(r, 200, body) : PIN_ERR;
}
