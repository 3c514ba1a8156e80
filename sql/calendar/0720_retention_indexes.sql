-- 0720_retention_indexes (issue 30 item 6: every table has a bound): the
-- indexes that keep the new housekeeping purges (plugins/workers/
-- housekeeping.c) to reading the rows they delete, never a whole table.
--
--  * Archived slots (status Archived, 30 days after their end) that ended
--    more than housekeeping.slot_days ago are deleted: the first entries of
--    a partial index on end_at.  Slots reach Archived by an UPDATE that
--    changes status (already a new entry in every index); nothing else
--    writes it.
CREATE INDEX IF NOT EXISTS ix_availability_slots_archived_end
	ON calendar.availability_slots (end_at) WHERE status = 'Archived';

--  * A slot batch is deleted once no slot refers to it.  Both that test and
--    the foreign key's own check on the DELETE (availability_slots.batch_id
--    REFERENCES slot_batches) look slots up by batch_id; without an index
--    the foreign key's check reads the whole slot table for every batch
--    deleted.  0670 dropped the partial index on batch_id of Available
--    slots (it served only the batch archive); this one is on every slot of
--    a batch: a 480-slot publish writes 480 entries into it again (about
--    0.25 ms of its ~21 ms, 0670's figure) -- the price of a slot_batches
--    table that does not grow without end.
CREATE INDEX IF NOT EXISTS ix_availability_slots_batch_id
	ON calendar.availability_slots (batch_id) WHERE batch_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS ix_slot_batches_to_date ON calendar.slot_batches (to_date);

--  * Closed booking-deadline links (Completed, Cancelled) not changed for
--    housekeeping.terminal_days are deleted; their BookingDeadline events
--    can only go after them (the event purge skips events a link refers to).
CREATE INDEX IF NOT EXISTS ix_booking_deadline_links_done_updated
	ON calendar.booking_deadline_links (updated_at)
	WHERE status IN ('Completed', 'Cancelled');

--  * Replicas of closed deals (is_terminal) not changed for
--    housekeeping.terminal_days are deleted once no link names the deal.
CREATE INDEX IF NOT EXISTS ix_crm_deal_replicas_terminal_updated
	ON calendar.crm_deal_replicas (updated_at) WHERE is_terminal;

-- Sent and Skipped reminders older than housekeeping.reminder_days (by
-- DueAt) are read through ix_event_reminders_status_due_at (0100), one
-- status at a time: no index here.
--
-- Upgrade note (doc/operating.md, upgrade notes): a plain CREATE INDEX (the
-- migrator applies a file in one transaction): writes to
-- calendar.availability_slots wait while the table is read, twice.  On a
-- large slot table build the two slot indexes beforehand, outside any
-- transaction, with CREATE INDEX CONCURRENTLY IF NOT EXISTS and the same
-- definitions; this file then finds them.
