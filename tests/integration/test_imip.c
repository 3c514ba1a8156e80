/*
 * test_imip.c -- issue 32 item 2: invitations in the e-mail itself (RFC 6047
 * iMIP), end to end on the real stack.  An appointment is booked, confirmed,
 * rescheduled and cancelled through the HTTP API; the outbox relay, the
 * notify consumer and the dispatcher carry each change to the dev SMTP
 * server (aiosmtpd, a Maildir in PIN_MAIL_DIR).  Each e-mail is read twice:
 * here, its text/calendar part parsed with libical, and by
 * tests/integration/imip_read.py, which parses the whole message with
 * Python's email package (a MIME tree as a mail client builds it) and the
 * calendar with python3-icalendar.  Both must agree on METHOD, UID,
 * SEQUENCE, STATUS, DTSTART and DTEND: one UID for the whole reschedule
 * chain, a higher SEQUENCE for every change, METHOD:CANCEL with
 * STATUS:CANCELLED for a cancellation.
 */
#include "config.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <libical/ical.h>
#include <openssl/evp.h>

#include "harness.h"

#define WAIT_MS 60000
#define PUB "/api/public/calendar/appointments"
#define AG "/api/v1/agent/calendar/appointments"
#define IN "/api/v1/investor/calendar/appointments"

/* pin.identity.users.v1 with an e-mail; waits for the contact replica */
static void contact(const char *user, const char *email, const char *locale,
		const char *name)
{
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", user, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-updated\","
		"\"contractVersion\":1,\"createdAt\":\"2026-11-30T10:00:00Z\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"%s\",\"displayName\":\"%s\",\"avatarUrl\":null,"
		"\"email\":\"%s\",\"phone\":null,\"locale\":\"%s\","
		"\"timeZone\":\"Europe/Moscow\",\"status\":\"Active\"}}", h_new_mid(), user, user,
		name, email, locale)), 0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int("SELECT count(*) FROM "
		"notifications.recipient_contacts WHERE user_id = $1::uuid AND email = $2",
		user, email) == 1, WAIT_MS), "contact not replicated");
}

/* n one-hour slots of one day (08:00 UTC on), days ahead, confirmed by hand */
static char **publish(const struct h_agent *a, int n, int days)
{
	char *d = h_date_in(days);
	struct h_resp *r = h_post("/api/v1/agent/calendar/slots/batches", a->token, h_sprintf(
		"{\"kind\":\"Showing\",\"timeZone\":\"UTC\",\"windows\":"
		"[{\"daysOfWeek\":[1,2,3,4,5,6,7],\"from\":\"08:00\",\"to\":\"%02d:00\"}],"
		"\"fromDate\":\"%s\",\"toDate\":\"%s\",\"slotDurationMinutes\":60,"
		"\"autoConfirm\":false,\"cancellationCutoffMinutes\":60}", 8 + n, d, d));
	json_object *slots;
	char **ids = calloc((size_t)n + 1, sizeof(*ids));

	ck_assert_msg(r->status == 201, "publish: %ld %s", r->status, r->body);
	slots = h_jget(r->json, "slots");
	ck_assert_int_eq((int)json_object_array_length(slots), n);
	for (int i = 0; i < n; i++)
		ids[i] = h_strdup(h_jstr(json_object_array_get_idx(slots, (size_t)i), "id"));
	return ids;
}

/* The investor books slot; the new appointment's id. */
static char *book(const char *token, const char *slot)
{
	struct h_resp *r = h_post(PUB, token, h_sprintf("{\"slotId\":\"%s\"}", slot));

	ck_assert_msg(r->status == 201, "book: %ld %s", r->status, r->body);
	return h_strdup(h_jstr(r->json, "id"));
}

static struct h_resp *act(const char *base, const char *id, const char *action,
		const char *token, const char *body)
{
	return h_post(h_sprintf("%s/%s/%s", base, id, action), token, body);
}

/* ---- the e-mail of one notification ------------------------------------- */

struct mail {
	char *id;               /* the notification */
	char *path;             /* its file in the Maildir */
	char *text;             /* the message */
	char *body;             /* the row's text */
};

