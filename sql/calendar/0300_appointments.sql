-- 0300_appointments.sql -- Appointment (domain.md, ADR-0064 p.3-4): an investor's
-- booking of one availability slot, with a snapshot of the slot's time, links to the
-- slot and to the CalendarEvent it created, and reschedule links both ways.
-- Applied once by pin-host --migrate inside a transaction.

CREATE SCHEMA IF NOT EXISTS calendar;

CREATE TABLE calendar.appointments (
	id                              uuid PRIMARY KEY,
	tenant_id                       uuid NOT NULL,          -- the agent's company
	slot_id                         uuid NOT NULL
		CONSTRAINT fk_appointments_slot_id REFERENCES calendar.availability_slots (id),
	-- No FK: housekeeping purges terminal events and appointments (180 days)
	-- independently; the event carries appointment_id back.
	calendar_event_id               uuid NOT NULL,
	agent_user_id                   uuid NOT NULL,
	investor_user_id                uuid NOT NULL,
	kind                            varchar(32) NOT NULL
		CHECK (kind IN ('Showing', 'Consultation')),
	-- snapshot of the slot at booking time
	start_at                        timestamptz NOT NULL,
	end_at                          timestamptz NOT NULL,
	time_zone                       text NOT NULL,
	status                          varchar(32) NOT NULL CHECK (status IN
		('Pending', 'Confirmed', 'Declined', 'Cancelled', 'Expired', 'Completed', 'NoShow')),
	auto_confirmed                  boolean NOT NULL DEFAULT false,
	-- class Internal: never logged, never in notifications
	comment                         text CHECK (char_length(comment) <= 1000),
	project_id                      uuid,
	property_object_id              uuid,
	consultation_request_id         uuid,
	confirm_deadline_at             timestamptz NOT NULL,
	cancelled_by                    varchar(32)
		CHECK (cancelled_by IN ('Investor', 'Agent', 'System')),
	cancel_reason                   text CHECK (char_length(cancel_reason) <= 500),
	outcome                         varchar(32) CHECK (outcome IN ('Completed', 'NoShow')),
	outcome_note                    text CHECK (char_length(outcome_note) <= 1000),
	rescheduled_from_appointment_id uuid
		CONSTRAINT fk_appointments_rescheduled_from
		REFERENCES calendar.appointments (id) ON DELETE SET NULL,
	rescheduled_to_appointment_id   uuid
		CONSTRAINT fk_appointments_rescheduled_to
		REFERENCES calendar.appointments (id) ON DELETE SET NULL,
	decided_at                      timestamptz,
	cancelled_at                    timestamptz,
	completed_at                    timestamptz,
	created_at                      timestamptz NOT NULL,
	updated_at                      timestamptz NOT NULL,
	version                         int NOT NULL DEFAULT 1,
	CONSTRAINT ck_appointments_span CHECK (end_at > start_at),
	-- Outcome is set exactly on Completed / NoShow, and names the status.
	CONSTRAINT ck_appointments_outcome CHECK (
		(status IN ('Completed', 'NoShow')) = (outcome IS NOT NULL)
		AND (outcome IS NULL OR outcome = status)),
	CONSTRAINT ck_appointments_cancelled CHECK (
		(status IN ('Declined', 'Cancelled', 'Expired'))
			= (cancelled_by IS NOT NULL AND cancelled_at IS NOT NULL)),
	CONSTRAINT ck_appointments_completed CHECK (
		(status IN ('Completed', 'NoShow')) = (completed_at IS NOT NULL)),
	CONSTRAINT ck_appointments_not_self CHECK (
		rescheduled_from_appointment_id IS DISTINCT FROM id
		AND rescheduled_to_appointment_id IS DISTINCT FROM id)
);

-- The structural guarantee behind the booking race: never two active
-- appointments on one slot (the conditional slot update decides the winner).
CREATE UNIQUE INDEX ux_appointments_slot_active
	ON calendar.appointments (slot_id)
	WHERE status IN ('Pending', 'Confirmed');
-- A reschedule link is one-to-one in each direction.
CREATE UNIQUE INDEX ux_appointments_rescheduled_from
	ON calendar.appointments (rescheduled_from_appointment_id)
	WHERE rescheduled_from_appointment_id IS NOT NULL;
CREATE UNIQUE INDEX ux_appointments_rescheduled_to
	ON calendar.appointments (rescheduled_to_appointment_id)
	WHERE rescheduled_to_appointment_id IS NOT NULL;

-- Anti-spam: active appointments of an investor, per (agent, kind).
CREATE INDEX ix_appointments_investor_active
	ON calendar.appointments (investor_user_id, agent_user_id, kind, start_at)
	WHERE status IN ('Pending', 'Confirmed');
-- Per-investor booking rate limit: rows created in the last rolling hour.
CREATE INDEX ix_appointments_investor_created
	ON calendar.appointments (investor_user_id, created_at);
-- appointment-timeout job: Pending with ConfirmDeadlineAt <= now.
CREATE INDEX ix_appointments_pending_deadline
	ON calendar.appointments (confirm_deadline_at)
	WHERE status = 'Pending';
-- Listings in (start_at, id) keyset order: agent, investor, agency (tenant).
CREATE INDEX ix_appointments_agent_start
	ON calendar.appointments (agent_user_id, start_at, id);
CREATE INDEX ix_appointments_investor_start
	ON calendar.appointments (investor_user_id, start_at, id);
CREATE INDEX ix_appointments_tenant_start
	ON calendar.appointments (tenant_id, start_at, id);
-- slot -> its appointments (history of a slot)
CREATE INDEX ix_appointments_slot ON calendar.appointments (slot_id);
