/* test_timeoff.c -- an agent's absences (issue 32 item 4) against the real
 * stack: declaring one archives the Available slots inside it (archiveReason
 * on the slot), declines the Pending appointments through the agent's
 * decline (appointment-cancelled in the outbox), lists the Confirmed ones
 * back; the batch preview skips its starts (reason time_off); booking into it
 * answers 409 AGENT_TIME_OFF; shortening and deleting bring nothing back; a
 * refused request writes nothing; the note never reaches a message. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define TOFF "/api/v1/agent/calendar/time-off"
#define BATCHES "/api/v1/agent/calendar/slots/batches"
#define SLOTS "/api/v1/agent/calendar/slots"
#define PUB "/api/public/calendar/appointments"
#define AG "/api/v1/agent/calendar/appointments"
#define T_CANCELLED "pin.calendar.appointment-cancelled.v1"
#define T_EV_STATUS "pin.calendar.event-status-changed.v1"
#define NOTE "dentist, then my daughter's school play"

/* Public bookings leave from their own loopback address (nginx's per-IP
 * limit of the public area; see test_appointments.c). */
#define BOOK_IP h_src_ip("127.0.0.46")

/* "YYYY-MM-DDTHH:MM:00Z" of today + days (UTC). */
static char *at(int days, int hh, int mm)
{
	return h_sprintf("%sT%02d:%02d:00Z", h_date_in(days), hh, mm);
}

/* Publishes one-hour UTC slots on today + days from hh to hh + n; their ids
 * in start order (harness strings, NULL-terminated). */
static char **publish(const struct h_agent *a, int days, int hh, int n)
{
	struct h_resp *r = h_post(BATCHES, a->token, h_sprintf("{\"kind\":\"Showing\","
		"\"timeZone\":\"UTC\",\"windows\":[{\"daysOfWeek\":[1,2,3,4,5,6,7],"
		"\"from\":\"%02d:00\",\"to\":\"%02d:00\"}],\"fromDate\":\"%s\",\"toDate\":\"%s\","
		"\"slotDurationMinutes\":60}", hh, hh + n, h_date_in(days), h_date_in(days)));
	json_object *slots;
	char **ids;
	int i;

	ck_assert_msg(r->status == 201, "publish: %ld %s", r->status, r->body);
	slots = h_jget(r->json, "slots");
	ck_assert_int_eq((int)json_object_array_length(slots), n);
	ids = calloc((size_t)n + 1, sizeof(*ids));
	ck_assert_ptr_nonnull(ids);
	for (i = 0; i < n; i++)
		ids[i] = h_strdup(h_jstr(json_object_array_get_idx(slots, (size_t)i), "id"));
	return ids;
}

static struct h_resp *book(const char *slot, char **investor_out)
{
	char *inv = h_uuid();
	struct h_req_opts o = { h_sprintf("{\"slotId\":\"%s\"}", slot), 0, NULL, NULL, BOOK_IP };

	if (investor_out)
		*investor_out = inv;
	return h_request_opts("POST", PUB, h_token("investor", inv, NULL), &o);
}

static char *book_ok(const char *slot)
{
	struct h_resp *r = book(slot, NULL);

	ck_assert_msg(r->status == 201, "book: %ld %s", r->status, r->body);
	return h_strdup(h_jstr(r->json, "id"));
}

static struct h_resp *declare(const struct h_agent *a, const char *from, const char *to,
		const char *note)
{
	return h_post(TOFF, a->token, note ?
		h_sprintf("{\"from\":\"%s\",\"to\":\"%s\",\"note\":\"%s\"}", from, to, note) :
		h_sprintf("{\"from\":\"%s\",\"to\":\"%s\"}", from, to));
}

static const char *slot_status(const char *slot)
{
	return h_sql_scalar("SELECT status FROM calendar.availability_slots WHERE id = $1", slot);
}

static const char *slot_reason(const char *slot)
{
	return h_sql_scalar("SELECT archive_reason FROM calendar.availability_slots "
		"WHERE id = $1", slot);
}

static const char *apt_status(const char *apt)
{
	return h_sql_scalar("SELECT status FROM calendar.appointments WHERE id = $1", apt);
}

