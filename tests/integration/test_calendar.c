/*
 * test_calendar.c -- calendar.so through nginx: the agent events API, the
 * reminder rules and acceptance criteria of seed 000, the event-* and
 * reminder-due messages on the dev broker, tenant/owner isolation, the
 * agency and PIN manager views, and two worker hosts dispatching the same
 * due reminders without duplicates.
 *
 * Time travel: the API host runs on the real clock; reminders become due
 * for one-shot worker hosts started with --clock-offset-s (h_run_worker_once).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define EV "/api/v1/agent/calendar/events"
#define T_REMINDER "pin.calendar.reminder-due.v1"
#define T_CREATED "pin.calendar.event-created.v1"
#define T_RESCHEDULED "pin.calendar.event-rescheduled.v1"
#define T_STATUS "pin.calendar.event-status-changed.v1"
#define DAY 86400

struct who {
	char *sub, *tenant, *tok;
};

static struct who agent_in(const char *tenant)
{
	struct who w;

	w.sub = h_uuid();
	w.tenant = h_strdup(tenant ? tenant : h_uuid());
	w.tok = h_token("agent", w.sub, w.tenant, "calendar.events.view",
			"calendar.events.manage");
	return w;
}

static struct who agent(void)
{
	return agent_in(NULL);
}

/* Body of a Meeting starting in start_in_s, lasting 1 h; offsets JSON or NULL. */
static char *meeting_body(int64_t start_in_s, const char *offsets)
{
	return h_sprintf("{\"kind\":\"Meeting\",\"title\":\"Встреча с клиентом\","
			"\"startAt\":\"%s\",\"endAt\":\"%s\",\"timeZone\":\"Europe/Moscow\"%s%s}",
			h_iso_in(start_in_s), h_iso_in(start_in_s + 3600),
			offsets ? ",\"reminderOffsetsMinutes\":" : "", offsets ? offsets : "");
}

static json_object *create_ok(const struct who *w, const char *body)
{
	struct h_resp *r = h_post(EV, w->tok, body);

	ck_assert_msg(r->status == 201, "create: %ld %s", r->status, r->body);
	return r->json;
}

static const char *create_meeting(const struct who *w, int64_t start_in_s, const char *offsets)
{
	return h_jstr(create_ok(w, meeting_body(start_in_s, offsets)), "id");
}

static long long rem_count(const char *event_id, const char *status)
{
	return h_sql_int("SELECT count(*) FROM calendar.event_reminders "
			"WHERE calendar_event_id = $1 AND status = $2", event_id, status);
}

static long long outbox_count(const char *topic, const char *key)
{
	return h_sql_int("SELECT count(*) FROM calendar.outbox WHERE topic = $1 AND key = $2",
			topic, key);
}

static struct h_resp *post_id(const struct who *w, const char *id, const char *action,
		const char *body)
{
	return h_post(h_sprintf(EV "/%s/%s", id, action), w->tok, body);
}

static long long epoch_of(const char *iso)
{
	return h_sql_int("SELECT extract(epoch FROM $1::timestamptz)::bigint", iso);
}

/* The payload has exactly the keys of csv (events.md / seeds 000, 002):
 * nothing missing (nulls present), nothing more (no title, description,
 * location). */
static void assert_keys(json_object *p, const char *csv)
{
	char *list = h_strdup(csv), *save = NULL, *k;
	int n = 0;

	ck_assert_ptr_nonnull(p);
	for (k = strtok_r(list, ",", &save); k; k = strtok_r(NULL, ",", &save)) {
		ck_assert_msg(json_object_object_get_ex(p, k, NULL), "payload lacks %s: %s", k,
				json_object_to_json_string(p));
		n++;
	}
	ck_assert_msg((int)json_object_object_length(p) == n, "payload has extra keys: %s",
			json_object_to_json_string(p));
}

#define KEYS_CREATED "eventId,tenantId,ownerUserId,kind,origin,status,priority,startAt," \
	"endAt,timeZone,clientUserId,leadId,dealId,bookingId,projectId,propertyObjectId," \
	"appointmentId,createdByUserId"
#define KEYS_RESCHEDULED "eventId,tenantId,ownerUserId,kind,origin,clientUserId,startAt," \
	"endAt,timeZone"
#define KEYS_STATUS "eventId,tenantId,ownerUserId,kind,origin,clientUserId,previousStatus," \
	"status,cancelReason,startAt,endAt,timeZone,dealId,bookingId,appointmentId"
#define KEYS_REMINDER "reminderId,eventId,tenantId,ownerUserId,clientUserId,kind,startAt," \
	"timeZone,offsetMinutes,appointmentId"

/* ------------------------------------------------------------ create / card */

START_TEST(create_and_card_with_default_reminders)
{
	/* seed 000 AC "materialisation by default": 3 days ahead, {1440, 60} */
	struct who w = agent();
	json_object *ev = create_ok(&w, meeting_body(3 * DAY, NULL));
	const char *id = h_jstr(ev, "id");
	struct h_resp *r;
	json_object *rem;
	long long start;
	size_t i;

	ck_assert_str_eq(h_jstr(ev, "origin"), "Manual");
	ck_assert_str_eq(h_jstr(ev, "status"), "Planned");
	ck_assert_str_eq(h_jstr(ev, "priority"), "Normal");
	ck_assert_str_eq(h_jstr(ev, "ownerUserId"), w.sub);
	ck_assert_str_eq(h_jstr(ev, "tenantId"), w.tenant);
	ck_assert_int_eq(json_object_get_int(h_jget(ev, "version")), 1);
	ck_assert_msg(json_object_object_get_ex(ev, "description", NULL), "nulls present");
	r = h_get(h_sprintf(EV "/%s", id), w.tok);
	ck_assert_msg(r->status == 200, "card %ld %s", r->status, r->body);
	ck_assert_msg(r->etag && strstr(r->etag, "\"1\""), "etag %s", r->etag ? r->etag : "-");
	rem = h_jget(r->json, "reminders");
	ck_assert_int_eq(json_object_array_length(rem), 2);
	start = epoch_of(h_jstr(r->json, "startAt"));
	for (i = 0; i < 2; i++) {
		json_object *x = json_object_array_get_idx(rem, i);
		int off = json_object_get_int(h_jget(x, "offsetMinutes"));
		ck_assert_str_eq(h_jstr(x, "status"), "Pending");
		ck_assert(off == 1440 || off == 60);
		ck_assert(epoch_of(h_jstr(x, "dueAt")) == start - off * 60);
		ck_assert_ptr_null(h_jget(x, "sentAt"));
	}
	ck_assert_int_eq(outbox_count(T_CREATED, id), 1);
}
END_TEST

START_TEST(create_location_header_and_event_created_message)
{
	struct who w = agent();
	struct h_resp *r = h_post(EV, w.tok, meeting_body(2 * DAY, "[30]"));
	const char *id = h_jstr(r->json, "id");
	const struct h_kmsg *m;
	json_object *p;

	ck_assert_int_eq(r->status, 201);
	ck_assert_msg(r->location && strstr(r->location, id), "location %s",
			r->location ? r->location : "-");
	m = h_kafka_wait_key(T_CREATED, id, 20000);
	ck_assert_msg(m != NULL, "event-created not on the broker");
	ck_assert_str_eq(h_jstr(m->json, "eventType"), "pin.calendar.event-created");
	ck_assert_str_eq(h_jstr(m->json, "aggregateId"), id);
	p = h_jget(m->json, "payload");
	ck_assert_str_eq(h_jstr(p, "eventId"), id);
	ck_assert_str_eq(h_jstr(p, "kind"), "Meeting");
	ck_assert_msg(json_object_object_get_ex(p, "clientUserId", NULL), "nulls present");
	ck_assert_msg(!json_object_object_get_ex(p, "title", NULL) && !strstr(m->value, "Встреча"),
			"no PII (title) in the payload: %s", m->value);
	assert_keys(p, KEYS_CREATED);
	ck_assert_str_eq(h_jstr(m->json, "aggregateType"), "CalendarEvent");
	ck_assert_str_eq(m->key, id);
}
END_TEST

/* ------------------------------------------------------------ validation */

