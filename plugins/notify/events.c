/* events.c -- consumer group notifications-calendar-events (seed 001):
 * the 9 pin.calendar.*.v1 topics -> notifications.notifications rows, fan-out
 * recipient x channel, in the host's transaction.
 *
 * Steps (seed 001 algorithm): 1. the host did the inbox row (consumer
 * group + messageId: the seed's notifications-calendar:{EventType}:{MessageId})
 * and checks contractVersion (!= 1: a WARN once per version and group, every
 * such message counted in pin_consumer_contract_version_mismatch_total);
 * 2. required fields (else FATAL
 * NTF_INVALID_PAYLOAD -> DLQ); 3. mapping topic -> Kind -> recipients (no-op
 * branches are filtered and acknowledged; unknown Origin/Reason/Status/
 * Outcome: warning, nothing built; unknown Kind: warning, mapped as usual);
 * 4. stale reminder guard; after-final guard; 5. per
 * recipient: settings (overrides, GlobalMute, quiet hours), template
 * (Kind, Locale, Channel, Role) with the ru fallback, contact replica names
 * and the address snapshot (e-mail / phone into the row, dispatch.c);
 * 6. INSERT ... ON CONFLICT DO NOTHING (INV-NTF-1 and the ReminderId key);
 * 7./8. the host commits and acknowledges, or DLQs a FATAL.
 *
 * Logs carry ids only: no names, contacts, texts, Comment or CancelReason. */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "notify.h"


enum topic {
	T_EVENT_CREATED, T_EVENT_RESCHEDULED, T_EVENT_STATUS, T_EVENT_OWNER,
	T_APT_CREATED, T_APT_CONFIRMED, T_APT_CANCELLED, T_APT_COMPLETED,
	T_REMINDER, T__N
};

static const char *const topics[] = {
	PC_TOPIC_EVENT_CREATED,
	PC_TOPIC_EVENT_RESCHEDULED,
	PC_TOPIC_EVENT_STATUS_CHANGED,
	PC_TOPIC_EVENT_OWNER_CHANGED,
	PC_TOPIC_APPOINTMENT_CREATED,
	PC_TOPIC_APPOINTMENT_CONFIRMED,
	PC_TOPIC_APPOINTMENT_CANCELLED,
	PC_TOPIC_APPOINTMENT_COMPLETED,
	PC_TOPIC_REMINDER_DUE,
	NULL
};

#define MAX_RCPT 4

struct rcpt {
	const char *user;
	const char *tenant;     /* the recipient's company or NULL */
	const char *role;       /* template role */
};

struct ctx {
	const struct pin_msg *msg;
	json_object *p;
	enum topic t;
	const char *bad;        /* first invalid field */
	/* payload */
	const char *event_id, *appointment_id, *reminder_id, *tenant_id;
	const char *owner, *client, *agent, *investor, *prev_owner, *prev_tenant;
	const char *origin, *status, *reason, *outcome, *tz, *cancel_reason;
	const char *ekind;      /* the payload's kind (EventKind / AppointmentKind) */
	const char *start, *end, *deadline;     /* payload text of the instants */
	int64_t start_us, end_us;
	const char *original;   /* originalAppointmentId (the reschedule chain) */
	int reschedules;        /* rescheduleCount */
	long long offset_min;
	/* mapping */
	const char *kind, *urgency, *subject_id, *filtered;
	struct rcpt r[MAX_RCPT];
	int n;
	/* applying (apply()): the answer once known, the looked-up data */
	struct pin_consume_result *res;
	enum pin_consume_status st;
	int done;               /* st is the answer */
	const char *skip_reason;        /* an OK without rows: logged at the end */
	int final_rec;          /* the message states a final (record_final) */
	int64_t t0;             /* the host clock when the message was taken */
	char now[40];           /* the same, formatted */
	const char *lt[6];      /* start, end, deadline in ru / en format */
	int user[5];            /* apply's user rows: agent, investor, owner,
	                         * client, previous owner; -1 none */
	int tpl[MAX_RCPT];      /* per recipient: apply's template pair */
	int rows, created;      /* notification rows built / inserted */
	int created_ch[3];      /* inserted per channel (ntf_channels order) */
};

static const char *const nil_uuid = "00000000-0000-0000-0000-000000000000";

/* ------------------------------------------------------------------ logging
 *
 * Seed 001 "Logs": consumed / skipped-duplicate (the host: "consumer:
 * skipped-duplicate", the inbox is its) / filtered (with the branch's
 * reason) / skipped-stale / enqueued (count per channel) / failed, each with
 * messageId, eventType, kind (the NotificationKind, null before it is
 * known) and the recipients' user ids.  Ids and enums only: no names,
 * addresses, texts, Comment or CancelReason. */

/* the recipients' user ids, comma-separated (arena), or NULL when none */
static const char *rcpt_ids(const struct ctx *c)
{
	const char *s = NULL;

	for (int i = 0; i < c->n; i++)
		s = s ? pc_api->sprintf("%s,%s", s, c->r[i].user) : c->r[i].user;
	return s;
}

/* One line of the message: its common fields, then up to four more pairs
 * (a NULL key ends them). */
static void note(const struct ctx *c, int level, const char *what,
		const char *k1, const char *v1, const char *k2, const char *v2,
		const char *k3, const char *v3, const char *k4, const char *v4)
{
	pc_api->log(level, what, "messageId", c->msg->message_id,
			"eventType", c->msg->event_type, "topic", c->msg->topic,
			"kind", c->kind, "recipientUserIds", rcpt_ids(c),
			k1, v1, k2, v2, k3, v3, k4, v4, NULL);
}

/* ----------------------------------------------------------- payload getters */

static int present(json_object *p, const char *key, json_object **v)
{
	return json_object_object_get_ex(p, key, v) && *v &&
		!json_object_is_type(*v, json_type_null);
}

static const char *f_str(struct ctx *c, const char *key, int required)
{
	json_object *v;

	if (!present(c->p, key, &v)) {
		if (required && !c->bad)
			c->bad = key;
		return NULL;
	}
	if (!json_object_is_type(v, json_type_string) || !*json_object_get_string(v)) {
		if (!c->bad)
			c->bad = key;
		return NULL;
	}
	return json_object_get_string(v);
}

static const char *f_uuid(struct ctx *c, const char *key, int required)
{
	const char *s = f_str(c, key, required);

	if (s && (!pc_api->is_uuid(s) || !strcmp(s, nil_uuid))) {
		if (!c->bad)
			c->bad = key;
		return NULL;
	}
	return s;
}

static const char *f_time(struct ctx *c, const char *key, int required, int64_t *us)
{
	const char *s = f_str(c, key, required);
	int64_t v;

	if (s && pc_api->parse_time(s, &v) != 0) {
		if (!c->bad)
			c->bad = key;
		return NULL;
	}
	if (s && us)
		*us = v;
	return s;
}

/* The reschedule chain of an appointment-* payload (optional, issue 32):
 * originalAppointmentId and rescheduleCount, for the invitation's UID and
 * SEQUENCE (invite.c).  Absent (a producer of the previous release): the
 * appointment's own id and 0. */
