/* ical.c -- VCALENDAR / VEVENT text through libical (sdk/ical.h). */
#include "config.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <libical/ical.h>
#include "sdk/ical.h"

#define PRODID "-//PIN//calendar//EN"

char *pc_ical_uid(enum pc_ical_kind kind, const char *id, char *buf, size_t len)
{
	snprintf(buf, len, "%s-%s@pin-calendar",
			kind == PC_ICAL_APPOINTMENT ? "appointment" : "event", id ? id : "");
	return buf;
}

int pc_ical_appointment_sequence(int reschedules, const char *status)
{
	int step = 1;

	if (reschedules < 0)
		reschedules = 0;
	if (status && !strcmp(status, "Pending"))
		step = 0;
	else if (status && (!strcmp(status, "Declined") || !strcmp(status, "Cancelled") ||
			!strcmp(status, "Expired")))
		step = 2;
	return 3 * reschedules + step;
}

/* An instant as a UTC date-time (microseconds dropped: iCalendar has
 * seconds).  Floor division, so instants before 1970 round down too. */
static struct icaltimetype utc(int64_t us)
{
	int64_t s = us / 1000000 - (us % 1000000 < 0);

	return icaltime_from_timet_with_zone((time_t)s, 0, icaltimezone_get_utc_timezone());
}

static void add_text(icalcomponent *c, icalproperty *(*mk)(const char *), const char *v)
{
	if (v && *v)
		icalcomponent_add_property(c, mk(v));
}

static icalproperty *person(icalproperty *p, const char *name)
{
	if (name && *name)
		icalproperty_add_parameter(p, icalparameter_new_cn(name));
	return p;
}

static icalcomponent *vevent(const struct pc_ical_event *e)
{
	icalcomponent *c = icalcomponent_new_vevent();
	char uid[128], mailto[320];
	icalproperty_status st = e->status == PC_ICAL_CANCELLED ? ICAL_STATUS_CANCELLED :
		e->status == PC_ICAL_TENTATIVE ? ICAL_STATUS_TENTATIVE : ICAL_STATUS_CONFIRMED;
	size_t i;

	icalcomponent_add_property(c, icalproperty_new_uid(pc_ical_uid(e->kind, e->id, uid, sizeof uid)));
	icalcomponent_add_property(c, icalproperty_new_dtstamp(utc(e->stamp_us)));
	icalcomponent_add_property(c, icalproperty_new_dtstart(utc(e->start_us)));
	icalcomponent_add_property(c, icalproperty_new_dtend(utc(e->end_us)));
	icalcomponent_add_property(c, icalproperty_new_sequence(e->sequence < 0 ? 0 : e->sequence));
	icalcomponent_add_property(c, icalproperty_new_status(st));
	if (e->modified_us)
		icalcomponent_add_property(c, icalproperty_new_lastmodified(utc(e->modified_us)));
	add_text(c, icalproperty_new_summary, e->summary);
	add_text(c, icalproperty_new_location, e->location);
	add_text(c, icalproperty_new_description, e->description);
	add_text(c, icalproperty_new_url, e->url);
	if (e->organizer_email && *e->organizer_email) {
		snprintf(mailto, sizeof mailto, "mailto:%s", e->organizer_email);
		icalcomponent_add_property(c, person(icalproperty_new_organizer(mailto),
				e->organizer_name));
	}
	for (i = 0; i < e->n_attendees; i++) {
		icalproperty *p;

		if (!e->attendees[i].email || !*e->attendees[i].email)
			continue;
		snprintf(mailto, sizeof mailto, "mailto:%s", e->attendees[i].email);
		p = person(icalproperty_new_attendee(mailto), e->attendees[i].name);
		icalproperty_add_parameter(p, icalparameter_new_role(ICAL_ROLE_REQPARTICIPANT));
		icalproperty_add_parameter(p, icalparameter_new_partstat(
				e->status == PC_ICAL_CANCELLED ? ICAL_PARTSTAT_DECLINED :
				ICAL_PARTSTAT_ACCEPTED));
		icalcomponent_add_property(c, p);
	}
	return c;
}

char *pc_ical_calendar(const char *method, const char *name,
		const struct pc_ical_event *ev, size_t n)
{
	icalcomponent *cal;
	char *out;
	size_t i;

	for (i = 0; i < n; i++)
		if (ev[i].end_us < ev[i].start_us)
			return NULL;
	cal = icalcomponent_vanew(ICAL_VCALENDAR_COMPONENT,
			icalproperty_new_version("2.0"),
			icalproperty_new_prodid(PRODID),
			icalproperty_new_calscale("GREGORIAN"),
			(void *)0);
	if (!cal)
		return NULL;
	if (method) {
		icalproperty_method m = icalproperty_string_to_method(method);

		if (m == ICAL_METHOD_NONE || m == ICAL_METHOD_X) {
			icalcomponent_free(cal);
			return NULL;
		}
		icalcomponent_add_property(cal, icalproperty_new_method(m));
	}
	if (name && *name) {
		icalproperty *p = icalproperty_new_x(name);

		icalproperty_set_x_name(p, "X-WR-CALNAME");
		icalcomponent_add_property(cal, p);
	}
	for (i = 0; i < n; i++)
		icalcomponent_add_component(cal, vevent(&ev[i]));
	out = icalcomponent_as_ical_string_r(cal);  /* the caller's, malloc'ed */
	icalcomponent_free(cal);
	return out;
}