START_TEST(validation_errors)
{
	struct who w = agent();
	struct h_resp *r;
	const char *s = h_iso_in(DAY), *e = h_iso_in(DAY + 3600);

	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Meeting\",\"title\":\"x\",\"startAt\":\"%s\","
			"\"endAt\":\"%s\",\"timeZone\":\"UTC\",\"colour\":\"red\"}", s, e));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	ck_assert_msg(strstr(r->body, "colour"), "unknown field named: %s", r->body);
	/* Meeting without endAt (INV-CAL-1) */
	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Meeting\",\"title\":\"x\",\"startAt\":\"%s\","
			"\"timeZone\":\"UTC\"}", s));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	ck_assert_msg(strstr(r->body, "endAt"), "%s", r->body);
	/* BookingDeadline only from CRM */
	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"BookingDeadline\",\"title\":\"x\","
			"\"startAt\":\"%s\",\"timeZone\":\"UTC\"}", s));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	/* longer than 24 h */
	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Meeting\",\"title\":\"x\",\"startAt\":\"%s\","
			"\"endAt\":\"%s\",\"timeZone\":\"UTC\"}", s, h_iso_in(3 * DAY)));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	/* offsets: duplicates, out of range, too many */
	r = h_post(EV, w.tok, meeting_body(DAY, "[60,60]"));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = h_post(EV, w.tok, meeting_body(DAY, "[0]"));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = h_post(EV, w.tok, meeting_body(DAY, "[1,2,3,4,5,6]"));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	/* missing title, empty title */
	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Task\",\"startAt\":\"%s\","
			"\"timeZone\":\"UTC\"}", s));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Task\",\"title\":\"\",\"startAt\":\"%s\","
			"\"timeZone\":\"UTC\"}", s));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	/* unknown zone; POSIX-looking names are not IANA zones either */
	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Task\",\"title\":\"x\",\"startAt\":\"%s\","
			"\"timeZone\":\"Mars/Olympus\"}", s));
	h_assert_problem(r, 422, "UNKNOWN_TIME_ZONE");
	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Task\",\"title\":\"x\",\"startAt\":\"%s\","
			"\"timeZone\":\"+02\"}", s));
	h_assert_problem(r, 422, "UNKNOWN_TIME_ZONE");
	/* bad instant */
	r = h_post(EV, w.tok, "{\"kind\":\"Task\",\"title\":\"x\",\"startAt\":\"tomorrow\","
			"\"timeZone\":\"UTC\"}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
			"WHERE owner_user_id = $1", w.sub), 0);
}
END_TEST

START_TEST(time_zone_canonical_and_point_task)
{
	struct who w = agent();
	json_object *ev = create_ok(&w, h_sprintf("{\"kind\":\"Task\",\"title\":\"call\","
			"\"startAt\":\"%s\",\"timeZone\":\"europe/berlin\",\"priority\":\"High\","
			"\"reminderOffsetsMinutes\":[]}", h_iso_in(DAY)));

	ck_assert_str_eq(h_jstr(ev, "timeZone"), "Europe/Berlin");
	ck_assert_ptr_null(h_jget(ev, "endAt"));
	ck_assert_str_eq(h_jstr(ev, "priority"), "High");
	ck_assert_int_eq(json_object_array_length(h_jget(ev, "reminders")), 0);
}
END_TEST

/* ------------------------------------------------------------ seed 000 AC */

START_TEST(ac_past_offsets_skipped)
{
	/* created 30 min before StartAt with {1440, 60}: both Skipped, nothing sent */
	struct who w = agent();
	const char *id = create_meeting(&w, 30 * 60, NULL);

	ck_assert_int_eq(rem_count(id, "Skipped"), 2);
	ck_assert_int_eq(rem_count(id, "Pending"), 0);
	ck_assert_int_eq(h_run_worker_once(0), 0);
	ck_assert_int_eq(outbox_count(T_REMINDER, id), 0);
}
END_TEST

START_TEST(ac_dispatch_once_and_idempotent)
{
	/* Pending with DueAt < now -> Sent, exactly one reminder-due; a second
	 * pass changes nothing */
	struct who w = agent();
	const char *id = create_meeting(&w, 2 * DAY, "[1440]");
	const char *rid = h_sql_scalar("SELECT id::text FROM calendar.event_reminders "
			"WHERE calendar_event_id = $1", id);
	const struct h_kmsg *m;
	json_object *p;

	ck_assert_int_eq(h_run_worker_once(DAY + 3600), 0);
	ck_assert_int_eq(rem_count(id, "Sent"), 1);
	ck_assert_ptr_nonnull(h_sql_scalar("SELECT sent_at::text FROM calendar.event_reminders "
			"WHERE id = $1", rid));
	ck_assert_int_eq(outbox_count(T_REMINDER, id), 1);
	ck_assert_int_eq(h_run_worker_once(DAY + 7200), 0);
	ck_assert_int_eq(rem_count(id, "Sent"), 1);
	ck_assert_int_eq(outbox_count(T_REMINDER, id), 1);

	m = h_kafka_wait_key(T_REMINDER, id, 20000);
	ck_assert_msg(m != NULL, "reminder-due not on the broker");
	ck_assert_str_eq(h_jstr(m->json, "eventType"), "pin.calendar.reminder-due");
	ck_assert_int_eq(json_object_get_int(h_jget(m->json, "contractVersion")), 1);
	p = h_jget(m->json, "payload");
	ck_assert_str_eq(h_jstr(p, "reminderId"), rid);
	ck_assert_str_eq(h_jstr(p, "eventId"), id);
	ck_assert_str_eq(h_jstr(p, "tenantId"), w.tenant);
	ck_assert_str_eq(h_jstr(p, "ownerUserId"), w.sub);
	ck_assert_str_eq(h_jstr(p, "kind"), "Meeting");
	ck_assert_str_eq(h_jstr(p, "timeZone"), "Europe/Moscow");
	ck_assert_int_eq(json_object_get_int(h_jget(p, "offsetMinutes")), 1440);
	ck_assert_msg(json_object_object_get_ex(p, "clientUserId", NULL) &&
			json_object_object_get_ex(p, "appointmentId", NULL), "nulls present");
	ck_assert_msg(!strstr(m->value, "Встреча"), "no PII: %s", m->value);
	assert_keys(p, KEYS_REMINDER);
}
END_TEST

START_TEST(ac_reschedule_rematerialises)
{
	/* two Pending rows + one Sent; moved a week later: Pending replaced from
	 * the new StartAt, the Sent row untouched; duration kept */
	struct who w = agent();
	const char *id = create_meeting(&w, 4 * DAY, "[4320,1440,60]");
	char *sent_before, *old_pending;
	struct h_resp *r;
	long long old_start, new_start;
	const struct h_kmsg *m;

	ck_assert_int_eq(h_run_worker_once(DAY + 3600), 0);       /* the 4320 one is due */
	ck_assert_int_eq(rem_count(id, "Sent"), 1);
	ck_assert_int_eq(rem_count(id, "Pending"), 2);
	sent_before = h_sql_scalar("SELECT id || due_at::text || sent_at::text || updated_at::text "
			"FROM calendar.event_reminders WHERE calendar_event_id = $1 AND status = 'Sent'", id);
	old_pending = h_sql_scalar("SELECT string_agg(id::text, ',') FROM calendar.event_reminders "
			"WHERE calendar_event_id = $1 AND status = 'Pending'", id);
	old_start = h_sql_int("SELECT extract(epoch FROM start_at)::bigint "
			"FROM calendar.calendar_events WHERE id = $1", id);
	r = post_id(&w, id, "reschedule", h_sprintf("{\"startAt\":\"%s\"}", h_iso_in(11 * DAY)));
	ck_assert_msg(r->status == 200, "reschedule %ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "version")), 2);
	new_start = epoch_of(h_jstr(r->json, "startAt"));
	ck_assert(new_start > old_start);
	ck_assert(epoch_of(h_jstr(r->json, "endAt")) - new_start == 3600);
	ck_assert_int_eq(rem_count(id, "Sent"), 1);
	ck_assert_int_eq(rem_count(id, "Pending"), 3);       /* all three are future again */
	ck_assert_str_eq(sent_before, h_sql_scalar("SELECT id || due_at::text || sent_at::text || "
			"updated_at::text FROM calendar.event_reminders "
			"WHERE calendar_event_id = $1 AND status = 'Sent'", id));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders "
			"WHERE id = ANY (string_to_array($1, ',')::uuid[])", old_pending), 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders r "
			"JOIN calendar.calendar_events e ON e.id = r.calendar_event_id "
			"WHERE r.calendar_event_id = $1 AND r.status = 'Pending' "
			"AND r.due_at <> e.start_at - make_interval(mins => r.offset_minutes)", id), 0);
	ck_assert_int_eq(outbox_count(T_RESCHEDULED, id), 1);
	m = h_kafka_wait_key(T_RESCHEDULED, id, 20000);
	ck_assert_msg(m != NULL, "event-rescheduled not on the broker");
	ck_assert_str_eq(h_jstr(h_jget(m->json, "payload"), "origin"), "Manual");
	ck_assert(epoch_of(h_jstr(h_jget(m->json, "payload"), "startAt")) == new_start);
	assert_keys(h_jget(m->json, "payload"), KEYS_RESCHEDULED);
	ck_assert_msg(!strstr(m->value, "Встреча"), "no PII: %s", m->value);
}
END_TEST