/* The outbox rows (any topic) of the agent's appointments and events. */
static long long outbox_of(const char *agent)
{
	return h_sql_int("SELECT count(*) FROM calendar.outbox o WHERE o.key IN ("
		"  SELECT a.id::text FROM calendar.appointments a WHERE a.agent_user_id = $1 "
		"  UNION SELECT e.id::text FROM calendar.calendar_events e "
		"  WHERE e.owner_user_id = $1)", agent);
}

static json_object *arr(json_object *o, const char *key)
{
	json_object *v = h_jget(o, key);

	ck_assert_msg(v && json_object_is_type(v, json_type_array), "%s is not an array", key);
	return v;
}

/* The slot of the agent's list with id (its JSON), NULL when absent. */
static json_object *listed_slot(const struct h_agent *a, const char *id)
{
	struct h_resp *r = h_get(h_sprintf(SLOTS "?from=%s&to=%s&limit=500", h_iso_in(0),
			h_iso_in(30 * 86400)), a->token);
	json_object *items;
	size_t i;

	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	items = arr(r->json, "items");
	for (i = 0; i < json_object_array_length(items); i++) {
		json_object *s = json_object_array_get_idx(items, i);

		if (strcmp(h_jstr(s, "id"), id) == 0)
			return s;
	}
	return NULL;
}

/* ------------------------------------------------------------ effects */

/* Day 3, slots 08..12 (four): 08 Pending, 09 Confirmed, 10 Available,
 * 11 Available.  An absence 08:00-11:00 archives 10 (reason time_off),
 * declines 08 (the agent's decline: Declined by Agent, DeclinedByAgent, one
 * appointment-cancelled and one event-status-changed in the outbox, its slot
 * archived with the reason), lists 09 back, leaves 09 and 11 alone (11
 * starts where the absence ends). */
START_TEST(declare_archives_declines_and_lists_confirmed)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	char **s = publish(&a, 3, 8, 4);
	char *pending = book_ok(s[0]), *confirmed = book_ok(s[1]), *ev;
	struct h_resp *r;
	json_object *slot, *dec, *conf;
	long long before;

	r = h_post(h_sprintf(AG "/%s/confirm", confirmed), a.token, NULL);
	ck_assert_msg(r->status == 200, "confirm: %ld %s", r->status, r->body);
	before = outbox_of(a.id);

	r = declare(&a, at(3, 8, 0), at(3, 11, 0), NOTE);
	ck_assert_msg(r->status == 201, "declare: %ld %s", r->status, r->body);
	ck_assert_ptr_nonnull(strstr(h_header(r, "Location"), TOFF "/"));
	ck_assert_str_eq(h_jstr(h_jget(r->json, "timeOff"), "note"), NOTE);
	ck_assert_str_eq(h_jstr(h_jget(r->json, "timeOff"), "from"), at(3, 8, 0));
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "archivedSlots")), 1);
	dec = arr(r->json, "declinedAppointments");
	ck_assert_int_eq((int)json_object_array_length(dec), 1);
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(dec, 0), "id"), pending);
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(dec, 0), "status"), "Declined");
	conf = arr(r->json, "confirmedAppointments");
	ck_assert_int_eq((int)json_object_array_length(conf), 1);
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(conf, 0), "id"), confirmed);

	/* slots: the free one and the declined one's archived with the reason */
	ck_assert_str_eq(slot_status(s[2]), "Archived");
	ck_assert_str_eq(slot_reason(s[2]), "time_off");
	ck_assert_str_eq(slot_status(s[0]), "Archived");
	ck_assert_str_eq(slot_reason(s[0]), "time_off");
	ck_assert_str_eq(slot_status(s[1]), "Booked");
	ck_assert_str_eq(slot_status(s[3]), "Available");
	ck_assert_ptr_null(slot_reason(s[3]));
	/* ... as a reader of the slot sees it */
	slot = listed_slot(&a, s[2]);
	ck_assert_ptr_nonnull(slot);
	ck_assert_str_eq(h_jstr(slot, "status"), "Archived");
	ck_assert_str_eq(h_jstr(slot, "archiveReason"), "time_off");
	slot = listed_slot(&a, s[3]);
	ck_assert_ptr_nonnull(slot);
	ck_assert_ptr_null(h_jstr(slot, "archiveReason"));

	/* appointments: the agent's decline for the Pending one, nothing for
	 * the Confirmed one */
	ck_assert_str_eq(apt_status(pending), "Declined");
	ck_assert_str_eq(h_sql_scalar("SELECT cancelled_by FROM calendar.appointments "
		"WHERE id = $1", pending), "Agent");
	ck_assert_str_eq(apt_status(confirmed), "Confirmed");
	ev = h_sql_scalar("SELECT calendar_event_id::text FROM calendar.appointments "
		"WHERE id = $1", pending);
	ck_assert_str_eq(h_sql_scalar("SELECT status FROM calendar.calendar_events "
		"WHERE id = $1", ev), "Cancelled");

	/* the outbox: exactly the decline's two messages, in the same commit */
	ck_assert_int_eq(outbox_of(a.id) - before, 2);
	ck_assert_str_eq(h_sql_scalar("SELECT envelope #>> '{payload,reason}' "
		"FROM calendar.outbox WHERE key = $1 AND topic = '" T_CANCELLED "'", pending),
		"DeclinedByAgent");
	ck_assert_str_eq(h_sql_scalar("SELECT envelope #>> '{payload,cancelledBy}' "
		"FROM calendar.outbox WHERE key = $1 AND topic = '" T_CANCELLED "'", pending),
		"Agent");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE key = $1 "
		"AND topic = '" T_EV_STATUS "'", ev), 1);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox WHERE key = $1 "
		"AND topic = '" T_CANCELLED "'", confirmed), 0);
	/* the note is in no message */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.outbox "
		"WHERE envelope::text LIKE '%' || $1 || '%'", "daughter's school"), 0);
}
END_TEST

