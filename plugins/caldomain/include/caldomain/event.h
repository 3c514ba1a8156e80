/*
 * caldomain/event.h -- the CalendarEvent on the database (event.c,
 * event_owner.c): create, reschedule, status transitions, owner changes,
 * reminder materialisation and the event-* outbox messages.  Every function
 * runs inside the caller's transaction (the caller begins and commits) and
 * uses the SDK's pc_api: the plugin must have called pc_init().
 * Errors follow the SDK convention (sdk/core.h).
 */
#ifndef PIN_CALDOMAIN_EVENT_H
#define PIN_CALDOMAIN_EVENT_H

#include "sdk/core.h"
#include "caldomain/event_rules.h"

/*
 * Column list selecting an event (use with cd_event_json / payloads):
 *   SELECT CD_EVENT_COLS FROM calendar.calendar_events e WHERE ...
 * Column indexes are the CD_EC_* below.
 */
#define CD_EVENT_COLS \
	"e.id, e.tenant_id, e.owner_user_id, e.kind, e.origin, e.status, e.priority, " \
	"e.title, e.description, e.location, calendar.us(e.start_at), calendar.us(e.end_at), " \
	"e.time_zone, e.client_user_id, e.lead_id, e.deal_id, e.booking_id, e.project_id, " \
	"e.property_object_id, e.appointment_id, e.reminder_offsets_minutes, e.cancel_reason, " \
	"calendar.us(e.started_at), calendar.us(e.completed_at), calendar.us(e.cancelled_at), " \
	"calendar.us(e.created_at), calendar.us(e.updated_at), e.version, e.created_by_user_id"
/* The same columns with the instants as the timestamptz columns themselves:
 * for binary results (pc_exec_prepared_bin), which the readers (pc_col_us,
 * sdk/jtext) take without calendar.us()'s numeric arithmetic in PostgreSQL
 * (7 calls per event; doc/performance.md "The read paths' SQL"). */
#define CD_EVENT_COLS_TS \
	"e.id, e.tenant_id, e.owner_user_id, e.kind, e.origin, e.status, e.priority, " \
	"e.title, e.description, e.location, e.start_at, e.end_at, " \
	"e.time_zone, e.client_user_id, e.lead_id, e.deal_id, e.booking_id, e.project_id, " \
	"e.property_object_id, e.appointment_id, e.reminder_offsets_minutes, e.cancel_reason, " \
	"e.started_at, e.completed_at, e.cancelled_at, " \
	"e.created_at, e.updated_at, e.version, e.created_by_user_id"
enum {
	CD_EC_ID, CD_EC_TENANT, CD_EC_OWNER, CD_EC_KIND, CD_EC_ORIGIN, CD_EC_STATUS,
	CD_EC_PRIORITY, CD_EC_TITLE, CD_EC_DESCRIPTION, CD_EC_LOCATION, CD_EC_START,
	CD_EC_END, CD_EC_TZ, CD_EC_CLIENT, CD_EC_LEAD, CD_EC_DEAL, CD_EC_BOOKING,
	CD_EC_PROJECT, CD_EC_PROPERTY, CD_EC_APPOINTMENT, CD_EC_OFFSETS,
	CD_EC_CANCEL_REASON, CD_EC_STARTED, CD_EC_COMPLETED, CD_EC_CANCELLED,
	CD_EC_CREATED, CD_EC_UPDATED, CD_EC_VERSION, CD_EC_CREATED_BY, CD_EC__N
};

/* A new event (strings borrowed; NULL = absent). */
struct cd_event_new {
	const char *id;             /* NULL: a UUIDv7 is generated */
	const char *tenant_id, *owner_user_id;
	const char *kind, *origin, *priority;      /* priority NULL = Normal */
	const char *title, *description, *location;
	int64_t start_us;
	int has_end;
	int64_t end_us;
	const char *time_zone;      /* canonical (pc_tz_lookup) */
	const char *client_user_id, *lead_id, *deal_id, *booking_id, *project_id,
		*property_object_id, *appointment_id, *created_by_user_id;
	int has_offsets;            /* 0: default {1440, 60} */
	int offsets[CD_MAX_OFFSETS];
	size_t n_offsets;
};

