/* sdk/ical.h -- iCalendar (RFC 5545) objects through libical (issue 32):
 * the one place that builds a VEVENT, so the agent's feed (calendar plugin)
 * and the invitations in e-mails (notify, RFC 6047 iMIP) describe the same
 * thing with the same UID and SEQUENCE and a calendar application updates
 * the entry it already has.  Line folding, escaping and the text form are
 * libical's (icalcomponent_as_ical_string).
 *
 * UID convention (stable for the life of the object, never reused):
 *   a calendar event   "event-<eventId>@pin-calendar"
 *   an appointment     "appointment-<appointmentId>@pin-calendar"
 * SEQUENCE: grows on every reschedule (the caller passes the object's count
 * of reschedules or its version; it must never go down for one UID).
 * An appointment's reschedule is a new appointment (INV-APT-5): its UID is
 * that of the FIRST appointment of the chain (originalAppointmentId of the
 * appointment-* payloads, calendar.appointments.original_appointment_id),
 * and its SEQUENCE is pc_ical_appointment_sequence() below, so the new
 * appointment replaces the entry the old one made.
 * Times are written in UTC (DTSTART:20261201T090000Z), so no VTIMEZONE is
 * needed; a client shows them in its own zone.
 */
#ifndef PIN_SDK_ICAL_H
#define PIN_SDK_ICAL_H

#include <stdint.h>
#include <stddef.h>

enum pc_ical_kind { PC_ICAL_EVENT, PC_ICAL_APPOINTMENT };
enum pc_ical_status { PC_ICAL_CONFIRMED, PC_ICAL_TENTATIVE, PC_ICAL_CANCELLED };

struct pc_ical_attendee {
	const char *email;       /* mailto: address (required) */
	const char *name;        /* CN, optional */
};

struct pc_ical_event {
	enum pc_ical_kind kind;
	const char *id;          /* the event's or appointment's UUID */
	int sequence;            /* >= 0 */
	int64_t start_us, end_us;    /* instants (UTC microseconds) */
	int64_t stamp_us;        /* DTSTAMP: when this text was produced */
	int64_t modified_us;     /* LAST-MODIFIED, 0 = none */
	enum pc_ical_status status;
	const char *summary;     /* SUMMARY, optional */
	const char *location;    /* LOCATION, optional */
	const char *description; /* DESCRIPTION, optional */
	const char *url;         /* URL, optional */
	const char *organizer_email, *organizer_name;   /* ORGANIZER, optional */
	const struct pc_ical_attendee *attendees;
	size_t n_attendees;
};

/* "event-<id>@pin-calendar" / "appointment-<id>@pin-calendar" into buf
 * (>= 80 bytes); returns buf. */
char *pc_ical_uid(enum pc_ical_kind kind, const char *id, char *buf, size_t len);

/* A VCALENDAR (VERSION 2.0, PRODID, CALSCALE GREGORIAN) with method (NULL:
 * none, as a subscription feed has; "REQUEST" / "CANCEL" for iMIP) and the
 * given VEVENTs, as RFC 5545 text (CRLF line ends, lines folded at 75
 * octets).  A name (X-WR-CALNAME) is optional.  malloc'ed (free() it); NULL
 * when out of memory or an instant is out of range. */
char *pc_ical_calendar(const char *method, const char *name,
		const struct pc_ical_event *ev, size_t n);

/* The SEQUENCE of an appointment (issue 32): 3 x the reschedules that led
 * to it (rescheduleCount), plus its step: 0 Pending, 1 Confirmed (and
 * Completed, NoShow), 2 Declined / Cancelled / Expired.  Every change a
 * recipient is told of is a strictly higher SEQUENCE for the same UID
 * (booked, confirmed, moved, cancelled), so no client keeps an older
 * version; an unknown status counts as Confirmed. */
int pc_ical_appointment_sequence(int reschedules, const char *status);

#endif