/* A slot inside an absence cannot be booked: 409 AGENT_TIME_OFF, whether
 * the absence archived it (the usual case) or it is still Available (a
 * row put there behind the API's back: the booking checks the absence
 * itself).  The showcase does not offer what the absence archived. */
START_TEST(booking_into_time_off_refused)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	char **s = publish(&a, 4, 9, 3);
	struct h_resp *r;

	r = declare(&a, at(4, 9, 0), at(4, 10, 30), NULL);
	ck_assert_msg(r->status == 201, "declare: %ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "archivedSlots")), 2);
	/* the showcase offers only the slot outside it */
	r = h_get(h_sprintf("/api/public/calendar/slots?agentUserId=%s&from=%s&to=%s",
		a.id, at(4, 0, 0), at(5, 0, 0)), NULL);
	ck_assert_msg(r->status == 200, "%ld %s", r->status, r->body);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "items")), 1);
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(arr(r->json, "items"), 0), "id"),
		s[2]);
	r = book(s[0], NULL);
	h_assert_problem(r, 409, "AGENT_TIME_OFF");
	h_sql("UPDATE calendar.availability_slots SET status = 'Available', "
		"archive_reason = NULL WHERE id = $1", s[1]);
	r = book(s[1], NULL);
	h_assert_problem(r, 409, "AGENT_TIME_OFF");
	ck_assert_str_eq(slot_status(s[1]), "Available");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.appointments "
		"WHERE agent_user_id = $1", a.id), 0);
	/* outside it: bookable */
	book_ok(s[2]);
}
END_TEST

/* A batch over an absence: the preview lists its starts as skipped with
 * reason time_off, publishing creates only the others. */