static void read_chain(struct ctx *c)
{
	json_object *v;

	c->original = f_uuid(c, "originalAppointmentId", 0);
	if (present(c->p, "rescheduleCount", &v)) {
		int64_t n = json_object_get_int64(v);

		if (!json_object_is_type(v, json_type_int) || n < 0 || n > 1000000) {
			if (!c->bad)
				c->bad = "rescheduleCount";
		} else {
			c->reschedules = (int)n;
		}
	}
}

/* Reads the fields of the contract (events.md) that the mapping uses. */
static void read_payload(struct ctx *c)
{
	int ev = c->t <= T_EVENT_OWNER || c->t == T_REMINDER;
	int apt = c->t >= T_APT_CREATED && c->t <= T_APT_COMPLETED;
	json_object *v;

	c->tenant_id = f_uuid(c, "tenantId", 1);
	c->event_id = f_uuid(c, "eventId", ev || (apt && c->t != T_APT_COMPLETED));
	c->appointment_id = f_uuid(c, "appointmentId", apt);
	if (ev) {
		c->owner = f_uuid(c, "ownerUserId", 1);
		c->client = f_uuid(c, "clientUserId", 0);
		c->origin = f_str(c, "origin", c->t != T_REMINDER);
	} else {
		c->agent = f_uuid(c, "agentUserId", 1);
		c->investor = f_uuid(c, "investorUserId", 1);
	}
	c->start = f_time(c, "startAt", 1, &c->start_us);
	c->ekind = f_str(c, "kind", 0);
	if (c->t != T_APT_COMPLETED) {
		c->tz = f_str(c, "timeZone", 1);
		c->end = f_time(c, "endAt", 0, &c->end_us);
	}
	if (apt)
		read_chain(c);
	switch (c->t) {
	case T_EVENT_STATUS:
		c->status = f_str(c, "status", 1);
		c->cancel_reason = f_str(c, "cancelReason", 0);
		break;
	case T_EVENT_OWNER:
		c->prev_owner = f_uuid(c, "previousOwnerUserId", 1);
		c->prev_tenant = f_uuid(c, "previousTenantId", 0);
		break;
	case T_APT_CREATED:
		c->status = f_str(c, "status", 1);
		c->deadline = f_time(c, "confirmDeadlineAt", 0, NULL);
		(void)f_uuid(c, "rescheduledFromAppointmentId", 0);
		break;
	case T_APT_CANCELLED:
		c->reason = f_str(c, "reason", 1);
		(void)f_uuid(c, "rescheduledToAppointmentId", 0);
		break;
	case T_APT_COMPLETED:
		c->outcome = f_str(c, "outcome", 0);
		break;
	case T_REMINDER:
		c->reminder_id = f_uuid(c, "reminderId", 1);
		if (!present(c->p, "offsetMinutes", &v) || !json_object_is_type(v, json_type_int) ||
		    (c->offset_min = json_object_get_int64(v)) < 0 || c->offset_min > 1000000) {
			if (!c->bad)
				c->bad = "offsetMinutes";
		}
		break;
	default:
		break;
	}
	if (c->tz && !c->bad) {
		const char *canon;
		int rc = pc_tz_lookup(c->tz, &canon);

		if (rc == 0)
			c->tz = canon;
		else if (rc == PC_E_TZ)
			c->bad = "timeZone";
	}
}

/* ------------------------------------------------------------------ mapping */

static void add(struct ctx *c, const char *user, const char *tenant, const char *role)
{
	int i;

	if (!user)
		return;
	for (i = 0; i < c->n; i++)      /* owner = agent: one notification */
		if (!strcmp(c->r[i].user, user))
			return;
	if (c->n < MAX_RCPT) {
		c->r[c->n].user = user;
		c->r[c->n].tenant = tenant;
		c->r[c->n].role = role;
		c->n++;
	}
}

static int known_origin(const char *o)
{
	return !strcmp(o, "Manual") || !strcmp(o, "Appointment") || !strcmp(o, "CrmBooking");
}

static int has(struct ctx *c, const char *key)
{
	json_object *v;

	return present(c->p, key, &v);
}

static int in(const char *v, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(v, *set))
			return 1;
	return 0;
}

/* The contracts' enums (events.md, api/asyncapi.yaml) that the mapping reads. */
static const char *const event_kinds[] = {
	"Showing", "Consultation", "Meeting", "Task", "BookingDeadline", NULL
};
static const char *const appointment_kinds[] = { "Showing", "Consultation", NULL };
static const char *const event_statuses[] = {
	"Planned", "InProgress", "Completed", "Cancelled", NULL
};
static const char *const appointment_created_statuses[] = { "Pending", "Confirmed", NULL };
static const char *const outcomes[] = { "Completed", "NoShow", NULL };

/*
 * A value outside the contract's enum (seed 001 step 3: warning + the
 * contract's fail-safe reaction, never the DLQ): a WARN line (messageId,
 * eventType, topic, field, the value cut to 64 bytes: an enum, no PII) and
 * notifications_unknown_enum_total{field}.  filtered: the no-op branch the
 * message takes (nothing built, acknowledged), or NULL when the value does
 * not choose the branch (the payload's kind: the message is mapped as
 * usual).
 */
static void unknown_enum(struct ctx *c, const char *field, const char *value,
		const char *filtered)
{
	pc_api->log(PIN_LOG_WARN, filtered ?
			"notifications: unknown enum value, nothing built" :
			"notifications: unknown enum value, mapped as usual",
			"messageId", c->msg->message_id, "eventType", c->msg->event_type,
			"topic", c->msg->topic, "field", field,
			"value", pc_api->sprintf("%.64s", value), NULL);
	pc_api->metric_add("notifications_unknown_enum_total",
			pc_api->sprintf("field=\"%s\"", field), 1);
	if (filtered)
		c->filtered = filtered;
}

/* The mapping of one topic: kind and recipients, or c->filtered. */

static void map_event_created(struct ctx *c, const char *o)
{
	if (strcmp(o, "CrmBooking") != 0) {
		c->filtered = !strcmp(o, "Manual") ? "origin-manual" : "origin-appointment";
		return;
	}
	c->kind = "CalendarReminder";
	add(c, c->owner, c->tenant_id, "Owner.BookingDeadline");
}

static void map_event_rescheduled(struct ctx *c, const char *o)
{
	c->kind = "CalendarEventRescheduled";
	if (!strcmp(o, "Manual")) {
		if (!c->client)
			c->filtered = "no-client";
		add(c, c->client, NULL, "Client");
	} else if (!strcmp(o, "CrmBooking")) {
		add(c, c->owner, c->tenant_id, "Owner.BookingDeadline");
	} else {
		c->filtered = "origin-appointment";
	}
}

static void map_event_status(struct ctx *c, const char *o)
{
	c->kind = "AppointmentCancelled";
	if (!in(c->status, event_statuses))
		unknown_enum(c, "status", c->status, "unknown-status");
	else if (strcmp(c->status, "Cancelled") != 0)
		c->filtered = "status-not-cancelled";
	else if (!strcmp(o, "Manual") && c->client)
		add(c, c->client, NULL, "Client");
	else if (!strcmp(o, "CrmBooking"))
		add(c, c->owner, c->tenant_id, "Owner.BookingDeadline");
	else
		c->filtered = !strcmp(o, "Manual") ? "no-client" : "origin-appointment";
}