START_TEST(reschedule_to_same_start_is_no_move)
{
	/* seed 002: every *actual* reschedule is published; the same instant
	 * (even written with another offset) moves nothing: no message, the
	 * Pending reminders and the version stay */
	struct who w = agent();
	json_object *ev = create_ok(&w, meeting_body(3 * DAY, NULL));
	const char *id = h_jstr(ev, "id");
	char *pending = h_sql_scalar("SELECT string_agg(id::text, ',' ORDER BY id) "
			"FROM calendar.event_reminders WHERE calendar_event_id = $1 "
			"AND status = 'Pending'", id);
	char *same = h_sql_scalar("SELECT to_char($1::timestamptz AT TIME ZONE 'Asia/Tokyo', "
			"'YYYY-MM-DD\"T\"HH24:MI:SS.US') || '+09:00'", h_jstr(ev, "startAt"));
	struct h_resp *r;

	r = post_id(&w, id, "reschedule", h_sprintf("{\"startAt\":\"%s\"}", same));
	ck_assert_msg(r->status == 200, "reschedule %ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "startAt"), h_jstr(ev, "startAt"));
	ck_assert_str_eq(h_jstr(r->json, "endAt"), h_jstr(ev, "endAt"));
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "version")), 1);
	ck_assert_int_eq(outbox_count(T_RESCHEDULED, id), 0);
	ck_assert_str_eq(pending, h_sql_scalar("SELECT string_agg(id::text, ',' ORDER BY id) "
			"FROM calendar.event_reminders WHERE calendar_event_id = $1 "
			"AND status = 'Pending'", id));
	/* still refused on a terminal event, even when nothing would move */
	ck_assert_int_eq(post_id(&w, id, "cancel", NULL)->status, 200);
	h_assert_problem(post_id(&w, id, "reschedule", h_sprintf("{\"startAt\":\"%s\"}", same)),
			409, "INVALID_STATUS_TRANSITION");
}
END_TEST

START_TEST(ac_cancel_skips_pending)
{
	struct who w = agent();
	const char *id = create_meeting(&w, 3 * DAY, NULL);
	struct h_resp *r;
	const struct h_kmsg *m;
	json_object *p;

	r = post_id(&w, id, "cancel", "{\"reason\":\"клиент заболел\"}");
	ck_assert_msg(r->status == 200, "cancel %ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "status"), "Cancelled");
	ck_assert_ptr_nonnull(h_jstr(r->json, "cancelledAt"));
	ck_assert_int_eq(rem_count(id, "Skipped"), 2);
	ck_assert_int_eq(rem_count(id, "Pending"), 0);
	{
		/* INV-REM-2: a Skipped (terminal) reminder never changes again */
		const char *p1[1] = { id };
		PGresult *res = PQexecParams(h_pg(), "UPDATE calendar.event_reminders"
				" SET status = 'Pending', sent_at = NULL"
				" WHERE calendar_event_id = $1::uuid", 1, NULL, p1, NULL, NULL, 0);
		const char *st = PQresultErrorField(res, PG_DIAG_SQLSTATE);
		const char *msg = PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY);

		ck_assert_msg(st && !strcmp(st, "23514") && msg && strstr(msg, "INV-REM-2"),
				"a Skipped reminder changed: %s %s", st ? st : PQcmdTuples(res),
				msg ? msg : "");
		PQclear(res);
	}
	ck_assert_int_eq(h_run_worker_once(4 * DAY), 0);
	ck_assert_int_eq(outbox_count(T_REMINDER, id), 0);
	m = h_kafka_wait_key(T_STATUS, id, 20000);
	ck_assert_msg(m != NULL, "event-status-changed not on the broker");
	p = h_jget(m->json, "payload");
	ck_assert_str_eq(h_jstr(p, "previousStatus"), "Planned");
	ck_assert_str_eq(h_jstr(p, "status"), "Cancelled");
	ck_assert_str_eq(h_jstr(p, "cancelReason"), "клиент заболел");
	assert_keys(p, KEYS_STATUS);
	/* cancelled is terminal */
	h_assert_problem(post_id(&w, id, "cancel", NULL), 409, "INVALID_STATUS_TRANSITION");
	h_assert_problem(post_id(&w, id, "reschedule",
			h_sprintf("{\"startAt\":\"%s\"}", h_iso_in(5 * DAY))),
			409, "INVALID_STATUS_TRANSITION");
}
END_TEST

/* ------------------------------------------------------------ status machine */

START_TEST(start_then_complete)
{
	struct who w = agent();
	const char *id = create_meeting(&w, 3 * DAY, NULL);
	struct h_resp *r;

	r = post_id(&w, id, "start", NULL);
	ck_assert_msg(r->status == 200, "start %ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "status"), "InProgress");   /* never Cancelled */
	ck_assert_ptr_nonnull(h_jstr(r->json, "startedAt"));
	ck_assert_int_eq(rem_count(id, "Pending"), 2);              /* still open */
	h_assert_problem(post_id(&w, id, "start", "{}"), 409, "INVALID_STATUS_TRANSITION");
	r = post_id(&w, id, "complete", "{}");
	ck_assert_msg(r->status == 200, "complete %ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "status"), "Completed");
	ck_assert_ptr_nonnull(h_jstr(r->json, "completedAt"));
	ck_assert_int_eq(rem_count(id, "Skipped"), 2);
	ck_assert_int_eq(outbox_count(T_STATUS, id), 2);
	h_assert_problem(post_id(&w, id, "cancel", NULL), 409, "INVALID_STATUS_TRANSITION");
	h_assert_problem(post_id(&w, id, "complete", NULL), 409, "INVALID_STATUS_TRANSITION");
	/* transition bodies are strict too */
	h_assert_problem(post_id(&w, create_meeting(&w, DAY, NULL), "start", "{\"x\":1}"),
			422, "VALIDATION_FAILED");
}
END_TEST

/* ------------------------------------------------------------ PATCH, If-Match */

START_TEST(patch_fields_offsets_and_if_match)
{
	struct who w = agent();
	const char *id = create_meeting(&w, 3 * DAY, NULL);
	const char *path = h_sprintf(EV "/%s", id);
	struct h_resp *r;

	r = h_request("PATCH", path, w.tok, "{\"title\":\"Показ\",\"location\":null,"
			"\"priority\":\"Critical\",\"reminderOffsetsMinutes\":[30]}",
			"If-Match: \"1\"");
	ck_assert_msg(r->status == 200, "patch %ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "title"), "Показ");
	ck_assert_str_eq(h_jstr(r->json, "priority"), "Critical");
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "version")), 2);
	ck_assert_int_eq(rem_count(id, "Pending"), 1);
	ck_assert_int_eq(h_sql_int("SELECT offset_minutes FROM calendar.event_reminders "
			"WHERE calendar_event_id = $1 AND status = 'Pending'", id), 30);
	/* an empty PATCH changes nothing: same version, no conflict for others */
	r = h_request("PATCH", path, w.tok, "{}", "If-Match: \"2\"");
	ck_assert_msg(r->status == 200, "empty patch %ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "version")), 2);
	/* stale version */
	r = h_request("PATCH", path, w.tok, "{\"title\":\"y\"}", "If-Match: \"1\"");
	h_assert_problem(r, 409, "VERSION_CONFLICT");
	r = post_id(&w, id, "cancel", NULL);   /* no If-Match: fine */
	ck_assert_int_eq(r->status, 200);
	r = h_request("POST", h_sprintf(EV "/%s/start", id), w.tok, NULL, "If-Match: \"2\"");
	h_assert_problem(r, 409, "VERSION_CONFLICT");
	r = h_request("PATCH", path, w.tok, "{\"title\":\"y\"}", "If-Match: abc");
	h_assert_problem(r, 400, "MALFORMED_REQUEST");
	/* strict PATCH body: unknown and immutable fields */
	r = h_request("PATCH", path, w.tok, "{\"startAt\":\"2030-01-01T00:00:00Z\"}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = h_request("PATCH", path, w.tok, "{\"title\":null}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
}
END_TEST

/* RFC 9110 8.8.3: If-Match holds quoted entity-tags; an unquoted version,
 * "*" or a list is refused with 400 and nothing changes (api/openapi.yaml,
 * "If-Match") */
START_TEST(if_match_must_be_quoted)
{
	static const char *const bad[] = { "If-Match: 1", "If-Match: \"1", "If-Match: 1\"",
		"If-Match: *", "If-Match: \"1\", \"2\"", "If-Match: W/1", "If-Match: \"\"" };
	struct who w = agent();
	const char *id = create_meeting(&w, 3 * DAY, NULL);
	const char *path = h_sprintf(EV "/%s", id);
	struct h_resp *r;

	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		r = h_request("PATCH", path, w.tok, "{\"title\":\"y\"}", bad[i]);
		h_assert_problem(r, 400, "MALFORMED_REQUEST");
		r = h_request("POST", h_sprintf(EV "/%s/start", id), w.tok, NULL, bad[i]);
		h_assert_problem(r, 400, "MALFORMED_REQUEST");
	}
	r = h_get(path, w.tok);
	ck_assert_str_eq(h_jstr(r->json, "status"), "Planned");
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "version")), 1);
	ck_assert_str_eq(r->etag, "\"1\"");
	/* the ETag as sent, or weakened by a proxy, is the precondition */
	r = h_request("PATCH", path, w.tok, "{\"title\":\"y\"}", "If-Match: W/\"1\"");
	ck_assert_msg(r->status == 200, "weak %ld %s", r->status, r->body);
	r = h_request("PATCH", path, w.tok, "{\"title\":\"z\"}", "If-Match:  \"2\" ");
	ck_assert_msg(r->status == 200, "spaces %ld %s", r->status, r->body);
	ck_assert_str_eq(r->etag, "\"3\"");
}
END_TEST

