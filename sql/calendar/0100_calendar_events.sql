-- 0100_calendar_events.sql -- CalendarEvent, EventReminder (seed 000), the
-- identity user replica and idempotency keys.
-- Applied once by pin-host --migrate inside a transaction.
-- It also defined calendar.us() (the time helper every read path uses) and
-- the INV-REM-2 guard of event_reminders (function and trigger); they are
-- defined in R__functions.sql now, the one place of the schema's functions.
-- valid-checksum: ba8ed925b589a353
--   (the file as applied before those definitions moved; sql/README.md)

CREATE SCHEMA IF NOT EXISTS calendar;

CREATE TABLE calendar.calendar_events (
	id                       uuid PRIMARY KEY,
	tenant_id                uuid NOT NULL,
	owner_user_id            uuid NOT NULL,
	kind                     varchar(32) NOT NULL CHECK (kind IN
		('Showing', 'Consultation', 'Meeting', 'Task', 'BookingDeadline')),
	origin                   varchar(32) NOT NULL CHECK (origin IN
		('Manual', 'Appointment', 'CrmBooking')),
	status                   varchar(32) NOT NULL DEFAULT 'Planned' CHECK (status IN
		('Planned', 'InProgress', 'Completed', 'Cancelled')),
	priority                 varchar(32) NOT NULL DEFAULT 'Normal' CHECK (priority IN
		('Normal', 'High', 'Critical')),
	title                    text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
	description              text CHECK (char_length(description) <= 4000),
	location                 text CHECK (char_length(location) <= 500),
	start_at                 timestamptz NOT NULL,
	end_at                   timestamptz,
	time_zone                text NOT NULL,
	client_user_id           uuid,
	lead_id                  uuid,
	deal_id                  uuid,
	booking_id               uuid,
	project_id               uuid,
	property_object_id       uuid,
	appointment_id           uuid,
	reminder_offsets_minutes int[] NOT NULL DEFAULT '{1440,60}',
	cancel_reason            text CHECK (char_length(cancel_reason) <= 500),
	started_at               timestamptz,
	completed_at             timestamptz,
	cancelled_at             timestamptz,
	created_by_user_id       uuid,
	created_at               timestamptz NOT NULL,
	updated_at               timestamptz NOT NULL,
	version                  int NOT NULL DEFAULT 1,
	-- point event, or 0 < EndAt - StartAt <= 24 h
	CONSTRAINT ck_calendar_events_span CHECK (end_at IS NULL OR
		(end_at > start_at AND end_at - start_at <= interval '24 hours')),
	-- 0..5 offsets in 1..40320 minutes (distinctness is checked by the API)
	CONSTRAINT ck_calendar_events_offsets CHECK (
		cardinality(reminder_offsets_minutes) <= 5 AND
		1 <= ALL (reminder_offsets_minutes) AND 40320 >= ALL (reminder_offsets_minutes)),
	-- INV-CAL-1, the kind matrix
	CONSTRAINT ck_calendar_events_kind_origin CHECK (
		(origin = 'CrmBooking' AND kind = 'BookingDeadline' AND end_at IS NULL
			AND booking_id IS NOT NULL AND deal_id IS NOT NULL)
		OR (origin = 'Appointment' AND kind IN ('Showing', 'Consultation')
			AND appointment_id IS NOT NULL AND client_user_id IS NOT NULL
			AND end_at IS NOT NULL)
		OR (origin = 'Manual' AND (kind = 'Task' OR
			(kind IN ('Showing', 'Consultation', 'Meeting') AND end_at IS NOT NULL)))),
	CONSTRAINT ck_calendar_events_status_times CHECK (
		(status <> 'Cancelled' OR cancelled_at IS NOT NULL) AND
		(status <> 'Completed' OR completed_at IS NOT NULL))
);

-- Range queries: events overlapping [from, to) are those with
-- start_at in (from - 24 h, to) (an event lasts <= 24 h), ordered by
-- (start_at, id) for keyset paging.
CREATE INDEX ix_calendar_events_owner_start
	ON calendar.calendar_events (owner_user_id, start_at, id);
CREATE INDEX ix_calendar_events_tenant_start
	ON calendar.calendar_events (tenant_id, start_at, id);
-- consumers look events up by their source
CREATE INDEX ix_calendar_events_deal ON calendar.calendar_events (deal_id)
	WHERE deal_id IS NOT NULL;
CREATE INDEX ix_calendar_events_booking ON calendar.calendar_events (booking_id)
	WHERE booking_id IS NOT NULL;
CREATE INDEX ix_calendar_events_appointment ON calendar.calendar_events (appointment_id)
	WHERE appointment_id IS NOT NULL;

-- EventReminder (seed 000_81f5eef004d8ffe4)
CREATE TABLE calendar.event_reminders (
	id                uuid PRIMARY KEY,
	calendar_event_id uuid NOT NULL
		CONSTRAINT fk_event_reminders_event_id
		REFERENCES calendar.calendar_events (id) ON DELETE CASCADE,
	offset_minutes    int NOT NULL CHECK (offset_minutes > 0),
	due_at            timestamptz NOT NULL,
	status            varchar(32) NOT NULL CHECK (status IN ('Pending', 'Sent', 'Skipped')),
	sent_at           timestamptz,
	created_at        timestamptz NOT NULL,
	updated_at        timestamptz NOT NULL,
	CONSTRAINT ck_event_reminders_sent_at CHECK ((status = 'Sent') = (sent_at IS NOT NULL))
);
-- INV-REM-1
CREATE UNIQUE INDEX ux_event_reminders_pending
	ON calendar.event_reminders (calendar_event_id, offset_minutes)
	WHERE status = 'Pending';
-- the dispatcher's pick: Pending AND due_at < now
CREATE INDEX ix_event_reminders_status_due_at
	ON calendar.event_reminders (status, due_at);
-- the card and the cascades (also serves the FK's ON DELETE CASCADE)
CREATE INDEX ix_event_reminders_event
	ON calendar.event_reminders (calendar_event_id);

-- INV-REM-2 (Sent and Skipped rows are immutable): the trigger
-- tr_event_reminders_terminal_guard, R__functions.sql.

-- UserReplica: display data from pin.identity.users.v1 (filled by the
-- identity consumer of workers.so); the team view joins it.
CREATE TABLE calendar.user_replicas (
	user_id       uuid PRIMARY KEY,
	display_name  text NOT NULL,
	avatar_url    text,
	status        varchar(32) NOT NULL DEFAULT 'Active',
	last_event_at timestamptz,
	created_at    timestamptz NOT NULL,
	updated_at    timestamptz NOT NULL
);

-- Idempotency-Key of writes (api.md): the first successful response per
-- (caller, key) for 24 h; looked up and stored in the write's transaction.
-- status 0 = claimed by a transaction in flight.
CREATE TABLE calendar.idempotency_keys (
	caller        text NOT NULL,
	key           text NOT NULL,
	request_hash  text NOT NULL,
	status        int NOT NULL,
	response_body jsonb,
	location      text,
	created_at    timestamptz NOT NULL,
	PRIMARY KEY (caller, key)
);
CREATE INDEX ix_idempotency_keys_created_at ON calendar.idempotency_keys (created_at);