static void map_event_owner(struct ctx *c, const char *o)
{
	if (!strcmp(o, "Appointment")) {
		c->filtered = "origin-appointment";
		return;
	}
	c->kind = "CalendarEventOwnerChanged";
	add(c, c->owner, c->tenant_id, "Owner");
	add(c, c->prev_owner, c->prev_tenant ? c->prev_tenant : c->tenant_id,
			"PreviousOwner");
}

static void map_apt_created(struct ctx *c)
{
	int pending = !strcmp(c->status, "Pending");
	int moved = has(c, "rescheduledFromAppointmentId");

	c->kind = "AppointmentCreated";
	if (!in(c->status, appointment_created_statuses)) {
		/* neither "confirm it" nor "confirmed" would be true */
		unknown_enum(c, "status", c->status, "unknown-status");
		return;
	}
	add(c, c->agent, c->tenant_id, moved ?
			(pending ? "Agent.RescheduledPending" : "Agent.Rescheduled") :
			(pending ? "Agent.Pending" : "Agent.Confirmed"));
	add(c, c->investor, NULL, moved ? "Investor.Rescheduled" : "Investor");
}

static void map_apt_cancelled(struct ctx *c)
{
	c->kind = "AppointmentCancelled";
	if (has(c, "rescheduledToAppointmentId")) {
		c->filtered = "rescheduled";
	} else if (!strcmp(c->reason, "DeclinedByAgent")) {
		add(c, c->investor, NULL, "Investor.DeclinedByAgent");
	} else if (!strcmp(c->reason, "CancelledByAgent")) {
		add(c, c->investor, NULL, "Investor.CancelledByAgent");
	} else if (!strcmp(c->reason, "CancelledByInvestor")) {
		add(c, c->agent, c->tenant_id, "Agent.CancelledByInvestor");
	} else if (!strcmp(c->reason, "Expired")) {
		add(c, c->investor, NULL, "Investor.Expired");
		add(c, c->agent, c->tenant_id, "Agent.Expired");
	} else if (!strcmp(c->reason, "AgentUnavailable")) {
		/* issue 12: the agent left; the investor is told (additive value) */
		add(c, c->investor, NULL, "Investor.AgentUnavailable");
	} else {
		unknown_enum(c, "reason", c->reason, "unknown-reason");
	}
}

static void map_reminder(struct ctx *c)
{
	c->urgency = "Critical";
	c->appointment_id = f_uuid(c, "appointmentId", 0);
	c->kind = c->appointment_id ? "AppointmentReminder" : "CalendarReminder";
	add(c, c->owner, c->tenant_id, "Owner");
	add(c, c->client, NULL, "Client");
}

/* Fills kind/urgency/recipients or sets c->filtered (reason).  Unknown enum
 * values: warning + filtered (fail-safe). */
static void map(struct ctx *c)
{
	const char *o = c->origin;

	c->urgency = "Normal";
	if (o && !known_origin(o)) {
		/* better skip than duplicate (seed 001) */
		unknown_enum(c, "origin", o, "unknown-origin");
		return;
	}
	/* the kind chooses no branch (the origin and the topic do): warned,
	 * mapped as usual */
	if (c->ekind && !in(c->ekind, c->t >= T_APT_CREATED && c->t <= T_APT_COMPLETED ?
			appointment_kinds : event_kinds))
		unknown_enum(c, "kind", c->ekind, NULL);
	c->subject_id = c->t >= T_APT_CREATED && c->t <= T_APT_COMPLETED ?
			c->appointment_id : c->event_id;
	switch (c->t) {
	case T_EVENT_CREATED:     map_event_created(c, o); return;
	case T_EVENT_RESCHEDULED: map_event_rescheduled(c, o); return;
	case T_EVENT_STATUS:      map_event_status(c, o); return;
	case T_EVENT_OWNER:       map_event_owner(c, o); return;
	case T_APT_CREATED:       map_apt_created(c); return;
	case T_APT_CONFIRMED:
		c->kind = "AppointmentConfirmed";
		add(c, c->investor, NULL, "Investor");
		return;
	case T_APT_CANCELLED:     map_apt_cancelled(c); return;
	case T_APT_COMPLETED:
		/* no-op in v1 either way; an unknown outcome records no final state */
		if (c->outcome && !in(c->outcome, outcomes))
			unknown_enum(c, "outcome", c->outcome, "unknown-outcome");
		else
			c->filtered = "appointment-completed";
		return;
	case T_REMINDER:          map_reminder(c); return;
	default:
		c->subject_id = NULL;
		c->filtered = "unknown-topic";
	}
}

/* ------------------------------------------------------------ materialising */

static const char *payload_keys[] = {
	"eventId", "appointmentId", "reminderId", "slotId", "tenantId", "kind", "origin",
	"status", "reason", "outcome", "startAt", "endAt", "timeZone", "offsetMinutes",
	"confirmDeadlineAt", "dealId", "bookingId", "projectId", "propertyObjectId",
	"rescheduledFromAppointmentId", NULL
};

/* The notification's payload: ids, times, offsets (no PII, no Comment or
 * CancelReason).  Text, arena. */
static const char *notification_payload(struct ctx *c, const char *role)
{
	json_object *o = json_object_new_object(), *v;
	const char *s;
	size_t i;

	for (i = 0; payload_keys[i]; i++)
		if (present(c->p, payload_keys[i], &v))
			json_object_object_add(o, payload_keys[i], json_object_get(v));
	json_object_object_add(o, "sourceTopic", json_object_new_string(c->msg->topic));
	json_object_object_add(o, "recipientRole", json_object_new_string(role));
	s = pc_api->strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
	json_object_put(o);
	return s;
}

static const char *deep_link(struct ctx *c)
{
	if (c->appointment_id)
		return pc_api->sprintf("/calendar/appointments/%s", c->appointment_id);
	return pc_api->sprintf("/calendar/events/%s", c->event_id);
}

/* ------------------------------------------------- applying one or a run */

/*
 * apply() does the database part of a group of classified messages -- one
 * message on the per-message path, a run of the set path -- in a fixed
 * number of statements whatever the group's size (since 2026-12-02; before: about
 * 10 per reminder):
 *   ntf_msgs   the after-final guard and the local times of every message
 *              to enqueue;
 *   ntf_users  per (message, involved user): the contact replica's name and
 *              the effective settings at the message's now;
 *   ntf_tpl    the Active templates of the group's (kind, role) pairs
 *              (read per group, in the transaction: no cache to invalidate);
 *   ntf_final_record  per message that states a final (the set path
 *              applies such a message alone);
 *   ntf_insert every notification row of the group, ON CONFLICT DO NOTHING,
 *              in message order, RETURNING which message each new row is of.
 * A message without an Active template for one of its recipients is FATAL
 * before anything of it is written.  A failed statement: every message of
 * the group still open gets RETRY NTF_DB_ERROR (the set path gives up).
 */

/* the input rows of a statement, as JSON text (sdk/jtext) */
static const char *jt_text(struct pc_jt *w)
{
	size_t len;
	char *t = pc_jt_take(w, &len), *s;

	if (!t)
		return NULL;
	s = pc_api->strdup(t);
	free(t);
	return s;
}

/* Closes the array of rows in w (k of them): its text (request arena) for
 * the statement's $1, or NULL with *rc = 0 when there is none (nothing to
 * ask), PIN_ERR_DB when out of memory.  w is freed either way. */
