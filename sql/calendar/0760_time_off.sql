-- 0760_time_off.sql -- issue 32 item 4: an agent's declared absences, and the
-- reason an availability slot was archived.
--
-- calendar.time_off: one row per absence [start_at, end_at) of an agent.  Two
-- absences of one agent never overlap (the exclusion constraint; the API
-- answers 409 TIME_OFF_OVERLAP): an absence is one span the agent edits, not
-- a stack of layers.  The note is the agent's own text (class Internal): it
-- is returned to the agent only, never logged, never put in a message.
--
-- The effects of an absence (plugins/slots/timeoff.c) are applied when it is
-- declared or widened, in the same transaction: Available slots inside it
-- -> Archived with archive_reason 'time_off', Pending appointments inside it
-- declined (the agent's decline: appointment-cancelled, reason
-- DeclinedByAgent).  calendar.slot_plan skips starts inside an absence
-- (reason 'time_off') and a booking of a slot inside one is refused (409
-- AGENT_TIME_OFF).  Shortening or deleting an absence changes no slot.
CREATE TABLE calendar.time_off (
	id              uuid PRIMARY KEY,
	tenant_id       uuid NOT NULL,
	owner_user_id   uuid NOT NULL,
	start_at        timestamptz NOT NULL,
	end_at          timestamptz NOT NULL,
	note            text CHECK (char_length(note) <= 500),
	created_at      timestamptz NOT NULL,
	updated_at      timestamptz NOT NULL,
	version         int NOT NULL DEFAULT 1,
	CHECK (end_at > start_at),
	-- also the index of every read: an owner's absences by range (the
	-- booking's check, slot_plan's skip, the agent's list)
	CONSTRAINT ex_time_off_owner EXCLUDE USING gist (
		owner_user_id WITH =,
		tstzrange(start_at, end_at) WITH &&
	)
);
-- housekeeping deletes absences that ended housekeeping.slot_days ago
CREATE INDEX ix_time_off_end ON calendar.time_off (end_at);

-- Why a slot is Archived, when a reader should know: 'time_off' (archived by
-- an absence of its agent).  NULL for every other archive (the agent's own,
-- a batch archive, the slot-expiration job, a departure) and for any other
-- status.  A nullable column: the hosts of the previous release neither read
-- nor write it (expand, sql/README.md).
ALTER TABLE calendar.availability_slots ADD COLUMN archive_reason varchar(32);
