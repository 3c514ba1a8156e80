/* book.c -- POST /api/public/calendar/appointments (investor token) and the
 * investor's reschedule (INV-APT-5): one transaction each. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "http.h"

#define IN_PATH "/api/v1/investor/calendar/appointments/"

int apt_h_book(struct pin_req *r, void *ud)
{
	static const char *const allowed[] = { "slotId", "comment", "consultationRequestId",
		NULL };
	const struct pin_principal *me = pc_api->req_principal(r);
	struct cd_apt_book_req b;
	struct cd_apt_scope sc = { NULL, NULL, me->sub };
	struct pc_errs e;
	struct pc_idem idem;
	json_object *body, *out = NULL;
	PGresult *view;
	const char *id, *loc;
	int rc;

	(void)ud;
	memset(&b, 0, sizeof(b));
	if (!(body = apt_body(r, allowed, &e)))
		return PIN_OK;
	pc_get_uuid(body, "slotId", 1, &b.slot_id, &e);
	pc_get_string(body, "comment", 0, 0, CD_APT_COMMENT_MAX, &b.comment, &e);
	pc_get_uuid(body, "consultationRequestId", 0, &b.consultation_request_id, &e);
	if (e.n > 0)
		return apt_fail(r, PC_E_VALIDATION, &e);
	b.investor_user_id = me->sub;

	if (pc_api->db_begin() != 0)
		return PIN_ERR_DB;
	if ((rc = pc_idem_begin(r, &idem)) < 0)
		goto fail;
	if ((rc = cd_apt_book(&b, pc_api->now_us(), &id)) < 0)
		goto fail;
	if ((rc = cd_apt_fetch(id, &sc, &view)) < 0)
		goto fail;
	out = cd_apt_json(view, 0);
	loc = pc_api->sprintf(IN_PATH "%s", id);
	if ((rc = pc_idem_store(&idem, 201, out, loc)) < 0)
		goto fail;
	if ((rc = pc_api->db_commit()) != 0)
		goto fail;
	pc_api->set_header(r, "Location", loc);
	pc_api->set_header(r, "ETag", "\"1\"");
	return pc_api->respond_json(r, 201, out);
fail:
	if (out)
		json_object_put(out);
	out = NULL;
	if (rc == CD_APT_E_SLOT_BOOKED)
		pc_api->metric_add("pin_calendar_booking_conflicts_total", NULL, 1);
	/* PIN_ERR_DB after a deadlock: the host runs the request again */
	return apt_fail(r, rc, &e);
}

/* ------------------------------------------------------------- reschedule */

struct resched {
	const char *new_slot_id;
};

int apt_reschedule(const PGresult *old, const char *new_slot_id, int64_t now_us,
		const char **new_id_out)
{
	struct cd_apt_book_req b;
	struct cd_apt_end end = { "Cancelled", "Investor", "CancelledByInvestor", NULL, 1,
		NULL, NULL };
	const char *status = PQgetvalue(old, 0, CD_APT_C_STATUS), *new_id;
	long long cutoff_min = atoll(PQgetvalue(old, 0, CD_APT_C_CUTOFF));
	int rc;

	if (strcmp(status, "Pending") != 0 && strcmp(status, "Confirmed") != 0)
		return PC_E_TRANSITION;
	/* the old one must still be cancellable */
	if (now_us > pc_col_us(old, 0, CD_APT_C_START) - cutoff_min * 60 * 1000000LL)
		return CD_APT_E_CUTOFF;
	memset(&b, 0, sizeof(b));
	b.slot_id = new_slot_id;
	b.investor_user_id = PQgetvalue(old, 0, CD_APT_C_INVESTOR);
	b.comment = PQgetisnull(old, 0, CD_APT_C_COMMENT) ? NULL
		: PQgetvalue(old, 0, CD_APT_C_COMMENT);
	b.consultation_request_id = PQgetisnull(old, 0, CD_APT_C_CONSULTATION) ? NULL
		: PQgetvalue(old, 0, CD_APT_C_CONSULTATION);
	b.rescheduled_from = PQgetvalue(old, 0, CD_APT_C_ID);
	b.old_slot_id = PQgetvalue(old, 0, CD_APT_C_SLOT);
	b.same_agent = PQgetvalue(old, 0, CD_APT_C_AGENT);
	b.same_kind = PQgetvalue(old, 0, CD_APT_C_KIND);
	/* the new slot first: a lost race leaves the old appointment untouched */
	if ((rc = cd_apt_book(&b, now_us, &new_id)) < 0)
		return rc;
	end.rescheduled_to = new_id;
	if ((rc = cd_apt_end(old, &end, now_us)) < 0)
		return rc;
	*new_id_out = new_id;
	return 0;
}

static int op_reschedule(struct apt_write *w, const PGresult *old, int64_t now_us)
{
	const struct resched *c = w->ctx;

	return apt_reschedule(old, c->new_slot_id, now_us, &w->result_id);
}

static void read_resched(json_object *body, void *ctx, struct pc_errs *e)
{
	struct resched *c = ctx;

	pc_get_uuid(body, "newSlotId", 1, &c->new_slot_id, e);
}

int apt_h_investor_reschedule(struct pin_req *r, void *ud)
{
	static const char *const allowed[] = { "newSlotId", NULL };
	const struct pin_principal *me = pc_api->req_principal(r);
	struct resched c = { NULL };
	struct apt_write w;

	(void)ud;
	memset(&w, 0, sizeof(w));
	w.scope.investor_user_id = me->sub;
	w.op = op_reschedule;
	w.ctx = &c;
	w.status = 201;
	w.location_base = IN_PATH;
	return apt_body_run(r, allowed, read_resched, &w);
}
