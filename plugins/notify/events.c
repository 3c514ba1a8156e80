/* events.c -- consumer group notifications-calendar-events (seed 001):
 * the 9 pin.calendar.*.v1 topics -> notifications.notifications rows, fan-out
 * recipient x channel, in the host's transaction.
 *
 * Steps (seed 001 algorithm): 1. the host did the inbox row (consumer
 * group + messageId: the seed's notifications-calendar:{EventType}:{MessageId})
 * and warns on contractVersion != 1, pc_contract_check warns once per
 * version and counts every such message; 2. required fields (else FATAL
 * NTF_INVALID_PAYLOAD -> DLQ); 3. mapping topic -> Kind -> recipients (no-op
 * branches are filtered and acknowledged; unknown Origin/Reason: warning,
 * nothing built); 4. stale reminder guard; after-final guard; 5. per
 * recipient: settings (overrides, GlobalMute, quiet hours), template
 * (Kind, Locale, Channel, Role) with the ru fallback, contact replica names;
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

#define GROUP "notifications-calendar-events"

enum topic {
	T_EVENT_CREATED, T_EVENT_RESCHEDULED, T_EVENT_STATUS, T_EVENT_OWNER,
	T_APT_CREATED, T_APT_CONFIRMED, T_APT_CANCELLED, T_APT_COMPLETED,
	T_REMINDER, T__N
};

static const char *const topics[] = {
	"pin.calendar.event-created.v1",
	"pin.calendar.event-rescheduled.v1",
	"pin.calendar.event-status-changed.v1",
	"pin.calendar.event-owner-changed.v1",
	"pin.calendar.appointment-created.v1",
	"pin.calendar.appointment-confirmed.v1",
	"pin.calendar.appointment-cancelled.v1",
	"pin.calendar.appointment-completed.v1",
	"pin.calendar.reminder-due.v1",
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
	const char *start, *end, *deadline;     /* payload text of the instants */
	int64_t start_us;
	long long offset_min;
	/* mapping */
	const char *kind, *urgency, *subject_id, *filtered;
	struct rcpt r[MAX_RCPT];
	int n;
};

static const char *const nil_uuid = "00000000-0000-0000-0000-000000000000";

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
	if (c->t != T_APT_COMPLETED) {
		c->tz = f_str(c, "timeZone", 1);
		c->end = f_time(c, "endAt", 0, NULL);
	}
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

/* A value outside the contract's enum: warning + filtered (fail-safe). */
static void unknown_enum(struct ctx *c, const char *what, const char *labels,
		const char *filtered)
{
	pc_api->log(PIN_LOG_WARN, what, "messageId", c->msg->message_id,
			"topic", c->msg->topic, NULL);
	pc_api->metric_add("notifications_unknown_enum_total", labels, 1);
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
	if (strcmp(c->status, "Cancelled") != 0)
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
		unknown_enum(c, "notifications: unknown cancel reason, nothing built",
				"field=\"reason\"", "unknown-reason");
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
		unknown_enum(c, "notifications: unknown origin, nothing built",
				"field=\"origin\"", "unknown-origin");
		return;
	}
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
	case T_APT_COMPLETED:     c->filtered = "appointment-completed"; return;
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

/* Local times of the message in both locale formats (event time zone). */
struct local_times {
	const char *start[2], *end[2], *deadline[2];   /* [0] ru, [1] en */
};