/* UNKNOWN_TIME_ZONE carries errors[] like every 422 of a body, and is
 * answered when the zone is the only invalid field: with others,
 * VALIDATION_FAILED names them all, the zone too (sdk/problem.h) */
START_TEST(unknown_zone_errors)
{
	struct who w = agent();
	const char *s = h_iso_in(DAY);
	struct h_resp *r;

	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Task\",\"title\":\"x\",\"startAt\":\"%s\","
			"\"timeZone\":\"Mars/Olympus\"}", s));
	h_assert_problem(r, 422, "UNKNOWN_TIME_ZONE");
	h_assert_error_fields(r, "timeZone");
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(h_jget(r->json, "errors"), 0),
			"message"), "unknown IANA time zone");
	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Task\",\"title\":\"\",\"startAt\":\"%s\","
			"\"timeZone\":\"Mars/Olympus\"}", s));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	h_assert_error_fields(r, "title", "timeZone");
	r = h_post(EV, w.tok, h_sprintf("{\"kind\":\"Task\",\"title\":\"\",\"startAt\":\"%s\","
			"\"timeZone\":\"Europe/Berlin\"}", s));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	h_assert_error_fields(r, "title");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
			"WHERE owner_user_id = $1", w.sub), 0);
}
END_TEST

/* ------------------------------------------------------------ idempotency */

START_TEST(idempotency_key_on_create)
{
	struct who w = agent();
	char *key = h_sprintf("Idempotency-Key: %s", h_uuid());
	char *body = meeting_body(2 * DAY, NULL);
	struct h_resp *a, *b, *c;

	a = h_request("POST", EV, w.tok, body, key);
	b = h_request("POST", EV, w.tok, body, key);
	ck_assert_int_eq(a->status, 201);
	ck_assert_msg(b->status == 201, "replay %ld %s", b->status, b->body);
	ck_assert_str_eq(h_jstr(a->json, "id"), h_jstr(b->json, "id"));
	/* the replay is the first answer: Location and ETag included */
	ck_assert_ptr_nonnull(b->location);
	ck_assert_str_eq(a->location, b->location);
	ck_assert_msg(b->etag && strcmp(a->etag, b->etag) == 0, "replay ETag %s, first %s",
			b->etag ? b->etag : "(none)", a->etag);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
			"WHERE owner_user_id = $1", w.sub), 1);
	ck_assert_int_eq(outbox_count(T_CREATED, h_jstr(a->json, "id")), 1);
	c = h_request("POST", EV, w.tok, meeting_body(5 * DAY, NULL), key);
	h_assert_problem(c, 422, "VALIDATION_FAILED");
}
END_TEST

/* issue 9 item 4: the record is keyed on (sub, tenant): the same sub in
 * another tenant with the same key and body is a new request (its own
 * event in its own tenant), never the first tenant's body */
START_TEST(idempotency_key_per_tenant)
{
	struct who a = agent(), b;
	char *key = h_sprintf("Idempotency-Key: %s", h_uuid());
	char *body = meeting_body(2 * DAY, NULL);
	struct h_resp *r1, *r2, *r3;

	b = a;
	b.tenant = h_uuid();
	b.tok = h_token("agent", a.sub, b.tenant, "calendar.events.view",
			"calendar.events.manage");
	r1 = h_request("POST", EV, a.tok, body, key);
	ck_assert_msg(r1->status == 201, "%ld %s", r1->status, r1->body);
	r2 = h_request("POST", EV, b.tok, body, key);
	ck_assert_msg(r2->status == 201, "%ld %s", r2->status, r2->body);
	ck_assert_str_ne(h_jstr(r1->json, "id"), h_jstr(r2->json, "id"));
	ck_assert_str_eq(h_jstr(r2->json, "tenantId"), b.tenant);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
			"WHERE owner_user_id = $1", a.sub), 2);
	/* each tenant's replay is its own first answer */
	r3 = h_request("POST", EV, b.tok, body, key);
	ck_assert_int_eq(r3->status, 201);
	ck_assert_str_eq(h_jstr(r3->json, "id"), h_jstr(r2->json, "id"));
	r3 = h_request("POST", EV, a.tok, body, key);
	ck_assert_int_eq(r3->status, 201);
	ck_assert_str_eq(h_jstr(r3->json, "id"), h_jstr(r1->json, "id"));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.idempotency_keys "
			"WHERE caller = $1", a.sub), 2);
}
END_TEST

/* issue 9 item 3: a derived instant out of 1900..9999 (end = start +
 * duration, a reminder's DueAt) answers 422 on create, PATCH and reschedule;
 * nothing is stored or published */
START_TEST(derived_instants_out_of_range)
{
	struct who w = agent();
	const char *id = create_meeting(&w, 2 * DAY, "[60]"), *task;
	struct h_resp *r;

	/* the reported case: a 1-hour meeting to 9999-12-31T23:30Z */
	r = post_id(&w, id, "reschedule", "{\"startAt\":\"9999-12-31T23:30:00Z\"}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	ck_assert_msg(strstr(r->body, "startAt") && strstr(r->body, "1900-01-01"), "%s", r->body);
	ck_assert_int_eq(h_sql_int("SELECT version FROM calendar.calendar_events WHERE id = $1",
			id), 1);
	ck_assert_int_eq(outbox_count(T_RESCHEDULED, id), 0);
	/* the last hour that fits moves */
	r = post_id(&w, id, "reschedule", "{\"startAt\":\"9999-12-31T22:59:59Z\"}");
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(r->json, "endAt"), "9999-12-31T23:59:59Z");
	ck_assert_int_eq(outbox_count(T_RESCHEDULED, id), 1);

	/* create: the default reminders (1440, 60) of a task at 1900-01-01T10:00Z
	 * would be due in 1899 */
	r = h_post(EV, w.tok, "{\"kind\":\"Task\",\"title\":\"x\",\"startAt\":"
			"\"1900-01-01T10:00:00Z\",\"timeZone\":\"UTC\"}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
			"WHERE owner_user_id = $1 AND start_at < '1901-01-01'", w.sub), 0);
	/* without reminders it is fine; PATCH offsets that reach 1899: 422 */
	r = h_post(EV, w.tok, "{\"kind\":\"Task\",\"title\":\"x\",\"startAt\":"
			"\"1900-01-01T10:00:00Z\",\"timeZone\":\"UTC\",\"reminderOffsetsMinutes\":[]}");
	ck_assert_msg(r->status == 201, "%ld %s", r->status, r->body);
	task = h_jstr(r->json, "id");
	r = h_request("PATCH", h_sprintf(EV "/%s", task), w.tok,
			"{\"reminderOffsetsMinutes\":[720]}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	ck_assert_msg(strstr(r->body, "reminderOffsetsMinutes"), "%s", r->body);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders "
			"WHERE calendar_event_id = $1", task), 0);
	r = h_request("PATCH", h_sprintf(EV "/%s", task), w.tok,
			"{\"reminderOffsetsMinutes\":[60]}");
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	/* reschedule the task 30 min earlier: its 60-min reminder would be 1899 */
	r = post_id(&w, task, "reschedule", "{\"startAt\":\"1900-01-01T00:30:00Z\"}");
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	ck_assert_int_eq(outbox_count(T_RESCHEDULED, task), 0);
}
END_TEST

