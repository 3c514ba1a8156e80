/* decide.c -- the agent's decisions (confirm, decline, cancel, complete) and
 * the investor's cancel.  Each is one transaction with its cascades. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "http.h"

static const char *const outcomes[] = { "Completed", "NoShow", NULL };

static void agent_scope(struct pin_req *r, struct apt_write *w)
{
	const struct pin_principal *me = pc_api->req_principal(r);

	memset(w, 0, sizeof(*w));
	w->scope.tenant_id = me->tenant_id;
	w->scope.agent_user_id = me->sub;
	w->status = 200;
}

/* --------------------------------------------------------------- confirm */

static int op_confirm(struct apt_write *w, const PGresult *row, int64_t now_us)
{
	(void)w;
	return cd_apt_confirm(row, now_us);
}

int apt_h_agent_confirm(struct pin_req *r, void *ud)
{
	static const char *const allowed[] = { NULL };
	struct apt_write w;
	struct pc_errs e;

	(void)ud;
	if (!apt_body(r, allowed, &e))
		return PIN_OK;
	agent_scope(r, &w);
	w.op = op_confirm;
	return apt_write_run(r, &w);
}

/* ------------------------------------------------------ decline / cancel */

int apt_end(const PGresult *row, const struct cd_apt_end *x, int64_t now_us)
{
	const char *status = PQgetvalue(row, 0, CD_APT_C_STATUS);

	if (strcmp(x->reason, "DeclinedByAgent") == 0) {
		if (strcmp(status, "Pending") != 0)
			return PC_E_TRANSITION;
	} else {
		if (strcmp(status, "Pending") != 0 && strcmp(status, "Confirmed") != 0)
			return PC_E_TRANSITION;
		if (strcmp(x->reason, "CancelledByAgent") == 0 &&
				now_us >= pc_col_us(row, 0, CD_APT_C_START))
			return CD_APT_E_STARTED;
		if (strcmp(x->reason, "CancelledByInvestor") == 0) {
			long long cutoff = atoll(PQgetvalue(row, 0, CD_APT_C_CUTOFF));
			if (now_us > pc_col_us(row, 0, CD_APT_C_START) - cutoff * 60 * 1000000LL)
				return CD_APT_E_CUTOFF;
		}
	}
	return cd_apt_end(row, x, now_us);
}

static int op_end(struct apt_write *w, const PGresult *row, int64_t now_us)
{
	return apt_end(row, w->ctx, now_us);
}

/* {reason?} of a cancel. */
static void read_reason(json_object *body, void *ctx, struct pc_errs *e)
{
	struct cd_apt_end *x = ctx;

	pc_get_string(body, "reason", 0, 0, CD_APT_REASON_MAX, &x->cancel_reason, e);
}

/* {reason?, releaseSlot?} of the agent's decline / cancel. */
static void read_agent_end(json_object *body, void *ctx, struct pc_errs *e)
{
	struct cd_apt_end *x = ctx;

	read_reason(body, x, e);
	pc_get_bool(body, "releaseSlot", 0, &x->release_slot, e);
}

static int agent_end(struct pin_req *r, const char *status, const char *reason)
{
	static const char *const allowed[] = { "reason", "releaseSlot", NULL };
	struct cd_apt_end x = { status, "Agent", reason, NULL, 0, NULL, NULL };
	struct apt_write w;

	agent_scope(r, &w);
	w.op = op_end;
	w.ctx = &x;
	return apt_body_run(r, allowed, read_agent_end, &w);
}

int apt_h_agent_decline(struct pin_req *r, void *ud)
{
	(void)ud;
	return agent_end(r, "Declined", "DeclinedByAgent");
}

int apt_h_agent_cancel(struct pin_req *r, void *ud)
{
	(void)ud;
	return agent_end(r, "Cancelled", "CancelledByAgent");
}

int apt_h_investor_cancel(struct pin_req *r, void *ud)
{
	static const char *const allowed[] = { "reason", NULL };
	const struct pin_principal *me = pc_api->req_principal(r);
	struct cd_apt_end x = APT_INVESTOR_CANCEL;
	struct apt_write w;

	(void)ud;
	memset(&w, 0, sizeof(w));
	w.scope.investor_user_id = me->sub;
	w.status = 200;
	w.op = op_end;
	w.ctx = &x;
	return apt_body_run(r, allowed, read_reason, &w);
}

/* -------------------------------------------------------------- complete */

struct complete_args {
	const char *outcome, *note;
};

static int op_complete(struct apt_write *w, const PGresult *row, int64_t now_us)
{
	const struct complete_args *c = w->ctx;

	return cd_apt_complete(row, c->outcome, c->note, now_us);
}

static void read_complete(json_object *body, void *ctx, struct pc_errs *e)
{
	struct complete_args *c = ctx;

	pc_get_enum(body, "outcome", 1, outcomes, &c->outcome, e);
	pc_get_string(body, "note", 0, 0, CD_APT_NOTE_MAX, &c->note, e);
}

int apt_h_agent_complete(struct pin_req *r, void *ud)
{
	static const char *const allowed[] = { "outcome", "note", NULL };
	struct complete_args c = { NULL, NULL };
	struct apt_write w;

	(void)ud;
	agent_scope(r, &w);
	w.op = op_complete;
	w.ctx = &c;
	return apt_body_run(r, allowed, read_complete, &w);
}