static int load_times(struct ctx *c, struct local_times *lt)
{
	const char *p[4] = { c->start, c->end, c->deadline, c->tz };
	PGresult *r = pc_api->db_exec_prepared("ntf_times",
		"SELECT to_char($1::timestamptz AT TIME ZONE $4, 'DD.MM.YYYY HH24:MI'), "
		"  to_char($1::timestamptz AT TIME ZONE $4, 'Mon FMDD, YYYY FMHH12:MI AM'), "
		"  to_char($2::timestamptz AT TIME ZONE $4, 'DD.MM.YYYY HH24:MI'), "
		"  to_char($2::timestamptz AT TIME ZONE $4, 'Mon FMDD, YYYY FMHH12:MI AM'), "
		"  to_char($3::timestamptz AT TIME ZONE $4, 'DD.MM.YYYY HH24:MI'), "
		"  to_char($3::timestamptz AT TIME ZONE $4, 'Mon FMDD, YYYY FMHH12:MI AM')",
		4, p);
	int i;

	if (!pc_res_ok(r, PGRES_TUPLES_OK) || PQntuples(r) != 1)
		return PIN_ERR_DB;
	for (i = 0; i < 2; i++) {
		lt->start[i] = PQgetisnull(r, 0, i) ? NULL : PQgetvalue(r, 0, i);
		lt->end[i] = PQgetisnull(r, 0, 2 + i) ? NULL : PQgetvalue(r, 0, 2 + i);
		lt->deadline[i] = PQgetisnull(r, 0, 4 + i) ? NULL : PQgetvalue(r, 0, 4 + i);
	}
	return 0;
}

/* Display name of user from the contact replica, or NULL. */
static const char *display_name(const char *user)
{
	const char *p[1] = { user };
	PGresult *r;

	if (!user)
		return NULL;
	r = pc_api->db_exec_prepared("ntf_contact_name",
		"SELECT display_name FROM notifications.recipient_contacts WHERE user_id = $1::uuid",
		1, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK) || PQntuples(r) != 1)
		return NULL;
	return pc_col(r, 0, 0);         /* NULL: erased (a Deleted user) */
}

struct names {
	const char *agent, *investor, *owner, *client, *prev_owner;
};

/* The recipient's effective settings at now. */
struct settings {
	const char *locale;
	int mute;
	const char *ovr[3];     /* per channel: "true" / "false" / "" (no override) */
	const char *quiet_end;  /* non-NULL: now is inside the quiet window */
	int deleted;            /* the contact replica says Deleted (erased) */
};

static int load_settings(struct ctx *c, const char *user, const char *now,
		struct settings *s)
{
	const char *p[3] = { user, now, c->kind };
	PGresult *r = pc_api->db_exec_prepared("ntf_settings",
		"WITH x AS ("
		"  SELECT coalesce(s.locale, c.locale, 'ru') AS locale, "
		"    coalesce(s.time_zone, c.time_zone, 'Europe/Moscow') AS tz, "
		"    coalesce(s.global_mute, false) AS mute, "
		"    coalesce(s.overrides -> $3, '{}'::jsonb) AS ovr, "
		"    s.quiet_from AS qf, s.quiet_to AS qt, "
		"    c.status IS NOT DISTINCT FROM 'Deleted' AS deleted "
		"  FROM (SELECT $1::uuid AS u) q "
		"  LEFT JOIN notifications.user_notification_settings s ON s.user_id = q.u "
		"  LEFT JOIN notifications.recipient_contacts c ON c.user_id = q.u) "
		"SELECT x.locale, x.mute, coalesce(x.ovr ->> 'InApp', ''), "
		"  coalesce(x.ovr ->> 'Email', ''), coalesce(x.ovr ->> 'Sms', ''), "
		"  CASE WHEN x.qf IS NULL THEN NULL "
		"    WHEN (CASE WHEN x.qf < x.qt THEN b.lt >= x.qf AND b.lt < x.qt "
		"               ELSE b.lt >= x.qf OR b.lt < x.qt END) "
		"    THEN (CASE WHEN b.lt < x.qt THEN b.ld + x.qt ELSE b.ld + 1 + x.qt END) "
		"         AT TIME ZONE x.tz END, x.deleted "
		"FROM x, LATERAL (SELECT $2::timestamptz AT TIME ZONE x.tz AS lts) a, "
		"  LATERAL (SELECT a.lts::time AS lt, a.lts::date AS ld) b",
		3, p);

