/*
 * caldomain/appointment.h -- the Appointment aggregate on the database
 * (appointment.c, prefix cd_apt_): self-booking of availability slots, the
 * agent's decisions, the investor's cancel / reschedule, and the
 * appointment-timeout cascade.  Linked by appointments.so (HTTP) and
 * workers.so (the expiry job) through the domain library.
 *
 * Uses only pc_api (the SDK), so the plugin must have called pc_init().
 * Every function runs inside the caller's transaction: the caller begins
 * and commits.
 *
 * Return convention (sdk/core.h): 0 ok, negative PIN_ERR*, PC_E_* or the
 * CD_APT_E_* below (the domain range from PC_E_DOMAIN_FIRST down), which the
 * HTTP side maps to problems explicitly (appointments.c, problems[]).
 * PGresult pointers are arena results (never PQclear them).
 */
#ifndef PIN_CALDOMAIN_APPOINTMENT_H
#define PIN_CALDOMAIN_APPOINTMENT_H

#include <stdint.h>
#include <stddef.h>
#include "sdk/core.h"

/* ---- domain limits (domain.md) ------------------------------------------- */
#define CD_APT_LEAD_MIN            60      /* slot StartAt >= now + 60 min */
#define CD_APT_DEADLINE_MAX_US     (24LL * 3600 * 1000000)   /* CreatedAt + 24 h */
#define CD_APT_DEADLINE_BEFORE_US  (30LL * 60 * 1000000)     /* StartAt - 30 min */
#define CD_APT_MAX_ACTIVE          3       /* active appointments per investor */
#define CD_APT_COMMENT_MAX         1000
#define CD_APT_REASON_MAX          500
#define CD_APT_NOTE_MAX            1000

/* ---- domain errors (the PC_E_* of sdk/core.h are used as well) ---------- */
#define CD_APT_E_SLOT_NOT_FOUND    PC_E_DOMAIN_FIRST   /* -40 */   /* 404 SLOT_NOT_FOUND */
#define CD_APT_E_SLOT_BOOKED       -41   /* 409 SLOT_ALREADY_BOOKED */
#define CD_APT_E_SLOT_UNAVAILABLE  -42   /* 409 SLOT_NOT_AVAILABLE */
#define CD_APT_E_LEAD_TIME         -43   /* 422 LEAD_TIME_NOT_MET */
#define CD_APT_E_DUPLICATE         -44   /* 409 APPOINTMENT_DUPLICATE_ACTIVE */
#define CD_APT_E_LIMIT             -45   /* 409 APPOINTMENT_LIMIT_REACHED */
#define CD_APT_E_RATE              -46   /* 429 RATE_LIMITED */
#define CD_APT_E_CUTOFF            -47   /* 409 CANCELLATION_CUTOFF_PASSED */
#define CD_APT_E_NOT_STARTED       -48   /* 409 APPOINTMENT_NOT_STARTED */
#define CD_APT_E_OTHER_SLOT        -49   /* 422 VALIDATION_FAILED newSlotId (agent/kind) */
#define CD_APT_E_DEADLINE          -50   /* 409 INVALID_STATUS_TRANSITION (deadline passed) */
#define CD_APT_E_STARTED           -51   /* 409 INVALID_STATUS_TRANSITION (already started) */
#define CD_APT_E_AGENT_UNAVAILABLE -52   /* 409 AGENT_UNAVAILABLE (replica not Active) */
#define CD_APT_E_TIME_OFF          -53   /* 409 AGENT_TIME_OFF (the slot is inside an absence) */

/*
 * Columns of an appointment row:  SELECT CD_APT_COLS FROM calendar.appointments a
 * Instants are epoch microseconds (calendar.us).  Indexes: CD_APT_C_*.
 */
#define CD_APT_COLS \
	"a.id, a.tenant_id, a.slot_id, a.calendar_event_id, a.agent_user_id, " \
	"a.investor_user_id, a.kind, calendar.us(a.start_at), calendar.us(a.end_at), " \
	"a.time_zone, a.status, a.auto_confirmed, a.comment, a.project_id, " \
	"a.property_object_id, a.consultation_request_id, calendar.us(a.confirm_deadline_at), " \
	"a.cancelled_by, a.cancel_reason, a.outcome, a.outcome_note, " \
	"a.rescheduled_from_appointment_id, a.rescheduled_to_appointment_id, " \
	"calendar.us(a.decided_at), calendar.us(a.cancelled_at), calendar.us(a.completed_at), " \
	"calendar.us(a.created_at), calendar.us(a.updated_at), a.version, " \
	"coalesce(a.original_appointment_id, a.id), a.reschedule_count"