/* The Maildir file whose Message-ID is <id@...>, or NULL. */
static char *mail_file(const char *id)
{
	const char *dir = h_env("PIN_MAIL_DIR"), *needle = h_sprintf("<%s@", id);
	DIR *d = opendir(dir);
	struct dirent *e;
	char *found = NULL;

	if (!d)
		return NULL;
	while ((e = readdir(d)) && !found) {
		char *p, *m;

		if (e->d_name[0] == '.')
			continue;
		p = h_sprintf("%s/%s", dir, e->d_name);
		m = h_slurp(p);
		if (m && strstr(m, needle))
			found = p;
	}
	closedir(d);
	return found;
}

/* The e-mail of user's Email notification of kind about subject: waits for
 * the row to be Sent and the message to be in the Maildir. */
#define MAIL_Q(col) "SELECT " col "::text FROM notifications.notifications " \
	"WHERE recipient_user_id = $1::uuid AND channel = 'Email' AND kind = $2 " \
	"AND subject_id = $3::uuid"

static struct mail mail_of(const char *user, const char *kind, const char *subject)
{
	struct mail m;

	ck_assert_msg(H_WAIT_UNTIL(h_sql_int(MAIL_Q("count(*) FILTER (WHERE status = 'Sent')"),
		user, kind, subject) == 1, WAIT_MS),
		"%s e-mail to %s about %s not Sent: %s", kind, user, subject,
		h_sql_scalar(MAIL_Q("string_agg(status || ' ' || coalesce(last_error, ''), ',')"),
			user, kind, subject));
	m.id = h_sql_scalar(MAIL_Q("id"), user, kind, subject);
	m.body = h_sql_scalar(MAIL_Q("body"), user, kind, subject);
	ck_assert_msg(H_WAIT_UNTIL((m.path = mail_file(m.id)) != NULL, 10000),
		"no mail for %s", m.id);
	m.text = h_slurp(m.path);
	return m;
}

/* The base64 body of the first part whose headers carry content_type,
 * decoded (aiosmtpd's Maildir may hold LF or CRLF line ends). */
static char *part_decoded(const char *mail, const char *content_type)
{
	const char *h = strstr(mail, content_type), *b, *e;
	unsigned char *out;
	char *clean, *res;
	size_t n = 0;
	int len;

	ck_assert_msg(h, "no %s part in\n%s", content_type, mail);
	b = strstr(h, "\n\n");
	if (!b || (strstr(h, "\r\n\r\n") && strstr(h, "\r\n\r\n") < b))
		b = strstr(h, "\r\n\r\n");
	ck_assert_ptr_nonnull(b);
	e = strstr(b, "\n--");
	ck_assert_ptr_nonnull(e);
	clean = calloc(1, (size_t)(e - b) + 1);
	for (const char *p = b; p < e; p++)
		if (*p != '\r' && *p != '\n' && *p != ' ')
			clean[n++] = *p;
	out = calloc(1, n + 4);
	len = EVP_DecodeBlock(out, (unsigned char *)clean, (int)n);
	ck_assert_int_ge(len, 0);
	while (n && clean[--n] == '=')
		len--;
	out[len] = '\0';
	res = h_strdup((char *)out);
	free(out);
	free(clean);
	return res;
}

/* What an invitation must say. */
struct expect {
	const char *method;     /* REQUEST | CANCEL */
	const char *uid_of;     /* the appointment whose id is in the UID */
	int sequence;
	const char *status;     /* TENTATIVE | CONFIRMED | CANCELLED */
	const char *times_of;   /* the appointment whose start and end it has */
	const char *organizer, *attendee;       /* e-mail addresses */
	const char *summary;
};

static const char *utc_of(const char *apt, const char *col)
{
	return h_sql_scalar(h_sprintf("SELECT to_char(%s AT TIME ZONE 'UTC', "
		"'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"') FROM calendar.appointments WHERE id = $1::uuid",
		col), apt);
}

static long long epoch_of(const char *apt, const char *col)
{
	return h_sql_int(h_sprintf("SELECT extract(epoch FROM %s)::bigint "
		"FROM calendar.appointments WHERE id = $1::uuid", col), apt);
}