	if (!pc_res_ok(r, PGRES_TUPLES_OK) || PQntuples(r) != 1)
		return PIN_ERR_DB;
	s->locale = PQgetvalue(r, 0, 0);
	s->mute = !strcmp(PQgetvalue(r, 0, 1), "t");
	s->ovr[0] = PQgetvalue(r, 0, 2);
	s->ovr[1] = PQgetvalue(r, 0, 3);
	s->ovr[2] = PQgetvalue(r, 0, 4);
	s->quiet_end = PQgetisnull(r, 0, 5) ? NULL : PQgetvalue(r, 0, 5);
	s->deleted = !strcmp(PQgetvalue(r, 0, 6), "t");
	return 0;
}

/* The Active templates of (kind, role): every channel and locale in one
 * query (a handful of rows; uq_notification_templates makes (channel,
 * locale) unique).  0 with *out, PIN_ERR_DB. */
static int templates_of(const char *kind, const char *role, PGresult **out)
{
	const char *p[2] = { kind, role };
	PGresult *r = pc_api->db_exec_prepared("ntf_templates_of",
		"SELECT channel, title_template, body_template, locale "
		"FROM notifications.notification_templates "
		"WHERE kind = $1 AND role = $2 AND status = 'Active'", 2, p);

	*out = NULL;
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	*out = r;
	return 0;
}

/* The template of channel for locale from templates_of's rows: the locale
 * itself, else its language (the part before '-'), else ru.  *title, *body,
 * *loc all NULL when there is none. */
static void template_pick(const PGresult *r, const char *channel, const char *locale,
		const char **title, const char **body, const char **loc)
{
	size_t lang = strcspn(locale, "-");
	int best = 3;

	*title = *body = *loc = NULL;
	for (int i = 0; i < PQntuples(r); i++) {
		const char *l = PQgetvalue(r, i, 3);
		int pref;

		if (strcmp(PQgetvalue(r, i, 0), channel) != 0)
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
			*title = PQgetvalue(r, i, 1);
			*body = PQgetvalue(r, i, 2);
			*loc = l;
		}
	}
}

/* The final state of a subject a final message states (Cancelled,
 * Completed, Expired, NoShow), else NULL; *type is the subject's type. */
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

/* After-final guard: the recorded final state of the message's event or
 * appointment.  0 with *state (NULL when none), PIN_ERR_DB. */
static int after_final(const struct ctx *c, const char **state)
{
	const char *p[2] = { c->event_id, c->appointment_id };
	PGresult *r = pc_api->db_exec_prepared("ntf_after_final",
		"SELECT final_state FROM notifications.subject_final_states "
		"WHERE subject_id IN ($1::uuid, $2::uuid) LIMIT 1", 2, p);

	*state = NULL;
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	if (PQntuples(r) == 1)
		*state = PQgetvalue(r, 0, 0);
	return 0;
}

static int default_channel(const char *kind, int ch)
{
	return ch != 2 || !strcmp(kind, "AppointmentReminder");
}

/* Renders the title and body templates for locale loc (in place). */
static void render(const struct ctx *c, const struct names *nm,
		const struct local_times *lt, const char *loc, const char **title,
		const char **body)
{
	int ru = !strncmp(loc, "ru", 2), en = !ru;
	const char *fallback = ru ? "(имя не указано)" : "(name unknown)";
	const char *reason = c->cancel_reason ? c->cancel_reason :
			ru ? "не указана" : "not specified";
	char offset[32];

	ntf_offset_text((int)c->offset_min, loc, offset, sizeof(offset));
	{
		struct ntf_var v[] = {
			{ "start", lt->start[en] },
			{ "end", lt->end[en] },
			{ "confirmDeadline", lt->deadline[en] },
			{ "timeZone", c->tz },
			{ "offset", offset },
			{ "agentName", nm->agent ? nm->agent : fallback },
			{ "investorName", nm->investor ? nm->investor : fallback },
			{ "ownerName", nm->owner ? nm->owner : fallback },
			{ "clientName", nm->client ? nm->client : fallback },
			{ "previousOwnerName", nm->prev_owner ? nm->prev_owner : fallback },
			{ "cancelReason", reason },
		};
		size_t nv = sizeof(v) / sizeof(v[0]);

		*title = ntf_render(*title, v, nv);
		*body = ntf_render(*body, v, nv);
	}
}

