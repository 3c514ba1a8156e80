-- Issue 12 items 3 and 6: the final state of calendar subjects as a fact of
-- its own (after-final guard), and the indexes of notify.so's housekeeping
-- job.  Erasure of a deleted user keeps a tombstone contact row without
-- personal data, so display_name becomes nullable.

-- The final outcome of an event / appointment as notify.so learnt it from the
-- messages it consumed (event-status-changed Cancelled | Completed,
-- appointment-cancelled, appointment-completed).  The first final fact wins.
-- No PII: ids, enums and instants only.
CREATE TABLE notifications.subject_final_states (
	subject_id uuid PRIMARY KEY,          -- EventId or AppointmentId
	subject_type text NOT NULL CHECK (subject_type IN ('CalendarEvent', 'Appointment')),
	final_state text NOT NULL
		CHECK (final_state IN ('Cancelled', 'Completed', 'Expired', 'NoShow')),
	source_message_id uuid NOT NULL,
	recorded_at timestamptz NOT NULL
);
CREATE INDEX ix_subject_final_states_recorded ON notifications.subject_final_states
	(recorded_at);

-- the facts the former guard derived from cancellation notifications
INSERT INTO notifications.subject_final_states (subject_id, subject_type, final_state,
		source_message_id, recorded_at)
SELECT DISTINCT ON (subject_id) subject_id,
	CASE WHEN source_event_type LIKE 'pin.calendar.appointment-%' THEN 'Appointment'
	     ELSE 'CalendarEvent' END,
	'Cancelled', source_message_id, created_at
FROM notifications.notifications
WHERE kind = 'AppointmentCancelled' AND subject_id IS NOT NULL
ORDER BY subject_id, created_at
ON CONFLICT DO NOTHING;

-- housekeeping (notify.so job notifications-housekeeping)
CREATE INDEX ix_processed_messages_processed_at ON notifications.processed_messages
	(processed_at);
CREATE INDEX ix_notifications_done_created ON notifications.notifications (created_at)
	WHERE status IN ('Sent', 'Failed', 'Read');

-- erasure: a Deleted user's replica row keeps only ids, status and instants
ALTER TABLE notifications.recipient_contacts ALTER COLUMN display_name DROP NOT NULL;
