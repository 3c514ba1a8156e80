-- Indexes for the housekeeping job (workers.so, workers.md): it deletes
-- terminal events and appointments older than 180 days, published outbox
-- rows older than 7 days and inbox rows older than 30 days, in small batches.
CREATE INDEX ix_inbox_processed_at ON calendar.inbox (processed_at);
CREATE INDEX ix_calendar_events_terminal_updated
	ON calendar.calendar_events (updated_at)
	WHERE status IN ('Completed', 'Cancelled');
CREATE INDEX ix_appointments_terminal_updated
	ON calendar.appointments (updated_at)
	WHERE status IN ('Declined', 'Cancelled', 'Expired', 'Completed', 'NoShow');
