-- 0741_invitation (issue 32 item 2): the iCalendar invitation (RFC 6047
-- iMIP) an appointment e-mail carries next to its text: the VCALENDAR
-- (METHOD REQUEST or CANCEL) built when the notification is enqueued
-- (events.c, through sdk/ical.h), sent by the dispatcher as the e-mail's
-- text/calendar part and invite.ics attachment (smtp.c).  NULL: a plain
-- e-mail (every other kind and channel, or an address that was not known).
-- PII like the address snapshot (0710): it names the agent (ORGANIZER) and
-- the investor (ATTENDEE) with their e-mail addresses; never logged, never
-- in a Kafka payload, cleared by the erasure of either of them (contacts.c).
ALTER TABLE notifications.notifications
	ADD COLUMN calendar text;