START_TEST(preview_skips_time_off)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	const char *body = h_sprintf("{\"kind\":\"Showing\",\"timeZone\":\"UTC\","
		"\"windows\":[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"12:00\"}],"
		"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":60}",
		h_date_in(5), h_date_in(5));
	struct h_resp *r;
	json_object *sk, *sl;
	size_t i;

	r = declare(&a, at(5, 9, 0), at(5, 10, 30), NULL);
	ck_assert_msg(r->status == 201, "declare: %ld %s", r->status, r->body);
	r = h_post(BATCHES "/preview", a.token, body);
	ck_assert_msg(r->status == 200, "preview: %ld %s", r->status, r->body);
	sl = arr(r->json, "slots");
	sk = arr(r->json, "skipped");
	ck_assert_int_eq((int)json_object_array_length(sl), 2);
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(sl, 0), "localStart"), "08:00");
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(sl, 1), "localStart"), "11:00");
	ck_assert_int_eq((int)json_object_array_length(sk), 2);
	for (i = 0; i < 2; i++)
		ck_assert_str_eq(h_jstr(json_object_array_get_idx(sk, i), "reason"), "time_off");
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(sk, 0), "localStart"), "09:00");
	ck_assert_str_eq(h_jstr(json_object_array_get_idx(sk, 1), "localStart"), "10:00");
	r = h_post(BATCHES, a.token, body);
	ck_assert_msg(r->status == 201, "publish: %ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "created")), 2);
	ck_assert_int_eq((int)json_object_array_length(arr(r->json, "skipped")), 2);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.availability_slots "
		"WHERE owner_user_id = $1 AND status = 'Available'", a.id), 2);
}
END_TEST

/* Ending early, shortening and deleting give nothing back: the archived
 * slots stay Archived (with their reason); the freed hours can be published
 * again.  Widening archives what the new span covers. */
START_TEST(shorten_delete_do_not_resurrect)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	char **s = publish(&a, 6, 8, 4);
	struct h_resp *r;
	const char *id, *loc;
	int i;

	r = declare(&a, at(6, 8, 0), at(6, 10, 0), NULL);
	ck_assert_msg(r->status == 201, "declare: %ld %s", r->status, r->body);
	id = h_strdup(h_jstr(h_jget(r->json, "timeOff"), "id"));
	loc = h_sprintf(TOFF "/%s", id);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "archivedSlots")), 2);
	/* shorten to 09:00: 200, nothing archived, nothing back */
	r = h_request("PATCH", loc, a.token, h_sprintf("{\"to\":\"%s\"}", at(6, 9, 0)),
		"If-Match: \"1\"");
	ck_assert_msg(r->status == 200, "shorten: %ld %s", r->status, r->body);
	ck_assert_str_eq(h_jstr(h_jget(r->json, "timeOff"), "to"), at(6, 9, 0));
	ck_assert_int_eq(json_object_get_int(h_jget(h_jget(r->json, "timeOff"), "version")), 2);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "archivedSlots")), 0);
	ck_assert_str_eq(slot_status(s[1]), "Archived");
	ck_assert_str_eq(slot_reason(s[1]), "time_off");
	/* {} changes nothing, not even the version */
	r = h_request("PATCH", loc, a.token, "{}");
	ck_assert_msg(r->status == 200, "{}: %ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(h_jget(r->json, "timeOff"), "version")), 2);
	/* the stale version is refused */
	r = h_request("PATCH", loc, a.token, "{\"note\":\"x\"}", "If-Match: \"1\"");
	h_assert_problem(r, 409, "VERSION_CONFLICT");
	/* 09:00 is free of the absence now: its archived slot stays archived
	 * (booking it says so), a new batch may fill the hour */
	r = book(s[1], NULL);
	h_assert_problem(r, 409, "SLOT_NOT_AVAILABLE");
	/* widen to 11:00: the 10:00 slot goes too */
	r = h_request("PATCH", loc, a.token, h_sprintf("{\"to\":\"%s\"}", at(6, 11, 0)));
	ck_assert_msg(r->status == 200, "widen: %ld %s", r->status, r->body);
	ck_assert_int_eq(json_object_get_int(h_jget(r->json, "archivedSlots")), 1);
	ck_assert_str_eq(slot_reason(s[2]), "time_off");
	ck_assert_str_eq(slot_status(s[3]), "Available");
	/* delete: 204, gone, slots unchanged */
	r = h_request("DELETE", loc, a.token, NULL);
	ck_assert_msg(r->status == 204, "delete: %ld %s", r->status, r->body);
	r = h_get(loc, a.token);
	h_assert_problem(r, 404, "TIME_OFF_NOT_FOUND");
	r = h_request("DELETE", loc, a.token, NULL);
	h_assert_problem(r, 404, "TIME_OFF_NOT_FOUND");
	for (i = 0; i < 3; i++)
		ck_assert_str_eq(slot_status(s[i]), "Archived");
	ck_assert_str_eq(slot_status(s[3]), "Available");
	/* and booking the last one works again (no absence there) */
	book_ok(s[3]);
}
END_TEST