/* One notification row to be written. */
struct note {
	const char *channel, *title, *body, *locale, *not_before;
};

/* Inserts the recipient's k notifications in one statement (a duplicate of
 * the source message is skipped) and counts them.  0 / PIN_ERR_DB. */
static int insert_notes(const struct ctx *c, const struct rcpt *rc, const struct note *n,
		int k, const char *link, const char *payload, const char *now, int *created)
{
	json_object *rows = json_object_new_array();
	const char *p[13];
	int i, j, got;
	PGresult *r;

	for (i = 0; i < k; i++) {
		json_object *o = json_object_new_object();
		char id[37];

		pc_api->uuid_v7(id);
		json_object_object_add(o, "id", json_object_new_string(id));
		json_object_object_add(o, "channel", json_object_new_string(n[i].channel));
		json_object_object_add(o, "title", json_object_new_string(n[i].title));
		json_object_object_add(o, "body", json_object_new_string(n[i].body));
		json_object_object_add(o, "locale", json_object_new_string(n[i].locale));
		json_object_object_add(o, "not_before", n[i].not_before ?
				json_object_new_string(n[i].not_before) : NULL);
		json_object_array_add(rows, o);
	}
	p[0] = pc_api->sprintf("%s", json_object_to_json_string_ext(rows,
			JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
	json_object_put(rows);
	p[1] = rc->user;
	p[2] = rc->tenant;
	p[3] = c->kind;
	p[4] = c->urgency;
	p[5] = rc->role;
	p[6] = link;
	p[7] = payload;
	p[8] = c->msg->message_id;
	p[9] = c->msg->event_type ? c->msg->event_type : c->msg->topic;
	p[10] = c->subject_id;
	p[11] = c->reminder_id;
	p[12] = now;
	r = pc_api->db_exec_prepared("ntf_insert_rows",
		"INSERT INTO notifications.notifications (id, recipient_user_id, "
		"  tenant_id, kind, channel, urgency, status, role, title, body, "
		"  deep_link, payload, locale, not_before, source_message_id, "
		"  source_event_type, subject_id, reminder_id, created_at) "
		"SELECT x.id, $2::uuid, $3::uuid, $4, x.channel, $5, 'Pending', $6, x.title, "
		"  x.body, $7, $8::jsonb, x.locale, x.not_before, $9::uuid, $10, $11::uuid, "
		"  $12::uuid, $13::timestamptz "
		"FROM jsonb_to_recordset($1::jsonb) AS x(id uuid, channel text, title text, "
		"  body text, locale text, not_before timestamptz) "
		"ON CONFLICT DO NOTHING RETURNING channel", 13, p);
	if (!pc_res_ok(r, PGRES_TUPLES_OK))
		return PIN_ERR_DB;
	for (i = 0; i < k; i++) {
		for (got = 0, j = 0; j < PQntuples(r) && !got; j++)
			got = !strcmp(PQgetvalue(r, j, 0), n[i].channel);
		if (got) {
			(*created)++;
			pc_api->metric_add("notifications_enqueued_total", pc_api->sprintf(
				"kind=\"%s\",channel=\"%s\"", c->kind, n[i].channel), 1);
		} else {
			pc_api->metric_add("notifications_skipped_total", "reason=\"duplicate\"", 1);
		}
	}
	return 0;
}

/* The notifications of one recipient, one per enabled channel with a
 * template, written in one statement.  0 (*skipped = 1 when the role has no
 * templates at all), PIN_ERR_DB. */
static int fan_out(struct ctx *c, const struct rcpt *rc, const struct names *nm,
		const struct local_times *lt, const char *now, int *created, int *skipped)
{
	struct settings s;
	struct note n[3];
	PGresult *tpl;
	const char *link, *payload;
	int ch, k = 0, rv, critical = !strcmp(c->urgency, "Critical");

	*skipped = 0;
	if ((rv = templates_of(c->kind, rc->role, &tpl)) < 0)
		return rv;
	if (PQntuples(tpl) == 0) {
		*skipped = 1;
		return 0;
	}
	if ((rv = load_settings(c, rc->user, now, &s)) < 0)
		return rv;
	if (s.deleted) {                        /* erased user: nothing for them */
		pc_api->metric_add("notifications_skipped_total",
				"reason=\"recipient-deleted\"", 1);
		return 0;
	}
	payload = notification_payload(c, rc->role);
	link = deep_link(c);
	for (ch = 0; ch < 3; ch++) {
		int on = s.ovr[ch][0] ? !strcmp(s.ovr[ch], "true") : default_channel(c->kind, ch);
		struct note *x = &n[k];

		if (!on)
			continue;                       /* opt-out holds for Critical too */
		if (s.mute && !critical && ch != 0)
			continue;                       /* GlobalMute: InApp only */
		x->channel = ntf_channels[ch];
		template_pick(tpl, x->channel, s.locale, &x->title, &x->body, &x->locale);
		if (!x->body)
			continue;                       /* no body for this channel */
		x->not_before = NULL;
		if (ch == 2 && !critical && s.quiet_end)
			x->not_before = s.quiet_end;    /* interruptive, quiet hours */
		render(c, nm, lt, x->locale, &x->title, &x->body);
		k++;
	}
	return k ? insert_notes(c, rc, n, k, link, payload, now, created) : 0;
}

static enum pin_consume_status fail(struct pin_consume_result *res, const char *code,
		const char *detail)
{
	int db = !strcmp(code, "NTF_DB_ERROR");

	if (!db)
		pc_api->metric_add("notifications_dlq_total", NULL, 1);
	return pc_consume_fail(NULL, res, db ? PIN_CONSUME_RETRY : PIN_CONSUME_FATAL,
			code, detail, NULL);
}

static enum pin_consume_status skip(struct ctx *c, const char *log_msg, const char *reason)
{
	pc_api->log(PIN_LOG_INFO, log_msg, "messageId", c->msg->message_id,
			"topic", c->msg->topic, "reason", reason, NULL);
	pc_api->metric_add("notifications_skipped_total",
			pc_api->sprintf("reason=\"%s\"", reason), 1);
	return PIN_CONSUME_OK;
}

/* The contract of the message: topic, payload fields, mapping.  PIN_CONSUME_OK
 * to go on; otherwise the answer (a failure, or a filtered skip) with *done. */
static enum pin_consume_status classify(struct ctx *c, struct pin_consume_result *res,
		int64_t now_us, int *done)
{
	const struct pin_msg *msg = c->msg;

	*done = 1;
	for (c->t = 0; c->t < T__N; c->t++)
		if (!strcmp(msg->topic, topics[c->t]))
			break;
	if (c->t == T__N)
		return fail(res, NTF_CODE_INVALID, "unexpected topic");
	if (!c->p || !json_object_is_type(c->p, json_type_object))
		return fail(res, NTF_CODE_INVALID, "payload is not an object");
	if (msg->created_at_us > 0)
		pc_api->metric_set("notifications_consumer_lag_seconds", NULL,
				(double)(now_us - msg->created_at_us) / 1e6);
	read_payload(c);
	if (!c->bad)
		map(c);
	if (c->bad)
		return fail(res, NTF_CODE_INVALID, pc_api->sprintf(
				"field %s is missing or invalid", c->bad));
	if (record_final(c, now_us) < 0)
		return fail(res, "NTF_DB_ERROR", "final state record failed");
	if (c->filtered)
		return skip(c, "notifications: filtered", c->filtered);
	if (c->n == 0)
		return skip(c, "notifications: filtered", "no-recipient");
	if (c->t == T_REMINDER && c->start_us < now_us)
		return skip(c, "notifications: skipped-stale", "stale-reminder");
	*done = 0;
	return PIN_CONSUME_OK;
}

/* A message that is not itself final (created, rescheduled, owner changed,
 * confirmed, reminder) about an event / appointment whose final state is
 * recorded builds nothing: skipped, reason after-final (seeds 001, 002:
 * cross-topic order is not guaranteed).  PIN_CONSUME_OK to go on, else the
 * answer with *done. */
static enum pin_consume_status after_final_guard(struct ctx *c,
		struct pin_consume_result *res, int *done)
{
	const char *state;

	*done = 0;
	if (c->t == T_EVENT_STATUS || c->t == T_APT_CANCELLED || c->t == T_APT_COMPLETED)
		return PIN_CONSUME_OK;
	*done = 1;
	if (after_final(c, &state) < 0)
		return fail(res, "NTF_DB_ERROR", "after-final lookup failed");
	if (state) {
		pc_api->log(PIN_LOG_WARN, "notifications: skipped-stale (after final)",
				"messageId", c->msg->message_id, "topic", c->msg->topic,
				"finalState", state, NULL);
		pc_api->metric_add("notifications_skipped_total", "reason=\"after-final\"", 1);
		return PIN_CONSUME_OK;
	}
	*done = 0;
	return PIN_CONSUME_OK;
}

/* The notifications of every recipient; *created counts the new rows. */
static enum pin_consume_status enqueue(struct ctx *c, struct pin_consume_result *res,
		int64_t now_us, int *created)
{
	struct names nm;
	struct local_times lt;
	char now[40];
	int i, skipped;

	if (load_times(c, &lt) < 0)
		return fail(res, "NTF_DB_ERROR", "local time rendering failed");
	nm.agent = display_name(c->agent);
	nm.investor = display_name(c->investor);
	nm.owner = display_name(c->owner);
	nm.client = display_name(c->client);
	nm.prev_owner = display_name(c->prev_owner);
	pc_api->fmt_time(now_us, now, sizeof(now));
	for (i = 0; i < c->n; i++) {
		if (fan_out(c, &c->r[i], &nm, &lt, now, created, &skipped) < 0)
			return fail(res, "NTF_DB_ERROR", "notification insert failed");
		if (skipped) {
			pc_api->log(PIN_LOG_ERROR, "notifications: no active template",
					"messageId", c->msg->message_id, "kind", c->kind,
					"role", c->r[i].role, NULL);
			pc_api->metric_add("notifications_template_not_resolved_total", NULL, 1);
			return fail(res, NTF_CODE_TEMPLATE, pc_api->sprintf(
				"no Active template for %s / %s", c->kind, c->r[i].role));
		}
	}
	return PIN_CONSUME_OK;
}

static enum pin_consume_status on_event(const struct pin_msg *msg,
		struct pin_consume_result *res, void *ud)
{
	struct ctx c;
	int64_t t0 = pc_api->now_us(), now_us = t0;
	enum pin_consume_status st;
	int done, created = 0;

	(void)ud;
	memset(&c, 0, sizeof(c));
	c.msg = msg;
	c.p = msg->payload;
	pc_contract_check(msg, "notifications: contract version mismatch",
			"notifications_contract_mismatch_total");
	st = classify(&c, res, now_us, &done);
	if (done)
		return st;
	st = after_final_guard(&c, res, &done);
	if (done)
		return st;
	st = enqueue(&c, res, now_us, &created);
	if (st != PIN_CONSUME_OK)
		return st;
	pc_api->log(PIN_LOG_INFO, "notifications: enqueued", "messageId", msg->message_id,
			"topic", msg->topic, "kind", c.kind,
			"created", pc_api->sprintf("%d", created),
			"recipients", pc_api->sprintf("%s%s%s", c.r[0].user,
				c.n > 1 ? "," : "", c.n > 1 ? c.r[1].user : ""), NULL);
	pc_api->metric_observe("notifications_enqueue_duration_seconds", NULL,
			(double)(pc_api->now_us() - t0) / 1e6);
	return PIN_CONSUME_OK;
}

int ntf_events_register(struct pin_registrar *reg, char *err, size_t errlen)
{
	struct pin_consumer c = { .group = GROUP, .topics = topics,
		.inbox_table = NTF_INBOX, .fn = on_event };

	/* 0 from the start: the alert's increase() sees the first one */
	pc_api->metric_add("notifications_template_not_resolved_total", NULL, 0);
	return pc_register_consumer(reg, &c, "notify", err, errlen);
}