/* ------------------------------------------------------------ isolation */

START_TEST(foreign_ids_are_404)
{
	struct who w = agent();
	struct who colleague = agent_in(w.tenant);
	struct who stranger = agent();
	const char *id = create_meeting(&w, 3 * DAY, NULL);
	const char *path = h_sprintf(EV "/%s", id);
	const struct who *o[2] = { &colleague, &stranger };
	int i;

	for (i = 0; i < 2; i++) {
		h_assert_problem(h_get(path, o[i]->tok), 404, "EVENT_NOT_FOUND");
		h_assert_problem(h_request("PATCH", path, o[i]->tok, "{\"title\":\"x\"}"),
				404, "EVENT_NOT_FOUND");
		h_assert_problem(post_id(o[i], id, "cancel", NULL), 404, "EVENT_NOT_FOUND");
		h_assert_problem(post_id(o[i], id, "start", NULL), 404, "EVENT_NOT_FOUND");
		h_assert_problem(post_id(o[i], id, "complete", NULL), 404, "EVENT_NOT_FOUND");
		h_assert_problem(post_id(o[i], id, "reschedule",
				h_sprintf("{\"startAt\":\"%s\"}", h_iso_in(DAY))), 404, "EVENT_NOT_FOUND");
	}
	h_assert_problem(h_get(EV "/not-a-uuid", w.tok), 400, "MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf(EV "/%s", h_uuid()), w.tok), 404, "EVENT_NOT_FOUND");
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.calendar_events WHERE id = $1",
			id), "Planned");
}
END_TEST

START_TEST(managed_events_refuse_agent_writes)
{
	struct who w = agent();
	char *id = h_uuid();
	const char *path = h_sprintf(EV "/%s", id);

	h_sql("INSERT INTO calendar.calendar_events (id, tenant_id, owner_user_id, kind, origin, "
		"title, start_at, end_at, time_zone, client_user_id, appointment_id, created_at, "
		"updated_at) VALUES ($1, $2, $3, 'Showing', 'Appointment', 't', "
		"now() + interval '2 days', now() + interval '2 days 1 hour', 'UTC', $4, $5, now(), now())",
		id, w.tenant, w.sub, h_uuid(), h_uuid());
	ck_assert_int_eq(h_get(path, w.tok)->status, 200);
	h_assert_problem(h_request("PATCH", path, w.tok, "{\"title\":\"x\"}"),
			409, "EVENT_MANAGED_BY_SOURCE");
	h_assert_problem(post_id(&w, id, "cancel", NULL), 409, "EVENT_MANAGED_BY_SOURCE");
	h_assert_problem(post_id(&w, id, "start", NULL), 409, "EVENT_MANAGED_BY_SOURCE");
	h_assert_problem(post_id(&w, id, "complete", NULL), 409, "EVENT_MANAGED_BY_SOURCE");
	h_assert_problem(post_id(&w, id, "reschedule",
			h_sprintf("{\"startAt\":\"%s\"}", h_iso_in(DAY))), 409, "EVENT_MANAGED_BY_SOURCE");
}
END_TEST

/* ------------------------------------------------------------ auth */

START_TEST(auth_and_permissions)
{
	struct who w = agent();
	char *view_only = h_token("agent", w.sub, w.tenant, "calendar.events.view");
	char *investor = h_token("investor", h_uuid(), NULL, "calendar.events.manage");
	char *no_tenant = h_token("agent", w.sub, NULL, "calendar.events.view",
			"calendar.events.manage");
	const char *q = h_sprintf(EV "?from=%s&to=%s", h_iso_in(0), h_iso_in(DAY));

	h_assert_problem(h_get(q, NULL), 401, "UNAUTHENTICATED");
	h_assert_problem(h_post(EV, NULL, meeting_body(DAY, NULL)), 401, "UNAUTHENTICATED");
	h_assert_problem(h_post(EV, view_only, meeting_body(DAY, NULL)), 403, "FORBIDDEN");
	ck_assert_int_eq(h_get(q, view_only)->status, 200);
	h_assert_problem(h_get(q, investor), 403, "FORBIDDEN");
	h_assert_problem(h_get(q, no_tenant), 403, "FORBIDDEN");
}
END_TEST

/* ------------------------------------------------------------ list */

START_TEST(list_range_paging_filters)
{
	struct who w = agent();
	struct who other = agent_in(w.tenant);
	const char *from = h_iso_in(0), *to = h_iso_in(10 * DAY);
	const char *ids[5];
	const char *cursor = NULL;
	struct h_resp *r;
	int i, seen = 0, pages = 0;

	for (i = 0; i < 5; i++)
		ids[i] = create_meeting(&w, (i + 1) * DAY, NULL);
	create_meeting(&other, 2 * DAY, NULL);
	create_ok(&w, h_sprintf("{\"kind\":\"Task\",\"title\":\"t\",\"startAt\":\"%s\","
			"\"timeZone\":\"UTC\"}", h_iso_in(20 * DAY)));      /* outside the range */
	do {
		r = h_get(h_sprintf(EV "?from=%s&to=%s&limit=2%s%s", from, to,
				cursor ? "&cursor=" : "", cursor ? cursor : ""), w.tok);
		ck_assert_msg(r->status == 200, "list %ld %s", r->status, r->body);
		json_object *items = h_jget(r->json, "items");
		for (size_t k = 0; k < json_object_array_length(items); k++) {
			ck_assert_msg(seen < 5, "too many items");
			ck_assert_str_eq(h_jstr(json_object_array_get_idx(items, k), "id"), ids[seen]);
			seen++;
		}
		cursor = h_jstr(r->json, "nextCursor");
		cursor = cursor ? h_strdup(cursor) : NULL;
		pages++;
	} while (cursor && pages < 10);
	ck_assert_int_eq(seen, 5);
	ck_assert_int_eq(pages, 3);
	/* overlap: an event that started before `from` and is still running */
	r = h_get(h_sprintf(EV "?from=%s&to=%s", h_iso_in(DAY + 1800), h_iso_in(DAY + 2000)), w.tok);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 1);
	/* filters */
	r = h_get(h_sprintf(EV "?from=%s&to=%s&kind=Task", from, h_iso_in(30 * DAY)), w.tok);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 1);
	r = h_get(h_sprintf(EV "?from=%s&to=%s&status=Cancelled", from, to), w.tok);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 0);
	/* errors */
	h_assert_problem(h_get(h_sprintf(EV "?to=%s", to), w.tok), 400, "MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf(EV "?from=yesterday&to=%s", to), w.tok), 400,
			"MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf(EV "?from=%s&to=%s&cursor=zz", from, to), w.tok), 400,
			"MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf(EV "?from=%s&to=%s&limit=501", from, to), w.tok), 400,
			"MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf(EV "?from=%s&to=%s", from, h_iso_in(93 * DAY)), w.tok),
			422, "VALIDATION_FAILED");
	h_assert_problem(h_get(h_sprintf(EV "?from=%s&to=%s", to, from), w.tok),
			422, "VALIDATION_FAILED");
}
END_TEST

/* ------------------------------------------------------------ team views */