/* ----------------------------------------------------- refusals, no writes */

static long long rows_of(const struct h_agent *a)
{
	return h_sql_int("SELECT (SELECT count(*) FROM calendar.time_off "
		"  WHERE owner_user_id = $1) * 1000000 "
		"+ (SELECT count(*) FROM calendar.availability_slots "
		"  WHERE owner_user_id = $1 AND status = 'Available') * 1000 "
		"+ (SELECT count(*) FROM calendar.appointments "
		"  WHERE agent_user_id = $1 AND status = 'Pending')", a->id);
}

/* Each refused request leaves the agent's absences, slots, appointments and
 * outbox as they were: from >= to, to in the past, over 366 days, a note too
 * long, an unknown field, a missing field, an overlap with another absence
 * (whose span holds a Pending appointment the refused one would decline). */
START_TEST(refusals_write_nothing)
{
	struct h_agent a = h_agent_new(NULL, NULL);
	char **s = publish(&a, 7, 8, 4);
	struct h_resp *r;
	long long rows, box;
	char *longnote = calloc(520, 1);

	ck_assert_ptr_nonnull(longnote);
	memset(longnote, 'n', 501);
	book_ok(s[2]);
	r = declare(&a, at(7, 8, 0), at(7, 9, 0), NULL);
	ck_assert_msg(r->status == 201, "declare: %ld %s", r->status, r->body);
	rows = rows_of(&a);
	ck_assert_int_eq(rows, 1000000 + 2 * 1000 + 1);
	box = outbox_of(a.id);

	r = declare(&a, at(7, 11, 0), at(7, 10, 0), NULL);
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	h_assert_error_fields(r, "to");
	r = declare(&a, at(7, 10, 0), at(7, 10, 0), NULL);
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = declare(&a, h_iso_in(-7200), h_iso_in(-3600), NULL);
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	h_assert_error_fields(r, "to");
	r = declare(&a, at(7, 10, 0), at(375, 10, 0), NULL);
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	r = declare(&a, at(7, 10, 0), at(7, 11, 0), longnote);
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	h_assert_error_fields(r, "note");
	r = h_post(TOFF, a.token, h_sprintf("{\"from\":\"%s\",\"to\":\"%s\",\"reason\":\"x\"}",
		at(7, 10, 0), at(7, 11, 0)));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	h_assert_error_fields(r, "reason");
	r = h_post(TOFF, a.token, h_sprintf("{\"from\":\"%s\"}", at(7, 10, 0)));
	h_assert_problem(r, 422, "VALIDATION_FAILED");
	h_assert_error_fields(r, "to");
	r = h_post(TOFF, a.token, "not json");
	ck_assert_msg(r->status == 400 || r->status == 422, "%ld %s", r->status, r->body);
	/* overlaps the first absence: 409, the 10:00 Pending appointment and
	 * the slots inside the refused span untouched */
	r = declare(&a, at(7, 8, 30), at(7, 12, 0), NULL);
	h_assert_problem(r, 409, "TIME_OFF_OVERLAP");
	/* a PATCH that would overlap: the same */
	r = declare(&a, at(7, 11, 0), at(7, 12, 0), NULL);
	ck_assert_msg(r->status == 201, "declare 2: %ld %s", r->status, r->body);
	rows = rows_of(&a);
	box = outbox_of(a.id);
	r = h_request("PATCH", h_sprintf(TOFF "/%s", h_jstr(h_jget(r->json, "timeOff"), "id")),
		a.token, h_sprintf("{\"from\":\"%s\"}", at(7, 8, 30)));
	h_assert_problem(r, 409, "TIME_OFF_OVERLAP");
	ck_assert_int_eq(rows_of(&a), rows);
	ck_assert_int_eq(outbox_of(a.id), box);
	ck_assert_str_eq(apt_status(h_sql_scalar("SELECT id::text FROM calendar.appointments "
		"WHERE slot_id = $1", s[2])), "Pending");
	free(longnote);
}
END_TEST