static const char *jt_rows(struct pc_jt *w, int k, int *rc)
{
	const char *t;

	pc_jt_end_arr(w);
	if (!k) {
		pc_jt_free(w);
		*rc = 0;
		return NULL;
	}
	t = jt_text(w);
	*rc = t ? 0 : PIN_ERR_DB;
	return t;
}

/* The message failed on the database: RETRY (the partition is held). */
static void db_fail(struct ctx *c, const char *detail)
{
	note(c, PIN_LOG_WARN, "notifications: failed", "code", "NTF_DB_ERROR",
			"retriable", "true", "detail", detail, NULL, NULL);
	c->done = 1;
	c->st = pc_consume_fail(NULL, c->res, PIN_CONSUME_RETRY, "NTF_DB_ERROR", detail, NULL);
}

/* the message still needs its rows (its answer is not known yet) */
static int pending(const struct ctx *c)
{
	return !c->done;
}

static int db_fail_all(struct ctx **cs, size_t n, const char *detail)
{
	for (size_t i = 0; i < n; i++)
		if (pending(cs[i]) || cs[i]->final_rec)
			db_fail(cs[i], detail);
	return PIN_ERR_DB;
}

/* A message (not itself final) about a subject whose final state is
 * recorded builds nothing (seeds 001, 002: cross-topic order is not
 * guaranteed). */
static int guarded(const struct ctx *c)
{
	return c->t != T_EVENT_STATUS && c->t != T_APT_CANCELLED && c->t != T_APT_COMPLETED;
}

/* ntf_msgs: after-final states and local times of the open messages. */
static int load_msgs(struct ctx **cs, size_t n)
{
	struct pc_jt w;
	const char *p[1];
	PGresult *r;
	size_t i;
	int k = 0, rc;

	pc_jt_init(&w, 256 * n);
	pc_jt_arr(&w);
	for (i = 0; i < n; i++) {
		struct ctx *c = cs[i];

		if (!pending(c))
			continue;
		pc_jt_obj(&w);
		pc_batch_row_str(&w, "e", guarded(c) ? c->event_id : NULL);
		pc_batch_row_str(&w, "a", guarded(c) ? c->appointment_id : NULL);
		pc_batch_row_str(&w, "s", c->start);
		pc_batch_row_str(&w, "en", c->end);
		pc_batch_row_str(&w, "d", c->deadline);
		pc_batch_row_str(&w, "tz", c->tz);
		pc_jt_end_obj(&w);
		k++;
	}
	if (!(p[0] = jt_rows(&w, k, &rc)))
		return rc;
	r = pc_api->db_exec_prepared("ntf_msgs",
		"SELECT (SELECT f.final_state FROM notifications.subject_final_states f "
		"    WHERE f.subject_id IN (x.e, x.a) LIMIT 1), "
		"  to_char(x.s AT TIME ZONE x.tz, 'DD.MM.YYYY HH24:MI'), "
		"  to_char(x.s AT TIME ZONE x.tz, 'Mon FMDD, YYYY FMHH12:MI AM'), "
		"  to_char(x.en AT TIME ZONE x.tz, 'DD.MM.YYYY HH24:MI'), "
		"  to_char(x.en AT TIME ZONE x.tz, 'Mon FMDD, YYYY FMHH12:MI AM'), "
		"  to_char(x.d AT TIME ZONE x.tz, 'DD.MM.YYYY HH24:MI'), "
		"  to_char(x.d AT TIME ZONE x.tz, 'Mon FMDD, YYYY FMHH12:MI AM') "
		"FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (e uuid, a uuid, "
		"  s timestamptz, en timestamptz, d timestamptz, tz text)) "
		"  WITH ORDINALITY AS x(e, a, s, en, d, tz, n) ORDER BY x.n", 1, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK) || PQntuples(r) != k)
		return PIN_ERR_DB;
	for (i = 0, k = 0; i < n; i++) {
		struct ctx *c = cs[i];
		const char *state;

		if (!pending(c))
			continue;
		state = pc_col(r, k, 0);
		/* [0] ru, [1] en of start, end, deadline */
		for (int j = 0; j < 6; j++)
			c->lt[j] = pc_col(r, k, 1 + j);
		k++;
		if (state) {
			note(c, PIN_LOG_WARN, "notifications: skipped-stale",
					"reason", "after-final", "finalState", state,
					NULL, NULL, NULL, NULL);
			pc_api->metric_add("notifications_skipped_total",
					"reason=\"after-final\"", 1);
			c->done = 1;
			c->st = PIN_CONSUME_OK;
		}
	}
	return 0;
}

/* ntf_users: per open message and involved user its name, settings and
 * addresses.  Columns: 0 locale, 1 mute, 2-4 the InApp / Email / Sms
 * overrides, 5 quiet_end, 6 deleted, 7 name, 8 email, 9 phone (PII: only
 * into the rows' address snapshot, never logged).
 * The contact rows are read FOR KEY SHARE, held to the group's COMMIT (the
 * weakest lock that an erasure's FOR UPDATE waits for; a contact's ordinary
 * update does not wait for it): an
 * erasure (contacts.c) locks its row FOR UPDATE first, so it either
 * commits before this read (which then sees the tombstone: no name, no
 * address) or waits for the rows written from it and deletes / redacts
 * them.  Read without the lock, a group's transaction could take the name
 * and address before the erasure and commit its rows after it, out of the
 * erasure's reach (team/departed deleted_agent_erased saw it about one run
 * in ten). */