/* The invitation of m as libical reads it. */
static void check_libical(const struct mail *m, const struct expect *x)
{
	char *ics = part_decoded(m->text, h_sprintf("Content-Type: text/calendar; "
		"charset=UTF-8; method=%s", x->method));
	icalcomponent *c = icalparser_parse_string(ics), *ev;
	icalproperty_method want = icalproperty_string_to_method(x->method);

	ck_assert_msg(c, "libical cannot parse\n%s", ics);
	ck_assert_int_eq(icalcomponent_get_method(c), want);
	ck_assert_int_eq(icalcomponent_count_components(c, ICAL_VEVENT_COMPONENT), 1);
	ev = icalcomponent_get_first_component(c, ICAL_VEVENT_COMPONENT);
	ck_assert_str_eq(icalcomponent_get_uid(ev),
		h_sprintf("appointment-%s@pin-calendar", x->uid_of));
	ck_assert_int_eq(icalcomponent_get_sequence(ev), x->sequence);
	ck_assert_int_eq(icalcomponent_get_status(ev), icalproperty_string_to_status(x->status));
	ck_assert_int_eq((long long)icaltime_as_timet(icalcomponent_get_dtstart(ev)),
		epoch_of(x->times_of, "start_at"));
	ck_assert_int_eq((long long)icaltime_as_timet(icalcomponent_get_dtend(ev)),
		epoch_of(x->times_of, "end_at"));
	ck_assert_str_eq(icalproperty_get_organizer(icalcomponent_get_first_property(ev,
		ICAL_ORGANIZER_PROPERTY)), h_sprintf("mailto:%s", x->organizer));
	ck_assert_str_eq(icalproperty_get_attendee(icalcomponent_get_first_property(ev,
		ICAL_ATTENDEE_PROPERTY)), h_sprintf("mailto:%s", x->attendee));
	icalcomponent_free(c);
}

/* The message as Python's email package and python3-icalendar read it. */
static void check_python(const struct mail *m, const struct expect *x)
{
	char *cmd = h_sprintf("/usr/bin/python3 '%s/tests/integration/imip_read.py' '%s'",
		h_env("PIN_SOURCE_DIR"), m->path);
	FILE *p = popen(cmd, "r");
	char buf[65536];
	size_t n;
	json_object *o, *parts;

	ck_assert_ptr_nonnull(p);
	n = fread(buf, 1, sizeof buf - 1, p);
	buf[n] = '\0';
	ck_assert_int_eq(pclose(p), 0);
	o = json_tokener_parse(buf);
	ck_assert_msg(o, "imip_read.py: %s", buf);
	/* the MIME tree: mixed(alternative(plain, calendar), ics) */
	parts = h_jget(o, "parts");
	ck_assert_str_eq(json_object_to_json_string_ext(parts, JSON_C_TO_STRING_PLAIN),
		"[\"multipart\\/mixed\",\"multipart\\/alternative\",\"text\\/plain\","
		"\"text\\/calendar\",\"application\\/ics\"]");
	ck_assert_str_eq(h_jstr(o, "plain"), m->body);        /* the text as before */
	ck_assert_str_eq(h_jstr(o, "method"), x->method);
	ck_assert_int_eq(strcasecmp(h_jstr(o, "charset"), "utf-8"), 0);
	ck_assert_str_eq(h_jstr(o, "filename"), "invite.ics");
	ck_assert(json_object_get_boolean(h_jget(o, "same")));
	ck_assert_str_eq(h_jstr(o, "METHOD"), x->method);
	ck_assert_int_eq(json_object_get_int(h_jget(o, "events")), 1);
	ck_assert_str_eq(h_jstr(o, "UID"), h_sprintf("appointment-%s@pin-calendar", x->uid_of));
	ck_assert_int_eq(json_object_get_int(h_jget(o, "SEQUENCE")), x->sequence);
	ck_assert_str_eq(h_jstr(o, "STATUS"), x->status);
	ck_assert_str_eq(h_jstr(o, "DTSTART"), utc_of(x->times_of, "start_at"));
	ck_assert_str_eq(h_jstr(o, "DTEND"), utc_of(x->times_of, "end_at"));
	ck_assert_str_eq(h_jstr(o, "ORGANIZER"), h_sprintf("mailto:%s", x->organizer));
	ck_assert_str_eq(h_jstr(o, "ATTENDEE"), h_sprintf("mailto:%s", x->attendee));
	if (x->summary)
		ck_assert_str_eq(h_jstr(o, "SUMMARY"), x->summary);
	json_object_put(o);
}

/* user's e-mail of kind about subject carries the invitation x */
static void check(const char *user, const char *kind, const char *subject,
		const struct expect *x)
{
	struct mail m = mail_of(user, kind, subject);

	check_libical(&m, x);
	check_python(&m, x);
}

