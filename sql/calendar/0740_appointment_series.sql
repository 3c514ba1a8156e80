-- 0740_appointment_series (issue 32 item 2): an appointment remembers the
-- first appointment of its reschedule chain and how many reschedules led to
-- it.  A reschedule (INV-APT-5) cancels the old appointment and creates a
-- new one with a new id; a calendar application that added the booking
-- from an e-mail invitation (RFC 6047 iMIP) must see the new one as the
-- same entry moved: the invitation's UID is that of the first appointment
-- ("appointment-<originalAppointmentId>@pin-calendar", sdk/ical.h) and its
-- SEQUENCE grows with reschedule_count.  Both go into the appointment-*
-- payloads (doc/events.md), so notify.so needs nothing of this schema.
--
-- Stored rather than walked: housekeeping purges terminal appointments
-- after 180 days (rescheduled_from_appointment_id is then SET NULL), and a
-- chain walked after that would start at another id.
--
-- original_appointment_id NULL reads as the row's own id (a first booking
-- written by a host of the previous release during the upgrade; a reschedule
-- such a host writes starts a chain of its own: one invitation that is not
-- updated in place, nothing worse).
ALTER TABLE calendar.appointments
	ADD COLUMN original_appointment_id uuid,
	ADD COLUMN reschedule_count int NOT NULL DEFAULT 0;

-- The rows already there: the chains that exist, walked from their first
-- appointment (one that was rescheduled and is no reschedule itself).  Only
-- the later members of a chain are written; a first booking keeps NULL,
-- which reads as its own id, and reschedule_count 0 -- so the migration
-- rewrites the reschedules only, not the table.
WITH RECURSIVE chain (id, original_id, n) AS (
	SELECT a.id, a.id, 0
	  FROM calendar.appointments a
	 WHERE a.rescheduled_from_appointment_id IS NULL
	   AND a.rescheduled_to_appointment_id IS NOT NULL
	UNION ALL
	SELECT a.id, c.original_id, c.n + 1
	  FROM calendar.appointments a
	  JOIN chain c ON a.rescheduled_from_appointment_id = c.id
)
UPDATE calendar.appointments a
   SET original_appointment_id = c.original_id, reschedule_count = c.n
  FROM chain c
 WHERE a.id = c.id AND c.n > 0;
