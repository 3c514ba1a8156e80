/* test_mime.c -- the e-mail notify.so sends (plugins/notify/smtp.c
 * ntf_mime_build) with and without an iCalendar invitation (issue 32 item 2,
 * RFC 6047 iMIP), and the appointment SEQUENCE convention of sdk/ical.h.
 * The invitation is built through sdk/ical.h as invite.c builds it and read
 * back with libical from the decoded text/calendar part. */
#include "config.h"

#include <check.h>
#include <stdlib.h>
#include <string.h>
#include <libical/ical.h>

#include "sdk/ical.h"
#include "send.h"
#include "suites.h"

#define ID "0190c0de-0000-7000-8000-000000000001"
#define APT "0190c0de-0000-7000-8000-0000000000aa"
/* 2030-06-01T09:00:00Z, 10:00 */
#define T9 1906448400LL
#define T10 1906452000LL

static int b64v(char ch)
{
	if (ch >= 'A' && ch <= 'Z')
		return ch - 'A';
	if (ch >= 'a' && ch <= 'z')
		return ch - 'a' + 26;
	if (ch >= '0' && ch <= '9')
		return ch - '0' + 52;
	return ch == '+' ? 62 : ch == '/' ? 63 : -1;
}

/* base64 lines from s up to the next boundary line ("--"): decoded, malloc'd */
static char *b64_part(const char *s)
{
	const char *end = strstr(s, "\r\n--");
	size_t n = end ? (size_t)(end - s) : strlen(s), o = 0;
	char *out = calloc(1, n + 1);
	unsigned acc = 0;
	int bits = 0;

	for (size_t i = 0; i < n; i++) {
		int v = b64v(s[i]);

		if (v < 0)
			continue;
		acc = (acc << 6) | (unsigned)v;
		bits += 6;
		if (bits >= 8) {
			bits -= 8;
			out[o++] = (char)((acc >> bits) & 0xff);
		}
	}
	return out;
}

/* the body of the part whose headers contain header (the text after the
 * blank line that ends them), or NULL */
static const char *part_after(const char *msg, const char *header)
{
	const char *h = strstr(msg, header), *b;

	if (!h)
		return NULL;
	b = strstr(h, "\r\n\r\n");
	return b ? b + 4 : NULL;
}

static char *invitation(const char *method, enum pc_ical_status st, int seq)
{
	struct pc_ical_attendee att = { "investor@example.com", "Анна Смирнова" };
	struct pc_ical_event ev = {
		.kind = PC_ICAL_APPOINTMENT, .id = APT, .sequence = seq,
		.start_us = T9 * 1000000, .end_us = T10 * 1000000,
		.stamp_us = (T9 - 86400) * 1000000, .status = st,
		.summary = "Показ: Анна Смирнова",
		.description = "Анна Смирнова записалась на встречу 01.06.2030 12:00 (Europe/Moscow).",
		.organizer_email = "agent@example.com", .organizer_name = "Иван Петров",
		.attendees = &att, .n_attendees = 1,
	};

	return pc_ical_calendar(method, NULL, &ev, 1);
}

START_TEST(plain_without_calendar)
{
	struct ntf_message m = { ID, "to@example.com", "Subject", "Текст", NULL };
	char *msg = ntf_mime_build(&m, "from@example.com", "example.com", T9);

	ck_assert_ptr_nonnull(msg);
	ck_assert_ptr_nonnull(strstr(msg, "\r\nContent-Type: text/plain; charset=utf-8\r\n"));
	ck_assert_ptr_null(strstr(msg, "multipart"));
	ck_assert_ptr_null(strstr(msg, "text/calendar"));
	free(msg);
}
END_TEST

