/* http.h -- the HTTP side of appointments.so: route handlers and the shared
 * write skeleton.  Core (database) functions are in caldomain/appointment.h. */
#ifndef APT_HTTP_H
#define APT_HTTP_H

#include "sdk/sdk.h"
#include "caldomain/event.h"
#include "caldomain/appointment.h"

#define APT_NOT_FOUND "APPOINTMENT_NOT_FOUND"

/* Rolls back, then answers the problem of rc (PC_E_*, CD_APT_E_*); returns
 * PIN_OK, or rc itself for PIN_ERR / PIN_ERR_DB (the host answers 500/503).
 * e: collected validation errors (may be NULL). */
int apt_fail(struct pin_req *r, int rc, struct pc_errs *e);

/*
 * Deadlocks and serialization failures (40P01 / 40001) end a write with
 * PIN_ERR_DB and nothing answered: the host then rolls back and runs the
 * whole request again (3 runs at most, then 409 VERSION_CONFLICT).
 */

/* The body as an object with only the allowed fields: NULL after answering
 * 400 (not an object) / 422 (unknown fields); otherwise e is initialised and
 * collects the caller's field errors (answer them with
 * apt_fail(r, PC_E_VALIDATION, &e)). */
json_object *apt_body(struct pin_req *r, const char *const *allowed, struct pc_errs *e);
/* The write w (scope, op and ctx set) of a request whose body holds only the
 * allowed fields, read into w->ctx by read first: apt_body, read, 422 with
 * read's field errors, else apt_write_run. */
struct apt_write;
int apt_body_run(struct pin_req *r, const char *const *allowed,
		void (*read)(json_object *body, void *ctx, struct pc_errs *e),
		struct apt_write *w);

/*
 * A write on one existing appointment ({appointmentId} of the path):
 * begin, Idempotency-Key, lock within scope (foreign ids: 404), If-Match,
 * op, then the answer: the representation of result_id (or the locked
 * appointment) with status (200 / 201 + Location), stored for idempotent
 * replays, commit.
 */
struct apt_write;
typedef int (*apt_op_fn)(struct apt_write *w, const PGresult *locked, int64_t now_us);
struct apt_write {
	struct cd_apt_scope scope;
	apt_op_fn op;
	void *ctx;                  /* the op's arguments */
	const char *result_id;      /* set by op to answer another appointment */
	int status;                 /* 200 or 201 */
	const char *location_base;  /* with 201: Location = base + result id */
};
int apt_write_run(struct pin_req *r, struct apt_write *w);

/* Lists (list.c). */
int apt_h_agent_list(struct pin_req *r, void *ud);
int apt_h_agent_get(struct pin_req *r, void *ud);
int apt_h_investor_list(struct pin_req *r, void *ud);
int apt_h_investor_get(struct pin_req *r, void *ud);
int apt_h_agency_list(struct pin_req *r, void *ud);
int apt_h_pinmgr_list(struct pin_req *r, void *ud);   /* list.c, issue 12 */

/* Booking and reschedule (book.c). */
int apt_h_book(struct pin_req *r, void *ud);
int apt_h_investor_reschedule(struct pin_req *r, void *ud);

/* Decisions (decide.c). */
int apt_h_agent_confirm(struct pin_req *r, void *ud);
int apt_h_agent_decline(struct pin_req *r, void *ud);
int apt_h_agent_cancel(struct pin_req *r, void *ud);
int apt_h_agent_complete(struct pin_req *r, void *ud);
int apt_h_investor_cancel(struct pin_req *r, void *ud);

/* The rules of an end (decline / cancel) on a locked row, then cd_apt_end:
 * the states it may leave, the agent's "not after the start", the
 * investor's cancellation cutoff.  The API and the manage page (manage.c)
 * both end an appointment through it.  0, PC_E_TRANSITION, CD_APT_E_*,
 * PIN_ERR_DB. */
int apt_end(const PGresult *row, const struct cd_apt_end *x, int64_t now_us);
/* The investor's reschedule of a locked row to new_slot_id (the same agent
 * and kind): the rules of the API (states, cutoff), cd_apt_book of the new
 * slot (its guards, anti-spam, rate limit) and the old one's end with
 * rescheduled_to.  0 with *new_id (arena), PC_E_TRANSITION, CD_APT_E_*,
 * PIN_ERR_DB.  The API (book.c) and the manage page (manage.c) use it. */
int apt_reschedule(const PGresult *old, const char *new_slot_id, int64_t now_us,
		const char **new_id);
/* the investor's cancel: the slot goes back to the showcase */
#define APT_INVESTOR_CANCEL { "Cancelled", "Investor", "CancelledByInvestor", NULL, 1, NULL, NULL }

/* The investors' manage links (manage.c, issue 32 item 3): GET and POST
 * /manage/{token}, public (the signed token is the credential). */
int apt_manage_init(char *err, size_t errlen);
int apt_h_manage_get(struct pin_req *r, void *ud);
int apt_h_manage_post(struct pin_req *r, void *ud);

#endif