START_TEST(agency_and_pin_manager_views)
{
	struct who a = agent();
	struct who b = agent_in(a.tenant);
	struct who foreign = agent();
	char *head = h_token("agency_head", h_uuid(), a.tenant, "calendar.team.view");
	char *head_noperm = h_token("agency_head", h_uuid(), a.tenant);
	char *mgr = h_token("pin_manager", h_uuid(), NULL, "calendar.team.view");
	const char *from = h_iso_in(0), *to = h_iso_in(5 * DAY);
	const char *ea = create_meeting(&a, DAY, NULL);
	struct h_resp *r;
	json_object *items;

	create_meeting(&b, 2 * DAY, NULL);
	create_meeting(&foreign, DAY, NULL);
	h_sql("INSERT INTO calendar.user_replicas (user_id, display_name, created_at, updated_at) "
		"VALUES ($1, 'Анна Агентова', now(), now())", a.sub);
	r = h_get(h_sprintf("/api/v1/agency/calendar/events?from=%s&to=%s", from, to), head);
	ck_assert_msg(r->status == 200, "team %ld %s", r->status, r->body);
	items = h_jget(r->json, "items");
	ck_assert_int_eq(json_object_array_length(items), 2);
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(items, 0), "id"), ea);
	ck_assert_str_eq(h_jstr(h_jget(json_object_array_get_idx(items, 0), "owner"),
			"displayName"), "Анна Агентова");
	r = h_get(h_sprintf("/api/v1/agency/calendar/events?from=%s&to=%s&ownerUserIds=%s",
			from, to, b.sub), head);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 1);
	/* naming another tenant's agent does not leave the caller's tenant */
	r = h_get(h_sprintf("/api/v1/agency/calendar/events?from=%s&to=%s&ownerUserIds=%s,%s",
			from, to, foreign.sub, b.sub), head);
	ck_assert_msg(r->status == 200, "team %ld %s", r->status, r->body);
	items = h_jget(r->json, "items");
	ck_assert_int_eq(json_object_array_length(items), 1);
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(items, 0), "ownerUserId"), b.sub);
	h_assert_problem(h_get(h_sprintf("/api/v1/agency/calendar/events?from=%s&to=%s"
			"&ownerUserIds=nope", from, to), head), 400, "MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf("/api/v1/agency/calendar/events?from=%s&to=%s",
			from, to), head_noperm), 403, "FORBIDDEN");
	/* investors are no team actors, even with a tenant and the permission */
	r = h_get(h_sprintf("/api/v1/agency/calendar/events?from=%s&to=%s", from, to),
			h_token("investor", h_uuid(), a.tenant, "calendar.team.view"));
	h_assert_problem(r, 403, "FORBIDDEN");
	ck_assert_str_eq(h_jstr(r->json, "detail"), "this area is not open to your actor");
	r = h_get("/api/v1/agency/calendar/appointments",
			h_token("investor", h_uuid(), a.tenant, "calendar.team.view"));
	h_assert_problem(r, 403, "FORBIDDEN");
	ck_assert_str_eq(h_jstr(r->json, "detail"), "this area is not open to your actor");

	r = h_get(h_sprintf("/api/v1/pin-manager/calendar/events?tenantId=%s&from=%s&to=%s",
			a.tenant, from, to), mgr);
	ck_assert_msg(r->status == 200, "pin manager %ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 2);
	r = h_get(h_sprintf("/api/v1/pin-manager/calendar/events?tenantId=%s&ownerUserId=%s"
			"&from=%s&to=%s", a.tenant, a.sub, from, to), mgr);
	ck_assert_int_eq(json_object_array_length(h_jget(r->json, "items")), 1);
	h_assert_problem(h_get(h_sprintf("/api/v1/pin-manager/calendar/events?from=%s&to=%s",
			from, to), mgr), 400, "MALFORMED_REQUEST");
	h_assert_problem(h_get(h_sprintf("/api/v1/pin-manager/calendar/events?tenantId=%s"
			"&from=%s&to=%s", a.tenant, from, to), head), 403, "FORBIDDEN");
	/* read only: neither view writes events, in its area or in the agent's */
	h_assert_problem(h_post(EV, mgr, meeting_body(DAY, NULL)), 403, "FORBIDDEN");
	h_assert_problem(h_post(EV, head, meeting_body(DAY, NULL)), 403, "FORBIDDEN");
	h_assert_problem(h_post(h_sprintf(EV "/%s/cancel", ea), mgr, NULL), 403, "FORBIDDEN");
	h_assert_problem(h_get(h_sprintf(EV "/%s", ea), head), 403, "FORBIDDEN");
	ck_assert_int_ne(h_post("/api/v1/pin-manager/calendar/events", mgr,
			meeting_body(DAY, NULL))->status, 201);
	ck_assert_int_ne(h_post("/api/v1/agency/calendar/events", head,
			meeting_body(DAY, NULL))->status, 201);
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.calendar_events WHERE id = $1",
			ea), "Planned");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.calendar_events "
			"WHERE tenant_id = $1", a.tenant), 2);
}
END_TEST

START_TEST(dispatch_batch_one_message_each_all_or_nothing)
{
	/* one dispatch batch writes its reminder-due rows with ONE outbox insert
	 * (api->outbox_put_many): exactly one row per reminder, each with the
	 * envelope outbox_put writes; a row refused in the middle of the batch
	 * leaves nothing behind: no reminder Sent without its row, also those
	 * before it in the batch */
	struct who w = agent();
	const char *ids[5], *in_list = "";
	const struct h_kmsg *m;
	int i;

	for (i = 0; i < 5; i++) {
		ids[i] = create_meeting(&w, DAY + 600 * i, "[60,120]");
		in_list = h_sprintf("%s%s%s", in_list, i ? "," : "", ids[i]);
	}
	/* the outbox refuses the rows of the middle event (due 3rd of 5) */
	h_sql(h_sprintf("ALTER TABLE calendar.outbox ADD CONSTRAINT test_refuse_%.8s "
		"CHECK (key <> '%s') NOT VALID", ids[2], ids[2]));
	ck_assert_int_ne(h_run_worker_once(DAY + 3 * 3600), 0);
	h_sql(h_sprintf("ALTER TABLE calendar.outbox DROP CONSTRAINT test_refuse_%.8s", ids[2]));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders WHERE "
		"status <> 'Pending' AND calendar_event_id = ANY (string_to_array($1, ',')::uuid[])",
		in_list), 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE topic = $1 "
		"AND key = ANY (string_to_array($2, ','))", T_REMINDER, in_list), 0);

	/* the next pass sends all 10, one row each */
	ck_assert_int_eq(h_run_worker_once(DAY + 3 * 3600), 0);
	for (i = 0; i < 5; i++) {
		ck_assert_int_eq(rem_count(ids[i], "Sent"), 2);
		ck_assert_int_eq(outbox_count(T_REMINDER, ids[i]), 2);
	}
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT o.envelope->'payload'->>'reminderId') "
		"FROM calendar.outbox o JOIN calendar.event_reminders r "
		"  ON r.id::text = o.envelope->'payload'->>'reminderId' AND r.status = 'Sent' "
		"WHERE o.topic = $1 AND o.key = ANY (string_to_array($2, ','))", T_REMINDER, in_list), 10);
	/* the envelope: what outbox_put writes (the event-created row of the same
	 * event has the same keys), its own messageId v7 = the row's,
	 * createdAt = the row's in milliseconds, correlationId = the trace of the
	 * row's traceparent, aggregate = the event */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox o, calendar.outbox c "
		"WHERE o.topic = $1 AND o.key = ANY (string_to_array($2, ',')) "
		"  AND c.topic = $3 AND c.key = o.key "
		"  AND (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(o.envelope) k) = "
		"      (SELECT string_agg(k, ',' ORDER BY k) FROM jsonb_object_keys(c.envelope) k) "
		"  AND o.envelope->>'messageId' = o.message_id::text "
		"  AND substr(o.message_id::text, 15, 1) = '7' "
		"  AND o.envelope->>'eventType' = 'pin.calendar.reminder-due' "
		"  AND o.envelope->'contractVersion' = '1'::jsonb "
		"  AND o.envelope->>'aggregateType' = 'CalendarEvent' "
		"  AND o.envelope->>'aggregateId' = o.key "
		"  AND o.envelope->'payload'->>'eventId' = o.key "
		"  AND o.envelope->>'createdAt' ~ '^\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z$' "
		"  AND (o.envelope->>'createdAt')::timestamptz = o.created_at "
		"  AND o.envelope->>'correlationId' = split_part(o.traceparent, '-', 2)",
		T_REMINDER, in_list, T_CREATED), 10);
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT message_id) FROM calendar.outbox "
		"WHERE topic = $1 AND key = ANY (string_to_array($2, ','))", T_REMINDER, in_list), 10);
	/* and the relay publishes them as any other row */
	m = h_kafka_wait_key(T_REMINDER, ids[2], 20000);
	ck_assert_msg(m != NULL, "reminder-due of the refused event not on the broker");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE message_id::text = $1 "
		"AND key = $2", h_jstr(m->json, "messageId"), ids[2]), 1);
	assert_keys(h_jget(m->json, "payload"), KEYS_REMINDER);
}
END_TEST

