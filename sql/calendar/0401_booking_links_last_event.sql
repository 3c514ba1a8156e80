-- 0401_booking_links_last_event.sql -- the envelope createdAt of the
-- booking-confirmed message that set the moment of a Booking-phase deadline
-- (seed 004 step 4, AC-4).  A move is applied only by a newer message, so a
-- replay of the topic from offset 0 (inbox rows purged) never moves an
-- extended deadline back to an older BookingExpiresAt and publishes no
-- duplicate event-rescheduled.  NULL: unknown (older rows, tombstones).
-- Applied once by pin-host --migrate inside a transaction.
ALTER TABLE calendar.booking_deadline_links ADD COLUMN last_event_at timestamptz;