/*
 * Inserts the event, materialises its reminders (rule 1) and writes
 * event-created to the outbox, in the caller's transaction.  Does not
 * re-validate (call the cd_rule_* first).  *row_out: the event row
 * (CD_EVENT_COLS, arena result, row 0).  0 / PIN_ERR_DB / PIN_ERR.
 */
int cd_event_create(const struct cd_event_new *ev, int64_t now_us, PGresult **row_out);

/*
 * Loads and locks (FOR UPDATE) an event.  tenant_id / owner_user_id may be
 * NULL (system scope).  0 with *row_out, PC_E_NOT_FOUND, PIN_ERR_DB.
 */
int cd_event_lock(const char *id, const char *tenant_id, const char *owner_user_id,
		PGresult **row_out);

/*
 * Status transition on a locked event row (cd_event_lock): INV-CAL-2,
 * reminders Pending -> Skipped on Completed/Cancelled (rule 3), outbox
 * event-status-changed.  cancel_reason only for "cancel" (may be NULL).
 * 0 with *row_out (updated), PC_E_TRANSITION, PIN_ERR_DB.
 */
int cd_event_transition(const PGresult *locked, const char *action,
		const char *cancel_reason, int64_t now_us, PGresult **row_out);

/*
 * Reschedule of a locked event: INV-CAL-3 (duration kept), reminders
 * re-materialised (rule 2), outbox event-rescheduled.
 * 0 with *row_out, PC_E_TRANSITION, PIN_ERR_DB.  A new start equal to the
 * current one is no move (seed 002 publishes every *actual* reschedule):
 * 0 with *changed = 0 and *row_out = locked, nothing written, no message
 * (*changed = 1 after an actual move; changed may be NULL).
 */
int cd_event_reschedule(const PGresult *locked, int64_t new_start_us, int64_t now_us,
		PGresult **row_out, int *changed);

/*
 * Rule 2 for an event: deletes its Pending reminders and materialises the
 * offsets from start_us (rule 1 again).  offsets_pg: PostgreSQL array text
 * "{1440,60}".  0 / PIN_ERR_DB.
 */
int cd_reminders_rematerialise(const char *event_id, int64_t start_us,
		const char *offsets_pg, int64_t now_us);
/* Rule 3: every Pending reminder of the event -> Skipped.  0 / PIN_ERR_DB */
int cd_reminders_skip(const char *event_id, int64_t now_us);

/* Representations.  New json objects owned by the caller. */
json_object *cd_event_json(const PGresult *res, int row);
/* The same as JSON text into w (sdk/jtext.h): '{' and the fields of
 * cd_event_json, NOT the closing '}' (the caller may add members). */
struct pc_jt;
void cd_event_jt(struct pc_jt *w, const PGresult *res, int row);
/* The card's "reminders" array for an event (query). NULL on DB error. */
json_object *cd_event_reminders_json(const char *event_id);

/* Payloads of the contracts (events.md); new objects, no PII. */
json_object *cd_payload_event_created(const PGresult *res, int row);
json_object *cd_payload_event_rescheduled(const PGresult *res, int row);
json_object *cd_payload_event_status_changed(const PGresult *res, int row,
		const char *previous_status);

/* ---- owner reassignment (event_owner.c) */

/*
 * INV-CAL-8: moves a locked event (cd_event_lock) to owner_user_id and
 * tenant_id (NULL = keep the tenant) and writes event-owner-changed (reason,
 * e.g. "ExecutorChanged") to the outbox, in the caller's transaction.
 * Reminders are untouched (their rows follow the event).  0 with *row_out,
 * *changed = 0 (same owner and tenant: nothing written, *row_out = locked;
 * changed may be NULL),
 * PIN_ERR_DB.  Status and origin are the caller's checks.
 */
int cd_event_change_owner(const PGresult *locked, const char *tenant_id,
		const char *owner_user_id, const char *reason, int64_t now_us,
		PGresult **row_out, int *changed);
/* event-owner-changed payload (events.md); new object, no PII. */
json_object *cd_payload_event_owner_changed(const PGresult *res, int row,
		const char *previous_tenant_id, const char *previous_owner_user_id,
		const char *reason);

#endif