START_TEST(dispatch_shards_each_once_in_order)
{
	/* a pass whose first batch comes back full goes on as shards at once
	 * (job.reminder-dispatch.connections; api->run_shards): every reminder
	 * once, the reminders of one event (the outbox key) in DueAt order, and
	 * the shards on threads of their own: one trace for the pass, a child
	 * span (traceparent) per shard thread */
	struct who w = agent();
	char *in_list = h_strdup("");
	int i;

	for (i = 0; i < 15; i++)
		in_list = h_sprintf("%s%s%s", in_list, i ? "," : "",
				create_meeting(&w, DAY + 600 * i, "[60,120]"));
	setenv("PIN_JOB_REMINDER_DISPATCH_BATCH", "2", 1);
	setenv("PIN_JOB_REMINDER_DISPATCH_CONNECTIONS", "3", 1);
	ck_assert_int_eq(h_run_worker_once(DAY + 3 * 3600), 0);
	unsetenv("PIN_JOB_REMINDER_DISPATCH_CONNECTIONS");
	unsetenv("PIN_JOB_REMINDER_DISPATCH_BATCH");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders "
			"WHERE status = 'Sent' AND calendar_event_id = ANY "
			"(string_to_array($1, ',')::uuid[])", in_list), 30);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE topic = $1 "
			"AND key = ANY (string_to_array($2, ','))", T_REMINDER, in_list), 30);
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT envelope->'payload'->>'reminderId') "
			"FROM calendar.outbox WHERE topic = $1 AND key = ANY "
			"(string_to_array($2, ','))", T_REMINDER, in_list), 30);
	/* per key: the outbox order (id) is the DueAt order (offset 120 first) */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM (SELECT key, array_agg("
			"(envelope->'payload'->>'offsetMinutes')::int ORDER BY id) AS o "
			"FROM calendar.outbox WHERE topic = $1 AND key = ANY "
			"(string_to_array($2, ',')) GROUP BY key) k WHERE o = '{120,60}'",
			T_REMINDER, in_list), 15);
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT split_part(traceparent, '-', 2)) "
			"FROM calendar.outbox WHERE topic = $1 AND key = ANY "
			"(string_to_array($2, ','))", T_REMINDER, in_list), 1);
	ck_assert_int_ge(h_sql_int("SELECT count(DISTINCT traceparent) "
			"FROM calendar.outbox WHERE topic = $1 AND key = ANY "
			"(string_to_array($2, ','))", T_REMINDER, in_list), 2);
}
END_TEST

/* ------------------------------------------------------------ two workers */

START_TEST(two_worker_hosts_no_duplicates)
{
	struct who w = agent();
	const char *ids[15];
	pid_t pid[2];
	int i, st;
	long long due, msgs;
	char *in_list = h_strdup("");

	for (i = 0; i < 15; i++) {
		ids[i] = create_meeting(&w, DAY + 600 * i, "[60,120]");
		in_list = h_sprintf("%s%s%s", in_list, i ? "," : "", ids[i]);
	}
	due = h_sql_int("SELECT count(*) FROM calendar.event_reminders WHERE status = 'Pending' "
			"AND calendar_event_id = ANY (string_to_array($1, ',')::uuid[])", in_list);
	ck_assert_int_eq(due, 30);
	/* small batches so the two hosts interleave on the same due rows */
	setenv("PIN_JOB_REMINDER_DISPATCH_BATCH", "2", 1);
	for (i = 0; i < 2; i++) {
		pid[i] = fork();
		ck_assert(pid[i] >= 0);
		if (pid[i] == 0)
			_exit(h_run_worker_once(DAY + 3 * 3600) == 0 ? 0 : 1);
	}
	for (i = 0; i < 2; i++) {
		ck_assert(waitpid(pid[i], &st, 0) == pid[i]);
		ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "worker %d failed", i);
	}
	unsetenv("PIN_JOB_REMINDER_DISPATCH_BATCH");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.event_reminders "
			"WHERE status = 'Sent' AND calendar_event_id = ANY "
			"(string_to_array($1, ',')::uuid[])", in_list), 30);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox "
			"WHERE topic = $1 AND key = ANY (string_to_array($2, ','))",
			T_REMINDER, in_list), 30);
	ck_assert_int_eq(h_sql_int("SELECT count(DISTINCT envelope->'payload'->>'reminderId') "
			"FROM calendar.outbox WHERE topic = $1 AND key = ANY (string_to_array($2, ','))",
			T_REMINDER, in_list), 30);
	/* and on the broker: exactly one message per reminder */
	msgs = 0;
	for (int round = 0; round < 40 && msgs < 30; round++) {
		struct h_kmsgs *all = h_kafka_read_all(T_REMINDER, 5000);
		msgs = 0;
		for (size_t k = 0; k < all->n; k++)
			if (all->v[k].key && strstr(in_list, all->v[k].key))
				msgs++;
		if (msgs < 30)
			h_sleep_ms(500);
	}
	ck_assert_int_eq(msgs, 30);
}
END_TEST

/* ------------------------------------------------- dispatcher <-> cancel race */

/*
 * Seed 000's race "dispatcher <-> cancel of the event" (issue 30 item 9),
 * forced in each order rather than left to luck.  The arbitration is the
 * reminder row's lock: the dispatcher takes due Pending rows FOR UPDATE SKIP
 * LOCKED, the cancel (calendar.so, caldomain cd_event_transition) locks the
 * event row, sets it Cancelled and sets the event's Pending reminders
 * Skipped, all in one transaction.  Whatever the interleaving, a reminder
 * ends either Sent with its one reminder-due committed before the cancel
 * (the outbox row ahead of event-status-changed on the event's key), or
 * Skipped with no reminder-due at all: never a reminder-due produced after
 * the cancel, never a reminder both Sent and Skipped.
 *
 * How a side is stopped at a chosen point: a trigger of the test (on the
 * outbox insert of one topic for the event's key, or on the event's update
 * to Cancelled) makes the backend that fires it take advisory lock
 * hashtext(eventId) shared, inside its transaction; the test holds that lock
 * exclusively (session level) until it releases it.  Every wait is observed
 * in pg_stat_activity (wait_event_type Lock), never slept through.
 */
#define HOLD_FN "CREATE OR REPLACE FUNCTION public.pin_test_hold() RETURNS trigger " \
	"LANGUAGE plpgsql AS $$BEGIN PERFORM pg_advisory_xact_lock_shared(hashtext(TG_ARGV[0])); " \
	"RETURN NEW; END$$"
#define RACE_OFFSET (DAY + 3 * 3600)   /* the worker's clock: the reminder is due */

/* Holds the event's lock and stops the transaction that inserts topic's
 * row for the event into the outbox (topic) or that updates the event to
 * Cancelled (topic NULL). */
static void hold_at(const char *id, const char *topic)
{
	h_sql(HOLD_FN);
	if (topic)
		h_sql(h_sprintf("CREATE TRIGGER pin_test_hold_%s BEFORE INSERT ON calendar.outbox "
			"FOR EACH ROW WHEN (NEW.key = '%s' AND NEW.topic = '%s') "
			"EXECUTE FUNCTION public.pin_test_hold('%s')", id + 24, id, topic, id));
	else
		h_sql(h_sprintf("CREATE TRIGGER pin_test_hold_%s AFTER UPDATE ON "
			"calendar.calendar_events FOR EACH ROW WHEN (NEW.id = '%s'::uuid AND "
			"NEW.status = 'Cancelled') EXECUTE FUNCTION public.pin_test_hold('%s')",
			id + 24, id, id));
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM (SELECT pg_advisory_lock(hashtext($1))) l",
		id), 1);
}

/* Lets the stopped side go, then drops the trigger (in this order: DROP
 * TRIGGER waits for the stopped transaction, which has the table open). */
static void hold_release(const char *id, const char *topic)
{
	ck_assert_str_eq(h_sql_scalar("SELECT pg_advisory_unlock(hashtext($1))::text", id), "true");
	h_sql(h_sprintf("DROP TRIGGER IF EXISTS pin_test_hold_%s ON %s", id + 24,
		topic ? "calendar.outbox" : "calendar.calendar_events"));
}

/* Backends (not this one) waiting on a lock of kind wait_event (advisory,
 * transactionid, tuple; "": any) in a statement like `like`. */
static long long lock_waiters(const char *wait_event, const char *like)
{
	return h_sql_int("SELECT count(*) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
		"AND wait_event_type = 'Lock' AND ($1 = '' OR wait_event = $1) "
		"AND query LIKE $2", wait_event, like);
}

