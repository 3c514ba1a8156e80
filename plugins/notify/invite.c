/* invite.c -- the iCalendar invitation of an appointment e-mail (issue 32
 * item 2, RFC 6047 iMIP): the VCALENDAR an Email row of AppointmentCreated,
 * AppointmentConfirmed and AppointmentCancelled carries (column calendar,
 * notifications 0741), which the dispatcher sends as the message's
 * text/calendar part and invite.ics attachment (smtp.c).
 *
 * Built once, when the notification is enqueued (events.c fan-out): the
 * appointment-* payload has the times, the kind and the reschedule chain
 * (originalAppointmentId, rescheduleCount), the contact replica the names
 * and e-mail addresses of both parties.  Through sdk/ical.h only (libical):
 *   UID       appointment-<originalAppointmentId>@pin-calendar: the first
 *             appointment of the chain, so a reschedule (a new appointment)
 *             moves the entry the first invitation made;
 *   SEQUENCE  pc_ical_appointment_sequence(rescheduleCount, status);
 *   METHOD    REQUEST (booked, confirmed, moved), CANCEL (cancelled,
 *             declined, expired), with STATUS TENTATIVE (Pending),
 *             CONFIRMED or CANCELLED;
 *   ORGANIZER the agent, ATTENDEE the investor (mailto: + CN);
 *   SUMMARY   the kind and the other party's name, in the template's
 *             language; DESCRIPTION the e-mail's text.
 * No LOCATION: the slot's location is not in any payload (events.md: no
 * free text) and notify reads no calendar table (layering).
 *
 * The addresses and names are PII: in the e-mail and the row only, never
 * logged (nothing here logs). */
#include "config.h"
#include <stdlib.h>
#include <string.h>
#include "sdk/sdk.h"
#include "sdk/ical.h"
#include "notify.h"

static const char *summary(const struct ntf_invite *iv)
{
	int ru = !iv->locale || !strncmp(iv->locale, "ru", 2);
	int showing = !iv->kind || strcmp(iv->kind, "Consultation") != 0;
	const char *what = ru ? (showing ? "Показ" : "Консультация") :
			(showing ? "Showing" : "Consultation");
	const char *other = iv->for_agent ? iv->investor_name : iv->agent_name;

	if (!other || !*other)
		return what;
	if (iv->for_agent)
		return pc_api->sprintf("%s: %s", what, other);
	return pc_api->sprintf(ru ? "%s с агентом %s" : "%s with agent %s", what, other);
}

const char *ntf_invite_calendar(const struct ntf_invite *iv)
{
	struct pc_ical_attendee att = { iv->investor_email, iv->investor_name };
	struct pc_ical_event ev;
	int cancel = iv->status && (!strcmp(iv->status, "Cancelled") ||
			!strcmp(iv->status, "Declined") || !strcmp(iv->status, "Expired"));
	char *text;
	const char *out;

	/* both parties' addresses: ORGANIZER and ATTENDEE are what a client
	 * needs to file the invitation (RFC 5546 REQUEST / CANCEL) */
	if (!iv->agent_email || !*iv->agent_email || !iv->investor_email ||
			!*iv->investor_email || !iv->appointment_id || iv->end_us <= iv->start_us)
		return NULL;
	memset(&ev, 0, sizeof ev);
	ev.kind = PC_ICAL_APPOINTMENT;
	ev.id = iv->original_id && *iv->original_id ? iv->original_id : iv->appointment_id;
	ev.sequence = pc_ical_appointment_sequence(iv->reschedules, iv->status);
	ev.start_us = iv->start_us;
	ev.end_us = iv->end_us;
	ev.stamp_us = iv->stamp_us;
	ev.status = cancel ? PC_ICAL_CANCELLED : iv->status && !strcmp(iv->status, "Pending") ?
			PC_ICAL_TENTATIVE : PC_ICAL_CONFIRMED;
	ev.summary = summary(iv);
	ev.description = iv->description;
	ev.organizer_email = iv->agent_email;
	ev.organizer_name = iv->agent_name;
	ev.attendees = &att;
	ev.n_attendees = 1;
	if (!(text = pc_ical_calendar(cancel ? "CANCEL" : "REQUEST", NULL, &ev, 1)))
		return NULL;
	out = pc_api->strdup(text);
	free(text);
	return out;
}