/* ------------------------------------------------------------------ tests */

/* Book, confirm, reschedule, confirm, cancel: every e-mail to the agent and
 * the investor carries the invitation of the same calendar entry, each
 * change a higher SEQUENCE; the old side of the reschedule sends nothing
 * (the new invitation moves the entry); the cancellation is a CANCEL. */
START_TEST(invitations_follow_the_appointment)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char *inv = h_uuid(), *tok = h_token("investor", inv, NULL);
	char *agent_mail = h_sprintf("agent-%s@example.com", a.id);
	char *inv_mail = h_sprintf("inv-%s@example.com", inv);
	char **slots = publish(&a, 2, 5);
	struct expect x = { 0 };
	struct h_resp *r;
	char *apt1, *apt2;

	contact(a.id, agent_mail, "ru", "Иван Агентов");
	contact(inv, inv_mail, "en", "Anna Investor");
	x.organizer = agent_mail;
	x.attendee = inv_mail;

	/* booked (Pending): REQUEST, TENTATIVE, SEQUENCE 0, to both */
	apt1 = book(tok, slots[0]);
	x = (struct expect){ "REQUEST", apt1, 0, "TENTATIVE", apt1, agent_mail, inv_mail,
		"Показ: Anna Investor" };
	check(a.id, "AppointmentCreated", apt1, &x);
	x.summary = "Showing with agent Иван Агентов";
	check(inv, "AppointmentCreated", apt1, &x);

	/* confirmed: REQUEST, CONFIRMED, SEQUENCE 1 (the investor is told) */
	r = act(AG, apt1, "confirm", a.token, NULL);
	ck_assert_msg(r->status == 200, "confirm: %ld %s", r->status, r->body);
	x.sequence = 1;
	x.status = "CONFIRMED";
	check(inv, "AppointmentConfirmed", apt1, &x);

	/* rescheduled: a new appointment, the SAME UID, SEQUENCE 3, the new
	 * times, Pending again; to both */
	r = act(IN, apt1, "reschedule", tok, h_sprintf("{\"newSlotId\":\"%s\"}", slots[1]));
	ck_assert_msg(r->status == 201, "reschedule: %ld %s", r->status, r->body);
	apt2 = h_strdup(h_jstr(r->json, "id"));
	ck_assert_str_ne(apt1, apt2);
	x = (struct expect){ "REQUEST", apt1, 3, "TENTATIVE", apt2, agent_mail, inv_mail,
		"Показ: Anna Investor" };
	check(a.id, "AppointmentCreated", apt2, &x);
	x.summary = "Showing with agent Иван Агентов";
	check(inv, "AppointmentCreated", apt2, &x);
	ck_assert_str_ne(utc_of(apt1, "start_at"), utc_of(apt2, "start_at"));
	/* the old side's cancellation builds no e-mail (no CANCEL of the entry) */
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE subject_id = $1::uuid AND kind = 'AppointmentCancelled'", apt1), 0);

	/* the new one confirmed: SEQUENCE 4 */
	r = act(AG, apt2, "confirm", a.token, NULL);
	ck_assert_msg(r->status == 200, "confirm: %ld %s", r->status, r->body);
	x.sequence = 4;
	x.status = "CONFIRMED";
	check(inv, "AppointmentConfirmed", apt2, &x);

	/* cancelled by the investor: the agent gets the CANCEL, SEQUENCE 5 */
	r = act(IN, apt2, "cancel", tok, NULL);
	ck_assert_msg(r->status == 200, "cancel: %ld %s", r->status, r->body);
	x = (struct expect){ "CANCEL", apt1, 5, "CANCELLED", apt2, agent_mail, inv_mail,
		"Показ: Anna Investor" };
	check(a.id, "AppointmentCancelled", apt2, &x);
}
END_TEST

/* A booking the agent declines: the investor's e-mail is the CANCEL of the
 * entry the booking e-mail made (SEQUENCE 0 -> 2). */