/* POST .../cancel in a child process: exits 0 on 200. */
static pid_t cancel_async(const struct who *w, const char *id)
{
	pid_t pid = fork();

	ck_assert(pid >= 0);
	if (pid == 0) {
		struct h_resp *r = post_id(w, id, "cancel", "{\"reason\":\"race\"}");

		_exit(r->status == 200 ? 0 : 1);
	}
	return pid;
}

/* Exit status of child pid within timeout_ms; -1 (and killed) on timeout. */
static int child_exit(pid_t pid, int timeout_ms)
{
	int64_t end = h_now_ms() + timeout_ms;
	int st;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid)
			return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
		if (h_now_ms() > end) {
			kill(pid, SIGKILL);
			waitpid(pid, &st, 0);
			return -1;
		}
		h_sleep_ms(50);
	}
}

static bool child_running(pid_t pid)
{
	return waitpid(pid, NULL, WNOHANG) == 0;
}

/* The outcome on the event's key: "<reminder status>:<topics in outbox
 * order>" (r = reminder-due, c = event-status-changed Cancelled; the
 * event-created row left out). */
static char *race_outcome(const char *id)
{
	return h_sprintf("%s:%s",
		h_sql_scalar("SELECT string_agg(status, ',') FROM calendar.event_reminders "
			"WHERE calendar_event_id = $1", id),
		h_sql_scalar("SELECT coalesce(string_agg(CASE topic WHEN $2 THEN 'r' "
			"WHEN $3 THEN CASE WHEN envelope->'payload'->>'status' = 'Cancelled' "
			"THEN 'c' ELSE '?' END END, '' ORDER BY id), '') FROM calendar.outbox "
			"WHERE key = $1 AND topic <> $4", id, T_REMINDER, T_STATUS, T_CREATED));
}

/* The dispatcher first: it has the reminder locked (Sent, its reminder-due
 * being written) when the cancel comes; the cancel waits for the row, finds
 * it Sent and leaves it: Sent, reminder-due then the cancel. */
START_TEST(race_dispatcher_holds_reminder_then_cancel)
{
	static const char *const once[] = { "--once", NULL };
	struct who w = agent();
	const char *id = create_meeting(&w, DAY + 600, "[60]");
	pid_t worker, cancel;

	hold_at(id, T_REMINDER);
	worker = h_spawn_host("worker", NULL, RACE_OFFSET, once);
	ck_assert_msg(H_WAIT_UNTIL(lock_waiters("advisory", "%INSERT INTO calendar.outbox%") == 1,
		20000), "the dispatcher did not reach its outbox insert");
	cancel = cancel_async(&w, id);
	/* the cancel has the event row and waits for the reminder row */
	ck_assert_msg(H_WAIT_UNTIL(lock_waiters("", "%SET status = 'Skipped'%") == 1, 20000),
		"the cancel does not wait for the dispatcher's reminder row");
	ck_assert(child_running(cancel) && child_running(worker));
	hold_release(id, T_REMINDER);
	ck_assert_int_eq(child_exit(worker, 60000), 0);
	ck_assert_int_eq(child_exit(cancel, 30000), 0);
	ck_assert_str_eq(race_outcome(id), "Sent:rc");
	/* the reminder's message went out before the cancel's, on one key */
	ck_assert_int_eq(h_run_worker_once(RACE_OFFSET + 600), 0);
	ck_assert_str_eq(race_outcome(id), "Sent:rc");
}
END_TEST

/* The cancel first, in flight: it has set the reminder Skipped (row locked,
 * not committed) when the dispatcher passes: the dispatcher skips the row
 * without waiting; the cancel commits: Skipped, no reminder-due, also on
 * the next passes. */
START_TEST(race_cancel_holds_reminder_then_dispatcher)
{
	static const char *const once[] = { "--once", NULL };
	struct who w = agent();
	const char *id = create_meeting(&w, DAY + 600, "[60]");
	pid_t cancel, worker;
	int rc;

	hold_at(id, T_STATUS);
	cancel = cancel_async(&w, id);
	ck_assert_msg(H_WAIT_UNTIL(lock_waiters("advisory", "%INSERT INTO calendar.outbox%") == 1,
		20000), "the cancel did not reach its outbox insert");
	/* a whole dispatcher pass while the cancel is in flight: it neither
	 * waits for the cancel nor sends (a dispatcher that waited would wait
	 * for the hold: it is let go before the assertion) */
	worker = h_spawn_host("worker", NULL, RACE_OFFSET, once);
	rc = child_exit(worker, 15000);
	if (rc != 0)
		hold_release(id, T_STATUS);
	ck_assert_msg(rc == 0, "the dispatcher pass did not finish while the cancel was in "
		"flight (%d)", rc);
	ck_assert(child_running(cancel));
	ck_assert_str_eq(race_outcome(id), "Pending:");
	hold_release(id, T_STATUS);
	ck_assert_int_eq(child_exit(cancel, 30000), 0);
	ck_assert_str_eq(race_outcome(id), "Skipped:c");
	ck_assert_int_eq(h_run_worker_once(RACE_OFFSET + 600), 0);
	ck_assert_str_eq(race_outcome(id), "Skipped:c");
}
END_TEST

/* The cancel has the event row (set Cancelled, not committed) but not yet
 * the reminder when the dispatcher passes: the dispatcher takes the
 * reminder and commits first (it does not read the event's status: the
 * reminder row is the arbiter); the cancel then finds it Sent.  Sent, its
 * reminder-due committed ahead of the cancel. */
START_TEST(race_cancel_holds_event_then_dispatcher)
{
	struct who w = agent();
	const char *id = create_meeting(&w, DAY + 600, "[60]");
	pid_t cancel;

	hold_at(id, NULL);
	cancel = cancel_async(&w, id);
	ck_assert_msg(H_WAIT_UNTIL(lock_waiters("advisory", "%UPDATE calendar.calendar_events%")
		== 1, 20000), "the cancel did not stop after its event update");
	ck_assert_int_eq(h_run_worker_once(RACE_OFFSET), 0);
	ck_assert(child_running(cancel));
	ck_assert_str_eq(race_outcome(id), "Sent:r");
	hold_release(id, NULL);
	ck_assert_int_eq(child_exit(cancel, 30000), 0);
	ck_assert_str_eq(race_outcome(id), "Sent:rc");
	ck_assert_int_eq(h_run_worker_once(RACE_OFFSET + 600), 0);
	ck_assert_str_eq(race_outcome(id), "Sent:rc");
}
END_TEST

Suite *make_calendar_suite(void)
{
	Suite *s = suite_create("calendar");
	TCase *t = h_tcase("events", 120);
	TCase *rem = h_tcase("reminders", 240);

	tcase_add_test(t, create_and_card_with_default_reminders);
	tcase_add_test(t, create_location_header_and_event_created_message);
	tcase_add_test(t, validation_errors);
	tcase_add_test(t, time_zone_canonical_and_point_task);
	tcase_add_test(t, start_then_complete);
	tcase_add_test(t, patch_fields_offsets_and_if_match);
	tcase_add_test(t, if_match_must_be_quoted);
	tcase_add_test(t, unknown_zone_errors);
	tcase_add_test(t, idempotency_key_on_create);
	tcase_add_test(t, idempotency_key_per_tenant);
	tcase_add_test(t, derived_instants_out_of_range);
	tcase_add_test(t, foreign_ids_are_404);
	tcase_add_test(t, managed_events_refuse_agent_writes);
	tcase_add_test(t, auth_and_permissions);
	tcase_add_test(t, list_range_paging_filters);
	tcase_add_test(t, agency_and_pin_manager_views);
	suite_add_tcase(s, t);

	tcase_add_test(rem, ac_past_offsets_skipped);
	tcase_add_test(rem, ac_dispatch_once_and_idempotent);
	tcase_add_test(rem, ac_reschedule_rematerialises);
	tcase_add_test(rem, reschedule_to_same_start_is_no_move);
	tcase_add_test(rem, ac_cancel_skips_pending);
	tcase_add_test(rem, two_worker_hosts_no_duplicates);
	tcase_add_test(rem, dispatch_batch_one_message_each_all_or_nothing);
	tcase_add_test(rem, dispatch_shards_each_once_in_order);
	tcase_add_test(rem, race_dispatcher_holds_reminder_then_cancel);
	tcase_add_test(rem, race_cancel_holds_reminder_then_dispatcher);
	tcase_add_test(rem, race_cancel_holds_event_then_dispatcher);
	suite_add_tcase(s, rem);
	return s;
}