static int load_users(struct ctx **cs, size_t n, PGresult **out)
{
	struct pc_jt w;
	const char *p[1];
	PGresult *r;
	int k = 0, rc;

	*out = NULL;
	pc_jt_init(&w, 128 * n);
	pc_jt_arr(&w);
	for (size_t i = 0; i < n; i++) {
		struct ctx *c = cs[i];
		const char *u[5] = { c->agent, c->investor, c->owner, c->client, c->prev_owner };

		for (int j = 0; j < 5; j++) {
			c->user[j] = -1;
			if (!pending(c) || !u[j])
				continue;
			for (int e = 0; e < j && c->user[j] < 0; e++)      /* owner = agent */
				if (u[e] && !strcmp(u[e], u[j]))
					c->user[j] = c->user[e];
			if (c->user[j] >= 0)
				continue;
			pc_jt_obj(&w);
			pc_batch_row_str(&w, "u", u[j]);
			pc_batch_row_str(&w, "k", c->kind);
			pc_batch_row_str(&w, "now", c->now);
			pc_jt_end_obj(&w);
			c->user[j] = k++;
		}
	}
	if (!(p[0] = jt_rows(&w, k, &rc)))
		return rc;
	r = pc_api->db_exec_prepared("ntf_users",
		"WITH q AS MATERIALIZED ("
		"  SELECT * FROM ROWS FROM (jsonb_to_recordset($1::jsonb) AS (u uuid, k text, "
		"    now timestamptz)) WITH ORDINALITY AS q(u, k, now, n)), "
		"ct AS MATERIALIZED ("
		"  SELECT c.* FROM notifications.recipient_contacts c "
		"   WHERE c.user_id IN (SELECT q.u FROM q) ORDER BY c.user_id FOR KEY SHARE), "
		"x AS ("
		"  SELECT q.n, q.now, ct.display_name AS name, "
		"    coalesce(s.locale, ct.locale, 'ru') AS locale, "
		"    coalesce(s.time_zone, ct.time_zone, 'Europe/Moscow') AS tz, "
		"    coalesce(s.global_mute, false) AS mute, "
		"    coalesce(s.overrides -> q.k, '{}'::jsonb) AS ovr, "
		"    s.quiet_from AS qf, s.quiet_to AS qt, "
		"    ct.status IS NOT DISTINCT FROM 'Deleted' AS deleted, "
		"    nullif(ct.email, '') AS email, nullif(ct.phone, '') AS phone "
		"  FROM q "
		"  LEFT JOIN notifications.user_notification_settings s ON s.user_id = q.u "
		"  LEFT JOIN ct ON ct.user_id = q.u) "
		"SELECT x.locale, x.mute, coalesce(x.ovr ->> 'InApp', ''), "
		"  coalesce(x.ovr ->> 'Email', ''), coalesce(x.ovr ->> 'Sms', ''), "
		"  CASE WHEN x.qf IS NULL THEN NULL "
		"    WHEN (CASE WHEN x.qf < x.qt THEN b.lt >= x.qf AND b.lt < x.qt "
		"               ELSE b.lt >= x.qf OR b.lt < x.qt END) "
		"    THEN (CASE WHEN b.lt < x.qt THEN b.ld + x.qt ELSE b.ld + 1 + x.qt END) "
		"         AT TIME ZONE x.tz END, x.deleted, x.name, x.email, x.phone "
		"FROM x, LATERAL (SELECT x.now AT TIME ZONE x.tz AS lts) a, "
		"  LATERAL (SELECT a.lts::time AS lt, a.lts::date AS ld) b "
		"ORDER BY x.n", 1, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK) || PQntuples(r) != k)
		return PIN_ERR_DB;
	*out = r;
	return 0;
}

/* The (kind, role) pairs of a group's recipients. */
#define TPL_PAIRS_MAX 128
struct tpl_pairs {
	const char *kind[TPL_PAIRS_MAX], *role[TPL_PAIRS_MAX];
	int n;
	const PGresult *r;      /* kind, role, channel, title, body, locale */
};

static int tpl_pair(struct tpl_pairs *tp, const char *kind, const char *role)
{
	int i;

	for (i = 0; i < tp->n; i++)
		if (!strcmp(tp->kind[i], kind) && !strcmp(tp->role[i], role))
			return i;
	if (tp->n == TPL_PAIRS_MAX)
		return -1;
	tp->kind[tp->n] = kind;
	tp->role[tp->n] = role;
	return tp->n++;
}

/* ntf_tpl: the Active templates of the open messages' (kind, role) pairs
 * (every channel and locale; uq_notification_templates makes (kind, role,
 * channel, locale) unique). */