/* Idempotency-Key as the other writes: the replay answers the first 201
 * again and declares nothing more; another agent sees none of it; an
 * investor may not declare. */
START_TEST(idempotency_and_scope)
{
	struct h_agent a = h_agent_new(NULL, NULL), b = h_agent_new(a.tenant, NULL);
	const char *key = h_sprintf("Idempotency-Key: %s", h_uuid());
	const char *body = h_sprintf("{\"from\":\"%s\",\"to\":\"%s\"}", at(8, 8, 0),
		at(8, 18, 0));
	struct h_resp *r1, *r2;
	const char *id;

	r1 = h_request("POST", TOFF, a.token, body, key);
	ck_assert_msg(r1->status == 201, "%ld %s", r1->status, r1->body);
	r2 = h_request("POST", TOFF, a.token, body, key);
	ck_assert_msg(r2->status == 201, "replay: %ld %s", r2->status, r2->body);
	id = h_jstr(h_jget(r1->json, "timeOff"), "id");
	ck_assert_str_eq(h_jstr(h_jget(r2->json, "timeOff"), "id"), id);
	ck_assert_str_eq(h_header(r2, "Idempotent-Replayed"), "true");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.time_off "
		"WHERE owner_user_id = $1", a.id), 1);
	/* the list and the card */
	r1 = h_get(TOFF, a.token);
	ck_assert_msg(r1->status == 200, "%ld %s", r1->status, r1->body);
	ck_assert_int_eq((int)json_object_array_length(arr(r1->json, "items")), 1);
	r1 = h_get(h_sprintf(TOFF "/%s", id), a.token);
	ck_assert_msg(r1->status == 200, "%ld %s", r1->status, r1->body);
	ck_assert_str_eq(r1->etag, "\"1\"");
	/* another agent of the tenant: nothing to see or change */
	r1 = h_get(TOFF, b.token);
	ck_assert_int_eq((int)json_object_array_length(arr(r1->json, "items")), 0);
	h_assert_problem(h_get(h_sprintf(TOFF "/%s", id), b.token), 404, "TIME_OFF_NOT_FOUND");
	h_assert_problem(h_request("DELETE", h_sprintf(TOFF "/%s", id), b.token, NULL), 404,
		"TIME_OFF_NOT_FOUND");
	/* an investor may not */
	h_assert_problem(h_post(TOFF, h_token("investor", h_uuid(), NULL), body), 403,
		"FORBIDDEN");
	h_assert_problem(h_post(TOFF, NULL, body), 401, "UNAUTHENTICATED");
}
END_TEST

/* ----------------------------------------------------------- retention */

/* The housekeeping job deletes absences that ended more than
 * housekeeping.slot_days (180) ago, notes with them; a recent one stays. */
START_TEST(housekeeping_deletes_old_absences)
{
	const char *owner = h_uuid(), *old_id = h_uuid(), *new_id = h_uuid();
	const char *ins = "INSERT INTO calendar.time_off (id, tenant_id, owner_user_id,"
		" start_at, end_at, note, created_at, updated_at) VALUES ($1, gen_random_uuid(),"
		" $2, now() - make_interval(days => $3::int + 1),"
		" now() - make_interval(days => $3::int), 'old note', now(), now())";

	h_sql(ins, old_id, owner, "181");
	h_sql(ins, new_id, owner, "170");
	ck_assert_int_eq(h_run_worker_once(0), 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.time_off WHERE id = $1",
		old_id), 0);
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM calendar.time_off WHERE id = $1",
		new_id), 1);
}
END_TEST

Suite *make_timeoff_suite(void)
{
	Suite *s = suite_create("timeoff");
	TCase *tc = h_tcase("timeoff", 120);

	tcase_add_test(tc, declare_archives_declines_and_lists_confirmed);
	tcase_add_test(tc, booking_into_time_off_refused);
	tcase_add_test(tc, preview_skips_time_off);
	tcase_add_test(tc, shorten_delete_do_not_resurrect);
	tcase_add_test(tc, refusals_write_nothing);
	tcase_add_test(tc, idempotency_and_scope);
	tcase_add_test(tc, housekeeping_deletes_old_absences);
	suite_add_tcase(s, tc);
	return s;
}