START_TEST(decline_cancels_the_investors_entry)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char *inv = h_uuid(), *tok = h_token("investor", inv, NULL);
	char *agent_mail = h_sprintf("agent-%s@example.com", a.id);
	char *inv_mail = h_sprintf("inv-%s@example.com", inv);
	char **slots = publish(&a, 1, 6);
	struct h_resp *r;
	struct expect x;
	char *apt;

	contact(a.id, agent_mail, "en", "Ivan Agent");
	contact(inv, inv_mail, "ru", "Анна Инвестор");
	apt = book(tok, slots[0]);
	x = (struct expect){ "REQUEST", apt, 0, "TENTATIVE", apt, agent_mail, inv_mail,
		"Показ с агентом Ivan Agent" };
	check(inv, "AppointmentCreated", apt, &x);
	r = act(AG, apt, "decline", a.token, "{\"reason\":\"busy\",\"releaseSlot\":true}");
	ck_assert_msg(r->status == 200, "decline: %ld %s", r->status, r->body);
	x = (struct expect){ "CANCEL", apt, 2, "CANCELLED", apt, agent_mail, inv_mail,
		"Показ с агентом Ivan Agent" };
	check(inv, "AppointmentCancelled", apt, &x);
}
END_TEST

/* No address of the agent known when the booking is enqueued: no
 * ORGANIZER, so no invitation -- the investor's e-mail is the plain text
 * of before, nothing else. */
START_TEST(no_organizer_address_plain_email)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char *inv = h_uuid(), *tok = h_token("investor", inv, NULL);
	char **slots = publish(&a, 1, 7);
	struct mail m;

	contact(inv, h_sprintf("inv-%s@example.com", inv), "en", "Anna Investor");
	m = mail_of(inv, "AppointmentCreated", book(tok, slots[0]));
	ck_assert_ptr_null(strstr(m.text, "text/calendar"));
	ck_assert_ptr_null(strstr(m.text, "multipart"));
	ck_assert_msg(strstr(m.text, "Content-Type: text/plain; charset=utf-8"), "%s", m.text);
}
END_TEST

/* The investor's erasure (identity status Deleted) drops the invitation
 * from the agent's row too: it names the investor (ATTENDEE, CN). */
START_TEST(erasure_drops_the_invitation)
{
	struct h_agent a = h_agent_new(NULL, "calendar.events.view");
	char *inv = h_uuid(), *tok = h_token("investor", inv, NULL);
	char *inv_mail = h_sprintf("inv-%s@example.com", inv);
	char **slots = publish(&a, 1, 8);
	const char *q = "SELECT count(*) FROM notifications.notifications WHERE "
		"recipient_user_id = $1::uuid AND channel = 'Email' AND subject_id = $2::uuid "
		"AND calendar IS NOT NULL";
	char *apt;

	contact(a.id, h_sprintf("agent-%s@example.com", a.id), "ru", "Иван Агентов");
	contact(inv, inv_mail, "en", "Anna Investor");
	apt = book(tok, slots[0]);
	(void)mail_of(a.id, "AppointmentCreated", apt);
	ck_assert_int_eq(h_sql_int(q, a.id, apt), 1);
	ck_assert_int_eq(h_kafka_produce("pin.identity.users.v1", inv, h_sprintf(
		"{\"messageId\":\"%s\",\"eventType\":\"pin.identity.user-deleted\","
		"\"contractVersion\":1,\"createdAt\":\"2026-12-01T10:00:00Z\","
		"\"aggregateType\":\"User\",\"aggregateId\":\"%s\",\"correlationId\":null,"
		"\"payload\":{\"userId\":\"%s\",\"status\":\"Deleted\"}}", h_new_mid(), inv, inv)),
		0);
	ck_assert_msg(H_WAIT_UNTIL(h_sql_int(q, a.id, apt) == 0, WAIT_MS),
		"the agent's row still has the investor's invitation");
	ck_assert_int_eq(h_sql_int("SELECT count(*) FROM notifications.notifications "
		"WHERE strpos(replace(calendar, E'\\r\\n ', ''), $1) > 0", inv_mail), 0);
}
END_TEST

Suite *make_imip_suite(void)
{
	Suite *s = suite_create("imip");
	TCase *tc = h_tcase("imip", 240);

	tcase_add_test(tc, invitations_follow_the_appointment);
	tcase_add_test(tc, decline_cancels_the_investors_entry);
	tcase_add_test(tc, no_organizer_address_plain_email);
	tcase_add_test(tc, erasure_drops_the_invitation);
	suite_add_tcase(s, tc);
	return s;
}