enum {
	CD_APT_C_ID, CD_APT_C_TENANT, CD_APT_C_SLOT, CD_APT_C_EVENT, CD_APT_C_AGENT,
	CD_APT_C_INVESTOR, CD_APT_C_KIND, CD_APT_C_START, CD_APT_C_END, CD_APT_C_TZ,
	CD_APT_C_STATUS, CD_APT_C_AUTO, CD_APT_C_COMMENT, CD_APT_C_PROJECT,
	CD_APT_C_PROPERTY, CD_APT_C_CONSULTATION, CD_APT_C_DEADLINE,
	CD_APT_C_CANCELLED_BY, CD_APT_C_CANCEL_REASON, CD_APT_C_OUTCOME, CD_APT_C_OUTCOME_NOTE,
	CD_APT_C_FROM, CD_APT_C_TO, CD_APT_C_DECIDED, CD_APT_C_CANCELLED, CD_APT_C_COMPLETED,
	CD_APT_C_CREATED, CD_APT_C_UPDATED, CD_APT_C_VERSION,
	/* the first appointment of the reschedule chain (itself for a first
	 * booking) and the number of reschedules that led here (0740) */
	CD_APT_C_ORIGINAL, CD_APT_C_RESCHEDULES,
	/* only in CD_APT_VIEW_SQL rows: */
	CD_APT_C_SLOT_STATUS, CD_APT_C_EVENT_STATUS, CD_APT_C_CUTOFF, CD_APT_C__N
};

/* The representation query: CD_APT_COLS + slot status, event status, the slot's
 * cancellation cutoff (minutes).  Append a WHERE clause. */
#define CD_APT_VIEW_SQL \
	"SELECT " CD_APT_COLS ", s.status, e.status, s.cancellation_cutoff_minutes " \
	"FROM calendar.appointments a " \
	"JOIN calendar.availability_slots s ON s.id = a.slot_id " \
	"LEFT JOIN calendar.calendar_events e ON e.id = a.calendar_event_id "

/* Who may see an appointment; NULL members are not restricted. */
struct cd_apt_scope {
	const char *tenant_id;
	const char *agent_user_id;
	const char *investor_user_id;
};

/* ========================================================== appointment.c */

/* Loads and locks (FOR UPDATE OF the appointment) one appointment within
 * scope.  *row has the CD_APT_VIEW_SQL columns, but CD_APT_C_SLOT_STATUS and
 * CD_APT_C_EVENT_STATUS are NULL (only CD_APT_C_CUTOFF is read).
 * 0 with *row, PC_E_NOT_FOUND, PIN_ERR_DB. */
int cd_apt_lock(const char *id, const struct cd_apt_scope *sc, PGresult **row);

/* The representation row (CD_APT_VIEW_SQL) of one appointment within scope.
 * 0 with *row, PC_E_NOT_FOUND, PIN_ERR_DB. */
int cd_apt_fetch(const char *id, const struct cd_apt_scope *sc, PGresult **row);

/* api.md representation of an CD_APT_VIEW_SQL row: every field plus
 * slot {id, status} and event {id, status}.  New object. */
json_object *cd_apt_json(const PGresult *res, int row);

/* A booking request (strings borrowed). */
struct cd_apt_book_req {
	const char *slot_id;
	const char *investor_user_id;
	const char *comment;                  /* NULL = none (class Internal) */
	const char *consultation_request_id;  /* NULL = none */
	/* reschedule only (NULL otherwise): */
	const char *rescheduled_from;         /* the old appointment id */
	const char *old_slot_id;              /* its slot (locked with the new one) */
	const char *same_agent, *same_kind;   /* the new slot must match */
};