static int load_templates(struct ctx **cs, size_t n, struct tpl_pairs *tp)
{
	struct pc_jt w;
	const char *p[1];
	PGresult *r;

	tp->n = 0;
	tp->r = NULL;
	for (size_t i = 0; i < n; i++)
		for (int j = 0; pending(cs[i]) && j < cs[i]->n; j++)
			if ((cs[i]->tpl[j] = tpl_pair(tp, cs[i]->kind, cs[i]->r[j].role)) < 0)
				return PIN_ERR_DB;      /* more than a batch can hold */
	if (!tp->n)
		return 0;
	pc_jt_init(&w, 64 * (size_t)tp->n);
	pc_jt_arr(&w);
	for (int i = 0; i < tp->n; i++) {
		pc_jt_obj(&w);
		pc_batch_row_str(&w, "k", tp->kind[i]);
		pc_batch_row_str(&w, "r", tp->role[i]);
		pc_jt_end_obj(&w);
	}
	pc_jt_end_arr(&w);
	if (!(p[0] = jt_text(&w)))
		return PIN_ERR_DB;
	r = pc_api->db_exec_prepared("ntf_tpl",
		"SELECT t.kind, t.role, t.channel, t.title_template, t.body_template, t.locale "
		"FROM notifications.notification_templates t "
		"WHERE t.status = 'Active' AND (t.kind, t.role) IN "
		"  (SELECT x.k, x.r FROM jsonb_to_recordset($1::jsonb) AS x(k text, r text))",
		1, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	tp->r = r;
	return 0;
}

static int tpl_match(const struct tpl_pairs *tp, int pair, int row)
{
	return !strcmp(PQgetvalue(tp->r, row, 0), tp->kind[pair]) &&
		!strcmp(PQgetvalue(tp->r, row, 1), tp->role[pair]);
}

/* non-zero when the pair has an Active template (any channel, locale) */
static int tpl_any(const struct tpl_pairs *tp, int pair)
{
	for (int i = 0; tp->r && i < PQntuples(tp->r); i++)
		if (tpl_match(tp, pair, i))
			return 1;
	return 0;
}

/* The template of channel for locale among the pair's: the locale itself,
 * else its language (the part before '-'), else ru.  *title, *body, *loc
 * all NULL when there is none. */
static void template_pick(const struct tpl_pairs *tp, int pair, const char *channel,
		const char *locale, const char **title, const char **body, const char **loc)
{
	size_t lang = strcspn(locale, "-");
	int best = 3;

	*title = *body = *loc = NULL;
	for (int i = 0; i < PQntuples(tp->r); i++) {
		const char *l = PQgetvalue(tp->r, i, 5);
		int pref;

		if (!tpl_match(tp, pair, i) || strcmp(PQgetvalue(tp->r, i, 2), channel) != 0)
			continue;
		if (!strcmp(l, locale))
			pref = 0;
		else if (strlen(l) == lang && !strncmp(l, locale, lang))
			pref = 1;
		else if (!strcmp(l, "ru"))
			pref = 2;
		else
			continue;
		if (pref < best) {
			best = pref;
			*title = PQgetvalue(tp->r, i, 3);
			*body = PQgetvalue(tp->r, i, 4);
			*loc = l;
		}
	}
}

static const char *final_state_of(const struct ctx *c, const char **type)
{
	*type = "Appointment";
	switch (c->t) {
	case T_EVENT_STATUS:
		*type = "CalendarEvent";
		if (!strcmp(c->status, "Cancelled") || !strcmp(c->status, "Completed"))
			return c->status;
		return NULL;
	case T_APT_CANCELLED:
		/* every reason ends the appointment (a reschedule too: its old side) */
		return !strcmp(c->reason, "Expired") ? "Expired" : "Cancelled";
	case T_APT_COMPLETED:
		if (c->outcome && (!strcmp(c->outcome, "Completed") ||
				!strcmp(c->outcome, "NoShow")))
			return c->outcome;
		return NULL;
	default:
		return NULL;
	}
}

/* Records the final state a final message states, whatever the mapping
 * builds (a filtered cancellation is a final fact as well); the first final
 * fact of a subject wins.  0 / PIN_ERR_DB. */
static int record_final(const struct ctx *c, int64_t now_us)
{
	const char *type, *state = final_state_of(c, &type), *p[5];
	PGresult *r;

	if (!state)
		return 0;
	p[0] = c->t == T_EVENT_STATUS ? c->event_id : c->appointment_id;
	p[1] = type;
	p[2] = state;
	p[3] = c->msg->message_id;
	p[4] = pc_time_param(now_us);
	r = pc_api->db_exec_prepared("ntf_final_record",
		"INSERT INTO notifications.subject_final_states (subject_id, subject_type, "
		"  final_state, source_message_id, recorded_at) "
		"VALUES ($1::uuid, $2, $3, $4::uuid, $5::timestamptz) ON CONFLICT DO NOTHING",
		5, p);
	return pc_res_ok(r, PGRES_COMMAND_OK) ? 0 : PIN_ERR_DB;
}

static int default_channel(const char *kind, int ch)
{
	return ch != 2 || !strcmp(kind, "AppointmentReminder");
}

/* The name of involved user j (agent, investor, owner, client, previous
 * owner) from the contact replica, or NULL (none, or erased). */
static const char *name_of(const struct ctx *c, const PGresult *users, int j)
{
	return c->user[j] < 0 ? NULL : pc_col(users, c->user[j], 7);
}

/* The manage link of recipient rc (issue 32 item 3): only the investor's
 * messages about an appointment that can still be cancelled (created,
 * moved, confirmed, its reminder); NULL otherwise or when links are off. */
static const char *manage_url(const struct ctx *c, const struct rcpt *rc, const char *loc,
		int purpose)
{
	const char *investor = c->t == T_REMINDER ? c->client : c->investor;

	if (!c->appointment_id || !investor || strcmp(rc->user, investor) != 0 ||
	    (c->t != T_APT_CREATED && c->t != T_APT_CONFIRMED && c->t != T_REMINDER))
		return NULL;
	return ntf_manage_url(purpose, c->appointment_id, investor, c->start_us, loc);
}

/* Renders the title and body templates for locale loc (in place); a body
 * line with {{manageUrl}} / {{rescheduleUrl}} is left out when rc gets no
 * link. */
static void render(const struct ctx *c, const struct rcpt *rc, const PGresult *users,
		const char *loc, const char **title, const char **body)
{
	const char *manage = manage_url(c, rc, loc, PC_MANAGE_CANCEL);
	const char *move = manage && strstr(*body, "{{rescheduleUrl}}") ?
			manage_url(c, rc, loc, PC_MANAGE_RESCHEDULE) : NULL;
	int ru = !strncmp(loc, "ru", 2), en = !ru;
	const char *fallback = ru ? "(имя не указано)" : "(name unknown)";
	const char *reason = c->cancel_reason ? c->cancel_reason :
			ru ? "не указана" : "not specified";
	const char *nm[5];
	char offset[32];

	for (int j = 0; j < 5; j++)
		nm[j] = name_of(c, users, j);
	ntf_offset_text((int)c->offset_min, loc, offset, sizeof(offset));
	{
		struct ntf_var v[] = {
			{ "start", c->lt[0 + en] },
			{ "end", c->lt[2 + en] },
			{ "confirmDeadline", c->lt[4 + en] },
			{ "timeZone", c->tz },
			{ "offset", offset },
			{ "agentName", nm[0] ? nm[0] : fallback },
			{ "investorName", nm[1] ? nm[1] : fallback },
			{ "ownerName", nm[2] ? nm[2] : fallback },
			{ "clientName", nm[3] ? nm[3] : fallback },
			{ "previousOwnerName", nm[4] ? nm[4] : fallback },
			{ "cancelReason", reason },
			{ "manageUrl", manage },
			{ "rescheduleUrl", move },
		};
		size_t nv = sizeof(v) / sizeof(v[0]);

		if (!manage && strstr(*body, "{{manageUrl}}"))
			*body = ntf_drop_lines(*body, "{{manageUrl}}");
		if (!move && strstr(*body, "{{rescheduleUrl}}"))
			*body = ntf_drop_lines(*body, "{{rescheduleUrl}}");

		*title = ntf_render(*title, v, nv);
		*body = ntf_render(*body, v, nv);
	}
}

/* The row of users (ntf_users) of recipient rc of c. */
static int rcpt_row(const struct ctx *c, const struct rcpt *rc)
{
	const char *u[5] = { c->agent, c->investor, c->owner, c->client, c->prev_owner };

	for (int j = 0; j < 5; j++)
		if (u[j] && !strcmp(u[j], rc->user))
			return c->user[j];
	return -1;
}

/* One notification row (an element of ntf_insert's input) of message m. */
static void note_row(struct pc_jt *w, size_t m, const struct ctx *c,
		const struct rcpt *rc, const char *channel, const char *title,
		const char *body, const char *locale, const char *not_before,
		const char *link, const char *payload, const char *address,
		const char *calendar)
{
	char id[37];

	pc_api->uuid_v7(id);
	pc_jt_obj(w);
	PC_JT_KV(w, "m", pc_jt_int(w, (int64_t)m));
	pc_batch_row_str(w, "id", id);
	pc_batch_row_str(w, "u", rc->user);
	pc_batch_row_str(w, "tn", rc->tenant);
	pc_batch_row_str(w, "k", c->kind);
	pc_batch_row_str(w, "ch", channel);
	pc_batch_row_str(w, "g", c->urgency);
	pc_batch_row_str(w, "r", rc->role);
	pc_batch_row_str(w, "ti", title);
	pc_batch_row_str(w, "b", body);
	pc_batch_row_str(w, "dl", link);
	PC_JT_K(w, "p");
	if (payload)
		pc_jt_raw(w, payload, strlen(payload));
	else            /* out of memory: the rows' text is unusable, the group fails */
		w->failed = 1;
	pc_batch_row_str(w, "l", locale);
	pc_batch_row_str(w, "nb", not_before);
	pc_batch_row_str(w, "s", c->msg->message_id);
	pc_batch_row_str(w, "e", c->msg->event_type ? c->msg->event_type : c->msg->topic);
	pc_batch_row_str(w, "sj", c->subject_id);
	pc_batch_row_str(w, "rm", c->reminder_id);
	pc_batch_row_str(w, "c", c->now);
	pc_batch_row_str(w, "ad", address);
	pc_batch_row_str(w, "ic", calendar);
	pc_jt_end_obj(w);
}

/* The iCalendar invitation of an Email row (invite.c, issue 32 item 2):
 * for the appointment messages that book, confirm, move or cancel, to the
 * agent and the investor; NULL for everything else.  The status the
 * invitation states: the payload's (appointment-created: Pending or
 * Confirmed), Confirmed, Cancelled. */
static const char *invitation(const struct ctx *c, const struct rcpt *rc,
		const PGresult *users, const char *loc, const char *body)
{
	struct ntf_invite iv;

	if (c->t != T_APT_CREATED && c->t != T_APT_CONFIRMED && c->t != T_APT_CANCELLED)
		return NULL;
	if (c->user[0] < 0 || c->user[1] < 0)
		return NULL;
	memset(&iv, 0, sizeof iv);
	iv.appointment_id = c->appointment_id;
	iv.original_id = c->original;
	iv.reschedules = c->reschedules;
	iv.status = c->t == T_APT_CREATED ? c->status :
			c->t == T_APT_CONFIRMED ? "Confirmed" : "Cancelled";
	iv.kind = c->ekind;
	iv.start_us = c->start_us;
	iv.end_us = c->end_us;
	/* DTSTAMP: when the change happened (a replay builds the same text) */
	iv.stamp_us = c->msg->created_at_us > 0 ? c->msg->created_at_us : c->t0;
	iv.for_agent = !strncmp(rc->role, "Agent", 5);
	iv.locale = loc;
	iv.agent_name = name_of(c, users, 0);
	iv.agent_email = pc_col(users, c->user[0], 8);
	iv.investor_name = name_of(c, users, 1);
	iv.investor_email = pc_col(users, c->user[1], 8);
	iv.description = body;
	return ntf_invite_calendar(&iv);
}

/* The rows of recipient rc of message m (one per enabled channel with a
 * template) into w; c->rows counts them. */
static void fan_out(struct pc_jt *w, size_t m, struct ctx *c, const struct rcpt *rc,
		int pair, const PGresult *users, const struct tpl_pairs *tp)
{
	int row = rcpt_row(c, rc), critical = !strcmp(c->urgency, "Critical");
	const char *locale = PQgetvalue(users, row, 0), *quiet_end = pc_col(users, row, 5);
	const char *link = NULL, *payload = NULL;
	int mute = !strcmp(PQgetvalue(users, row, 1), "t");

	if (!strcmp(PQgetvalue(users, row, 6), "t")) {  /* erased user: nothing for them */
		pc_api->metric_add("notifications_skipped_total",
				"reason=\"recipient-deleted\"", 1);
		return;
	}
	for (int ch = 0; ch < 3; ch++) {
		const char *ovr = PQgetvalue(users, row, 2 + ch);    /* "true"/"false"/"" */
		int on = ovr[0] ? !strcmp(ovr, "true") : default_channel(c->kind, ch);
		const char *title, *body, *loc;

		if (!on)
			continue;                       /* opt-out holds for Critical too */
		if (mute && !critical && ch != 0)
			continue;                       /* GlobalMute: InApp only */
		template_pick(tp, pair, ntf_channels[ch], locale, &title, &body, &loc);
		if (!body)
			continue;                       /* no body for this channel */
		if (!payload) {
			payload = notification_payload(c, rc->role);
			link = deep_link(c);
		}
		render(c, rc, users, loc, &title, &body);
		/* interruptive, quiet hours; the address snapshot of seed 001
		 * step 5 (Email: 8, Sms: 9; none for InApp, NULL when the
		 * replica has none yet: the dispatcher catches it up) */
		note_row(w, m, c, rc, ntf_channels[ch], title, body, loc,
				ch == 2 && !critical ? quiet_end : NULL, link, payload,
				ch ? pc_col(users, row, 7 + ch) : NULL,
				ch == 1 ? invitation(c, rc, users, loc, body) : NULL);
		c->rows++;
	}
}

/* ntf_insert: the rows of w; each new row counts for its message. */
static int insert_rows(struct ctx **cs, struct pc_jt *w)
{
	const char *p[1];
	PGresult *r;

	if (!(p[0] = jt_text(w)))
		return PIN_ERR_DB;
	r = pc_api->db_exec_prepared("ntf_insert",
		"WITH x AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(m int, id uuid, "
		"    u uuid, tn uuid, k text, ch text, g text, r text, ti text, b text, "
		"    dl text, p jsonb, l text, nb timestamptz, s uuid, e text, sj uuid, "
		"    rm uuid, c timestamptz, ad text, ic text)), "
		"  i AS (INSERT INTO notifications.notifications (id, recipient_user_id, "
		"    tenant_id, kind, channel, urgency, status, role, title, body, "
		"    deep_link, payload, locale, not_before, source_message_id, "
		"    source_event_type, subject_id, reminder_id, created_at, address, "
		"    calendar) "
		"  SELECT x.id, x.u, x.tn, x.k, x.ch, x.g, 'Pending', x.r, x.ti, x.b, x.dl, "
		"    x.p, x.l, x.nb, x.s, x.e, x.sj, x.rm, x.c, x.ad, x.ic FROM x "
		"  ON CONFLICT DO NOTHING RETURNING id) "
		"SELECT x.m, x.ch FROM i JOIN x ON x.id = i.id", 1, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	for (int i = 0; i < PQntuples(r); i++) {
		struct ctx *c = cs[atoi(PQgetvalue(r, i, 0))];

		c->created++;
		for (int ch = 0; ch < 3; ch++)
			if (!strcmp(PQgetvalue(r, i, 1), ntf_channels[ch]))
				c->created_ch[ch]++;
		pc_api->metric_add("notifications_enqueued_total", pc_api->sprintf(
			"kind=\"%s\",channel=\"%s\"", c->kind, PQgetvalue(r, i, 1)), 1);
	}
	return 0;
}

/* A message that can never be processed: FATAL (the host dead-letters it). */
static enum pin_consume_status fail(struct ctx *c, const char *code, const char *detail)
{
	note(c, PIN_LOG_ERROR, "notifications: failed", "code", code,
			"retriable", "false", "detail", detail, NULL, NULL);
	/* notifications_dlq_total: the host counts every DLQ route (dlq_metric) */
	return pc_consume_fail(NULL, c->res, PIN_CONSUME_FATAL, code, detail, NULL);
}

/* An open message one of whose recipients has no Active template: FATAL
 * NTF_TEMPLATE_NOT_RESOLVED (nothing of it is written). */
static void template_check(struct ctx *c, const struct tpl_pairs *tp)
{
	for (int i = 0; i < c->n; i++) {
		if (tpl_any(tp, c->tpl[i]))
			continue;
		pc_api->log(PIN_LOG_ERROR, "notifications: no active template",
				"messageId", c->msg->message_id, "kind", c->kind,
				"role", c->r[i].role, NULL);
		pc_api->metric_add("notifications_template_not_resolved_total", NULL, 1);
		c->done = 1;
		c->st = fail(c, NTF_CODE_TEMPLATE, pc_api->sprintf(
			"no Active template for %s / %s", c->kind, c->r[i].role));
		return;
	}
}

/* The database part of cs[0..n) (see above).  0, or PIN_ERR_DB after a
 * failed statement (the open messages got RETRY). */
static int apply(struct ctx **cs, size_t n)
{
	struct tpl_pairs tp;
	PGresult *users = NULL;
	struct pc_jt w;
	size_t i;
	int k = 0;

	if (load_msgs(cs, n) < 0)
		return db_fail_all(cs, n, "after-final lookup / local times failed");
	if (load_users(cs, n, &users) < 0 || load_templates(cs, n, &tp) < 0)
		return db_fail_all(cs, n, "recipient settings / templates lookup failed");
	for (i = 0; i < n; i++)
		if (pending(cs[i]))
			template_check(cs[i], &tp);
	for (i = 0; i < n; i++)
		if (cs[i]->final_rec && !(cs[i]->done && cs[i]->st == PIN_CONSUME_FATAL) &&
		    record_final(cs[i], cs[i]->t0) < 0)
			return db_fail_all(cs, n, "final state record failed");
	pc_jt_init(&w, 2048 * n);
	pc_jt_arr(&w);
	for (i = 0; i < n; i++)
		for (int j = 0; pending(cs[i]) && j < cs[i]->n; j++)
			fan_out(&w, i, cs[i], &cs[i]->r[j], cs[i]->tpl[j], users, &tp);
	pc_jt_end_arr(&w);
	for (i = 0; i < n; i++)
		k += pending(cs[i]) ? cs[i]->rows : 0;
	if (!k)
		pc_jt_free(&w);
	else if (insert_rows(cs, &w) < 0)
		return db_fail_all(cs, n, "notification insert failed");
	return 0;
}

/* The end of a message: its log lines and metrics; its answer. */
static enum pin_consume_status finish(struct ctx *c)
{
	if (c->skip_reason && c->st == PIN_CONSUME_OK) {
		const char *log_msg = !strcmp(c->skip_reason, "stale-reminder") ?
				"notifications: skipped-stale" : "notifications: filtered";

		note(c, PIN_LOG_INFO, log_msg, "reason", c->skip_reason,
				NULL, NULL, NULL, NULL, NULL, NULL);
		pc_api->metric_add("notifications_skipped_total",
				pc_api->sprintf("reason=\"%s\"", c->skip_reason), 1);
	}
	if (c->done)
		return c->st;
	for (int i = c->created; i < c->rows; i++)
		pc_api->metric_add("notifications_skipped_total", "reason=\"duplicate\"", 1);
	/* created: new rows (a replay's rows that exist already are not) */
	note(c, PIN_LOG_INFO, "notifications: enqueued",
			"created", pc_api->sprintf("%d", c->created),
			"inApp", pc_api->sprintf("%d", c->created_ch[0]),
			"email", pc_api->sprintf("%d", c->created_ch[1]),
			"sms", pc_api->sprintf("%d", c->created_ch[2]));
	pc_api->metric_observe("notifications_enqueue_duration_ms", NULL,
			(double)(pc_api->now_us() - c->t0) / 1e3);
	return PIN_CONSUME_OK;
}

/* A message that builds nothing (filtered, stale): OK, logged at the end. */
static void skip(struct ctx *c, const char *reason)
{
	c->done = 1;
	c->st = PIN_CONSUME_OK;
	c->skip_reason = reason;
}

/* The contract of the message, without the database: topic, payload
 * fields, mapping, the stale guard.  c->done when that is the answer. */
static void classify(struct ctx *c, const struct pin_msg *msg,
		struct pin_consume_result *res)
{
	memset(c, 0, sizeof(*c));
	c->msg = msg;
	c->p = msg->payload;
	c->res = res;
	c->t0 = pc_api->now_us();
	pc_api->fmt_time(c->t0, c->now, sizeof(c->now));
	c->done = 1;
	for (c->t = 0; c->t < T__N; c->t++)
		if (!strcmp(msg->topic, topics[c->t]))
			break;
	if (c->t == T__N) {
		c->st = fail(c, NTF_CODE_INVALID, "unexpected topic");
		return;
	}
	if (!c->p || !json_object_is_type(c->p, json_type_object)) {
		c->st = fail(c, NTF_CODE_INVALID, "payload is not an object");
		return;
	}
	read_payload(c);
	if (!c->bad)
		map(c);
	note(c, PIN_LOG_INFO, "notifications: consumed", "key", msg->key,
			NULL, NULL, NULL, NULL, NULL, NULL);
	if (c->bad) {
		c->st = fail(c, NTF_CODE_INVALID, pc_api->sprintf(
				"field %s is missing or invalid", c->bad));
		return;
	}
	c->done = 0;
	c->final_rec = final_state_of(c, &(const char *){ NULL }) != NULL;
	if (c->filtered)
		skip(c, c->filtered);
	else if (c->n == 0)
		skip(c, "no-recipient");
	else if (c->t == T_REMINDER && c->start_us < c->t0)
		skip(c, "stale-reminder");
}

/* The per-message handler (the savepoint path and the fallback of the set
 * path): the same steps as a set run of one message. */
static enum pin_consume_status on_event(const struct pin_msg *msg,
		struct pin_consume_result *res, void *ud)
{
	struct ctx c, *cs[1] = { &c };

	(void)ud;
	classify(&c, msg, res);
	if (c.done && (c.st != PIN_CONSUME_OK || !c.final_rec)) {
		if (c.st != PIN_CONSUME_OK)
			return c.st;
		return finish(&c);
	}
	(void)apply(cs, 1);
	return finish(&c);
}

/*
 * The set path (pin_consumer.batch_fn, ABI 1.4): the batch's messages are
 * classified in C, cut into runs of distinct Kafka keys (pc_batch_runs: a
 * key that repeats starts a new run, so one key's messages keep their
 * order), and each run is applied by apply() in one go.  A message that
 * states a final (cancelled, completed...) applies alone, after the run
 * before it, so the after-final guard of every later message sees it and
 * no earlier one does -- as one by one.  Verdicts: OK, or FATAL with no
 * effect (invalid payload, no Active template); a failed statement gives
 * the batch up (the host rolls it back and takes the per-message path).
 */
struct batch {
	struct ctx *cs;                 /* the messages parse accepted, in order */
	size_t n;                       /* accepted */
};

static enum pin_consume_status batch_parse(const struct pin_msg *msg,
		struct pin_consume_result *res, struct pc_batch_item *item, void *ud)
{
	struct batch *b = ud;
	struct ctx *c = &b->cs[b->n];

	classify(c, msg, res);
	if (c->done && c->st != PIN_CONSUME_OK)
		return c->st;                   /* FATAL, nothing done */
	b->n++;
	item->key = msg->key ? msg->key : msg->message_id;
	item->alone = c->final_rec;
	item->data = c;
	return PIN_CONSUME_OK;
}

static enum pin_consume_status batch_flush(struct pc_batch_run *run,
		struct pin_consume_result *res, void *ud)
{
	struct ctx **cs = pc_api->alloc(run->n * sizeof(*cs));
	size_t i;

	(void)res;
	(void)ud;
	if (!cs)
		return PIN_CONSUME_RETRY;
	for (i = 0; i < run->n; i++)
		cs[i] = run->data[i];
	if (apply(cs, run->n) < 0)
		return PIN_CONSUME_RETRY;
	for (i = 0; i < run->n; i++)
		run->st[run->idx[i]] = finish(cs[i]);
	return PIN_CONSUME_OK;
}

static enum pin_consume_status on_events(const struct pin_msg *const *msgs, size_t n,
		enum pin_consume_status *st, struct pin_consume_result *res, void *ud)
{
	struct batch b = { 0 };
	enum pin_consume_status rc;

	(void)ud;
	if (!(b.cs = calloc(n, sizeof(*b.cs))))
		return PIN_CONSUME_RETRY;
	rc = pc_batch_runs(msgs, n, st, res, batch_parse, batch_flush, &b);
	free(b.cs);
	return rc;
}

int ntf_events_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_consumer c = { .group = PC_GROUP_NTF_EVENTS, .topics = topics,
		.inbox_table = NTF_INBOX, .fn = on_event, .batch_fn = on_events,
		/* seed 001's names, kept by the host (ABI 1.8) */
		.dlq_metric = "notifications_dlq_total",
		.lag_metric = "notifications_consumer_lag_seconds" };

	/* 0 from the start: the alert's increase() sees the first one */
	pc_api->metric_add("notifications_template_not_resolved_total", NULL, 0);
	if (ntf_links_init(err, errlen) < 0)
		return -1;
	return pc_register_consumer(reg, &c, "notify", err, errlen);
}