START_TEST(request_is_alternative_plus_attachment)
{
	char *cal = invitation("REQUEST", PC_ICAL_TENTATIVE, 0), *msg, *text, *ics, *att;
	struct ntf_message m = { ID, "to@example.com", "Новая запись", "Текст письма", cal };
	const char *alt, *plain, *calp, *ap;
	icalcomponent *c, *ev;

	ck_assert_ptr_nonnull(cal);
	msg = ntf_mime_build(&m, "from@example.com", "example.com", T9);
	ck_assert_ptr_nonnull(msg);
	/* the top: multipart/mixed, one boundary per level, from the id */
	ck_assert_ptr_nonnull(strstr(msg, "\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed;\r\n "
		"boundary=\"=_pin-m-" ID "\"\r\n"));
	ck_assert_ptr_nonnull(strstr(msg, "\r\nMessage-ID: <" ID "@example.com>\r\n"));
	/* in order: alternative (plain, then calendar), then the attachment */
	alt = strstr(msg, "--=_pin-m-" ID "\r\nContent-Type: multipart/alternative;\r\n "
		"boundary=\"=_pin-a-" ID "\"\r\n");
	plain = strstr(msg, "--=_pin-a-" ID "\r\nContent-Type: text/plain; charset=utf-8\r\n"
		"Content-Transfer-Encoding: base64\r\n");
	calp = strstr(msg, "--=_pin-a-" ID "\r\nContent-Type: text/calendar; charset=UTF-8; "
		"method=REQUEST\r\nContent-Transfer-Encoding: base64\r\n");
	ap = strstr(msg, "--=_pin-m-" ID "\r\nContent-Type: application/ics; name=\"invite.ics\"\r\n"
		"Content-Disposition: attachment; filename=\"invite.ics\"\r\n");
	ck_assert_msg(alt && plain && calp && ap, "%s", msg);
	ck_assert(alt < plain && plain < calp && calp < ap);
	ck_assert_ptr_nonnull(strstr(calp, "--=_pin-a-" ID "--\r\n"));
	ck_assert_ptr_nonnull(strstr(ap, "--=_pin-m-" ID "--\r\n"));
	/* every line within 78 characters (RFC 5322 2.1.1) */
	for (const char *l = msg; *l;) {
		size_t n = strcspn(l, "\n");

		ck_assert_msg(n <= 79, "long line: %.*s", (int)n, l);
		l += n + (l[n] ? 1 : 0);
	}

	text = b64_part(part_after(plain, "Content-Type: text/plain"));
	ck_assert_str_eq(text, "Текст письма");
	ics = b64_part(part_after(calp, "Content-Type: text/calendar"));
	ck_assert_str_eq(ics, cal);
	att = b64_part(part_after(ap, "Content-Type: application/ics"));
	ck_assert_str_eq(att, cal);

	/* libical reads it back: METHOD, UID, SEQUENCE, times, status, people */
	c = icalparser_parse_string(ics);
	ck_assert_ptr_nonnull(c);
	ck_assert_int_eq(icalcomponent_get_method(c), ICAL_METHOD_REQUEST);
	ev = icalcomponent_get_first_component(c, ICAL_VEVENT_COMPONENT);
	ck_assert_ptr_nonnull(ev);
	ck_assert_str_eq(icalcomponent_get_uid(ev), "appointment-" APT "@pin-calendar");
	ck_assert_int_eq(icalcomponent_get_sequence(ev), 0);
	ck_assert_int_eq(icalcomponent_get_status(ev), ICAL_STATUS_TENTATIVE);
	ck_assert_int_eq((long long)icaltime_as_timet(icalcomponent_get_dtstart(ev)), T9);
	ck_assert_int_eq((long long)icaltime_as_timet(icalcomponent_get_dtend(ev)), T10);
	ck_assert_str_eq(icalproperty_get_organizer(icalcomponent_get_first_property(ev,
		ICAL_ORGANIZER_PROPERTY)), "mailto:agent@example.com");
	ck_assert_str_eq(icalproperty_get_attendee(icalcomponent_get_first_property(ev,
		ICAL_ATTENDEE_PROPERTY)), "mailto:investor@example.com");
	ck_assert_str_eq(icalcomponent_get_summary(ev), "Показ: Анна Смирнова");
	icalcomponent_free(c);
	free(text);
	free(ics);
	free(att);
	free(msg);
	free(cal);
}
END_TEST

START_TEST(cancel_names_its_method)
{
	char *cal = invitation("CANCEL", PC_ICAL_CANCELLED, 5), *msg;
	struct ntf_message m = { ID, "to@example.com", "Отмена", "Текст", cal };

	msg = ntf_mime_build(&m, "from@example.com", "example.com", T9);
	ck_assert_ptr_nonnull(strstr(msg, "Content-Type: text/calendar; charset=UTF-8; "
		"method=CANCEL\r\n"));
	ck_assert_ptr_null(strstr(msg, "method=REQUEST"));
	free(msg);
	free(cal);
}
END_TEST

/* A calendar without a METHOD is no invitation: the plain message. */
START_TEST(calendar_without_method_is_plain)
{
	char *cal = invitation(NULL, PC_ICAL_CONFIRMED, 0), *msg;
	struct ntf_message m = { ID, "to@example.com", "S", "Текст", cal };

	msg = ntf_mime_build(&m, "from@example.com", "example.com", T9);
	ck_assert_ptr_null(strstr(msg, "multipart"));
	ck_assert_ptr_nonnull(strstr(msg, "Content-Type: text/plain; charset=utf-8"));
	free(msg);
	free(cal);
}
END_TEST

/* Every step of a chain is a higher SEQUENCE than the one before. */
START_TEST(appointment_sequence_grows)
{
	ck_assert_int_eq(pc_ical_appointment_sequence(0, "Pending"), 0);
	ck_assert_int_eq(pc_ical_appointment_sequence(0, "Confirmed"), 1);
	ck_assert_int_eq(pc_ical_appointment_sequence(0, "Cancelled"), 2);
	ck_assert_int_eq(pc_ical_appointment_sequence(0, "Declined"), 2);
	ck_assert_int_eq(pc_ical_appointment_sequence(0, "Expired"), 2);
	ck_assert_int_eq(pc_ical_appointment_sequence(0, "Completed"), 1);
	/* a reschedule of a confirmed one (pending again) is above its cancel */
	ck_assert_int_gt(pc_ical_appointment_sequence(1, "Pending"),
		pc_ical_appointment_sequence(0, "Cancelled"));
	ck_assert_int_eq(pc_ical_appointment_sequence(2, "Confirmed"), 7);
	ck_assert_int_eq(pc_ical_appointment_sequence(-1, "Pending"), 0);
}
END_TEST

Suite *make_mime_suite(void)
{
	Suite *s = suite_create("mime");
	TCase *tc = tcase_create("mime");

	tcase_add_test(tc, plain_without_calendar);
	tcase_add_test(tc, request_is_alternative_plus_attachment);
	tcase_add_test(tc, cancel_names_its_method);
	tcase_add_test(tc, calendar_without_method_is_plain);
	tcase_add_test(tc, appointment_sequence_grows);
	suite_add_tcase(s, tc);
	return s;
}