/*
 * Book (domain.md "Book"): per-investor advisory lock, rate limit, slot
 * guards, anti-spam (the rescheduled_from appointment does not count), the
 * conditional Available -> Booked update, the CalendarEvent (cd_event_create:
 * Origin = Appointment, default reminders), the appointment row and the
 * outbox messages appointment-created (+ appointment-confirmed for
 * AutoConfirm slots; event-created comes from cd_event_create).
 * 0 with *id_out (arena) of the new appointment; CD_APT_E_*, PIN_ERR_DB.
 */
int cd_apt_book(const struct cd_apt_book_req *b, int64_t now_us, const char **id_out);

/* How an active appointment ends without taking place. */
struct cd_apt_end {
	const char *status;          /* "Declined" | "Cancelled" | "Expired" */
	const char *cancelled_by;    /* "Investor" | "Agent" | "System" */
	const char *reason;          /* DeclinedByAgent | CancelledByAgent |
	                                CancelledByInvestor | Expired |
	                                AgentUnavailable */
	const char *cancel_reason;   /* free text (Internal) or NULL */
	int release_slot;            /* 1: Booked -> Available when StartAt >= now + 60 min */
	const char *rescheduled_to;  /* new appointment id (reschedule) or NULL */
	const char *slot_archive_reason; /* the slot's archive_reason when it is
	                                    archived ("time_off"), or NULL */
};

/*
 * The cascade of decline / cancel / expire on a locked row (cd_apt_lock):
 * the appointment (only from Pending | Confirmed, else PC_E_TRANSITION), the
 * slot (Booked -> Available or Archived), the event -> Cancelled with its
 * Pending reminders -> Skipped (cd_event_transition, event-status-changed),
 * and appointment-cancelled.  0, PC_E_TRANSITION, PIN_ERR_DB.
 */
int cd_apt_end(const PGresult *locked, const struct cd_apt_end *x, int64_t now_us);

/* Pending -> Confirmed (agent) + appointment-confirmed.  0 / PC_E_TRANSITION /
 * CD_APT_E_DEADLINE / PIN_ERR_DB. */
int cd_apt_confirm(const PGresult *locked, int64_t now_us);

/* Confirmed -> Completed | NoShow once now >= StartAt, event -> Completed,
 * appointment-completed.  0 / PC_E_TRANSITION / CD_APT_E_NOT_STARTED / PIN_ERR_DB. */
int cd_apt_complete(const PGresult *locked, const char *outcome, const char *note,
		int64_t now_us);

/*
 * One batch of the appointment-timeout job in its own transaction: up to
 * batch Pending rows with ConfirmDeadlineAt <= now (FOR UPDATE SKIP LOCKED)
 * -> Expired with the cascade.  Returns the number expired or PIN_ERR_DB.
 */
int cd_apt_expire_batch(int64_t now_us, int batch);

/*
 * A departed agent (issue 12, caldomain/agent.h): every Pending appointment
 * of agent_user_id (locked in id order) -> Declined by System with reason
 * AgentUnavailable and the full cascade of cd_apt_end (slot Archived, event
 * Cancelled, reminders Skipped, event-status-changed, appointment-cancelled).
 * Confirmed appointments are not touched.  Runs in the caller's transaction.
 * 0 with *declined, PIN_ERR_DB.
 */
int cd_apt_decline_unavailable(const char *agent_user_id, int64_t now_us, int *declined);

/*
 * An absence of the agent (issue 32, plugins/slots/timeoff.c): every Pending
 * appointment of agent_user_id overlapping [from, to) (timestamptz text
 * params; locked in id order) -> Declined by the agent with reason
 * DeclinedByAgent, the agent's own decline (cd_apt_end: event Cancelled,
 * reminders Skipped, event-status-changed, appointment-cancelled, so the
 * investor is notified as after a decline); the slot is Archived with
 * archive_reason 'time_off', never released.  No CancelReason: the absence's
 * note is the agent's own text and stays out of the messages.  Confirmed
 * appointments are not touched.  Runs in the caller's transaction.
 * 0 with *ids (arena array of *n appointment ids), PIN_ERR_DB.
 */
int cd_apt_decline_time_off(const char *agent_user_id, const char *from, const char *to,
		int64_t now_us, const char ***ids, int *n);

#endif
